//! Sweeps through the real binary against the embedded simulator: guidellm's `sweep` runs synchronous, throughput,
//! then rates interpolated between the two measured rates, and benchmarks.json names each strategy with its rate;
//! inference-perf's `load.sweep` runs a saturation probe that no report counts, then `num_stages` stages at the
//! rates `generateRates` makes of the probe's saturation. The expected rates are recomputed here from the run's own
//! files, the way each tool computes them.

mod common;

use std::io::{BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use common::*;

fn records(dir: &Path) -> Vec<Value> {
    common::requests_jsonl(&dir.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect()
}

/// A loopback URL nothing listens on: every request to it fails at once (connection refused).
fn closed_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    url
}

/// A completions server that answers the n-th request it reads (from 1) with a 500 when `fails(n)`, and every
/// other one, after 20 ms, with a short stream.
fn scripted_server(fails: fn(u64) -> bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let count = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let count = Arc::clone(&count);
            std::thread::spawn(move || answer(stream, &count, fails));
        }
    });
    url
}

fn answer(stream: TcpStream, count: &AtomicU64, fails: fn(u64) -> bool) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let Some(body) = common::read_request(&mut reader) else {
            return;
        };
        // As many tokens as asked: an answer shorter than asked would be counted cut short.
        let asked = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|b| b["max_tokens"].as_u64())
            .unwrap_or(2);
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        let response = if fails(n) {
            let error = r#"{"error": {"message": "scripted failure", "type": "server_error"}}"#;
            format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{error}",
                error.len()
            )
        } else {
            std::thread::sleep(Duration::from_millis(20));
            let text = " t".repeat(asked as usize);
            let chunk = format!(
                r#"{{"choices": [{{"index": 0, "text": "{text}", "finish_reason": "length"}}]}}"#
            );
            let usage = format!(
                r#"{{"choices": [], "usage": {{"prompt_tokens": 1, "completion_tokens": {asked}}}}}"#
            );
            let events = format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n");
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{events}",
                events.len()
            )
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// numpy's `linspace(a, b, n)`: `i · (b − a)/(n − 1) + a`, the last value exactly `b`.
fn linspace(a: f64, b: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![a];
    }
    let step = (b - a) / (n - 1) as f64;
    (0..n)
        .map(|i| if i == n - 1 { b } else { i as f64 * step + a })
        .collect()
}

/// numpy's `round(x, 2)` of a float64.
fn round2(x: f64) -> f64 {
    (x * 100.0).round_ties_even() / 100.0
}

/// inference-perf's `generateRates(sat, n, geometric)`: `round(1 + sat − g, 2)` for g in `np.geomspace(sat, 1, n)`
/// (`10 ** linspace(log10 sat, 0, n)`, the ends exactly sat and 1).
fn geometric_rates(sat: f64, n: usize) -> Vec<f64> {
    linspace(sat.log10(), 0.0, n)
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let g = match i {
                0 => sat,
                _ if i == n - 1 => 1.0,
                _ => 10f64.powf(l),
            };
            round2(1.0 + sat - g)
        })
        .collect()
}

/// inference-perf's `preprocess` over the probe's records: its active-request counter (sent ≤ t < end), sampled
/// every 0.5 s from 1 s before the probe's schedule starts, kept while before start − 1 s + timeout; the rates of
/// every fall between two samples, and their `percentile`-th percentile (numpy linear).
fn saturation(probe: &[(u64, u64)], start_ns: u64, timeout_s: u64, percentile: f64) -> f64 {
    let first = i128::from(start_ns) - 1_000_000_000;
    let until = first + i128::from(timeout_s) * 1_000_000_000;
    let active = |t: i128| {
        probe
            .iter()
            .filter(|(sent, end)| i128::from(*sent) <= t && t < i128::from(*end))
            .count() as f64
    };
    let samples: Vec<f64> = (0..)
        .map(|k| first + 500_000_000 * k)
        .take_while(|t| *t < until)
        .map(active)
        .collect();
    let mut rates: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[1] < w[0])
        .map(|w| (w[0] - w[1]) / 0.5)
        .collect();
    assert!(rates.len() >= 2, "the probe fell too few times: {rates:?}");
    rates.sort_by(f64::total_cmp);
    let h = (rates.len() - 1) as f64 * percentile / 100.0;
    let (lo, hi) = (
        h.floor() as usize,
        (h.floor() as usize + 1).min(rates.len() - 1),
    );
    rates[lo] + (rates[hi] - rates[lo]) * (h - h.floor())
}

