//! Expected values: inference-perf 7de5ef2's own `_reconstruct_raw_calls` on the same traces, corpus and decoder
//! (`tests/fixtures/inference-perf/weka/oracle.py`), checked against the source by hand where noted.

use super::*;

const AGENT: &str = include_str!("../../../../tests/fixtures/inference-perf/weka/agent_trace.json");
const MOCK: &str =
    include_str!("../../../../tests/fixtures/inference-perf/weka/mock_trace_123.json");

/// The corpus `[0, 1, …, n−1]` and a decoder joining ids with commas: each text shows where it was cut.
fn compile_with(trace: &str, corpus_len: u32, cap: f64) -> Vec<WekaCall> {
    let trace = parse_trace(trace).expect("a WEKA trace");
    let corpus: Vec<u32> = (0..corpus_len).collect();
    let settings = Compile {
        base_seed: 42,
        default_block_size: 64,
        idle_gap_cap_seconds: cap,
    };
    let mut decode = |ids: &[u32]| -> Result<String, std::convert::Infallible> {
        Ok(ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
    };
    compile(&trace, &settings, &corpus, &mut decode).expect("compiles")
}

fn messages(call: &WekaCall) -> Vec<(&str, &str)> {
    call.messages
        .iter()
        .map(|m| (m.role.as_str(), m.content.as_str()))
        .collect()
}

#[test]
fn upstream_mock_trace_compiles_to_two_turns_the_second_carrying_the_first_answer() {
    let calls = compile_with(MOCK, 40, 60.0);
    let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["parent_turn_0", "parent_turn_1"]);
    // int(0.1 × 1000) = 100, + int(0.5 × 1000); int(1.2 × 1000) = 1200, + 800.
    assert_eq!((calls[0].t_start_ms, calls[0].t_end_ms), (100, 600));
    assert_eq!((calls[1].t_start_ms, calls[1].t_end_ms), (1200, 2000));
    assert_eq!((calls[0].prompt_tokens, calls[0].completion_tokens), (4, 2));
    assert_eq!((calls[1].prompt_tokens, calls[1].completion_tokens), (8, 4));
    // Blocks 10 and 20 are one user message; turn 1 keeps them (common prefix 2), its first new block (30) is the
    // answer to turn 0 (ceil(2 / 2) = 1 block), block 40 the new user message.
    assert_eq!(messages(&calls[0]), [("user", "5,6,17,18")]);
    assert_eq!(
        messages(&calls[1]),
        [
            ("user", "5,6,17,18"),
            ("assistant", "15,16"),
            ("user", "22,23")
        ]
    );
    assert_eq!(calls[0].output, "15,16");
    // The last turn's answer: 4 tokens at sha256("mock_trace_123:final_parent_turn_completion") % 36.
    assert_eq!(calls[1].output, "24,25,26,27");
}

