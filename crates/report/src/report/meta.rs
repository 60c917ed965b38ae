//! `run.json`: what a run was, written beside `requests.jsonl`, so `llmbench report DIR` can rebuild the summary
//! and every tool's report from those two files alone.
//!
//! Record timestamps are nanoseconds since the run's monotonic t0; `t0_unix_ns` is the wall clock read when t0
//! was taken, the one anchor needed to turn them into the epoch seconds guidellm and the llm-d report carry.

use std::path::{Path, PathBuf};

use llmbench_core::harness::Harness;
use serde::{Deserialize, Serialize};

use super::ReportError;
use llmbench_engine::engine::{Progress, StageTimes, StopReason};
pub use llmbench_metrics::metrics::RunState;
pub use llmbench_workload::workload::stage_meta::{Burstiness, StageMeta};
use llmbench_workload::workload::{SloMetric, Warning, WarningKind};

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
    /// How many requests this launcher planned to send (warm-up included), when the plan says in advance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_requests: Option<u64>,
    /// The profile's keys llmbench did not act on: unknown ones (typos among them) and known ones that change
    /// nothing sent or measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_notes: Vec<ProfileNote>,
    /// What this launcher could use, as it sized its worker threads: the CPUs of its cgroup quota (a pod's
    /// `resources.limits.cpu`), else the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_cpus: Option<usize>,
    /// How the run ended, written when it ended: absent in the run.json of a launcher that was killed or
    /// crashed, which `llmbench report` then reports as incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<RunEnd>,
    /// The run's SLO capacity search, as asked: its stages are the search's points, and the summary's `capacity`
    /// is replayed from their figures (so `llmbench report` gives the same answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_search: Option<llmbench_core::capacity::CapacitySearchSpec>,
    /// The server metrics scraped during the run (`server_metrics.jsonl`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetricsMeta>,
    /// How a shard of a sharded run was released (`--wait-for-release`): when it was ready and the instant it was
    /// told to start at. Its actual start is `t0_unix_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseMeta>,
    /// The stack under test, when the launcher knew how it was started (`--stack-info`, `--serve`): its command
    /// line, image and env, its `/v1/models` answer and version, and how it failed if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<llmbench_engine::stack::StackMeta>,
    /// What the server under test said it is before the clock started (its engine, version, models and key
    /// settings, and each question asked), whoever started it; absent when nothing was asked (`--no-preflight`
    /// without a described stack) and in run.json files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<llmbench_engine::stack::identity::ServerIdentity>,
    /// The profiling window's hook calls (`--profiler-start`, `--profiler-stop`, `--vllm-profiler`), each with
    /// its status or error and latency; written when the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiling: Option<llmbench_engine::stack::profiler::ProfilingMeta>,
    /// The load flags given (`--rate`, `--duration`, …) and every edit they made to the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_flags: Option<llmbench_workload::workload::load_flags::LoadFlagsRecord>,
    /// Where the API key the requests carried came from (`--api-key`, `profile`, `OPENAI_API_KEY`); the key itself
    /// is never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_source: Option<String>,
    /// The pre-flight checks made before the clock started (the server's model list, one test request), or why
    /// none were; absent for a run that sends nothing (nop) and in run.json files written before pre-flight
    /// existed. Never part of the records or the metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PreflightMeta>,
    /// What the run did about the server's prefix cache: its prompts fresh or pinned, a reset before it, a
    /// priming pass (see `report::cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<super::CacheMeta>,
}

/// run.json's `preflight`: what the server answered before the run's clock started. A run is only written when
/// every check passed, so each call here got an answer the run could go on with (`warnings` says where it went
/// on against advice, e.g. `--allow-model-mismatch`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PreflightMeta {
    /// Why no check was made (`--no-preflight`, or an experiment that checked this server before its first run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// `GET /v1/models`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<PreflightCall>,
    /// The test request: the run's own API, streaming, headers and API key, one output token asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<PreflightCall>,
    /// The model the requests name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model the test request's answer named, when it named one: a server that ignores the request's model
    /// field (llama.cpp, some proxies) names the one it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One HTTP call of the pre-flight.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PreflightCall {
    pub url: String,
    /// The HTTP status, when the server answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// From sending to the end of the answer.
    pub latency_ms: f64,
    /// The model ids a `GET /v1/models` answer listed, when it answered with OpenAI's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed: Option<Vec<String>>,
    /// What the answer meant for the run, when not simply that the check passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A shard's release, in nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseMeta {
    /// When it had prepared everything and began to wait.
    pub ready_unix_ns: u64,
    /// The instant the operator released every shard at.
    pub at_unix_ns: u64,
}

/// A profile key llmbench did not act on, as the parser reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileNote {
    /// The key path, e.g. `api.streamming`.
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `unknown` (the dialect has no such key), `near_miss` (unknown, one edit from a key that changes the run; run
    /// under --lenient) or `ignored` (known, changes nothing sent or measured).
    pub kind: String,
    /// What happens instead, with the nearest known key for a likely typo.
    pub message: String,
}

