//! The simulator as clients see it: real HTTP over loopback with reqwest.
//!
//! Timing assertions are strict on lower bounds (a token is never early) and loose on upper bounds
//! (CI machines are slow).

use std::time::{Duration, Instant};

use clap::Parser as _;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::*;

const MODEL: &str = "llmbench-sim";
/// Slack on upper timing bounds.
const SLOW_CI: Duration = Duration::from_millis(150);

fn config() -> SimConfig {
    SimConfig {
        port: 0,
        seed: Some(7),
        ..SimConfig::default()
    }
}

struct Harness {
    sim: RunningSim,
    client: reqwest::Client,
}

impl Harness {
    async fn start(config: SimConfig) -> Self {
        let sim = start(config).await.expect("simulator starts");
        Self {
            sim,
            client: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.sim.base_url())
    }

    async fn post(&self, path: &str, body: &Value) -> (reqwest::StatusCode, Value) {
        let response = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("request sent");
        let status = response.status();
        let body = response.json().await.expect("JSON body");
        (status, body)
    }

    async fn stream(&self, path: &str, body: &Value) -> Observed {
        observe(&self.client, self.url(path), body, Instant::now()).await
    }

    async fn metrics(&self) -> String {
        let response = self
            .client
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("metrics scraped");
        assert_eq!(response.status(), 200);
        response.text().await.expect("metrics text")
    }
}

/// A streamed response as the client saw it: each `data:` payload with its arrival time.
#[derive(Debug)]
struct Observed {
    status: reqwest::StatusCode,
    events: Vec<(Duration, String)>,
    error: Option<reqwest::Error>,
}

impl Observed {
    fn json(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|(_, data)| data != "[DONE]")
            .map(|(_, data)| serde_json::from_str(data).expect("JSON event"))
            .collect()
    }

    fn ends_with_done(&self) -> bool {
        self.events.last().is_some_and(|(_, data)| data == "[DONE]")
    }

    /// Arrival times of events that carry a token.
    fn token_times(&self) -> Vec<Duration> {
        self.events
            .iter()
            .filter(|(_, data)| {
                serde_json::from_str::<Value>(data).is_ok_and(|event| {
                    let choice = &event["choices"][0];
                    choice["text"] == " token" || choice["delta"]["content"] == " token"
                })
            })
            .map(|(at, _)| *at)
            .collect()
    }
}

/// Posts `body` and reads SSE events until the stream ends or fails; times count from `origin`.
async fn observe(client: &reqwest::Client, url: String, body: &Value, origin: Instant) -> Observed {
    let response = client
        .post(url)
        .json(body)
        .send()
        .await
        .expect("request sent");
    let status = response.status();
    let mut bytes = response.bytes_stream();
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    let mut error = None;
    while let Some(chunk) = bytes.next().await {
        match chunk {
            Ok(chunk) => {
                let at = origin.elapsed();
                buffer.extend_from_slice(&chunk);
                while let Some(end) = buffer.windows(2).position(|pair| pair == b"\n\n") {
                    let event: Vec<u8> = buffer.drain(..end + 2).collect();
                    let text = String::from_utf8(event).expect("UTF-8 event");
                    // The Responses and Messages APIs name each event on an `event:` line first.
                    let data = text
                        .lines()
                        .find_map(|line| line.strip_prefix("data: "))
                        .expect("every event has a data line");
                    events.push((at, data.to_owned()));
                }
            }
            Err(err) => {
                error = Some(err);
                break;
            }
        }
    }
    Observed {
        status,
        events,
        error,
    }
}

fn completion(max_tokens: u32) -> Value {
    json!({"model": MODEL, "prompt": "the quick brown fox", "max_tokens": max_tokens,
           "ignore_eos": true})
}

fn chat(max_tokens: u32) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "hello there"}],
           "max_tokens": max_tokens, "ignore_eos": true})
}

fn streaming(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

fn with_usage(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    body
}

/// The value of the sample line starting with `series` (name and labels) in a scrape.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in\n{metrics}"))
        .parse()
        .expect("numeric sample")
}

fn labels() -> String {
    format!("{{model_name=\"{MODEL}\",engine=\"0\"}}")
}

#[tokio::test]
async fn streaming_completion_sends_exactly_max_tokens_under_ignore_eos() {
    let h = Harness::start(config()).await;
    let observed = h.stream("/v1/completions", &streaming(completion(5))).await;

    assert_eq!(observed.status, 200);
    assert!(observed.error.is_none(), "{:?}", observed.error);
    assert!(observed.ends_with_done());
    let chunks = observed.json();
    assert_eq!(chunks.len(), 5);
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk["object"], "text_completion");
        assert_eq!(chunk["model"], MODEL);
        assert_eq!(chunk["choices"][0]["text"], " token");
        let expected = if i == 4 { json!("length") } else { json!(null) };
        assert_eq!(chunk["choices"][0]["finish_reason"], expected);
        assert_eq!(chunk["usage"], Value::Null);
    }
}

#[tokio::test]
async fn streaming_chat_opens_with_a_role_delta_then_one_chunk_per_token() {
    let h = Harness::start(config()).await;
    let observed = h.stream("/v1/chat/completions", &streaming(chat(4))).await;

    assert_eq!(observed.status, 200);
    assert!(observed.ends_with_done());
    let chunks = observed.json();
    assert_eq!(chunks.len(), 5);
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    for chunk in &chunks[1..] {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["choices"][0]["delta"], json!({"content": " token"}));
    }
    assert_eq!(chunks[4]["choices"][0]["finish_reason"], "length");
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], Value::Null);
    let id = &chunks[0]["id"];
    assert!(id.as_str().is_some_and(|id| id.starts_with("chatcmpl-")));
    assert!(chunks.iter().all(|chunk| &chunk["id"] == id));
}

