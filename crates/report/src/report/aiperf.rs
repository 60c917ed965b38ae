//! AIPerf 0.13's aggregate export, `profile_export_aiperf.json` (the file llm-d-benchmark's
//! `aiperf-analyze_results.sh` converts into its benchmark report) and its CSV twin. Only what the records can fill
//! is written, each metric under AIPerf's tag, unit and header. Its samples live in a [`FloatStore`], so a run
//! summarised from disk (past `--records-memory`) writes the same export as one held in memory.
//!
//! Upstream (aiperf 0.13.0): `exporters/metrics_json_exporter.py` (the file: `schema_version` "1.4", the metrics,
//! `was_cancelled`, `is_complete`, `error_summary`, `start_time`/`end_time`, `warmup_metrics`),
//! `common/models/export_models.py` `JsonExportData` / `JsonMetricResult` (`unit`, `avg`, `p1` … `p99`, `min`,
//! `max`, `std`, and `count` and `sum` for the per-request metrics), `metrics/metric_dicts.py`
//! (`metric_result_from_array`: numpy's linear percentiles, population std; `observation_duration`),
//! `metrics/accumulator.py` and the metric classes in `metrics/types/`.
//!
//! - Per-request metrics (over the phase's valid requests): every one `profile_export.jsonl` carries, taken from
//!   [`record_metrics`] itself — `request_latency`, `time_to_first_token`, `time_to_second_token`,
//!   `time_to_first_output_token`, `inter_token_latency`, `inter_chunk_latency` (every gap of every request),
//!   `decode_duration`, `input_sequence_length`, `output_sequence_length`, `output_token_count`,
//!   `reasoning_token_count`, `usage_prompt_tokens`/`usage_completion_tokens`/`usage_total_tokens`,
//!   `e2e_output_token_throughput`, `prefill_throughput_per_user`, `output_token_throughput_per_user`,
//!   `osl_mismatch_diff_pct` — and `credit_to_start_latency` (`derived_latency.py`: send − credit issued, i.e.
//!   llmbench's `sent_ns − scheduled_ns`, over every request, failed ones included). With failed requests, the
//!   `adj_*` twins of the metrics flagged `PERCENTILE_INCLUDES_FAILED_REQUESTS` (see [`adjusted`]).
//! - Totals (`DerivedSumMetric`, written when some request had the metric): `total_isl`, `total_osl`,
//!   `total_output_tokens`, `total_reasoning_tokens`, `total_usage_prompt_tokens`/`_completion_`/`_total_tokens`.
//! - Counts: `request_count`, `error_request_count` and `context_overflow_count` (with errors; see
//!   [`context_overflow`]), `completed_request_count` (both),
//!   `request_error_rate` (100 × errors / both), `osl_mismatch_count` (requests whose output is more than
//!   `min(max_tokens × 5 %, 50)` tokens off, 0.13's `Environment.METRICS` defaults).
//! - Rates over `observation_duration`: the phase's window (the stage's start — the profiling phase's, after the
//!   warm-up — to its end, once the last request returned: AIPerf's phase `start_ns` and `requests_end_ns`), or
//!   `benchmark_duration` (first send − last response of the valid requests) when the run's meta has no end:
//!   `request_throughput`, `output_token_throughput`, `input_token_throughput`, `total_token_throughput`,
//!   `goodput`. `benchmark_duration` itself stays first send → last response.
//! - With `--goodput`: `good_request_count`, `goodput`, `good_request_fraction` (good over valid + failed).
//!
//! `usage_*_diff_pct` and `usage_discrepancy_count` are not written: llmbench's token counts are the server's
//! `usage`, as with AIPerf's `--use-server-token-count`, which turns those `USAGE_DIFF_ONLY` metrics off (a real
//! 0.13 run with that flag writes none). An embeddings run (AIPerf's `produces_tokens: false`) has none of the
//! `PRODUCES_TOKENS_ONLY` metrics.
//!
//! `profile_export_aiperf.csv` is the same export as AIPerf's `MetricsCsvExporter` lays it out: the metrics with
//! percentiles first (`Metric,avg,min,max,sum,p1,…,p99,std`, one row per metric sorted by tag), a blank row, then
//! the single-valued ones (`Metric,Value`, sorted by tag); a metric is named by its class's `header` and display
//! unit (`Request Latency (ms)`; no unit for `requests` and `count`), every number `%.2f`, lines end in CRLF as
//! Python's `csv.writer` ends them.
//!
//! A request cancelled in flight (the end of `--benchmark-grace-period` cut it) is left out altogether, as AIPerf's
//! `RecordsManager._should_include_request_by_duration` leaves out a request that answered after the grace period.
//! The warm-up requests (records flagged `warmup`) make `warmup_metrics`, the same metrics over the warm-up phase's
//! window (its first credit to the profiling phase's start).
//!
//! Left out, with nothing behind them in llmbench: the time-weighted sweeps (`effective_*`, `active_*`,
//! `tokens_in_flight`, `effective_latency`), the `http_req_*` trace metrics (llmbench does not time connect, send
//! and headers apart), `aiperf_version`, `benchmark_id`,
//! `run_info`, `input_config` and `telemetry_data`. `start_time`/`end_time` are UTC where AIPerf writes the
//! machine's local time. An answer llmbench counts as cut short is a valid record here: AIPerf has no such failure.

use std::collections::BTreeMap;
use std::io;

use serde_json::{Map, Value, json};

use super::aiperf_records::{aiperf_good, aiperf_times, error_details, record_metrics};
use super::meta::{RunMeta, RunState, Slo};
use super::sample::{FloatStore, SampleId};
use llmbench_core::calendar::civil_from_unix;
use llmbench_model::record::{ErrorClass, RequestRecord};

/// The file AIPerf writes into its `--output-artifact-dir`.
pub(crate) const AIPERF_JSON_FILE: &str = "profile_export_aiperf.json";
/// Its CSV twin, beside it.
pub(crate) const AIPERF_CSV_FILE: &str = "profile_export_aiperf.csv";

/// AIPerf's `STAT_KEYS` (`aiperf/common/constants.py`), the columns of the CSV's first section.
const STAT_KEYS: [&str; 14] = [
    "avg", "min", "max", "sum", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
];

