//! A WEKA trace's session (inference-perf `weka_trace_replay`): the trace and what it compiles with, its replay
//! graph built when the session starts (`session_replay::weka` plans the corpus).

use std::sync::Arc;

use llmbench_data::weka_trace::{self, Compile, WekaError, WekaTrace};
use llmbench_text::tokenizer::Tokenizer;
use llmbench_workload::workload::otel_trace::{self, Graph};

/// What every session of one corpus compiles with.
pub struct WekaContext {
    pub corpus: Vec<u32>,
    pub tokenizer: Tokenizer,
    pub settings: Compile,
}

/// One trace of the corpus, compiled into its replay graph when its session starts.
pub struct WekaSession {
    pub trace: WekaTrace,
    pub context: Arc<WekaContext>,
}

impl std::fmt::Debug for WekaSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WekaSession")
            .field("trace", &self.trace.id)
            .finish_non_exhaustive()
    }
}

impl PartialEq for WekaSession {
    fn eq(&self, other: &Self) -> bool {
        self.trace == other.trace && Arc::ptr_eq(&self.context, &other.context)
    }
}

impl WekaSession {
    /// The session's replay graph (`_reconstruct_raw_calls`, then `build_graph`).
    pub fn graph(&self) -> Result<Graph, WekaError> {
        let context = &self.context;
        let mut decode = |ids: &[u32]| context.tokenizer.decode(ids);
        let calls =
            weka_trace::compile(&self.trace, &context.settings, &context.corpus, &mut decode)?;
        Ok(otel_trace::weka_graph(calls))
    }
}
