//! AIPerf 0.13's YAML config files (`aiperf profile --config FILE`) given to `llmbench run --harness aiperf` as the
//! profile, through the binary against the simulator: the config runs as the flags it stands for (checked side by
//! side with the real AIPerf 0.13 on the same files: the same warm-up and profiling request counts, the same body
//! fields), and a key llmbench does not run is refused with the config's file, line and key.

mod common;

use common::{SimProcess, run_profile, stderr, succeeded, write};
use serde_json::Value;

/// A warm-up phase paced like the profiling phase (AIPerf's `--warmup-request-count` shape), 5 then 12 requests
/// of 32-token prompts and 16-token answers, the URL written with its path as AIPerf's templates write it.
fn config(url: &str, extra_phase_key: &str) -> String {
    format!(
        "schemaVersion: \"2.0\"\nrandomSeed: 7\nbenchmark:\n  model: m\n  endpoint:\n    \
         url: {url}/v1/chat/completions\n    type: chat\n    streaming: true\n  dataset:\n    type: synthetic\n    \
         entries: 12\n    prompts:\n      isl: 32\n      osl: 16\n  warmup:\n    type: constant\n    rate: 50\n    \
         requests: 5\n  profiling:\n    type: constant\n    rate: 50\n    requests: 12\n{extra_phase_key}  \
         slos:\n    request_latency: 60000\n  artifacts:\n    dir: ./artifacts\n"
    )
}

fn records(dir: &std::path::Path, run_id: &str) -> Vec<Value> {
    common::requests_jsonl(&dir.join(run_id).join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

#[test]
fn a_config_file_runs_its_warmup_and_profiling_phases_as_aiperf_does() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "bench.yaml", &config(&sim.url, ""));
    let out = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "cfg",
        &["--tokenizer", "builtin", "--no-server-metrics"],
    );
    succeeded(&out);
    let records = records(dir.path(), "cfg");
    let warmup = records.iter().filter(|r| r["warmup"] == true).count();
    assert_eq!((records.len(), warmup), (17, 5));
    for r in &records {
        // `osl: 16` is every body's `max_completion_tokens`; streamed, to the URL's own path (not doubled).
        assert_eq!(r["max_tokens"], 16, "{r}");
        assert_eq!(r["streaming"], true, "{r}");
        assert_eq!(r["http_status"], 200, "{r}");
    }
    // The output-only `artifacts` section is named among what was not acted on.
    assert!(
        stderr(&out).contains("benchmark.artifacts"),
        "{}",
        stderr(&out)
    );
    // AIPerf's own exports, with the goodput of `slos`.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("cfg").join("profile_export_aiperf.json"))
            .expect("export"),
    )
    .expect("json");
    assert_eq!(export["good_request_count"]["avg"], 12.0, "{export}");
    // run.json says when the stage's first request (a warm-up) went out, before its figures start: the server's
    // windows know nothing of the run is sent before then.
    let run = json(&dir.path().join("cfg/run.json"));
    let stage = &run["end"]["stages"][0];
    let (began, start) = (
        stage["began_ns"].as_u64().expect("began_ns"),
        stage["start_ns"].as_u64().expect("start_ns"),
    );
    let first_sent = |warmup: bool| {
        records
            .iter()
            .filter(|r| (r["warmup"] == true) == warmup)
            .filter_map(|r| r["sent_ns"].as_u64())
            .min()
            .expect("sent_ns")
    };
    assert!(began <= first_sent(true), "{stage}");
    assert!(
        first_sent(true) < start && start <= first_sent(false),
        "{stage}"
    );
}