impl From<&Warning> for ProfileNote {
    fn from(w: &Warning) -> Self {
        ProfileNote {
            key: w.key.clone(),
            line: w.line,
            kind: match w.kind {
                WarningKind::UnknownKey => "unknown",
                WarningKind::NearMiss => "near_miss",
                WarningKind::Ignored => "ignored",
            }
            .to_owned(),
            message: w.message.clone(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    pub state: RunState,
    /// Why the run stopped before its plan was done, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<u64>,
    /// Requests sent.
    pub sent: u64,
    /// Requests recorded as finished (succeeded, failed or cancelled).
    pub finished: u64,
    /// When each stage that ran started and ended, on the run clock, and why it stopped early if it did.
    #[serde(default)]
    pub stages: Vec<StageEnd>,
    /// Why an adaptive run could not decide its next stage (a guidellm sweep without a successful request rate,
    /// an inference-perf sweep whose probe gave too few samples): the run stopped there, and failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// One stage that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageEnd {
    /// When the stage's first request went out, when that was before `start_ns`: its warm-ups, or a probe just
    /// before it (absent: at `start_ns`). Between one stage's end and the next one's beginning nothing is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub began_ns: Option<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopReason>,
    /// A trace session replay's finished sessions, kept here (one small record each) so `llmbench report`
    /// rebuilds inference-perf's session lifecycle reports from the run directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<llmbench_model::record::SessionRecord>,
}

impl StageEnd {
    /// When the stage's first request went out, warm-ups and a probe just before it included.
    pub fn began_ns(&self) -> u64 {
        self.began_ns.unwrap_or(self.start_ns).min(self.start_ns)
    }
}

impl RunEnd {
    pub fn new(
        stopped: Option<StopReason>,
        planned: Option<u64>,
        progress: &Progress,
        stages: &[StageTimes],
    ) -> RunEnd {
        use std::sync::atomic::Ordering::Relaxed;
        RunEnd {
            state: match stopped {
                None => RunState::Complete,
                Some(StopReason::Interrupted { .. }) => RunState::Interrupted,
                Some(_) => RunState::Stopped,
            },
            stopped,
            planned,
            sent: progress.issued.load(Relaxed),
            finished: progress.finished.load(Relaxed),
            stages: stages
                .iter()
                .map(|t| StageEnd {
                    began_ns: Some(t.began_ns).filter(|&began| began < t.start_ns),
                    start_ns: t.start_ns,
                    end_ns: t.end_ns,
                    stopped: t.stopped,
                    sessions: t.sessions.clone(),
                })
                .collect(),
            failed: None,
        }
    }

    /// The end of a run that stopped because it could not decide its next stage.
    pub fn failed(mut self, why: String) -> RunEnd {
        if self.state == RunState::Complete {
            self.state = RunState::Stopped;
        }
        self.failed = Some(why);
        self
    }
}

/// A goodput objective: a request is good when its `metric` is at most `limit_s` (and every other objective
/// holds too).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub metric: SloMetric,
    pub limit_s: f64,
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

/// The API the requests used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    #[default]
    Completion,
    Chat,
    /// OpenAI's Responses API (`/v1/responses`).
    Responses,
    /// Anthropic's Messages API (`/v1/messages`).
    Messages,
    /// OpenAI's embeddings API (`/v1/embeddings`): pooling, no tokens generated.
    Embeddings,
    /// A rerank API (`/v1/rerank`): pooling, no tokens generated.
    Rerank,
}

impl ApiKind {
    /// Whether the API answers with vectors or scores rather than tokens: its reports have request latency and
    /// inputs/s, and no token metrics (vLLM's `TaskType.POOLING`, AIPerf's `produces_tokens: false`).
    pub fn is_pooling(self) -> bool {
        matches!(self, ApiKind::Embeddings | ApiKind::Rerank)
    }
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
    /// vllm bench serve's `--result-filename`: the result file's name instead of the generated one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm_result_filename: Option<String>,
    /// inference-perf's `report.request_lifecycle.summary`: write `summary_lifecycle_metrics.json`.
    pub inference_perf_summary: bool,
    /// inference-perf's `report.request_lifecycle.per_stage`: write `stage_N_lifecycle_metrics.json`.
    pub inference_perf_per_stage: bool,
    /// inference-perf's `report.request_lifecycle.per_request`: write `per_request_lifecycle_metrics.json`.
    pub inference_perf_per_request: bool,
    /// inference-perf's `report.request_lifecycle.per_adapter`: write `adapter_{name}_lifecycle_metrics.json` for
    /// each LoRA adapter requests went to.
    pub inference_perf_per_adapter: bool,
    /// inference-perf's `report.request_lifecycle.per_adapter_stage`: write
    /// `adapter_{name}_stage_{N}_lifecycle_metrics.json`.
    pub inference_perf_per_adapter_stage: bool,
    /// inference-perf's `report.request_lifecycle.use_server_output_tokens`.
    pub inference_perf_use_server_output_tokens: bool,
    /// inference-perf's `report.prometheus.summary`: write `summary_prometheus_metrics.json` (with server metrics).
    pub prometheus_summary: bool,
    /// inference-perf's `report.prometheus.per_stage`: write `stage_N_prometheus_metrics.json`.
    pub prometheus_per_stage: bool,
    /// inference-perf's `report.session_lifecycle.summary`: write `summary_session_lifecycle_metrics.json`.
    pub session_summary: bool,
    /// inference-perf's `report.session_lifecycle.per_stage`: write `stage_N_session_lifecycle_metrics.json`.
    pub session_per_stage: bool,
    /// inference-perf's `report.session_lifecycle.per_session`: write `per_session_lifecycle_metrics.json`.
    pub session_per_session: bool,
    /// The goodput objectives (vllm `--goodput`, inference-perf `report.goodput.constraints`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub goodput: Vec<Slo>,
    /// An AIPerf config's profiling phase names, one per stage, when it has several (else one, `profiling`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aiperf_phases: Vec<String>,
}

/// inference-perf's default `percentiles` (guidellm's too), as the workload model defines them.
pub use llmbench_workload::workload::DEFAULT_PERCENTILES as INFERENCE_PERF_PERCENTILES;

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            percentiles: INFERENCE_PERF_PERCENTILES.to_vec(),
            // vllm's default is ttft,tpot,itl; llm-d-benchmark's profiles all add e2el, and its converter reads it.
            vllm_percentile_metrics: ["ttft", "tpot", "itl", "e2el"].map(str::to_owned).to_vec(),
            vllm_metric_percentiles: vec![99.0],
            vllm_save_detailed: false,
            vllm_label: None,
            vllm_result_filename: None,
            inference_perf_summary: true,
            inference_perf_per_stage: true,
            inference_perf_per_request: false,
            inference_perf_per_adapter: true,
            inference_perf_per_adapter_stage: false,
            inference_perf_use_server_output_tokens: false,
            prometheus_summary: true,
            prometheus_per_stage: false,
            session_summary: true,
            session_per_stage: true,
            session_per_session: false,
            goodput: Vec::new(),
            aiperf_phases: Vec::new(),
        }
    }
}

