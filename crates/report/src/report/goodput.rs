//! Goodput: how many successful requests met every service-level objective, by each tool's definition.
//!
//! - vllm bench serve (`calculate_metrics`): over the successful requests, a request is good when each named
//!   metric is within its limit — TTFT and E2EL by vLLM's definitions, TPOT = (E2EL − TTFT)/(n − 1), taken as 0
//!   when n ≤ 1; `request_goodput` = good / the run's duration. Only ttft, tpot and e2el exist.
//! - inference-perf (`calculate_goodput_metrics`): over the successful requests, a request is good when each
//!   constraint holds — TTFT, TPOT, ITL (the request's mean token gap), NTPOT and request latency by its
//!   definitions; a metric a request does not have (TTFT without streaming) fails it. It reports the percentage,
//!   `request_goodput` and `token_goodput` per second of `max(end) − min(start)` over those requests, and each
//!   metric's attainment percentage.
//!
//! - AIPerf (`good_request_count_metric.py`, `goodput_metric.py`): over the valid requests, a request is good when
//!   each named metric (`time_to_first_token`, `inter_token_latency`, `request_latency`, by AIPerf's definitions:
//!   [`super::aiperf_records::aiperf_times`]) is at most its limit; one without the metric is not good.
//!
//! guidellm has no goodput; its profiles get inference-perf's definition in `summary.json`.

use serde_json::{Value, json};

use super::inference_perf::latencies;
use super::meta::Slo;
use super::secs;
use llmbench_metrics::metrics::Goodput;
use llmbench_model::record::RequestRecord;
use llmbench_workload::workload::SloMetric;

/// Whose goodput definition applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    Vllm,
    InferencePerf,
    Aiperf,
}

fn metric_name(metric: SloMetric, definition: Definition) -> &'static str {
    match (metric, definition) {
        (SloMetric::Ttft, Definition::Aiperf) => "time_to_first_token",
        (SloMetric::Itl, Definition::Aiperf) => "inter_token_latency",
        (SloMetric::Ttft, _) => "ttft",
        (SloMetric::Tpot, _) => "tpot",
        (SloMetric::Itl, _) => "itl",
        (SloMetric::Ntpot, _) => "ntpot",
        (SloMetric::E2e, Definition::Vllm) => "e2el",
        (SloMetric::E2e, Definition::InferencePerf | Definition::Aiperf) => "request_latency",
    }
}

/// The metric's value for `r` in seconds by `definition`; `None` when the request has no such value.
fn value_s(r: &RequestRecord, metric: SloMetric, definition: Definition) -> Option<f64> {
    match definition {
        Definition::Vllm => {
            let e2el = r.e2e_vllm_ns().unwrap_or(r.e2e_ns());
            let ttft = r.ttft_vllm_ns();
            match metric {
                SloMetric::Ttft => ttft.map(secs),
                SloMetric::E2e => Some(secs(e2el)),
                SloMetric::Tpot => {
                    let n = r.output_tokens();
                    Some(if n > 1 {
                        secs(e2el.saturating_sub(ttft.unwrap_or(0))) / f64::from(n - 1)
                    } else {
                        0.0
                    })
                }
                // Not vLLM metrics; the parser refuses them for vllm profiles.
                SloMetric::Itl | SloMetric::Ntpot => None,
            }
        }
        Definition::Aiperf => {
            super::aiperf_records::aiperf_metric_s(&super::aiperf_records::aiperf_times(r), metric)
        }
        Definition::InferencePerf => {
            let l = latencies(r);
            match metric {
                SloMetric::Ttft => l.ttft,
                SloMetric::Tpot => l.tpot,
                SloMetric::Itl => {
                    (!l.itl.is_empty()).then(|| l.itl.iter().sum::<f64>() / l.itl.len() as f64)
                }
                SloMetric::Ntpot => Some(l.ntpot),
                SloMetric::E2e => Some(l.request_latency),
            }
        }
    }
}

/// Per judged request, whether each objective held, and whether all did.
fn judge(r: &RequestRecord, slos: &[Slo], definition: Definition) -> (Vec<bool>, bool) {
    let met: Vec<bool> = slos
        .iter()
        .map(|slo| value_s(r, slo.metric, definition).is_some_and(|v| v <= slo.limit_s))
        .collect();
    let all = met.iter().all(|m| *m);
    (met, all)
}

/// The goodput of a bucket's `records` over `duration_s`; `None` without objectives.
pub fn goodput(
    records: &[&RequestRecord],
    slos: &[Slo],
    definition: Definition,
    duration_s: f64,
) -> Option<Goodput> {
    let mut tally = GoodputTally::new(slos, definition);
    records.iter().for_each(|r| tally.add(r));
    tally.goodput(duration_s)
}

