//! AIPerf 0.13's rankings endpoint types (`nim_rankings`, `cohere_rankings`, `hf_tei_rankings`) through the
//! binary: each request is one query and its passages from AIPerf's synthetic rankings composer, in the body of
//! the endpoint type (`aiperf/endpoints/{nim,cohere,hf_tei}_rankings.py` `build_payload`, then `--extra-inputs`),
//! on the type's path (`plugin/plugins.yaml` `endpoint_path`), never streamed. Read from the aiperf-0.13.0 wheel.
//!
//! The passage counts are AIPerf's own draws: with `--random-seed 7`, `sample_positive_normal_integer(3, 2)` on
//! `rng.derive("dataset.rankings.passages")` gives 2, 6, 4 for the first three entries (run with AIPerf 0.13's
//! `aiperf.common.random_generator`: `rng.init(7); rng.derive("dataset.rankings.passages")`; its gauss draws
//! 1.41, 5.17, 3.61 round up to them). Counts and values, never timings.

mod common;

use std::path::Path;

use serde_json::{Value, json};

use common::*;

/// Each endpoint type's own answer: NIM's `{rankings}`, Cohere's `{results}`, TEI's bare list.
fn answer(request: &WireRequest) -> String {
    let body = if request.line.starts_with("POST /v1/ranking ") {
        json!({"rankings": [{"index": 0, "logit": 0.5}], "usage": {"prompt_tokens": 9, "total_tokens": 9}})
    } else if request.line.starts_with("POST /v2/rerank ") {
        json!({"id": "r", "results": [{"index": 0, "relevance_score": 0.5}],
               "meta": {"billed_units": {"search_units": 1}}})
    } else {
        json!([{"index": 0, "score": 0.5}])
    };
    ok_response("application/json", &body.to_string())
}

fn profile(endpoint_type: &str) -> String {
    format!(
        "model: m\nendpoint-type: {endpoint_type}\nrandom-seed: 7\nrequest-count: 3\nrankings-passages-mean: 3\n\
         rankings-passages-stddev: 2\nrankings-query-prompt-token-mean: 4\n\
         rankings-passages-prompt-token-mean: 6\nextra-inputs: truncate:END\nstreaming: true\n"
    )
}

