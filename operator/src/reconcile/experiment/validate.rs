//! Validate: the experiment's plan, checked in full before its first run and re-derived after; an invalid
//! experiment is told on it and nothing starts.

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::{
    BenchmarkExperiment, BenchmarkRun, ExperimentPhase, WORKLOAD_MOUNT_PATH, WorkloadProfile,
};

use super::Pass;
use super::error::Error;
use super::finish::{bounded, write_status};
use crate::experiment::status::VALID;
use crate::experiment::validate::{Invalid, Plan, plan_of, validate};
use crate::reconcile::Ctx;
use crate::status::{COMPLETED, set_condition};

/// Validate: the plan, with the `Valid` condition and the results path. Before the first run the spec is checked
/// in full (the profile it references included); once a run exists the spec is frozen (the CRD's rule) and the
/// plan is only re-derived, never re-made. The outer error is the API failing; the inner one is the spec's own.
pub(super) async fn validated(
    pass: &mut Pass<'_>,
    owned: &[BenchmarkRun],
) -> Result<Result<Plan, Invalid>, Error> {
    let experiment = pass.experiment;
    let started = pass.status.start_time.is_some() || !owned.is_empty();
    let checked = if started {
        plan_of(experiment)
    } else {
        let profile = referenced_profile(experiment, pass.ctx).await?;
        validate(experiment, profile.as_ref())
    };
    let plan = match checked {
        Ok(plan) => plan,
        Err(invalid) => return Ok(Err(invalid)),
    };
    set_condition(
        &mut pass.status.conditions,
        VALID,
        true,
        "Valid",
        &format!(
            "{} treatment(s) × {} repeat(s) = {} run(s), every profile renders",
            plan.treatments.len(),
            experiment.spec.repeats,
            plan.runs.len()
        ),
        pass.generation,
        pass.now,
    );
    let volume = experiment
        .spec
        .template
        .storage
        .pvc_name()
        .unwrap_or("emptyDir");
    pass.status.results_path = Some(format!(
        "{volume}:{WORKLOAD_MOUNT_PATH}/{}",
        plan.experiment_dir
    ));
    Ok(Ok(plan))
}

/// The WorkloadProfile the template references, when it does and it exists.
pub(super) async fn referenced_profile(
    experiment: &BenchmarkExperiment,
    ctx: &Ctx,
) -> Result<Option<WorkloadProfile>, Error> {
    let Some(reference) = &experiment.spec.template.workload.profile_ref else {
        return Ok(None);
    };
    let api: Api<WorkloadProfile> = Api::namespaced(
        ctx.client.clone(),
        &experiment.namespace().unwrap_or_default(),
    );
    api.get_opt(&reference.name)
        .await
        .map_err(|source| Error::GetProfile {
            experiment: experiment.name_any(),
            name: reference.name.clone(),
            source,
        })
}

/// The experiment cannot start: say why on it and in a Warning event, create nothing, and wait for a change (of
/// the experiment, or of the WorkloadProfile it references). A missing WorkloadProfile keeps it Pending, as it
/// keeps a BenchmarkRun; anything else fails it until the spec is fixed.
pub(super) async fn invalid_experiment(pass: Pass<'_>, invalid: &Invalid) -> Result<Action, Error> {
    let Pass {
        experiment,
        ctx,
        now,
        generation,
        old,
        mut status,
        ..
    } = pass;
    let message = bounded(&invalid.to_string());
    let reason = invalid.reason();
    let unchanged = status.conditions.iter().any(|c| {
        c.type_ == VALID && c.status == "False" && c.reason == reason && c.message == message
    });
    set_condition(
        &mut status.conditions,
        VALID,
        false,
        reason,
        &message,
        generation,
        now,
    );
    if reason == "ProfileNotFound" {
        status.phase = Some(ExperimentPhase::Pending);
        set_condition(
            &mut status.conditions,
            COMPLETED,
            false,
            "Pending",
            "waiting for the WorkloadProfile the template references; no run was created",
            generation,
            now,
        );
    } else {
        status.phase = Some(ExperimentPhase::Failed);
        set_condition(
            &mut status.conditions,
            COMPLETED,
            true,
            "Failed",
            &format!("the experiment is invalid ({reason}); no run was created"),
            generation,
            now,
        );
    }
    if !unchanged {
        ctx.publish(
            &experiment.object_ref(&()),
            EventType::Warning,
            reason,
            "Validate",
            &message,
        )
        .await;
    }
    write_status(experiment, old.as_ref(), &status, ctx).await?;
    Ok(Action::await_change())
}
