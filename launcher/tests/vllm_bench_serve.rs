//! `vllm bench serve` as its users write it, through the binary: sampling flags, `--extra-body` and `--logprobs`
//! sent in the body exactly as vLLM sends them (checked against bodies worked out by hand from `serve.py` and
//! `lib/endpoint_request_func.py`), `--request-id-prefix` on the wire, and the send times of a ramp-up. Bodies,
//! headers and planned send times only, never measured timings.

mod common;

use std::path::Path;
use std::process::Output;
use std::sync::Mutex;

use serde_json::{Value, json};

use common::*;

/// One streamed completion (or chat) chunk, a usage chunk and `[DONE]`.
fn streamed_answer(request: &WireRequest) -> String {
    streamed_text(request, "a b", "length", 2)
}

/// Each kept POST's `x-request-id` and JSON body.
fn posts(seen: &Mutex<Vec<WireRequest>>) -> Vec<(Option<String>, Value)> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| {
            (
                r.header("x-request-id").map(str::to_owned),
                serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// Each kept POST's `prompt`, in the order they came.
fn prompts_sent(seen: &Mutex<Vec<WireRequest>>) -> Vec<Value> {
    posts(seen)
        .into_iter()
        .map(|(_, body)| body["prompt"].clone())
        .collect()
}

fn run(dir: &Path, profile: &str, endpoint: &str) -> Output {
    let path = write(dir, "profile.yaml", profile);
    run_against("vllm-benchmark", &path, endpoint, "builtin", dir, "r")
}

fn records(dir: &Path) -> Vec<Value> {
    common::requests_jsonl(&dir.join("r/requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// The bodies in the order they were sent, each without its prompt (random text), and the ids they carried.
fn sent(seen: &Mutex<Vec<WireRequest>>, prompt_field: &str) -> (Vec<Option<String>>, Vec<Value>) {
    let seen = posts(seen);
    let ids = seen.iter().map(|(id, _)| id.clone()).collect();
    let bodies = seen
        .iter()
        .map(|(_, body)| {
            let mut body = body.clone();
            let prompt = body
                .as_object_mut()
                .and_then(|b| b.remove(prompt_field))
                .expect("a prompt");
            assert!(!prompt.is_null());
            body
        })
        .collect();
    (ids, bodies)
}

#[test]
fn sampling_flags_extra_body_logprobs_and_request_ids_are_sent_as_vllm_sends_them() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // One request at a time, so the server sees them in the order they were numbered.
    let profile = "model: m\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\nnum-prompts: 3\n\
                   max-concurrency: 1\ntemperature: 0\ntop-k: 50\ntop-p: 0.9\nrepetition-penalty: 1.1\n\
                   logprobs: 2\nrequest-id-prefix: bench-3f9a-\n\
                   extra-body: '{\"top_k\": 20, \"chat_template_kwargs\": {\"enable_thinking\": false}}'\n";
    let output = run(dir.path(), profile, &url);
    succeeded(&output);
    let (ids, bodies) = sent(&seen, "prompt");
    // `SampleRequest.request_id` is the prefix and the sample's index; `_update_headers_common` sends it.
    assert_eq!(
        ids,
        ["bench-3f9a-0", "bench-3f9a-1", "bench-3f9a-2"].map(|s| Some(s.to_owned()))
    );
    // async_request_openai_completions: {model, prompt, repetition_penalty: 1.0, max_tokens, logprobs, stream,
    // stream_options}; ignore_eos (random data); then payload.update({**sampling_params, **extra_body}) with
    // sampling_params = {top_p: 0.9, top_k: 50, temperature: 0.0, repetition_penalty: 1.1} and extra-body's
    // top_k 20 replacing the flag's.
    let expected = json!({"model": "m", "repetition_penalty": 1.1, "max_tokens": 2, "logprobs": 2,
                          "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true,
                          "top_p": 0.9, "top_k": 20, "temperature": 0.0,
                          "chat_template_kwargs": {"enable_thinking": false}});
    assert_eq!(bodies, vec![expected; 3]);
    // The records name the ids the server saw.
    let recorded: Vec<Value> = records(dir.path())
        .iter()
        .map(|r| r["request_id"].clone())
        .collect();
    assert_eq!(recorded, ["bench-3f9a-0", "bench-3f9a-1", "bench-3f9a-2"]);
}

#[test]
fn chat_bodies_carry_the_sampling_flags_but_no_logprobs_as_in_vllm() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = "model: m\nbackend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: random\n\
                   random-input-len: 4\nrandom-output-len: 3\nnum-prompts: 2\nmax-concurrency: 1\n\
                   temperature: 0.7\nmin-p: 0.1\nfrequency-penalty: 0.5\npresence-penalty: 0.25\nlogprobs: 5\n\
                   extra-body: '{\"max_completion_tokens\": 2}'\n";
    let output = run(dir.path(), profile, &format!("{url}/v1/chat/completions"));
    succeeded(&output);
    let (ids, bodies) = sent(&seen, "messages");
    // async_request_openai_chat_completions builds {model, messages, max_completion_tokens, stream,
    // stream_options} — no logprobs — then ignore_eos and the merged extras; extra-body's
    // max_completion_tokens replaces the dataset's 3.
    let expected = json!({"model": "m", "max_completion_tokens": 2, "stream": true,
                          "stream_options": {"include_usage": true}, "ignore_eos": true,
                          "min_p": 0.1, "temperature": 0.7, "frequency_penalty": 0.5,
                          "presence_penalty": 0.25});
    assert_eq!(bodies, vec![expected; 2]);
    // Without a prefix, llmbench's own ids name the run.
    assert!(
        ids.iter().all(|id| id
            .as_deref()
            .is_some_and(|id| id.starts_with("llmbench-r-"))),
        "{ids:?}"
    );
    // The record asks what the body asked.
    assert!(
        records(dir.path()).iter().all(|r| r["max_tokens"] == 2),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("chat requests carry no logprobs"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_linear_ramp_up_plans_each_send_one_gap_of_its_own_rate_after_the_last() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    // Rates 1, 2, 3 rps (1 + 2·i/2); with burstiness inf the gaps are 1/rate: 1, 1/2, 1/3 s, not rescaled.
    let profile = "model: m\ndataset-name: random\nrandom-input-len: 4\nrandom-output-len: 2\nnum-prompts: 3\n\
                   ramp-up-strategy: linear\nramp-up-start-rps: 1\nramp-up-end-rps: 3\nburstiness: inf\n";
    let output = run(dir.path(), profile, &sim.url);
    succeeded(&output);
    let mut planned: Vec<i64> = records(dir.path())
        .iter()
        .map(|r| r["scheduled_ns"].as_i64().expect("scheduled_ns"))
        .collect();
    planned.sort_unstable();
    assert_eq!(planned.len(), 3);
    let gaps = [planned[1] - planned[0], planned[2] - planned[1]];
    // Durations are whole nanoseconds: 1.5 − 1.0 s and (1.5 + 1/3) − 1.5 s.
    assert_eq!(gaps[0], 500_000_000, "{planned:?}");
    assert!((gaps[1] - 333_333_333).abs() <= 1, "{planned:?}");
}

#[test]
fn custom_prompts_are_sent_rendered_through_the_tokenizers_chat_template_and_counted_after_it() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = chatml_tokenizer(dir.path());
    let data = write(
        dir.path(),
        "d.jsonl",
        "{\"prompt\": \"Hello world\"}\n{\"prompt\": \"one two three\"}\n",
    );
    let profile = format!(
        "model: m\ndataset-name: custom\ndataset-path: {}\ncustom-output-len: 2\nnum-prompts: 2\n\
         disable-shuffle: none\nmax-concurrency: 1\n",
        data.display()
    );
    let path = write(dir.path(), "profile.yaml", &profile);
    let output = run_against("vllm-benchmark", &path, &url, &tokenizer, dir.path(), "r");
    succeeded(&output);
    // apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False).
    assert_eq!(
        prompts_sent(&seen),
        [
            "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n",
            "<|im_start|>user\none two three<|im_end|>\n<|im_start|>assistant\n",
        ]
    );
    // Counted after the template: <|im_start|> + "user Hello world" + <|im_end|> + <|im_start|> + "assistant"
    // = 1 + 3 + 1 + 1 + 1 = 7 tokens, and 8 with three words.
    let counts: Vec<Value> = records(dir.path())
        .iter()
        .map(|r| r["input_tokens"].clone())
        .collect();
    assert_eq!(counts, [7, 8]);

    // A tokenizer without a chat template: refused before anything is sent, saying what to pass.
    std::fs::remove_file(tokenizer.join("tokenizer_config.json")).expect("rm");
    let before = seen.lock().expect("lock").len();
    let output = run_against("vllm-benchmark", &path, &url, &tokenizer, dir.path(), "r2");
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains(
            "vLLM's custom dataset renders every prompt through the tokenizer's chat template"
        ) && error.contains("has none")
            && error.contains("`skip-chat-template: none`"),
        "{error}"
    );
    assert_eq!(seen.lock().expect("lock").len(), before);
}

#[test]
fn prefix_repetition_sends_whole_groups_of_prompts_sharing_each_prefix() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // 25 prompts over 3 prefixes: vLLM's dataset makes 25 // 3 = 8 per prefix, 24 requests.
    let profile = "model: m\ndataset-name: prefix_repetition\nnum-prompts: 25\nmax-concurrency: 1\n\
                   prefix-repetition-prefix-len: 40\nprefix-repetition-suffix-len: 12\n\
                   prefix-repetition-num-prefixes: 3\nprefix-repetition-output-len: 2\n";
    let output = run(dir.path(), profile, &url);
    succeeded(&output);
    let bodies: Vec<Value> = posts(&seen).into_iter().map(|(_, b)| b).collect();
    assert_eq!(bodies.len(), 24);
    // The canned answer is 2 tokens long: asking for 2 keeps every answer whole.
    assert!(bodies.iter().all(|b| b["max_tokens"] == 2), "{bodies:?}");
    // Not the random dataset: vLLM leaves ignore_eos unset.
    assert!(
        bodies.iter().all(|b| b.get("ignore_eos").is_none()),
        "{bodies:?}"
    );
    // The built-in tokenizer is one token per word: 40 words of prefix, 12 of suffix.
    let mut groups: std::collections::BTreeMap<String, usize> = Default::default();
    for b in &bodies {
        let words: Vec<&str> = b["prompt"].as_str().expect("a prompt").split(' ').collect();
        assert_eq!(words.len(), 52, "{words:?}");
        *groups.entry(words[..40].join(" ")).or_default() += 1;
    }
    assert_eq!(groups.into_values().collect::<Vec<_>>(), [8, 8, 8]);
    let recorded: Vec<u64> = records(dir.path())
        .iter()
        .map(|r| r["input_tokens"].as_u64().expect("input_tokens"))
        .collect();
    assert_eq!(recorded, vec![52; 24]);
}

#[test]
fn burstgpt_rows_are_sampled_as_pandas_samples_them_and_sent_as_vllm_builds_them() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // Three GPT-4 rows with a response (the ChatGPT row and the failed one are dropped, as vLLM drops them);
    // answers of 2 tokens, as long as the canned answer.
    let csv = write(
        dir.path(),
        "burstgpt.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         1,GPT-4,3,2,5,Conversation log\n2,ChatGPT,50,2,52,API log\n3,GPT-4,4,2,6,API log\n\
         4,GPT-4,9,0,9,API log\n5,GPT-4,2,2,4,Conversation log\n",
    );
    let profile = format!(
        "model: m\ndataset-name: burstgpt\ndataset-path: {}\nnum-prompts: 2\nseed: 0\nmax-concurrency: 1\n",
        csv.display()
    );
    let output = run(dir.path(), &profile, &url);
    succeeded(&output);
    // sample(n=2, random_state=0) takes positions [2, 1] (numpy's RandomState(0).permutation(3)[:2]): the rows
    // of 2 and 4 request tokens; request i sends ids i, i + 1, … decoded: one word per id here.
    let bodies: Vec<Value> = posts(&seen).into_iter().map(|(_, b)| b).collect();
    let words: Vec<usize> = bodies
        .iter()
        .map(|b| b["prompt"].as_str().expect("a prompt").split(' ').count())
        .collect();
    assert_eq!(words, [2, 4]);
    assert!(bodies.iter().all(|b| b["max_tokens"] == 2), "{bodies:?}");
    assert!(
        bodies.iter().all(|b| b.get("ignore_eos").is_none()),
        "{bodies:?}"
    );
    // The second prompt starts one id later than the first.
    let first: Vec<&str> = bodies[0]["prompt"]
        .as_str()
        .expect("a prompt")
        .split(' ')
        .collect();
    let second: Vec<&str> = bodies[1]["prompt"]
        .as_str()
        .expect("a prompt")
        .split(' ')
        .collect();
    assert_eq!(first[1], second[0]);
    let recorded: Vec<u64> = records(dir.path())
        .iter()
        .map(|r| r["input_tokens"].as_u64().expect("input_tokens"))
        .collect();
    assert_eq!(recorded, [2, 4]);
}

#[test]
fn spec_bench_sends_each_records_first_turn_of_the_category_through_the_chat_template() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = chatml_tokenizer(dir.path());
    // Spec-Bench's question.jsonl layout: question_id, category, turns.
    let data = write(
        dir.path(),
        "question.jsonl",
        "{\"question_id\": 1, \"category\": \"writing\", \"turns\": [\"Hello world\", \"Again\"]}\n\
         {\"question_id\": 2, \"category\": \"math\", \"turns\": [\"two plus two\"]}\n\
         {\"question_id\": 3, \"category\": \"writing\", \"turns\": [\"one two three\"]}\n",
    );
    // skip-chat-template is not passed to SpecBench by vLLM: the template is rendered anyway.
    let profile = format!(
        "model: m\ndataset-name: spec_bench\ndataset-path: {}\nspec-bench-category: writing\n\
         spec-bench-output-len: 2\nnum-prompts: 2\nmax-concurrency: 1\nskip-chat-template: true\n",
        data.display()
    );
    let path = write(dir.path(), "profile.yaml", &profile);
    let output = run_against("vllm-benchmark", &path, &url, &tokenizer, dir.path(), "r");
    succeeded(&output);
    assert!(
        stderr(&output)
            .contains("renders every prompt through the chat template whatever this says"),
        "{}",
        stderr(&output)
    );
    // The two writing records' first turns, in the order random.seed(0); random.shuffle([0, 1]) leaves: [0, 1].
    assert_eq!(
        prompts_sent(&seen),
        [
            "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n",
            "<|im_start|>user\none two three<|im_end|>\n<|im_start|>assistant\n",
        ]
    );
    let bodies: Vec<Value> = posts(&seen).into_iter().map(|(_, b)| b).collect();
    assert!(bodies.iter().all(|b| b["max_tokens"] == 2), "{bodies:?}");
}

