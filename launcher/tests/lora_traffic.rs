//! LoRA traffic through the binary: each request names the adapter its tool would choose (vLLM `--lora-modules`
//! with `--lora-assignment round-robin` or `random`, inference-perf `load.lora_traffic_split`), the warm-ups keep
//! the base model, the figures come per adapter (summary.json, inference-perf's `adapter_*` files), and a run whose
//! adapters the server does not list stops before the clock. Orders worked out by hand from the tools' source
//! (see `crates/workload/src/request/lora.rs`).

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use common::*;

/// A streamed completion answer (vLLM's bench streams), whatever was asked.
fn answer(request: &WireRequest) -> String {
    streamed_text(request, "a b", "length", 2)
}

fn records(run: &Path) -> Vec<Value> {
    common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// The measured records' adapters, by request id.
fn adapters(run: &Path) -> Vec<String> {
    let mut measured: Vec<Value> = records(run)
        .into_iter()
        .filter(|r| r["warmup"] != json!(true))
        .collect();
    measured.sort_by_key(|r| r["id"].as_u64());
    measured
        .iter()
        .map(|r| r["adapter"].as_str().expect("an adapter").to_owned())
        .collect()
}

/// `llmbench run` of `harness`'s `profile` against `endpoint` (the embedded simulator when `None`), with the
/// pre-flight, its results in `dir/r`.
fn run(harness: &str, profile: &Path, endpoint: Option<&str>, dir: &Path) -> Output {
    let mut command = llmbench();
    command
        .args(["run", "--harness", harness, "--profile"])
        .arg(profile)
        .args(["--tokenizer", "builtin", "--run-id", "r", "--output"])
        .arg(dir);
    if let Some(url) = endpoint {
        command.args(["--endpoint", url]);
    }
    command.output().expect("runs")
}

/// What a profile llmbench refuses before anything is sent says on stderr.
fn refused(harness: &str, profile: &Path, dir: &Path) -> String {
    let output = run_against(harness, profile, "http://127.0.0.1:9", "builtin", dir, "r");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(!dir.join("r").exists());
    stderr(&output)
}

const VLLM_ROUND_ROBIN: &str = "model: base\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\n\
                                num-prompts: 5\nmax-concurrency: 1\nnum-warmups: 2\nbackend: vllm\n\
                                lora-modules: [sql-lora, chat-lora]\nlora-assignment: round-robin\n";

#[test]
fn vllm_round_robin_sends_each_request_to_the_next_adapter_and_the_warmups_to_the_base_model() {
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "p.yaml", VLLM_ROUND_ROBIN);
    let output = run_against("vllm-benchmark", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    // `benchmark()`: the warm-ups send `test_input` with `model_id`; then input request i names
    // lora_modules[i % 2], one at a time, in order.
    let models: Vec<String> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).expect("json");
            body["model"].as_str().expect("model").to_owned()
        })
        .collect();
    assert_eq!(
        models,
        [
            "base",
            "base",
            "sql-lora",
            "chat-lora",
            "sql-lora",
            "chat-lora",
            "sql-lora"
        ]
    );
    let run = dir.path().join("r");
    assert_eq!(
        adapters(&run),
        ["sql-lora", "chat-lora", "sql-lora", "chat-lora", "sql-lora"]
    );
    // The first measured request is the dataset's first prompt, as in vLLM: the warm-ups' copies of it did not
    // move the list on.
    let first_prompt = |r: &WireRequest| -> Value {
        serde_json::from_slice::<Value>(&r.body).expect("json")["prompt"].clone()
    };
    let seen = seen.lock().expect("lock");
    assert_eq!(first_prompt(&seen[0]), first_prompt(&seen[2]));
    // Figures per adapter, in name order.
    let summary = json(&run.join("summary.json"));
    let per_adapter: Vec<(String, u64)> = summary["adapters"]
        .as_array()
        .expect("adapters")
        .iter()
        .map(|a| {
            (
                a["adapter"].as_str().expect("name").to_owned(),
                a["requests"]["total"].as_u64().expect("total"),
            )
        })
        .collect();
    assert_eq!(
        per_adapter,
        [("chat-lora".to_owned(), 2), ("sql-lora".to_owned(), 3)]
    );
}

