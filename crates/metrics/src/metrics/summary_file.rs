//! `summary.json` (schema `llmbench.summary/v1`) and the compact `--summary-file` of at most 4096 bytes that
//! a launcher pod writes to its termination log for the operator to copy into the run's status.
//!
//! The schema's fields are those of issue 3: `run_id`, `harness`, `model`, `endpoint`,
//! `requests {total, succeeded, failed}`, `duration_s`, `throughput {requests_per_s, input_tokens_per_s,
//! output_tokens_per_s}`, `latency_ms {ttft, tpot, itl, ntpot, e2e}` each `{mean, p50, p90, p99}`,
//! `schedule {requested_rate, achieved_rate, delay_ms {p50, p99}}`, `stages [...]` with the same fields per
//! stage, and `errors {<class>: count}`. The full file is a superset (every [`Stats`] field, failure rate, total
//! tokens per second, latency from the scheduled time); the compact summary has exactly the schema's fields, plus
//! `stages_omitted` when it had to leave the stages out, and `goodput_percent` and `capacity` (the capacity
//! search's answer in brief) when the run has them — the figures a BenchmarkExperiment compares — and each bucket's
//! `prefix_cache_hit_rate` when the server reported cached prompt tokens (see `summary::PrefixCacheHits`).
//!
//! The compact summary's types are `llmbench_core::summary::v1`'s, the ones the operator reads with; this module
//! fills them from the launcher's full figures and keeps them within the size limit.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use llmbench_core::capacity::CapacityAnswer;
use llmbench_core::summary::v1;
pub use llmbench_core::summary::v1::{
    CompactBody, CompactDelay, CompactLatency, CompactSchedule, CompactStage, CompactSummary,
    CompactThroughput, Completion, LatencyStats, RunState, RunVerdict, ServerSummary,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::stats::Stats;
use super::summary::{StageSummary, Summary, summarize_stages};
use llmbench_model::record::RequestRecord;

/// The schema id carried by `summary.json` and by the compact summary.
pub const SUMMARY_SCHEMA: &str = v1::SCHEMA;

/// The size limit of the compact summary: a Kubernetes termination message holds 4096 bytes.
pub const COMPACT_SUMMARY_MAX_BYTES: usize = v1::COMPACT_MAX_BYTES;

/// What identifies a run in its summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunInfo {
    pub run_id: String,
    pub harness: String,
    pub model: String,
    pub endpoint: String,
}

/// The content of `summary.json`: the whole run's summary, then each stage's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Always [`SUMMARY_SCHEMA`].
    pub schema: String,
    pub run_id: String,
    pub harness: String,
    pub model: String,
    pub endpoint: String,
    #[serde(flatten)]
    pub overall: Summary,
    pub stages: Vec<StageSummary>,
    /// The run's pass/fail verdict where its harness gives one (MLPerf LoadGen's VALID/INVALID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<RunVerdict>,
    /// How the run ended, when not as planned: interrupted, stopped by a limit, or incomplete (killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Completion>,
    /// Requests sent and recorded but left out of every figure above: warm-up and cool-down.
    #[serde(default, skip_serializing_if = "Excluded::is_empty")]
    pub excluded: Excluded,
    /// Per turn of multi-turn conversations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<ConversationSummary>,
    /// Per LoRA adapter the requests went to (vLLM `--lora-modules`, inference-perf `lora_traffic_split`), in
    /// name order: each adapter's measured requests summarised as the whole run's are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<AdapterSummary>,
    /// The profile's keys llmbench did not act on (unknown keys, typos among them, and known keys that change
    /// nothing sent or measured), each with where it is and what happened instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_keys: Vec<String>,
    /// The SLO capacity search's answer, bracket, knee and every point, when the run was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::metrics::capacity::CapacityOutcome>,
    /// The stack's own metrics over the run and per stage, from `server_metrics.jsonl`, when any were scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::server_metrics::ServerMetricsSummary>,
    /// A sharded run merged by `llmbench report`: when the shards were released and when each one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_starts: Option<ShardStarts>,
    /// Set when the run's records outgrew the records memory budget (`--records-memory`): the summary was
    /// computed from requests.jsonl on disk (the same numbers), and these result files were not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_spilled: Option<RecordsSpilled>,
    /// The nop harness's model-load figures, read from the vLLM server's log (`--vllm-log`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_load: Option<llmbench_core::vllm_log::ModelLoadSummary>,
    /// The stack under test in brief (run.json's `stack` has the whole record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<llmbench_core::summary::v1::EngineInfo>,
    /// The server's prefix cache already held the run's prompts when it started (see `report::cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_warm: Option<PrefixCacheWarm>,
}

