//! The common load flags through the binary, against the embedded simulator: each flag in each dialect changes
//! what is sent (records counted, rates and concurrency from run.json, token counts from the records), the
//! profile.yaml in the results shows the values used, and a flag a dialect cannot express is refused before
//! anything runs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use common::*;

/// A finished run of the binary and its results directory.
struct Ran {
    _tmp: tempfile::TempDir,
    output: Output,
    dir: PathBuf,
}

impl Ran {
    fn records(&self) -> Vec<Value> {
        common::requests_jsonl(&self.dir.join("requests.jsonl"))
            .expect("requests.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).expect("a record"))
            .collect()
    }

    fn meta(&self) -> Value {
        json(&self.dir.join("run.json"))
    }

    fn profile(&self) -> String {
        std::fs::read_to_string(self.dir.join("profile.yaml")).expect("profile.yaml")
    }

    fn stage(&self, i: usize) -> Value {
        self.meta()["stages"][i].clone()
    }
}

/// `llmbench run --harness HARNESS --profile PROFILE FLAGS…` on the embedded simulator (fast), to its end, with
/// the info log (where the flags' edits are told).
fn run(harness: &str, profile: impl AsRef<std::ffi::OsStr>, flags: &[&str]) -> Ran {
    let tmp = tempfile::tempdir().expect("tmp");
    let output = llmbench()
        .env("RUST_LOG", "info")
        .args(["run", "--harness", harness, "--profile"])
        .arg(profile)
        .args(["--run-id", "r", "--output"])
        .arg(tmp.path())
        .args([
            "--sim-ttft",
            "5ms",
            "--sim-itl",
            "1ms",
            "--no-server-metrics",
        ])
        .args(flags)
        .output()
        .expect("runs");
    let dir = tmp.path().join("r");
    Ran {
        _tmp: tmp,
        output,
        dir,
    }
}

/// Runs and expects a refusal: exit status 1, the message on stderr, and no results directory.
fn refused(harness: &str, profile: &str, flags: &[&str]) -> String {
    let ran = run(harness, profile, flags);
    assert_eq!(
        ran.output.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        stdout(&ran.output),
        stderr(&ran.output)
    );
    assert!(!ran.dir.exists(), "a refused run writes no results");
    stderr(&ran.output)
}

/// Every record's prompt length and requested answer length.
fn lengths(records: &[Value]) -> Vec<(u64, u64)> {
    records
        .iter()
        .map(|r| {
            (
                r["input_tokens"].as_u64().expect("input_tokens"),
                r["max_tokens"].as_u64().expect("max_tokens"),
            )
        })
        .collect()
}

#[test]
fn inference_perf_rate_duration_and_lengths_reach_the_requests_and_profile_yaml() {
    let ran = run(
        "inference-perf",
        "sanity_random",
        &[
            "--rate",
            "5",
            "--duration",
            "1s",
            "--input-tokens",
            "24",
            "--output-tokens",
            "3",
        ],
    );
    succeeded(&ran.output);
    let records = ran.records();
    // inference-perf sends int(rate × duration) requests of a constant stage.
    assert_eq!(records.len(), 5);
    assert!(
        lengths(&records).iter().all(|l| *l == (24, 3)),
        "{:?}",
        lengths(&records)
    );
    assert!(records.iter().all(|r| r["usage"]["completion_tokens"] == 3));
    assert_eq!(ran.stage(0)["rate"], 5.0);
    assert_eq!(ran.meta()["stages"].as_array().map(Vec::len), Some(1));
    let profile = ran.profile();
    assert!(
        profile.contains("  - rate: 5\n    duration: 1\n"),
        "{profile}"
    );
    assert!(
        profile.contains("input_distribution:\n    min: 24\n    max: 24\n"),
        "{profile}"
    );
    let flags = &ran.meta()["load_flags"];
    assert_eq!(flags["rate"], 5.0);
    assert_eq!(flags["duration_s"], 1.0);
    assert_eq!(flags["edits"][0]["key"], "load.stages");
    let log = stderr(&ran.output);
    assert!(
        log.contains("load flags: --rate 5 → load.stages = [{\"rate\":5,\"duration\":1}] (was [{\"rate\":1,\"duration\":30}])"),
        "{log}"
    );
}

#[test]
fn inference_perf_concurrency_with_requests_runs_one_closed_loop_stage() {
    let ran = run(
        "inference-perf",
        "sanity_random",
        &[
            "--concurrency",
            "2",
            "--requests",
            "6",
            "--output-tokens",
            "2",
        ],
    );
    succeeded(&ran.output);
    assert_eq!(ran.records().len(), 6);
    let stage = ran.stage(0);
    assert_eq!(
        (stage["load"].as_str(), stage["concurrency"].as_u64()),
        (Some("concurrent"), Some(2))
    );
    assert!(
        ran.profile().contains("type: concurrent"),
        "{}",
        ran.profile()
    );
}

#[test]
fn inference_perf_refuses_flags_its_stages_cannot_express() {
    let message = refused(
        "inference-perf",
        "sanity_random",
        &["--rate", "2", "--concurrency", "2"],
    );
    assert!(
        message.contains(
            "llmbench: error: --concurrency 2 cannot be applied to this inference-perf profile: an inference-perf \
             load is either a rate (`constant`, `poisson`) or a closed loop (`concurrent`)"
        ),
        "{message}"
    );
    let message = refused("inference-perf", "sanity_random", &["--requests", "4"]);
    assert!(message.contains("help: use --duration D"), "{message}");
    let message = refused(
        "inference-perf",
        "chatbot_sharegpt",
        &["--input-tokens", "10"],
    );
    assert!(
        message.contains("`shareGPT` data takes its lengths from the dataset"),
        "{message}"
    );
}

#[test]
fn guidellm_rate_and_requests_replace_the_profiles_stops() {
    let ran = run(
        "guidellm",
        "sanity_random",
        &[
            "--rate",
            "20",
            "--requests",
            "4",
            "--input-tokens",
            "16",
            "--output-tokens",
            "2",
        ],
    );
    succeeded(&ran.output);
    let records = ran.records();
    assert_eq!(records.len(), 4);
    assert!(
        lengths(&records).iter().all(|l| *l == (16, 2)),
        "{:?}",
        lengths(&records)
    );
    let stage = ran.stage(0);
    assert_eq!(stage["rate"], 20.0);
    assert_eq!(stage["max_requests"], 4);
    assert!(
        stage.get("max_duration_s").is_none(),
        "--requests alone ends the stage: {stage}"
    );
    let profile = ran.profile();
    assert!(
        profile.contains("- kind: max_requests\n    count: 4\n"),
        "{profile}"
    );
    assert!(!profile.contains("prompt_tokens_stdev"), "{profile}");
}

#[test]
fn guidellm_concurrency_and_duration_run_a_closed_loop_for_that_long() {
    let ran = run(
        "guidellm",
        "sanity_random",
        &["--concurrency", "3", "--duration", "1s"],
    );
    succeeded(&ran.output);
    let stage = ran.stage(0);
    assert_eq!(
        (stage["load"].as_str(), stage["concurrency"].as_u64()),
        (Some("concurrent"), Some(3))
    );
    assert_eq!(stage["max_duration_s"], 1.0);
    assert!(!ran.records().is_empty());
    assert!(
        ran.profile().contains("kind: concurrent\n    streams: 3\n"),
        "{}",
        ran.profile()
    );
}

#[test]
fn vllm_benchmark_flags_set_rate_prompt_count_and_lengths() {
    let ran = run(
        "vllm-benchmark",
        "sanity_random",
        &[
            "--rate",
            "10",
            "--requests",
            "3",
            "--input-tokens",
            "12",
            "--output-tokens",
            "4",
        ],
    );
    succeeded(&ran.output);
    let records = ran.records();
    assert_eq!(records.len(), 3);
    assert!(
        lengths(&records).iter().all(|l| *l == (12, 4)),
        "{:?}",
        lengths(&records)
    );
    let stage = ran.stage(0);
    assert_eq!(stage["rate"], 10.0);
    // The profile's max-concurrency 1 was its load level (no rate); a rate replaces it.
    assert!(stage.get("concurrency").is_none(), "{stage}");
    let profile = ran.profile();
    assert!(
        profile.contains("num-prompts: 3\n") && profile.contains("request-rate: 10\n"),
        "{profile}"
    );
}

#[test]
fn vllm_benchmark_has_no_duration_and_says_to_use_requests() {
    let message = refused("vllm-benchmark", "sanity_random", &["--duration", "10s"]);
    assert!(
        message.contains(
            "--duration 10s cannot be applied to this vllm-benchmark profile: vllm bench serve has no duration: it \
             sends `num-prompts` requests\n  help: use --requests N (at --rate R they take about N / R seconds)"
        ),
        "{message}"
    );
}

#[test]
fn inferencemax_concurrency_caps_requests_in_flight() {
    let ran = run(
        "inferencemax",
        "random_concurrent",
        &[
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--input-tokens",
            "8",
            "--output-tokens",
            "2",
        ],
    );
    succeeded(&ran.output);
    assert_eq!(lengths(&ran.records()), vec![(8, 2); 4]);
    assert_eq!(ran.stage(0)["concurrency"], 2);
}

#[test]
fn aiperf_flags_set_concurrency_request_count_and_lengths() {
    let ran = run(
        "aiperf",
        "synthetic",
        &[
            "--concurrency",
            "2",
            "--requests",
            "5",
            "--input-tokens",
            "10",
            "--output-tokens",
            "3",
        ],
    );
    succeeded(&ran.output);
    assert_eq!(lengths(&ran.records()), vec![(10, 3); 5]);
    let stage = ran.stage(0);
    assert_eq!(
        (
            stage["concurrency"].as_u64(),
            stage["max_requests"].as_u64()
        ),
        (Some(2), Some(5))
    );
    let profile = ran.profile();
    assert!(
        profile.contains("isl: 10\n") && profile.contains("request-count: 5\n"),
        "{profile}"
    );
    let message = refused("aiperf", "synthetic", &["--rate", "3"]);
    assert!(
        message.contains("does not run AIPerf's request-rate mode"),
        "{message}"
    );
    let message = refused("aiperf", "synthetic", &["--duration", "3s"]);
    assert!(
        message.contains("help: use --requests N (AIPerf's `request-count`)"),
        "{message}"
    );
}

/// An MLPerf profile for the simulator: a small dataset, a one-second minimum run.
fn mlperf_profile(dir: &Path, scenario: &str) -> PathBuf {
    let data: Vec<String> = (0..16)
        .map(|i| {
            let words: Vec<String> = (0..20 + i % 7).map(|w| format!("w{w}")).collect();
            serde_json::json!({"input": words.join(" "), "output": "a reference answer"})
                .to_string()
        })
        .collect();
    let dataset = write(dir, "d.jsonl", &data.join("\n"));
    write(
        dir,
        "mlperf.yaml",
        &format!(
            "model: llama3_1-8b\nscenario: {scenario}\ntarget_qps: 200\nmin_query_count: 10\nmin_duration: 1s\n\
             max_tokens: 8\nserver:\n  model_name: llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {}\n",
            dataset.display()
        ),
    )
}

#[test]
fn mlperf_rate_is_the_server_scenarios_target_qps() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ran = run(
        "mlperf",
        mlperf_profile(tmp.path(), "Server"),
        &["--rate", "40"],
    );
    succeeded(&ran.output);
    let summary = std::fs::read_to_string(ran.dir.join("mlperf_log_summary.txt")).expect("summary");
    assert!(summary.contains("target_qps : 40\n"), "{summary}");
    assert!(
        ran.profile().contains("target_qps: 40\n"),
        "{}",
        ran.profile()
    );
    let offline = mlperf_profile(tmp.path(), "Offline");
    let ran = run("mlperf", &offline, &["--rate", "40"]);
    assert_eq!(ran.output.status.code(), Some(1));
    let message = stderr(&ran.output);
    assert!(
        message.contains("the Offline scenario has no arrival rate"),
        "{message}"
    );
    let ran = run("mlperf", &offline, &["--requests", "40"]);
    assert!(
        stderr(&ran.output).contains("--override min_query_count=N"),
        "{}",
        stderr(&ran.output)
    );
}

