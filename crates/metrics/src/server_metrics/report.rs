//! Server metrics in other tools' report shapes, built from a [`WindowSummary`] (pure; the caller writes the files):
//!
//! - inference-perf's `stage_N_prometheus_metrics.json` / `summary_prometheus_metrics.json`: the
//!   `ResponsesSummary` that its `reportgen.base.summarize_prometheus_metrics` builds, field for field, each field
//!   from the catalogue key of the vLLM metric its vLLM client (`client/modelserver/vllm_client.py`) declares for it,
//!   so every engine's figure of that key fills it; null where the server has none.
//! - the llm-d benchmark report v0.2's `results.observability`: per-component `ResourceMetrics` statistics and
//!   `time_series` (only the keys v0.2 allows, units from its `Units` enum), plus per-metric entries keyed like
//!   llm-d-benchmark's `metrics_processor.py` (`vllm_num_requests_running: {components, aggregated}`), which the
//!   schema admits as additional properties.

use serde_json::{Map, Value, json};

use super::ServerSeries;
use super::catalogue::{self, Engine};
use super::summary::{Figures, MetricSummary, WindowSummary, find};
use llmbench_model::wallclock;

/// Points per embedded time series (llm-d-benchmark's default `METRICS_TS_MAX_POINTS`).
pub(crate) const LLMD_MAX_TIME_SERIES_POINTS: usize = 256;

/// inference-perf rounds every PromQL result to 6 decimals.
fn r6(value: f64) -> f64 {
    if value.is_finite() {
        (value * 1e6).round() / 1e6
    } else {
        0.0
    }
}

/// `HistogramResult.as_summary()` / `GaugeResult.as_summary()`: `{mean, median, p90, p99}`. A histogram without
/// observations has a mean of 0 (inference-perf's `… / (count > 0)` query returns nothing, read as 0) and, where
/// Prometheus' `histogram_quantile` gives NaN, quantiles of 0 too: JSON has no NaN. A metric the server does not
/// expose has every field null.
fn as_summary(metric: Option<&MetricSummary>) -> Value {
    let (mean, median, p90, p99) = match metric.map(|m| &m.figures) {
        Some(Figures::Gauge {
            mean,
            p50,
            p90,
            p99,
            ..
        }) => (*mean, *p50, *p90, *p99),
        Some(Figures::Histogram {
            mean,
            p50,
            p90,
            p99,
            ..
        }) => (
            *mean,
            p50.unwrap_or(0.0),
            p90.unwrap_or(0.0),
            p99.unwrap_or(0.0),
        ),
        _ => return json!({ "mean": null, "median": null, "p90": null, "p99": null }),
    };
    json!({ "mean": r6(mean), "median": r6(median), "p90": r6(p90), "p99": r6(p99) })
}

/// A counter's window total (`sum(increase(…))`); null when the server does not expose it.
fn total(window: &WindowSummary, key: &str) -> Value {
    match window.aggregate_metric(key).map(|m| &m.figures) {
        Some(Figures::Counter { increase, .. }) => json!(r6(*increase)),
        _ => Value::Null,
    }
}

/// A counter's rate (`sum(rate(…))`); null when the server does not expose it.
fn rate(window: &WindowSummary, key: &str) -> Value {
    match window.aggregate_metric(key).map(|m| &m.figures) {
        Some(Figures::Counter { per_second, .. }) => json!(r6(*per_second)),
        _ => Value::Null,
    }
}

/// A counter's `avg_over_time(rate(…)[d:d])`: inference-perf reads the first series Prometheus returns, one per
/// pod; here, the mean over the targets that have it, which is the same number with one target. Null when none has.
fn avg_rate(window: &WindowSummary, key: &str) -> Value {
    let rates: Vec<f64> = window
        .targets
        .iter()
        .filter_map(|t| match find(&t.metrics, key).map(|m| &m.figures) {
            Some(Figures::Counter { per_second, .. }) => Some(*per_second),
            _ => None,
        })
        .collect();
    if rates.is_empty() {
        Value::Null
    } else {
        json!(r6(rates.iter().sum::<f64>() / rates.len() as f64))
    }
}

