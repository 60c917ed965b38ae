//! guidellm's benchmarks report (`GenerativeBenchmarksReport`, `benchmarks.json`): one benchmark per stage, each
//! metric a `StatusDistributionSummary {successful, errored, incomplete, total}` of guidellm's weighted
//! distributions ([`GuidellmDistribution`]), timestamps in epoch seconds.
//!
//! guidellm's definitions: `time_to_first_token_ms` = first token − sent; `inter_token_latency_ms` =
//! (last token − first token)/(n − 1), weighted by n − 1 (vLLM's and inference-perf's TPOT);
//! `time_per_output_token_ms` = (last token − sent)/n, weighted by n; `request_latency` in seconds; rates
//! (`requests_per_second`, `output_tokens_per_second`, `tokens_per_second`) and `request_concurrency` are
//! distributions over time. guidellm writes 0 where a request lacks a metric (TTFT without streaming); we
//! leave such requests out, so a distribution never mixes measurements with placeholders. We never cancel
//! requests, so `incomplete` is always empty.

use serde_json::{Value, json};

use super::meta::RunMeta;
use super::secs;
use crate::metrics::GuidellmDistribution;
use crate::record::RequestRecord;

/// The report's file name (guidellm's `--output-path` default before v0.6).
pub const GUIDELLM_REPORT_FILE: &str = "benchmarks.json";

/// A metric's per-status distributions from (value, weight) pairs of successful and errored requests.
fn status(successful: Vec<(f64, f64)>, errored: Vec<(f64, f64)>) -> Value {
    let total: Vec<(f64, f64)> = successful.iter().chain(&errored).copied().collect();
    json!({
        "successful": GuidellmDistribution::from_weighted(&successful, None),
        "errored": GuidellmDistribution::from_weighted(&errored, None),
        "incomplete": GuidellmDistribution::empty(0),
        "total": GuidellmDistribution::from_weighted(&total, None),
    })
}

/// Like [`status`], built by one function per request (`None` leaves the request out).
fn status_of(
    ok: &[&RequestRecord],
    errored: &[&RequestRecord],
    value: impl Fn(&RequestRecord) -> Option<(f64, f64)>,
) -> Value {
    status(
        ok.iter().filter_map(|r| value(r)).collect(),
        errored.iter().filter_map(|r| value(r)).collect(),
    )
}

/// Rate distributions per status, from per-request events (epoch seconds, weight).
fn rate_status(
    ok: &[&RequestRecord],
    errored: &[&RequestRecord],
    window: Option<(f64, f64)>,
    events: impl Fn(&RequestRecord) -> Vec<(f64, f64)>,
) -> Value {
    let (start, end) = (window.map(|w| w.0), window.map(|w| w.1));
    let ok_events: Vec<(f64, f64)> = ok.iter().flat_map(|r| events(r)).collect();
    let err_events: Vec<(f64, f64)> = errored.iter().flat_map(|r| events(r)).collect();
    let all: Vec<(f64, f64)> = ok_events.iter().chain(&err_events).copied().collect();
    json!({
        "successful": GuidellmDistribution::rate_from_timings(&ok_events, start, end),
        "errored": GuidellmDistribution::rate_from_timings(&err_events, start, end),
        "incomplete": GuidellmDistribution::empty(0),
        "total": GuidellmDistribution::rate_from_timings(&all, start, end),
    })
}

/// One stage as a guidellm `generative_benchmark`.
fn benchmark(meta: &RunMeta, stage: u32, records: &[&RequestRecord]) -> Value {
    let (ok, errored): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
        records.iter().partition(|r| r.succeeded());
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

    let intervals: Vec<(f64, f64)> = records
        .iter()
        .map(|r| (at(r.sent_ns), at(r.end_ns)))
        .collect();
    let ok_intervals: Vec<(f64, f64)> = ok.iter().map(|r| (at(r.sent_ns), at(r.end_ns))).collect();
    let err_intervals: Vec<(f64, f64)> = errored
        .iter()
        .map(|r| (at(r.sent_ns), at(r.end_ns)))
        .collect();

    let metrics = json!({
        "request_totals": {
            "successful": ok.len(), "incomplete": 0, "errored": errored.len(), "total": records.len(),
        },
        "requests_per_second": rate_status(&ok, &errored, window, |r| vec![(at(r.end_ns), 1.0)]),
        "request_concurrency": {
            "successful": GuidellmDistribution::concurrency_from_intervals(&ok_intervals),
            "errored": GuidellmDistribution::concurrency_from_intervals(&err_intervals),
            "incomplete": GuidellmDistribution::empty(0),
            "total": GuidellmDistribution::concurrency_from_intervals(&intervals),
        },
        "request_latency": status_of(&ok, &errored, |r| Some((secs(r.e2e_ns()), 1.0))),
        "prompt_token_count": status_of(&ok, &errored, |r| Some((f64::from(r.prompt_tokens()), 1.0))),
        "output_token_count": status_of(&ok, &errored, |r| Some((f64::from(r.output_tokens()), 1.0))),
        "total_token_count": status_of(&ok, &errored, |r| {
            Some((f64::from(r.prompt_tokens()) + f64::from(r.output_tokens()), 1.0))
        }),
        "time_to_first_token_ms": status_of(&ok, &errored, |r| r.ttft_ns().map(|t| (ms(t), 1.0))),
        "time_per_output_token_ms": status_of(&ok, &errored, |r| {
            r.guidellm_tpot_ns().map(|t| (ms(t), f64::from(r.output_tokens())))
        }),
        "inter_token_latency_ms": status_of(&ok, &errored, |r| {
            r.tpot_ns().map(|t| (ms(t), f64::from(r.output_tokens()) - 1.0))
        }),
        "prompt_tokens_per_second": rate_status(&ok, &errored, None, |r| vec![prompt_event(r)]),
        "output_tokens_per_second": rate_status(&ok, &errored, None, output_events),
        "tokens_per_second": rate_status(&ok, &errored, None, |r| {
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
            "requests_made": {
                "successful": ok.len(), "incomplete": 0, "errored": errored.len(), "total": records.len(),
            },
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
