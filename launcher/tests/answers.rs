//! Every answer up front, through the real binary: what a run prints at its end and what its report.html opens
//! with — the headline, the failures and why, a multi-turn run's turns — and logs that a file or a pipe can hold.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use common::*;

/// A guidellm profile of 8 three-turn chat conversations, 4 at a time: 64 new prompt tokens a turn, 16-token
/// answers.
const MULTI_TURN: &str = "spec:
  backend:
    kind: openai_http
    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL
    model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL
    request_format: /v1/chat/completions
  data:
    - kind: synthetic_text
      prompt_tokens: 64
      output_tokens: 16
      turns: 3
  profile:
    kind: concurrent
    streams: 4
  constraints:
    - kind: max_requests
      count: 24
";

/// The multi-turn profile against the embedded simulator, with `extra` flags and environment.
fn multi_turn(dir: &Path, run_id: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let profile = write(dir, "multi-turn.yaml", MULTI_TURN);
    let mut command = llmbench();
    command
        .args(["run", "--harness", "guidellm", "--profile"])
        .arg(&profile)
        .args([
            "--tokenizer",
            "builtin",
            "--sim-ttft",
            "2ms",
            "--sim-itl",
            "1ms",
        ])
        .args(["--run-id", run_id, "--output"])
        .arg(dir)
        .args(extra);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("runs")
}

/// A loopback port nothing listens on: bound, then let go.
fn refusing_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The flags that let a run reach a dead endpoint: a build with a pre-flight probe would otherwise (rightly)
/// stop before the clock starts, and this file is about what a run that measured only failures reports.
fn past_preflight() -> Vec<&'static str> {
    let help = llmbench().args(["run", "--help"]).output().expect("help");
    if stdout(&help).contains("--no-preflight") {
        vec!["--no-preflight"]
    } else {
        Vec::new()
    }
}

#[test]
fn a_run_where_nothing_answers_says_why_on_screen_and_in_report_html() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = refusing_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut extra = vec![
        "--endpoint",
        &endpoint,
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        // Four requests in one second.
        "--override",
        "load.stages.0.rate=4",
        "--override",
        "load.stages.0.duration=1",
    ];
    extra.extend(past_preflight());
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "sanity_random",
        "dead",
        &extra,
    );
    assert!(!output.status.success(), "{output:?}");
    let text = stdout(&output);
    let refused = format!("connect: cannot connect to 127.0.0.1:{port}: Connection refused");
    // The headline opens the output after the first line and says why.
    let headline: Vec<&str> = text.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    let line = |label: &str| {
        headline
            .iter()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in the headline: {text}"))
    };
    assert!(headline[0].starts_with("run      inference-perf"), "{text}");
    assert!(
        line("errors ").starts_with("errors   4 of 4 requests failed (100%): connect 4"),
        "{text}"
    );
    // The verdict closes the headline.
    assert_eq!(headline.last(), Some(line("verdict ")), "{text}");
    assert!(
        line("verdict ").starts_with("verdict  failed: none of the 4 requests succeeded — ")
            && line("verdict ").contains(&refused),
        "{text}"
    );
    // The failures: one row, its sample message whole.
    assert!(
        text.contains(&format!(
            "failures\nerror    HTTP  count  share  sample message\nconnect     -      4   100%  cannot connect to \
             127.0.0.1:{port}: Connection refused"
        )),
        "{text}"
    );
    assert!(
        stderr(&output).contains(&format!("({refused}")),
        "{}",
        stderr(&output)
    );
    // report.html is written all the same, opening with the headline and the failures.
    let html = std::fs::read_to_string(dir.path().join("dead/report.html")).expect("report.html");
    let headline_at = html.find("<table class=\"headline\">").expect("a headline");
    let failures_at = html.find("<h2>Failures</h2>").expect("a failures table");
    let summary_at = html.find("<h2>Summary</h2>").expect("a summary");
    assert!(headline_at < failures_at && failures_at < summary_at);
    assert!(html.contains("<tr class=\"bad\"><th>verdict</th><td>failed: none of the 4 requests"));
    assert!(html.contains(&format!(
        "<td class=\"text\">connect</td><td>-</td><td>4</td><td>100%</td><td class=\"wrap\">cannot connect to \
         127.0.0.1:{port}: Connection refused"
    )));
    // summary.json keeps the sample beside the count.
    let summary = json(&dir.path().join("dead/summary.json"));
    assert_eq!(summary["errors"]["connect"], 4);
    assert!(
        summary["error_samples"]["connect"]
            .as_str()
            .is_some_and(|s| s.contains("Connection refused")),
        "{summary:#}"
    );
}

/// `llmbench sim` failing half its requests with HTTP 429 or 500, seeded; killed on drop.
fn failing_sim() -> SimProcess {
    SimProcess::start(&[
        "--model",
        "m",
        "--seed",
        "7",
        "--failure-rate",
        "0.5",
        "--failure-kinds",
        "http429,http500",
    ])
}

