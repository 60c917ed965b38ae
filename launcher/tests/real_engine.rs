//! llmbench against a real engine: llama.cpp's `llama-server` on the CPU with a tiny random-weight llama model whose
//! tokenizer is a real byte-level BPE that adds a BOS token (`tests/tools/make-tiny-model.py`; `make test` builds
//! the server and the model and points `LLMBENCH_LLAMA_*` at them; `cargo test` alone skips these tests).
//!
//! What a simulator cannot show: the token counts of a real tokenizer and a real chat template, a real prompt cache.
//! The tests assert counts and classes, never latencies.

mod common;

use std::path::Path;

use common::{LlamaServer, json, llmbench, run_profile, stderr, succeeded, write};
use serde_json::Value;

fn records(run: &Path) -> Vec<Value> {
    common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

fn count(record: &Value, key: &str) -> u64 {
    record[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {record}"))
}

fn usage(record: &Value, key: &str) -> u64 {
    record["usage"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.{key} in {record}"))
}

/// `llmbench run` against the server with its model and tokenizer, `extra` after.
fn run(
    dir: &Path,
    server: &LlamaServer,
    profile: &str,
    run_id: &str,
    extra: &[&str],
) -> Vec<Value> {
    let tokenizer = server.tokenizer.to_str().expect("utf-8 path");
    let mut args = vec![
        "--endpoint",
        &server.url,
        "--model",
        &server.model,
        "--tokenizer",
        tokenizer,
    ];
    args.extend(extra);
    let output = run_profile(dir, "inference-perf", profile, run_id, &args);
    succeeded(&output);
    let records = records(&dir.join(run_id));
    assert!(!records.is_empty());
    records
}

#[test]
fn completions_prompts_count_as_the_server_counts_them_and_answers_run_to_max_tokens() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // sanity_random: completions, ignore_eos, prompts of 256-512 tokens, answers of 10-100.
    let records = run(
        dir.path(),
        &server,
        "sanity_random",
        "completions",
        &["--rate", "4", "--duration", "3s"],
    );
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        // inference-perf counts the BOS the server adds in the prompt's length, as llmbench does: equal counts.
        assert_eq!(usage(r, "prompt_tokens"), count(r, "input_tokens"), "{r}");
        // ignore_eos: the server generates exactly what was asked.
        assert_eq!(usage(r, "completion_tokens"), count(r, "max_tokens"), "{r}");
    }
}

#[test]
fn chat_prompts_differ_from_the_servers_count_by_the_chat_template_alone() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let records = run(
        dir.path(),
        &server,
        "sanity_random",
        "chat",
        &[
            "--override",
            "api.type=chat",
            "--rate",
            "4",
            "--duration",
            "2s",
        ],
    );
    // The template wraps the one user message the same way whatever it says: a constant number of tokens more.
    let overheads: Vec<i64> = records
        .iter()
        .map(|r| usage(r, "prompt_tokens") as i64 - count(r, "input_tokens") as i64)
        .collect();
    assert!(overheads[0] > 0, "{overheads:?}");
    assert!(
        overheads.iter().all(|o| *o == overheads[0]),
        "{overheads:?}"
    );
}

#[test]
fn a_shared_prefix_is_served_from_the_engines_prompt_cache() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "shared.yaml",
        "api: {type: completion, streaming: true}\n\
         server: {type: vllm, ignore_eos: true, base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, \
         model_name: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL}\n\
         data:\n  type: shared_prefix\n  shared_prefix: {num_groups: 2, num_prompts_per_group: 8, \
         system_prompt_len: 512, question_len: 32, output_len: 8}\n\
         load: {type: constant, stages: [{rate: 4, duration: 4}]}\n",
    );
    let records = run(
        dir.path(),
        &server,
        profile.to_str().expect("utf-8"),
        "shared",
        &[],
    );
    let cached: u64 = records
        .iter()
        .map(|r| r["usage"]["cached_tokens"].as_u64().unwrap_or(0))
        .sum();
    // Each group's 512-token prefix is computed once per slot and found again by the requests after it.
    assert!(cached >= 512, "{cached} cached tokens");
    let summary = json(&dir.path().join("shared/summary.json"));
    let hit_rate = summary["prefix_cache"]["hit_rate"]
        .as_f64()
        .unwrap_or_else(|| panic!("no prefix_cache in {summary}"));
    assert!(hit_rate > 0.0, "{hit_rate}");
}

