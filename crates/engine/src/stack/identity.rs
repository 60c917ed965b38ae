//! What the server under test says it is — its engine, version, the models it serves and a few of its settings —
//! asked once before the clock of every run, whoever started the server. Each engine answers a different
//! question, so all of them are asked at once and every answer that parses is read:
//!
//! | Engine | Asked | What it tells | Where the answer is made |
//! |---|---|---|---|
//! | vLLM | `GET /v1/models`, `GET /version` | `owned_by: "vllm"`, `max_model_len`, `root`; `{"version"}` | `vllm/entrypoints/openai/protocol.py` `ModelCard`, `api_server.py` `show_version` |
//! | llama.cpp | `GET /props` | `build_info` (its version), `model_path`, `default_generation_settings.n_ctx`, `total_slots`, `chat_template` | `tools/server/server.cpp` (recorded from a real `llama-server`) |
//! | SGLang | `GET /get_server_info` | its server args, the scheduler's token budget, `version` | `python/sglang/srt/entrypoints/http_server.py` |
//! | TGI | `GET /info` | `model_id`, `model_sha`, token limits, `router`, `version` | `router/src/server.rs` `Info` |
//! | `llmbench sim` | `GET /version` | a version ending in [`llmbench_sim::sim::VERSION_SUFFIX`] | `llmbench_sim::sim` |
//!
//! A server that is none of these (a gateway, a proxy) still lists its models; its engine is left unknown rather
//! than guessed. Whatever an engine answers is kept bounded ([`MAX_MODELS`] models, a short list of settings per
//! engine, [`MAX_TEXT_CHARS`] characters a text) and never a secret: SGLang's answer carries its `api_key`, so only
//! settings named here are read. Nothing is fatal: a question a server does not answer is recorded with why.

use std::collections::BTreeMap;

use llmbench_core::summary::v1::EngineInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{PROBE_TIMEOUT, Probe, StackMeta, client, join_url, probe};

/// The engines as the server-metrics catalogue names them, so the two records of a run can be compared.
pub const VLLM: &str = "vLLM";
pub const LLAMA_CPP: &str = "llama.cpp";
pub const SGLANG: &str = "SGLang";
pub const TGI: &str = "TGI";
/// llmbench's embedded simulator (`llmbench sim`).
pub(crate) const LLMBENCH_SIM: &str = "llmbench sim";

/// The most models of a list kept: a proxy in front of many models lists them all.
pub(crate) const MAX_MODELS: usize = 16;
/// The longest text kept from an answer (a chat template, a path), in characters.
pub(crate) const MAX_TEXT_CHARS: usize = 256;

/// SGLang's settings worth a run's record, by their `ServerArgs` names (and the scheduler's token budget): what
/// decides its throughput and latency. Its answer has ~200 more, and its API key, which are never read.
const SGLANG_SETTINGS: [&str; 24] = [
    "model_path",
    "tokenizer_path",
    "served_model_name",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "context_length",
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "max_running_requests",
    "max_total_tokens",
    "max_prefill_tokens",
    "chunked_prefill_size",
    "mem_fraction_static",
    "schedule_policy",
    "page_size",
    "attention_backend",
    "disable_radix_cache",
    "enable_dp_attention",
    "speculative_algorithm",
    "disaggregation_mode",
    "max_total_num_tokens",
];

/// TGI's `Info` fields worth a run's record.
const TGI_SETTINGS: [&str; 10] = [
    "model_id",
    "model_sha",
    "model_dtype",
    "model_device_type",
    "max_concurrent_requests",
    "max_input_tokens",
    "max_total_tokens",
    "max_batch_total_tokens",
    "sha",
    "docker_label",
];

