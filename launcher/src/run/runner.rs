//! The harness runners' one interface. `run.rs` prepares what every run shares (the flags, the server, the
//! rendered profile: a [`RunContext`]) and picks the runner for the harness and the profile's data; the runner
//! builds what its harness sends and writes, and reaches the run only through that context, the execution service
//! every harness shares (pre-flight, sharding, [`RunContext::execute`], [`RunContext::finish`]).

use std::path::PathBuf;

use llmbench_engine::engine::StopReason;
use llmbench_metrics::metrics::RunSummary;
use llmbench_metrics::mlperf::{RougeScores, Verdict};
use llmbench_report::report::RunMeta;

use super::{RunContext, RunError};

/// How one harness carries out a run, given what the run prepared.
pub(crate) trait Runner {
    /// Builds the harness's requests, runs them through `context`, and writes what the harness leaves besides the
    /// usual results.
    async fn run(self, context: &mut RunContext<'_>) -> Result<RunOutcome, RunError>;
}

/// What a finished run leaves behind.
#[derive(Debug)]
pub struct RunOutcome {
    pub dir: PathBuf,
    /// run.json as the run ended.
    pub meta: RunMeta,
    pub summary: RunSummary,
    /// LoadGen's verdict, for the mlperf harness in performance mode.
    pub mlperf: Option<Verdict>,
    /// ROUGE scores, for the mlperf harness in accuracy mode.
    pub accuracy: Option<RougeScores>,
    /// Why the run stopped before its plan was done, if it did (an interrupt, a `stopping_scope: all` limit).
    pub stopped: Option<StopReason>,
}
