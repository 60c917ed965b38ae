//! `llmbench run --harness nop --vllm-log FILE`: llm-d-benchmark's nop harness sends no load; it reads a vLLM
//! server's log and reports how long the server took to load its model, by startup phase. The reading is
//! `llmbench_core::vllm_log` (shared with the operator, which reads a stack pod's log); this module reads the
//! file, writes upstream's files into the run's directory, and reads them again for `llmbench report`.
//!
//! Files, as upstream's harness (`workload/harnesses/nop-llm-d-benchmark.py`, `populate_benchmark` of
//! `nop_functions.py`) and analyser (`nop-analyze_results.py`) lay them out under the results directory:
//! `result.yaml`, `<name>/vllm.log` (the log as read), `<name>/categories.log`, `analysis/result.txt`. Upstream's
//! `benchmark_report/result.yaml` (its v0.1 report, made by its `benchmark-report` tool) is not written; the run's
//! own summary carries the figures (`model_load`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use llmbench_core::harness::Harness;
use llmbench_core::vllm_log::{
    self, Analysis, LogSource, ModelLoadSummary, NopResult, VllmLogError, analysis_text,
};
use llmbench_engine::engine::Requests;
use llmbench_report::report::{ProfileNote, RunMeta};
use llmbench_workload::workload::Workload;

use super::runner::{RunOutcome, Runner};
use super::{Execution, RunContext, RunError, report_options};

/// The native result file, beside the run's own.
pub(crate) const RESULT_FILE: &str = "result.yaml";
/// The analyser's text report, under `analysis/`.
pub(crate) const ANALYSIS_FILE: &str = "analysis/result.txt";

/// Why the vLLM log could not be read or its results written.
#[derive(Debug, thiserror::Error)]
pub enum NopError {
    #[error("cannot read the vLLM log {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: none of the vLLM startup lines llm-d-benchmark's nop reads is in it ({}), and no startup phase \
         (model loading, torch.compile, CUDA graph capture, …) starts or ends in it; is it a vLLM server's log?",
        path.display(),
        vllm_log::MARKERS.join(", ")
    )]
    NothingFound { path: PathBuf },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode {}: {reason}", path.display())]
    Encode { path: PathBuf, reason: String },
}

/// A vLLM log read and analysed.
#[derive(Debug)]
pub(crate) struct VllmLog {
    pub(crate) path: PathBuf,
    /// The bytes as read, copied into the results as upstream copies the pod's log.
    pub(crate) bytes: Vec<u8>,
    pub(crate) source: LogSource,
    pub(crate) analysis: Analysis,
}

/// Reads and analyses `path`. The server's name is the file's stem; the model is `model` (`--model`), else the
/// one the log's "non-default args:" names; the log's dates are in `year`.
pub(crate) fn read(path: &Path, model: Option<&str>, year: i32) -> Result<VllmLog, NopError> {
    let bytes = std::fs::read(path).map_err(|source| NopError::Read {
        path: path.to_owned(),
        source,
    })?;
    // A log may hold a torn multi-byte character (a truncated line); upstream's strict decode would fail on it.
    let text = String::from_utf8_lossy(&bytes);
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "vllm".to_owned());
    let source = LogSource {
        name,
        model: model
            .map(str::to_owned)
            .or_else(|| model_in_args(&text))
            .unwrap_or_default(),
        year,
    };
    let analysis = vllm_log::analyze(&text, &source).map_err(|e| match e {
        VllmLogError::NothingFound { .. } => NopError::NothingFound {
            path: path.to_owned(),
        },
    })?;
    Ok(VllmLog {
        path: path.to_owned(),
        bytes,
        source,
        analysis,
    })
}

/// The `'model': '…'` of the log's "non-default args:" line (what `vllm serve MODEL` was given), standing in for
/// upstream's `/v1/models` question, which a log file cannot answer.
fn model_in_args(text: &str) -> Option<String> {
    const KEY: &str = "'model': '";
    let line = text.lines().find(|l| l.contains("non-default args:"))?;
    let from = line.find(KEY)? + KEY.len();
    let len = line[from..].find('\'')?;
    Some(line[from..from + len].to_owned()).filter(|m| !m.is_empty())
}

