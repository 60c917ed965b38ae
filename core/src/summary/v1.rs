//! `llmbench.summary/v1`, the one definition of the contract between the launcher and the operator.
//!
//! The contract has two forms of the same figures:
//!
//! - **The compact summary** ([`CompactSummary`], snake_case JSON of at most [`COMPACT_MAX_BYTES`]): what a
//!   launcher pod writes to its termination log (`--summary-file`) and the operator reads. `summary.json` is a
//!   superset of it (the launcher's own types add every statistic; see `llmbench::metrics::summary_file`).
//! - **The status summary** ([`RunSummary`], camelCase, with a JSON Schema): what a `BenchmarkRun` shows in
//!   `status.summary`, converted from the compact summary by [`RunSummary::from`]. `llmbench-api` embeds these
//!   types in the CRD, so their doc comments are its descriptions.
//!
//! A field the operator does not need is read with a default, so a summary that leaves it out still parses; every
//! field is always written.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capacity::CapacityAnswer;

/// The schema id carried by `summary.json` and by the compact summary.
pub const SCHEMA: &str = "llmbench.summary/v1";

/// The size limit of the compact summary: a Kubernetes termination message holds 4096 bytes.
pub const COMPACT_MAX_BYTES: usize = 4096;

/// The compact summary: the schema's fields only — the run's identity, its figures and each stage's, the
/// harness's verdict, goodput, the capacity answer and the server metrics in brief, how the run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactSummary {
    /// Always [`SCHEMA`] when written; a reader refuses another value (an absent one reads as empty).
    #[serde(default)]
    pub schema: String,
    #[serde(default)]
    pub run_id: String,
    #[serde(default)]
    pub harness: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub endpoint: String,
    #[serde(flatten)]
    pub overall: CompactBody,
    #[serde(default)]
    pub stages: Vec<CompactStage>,
    /// The run's pass/fail verdict where its harness gives one (MLPerf LoadGen's VALID/INVALID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<RunVerdict>,
    /// The run's overall goodput in percent (`goodput.percentage` of summary.json), when the profile sets
    /// goodput objectives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_percent: Option<f64>,
    /// The capacity search's answer in brief (summary.json's `capacity` has every point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityAnswer>,
    /// The server metrics in brief (summary.json's `server_metrics` has them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSummary>,
    /// How the run ended, when not as planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Completion>,
    /// A merged sharded run: the latest shard's start minus the earliest's, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    /// How many stages were left out to stay within the size limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stages_omitted: usize,
    /// The nop harness's model-load figures from the vLLM server's log, when it read one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_load: Option<crate::vllm_log::ModelLoadSummary>,
    /// The stack under test, when the launcher knew how it was started (`--stack-info`, `--serve`): run.json's
    /// `stack` in brief.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineInfo>,
}

/// The stack under test in brief: the engine and version the server said it is, the model that answered the run,
/// and how the stack was started when the launcher was told. run.json's `server` and `stack` have the whole record
/// (every model listed, the engine's settings, each probe, args and env apart).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EngineInfo {
    /// The engine the server said it is (`vLLM`, `llama.cpp`, `SGLang`, `TGI`, `llmbench sim`), when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The container image the stack ran, when it ran in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The stack's command line: its command, then its args (engine flags among them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The model that answered the run: the one the pre-flight's test answer named, else the listed model the
    /// requests name, else the first `GET /v1/models` listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The engine's version: vLLM's `GET /version`, llama.cpp's build, SGLang's and TGI's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One stage of the compact summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactStage {
    pub stage: u32,
    #[serde(flatten)]
    pub body: CompactBody,
}

/// The schema's fields of one bucket (the run or a stage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactBody {
    pub requests: RequestCounts,
    pub duration_s: f64,
    pub throughput: CompactThroughput,
    pub latency_ms: CompactLatency,
    #[serde(default)]
    pub schedule: CompactSchedule,
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// The share (0–1) of prompt tokens the server reported as served from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`, summed, over `usage.prompt_tokens`, summed, over the
    /// successful requests with `usage`), when any response reported it. Absent in summaries written before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
}