#[test]
fn fmperf_long_input_takes_rate_duration_and_answer_length() {
    let ran = run(
        "fmperf",
        "sanity_long-input",
        &[
            "--rate",
            "2",
            "--duration",
            "1s",
            "--output-tokens",
            "4",
            "--override",
            "num_users_warmup=2",
        ],
    );
    succeeded(&ran.output);
    // LMBenchmark names its CSV after the QPS value.
    assert!(ran.dir.join("LMBench_long_input_output_2.csv").is_file());
    let profile = ran.profile();
    assert!(
        profile.contains("qps_values: '2'") || profile.contains("qps_values: \"2\""),
        "{profile}"
    );
    assert!(
        profile.contains("test_duration: 1\n") && profile.contains("answer_len: 4\n"),
        "{profile}"
    );
    // The session requests ask for the answer length; warmup_engine's own requests keep LMBenchmark's 100.
    let asked: Vec<u64> = ran
        .records()
        .iter()
        .filter_map(|r| r["max_tokens"].as_u64())
        .collect();
    assert!(
        asked.contains(&4) && asked.iter().all(|n| *n == 4 || *n == 100),
        "{asked:?}"
    );
    let message = refused("fmperf", "sanity_short-input", &["--duration", "5s"]);
    assert!(
        message.contains("the `short-input` scenario's script sets its own run time"),
        "{message}"
    );
}

