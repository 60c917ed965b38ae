//! AIPerf's load flags through the binary's run path against the embedded simulator: `--request-rate` with its
//! two modes, `--random-seed`, `--concurrency` beside a rate, `--benchmark-duration` and its grace period. The
//! expected send times are worked out by hand from AIPerf's `RequestRateStrategy`
//! (`aiperf/timing/request_rate_strategy.py`, ai-dynamo/aiperf db4f6397): the first request at the start, a gap
//! after each send, with a concurrency a send waits for a free slot first.

mod common;

use std::path::Path;

use clap::Parser;
use common::{llmbench, succeeded, write};
use llmbench::run::{RunArgs, run};
use serde_json::Value;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// Runs `flags` (the aiperf dialect's `key: value` lines, after a model and 16-token completions prompts) against the
/// simulator answering after `ttft`, and returns its records in the order they were scheduled.
async fn run_aiperf(dir: &Path, name: &str, flags: &str, ttft: &str) -> Vec<Value> {
    let profile = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &profile,
        format!("model: m\nendpoint-type: completions\nisl: 16\n{flags}"),
    )
    .expect("profile");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "aiperf",
        "--profile",
        profile.to_str().expect("utf-8"),
        "--output",
        dir.to_str().expect("utf-8"),
        "--run-id",
        name,
        "--sim-ttft",
        ttft,
        "--sim-itl",
        "1ms",
    ]);
    scheduled_records(cli).await
}

/// Runs `cli` and returns its records in the order they were scheduled.
async fn scheduled_records(cli: Cli) -> Vec<Value> {
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the run fails: {e}"));
    let text = std::fs::read_to_string(outcome.dir.join("requests.jsonl")).expect("requests.jsonl");
    let mut records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    records.sort_by_key(|r| ns(r, "scheduled_ns"));
    records
}

