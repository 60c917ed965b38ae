//! `llmbench dashboard` through the real binary, over runs and an experiment the real binary wrote against
//! `llmbench sim`: the listing carries each run's summary.json figures, a run added while it serves appears, a run
//! that is going shows its progress, the comparison is `llmbench plot`'s, a run's files are served and nothing
//! outside the results directory is, and a missing directory is refused with what to pass instead.

mod common;

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// 20 requests at 20 req/s, streamed.
const SHORT: &str = "\
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {mean: 32, std_dev: 0, min: 32, max: 32, total_count: 20}
  output_distribution: {mean: 8, std_dev: 0, min: 8, max: 8, total_count: 20}
load:
  type: constant
  stages:
    - {rate: 20, duration: 1}
";

/// 40 requests over 4 s: long enough to be seen running.
const LONGER: &str = "\
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {mean: 32, std_dev: 0, min: 32, max: 32, total_count: 40}
  output_distribution: {mean: 8, std_dev: 0, min: 8, max: 8, total_count: 40}
load:
  type: constant
  stages:
    - {rate: 10, duration: 4}
";

/// Two treatments of four prompts, one run each, judged by a generous SLO.
const EXPERIMENT: &str = "apiVersion: llmbench.dev/v1alpha1
kind: BenchmarkExperiment
metadata:
  name: conc
spec:
  template:
    harness: vllm-benchmark
    workload: {builtin: random_concurrent}
    stack: {model: llmbench-sim}
    overrides: [random-input-len=32, random-output-len=8, num-prompts=4]
    slo: {ttftP99Ms: 5000, maxFailureRate: 0.0}
  factors:
    - {name: conc, key: max-concurrency, levels: ['1', '2']}
";

/// `llmbench dashboard` on a free port, killed on drop.
struct Dashboard {
    child: Child,
    port: u16,
}

impl Dashboard {
    fn start(results: &Path, work: &Path) -> Dashboard {
        let port = free_port();
        let child = llmbench()
            .args(["dashboard", "--results"])
            .arg(results)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--work-dir"])
            .arg(work)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts the dashboard");
        let dashboard = Dashboard { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while dashboard.get("/healthz").0 != 200 {
            assert!(Instant::now() < deadline, "the dashboard did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        dashboard
    }

    /// GET `path`, sent as written (no normalisation of `..`): status, headers, body.
    fn get(&self, path: &str) -> (u16, String, Vec<u8>) {
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return (0, String::new(), Vec::new());
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .expect("timeout");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n"
        )
        .expect("send");
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(response.len());
        let head = String::from_utf8_lossy(&response[..split]).into_owned();
        let body = response.get(split + 4..).unwrap_or_default().to_vec();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_lowercase(), body)
    }

    /// GET `path` and its JSON body, asserting the status.
    fn json(&self, path: &str, status: u16) -> Value {
        let (got, _, body) = self.get(path);
        let text = String::from_utf8_lossy(&body);
        assert_eq!(got, status, "{path}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn run_row<'a>(listing: &'a Value, id: &str) -> &'a Value {
    listing["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {listing}"))
}

fn ids(listing: &Value) -> Vec<String> {
    let mut ids: Vec<String> = listing["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    ids
}

/// A run's row carries exactly the figures of its summary.json.
fn assert_figures_of_summary(row: &Value, dir: &Path) {
    let summary = json(&dir.join("summary.json"));
    let figures = &row["figures"];
    assert_eq!(figures["requests"], summary["requests"]["total"], "{row}");
    assert_eq!(figures["succeeded"], summary["requests"]["succeeded"]);
    assert_eq!(figures["failed"], summary["requests"]["failed"]);
    assert_eq!(
        figures["requests_per_s"],
        summary["throughput"]["requests_per_s"]
    );
    assert_eq!(
        figures["output_tokens_per_s"],
        summary["throughput"]["output_tokens_per_s"]
    );
    for (field, metric, stat) in [
        ("ttft_p50_ms", "ttft", "p50"),
        ("ttft_p99_ms", "ttft", "p99"),
        ("tpot_p50_ms", "tpot", "p50"),
        ("tpot_p99_ms", "tpot", "p99"),
        ("e2e_p99_ms", "e2e", "p99"),
    ] {
        assert_eq!(
            figures[field], summary["latency_ms"][metric][stat],
            "{field}"
        );
        assert!(figures[field].as_f64().is_some_and(|v| v > 0.0), "{field}");
    }
    assert_eq!(row["harness"], summary["harness"]);
    assert_eq!(row["model"], summary["model"]);
    assert_eq!(row["state"], "complete");
    assert_eq!(row["report"], "report.html");
    assert!(
        row["plots"]
            .as_array()
            .expect("plots")
            .iter()
            .any(|p| p == "plots/ttft_distribution.png"),
        "{row}"
    );
}

#[test]
fn runs_and_an_experiment_are_listed_with_their_summaries_and_new_runs_appear_without_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results");
    let profile = write(dir.path(), "short.yaml", SHORT);
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "2ms"]);
    succeeded(&run_on_sim(&out, "inference-perf", &profile, "run-a", &sim));
    let experiment = write(dir.path(), "conc.yaml", EXPERIMENT);
    succeeded(
        &llmbench()
            .arg("experiment")
            .arg(&experiment)
            .arg("--output")
            .arg(&out)
            .args(["--id", "exp", "--sim-ttft", "5ms", "--sim-itl", "2ms"])
            .output()
            .expect("runs"),
    );

