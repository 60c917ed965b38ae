//! `llmbench run` against llm-d-inference-sim, the simulator llm-d itself tests with: bundled profiles of each
//! dialect run unchanged (shortened by overrides), every request succeeds with the lengths the profile asked for, the
//! result directory holds every file, bad input exits non-zero with a message naming the problem, and a dead stack
//! is recorded request by request with exit code 3.

use std::path::Path;
use std::process::Output;

use llmbench_e2e::{InferenceSim, Tool, Tools, e2e_disabled, free_port, workspace_binary};
use serde_json::Value;

const MODEL: &str = "e2e-model";

const VLLM_CHAT_PROFILE: &str = "\
model: REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL
base-url: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL
backend: openai-chat
endpoint: /v1/chat/completions
dataset-name: random
num-prompts: 8
random-input-len: 64
random-output-len: 16
max-concurrency: 2
ignore-eos: none
percentile-metrics: ttft,tpot,itl,e2el
";

async fn start_sim() -> InferenceSim {
    InferenceSim::start(
        MODEL,
        &[
            "--max-num-seqs",
            "256",
            "--max-model-len",
            "8192",
            "--time-to-first-token",
            "50ms",
            "--inter-token-latency",
            "10ms",
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn llmbench(args: &[&str]) -> Output {
    let binary = workspace_binary("llmbench").unwrap_or_else(|e| panic!("{e}"));
    std::process::Command::new(binary)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("llmbench runs")
}

fn explain(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json parses")
}

/// Runs `profile` of `harness` against the simulator and returns the run directory.
fn run_profile(
    sim: &InferenceSim,
    out: &Path,
    harness: &str,
    profile: &str,
    overrides: &[&str],
) -> std::path::PathBuf {
    let stem = Path::new(profile)
        .file_name()
        .map_or(profile.into(), |n| n.to_string_lossy());
    let run_id = format!("{harness}-{stem}");
    let mut args = vec![
        "run",
        "--harness",
        harness,
        "--profile",
        profile,
        "--endpoint",
        sim.base_url(),
        "--model",
        MODEL,
        "--tokenizer",
        "builtin",
        "--output",
        out.to_str().expect("utf-8 temp path"),
        "--run-id",
        &run_id,
    ];
    for o in overrides {
        args.extend(["--override", o]);
    }
    let output = llmbench(&args);
    assert!(output.status.success(), "{}", explain(&output));
    out.join(run_id)
}

#[tokio::test]
async fn bundled_profiles_of_each_dialect_run_unchanged_against_llm_d_inference_sim() {
    if e2e_disabled("bundled_profiles_of_each_dialect_run_unchanged_against_llm_d_inference_sim") {
        return;
    }
    let sim = start_sim().await;
    let out = tempfile::tempdir().expect("output dir");

    // inference-perf: constant rate, streaming completions, random lengths.
    let dir = run_profile(
        &sim,
        out.path(),
        "inference-perf",
        "sanity_random",
        &["load.stages.0.rate=10", "load.stages.0.duration=2"],
    );
    let s = summary(&dir);
    assert_eq!(s["requests"]["total"], 20, "{s:#}");
    assert_eq!(s["requests"]["succeeded"], 20, "{s:#}");
    for file in [
        "profile.yaml",
        "run.json",
        "requests.bin",
        "summary.json",
        "stage_0_lifecycle_metrics.json",
        "summary_lifecycle_metrics.json",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing in {}",
            dir.display()
        );
    }
    let (records, _) = llmbench_model::record_file::RunRecords::in_dir(&dir)
        .read_all()
        .expect("requests.bin");
    let records: String = records
        .iter()
        .map(|r| serde_json::to_string(r).expect("json") + "\n")
        .collect();
    assert_eq!(records.lines().count(), 20);
    // Counts exactly as asked, and latencies as injected (TTFT 50 ms, ITL 10 ms), within a generous tolerance.
    for line in records.lines() {
        let record: Value = serde_json::from_str(line).expect("a record");
        let tokens = record["usage"]["completion_tokens"]
            .as_f64()
            .expect("completion tokens");
        assert_eq!(
            record["usage"]["completion_tokens"], record["max_tokens"],
            "{record}"
        );
        let e2e_ms = (record["end_ns"].as_f64().expect("end")
            - record["sent_ns"].as_f64().expect("sent"))
            / 1e6;
        let injected = 50.0 + 10.0 * (tokens - 1.0);
        assert!(
            (e2e_ms - injected).abs() < 0.2 * injected + 25.0,
            "E2E {e2e_ms} ms vs {injected} ms: {record}"
        );
    }
    let ttft = s["latency_ms"]["ttft"]["p50"].as_f64().expect("TTFT p50");
    let tpot = s["latency_ms"]["tpot"]["p50"].as_f64().expect("TPOT p50");
    assert!(
        (45.0..=90.0).contains(&ttft),
        "TTFT p50 {ttft} ms, 50 injected"
    );
    assert!(
        (9.0..=14.0).contains(&tpot),
        "TPOT p50 {tpot} ms, 10 injected"
    );
    let lifecycle: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary_lifecycle_metrics.json"))
            .expect("lifecycle file"),
    )
    .expect("lifecycle JSON");
    assert_eq!(lifecycle["successes"]["count"], 20, "{lifecycle:#}");
    // ignore_eos: the simulator generates exactly the max_tokens each prompt asked for, 10..=100.
    let mean_output = lifecycle["successes"]["output_len"]["mean"]
        .as_f64()
        .expect("output_len mean");
    assert!((10.0..=100.0).contains(&mean_output), "{mean_output}");
    // llm-d-inference-sim serves vLLM's metrics on its API port: the run scraped them by default, and its
    // server-side counts agree with the client's (20 requests; the tokens it generated).
    assert!(dir.join("server_metrics.jsonl").is_file());
    let server = &s["server_metrics"]["overall"]["aggregate"];
    let find = |key: &str| {
        server
            .as_array()
            .and_then(|metrics| metrics.iter().find(|m| m["key"] == key))
            .unwrap_or_else(|| panic!("no `{key}` in {server:#}"))
            .clone()
    };
    assert_eq!(find("requests_finished")["increase"], 20.0, "{server:#}");
    let generated: f64 = records
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("a record")["usage"]["completion_tokens"]
                .as_f64()
                .expect("tokens")
        })
        .sum();
    assert_eq!(
        find("generation_tokens")["increase"],
        generated,
        "{server:#}"
    );
    assert_eq!(find("running")["kind"], "gauge");

    // vllm bench serve from a profile file: chat completions, two in flight, fixed lengths.
    let profile = out.path().join("chat.yaml.in");
    std::fs::write(&profile, VLLM_CHAT_PROFILE).expect("write profile");
    let dir = run_profile(
        &sim,
        out.path(),
        "vllm-benchmark",
        profile.to_str().expect("utf-8 temp path"),
        &[],
    );
    let s = summary(&dir);
    assert_eq!(s["requests"]["succeeded"], 8, "{s:#}");
    let vllm_file = std::fs::read_dir(&dir)
        .expect("run dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("qps"))
        })
        .unwrap_or_else(|| panic!("no vllm result file in {}", dir.display()));
    let vllm: Value = serde_json::from_str(&std::fs::read_to_string(vllm_file).expect("vllm file"))
        .expect("JSON");
    assert_eq!(vllm["completed"], 8, "{vllm:#}");
    assert_eq!(vllm["total_output_tokens"], 8 * 16, "{vllm:#}");

    // guidellm: the spec: scenario format.
    let dir = run_profile(
        &sim,
        out.path(),
        "guidellm",
        "sanity_random",
        &["rate=10", "seconds=2"],
    );
    let s = summary(&dir);
    assert_eq!(s["requests"]["failed"], 0, "{s:#}");
    assert!(
        s["requests"]["succeeded"].as_u64().is_some_and(|n| n >= 15),
        "{s:#}"
    );
    assert!(dir.join("benchmarks.json").is_file());
}

