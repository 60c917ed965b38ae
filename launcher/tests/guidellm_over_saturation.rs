//! guidellm's `over_saturation` constraint through the binary against the simulator: a server that admits one
//! request at a time, sent four times what it can answer, builds a queue — the in-flight count and TTFT rise
//! together — and the detector (`scheduler/constraints/saturation.py`) stops the stage long before its
//! `max_duration`, cancelling what is in flight and saying why; in `monitor` mode it only says so.

mod common;

use std::path::Path;

use common::*;

/// A constant 40 req/s for up to `seconds`, over a simulator that answers 10 a second, with an `over_saturation`
/// constraint of `mode` judging from the first second on, with windows of three points.
fn scenario(dir: &Path, mode: &str, seconds: u32) -> std::path::PathBuf {
    write(
        dir,
        "saturation.yaml",
        &format!(
            "spec:\n  backend:\n    kind: openai_http\n    target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL\n    \
             model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL\n  data:\n    - kind: synthetic_text\n      \
             prompt_tokens: 16\n      output_tokens: 2\n  profile:\n    kind: constant\n    rate: 40\n  \
             constraints:\n    - kind: max_duration\n      seconds: {seconds}\n    - kind: over_saturation\n      \
             mode: {mode}\n      min_seconds: 1\n      minimum_ttft: 0.3\n      minimum_window_size: 3\n"
        ),
    )
}

fn run(mode: &str, seconds: u32) -> (std::process::Output, serde_json::Value) {
    // One seat, 100 ms to the first token: ten answers a second, the rest queue.
    let sim = SimProcess::start(&["--model", "m", "--max-num-seqs", "1", "--ttft", "100ms"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = scenario(dir.path(), mode, seconds);
    let output = run_on_sim(dir.path(), "guidellm", &path, "r", &sim);
    let summary = json(&dir.path().join("r").join("summary.json"));
    (output, summary)
}

#[test]
fn a_queue_building_up_stops_the_stage_as_over_saturated_long_before_its_duration() {
    let (output, summary) = run("enforce", 60);
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(
        summary.to_string().contains("\"over_saturation\""),
        "{summary:#}\n{said}"
    );
    assert!(
        said.contains("the server is over-saturated (guidellm over_saturation)"),
        "{said}"
    );
    // 60 s at 40 req/s would be 2400 requests; the stop comes within seconds, what was in flight cancelled.
    let total = summary["requests"]["total"].as_u64().expect("total");
    assert!(total < 2400, "{total} requests recorded");
    assert!(
        summary["errors"].to_string().contains("cancelled"),
        "{summary:#}"
    );
}

#[test]
fn in_monitor_mode_over_saturation_is_reported_and_the_stage_runs_to_its_end() {
    let (output, summary) = run("monitor", 4);
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(said.contains("mode monitor): the run goes on"), "{said}");
    assert!(
        !summary.to_string().contains("\"over_saturation\""),
        "{summary:#}"
    );
}
