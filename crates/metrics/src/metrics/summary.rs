//! The summary of a bucket of requests (one stage, or the whole run): counts, throughput, latency statistics,
//! schedule accuracy and errors, all derived from raw records.
//!
//! Definitions (FORMATS.md §3):
//! - Only successful requests enter latency statistics and token sums; every request counts in the totals,
//!   the throughput window and the schedule.
//! - An answer cut short ([`llmbench_model::record::Outcome::Truncated`]) is neither a success nor a failure: it is counted
//!   in `requests.truncated` and described in [`Truncation`], and stays out of the latency statistics and token
//!   sums, as inference-perf leaves it out (it counts it a failure, `TruncatedResponseError`): its E2E and
//!   throughput are those of fewer tokens than the run asked for.
//! - Reasoning ([`Reasoning`]): per successful answer that carried any, its reasoning tokens; TTFO (first content
//!   chunk − sent, AIPerf's and guidellm's) over every successful streamed request, shown only when some answer
//!   reasoned.
//! - Throughput is inference-perf's: sums over successes / (max(end) − min(sent)) over all requests of the
//!   bucket. `duration_s` is that window.
//! - Latency is from the actual send (TTFT and TPOT as inference-perf, ITL per chunk pooled over requests,
//!   NTPOT = e2e / n, E2E = end − sent), plus TTFT and E2E from the scheduled time (MLPerf LoadGen).
//! - Schedule: `achieved_rate = count / (max(sent) − min(sent))`, `delay = sent − scheduled`, as inference-perf.
//! - Prefix cache ([`PrefixCacheHits`]): Σ `usage.prompt_tokens_details.cached_tokens` / Σ `usage.prompt_tokens`
//!   over the successful requests whose response carried `usage`, a request without `cached_tokens` counting 0
//!   cached (inference-perf's `summarize_prompt_token_usage` sums it so); present only when at least one of them
//!   reported `cached_tokens`.
//!
//! Speed: one pass over the records, grouped by stage, collects integer nanoseconds into one vector per
//! metric, each stage a contiguous range of it, and their exact moments per stage. Statistics then find their
//! order statistics in linear time, per stage on its range and overall on the whole vector: nothing is sorted,
//! and no value is copied.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stats::{NsMoments, Stats};
use llmbench_model::record::{ErrorKey, Outcome, RequestRecord};

/// Summary of a bucket of requests: one stage, or the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub requests: RequestCounts,
    /// failed / total; 0 without requests.
    pub failure_rate: f64,
    /// The throughput window, max(end) − min(sent), in seconds.
    pub duration_s: f64,
    pub throughput: Throughput,
    pub latency_ms: Latency,
    pub schedule: Schedule,
    /// Failed requests per class (`http_<status>` for HTTP failures with a status), sorted by key.
    pub errors: BTreeMap<String, u64>,
    /// One message per key of `errors`: that of the earliest failure (by when it ended) that carried one, cut to
    /// [`ERROR_SAMPLE_CHARS`] characters. A key whose requests carried no message (a non-2xx status without a body)
    /// has none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_samples: BTreeMap<String, String>,
    /// Prompt and output lengths in tokens, as asked and as measured.
    #[serde(default, skip_serializing_if = "Lengths::is_empty")]
    pub lengths: Lengths,
    /// Successful requests that met every goodput objective, when the profile sets objectives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// The server's prefix-cache hits as its responses reported them, when any response reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheHits>,
    /// How the server said its answers ended: every request's `finish_reason`, counted by reason as sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub finish_reasons: BTreeMap<String, u64>,
    /// The answers cut short, when any was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
    /// The reasoning in the successful answers, when any carried some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
}

/// The answers a bucket got shorter than asked ([`llmbench_model::record::RequestRecord::truncated`]), so a reader sees how
/// short and why: a server that stops at the end of its context window (llama.cpp) instead of refusing the
/// request gives `length` with fewer tokens than `max_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    /// Answers cut short (the summary's `requests.truncated`).
    pub requests: u64,
    /// Of those, the ones that asked for exactly `max_tokens` (`ignore_eos`).
    pub ignore_eos: u64,
    /// The output tokens they got (the server's `usage.completion_tokens`, else the streamed chunks').
    pub output_tokens: LengthStats,
    /// The `max_tokens` they asked for.
    pub max_tokens: LengthStats,
    /// Their `finish_reason`s as the server sent them; `none` when it sent none.
    pub finish_reasons: BTreeMap<String, u64>,
}

/// The reasoning of a bucket's successful answers (a model served with a reasoning parser streams it apart, as
/// `reasoning_content` or `reasoning`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// Successful answers that carried reasoning.
    pub requests: u64,
    /// Their reasoning tokens: the server's `usage.completion_tokens_details.reasoning_tokens` when it reported
    /// them, else the streamed reasoning chunks' (part of the output tokens, as of `completion_tokens`).
    pub tokens: LengthStats,
}

/// The share of prompt tokens the server reported as served from its prefix cache
/// (`usage.prompt_tokens_details.cached_tokens`, which vLLM sends with `--enable-prompt-tokens-details`, SGLang with
/// `--enable-cache-report`, and TensorRT-LLM always).
///
/// Over the bucket's successful requests whose response carried `usage`: `hit_rate = cached_tokens /
/// prompt_tokens`, both summed over those requests. A response with `usage` but without `cached_tokens` counts as 0
/// cached tokens, because vLLM leaves `prompt_tokens_details` out (or `null`) exactly when nothing hit; counting
/// only the responses that reported it would count only hits. The whole figure is absent (not 0) when no response
/// of the bucket reported `cached_tokens`: the server then either does not report it or never hit, and the
/// responses cannot tell which.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrefixCacheHits {
    /// cached_tokens / prompt_tokens, from 0 to 1.
    pub hit_rate: f64,
    /// Σ `cached_tokens` over the requests counted.
    pub cached_tokens: u64,
    /// Σ `usage.prompt_tokens` over the requests counted.
    pub prompt_tokens: u64,
    /// Successful requests whose response carried `usage`: the requests counted.
    pub requests_with_usage: u64,
    /// Of those, the ones whose usage reported `prompt_tokens_details.cached_tokens`.
    pub requests_reporting: u64,
}

/// What [`PrefixCacheHits`] is made of, summed request by request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PrefixCacheTally {
    with_usage: u64,
    reporting: u64,
    prompt_tokens: u64,
    cached_tokens: u64,
}

