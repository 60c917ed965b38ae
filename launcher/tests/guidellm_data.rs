//! guidellm data files through the binary: each row of a local JSON/JSONL/CSV/text file becomes the request
//! guidellm's request handlers build from it (`backends/openai/request_handlers.py`), with the columns its
//! generative column mapper picks (`data/preprocessors/mappers.py`), rows in file order and read again from the
//! top when used up. What is sent is read off the wire by a bare server.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use common::*;

/// Exactly the tokens asked (so no answer reads as cut short), non-streamed, chat or completion by path.
fn exact_answer(request: &WireRequest) -> String {
    let asked = serde_json::from_slice::<Value>(&request.body)
        .ok()
        .and_then(|b| {
            b["max_tokens"]
                .as_u64()
                .or(b["max_completion_tokens"].as_u64())
        })
        .unwrap_or(2);
    let text = vec!["a"; asked as usize].join(" ");
    let choice = if request.line.contains("/chat/") {
        json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"})
    } else {
        json!({"index": 0, "text": text, "finish_reason": "length"})
    };
    let answer = json!({"id": "c", "model": "m", "choices": [choice],
        "usage": {"prompt_tokens": 8, "completion_tokens": asked, "total_tokens": 8 + asked}});
    ok_response("application/json", &answer.to_string())
}

/// Each kept POST's JSON body.
fn bodies(seen: &Arc<Mutex<Vec<WireRequest>>>) -> Vec<Value> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON body"))
        .collect()
}

/// A guidellm v0.7 scenario of `requests` synchronous requests over `data` (YAML of one `data` item), with
/// `extra` lines under `spec`.
fn scenario(format: &str, data: &str, requests: u64, extra: &str) -> String {
    format!(
        "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
         model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n    stream: false\n    request_format: {format}\n  data:\n    - {data}\n  \
         profile:\n    kind: synchronous\n  constraints:\n    - kind: max_requests\n      count: {requests}\n{extra}"
    )
}

/// Runs `profile` against `url` and returns what stdout and stderr said.
fn run(dir: &Path, profile: &str, url: &str) -> std::process::Output {
    let path = write(dir, "scenario.yaml", profile);
    llmbench()
        .args(["run", "--harness", "guidellm", "--profile"])
        .arg(&path)
        .args(["--endpoint", url, "--model", "m", "--tokenizer", "builtin"])
        .args([
            "--no-preflight",
            "--no-server-metrics",
            "--run-id",
            "r",
            "--output",
        ])
        .arg(dir)
        .output()
        .expect("runs")
}

#[test]
fn a_jsonl_file_sends_each_row_as_guidellm_builds_its_chat_request_in_file_order() {
    let (url, seen) = capturing_server(exact_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // `system` is a prefix column, `question` the text column (it comes first among the candidates in the file),
    // `output_tokens_count` each row's length; `id` is no column guidellm maps.
    let data = write(
        dir.path(),
        "rows.jsonl",
        "{\"id\": 1, \"system\": \"Be brief.\", \"question\": \"What is two and two?\", \"output_tokens_count\": 7}\n\
         {\"id\": 2, \"system\": \"Be kind.\", \"question\": \"Name a colour.\", \"output_tokens_count\": 3}\n\
         {\"id\": 3, \"system\": \"\", \"question\": \"Say hi.\", \"output_tokens_count\": 5}\n",
    );
    let profile = scenario(
        "/v1/chat/completions",
        &format!("{{kind: json_file, path: {}}}", data.display()),
        4,
        "",
    );
    let output = run(dir.path(), &profile, &url);
    succeeded(&output);
    let sent = bodies(&seen);
    assert_eq!(sent.len(), 4, "{sent:#?}");
    // Rows 1, 2, 3, then row 1 again; an empty prefix sends no system message.
    let expected = [
        (Some("Be brief."), "What is two and two?", 7),
        (Some("Be kind."), "Name a colour.", 3),
        (None, "Say hi.", 5),
        (Some("Be brief."), "What is two and two?", 7),
    ];
    for (body, (system, user, length)) in sent.iter().zip(expected) {
        let mut messages = Vec::new();
        if let Some(system) = system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": user}]}));
        assert_eq!(body["messages"], json!(messages), "{body:#}");
        assert_eq!(body["max_completion_tokens"], length, "{body:#}");
        assert_eq!(body["ignore_eos"], true, "{body:#}");
        assert_eq!(body["stop"], Value::Null, "{body:#}");
        assert!(body.as_object().is_some_and(|b| b.contains_key("stop")));
    }
}

/// The rows of the JSON Lines test above as a `parquet_file` (`tests/fixtures/parquet/rows.parquet`, written by
/// pyarrow; `load_dataset("parquet", data_files=path)` upstream): the same columns, the same requests.
#[test]
fn a_parquet_file_sends_the_same_requests_as_the_same_rows_in_json_lines() {
    let (url, seen) = capturing_server(exact_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/parquet/rows.parquet");
    let profile = scenario(
        "/v1/chat/completions",
        &format!("{{kind: parquet_file, path: {}}}", data.display()),
        3,
        "",
    );
    let output = run(dir.path(), &profile, &url);
    succeeded(&output);
    let sent = bodies(&seen);
    let asked: Vec<(Value, Value)> = sent
        .iter()
        .map(|b| (b["messages"].clone(), b["max_completion_tokens"].clone()))
        .collect();
    assert_eq!(
        asked,
        [
            (
                json!([{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "What is two and two?"}]}]),
                json!(7)
            ),
            (
                json!([{"role": "system", "content": "Be kind."},
                       {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}]),
                json!(3)
            ),
            (
                json!([{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}]),
                json!(5)
            ),
        ]
    );
}

