//! The launcher pods: created where missing, listed, their logs read when one fails, and stopped or deleted.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DeleteParams;
use kube::api::{Api, LogParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::BenchmarkRun;

use super::error::Error;
use super::{LOG_TAIL_LINES, Pass};
use crate::builders::{
    COMPONENT_LABEL, PREFLIGHT_COMPONENT, colocate_shards, launcher_pod, launcher_pod_name,
    run_selector, shards_share_a_node,
};
use crate::reconcile::Ctx;
use crate::reconcile::children::{ChildError, Children, Removal};
use crate::status::{FailureReason, LAUNCHER_STARTED, PodOutcome, pod_outcome, set_condition};

/// Start: create the launcher pods that are missing; returns the run's pods as they are now.
pub(super) async fn start(
    pass: &Pass<'_>,
    pods: &[Pod],
    access_modes: &[String],
) -> Result<Vec<Pod>, Error> {
    let run = pass.run;
    let created = create_launchers(
        run,
        pods,
        pass.expected,
        access_modes,
        &pass.children,
        pass.ctx,
    )
    .await?;
    if created > 0 {
        let what = if run.spec.skip_run {
            "collector"
        } else {
            "launcher"
        };
        pass.ctx
            .publish(
                &run.object_ref(&()),
                EventType::Normal,
                "LaunchersCreated",
                "CreateLaunchers",
                &format!(
                    "created {created} {what} pod(s); results go to {}",
                    pass.status.results_path.as_deref().unwrap_or_default()
                ),
            )
            .await;
    }
    list_pods(run, &pass.children).await
}

/// The run has its pods: record when it started and that the launchers exist.
pub(super) fn mark_started(pass: &mut Pass<'_>, pods: &[Pod]) {
    // The earliest pod's creation is the start, so a status write lost to a restart changes nothing.
    let start = pods
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp.clone())
        .min_by_key(|t| t.0)
        .unwrap_or(Time(pass.now));
    pass.status.start_time = Some(start);
    let reason = if pass.run.spec.skip_run {
        "CollectorCreated"
    } else {
        "LaunchersCreated"
    };
    set_condition(
        &mut pass.status.conditions,
        LAUNCHER_STARTED,
        true,
        reason,
        &format!(
            "{} pod(s): {}",
            pass.expected,
            pass.status.launcher_pods.join(", ")
        ),
        pass.generation,
        pass.now,
    );
}

/// The run's launcher pods (and a sharded run's merge pod): every pod of the run but its pre-flight pod.
pub(super) async fn list_pods(run: &BenchmarkRun, children: &Children) -> Result<Vec<Pod>, Error> {
    list_selected(
        run,
        children,
        &format!(
            "{},{COMPONENT_LABEL}!={PREFLIGHT_COMPONENT}",
            run_selector(run)?
        ),
    )
    .await
}

/// The run's pre-flight pod, if it has one.
pub(super) async fn list_preflight_pods(
    run: &BenchmarkRun,
    children: &Children,
) -> Result<Vec<Pod>, Error> {
    list_selected(
        run,
        children,
        &format!(
            "{},{COMPONENT_LABEL}={PREFLIGHT_COMPONENT}",
            run_selector(run)?
        ),
    )
    .await
}

/// Every pod of the run: its launchers, its merge pod and its pre-flight pod.
pub(super) async fn list_all_pods(
    run: &BenchmarkRun,
    children: &Children,
) -> Result<Vec<Pod>, Error> {
    list_selected(run, children, &run_selector(run)?).await
}

async fn list_selected(
    run: &BenchmarkRun,
    children: &Children,
    selector: &str,
) -> Result<Vec<Pod>, Error> {
    children
        .list(selector)
        .await
        .map_err(|source| Error::ListPods {
            run: run.name_any(),
            source,
        })
}

/// Creates `pod`, one of the run's; `Ok(true)` when created, `Ok(false)` when the run already has it. A pod of
/// that name that the run does not control (a user's, or an earlier namesake run's still terminating) is refused.
pub(super) async fn create_pod(
    run: &BenchmarkRun,
    pod: &Pod,
    children: &Children,
) -> Result<bool, Error> {
    children.create(pod).await.map_err(|e| match e {
        ChildError::Api(source) => Error::CreatePod {
            run: run.name_any(),
            name: pod.name_any(),
            source,
        },
        ChildError::NotOwned => Error::PodNotOwned {
            run: run.name_any(),
            namespace: run.namespace().unwrap_or_default(),
            name: pod.name_any(),
        },
    })
}

/// Creates each missing launcher pod; a pod that already exists is left alone, so a restart never makes a second.
pub(super) async fn create_launchers(
    run: &BenchmarkRun,
    existing: &[Pod],
    expected: u32,
    access_modes: &[String],
    children: &Children,
    ctx: &Ctx,
) -> Result<u32, Error> {
    let mut created = 0;
    let colocate = shards_share_a_node(run, access_modes);
    for index in 0..expected {
        let name = launcher_pod_name(run, index);
        if existing.iter().any(|p| p.name_any() == name) {
            continue;
        }
        let mut pod = launcher_pod(run, index, &ctx.launcher)?;
        if colocate {
            colocate_shards(&mut pod, run)?;
        }
        if create_pod(run, &pod, children).await? {
            created += 1;
        }
    }
    Ok(created)
}

/// The last lines of a failed launcher's log; `None` when there is none or the kubelet cannot be reached.
pub(super) async fn log_tail(api: &Api<Pod>, pod: &str, reason: FailureReason) -> Option<String> {
    if matches!(
        reason,
        FailureReason::ImagePullFailed
            | FailureReason::ContainerConfigError
            | FailureReason::LauncherLost
            | FailureReason::ShardsNotReady
    ) {
        return None;
    }
    let params = LogParams {
        container: Some("launcher".to_owned()),
        tail_lines: Some(LOG_TAIL_LINES),
        limit_bytes: Some(16 * 1024),
        ..LogParams::default()
    };
    match api.logs(pod, &params).await {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::info!(pod, error = %e, "cannot read the launcher's log; the termination message stands in");
            None
        }
    }
}

/// Deletes the pods of a failed run that are still waiting or running (and not already being deleted), so a
/// failed shard stops the others.
pub(super) async fn stop_active_pods(
    run: &BenchmarkRun,
    pods: &[Pod],
    children: &Children,
) -> Result<(), Error> {
    let active: Vec<Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| matches!(pod_outcome(p), PodOutcome::Waiting | PodOutcome::Running))
        .cloned()
        .collect();
    delete_pods(run, &active, children).await
}

/// Deletes `pods` that the run controls, each only as the very pod that was read (a uid precondition), so a
/// namesake made since is never hit.
pub(super) async fn delete_pods(
    run: &BenchmarkRun,
    pods: &[Pod],
    children: &Children,
) -> Result<(), Error> {
    for pod in pods {
        let removal = children
            .delete(pod, DeleteParams::default())
            .await
            .map_err(|source| Error::DeletePod {
                run: run.name_any(),
                name: pod.name_any(),
                source,
            })?;
        if removal == Removal::NotOwned {
            tracing::warn!(run = %run.name_any(), pod = pod.name_any(), "a pod with the run's label that the run does not control; left alone");
        }
    }
    Ok(())
}