impl PrefixCacheTally {
    /// Counts a successful request (failures are not counted, as for every token sum here).
    pub(crate) fn add(&mut self, r: &RequestRecord) {
        let Some(usage) = r.usage else { return };
        self.with_usage += 1;
        self.prompt_tokens += u64::from(usage.prompt_tokens);
        if let Some(cached) = usage.cached_tokens {
            self.reporting += 1;
            self.cached_tokens += u64::from(cached);
        }
    }

    pub(crate) fn absorb(&mut self, other: &PrefixCacheTally) {
        self.with_usage += other.with_usage;
        self.reporting += other.reporting;
        self.prompt_tokens += other.prompt_tokens;
        self.cached_tokens += other.cached_tokens;
    }

    /// `None` when no request reported cached tokens.
    pub(crate) fn hits(&self) -> Option<PrefixCacheHits> {
        (self.reporting > 0).then(|| PrefixCacheHits {
            hit_rate: if self.prompt_tokens == 0 {
                0.0
            } else {
                self.cached_tokens as f64 / self.prompt_tokens as f64
            },
            cached_tokens: self.cached_tokens,
            prompt_tokens: self.prompt_tokens,
            requests_with_usage: self.with_usage,
            requests_reporting: self.reporting,
        })
    }
}

/// The longest error message a summary keeps per error class: enough to say what went wrong (a connection
/// refused, a server's JSON error), not a whole HTML error page.
pub const ERROR_SAMPLE_CHARS: usize = 240;

/// `message` cut to [`ERROR_SAMPLE_CHARS`] characters, with `…` where it was cut.
fn error_sample(message: &str) -> String {
    match message.char_indices().nth(ERROR_SAMPLE_CHARS) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message.to_owned(),
    }
}

/// Keeps `message` as `key`'s sample when it ended before the one kept (ties: the smaller message).
fn keep_earliest(
    samples: &mut BTreeMap<ErrorKey, (u64, String)>,
    key: ErrorKey,
    end_ns: u64,
    message: &str,
) {
    match samples.get_mut(&key) {
        // Most failures end after the one kept: no copy of their message is made.
        Some(kept) if end_ns > kept.0 => {}
        Some(kept) => {
            let sample = error_sample(message);
            if (end_ns, sample.as_str()) < (kept.0, kept.1.as_str()) {
                *kept = (end_ns, sample);
            }
        }
        None => {
            samples.insert(key, (end_ns, error_sample(message)));
        }
    }
}

/// A bucket's token lengths: what the requests asked for and what the successful ones measured, so a reader sees
/// at once whether the prompts and answers had the lengths the profile meant (a chat template adds prompt tokens,
/// a server that stops at EOS gives shorter answers than `max_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Lengths {
    /// Prompt tokens as built (under the run's tokenizer), over every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_asked: Option<LengthStats>,
    /// `max_tokens` as sent, over the requests that sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_asked: Option<LengthStats>,
    /// Prompt tokens of the successful requests: the server's `usage.prompt_tokens`, else as built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<LengthStats>,
    /// Output tokens of the successful requests: the server's `usage.completion_tokens`, else the streamed
    /// content's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<LengthStats>,
}

impl Lengths {
    pub fn is_empty(&self) -> bool {
        *self == Lengths::default()
    }
}

/// A token-length distribution: exact, with numpy's linear percentiles as every other statistic here.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LengthStats {
    pub count: u64,
    pub mean: f64,
    pub min: u32,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: u32,
}

/// Token lengths counted per distinct length: exact, order-free, mergeable, and small (a run has at most as
/// many distinct lengths as its context window has tokens).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LengthTally(BTreeMap<u32, u64>);

impl LengthTally {
    fn add(&mut self, tokens: u32) {
        *self.0.entry(tokens).or_default() += 1;
    }

    fn absorb(&mut self, other: &LengthTally) {
        for (tokens, count) in &other.0 {
            *self.0.entry(*tokens).or_default() += count;
        }
    }

    /// Lengths counted.
    fn count(&self) -> u64 {
        self.0.values().sum()
    }

    /// `None` when nothing was counted.
    fn stats(&self) -> Option<LengthStats> {
        let count: u64 = self.0.values().sum();
        let n = usize::try_from(count).ok().filter(|n| *n > 0)?;
        let sum: u128 = self
            .0
            .iter()
            .map(|(tokens, k)| u128::from(*tokens) * u128::from(*k))
            .sum();
        // The value at sorted position `i`: walk the cumulative counts.
        let at = |i: usize| -> f64 {
            let mut seen = 0u64;
            for (tokens, k) in &self.0 {
                seen += k;
                if seen > i as u64 {
                    return f64::from(*tokens);
                }
            }
            f64::NAN
        };
        let p = |q: f64| super::stats::linear_at(n, q, at).unwrap_or(f64::NAN);
        Some(LengthStats {
            count,
            mean: sum as f64 / count as f64,
            min: self.0.keys().next().copied().unwrap_or(0),
            p50: p(0.5),
            p90: p(0.9),
            p99: p(0.99),
            max: self.0.keys().next_back().copied().unwrap_or(0),
        })
    }
}

/// A bucket's goodput (see `report::goodput` for each tool's definition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// Successful requests that met every objective.
    pub good: u64,
    /// Successful requests judged.
    pub judged: u64,
    /// good / judged, in percent (0 without successful requests).
    pub percentage: f64,
    /// Good requests per second of the bucket's duration.
    pub requests_per_s: f64,
    /// Per objective, the percentage of judged requests that met it.
    pub attainment_percentage: BTreeMap<String, f64>,
}

/// Requests of a bucket, as the summary contract counts them.
pub use llmbench_core::summary::v1::RequestCounts;

/// Rates over the bucket's window (inference-perf's): successful requests, and their input (server-reported
/// prompt tokens, else as built), output and total tokens, per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
    pub total_tokens_per_s: f64,
    /// A pooling run's inputs (embedding inputs, rerank documents) of successful requests per second (vLLM's
    /// `input_sequence_throughput`); absent for a generation run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_per_s: Option<f64>,
}

/// Latency statistics in milliseconds over successful requests; `None` where no request had the metric (e.g.
/// TTFT without streaming).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// First content chunk − sent.
    pub ttft: Option<Stats>,
    /// (last content − first content) / (n − 1), for n ≥ 2.
    pub tpot: Option<Stats>,
    /// Gaps between consecutive content chunks, pooled over requests.
    pub itl: Option<Stats>,
    /// (end − sent) / n, for n ≥ 1.
    pub ntpot: Option<Stats>,
    /// end − sent.
    pub e2e: Option<Stats>,
    /// Time to first output token: the first content chunk after the reasoning − sent (AIPerf's and guidellm's
    /// TTFO), when some answer of the bucket carried reasoning (without, it is TTFT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfo: Option<Stats>,
    /// First content chunk − scheduled (coordinated-omission free).
    pub ttft_from_scheduled: Option<Stats>,
    /// end − scheduled (coordinated-omission free).
    pub e2e_from_scheduled: Option<Stats>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The rate the profile asked for, if it asked for one (a concurrency stage does not).
    pub requested_rate: Option<f64>,
    /// count / (max(sent) − min(sent)); `None` when the sends span no time (fewer than two requests).
    pub achieved_rate: Option<f64>,
    /// sent − scheduled over all requests, in milliseconds.
    pub delay_ms: Option<Stats>,
}

