//! AIPerf's `profile_export_aiperf.json`, the file llm-d-benchmark's `aiperf-analyze_results.sh` converts into
//! its benchmark report. Only what the records can fill is written, each metric under AIPerf's tag and display
//! unit. Its samples live in a [`FloatStore`], so a run summarised from disk (past `--records-memory`) writes the
//! same export as one held in memory.
//!
//! Upstream (`ai-dynamo/aiperf`): `aiperf/exporters/json_exporter.py` (the file), `aiperf/common/models/
//! export_models.py` `JsonExportData` / `JsonMetricResult` (`unit`, `avg`, `p1` … `p99`, `min`, `max`, `std`),
//! `aiperf/metrics/metric_dicts.py` `to_result` (numpy's linear percentiles, population std), and the metrics in
//! `aiperf/metrics/types/`: per valid request `request_latency` (last response − send), `time_to_first_token`
//! (first response − send), `time_to_second_token` (second − first response), `inter_token_latency`
//! (`(request_latency − ttft) / (osl − 1)`, for osl ≥ 2), `output_token_throughput_per_user` (1 / ITL in
//! seconds), `output_sequence_length`, `input_sequence_length`, and for answers that carried reasoning
//! `time_to_first_output_token` (first content, not reasoning, response − send:
//! `time_to_first_output_token_metric.py`) and `reasoning_token_count` (the server's
//! `completion_tokens_details.reasoning_tokens`, else the streamed reasoning chunks'); and over the run `request_count`,
//! `error_request_count`, `benchmark_duration` (last response − first request), `request_throughput`,
//! `output_token_throughput`, `total_osl`, `total_isl`. Times are in ms (`benchmark_duration` in sec).
//!
//! `profile_export_aiperf.csv` is the same export as AIPerf's `CsvExporter` (`aiperf/exporters/csv_exporter.py`)
//! lays it out: the metrics with percentiles first (`Metric,avg,min,max,p1,…,p99,std`, one row per metric sorted by
//! tag), a blank row, then the single-valued ones (`Metric,Value`); a metric is named by its class's `header` and
//! display unit (`Request Latency (ms)`; no unit for `requests` and `count`), every number `%.2f` (AIPerf's
//! `MetricResult` fields are floats by then), lines end in CRLF as Python's `csv.writer` ends them.
//!
//! A request cancelled in flight (the end of `--benchmark-grace-period` cut it) is left out altogether, as AIPerf's
//! `RecordsManager._should_include_request_by_duration` leaves out a request that answered after the grace period.
//!
//! With `--goodput` objectives, `good_request_count` (`good_request_count_metric.py`: valid requests whose every
//! named metric is at most its limit; one without the metric is not good) and `goodput` (that count over
//! `benchmark_duration`, `goodput_metric.py`).
//!
//! Left out: `min_request_timestamp` / `max_response_timestamp` (wall-clock stamps; llmbench's records are on the
//! monotonic clock), `input_config`, `error_summary`, `start_time` / `end_time`. An answer llmbench
//! counts as cut short is a valid record here: AIPerf has no such failure (it counts a length that misses the
//! request's, `osl_mismatch_count`, without invalidating the record).

use serde_json::{Map, Value, json};

use std::io;

use super::meta::Slo;
use super::sample::{FloatStore, SampleId};
use llmbench_model::record::{ErrorClass, RequestRecord};
use llmbench_workload::workload::SloMetric;

/// The file AIPerf writes into its `--output-artifact-dir`.
pub(crate) const AIPERF_JSON_FILE: &str = "profile_export_aiperf.json";
/// Its CSV twin, beside it.
pub(crate) const AIPERF_CSV_FILE: &str = "profile_export_aiperf.csv";

