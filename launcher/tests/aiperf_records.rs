//! AIPerf's per-request file, `profile_export.jsonl`, through the binary against the embedded simulator: one line
//! per request, warm-up first, each metric recomputed here by hand from the request's own record with AIPerf 0.13's
//! formulas (`aiperf/metrics/types/*.py`); the tags are exactly those the real AIPerf 0.13 writes against `llmbench
//! sim` with `--use-server-token-count` (its `http_req_*` trace metrics aside, which llmbench does not time). The
//! file is the same whether the run's records were held in memory or streamed back from disk.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{SimProcess, json, llmbench, run_on_sim, succeeded, write};
use serde_json::Value;

/// The tags of a streamed chat answer's line, in AIPerf 0.13's order.
const STREAMED_TAGS: [&str; 17] = [
    "request_latency",
    "time_to_first_output_token",
    "usage_prompt_tokens",
    "output_sequence_length",
    "usage_total_tokens",
    "time_to_first_token",
    "input_sequence_length",
    "output_token_count",
    "usage_completion_tokens",
    "inter_chunk_latency",
    "time_to_second_token",
    "e2e_output_token_throughput",
    "osl_mismatch_diff_pct",
    "inter_token_latency",
    "decode_duration",
    "prefill_throughput_per_user",
    "output_token_throughput_per_user",
];

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn int(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

fn metric(line: &Value, tag: &str) -> f64 {
    line["metrics"][tag]["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("{tag} in {line}"))
}

fn assert_near(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{what}: {got} vs {want}"
    );
}

/// The run's records by their `x-request-id`, and its clock's wall-clock anchor.
fn records_by_request_id(run: &Path) -> (HashMap<String, Value>, u64) {
    let records = common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a record"))
        .map(|r| (r["request_id"].as_str().expect("request id").to_owned(), r))
        .collect();
    (records, int(&json(&run.join("run.json")), "t0_unix_ns"))
}

#[test]
fn each_request_has_its_line_warmup_first_with_aiperfs_metrics_of_its_own_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(&["--model", "m", "--ttft", "20ms", "--itl", "2ms"]);
    let profile = write(
        dir.path(),
        "p.yaml",
        "model: m\nendpoint-type: chat\nstreaming: none\nisl: 16\nosl: 4\nextra-inputs: ignore_eos:true\n\
         warmup-request-count: 2\nrequest-count: 3\nconcurrency: 1\n",
    );
    succeeded(&run_on_sim(dir.path(), "aiperf", &profile, "r", &sim));
    let run = dir.path().join("r");
    let (records, t0) = records_by_request_id(&run);
    let lines = lines(&run.join("profile_export.jsonl"));
    assert_eq!(lines.len(), 5);

    let phases: Vec<(&str, u64, u64)> = lines
        .iter()
        .map(|l| {
            let m = &l["metadata"];
            (
                m["benchmark_phase"].as_str().expect("phase"),
                int(m, "session_num"),
                int(m, "phase_index"),
            )
        })
        .collect();
    // AIPerf numbers each phase's credits from 0; the profiling phase is the second phase.
    let mut profiling: Vec<u64> = phases[2..].iter().map(|p| p.1).collect();
    profiling.sort_unstable();
    assert_eq!(
        &phases[..2].iter().map(|p| (p.0, p.2)).collect::<Vec<_>>(),
        &[("warmup", 0), ("warmup", 0)]
    );
    assert!(
        phases[2..].iter().all(|p| p.0 == "profiling" && p.2 == 1),
        "{phases:?}"
    );
    assert_eq!(profiling, [0, 1, 2]);

    for line in &lines {
        let m = &line["metadata"];
        let id = m["x_request_id"].as_str().expect("x_request_id");
        let r = &records[id];
        let content: Vec<f64> = r["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .filter(|c| c["kind"] == "content")
            .map(|c| int(c, "at_ns") as f64)
            .collect();
        // A loaded machine may get two tokens in one chunk: with fewer than two content responses AIPerf has no
        // inter-chunk latency and no second token either; and when every content response reached the socket at
        // one instant, the decode took no time: an inter-token latency of 0, and no throughput per user (1 / ITL).
        let decoded = content[content.len() - 1] > content[0];
        let tags: Vec<&str> = line["metrics"]
            .as_object()
            .expect("metrics")
            .keys()
            .map(String::as_str)
            .collect();
        let want: Vec<&str> = STREAMED_TAGS
            .into_iter()
            .filter(|t| {
                content.len() >= 2 || !["inter_chunk_latency", "time_to_second_token"].contains(t)
            })
            .filter(|t| decoded || *t != "output_token_throughput_per_user")
            .collect();
        assert_eq!(tags, want, "{line}");
        assert!(line.get("error").is_none());
        assert_eq!(int(m, "request_start_ns"), t0 + int(r, "sent_ns"));
        assert_eq!(int(m, "credit_issued_ns"), t0 + int(r, "scheduled_ns"));
        assert_eq!(int(m, "request_end_ns"), t0 + int(r, "end_ns"));
        assert_eq!(m["was_cancelled"], false);
        assert_eq!(
            m["profiling_index"].is_null(),
            m["benchmark_phase"] == "warmup"
        );

        // By hand, from the record: the content responses' arrival times, the server's usage.
        let sent = int(r, "sent_ns") as f64;
        let (isl, osl) = (
            int(&r["usage"], "prompt_tokens") as f64,
            int(&r["usage"], "completion_tokens") as f64,
        );
        assert_eq!(osl, 4.0, "ignore_eos: four tokens each");
        let latency = (content[content.len() - 1] - sent) / 1e6;
        let ttft = (content[0] - sent) / 1e6;
        let itl = (latency - ttft) / (osl - 1.0);
        assert_near(metric(line, "request_latency"), latency, "request_latency");
        assert_near(metric(line, "time_to_first_token"), ttft, "ttft");
        assert_near(metric(line, "time_to_first_output_token"), ttft, "ttfo");
        if content.len() >= 2 {
            assert_near(
                metric(line, "time_to_second_token"),
                (content[1] - content[0]) / 1e6,
                "ttst",
            );
            let gaps: Vec<f64> = content.windows(2).map(|w| (w[1] - w[0]) / 1e6).collect();
            let got_gaps: Vec<f64> = line["metrics"]["inter_chunk_latency"]["value"]
                .as_array()
                .expect("a list")
                .iter()
                .map(|v| v.as_f64().expect("ms"))
                .collect();
            assert_eq!(got_gaps, gaps);
        }
        assert_near(metric(line, "inter_token_latency"), itl, "itl");
        if decoded {
            assert_near(
                metric(line, "output_token_throughput_per_user"),
                1e3 / itl,
                "tps/user",
            );
        }
        assert_near(
            metric(line, "e2e_output_token_throughput"),
            osl / (latency / 1e3),
            "e2e tps",
        );
        assert_near(
            metric(line, "prefill_throughput_per_user"),
            isl / (ttft / 1e3),
            "prefill tps",
        );
        assert_near(metric(line, "decode_duration"), latency - ttft, "decode");
        assert_near(metric(line, "osl_mismatch_diff_pct"), 0.0, "osl mismatch");
        assert_eq!(metric(line, "output_sequence_length"), osl);
        assert_eq!(metric(line, "output_token_count"), osl);
        assert_eq!(metric(line, "input_sequence_length"), isl);
        assert_eq!(metric(line, "usage_total_tokens"), isl + osl);
        assert_eq!(line["metrics"]["request_latency"]["unit"], "ms");
        assert_eq!(
            line["metrics"]["e2e_output_token_throughput"]["unit"],
            "tokens/sec/user"
        );
        assert_eq!(line["metrics"]["osl_mismatch_diff_pct"]["unit"], "%");
    }
}

#[test]
fn a_failed_request_has_no_metrics_and_the_servers_error_and_the_file_is_the_same_streamed_from_disk()
 {
    let dir = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(&[
        "--model",
        "m",
        "--ttft",
        "1ms",
        "--itl",
        "1ms",
        "--failure-rate",
        "0.5",
        "--seed",
        "3",
    ]);
    let profile = write(
        dir.path(),
        "p.yaml",
        "model: m\nendpoint-type: chat\nstreaming: none\nisl: 16\nosl: 3\nrequest-count: 12\nconcurrency: 2\n",
    );
    let output = run_on_sim(dir.path(), "aiperf", &profile, "r", &sim);
    let run = dir.path().join("r");
    let file = run.join("profile_export.jsonl");
    let written = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}: {output:?}"));
    let lines = lines(&file);
    assert_eq!(lines.len(), 12);
    let failed: Vec<&Value> = lines.iter().filter(|l| l.get("error").is_some()).collect();
    assert!(
        !failed.is_empty() && failed.len() < 12,
        "a failure rate of 0.5 over 12"
    );
    for line in &failed {
        assert_eq!(line["metrics"], serde_json::json!({}));
        let error = &line["error"];
        assert_eq!(error["code"], 500);
        assert_eq!(error["type"], "Internal Server Error");
        // The message is the server's body, as AIPerf's client reports it.
        let body: Value = serde_json::from_str(error["message"].as_str().expect("message"))
            .expect("the body is the server's JSON");
        assert_eq!(body["error"]["code"], 500);
    }

    // `llmbench report` writes the same file again, from the records in memory and streamed from disk.
    for budget in ["256MiB", "1KiB"] {
        std::fs::remove_file(&file).expect("rm");
        let report = llmbench()
            .arg("report")
            .arg(&run)
            .args(["--records-memory", budget])
            .output()
            .expect("runs");
        succeeded(&report);
        assert_eq!(
            std::fs::read(&file).expect("rewritten"),
            written,
            "budget {budget}"
        );
    }
}

