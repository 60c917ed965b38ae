//! The run's verdict as LoadGen's `results.cc` decides it, from the raw records of the measured stage, and
//! `mlperf_log_summary.txt` in its layout.
//!
//! Per query: latency = end − scheduled; first-token latency = first content chunk − scheduled; TPOT =
//! (latency − first-token latency)/(tokens − 1), for tokens ≥ 2 (LoadGen logs `error_runtime` otherwise);
//! percentiles `sorted[⌊n·p⌋]`; means are integer divisions by the sample count, as LoadGen's. Warm-up stages are
//! excluded. `Result is : VALID` needs min duration, min queries, the Server TTFT/TPOT p99 limits and early
//! stopping (TPOT first, then TTFT, short-circuiting as LoadGen's `&&` does). A failed request, which LoadGen
//! cannot have (every query completes), is reported as an error and makes the run INVALID.
//!
//! MultiStream judges queries, not samples: a query's latency is from its issue to its slowest sample
//! (`loadgen.cc` `IssueQueries`: `scheduled_time` → `all_samples_done_time`), the summary's headline is their
//! target percentile, early stopping estimates it from them (`results.cc` `EarlyStopping`, MultiStream case, for
//! both its TPOT and TTFT calls), min queries counts queries and samples (`min_query_count · samples_per_query`),
//! and min duration is met by the last query's issue time.

use std::io::Write;
use std::path::Path;

use crate::metrics::percentile_mlperf;
use llmbench_model::record::RequestRecord;

use super::MlperfError;
use super::early_stopping::{EarlyStopping, MinPassingQueriesFinder, early_stopping};
use super::settings::{MlperfSettings, Scenario};

/// The percentiles LoadGen reports.
const PERCENTILES: [f64; 6] = [0.50, 0.90, 0.95, 0.97, 0.99, 0.999];

/// Where the measured stage sits on the run clock (the engine's `StageTimes` of `measured_stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTimes {
    pub measured_stage: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Min, max, mean and LoadGen's percentiles of one metric, in ns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: u64,
    /// `(percentile as a fraction, value)`, for 0.5, 0.9, 0.95, 0.97, 0.99, 0.999.
    pub percentiles: Vec<(f64, u64)>,
    /// The value at the settings' target percentile (0.99 for Server).
    pub target: u64,
}

impl LatencyStats {
    /// `divisor` is LoadGen's `sample_count`, which its token means divide by.
    fn of(values: &[u64], divisor: u64, target_percentile: f64) -> Option<Self> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let (min, max) = (*sorted.first()?, *sorted.last()?);
        let sum: u128 = sorted.iter().map(|v| u128::from(*v)).sum();
        let as_f64: Vec<f64> = sorted.iter().map(|v| *v as f64).collect();
        let at = |p: f64| percentile_mlperf(&as_f64, p).map_or(0, |v| v as u64);
        Some(LatencyStats {
            count: sorted.len() as u64,
            min,
            max,
            mean: u64::try_from(sum / u128::from(divisor.max(1))).unwrap_or(u64::MAX),
            percentiles: PERCENTILES.iter().map(|p| (*p, at(*p))).collect(),
            target: at(target_percentile),
        })
    }
}

/// Each validity check, as the summary prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Checks {
    /// Server only.
    pub performance_constraints: Option<bool>,
    pub min_duration: bool,
    pub min_queries: bool,
    pub early_stopping: bool,
}

/// The verdict of one MLPerf run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub valid: bool,
    pub checks: Checks,
    pub recommendations: Vec<String>,
    /// Server and SingleStream; `None` for Offline, or for TTFT when TPOT already failed (LoadGen never runs it).
    pub ttft_early_stopping: Option<EarlyStopping>,
    pub tpot_early_stopping: Option<EarlyStopping>,
    pub queries_issued: u64,
    pub sample_count: u64,
    pub token_count: u64,
    pub failed_queries: u64,
    /// SingleStream: the early-stopping estimate of the target percentile (LoadGen's `early_stopping_latency_ss`).
    pub early_stopping_latency_ss: Option<u64>,
    /// SingleStream: the 99th-percentile estimate; MultiStream: the target percentile's, on query latencies
    /// (LoadGen's `early_stopping_latency_ms`, the submission checker's MultiStream result).
    pub early_stopping_latency_ms: Option<u64>,
    pub latency: Option<LatencyStats>,
    /// MultiStream: per-query latency (issue → slowest sample).
    pub query_latency: Option<LatencyStats>,
    pub first_token_latency: Option<LatencyStats>,
    pub time_per_output_token: Option<LatencyStats>,
    /// Server: `(samples − 1)/final_query_all_samples_done_time`.
    pub completed_samples_per_second: Option<f64>,
    /// Server: `tokens/final_query_all_samples_done_time`.
    pub completed_tokens_per_second: Option<f64>,
    /// Server: `(samples − 1)/final_query_scheduled_time`.
    pub scheduled_samples_per_second: Option<f64>,
    /// Offline: `samples/max_latency`.
    pub samples_per_second: Option<f64>,
    /// Offline: `tokens/max_latency`.
    pub tokens_per_second: Option<f64>,
    /// Seconds from the measured stage's start.
    pub final_query_scheduled_time: f64,
    pub final_query_issued_time: f64,
    pub final_query_all_samples_done_time: f64,
    pub max_latency: f64,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
    pub settings: MlperfSettings,
    /// The dataset's size, when the caller knows it: the summary's effective `performance_sample_count` (for an
    /// override of 0) and `accuracy_sample_count`.
    pub dataset_len: Option<u64>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Offline's single query holds this many samples (`test_settings_internal.cc`).
pub fn offline_samples_per_query(settings: &MlperfSettings) -> u64 {
    let target = (1.1 * settings.min_duration_ms as f64 / 1000.0 * settings.target_qps) as u64;
    settings.min_query_count.max(target)
}

