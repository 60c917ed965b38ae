//! Metric math, pure and derived after the run from the raw [`RequestRecord`](crate::record::RequestRecord)s:
//! exact statistics with each tool's percentile method ([`stats`]) and the per-stage and overall [`Summary`]
//! ([`summary`]).
//!
//! Nothing here touches the network or a clock.

pub mod stats;
pub mod summary;

pub use stats::{Stats, percentile_linear, percentile_mlperf};
pub use summary::{
    Latency, RequestCounts, Schedule, StageSummary, Summary, Throughput, summarize,
    summarize_stages,
};