/// The content chunks a record holds.
fn content_chunks(record: &Value) -> u64 {
    record["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .filter(|c| c["kind"] == "content")
        .count() as u64
}

#[test]
fn anthropic_messages_from_llama_server_read_input_from_message_start_and_output_from_message_delta()
 {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // The bundled profile: inference-perf's mock prompts over `api.type: anthropic_messages`, 30 tokens asked.
    let records = run(
        dir.path(),
        &server,
        "sanity_anthropic_messages",
        "messages",
        &["--rate", "4", "--duration", "2s"],
    );
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        // The chat template wraps the prompt: the server counts more than the 10 tokens of the prompt itself. In
        // Anthropic's usage `input_tokens` leaves out what was read from the prompt cache
        // (`cache_read_input_tokens`, our `cached_tokens`): llama.cpp serves the mock prompts' shared template from
        // its cache after the first request, and inference-perf reports `input_tokens` alone, as llmbench does.
        // Under load llama.cpp sometimes sends `message_start` with `input_tokens: 0` and no cache read (the whole
        // answer then arrives in one read): the record keeps the server's 0, as inference-perf does.
        let cached = r["usage"]["cached_tokens"].as_u64().unwrap_or(0);
        let told = usage(r, "prompt_tokens") + cached;
        assert!(told == 0 || told > count(r, "input_tokens"), "{r}");
        let answered = usage(r, "completion_tokens");
        assert!((1..=30).contains(&answered), "{r}");
        // One content_block_delta per token, less any that carried no text yet (part of a character).
        assert!((1..=answered).contains(&content_chunks(r)), "{r}");
        let reason = r["finish_reason"].as_str().expect("a stop reason");
        // stop_reason max_tokens is length; end_turn (the model's EOS, which may fall on the last token) is stop.
        assert!(
            reason == "stop" || (reason == "length" && answered == 30),
            "{r}"
        );
    }
    assert!(
        records
            .iter()
            .any(|r| usage(r, "prompt_tokens") > count(r, "input_tokens")),
        "no request's message_start counted the templated prompt"
    );
    let run_meta = json(&dir.path().join("messages/run.json"));
    assert_eq!(run_meta["api"], "messages");
    let summary = json(&dir.path().join("messages/summary.json"));
    assert_eq!(
        summary["latency_ms"]["ttft"]["count"].as_u64(),
        Some(records.len() as u64)
    );
}

#[test]
fn responses_from_llama_server_are_timed_by_their_text_deltas_with_usage_from_response_completed() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = server.tokenizer.to_str().expect("utf-8 path");
    // The bundled profile: guidellm's Responses requests, ~50 tokens in and out, exactly as many out as asked.
    let output = run_profile(
        dir.path(),
        "guidellm",
        "sanity_responses",
        "responses",
        &[
            "--endpoint",
            &server.url,
            "--model",
            &server.model,
            "--tokenizer",
            tokenizer,
            "--rate",
            "4",
            "--duration",
            "2s",
        ],
    );
    succeeded(&output);
    let records = records(&dir.path().join("responses"));
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        // The chat template wraps the prompt; the answer is as long as asked (ignore_eos).
        assert!(usage(r, "prompt_tokens") > count(r, "input_tokens"), "{r}");
        assert_eq!(usage(r, "completion_tokens"), count(r, "max_tokens"), "{r}");
        assert!(
            (1..=usage(r, "completion_tokens")).contains(&content_chunks(r)),
            "{r}"
        );
    }
    let summary = json(&dir.path().join("responses/summary.json"));
    assert_eq!(
        summary["latency_ms"]["ttft"]["count"].as_u64(),
        Some(records.len() as u64)
    );
}

/// inference-perf `api.response_format` against llama.cpp's grammar-constrained sampling: the random-weight model,
/// which otherwise talks until `max_tokens`, answers with the one small JSON object the schema allows and stops.
#[test]
fn structured_output_from_llama_server_stops_at_the_end_of_the_schemas_object() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "structured.yaml",
        &format!(
            "load:\n  type: constant\n  stages: [{{rate: 3, duration: 1}}]\napi:\n  type: chat\n  streaming: true\n  \
             response_format:\n    name: pick\n    json_schema:\n      type: object\n      \
             properties: {{a: {{enum: [x, z]}}}}\n      required: [a]\n      additionalProperties: false\n\
             server:\n  type: vllm\n  model_name: {}\n  base_url: {}\n  ignore_eos: false\n\
             data:\n  type: random\n  input_distribution: {{min: 16, max: 16, mean: 16, std_dev: 0}}\n  \
             output_distribution: {{min: 200, max: 200, mean: 200, std_dev: 0}}\n",
            server.model, server.url
        ),
    );
    let records = run(
        dir.path(),
        &server,
        profile.to_str().expect("utf-8 path"),
        "structured",
        &[],
    );
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        // `{"a": "x"}` with at most the grammar's bounded whitespace: far fewer tokens than asked, ended by the
        // grammar (EOS), not by the length limit.
        assert_eq!(r["finish_reason"], "stop", "{r}");
        let produced = usage(r, "completion_tokens");
        assert!((5..200).contains(&produced), "{r}");
    }
}

