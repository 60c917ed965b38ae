//! `llmbench run --harness nop`: llm-d-benchmark's nop harness sends nothing; the run still succeeds and leaves its
//! files, with an empty summary, so a BenchmarkRun of it ends Succeeded rather than failing.

mod common;

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
    for file in ["profile.yaml", "run.json", "requests.bin", "summary.json"] {
        assert!(outcome.dir.join(file).is_file(), "{file} missing");
    }
    let records =
        common::requests_jsonl(&outcome.dir.join("requests.jsonl")).expect("requests.jsonl");
    assert!(records.is_empty());
}

/// A vLLM 0.11 startup, written for this test from vLLM's log messages (see llmbench_core::vllm_log's tests for
/// the line-by-line reading).
const VLLM_LOG: &str = "\
INFO 01-23 15:48:28 [__init__.py:216] Automatically detected platform cuda.
(APIServer pid=1) INFO 01-23 15:48:29 [api_server.py:1842] vLLM API server version 0.11.0
(APIServer pid=1) INFO 01-23 15:48:29 [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen3-0.6B', 'model': 'Qwen/Qwen3-0.6B'}
(APIServer pid=1) INFO 01-23 15:48:33 [model.py:1510] Using max model len 32768
(EngineCore_DP0 pid=164) INFO 01-23 15:48:36 [core.py:644] Waiting for init message from front-end.
(EngineCore_DP0 pid=164) INFO 01-23 15:48:36 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-0.6B', load_format=auto, tensor_parallel_size=1
(EngineCore_DP0 pid=164) INFO 01-23 15:48:47 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-0.6B...
(EngineCore_DP0 pid=164) INFO 01-23 15:49:08 [gpu_model_runner.py:2653] Model loading took 3.8844 GiB and 20.442057 seconds
(EngineCore_DP0 pid=164) INFO 01-23 15:49:11 [backends.py:559] Dynamo bytecode transform time: 3.29 s
(EngineCore_DP0 pid=164) INFO 01-23 15:49:22 [backends.py:218] Compiling a graph for dynamic shape takes 10.00 s
(EngineCore_DP0 pid=164) INFO 01-23 15:49:41 [monitor.py:34] torch.compile takes 13.29 s in total
(EngineCore_DP0 pid=164) INFO 01-23 15:50:29 [gpu_model_runner.py:3480] Graph capturing finished in 18 secs, took 0.50 GiB
(EngineCore_DP0 pid=164) INFO 01-23 15:50:29 [core.py:210] init engine (profile, create kv cache, warmup model) took 81.30 seconds
(APIServer pid=1) INFO 01-23 15:50:32 [api_server.py:1915] Starting vLLM API server 0 on http://0.0.0.0:8000
(APIServer pid=1) INFO 01-23 15:50:32 [launcher.py:34] Available routes are:
(APIServer pid=1) INFO 01-23 15:50:33 [launcher.py:42] Route: /metrics, Methods: GET
";

fn nop_args(output: &str, run_id: &str, extra: &[&str]) -> Cli {
    let mut argv = vec![
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
        run_id,
        "--no-server-metrics",
    ];
    argv.extend_from_slice(extra);
    Cli::parse_from(argv)
}

fn json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nop_harness_reads_model_load_times_from_a_vllm_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("vllm-0.log");
    std::fs::write(&log, VLLM_LOG).expect("log");
    let compact = dir.path().join("termination-log");
    let output = dir.path().join("results");
    let cli = nop_args(
        output.to_str().expect("utf-8"),
        "nop-log",
        &[
            "--vllm-log",
            log.to_str().expect("utf-8"),
            "--summary-file",
            compact.to_str().expect("utf-8"),
        ],
    );
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the nop run fails: {e}"));
    let run_dir = &outcome.dir;

    // upstream's files: the result, the log as read and its phases under the server's name, the analysis.
    let result = std::fs::read_to_string(run_dir.join("result.yaml")).expect("result.yaml");
    for expected in [
        "version: \"0.1\"",
        "torch_compile: 13.29",
        "load_format: auto",
        "title: Model Loading",
    ] {
        assert!(
            result.contains(expected) || result.contains(&expected.replace('"', "'")),
            "{expected} not in\n{result}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(run_dir.join("vllm-0/vllm.log")).expect("vllm.log"),
        VLLM_LOG
    );
    let categories =
        std::fs::read_to_string(run_dir.join("vllm-0/categories.log")).expect("categories.log");
    assert!(
        categories.contains("Log category   : 'CUDA Graph Capture'"),
        "{categories}"
    );
    let analysis = std::fs::read_to_string(run_dir.join("analysis/result.txt")).expect("analysis");
    assert!(
        analysis.contains("    Torch Compile(secs)             :   13.29\n"),
        "{analysis}"
    );
    assert!(
        analysis.contains("  Model                : Qwen/Qwen3-0.6B\n"),
        "{analysis}"
    );

    // summary.json: the figures by name and unit; 15:49:08 − 15:48:47 = 21 s of model loading, 15:50:29 −
    // 15:49:41 = 48 s of CUDA graph capture, 15:50:32 − 15:48:29 = 123 s from start to ready.
    let summary = json(&run_dir.join("summary.json"));
    let model_load = &summary["model_load"];
    assert_eq!(model_load["name"], "vllm-0");
    assert_eq!(model_load["load_s"], 20.442057);
    assert_eq!(model_load["load_gib"], 3.8844);
    assert_eq!(model_load["compile_graph_s"], 10.0);
    assert_eq!(model_load["torch_compile_s"], 13.29);
    assert_eq!(model_load["vllm_start_s"], 123.0);
    let phase = |title: &str| {
        model_load["categories"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["title"] == title))
            .map(|c| c["elapsed_s"].clone())
    };
    assert_eq!(phase("Model Loading"), Some(21.0.into()));
    assert_eq!(phase("CUDA Graph Capture"), Some(48.0.into()));
    assert_eq!(
        model_load["missing"],
        serde_json::json!([
            "Directly load the compiled graph(s) for ",
            "Initial free memory:",
            "Free memory after profiling:",
            "Memory profiling takes"
        ])
    );
    assert_eq!(outcome.summary.overall.requests.total, 0);
    // The operator's copy, through the termination log.
    let compact = json(&compact);
    assert_eq!(compact["model_load"]["torch_compile_s"], 13.29);
    // `llmbench report` rebuilds summary.json from the files alone, the model-load figures included.
    let before = summary["model_load"].clone();
    llmbench_report::report::report_dir_within(
        run_dir,
        None,
        1 << 30,
        llmbench::run::nop::model_load_of_run(run_dir),
        &llmbench_report::plot::RunPictures,
    )
    .expect("report");
    assert_eq!(json(&run_dir.join("summary.json"))["model_load"], before);
    // A run with the log says nothing of a missing one.
    let meta = json(&run_dir.join("run.json"));
    assert!(
        !meta.to_string().contains("no vLLM log was given"),
        "{meta}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nop_run_without_a_log_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cli = nop_args(dir.path().to_str().expect("utf-8"), "nop-nolog", &[]);
    let outcome = run(cli.run)
        .await
        .unwrap_or_else(|e| panic!("the nop run fails: {e}"));
    let meta = json(&outcome.dir.join("run.json"));
    let notes = meta["profile_notes"].to_string();
    assert!(notes.contains("no vLLM log was given"), "{meta}");
    let summary = json(&outcome.dir.join("summary.json"));
    assert!(summary.get("model_load").is_none(), "{summary}");
    assert!(
        summary["ignored_keys"].to_string().contains("--vllm-log"),
        "{summary}"
    );
    assert!(!outcome.dir.join("result.yaml").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_is_no_vllm_log_fails_the_run_before_any_result_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("app.log");
    std::fs::write(&log, "GET /healthz 200\nGET /healthz 200\n").expect("log");
    let output = dir.path().join("results");
    let cli = nop_args(
        output.to_str().expect("utf-8"),
        "nop-bad",
        &["--vllm-log", log.to_str().expect("utf-8")],
    );
    let err = run(cli.run).await.expect_err("not a vLLM log").to_string();
    assert!(err.contains(&log.display().to_string()), "{err}");
    assert!(err.contains("none of the vLLM startup lines"), "{err}");
    assert!(
        !output.join("nop-bad").exists(),
        "a results directory was made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vllm_log_with_another_harness_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "inference-perf",
        "--profile",
        "sanity_random",
        "--output",
        dir.path().to_str().expect("utf-8"),
        "--vllm-log",
        "vllm.log",
    ]);
    let err = run(cli.run).await.expect_err("refused").to_string();
    assert!(
        err.starts_with("--vllm-log is read by the nop harness only")
            && err.contains("inference-perf"),
        "{err}"
    );
}

#[test]
fn the_cli_prints_the_model_load_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("vllm.log");
    std::fs::write(&log, VLLM_LOG).expect("log");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llmbench"))
        .args([
            "run",
            "--harness",
            "nop",
            "--profile",
            "nop",
            "--no-server-metrics",
        ])
        .args([
            "--set",
            "LLMDBENCH_HARNESS_PVC_NAME=workload-pvc",
            "--run-id",
            "cli",
        ])
        .arg("--output")
        .arg(dir.path().join("results"))
        .arg("--vllm-log")
        .arg(&log)
        .output()
        .expect("llmbench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("model load (vllm), from the vLLM log:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("torch.compile in total     13.290 s"),
        "{stdout}"
    );
    assert!(stdout.contains("CUDA Graph Capture"), "{stdout}");
}
