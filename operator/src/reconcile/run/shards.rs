//! A sharded run's two extra steps: releasing every launcher at one instant once all are ready, and merging the
//! shards' records once all succeeded.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::release::ReadyAnswer;
use llmbench_api::v1alpha1::{BenchmarkRun, BenchmarkRunStatus, ReleaseStatus};

use super::error::Error;
use super::launchers::create_pod;
use crate::builders::{launcher_pod_name, merge_pod, merge_pod_name};
use crate::reconcile::children::Children;
use crate::reconcile::{Ctx, release};
use crate::status::{self, FailureReason, PodFailure, PodOutcome, parse_duration, pod_outcome};

/// Where the release of a sharded run's launchers stands after one look at them.
pub(super) enum ReleaseStep {
    /// Not every shard is ready yet.
    Waiting,
    /// Released (now or earlier): the status to record.
    Released(ReleaseStatus),
    /// A shard did not become ready in time: the run fails.
    NotReady(PodFailure),
}

/// Asks every launcher where it is and releases them all once every one waits (see `super::release`).
pub(super) async fn release_step(
    run: &BenchmarkRun,
    pods: &[Pod],
    expected: u32,
    status: &BenchmarkRunStatus,
    ctx: &Ctx,
    now: Timestamp,
) -> ReleaseStep {
    let by_index = |index: u32| pods.iter().find(|p| status::pod_index(p) == Some(index));
    let probes =
        (0..expected).map(|i| async move { (i, release::probe(&ctx.http, by_index(i)).await) });
    let states = futures_util::future::join_all(probes).await;
    // Queued launchers start once admitted: their start timeout counts from the admission.
    let started = if crate::builders::kueue::queue_of(run).is_some() {
        status.admission_time.as_ref()
    } else {
        status.start_time.as_ref()
    };
    let elapsed = started.map_or(Duration::ZERO, |start| {
        now.duration_since(start.0).unsigned_abs()
    });
    let timeout = parse_duration(&run.spec.launcher.start_timeout).unwrap_or_else(|e| {
        // The CRD admits only valid durations; fall back to the default rather than never giving up.
        tracing::warn!(run = %run.name_any(), error = %e, "unparsable launcher.startTimeout; using 10m");
        Duration::from_secs(600)
    });
    let now_unix_ns = u64::try_from(now.as_nanosecond()).unwrap_or_default();
    match release::decide(&states, now_unix_ns, elapsed, timeout) {
        release::Decision::Wait => ReleaseStep::Waiting,
        release::Decision::NotReady { message } => {
            let first_not_ready = states
                .iter()
                .find(|(_, s)| *s != release::ShardState::Answered(ReadyAnswer::Waiting))
                .map_or(0, |(i, _)| *i);
            ReleaseStep::NotReady(PodFailure {
                pod: launcher_pod_name(run, first_not_ready),
                reason: FailureReason::ShardsNotReady,
                detail: message,
                termination_message: None,
            })
        }
        release::Decision::Release {
            at_unix_ns,
            send_to,
            confirmed,
        } => {
            let targets: Vec<&Pod> = send_to.iter().filter_map(|i| by_index(*i)).collect();
            let refused = release::send(&ctx.http, &targets, at_unix_ns).await;
            let released_at = Timestamp::from_nanosecond(i128::from(at_unix_ns))
                .map(|t| format!("{t:.3}"))
                .unwrap_or_default();
            if !targets.is_empty() && status.release.is_none() {
                ctx.publish(
                    &run.object_ref(&()),
                    EventType::Normal,
                    "ShardsReleased",
                    "Release",
                    &format!(
                        "released {} shard(s) to start at {released_at}",
                        targets.len()
                    ),
                )
                .await;
            }
            for why in &refused {
                tracing::warn!(run = %run.name_any(), %why, "a shard did not take its release; retrying");
            }
            ReleaseStep::Released(ReleaseStatus {
                released_at,
                at_unix_nanos: at_unix_ns,
                // The shards sent to now count once they answer `released` on the next look.
                confirmed,
            })
        }
    }
}

/// Where a sharded run's merge stands.
pub(super) enum MergeStep {
    /// Created or still going.
    Running,
    /// The merge pod's name and its termination message (the exact compact summary).
    Done {
        pod: String,
        message: String,
    },
    Failed(status::PodFailure),
}

/// Once every launcher of a sharded run succeeded: creates its merge pod (`llmbench report` on the run's
/// directory; see [`merge_pod`]) if there is none, and reads how it stands. A merge that fails fails the run with
/// its reason and log tail, as a launcher would; the records stay on the volume, and `llmbench report` on the
/// run's directory merges them again.
pub(super) async fn merge_step(
    run: &BenchmarkRun,
    pods: &[Pod],
    children: &Children,
    ctx: &Ctx,
) -> Result<MergeStep, Error> {
    let name = merge_pod_name(run);
    let Some(pod) = pods.iter().find(|p| p.name_any() == name) else {
        let pod = merge_pod(run, &ctx.launcher)?;
        if create_pod(run, &pod, children).await? {
            ctx.publish(
                &run.object_ref(&()),
                EventType::Normal,
                "MergeStarted",
                "Merge",
                &format!("every launcher succeeded; {name} merges their records"),
            )
            .await;
        }
        return Ok(MergeStep::Running);
    };
    Ok(match pod_outcome(pod) {
        PodOutcome::Succeeded {
            termination_message,
        } => MergeStep::Done {
            pod: name,
            message: termination_message,
        },
        PodOutcome::Failed(failure) => MergeStep::Failed(failure),
        PodOutcome::Waiting | PodOutcome::Running => MergeStep::Running,
    })
}
