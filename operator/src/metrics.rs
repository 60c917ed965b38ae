//! The operator's Prometheus metrics, registered explicitly on a registry the HTTP server encodes.
//!
//! Besides its own workings (`llmbench_operator_*`), the operator exports each finished run's headline results
//! from its `status.summary`, as gauges labelled `{namespace, run}`:
//! `llmbench_run_requests_per_second`, `llmbench_run_output_tokens_per_second`, `llmbench_run_ttft_p50_seconds`,
//! `llmbench_run_ttft_p99_seconds`, `llmbench_run_tpot_p50_seconds`, `llmbench_run_tpot_p99_seconds`,
//! `llmbench_run_failure_ratio` (failed / sent requests) and `llmbench_run_slo_pass` (1 or 0, only when the run
//! has an `SLOMet` condition), and from the stack's own metrics when the launcher scraped them
//! (`status.summary.server`): `llmbench_run_server_requests_waiting_mean`, `llmbench_run_server_requests_running_mean`,
//! `llmbench_run_server_kv_cache_usage_mean`, `llmbench_run_server_prefix_cache_hit_percent`. A figure the run did
//! not measure (no streaming: no TTFT; no server metrics) has no series.
//!
//! Cardinality is bounded: only the latest N finished runs of each namespace (by completion time) have series, N
//! from `--run-results-per-namespace` / `LLMBENCH_RUN_RESULTS_PER_NAMESPACE` (default
//! [`DEFAULT_RUN_RESULTS_PER_NAMESPACE`]; 0 exports none); an
//! older run's series are removed when a newer one finishes, and a run's series when it is deleted. The set lives
//! in memory only: after a restart the reconciler visits every run again, and each finished run it sees is
//! re-exported (the newest N per namespace win, whatever the order of the visits). A slot freed by a deletion is
//! refilled by the next run to finish, not by an older run already dropped.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::jiff::Timestamp;
use llmbench_api::v1alpha1::{
    BenchmarkRunStatus, ExperimentPhase, Latencies, LatencyStats, Phase, ServerSummary,
};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::status::{SLO_MET, condition};

/// How many finished runs per namespace keep their result gauges unless `LLMBENCH_RUN_RESULTS_PER_NAMESPACE`
/// says otherwise: enough for a dashboard of recent runs, few enough that a namespace running thousands of runs
/// stays a few hundred series.
pub const DEFAULT_RUN_RESULTS_PER_NAMESPACE: usize = 20;

/// Which controller a sample is about.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ControllerName {
    benchmarkrun,
    benchmarkexperiment,
    workloadprofile,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: ControllerName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: ControllerName,
    /// The failed action, e.g. `create_pod`.
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: String,
}

/// Which finished run a result gauge is about.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    pub namespace: String,
    pub run: String,
}

type HistogramFamily = Family<ControllerLabels, Histogram, fn() -> Histogram>;
type RunGauge = Family<RunLabels, Gauge<f64, AtomicU64>>;

/// Reconciles, errors, durations, runs and experiments by phase, and the results of the latest finished runs.
#[derive(Clone)]
pub struct Metrics {
    reconciles: Family<ControllerLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    duration: HistogramFamily,
    runs: Family<PhaseLabels, Gauge>,
    experiments: Family<PhaseLabels, Gauge>,
    results: RunResults,
}

/// A finished run's headline results, in the units its gauges carry; `None` where the run has no such figure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFigures {
    pub requests_per_second: Option<f64>,
    pub output_tokens_per_second: Option<f64>,
    pub ttft_p50_seconds: Option<f64>,
    pub ttft_p99_seconds: Option<f64>,
    pub tpot_p50_seconds: Option<f64>,
    pub tpot_p99_seconds: Option<f64>,
    /// Failed requests / requests sent.
    pub failure_ratio: Option<f64>,
    /// 1 when the SLOMet condition is True, 0 when False.
    pub slo_pass: Option<f64>,
    /// The stack's own figures over the run, when the launcher scraped its metrics.
    pub server_requests_waiting_mean: Option<f64>,
    pub server_requests_running_mean: Option<f64>,
    pub server_kv_cache_usage_mean: Option<f64>,
    pub server_prefix_cache_hit_percent: Option<f64>,
}