/// `llmbench run --serve` with llm-d-inference-sim as the engine: started, waited for (`/health`, then
/// `/v1/models`), benchmarked, recorded in run.json's `stack`, and stopped afterwards.
#[tokio::test]
async fn serve_starts_llm_d_inference_sim_benchmarks_it_and_stops_it() {
    if e2e_disabled("serve_starts_llm_d_inference_sim_benchmarks_it_and_stops_it") {
        return;
    }
    let binary = Tools::from_env()
        .and_then(|t| t.path(Tool::LlmDInferenceSim))
        .unwrap_or_else(|e| panic!("{e}"));
    let port = free_port().unwrap_or_else(|e| panic!("{e}")).to_string();
    let out = tempfile::tempdir().expect("output dir");
    let output = llmbench(&[
        "run",
        "--harness",
        "inference-perf",
        "--profile",
        "sanity_random",
        "--override",
        "load.stages.0.rate=5",
        "--override",
        "load.stages.0.duration=2",
        "--tokenizer",
        "builtin",
        "--output",
        out.path().to_str().expect("utf-8 temp path"),
        "--run-id",
        "served",
        "--serve",
        "--",
        binary.to_str().expect("utf-8 tool path"),
        "--model",
        MODEL,
        "--force-dummy-tokenizer",
        "--port",
        &port,
        "--max-model-len",
        "8192",
        "--time-to-first-token",
        "20ms",
        "--inter-token-latency",
        "5ms",
    ]);
    assert!(output.status.success(), "{}", explain(&output));
    let dir = out.path().join("served");
    let s = summary(&dir);
    assert_eq!(s["requests"]["succeeded"], 10, "{s:#}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).expect("run.json"))
            .expect("run.json parses");
    // The model came from the server's own /v1/models, as no --model was given.
    assert_eq!(
        run["stack"]["models"]["body"]["data"][0]["id"], MODEL,
        "{:#}",
        run["stack"]
    );
    let pid: i32 = std::fs::read_to_string(dir.join("stack.pid"))
        .expect("stack.pid")
        .trim()
        .parse()
        .expect("a pid");
    // Signal 0 probes for the process: gone once the launcher has stopped it.
    let alive = std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        !alive,
        "the served llm-d-inference-sim (pid {pid}) outlived the run"
    );
    assert!(
        dir.join("stack.log").is_file(),
        "the server's output is kept"
    );
}

