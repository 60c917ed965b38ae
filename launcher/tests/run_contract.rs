//! The run's contract with the user, through the real binary: which server a run drives and its first line
//! saying so; results directories that are never reused by accident; SIGTERM, SIGINT and SIGKILL mid-run losing
//! nothing that was measured; multi-turn conversations whose requests carry the history on the wire; warm-up,
//! goodput and per-request files where profiles ask for them.

mod common;

use std::io::{BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

/// `llmbench report RUN_DIR`.
fn report(run: &Path) -> Output {
    llmbench()
        .arg("report")
        .arg(run)
        .output()
        .expect("report runs")
}

fn records(dir: &Path) -> Vec<Value> {
    common::requests_jsonl(&dir.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The run's first line on standard output: which server it drives.
fn first_line(output: &Output) -> String {
    stdout(output).lines().next().unwrap_or_default().to_owned()
}

/// The vllm bench serve result file of a run directory (its name carries the date).
fn vllm_result(run: &Path) -> Value {
    let path = std::fs::read_dir(run)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vllm-"))
        })
        .expect("the vllm result file");
    json(&path)
}

/// A tiny OpenAI-compatible server that keeps every request body it reads and answers each with a streamed
/// completion or chat chunk carrying `answer`, then `[DONE]`.
struct CaptureServer {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl CaptureServer {
    fn start(answer: &'static str) -> CaptureServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &kept, answer));
            }
        });
        CaptureServer { url, bodies }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().expect("lock").clone()
    }
}

fn serve(stream: std::net::TcpStream, kept: &Mutex<Vec<Value>>, answer: &str) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let Some(body) = common::read_request(&mut reader) else {
            return;
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let chat = body.get("messages").is_some();
        // Only the API's requests: the run's probe of `GET /metrics` has no body (and gets no Prometheus text).
        if !body.is_null() {
            kept.lock().expect("lock").push(body);
        }
        let words = answer.split_whitespace().count();
        let chunk = if chat {
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": answer}, "finish_reason": "length"}]})
        } else {
            serde_json::json!({"choices": [{"index": 0, "text": answer, "finish_reason": "length"}]})
        };
        let usage = serde_json::json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": words}});
        let events = format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n");
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            events.len()
        );
        if writer.write_all(head.as_bytes()).is_err()
            || writer.write_all(events.as_bytes()).is_err()
        {
            return;
        }
    }
}

#[test]
fn a_profile_that_names_its_server_is_run_against_it_and_the_first_line_says_so() {
    let server = CaptureServer::start("one two");
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "p.yaml",
        &format!(
            "base-url: {}\nmodel: served-model\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\n\
             num-prompts: 3\nrequest-rate: 100\n",
            server.url
        ),
    );
    let output = run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "own-server",
        &["--tokenizer", "builtin"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let first = first_line(&output);
    assert!(first.contains(&server.url), "{first}");
    assert!(first.contains("the server the profile names"), "{first}");
    let bodies = server.bodies();
    // The pre-flight's test request went to the same server first: the run's API, its model, one token.
    assert_eq!(bodies.len(), 4, "{bodies:?}");
    assert_eq!(bodies[0]["max_tokens"], 1, "{}", bodies[0]);
    assert_eq!(bodies[0]["stream"], true, "{}", bodies[0]);
    assert!(bodies.iter().all(|b| b["model"] == "served-model"));
    let meta = json(&dir.path().join("own-server/run.json"));
    assert_eq!(
        meta["preflight"]["request"]["url"],
        format!("{}/v1/completions", server.url)
    );
}

#[test]
fn with_no_endpoint_anywhere_the_embedded_simulator_runs_and_the_first_line_says_so() {
    let dir = tempfile::tempdir().expect("tmp");
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "sanity_random",
        "embedded",
        &[
            "--override",
            "load.stages.0.duration=1",
            "--override",
            "load.stages.0.rate=5",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let first = first_line(&output);
    assert!(first.contains("embedded simulator"), "{first}");
}

#[test]
fn the_embedded_simulator_serves_the_model_a_profile_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "m.yaml",
        "model: org/my-model\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\nnum-prompts: 3\n\
         request-rate: 100\n",
    );
    let output = run_profile(dir.path(), "vllm-benchmark", &profile, "model", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(first_line(&output).contains("embedded simulator"));
    assert_eq!(
        json(&dir.path().join("model/summary.json"))["requests"]["succeeded"],
        3
    );
}