#[test]
fn a_config_key_llmbench_does_not_run_is_refused_with_its_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "bench.yaml",
        &config("http://127.0.0.1:9", "    burstPhaseStarts: true\n"),
    );
    let out = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "cfg",
        &["--tokenizer", "builtin"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "bench.yaml:23: `benchmark.profiling.burstPhaseStarts`: the AIPerf phase key"
        ),
        "{}",
        stderr(&out)
    );
    let typo = config("http://127.0.0.1:9", "    concurency: 2\n");
    let profile = write(dir.path(), "typo.yaml", &typo);
    let out = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "typo",
        &["--tokenizer", "builtin"],
    );
    assert!(
        stderr(&out).contains("typo.yaml:23: `benchmark.profiling.concurency`")
            && stderr(&out).contains("did you mean `concurrency`?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_fixed_schedule_phase_replays_a_mooncake_trace_at_its_own_times() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "2ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write(
        dir.path(),
        "trace.jsonl",
        "{\"timestamp\": 1000, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [1]}\n\
         {\"timestamp\": 1040, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [2]}\n\
         {\"timestamp\": 1100, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [3]}\n\
         {\"timestamp\": 1250, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [4]}\n",
    );
    // `FixedSchedulePhase`: no stop condition, `auto_offset` on unless said.
    let config = format!(
        "benchmark:\n  model: m\n  endpoint:\n    url: {}\n    type: completions\n  dataset:\n    type: file\n    \
         path: {}\n    format: mooncake_trace\n  profiling:\n    type: fixed_schedule\n",
        sim.url,
        trace.display()
    );
    let profile = write(dir.path(), "bench.yaml", &config);
    let out = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "fixed",
        &["--tokenizer", "builtin", "--no-server-metrics"],
    );
    succeeded(&out);
    let mut scheduled: Vec<u64> = records(dir.path(), "fixed")
        .iter()
        .map(|r| r["scheduled_ns"].as_u64().expect("scheduled_ns"))
        .collect();
    scheduled.sort_unstable();
    let offsets_ms: Vec<f64> = scheduled
        .iter()
        .map(|t| (t - scheduled[0]) as f64 / 1e6)
        .collect();
    assert_eq!(offsets_ms.len(), 4);
    for (got, want) in offsets_ms.iter().zip([0.0, 40.0, 100.0, 250.0]) {
        assert!((got - want).abs() < 0.01, "{offsets_ms:?}");
    }
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the file")).expect("json")
}

