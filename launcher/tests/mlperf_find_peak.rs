//! `mode: FindPeakPerformance` through the binary: LoadGen's peak search over the Server `target_qps`, every pass
//! a stage of one run, the detail log holding each pass and LoadGen's search messages, the summary the peak pass's.
//! Which passes meet their constraints depends on timing, so the search test checks what does not: that every
//! step follows LoadGen's rules from the outcomes the log shows.

mod common;

use std::path::Path;

use common::{SimProcess, run_profile, write};

fn dataset(dir: &Path) -> String {
    let lines: Vec<String> = (0..8)
        .map(|i| serde_json::json!({"input": format!("sample {i}"), "output": "x"}).to_string())
        .collect();
    write(dir, "dataset.jsonl", &lines.join("\n"))
        .display()
        .to_string()
}

fn detail_log(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("mlperf_log_detail.txt"))
        .expect("detail log")
        .lines()
        .filter_map(|line| line.strip_prefix(":::MLLOG"))
        .map(|json| serde_json::from_str(json).expect("MLLOG JSON"))
        .collect()
}

/// The search's lines: `(key, value)` of each `generic_message`, `error_runtime`, `loaded_qsl_set` (its value
/// left out) and `generated_query_count` (likewise), in order.
fn search_lines(log: &[serde_json::Value]) -> Vec<(String, String)> {
    log.iter()
        .filter_map(|m| {
            let key = m["key"].as_str()?;
            let value = match key {
                "generic_message" | "error_runtime" => m["value"].as_str()?.to_owned(),
                "loaded_qsl_set" | "generated_query_count" => String::new(),
                _ => return None,
            };
            Some((key.to_owned(), value))
        })
        .collect()
}

fn line(key: &str, value: &str) -> (String, String) {
    (key.to_owned(), value.to_owned())
}

/// An ITL of 150 ms is over llama3_1-8b's 100 ms TPOT limit at any rate: the base pass fails its constraints, and
/// the search ends there as LoadGen's does, with its error and the base pass as the result.
#[test]
fn a_peak_search_whose_lower_bound_fails_ends_with_loadgens_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path());
    let profile = write(
        dir.path(),
        "peak.yaml",
        &format!(
            "model: llama3_1-8b\nscenario: Server\nmode: FindPeakPerformance\ntarget_qps: 5\nmin_duration: 200\n\
             min_query_count: 3\nmax_tokens: 3\nserver:\n  model_name: llmbench-sim\n  ignore_eos: true\n\
             dataset:\n  path: {data}\n"
        ),
    );
    let out = dir.path().join("out");
    run_profile(&out, "mlperf", &profile, "peak", &["--sim-itl", "150ms"]);
    let run = out.join("peak");
    let log = detail_log(&run);
    assert_eq!(
        search_lines(&log),
        [
            line("generic_message", "Starting FindPeakPerformance mode"),
            line(
                "generic_message",
                "FindPeakPerformance: Check validity of the base settings field: 5.000000"
            ),
            line("loaded_qsl_set", ""),
            line("generated_query_count", ""),
            line(
                "error_runtime",
                "FindPeakPerformance: Initial lower bound does not satisfy performance constraints, msg: TPOT \
                 constrain not met: Reduce target QPS to improve latency."
            ),
        ]
    );
    let result = log
        .iter()
        .find(|m| m["key"] == "result_validity")
        .expect("results");
    assert_eq!(result["value"], "INVALID");
    let summary = std::fs::read_to_string(run.join("mlperf_log_summary.txt")).expect("summary");
    assert!(
        summary.contains("Mode     : FindPeakPerformance"),
        "{summary}"
    );
    let summary_json = common::json(&run.join("summary.json"));
    assert!(
        summary_json["verdict"]["result"]
            .as_str()
            .expect("a verdict")
            .contains(
                "the lower bound target_qps 5.000000 does not meet the performance constraints"
            ),
        "{summary_json:#}"
    );
}

/// LoadGen says FindPeakPerformance is for Server alone and issues nothing for the others: refused before
/// anything runs, naming the key.
#[test]
fn a_peak_search_outside_the_server_scenario_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path());
    let profile = write(
        dir.path(),
        "peak.yaml",
        &format!(
            "model: llama3_1-8b\nscenario: Offline\nmode: FindPeakPerformance\nserver:\n  model_name: \
             llmbench-sim\ndataset:\n  path: {data}\n"
        ),
    );
    let output = run_profile(&dir.path().join("out"), "mlperf", &profile, "peak", &[]);
    assert!(!output.status.success());
    let stderr = common::stderr(&output);
    assert!(
        stderr.contains("`mode`")
            && stderr.contains("Finding peak performance is only supported in Server scenarios."),
        "{stderr}"
    );
}

/// Parses `[l, u)` from a search message.
fn bounds(message: &str) -> (f64, f64) {
    let inner = message
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(')'))
        .expect("bounds")
        .0;
    let (l, u) = inner.split_once(", ").expect("two bounds");
    (l.parse().expect("l"), u.parse().expect("u"))
}

