//! Every tool's file checked against numbers worked out by hand from that tool's definitions.
//!
//! The fixture (times in ms from t0; stage 0 asks 2 req/s, stage 1 a concurrency of 4):
//! - r1, stage 0: scheduled 0, sent 10; a role-only chunk at 40, content of 1, 1, 2 tokens at 50, 60, 80, a
//!   usage chunk at 90; ends 100. Built with 9 prompt tokens; the server says 10 prompt, 4 completion.
//! - r2, stage 0: scheduled 500, sent 510; content of 1 token at 530 and 570; ends 600; usage 12 / 2.
//! - r3, stage 0: scheduled and sent 1000, fails with HTTP 503 at 1100.
//! - r4, stage 1: scheduled and sent 2000; one content token at 2100; ends 2150; no usage; 8 prompt tokens.

use std::path::PathBuf;

use serde_json::Value;

use super::*;
use llmbench_model::record::{ChunkKind, ErrorClass, RequestError, Usage};
use llmbench_model::record_file::file_bytes;

const MS: u64 = 1_000_000;
/// 2026-11-22T04:35:12Z.
const T0_UNIX_NS: u64 = 1_795_322_112_000_000_000;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn num(v: &Value, path: &str) -> f64 {
    let mut at = v;
    for key in path.split('.') {
        at = &at[key];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {at}"))
}

fn assert_num(v: &Value, path: &str, expected: f64) {
    let got = num(v, path);
    assert!(close(got, expected), "{path}: {got} != {expected}");
}

fn record(
    id: u64,
    stage: u32,
    scheduled: u64,
    sent: u64,
    end: u64,
    chunks: &[(u64, ChunkKind)],
) -> RequestRecord {
    let mut record = RequestRecord::builder(id)
        .stage(stage)
        .sent(sent * MS)
        .scheduled(scheduled * MS)
        .end(end * MS)
        .input_tokens(8)
        .max_tokens(4)
        .ok();
    for &(at, kind) in chunks {
        record = record.chunk(at * MS, kind);
    }
    record.build()
}

fn records() -> Vec<RequestRecord> {
    use ChunkKind::{Content, Empty, UsageOnly};
    let c = |tokens| Content { tokens };
    let mut r1 = record(
        1,
        0,
        0,
        10,
        100,
        &[
            (40, Empty),
            (50, c(1)),
            (60, c(1)),
            (80, c(2)),
            (90, UsageOnly),
        ],
    );
    r1.input_tokens = 9;
    r1.usage = Some(Usage {
        prompt_tokens: 10,
        completion_tokens: 4,
        cached_tokens: None,
        reasoning_tokens: None,
    });
    let mut r2 = record(2, 0, 500, 510, 600, &[(530, c(1)), (570, c(1))]);
    r2.input_tokens = 12;
    r2.usage = Some(Usage {
        prompt_tokens: 12,
        completion_tokens: 2,
        cached_tokens: None,
        reasoning_tokens: None,
    });
    let mut r3 = record(3, 0, 1000, 1000, 1100, &[]);
    r3.http_status = Some(503);
    r3.error = Some(Box::new(RequestError {
        class: ErrorClass::HttpStatus,
        message: "Service Unavailable".into(),
    }));
    let r4 = record(4, 1, 2000, 2000, 2150, &[(2100, c(1))]);
    vec![r1, r2, r3, r4]
}

pub(crate) fn meta() -> RunMeta {
    RunMeta {
        schema: RUN_META_SCHEMA.to_owned(),
        run_id: "run-1".to_owned(),
        harness: Harness::InferencePerf,
        profile: "sanity_random".to_owned(),
        model: "org/tiny-model".to_owned(),
        endpoint: "http://127.0.0.1:8000".to_owned(),
        tokenizer: None,
        started_at: "2026-11-22T04:35:12Z".to_owned(),
        t0_unix_ns: T0_UNIX_NS,
        api: ApiKind::Chat,
        stages: vec![
            StageMeta {
                rate: Some(2.0),
                ..StageMeta::default()
            },
            StageMeta {
                concurrency: Some(4),
                ..StageMeta::default()
            },
        ],
        shard: ShardMeta::default(),
        llmbench_version: LLMBENCH_VERSION.to_owned(),
        report: ReportOptions::default(),
        planned_requests: None,
        profile_notes: Vec::new(),
        launcher_cpus: None,
        end: None,
        capacity_search: None,
        server_metrics: None,
        release: None,
        stack: None,
        server: None,
        profiling: None,
        preflight: None,
        load_flags: None,
        api_key_source: None,
        cache: None,
    }
}

fn summary_of(meta: &RunMeta, records: &[RequestRecord]) -> RunSummary {
    let info = RunInfo {
        run_id: meta.run_id.clone(),
        harness: meta.harness.to_string(),
        model: meta.model.clone(),
        endpoint: meta.endpoint.clone(),
    };
    RunSummary::from_records(info, records, &meta.shard_requested_rates())
}

fn stage(records: &[RequestRecord], stage: u32) -> Vec<&RequestRecord> {
    records.iter().filter(|r| r.stage == stage).collect()
}

/// A fresh empty directory under the system temp dir.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("llmbench-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---- inference-perf ----

fn inference_perf_stage_0() -> Value {
    let records = records();
    lifecycle_metrics(
        &stage(&records, 0),
        &INFERENCE_PERF_PERCENTILES,
        Some(meta().stages[0]),
        &[],
    )
}

#[test]
fn tpot_excludes_the_first_token_like_inference_perf() {
    // r1: (80 − 50) / (4 − 1) = 10 ms; r2: (570 − 530) / (2 − 1) = 40 ms. Seconds, numpy linear percentiles.
    let v = inference_perf_stage_0();
    let tpot = "successes.latency.time_per_output_token";
    assert_num(&v, &format!("{tpot}.mean"), 0.025);
    assert_num(&v, &format!("{tpot}.min"), 0.01);
    assert_num(&v, &format!("{tpot}.median"), 0.025);
    // p90: 0.01 + 0.9 · 0.03 = 0.037.
    assert_num(&v, &format!("{tpot}.p90"), 0.037);
}

#[test]
fn ttft_waits_for_content_and_itl_is_per_token_like_inference_perf() {
    let v = inference_perf_stage_0();
    // TTFT: r1 50 − 10 = 40 ms (the role-only chunk at 40 does not count), r2 530 − 510 = 20 ms.
    assert_num(&v, "successes.latency.time_to_first_token.mean", 0.03);
    let p999 = v["successes"]["latency"]["time_to_first_token"]["p99.9"]
        .as_f64()
        .unwrap();
    assert!(close(p999, 0.02 + 0.999 * 0.02));
    // ITL: r1's tokens at 50, 60, 80, 80 → 10, 20, 0 ms; r2's 40 ms. Sorted 0, 10, 20, 40: mean 17.5, median 15.
    assert_num(&v, "successes.latency.inter_token_latency.mean", 0.0175);
    assert_num(&v, "successes.latency.inter_token_latency.median", 0.015);
    assert_num(&v, "successes.latency.inter_token_latency.min", 0.0);
    // NTPOT: 90 ms / 4 = 22.5 ms and 90 ms / 2 = 45 ms.
    assert_num(
        &v,
        "successes.latency.normalized_time_per_output_token.mean",
        0.03375,
    );
    assert_num(&v, "successes.latency.request_latency.max", 0.09);
}

#[test]
fn inference_perf_keys_follow_its_percentile_spelling() {
    let v = inference_perf_stage_0();
    let keys: Vec<&String> = v["successes"]["latency"]["request_latency"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        keys,
        [
            "mean", "min", "max", "p0.1", "p1", "p5", "p10", "p25", "median", "p75", "p90", "p95",
            "p99", "p99.9"
        ]
    );
}

#[test]
fn inference_perf_throughput_divides_successes_by_the_whole_window() {
    let v = inference_perf_stage_0();
    // Window: max end 1100 − min sent 10 = 1.09 s, failures included. Input from usage: 10 + 12 = 22; output 6.
    assert_num(&v, "benchmark_time_seconds", 1.09);
    assert_num(&v, "successes.throughput.input_tokens_per_sec", 22.0 / 1.09);
    assert_num(&v, "successes.throughput.output_tokens_per_sec", 6.0 / 1.09);
    assert_num(&v, "successes.throughput.total_tokens_per_sec", 28.0 / 1.09);
    assert_num(&v, "successes.throughput.requests_per_sec", 2.0 / 1.09);
    assert_num(&v, "successes.prompt_tokens.total", 22.0);
    assert_num(&v, "successes.output_len.mean", 3.0);
}

#[test]
fn inference_perf_load_summary_reports_the_send_rate_against_the_requested_one() {
    let v = inference_perf_stage_0();
    // Sends at 10, 510, 1000: send_duration 0.99 s, 3 / 0.99 achieved; delays 10, 10, 0 ms.
    assert_num(&v, "load_summary.count", 3.0);
    assert_num(&v, "load_summary.send_duration", 0.99);
    assert_num(&v, "load_summary.achieved_rate", 3.0 / 0.99);
    assert_num(&v, "load_summary.requested_rate", 2.0);
    assert_num(&v, "load_summary.schedule_delay.mean", 0.02 / 3.0);
    // The whole-run file has no stage rate, so no send accounting, as inference-perf writes it.
    let records = records();
    let all: Vec<&RequestRecord> = records.iter().collect();
    let summary = lifecycle_metrics(&all, &INFERENCE_PERF_PERCENTILES, None, &[]);
    assert!(summary["load_summary"].get("achieved_rate").is_none());
    assert_num(&summary, "load_summary.count", 4.0);
}

#[test]
fn inference_perf_failures_are_labelled_by_status() {
    let v = inference_perf_stage_0();
    assert_num(&v, "failures.count", 1.0);
    assert_num(&v, "failures.request_latency.mean", 0.1);
    let label = &v["failures"]["by_label"]["503 - Service Unavailable"];
    assert_eq!(label["count"], 1);
    assert_eq!(label["messages"][0]["message"], "Service Unavailable");
}

#[test]
fn a_single_token_has_no_ttft_in_inference_perf() {
    // r4 streams one token: one timestamp, so inference-perf reports TTFT and TPOT null; NTPOT = 150 ms / 1.
    let records = records();
    let v = lifecycle_metrics(
        &stage(&records, 1),
        &INFERENCE_PERF_PERCENTILES,
        Some(meta().stages[1]),
        &[],
    );
    assert!(v["successes"]["latency"]["time_to_first_token"].is_null());
    assert!(v["successes"]["latency"]["time_per_output_token"].is_null());
    assert_num(
        &v,
        "successes.latency.normalized_time_per_output_token.mean",
        0.15,
    );
    assert_eq!(v["load_summary"]["concurrency"], 4);
    assert!(v["load_summary"]["requested_rate"].is_null());
}

// ---- vllm ----

fn vllm_stage_0() -> Value {
    let records = records();
    vllm_result(&meta(), 0, &stage(&records, 0))
}

#[test]
fn vllm_ttft_counts_the_role_only_chunk_and_reports_ms() {
    // r1: first choices chunk at 40 → 30 ms; r2: 20 ms. Population std of (30, 20) = 5; p99 = 20 + 0.99 · 10.
    let v = vllm_stage_0();
    assert_num(&v, "mean_ttft_ms", 25.0);
    assert_num(&v, "median_ttft_ms", 25.0);
    assert_num(&v, "std_ttft_ms", 5.0);
    assert_num(&v, "p99_ttft_ms", 29.9);
}

#[test]
fn vllm_tpot_runs_from_ttft_to_the_last_choices_chunk() {
    // r1: E2EL 80 − 10 = 70 ms (the usage chunk at 90 does not count), (70 − 30) / 3 = 13.333333 ms (whole ns);
    // r2: E2EL 570 − 510 = 60, (60 − 20) / 1 = 40.
    let v = vllm_stage_0();
    assert_num(&v, "mean_tpot_ms", (13.333333 + 40.0) / 2.0);
    assert_num(&v, "mean_e2el_ms", 65.0);
    // ITL per choices chunk: r1 40 → 50 → 60 → 80 (10, 10, 20), r2 40: mean 20, median 15.
    assert_num(&v, "mean_itl_ms", 20.0);
    assert_num(&v, "median_itl_ms", 15.0);
}

#[test]
fn vllm_totals_take_the_servers_prompt_tokens_over_the_whole_run() {
    let v = vllm_stage_0();
    // Input from the server's usage 10 + 12 (vLLM 0.32 prefers it to its own 9 + 12); output from usage 4 + 2.
    // Duration 0 → 1100 ms.
    assert_eq!(v["completed"], 2);
    assert_eq!(v["failed"], 1);
    assert_eq!(v["total_input_tokens"], 22);
    assert_eq!(v["total_output_tokens"], 6);
    assert_num(&v, "duration", 1.1);
    assert_num(&v, "request_throughput", 2.0 / 1.1);
    assert_num(&v, "total_token_throughput", 28.0 / 1.1);
    assert_eq!(v["request_rate"], 2.0);
    assert_eq!(v["backend"], "openai-chat");
    assert_eq!(v["date"], "20261122-043512");
    // Chunks with choices per second from the first send (10 ms): r1's 4 and r2's 2 all fall in second 0, and
    // both requests run within it.
    assert_eq!(v["max_output_tokens_per_s"], 6.0);
    assert_eq!(v["max_concurrent_requests"], 2);
    assert!(v.get("ttfts").is_none());
}

#[test]
fn vllm_percentile_keys_drop_a_zero_fraction() {
    let mut meta = meta();
    meta.report.vllm_metric_percentiles = vec![50.0, 99.9];
    meta.report.vllm_percentile_metrics = vec!["ttft".to_owned()];
    let records = records();
    let v = vllm_result(&meta, 0, &stage(&records, 0));
    assert!(v.get("p50_ttft_ms").is_some());
    assert!(v.get("p99.9_ttft_ms").is_some());
    assert!(v.get("mean_itl_ms").is_none());
}

#[test]
fn vllm_file_is_named_like_save_result() {
    let meta = meta();
    assert_eq!(
        vllm_result_file(&meta, 0, false),
        "openai-chat-2.0qps-tiny-model-20261122-043512.json"
    );
    assert_eq!(
        vllm_result_file(&meta, 1, true),
        "openai-chat-infqps-concurrency4-tiny-model-stage1-20261122-043512.json"
    );
}

#[test]
fn vllm_detailed_arrays_list_every_request() {
    let mut meta = meta();
    meta.report.vllm_save_detailed = true;
    let records = records();
    let v = vllm_result(&meta, 0, &stage(&records, 0));
    // The server's prompt tokens where it reported them (r1: 10, not the 9 built), else as built.
    assert_eq!(v["input_lens"], serde_json::json!([10, 12, 8]));
    assert_eq!(v["output_lens"], serde_json::json!([4, 2, 0]));
    assert_eq!(v["errors"][2], "Service Unavailable");
    assert_eq!(v["itls"][1].as_array().unwrap().len(), 1);
}

// ---- guidellm ----

fn guidellm_stage_0() -> Value {
    let records = records();
    let stages = vec![(0, stage(&records, 0)), (1, stage(&records, 1))];
    let report = guidellm_report(&meta(), &stages);
    assert_eq!(report["benchmarks"].as_array().unwrap().len(), 2);
    report["benchmarks"][0]["metrics"].clone()
}

#[test]
fn guidellm_itl_is_tpot_weighted_by_the_gaps() {
    // r1 10 ms over 3 gaps, r2 40 ms over 1: mean (30 + 40) / 4 = 17.5; CDF 0.75 at 10, 1 at 40.
    let m = guidellm_stage_0();
    assert_num(&m, "inter_token_latency_ms.successful.mean", 17.5);
    assert_num(
        &m,
        "inter_token_latency_ms.successful.percentiles.p50",
        10.0,
    );
    assert_num(
        &m,
        "inter_token_latency_ms.successful.percentiles.p90",
        40.0,
    );
    assert_eq!(m["inter_token_latency_ms"]["successful"]["count"], 4);
}

#[test]
fn guidellm_time_per_output_token_includes_the_first_token() {
    // r1: (80 − 10) / 4 = 17.5 ms weighted 4; r2: (570 − 510) / 2 = 30 ms weighted 2 → (70 + 60) / 6.
    let m = guidellm_stage_0();
    assert_num(&m, "time_per_output_token_ms.successful.mean", 130.0 / 6.0);
    // TTFT 40 and 20 ms: guidellm's p50 is the first value reaching half the mass, 20.
    assert_num(&m, "time_to_first_token_ms.successful.mean", 30.0);
    assert_num(
        &m,
        "time_to_first_token_ms.successful.percentiles.p50",
        20.0,
    );
    assert_num(&m, "request_latency.successful.mean", 0.09);
    assert_num(&m, "request_latency.errored.mean", 0.1);
    assert_num(&m, "request_latency.total.count", 3.0);
}

#[test]
fn guidellm_counts_requests_by_status() {
    let m = guidellm_stage_0();
    assert_eq!(
        m["request_totals"],
        serde_json::json!({"successful": 2, "incomplete": 0, "errored": 1, "total": 3})
    );
    assert_num(&m, "output_token_count.successful.total_sum", 6.0);
    assert_eq!(m["request_concurrency"]["successful"]["max"], 1.0);
}

// ---- llm-d report v0.2 ----

fn llmd_stage_0() -> Value {
    let records = records();
    let meta = meta();
    let summary = summary_of(&meta, &records);
    llmd_report_v02(&meta, 0, &stage(&records, 0), &summary.stages[0].summary)
}

fn schema_validator() -> jsonschema::Validator {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/llm-d-benchmark/benchmark_report/br_v0_2_json_schema.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn schema_errors(validator: &jsonschema::Validator, report: &Value) -> Vec<String> {
    validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn llmd_report_validates_against_the_v0_2_schema() {
    let validator = schema_validator();
    let report = llmd_stage_0();
    assert_eq!(schema_errors(&validator, &report), Vec::<String>::new());
    // As written: YAML read back must validate too ("0.2" stays a string, numbers stay numbers).
    let yaml = serde_saphyr::to_string(&report).unwrap();
    let back: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(schema_errors(&validator, &back), Vec::<String>::new());
    assert_eq!(back["version"], "0.2");
}

fn served_stack() -> llmbench_engine::stack::StackMeta {
    let spec = llmbench_engine::stack::StackSpec::new(
        llmbench_engine::stack::StackSource::Serve,
        llmbench_engine::stack::StackInfo {
            schema: None,
            image: Some("vllm/vllm-openai:v0.11.0".to_owned()),
            command: vec!["/usr/bin/vllm".to_owned()],
            args: [
                "serve",
                "Qwen/Qwen3-0.6B",
                "--max-model-len",
                "4096",
                "--enforce-eager",
                "--seed=7",
            ]
            .map(str::to_owned)
            .to_vec(),
            env: [("HF_TOKEN", "hf_x"), ("VLLM_LOGGING_LEVEL", "DEBUG")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into_iter()
                .collect(),
        },
    );
    let probe = |url: &str, body: Value| llmbench_engine::stack::Probe {
        url: url.to_owned(),
        status: Some(200),
        body: Some(body),
        error: None,
        latency_ms: 1.0,
    };
    spec.meta(
        probe(
            "http://s/v1/models",
            serde_json::json!({"object": "list", "data": [{"id": "Qwen/Qwen3-0.6B"}]}),
        ),
        probe("http://s/version", serde_json::json!({"version": "0.11.0"})),
    )
}

#[test]
fn llmd_report_describes_the_stack_under_test_and_still_validates() {
    let records = records();
    let mut meta = meta();
    assert!(llmd_stage_0()["scenario"].get("stack").is_none());
    meta.stack = Some(served_stack());
    let summary = summary_of(&meta, &records);
    let report = llmd_report_v02(&meta, 0, &stage(&records, 0), &summary.stages[0].summary);
    assert_eq!(
        schema_errors(&schema_validator(), &report),
        Vec::<String>::new()
    );
    let component = &report["scenario"]["stack"][0];
    let standardized = &component["standardized"];
    assert_eq!(standardized["kind"], "generic");
    assert_eq!(standardized["tool"], "vllm");
    assert_eq!(standardized["tool_version"], "0.11.0");
    assert_eq!(standardized["model"]["name"], "Qwen/Qwen3-0.6B");
    // Flags as upstream's example lists them; positional arguments are not flags.
    assert_eq!(
        component["native"]["args"],
        serde_json::json!({"--max-model-len": "4096", "--enforce-eager": null, "--seed": "7"})
    );
    assert_eq!(component["native"]["envars"]["HF_TOKEN"], "<redacted>");
    assert_eq!(
        component["native"]["config"]["command"][2],
        "Qwen/Qwen3-0.6B"
    );
    // The configuration id is stable and follows the configuration.
    let id = component["metadata"]["cfg_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 16);
    let again = llmd_report_v02(&meta, 0, &stage(&records, 0), &summary.stages[0].summary);
    assert_eq!(
        again["scenario"]["stack"][0]["metadata"]["cfg_id"],
        id.as_str()
    );
    if let Some(stack) = &mut meta.stack {
        stack.args.push("--tensor-parallel-size=2".to_owned());
    }
    let other = llmd_report_v02(&meta, 0, &stage(&records, 0), &summary.stages[0].summary);
    assert_ne!(
        other["scenario"]["stack"][0]["metadata"]["cfg_id"],
        id.as_str()
    );
    // And the run's summary carries the stack in brief.
    let summary = super::summarize_run(&meta, &records);
    assert_eq!(
        summary.engine.map(|e| e.version),
        Some(Some("0.11.0".to_owned()))
    );
}

#[test]
fn llmd_report_describes_a_server_nobody_described_from_its_own_answers_and_still_validates() {
    let records = records();
    let mut meta = meta();
    let llama = |path: &str| {
        let file = format!(
            "{}/../../launcher/tests/fixtures/server_identity/{path}",
            env!("CARGO_MANIFEST_DIR")
        );
        llmbench_engine::stack::Probe {
            url: format!("http://s/{path}"),
            status: Some(200),
            body: Some(serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()),
            error: None,
            latency_ms: 1.0,
        }
    };
    let missing = llmbench_engine::stack::Probe {
        url: "http://s/missing".to_owned(),
        status: Some(404),
        body: None,
        error: Some("HTTP 404".to_owned()),
        latency_ms: 1.0,
    };
    meta.server = Some(llmbench_engine::stack::identity::identify(
        &llmbench_engine::stack::identity::Answers {
            models: llama("llamacpp_models.json"),
            version: missing.clone(),
            props: llama("llamacpp_props.json"),
            server_info: missing.clone(),
            info: missing,
        },
    ));
    let summary = summary_of(&meta, &records);
    let report = llmd_report_v02(&meta, 0, &stage(&records, 0), &summary.stages[0].summary);
    assert_eq!(
        schema_errors(&schema_validator(), &report),
        Vec::<String>::new()
    );
    let component = &report["scenario"]["stack"][0];
    assert_eq!(component["standardized"]["tool"], "llama.cpp");
    assert_eq!(component["standardized"]["tool_version"], "b0-unknown");
    // No test answer named a model: the listed one the requests name, else the first listed.
    assert_eq!(
        component["standardized"]["model"]["name"],
        "/models/tiny.gguf"
    );
    assert_eq!(
        component["metadata"]["description"],
        "the stack under test (as its answers describe it)"
    );
    assert_eq!(
        component["native"]["config"]["server"]["settings"]["n_ctx"],
        1024
    );
    // The summary's engine in brief: the engine, its build, the model.
    let engine = super::summarize_run(&meta, &records)
        .engine
        .expect("an engine");
    assert_eq!(
        (
            engine.name.as_deref(),
            engine.version.as_deref(),
            engine.model.as_deref()
        ),
        (
            Some("llama.cpp"),
            Some("b0-unknown"),
            Some("/models/tiny.gguf")
        )
    );
}

#[test]
fn flags_are_mapped_as_upstream_lists_them() {
    let args = [
        "serve", "m", "--a", "1", "--b", "--c=x=y", "-tp", "2", "--neg", "-1", "--last",
    ]
    .map(str::to_owned);
    assert_eq!(
        Value::Object(super::llmd::flag_map(&args)),
        serde_json::json!({"--a": "1", "--b": null, "--c": "x=y", "-tp": "2", "--neg": "-1", "--last": null})
    );
}

#[test]
fn llmd_schema_check_fails_without_a_required_field() {
    let validator = schema_validator();
    let mut report = llmd_stage_0();
    report["results"]["request_performance"]["aggregate"]["requests"]
        .as_object_mut()
        .unwrap()
        .remove("total");
    assert!(!validator.is_valid(&report));
    let mut report = llmd_stage_0();
    report["run"].as_object_mut().unwrap().remove("uid");
    assert!(!validator.is_valid(&report));
    let mut report = llmd_stage_0();
    report["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
        .as_object_mut()
        .unwrap()
        .remove("units");
    assert!(!validator.is_valid(&report));
}

#[test]
fn llmd_report_uses_inference_perf_definitions_in_seconds() {
    let v = llmd_stage_0();
    let latency = &v["results"]["request_performance"]["aggregate"]["latency"];
    assert_eq!(latency["time_to_first_token"]["units"], "s");
    assert_num(latency, "time_to_first_token.mean", 0.03);
    // Sample stddev (ddof = 1) of 40 and 20 ms: sqrt(2 · 10²) = 14.142 ms.
    assert_num(latency, "time_to_first_token.stddev", 0.02f64.sqrt() / 10.0);
    assert_eq!(latency["time_per_output_token"]["units"], "s/token");
    assert_num(latency, "time_per_output_token.p50", 0.025);
    // ITL sorted 0, 10, 20, 40 ms: p0.1 at index 3 · 0.001 = 0.003 → 0.003 · 10 ms.
    assert_num(latency, "inter_token_latency.p0p1", 0.00003);
    let aggregate = &v["results"]["request_performance"]["aggregate"];
    assert_eq!(aggregate["requests"]["total"], 3);
    assert_eq!(aggregate["requests"]["failures"], 1);
    assert_num(aggregate, "throughput.request_rate.mean", 2.0 / 1.09);
    assert_eq!(
        aggregate["throughput"]["request_rate"]["units"],
        "queries/s"
    );
    // Sends 10 → 1000 ms after t0; the report spans the first send to the last end.
    assert_eq!(v["run"]["time"]["start"], "2026-11-22T04:35:12.010Z");
    assert_eq!(v["run"]["time"]["end"], "2026-11-22T04:35:13.100Z");
    assert_eq!(v["run"]["time"]["duration"], "PT1.09S");
    assert_eq!(v["scenario"]["load"]["standardized"]["rate_qps"], 2.0);
    assert_eq!(
        v["scenario"]["load"]["standardized"]["tool"],
        "inference-perf"
    );
}

// ---- formats, run.json, report_dir, table ----

#[test]
fn each_harness_writes_its_own_format_and_the_llmd_report() {
    let f = Formats::for_harness(Harness::InferencePerf);
    assert!(f.inference_perf && f.llmd_v02 && !f.vllm && !f.guidellm);
    assert!(Formats::for_harness(Harness::Guidellm).guidellm);
    assert!(Formats::for_harness(Harness::VllmBenchmark).vllm);
    assert!(Formats::for_harness(Harness::Inferencemax).vllm);
    let nop = Formats::for_harness(Harness::Nop);
    assert!(nop.llmd_v02 && !nop.inference_perf && !nop.vllm && !nop.guidellm);
}

#[test]
fn run_meta_round_trips_through_run_json() {
    let dir = temp_dir("meta");
    let meta = meta();
    let path = meta.write(&dir).unwrap();
    assert_eq!(path, dir.join("run.json"));
    assert_eq!(RunMeta::read(&dir).unwrap(), meta);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"harness\": \"inference-perf\""));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shard_is_asked_its_share_of_the_rate() {
    let mut meta = meta();
    meta.shard = ShardMeta { index: 1, count: 4 };
    assert_eq!(meta.shard_requested_rates(), vec![Some(0.5), None]);
    assert!(close(meta.unix_s(1_500_000_000), 1_795_322_113.5));
}

#[test]
fn missing_run_json_names_the_file() {
    let dir = temp_dir("missing");
    let err = report_dir(&dir, None, None, &crate::plot::RunPictures).unwrap_err();
    assert!(
        matches!(&err, ReportError::Read { path, .. } if path.ends_with("run.json")),
        "{err}"
    );
    assert!(err.to_string().contains("run.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_dir_rebuilds_everything_from_a_killed_run() {
    let dir = temp_dir("rebuild");
    let meta = meta();
    meta.write(&dir).unwrap();
    let records = records();
    let mut text: String = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    // A launcher killed mid-write leaves half a line.
    let torn = serde_json::to_string(&records[0]).unwrap();
    text.push_str(&torn[..torn.len() / 2]);
    // An earlier version's records, as JSON lines: still read.
    std::fs::write(dir.join(REQUESTS_JSONL_FILE), text).unwrap();
    let compact = dir.join("termination-log");

    let outcome = report_dir(&dir, Some(&compact), None, &crate::plot::RunPictures).unwrap();
    assert_eq!(outcome.truncated_lines, 1);
    // Its run.json has no end: the summary says the run is incomplete, with what it recorded.
    let mut expected = summary_of(&meta, &records);
    expected.run = Some(llmbench_metrics::metrics::Completion {
        state: llmbench_metrics::metrics::RunState::Incomplete,
        stopped: None,
        planned: None,
        sent: None,
        finished: records.len() as u64,
    });
    assert_eq!(outcome.summary, expected);
    let names: Vec<String> = outcome
        .files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "summary.json",
            "summary_lifecycle_metrics.json",
            "stage_0_lifecycle_metrics.json",
            "stage_1_lifecycle_metrics.json",
            "benchmark_report_v0.2,_stage_0.yaml",
            "benchmark_report_v0.2,_stage_1.yaml",
        ]
    );
    for file in &outcome.files {
        assert!(file.exists(), "{} missing", file.display());
    }
    assert!(compact.exists());
    let stage_1: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("stage_1_lifecycle_metrics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stage_1["successes"]["count"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_all_writes_every_format_when_asked() {
    let dir = temp_dir("all");
    let meta = meta();
    let records = records();
    let summary = summary_of(&meta, &records);
    let files = write_all(&dir, &meta, &records, &summary, Formats::ALL).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"benchmarks.json".to_owned()));
    assert!(
        names.contains(&"openai-chat-2.0qps-tiny-model-stage0-20261122-043512.json".to_owned())
    );
    assert!(names.contains(&"profile_export_aiperf.json".to_owned()));
    assert!(names.contains(&"profile_export_aiperf.csv".to_owned()));
    assert!(names.contains(&"profile_export.jsonl".to_owned()));
    // The two stages are two AIPerf phases: each one's JSON and CSV under `phases/`, and their manifest.
    assert!(names.contains(&"phase_manifest.json".to_owned()));
    assert!(
        dir.join("phases/profiling/profile_export_aiperf.json")
            .exists()
    );
    assert!(
        dir.join("phases/profiling_1/profile_export_aiperf.csv")
            .exists()
    );
    assert_eq!(names.len(), 3 + 2 + 1 + 2 + 3 + 5);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tables_have_a_row_per_stage_and_one_for_the_run_within_a_laptop_terminal() {
    let meta = meta();
    let summary = summary_of(&meta, &records());
    let table = print_table(&summary);
    let lines: Vec<&str> = table.lines().collect();
    // The load table, a blank line, the latency table.
    assert_eq!(lines.len(), 9, "{table}");
    assert!(lines[0].starts_with("stage") && lines[0].contains("sent/s (asked)"));
    assert!(lines[1].starts_with("0 "));
    assert!(lines[3].starts_with("all"));
    assert_eq!(lines[4], "");
    assert!(lines[5].starts_with("stage") && lines[5].contains("TTFT ms p50/p90/p99"));
    // Stage 0: 2 ok, 1 failed; sent 3/0.99 s = 3.03 asked 2; TTFT 40 and 20 ms: p50 30, p90 38, p99 39.8.
    assert!(lines[1].contains("3.03 (2.00)"), "{table}");
    assert!(lines[6].contains("30.0/38.0/39.8"), "{table}");
    // Columns line up: every row's TTFT column ends at the same place as the header's.
    let header_end = lines[5].find("TTFT ms p50/p90/p99").unwrap() + "TTFT ms p50/p90/p99".len();
    assert_eq!(
        &lines[6][header_end - "30.0/38.0/39.8".len()..header_end],
        "30.0/38.0/39.8"
    );
    for line in &lines {
        assert!(line.chars().count() <= TERMINAL_COLUMNS, "too wide: {line}");
    }
}

#[test]
fn the_printed_run_opens_with_the_headline_and_ends_with_the_failures() {
    let meta = meta();
    let summary = summary_of(&meta, &records());
    let text = print_run(&meta, &summary);
    assert!(text.starts_with("run "), "{text}");
    let verdict = text.lines().position(|l| l.starts_with("verdict")).unwrap();
    let stages = text.lines().position(|l| l.starts_with("stage")).unwrap();
    assert!(verdict < stages, "{text}");
    // r3's HTTP 503, after the tables.
    let failures = text.find("\nfailures\nerror").expect("a failures table");
    assert!(failures > text.find("TTFT ms").unwrap(), "{text}");
    assert!(text.contains("http_status   503      1  25.0%  "), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= TERMINAL_COLUMNS, "too wide: {line}");
    }
}

#[test]
fn vllm_counts_a_stream_without_a_choices_chunk_as_failed() {
    // A stream that ended with [DONE] but never carried a choices chunk: a success by its framing, a failure by
    // vLLM's rule.
    let mut empty = record(9, 0, 0, 10, 20, &[]);
    empty.streaming = true;
    empty.chunks.clear();
    assert!(empty.succeeded());
    let v = vllm_result(&meta(), 0, &[&empty]);
    assert_eq!(v["completed"], 0);
    assert_eq!(v["failed"], 1);
}

#[test]
fn inference_perf_files_follow_the_request_lifecycle_switches() {
    let dir = temp_dir("lifecycle-switches");
    let records = records();
    let mut meta = meta();
    meta.report.inference_perf_summary = false;
    meta.report.inference_perf_per_request = true;
    let summary = summary_of(&meta, &records);
    let formats = Formats {
        inference_perf: true,
        ..Formats::default()
    };
    let names = |files: Vec<std::path::PathBuf>| -> Vec<String> {
        files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let files = write_all(&dir, &meta, &records, &summary, formats).unwrap();
    assert_eq!(
        names(files),
        [
            "stage_0_lifecycle_metrics.json",
            "stage_1_lifecycle_metrics.json",
            "per_request_lifecycle_metrics.json",
        ]
    );
    meta.report.inference_perf_summary = true;
    meta.report.inference_perf_per_stage = false;
    meta.report.inference_perf_per_request = false;
    let files = write_all(&dir, &meta, &records, &summary, formats).unwrap();
    assert_eq!(names(files), ["summary_lifecycle_metrics.json"]);
}

#[test]
fn vllm_writes_the_burstiness_the_profile_asked_for() {
    let records = records();
    let mut meta = meta();
    assert_eq!(
        vllm_result(&meta, 0, &stage(&records, 0))["burstiness"],
        1.0
    );
    meta.stages[0].burstiness = Some(Burstiness::of(0.5));
    assert_eq!(
        vllm_result(&meta, 0, &stage(&records, 0))["burstiness"],
        0.5
    );
    meta.stages[0].burstiness = Some(Burstiness::of(f64::INFINITY));
    assert_eq!(
        vllm_result(&meta, 0, &stage(&records, 0))["burstiness"],
        "inf"
    );
    // run.json keeps it through a round trip.
    let back: StageMeta =
        serde_json::from_value(serde_json::to_value(meta.stages[0]).unwrap()).unwrap();
    assert_eq!(back, meta.stages[0]);
}

// ---- prefix cache ----

/// The fixture's records with stage 0's two successes reporting cached tokens as vLLM does: the first (10 prompt
/// tokens) with no details (a miss), the second 8 of its 12.
fn records_with_cache_hits() -> Vec<RequestRecord> {
    let mut records = records();
    if let Some(usage) = records[1].usage.as_mut() {
        usage.cached_tokens = Some(8);
    }
    records
}

#[test]
fn reported_cached_tokens_reach_every_report_of_the_stage() {
    let records = records_with_cache_hits();
    let meta = meta();
    let summary = summary_of(&meta, &records);
    // 8 cached of 10 + 12 prompt tokens.
    let hits = summary.stages[0].summary.prefix_cache.expect("reported");
    assert_eq!(hits.hit_rate, 8.0 / 22.0);
    assert_eq!(summary.stages[1].summary.prefix_cache, None);

    // inference-perf sums them as summarize_prompt_token_usage does.
    let stage0 = lifecycle_metrics(
        &stage(&records, 0),
        &INFERENCE_PERF_PERCENTILES,
        Some(meta.stages[0]),
        &[],
    );
    assert_num(&stage0, "successes.prompt_tokens.total", 22.0);
    assert_num(&stage0, "successes.prompt_tokens.cached", 8.0);
    assert_num(&stage0, "successes.prompt_tokens.uncached", 14.0);
    let per_request = per_request_lifecycle(&stage(&records, 0));
    let usage = |i: usize| &per_request[i]["info"]["response_metrics"]["server_usage"];
    assert!(usage(0).get("prompt_tokens_details").is_none());
    assert_eq!(
        usage(1)["prompt_tokens_details"],
        serde_json::json!({"cached_tokens": 8})
    );

    // The llm-d report carries it as an llmbench extension of results.observability, and still validates.
    let report = llmd_report_v02(&meta, 0, &stage(&records, 0), &summary.stages[0].summary);
    let extension = &report["results"]["observability"][LLMD_PREFIX_CACHE_KEY];
    assert_num(extension, "hit_rate.mean", 800.0 / 22.0);
    assert_eq!(extension["hit_rate"]["units"], "percent");
    assert_eq!(extension["requests_with_usage"], 2);
    assert_eq!(extension["requests_reporting"], 1);
    assert_eq!(
        schema_errors(&schema_validator(), &report),
        Vec::<String>::new()
    );
    // The run without reports has none.
    let plain = llmd_stage_0();
    assert!(plain["results"].get("observability").is_none());

    // The compact summary and the table say it too.
    let compact: Value =
        serde_json::from_str(&llmbench_metrics::metrics::compact_summary(&summary)).unwrap();
    assert_num(&compact, "prefix_cache_hit_rate", 8.0 / 22.0);
    assert_num(&compact["stages"][0], "prefix_cache_hit_rate", 8.0 / 22.0);
    assert!(compact["stages"][1].get("prefix_cache_hit_rate").is_none());
    let table = print_table(&summary);
    assert!(
        table.contains(
            "prefix cache hits reported by the server: 36.4% of 22 prompt tokens (1 of 2 requests with usage \
             reported cached_tokens); stage 0 36.4%, stage 1 -"
        ),
        "{table}"
    );
}

// ---- answers cut short, and reasoning ----

/// Stage 0's records with r2 asked for exactly 4 tokens (`ignore_eos`) and given 2, stopped at a length limit.
fn with_a_truncated_answer() -> Vec<RequestRecord> {
    let mut records = records();
    records[1].ignore_eos = true;
    records[1].finish_reason = Some(llmbench_model::record::FinishReason::Length);
    records
}

#[test]
fn inference_perf_records_an_answer_cut_short_as_a_truncated_response_error() {
    let records = with_a_truncated_answer();
    let v = lifecycle_metrics(
        &stage(&records, 0),
        &INFERENCE_PERF_PERCENTILES,
        Some(meta().stages[0]),
        &[],
    );
    assert_num(&v, "successes.count", 1.0);
    assert_num(&v, "failures.count", 2.0);
    let label = &v["failures"]["by_label"]["truncatedresponseerror"];
    assert_eq!(label["count"], 1);
    assert_eq!(
        label["messages"][0]["message"],
        "delivered 2 of 4 requested output tokens (finish_reason length)"
    );
    let per_request = per_request_lifecycle(&stage(&records, 0));
    assert_eq!(
        per_request[1]["error"]["error_type"],
        "TruncatedResponseError"
    );
    assert_eq!(per_request[1]["max_tokens"], 4);
    assert_eq!(
        per_request[1]["info"]["response_metrics"]["finish_reason"],
        "length"
    );
    assert!(per_request[0]["error"].is_null());
    assert!(per_request[0]["info"]["response_metrics"]["finish_reason"].is_null());
}

#[test]
fn vllm_and_guidellm_count_an_answer_cut_short_as_their_tools_do_a_success() {
    let records = with_a_truncated_answer();
    let vllm = vllm_result(&meta(), 0, &stage(&records, 0));
    assert_eq!(vllm["completed"], 2);
    let report = guidellm_report(&meta(), &[(0, stage(&records, 0))]);
    assert_eq!(
        report["benchmarks"][0]["metrics"]["request_totals"]["successful"],
        2
    );
    // llmbench's own summary counts it apart.
    let summary = summary_of(&meta(), &records);
    assert_eq!(summary.stages[0].summary.requests.truncated, 1);
    assert_eq!(summary.stages[0].summary.requests.succeeded, 1);
}

#[test]
fn guidellm_reports_ttfo_past_the_reasoning() {
    let mut records = records();
    // r1's chunks at 50 and 60 ms reasoned: TTFT stays 40 ms after its send at 10 (the first token), TTFO is 70
    // (the content at 80); r2 has no reasoning, its TTFO is its TTFT, 20.
    for chunk in &mut records[0].chunks[1..3] {
        chunk.kind = ChunkKind::Reasoning { tokens: 1 };
    }
    let report = guidellm_report(&meta(), &[(0, stage(&records, 0))]);
    let m = &report["benchmarks"][0]["metrics"];
    assert_num(m, "time_to_first_token_ms.successful.mean", 30.0);
    assert_num(m, "time_to_first_output_token_ms.successful.mean", 45.0);
}

/// A run directory with `end` in its run.json, records 1, 2, 3 (stage 0) and 4 (stage 1), and a sent log of a
/// warm-up (0), 1, 2, 3 and 6 in stage 0 and 4 and 5 in stage 1.
fn run_with_sent_log(name: &str, end: Option<RunEnd>) -> PathBuf {
    use llmbench_model::sent::{SENT_FILE, SentEntry, write_header};
    let dir = temp_dir(name);
    let mut meta = meta();
    meta.end = end;
    meta.write(&dir).unwrap();
    // Records 1, 2, 3 (stage 0) and 4 (stage 1) came back.
    let records = records();
    std::fs::write(dir.join(REQUESTS_FILE), file_bytes(&records)).unwrap();
    let sent = |id: u64, stage: u32, warmup: bool| SentEntry {
        id,
        stage,
        scheduled_ns: 100 * id,
        sent_ns: 100 * id + 1,
        input_tokens: 9,
        max_tokens: None,
        warmup,
    };
    let mut log = Vec::new();
    write_header(&mut log).unwrap();
    for entry in [
        sent(0, 0, true),
        sent(1, 0, false),
        sent(2, 0, false),
        sent(3, 0, false),
        sent(4, 1, false),
        sent(5, 1, false),
        sent(6, 0, false),
    ] {
        entry.write_to(&mut log).unwrap();
    }
    std::fs::write(dir.join(SENT_FILE), log).unwrap();
    dir
}

#[test]
fn report_dir_of_a_killed_run_counts_the_requests_it_sent_and_never_recorded_per_stage() {
    // Sent: a warm-up (0) and 6 in stage 0, 5 in stage 1, none of them recorded.
    let dir = run_with_sent_log("lost", None);

    let outcome = report_dir(&dir, None, None, &crate::plot::RunPictures).unwrap();
    let summary = &outcome.summary;
    let run = summary.run.expect("the run is incomplete");
    assert_eq!(run.sent, Some(7));
    assert_eq!(run.finished, 4);
    // The warm-up is lost too, but, as its record would be, left out of the figures' counts.
    assert_eq!(summary.overall.requests.lost_in_flight, 2);
    assert_eq!(summary.overall.requests.total, 4);
    let lost_in = |stage: u32| {
        summary
            .stages
            .iter()
            .find(|s| s.stage == stage)
            .map(|s| s.summary.requests.lost_in_flight)
    };
    assert_eq!((lost_in(0), lost_in(1)), (Some(1), Some(1)));
    let list = std::fs::read_to_string(dir.join(LOST_IN_FLIGHT_FILE)).unwrap();
    let ids: Vec<u64> = list
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, [0, 5, 6]);
    assert!(list.lines().next().unwrap().contains(r#""warmup":true"#));
    assert!(outcome.files.contains(&dir.join(LOST_IN_FLIGHT_FILE)));
    let words = headline::killed_run(&run, 2);
    assert!(
        words.ends_with(
            "4 requests recorded of 7 sent; 2 requests were in flight when the run was killed; their answers \
             are lost (lost_in_flight.jsonl)"
        ),
        "{words}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_dir_of_a_run_whose_records_file_failed_counts_the_sent_requests_it_refused() {
    let ended = |stopped| RunEnd {
        state: RunState::Stopped,
        stopped: Some(stopped),
        planned: Some(10),
        sent: 7,
        finished: 7,
        stages: Vec::new(),
        failed: None,
    };
    // The records file refused 0, 5 and 6: lost as a killed run's would be, the warm-up out of the counts.
    let dir = run_with_sent_log(
        "refused",
        Some(ended(
            llmbench_engine::engine::StopReason::RecordsUnwritable,
        )),
    );
    let outcome = report_dir(&dir, None, None, &crate::plot::RunPictures).unwrap();
    let summary = &outcome.summary;
    assert_eq!(summary.run.and_then(|r| r.sent), Some(7));
    assert_eq!(summary.overall.requests.total, 4);
    assert_eq!(summary.overall.requests.lost_in_flight, 2);
    let list = std::fs::read_to_string(dir.join(LOST_IN_FLIGHT_FILE)).unwrap();
    assert_eq!(list.lines().count(), 3);
    assert_eq!(
        headline::unrecorded(2),
        "; 2 requests sent have no record: the records file refused them (lost_in_flight.jsonl)"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // A run that ended otherwise removed its sent log; one left behind says nothing of lost requests.
    let dir = run_with_sent_log(
        "interrupted",
        Some(ended(llmbench_engine::engine::StopReason::Interrupted {
            signal: llmbench_engine::engine::Signal::Sigterm,
        })),
    );
    let outcome = report_dir(&dir, None, None, &crate::plot::RunPictures).unwrap();
    assert_eq!(outcome.summary.overall.requests.lost_in_flight, 0);
    assert!(!dir.join(LOST_IN_FLIGHT_FILE).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sharded_run_with_a_killed_shard_counts_what_each_shard_sent() {
    use llmbench_model::sent::{SENT_FILE, SentEntry, write_header};
    let dir = temp_dir("lost-shards");
    let request = |id: u64| {
        RequestRecord::builder(id)
            .sent(1_000_000 * id)
            .end(1_000_000 * id + 500_000)
            .input_tokens(9)
            .ok()
            .content_at(1_000_000 * id + 400_000, 1)
            .build()
    };
    let write_records = |shard: &Path, ids: &[u64]| {
        let records: Vec<_> = ids.iter().map(|id| request(*id)).collect();
        std::fs::write(shard.join(REQUESTS_FILE), file_bytes(&records)).unwrap();
    };
    // Shard 0 ended: it sent and recorded 2.
    let shard_0 = dir.join("shard-0");
    std::fs::create_dir_all(&shard_0).unwrap();
    let mut ended = meta();
    ended.shard = ShardMeta { index: 0, count: 2 };
    ended.end = Some(RunEnd {
        state: RunState::Complete,
        stopped: None,
        planned: None,
        sent: 2,
        finished: 2,
        stages: vec![
            StageEnd {
                began_ns: None,
                start_ns: 0,
                end_ns: 10_000_000,
                stopped: None,
                sessions: Vec::new(),
            };
            2
        ],
        failed: None,
    });
    ended.write(&shard_0).unwrap();
    write_records(&shard_0, &[0, 1]);
    // Shard 1 was killed: it sent 3 (its own ids 0, 1, 2) and recorded one.
    let shard_1 = dir.join("shard-1");
    std::fs::create_dir_all(&shard_1).unwrap();
    let mut killed = meta();
    killed.shard = ShardMeta { index: 1, count: 2 };
    killed.write(&shard_1).unwrap();
    write_records(&shard_1, &[1]);
    let mut log = Vec::new();
    write_header(&mut log).unwrap();
    for id in 0..3 {
        SentEntry {
            id,
            stage: 0,
            scheduled_ns: 1_000_000 * id,
            sent_ns: 1_000_000 * id,
            input_tokens: 9,
            max_tokens: None,
            warmup: false,
        }
        .write_to(&mut log)
        .unwrap();
    }
    std::fs::write(shard_1.join(SENT_FILE), log).unwrap();

    let outcome = report_dir(&dir, None, None, &crate::plot::RunPictures).unwrap();
    let run = outcome.summary.run.expect("the merged run is incomplete");
    assert_eq!(run.state, RunState::Incomplete);
    assert_eq!((run.sent, run.finished), (Some(5), 3));
    assert_eq!(outcome.summary.overall.requests.lost_in_flight, 2);
    // Listed at the run's root, each with the shard that sent it and its id there.
    let list = std::fs::read_to_string(dir.join(LOST_IN_FLIGHT_FILE)).unwrap();
    let lost: Vec<(u64, u64)> = list
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["shard"].as_u64().unwrap(), v["id"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(lost, [(1, 0), (1, 2)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_report_file_is_replaced_whole_or_left_as_it_was() {
    let dir = temp_dir("whole");
    let path = dir.join(RUN_META_FILE);
    write_text(&path, "first").unwrap();
    write_text(&path, "second").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
    assert!(!dir.join("run.json.partial").exists());
    // A write that fails part way (here: its file beside cannot be made) leaves the earlier file whole.
    std::fs::create_dir(dir.join("run.json.partial")).unwrap();
    let error = write_text(&path, "third").unwrap_err();
    assert!(error.to_string().contains("run.json"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
    std::fs::remove_dir_all(&dir).unwrap();
}
