//! guidellm's benchmarks report (`GenerativeBenchmarksReport`, `benchmarks.json`): one benchmark per stage, each
//! metric a `StatusDistributionSummary {successful, errored, incomplete, total}` of guidellm's weighted
//! distributions ([`GuidellmDistribution`]), timestamps in epoch seconds.
//!
//! guidellm's definitions: `time_to_first_token_ms` = first token − sent (reasoning or not);
//! `time_to_first_output_token_ms` = first content token − sent (guidellm 0.8, `request_stats.py`); `inter_token_latency_ms` =
//! (last token − first token)/(n − 1), weighted by n − 1 (vLLM's and inference-perf's TPOT);
//! `time_per_output_token_ms` = (last token − sent)/n, weighted by n; `request_latency` in seconds; rates
//! (`requests_per_second`, `output_tokens_per_second`, `tokens_per_second`) and `request_concurrency` are
//! distributions over time. guidellm writes 0 where a request lacks a metric (TTFT without streaming); we
//! leave such requests out, so a distribution never mixes measurements with placeholders. A request cancelled
//! in flight (an interrupt, an error limit) is `incomplete`; one cancelled before it was sent (a later turn of a
//! conversation whose turn failed) is left out, as guidellm leaves it out. guidellm has no notion of an answer cut
//! short: one is `successful` here, as guidellm counts it.

use serde_json::{Value, json};

use super::meta::{RunMeta, StageMeta};
use super::secs;
use llmbench_metrics::metrics::GuidellmDistribution;
use llmbench_metrics::metrics::radix::{PackedEvents, PackedIter, stable_sort_by_f64_key};
use llmbench_metrics::metrics::transient::{self, StageBounds};
use llmbench_metrics::metrics::weighted::merge_by_time;
use llmbench_model::record::{ErrorClass, RequestRecord};
use llmbench_workload::workload::LoadKind;

/// The report's file name (guidellm's `--output-path` default before v0.6).
pub const GUIDELLM_REPORT_FILE: &str = "benchmarks.json";

mod streamed;

pub(crate) use streamed::GuidellmStreamed;

/// guidellm's status of a request: `successful`, `errored`, `incomplete`, each an index into [`ByStatus`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Successful = 0,
    Errored = 1,
    Incomplete = 2,
}

/// A request's status; none for one cancelled before it was sent, which guidellm leaves out.
pub(crate) fn status(r: &RequestRecord) -> Option<Status> {
    match r.error_class() {
        None => Some(Status::Successful),
        Some(ErrorClass::Cancelled) if r.was_sent() => Some(Status::Incomplete),
        Some(ErrorClass::Cancelled) => None,
        Some(_) => Some(Status::Errored),
    }
}

/// A stage's requests by guidellm's status.
struct Buckets<'a> {
    ok: Vec<&'a RequestRecord>,
    errored: Vec<&'a RequestRecord>,
    incomplete: Vec<&'a RequestRecord>,
}

impl<'a> Buckets<'a> {
    fn of(records: &[&'a RequestRecord]) -> Self {
        let mut buckets = Buckets {
            ok: Vec::new(),
            errored: Vec::new(),
            incomplete: Vec::new(),
        };
        for r in records {
            match status(r) {
                Some(Status::Successful) => buckets.ok.push(r),
                Some(Status::Incomplete) => buckets.incomplete.push(r),
                Some(Status::Errored) => buckets.errored.push(r),
                None => {}
            }
        }
        buckets
    }

    fn counts(&self) -> [u64; 3] {
        [self.ok.len(), self.errored.len(), self.incomplete.len()].map(|n| n as u64)
    }

    /// Every counted request: successful, then errored, then incomplete.
    fn all(&self) -> impl Iterator<Item = &&'a RequestRecord> {
        self.ok.iter().chain(&self.errored).chain(&self.incomplete)
    }

