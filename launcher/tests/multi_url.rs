//! One run spread over several endpoint URLs, as AIPerf's several `--url` spread it (`timing/url_samplers.py`,
//! `RoundRobinURLSampler`, one sampler for the whole run): request `i` goes to URL `i mod n`, the first URL first;
//! each URL passes the pre-flight; a URL without a scheme gets `http://` (`normalize_http_url`).

mod common;

use serde_json::{Value, json};

use common::*;

/// A non-streamed completion, whatever was asked.
fn answer(_: &WireRequest) -> String {
    let body = json!({"choices": [{"index": 0, "text": "a b", "finish_reason": "length"}],
                      "usage": {"prompt_tokens": 4, "completion_tokens": 2}});
    ok_response("application/json", &body.to_string())
}

#[test]
fn aiperf_s_several_urls_take_the_requests_in_turn() {
    let (first, first_seen) = capturing_server(answer);
    let (second, second_seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // The second URL without its scheme, as AIPerf's users write `--url host:port`.
    let profile = write(
        dir.path(),
        "p.yaml",
        &format!(
            "model: m\nurl: [{first}, {}]\nendpoint-type: completions\nisl: 8\nosl: 2\nrequest-count: 6\n\
             concurrency: 1\nstreaming: false\n",
            second.trim_start_matches("http://")
        ),
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "r",
        &[
            "--tokenizer",
            "builtin",
            "--no-preflight",
            "--no-server-metrics",
        ],
    );
    succeeded(&output);
    let ids = |seen: &std::sync::Mutex<Vec<WireRequest>>| -> Vec<String> {
        seen.lock()
            .expect("lock")
            .iter()
            .map(|r| r.header("x-request-id").expect("x-request-id").to_owned())
            .collect()
    };
    // The records say which request id each request carried, by its number.
    let records: Vec<Value> = common::requests_jsonl(&dir.path().join("r/requests.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    let id_of = |n: u64| -> String {
        records
            .iter()
            .find(|r| r["id"] == n)
            .and_then(|r| r["request_id"].as_str())
            .expect("request id")
            .to_owned()
    };
    assert_eq!(ids(&first_seen), [0, 2, 4].map(id_of));
    assert_eq!(ids(&second_seen), [1, 3, 5].map(id_of));
}

#[test]
fn every_url_passes_the_pre_flight_and_one_that_does_not_answer_stops_the_run() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        &format!(
            "model: m\nurl: {}, http://127.0.0.1:9\nendpoint-type: completions\nisl: 8\nosl: 2\nrequest-count: 4\n",
            sim.url
        ),
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "r",
        &["--tokenizer", "builtin"],
    );
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("127.0.0.1:9"), "{err}");
    assert!(!dir.path().join("r/requests.bin").exists());
    // Naming one server on the command line would leave the profile's other URLs out: refused.
    let output = run_profile(
        dir.path(),
        "aiperf",
        &profile,
        "e",
        &["--tokenizer", "builtin", "--endpoint", &sim.url],
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("spreads its requests over 2 URLs"),
        "{}",
        stderr(&output)
    );
}