#[test]
fn sonnet_with_a_completions_backend_sends_the_prompt_rendered_and_counts_it_rendered() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = chatml_tokenizer(dir.path());
    let sonnet = write(dir.path(), "sonnet.txt", "a b c\nd e f\ng h i\nj k l\n");
    // Every length is counted on the ChatML rendering: the instruction line's is <|im_start|> user, its 11 words,
    // <|im_end|> <|im_start|> assistant = 16 tokens; lines are 3 tokens. input 25 → round((25 − 16) / 3) = 3
    // lines, prefix 19 → round(3 / 3) = 1 (the file's first), so 2 drawn lines: 16 + 3 + 6 = 25 tokens.
    let profile = |backend: &str| {
        format!(
            "model: m\n{backend}dataset-name: sonnet\ndataset-path: {}\nsonnet-input-len: 25\n\
             sonnet-prefix-len: 19\nsonnet-output-len: 2\nnum-prompts: 3\nmax-concurrency: 1\n",
            sonnet.display()
        )
    };
    let path = write(dir.path(), "completions.yaml", &profile(""));
    let output = run_against("vllm-benchmark", &path, &url, &tokenizer, dir.path(), "r");
    succeeded(&output);
    let head = "<|im_start|>user\nPick as many lines as you can from these poem lines:\na b c\n";
    let sent = prompts_sent(&seen);
    assert_eq!(sent.len(), 3);
    for prompt in &sent {
        let prompt = prompt.as_str().expect("a text prompt");
        assert!(prompt.starts_with(head), "{prompt:?}");
        assert!(
            prompt.ends_with("<|im_end|>\n<|im_start|>assistant\n"),
            "{prompt:?}"
        );
        // Whitespace-separated: "<|im_start|>user", 11 + 3 + 6 words, "<|im_end|>", "<|im_start|>assistant".
        assert_eq!(prompt.split_whitespace().count(), 23, "{prompt:?}");
    }
    let counts: Vec<Value> = records(dir.path())
        .iter()
        .map(|r| r["input_tokens"].clone())
        .collect();
    assert_eq!(counts, [25, 25, 25]);

    // The chat backend sends the prompt unrendered (the server renders it), counted rendered all the same.
    seen.lock().expect("lock").clear();
    let chat = profile("backend: openai-chat\nendpoint: /v1/chat/completions\n");
    let path = write(dir.path(), "chat.yaml", &chat);
    let output = run_against("vllm-benchmark", &path, &url, &tokenizer, dir.path(), "c");
    succeeded(&output);
    for (_, body) in posts(&seen) {
        // vLLM's chat request: one user turn of one text part.
        let content = body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{body}"));
        assert!(
            content.starts_with("Pick as many lines as you can from these poem lines:\na b c\n"),
            "{content:?}"
        );
        assert_eq!(content.lines().count(), 4, "{content:?}");
    }
    let chat_records: Vec<Value> = common::requests_jsonl(&dir.path().join("c/requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a record")["input_tokens"].clone())
        .collect();
    assert_eq!(chat_records, [25, 25, 25]);
}

