//! A stack the run owns, through the real binary: `llmbench run --serve -- llmbench sim …` starts the simulator,
//! waits for it, benchmarks it, records it (run.json's `stack`, the summary's `engine`), opens and closes vLLM's
//! profiling window around the measured phase, and stops it; a stack killed mid-run stops the run with the
//! stack's reason and keeps every record. `--stack-info` records a stack someone else started.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

/// A port free right now (bound, read, released): the simulator binds it a moment later.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn records(dir: &Path) -> Vec<Value> {
    common::requests_jsonl(&dir.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect()
}

/// Whether a process with this id exists (a zombie counts as gone: it no longer serves anything).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            // The state follows the command name's closing parenthesis.
            let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

fn pid_of(run: &Path) -> u32 {
    std::fs::read_to_string(run.join("stack.pid"))
        .expect("stack.pid")
        .trim()
        .parse()
        .expect("a pid")
}

/// `llmbench run … --serve -- llmbench sim --port PORT SIM_ARGS…`.
fn served_run(dir: &Path, profile: &Path, run_id: &str, extra: &[&str], sim: &[&str]) -> Command {
    let mut command = llmbench();
    command
        // The served simulator inherits it: its startup and profiler lines reach stack.log.
        .env("RUST_LOG", "warn,llmbench_sim::sim=info")
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(profile)
        .args(["--run-id", run_id, "--output"])
        .arg(dir)
        .args(["--tokenizer", "builtin"])
        .args(extra)
        .args(["--serve", "--", env!("CARGO_BIN_EXE_llmbench"), "sim"])
        .args(["--port", &free_port().to_string()])
        .args(sim);
    command
}

#[test]
fn a_served_stack_is_waited_for_benchmarked_recorded_profiled_after_warm_up_and_stopped() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "p.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: 10\nrequest-rate: 50\n\
         num-warmups: 2\n",
    );
    let output = served_run(
        dir.path(),
        &profile,
        "served",
        &["--vllm-profiler"],
        &["--model", "served-model", "--ttft", "5ms", "--itl", "1ms"],
    )
    .output()
    .expect("runs");
    succeeded(&output);
    assert!(
        stdout(&output)
            .lines()
            .next()
            .unwrap_or_default()
            .contains("(the stack --serve starts)"),
        "{}",
        stdout(&output)
    );
    let run = dir.path().join("served");

    // The stack's record: how it was started and what it answered.
    let meta = json(&run.join("run.json"));
    let stack = &meta["stack"];
    assert_eq!(stack["source"], "serve");
    assert_eq!(stack["command"][0], env!("CARGO_BIN_EXE_llmbench"));
    assert_eq!(stack["args"][0], "sim");
    assert_eq!(stack["models"]["status"], 200);
    assert_eq!(stack["models"]["body"]["data"][0]["id"], "served-model");
    let version = format!("{}+llmbench-sim", env!("CARGO_PKG_VERSION"));
    assert_eq!(stack["version"], version.as_str());
    assert!(stack.get("failure").is_none(), "{stack}");
    // Requests named the model the stack serves (no --model given to the run).
    assert_eq!(meta["model"], "served-model");
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["engine"]["model"], "served-model");
    assert_eq!(summary["engine"]["version"], version.as_str());
    assert_eq!(summary["engine"]["command"][1], "sim");
    // What the server said it is, recorded beside how it was started.
    assert_eq!(meta["server"]["engine"], "llmbench sim");
    assert_eq!(meta["server"]["models"][0]["id"], "served-model");
    assert_eq!(summary["engine"]["name"], "llmbench sim");

    // The profiling window: both hooks answered, the start after the last warm-up ended, the stop after the last
    // measured request ended.
    let profiling = &meta["profiling"];
    assert_eq!(profiling["start"]["status"], 200, "{profiling}");
    assert_eq!(profiling["stop"]["status"], 200, "{profiling}");
    let lines = records(&run);
    assert_eq!(lines.len(), 12, "2 warm-ups and 10 measured requests");
    let end = |warmup: bool| {
        lines
            .iter()
            .filter(|r| (r["warmup"] == true) == warmup)
            .map(|r| r["end_ns"].as_u64().expect("end_ns"))
            .max()
            .expect("records")
    };
    let start_ns = profiling["start"]["sent_ns"].as_u64().expect("sent_ns");
    let stop_ns = profiling["stop"]["sent_ns"].as_u64().expect("sent_ns");
    assert!(start_ns >= end(true), "the warm-up is outside the window");
    let first_measured = lines
        .iter()
        .filter(|r| r["warmup"] != true)
        .map(|r| r["sent_ns"].as_u64().expect("sent_ns"))
        .min()
        .expect("measured");
    assert!(
        start_ns <= first_measured,
        "the window opens before the first measured request"
    );
    assert!(
        stop_ns >= end(false),
        "the window closes after the last measured request"
    );
    // The stack saw each hook once, in order (its own log lines, as vLLM logs them).
    let log = std::fs::read_to_string(run.join("stack.log")).expect("stack.log");
    assert_eq!(log.matches("Profiler started.").count(), 1, "{log}");
    assert_eq!(log.matches("Profiler stopped.").count(), 1, "{log}");
    assert!(log.find("Profiler started.") < log.find("Profiler stopped."));

    // And it was stopped afterwards.
    let pid = pid_of(&run);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the stack {pid} is still running");
}

