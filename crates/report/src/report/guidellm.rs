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
use llmbench_metrics::metrics::transient::{self, StageBounds};
use llmbench_model::record::{ErrorClass, RequestRecord};
use llmbench_workload::workload::LoadKind;

/// The report's file name (guidellm's `--output-path` default before v0.6).
pub const GUIDELLM_REPORT_FILE: &str = "benchmarks.json";

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
            match r.error_class() {
                None => buckets.ok.push(r),
                Some(ErrorClass::Cancelled) if r.was_sent() => buckets.incomplete.push(r),
                Some(ErrorClass::Cancelled) => {}
                Some(_) => buckets.errored.push(r),
            }
        }
        buckets
    }

    fn totals(&self) -> Value {
        json!({
            "successful": self.ok.len(),
            "incomplete": self.incomplete.len(),
            "errored": self.errored.len(),
            "total": self.ok.len() + self.incomplete.len() + self.errored.len(),
        })
    }

    /// Every counted request: successful, then errored, then incomplete.
    fn all(&self) -> impl Iterator<Item = &&'a RequestRecord> {
        self.ok.iter().chain(&self.errored).chain(&self.incomplete)
    }
}

/// A metric's per-status distributions, built by one function per request (`None` leaves the request out).
fn status_of(buckets: &Buckets<'_>, value: impl Fn(&RequestRecord) -> Option<(f64, f64)>) -> Value {
    let pick = |records: &[&RequestRecord]| -> Vec<(f64, f64)> {
        records.iter().filter_map(|r| value(r)).collect()
    };
    let total: Vec<(f64, f64)> = buckets.all().filter_map(|r| value(r)).collect();
    json!({
        "successful": GuidellmDistribution::from_weighted(&pick(&buckets.ok), None),
        "errored": GuidellmDistribution::from_weighted(&pick(&buckets.errored), None),
        "incomplete": GuidellmDistribution::from_weighted(&pick(&buckets.incomplete), None),
        "total": GuidellmDistribution::from_weighted(&total, None),
    })
}

/// Rate distributions per status, from per-request events (epoch seconds, weight).
fn rate_status(
    buckets: &Buckets<'_>,
    window: Option<(f64, f64)>,
    events: impl Fn(&RequestRecord) -> Vec<(f64, f64)>,
) -> Value {
    let (start, end) = (window.map(|w| w.0), window.map(|w| w.1));
    let pick = |records: &[&RequestRecord]| -> Vec<(f64, f64)> {
        records.iter().flat_map(|r| events(r)).collect()
    };
    let all: Vec<(f64, f64)> = buckets.all().flat_map(|r| events(r)).collect();
    json!({
        "successful": GuidellmDistribution::rate_from_timings(&pick(&buckets.ok), start, end),
        "errored": GuidellmDistribution::rate_from_timings(&pick(&buckets.errored), start, end),
        "incomplete": GuidellmDistribution::rate_from_timings(&pick(&buckets.incomplete), start, end),
        "total": GuidellmDistribution::rate_from_timings(&all, start, end),
    })
}

/// A stage's request span on the run clock: its first send and its last end (0, 0 without records).
fn request_span(records: &[&RequestRecord]) -> (u64, u64) {
    let start_ns = records.iter().map(|r| r.sent_ns).min().unwrap_or(0);
    let end_ns = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
    (start_ns, end_ns)
}

/// `requests_per_second`'s events: each request counts once, when it ended (epoch seconds by `at`).
fn completion_event(at: impl Fn(u64) -> f64) -> impl Fn(&RequestRecord) -> Vec<(f64, f64)> {
    move |r| vec![(at(r.end_ns), 1.0)]
}