/// A stage's summary with its stage index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    pub stage: u32,
    #[serde(flatten)]
    pub summary: Summary,
    /// Why the stage ended before its plan was done: an error limit, or the run's stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<llmbench_engine::engine::StopReason>,
}

/// Summarises `records` as one bucket, whatever their stages.
pub fn summarize<R: Borrow<RequestRecord>>(records: &[R], requested_rate: Option<f64>) -> Summary {
    let mut counts = Counts::default();
    let mut samples = Samples::with_capacity_for(records);
    for record in records {
        counts.add(record.borrow(), |metric, ns| samples.push(metric, ns));
    }
    counts.summary(samples.all(), requested_rate)
}

/// Summarises `records` per stage (ascending stage index) and overall. `requested_rates[stage]` is the rate the
/// profile asked of that stage; a missing entry means none. The overall requested rate is the stages' common
/// rate, or `None` when they differ.
pub fn summarize_stages(
    records: &[impl Borrow<RequestRecord>],
    requested_rates: &[Option<f64>],
) -> (Summary, Vec<StageSummary>) {
    // Visiting records grouped by stage makes each stage's samples one contiguous range. They normally come
    // grouped (stages run one after another); otherwise a stable sort of references groups them.
    let mut samples = Samples::with_capacity_for(records);
    let stages = if records.is_sorted_by_key(|r| r.borrow().stage) {
        collect_by_stage(records.iter().map(Borrow::borrow), &mut samples)
    } else {
        let mut by_stage: Vec<&RequestRecord> = records.iter().map(Borrow::borrow).collect();
        by_stage.sort_by_key(|r| r.stage);
        collect_by_stage(by_stage.into_iter(), &mut samples)
    };

    let rate_of = |stage: u32| requested_rates.get(stage as usize).copied().flatten();
    let mut overall = Counts::default();
    let mut summaries = Vec::with_capacity(stages.len());
    for (i, (stage, counts, starts)) in stages.iter().enumerate() {
        let ends = stages
            .get(i + 1)
            .map_or_else(|| samples.lens(), |next| next.2);
        summaries.push(StageSummary {
            stage: *stage,
            summary: counts.summary(samples.ranges(*starts, ends), rate_of(*stage)),
            stopped: None,
        });
        overall.absorb(counts);
    }

    // One stage: its samples are all the samples, its counts absorbed into empty ones are the same counts (sums
    // from zero, extremes against their identities, maps merged into empty ones) and the common rate is its
    // rate, so the overall summary is the stage's, taken once.
    let overall = match summaries.as_slice() {
        [only] => only.summary.clone(),
        _ => overall.summary(samples.all(), common_requested_rate(&summaries)),
    };
    (overall, summaries)
}

/// The overall requested rate: the stages' common rate, or `None` when they differ.
pub fn common_requested_rate(stages: &[StageSummary]) -> Option<f64> {
    let mut rates = stages.iter().map(|s| s.summary.schedule.requested_rate);
    match rates.next() {
        Some(first) if rates.all(|r| r == first) => first,
        _ => None,
    }
}

/// Each stage's counts and where its samples start, from records grouped by stage.
fn collect_by_stage<'a>(
    records: impl Iterator<Item = &'a RequestRecord>,
    samples: &mut Samples,
) -> Vec<(u32, Counts, [usize; METRICS])> {
    let mut stages: Vec<(u32, Counts, [usize; METRICS])> = Vec::new();
    for record in records {
        match stages.last_mut() {
            Some((stage, counts, _)) if *stage == record.stage => {
                counts.add(record, |metric, ns| samples.push(metric, ns))
            }
            _ => {
                let mut counts = Counts::default();
                let starts = samples.lens();
                counts.add(record, |metric, ns| samples.push(metric, ns));
                stages.push((record.stage, counts, starts));
            }
        }
    }
    stages
}

/// The sampled metrics, in the order of `Samples`' vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    Ntpot,
    E2e,
    TtftFromScheduled,
    E2eFromScheduled,
    ScheduleDelay,
    Ttfo,
}

pub const METRICS: usize = 9;

impl Metric {
    /// Every metric, in index order.
    pub const ALL: [Metric; METRICS] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::Ntpot,
        Metric::E2e,
        Metric::TtftFromScheduled,
        Metric::E2eFromScheduled,
        Metric::ScheduleDelay,
        Metric::Ttfo,
    ];
}

/// Per-metric samples in nanoseconds, one vector per [`Metric`].
#[derive(Default)]
struct Samples([Vec<u64>; METRICS]);

impl Samples {
    /// Room for every sample `records` can yield, so collecting never reallocates (and copies) a vector of
    /// millions of values: one value per request, and at most one ITL gap per chunk.
    fn with_capacity_for<R: Borrow<RequestRecord>>(records: &[R]) -> Samples {
        let per_request = records.len();
        let gaps = records.iter().map(|r| r.borrow().chunks.len()).sum();
        let mut samples = Samples::default();
        for (metric, values) in samples.0.iter_mut().enumerate() {
            values.reserve_exact(if metric == Metric::Itl as usize {
                gaps
            } else {
                per_request
            });
        }
        samples
    }

    fn push(&mut self, metric: Metric, ns: u64) {
        self.0[metric as usize].push(ns);
    }

    fn lens(&self) -> [usize; METRICS] {
        self.0.each_ref().map(Vec::len)
    }

    fn all(&self) -> [&[u64]; METRICS] {
        self.0.each_ref().map(Vec::as_slice)
    }

    fn ranges(&self, starts: [usize; METRICS], ends: [usize; METRICS]) -> [&[u64]; METRICS] {
        let mut metric = 0;
        self.0.each_ref().map(|values| {
            let range = starts[metric]..ends[metric];
            metric += 1;
            &values[range]
        })
    }
}