/// A config of several named phases (as the real AIPerf 0.13 ran the same file against `llmbench sim`): each
/// profiling phase runs after the one before it drained, the top-level export counts every profiling request,
/// and AIPerf's `phases/<name>/` exports, `phase_manifest.json` and each record's phase metadata are written.
#[test]
fn several_profiling_phases_run_in_order_with_aiperfs_phase_exports_and_manifest() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: {}\n    type: chat\n    \
         streaming: true\n  dataset: {{entries: 5, isl: 8, osl: 4}}\n  phases:\n    - {{name: warmup, type: \
         concurrency, concurrency: 2, requests: 2}}\n    - {{name: baseline, kind: profiling, type: concurrency, \
         concurrency: 2, requests: 4}}\n    - {{name: burst, kind: profiling, type: constant, rate: 20, \
         requests: 6}}\n",
        sim.url
    );
    let profile = write(dir.path(), "multi.yaml", &config);
    let out = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "multi",
        &["--tokenizer", "builtin", "--no-server-metrics"],
    );
    succeeded(&out);
    let run = dir.path().join("multi");
    let mut records = records(dir.path(), "multi");
    records.sort_by_key(|r| r["id"].as_u64());
    let stages: Vec<(bool, u64)> = records
        .iter()
        .map(|r| (r["warmup"] == true, r["stage"].as_u64().unwrap_or(0)))
        .collect();
    let (w, s0, s1) = ((true, 0), (false, 0), (false, 1));
    assert_eq!(stages, [w, w, s0, s0, s0, s0, s1, s1, s1, s1, s1, s1]);
    // The burst phase starts once the baseline phase drained.
    let baseline_end = records[2..6]
        .iter()
        .map(|r| r["end_ns"].as_u64().unwrap_or(0))
        .max();
    assert!(
        records[6]["sent_ns"].as_u64() >= baseline_end,
        "{records:?}"
    );

    // Over several phases AIPerf's duration and rates are over the sum of the phases' windows (each stage's start
    // to its last answer, as run.json has them).
    let top = json(&run.join("profile_export_aiperf.json"));
    assert_eq!(top["request_count"]["avg"], 10.0);
    let meta = json(&run.join("run.json"));
    let windows: u64 = meta["end"]["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| s["end_ns"].as_u64().unwrap_or(0) - s["start_ns"].as_u64().unwrap_or(0))
        .sum();
    let summed = windows as f64 / 1e9;
    let close = |a: &Value, b: f64| (a.as_f64().expect("a number") - b).abs() <= 1e-9 * b;
    assert!(close(&top["benchmark_duration"]["avg"], summed), "{top}");
    assert!(
        close(&top["request_throughput"]["avg"], 10.0 / summed),
        "{top}"
    );
    let manifest = json(&run.join("phase_manifest.json"));
    assert_eq!(manifest["schema_version"], 1);
    let phases = manifest["phases"].as_array().expect("phases");
    let rows: Vec<(u64, Value, &str, &str, u64)> = phases
        .iter()
        .map(|p| {
            (
                p["phase_index"].as_u64().unwrap_or(99),
                p["profiling_index"].clone(),
                p["phase_name"].as_str().unwrap_or(""),
                p["phase_kind"].as_str().unwrap_or(""),
                p["total_request_count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (0, Value::Null, "warmup", "warmup", 2),
            (1, Value::from(0), "baseline", "profiling", 4),
            (2, Value::from(1), "burst", "profiling", 6),
        ]
    );
    for (name, count) in [("warmup", 2.0), ("baseline", 4.0), ("burst", 6.0)] {
        let export = json(
            &run.join("phases")
                .join(name)
                .join("profile_export_aiperf.json"),
        );
        assert_eq!(export["request_count"]["avg"], count, "{name}");
        assert!(
            run.join("phases")
                .join(name)
                .join("profile_export_aiperf.csv")
                .exists()
        );
    }
    // Each record says its phase, numbered from 0 within it.
    let lines: Vec<Value> = std::fs::read_to_string(run.join("profile_export.jsonl"))
        .expect("profile_export.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a line"))
        .collect();
    let mut burst: Vec<u64> = lines
        .iter()
        .filter(|l| l["metadata"]["phase_name"] == "burst")
        .map(|l| {
            assert_eq!(l["metadata"]["phase_index"], 2);
            assert_eq!(l["metadata"]["profiling_index"], 1);
            l["metadata"]["session_num"].as_u64().expect("session_num")
        })
        .collect();
    burst.sort_unstable();
    assert_eq!(burst, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn a_phases_failed_request_threshold_stops_the_run_after_its_grace_floor_of_measured_requests() {
    // Every answer is a 500. AIPerf's check counts the profiling phase's records only and is armed once
    // max(concurrency, 10) = 10 of them finished (no concurrency: 1): the five failed warm-ups do not count, so the
    // run stops at the tenth failed profiling request, not the fifth, and exits non-zero.
    let sim = SimProcess::start(&[
        "--model",
        "m",
        "--ttft",
        "5ms",
        "--itl",
        "1ms",
        "--failure-rate",
        "1",
        "--failure-kinds",
        "http500",
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "bench.yaml",
        &config(&sim.url, "    failedRequestThreshold: 0.5\n")
            .replace("requests: 12", "requests: 200"),
    );
    let out = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "abort",
        &[
            "--tokenizer",
            "builtin",
            "--no-server-metrics",
            "--no-preflight",
        ],
    );
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--failed-request-threshold exceeded: 10/10"),
        "{}",
        stderr(&out)
    );
    let records = records(dir.path(), "abort");
    let warmups = records.iter().filter(|r| r["warmup"] == true).count();
    let measured = records.len() - warmups;
    assert_eq!(warmups, 5);
    // The tenth trips it and what was still in flight is cancelled: a handful at 50 req/s and 5 ms answers, more on
    // a machine that stalls, but far from the 200 asked (4 s of sends).
    assert!((10..200).contains(&measured), "{measured} measured records");
    let summary = json(&dir.path().join("abort/summary.json"));
    assert_eq!(
        summary["run"]["stopped"]["reason"], "failed_request_threshold",
        "{summary:#}"
    );
    // AIPerf finalises the abort as a cancelled run.
    let export = json(&dir.path().join("abort/profile_export_aiperf.json"));
    assert_eq!(export["was_cancelled"], true, "{export:#}");
    assert_eq!(export["is_complete"], false, "{export:#}");
    // Per phase: the cancel marks the profiling phase, not the warm-up that had finished; both exports say the
    // run did not complete.
    let manifest = json(&dir.path().join("abort/phase_manifest.json"));
    let cancelled: Vec<(&str, &Value)> = manifest["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| (p["phase_kind"].as_str().unwrap_or(""), &p["was_cancelled"]))
        .collect();
    assert_eq!(
        cancelled,
        [
            ("warmup", &Value::Bool(false)),
            ("profiling", &Value::Bool(true))
        ]
    );
    for (phase, cancelled) in [("warmup", false), ("profiling", true)] {
        let export = json(
            &dir.path()
                .join("abort/phases")
                .join(phase)
                .join("profile_export_aiperf.json"),
        );
        assert_eq!(export["was_cancelled"], cancelled, "{phase}");
        assert_eq!(export["is_complete"], false, "{phase}");
    }
}