/// Requests of a bucket: recorded, and of those, succeeded, failed, and answered short of what was asked
/// (`total = succeeded + failed + truncated`); and apart from them, those whose answers were lost when the launcher
/// was killed (`lost_in_flight`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestCounts {
    pub total: u64,
    #[serde(default)]
    pub succeeded: u64,
    pub failed: u64,
    /// Answers shorter than asked (`max_tokens` under `ignore_eos`, or a server that stopped at its own length
    /// limit or aborted): neither successes nor failures. Absent when none (and in summaries written before it
    /// existed, which counted them as successes).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub truncated: u64,
    /// Requests sent and never recorded: in flight when the launcher was killed (SIGKILL, the OOM killer), found
    /// by `llmbench report` in the run's sent log. Their answers are lost: neither successes nor failures of the
    /// server, and not in `total`. Absent when none.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub lost_in_flight: u64,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Successful requests and their input and output tokens, per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompactThroughput {
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
    /// Inputs (embedding inputs, rerank documents) per second, only for a run of a pooling API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_per_s: Option<f64>,
}

/// Latency statistics in milliseconds; a metric the run could not measure is `null`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompactLatency {
    pub ttft: Option<LatencyStats>,
    pub tpot: Option<LatencyStats>,
    pub itl: Option<LatencyStats>,
    pub ntpot: Option<LatencyStats>,
    pub e2e: Option<LatencyStats>,
    /// Time to first output token (past the reasoning), only when some answer carried reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo: Option<LatencyStats>,
}

/// How the load kept to its schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactSchedule {
    pub requested_rate: Option<f64>,
    pub achieved_rate: Option<f64>,
    pub delay_ms: Option<CompactDelay>,
}

/// Send delay behind the schedule, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CompactDelay {
    pub p50: f64,
    pub p99: f64,
}

/// A harness's own verdict on a run, as the compact summary and summary.json carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunVerdict {
    /// Who judged, e.g. `mlperf`.
    pub by: String,
    pub passed: bool,
    /// The result line, e.g. `VALID` or `INVALID`.
    pub result: String,
    /// The names of the checks that failed, e.g. `min_duration`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
}

/// Whether a run did what its plan said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Every stage ran to its end (an error limit that ended one stage early included).
    Complete,
    /// A signal stopped it; what was measured is recorded, in-flight requests as cancelled.
    Interrupted,
    /// It stopped itself early: an error limit with `stopping_scope: all`, or records it could not write.
    Stopped,
    /// It never wrote its end: the launcher was killed (SIGKILL, the OOM killer) or crashed. Only `llmbench report`
    /// says this; with the run's sent log, it also says how many requests were sent (`sent`) and which of them were
    /// in flight, their answers lost (`requests.lost_in_flight`).
    Incomplete,
}

/// How a run that did not end as planned ended, with its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    pub state: RunState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopReason>,
    /// Requests the plan would have sent, when known in advance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<u64>,
    /// Requests sent (for a killed run, as its sent log counts them; unknown without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    /// Requests recorded.
    pub finished: u64,
}

