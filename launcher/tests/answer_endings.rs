//! How each answer ended, through the binary: answers cut short at the server's context end counted apart from
//! successes (the embedded simulator's `--stop-at-context-end` and the real llama-server, which both stop there
//! instead of refusing), reasoning tokens and the time to the first answer token past them, and the request id and
//! W3C `traceparent` every request carries on the wire and in its record. Counts and classes only, never timings.

mod common;

use std::collections::BTreeSet;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use common::*;

/// vLLM's random dataset: `prompts` completions of `input` tokens asking `output` tokens under `ignore_eos`.
fn vllm_random(input: u32, output: u32, prompts: u32, chat: bool) -> String {
    let chat = if chat {
        "backend: openai-chat\nendpoint: /v1/chat/completions\n"
    } else {
        ""
    };
    format!(
        "dataset-name: random\nrandom-input-len: {input}\nrandom-output-len: {output}\nnum-prompts: {prompts}\n\
         max-concurrency: 2\nignore-eos: none\n{chat}"
    )
}

fn run(dir: &Path, profile: &str, endpoint: &str, model: &str, extra: &[&str]) -> Output {
    let path = write(dir, "profile.yaml", profile);
    llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&path)
        .args(["--endpoint", endpoint, "--model", model, "--run-id", "r"])
        .arg("--output")
        .arg(dir)
        .args(extra)
        .output()
        .expect("runs")
}

