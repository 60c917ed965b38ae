//! inference-perf `trace_session_replay` of `weka_trace_replay` data through the binary, read off the wire by a
//! bare server and run on the embedded simulator. The traces are `tests/fixtures/inference-perf/weka/` (upstream's
//! mock trace and an agent trace with a sub-agent); what each call sends is inference-perf 7de5ef2's own
//! compilation of them (`oracle.py` there: corpus `[0, …, 39]`, cap 1 s, seed 42), read through the corpus below.

mod common;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use common::*;

const AGENT: &str = include_str!("../../tests/fixtures/inference-perf/weka/agent_trace.json");
const MOCK: &str = include_str!("../../tests/fixtures/inference-perf/weka/mock_trace_123.json");

/// With the built-in (whitespace) tokenizer, inference-perf's instruction line is tokens 0–10 and these words
/// tokens 11–39: corpus token `p` is the word `c{p}` from 11 on, so a 40-token corpus as in the oracle.
fn corpus() -> String {
    (11..40)
        .map(|p| format!("c{p}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A non-streamed chat answer, the live output later calls carry in place of the recorded one.
fn chat_answer(_: &WireRequest) -> String {
    let answer = json!({"id": "c", "model": "m", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "a b"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10}});
    ok_response("application/json", &answer.to_string())
}

fn profile(traces: &str, corpus: &str, streaming: bool) -> String {
    format!(
        "server:\n  type: vllm\n  model_name: m\n  base_url: http://localhost:8000\n  ignore_eos: true\n\
         api:\n  type: chat\n  streaming: {streaming}\n\
         data:\n  type: weka_trace_replay\n  corpus_file_path: {corpus}\n  weka_trace_replay:\n    \
         trace_directory: {traces}\n    use_static_model: true\n    static_model_name: m\n    \
         default_block_size: 64\n    trace_idle_gap_cap_seconds: 1.0\n\
         load:\n  type: trace_session_replay\n  base_seed: 42\n  stages:\n    - concurrent_sessions: 1\n\
         report:\n  request_lifecycle:\n    summary: true\n    per_stage: true\n    per_request: true\n  \
         session_lifecycle:\n    per_session: true\n"
    )
}

/// The traces directory and profile under `dir`.
fn setup(dir: &std::path::Path, streaming: bool) -> std::path::PathBuf {
    let traces = dir.join("traces");
    std::fs::create_dir(&traces).expect("traces dir");
    write(&traces, "agent_trace.json", AGENT);
    write(&traces, "mock_trace_123.json", MOCK);
    let corpus = write(dir, "corpus.txt", &corpus());
    write(
        dir,
        "weka.yaml",
        &profile(
            traces.to_str().expect("utf-8"),
            corpus.to_str().expect("utf-8"),
            streaming,
        ),
    )
}

type Sent = (Vec<(String, String)>, u64);

fn sent(seen: &Arc<Mutex<Vec<WireRequest>>>) -> Vec<Sent> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).expect("a JSON body");
            let messages = body["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| {
                    (
                        m["role"].as_str().expect("role").to_owned(),
                        m["content"].as_str().expect("content").to_owned(),
                    )
                })
                .collect();
            (messages, body["max_tokens"].as_u64().expect("max_tokens"))
        })
        .collect()
}

fn call(messages: &[(&str, &str)], max_tokens: u64) -> Sent {
    (
        messages
            .iter()
            .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
            .collect(),
        max_tokens,
    )
}

