//! Prepare: render the run's profile, make the ConfigMap holding it and ensure the workload claim; a profile that
//! does not render is told on the run and nothing starts.

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkRun, Phase, WorkloadProfile};

use super::error::Error;
use super::finish::write_status;
use super::{DEADLINE_SLACK, Pass, remaining};
use crate::builders::{profile_config_map, profile_config_map_name, workload_pvc};
use crate::reconcile::Ctx;
use crate::reconcile::children::{ChildError, Children};
use crate::resolve::{RenderedProfile, ResolveError, render_run_profile};
use crate::status::{COMPLETED, PROFILE_RENDERED, set_condition};

/// What `prepare` leaves for `start`.
pub(super) enum Prepared {
    /// The profile does not render: nothing may be started.
    NotRendered(ResolveError),
    /// The ConfigMap and the claim are there; the claim's access modes decide where shards may go.
    Ready { access_modes: Vec<String> },
}

/// Prepare: render the profile, then make the ConfigMap holding it and ensure the workload claim.
pub(super) async fn prepare(pass: &mut Pass<'_>) -> Result<Prepared, Error> {
    let rendered = match render(pass.run, pass.ctx).await? {
        Ok(rendered) => rendered,
        Err(e) => return Ok(Prepared::NotRendered(e)),
    };
    set_condition(
        &mut pass.status.conditions,
        PROFILE_RENDERED,
        true,
        "Rendered",
        &format!("rendered from {}", rendered.template_name),
        pass.generation,
        pass.now,
    );
    apply_config_map(pass.run, &rendered, &pass.children).await?;
    let default_class = pass.ctx.launcher.defaults.storage_class_name.as_deref();
    let access_modes = ensure_pvc(pass.run, default_class, &pass.children).await?;
    Ok(Prepared::Ready { access_modes })
}

/// Renders the run's profile. The outer error is the API failing; the inner one is the profile's own problem.
pub(super) async fn render(
    run: &BenchmarkRun,
    ctx: &Ctx,
) -> Result<Result<RenderedProfile, ResolveError>, Error> {
    let profile = match &run.spec.workload.profile_ref {
        Some(reference) => {
            let api: Api<WorkloadProfile> =
                Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
            api.get_opt(&reference.name)
                .await
                .map_err(|source| Error::GetProfile {
                    run: run.name_any(),
                    name: reference.name.clone(),
                    source,
                })?
        }
        None => None,
    };
    Ok(render_run_profile(run, profile.as_ref()))
}

/// The profile does not render: say why on the run and in a Warning event, create nothing, and wait for a change
/// (of the run, or of the WorkloadProfile it references) or for the deadline.
pub(super) async fn profile_not_rendered(
    pass: Pass<'_>,
    error: &ResolveError,
) -> Result<Action, Error> {
    let Pass {
        run,
        ctx,
        now,
        generation,
        old,
        mut status,
        ..
    } = pass;
    let message = error.to_string();
    let reason = error.reason();
    let unchanged = status.conditions.iter().any(|c| {
        c.type_ == PROFILE_RENDERED
            && c.status == "False"
            && c.reason == reason
            && c.message == message
    });
    set_condition(
        &mut status.conditions,
        PROFILE_RENDERED,
        false,
        reason,
        &message,
        generation,
        now,
    );
    set_condition(
        &mut status.conditions,
        COMPLETED,
        false,
        "Pending",
        "the profile does not render; no launcher was created",
        generation,
        now,
    );
    status.phase = Some(Phase::Pending);
    if !unchanged {
        ctx.publish(
            &run.object_ref(&()),
            EventType::Warning,
            reason,
            "RenderProfile",
            &message,
        )
        .await;
    }
    write_status(run, old.as_ref(), &status, ctx).await?;
    Ok(match remaining(run, now) {
        Some(left) => Action::requeue(left + DEADLINE_SLACK),
        None => Action::await_change(),
    })
}

/// Creates the profile ConfigMap, or updates it while the run controls it (the spec of a run that has not started
/// may have changed since). A ConfigMap of that name that the run does not control (a user's, another run's) is
/// refused, never taken over.
pub(super) async fn apply_config_map(
    run: &BenchmarkRun,
    rendered: &RenderedProfile,
    children: &Children,
) -> Result<(), Error> {
    let cm = profile_config_map(run, &rendered.template_name, &rendered.text)?;
    children.apply(&cm).await.map_err(|e| match e {
        ChildError::Api(source) => Error::ApplyConfigMap {
            run: run.name_any(),
            name: profile_config_map_name(run),
            source,
        },
        ChildError::NotOwned => Error::ConfigMapNotOwned {
            run: run.name_any(),
            namespace: run.namespace().unwrap_or_default(),
            name: profile_config_map_name(run),
        },
    })
}

/// Creates the workload PVC if absent; an existing claim is reused as it is and never changed or deleted.
/// Returns the claim's access modes (none for an emptyDir run).
pub(super) async fn ensure_pvc(
    run: &BenchmarkRun,
    default_class: Option<&str>,
    children: &Children,
) -> Result<Vec<String>, Error> {
    let Some(pvc) = workload_pvc(run, default_class) else {
        return Ok(Vec::new());
    };
    let claim = children
        .reuse_or_create(&pvc)
        .await
        .map_err(|source| Error::EnsurePvc {
            run: run.name_any(),
            name: pvc.name_any(),
            source,
        })?;
    Ok(claim
        .spec
        .and_then(|spec| spec.access_modes)
        .unwrap_or_default())
}
