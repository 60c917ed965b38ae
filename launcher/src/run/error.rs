//! Why a run could not be carried out.

use std::path::PathBuf;

use llmbench_core::harness::Harness;
use llmbench_data::DataError;
use llmbench_engine::engine::{self, EngineError, Signal};
use llmbench_metrics::metrics::WriteSummaryError;
use llmbench_report::report::ReportError;
use llmbench_sim::sim::SimError;
use llmbench_text::tokenizer::TokenizerError;
use llmbench_workload::conversations::ConversationError;
use llmbench_workload::profile::ProfileError;
use llmbench_workload::prompts::PromptError;
use llmbench_workload::workload::WorkloadError;
use llmbench_workload::workload::load_flags::LoadFlagError;

use super::{CacheResetError, EndpointError, OutputError, nop, preflight};
use crate::plan::PlanError;

/// Why a run could not be carried out (a failing request never is: it is recorded).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    LoadFlags(#[from] LoadFlagError),
    #[error(
        "--capacity-search varies the load itself and sizes each point, so {flag} has nothing to set\n  help: set \
         the search's `start`, `max`, `min_duration` and `min_requests` in its spec, or drop --capacity-search to \
         run at one load"
    )]
    LoadFlagWithCapacitySearch { flag: &'static str },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("cannot start the embedded simulator: {0}")]
    Sim(#[from] SimError),
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] TokenizerError),
    #[error(transparent)]
    Prompts(#[from] PromptError),
    #[error(transparent)]
    Conversations(#[from] ConversationError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The records file stopped taking records mid-run (a full disk, a quota, a file-size limit): the run stopped
    /// sending, and its reports were made from the records written, where the disk still took them.
    #[error("{}", describe_unwritable_records(path, *written, source, dir, reports))]
    RecordsUnwritable {
        path: String,
        written: u64,
        source: std::io::Error,
        dir: PathBuf,
        /// What the reports hold, or why they could not be written either.
        reports: Result<KeptReports, String>,
    },
    #[error("no model to send: {0}")]
    NoModel(String),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    EndpointUrl(#[from] EndpointError),
    #[error("cannot write {path}: {source}")]
    WriteOutput {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Summary(#[from] WriteSummaryError),
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("cannot scrape the server metrics: {0}")]
    ServerMetrics(#[from] llmbench_metrics::server_metrics::ServerMetricsError),
    #[error("cannot use the endpoint: {0}")]
    Endpoint(#[from] engine::http1::Http1Error),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("mlperf: {0}")]
    Mlperf(#[from] llmbench_metrics::mlperf::MlperfError),
    #[error("cannot read {what} {path}: {source}")]
    ReadInput {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot handle {signal}: {source}")]
    Signals {
        signal: Signal,
        source: std::io::Error,
    },
    #[error(transparent)]
    Limit(#[from] llmbench_workload::limits::LimitError),
    #[error(transparent)]
    Release(#[from] crate::release::ReleaseError),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error(
        "--vllm-log is read by the nop harness only (llm-d-benchmark's nop reads model-load times from the server's \
         log); the {harness} harness sends load and reads no log — run `--harness nop --profile nop --vllm-log FILE`"
    )]
    VllmLogNeedsNop { harness: Harness },
    #[error(transparent)]
    Nop(#[from] nop::NopError),
    #[error(transparent)]
    Stack(#[from] llmbench_engine::stack::StackError),
    #[error(transparent)]
    Profiler(#[from] llmbench_engine::stack::profiler::ProfilerError),
    #[error("--serve: {0}")]
    Serve(#[from] llmbench_engine::stack::serve::ServeError),
    #[error("capacity search: {0}")]
    CapacitySearch(String),
    #[error("trace replay: {0}")]
    Trace(#[from] llmbench_engine::trace::ReplayError),
    #[error(transparent)]
    SessionReplay(#[from] llmbench_engine::session_replay::SessionReplayError),
    #[error(
        "pre-flight: {0}\n  note: nothing was timed and no results were written; --no-preflight runs without these \
         checks"
    )]
    Preflight(#[from] preflight::PreflightError),
    /// The pre-flight found this run's own requests unusable on the server (longer than its context): a failure of
    /// the run, not of the server, which other runs against it may still use.
    #[error(
        "pre-flight: {0}\n  note: nothing was timed and no results were written; --no-preflight runs without these \
         checks"
    )]
    RequestsUnfit(preflight::PreflightError),
    /// `--preflight-only` on a run that has nothing to check.
    #[error("--preflight-only: {0}")]
    PreflightOnly(String),
    #[error("{0}\n  note: nothing was timed and no results were written")]
    CacheReset(#[from] CacheResetError),
    #[error(
        "{source}; the run stopped there: the stages that ran are recorded and reported in {}",
        dir.display()
    )]
    Adaptive {
        source: engine::PlannerError,
        dir: PathBuf,
    },
}

impl From<DataError> for RunError {
    fn from(e: DataError) -> Self {
        RunError::Prompts(PromptError::Data(e))
    }
}

/// What the reports of a run whose records file failed hold.
#[derive(Debug, Clone, Copy)]
pub struct KeptReports {
    /// Requests whose records reached the file, and so every report.
    pub recorded: u64,
    /// Requests sent whose records did not (counted and listed as lost).
    pub lost: u64,
}

/// A records failure: what stopped, and where the reports of what was kept are or how to get them.
fn describe_unwritable_records(
    path: &str,
    written: u64,
    source: &std::io::Error,
    dir: &std::path::Path,
    reports: &Result<KeptReports, String>,
) -> String {
    let dir = dir.display();
    match reports {
        Ok(KeptReports { recorded, lost }) => format!(
            "cannot write {path} ({source}): the run stopped issuing requests it could not record\n  note: every \
             report in {dir} was written from the {recorded} request(s) the file holds; the {lost} sent whose \
             records it refused are counted as lost and listed in {dir}/{}",
            llmbench_report::report::LOST_IN_FLIGHT_FILE
        ),
        Err(why) => format!(
            "cannot write {path} ({source}) after {written} record(s): the run stopped issuing requests it could \
             not record\n  help: the reports could not be written either ({why}); make room, then `llmbench \
             report {dir}` writes them from the records kept"
        ),
    }
}