impl RunFigures {
    /// The figures of a run's status: its summary (latencies from milliseconds to seconds) and its SLOMet
    /// condition.
    pub fn of(status: &BenchmarkRunStatus) -> Self {
        let summary = status.summary.as_ref();
        let latency = |pick: fn(&Latencies) -> Option<&LatencyStats>,
                       quantile: fn(&LatencyStats) -> f64| {
            summary
                .and_then(|s| pick(&s.latency_ms))
                .map(|stats| quantile(stats) / 1000.0)
        };
        let server = |pick: fn(&ServerSummary) -> Option<f64>| {
            summary.and_then(|s| s.server.as_ref()).and_then(pick)
        };
        RunFigures {
            requests_per_second: summary.map(|s| s.throughput.requests_per_second),
            output_tokens_per_second: summary.map(|s| s.throughput.output_tokens_per_second),
            ttft_p50_seconds: latency(|l| l.ttft.as_ref(), |s| s.p50),
            ttft_p99_seconds: latency(|l| l.ttft.as_ref(), |s| s.p99),
            tpot_p50_seconds: latency(|l| l.tpot.as_ref(), |s| s.p50),
            tpot_p99_seconds: latency(|l| l.tpot.as_ref(), |s| s.p99),
            failure_ratio: summary
                .filter(|s| s.requests > 0)
                .map(|s| s.failures as f64 / s.requests as f64),
            slo_pass: condition(status, SLO_MET).and_then(|c| match c.status.as_str() {
                "True" => Some(1.0),
                "False" => Some(0.0),
                _ => None,
            }),
            server_requests_waiting_mean: server(|s| s.requests_waiting_mean),
            server_requests_running_mean: server(|s| s.requests_running_mean),
            server_kv_cache_usage_mean: server(|s| s.kv_cache_usage_mean),
            server_prefix_cache_hit_percent: server(|s| s.prefix_cache_hit_percent),
        }
    }

    fn is_empty(&self) -> bool {
        *self == RunFigures::default()
    }
}

/// A result gauge: its name under `llmbench_run_`, its help, and the figure it shows.
type ResultGauge = (&'static str, &'static str, fn(&RunFigures) -> Option<f64>);

const RESULT_GAUGES: [ResultGauge; 12] = [
    (
        "requests_per_second",
        "A finished run's successful requests per second",
        |f| f.requests_per_second,
    ),
    (
        "output_tokens_per_second",
        "A finished run's generated tokens per second",
        |f| f.output_tokens_per_second,
    ),
    (
        "ttft_p50_seconds",
        "A finished run's median time to first token",
        |f| f.ttft_p50_seconds,
    ),
    (
        "ttft_p99_seconds",
        "A finished run's 99th percentile time to first token",
        |f| f.ttft_p99_seconds,
    ),
    (
        "tpot_p50_seconds",
        "A finished run's median time per output token after the first",
        |f| f.tpot_p50_seconds,
    ),
    (
        "tpot_p99_seconds",
        "A finished run's 99th percentile time per output token after the first",
        |f| f.tpot_p99_seconds,
    ),
    (
        "failure_ratio",
        "A finished run's failed requests / requests sent",
        |f| f.failure_ratio,
    ),
    (
        "slo_pass",
        "1 when a finished run met its SLO (condition SLOMet True), 0 when not; absent without a verdict",
        |f| f.slo_pass,
    ),
    (
        "server_requests_waiting_mean",
        "A finished run's mean of the stack's waiting requests (vLLM queue depth, summed over endpoints)",
        |f| f.server_requests_waiting_mean,
    ),
    (
        "server_requests_running_mean",
        "A finished run's mean of the stack's running requests (summed over endpoints)",
        |f| f.server_requests_running_mean,
    ),
    (
        "server_kv_cache_usage_mean",
        "A finished run's mean KV-cache usage of the stack, 0-1 (averaged over endpoints)",
        |f| f.server_kv_cache_usage_mean,
    ),
    (
        "server_prefix_cache_hit_percent",
        "A finished run's prefix-cache hits over queries on the stack, in percent",
        |f| f.server_prefix_cache_hit_percent,
    ),
];