/// The server's prefix cache was warm when the run started: an earlier run (or another client) had sent the
/// prompts, so the figures measure a warm cache, which nothing else in the run says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefixCacheWarm {
    /// The first stage's prefix-cache hit rate, 0–1: from the responses' cached tokens, else the server's metrics.
    pub first_stage_hit_rate: f64,
    /// The share of the first measured request's prompt tokens that hit, when the responses report cached tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_request_hit_rate: Option<f64>,
    /// Where the figures come from: `usage` (the responses) or `server_metrics`.
    pub source: String,
    /// The warning as printed.
    pub message: String,
}

impl PrefixCacheWarm {
    /// The warning for a first stage that hit `first_stage_hit_rate`; `pinned_by` says what makes every run send
    /// these prompts, when something does.
    pub fn new(
        first_stage_hit_rate: f64,
        first_request_hit_rate: Option<f64>,
        source: &str,
        pinned_by: Option<String>,
    ) -> Self {
        let why = match pinned_by {
            Some(by) => format!(
                "the prompts are pinned by {by}, so every run sends them; --reset-prefix-cache empties the cache \
                 before the run"
            ),
            None => "--reset-prefix-cache empties the cache before the run".to_owned(),
        };
        PrefixCacheWarm {
            message: format!(
                "the server's prefix cache is warm from an earlier run: {:.1} % of prompt tokens hit in the first \
                 stage ({why})",
                first_stage_hit_rate * 100.0
            ),
            first_stage_hit_rate,
            first_request_hit_rate,
            source: source.to_owned(),
        }
    }
}

/// A run summarised from its records on disk, because they outgrew the memory budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordsSpilled {
    /// The budget, in bytes.
    pub memory_bytes: u64,
    /// The result files not written, each with why: the pictures, when their points outgrow the budget.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedReport>,
}

/// A result file not written, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedReport {
    pub file: String,
    pub reason: String,
}

/// Recorded requests left out of the figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excluded {
    /// Requests sent before the first stage: vllm `--num-warmups`, and `--warm-prefix-cache`'s priming pass.
    #[serde(default)]
    pub warmup_requests: u64,
    /// guidellm `warmup`: requests of a stage's warm-up phase.
    #[serde(default)]
    pub warmup: u64,
    /// guidellm `cooldown`: requests of a stage's cool-down phase.
    #[serde(default)]
    pub cooldown: u64,
}

impl Excluded {
    pub fn is_empty(&self) -> bool {
        *self == Excluded::default()
    }
}

/// The measured requests sent to one LoRA adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterSummary {
    pub adapter: String,
    #[serde(flatten)]
    pub summary: Summary,
}

/// Multi-turn conversations: how many, and each turn index's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    /// Conversations with at least one measured turn.
    pub conversations: u64,
    /// Of those, the ones whose every measured turn succeeded.
    pub all_turns_succeeded: u64,
    pub turns: Vec<TurnSummary>,
}

/// The requests of one turn index across conversations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnSummary {
    pub turn: u32,
    pub requests: u64,
    pub succeeded: u64,
    /// Mean input tokens of the successful ones: grows with the history each turn carries.
    pub input_tokens_mean: Option<f64>,
    pub ttft_ms_mean: Option<f64>,
    pub e2e_ms_mean: Option<f64>,
}

impl RunSummary {
    pub fn new(info: RunInfo, overall: Summary, stages: Vec<StageSummary>) -> Self {
        let RunInfo {
            run_id,
            harness,
            model,
            endpoint,
        } = info;
        RunSummary {
            schema: SUMMARY_SCHEMA.to_owned(),
            run_id,
            harness,
            model,
            endpoint,
            overall,
            stages,
            verdict: None,
            run: None,
            excluded: Excluded::default(),
            conversations: None,
            adapters: Vec::new(),
            ignored_keys: Vec::new(),
            capacity: None,
            server_metrics: None,
            shard_starts: None,
            records_spilled: None,
            model_load: None,
            engine: None,
            prefix_cache_warm: None,
        }
    }

    /// Summarises a run's records; `requested_rates[stage]` as in [`summarize_stages`].
    pub fn from_records(
        info: RunInfo,
        records: &[impl std::borrow::Borrow<RequestRecord>],
        requested_rates: &[Option<f64>],
    ) -> Self {
        let (overall, stages) = summarize_stages(records, requested_rates);
        RunSummary::new(info, overall, stages)
    }

    /// `summary.json`'s text: pretty JSON, fields in schema order.
    pub fn to_json_pretty(&self) -> String {
        format!("{:#}", to_value(self))
    }
}