/// Everything but the samples a summary needs, accumulated in one pass; where the samples go is the caller's
/// (vectors in memory here, spill files for a run summarised from disk).
#[derive(Debug, Clone)]
pub struct Counts {
    total: u64,
    succeeded: u64,
    input_tokens: u64,
    /// Inputs of the successful pooling requests; `None` until one is seen.
    inputs: Option<u64>,
    output_tokens: u64,
    min_sent_ns: u64,
    max_sent_ns: u64,
    max_end_ns: u64,
    errors: BTreeMap<ErrorKey, u64>,
    /// Per key, the earliest failure's end and message: the earliest, not the first seen, so the sample does not
    /// depend on the order records are counted in (a sharded run streamed shard by shard, or merged).
    error_samples: BTreeMap<ErrorKey, (u64, String)>,
    input_asked: LengthTally,
    output_asked: LengthTally,
    input: LengthTally,
    output: LengthTally,
    /// The moments of this bucket's samples, per [`Metric`], gathered as they are collected.
    moments: [NsMoments; METRICS],
    prefix_cache: PrefixCacheTally,
    finish_reasons: BTreeMap<String, u64>,
    truncated: TruncationTally,
    /// Reasoning tokens of each successful answer that carried reasoning.
    reasoning: LengthTally,
}

/// What [`Truncation`] is made of, request by request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TruncationTally {
    ignore_eos: u64,
    output_tokens: LengthTally,
    max_tokens: LengthTally,
    finish_reasons: BTreeMap<String, u64>,
}

impl TruncationTally {
    fn add(&mut self, r: &RequestRecord) {
        self.ignore_eos += u64::from(r.ignore_eos);
        self.output_tokens.add(r.output_tokens());
        if let Some(max_tokens) = r.max_tokens {
            self.max_tokens.add(max_tokens);
        }
        let reason = r.finish_reason.as_ref().map_or("none", |f| f.as_str());
        *self.finish_reasons.entry(reason.to_owned()).or_default() += 1;
    }

    fn absorb(&mut self, other: &TruncationTally) {
        self.ignore_eos += other.ignore_eos;
        self.output_tokens.absorb(&other.output_tokens);
        self.max_tokens.absorb(&other.max_tokens);
        add_counts(&mut self.finish_reasons, &other.finish_reasons);
    }

    /// `None` when no answer was cut short.
    fn truncation(&self) -> Option<Truncation> {
        Some(Truncation {
            requests: self.output_tokens.count(),
            ignore_eos: self.ignore_eos,
            output_tokens: self.output_tokens.stats()?,
            max_tokens: self.max_tokens.stats()?,
            finish_reasons: self.finish_reasons.clone(),
        })
    }
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (key, count) in from {
        *into.entry(key.clone()).or_default() += count;
    }
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            total: 0,
            succeeded: 0,
            input_tokens: 0,
            inputs: None,
            output_tokens: 0,
            min_sent_ns: u64::MAX,
            max_sent_ns: 0,
            max_end_ns: 0,
            errors: BTreeMap::new(),
            error_samples: BTreeMap::new(),
            input_asked: LengthTally::default(),
            output_asked: LengthTally::default(),
            input: LengthTally::default(),
            output: LengthTally::default(),
            moments: [NsMoments::default(); METRICS],
            prefix_cache: PrefixCacheTally::default(),
            finish_reasons: BTreeMap::new(),
            truncated: TruncationTally::default(),
            reasoning: LengthTally::default(),
        }
    }
}

impl Counts {
    /// Counts `r`, handing each of its samples to `sample`.
    pub fn add(&mut self, r: &RequestRecord, mut sample: impl FnMut(Metric, u64)) {
        use Metric::*;
        let moments = &mut self.moments;
        let mut put = |metric: Metric, ns: u64| {
            sample(metric, ns);
            moments[metric as usize].add(ns);
        };
        self.total += 1;
        self.min_sent_ns = self.min_sent_ns.min(r.sent_ns);
        self.max_sent_ns = self.max_sent_ns.max(r.sent_ns);
        self.max_end_ns = self.max_end_ns.max(r.end_ns);
        put(ScheduleDelay, r.schedule_delay_ns());
        self.input_asked.add(r.input_tokens);
        if let Some(max_tokens) = r.max_tokens {
            self.output_asked.add(max_tokens);
        }
        if let Some(reason) = &r.finish_reason {
            // Looked up before inserting: an allocation only for a reason not seen yet.
            match self.finish_reasons.get_mut(reason.as_str()) {
                Some(count) => *count += 1,
                None => {
                    self.finish_reasons.insert(reason.as_str().to_owned(), 1);
                }
            }
        }

        match r.outcome() {
            Outcome::Failed(key) => {
                *self.errors.entry(key).or_default() += 1;
                if let Some(error) = r.error.as_deref().filter(|e| !e.message.is_empty()) {
                    keep_earliest(&mut self.error_samples, key, r.end_ns, &error.message);
                }
                return;
            }
            Outcome::Truncated => {
                self.truncated.add(r);
                return;
            }
            Outcome::Succeeded => {}
        }
        self.succeeded += 1;
        let reasoning = r.reasoning_tokens();
        if reasoning > 0 {
            self.reasoning.add(reasoning);
        }
        self.input_tokens += u64::from(r.prompt_tokens());
        self.output_tokens += u64::from(r.output_tokens());
        if let Some(inputs) = r.inputs() {
            *self.inputs.get_or_insert(0) += u64::from(inputs);
        }
        self.input.add(r.prompt_tokens());
        self.output.add(r.output_tokens());
        self.prefix_cache.add(r);
        put(E2e, r.e2e_ns());
        put(E2eFromScheduled, r.e2e_from_scheduled_ns());
        let optional = [
            (Ttft, r.ttft_ns()),
            (TtftFromScheduled, r.ttft_from_scheduled_ns()),
            (Tpot, r.tpot_ns()),
            (Ntpot, r.ntpot_ns()),
            (Ttfo, r.ttfo_ns()),
        ];
        for (metric, ns) in optional {
            if let Some(ns) = ns {
                put(metric, ns);
            }
        }
        r.itl_gaps_ns().for_each(|gap| put(Itl, gap));
    }

    pub fn absorb(&mut self, other: &Counts) {
        self.total += other.total;
        self.succeeded += other.succeeded;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        if let Some(inputs) = other.inputs {
            *self.inputs.get_or_insert(0) += inputs;
        }
        self.min_sent_ns = self.min_sent_ns.min(other.min_sent_ns);
        self.max_sent_ns = self.max_sent_ns.max(other.max_sent_ns);
        self.max_end_ns = self.max_end_ns.max(other.max_end_ns);
        for (key, count) in &other.errors {
            *self.errors.entry(*key).or_default() += count;
        }
        for (key, (end_ns, message)) in &other.error_samples {
            keep_earliest(&mut self.error_samples, *key, *end_ns, message);
        }
        self.input_asked.absorb(&other.input_asked);
        self.output_asked.absorb(&other.output_asked);
        self.input.absorb(&other.input);
        self.output.absorb(&other.output);
        for (mine, theirs) in self.moments.iter_mut().zip(&other.moments) {
            mine.merge(theirs);
        }
        self.prefix_cache.absorb(&other.prefix_cache);
        add_counts(&mut self.finish_reasons, &other.finish_reasons);
        self.truncated.absorb(&other.truncated);
        self.reasoning.absorb(&other.reasoning);
    }

