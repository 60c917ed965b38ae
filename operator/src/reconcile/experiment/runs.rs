//! The experiment's runs: listed and matched to the plan, their failures announced, and the next ones started,
//! hooks first.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkExperimentStatus, BenchmarkRun};

use super::Pass;
use super::error::Error;
use crate::builders::experiment::{experiment_run, experiment_selector};
use crate::experiment::hooks::{HookCall, call_hooks};
use crate::experiment::status::{Observation, observe};
use crate::experiment::validate::Plan;
use crate::reconcile::Ctx;
use crate::reconcile::children::{ChildError, Children};

/// Start: each run the schedule starts now, its hooks called first, then announced in an event.
pub(super) async fn start_runs(
    pass: &Pass<'_>,
    plan: &Plan,
    start: &[usize],
    observations: &mut [Observation],
    endpoint: Option<&str>,
) -> Result<(), Error> {
    let (experiment, ctx) = (pass.experiment, pass.ctx);
    for &index in start {
        let hooks = run_hooks(experiment, plan, index, endpoint, ctx).await;
        let run = experiment_run(experiment, &plan.treatments, &plan.runs[index], &hooks)?;
        create_run(experiment, &run, &pass.children).await?;
        let planned = &plan.runs[index];
        ctx.publish(
            &experiment.object_ref(&()),
            EventType::Normal,
            "RunCreated",
            "CreateRun",
            &format!(
                "created BenchmarkRun {} (treatment {}, repeat {}; run {} of {})",
                plan.names[index],
                plan.treatments[planned.treatment].name,
                planned.repeat,
                index + 1,
                plan.runs.len()
            ),
        )
        .await;
        observations[index] = Observation::created(hooks);
    }
    Ok(())
}

/// The experiment started when its earliest run was created, so a status write lost to a restart changes
/// nothing; a pass that creates the first run starts it now.
pub(super) fn mark_started(pass: &mut Pass<'_>, owned: &[BenchmarkRun], starting: bool) {
    if pass.status.start_time.is_some() {
        return;
    }
    pass.status.start_time = owned
        .iter()
        .filter_map(|r| r.metadata.creation_timestamp.clone())
        .min_by_key(|t| t.0)
        .or_else(|| starting.then_some(Time(pass.now)));
}

/// Each planned run as observed: from the owned run of its name, or not created yet, or lost (it existed — an
/// earlier status saw it, or a later run of the plan exists — and is gone).
pub(super) fn observe_runs(
    plan: &Plan,
    owned: &[BenchmarkRun],
    old: Option<&BenchmarkExperimentStatus>,
) -> Vec<Observation> {
    let by_name: BTreeMap<String, &BenchmarkRun> =
        owned.iter().map(|r| (r.name_any(), r)).collect();
    let seen_before: BTreeMap<&str, bool> = old
        .map(|s| {
            s.runs
                .iter()
                .map(|r| (r.name.as_str(), r.phase.is_some()))
                .collect()
        })
        .unwrap_or_default();
    let last_existing = plan.names.iter().rposition(|n| by_name.contains_key(n));
    plan.names
        .iter()
        .enumerate()
        .map(|(index, name)| match by_name.get(name) {
            Some(run) => observe(run),
            None if last_existing.is_some_and(|last| index < last)
                || seen_before.get(name.as_str()).copied().unwrap_or(false) =>
            {
                Observation::lost()
            }
            None => Observation::not_created(),
        })
        .collect()
}

/// A Warning event for each run that failed (or vanished) since the last status.
pub(super) async fn announce_run_failures(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    observations: &[Observation],
    old: Option<&BenchmarkExperimentStatus>,
    ctx: &Ctx,
) {
    let before: BTreeMap<&str, Option<&str>> = old
        .map(|s| {
            s.runs
                .iter()
                .map(|r| (r.name.as_str(), r.phase.as_deref()))
                .collect()
        })
        .unwrap_or_default();
    for (name, seen) in plan.names.iter().zip(observations) {
        let now_phase = seen.phase.as_deref();
        if !matches!(now_phase, Some("Failed" | "Lost")) {
            continue;
        }
        if before.get(name.as_str()).copied().flatten() == now_phase {
            continue;
        }
        let continuing = if experiment.spec.ordering.stop_on_failure {
            "stopOnFailure is set: no more runs start"
        } else {
            "the experiment goes on"
        };
        ctx.publish(
            &experiment.object_ref(&()),
            EventType::Warning,
            "RunFailed",
            "ObserveRun",
            &format!(
                "BenchmarkRun {name} {}: {}; {continuing}",
                if now_phase == Some("Lost") {
                    "was lost"
                } else {
                    "failed"
                },
                seen.error.as_deref().unwrap_or("no reason given")
            ),
        )
        .await;
    }
}

/// Calls the experiment's hooks before run `index`; a failed hook becomes a Warning event and its record.
pub(super) async fn run_hooks(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    index: usize,
    endpoint: Option<&str>,
    ctx: &Ctx,
) -> Vec<HookCall> {
    if experiment.spec.hooks.is_empty() {
        return Vec::new();
    }
    let calls = call_hooks(&ctx.http, &experiment.spec.hooks, endpoint).await;
    let mut hooks = Vec::with_capacity(calls.len());
    for (call, failure) in calls {
        if let Some(failure) = failure {
            ctx.publish(
                &experiment.object_ref(&()),
                EventType::Warning,
                "HookFailed",
                "CallHook",
                &format!(
                    "hook {} before BenchmarkRun {}: {failure}; the run starts anyway",
                    call.name, plan.names[index]
                ),
            )
            .await;
        }
        hooks.push(call);
    }
    hooks
}

pub(super) async fn list_runs(
    experiment: &BenchmarkExperiment,
    children: &Children,
) -> Result<Vec<BenchmarkRun>, Error> {
    children
        .list(&experiment_selector(experiment)?)
        .await
        .map_err(|source| Error::ListRuns {
            experiment: experiment.name_any(),
            source,
        })
}

/// The experiment's runs, plan ConfigMap and collector pod: what it controls by its uid.
pub(super) fn children_of(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Children {
    Children::new(
        ctx.client.clone(),
        &experiment.namespace().unwrap_or_default(),
        &experiment.uid().unwrap_or_default(),
    )
}

/// Creates `run`; one that already exists is this experiment's only if the experiment controls it.
pub(super) async fn create_run(
    experiment: &BenchmarkExperiment,
    run: &BenchmarkRun,
    children: &Children,
) -> Result<(), Error> {
    match children.create(run).await {
        Ok(_) => Ok(()),
        Err(ChildError::NotOwned) => Err(Error::RunNameTaken {
            experiment: experiment.name_any(),
            run: run.name_any(),
        }),
        Err(ChildError::Api(source)) => Err(Error::CreateRun {
            experiment: experiment.name_any(),
            run: run.name_any(),
            source,
        }),
    }
}