/// Writes upstream's files for a harness run from `start` to `stop` (epoch seconds) into `dir`; returns them.
pub(crate) fn write_results(
    dir: &Path,
    log: &VllmLog,
    start: f64,
    stop: f64,
) -> Result<Vec<PathBuf>, NopError> {
    let result = NopResult::new(&log.analysis, &log.source, start, stop);
    let yaml = serde_saphyr::to_string(&result).map_err(|e| NopError::Encode {
        path: dir.join(RESULT_FILE),
        reason: e.to_string(),
    })?;
    let server_dir = dir.join(log.source.name.replace(' ', "_"));
    let files = [
        (dir.join(RESULT_FILE), yaml.into_bytes()),
        (server_dir.join("vllm.log"), log.bytes.clone()),
        (
            server_dir.join("categories.log"),
            log.analysis.categories.log_text().into_bytes(),
        ),
        (dir.join(ANALYSIS_FILE), analysis_text(&result).into_bytes()),
    ];
    let mut written = Vec::new();
    for (path, bytes) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| NopError::Write {
                path: parent.to_owned(),
                source,
            })?;
        }
        std::fs::write(&path, bytes).map_err(|source| NopError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The model-load figures of a finished run in `dir`, read again from its files for `llmbench report`, which
/// rebuilds summary.json from the files alone and is handed these figures. `None` for a run of another harness or
/// one whose run.json cannot be read (the report says why).
pub fn model_load_of_run(dir: &Path) -> Option<ModelLoadSummary> {
    let meta = RunMeta::read(dir).ok()?;
    (meta.harness == Harness::Nop)
        .then(|| model_load_from_dir(dir, &meta.started_at))
        .flatten()
}

/// A nop run's model-load figures from its files: the server's name and model from `result.yaml`, the log from the
/// copy beside it, its dates in the year the run started (`started_at` of run.json). `None` for a run that read no
/// log; a warning and `None` when those files cannot be read.
fn model_load_from_dir(dir: &Path, started_at: &str) -> Option<ModelLoadSummary> {
    let result_path = dir.join(RESULT_FILE);
    if !result_path.exists() {
        return None;
    }
    let read = || -> Result<ModelLoadSummary, String> {
        let text = std::fs::read_to_string(&result_path).map_err(|e| e.to_string())?;
        let result: NopResult = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
        let name = result
            .vllm_metrics
            .first()
            .map(|m| m.name.clone())
            .ok_or("it lists no server")?;
        let log_path = dir.join(name.replace(' ', "_")).join("vllm.log");
        let bytes = std::fs::read(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let source = LogSource {
            name,
            model: result.scenario.model.name,
            year: started_at
                .get(..4)
                .and_then(|y| y.parse().ok())
                .unwrap_or_else(current_year),
        };
        let analysis = vllm_log::analyze(&String::from_utf8_lossy(&bytes), &source)
            .map_err(|e| e.to_string())?;
        Ok(ModelLoadSummary::new(&analysis))
    };
    match read() {
        Ok(summary) => Some(summary),
        Err(error) => {
            tracing::warn!(path = %result_path.display(), error, "cannot read the nop run's model-load figures again");
            None
        }
    }
}

/// The current UTC year, which the log's `MM-DD` dates are read in (as upstream reads them in the current year).
pub(crate) fn current_year() -> i32 {
    let stamp = llmbench_model::wallclock::rfc3339_millis(llmbench_model::wallclock::unix_ns_now());
    stamp.get(..4).and_then(|y| y.parse().ok()).unwrap_or(1970)
}

/// The nop harness: llm-d-benchmark's nop sends nothing and reads the vLLM server's log for its model-load times.
/// With `--vllm-log` the log is read (and refused, before the results directory is made, when it is no vLLM log)
/// and upstream's files and the summary's `model_load` written; without it the run only records that it ran, and
/// says in run.json and the summary that no log was given.
pub(crate) struct NopRun {
    pub(crate) workload: Workload,
}

impl Runner for NopRun {
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError> {
        let workload = &self.workload;
        let args = context.args;
        let log = match &args.vllm_log {
            Some(path) => Some(read(path, args.model.as_deref(), current_year())?),
            None => {
                context.notes.push(ProfileNote {
                    key: "--vllm-log".to_owned(),
                    line: None,
                    kind: "ignored".to_owned(),
                    message: "no vLLM log was given, so no model-load times were read (llm-d-benchmark's nop reads \
                              them from the server's log; pass --vllm-log FILE)"
                        .to_owned(),
                });
                None
            }
        };
        let mut executed = context
            .execute(Execution {
                api: &workload.api,
                request_model: context
                    .request_model(workload.api.model.clone())
                    .unwrap_or_default(),
                tokenizer_spec: String::new(),
                stages: context.shard(Vec::new(), &workload.stages)?,
                interval: workload.stage_interval,
                requests: Requests::Fixed(Arc::from([])),
                warmup: None,
                request_timeout: None,
                max_concurrency: None,
                report: report_options(workload),
                keep_text: false,
                // The nop harness sends nothing: there is no server to check.
                preflight: None,
                stage_requests: None,
                prime: None,
            })
            .await?;
        if let Some(log) = log {
            let start = executed.meta.t0_unix_ns as f64 / 1e9;
            let stop = llmbench_model::wallclock::unix_ns_now() as f64 / 1e9;
            let files = write_results(&executed.dir, &log, start, stop)?;
            for file in &files {
                tracing::info!(file = %file.display(), "wrote");
            }
            for marker in &log.analysis.missing {
                tracing::warn!(
                    log = %log.path.display(),
                    line = marker,
                    "not in the vLLM log: its figure is 0, as llm-d-benchmark's nop reports it"
                );
            }
            executed.summary.model_load = Some(ModelLoadSummary::new(&log.analysis));
        }
        context.finish(executed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_comes_from_the_non_default_args_when_not_given() {
        let log = "(APIServer pid=1) INFO 01-23 15:48:29 [utils.py:233] non-default args: {'model_tag': 'm', \
                   'model': 'Qwen/Qwen3-0.6B', 'enable_sleep_mode': True}\n";
        assert_eq!(model_in_args(log).as_deref(), Some("Qwen/Qwen3-0.6B"));
        assert_eq!(model_in_args("INFO nothing here\n"), None);
    }

    #[test]
    fn a_file_without_any_vllm_line_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "just text\n").unwrap();
        let err = read(&path, None, 2025).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}: none of the vLLM startup lines",
                path.display()
            )),
            "{err}"
        );
        assert!(err.contains("Model loading took"), "{err}");
        let missing = read(&dir.path().join("absent.log"), None, 2025).unwrap_err();
        assert!(matches!(missing, NopError::Read { .. }), "{missing}");
    }
}
