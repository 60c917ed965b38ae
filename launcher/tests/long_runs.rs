//! Runs whose records outgrow `--records-memory`, through the real binary: the launcher keeps no record past the
//! budget, summarises the run from requests.jsonl afterwards with exactly the numbers a summary in memory gives
//! (checked against `llmbench report` of the same directory with room for every record), writes the native
//! reports made of per-stage statistics byte for byte as that report does, and says which files it did not write.

mod common;

use std::path::Path;

use serde_json::Value;

use common::*;

/// summary.json without the note that it was computed from disk.
fn summary_without_note(run: &Path) -> Value {
    let mut summary = json(&run.join("summary.json"));
    if let Some(object) = summary.as_object_mut() {
        object.remove("records_spilled");
    }
    summary
}

/// `llmbench report RUN --records-memory MEMORY`, which must succeed.
fn report(run: &Path, memory: &str) {
    let output = llmbench()
        .arg("report")
        .arg(run)
        .args(["--records-memory", memory])
        .output()
        .expect("report runs");
    succeeded(&output);
}

/// The run's files by name and content, the pictures and records left out.
fn result_files(run: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(run)
        .expect("run dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            (name.ends_with(".json") || name.ends_with(".yaml"))
                && !matches!(
                    name.as_str(),
                    "summary.json" | "run.json" | "profile.yaml" | "benchmarks.json"
                )
        })
        .map(|name| {
            let text = std::fs::read_to_string(run.join(&name)).expect("read");
            (name, text)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_run_past_its_records_budget_is_summarised_from_disk_exactly() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "long.yaml",
        "api: {type: completion, streaming: true}\ndata:\n  type: random\n  input_distribution: {min: 8, max: 16, \
         mean: 12, std_dev: 2}\n  output_distribution: {min: 4, max: 24, mean: 12, std_dev: 6}\nload:\n  type: \
         constant\n  stages: [{rate: 400, duration: 1}, {rate: 300, duration: 1}]\nreport:\n  request_lifecycle: \
         {summary: true, per_stage: true, per_request: true}\n",
    );
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "long",
        &[
            "--records-memory",
            "64KiB",
            "--no-server-metrics",
            "--sim-ttft",
            "2ms",
            "--sim-itl",
            "1ms",
        ],
    );
    succeeded(&output);
    let run = dir.path().join("long");
    let summary = json(&run.join("summary.json"));
    let note = &summary["records_spilled"];
    assert_eq!(note["memory_bytes"], 64 * 1024, "{summary:#}");
    let skipped: Vec<&str> = note["skipped"]
        .as_array()
        .expect("skipped files")
        .iter()
        .filter_map(|s| s["file"].as_str())
        .collect();
    assert!(
        !skipped.contains(&"per_request_lifecycle_metrics.json"),
        "{skipped:?}"
    );
    assert!(skipped.contains(&"plots/ and report.html"), "{skipped:?}");
    // Said loudly, file by file.
    let log = stderr(&output);
    assert!(
        log.contains("plots/ and report.html") && log.contains("not written"),
        "{log}"
    );
    assert!(run.join("per_request_lifecycle_metrics.json").exists());
    assert!(!run.join("report.html").exists());
    assert!(summary["requests"]["total"].as_u64().expect("total") > 500);
    // No spill file is left behind.
    assert!(
        std::fs::read_dir(&run)
            .expect("run dir")
            .filter_map(Result::ok)
            .all(|e| !e
                .file_name()
                .to_string_lossy()
                .starts_with(".llmbench-spill")),
        "spill files left in {}",
        run.display()
    );
    let from_disk = summary_without_note(&run);
    let reports_from_disk = result_files(&run);
    assert!(
        reports_from_disk.len() >= 5,
        "lifecycle files and llm-d reports: {:?}",
        reports_from_disk.iter().map(|f| &f.0).collect::<Vec<_>>()
    );

    // The same directory re-reported with room for every record: the summary and the reports in memory.
    report(&run, "1GiB");
    let in_memory = json(&run.join("summary.json"));
    assert!(in_memory.get("records_spilled").is_none());
    assert_eq!(from_disk, in_memory);
    let reports_in_memory = result_files(&run);
    assert_eq!(reports_from_disk, reports_in_memory);

    // And `llmbench report` itself streams a file larger than its budget, to the same summary.
    report(&run, "32KiB");
    assert_eq!(summary_without_note(&run), in_memory);
}

#[test]
fn a_guidellm_run_with_warmup_and_cooldown_is_summarised_from_disk_exactly() {
    let dir = tempfile::tempdir().expect("tmp");
    let profile = write(
        dir.path(),
        "g.yaml",
        "spec:\n  backend: {kind: openai_http, target: REPLACE_ENV_LLMDBENCH_HARNESS_STACK_ENDPOINT_URL, model: \
         REPLACE_ENV_LLMDBENCH_DEPLOY_CURRENT_MODEL, request_format: /v1/completions, stream: true}\n  data: [{kind: \
         synthetic_text, prompt_tokens: 8, output_tokens: 6}]\n  constraints: [{kind: max_requests, count: 400}]\n  \
         profile: {kind: concurrent, streams: 16, warmup: 0.1, cooldown: {value: 20, mode: requests}}\n",
    );
    let output = run_profile(
        dir.path(),
        "guidellm",
        &profile,
        "g",
        &[
            "--records-memory",
            "16KiB",
            "--no-server-metrics",
            "--sim-ttft",
            "1ms",
            "--sim-itl",
            "0ms",
        ],
    );
    succeeded(&output);
    let run = dir.path().join("g");
    let summary = json(&run.join("summary.json"));
    assert!(summary["records_spilled"].is_object(), "{summary:#}");
    assert!(
        summary["excluded"]["cooldown"].as_u64().unwrap_or(0) > 0,
        "{summary:#}"
    );
    assert!(stderr(&output).contains("benchmarks.json"));
    assert!(!run.join("benchmarks.json").exists());
    let from_disk = summary_without_note(&run);
    report(&run, "1GiB");
    assert_eq!(from_disk, json(&run.join("summary.json")));
    assert!(run.join("benchmarks.json").exists());
}
