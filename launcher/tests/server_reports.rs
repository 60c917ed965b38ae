//! Server metrics end to end: `llmbench run` against the embedded simulator scrapes its `/metrics`, writes
//! `server_metrics.jsonl`, and puts the per-stage server figures into summary.json, inference-perf's
//! `*_prometheus_metrics.json` and the llm-d report; a target that never answers is a warning, never fatal.

mod common;

use common::{json, llmbench, run_profile, stderr, succeeded, write};
use serde_json::Value;

/// Two stages with a pause between them; per-stage Prometheus reports asked for.
const TWO_STAGES: &str = "\
load:
  type: constant
  interval: 1
  stages:
    - {rate: 4, duration: 2}
    - {rate: 8, duration: 2}
api:
  type: completion
  streaming: true
server:
  type: vllm
  model_name: llmbench-sim
  base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL
  ignore_eos: true
data:
  type: random
  input_distribution: {min: 20, max: 40, mean: 30, std: 5}
  output_distribution: {min: 5, max: 15, mean: 10, std: 3}
report:
  prometheus:
    summary: true
    per_stage: true
";

fn aggregate<'a>(window: &'a Value, key: &str) -> &'a Value {
    window["aggregate"]
        .as_array()
        .expect("aggregate")
        .iter()
        .find(|m| m["key"] == key)
        .unwrap_or_else(|| panic!("no `{key}` in {window:#}"))
}

/// Output tokens the server reported per stage, from the client's records.
fn completion_tokens(dir: &std::path::Path, stage: u64) -> f64 {
    common::requests_jsonl(&dir.join("requests.jsonl"))
        .expect("records")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("record"))
        .filter(|r| r["stage"] == stage)
        .map(|r| r["usage"]["completion_tokens"].as_f64().expect("usage"))
        .sum()
}