/// Judges the measured stage's records by LoadGen's rules.
pub fn evaluate(settings: &MlperfSettings, records: &[RequestRecord], run: &RunTimes) -> Verdict {
    let measured: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.stage == run.measured_stage)
        .collect();
    let start = run.start_ns;
    let mut errors = Vec::new();
    let mut latencies = Vec::new();
    let mut first_token = Vec::new();
    let mut tpot = Vec::new();
    let mut token_count = 0u64;
    let mut failed = 0u64;
    let mut short = 0u64;
    for r in &measured {
        if !r.succeeded() {
            failed += 1;
            continue;
        }
        let latency = r.e2e_from_scheduled_ns();
        latencies.push(latency);
        let tokens = r.output_tokens();
        token_count += u64::from(tokens);
        // Without a first content chunk the first token is the completion itself.
        let ttft = r.ttft_from_scheduled_ns().unwrap_or(latency);
        first_token.push(ttft);
        if tokens >= 2 {
            tpot.push(latency.saturating_sub(ttft) / u64::from(tokens - 1));
        } else {
            short += 1;
        }
    }
    if failed > 0 {
        errors.push(format!(
            "{failed} queries failed; LoadGen requires every issued query to complete"
        ));
    }
    if short > 0 {
        errors.push(format!(
            "{short} queries returned fewer than 2 tokens; their TPOT is undefined (LoadGen: error_runtime)"
        ));
    }
    // A MultiStream query's samples share their scheduled time (the engine's lockstep stamps the query's issue
    // time on each), so they group by it.
    let query_latencies = (settings.scenario == Scenario::MultiStream).then(|| {
        let mut by_query: std::collections::BTreeMap<u64, u64> = Default::default();
        for r in &measured {
            let done = by_query.entry(r.scheduled_ns).or_insert(r.end_ns);
            *done = (*done).max(r.end_ns);
        }
        by_query
            .into_iter()
            .map(|(scheduled, done)| done.saturating_sub(scheduled))
            .collect::<Vec<u64>>()
    });
    // Offline issues one query holding every sample: LoadGen counts (and logs as `result_query_count`) 1.
    let queries_issued = match (&query_latencies, settings.scenario) {
        (Some(queries), _) => queries.len() as u64,
        (None, Scenario::Offline) => u64::from(!measured.is_empty()),
        (None, _) => measured.len() as u64,
    };
    let sample_count = latencies.len() as u64;
    let p = settings.target_latency_percentile;
    let latency = LatencyStats::of(&latencies, sample_count, p);
    let first_token_latency = LatencyStats::of(&first_token, sample_count, p);
    let time_per_output_token = LatencyStats::of(&tpot, sample_count, p);
    let query_latency = query_latencies
        .as_ref()
        .and_then(|q| LatencyStats::of(q, q.len() as u64, p));

    let last_scheduled = measured.iter().max_by_key(|r| (r.scheduled_ns, r.id));
    let final_query_scheduled_time =
        secs(last_scheduled.map_or(0, |r| r.scheduled_ns.saturating_sub(start)));
    let final_query_all_samples_done_time =
        secs(last_scheduled.map_or(0, |r| r.end_ns.saturating_sub(start)));
    let final_query_issued_time = secs(
        measured
            .iter()
            .map(|r| r.sent_ns.saturating_sub(start))
            .max()
            .unwrap_or(0),
    );
    let max_latency = secs(latency.as_ref().map_or(0, |l| l.max));

    let min_duration = secs(settings.min_duration_ms.saturating_mul(1_000_000));
    let min_duration_met = match settings.scenario {
        Scenario::Offline => max_latency >= min_duration,
        Scenario::Server => final_query_scheduled_time >= min_duration,
        Scenario::SingleStream | Scenario::MultiStream => final_query_issued_time >= min_duration,
    };
    let (min_query_count, min_sample_count) = match settings.scenario {
        Scenario::Offline => (1, offline_samples_per_query(settings)),
        Scenario::Server | Scenario::SingleStream => {
            (settings.min_query_count, settings.min_query_count)
        }
        // `min_sample_count = min_query_count · samples_per_query` (test_settings_internal.cc).
        Scenario::MultiStream => (
            settings.min_query_count,
            settings
                .min_query_count
                .saturating_mul(settings.multi_stream_samples_per_query),
        ),
    };
    let min_queries_met = queries_issued >= min_query_count && sample_count >= min_sample_count;

    let mut recommendations = Vec::new();
    let performance_constraints = (settings.scenario == Scenario::Server).then(|| {
        let ttft_ok = first_token_latency
            .as_ref()
            .is_none_or(|s| s.target <= settings.ttft_latency_ns);
        let tpot_ok = time_per_output_token
            .as_ref()
            .is_none_or(|s| s.target <= settings.tpot_latency_ns);
        match (ttft_ok, tpot_ok) {
            (true, true) => {}
            (false, true) => recommendations
                .push("TTFT constrain not met: Reduce target QPS to improve latency.".to_string()),
            (true, false) => recommendations
                .push("TPOT constrain not met: Reduce target QPS to improve latency.".to_string()),
            (false, false) => recommendations.push(
                "TTFT constrain not met: Reduce target QPS to improve latency.\n * TPOT constrain not met: \
                 Reduce target QPS to improve latency."
                    .to_string(),
            ),
        }
        ttft_ok && tpot_ok
    });
    if !min_duration_met {
        recommendations.push(
            match settings.scenario {
                Scenario::SingleStream | Scenario::MultiStream => {
                    "Decrease the expected latency so the loadgen pre-generates more queries."
                }
                Scenario::Server => {
                    "Increase the target QPS so the loadgen pre-generates more queries."
                }
                Scenario::Offline => {
                    "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query."
                }
            }
            .to_string(),
        );
    }
    if !min_queries_met {
        recommendations.push(
            "The test exited early, before enough queries were issued.\n   See the detailed log for why this \
             may have occurred."
                .to_string(),
        );
    }

    let (tpot_es, ttft_es) = match settings.scenario {
        Scenario::Offline => (None, None),
        Scenario::Server => {
            let tpot_es = early_stopping(&tpot, settings.tpot_latency_ns, p, queries_issued);
            let ttft_es = tpot_es
                .satisfied
                .then(|| early_stopping(&first_token, settings.ttft_latency_ns, p, queries_issued));
            (Some(tpot_es), ttft_es)
        }
        Scenario::SingleStream => {
            let tpot_es = with_multi_stream_estimate(
                single_stream_early_stopping(&tpot, p, queries_issued),
                &tpot,
                queries_issued,
            );
            let ttft_es = tpot_es.satisfied.then(|| {
                with_multi_stream_estimate(
                    single_stream_early_stopping(&first_token, p, queries_issued),
                    &first_token,
                    queries_issued,
                )
            });
            (Some(tpot_es), ttft_es)
        }
        // LoadGen's MultiStream case reads the query latencies whichever token array it is handed, so its TPOT
        // and TTFT calls give the same estimate; TTFT still runs only when TPOT passed.
        Scenario::MultiStream => {
            let queries = query_latencies.as_deref().unwrap_or_default();
            let tpot_es = single_stream_early_stopping(queries, p, queries_issued);
            let ttft_es = tpot_es
                .satisfied
                .then(|| single_stream_early_stopping(queries, p, queries_issued));
            (Some(tpot_es), ttft_es)
        }
    };
    // LoadGen keeps the estimates of its last EarlyStopping call (TTFT's when it ran) for the detail log.
    let last_es = ttft_es.as_ref().or(tpot_es.as_ref());
    let (early_stopping_latency_ss, early_stopping_latency_ms) = match settings.scenario {
        Scenario::SingleStream => (
            last_es.and_then(|e| e.estimate),
            last_es.and_then(|e| e.multi_stream_estimate),
        ),
        Scenario::MultiStream => (None, last_es.and_then(|e| e.estimate)),
        Scenario::Server | Scenario::Offline => (None, None),
    };
    let early_stopping_met = tpot_es.as_ref().is_none_or(|e| e.satisfied)
        && ttft_es.as_ref().is_none_or(|e| e.satisfied);
    let perf_ok = performance_constraints.unwrap_or(true);
    let valid = min_duration_met && min_queries_met && perf_ok && early_stopping_met && failed == 0;

    let (mut completed_sps, mut completed_tps, mut scheduled_sps, mut sps, mut tps) =
        (None, None, None, None, None);
    match settings.scenario {
        Scenario::Server => {
            let samples_minus_one = sample_count.saturating_sub(1) as f64;
            completed_sps = Some(samples_minus_one / final_query_all_samples_done_time);
            completed_tps = Some(token_count as f64 / final_query_all_samples_done_time);
            scheduled_sps = Some(samples_minus_one / final_query_scheduled_time);
        }
        Scenario::Offline => {
            sps = Some(sample_count as f64 / max_latency);
            tps = Some(token_count as f64 / max_latency);
        }
        Scenario::SingleStream | Scenario::MultiStream => {}
    }

    Verdict {
        valid,
        checks: Checks {
            performance_constraints,
            min_duration: min_duration_met,
            min_queries: min_queries_met,
            early_stopping: early_stopping_met,
        },
        recommendations,
        ttft_early_stopping: ttft_es,
        tpot_early_stopping: tpot_es,
        queries_issued,
        sample_count,
        token_count,
        failed_queries: failed,
        early_stopping_latency_ss,
        early_stopping_latency_ms,
        latency,
        query_latency,
        first_token_latency,
        time_per_output_token,
        completed_samples_per_second: completed_sps,
        completed_tokens_per_second: completed_tps,
        scheduled_samples_per_second: scheduled_sps,
        samples_per_second: sps,
        tokens_per_second: tps,
        final_query_scheduled_time,
        final_query_issued_time,
        final_query_all_samples_done_time,
        max_latency,
        warnings: Vec::new(),
        errors,
        settings: settings.clone(),
        dataset_len: None,
    }
}