const GUIDELLM_SWEEP: &str = "\
spec:
  backend:
    kind: openai_http
    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL
    model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL
    request_format: /v1/completions
    stream: true
  data:
    - kind: synthetic_text
      prompt_tokens: 20
      output_tokens: 10
  profile:
    kind: sweep
    sweep_size: SIZE
    strategy_type: STRATEGY
    max_concurrency: 8
  constraints: CONSTRAINTS
";

/// A guidellm v0.7 sweep scenario; `constraints` is a flow list.
fn guidellm_sweep(size: u32, strategy: &str, constraints: &str) -> String {
    GUIDELLM_SWEEP
        .replace("SIZE", &size.to_string())
        .replace("STRATEGY", strategy)
        .replace("CONSTRAINTS", constraints)
}

/// The benchmarks of a guidellm run's benchmarks.json.
fn benchmarks(run: &Path) -> Vec<Value> {
    json(&run.join("benchmarks.json"))["benchmarks"]
        .as_array()
        .expect("benchmarks")
        .clone()
}

/// Rates that agree to what a JSON reader keeps: serde_json (built without its `float_roundtrip` feature) may read
/// a float a few units in the last place off, so rates recomputed from benchmarks.json can differ from the ones
/// written there by that much and no more.
fn assert_same_rates(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
    for (a, e) in actual.iter().zip(expected) {
        assert!(
            (a - e).abs() <= 1e-12 * e.abs(),
            "{actual:?} vs {expected:?}"
        );
    }
}

fn successful_rate(benchmark: &Value) -> f64 {
    benchmark["metrics"]["requests_per_second"]["successful"]["mean"]
        .as_f64()
        .expect("requests_per_second.successful.mean")
}

#[test]
fn a_guidellm_sweep_runs_synchronous_throughput_then_rates_between_their_measured_rates() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "sweep.yaml",
        &guidellm_sweep(5, "constant", "[{kind: max_duration, seconds: 1}]"),
    );
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "sweep",
        &["--sim-ttft", "20ms", "--sim-itl", "5ms"],
    );
    succeeded(&output);
    let run = dir.path().join("sweep");

    // sweep_size 5: synchronous, throughput, and 5 − 2 = 3 constant rates.
    let benchmarks = benchmarks(&run);
    let strategies: Vec<&Value> = benchmarks
        .iter()
        .map(|b| &b["config"]["strategy"])
        .collect();
    let types: Vec<&str> = strategies
        .iter()
        .map(|s| s["type_"].as_str().expect("type_"))
        .collect();
    assert_eq!(
        types,
        [
            "synchronous",
            "throughput",
            "constant",
            "constant",
            "constant"
        ]
    );
    // The sweep's max_concurrency caps throughput and every rate; synchronous has none.
    assert_eq!(strategies[0]["max_concurrency"], Value::Null);
    for strategy in &strategies[1..] {
        assert_eq!(strategy["max_concurrency"], 8, "{strategy}");
    }

    // The rates are np.linspace(sync, throughput, 5 − 1)[1:] of the two benchmarks' successful request rates, as
    // benchmarks.json itself reports them.
    let (sync, throughput) = (
        successful_rate(&benchmarks[0]),
        successful_rate(&benchmarks[1]),
    );
    assert!(
        sync > 0.0 && throughput > sync,
        "sync {sync}, throughput {throughput}"
    );
    let expected = &linspace(sync, throughput, 4)[1..];
    let rates: Vec<f64> = strategies[2..]
        .iter()
        .map(|s| s["rate"].as_f64().expect("rate"))
        .collect();
    assert_same_rates(&rates, expected);

    // run.json lists the stages that ran, each with its load, and their times.
    let meta = json(&run.join("run.json"));
    let loads: Vec<&str> = meta["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| s["load"].as_str().expect("load"))
        .collect();
    assert_eq!(
        loads,
        [
            "synchronous",
            "throughput",
            "constant",
            "constant",
            "constant"
        ]
    );
    let decided = meta["stages"][2]["rate"].as_f64().expect("rate");
    assert_same_rates(&[decided], &expected[..1]);
    assert_eq!(meta["end"]["state"], "complete");
    assert_eq!(meta["end"]["stages"].as_array().map(Vec::len), Some(5));
}

