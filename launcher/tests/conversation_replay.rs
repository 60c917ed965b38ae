//! inference-perf `conversation_replay` through the real binary against the embedded simulator: a bundled
//! profile shrunk with `--override`, and a two-stage profile, every request recorded with the turn it was.

mod common;

use std::path::Path;

use serde_json::Value;

use common::*;

fn records(run: &Path) -> Vec<Value> {
    common::requests_jsonl(&run.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect()
}

/// (stage, conversation, turn, prompt tokens, sent_ns, end_ns) of every record, in send order.
fn turns(records: &[Value]) -> Vec<(u64, u64, u64, u64, u64, u64)> {
    let mut out: Vec<_> = records
        .iter()
        .map(|r| {
            assert!(r.get("error").is_none(), "{r}");
            let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{r}"));
            (
                n(&r["stage"]),
                n(&r["conversation"]["id"]),
                n(&r["conversation"]["turn"]),
                n(&r["usage"]["prompt_tokens"]),
                n(&r["sent_ns"]),
                n(&r["end_ns"]),
            )
        })
        .collect();
    out.sort_by_key(|t| t.4);
    out
}

/// The P2P guide shrunk to 2 conversations of 3 turns: a 4-token shared prompt, a 2-token dynamic one, 5-token
/// turns, 3-token answers and 1 s of tool-call latency; 5 requests, 2 at a time. By hand: request i is turn
/// i div 2 of conversation i mod 2, so the stage ends after conversation 0's third turn and conversation 1's
/// second. A turn's prompt is 4 + 2 + 5 = 11 tokens, then each turn adds the last answer and its own 5: 19, 27.
#[test]
fn a_shrunk_bundled_profile_replays_its_conversations_with_think_time() {
    let dir = tempfile::tempdir().expect("tmp");
    let c = "data.conversation_replay";
    let mut args: Vec<String> = vec![
        format!("{c}.num_conversations=2"),
        format!("{c}.shared_system_prompt_len=4"),
        "load.stages.0.num_requests=5".to_owned(),
        "load.stages.0.concurrency_level=2".to_owned(),
    ];
    for (key, value) in [
        ("dynamic_system_prompt_len", 2),
        ("turns_per_conversation", 3),
        ("input_tokens_per_turn", 5),
        ("output_tokens_per_turn", 3),
        ("tool_call_latency_sec", 1),
    ] {
        for field in ["mean", "min", "max"] {
            args.push(format!("{c}.{key}.{field}={value}"));
        }
    }
    let mut extra: Vec<&str> = vec!["--sim-ttft", "2ms", "--sim-itl", "1ms"];
    for a in &args {
        extra.extend(["--override", a.as_str()]);
    }
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "guide_p2p-kv-cache-sharing_1",
        "p2p",
        &extra,
    );
    succeeded(&output);
    let run = dir.path().join("p2p");
    let sent = turns(&records(&run));
    // Each conversation is on its own worker (8 workers, concurrency 2: conversation c on worker c mod 2), so
    // the two interleave in whatever order their answers come back.
    let mut shape: Vec<(u64, u64, u64)> = sent.iter().map(|t| (t.1, t.2, t.3)).collect();
    shape.sort();
    assert_eq!(
        shape,
        vec![(0, 0, 11), (0, 1, 19), (0, 2, 27), (1, 0, 11), (1, 1, 19)]
    );
    for t in &sent {
        // The 1 s tool-call latency is inside the request's time, as inference-perf measures it.
        assert!(t.5 - t.4 >= 1_000_000_000, "{t:?}");
    }
    for conversation in 0..2 {
        let own: Vec<_> = sent.iter().filter(|t| t.1 == conversation).collect();
        for pair in own.windows(2) {
            assert!(
                pair[1].4 >= pair[0].5,
                "a turn goes only after the previous one and its think time: {pair:?}"
            );
        }
    }
    assert!(run.join("per_request_lifecycle_metrics.json").is_file());
}

/// Two stages of 2 conversations × 3 turns (3-token system prompt, 5-token turns, 2-token answers): stage 0
/// runs 4 requests (two turns each: 8 tokens, then 8 + 2 + 5 = 15); stage 1 counts from request 0 again and its
/// sessions, re-primed as upstream re-primes them after a stage, send each turn's 5 tokens alone.
#[test]
fn a_second_stage_counts_its_requests_from_zero_and_sends_reprimed_turns_alone() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "cr.yaml",
        "server: {type: vllm, base_url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model_name: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, ignore_eos: true}\napi: {type: completion, streaming: true}\n\
         data:\n  type: conversation_replay\n  conversation_replay:\n    num_conversations: 2\n    \
         shared_system_prompt_len: 3\n    turns_per_conversation: {type: fixed, mean: 3}\n    \
         input_tokens_per_turn: {type: fixed, mean: 5}\n    output_tokens_per_turn: {type: fixed, mean: 2}\n\
         load:\n  type: concurrent\n  num_workers: 1\n  stages:\n    - {concurrency_level: 2, num_requests: 4}\n    - \
         {concurrency_level: 1, num_requests: 3}\n",
    );
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "cr",
        &["--sim-ttft", "1ms", "--sim-itl", "1ms"],
    );
    succeeded(&output);
    let sent = turns(&records(&dir.path().join("cr")));
    let shape: Vec<(u64, u64, u64, u64)> = sent.iter().map(|t| (t.0, t.1, t.2, t.3)).collect();
    let mut stage0: Vec<_> = shape.iter().filter(|t| t.0 == 0).copied().collect();
    stage0.sort();
    assert_eq!(
        stage0,
        vec![(0, 0, 0, 8), (0, 0, 1, 15), (0, 1, 0, 8), (0, 1, 1, 15)]
    );
    let stage1: Vec<_> = shape.iter().filter(|t| t.0 == 1).copied().collect();
    assert_eq!(stage1, vec![(1, 0, 0, 5), (1, 1, 0, 5), (1, 0, 1, 5)]);
}