/// Waits for the run to have a stack and a few records, then returns the stack's pid.
fn wait_for_stack_and_records(run: &Path, child: &mut Child) -> u32 {
    let start = Instant::now();
    loop {
        let recorded = common::requests_jsonl(&run.join("requests.jsonl"))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if recorded >= 3 && run.join("stack.pid").exists() {
            return pid_of(run);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("the run ended early: {status:?}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run never got going"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the run did not end within {limit:?} of the stack's death");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_stack_killed_mid_run_stops_the_run_with_its_reason_and_keeps_every_record() {
    let dir = tempfile::tempdir().expect("tmp");
    // 200 requests at 20/s: ten seconds, of which the stack lives about one.
    let profile = write(
        dir.path(),
        "long.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 50\nnum-prompts: 200\nrequest-rate: 20\n",
    );
    let mut child = served_run(
        dir.path(),
        &profile,
        "killed",
        &["--interrupt-grace", "500ms"],
        &["--ttft", "20ms", "--itl", "20ms"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawns");
    let run = dir.path().join("killed");
    let pid = wait_for_stack_and_records(&run, &mut child);
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let output = finish(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("the stack under test failed"),
        "{}",
        stderr(&output)
    );

    let summary = json(&run.join("summary.json"));
    let state = &summary["run"];
    assert_eq!(state["state"], "stopped", "{state}");
    assert_eq!(state["stopped"]["reason"], "stack_failed", "{state}");
    let sent = state["sent"].as_u64().expect("sent");
    let finished = state["finished"].as_u64().expect("finished");
    assert!(sent < 200, "the run stopped issuing: {sent}");
    assert_eq!(sent, finished, "every request sent is recorded");
    let lines = records(&run);
    assert_eq!(lines.len() as u64, finished);
    // Every record is a success or a classified failure; the ones cut off by the death are failures.
    let mut failed = 0;
    for record in &lines {
        match record.get("error") {
            Some(error) => {
                assert!(
                    error["class"].as_str().is_some_and(|c| !c.is_empty()),
                    "{record}"
                );
                failed += 1;
            }
            None => assert_eq!(record["http_status"], 200, "{record}"),
        }
    }
    assert!(failed > 0, "requests in flight when the stack died failed");
    assert_eq!(summary["requests"]["failed"].as_u64(), Some(failed));

    // run.json says how the stack failed, with its log's tail.
    let meta = json(&run.join("run.json"));
    assert_eq!(meta["end"]["stopped"]["reason"], "stack_failed");
    let failure = &meta["stack"]["failure"];
    assert!(
        failure["exit_status"]
            .as_str()
            .is_some_and(|s| s.contains("signal: 9")),
        "{failure}"
    );
    assert!(
        failure["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("the stack exited")),
        "{failure}"
    );
    assert!(
        failure["log_tail"]
            .as_array()
            .is_some_and(|tail| tail.iter().any(|l| l
                .as_str()
                .is_some_and(|l| l.contains("llmbench sim listening")))),
        "{failure}"
    );
    assert!(!alive(pid));
}

#[test]
fn a_stack_info_file_is_recorded_with_the_stacks_answers_and_secrets_redacted() {
    let dir = tempfile::tempdir().expect("tmp");
    let info = write(
        dir.path(),
        "stack-info.json",
        r#"{"image": "vllm/vllm-openai:v0.11.0", "command": ["vllm", "serve"], "args": ["m", "--max-model-len", "4096"], "env": {"HF_TOKEN": "hf_secret", "VLLM_LOGGING_LEVEL": "DEBUG"}}"#,
    );
    let profile = write(
        dir.path(),
        "p.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: 3\nrequest-rate: 50\n",
    );
    // Against the embedded simulator: it answers /v1/models and /version.
    let output = run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "info",
        &["--stack-info", info.to_str().expect("utf-8")],
    );
    succeeded(&output);
    let run = dir.path().join("info");
    let meta = json(&run.join("run.json"));
    let stack = &meta["stack"];
    assert_eq!(stack["source"], "stack_info");
    assert_eq!(stack["image"], "vllm/vllm-openai:v0.11.0");
    assert_eq!(stack["env"]["HF_TOKEN"], "<redacted>");
    assert_eq!(stack["env"]["VLLM_LOGGING_LEVEL"], "DEBUG");
    assert_eq!(stack["models"]["body"]["data"][0]["id"], "llmbench-sim");
    let text = std::fs::read_to_string(run.join("run.json")).expect("run.json");
    assert!(
        !text.contains("hf_secret"),
        "the token never reaches the results"
    );
    let summary = json(&run.join("summary.json"));
    assert_eq!(
        summary["engine"],
        serde_json::json!({
            "name": "llmbench sim",
            "image": "vllm/vllm-openai:v0.11.0",
            "command": ["vllm", "serve", "m", "--max-model-len", "4096"],
            "model": "llmbench-sim",
            "version": format!("{}+llmbench-sim", env!("CARGO_PKG_VERSION")),
        })
    );
    // A record with a typo is refused before anything runs, naming the file and the key.
    let bad = write(dir.path(), "bad.json", "{\"image\": \"x\",\n \"cmd\": []}");
    let output = run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "bad",
        &["--stack-info", bad.to_str().expect("utf-8")],
    );
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("bad.json") && err.contains("`cmd`") && err.contains("line 2"),
        "{err}"
    );
    assert!(!dir.path().join("bad").exists());
}

#[test]
fn a_stack_that_exits_before_it_is_ready_fails_the_run_with_its_status_and_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "p.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: 3\nrequest-rate: 50\n",
    );
    let output = llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--run-id", "never", "--output"])
        .arg(dir.path())
        .args([
            "--serve",
            "--",
            "sh",
            "-c",
            "echo CUDA out of memory >&2; exit 7",
        ])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("exit status: 7"), "{err}");
    assert!(err.contains("CUDA out of memory"), "{err}");
}

