//! `llmbench run --harness nop`: llm-d-benchmark's nop harness sends nothing; the run still succeeds and leaves its
//! files, with an empty summary, so a BenchmarkRun of it ends Succeeded rather than failing.

use clap::Parser;
use llmbench::run::{RunArgs, run};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nop_harness_sends_nothing_and_leaves_an_empty_summary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = dir.path().to_str().expect("utf-8 path");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "nop",
        "--profile",
        "nop",
        "--set",
        "LLMDBENCH_HARNESS_PVC_NAME=workload-pvc",
        "--output",
        output,
        "--run-id",
        "nop",
    ]);
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the nop run fails: {e}"));
    assert_eq!(outcome.summary.overall.requests.total, 0);
    for file in ["profile.yaml", "run.json", "requests.jsonl", "summary.json"] {
        assert!(outcome.dir.join(file).is_file(), "{file} missing");
    }
    let records =
        std::fs::read_to_string(outcome.dir.join("requests.jsonl")).expect("requests.jsonl");
    assert!(records.is_empty());
}