#[test]
fn a_poisson_sweep_with_a_request_limit_sends_that_many_at_each_rate() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "poisson.yaml",
        &guidellm_sweep(4, "poisson", "[{kind: max_requests, count: 12}]"),
    );
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "poisson",
        &["--sim-ttft", "20ms", "--sim-itl", "5ms"],
    );
    succeeded(&output);
    let benchmarks = benchmarks(&dir.path().join("poisson"));
    let types: Vec<&str> = benchmarks
        .iter()
        .map(|b| b["config"]["strategy"]["type_"].as_str().expect("type_"))
        .collect();
    assert_eq!(types, ["synchronous", "throughput", "poisson", "poisson"]);
    // sweep_size 4: linspace(sync, throughput, 3)[1:] — the midpoint, then the throughput rate itself.
    let (sync, throughput) = (
        successful_rate(&benchmarks[0]),
        successful_rate(&benchmarks[1]),
    );
    let rates: Vec<f64> = benchmarks[2..]
        .iter()
        .map(|b| b["config"]["strategy"]["rate"].as_f64().expect("rate"))
        .collect();
    assert_same_rates(&rates, &linspace(sync, throughput, 3)[1..]);
    for benchmark in &benchmarks {
        assert_eq!(
            benchmark["metrics"]["request_totals"]["total"], 12,
            "max_requests bounds every stage: {}",
            benchmark["config"]
        );
    }
}

#[test]
fn a_guidellm_sweep_without_a_successful_request_fails_as_guidellm_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "down.yaml",
        &guidellm_sweep(5, "constant", "[{kind: max_requests, count: 3}]"),
    );
    let endpoint = closed_endpoint();
    // Without the pre-flight, which would stop the run before its first stage (`preflight.rs` tests that).
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "down",
        &[
            "--endpoint",
            &endpoint,
            "--model",
            "llmbench-sim",
            "--tokenizer",
            "builtin",
            "--no-preflight",
        ],
    );
    assert!(!output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("invalid rates in sweep"), "{err}");
    assert!(err.contains("Were there any successful requests?"), "{err}");
    // What ran is still recorded and reported: the synchronous and throughput stages, and why the run stopped.
    let run = dir.path().join("down");
    let meta = json(&run.join("run.json"));
    assert_eq!(meta["stages"].as_array().map(Vec::len), Some(2));
    assert_eq!(meta["end"]["state"], "stopped");
    assert!(
        meta["end"]["failed"]
            .as_str()
            .is_some_and(|f| f.contains("invalid rates in sweep")),
        "{}",
        meta["end"]
    );
    assert_eq!(benchmarks(&run).len(), 2);
}

