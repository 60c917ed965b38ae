//! An experiment directory as `plot::compare` draws it: its treatments, in plan order, each with its runs and
//! their status, read from `experiment.json`. The plot module draws runs and knows nothing of the experiment's
//! file; this is the one place that turns the plan into what is drawn.

use std::path::Path;

use llmbench_report::plot::varied::LatencyBounds;
use llmbench_report::plot::{ExperimentRun, ExperimentRuns, PlotError, TreatmentRuns};

use super::plan::{EXPERIMENT_FILE, RunStatus};

/// The treatments and runs of the experiment in `dir`, with a subtitle naming the experiment and its SLO's
/// latency bounds.
pub fn plotted_runs(dir: &Path) -> Result<ExperimentRuns, PlotError> {
    let plan =
        super::plan::read(&dir.join(EXPERIMENT_FILE)).map_err(|source| PlotError::Experiment {
            dir: dir.to_owned(),
            source: Box::new(source),
        })?;
    let treatments = plan
        .treatments
        .iter()
        .map(|treatment| TreatmentRuns {
            name: treatment.name.clone(),
            levels: treatment.levels.clone(),
            runs: plan
                .runs
                .iter()
                .filter(|r| r.treatment == treatment.name)
                .map(|run| ExperimentRun {
                    dir: run.dir.clone().into(),
                    succeeded: run.status == RunStatus::Succeeded,
                    status: run.status.as_str(),
                })
                .collect(),
        })
        .collect();
    let subtitle = format!(
        "experiment {} · id {} · {} · {}",
        plan.name, plan.id, plan.harness, plan.profile
    );
    let slo = plan
        .slo
        .as_ref()
        .map(|slo| LatencyBounds {
            ttft_p99_ms: slo.ttft_p99_ms,
            tpot_p99_ms: slo.tpot_p99_ms,
            itl_p99_ms: slo.itl_p99_ms,
            e2e_p99_ms: slo.e2e_p99_ms,
        })
        .unwrap_or_default();
    Ok(ExperimentRuns {
        subtitle,
        slo,
        treatments,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn plot_recognises_an_experiment_directory_by_the_file_the_experiment_writes() {
        assert_eq!(
            llmbench_report::plot::EXPERIMENT_FILE,
            super::EXPERIMENT_FILE
        );
    }
}