#[test]
fn sharegpt_entries_go_in_pythons_shuffled_order_and_too_few_are_topped_up_by_random_choice() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let entry = |name: &str| {
        json!({"conversations": [
            {"from": "human", "value": format!("{name} asks one two three")},
            {"from": "gpt", "value": "an answer of five words"},
        ]})
    };
    // e2 has one turn: `load_data` drops it before the shuffle, so it does not move the others.
    let one_turn = json!({"conversations": [{"from": "human", "value": "e2 asks one two three"}]});
    let data = json!([
        entry("e0"),
        entry("e1"),
        one_turn,
        entry("e3"),
        entry("e4"),
        entry("e5")
    ]);
    let path = write(dir.path(), "sharegpt.json", &data.to_string());
    let profile = format!(
        "model: m\ndataset-name: sharegpt\ndataset-path: {}\nsharegpt-output-len: 2\nnum-prompts: 7\nseed: 3\n\
         max-concurrency: 1\n",
        path.display()
    );
    let output = run(dir.path(), &profile, &url);
    succeeded(&output);
    // CPython: d = ["e0", "e1", "e3", "e4", "e5"]; random.seed(3); random.shuffle(d) → e0, e3, e4, e5, e1; then
    // `maybe_oversample_requests`: random.seed(3); [random.choice(d) for _ in range(2)] → e3, e1.
    let first_words: Vec<String> = prompts_sent(&seen)
        .iter()
        .map(|p| {
            p.as_str()
                .and_then(|p| p.split(' ').next())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(first_words, ["e0", "e3", "e4", "e5", "e1", "e3", "e1"]);
}