#[test]
fn an_all_scope_error_limit_ends_a_guidellm_sweep_in_its_rate_phase_only() {
    // Request 3 fails in the synchronous stage, request 6 in the throughput stage, and from request 8 on every one
    // fails, so the first rate stage fails too. `max_errors: 1` with `stopping_scope: all` stops each of them; guidellm's
    // sweep escalates past the synchronous and throughput stages whatever stopped them, and stops escalating
    // after a rate stage that an `all` constraint stopped.
    let endpoint = scripted_server(|n| n == 3 || n == 6 || n >= 8);
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "errors.yaml",
        &guidellm_sweep(
            5,
            "constant",
            "[{kind: max_requests, count: 5}, {kind: max_errors, count: 1, stopping_scope: all}]",
        ),
    );
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "errors",
        // The script counts requests from the first: the pre-flight's two would shift it.
        &[
            "--endpoint",
            &endpoint,
            "--model",
            "llmbench-sim",
            "--tokenizer",
            "builtin",
            "--no-preflight",
        ],
    );
    succeeded(&output);
    let run = dir.path().join("errors");
    let meta = json(&run.join("run.json"));
    let loads: Vec<&str> = meta["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| s["load"].as_str().expect("load"))
        .collect();
    assert_eq!(loads, ["synchronous", "throughput", "constant"]);
    assert_eq!(meta["end"]["state"], "stopped", "{}", meta["end"]);
    assert_eq!(meta["end"]["stopped"]["reason"], "max_errors");
    let ends: Vec<&Value> = meta["end"]["stages"]
        .as_array()
        .expect("stage ends")
        .iter()
        .map(|s| &s["stopped"]["reason"])
        .collect();
    assert_eq!(ends, ["max_errors", "max_errors", "max_errors"]);
    let types: Vec<String> = benchmarks(&run)
        .iter()
        .map(|b| b["config"]["strategy"]["type_"].to_string())
        .collect();
    assert_eq!(
        types,
        [r#""synchronous""#, r#""throughput""#, r#""constant""#]
    );
}

#[test]
fn the_bundled_guidellm_smoke_profile_runs_as_a_sweep_through_overrides() {
    let dir = tempfile::tempdir().expect("tmp");
    let output = run_profile(
        dir.path(),
        "guidellm",
        "sanity_random",
        "bundled",
        &[
            "--override",
            "spec.profile.kind=sweep",
            // The profile has no sweep_size: the key is created on purpose.
            "--override-add",
            "spec.profile.sweep_size=3",
            "--override",
            "spec.constraints.0.seconds=1",
        ],
    );
    succeeded(&output);
    let benchmarks = benchmarks(&dir.path().join("bundled"));
    let strategies: Vec<(&str, Option<f64>)> = benchmarks
        .iter()
        .map(|b| {
            let s = &b["config"]["strategy"];
            (s["type_"].as_str().expect("type_"), s["rate"].as_f64())
        })
        .collect();
    // sweep_size 3: the one rate is linspace(sync, throughput, 2)[1] = the throughput rate; guidellm's sweep
    // default max_concurrency is 512.
    let types: Vec<&str> = strategies.iter().map(|s| s.0).collect();
    assert_eq!(types, ["synchronous", "throughput", "constant"]);
    assert_eq!((strategies[0].1, strategies[1].1), (None, None));
    let rate = strategies[2].1.expect("a rate");
    assert_same_rates(&[rate], &[successful_rate(&benchmarks[1])]);
    assert_eq!(benchmarks[1]["config"]["strategy"]["max_concurrency"], 512);
}

const INFERENCE_PERF_SWEEP: &str = "\
server:
  type: vllm
  base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL
  model_name: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL
  ignore_eos: true
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {mean: 20, std_dev: 0, min: 20, max: 20}
  output_distribution: {mean: 10, std_dev: 0, min: 10, max: 10}
load:
  type: constant
  interval: 0
  sweep:
    type: geometric
    num_requests: NUM_REQUESTS
    timeout: TIMEOUT
    num_stages: 3
    stage_duration: 1
report:
  request_lifecycle:
    summary: true
    per_stage: true
";

fn inference_perf_sweep(num_requests: u32, timeout_s: u32) -> String {
    INFERENCE_PERF_SWEEP
        .replace("NUM_REQUESTS", &num_requests.to_string())
        .replace("TIMEOUT", &timeout_s.to_string())
}

#[test]
fn an_inference_perf_sweep_runs_generate_rates_of_the_probes_saturation_and_reports_no_probe_request()
 {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "ip.yaml", &inference_perf_sweep(60, 8));
    // 0.3 s to the first token and 9 more at 30 ms: each request is in flight 0.57 s, so the probe's 12 requests/s
    // keep several in flight and the counter falls between samples.
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "ip",
        &["--sim-ttft", "300ms", "--sim-itl", "30ms"],
    );
    succeeded(&output);
    let run = dir.path().join("ip");
    let records = records(&run);
    let (probe, measured): (Vec<&Value>, Vec<&Value>) = records
        .iter()
        .partition(|r| r["warmup"].as_bool().unwrap_or(false));
    // The probe: num_requests requests at num_requests / 5 per second.
    assert_eq!(probe.len(), 60);
    let ns = |r: &Value, key: &str| r[key].as_u64().expect(key);
    // inference-perf's constant timer puts the last of its arrivals exactly at the end of the 5 s: the schedule
    // started 5 s before the last scheduled send.
    let start_ns = probe
        .iter()
        .map(|r| ns(r, "scheduled_ns"))
        .max()
        .expect("probe")
        - 5_000_000_000;
    let spans: Vec<(u64, u64)> = probe
        .iter()
        .map(|r| (ns(r, "sent_ns"), ns(r, "end_ns")))
        .collect();
    let sat = saturation(&spans, start_ns, 8, 95.0);
    let expected = geometric_rates(sat, 3);
    assert_eq!(expected[0], 1.0, "geometric rates start at 1");

    // run.json and every stage file carry those rates, as stages 0, 1, 2.
    let meta = json(&run.join("run.json"));
    let decided: Vec<f64> = meta["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| s["rate"].as_f64().expect("rate"))
        .collect();
    assert_eq!(decided, expected, "saturation {sat}");
    assert!(meta["stages"][0]["load"] == "constant");
    for (stage, rate) in expected.iter().enumerate() {
        let file = json(&run.join(format!("stage_{stage}_lifecycle_metrics.json")));
        assert_eq!(file["load_summary"]["requested_rate"].as_f64(), Some(*rate));
        // Each stage counts its own requests and no probe request.
        let in_stage = measured
            .iter()
            .filter(|r| r["stage"] == stage as u64)
            .count();
        assert_eq!(
            file["load_summary"]["count"], in_stage as u64,
            "stage {stage}"
        );
    }
    assert!(!run.join("stage_3_lifecycle_metrics.json").exists());

    // No report counts a probe request: the summaries count exactly the measured requests.
    let summary = json(&run.join("summary_lifecycle_metrics.json"));
    assert_eq!(summary["load_summary"]["count"], measured.len() as u64);
    let ours = json(&run.join("summary.json"));
    assert_eq!(ours["requests"]["total"], measured.len() as u64);
    assert_eq!(ours["excluded"]["warmup_requests"], 60);
}