#[test]
fn a_run_scrapes_the_simulator_and_every_report_carries_the_server_side() {
    let out = tempfile::tempdir().expect("tempdir");
    let profile = write(out.path(), "two.yaml", TWO_STAGES);
    let output = run_profile(
        out.path(),
        "inference-perf",
        &profile,
        "srv",
        &["--metrics-interval", "100ms"],
    );
    succeeded(&output);
    let dir = out.path().join("srv");
    // The printed table says what the stack saw, per stage, and how the scrape went.
    let printed = common::stdout(&output);
    assert!(
        printed.contains("server  running mean/max  waiting mean/max"),
        "{printed}"
    );
    assert!(
        printed.contains("scrape(s) of http://127.0.0.1:"),
        "{printed}"
    );

    // One line per scrape, on the run's clock: from about t0 to just after the last request.
    let lines: Vec<Value> = std::fs::read_to_string(dir.join("server_metrics.jsonl"))
        .expect("server_metrics.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a scrape line"))
        .collect();
    let run = json(&dir.join("run.json"));
    let last_end_s = run["end"]["stages"][1]["end_ns"].as_f64().expect("end") / 1e9;
    assert!(
        lines.len() >= 40,
        "{} scrapes in ~5 s at 100 ms",
        lines.len()
    );
    assert!(lines.iter().all(|l| l["ok"] == true));
    let first_t = lines[0]["t_s"].as_f64().expect("t_s");
    let last_t = lines[lines.len() - 1]["t_s"].as_f64().expect("t_s");
    assert!(first_t < 0.1, "first scrape at {first_t} s");
    assert!(
        last_t >= last_end_s && last_t < last_end_s + 1.0,
        "last scrape at {last_t} s, last request ended at {last_end_s} s"
    );
    assert_eq!(run["server_metrics"]["interval_s"], 0.1);
    assert!(
        run["server_metrics"]["targets"][0]
            .as_str()
            .expect("target")
            .ends_with("/metrics")
    );

    // The simulator counts exactly the tokens it sent: each stage's server-side increase is what the client got.
    let summary = json(&dir.join("summary.json"));
    let server = &summary["server_metrics"];
    assert_eq!(server["stages"].as_array().expect("stages").len(), 2);
    for stage in 0..2u64 {
        let window = &server["stages"][stage as usize];
        assert_eq!(window["stage"], stage);
        let generated = aggregate(window, "generation_tokens")["increase"]
            .as_f64()
            .expect("increase");
        assert_eq!(generated, completion_tokens(&dir, stage), "stage {stage}");
        let finished = aggregate(window, "requests_finished")["increase"].as_f64();
        let sent = summary["stages"][stage as usize]["requests"]["total"].as_f64();
        assert_eq!(finished, sent, "stage {stage}");
        let running = aggregate(window, "running");
        assert_eq!(running["kind"], "gauge");
        assert!(running["max"].as_f64().expect("max") >= 1.0);
        assert_eq!(aggregate(window, "ttft")["kind"], "histogram");
    }
    let overall = aggregate(&server["overall"], "generation_tokens")["increase"]
        .as_f64()
        .expect("increase");
    assert_eq!(
        overall,
        completion_tokens(&dir, 0) + completion_tokens(&dir, 1)
    );

    // inference-perf's own server-side files, as `report.prometheus` asks.
    for (file, stage) in [
        ("summary_prometheus_metrics.json", None),
        ("stage_0_prometheus_metrics.json", Some(0u64)),
        ("stage_1_prometheus_metrics.json", Some(1)),
    ] {
        let report = json(&dir.join(file));
        let successes = &report["successes"];
        let window = match stage {
            Some(s) => &server["stages"][s as usize],
            None => &server["overall"],
        };
        assert_eq!(
            successes["count"],
            aggregate(window, "requests_finished")["increase"],
            "{file}"
        );
        for key in [
            "time_to_first_token",
            "request_latency",
            "kv_cache_usage_percentage",
            "num_requests_running",
            "prefix_cache_hit_percent",
        ] {
            assert!(successes.get(key).is_some(), "{file} lacks {key}");
        }
    }

    // The llm-d report of each stage has the observability part, still valid v0.2.
    let schema_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/llm-d-benchmark/benchmark_report/br_v0_2_json_schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).expect("schema")).expect("json");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    for stage in 0..2 {
        let text =
            std::fs::read_to_string(dir.join(format!("benchmark_report_v0.2,_stage_{stage}.yaml")))
                .expect("llm-d report");
        let report: Value = serde_saphyr::from_str(&text).expect("yaml");
        let observability = &report["results"]["observability"];
        let component = &observability["components"][0];
        assert!(
            component["aggregate"]["running_requests"]["mean"].is_number(),
            "{observability:#}"
        );
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "stage {stage}: {errors:#?}");
    }

    // `llmbench report` rebuilds the same server summary from the files.
    let rebuilt = llmbench()
        .args(["report"])
        .arg(&dir)
        .output()
        .expect("report runs");
    succeeded(&rebuilt);
    let again = json(&dir.join("summary.json"));
    assert_eq!(
        again["server_metrics"]["stages"],
        summary["server_metrics"]["stages"]
    );
}