/// The `header` of each metric class this export writes (`aiperf/metrics/types/*.py`).
fn header(tag: &str) -> Option<&'static str> {
    Some(match tag {
        "request_latency" => "Request Latency",
        "request_count" => "Request Count",
        "time_to_first_token" => "Time to First Token",
        "time_to_second_token" => "Time to Second Token",
        "time_to_first_output_token" => "Time to First Output Token",
        "reasoning_token_count" => "Reasoning Token Count",
        "inter_token_latency" => "Inter Token Latency",
        "inter_chunk_latency" => "Inter Chunk Latency",
        "decode_duration" => "Decode Duration",
        "credit_to_start_latency" => "Credit-to-Start Latency",
        "output_token_throughput" => "Output Token Throughput",
        "output_token_throughput_per_user" => "Output Token Throughput Per User",
        "e2e_output_token_throughput" => "E2E Output Token Throughput",
        "prefill_throughput_per_user" => "Prefill Throughput Per User",
        "input_token_throughput" => "Input Token Throughput",
        "total_token_throughput" => "Total Token Throughput",
        "output_sequence_length" => "Output Sequence Length",
        "input_sequence_length" => "Input Sequence Length",
        "output_token_count" => "Output Token Count",
        "usage_prompt_tokens" => "Usage Prompt Tokens",
        "usage_completion_tokens" => "Usage Completion Tokens",
        "usage_total_tokens" => "Usage Total Tokens",
        "osl_mismatch_diff_pct" => "OSL Mismatch Diff %",
        "osl_mismatch_count" => "OSL Mismatch Count",
        "benchmark_duration" => "Benchmark Duration",
        "good_request_count" => "Good Request Count",
        "good_request_fraction" => "GoodRequestFraction",
        "goodput" => "Goodput",
        "total_osl" => "Total Output Sequence Length",
        "total_isl" => "Total Input Sequence Length",
        "total_output_tokens" => "Total Output Tokens",
        "total_reasoning_tokens" => "Total Reasoning Tokens",
        "total_usage_prompt_tokens" => "Total Usage Prompt Tokens",
        "total_usage_completion_tokens" => "Total Usage Completion Tokens",
        "total_usage_total_tokens" => "Total Usage Total Tokens",
        "error_request_count" => "Error Request Count",
        "context_overflow_count" => "Context Overflow Count",
        "completed_request_count" => "Completed Requests (Success + Error)",
        "request_error_rate" => "Request Error Rate",
        "request_throughput" => "Request Throughput",
        "adj_request_latency" => "Request Latency (error-adjusted)",
        "adj_time_to_first_token" => "Time to First Token (error-adjusted)",
        "adj_inter_token_latency" => "Inter Token Latency (error-adjusted)",
        "adj_decode_duration" => "Decode Duration (error-adjusted)",
        _ => return None,
    })
}

/// `export` (from [`aiperf_export`]) as AIPerf's CSV export.
pub(crate) fn aiperf_csv(export: &Value) -> String {
    let Some(metrics) = export.as_object() else {
        return String::new();
    };
    // Tag order, as `sorted(records.items())`; the map is a BTreeMap unless serde_json preserves order, so sort.
    let mut tags: Vec<(&String, &Value)> = metrics
        .iter()
        .filter(|(tag, value)| header(tag).is_some() && value.is_object())
        .collect();
    tags.sort_by(|a, b| a.0.cmp(b.0));
    let has_percentiles = |v: &Value| {
        STAT_KEYS
            .iter()
            .any(|k| k.starts_with('p') && v.get(*k).is_some())
    };
    let name = |tag: &str, v: &Value| {
        let header = header(tag).unwrap_or_default();
        match v.get("unit").and_then(Value::as_str) {
            Some(unit) if !matches!(unit.to_lowercase().as_str(), "count" | "requests") => {
                format!("{header} ({unit})")
            }
            _ => header.to_owned(),
        }
    };
    let number = |v: Option<&Value>| {
        v.and_then(Value::as_f64)
            .map_or(String::new(), |x| format!("{x:.2}"))
    };
    let mut lines: Vec<String> = Vec::new();
    let request: Vec<_> = tags.iter().filter(|(_, v)| has_percentiles(v)).collect();
    let system: Vec<_> = tags.iter().filter(|(_, v)| !has_percentiles(v)).collect();
    if !request.is_empty() {
        lines.push(
            std::iter::once("Metric")
                .chain(STAT_KEYS)
                .collect::<Vec<_>>()
                .join(","),
        );
        for (tag, v) in &request {
            let mut row = vec![name(tag, v)];
            row.extend(STAT_KEYS.iter().map(|k| number(v.get(*k))));
            lines.push(row.join(","));
        }
        if !system.is_empty() {
            lines.push(String::new());
        }
    }
    if !system.is_empty() {
        lines.push("Metric,Value".to_owned());
        for (tag, v) in &system {
            lines.push(format!("{},{}", name(tag, v), number(v.get("avg"))));
        }
    }
    lines.iter().map(|l| format!("{l}\r\n")).collect()
}

/// AIPerf's JSON export of `records` (the measured ones; warm-up requests go to `warmup_metrics`), with
/// `good_request_count` and `goodput` when `meta` sets `--goodput` objectives; the samples held in memory.
#[cfg(test)]
pub(crate) fn aiperf_export_of(records: &[&RequestRecord], meta: &RunMeta) -> Value {
    let mut store = FloatStore::memory();
    let mut bucket = Aiperf::new(&mut store);
    for r in records {
        if r.warmup {
            bucket.add_warmup(r, &meta.report.goodput, &mut store);
        } else {
            bucket.add(r, &meta.report.goodput, &mut store);
        }
    }
    // Samples in memory cannot fail to be read.
    bucket.export(meta, &mut store).unwrap_or(Value::Null)
}

/// [`aiperf_export_of`] for a run without an end in its meta (the window falls back to the benchmark duration).
#[cfg(test)]
pub(crate) fn aiperf_export(records: &[&RequestRecord], slos: &[Slo]) -> Value {
    let mut meta = super::tests::meta();
    meta.report.goodput = slos.to_vec();
    aiperf_export_of(records, &meta)
}

/// The per-request metrics AIPerf 0.13 aggregates over a phase's valid requests, each as [`record_metrics`]
/// computes it for `profile_export.jsonl` (display units): its tag and unit. A list value
/// (`inter_chunk_latency`) counts every element, as AIPerf's ragged columns are flattened.
const RECORD_TAGS: [(&str, &str); 18] = [
    ("request_latency", "ms"),
    ("time_to_first_token", "ms"),
    ("time_to_second_token", "ms"),
    ("time_to_first_output_token", "ms"),
    ("inter_token_latency", "ms"),
    ("inter_chunk_latency", "ms"),
    ("decode_duration", "ms"),
    ("input_sequence_length", "tokens"),
    ("output_sequence_length", "tokens"),
    ("output_token_count", "tokens"),
    ("reasoning_token_count", "tokens"),
    ("usage_prompt_tokens", "tokens"),
    ("usage_completion_tokens", "tokens"),
    ("usage_total_tokens", "tokens"),
    ("e2e_output_token_throughput", "tokens/sec/user"),
    ("prefill_throughput_per_user", "tokens/sec/user"),
    ("output_token_throughput_per_user", "tokens/sec/user"),
    ("osl_mismatch_diff_pct", "%"),
];

/// The record metric summed into each run total (`DerivedSumMetric`): total tag, summed tag. A total is written
/// when at least one request had the metric.
const TOTALS: [(&str, &str); 7] = [
    ("total_output_tokens", "output_token_count"),
    ("total_reasoning_tokens", "reasoning_token_count"),
    ("total_isl", "input_sequence_length"),
    ("total_osl", "output_sequence_length"),
    ("total_usage_prompt_tokens", "usage_prompt_tokens"),
    ("total_usage_completion_tokens", "usage_completion_tokens"),
    ("total_usage_total_tokens", "usage_total_tokens"),
];

/// AIPerf 0.13's `OSL_MISMATCH_PCT_THRESHOLD` and `OSL_MISMATCH_MAX_TOKEN_THRESHOLD` defaults
/// (`common/environment.py`): a request's output length is a mismatch when it is more than
/// `min(requested × 5 %, 50)` tokens away from its `max_tokens`.
const OSL_MISMATCH_PCT: f64 = 5.0;
const OSL_MISMATCH_MAX_TOKENS: f64 = 50.0;

