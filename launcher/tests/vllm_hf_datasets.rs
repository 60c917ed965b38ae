//! `vllm bench serve --dataset-name hf` from a local copy of the dataset, through the binary: the rows vLLM sends,
//! in the order `datasets` shuffles them with `--seed`, built into prompts as vLLM's `HuggingFaceDataset`
//! subclasses build them (worked out by hand from `vllm/benchmarks/datasets.py` and checked against numpy 2.4.6
//! and `datasets` 5.2.0 on the same files). Counts, orders and bodies only, never timings.

mod common;

use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;

use common::*;

/// One streamed completion (or chat) chunk, a usage chunk and `[DONE]`.
fn streamed_answer(request: &WireRequest) -> String {
    streamed_text(request, "a b", "stop", 2)
}

fn bodies(seen: &Mutex<Vec<WireRequest>>) -> Vec<Value> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

/// The run's records in request order.
fn records(dir: &Path, run_id: &str) -> Vec<Value> {
    let mut records: Vec<Value> = common::requests_jsonl(&dir.join(run_id).join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    records.sort_by_key(|r| r["id"].as_u64());
    records
}

#[test]
fn mt_bench_rows_are_sent_through_the_chat_template_in_the_seeds_shuffled_order() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = chatml_tokenizer(dir.path());
    // A local copy as `huggingface-cli download philschmid/mt-bench` leaves one: a split file and the card.
    let data = dir.path().join("mt-bench");
    std::fs::create_dir(&data).expect("mkdir");
    write(
        &data,
        "README.md",
        "---\nlicense: apache-2.0\n---\n# MT-Bench\n",
    );
    // Row i's first turn is i + 1 words, so each request's length says which row it was.
    let rows: String = (0..5)
        .map(|i| {
            let words = vec!["word"; i + 1].join(" ");
            format!("{{\"question_id\": {i}, \"category\": \"writing\", \"turns\": [\"{words}\", \"next\"]}}\n")
        })
        .collect();
    write(&data, "question.jsonl", &rows);
    let profile = format!(
        "model: m\ndataset-name: hf\ndataset-path: {}\nhf-name: philschmid/mt-bench\nhf-output-len: 3\n\
         seed: 3\nnum-prompts: 5\nmax-concurrency: 1\n",
        data.display()
    );
    let path = write(dir.path(), "profile.yaml", &profile);
    let output = run_against(
        "vllm-benchmark",
        &path,
        &sim.url,
        &tokenizer,
        dir.path(),
        "r",
    );
    succeeded(&output);
    let records = records(dir.path(), "r");
    assert_eq!(records.len(), 5);
    assert!(records.iter().all(|r| r["error"].is_null()), "{records:?}");
    // default_rng(3).permutation(5) = [4, 2, 1, 3, 0]; each prompt is <|im_start|> user <words> <|im_end|>
    // <|im_start|> assistant: 5 tokens beside the row's words.
    let lengths: Vec<u64> = records
        .iter()
        .filter_map(|r| r["input_tokens"].as_u64())
        .collect();
    assert_eq!(lengths, [10, 8, 7, 9, 6]);
    assert!(records.iter().all(|r| r["max_tokens"] == 3), "{records:?}");
}

