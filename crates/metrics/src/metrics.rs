//! Metric math, pure and derived after the run from the raw [`RequestRecord`](llmbench_model::record::RequestRecord)s:
//! exact statistics with each tool's percentile method ([`stats`]), the per-stage and overall [`Summary`]
//! ([`summary`]), the `summary.json` / `--summary-file` outputs ([`summary_file`]), guidellm's weighted
//! distributions ([`weighted`]), and what lets a long run be summarised from disk with the same numbers: exactly
//! rounded sums ([`fsum`]) and samples spilled to files with exact selection of their order statistics
//! ([`spill`]).
//!
//! The SLO capacity search ([`capacity`]) is here too: it reads stage summaries and nothing else.
//!
//! Nothing here touches the network or a clock; writing a file (a spill file included) is the only fallible step.

pub mod capacity;
pub mod fsum;
pub mod radix;
pub mod spill;
pub mod stats;
pub mod summary;
pub mod summary_file;
pub mod transient;
pub mod weighted;

pub use stats::{Stats, percentile_linear, percentile_mlperf};
pub use summary::{
    ERROR_SAMPLE_CHARS, Goodput, Latency, LengthStats, Lengths, PrefixCacheHits, RequestCounts,
    Schedule, StageSummary, Summary, Throughput, summarize, summarize_stages,
};
pub use summary_file::{
    AdapterSummary, COMPACT_SUMMARY_MAX_BYTES, CompactSummary, Completion, ConversationSummary,
    Excluded, PrefixCacheWarm, RecordsSpilled, RunInfo, RunState, RunSummary, RunVerdict,
    SUMMARY_SCHEMA, ShardStarts, SkippedReport, TurnSummary, WriteSummaryError, compact_summary,
    partial_path, write_compact_summary, write_summary_json, write_whole,
};
pub use weighted::{GuidellmDistribution, GuidellmPercentiles};

#[cfg(test)]
pub(crate) mod testing {
    use serde::Serialize;
    use serde_json::Value;

    /// Asserts two values serialize to the same JSON up to float rounding (1e-12 relative). Summation order
    /// moves a standard deviation by an ulp, and serde_json without `float_roundtrip` may read a float back
    /// one ulp off.
    pub(crate) fn assert_json_close(a: &impl Serialize, b: &impl Serialize) {
        let (a, b) = (
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap(),
        );
        close(&a, &b, "$");
    }

    fn close(a: &Value, b: &Value, path: &str) {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(
                    (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                    "{path}: {x} != {y}"
                );
            }
            (Value::Array(x), Value::Array(y)) => {
                assert_eq!(x.len(), y.len(), "{path}: lengths differ");
                for (i, (x, y)) in x.iter().zip(y).enumerate() {
                    close(x, y, &format!("{path}[{i}]"));
                }
            }
            (Value::Object(x), Value::Object(y)) => {
                assert_eq!(
                    x.keys().collect::<Vec<_>>(),
                    y.keys().collect::<Vec<_>>(),
                    "{path}: keys differ"
                );
                for (key, x) in x {
                    close(x, &y[key], &format!("{path}.{key}"));
                }
            }
            _ => assert_eq!(a, b, "{path}"),
        }
    }
}