    /// Per status, then all together, the distribution `of` the requests. With no errored and no incomplete
    /// request, all together are the successful ones: the same input, so the same distribution, computed once.
    fn by_status(
        &self,
        of: impl Fn(&mut dyn Iterator<Item = &&'a RequestRecord>) -> GuidellmDistribution,
    ) -> ByStatus {
        let successful = of(&mut self.ok.iter());
        let total = if self.errored.is_empty() && self.incomplete.is_empty() {
            successful.clone()
        } else {
            of(&mut self.all())
        };
        ByStatus {
            successful,
            errored: of(&mut self.errored.iter()),
            incomplete: of(&mut self.incomplete.iter()),
            total,
        }
    }

    /// Each status's token events, `events` of each request in order (`count` of them), sorted by time
    /// (stably).
    fn sorted_events(
        &self,
        meta: &RunMeta,
        count: impl Fn(&RequestRecord) -> usize,
        events: impl Fn(&RequestRecord, &mut Events),
    ) -> [Events; 3] {
        [&self.ok, &self.errored, &self.incomplete].map(|records| {
            let capacity = records.iter().map(|r| count(r)).sum();
            // Every event of a request falls between its send and its end, on the run clock.
            let first = records.iter().map(|r| r.sent_ns.min(r.end_ns)).min();
            let last = records.iter().map(|r| r.sent_ns.max(r.end_ns)).max();
            let mut all = match first.zip(last).and_then(|(first, last)| {
                PackedEvents::new(meta.unix_s(first), meta.unix_s(last), capacity)
            }) {
                Some(packed) => Events::Packed(packed),
                None => Events::Pairs(Vec::with_capacity(capacity)),
            };
            for r in records {
                events(r, &mut all);
            }
            all.sort();
            all
        })
    }
}

/// A status's token events: packed (half the memory, sorted in fewer passes) while every one fits the range
/// and weights [`PackedEvents`] holds, else as pairs. Either way sorted by time, stably.
enum Events {
    Packed(PackedEvents),
    Pairs(Vec<(f64, f64)>),
}

impl Events {
    fn push(&mut self, t: f64, w: f64) {
        match self {
            Events::Packed(packed) => {
                if !packed.push(t, w) {
                    // Unpacking gives back the very events, in order.
                    let mut pairs: Vec<(f64, f64)> = Vec::with_capacity(packed.len() + 1);
                    pairs.extend(packed.iter());
                    pairs.push((t, w));
                    *self = Events::Pairs(pairs);
                }
            }
            Events::Pairs(pairs) => pairs.push((t, w)),
        }
    }

    fn sort(&mut self) {
        match self {
            Events::Packed(packed) => packed.sort(),
            Events::Pairs(pairs) => stable_sort_by_f64_key(pairs, |e| e.0),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Events::Packed(packed) => packed.is_empty(),
            Events::Pairs(pairs) => pairs.is_empty(),
        }
    }

    fn iter(&self) -> EventsIter<'_> {
        match self {
            Events::Packed(packed) => EventsIter::Packed(packed.iter()),
            Events::Pairs(pairs) => EventsIter::Pairs(pairs.iter()),
        }
    }
}

/// [`Events::iter`].
enum EventsIter<'a> {
    Packed(PackedIter<'a>),
    Pairs(std::slice::Iter<'a, (f64, f64)>),
}

impl Iterator for EventsIter<'_> {
    type Item = (f64, f64);

    #[inline]
    fn next(&mut self) -> Option<(f64, f64)> {
        match self {
            EventsIter::Packed(packed) => packed.next(),
            EventsIter::Pairs(pairs) => pairs.next().copied(),
        }
    }
}

/// A token rate per status, then all together, from `stream(status)`, each status's events in time order
/// ([`Buckets::sorted_events`], or two such merged): all together are the three merged in time order. Token counts
/// are whole numbers, so events at equal times may come in any order
/// ([`GuidellmDistribution::rate_from_sorted_timings`]): the merge gives what sorting all the events together gives.
/// `only_successful`: no errored or incomplete event, so all together are the successful ones.
fn rate_by_status<I: Iterator<Item = (f64, f64)>>(
    stream: impl Fn(usize) -> I,
    only_successful: bool,
) -> ByStatus {
    let rate = |s: usize| GuidellmDistribution::rate_from_sorted_timings(stream(s));
    let successful = rate(0);
    let total = if only_successful {
        successful.clone()
    } else {
        GuidellmDistribution::rate_from_sorted_timings(merge_by_time(
            merge_by_time(stream(0), stream(1)),
            stream(2),
        ))
    };
    ByStatus {
        successful,
        errored: rate(1),
        incomplete: rate(2),
        total,
    }
}

/// The rate of one kind of token event ([`rate_by_status`]).
fn token_rate(sorted: &[Events; 3]) -> ByStatus {
    rate_by_status(
        |s| sorted[s].iter(),
        sorted[1..].iter().all(Events::is_empty),
    )
}

