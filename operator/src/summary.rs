//! The launcher's compact summary (schema `llmbench.summary/v1`, written to the termination log by
//! `--summary-file`) parsed into the run's status summary; several shards' summaries aggregated into one; the
//! SLO verdict. Pure: no Kubernetes client. The contract's types are `llmbench_core::summary::v1`'s, the ones the
//! launcher writes with.

use llmbench_api::summary::v1::{self, CompactSummary};
use llmbench_api::v1alpha1::{
    HarnessVerdict, Latencies, LatencyStats, RunSummary, SloFigures, SloSpec, Throughput,
};

/// The schema id the launcher writes.
pub const SUMMARY_SCHEMA: &str = v1::SCHEMA;

/// Why a termination message is not a summary.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SummaryError {
    #[error("launcher pod {pod} left no termination message, so there is no summary")]
    Empty { pod: String },
    #[error("launcher pod {pod}'s termination message is not an llmbench summary: {message}")]
    Malformed { pod: String, message: String },
    #[error(
        "launcher pod {pod}'s termination message has schema {found}, but this operator reads {SUMMARY_SCHEMA}"
    )]
    Schema { pod: String, found: String },
}

/// Parses launcher pod `pod`'s termination message: the compact summary of `llmbench.summary/v1`, as the
/// status shows it.
pub fn parse_summary(pod: &str, message: &str) -> Result<RunSummary, SummaryError> {
    let message = message.trim();
    if message.is_empty() {
        return Err(SummaryError::Empty {
            pod: pod.to_owned(),
        });
    }
    let compact: CompactSummary =
        serde_json::from_str(message).map_err(|e| SummaryError::Malformed {
            pod: pod.to_owned(),
            message: e.to_string(),
        })?;
    if !compact.schema.is_empty() && compact.schema != SUMMARY_SCHEMA {
        return Err(SummaryError::Schema {
            pod: pod.to_owned(),
            found: compact.schema,
        });
    }
    Ok(RunSummary::from(&compact))
}

/// One summary for shards that ran side by side: counts and throughputs add up, the duration is the longest
/// shard's, latency means are weighted by successful requests and percentiles are the worst shard's — an upper
/// bound, since percentiles do not merge; `llmbench report` on the results directory computes them exactly.
pub fn aggregate(shards: &[RunSummary]) -> Option<RunSummary> {
    match shards {
        [] => None,
        [one] => Some(one.clone()),
        _ => {
            let weight = |s: &RunSummary| {
                s.requests
                    .saturating_sub(s.failures)
                    .saturating_sub(s.truncated) as f64
            };
            let merge = |pick: fn(&Latencies) -> &Option<LatencyStats>| {
                let measured: Vec<(f64, &LatencyStats)> = shards
                    .iter()
                    .filter_map(|s| pick(&s.latency_ms).as_ref().map(|l| (weight(s), l)))
                    .collect();
                if measured.is_empty() {
                    return None;
                }
                let total: f64 = measured.iter().map(|(w, _)| w).sum();
                let mean = if total > 0.0 {
                    measured.iter().map(|(w, l)| w * l.mean).sum::<f64>() / total
                } else {
                    measured.iter().map(|(_, l)| l.mean).sum::<f64>() / measured.len() as f64
                };
                let worst = |f: fn(&LatencyStats) -> f64| {
                    measured.iter().map(|(_, l)| f(l)).fold(0.0, f64::max)
                };
                Some(LatencyStats {
                    mean,
                    p50: worst(|l| l.p50),
                    p90: worst(|l| l.p90),
                    p99: worst(|l| l.p99),
                })
            };
            Some(RunSummary {
                requests: shards.iter().map(|s| s.requests).sum(),
                failures: shards.iter().map(|s| s.failures).sum(),
                truncated: shards.iter().map(|s| s.truncated).sum(),
                duration_seconds: shards
                    .iter()
                    .map(|s| s.duration_seconds)
                    .fold(0.0, f64::max),
                throughput: Throughput {
                    requests_per_second: shards
                        .iter()
                        .map(|s| s.throughput.requests_per_second)
                        .sum(),
                    input_tokens_per_second: shards
                        .iter()
                        .map(|s| s.throughput.input_tokens_per_second)
                        .sum(),
                    output_tokens_per_second: shards
                        .iter()
                        .map(|s| s.throughput.output_tokens_per_second)
                        .sum(),
                },
                latency_ms: Latencies {
                    ttft: merge(|l| &l.ttft),
                    tpot: merge(|l| &l.tpot),
                    itl: merge(|l| &l.itl),
                    ntpot: merge(|l| &l.ntpot),
                    e2e: merge(|l| &l.e2e),
                    ttfo: merge(|l| &l.ttfo),
                },
                verdict: merge_verdicts(shards),
                goodput_percent: merge_goodput(shards),
                // A search is one process's decision: each shard judges its share of the load, so the run's
                // capacity is the most cautious shard's.
                capacity: shards
                    .iter()
                    .filter_map(|s| s.capacity.clone())
                    .min_by(|a, b| {
                        a.answer
                            .unwrap_or(f64::NEG_INFINITY)
                            .total_cmp(&b.answer.unwrap_or(f64::NEG_INFINITY))
                    }),
                // Only shard 0 scrapes the stack, for the whole run.
                server: shards.iter().find_map(|s| s.server.clone()),
                // Only the merge knows when each shard started.
                start_skew_ms: None,
                // A rate over prompt tokens the shards' summaries do not carry: only the merge's exact summary
                // has it.
                prefix_cache_hit_percent: None,
                // Every shard reads the same server log: one shard's figures are the run's.
                model_load: shards.iter().find_map(|s| s.model_load.clone()),
                // Every shard ran against the same stack and recorded it alike: the first one that says.
                engine: shards.iter().find_map(|s| s.engine.clone()),
            })
        }
    }
}