/// LoadGen's SingleStream (and MultiStream, on query latencies) early stopping: an estimate of the target
/// percentile that discards the highest latencies the sample size allows; it fails only when fewer than
/// h(1) + 1 queries ran.
fn single_stream_early_stopping(latencies: &[u64], p: f64, queries_issued: u64) -> EarlyStopping {
    let mut finder = MinPassingQueriesFinder::new();
    let issued = i64::try_from(queries_issued).unwrap_or(i64::MAX);
    let h_min = finder.find(1, p, 0.0, 0.99);
    if issued < h_min + 1 {
        return EarlyStopping {
            multi_stream_estimate: None,
            estimate: None,
            satisfied: false,
            overlatency: 0,
            min_passing: h_min as u64,
            message: format!(
                " * Only processed {issued} queries.\n * Need to process at least {} queries for early stopping.",
                h_min + 1
            ),
        };
    }
    let mut t = 1i64;
    for i in 2..=issued {
        let h = finder.find(i, p, 0.0, 0.99);
        if issued < h + i {
            t = i - 1;
            break;
        }
    }
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    let index = usize::try_from(issued - t)
        .unwrap_or(usize::MAX)
        .min(sorted.len().saturating_sub(1));
    let estimate = sorted.get(index).copied().unwrap_or(0);
    EarlyStopping {
        multi_stream_estimate: None,
        estimate: Some(estimate),
        satisfied: true,
        overlatency: (t - 1) as u64,
        min_passing: h_min as u64,
        message: format!(
            " * Processed at least {} queries ({issued}).\n * Would discard {} highest latency queries.\n * Early \
             stopping {:.1}th percentile estimate: {estimate}",
            h_min + 1,
            t - 1,
            p * 100.0
        ),
    }
}

/// LoadGen's SingleStream early stopping goes on, once its own estimate passed, to the 99th percentile's (used to
/// infer MultiStream from SingleStream), appending to the same message (`results.cc` `EarlyStopping`).
fn with_multi_stream_estimate(
    mut es: EarlyStopping,
    latencies: &[u64],
    queries_issued: u64,
) -> EarlyStopping {
    if !es.satisfied {
        return es;
    }
    let ms = single_stream_early_stopping(latencies, 0.99, queries_issued);
    match ms.estimate {
        Some(estimate) => {
            es.message
                .push_str(&format!("\n * Early stopping 99.0th percentile estimate: {estimate}"));
            es.multi_stream_estimate = Some(estimate);
        }
        None => es.message.push_str(&format!(
            "\n * Not enough queries processed for 99.0th percentile\n early stopping estimate (would need to \
             process at\n least {} total queries).",
            ms.min_passing + 1
        )),
    }
    es
}

