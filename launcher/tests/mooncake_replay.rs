//! AIPerf-style Mooncake trace replay against the embedded simulator: a trace the test writes itself, run through
//! llm-d-benchmark's aiperf dialect. Every record is sent and recorded, each at its trace time divided by the
//! speed-up, and a session's later turn waits for the previous answer plus its delay.

mod common;

use std::path::Path;

use clap::Parser;
use llmbench::run::{RunArgs, run};
use serde_json::Value;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// 12 single-turn records 40 ms apart (on the trace's clock) whose prompts share hash blocks 1 and 2, and one
/// two-turn session: its first turn at 100 ms, its second 60 ms after the first's answer.
fn trace() -> String {
    let mut lines = Vec::new();
    for i in 0..12u64 {
        lines.push(format!(
            "{{\"timestamp\": {}, \"input_length\": 20, \"output_length\": 4, \"hash_ids\": [1, 2, {}]}}",
            1000 + i * 40,
            100 + i
        ));
    }
    lines.push(
        "{\"session_id\": \"s\", \"timestamp\": 1100, \"input_length\": 8, \"output_length\": 3, \"hash_ids\": [1]}"
            .to_owned(),
    );
    lines.push("{\"session_id\": \"s\", \"delay\": 60, \"input_length\": 12, \"output_length\": 3, \"hash_ids\": [1, 9]}".to_owned());
    lines.join("\n") + "\n"
}

async fn replay(
    dir: &Path,
    profile: &Path,
    run_id: &str,
) -> (Vec<Value>, llmbench::run::RunOutcome) {
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "aiperf",
        "--profile",
        profile.to_str().expect("utf-8"),
        "--set",
        &format!("LLMDBENCH_RUN_DATASET_DIR={}", dir.display()),
        "--set",
        "LLMDBENCH_RUN_DATASET_FILE=trace.jsonl",
        "--output",
        dir.to_str().expect("utf-8"),
        "--run-id",
        run_id,
        "--sim-ttft",
        "5ms",
        "--sim-itl",
        "1ms",
    ]);
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the replay fails: {e}"));
    let text = common::requests_jsonl(&outcome.dir.join("requests.jsonl")).expect("requests.jsonl");
    let records = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    (records, outcome)
}

fn ns(record: &Value, field: &str) -> i64 {
    record[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {record}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_trace_is_replayed_at_its_times_divided_by_the_speedup() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("trace.jsonl"), trace()).expect("trace");
    // The upstream dataset profile, with AIPerf's speed-up, auto-offset and block-size flags added (blocks of 8:
    // 20 tokens are 8 + 8 + 4).
    let template = include_str!("../../workload/profiles/aiperf/dataset.yaml.in");
    let profile = dir.path().join("dataset_fast.yaml.in");
    std::fs::write(
        &profile,
        format!("{template}fixed-schedule-speedup: 2\nfixed-schedule-auto-offset: none\nisl-block-size: 8\n"),
    )
    .expect("profile");
    let (records, outcome) = replay(dir.path(), &profile, "speedup").await;

    assert_eq!(records.len(), 14, "every trace record is sent and recorded");
    assert_eq!(outcome.summary.overall.requests.total, 14);
    assert!(
        records.iter().all(|r| r["http_status"] == 200),
        "{records:?}"
    );
    let origin = records
        .iter()
        .map(|r| ns(r, "scheduled_ns"))
        .min()
        .expect("records");
    // Single-turn records: scheduled at (timestamp − 1000) / 2 ms, i.e. i · 20 ms.
    let mut singles: Vec<i64> = records
        .iter()
        .filter(|r| r["max_tokens"] == 4)
        .map(|r| ns(r, "scheduled_ns") - origin)
        .collect();
    singles.sort_unstable();
    let expected: Vec<i64> = (0..12).map(|i| i * 20_000_000).collect();
    assert_eq!(singles, expected);
    // Nothing is sent before its time; how close after it is a figure for `make bench`, not a test (on a loaded
    // 2-core machine a send can be tens of ms late).
    let mut errors: Vec<i64> = records
        .iter()
        .map(|r| ns(r, "sent_ns") - ns(r, "scheduled_ns"))
        .collect();
    errors.sort_unstable();
    assert!(errors[0] >= 0, "nothing is sent early: {errors:?}");

    // The session: turn 0 at (1100 − 1000) / 2 = 50 ms, turn 1 at its answer + 60 / 2 = 30 ms.
    let turn = |n: u64| {
        records
            .iter()
            .find(|r| r["max_tokens"] == 3 && r["conversation"]["turn"] == n)
            .unwrap_or_else(|| panic!("turn {n} recorded"))
    };
    assert_eq!(ns(turn(0), "scheduled_ns") - origin, 50_000_000);
    // The answer's return is stamped a moment after the record's end (on a loaded machine, many moments): never
    // before the 30 ms delay, and under twice it, which tells the delay from none or from one counted twice.
    let after_answer = ns(turn(1), "scheduled_ns") - ns(turn(0), "end_ns");
    assert!(
        (30_000_000..60_000_000).contains(&after_answer),
        "the delay counts from the previous answer: {after_answer} ns"
    );
    // Prompt lengths are the trace's under the simulator's builtin tokenizer; each turn is sent alone.
    assert!(
        records
            .iter()
            .filter(|r| r["max_tokens"] == 4)
            .all(|r| r["input_tokens"] == 20)
    );
    assert_eq!(
        (
            turn(0)["input_tokens"].as_u64(),
            turn(1)["input_tokens"].as_u64()
        ),
        (Some(8), Some(12))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_dataset_profile_runs_unchanged_at_the_traces_own_times() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Timestamps from 0: no offset needed.
    let text = "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 2, \"hash_ids\": [5]}\n\
                {\"timestamp\": 30, \"input_length\": 6, \"output_length\": 2, \"hash_ids\": [5]}\n\
                {\"timestamp\": 60, \"text_input\": \"a verbatim prompt\", \"output_length\": 2}\n";
    std::fs::write(dir.path().join("trace.jsonl"), text).expect("trace");
    let (records, _) = replay(dir.path(), Path::new("dataset"), "bundled").await;
    assert_eq!(records.len(), 3);
    // AIPerf's own export is written beside llmbench's files.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("bundled/profile_export_aiperf.json"))
            .expect("aiperf export"),
    )
    .expect("json");
    assert_eq!(export["request_count"]["avg"], 3.0);
    let csv = std::fs::read_to_string(dir.path().join("bundled/profile_export_aiperf.csv"))
        .expect("aiperf csv export");
    assert!(
        csv.starts_with("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"),
        "{csv}"
    );
    assert!(csv.contains("\r\nRequest Count,3.00\r\n"), "{csv}");
    let origin = records
        .iter()
        .map(|r| ns(r, "scheduled_ns"))
        .min()
        .expect("records");
    let mut offsets: Vec<i64> = records
        .iter()
        .map(|r| ns(r, "scheduled_ns") - origin)
        .collect();
    offsets.sort_unstable();
    assert_eq!(offsets, [0, 30_000_000, 60_000_000]);
}