#[test]
fn a_target_that_never_answers_is_a_warning_and_no_server_metrics_turns_scraping_off() {
    let out = tempfile::tempdir().expect("tempdir");
    let profile = write(out.path(), "two.yaml", TWO_STAGES);
    // Port 9 (discard) on loopback: nothing listens, every scrape is refused.
    let output = run_profile(
        out.path(),
        "inference-perf",
        &profile,
        "dead",
        &[
            "--metrics-endpoint",
            "http://127.0.0.1:9/metrics",
            "--override",
            "load.stages.1.duration=1",
        ],
    );
    succeeded(&output);
    let dir = out.path().join("dead");
    let run = json(&dir.join("run.json"));
    let warnings = run["server_metrics"]["warnings"]
        .as_array()
        .expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("127.0.0.1:9"))),
        "{warnings:?}\n{}",
        stderr(&output)
    );
    let summary = json(&dir.join("summary.json"));
    let target = &summary["server_metrics"]["targets"][0];
    assert_eq!(target["scrapes"], 0);
    assert!(target["failed"].as_u64().expect("failed") >= 2);
    assert_eq!(summary["requests"]["failed"], 0);

    let output = run_profile(
        out.path(),
        "inference-perf",
        &profile,
        "off",
        &[
            "--no-server-metrics",
            "--override",
            "load.stages.1.duration=1",
        ],
    );
    succeeded(&output);
    let dir = out.path().join("off");
    assert!(!dir.join("server_metrics.jsonl").exists());
    assert!(!dir.join("summary_prometheus_metrics.json").exists());
    assert!(
        json(&dir.join("summary.json"))
            .get("server_metrics")
            .is_none()
    );
}

/// A metrics page of nothing but NaN and infinities, served on every request by a bare HTTP/1.1 server.
const POISONED_PAGE: &str = "\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name=\"m\"} NaN
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=\"m\"} -Inf
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name=\"m\"} +Inf
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{model_name=\"m\"} NaN
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name=\"m\"} +Inf
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name=\"m\"} NaN
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} NaN
vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} +Inf
vllm:time_to_first_token_seconds_sum NaN
vllm:time_to_first_token_seconds_count +Inf
";

fn serve_forever(page: &'static str) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: \
                 close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    port
}

#[test]
fn nan_and_infinite_samples_are_recorded_and_every_report_stays_valid() {
    let port = serve_forever(POISONED_PAGE);
    let out = tempfile::tempdir().expect("tempdir");
    let profile = write(out.path(), "two.yaml", TWO_STAGES);
    let url = format!("http://127.0.0.1:{port}/metrics");
    let output = run_profile(
        out.path(),
        "inference-perf",
        &profile,
        "nan",
        &[
            "--metrics-endpoint",
            &url,
            "--metrics-interval",
            "200ms",
            "--override",
            "load.stages.1.duration=1",
        ],
    );
    succeeded(&output);
    let dir = out.path().join("nan");
    // The raw file keeps the values as Prometheus wrote them.
    let first = std::fs::read_to_string(dir.join("server_metrics.jsonl"))
        .expect("server_metrics.jsonl")
        .lines()
        .next()
        .map(|l| serde_json::from_str::<Value>(l).expect("a scrape line"))
        .expect("a scrape");
    let value_of = |name: &str| {
        first["samples"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["n"] == name))
            .map(|s| s["v"].clone())
    };
    assert_eq!(
        value_of("vllm:num_requests_running"),
        Some(Value::from("NaN"))
    );
    assert_eq!(
        value_of("vllm:kv_cache_usage_perc"),
        Some(Value::from("+Inf"))
    );
    assert_eq!(
        value_of("vllm:num_requests_waiting"),
        Some(Value::from("-Inf"))
    );
    // summary.json, the inference-perf files and the llm-d reports all parse; the llm-d reports are still v0.2.
    let summary = json(&dir.join("summary.json"));
    assert!(summary["server_metrics"]["targets"][0]["scrapes"].as_u64() >= Some(2));
    for file in [
        "summary_prometheus_metrics.json",
        "stage_0_prometheus_metrics.json",
    ] {
        let _ = json(&dir.join(file));
    }
    let schema_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/llm-d-benchmark/benchmark_report/br_v0_2_json_schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).expect("schema")).expect("json");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    for stage in 0..2 {
        let text =
            std::fs::read_to_string(dir.join(format!("benchmark_report_v0.2,_stage_{stage}.yaml")))
                .expect("llm-d report");
        let report: Value = serde_saphyr::from_str(&text).expect("yaml");
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "stage {stage}: {errors:#?}\n{text}");
    }
    assert!(dir.join("report.html").is_file());
}