/// inference-perf's `goodput_metrics` object of `successes`; `None` without objectives or successes.
pub fn inference_perf_goodput_metrics(records: &[&RequestRecord], slos: &[Slo]) -> Option<Value> {
    let mut tally = GoodputTally::new(slos, Definition::InferencePerf);
    records.iter().for_each(|r| tally.add(r));
    tally.inference_perf_metrics()
}

/// Goodput counted request by request: a bucket streamed back from disk counts exactly as one held in memory,
/// and stages' tallies merge into the run's.
#[derive(Debug, Clone)]
pub struct GoodputTally {
    slos: Vec<Slo>,
    definition: Definition,
    /// Successful requests judged (by the definition's notion of success).
    judged: u64,
    good: u64,
    /// Per objective, the judged requests that met it.
    met: Vec<u64>,
    /// Input and output tokens of the good requests (inference-perf's `token_goodput`).
    good_tokens: u64,
    /// The judged requests' first send and last end (inference-perf's goodput window).
    first_sent_ns: u64,
    last_end_ns: u64,
}

impl GoodputTally {
    pub fn new(slos: &[Slo], definition: Definition) -> GoodputTally {
        GoodputTally {
            slos: slos.to_vec(),
            definition,
            judged: 0,
            good: 0,
            met: vec![0; slos.len()],
            good_tokens: 0,
            first_sent_ns: u64::MAX,
            last_end_ns: 0,
        }
    }

    /// Judges `r` if it succeeded by the definition's notion of success.
    pub fn add(&mut self, r: &RequestRecord) {
        if self.slos.is_empty() {
            return;
        }
        let ok = match self.definition {
            Definition::Vllm => super::vllm::succeeded(r),
            // An answer cut short is a failure to inference-perf (`TruncatedResponseError`).
            Definition::InferencePerf => r.outcome() == llmbench_model::record::Outcome::Succeeded,
            // AIPerf's valid records: no error (an answer cut short included), and not cut by its grace period.
            Definition::Aiperf => r.succeeded(),
        };
        if !ok {
            return;
        }
        let (each, all) = judge(r, &self.slos, self.definition);
        self.judged += 1;
        self.good += u64::from(all);
        for (count, m) in self.met.iter_mut().zip(each) {
            *count += u64::from(m);
        }
        if all {
            self.good_tokens += u64::from(r.input_tokens) + u64::from(r.output_tokens());
        }
        self.first_sent_ns = self.first_sent_ns.min(r.sent_ns);
        self.last_end_ns = self.last_end_ns.max(r.end_ns);
    }

    /// Adds what `other` counted.
    pub fn merge(&mut self, other: &GoodputTally) {
        self.judged += other.judged;
        self.good += other.good;
        for (mine, theirs) in self.met.iter_mut().zip(&other.met) {
            *mine += theirs;
        }
        self.good_tokens += other.good_tokens;
        self.first_sent_ns = self.first_sent_ns.min(other.first_sent_ns);
        self.last_end_ns = self.last_end_ns.max(other.last_end_ns);
    }

    /// The goodput over `duration_s`; `None` without objectives.
    pub fn goodput(&self, duration_s: f64) -> Option<Goodput> {
        if self.slos.is_empty() {
            return None;
        }
        let judged = self.judged;
        let percent = |n: u64| {
            if judged == 0 {
                0.0
            } else {
                n as f64 / judged as f64 * 100.0
            }
        };
        Some(Goodput {
            good: self.good,
            judged,
            percentage: percent(self.good),
            requests_per_s: if duration_s > 0.0 {
                self.good as f64 / duration_s
            } else {
                0.0
            },
            attainment_percentage: self
                .slos
                .iter()
                .zip(&self.met)
                .map(|(slo, n)| {
                    (
                        metric_name(slo.metric, self.definition).to_owned(),
                        percent(*n),
                    )
                })
                .collect(),
        })
    }

