//! `llmbench run --harness mlperf` against the embedded simulator: LoadGen's verdict follows the injected latency.
//! A Server run within the llama3_1-8b limits is VALID; the same run with an ITL above the 100 ms TPOT limit is
//! INVALID on its performance constraints; a run shorter than min_duration is INVALID on duration alone; Offline
//! reports samples and tokens per second.

use std::path::Path;

use clap::Parser;
use llmbench::run::{RunArgs, RunOutcome, run};
use llmbench_metrics::metrics::RunVerdict;
use llmbench_metrics::mlperf::Verdict;

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
    // LoadGen's one Offline query: max(64, ⌊1.1 · 1 s · 100/s⌋ = 110) samples, padded by equal-issue mode (on for
    // llama3_1-8b in mlperf.conf) to two whole shuffles of the 64 loaded samples.
    assert_eq!(
        (verdict.queries_issued, verdict.sample_count),
        (1, 128),
        "{text}"
    );
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

/// The `:::MLLOG` lines of a detail log as `tools/submission/log_parser.py` reads them (strict: every marked line
/// must be JSON), first message per key.
fn detail_log(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("mlperf_log_detail.txt")).expect("detail log");
    assert!(text.starts_with(":::MLLOG "), "{text}");
    text.lines()
        .filter_map(|line| line.trim_end().strip_prefix(":::MLLOG"))
        .map(|json| serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}")))
        .collect()
}

fn value<'a>(log: &'a [serde_json::Value], key: &str) -> &'a serde_json::Value {
    &log.iter()
        .find(|m| m["key"] == key)
        .unwrap_or_else(|| panic!("{key} missing"))["value"]
}

/// MultiStream on the simulator: queries of 4 samples go out together and the next waits for the slowest, so with
/// a fixed latency (TTFT 20 ms + 7 · 5 ms ITL ≈ 55 ms) the queries follow each other ~55 ms apart and the run ends
/// once 20 queries and 0.5 s are both behind it — about 10 per 0.55 s, so the duration decides: ≥ 0.5 s / 55 ms.
/// The detail log carries the per-query results the submission checker reads for MultiStream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multistream_run_issues_queries_in_lockstep_and_logs_per_query_results() {
    let settings = "model: llama3_1-8b\nscenario: MultiStream\nsamples_per_query: 4\nmin_query_count: 5\n\
                    min_duration: 500ms\nexpected_latency: 50ms\n";
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path(), 64);
    let profile = dir.path().join("mlperf.yaml");
    std::fs::write(
        &profile,
        format!(
            "{settings}max_tokens: 8\nserver:\n  model_name: llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {data}\n"
        ),
    )
    .expect("write profile");
    let outcome = run_profile(&profile, &dir.path().join("out"), "20ms", "5ms").await;
    let verdict = outcome.mlperf.expect("a verdict");
    let queries = verdict.queries_issued;
    assert_eq!(verdict.sample_count, queries * 4);
    // Lockstep: no query overlaps the next, so the run lasts at least the sum of the query latencies; and it
    // ended as soon as both minimums were met (one query past 0.5 s at most).
    let q = verdict.query_latency.clone().expect("per-query latency");
    assert!(q.min >= 55_000_000, "{q:?}");
    // Query k is issued after the k before it completed: the last one (n − 1) at ≥ (n − 1) · min; the one before
    // it was issued before 0.5 s (else the run would have ended there), so (n − 2) · min < 0.5 s.
    let (n, min_s) = (queries as f64, q.min as f64 / 1e9);
    assert!(
        verdict.final_query_issued_time >= (n - 1.0) * min_s,
        "{verdict:?}"
    );
    assert!(
        queries >= 5 && (n - 2.0) * min_s < 0.5,
        "{queries} queries, {q:?}"
    );
    assert!(verdict.final_query_issued_time >= 0.5);
    let text =
        std::fs::read_to_string(outcome.dir.join("mlperf_log_summary.txt")).expect("summary");
    assert!(text.contains("Scenario : MultiStream"), "{text}");
    assert!(text.contains("Per-query latency:  "), "{text}");
    let log = detail_log(&outcome.dir);
    assert_eq!(value(&log, "effective_scenario"), "MultiStream");
    assert_eq!(value(&log, "effective_samples_per_query"), 4);
    assert_eq!(value(&log, "result_query_count"), queries);
    assert_eq!(
        value(&log, "result_99.00_percentile_per_query_latency_ns"),
        q.target
    );
    assert!(value(&log, "early_stopping_latency_ms").is_u64());
    // Performance mode leaves LoadGen's accuracy log empty.
    let accuracy = std::fs::read_to_string(outcome.dir.join("mlperf_log_accuracy.json"))
        .expect("accuracy log");
    assert_eq!(accuracy, "[\n]\n");
}