#[test]
fn an_endpoint_that_is_not_a_url_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tmp");
    for (endpoint, expected) in [
        ("localhost:8000", "http:// or https://"),
        ("vllm", "not a valid URL"),
        ("ftp://x", "http:// or https://"),
    ] {
        let output = llmbench()
            .args([
                "run",
                "--harness",
                "inference-perf",
                "--profile",
                "sanity_random",
            ])
            .args(["--endpoint", endpoint, "--model", "m", "--output"])
            .arg(dir.path())
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(1), "{endpoint}");
        let err = stderr(&output);
        assert!(
            err.contains(expected) && err.contains("--endpoint"),
            "{endpoint}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "nothing written"
    );
}

/// A run against the embedded simulator of `num-prompts` requests at `rate`, each `tokens` tokens at 10 ms.
fn sim_profile(dir: &Path, prompts: u32, rate: u32, tokens: u32) -> PathBuf {
    write(
        dir,
        "sim.yaml",
        &format!(
            "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: {tokens}\nnum-prompts: {prompts}\n\
             request-rate: {rate}\n"
        ),
    )
}

fn quick_run(dir: &Path, run_id: &str, extra: &[&str]) -> Output {
    let profile = sim_profile(dir, 2, 100, 2);
    run_profile(dir, "vllm-benchmark", &profile, run_id, extra)
}

#[test]
fn a_reused_run_id_is_refused_and_the_earlier_results_are_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    let first = quick_run(dir.path(), "same", &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let before = common::requests_jsonl(&dir.path().join("same/requests.jsonl")).expect("records");
    let second = quick_run(dir.path(), "same", &[]);
    assert_eq!(second.status.code(), Some(1));
    assert!(
        stderr(&second).contains("already exists"),
        "{}",
        stderr(&second)
    );
    assert!(
        stderr(&second).contains("--overwrite"),
        "{}",
        stderr(&second)
    );
    let after = common::requests_jsonl(&dir.path().join("same/requests.jsonl")).expect("records");
    assert_eq!(before, after, "the earlier run's records are untouched");
    let third = quick_run(dir.path(), "same", &["--overwrite"]);
    assert!(third.status.success(), "{}", stderr(&third));
}

#[test]
fn run_ids_that_are_paths_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    for id in ["../escape", "a/b", "..", ""] {
        let output = quick_run(dir.path(), id, &[]);
        assert_eq!(output.status.code(), Some(1), "{id:?}");
        assert!(
            stderr(&output).contains("not a valid run id"),
            "{}",
            stderr(&output)
        );
    }
    assert!(!dir.path().join("../escape").exists());
}

#[test]
fn a_second_concurrent_run_with_the_same_id_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = sim_profile(dir.path(), 40, 10, 2);
    let mut first = llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--run-id", "busy", "--output"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns");
    wait_for(&dir.path().join("busy/run.json"), Duration::from_secs(20));
    let second = quick_run(dir.path(), "busy", &["--overwrite"]);
    assert_eq!(second.status.code(), Some(1));
    assert!(
        stderr(&second).contains("in use by another llmbench run"),
        "{}",
        stderr(&second)
    );
    // Nor does `llmbench report` rewrite the files of a run that is still writing them.
    let report = llmbench()
        .arg("report")
        .arg(dir.path().join("busy"))
        .output()
        .expect("report runs");
    assert_eq!(report.status.code(), Some(1));
    assert!(
        stderr(&report).contains("still writing"),
        "{}",
        stderr(&report)
    );
    let _ = first.kill();
    let _ = first.wait();
}

fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a long run (100 requests at 20/s, 50 tokens at 20 ms each: a second per request) and waits until
/// requests are being recorded.
fn start_long_run(dir: &Path, extra: &[&str]) -> Child {
    let profile = sim_profile(dir, 100, 20, 50);
    let child = llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--run-id", "long", "--sim-itl", "20ms", "--output"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    let records = dir.join("long/requests.jsonl");
    let start = Instant::now();
    loop {
        let lines = common::recorded(&records);
        if lines >= 3 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the run never recorded a request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

fn finish(child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    let mut child = child;
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the run did not end within {limit:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_records_in_flight_requests_as_cancelled_and_marks_every_report_interrupted() {
    let dir = tempfile::tempdir().expect("tmp");
    let child = start_long_run(dir.path(), &["--interrupt-grace", "200ms"]);
    signal(&child, "TERM");
    let output = finish(child, Duration::from_secs(20));
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("interrupted by SIGTERM"),
        "{}",
        stderr(&output)
    );
    let run = dir.path().join("long");
    let summary = json(&run.join("summary.json"));
    let state = &summary["run"];
    assert_eq!(state["state"], "interrupted");
    assert_eq!(state["stopped"]["signal"], "SIGTERM");
    assert_eq!(state["planned"], 100);
    let sent = state["sent"].as_u64().expect("sent");
    let finished = state["finished"].as_u64().expect("finished");
    assert!(sent < 100, "the run stopped issuing: {sent}");
    assert_eq!(sent, finished, "every sent request is recorded");
    let lines = records(&run);
    assert_eq!(lines.len() as u64, finished);
    let cancelled: Vec<&Value> = lines
        .iter()
        .filter(|r| r["error"]["class"] == "cancelled")
        .collect();
    assert!(
        !cancelled.is_empty(),
        "requests in flight after the grace are cancelled"
    );
    assert!(
        cancelled
            .iter()
            .any(|r| r["chunks"].as_array().is_some_and(|c| !c.is_empty())),
        "a cancelled request keeps the chunks it had"
    );
    assert_eq!(
        summary["errors"]["cancelled"].as_u64(),
        Some(cancelled.len() as u64)
    );
    let run_json = json(&run.join("run.json"));
    assert_eq!(run_json["end"]["state"], "interrupted");
    assert_eq!(vllm_result(&run)["llmbench_run"]["state"], "interrupted");
}

#[test]
fn a_second_sigint_cancels_requests_in_flight_at_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let child = start_long_run(dir.path(), &["--interrupt-grace", "60s"]);
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, "INT");
    // Without the second signal the run would wait up to 60 s for its requests in flight.
    let output = finish(child, Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let summary = json(&dir.path().join("long/summary.json"));
    assert_eq!(summary["run"]["stopped"]["signal"], "SIGINT");
}

#[test]
fn after_sigkill_report_counts_every_sent_request_as_recorded_or_lost_in_flight() {
    let dir = tempfile::tempdir().expect("tmp");
    // A second per request at 20 requests/s: some twenty are in flight at any moment.
    let child = start_long_run(dir.path(), &[]);
    signal(&child, "KILL");
    let _ = finish(child, Duration::from_secs(10));
    let run = dir.path().join("long");
    let recorded = records(&run);
    assert!(recorded.len() >= 3);
    let output = report(&run);
    // 8: the run was killed; its reports were rebuilt from what it recorded.
    assert_eq!(output.status.code(), Some(8), "{}", stderr(&output));
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["run"]["state"], "incomplete");
    assert_eq!(summary["run"]["planned"], 100);
    let finished = summary["run"]["finished"].as_u64().expect("finished");
    let sent = summary["run"]["sent"]
        .as_u64()
        .expect("sent, from the sent log");
    let lost = summary["requests"]["lost_in_flight"]
        .as_u64()
        .expect("lost_in_flight");
    assert_eq!(finished, recorded.len() as u64);
    assert!(lost > 0, "requests were in flight at the kill: {summary:#}");
    assert_eq!(sent, finished + lost, "{summary:#}");
    // The lost are neither successes nor failures of the server.
    assert_eq!(summary["requests"]["total"].as_u64(), Some(finished));
    assert_eq!(
        summary["requests"]["succeeded"]
            .as_u64()
            .expect("succeeded")
            + summary["requests"]["failed"].as_u64().expect("failed"),
        finished
    );
    // Every lost request is listed, once, and none of them has a record.
    let recorded_ids: std::collections::BTreeSet<u64> = recorded
        .iter()
        .map(|r| r["id"].as_u64().expect("id"))
        .collect();
    let listed: Vec<Value> = std::fs::read_to_string(run.join("lost_in_flight.jsonl"))
        .expect("lost_in_flight.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(listed.len() as u64, lost);
    let listed_ids: std::collections::BTreeSet<u64> = listed
        .iter()
        .map(|l| l["id"].as_u64().expect("id"))
        .collect();
    assert_eq!(listed_ids.len() as u64, lost);
    assert!(listed_ids.is_disjoint(&recorded_ids));
    for line in &listed {
        assert_eq!(line["outcome"], "lost_in_flight");
        assert!(line["sent_ns"].as_u64() >= line["scheduled_ns"].as_u64());
        assert_eq!(line["max_tokens"], 50);
    }
    // The words the user reads, on the terminal and in report.html.
    let words =
        format!("{lost} requests were in flight when the run was killed; their answers are lost");
    assert!(stderr(&output).contains(&words), "{}", stderr(&output));
    assert!(stdout(&output).contains(&words), "{}", stdout(&output));
    let html = std::fs::read_to_string(run.join("report.html")).expect("report.html");
    assert!(html.contains(&words), "report.html does not say: {words}");
    // Summarised from disk in bounded memory, the same requests are lost.
    let spilled = llmbench()
        .arg("report")
        .arg(&run)
        .args(["--records-memory", "1KiB"])
        .output()
        .expect("report runs");
    assert_eq!(spilled.status.code(), Some(8), "{}", stderr(&spilled));
    let again = json(&run.join("summary.json"));
    assert_eq!(again["requests"]["lost_in_flight"].as_u64(), Some(lost));
    assert_eq!(again["run"]["sent"].as_u64(), Some(sent));
    // The server metrics scraped until the kill are summarized too: run.json named the scrape when it started.
    assert!(
        summary["server_metrics"]["targets"][0]["scrapes"].as_u64() >= Some(1),
        "{summary:#}"
    );
    // With no stage times, the server metrics' window is the scrapes it spans: numbers, which JSON can carry.
    let window = &summary["server_metrics"]["overall"];
    assert!(
        window["start_s"].as_f64() <= window["end_s"].as_f64() && window["end_s"].is_f64(),
        "{window:#}"
    );
}

#[test]
fn a_records_file_that_stops_growing_stops_the_run_and_every_report_holds_what_it_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    // A file-size limit of 5 MiB (what a quota or a full disk does to the one file that grows): the records, about
    // 2 KiB per 2 000-token answer, reach it after some 2 500 requests (the run plans far more); every report of
    // those fits under it.
    let output = Command::new("bash")
        .args([
            "-c",
            "ulimit -f 5120 && trap '' XFSZ && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_llmbench"),
            "run",
            "--harness",
            "vllm-benchmark",
            "--profile",
            "sanity_random",
            "--concurrency",
            "32",
            "--requests",
            "20000",
            "--input-tokens",
            "8",
            "--output-tokens",
            "2000",
            "--sim-ttft",
            "0ms",
            "--sim-itl",
            "0ms",
            "--run-id",
            "full",
            "--output",
        ])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("bash runs llmbench");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let run = dir.path().join("full");
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["run"]["state"], "stopped", "{summary:#}");
    assert_eq!(summary["run"]["stopped"]["reason"], "records_unwritable");
    let sent = summary["run"]["sent"].as_u64().expect("sent");
    let recorded = summary["requests"]["total"].as_u64().expect("total");
    let lost = summary["requests"]["lost_in_flight"]
        .as_u64()
        .expect("the requests the file refused");
    // The records that reached the file before it refused more; the rest sent (at least the one cut short).
    assert!(recorded > 1_000 && lost >= 1, "{summary:#}");
    // Every request sent is either in the records or listed as lost, never both.
    assert_eq!(sent, recorded + lost, "{summary:#}");
    let listed = std::fs::read_to_string(run.join("lost_in_flight.jsonl")).expect("the list");
    assert_eq!(listed.lines().count() as u64, lost);
    let words = format!(
        "every report in {} was written from the {recorded} request(s) the file holds; the {lost} sent whose \
         records it refused are counted as lost",
        run.display()
    );
    assert!(stderr(&output).contains(&words), "{}", stderr(&output));
    // vllm bench serve's own result file and the page hold the same requests.
    assert_eq!(vllm_result(&run)["completed"].as_u64(), Some(recorded));
    let html = std::fs::read_to_string(run.join("report.html")).expect("report.html");
    // In its verdict and its warnings, the latter with the records the file holds.
    let words = format!("{lost} requests sent have no record: the records file refused them");
    assert!(html.contains(&format!("{sent} requests sent of 20000 planned; {words}")));
    assert!(html.contains(&format!("{recorded} requests recorded; {words}")));
    // `llmbench report` of the same files says the same.
    let again = report(&run);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        json(&run.join("summary.json"))["requests"]["lost_in_flight"].as_u64(),
        Some(lost)
    );
}

