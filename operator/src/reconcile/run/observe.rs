//! Observe: where the launcher pods are, and for a sharded run its release and merge.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use llmbench_api::v1alpha1::Phase;

use super::error::Error;
use super::shards::{MergeStep, ReleaseStep, merge_step, release_step};
use super::{Outcome, Pass, RESYNC};
use crate::builders::{kueue, needs_merge};
use crate::reconcile::release;
use crate::status::{self, Progress};

/// Observe: where the pods are; a sharded run's launchers are released together once all are ready, and merged
/// once all succeeded.
pub(super) async fn observe(pass: &mut Pass<'_>, pods: &[Pod]) -> Result<Outcome, Error> {
    let run = pass.run;
    let expected = pass.expected;
    // A run queued through Kueue waits, gated, until Kueue admits all its launchers together.
    if let Some(queue) = kueue::queue_of(run) {
        if pods.iter().any(kueue::is_gated) {
            return Ok(Outcome::InFlight {
                phase: Phase::Pending,
                reason: "Queued",
                poll: RESYNC,
            });
        }
        if pass.status.admission_time.is_none() {
            tracing::info!(run = %run.name_any(), queue, "Kueue admitted the launchers");
            pass.status.admission_time = Some(Time(pass.now));
        }
    }
    let mut progress = status::progress(run, pods, expected, true);
    // A sharded run's launchers wait, prepared, until the operator releases all of them at one instant.
    let mut releasing = false;
    if matches!(progress, Progress::InFlight { .. })
        && needs_merge(run)
        && pass
            .status
            .release
            .as_ref()
            .is_none_or(|r| r.confirmed < expected)
    {
        match release_step(run, pods, expected, &pass.status, pass.ctx, pass.now).await {
            ReleaseStep::Waiting => {
                releasing = true;
                progress = Progress::InFlight {
                    phase: Phase::Pending,
                    reason: "WaitingForShards",
                };
            }
            ReleaseStep::Released(release) => {
                releasing = release.confirmed < expected;
                pass.status.release = Some(release);
            }
            ReleaseStep::NotReady(failure) => progress = Progress::Failed(failure),
        }
    }
    Ok(match progress {
        Progress::Succeeded { shards } if needs_merge(run) => {
            // A sharded run is done only once its merge pod has merged the shards' records.
            match merge_step(run, pods, &pass.children, pass.ctx).await? {
                MergeStep::Done { pod, message } => Outcome::Succeeded {
                    shards,
                    merged: Some((pod, message)),
                },
                MergeStep::Failed(failure) => Outcome::Failed(failure),
                MergeStep::Running => Outcome::InFlight {
                    phase: Phase::Collecting,
                    reason: "Merging",
                    poll: RESYNC,
                },
            }
        }
        Progress::Succeeded { shards } => Outcome::Succeeded {
            shards,
            merged: None,
        },
        Progress::Failed(failure) => Outcome::Failed(failure),
        Progress::InFlight { phase, reason } => Outcome::InFlight {
            phase,
            reason,
            poll: if releasing { release::POLL } else { RESYNC },
        },
    })
}