/// Goodput over shards: each shard's percentage weighted by its successful requests (the requests it judged).
fn merge_goodput(shards: &[RunSummary]) -> Option<f64> {
    let measured: Vec<(f64, f64)> = shards
        .iter()
        .filter_map(|s| {
            let successes = s.requests.saturating_sub(s.failures) as f64;
            s.goodput_percent.map(|g| (successes, g))
        })
        .collect();
    if measured.is_empty() {
        return None;
    }
    let total: f64 = measured.iter().map(|(w, _)| w).sum();
    Some(if total > 0.0 {
        measured.iter().map(|(w, g)| w * g).sum::<f64>() / total
    } else {
        measured.iter().map(|(_, g)| g).sum::<f64>() / measured.len() as f64
    })
}

/// The shards' verdicts as one: passed only if every shard that judged passed, with every failed check once.
fn merge_verdicts(shards: &[RunSummary]) -> Option<HarnessVerdict> {
    let verdicts: Vec<&HarnessVerdict> = shards.iter().filter_map(|s| s.verdict.as_ref()).collect();
    let first = verdicts.first()?;
    let passed = verdicts.iter().all(|v| v.passed);
    let mut failed_checks: Vec<String> = verdicts
        .iter()
        .flat_map(|v| v.failed_checks.iter().cloned())
        .collect();
    failed_checks.sort();
    failed_checks.dedup();
    let result = verdicts
        .iter()
        .find(|v| !v.passed)
        .map_or_else(|| first.result.clone(), |v| v.result.clone());
    Some(HarnessVerdict {
        by: first.by.clone(),
        passed,
        result,
        failed_checks,
    })
}

/// The harness's verdict as SLOMet sees it: `Ok(message)` when it passed, `Err(message)` naming the failed checks.
pub fn harness_verdict(verdict: &HarnessVerdict) -> Result<String, String> {
    let message = if verdict.failed_checks.is_empty() {
        format!("{}: {}", verdict.by, verdict.result)
    } else {
        format!(
            "{}: {} (failed: {})",
            verdict.by,
            verdict.result,
            verdict.failed_checks.join(", ")
        )
    };
    if verdict.passed {
        Ok(message)
    } else {
        Err(message)
    }
}

