//! The operator's Prometheus metrics, registered explicitly on a registry the HTTP server encodes.

use llmbench_api::v1alpha1::{ExperimentPhase, Phase};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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

type HistogramFamily = Family<ControllerLabels, Histogram, fn() -> Histogram>;

/// Reconciles, errors, durations, and runs and experiments by phase.
#[derive(Clone)]
pub struct Metrics {
    reconciles: Family<ControllerLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    duration: HistogramFamily,
    runs: Family<PhaseLabels, Gauge>,
    experiments: Family<PhaseLabels, Gauge>,
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
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Metrics {
            reconciles: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            runs: Family::default(),
            experiments: Family::default(),
        };
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
