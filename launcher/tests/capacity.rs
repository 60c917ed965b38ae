//! The SLO capacity search through the real binary, against an `llmbench sim` whose capacity is known by hand.
//!
//! The simulator admits at most `--max-num-seqs` C = 4 requests at once and holds each for its whole response:
//! the first token after TTFT = 50 ms, then one token every ITL = 10 ms, so a 16-token answer holds a seat for
//! S = 50 + 15 × 10 = 200 ms. Its service capacity is therefore C / S = 4 / 0.2 s = 20 requests/s. guidellm's
//! `constant` profile sends the i-th request at exactly i / rate, so below 20 req/s every request finds a free
//! seat (TTFT stays ≈ 50 ms), and above it a queue grows for the whole point, each request queued waiting S / C =
//! 50 ms more than the one before: at r req/s over a 6 s point, (r − 20) × 6 requests queue and the last waits
//! (r − 20) × 300 ms, so the TTFT p99 ≤ 200 ms objective fails from about 20.5 req/s. 150 ms of margin over the
//! 50 ms a free seat gives holds on a loaded two-core machine. The search must answer within 10 % of 20. With
//! load = concurrency, 4 in flight never queue and 5 always do: the answer is 4.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use common::*;

/// A guidellm profile of 32-token prompts and 16-token answers, with `search` as its `capacity_search:` block.
fn profile(dir: &Path, search: &str) -> std::path::PathBuf {
    let text = format!(
        "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    model: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n    request_format: /v1/completions\n  data:\n    - kind: \
         synthetic_text\n      prompt_tokens: 32\n      output_tokens: 16\n  profile:\n    kind: constant\n    \
         rate: 1\n  constraints:\n    - kind: max_duration\n      seconds: 10\ncapacity_search:\n{search}"
    );
    let path = dir.join("capacity.yaml");
    std::fs::write(&path, text).expect("write the profile");
    path
}

