//! Prefix caching end to end: an inference-perf `shared_prefix` profile run against the embedded simulator reports,
//! per stage and for the run, the prefix-cache hit rate its prompts must produce, worked out by hand.

mod common;

use serde_json::Value;

use common::*;

#[test]
fn a_shared_prefix_run_reports_the_hit_rate_its_prompts_predict() {
    let dir = tempfile::tempdir().expect("tmp");
    // One group: every prompt is the group's 32-token system prompt and an 8-token question, 40 tokens (the
    // builtin tokenizer counts as the simulator does). Two stages of 4 requests, one at a time.
    let profile = write(
        dir.path(),
        "sp.yaml",
        "server: {type: vllm, base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model_name: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, ignore_eos: true}\napi: {type: completion, streaming: true}\n\
         data:\n  type: shared_prefix\n  shared_prefix: {num_groups: 1, num_prompts_per_group: 4, system_prompt_len: 32, \
         question_len: 8, output_len: 2}\nload:\n  type: concurrent\n  stages: [{num_requests: 4, concurrency_level: 1}, \
         {num_requests: 4, concurrency_level: 1}]\n",
    );
    let output = run_profile(dir.path(), "inference-perf", &profile, "sp", &[]);
    succeeded(&output);
    let run = dir.path().join("sp");

    // The simulator's blocks are 16 tokens: a prompt has 2 full blocks (tokens 0–31, the system prompt; the
    // question's 8 tokens never fill a third). The run's first request finds nothing and caches both; every later
    // one finds both, and the cap of 40 − 1 = 39 tokens still allows 2 whole blocks: 32 cached tokens.
    // Stage 0: (0 + 3 × 32) / (4 × 40) = 0.6; stage 1: 4 × 32 / 160 = 0.8; the run: 224 / 320 = 0.7.
    let summary = json(&run.join("summary.json"));
    let stage = |i: usize| &summary["stages"][i]["prefix_cache"];
    assert_eq!(stage(0)["hit_rate"], 0.6, "{summary:#}");
    assert_eq!(stage(0)["cached_tokens"], 96);
    assert_eq!(stage(0)["prompt_tokens"], 160);
    // vLLM (and the simulator) leave prompt_tokens_details out when nothing hit: 3 of 4 reported.
    assert_eq!(stage(0)["requests_with_usage"], 4);
    assert_eq!(stage(0)["requests_reporting"], 3);
    assert_eq!(stage(1)["hit_rate"], 0.8);
    assert_eq!(stage(1)["requests_reporting"], 4);
    assert_eq!(summary["prefix_cache"]["hit_rate"], 0.7);
    assert_eq!(summary["prefix_cache"]["cached_tokens"], 224);

    // The records keep what the server said, and nothing where it said nothing.
    let records: Vec<Value> = common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("record"))
        .collect();
    let mut cached: Vec<(u64, Option<u64>)> = records
        .iter()
        .map(|r| {
            (
                r["sent_ns"].as_u64().expect("sent"),
                r["usage"]["cached_tokens"].as_u64(),
            )
        })
        .collect();
    cached.sort();
    let cached: Vec<Option<u64>> = cached.into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        cached,
        [
            None,
            Some(32),
            Some(32),
            Some(32),
            Some(32),
            Some(32),
            Some(32),
            Some(32)
        ]
    );
    assert!(records.iter().all(|r| r["usage"]["prompt_tokens"] == 40));

    // inference-perf's own files sum them as it does.
    let stage0 = json(&run.join("stage_0_lifecycle_metrics.json"));
    assert_eq!(stage0["successes"]["prompt_tokens"]["cached"], 96.0);
    assert_eq!(stage0["successes"]["prompt_tokens"]["uncached"], 64.0);

    // The llm-d report of stage 1 carries it as llmbench's extension, in percent.
    let report = std::fs::read_to_string(run.join("benchmark_report_v0.2,_stage_1.yaml"))
        .expect("llm-d report");
    let report: Value = serde_saphyr::from_str(&report).expect("YAML");
    assert_eq!(
        report["results"]["observability"]["llmbench_prefix_cache"]["hit_rate"]["mean"],
        80.0
    );

    // And the table printed at the end of the run says so.
    assert!(
        stdout(&output).contains(
            "prefix cache hits reported by the server: 70.0% of 320 prompt tokens (7 of 8 requests with usage \
             reported cached_tokens); stage 0 60.0%, stage 1 80.0%"
        ),
        "{}",
        stdout(&output)
    );
}