fn records_of(dir: &Path, run: &str) -> Vec<Value> {
    common::requests_jsonl(&dir.join(run).join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

#[test]
fn each_rankings_endpoint_type_sends_its_own_body_on_its_own_path_with_aiperfs_passage_counts() {
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    // (endpoint type, path, the body's keys, where the passages are, how a passage is written)
    let cases = [
        (
            "nim_rankings",
            "/v1/ranking",
            vec!["model", "passages", "query", "truncate"],
            "passages",
        ),
        (
            "cohere_rankings",
            "/v2/rerank",
            vec!["documents", "model", "query", "truncate"],
            "documents",
        ),
        (
            "hf_tei_rankings",
            "/rerank",
            vec!["query", "texts", "truncate"],
            "texts",
        ),
    ];
    for (endpoint_type, path, keys, passages_key) in cases {
        let file = write(
            dir.path(),
            &format!("{endpoint_type}.yaml"),
            &profile(endpoint_type),
        );
        let output = run_profile(
            dir.path(),
            "aiperf",
            &file,
            endpoint_type,
            &[
                "--endpoint",
                &url,
                "--tokenizer",
                "builtin",
                "--no-preflight",
                "--no-server-metrics",
            ],
        );
        succeeded(&output);
        // `--streaming` is turned off with a warning, as AIPerf's `EndpointConfig` does for these types.
        assert!(
            stderr(&output).contains("disables streaming"),
            "{}",
            stderr(&output)
        );
        let sent: Vec<(String, Value)> = seen
            .lock()
            .expect("lock")
            .drain(..)
            .map(|r| (r.line, serde_json::from_slice(&r.body).expect("JSON")))
            .collect();
        assert_eq!(sent.len(), 3, "{endpoint_type}");
        let mut counts = Vec::new();
        for (line, body) in &sent {
            assert!(line.starts_with(&format!("POST {path} ")), "{line}");
            let mut got: Vec<&str> = body
                .as_object()
                .expect("object")
                .keys()
                .map(String::as_str)
                .collect();
            got.sort_unstable();
            assert_eq!(got, keys, "{body}");
            assert_eq!(body["truncate"], "END", "{body}");
            if body.get("model").is_some() {
                assert_eq!(body["model"], "m", "{body}");
            }
            let passages = body[passages_key].as_array().expect("passages");
            for passage in passages {
                match endpoint_type {
                    // `[{"text": p} for p in passages]`
                    "nim_rankings" => assert!(passage["text"].is_string(), "{body}"),
                    _ => assert!(passage.is_string(), "{body}"),
                }
            }
            let query = match endpoint_type {
                "nim_rankings" => &body["query"]["text"],
                _ => &body["query"],
            };
            assert!(query.as_str().is_some_and(|q| !q.is_empty()), "{body}");
            counts.push(passages.len());
        }
        assert_eq!(counts, [2, 6, 4], "{endpoint_type}");
        // Every answer parsed as a success, each record carrying its passages as its inputs.
        let records = records_of(dir.path(), endpoint_type);
        let inputs: Vec<u64> = records
            .iter()
            .map(|r| {
                assert_eq!(r["http_status"], 200, "{r}");
                assert!(r["error"].is_null(), "{r}");
                r["inputs"].as_u64().expect("inputs")
            })
            .collect();
        assert_eq!(inputs, [2, 6, 4], "{endpoint_type}");
    }
}

#[test]
fn the_rankings_endpoint_types_run_on_the_simulator_as_pooling_requests() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "2ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    for endpoint_type in ["nim_rankings", "cohere_rankings", "hf_tei_rankings"] {
        // Without `rankings-*` flags `RankingsConfig`'s defaults apply: 10 passages every request (stddev 0).
        let file = write(
            dir.path(),
            &format!("{endpoint_type}.yaml"),
            &format!(
                "model: m\nendpoint-type: {endpoint_type}\nrequest-count: 4\nconcurrency: 2\n\
                 rankings-passages-prompt-token-mean: 8\nrankings-query-prompt-token-mean: 4\n"
            ),
        );
        succeeded(&run_on_sim(
            dir.path(),
            "aiperf",
            &file,
            endpoint_type,
            &sim,
        ));
        let records = records_of(dir.path(), endpoint_type);
        assert_eq!(records.len(), 4, "{endpoint_type}");
        for r in &records {
            assert_eq!(r["http_status"], 200, "{r}");
            assert_eq!(r["inputs"], 10, "{r}");
            assert_eq!(r["streaming"], false, "{r}");
            // The simulator's usage: each passage read beside the query.
            assert!(
                r["usage"]["prompt_tokens"].as_u64().is_some_and(|n| n > 0),
                "{r}"
            );
        }
        let summary = json(&dir.path().join(endpoint_type).join("summary.json"));
        for metric in ["ttft", "tpot", "itl"] {
            assert!(summary["latency_ms"][metric].is_null(), "{summary:#}");
        }
        assert_eq!(summary["latency_ms"]["e2e"]["count"], 4, "{summary:#}");
        assert_eq!(summary["throughput"]["output_tokens_per_s"], 0.0);
        // AIPerf's export: request latency and throughput, no token timing.
        let export = json(
            &dir.path()
                .join(endpoint_type)
                .join("profile_export_aiperf.json"),
        );
        assert_eq!(export["request_count"]["avg"], 4.0, "{export:#}");
        assert!(export["request_latency"]["avg"].is_number(), "{export:#}");
        assert!(
            export["request_throughput"]["avg"].is_number(),
            "{export:#}"
        );
        for absent in [
            "time_to_first_token",
            "inter_token_latency",
            "output_token_throughput",
        ] {
            assert!(export.get(absent).is_none(), "{absent}: {export:#}");
        }
    }
}

#[test]
fn an_aiperf_config_files_rankings_section_sets_the_passages_and_lengths() {
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "schemaVersion: \"2.0\"\nrandomSeed: 7\nbenchmark:\n  model: m\n  endpoint:\n    url: {url}\n    \
         type: cohere_rankings\n  dataset:\n    type: synthetic\n    entries: 3\n    rankings:\n      \
         passages:\n        mean: 3\n        stddev: 2\n      passageTokens: 6\n      queryTokens: 4\n  \
         profiling:\n    type: concurrency\n    concurrency: 1\n    requests: 4\n"
    );
    let file = write(dir.path(), "config.yaml", &config);
    let output = run_profile(
        dir.path(),
        "aiperf",
        &file,
        "cfg",
        &["--tokenizer", "builtin", "--no-server-metrics"],
    );
    succeeded(&output);
    let counts: Vec<usize> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| {
            assert!(r.line.starts_with("POST /v2/rerank "), "{}", r.line);
            let body: Value = serde_json::from_slice(&r.body).expect("JSON");
            body["documents"].as_array().map_or(0, Vec::len)
        })
        .collect();
    // The pre-flight's probe first (its query ranked against itself), then three entries (2, 6, 4 passages), the
    // fourth request the first entry again (the sequential sampler).
    assert_eq!(counts, [1, 2, 6, 4, 2]);
}