/// `tokens_per_second`: output and prompt tokens together, each status's two sorted streams merged in time order.
fn tokens_rate(output: &[Events; 3], prompt: &[Events; 3]) -> ByStatus {
    rate_by_status(
        |s| merge_by_time(output[s].iter(), prompt[s].iter()),
        output[1..].iter().chain(&prompt[1..]).all(Events::is_empty),
    )
}

/// `request_totals` and `requests_made`: the counts of each status and their sum.
fn totals(counts: [u64; 3]) -> Value {
    let [successful, errored, incomplete] = counts;
    json!({
        "successful": successful,
        "incomplete": incomplete,
        "errored": errored,
        "total": successful + incomplete + errored,
    })
}

/// guidellm's `StatusDistributionSummary`: a metric's distribution per status and over all of them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ByStatus {
    pub successful: GuidellmDistribution,
    pub errored: GuidellmDistribution,
    pub incomplete: GuidellmDistribution,
    pub total: GuidellmDistribution,
}

impl ByStatus {
    fn to_json(&self) -> Value {
        json!({
            "successful": self.successful,
            "errored": self.errored,
            "incomplete": self.incomplete,
            "total": self.total,
        })
    }
}

/// The per-request metrics, each a value and its weight per request (`None` leaves the request out), in the
/// order the report lists them.
pub(crate) const REQUEST_METRICS: [&str; 8] = [
    "request_latency",
    "prompt_token_count",
    "output_token_count",
    "total_token_count",
    "time_to_first_token_ms",
    "time_to_first_output_token_ms",
    "time_per_output_token_ms",
    "inter_token_latency_ms",
];

/// [`REQUEST_METRICS`]`[metric]` of `r`. Every weight is a whole number (1 or a token count), so sums of
/// weights are exact in any order.
pub(crate) fn request_metric(metric: usize, r: &RequestRecord) -> Option<(f64, f64)> {
    let ms = |ns: u64| ns as f64 / 1e6;
    match metric {
        0 => Some((secs(r.e2e_ns()), 1.0)),
        1 => Some((f64::from(r.prompt_tokens()), 1.0)),
        2 => Some((f64::from(r.output_tokens()), 1.0)),
        3 => Some((
            f64::from(r.prompt_tokens()) + f64::from(r.output_tokens()),
            1.0,
        )),
        4 => r.ttft_ns().map(|t| (ms(t), 1.0)),
        // guidellm 0.8's TTFO: the first content (not reasoning) iteration − request start.
        5 => r.ttfo_ns().map(|t| (ms(t), 1.0)),
        6 => r
            .guidellm_tpot_ns()
            .map(|t| (ms(t), f64::from(r.output_tokens()))),
        7 => r
            .tpot_ns()
            .map(|t| (ms(t), f64::from(r.output_tokens()) - 1.0)),
        _ => None,
    }
}

/// Output tokens as timed events (epoch seconds, tokens), each handed to `out` in the record's order: each
/// content chunk's tokens at its arrival; without streaming, all at the end.
pub(crate) fn output_events(meta: &RunMeta, r: &RequestRecord, out: &mut impl FnMut(f64, f64)) {
    let mut any = false;
    if r.streaming {
        for c in &r.chunks {
            if let Some(t) = c.kind.tokens() {
                out(meta.unix_s(c.at_ns), f64::from(t));
                any = true;
            }
        }
    }
    if !any {
        out(meta.unix_s(r.end_ns), f64::from(r.output_tokens()));
    }
}

/// How many events [`output_events`] hands on for `r`.
fn output_event_count(r: &RequestRecord) -> usize {
    let chunks = if r.streaming {
        r.chunks
            .iter()
            .filter(|c| c.kind.tokens().is_some())
            .count()
    } else {
        0
    };
    chunks.max(1)
}

/// Prompt tokens as a timed event: they count when the first token arrives (prefill done), else at the end.
pub(crate) fn prompt_event(meta: &RunMeta, r: &RequestRecord) -> (f64, f64) {
    let first = r.ttft_ns().map_or(r.end_ns, |t| r.sent_ns + t);
    (meta.unix_s(first), f64::from(r.prompt_tokens()))
}

/// `requests_per_second`'s event of a request: it counts once, when it ended (epoch seconds).
fn completion_time(t0_unix_ns: u64, r: &RequestRecord) -> f64 {
    (t0_unix_ns as f64 + r.end_ns as f64) / 1e9
}

/// A stage's request span on the run clock: its first send and its last end (0, 0 without records).
fn request_span(records: &[&RequestRecord]) -> (u64, u64) {
    let start_ns = records.iter().map(|r| r.sent_ns).min().unwrap_or(0);
    let end_ns = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
    (start_ns, end_ns)
}

