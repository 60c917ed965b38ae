//! The status a pass writes: the runs and the table, Pending/Running/CoolingDown while runs are to come, Succeeded
//! or Failed at the end, and an event when the phase changes.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::experiment::RunResult;
use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkExperimentStatus, ExperimentPhase};

use super::error::Error;
use super::{Pass, RESYNC};
use crate::experiment::status::{Observation, comparison, experiment_runs, finished, progress};
use crate::experiment::validate::Plan;
use crate::reconcile::{Ctx, apply_status};
use crate::status::{COMPLETED, set_condition};

/// Condition messages stay readable in `kubectl describe`.
pub(super) const MAX_MESSAGE_BYTES: usize = 8 * 1024;

pub(super) fn bounded(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_owned();
    }
    let mut cut = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &message[..cut])
}

/// The runs, the progress and the comparison table as the observations stand.
pub(super) fn summarise(
    status: &mut BenchmarkExperimentStatus,
    plan: &Plan,
    observations: &[Observation],
) {
    status.runs = experiment_runs(plan, observations);
    status.progress = Some(progress(observations));
    let (table, best) = comparison(plan, observations);
    status.table = table;
    status.best = best;
}

/// As the table counts them: a run that failed, vanished, or left no summary to compare.
pub(super) fn failed_runs(observations: &[Observation]) -> usize {
    observations
        .iter()
        .filter(|o| o.result == RunResult::Failed)
        .count()
}

/// Wait: runs are still to finish or start. Pending until the first run starts, then Running, or CoolingDown
/// until the next may start; looked at again when the cool-down ends, else at the resync.
pub(super) fn wait(
    pass: &mut Pass<'_>,
    plan: &Plan,
    observations: &[Observation],
    wake_after: Option<Duration>,
) -> Action {
    let status = &mut pass.status;
    let failed_runs = failed_runs(observations);
    let running = status.start_time.is_some();
    status.phase = Some(if running {
        ExperimentPhase::Running
    } else {
        ExperimentPhase::Pending
    });
    let (reason, message) = match wake_after {
        Some(wait) => (
            "CoolingDown",
            format!(
                "{} of {} run(s) finished; the next starts after the cool-down, in {}s",
                finished(observations),
                plan.runs.len(),
                wait.as_secs()
            ),
        ),
        None if running => (
            "Running",
            format!(
                "{} of {} run(s) finished ({failed_runs} failed)",
                finished(observations),
                plan.runs.len()
            ),
        ),
        None => ("Pending", "no run has started yet".to_owned()),
    };
    set_condition(
        &mut status.conditions,
        COMPLETED,
        false,
        reason,
        &message,
        pass.generation,
        pass.now,
    );
    match wake_after {
        Some(wait) => Action::requeue(wait + Duration::from_millis(250)),
        None => Action::requeue(RESYNC),
    }
}

/// Marks the experiment Succeeded or Failed, with `Completed=True` either way so `kubectl wait` returns.
pub(super) fn finish(
    status: &mut BenchmarkExperimentStatus,
    succeeded: bool,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    status.phase = Some(if succeeded {
        ExperimentPhase::Succeeded
    } else {
        ExperimentPhase::Failed
    });
    status.completion_time.get_or_insert(Time(now));
    set_condition(
        &mut status.conditions,
        COMPLETED,
        true,
        if succeeded { "Succeeded" } else { "Failed" },
        &bounded(message),
        generation,
        now,
    );
}

/// A Normal or Warning event when the experiment's phase changes.
pub(super) async fn announce_phase(
    experiment: &BenchmarkExperiment,
    old: Option<&BenchmarkExperimentStatus>,
    status: &BenchmarkExperimentStatus,
    ctx: &Ctx,
) {
    if old.and_then(|s| s.phase) == status.phase {
        return;
    }
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == COMPLETED)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let (type_, reason) = match status.phase {
        Some(ExperimentPhase::Collecting) => (EventType::Normal, "Collecting"),
        Some(ExperimentPhase::Succeeded) => (EventType::Normal, "ExperimentSucceeded"),
        Some(ExperimentPhase::Failed) => (EventType::Warning, "ExperimentFailed"),
        _ => return,
    };
    ctx.publish(
        &experiment.object_ref(&()),
        type_,
        reason,
        "Reconcile",
        &message,
    )
    .await;
}

/// Server-side applies the whole status, when it changed.
pub(super) async fn write_status(
    experiment: &BenchmarkExperiment,
    old: Option<&BenchmarkExperimentStatus>,
    status: &BenchmarkExperimentStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
    if old == Some(status) {
        return Ok(());
    }
    apply_status(&ctx.client, experiment, status)
        .await
        .map_err(|source| Error::PatchStatus {
            experiment: experiment.name_any(),
            source,
        })
}