/// run.json's `server`: what the server under test said it is before the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerIdentity {
    /// The engine ([`VLLM`], [`LLAMA_CPP`], [`SGLANG`], [`TGI`], [`LLMBENCH_SIM`]); absent when no answer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Which answer said so, e.g. `GET /props (build_info)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_from: Option<String>,
    /// The engine's version: llama.cpp's build, SGLang's and TGI's `version`, else `GET /version`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The models `GET /v1/models` listed, the first [`MAX_MODELS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ServedModel>,
    /// How many more it listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub models_omitted: usize,
    /// The engine's own key settings, as it reported them (context size, slots, parallelism, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, Value>,
    /// Each question asked: its URL, HTTP status, latency and why it failed; the answers themselves are not kept.
    pub probes: Vec<Probe>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One model a server lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedModel {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owned_by: Option<String>,
    /// The longest sequence a request may use: `max_model_len` (vLLM, SGLang), else llama.cpp's `meta.n_ctx`
    /// (its context per slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u64>,
    /// What the served name stands for (vLLM: the model path; a LoRA adapter's `parent` is its base model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// The questions, in the order of [`Answers`]' fields.
const PATHS: [&str; 5] = [
    "/v1/models",
    "/version",
    "/props",
    "/get_server_info",
    "/info",
];

/// Every question's answer, raw.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    /// `GET /v1/models`.
    pub models: Probe,
    /// `GET /version` (vLLM, the simulator).
    pub version: Probe,
    /// `GET /props` (llama.cpp).
    pub props: Probe,
    /// `GET /get_server_info` (SGLang).
    pub server_info: Probe,
    /// `GET /info` (TGI).
    pub info: Probe,
}

impl Answers {
    fn all(&self) -> [&Probe; 5] {
        [
            &self.models,
            &self.version,
            &self.props,
            &self.server_info,
            &self.info,
        ]
    }
}

/// Asks the server at `base` every question at once, each bounded by [`PROBE_TIMEOUT`], with the run's
/// credentials and headers.
pub async fn ask(base: &str, api_key: Option<&str>, headers: &[(String, String)]) -> Answers {
    let url = |path: &str| join_url(base, path);
    match client(PROBE_TIMEOUT, api_key, headers) {
        Ok(client) => {
            let urls = PATHS.map(url);
            let (models, version, props, server_info, info) = tokio::join!(
                probe(&client, &urls[0]),
                probe(&client, &urls[1]),
                probe(&client, &urls[2]),
                probe(&client, &urls[3]),
                probe(&client, &urls[4]),
            );
            Answers {
                models,
                version,
                props,
                server_info,
                info,
            }
        }
        Err(e) => {
            let failed = |path: &str| Probe {
                url: url(path),
                status: None,
                body: None,
                error: Some(format!("cannot build the HTTP client: {e}")),
                latency_ms: 0.0,
            };
            let [models, version, props, server_info, info] = PATHS.map(failed);
            Answers {
                models,
                version,
                props,
                server_info,
                info,
            }
        }
    }
}

/// What the answers say the server is.
pub fn identify(answers: &Answers) -> ServerIdentity {
    let (models, models_omitted) = served_models(answered(&answers.models));
    let version_answer = answered(&answers.version).and_then(|b| text(b, "version"));
    let props = answered(&answers.props).filter(|b| text(b, "build_info").is_some());
    let server_info = answered(&answers.server_info)
        .filter(|b| text(b, "version").is_some() && b.get("model_path").is_some());
    let info = answered(&answers.info).filter(|b| {
        text(b, "model_id").is_some()
            && (text(b, "router").as_deref() == Some("text-generation-router")
                || text(b, "version").is_some())
    });
    // The most specific answer names the engine: its own endpoint, else its model list's owner.
    let (engine, from, version, settings) = if version_answer
        .as_deref()
        .is_some_and(|v| v.ends_with(llmbench_sim::sim::VERSION_SUFFIX))
    {
        (
            Some(LLMBENCH_SIM),
            "GET /version".to_owned(),
            None,
            BTreeMap::new(),
        )
    } else if let Some(props) = props {
        (
            Some(LLAMA_CPP),
            "GET /props (build_info)".to_owned(),
            text(props, "build_info"),
            llama_cpp_settings(props),
        )
    } else if let Some(server_info) = server_info {
        (
            Some(SGLANG),
            "GET /get_server_info".to_owned(),
            text(server_info, "version"),
            picked(server_info, &SGLANG_SETTINGS),
        )
    } else if let Some(info) = info {
        (
            Some(TGI),
            "GET /info".to_owned(),
            text(info, "version"),
            picked(info, &TGI_SETTINGS),
        )
    } else {
        // Each engine's own default owner; a gateway passes it through, and any other owner names no engine.
        let owner = models.first().and_then(|m| m.owned_by.as_deref());
        let engine = match owner {
            Some("vllm") => Some(VLLM),
            Some("sglang") => Some(SGLANG),
            Some("llamacpp") => Some(LLAMA_CPP),
            _ => None,
        };
        (
            engine,
            format!("GET /v1/models (owned_by: {})", owner.unwrap_or_default()),
            None,
            BTreeMap::new(),
        )
    };
    ServerIdentity {
        engine: engine.map(str::to_owned),
        engine_from: engine.map(|_| from),
        version: version.or(version_answer),
        models,
        models_omitted,
        settings,
        probes: answers
            .all()
            .into_iter()
            .map(|p| Probe {
                body: None,
                ..p.clone()
            })
            .collect(),
    }
}