/// `requests_per_second` of a stage's measured requests: per status, guidellm's rate distribution of their
/// completions over the stage's request span. `t0_unix_ns` anchors record times to the epoch, as guidellm's
/// timestamps are.
fn requests_per_second(t0_unix_ns: u64, records: &[&RequestRecord]) -> Value {
    let at = |ns: u64| (t0_unix_ns as f64 + ns as f64) / 1e9;
    let (start_ns, end_ns) = request_span(records);
    rate_status(
        &Buckets::of(records),
        Some((at(start_ns), at(end_ns))),
        completion_event(at),
    )
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
    requests_per_second(t0_unix_ns, &measured)["successful"]["mean"]
        .as_f64()
        .unwrap_or(0.0)
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

/// One stage as a guidellm `generative_benchmark`.
fn benchmark(meta: &RunMeta, stage: u32, records: &[&RequestRecord]) -> Value {
    let buckets = Buckets::of(records);
    let (ok, errored, incomplete) = (&buckets.ok, &buckets.errored, &buckets.incomplete);
    let at = |ns: u64| meta.unix_s(ns);
    let (start_ns, end_ns) = request_span(records);
    let first_scheduled_ns = records.iter().map(|r| r.scheduled_ns).min().unwrap_or(0);
    let delay_avg = if records.is_empty() {
        -1.0
    } else {
        records
            .iter()
            .map(|r| secs(r.schedule_delay_ns()))
            .sum::<f64>()
            / records.len() as f64
    };
    let strategy = strategy(&meta.stages.get(stage as usize).copied().unwrap_or_default());

    // Output tokens as timed events: each content chunk's tokens at its arrival; without streaming, all at
    // the end. Prompt tokens count when the first token arrives (prefill done), else at the end.
    let output_events = |r: &RequestRecord| -> Vec<(f64, f64)> {
        let chunks: Vec<(f64, f64)> = r
            .chunks
            .iter()
            .filter(|_| r.streaming)
            .filter_map(|c| c.kind.tokens().map(|t| (at(c.at_ns), f64::from(t))))
            .collect();
        if chunks.is_empty() {
            vec![(at(r.end_ns), f64::from(r.output_tokens()))]
        } else {
            chunks
        }
    };
    let prompt_event = |r: &RequestRecord| -> (f64, f64) {
        let first = r.ttft_ns().map_or(r.end_ns, |t| r.sent_ns + t);
        (at(first), f64::from(r.prompt_tokens()))
    };
    let ms = |ns: u64| ns as f64 / 1e6;

    let intervals_of = |records: &[&RequestRecord]| -> Vec<(f64, f64)> {
        records
            .iter()
            .map(|r| (at(r.sent_ns), at(r.end_ns)))
            .collect()
    };
    let intervals: Vec<(f64, f64)> = buckets
        .all()
        .map(|r| (at(r.sent_ns), at(r.end_ns)))
        .collect();

    let metrics = json!({
        "request_totals": buckets.totals(),
        "requests_per_second": requests_per_second(meta.t0_unix_ns, records),
        "request_concurrency": {
            "successful": GuidellmDistribution::concurrency_from_intervals(&intervals_of(ok)),
            "errored": GuidellmDistribution::concurrency_from_intervals(&intervals_of(errored)),
            "incomplete": GuidellmDistribution::concurrency_from_intervals(&intervals_of(incomplete)),
            "total": GuidellmDistribution::concurrency_from_intervals(&intervals),
        },
        "request_latency": status_of(&buckets, |r| Some((secs(r.e2e_ns()), 1.0))),
        "prompt_token_count": status_of(&buckets, |r| Some((f64::from(r.prompt_tokens()), 1.0))),
        "output_token_count": status_of(&buckets, |r| Some((f64::from(r.output_tokens()), 1.0))),
        "total_token_count": status_of(&buckets, |r| {
            Some((f64::from(r.prompt_tokens()) + f64::from(r.output_tokens()), 1.0))
        }),
        "time_to_first_token_ms": status_of(&buckets, |r| r.ttft_ns().map(|t| (ms(t), 1.0))),
        // guidellm 0.8's TTFO: the first content (not reasoning) iteration − request start.
        "time_to_first_output_token_ms": status_of(&buckets, |r| r.ttfo_ns().map(|t| (ms(t), 1.0))),
        "time_per_output_token_ms": status_of(&buckets, |r| {
            r.guidellm_tpot_ns().map(|t| (ms(t), f64::from(r.output_tokens())))
        }),
        "inter_token_latency_ms": status_of(&buckets, |r| {
            r.tpot_ns().map(|t| (ms(t), f64::from(r.output_tokens()) - 1.0))
        }),
        "prompt_tokens_per_second": rate_status(&buckets, None, |r| vec![prompt_event(r)]),
        "output_tokens_per_second": rate_status(&buckets, None, output_events),
        "tokens_per_second": rate_status(&buckets, None, |r| {
            let mut events = output_events(r);
            events.push(prompt_event(r));
            events
        }),
    });

    json!({
        "type_": "generative_benchmark",
        "id_": format!("{}-stage-{stage}", meta.run_id),
        "config": { "strategy": strategy, "stage": stage },
        "scheduler_metrics": {
            "start_time": at(first_scheduled_ns.min(start_ns)),
            "request_start_time": at(start_ns),
            "measure_start_time": at(start_ns),
            "measure_end_time": at(end_ns),
            "request_end_time": at(end_ns),
            "end_time": at(end_ns),
            "requests_made": buckets.totals(),
            "request_targeted_start_delay_avg": delay_avg,
        },
        "metrics": metrics,
        // Per-request entries carry prompt and output texts, which we do not keep.
        "requests": { "successful": [], "errored": [], "incomplete": [] },
    })
}

/// The whole report: one benchmark per stage, in stage order.
pub fn guidellm_report(meta: &RunMeta, stages: &[(u32, Vec<&RequestRecord>)]) -> Value {
    let benchmarks: Vec<Value> = stages
        .iter()
        .map(|(stage, records)| benchmark(meta, *stage, records))
        .collect();
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