fn run(dir: &Path, sim: &SimProcess, profile: &Path, run_id: &str, extra: &[&str]) -> Output {
    llmbench()
        .args(["run", "--harness", "guidellm", "--profile"])
        .arg(profile)
        .args([
            "--endpoint",
            &sim.url,
            "--model",
            "m",
            "--tokenizer",
            "builtin",
        ])
        .args(["--run-id", run_id, "--output"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("runs")
}

fn capacity(run_dir: &Path) -> Value {
    let text = std::fs::read_to_string(run_dir.join("summary.json")).expect("summary.json");
    let summary: Value = serde_json::from_str(&text).expect("json");
    summary["capacity"].clone()
}

#[test]
fn a_rate_search_finds_the_simulators_hand_computed_capacity_and_confirms_it() {
    let sim = SimProcess::start(&[
        "--model",
        "m",
        "--max-num-seqs",
        "4",
        "--ttft",
        "50ms",
        "--itl",
        "10ms",
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = profile(
        dir.path(),
        "  load: rate\n  slo: [\"ttft_p99<=200ms\"]\n  start: 4\n  max: 64\n  min_duration: 6s\n  min_requests: 20\n",
    );
    let output = run(dir.path(), &sim, &path, "rate", &[]);
    succeeded(&output);
    let run_dir = dir.path().join("rate");
    let capacity = capacity(&run_dir);
    assert_eq!(capacity["status"], "found", "{capacity:#}");
    assert_eq!(capacity["confirmed"], true, "{capacity:#}");
    let answer = capacity["answer"].as_f64().expect("an answer");
    // C / S = 4 / (0.05 + 15 × 0.01) s = 20 req/s, within 10 %.
    assert!(
        (18.0..=22.0).contains(&answer),
        "answer {answer}: {capacity:#}"
    );
    let failing = capacity["bracket"]["failing"]
        .as_f64()
        .expect("a failing load");
    assert!(
        failing > answer && (failing - answer) / answer <= 0.05 + 1e-9,
        "{capacity:#}"
    );
    // The ramp from 4 doubles until it fails (4, 8, 16 pass; 32 fails), then bisects, then reruns the answer and
    // the load just above it.
    let points = capacity["points"].as_array().expect("points");
    let loads: Vec<f64> = points.iter().map(|p| p["load"].as_f64().unwrap()).collect();
    assert_eq!(&loads[..4], &[4.0, 8.0, 16.0, 32.0], "{loads:?}");
    let phases: Vec<&str> = points
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        &phases[phases.len() - 2..],
        &["confirm", "confirm_above"],
        "{phases:?}"
    );
    assert_eq!(points[points.len() - 2]["passed"], true);
    assert_eq!(points[points.len() - 1]["passed"], false);
    // Every point is a stage of the run, each with its own figures in summary.json.
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["stages"].as_array().unwrap().len(), points.len());
    for (i, point) in points.iter().enumerate() {
        assert_eq!(point["stage"], i as u64);
        let stage = &summary["stages"][i];
        assert_eq!(point["requests"], stage["requests"]["total"], "point {i}");
    }
    // The knee is where throughput stops following the offered rate: at or below the capacity.
    let knee = capacity["knee"]["load"].as_f64().expect("a knee");
    assert!(knee <= failing, "{capacity:#}");

    // `llmbench report` replays the search from the records and gives the same outcome.
    let before = capacity.clone();
    succeeded(
        &llmbench()
            .arg("report")
            .arg(&run_dir)
            .output()
            .expect("report"),
    );
    assert_eq!(self::capacity(&run_dir), before);
}

#[test]
fn a_concurrency_search_finds_the_simulators_seats() {
    let sim = SimProcess::start(&[
        "--model",
        "m",
        "--max-num-seqs",
        "4",
        "--ttft",
        "50ms",
        "--itl",
        "10ms",
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = profile(
        dir.path(),
        // A request holds its seat 50 + 15 × 10 = 200 ms: with 4 in flight a first token comes after ~50 ms, with 5
        // the fifth waits a whole request (~250 ms). 200 ms sits between with room for a loaded machine's delays.
        "  load: concurrency\n  slo: [\"ttft_p99<=200ms\"]\n  min_duration: 2s\n  min_requests: 20\n",
    );
    let output = run(dir.path(), &sim, &path, "conc", &[]);
    succeeded(&output);
    let capacity = capacity(&dir.path().join("conc"));
    assert_eq!(capacity["status"], "found", "{capacity:#}");
    // 4 seats: 4 in flight never wait, 5 always do.
    assert_eq!(capacity["answer"], 4.0, "{capacity:#}");
    assert_eq!(capacity["bracket"]["failing"], 5.0, "{capacity:#}");
    assert_eq!(capacity["confirmed"], true);

    // The answer is printed, in the headline's verdict and in words with every point after the tables.
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("; capacity 4 in flight (confirmed by reruns, 5 fails)\n"),
        "{text}"
    );
    assert!(
        text.contains("\ncapacity search\n  objectives  ttft_p99<=200ms (load: concurrency); "),
        "{text}"
    );
    assert!(
        text.contains("\n  answer      4 in flight, the highest load that met every objective\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  fails at    5 in flight: ttft_p99 "),
        "{text}"
    );
    // The points in load order: 1, 2, 4, 4 (its rerun), then the failing loads, each marked.
    let loads: Vec<f64> = text
        .lines()
        .skip_while(|l| !l.starts_with("load (in flight)"))
        .skip(1)
        .take_while(|l| !l.starts_with("results:"))
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert!(
        loads.is_sorted() && loads.contains(&4.0) && loads.contains(&5.0),
        "{text}"
    );
    // And report.html says it as well.
    let html = std::fs::read_to_string(dir.path().join("conc/report.html")).expect("report.html");
    assert!(html.contains("<h2>Capacity search</h2>"));
    assert!(html.contains(
        "<dt>answer</dt><dd>4 in flight, the highest load that met every objective</dd>"
    ));
    assert!(
        html.contains("<tr class=\"bad\"><td>5</td><td class=\"text\">"),
        "{html}"
    );
}

#[test]
fn the_flag_overrides_the_profile_and_bad_searches_are_refused_before_anything_runs() {
    let sim = SimProcess::start(&[
        "--model",
        "m",
        "--max-num-seqs",
        "4",
        "--ttft",
        "50ms",
        "--itl",
        "10ms",
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = profile(dir.path(), "  load: rate\n  slo: [\"ttft_p99<=100ms\"]\n");
    let refused = |extra: &[&str], run_id: &str, expected: &str| {
        let output = run(dir.path(), &sim, &path, run_id, extra);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(expected),
            "expected `{expected}` in: {stderr}"
        );
        assert!(
            !dir.path().join(run_id).exists(),
            "{run_id} left a results directory"
        );
    };
    refused(
        &[
            "--capacity-search",
            r#"{"load": "rate", "slo": ["p99<=5ms"]}"#,
        ],
        "bad-metric",
        "names no metric",
    );
    refused(
        &[
            "--capacity-search",
            r#"{"load": "rate", "slo": ["goodput>=95%"]}"#,
        ],
        "no-goodput",
        "a goodput objective needs the per-request objectives",
    );
    refused(
        &[
            "--capacity-search",
            "{load: rate, slo: [ttft_p99<=5ms], growht: 3}",
        ],
        "typo",
        "growht",
    );
    refused(
        &["--shard", "0/2"],
        "sharded",
        "cannot be spread over 2 launchers",
    );
    let bad = profile(
        dir.path(),
        "  load: sideways\n  slo: [\"ttft_p99<=100ms\"]\n",
    );
    let output = run(dir.path(), &sim, &bad, "bad-load", &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("capacity.yaml:18")
            && stderr.contains("capacity_search.load")
            && stderr.contains("sideways"),
        "{stderr}"
    );
}