#[test]
fn a_csv_file_without_lengths_sends_the_backends_max_tokens_without_ignore_eos() {
    let (url, seen) = capturing_server(exact_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(
        dir.path(),
        "rows.csv",
        "prefix,prompt\nYou are terse.,Count to three.\nYou are kind.,Describe rain.\n",
    );
    // The bare path form of `data`, the backend's `max_tokens`, extra body fields (`extras.body`) and query
    // parameters (`extras.params`, which httpx encodes into the URL).
    let profile = scenario("/v1/completions", &data.display().to_string(), 2, "").replace(
        "request_format:",
        "max_tokens: 6\n    extras: {body: {temperature: 0.0, top_k: 5}, params: {api-version: 2024-10 b, \
         debug: true, tag: [a, 'b&c'], ratio: 2.0}}\n    request_format:",
    );
    let output = run(dir.path(), &profile, &url);
    succeeded(&output);
    let sent = bodies(&seen);
    let prompts: Vec<&str> = sent.iter().filter_map(|b| b["prompt"].as_str()).collect();
    // Completions join the prefix and the text with a space.
    assert_eq!(
        prompts,
        [
            "You are terse. Count to three.",
            "You are kind. Describe rain."
        ]
    );
    // `urlencode` with quote_plus; a list repeats its name; True is `true`; 2.0 is written as Python writes it.
    let lines: Vec<String> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| r.line.clone())
        .collect();
    assert_eq!(
        lines,
        vec![
            "POST /v1/completions?api-version=2024-10+b&debug=true&tag=a&tag=b%26c&ratio=2.0 HTTP/1.1".to_owned();
            2
        ]
    );
    for body in &sent {
        assert_eq!(body["max_tokens"], 6, "{body:#}");
        assert!(body.get("ignore_eos").is_none(), "{body:#}");
        assert_eq!(
            (&body["temperature"], &body["top_k"]),
            (&json!(0.0), &json!(5)),
            "{body:#}"
        );
    }
}

