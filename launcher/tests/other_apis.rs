//! The APIs beside OpenAI's completions and chat, through the binary: Anthropic's Messages API (inference-perf
//! `api.type: anthropic_messages`) and OpenAI's Responses API (guidellm `request_format: /v1/responses`). What each
//! tool sends is worked out by hand from its source (inference-perf 7de5ef2 `apis/anthropic_messages.py` and
//! `client/modelserver/openai_client.py`; guidellm ee7a774 `backends/openai/request_handlers.py`
//! `ResponsesRequestHandler`); what is measured comes from the events the simulator streams. Counts and values,
//! never timings.

mod common;

use std::path::Path;

use serde_json::{Value, json};

use common::*;

fn records_of(dir: &Path, run: &str) -> Vec<Value> {
    common::requests_jsonl(&dir.join(run).join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// The chunks of `kind` a record holds.
fn chunks_of(record: &Value, kind: &str) -> usize {
    record["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .filter(|c| c["kind"] == kind)
        .count()
}

/// Each request the server kept: its request line, JSON body and headers.
type Sent = (String, Value, Vec<(String, String)>);

fn bodies(seen: &std::sync::Mutex<Vec<WireRequest>>) -> Vec<Sent> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| {
            (
                r.line.clone(),
                serde_json::from_slice(&r.body).expect("a JSON body"),
                r.headers.clone(),
            )
        })
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn inference_perf_messages(url: &str, extra_server: &str) -> String {
    format!(
        "load:\n  type: constant\n  stages: [{{rate: 4, duration: 1}}]\napi:\n  type: anthropic_messages\n  \
         streaming: true\nserver:\n  type: vllm\n  model_name: m\n  base_url: {url}\n  ignore_eos: true\n{extra_server}\
         data:\n  type: mock\n"
    )
}

#[test]
fn inference_perf_anthropic_messages_run_on_the_simulator_with_usage_and_token_times_from_the_events()
 {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "p.yaml", &inference_perf_messages(&sim.url, ""));
    let output = run_on_sim(dir.path(), "inference-perf", &profile, "r", &sim);
    succeeded(&output);
    let records = records_of(dir.path(), "r");
    assert_eq!(records.len(), 4);
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        // inference-perf's mock prompt is 10 tokens; message_start reports the server's count of it.
        assert_eq!(r["usage"]["prompt_tokens"], 10, "{r}");
        // One content_block_delta per token: message_delta's output_tokens counts them.
        let answered = r["usage"]["completion_tokens"]
            .as_u64()
            .expect("output tokens");
        assert!((1..=30).contains(&answered), "{r}");
        assert_eq!(chunks_of(r, "content") as u64, answered, "{r}");
        // No ignore_eos in an Anthropic body, whatever `server.ignore_eos` says.
        assert!(r.get("ignore_eos").is_none(), "{r}");
        let reason = r["finish_reason"].as_str().expect("a finish reason");
        // max_tokens maps to length, end_turn to stop.
        assert!(
            reason == "stop" || (reason == "length" && answered == 30),
            "{r}"
        );
    }
    let run = json(&dir.path().join("r/run.json"));
    assert_eq!(run["api"], "messages");
    let summary = json(&dir.path().join("r/summary.json"));
    let latency = &summary["latency_ms"];
    assert_eq!(latency["ttft"]["count"], 4, "{latency:#}");
    assert!(latency["ttft"]["min"].as_f64().is_some(), "{latency:#}");
}

/// A Messages API stream of two tokens, as vLLM and Anthropic write it.
fn anthropic_answer(_: &WireRequest) -> String {
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "m", "stop_reason": null,
            "usage": {"input_tokens": 7, "output_tokens": 0}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "a"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": " b"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 2}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let body: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    ok_response("text/event-stream", &body)
}

#[test]
fn an_anthropic_messages_request_is_sent_as_inference_perf_builds_it_with_the_key_in_x_api_key() {
    let (url, seen) = capturing_server(anthropic_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        &inference_perf_messages(&url, "  api_key: sk-test\n"),
    );
    let output = run_against("inference-perf", &profile, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let sent = bodies(&seen);
    assert_eq!(sent.len(), 4);
    for (line, body, headers) in &sent {
        assert!(line.starts_with("POST /v1/messages "), "{line}");
        // `build_anthropic_request_body`: model, messages, max_tokens (the client's 30 for mock data), stream;
        // no ignore_eos, no stream_options.
        assert_eq!(
            body.as_object().expect("a map").keys().collect::<Vec<_>>(),
            ["model", "messages", "max_tokens", "stream"],
            "{body}"
        );
        assert_eq!(body["max_tokens"], 30);
        assert_eq!(body["stream"], true);
        assert_eq!(body["messages"][0]["role"], "user");
        assert!(body["messages"][0]["content"].is_string(), "{body}");
        // With a key, Anthropic's headers instead of a bearer token.
        assert_eq!(header(headers, "x-api-key"), Some("sk-test"));
        assert_eq!(header(headers, "anthropic-version"), Some("2023-06-01"));
        assert_eq!(header(headers, "authorization"), None);
    }
    for r in records_of(dir.path(), "r") {
        assert_eq!(
            r["usage"]["prompt_tokens"], 7,
            "input from message_start: {r}"
        );
        assert_eq!(
            r["usage"]["completion_tokens"], 2,
            "output from message_delta: {r}"
        );
        assert_eq!(r["finish_reason"], "stop", "end_turn: {r}");
        assert_eq!(chunks_of(&r, "content"), 2, "{r}");
    }
}

#[test]
fn inference_perf_refuses_anthropic_messages_over_data_its_generators_do_not_support() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        "load:\n  type: constant\n  stages: [{rate: 1, duration: 1}]\napi:\n  type: anthropic_messages\n\
         server:\n  type: vllm\n  model_name: m\n  base_url: http://127.0.0.1:9\ndata:\n  type: random\n  \
         input_distribution: {min: 4, max: 4, mean: 4, std_dev: 0}\n  \
         output_distribution: {min: 2, max: 2, mean: 2, std_dev: 0}\n",
    );
    let output = run_against(
        "inference-perf",
        &profile,
        "http://127.0.0.1:9",
        "builtin",
        dir.path(),
        "r",
    );
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("p.yaml:")
            && error.contains("`random` data does not support `api.type: anthropic_messages`"),
        "{error}"
    );
}

