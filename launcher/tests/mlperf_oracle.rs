//! The real MLPerf LoadGen as the oracle of llmbench's mlperf harness. `LLMBENCH_LOADGEN_PYTHON` names a Python
//! with the `mlcommons-loadgen` wheel of `tests/tools/versions.env` (`bash tests/tools/install-loadgen.sh`, or
//! `make loadgen`); without it each test says so and passes without running.
//!
//! Both sides read LoadGen's mlperf.conf (built into the wheel; built into llmbench) and the same user.conf.
//! `mlperf_oracle/loadgen_sut.py` drives LoadGen with an SUT that answers every sample at once and prints the sample
//! index of every sample LoadGen issued. Timings cannot be the same on both sides, so "same values" is pinned
//! where it is exact: the sample order and the query count (no timing enters them: LoadGen generates every query
//! before the first is issued, and the SUT keeps up), and the verdict of a run whose outcome only counts decide
//! — every latency far under the limits, too few queries for early stopping — with its query count and the
//! number of further queries early stopping asks for.

use std::path::Path;
use std::process::Command;

use clap::Parser;
use llmbench::run::{RunArgs, run};
use llmbench_metrics::mlperf::{MlperfSchedule, UserConf, build_schedule, parse_settings};
use llmbench_workload::workload::ParseOptions;

const USER_CONF: &str = "\
*.*.min_duration = 1000
*.*.min_query_count = 5
*.Server.target_qps = 20
*.Offline.target_qps = 10
";
const DATASET_LEN: usize = 10;

fn loadgen_python() -> Option<String> {
    let python = std::env::var("LLMBENCH_LOADGEN_PYTHON").ok();
    if python.is_none() {
        eprintln!(
            "skipped: set LLMBENCH_LOADGEN_PYTHON to a Python with mlcommons-loadgen (make loadgen)"
        );
    }
    python
}

/// What LoadGen issued for llama3_1-8b in `scenario` over a QSL of `DATASET_LEN` samples, and its detail log.
fn loadgen(python: &str, scenario: &str, dir: &Path) -> (Vec<usize>, Vec<serde_json::Value>) {
    loadgen_in_mode(python, scenario, "PerformanceOnly", dir)
}

/// [`loadgen`] in LoadGen's test mode `mode`.
fn loadgen_in_mode(
    python: &str,
    scenario: &str,
    mode: &str,
    dir: &Path,
) -> (Vec<usize>, Vec<serde_json::Value>) {
    let conf = dir.join("user.conf");
    std::fs::write(&conf, USER_CONF).expect("write user.conf");
    let out = dir.join("loadgen");
    std::fs::create_dir_all(&out).expect("loadgen log dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mlperf_oracle/loadgen_sut.py");
    let output = Command::new(python)
        .arg(script)
        .args(["llama3_1-8b", scenario, &DATASET_LEN.to_string(), "4"])
        .arg(&conf)
        .arg(&out)
        .arg(mode)
        .output()
        .expect("run LoadGen");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().expect("LoadGen's issued samples");
    let printed: serde_json::Value = serde_json::from_str(line).expect("JSON");
    let issued = printed["issued"]
        .as_array()
        .expect("issued")
        .iter()
        .map(|i| i.as_u64().expect("index") as usize)
        .collect();
    (issued, detail_log(&out.join("mlperf_log_detail.txt")))
}

fn detail_log(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("detail log");
    text.lines()
        .filter_map(|line| line.trim_end().strip_prefix(":::MLLOG"))
        .map(|json| serde_json::from_str(json).expect("MLLOG JSON"))
        .collect()
}

fn value<'a>(log: &'a [serde_json::Value], key: &str) -> &'a serde_json::Value {
    &log.iter()
        .find(|m| m["key"] == key)
        .unwrap_or_else(|| panic!("{key} missing"))["value"]
}

fn llmbench_order(scenario: &str) -> (Vec<usize>, u64) {
    let schedule = llmbench_schedule(scenario, "PerformanceOnly");
    (schedule.samples, schedule.generated_queries)
}

fn llmbench_schedule(scenario: &str, mode: &str) -> MlperfSchedule {
    let profile = format!("model: llama3_1-8b\nscenario: {scenario}\nmode: {mode}\n");
    let settings = parse_settings(
        "p.yaml",
        &profile,
        Some(UserConf {
            file: "user.conf",
            text: USER_CONF,
        }),
        &ParseOptions::default(),
    )
    .expect("settings")
    .settings;
    build_schedule(&settings, DATASET_LEN).expect("schedule")
}