#[test]
fn column_mappings_and_samples_pick_the_column_and_the_rows_sent() {
    let (url, seen) = capturing_server(exact_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(
        dir.path(),
        "rows.json",
        "[{\"prompt\": \"not this\", \"body\": \"first\"}, {\"prompt\": \"nor this\", \"body\": \"second\"}, \
         {\"prompt\": \"never\", \"body\": \"third\"}]",
    );
    // Only the first 2 rows (`samples`), read again from the top for the 3rd and 4th requests.
    let extra = "  data_loader:\n    samples: 2\n  data_column_mapper:\n    kind: generative_column_mapper\n    \
                 column_mappings:\n      text_column: body\n";
    let profile = scenario("/v1/completions", &data.display().to_string(), 4, extra);
    let output = run(dir.path(), &profile, &url);
    succeeded(&output);
    let prompts: Vec<String> = bodies(&seen)
        .iter()
        .filter_map(|b| b["prompt"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(prompts, ["first", "second", "first", "second"]);
}

#[test]
fn a_text_file_sends_each_line_with_its_line_break() {
    let (url, seen) = capturing_server(exact_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(dir.path(), "lines.txt", "first line\nsecond line");
    let profile = scenario(
        "/v1/completions",
        &format!("{{kind: text_file, path: {}}}", data.display()),
        2,
        "",
    );
    succeeded(&run(dir.path(), &profile, &url));
    let prompts: Vec<String> = bodies(&seen)
        .iter()
        .filter_map(|b| b["prompt"].as_str().map(str::to_owned))
        .collect();
    // Python's readlines keeps each line's break; the last line has none.
    assert_eq!(prompts, ["first line\n", "second line"]);
}

#[test]
fn data_guidellm_reads_otherwise_is_refused_before_anything_is_sent() {
    let (url, seen) = capturing_server(exact_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let mixed = write(
        dir.path(),
        "mixed.jsonl",
        "{\"prompt\": \"a\", \"output_tokens_count\": 4}\n{\"prompt\": \"b\"}\n",
    );
    let turns = write(
        dir.path(),
        "turns.jsonl",
        "{\"prompt_0\": \"a\", \"prompt_1\": \"b\"}\n",
    );
    let few = write(dir.path(), "few.jsonl", "{\"prompt\": \"a\"}\n");
    let cases: [(String, String, &str); 5] = [
        (
            format!("{{kind: csv_file, path: {}}}", mixed.display()),
            String::new(),
            "is not a csv_file",
        ),
        ("data.arrow".to_owned(), String::new(), "a .arrow data file"),
        (
            mixed.display().to_string(),
            String::new(),
            "lacks an output token count, unlike line 1",
        ),
        (
            turns.display().to_string(),
            String::new(),
            "columns prompt_0, prompt_1",
        ),
        (
            few.display().to_string(),
            "  data_loader:\n    samples: 3\n".to_owned(),
            "3 samples asked",
        ),
    ];
    for (data, extra, needle) in cases {
        let profile = scenario("/v1/completions", &data, 2, &extra);
        let output = run(dir.path(), &profile, &url);
        assert!(!output.status.success(), "{data}: ran");
        let said = stderr(&output);
        assert!(said.contains(needle), "{data}: {said}");
    }
    assert!(bodies(&seen).is_empty(), "a refused run sent requests");
}

/// guidellm's think time (`delay`): a conversation's next turn may go only that long after its answer, and a free
/// stream meanwhile starts the next conversation (`_get_next_ready_node`). One stream, two-turn conversations,
/// 4 requests: without a delay they are turns 0, 1, 0, 1 of two conversations; with a 30-second one, the first
/// turns of four.
#[test]
fn think_time_lets_a_stream_start_new_conversations_while_others_think() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let turns_sent = |id: &str, delay: &str| -> Vec<(u64, u64)> {
        let profile = format!(
            "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
             model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n    request_format: /v1/chat/completions\n  \
             data:\n    - kind: synthetic_text\n      prompt_tokens: 16\n      output_tokens: 2\n      turns: 2\n\
             {delay}  profile:\n    kind: synchronous\n  constraints:\n    - kind: max_requests\n      count: 4\n"
        );
        let path = write(dir.path(), &format!("{id}.yaml"), &profile);
        let output = llmbench()
            .args(["run", "--harness", "guidellm", "--profile"])
            .arg(&path)
            .args([
                "--endpoint",
                &sim.url,
                "--model",
                "m",
                "--tokenizer",
                "builtin",
            ])
            .args(["--no-server-metrics", "--run-id", id, "--output"])
            .arg(dir.path())
            .output()
            .expect("runs");
        succeeded(&output);
        let text = common::requests_jsonl(&dir.path().join(id).join("requests.jsonl"))
            .expect("requests.jsonl");
        let mut records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("record"))
            .collect();
        records.sort_by_key(|r| r["sent_ns"].as_u64());
        records
            .iter()
            .map(|r| {
                (
                    r["conversation"]["id"].as_u64().expect("conversation"),
                    r["conversation"]["turn"].as_u64().expect("turn"),
                )
            })
            .collect()
    };
    assert_eq!(turns_sent("eager", ""), [(0, 0), (0, 1), (1, 0), (1, 1)]);
    assert_eq!(
        turns_sent("thinking", "      delay: 30\n"),
        [(0, 0), (1, 0), (2, 0), (3, 0)]
    );
}