    let dashboard = Dashboard::start(&out, &dir.path().join("work"));
    let listing = dashboard.json("/api/runs", 200);
    assert_eq!(ids(&listing), ["exp/conc-1-r1", "exp/conc-2-r1", "run-a"]);
    assert_figures_of_summary(run_row(&listing, "run-a"), &out.join("run-a"));
    assert_eq!(run_row(&listing, "run-a")["experiment"], Value::Null);
    assert_eq!(listing["problems"], serde_json::json!([]));

    // The experiment, and its runs judged by its SLO as comparison.json judged them.
    let experiments = listing["experiments"].as_array().expect("experiments");
    assert_eq!(experiments.len(), 1, "{listing}");
    let exp = &experiments[0];
    assert_eq!(
        (&exp["id"], &exp["name"], &exp["harness"], &exp["state"]),
        (
            &Value::from("exp"),
            &Value::from("conc"),
            &Value::from("vllm-benchmark"),
            &Value::from("finished")
        )
    );
    assert_eq!(exp["runs"], serde_json::json!({"succeeded": 2}));
    assert_eq!(exp["slo_met"], serde_json::json!([2, 2]));
    let comparison = json(&out.join("exp/comparison.json"));
    assert_eq!(exp["best"], comparison["best"]);
    for (id, treatment) in [("exp/conc-1-r1", "conc-1"), ("exp/conc-2-r1", "conc-2")] {
        let row = run_row(&listing, id);
        assert_eq!(row["experiment"], "exp");
        assert_eq!(row["treatment"], treatment);
        assert_eq!(row["figures"]["slo"]["by"], "experiment SLO", "{row}");
        assert_eq!(row["figures"]["slo"]["passed"], true, "{row}");
        assert_eq!(
            row["figures"]["requests"], 4,
            "num-prompts=4 of the template"
        );
    }

    // One run, and one experiment with its runs.
    let one = dashboard.json("/api/runs/run-a", 200);
    assert_eq!(one["kind"], "run");
    assert_eq!(one["run"]["run_id"], "run-a");
    let one = dashboard.json("/api/runs/exp", 200);
    assert_eq!(one["kind"], "experiment");
    assert_eq!(one["runs"].as_array().map(Vec::len), Some(2));
    let missing = dashboard.json("/api/runs/nope", 404);
    assert!(
        missing["error"].as_str().expect("error").contains("nope"),
        "{missing}"
    );