#[test]
fn some_failures_get_a_row_per_http_status_and_the_run_still_completes() {
    let sim = failing_sim();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut extra = vec![
        "--endpoint",
        &sim.url,
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--override",
        "load.stages.0.rate=20",
        "--override",
        "load.stages.0.duration=1",
    ];
    extra.extend(past_preflight());
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "sanity_random",
        "some",
        &extra,
    );
    succeeded(&output);
    let summary = json(&dir.path().join("some/summary.json"));
    let (too_many, internal) = (
        summary["errors"]["http_429"].as_u64().unwrap_or(0),
        summary["errors"]["http_500"].as_u64().unwrap_or(0),
    );
    // About half of the 20 fail, each with one of the two statuses.
    let total = summary["requests"]["total"].as_u64().expect("a total");
    assert!(too_many > 0 && internal > 0, "{summary:#}");
    let failed = too_many + internal;
    let text = stdout(&output);
    let verdict = text
        .lines()
        .find(|l| l.starts_with("verdict"))
        .unwrap_or_default();
    assert_eq!(
        verdict,
        format!("verdict  completed: {failed} of {total} requests failed"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "failures")
        .skip(2)
        .take_while(|l| l.starts_with("http_status"))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    // Commonest first; a tie goes by name, 429 before 500.
    for (row, (status, count)) in rows.iter().zip(if too_many >= internal {
        [("429", too_many), ("500", internal)]
    } else {
        [("500", internal), ("429", too_many)]
    }) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            &cells[..3],
            ["http_status", status, &count.to_string()],
            "{row}"
        );
    }
    for line in text.lines().skip(1) {
        assert!(
            line.chars().count() <= 100 || line.starts_with("verdict"),
            "too wide: {line}"
        );
    }
}

#[test]
fn a_multi_turn_run_prints_and_reports_a_row_per_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = multi_turn(dir.path(), "turns", &[], &[]);
    succeeded(&output);
    let text = stdout(&output);
    // How many conversations the 24 requests spread over depends on how fast the streams turn over: the counts
    // are read, not assumed.
    let summary = json(&dir.path().join("turns/summary.json"));
    let conversations = &summary["conversations"];
    assert!(
        text.contains(&format!(
            "\nturns: {} conversations, {} with every turn successful\nturn  requests  ok  input tok mean  TTFT \
             ms mean  E2E ms mean\n",
            conversations["conversations"], conversations["all_turns_succeeded"]
        )),
        "{text}"
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("turn  requests"))
        .skip(1)
        .take_while(|l| !l.starts_with("results:"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    // One row per turn, counted from 1, every request of the run in one of them.
    assert_eq!(
        rows.iter().map(|r| r[0]).collect::<Vec<_>>(),
        ["1", "2", "3"],
        "{text}"
    );
    let requests: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert_eq!(requests, 24, "{text}");
    // Each turn resends the conversation so far: 64 new tokens and the 16-token answer before them.
    let inputs: Vec<f64> = rows.iter().map(|r| r[3].parse().unwrap()).collect();
    assert!(inputs[0] < inputs[1] && inputs[1] < inputs[2], "{text}");
    let html = std::fs::read_to_string(dir.path().join("turns/report.html")).expect("report.html");
    assert!(html.contains(&format!(
        "<h2>Turns</h2>\n<p>{} conversations, {} with every turn successful.</p>",
        conversations["conversations"], conversations["all_turns_succeeded"]
    )));
    assert!(html.contains("<th class=\"text\">turn</th><th>requests</th>"));
    // The headline of a run where everything went well.
    assert!(
        text.contains("\nverdict  completed: all 24 requests succeeded\n"),
        "{text}"
    );
    assert!(
        text.contains("\nload     asked 4 in flight → sent "),
        "{text}"
    );
}

#[test]
fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = multi_turn(dir.path(), "plain", &[], &[("RUST_LOG", "info")]);
    succeeded(&output);
    let logs = stderr(&output);
    assert!(
        logs.contains(" INFO ") && logs.contains("starting run"),
        "{logs}"
    );
    assert!(!logs.contains("\x1b["), "{logs:?}");
    assert!(!stdout(&output).contains("\x1b["));
}

/// The JSON log lines of `stderr` (the progress and the closing notes are plain lines beside them).
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn log_format_json_writes_one_json_object_a_line_from_the_flag_or_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let by_flag = multi_turn(
        dir.path(),
        "json-flag",
        &["--log-format", "json"],
        &[("RUST_LOG", "info")],
    );
    let by_env = multi_turn(
        dir.path(),
        "json-env",
        &[],
        &[("RUST_LOG", "info"), ("LLMBENCH_LOG_FORMAT", "json")],
    );
    for output in [by_flag, by_env] {
        succeeded(&output);
        let logs = stderr(&output);
        let lines = json_lines(&logs);
        let start = lines
            .iter()
            .find(|l| l["fields"]["message"] == "starting run")
            .unwrap_or_else(|| panic!("no starting run in {logs}"));
        assert_eq!(start["level"], "INFO");
        assert_eq!(start["fields"]["requests"], 24);
        assert!(!logs.contains("\x1b["), "{logs:?}");
    }
    // A format llmbench does not write is refused, with the ones it does.
    let refused = llmbench()
        .args(["--log-format", "yaml", "sim"])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("[possible values: text, json]"),
        "{}",
        stderr(&refused)
    );
}
