//! What one finished run contributes to the comparison: [`RunFigures`] from its `summary.json`, judged by the run
//! template's SLO exactly as the operator judges a BenchmarkRun (`operator/src/summary.rs` `slo_verdict`).

use std::path::Path;

use llmbench_api::experiment::RunFigures;
use llmbench_api::v1alpha1::SloSpec;
use serde_json::Value;

use llmbench_metrics::metrics::{RunSummary, Stats};

/// A run's `summary.json`, typed, and as raw JSON for the fields other code is still adding (`capacity`).
#[derive(Debug, Clone)]
pub(crate) struct ReadSummary {
    pub(crate) summary: RunSummary,
    pub(crate) raw: Value,
}

/// Reads `dir/summary.json`.
pub(crate) fn read_summary(dir: &Path) -> Result<ReadSummary, String> {
    let path = dir.join(llmbench_report::report::SUMMARY_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let raw: Value =
        serde_json::from_str(&text).map_err(|e| format!("cannot parse {}: {e}", path.display()))?;
    let summary = serde_json::from_value(raw.clone())
        .map_err(|e| format!("cannot parse {}: {e}", path.display()))?;
    Ok(ReadSummary { summary, raw })
}

/// The figures of one run: throughput, TTFT/TPOT/ITL p50 and p99 in milliseconds, goodput where the profile set
/// objectives, failed requests, the SLO verdict and the capacity its search found.
pub(crate) fn run_figures(read: &ReadSummary, slo: Option<&SloSpec>) -> RunFigures {
    let overall = &read.summary.overall;
    let latency = &overall.latency_ms;
    let p50 = |s: &Option<Stats>| s.as_ref().map(|s| s.p50);
    let p99 = |s: &Option<Stats>| s.as_ref().map(|s| s.p99);
    RunFigures {
        requests_per_second: overall.throughput.requests_per_s,
        output_tokens_per_second: overall.throughput.output_tokens_per_s,
        ttft_p50_ms: p50(&latency.ttft),
        ttft_p99_ms: p99(&latency.ttft),
        tpot_p50_ms: p50(&latency.tpot),
        tpot_p99_ms: p99(&latency.tpot),
        itl_p50_ms: p50(&latency.itl),
        itl_p99_ms: p99(&latency.itl),
        goodput_percent: overall.goodput.as_ref().map(|g| g.percentage),
        capacity: read.summary.capacity.as_ref().and_then(|c| c.answer),
        prefix_cache_hit_percent: prefix_cache_hit_percent(&read.summary),
        failures: overall.requests.failed,
        slo_met: slo.map(|slo| slo_verdict(slo, &read.summary).is_ok()),
    }
}

/// The share of prompt tokens the server took from its prefix cache over the whole run, in percent: from the
/// responses' cached tokens, else from the server's prefix-cache counters, where either was reported.
fn prefix_cache_hit_percent(summary: &RunSummary) -> Option<f64> {
    if let Some(hits) = summary.overall.prefix_cache {
        return Some(hits.hit_rate * 100.0);
    }
    let metric = summary
        .server_metrics
        .as_ref()?
        .overall
        .aggregate_metric("prefix_cache_hit_rate")?;
    match metric.figures {
        llmbench_metrics::server_metrics::Figures::Ratio { percent } => Some(percent),
        _ => None,
    }
}

/// The raw `capacity` block of `summary.json`, for comparison.json.
pub(crate) fn capacity_block(summary_json: &Value) -> Option<Value> {
    summary_json
        .get("capacity")
        .filter(|c| !c.is_null())
        .cloned()
}

/// The SLO verdict over the full summary, by the operator's rule (`SloSpec::verdict`).
pub(crate) fn slo_verdict(slo: &SloSpec, summary: &RunSummary) -> Result<String, String> {
    let latency = &summary.overall.latency_ms;
    let p99 = |stats: &Option<Stats>| stats.as_ref().map(|s| s.p99);
    slo.verdict(&llmbench_api::v1alpha1::SloFigures {
        ttft_p99_ms: p99(&latency.ttft),
        tpot_p99_ms: p99(&latency.tpot),
        itl_p99_ms: p99(&latency.itl),
        e2e_p99_ms: p99(&latency.e2e),
        requests: summary.overall.requests.total,
        failures: summary.overall.requests.failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary.json as a run writes it, trimmed to what the figures read.
    fn summary(ttft_p99: f64, failed: u64, extra: Value) -> ReadSummary {
        let stats = |p50: f64, p99: f64| {
            serde_json::json!({"count": 10, "mean": p50, "stddev": 0.0, "min": p50, "max": p99, "p50": p50,
                "p90": p99, "p95": p99, "p99": p99, "p999": p99})
        };
        let mut raw = serde_json::json!({
            "schema": "llmbench.summary/v1", "run_id": "r", "harness": "vllm-benchmark", "model": "m",
            "endpoint": "http://x",
            "requests": {"total": 10, "succeeded": 10 - failed, "failed": failed},
            "failure_rate": failed as f64 / 10.0, "duration_s": 2.0,
            "throughput": {"requests_per_s": 5.0, "input_tokens_per_s": 50.0, "output_tokens_per_s": 40.0,
                "total_tokens_per_s": 90.0},
            "latency_ms": {"ttft": stats(10.0, ttft_p99), "tpot": stats(2.0, 3.0), "itl": null, "ntpot": null,
                "e2e": stats(50.0, 90.0), "ttft_from_scheduled": null, "e2e_from_scheduled": null},
            "schedule": {"requested_rate": null, "achieved_rate": null, "delay_ms": null},
            "errors": {},
            "stages": [],
        });
        if let (Some(raw), Some(extra)) = (raw.as_object_mut(), extra.as_object()) {
            raw.extend(extra.clone());
        }
        ReadSummary {
            summary: serde_json::from_value(raw.clone()).expect("a valid summary"),
            raw,
        }
    }

    #[test]
    fn figures_come_from_the_summary_and_the_slo_judges_p99s_and_failures() {
        let slo = SloSpec {
            ttft_p99_ms: Some(100.0),
            tpot_p99_ms: None,
            itl_p99_ms: None,
            e2e_p99_ms: None,
            max_failure_rate: Some(0.1),
        };
        let f = run_figures(&summary(80.0, 1, Value::Null), Some(&slo));
        assert_eq!(
            (f.requests_per_second, f.output_tokens_per_second),
            (5.0, 40.0)
        );
        assert_eq!(
            (f.ttft_p50_ms, f.ttft_p99_ms, f.tpot_p99_ms),
            (Some(10.0), Some(80.0), Some(3.0))
        );
        assert_eq!((f.itl_p99_ms, f.failures, f.slo_met), (None, 1, Some(true)));
        // TTFT over its bound, and a failure rate of 0.2 over 0.1: both are named.
        let err = slo_verdict(&slo, &summary(120.0, 2, Value::Null).summary).unwrap_err();
        assert!(
            err.contains("TTFT p99 120.0 ms > 100 ms") && err.contains("failure rate 0.2000"),
            "{err}"
        );
        // An ITL bound on a run that measured no ITL is a violation, not a pass.
        let itl = SloSpec {
            itl_p99_ms: Some(5.0),
            ..slo.clone()
        };
        assert!(
            slo_verdict(&itl, &summary(80.0, 0, Value::Null).summary)
                .unwrap_err()
                .contains("not measured")
        );
        assert_eq!(
            run_figures(&summary(80.0, 0, Value::Null), None).slo_met,
            None
        );
    }

    #[test]
    fn the_capacity_answer_comes_from_the_runs_capacity_search() {
        assert_eq!(
            run_figures(&summary(1.0, 0, Value::Null), None).capacity,
            None
        );
        // A one-point search (start = max = 1) whose point meets the objective: above_max, answer 1.
        let spec: llmbench_api::capacity::CapacitySearchSpec = serde_json::from_value(
            serde_json::json!({"load": "rate", "slo": ["ttft_p99<=100ms"], "start": 1, "max": 1}),
        )
        .expect("a spec");
        let search = llmbench_api::capacity::CapacitySearch::try_from(&spec).expect("valid");
        let point = summary(1.0, 0, Value::Null).summary.overall;
        let outcome = llmbench_metrics::metrics::capacity::replay(search, &[(0, &point)]);
        assert_eq!(outcome.answer, Some(1.0));
        let with = summary(
            1.0,
            0,
            serde_json::json!({ "capacity": serde_json::to_value(&outcome).expect("json") }),
        );
        assert_eq!(run_figures(&with, None).capacity, Some(1.0));
        assert!(capacity_block(&with.raw).is_some());
    }
}