fn guidellm_responses(stream: bool) -> String {
    format!(
        "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
         model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n    stream: {stream}\n    request_format: /v1/responses\n  \
         data:\n    - kind: synthetic_text\n      prompt_tokens: 20\n      output_tokens: 5\n  \
         profile:\n    kind: synchronous\n  constraints:\n    - kind: max_requests\n      count: 4\n"
    )
}

#[test]
fn guidellm_responses_run_on_the_simulator_with_ttft_from_the_first_text_delta_and_usage_from_completed()
 {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "1ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "p.yaml", &guidellm_responses(true));
    let output = run_on_sim(dir.path(), "guidellm", &profile, "r", &sim);
    succeeded(&output);
    let records = records_of(dir.path(), "r");
    assert_eq!(records.len(), 4);
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        // The word tokenizer and the simulator count the same 20 words.
        assert_eq!(r["usage"]["prompt_tokens"], 20, "{r}");
        // guidellm asks for exactly 5 (ignore_eos), cut at max_output_tokens: `incomplete`, which is length.
        assert_eq!(r["usage"]["completion_tokens"], 5, "{r}");
        assert_eq!(r["finish_reason"], "length", "{r}");
        assert_eq!(
            chunks_of(r, "content"),
            5,
            "one output_text.delta per token: {r}"
        );
        assert_eq!(
            chunks_of(r, "usage_only"),
            1,
            "response.incomplete carries the usage: {r}"
        );
    }
    let run = json(&dir.path().join("r/run.json"));
    assert_eq!(run["api"], "responses");
    let summary = json(&dir.path().join("r/summary.json"));
    let latency = &summary["latency_ms"];
    assert_eq!(latency["ttft"]["count"], 4, "{latency:#}");
    assert_eq!(
        latency["itl"]["count"], 16,
        "four gaps per five-token answer: {latency:#}"
    );

    // Not streamed: one whole response, its text and usage read from `output` and `usage`.
    let profile = write(dir.path(), "q.yaml", &guidellm_responses(false));
    let output = run_on_sim(dir.path(), "guidellm", &profile, "q", &sim);
    succeeded(&output);
    for r in records_of(dir.path(), "q") {
        assert_eq!(r["usage"]["completion_tokens"], 5, "{r}");
        assert_eq!(r["finish_reason"], "length", "{r}");
        assert_eq!(chunks_of(&r, "content"), 1, "{r}");
    }
}

/// A whole Responses API answer of the five tokens asked, cut there as vLLM marks it.
fn responses_answer(_: &WireRequest) -> String {
    let body = json!({"id": "resp_1", "object": "response", "model": "m", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "a b c d e", "annotations": []}]}],
        "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}});
    ok_response("application/json", &body.to_string())
}

#[test]
fn a_responses_request_is_sent_as_guidellm_builds_it() {
    let (url, seen) = capturing_server(responses_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "p.yaml", &guidellm_responses(false));
    let output = llmbench()
        .args(["run", "--harness", "guidellm", "--profile"])
        .arg(&profile)
        .args(["--endpoint", &url, "--model", "m", "--tokenizer", "builtin"])
        .args([
            "--no-preflight",
            "--no-server-metrics",
            "--run-id",
            "r",
            "--output",
        ])
        .arg(dir.path())
        .output()
        .expect("runs");
    succeeded(&output);
    let sent = bodies(&seen);
    assert_eq!(sent.len(), 4);
    for (line, body, _) in &sent {
        assert!(line.starts_with("POST /v1/responses "), "{line}");
        // `ResponsesRequestHandler.format`: no `stream` unless streaming, the output length as max_output_tokens
        // with stop null and ignore_eos, and the prompt as one user item of input_text.
        assert_eq!(
            body.as_object().expect("a map").keys().collect::<Vec<_>>(),
            ["model", "max_output_tokens", "stop", "ignore_eos", "input"],
            "{body}"
        );
        assert_eq!(body["max_output_tokens"], 5);
        assert_eq!(body["stop"], Value::Null);
        assert_eq!(body["ignore_eos"], true);
        let input = body["input"].as_array().expect("input items");
        assert_eq!(input.len(), 1);
        assert_eq!(input[0]["role"], "user");
        let text = input[0]["content"][0]["text"].as_str().expect("text");
        assert_eq!(input[0]["content"][0]["type"], "input_text");
        assert_eq!(text.split_whitespace().count(), 20);
    }
    for r in records_of(dir.path(), "r") {
        assert_eq!(r["usage"]["prompt_tokens"], 20, "{r}");
        assert_eq!(r["usage"]["completion_tokens"], 5, "{r}");
        assert_eq!(r["finish_reason"], "length", "{r}");
    }
}
