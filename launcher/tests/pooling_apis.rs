//! The pooling APIs through the binary: embeddings (vLLM `backend: openai-embeddings`, guidellm `request_format:
//! /v1/embeddings`, AIPerf `endpoint-type: embeddings`) and rerank (vLLM `backend: vllm-rerank`). What each tool
//! sends is worked out by hand from its source (vLLM 3aee4a4 `vllm/benchmarks/lib/endpoint_request_func.py` and
//! 237145e `datasets/random.py`; guidellm ee7a774 `EmbeddingsRequestHandler`; AIPerf 0.13
//! `endpoints/openai_embeddings.py`); what is measured comes from the simulator's answers. Counts and values, never
//! timings.

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

/// The one file of `dir` whose name starts with `prefix`.
fn file_starting(dir: &Path, prefix: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .expect("run dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()))
}

fn vllm_pooling(backend: &str, endpoint: &str, batch: u32) -> String {
    format!(
        "model: m\nbackend: {backend}\nendpoint: {endpoint}\ndataset-name: random\nrandom-input-len: 8\n\
         random-batch-size: {batch}\nnum-prompts: 10\nmax-concurrency: 2\n"
    )
}

/// What every pooling run's summary says: requests latency, inputs per second, and no token timing at all.
fn assert_pooling_summary(dir: &Path, run: &str, inputs: u64) {
    let summary = json(&dir.join(run).join("summary.json"));
    let latency = &summary["latency_ms"];
    for metric in ["ttft", "tpot", "itl", "ntpot"] {
        assert!(latency[metric].is_null(), "{metric}: {latency:#}");
    }
    assert!(latency["e2e"]["count"].as_u64().is_some(), "{latency:#}");
    let throughput = &summary["throughput"];
    assert_eq!(throughput["output_tokens_per_s"], 0.0, "{throughput:#}");
    let per_s = |key: &str| throughput[key].as_f64().expect(key);
    // Inputs per second over requests per second is the inputs per successful request.
    let requests = summary["requests"]["succeeded"]
        .as_u64()
        .expect("succeeded");
    let ratio = per_s("inputs_per_s") / per_s("requests_per_s");
    assert!(
        (ratio - inputs as f64 / requests as f64).abs() < 1e-9,
        "{throughput:#}"
    );
}

#[test]
fn vllm_embeddings_send_batches_of_random_prompts_and_report_inputs_per_second_without_token_metrics()
 {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "2ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        &vllm_pooling("openai-embeddings", "/v1/embeddings", 3),
    );
    let output = run_on_sim(dir.path(), "vllm-benchmark", &profile, "r", &sim);
    succeeded(&output);
    let records = records_of(dir.path(), "r");
    // `RandomDataset.sample`: 10 prompts cut into batches of 3, the last holding what is left.
    let mut inputs: Vec<u64> = records
        .iter()
        .map(|r| r["inputs"].as_u64().expect("inputs"))
        .collect();
    inputs.sort_unstable();
    assert_eq!(inputs, [1, 3, 3, 3]);
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["streaming"], false, "{r}");
        // 8 words a prompt, counted by the simulator as the built-in tokenizer counts them.
        assert_eq!(r["usage"]["prompt_tokens"], r["input_tokens"], "{r}");
        assert_eq!(
            r["usage"]["prompt_tokens"],
            8 * r["inputs"].as_u64().expect("inputs"),
            "{r}"
        );
        assert_eq!(r["usage"]["completion_tokens"], 0, "{r}");
    }
    assert_eq!(json(&dir.path().join("r/run.json"))["api"], "embeddings");
    assert_pooling_summary(dir.path(), "r", 10);
    // vLLM's pooling result: no failed count, no output or token-timing fields; inputs beside requests.
    let result = json(&file_starting(&dir.path().join("r"), "openai-embeddings-"));
    assert_eq!(result["backend"], "openai-embeddings");
    assert_eq!(
        (
            &result["completed"],
            &result["num_prompts"],
            &result["total_input_sequences"]
        ),
        (&json!(4), &json!(10), &json!(10))
    );
    assert_eq!(result["total_input_tokens"], 80);
    for absent in [
        "failed",
        "total_output_tokens",
        "output_throughput",
        "request_goodput",
        "mean_ttft_ms",
        "mean_tpot_ms",
        "mean_itl_ms",
        "max_output_tokens_per_s",
    ] {
        assert!(result.get(absent).is_none(), "{absent}: {result:#}");
    }
    let per_s = |key: &str| result[key].as_f64().expect(key);
    assert!((per_s("input_sequence_throughput") / per_s("request_throughput") - 2.5).abs() < 1e-9);
    assert!(
        (per_s("total_token_throughput") / per_s("input_sequence_throughput") - 8.0).abs() < 1e-9
    );
    assert!(result["p99_e2el_ms"].as_f64().is_some(), "{result:#}");
}