/// `--serve` stops the stack's whole process group: a process the stack's command forked (here a `sleep` beside
/// the simulator the shell execs) does not outlive the run.
#[test]
fn nothing_the_stack_forked_outlives_the_run() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "p.yaml",
        "dataset-name: random\nrandom-input-len: 8\nrandom-output-len: 4\nnum-prompts: 3\nrequest-rate: 50\n",
    );
    let child_pid = dir.path().join("child.pid");
    let port = free_port();
    // The child's output goes nowhere: it must not hold the run's pipes.
    let script = format!(
        "sleep 600 >/dev/null 2>&1 & echo $! > {}; exec {} sim --port {port}",
        child_pid.display(),
        env!("CARGO_BIN_EXE_llmbench"),
    );
    let endpoint = format!("http://127.0.0.1:{port}");
    let output = llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--run-id", "forked", "--output"])
        .arg(dir.path())
        .args([
            "--tokenizer",
            "builtin",
            "--endpoint",
            &endpoint,
            "--model",
            "llmbench-sim",
        ])
        .args(["--serve", "--", "sh", "-c", &script])
        .output()
        .expect("runs");
    succeeded(&output);
    let pid: u32 = std::fs::read_to_string(&child_pid)
        .expect("child.pid")
        .trim()
        .parse()
        .expect("a pid");
    // The group was signalled before the run ended; give the kernel a moment to deliver it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the stack's child {pid} still runs");
}