/// The bundled vllm-benchmark profile `profile` against `server`, its records.
fn vllm_pooling_run(dir: &Path, server: &LlamaServer, profile: &str) -> Vec<Value> {
    let tokenizer = server.tokenizer.to_str().expect("utf-8 path");
    let output = run_profile(
        dir,
        "vllm-benchmark",
        profile,
        profile,
        &[
            "--endpoint",
            &server.url,
            "--model",
            &server.model,
            "--tokenizer",
            tokenizer,
        ],
    );
    succeeded(&output);
    let records = records(&dir.join(profile));
    assert!(!records.is_empty());
    let summary = json(&dir.join(profile).join("summary.json"));
    for metric in ["ttft", "tpot", "itl"] {
        assert!(summary["latency_ms"][metric].is_null(), "{summary:#}");
    }
    assert!(
        summary["throughput"]["inputs_per_s"].as_f64().is_some(),
        "{summary:#}"
    );
    records
}

#[test]
fn embeddings_from_llama_server_count_every_input_of_a_batch_as_the_server_counts_it() {
    let Some(server) = LlamaServer::start(&[
        "-c",
        "4096",
        "-np",
        "2",
        "--embeddings",
        "--pooling",
        "mean",
    ]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // 40 prompts of 64 tokens, 4 to a request: vLLM's random prompt leaves room for the BOS the server adds, so
    // the server counts 64 tokens an input, as the request was built.
    let records = vllm_pooling_run(dir.path(), &server, "sanity_embeddings");
    assert_eq!(records.len(), 10);
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        assert_eq!(
            (count(r, "inputs"), r["streaming"].as_bool()),
            (4, Some(false)),
            "{r}"
        );
        assert_eq!(usage(r, "prompt_tokens"), 4 * 64, "{r}");
        assert_eq!(usage(r, "prompt_tokens"), count(r, "input_tokens"), "{r}");
        assert_eq!(usage(r, "completion_tokens"), 0, "{r}");
    }
}

#[test]
fn rerank_from_llama_server_reads_the_query_beside_every_document() {
    // `--reranking` wants a model with a rank head; llama.cpp b11434 answers with the tiny model anyway (it warns
    // that the model's pooling type is not rank): the scores mean nothing, the token counts are real, and the
    // counts are what a benchmark reads.
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2", "--reranking"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // Batches of 5 prompts of 32 tokens (31 and the BOS vLLM leaves room for): a query and 4 documents.
    let records = vllm_pooling_run(dir.path(), &server, "sanity_rerank");
    assert_eq!(records.len(), 8);
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        assert_eq!(count(r, "inputs"), 4, "{r}");
        // Each document is read with the query: at least 31 + 31 tokens a pair, more than the batch as built.
        let prompt = usage(r, "prompt_tokens");
        assert!(prompt >= 4 * 62 && prompt > count(r, "input_tokens"), "{r}");
    }
}