#[test]
fn agent_trace_compiles_parent_turns_and_sub_agent_streams_with_capped_idle_gaps() {
    let calls = compile_with(AGENT, 40, 1.0);
    let summary: Vec<(&str, i64, i64)> = calls
        .iter()
        .map(|c| (c.id.as_str(), c.t_start_ms, c.t_end_ms))
        .collect();
    // Starts 0, 2.5, 3.0, 3.6, 5.0, 100 s (the sub-agent's 0.5, 1.0, 1.6 are before its own 2.0, so relative to
    // it); gaps over 1 s shortened to 1 s: 2.5 → 1.0, 3.0 → 1.5, 3.6 → 2.1, 5.0 → 3.1, 100 → 4.1 (4099 ms as the
    // float 4.1 − ε truncates).
    assert_eq!(
        summary,
        [
            ("parent_turn_0", 0, 1500),
            ("sa_explore_s0_turn_0", 1000, 2000),
            ("sa_explore_s1_turn_0", 1500, 1900),
            ("sa_explore_s0_turn_1", 2100, 2600),
            ("parent_turn_1", 3100, 3600),
            ("parent_turn_2", 4099, 4599),
        ]
    );
    let by_id = |id: &str| calls.iter().find(|c| c.id == id).expect(id);
    // Tool + system tokens 5 → ceil(5 / 4) = 2 system blocks (hash ids 1, 2); the user message is block 3 and the
    // 14 − 12 = 2 tail tokens.
    assert_eq!(
        messages(by_id("parent_turn_0")),
        [
            ("system", "13,14,15,16,25,26,27,28"),
            ("user", "6,7,8,9,28,29")
        ]
    );
    // Common prefix 3 ends at the user segment's end: the previous turn's 2 tail tokens go; blocks 4 and 5 are the
    // answer (ceil(5 / 4) = 2 blocks), the 23 % 4 = 3 tail tokens the new user message.
    assert_eq!(
        messages(by_id("parent_turn_1")),
        [
            ("system", "13,14,15,16,25,26,27,28"),
            ("user", "6,7,8,9"),
            ("assistant", "28,29,30,31,34,35,36,37"),
            ("user", "19,20,21"),
        ]
    );
    assert_eq!(by_id("parent_turn_0").output, "28,29,30,31,34,35,36,37");
    // Common prefix 2 ends at the system segment's end: upstream strips the previous turn's 23 % 4 = 3 tail tokens
    // from it (a quirk kept); block 8 answers, blocks 9 and 10 are the user's.
    assert_eq!(
        messages(by_id("parent_turn_2")),
        [
            ("system", "13,14,15,16,25"),
            ("assistant", "10,11,12,13"),
            ("user", "8,9,10,11,15,16,17,18"),
        ]
    );
    // The second stream (the request overlapping the first) has its 4 tool tokens as one system block and an
    // empty user message (4 tokens, all in that block).
    assert_eq!(
        messages(by_id("sa_explore_s1_turn_0")),
        [("system", "4,5,6,7"), ("user", "")]
    );
    assert_eq!(
        messages(by_id("sa_explore_s0_turn_1")),
        [
            ("system", "32,33,34,35"),
            ("user", "15,16,17,18"),
            ("assistant", "15,16,17,18"),
            ("user", "0,1,2,3"),
        ]
    );
    assert_eq!(by_id("sa_explore_s0_turn_0").output, "15,16,17,18");
}

#[test]
fn a_cap_of_zero_keeps_the_recorded_times() {
    let calls = compile_with(AGENT, 40, 0.0);
    let starts: Vec<(&str, i64)> = calls
        .iter()
        .map(|c| (c.id.as_str(), c.t_start_ms))
        .collect();
    assert_eq!(
        starts,
        [
            ("parent_turn_0", 0),
            ("sa_explore_s0_turn_0", 2500),
            ("sa_explore_s1_turn_0", 3000),
            ("sa_explore_s0_turn_1", 3600),
            ("parent_turn_1", 5000),
            ("parent_turn_2", 100_000),
        ]
    );
}

#[test]
fn idle_gap_warp_matches_upstreams_unit_test() {
    // `test_idle_gap_time_warp`.
    let warp = IdleGapWarp::new(vec![0.0, 5.0, 35.0, 45.0], 10.0);
    assert_eq!(warp.map(0.0), 0.0);
    assert_eq!(warp.map(5.0), 5.0);
    assert_eq!(warp.map(35.0), 15.0);
    assert_eq!(warp.map(45.0), 25.0);
}

#[test]
fn a_sub_agent_request_of_another_type_is_not_a_weka_trace() {
    let text = AGENT.replacen(
        r#""type": "n", "model": "claude-haiku""#,
        r#""type": "s", "model": "claude-haiku""#,
        1,
    );
    assert!(matches!(parse_trace(&text), Err(WekaError::Invalid(_))));
}

#[test]
fn a_zero_block_size_takes_the_default() {
    let text = MOCK.replacen(r#""block_size": 2"#, r#""block_size": 0"#, 1);
    let trace = parse_trace(&text).expect("trace");
    let corpus: Vec<u32> = (0..40).collect();
    let mut decode =
        |ids: &[u32]| -> Result<String, std::convert::Infallible> { Ok(format!("{}", ids.len())) };
    let settings = Compile {
        base_seed: 42,
        default_block_size: 64,
        idle_gap_cap_seconds: 60.0,
    };
    let calls = compile(&trace, &settings, &corpus, &mut decode).expect("compiles");
    // in 4 < 64: no full block, so the whole prompt is a 4-token tail.
    assert_eq!(messages(&calls[0]), [("user", "4")]);
}
