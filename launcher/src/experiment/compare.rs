//! The experiment's comparison, written from the files alone (`experiment.json` and each run's directory), so
//! `llmbench experiment report DIR` gives the same result on a laptop, after a local experiment, and in the pod the
//! operator starts once every run of a BenchmarkExperiment has finished:
//!
//! - `comparison.json` (ours, schema `llmbench.comparison/v1`): the table rows (llmbench-api's `TreatmentRow`),
//!   the best treatment, and every run's figures and capacity answer — what a later plot command reads.
//! - `treatment_comparison.csv`: llm-d-benchmark's cross-treatment CSV (see [`write_treatment_csv`]).
//! - `experiment-summary.yaml`: llm-d-benchmark's DoE summary (see [`experiment_summary`]).
//! - `benchmarks.json`: guidellm's multi-benchmark report, when the runs wrote guidellm reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llmbench_api::experiment::{self as core, RunResult};
use llmbench_api::v1alpha1::{SloSpec, TreatmentRow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ExperimentError;
use super::figures::{capacity_block, read_summary, run_figures, slo_verdict};
use super::plan::{ExperimentPlan, RunStatus, write_atomic};
use llmbench_report::plot::TreatmentTable;
use llmbench_report::report::{
    Align, GUIDELLM_REPORT_FILE, LLMD_REPORT_PREFIX, TERMINAL_COLUMNS, Table, Tone,
};

/// The schema id of `comparison.json`.
pub(crate) const COMPARISON_SCHEMA: &str = "llmbench.comparison/v1";
pub(crate) const COMPARISON_FILE: &str = "comparison.json";
/// llm-d-benchmark's cross-treatment CSV.
pub(crate) const TREATMENT_CSV_FILE: &str = "treatment_comparison.csv";
/// llm-d-benchmark's DoE experiment summary.
pub(crate) const EXPERIMENT_SUMMARY_FILE: &str = "experiment-summary.yaml";

/// `comparison.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Always [`COMPARISON_SCHEMA`].
    pub schema: String,
    pub experiment: String,
    pub id: String,
    pub harness: String,
    /// One row per treatment, in plan order; aggregates over its succeeded runs.
    pub rows: Vec<TreatmentRow>,
    /// The best treatment (llmbench-api's `best`: highest capacity, else highest output tokens/s among those that
    /// met the SLO).
    pub best: Option<String>,
    /// Every run, in plan order.
    pub runs: Vec<RunComparison>,
}

/// One run in `comparison.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    pub dir: String,
    pub treatment: String,
    pub repeat: u32,
    pub status: RunStatus,
    /// Its figures, where its summary.json could be read (also for a failed run that wrote one; the table counts
    /// succeeded runs only).
    pub figures: Option<llmbench_api::experiment::RunFigures>,
    /// The SLO verdict's wording, where the plan has an SLO.
    pub slo: Option<String>,
    /// `summary.json`'s `capacity` block, as the run wrote it, where it did.
    pub capacity: Option<Value>,
    pub error: Option<String>,
}

/// Files written by [`write_all`].
#[derive(Debug, Clone)]
pub struct Written {
    pub comparison: Comparison,
    pub files: Vec<PathBuf>,
    /// Problems with individual runs' files (a succeeded run whose summary.json cannot be read).
    pub warnings: Vec<String>,
    /// The runs whose launcher was killed mid-run, each with what its rebuilt summary says of it.
    pub killed: Vec<KilledRun>,
}

/// A run of the experiment whose launcher was killed mid-run ([`RunStatus::Killed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KilledRun {
    pub dir: String,
    /// What its rebuilt summary says: what it recorded, what it sent, the requests lost in flight.
    pub what: String,
}

