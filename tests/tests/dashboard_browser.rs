//! `llmbench dashboard` in a real headless browser (Chromium, Debian's `chromium`): over two runs the real
//! binary wrote against `llmbench sim`, the list page renders both runs' rows with their figures, a run's page
//! shows its figures and its report.html, and the compare page shows both side by side with `llmbench plot`'s
//! comparison. The DOM is read after the page's JavaScript ran (`--dump-dom`); screenshots of the three pages are
//! left in `target/dashboard-browser/` to look at.
//!
//! Chromium is found at `LLMBENCH_CHROMIUM`, else `/usr/bin/chromium`, else `chromium` on the PATH
//! (`tests/tools/node-packages.sh` installs it). Without it the test says so loudly and passes, unless
//! `LLMBENCH_REQUIRE_BROWSER` is set (CI sets it), when it fails.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use llmbench_e2e::browser::{Killed, chromium, explain, render};
use llmbench_e2e::{e2e_disabled, free_port, workspace_binary};
use serde_json::Value;

/// 40 requests at 20 req/s, streamed, 16 tokens each.
const FAST: &str = "\
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {mean: 64, std_dev: 0, min: 64, max: 64, total_count: 40}
  output_distribution: {mean: 16, std_dev: 0, min: 16, max: 16, total_count: 40}
load:
  type: constant
  stages:
    - {rate: 20, duration: 2}
";

/// 20 requests at 10 req/s, 32 tokens each.
const SLOW: &str = "\
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {mean: 64, std_dev: 0, min: 64, max: 64, total_count: 20}
  output_distribution: {mean: 32, std_dev: 0, min: 32, max: 32, total_count: 20}
load:
  type: constant
  stages:
    - {rate: 10, duration: 2}
";

/// GET `path` on the loopback `port`: status and body.
fn get(port: u16, path: &str) -> (u16, String) {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
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
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn wait_for(port: u16, path: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(port, path).0 != 200 {
        assert!(Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn summary(dir: &Path) -> Value {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("summary.json")
}

#[test]
fn the_dashboard_lists_opens_and_compares_two_runs_in_a_real_browser() {
    if e2e_disabled("the_dashboard_lists_opens_and_compares_two_runs_in_a_real_browser") {
        return;
    }
    let Some(chromium) = chromium() else {
        return;
    };
    let llmbench = workspace_binary("llmbench").unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results");

    let sim_port = free_port().expect("port");
    let _sim = Killed(
        Command::new(&llmbench)
            .args(["sim", "--port", &sim_port.to_string()])
            .args(["--model", "m", "--ttft", "20ms", "--itl", "4ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts the simulator"),
    );
    wait_for(sim_port, "/health", "the simulator");
    for (id, profile) in [("fast-run", FAST), ("slow-run", SLOW)] {
        let path = dir.path().join(format!("{id}.yaml"));
        std::fs::write(&path, profile).expect("profile");
        let output = Command::new(&llmbench)
            .args(["run", "--harness", "inference-perf", "--profile"])
            .arg(&path)
            .args(["--run-id", id, "--output"])
            .arg(&results)
            .args(["--endpoint", &format!("http://127.0.0.1:{sim_port}")])
            .args(["--model", "m", "--tokenizer", "builtin"])
            .args(["--no-preflight", "--no-server-metrics"])
            .env("RUST_LOG", "warn")
            .output()
            .expect("runs");
        assert!(output.status.success(), "{}", explain(&output));
    }

    let port = free_port().expect("port");
    let _dashboard = Killed(
        Command::new(&llmbench)
            .args(["dashboard", "--results"])
            .arg(&results)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--work-dir"])
            .arg(dir.path().join("work"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts the dashboard"),
    );
    wait_for(port, "/healthz", "the dashboard");
    // Drawn once here, so the browser's compare page finds it ready.
    let (status, body) = get(port, "/api/compare?runs=fast-run,slow-run");
    assert_eq!(status, 200, "{body}");

    let shots = llmbench
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("dashboard-browser");
    std::fs::create_dir_all(&shots).expect("screenshots dir");
    let profile = dir.path().join("chromium");
    let base = format!("http://127.0.0.1:{port}/");
    let fast = summary(&results.join("fast-run"));
    let slow = summary(&results.join("slow-run"));
    let rps = |s: &Value| {
        format!(
            "{:.2}",
            s["throughput"]["requests_per_s"].as_f64().expect("rps")
        )
    };
    let p99 = |s: &Value| {
        format!(
            "{:.1}",
            s["latency_ms"]["ttft"]["p99"].as_f64().expect("ttft")
        )
    };

    // The list: both rows, each with its own figures.
    let list = render(&chromium, &profile, &base, &shots.join("list.png"));
    for (id, s) in [("fast-run", &fast), ("slow-run", &slow)] {
        let row_start = list
            .find(&format!("data-run-id=\"{id}\""))
            .unwrap_or_else(|| panic!("no row for {id} in\n{list}"));
        let row = &list[row_start..];
        let row = &row[..row.find("</tr>").expect("row end")];
        assert!(row.contains(&rps(s)), "{id}: {} not in {row}", rps(s));
        assert!(row.contains(&p99(s)), "{id}: {} not in {row}", p99(s));
        assert!(row.contains("complete"), "{row}");
    }
    assert!(list.contains("id=\"filter-text\""), "the filters");
    assert!(list.contains("data-sort=\"ttft99\""), "sortable columns");

    // One run: its figures and its report.html.
    let run = render(
        &chromium,
        &profile,
        &format!("{base}#/run/fast-run"),
        &shots.join("run.png"),
    );
    assert!(run.contains("id=\"run-title\""), "{run}");
    assert!(run.contains("id=\"run-figures\""), "{run}");
    assert!(run.contains(&rps(&fast)), "{run}");
    assert!(
        run.contains("src=\"/files/fast-run/report.html\""),
        "the report is embedded: {run}"
    );

    // The comparison: both runs side by side and llmbench plot's page.
    let compare = render(
        &chromium,
        &profile,
        &format!("{base}#/compare/fast-run,slow-run"),
        &shots.join("compare.png"),
    );
    assert!(compare.contains("id=\"compare-table\""), "{compare}");
    let table = &compare[compare.find("id=\"compare-table\"").expect("table")..];
    let table = &table[..table.find("</table>").expect("table end")];
    for s in [&fast, &slow] {
        assert!(table.contains(&rps(s)), "{} not in {table}", rps(s));
        assert!(table.contains(&p99(s)), "{} not in {table}", p99(s));
    }
    assert!(
        compare.contains("id=\"compare-page\"") && compare.contains("/compare.html"),
        "{compare}"
    );
    eprintln!("screenshots in {}", shots.display());
}