#[test]
fn vllm_random_assignment_is_python_s_random_choice_seeded_with_the_run_s_seed() {
    let (url, _seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // `random.seed(0)` in main_async, the random dataset draws from its own generator, then
    // [random.choice(["a", "b", "c"]) for _ in range(8)]: b b a b c b b b (CPython 3).
    let profile = write(
        dir.path(),
        "p.yaml",
        "model: base\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\nnum-prompts: 8\n\
         max-concurrency: 1\nbackend: vllm\nseed: 0\nlora-modules: a b c\n",
    );
    let output = run_against("vllm-benchmark", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    assert_eq!(adapters(&dir.path().join("r")).concat(), "bbabcbbb");
}

#[test]
fn vllm_random_assignment_with_a_dataset_that_draws_from_python_s_generator_is_refused_by_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(dir.path(), "sharegpt.json", "[]");
    let profile = write(
        dir.path(),
        "p.yaml",
        &format!(
            "model: base\ndataset-name: sharegpt\ndataset-path: {}\nnum-prompts: 4\nlora-modules: [a, b]\n",
            data.display()
        ),
    );
    let err = refused("vllm-benchmark", &profile, dir.path());
    assert!(err.contains("p.yaml:5: `lora-modules`"), "{err}");
    assert!(err.contains("lora-assignment: round-robin"), "{err}");
}

fn inference_perf(splits: &str, url: &str) -> String {
    format!(
        "load:\n  type: constant\n  stages: [{{rate: 200, duration: 1}}]\n  base_seed: 7\n  lora_traffic_split:\n{splits}\
         api:\n  type: completion\n  streaming: false\nserver:\n  type: vllm\n  model_name: base\n  base_url: {url}\n  \
         ignore_eos: true\ndata:\n  type: random\n  input_distribution: {{min: 4, max: 4, mean: 4, std_dev: 0, total_count: 200}}\n  \
         output_distribution: {{min: 2, max: 2, mean: 2, std_dev: 0, total_count: 200}}\n\
         report:\n  request_lifecycle:\n    summary: true\n    per_stage: true\n    per_request: true\n"
    )
}

#[test]
fn inference_perf_splits_traffic_by_weight_and_writes_a_report_per_adapter() {
    let sim = SimProcess::start(&["--model", "base", "--lora-modules", "lo", "hi"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        &inference_perf(
            "  - {name: lo, split: 0.25}\n  - {name: hi, split: 0.75}\n",
            &sim.url,
        ),
    );
    let output = run("inference-perf", &profile, None, dir.path());
    succeeded(&output);
    let run = dir.path().join("r");
    let sent = adapters(&run);
    let lo = sent.iter().filter(|a| *a == "lo").count();
    let hi = sent.iter().filter(|a| *a == "hi").count();
    assert_eq!(lo + hi, 200);
    // 200 draws at p = 0.25: 50 expected, standard deviation 6.1; the seeded draw is fixed, so this cannot flake.
    assert!((30..=70).contains(&lo), "{lo} of 200 went to `lo`");
    // `generate_report`: adapter_{name}_lifecycle_metrics.json per adapter (per_adapter defaults to true), each
    // summarising that adapter's requests; per-request entries name their adapter.
    for (name, count) in [("lo", lo), ("hi", hi)] {
        let file = json(&run.join(format!("adapter_{name}_lifecycle_metrics.json")));
        assert_eq!(file["load_summary"]["count"], json!(count), "{name}");
        assert_eq!(file["successes"]["count"], json!(count), "{name}");
    }
    assert!(
        !run.join("adapter_lo_stage_0_lifecycle_metrics.json")
            .exists()
    );
    let per_request = json(&run.join("per_request_lifecycle_metrics.json"));
    let named = per_request
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["info"]["lora_adapter"] == json!("lo"))
        .count();
    assert_eq!(named, lo);
}

#[test]
fn inference_perf_splits_that_do_not_add_up_to_exactly_one_are_refused_as_upstream_refuses_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 0.7 + 0.2 + 0.1 is 0.9999999999999999 in floating point: LoadConfig's `total != 1.0` refuses it.
    let profile = write(
        dir.path(),
        "p.yaml",
        &inference_perf(
            "  - {name: a, split: 0.7}\n  - {name: b, split: 0.2}\n  - {name: c, split: 0.1}\n",
            "http://127.0.0.1:9",
        ),
    );
    let err = refused("inference-perf", &profile, dir.path());
    assert!(err.contains("0.9999999999999999"), "{err}");
    assert!(err.contains("lora_traffic_split"), "{err}");
}