/// Builds every comparison file of the experiment in `dir` from `plan` and the runs' directories. A run that
/// was started and never ended (its launcher was killed) is reported as `killed`, with its reports rebuilt from
/// what it recorded, as `llmbench report` rebuilds them.
pub(crate) fn write_all(dir: &Path, plan: &ExperimentPlan) -> Result<Written, ExperimentError> {
    let mut warnings = Vec::new();
    let (plan, killed) = settle_killed_runs(dir, plan, &mut warnings);
    let plan = &plan;
    let comparison = comparison(dir, plan, &mut warnings);
    let mut files = Vec::new();

    let path = dir.join(COMPARISON_FILE);
    let mut text =
        serde_json::to_string_pretty(&comparison).map_err(|e| ExperimentError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
    text.push('\n');
    write_atomic(&path, text.as_bytes())?;
    files.push(path);

    let path = dir.join(TREATMENT_CSV_FILE);
    write_atomic(&path, treatment_csv(dir, plan).as_bytes())?;
    files.push(path);

    let path = dir.join(EXPERIMENT_SUMMARY_FILE);
    let yaml = serde_saphyr::to_string(&experiment_summary(dir, plan)).map_err(|e| {
        ExperimentError::Write {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        }
    })?;
    write_atomic(&path, yaml.as_bytes())?;
    files.push(path);

    if let Some(report) = guidellm_benchmarks(dir, plan, &mut warnings) {
        let path = dir.join(GUIDELLM_REPORT_FILE);
        let text = serde_json::to_string_pretty(&report).map_err(|e| ExperimentError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomic(&path, text.as_bytes())?;
        files.push(path);
    }
    // The treatments side by side in pictures (throughput vs latency, Pareto, latency CDFs) and compare.html; a
    // picture that cannot be drawn (no run succeeded yet) leaves the numbers standing.
    let table = treatment_table(&comparison, plan.slo.as_ref());
    match llmbench_report::plot::compare(
        &[dir.to_path_buf()],
        &dir.join(llmbench_report::plot::PLOTS_DIR),
        &[table],
        &super::plotted::plotted_runs,
    ) {
        Ok(pictures) => files.extend(pictures),
        Err(e) => warnings.push(format!("no comparison pictures: {e}")),
    }
    Ok(Written {
        comparison,
        files,
        warnings,
        killed,
    })
}

/// `plan` with each run whose launcher was killed marked [`RunStatus::Killed`], its reports rebuilt from what it
/// recorded (`llmbench report`: summary.json, the native files, the requests lost in flight). A killed run is
/// one the plan has not seen succeed or be skipped, whose directory (or a shard of it) holds a run.json without
/// an end, and which no launcher holds now (an experiment still going is writing it).
fn settle_killed_runs(
    dir: &Path,
    plan: &ExperimentPlan,
    warnings: &mut Vec<String>,
) -> (ExperimentPlan, Vec<KilledRun>) {
    let mut plan = plan.clone();
    let mut killed = Vec::new();
    for run in &mut plan.runs {
        if !matches!(
            run.status,
            RunStatus::Pending | RunStatus::Failed | RunStatus::Killed
        ) {
            continue;
        }
        let run_dir = dir.join(&run.dir);
        if !was_killed(&run_dir) {
            continue;
        }
        let rebuilt = llmbench_report::report::report_dir(
            &run_dir,
            None,
            crate::run::nop::model_load_of_run(&run_dir),
            &llmbench_report::plot::RunPictures,
        );
        let what = match rebuilt {
            Ok(outcome) => match &outcome.summary.run {
                Some(ended) => llmbench_report::report::killed_run(
                    ended,
                    outcome.summary.overall.requests.lost_in_flight,
                ),
                None => "its launcher was killed before the run ended".to_owned(),
            },
            Err(e) => {
                warnings.push(format!(
                    "run {}: its launcher was killed, and its reports cannot be rebuilt: {e}",
                    run.dir
                ));
                format!("its launcher was killed, and its reports cannot be rebuilt: {e}")
            }
        };
        run.status = RunStatus::Killed;
        // An error the plan recorded (a pod that failed) stays; the kill is said in `killed`.
        run.error.get_or_insert_with(|| what.clone());
        killed.push(KilledRun {
            dir: run.dir.clone(),
            what,
        });
    }
    (plan, killed)
}

/// Whether the run in `run_dir` began and never wrote its end (run.json, or a shard's, has none) while no launcher
/// holds its directory now.
fn was_killed(run_dir: &Path) -> bool {
    let shards = llmbench_report::report::merge::shard_dirs(run_dir);
    let dirs = if shards.is_empty() {
        vec![run_dir.to_owned()]
    } else {
        shards
    };
    let metas: Vec<_> = dirs
        .iter()
        .filter_map(|d| llmbench_report::report::RunMeta::read(d).ok())
        .collect();
    !metas.is_empty()
        && metas.iter().any(|meta| meta.end.is_none())
        && dirs.iter().all(|d| !crate::run::in_use(d))
}

/// The comparison: each run's figures from its summary.json, the table over succeeded runs.
pub(crate) fn comparison(
    dir: &Path,
    plan: &ExperimentPlan,
    warnings: &mut Vec<String>,
) -> Comparison {
    let treatments: Vec<_> = plan
        .treatments
        .iter()
        .map(llmbench_api::experiment::ResolvedTreatment::from)
        .collect();
    let mut results = Vec::new();
    let mut runs = Vec::new();
    for run in &plan.runs {
        let Some(index) = plan.treatment_index(&run.treatment) else {
            continue;
        };
        let read = read_summary(&dir.join(&run.dir));
        let mut status = run.status;
        let mut error = run.error.clone();
        let figures = match (&read, status) {
            (Ok(summary), _) => Some(run_figures(summary, plan.slo.as_ref())),
            (Err(e), RunStatus::Succeeded) => {
                // Succeeded by its status, but nothing to compare: it cannot count as a success.
                warnings.push(format!("run {}: {e}", run.dir));
                status = RunStatus::Failed;
                error = Some(e.clone());
                None
            }
            (Err(_), _) => None,
        };
        let result = match (status, &figures) {
            (RunStatus::Succeeded, Some(f)) => RunResult::Succeeded(f.clone()),
            // A killed run's figures are of part of a run: shown for it, kept out of the table.
            (RunStatus::Failed | RunStatus::Killed, _) => RunResult::Failed,
            _ => RunResult::Pending,
        };
        results.push((index, result));
        let (slo, capacity) = match &read {
            Ok(summary) => (
                plan.slo
                    .as_ref()
                    .map(|slo| match slo_verdict(slo, &summary.summary) {
                        Ok(text) => format!("met: {text}"),
                        Err(text) => format!("missed: {text}"),
                    }),
                capacity_block(&summary.raw),
            ),
            Err(_) => (None, None),
        };
        runs.push(RunComparison {
            dir: run.dir.clone(),
            treatment: run.treatment.clone(),
            repeat: run.repeat,
            status,
            figures,
            slo,
            capacity,
            error,
        });
    }
    let rows = core::table(&treatments, &results);
    Comparison {
        schema: COMPARISON_SCHEMA.to_owned(),
        experiment: plan.name.clone(),
        id: plan.id.clone(),
        harness: plan.harness.clone(),
        best: core::best(&rows),
        rows,
        runs,
    }
}

/// llm-d-benchmark's columns of `treatment_comparison.csv` (`llmdbenchmark/analysis/cross_treatment.py` at
/// `8bc9f1dd`: `METRICS_OF_INTEREST`, `SESSION_METRICS_OF_INTEREST`, then the workload metadata), each with the
/// dotted path into a benchmark report v0.2 it is read from. Empty where the report has no such field: our
/// reports carry no `session_performance` (multi-turn sessions are not summarised in the v0.2 report), so the ten
/// session columns are empty, as upstream leaves them for every workload but otel_traces.
const CSV_COLUMNS: [(&str, &str); 28] = [
    (
        "ttft_mean_s",
        "results.request_performance.aggregate.latency.time_to_first_token.mean",
    ),
    (
        "ttft_p50_s",
        "results.request_performance.aggregate.latency.time_to_first_token.p50",
    ),
    (
        "ttft_p99_s",
        "results.request_performance.aggregate.latency.time_to_first_token.p99",
    ),
    (
        "tpot_mean_s",
        "results.request_performance.aggregate.latency.time_per_output_token.mean",
    ),
    (
        "tpot_p99_s",
        "results.request_performance.aggregate.latency.time_per_output_token.p99",
    ),
    (
        "itl_mean_s",
        "results.request_performance.aggregate.latency.inter_token_latency.mean",
    ),
    (
        "itl_p99_s",
        "results.request_performance.aggregate.latency.inter_token_latency.p99",
    ),
    (
        "e2e_mean_s",
        "results.request_performance.aggregate.latency.request_latency.mean",
    ),
    (
        "e2e_p99_s",
        "results.request_performance.aggregate.latency.request_latency.p99",
    ),
    (
        "output_tps",
        "results.request_performance.aggregate.throughput.output_token_rate.mean",
    ),
    (
        "request_qps",
        "results.request_performance.aggregate.throughput.request_rate.mean",
    ),
    (
        "total_tps",
        "results.request_performance.aggregate.throughput.total_token_rate.mean",
    ),
    (
        "total_requests",
        "results.request_performance.aggregate.requests.total",
    ),
    (
        "failures",
        "results.request_performance.aggregate.requests.failures",
    ),
    (
        "session_rate_qps",
        "results.session_performance.sessions.session_rate.mean",
    ),
    (
        "session_duration_mean_s",
        "results.session_performance.sessions.session_duration.mean",
    ),
    (
        "session_duration_p50_s",
        "results.session_performance.sessions.session_duration.p50",
    ),
    (
        "session_duration_p99_s",
        "results.session_performance.sessions.session_duration.p99",
    ),
    (
        "events_per_session_mean",
        "results.session_performance.sessions.events_per_session.mean",
    ),
    (
        "events_cancelled_per_session_mean",
        "results.session_performance.sessions.events_cancelled_per_session.mean",
    ),
    (
        "input_tokens_per_session_mean",
        "results.session_performance.sessions.input_tokens_per_session.mean",
    ),
    (
        "output_tokens_per_session_mean",
        "results.session_performance.sessions.output_tokens_per_session.mean",
    ),
    (
        "total_sessions",
        "results.session_performance.sessions.total",
    ),
    (
        "failed_sessions",
        "results.session_performance.sessions.failed",
    ),
    (
        "input_len_mean",
        "results.request_performance.aggregate.requests.input_length.mean",
    ),
    (
        "output_len_mean",
        "results.request_performance.aggregate.requests.output_length.mean",
    ),
    ("tool", "scenario.load.standardized.tool"),
    ("rate_qps", "scenario.load.standardized.rate_qps"),
];

/// `treatment_comparison.csv` as llm-d-benchmark's `generate_cross_treatment_summary` writes it: a header of
/// `treatment, source_file` and [`CSV_COLUMNS`], then one row per benchmark report v0.2 file
/// (`benchmark_report_v0.2,_*.yaml`, in name order) of each run directory, `treatment` being the directory's
/// name (`<treatment>-r<repeat>`). Upstream walks the results directory's subdirectories in name order; we walk
/// the runs in plan order, which is the same set of rows in an order that keeps repeats together as they ran.
/// A run without reports (it failed before writing them) has no row, as upstream.
pub(crate) fn treatment_csv(dir: &Path, plan: &ExperimentPlan) -> String {
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    let mut header = vec!["treatment", "source_file"];
    header.extend(CSV_COLUMNS.iter().map(|(name, _)| *name));
    // Writing into a Vec cannot fail.
    let _ = writer.write_record(&header);
    for run in &plan.runs {
        for (file, report) in v02_reports(&dir.join(&run.dir)) {
            let mut row = vec![run.dir.clone(), file];
            for (name, path) in CSV_COLUMNS {
                let value = deep_get(&report, path);
                // upstream: `deep_get(report, "scenario.load.standardized.rate_qps", "") or ""`
                let text = if name == "rate_qps" && value.is_some_and(is_falsy) {
                    String::new()
                } else {
                    value.map(csv_text).unwrap_or_default()
                };
                row.push(text);
            }
            let _ = writer.write_record(&row);
        }
    }
    writer
        .into_inner()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// A run directory's benchmark report v0.2 files, by name, parsed (unreadable ones are skipped, as upstream).
fn v02_reports(run_dir: &Path) -> Vec<(String, Value)> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(LLMD_REPORT_PREFIX) && n.ends_with("yaml"))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let text = std::fs::read_to_string(run_dir.join(&name)).ok()?;
            let value: Value = serde_saphyr::from_str(&text).ok()?;
            (!value.is_null()).then_some((name, value))
        })
        .collect()
}