#[test]
fn what_rankings_runs_do_not_build_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "model: m\nendpoint-type: rankings\n",
            "not an AIPerf 0.13 endpoint type",
        ),
        (
            "model: m\nendpoint-type: nim_rankings\nrankings-passages-stddev: 2\n",
            "needs `rankings-passages-mean` beside it",
        ),
        (
            "model: m\nendpoint-type: cohere_rankings\ninput-file: q.jsonl\ncustom-dataset-type: multi_turn\n",
            "only supports one turn",
        ),
        (
            "model: m\nendpoint-type: hf_tei_rankings\ndataset-sampling-strategy: shuffle\n",
            "AIPerf's sessions",
        ),
        (
            "model: m\nendpoint-type: nim_rankings\nrankings-passages-mean: 0\n",
            "rankings-passages-mean",
        ),
    ];
    for (i, (profile, reason)) in cases.into_iter().enumerate() {
        let path = write(dir.path(), &format!("p{i}.yaml"), profile);
        let output = run_profile(
            dir.path(),
            "aiperf",
            &path,
            &format!("r{i}"),
            &["--endpoint", "http://127.0.0.1:9", "--no-preflight"],
        );
        assert!(!output.status.success(), "{profile}");
        assert!(stderr(&output).contains(reason), "{}", stderr(&output));
    }
}

/// The bundled `rankings` profile shrunk to 6 requests over 6 entries on the embedded simulator. Its seed 42 and
/// `sample_positive_normal_integer(10, 3)` on `rng.derive("dataset.rankings.passages")` draw gauss 12.08, 3.93,
/// 14.43, 3.99, 8.69, 6.49 (AIPerf 0.13's `random_generator`): 13, 4, 15, 4, 9, 7 passages, one request each, in
/// order at concurrency 4 — so compared as a set of counts per request.
#[test]
fn the_bundled_rankings_profile_runs_on_the_embedded_simulator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run_profile(
        dir.path(),
        "aiperf",
        "rankings",
        "bundled",
        &[
            "--sim-ttft",
            "2ms",
            "--tokenizer",
            "builtin",
            "--override",
            "request-count=6",
            "--override",
            "num-dataset-entries=6",
        ],
    );
    succeeded(&output);
    let records = records_of(dir.path(), "bundled");
    let mut inputs: Vec<u64> = records
        .iter()
        .map(|r| {
            assert_eq!(r["http_status"], 200, "{r}");
            r["inputs"].as_u64().expect("inputs")
        })
        .collect();
    inputs.sort_unstable();
    assert_eq!(inputs, [4, 4, 7, 9, 13, 15]);
}

/// A `single_turn` file (AIPerf 0.13: `CustomDatasetComposer`, then `base_rankings_endpoint.py` `format_payload`):
/// each line's first `query`/`queries` content is the query and every `passages` text's contents the passages, in
/// order; other names are ignored; the type's body, then `--extra-inputs`, then the line's `extra`. The lines go
/// in file order, wrapping (the sequential sampler). Written by hand from those functions, then checked by running
/// aiperf 0.13.0's own `SingleTurn.model_validate`, `MediaConversionMixin.convert_to_media_objects` and each type's
/// `format_payload` on these lines with `--extra-inputs truncate:END` (the same bodies, and its warnings for the
/// ignored `notes` text, the second query and `output_length`).
const RANKINGS_FILE: &str = "\
{\"texts\": [{\"name\": \"query\", \"contents\": [\"what is a cat\"]}, {\"name\": \"passages\", \"contents\": [\"a cat is an animal\", \"dogs bark\"]}], \"extra\": {\"truncate\": \"START\", \"top_n\": 1}}