impl ServerIdentity {
    /// The listed model the run's requests name, else the first listed: what serves a run when the test request
    /// did not say.
    pub fn model_for(&self, asked: &str) -> Option<&ServedModel> {
        self.models
            .iter()
            .find(|m| m.id == asked)
            .or_else(|| self.models.first())
    }
}

/// The stack under test in brief, for the summary and a BenchmarkRun's status: what the server said it is,
/// `served_model` (the model that answered the run), and how the stack was started when the launcher was told.
/// None when the run knows neither.
pub fn engine_in_brief(
    server: Option<&ServerIdentity>,
    stack: Option<&StackMeta>,
    served_model: Option<String>,
) -> Option<EngineInfo> {
    if server.is_none() && stack.is_none() {
        return None;
    }
    Some(EngineInfo {
        name: server.and_then(|s| s.engine.clone()),
        image: stack.and_then(|s| s.image.clone()),
        command: stack
            .map(|s| s.command.iter().chain(&s.args).cloned().collect())
            .unwrap_or_default(),
        model: served_model.or_else(|| stack.and_then(StackMeta::model)),
        version: server
            .and_then(|s| s.version.clone())
            .or_else(|| stack.and_then(|s| s.version.clone())),
    })
}

/// Where the engine the server named and the engines its scraped metrics show disagree: a metrics endpoint of
/// another server than the one measured, or a server that passes for another. One line per such target.
pub fn metrics_disagree<'a>(
    server: &ServerIdentity,
    targets: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<String> {
    let Some(engine) = server.engine.as_deref().filter(|&e| e != LLMBENCH_SIM) else {
        return Vec::new();
    };
    targets
        .into_iter()
        .filter_map(|(url, metrics_engine)| {
            // A federated page names several engines (`vLLM + llm-d EPP`); one of them is enough.
            let metrics_engine = metrics_engine?;
            let agrees = metrics_engine.split(" + ").any(|e| e == engine);
            (!agrees).then(|| {
                format!(
                    "the server answers as {engine} ({}), but the metrics at {url} are {metrics_engine}'s: check \
                     that --metrics-endpoint points at the server under test",
                    server.engine_from.as_deref().unwrap_or("its answers")
                )
            })
        })
        .collect()
}

/// The JSON object a probe got, when it succeeded.
fn answered(probe: &Probe) -> Option<&Value> {
    if probe.error.is_some() {
        return None;
    }
    probe.body.as_ref().filter(|b| b.is_object())
}

/// A string field, bounded.
fn text(body: &Value, key: &str) -> Option<String> {
    body.get(key)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(bounded)
}

fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A setting's value as recorded: a number, a boolean or a bounded text; nothing else (lists, objects, null).
fn scalar(value: &Value) -> Option<Value> {
    match value {
        Value::Bool(_) | Value::Number(_) => Some(value.clone()),
        Value::String(s) if !s.is_empty() => Some(Value::String(bounded(s))),
        _ => None,
    }
}