/// The result gauges and which runs have series, bounded per namespace.
#[derive(Clone)]
struct RunResults {
    gauges: Arc<[RunGauge; RESULT_GAUGES.len()]>,
    /// Per namespace, the runs with series, oldest first. Changed with the gauges under this lock, so a run that
    /// is being evicted never has its series set again by a concurrent reconcile.
    kept: Arc<Mutex<HashMap<String, Vec<KeptRun>>>>,
    per_namespace: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct KeptRun {
    /// First, so runs sort by it; a finished run without one (never written by us) counts as the oldest.
    completed: Option<Timestamp>,
    run: String,
}

impl RunResults {
    fn new(per_namespace: usize) -> Self {
        RunResults {
            gauges: Arc::new(std::array::from_fn(|_| RunGauge::default())),
            kept: Arc::default(),
            per_namespace,
        }
    }

    fn set(&self, labels: &RunLabels, figures: &RunFigures) {
        for (gauge, (_, _, figure)) in self.gauges.iter().zip(RESULT_GAUGES) {
            match figure(figures) {
                Some(value) => {
                    gauge.get_or_create(labels).set(value);
                }
                None => {
                    gauge.remove(labels);
                }
            }
        }
    }

    fn remove(&self, labels: &RunLabels) {
        for gauge in self.gauges.iter() {
            gauge.remove(labels);
        }
    }

    fn record(&self, namespace: &str, run: &str, status: &BenchmarkRunStatus) {
        let figures = RunFigures::of(status);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let runs = kept.entry(namespace.to_owned()).or_default();
        runs.retain(|k| k.run != run);
        if figures.is_empty() {
            // Nothing to show (a failed run without a summary): it takes no slot from a run that has results.
            self.remove(&labels(namespace, run));
        } else {
            runs.push(KeptRun {
                completed: status.completion_time.as_ref().map(|t| t.0),
                run: run.to_owned(),
            });
            runs.sort();
        }
        let excess = runs.len().saturating_sub(self.per_namespace);
        let evicted: Vec<KeptRun> = runs.drain(..excess).collect();
        for old in &evicted {
            self.remove(&labels(namespace, &old.run));
        }
        if runs.iter().any(|k| k.run == run) {
            self.set(&labels(namespace, run), &figures);
        }
        if runs.is_empty() {
            kept.remove(namespace);
        }
    }

    fn forget(&self, namespace: &str, run: &str) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(runs) = kept.get_mut(namespace) {
            runs.retain(|k| k.run != run);
            if runs.is_empty() {
                kept.remove(namespace);
            }
        }
        self.remove(&labels(namespace, run));
    }
}

fn labels(namespace: &str, run: &str) -> RunLabels {
    RunLabels {
        namespace: namespace.to_owned(),
        run: run.to_owned(),
    }
}

/// Every phase, so a phase with no runs reads 0 rather than vanishing.
pub const PHASES: [Phase; 5] = [
    Phase::Pending,
    Phase::Running,
    Phase::Collecting,
    Phase::Succeeded,
    Phase::Failed,
];

/// Every experiment phase, likewise.
pub const EXPERIMENT_PHASES: [ExperimentPhase; 5] = [
    ExperimentPhase::Pending,
    ExperimentPhase::Running,
    ExperimentPhase::Collecting,
    ExperimentPhase::Succeeded,
    ExperimentPhase::Failed,
];