impl From<&Stats> for LatencyStats {
    fn from(s: &Stats) -> Self {
        LatencyStats {
            mean: s.mean,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
        }
    }
}

impl From<&Summary> for CompactBody {
    fn from(s: &Summary) -> Self {
        let compact = |stats: &Option<Stats>| stats.as_ref().map(LatencyStats::from);
        CompactBody {
            requests: s.requests,
            duration_s: s.duration_s,
            throughput: CompactThroughput {
                requests_per_s: s.throughput.requests_per_s,
                input_tokens_per_s: s.throughput.input_tokens_per_s,
                output_tokens_per_s: s.throughput.output_tokens_per_s,
                inputs_per_s: s.throughput.inputs_per_s,
            },
            latency_ms: CompactLatency {
                ttft: compact(&s.latency_ms.ttft),
                tpot: compact(&s.latency_ms.tpot),
                itl: compact(&s.latency_ms.itl),
                ntpot: compact(&s.latency_ms.ntpot),
                e2e: compact(&s.latency_ms.e2e),
                ttfo: compact(&s.latency_ms.ttfo),
            },
            schedule: CompactSchedule {
                requested_rate: s.schedule.requested_rate,
                achieved_rate: s.schedule.achieved_rate,
                delay_ms: s.schedule.delay_ms.map(|d| CompactDelay {
                    p50: d.p50,
                    p99: d.p99,
                }),
            },
            errors: s.errors.clone(),
            prefix_cache_hit_rate: s.prefix_cache.map(|p| p.hit_rate),
        }
    }
}

impl From<&RunSummary> for CompactSummary {
    fn from(s: &RunSummary) -> Self {
        CompactSummary {
            // Always ours, whatever the summary carries, so the size bound holds.
            schema: SUMMARY_SCHEMA.to_owned(),
            run_id: s.run_id.clone(),
            harness: s.harness.clone(),
            model: s.model.clone(),
            endpoint: s.endpoint.clone(),
            overall: CompactBody::from(&s.overall),
            stages: s
                .stages
                .iter()
                .map(|stage| CompactStage {
                    stage: stage.stage,
                    body: CompactBody::from(&stage.summary),
                })
                .collect(),
            verdict: s.verdict.clone(),
            goodput_percent: s.overall.goodput.as_ref().map(|g| g.percentage),
            capacity: s.capacity.as_ref().map(capacity_answer),
            server: s.server_metrics.as_ref().map(server_brief),
            run: s.run,
            start_skew_ms: s.shard_starts.as_ref().map(|starts| starts.skew_ms),
            stages_omitted: 0,
            model_load: s.model_load.clone(),
            engine: s.engine.clone(),
        }
    }
}

/// The compact form of the server metrics: scrape counts and the run-wide means of the gauges that explain
/// saturation.
pub(crate) fn server_brief(server: &crate::server_metrics::ServerMetricsSummary) -> ServerSummary {
    use crate::server_metrics::Figures;
    let overall = &server.overall;
    let mean = |key: &str| match overall.aggregate_metric(key).map(|m| &m.figures) {
        Some(Figures::Gauge { mean, .. }) if mean.is_finite() => Some(*mean),
        _ => None,
    };
    ServerSummary {
        targets: u32::try_from(server.targets.len()).unwrap_or(u32::MAX),
        scrapes: server.targets.iter().map(|t| t.scrapes).sum(),
        failed_scrapes: server.targets.iter().map(|t| t.failed).sum(),
        requests_running_mean: mean("running"),
        requests_waiting_mean: mean("waiting"),
        kv_cache_usage_mean: mean("kv_cache_usage"),
        prefix_cache_hit_percent: match overall
            .aggregate_metric("prefix_cache_hit_rate")
            .map(|m| &m.figures)
        {
            Some(Figures::Ratio { percent }) if percent.is_finite() => Some(*percent),
            _ => None,
        },
        preemptions: match overall.aggregate_metric("preemptions").map(|m| &m.figures) {
            Some(Figures::Counter { increase, .. }) if increase.is_finite() => Some(*increase),
            _ => None,
        },
    }
}