/// Why a run or a stage stopped before its plan was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// A signal asked the launcher to stop (SIGTERM, SIGINT).
    Interrupted { signal: Signal },
    /// The records file (`requests.bin`) could not be written (e.g. the disk is full).
    RecordsUnwritable,
    /// guidellm `max_errors` tripped.
    MaxErrors,
    /// guidellm `max_error_rate` tripped.
    MaxErrorRate,
    /// guidellm `max_global_error_rate` tripped.
    MaxGlobalErrorRate,
    /// The stage's deadline passed (a capacity-search point that did not drain in time); what was in flight is
    /// cancelled.
    Deadline,
    /// The stack the launcher started and watched (`--serve`) exited or stopped answering its health check; run.json's
    /// `stack.failure` says how, with the stack's log tail.
    StackFailed,
    /// The server stopped answering: `failures` connection-level failures in a row (refused, DNS, reset before any
    /// byte of a response), the first of them `at_ms` after the run's clock started (`--max-connect-failures`).
    /// What was in flight is cancelled; every record is kept.
    ServerStoppedAnswering { at_ms: u64, failures: u32 },
    /// An inference-perf circuit breaker (`load.circuit_breakers`) opened; the log names it. What was in flight is
    /// cancelled; every record is kept.
    CircuitBreakerOpen,
    /// guidellm's `over_saturation` constraint (mode `enforce`) found the in-flight count and TTFT rising together;
    /// the log gives its slopes. What was in flight is cancelled; every record is kept.
    OverSaturation,
    /// AIPerf's `--failed-request-threshold`: a phase's errored share of its finished requests went above the
    /// threshold. What was in flight is cancelled, every record is kept, and the run exits non-zero
    /// (`RunExit::FailedRequestThreshold`), as AIPerf's does.
    FailedRequestThreshold,
}

/// The signals a launcher handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Signal {
    Sigterm,
    Sigint,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Sigterm => "SIGTERM",
            Signal::Sigint => "SIGINT",
        })
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Interrupted { signal } => write!(f, "interrupted by {signal}"),
            StopReason::RecordsUnwritable => {
                f.write_str("the request records could not be written")
            }
            StopReason::MaxErrors => f.write_str("max_errors reached"),
            StopReason::MaxErrorRate => f.write_str("max_error_rate reached"),
            StopReason::MaxGlobalErrorRate => f.write_str("max_global_error_rate reached"),
            StopReason::Deadline => f.write_str("the stage's deadline passed"),
            StopReason::StackFailed => f.write_str("the stack under test failed"),
            StopReason::CircuitBreakerOpen => f.write_str("a circuit breaker opened"),
            StopReason::OverSaturation => {
                f.write_str("the server is over-saturated (over_saturation)")
            }
            StopReason::FailedRequestThreshold => {
                f.write_str("the failed requests went above --failed-request-threshold")
            }
            StopReason::ServerStoppedAnswering { at_ms, failures } => write!(
                f,
                "the server stopped answering at t={}.{:03}s, after {failures} connection failures in a row",
                at_ms / 1000,
                at_ms % 1000
            ),
        }
    }
}

// The status summary: what `status.summary` of a BenchmarkRun shows.

/// A run's headline figures, copied from the launcher's summary.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed.
    pub failures: u64,
    /// Requests answered short of what they asked (fewer tokens than `max_tokens` under `ignore_eos`, or a server
    /// that stopped at its own length limit or aborted): neither successes nor failures.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub truncated: u64,
    /// Wall time of the measured traffic, in seconds.
    pub duration_seconds: f64,
    /// Throughput over the run.
    pub throughput: Throughput,
    /// Latency statistics in milliseconds.
    pub latency_ms: Latencies,
    /// The harness's own pass/fail verdict, where it gives one (MLPerf LoadGen's VALID/INVALID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<HarnessVerdict>,
    /// The share of judged successful requests that met every goodput objective, in percent, where the profile
    /// sets goodput objectives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_percent: Option<f64>,
    /// The outcome of spec.capacitySearch: the highest load that met every objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityAnswer>,
    /// The stack's own metrics over the run, in brief (summary.json's `server_metrics` has every metric, per stage
    /// and per endpoint), when the launcher scraped any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSummary>,
    /// A sharded run's start skew: the latest shard's actual start minus the earliest's, in milliseconds (summary.json's
    /// `shard_starts` has each shard's lateness after the release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    /// The share of prompt tokens the stack served from its prefix cache, in percent: Σ
    /// `usage.prompt_tokens_details.cached_tokens` / Σ `usage.prompt_tokens` over the successful requests that
    /// reported usage, when any response reported cached tokens (summary.json's `prefix_cache` has the counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_percent: Option<f64>,
    /// The nop harness's model-load figures, read from the vLLM server's log as llm-d-benchmark's nop reads it:
    /// by the launcher from `--vllm-log`, or by the operator from a standalone stack pod's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_load: Option<ModelLoad>,
    /// The stack under test, when the launcher knew how it was started: image, command line, served model and
    /// engine version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineInfo>,
}