/// The metrics flagged `PERCENTILE_INCLUDES_FAILED_REQUESTS`, and their failure-inflated twin's tag
/// (`derived_latency.py` `inject_adjusted_latency_metrics`), written when the phase had failed requests.
const ADJUSTED: [(&str, &str); 4] = [
    ("request_latency", "adj_request_latency"),
    ("time_to_first_token", "adj_time_to_first_token"),
    ("inter_token_latency", "adj_inter_token_latency"),
    ("decode_duration", "adj_decode_duration"),
];

/// AIPerf's `JsonExportData.SCHEMA_VERSION` in 0.13.
const SCHEMA_VERSION: &str = "1.4";

/// What AIPerf's export needs of one phase's requests (the profiling phase's, or the warm-up's), gathered request by
/// request: counts, extremes and exact integer sums here, each per-request metric a sample of a [`FloatStore`] —
/// so the export of a run streamed back from disk is the one of the run held in memory. Means are the exactly
/// rounded sum over the count and `std` the population deviation from exact sums of squares (numpy's pairwise
/// sums agree to rounding; AIPerf prints `%.2f`).
struct PhaseBucket {
    /// One sample per [`RECORD_TAGS`] entry, in its order.
    samples: Vec<SampleId>,
    /// `request_start_ns − credit_issued_ns` of every request, failed ones included (`derived_latency.py`).
    credit_to_start: SampleId,
    count: u64,
    errors: u64,
    /// Failed requests whose error reads as a context overflow (`context_overflow_count`).
    overflows: u64,
    good: u64,
    /// Requests with a `max_tokens` above 0, and those whose output missed it past the threshold.
    osl_requested: u64,
    osl_mismatches: u64,
    first_send: u64,
    last_response: u64,
    /// The first credit (scheduled send) of any request, failed ones included.
    first_credit: u64,
    /// The stages the phase's requests came from.
    stages: Option<(u32, u32)>,
    /// `error_summary`: each distinct `ErrorDetails` and its count, in order of first appearance.
    error_summary: Vec<(Value, u64)>,
    /// Whether the requests were an embeddings run's: AIPerf's endpoint metadata says it `produces_tokens: false`,
    /// so its metrics flagged `PRODUCES_TOKENS_ONLY` (output lengths and rates) are not computed.
    pooling: bool,
}

impl PhaseBucket {
    fn new(store: &mut FloatStore) -> PhaseBucket {
        PhaseBucket {
            samples: RECORD_TAGS.iter().map(|_| store.sample()).collect(),
            credit_to_start: store.sample(),
            count: 0,
            errors: 0,
            overflows: 0,
            good: 0,
            osl_requested: 0,
            osl_mismatches: 0,
            first_send: u64::MAX,
            last_response: 0,
            first_credit: u64::MAX,
            stages: None,
            error_summary: Vec::new(),
            pooling: false,
        }
    }

    fn add(&mut self, r: &RequestRecord, slos: &[Slo], store: &mut FloatStore) {
        // A request cancelled at the end of `--benchmark-grace-period` answered after it: AIPerf's records manager
        // leaves every such request out of its metrics, errors included (`_should_include_request_by_duration`).
        if r.error_class() == Some(ErrorClass::Cancelled) {
            return;
        }
        self.pooling |= r.inputs().is_some();
        self.first_credit = self.first_credit.min(r.scheduled_ns);
        self.stages = Some(match self.stages {
            Some((lo, hi)) => (lo.min(r.stage), hi.max(r.stage)),
            None => (r.stage, r.stage),
        });
        store.push(
            self.credit_to_start,
            r.sent_ns.saturating_sub(r.scheduled_ns) as f64 / 1e6,
        );
        if !r.succeeded() {
            self.errors += 1;
            let details = error_details(r, r.error_class() == Some(ErrorClass::ClientCancelled));
            let message = details.get("message").and_then(Value::as_str);
            self.overflows += u64::from(message.is_some_and(context_overflow));
            match self.error_summary.iter_mut().find(|(d, _)| *d == details) {
                Some((_, n)) => *n += 1,
                None => self.error_summary.push((details, 1)),
            }
            return;
        }
        let metrics = record_metrics(r, slos);
        for ((tag, _), sample) in RECORD_TAGS.iter().zip(&self.samples) {
            match metrics.get(*tag).and_then(|m| m.get("value")) {
                Some(Value::Array(values)) => values
                    .iter()
                    .filter_map(Value::as_f64)
                    .for_each(|v| store.push(*sample, v)),
                Some(value) => {
                    if let Some(v) = value.as_f64() {
                        store.push(*sample, v);
                    }
                }
                None => {}
            }
        }
        let times = aiperf_times(r);
        self.first_send = self.first_send.min(r.sent_ns);
        self.last_response = self.last_response.max(times.last_response_ns);
        self.count += 1;
        // `OSLMismatchCountMetric`: needs `osl_mismatch_diff_pct`, so a `max_tokens` above 0.
        if metrics.contains_key("osl_mismatch_diff_pct")
            && let Some(requested) = r.max_tokens
        {
            let requested = f64::from(requested);
            let threshold = (requested * (OSL_MISMATCH_PCT / 100.0)).min(OSL_MISMATCH_MAX_TOKENS);
            self.osl_requested += 1;
            self.osl_mismatches +=
                u64::from((f64::from(r.output_tokens()) - requested).abs() > threshold);
        }
        self.good += u64::from(!slos.is_empty() && aiperf_good(&times, slos));
    }