/// A gauge's `avg_over_time`; null when the server does not expose it.
fn gauge_mean(window: &WindowSummary, key: &str) -> Value {
    match window.aggregate_metric(key).map(|m| &m.figures) {
        Some(Figures::Gauge { mean, .. }) => json!(r6(*mean)),
        _ => Value::Null,
    }
}

/// `_ratio(hits.total, queries.total)`: percent, 0 without queries; null when the server counts neither.
fn ratio(window: &WindowSummary, key: &str) -> Value {
    match window.aggregate_metric(key).map(|m| &m.figures) {
        Some(Figures::Ratio { percent }) => json!(r6(*percent)),
        _ => Value::Null,
    }
}

/// The content of inference-perf's `stage_N_prometheus_metrics.json` (or `summary_prometheus_metrics.json` for the
/// whole run) for `window`, from its aggregate over targets, whichever engine the targets are (the fields are read
/// by catalogue key, so llama.cpp's, SGLang's or TGI's figures fill the same fields as vLLM's).
///
/// Where this differs from what inference-perf would write, and why:
/// - a metric the server does not expose is null. inference-perf writes 0 for it (its `ModelServerMetrics`
///   defaults, and `_ratio` of two missing counters), the same as a measured 0: its SGLang and TGI clients query no
///   prefix-cache counters, so it reports a 0 % hit rate for them whatever the cache did.
/// - inference-perf's stage queries end a scrape interval plus 2 s after the stage and extrapolate `increase()` to
///   the range's edges; these figures use the window rules of [`summary`](super::summary).
/// - gauges over several pods: inference-perf keeps whichever pod Prometheus lists first; this uses the aggregate
///   (running and waiting summed, cache usage averaged).
/// - its vLLM client selects `vllm:prompt_tokens` and `vllm:generation_tokens` without the `_total` that vLLM
///   exposes; these are matched with or without it, as its `(_total)?` selectors do for the other counters.
/// - `num_requests_swapped`: inference-perf has no source for it and always writes 0; here the mean of the `swapped`
///   gauge (vLLM v0's `vllm:num_requests_swapped`), null when the server has none.
/// - `prompt_len` and `output_len` are tokens per second whatever the engine; its TGI client reads request-length
///   histograms there (a mean length and a request rate).
pub fn inference_perf_prometheus_metrics(window: &WindowSummary) -> Value {
    let hist = |key: &str| as_summary(window.aggregate_metric(key));
    json!({
        "benchmark_time_seconds": 0.0,
        "load_summary": {},
        "successes": {
            "count": total(window, "requests_finished"),
            "rate": rate(window, "requests_finished"),
            "prompt_len": {
                "mean": avg_rate(window, "prompt_tokens"),
                "rate": rate(window, "prompt_tokens"),
            },
            "output_len": {
                "mean": avg_rate(window, "generation_tokens"),
                "rate": rate(window, "generation_tokens"),
            },
            "queue_len": { "mean": gauge_mean(window, "waiting") },
            "request_latency": hist("e2e"),
            "time_to_first_token": hist("ttft"),
            "time_per_output_token": hist("tpot"),
            "kv_cache_usage_percentage": hist("kv_cache_usage"),
            "num_requests_swapped": { "mean": gauge_mean(window, "swapped") },
            "num_preemptions_total": { "mean": total(window, "preemptions") },
            "prefix_cache_hit_percent": { "mean": ratio(window, "prefix_cache_hit_rate") },
            "inter_token_latency": hist("itl"),
            "num_requests_running": { "mean": gauge_mean(window, "running") },
            "request_queue_time": hist("queue_time"),
            "request_inference_time": hist("inference_time"),
            "request_prefill_time": hist("prefill_time"),
            "request_decode_time": hist("decode_time"),
            "request_prompt_tokens": hist("request_prompt_tokens"),
            "request_generation_tokens": hist("request_generation_tokens"),
            "request_max_num_generation_tokens": hist("request_max_generation_tokens"),
            "request_params_n": hist("request_n"),
            "request_params_max_tokens": hist("request_max_tokens"),
            "request_success_count": total(window, "requests_finished"),
            "iteration_tokens": hist("iteration_tokens"),
            "prompt_tokens_cached": total(window, "prompt_tokens_cached"),
            "external_prefix_cache_hit_percent": { "mean": ratio(window, "external_prefix_cache_hit_rate") },
            "mm_cache_hit_percent": { "mean": ratio(window, "mm_cache_hit_rate") },
            "corrupted_requests": total(window, "corrupted_requests"),
            "request_prefill_kv_computed_tokens": hist("prefill_kv_computed_tokens"),
            "kv_block_idle_before_evict": hist("kv_block_idle_before_evict"),
            "kv_block_lifetime": hist("kv_block_lifetime"),
            "kv_block_reuse_gap": hist("kv_block_reuse_gap"),
        },
        "failures": {},
    })
}

