//! `run.json`: what a run was, written beside `requests.jsonl`, so `llmbench report DIR` can rebuild the summary
//! and every tool's report from those two files alone.
//!
//! Record timestamps are nanoseconds since the run's monotonic t0; `t0_unix_ns` is the wall clock read when t0
//! was taken, the one anchor needed to turn them into the epoch seconds guidellm and the llm-d report carry.

use std::path::{Path, PathBuf};

use llmbench_api::v1alpha1::Harness;
use serde::{Deserialize, Serialize};

use super::ReportError;

/// The file name of the run metadata inside a run directory.
pub const RUN_META_FILE: &str = "run.json";

/// The schema id carried by `run.json`.
pub const RUN_META_SCHEMA: &str = "llmbench.run/v1";

/// The llmbench version that wrote a file.
pub const LLMBENCH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Everything about a run that its records do not say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Always [`RUN_META_SCHEMA`].
    pub schema: String,
    pub run_id: String,
    pub harness: Harness,
    /// The profile as given: a bundled name or a file path.
    pub profile: String,
    /// The model requests were sent for.
    pub model: String,
    /// The stack's base URL.
    pub endpoint: String,
    /// The tokenizer prompts were built with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// When the run's clock started, RFC 3339 UTC.
    pub started_at: String,
    /// The wall clock, in nanoseconds since the Unix epoch, at the monotonic t0 record timestamps count from.
    pub t0_unix_ns: u64,
    /// Whether requests went to the chat or the completions API.
    #[serde(default)]
    pub api: ApiKind,
    /// Every stage of the whole run, as the profile asked for it (not one shard's share).
    pub stages: Vec<StageMeta>,
    /// Which part of a run spread over several launchers this directory holds.
    #[serde(default)]
    pub shard: ShardMeta,
    pub llmbench_version: String,
    /// How the tools' reports are to be written (percentile sets, vllm options).
    #[serde(default)]
    pub report: ReportOptions,
}

/// One stage as the profile asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StageMeta {
    /// Requests per second, for a rate stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Requests kept in flight, for a concurrency stage (or a rate stage's cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMeta {
    pub index: u32,
    pub count: u32,
}

impl Default for ShardMeta {
    fn default() -> Self {
        ShardMeta { index: 0, count: 1 }
    }
}

/// The OpenAI API the requests used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    #[default]
    Completion,
    Chat,
}

/// Report settings taken from the profile; each defaults to its tool's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReportOptions {
    /// inference-perf's `report.request_lifecycle.percentiles`, in percent.
    pub percentiles: Vec<f64>,
    /// vllm bench serve's `--percentile-metrics` (ttft, tpot, itl, e2el).
    pub vllm_percentile_metrics: Vec<String>,
    /// vllm bench serve's `--metric-percentiles`, in percent.
    pub vllm_metric_percentiles: Vec<f64>,
    /// vllm bench serve's `--save-detailed`: per-request arrays in the result file.
    pub vllm_save_detailed: bool,
    /// vllm bench serve's `--label`; the file name starts with it (else with the backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm_label: Option<String>,
}

/// inference-perf's default `percentiles` (guidellm's too), as the workload model defines them.
pub use crate::workload::DEFAULT_PERCENTILES as INFERENCE_PERF_PERCENTILES;

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            percentiles: INFERENCE_PERF_PERCENTILES.to_vec(),
            // vllm's default is ttft,tpot,itl; llm-d-benchmark's profiles all add e2el, and its converter reads it.
            vllm_percentile_metrics: ["ttft", "tpot", "itl", "e2el"].map(str::to_owned).to_vec(),
            vllm_metric_percentiles: vec![99.0],
            vllm_save_detailed: false,
            vllm_label: None,
        }
    }
}

impl RunMeta {
    /// The rate each stage asked of this shard: the whole run's rate split evenly over the shards, as
    /// `Shard::apply` splits the schedule. What this directory's summary compares its achieved rate with.
    pub fn shard_requested_rates(&self) -> Vec<Option<f64>> {
        let count = f64::from(self.shard.count.max(1));
        self.stages
            .iter()
            .map(|s| s.rate.map(|r| r / count))
            .collect()
    }

    /// Epoch seconds of a record timestamp.
    pub fn unix_s(&self, ns: u64) -> f64 {
        (self.t0_unix_ns as f64 + ns as f64) / 1e9
    }

    /// Writes `run.json` into `dir`; returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        let path = dir.join(RUN_META_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| ReportError::Serialize {
            path: path.clone(),
            what: "run metadata",
            message: e.to_string(),
        })?;
        super::write_text(&path, &text)?;
        Ok(path)
    }

    /// Reads `run.json` from `dir`.
    pub fn read(dir: &Path) -> Result<RunMeta, ReportError> {
        let path = dir.join(RUN_META_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| ReportError::Read {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ReportError::ParseMeta { path, source })
    }
}