#[tokio::test]
async fn usage_chunk_is_sent_only_when_include_usage_is_set() {
    let h = Harness::start(config()).await;
    for (path, body, prompt_tokens) in [
        ("/v1/completions", completion(3), 4),
        ("/v1/chat/completions", chat(3), 2),
    ] {
        let observed = h.stream(path, &with_usage(body.clone())).await;
        let chunks = observed.json();
        let usage_chunk = chunks.last().expect("chunks");
        assert_eq!(usage_chunk["choices"], json!([]), "{path}");
        assert_eq!(
            usage_chunk["usage"],
            json!({"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + 3,
                   "completion_tokens": 3}),
            "{path}"
        );
        assert!(observed.ends_with_done());
        assert!(
            chunks[..chunks.len() - 1]
                .iter()
                .all(|chunk| !chunk["usage"].is_object())
        );

        let without = h.stream(path, &streaming(body)).await.json();
        assert!(
            without.iter().all(|chunk| !chunk["usage"].is_object()
                && chunk["choices"].as_array().is_some_and(|c| c.len() == 1)),
            "{path}: {without:?}"
        );
    }
}

#[tokio::test]
async fn non_streaming_completion_returns_all_text_and_usage() {
    let h = Harness::start(config()).await;
    let (status, body) = h.post("/v1/completions", &completion(3)).await;

    assert_eq!(status, 200);
    assert_eq!(body["object"], "text_completion");
    assert!(
        body["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("cmpl-"))
    );
    assert_eq!(body["choices"][0]["text"], " token token token");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["choices"][0]["logprobs"], Value::Null);
    assert_eq!(body["usage"]["prompt_tokens"], 4);
    assert_eq!(body["usage"]["completion_tokens"], 3);
    assert_eq!(body["usage"]["total_tokens"], 7);
}

#[tokio::test]
async fn chat_images_add_one_token_per_28_pixel_tile_to_prompt_tokens() {
    let h = Harness::start(config()).await;
    // 256×256: ceil(256/28)² = 10·10 = 100; 30×57: 2·3 = 6; "hello there": 2 words.
    let images = [(256, 256), (30, 57)].map(|(w, h)| {
        json!({"type": "image_url",
               "image_url": {"url": llmbench_data::image::noise_image(w, h, 1).url}})
    });
    let body = json!({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hello there"}, images[0], images[1]]}]});
    let (status, answer) = h.post("/v1/chat/completions", &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["usage"]["prompt_tokens"], 108);

    let bad = json!({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]});
    let (status, answer) = h.post("/v1/chat/completions", &bad).await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("takes JPEG, PNG or WEBP images as base64 data URLs")),
        "{answer}"
    );
}

#[tokio::test]
async fn non_streaming_chat_returns_an_assistant_message_and_usage() {
    let h = Harness::start(config()).await;
    let (status, body) = h.post("/v1/chat/completions", &chat(2)).await;

    assert_eq!(status, 200);
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], " token token");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 2, "total_tokens": 4, "completion_tokens": 2,
               "prompt_tokens_details": null})
    );
}

#[tokio::test]
async fn responses_stream_text_deltas_then_a_completed_response_with_usage_and_no_done() {
    let h = Harness::start(config()).await;
    let body = json!({"model": MODEL, "stream": true, "max_output_tokens": 3, "ignore_eos": true,
                      "instructions": "be brief",
                      "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello there"}]}]});
    let observed = h.stream("/v1/responses", &body).await;
    assert_eq!(observed.status, 200);
    assert!(
        !observed.ends_with_done(),
        "the Responses API sends no [DONE]"
    );
    let events = observed.json();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.incomplete"
        ]
    );
    assert_eq!(events[1]["delta"], " token");
    let last = &events[4]["response"];
    assert_eq!(last["status"], "incomplete");
    assert_eq!(last["incomplete_details"]["reason"], "max_output_tokens");
    // "be brief" and "hello there": four words.
    assert_eq!(last["usage"]["input_tokens"], 4);
    assert_eq!(last["usage"]["output_tokens"], 3);
    assert_eq!(
        last["output"][0]["content"][0]["text"],
        " token token token"
    );

    let whole = json!({"model": MODEL, "max_output_tokens": 2, "input": "one two three"});
    let (status, body) = h.post("/v1/responses", &whole).await;
    assert_eq!(status, 200);
    assert_eq!(body["object"], "response");
    assert!(
        body["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resp_"))
    );
    assert_eq!(body["usage"]["input_tokens"], 3);
    assert!(
        body["usage"]["output_tokens"]
            .as_u64()
            .is_some_and(|n| (1..=2).contains(&n))
    );
}

