//! A run's standalone stack: its Deployment and Service made first, the launchers held until it is ready, its
//! heartbeat while they run, its model-load times for the nop harness, and its teardown.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::DeleteParams;
use kube::api::{Api, LogParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkRun, BenchmarkRunStatus, Phase};

use super::children_of;
use super::error::Error;
use super::{LOG_TAIL_LINES, Outcome, Pass};
use crate::builders::stack::{
    STACK_CONTAINER, stack_deployment, stack_image, stack_name, stack_selector, stack_service,
    stack_url, standalone,
};
use crate::reconcile::Ctx;
use crate::reconcile::children::{Child, ChildError, Children, Ensured, Removal};
use crate::stack::{STACK_READY, StackState, stack_state};
use crate::status::{FailureReason, parse_duration, set_condition};

/// How often a starting standalone stack is looked at, beside its Deployment's own events.
pub(super) const STACK_POLL: Duration = Duration::from_secs(5);

/// The heartbeat of a standalone stack while launchers run against it: its Deployment's events wake the run at
/// once when the pod stops being ready; this catches what changes no Deployment status (a pod deleted and
/// replaced by a ready one between two looks).
pub(super) const STACK_HEARTBEAT: Duration = Duration::from_secs(10);

/// The most of a stack pod's log read for the nop harness: a vLLM startup log is some hundred kilobytes.
pub(super) const STACK_LOG_LIMIT_BYTES: i64 = 8 * 1024 * 1024;

/// Makes the standalone stack's Deployment and Service where absent and looks at it: `None` once it is ready (the
/// launchers may start), else how the pass ends — still starting, or failed with StackNotReady.
pub(super) async fn stack_step(
    pass: &mut Pass<'_>,
    stack: &llmbench_api::v1alpha1::StandaloneStack,
) -> Result<Option<Outcome>, Error> {
    let run = pass.run;
    let ctx = pass.ctx;
    let deployment = ensure_stack(run, stack, &pass.children, ctx).await?;
    let stack_pods = list_stack_pods(run, &pass.children).await?;
    let state = stack_state(Some(&deployment), &stack_pods, None);
    let timeout = &stack.readiness.timeout;
    let (detail, pod, restarted, starting) = match state {
        StackState::Ready { pod, restarts } => {
            let url = stack_url(run, stack);
            let was_ready = pass.status.stack.as_ref().is_some_and(|s| s.ready);
            if let Some(status) = pass.status.stack.as_mut() {
                status.ready = true;
                status.pod = Some(pod.clone());
                status.restarts = Some(restarts);
            }
            let message = format!("stack pod {pod} is ready; the launchers go to {url}");
            set_condition(
                &mut pass.status.conditions,
                STACK_READY,
                true,
                "StackReady",
                &message,
                pass.generation,
                pass.now,
            );
            if !was_ready {
                ctx.publish(
                    &run.object_ref(&()),
                    EventType::Normal,
                    "StackReady",
                    "StartStack",
                    &message,
                )
                .await;
            }
            return Ok(None);
        }
        StackState::Starting { detail } => (detail, None, false, true),
        StackState::Failed {
            pod,
            detail,
            restarted,
        } => (detail, pod, restarted, false),
    };
    let created = deployment
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(pass.now, |t| t.0);
    let limit = parse_duration(timeout).unwrap_or_else(|e| {
        // The CRD admits only valid durations; fall back to the default rather than never giving up.
        tracing::warn!(run = %run.name_any(), error = %e, "unparsable readiness.timeout; using 15m");
        Duration::from_secs(15 * 60)
    });
    let waited = pass.now.duration_since(created).unsigned_abs();
    if starting && waited < limit {
        set_condition(
            &mut pass.status.conditions,
            STACK_READY,
            false,
            "StackStarting",
            &detail,
            pass.generation,
            pass.now,
        );
        return Ok(Some(Outcome::InFlight {
            phase: Phase::Pending,
            reason: "StackStarting",
            poll: STACK_POLL.min(limit - waited),
        }));
    }
    let pod = pod.or_else(|| stack_pods.first().map(ResourceExt::name_any));
    let tail = match &pod {
        Some(pod) => stack_log_tail(&pass.pods_api, pod, restarted).await,
        None => None,
    };
    let message = if starting {
        crate::stack::not_ready_message(timeout, &detail, tail.as_deref())
    } else {
        crate::stack::cannot_start_message(&detail, tail.as_deref())
    };
    Ok(Some(Outcome::StackDown {
        reason: FailureReason::StackNotReady,
        message,
    }))
}