/// `requests_per_second` of a stage's measured requests: per status, guidellm's rate distribution of their
/// completions over the stage's request span. `t0_unix_ns` anchors record times to the epoch, as guidellm's
/// timestamps are.
fn requests_per_second(t0_unix_ns: u64, records: &[&RequestRecord]) -> ByStatus {
    let (start_ns, end_ns) = request_span(records);
    let at = |ns: u64| (t0_unix_ns as f64 + ns as f64) / 1e9;
    let window = (Some(at(start_ns)), Some(at(end_ns)));
    Buckets::of(records).by_status(|records| {
        let events: Vec<(f64, f64)> = records
            .map(|r| (completion_time(t0_unix_ns, r), 1.0))
            .collect();
        GuidellmDistribution::rate_from_timings(&events, window.0, window.1)
    })
}

/// guidellm's `request_throughput.successful.mean` of `stage` (its benchmark's
/// `metrics.requests_per_second.successful.mean` in benchmarks.json), from the stage's records in the order
/// they finished: the requests its warm-up and cool-down leave out are left out first, exactly as the report
/// leaves them out. What guidellm's sweep interpolates its rates between. `start_ns` is when the stage
/// started on the run clock.
pub fn guidellm_successful_rate(
    stage: &StageMeta,
    t0_unix_ns: u64,
    start_ns: u64,
    records: &[RequestRecord],
) -> f64 {
    let bucket: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    let bounds = StageBounds {
        start_ns: Some(start_ns),
        max_requests: stage.max_requests,
        max_duration_s: stage.max_duration_s,
        warmup: stage.warmup,
        cooldown: stage.cooldown,
    };
    let (keep, _) = transient::measured(&bucket, &bounds);
    let measured: Vec<&RequestRecord> = bucket
        .into_iter()
        .zip(keep)
        .filter_map(|(r, k)| k.then_some(r))
        .collect();
    requests_per_second(t0_unix_ns, &measured).successful.mean
}

/// The benchmark's `config.strategy` as guidellm dumps its scheduling strategy: the type, and the rate, stream
/// count and in-flight cap the type has. A run.json without the load kind (written before llmbench recorded it)
/// falls back to what the rate and concurrency say.
fn strategy(stage: &StageMeta) -> Value {
    match (stage.load, stage.rate, stage.concurrency) {
        (Some(LoadKind::Synchronous), ..) => {
            json!({ "type_": "synchronous", "max_concurrency": null })
        }
        (Some(LoadKind::Throughput), _, cap) => {
            json!({ "type_": "throughput", "max_concurrency": cap })
        }
        (Some(LoadKind::Concurrent), _, Some(streams)) => {
            json!({ "type_": "concurrent", "streams": streams, "max_concurrency": null })
        }
        (Some(kind @ (LoadKind::Constant | LoadKind::Poisson)), Some(rate), cap) => {
            json!({ "type_": kind.name(), "rate": rate, "max_concurrency": cap })
        }
        (_, Some(rate), cap) => {
            json!({ "type_": "constant", "rate": rate, "max_concurrency": cap })
        }
        (_, None, Some(streams)) => json!({ "type_": "concurrent", "streams": streams }),
        (_, None, None) => json!({ "type_": "throughput" }),
    }
}

/// What a stage's benchmark is made of, however it was gathered: held in memory ([`Figures::of`]) or streamed
/// from disk ([`GuidellmStreamed`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figures {
    /// Requests of each status: successful, errored, incomplete.
    pub counts: [u64; 3],
    pub first_scheduled_ns: u64,
    /// The first send and the last end (0, 0 without records).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The mean schedule delay in seconds; −1 without records.
    pub delay_avg: f64,
    pub requests_per_second: ByStatus,
    pub request_concurrency: ByStatus,
    /// [`REQUEST_METRICS`], in order.
    pub request_metrics: Vec<ByStatus>,
    pub prompt_tokens_per_second: ByStatus,
    pub output_tokens_per_second: ByStatus,
    pub tokens_per_second: ByStatus,
}