/// The point of `hash_ids`: records naming the same blocks send the same text, so a server's prefix cache hits on
/// them. Blocks of 16 tokens, the simulator's own KV block size: record 0 sends blocks 1, 2, 3 (48 tokens) at
/// 0 ms, record 1 blocks 1, 2, 4 at 200 ms, long after record 0 was admitted and cached. Record 1's first two blocks
/// (32 tokens) are record 0's, its third is new, so the simulator serves exactly 32 tokens from its cache; record 0
/// finds nothing. The run's hit rate is 32 / (48 + 48) = 1/3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_hash_blocks_are_prefix_cache_hits_in_the_simulator() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = "{\"timestamp\": 0, \"input_length\": 48, \"output_length\": 2, \"hash_ids\": [1, 2, 3]}\n\
                {\"timestamp\": 200, \"input_length\": 48, \"output_length\": 2, \"hash_ids\": [1, 2, 4]}\n";
    std::fs::write(dir.path().join("trace.jsonl"), text).expect("trace");
    let template = include_str!("../../workload/profiles/aiperf/dataset.yaml.in");
    let profile = dir.path().join("dataset_blocks16.yaml.in");
    std::fs::write(&profile, format!("{template}isl-block-size: 16\n")).expect("profile");
    let (records, outcome) = replay(dir.path(), &profile, "prefix").await;

    assert_eq!(records.len(), 2);
    let by_time = |at_ms: i64| {
        let origin = records
            .iter()
            .map(|r| ns(r, "scheduled_ns"))
            .min()
            .expect("records");
        records
            .iter()
            .find(|r| ns(r, "scheduled_ns") - origin == at_ms * 1_000_000)
            .unwrap_or_else(|| panic!("a record scheduled at {at_ms} ms: {records:?}"))
    };
    let (first, second) = (by_time(0), by_time(200));
    assert_eq!(first["usage"]["prompt_tokens"], 48, "{first}");
    assert_eq!(second["usage"]["prompt_tokens"], 48, "{second}");
    assert!(
        first["usage"]["cached_tokens"].is_null(),
        "nothing is cached before the first request: {first}"
    );
    assert_eq!(second["usage"]["cached_tokens"], 32, "{second}");
    let hits = outcome
        .summary
        .overall
        .prefix_cache
        .expect("the run reports prefix-cache hits");
    assert_eq!(
        (
            hits.cached_tokens,
            hits.prompt_tokens,
            hits.requests_with_usage
        ),
        (32, 96, 2)
    );
    assert!((hits.hit_rate - 1.0 / 3.0).abs() < 1e-12, "{hits:?}");
}

/// AIPerf reads a gzipped trace as its text (`open_text_maybe_gzip` sniffs the magic bytes, whatever the name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzipped_trace_is_replayed_as_its_text() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let text = "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 2, \"hash_ids\": [5]}\n\
                {\"timestamp\": 30, \"input_length\": 6, \"output_length\": 2, \"hash_ids\": [5]}\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).expect("compress");
    std::fs::write(dir.path().join("trace.jsonl"), gz.finish().expect("gzip")).expect("trace");
    let (records, _) = replay(dir.path(), Path::new("dataset"), "gzipped").await;
    let mut offsets: Vec<i64> = records.iter().map(|r| ns(r, "scheduled_ns")).collect();
    offsets.sort_unstable();
    assert_eq!(offsets.len(), 2);
    assert_eq!(offsets[1] - offsets[0], 30_000_000);
}