    /// The phase's metrics as AIPerf 0.13 exports them; `window` is the phase's `[start, end]` on the run clock
    /// (its observation duration), `None` to fall back to `benchmark_duration` as AIPerf does without one.
    fn metrics(
        &self,
        slos: &[Slo],
        window: Window,
        store: &mut FloatStore,
    ) -> io::Result<Map<String, Value>> {
        let Window {
            bounds: window,
            phases_ns,
        } = window;
        let mut stats_of = BTreeMap::new();
        let mut sums = BTreeMap::new();
        for ((tag, unit), sample) in RECORD_TAGS.iter().zip(&self.samples) {
            let value = stats(unit, store, *sample)?;
            if !value.is_null() {
                sums.insert(*tag, store.view(&[*sample]).sum());
                stats_of.insert(*tag, value);
            }
        }
        let credit_to_start = stats("ms", store, self.credit_to_start)?;
        if !credit_to_start.is_null() {
            stats_of.insert("credit_to_start_latency", credit_to_start);
        }
        if self.errors > 0 {
            for (tag, adjusted_tag) in ADJUSTED {
                let Some(i) = RECORD_TAGS.iter().position(|(t, _)| *t == tag) else {
                    continue;
                };
                let value = adjusted(RECORD_TAGS[i].1, store, self.samples[i], self.errors)?;
                if !value.is_null() {
                    stats_of.insert(adjusted_tag, value);
                }
            }
        }
        let count = self.count as f64;
        // Over several profiling phases AIPerf's benchmark duration and observation window are the sum of the
        // phases' windows (the real AIPerf 0.13: 0.0291 s + 0.3087 s = 0.3377 s for both, 10 requests at
        // 29.61 req/s); over one, the first send to the last response, and the phase's window.
        let phases_s = phases_ns.map(|ns| ns as f64 / 1e9);
        let benchmark_s = phases_s.or_else(|| {
            (self.last_response > self.first_send)
                .then(|| (self.last_response - self.first_send) as f64 / 1e9)
        });
        // `MetricResultsDict.observation_duration`: the phase's window when the export has one, else the
        // benchmark duration; a zero duration has no value.
        let observed_s = match (phases_s, window) {
            (Some(total), _) => Some(total),
            (None, Some((start, end))) => Some(end.saturating_sub(start) as f64 / 1e9),
            (None, None) => benchmark_s,
        }
        .filter(|d| *d > 0.0);
        let total = |tag: &str| sums.get(tag).copied();
        let totals: BTreeMap<&str, f64> = TOTALS
            .iter()
            .filter_map(|(name, of)| total(of).map(|v| (*name, v)))
            .collect();
        let mut export = Map::new();
        let put = |export: &mut Map<String, Value>, tag: &str, value: Option<Value>| {
            if let Some(value) = value {
                export.insert(tag.into(), value);
            }
        };
        let rate = |unit: &str, v: Option<f64>| v.zip(observed_s).map(|(v, d)| single(unit, v / d));
        let sum = |tag: &str| totals.get(tag).copied();
        let valid = (self.count > 0).then_some(count);
        // `JsonExportData`'s declared metrics first, in its order, then the others, as pydantic dumps them.
        put(
            &mut export,
            "request_throughput",
            rate("requests/sec", valid),
        );
        put(
            &mut export,
            "request_latency",
            stats_of.remove("request_latency"),
        );
        put(
            &mut export,
            "request_count",
            valid.map(|c| single("requests", c)),
        );
        for tag in [
            "time_to_first_token",
            "time_to_second_token",
            "inter_token_latency",
        ] {
            put(&mut export, tag, stats_of.remove(tag));
        }
        put(
            &mut export,
            "output_token_throughput",
            rate("tokens/sec", sum("total_osl")),
        );
        for tag in [
            "output_token_throughput_per_user",
            "output_sequence_length",
            "input_sequence_length",
        ] {
            put(&mut export, tag, stats_of.remove(tag));
        }
        if !slos.is_empty() {
            put(
                &mut export,
                "goodput",
                rate("requests/sec", Some(self.good as f64)),
            );
            put(
                &mut export,
                "good_request_count",
                Some(single("requests", self.good as f64)),
            );
        }
        for tag in [
            "output_token_count",
            "reasoning_token_count",
            "inter_chunk_latency",
        ] {
            put(&mut export, tag, stats_of.remove(tag));
        }
        for tag in ["total_output_tokens", "total_reasoning_tokens"] {
            put(&mut export, tag, sum(tag).map(|v| single("tokens", v)));
        }
        put(
            &mut export,
            "benchmark_duration",
            benchmark_s.map(|d| single("sec", d)),
        );
        for tag in ["total_isl", "total_osl"] {
            put(&mut export, tag, sum(tag).map(|v| single("tokens", v)));
        }
        if self.errors > 0 {
            put(
                &mut export,
                "error_request_count",
                Some(single("requests", self.errors as f64)),
            );
            // `ContextOverflowCountMetric`, `ERROR_ONLY`: written (0 or more) once a request failed.
            put(
                &mut export,
                "context_overflow_count",
                Some(single("requests", self.overflows as f64)),
            );
        }
        // The rest, as the accumulator lists them.
        for (tag, value) in std::mem::take(&mut stats_of) {
            export.insert(tag.into(), value);
        }
        if self.osl_requested > 0 {
            put(
                &mut export,
                "osl_mismatch_count",
                Some(single("requests", self.osl_mismatches as f64)),
            );
        }
        let attempted = self.count + self.errors;
        if attempted > 0 {
            put(
                &mut export,
                "request_error_rate",
                Some(single("%", 100.0 * self.errors as f64 / attempted as f64)),
            );
            put(
                &mut export,
                "completed_request_count",
                Some(single("requests", attempted as f64)),
            );
        }
        if !slos.is_empty() {
            // `GoodRequestFractionMetric`: good over every attempted request, 0 without any.
            let fraction = if attempted == 0 {
                0.0
            } else {
                self.good as f64 / attempted as f64
            };
            put(
                &mut export,
                "good_request_fraction",
                Some(single("ratio", fraction)),
            );
        }
        for tag in [
            "total_usage_completion_tokens",
            "total_usage_prompt_tokens",
            "total_usage_total_tokens",
        ] {
            put(&mut export, tag, sum(tag).map(|v| single("tokens", v)));
        }
        put(
            &mut export,
            "input_token_throughput",
            rate("tokens/sec", sum("total_isl")),
        );
        let both = sum("total_isl").zip(sum("total_osl")).map(|(i, o)| i + o);
        put(
            &mut export,
            "total_token_throughput",
            rate("tokens/sec", both),
        );
        if self.pooling {
            // The metrics flagged `PRODUCES_TOKENS_ONLY` (`STREAMING_TOKENS_ONLY` includes it) that are not
            // per-request ones ([`record_metrics`] leaves those out itself).
            for tag in [
                "output_token_throughput",
                "output_token_throughput_per_user",
                "total_osl",
                "total_output_tokens",
                "total_reasoning_tokens",
                "total_usage_completion_tokens",
                "total_usage_total_tokens",
                "total_token_throughput",
                "osl_mismatch_count",
            ] {
                export.remove(tag);
            }
        }
        Ok(export)
    }
}

/// What a phase's rates are observed over: its window (run-clock ns), and for several profiling phases the sum
/// of their windows, which AIPerf's aggregate stats use for both the benchmark duration and the rates.
#[derive(Debug, Clone, Copy)]
struct Window {
    bounds: Option<(u64, u64)>,
    phases_ns: Option<u64>,
}

/// AIPerf's aggregate export (`profile_export_aiperf.json`) of a run's measured requests — its profiling phase —
/// and, beside them, of its warm-up requests (`warmup_metrics`).
pub(crate) struct Aiperf {
    profiling: PhaseBucket,
    warmup: PhaseBucket,
}

impl Aiperf {
    pub(crate) fn new(store: &mut FloatStore) -> Aiperf {
        Aiperf {
            profiling: PhaseBucket::new(store),
            warmup: PhaseBucket::new(store),
        }
    }

    /// Counts a measured request.
    pub(crate) fn add(&mut self, r: &RequestRecord, slos: &[Slo], store: &mut FloatStore) {
        self.profiling.add(r, slos, store);
    }

    /// Counts a request of AIPerf's warm-up phase (a record flagged `warmup`).
    pub(crate) fn add_warmup(&mut self, r: &RequestRecord, slos: &[Slo], store: &mut FloatStore) {
        self.warmup.add(r, slos, store);
    }

    /// The export, as `profile_export_aiperf.json` holds it.
    pub(crate) fn export(&self, meta: &RunMeta, store: &mut FloatStore) -> io::Result<Value> {
        let stage_ends = meta.end.as_ref().map(|end| end.stages.as_slice());
        // The profiling phase's window (AIPerf's `ctx.start_ns`/`ctx.end_ns`: the phase's start and the return of
        // its last request): from the start of the first stage its requests came from (after the warm-up when
        // there was one) to the end of the last.
        let window = self.profiling.stages.and_then(|(lo, hi)| {
            let stages = stage_ends?;
            Some((
                stages.get(lo as usize)?.start_ns,
                stages.get(hi as usize)?.end_ns,
            ))
        });
        // Several stages are several profiling phases: `create_aggregate_stats_for_phase` sums their windows.
        let phases_ns = self.profiling.stages.and_then(|(lo, hi)| {
            let stages = stage_ends?.get(lo as usize..=hi as usize)?;
            (hi > lo).then(|| {
                stages
                    .iter()
                    .map(|s| s.end_ns.saturating_sub(s.start_ns))
                    .sum()
            })
        });
        self.export_observed(
            meta,
            Window {
                bounds: window,
                phases_ns,
            },
            store,
        )
    }

