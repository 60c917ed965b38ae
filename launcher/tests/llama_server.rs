//! Against a real llama.cpp `llama-server` (when `LLMBENCH_LLAMA_SERVER`, `LLMBENCH_LLAMA_MODEL` and
//! `LLMBENCH_LLAMA_TOKENIZER` point at one, its tiny model and that model's tokenizer; otherwise each test says so
//! and passes): the model a server actually serves, what the run records of the engine, and prompts exactly as long
//! on the server as each tool's own. The tiny model's tokenizer puts a BOS before every prompt, as Llama's do.
//! Counts and names only, never latencies.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use common::*;

/// `llmbench run` of `profile` (a `harness` profile's text) against `llama`, with its tokenizer and `extra` flags.
fn run(
    llama: &LlamaServer,
    dir: &Path,
    harness: &str,
    profile: &str,
    run_id: &str,
    extra: &[&str],
) -> Output {
    let path = write(dir, &format!("{run_id}.yaml"), profile);
    llmbench()
        .args(["run", "--harness", harness, "--profile"])
        .arg(&path)
        .args(["--endpoint", &llama.url, "--tokenizer"])
        .arg(&llama.tokenizer)
        .args(["--run-id", run_id, "--output"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("runs")
}

/// Eight random completions of 64 prompt tokens and 4 output tokens, two at a time.
const VLLM_RANDOM: &str = "dataset-name: random
random-input-len: 64
random-output-len: 4
num-prompts: 8
max-concurrency: 2
ignore-eos: none
";

#[test]
fn llama_server_refuses_a_model_it_does_not_serve_naming_both_and_the_results_name_the_one_that_served()
 {
    let Some(llama) = LlamaServer::start(&["-c", "4096", "-np", "4", "--metrics"]) else {
        return;
    };
    let served = llama.model.clone();
    let out = tempfile::tempdir().expect("tempdir");
    // llama.cpp lists its model under the file's path and answers any model field as that model.
    let refused = run(
        &llama,
        out.path(),
        "vllm-benchmark",
        VLLM_RANDOM,
        "refused",
        &["--model", "tiny"],
    );
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(
        message.contains("does not serve the model `tiny`")
            && message.contains(&format!("lists {served}"))
            && message.contains(&format!("help: pass --model {served}")),
        "{message}"
    );
    assert!(!out.path().join("refused").exists(), "nothing was written");

    // Allowed, the run goes on and its results name the model that answered, not the one asked for.
    let allowed = run(
        &llama,
        out.path(),
        "vllm-benchmark",
        VLLM_RANDOM,
        "allowed",
        &["--model", "tiny", "--allow-model-mismatch"],
    );
    succeeded(&allowed);
    let dir = out.path().join("allowed");
    let meta = json(&dir.join("run.json"));
    assert_eq!(meta["model"], "tiny");
    assert_eq!(meta["preflight"]["server_model"], served.as_str());
    assert_eq!(
        meta["preflight"]["warnings"].as_array().map(Vec::len),
        Some(2)
    );
    let summary = json(&dir.join("summary.json"));
    assert_eq!(summary["engine"]["model"], served.as_str());
    assert_eq!(summary["engine"]["name"], "llama.cpp");
    let printed = stdout(&allowed);
    let first = printed
        .lines()
        .find(|l| l.starts_with("run "))
        .unwrap_or_default();
    assert!(
        first.contains(&format!("model tiny (served: {served})")) && first.contains("· llama.cpp "),
        "{printed}"
    );
}

#[test]
fn llama_server_is_recorded_as_llama_cpp_with_its_build_model_context_and_slots() {
    let Some(llama) = LlamaServer::start(&["-c", "4096", "-np", "4", "--metrics"]) else {
        return;
    };
    let served = llama.model.clone();
    let out = tempfile::tempdir().expect("tempdir");
    let output = run(
        &llama,
        out.path(),
        "vllm-benchmark",
        VLLM_RANDOM,
        "recorded",
        &["--model", &served],
    );
    succeeded(&output);
    let dir = out.path().join("recorded");
    let server = json(&dir.join("run.json"))["server"].clone();
    assert_eq!(server["engine"], "llama.cpp", "{server:#}");
    assert_eq!(server["engine_from"], "GET /props (build_info)");
    let version = server["version"].as_str().expect("a build").to_owned();
    assert!(version.starts_with('b'), "{version}");
    assert_eq!(server["models"][0]["id"], served.as_str());
    assert_eq!(server["models"][0]["owned_by"], "llamacpp");
    // -c 4096 over -np 4 slots: 1024 tokens a request.
    assert_eq!(server["models"][0]["max_model_len"], 1024);
    assert_eq!(server["settings"]["n_ctx"], 1024);
    assert_eq!(server["settings"]["total_slots"], 4);
    // The alias names the model; the settings name the file it was loaded from.
    let gguf = std::env::var("LLMBENCH_LLAMA_MODEL").expect("set with the server");
    assert_eq!(server["settings"]["model_path"], gguf.as_str());
    // Asked of every engine: those llama.cpp lacks answer 404, recorded.
    let statuses: Vec<(String, Value)> = server["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .map(|p| {
            let url = p["url"].as_str().unwrap_or_default();
            (url[llama.url.len()..].to_owned(), p["status"].clone())
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("/v1/models".to_owned(), Value::from(200)),
            ("/version".to_owned(), Value::from(404)),
            ("/props".to_owned(), Value::from(200)),
            ("/get_server_info".to_owned(), Value::from(404)),
            ("/info".to_owned(), Value::from(404)),
        ]
    );
    let summary = json(&dir.join("summary.json"));
    assert_eq!(
        summary["engine"],
        serde_json::json!({"name": "llama.cpp", "model": served, "version": version})
    );
    // The llm-d report's stack: the engine as its tool.
    let report = std::fs::read_dir(&dir)
        .expect("results")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("benchmark_report_v0.2"))
        })
        .expect("an llm-d report");
    let report: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(report).expect("report")).expect("yaml");
    let stack = &report["scenario"]["stack"][0]["standardized"];
    assert_eq!(stack["tool"], "llama.cpp");
    assert_eq!(stack["tool_version"], version.as_str());
    assert_eq!(stack["model"]["name"], served.as_str());
}