/// A v0.2 `Statistics` object of `metric` in `units` (one of the schema's `Units`): a gauge's figures, a counter's
/// increase over the window, a ratio's percent.
fn statistics(metric: &MetricSummary, units: &str) -> Option<Value> {
    let finite = |v: f64| v.is_finite().then_some(v);
    match &metric.figures {
        Figures::Gauge {
            mean,
            min,
            max,
            p50,
            p90,
            p99,
            ..
        } => Some(json!({
            "units": units, "mean": finite(*mean)?, "min": finite(*min)?, "p50": finite(*p50)?,
            "p90": finite(*p90)?, "p99": finite(*p99)?, "max": finite(*max)?,
        })),
        Figures::Counter { increase, .. } => {
            Some(json!({ "units": units, "mean": finite(*increase)? }))
        }
        Figures::Ratio { percent } => Some(json!({ "units": units, "mean": finite(*percent)? })),
        Figures::Histogram {
            mean,
            p50,
            p90,
            p99,
            ..
        } => {
            let mut stats = json!({ "units": units, "mean": finite(*mean)? });
            for (name, value) in [("p50", p50), ("p90", p90), ("p99", p99)] {
                if let Some(value) = value.and_then(finite) {
                    stats[name] = json!(value);
                }
            }
            Some(stats)
        }
    }
}

/// `ResourceMetrics` fields: (field, catalogue key, units). vLLM v0's `gpu_cache_usage_perc` is the same figure as
/// `kv_cache_usage` and is reported as that.
const RESOURCE_METRICS: [(&str, &str, &str); 7] = [
    ("kv_cache_usage", "kv_cache_usage", "fraction"),
    ("cpu_cache_usage", "cpu_cache_usage", "fraction"),
    ("cache_hit_rate", "prefix_cache_hit_rate", "percent"),
    ("running_requests", "running", "count"),
    ("waiting_requests", "waiting", "count"),
    ("swapped_requests", "swapped", "count"),
    ("preemptions", "preemptions", "count"),
];

/// v0.2 `TimeSeriesResourceMetrics` fields we have series for: (field, catalogue key, units).
const TIME_SERIES: [(&str, &str, &str); 1] = [("kv_cache_usage", "kv_cache_usage", "fraction")];