#[test]
fn images_sent_to_a_server_without_a_vision_projector_stop_the_run_at_the_pre_flight() {
    // llama-server without --mmproj answers a chat with an image_url part 500 "image input is not supported -
    // hint: if this is unexpected, you may need to provide the mmproj" (checked with curl on the tiny model); the
    // pre-flight's test request carries one image when the run's requests do, so the run stops before the clock.
    let Some(server) = LlamaServer::start(&["-c", "512"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "mm.yaml",
        "backend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: random-mm\nrandom-input-len: 8\n\
         random-output-len: 2\nnum-prompts: 2\nrandom-mm-bucket-config: '{(32, 32, 1): 1}'\n",
    );
    let tokenizer = server.tokenizer.to_str().expect("utf-8 path");
    let output = run_profile(
        dir.path(),
        "vllm-benchmark",
        &profile,
        "mm",
        &[
            "--endpoint",
            &server.url,
            "--model",
            &server.model,
            "--tokenizer",
            tokenizer,
        ],
    );
    let err = common::stderr(&output);
    assert_eq!(
        output.status.code(),
        Some(6),
        "the pre-flight's exit code: {err}"
    );
    for needle in [
        "the server refused a test request with one 28×28 image",
        "image input is not supported",
        "llama.cpp needs its --mmproj projector",
    ] {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(
        !dir.path().join("mm").join("requests.bin").exists(),
        "nothing was timed"
    );
}

/// llama.cpp's server applies LoRA adapters by its own `lora` field, never by the request's model, and lists none
/// in `/v1/models`: a run that sends to adapters stops before the clock, naming what the server lists.
#[test]
fn lora_adapters_llama_server_does_not_list_stop_the_run_before_the_clock() {
    let Some(server) = LlamaServer::start(&["-c", "2048"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "lora.yaml",
        &format!(
            "model: {}\ndataset-name: random\nrandom-input-len: 8\nrandom-output-len: 2\nnum-prompts: 4\n\
             lora-modules: [sql-lora]\nlora-assignment: round-robin\n",
            server.model
        ),
    );
    let output = llmbench()
        .args(["run", "--harness", "vllm-benchmark", "--profile"])
        .arg(&profile)
        .args(["--endpoint", &server.url, "--tokenizer"])
        .arg(&server.tokenizer)
        .args(["--run-id", "lora", "--output"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("does not serve the LoRA adapter `sql-lora`"),
        "{err}"
    );
    assert!(err.contains(&format!("lists {}", server.model)), "{err}");
    assert!(!dir.path().join("lora/requests.bin").exists());
}

/// An AIPerf flag profile (`flags`, after the server's model and URL) run against `server`, its records.
fn aiperf_run(dir: &Path, server: &LlamaServer, run_id: &str, flags: &str) -> Vec<Value> {
    let profile = write(
        dir,
        &format!("{run_id}.yaml"),
        &format!("model: {}\nurl: {}\n{flags}", server.model, server.url),
    );
    let tokenizer = server.tokenizer.to_str().expect("utf-8 path");
    let output = run_profile(
        dir,
        "aiperf",
        &profile,
        run_id,
        &["--tokenizer", tokenizer, "--no-server-metrics"],
    );
    succeeded(&output);
    records(&dir.join(run_id))
}

#[test]
fn aiperf_hf_tei_rankings_against_llama_servers_tei_rerank_answer_every_passage() {
    // llama.cpp answers `/rerank` with `{query, texts}` in TEI's shape (a bare list of `{index, score}`, no usage),
    // what AIPerf's `hf_tei_rankings` sends and parses.
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2", "--reranking"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let records = aiperf_run(
        dir.path(),
        &server,
        "tei",
        "endpoint-type: hf_tei_rankings\nrandom-seed: 7\nrequest-count: 3\nrankings-passages-mean: 3\n\
         rankings-passages-stddev: 2\nrankings-query-prompt-token-mean: 8\nrankings-passages-prompt-token-mean: 16\n",
    );
    // AIPerf's passage counts for seed 7 (mean 3, stddev 2): 2, 6, 4.
    let passages: Vec<u64> = records.iter().map(|r| count(r, "inputs")).collect();
    assert_eq!(passages, [2, 6, 4], "{records:?}");
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        assert!(r["error"].is_null(), "{r}");
    }
}

#[test]
fn aiperf_hf_tei_rankings_from_a_single_turn_file_against_llama_servers_tei_rerank() {
    // Each line's texts named `query`/`queries` and `passages` (AIPerf 0.13 `format_payload`): the first query, every
    // passage in order; the lines in file order, wrapping, one request at a time.
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2", "--reranking"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(
        dir.path(),
        "r.jsonl",
        "{\"texts\": [{\"name\": \"query\", \"contents\": [\"what is a cat\"]}, {\"name\": \"passages\", \
         \"contents\": [\"a cat is a small animal\", \"stocks fell today\"]}]}\n\
         {\"texts\": [{\"name\": \"queries\", \"contents\": [\"rain\", \"snow\"]}, {\"name\": \"passages\", \
         \"contents\": [\"it rained all day\", \"a dry desert\", \"clouds and showers\"]}]}\n",
    );
    let records = aiperf_run(
        dir.path(),
        &server,
        "tei-file",
        &format!(
            "endpoint-type: hf_tei_rankings\ninput-file: {}\ncustom-dataset-type: single_turn\nrequest-count: 3\n",
            data.display()
        ),
    );
    let passages: Vec<u64> = records.iter().map(|r| count(r, "inputs")).collect();
    assert_eq!(passages, [2, 3, 2], "{records:?}");
    for r in &records {
        assert_eq!(r["http_status"], 200, "{r}");
        assert!(r["error"].is_null(), "{r}");
    }
}

#[test]
fn aiperf_user_centric_turns_carry_each_users_history_into_llama_servers_prompt() {
    let Some(server) = LlamaServer::start(&["-c", "4096", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // Two users, 2-turn conversations, turns 2 / 10 = 200 ms apart: every second turn sends the first turn and
    // the server's own answer before its prompt.
    let records = aiperf_run(
        dir.path(),
        &server,
        "users",
        "endpoint-type: chat\nuser-centric-rate: 10\nnum-users: 2\nconversation-turn-mean: 2\nisl: 12\nosl: 4\n\
         extra-inputs: ignore_eos:true\nrequest-count: 6\n",
    );
    assert_eq!(records.len(), 6);
    let prompt_of = |session: u64, turn: u64| {
        records
            .iter()
            .find(|r| r["conversation"]["id"] == session && r["conversation"]["turn"] == turn)
            .map(|r| usage(r, "prompt_tokens"))
    };
    let mut followed = 0;
    for r in records.iter().filter(|r| r["conversation"]["turn"] == 1) {
        assert_eq!(r["http_status"], 200, "{r}");
        let session = r["conversation"]["id"].as_u64().expect("session");
        if let Some(first) = prompt_of(session, 0) {
            // The first turn, its 4-token answer and the template's turn markers come before this prompt.
            assert!(usage(r, "prompt_tokens") > first + 4, "{records:?}");
            followed += 1;
        }
    }
    assert!(followed >= 1, "{records:?}");
}

#[test]
fn aiperf_request_cancellation_hangs_up_on_llama_server_which_serves_the_next_requests_in_full() {
    // One slot: a request llama.cpp kept generating for after the client hung up would hold it. AIPerf's
    // `"7:timing.request.cancellation"` draws cancel the 2nd, 3rd, 5th, 6th and 9th of ten credits at 50 %.
    let Some(server) = LlamaServer::start(&["-c", "2048", "-np", "1"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut records = aiperf_run(
        dir.path(),
        &server,
        "cancel",
        "endpoint-type: chat\nstreaming: true\nrandom-seed: 7\nrequest-count: 10\nconcurrency: 1\nisl: 12\n\
         osl: 48\nextra-inputs: ignore_eos:true\nrequest-cancellation-rate: 50\nrequest-cancellation-delay: 0\n",
    );
    records.sort_by_key(|r| r["scheduled_ns"].as_u64());
    let classes: Vec<&str> = records
        .iter()
        .map(|r| r["error"]["class"].as_str().unwrap_or("ok"))
        .collect();
    let (ok, cut) = ("ok", "client_cancelled");
    assert_eq!(
        classes,
        [ok, cut, cut, ok, cut, cut, ok, ok, cut, ok],
        "{records:?}"
    );
    for r in records.iter().filter(|r| r["error"].is_null()) {
        assert_eq!(r["http_status"], 200, "{r}");
        assert_eq!(usage(r, "completion_tokens"), 48, "{r}");
    }
}

#[test]
fn aiperf_prefill_slots_are_released_at_llama_servers_first_streamed_token() {
    // A prefill slot frees at the request's first content token, which only the engine's own stream says: with
    // one prefill slot and two session slots, no request goes out before the one sent before it had its first
    // token from llama.cpp, and every request still gets its whole answer.
    let Some(server) = LlamaServer::start(&["-c", "2048", "-np", "2"]) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut records = aiperf_run(
        dir.path(),
        &server,
        "prefill",
        "endpoint-type: chat\nstreaming: true\nrequest-count: 6\nconcurrency: 2\nprefill-concurrency: 1\nisl: 12\n\
         osl: 32\nextra-inputs: ignore_eos:true\n",
    );
    assert_eq!(records.len(), 6);
    records.sort_by_key(|r| r["sent_ns"].as_u64());
    let first_token = |r: &Value| {
        r["chunks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["kind"] == "content"))
            .and_then(|c| c["at_ns"].as_u64())
    };
    for pair in records.windows(2) {
        let token = first_token(&pair[0]).expect("a streamed first token");
        assert!(pair[1]["sent_ns"].as_u64() >= Some(token), "{pair:?}");
    }
    for r in &records {
        assert_eq!(usage(r, "completion_tokens"), 32, "{r}");
    }
}