#[test]
fn a_torn_last_record_is_skipped_and_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let done = quick_run(dir.path(), "torn", &[]);
    assert!(done.status.success(), "{}", stderr(&done));
    let run = dir.path().join("torn");
    // A run that ended has recorded everything it sent: its sent log is gone.
    assert!(!run.join("sent.bin").exists());
    // A frame that says 200 bytes follow, and the first 3 of them: the writer killed mid-record.
    let mut bytes = std::fs::read(run.join("requests.bin")).expect("records");
    bytes.extend_from_slice(&[200, 1, 6, 99]);
    std::fs::write(run.join("requests.bin"), bytes).expect("tear");
    let output = report(&run);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("torn"), "{}", stderr(&output));
    assert_eq!(json(&run.join("summary.json"))["requests"]["total"], 2);
}

#[test]
fn guidellm_multi_turn_requests_carry_the_earlier_turns_and_the_actual_answers() {
    let server = CaptureServer::start("answer words here");
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "mt.yaml",
        &format!(
            "spec:\n  backend: {{kind: openai_http, target: {}, model: m, request_format: /v1/chat/completions}}\n  \
             data: [{{kind: synthetic_text, prompt_tokens: 5, output_tokens: 3, turns: 3, prefix_buckets: \
             [{{prefix_tokens: 4, prefix_count: 1}}]}}]\n  constraints: [{{kind: max_requests, count: 6}}]\n  \
             profile: {{kind: synchronous}}\n",
            server.url
        ),
    );
    // Without the pre-flight, whose test request the server would keep among the turns.
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "mt",
        &["--tokenizer", "builtin", "--no-preflight"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 6);
    let roles = |b: &Value| -> Vec<String> {
        b["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| m["role"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    // Synchronous: conversation 0's three turns, then conversation 1's.
    assert_eq!(roles(&bodies[0]), ["system", "user"]);
    assert_eq!(roles(&bodies[1]), ["system", "user", "assistant", "user"]);
    assert_eq!(
        roles(&bodies[2]),
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(bodies[1]["messages"][2]["content"], "answer words here");
    assert_eq!(bodies[2]["messages"][1], bodies[1]["messages"][1]);
    assert_eq!(roles(&bodies[3]), ["system", "user"]);
    let lines = records(&dir.path().join("mt"));
    let turns: Vec<(u64, u64)> = lines
        .iter()
        .map(|r| {
            (
                r["conversation"]["id"].as_u64().expect("id"),
                r["conversation"]["turn"].as_u64().expect("turn"),
            )
        })
        .collect();
    assert_eq!(turns, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
    // Input tokens grow by the answer (3) and the next user turn (5): 4 + 5, 9 + 3 + 5, 17 + 3 + 5.
    let inputs: Vec<u64> = lines
        .iter()
        .take(3)
        .map(|r| r["input_tokens"].as_u64().expect("tokens"))
        .collect();
    assert_eq!(inputs, [9, 17, 25]);
    assert!(
        lines.iter().all(|r| r.get("text").is_none()),
        "answers are not kept in the records"
    );
    let summary = json(&dir.path().join("mt/summary.json"));
    assert_eq!(summary["conversations"]["conversations"], 2);
    assert_eq!(
        summary["conversations"]["turns"].as_array().map(Vec::len),
        Some(3)
    );
}

#[test]
fn inference_perf_multi_turn_sessions_grow_on_the_embedded_simulator() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "ipmt.yaml",
        "server: {type: vllm, base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model_name: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, ignore_eos: true}\napi: {type: completion, streaming: true}\n\
         data:\n  type: shared_prefix\n  shared_prefix: {num_groups: 1, num_prompts_per_group: 4, system_prompt_len: 10, \
         question_len: 5, output_len: 3, enable_multi_turn_chat: true}\nload:\n  type: constant\n  stages: [{rate: 20, \
         duration: 2}]\nreport:\n  request_lifecycle: {per_request: true}\n",
    );
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "ipmt",
        &["--sim-itl", "1ms", "--sim-ttft", "2ms"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = records(&dir.path().join("ipmt"));
    assert_eq!(lines.len(), 40);
    // User 0's rounds: the server counts the whole growing context (system prompt twice in round 0, then
    // each earlier prompt and answer).
    let mut prompt_tokens: Vec<(u64, u64)> = lines
        .iter()
        .filter(|r| r["conversation"]["id"] == 0)
        .map(|r| {
            (
                r["conversation"]["turn"].as_u64().expect("turn"),
                r["usage"]["prompt_tokens"].as_u64().expect("usage"),
            )
        })
        .collect();
    prompt_tokens.sort();
    assert_eq!(prompt_tokens.len(), 10);
    assert_eq!(prompt_tokens[0], (0, 25), "10 + (10 + 5)");
    for pair in prompt_tokens.windows(2) {
        assert_eq!(
            pair[1].1,
            pair[0].1 + 3 + 15,
            "each round adds the answer and the prompt again"
        );
    }
    assert!(
        dir.path()
            .join("ipmt/per_request_lifecycle_metrics.json")
            .is_file()
    );
}

#[test]
fn vllm_goodput_and_warmups_are_honoured() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "g.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: 10\nrequest-rate: 50\n\
         num-warmups: 3\ngoodput: \"ttft:1000 e2el:1\"\n",
    );
    let output = run_profile(dir.path(), "vllm-benchmark", &profile, "g", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let run = dir.path().join("g");
    let lines = records(&run);
    assert_eq!(
        lines.len(),
        13,
        "3 warm-ups and 10 measured requests are recorded"
    );
    assert_eq!(lines.iter().filter(|r| r["warmup"] == true).count(), 3);
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["requests"]["total"], 10);
    assert_eq!(summary["excluded"]["warmup_requests"], 3);
    // e2el ≤ 1 ms cannot hold against a 50 ms TTFT: no request is good.
    assert_eq!(summary["goodput"]["good"], 0);
    assert_eq!(summary["goodput"]["judged"], 10);
    let result = vllm_result(&run);
    assert_eq!(result["request_goodput"], 0.0);
    assert_eq!(result["completed"], 10);
}