#[test]
fn vllm_rerank_takes_each_batchs_first_prompt_as_the_query_and_counts_its_documents() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "2ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "p.yaml",
        &vllm_pooling("vllm-rerank", "/v1/rerank", 5),
    );
    let output = run_on_sim(dir.path(), "vllm-benchmark", &profile, "r", &sim);
    succeeded(&output);
    let records = records_of(dir.path(), "r");
    assert_eq!(records.len(), 2);
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        // A query and 4 documents: the simulator reads each document beside the query, 16 words a pair.
        assert_eq!(r["inputs"], 4, "{r}");
        assert_eq!(r["usage"]["prompt_tokens"], 4 * 16, "{r}");
    }
    assert_pooling_summary(dir.path(), "r", 8);
    let result = json(&file_starting(&dir.path().join("r"), "vllm-rerank-"));
    assert_eq!(
        (&result["num_prompts"], &result["total_input_sequences"]),
        (&json!(10), &json!(8))
    );
}

#[test]
fn each_tool_sends_its_own_pooling_body() {
    fn answer(request: &WireRequest) -> String {
        let body = if request.line.contains("rerank") {
            json!({"id": "r", "model": "m", "usage": {"prompt_tokens": 9, "total_tokens": 9},
                   "results": [{"index": 0, "relevance_score": 0.9}]})
        } else {
            json!({"object": "list", "model": "m", "data": [{"object": "embedding", "index": 0,
                   "embedding": [0.5, 0.5]}], "usage": {"prompt_tokens": 9, "total_tokens": 9}})
        };
        ok_response("application/json", &body.to_string())
    }
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |harness: &str, profile: &str, id: &str| {
        let path = write(dir.path(), &format!("{id}.yaml"), profile);
        let output = run_profile(
            dir.path(),
            harness,
            &path,
            id,
            &[
                "--endpoint",
                &url,
                "--model",
                "m",
                "--tokenizer",
                "builtin",
                "--no-preflight",
                "--no-server-metrics",
            ],
        );
        succeeded(&output);
        let sent: Vec<(String, Value)> = seen
            .lock()
            .expect("lock")
            .drain(..)
            .map(|r| (r.line, serde_json::from_slice(&r.body).expect("JSON")))
            .collect();
        sent
    };
    // vLLM: the batch as a list, `truncate_prompt_tokens: -1`; no ignore_eos for a pooling backend's random data.
    let vllm = run(
        "vllm-benchmark",
        "model: m\nbackend: openai-embeddings\nendpoint: /v1/embeddings\ndataset-name: random\n\
         random-input-len: 4\nrandom-batch-size: 2\nnum-prompts: 2\nextra-body: '{\"dimensions\": 2}'\n",
        "vllm",
    );
    assert_eq!(vllm.len(), 1);
    assert!(
        vllm[0].0.starts_with("POST /v1/embeddings "),
        "{}",
        vllm[0].0
    );
    let body = &vllm[0].1;
    let keys: Vec<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 4, "{body}");
    assert_eq!(body["input"].as_array().map(Vec::len), Some(2), "{body}");
    assert_eq!(
        (&body["truncate_prompt_tokens"], &body["dimensions"]),
        (&json!(-1), &json!(2))
    );
    // vLLM's rerank: the query apart, the documents in order, and nothing merged (no `extra-body`).
    let rerank = run(
        "vllm-benchmark",
        "model: m\nbackend: vllm-rerank\nendpoint: /v1/rerank\ndataset-name: random\nrandom-input-len: 4\n\
         random-batch-size: 3\nnum-prompts: 3\nextra-body: '{\"top_n\": 1}'\n",
        "rerank",
    );
    let body = &rerank[0].1;
    assert!(
        rerank[0].0.starts_with("POST /v1/rerank "),
        "{}",
        rerank[0].0
    );
    assert!(body["query"].is_string(), "{body}");
    assert_eq!(
        body["documents"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    assert!(body.get("top_n").is_none(), "{body}");
    // guidellm: one text as a string, and only the model beside it.
    let guidellm = run(
        "guidellm",
        "spec:\n  backend:\n    kind: openai_http\n    target: http://x\n    model: m\n    request_format: \
         /v1/embeddings\n  data:\n    - kind: synthetic_text\n      prompt_tokens: 5\n      output_tokens: 1\n  \
         profile:\n    kind: synchronous\n  constraints:\n    - kind: max_requests\n      count: 1\n",
        "guidellm",
    );
    let body = &guidellm[0].1;
    assert!(body["input"].is_string(), "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
    // AIPerf: `input` always a list, `--extra-inputs` merged.
    let aiperf = run(
        "aiperf",
        "model: m\nendpoint-type: embeddings\nrequest-count: 1\nisl: 5\nextra-inputs: dimensions:2\n",
        "aiperf",
    );
    let body = &aiperf[0].1;
    assert_eq!(body["input"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(body["dimensions"], 2, "{body}");
}

#[test]
fn guidellm_and_aiperf_embeddings_run_on_the_simulator_without_token_metrics() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "2ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let guidellm = write(
        dir.path(),
        "g.yaml",
        "spec:\n  backend:\n    kind: openai_http\n    target: http://x\n    model: m\n    request_format: \
         /v1/embeddings\n    stream: true\n  data:\n    - kind: synthetic_text\n      prompt_tokens: 6\n      \
         output_tokens: 1\n  profile:\n    kind: synchronous\n  constraints:\n    - kind: max_requests\n      \
         count: 3\n",
    );
    succeeded(&run_on_sim(dir.path(), "guidellm", &guidellm, "g", &sim));
    let records = records_of(dir.path(), "g");
    assert_eq!(records.len(), 3);
    // guidellm never streams an embeddings request, whatever `stream` says.
    assert!(
        records
            .iter()
            .all(|r| r["streaming"] == false && r["inputs"] == 1)
    );
    assert_pooling_summary(dir.path(), "g", 3);

    let aiperf = write(
        dir.path(),
        "a.yaml",
        "model: m\nendpoint-type: embeddings\nrequest-count: 4\nconcurrency: 2\nisl: 6\n",
    );
    succeeded(&run_on_sim(dir.path(), "aiperf", &aiperf, "a", &sim));
    assert_pooling_summary(dir.path(), "a", 4);
    let export = json(&dir.path().join("a/profile_export_aiperf.json"));
    for absent in [
        "time_to_first_token",
        "inter_token_latency",
        "output_token_throughput",
        "output_sequence_length",
        "total_osl",
    ] {
        assert!(export.get(absent).is_none(), "{absent}: {export:#}");
    }
    assert_eq!(export["request_count"]["avg"], 4.0);
    assert_eq!(export["total_isl"]["avg"], 24.0);
}

#[test]
fn pooling_requests_that_no_tool_sends_as_asked_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "vllm-benchmark",
            "model: m\nbackend: vllm-rerank\nendpoint: /v1/rerank\ndataset-name: random\n",
            "`random-batch-size` of 2 or more",
        ),
        (
            "vllm-benchmark",
            "model: m\nbackend: openai\ndataset-name: random\nrandom-batch-size: 4\n",
            "batched prompts with `backend: openai`",
        ),
        (
            "aiperf",
            "model: m\nendpoint-type: nim_embeddings\n",
            "llmbench sends text",
        ),
        (
            "guidellm",
            "spec:\n  backend:\n    kind: openai_http\n    target: http://x\n    request_format: /pooling\n  \
             data:\n    - kind: synthetic_text\n      prompt_tokens: 5\n      output_tokens: 1\n  profile:\n    \
             kind: synchronous\n",
            "`pooling_column`",
        ),
        (
            "guidellm",
            "spec:\n  backend:\n    kind: openai_http\n    target: http://x\n    request_format: /v1/embeddings\n  \
             data:\n    - kind: synthetic_text\n      prompt_tokens: 5\n      output_tokens: 1\n      turns: 2\n  \
             profile:\n    kind: synchronous\n  constraints:\n    - kind: max_requests\n      count: 2\n",
            "sends only each request's text",
        ),
    ];
    for (i, (harness, profile, reason)) in cases.into_iter().enumerate() {
        let path = write(dir.path(), &format!("p{i}.yaml"), profile);
        let output = run_profile(
            dir.path(),
            harness,
            &path,
            &format!("r{i}"),
            &["--endpoint", "http://127.0.0.1:9", "--no-preflight"],
        );
        assert!(!output.status.success(), "{harness} {profile}");
        assert!(stderr(&output).contains(reason), "{}", stderr(&output));
    }
}