{\"texts\": [{\"name\": \"passages\", \"contents\": [\"p1\"]}, {\"name\": \"notes\", \"contents\": [\"x\"]}, {\"name\": \"queries\", \"contents\": [\"q1\", \"q2\"]}, {\"name\": \"passages\", \"contents\": [\"p2\", \"p3\"]}], \"output_length\": 4}
";

#[test]
fn a_single_turn_file_is_sent_as_each_endpoint_types_rankings_bodies_in_file_order() {
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(dir.path(), "r.jsonl", RANKINGS_FILE);
    // (endpoint type, path, the first line's body, the second line's)
    let cases = [
        (
            "nim_rankings",
            "/v1/ranking",
            json!({"model": "m", "query": {"text": "what is a cat"},
                   "passages": [{"text": "a cat is an animal"}, {"text": "dogs bark"}],
                   "truncate": "START", "top_n": 1}),
            json!({"model": "m", "query": {"text": "q1"},
                   "passages": [{"text": "p1"}, {"text": "p2"}, {"text": "p3"}], "truncate": "END"}),
        ),
        (
            "cohere_rankings",
            "/v2/rerank",
            json!({"model": "m", "query": "what is a cat", "documents": ["a cat is an animal", "dogs bark"],
                   "truncate": "START", "top_n": 1}),
            json!({"model": "m", "query": "q1", "documents": ["p1", "p2", "p3"], "truncate": "END"}),
        ),
        (
            "hf_tei_rankings",
            "/rerank",
            json!({"query": "what is a cat", "texts": ["a cat is an animal", "dogs bark"],
                   "truncate": "START", "top_n": 1}),
            json!({"query": "q1", "texts": ["p1", "p2", "p3"], "truncate": "END"}),
        ),
    ];
    for (endpoint_type, path, first, second) in cases {
        let file = write(
            dir.path(),
            &format!("{endpoint_type}.yaml"),
            &format!(
                "model: m\nendpoint-type: {endpoint_type}\ninput-file: {}\ncustom-dataset-type: single_turn\n\
                 request-count: 3\nconcurrency: 1\nextra-inputs: truncate:END\nosl: 7\n",
                data.display()
            ),
        );
        let output = run_profile(
            dir.path(),
            "aiperf",
            &file,
            endpoint_type,
            &[
                "--endpoint",
                &url,
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
        for (line, _) in &sent {
            assert!(line.starts_with(&format!("POST {path} ")), "{line}");
        }
        let bodies: Vec<Value> = sent.into_iter().map(|(_, body)| body).collect();
        // No max_tokens from `--osl` or `output_length`: rankings bodies never carry one.
        assert_eq!(bodies, [first.clone(), second, first], "{endpoint_type}");
        // AIPerf's warnings, once for the file: the ignored name, the second query, the unsent max_tokens.
        let err = stderr(&output);
        for warned in [
            "texts named other than query",
            "several query texts",
            "output_length sets a max_tokens",
        ] {
            assert!(err.contains(warned), "{warned}: {err}");
        }
        let inputs: Vec<u64> = records_of(dir.path(), endpoint_type)
            .iter()
            .map(|r| {
                assert_eq!(r["http_status"], 200, "{r}");
                r["inputs"].as_u64().expect("inputs")
            })
            .collect();
        assert_eq!(inputs, [2, 3, 2], "{endpoint_type}");
    }
}

#[test]
fn a_query_without_passages_is_sent_with_an_empty_list_after_a_probe_that_ranks_its_query() {
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(
        dir.path(),
        "r.jsonl",
        "{\"texts\": [{\"name\": \"query\", \"contents\": [\"alone\"]}], \"role\": \"user\", \"delay\": 50}\n",
    );
    let file = write(
        dir.path(),
        "p.yaml",
        &format!(
            "model: m\nendpoint-type: cohere_rankings\ninput-file: {}\ncustom-dataset-type: single_turn\n\
             request-count: 2\n",
            data.display()
        ),
    );
    let output = run_profile(
        dir.path(),
        "aiperf",
        &file,
        "empty",
        &[
            "--endpoint",
            &url,
            "--tokenizer",
            "builtin",
            "--no-server-metrics",
        ],
    );
    succeeded(&output);
    assert!(
        stderr(&output).contains("a query without passages"),
        "{}",
        stderr(&output)
    );
    let bodies: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("JSON"))
        .collect();
    assert_eq!(
        bodies,
        [
            // The pre-flight's probe ranks its query against itself.
            json!({"model": "m", "query": "Hello", "documents": ["Hello"]}),
            json!({"model": "m", "query": "alone", "documents": []}),
            json!({"model": "m", "query": "alone", "documents": []}),
        ]
    );
}

#[test]
fn a_rankings_file_aiperf_would_fail_on_is_refused_with_its_file_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        // A plain `text` is one unnamed text: no query, and AIPerf fails writing its inputs.json.
        (
            "{\"texts\": [{\"name\": \"query\", \"contents\": [\"q\"]}]}\n{\"text\": \"plain\"}\n",
            "r0.jsonl:2: `text`: no query",
        ),
        (
            "{\"texts\": [{\"name\": \"passages\", \"contents\": [\"p\"]}]}\n",
            "r1.jsonl:1: `texts`: no query",
        ),
        (
            "{\"texts\": [{\"name\": \"query\", \"contents\": [\"q\"]}], \"image\": \"x.png\"}\n",
            "r2.jsonl:1: `image`",
        ),
        (
            "{\"texts\": [{\"name\": \"query\", \"contents\": [\"q\"]}], \"extra\": 3}\n",
            "r3.jsonl:1: `extra`: expected an object",
        ),
    ];
    for (i, (lines, says)) in cases.into_iter().enumerate() {
        let data = write(dir.path(), &format!("r{i}.jsonl"), lines);
        let file = write(
            dir.path(),
            &format!("p{i}.yaml"),
            &format!(
                "model: m\nendpoint-type: nim_rankings\ninput-file: {}\ncustom-dataset-type: single_turn\n",
                data.display()
            ),
        );
        let output = run_profile(
            dir.path(),
            "aiperf",
            &file,
            &format!("f{i}"),
            &[
                "--endpoint",
                "http://127.0.0.1:9",
                "--no-preflight",
                "--tokenizer",
                "builtin",
            ],
        );
        assert!(!output.status.success(), "{lines}");
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
    }
}