/// The detail log's pass lines, in order: each `Starting … mode` message, `loaded_qsl_set` and
/// `generated_query_count` (LoadGen's issue-loop messages, such as `Ending naturally`, llmbench does not write).
fn pass_lines(log: &[serde_json::Value]) -> Vec<(String, serde_json::Value)> {
    log.iter()
        .filter(|m| match m["key"].as_str().unwrap_or("") {
            "generic_message" => m["value"]
                .as_str()
                .is_some_and(|v| v.starts_with("Starting")),
            key => ["loaded_qsl_set", "generated_query_count"].contains(&key),
        })
        .map(|m| {
            (
                m["key"].as_str().unwrap_or("").to_owned(),
                m["value"].clone(),
            )
        })
        .collect()
}

/// A SubmissionRun is an accuracy pass over the whole QSL, then the performance pass, one sequence of samples:
/// the same samples in the same order as LoadGen, and the same pass lines in the detail log.
#[test]
fn a_submission_run_issues_loadgens_accuracy_then_performance_passes() {
    let Some(python) = loadgen_python() else {
        return;
    };
    for scenario in ["Server", "Offline", "SingleStream"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let (issued, log) = loadgen_in_mode(&python, scenario, "SubmissionRun", dir.path());
        let schedule = llmbench_schedule(scenario, "SubmissionRun");
        assert_eq!(schedule.samples, issued, "{scenario}");
        let accuracy = schedule.accuracy_pass.as_ref().expect("an accuracy pass");
        let ours = vec![
            (
                "generic_message".to_owned(),
                "Starting accuracy mode".into(),
            ),
            ("loaded_qsl_set".to_owned(), accuracy.loaded.clone().into()),
            (
                "generated_query_count".to_owned(),
                accuracy.generated_queries.into(),
            ),
            (
                "generic_message".to_owned(),
                "Starting performance mode".into(),
            ),
            ("loaded_qsl_set".to_owned(), schedule.loaded.clone().into()),
            (
                "generated_query_count".to_owned(),
                schedule.generated_queries.into(),
            ),
        ];
        assert_eq!(ours, pass_lines(&log), "{scenario}");
        assert_eq!(value(&log, "effective_test_mode"), "SubmissionRun");
    }
}

#[test]
fn server_and_offline_issue_the_samples_loadgen_issues() {
    let Some(python) = loadgen_python() else {
        return;
    };
    for scenario in ["Server", "Offline"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let (issued, log) = loadgen(&python, scenario, dir.path());
        let (samples, queries) = llmbench_order(scenario);
        assert_eq!(samples, issued, "{scenario}");
        assert_eq!(
            value(&log, "generated_query_count").as_u64(),
            Some(queries),
            "{scenario}"
        );
        assert_eq!(
            value(&log, "effective_sample_concatenate_permutation"),
            &serde_json::Value::Bool(true)
        );
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// A Server run of 30 queries, each done in a few ms: LoadGen (instant SUT) and llmbench (the simulator, 2 ms to
/// the first token, 1 ms per token) both find duration and query count met and every latency under the limits,
/// and both refuse the run on early stopping alone, asking for the same number of further queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_run_gets_loadgens_verdict() {
    let Some(python) = loadgen_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, loadgen_log) = loadgen(&python, "Server", dir.path());

    let data = dir.path().join("dataset.jsonl");
    let lines: Vec<String> = (0..DATASET_LEN)
        .map(|i| serde_json::json!({"input": format!("sample {i}"), "output": "x"}).to_string())
        .collect();
    std::fs::write(&data, lines.join("\n")).expect("write dataset");
    let profile = dir.path().join("mlperf.yaml");
    std::fs::write(
        &profile,
        format!(
            "model: llama3_1-8b\nscenario: Server\nuser_conf: {}\nmax_tokens: 2\nserver:\n  model_name: \
             llmbench-sim\n  ignore_eos: true\ndataset:\n  path: {}\n",
            dir.path().join("user.conf").display(),
            data.display()
        ),
    )
    .expect("write profile");
    let out = dir.path().join("out");
    let cli = Cli::parse_from([
        "llmbench",
        "--harness",
        "mlperf",
        "--profile",
        profile.to_str().expect("utf-8"),
        "--output",
        out.to_str().expect("utf-8"),
        "--run-id",
        "oracle",
        "--sim-ttft",
        "2ms",
        "--sim-itl",
        "1ms",
    ]);
    let outcome = run(cli.run).await.expect("the run");
    let ours = detail_log(&outcome.dir.join("mlperf_log_detail.txt"));
    for key in [
        "generated_query_count",
        "result_validity",
        "result_query_count",
        "result_min_duration_met",
        "result_min_queries_met",
        "early_stopping_met",
        "result_invalid_reason",
        "early_stopping_ttft_result",
        "early_stopping_tpot_result",
    ] {
        assert_eq!(value(&ours, key), value(&loadgen_log, key), "{key}");
    }
}