    /// The summary of these counts with these samples.
    fn summary(&self, samples: [&[u64]; METRICS], requested_rate: Option<f64>) -> Summary {
        self.summary_with(requested_rate, |metric, moments| {
            Stats::from_ns_with_moments(samples[metric as usize], moments)
        })
    }

    /// The summary of these counts, `stats` giving each metric's statistics from its moments.
    pub fn summary_with(
        &self,
        requested_rate: Option<f64>,
        mut stats: impl FnMut(Metric, &NsMoments) -> Option<Stats>,
    ) -> Summary {
        let [
            ttft,
            tpot,
            itl,
            ntpot,
            e2e,
            ttft_from_scheduled,
            e2e_from_scheduled,
            delay,
            ttfo,
        ] = Metric::ALL.map(|metric| stats(metric, &self.moments[metric as usize]));
        let truncated = self.truncated.output_tokens.count();
        let failed = self.total - self.succeeded - truncated;
        let reasoning = self.reasoning.stats().map(|tokens| Reasoning {
            requests: tokens.count,
            tokens,
        });
        let window_ns = if self.total == 0 {
            0
        } else {
            self.max_end_ns.saturating_sub(self.min_sent_ns)
        };
        let window_s = window_ns as f64 / 1e9;
        let per_s = |amount: u64| {
            if window_ns == 0 {
                0.0
            } else {
                amount as f64 / window_s
            }
        };
        let send_span_ns = self.max_sent_ns.saturating_sub(self.min_sent_ns);
        let achieved_rate = (self.total > 1 && send_span_ns > 0)
            .then(|| self.total as f64 / (send_span_ns as f64 / 1e9));
        Summary {
            requests: RequestCounts {
                total: self.total,
                succeeded: self.succeeded,
                failed,
                truncated,
                lost_in_flight: 0,
            },
            failure_rate: if self.total == 0 {
                0.0
            } else {
                failed as f64 / self.total as f64
            },
            duration_s: window_s,
            throughput: Throughput {
                requests_per_s: per_s(self.succeeded),
                input_tokens_per_s: per_s(self.input_tokens),
                output_tokens_per_s: per_s(self.output_tokens),
                total_tokens_per_s: per_s(self.input_tokens + self.output_tokens),
                inputs_per_s: self.inputs.map(per_s),
            },
            latency_ms: Latency {
                ttft,
                tpot,
                itl,
                ntpot,
                e2e,
                ttfo: ttfo.filter(|_| reasoning.is_some()),
                ttft_from_scheduled,
                e2e_from_scheduled,
            },
            schedule: Schedule {
                requested_rate,
                achieved_rate,
                delay_ms: delay,
            },
            errors: self
                .errors
                .iter()
                .fold(BTreeMap::new(), |mut errors, (key, count)| {
                    *errors.entry(key.to_string()).or_default() += count;
                    errors
                }),
            error_samples: self
                .error_samples
                .iter()
                .map(|(key, (_, message))| (key.to_string(), message.clone()))
                .collect(),
            lengths: Lengths {
                input_asked: self.input_asked.stats(),
                output_asked: self.output_asked.stats(),
                input: self.input.stats(),
                output: self.output.stats(),
            },
            goodput: None,
            prefix_cache: self.prefix_cache.hits(),
            finish_reasons: self.finish_reasons.clone(),
            truncation: self.truncated.truncation(),
            reasoning,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::{
        ChunkEvent, ChunkKind, ErrorClass, FinishReason, RequestError, Usage,
    };

    const MS: u64 = 1_000_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// A successful streamed request; times in ms, one token per content chunk.
    fn ok(stage: u32, scheduled: u64, sent: u64, tokens_at: &[u64], end: u64) -> RequestRecord {
        let mut record = RequestRecord::builder(0)
            .stage(stage)
            .sent(sent * MS)
            .scheduled(scheduled * MS)
            .end(end * MS)
            .input_tokens(10)
            .ok();
        for &t in tokens_at {
            record = record.content_at(t * MS, 1);
        }
        record.build()
    }

    fn failed(
        stage: u32,
        sent: u64,
        end: u64,
        class: ErrorClass,
        status: Option<u16>,
    ) -> RequestRecord {
        let mut r = ok(stage, sent, sent, &[], end);
        r.http_status = status;
        r.error = Some(Box::new(RequestError {
            class,
            message: String::new(),
        }));
        r
    }

    /// `ok`, asking `max_tokens` under `ignore_eos` and ending as the server said.
    fn asked(max_tokens: u32, tokens_at: &[u64], finish: Option<FinishReason>) -> RequestRecord {
        let mut r = ok(0, 0, 0, tokens_at, 300);
        r.max_tokens = Some(max_tokens);
        r.ignore_eos = true;
        r.finish_reason = finish;
        r
    }

    #[test]
    fn answers_cut_short_are_counted_apart_and_stay_out_of_the_latencies() {
        let records = [
            // Whole: 3 of 3, TTFT 100.
            asked(3, &[100, 120, 140], Some(FinishReason::Length)),
            // Cut at the context end: 2 of 8 (TTFT 10), and a stop under ignore_eos: 1 of 4.
            asked(8, &[10, 20], Some(FinishReason::Length)),
            asked(4, &[30], Some(FinishReason::Stop)),
            failed(0, 10, 5010, ErrorClass::Timeout, None),
        ];
        let s = summarize(&records, None);
        assert_eq!(
            s.requests,
            RequestCounts {
                total: 4,
                succeeded: 1,
                failed: 1,
                truncated: 2,
                lost_in_flight: 0,
            }
        );
        assert_eq!(s.failure_rate, 0.25);
        assert_eq!(
            s.errors.len(),
            1,
            "truncation is not an error: {:?}",
            s.errors
        );
        let ttft = s.latency_ms.ttft.expect("ttft");
        assert_eq!((ttft.count, ttft.max), (1, 100.0));
        assert_eq!(s.lengths.output.map(|o| o.count), Some(1));
        let cut = s.truncation.expect("truncation");
        assert_eq!((cut.requests, cut.ignore_eos), (2, 2));
        assert_eq!((cut.output_tokens.min, cut.output_tokens.max), (1, 2));
        assert_eq!((cut.max_tokens.min, cut.max_tokens.max), (4, 8));
        assert_eq!(
            cut.finish_reasons,
            BTreeMap::from([("length".to_owned(), 1), ("stop".to_owned(), 1)])
        );
        // Every request that said how it ended, whatever its outcome.
        assert_eq!(
            s.finish_reasons,
            BTreeMap::from([("length".to_owned(), 2), ("stop".to_owned(), 1)])
        );
        assert_eq!(summarize(&records[..1], None).truncation, None);
    }

    #[test]
    fn reasoning_tokens_and_ttfo_appear_only_when_answers_reasoned() {
        let plain = ok(0, 0, 0, &[100, 120], 150);
        let s = summarize(std::slice::from_ref(&plain), None);
        assert_eq!((s.reasoning.clone(), s.latency_ms.ttfo), (None, None));
        // Reasoning at 50 and 60 ms, the answer from 100 ms: TTFT 50, TTFO 100.
        let mut thinking = ok(0, 0, 0, &[100, 120], 150);
        for at in [60, 50] {
            thinking.chunks.insert(
                0,
                ChunkEvent {
                    at_ns: at * MS,
                    kind: ChunkKind::Reasoning { tokens: 1 },
                },
            );
        }
        let s = summarize(&[thinking, plain], None);
        let reasoning = s.reasoning.expect("reasoning");
        assert_eq!((reasoning.requests, reasoning.tokens.max), (1, 2));
        let ttfo = s.latency_ms.ttfo.expect("ttfo");
        // Over both answers: 100 and 100 ms (the plain answer's TTFO is its TTFT).
        assert_eq!((ttfo.count, ttfo.min, ttfo.max), (2, 100.0, 100.0));
        assert_eq!(s.latency_ms.ttft.map(|t| t.min), Some(50.0));
    }

    #[test]
    fn failed_requests_do_not_enter_latency_stats() {
        let records = [
            // Tokens at 100, 120, 140 ms, end 150: TTFT 100, TPOT (140 − 100)/2 = 20, ITL 20 and 20,
            // NTPOT 150/3 = 50, E2E 150.
            ok(0, 0, 0, &[100, 120, 140], 150),
            // A timeout after 5 s: counted, in the window, but in no latency.
            failed(0, 10, 5010, ErrorClass::Timeout, None),
        ];
        let s = summarize(&records, None);
        assert_eq!(
            s.requests,
            RequestCounts {
                total: 2,
                succeeded: 1,
                failed: 1,
                truncated: 0,
                lost_in_flight: 0,
            }
        );
        assert_eq!(s.failure_rate, 0.5);
        let l = s.latency_ms;
        assert_eq!(l.e2e.unwrap().count, 1);
        assert_eq!(l.e2e.unwrap().mean, 150.0);
        assert_eq!(l.ttft.unwrap().mean, 100.0);
        assert_eq!(l.tpot.unwrap().mean, 20.0);
        assert_eq!((l.itl.unwrap().count, l.itl.unwrap().mean), (2, 20.0));
        assert_eq!(l.ntpot.unwrap().mean, 50.0);
        assert_eq!(s.errors, BTreeMap::from([("timeout".to_owned(), 1)]));
        // The window runs from the first send (0) to the last end (5010 ms), failures included.
        assert_eq!(s.duration_s, 5.01);
        assert!(close(s.throughput.requests_per_s, 1.0 / 5.01));
        assert!(close(s.throughput.output_tokens_per_s, 3.0 / 5.01));
        // The schedule covers every request sent.
        assert_eq!(s.schedule.delay_ms.unwrap().count, 2);
    }

    #[test]
    fn throughput_divides_success_sums_by_first_send_to_last_end() {
        let mut a = ok(0, 0, 0, &[100], 1000);
        a.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: None,
            reasoning_tokens: None,
        });
        let mut b = ok(0, 500, 500, &[600], 2000);
        b.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 15,
            cached_tokens: None,
            reasoning_tokens: None,
        });
        // Window 2000 − 0 = 2 s: 2 requests, 20 input and 20 output tokens.
        let t = summarize(&[a, b], None).throughput;
        assert_eq!(t.requests_per_s, 1.0);
        assert_eq!(t.input_tokens_per_s, 10.0);
        assert_eq!(t.output_tokens_per_s, 10.0);
        assert_eq!(t.total_tokens_per_s, 20.0);
    }

    #[test]
    fn prefix_cache_hit_rate_counts_usage_without_details_as_no_hit() {
        let with = |stage: u32, prompt: u32, cached: Option<u32>| {
            let mut r = ok(stage, 0, 0, &[100], 200);
            r.usage = Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: 1,
                cached_tokens: cached,
                reasoning_tokens: None,
            });
            r
        };
        let records = [
            // Stage 0: 40 tokens, nothing reported (vLLM leaves the details out on a miss), then 32 of 40 twice.
            with(0, 40, None),
            with(0, 40, Some(32)),
            with(0, 40, Some(32)),
            // A response without usage is not counted; nor is a failure, whatever it carried.
            ok(0, 0, 0, &[100], 200),
            {
                let mut r = failed(0, 0, 10, ErrorClass::Timeout, None);
                r.usage = Some(Usage {
                    prompt_tokens: 1000,
                    completion_tokens: 0,
                    cached_tokens: Some(1000),
                    reasoning_tokens: None,
                });
                r
            },
            // Stage 1: usage without details only: no figure at all.
            with(1, 40, None),
        ];
        let (overall, stages) = summarize_stages(&records, &[]);
        // Stage 0: (0 + 32 + 32) / (3 × 40) = 64 / 120.
        let stage0 = stages[0].summary.prefix_cache.expect("reported");
        assert_eq!((stage0.cached_tokens, stage0.prompt_tokens), (64, 120));
        assert_eq!(stage0.hit_rate, 64.0 / 120.0);
        assert_eq!(
            (stage0.requests_with_usage, stage0.requests_reporting),
            (3, 2)
        );
        assert_eq!(stages[1].summary.prefix_cache, None);
        // The run: 64 / 160, the stage without reports counting its tokens as uncached.
        let run = overall.prefix_cache.expect("reported");
        assert_eq!((run.cached_tokens, run.prompt_tokens), (64, 160));
        assert_eq!(run.hit_rate, 0.4);
        assert_eq!((run.requests_with_usage, run.requests_reporting), (4, 2));
    }

    #[test]
    fn achieved_rate_is_count_over_the_send_span() {
        // Five sends at 0, 250, 500, 750, 1000 ms: 5 / 1 s = 5 req/s (inference-perf's count / span).
        let records: Vec<_> = (0..5)
            .map(|i| ok(0, i * 250, i * 250, &[i * 250 + 10], i * 250 + 20))
            .collect();
        let s = summarize(&records, Some(4.0)).schedule;
        assert_eq!(s.achieved_rate, Some(5.0));
        assert_eq!(s.requested_rate, Some(4.0));
        // One send spans no time: no rate.
        assert_eq!(summarize(&records[..1], None).schedule.achieved_rate, None);
    }

    #[test]
    fn itl_pools_every_gap_of_every_successful_request() {
        // Gaps 10, 30 from the first request and 20 from the second: pooled [10, 20, 30].
        let records = [
            ok(0, 0, 0, &[100, 110, 140], 150),
            ok(0, 0, 0, &[50, 70], 80),
        ];
        let itl = summarize(&records, None).latency_ms.itl.unwrap();
        assert_eq!(
            (itl.count, itl.mean, itl.min, itl.p50, itl.max),
            (3, 20.0, 10.0, 20.0, 30.0)
        );
        // p90 of [10, 20, 30]: index 1.8 → 20 + 0.8·10 = 28.
        assert!(close(itl.p90, 28.0));
    }

    #[test]
    fn latency_from_the_schedule_adds_the_send_delay() {
        // Scheduled 0, sent 40, first token 100, end 200.
        let l = summarize(&[ok(0, 0, 40, &[100], 200)], None);
        assert_eq!(l.schedule.delay_ms.unwrap().mean, 40.0);
        assert_eq!(l.latency_ms.ttft.unwrap().mean, 60.0);
        assert_eq!(l.latency_ms.ttft_from_scheduled.unwrap().mean, 100.0);
        assert_eq!(l.latency_ms.e2e.unwrap().mean, 160.0);
        assert_eq!(l.latency_ms.e2e_from_scheduled.unwrap().mean, 200.0);
    }

    #[test]
    fn non_streaming_requests_have_e2e_but_no_ttft() {
        let mut r = ok(0, 0, 0, &[90], 100);
        r.streaming = false;
        let l = summarize(&[r], None).latency_ms;
        assert_eq!(l.ttft, None);
        assert_eq!(l.tpot, None);
        assert_eq!(l.itl, None);
        assert_eq!(l.e2e.unwrap().mean, 100.0);
        assert_eq!(l.ntpot.unwrap().mean, 100.0);
    }

    #[test]
    fn errors_are_counted_by_class_and_http_status() {
        let records = [
            failed(0, 0, 1, ErrorClass::HttpStatus, Some(429)),
            failed(0, 0, 1, ErrorClass::HttpStatus, Some(429)),
            failed(0, 0, 1, ErrorClass::HttpStatus, Some(500)),
            failed(0, 0, 1, ErrorClass::StreamCut, Some(200)),
            ok(0, 0, 0, &[1], 2),
        ];
        let s = summarize(&records, None);
        let expected = [("http_429", 2), ("http_500", 1), ("stream_cut", 1)];
        assert_eq!(
            s.errors,
            expected
                .map(|(k, v)| (k.to_owned(), v))
                .into_iter()
                .collect::<BTreeMap<_, _>>()
        );
        assert_eq!(s.failure_rate, 0.8);
    }

    #[test]
    fn each_error_class_keeps_its_earliest_message_cut_to_length() {
        let with_message = |status: Option<u16>, class: ErrorClass, message: &str| {
            let mut r = failed(0, 0, 1, class, status);
            r.error.as_mut().unwrap().message = message.to_owned();
            r
        };
        let long = "x".repeat(ERROR_SAMPLE_CHARS + 10);
        let mut bare_503 = ok(0, 0, 0, &[1], 2);
        bare_503.http_status = Some(503);
        let mut later = with_message(Some(503), ErrorClass::HttpStatus, "later");
        later.end_ns = 5 * MS;
        let records = [
            // A 503 without a body first: no message to keep. The one that ended last is recorded before the
            // earliest one: the earliest is kept, whatever the order.
            bare_503,
            later,
            with_message(Some(503), ErrorClass::HttpStatus, "overloaded"),
            with_message(None, ErrorClass::Connect, &long),
            // A 404 that never carried a message has no sample.
            failed(0, 0, 1, ErrorClass::HttpStatus, Some(404)),
        ];
        let s = summarize(&records, None);
        assert_eq!(s.errors["http_503"], 3);
        assert_eq!(s.error_samples["http_503"], "overloaded");
        assert_eq!(
            s.error_samples["connect"],
            format!("{}…", "x".repeat(ERROR_SAMPLE_CHARS))
        );
        assert!(!s.error_samples.contains_key("http_404"));
        // Overall, the earliest of the stages' samples.
        let mut second = with_message(Some(503), ErrorClass::HttpStatus, "stage 1");
        (second.stage, second.end_ns) = (1, 2 * MS);
        let mut first = with_message(Some(503), ErrorClass::HttpStatus, "stage 0");
        (first.stage, first.end_ns) = (0, 3 * MS);
        let (overall, stages) = summarize_stages(&[second, first], &[]);
        assert_eq!(overall.error_samples["http_503"], "stage 1");
        assert_eq!(stages[0].summary.error_samples["http_503"], "stage 0");
    }

    #[test]
    fn lengths_compare_what_was_asked_with_what_was_measured() {
        let with_usage = |input: u32, max_tokens: Option<u32>, prompt: u32, completion: u32| {
            let mut r = ok(0, 0, 0, &[1], 2);
            r.input_tokens = input;
            r.max_tokens = max_tokens;
            r.usage = Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                cached_tokens: None,
                reasoning_tokens: None,
            });
            r
        };
        let mut timeout = failed(0, 0, 1, ErrorClass::Timeout, None);
        timeout.input_tokens = 400;
        timeout.max_tokens = Some(50);
        let records = [
            // A chat template adds 7 prompt tokens; answers stop short of max_tokens 50.
            with_usage(100, Some(50), 107, 50),
            with_usage(200, Some(50), 207, 40),
            with_usage(300, Some(50), 307, 30),
            // Asked, failed: counts in what was asked only.
            timeout,
        ];
        let lengths = summarize(&records, None).lengths;
        // Asked input 100, 200, 300, 400: mean 250; p50 at index 1.5 → 250; p90 at 2.7 → 370; p99 at 2.97 → 397.
        let asked = lengths.input_asked.unwrap();
        assert_eq!((asked.count, asked.min, asked.max), (4, 100, 400));
        assert_eq!((asked.mean, asked.p50), (250.0, 250.0));
        assert!(close(asked.p90, 370.0) && close(asked.p99, 397.0));
        let max_tokens = lengths.output_asked.unwrap();
        assert_eq!(
            (max_tokens.count, max_tokens.mean, max_tokens.p99),
            (4, 50.0, 50.0)
        );
        // Measured over the three successes: prompts 107, 207, 307; outputs 30, 40, 50.
        let input = lengths.input.unwrap();
        assert_eq!((input.count, input.mean, input.p50), (3, 207.0, 207.0));
        let output = lengths.output.unwrap();
        assert_eq!((output.min, output.mean, output.max), (30, 40.0, 50));
        // p99 at index 1.98: 40 + 0.98 · 10 = 49.8.
        assert!(close(output.p99, 49.8));
        // No max_tokens sent: nothing asked of the output.
        let mut open = with_usage(10, None, 10, 5);
        open.max_tokens = None;
        assert_eq!(summarize(&[open], None).lengths.output_asked, None);
        assert!(summarize::<RequestRecord>(&[], None).lengths.is_empty());
    }

    #[test]
    fn no_records_give_zero_rates_and_no_stats() {
        let s = summarize::<RequestRecord>(&[], None);
        assert_eq!(s.requests.total, 0);
        assert_eq!(
            (s.failure_rate, s.duration_s, s.throughput.requests_per_s),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(s.latency_ms.e2e, None);
        assert_eq!(s.schedule.achieved_rate, None);
        assert_eq!(s.schedule.delay_ms, None);
        let (overall, stages) = summarize_stages(&[] as &[RequestRecord], &[]);
        assert_eq!(overall, s);
        assert!(stages.is_empty());
    }

    #[test]
    fn stages_are_summarised_apart_and_together() {
        // Stage 1 at 2× the latency of stage 0, records interleaved out of order.
        let records = [
            ok(1, 1000, 1000, &[1200], 1400),
            ok(0, 0, 0, &[100], 200),
            ok(1, 1100, 1100, &[1300], 1500),
            ok(0, 100, 100, &[200], 300),
        ];
        let (overall, stages) = summarize_stages(&records, &[Some(2.0), Some(4.0)]);
        assert_eq!(stages.iter().map(|s| s.stage).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(stages[0].summary.latency_ms.e2e.unwrap().mean, 200.0);
        assert_eq!(stages[1].summary.latency_ms.e2e.unwrap().mean, 400.0);
        assert_eq!(stages[0].summary.schedule.requested_rate, Some(2.0));
        assert_eq!(stages[1].summary.schedule.requested_rate, Some(4.0));
        // Each stage's window is its own: stage 1 runs 1000 → 1500 ms.
        assert_eq!(stages[1].summary.duration_s, 0.5);
        // Overall: the stages' rates differ, so none; the window spans both (0 → 1500 ms).
        assert_eq!(overall.schedule.requested_rate, None);
        assert_eq!(overall.duration_s, 1.5);
        // e2e [200, 200, 400, 400]: mean 300, p50 300.
        assert_eq!(overall.latency_ms.e2e.unwrap().p50, 300.0);
        assert_eq!(overall, summarize(&records, None));
    }

    #[test]
    fn overall_requested_rate_is_the_rate_common_to_all_stages() {
        let records = [ok(0, 0, 0, &[1], 2), ok(1, 5, 5, &[6], 7)];
        let (overall, _) = summarize_stages(&records, &[Some(5.0), Some(5.0)]);
        assert_eq!(overall.schedule.requested_rate, Some(5.0));
        // A stage beyond the given rates has none.
        let (overall, stages) = summarize_stages(&records, &[Some(5.0)]);
        assert_eq!(stages[1].summary.schedule.requested_rate, None);
        assert_eq!(overall.schedule.requested_rate, None);
    }

    /// xorshift64*: a fixed pseudo-random sequence without a dependency on rand's API.
    fn pseudo_random(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |bound| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound
        }
    }

    /// `count` requests with `chunks` one-token content chunks each, in `stages` stages one after the other if
    /// `grouped`, else each request in a random stage.
    fn random_records(
        count: u64,
        stages: u64,
        grouped: bool,
        chunks: u64,
        seed: u64,
    ) -> Vec<RequestRecord> {
        let mut next = pseudo_random(seed);
        (0..count)
            .map(|id| {
                let sent = id * 1000 + next(500);
                let mut t = sent;
                let stage = if grouped {
                    (id * stages / count) as u32
                } else {
                    next(stages) as u32
                };
                let mut record = RequestRecord::builder(id)
                    .stage(stage)
                    .sent(sent)
                    .scheduled(id * 1000)
                    .input_tokens(100)
                    .max_tokens(chunks as u32)
                    .ok()
                    .usage(100, chunks as u32);
                // As a vLLM chat stream: a role-only delta, one chunk per token, the usage chunk.
                let kinds = std::iter::once(ChunkKind::Empty)
                    .chain((0..chunks).map(|_| ChunkKind::Content { tokens: 1 }))
                    .chain(std::iter::once(ChunkKind::UsageOnly));
                for kind in kinds {
                    t += 1 + next(1_000_000);
                    record = record.chunk(t, kind);
                }
                record = record.end(t + next(1000));
                if next(20) == 0 {
                    record = record.error(ErrorClass::Timeout, "");
                }
                record.build()
            })
            .collect()
    }

    #[test]
    fn one_stage_summarises_overall_as_the_stage_and_as_one_bucket() {
        for grouped in [true, false] {
            let records = random_records(2000, 1, grouped, 5, 43);
            let (overall, stages) = summarize_stages(&records, &[Some(2.5)]);
            assert_eq!(stages.len(), 1);
            assert_eq!(overall, summarize(&records, Some(2.5)));
            assert_eq!(stages[0].summary, overall);
            assert_eq!(overall.schedule.requested_rate, Some(2.5));
        }
    }

    #[test]
    fn stage_ranges_give_the_same_overall_as_one_bucket() {
        for grouped in [true, false] {
            let records = random_records(2000, 7, grouped, 5, 42);
            let (overall, stages) = summarize_stages(&records, &[]);
            assert_eq!(stages.len(), 7);
            // Exactly equal: percentiles are order statistics and the moments are exact integer sums.
            assert_eq!(overall, summarize(&records, None));
            for stage in &stages {
                let own: Vec<_> = records
                    .iter()
                    .filter(|r| r.stage == stage.stage)
                    .cloned()
                    .collect();
                assert_eq!(stage.summary, summarize(&own, None));
            }
        }
    }
}
