//! Conclude: once every run finished, the plan file and the collector pod that writes the comparison, and how
//! its outcome ends the experiment.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use llmbench_api::v1alpha1::{BenchmarkExperiment, ExperimentPhase};

use super::error::Error;
use super::finish::{failed_runs, finish};
use super::{Pass, RESYNC};
use crate::builders::BuildError;
use crate::builders::experiment::{
    collector_pod, collector_pod_name, plan_config_map, plan_config_map_name,
};
use crate::experiment::schedule::RunState;
use crate::experiment::status::{Observation, plan_file};
use crate::experiment::validate::Plan;
use crate::reconcile::Ctx;
use crate::reconcile::children::{ChildError, Children};
use crate::status::{COMPLETED, PodOutcome, failure_message, pod_outcome, set_condition};

/// Conclude: every run finished (or `stopped` by stopOnFailure): the collector writes the comparison, and its
/// outcome ends the experiment. With stopOnFailure, the runs that never started are `skipped` in the plan file
/// and the comparison covers the finished ones; the experiment still fails.
pub(super) async fn conclude(
    pass: &mut Pass<'_>,
    plan: &Plan,
    observations: &[Observation],
    stopped: bool,
    endpoint: Option<String>,
) -> Result<Action, Error> {
    let experiment = pass.experiment;
    let (generation, now) = (pass.generation, pass.now);
    let failed_runs = failed_runs(observations);
    let stopped = stopped.then(|| stop_message(plan, observations));
    let collected = collect(
        experiment,
        plan,
        observations,
        endpoint,
        &pass.children,
        pass.ctx,
        now,
    )
    .await?;
    let status = &mut pass.status;
    Ok(match collected {
        Collected::InFlight => {
            status.phase = Some(ExperimentPhase::Collecting);
            let finished_what = match &stopped {
                Some(why) => format!("{why}; the finished runs"),
                None => "every run finished".to_owned(),
            };
            set_condition(
                &mut status.conditions,
                COMPLETED,
                false,
                "Collecting",
                &format!(
                    "{finished_what} ({failed_runs} failed): collector pod {} is writing the comparison",
                    collector_pod_name(experiment)
                ),
                generation,
                now,
            );
            Action::requeue(RESYNC)
        }
        Collected::Succeeded => {
            let compared = format!(
                "{} run(s), {failed_runs} failed; the comparison is in {}{}",
                plan.runs.len(),
                status.results_path.as_deref().unwrap_or_default(),
                status
                    .best
                    .as_deref()
                    .map(|b| format!("; best treatment: {b}"))
                    .unwrap_or_default()
            );
            match &stopped {
                Some(why) => finish(
                    status,
                    false,
                    &format!("{why}. {compared}"),
                    generation,
                    now,
                ),
                None => finish(status, true, &compared, generation, now),
            }
            Action::await_change()
        }
        Collected::Failed(why) => {
            finish(
                status,
                false,
                &format!("the comparison could not be written: {why}"),
                generation,
                now,
            );
            Action::await_change()
        }
    })
}

/// Why an experiment stopped early: its first failed run, and how many never started.
pub(super) fn stop_message(plan: &Plan, observations: &[Observation]) -> String {
    let first = plan
        .names
        .iter()
        .zip(observations)
        .find(|(_, o)| matches!(o.state, RunState::Finished { failed: true, .. }))
        .map(|(n, _)| n.as_str())
        .unwrap_or("a run");
    let skipped = observations
        .iter()
        .filter(|o| o.state == RunState::NotCreated)
        .count();
    format!(
        "BenchmarkRun {first} failed and spec.ordering.stopOnFailure is set: {skipped} of {} run(s) were not \
         started",
        plan.runs.len()
    )
}

/// How the collector is doing.
pub(super) enum Collected {
    InFlight,
    Succeeded,
    Failed(String),
}

/// Every run finished: write the plan file into a ConfigMap and start the collector, or read how it went.
pub(super) async fn collect(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    observations: &[Observation],
    endpoint: Option<String>,
    children: &Children,
    ctx: &Ctx,
    now: Timestamp,
) -> Result<Collected, Error> {
    let name = collector_pod_name(experiment);
    let not_owned = |what, name: String| Error::NotOwned {
        experiment: experiment.name_any(),
        what,
        namespace: experiment.namespace().unwrap_or_default(),
        name,
    };
    let collector_err = |source| Error::Collector {
        experiment: experiment.name_any(),
        name: name.clone(),
        source,
    };
    if let Some(pod) = children.get::<Pod>(&name).await.map_err(collector_err)? {
        if !children.controls(&pod.metadata) {
            return Err(not_owned("pod", name));
        }
        return Ok(match pod_outcome(&pod) {
            PodOutcome::Succeeded { .. } => Collected::Succeeded,
            PodOutcome::Failed(mut failure) => {
                failure.detail = failure.detail.replacen("launcher pod", "collector pod", 1);
                Collected::Failed(failure_message(&failure, None))
            }
            PodOutcome::Waiting | PodOutcome::Running => Collected::InFlight,
        });
    }
    // Collection only reads the runs' directories and writes the comparison next to them, so a collector that
    // vanished before it finished is simply started again.
    let file = plan_file(experiment, plan, observations, endpoint, now);
    let json = serde_json::to_string_pretty(&file).map_err(|e| BuildError::Encode {
        experiment: experiment.name_any(),
        what: "the plan file",
        message: e.to_string(),
    })?;
    let plan_name = plan_config_map_name(experiment);
    children
        .apply(&plan_config_map(experiment, &json)?)
        .await
        .map_err(|e| match e {
            ChildError::NotOwned => not_owned("ConfigMap", plan_name.clone()),
            ChildError::Api(source) => Error::ApplyPlan {
                experiment: experiment.name_any(),
                name: plan_name.clone(),
                source,
            },
        })?;
    children
        .create(&collector_pod(experiment, &ctx.launcher)?)
        .await
        .map_err(|e| match e {
            ChildError::NotOwned => not_owned("pod", name.clone()),
            ChildError::Api(source) => collector_err(source),
        })?;
    Ok(Collected::InFlight)
}