impl RunMeta {
    /// Stage `stage`'s bounds for the transient cut: when it started (from `end`, once the run ended) and the
    /// limits and warm-up/cool-down the profile set.
    pub(crate) fn stage_bounds(
        &self,
        stage: u32,
    ) -> llmbench_metrics::metrics::transient::StageBounds {
        let stage_meta = self.stages.get(stage as usize).copied().unwrap_or_default();
        llmbench_metrics::metrics::transient::StageBounds {
            start_ns: self
                .end
                .as_ref()
                .and_then(|end| end.stages.get(stage as usize))
                .map(|s| s.start_ns),
            max_requests: stage_meta.max_requests,
            max_duration_s: stage_meta.max_duration_s,
            warmup: stage_meta.warmup,
            cooldown: stage_meta.cooldown,
        }
    }

    /// The rate each stage asked of this shard: the whole run's rate split evenly over the shards, as
    /// `Shard::apply` splits the schedule. What this directory's summary compares its achieved rate with.
    pub(crate) fn shard_requested_rates(&self) -> Vec<Option<f64>> {
        let count = f64::from(self.shard.count.max(1));
        self.stages
            .iter()
            .map(|s| s.rate.map(|r| r / count))
            .collect()
    }

    /// Epoch seconds of a record timestamp.
    pub(crate) fn unix_s(&self, ns: u64) -> f64 {
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

/// Server metrics, as recorded in `run.json`: where they came from, so `llmbench report` can summarize
/// `server_metrics.jsonl` again with the same windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetricsMeta {
    /// The URLs scraped.
    pub targets: Vec<String>,
    pub interval_s: f64,
    /// How far past each stage's end its server-side window reaches (the tail), in seconds.
    pub lag_s: f64,
    /// What went wrong while scraping (never fatal): targets that did not answer, pages cut short, ….
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ServerMetricsMeta {
    /// What run.json records of a scrape before it starts, so a run killed part way can still have its server
    /// metrics summarized by `llmbench report`.
    pub fn planned(plan: &llmbench_metrics::server_metrics::ScrapePlan) -> Self {
        ServerMetricsMeta {
            targets: plan.targets.clone(),
            interval_s: plan.interval.as_secs_f64(),
            lag_s: plan.tail.as_secs_f64(),
            warnings: Vec::new(),
        }
    }

    /// The plan and every warning the scraper gave (per target, prefixed with the target).
    pub fn new(
        plan: &llmbench_metrics::server_metrics::ScrapePlan,
        outcome: &llmbench_metrics::server_metrics::ScrapeOutcome,
    ) -> Self {
        let mut warnings = outcome.warnings.clone();
        for target in &outcome.targets {
            warnings.extend(
                target
                    .warnings
                    .iter()
                    .map(|w| format!("{}: {w}", target.url)),
            );
        }
        ServerMetricsMeta {
            warnings,
            ..Self::planned(plan)
        }
    }
}