#[test]
fn without_a_stream_no_ttft_or_per_token_metric_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(&["--model", "m", "--ttft", "5ms", "--itl", "1ms"]);
    let profile = write(
        dir.path(),
        "p.yaml",
        "model: m\nendpoint-type: completions\nisl: 16\nosl: 3\nextra-inputs: ignore_eos:true\nrequest-count: 3\n",
    );
    succeeded(&run_on_sim(dir.path(), "aiperf", &profile, "r", &sim));
    let run = dir.path().join("r");
    for line in lines(&run.join("profile_export.jsonl")) {
        let tags: Vec<&str> = line["metrics"]
            .as_object()
            .expect("metrics")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            tags,
            [
                "request_latency",
                "usage_prompt_tokens",
                "output_sequence_length",
                "usage_total_tokens",
                "input_sequence_length",
                "output_token_count",
                "usage_completion_tokens",
                "e2e_output_token_throughput",
                "osl_mismatch_diff_pct",
            ]
        );
    }
    // The real AIPerf 0.13 without `--streaming` (chat, `--use-server-token-count`, on `llmbench sim`) writes no
    // `time_to_first_token` (`STREAMING_TOKENS_ONLY`), per request or in its export, and no chunk timing.
    let export = json(&run.join("profile_export_aiperf.json"));
    for absent in [
        "time_to_first_token",
        "time_to_second_token",
        "inter_token_latency",
        "inter_chunk_latency",
        "decode_duration",
        "prefill_throughput_per_user",
    ] {
        assert!(export.get(absent).is_none(), "{absent}: {export}");
    }
    assert_eq!(export["request_latency"]["count"], 3);
}
