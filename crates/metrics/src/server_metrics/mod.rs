//! Server metrics: the stack's Prometheus endpoints scraped during a run, kept raw in `server_metrics.jsonl` and
//! summarized per stage for every report.
//!
//! - [`parse`]: a bounded, streaming parser of the Prometheus text format (why not a crate: see there).
//! - [`scrape`]: the scraper task ([`spawn`] → [`Scraper::stop`]) and [`probe`].
//! - [`jsonl`]: the `server_metrics.jsonl` line contract and its streaming reader [`read_jsonl`].
//! - [`catalogue`]: the engines' names (vLLM, SGLang, TensorRT-LLM, TGI, llama.cpp, Triton, the llm-d router's EPP)
//!   mapped onto llmbench's keys, with units.
//! - [`summary`]: per-window figures as Prometheus would compute them ([`summarize`]).
//! - [`series`]: per-target time series for plots ([`plot_series`]).
//! - [`report`]: inference-perf's `*_prometheus_metrics.json` and the llm-d report's `results.observability`.
//!
//! Nothing here is fatal to a run: a target that never answers, a page that is not Prometheus text, a page too large
//! or with too many series all end up as warnings and counts, never as errors.

pub mod catalogue;
pub mod jsonl;
pub mod parse;
pub mod report;
pub mod scrape;
pub mod series;
pub mod summary;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

pub use jsonl::{Scrape, ScrapeReader, Truncated, read_jsonl};
pub use parse::{Labels, MetricKind, Sample};
pub use report::{inference_perf_prometheus_metrics, llmd_observability};
pub use scrape::{ScrapeOutcome, Scraper, TargetStatus, probe, spawn};
pub use series::{plot_series, plot_series_file};
pub use summary::{
    Figures, MetricSummary, ServerMetricsSummary, StageWindow, Summarizer, TargetMetrics, Window,
    WindowSummary, summarize, summarize_file,
};

/// What a run scrapes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapePlan {
    /// URLs scraped whether or not they answer (a target that does not is a recorded warning).
    pub targets: Vec<String>,
    /// The run's endpoint's `/metrics`, scraped only if a probe before the run finds Prometheus text there.
    pub default_target: Option<String>,
    pub interval: Duration,
    /// How long scraping goes on after the last request, so its effect is in the samples: nothing for a direct
    /// scrape (the final scrape as the run ends sees it), the server's scrape interval plus
    /// `run::server::PROMETHEUS_SCRAPE_BUFFER` (inference-perf's) through a Prometheus server.
    pub tail: Duration,
}

/// Everything that can go wrong setting up a scrape or reading its file back. Scrape failures during a run are not
/// errors: they are counted and become warnings in [`ScrapeOutcome`].
#[derive(Debug, thiserror::Error)]
pub enum ServerMetricsError {
    #[error("invalid server metrics target {url:?}: {reason}")]
    InvalidTarget { url: String, reason: String },
    #[error("invalid server metrics scrape interval {interval:?}: {reason}")]
    InvalidInterval { interval: Duration, reason: String },
    #[error("the server metrics scraper needs a tokio runtime")]
    NoRuntime {
        #[source]
        source: tokio::runtime::TryCurrentError,
    },
    #[error("failed to build the HTTP client for scraping server metrics")]
    HttpClient {
        #[source]
        source: reqwest::Error,
    },
    #[error("failed to create the server metrics file {path}")]
    CreateFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to open the server metrics file {path}")]
    OpenFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to read line {line} of the server metrics file {path}")]
    ReadLine {
        path: PathBuf,
        line: u64,
        #[source]
        source: io::Error,
    },
    #[error("line {line} of the server metrics file {path} is not a scrape record")]
    ParseLine {
        path: PathBuf,
        line: u64,
        #[source]
        source: serde_json::Error,
    },
    #[error("line {line} of the server metrics file {path} is longer than {cap} bytes")]
    LineTooLong { path: PathBuf, line: u64, cap: u64 },
}

/// One server metric over the run, for plots: a named line in a unit, aligned with the client's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSeries {
    /// What the line shows, e.g. `vllm:num_requests_running` or `prefix cache hit rate`.
    pub metric: String,
    /// Which endpoint it came from (its URL), so several serving pods stay apart.
    pub target: String,
    /// The unit of `points`' values, for the axis label: `requests`, `fraction`, `tokens/s`, `s`, ….
    pub unit: String,
    /// (seconds on the run's clock — the same t0 as `requests.jsonl` — , value), in time order.
    pub points: Vec<(f64, f64)>,
}
