//! inference-perf profiles as they reach the server, through the binary: what the body carries and how long the
//! prompt is on the server's count, worked out by hand from inference-perf's source. Bodies only, never timings.

mod common;

use serde_json::Value;

use common::*;

/// One streamed completion chunk of 2 tokens, a usage chunk and `[DONE]`.
fn streamed_answer(request: &WireRequest) -> String {
    streamed_text(request, "a b", "length", 2)
}

#[test]
fn use_chat_template_sends_templated_prompts_of_exactly_the_asked_length_without_added_special_tokens()
 {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = chatml_tokenizer(dir.path());
    // Three requests of 12 input tokens: the templated text counts 12 without special tokens added.
    let profile = format!(
        "load:\n  type: constant\n  stages: [{{rate: 3, duration: 1}}]\napi:\n  type: completion\n  \
         streaming: true\nserver:\n  type: vllm\n  model_name: m\n  base_url: {url}\ndata:\n  type: random\n  \
         use_chat_template: true\n  input_distribution: {{min: 12, max: 12, mean: 12, std_dev: 0}}\n  \
         output_distribution: {{min: 2, max: 2, mean: 2, std_dev: 0}}\n"
    );
    let path = write(dir.path(), "profile.yaml", &profile);
    let output = run_against("inference-perf", &path, &url, &tokenizer, dir.path(), "r");
    succeeded(&output);
    let bodies: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("json"))
        .collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    for body in &bodies {
        // `CompletionAPIData.to_payload` with `add_special_tokens=False`.
        assert_eq!(body["add_special_tokens"], false, "{body}");
        let prompt = body["prompt"].as_str().expect("a prompt");
        // One user turn of ChatML with the generation prompt: <|im_start|> user <content> <|im_end|> <|im_start|>
        // assistant, i.e. 5 tokens of template and 7 words of content.
        let content = prompt
            .strip_prefix("<|im_start|>user\n")
            .and_then(|p| p.strip_suffix("<|im_end|>\n<|im_start|>assistant\n"))
            .unwrap_or_else(|| panic!("not one ChatML user turn: {prompt:?}"));
        assert_eq!(content.split_whitespace().count(), 7, "{prompt:?}");
    }
    let recorded: Vec<u64> = common::requests_jsonl(&dir.path().join("r/requests.jsonl"))
        .expect("records")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("record")["input_tokens"]
                .as_u64()
                .expect("n")
        })
        .collect();
    assert_eq!(recorded, [12, 12, 12]);

    // A tokenizer without a chat template: refused before anything is sent, saying what to pass.
    let before = seen.lock().expect("lock").len();
    let output = run_against("inference-perf", &path, &url, "builtin", dir.path(), "r2");
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("inference-perf's `use_chat_template: true` renders every prompt")
            && error.contains("has none")
            && error.contains("`use_chat_template: false`"),
        "{error}"
    );
    assert_eq!(seen.lock().expect("lock").len(), before);
}

#[test]
fn use_chat_template_wraps_each_trace_rows_prompt_at_the_rows_length() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = chatml_tokenizer(dir.path());
    // Three Azure rows: 8, 10 and 12 prompt tokens, 2, 3 and 4 answer tokens, 100 ms apart.
    let csv = write(
        dir.path(),
        "azure.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.000,8,2\n\
         2023-11-16 18:15:46.100,10,3\n2023-11-16 18:15:46.200,12,4\n",
    );
    let profile = |csv: &std::path::Path| {
        format!(
            "server:\n  type: vllm\n  model_name: m\n  base_url: {url}\napi:\n  type: completion\n  streaming: true\n\
             data:\n  type: random\n  use_chat_template: true\n  trace:\n    file: {csv}\n    \
             format: AzurePublicDataset\nload:\n  type: trace_replay\n  trace:\n    file: {csv}\n    \
             format: AzurePublicDataset\n  stages:\n    - rate: 1\n      duration: 1\n",
            csv = csv.display()
        )
    };
    let path = write(dir.path(), "profile.yaml", &profile(&csv));
    let output = run_against("inference-perf", &path, &url, &tokenizer, dir.path(), "r");
    succeeded(&output);
    let bodies: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("json"))
        .collect();
    // Each prompt one ChatML user turn (5 tokens of template) around the rest of the row's
    // length in words, asking the server to add no special tokens, for the row's answer length.
    let mut sent: Vec<(usize, u64)> = bodies
        .iter()
        .map(|body| {
            assert_eq!(body["add_special_tokens"], false, "{body}");
            let prompt = body["prompt"].as_str().expect("a prompt");
            let content = prompt
                .strip_prefix("<|im_start|>user\n")
                .and_then(|p| p.strip_suffix("<|im_end|>\n<|im_start|>assistant\n"))
                .unwrap_or_else(|| panic!("not one ChatML user turn: {prompt:?}"));
            (
                content.split_whitespace().count(),
                body["max_tokens"].as_u64().expect("max_tokens"),
            )
        })
        .collect();
    // (Arrival order at the server is not asserted: only what each request carried.)
    sent.sort();
    assert_eq!(sent, [(3, 2), (5, 3), (7, 4)]);
    let mut recorded: Vec<(u64, u64)> =
        common::requests_jsonl(&dir.path().join("r/requests.jsonl"))
            .expect("records")
            .lines()
            .map(|l| {
                let r = serde_json::from_str::<Value>(l).expect("record");
                (
                    r["id"].as_u64().expect("id"),
                    r["input_tokens"].as_u64().expect("n"),
                )
            })
            .collect();
    recorded.sort();
    let lengths: Vec<u64> = recorded.iter().map(|(_, n)| *n).collect();
    assert_eq!(lengths, [8, 10, 12]);

    // A row no longer than the template alone: refused before anything is sent, as upstream refuses the
    // trace's shortest.
    let short = write(
        dir.path(),
        "short.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.000,5,2\n",
    );
    let path = write(dir.path(), "short.yaml", &profile(&short));
    let before = seen.lock().expect("lock").len();
    let output = run_against("inference-perf", &path, &url, &tokenizer, dir.path(), "r2");
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("short.csv") && error.contains("does not exceed the chat template's own 5"),
        "{error}"
    );
    assert_eq!(seen.lock().expect("lock").len(), before);
}

/// `api.response_format` (structured output): every body carries it as `ResponseFormat.to_api_format` writes it,
/// after inference-perf's own fields (`openai_client.py` `process_request`).
#[test]
fn response_format_rides_in_every_body_as_inference_perf_sends_it() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = format!(
        "load:\n  type: constant\n  stages: [{{rate: 3, duration: 1}}]\napi:\n  type: completion\n  \
         streaming: true\n  response_format:\n    name: pick\n    json_schema:\n      type: object\n      \
         properties: {{a: {{enum: [x, z]}}}}\nserver:\n  type: vllm\n  model_name: m\n  base_url: {url}\n\
         data:\n  type: random\n  input_distribution: {{min: 12, max: 12, mean: 12, std_dev: 0}}\n  \
         output_distribution: {{min: 2, max: 2, mean: 2, std_dev: 0}}\n"
    );
    let path = write(dir.path(), "profile.yaml", &profile);
    let output = run_against("inference-perf", &path, &url, "builtin", dir.path(), "r");
    succeeded(&output);
    let bodies: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("json"))
        .collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    let expected = serde_json::json!({
        "type": "json_schema",
        "json_schema": {"name": "pick", "schema": {"type": "object", "properties": {"a": {"enum": ["x", "z"]}}}},
    });
    for body in &bodies {
        assert_eq!(body["response_format"], expected, "{body}");
        assert!(body["prompt"].is_string(), "{body}");
    }
}