/// The compact form of a capacity search's full outcome (summary.json's `capacity`): what the operator copies into
/// the run's status and a BenchmarkExperiment compares.
pub fn capacity_answer(outcome: &crate::metrics::capacity::CapacityOutcome) -> CapacityAnswer {
    let status = serde_json::to_value(outcome.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    CapacityAnswer {
        load: outcome.load,
        status,
        answer: outcome.answer,
        passing: outcome.bracket.passing,
        failing: outcome.bracket.failing,
        points: u32::try_from(outcome.points.len()).unwrap_or(u32::MAX),
    }
}

/// The key that collects the error counts folded away to fit the size limit.
const FOLDED_ERRORS_KEY: &str = "other_classes";

/// The compact summary as JSON, never longer than [`COMPACT_SUMMARY_MAX_BYTES`].
///
/// When the whole thing does not fit, it degrades in this order, stopping as soon as it fits: leave out the
/// stages (`stages: []`, `stages_omitted: N`; the full detail is in `summary.json`), round numbers to 6 and then
/// 3 significant digits, fold the rarest error classes into `other_classes`, shorten the run's identifying
/// strings, drop the error classes.
pub fn compact_summary(summary: &RunSummary) -> String {
    fit_compact(CompactSummary::from(summary))
}

/// `compact` as JSON within [`COMPACT_SUMMARY_MAX_BYTES`], degraded as [`compact_summary`] says.
fn fit_compact(mut compact: CompactSummary) -> String {
    let fits = |json: &String| json.len() <= COMPACT_SUMMARY_MAX_BYTES;

    let json = render(&compact, None);
    if fits(&json) {
        return json;
    }

    compact.stages_omitted = compact.stages.len();
    compact.stages = Vec::new();
    // The model-load phases and the lines the log lacked are in summary.json; the figures stay.
    if let Some(model_load) = &mut compact.model_load {
        model_load.categories.clear();
        model_load.missing.clear();
    }
    for digits in [None, Some(6), Some(3)] {
        let json = render(&compact, digits);
        if fits(&json) {
            return json;
        }
    }

    let digits = Some(3);
    let all_errors = compact.overall.errors.clone();
    let mut keep = all_errors.len();
    while keep > 0 {
        keep /= 2;
        compact.overall.errors = fold_rarest_errors(&all_errors, keep);
        let json = render(&compact, digits);
        if fits(&json) {
            return json;
        }
    }

    for max_chars in [64, 16, 0] {
        for text in [
            &mut compact.run_id,
            &mut compact.harness,
            &mut compact.model,
            &mut compact.endpoint,
        ] {
            truncate_chars(text, max_chars);
        }
        if let Some(capacity) = &mut compact.capacity {
            truncate_chars(&mut capacity.status, max_chars.max(16));
        }
        // A long engine command line (dozens of engine flags) gives way like the names: run.json has it whole.
        if let Some(engine) = &mut compact.engine {
            engine.command.truncate(max_chars);
            for text in engine
                .command
                .iter_mut()
                .chain(&mut engine.name)
                .chain(&mut engine.image)
                .chain(&mut engine.model)
                .chain(&mut engine.version)
            {
                truncate_chars(text, max_chars.max(16));
            }
        }
        let json = render(&compact, digits);
        if fits(&json) {
            return json;
        }
    }

    compact.overall.errors.clear();
    let json = render(&compact, digits);
    if fits(&json) {
        return json;
    }
    // Unreachable with the fields above (a few hundred bytes remain), kept so the bound is a guarantee.
    let requests = compact.overall.requests;
    format!(
        r#"{{"schema":"{SUMMARY_SCHEMA}","requests":{{"total":{},"succeeded":{},"failed":{}}}}}"#,
        requests.total, requests.succeeded, requests.failed
    )
}

/// Keeps the `keep` most frequent classes (ties by name) and sums the rest under [`FOLDED_ERRORS_KEY`].
fn fold_rarest_errors(errors: &BTreeMap<String, u64>, keep: usize) -> BTreeMap<String, u64> {
    let keep = keep.min(errors.len());
    let mut by_count: Vec<(&String, &u64)> = errors.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let mut kept: BTreeMap<String, u64> = by_count[..keep]
        .iter()
        .map(|(k, v)| ((*k).clone(), **v))
        .collect();
    let folded: u64 = by_count[keep..].iter().map(|(_, v)| **v).sum();
    if keep < by_count.len() {
        *kept.entry(FOLDED_ERRORS_KEY.to_owned()).or_default() += folded;
    }
    kept
}

fn truncate_chars(text: &mut String, max_chars: usize) {
    if let Some((byte_index, _)) = text.char_indices().nth(max_chars) {
        text.truncate(byte_index);
    }
}

/// Serializes the compact summary, rounding its floating-point numbers to `digits` significant digits.
fn render(compact: &CompactSummary, digits: Option<usize>) -> String {
    let mut value = to_value(compact);
    if let Some(digits) = digits {
        round_floats(&mut value, digits);
    }
    value.to_string()
}

fn to_value<T: Serialize>(value: &T) -> Value {
    // The summary types hold only strings, numbers, options, sequences and string-keyed maps, which serde_json
    // always represents (non-finite floats become null).
    serde_json::to_value(value).expect("summary types always serialize to JSON")
}

/// Rounds every float (not the integer counts) in a JSON tree to `digits` significant digits.
fn round_floats(value: &mut Value, digits: usize) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(rounded) = n
                .as_f64()
                .map(|x| round_significant(x, digits))
                .and_then(serde_json::Number::from_f64)
            {
                *n = rounded;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| round_floats(v, digits)),
        Value::Object(map) => map.values_mut().for_each(|v| round_floats(v, digits)),
        _ => {}
    }
}