fn deep_get<'a>(value: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .try_fold(value, |v, key| v.as_object()?.get(key))
        .filter(|v| !v.is_null())
}

fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// A cell as Python's csv module writes the value: strings as they are, numbers as `repr`, booleans as
/// `True`/`False`.
fn csv_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// `experiment-summary.yaml` with llm-d-benchmark's keys (`llmdbenchmark/experiment/summary.py`
/// `ExperimentSummary.to_dict` / `TreatmentResult.to_dict` at `8bc9f1dd`): `experiment`, `total_setup_treatments`,
/// `total_run_treatments`, `total_matrix`, `succeeded`, `failed`, `total_duration_seconds`, and `treatments`, one
/// entry per setup treatment with `setup_treatment`, `status` (`success` or `failed_run`; llmbench stands up and
/// tears down nothing, so never `failed_standup`/`failed_teardown`), `run_treatments` (`completed/total`: run
/// treatments whose every run succeeded / run treatments), `duration_seconds`, `workspace_dir` (the experiment
/// directory) and `error` (the first failed run's). Without setup treatments there is one entry named `default`,
/// as upstream synthesises for a file without `setup`. A setup treatment none of whose runs started (the
/// experiment stopped first) has no entry, as upstream's loop breaks before recording it.
pub(crate) fn experiment_summary(dir: &Path, plan: &ExperimentPlan) -> Value {
    let mut groups: Vec<(String, Vec<&super::plan::PlanRun>, usize)> = Vec::new();
    if plan.setup_treatments.is_empty() {
        groups.push((
            "default".to_owned(),
            plan.runs.iter().collect(),
            plan.treatments.len(),
        ));
    } else {
        for setup in &plan.setup_treatments {
            let names: Vec<&str> = plan
                .treatments
                .iter()
                .filter(|t| t.setup.as_deref() == Some(setup.name.as_str()))
                .map(|t| t.name.as_str())
                .collect();
            let runs = plan
                .runs
                .iter()
                .filter(|r| names.contains(&r.treatment.as_str()))
                .collect();
            groups.push((setup.name.clone(), runs, names.len()));
        }
    }
    let total_setup = plan.setup_treatments.len().max(1);
    let total_run = if plan.setup_treatments.is_empty() {
        plan.treatments.len()
    } else {
        plan.treatments.len() / total_setup
    };
    let mut entries = Vec::new();
    let (mut succeeded, mut failed) = (0, 0);
    for (name, runs, treatments) in groups {
        let started = runs.iter().any(|r| {
            matches!(
                r.status,
                RunStatus::Succeeded | RunStatus::Failed | RunStatus::Killed
            )
        });
        if !started {
            continue;
        }
        let mut by_treatment: BTreeMap<&str, bool> = BTreeMap::new();
        for run in &runs {
            let ok = by_treatment.entry(run.treatment.as_str()).or_insert(true);
            *ok &= run.status == RunStatus::Succeeded;
        }
        let completed = by_treatment.values().filter(|ok| **ok).count();
        let first_failure = runs.iter().find(|r| r.status != RunStatus::Succeeded);
        let success = first_failure.is_none();
        if success {
            succeeded += 1;
        } else {
            failed += 1;
        }
        let duration: f64 = runs.iter().filter_map(|r| r.duration_s).sum();
        let mut entry = Map::new();
        entry.insert("setup_treatment".into(), json!(name));
        entry.insert(
            "status".into(),
            json!(if success { "success" } else { "failed_run" }),
        );
        entry.insert(
            "run_treatments".into(),
            json!(format!("{completed}/{treatments}")),
        );
        entry.insert("duration_seconds".into(), json!(round1(duration)));
        entry.insert("workspace_dir".into(), json!(dir.display().to_string()));
        if let Some(run) = first_failure {
            let why = run
                .error
                .clone()
                .unwrap_or_else(|| run.status.as_str().to_owned());
            entry.insert("error".into(), json!(format!("{}: {why}", run.dir)));
        }
        entries.push(Value::Object(entry));
    }
    let total_duration = plan
        .duration_s
        .unwrap_or_else(|| plan.runs.iter().filter_map(|r| r.duration_s).sum());
    json!({
        "experiment": plan.name,
        "total_setup_treatments": total_setup,
        "total_run_treatments": total_run,
        "total_matrix": total_setup * total_run.max(1),
        "succeeded": succeeded,
        "failed": failed,
        "total_duration_seconds": round1(total_duration),
        "treatments": entries,
    })
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// guidellm's `benchmarks.json` for the whole experiment: the first run's report with `benchmarks` replaced by
/// every run's benchmarks in plan order (each run's own `benchmarks.json`). `None` when no run wrote one.
pub(crate) fn guidellm_benchmarks(
    dir: &Path,
    plan: &ExperimentPlan,
    warnings: &mut Vec<String>,
) -> Option<Value> {
    let mut report: Option<Value> = None;
    let mut benchmarks = Vec::new();
    for run in &plan.runs {
        let path = dir.join(&run.dir).join(GUIDELLM_REPORT_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                warnings.push(format!("cannot parse {}: {e}", path.display()));
                continue;
            }
        };
        if let Some(items) = value.get("benchmarks").and_then(Value::as_array) {
            benchmarks.extend(items.iter().cloned());
        }
        report.get_or_insert(value);
    }
    let mut report = report?;
    if let Some(map) = report.as_object_mut() {
        map.insert("benchmarks".into(), Value::Array(benchmarks));
    }
    Some(report)
}