/// C++ `ostream << double` with the default precision: `%g` with 6 significant digits.
pub(crate) fn ostream_double(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x.is_nan() {
            "nan".to_string()
        } else if x.is_infinite() {
            if x > 0.0 { "inf" } else { "-inf" }.to_string()
        } else {
            "0".to_string()
        };
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let strip = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip(mantissa.to_string()),
            exponent.abs()
        )
    } else {
        let decimals = (5 - exponent).max(0) as usize;
        strip(format!("{x:.decimals$}"))
    }
}

/// LoadGen's `DoubleToString`: fixed, 2 decimals.
pub(crate) fn fixed2(x: f64) -> String {
    format!("{x:.2}")
}

impl Verdict {
    /// LoadGen's `all_constraints_met`: every check but llmbench's own failed-request one.
    pub(crate) fn loadgen_valid(&self) -> bool {
        self.checks.performance_constraints.unwrap_or(true)
            && self.checks.min_duration
            && self.checks.min_queries
            && self.checks.early_stopping
    }

    /// `mlperf_log_summary.txt`, line for line as LoadGen's `LogSummary` writes it for token-latency runs.
    pub fn summary_txt(&self) -> String {
        let s = &self.settings;
        let mut out: Vec<String> = Vec::new();
        let mut line = |text: String| out.push(text);
        let sep = "================================================";
        line(format!("{sep}\nMLPerf Results Summary\n{sep}"));
        line(format!("SUT name : {}", s.sut_name));
        line(format!("Scenario : {}", s.scenario.as_str()));
        line(format!("Mode     : {}", s.mode.as_str()));
        let pct1 = format!("{:.1}", s.target_latency_percentile * 100.0);
        match s.scenario {
            Scenario::SingleStream | Scenario::MultiStream => {
                // MultiStream's headline is the per-query percentile; its first-token line stays per sample.
                let headline = match s.scenario {
                    Scenario::MultiStream => &self.query_latency,
                    _ => &self.latency,
                };
                line(format!(
                    "{pct1}th percentile latency (ns) : {}",
                    headline.as_ref().map_or(0, |l| l.target)
                ));
                line(format!(
                    "{pct1}th first token percentile latency (ns) : {}",
                    self.first_token_latency.as_ref().map_or(0, |l| l.target)
                ));
            }
            Scenario::Server => {
                line(format!(
                    "Completed samples per second    : {}",
                    fixed2(self.completed_samples_per_second.unwrap_or(0.0))
                ));
                line(format!(
                    "Completed tokens per second: {}",
                    fixed2(self.completed_tokens_per_second.unwrap_or(0.0))
                ));
            }
            Scenario::Offline => {
                line(format!(
                    "Samples per second: {}",
                    ostream_double(self.samples_per_second.unwrap_or(0.0))
                ));
                line(format!(
                    "Tokens per second: {}",
                    ostream_double(self.tokens_per_second.unwrap_or(0.0))
                ));
            }
        }
        let yes_no = |ok: bool| if ok { "Yes" } else { "NO" };
        line(format!(
            "Result is : {}",
            if self.valid { "VALID" } else { "INVALID" }
        ));
        if let Some(ok) = self.checks.performance_constraints {
            line(format!(
                "  Performance constraints satisfied : {}",
                yes_no(ok)
            ));
        }
        line(format!(
            "  Min duration satisfied : {}",
            yes_no(self.checks.min_duration)
        ));
        line(format!(
            "  Min queries satisfied : {}",
            yes_no(self.checks.min_queries)
        ));
        line(format!(
            "  Early stopping satisfied: {}",
            yes_no(self.checks.early_stopping)
        ));
        // LoadGen prints the heading whenever one of its checks failed, even with nothing under it (early
        // stopping alone); a failed request is llmbench's own reason and shows in the errors line instead.
        if !self.loadgen_valid() {
            line("Recommendations:".to_string());
            for r in &self.recommendations {
                line(format!(" * {r}"));
            }
        }
        if s.scenario != Scenario::Offline {
            line("TTFT Early Stopping Result:".to_string());
            line(
                self.ttft_early_stopping
                    .as_ref()
                    .map_or(String::new(), |e| e.message.clone()),
            );
            line("TPOT Early Stopping Result:".to_string());
            line(
                self.tpot_early_stopping
                    .as_ref()
                    .map_or(String::new(), |e| e.message.clone()),
            );
        }
        line(format!("\n{sep}\nAdditional Stats\n{sep}"));
        match s.scenario {
            Scenario::SingleStream => {
                let qps_w =
                    self.sample_count.saturating_sub(1) as f64 / self.final_query_issued_time;
                let mean_s = self.latency.as_ref().map_or(0.0, |l| secs(l.mean));
                line(format!(
                    "QPS w/ loadgen overhead         : {}",
                    fixed2(qps_w)
                ));
                line(format!(
                    "QPS w/o loadgen overhead        : {}",
                    fixed2(1.0 / mean_s)
                ));
                line(String::new());
            }
            Scenario::Server => line(format!(
                "Scheduled samples per second : {}",
                fixed2(self.scheduled_samples_per_second.unwrap_or(0.0))
            )),
            Scenario::MultiStream => line("Per-query latency:  ".to_string()),
            Scenario::Offline => {}
        }
        let stats_block =
            |out: &mut Vec<String>, stats: &Option<LatencyStats>, names: [&str; 4]| {
                let st = stats.clone().unwrap_or(LatencyStats {
                    count: 0,
                    min: 0,
                    max: 0,
                    mean: 0,
                    percentiles: PERCENTILES.iter().map(|p| (*p, 0)).collect(),
                    target: 0,
                });
                out.push(format!("{}{}", names[0], st.min));
                out.push(format!("{}{}", names[1], st.max));
                out.push(format!("{}{}", names[2], st.mean));
                for (p, v) in &st.percentiles {
                    out.push(format!("{} {}{v}", fixed2(p * 100.0), names[3]));
                }
            };
        stats_block(
            &mut out,
            // MultiStream prints the per-query block in place of the per-sample one.
            if s.scenario == Scenario::MultiStream {
                &self.query_latency
            } else {
                &self.latency
            },
            [
                "Min latency (ns)                : ",
                "Max latency (ns)                : ",
                "Mean latency (ns)               : ",
                "percentile latency (ns)   : ",
            ],
        );
        out.push(String::new());
        match s.scenario {
            Scenario::SingleStream => {
                let tps_w = self.token_count as f64 / self.final_query_issued_time;
                let mean_s = self.latency.as_ref().map_or(0.0, |l| secs(l.mean));
                let tps_wo = self.token_count as f64 / (mean_s * self.sample_count as f64);
                out.push(format!(
                    "TPS w/ loadgen overhead         : {}",
                    fixed2(tps_w)
                ));
                out.push(format!(
                    "TPS w/o loadgen overhead        : {}",
                    fixed2(tps_wo)
                ));
            }
            Scenario::Server => out.push(format!(
                "Completed tokens per second                 : {}",
                fixed2(self.completed_tokens_per_second.unwrap_or(0.0))
            )),
            Scenario::Offline | Scenario::MultiStream => {}
        }
        if s.scenario != Scenario::Offline {
            stats_block(
                &mut out,
                &self.first_token_latency,
                [
                    "Min First Token latency (ns)                : ",
                    "Max First Token latency (ns)                : ",
                    "Mean First Token latency (ns)               : ",
                    "percentile first token latency (ns)   : ",
                ],
            );
            out.push(String::new());
            stats_block(
                &mut out,
                &self.time_per_output_token,
                [
                    "Min Time per Output Token (ns)                : ",
                    "Max Time per Output Token (ns)                : ",
                    "Mean Time per Output Token (ns)               : ",
                    "percentile time to output token (ns)   : ",
                ],
            );
        }
        out.push(format!("\n{sep}\nTest Parameters Used\n{sep}"));
        let (samples_per_query, max_async) = match s.scenario {
            Scenario::Offline => (offline_samples_per_query(s), 1),
            Scenario::Server => (1, 0),
            Scenario::SingleStream => (1, 1),
            Scenario::MultiStream => (s.multi_stream_samples_per_query, 1),
        };
        let min_query_count = if s.scenario == Scenario::Offline {
            1
        } else {
            s.min_query_count
        };
        let target_qps = match s.scenario {
            Scenario::SingleStream => 1e9 / s.single_stream_expected_latency_ns.max(1) as f64,
            Scenario::MultiStream => 1e9 / s.multi_stream_expected_latency_ns.max(1) as f64,
            _ => s.target_qps,
        };
        for (key, value) in [
            ("samples_per_query : ", samples_per_query.to_string()),
            ("target_qps : ", ostream_double(target_qps)),
            ("ttft_latency (ns): ", s.ttft_latency_ns.to_string()),
            ("tpot_latency (ns): ", s.tpot_latency_ns.to_string()),
            ("max_async_queries : ", max_async.to_string()),
            ("min_duration (ms): ", s.min_duration_ms.to_string()),
            ("max_duration (ms): ", s.max_duration_ms.to_string()),
            ("min_query_count : ", min_query_count.to_string()),
            ("max_query_count : ", s.max_query_count.to_string()),
            ("qsl_rng_seed : ", s.qsl_rng_seed.to_string()),
            (
                "sample_index_rng_seed : ",
                s.sample_index_rng_seed.to_string(),
            ),
            ("schedule_rng_seed : ", s.schedule_rng_seed.to_string()),
            ("accuracy_log_rng_seed : ", "0".to_string()),
            ("accuracy_log_probability : ", "0".to_string()),
            ("accuracy_log_sampling_target : ", "0".to_string()),
            ("print_timestamps : ", "0".to_string()),
            ("performance_issue_unique : ", "0".to_string()),
            ("performance_issue_same : ", "0".to_string()),
            ("performance_issue_same_index : ", "0".to_string()),
            (
                "performance_sample_count : ",
                // The effective count: the override, else what the QSL reports (the dataset's size).
                match (s.performance_sample_count, self.dataset_len) {
                    (0, Some(n)) => n,
                    (n, _) => n,
                }
                .to_string(),
            ),
        ] {
            out.push(format!("{key}{value}"));
        }
        if let Some(n) = self.dataset_len {
            out.push(format!("accuracy_sample_count : {n}"));
        }
        out.push(String::new());
        out.push(if self.warnings.is_empty() {
            "No warnings encountered during test.".to_string()
        } else {
            format!(
                "{} warnings encountered. See detailed log.",
                self.warnings.len()
            )
        });
        out.push(String::new());
        out.push(match self.errors.len() {
            0 => "No errors encountered during test.".to_string(),
            1 => "1 ERROR encountered. See detailed log.".to_string(),
            n => format!("{n} ERRORS encountered. See detailed log."),
        });
        let mut text = out.join("\n");
        text.push('\n');
        text
    }