#[tokio::test]
async fn messages_stream_anthropic_events_with_usage_split_between_start_and_delta() {
    let h = Harness::start(config()).await;
    let body = json!({"model": MODEL, "stream": true, "max_tokens": 2, "ignore_eos": true, "system": "be brief",
                      "messages": [{"role": "user", "content": "hello there friend"}]});
    let observed = h.stream("/v1/messages", &body).await;
    assert_eq!(observed.status, 200);
    assert!(
        !observed.ends_with_done(),
        "Anthropic's stream ends with message_stop, not [DONE]"
    );
    let events = observed.json();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(events[0]["message"]["usage"]["input_tokens"], 5);
    assert_eq!(
        events[2]["delta"],
        json!({"type": "text_delta", "text": " token"})
    );
    assert_eq!(events[5]["delta"]["stop_reason"], "max_tokens");
    assert_eq!(events[5]["usage"]["output_tokens"], 2);

    let (status, whole) = h
        .post("/v1/messages", &json!({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(whole["type"], "message");
    assert_eq!(
        whole["content"][0],
        json!({"type": "text", "text": " token"})
    );
    assert_eq!(whole["stop_reason"], "max_tokens");
    assert_eq!(
        whole["usage"],
        json!({"input_tokens": 1, "output_tokens": 1})
    );

    let (status, _) = h
        .post(
            "/v1/messages",
            &json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(status, 400, "Anthropic's API requires max_tokens");
}

#[tokio::test]
async fn token_id_prompts_count_one_token_per_id() {
    let h = Harness::start(config()).await;
    let body = json!({"prompt": [101, 102, 103, 104, 105], "max_tokens": 1});
    let (status, body) = h.post("/v1/completions", &body).await;
    assert_eq!(status, 200);
    assert_eq!(body["usage"]["prompt_tokens"], 5);
}

#[tokio::test]
async fn missing_max_tokens_falls_back_to_default_output_tokens() {
    let h = Harness::start(SimConfig {
        default_output_tokens: 7,
        ..config()
    })
    .await;
    let body = json!({"prompt": "hi", "ignore_eos": true});
    let (_, body) = h.post("/v1/completions", &body).await;
    assert_eq!(body["usage"]["completion_tokens"], 7);
}

#[tokio::test]
async fn without_ignore_eos_output_lengths_are_seeded_draws_up_to_max_tokens() {
    async fn lengths() -> Vec<(u64, String)> {
        let h = Harness::start(config()).await;
        let mut lengths = Vec::new();
        for _ in 0..20 {
            let body = json!({"prompt": "hi", "max_tokens": 8});
            let (_, body) = h.post("/v1/completions", &body).await;
            let n = body["usage"]["completion_tokens"].as_u64().expect("count");
            let reason = body["choices"][0]["finish_reason"]
                .as_str()
                .expect("reason");
            lengths.push((n, reason.to_owned()));
        }
        lengths
    }
    let first = lengths().await;
    for (n, reason) in &first {
        assert!((1..=8).contains(n));
        assert_eq!(reason, if *n == 8 { "length" } else { "stop" });
    }
    assert!(first.iter().any(|(n, _)| *n != first[0].0), "{first:?}");
    assert_eq!(first, lengths().await, "same seed, same lengths");
}

/// vLLM's `min_tokens` holds the end of sequence back: with `min_tokens == max_tokens` every answer is exactly that
/// long (MLCommons' endpoints client asks for its fixed output lengths this way, without `ignore_eos`); above
/// `max_tokens` or below 0 it is refused with vLLM's messages (`SamplingParams._verify_args`).
#[tokio::test]
async fn min_tokens_bounds_the_drawn_length_from_below() {
    let h = Harness::start(config()).await;
    for _ in 0..10 {
        let body = json!({"prompt": "hi", "max_tokens": 8, "min_tokens": 8});
        let (status, body) = h.post("/v1/completions", &body).await;
        assert_eq!(status, 200);
        assert_eq!(body["usage"]["completion_tokens"], 8);
        assert_eq!(body["choices"][0]["finish_reason"], "length");
    }
    for _ in 0..20 {
        let body = json!({"prompt": "hi", "max_tokens": 8, "min_tokens": 6});
        let (_, body) = h.post("/v1/completions", &body).await;
        let n = body["usage"]["completion_tokens"].as_u64().expect("count");
        assert!((6..=8).contains(&n), "{n}");
    }
    let (status, body) = h
        .post(
            "/v1/completions",
            &json!({"prompt": "hi", "max_tokens": 8, "min_tokens": 9}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "min_tokens must be less than or equal to max_tokens=8, got 9."
    );
    let (status, body) = h
        .post(
            "/v1/completions",
            &json!({"prompt": "hi", "max_tokens": 8, "min_tokens": -1}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "min_tokens must be greater than or equal to 0, got -1."
    );
}

#[tokio::test]
async fn streamed_tokens_arrive_after_ttft_then_one_per_itl() {
    let ttft = Duration::from_millis(50);
    let itl = Duration::from_millis(10);
    let h = Harness::start(SimConfig {
        ttft,
        itl,
        ..config()
    })
    .await;
    for (path, body) in [
        ("/v1/completions", completion(5)),
        ("/v1/chat/completions", chat(5)),
    ] {
        let observed = h.stream(path, &streaming(body)).await;
        let times = observed.token_times();
        assert_eq!(times.len(), 5, "{path}");
        for (i, at) in (0u32..).zip(&times) {
            let due = ttft + itl * i;
            assert!(*at >= due, "{path}: token {i} at {at:?}, due {due:?}");
            assert!(
                *at <= due + SLOW_CI,
                "{path}: token {i} at {at:?}, due {due:?}"
            );
        }
        // vllm bench serve starts TTFT at the role chunk: it must not come before the first token.
        assert!(
            observed.events[0].0 >= ttft,
            "{path}: {:?}",
            observed.events[0]
        );
    }
}

#[tokio::test]
async fn non_streaming_response_arrives_after_ttft_plus_remaining_itls() {
    let ttft = Duration::from_millis(50);
    let itl = Duration::from_millis(10);
    let h = Harness::start(SimConfig {
        ttft,
        itl,
        ..config()
    })
    .await;
    let started = Instant::now();
    let (status, _) = h.post("/v1/completions", &completion(5)).await;
    let elapsed = started.elapsed();
    assert_eq!(status, 200);
    assert!(elapsed >= ttft + itl * 4, "{elapsed:?}");
    assert!(elapsed <= ttft + itl * 4 + SLOW_CI, "{elapsed:?}");
}

#[tokio::test]
async fn requests_beyond_max_num_seqs_wait_and_the_wait_adds_to_ttft() {
    let ttft = Duration::from_millis(100);
    let itl = Duration::from_millis(10);
    let h = Harness::start(SimConfig {
        ttft,
        itl,
        max_num_seqs: 1,
        ..config()
    })
    .await;
    let origin = Instant::now();
    let body = streaming(completion(5));
    let first = observe(&h.client, h.url("/v1/completions"), &body, origin);
    let second = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        observe(&h.client, h.url("/v1/completions"), &body, origin).await
    };
    let scrape = async {
        tokio::time::sleep(Duration::from_millis(60)).await;
        h.metrics().await
    };
    let (first, second, metrics) = tokio::join!(first, second, scrape);

    let first_done = *first.token_times().last().expect("first finished");
    let second_first = second.token_times()[0];
    // The second is admitted only when the first finishes (after ttft + 4 itl), then waits its ttft.
    assert!(first_done >= ttft + itl * 4, "{first_done:?}");
    assert!(second_first >= ttft + itl * 4 + ttft, "{second_first:?}");
    assert!(
        second_first <= first_done + ttft + SLOW_CI,
        "{second_first:?}"
    );
    assert_eq!(
        sample(&metrics, &format!("vllm:num_requests_running{}", labels())),
        1.0
    );
    assert_eq!(
        sample(&metrics, &format!("vllm:num_requests_waiting{}", labels())),
        1.0
    );
}

fn failing(kind: FailureKind) -> SimConfig {
    SimConfig {
        failure_rate: 1.0,
        failure_kinds: vec![kind],
        ..config()
    }
}

#[tokio::test]
async fn injected_http429_and_http500_answer_with_openai_error_bodies() {
    for (kind, status, error_type) in [
        (FailureKind::Http429, 429, "RateLimitError"),
        (FailureKind::Http500, 500, "InternalServerError"),
    ] {
        let h = Harness::start(failing(kind)).await;
        for body in [completion(3), streaming(chat(3))] {
            let path = if body.get("messages").is_some() {
                "/v1/chat/completions"
            } else {
                "/v1/completions"
            };
            let (got, body) = h.post(path, &body).await;
            assert_eq!(got, status);
            assert_eq!(body["error"]["type"], error_type);
            assert_eq!(body["error"]["code"], status);
            assert!(body["error"]["message"].is_string());
        }
    }
}

#[tokio::test]
async fn injected_disconnect_closes_the_stream_before_done() {
    let h = Harness::start(failing(FailureKind::Disconnect)).await;
    let observed = h.stream("/v1/completions", &streaming(completion(6))).await;
    assert_eq!(observed.status, 200);
    assert!(observed.error.is_some(), "client sees a body error");
    assert!(!observed.ends_with_done());
    assert_eq!(observed.token_times().len(), 3, "cut half-way");

    let result = h
        .client
        .post(h.url("/v1/completions"))
        .json(&completion(6))
        .send()
        .await;
    let body = match result {
        Ok(response) => response.bytes().await.map(|_| ()),
        Err(err) => Err(err),
    };
    assert!(body.is_err(), "non-streaming response is cut off too");

    let metrics = h.metrics().await;
    let abort = format!(
        "vllm:request_success_total{{model_name=\"{MODEL}\",engine=\"0\",finished_reason=\"abort\"}}"
    );
    assert_eq!(sample(&metrics, &abort), 2.0);
    assert_eq!(
        sample(&metrics, &format!("vllm:num_requests_running{}", labels())),
        0.0
    );
}

#[tokio::test]
async fn injected_malformed_event_is_a_data_line_that_is_not_json() {
    let h = Harness::start(failing(FailureKind::Malformed)).await;
    let observed = h.stream("/v1/chat/completions", &streaming(chat(4))).await;
    let bad: Vec<&String> = observed
        .events
        .iter()
        .map(|(_, data)| data)
        .filter(|data| *data != "[DONE]" && serde_json::from_str::<Value>(data).is_err())
        .collect();
    assert_eq!(bad.len(), 1, "{:?}", observed.events);
    assert_eq!(observed.token_times().len(), 4, "the stream goes on");
    assert!(observed.ends_with_done());

    let response = h
        .client
        .post(h.url("/v1/completions"))
        .json(&completion(4))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
}

#[tokio::test]
async fn injected_stall_holds_the_stream_until_the_client_times_out() {
    let h = Harness::start(failing(FailureKind::Stall)).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .expect("client");
    let started = Instant::now();
    let observed = observe(
        &client,
        h.url("/v1/completions"),
        &streaming(completion(6)),
        started,
    )
    .await;
    assert!(
        observed
            .error
            .as_ref()
            .is_some_and(reqwest::Error::is_timeout),
        "{:?}",
        observed.error
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(observed.token_times().len(), 3, "stalls half-way");
    assert!(!observed.ends_with_done());

    // A stalled request gives its seat back, so it cannot wedge the server.
    let metrics = h.metrics().await;
    assert_eq!(
        sample(&metrics, &format!("vllm:num_requests_running{}", labels())),
        0.0
    );
    // Shutdown releases stalled responses instead of waiting out the grace period.
    let stopping = Instant::now();
    h.sim.shutdown().await.expect("clean shutdown");
    assert!(stopping.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn failure_rate_fails_a_binomially_plausible_share_of_requests() {
    let h = Harness::start(SimConfig {
        failure_rate: 0.2,
        ..config()
    })
    .await;
    let mut failed = 0;
    for _ in 0..200 {
        let (status, _) = h.post("/v1/completions", &completion(1)).await;
        match status.as_u16() {
            200 => {}
            500 => failed += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    // Expected 40, standard deviation about 5.7: five of them either way.
    assert!((12..=68).contains(&failed), "{failed} of 200 failed");
}

#[tokio::test]
async fn metrics_expose_vllm_names_with_counts_after_requests() {
    let h = Harness::start(config()).await;
    for _ in 0..3 {
        let (status, _) = h.post("/v1/completions", &completion(4)).await;
        assert_eq!(status, 200);
    }
    let observed = h.stream("/v1/chat/completions", &streaming(chat(2))).await;
    assert!(observed.ends_with_done());

    let response = h
        .client
        .get(h.url("/metrics"))
        .send()
        .await
        .expect("scrape");
    assert!(
        response.headers()[reqwest::header::CONTENT_TYPE]
            .to_str()
            .is_ok_and(|value| value.starts_with("application/openmetrics-text"))
    );
    let metrics = response.text().await.expect("text");
    let l = labels();
    let value = |name: &str| sample(&metrics, &format!("{name}{l}"));
    assert_eq!(value("vllm:num_requests_running"), 0.0);
    assert_eq!(value("vllm:num_requests_waiting"), 0.0);
    assert_eq!(value("vllm:prompt_tokens_total"), 3.0 * 4.0 + 2.0);
    assert_eq!(value("vllm:generation_tokens_total"), 3.0 * 4.0 + 2.0);
    let length = format!(
        "vllm:request_success_total{{model_name=\"{MODEL}\",engine=\"0\",finished_reason=\"length\"}}"
    );
    assert_eq!(sample(&metrics, &length), 4.0);
    for histogram in [
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
        "vllm:request_queue_time_seconds",
        "vllm:request_time_per_output_token_seconds",
    ] {
        assert_eq!(value(&format!("{histogram}_count")), 4.0, "{histogram}");
    }
    // One gap per token after the first: 3 per 4-token request, 1 for the 2-token stream.
    assert_eq!(value("vllm:inter_token_latency_seconds_count"), 10.0);
    assert_eq!(value("vllm:time_per_output_token_seconds_count"), 10.0);
    assert_eq!(value("vllm:request_prompt_tokens_sum"), 14.0);
    assert!(metrics.contains(&format!(
        "vllm:time_to_first_token_seconds_bucket{{le=\"0.001\",model_name=\"{MODEL}\",engine=\"0\"}}"
    )) || metrics.contains(&format!(
        "vllm:time_to_first_token_seconds_bucket{{model_name=\"{MODEL}\",engine=\"0\",le=\"0.001\"}}"
    )), "{metrics}");
}

/// `n` words `{tag}0 {tag}1 …`.
fn words(n: usize, tag: &str) -> String {
    (0..n)
        .map(|i| format!("{tag}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn a_second_request_sharing_a_long_prefix_reports_cached_tokens() {
    // Blocks of 4 tokens. Every prompt is the same 20 words and 6 words of its own: 26 tokens, 6 full blocks, of
    // which the first 5 (tokens 0–19) are shared and the sixth holds 4 of the prompt's own words.
    let h = Harness::start(SimConfig {
        block_size: 4,
        ..config()
    })
    .await;
    let shared = words(20, "s");
    let prompt = |tag: &str| format!("{shared} {}", words(6, tag));
    let completion = |tag: &str| json!({"model": MODEL, "prompt": prompt(tag), "max_tokens": 2, "ignore_eos": true});

    // The first finds nothing: vLLM leaves prompt_tokens_details out (null in a whole body) when none hit.
    let (status, first) = h.post("/v1/completions", &completion("a")).await;
    assert_eq!(status, 200);
    assert_eq!(first["usage"]["prompt_tokens"], 26);
    assert_eq!(first["usage"]["prompt_tokens_details"], Value::Null);
    // The second shares 20 tokens: 5 blocks of 4.
    let (_, second) = h.post("/v1/completions", &completion("b")).await;
    assert_eq!(
        second["usage"]["prompt_tokens_details"],
        json!({"cached_tokens": 20})
    );
    // Streamed, in the usage chunk, and for chat too (the messages' words in order are the tokens).
    let observed = h
        .stream("/v1/completions", &with_usage(completion("c")))
        .await;
    let usage = observed.json().last().expect("usage chunk")["usage"].clone();
    assert_eq!(usage["prompt_tokens_details"], json!({"cached_tokens": 20}));
    let chat = json!({"model": MODEL, "max_tokens": 2, "ignore_eos": true,
        "messages": [{"role": "system", "content": shared}, {"role": "user", "content": words(6, "d")}]});
    let observed = h.stream("/v1/chat/completions", &with_usage(chat)).await;
    let usage = observed.json().last().expect("usage chunk")["usage"].clone();
    assert_eq!(usage["prompt_tokens"], 26);
    assert_eq!(usage["prompt_tokens_details"], json!({"cached_tokens": 20}));
    // The same prompt again hits all 6 of its blocks but recomputes from the last token on: 25 tokens allowed,
    // 6 blocks of 4 = 24.
    let (_, again) = h.post("/v1/completions", &completion("a")).await;
    assert_eq!(
        again["usage"]["prompt_tokens_details"],
        json!({"cached_tokens": 24})
    );

    // vLLM's counters: queries are every looked-up prompt token (5 × 26), hits the cached ones.
    let metrics = h.metrics().await;
    let l = labels();
    assert_eq!(
        sample(&metrics, &format!("vllm:prefix_cache_queries_total{l}")),
        130.0
    );
    assert_eq!(
        sample(&metrics, &format!("vllm:prefix_cache_hits_total{l}")),
        20.0 * 3.0 + 24.0
    );
}

#[tokio::test]
async fn reset_prefix_cache_empties_the_cache_as_vllm_dev_mode_does() {
    let h = Harness::start(SimConfig {
        block_size: 4,
        ..config()
    })
    .await;
    let body =
        json!({"model": MODEL, "prompt": words(26, "p"), "max_tokens": 2, "ignore_eos": true});
    let (_, first) = h.post("/v1/completions", &body).await;
    assert_eq!(first["usage"]["prompt_tokens_details"], Value::Null);
    let (_, warm) = h.post("/v1/completions", &body).await;
    assert_eq!(
        warm["usage"]["prompt_tokens_details"],
        json!({"cached_tokens": 24})
    );
    let reset = reqwest::Client::new()
        .post(h.url("/reset_prefix_cache"))
        .send()
        .await
        .expect("reset");
    assert_eq!(reset.status(), 200);
    // Cold again: the same prompt finds nothing.
    let (_, cold) = h.post("/v1/completions", &body).await;
    assert_eq!(cold["usage"]["prompt_tokens_details"], Value::Null);
}

#[tokio::test]
async fn prompt_tokens_details_stay_out_when_disabled_and_nothing_is_cached_without_a_cache() {
    let prompt = words(40, "w");
    let body = json!({"model": MODEL, "prompt": prompt, "max_tokens": 1, "ignore_eos": true});
    // Details off: the cache still works (the counters say so) but usage never mentions it, as vLLM by default.
    let h = Harness::start(SimConfig {
        enable_prompt_tokens_details: false,
        ..config()
    })
    .await;
    for _ in 0..2 {
        let observed = h.stream("/v1/completions", &with_usage(body.clone())).await;
        let usage = observed.json().last().expect("usage chunk")["usage"].clone();
        assert!(usage.get("prompt_tokens_details").is_none(), "{usage}");
    }
    // 40 tokens = blocks 0–31 and 32–39 hashed (block 16: two full blocks); the second hits both (cap 39 → 2).
    let metrics = h.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            &format!("vllm:prefix_cache_hits_total{}", labels())
        ),
        32.0
    );
    // No cache at all: nothing hits and nothing is counted as a query.
    let h = Harness::start(SimConfig {
        prefix_cache_blocks: 0,
        ..config()
    })
    .await;
    for _ in 0..2 {
        let (_, response) = h.post("/v1/completions", &body).await;
        assert_eq!(response["usage"]["prompt_tokens_details"], Value::Null);
    }
    let metrics = h.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            &format!("vllm:prefix_cache_queries_total{}", labels())
        ),
        0.0
    );
}

#[tokio::test]
async fn unknown_model_is_404_with_an_openai_error_body() {
    let h = Harness::start(config()).await;
    for path in ["/v1/completions", "/v1/chat/completions"] {
        let body = json!({"model": "gpt-4", "prompt": "hi", "messages": [], "max_tokens": 1});
        let (status, body) = h.post(path, &body).await;
        assert_eq!(status, 404);
        assert_eq!(body["error"]["type"], "NotFoundError");
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(
            body["error"]["message"],
            "The model `gpt-4` does not exist."
        );
    }
}

#[tokio::test]
async fn malformed_request_json_is_400_with_an_openai_error_body() {
    let h = Harness::start(config()).await;
    let response = h
        .client
        .post(h.url("/v1/completions"))
        .header("content-type", "application/json")
        .body("{\"prompt\": ")
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("JSON error body");
    assert_eq!(body["error"]["type"], "BadRequestError");
    assert_eq!(body["error"]["code"], 400);
}

#[tokio::test]
async fn prompt_plus_max_tokens_beyond_max_model_len_is_400() {
    let h = Harness::start(SimConfig {
        max_model_len: 10,
        ..config()
    })
    .await;
    let body =
        |max_tokens: u32| json!({"prompt": "one two three four five", "max_tokens": max_tokens});
    let (status, error) = h.post("/v1/completions", &body(6)).await;
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("maximum context length is 10"))
    );
    let (status, _) = h.post("/v1/completions", &body(5)).await;
    assert_eq!(status, 200);
    let (status, _) = h.post("/v1/completions", &body(0)).await;
    assert_eq!(status, 400);
    let (status, _) = h
        .post(
            "/v1/completions",
            &json!({"prompt": "a b c d e f g h i j", "max_tokens": 1}),
        )
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn at_the_context_end_it_stops_with_length_when_told_to_as_llama_cpp_does() {
    let h = Harness::start(SimConfig {
        max_model_len: 10,
        stop_at_context_end: true,
        ..config()
    })
    .await;
    // 4 prompt words leave room for 6 of the 50 tokens asked.
    let (status, body) = h.post("/v1/completions", &completion(50)).await;
    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["usage"]["completion_tokens"], 6);
    let streamed = h
        .stream("/v1/chat/completions", &with_usage(streaming(chat(50))))
        .await;
    let events = streamed.json();
    let usage = events.last().expect("usage chunk")["usage"].clone();
    // 2 prompt words leave 8.
    assert_eq!(usage["completion_tokens"], 8);
    assert_eq!(streamed.token_times().len(), 8);
    assert!(
        events
            .iter()
            .any(|e| e["choices"][0]["finish_reason"] == "length")
    );
    // A prompt that fills the context alone is still refused.
    let (status, _) = h
        .post(
            "/v1/completions",
            &json!({"prompt": "a b c d e f g h i j", "max_tokens": 1}),
        )
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn reasoning_tokens_come_first_as_reasoning_content_in_chat_only() {
    let h = Harness::start(SimConfig {
        reasoning_tokens: 3,
        ..config()
    })
    .await;
    let streamed = h
        .stream("/v1/chat/completions", &with_usage(streaming(chat(5))))
        .await;
    let deltas: Vec<Value> = streamed
        .json()
        .iter()
        .filter_map(|e| e["choices"].get(0).map(|c| c["delta"].clone()))
        .collect();
    // The role, 3 reasoning tokens, 2 answer tokens.
    assert_eq!(deltas.len(), 6, "{deltas:?}");
    for delta in &deltas[1..4] {
        assert_eq!(delta, &json!({"reasoning_content": " token"}));
    }
    for delta in &deltas[4..] {
        assert_eq!(delta, &json!({"content": " token"}));
    }
    let usage = streamed.json().last().expect("usage")["usage"].clone();
    assert_eq!(usage["completion_tokens"], 5);
    // A whole answer carries its reasoning apart; completions have none.
    let (_, whole) = h.post("/v1/chat/completions", &chat(5)).await;
    let message = &whole["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], " token token token");
    assert_eq!(message["content"], " token token");
    let (_, completion) = h.post("/v1/completions", &completion(5)).await;
    assert_eq!(completion["choices"][0]["text"], " token".repeat(5));
    // Fewer tokens than the reasoning: all of them reason, the last one finishes.
    let short = h.stream("/v1/chat/completions", &streaming(chat(2))).await;
    let last = short.json().last().expect("last")["choices"][0].clone();
    assert_eq!(last["delta"], json!({"reasoning_content": " token"}));
    assert_eq!(last["finish_reason"], "length");
}

#[tokio::test]
async fn a_request_id_is_echoed_on_the_response() {
    let h = Harness::start(config()).await;
    let response = h
        .client
        .post(h.url("/v1/completions"))
        .header("x-request-id", "llmbench-run-7")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .json(&completion(2))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("x-request-id").map(|v| v.as_bytes()),
        Some(b"llmbench-run-7".as_slice())
    );
    let plain = h
        .client
        .post(h.url("/v1/completions"))
        .json(&completion(2))
        .send()
        .await
        .expect("sent");
    assert!(plain.headers().get("x-request-id").is_none());
}

#[tokio::test]
async fn stream_options_without_stream_and_batches_are_400() {
    let h = Harness::start(config()).await;
    let mut body = completion(2);
    body["stream_options"] = json!({"include_usage": true});
    assert_eq!(h.post("/v1/completions", &body).await.0, 400);
    let batch = json!({"prompt": ["a", "b"], "max_tokens": 1});
    assert_eq!(h.post("/v1/completions", &batch).await.0, 400);
    let mut two_choices = completion(2);
    two_choices["n"] = json!(2);
    assert_eq!(h.post("/v1/completions", &two_choices).await.0, 400);
}

#[tokio::test]
async fn models_lists_the_served_model_and_health_is_ok() {
    let h = Harness::start(config()).await;
    let models: Value = h
        .client
        .get(h.url("/v1/models"))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("JSON");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], MODEL);
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["max_model_len"], 32768);
    let health = h.client.get(h.url("/health")).send().await.expect("sent");
    assert_eq!(health.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_slow_streams_all_run_to_the_end() {
    let ttft = Duration::from_millis(300);
    let itl = Duration::from_millis(50);
    let h = Harness::start(SimConfig {
        ttft,
        itl,
        max_num_seqs: 10_000,
        ..config()
    })
    .await;
    let body = streaming(completion(4));
    let origin = Instant::now();
    let streams = (0..1000).map(|_| observe(&h.client, h.url("/v1/completions"), &body, origin));
    let observed = futures_util::future::join_all(streams).await;
    assert!(
        observed
            .iter()
            .all(|o| o.ends_with_done() && o.token_times().len() == 4)
    );
}

#[tokio::test]
async fn shutdown_cuts_off_streams_still_running_after_the_grace_period() {
    let h = Harness::start(SimConfig {
        itl: Duration::from_secs(1),
        shutdown_grace: Duration::from_millis(100),
        ..config()
    })
    .await;
    let url = h.url("/v1/completions");
    let client = h.client.clone();
    let stream = tokio::spawn(async move {
        observe(&client, url, &streaming(completion(30)), Instant::now()).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = Instant::now();
    h.sim.shutdown().await.expect("clean shutdown");
    assert!(
        stopping.elapsed() < Duration::from_secs(2),
        "{:?}",
        stopping.elapsed()
    );
    let observed = stream.await.expect("client task");
    assert!(observed.error.is_some());
    assert!(!observed.ends_with_done());
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    sim: SimArgs,
}

fn parse(args: &[&str]) -> Result<SimConfig, SimError> {
    let cli = Cli::try_parse_from(std::iter::once("sim").chain(args.iter().copied()))
        .expect("flags parse");
    SimConfig::try_from(cli.sim)
}

#[test]
fn flags_are_well_formed_for_clap() {
    use clap::CommandFactory as _;
    Cli::command().debug_assert();
}

#[test]
fn flag_defaults_are_the_config_defaults() {
    assert_eq!(parse(&[]).expect("valid"), SimConfig::default());
}

#[test]
fn flags_parse_durations_and_failure_kinds() {
    let config = parse(&[
        "--ttft",
        "50ms",
        "--itl",
        "2ms",
        "--failure-rate",
        "0.5",
        "--failure-kinds",
        "stall, disconnect,malformed",
    ])
    .expect("valid");
    assert_eq!(config.ttft, Duration::from_millis(50));
    assert_eq!(config.itl, Duration::from_millis(2));
    assert_eq!(
        config.failure_kinds,
        vec![
            FailureKind::Stall,
            FailureKind::Disconnect,
            FailureKind::Malformed
        ]
    );
}

#[test]
fn invalid_flags_are_rejected_naming_the_flag_and_the_value() {
    let message = |args: &[&str]| parse(args).expect_err("invalid").to_string();
    let rate = message(&["--failure-rate", "1.5"]);
    assert!(
        rate.contains("--failure-rate") && rate.contains("1.5"),
        "{rate}"
    );
    let kind = message(&["--failure-kinds", "http500,teapot"]);
    assert!(
        kind.contains("--failure-kinds") && kind.contains("teapot"),
        "{kind}"
    );
    let seqs = message(&["--max-num-seqs", "0"]);
    assert!(seqs.contains("--max-num-seqs"), "{seqs}");
}

#[test]
fn prefix_cache_flags_parse() {
    let config = parse(&[
        "--block-size",
        "32",
        "--prefix-cache-blocks",
        "0",
        "--enable-prompt-tokens-details",
        "false",
    ])
    .expect("valid");
    assert_eq!(config.block_size, 32);
    assert_eq!(config.prefix_cache_blocks, 0);
    assert!(!config.enable_prompt_tokens_details);
    let block = parse(&["--block-size", "0"])
        .expect_err("invalid")
        .to_string();
    assert!(block.contains("--block-size"), "{block}");
}

/// Scale check, run by hand:
/// `cargo test --release -p llmbench --lib sim::tests::scale -- --ignored --nocapture`.
/// Client and server share this process, so it needs two descriptors per stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "takes ~15 s in release mode and ~2 x 9,000 file descriptors"]
async fn scale_nine_thousand_concurrent_slow_streams() {
    let streams = 9_000;
    let ttft = Duration::from_secs(1);
    let itl = Duration::from_millis(100);
    let h = Harness::start(SimConfig {
        ttft,
        itl,
        max_num_seqs: streams,
        ..config()
    })
    .await;
    let body = streaming(completion(50));
    let origin = Instant::now();
    let observed = futures_util::future::join_all(
        (0..streams).map(|_| observe(&h.client, h.url("/v1/completions"), &body, origin)),
    )
    .await;
    let elapsed = origin.elapsed();
    let complete = observed
        .iter()
        .filter(|o| o.ends_with_done() && o.token_times().len() == 50)
        .count();
    eprintln!("{complete} of {streams} streams complete in {elapsed:?}");
    assert_eq!(complete, streams);
}

#[tokio::test]
async fn version_answers_as_vllm_does_and_names_the_simulator() {
    let h = Harness::start(config()).await;
    let response = h.client.get(h.url("/version")).send().await.expect("sent");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let body: Value = response.json().await.expect("JSON");
    // vLLM's `{"version": VLLM_VERSION}`: one string field.
    assert_eq!(
        body,
        json!({ "version": format!("{}+llmbench-sim", env!("CARGO_PKG_VERSION")) })
    );
}

#[tokio::test]
async fn profiler_hooks_answer_200_with_an_empty_body_and_are_counted_in_order() {
    let h = Harness::start(config()).await;
    let completion = json!({"model": MODEL, "prompt": "a b c", "max_tokens": 2});
    let (status, _) = h.post("/v1/completions", &completion).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    for path in ["/start_profile", "/stop_profile"] {
        let response = h.client.post(h.url(path)).send().await.expect("sent");
        assert_eq!(response.status(), reqwest::StatusCode::OK, "{path}");
        assert!(response.bytes().await.expect("body").is_empty(), "{path}");
        if path == "/start_profile" {
            h.post("/v1/completions", &completion).await;
        }
    }
    // One request before the start, a second one inside the window.
    assert_eq!(
        h.sim.profiler_calls(),
        [
            ProfilerCall {
                hook: ProfilerHook::Start,
                requests_before: 1
            },
            ProfilerCall {
                hook: ProfilerHook::Stop,
                requests_before: 2
            },
        ]
    );
}

#[test]
fn builtin_counts_prompt_tokens_exactly_as_the_simulator_does() {
    let tokenizer = llmbench_text::tokenizer::Tokenizer::builtin();
    for text in [
        "",
        "one",
        "hello world",
        "  leading and trailing  ",
        "tabs\tand\nnewlines\r\n mixed   spaces",
        "unknown zyzzyva words count too",
        "ünïcödé wörds — and punctuation!",
    ] {
        assert_eq!(
            tokenizer.count(text).expect("count"),
            super::text_prompt_tokens(text),
            "{text:?}"
        );
    }
}

/// The body of a streamed response as the HTTP chunks it went out in (hyper writes one chunk per body frame),
/// read over a raw connection.
async fn raw_http_chunks(h: &Harness, path: &str, body: &Value) -> Vec<Vec<u8>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = h.sim.base_url().trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connects");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .expect("response read");
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&response[..head_end]).to_ascii_lowercase();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut rest = &response[head_end..];
    let mut chunks = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = usize::from_str_radix(
            std::str::from_utf8(&rest[..line_end]).expect("ASCII size"),
            16,
        )
        .expect("hex size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return chunks;
        }
        chunks.push(rest[..size].to_vec());
        rest = &rest[size + 2..];
    }
}

#[tokio::test]
async fn tokens_due_together_go_out_in_one_write_with_the_streams_end() {
    let h = Harness::start(config()).await;
    // No inter-token latency: every token is due at once, so the 64 token events, the usage event and `[DONE]`
    // are one body frame (about 15 KiB), not 66 writes.
    let chunks = raw_http_chunks(&h, "/v1/completions", &with_usage(completion(64))).await;
    assert_eq!(chunks.len(), 1, "{} frames", chunks.len());
    let text = String::from_utf8(chunks.concat()).expect("UTF-8");
    let events: Vec<&str> = text.split_terminator("\n\n").collect();
    assert_eq!(events.len(), 64 + 2);
    assert_eq!(
        events
            .iter()
            .filter(|e| e.contains(r#""text":" token""#))
            .count(),
        64
    );
    assert!(
        events[63].contains(r#""finish_reason":"length""#),
        "{}",
        events[63]
    );
    assert!(
        events[64].contains(r#""completion_tokens":64"#),
        "{}",
        events[64]
    );
    assert_eq!(events[65], "data: [DONE]");

    // A long answer still goes out in bounded frames, each ending on an event: other connections run between.
    let chunks = raw_http_chunks(&h, "/v1/completions", &with_usage(completion(1000))).await;
    assert!(chunks.len() >= 6, "{} frames for ~230 KiB", chunks.len());
    for chunk in &chunks {
        assert!(chunk.len() <= 33 * 1024, "a frame of {} bytes", chunk.len());
        assert!(chunk.ends_with(b"\n\n"));
    }
    let text = String::from_utf8(chunks.concat()).expect("UTF-8");
    assert_eq!(text.matches(r#""text":" token""#).count(), 1000);

    // Every token is counted as sent one by one.
    let metrics = h.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            &format!("vllm:generation_tokens_total{}", labels())
        ),
        1064.0
    );
}