/// Model-load figures in brief ([`crate::vllm_log::ModelLoadSummary`] in the status's camelCase, its phases one
/// level deep: a CRD schema cannot recurse). Seconds and GiB; a figure whose log line is missing is 0, as
/// llm-d-benchmark's nop reports it, and `missing` names those lines.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelLoad {
    /// The server the log is from.
    pub name: String,
    /// "Model loading took … seconds".
    pub load_seconds: f64,
    /// "Model loading took … GiB".
    pub load_gib: f64,
    /// From the server's first line to "Available routes are:" (upstream's "vLLM Start(secs)").
    pub vllm_start_seconds: f64,
    /// torch.compile, in total.
    pub torch_compile_seconds: f64,
    /// The memory profiling run.
    pub memory_profiling_seconds: f64,
    /// The startup phases (loading weights, compilation, CUDA graph capture, …), a sub-phase titled
    /// `<phase> / <sub-phase>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<ModelLoadPhase>,
    /// The log lines the figures come from that the log lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// One startup phase.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelLoadPhase {
    /// The phase, as llm-d-benchmark's nop names it (e.g. Model Loading, CUDA Graph Capture).
    pub title: String,
    /// Seconds from the phase's first line to its last; 0 when either is missing, as upstream.
    pub elapsed_seconds: f64,
}

impl From<&crate::vllm_log::ModelLoadSummary> for ModelLoad {
    fn from(m: &crate::vllm_log::ModelLoadSummary) -> Self {
        fn flatten(
            prefix: Option<&str>,
            categories: &[crate::vllm_log::ModelLoadCategory],
            out: &mut Vec<ModelLoadPhase>,
        ) {
            for c in categories {
                let title = match prefix {
                    Some(p) => format!("{p} / {}", c.title),
                    None => c.title.clone(),
                };
                out.push(ModelLoadPhase {
                    title: title.clone(),
                    elapsed_seconds: c.elapsed_s,
                });
                flatten(Some(&title), &c.categories, out);
            }
        }
        let mut phases = Vec::new();
        flatten(None, &m.categories, &mut phases);
        ModelLoad {
            name: m.name.clone(),
            load_seconds: m.load_s,
            load_gib: m.load_gib,
            vllm_start_seconds: m.vllm_start_s,
            torch_compile_seconds: m.torch_compile_s,
            memory_profiling_seconds: m.memory_profiling_s,
            phases,
            missing: m.missing.clone(),
        }
    }
}

/// The server side of a run in brief: how the scrape went and the means that say why a stack saturates. The
/// launcher's compact summary and a run's status carry it in this form.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerSummary {
    /// Endpoints scraped.
    pub targets: u32,
    /// Scrapes that answered, over all endpoints.
    pub scrapes: u64,
    /// Scrapes that failed (no answer, an error status, not Prometheus text).
    pub failed_scrapes: u64,
    /// vLLM's requests running, summed over endpoints, averaged over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_running_mean: Option<f64>,
    /// vLLM's requests waiting (queue depth), summed over endpoints, averaged over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_waiting_mean: Option<f64>,
    /// vLLM's KV-cache usage (0–1), averaged over endpoints and the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage_mean: Option<f64>,
    /// Prefix-cache hits over queries in the run, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_percent: Option<f64>,
    /// Preemptions during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<f64>,
}

/// A harness's pass/fail verdict on a run.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HarnessVerdict {
    /// Who judged, e.g. `mlperf`.
    pub by: String,
    /// Whether the run passed.
    pub passed: bool,
    /// The result as the harness words it, e.g. `VALID` or `INVALID`.
    pub result: String,
    /// The checks that failed, e.g. `min_duration`, `performance_constraints`, `early_stopping`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
}