#[test]
fn an_inference_perf_probe_that_sees_nothing_fall_fails_with_inference_perfs_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "ip.yaml", &inference_perf_sweep(10, 2));
    let endpoint = closed_endpoint();
    // Without the pre-flight, which would stop the run before its probe stage (`preflight.rs` tests that).
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "down",
        &[
            "--endpoint",
            &endpoint,
            "--model",
            "llmbench-sim",
            "--tokenizer",
            "builtin",
            "--no-preflight",
        ],
    );
    assert!(!output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains(
            "failed to gather enough samples to determine saturation, try increasing the num_requests or timeout"
        ),
        "{err}"
    );
    let meta = json(&dir.path().join("down").join("run.json"));
    assert_eq!(meta["stages"].as_array().map(Vec::len), Some(0));
    assert_eq!(meta["end"]["state"], "stopped");
}

#[test]
fn a_sweep_spread_over_shards_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "ip.yaml", &inference_perf_sweep(10, 2));
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "sharded",
        &["--shard", "0/2"],
    );
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("cannot be spread over 2 launchers") && err.contains("saturation probe"),
        "{err}"
    );
    assert!(!dir.path().join("sharded").exists(), "nothing ran");
}

#[test]
fn a_request_or_duration_limit_that_would_end_the_escalation_is_refused() {
    // guidellm's `stopping_scope: all` on max_requests / max_duration ends the sweep after the first benchmark that
    // reaches the limit; llmbench does not, so it says so instead of running something else.
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "scope.yaml",
        &guidellm_sweep(
            5,
            "constant",
            "[{kind: max_requests, count: 5, stopping_scope: all}]",
        ),
    );
    let output = run_profile(dir.path(), "guidellm", &profile, "scope", &[]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("stopping_scope") && err.contains("max_requests"),
        "{err}"
    );
}