/// A server of one sequence at a time, 20 ms a token: a low rate meets a 200 ms TTFT limit, a rate past its
/// capacity does not. The search doubles from 2 QPS until a pass fails, then halves the bounds to a tenth of a
/// QPS; every step follows from the one before, and the summary is the peak pass's.
#[test]
fn a_peak_search_widens_then_narrows_the_bounds_to_a_tenth_of_a_qps() {
    let sim = SimProcess::start(&["--max-num-seqs", "1", "--itl", "20ms"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dataset(dir.path());
    let profile = write(
        dir.path(),
        "peak.yaml",
        &format!(
            "model: llama3_1-8b\nscenario: Server\nmode: FindPeakPerformance\ntarget_qps: 2\nmin_duration: 300\n\
             min_query_count: 6\nttft_latency: 200\ntarget_latency_percentile: 0.9\nmax_tokens: 2\nserver:\n  \
             model_name: llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {data}\n"
        ),
    );
    let out = dir.path().join("out");
    run_profile(
        &out,
        "mlperf",
        &profile,
        "peak",
        &["--endpoint", &sim.url, "--tokenizer", "builtin"],
    );
    let run = out.join("peak");
    let log = detail_log(&run);
    let messages: Vec<String> = search_lines(&log)
        .into_iter()
        .filter(|(key, _)| key == "generic_message")
        .map(|(_, value)| value)
        .collect();
    assert_eq!(messages[0], "Starting FindPeakPerformance mode");
    assert_eq!(
        messages[1],
        "FindPeakPerformance: Check validity of the base settings field: 2.000000"
    );
    // Widening: each upper bound twice the last lower bound, every lower bound the previous upper one.
    let widening: Vec<(f64, f64)> = messages
        .iter()
        .filter(|m| m.starts_with("FindBoundaries: Checking fields"))
        .map(|m| bounds(m))
        .collect();
    assert!(!widening.is_empty(), "{messages:#?}");
    let mut lower = 2.0;
    for &(l, u) in &widening {
        assert_eq!((l, u), (lower, 2.0 * lower), "{messages:#?}");
        lower = u;
    }
    let found = messages
        .iter()
        .find(|m| m.starts_with("FindPeakPerformance: Found boundaries"))
        .expect("boundaries found");
    let (mut l, mut u) = bounds(found);
    assert_eq!(
        (l, u),
        *widening.last().expect("a widening step"),
        "{messages:#?}"
    );
    // Binary search: each mid value halves the bounds, and the next bounds keep the half it fell in.
    let steps: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("FindPeakPerformanceBinarySearch"))
        .collect();
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(bounds(step), (l, u), "{messages:#?}");
        let mid: f64 = step.rsplit(": ").next().expect("mid").parse().expect("mid");
        assert_eq!(mid, l + (u - l) / 2.0);
        if let Some(next) = steps.get(i + 1) {
            let (nl, nu) = bounds(next);
            assert!(
                (nl, nu) == (mid, u) || (nl, nu) == (l, mid),
                "{messages:#?}"
            );
            (l, u) = (nl, nu);
        } else {
            // The last mid value moved one bound; the search ends once they are a tenth apart.
            let met = messages
                .last()
                .expect("the peak")
                .ends_with(&format!("{mid:.6}"));
            if met {
                l = mid;
            } else {
                u = mid;
            }
        }
    }
    assert!(
        (l * 10.0).floor() + 1.0 >= (u * 10.0).floor(),
        "{messages:#?}"
    );
    let peak = format!("FindPeakPerformance: Found peak performance field: {l:.6}");
    assert_eq!(messages.last(), Some(&peak));
    // The summary is the peak pass's.
    let summary = std::fs::read_to_string(run.join("mlperf_log_summary.txt")).expect("summary");
    assert!(
        summary.contains("Mode     : FindPeakPerformance"),
        "{summary}"
    );
    let passes = log
        .iter()
        .filter(|m| m["key"] == "generated_query_count")
        .count();
    assert_eq!(passes, 1 + widening.len() + steps.len());
    // The trace has every pass's samples: one `Sample` begin per request, Server counters beside them.
    let trace = common::json(&run.join("mlperf_log_trace.json"));
    let events = trace["traceEvents"].as_array().expect("events");
    let begins = events
        .iter()
        .filter(|e| e["name"] == "Sample" && e["ph"] == "b")
        .count();
    let latencies = events.iter().filter(|e| e["name"] == "Latency").count();
    assert_eq!(begins, latencies);
    let summary_json = common::json(&run.join("summary.json"));
    assert_eq!(
        summary_json["requests"]["succeeded"].as_u64(),
        Some(begins as u64)
    );
    assert!(
        summary_json["verdict"]["result"]
            .as_str()
            .expect("a verdict")
            .ends_with(&format!("peak target_qps {l:.6}")),
        "{summary_json:#}"
    );
}