/// `keys` of `body` that hold a scalar.
fn picked(body: &Value, keys: &[&str]) -> BTreeMap<String, Value> {
    keys.iter()
        .filter_map(|&key| Some((key.to_owned(), scalar(body.get(key)?)?)))
        .collect()
}

/// llama.cpp's `/props`: the context per slot, the slots, the model file and its type, the chat template.
fn llama_cpp_settings(props: &Value) -> BTreeMap<String, Value> {
    let mut settings = picked(
        props,
        &[
            "total_slots",
            "model_path",
            "model_alias",
            "model_ftype",
            "chat_template",
        ],
    );
    if let Some(n_ctx) = props
        .pointer("/default_generation_settings/n_ctx")
        .and_then(scalar)
    {
        settings.insert("n_ctx".to_owned(), n_ctx);
    }
    settings
}

/// OpenAI's model list, `{"data": [{"id": …}, …]}`, the first [`MAX_MODELS`], and how many more it had.
fn served_models(body: Option<&Value>) -> (Vec<ServedModel>, usize) {
    let Some(list) = body.and_then(|b| b.get("data")).and_then(Value::as_array) else {
        return (Vec::new(), 0);
    };
    let models: Vec<ServedModel> = list
        .iter()
        .filter_map(|card| {
            Some(ServedModel {
                id: text(card, "id")?,
                owned_by: text(card, "owned_by"),
                max_model_len: card
                    .get("max_model_len")
                    .and_then(Value::as_u64)
                    .or_else(|| card.pointer("/meta/n_ctx").and_then(Value::as_u64)),
                root: text(card, "root"),
                parent: text(card, "parent"),
            })
        })
        .collect();
    let omitted = models.len().saturating_sub(MAX_MODELS);
    (models.into_iter().take(MAX_MODELS).collect(), omitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/../../launcher/tests/fixtures/server_identity/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("json")
    }

    fn answer(path: &str, body: Value) -> Probe {
        Probe {
            url: format!("http://s{path}"),
            status: Some(200),
            body: Some(body),
            error: None,
            latency_ms: 1.0,
        }
    }

    fn not_found(path: &str) -> Probe {
        Probe {
            url: format!("http://s{path}"),
            status: Some(404),
            body: Some(serde_json::json!({"detail": "Not Found"})),
            error: Some("HTTP 404".to_owned()),
            latency_ms: 1.0,
        }
    }

    /// Every question unanswered (404) but those given.
    fn answers(given: &[(&str, Value)]) -> Answers {
        let get = |path: &str| {
            given
                .iter()
                .find(|(p, _)| *p == path)
                .map_or_else(|| not_found(path), |(p, body)| answer(p, body.clone()))
        };
        Answers {
            models: get("/v1/models"),
            version: get("/version"),
            props: get("/props"),
            server_info: get("/get_server_info"),
            info: get("/info"),
        }
    }

    #[test]
    fn llama_cpp_is_told_by_its_props_with_its_build_slots_and_context_per_slot() {
        let identity = identify(&answers(&[
            ("/v1/models", fixture("llamacpp_models.json")),
            ("/props", fixture("llamacpp_props.json")),
        ]));
        assert_eq!(identity.engine.as_deref(), Some(LLAMA_CPP));
        assert_eq!(
            identity.engine_from.as_deref(),
            Some("GET /props (build_info)")
        );
        assert_eq!(identity.version.as_deref(), Some("b0-unknown"));
        assert_eq!(
            identity.models,
            [ServedModel {
                id: "/models/tiny.gguf".to_owned(),
                owned_by: Some("llamacpp".to_owned()),
                max_model_len: Some(1024),
                root: None,
                parent: None,
            }]
        );
        assert_eq!(identity.settings["n_ctx"], 1024);
        assert_eq!(identity.settings["total_slots"], 4);
        assert_eq!(identity.settings["model_path"], "/models/tiny.gguf");
        assert!(
            identity.settings["chat_template"]
                .as_str()
                .is_some_and(|t| t.starts_with("{% for message in messages %}")),
            "{:?}",
            identity.settings
        );
        // The probes are all recorded, without their answers.
        assert_eq!(identity.probes.len(), 5);
        assert!(identity.probes.iter().all(|p| p.body.is_none()));
        assert_eq!(identity.probes[1].error.as_deref(), Some("HTTP 404"));
    }

    #[test]
    fn vllm_is_told_by_its_model_list_and_its_version_by_get_version() {
        let identity = identify(&answers(&[
            ("/v1/models", fixture("vllm_models.json")),
            ("/version", fixture("vllm_version.json")),
        ]));
        assert_eq!(identity.engine.as_deref(), Some(VLLM));
        assert_eq!(
            identity.engine_from.as_deref(),
            Some("GET /v1/models (owned_by: vllm)")
        );
        assert_eq!(identity.version.as_deref(), Some("0.11.0"));
        assert_eq!(identity.models.len(), 2);
        assert_eq!(identity.models[0].max_model_len, Some(4096));
        assert_eq!(
            identity.models[0].root.as_deref(),
            Some("/models/Qwen3-0.6B")
        );
        assert_eq!(
            identity.models[1].parent.as_deref(),
            Some("Qwen/Qwen3-0.6B")
        );
        assert!(identity.settings.is_empty());
        // The model serving a run: the one it names, else the first listed.
        assert_eq!(
            identity.model_for("sql-lora").map(|m| m.id.as_str()),
            Some("sql-lora")
        );
        assert_eq!(
            identity.model_for("other").map(|m| m.id.as_str()),
            Some("Qwen/Qwen3-0.6B")
        );
    }

    #[test]
    fn sglang_is_told_by_its_server_info_and_its_api_key_is_never_recorded() {
        let identity = identify(&answers(&[
            ("/v1/models", fixture("sglang_models.json")),
            ("/get_server_info", fixture("sglang_get_server_info.json")),
        ]));
        assert_eq!(identity.engine.as_deref(), Some(SGLANG));
        assert_eq!(identity.version.as_deref(), Some("0.5.4.post1"));
        assert_eq!(identity.models[0].max_model_len, Some(131072));
        assert_eq!(identity.settings["tp_size"], 2);
        assert_eq!(identity.settings["chunked_prefill_size"], 8192);
        assert_eq!(identity.settings["max_total_num_tokens"], 467321);
        assert_eq!(identity.settings["attention_backend"], "flashinfer");
        // Null settings (left to SGLang's defaults) are not recorded as values.
        assert!(!identity.settings.contains_key("context_length"));
        let written = serde_json::to_string(&identity).expect("serializes");
        assert!(
            !written.contains("api_key") && !written.contains("sk-do-not-record"),
            "{written}"
        );
        // Without /get_server_info, its model list's owner still names it.
        let identity = identify(&answers(&[("/v1/models", fixture("sglang_models.json"))]));
        assert_eq!(identity.engine.as_deref(), Some(SGLANG));
        assert_eq!(identity.version, None);
    }

    #[test]
    fn tgi_is_told_by_its_info() {
        let identity = identify(&answers(&[
            ("/v1/models", fixture("tgi_models.json")),
            ("/info", fixture("tgi_info.json")),
        ]));
        assert_eq!(identity.engine.as_deref(), Some(TGI));
        assert_eq!(identity.version.as_deref(), Some("3.2.1"));
        assert_eq!(identity.settings["max_input_tokens"], 32767);
        assert_eq!(
            identity.settings["model_sha"],
            "4847e87e5975a573a2a190399ca62cd266c899ad"
        );
        assert_eq!(
            identity.models[0].id,
            "mistralai/Ministral-8B-Instruct-2410"
        );
    }

    #[test]
    fn the_simulator_is_never_passed_off_as_vllm_and_an_unknown_server_is_left_unknown() {
        let sim_version = format!("0.1.0{}", llmbench_sim::sim::VERSION_SUFFIX);
        let identity = identify(&answers(&[
            ("/v1/models", fixture("vllm_models.json")),
            ("/version", serde_json::json!({"version": sim_version})),
        ]));
        assert_eq!(identity.engine.as_deref(), Some(LLMBENCH_SIM));
        assert_eq!(identity.version.as_deref(), Some(sim_version.as_str()));
        // A gateway of its own kind: its models are listed, its engine not guessed; a /version is still kept.
        let identity = identify(&answers(&[
            (
                "/v1/models",
                serde_json::json!({"data": [{"id": "m", "owned_by": "acme-gateway"}]}),
            ),
            ("/version", serde_json::json!({"version": "2.3"})),
        ]));
        assert_eq!((identity.engine, identity.engine_from), (None, None));
        assert_eq!(identity.version.as_deref(), Some("2.3"));
        assert_eq!(identity.models[0].id, "m");
        // Nothing answered at all.
        let identity = identify(&answers(&[]));
        assert_eq!(identity.engine, None);
        assert!(identity.models.is_empty());
        assert_eq!(identity.probes.len(), 5);
    }

    #[test]
    fn answers_are_kept_bounded() {
        let many: Vec<Value> = (0..40)
            .map(|i| serde_json::json!({"id": format!("model-{i}"), "owned_by": "vllm"}))
            .collect();
        let mut props = fixture("llamacpp_props.json");
        props["chat_template"] = Value::String("x".repeat(10_000));
        let identity = identify(&answers(&[
            ("/v1/models", serde_json::json!({ "data": many })),
            ("/props", props),
        ]));
        assert_eq!(identity.models.len(), MAX_MODELS);
        assert_eq!(identity.models_omitted, 40 - MAX_MODELS);
        let template = identity.settings["chat_template"].as_str().expect("text");
        assert_eq!(
            template.chars().count(),
            MAX_TEXT_CHARS + 1,
            "cut, with an ellipsis"
        );
    }

    #[test]
    fn a_metrics_endpoint_of_another_engine_is_named() {
        let identity = identify(&answers(&[
            ("/v1/models", fixture("llamacpp_models.json")),
            ("/props", fixture("llamacpp_props.json")),
        ]));
        let lines = metrics_disagree(
            &identity,
            [
                ("http://a/metrics", Some("llama.cpp")),
                ("http://b/metrics", Some("vLLM + llm-d EPP")),
                ("http://c/metrics", None),
            ],
        );
        assert_eq!(
            lines,
            [
                "the server answers as llama.cpp (GET /props (build_info)), but the metrics at http://b/metrics are \
              vLLM + llm-d EPP's: check that --metrics-endpoint points at the server under test"
            ]
        );
        // A federated page that includes the engine agrees; an unknown server disagrees with nothing.
        let vllm = identify(&answers(&[("/v1/models", fixture("vllm_models.json"))]));
        assert!(
            metrics_disagree(&vllm, [("http://b/metrics", Some("vLLM + llm-d EPP"))]).is_empty()
        );
        let unknown = identify(&answers(&[]));
        assert!(metrics_disagree(&unknown, [("http://b/metrics", Some("vLLM"))]).is_empty());
    }

    #[test]
    fn the_engine_in_brief_joins_the_server_s_word_the_served_model_and_the_stack_s_command_line() {
        let identity = identify(&answers(&[
            ("/v1/models", fixture("llamacpp_models.json")),
            ("/props", fixture("llamacpp_props.json")),
        ]));
        assert_eq!(engine_in_brief(None, None, None), None);
        let brief = engine_in_brief(Some(&identity), None, Some("/models/tiny.gguf".to_owned()))
            .expect("known");
        assert_eq!(
            brief,
            EngineInfo {
                name: Some(LLAMA_CPP.to_owned()),
                image: None,
                command: Vec::new(),
                model: Some("/models/tiny.gguf".to_owned()),
                version: Some("b0-unknown".to_owned()),
            }
        );
    }
}