/// The engine's adaptive stages, driven by a scripted planner against the embedded simulator.
mod planner {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use bytes::Bytes;
    use llmbench_engine::engine::http1::Http1Endpoint;
    use llmbench_engine::engine::{
        self, Clock, Control, EngineError, EnginePlan, ErrorLimits, FinishedStage, PlannedStage,
        PlannerError, PreparedRequest, Progress, Requests, Stage, StagePlan, StagePlanner,
        StageTimes, Stages, Target, Transport,
    };
    use llmbench_model::record::{ErrorClass, RequestRecord};
    use llmbench_report::report::StageMeta;
    use llmbench_sim::sim::{self, SimConfig};

    /// What a planner was told of a finished stage.
    #[derive(Debug, Clone, PartialEq)]
    struct Seen {
        index: u32,
        probe: bool,
        records: usize,
        /// Every kept record flagged warm-up (left out of every report).
        all_warmup: bool,
        /// Kept records cancelled in flight.
        cancelled: usize,
        times: StageTimes,
    }

    /// Runs `stages` in order, then stops (or fails, with `fail_after`).
    struct Script {
        stages: Vec<PlannedStage>,
        seen: Arc<Mutex<Vec<Seen>>>,
        fail_after: Option<usize>,
    }

    impl StagePlanner for Script {
        fn next_stage(
            &mut self,
            finished: Option<FinishedStage>,
        ) -> Result<Option<PlannedStage>, PlannerError> {
            if let Some(f) = finished {
                let mut seen = self.seen.lock().expect("lock");
                seen.push(Seen {
                    index: f.index,
                    probe: f.probe,
                    records: f.records.len(),
                    all_warmup: f.records.iter().all(|r| r.warmup),
                    cancelled: f
                        .records
                        .iter()
                        .filter(|r| r.error_class() == Some(ErrorClass::Cancelled))
                        .count(),
                    times: f.times,
                });
                if self.fail_after == Some(seen.len()) {
                    return Err("no rate to go on with".into());
                }
            }
            Ok((!self.stages.is_empty()).then(|| self.stages.remove(0)))
        }
    }

    fn open(
        requests: u64,
        keep_records: bool,
        probe: bool,
        deadline: Option<Duration>,
    ) -> PlannedStage {
        PlannedStage {
            stage: Stage {
                plan: StagePlan::Open {
                    send_at: (0..requests)
                        .map(|i| Duration::from_millis(i * 5))
                        .collect(),
                    max_concurrency: None,
                },
                requested_rate: None,
                errors: ErrorLimits::default(),
            },
            keep_records,
            probe,
            deadline,
            meta: StageMeta::default(),
        }
    }

    fn body(max_tokens: u32) -> PreparedRequest {
        let body = serde_json::json!({
            "model": "llmbench-sim", "prompt": "one two three", "max_tokens": max_tokens,
            "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
        });
        PreparedRequest {
            body: Bytes::from(body.to_string()),
            input_tokens: 3,
            max_tokens: Some(max_tokens),
            ignore_eos: false,
            header: None,
            inputs: None,
            adapter: None,
            images: None,
        }
    }