fn ns(record: &Value, field: &str) -> i64 {
    record[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {record}"))
}

/// Each record's scheduled time from the first's, in ns.
fn offsets(records: &[Value]) -> Vec<i64> {
    let origin = ns(&records[0], "scheduled_ns");
    records
        .iter()
        .map(|r| ns(r, "scheduled_ns") - origin)
        .collect()
}

fn assert_close(got: &[i64], want: &[i64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        // Gaps are whole nanoseconds: their sum may round a nanosecond or two off Python's float sum.
        assert!((g - w).abs() < 1_000, "{got:?} vs {want:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constant_request_rate_sends_the_first_at_once_then_one_every_period() {
    let dir = tempfile::tempdir().expect("temp dir");
    let records = run_aiperf(
        dir.path(),
        "constant",
        "osl: 2\nrequest-rate: 20\nrequest-rate-mode: constant\nrequest-count: 6\n",
        "5ms",
    )
    .await;
    // 1/20 s = 50 ms gaps, the first request at the start: 0, 50, …, 250 ms.
    assert_close(
        &offsets(&records),
        &[
            0,
            50_000_000,
            100_000_000,
            150_000_000,
            200_000_000,
            250_000_000,
        ],
    );
    assert!(records.iter().all(|r| r["http_status"] == 200));
    assert!(
        records
            .iter()
            .all(|r| ns(r, "sent_ns") >= ns(r, "scheduled_ns")),
        "nothing is sent early"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_poisson_rate_sends_at_cpythons_expovariate_gaps() {
    let dir = tempfile::tempdir().expect("temp dir");
    // `--request-rate-mode` left at AIPerf's default, poisson.
    let records = run_aiperf(
        dir.path(),
        "poisson",
        "osl: 2\nrequest-rate: 10\nrandom-seed: 7\nrequest-count: 5\n",
        "5ms",
    )
    .await;
    // CPython: r = random.Random(7); [r.expovariate(10.0) for _ in range(4)] →
    // [0.039131484423480425, 0.016351845700547814, 0.10524956180709269, 0.007519379323994551], summed in ns.
    assert_close(
        &offsets(&records),
        &[0, 39_131_484, 55_483_330, 160_732_892, 168_252_271],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_beside_a_rate_holds_each_send_until_a_slot_is_free() {
    let dir = tempfile::tempdir().expect("temp dir");
    // 1 ms gaps, but each answer takes 40 ms and one slot: every send waits for the previous answer.
    let records = run_aiperf(
        dir.path(),
        "semaphore",
        "osl: 2\nrequest-rate: 1000\nrequest-rate-mode: constant\nconcurrency: 1\nrequest-count: 4\n",
        "40ms",
    )
    .await;
    assert_eq!(records.len(), 4);
    for pair in records.windows(2) {
        assert!(
            ns(&pair[1], "sent_ns") >= ns(&pair[0], "end_ns"),
            "a send waits for the slot the previous request held: {pair:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_duration_stops_sending_and_its_grace_period_cuts_what_is_still_in_flight() {
    let dir = tempfile::tempdir().expect("temp dir");
    // 2 req/s for 1.2 s: sends at 0, 0.5 and 1.0 s (the next, at 1.5 s, is past the duration). Each answer takes
    // 400 ms: the first two are back by 0.9 s, the third (due at 1.4 s) is still in flight when the grace period
    // of 0 ends the phase at 1.2 s, and is cancelled.
    let flags = "osl: 2\nrequest-rate: 2\nrequest-rate-mode: constant\nbenchmark-duration: 1.2\n";
    let cut = run_aiperf(
        dir.path(),
        "cut",
        &format!("{flags}benchmark-grace-period: 0\n"),
        "400ms",
    )
    .await;
    assert_close(&offsets(&cut), &[0, 500_000_000, 1_000_000_000]);
    let outcomes: Vec<&Value> = cut.iter().map(|r| &r["error"]["class"]).collect();
    assert_eq!(
        outcomes,
        [&Value::Null, &Value::Null, &Value::from("cancelled")],
        "{cut:?}"
    );
    // AIPerf leaves the cut request out of its metrics altogether: two requests, no errors.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("cut/profile_export_aiperf.json"))
            .expect("aiperf export"),
    )
    .expect("json");
    assert_eq!(export["request_count"]["avg"], 2.0);
    assert!(export.get("error_request_count").is_none(), "{export}");

    // AIPerf's default grace of 30 s waits for the third answer.
    let graced = run_aiperf(dir.path(), "graced", flags, "400ms").await;
    assert_eq!(graced.len(), 3);
    assert!(graced.iter().all(|r| r["http_status"] == 200), "{graced:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_phase_is_paced_alike_and_the_profiling_phase_starts_once_it_returned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let records = run_aiperf(
        dir.path(),
        "warmup",
        "osl: 2\nrequest-rate: 20\nrequest-rate-mode: constant\nwarmup-request-count: 2\nrequest-count: 3\n",
        "100ms",
    )
    .await;
    assert_eq!(records.len(), 5);
    let (warmup, profiling): (Vec<Value>, Vec<Value>) =
        records.into_iter().partition(|r| r["warmup"] == true);
    // The warm-up phase: two sends 50 ms apart, flagged warm-up.
    assert_close(&offsets(&warmup), &[0, 50_000_000]);
    // The profiling phase: three sends 50 ms apart, the first once both warm-up answers were back.
    assert_close(&offsets(&profiling), &[0, 50_000_000, 100_000_000]);
    let warmup_done = warmup
        .iter()
        .map(|r| ns(r, "end_ns"))
        .max()
        .expect("warm-up");
    assert!(ns(&profiling[0], "scheduled_ns") >= warmup_done);
    // Left out of every figure: AIPerf's export counts the profiling phase only.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("warmup/profile_export_aiperf.json"))
            .expect("aiperf export"),
    )
    .expect("json");
    assert_eq!(export["request_count"]["avg"], 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_quick_start_sends_64_streamed_chats_at_seeded_poisson_gaps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "aiperf",
        "--profile",
        "quickstart",
        "--output",
        dir.path().to_str().expect("utf-8"),
        "--run-id",
        "quickstart",
        "--sim-ttft",
        "2ms",
        "--sim-itl",
        "1ms",
    ]);
    let records = scheduled_records(cli).await;
    assert_eq!(records.len(), 64);
    assert!(
        records
            .iter()
            .all(|r| r["http_status"] == 200 && r["streaming"] == true)
    );
    // No `--random-seed`: the gaps come from the run's seed, AIPerf's dialect default 0. CPython:
    // r = random.Random(0); the running sums of [r.expovariate(32.0) for _ in range(63)] begin
    // 0, 58143972, 102476133, 119529669, 128893491 ns and end at 2298326630 ns.
    let offsets = offsets(&records);
    assert_close(
        &[&offsets[..5], &offsets[63..]].concat(),
        &[
            0,
            58_143_972,
            102_476_133,
            119_529_669,
            128_893_491,
            2_298_326_630,
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn length_stddevs_are_drawn_once_per_dataset_entry_and_reused_in_turn() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Three entries, nine requests one at a time: each entry's drawn lengths come back every third request.
    let records = run_aiperf(
        dir.path(),
        "lengths",
        "isl-stddev: 15\nosl: 6\nosl-stddev: 3\nnum-dataset-entries: 3\nrequest-count: 9\n",
        "2ms",
    )
    .await;
    assert_eq!(records.len(), 9);
    let lengths: Vec<(u64, u64)> = records
        .iter()
        .map(|r| {
            (
                r["input_tokens"].as_u64().expect("input_tokens"),
                r["max_tokens"].as_u64().expect("max_tokens"),
            )
        })
        .collect();
    assert_eq!(lengths[..3], lengths[3..6], "{lengths:?}");
    assert_eq!(lengths[..3], lengths[6..], "{lengths:?}");
    // Drawn, not the mean: the entries differ from one another, and every length is at least 1.
    assert!(
        lengths[0] != lengths[1] || lengths[1] != lengths[2],
        "{lengths:?}"
    );
    assert!(
        lengths.iter().all(|&(i, o)| i >= 1 && o >= 1),
        "{lengths:?}"
    );
}

/// One short completion, whatever was asked.
fn short_completion(_: &common::WireRequest) -> String {
    common::ok_response(
        "application/json",
        r#"{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"a b","finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":2,"total_tokens":18}}"#,
    )
}

#[test]
fn extra_inputs_are_merged_into_every_body_with_aiperfs_types_and_headers_are_sent() {
    let (url, seen) = common::capturing_server(short_completion);
    let dir = tempfile::tempdir().expect("tempdir");
    // AIPerf's `coerce_value`: `2` an int, `0.0` and `0.95` floats, `true` a bool, `007` (a leading zero) and
    // `hi there` text; `ignore_eos` also sets llmbench's record of it.
    let profile = write(
        dir.path(),
        "extras.yaml",
        "model: m\nendpoint-type: completions\nisl: 16\nosl: 2\nrequest-count: 2\n\
         extra-inputs: min_tokens:2,temperature:0.0,top_p:0.95,ignore_eos:true,seed:007,note:hi there\n\
         header: X-Tenant:blue,X-Retries:3\n",
    );
    let output = llmbench()
        .args(["run", "--harness", "aiperf", "--profile"])
        .arg(&profile)
        .args(["--endpoint", &url, "--model", "m", "--tokenizer", "builtin"])
        .args(["--no-preflight", "--run-id", "r", "--output"])
        .arg(dir.path())
        .output()
        .expect("runs");
    succeeded(&output);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    for request in seen.iter() {
        assert!(
            request.line.starts_with("POST /v1/completions "),
            "{}",
            request.line
        );
        assert_eq!(request.header("x-tenant"), Some("blue"));
        assert_eq!(request.header("x-retries"), Some("3"));
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
        assert_eq!(body["model"], "m");
        assert_eq!(body["max_tokens"], 2);
        assert_eq!(body["stream"], false);
        assert_eq!(body["ignore_eos"], true);
        assert_eq!(body["min_tokens"], serde_json::json!(2));
        assert!(body["min_tokens"].is_i64());
        assert!(body["temperature"].is_f64() && body["temperature"] == 0.0);
        assert_eq!(body["top_p"], 0.95);
        assert_eq!(body["seed"], "007");
        assert_eq!(body["note"], "hi there");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goodput_counts_the_requests_within_every_objective_by_aiperfs_definitions() {
    let dir = tempfile::tempdir().expect("temp dir");
    // ignore_eos: every answer is 4 tokens, so each has an inter-token latency (a 1-token answer has none and is
    // never good, as AIPerf judges a missing metric).
    let flags = "streaming: none\nosl: 4\nrequest-count: 4\nextra-inputs: ignore_eos:true\n";
    // The simulator's first token comes after 20 ms: within 10 s every time, within 5 ms never.
    for (name, objectives, good) in [
        (
            "met",
            "time_to_first_token:10000 inter_token_latency:10000",
            4u64,
        ),
        (
            "missed",
            "time_to_first_token:5 inter_token_latency:10000",
            0,
        ),
    ] {
        let records = run_aiperf(
            dir.path(),
            name,
            &format!("{flags}goodput: '{objectives}'\n"),
            "20ms",
        )
        .await;
        assert_eq!(records.len(), 4);
        let export: Value = serde_json::from_str(
            &std::fs::read_to_string(
                dir.path()
                    .join(format!("{name}/profile_export_aiperf.json")),
            )
            .expect("aiperf export"),
        )
        .expect("json");
        assert_eq!(export["good_request_count"]["avg"], good as f64, "{export}");
        let duration = export["benchmark_duration"]["avg"]
            .as_f64()
            .expect("duration");
        let goodput = export["goodput"]["avg"].as_f64().expect("goodput");
        assert!((goodput - good as f64 / duration).abs() < 1e-9, "{export}");
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("{name}/summary.json")))
                .expect("summary"),
        )
        .expect("json");
        assert_eq!(summary["goodput"]["good"], good);
        // Each request's line in `profile_export.jsonl` says whether it was good, 1 or 0, as AIPerf 0.13's does.
        let per_request =
            std::fs::read_to_string(dir.path().join(format!("{name}/profile_export.jsonl")))
                .expect("per-request file");
        let flags: Vec<u64> = per_request
            .lines()
            .map(|l| {
                let line: Value = serde_json::from_str(l).expect("json");
                assert_eq!(line["metrics"]["good_request_count"]["unit"], "requests");
                line["metrics"]["good_request_count"]["value"]
                    .as_u64()
                    .expect("0 or 1")
            })
            .collect();
        assert_eq!(flags.len(), 4);
        assert_eq!(flags.iter().sum::<u64>(), good);
    }
}