#[test]
fn vllm_result_filename_names_the_result_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "r.yaml",
        "dataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\nnum-prompts: 2\nrequest-rate: 50\n\
         result-filename: my-result.json\n",
    );
    let output = run_profile(dir.path(), "vllm-benchmark", &profile, "r", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(json(&dir.path().join("r/my-result.json"))["completed"], 2);
}

/// The sum over `finished_reason` of the simulator's `vllm:request_success_total`: every request it took in and
/// ended (stop, length, or abort when its client went away), and its requests still running or waiting.
fn sim_requests(sim: &SimProcess) -> (f64, f64, f64) {
    let (status, text) = http_get(&format!("{}/metrics", sim.url)).expect("the sim's /metrics");
    assert_eq!(status, 200);
    let sum = |name: &str, reason: Option<&str>| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(name) && reason.is_none_or(|r| l.contains(r)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let ended_ok = sum(
        "vllm:request_success_total{",
        Some("finished_reason=\"length\""),
    ) + sum(
        "vllm:request_success_total{",
        Some("finished_reason=\"stop\""),
    );
    let ended = sum("vllm:request_success_total{", None);
    let in_flight =
        sum("vllm:num_requests_running{", None) + sum("vllm:num_requests_waiting{", None);
    (ended_ok, ended, in_flight)
}

/// SIGKILL at a high rate with hundreds of requests in flight (a 200-token answer at 2 ms a token is 0.4 s; 2 000
/// requests/s asked): `llmbench report` lists every request the sent log holds, as recorded or `lost_in_flight`,
/// none twice, and every answer the launcher recorded is one the server finished.
#[test]
fn a_run_killed_at_a_high_rate_accounts_for_every_request_it_sent() {
    let sim = SimProcess::start(&["--model", "m", "--itl", "2ms", "--max-num-seqs", "100000"]);
    let dir = tempfile::tempdir().expect("tmp");
    let profile = sim_profile(dir.path(), 1_000_000, 2000, 200);
    let child = llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args([
            "--run-id",
            "fast",
            "--model",
            "m",
            "--tokenizer",
            "builtin",
            "--endpoint",
            &sim.url,
        ])
        .arg("--output")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns");
    let run = dir.path().join("fast");
    let start = Instant::now();
    let recorded_before_kill = loop {
        // Whole records only: the writer may be caught between two writes of one batch, and the torn tail it
        // leaves at the kill is not a record (`report` skips it and counts its request as lost in flight).
        let lines = common::recorded(&run.join("requests.jsonl"));
        if lines >= 500 {
            break lines;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the run recorded only {lines} requests"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    signal(&child, "KILL");
    let _ = finish(child, Duration::from_secs(10));
    // The killed launcher's connections close: the simulator aborts what it was answering. Wait until it has.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (ended_ok, ended, in_flight) = loop {
        let figures = sim_requests(&sim);
        if figures.2 == 0.0 || Instant::now() > deadline {
            break figures;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(in_flight, 0.0, "the simulator still answers a killed run");
    let output = report(&run);
    assert_eq!(output.status.code(), Some(8), "{}", stderr(&output));
    let summary = json(&run.join("summary.json"));
    let sent = summary["run"]["sent"].as_u64().expect("sent");
    let finished = summary["run"]["finished"].as_u64().expect("finished");
    let lost = summary["requests"]["lost_in_flight"]
        .as_u64()
        .expect("lost_in_flight");
    let succeeded = summary["requests"]["succeeded"]
        .as_u64()
        .expect("succeeded");
    eprintln!(
        "killed at {recorded_before_kill}+ records: sent {sent}, recorded {finished} ({succeeded} succeeded), lost in \
         flight {lost}; the simulator ended {ended} ({ended_ok} answered in full)"
    );
    assert_eq!(sent, finished + lost, "{summary:#}");
    assert!(lost >= 50, "many were in flight at the kill: {summary:#}");
    // Nothing recorded before the kill is missing, and each recorded request is listed once.
    let recorded = records(&run);
    assert_eq!(recorded.len() as u64, finished);
    assert!(finished >= recorded_before_kill as u64);
    let mut ids: Vec<u64> = recorded
        .iter()
        .map(|r| r["id"].as_u64().expect("id"))
        .collect();
    let lost_ids: Vec<u64> = std::fs::read_to_string(run.join("lost_in_flight.jsonl"))
        .expect("lost_in_flight.jsonl")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("JSON")["id"]
                .as_u64()
                .expect("id")
        })
        .collect();
    assert_eq!(lost_ids.len() as u64, lost);
    ids.extend(lost_ids);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len() as u64,
        sent,
        "a request is both recorded and lost, or listed twice"
    );
    // Every answer the launcher recorded as whole, the server finished; the server saw every recorded request.
    assert!(
        succeeded as f64 <= ended_ok,
        "{succeeded} recorded answers, {ended_ok} finished by the server"
    );
    assert!(
        finished as f64 <= ended,
        "{finished} recorded, {ended} ended by the server"
    );
}
