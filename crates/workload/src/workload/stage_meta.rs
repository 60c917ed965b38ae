//! One stage as `run.json` records it: what the profile asked of it, in the words the tools' reports use. The
//! engine carries it with each stage and the reports read it back, so it sits with the workload it describes.

use serde::{Deserialize, Serialize};

use super::{LoadKind, Transient};

/// One stage as the profile asked for it, or, for a stage an adaptive run decided (a sweep), as it was decided.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StageMeta {
    /// The tool's name for the stage's load (`synchronous`, `throughput`, `constant`, `poisson`, `concurrent`,
    /// `gamma`), which guidellm's report writes as the benchmark's strategy. Absent in run.json files written
    /// before llmbench recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadKind>,
    /// Requests per second, for a rate stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Requests kept in flight, for a concurrency stage (or a rate stage's cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The stage's request limit (guidellm `max_requests`), which its warm-up and cool-down are fractions of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u64>,
    /// The stage's duration limit in seconds (guidellm `max_duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_s: Option<f64>,
    /// Requests at the stage's start left out of its metrics (guidellm `warmup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Transient>,
    /// Requests at the stage's end left out of its metrics (guidellm `cooldown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<Transient>,
    /// vllm `--burstiness` of a gamma-arrival stage, as vLLM's result JSON writes it (`"inf"` for constant gaps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<Burstiness>,
    /// inference-perf's `session_rate` of a `trace_session_replay` stage (sessions started a second), which its
    /// session lifecycle report writes in `stage_metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_rate: Option<f64>,
}

/// A burstiness factor: a number, or `inf`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Burstiness {
    Factor(f64),
    /// `inf` (JSON has no infinite number).
    Infinite(InfiniteTag),
}

/// The text `inf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InfiniteTag {
    #[serde(rename = "inf")]
    Inf,
}

impl Burstiness {
    pub fn of(factor: f64) -> Burstiness {
        if factor.is_finite() {
            Burstiness::Factor(factor)
        } else {
            Burstiness::Infinite(InfiniteTag::Inf)
        }
    }
}
