//! MLPerf Inference LoadGen support, the pure core: the `mlperf` harness dialect (a YAML profile plus LoadGen's
//! `user.conf` grammar), LoadGen's query schedules (Offline, Server, SingleStream, MultiStream), the run's verdict
//! (`Result is : VALID`, early stopping, `mlperf_log_summary.txt`) and ROUGE accuracy scoring.
//!
//! ```text
//! parse_settings("p.yaml", yaml, user_conf, &options) -> ParsedSettings { settings, warnings }
//! build_schedule(&settings, dataset_len)              -> MlperfSchedule { stages, samples, measured_stage }
//! evaluate(&settings, &records, &run)                 -> Verdict  (.summary_txt(), .write_summary_txt(), .write_json())
//! rouge::score(&predictions, &references)             -> RougeScores
//! logs::detail_log(&settings, Some(&verdict), &run)   -> mlperf_log_detail.txt
//! logs::accuracy_log(&entries)                        -> mlperf_log_accuracy.json
//! trace::TraceWriter::create(…).record(…).finish()   -> mlperf_log_trace.json
//! peak::PeakSearch::new(qps).next(last_outcome)       -> the FindPeakPerformance search's next pass
//! ```
//!
//! Nothing here reads files except the `write_*` helpers; the caller (the `run` module's mlperf runner) hands in
//! texts and records. Rules follow
//! mlcommons/inference `loadgen/` (`results.cc`, `early_stopping.cc`, `loadgen.cc`, `test_settings_internal.cc`,
//! `mlperf.conf`); FORMATS.md §3.6 and §4.5 summarise them.

pub mod early_stopping;
pub mod logs;
pub mod peak;
pub mod rng;
pub mod rouge;
pub mod schedule;
pub mod settings;
pub mod trace;
pub mod verdict;

pub use early_stopping::{EarlyStopping, MinPassingQueriesFinder, early_stopping};
pub use rouge::{AccuracyCheck, RougeScores};
pub use schedule::{AccuracyPass, MlperfSchedule, build_schedule};
pub use settings::{
    ConfLine, LlmModel, MLPERF_CONF, MlperfSettings, Mode, ParsedSettings, Scenario, UserConf,
    parse_settings, parse_user_conf,
};
pub use verdict::{Checks, LatencyStats, RunTimes, Verdict, evaluate, offline_samples_per_query};

use llmbench_workload::workload::WorkloadError;

/// Why MLPerf settings could not be read, a schedule built or a verdict written. Every variant names the file,
/// line and key it is about where there is one.
#[derive(Debug, thiserror::Error)]
pub enum MlperfError {
    /// The profile is not valid YAML (the common YAML reader's error, which names file and line).
    #[error(transparent)]
    Yaml(#[from] WorkloadError),
    /// A value the settings cannot take.
    #[error("{file}{}: `{key}`: {problem}", at(*line))]
    Invalid {
        file: String,
        line: Option<u32>,
        key: String,
        problem: String,
    },
    /// A `user.conf` line that is not `model.scenario.key = value`.
    #[error("{file}:{line}: `{text}`: {problem}")]
    ConfSyntax {
        file: String,
        line: u32,
        text: String,
        problem: String,
    },
    /// Strict mode: every unknown key, in order.
    #[error("{file}: strict mode rejects {} unknown key(s): {}", keys.len(), keys.join(", "))]
    UnknownKeys { file: String, keys: Vec<String> },
    /// The dataset has no samples to schedule.
    #[error("the dataset has no samples; an MLPerf run needs at least one")]
    EmptyDataset,
    /// Writing `mlperf_log_summary.txt` or the JSON verdict failed.
    #[error("failed to write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn at(line: Option<u32>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}