/// `x` rounded to `digits` significant decimal digits: 1234.5678 → 1230 at 3 digits.
fn round_significant(x: f64, digits: usize) -> f64 {
    if x == 0.0 || !x.is_finite() || digits == 0 {
        return x;
    }
    // The decimal round trip rounds correctly where scaling by powers of ten would not.
    format!("{:.*e}", digits - 1, x).parse().unwrap_or(x)
}

/// Writing a summary failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteSummaryError {
    #[error("failed to encode the run summary as JSON")]
    Encode(#[source] serde_json::Error),
    #[error("failed to write the run summary to {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Writes `summary.json` (pretty JSON), whole or not at all ([`write_whole`]), so a reader never sees half a
/// summary.
pub fn write_summary_json(path: &Path, summary: &RunSummary) -> Result<(), WriteSummaryError> {
    let mut text = serde_json::to_vec_pretty(summary).map_err(WriteSummaryError::Encode)?;
    text.push(b'\n');
    write_whole(path, &text).map_err(|source| WriteSummaryError::Write {
        path: path.to_owned(),
        source,
    })
}

/// The file beside `path` that a whole write goes to before it is renamed over `path`.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".partial");
    path.with_file_name(name)
}

/// Writes `bytes` to `path` whole or not at all: to [`partial_path`], renamed over `path` once written. A full
/// disk or a kill part way leaves the earlier file as it was (run.json is rewritten as a run goes on, and
/// `llmbench report` needs a whole one), and no reader (a dashboard, a browser) ever sees half a file.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let partial = partial_path(path);
    if let Err(e) = std::fs::write(&partial, bytes) {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, path)
}

/// Writes the compact summary to `path` (`--summary-file`, typically `/dev/termination-log`, which cannot be
/// replaced by a rename, so it is written in place).
pub fn write_compact_summary(path: &Path, summary: &RunSummary) -> Result<(), WriteSummaryError> {
    std::fs::write(path, compact_summary(summary)).map_err(|source| WriteSummaryError::Write {
        path: path.to_owned(),
        source,
    })
}