/// A word-level `tokenizer.json` that knows the simulator's answer word.
const WORD_TOKENIZER: &str = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
"model":{"type":"WordLevel","vocab":{"<unk>":0,"token":1,"a":2},"unk_token":"<unk>"}}"#;

/// Accuracy mode writes LoadGen's accuracy log: one entry per response, `data` the hex of its token ids as
/// little-endian int32 (the reference SUTs' encoding, read back with `np.frombuffer(bytes.fromhex(data),
/// np.int32)`), which decode to the generated text with the run's tokenizer.
/// Runs the mlperf `profile` text in `dir` against the embedded simulator with [`WORD_TOKENIZER`] written beside it
/// (accuracy logs need token ids); returns the outcome and the tokenizer's path.
async fn with_word_tokenizer(dir: &Path, profile: &str) -> (RunOutcome, std::path::PathBuf) {
    let tokenizer_path = dir.join("tokenizer.json");
    std::fs::write(&tokenizer_path, WORD_TOKENIZER).expect("write tokenizer");
    let profile_path = dir.join("profile.yaml");
    std::fs::write(&profile_path, profile).expect("write profile");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "mlperf",
        "--profile",
        profile_path.to_str().expect("utf-8 path"),
        "--output",
        dir.join("out").to_str().expect("utf-8 path"),
        "--run-id",
        "mlperf",
        "--tokenizer",
        tokenizer_path.to_str().expect("utf-8 path"),
    ]);
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the run fails: {e}"));
    (outcome, tokenizer_path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_mode_logs_token_ids_as_the_accuracy_scripts_read_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path(), 6);
    let (outcome, tokenizer_path) = with_word_tokenizer(
        dir.path(),
        &format!(
            "model: llama3_1-8b\nscenario: Offline\nmode: AccuracyOnly\nmax_tokens: 4\nserver:\n  model_name: \
             llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {data}\n"
        ),
    )
    .await;
    let text = std::fs::read_to_string(outcome.dir.join("mlperf_log_accuracy.json"))
        .expect("accuracy log");
    let entries: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON list");
    assert_eq!(entries.len(), 6);
    let tokenizer =
        llmbench_text::tokenizer::Tokenizer::from_file(&tokenizer_path).expect("tokenizer");
    let mut seen: Vec<u64> = Vec::new();
    for entry in &entries {
        let hex = entry["data"].as_str().expect("hex data");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        let ids: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32)
            .collect();
        assert_eq!(entry["token_count"].as_u64(), Some(ids.len() as u64));
        // The simulator answers " token" per token: four of them, id 1 each.
        assert_eq!(ids, [1; 4]);
        assert_eq!(
            tokenizer.decode(&ids).expect("decode"),
            "token token token token"
        );
        seen.push(entry["qsl_idx"].as_u64().expect("qsl_idx"));
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..6).collect::<Vec<_>>());
    let log = detail_log(&outcome.dir);
    assert_eq!(value(&log, "effective_test_mode"), "AccuracyOnly");
    assert!(log.iter().all(|m| m["key"] != "result_validity"));
}

/// With llmbench's built-in tokenizer there are no ids the accuracy scripts could decode: no accuracy log, and
/// the detail log says why as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_mode_with_the_builtin_tokenizer_writes_no_accuracy_log_and_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path(), 3);
    let profile = dir.path().join("accuracy.yaml");
    std::fs::write(
        &profile,
        format!(
            "model: llama3_1-8b\nscenario: Offline\nmode: AccuracyOnly\nmax_tokens: 4\nserver:\n  model_name: \
             llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {data}\n"
        ),
    )
    .expect("write profile");
    let outcome = run_profile(&profile, &dir.path().join("out"), "1ms", "1ms").await;
    assert!(!outcome.dir.join("mlperf_log_accuracy.json").exists());
    let log = detail_log(&outcome.dir);
    let error = log
        .iter()
        .find(|m| m["metadata"]["is_error"] == true)
        .expect("an error line");
    assert!(
        error["value"]
            .as_str()
            .is_some_and(|v| v.contains("built-in")),
        "{error}"
    );
}