/// AIPerf's `STAT_KEYS` (`aiperf/common/constants.py`), the columns of the CSV's first section.
const STAT_KEYS: [&str; 13] = [
    "avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std",
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
        "output_token_throughput" => "Output Token Throughput",
        "output_token_throughput_per_user" => "Output Token Throughput Per User",
        "output_sequence_length" => "Output Sequence Length",
        "input_sequence_length" => "Input Sequence Length",
        "benchmark_duration" => "Benchmark Duration",
        "good_request_count" => "GoodRequestCount",
        "goodput" => "Goodput",
        "total_osl" => "Total Output Sequence Length",
        "total_isl" => "Total Input Sequence Length",
        "error_request_count" => "Error Request Count",
        "request_throughput" => "Request Throughput",
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
            .any(|k| k.starts_with('p') && v.get(*k).is_some_and(|x| !x.is_null()))
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

/// The times AIPerf measures of one valid request, in nanoseconds: `request_latency` (last response − send; without a
/// stream the one response is the whole body), `time_to_first_token` (first response with tokens − send; without a
/// stream the request latency), the second response's time after the first, and `inter_token_latency` =
/// `(request_latency − ttft) / (osl − 1)` for osl ≥ 2, streams only.
pub(crate) struct AiperfTimes {
    pub last_response_ns: u64,
    pub request_latency_ns: f64,
    pub ttft_ns: Option<f64>,
    pub ttst_ns: Option<f64>,
    pub itl_ns: Option<f64>,
}

pub(crate) fn aiperf_times(r: &RequestRecord) -> AiperfTimes {
    // Every response that carried tokens, reasoning included (AIPerf's `content_responses`).
    let mut content = r
        .chunks
        .iter()
        .filter(|c| r.streaming && c.kind.tokens().is_some())
        .map(|c| c.at_ns);
    let first = content.next();
    let second = content.next();
    let last = content.next_back().or(second).or(first).unwrap_or(r.end_ns);
    let request_latency_ns = last.saturating_sub(r.sent_ns) as f64;
    // Without a stream the whole body is the one content response: TTFT is the request latency
    // (`ttft_metric.py` has no streaming flag), and there is no second token or inter-token latency (theirs has).
    let ttft_ns = if r.streaming {
        first.map(|f| f.saturating_sub(r.sent_ns) as f64)
    } else {
        Some(request_latency_ns)
    };
    let out = f64::from(r.output_tokens());
    AiperfTimes {
        last_response_ns: last,
        request_latency_ns,
        ttft_ns,
        ttst_ns: first.zip(second).map(|(f, s)| s.saturating_sub(f) as f64),
        itl_ns: ttft_ns
            .filter(|_| r.streaming && out >= 2.0)
            .map(|t| (request_latency_ns - t) / (out - 1.0)),
    }
}

/// Whether a valid request met every `--goodput` objective (`GoodRequestCountMetric._is_good`): each metric at most
/// its limit (all three are smaller-is-better), and a metric the request does not have fails it.
pub(crate) fn aiperf_good(times: &AiperfTimes, slos: &[Slo]) -> bool {
    slos.iter()
        .all(|slo| aiperf_metric_s(times, slo.metric).is_some_and(|v| v <= slo.limit_s))
}

/// The AIPerf metric an objective names, in seconds: `time_to_first_token`, `inter_token_latency` or
/// `request_latency`; `None` when the request has none.
pub(crate) fn aiperf_metric_s(times: &AiperfTimes, metric: SloMetric) -> Option<f64> {
    let ns = match metric {
        SloMetric::Ttft => times.ttft_ns,
        SloMetric::Itl => times.itl_ns,
        SloMetric::E2e => Some(times.request_latency_ns),
        // The aiperf dialect maps no AIPerf tag to these.
        SloMetric::Tpot | SloMetric::Ntpot => None,
    };
    ns.map(|v| v / 1e9)
}

/// AIPerf's JSON export of `records` (the measured ones), with `good_request_count` and `goodput` when the profile
/// set `--goodput` objectives; the samples held in memory.
#[cfg(test)]
pub(crate) fn aiperf_export(records: &[&RequestRecord], slos: &[Slo]) -> Value {
    let mut store = FloatStore::memory();
    let mut bucket = Aiperf::new(&mut store);
    records.iter().for_each(|r| bucket.add(r, slos, &mut store));
    // Samples in memory cannot fail to be read.
    bucket.export(slos, &mut store).unwrap_or(Value::Null)
}

/// What AIPerf's export needs of the measured requests, gathered request by request: counts, extremes and exact
/// integer sums here, each per-request metric a sample of a [`FloatStore`] — so the export of a run streamed back
/// from disk is the one of the run held in memory. Means are the exactly rounded sum over the count and `std` the
/// population deviation from exact sums of squares (numpy's pairwise sums agree to rounding; AIPerf prints `%.2f`).
pub(crate) struct Aiperf {
    latency: SampleId,
    ttft: SampleId,
    ttst: SampleId,
    ttfo: SampleId,
    reasoning: SampleId,
    itl: SampleId,
    per_user: SampleId,
    osl: SampleId,
    isl: SampleId,
    count: u64,
    reasoned: u64,
    total_osl: u64,
    total_isl: u64,
    errors: u64,
    good: u64,
    first_send: u64,
    last_response: u64,
    /// Whether the requests were an embeddings run's: AIPerf's endpoint metadata says it `produces_tokens: false`,
    /// so its metrics flagged `PRODUCES_TOKENS_ONLY` (output lengths and rates) are not computed.
    pooling: bool,
}

impl Aiperf {
    pub(crate) fn new(store: &mut FloatStore) -> Aiperf {
        Aiperf {
            latency: store.sample(),
            ttft: store.sample(),
            ttst: store.sample(),
            ttfo: store.sample(),
            reasoning: store.sample(),
            itl: store.sample(),
            per_user: store.sample(),
            osl: store.sample(),
            isl: store.sample(),
            count: 0,
            reasoned: 0,
            total_osl: 0,
            total_isl: 0,
            errors: 0,
            good: 0,
            first_send: u64::MAX,
            last_response: 0,
            pooling: false,
        }
    }

    /// Counts a measured request.
    pub(crate) fn add(&mut self, r: &RequestRecord, slos: &[Slo], store: &mut FloatStore) {
        // A request cancelled at the end of `--benchmark-grace-period` answered after it: AIPerf's records manager
        // leaves every such request out of its metrics, errors included (`_should_include_request_by_duration`).
        if r.error_class() == Some(ErrorClass::Cancelled) {
            return;
        }
        self.pooling |= r.inputs().is_some();
        if !r.succeeded() {
            self.errors += 1;
            return;
        }
        if let Some(ns) = r.ttfo_ns() {
            store.push(self.ttfo, ns as f64 / 1e6);
        }
        let reasoned = r.reasoning_tokens();
        if reasoned > 0 {
            self.reasoned += 1;
            store.push(self.reasoning, f64::from(reasoned));
        }
        let times = aiperf_times(r);
        self.first_send = self.first_send.min(r.sent_ns);
        self.last_response = self.last_response.max(times.last_response_ns);
        self.count += 1;
        store.push(self.latency, times.request_latency_ns / 1e6);
        store.push(self.osl, f64::from(r.output_tokens()));
        store.push(self.isl, f64::from(r.prompt_tokens()));
        self.total_osl += u64::from(r.output_tokens());
        self.total_isl += u64::from(r.prompt_tokens());
        if let Some(t) = times.ttft_ns {
            store.push(self.ttft, t / 1e6);
        }
        if let Some(t) = times.ttst_ns {
            store.push(self.ttst, t / 1e6);
        }
        if let Some(itl_ns) = times.itl_ns {
            store.push(self.itl, itl_ns / 1e6);
            if itl_ns > 0.0 {
                store.push(self.per_user, 1e9 / itl_ns);
            }
        }
        self.good += u64::from(!slos.is_empty() && aiperf_good(&times, slos));
    }

    /// The export, as `profile_export_aiperf.json` holds it.
    pub(crate) fn export(&self, slos: &[Slo], store: &mut FloatStore) -> io::Result<Value> {
        let mut export = Map::new();
        let count = self.count as f64;
        let (total_osl, total_isl) = (self.total_osl as f64, self.total_isl as f64);
        let duration_s = (self.last_response > self.first_send)
            .then(|| (self.last_response - self.first_send) as f64 / 1e9);
        if let Some(d) = duration_s {
            export.insert(
                "request_throughput".into(),
                single("requests/sec", count / d),
            );
        }
        export.insert("request_latency".into(), stats("ms", store, self.latency)?);
        export.insert("request_count".into(), single("requests", count));
        export.insert("time_to_first_token".into(), stats("ms", store, self.ttft)?);
        export.insert(
            "time_to_second_token".into(),
            stats("ms", store, self.ttst)?,
        );
        if self.reasoned > 0 {
            export.insert(
                "time_to_first_output_token".into(),
                stats("ms", store, self.ttfo)?,
            );
            export.insert(
                "reasoning_token_count".into(),
                stats("tokens", store, self.reasoning)?,
            );
        }
        export.insert("inter_token_latency".into(), stats("ms", store, self.itl)?);
        if let Some(d) = duration_s {
            export.insert(
                "output_token_throughput".into(),
                single("tokens/sec", total_osl / d),
            );
        }
        export.insert(
            "output_token_throughput_per_user".into(),
            stats("tokens/sec/user", store, self.per_user)?,
        );
        export.insert(
            "output_sequence_length".into(),
            stats("tokens", store, self.osl)?,
        );
        export.insert(
            "input_sequence_length".into(),
            stats("tokens", store, self.isl)?,
        );
        if let Some(d) = duration_s {
            export.insert("benchmark_duration".into(), single("sec", d));
        }
        if !slos.is_empty() {
            export.insert(
                "good_request_count".into(),
                single("requests", self.good as f64),
            );
            if let Some(d) = duration_s {
                export.insert(
                    "goodput".into(),
                    single("requests/sec", self.good as f64 / d),
                );
            }
        }
        export.insert("total_osl".into(), single("tokens", total_osl));
        export.insert("total_isl".into(), single("tokens", total_isl));
        if self.errors > 0 {
            export.insert(
                "error_request_count".into(),
                single("requests", self.errors as f64),
            );
        }
        export.insert("was_cancelled".into(), Value::Bool(false));
        if self.pooling {
            // `time_to_first_token` is `STREAMING_TOKENS_ONLY` in AIPerf 0.13 (ttft_metric.py), which includes
            // `PRODUCES_TOKENS_ONLY`; the rest are flagged `PRODUCES_TOKENS_ONLY` themselves.
            for tag in [
                "time_to_first_token",
                "output_token_throughput",
                "output_token_throughput_per_user",
                "output_sequence_length",
                "total_osl",
            ] {
                export.remove(tag);
            }
        }
        // A metric with no value is absent, as AIPerf's `exclude_unset` leaves it out.
        export.retain(|_, v| !v.is_null());
        Ok(Value::Object(export))
    }
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
        // Without reasoning neither is written.
        let plain = aiperf_export(&[&b], &[]);
        assert!(plain.get("time_to_first_output_token").is_none());
        assert!(plain.get("reasoning_token_count").is_none());
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
        // Population std of [14, 30]: 8.
        assert!(close(&export["request_latency"]["std"], 8.0));
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
            "Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std"
        );
        // Sorted by tag: input_sequence_length, inter_token_latency, output_sequence_length,
        // output_token_throughput_per_user, request_latency, time_to_first_token, time_to_second_token.
        let names: Vec<&str> = lines[1..8]
            .iter()
            .map(|l| l.split(',').next().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "Input Sequence Length (tokens)",
                "Inter Token Latency (ms)",
                "Output Sequence Length (tokens)",
                "Output Token Throughput Per User (tokens/sec/user)",
                "Request Latency (ms)",
                "Time to First Token (ms)",
                "Time to Second Token (ms)",
            ]
        );
        assert_eq!(
            lines[5],
            "Request Latency (ms),22.00,14.00,30.00,14.16,14.80,15.60,18.00,22.00,26.00,28.40,29.20,29.84,8.00"
        );
        assert_eq!(lines[8], "", "a blank row between the sections");
        assert_eq!(lines[9], "Metric,Value");
        // benchmark_duration, output_token_throughput, request_count (no unit shown), request_throughput,
        // total_isl, total_osl: duration 0.035 s, 5 tokens / 0.035 s = 142.857…, 2 / 0.035 = 57.142….
        assert_eq!(
            &lines[10..16],
            [
                "Benchmark Duration (sec),0.04",
                "Output Token Throughput (tokens/sec),142.86",
                "Request Count,2.00",
                "Request Throughput (requests/sec),57.14",
                "Total Input Sequence Length (tokens),20.00",
                "Total Output Sequence Length (tokens),5.00",
            ]
        );
        assert_eq!(lines[16], "", "the file ends with CRLF");
        assert_eq!(lines.len(), 17, "was_cancelled is not a metric row");
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
                "input_sequence_length",
                "request_count",
                "request_latency",
                "request_throughput",
                "total_isl",
                "was_cancelled"
            ]
        );
        assert_eq!(export["request_latency"]["avg"], 45.0);
        assert_eq!(export["total_isl"]["avg"], 24.0);
    }
}
