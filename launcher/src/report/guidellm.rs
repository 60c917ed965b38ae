//! guidellm's benchmarks report (`GenerativeBenchmarksReport`, `benchmarks.json`): one benchmark per stage, each
//! metric a `StatusDistributionSummary {successful, errored, incomplete, total}` of guidellm's weighted
//! distributions ([`GuidellmDistribution`]), timestamps in epoch seconds.
//!
//! guidellm's definitions: `time_to_first_token_ms` = first token − sent; `inter_token_latency_ms` =
//! (last token − first token)/(n − 1), weighted by n − 1 (vLLM's and inference-perf's TPOT);
//! `time_per_output_token_ms` = (last token − sent)/n, weighted by n; `request_latency` in seconds; rates
//! (`requests_per_second`, `output_tokens_per_second`, `tokens_per_second`) and `request_concurrency` are
//! distributions over time. guidellm writes 0 where a request lacks a metric (TTFT without streaming); we
//! leave such requests out, so a distribution never mixes measurements with placeholders. A request cancelled
//! in flight (an interrupt, an error limit) is `incomplete`; one cancelled before it was sent (a later turn of a
//! conversation whose turn failed) is left out, as guidellm leaves it out.

use serde_json::{Value, json};

use super::meta::RunMeta;
use super::secs;
use crate::metrics::GuidellmDistribution;
use crate::record::{ErrorClass, RequestRecord};

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

/// One stage as a guidellm `generative_benchmark`.
fn benchmark(meta: &RunMeta, stage: u32, records: &[&RequestRecord]) -> Value {
    let buckets = Buckets::of(records);
    let (ok, errored, incomplete) = (&buckets.ok, &buckets.errored, &buckets.incomplete);
    let at = |ns: u64| meta.unix_s(ns);
    let start_ns = records.iter().map(|r| r.sent_ns).min().unwrap_or(0);
    let end_ns = records.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let first_scheduled_ns = records.iter().map(|r| r.scheduled_ns).min().unwrap_or(0);
    let window = Some((at(start_ns), at(end_ns)));
    let delay_avg = if records.is_empty() {
        -1.0
    } else {
        records
            .iter()
            .map(|r| secs(r.schedule_delay_ns()))
            .sum::<f64>()
            / records.len() as f64
    };
    let stage_meta = meta.stages.get(stage as usize).copied().unwrap_or_default();
    let strategy = match (stage_meta.rate, stage_meta.concurrency) {
        (Some(rate), cap) => json!({ "type_": "constant", "rate": rate, "max_concurrency": cap }),
        (None, Some(streams)) => json!({ "type_": "concurrent", "streams": streams }),
        (None, None) => json!({ "type_": "throughput" }),
    };

    // Output tokens as timed events: each content chunk's tokens at its arrival; without streaming, all at
    // the end. Prompt tokens count when the first token arrives (prefill done), else at the end.
    let output_events = |r: &RequestRecord| -> Vec<(f64, f64)> {
        let chunks: Vec<(f64, f64)> = r
            .chunks
            .iter()
            .filter(|_| r.streaming)
            .filter_map(|c| c.kind.content_tokens().map(|t| (at(c.at_ns), f64::from(t))))
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
        "requests_per_second": rate_status(&buckets, window, |r| vec![(at(r.end_ns), 1.0)]),
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