#[test]
fn instructcoder_and_aimo_send_what_their_vllm_classes_build() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // InstructCoder with a train and a test file: hf-split picks the test file; no-stream and no template.
    let coder = dir.path().join("InstructCoder");
    std::fs::create_dir(&coder).expect("mkdir");
    write(
        &coder,
        "train.json",
        r#"[{"input": "x = 1", "instruction": "Never sent."}]"#,
    );
    write(
        &coder,
        "test.json",
        r#"[{"input": "def f(): pass", "instruction": "Rename f to g."},
            {"input": "print(1)", "instruction": "Print 2."}]"#,
    );
    // The same rows as the Hub stores them, in Parquet (`tests/fixtures/parquet/instructcoder`, written by
    // pyarrow: `data/test-00000-of-00001.parquet` is the test split), send the same requests.
    let parquet =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet/instructcoder");
    for (data, run_id) in [(&coder, "coder"), (&parquet, "coder-parquet")] {
        let profile = format!(
            "model: m\ndataset-name: hf\ndataset-path: {}\nhf-name: likaixin/InstructCoder\nhf-split: test\n\
             no-stream: none\nskip-chat-template: none\nnum-prompts: 2\nmax-concurrency: 1\n",
            data.display()
        );
        let path = write(dir.path(), &format!("{run_id}.yaml"), &profile);
        succeeded(&run_against(
            "vllm-benchmark",
            &path,
            &url,
            "builtin",
            dir.path(),
            run_id,
        ));
        // default_rng(0).permutation(2) = [0, 1]; max_tokens is InstructCoder's 200.
        let sent = bodies(&seen);
        seen.lock().expect("lock").clear();
        let prompts: Vec<&Value> = sent.iter().map(|b| &b["prompt"]).collect();
        assert_eq!(
            prompts,
            [
                "def f(): pass\n\nRename f to g. Just output the code, do not include any explanation.",
                "print(1)\n\nPrint 2. Just output the code, do not include any explanation.",
            ],
            "{run_id}"
        );
        assert!(sent.iter().all(|b| b["max_tokens"] == 200), "{sent:?}");
    }

    // AIMO: the problem as it is, max_tokens the solution's length; a 2-word problem is skipped (min_len 4).
    let aimo = dir.path().join("aime");
    std::fs::create_dir(&aimo).expect("mkdir");
    write(
        &aimo,
        "aime.jsonl",
        "{\"problem\": \"find x if x plus 1 is 2\", \"solution\": \"x is 1 so the answer is 1\"}\n\
         {\"problem\": \"too short\", \"solution\": \"one two three four\"}\n",
    );
    let profile = format!(
        "model: m\ndataset-name: hf\ndataset-path: {}\nhf-name: AI-MO/aimo-validation-aime\ndisable-shuffle: none\n\
         num-prompts: 3\nmax-concurrency: 1\n",
        aimo.display()
    );
    let path = write(dir.path(), "aimo.yaml", &profile);
    seen.lock().expect("lock").clear();
    succeeded(&run_against(
        "vllm-benchmark",
        &path,
        &url,
        "builtin",
        dir.path(),
        "aimo",
    ));
    // One valid row, topped up to 3 by random.choice: the same request three times, 8 words asked for.
    let sent = bodies(&seen);
    assert_eq!(sent.len(), 3);
    assert!(
        sent.iter()
            .all(|b| b["prompt"] == "find x if x plus 1 is 2" && b["max_tokens"] == 8),
        "{sent:?}"
    );
}

#[test]
fn hf_datasets_llmbench_cannot_read_are_refused_before_anything_is_sent() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("d");
    std::fs::create_dir_all(data.join("data")).expect("mkdir");
    write(
        &data.join("data"),
        "train-00000-of-00001.csv",
        "turns\nhi\n",
    );
    let profile = format!(
        "model: m\ndataset-name: hf\ndataset-path: {}\nhf-name: philschmid/mt-bench\nnum-prompts: 1\n",
        data.display()
    );
    let path = write(dir.path(), "csv.yaml", &profile);
    let output = run_against("vllm-benchmark", &path, &url, "builtin", dir.path(), "p");
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("convert it to JSON lines"),
        "{}",
        stderr(&output)
    );

    let path = write(
        dir.path(),
        "vision.yaml",
        "model: m\ndataset-name: hf\ndataset-path: yale-nlp/MMVU\nbackend: openai-chat\n\
         endpoint: /v1/chat/completions\n",
    );
    let output = run_against("vllm-benchmark", &path, &url, "builtin", dir.path(), "v");
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains("vision.yaml:3") && error.contains("MMVUDataset") && error.contains("video"),
        "{error}"
    );
    assert!(seen.lock().expect("lock").is_empty());
}