/// MLPerf's datasets come as pickled pandas DataFrames; a run reads one directly (here a 3-row frame with
/// `tok_input` token ids, written by pandas 3.1 with protocol 5), and sends every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mlperf_run_reads_a_pickled_dataframe_dataset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pickle = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mlperf-pickles/orca_pandas3_p5.pkl");
    let profile = dir.path().join("mlperf.yaml");
    std::fs::write(
        &profile,
        format!(
            "model: llama3_1-8b\nscenario: Offline\nmin_duration: 0\nmin_query_count: 3\nmax_tokens: 4\nserver:\n  \
             model_name: llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {}\n",
            pickle.display()
        ),
    )
    .expect("write profile");
    let outcome = run_profile(&profile, &dir.path().join("out"), "1ms", "1ms").await;
    let verdict = outcome.mlperf.expect("a verdict");
    assert_eq!(verdict.sample_count, 3);
    assert_eq!(verdict.failed_queries, 0);
    let log = detail_log(&outcome.dir);
    assert_eq!(value(&log, "qsl_reported_total_count"), 3);
}

/// A SubmissionRun, as LoadGen's `StartTest` runs it: the accuracy pass over the whole dataset, then the
/// performance pass, one log set. The accuracy log holds the accuracy pass's answers (sequence ids 0..5: the
/// passes share one sequence), the detail log both passes in order, the summary the performance verdict with
/// `Mode : SubmissionRun`, and summary.json one verdict of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_run_runs_the_accuracy_pass_then_the_performance_pass() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path(), 6);
    let (outcome, _) = with_word_tokenizer(
        dir.path(),
        &format!(
            "model: llama3_1-8b\nscenario: Offline\nmode: SubmissionRun\ntarget_qps: 1\nmin_duration: 0\n\
             min_query_count: 1\nmax_tokens: 4\nserver:\n  model_name: llmbench-sim\n  ignore_eos: true\n\
             dataset:\n  path: {data}\n"
        ),
    )
    .await;
    let text = std::fs::read_to_string(outcome.dir.join("mlperf_log_accuracy.json"))
        .expect("accuracy log");
    let entries: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON list");
    let mut seq_ids: Vec<u64> = entries
        .iter()
        .map(|e| e["seq_id"].as_u64().expect("seq_id"))
        .collect();
    seq_ids.sort_unstable();
    assert_eq!(seq_ids, (0..6).collect::<Vec<_>>());
    let log = detail_log(&outcome.dir);
    assert_eq!(value(&log, "effective_test_mode"), "SubmissionRun");
    let passes: Vec<(&str, String)> = log
        .iter()
        .filter_map(|m| {
            let key = m["key"].as_str()?;
            [
                "generic_message",
                "generated_query_count",
                "power_begin",
                "result_validity",
            ]
            .contains(&key)
            .then(|| (key, m["value"].to_string()))
        })
        .map(|(key, v)| {
            (
                key,
                if key == "power_begin" {
                    String::new()
                } else {
                    v
                },
            )
        })
        .collect();
    // Offline: the accuracy pass is one query of the 6 samples; the performance pass one query of
    // ⌈max(1, ⌊1.1 · 0 · 1⌋) / 6⌉ · 6 = 6 samples (equal issue pads to a whole set), judged VALID or not by
    // the verdict.
    let validity = value(&log, "result_validity").to_string();
    assert_eq!(
        passes,
        [
            ("generic_message", "\"Starting accuracy mode\"".to_owned()),
            ("generated_query_count", "1".to_owned()),
            ("power_begin", String::new()),
            (
                "generic_message",
                "\"Starting performance mode\"".to_owned()
            ),
            ("generated_query_count", "1".to_owned()),
            ("power_begin", String::new()),
            ("result_validity", validity),
        ]
    );
    let summary = std::fs::read_to_string(outcome.dir.join("mlperf_log_summary.txt"))
        .expect("mlperf_log_summary.txt");
    assert!(summary.contains("Mode     : SubmissionRun"), "{summary}");
    let verdict = outcome.summary.verdict.expect("a verdict");
    assert_eq!(verdict.by, "mlperf");
    assert!(verdict.result.contains("; accuracy "), "{}", verdict.result);
    assert!(outcome.dir.join("mlperf_accuracy.json").is_file());
    // Both passes' requests: 6 + 6.
    assert_eq!(outcome.summary.overall.requests.total, 12);
    // LoadGen's trace: a `Sample` begin per sample, each pass's one Offline query numbered 0 and 1.
    let trace: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(outcome.dir.join("mlperf_log_trace.json")).expect("trace"),
    )
    .expect("the trace is JSON");
    let mut samples: Vec<(u64, u64)> = trace["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == "Sample" && e["ph"] == "b")
        .map(|e| {
            (
                e["args"]["sample_seq"].as_u64().expect("sample_seq"),
                e["args"]["query_seq"].as_u64().expect("query_seq"),
            )
        })
        .collect();
    samples.sort_unstable();
    let expected: Vec<(u64, u64)> = (0..12).map(|i| (i, i / 6)).collect();
    assert_eq!(samples, expected);
    assert_eq!(trace["otherData"]["version"], "MLPerf LoadGen v1.0");
}