/// Per-metric entries as llm-d-benchmark's `metrics_processor.py` names them: (report key, catalogue key, units,
/// engine, the key whose name says which engine a target's figure came by). It reads vLLM's and the EPP's series
/// only, so an entry is filled from a target only when that key came by a name of that engine (the hit rates by
/// their queries counter): never another engine's figure under a vLLM name.
const PER_METRIC: [(&str, &str, &str, Engine, &str); 12] = [
    (
        "vllm_kv_cache_usage_perc",
        "kv_cache_usage",
        "fraction",
        Engine::Vllm,
        "kv_cache_usage",
    ),
    (
        "vllm_num_requests_running",
        "running",
        "count",
        Engine::Vllm,
        "running",
    ),
    (
        "vllm_num_requests_waiting",
        "waiting",
        "count",
        Engine::Vllm,
        "waiting",
    ),
    (
        "vllm_num_preemptions_total",
        "preemptions",
        "count",
        Engine::Vllm,
        "preemptions",
    ),
    (
        "vllm_prefix_cache_hits_total",
        "prefix_cache_hits",
        "count",
        Engine::Vllm,
        "prefix_cache_hits",
    ),
    (
        "vllm_prefix_cache_queries_total",
        "prefix_cache_queries",
        "count",
        Engine::Vllm,
        "prefix_cache_queries",
    ),
    (
        "vllm_prefix_cache_hit_rate",
        "prefix_cache_hit_rate",
        "percent",
        Engine::Vllm,
        "prefix_cache_queries",
    ),
    (
        "vllm_external_prefix_cache_hit_rate",
        "external_prefix_cache_hit_rate",
        "percent",
        Engine::Vllm,
        "external_prefix_cache_queries",
    ),
    (
        "epp_pool_avg_kv_cache_utilization",
        "pool_kv_cache_usage",
        "fraction",
        Engine::LlmdEpp,
        "pool_kv_cache_usage",
    ),
    (
        "epp_pool_avg_queue_size",
        "pool_queue_size",
        "count",
        Engine::LlmdEpp,
        "pool_queue_size",
    ),
    (
        "epp_pool_avg_running_requests",
        "pool_running",
        "count",
        Engine::LlmdEpp,
        "pool_running",
    ),
    (
        "epp_pool_ready_pods",
        "pool_ready_pods",
        "count",
        Engine::LlmdEpp,
        "pool_ready_pods",
    ),
];

/// The component a target is, from what it exposes: an inference engine (vLLM, SGLang, llama.cpp, …), the llm-d
/// router's endpoint picker, or else a server.
fn component_label(metrics: &[MetricSummary]) -> &'static str {
    let engines: Vec<Engine> = metrics
        .iter()
        .filter(|m| m.key.is_some())
        .filter_map(|m| catalogue::engine_of(&m.name))
        .collect();
    if engines.iter().any(|e| *e != Engine::LlmdEpp) {
        "inference-engine"
    } else if engines.contains(&Engine::LlmdEpp) {
        "epp"
    } else {
        "server"
    }
}

/// `points` inside `[start, end]` as v0.2 `TimeSeriesPoint`s, at most `max` of them (evenly spaced).
fn time_series_points(
    points: &[(f64, f64)],
    start: f64,
    end: f64,
    t0_unix_ns: u64,
    max: usize,
) -> Vec<Value> {
    let inside: Vec<&(f64, f64)> = points
        .iter()
        .filter(|(t, v)| *t >= start && *t <= end && v.is_finite())
        .collect();
    let step = inside.len().div_ceil(max.max(1)).max(1);
    inside
        .into_iter()
        .step_by(step)
        .map(|(t, v)| {
            // A run's clock starts at t0; a scrape just before it is still after 1970.
            let ns = (t * 1e9).round();
            let unix_ns = if ns >= 0.0 {
                t0_unix_ns.saturating_add(ns as u64)
            } else {
                t0_unix_ns.saturating_sub((-ns) as u64)
            };
            json!({ "ts": wallclock::rfc3339_millis(unix_ns), "value": v })
        })
        .collect()
}