#[test]
fn adapters_the_server_does_not_list_stop_the_run_before_the_clock() {
    let sim = SimProcess::start(&["--model", "base", "--lora-modules", "sql-lora"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "p.yaml", VLLM_ROUND_ROBIN);
    let output = run("vllm-benchmark", &profile, Some(&sim.url), dir.path());
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("does not serve the LoRA adapter `chat-lora`"),
        "{err}"
    );
    assert!(err.contains("lists base, sql-lora"), "{err}");
    assert!(!dir.path().join("r/requests.bin").exists());
}

#[test]
fn the_embedded_simulator_serves_the_adapters_the_profile_sends_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "p.yaml", VLLM_ROUND_ROBIN);
    let output = run("vllm-benchmark", &profile, None, dir.path());
    succeeded(&output);
    let summary = json(&dir.path().join("r/summary.json"));
    assert_eq!(summary["requests"]["succeeded"], json!(5));
    assert_eq!(summary["adapters"].as_array().map(Vec::len), Some(2));
}

/// AIPerf's several `--model-names`, run on the embedded simulator (which serves them all): each dataset entry's
/// model chosen as its composer chooses it, entries sent in order (`dataset-sampling-strategy: sequential`).
fn aiperf_models(strategy: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        &format!(
            "model: a, b\nmodel-selection-strategy: {strategy}\nendpoint-type: completions\nisl: 8\nosl: 2\n\
             random-seed: 7\nnum-dataset-entries: 10\nrequest-count: 10\nconcurrency: 1\n\
             dataset-sampling-strategy: sequential\n"
        ),
    );
    let output = run("aiperf", &profile, None, dir.path());
    succeeded(&output);
    adapters(&dir.path().join("r"))
}

#[test]
fn aiperf_round_robin_gives_entry_n_the_model_n_mod_len() {
    assert_eq!(aiperf_models("round_robin").concat(), "ababababab");
}

#[test]
fn aiperf_random_model_selection_is_choice_from_the_derived_generator() {
    // rng.derive("composer.turn.model_selection") of --random-seed 7: Random(int.from_bytes(sha256(
    // b"7:composer.turn.model_selection")[:8], "big")), then choice(["a", "b"]) per entry: a a b a b b b b b b.
    assert_eq!(aiperf_models("random").concat(), "aababbbbbb");
}

/// AIPerf's multi-turn conversations with several models: `_finalize_turn` picks each turn's model as
/// `_create_turn` builds it, every turn of the first conversation before the next's, so round robin over a, b, c
/// gives conversation 0's turns a, b and conversation 1's c, a.
#[test]
fn aiperf_conversation_turns_take_their_models_in_the_composer_s_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        "model: a, b, c\nendpoint-type: chat\nisl: 8\nosl: 2\nconversation-num: 2\nconversation-turn-mean: 2\n\
         request-count: 4\nconcurrency: 1\ndataset-sampling-strategy: sequential\n",
    );
    let output = run("aiperf", &profile, None, dir.path());
    succeeded(&output);
    let mut sent: Vec<(u64, u64, String)> = records(&dir.path().join("r"))
        .iter()
        .map(|r| {
            (
                r["conversation"]["id"].as_u64().expect("conversation"),
                r["conversation"]["turn"].as_u64().expect("turn"),
                r["adapter"].as_str().expect("model").to_owned(),
            )
        })
        .collect();
    sent.sort();
    assert_eq!(
        sent,
        [
            (0, 0, "a".to_owned()),
            (0, 1, "b".to_owned()),
            (1, 0, "c".to_owned()),
            (1, 1, "a".to_owned())
        ]
    );
}