/// vLLM's `random-rerank` (`RandomDatasetForReranking`): one query for every request, the documents in batches of
/// `random-batch-size`, the last with what is left; each batch's `prompt_len` counted as vLLM counts it.
#[test]
fn vllm_random_rerank_sends_one_query_with_each_batch_of_documents() {
    fn answer(_: &WireRequest) -> String {
        let body = json!({"id": "r", "model": "m", "usage": {"prompt_tokens": 9, "total_tokens": 9},
                          "results": [{"index": 0, "relevance_score": 0.9}]});
        ok_response("application/json", &body.to_string())
    }
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // 7 documents of 3 per request: 3 requests (`range(0, 7, 3)`). The builtin tokenizer adds no special token,
    // so the query is 64 // 2 - 1 = 31 tokens and each document 64 - 31 - 1 = 32.
    let path = write(
        dir.path(),
        "rerank.yaml",
        "model: m\nbackend: vllm-rerank\nendpoint: /v1/rerank\ndataset-name: random-rerank\n\
         random-input-len: 64\nrandom-batch-size: 3\nnum-prompts: 7\nmax-concurrency: 1\n",
    );
    succeeded(&run_against(
        "vllm-benchmark",
        &path,
        &url,
        "builtin",
        dir.path(),
        "r",
    ));
    let bodies: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("JSON"))
        .collect();
    let documents: Vec<usize> = bodies
        .iter()
        .map(|b| b["documents"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(documents, [3, 3, 1]);
    assert!(
        bodies.iter().all(|b| b["query"] == bodies[0]["query"]),
        "{bodies:#?}"
    );
    // `prompt_len`: (31 + 1) × documents + 32 × documents.
    let mut records = records_of(dir.path(), "r");
    records.sort_by_key(|r| r["id"].as_u64());
    let counted: Vec<u64> = records
        .iter()
        .map(|r| r["input_tokens"].as_u64().expect("input_tokens"))
        .collect();
    assert_eq!(counted, [192, 192, 64]);
    let inputs: Vec<u64> = records
        .iter()
        .map(|r| r["inputs"].as_u64().expect("inputs"))
        .collect();
    assert_eq!(inputs, [3, 3, 1]);
}