    /// The export of the requests counted with [`add`](Self::add), their rates over `window` (run-clock ns; none
    /// known: `benchmark_duration`): one phase's (`phases/<name>/`).
    pub(crate) fn export_over(
        &self,
        meta: &RunMeta,
        window: Option<(u64, u64)>,
        store: &mut FloatStore,
    ) -> io::Result<Value> {
        self.export_observed(
            meta,
            Window {
                bounds: window,
                phases_ns: None,
            },
            store,
        )
    }

    fn export_observed(
        &self,
        meta: &RunMeta,
        observed: Window,
        store: &mut FloatStore,
    ) -> io::Result<Value> {
        let window = observed.bounds;
        let slos = &meta.report.goodput;
        let mut export = Map::new();
        export.insert("schema_version".into(), json!(SCHEMA_VERSION));
        export.extend(self.profiling.metrics(slos, observed, store)?);
        // AIPerf's PROFILE_CANCEL: a signal, or its own `--failed-request-threshold` abort
        // (`_maybe_trigger_failed_request_abort`), both finalised with `cancelled=True`.
        let interrupted = meta.end.as_ref().is_some_and(|end| {
            end.state == RunState::Interrupted
                || end.stopped == Some(llmbench_engine::engine::StopReason::FailedRequestThreshold)
        });
        export.insert("was_cancelled".into(), Value::Bool(interrupted));
        export.insert("is_complete".into(), Value::Bool(!interrupted));
        if interrupted {
            export.insert(
                "incomplete_reason".into(),
                json!("Run cancelled before all records were processed."),
            );
        }
        let summary: Vec<Value> = self
            .profiling
            .error_summary
            .iter()
            .map(|(details, count)| json!({"error_details": details, "count": count}))
            .collect();
        export.insert("error_summary".into(), Value::Array(summary));
        let bounds = window.or_else(|| {
            (self.profiling.count > 0)
                .then_some((self.profiling.first_send, self.profiling.last_response))
        });
        if let Some((start, end)) = bounds {
            export.insert(
                "start_time".into(),
                json!(iso_local(meta.t0_unix_ns, start)),
            );
            export.insert("end_time".into(), json!(iso_local(meta.t0_unix_ns, end)));
        }
        if self.warmup.count + self.warmup.errors > 0 {
            // The warm-up phase's window: its first credit to the profiling phase's start (AIPerf starts that
            // once every warm-up request returned).
            let end = window
                .map(|(start, _)| start)
                .unwrap_or(self.warmup.last_response);
            let warmup_window =
                (end > self.warmup.first_credit).then_some((self.warmup.first_credit, end));
            let warmup = self.warmup.metrics(
                slos,
                Window {
                    bounds: warmup_window,
                    phases_ns: None,
                },
                store,
            )?;
            export.insert("warmup_metrics".into(), Value::Object(warmup));
        }
        Ok(Value::Object(export))
    }
}

/// A run-clock time as AIPerf's `start_time`/`end_time`: `datetime.fromtimestamp(ns / 1e9)` dumped by pydantic —
/// `YYYY-MM-DDTHH:MM:SS[.ffffff]`, the microseconds rounded half to even from the float seconds as CPython does,
/// and left out when 0. AIPerf writes the machine's local time without a zone; llmbench writes UTC.
fn iso_local(t0_unix_ns: u64, run_ns: u64) -> String {
    let seconds = t0_unix_ns.saturating_add(run_ns) as f64 / 1e9;
    let mut whole = seconds.trunc();
    let mut micros = ((seconds - whole) * 1e6).round_ties_even();
    if micros >= 1e6 {
        micros -= 1e6;
        whole += 1.0;
    }
    let (date, time) = civil_from_unix(whole as i64);
    let base = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        date.0, date.1, date.2, time.0, time.1, time.2
    );
    if micros == 0.0 {
        base
    } else {
        format!("{base}.{:06}", micros as u32)
    }
}

/// AIPerf's `_build_adjusted_metric_result`: the valid requests' values of a sample with one `+inf` per failed
/// request beside them — `count` all of them, `min` the smallest value, numpy's `nearest` percentiles (the value at
/// rank `(n − 1)·p` rounded half to even), no `std`. What is infinite (`avg`, `max`, `sum`, a percentile that lands
/// on a failure) is left out, as the real AIPerf 0.13 leaves it out of its JSON (and its CSV cell empty). Null
/// when the sample is empty.
fn adjusted(
    unit: &str,
    store: &mut FloatStore,
    sample: SampleId,
    errors: u64,
) -> io::Result<Value> {
    let mut view = store.view(&[sample]);
    let valid = view.len();
    let Some((min, _)) = view.min_max()? else {
        return Ok(Value::Null);
    };
    let n = valid.saturating_add(usize::try_from(errors).unwrap_or(usize::MAX));
    let ranks: Vec<usize> = AIPERF_PERCENTILES
        .iter()
        .map(|p| ((n - 1) as f64 * (f64::from(*p) / 100.0)).round_ties_even() as usize)
        .collect();
    let finite: Vec<usize> = ranks.iter().copied().filter(|r| *r < valid).collect();
    let mut values = view.at_ranks(&finite)?.into_iter();
    let mut out = json!({"unit": unit});
    for (p, rank) in AIPERF_PERCENTILES.iter().zip(ranks) {
        if rank < valid
            && let Some(value) = values.next()
        {
            out[format!("p{p}")] = json!(value);
        }
    }
    out["min"] = json!(min);
    out["count"] = json!(n);
    Ok(out)
}

/// AIPerf 0.13's `Environment.AGENTX.CONTEXT_OVERFLOW_SUBSTRINGS` defaults.
const CONTEXT_OVERFLOW_SUBSTRINGS: [&str; 4] = [
    "context length",
    "maximum context",
    "context_length_exceeded",
    "prompt is too long",
];

/// Whether a failed request's error message reads as a context overflow (`is_context_overflow_response`): one of
/// [`CONTEXT_OVERFLOW_SUBSTRINGS`] in it, case aside, or in its OpenAI-style `error.message` (or string `error`)
/// when it is JSON.
fn context_overflow(message: &str) -> bool {
    let found = |text: &str| {
        let lowered = text.to_lowercase();
        CONTEXT_OVERFLOW_SUBSTRINGS
            .iter()
            .any(|needle| lowered.contains(needle))
    };
    if found(message) {
        return true;
    }
    let nested = serde_json::from_str::<Value>(message)
        .ok()
        .and_then(|body| match body.get("error") {
            Some(Value::Object(error)) => error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            Some(Value::String(error)) => Some(error.clone()),
            _ => None,
        });
    nested.is_some_and(|m| found(&m))
}

/// An aggregate metric: only `avg` is set.
fn single(unit: &str, value: f64) -> Value {
    json!({"unit": unit, "avg": value})
}

/// AIPerf's percentiles (`to_result`), in percent.
pub(crate) const AIPERF_PERCENTILES: [u32; 9] = [1, 5, 10, 25, 50, 75, 90, 95, 99];

