//! `llmbench report` on a sharded run: the shards' records merged onto one timeline give one exact summary and
//! every report at the run's root, while each shard keeps its own files.

mod common;

use common::{json, llmbench, stdout, succeeded};

#[test]
fn report_merges_the_shards_of_a_run_into_one_exact_summary() {
    let out = tempfile::tempdir().expect("tempdir");
    // Two launchers of one run, side by side (each with its own embedded simulator).
    let shards: Vec<_> = (0..2)
        .map(|i| {
            llmbench()
                .args([
                    "run",
                    "--harness",
                    "inference-perf",
                    "--profile",
                    "sanity_random",
                    "--override",
                    "load.stages.0.rate=10",
                    "--override",
                    "load.stages.0.duration=2",
                    "--run-id",
                    "sharded",
                    "--shard",
                    &format!("{i}/2"),
                    "--output",
                ])
                .arg(out.path())
                .spawn()
                .expect("spawns")
        })
        .collect();
    for mut shard in shards {
        assert!(shard.wait().expect("waits").success());
    }
    let run = out.path().join("sharded");
    let per_shard: Vec<u64> = (0..2)
        .map(|i| {
            json(&run.join(format!("shard-{i}/summary.json")))["requests"]["total"]
                .as_u64()
                .expect("total")
        })
        .collect();
    // One launcher would have sent 20 (10 req/s for 2 s); the shards' shares add up to it.
    assert_eq!(per_shard.iter().sum::<u64>(), 20, "{per_shard:?}");

    let output = llmbench().arg("report").arg(&run).output().expect("runs");
    succeeded(&output);
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["requests"]["total"], 20);
    // The whole run's asked rate, not a shard's.
    assert_eq!(summary["stages"][0]["schedule"]["requested_rate"], 10.0);
    // Exact: the merged TTFT p99 is the p99 of all 20 records' TTFTs, which no single shard need have.
    let mut ttfts: Vec<f64> = (0..2)
        .flat_map(|i| {
            common::requests_jsonl(&run.join(format!("shard-{i}/requests.jsonl")))
                .expect("records")
                .lines()
                .map(|l| {
                    let r: serde_json::Value = serde_json::from_str(l).expect("record");
                    let sent = r["sent_ns"].as_f64().expect("sent");
                    let first = r["chunks"]
                        .as_array()
                        .and_then(|c| c.iter().find(|c| c["kind"] == "content"))
                        .and_then(|c| c["at_ns"].as_f64())
                        .expect("a content chunk");
                    (first - sent) / 1e6
                })
                .collect::<Vec<_>>()
        })
        .collect();
    ttfts.sort_by(f64::total_cmp);
    let max = ttfts.last().copied().expect("ttfts");
    assert_eq!(summary["latency_ms"]["ttft"]["max"].as_f64(), Some(max));
    for file in [
        "summary_lifecycle_metrics.json",
        "stage_0_lifecycle_metrics.json",
        "benchmark_report_v0.2,_stage_0.yaml",
        "report.html",
        "server_metrics.jsonl",
    ] {
        assert!(run.join(file).is_file(), "{file} missing at the run's root");
    }
    assert!(
        json(&run.join("summary_lifecycle_metrics.json"))["successes"]["count"] == 20,
        "{}",
        stdout(&output)
    );
    // `llmbench plot` on the run's root draws the merged run.
    let plotted = llmbench().arg("plot").arg(&run).output().expect("runs");
    succeeded(&plotted);
    assert!(run.join("plots/ttft_distribution.png").is_file());
    // The shards' own summaries stay as they were.
    for (i, total) in per_shard.iter().enumerate() {
        assert_eq!(
            json(&run.join(format!("shard-{i}/summary.json")))["requests"]["total"],
            *total
        );
    }
}
