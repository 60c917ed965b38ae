//! A dead or dying server is not a storm: through the real binary, a server killed mid-run ends the run with its
//! own stop reason and exit code 7 after a bounded number of failures, with every report, picture and native file
//! written; a closed loop backs off between connection failures instead of re-sending at once; a rate stage keeps
//! its schedule and stops on the same rule.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::{json, llmbench, run_profile, stderr, write};
use serde_json::Value;

/// The exit code of a run whose server stopped answering.
const SERVER_STOPPED_ANSWERING: i32 = 7;

/// guidellm: `streams` concurrent streams of small completions for at most `seconds`.
fn concurrent(streams: u32, seconds: u32) -> String {
    format!(
        "spec:\n  backend: {{kind: openai_http, target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, request_format: /v1/completions, stream: true}}\n  data: \
         [{{kind: synthetic_text, prompt_tokens: 16, output_tokens: 8}}]\n  profile: {{kind: concurrent, streams: \
         {streams}}}\n  constraints: [{{kind: max_duration, seconds: {seconds}}}]\n"
    )
}

fn closed_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    url
}

fn records(run: &Path) -> Vec<Value> {
    common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

fn class_count(records: &[Value], class: &str) -> usize {
    records
        .iter()
        .filter(|r| r["error"]["class"] == class)
        .count()
}

/// Asserts every file a guidellm run leaves: the summary, the native and llm-d reports, report.html, pictures.
fn assert_every_report(run: &Path) {
    for file in [
        "run.json",
        "summary.json",
        "benchmarks.json",
        "benchmark_report_v0.2,_stage_0.yaml",
        "report.html",
    ] {
        assert!(
            run.join(file).is_file(),
            "{file} not written in {}",
            run.display()
        );
    }
    let pictures = std::fs::read_dir(run.join("plots"))
        .expect("plots/")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "png"))
        })
        .count();
    assert!(pictures > 0, "no picture in {}/plots", run.display());
}

/// Asserts the run stopped because its server stopped answering after `failures` in a row.
fn assert_stopped(output: &Output, run: &Path, failures: u64) {
    assert_eq!(
        output.status.code(),
        Some(SERVER_STOPPED_ANSWERING),
        "{}",
        stderr(output)
    );
    let expected = format!("after {failures} connection failures in a row");
    assert!(
        stderr(output).contains("the server stopped answering at t=")
            && stderr(output).contains(&expected),
        "{}",
        stderr(output)
    );
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["run"]["state"], "stopped", "{}", summary["run"]);
    let stopped = &summary["run"]["stopped"];
    assert_eq!(stopped["reason"], "server_stopped_answering", "{stopped}");
    assert_eq!(stopped["failures"], failures, "{stopped}");
    assert!(stopped["at_ms"].is_u64(), "{stopped}");
    assert_eq!(json(&run.join("run.json"))["end"]["stopped"], *stopped);
}

#[test]
fn a_server_killed_mid_run_ends_it_with_its_reason_bounded_failures_and_every_report() {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut sim: Child = llmbench()
        .args(["sim", "--port", &port.to_string(), "--model", "m"])
        .args(["--ttft", "20ms", "--itl", "5ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sim starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the simulator did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "conc.yaml", &concurrent(16, 120));
    let endpoint = format!("http://127.0.0.1:{port}");
    let run = dir.path().join("killed");
    let child = llmbench()
        .args(["run", "--harness", "guidellm", "--profile"])
        .arg(&profile)
        .args([
            "--endpoint",
            &endpoint,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
        ])
        .args(["--run-id", "killed", "--output"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the run starts");
    // Killed once the run has recorded some answers.
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::requests_jsonl(&run.join("requests.jsonl")).map_or(0, |t| t.lines().count()) < 50
    {
        assert!(Instant::now() < deadline, "the run recorded no answers");
        std::thread::sleep(Duration::from_millis(20));
    }
    sim.kill().expect("kill the simulator");
    let _ = sim.wait();
    let output = child.wait_with_output().expect("the run ends");

    assert_stopped(&output, &run, 20);
    let records = records(&run);
    let succeeded = records.iter().filter(|r| r.get("error").is_none()).count();
    assert!(succeeded >= 50, "{succeeded} answers before the kill");
    // Bounded: the 16 streams in flight when the server died, the 20 refusals that stopped the run, and what was
    // in flight then — not a storm of refusals until the profile's two minutes are up.
    let failed = records.len() - succeeded;
    assert!(failed < 100, "{failed} failures recorded");
    assert!(class_count(&records, "connect") < 60, "{records:?}");
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["requests"]["failed"], failed as u64);
    assert_every_report(&run);
    let meta = json(&run.join("run.json"));
    assert_eq!(
        meta["preflight"]["request"]["status"], 200,
        "{}",
        meta["preflight"]
    );
}

#[test]
fn a_dead_server_without_preflight_stops_the_run_at_the_limit_with_every_report() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "conc.yaml", &concurrent(16, 120));
    let endpoint = closed_endpoint();
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "dead",
        &[
            "--endpoint",
            &endpoint,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--max-connect-failures",
            "10",
        ],
    );
    let run = dir.path().join("dead");
    assert_stopped(&output, &run, 10);
    let records = records(&run);
    // The limit, and at most one more request from each of the 16 streams that was in flight.
    assert!(records.len() <= 10 + 16, "{} records", records.len());
    assert!(class_count(&records, "connect") >= 10);
    assert_every_report(&run);
}

#[test]
fn a_closed_loop_backs_off_between_connection_failures_when_told_never_to_stop() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(dir.path(), "conc.yaml", &concurrent(4, 3));
    let endpoint = closed_endpoint();
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "backoff",
        &[
            "--endpoint",
            &endpoint,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--max-connect-failures",
            "0",
        ],
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let run = dir.path().join("backoff");
    let records = records(&run);
    // Each stream waits 10, 20, 40 … 640 ms, then 1 s between refusals: in 3 s at most 9 requests, where an
    // immediate retry made tens of thousands.
    assert!(records.len() <= 4 * 10, "{} records", records.len());
    assert_eq!(class_count(&records, "connect"), records.len());
    assert_eq!(
        json(&run.join("summary.json"))["run"]["stopped"],
        Value::Null
    );
}

#[test]
fn a_rate_stage_against_a_dead_server_stops_at_the_limit_with_its_native_reports() {
    let dir = tempfile::tempdir().expect("tmp");
    // 500 requests planned: 50 a second for 10 seconds.
    let profile = write(
        dir.path(),
        "rate.yaml",
        "api: {type: completion, streaming: true}\n\
         load: {type: constant, stages: [{rate: 50, duration: 10}]}\n\
         server: {type: vllm, base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model_name: m}\n\
         data: {type: random, input_distribution: {min: 8, max: 8, mean: 8, std_dev: 0}, \
         output_distribution: {min: 4, max: 4, mean: 4, std_dev: 0}}\n",
    );
    let endpoint = closed_endpoint();
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "rate",
        &[
            "--endpoint",
            &endpoint,
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--max-connect-failures",
            "5",
        ],
    );
    let run = dir.path().join("rate");
    assert_stopped(&output, &run, 5);
    let records = records(&run);
    assert!(
        records.len() < 50,
        "{} of 500 planned requests sent",
        records.len()
    );
    for file in [
        "summary_lifecycle_metrics.json",
        "stage_0_lifecycle_metrics.json",
        "report.html",
    ] {
        assert!(run.join(file).is_file(), "{file} not written");
    }
}