#[test]
fn nop_refuses_every_load_flag() {
    let message = refused(
        "nop",
        "nop",
        &["--set", "LLMDBENCH_HARNESS_PVC_NAME=pvc", "--requests", "3"],
    );
    assert!(
        message.contains("the nop harness sends no requests"),
        "{message}"
    );
}

#[test]
fn a_capacity_search_refuses_the_flags_that_shape_its_stages() {
    let message = refused(
        "inference-perf",
        "sanity_random",
        &[
            "--capacity-search",
            "{load: rate, slo: [\"ttft_p99<=1s\"]}",
            "--duration",
            "5s",
        ],
    );
    assert!(
        message.contains("--capacity-search varies the load itself and sizes each point, so --duration has nothing"),
        "{message}"
    );
}

#[test]
fn render_takes_the_same_flags_and_logs_what_they_set() {
    let output = llmbench()
        .env("RUST_LOG", "info")
        .args([
            "render",
            "--harness",
            "guidellm",
            "--profile",
            "concurrent-1k-1k",
            "--model",
            "m",
            "--endpoint",
            "http://stack:8000",
            "--rate",
            "5",
        ])
        .output()
        .expect("runs");
    succeeded(&output);
    let rendered = stdout(&output);
    assert!(
        rendered.contains("  profile:\n    kind: constant\n    rate: 5\n"),
        "{rendered}"
    );
    assert!(
        !rendered.contains("benchmarks"),
        "one benchmark at --rate: {rendered}"
    );
    assert!(
        stderr(&output).contains(
            "load flags: --rate 5 → benchmarks removed (was a list of 5), spec.profile.kind = constant (was \
             concurrent), spec.profile.rate = 5 (added)"
        ),
        "{}",
        stderr(&output)
    );
}
