//! The BenchmarkRun reconciler: render → ConfigMap → PVC → launcher pods → status from the pods → cleanup on
//! delete. Each step is a named function; the decisions are in `crate::status`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, Event as FinalizerEvent, finalizer};
use kube::{Resource, ResourceExt};
use llmbench_api::release::ReadyAnswer;
use llmbench_api::v1alpha1::{
    BenchmarkRun, BenchmarkRunStatus, Phase, ReleaseStatus, WORKLOAD_MOUNT_PATH, WorkloadProfile,
};
use serde_json::json;

use super::{Ctx, is_already_exists, is_not_found, release};
use crate::builders::{
    BuildError, FIELD_MANAGER, colocate_shards, launcher_pod, launcher_pod_name, merge_pod,
    merge_pod_name, needs_merge, profile_config_map, profile_config_map_name, run_id, run_selector,
    shards_share_a_node, workload_pvc,
};
use crate::metrics::ControllerName;
use crate::resolve::{RenderedProfile, ResolveError, render_run_profile};
use crate::status::{
    self, COMPLETED, FailureReason, LAUNCHER_STARTED, PROFILE_RENDERED, PodFailure, PodOutcome,
    Progress, condition, failure_message, is_finished, parse_duration, pod_outcome, set_condition,
};

/// The finalizer that removes a run's pods and ConfigMap before the run goes, garbage collector or not.
pub const FINALIZER: &str = "llmbench.dev/cleanup";
/// How often a running run is looked at even without events.
const RESYNC: Duration = Duration::from_secs(60);
/// Lines of a failed launcher's log kept in the Failed condition.
const LOG_TAIL_LINES: i64 = 40;