/// The llm-d benchmark report v0.2 `results.observability` for `window`: one component per target (its URL as
/// `replica_id`) with `aggregate` statistics and the KV-cache `time_series` from `series` (clipped to the window;
/// `t0_unix_ns` is the wall clock at the run's t0, to write ISO-8601 timestamps), plus llm-d-benchmark's
/// per-metric entries. Cache usage is reported as the fraction vLLM exposes (`fraction`, not `percent`).
pub fn llmd_observability(
    window: &WindowSummary,
    series: &[ServerSeries],
    t0_unix_ns: u64,
) -> Value {
    let mut components = Vec::new();
    let mut per_metric: Map<String, Value> = Map::new();
    for target in &window.targets {
        let label = component_label(&target.metrics);
        let mut aggregate = Map::new();
        for (field, key, units) in RESOURCE_METRICS {
            if let Some(stats) = find(&target.metrics, key).and_then(|m| statistics(m, units)) {
                aggregate.insert(field.to_owned(), stats);
            }
        }
        let mut time_series = Map::new();
        for (field, key, units) in TIME_SERIES {
            // The series is labelled with the name the target's figure came by.
            let Some(name) = find(&target.metrics, key).map(|m| &m.name) else {
                continue;
            };
            let Some(line) = series
                .iter()
                .find(|s| s.target == target.url && &s.metric == name)
            else {
                continue;
            };
            let points = time_series_points(
                &line.points,
                window.start_s,
                window.end_s,
                t0_unix_ns,
                LLMD_MAX_TIME_SERIES_POINTS,
            );
            if !points.is_empty() {
                time_series.insert(
                    field.to_owned(),
                    json!({ "units": units, "series": points }),
                );
            }
        }
        for (report_key, key, units, engine, named_by) in PER_METRIC {
            let by_engine = find(&target.metrics, named_by)
                .is_some_and(|m| catalogue::engine_of(&m.name) == Some(engine));
            let Some(stats) = find(&target.metrics, key)
                .filter(|_| by_engine)
                .and_then(|m| statistics(m, units))
            else {
                continue;
            };
            let entry = per_metric
                .entry(report_key.to_owned())
                .or_insert_with(|| json!({ "components": [] }));
            if let Some(list) = entry["components"].as_array_mut() {
                list.push(json!({
                    "component_id": label,
                    "pod": target.url,
                    "role": "replica",
                    "statistics": stats,
                }));
            }
        }
        if aggregate.is_empty() && time_series.is_empty() {
            continue;
        }
        let mut component = json!({ "component_label": label, "replica_id": target.url });
        if !aggregate.is_empty() {
            component["aggregate"] = Value::Object(aggregate);
        }
        if !time_series.is_empty() {
            component["time_series"] = Value::Object(time_series);
        }
        components.push(component);
    }
    for (report_key, key, units, _, _) in PER_METRIC {
        if let Some(entry) = per_metric.get_mut(report_key)
            && let Some(stats) = window
                .aggregate_metric(key)
                .and_then(|m| statistics(m, units))
        {
            entry["aggregated"] = stats;
        }
    }
    let scope = if window.stage.is_some() {
        "stage"
    } else {
        "run"
    };
    let at = |t: f64| {
        let ns = (t.max(0.0) * 1e9).round() as u64;
        wallclock::rfc3339_millis(t0_unix_ns.saturating_add(ns))
    };
    let mut observability = Map::new();
    if !components.is_empty() {
        observability.insert("components".to_owned(), Value::Array(components));
    }
    observability.extend(per_metric);
    observability.insert(
        "time_series_interval".to_owned(),
        json!({ "scope": scope, "start": at(window.start_s), "end": at(window.end_s), "statistics_scope": scope }),
    );
    Value::Object(observability)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::server_metrics::jsonl::Scrape;
    use crate::server_metrics::parse::parse_page;
    use crate::server_metrics::summary::{StageWindow, Window, summarize};

    fn scrape(target: &str, t: f64, text: &str) -> Scrape {
        let page = parse_page(text, 10_000);
        assert_eq!(page.warning(), None);
        Scrape {
            t_s: t,
            target: target.to_owned(),
            ok: true,
            scrape_ms: Some(1.0),
            error: None,
            types: page.types,
            samples: page.samples,
            truncated: None,
        }
    }

    /// A vLLM page after `n` requests, each with 100 prompt tokens, 10 output tokens, TTFT 0.3 s, TPOT 0.1 s, e2e
    /// 1.2 s.
    fn vllm_page(n: f64, running: f64, usage: f64) -> String {
        let mut text = format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {running}\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 1\n\
             # TYPE vllm:num_requests_swapped gauge\nvllm:num_requests_swapped{{model_name=\"m\"}} 0\n\
             # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{model_name=\"m\"}} {usage}\n\
             # TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{{model_name=\"m\"}} {}\n\
             # TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{{model_name=\"m\"}} {}\n\
             # TYPE vllm:request_success counter\nvllm:request_success_total{{finished_reason=\"length\"}} {n}\n\
             # TYPE vllm:num_preemptions counter\nvllm:num_preemptions_total 0\n\
             # TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total {}\n\
             # TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {}\n",
            100.0 * n,
            10.0 * n,
            100.0 * n,
            25.0 * n,
        );
        for (name, value) in [
            ("vllm:time_to_first_token_seconds", 0.3),
            ("vllm:request_time_per_output_token_seconds", 0.1),
            ("vllm:e2e_request_latency_seconds", 1.2),
        ] {
            text.push_str(&format!("# TYPE {name} histogram\n"));
            for le in ["0.1", "0.5", "1.0", "2.5", "+Inf"] {
                let bound: f64 = crate::server_metrics::parse::parse_value(le).unwrap();
                let count = if value <= bound { n } else { 0.0 };
                text.push_str(&format!("{name}_bucket{{le=\"{le}\"}} {count}\n"));
            }
            text.push_str(&format!("{name}_sum {}\n{name}_count {n}\n", value * n));
        }
        text
    }

    fn window() -> (WindowSummary, Vec<ServerSeries>) {
        let target = "http://10.0.0.5:8000/metrics";
        let scrapes = vec![
            scrape(target, 0.0, &vllm_page(0.0, 0.0, 0.0)),
            scrape(target, 1.0, &vllm_page(4.0, 4.0, 0.2)),
            scrape(target, 2.0, &vllm_page(10.0, 6.0, 0.4)),
        ];
        let summary = summarize(
            scrapes.clone(),
            Duration::from_secs(1),
            Window {
                start_s: 0.0,
                end_s: 2.0,
            },
            &[StageWindow {
                stage: 0,
                start_s: 0.0,
                end_s: 2.0,
                began_s: None,
            }],
            None,
        );
        let series = crate::server_metrics::plot_series(scrapes);
        (summary.stages[0].clone(), series)
    }

    #[test]
    fn inference_perf_file_has_every_key_of_summarize_prometheus_metrics() {
        let (window, _) = window();
        let report = inference_perf_prometheus_metrics(&window);
        let successes = &report["successes"];
        // 10 requests in 2 s.
        assert_eq!(successes["count"], 10.0);
        assert_eq!(successes["rate"], 5.0);
        assert_eq!(successes["request_success_count"], 10.0);
        // 1000 prompt tokens in 2 s; one target, so the mean rate is the rate.
        assert_eq!(
            successes["prompt_len"],
            json!({"mean": 500.0, "rate": 500.0})
        );
        assert_eq!(successes["output_len"], json!({"mean": 50.0, "rate": 50.0}));
        // Waiting is 1 in all three scrapes; running 0, 4, 6.
        assert_eq!(successes["queue_len"], json!({"mean": 1.0}));
        assert_eq!(successes["num_requests_running"], json!({"mean": 3.333333}));
        // Every e2e observation is 1.2 s, in (1, 2.5]: mean 1.2; p50 = 1 + 5/10 · 1.5 = 1.75.
        assert_eq!(
            successes["request_latency"],
            json!({"mean": 1.2, "median": 1.75, "p90": 2.35, "p99": 2.485})
        );
        // TTFT 0.3 s in (0.1, 0.5]: p50 = 0.1 + 0.5 · 0.4 = 0.3.
        assert_eq!(successes["time_to_first_token"]["median"], 0.3);
        // Usage 0, 0.2, 0.4 → mean 0.2, median 0.2, p90 = 0.2 + 0.8 · 0.2 = 0.36.
        assert_eq!(
            successes["kv_cache_usage_percentage"],
            json!({"mean": 0.2, "median": 0.2, "p90": 0.36, "p99": 0.396})
        );
        assert_eq!(successes["prefix_cache_hit_percent"], json!({"mean": 25.0}));
        assert_eq!(successes["num_preemptions_total"], json!({"mean": 0.0}));
        assert_eq!(successes["num_requests_swapped"], json!({"mean": 0.0}));
        // Every TPOT observation is 0.1 s.
        assert_eq!(successes["time_per_output_token"]["mean"], 0.1);
        // Absent on this server: null, not inference-perf's indistinguishable zeros.
        assert_eq!(
            successes["iteration_tokens"],
            json!({"mean": null, "median": null, "p90": null, "p99": null})
        );
        assert_eq!(successes["prompt_tokens_cached"], Value::Null);
        assert_eq!(
            successes["external_prefix_cache_hit_percent"],
            json!({"mean": null})
        );
        let keys: Vec<&str> = successes
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "count",
                "rate",
                "prompt_len",
                "output_len",
                "queue_len",
                "request_latency",
                "time_to_first_token",
                "time_per_output_token",
                "kv_cache_usage_percentage",
                "num_requests_swapped",
                "num_preemptions_total",
                "prefix_cache_hit_percent",
                "inter_token_latency",
                "num_requests_running",
                "request_queue_time",
                "request_inference_time",
                "request_prefill_time",
                "request_decode_time",
                "request_prompt_tokens",
                "request_generation_tokens",
                "request_max_num_generation_tokens",
                "request_params_n",
                "request_params_max_tokens",
                "request_success_count",
                "iteration_tokens",
                "prompt_tokens_cached",
                "external_prefix_cache_hit_percent",
                "mm_cache_hit_percent",
                "corrupted_requests",
                "request_prefill_kv_computed_tokens",
                "kv_block_idle_before_evict",
                "kv_block_lifetime",
                "kv_block_reuse_gap",
            ]
        );
        let top: Vec<&str> = report
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            top,
            [
                "benchmark_time_seconds",
                "load_summary",
                "successes",
                "failures"
            ]
        );
    }

    /// inference-perf's shipped demo (an older release, a subset of today's keys): every key it has, we have, with a
    /// value of the same JSON type.
    #[test]
    fn inference_perf_file_covers_the_shipped_demo_file() {
        let demo: Value = serde_json::from_str(
            r#"{"load_summary": {}, "successes": {"count": 1140, "rate": 14.430483, "prompt_len": {"mean": 4936, "rate": 2287.583082}, "output_len": {"mean": 1551, "rate": 787.517372}, "queue_len": {"mean": 0}, "request_latency": {"mean": 2.574876, "median": 3.079515, "p90": 4.615903, "p99": 4.96159}, "time_to_first_token": {"mean": 1.260105, "median": 1.151869, "p90": 3.604037, "p99": 4.860404}, "time_per_output_token": {"mean": 0.01592, "median": 0.01, "p90": 0.023052, "p99": 0.179045}, "kv_cache_usage_percentage": {"mean": 0.0, "median": 0.0, "p90": 0.0, "p99": 0.0}, "num_requests_swapped": {"mean": 0}, "num_preemptions_total": {"mean": 0}, "prefix_cache_hit_percent": {"mean": 0.0}}, "failures": {}}"#,
        )
        .unwrap();
        let (window, _) = window();
        let ours = inference_perf_prometheus_metrics(&window);
        fn same_shape(path: &str, theirs: &Value, ours: &Value) {
            match (theirs, ours) {
                (Value::Object(theirs), Value::Object(ours)) => {
                    for (key, value) in theirs {
                        let Some(mine) = ours.get(key) else {
                            panic!("{path}.{key} missing");
                        };
                        same_shape(&format!("{path}.{key}"), value, mine);
                    }
                }
                (Value::Number(_), Value::Number(_)) => {}
                (theirs, ours) => panic!("{path}: {theirs} vs {ours}"),
            }
        }
        same_shape("", &demo, &ours);
    }

    fn schema_validator() -> jsonschema::Validator {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/llm-d-benchmark/benchmark_report/br_v0_2_json_schema.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let schema: Value = serde_json::from_str(&text).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    }

    fn minimal_report(observability: Value) -> Value {
        json!({
            "version": "0.2",
            "run": { "uid": "run-1" },
            "results": { "observability": observability },
        })
    }

    #[test]
    fn llmd_observability_validates_against_the_v0_2_schema() {
        let (window, series) = window();
        let t0 = 1_795_000_000_000_000_000u64;
        let observability = llmd_observability(&window, &series, t0);
        let validator = schema_validator();
        let report = minimal_report(observability.clone());
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert_eq!(errors, Vec::<String>::new(), "{observability:#}");

        let component = &observability["components"][0];
        assert_eq!(component["component_label"], "inference-engine");
        assert_eq!(component["replica_id"], "http://10.0.0.5:8000/metrics");
        let aggregate = &component["aggregate"];
        let kv = &aggregate["kv_cache_usage"];
        assert_eq!(kv["units"], "fraction");
        // Usage 0, 0.2, 0.4: mean 0.2, p90 = 0.2 + 0.8 · 0.2 = 0.36.
        for (field, expected) in [
            ("mean", 0.2),
            ("min", 0.0),
            ("p50", 0.2),
            ("p90", 0.36),
            ("p99", 0.396),
            ("max", 0.4),
        ] {
            let value = kv[field].as_f64().unwrap();
            assert!((value - expected).abs() < 1e-9, "{field}: {value}");
        }
        assert_eq!(aggregate["running_requests"]["units"], "count");
        assert_eq!(
            aggregate["preemptions"],
            json!({"units": "count", "mean": 0.0})
        );
        assert_eq!(
            aggregate["cache_hit_rate"],
            json!({"units": "percent", "mean": 25.0})
        );
        let points = component["time_series"]["kv_cache_usage"]["series"]
            .as_array()
            .unwrap();
        assert_eq!(points.len(), 3);
        assert_eq!(
            points[1]["ts"],
            wallclock::rfc3339_millis(t0 + 1_000_000_000)
        );
        assert_eq!(points[2]["value"], 0.4);
        let running = &observability["vllm_num_requests_running"];
        assert_eq!(
            running["components"][0]["pod"],
            "http://10.0.0.5:8000/metrics"
        );
        assert_eq!(running["aggregated"]["units"], "count");
        assert_eq!(observability["time_series_interval"]["scope"], "stage");

        // The check has teeth: a unit outside the enum, or a time-series key v0.2 does not allow, is rejected.
        let mut bad = report.clone();
        bad["results"]["observability"]["components"][0]["aggregate"]["kv_cache_usage"]["units"] =
            json!("ratio");
        assert!(!validator.is_valid(&bad));
        let mut bad = report;
        bad["results"]["observability"]["components"][0]["time_series"]["num_requests_running"] =
            json!({"units": "count", "series": []});
        assert!(!validator.is_valid(&bad));
    }

    #[test]
    fn epp_targets_are_labelled_and_get_pool_entries() {
        let target = "http://epp:9090/metrics";
        let page = |kv: f64| {
            format!(
                "# TYPE inference_pool_average_kv_cache_utilization gauge\n\
                 inference_pool_average_kv_cache_utilization{{name=\"pool\"}} {kv}\n\
                 # TYPE inference_pool_ready_pods gauge\ninference_pool_ready_pods{{name=\"pool\"}} 2\n"
            )
        };
        let scrapes = vec![
            scrape(target, 0.0, &page(0.1)),
            scrape(target, 1.0, &page(0.3)),
        ];
        let summary = summarize(
            scrapes,
            Duration::from_secs(1),
            Window {
                start_s: 0.0,
                end_s: 1.0,
            },
            &[],
            None,
        );
        let observability = llmd_observability(&summary.overall, &[], 0);
        // No ResourceMetrics of its own: no component, but the per-metric entries.
        assert_eq!(observability.get("components"), None);
        let kv = &observability["epp_pool_avg_kv_cache_utilization"];
        assert_eq!(kv["components"][0]["component_id"], "epp");
        assert!((kv["aggregated"]["mean"].as_f64().unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(
            observability["epp_pool_ready_pods"]["aggregated"]["mean"],
            2.0
        );
        assert!(schema_validator().is_valid(&minimal_report(observability)));
    }
}
