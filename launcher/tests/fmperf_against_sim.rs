//! `llmbench run --harness fmperf` against the embedded simulator: the bundled LMBenchmark profiles run to the
//! end with every request recorded, and each QPS value leaves LMBenchmark's summary CSV beside the results with
//! one row per measured request.

mod common;

use std::path::Path;

use clap::Parser;
use llmbench::run::{RunArgs, RunOutcome, run};
use llmbench_model::record::RequestRecord;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

async fn run_bundled(profile: &str, output: &Path, overrides: &[&str]) -> RunOutcome {
    let mut argv = vec![
        "llmbench".to_owned(),
        "--harness".to_owned(),
        "fmperf".to_owned(),
        "--profile".to_owned(),
        profile.to_owned(),
        "--output".to_owned(),
        output.to_str().expect("utf-8 path").to_owned(),
        "--run-id".to_owned(),
        "fmperf".to_owned(),
        "--sim-ttft".to_owned(),
        "5ms".to_owned(),
        "--sim-itl".to_owned(),
        "1ms".to_owned(),
    ];
    for o in overrides {
        argv.push("--override".to_owned());
        argv.push((*o).to_owned());
    }
    let cli = Cli::parse_from(argv);
    run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the run fails: {e}"))
}

fn records(dir: &Path) -> Vec<RequestRecord> {
    common::requests_jsonl(&dir.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// The CSV's rows as (prompt_tokens, generation_tokens, user_id, question_id).
fn csv_rows(path: &Path) -> Vec<(u64, u64, u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "prompt_tokens,generation_tokens,ttft,generation_time,user_id,question_id,launch_time,finish_time"
        )
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 8, "{l}");
            for time in [f[2], f[3], f[6], f[7]] {
                let t: f64 = time.parse().expect("a float");
                assert!(t >= 0.0 && time.contains(['.', 'e']), "{l}");
            }
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[4].parse().unwrap(),
                f[5].parse().unwrap(),
            )
        })
        .collect()
}

/// sanity_long-input shrunk to two QPS values of 2 s (warm-ups of 2 / 2 = 1 s): one user, one round, so each user
/// asks once and the next joins as it leaves. Every request succeeds; the measured ones are exactly the CSV's rows
/// (same prompt and output tokens); the second QPS value's users start `num_users_warmup` ids later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sanity_long_input_runs_every_session_and_writes_lmbenchs_csv() {
    let dir = tempfile::tempdir().expect("temp dir");
    let outcome = run_bundled(
        "sanity_long-input",
        &dir.path().join("out"),
        &["test_duration=2", "num_users_warmup=2", "qps_values=1.34 2"],
    )
    .await;
    assert!(outcome.stopped.is_none());
    let records = records(&outcome.dir);
    assert!(
        records.iter().all(RequestRecord::succeeded),
        "every request answered"
    );
    for (stage, qps, first_user) in [(0u32, "1.34", 3u64), (1, "2", 5)] {
        let stage_records: Vec<&RequestRecord> =
            records.iter().filter(|r| r.stage == stage).collect();
        // Two warmup_engine rounds of 10 requests of max_tokens 100 (the warm-up invocation's and the run's).
        let engine_warmups = stage_records
            .iter()
            .filter(|r| r.warmup && r.max_tokens == Some(100))
            .count();
        assert_eq!(engine_warmups, 20, "stage {stage}");
        let sessions_warmup = stage_records
            .iter()
            .filter(|r| r.warmup && r.max_tokens == Some(32))
            .count();
        assert!(sessions_warmup >= 1, "the warm-up invocation's user asked");
        let measured: Vec<&&RequestRecord> = stage_records.iter().filter(|r| !r.warmup).collect();
        // One user in flight at a time, 0.1 s steps: a handful of requests in 2 s, not the QPS's 3 or 4.
        assert!(
            measured.len() >= 5,
            "stage {stage}: {} measured",
            measured.len()
        );
        let rows = csv_rows(
            &outcome
                .dir
                .join(format!("LMBench_long_input_output_{qps}.csv")),
        );
        assert_eq!(
            rows.len(),
            measured.len(),
            "stage {stage}: one row per request"
        );
        let users: Vec<u64> = rows.iter().map(|r| r.2).collect();
        let expected: Vec<u64> = (first_user..first_user + rows.len() as u64).collect();
        assert_eq!(users, expected, "stage {stage}: a new user per request");
        // One question per user; answers within answer_len (upstream sends no ignore_eos, so the simulator may
        // stop early).
        assert!(
            rows.iter().all(|r| r.3 == 1 && (1..=32).contains(&r.1)),
            "{rows:?}"
        );
        let tokens = |f: fn(&RequestRecord) -> u32| -> u64 {
            measured.iter().map(|r| u64::from(f(r))).sum()
        };
        assert_eq!(
            rows.iter().map(|r| r.0).sum::<u64>(),
            tokens(RequestRecord::prompt_tokens)
        );
        assert_eq!(
            rows.iter().map(|r| r.1).sum::<u64>(),
            tokens(RequestRecord::output_tokens)
        );
    }
    let summary = outcome.summary;
    assert_eq!(summary.stages.len(), 2);
}

/// The bundled sanity_short-input exactly as upstream runs it: the script's 200 s warm-up and 100 s run of 320
/// users in 20-round chats at 0.5 QPS. Over five minutes, so run on demand (`--ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "runs LMBenchmark's short-input script for real: 200 s of warm-up and 100 s of run"]
async fn sanity_short_input_runs_as_upstream() {
    let dir = tempfile::tempdir().expect("temp dir");
    let outcome = run_bundled("sanity_short-input", &dir.path().join("out"), &[]).await;
    let records = records(&outcome.dir);
    assert!(records.iter().all(RequestRecord::succeeded));
    let measured = records.iter().filter(|r| !r.warmup).count();
    let rows = csv_rows(&outcome.dir.join("LMBench_short_input_qps0.5.csv"));
    assert_eq!(rows.len(), measured);
    // 0.5 QPS for 100 s, from users spread over their 640 s gaps: about 50 requests.
    assert!((35..=65).contains(&measured), "{measured}");
    assert!(
        rows.iter().all(|r| (1..=20).contains(&r.1)),
        "answers within 20 tokens"
    );
}
