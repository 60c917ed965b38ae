//! The launcher pods: created where missing, listed, their logs read when one fails, and stopped or deleted.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, LogParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::BenchmarkRun;

use super::error::Error;
use super::{LOG_TAIL_LINES, Pass, is_conflict, only_this, post_params};
use crate::builders::names::controlled_by;
use crate::builders::{
    self, colocate_shards, launcher_pod, launcher_pod_name, run_selector, shards_share_a_node,
};
use crate::reconcile::{Ctx, is_already_exists, is_not_found};
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
        &pass.pods_api,
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
    list_pods(run, &pass.pods_api).await
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

pub(super) async fn list_pods(run: &BenchmarkRun, pods: &Api<Pod>) -> Result<Vec<Pod>, Error> {
    let selector = run_selector(run)?;
    Ok(pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::ListPods {
            run: run.name_any(),
            source,
        })?
        .items)
}

/// Creates `pod`, one of the run's; `Ok(true)` when created, `Ok(false)` when the run already has it. A pod of
/// that name that the run does not control (a user's, or an earlier namesake run's still terminating) is refused.
pub(super) async fn create_pod(
    run: &BenchmarkRun,
    pod: &Pod,
    api: &Api<Pod>,
) -> Result<bool, Error> {
    let name = pod.name_any();
    let err = |source| Error::CreatePod {
        run: run.name_any(),
        name: name.clone(),
        source,
    };
    match api.create(&post_params(), pod).await {
        Ok(_) => Ok(true),
        Err(e) if is_already_exists(&e) => match api.get_opt(&name).await.map_err(err)? {
            Some(found) if controlled_by(&found.metadata, builders::uid(run)?) => Ok(false),
            Some(_) => Err(Error::PodNotOwned {
                run: run.name_any(),
                namespace: run.namespace().unwrap_or_default(),
                name,
            }),
            // Gone in between: the next pass creates it.
            None => Err(err(e)),
        },
        Err(e) => Err(err(e)),
    }
}

/// Creates each missing launcher pod; a pod that already exists is left alone, so a restart never makes a second.
pub(super) async fn create_launchers(
    run: &BenchmarkRun,
    existing: &[Pod],
    expected: u32,
    access_modes: &[String],
    api: &Api<Pod>,
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
        if create_pod(run, &pod, api).await? {
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
    api: &Api<Pod>,
) -> Result<(), Error> {
    let active: Vec<Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| matches!(pod_outcome(p), PodOutcome::Waiting | PodOutcome::Running))
        .cloned()
        .collect();
    delete_pods(run, &active, api).await
}

/// Deletes `pods` that the run controls, each only as the very pod that was read (a uid precondition), so a
/// namesake made since is never hit.
pub(super) async fn delete_pods(
    run: &BenchmarkRun,
    pods: &[Pod],
    api: &Api<Pod>,
) -> Result<(), Error> {
    let uid = builders::uid(run)?;
    for pod in pods {
        let name = pod.name_any();
        if !controlled_by(&pod.metadata, uid) {
            tracing::warn!(run = %run.name_any(), pod = name, "a pod with the run's label that the run does not control; left alone");
            continue;
        }
        match api.delete(&name, &only_this(pod.uid())).await {
            Ok(_) => {}
            // Gone, or replaced by another pod of that name (the precondition failed): not ours to delete.
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(source) => {
                return Err(Error::DeletePod {
                    run: run.name_any(),
                    name,
                    source,
                });
            }
        }
    }
    Ok(())
}