/// The SLO verdict: `Ok(message)` when every bound holds, `Err(message)` listing each one that does not. A
/// bounded metric the run did not measure counts as a violation: an SLO cannot be met by not measuring it.
pub fn slo_verdict(slo: &SloSpec, summary: &RunSummary) -> Result<String, String> {
    let p99 = |stats: &Option<LatencyStats>| stats.as_ref().map(|s| s.p99);
    slo.verdict(&SloFigures {
        ttft_p99_ms: p99(&summary.latency_ms.ttft),
        tpot_p99_ms: p99(&summary.latency_ms.tpot),
        itl_p99_ms: p99(&summary.latency_ms.itl),
        e2e_p99_ms: p99(&summary.latency_ms.e2e),
        requests: summary.requests,
        failures: summary.failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact summary as the launcher writes it (extra fields included).
    const COMPACT: &str = r#"{"schema":"llmbench.summary/v1","run_id":"bench-1-0f3c9a2e","harness":"inference-perf","model":"m","endpoint":"http://a:1","requests":{"total":100,"succeeded":98,"failed":2},"duration_s":10.5,"throughput":{"requests_per_s":9.33,"input_tokens_per_s":1000.0,"output_tokens_per_s":500.0},"latency_ms":{"ttft":{"mean":20.0,"p50":18.0,"p90":30.0,"p99":45.0},"tpot":{"mean":5.0,"p50":5.0,"p90":6.0,"p99":7.0},"itl":null,"ntpot":null,"e2e":{"mean":400.0,"p50":380.0,"p90":500.0,"p99":650.0}},"schedule":{"requested_rate":10.0,"achieved_rate":9.9,"delay_ms":{"p50":0.1,"p99":0.5}},"errors":{"http_500":2},"stages":[]}"#;

    #[test]
    fn a_compact_summary_becomes_the_status_summary() {
        let s = parse_summary("p", COMPACT).expect("parses");
        assert_eq!((s.requests, s.failures), (100, 2));
        assert_eq!(s.duration_seconds, 10.5);
        assert_eq!(s.throughput.requests_per_second, 9.33);
        assert_eq!(s.latency_ms.ttft.as_ref().map(|t| t.p99), Some(45.0));
        assert!(
            s.latency_ms.itl.is_none(),
            "an unmeasured metric stays absent"
        );
    }

    #[test]
    fn goodput_and_the_capacity_answer_reach_the_status_summary() {
        let with = COMPACT.replace(
            r#""stages":[]"#,
            r#""stages":[],"goodput_percent":97.5,"capacity":{"load":"rate","status":"found","answer":12.0,"passing":12.0,"failing":13.0,"points":6}"#,
        );
        let s = parse_summary("p", &with).expect("parses");
        assert_eq!(s.goodput_percent, Some(97.5));
        let capacity = s.capacity.expect("capacity");
        assert_eq!(
            (capacity.answer, capacity.failing, capacity.points),
            (Some(12.0), Some(13.0), 6)
        );
        let without = parse_summary("p", COMPACT).expect("parses");
        assert_eq!((without.goodput_percent, without.capacity), (None, None));
    }

    #[test]
    fn shards_weigh_goodput_by_their_successes() {
        let mut a = shard(10, 0, None);
        a.goodput_percent = Some(100.0);
        let mut b = shard(30, 0, None);
        b.goodput_percent = Some(80.0);
        let total = aggregate(&[a, b]).expect("two shards");
        assert_eq!(total.goodput_percent, Some(85.0));
    }

    #[test]
    fn an_empty_or_foreign_termination_message_is_not_a_summary() {
        assert!(matches!(
            parse_summary("p", "  \n"),
            Err(SummaryError::Empty { .. })
        ));
        let err = parse_summary("p", "Error: connection refused").expect_err("not JSON");
        assert!(err.to_string().contains("launcher pod p"), "{err}");
        let other = COMPACT.replace("llmbench.summary/v1", "llmbench.summary/v9");
        assert!(matches!(
            parse_summary("p", &other),
            Err(SummaryError::Schema { .. })
        ));
    }

    fn shard(requests: u64, failures: u64, ttft: Option<(f64, f64)>) -> RunSummary {
        RunSummary {
            requests,
            failures,
            truncated: 0,
            duration_seconds: requests as f64,
            throughput: Throughput {
                requests_per_second: 2.0,
                input_tokens_per_second: 10.0,
                output_tokens_per_second: 5.0,
            },
            latency_ms: Latencies {
                ttft: ttft.map(|(mean, p99)| LatencyStats {
                    mean,
                    p50: mean,
                    p90: p99,
                    p99,
                }),
                ..Latencies::default()
            },
            verdict: None,
            goodput_percent: None,
            capacity: None,
            server: None,
            start_skew_ms: None,
            prefix_cache_hit_percent: None,
            model_load: None,
            engine: None,
        }
    }

    #[test]
    fn shards_that_ran_against_one_stack_keep_its_engine_and_model_load() {
        let engine = llmbench_api::summary::v1::EngineInfo {
            name: Some("vLLM".to_owned()),
            image: Some("vllm/vllm-openai:v0.26.0".to_owned()),
            command: vec!["vllm".to_owned(), "serve".to_owned(), "m".to_owned()],
            model: Some("m".to_owned()),
            version: Some("0.26.0".to_owned()),
        };
        let with = RunSummary {
            engine: Some(engine.clone()),
            ..shard(5, 0, None)
        };
        // Shard 0 may be the one without (a probe that failed there): any shard's record is the stack's.
        let total = aggregate(&[shard(5, 0, None), with]).expect("a summary");
        assert_eq!(total.engine, Some(engine));
        assert_eq!(total.model_load, None);
    }

    #[test]
    fn shards_add_counts_and_throughput_and_keep_the_worst_percentile() {
        let total = aggregate(&[
            shard(10, 0, Some((10.0, 20.0))),
            shard(30, 0, Some((20.0, 50.0))),
        ])
        .expect("two shards");
        assert_eq!((total.requests, total.failures), (40, 0));
        assert_eq!(total.duration_seconds, 30.0);
        assert_eq!(total.throughput.requests_per_second, 4.0);
        assert_eq!(total.throughput.output_tokens_per_second, 10.0);
        let ttft = total.latency_ms.ttft.expect("ttft");
        assert_eq!(ttft.mean, 17.5, "weighted by successful requests");
        assert_eq!(ttft.p99, 50.0);
        assert!(total.latency_ms.e2e.is_none());
    }

    #[test]
    fn one_shard_is_its_own_aggregate_and_none_is_nothing() {
        let one = shard(5, 1, None);
        assert_eq!(aggregate(std::slice::from_ref(&one)), Some(one));
        assert_eq!(aggregate(&[]), None);
    }

    #[test]
    fn the_slo_verdict_names_each_violated_bound() {
        let summary = parse_summary("p", COMPACT).expect("parses");
        let met = SloSpec {
            ttft_p99_ms: Some(50.0),
            max_failure_rate: Some(0.05),
            ..SloSpec::default()
        };
        assert!(slo_verdict(&met, &summary).is_ok());
        let violated = SloSpec {
            ttft_p99_ms: Some(40.0),
            itl_p99_ms: Some(10.0),
            max_failure_rate: Some(0.01),
            ..SloSpec::default()
        };
        let message = slo_verdict(&violated, &summary).expect_err("violated");
        assert!(message.contains("TTFT p99 45.0 ms > 40 ms"), "{message}");
        assert!(message.contains("ITL p99 was not measured"), "{message}");
        assert!(
            message.contains("failure rate 0.0200 (2 of 100) > 0.01"),
            "{message}"
        );
    }
}