/// Throughput over the run.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Throughput {
    /// Successful requests per second.
    pub requests_per_second: f64,
    /// Prompt tokens per second.
    pub input_tokens_per_second: f64,
    /// Generated tokens per second.
    pub output_tokens_per_second: f64,
}

/// Latency statistics of successful requests, in milliseconds. A metric the run could not measure (no successful
/// request, or no streaming for the token metrics) is absent rather than zero.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Latencies {
    /// Time to first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<LatencyStats>,
    /// Time per output token after the first: (last token − first token) / (output tokens − 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<LatencyStats>,
    /// Inter-token latency: gaps between consecutive streamed chunks, pooled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl: Option<LatencyStats>,
    /// Normalized time per output token: end-to-end latency / output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntpot: Option<LatencyStats>,
    /// End-to-end request latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e: Option<LatencyStats>,
    /// Time to first output token: to the first token of the answer after the model's reasoning (AIPerf's and
    /// guidellm's TTFO); present only when answers carried reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo: Option<LatencyStats>,
}

/// Mean and percentiles of one latency metric — the same four numbers in the compact summary and in status.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyStats {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl From<&RunVerdict> for HarnessVerdict {
    fn from(v: &RunVerdict) -> Self {
        HarnessVerdict {
            by: v.by.clone(),
            passed: v.passed,
            result: v.result.clone(),
            failed_checks: v.failed_checks.clone(),
        }
    }
}