/// What the terminal shows at the end of an experiment: a row per treatment (runs, req/s mean±sd, output tok/s,
/// TTFT p99, the capacity where there is one, the verdict), within [`TERMINAL_COLUMNS`] where the treatments'
/// names allow, then the verdict and the best treatment. Ends with a newline.
pub fn print_table(comparison: &Comparison) -> String {
    let mut out = terminal_table(comparison, usize::MAX);
    let widest = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    if widest > TERMINAL_COLUMNS {
        // Long treatment names are cut in the middle, where their shared prefix and distinct suffix both stay.
        let name_width = comparison
            .rows
            .iter()
            .map(|r| r.treatment.chars().count())
            .max()
            .unwrap_or(0);
        let room = name_width.saturating_sub(widest - TERMINAL_COLUMNS);
        out = terminal_table(comparison, room.max(MIN_TREATMENT_NAME));
    }
    for line in verdict_lines(comparison) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The fewest characters a cut treatment name keeps.
const MIN_TREATMENT_NAME: usize = 16;

/// One treatment's row of the table the terminal and compare.html show, as text.
struct TableRow<'a> {
    treatment: &'a str,
    levels: &'a BTreeMap<String, String>,
    /// Succeeded / planned runs.
    runs: String,
    /// Mean ± standard deviation over its runs.
    requests_per_second: String,
    output_tokens_per_second: String,
    ttft_p99_ms: String,
    /// The share of prompt tokens served from the prefix cache, where any treatment's runs reported it: tells a
    /// cold treatment from a warm one.
    prefix_hit: Option<String>,
    /// Where any treatment's runs searched for their capacity.
    capacity: Option<String>,
    /// passed / failed / `-`, and how many runs failed.
    verdict: String,
    best: bool,
}