/// Each dialect's random or synthetic completions of 64 prompt tokens, and the prompt tokens the server should
/// count for them: 64 where the tool counts the BOS in its length (vLLM, inference-perf, guidellm), 65 where it
/// does not (AIPerf, InferenceMAX).
const DIALECTS: [(&str, &str, u32); 5] = [
    ("vllm-benchmark", VLLM_RANDOM, 64),
    (
        "inferencemax",
        "dataset-name: random\nrandom-input-len: 64\nrandom-output-len: 4\nnum-prompts: 8\nmax-concurrency: 2\n\
         ignore-eos: none\n",
        65,
    ),
    (
        "inference-perf",
        "api:\n  type: completion\n  streaming: true\ndata:\n  type: random\n  input_distribution:\n    min: 64\n    \
         max: 64\n    mean: 64\n    std_dev: 0\n    total_count: 8\n  output_distribution:\n    min: 4\n    max: 4\n    \
         mean: 4\n    std_dev: 0\n    total_count: 8\nload:\n  type: constant\n  stages:\n    - rate: 8\n      \
         duration: 1\nserver:\n  type: vllm\n  base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n  \
         model_name: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n  ignore_eos: true\n",
        64,
    ),
    (
        "guidellm",
        "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
         request_format: /v1/completions\n  data:\n    - kind: synthetic_text\n      prompt_tokens: 64\n      output_tokens: 4\n  profile:\n    kind: concurrent\n    \
         streams: 2\n  constraints:\n    - kind: max_requests\n      count: 8\n",
        64,
    ),
    (
        "aiperf",
        "model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\nurl: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n\
         endpoint-type: completions\nstreaming: none\nconcurrency: 2\nrequest-count: 8\nisl: 64\nosl: 4\n\
         extra-inputs: ignore_eos:true\n",
        65,
    ),
];

#[test]
fn every_dialect_s_prompts_are_as_long_on_llama_server_as_its_tool_s_own_and_recorded_as_the_server_counts()
 {
    let Some(llama) = LlamaServer::start(&["-c", "4096", "-np", "4", "--metrics"]) else {
        return;
    };
    let served = llama.model.clone();
    let out = tempfile::tempdir().expect("tempdir");
    for (harness, profile, on_server) in DIALECTS {
        let output = run(
            &llama,
            out.path(),
            harness,
            profile,
            harness,
            &["--model", &served],
        );
        succeeded(&output);
        let records = common::requests_jsonl(&out.path().join(harness).join("requests.jsonl"))
            .expect("records");
        let counts: Vec<(u64, u64)> = records
            .lines()
            .map(|line| {
                let record: Value = serde_json::from_str(line).expect("a record");
                assert!(record.get("error").is_none(), "{harness}: {record}");
                (
                    record["input_tokens"].as_u64().expect("input tokens"),
                    record["usage"]["prompt_tokens"]
                        .as_u64()
                        .expect("the server's count"),
                )
            })
            .collect();
        assert!(!counts.is_empty(), "{harness}: no request");
        for (recorded, server) in counts {
            assert_eq!(
                (recorded, server),
                (u64::from(on_server), u64::from(on_server)),
                "{harness}: recorded vs the server's prompt_tokens"
            );
        }
    }
}
