//! inference-perf `trace_replay` against the embedded simulator: an Azure Public Dataset CSV the test writes
//! itself (`load.trace` and `data.trace` both naming it), run through the inference-perf dialect. Every row is sent
//! and recorded, at its time after the first row's, with its `ContextTokens` prompt and `GeneratedTokens` answer.

mod common;

use clap::Parser;
use llmbench::run::{RunArgs, run};
use serde_json::Value;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// Rows (header first): 6 requests whose times after the first are, by hand, 0, 250, 400, 400, 1000 and 1230 ms
/// (".2349" is cut to 23 cs as upstream cuts it), with 10 + i prompt tokens and 2 + i answer tokens.
const CSV: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                   2023-11-16 18:15:46.000,10,2\n\
                   2023-11-16 18:15:46.250,11,3\n\
                   2023-11-16 18:15:46.400,12,4\n\
                   \n\
                   2023-11-16 18:15:46.400,13,5\n\
                   2023-11-16 18:15:47.000,14,6\n\
                   2023-11-16 18:15:47.2349,15,7\n";

fn profile(csv: &str, worker_max_concurrency: u32) -> String {
    format!(
        "server:\n  type: vllm\n  base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n  \
         model_name: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n  ignore_eos: true\n\
         api:\n  type: completion\n  streaming: true\n\
         data:\n  type: random\n  trace:\n    file: {csv}\n    format: AzurePublicDataset\n\
         load:\n  type: trace_replay\n  num_workers: 1\n  worker_max_concurrency: {worker_max_concurrency}\n  trace:\n    file: {csv}\n    format: AzurePublicDataset\n  \
         stages:\n    - rate: 1\n      duration: 1\n\
         report:\n  request_lifecycle:\n    summary: true\n    per_stage: true\n    per_request: true\n"
    )
}

fn ns(record: &Value, field: &str) -> i64 {
    record[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {record}"))
}

/// Runs `csv` under the inference-perf dialect against the simulator; its records.
async fn replay(
    csv_text: &str,
    worker_max_concurrency: u32,
) -> (Vec<Value>, llmbench::run::RunOutcome) {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("azure.csv");
    std::fs::write(&csv, csv_text).expect("csv");
    let profile_path = dir.path().join("trace.yaml.in");
    std::fs::write(
        &profile_path,
        profile(csv.to_str().expect("utf-8"), worker_max_concurrency),
    )
    .expect("profile");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "inference-perf",
        "--profile",
        profile_path.to_str().expect("utf-8"),
        "--output",
        dir.path().to_str().expect("utf-8"),
        "--run-id",
        "azure",
        "--sim-ttft",
        "5ms",
        "--sim-itl",
        "1ms",
    ]);
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the replay fails: {e}"));
    let text = common::requests_jsonl(&outcome.dir.join("requests.jsonl")).expect("requests.jsonl");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    (records, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_azure_trace_row_is_sent_at_its_time_with_its_lengths() {
    let (records, outcome) = replay(CSV, 100).await;
    assert_eq!(records.len(), 6, "every row is sent and recorded");
    assert_eq!(outcome.summary.overall.requests.total, 6);
    assert!(
        records.iter().all(|r| r["http_status"] == 200),
        "{records:?}"
    );
    let origin = records
        .iter()
        .map(|r| ns(r, "scheduled_ns"))
        .min()
        .expect("records");
    // (scheduled ms after the first, prompt tokens, max_tokens), by row.
    let mut got: Vec<(i64, u64, u64)> = records
        .iter()
        .map(|r| {
            (
                (ns(r, "scheduled_ns") - origin) / 1_000_000,
                r["input_tokens"].as_u64().expect("input_tokens"),
                r["max_tokens"].as_u64().expect("max_tokens"),
            )
        })
        .collect();
    got.sort_unstable();
    assert_eq!(
        got,
        [
            (0, 10, 2),
            (250, 11, 3),
            (400, 12, 4),
            (400, 13, 5),
            (1000, 14, 6),
            (1230, 15, 7)
        ]
    );
    // Never sent before its time, and sent in the order of the schedule. How close to its time a request goes out
    // is a figure for `make bench`, not a test: on a loaded 2-core machine a send can be tens of ms late.
    for r in &records {
        let late = ns(r, "sent_ns") - ns(r, "scheduled_ns");
        assert!(late >= 0, "sent {} ns before its time: {r}", -late);
    }
    let mut by_schedule: Vec<(i64, i64)> = records
        .iter()
        .map(|r| (ns(r, "scheduled_ns"), ns(r, "sent_ns")))
        .collect();
    by_schedule.sort_unstable();
    for pair in by_schedule.windows(2) {
        let ((due_a, sent_a), (due_b, sent_b)) = (pair[0], pair[1]);
        if due_a < due_b {
            assert!(
                sent_a <= sent_b,
                "a row due earlier went out later: {pair:?}"
            );
        }
    }
}

/// One worker of `worker_max_concurrency: 1`: two rows due at once go out one after the other, the second when the
/// first has been answered (upstream's worker holds its one semaphore slot until the first request returns); it
/// stays scheduled at its row's time, so the wait is its schedule delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_in_flight_cap_holds_back_a_row_until_a_slot_frees() {
    let csv = "2023-11-16 18:15:46.00,10,20\n2023-11-16 18:15:46.00,10,20\n";
    let (records, _) = replay(csv, 1).await;
    assert_eq!(records.len(), 2);
    let mut by_send: Vec<&Value> = records.iter().collect();
    by_send.sort_by_key(|r| ns(r, "sent_ns"));
    let (first, second) = (by_send[0], by_send[1]);
    assert_eq!(ns(first, "scheduled_ns"), ns(second, "scheduled_ns"));
    // 20 answer tokens at 1 ms each after a 5 ms first token: the first takes about 25 ms.
    assert!(
        ns(second, "sent_ns") >= ns(first, "end_ns"),
        "the second is sent only after the first's answer: {first} {second}"
    );
    assert!(ns(second, "sent_ns") - ns(second, "scheduled_ns") >= 20_000_000);
}