impl TableRow<'_> {
    /// The figure columns both tables show, in order: runs ok, req/s, output tok/s, TTFT p99, then the prefix
    /// cache's hit rate and the capacity where any treatment has them.
    fn figures(&self) -> impl Iterator<Item = String> + '_ {
        [
            &self.runs,
            &self.requests_per_second,
            &self.output_tokens_per_second,
            &self.ttft_p99_ms,
        ]
        .into_iter()
        .chain(&self.prefix_hit)
        .chain(&self.capacity)
        .cloned()
    }

    /// The verdict, with `best_mark` after it on the best treatment's row.
    fn verdict_cell(&self, best_mark: &str) -> String {
        if self.best {
            format!("{}{best_mark}", self.verdict)
        } else {
            self.verdict.clone()
        }
    }
}

/// The table's rows: treatment, runs ok, req/s mean±sd, output tok/s, TTFT p99, capacity where any row has one,
/// verdict.
fn table_rows(comparison: &Comparison) -> Vec<TableRow<'_>> {
    let mut planned: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &comparison.runs {
        *planned.entry(run.treatment.as_str()).or_default() += 1;
    }
    let capacity = comparison.rows.iter().any(|r| r.capacity.is_some());
    let prefix_hit = comparison
        .rows
        .iter()
        .any(|r| r.prefix_cache_hit_percent.is_some());
    comparison
        .rows
        .iter()
        .map(|row| {
            let total = planned.get(row.treatment.as_str()).copied().unwrap_or(0);
            let mut verdict = row.verdict.clone().unwrap_or_else(|| "-".to_owned());
            if row.failed_runs > 0 {
                verdict.push_str(&format!(" ({} failed)", row.failed_runs));
            }
            TableRow {
                treatment: &row.treatment,
                levels: &row.levels,
                runs: format!("{}/{}", row.runs, total),
                requests_per_second: row.requests_per_second.map_or("-".to_owned(), |a| {
                    let digits = decimals(a.mean);
                    format!("{:.digits$}±{:.digits$}", a.mean, a.stddev)
                }),
                output_tokens_per_second: row
                    .output_tokens_per_second
                    .map_or("-".to_owned(), |a| fmt3(a.mean)),
                ttft_p99_ms: row.ttft_p99_ms.map_or("-".to_owned(), |a| fmt3(a.mean)),
                prefix_hit: prefix_hit.then(|| {
                    row.prefix_cache_hit_percent
                        .map_or("-".to_owned(), |a| format!("{:.1}", a.mean))
                }),
                capacity: capacity.then(|| row.capacity.map_or("-".to_owned(), |a| fmt3(a.mean))),
                verdict,
                best: comparison.best.as_deref() == Some(row.treatment.as_str()),
            }
        })
        .collect()
}

/// The treatments' table for the terminal, their names cut to `name_chars` characters.
fn terminal_table(comparison: &Comparison, name_chars: usize) -> String {
    let rows = table_rows(comparison);
    let capacity = rows.iter().any(|r| r.capacity.is_some());
    let mut columns = vec![
        ("treatment", Align::Left),
        ("runs ok", Align::Right),
        ("req/s (mean±sd)", Align::Right),
        ("out tok/s", Align::Right),
        ("TTFT p99 ms", Align::Right),
    ];
    if rows.iter().any(|r| r.prefix_hit.is_some()) {
        columns.push(("prefix hit %", Align::Right));
    }
    if capacity {
        columns.push(("capacity", Align::Right));
    }
    columns.push(("verdict", Align::Left));
    let mut table = Table::new(&columns);
    for row in &rows {
        let mut cells = vec![shorten_middle(row.treatment, name_chars)];
        cells.extend(row.figures());
        cells.push(row.verdict_cell(" best"));
        table.push(Tone::Plain, cells);
    }
    table.to_text()
}

fn passed_none(judged: &[&TreatmentRow]) -> bool {
    judged
        .iter()
        .all(|r| r.verdict.as_deref() != Some("passed"))
}

/// `text` cut to `chars` characters by taking out its middle: `setup_1-tre…ment_12`.
fn shorten_middle(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    if count <= chars || chars < 3 {
        return text.to_owned();
    }
    let tail = (chars - 1) / 2;
    let head = chars - 1 - tail;
    let head: String = text.chars().take(head).collect();
    let tail: String = text.chars().skip(count - tail).collect();
    format!("{head}…{tail}")
}

/// The experiment's verdict and its best treatment, one line each: how many treatments met the SLO (when the
/// experiment has one) and how many runs failed; which treatment is best and by what rule (llmbench-api's
/// `best`: the highest capacity where the runs searched for one, else the highest output tokens/s among the
/// treatments that met the SLO).
pub(crate) fn verdict_lines(comparison: &Comparison) -> Vec<String> {
    let rows = &comparison.rows;
    let judged: Vec<&TreatmentRow> = rows
        .iter()
        .filter(|r| r.runs > 0 && r.verdict.is_some())
        .collect();
    let failed_runs: u32 = rows.iter().map(|r| r.failed_runs).sum();
    let total_runs: u32 = rows.iter().map(|r| r.runs + r.failed_runs).sum();
    let failed = if failed_runs > 0 {
        format!("; {failed_runs} of {total_runs} runs failed")
    } else {
        String::new()
    };
    let verdict = if judged.is_empty() {
        format!(
            "verdict: {} treatments compared, no SLO to judge them by{failed}",
            rows.len()
        )
    } else {
        let missed: Vec<&str> = judged
            .iter()
            .filter(|r| r.verdict.as_deref() != Some("passed"))
            .map(|r| r.treatment.as_str())
            .collect();
        let passed = judged.len() - missed.len();
        let which = match missed.as_slice() {
            [] => String::new(),
            [one] => format!(" ({one} did not)"),
            many if many.len() <= 3 => format!(" ({} did not)", many.join(", ")),
            many => format!(" ({} did not)", many.len()),
        };
        format!(
            "verdict: {passed} of {} treatments met the SLO{which}{failed}",
            rows.len()
        )
    };
    let any_capacity = rows.iter().any(|r| r.capacity.is_some());
    let rule = if any_capacity {
        "the highest capacity"
    } else if !judged.is_empty() {
        "the highest output tok/s of those that met the SLO"
    } else {
        "the highest output tok/s"
    };
    let best = match &comparison.best {
        Some(best) => format!("best: {best} ({rule})"),
        None if !any_capacity && !judged.is_empty() && passed_none(&judged) => {
            "best: none (no treatment met the SLO)".to_owned()
        }
        None => "best: none (no run finished with figures to compare)".to_owned(),
    };
    vec![verdict, best]
}