    /// inference-perf's `goodput_metrics` object over the judged requests' own window; `None` without
    /// objectives or successes.
    pub(crate) fn inference_perf_metrics(&self) -> Option<Value> {
        if self.judged == 0 {
            return None;
        }
        let time = secs(self.last_end_ns.saturating_sub(self.first_sent_ns));
        let summary = self.goodput(time)?;
        let mut out = serde_json::Map::new();
        out.insert("goodput_percentage".into(), json!(summary.percentage));
        out.insert("request_goodput".into(), json!(summary.requests_per_s));
        out.insert(
            "token_goodput".into(),
            json!(if time > 0.0 {
                self.good_tokens as f64 / time
            } else {
                0.0
            }),
        );
        out.insert("good_requests".into(), json!(summary.good));
        out.insert("total_requests".into(), json!(summary.judged));
        for (metric, percentage) in &summary.attainment_percentage {
            out.insert(format!("{metric}_attainment_percentage"), json!(percentage));
        }
        Some(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed success sent at 0: content chunks at `chunks_ms`, ended at `end_ms`, `n` output tokens.
    fn streamed(chunks_ms: &[u64], end_ms: u64) -> RequestRecord {
        let mut record = RequestRecord::builder(0)
            .end(end_ms * 1_000_000)
            .input_tokens(10)
            .ok()
            .usage(10, chunks_ms.len() as u32);
        for &ms in chunks_ms {
            record = record.content_at(ms * 1_000_000, 1);
        }
        record.build()
    }

    fn slo(metric: SloMetric, limit_ms: f64) -> Slo {
        Slo {
            metric,
            limit_s: limit_ms / 1000.0,
        }
    }

    #[test]
    fn vllm_goodput_counts_requests_meeting_every_limit() {
        // A: TTFT 100 ms, chunks at 100/120/140, last chunk 140 → E2EL 140, TPOT (140−100)/2 = 20 ms.
        // B: TTFT 300 ms → fails ttft ≤ 200.  C: TTFT 50, chunks 50/150/250 → TPOT 100 ms, fails tpot ≤ 50.
        let a = streamed(&[100, 120, 140], 150);
        let b = streamed(&[300, 310, 320], 330);
        let c = streamed(&[50, 150, 250], 260);
        let records = [&a, &b, &c];
        let slos = [slo(SloMetric::Ttft, 200.0), slo(SloMetric::Tpot, 50.0)];
        let g = goodput(&records, &slos, Definition::Vllm, 2.0).expect("objectives");
        assert_eq!((g.good, g.judged), (1, 3));
        assert_eq!(g.requests_per_s, 0.5);
        assert!((g.percentage - 100.0 / 3.0).abs() < 1e-9);
        assert!((g.attainment_percentage["ttft"] - 200.0 / 3.0).abs() < 1e-9);
        assert!((g.attainment_percentage["tpot"] - 200.0 / 3.0).abs() < 1e-9);
        // E2EL is the last chunk, not the end of the response: A's 140 ms ≤ 145 ms.
        let g = goodput(&[&a], &[slo(SloMetric::E2e, 145.0)], Definition::Vllm, 1.0)
            .expect("objectives");
        assert_eq!(g.good, 1);
    }

    #[test]
    fn vllm_tpot_of_a_one_token_answer_is_zero_and_good() {
        let one = streamed(&[100], 100);
        let g = goodput(&[&one], &[slo(SloMetric::Tpot, 1.0)], Definition::Vllm, 1.0)
            .expect("objectives");
        assert_eq!(g.good, 1);
    }

    #[test]
    fn inference_perf_goodput_fails_a_request_missing_the_metric_and_uses_mean_itl() {
        // ITL of A: gaps 20, 20 → mean 20 ms. A non-streamed request has no TTFT: not good for ttft.
        let a = streamed(&[100, 120, 140], 150);
        let mut flat = streamed(&[], 80);
        flat.streaming = false;
        let slos = [slo(SloMetric::Itl, 25.0)];
        let g = goodput(&[&a], &slos, Definition::InferencePerf, 1.0).expect("objectives");
        assert_eq!(g.good, 1);
        let g = goodput(
            &[&a, &flat],
            &[slo(SloMetric::Ttft, 1000.0)],
            Definition::InferencePerf,
            1.0,
        )
        .expect("objectives");
        assert_eq!((g.good, g.judged), (1, 2));
    }

    #[test]
    fn inference_perf_goodput_metrics_match_its_report_shape() {
        // Two successes: A (0–150 ms, good), B (0–330 ms, TTFT 300 fails ≤ 200). Window 330 ms.
        let a = streamed(&[100, 120, 140], 150);
        let b = streamed(&[300, 310, 320], 330);
        let v = inference_perf_goodput_metrics(&[&a, &b], &[slo(SloMetric::Ttft, 200.0)])
            .expect("goodput");
        assert_eq!(v["good_requests"], 1);
        assert_eq!(v["total_requests"], 2);
        assert_eq!(v["goodput_percentage"], 50.0);
        assert!((v["request_goodput"].as_f64().expect("f64") - 1.0 / 0.33).abs() < 1e-9);
        // Good tokens: A's 10 input + 3 output.
        assert!((v["token_goodput"].as_f64().expect("f64") - 13.0 / 0.33).abs() < 1e-9);
        assert_eq!(v["ttft_attainment_percentage"], 50.0);
    }

    #[test]
    fn no_objectives_no_goodput() {
        let a = streamed(&[1], 1);
        assert!(goodput(&[&a], &[], Definition::Vllm, 1.0).is_none());
        assert!(inference_perf_goodput_metrics(&[&a], &[]).is_none());
    }
}