impl Figures {
    /// The figures of a stage's measured records held in memory.
    fn of(meta: &RunMeta, records: &[&RequestRecord]) -> Figures {
        let buckets = Buckets::of(records);
        let (start_ns, end_ns) = request_span(records);
        let delay_avg = if records.is_empty() {
            -1.0
        } else {
            records
                .iter()
                .map(|r| secs(r.schedule_delay_ns()))
                .sum::<f64>()
                / records.len() as f64
        };
        let prompt = buckets.sorted_events(
            meta,
            |_| 1,
            |r, all| {
                let (t, w) = prompt_event(meta, r);
                all.push(t, w)
            },
        );
        let output = buckets.sorted_events(meta, output_event_count, |r, all| {
            output_events(meta, r, &mut |t, w| all.push(t, w))
        });
        Figures {
            counts: buckets.counts(),
            first_scheduled_ns: records.iter().map(|r| r.scheduled_ns).min().unwrap_or(0),
            start_ns,
            end_ns,
            delay_avg,
            requests_per_second: requests_per_second(meta.t0_unix_ns, records),
            request_concurrency: buckets.by_status(|records| {
                let intervals: Vec<(f64, f64)> = records
                    .map(|r| (meta.unix_s(r.sent_ns), meta.unix_s(r.end_ns)))
                    .collect();
                GuidellmDistribution::concurrency_from_intervals(&intervals)
            }),
            request_metrics: (0..REQUEST_METRICS.len())
                .map(|metric| {
                    buckets.by_status(|records| {
                        let values: Vec<(f64, f64)> =
                            records.filter_map(|r| request_metric(metric, r)).collect();
                        GuidellmDistribution::from_weighted(&values, None)
                    })
                })
                .collect(),
            prompt_tokens_per_second: token_rate(&prompt),
            output_tokens_per_second: token_rate(&output),
            tokens_per_second: tokens_rate(&output, &prompt),
        }
    }
}

/// One stage as a guidellm `generative_benchmark`.
pub(crate) fn benchmark(meta: &RunMeta, stage: u32, figures: &Figures) -> Value {
    let at = |ns: u64| meta.unix_s(ns);
    let strategy = strategy(&meta.stages.get(stage as usize).copied().unwrap_or_default());
    let mut metrics = serde_json::Map::new();
    metrics.insert("request_totals".into(), totals(figures.counts));
    metrics.insert(
        "requests_per_second".into(),
        figures.requests_per_second.to_json(),
    );
    metrics.insert(
        "request_concurrency".into(),
        figures.request_concurrency.to_json(),
    );
    for (name, by_status) in REQUEST_METRICS.iter().zip(&figures.request_metrics) {
        metrics.insert((*name).into(), by_status.to_json());
    }
    metrics.insert(
        "prompt_tokens_per_second".into(),
        figures.prompt_tokens_per_second.to_json(),
    );
    metrics.insert(
        "output_tokens_per_second".into(),
        figures.output_tokens_per_second.to_json(),
    );
    metrics.insert(
        "tokens_per_second".into(),
        figures.tokens_per_second.to_json(),
    );

    json!({
        "type_": "generative_benchmark",
        "id_": format!("{}-stage-{stage}", meta.run_id),
        "config": { "strategy": strategy, "stage": stage },
        "scheduler_metrics": {
            "start_time": at(figures.first_scheduled_ns.min(figures.start_ns)),
            "request_start_time": at(figures.start_ns),
            "measure_start_time": at(figures.start_ns),
            "measure_end_time": at(figures.end_ns),
            "request_end_time": at(figures.end_ns),
            "end_time": at(figures.end_ns),
            "requests_made": totals(figures.counts),
            "request_targeted_start_delay_avg": figures.delay_avg,
        },
        "metrics": metrics,
        // Per-request entries carry prompt and output texts, which we do not keep.
        "requests": { "successful": [], "errored": [], "incomplete": [] },
    })
}

/// The whole report: one benchmark per stage, in stage order.
pub fn guidellm_report(meta: &RunMeta, stages: &[(u32, Vec<&RequestRecord>)]) -> Value {
    report(
        meta,
        stages
            .iter()
            .map(|(stage, records)| benchmark(meta, *stage, &Figures::of(meta, records)))
            .collect(),
    )
}

/// The report around its `benchmarks`.
pub(crate) fn report(meta: &RunMeta, benchmarks: Vec<Value>) -> Value {
    json!({
        "metadata": {
            "version": 2,
            "guidellm_version": format!("llmbench {}", super::LLMBENCH_VERSION),
            "python_version": Value::Null,
            "platform": std::env::consts::OS,
        },
        "config": { "run_id": meta.run_id, "target": meta.endpoint, "model": meta.model, "profile": meta.profile },
        "benchmarks": benchmarks,
    })
}