#[tokio::test]
async fn a_dead_stack_is_recorded_request_by_request_and_exits_3() {
    if e2e_disabled("a_dead_stack_is_recorded_request_by_request_and_exits_3") {
        return;
    }
    let out = tempfile::tempdir().expect("output dir");
    let port = free_port().unwrap_or_else(|e| panic!("{e}"));
    let endpoint = format!("http://127.0.0.1:{port}");
    let output = llmbench(&[
        "run",
        "--harness",
        "vllm-benchmark",
        "--profile",
        "sanity_random",
        "--endpoint",
        &endpoint,
        "--model",
        MODEL,
        "--tokenizer",
        "builtin",
        "--override",
        "num-prompts=5",
        // The requests themselves against a dead stack are the subject: past the pre-flight, which would stop
        // the run before the first one (exit 6), and under --max-connect-failures.
        "--no-preflight",
        "--output",
        out.path().to_str().expect("utf-8 temp path"),
        "--run-id",
        "dead",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", explain(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("none of the 5 requests succeeded"),
        "{}",
        explain(&output)
    );
    let s = summary(&out.path().join("dead"));
    assert_eq!(s["requests"]["failed"], 5, "{s:#}");
}

#[test]
fn bad_input_exits_non_zero_naming_the_problem() {
    if e2e_disabled("bad_input_exits_non_zero_naming_the_problem") {
        return;
    }
    let out = tempfile::tempdir().expect("output dir");
    let out = out.path().to_str().expect("utf-8 temp path");
    let run = |harness: &'static str, extra: &[&'static str]| {
        let mut args = vec![
            "run",
            "--harness",
            harness,
            "--endpoint",
            "http://127.0.0.1:9",
            "--model",
            MODEL,
            // Each input is refused on its own account, not because nothing listens at the endpoint.
            "--no-preflight",
        ];
        args.extend(["--output", out]);
        if !extra.contains(&"--profile") {
            args.extend(["--profile", "sanity_random"]);
        }
        if !extra.contains(&"--tokenizer") {
            args.extend(["--tokenizer", "builtin"]);
        }
        args.extend(extra);
        llmbench(&args)
    };
    let cases: [(&str, &[&str], &[&str]); 7] = [
        (
            "inference-perf",
            &["--override", "no_such_key=1"],
            &["no_such_key"],
        ),
        (
            "inference-perf",
            &["--profile", "sanity_randon"],
            &["sanity_random"],
        ),
        (
            "inference-perf",
            &["--override", "load.stages.0.rate=-5"],
            &[
                "sanity_random.yaml.in:",
                "load.stages[0].rate",
                "greater than 0",
            ],
        ),
        (
            "inference-perf",
            &["--override", "load.stages.0.rate=fast"],
            &[
                "sanity_random.yaml.in:",
                "load.stages[0].rate",
                "expected a number",
            ],
        ),
        (
            "inference-perf",
            &["--override", "load.type=sawtooth"],
            &["sawtooth"],
        ),
        ("genai-perf", &[], &["unknown harness `genai-perf`"]),
        (
            "inference-perf",
            &["--tokenizer", "/nonexistent/tokenizer.json"],
            &["/nonexistent/tokenizer.json"],
        ),
    ];
    for (harness, extra, expected) in cases {
        let output = run(harness, extra);
        assert!(!output.status.success(), "{}", explain(&output));
        assert_ne!(
            output.status.code(),
            Some(3),
            "bad input is not a dead stack: {}",
            explain(&output)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        for needle in expected {
            assert!(
                stderr.contains(needle),
                "expected {needle:?} in:\n{}",
                explain(&output)
            );
        }
        assert!(!stderr.contains("panicked"), "{}", explain(&output));
    }
}
