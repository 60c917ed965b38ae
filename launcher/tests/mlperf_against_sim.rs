//! `llmbench run --harness mlperf` against the embedded simulator: LoadGen's verdict follows the injected latency.
//! A Server run within the llama3_1-8b limits is VALID; the same run with an ITL above the 100 ms TPOT limit is
//! INVALID on its performance constraints; a run shorter than min_duration is INVALID on duration alone; Offline
//! reports samples and tokens per second.

use std::path::Path;

use clap::Parser;
use llmbench::metrics::RunVerdict;
use llmbench::mlperf::Verdict;
use llmbench::run::{RunArgs, RunOutcome, run};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn dataset(dir: &Path, samples: usize) -> String {
    let path = dir.join("dataset.jsonl");
    let lines: Vec<String> = (0..samples)
        .map(|i| {
            let words: Vec<String> = (0..20 + i % 7).map(|w| format!("w{w}")).collect();
            serde_json::json!({"input": words.join(" "), "output": "a reference answer"})
                .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n")).expect("write dataset");
    path.display().to_string()
}

/// `llmbench run --harness mlperf` of `profile` on the embedded simulator with these latencies.
async fn run_profile(profile: &Path, output: &Path, ttft: &str, itl: &str) -> RunOutcome {
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "mlperf",
        "--profile",
        profile.to_str().expect("utf-8 path"),
        "--output",
        output.to_str().expect("utf-8 path"),
        "--run-id",
        "mlperf",
        "--sim-ttft",
        ttft,
        "--sim-itl",
        itl,
    ]);
    run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the run fails: {e}"))
}

/// Runs `settings` (the profile minus its dataset and server) with the simulator's latencies; returns the verdict
/// and the summary text.
async fn mlperf_run(
    settings: &str,
    ttft: &str,
    itl: &str,
) -> (Verdict, String, Option<RunVerdict>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path(), 64);
    let profile = dir.path().join("mlperf.yaml");
    let text = format!(
        "{settings}max_tokens: 8\nserver:\n  model_name: llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {data}\n"
    );
    std::fs::write(&profile, text).expect("write profile");
    let outcome = run_profile(&profile, &dir.path().join("out"), ttft, itl).await;
    let summary_txt = std::fs::read_to_string(outcome.dir.join("mlperf_log_summary.txt"))
        .expect("mlperf_log_summary.txt");
    assert!(outcome.dir.join("mlperf_verdict.json").is_file());
    (
        outcome.mlperf.expect("a verdict"),
        summary_txt,
        outcome.summary.verdict,
    )
}

const SERVER: &str =
    "model: llama3_1-8b\nscenario: Server\ntarget_qps: 200\nmin_query_count: 500\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_run_within_the_llama3_1_8b_limits_is_valid() {
    let (verdict, text, summary) =
        mlperf_run(&format!("{SERVER}min_duration: 2s\n"), "50ms", "10ms").await;
    let summary = summary.expect("the summary carries the verdict");
    assert!(
        summary.passed && summary.result == "VALID" && summary.failed_checks.is_empty(),
        "{summary:?}"
    );
    assert!(verdict.valid, "{text}");
    assert!(text.contains("Result is : VALID"), "{text}");
    assert!(
        text.contains("Performance constraints satisfied : Yes"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_itl_above_the_tpot_limit_makes_the_run_invalid() {
    let (verdict, text, _) =
        mlperf_run(&format!("{SERVER}min_duration: 2s\n"), "50ms", "150ms").await;
    assert!(!verdict.valid, "{text}");
    assert_eq!(
        verdict.checks.performance_constraints,
        Some(false),
        "{text}"
    );
    assert!(text.contains("Result is : INVALID"), "{text}");
    // LoadGen's results.cc prints a failed check as "NO".
    assert!(
        text.contains("Performance constraints satisfied : NO"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_shorter_than_min_duration_is_invalid_on_duration_alone() {
    let settings = format!("{SERVER}min_duration: 60s\nmax_query_count: 600\n");
    let (verdict, text, summary) = mlperf_run(&settings, "50ms", "10ms").await;
    let summary = summary.expect("the summary carries the verdict");
    assert_eq!(summary.failed_checks, ["min_duration"], "{summary:?}");
    assert!(!verdict.valid, "{text}");
    assert!(!verdict.checks.min_duration, "{text}");
    assert_eq!(verdict.checks.performance_constraints, Some(true), "{text}");
    assert!(verdict.checks.min_queries, "{text}");
    assert!(verdict.checks.early_stopping, "{text}");
    assert!(text.contains("Min duration satisfied : NO"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_run_reports_samples_and_tokens_per_second() {
    let settings = "model: llama3_1-8b\nscenario: Offline\ntarget_qps: 100\nmin_duration: 1s\nmin_query_count: 64\n";
    let (verdict, text, _) = mlperf_run(settings, "20ms", "5ms").await;
    let samples = verdict
        .samples_per_second
        .expect("Offline samples per second");
    let tokens = verdict
        .tokens_per_second
        .expect("Offline tokens per second");
    assert!(
        samples > 0.0 && tokens >= 8.0 * samples * 0.99,
        "{samples} {tokens}\n{text}"
    );
    assert!(text.contains("Samples per second"), "{text}");
    assert!(text.contains("Tokens per second"), "{text}");
}

/// Accuracy mode scores what the simulator generated (" token" per token) against each sample's `output`: half the
/// references are exactly the four generated words (ROUGE-1, -2 and -L all 100) and half share no word (all 0), so
/// every mean is 50 — above 99% of the llama3_1-8b reference scores (38.78 / 15.91 / 24.50).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_mode_scores_the_generated_texts_with_rouge() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("dataset.jsonl");
    let lines: Vec<String> = (0..10)
        .map(|i| {
            let output = if i % 2 == 0 {
                "token token token token"
            } else {
                "cat dog bird fish"
            };
            serde_json::json!({"input": format!("prompt number {i}"), "output": output}).to_string()
        })
        .collect();
    std::fs::write(&data, lines.join("\n")).expect("write dataset");
    let profile = dir.path().join("accuracy.yaml");
    std::fs::write(
        &profile,
        format!(
            "model: llama3_1-8b\nscenario: Offline\nmode: AccuracyOnly\nmax_tokens: 4\nserver:\n  model_name: \
             llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {}\n",
            data.display()
        ),
    )
    .expect("write profile");
    let outcome = run_profile(&profile, &dir.path().join("out"), "1ms", "1ms").await;
    let scores = outcome.accuracy.expect("ROUGE scores");
    assert_eq!(scores.samples, 10);
    for score in [scores.rouge1, scores.rouge2, scores.rouge_l] {
        assert!((score - 50.0).abs() < 1e-9, "{scores:?}");
    }
    let verdict = outcome.summary.verdict.expect("a verdict");
    assert!(
        verdict.passed && verdict.result.starts_with("PASS"),
        "{verdict:?}"
    );
    assert!(outcome.dir.join("mlperf_accuracy.json").is_file());
}