/// The heartbeat of a running run's standalone stack: `Some` (StackFailed) when the pod the launchers run against
/// died, went away or stopped being ready.
pub(super) async fn heartbeat(pass: &Pass<'_>) -> Result<Option<Outcome>, Error> {
    let Some((pod, restarts)) = pass
        .status
        .stack
        .as_ref()
        .and_then(|s| Some((s.pod.clone()?, s.restarts.unwrap_or(0))))
    else {
        return Ok(None);
    };
    let run = pass.run;
    let deployment = pass
        .children
        .get::<Deployment>(&stack_name(run))
        .await
        .map_err(|source| Error::ReadStack {
            run: run.name_any(),
            source,
        })?;
    let stack_pods = list_stack_pods(run, &pass.children).await?;
    match stack_state(deployment.as_ref(), &stack_pods, Some((&pod, restarts))) {
        StackState::Failed {
            pod: failed,
            detail,
            restarted,
        } => {
            // A pod that is gone has no log left to read; a replacement's is not the one that died.
            let tail = match failed.filter(|p| stack_pods.iter().any(|s| s.name_any() == *p)) {
                Some(p) => stack_log_tail(&pass.pods_api, &p, restarted).await,
                None => None,
            };
            Ok(Some(Outcome::StackDown {
                reason: FailureReason::StackFailed,
                message: crate::stack::failed_message(&detail, tail.as_deref()),
            }))
        }
        StackState::Ready { .. } | StackState::Starting { .. } => Ok(None),
    }
}

/// Creates the stack's Deployment and Service where absent and returns the Deployment. Objects of those names
/// that the run does not control are refused, never taken over.
async fn ensure_stack(
    run: &BenchmarkRun,
    stack: &llmbench_api::v1alpha1::StandaloneStack,
    children: &Children,
    ctx: &Ctx,
) -> Result<Deployment, Error> {
    let name = stack_name(run);
    let err = |kind: &'static str| {
        let name = name.clone();
        move |e| match e {
            ChildError::Api(source) => Error::EnsureStack {
                run: run.name_any(),
                object: format!("{kind} {name}"),
                source,
            },
            ChildError::NotOwned => Error::StackNotOwned {
                run: run.name_any(),
                kind,
                namespace: run.namespace().unwrap_or_default(),
                name,
            },
        }
    };
    children
        .ensure(&stack_service(run, stack)?)
        .await
        .map_err(err("Service"))?;
    match children
        .ensure(&stack_deployment(run, stack)?)
        .await
        .map_err(err("Deployment"))?
    {
        Ensured::Existing(found) => Ok(found),
        Ensured::Created(created) => {
            ctx.publish(
                &run.object_ref(&()),
                EventType::Normal,
                "StackCreated",
                "StartStack",
                &format!(
                    "created the standalone stack {name} ({}); the launchers start once it is ready",
                    stack_image(stack)
                ),
            )
            .await;
            Ok(created)
        }
    }
}

async fn list_stack_pods(run: &BenchmarkRun, children: &Children) -> Result<Vec<Pod>, Error> {
    children
        .list(&stack_selector(run)?)
        .await
        .map_err(|source| Error::ReadStack {
            run: run.name_any(),
            source,
        })
}