#[test]
fn a_rankings_file_runs_on_the_simulator() {
    let sim = SimProcess::start(&["--model", "m", "--ttft", "2ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(dir.path(), "r.jsonl", RANKINGS_FILE);
    for endpoint_type in ["nim_rankings", "cohere_rankings", "hf_tei_rankings"] {
        let file = write(
            dir.path(),
            &format!("{endpoint_type}.yaml"),
            &format!(
                "model: m\nendpoint-type: {endpoint_type}\ninput-file: {}\ncustom-dataset-type: single_turn\n\
                 request-count: 4\nconcurrency: 2\n",
                data.display()
            ),
        );
        succeeded(&run_on_sim(
            dir.path(),
            "aiperf",
            &file,
            endpoint_type,
            &sim,
        ));
        let records = records_of(dir.path(), endpoint_type);
        assert_eq!(records.len(), 4, "{endpoint_type}");
        let mut inputs: Vec<u64> = records
            .iter()
            .map(|r| {
                assert_eq!(r["http_status"], 200, "{r}");
                assert!(
                    r["usage"]["prompt_tokens"].as_u64().is_some_and(|n| n > 0),
                    "{r}"
                );
                r["inputs"].as_u64().expect("inputs")
            })
            .collect();
        // Two lines of 2 and 3 passages, each sent twice (at concurrency 2, in either order).
        inputs.sort_unstable();
        assert_eq!(inputs, [2, 2, 3, 3], "{endpoint_type}");
    }
}

#[test]
fn an_aiperf_config_files_file_dataset_feeds_a_rankings_type_its_lines() {
    let (url, seen) = capturing_server(answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = write(dir.path(), "r.jsonl", RANKINGS_FILE);
    // `FileDataset.format` defaults to single_turn.
    let config = format!(
        "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: {url}\n    type: cohere_rankings\n  \
         dataset:\n    type: file\n    path: {}\n  profiling:\n    type: concurrency\n    concurrency: 1\n    \
         requests: 2\n",
        data.display()
    );
    let file = write(dir.path(), "config.yaml", &config);
    let output = run_profile(
        dir.path(),
        "aiperf",
        &file,
        "cfg-file",
        &[
            "--tokenizer",
            "builtin",
            "--no-server-metrics",
            "--no-preflight",
        ],
    );
    succeeded(&output);
    let bodies: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("JSON"))
        .collect();
    assert_eq!(
        bodies,
        [
            json!({"model": "m", "query": "what is a cat", "documents": ["a cat is an animal", "dogs bark"],
                   "truncate": "START", "top_n": 1}),
            json!({"model": "m", "query": "q1", "documents": ["p1", "p2", "p3"]}),
        ]
    );
}