/// Three significant figures, as the run table prints them.
fn fmt3(x: f64) -> String {
    let digits = decimals(x);
    format!("{x:.digits$}")
}

/// The decimals that show `x` to three significant figures (none for 100 and above).
fn decimals(x: f64) -> usize {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    usize::try_from((2 - x.abs().log10().floor() as i32).max(0)).unwrap_or(0)
}

/// The SLO in words: `TTFT p99 ≤ 500 ms, failure rate ≤ 0.01`.
fn slo_text(slo: &SloSpec) -> String {
    let mut bounds = Vec::new();
    for (name, bound) in [
        ("TTFT", slo.ttft_p99_ms),
        ("TPOT", slo.tpot_p99_ms),
        ("ITL", slo.itl_p99_ms),
        ("E2E", slo.e2e_p99_ms),
    ] {
        if let Some(bound) = bound {
            bounds.push(format!("{name} p99 ≤ {bound} ms"));
        }
    }
    if let Some(rate) = slo.max_failure_rate {
        bounds.push(format!("failure rate ≤ {rate}"));
    }
    bounds.join(", ")
}

/// The table compare.html opens with: the terminal's columns with each factor's level after the treatment, the
/// best row marked, the SLO and how many treatments met it, and the best treatment with the rule that chose it
/// (llmbench-api's `best`).
pub(crate) fn treatment_table(comparison: &Comparison, slo: Option<&SloSpec>) -> TreatmentTable {
    let rows = table_rows(comparison);
    let mut factors: Vec<&str> = Vec::new();
    for row in &rows {
        for factor in row.levels.keys() {
            if !factors.contains(&factor.as_str()) {
                factors.push(factor);
            }
        }
    }
    let capacity = rows.iter().any(|r| r.capacity.is_some());
    let mut header = vec!["treatment".to_owned()];
    header.extend(factors.iter().map(|f| (*f).to_owned()));
    header.extend(
        ["runs ok", "req/s (mean±sd)", "out tok/s", "TTFT p99 ms"]
            .into_iter()
            .map(str::to_owned),
    );
    if rows.iter().any(|r| r.prefix_hit.is_some()) {
        header.push("prefix hit %".to_owned());
    }
    if capacity {
        header.push("capacity".to_owned());
    }
    header.push("verdict".to_owned());
    let cells = rows
        .iter()
        .map(|row| {
            let mut cells = vec![row.treatment.to_owned()];
            cells.extend(
                factors
                    .iter()
                    .map(|f| row.levels.get(*f).cloned().unwrap_or_default()),
            );
            cells.extend(row.figures());
            cells.push(row.verdict_cell(" · best"));
            cells
        })
        .collect();
    let judged: Vec<&TreatmentRow> = comparison
        .rows
        .iter()
        .filter(|r| r.runs > 0 && r.verdict.is_some())
        .collect();
    let passed = judged
        .iter()
        .filter(|r| r.verdict.as_deref() == Some("passed"))
        .count();
    let verdict = slo.map(|slo| {
        format!(
            "SLO ({}): {passed} of {} treatment(s) with a finished run met it in every run.",
            slo_text(slo),
            judged.len()
        )
    });
    let why = if comparison.rows.iter().any(|r| r.capacity.is_some()) {
        "the highest mean capacity"
    } else if !judged.is_empty() {
        "the highest mean output tokens/s among the treatments that met the SLO"
    } else {
        "the highest mean output tokens/s"
    };
    let best = match &comparison.best {
        Some(best) => format!("Best: {best}, {why}."),
        None if !judged.is_empty() => "No best: no treatment met the SLO.".to_owned(),
        None => "No best: no treatment has a finished run.".to_owned(),
    };
    // The treatment, its levels and the verdict.
    let text_columns = (0..=factors.len()).chain([header.len() - 1]).collect();
    TreatmentTable {
        title: format!(
            "experiment {} (id {})",
            comparison.experiment, comparison.id
        ),
        header,
        text_columns,
        best_row: rows.iter().position(|r| r.best),
        rows: cells,
        verdict,
        best,
    }
}

