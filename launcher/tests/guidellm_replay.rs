//! guidellm's `replay` profile through the binary against the simulator: a `trace_synthetic` trace's rows, sorted
//! by timestamp, are each sent at `time_scale ×` their offset from the first row, with a prompt of exactly their
//! prompt tokens asking for their output tokens (`ignore_eos`), until the trace or a constraint runs out.

mod common;

use std::path::Path;

use serde_json::Value;

use common::*;

/// One record: (scheduled ns, input tokens, max_tokens, ignore_eos, the server's prompt tokens).
type Sent = (u64, u64, u64, bool, u64);

/// Each record of the run, in id order.
fn records(run: &Path) -> Vec<Sent> {
    let text = common::requests_jsonl(&run.join("requests.jsonl")).expect("requests.jsonl");
    let mut rows: Vec<(u64, Sent)> = text
        .lines()
        .map(|line| {
            let r: Value = serde_json::from_str(line).expect("a record");
            (
                r["id"].as_u64().expect("id"),
                (
                    r["scheduled_ns"].as_u64().expect("scheduled"),
                    r["input_tokens"].as_u64().expect("input"),
                    r["max_tokens"].as_u64().expect("max_tokens"),
                    r["ignore_eos"].as_bool().unwrap_or(false),
                    r["usage"]["prompt_tokens"].as_u64().expect("usage"),
                ),
            )
        })
        .collect();
    rows.sort_by_key(|(id, _)| *id);
    rows.into_iter().map(|(_, r)| r).collect()
}

fn run(dir: &Path, scenario: &str, sim: &SimProcess) -> std::process::Output {
    let path = write(dir, "replay.yaml", scenario);
    run_on_sim(dir, "guidellm", &path, "r", sim)
}

fn scenario(data: &str, profile: &str, constraints: &str) -> String {
    format!(
        "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
         model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n  data:\n    - {data}\n  profile: {profile}\n{constraints}"
    )
}

#[test]
fn each_row_goes_out_at_the_scaled_offset_from_the_first_with_its_lengths() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    // Out of time order in the file: guidellm sorts the rows, then times each from the first (1000.0).
    let jsonl = write(
        dir.path(),
        "trace.jsonl",
        "{\"timestamp\": 1000.8, \"input_length\": 40, \"output_length\": 3}\n\
         {\"timestamp\": 1000.0, \"input_length\": 20, \"output_length\": 5}\n\
         {\"timestamp\": 1000.4, \"input_length\": 30, \"output_length\": 4, \"session\": \"ignored\"}\n\
         {\"timestamp\": 1001.0, \"input_length\": 50, \"output_length\": 2}\n",
    );
    // The same rows in Parquet (`tests/fixtures/parquet/trace.parquet`, written by pyarrow) replay alike.
    let parquet =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet/trace.parquet");
    for trace in [jsonl, parquet] {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = run(
            dir.path(),
            &scenario(
                &format!("{{kind: trace_synthetic, path: {}}}", trace.display()),
                "{kind: replay, time_scale: 2.0}",
                "",
            ),
            &sim,
        );
        succeeded(&output);
        let got = records(&dir.path().join("r"));
        let first = got[0].0;
        // Offsets 0, 0.4, 0.8, 1.0 s, doubled.
        let offsets: Vec<u64> = got.iter().map(|r| r.0 - first).collect();
        assert_eq!(
            offsets,
            vec![0, 800_000_000, 1_600_000_000, 2_000_000_000],
            "{got:?}"
        );
        let lengths: Vec<(u64, u64, bool, u64)> =
            got.iter().map(|r| (r.1, r.2, r.3, r.4)).collect();
        assert_eq!(
            lengths,
            vec![
                (20, 5, true, 20),
                (30, 4, true, 30),
                (40, 3, true, 40),
                (50, 2, true, 50)
            ]
        );
    }
}

#[test]
fn a_csv_trace_with_its_own_columns_stops_at_its_samples_or_the_request_limit() {
    let sim = SimProcess::start(&["--model", "m"]);
    let data_dir = tempfile::tempdir().expect("tempdir");
    let trace = write(
        data_dir.path(),
        "trace.csv",
        "ts,in,out\n5,10,1\n5.25,11,2\n5.5,12,3\n6,13,4\n7,14,5\n",
    );
    let data = format!(
        "{{kind: trace_synthetic, path: {}, timestamp_column: ts, prompt_tokens_column: in, \
         output_tokens_column: out}}",
        trace.display()
    );
    let sent = |constraints: &str| {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = run(
            dir.path(),
            &scenario(&data, "{kind: replay}", constraints),
            &sim,
        );
        succeeded(&output);
        let got = records(&dir.path().join("r"));
        let first = got[0].0;
        got.iter()
            .map(|r| (r.0 - first, r.1, r.2))
            .collect::<Vec<_>>()
    };
    // `samples: 4` keeps the first four rows in time order: the trace ends there.
    assert_eq!(
        sent("  data_loader: {kind: pytorch, samples: 4}\n"),
        vec![
            (0, 10, 1),
            (250_000_000, 11, 2),
            (500_000_000, 12, 3),
            (1_000_000_000, 13, 4)
        ]
    );
    // `max_requests: 3` stops after three.
    assert_eq!(
        sent("  constraints:\n    - {kind: max_requests, count: 3}\n"),
        vec![(0, 10, 1), (250_000_000, 11, 2), (500_000_000, 12, 3)]
    );
}

#[test]
fn a_mooncake_trace_sends_each_row_its_blocks_at_its_time() {
    let sim = SimProcess::start(&["--model", "m"]);
    let dir = tempfile::tempdir().expect("tempdir");
    // Blocks of 16 tokens: 40 tokens are 16 + 16 + 8; the second row repeats the first's two whole blocks.
    let trace = write(
        dir.path(),
        "mooncake.jsonl",
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 3, \"hash_ids\": [0, 1, 2]}\n\
         {\"timestamp\": 0.25, \"input_length\": 32, \"output_length\": 2, \"hash_ids\": [0, 1]}\n",
    );
    let output = run(
        dir.path(),
        &scenario(
            &format!(
                "{{kind: mooncake, path: {}, hash_id_block_size: 16}}",
                trace.display()
            ),
            "{kind: replay}",
            "",
        ),
        &sim,
    );
    succeeded(&output);
    let got = records(&dir.path().join("r"));
    let first = got[0].0;
    let sent: Vec<(u64, u64, u64, u64)> =
        got.iter().map(|r| (r.0 - first, r.1, r.2, r.4)).collect();
    assert_eq!(sent, vec![(0, 40, 3, 40), (250_000_000, 32, 2, 32)]);
}

#[test]
fn replay_without_a_trace_and_traces_it_does_not_build_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = SimProcess::start(&["--model", "m"]);
    let cases = [
        (
            scenario(
                "{kind: synthetic_text, prompt_tokens: 8, output_tokens: 2}",
                "{kind: replay}",
                "",
            ),
            "the replay profile over data without timestamps",
        ),
        (
            scenario("{kind: weka, path: trace.jsonl}", "{kind: replay}", ""),
            "the `weka` trace format",
        ),
        (
            scenario(
                "{kind: trace_synthetic, path: trace.jsonl}",
                "{kind: replay, max_concurrency: 4}",
                "",
            ),
            "not an argument of guidellm's replay profile",
        ),
    ];
    for (text, needle) in cases {
        let output = run(dir.path(), &text, &sim);
        assert!(!output.status.success(), "{text}");
        let said = format!("{}{}", stdout(&output), stderr(&output));
        assert!(said.contains(needle), "{text}\n{said}");
    }
}