fn records(dir: &Path) -> Vec<Value> {
    common::requests_jsonl(&dir.join("r/requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// Every answer of a run whose prompt plus max_tokens passes the context: all cut short, none a success.
fn assert_all_cut_short(output: &Output, dir: &Path, asked: u64) {
    // Nothing succeeded: the exit code says so, and the reason is the truncation, not an error.
    assert_eq!(output.status.code(), Some(3), "{}", stderr(output));
    let error = stderr(output);
    assert!(
        error.contains("(every answer was cut short: ")
            && error.contains(&format!(
                " of the {asked} tokens asked, finish_reason length)"
            )),
        "{error}"
    );
    let text = stdout(output);
    let cut = text
        .lines()
        .find(|l| l.starts_with("cut short "))
        .unwrap_or_else(|| panic!("no `cut short` line: {text}"));
    assert!(
        cut.contains("4 of 4 answers were cut short: ") && cut.contains("(finish_reason length 4)"),
        "{cut}"
    );
    let records = records(dir);
    assert_eq!(records.len(), 4);
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        assert_eq!(r["finish_reason"], "length", "{r}");
        let got = r["usage"]["completion_tokens"].as_u64().expect("usage");
        assert!(got < asked, "{r}");
    }
    let summary = json(&dir.join("r/summary.json"));
    assert_eq!(
        summary["requests"],
        serde_json::json!({"total": 4, "succeeded": 0, "failed": 0, "truncated": 4}),
        "{summary:#}"
    );
    assert_eq!(summary["finish_reasons"]["length"], 4, "{summary:#}");
}

#[test]
fn answers_the_simulator_cuts_at_its_context_end_are_counted_apart_from_successes() {
    // 150 prompt tokens + 100 asked > 200 of context: each answer stops after 50 tokens, as llama.cpp stops.
    let sim = SimProcess::start(&["--max-model-len", "200", "--stop-at-context-end"]);
    let dir = tempfile::tempdir().expect("tempdir");
    // The pre-flight sees every request pass the context the server lists and stops the run before its clock;
    // past it (--no-preflight), the answers come back cut short.
    let refused = run(
        dir.path(),
        &vllm_random(150, 100, 4, false),
        &sim.url,
        "llmbench-sim",
        &["--tokenizer", "builtin"],
    );
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("than the server's context of 200"),
        "{}",
        stderr(&refused)
    );
    let output = run(
        dir.path(),
        &vllm_random(150, 100, 4, false),
        &sim.url,
        "llmbench-sim",
        &["--tokenizer", "builtin", "--no-preflight"],
    );
    assert_all_cut_short(&output, dir.path(), 100);
    for r in records(dir.path()) {
        assert_eq!(r["usage"]["completion_tokens"], 50, "{r}");
    }
}

#[test]
fn answers_llama_server_cuts_at_its_context_end_are_counted_apart_from_successes() {
    // -c 4096 over 4 slots: 1024 tokens a request; 900 prompt tokens + 400 asked pass it.
    let Some(llama) = LlamaServer::start(&["-c", "4096", "-np", "4"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = llama.tokenizer.to_string_lossy().into_owned();
    // llama.cpp lists its context per slot (`meta.n_ctx`): the pre-flight refuses a run none of whose requests fit.
    let refused = run(
        dir.path(),
        &vllm_random(900, 400, 4, false),
        &llama.url,
        &llama.model,
        &["--tokenizer", &tokenizer],
    );
    assert_eq!(refused.status.code(), Some(6), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("than the server's context of 1024"),
        "{}",
        stderr(&refused)
    );
    let output = run(
        dir.path(),
        &vllm_random(900, 400, 4, false),
        &llama.url,
        &llama.model,
        &["--tokenizer", &tokenizer, "--no-preflight"],
    );
    assert_all_cut_short(&output, dir.path(), 400);
    for r in records(dir.path()) {
        // The answer fills the slot's context: what the prompt left of 1024 tokens.
        let prompt = r["usage"]["prompt_tokens"].as_u64().expect("prompt tokens");
        let answer = r["usage"]["completion_tokens"].as_u64().expect("tokens");
        assert_eq!(prompt, 900, "{r}");
        assert!(answer <= 1024 - prompt, "{r}");
    }
}

#[test]
fn reasoning_tokens_are_counted_apart_and_ttfo_is_measured_past_them() {
    let sim = SimProcess::start(&["--reasoning-tokens", "3"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run(
        dir.path(),
        &vllm_random(50, 10, 6, true),
        &sim.url,
        "llmbench-sim",
        &["--tokenizer", "builtin"],
    );
    succeeded(&output);
    for r in records(dir.path()) {
        let kinds: Vec<&str> = r["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .filter_map(|c| c["kind"].as_str())
            .filter(|k| *k == "reasoning" || *k == "content")
            .collect();
        // The first three tokens reason, the other seven answer; completion_tokens counts all ten.
        assert_eq!(kinds[..3], ["reasoning"; 3], "{r}");
        assert_eq!(kinds[3..], ["content"; 7], "{r}");
        assert_eq!(r["usage"]["completion_tokens"], 10, "{r}");
    }
    let summary = json(&dir.path().join("r/summary.json"));
    assert_eq!(summary["reasoning"]["requests"], 6, "{summary:#}");
    assert_eq!(summary["reasoning"]["tokens"]["mean"], 3.0, "{summary:#}");
    let latency = &summary["latency_ms"];
    assert_eq!(latency["ttfo"]["count"], 6, "{latency:#}");
    // The first answer token comes after the first token, whatever the machine's load.
    assert!(
        latency["ttfo"]["min"].as_f64() >= latency["ttft"]["min"].as_f64(),
        "{latency:#}"
    );
}

#[test]
fn without_reasoning_there_is_no_ttfo() {
    let sim = SimProcess::start(&[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run(
        dir.path(),
        &vllm_random(50, 10, 4, true),
        &sim.url,
        "llmbench-sim",
        &["--tokenizer", "builtin"],
    );
    succeeded(&output);
    let summary = json(&dir.path().join("r/summary.json"));
    assert!(summary["latency_ms"].get("ttfo").is_none(), "{summary:#}");
}

/// The ids one request carried on the wire: (`x-request-id`, `traceparent`).
type WireIds = (Option<String>, Option<String>);

/// A bare server answering every request with one completion at once (non-streamed), keeping each POST's ids.
fn capturing_server() -> (String, Arc<Mutex<Vec<WireIds>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&kept);
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = BufReader::new(stream);
                loop {
                    let Some(request) = read_whole_request(&mut reader) else {
                        return;
                    };
                    // Only the measured requests: the server-metrics scrapes (GET /metrics) carry no ids.
                    if request.line.starts_with("POST ") {
                        let id = request.header("x-request-id").map(str::to_owned);
                        let trace = request.header("traceparent").map(str::to_owned);
                        seen.lock().expect("lock").push((id, trace));
                    }
                    let answer = r#"{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"a b","finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn every_request_carries_its_own_request_id_and_traceparent_on_the_wire_and_in_its_record() {
    let (url, seen) = capturing_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = "api:\n  type: completion\n  streaming: false\ndata:\n  type: random\n  input_distribution:\n    \
                   min: 8\n    max: 8\n    mean: 8\n    std_dev: 0\n    total_count: 6\n  output_distribution:\n    \
                   min: 2\n    max: 2\n    mean: 2\n    std_dev: 0\n    total_count: 6\nload:\n  type: constant\n  \
                   stages:\n    - rate: 6\n      duration: 1\nserver:\n  type: vllm\n  base_url: \
                   REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n  model_name: \
                   REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n  ignore_eos: true\n";
    let path = write(dir.path(), "ip.yaml", profile);
    let output = llmbench()
        .args(["run", "--harness", "inference-perf", "--profile"])
        .arg(&path)
        .args(["--endpoint", &url, "--model", "m", "--tokenizer", "builtin"])
        .args(["--no-preflight", "--run-id", "r", "--output"])
        .arg(dir.path())
        .output()
        .expect("runs");
    succeeded(&output);
    let on_wire: BTreeSet<(String, String)> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|(id, trace)| {
            (
                id.clone().expect("an x-request-id on every request"),
                trace.clone().expect("a traceparent on every request"),
            )
        })
        .collect();
    let recorded: BTreeSet<(String, String)> = records(dir.path())
        .iter()
        .map(|r| {
            (
                r["request_id"].as_str().expect("request_id").to_owned(),
                r["traceparent"].as_str().expect("traceparent").to_owned(),
            )
        })
        .collect();
    assert_eq!(recorded.len(), 6, "{recorded:?}");
    // What each record says it sent is what the server saw, and no two requests share an id or a trace.
    assert_eq!(on_wire, recorded);
    let traces: BTreeSet<&str> = recorded.iter().map(|(_, t)| &t[3..35]).collect();
    assert_eq!(traces.len(), 6);
    for (id, trace) in &recorded {
        assert!(id.starts_with("llmbench-r-"), "{id}");
        let parts: Vec<&str> = trace.split('-').collect();
        assert_eq!(parts.len(), 4, "{trace}");
        assert_eq!((parts[0], parts[3]), ("00", "01"), "{trace}");
        assert!(parts[1].len() == 32 && parts[2].len() == 16, "{trace}");
        assert!(
            parts[1..3]
                .iter()
                .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit())),
            "{trace}"
        );
    }
}
