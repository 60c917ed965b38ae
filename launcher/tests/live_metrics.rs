//! `llmbench run --metrics-listen`: the real binary serves its live metrics while a run goes against the embedded
//! simulator, they move as requests finish and stages change, and the server is gone once the run ends.

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;

/// Two stages of 2 s at 10 req/s; each request streams about 10 tokens at 20 ms, so about 0.25 s in flight.
const PROFILE: &str = "\
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {mean: 32, std_dev: 0, min: 32, max: 32, total_count: 50}
  output_distribution: {mean: 10, std_dev: 0, min: 10, max: 10, total_count: 50}
load:
  type: constant
  stages:
    - {rate: 10, duration: 2}
    - {rate: 10, duration: 2}
";

/// Kills the run if a check fails before it ends, so a failed test leaves no process behind.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /metrics` on `addr`: the body of a 200, else the error.
fn scrape(addr: SocketAddr) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_owned()),
        _ => Err(response),
    }
}

/// The value of the sample named exactly `series` (name and labels), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// Scrapes every 50 ms until `done` holds for the text, or panics after `within`; returns that text.
fn scrape_until(addr: SocketAddr, within: Duration, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(text) = scrape(addr) {
            if done(&text) {
                return text;
            }
            last = text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the live metrics never got there; last scrape:\n{last}");
}

#[test]
fn a_run_serves_live_metrics_that_move_and_stops_serving_when_it_ends() {
    let dir = tempfile::tempdir().expect("temp dir");
    let profile = write(dir.path(), "live.yaml", PROFILE);
    let child = llmbench()
        // The bound address is logged at info.
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .args(["run", "--harness", "inference-perf", "--profile"])
        .arg(&profile)
        .args(["--run-id", "live", "--output"])
        .arg(dir.path())
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--sim-ttft",
            "20ms",
            "--sim-itl",
            "20ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut run = Run(child);
    let stderr = run.0.stderr.take().expect("stderr is piped");
    let (found, address) = mpsc::channel::<SocketAddr>();
    // Reads stderr to its end, so the run never blocks on a full pipe; sends the address once it is logged.
    let reader = std::thread::spawn(move || {
        let mut log = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.split("live metrics: http://").nth(1) {
                let addr = url.split('/').next().unwrap_or_default();
                if let Ok(addr) = addr.parse() {
                    let _ = found.send(addr);
                }
            }
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    let addr = address
        .recv_timeout(Duration::from_secs(60))
        .expect("the run logs its live metrics address");
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert_ne!(addr.port(), 0, "the actual port, not the 0 asked for");

    let early = scrape_until(addr, Duration::from_secs(30), |text| {
        sample(text, "llmbench_requests_finished_total").is_some_and(|n| n >= 1.0)
            && sample(text, "llmbench_e2e_seconds_count").is_some_and(|n| n >= 1.0)
    });
    assert_eq!(
        sample(
            &early,
            r#"llmbench_run_info{run_id="live",harness="inference-perf"}"#
        ),
        Some(1.0),
        "{early}"
    );
    for series in [
        "llmbench_requests_issued_total",
        "llmbench_requests_in_flight",
        "llmbench_stage_index",
        "llmbench_ttft_seconds_count",
        "llmbench_itl_seconds_count",
        "llmbench_schedule_delay_seconds_count",
        "llmbench_output_tokens_total",
        r#"llmbench_requests_failed_total{class="timeout"}"#,
        r#"llmbench_ttft_seconds_bucket{le="+Inf"}"#,
    ] {
        assert!(
            sample(&early, series).is_some(),
            "{series} missing:\n{early}"
        );
    }
    let issued = sample(&early, "llmbench_requests_issued_total").unwrap_or_default();
    let finished = sample(&early, "llmbench_requests_finished_total").unwrap_or_default();
    assert!(issued >= finished, "issued {issued} < finished {finished}");
    // TTFT is the simulator's 20 ms and more, never over a second on loopback.
    let ttft_sum = sample(&early, "llmbench_ttft_seconds_sum").unwrap_or_default();
    let ttft_count = sample(&early, "llmbench_ttft_seconds_count").unwrap_or_default();
    assert!(ttft_count >= 1.0, "{early}");
    let mean_ttft = ttft_sum / ttft_count;
    assert!((0.015..1.0).contains(&mean_ttft), "mean TTFT {mean_ttft}");

    // The second stage starts about 2 s in: the counters and histograms have moved on by then.
    let later = scrape_until(addr, Duration::from_secs(30), |text| {
        sample(text, "llmbench_stage_index") == Some(1.0)
            && sample(text, "llmbench_requests_finished_total").is_some_and(|n| n > finished)
    });
    let e2e = |text: &str| sample(text, "llmbench_e2e_seconds_count").unwrap_or_default();
    assert!(e2e(&later) > e2e(&early), "{later}");
    assert!(
        sample(&later, "llmbench_output_tokens_total")
            > sample(&early, "llmbench_output_tokens_total")
    );

    let status = run.0.wait().expect("the run ends");
    let log = reader.join().expect("the stderr reader");
    assert!(status.success(), "{status:?}\n{log}");
    assert!(scrape(addr).is_err(), "still serving after the run ended");
    // Every request of the run was counted: requests.jsonl holds as many records as the run finished.
    let records = common::requests_jsonl(&dir.path().join("live/requests.jsonl")).expect("records");
    assert!(
        records.lines().count() as f64
            >= sample(&later, "llmbench_requests_finished_total").unwrap_or_default()
    );
}

#[test]
fn without_the_flag_nothing_is_served_and_nothing_is_logged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = llmbench()
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .args([
            "run",
            "--harness",
            "inference-perf",
            "--profile",
            "sanity_random",
            "--override",
            "load.stages.0.duration=1",
            "--override",
            "load.stages.0.rate=2",
            "--run-id",
            "quiet",
            "--output",
        ])
        .arg(dir.path())
        .output()
        .expect("runs");
    succeeded(&output);
    assert!(
        !stderr(&output).contains("live metrics"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_port_in_use_is_a_warning_and_the_run_goes_on() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "sanity_random",
        "taken",
        &[
            "--override",
            "load.stages.0.duration=1",
            "--override",
            "load.stages.0.rate=2",
            "--metrics-listen",
            &addr,
        ],
    );
    succeeded(&output);
    let log = stderr(&output);
    assert!(
        log.contains("without live metrics") && log.contains(&addr),
        "{log}"
    );
    assert!(dir.path().join("taken/summary.json").exists());
}

#[test]
fn a_bad_listen_address_is_refused_before_the_run() {
    let output = llmbench()
        .args([
            "run",
            "--harness",
            "inference-perf",
            "--profile",
            "sanity_random",
            "--metrics-listen",
            "localhost",
        ])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("--metrics-listen"),
        "{}",
        stderr(&output)
    );
}