/// A per-request metric's statistics (numpy's linear percentiles, population std); null when no request had it.
fn stats(unit: &str, store: &mut FloatStore, sample: SampleId) -> io::Result<Value> {
    let mut view = store.view(&[sample]);
    let (Some(mean), Some((min, max))) = (view.mean(), view.min_max()?) else {
        return Ok(Value::Null);
    };
    let n = view.len() as f64;
    let std = (view.squared_deviations(mean)? / n).sqrt();
    let fractions = AIPERF_PERCENTILES.map(|p| f64::from(p) / 100.0);
    let percentiles = view.percentiles(&fractions)?;
    let mut out = json!({"unit": unit, "avg": mean});
    for (p, value) in AIPERF_PERCENTILES.iter().zip(percentiles) {
        out[format!("p{p}")] = json!(value);
    }
    out["min"] = json!(min);
    out["max"] = json!(max);
    out["std"] = json!(std);
    out["count"] = json!(view.len());
    out["sum"] = json!(view.sum());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::ChunkKind;

    fn streamed(sent_ms: u64, chunks_ms: &[u64], tokens: u32) -> RequestRecord {
        let mut record = RequestRecord::builder(0)
            .sent(sent_ms * 1_000_000)
            .end((chunks_ms.last().copied().unwrap_or(sent_ms) + 1) * 1_000_000)
            .input_tokens(10)
            .max_tokens(tokens)
            .ok()
            .usage(10, tokens);
        for ms in chunks_ms {
            record = record.content_at(ms * 1_000_000, 1);
        }
        record.build()
    }

    #[test]
    fn reasoning_answers_add_ttfo_and_reasoning_tokens_and_ttft_counts_the_reasoning() {
        // Sent 0; reasoning at 10 and 12 ms, content at 20 and 22: TTFT 10, TTFO 20, 2 reasoning tokens.
        let mut a = streamed(0, &[10, 12, 20, 22], 4);
        for chunk in &mut a.chunks[..2] {
            chunk.kind = ChunkKind::Reasoning { tokens: 1 };
        }
        let b = streamed(5, &[25, 35], 2);
        let export = aiperf_export(&[&a, &b], &[]);
        let close = |v: &Value, x: f64| (v.as_f64().expect("number") - x).abs() < 1e-9;
        assert!(close(&export["time_to_first_token"]["min"], 10.0));
        // a: 20; b (no reasoning): its TTFT, 20.
        assert!(close(&export["time_to_first_output_token"]["avg"], 20.0));
        assert!(close(&export["reasoning_token_count"]["avg"], 2.0));
        assert_eq!(export["reasoning_token_count"]["unit"], "tokens");
        assert!(
            aiperf_csv(&export).contains("Time to First Output Token (ms),"),
            "{}",
            aiperf_csv(&export)
        );
        assert!(close(&export["total_reasoning_tokens"]["avg"], 2.0));
        // Without reasoning AIPerf 0.13 still writes TTFO (b's 20 ms, its TTFT), but no reasoning counts.
        let plain = aiperf_export(&[&b], &[]);
        assert!(close(&plain["time_to_first_output_token"]["avg"], 20.0));
        assert!(plain.get("reasoning_token_count").is_none());
        assert!(plain.get("total_reasoning_tokens").is_none());
    }

    #[test]
    fn metrics_follow_aiperfs_definitions() {
        // Request a: sent 0, tokens at 10, 12, 14 ms → latency 14, TTFT 10, TTST 2, ITL (14 − 10) / 2 = 2 ms.
        // Request b: sent 5, tokens at 25, 35 ms → latency 30, TTFT 20, TTST 10, ITL 10 ms.
        let a = streamed(0, &[10, 12, 14], 3);
        let b = streamed(5, &[25, 35], 2);
        let export = aiperf_export(&[&a, &b], &[]);
        let close = |v: &Value, x: f64| (v.as_f64().expect("number") - x).abs() < 1e-9;
        assert!(close(&export["request_latency"]["avg"], 22.0));
        assert!(close(&export["request_latency"]["min"], 14.0));
        // numpy linear percentile of [14, 30]: p50 = 22, p90 = 14 + 16 · 0.9 = 28.4.
        assert!(close(&export["request_latency"]["p90"], 28.4));
        // Population std of [14, 30]: 8; count 2, sum 44.
        assert!(close(&export["request_latency"]["std"], 8.0));
        assert_eq!(export["request_latency"]["count"], 2);
        assert!(close(&export["request_latency"]["sum"], 44.0));
        assert!(close(&export["time_to_first_token"]["avg"], 15.0));
        assert!(close(&export["time_to_second_token"]["max"], 10.0));
        assert!(close(&export["inter_token_latency"]["avg"], 6.0));
        // 1 / 2 ms = 500 tokens/s, 1 / 10 ms = 100.
        assert!(close(
            &export["output_token_throughput_per_user"]["max"],
            500.0
        ));
        assert_eq!(export["inter_token_latency"]["unit"], "ms");
        // Duration: first send 0 to last response 35 ms; 2 requests, 5 output tokens.
        assert!(close(&export["benchmark_duration"]["avg"], 0.035));
        assert!(close(&export["request_throughput"]["avg"], 2.0 / 0.035));
        assert!(close(
            &export["output_token_throughput"]["avg"],
            5.0 / 0.035
        ));
        assert_eq!(
            export["request_count"],
            json!({"unit": "requests", "avg": 2.0})
        );
        assert!(export.get("error_request_count").is_none());
    }

    #[test]
    fn the_csv_lays_the_export_out_as_aiperfs_csv_exporter_does() {
        // Request a: latency 14, TTFT 10; request b: latency 30, TTFT 20 (as above), so the latency row is
        // avg 22, min 14, max 30, p1 = 14 + 16 · 0.01 = 14.16, p50 22, p99 = 14 + 16 · 0.99 = 29.84, std 8.
        let a = streamed(0, &[10, 12, 14], 3);
        let b = streamed(5, &[25, 35], 2);
        let csv = aiperf_csv(&aiperf_export(&[&a, &b], &[]));
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(
            lines[0],
            "Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std"
        );
        // Sorted by tag, every metric with percentiles.
        let names: Vec<&str> = lines[1..19]
            .iter()
            .map(|l| l.split(',').next().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "Credit-to-Start Latency (ms)",
                "Decode Duration (ms)",
                "E2E Output Token Throughput (tokens/sec/user)",
                "Input Sequence Length (tokens)",
                "Inter Chunk Latency (ms)",
                "Inter Token Latency (ms)",
                "OSL Mismatch Diff % (%)",
                "Output Sequence Length (tokens)",
                "Output Token Count (tokens)",
                "Output Token Throughput Per User (tokens/sec/user)",
                "Prefill Throughput Per User (tokens/sec/user)",
                "Request Latency (ms)",
                "Time to First Output Token (ms)",
                "Time to First Token (ms)",
                "Time to Second Token (ms)",
                "Usage Completion Tokens (tokens)",
                "Usage Prompt Tokens (tokens)",
                "Usage Total Tokens (tokens)",
            ]
        );
        // The sum (14 + 30 = 44) after max, as AIPerf 0.13's STAT_KEYS have it.
        assert_eq!(
            lines[12],
            "Request Latency (ms),22.00,14.00,30.00,44.00,14.16,14.80,15.60,18.00,22.00,26.00,28.40,29.20,29.84,8.00"
        );
        assert_eq!(lines[19], "", "a blank row between the sections");
        assert_eq!(lines[20], "Metric,Value");
        // Sorted by tag; no unit shown for `requests`. Without a phase window the rates divide by the benchmark
        // duration, 0.035 s: 20 input tokens → 571.43/s, 5 output → 142.86/s, 25 in all → 714.29/s, 2 requests →
        // 57.14/s. Usage: prompt 10 + 10, completion 3 + 2, total 13 + 12.
        assert_eq!(
            &lines[21..36],
            [
                "Benchmark Duration (sec),0.04",
                "Completed Requests (Success + Error),2.00",
                "Input Token Throughput (tokens/sec),571.43",
                "OSL Mismatch Count,0.00",
                "Output Token Throughput (tokens/sec),142.86",
                "Request Count,2.00",
                "Request Error Rate (%),0.00",
                "Request Throughput (requests/sec),57.14",
                "Total Input Sequence Length (tokens),20.00",
                "Total Output Sequence Length (tokens),5.00",
                "Total Output Tokens (tokens),5.00",
                "Total Token Throughput (tokens/sec),714.29",
                "Total Usage Completion Tokens (tokens),5.00",
                "Total Usage Prompt Tokens (tokens),20.00",
                "Total Usage Total Tokens (tokens),25.00",
            ]
        );
        assert_eq!(lines[36], "", "the file ends with CRLF");
        assert_eq!(
            lines.len(),
            37,
            "the run-level keys (was_cancelled, error_summary, times) are not metric rows"
        );
    }

    #[test]
    fn an_embeddings_export_has_latency_and_input_lengths_but_no_token_metrics() {
        let record = |id: u64, sent_ms: u64, end_ms: u64| {
            RequestRecord::builder(id)
                .sent(sent_ms * 1_000_000)
                .end(end_ms * 1_000_000)
                .ok()
                .inputs(1)
                .usage(12, 0)
                .build()
        };
        let (a, b) = (record(0, 0, 40), record(1, 10, 60));
        let export = aiperf_export(&[&a, &b], &[]);
        let mut tags: Vec<&str> = export
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        tags.sort_unstable();
        assert_eq!(
            tags,
            [
                "benchmark_duration",
                "completed_request_count",
                "credit_to_start_latency",
                "end_time",
                "error_summary",
                "input_sequence_length",
                "input_token_throughput",
                "is_complete",
                "request_count",
                "request_error_rate",
                "request_latency",
                "request_throughput",
                "schema_version",
                "start_time",
                "total_isl",
                "total_usage_prompt_tokens",
                "usage_prompt_tokens",
                "was_cancelled",
            ]
        );
        assert_eq!(export["request_latency"]["avg"], 45.0);
        assert_eq!(export["total_isl"]["avg"], 24.0);
    }

    fn close(v: &Value, x: f64) -> bool {
        v.as_f64().is_some_and(|v| (v - x).abs() < 1e-9)
    }

    #[test]
    fn the_per_request_metrics_of_the_records_file_are_aggregated() {
        // a: sent 0, a token at 10, 12 and 14 ms, usage (10, 3), max_tokens 3; b: sent 5 (scheduled at 2), tokens at
        // 25 and 35 ms, usage (10, 2), max_tokens 2.
        let a = streamed(0, &[10, 12, 14], 3);
        let mut b = streamed(5, &[25, 35], 2);
        b.scheduled_ns = 2_000_000;
        let export = aiperf_export(&[&a, &b], &[]);
        let m = |tag: &str, stat: &str| export[tag][stat].clone();
        // Chunk gaps, flattened: a's 2 and 2, b's 10 → 3 values, sum 14.
        assert_eq!(m("inter_chunk_latency", "count"), 3);
        assert!(close(&m("inter_chunk_latency", "sum"), 14.0));
        assert!(close(&m("inter_chunk_latency", "avg"), 14.0 / 3.0));
        assert!(close(&m("inter_chunk_latency", "max"), 10.0));
        // Decode: latency − TTFT, 14 − 10 = 4 and 30 − 20 = 10.
        assert!(close(&m("decode_duration", "avg"), 7.0));
        // E2E: OSL / latency, 3 / 0.014 s and 2 / 0.030 s.
        assert!(close(
            &m("e2e_output_token_throughput", "sum"),
            3.0 / 0.014 + 2.0 / 0.030
        ));
        // Prefill per user: ISL / TTFT, 10 / 0.010 s = 1000 and 10 / 0.020 s = 500.
        assert!(close(&m("prefill_throughput_per_user", "avg"), 750.0));
        assert!(close(&m("prefill_throughput_per_user", "min"), 500.0));
        // TTFO without reasoning is the TTFT: 10 and 20.
        assert!(close(&m("time_to_first_output_token", "avg"), 15.0));
        assert!(close(&m("output_token_count", "sum"), 5.0));
        assert!(close(&m("usage_prompt_tokens", "sum"), 20.0));
        assert!(close(&m("usage_completion_tokens", "max"), 3.0));
        assert!(close(&m("usage_total_tokens", "sum"), 25.0));
        // Both answers are as long as asked: 0 % off.
        assert!(close(&m("osl_mismatch_diff_pct", "max"), 0.0));
        // Credit to start: a 0, b 5 − 2 = 3 ms; every request counts.
        assert_eq!(m("credit_to_start_latency", "count"), 2);
        assert!(close(&m("credit_to_start_latency", "avg"), 1.5));
        assert_eq!(export["credit_to_start_latency"]["unit"], "ms");
        for (tag, total) in [
            ("total_output_tokens", 5.0),
            ("total_usage_prompt_tokens", 20.0),
            ("total_usage_completion_tokens", 5.0),
            ("total_usage_total_tokens", 25.0),
            ("osl_mismatch_count", 0.0),
            ("completed_request_count", 2.0),
            ("request_error_rate", 0.0),
        ] {
            assert!(close(&export[tag]["avg"], total), "{tag}: {}", export[tag]);
            assert!(export[tag].get("count").is_none(), "{tag} is a scalar");
        }
        assert_eq!(export["schema_version"], "1.4");
        assert_eq!(export["error_summary"], json!([]));
        assert_eq!(export["is_complete"], true);
    }

    /// A non-streamed answer of `osl` tokens to a request for `requested`, sent at `id` ms and taking 10 + `id` ms.
    fn answer(id: u64, requested: u32, osl: u32) -> RequestRecord {
        RequestRecord::builder(id)
            .sent(id * 1_000_000)
            .end((2 * id + 10) * 1_000_000)
            .streaming(false)
            .max_tokens(requested)
            .ok()
            .usage(10, osl)
            .build()
    }

    #[test]
    fn osl_mismatches_errors_and_the_error_rate_follow_aiperf() {
        // Threshold min(requested × 5 %, 50): 100 → 5 tokens (94 is 6 off: a mismatch; 96 is 4 off: not);
        // 2000 → 50 (1950 is 50 off: not; 1949 is 51 off: a mismatch).
        let records = [
            answer(0, 100, 94),
            answer(1, 100, 96),
            answer(2, 2000, 1950),
            answer(3, 2000, 1949),
        ];
        let failed = |id: u64| {
            RequestRecord::builder(id)
                .sent(id * 1_000_000)
                .end((id + 1) * 1_000_000)
                .status(500)
                .error(
                    ErrorClass::HttpStatus,
                    "HTTP 500 Internal Server Error: boom",
                )
                .build()
        };
        let (e1, e2) = (failed(4), failed(5));
        let mut all: Vec<&RequestRecord> = records.iter().collect();
        all.extend([&e1, &e2]);
        let export = aiperf_export(&all, &[]);
        assert!(close(&export["osl_mismatch_count"]["avg"], 2.0));
        // (94 − 100) / 100 = −6 %, −4 %, −2.5 %, −2.55 %.
        assert!(close(&export["osl_mismatch_diff_pct"]["min"], -6.0));
        assert!(close(&export["error_request_count"]["avg"], 2.0));
        // "boom" is no context overflow; written as 0 once a request failed.
        assert!(close(&export["context_overflow_count"]["avg"], 0.0));
        // 2 errors of 6 completed: 33.33 %.
        assert!(close(&export["completed_request_count"]["avg"], 6.0));
        assert!(close(
            &export["request_error_rate"]["avg"],
            100.0 * 2.0 / 6.0
        ));
        assert_eq!(
            export["error_summary"],
            json!([{
                "error_details": {"code": 500, "type": "Internal Server Error", "message": "boom"},
                "count": 2
            }])
        );
        // Non-streamed: no chunk timing.
        assert!(export.get("inter_chunk_latency").is_none());
        assert!(export.get("decode_duration").is_none());
        // With failures, the error-adjusted latency: [10, 11, 12, 13, inf, inf] (n = 6); numpy's nearest rank
        // 5·p rounded half to even: p1, p5, p10 (0.5 → 0) → 10, p25 (1.25 → 1) → 11, p50 (2.5 → 2) → 12, p75
        // (3.75 → 4), p90 (4.5 → 4), p95, p99 → inf, left out as avg, max and sum are (the real AIPerf 0.13 with
        // failures on `llmbench sim` writes `{unit, p1…p50, min, count}` so); no std.
        assert_eq!(
            export["adj_request_latency"],
            json!({
                "unit": "ms", "p1": 10.0, "p5": 10.0, "p10": 10.0, "p25": 11.0, "p50": 12.0, "min": 10.0,
                "count": 6
            })
        );
        // No TTFT without a stream, so no adjusted one.
        assert!(export.get("adj_time_to_first_token").is_none());
        let csv = aiperf_csv(&export);
        assert!(
            csv.contains(
                "\r\nRequest Latency (error-adjusted) (ms),,10.00,,,10.00,10.00,10.00,11.00,12.00,,,,,\r\n"
            ),
            "{csv}"
        );
        // Without failures there is none.
        let clean = aiperf_export(&records.iter().collect::<Vec<_>>(), &[]);
        assert!(clean.get("adj_request_latency").is_none());
    }

    #[test]
    fn rates_divide_by_the_phase_window_and_the_warmup_has_its_own_metrics() {
        use super::super::meta::{RunEnd, StageEnd};
        // The warm-up request: scheduled and sent at 0, tokens at 10 and 20 ms. The profiling phase starts at 30 ms
        // and its last request returns at 80 ms (the stage's end).
        let mut warm = streamed(0, &[10, 20], 2);
        warm.warmup = true;
        // Profiling: a sent 35, tokens at 45, 47, 49; b sent 40, tokens at 60, 70.
        let a = streamed(35, &[45, 47, 49], 3);
        let b = streamed(40, &[60, 70], 2);
        let mut meta = super::super::tests::meta();
        meta.end = Some(RunEnd {
            state: RunState::Complete,
            stopped: None,
            planned: None,
            sent: 3,
            finished: 3,
            stages: vec![StageEnd {
                began_ns: None,
                start_ns: 30_000_000,
                end_ns: 80_000_000,
                stopped: None,
                sessions: Vec::new(),
            }],
            failed: None,
        });
        let export = aiperf_export_of(&[&warm, &a, &b], &meta);
        // benchmark_duration stays first send → last response: 70 − 35 = 35 ms.
        assert!(close(&export["benchmark_duration"]["avg"], 0.035));
        // The window is 50 ms: 2 requests → 40/s, 5 output tokens → 100/s, 20 input → 400/s, 25 → 500/s.
        assert!(close(&export["request_throughput"]["avg"], 40.0));
        assert!(close(&export["output_token_throughput"]["avg"], 100.0));
        assert!(close(&export["input_token_throughput"]["avg"], 400.0));
        assert!(close(&export["total_token_throughput"]["avg"], 500.0));
        assert!(close(&export["request_count"]["avg"], 2.0));
        // The run's t0 is 2026-11-22T04:35:12 UTC: the window's ends 30 and 80 ms after it.
        assert_eq!(export["start_time"], "2026-11-22T04:35:12.030000");
        assert_eq!(export["end_time"], "2026-11-22T04:35:12.080000");
        // The warm-up: its own request over its window, first credit 0 to the profiling start 30 ms.
        let warmup = &export["warmup_metrics"];
        assert!(close(&warmup["request_count"]["avg"], 1.0));
        assert!(close(&warmup["request_latency"]["avg"], 20.0));
        assert!(close(&warmup["request_throughput"]["avg"], 1.0 / 0.030));
        assert!(close(&warmup["benchmark_duration"]["avg"], 0.020));
    }

    #[test]
    fn times_are_written_as_pydantic_dumps_datetime_fromtimestamp() {
        // The real AIPerf 0.13's profiling phase on `llmbench sim`: start_ns 1795926527280803011 and end_ns
        // 1795926527344765846 (phase_manifest.json) were written as these start_time and end_time (the machine on
        // UTC): the float seconds' microseconds rounded (…344765.8 → 344766), none written when 0.
        assert_eq!(
            iso_local(1_795_926_527_280_803_011, 0),
            "2026-11-29T04:28:47.280803"
        );
        assert_eq!(
            iso_local(1_795_926_527_000_000_000, 344_765_846),
            "2026-11-29T04:28:47.344766"
        );
        assert_eq!(
            iso_local(1_795_926_527_000_000_000, 0),
            "2026-11-29T04:28:47"
        );
    }

    #[test]
    fn context_overflows_are_read_off_the_error_message_as_aiperf_reads_them() {
        // AIPerf 0.13's substrings, case aside, in the raw body or its JSON `error.message` / string `error` (where
        // an escape can hide them from the raw text: `\u0063ontext length` is `context length` once parsed).
        assert!(context_overflow(
            "This model's Maximum Context length is 2048 tokens"
        ));
        assert!(context_overflow(
            r#"{"error":{"message":"\u0063ontext length exceeded","code":400}}"#
        ));
        assert!(context_overflow(r#"{"error":"\u0070rompt is too long"}"#));
        assert!(!context_overflow(r#"{"error":{"message":"rate limited"}}"#));
        let record = |id: u64, message: &str| {
            RequestRecord::builder(id)
                .sent(id)
                .end(id + 1)
                .status(400)
                .error(ErrorClass::HttpStatus, message)
                .build()
        };
        let (a, b) = (
            record(
                0,
                r#"HTTP 400 Bad Request: {"error":{"message":"context_length_exceeded"}}"#,
            ),
            record(1, "HTTP 400 Bad Request: no"),
        );
        let export = aiperf_export(&[&a, &b], &[]);
        assert!(close(&export["context_overflow_count"]["avg"], 1.0));
        assert!(aiperf_csv(&export).contains("\r\nContext Overflow Count,1.00\r\n"));
    }
}