fn duration_histogram() -> Histogram {
    // 1 ms … ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Metrics {
    /// Registers every metric, keeping the results of the default number of finished runs per namespace.
    pub fn register(registry: &mut Registry) -> Self {
        Self::register_keeping(registry, DEFAULT_RUN_RESULTS_PER_NAMESPACE)
    }

    /// Registers every metric, keeping the results of the latest `per_namespace` finished runs of each namespace.
    pub fn register_keeping(registry: &mut Registry, per_namespace: usize) -> Self {
        let metrics = Metrics {
            reconciles: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            runs: Family::default(),
            experiments: Family::default(),
            results: RunResults::new(per_namespace),
        };
        let results = registry.sub_registry_with_prefix("llmbench_run");
        for (gauge, (name, help, _)) in metrics.results.gauges.iter().zip(RESULT_GAUGES) {
            results.register(name, help, gauge.clone());
        }
        let registry = registry.sub_registry_with_prefix("llmbench_operator");
        registry.register(
            "reconciles",
            "Reconciliations started",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciliations that failed, by the action that failed",
            metrics.errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long a reconciliation took",
            metrics.duration.clone(),
        );
        registry.register(
            "benchmark_runs",
            "BenchmarkRuns the operator sees, by phase (runs with no phase yet count as Pending)",
            metrics.runs.clone(),
        );
        registry.register(
            "benchmark_experiments",
            "BenchmarkExperiments the operator sees, by phase (experiments with no phase yet count as Pending)",
            metrics.experiments.clone(),
        );
        metrics
    }

    pub fn reconciled(&self, controller: ControllerName, seconds: f64) {
        let labels = ControllerLabels { controller };
        self.reconciles.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(seconds);
    }

    pub fn failed(&self, controller: ControllerName, action: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller,
                action: action.to_owned(),
            })
            .inc();
    }

    /// Exports the results of a finished run (idempotent: the same status twice changes nothing), evicting the
    /// oldest run of the namespace beyond the latest N; a run older than the N kept is not exported.
    pub fn record_run_results(&self, namespace: &str, run: &str, status: &BenchmarkRunStatus) {
        self.results.record(namespace, run, status);
    }

    /// Removes a run's result series (the run is being deleted).
    pub fn forget_run_results(&self, namespace: &str, run: &str) {
        self.results.forget(namespace, run);
    }

    /// Sets the runs-by-phase gauge from the phases of every run seen.
    pub fn set_runs_by_phase(&self, phases: impl IntoIterator<Item = Option<Phase>>) {
        let mut counts = [0i64; PHASES.len()];
        for phase in phases {
            let phase = phase.unwrap_or(Phase::Pending);
            if let Some(i) = PHASES.iter().position(|p| *p == phase) {
                counts[i] += 1;
            }
        }
        for (phase, count) in PHASES.iter().zip(counts) {
            self.runs
                .get_or_create(&PhaseLabels {
                    phase: format!("{phase:?}"),
                })
                .set(count);
        }
    }

    /// Sets the experiments-by-phase gauge from the phases of every experiment seen.
    pub fn set_experiments_by_phase(
        &self,
        phases: impl IntoIterator<Item = Option<ExperimentPhase>>,
    ) {
        let mut counts = [0i64; EXPERIMENT_PHASES.len()];
        for phase in phases {
            let phase = phase.unwrap_or(ExperimentPhase::Pending);
            if let Some(i) = EXPERIMENT_PHASES.iter().position(|p| *p == phase) {
                counts[i] += 1;
            }
        }
        for (phase, count) in EXPERIMENT_PHASES.iter().zip(counts) {
            self.experiments
                .get_or_create(&PhaseLabels {
                    phase: format!("{phase:?}"),
                })
                .set(count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn runs_are_counted_by_phase_with_every_phase_present() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        metrics.set_runs_by_phase([Some(Phase::Running), None, Some(Phase::Running)]);
        metrics.reconciled(ControllerName::benchmarkrun, 0.01);
        metrics.failed(ControllerName::benchmarkrun, "create_pod");
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains("llmbench_operator_benchmark_runs{phase=\"Running\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("llmbench_operator_benchmark_runs{phase=\"Pending\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("llmbench_operator_benchmark_runs{phase=\"Failed\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("llmbench_operator_reconciles_total{controller=\"benchmarkrun\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "llmbench_operator_reconcile_errors_total{controller=\"benchmarkrun\",action=\"create_pod\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "llmbench_operator_reconcile_duration_seconds_count{controller=\"benchmarkrun\"} 1"
            ),
            "{text}"
        );
    }

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use llmbench_api::v1alpha1::{RunSummary, Throughput};

    use crate::status::set_condition;

    /// A finished run's status: `rps` requests/s, completed at `completed` seconds after the epoch.
    fn finished(rps: f64, completed: i64) -> BenchmarkRunStatus {
        let at = Timestamp::from_second(completed).expect("time");
        BenchmarkRunStatus {
            phase: Some(Phase::Succeeded),
            completion_time: Some(Time(at)),
            summary: Some(RunSummary {
                requests: 200,
                failures: 5,
                duration_seconds: 20.0,
                throughput: Throughput {
                    requests_per_second: rps,
                    input_tokens_per_second: 4000.0,
                    output_tokens_per_second: 1500.0,
                },
                latency_ms: Latencies {
                    ttft: Some(LatencyStats {
                        mean: 130.0,
                        p50: 120.0,
                        p90: 180.0,
                        p99: 250.0,
                    }),
                    tpot: Some(LatencyStats {
                        mean: 11.0,
                        p50: 10.0,
                        p90: 14.0,
                        p99: 20.0,
                    }),
                    ..Latencies::default()
                },
                ..RunSummary::default()
            }),
            ..BenchmarkRunStatus::default()
        }
    }

    fn text(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).expect("encodes");
        text
    }

    /// The value of `metric{namespace, run}`, if it has a series.
    fn sample(text: &str, metric: &str, namespace: &str, run: &str) -> Option<f64> {
        let series = format!("{metric}{{namespace=\"{namespace}\",run=\"{run}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .map(|value| value.parse().expect("a number"))
    }

    fn rps(text: &str, namespace: &str, run: &str) -> Option<f64> {
        sample(text, "llmbench_run_requests_per_second", namespace, run)
    }

    #[test]
    fn a_finished_run_exports_its_headline_results_in_seconds() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 20);
        let mut status = finished(9.5, 1_000);
        let now = Timestamp::from_second(1_000).expect("time");
        set_condition(
            &mut status.conditions,
            SLO_MET,
            false,
            "SLOViolated",
            "ttft p99 250 ms > 200 ms",
            Some(1),
            now,
        );
        metrics.record_run_results("team-a", "bench-1", &status);
        let text = text(&registry);
        let at = |metric| sample(&text, metric, "team-a", "bench-1");
        assert_eq!(at("llmbench_run_requests_per_second"), Some(9.5));
        assert_eq!(at("llmbench_run_output_tokens_per_second"), Some(1500.0));
        // Milliseconds in the summary, seconds in the gauges: 120 ms, 250 ms, 10 ms, 20 ms.
        assert_eq!(at("llmbench_run_ttft_p50_seconds"), Some(0.12));
        assert_eq!(at("llmbench_run_ttft_p99_seconds"), Some(0.25));
        assert_eq!(at("llmbench_run_tpot_p50_seconds"), Some(0.01));
        assert_eq!(at("llmbench_run_tpot_p99_seconds"), Some(0.02));
        // 5 failed of 200 sent.
        assert_eq!(at("llmbench_run_failure_ratio"), Some(0.025));
        assert_eq!(at("llmbench_run_slo_pass"), Some(0.0));
    }

    #[test]
    fn the_stacks_own_figures_are_exported_when_the_run_scraped_them() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 20);
        let mut status = finished(9.5, 1_000);
        if let Some(summary) = status.summary.as_mut() {
            summary.server = Some(ServerSummary {
                targets: 2,
                scrapes: 60,
                failed_scrapes: 0,
                requests_running_mean: Some(12.5),
                requests_waiting_mean: Some(3.25),
                kv_cache_usage_mean: Some(0.5),
                prefix_cache_hit_percent: None,
                preemptions: Some(0.0),
            });
        }
        metrics.record_run_results("team-a", "bench-1", &status);
        let text = text(&registry);
        let at = |metric| sample(&text, metric, "team-a", "bench-1");
        assert_eq!(at("llmbench_run_server_requests_waiting_mean"), Some(3.25));
        assert_eq!(at("llmbench_run_server_requests_running_mean"), Some(12.5));
        assert_eq!(at("llmbench_run_server_kv_cache_usage_mean"), Some(0.5));
        // Not measured (no prefix-cache counters): no series.
        assert_eq!(at("llmbench_run_server_prefix_cache_hit_percent"), None);
    }

    #[test]
    fn without_a_verdict_or_a_measured_figure_there_is_no_series() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 20);
        let mut status = finished(9.5, 1_000);
        if let Some(summary) = status.summary.as_mut() {
            summary.latency_ms.ttft = None;
        }
        metrics.record_run_results("team-a", "bench-1", &status);
        let text = text(&registry);
        assert_eq!(rps(&text, "team-a", "bench-1"), Some(9.5));
        assert!(!text.contains("llmbench_run_slo_pass{"), "{text}");
        assert!(!text.contains("llmbench_run_ttft_p50_seconds{"), "{text}");
    }

    #[test]
    fn only_the_latest_n_finished_runs_of_a_namespace_keep_their_series() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 2);
        metrics.record_run_results("team-b", "other", &finished(1.0, 50));
        metrics.record_run_results("team-a", "r1", &finished(1.0, 100));
        metrics.record_run_results("team-a", "r2", &finished(2.0, 200));
        let text_two = text(&registry);
        assert_eq!(rps(&text_two, "team-a", "r1"), Some(1.0));
        // The third (N + 1) run evicts the oldest, r1, from every gauge; team-b is counted on its own.
        metrics.record_run_results("team-a", "r3", &finished(3.0, 300));
        let text = text(&registry);
        assert!(!text.contains("run=\"r1\""), "{text}");
        assert_eq!(rps(&text, "team-a", "r2"), Some(2.0));
        assert_eq!(rps(&text, "team-a", "r3"), Some(3.0));
        assert_eq!(rps(&text, "team-b", "other"), Some(1.0));
        // A run older than the two kept (seen again after a restart) is not exported, and evicts nothing.
        metrics.record_run_results("team-a", "r0", &finished(0.5, 10));
        assert_eq!(super::tests::text(&registry), text);
    }

    #[test]
    fn the_latest_runs_win_whatever_order_a_restart_visits_them_in() {
        let runs = [("r1", 100), ("r2", 200), ("r3", 300), ("r4", 400)];
        let kept = |order: &[usize]| {
            let mut registry = Registry::default();
            let metrics = Metrics::register_keeping(&mut registry, 2);
            for &i in order {
                let (run, at) = runs[i];
                metrics.record_run_results("team-a", run, &finished(at as f64, at));
            }
            let text = text(&registry);
            runs.iter()
                .filter(|(run, _)| rps(&text, "team-a", run).is_some())
                .map(|(run, _)| *run)
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(&[0, 1, 2, 3]), ["r3", "r4"]);
        assert_eq!(kept(&[3, 2, 1, 0]), ["r3", "r4"]);
        assert_eq!(kept(&[2, 0, 3, 1]), ["r3", "r4"]);
    }

    #[test]
    fn recording_a_run_again_changes_nothing() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 2);
        metrics.record_run_results("team-a", "r1", &finished(1.0, 100));
        metrics.record_run_results("team-a", "r2", &finished(2.0, 200));
        let once = text(&registry);
        metrics.record_run_results("team-a", "r1", &finished(1.0, 100));
        metrics.record_run_results("team-a", "r2", &finished(2.0, 200));
        assert_eq!(text(&registry), once);
    }

    #[test]
    fn deleting_a_run_removes_its_series() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 2);
        metrics.record_run_results("team-a", "r1", &finished(1.0, 100));
        metrics.record_run_results("team-a", "r2", &finished(2.0, 200));
        metrics.forget_run_results("team-a", "r1");
        let text = text(&registry);
        assert!(!text.contains("run=\"r1\""), "{text}");
        assert_eq!(rps(&text, "team-a", "r2"), Some(2.0));
        // The freed slot goes to the next run to finish: r2 and r3 both kept.
        metrics.record_run_results("team-a", "r3", &finished(3.0, 300));
        let text = super::tests::text(&registry);
        assert_eq!(rps(&text, "team-a", "r2"), Some(2.0));
        assert_eq!(rps(&text, "team-a", "r3"), Some(3.0));
        // Forgetting a run that has no series is harmless.
        metrics.forget_run_results("team-c", "never");
    }

    #[test]
    fn a_run_without_results_takes_no_slot() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 1);
        metrics.record_run_results("team-a", "r1", &finished(1.0, 100));
        let failed = BenchmarkRunStatus {
            phase: Some(Phase::Failed),
            completion_time: Some(Time(Timestamp::from_second(200).expect("time"))),
            ..BenchmarkRunStatus::default()
        };
        metrics.record_run_results("team-a", "r2", &failed);
        let text = text(&registry);
        assert_eq!(rps(&text, "team-a", "r1"), Some(1.0));
        assert!(!text.contains("run=\"r2\""), "{text}");
    }

    #[test]
    fn zero_runs_per_namespace_exports_no_results() {
        let mut registry = Registry::default();
        let metrics = Metrics::register_keeping(&mut registry, 0);
        metrics.record_run_results("team-a", "r1", &finished(1.0, 100));
        assert!(!text(&registry).contains("run=\"r1\""));
    }

    #[test]
    fn experiments_are_counted_by_phase_with_every_phase_present() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        metrics.set_experiments_by_phase([Some(ExperimentPhase::Collecting), None]);
        metrics.reconciled(ControllerName::benchmarkexperiment, 0.01);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        for line in [
            "llmbench_operator_benchmark_experiments{phase=\"Collecting\"} 1",
            "llmbench_operator_benchmark_experiments{phase=\"Pending\"} 1",
            "llmbench_operator_benchmark_experiments{phase=\"Succeeded\"} 0",
            "llmbench_operator_reconciles_total{controller=\"benchmarkexperiment\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
    }
}
