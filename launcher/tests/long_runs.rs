//! Runs whose records outgrow `--records-memory`, through the real binary: the launcher keeps no record past the
//! budget, summarises the run from requests.jsonl afterwards with exactly the numbers a summary in memory gives
//! (checked against `llmbench report` of the same directory with room for every record), writes every file that
//! report writes byte for byte — the per-request files, guidellm's report and the pictures included — and draws
//! the pictures of a run whose requests outgrow even their own budget from a sample of them.

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
    // Every file is written: the pictures too, though 64 KiB holds the points of 409 requests (80 bytes each in
    // half the budget) and the run has more than 500.
    assert!(note.get("skipped").is_none(), "{summary:#}");
    assert!(
        !stderr(&output).contains("not written"),
        "{}",
        stderr(&output)
    );
    assert!(run.join("per_request_lifecycle_metrics.json").exists());
    assert!(run.join("report.html").exists());
    assert!(run.join("plots/throughput_over_time.png").exists());
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
    let benchmarks = std::fs::read_to_string(run.join("benchmarks.json")).expect("benchmarks.json");
    let from_disk = summary_without_note(&run);
    report(&run, "1GiB");
    assert_eq!(from_disk, json(&run.join("summary.json")));
    assert_eq!(
        benchmarks,
        std::fs::read_to_string(run.join("benchmarks.json")).expect("benchmarks.json")
    );
}

/// Every file under `dir` (requests.jsonl aside), by path relative to it, with its bytes.
fn files_under(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("dir").filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path
                    .strip_prefix(root)
                    .expect("under")
                    .to_string_lossy()
                    .into_owned();
                out.insert(name, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn a_run_past_its_records_budget_writes_every_file_a_run_in_memory_writes() {
    let dir = tempfile::tempdir().expect("tmp");
    // Two stages, every inference-perf file: about 300 records of a kilobyte or two outgrow 64 KiB many times,
    // and their pictures (80 bytes a request) still fit in half of it.
    let profile = write(
        dir.path(),
        "every.yaml",
        "api: {type: completion, streaming: true}\ndata:\n  type: random\n  input_distribution: {min: 8, max: 16, \
         mean: 12, std_dev: 2}\n  output_distribution: {min: 4, max: 24, mean: 12, std_dev: 6}\nload:\n  type: \
         constant\n  stages: [{rate: 150, duration: 1}, {rate: 120, duration: 1}]\nreport:\n  request_lifecycle: \
         {summary: true, per_stage: true, per_request: true}\n",
    );
    let output = run_profile(
        dir.path(),
        "inference-perf",
        &profile,
        "every",
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
    let run = dir.path().join("every");
    let summary = json(&run.join("summary.json"));
    assert_eq!(
        summary["records_spilled"]["memory_bytes"],
        64 * 1024,
        "{summary:#}"
    );
    assert!(
        summary["records_spilled"].get("skipped").is_none(),
        "nothing is skipped: {summary:#}"
    );
    assert!(
        !stderr(&output).contains("not written"),
        "{}",
        stderr(&output)
    );
    let from_disk = files_under(&run);

    // The same directory re-reported with room for every record: the files of a run held in memory.
    report(&run, "1GiB");
    let in_memory = files_under(&run);
    assert!(
        json(&run.join("summary.json"))
            .get("records_spilled")
            .is_none()
    );
    assert_eq!(
        from_disk.keys().collect::<Vec<_>>(),
        in_memory.keys().collect::<Vec<_>>(),
        "the same files"
    );
    for expected in [
        "per_request_lifecycle_metrics.json",
        "summary_lifecycle_metrics.json",
        "stage_1_lifecycle_metrics.json",
        "benchmark_report_v0.2,_stage_1.yaml",
        "report.html",
        "plots/latency_over_time.png",
        "plots/ttft_distribution.svg",
    ] {
        assert!(
            in_memory.contains_key(expected),
            "{expected}: {:?}",
            in_memory.keys()
        );
    }
    for (file, bytes) in &in_memory {
        // summary.json says the first was summarised from disk; everything else is the same.
        if file != "summary.json" {
            assert!(from_disk[file] == *bytes, "{file} differs");
        }
    }
    let mut spilled: Value = serde_json::from_slice(&from_disk["summary.json"]).expect("summary");
    spilled.as_object_mut().map(|o| o.remove("records_spilled"));
    assert_eq!(spilled, json(&run.join("summary.json")));
}