    /// Runs `planner` with `interval` between stages; returns what the engine returned and every record written.
    async fn run(
        planner: Script,
        interval: Duration,
    ) -> (Result<Vec<StageTimes>, EngineError>, Vec<RequestRecord>) {
        let sim = sim::start(SimConfig {
            port: 0,
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(10),
            ..SimConfig::default()
        })
        .await
        .expect("sim starts");
        let url = format!("{}/v1/completions", sim.base_url());
        let target = Arc::new(Target {
            transport: Transport::Http1(Http1Endpoint::new(&url, &[], 64).expect("endpoint")),
            url,
            api_key: None,
            headers: Vec::new(),
            request_timeout: Some(Duration::from_secs(10)),
            streaming: true,
            api: llmbench_workload::workload::ApiKind::Completion,
            keep_text: false,
            request_ids: llmbench_engine::engine::RequestIds::NONE,
            spread: Vec::new(),
        });
        let (sink, writer) = engine::record_writer(
            Box::new(std::io::sink()),
            "requests.jsonl".to_owned(),
            Arc::new(Progress::default()),
            Control::default(),
        );
        let plan = EnginePlan {
            stages: Stages::Adaptive(Box::new(planner)),
            interval,
            // 40 tokens at 10 ms: each request takes about 0.4 s.
            requests: Requests::Fixed(Arc::from(vec![body(40)])),
            warmup: None,
            before_measured: None,
            max_connect_failures: engine::DEFAULT_MAX_CONNECT_FAILURES,
            stage_requests: None,
            prime: None,
        };
        let ran = engine::run(target, plan, Clock::start(), sink, Control::default()).await;
        let records = writer.await.expect("joins").expect("written");
        sim.shutdown().await.expect("sim stops");
        (ran, records)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_planner_sees_what_it_kept_and_a_probe_is_neither_counted_nor_reported() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            stages: vec![
                // A probe whose requests outlive its 100 ms deadline: cancelled in flight, still recorded.
                open(4, true, true, Some(Duration::from_millis(100))),
                open(3, true, false, None),
                open(2, false, false, None),
            ],
            seen: Arc::clone(&seen),
            fail_after: None,
        };
        let interval = Duration::from_millis(300);
        let (ran, records) = run(script, interval).await;
        let times = ran.expect("runs");
        let seen = seen.lock().expect("lock").clone();

        // Two stages ran; the probe is not among them.
        assert_eq!(times.len(), 2);
        assert_eq!(
            seen.iter()
                .map(|s| (s.index, s.probe, s.records, s.all_warmup, s.cancelled))
                .collect::<Vec<_>>(),
            // The probe carries the index the next stage takes; the last stage's records were not kept.
            [
                (0, true, 4, true, 4),
                (0, false, 3, false, 0),
                (1, false, 0, true, 0)
            ]
        );
        assert_eq!(seen[1].times, times[0]);
        assert_eq!(seen[2].times, times[1]);
        // The deadline ended the probe about 100 ms after it started, long before its requests would have.
        let probe = &seen[0].times;
        let probe_ms = (probe.end_ns - probe.start_ns) / 1_000_000;
        assert!((100..300).contains(&probe_ms), "{probe_ms} ms");
        // No interval after a probe; the interval between the two stages.
        assert!(times[0].start_ns - probe.end_ns < 100_000_000);
        assert!(times[1].start_ns - times[0].end_ns >= interval.as_nanos() as u64);

        // Every record was written: the probe's flagged warm-up (stage 0), then the two stages'.
        let by = |stage: u32, warmup: bool| {
            records
                .iter()
                .filter(|r| r.stage == stage && r.warmup == warmup)
                .count()
        };
        assert_eq!((by(0, true), by(0, false), by(1, false)), (4, 3, 2));
        assert_eq!(records.len(), 9);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_planner_that_cannot_go_on_fails_the_run_with_the_times_of_what_ran() {
        let script = Script {
            stages: vec![open(2, true, false, None), open(2, false, false, None)],
            seen: Arc::default(),
            fail_after: Some(1),
        };
        let (ran, records) = run(script, Duration::ZERO).await;
        match ran {
            Err(EngineError::Planner { ran, source }) => {
                assert_eq!(ran.len(), 1);
                assert_eq!(source.to_string(), "no rate to go on with");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(records.len(), 2, "the stage after the failure never ran");
    }
}
