//! AIPerf's load flags through the binary's run path against the embedded simulator: `--request-rate` with its
//! two modes, `--random-seed`, `--concurrency` beside a rate, `--benchmark-duration` and its grace period. The
//! expected send times are worked out by hand from AIPerf 0.13's `RequestRateStrategy.execute_phase`
//! (`aiperf/timing/strategies/request_rate.py`) and its interval generators (`aiperf/timing/intervals.py`), and were
//! checked against the real AIPerf 0.13 run against `llmbench sim`: a send at the end of every interval, the first
//! one interval after the phase starts, on an absolute schedule (re-anchored at now only when more than 10 ms
//! behind); an interval that finds every concurrency slot taken sends nothing; each phase draws its intervals
//! afresh from a seed derived from `--random-seed`.

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
    let text = common::requests_jsonl(&outcome.dir.join("requests.jsonl")).expect("requests.jsonl");
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

/// AIPerf's re-anchoring window: a loop more than this behind its schedule moves the next target to now.
const CATCHUP_NS: i64 = 10_000_000;

/// Each gap between consecutive scheduled sends is `want`'s — or, where the loop fell more than AIPerf's
/// catch-up window behind (a loaded machine) and re-anchored at now, longer than it by more than that window.
fn assert_gaps(records: &[Value], want: &[i64]) {
    let got: Vec<i64> = records
        .windows(2)
        .map(|w| ns(&w[1], "scheduled_ns") - ns(&w[0], "scheduled_ns"))
        .collect();
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() < 1_000 || *g > w + CATCHUP_NS,
            "{got:?} vs {want:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constant_request_rate_sends_one_request_at_the_end_of_every_period() {
    let dir = tempfile::tempdir().expect("temp dir");
    let records = run_aiperf(
        dir.path(),
        "constant",
        "osl: 2\nrequest-rate: 20\nrequest-rate-mode: constant\nrequest-count: 6\n",
        "5ms",
    )
    .await;
    // 1/20 s = 50 ms intervals, the first one too: the stage's first send is 50 ms after it started (the run's
    // clock started before it), the rest 50 ms apart.
    assert!(ns(&records[0], "scheduled_ns") >= 50_000_000);
    assert_gaps(&records, &[50_000_000; 5]);
    assert!(records.iter().all(|r| r["http_status"] == 200));
    assert!(
        records
            .iter()
            .all(|r| ns(r, "sent_ns") >= ns(r, "scheduled_ns")),
        "nothing is sent early"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_poisson_rate_sends_at_aiperfs_derived_expovariate_intervals() {
    let dir = tempfile::tempdir().expect("temp dir");
    // `--request-rate-mode` left at AIPerf's default, poisson.
    let records = run_aiperf(
        dir.path(),
        "poisson",
        "osl: 2\nrequest-rate: 10\nrandom-seed: 7\nrequest-count: 5\n",
        "5ms",
    )
    .await;
    // CPython: seed = int.from_bytes(sha256(b"7:timing.request.poisson_interval").digest()[:8], "big");
    // r = random.Random(seed); [r.expovariate(10.0) for _ in range(5)] → [0.1605147518802048, 0.1649293716657253,
    // 0.00239603501796661, 0.07185324076243713, 0.05023841917435001]: the first send 160.5 ms into the stage,
    // the rest at the next four intervals.
    assert!(ns(&records[0], "scheduled_ns") >= 160_514_751);
    assert_gaps(&records, &[164_929_371, 2_396_035, 71_853_240, 50_238_419]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gamma_pattern_sends_at_aiperfs_derived_gammavariate_intervals() {
    let dir = tempfile::tempdir().expect("temp dir");
    let records = run_aiperf(
        dir.path(),
        "gamma",
        "osl: 2\nrequest-rate: 10\narrival-pattern: gamma\narrival-smoothness: 2\nrandom-seed: 7\n\
         request-count: 5\n",
        "5ms",
    )
    .await;
    // CPython: seed = int.from_bytes(sha256(b"7:timing.request.gamma_interval").digest()[:8], "big");
    // r = random.Random(seed); [r.gammavariate(2.0, 1 / (10 * 2.0)) for _ in range(5)] → [0.1476059590744059,
    // 0.05201173572001675, 0.07215025754107882, 0.05861179045251058, 0.08325563801687397]: shape 2 (smoother
    // than Poisson), mean 1/10 s; the first send 147.6 ms into the stage.
    assert!(ns(&records[0], "scheduled_ns") >= 147_605_959);
    assert_gaps(&records, &[52_011_735, 72_150_257, 58_611_790, 83_255_638]);
    assert!(records.iter().all(|r| r["http_status"] == 200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_beside_a_rate_skips_the_intervals_that_find_every_slot_taken() {
    let dir = tempfile::tempdir().expect("temp dir");
    // 50 ms intervals, one slot, answers of at least 70 ms: the interval after each send finds the slot taken and
    // sends nothing, so sends are at least two intervals apart and always on an interval's end.
    let records = run_aiperf(
        dir.path(),
        "slots",
        "osl: 2\nrequest-rate: 20\nrequest-rate-mode: constant\nconcurrency: 1\nrequest-count: 4\n",
        "70ms",
    )
    .await;
    assert_eq!(records.len(), 4);
    // One phase: no per-phase exports.
    assert!(!dir.path().join("slots/phase_manifest.json").exists());
    assert!(!dir.path().join("slots/phases").exists());
    for pair in records.windows(2) {
        assert!(
            ns(&pair[1], "sent_ns") >= ns(&pair[0], "end_ns"),
            "a send waits for the slot the previous request held: {pair:?}"
        );
        let gap = ns(&pair[1], "scheduled_ns") - ns(&pair[0], "scheduled_ns");
        assert!(gap >= 100_000_000 - 1_000, "an interval was skipped: {gap}");
        let off_interval = (gap + 1_000) % 50_000_000;
        assert!(
            off_interval < 2_000 || gap > 100_000_000 + CATCHUP_NS,
            "sends stay on the intervals' ends: {gap}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_duration_stops_sending_and_its_grace_period_cuts_what_is_still_in_flight() {
    let dir = tempfile::tempdir().expect("temp dir");
    // 2 req/s for 1.2 s: sends at 0.5 and 1.0 s (the next, at 1.5 s, is past the duration). Each answer takes
    // 400 ms: the first is back by 0.9 s, the second (due at 1.4 s) is still in flight when the grace period of 0
    // ends the phase at 1.2 s, and is cancelled.
    let flags = "osl: 2\nrequest-rate: 2\nrequest-rate-mode: constant\nbenchmark-duration: 1.2\n";
    let cut = run_aiperf(
        dir.path(),
        "cut",
        &format!("{flags}benchmark-grace-period: 0\n"),
        "400ms",
    )
    .await;
    assert_eq!(cut.len(), 2, "{cut:?}");
    assert_gaps(&cut, &[500_000_000]);
    let outcomes: Vec<&Value> = cut.iter().map(|r| &r["error"]["class"]).collect();
    assert_eq!(
        outcomes,
        [&Value::Null, &Value::from("cancelled")],
        "{cut:?}"
    );
    // AIPerf leaves the cut request out of its metrics altogether: one request, no errors.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("cut/profile_export_aiperf.json"))
            .expect("aiperf export"),
    )
    .expect("json");
    assert_eq!(export["request_count"]["avg"], 1.0);
    assert!(export.get("error_request_count").is_none(), "{export}");

    // AIPerf's default grace of 30 s waits for the second answer.
    let graced = run_aiperf(dir.path(), "graced", flags, "400ms").await;
    assert_eq!(graced.len(), 2);
    assert!(graced.iter().all(|r| r["http_status"] == 200), "{graced:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_phase_is_paced_alike_and_the_profiling_phase_starts_afresh_once_it_returned() {
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
    assert_gaps(&warmup, &[50_000_000]);
    // The profiling phase, with a generator of its own once both warm-up answers were back: its first send one
    // interval after that, then 50 ms apart.
    assert_gaps(&profiling, &[50_000_000, 50_000_000]);
    let warmup_done = warmup
        .iter()
        .map(|r| ns(r, "end_ns"))
        .max()
        .expect("warm-up");
    assert!(ns(&profiling[0], "scheduled_ns") >= warmup_done + 50_000_000);
    // Left out of every figure: AIPerf's export counts the profiling phase only.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("warmup/profile_export_aiperf.json"))
            .expect("aiperf export"),
    )
    .expect("json");
    assert_eq!(export["request_count"]["avg"], 3.0);
    // Two phases: AIPerf 0.13 writes each one's export under `phases/<name>/` and their manifest, the warm-up's
    // counting its own requests (the real AIPerf did so against `llmbench sim`).
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("warmup/phase_manifest.json")).expect("manifest"),
    )
    .expect("json");
    let names: Vec<&Value> = manifest["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| &p["phase_name"])
        .collect();
    assert_eq!(names, ["warmup", "profiling"]);
    let warmup_export: Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path()
                .join("warmup/phases/warmup/profile_export_aiperf.json"),
        )
        .expect("warm-up export"),
    )
    .expect("json");
    assert_eq!(warmup_export["request_count"]["avg"], 2.0);

    // AIPerf 0.13's rates divide by the phase's window (`observation_duration`): from the profiling phase's start
    // (once the warm-up returned) to the return of its last request — the stage's start and end in run.json —
    // not by `benchmark_duration` (first send to last response), which is an interval shorter here.
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("warmup/run.json")).expect("run.json"),
    )
    .expect("json");
    let stage = &run["end"]["stages"][0];
    let (start, end) = (
        stage["start_ns"].as_u64().expect("start"),
        stage["end_ns"].as_u64().expect("end"),
    );
    let window_s = (end - start) as f64 / 1e9;
    let avg = |v: &Value, tag: &str| v[tag]["avg"].as_f64().expect(tag);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(
        close(avg(&export, "request_throughput"), 3.0 / window_s),
        "{export}"
    );
    assert!(close(
        avg(&export, "output_token_throughput"),
        avg(&export, "total_osl") / window_s
    ));
    assert!(close(
        avg(&export, "input_token_throughput"),
        avg(&export, "total_isl") / window_s
    ));
    assert!(close(
        avg(&export, "total_token_throughput"),
        (avg(&export, "total_isl") + avg(&export, "total_osl")) / window_s
    ));
    assert!(
        avg(&export, "benchmark_duration") + 0.04 < window_s,
        "{export}"
    );
    // Every distribution with its count and sum; the record metrics of profile_export.jsonl aggregated (this
    // run does not stream: no TTFT or chunk timing, as in AIPerf 0.13).
    assert_eq!(export["request_latency"]["count"], 3);
    assert!(close(
        export["request_latency"]["sum"].as_f64().expect("sum"),
        3.0 * avg(&export, "request_latency")
    ));
    for tag in [
        "credit_to_start_latency",
        "e2e_output_token_throughput",
        "output_token_count",
        "usage_prompt_tokens",
        "usage_completion_tokens",
        "usage_total_tokens",
        "osl_mismatch_diff_pct",
    ] {
        assert!(export[tag]["count"].as_u64().is_some(), "{tag}: {export}");
    }
    for absent in [
        "time_to_first_token",
        "inter_chunk_latency",
        "decode_duration",
    ] {
        assert!(export.get(absent).is_none(), "{absent}: {export}");
    }
    assert_eq!(export["completed_request_count"]["avg"], 3.0);
    assert_eq!(export["request_error_rate"]["avg"], 0.0);
    assert_eq!(export["total_output_tokens"], export["total_osl"]);
    assert_eq!(export["schema_version"], "1.4");
    assert_eq!(export["error_summary"], Value::Array(Vec::new()));
    assert_eq!(export["is_complete"], true);
    let (start_time, end_time) = (
        export["start_time"].as_str().expect("start_time"),
        export["end_time"].as_str().expect("end_time"),
    );
    assert!(
        start_time < end_time && start_time.starts_with("20"),
        "{export}"
    );
    // The warm-up's own metrics, over its window: its first credit to the profiling phase's start.
    let warmup_metrics = &export["warmup_metrics"];
    assert_eq!(warmup_metrics["request_count"]["avg"], 2.0);
    let first_credit = warmup
        .iter()
        .map(|r| ns(r, "scheduled_ns"))
        .min()
        .expect("warm-up");
    assert!(close(
        avg(warmup_metrics, "request_throughput"),
        2.0 / ((start as i64 - first_credit) as f64 / 1e9)
    ));
    let csv = std::fs::read_to_string(dir.path().join("warmup/profile_export_aiperf.csv"))
        .expect("aiperf csv");
    assert!(
        csv.starts_with("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\r\n"),
        "{csv}"
    );
    assert!(
        csv.contains("\r\nCompleted Requests (Success + Error),3.00\r\n"),
        "{csv}"
    );
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
    // No `--random-seed`: the intervals come from the run's seed, AIPerf's dialect default 0. CPython:
    // r = random.Random(int.from_bytes(sha256(b"0:timing.request.poisson_interval").digest()[:8], "big")); of
    // [r.expovariate(32.0) for _ in range(64)] the first is the first send's, and the running sums of the other 63
    // begin 0, 47613994, 60513887, 89756024, 108865735 ns and end at 1964999754 ns.
    let offsets = offsets(&records);
    // On a machine that kept up the sums are exact; where the loop fell behind and re-anchored, they move later.
    let want = [
        47_613_994,
        60_513_887 - 47_613_994,
        89_756_024 - 60_513_887,
        108_865_735 - 89_756_024,
    ];
    assert_gaps(&records[..5], &want);
    assert!(offsets[63] >= 1_964_999_754 - 1_000, "{offsets:?}");
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
        // AIPerf 0.13's goodput divides by the phase's window (the stage's start to its end in run.json), which
        // holds the benchmark duration.
        let run: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("{name}/run.json")))
                .expect("run.json"),
        )
        .expect("json");
        let stage = &run["end"]["stages"][0];
        let window_s = (stage["end_ns"].as_u64().expect("end")
            - stage["start_ns"].as_u64().expect("start")) as f64
            / 1e9;
        assert!(duration <= window_s, "{export}");
        let goodput = export["goodput"]["avg"].as_f64().expect("goodput");
        assert!((goodput - good as f64 / window_s).abs() < 1e-9, "{export}");
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

/// The `at_ns` of a record's first content chunk (its first token).
fn first_token_ns(record: &Value) -> Option<i64> {
    record["chunks"]
        .as_array()?
        .iter()
        .find(|c| c["kind"] == "content")
        .map(|c| ns(c, "at_ns"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_cancellation_abandons_aiperfs_drawn_credits_once_sent_and_counts_them_as_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    // `--random-seed 7`, 50 %: AIPerf's `"7:timing.request.cancellation"` generator draws 0.5931, 0.2288, 0.4141,
    // 0.6010, 0.2441, 0.2316, 0.6101, 0.5867, 0.3892, 0.7711 for the ten profiling credits, so the 2nd, 3rd, 5th,
    // 6th and 9th are cancelled (the real AIPerf 0.13 run the same way against `llmbench sim` cancelled exactly
    // those, with this error); the two warm-up credits draw nothing. Answers take at least 500 ms, so each
    // cancelled request is abandoned 50 ms after it was written, long before any token (a loaded machine has
    // 450 ms to spare).
    let records = run_aiperf(
        dir.path(),
        "cancel",
        "streaming: true\nosl: 8\nrequest-rate: 20\nrequest-rate-mode: constant\nrequest-count: 10\n\
         warmup-request-count: 2\nrandom-seed: 7\nrequest-cancellation-rate: 50\n\
         request-cancellation-delay: 0.05\n",
        "500ms",
    )
    .await;
    let (warmup, profiling): (Vec<Value>, Vec<Value>) =
        records.into_iter().partition(|r| r["warmup"] == true);
    assert_eq!(warmup.len(), 2);
    assert!(warmup.iter().all(|r| r["error"].is_null()), "{warmup:?}");
    let classes: Vec<&str> = profiling
        .iter()
        .map(|r| r["error"]["class"].as_str().unwrap_or("ok"))
        .collect();
    let (ok, cut) = ("ok", "client_cancelled");
    assert_eq!(classes, [ok, cut, cut, ok, cut, cut, ok, ok, cut, ok]);
    for r in profiling.iter().filter(|r| !r["error"].is_null()) {
        assert_eq!(
            r["error"]["message"], "Request cancelled 0.050s after being sent",
            "{r}"
        );
        assert!(ns(r, "end_ns") - ns(r, "sent_ns") >= 50_000_000, "{r}");
        assert!(
            first_token_ns(r).is_none(),
            "abandoned before its first token: {r}"
        );
    }
    // AIPerf counts each as an error request, with its 499 `RequestCancellationError` in the per-request file.
    let run = dir.path().join("cancel");
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("profile_export_aiperf.json")).expect("aiperf export"),
    )
    .expect("json");
    assert_eq!(export["request_count"]["avg"], 5.0, "{export}");
    assert_eq!(export["error_request_count"]["avg"], 5.0, "{export}");
    // AIPerf 0.13's export: the five as one entry of `error_summary`, 10 completed, a 50 % error rate, no context
    // overflow, and the error-adjusted latencies: the 5 valid values beside 5 `+inf`, numpy's nearest rank 9·p
    // (rounded half to even) finite up to p50 (4.5 → 4) and past it (p75: 6.75 → 7) infinite, left out as the
    // mean, max and sum are.
    assert_eq!(
        export["error_summary"],
        serde_json::json!([{
            "error_details": {
                "code": 499,
                "type": "RequestCancellationError",
                "message": "Request cancelled 0.050s after being sent"
            },
            "count": 5
        }])
    );
    assert_eq!(export["completed_request_count"]["avg"], 10.0);
    assert_eq!(export["request_error_rate"]["avg"], 50.0);
    assert_eq!(export["context_overflow_count"]["avg"], 0.0);
    for tag in ["adj_request_latency", "adj_time_to_first_token"] {
        let adjusted = &export[tag];
        assert_eq!(adjusted["count"], 10, "{tag}: {export}");
        assert_eq!(adjusted["min"], export[&tag[4..]]["min"], "{tag}");
        assert!(
            adjusted["p50"].is_number() && adjusted.get("p75").is_none(),
            "{tag}: {adjusted}"
        );
        for absent in ["avg", "max", "sum", "std"] {
            assert!(adjusted.get(absent).is_none(), "{tag}.{absent}: {adjusted}");
        }
    }
    let lines: Vec<Value> = std::fs::read_to_string(run.join("profile_export.jsonl"))
        .expect("profile_export.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let cancelled: Vec<&Value> = lines.iter().filter(|l| l.get("error").is_some()).collect();
    assert_eq!(cancelled.len(), 5);
    for line in cancelled {
        assert_eq!(
            line["error"],
            serde_json::json!({
                "code": 499,
                "type": "RequestCancellationError",
                "message": "Request cancelled 0.050s after being sent"
            })
        );
        assert_eq!(line["metadata"]["was_cancelled"], true);
        assert_eq!(line["metadata"]["benchmark_phase"], "profiling");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefill_concurrency_holds_each_send_until_the_previous_request_had_its_first_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Four session slots but one prefill slot: AIPerf's burst issues a credit only when both are free, and a
    // prefill slot frees at its request's first token (100 ms after the send), so every send waits for the
    // previous request's first token while up to four requests decode (each 200 tokens, 1 ms apart). The real
    // AIPerf 0.13 did the same against `llmbench sim`: sends at 0, 112.7, 220.3, 326.4 ms, each just after the
    // previous first token (111.1, 219.1, 323.9 ms).
    let records = run_aiperf(
        dir.path(),
        "prefill",
        "streaming: true\nosl: 200\nconcurrency: 4\nprefill-concurrency: 1\nrequest-count: 6\n",
        "100ms",
    )
    .await;
    assert_eq!(records.len(), 6);
    assert!(records.iter().all(|r| r["error"].is_null()), "{records:?}");
    let mut records = records;
    records.sort_by_key(|r| ns(r, "sent_ns"));
    let mut overlapped = false;
    for pair in records.windows(2) {
        let first_token = first_token_ns(&pair[0]).expect("a first token");
        assert!(
            ns(&pair[1], "sent_ns") >= first_token,
            "a send waits for the prefill slot: {pair:?}"
        );
        overlapped |= ns(&pair[1], "sent_ns") < ns(&pair[0], "end_ns");
    }
    assert!(
        overlapped,
        "the session slots let requests decode together: {records:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_ramp_opens_one_more_session_slot_at_each_step_of_its_duration() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Three slots ramped over 0.6 s (AIPerf's linear stepped ramp from 1): slot 2 from 0.3 s, slot 3 from 0.6 s (the
    // real AIPerf 0.13 against `llmbench sim` with one-second answers sent at 0, 297.5 and 598.4 ms).
    // Answers take at least a second, so the second and third sends go out when their slots open, not when an
    // answer frees one. The ramp counts from the phase's start, which is the first credit's scheduled time: the
    // first send itself may leave a few milliseconds later on a loaded machine (CI's once left 2.6 ms late, so
    // the next send came 297.4 ms after it, as the real AIPerf's 297.5 ms did).
    let records = run_aiperf(
        dir.path(),
        "ramp",
        "osl: 2\nconcurrency: 3\nconcurrency-ramp-duration: 0.6\nrequest-count: 3\n",
        "1000ms",
    )
    .await;
    assert_eq!(records.len(), 3);
    // A send that waited for its slot is scheduled when the slot came free (AIPerf issues its credit then).
    let after = |i: usize| ns(&records[i], "scheduled_ns") - ns(&records[0], "scheduled_ns");
    assert!(after(1) >= 300_000_000, "{records:?}");
    assert!(after(2) >= 600_000_000, "{records:?}");
    for r in &records[1..] {
        assert!(
            ns(r, "sent_ns") < ns(&records[0], "end_ns"),
            "a ramped slot, not a returned one: {records:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_rate_ramp_starts_slow_and_reaches_the_rate_once_its_duration_passed() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Constant 20 req/s ramped over 1 s: AIPerf starts at 20 · 0.1 / 1 = 2 req/s and raises the rate every 100 ms
    // (3.8, 5.6, 7.4, … req/s), each change pulling the next send in to now plus one interval at the new rate:
    // by hand, sends near 0.363, 0.498, 0.591, 0.678, 0.756, 0.825, 0.886, 0.940, 0.995 s (gaps of 135, 93, 87,
    // 78, 68, 61, 55, 55 ms; a run measured 134.9, 93.9, 87.5, 78.0, 68.3, 60.8, 60.8, 54.8, the updates drifting
    // by their wake-ups as AIPerf's do — the real AIPerf 0.13 sent 134.4, 94.9, 87.0, 78.0, 68.4, 60.8, 60.7, 58.3
    // against `llmbench sim`), then exactly 50 ms apart.
    let records = run_aiperf(
        dir.path(),
        "rate-ramp",
        "osl: 2\nrequest-rate: 20\nrequest-rate-mode: constant\nrequest-rate-ramp-duration: 1\n\
         request-count: 16\n",
        "2ms",
    )
    .await;
    assert_eq!(records.len(), 16);
    let gaps: Vec<i64> = records
        .windows(2)
        .map(|w| ns(&w[1], "scheduled_ns") - ns(&w[0], "scheduled_ns"))
        .collect();
    // Ramping: the first gap at about 7.4 req/s (135 ms), far from the rate's 50 ms.
    assert!(gaps[0] > 100_000_000, "{gaps:?}");
    // Ramped: the rate's own period, as a constant rate's.
    for gap in &gaps[gaps.len() - 4..] {
        assert!(
            (gap - 50_000_000).abs() < 1_000 || *gap > 50_000_000 + CATCHUP_NS,
            "{gaps:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_rate_series_moves_the_rate_between_its_points() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The series (0 s, 4 req/s) → (0.6 s, 20 req/s) drives a constant phase: its rate is the first point's, 4 req/s
    // (first send at 0.25 s), raised every 100 ms along the line, each change pulling the next send in: by hand,
    // sends at 0.250, 0.357, 0.440, 0.508, 0.566, 0.623 s (gaps of 107, 83, 68, 58, 58 ms; the real AIPerf 0.13
    // with the same series file against `llmbench sim` measured 106.7, 83.2, 67.9, 57.6, 57.5), then 20 req/s,
    // 50 ms apart, from 0.6 s.
    let records = run_aiperf(
        dir.path(),
        "series",
        "osl: 2\nrequest-rate-mode: constant\nrequest-count: 14\n\
         request-rate-series: [{time_s: 0, qps: 4}, {time_s: 0.6, qps: 20}]\n",
        "2ms",
    )
    .await;
    assert_eq!(records.len(), 14);
    let gaps: Vec<i64> = records
        .windows(2)
        .map(|w| ns(&w[1], "scheduled_ns") - ns(&w[0], "scheduled_ns"))
        .collect();
    assert!(gaps[0] > 90_000_000, "{gaps:?}");
    for gap in &gaps[gaps.len() - 4..] {
        assert!(
            (gap - 50_000_000).abs() < 1_000 || *gap > 50_000_000 + CATCHUP_NS,
            "{gaps:?}"
        );
    }
}