/// The last lines of the stack server's log — of its previous instance when it restarted, which is the one that
/// says why; `None` when there is none or the kubelet cannot be reached.
pub(super) async fn stack_log_tail(api: &Api<Pod>, pod: &str, previous: bool) -> Option<String> {
    let params = LogParams {
        container: Some(STACK_CONTAINER.to_owned()),
        tail_lines: Some(LOG_TAIL_LINES),
        limit_bytes: Some(16 * 1024),
        previous,
        ..LogParams::default()
    };
    match api.logs(pod, &params).await {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::info!(pod, error = %e, "cannot read the stack's log");
            None
        }
    }
}

/// Deletes the standalone stack's Deployment and Service, those the run controls, unless it is to be kept
/// (`keep` is ignored when the run itself is deleted: `force`).
pub(super) async fn teardown_stack(
    run: &BenchmarkRun,
    ctx: &Ctx,
    force: bool,
) -> Result<(), Error> {
    let Some(stack) = standalone(run) else {
        return Ok(());
    };
    if stack.keep && !force {
        return Ok(());
    }
    let children = children_of(run, ctx)?;
    let name = stack_name(run);
    delete_stack_object::<Deployment>(run, &children, &name, "Deployment").await?;
    delete_stack_object::<Service>(run, &children, &name, "Service").await
}

async fn delete_stack_object<K: Child>(
    run: &BenchmarkRun,
    children: &Children,
    name: &str,
    kind: &'static str,
) -> Result<(), Error> {
    let removal = children
        .delete_named::<K>(name, DeleteParams::default())
        .await
        .map_err(|source| Error::DeleteStack {
            run: run.name_any(),
            object: format!("{kind} {name}"),
            source,
        })?;
    if removal == Removal::Deleted {
        tracing::info!(run = %run.name_any(), kind, name, "deleted the standalone stack");
    }
    Ok(())
}

/// The nop harness: the model-load figures of the stack's log, as llm-d-benchmark's nop reads its vLLM pod's log
/// once the harness ran — a standalone stack's pod, or the serving pods of a stack the user deployed
/// ([`super::user_stack`]). A log that cannot be read or is no vLLM log is told in a Warning event; the run still
/// succeeds, as upstream's nop does.
pub(super) async fn stack_model_load(
    run: &BenchmarkRun,
    status: &BenchmarkRunStatus,
    api: &Api<Pod>,
    ctx: &Ctx,
    now: Timestamp,
) -> Option<llmbench_api::summary::v1::ModelLoad> {
    if run.spec.harness != llmbench_api::v1alpha1::Harness::Nop {
        return None;
    }
    let year = i32::from(now.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC).year());
    // A user-deployed stack's pods each have their load time told (`None`: a standalone stack's one pod).
    let read = if standalone(run).is_none() {
        super::user_stack::model_load(run, &ctx.client, year)
            .await
            .map(|(load, note)| (load, Some(note)))
    } else {
        let pod = status.stack.as_ref()?.pod.clone()?;
        let params = LogParams {
            container: Some(STACK_CONTAINER.to_owned()),
            limit_bytes: Some(STACK_LOG_LIMIT_BYTES),
            ..LogParams::default()
        };
        match api.logs(&pod, &params).await {
            Ok(log) => {
                crate::stack::model_load(&log, &pod, STACK_CONTAINER, &run.spec.stack.model, year)
                    .map(|load| (load, None))
            }
            Err(e) => Err(format!("cannot read the log of stack pod {pod}: {e}")),
        }
    };
    let (type_, reason, note, load) = match read {
        Ok((load, note)) => (EventType::Normal, "ModelLoadRead", note, Some(load)),
        Err(why) => (
            EventType::Warning,
            "ModelLoadUnread",
            Some(format!(
                "the nop harness read no model-load times from the stack: {why}"
            )),
            None,
        ),
    };
    if let Some(note) = note {
        ctx.publish(&run.object_ref(&()), type_, reason, "Collect", &note)
            .await;
    }
    load
}