/// The shards' starts, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardStarts {
    /// The instant the shards were released at (RFC 3339), when they were released together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
    /// Per shard (by index): its start after the release instant, or after the earliest shard's start when the
    /// shards were not released together.
    pub late_ms: Vec<f64>,
    /// The latest shard's start minus the earliest one's.
    pub skew_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::assert_json_close;
    use llmbench_model::record::{ErrorClass, RequestError};

    const MS: u64 = 1_000_000;

    fn info() -> RunInfo {
        RunInfo {
            run_id: "run-1".into(),
            harness: "inference-perf".into(),
            model: "meta-llama/Llama-3.1-8B-Instruct".into(),
            endpoint: "http://stack:8000".into(),
        }
    }

    /// Request `i` of `stage`: sent at i·100 ms, tokens 50 ms and 60 ms later, ended at 70 ms.
    fn request(stage: u32, i: u64) -> RequestRecord {
        let sent = (u64::from(stage) * 1000 + i) * 100 * MS;
        RequestRecord::builder(i)
            .stage(stage)
            .sent(sent)
            .end(sent + 70 * MS)
            .input_tokens(10)
            .max_tokens(2)
            .ok()
            .content_at(sent + 50 * MS, 1)
            .content_at(sent + 60 * MS, 1)
            .build()
    }

    fn run(stages: u32, error_statuses: u16) -> RunSummary {
        let mut records: Vec<_> = (0..stages)
            .flat_map(|s| (0..3).map(move |i| request(s, i)))
            .collect();
        for (i, status) in (400..400 + error_statuses).enumerate() {
            let mut r = request(0, 10 + i as u64);
            r.http_status = Some(status);
            r.error = Some(Box::new(RequestError {
                class: ErrorClass::HttpStatus,
                message: String::new(),
            }));
            records.push(r);
        }
        let rates: Vec<_> = (0..stages)
            .map(|s| Some(f64::from(s) + 1.0 / 3.0))
            .collect();
        RunSummary::from_records(info(), &records, &rates)
    }

    fn keys(value: &Value) -> Vec<&str> {
        value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    /// The fields issue 3 defines for the run and for each stage.
    fn assert_has_schema_fields(bucket: &Value) {
        for key in [
            "requests",
            "duration_s",
            "throughput",
            "latency_ms",
            "schedule",
            "errors",
        ] {
            assert!(bucket.get(key).is_some(), "missing {key} in {bucket}");
        }
        assert_eq!(keys(&bucket["requests"]), ["total", "succeeded", "failed"]);
        for key in [
            "requests_per_s",
            "input_tokens_per_s",
            "output_tokens_per_s",
        ] {
            assert!(
                bucket["throughput"][key].is_f64(),
                "missing throughput.{key}"
            );
        }
        for metric in ["ttft", "tpot", "itl", "ntpot", "e2e"] {
            for stat in ["mean", "p50", "p90", "p99"] {
                assert!(
                    bucket["latency_ms"][metric][stat].is_f64(),
                    "missing {metric}.{stat}"
                );
            }
        }
        let schedule = &bucket["schedule"];
        assert!(
            schedule.get("requested_rate").is_some() && schedule.get("achieved_rate").is_some()
        );
        assert!(schedule["delay_ms"]["p50"].is_f64() && schedule["delay_ms"]["p99"].is_f64());
    }

    #[test]
    fn summary_json_carries_the_schema_fields_for_the_run_and_each_stage() {
        let summary = run(2, 1);
        let value: Value = serde_json::from_str(&summary.to_json_pretty()).unwrap();
        assert_eq!(value["schema"], SUMMARY_SCHEMA);
        assert_eq!(value["run_id"], "run-1");
        assert_eq!(value["harness"], "inference-perf");
        assert_eq!(value["model"], "meta-llama/Llama-3.1-8B-Instruct");
        assert_eq!(value["endpoint"], "http://stack:8000");
        assert_has_schema_fields(&value);
        assert_eq!(value["stages"].as_array().unwrap().len(), 2);
        for stage in value["stages"].as_array().unwrap() {
            assert_has_schema_fields(stage);
        }
        assert_eq!(value["errors"]["http_400"], 1);
        // The full file also carries the extra statistics.
        assert!(value["latency_ms"]["e2e"]["p999"].is_f64());
        assert!(value["latency_ms"]["ttft_from_scheduled"]["p50"].is_f64());
        assert!(value["throughput"]["total_tokens_per_s"].is_f64());
    }

    #[test]
    fn summary_json_round_trips() {
        let summary = run(3, 2);
        let parsed: RunSummary = serde_json::from_str(&summary.to_json_pretty()).unwrap();
        assert_json_close(&parsed, &summary);
    }

    #[test]
    fn a_run_summarised_from_disk_round_trips_with_and_without_files_left_out() {
        for skipped in [
            Vec::new(),
            vec![SkippedReport {
                file: "plots/ and report.html".into(),
                reason: "too many points".into(),
            }],
        ] {
            let mut summary = run(2, 1);
            summary.records_spilled = Some(RecordsSpilled {
                memory_bytes: 1 << 20,
                skipped: skipped.clone(),
            });
            let text = summary.to_json_pretty();
            // Nothing left out: no list at all.
            assert_eq!(text.contains("\"skipped\""), !skipped.is_empty(), "{text}");
            let parsed: RunSummary = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed.records_spilled, summary.records_spilled);
        }
    }

    #[test]
    fn compact_summary_has_exactly_the_schema_fields() {
        let summary = run(2, 1);
        let value: Value = serde_json::from_str(&compact_summary(&summary)).unwrap();
        assert_eq!(
            keys(&value),
            [
                "schema",
                "run_id",
                "harness",
                "model",
                "endpoint",
                "requests",
                "duration_s",
                "throughput",
                "latency_ms",
                "schedule",
                "errors",
                "stages"
            ]
        );
        assert_eq!(
            keys(&value["throughput"]),
            [
                "requests_per_s",
                "input_tokens_per_s",
                "output_tokens_per_s"
            ]
        );
        assert_eq!(
            keys(&value["latency_ms"]),
            ["ttft", "tpot", "itl", "ntpot", "e2e"]
        );
        assert_eq!(
            keys(&value["latency_ms"]["ttft"]),
            ["mean", "p50", "p90", "p99"]
        );
        assert_eq!(keys(&value["schedule"]["delay_ms"]), ["p50", "p99"]);
        assert_eq!(value["stages"].as_array().unwrap().len(), 2);
        assert_has_schema_fields(&value["stages"][1]);
        assert_eq!(value["stages"][1]["stage"], 1);
        // Requested rate 1/3 keeps its full precision while everything fits.
        assert_eq!(value["schedule"]["requested_rate"], Value::Null);
        assert_eq!(value["stages"][0]["schedule"]["requested_rate"], 1.0 / 3.0);
    }

    #[test]
    fn compact_summary_never_exceeds_4096_bytes() {
        for (stages, errors) in [(0, 0), (1, 0), (5, 5), (50, 10), (500, 50)] {
            let json = compact_summary(&run(stages, errors));
            assert!(
                json.len() <= COMPACT_SUMMARY_MAX_BYTES,
                "{stages} stages: {} bytes",
                json.len()
            );
            let parsed: CompactSummary = serde_json::from_str(&json).unwrap();
            assert_eq!(parsed.schema, SUMMARY_SCHEMA);
        }
    }

    #[test]
    fn compact_summary_carries_goodput_and_the_capacity_answer_when_the_run_has_them() {
        let mut summary = run(2, 1);
        let plain: Value = serde_json::from_str(&compact_summary(&summary)).unwrap();
        assert!(plain.get("goodput_percent").is_none() && plain.get("capacity").is_none());
        summary.overall.goodput = Some(crate::metrics::summary::Goodput {
            good: 9,
            judged: 10,
            percentage: 90.0,
            requests_per_s: 1.5,
            attainment_percentage: BTreeMap::new(),
        });
        let value: Value = serde_json::from_str(&compact_summary(&summary)).unwrap();
        assert_eq!(value["goodput_percent"], 90.0);
        let mut compact = CompactSummary::from(&summary);
        compact.capacity = Some(CapacityAnswer {
            load: llmbench_core::capacity::LoadAxis::Rate,
            status: "found".into(),
            answer: Some(12.5),
            passing: Some(12.5),
            failing: Some(14.0),
            points: 7,
        });
        let value: Value = serde_json::from_str(&fit_compact(compact)).unwrap();
        assert_eq!(
            value["capacity"],
            serde_json::json!({"load": "rate", "status": "found", "answer": 12.5, "passing": 12.5,
                               "failing": 14.0, "points": 7})
        );
        // The operator reads the same shape into the run's status.
        let parsed: CompactSummary = serde_json::from_value(value).unwrap();
        assert_eq!(parsed.capacity.map(|c| c.points), Some(7));
    }

    #[test]
    fn compact_summary_with_goodput_and_capacity_still_fits_4096_bytes() {
        let mut summary = run(500, 50);
        let huge = "\u{1}é".repeat(10_000);
        summary.run_id = huge.clone();
        summary.model = huge.clone();
        summary.endpoint = huge.clone();
        summary.overall.errors = (0..50).map(|i| (format!("{i}{huge}"), i)).collect();
        summary.overall.goodput = Some(crate::metrics::summary::Goodput {
            good: 1,
            judged: 3,
            percentage: 100.0 / 3.0,
            requests_per_s: 1.0 / 7.0,
            attainment_percentage: BTreeMap::new(),
        });
        let mut compact = CompactSummary::from(&summary);
        compact.capacity = Some(CapacityAnswer {
            load: llmbench_core::capacity::LoadAxis::Concurrency,
            status: huge.clone(),
            answer: Some(f64::MAX),
            passing: Some(-1.2345678901234567e-300),
            failing: Some(1.0 / 3.0),
            points: u32::MAX,
        });
        let json = fit_compact(compact);
        assert!(
            json.len() <= COMPACT_SUMMARY_MAX_BYTES,
            "{} bytes",
            json.len()
        );
        let parsed: CompactSummary = serde_json::from_str(&json).unwrap();
        let capacity = parsed.capacity.expect("the capacity answer survives");
        assert_eq!(capacity.points, u32::MAX);
        assert!(parsed.goodput_percent.is_some());
    }

    #[test]
    fn compact_summary_drops_stage_detail_before_rounding() {
        // 500 stages cannot fit; without them, the run's numbers fit at full precision.
        let summary = run(500, 50);
        let compact: CompactSummary = serde_json::from_str(&compact_summary(&summary)).unwrap();
        assert!(compact.stages.is_empty());
        assert_eq!(compact.stages_omitted, 500);
        assert_json_close(&compact.overall, &CompactBody::from(&summary.overall));
        assert_eq!(compact.overall.errors.len(), 50);
        assert_eq!(compact.overall.requests.total, 1550);
    }

    #[test]
    fn compact_summary_fits_even_with_oversized_names_and_error_classes() {
        let mut summary = run(500, 0);
        // Control characters triple or sextuple in JSON (`\u0001`): 10,000 of them per name.
        let huge = "\u{1}é".repeat(10_000);
        summary.run_id = huge.clone();
        summary.model = huge.clone();
        summary.endpoint = huge.clone();
        summary.harness = huge.clone();
        summary.schema = huge.clone();
        summary.overall.errors = (0..50).map(|i| (format!("{i}{huge}"), i)).collect();
        // Numbers with the longest decimal forms.
        summary.overall.duration_s = -1.2345678901234567e-300;
        summary.overall.throughput.requests_per_s = f64::MAX;
        // An engine with hundreds of long flags.
        summary.engine = Some(llmbench_core::summary::v1::EngineInfo {
            name: Some(huge.clone()),
            image: Some(huge.clone()),
            command: (0..300).map(|i| format!("--flag-{i}={huge}")).collect(),
            model: Some(huge.clone()),
            version: Some(huge.clone()),
        });
        let json = compact_summary(&summary);
        assert!(
            json.len() <= COMPACT_SUMMARY_MAX_BYTES,
            "{} bytes",
            json.len()
        );
        let parsed: CompactSummary = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed.overall.requests, summary.overall.requests);
        assert_eq!(parsed.stages_omitted, 500);
        assert!(
            parsed.engine.is_some(),
            "the engine is shortened, not dropped"
        );
    }

    #[test]
    fn compact_summary_carries_the_engine_whole_when_it_fits() {
        let mut summary = run(2, 2);
        let engine = llmbench_core::summary::v1::EngineInfo {
            name: Some("vLLM".to_owned()),
            image: Some("vllm/vllm-openai:v0.11.0".to_owned()),
            command: vec!["vllm".into(), "serve".into(), "Qwen/Qwen3-0.6B".into()],
            model: Some("Qwen/Qwen3-0.6B".to_owned()),
            version: Some("0.11.0".to_owned()),
        };
        summary.engine = Some(engine.clone());
        let parsed: CompactSummary = serde_json::from_str(&compact_summary(&summary)).unwrap();
        assert_eq!(parsed.engine, Some(engine));
    }

    #[test]
    fn folding_error_classes_keeps_the_most_frequent_and_the_total() {
        let errors: BTreeMap<String, u64> = [("a", 1), ("b", 5), ("c", 3), ("d", 3)]
            .map(|(k, v)| (k.to_owned(), v))
            .into_iter()
            .collect();
        // Keep b (5) and c (3, before d by name); fold a + d = 4.
        let folded = fold_rarest_errors(&errors, 2);
        let expected = [("b", 5), ("c", 3), (FOLDED_ERRORS_KEY, 4)];
        assert_eq!(
            folded,
            expected
                .map(|(k, v)| (k.to_owned(), v))
                .into_iter()
                .collect::<BTreeMap<_, _>>()
        );
        assert_eq!(fold_rarest_errors(&errors, 4), errors);
    }

    #[test]
    fn rounding_keeps_significant_digits() {
        assert_eq!(round_significant(1234.5678, 3), 1230.0);
        assert_eq!(round_significant(0.00123456, 3), 0.00123);
        assert_eq!(round_significant(1.0 / 3.0, 6), 0.333333);
        assert_eq!(round_significant(0.0, 3), 0.0);
        let mut value = serde_json::json!({"count": 12345, "mean": 12.3456, "list": [98.765]});
        round_floats(&mut value, 3);
        assert_eq!(
            value,
            serde_json::json!({"count": 12345, "mean": 12.3, "list": [98.8]})
        );
    }

    #[test]
    fn writers_put_the_summaries_on_disk() {
        let dir =
            std::env::temp_dir().join(format!("llmbench-summary-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let summary = run(2, 1);
        let full = dir.join("summary.json");
        write_summary_json(&full, &summary).unwrap();
        let parsed: RunSummary = serde_json::from_slice(&std::fs::read(&full).unwrap()).unwrap();
        assert_json_close(&parsed, &summary);
        assert!(!dir.join("summary.json.partial").exists());
        let compact = dir.join("termination-log");
        write_compact_summary(&compact, &summary).unwrap();
        assert_eq!(
            std::fs::read_to_string(&compact).unwrap(),
            compact_summary(&summary)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writing_into_a_missing_directory_names_the_path() {
        let path = Path::new("/nonexistent-llmbench-dir/summary.json");
        let error = write_compact_summary(path, &run(1, 0)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("/nonexistent-llmbench-dir/summary.json"),
            "{error}"
        );
    }
}