    // A run written while the dashboard serves is listed on the next request.
    succeeded(&run_on_sim(&out, "inference-perf", &profile, "run-b", &sim));
    let listing = dashboard.json("/api/runs", 200);
    assert_eq!(
        ids(&listing),
        ["exp/conc-1-r1", "exp/conc-2-r1", "run-a", "run-b"]
    );
    assert_figures_of_summary(run_row(&listing, "run-b"), &out.join("run-b"));
    // Newest first.
    assert_eq!(listing["runs"][0]["id"], "run-b");

    // The page itself: one file, nothing loaded from elsewhere.
    let (status, head, page) = dashboard.get("/");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    let page = String::from_utf8(page).expect("utf-8");
    assert!(page.contains("/api/runs"));
    for external in ["http://", "https://", "<link", "src=\""] {
        assert!(!page.contains(external), "the page loads {external}");
    }
}

#[test]
fn the_comparison_is_the_one_llmbench_plot_draws_and_a_running_run_is_not_compared() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results");
    let profile = write(dir.path(), "short.yaml", SHORT);
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "2ms"]);
    for id in ["run-a", "run-b"] {
        succeeded(&run_on_sim(&out, "inference-perf", &profile, id, &sim));
    }
    let dashboard = Dashboard::start(&out, &dir.path().join("work"));

    let compared = dashboard.json("/api/compare?runs=run-a,run-b", 200);
    let rows = compared["runs"].as_array().expect("runs");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["run"]["id"], "run-a");
    assert_eq!(rows[1]["run"]["id"], "run-b");
    let page = compared["page"].as_str().expect("page");
    assert!(page.starts_with("/compare/") && page.ends_with("/compare.html"));
    let (status, head, body) = dashboard.get(page);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    let html = String::from_utf8(body).expect("utf-8");

    // `llmbench plot` of the same two directories draws the same pictures.
    let plotted = dir.path().join("plotted");
    succeeded(
        &llmbench()
            .arg("plot")
            .arg(out.join("run-a"))
            .arg(out.join("run-b"))
            .arg("--output")
            .arg(&plotted)
            .output()
            .expect("plots"),
    );
    let mut plot_pictures: Vec<String> = std::fs::read_dir(&plotted)
        .expect("plotted")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".png"))
        .collect();
    plot_pictures.sort();
    let pictures: Vec<String> = compared["pictures"]
        .as_array()
        .expect("pictures")
        .iter()
        .map(|p| {
            p.as_str()
                .expect("path")
                .rsplit('/')
                .next()
                .expect("name")
                .to_owned()
        })
        .collect();
    assert_eq!(pictures, plot_pictures);
    assert!(pictures.contains(&"latency_cdf.png".to_owned()));
    let plot_html = std::fs::read_to_string(plotted.join("compare.html")).expect("compare.html");
    for needle in ["run-a", "run-b", "Latency distributions"] {
        assert!(html.contains(needle), "{needle}");
        assert!(plot_html.contains(needle), "{needle}");
    }
    for picture in compared["pictures"].as_array().expect("pictures") {
        let (status, head, body) = dashboard.get(picture.as_str().expect("path"));
        assert_eq!(status, 200, "{picture}");
        assert!(head.contains("content-type: image/png"), "{head}");
        assert!(body.starts_with(b"\x89PNG"), "{picture}");
    }
    // Drawn once: asked again, the same page.
    let again = dashboard.json("/api/compare?runs=run-a,run-b", 200);
    assert_eq!(again["page"], compared["page"]);

    // What cannot be compared says why.
    let error = dashboard.json("/api/compare?runs=run-a", 400);
    assert!(
        error["error"]
            .as_str()
            .expect("error")
            .contains("two or more")
    );
    let error = dashboard.json("/api/compare?runs=run-a,ghost", 404);
    assert!(error["error"].as_str().expect("error").contains("ghost"));

    // A run going on: listed with its progress, refused for comparison until it ends, then listed with figures.
    let longer = write(dir.path(), "longer.yaml", LONGER);
    let mut live = llmbench()
        .args(["run", "--harness", "inference-perf", "--profile"])
        .arg(&longer)
        .args(["--run-id", "live", "--output"])
        .arg(&out)
        .args([
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--no-server-metrics",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the run");
    let deadline = Instant::now() + Duration::from_secs(60);
    let running = loop {
        let listing = dashboard.json("/api/runs", 200);
        let row = listing["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .find(|r| r["id"] == "live" && r["progress"]["recorded"].as_u64() > Some(0))
            .cloned();
        if let Some(row) = row {
            break row;
        }
        assert!(
            Instant::now() < deadline,
            "the live run never showed progress: {listing}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Refused while it runs (409, naming it); it may have ended in between, and is then compared like any other.
    let (refused, _, body) = dashboard.get("/api/compare?runs=run-a,live");
    let body = String::from_utf8_lossy(&body);
    assert!(
        (refused == 409 && body.contains("live") && body.contains("no summary yet"))
            || refused == 200,
        "{refused} {body}"
    );
    let status = live.wait().expect("the run ends");
    // Seen before its summary was written: going, or ended and being summarised.
    assert!(
        running["state"] == "running" || running["state"] == "summarizing",
        "{running}"
    );
    assert_eq!(running["progress"]["planned"], 40, "{running}");
    assert_eq!(running["figures"], Value::Null);
    assert!(running["progress"]["recorded"].as_u64() <= Some(40));
    assert!(status.success(), "{status:?}");
    let listing = dashboard.json("/api/runs", 200);
    let done = run_row(&listing, "live");
    assert_eq!(done["state"], "complete");
    assert_eq!(done["progress"], Value::Null);
    assert_figures_of_summary(done, &out.join("live"));
}

#[test]
fn a_runs_files_are_served_and_paths_out_of_the_results_directory_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("results");
    let profile = write(dir.path(), "short.yaml", SHORT);
    let sim = SimProcess::start(&["--model", "m"]);
    succeeded(&run_on_sim(&out, "inference-perf", &profile, "run-a", &sim));
    std::fs::write(dir.path().join("secret.txt"), "not a result").expect("write");
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), out.join("run-a/leak.txt"))
        .expect("link");
    let dashboard = Dashboard::start(&out, &dir.path().join("work"));

    let (status, head, body) = dashboard.get("/files/run-a/report.html");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    assert_eq!(
        body,
        std::fs::read(out.join("run-a/report.html")).expect("report")
    );
    let (status, head, body) = dashboard.get("/files/run-a/plots/ttft_distribution.png");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: image/png"), "{head}");
    assert!(body.starts_with(b"\x89PNG"));

    for path in [
        "/files/../secret.txt",
        "/files/run-a/../../secret.txt",
        "/files/%2e%2e/secret.txt",
        "/files/run-a/%2e%2e/%2E%2E/secret.txt",
        "/files/..%2fsecret.txt",
        "/files/%2fetc%2fpasswd",
        "/files//etc/passwd",
        "/files/run-a/.llmbench.lock",
        #[cfg(unix)]
        "/files/run-a/leak.txt",
    ] {
        let (status, _, body) = dashboard.get(path);
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("refused"), "{path}: {body}");
        assert!(!body.contains("not a result"), "{path}");
    }
    let (status, _, _) = dashboard.get("/files/run-a/nothing.html");
    assert_eq!(status, 404);
}

#[test]
fn a_missing_results_directory_is_refused_and_an_empty_one_lists_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("not-there");
    let output = llmbench()
        .args(["dashboard", "--results"])
        .arg(&missing)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(error.contains("not-there"), "{error}");
    assert!(error.contains("cannot be read"), "{error}");
    assert!(error.contains("llmbench run --output DIR"), "{error}");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let dashboard = Dashboard::start(&empty, &dir.path().join("work"));
    let listing = dashboard.json("/api/runs", 200);
    assert_eq!(listing["runs"], serde_json::json!([]));
    assert_eq!(listing["experiments"], serde_json::json!([]));
    let error = dashboard.json("/api/compare?runs=", 400);
    assert!(
        error["error"]
            .as_str()
            .expect("error")
            .contains("two or more")
    );
}