/// The treatment table of the experiment in `dir`, from its files alone (as `experiment report` builds the
/// comparison), for `llmbench plot DIR`.
pub fn treatment_table_of(dir: &Path) -> Result<TreatmentTable, ExperimentError> {
    let plan = super::plan::read(&dir.join(super::plan::EXPERIMENT_FILE))?;
    let comparison = comparison(dir, &plan, &mut Vec::new());
    Ok(treatment_table(&comparison, plan.slo.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::plan::{EXPERIMENT_SCHEMA, PlanRun, PlanTreatment};

    fn plan(runs: &[(&str, &str, u32, RunStatus)]) -> ExperimentPlan {
        let mut names: Vec<&str> = runs.iter().map(|r| r.1).collect();
        names.dedup();
        names.sort();
        names.dedup();
        ExperimentPlan {
            schema: EXPERIMENT_SCHEMA.to_owned(),
            name: "sweep".into(),
            id: "sweep-1".into(),
            harness: "vllm-benchmark".into(),
            profile: "random_concurrent".into(),
            source: None,
            source_format: None,
            endpoint: None,
            model: None,
            overrides: vec![],
            override_add: vec![],
            repeats: 1,
            capacity_search: None,
            slo: None,
            max_attempts: 1,
            validate_failures: false,
            stop_on_failure: false,
            cooldown: None,
            hooks: vec![],
            cache_reset: false,
            cache_warm: false,
            setup_treatments: vec![],
            treatments: names
                .iter()
                .map(|n| PlanTreatment {
                    name: (*n).into(),
                    overrides: vec![],
                    levels: Default::default(),
                    profile: None,
                    setup: None,
                    endpoint: None,
                    model: None,
                    cache: None,
                })
                .collect(),
            runs: runs
                .iter()
                .map(|(dir, t, repeat, status)| PlanRun {
                    dir: (*dir).into(),
                    treatment: (*t).into(),
                    repeat: *repeat,
                    status: *status,
                    attempts: 1,
                    hooks: vec![],
                    error: (*status == RunStatus::Failed).then(|| "boom".to_owned()),
                    started_at: None,
                    finished_at: None,
                    duration_s: matches!(status, RunStatus::Succeeded | RunStatus::Failed)
                        .then_some(1.25),
                })
                .collect(),
            started_at: None,
            finished_at: None,
            duration_s: None,
            interrupted: false,
        }
    }

    #[test]
    fn the_csv_has_llm_d_benchmarks_columns_and_one_row_per_v02_report() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("a-r1");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(
            run.join("benchmark_report_v0.2,_stage_0.yaml"),
            "scenario:\n  load:\n    standardized: {tool: vllm-benchmark, rate_qps: 0}\nresults:\n  request_performance:\n    \
             aggregate:\n      requests: {total: 10, failures: 0, input_length: {mean: 16.0}}\n      throughput:\n        \
             request_rate: {mean: 2.5}\n",
        )
        .unwrap();
        let p = plan(&[
            ("a-r1", "a", 1, RunStatus::Succeeded),
            ("b-r1", "b", 1, RunStatus::Failed),
        ]);
        let text = treatment_csv(dir.path(), &p);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0]
                .starts_with("treatment,source_file,ttft_mean_s,ttft_p50_s,ttft_p99_s,tpot_mean_s")
        );
        assert!(lines[0].ends_with(
            "total_sessions,failed_sessions,input_len_mean,output_len_mean,tool,rate_qps"
        ));
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let row = reader.records().next().unwrap().unwrap();
        assert_eq!(row.len(), 30);
        assert_eq!(
            (&row[0], &row[1]),
            ("a-r1", "benchmark_report_v0.2,_stage_0.yaml")
        );
        // The file name holds a comma, so it is quoted, as Python's csv module quotes it.
        assert!(
            lines[1].starts_with("a-r1,\"benchmark_report_v0.2,_stage_0.yaml\","),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains(",2.5,"), "{}", lines[1]);
        // rate_qps 0 is falsy upstream: empty.
        assert!(lines[1].ends_with(",vllm-benchmark,"), "{}", lines[1]);
    }

    #[test]
    fn the_summary_has_one_default_entry_without_setups_and_names_the_first_failure() {
        let p = plan(&[
            ("a-r1", "a", 1, RunStatus::Succeeded),
            ("b-r1", "b", 1, RunStatus::Failed),
            ("a-r2", "a", 2, RunStatus::Succeeded),
            ("b-r2", "b", 2, RunStatus::Skipped),
        ]);
        let s = experiment_summary(Path::new("/x"), &p);
        assert_eq!(s["total_setup_treatments"], 1);
        assert_eq!(s["total_run_treatments"], 2);
        assert_eq!(s["total_matrix"], 2);
        assert_eq!(
            (s["succeeded"].clone(), s["failed"].clone()),
            (json!(0), json!(1))
        );
        assert_eq!(s["total_duration_seconds"], 3.8);
        let entry = &s["treatments"][0];
        assert_eq!(entry["setup_treatment"], "default");
        assert_eq!(entry["status"], "failed_run");
        assert_eq!(entry["run_treatments"], "1/2");
        assert_eq!(entry["error"], "b-r1: boom");
        let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "experiment",
                "total_setup_treatments",
                "total_run_treatments",
                "total_matrix",
                "succeeded",
                "failed",
                "total_duration_seconds",
                "treatments"
            ]
        );
    }

    #[test]
    fn guidellm_reports_merge_in_plan_order() {
        let dir = tempfile::tempdir().unwrap();
        for (run, id) in [("b-r1", "second"), ("a-r1", "first")] {
            std::fs::create_dir(dir.path().join(run)).unwrap();
            std::fs::write(
                dir.path().join(run).join(GUIDELLM_REPORT_FILE),
                json!({"metadata": {"version": 2}, "benchmarks": [{"id": id}]}).to_string(),
            )
            .unwrap();
        }
        let p = plan(&[
            ("a-r1", "a", 1, RunStatus::Succeeded),
            ("b-r1", "b", 1, RunStatus::Succeeded),
        ]);
        let merged = guidellm_benchmarks(dir.path(), &p, &mut Vec::new()).unwrap();
        assert_eq!(
            merged["benchmarks"],
            json!([{"id": "first"}, {"id": "second"}])
        );
        assert_eq!(merged["metadata"]["version"], 2);
        assert!(guidellm_benchmarks(&dir.path().join("none"), &p, &mut Vec::new()).is_none());
    }

    #[test]
    fn the_printed_table_shows_mean_and_sd_per_treatment_and_marks_the_best() {
        use llmbench_api::v1alpha1::Aggregate;
        let row = |name: &str, rps: &[f64], failed: u32| TreatmentRow {
            treatment: name.into(),
            runs: u32::try_from(rps.len()).unwrap(),
            failed_runs: failed,
            requests_per_second: Aggregate::of(rps),
            output_tokens_per_second: Aggregate::of(
                &rps.iter().map(|r| r * 10.0).collect::<Vec<_>>(),
            ),
            ttft_p99_ms: Aggregate::of(&[12.345]),
            verdict: Some("passed".into()),
            ..TreatmentRow::default()
        };
        let mut c = comparison(Path::new("/none"), &plan(&[]), &mut Vec::new());
        c.rows = vec![row("slow", &[10.0, 12.0], 0), row("fast", &[20.0], 1)];
        c.best = Some("fast".into());
        let text = print_table(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("treatment") && lines[0].ends_with("verdict"),
            "{text}"
        );
        assert!(
            lines[1].contains("11.0±1.4 ") && lines[1].contains("110"),
            "{text}"
        );
        assert!(
            lines[1].contains("12.3") && lines[1].ends_with("passed"),
            "{text}"
        );
        assert!(lines[2].ends_with("passed (1 failed) best"), "{text}");
        assert!(!text.contains("capacity"));
        // It ends with the verdict and the best, and why it is the best.
        assert_eq!(
            &lines[3..],
            [
                "verdict: 2 of 2 treatments met the SLO; 1 of 4 runs failed",
                "best: fast (the highest output tok/s of those that met the SLO)"
            ]
        );
    }

    #[test]
    fn long_treatment_names_are_cut_in_the_middle_to_fit_a_terminal() {
        let row = |name: &str, verdict: &str| TreatmentRow {
            treatment: name.into(),
            runs: 1,
            verdict: Some(verdict.into()),
            ..TreatmentRow::default()
        };
        let long = "setup_prefill-4_decode-8-treatment_max-num-seqs-256_block-size-16_kv-cache-fp8";
        let mut c = comparison(Path::new("/none"), &plan(&[]), &mut Vec::new());
        c.rows = vec![
            row(long, "passed"),
            row(&long.replace("fp8", "auto"), "failed"),
        ];
        c.best = core::best(&c.rows);
        let text = print_table(&c);
        // The table fits; the verdict and best lines name the treatments in full.
        for line in text.lines().take_while(|l| !l.starts_with("verdict:")) {
            assert!(
                line.chars().count() <= TERMINAL_COLUMNS,
                "too wide: {line}\n{text}"
            );
        }
        // Both names keep their start and their distinct end.
        assert!(
            text.contains("setup_prefill-4_") && text.contains("kv-cache-fp8"),
            "{text}"
        );
        assert!(text.contains("kv-cache-auto"), "{text}");
        assert!(text.contains(&format!(
            "verdict: 1 of 2 treatments met the SLO ({} did not)",
            long.replace("fp8", "auto")
        )));
        // Without output figures there is nothing to rank by.
        assert!(
            text.ends_with("best: none (no run finished with figures to compare)\n"),
            "{text}"
        );
        assert_eq!(shorten_middle("abcdefghij", 5), "ab…ij");
        assert_eq!(shorten_middle("abc", 5), "abc");
    }

    #[test]
    fn a_succeeded_run_without_a_summary_counts_as_failed_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&[("a-r1", "a", 1, RunStatus::Succeeded)]);
        let mut warnings = Vec::new();
        let c = comparison(dir.path(), &p, &mut warnings);
        assert_eq!(c.runs[0].status, RunStatus::Failed);
        assert_eq!((c.rows[0].runs, c.rows[0].failed_runs), (0, 1));
        assert!(warnings[0].contains("summary.json"), "{warnings:?}");
    }

    #[test]
    fn compare_html_opens_with_the_printed_tables_rows_the_levels_the_slo_verdict_and_the_best() {
        use llmbench_api::v1alpha1::Aggregate;
        let row = |name: &str, conc: &str, rps: &[f64], verdict: &str| TreatmentRow {
            treatment: name.into(),
            levels: [("conc".to_owned(), conc.to_owned())].into(),
            runs: u32::try_from(rps.len()).unwrap(),
            requests_per_second: Aggregate::of(rps),
            output_tokens_per_second: Aggregate::of(
                &rps.iter().map(|r| r * 10.0).collect::<Vec<_>>(),
            ),
            ttft_p99_ms: Aggregate::of(&[12.345]),
            verdict: Some(verdict.into()),
            ..TreatmentRow::default()
        };
        let mut c = comparison(
            Path::new("/none"),
            &plan(&[
                ("a-r1", "a", 1, RunStatus::Succeeded),
                ("a-r2", "a", 2, RunStatus::Succeeded),
                ("b-r1", "b", 1, RunStatus::Succeeded),
            ]),
            &mut Vec::new(),
        );
        c.rows = vec![
            row("a", "2", &[10.0, 12.0], "passed"),
            row("b", "8", &[20.0], "failed"),
        ];
        c.best = Some("a".into());
        let slo = SloSpec {
            ttft_p99_ms: Some(500.0),
            tpot_p99_ms: None,
            itl_p99_ms: None,
            e2e_p99_ms: None,
            max_failure_rate: Some(0.01),
        };
        let table = treatment_table(&c, Some(&slo));
        assert_eq!(table.title, "experiment sweep (id sweep-1)");
        assert_eq!(
            table.header,
            [
                "treatment",
                "conc",
                "runs ok",
                "req/s (mean±sd)",
                "out tok/s",
                "TTFT p99 ms",
                "verdict"
            ]
        );
        // The terminal's cells, the level after the treatment.
        assert_eq!(
            table.rows,
            [
                ["a", "2", "2/2", "11.0±1.4", "110", "12.3", "passed · best"],
                ["b", "8", "1/1", "20.0±0.0", "200", "12.3", "failed"],
            ]
        );
        let printed = print_table(&c);
        assert!(
            printed.lines().nth(1).unwrap().contains("11.0±1.4"),
            "{printed}"
        );
        assert_eq!(table.text_columns, [0, 1, 6]);
        assert_eq!(table.best_row, Some(0));
        assert_eq!(
            table.verdict.as_deref(),
            Some(
                "SLO (TTFT p99 ≤ 500 ms, failure rate ≤ 0.01): 1 of 2 treatment(s) with a finished run met it in \
                 every run."
            )
        );
        assert_eq!(
            table.best,
            "Best: a, the highest mean output tokens/s among the treatments that met the SLO."
        );
        // Without an SLO: no verdict, and the best is the fastest.
        c.rows.iter_mut().for_each(|r| r.verdict = None);
        let table = treatment_table(&c, None);
        assert_eq!(table.verdict, None);
        assert_eq!(table.best, "Best: a, the highest mean output tokens/s.");
        c.best = None;
        assert_eq!(
            treatment_table(&c, None).best,
            "No best: no treatment has a finished run."
        );
    }
}
