//! llmbench: the load generator behind `llmbench run`, its reports (`llmbench report`), the profile renderer
//! front end, and the embedded vLLM-compatible simulator behind `llmbench sim`.
#![forbid(unsafe_code)]

// The layers below, under the names the launcher's modules (and its users) have always called them.
pub use llmbench_engine::{engine, live, progress, session_replay, stack, trace};
pub use llmbench_metrics::{metrics, mlperf, server_metrics};
pub use llmbench_model::{record, rx_stamp, sent, timer, wallclock};
pub use llmbench_report::{plot, report};
pub use llmbench_sim::sim;
pub use llmbench_workload::{
    conversations, data, limits, lmbench, profile, prompts, request, tokenizer, workload,
};

#[cfg(feature = "experiment")]
pub mod experiment;
mod plan;
pub mod profiles;
mod release;
pub mod results;
pub mod run;
pub mod sizing;
