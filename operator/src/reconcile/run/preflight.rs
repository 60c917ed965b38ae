//! Pre-flight: before any launcher exists, a short pod checks the run's stack as the CLI's pre-flight does
//! (endpoint reachable, the model listed, one request of the run's own kind answered for that model). It runs
//! `llmbench run --preflight-only` with the launchers' image, profile, endpoint, service account and placement, so
//! the check is made with the launchers' code from the launchers' network, which NetworkPolicies and the
//! operator's own namespace may not share. A stack that fails fails the run (`Failed`/`PreflightFailed`, with the
//! check's own words, and a Warning event) and no launcher is made; one that passes has its verdict in the
//! `PreflightPassed` condition and the pod is deleted. The launchers still run their own pre-flight when they
//! start, which catches a stack that died in between (a queued run may wait long).

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::Phase;

use super::error::Error;
use super::launchers::{create_pod, delete_pods, list_preflight_pods};
use super::{Outcome, Pass};
use crate::builders::{needs_preflight, preflight_pod, preflight_pod_name};
use crate::status::{
    FailureReason, PREFLIGHT_PASSED, PodFailure, PodOutcome, condition, pod_outcome, set_condition,
};

/// How often a pre-flight under way is looked at (its pod's changes wake the reconciler sooner).
const POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the run's pre-flight stands.
#[derive(Debug, PartialEq)]
pub(super) enum Preflight {
    /// Not needed, or passed: the launchers may be made.
    Clear,
    /// The pod is being made, waits or runs.
    Checking,
    /// The stack failed the check, or the pod could not run it.
    Failed(PodFailure),
}

/// What the pre-flight pod's state means for the run: a pass (with the verdict), a failure (named as the launcher's
/// would be, in the pre-flight's words), or still checking.
pub(super) fn judge(pod: &Pod) -> Result<Option<String>, PodFailure> {
    match pod_outcome(pod) {
        PodOutcome::Succeeded {
            termination_message,
        } => Ok(Some(termination_message.trim().to_owned())),
        PodOutcome::Failed(failure) => {
            let name = pod.name_any();
            let detail = match failure.reason {
                FailureReason::PreflightFailed => format!(
                    "the pre-flight pod {name} found the stack unusable from the launchers' network (exit code \
                     6): no launcher was created; check spec.stack (endpoint or serviceRef, model) and the stack"
                ),
                _ => format!(
                    "the pre-flight pod {name} could not check the stack, so no launcher was created: {}",
                    failure.detail
                ),
            };
            Err(PodFailure { detail, ..failure })
        }
        PodOutcome::Waiting | PodOutcome::Running => Ok(None),
    }
}

/// The pre-flight step: make the pod if it is missing, and read its verdict once it has one. A pass is recorded
/// in the status and the pod deleted.
pub(super) async fn preflight_step(pass: &mut Pass<'_>) -> Result<Preflight, Error> {
    let run = pass.run;
    if !needs_preflight(run) {
        return Ok(Preflight::Clear);
    }
    let passed = condition(&pass.status, PREFLIGHT_PASSED).is_some_and(|c| c.status == "True");
    if passed {
        return Ok(Preflight::Clear);
    }
    let name = preflight_pod_name(run);
    let pods = list_preflight_pods(run, &pass.children).await?;
    let Some(pod) = pods.iter().find(|p| p.name_any() == name) else {
        let pod = preflight_pod(run, &pass.ctx.launcher)?;
        if create_pod(run, &pod, &pass.children).await? {
            tracing::info!(run = %run.name_any(), pod = name, "checking the stack before the launchers");
        }
        return Ok(Preflight::Checking);
    };
    match judge(pod) {
        Ok(None) => Ok(Preflight::Checking),
        Ok(Some(verdict)) => {
            let message = if verdict.is_empty() {
                format!("{name} found the stack usable")
            } else {
                verdict
            };
            set_condition(
                &mut pass.status.conditions,
                PREFLIGHT_PASSED,
                true,
                "Passed",
                &message,
                pass.generation,
                pass.now,
            );
            pass.ctx
                .publish(
                    &run.object_ref(&()),
                    EventType::Normal,
                    "PreflightPassed",
                    "Preflight",
                    &message,
                )
                .await;
            // Its verdict is in the status now; a pod that ended has nothing more to say.
            delete_pods(run, std::slice::from_ref(pod), &pass.children).await?;
            Ok(Preflight::Clear)
        }
        Err(failure) => {
            set_condition(
                &mut pass.status.conditions,
                PREFLIGHT_PASSED,
                false,
                failure.reason.as_str(),
                &failure
                    .termination_message
                    .clone()
                    .unwrap_or_else(|| failure.detail.clone()),
                pass.generation,
                pass.now,
            );
            Ok(Preflight::Failed(failure))
        }
    }
}

/// The outcome of a pre-flight that is not clear: the run waits, Pending, or fails.
pub(super) fn outcome(preflight: Preflight) -> Option<Outcome> {
    match preflight {
        Preflight::Clear => None,
        Preflight::Checking => Some(Outcome::InFlight {
            phase: Phase::Pending,
            reason: "Preflight",
            poll: POLL,
        }),
        Preflight::Failed(failure) => Some(Outcome::Failed(failure)),
    }
}
