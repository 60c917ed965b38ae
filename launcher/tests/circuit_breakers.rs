//! inference-perf circuit breakers through the binary against the simulator: a breaker watching the requests its
//! `matches` select opens on its trigger, the run stops there (what was in flight cancelled, every record kept),
//! and the summary says why; a breaker whose requests never match lets the run finish.

mod common;

use std::path::Path;

use common::*;

/// 40 requests at 20 req/s, with one breaker over HTTP 500s (a run of 3 opens it), enabled by the load.
fn profile(dir: &Path, error_type: &str) -> std::path::PathBuf {
    write(
        dir,
        "breaker.yaml",
        &format!(
            "server:\n  type: vllm\n  base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n  model_name: \
             REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n  ignore_eos: true\napi:\n  type: completion\n  \
             streaming: true\ndata:\n  type: random\n  input_distribution: {{min: 20, max: 20, mean: 20, std_dev: 0, \
             total_count: 40}}\n  output_distribution: {{min: 4, max: 4, mean: 4, std_dev: 0, total_count: 40}}\n\
             circuit_breakers:\n  - name: server_errors\n    metrics:\n      matches:\n        \
             - \"error.error_type == '{error_type}'\"\n    triggers:\n      - type: consecutive\n        \
             threshold: 3\nload:\n  type: constant\n  stages:\n    - rate: 20\n      duration: 2\n  \
             circuit_breakers: [server_errors]\n"
        ),
    )
}

/// A run of the profile with a breaker over `error_type`, against a simulator that answers every request with
/// HTTP 500: what it printed, and its summary.
fn run_against_failing_server(
    error_type: &str,
    run_id: &str,
) -> (std::process::Output, serde_json::Value) {
    let sim = SimProcess::start(&[
        "--model",
        "m",
        "--failure-rate",
        "1",
        "--failure-kinds",
        "http500",
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = profile(dir.path(), error_type);
    let output = run_profile(
        dir.path(),
        "inference-perf",
        path.to_str().expect("utf-8"),
        run_id,
        &[
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--no-preflight",
        ],
    );
    let summary = json(&dir.path().join(run_id).join("summary.json"));
    (output, summary)
}

#[test]
fn an_open_breaker_stops_the_run_and_the_summary_says_so() {
    // Every request fails with HTTP 500: the third failure opens the breaker.
    let (output, summary) = run_against_failing_server("HTTP Error 500", "tripped");
    assert!(!output.status.success(), "{}", stdout(&output));
    let text = summary.to_string();
    assert!(text.contains("circuit_breaker_open"), "{summary:#}");
    let total = summary["requests"]["total"].as_u64().expect("total");
    assert!((3..40).contains(&total), "{total} requests recorded of 40");
    assert!(
        stderr(&output).contains("circuit breaker \"server_errors\" is open")
            || stdout(&output).contains("circuit breaker \"server_errors\" is open"),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}

#[test]
fn a_breaker_whose_requests_never_match_lets_the_run_finish() {
    // Watches timeouts; the server answers 500s.
    let (output, summary) = run_against_failing_server("TimeoutError", "untripped");
    assert_eq!(summary["requests"]["total"], 40, "{}", stdout(&output));
    assert!(!summary.to_string().contains("circuit_breaker_open"));
}
