//! A run's service-level objective: bounds on its p99 latencies and its failure rate, and the one rule that
//! judges a run by them — the operator on a BenchmarkRun's status, `llmbench experiment` on summary.json.
//! `llmbench-api` embeds [`SloSpec`] in the CRDs (`spec.slo`), so its doc comments are the CRD's descriptions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bounds on the run's 99th percentiles, in milliseconds, and on its failure rate.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SloSpec {
    /// Time to first token, p99, at most this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub ttft_p99_ms: Option<f64>,
    /// Time per output token (after the first), p99, at most this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub tpot_p99_ms: Option<f64>,
    /// Inter-token latency, p99, at most this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub itl_p99_ms: Option<f64>,
    /// End-to-end request latency, p99, at most this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub e2e_p99_ms: Option<f64>,
    /// The fraction of failed requests, at most this (0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_failure_rate: Option<f64>,
}

/// What an SLO is judged on: a run's p99 latencies in milliseconds (`None` when not measured) and its counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SloFigures {
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub requests: u64,
    pub failures: u64,
}

impl SloSpec {
    /// The verdict: `Ok(message)` when every bound holds, `Err(message)` listing each one that does not. A bounded
    /// metric the run did not measure counts as a violation, and so does a run without requests. The operator (on a
    /// run's status) and `llmbench experiment` (on summary.json) judge by this one rule.
    pub fn verdict(&self, figures: &SloFigures) -> Result<String, String> {
        let mut violations = Vec::new();
        let mut checked = Vec::new();
        let bounds = [
            ("TTFT", self.ttft_p99_ms, figures.ttft_p99_ms),
            ("TPOT", self.tpot_p99_ms, figures.tpot_p99_ms),
            ("ITL", self.itl_p99_ms, figures.itl_p99_ms),
            ("E2E", self.e2e_p99_ms, figures.e2e_p99_ms),
        ];
        for (name, bound, p99) in bounds {
            let Some(bound) = bound else { continue };
            match p99 {
                Some(p99) if p99 <= bound => {
                    checked.push(format!("{name} p99 {p99:.1} ms ≤ {bound} ms"))
                }
                Some(p99) => violations.push(format!("{name} p99 {p99:.1} ms > {bound} ms")),
                None => violations.push(format!("{name} p99 was not measured (bound {bound} ms)")),
            }
        }
        if let Some(max) = self.max_failure_rate {
            let rate = if figures.requests == 0 {
                1.0
            } else {
                figures.failures as f64 / figures.requests as f64
            };
            let text = format!(
                "failure rate {rate:.4} ({} of {})",
                figures.failures, figures.requests
            );
            if rate <= max {
                checked.push(format!("{text} ≤ {max}"));
            } else {
                violations.push(format!("{text} > {max}"));
            }
        }
        if violations.is_empty() {
            Ok(if checked.is_empty() {
                "no SLO bounds are set".to_owned()
            } else {
                checked.join("; ")
            })
        } else {
            Err(violations.join("; "))
        }
    }
}