impl From<&CompactSummary> for RunSummary {
    /// The status summary of a compact summary: its run-wide figures; identity, stages, schedule and errors stay
    /// in the launcher's files.
    fn from(c: &CompactSummary) -> Self {
        let overall = &c.overall;
        RunSummary {
            requests: overall.requests.total,
            failures: overall.requests.failed,
            truncated: overall.requests.truncated,
            duration_seconds: overall.duration_s,
            throughput: Throughput {
                requests_per_second: overall.throughput.requests_per_s,
                input_tokens_per_second: overall.throughput.input_tokens_per_s,
                output_tokens_per_second: overall.throughput.output_tokens_per_s,
            },
            latency_ms: Latencies {
                ttft: overall.latency_ms.ttft,
                tpot: overall.latency_ms.tpot,
                itl: overall.latency_ms.itl,
                ntpot: overall.latency_ms.ntpot,
                e2e: overall.latency_ms.e2e,
                ttfo: overall.latency_ms.ttfo,
            },
            verdict: c.verdict.as_ref().map(HarnessVerdict::from),
            goodput_percent: c.goodput_percent,
            capacity: c.capacity.clone(),
            server: c.server.clone(),
            start_skew_ms: c.start_skew_ms,
            prefix_cache_hit_percent: overall.prefix_cache_hit_rate.map(|rate| rate * 100.0),
            model_load: c.model_load.as_ref().map(ModelLoad::from),
            engine: c.engine.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact summary as the launcher writes it.
    const COMPACT: &str = r#"{"schema":"llmbench.summary/v1","run_id":"bench-1-0f3c9a2e","harness":"inference-perf","model":"m","endpoint":"http://a:1","requests":{"total":100,"succeeded":98,"failed":2},"duration_s":10.5,"throughput":{"requests_per_s":9.33,"input_tokens_per_s":1000.0,"output_tokens_per_s":500.0},"latency_ms":{"ttft":{"mean":20.0,"p50":18.0,"p90":30.0,"p99":45.0},"tpot":{"mean":5.0,"p50":5.0,"p90":6.0,"p99":7.0},"itl":null,"ntpot":null,"e2e":{"mean":400.0,"p50":380.0,"p90":500.0,"p99":650.0}},"schedule":{"requested_rate":10.0,"achieved_rate":9.9,"delay_ms":{"p50":0.1,"p99":0.5}},"errors":{"http_500":2},"stages":[],"verdict":{"by":"mlperf","passed":false,"result":"INVALID","failed_checks":["min_duration"]},"run":{"state":"interrupted","stopped":{"reason":"interrupted","signal":"SIGTERM"},"sent":100,"finished":100}}"#;

    #[test]
    fn the_compact_summary_round_trips_byte_for_byte() {
        let parsed: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        assert_eq!(serde_json::to_string(&parsed).expect("serializes"), COMPACT);
    }

    #[test]
    fn the_status_summary_takes_the_run_wide_figures() {
        let parsed: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        let status = RunSummary::from(&parsed);
        assert_eq!((status.requests, status.failures), (100, 2));
        assert_eq!(status.throughput.output_tokens_per_second, 500.0);
        assert_eq!(status.latency_ms.e2e.map(|s| s.p99), Some(650.0));
        assert!(status.latency_ms.itl.is_none());
        let verdict = status.verdict.expect("verdict");
        assert_eq!(verdict.failed_checks, ["min_duration"]);
        // The status form is camelCase and leaves unmeasured metrics out.
        let json = serde_json::to_value(&verdict).expect("serializes");
        assert!(json.get("failedChecks").is_some(), "{json}");
    }

    #[test]
    fn the_status_summary_shows_the_prefix_cache_hit_rate_in_percent() {
        let mut compact: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        assert_eq!(RunSummary::from(&compact).prefix_cache_hit_percent, None);
        // 96 of 160 prompt tokens cached: 0.6 → 60 %.
        compact.overall.prefix_cache_hit_rate = Some(0.6);
        let status = RunSummary::from(&compact);
        assert_eq!(status.prefix_cache_hit_percent, Some(60.0));
        let json = serde_json::to_value(&status).expect("serializes");
        assert_eq!(json["prefixCacheHitPercent"], 60.0);
    }

    #[test]
    fn the_prefix_cache_hit_rate_is_optional_both_ways() {
        let parsed: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        assert_eq!(parsed.overall.prefix_cache_hit_rate, None);
        let mut with = parsed.clone();
        with.overall.prefix_cache_hit_rate = Some(0.6);
        let json = serde_json::to_string(&with).expect("serializes");
        assert!(json.contains(r#""prefix_cache_hit_rate":0.6"#), "{json}");
        let back: CompactSummary = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, with);
    }

    #[test]
    fn the_engine_goes_from_the_compact_summary_to_the_status_in_camel_case() {
        let mut compact: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        assert_eq!(RunSummary::from(&compact).engine, None);
        compact.engine = Some(EngineInfo {
            name: Some("vLLM".to_owned()),
            image: Some("vllm/vllm-openai:v0.11.0".to_owned()),
            command: vec!["vllm".to_owned(), "serve".to_owned(), "m".to_owned()],
            model: Some("m".to_owned()),
            version: Some("0.11.0".to_owned()),
        });
        let json = serde_json::to_string(&compact).expect("serializes");
        assert!(
            json.contains(r#""engine":{"name":"vLLM","image":"vllm/vllm-openai:v0.11.0","command":["vllm","serve","m"],"model":"m","version":"0.11.0"}"#),
            "{json}"
        );
        let back: CompactSummary = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, compact);
        let status = serde_json::to_value(RunSummary::from(&compact)).expect("serializes");
        assert_eq!(status["engine"]["version"], "0.11.0");
        assert_eq!(status["engine"]["name"], "vLLM");
        assert_eq!(status["engine"]["command"][1], "serve");
    }

    #[test]
    fn a_server_that_stopped_answering_says_when_and_after_how_many_failures() {
        let reason = StopReason::ServerStoppedAnswering {
            at_ms: 12_045,
            failures: 20,
        };
        let json = serde_json::to_string(&reason).expect("serializes");
        assert_eq!(
            json,
            r#"{"reason":"server_stopped_answering","at_ms":12045,"failures":20}"#
        );
        assert_eq!(
            serde_json::from_str::<StopReason>(&json).expect("parses"),
            reason
        );
        assert_eq!(
            reason.to_string(),
            "the server stopped answering at t=12.045s, after 20 connection failures in a row"
        );
    }

    #[test]
    fn a_stack_failure_is_a_stop_reason_of_its_own() {
        let json = serde_json::to_string(&StopReason::StackFailed).expect("serializes");
        assert_eq!(json, r#"{"reason":"stack_failed"}"#);
        assert_eq!(
            serde_json::from_str::<StopReason>(&json).expect("parses"),
            StopReason::StackFailed
        );
    }

    #[test]
    fn truncated_answers_and_ttfo_are_optional_both_ways_and_reach_the_status() {
        let parsed: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        assert_eq!(parsed.overall.requests.truncated, 0);
        assert_eq!(parsed.overall.latency_ms.ttfo, None);
        let mut with = parsed.clone();
        with.overall.requests = RequestCounts {
            total: 100,
            succeeded: 91,
            failed: 2,
            truncated: 7,
            lost_in_flight: 0,
        };
        let stats = LatencyStats {
            mean: 30.0,
            p50: 29.0,
            p90: 40.0,
            p99: 55.0,
        };
        with.overall.latency_ms.ttfo = Some(stats);
        let json = serde_json::to_string(&with).expect("serializes");
        assert!(
            json.contains(r#""requests":{"total":100,"succeeded":91,"failed":2,"truncated":7}"#),
            "{json}"
        );
        assert!(json.contains(r#""ttfo":{"mean":30.0"#), "{json}");
        let back: CompactSummary = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, with);
        let status = RunSummary::from(&with);
        assert_eq!((status.failures, status.truncated), (2, 7));
        assert_eq!(status.latency_ms.ttfo, Some(stats));
        let status = serde_json::to_value(&status).expect("serializes");
        assert_eq!(status["truncated"], 7);
        assert!(
            serde_json::to_value(RunSummary::from(&parsed))
                .expect("serializes")
                .get("truncated")
                .is_none()
        );
    }

    #[test]
    fn a_killed_run_counts_its_lost_requests_apart_and_round_trips() {
        let killed = COMPACT
            .replace(
                r#""requests":{"total":100,"succeeded":98,"failed":2}"#,
                r#""requests":{"total":100,"succeeded":98,"failed":2,"lost_in_flight":7}"#,
            )
            .replace(
                r#""run":{"state":"interrupted","stopped":{"reason":"interrupted","signal":"SIGTERM"},"sent":100,"finished":100}"#,
                r#""run":{"state":"incomplete","planned":200,"sent":107,"finished":100}"#,
            );
        let parsed: CompactSummary = serde_json::from_str(&killed).expect("parses");
        assert_eq!(parsed.overall.requests.lost_in_flight, 7);
        let run = parsed.run.expect("run");
        assert_eq!(run.state, RunState::Incomplete);
        // Sent = recorded + lost in flight: the lost are neither successes nor failures.
        assert_eq!(
            run.sent,
            Some(run.finished + parsed.overall.requests.lost_in_flight)
        );
        assert_eq!(
            parsed.overall.requests.total,
            parsed.overall.requests.succeeded + parsed.overall.requests.failed
        );
        assert_eq!(serde_json::to_string(&parsed).expect("serializes"), killed);
        // None lost: the field is left out, as in every summary written before it existed.
        let parsed: CompactSummary = serde_json::from_str(COMPACT).expect("parses");
        assert_eq!(parsed.overall.requests.lost_in_flight, 0);
    }

    #[test]
    fn a_reader_needs_only_the_figures() {
        let minimal = r#"{"requests":{"total":3,"failed":0},"duration_s":1.0,"throughput":{"requests_per_s":3.0,"input_tokens_per_s":0.0,"output_tokens_per_s":0.0},"latency_ms":{}}"#;
        let parsed: CompactSummary = serde_json::from_str(minimal).expect("parses");
        assert_eq!(parsed.schema, "");
        assert_eq!(parsed.overall.requests.total, 3);
    }
}