/// Why reconciling a BenchmarkRun failed; each names the action and the object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("BenchmarkRun {run} has no namespace")]
    MissingNamespace { run: String },
    #[error("failed to read BenchmarkRun {run}: {source}")]
    GetRun { run: String, source: kube::Error },
    #[error("failed to list the launcher pods of BenchmarkRun {run}: {source}")]
    ListPods { run: String, source: kube::Error },
    #[error("failed to read WorkloadProfile {name} for BenchmarkRun {run}: {source}")]
    GetProfile {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to apply profile ConfigMap {name} for BenchmarkRun {run}: {source}")]
    ApplyConfigMap {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to ensure workload PVC {name} for BenchmarkRun {run}: {source}")]
    EnsurePvc {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to create launcher pod {name} for BenchmarkRun {run}: {source}")]
    CreatePod {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to delete launcher pod {name} of BenchmarkRun {run}: {source}")]
    DeletePod {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to delete profile ConfigMap {name} of BenchmarkRun {run}: {source}")]
    DeleteConfigMap {
        run: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to write the status of BenchmarkRun {run}: {source}")]
    PatchStatus { run: String, source: kube::Error },
    #[error("cannot build the objects of BenchmarkRun: {0}")]
    Build(#[from] BuildError),
    #[error("BenchmarkRun finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

impl Error {
    /// A short label for the metrics.
    pub fn action(&self) -> &'static str {
        match self {
            Error::MissingNamespace { .. } => "missing_namespace",
            Error::GetRun { .. } => "get_run",
            Error::ListPods { .. } => "list_pods",
            Error::GetProfile { .. } => "get_profile",
            Error::ApplyConfigMap { .. } => "apply_config_map",
            Error::EnsurePvc { .. } => "ensure_pvc",
            Error::CreatePod { .. } => "create_pod",
            Error::DeletePod { .. } => "delete_pod",
            Error::DeleteConfigMap { .. } => "delete_config_map",
            Error::PatchStatus { .. } => "patch_status",
            Error::Build(_) => "build",
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.action(),
                _ => "finalizer",
            },
        }
    }
}

/// Entry point for the controller.
pub async fn reconcile(run: Arc<BenchmarkRun>, ctx: Ctx) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_fresh(&run, &ctx).await;
    ctx.metrics.reconciled(
        ControllerName::benchmarkrun,
        started.elapsed().as_secs_f64(),
    );
    result
}

/// Retry soon, without hammering: the error is counted and logged.
pub fn error_policy(run: Arc<BenchmarkRun>, error: &Error, ctx: Ctx) -> Action {
    ctx.metrics
        .failed(ControllerName::benchmarkrun, error.action());
    tracing::warn!(run = %run.name_any(), namespace = ?run.namespace(), error = %error, "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}

async fn reconcile_fresh(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    let name = run.name_any();
    let namespace = run
        .namespace()
        .ok_or_else(|| Error::MissingNamespace { run: name.clone() })?;
    let runs: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), &namespace);
    // The cache may lag our own status writes; decisions such as "a pod is missing" need the latest status.
    let Some(fresh) = runs.get_opt(&name).await.map_err(|source| Error::GetRun {
        run: name.clone(),
        source,
    })?
    else {
        return Ok(Action::await_change());
    };
    finalizer(&runs, FINALIZER, Arc::new(fresh), |event| async {
        match event {
            FinalizerEvent::Apply(run) => apply(&run, ctx).await,
            FinalizerEvent::Cleanup(run) => cleanup(&run, ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// `<pvc>:/requests/<dir>` (or `emptyDir:…`): where the results are.
fn results_path(run: &BenchmarkRun) -> Result<String, BuildError> {
    let volume = run.spec.storage.pvc_name().unwrap_or("emptyDir");
    Ok(format!("{volume}:{WORKLOAD_MOUNT_PATH}/{}", run_id(run)?))
}

fn launcher_count(run: &BenchmarkRun) -> Result<u32, BuildError> {
    u32::try_from(run.spec.launcher.parallelism)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| BuildError::Parallelism {
            run: run.name_any(),
            parallelism: run.spec.launcher.parallelism,
        })
}

async fn apply(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    let old = run.status.clone();
    let namespace = run.namespace().unwrap_or_default();
    if let Some(done) = old.as_ref().filter(|s| is_finished(Some(s))) {
        // A finished run is a record; it is never acted on again. Its results are exported again, which is cheap
        // and idempotent, and how they come back after an operator restart.
        ctx.metrics
            .record_run_results(&namespace, &run.name_any(), done);
        return Ok(Action::await_change());
    }
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let now = Timestamp::now();
    let generation = run.metadata.generation;
    let expected = launcher_count(run)?;

    let mut status = old.clone().unwrap_or_default();
    status.observed_generation = generation;
    status.results_path = Some(results_path(run)?);
    status.profile_config_map = Some(profile_config_map_name(run));
    status.launcher_pods = (0..expected).map(|i| launcher_pod_name(run, i)).collect();
    if status.phase.is_none() {
        status.phase = Some(Phase::Pending);
    }

    let mut pods = list_pods(run, &pods_api).await?;
    let started = status.start_time.is_some();
    if !started {
        if (pods.len() as u32) < expected {
            let rendered = match render(run, ctx).await? {
                Ok(rendered) => rendered,
                Err(e) => return profile_not_rendered(run, status, &e, ctx, now).await,
            };
            set_condition(
                &mut status.conditions,
                PROFILE_RENDERED,
                true,
                "Rendered",
                &format!("rendered from {}", rendered.template_name),
                generation,
                now,
            );
            apply_config_map(run, &rendered, ctx).await?;
            let access_modes = ensure_pvc(run, ctx).await?;
            let created =
                create_launchers(run, &pods, expected, &access_modes, &pods_api, ctx).await?;
            if created > 0 {
                let what = if run.spec.skip_run {
                    "collector"
                } else {
                    "launcher"
                };
                ctx.publish(
                    &run.object_ref(&()),
                    EventType::Normal,
                    "LaunchersCreated",
                    "CreateLaunchers",
                    &format!(
                        "created {created} {what} pod(s); results go to {}",
                        status.results_path.as_deref().unwrap_or_default()
                    ),
                )
                .await;
            }
            pods = list_pods(run, &pods_api).await?;
        }
        // The earliest pod's creation is the start, so a status write lost to a restart changes nothing.
        let start = pods
            .iter()
            .filter_map(|p| p.metadata.creation_timestamp.clone())
            .min_by_key(|t| t.0)
            .unwrap_or(Time(now));
        status.start_time = Some(start);
        let reason = if run.spec.skip_run {
            "CollectorCreated"
        } else {
            "LaunchersCreated"
        };
        set_condition(
            &mut status.conditions,
            LAUNCHER_STARTED,
            true,
            reason,
            &format!("{expected} pod(s): {}", status.launcher_pods.join(", ")),
            generation,
            now,
        );
    }

    let mut progress = status::progress(run, &pods, expected, true);
    // A sharded run's launchers wait, prepared, until the operator releases all of them at one instant.
    let mut releasing = false;
    if matches!(progress, Progress::InFlight { .. })
        && needs_merge(run)
        && status
            .release
            .as_ref()
            .is_none_or(|r| r.confirmed < expected)
    {
        match release_step(run, &pods, expected, &status, ctx, now).await {
            ReleaseStep::Waiting => {
                releasing = true;
                progress = Progress::InFlight {
                    phase: Phase::Pending,
                    reason: "WaitingForShards",
                };
            }
            ReleaseStep::Released(release) => {
                releasing = release.confirmed < expected;
                status.release = Some(release);
            }
            ReleaseStep::NotReady(failure) => progress = Progress::Failed(failure),
        }
    }
    // A sharded run is done only once its merge pod has merged the shards' records (see `merge_step`).
    let mut merged = None;
    if let Progress::Succeeded { .. } = &progress
        && needs_merge(run)
    {
        match merge_step(run, &pods, &pods_api, ctx).await? {
            MergeStep::Done { pod, message } => merged = Some((pod, message)),
            MergeStep::Failed(failure) => progress = Progress::Failed(failure),
            MergeStep::Running => {
                progress = Progress::InFlight {
                    phase: Phase::Collecting,
                    reason: "Merging",
                }
            }
        }
    }
    let action = match progress {
        Progress::Succeeded { shards } => {
            let (next, note) = match &merged {
                Some((pod, message)) => status::merged(run, status, &shards, (pod, message), now),
                None => status::succeeded(run, status, &shards, now),
            };
            status = next;
            let (type_, reason, message) = match note {
                None => (
                    EventType::Normal,
                    "RunSucceeded",
                    condition(&status, COMPLETED)
                        .map(|c| c.message.clone())
                        .unwrap_or_default(),
                ),
                Some(note) => (EventType::Warning, "NoSummary", note),
            };
            ctx.publish(&run.object_ref(&()), type_, reason, "Collect", &message)
                .await;
            Action::await_change()
        }
        Progress::Failed(failure) => {
            let tail = log_tail(&pods_api, &failure.pod, failure.reason).await;
            let message = failure_message(&failure, tail.as_deref());
            stop_active_pods(run, &pods, &pods_api).await?;
            status = status::failed(status, failure.reason, &message, generation, now);
            ctx.publish(
                &run.object_ref(&()),
                EventType::Warning,
                failure.reason.as_str(),
                "Collect",
                &message,
            )
            .await;
            Action::await_change()
        }
        Progress::InFlight { phase, reason } => match remaining(run, &status, now) {
            Some(left) if left.is_zero() => {
                let message = format!(
                    "the run exceeded spec.timeout ({}); its launcher pods were deleted",
                    run.spec.timeout
                );
                delete_pods(run, &pods, &pods_api).await?;
                status = status::failed(status, FailureReason::Timeout, &message, generation, now);
                ctx.publish(
                    &run.object_ref(&()),
                    EventType::Warning,
                    "Timeout",
                    "Timeout",
                    &message,
                )
                .await;
                Action::await_change()
            }
            left => {
                status = status::in_flight(run, status, phase, reason, now);
                let every = if releasing { release::POLL } else { RESYNC };
                let wait = left.map_or(every, |l| l.min(every)) + Duration::from_millis(500);
                Action::requeue(wait)
            }
        },
    };
    write_status(run, old.as_ref(), &status, ctx).await?;
    if is_finished(Some(&status)) {
        ctx.metrics
            .record_run_results(&namespace, &run.name_any(), &status);
    }
    Ok(action)
}

/// Where the release of a sharded run's launchers stands after one look at them.
enum ReleaseStep {
    /// Not every shard is ready yet.
    Waiting,
    /// Released (now or earlier): the status to record.
    Released(ReleaseStatus),
    /// A shard did not become ready in time: the run fails.
    NotReady(PodFailure),
}

/// Asks every launcher where it is and releases them all once every one waits (see `super::release`).
async fn release_step(
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
    let elapsed = status.start_time.as_ref().map_or(Duration::ZERO, |start| {
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

/// Time left before `spec.timeout`, or `None` when the run has no deadline (debug pods wait for the user).
fn remaining(run: &BenchmarkRun, status: &BenchmarkRunStatus, now: Timestamp) -> Option<Duration> {
    if run.spec.launcher.debug {
        return None;
    }
    let start = status.start_time.as_ref()?.0;
    let timeout = match parse_duration(&run.spec.timeout) {
        Ok(t) => t,
        Err(e) => {
            // The CRD admits only valid durations; fall back to the default rather than never timing out.
            tracing::warn!(run = %run.name_any(), error = %e, "unparsable timeout; using 3600s");
            Duration::from_secs(3600)
        }
    };
    let elapsed = now.duration_since(start).unsigned_abs();
    Some(timeout.saturating_sub(elapsed))
}

async fn list_pods(run: &BenchmarkRun, pods: &Api<Pod>) -> Result<Vec<Pod>, Error> {
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

/// Renders the run's profile. The outer error is the API failing; the inner one is the profile's own problem.
async fn render(
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
/// (of the run, or of the WorkloadProfile it references).
async fn profile_not_rendered(
    run: &BenchmarkRun,
    mut status: BenchmarkRunStatus,
    error: &ResolveError,
    ctx: &Ctx,
    now: Timestamp,
) -> Result<Action, Error> {
    let message = error.to_string();
    let reason = error.reason();
    let unchanged = status.conditions.iter().any(|c| {
        c.type_ == PROFILE_RENDERED
            && c.status == "False"
            && c.reason == reason
            && c.message == message
    });
    let generation = run.metadata.generation;
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
    write_status(run, run.status.as_ref(), &status, ctx).await?;
    Ok(Action::await_change())
}

async fn apply_config_map(
    run: &BenchmarkRun,
    rendered: &RenderedProfile,
    ctx: &Ctx,
) -> Result<(), Error> {
    let cm = profile_config_map(run, &rendered.template_name, &rendered.text)?;
    let name = profile_config_map_name(run);
    let api: Api<ConfigMap> =
        Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&cm),
    )
    .await
    .map_err(|source| Error::ApplyConfigMap {
        run: run.name_any(),
        name,
        source,
    })?;
    Ok(())
}

/// Creates the workload PVC if absent; an existing claim is reused as it is and never changed or deleted.
/// Returns the claim's access modes (none for an emptyDir run).
async fn ensure_pvc(run: &BenchmarkRun, ctx: &Ctx) -> Result<Vec<String>, Error> {
    let Some(pvc) = workload_pvc(run) else {
        return Ok(Vec::new());
    };
    let modes = |claim: &PersistentVolumeClaim| {
        claim
            .spec
            .as_ref()
            .and_then(|spec| spec.access_modes.clone())
            .unwrap_or_default()
    };
    let name = pvc.name_any();
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    let err = |source| Error::EnsurePvc {
        run: run.name_any(),
        name: name.clone(),
        source,
    };
    if let Some(existing) = api.get_opt(&name).await.map_err(err)? {
        return Ok(modes(&existing));
    }
    match api
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            },
            &pvc,
        )
        .await
    {
        Ok(created) => Ok(modes(&created)),
        Err(e) if is_already_exists(&e) => match api.get_opt(&name).await.map_err(err)? {
            Some(existing) => Ok(modes(&existing)),
            None => Ok(modes(&pvc)),
        },
        Err(e) => Err(err(e)),
    }
}

/// Creates each missing launcher pod; a pod that already exists is left alone, so a restart never makes a second.
async fn create_launchers(
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
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.create(&params, &pod).await {
            Ok(_) => created += 1,
            Err(e) if is_already_exists(&e) => {}
            Err(source) => {
                return Err(Error::CreatePod {
                    run: run.name_any(),
                    name,
                    source,
                });
            }
        }
    }
    Ok(created)
}

/// Where a sharded run's merge stands.
enum MergeStep {
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
async fn merge_step(
    run: &BenchmarkRun,
    pods: &[Pod],
    api: &Api<Pod>,
    ctx: &Ctx,
) -> Result<MergeStep, Error> {
    let name = merge_pod_name(run);
    let Some(pod) = pods.iter().find(|p| p.name_any() == name) else {
        let pod = merge_pod(run, &ctx.launcher)?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.create(&params, &pod).await {
            Ok(_) => {
                ctx.publish(
                    &run.object_ref(&()),
                    EventType::Normal,
                    "MergeStarted",
                    "Merge",
                    &format!("every launcher succeeded; {name} merges their records"),
                )
                .await;
            }
            Err(e) if is_already_exists(&e) => {}
            Err(source) => {
                return Err(Error::CreatePod {
                    run: run.name_any(),
                    name,
                    source,
                });
            }
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

/// The last lines of a failed launcher's log; `None` when there is none or the kubelet cannot be reached.
async fn log_tail(api: &Api<Pod>, pod: &str, reason: FailureReason) -> Option<String> {
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

/// Deletes the pods of a failed run that are still waiting or running, so a failed shard stops the others.
async fn stop_active_pods(run: &BenchmarkRun, pods: &[Pod], api: &Api<Pod>) -> Result<(), Error> {
    let active: Vec<Pod> = pods
        .iter()
        .filter(|p| matches!(pod_outcome(p), PodOutcome::Waiting | PodOutcome::Running))
        .cloned()
        .collect();
    delete_pods(run, &active, api).await
}

async fn delete_pods(run: &BenchmarkRun, pods: &[Pod], api: &Api<Pod>) -> Result<(), Error> {
    for pod in pods {
        let name = pod.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
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

/// Server-side applies the whole status, when it changed.
async fn write_status(
    run: &BenchmarkRun,
    old: Option<&BenchmarkRunStatus>,
    status: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
    if old == Some(status) {
        return Ok(());
    }
    let api: Api<BenchmarkRun> =
        Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": BenchmarkRun::api_version(&()),
        "kind": BenchmarkRun::kind(&()),
        "status": status,
    });
    api.patch_status(
        &run.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::PatchStatus {
        run: run.name_any(),
        source,
    })?;
    Ok(())
}

/// The run is being deleted: remove its pods and ConfigMap ourselves (owner references do it only where a
/// garbage collector runs). The PVC stays: it holds every run's results.
async fn cleanup(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods = list_pods(run, &pods_api).await?;
    delete_pods(run, &pods, &pods_api).await?;
    let name = profile_config_map_name(run);
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    match cms.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(source) => {
            return Err(Error::DeleteConfigMap {
                run: run.name_any(),
                name,
                source,
            });
        }
    }
    ctx.metrics.forget_run_results(&namespace, &run.name_any());
    tracing::info!(run = %run.name_any(), namespace, pods = pods.len(), "cleaned up a deleted run");
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;

    #[test]
    fn the_results_path_names_the_volume_and_the_run_directory() {
        let run = fixtures::run(fixtures::BASIC);
        assert_eq!(
            results_path(&run).expect("path"),
            "workload-pvc:/requests/bench-1-0f3c9a2e"
        );
        let scratch = fixtures::run(&format!("{}storage:\n  emptyDir: {{}}\n", fixtures::BASIC));
        assert_eq!(
            results_path(&scratch).expect("path"),
            "emptyDir:/requests/bench-1-0f3c9a2e"
        );
    }

    #[test]
    fn the_deadline_runs_from_the_start_and_debug_runs_have_none() {
        let run = fixtures::run(&format!("{}timeout: 90s\n", fixtures::BASIC));
        let start = Timestamp::from_second(1_000).expect("time");
        let status = BenchmarkRunStatus {
            start_time: Some(Time(start)),
            ..BenchmarkRunStatus::default()
        };
        let at = |s| Timestamp::from_second(s).expect("time");
        assert_eq!(
            remaining(&run, &status, at(1_030)),
            Some(Duration::from_secs(60))
        );
        assert_eq!(remaining(&run, &status, at(1_200)), Some(Duration::ZERO));
        assert_eq!(
            remaining(&run, &BenchmarkRunStatus::default(), at(1_200)),
            None
        );
        let debug = fixtures::run(&format!("{}launcher:\n  debug: true\n", fixtures::BASIC));
        assert_eq!(remaining(&debug, &status, at(99_999)), None);
    }
}