    /// Writes [`summary_txt`](Self::summary_txt) to `path`.
    pub fn write_summary_txt(&self, path: &Path) -> Result<(), MlperfError> {
        std::fs::write(path, self.summary_txt()).map_err(|source| MlperfError::Write {
            path: path.display().to_string(),
            source,
        })
    }

    /// Writes the verdict as pretty JSON to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), MlperfError> {
        let fail = |source: std::io::Error| MlperfError::Write {
            path: path.display().to_string(),
            source,
        };
        let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(fail)?);
        serde_json::to_writer_pretty(&mut file, self).map_err(|e| fail(e.into()))?;
        file.write_all(b"\n").map_err(fail)?;
        file.flush().map_err(fail)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::mlperf::settings::parse_settings;

    use llmbench_workload::workload::ParseOptions;

    const MS: u64 = 1_000_000;

    fn settings(extra: &str) -> MlperfSettings {
        let yaml = format!("model: llama3_1-8b\nscenario: Server\n{extra}");
        parse_settings("p.yaml", &yaml, None, &ParseOptions::default())
            .unwrap()
            .settings
    }

    /// A streamed query scheduled at `at_ms`, first token `ttft_ms` later, `tokens` tokens, ending `e2e_ms` after
    /// the scheduled time (also the detail log's tests' request).
    pub(crate) fn query(
        id: u64,
        stage: u32,
        at_ms: u64,
        ttft_ms: u64,
        e2e_ms: u64,
        tokens: u32,
    ) -> RequestRecord {
        let at = at_ms * MS;
        RequestRecord::builder(id)
            .stage(stage)
            .sent(at)
            .end(at + e2e_ms * MS)
            .input_tokens(10)
            .max_tokens(128)
            .ok()
            .usage(10, tokens)
            .content_at(at + ttft_ms * MS, 1)
            .content_at(at + e2e_ms * MS, tokens.saturating_sub(1))
            .build()
    }

    fn run() -> RunTimes {
        RunTimes {
            measured_stage: 0,
            start_ns: 0,
            end_ns: u64::MAX,
        }
    }

    /// n queries 1 s apart, TTFT 100 ms, 11 tokens over 600 ms: TPOT (600 − 100)/10 = 50 ms.
    fn steady(n: u64) -> Vec<RequestRecord> {
        (0..n)
            .map(|i| query(i, 0, i * 1000, 100, 600, 11))
            .collect()
    }

    #[test]
    fn tpot_and_ttft_are_measured_from_the_scheduled_time() {
        let mut r = query(0, 0, 1000, 100, 600, 11);
        // Sent 40 ms late: the delay counts against the system.
        r.sent_ns += 40 * MS;
        let v = evaluate(
            &settings("min_duration: 0\nmin_query_count: 1\n"),
            &[r],
            &run(),
        );
        assert_eq!(v.first_token_latency.as_ref().unwrap().min, 100 * MS);
        assert_eq!(v.latency.as_ref().unwrap().min, 600 * MS);
        assert_eq!(v.time_per_output_token.as_ref().unwrap().min, 50 * MS);
    }

    #[test]
    fn percentiles_take_the_floor_index() {
        // Latencies 1..=10 ms: p50 → sorted[5] = 6, p90 → sorted[9] = 10, p99 → sorted[floor(9.9)] = 10,
        // p97 → sorted[floor(9.7)] = 10, p95 → sorted[floor(9.5)] = 10; mean 55/10 = 5.5 ms.
        let values: Vec<u64> = (1..=10).map(|v| v * MS).collect();
        let s = LatencyStats::of(&values, 10, 0.99).unwrap();
        assert_eq!(s.percentiles[0], (0.5, 6 * MS));
        assert_eq!(s.percentiles[1], (0.9, 10 * MS));
        assert_eq!(s.mean, 5_500_000);
        // 200 values 1..=200: p99 → sorted[198] = 199, p99.9 → sorted[floor(199.8)] = 200.
        let values: Vec<u64> = (1..=200).collect();
        let s = LatencyStats::of(&values, 200, 0.99).unwrap();
        assert_eq!(s.target, 199);
        assert_eq!(s.percentiles[5], (0.999, 200));
    }

    #[test]
    fn a_server_run_within_limits_and_long_enough_is_valid() {
        // 500 queries over 499 s: min_duration 400 s met; h(0) = 459 ≤ 500 for early stopping.
        let s = settings("min_duration: 400000\n");
        let v = evaluate(&s, &steady(500), &run());
        assert!(v.valid, "{}", v.summary_txt());
        assert_eq!(v.checks.performance_constraints, Some(true));
        assert_eq!(v.token_count, 5500);
        // (500 − 1)/(499 + 0.6) and 5500/499.6.
        assert!((v.completed_samples_per_second.unwrap() - 499.0 / 499.6).abs() < 1e-12);
        assert!((v.scheduled_samples_per_second.unwrap() - 1.0).abs() < 1e-12);
        let txt = v.summary_txt();
        assert!(txt.contains("Result is : VALID\n  Performance constraints satisfied : Yes\n"));
        assert!(txt.contains("TTFT Early Stopping Result:\n * Run successful.\nTPOT Early Stopping Result:\n * Run successful.\n"));
        assert!(txt.contains(
            "Completed samples per second    : 1.00\nCompleted tokens per second: 11.01\n"
        ));
        assert!(txt.contains("99.00 percentile first token latency (ns)   : 100000000\n"));
        assert!(txt.contains("99.90 percentile time to output token (ns)   : 50000000\n"));
        assert!(txt.contains("ttft_latency (ns): 2000000000\ntpot_latency (ns): 100000000\n"));
        assert!(txt.ends_with(
            "No warnings encountered during test.\n\nNo errors encountered during test.\n"
        ));
    }

    #[test]
    fn a_run_shorter_than_min_duration_is_invalid_on_duration_alone() {
        // Same 500 queries, last scheduled at 499 s < 600 s.
        let v = evaluate(&settings(""), &steady(500), &run());
        assert!(!v.valid);
        assert_eq!(
            v.checks,
            Checks {
                performance_constraints: Some(true),
                min_duration: false,
                min_queries: true,
                early_stopping: true
            }
        );
        let txt = v.summary_txt();
        assert!(txt.contains("Result is : INVALID\n  Performance constraints satisfied : Yes\n  Min duration satisfied : NO\n"));
        assert!(txt.contains("Recommendations:\n * Increase the target QPS so the loadgen pre-generates more queries.\n"));
    }

    #[test]
    fn too_few_queries_is_invalid() {
        let s = settings("min_duration: 0\nmin_query_count: 600\n");
        let v = evaluate(&s, &steady(500), &run());
        assert!(!v.checks.min_queries && !v.valid);
    }

    #[test]
    fn tpot_over_the_limit_fails_the_performance_constraints() {
        // TPOT (1600 − 100)/10 = 150 ms > 100 ms on every query.
        let records: Vec<_> = (0..500)
            .map(|i| query(i, 0, i * 1000, 100, 1600, 11))
            .collect();
        let v = evaluate(&settings("min_duration: 400000\n"), &records, &run());
        assert!(!v.valid);
        assert_eq!(v.checks.performance_constraints, Some(false));
        assert!(!v.checks.early_stopping);
        let txt = v.summary_txt();
        assert!(txt.contains("  Performance constraints satisfied : NO\n"));
        assert!(txt.contains(" * TPOT constrain not met: Reduce target QPS to improve latency.\n"));
        // TPOT failed early stopping, so LoadGen never evaluated TTFT: its result is empty.
        assert!(txt.contains(
            "TTFT Early Stopping Result:\n\nTPOT Early Stopping Result:\n * Run unsuccessful.\n"
        ));
    }

    #[test]
    fn overlatency_queries_are_valid_only_through_early_stopping() {
        // 1000 queries, 2 with TTFT 3 s > 2 s. p99 = sorted[990] = 100 ms passes; early stopping needs
        // h(2) + 2 = 838 ≤ 1000. Without early stopping the submission checker would ask for 270336 Server
        // queries; with it, 1000 suffice.
        let s = settings("min_duration: 900000\n");
        let mut records = steady(1000);
        for r in records.iter_mut().take(2) {
            r.chunks[0].at_ns = r.scheduled_ns + 3000 * MS;
            r.chunks[1].at_ns = r.scheduled_ns + 3500 * MS;
            r.end_ns = r.scheduled_ns + 3500 * MS;
        }
        let v = evaluate(&s, &records, &run());
        assert!(v.valid, "{}", v.summary_txt());
        assert_eq!(v.ttft_early_stopping.as_ref().unwrap().overlatency, 2);
        // The same two in 837 queries: one short of 838.
        let short: Vec<_> = records[..837].to_vec();
        let v = evaluate(&settings("min_duration: 0\n"), &short, &run());
        assert!(!v.valid && !v.checks.early_stopping);
        assert_eq!(
            v.ttft_early_stopping.as_ref().unwrap().message,
            " * Run unsuccessful.\n * Processed 837 queries.\n * Would need to run at least 1 more queries,\n with \
             the run being successful if every additional\n query were under latency."
        );
    }

    #[test]
    fn warmup_records_are_excluded() {
        let mut records = steady(500);
        for r in records.iter_mut() {
            r.stage = 1;
        }
        // A terrible warm-up query in stage 0.
        records.push(query(999, 0, 0, 9000, 9999, 2));
        let v = evaluate(
            &settings("min_duration: 400000\n"),
            &records,
            &RunTimes {
                measured_stage: 1,
                start_ns: 0,
                end_ns: u64::MAX,
            },
        );
        assert!(v.valid);
        assert_eq!(v.queries_issued, 500);
    }

    #[test]
    fn offline_reports_samples_and_tokens_per_second() {
        let s = parse_settings(
            "p.yaml",
            "model: llama3_1-8b\nscenario: Offline\nmin_duration: 1000\nmin_query_count: 4\ntarget_qps: 1\n",
            None,
            &ParseOptions::default(),
        )
        .unwrap()
        .settings;
        // Four samples at t = 0 finishing at 0.5, 1, 1.5, 2 s with 10 tokens each: 4/2 = 2 samples/s, 20 tokens/s.
        let records: Vec<_> = (0..4u64)
            .map(|i| query(i, 0, 0, 50, 500 * (i + 1), 10))
            .collect();
        let v = evaluate(&s, &records, &run());
        assert!(v.valid, "{}", v.summary_txt());
        assert_eq!(v.samples_per_second, Some(2.0));
        assert_eq!(v.tokens_per_second, Some(20.0));
        // One query of four samples, as LoadGen counts it.
        assert_eq!(v.queries_issued, 1);
        let txt = v.summary_txt();
        assert!(txt.contains("Mode     : PerformanceOnly\nSamples per second: 2\nTokens per second: 20\nResult is : VALID\n  Min duration satisfied : Yes\n"));
        assert!(!txt.contains("Early Stopping Result"));
    }

    fn multi_stream(extra: &str) -> MlperfSettings {
        let yaml = format!("model: llama3_1-8b\nscenario: MultiStream\n{extra}");
        parse_settings("p.yaml", &yaml, None, &ParseOptions::default())
            .unwrap()
            .settings
    }

    #[test]
    fn multi_stream_query_latency_is_its_slowest_sample() {
        // 3 queries of 2 samples, issued back to back (times in ms, from the stage start):
        //   query A at 0:   samples end 100 and 300 after it → latency 300; the next query goes out at 300
        //   query B at 300: samples 200 and 250               → latency 250; next at 550
        //   query C at 550: samples 400 and 150               → latency 400
        // Sorted query latencies [250, 300, 400]: p50 = sorted[⌊3·0.5⌋ = 1] = 300, p99 = sorted[⌊2.97⌋ = 2] = 400,
        // min 250, max 400, mean ⌊950/3⌋ = 316.666… ms → 316666666 ns (integer division in ns).
        // Early stopping needs h(1) + 1 = 662 queries; 3 ran, so it fails and the run is INVALID on it alone
        // (min queries: 3 ≥ 3 and 6 samples ≥ 3·2; min duration 0 met).
        let s = multi_stream(
            "min_duration: 0
min_query_count: 3
samples_per_query: 2
",
        );
        let records = vec![
            query(0, 0, 0, 50, 100, 11),
            query(1, 0, 0, 50, 300, 11),
            query(2, 0, 300, 50, 200, 11),
            query(3, 0, 300, 50, 250, 11),
            query(4, 0, 550, 50, 400, 11),
            query(5, 0, 550, 50, 150, 11),
        ];
        let v = evaluate(&s, &records, &run());
        assert_eq!(v.queries_issued, 3);
        assert_eq!(v.sample_count, 6);
        let q = v.query_latency.clone().unwrap();
        assert_eq!((q.min, q.max, q.mean), (250 * MS, 400 * MS, 316_666_666));
        assert_eq!(q.percentiles[0], (0.5, 300 * MS));
        assert_eq!(q.target, 400 * MS);
        assert_eq!(
            v.checks,
            Checks {
                performance_constraints: None,
                min_duration: true,
                min_queries: true,
                early_stopping: false,
            }
        );
        assert!(!v.valid);
        let txt = v.summary_txt();
        assert!(
            txt.contains(
                "Scenario : MultiStream\nMode     : PerformanceOnly\n99.0th percentile latency (ns) : 400000000\n\
                 99.0th first token percentile latency (ns) : 50000000\nResult is : INVALID\n"
            ),
            "{txt}"
        );
        assert!(txt.contains(
            "TPOT Early Stopping Result:\n * Only processed 3 queries.\n * Need to process at least 662 queries for \
             early stopping.\n"
        ));
        assert!(txt.contains(
            "Per-query latency:  \nMin latency (ns)                : 250000000\n\
             Max latency (ns)                : 400000000\nMean latency (ns)               : 316666666\n\
             50.00 percentile latency (ns)   : 300000000\n"
        ));
        assert!(txt.contains("samples_per_query : 2\ntarget_qps : 125\n"));
        // Too few samples fail min queries even with enough queries: 3 queries of 1 sample < 3·2.
        let v = evaluate(
            &s,
            &[records[0].clone(), records[2].clone(), records[4].clone()],
            &run(),
        );
        assert!(!v.checks.min_queries);
    }

    #[test]
    fn multi_stream_with_662_queries_passes_early_stopping_at_its_max() {
        // 662 queries of 2 samples, one issued every second; every query's slowest sample takes 100 ms except
        // query 7's, 900 ms. Sorted: 661 × 100 ms then 900 ms.
        // p99 = sorted[⌊662·0.99⌋ = 655] = 100 ms. Early stopping: 662 ≥ h(1) + 1 = 662; at i = 2, h(2) + 2 > 662,
        // so t = 1: discard 0 queries, the estimate is sorted[662 − 1] = 900 ms.
        // Min duration 600 s: the last query is issued at 661 s ≥ 600 s. Valid.
        let s = multi_stream(
            "samples_per_query: 2
",
        );
        assert_eq!((s.min_query_count, s.min_duration_ms), (662, 600_000));
        let mut records = Vec::new();
        for k in 0..662u64 {
            let slow = if k == 7 { 900 } else { 100 };
            records.push(query(2 * k, 0, k * 1000, 20, 60, 11));
            records.push(query(2 * k + 1, 0, k * 1000, 20, slow, 11));
        }
        let v = evaluate(&s, &records, &run());
        assert!(v.valid, "{}", v.summary_txt());
        assert_eq!(v.query_latency.as_ref().unwrap().target, 100 * MS);
        let es = v.tpot_early_stopping.as_ref().unwrap();
        assert_eq!(es.estimate, Some(900 * MS));
        assert_eq!(
            es.message,
            " * Processed at least 662 queries (662).\n * Would discard 0 highest latency queries.\n * Early stopping \
             99.0th percentile estimate: 900000000"
        );
        assert_eq!(v.ttft_early_stopping.as_ref().unwrap(), es);
    }

    #[test]
    fn single_stream_early_stopping_also_estimates_the_99th_percentile() {
        // 662 queries one after the other, 1 s apart; TTFT 100 ms except query 5's, 700 ms. LoadGen's
        // SingleStream early stopping, once its p90 estimate passed, estimates p99 too: 662 ≥ h(1) + 1 = 662 and
        // h(2) + 2 > 662, so t = 1 and the estimate is sorted[661] = 700 ms, the detail log's
        // early_stopping_latency_ms (from the TTFT call, LoadGen's last).
        let s = parse_settings(
            "p.yaml",
            "model: llama3_1-8b\nscenario: SingleStream\nmin_duration: 0\nmin_query_count: 1\n",
            None,
            &ParseOptions::default(),
        )
        .unwrap()
        .settings;
        let records: Vec<_> = (0..662u64)
            .map(|i| query(i, 0, i * 1000, if i == 5 { 700 } else { 100 }, 800, 11))
            .collect();
        let v = evaluate(&s, &records, &run());
        let ttft = v.ttft_early_stopping.as_ref().unwrap();
        assert!(
            ttft.message
                .ends_with("\n * Early stopping 99.0th percentile estimate: 700000000"),
            "{}",
            ttft.message
        );
        assert_eq!(v.early_stopping_latency_ms, Some(700 * MS));
        assert_eq!(v.early_stopping_latency_ss, ttft.estimate);
        // 100 queries pass the p90 estimate but are too few for the p99 one (662 needed).
        let v = evaluate(&s, &records[..100], &run());
        assert!(
            v.ttft_early_stopping.as_ref().unwrap().message.ends_with(
                "\n * Not enough queries processed for 99.0th percentile\n early stopping estimate (would need to \
                 process at\n least 662 total queries)."
            ),
            "{}",
            v.summary_txt()
        );
        assert_eq!(v.early_stopping_latency_ms, None);
    }

    #[test]
    fn the_summary_follows_loadgen_where_a_real_loadgen_run_showed_it() {
        // Compared with the summary of the mlcommons-loadgen wheel on a token-latency Server run: an INVALID run
        // prints "Recommendations:" even when only early stopping failed (nothing under it); the TPOT block's first
        // lines say "Time per Output Token"; the parameters end with the effective performance and accuracy
        // sample counts. 3 queries: min queries and duration met (min 0), early stopping fails (h(0) = 459).
        let mut v = evaluate(
            &settings("min_duration: 0\nmin_query_count: 3\nperformance_sample_count: 0\n"),
            &steady(3),
            &run(),
        );
        v.dataset_len = Some(24);
        let txt = v.summary_txt();
        assert!(
            txt.contains(
                "  Early stopping satisfied: NO\nRecommendations:\nTTFT Early Stopping Result:\n"
            ),
            "{txt}"
        );
        assert!(txt.contains("Min Time per Output Token (ns)                : 50000000\n"));
        assert!(txt.contains("performance_sample_count : 24\naccuracy_sample_count : 24\n"));
    }

    #[test]
    fn ostream_formats_doubles_like_cpp() {
        assert_eq!(ostream_double(112.646_123), "112.646");
        assert_eq!(ostream_double(33396.94), "33396.9");
        assert_eq!(ostream_double(0.5), "0.5");
        assert_eq!(ostream_double(83.5), "83.5");
        assert_eq!(ostream_double(111.0), "111");
        assert_eq!(ostream_double(1234567.0), "1.23457e+06");
        assert_eq!(ostream_double(0.0001234), "0.0001234");
    }
}