#[test]
fn weka_traces_send_upstreams_rebuilt_prompts_with_live_answers_in_place_of_recorded_ones() {
    let (url, seen) = capturing_server(chat_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = setup(dir.path(), false);
    let output = run_against("inference-perf", &profile, &url, "builtin", dir.path(), "w");
    succeeded(&output);
    let sent = sent(&seen);
    // random.seed(42) shuffles the two traces [agent-7, mock_trace_123] to [mock_trace_123, agent-7]; one session
    // at a time, so the mock trace's two calls go first.
    assert_eq!(sent.len(), 8, "{sent:?}");
    // Tokens 5, 6 (`you can`) and 17, 18; the second turn keeps them, its first new block answers the first turn
    // (sent as the live answer), block 40 is `c22 c23`.
    let user = ("user", "you can c17 c18");
    assert_eq!(sent[0], call(&[user], 2));
    assert_eq!(
        sent[1],
        call(&[user, ("assistant", "a b"), ("user", "c22 c23")], 4)
    );
    let system = ("system", "c13 c14 c15 c16 c25 c26 c27 c28");
    let sub_system = ("system", "c32 c33 c34 c35");
    let mut agent: Vec<Sent> = sent[2..].to_vec();
    agent.sort();
    let mut expected = vec![
        call(&[system, ("user", "can from these poem c28 c29")], 5),
        call(&[sub_system, ("user", "c15 c16 c17 c18 c31")], 3),
        // The second stream: its 4 tool tokens are one system block, its user message empty.
        call(&[("system", "as you can from"), ("user", "")], 2),
        call(
            &[
                sub_system,
                ("user", "c15 c16 c17 c18"),
                ("assistant", "a b"),
                ("user", "Pick as many lines"),
            ],
            2,
        ),
        call(
            &[
                system,
                ("user", "can from these poem"),
                ("assistant", "a b"),
                ("user", "c19 c20 c21"),
            ],
            4,
        ),
        // Rewound to the system blocks, less the previous turn's 3 tail tokens (upstream's quirk, kept).
        call(
            &[
                ("system", "c13 c14 c15 c16 c25"),
                ("assistant", "a b"),
                ("user", "these poem lines: c11 c15 c16 c17 c18"),
            ],
            3,
        ),
    ];
    expected.sort();
    assert_eq!(agent, expected);

    // inference-perf's session lifecycle reports, sessions named `wekatrace{trace index}_{trace id}`.
    let run = dir.path().join("w");
    let per = json(&run.join("per_session_lifecycle_metrics.json"));
    let per = per.as_array().expect("a list");
    let names: Vec<&str> = per
        .iter()
        .map(|s| s["session_id"].as_str().expect("id"))
        .collect();
    assert_eq!(names, ["wekatrace1_mock_trace_123", "wekatrace0_agent-7"]);
    let counts: Vec<(&Value, &Value, &Value)> = per
        .iter()
        .map(|s| (&s["num_events"], &s["num_events_completed"], &s["success"]))
        .collect();
    assert_eq!(
        counts,
        [
            (&json!(2), &json!(2), &json!(true)),
            (&json!(6), &json!(6), &json!(true))
        ]
    );
    // Its input tokens are the server's prompt counts added up: 8 a call here.
    assert_eq!(per[0]["total_input_tokens"], 2 * 8);
    assert_eq!(per[1]["total_input_tokens"], 6 * 8);
    let summary = json(&run.join("summary_session_lifecycle_metrics.json"));
    assert_eq!(summary["num_sessions"], 2, "{summary}");
    assert_eq!(summary["num_sessions_succeeded"], 2, "{summary}");
    assert_eq!(summary["total_events"], 8, "{summary}");
    assert_eq!(summary["total_events_completed"], 8, "{summary}");
}

#[test]
fn weka_traces_replay_on_the_simulator() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = setup(dir.path(), true);
    let output = run_on_sim(dir.path(), "inference-perf", &profile, "s", &sim);
    succeeded(&output);
    let run = dir.path().join("s");
    let text = common::requests_jsonl(&run.join("requests.jsonl")).expect("requests.jsonl");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    assert_eq!(records.len(), 8, "{records:?}");
    assert!(
        records.iter().all(|r| r["http_status"] == 200),
        "{records:?}"
    );
    // Each call asks for its recorded output length: the mock trace's 2 and 4, the agent trace's 5, 3, 2, 2, 4, 3.
    let mut max_tokens: Vec<(u64, u64)> = records
        .iter()
        .map(|r| {
            (
                r["conversation"]["id"].as_u64().expect("session"),
                r["max_tokens"].as_u64().expect("max_tokens"),
            )
        })
        .collect();
    max_tokens.sort();
    assert_eq!(
        max_tokens,
        [
            (0, 2),
            (0, 4),
            (1, 2),
            (1, 2),
            (1, 3),
            (1, 3),
            (1, 4),
            (1, 5)
        ]
    );
    let summary = json(&run.join("summary_session_lifecycle_metrics.json"));
    assert_eq!(summary["num_sessions"], 2, "{summary}");
    assert_eq!(summary["num_sessions_succeeded"], 2, "{summary}");
    assert_eq!(summary["total_events_completed"], 8, "{summary}");
}

#[test]
fn weka_without_a_corpus_file_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = setup(dir.path(), false);
    let text = std::fs::read_to_string(&profile).expect("profile");
    let without: String = text
        .lines()
        .filter(|l| !l.contains("corpus_file_path"))
        .map(|l| format!("{l}\n"))
        .collect();
    let profile = write(dir.path(), "no_corpus.yaml", &without);
    let output = run_against(
        "inference-perf",
        &profile,
        "http://127.0.0.1:9",
        "builtin",
        dir.path(),
        "n",
    );
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("data.weka_trace_replay")
            && err.contains("corpus_file_path")
            && err.contains("shakespeare.txt"),
        "{err}"
    );
}
