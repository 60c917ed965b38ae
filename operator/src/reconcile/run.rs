//! The BenchmarkRun reconciler, as named phases: **prepare** (render the profile, the ConfigMap, the workload PVC)
//! → **start** (the launcher pods, the start time) → **observe** (where the pods are; release and merge a sharded
//! run) → **finish** (the status, written first, then what follows from it: pods stopped, events, metrics). A run
//! that is being deleted is cleaned up instead. The decisions are in `crate::status`.
//!
//! Every object made by name is made only if absent, or changed or deleted only while the run controls it (a
//! controller owner reference with the run's uid): a namesake someone else made is never taken over. A failed pass
//! is told on the run (condition `Reconciled`) and in a rate-limited Warning event, and retried with a backoff; the
//! run's deadline counts from its creation, so a run that can never start still ends, with reason Timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, Preconditions,
};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, Event as FinalizerEvent, finalizer};
use kube::{Resource, ResourceExt};
use llmbench_api::release::ReadyAnswer;
use llmbench_api::v1alpha1::{
    BenchmarkRun, BenchmarkRunStatus, Phase, ReleaseStatus, WORKLOAD_MOUNT_PATH, WorkloadProfile,
};
use serde_json::json;

use super::{Ctx, Reason, is_already_exists, is_not_found, release, retry_key, warn_failed};
use crate::builders::names::controlled_by;
use crate::builders::stack::{
    STACK_CONTAINER, stack_deployment, stack_image, stack_name, stack_selector, stack_service,
    stack_url, standalone,
};
use crate::builders::{
    self, BuildError, FIELD_MANAGER, colocate_shards, launcher_pod, launcher_pod_name, merge_pod,
    merge_pod_name, needs_merge, profile_config_map, profile_config_map_name, run_id, run_selector,
    shards_share_a_node, workload_pvc,
};
use crate::metrics::ControllerName;
use crate::resolve::{RenderedProfile, ResolveError, render_run_profile};
use crate::stack::{STACK_READY, StackState, stack_state};
use crate::status::{
    self, COMPLETED, FailureReason, LAUNCHER_STARTED, PROFILE_RENDERED, PodFailure, PodOutcome,
    Progress, RECONCILED, condition, failure_message, is_finished, parse_duration, pod_outcome,
    set_condition,
};

/// The finalizer that removes a run's pods and ConfigMap before the run goes, garbage collector or not.
pub const FINALIZER: &str = "llmbench.dev/cleanup";
/// How often a running run is looked at even without events.
const RESYNC: Duration = Duration::from_secs(60);
/// Lines of a failed launcher's log kept in the Failed condition.
const LOG_TAIL_LINES: i64 = 40;
/// Wake a little after a deadline rather than a little before it.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);
/// How often a starting standalone stack is looked at, beside its Deployment's own events.
const STACK_POLL: Duration = Duration::from_secs(5);
/// The heartbeat of a standalone stack while launchers run against it: its Deployment's events wake the run at
/// once when the pod stops being ready; this catches what changes no Deployment status (a pod deleted and
/// replaced by a ready one between two looks).
const STACK_HEARTBEAT: Duration = Duration::from_secs(10);
/// The most of a stack pod's log read for the nop harness: a vLLM startup log is some hundred kilobytes.
const STACK_LOG_LIMIT_BYTES: i64 = 8 * 1024 * 1024;

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
    #[error(
        "ConfigMap {namespace}/{name} exists and is not owned by BenchmarkRun {run}; delete or rename it, or \
         rename the run"
    )]
    ConfigMapNotOwned {
        run: String,
        namespace: String,
        name: String,
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
    #[error(
        "pod {namespace}/{name} exists and is not owned by BenchmarkRun {run}; delete it (an earlier run's pod \
         may still be terminating), or rename the run"
    )]
    PodNotOwned {
        run: String,
        namespace: String,
        name: String,
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
    /// `object` is the kind and the name, e.g. `Deployment bench-1-stack`.
    #[error("failed to ensure the standalone stack's {object} for BenchmarkRun {run}: {source}")]
    EnsureStack {
        run: String,
        object: String,
        source: kube::Error,
    },
    #[error(
        "{kind} {namespace}/{name} exists and is not owned by BenchmarkRun {run}; delete or rename it, or rename \
         the run"
    )]
    StackNotOwned {
        run: String,
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("failed to read the standalone stack of BenchmarkRun {run}: {source}")]
    ReadStack { run: String, source: kube::Error },
    #[error("failed to delete the standalone stack's {object} of BenchmarkRun {run}: {source}")]
    DeleteStack {
        run: String,
        object: String,
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
    /// The error itself, out of the finalizer's wrapping: what a condition or an event should say.
    pub fn cause(&self) -> &Error {
        match self {
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.cause(),
                _ => self,
            },
            other => other,
        }
    }
}

impl Reason for Error {
    fn reason(&self) -> &'static str {
        match self {
            Error::MissingNamespace { .. } => "MissingNamespace",
            Error::GetRun { .. } => "GetRunFailed",
            Error::ListPods { .. } => "ListPodsFailed",
            Error::GetProfile { .. } => "GetProfileFailed",
            Error::ApplyConfigMap { .. } => "ApplyConfigMapFailed",
            Error::ConfigMapNotOwned { .. } => "ConfigMapNotOwned",
            Error::EnsurePvc { .. } => "EnsurePvcFailed",
            Error::CreatePod { .. } => "CreatePodFailed",
            Error::PodNotOwned { .. } => "PodNotOwned",
            Error::DeletePod { .. } => "DeletePodFailed",
            Error::DeleteConfigMap { .. } => "DeleteConfigMapFailed",
            Error::EnsureStack { .. } => "EnsureStackFailed",
            Error::StackNotOwned { .. } => "StackNotOwned",
            Error::ReadStack { .. } => "ReadStackFailed",
            Error::DeleteStack { .. } => "DeleteStackFailed",
            Error::PatchStatus { .. } => "PatchStatusFailed",
            Error::Build(_) => "BuildFailed",
            Error::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e.reason(),
                _ => "FinalizerFailed",
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
    match &result {
        Ok(_) => ctx.retries.succeeded(&retry_key(run.as_ref())),
        Err(e) => surface_error(&run, e, &ctx).await,
    }
    result
}

/// Retry with a backoff per run (see `super::retry`), but never sleep past the run's deadline, so a run that
/// cannot start still fails with Timeout on time. The error was already told on the run by `reconcile`.
pub fn error_policy(run: Arc<BenchmarkRun>, error: &Error, ctx: Ctx) -> Action {
    ctx.metrics.failed(
        ControllerName::benchmarkrun,
        &super::action_of(error.reason()),
    );
    let backoff = ctx.retries.failed(&retry_key(run.as_ref()));
    let wait = retry_wait(backoff, remaining(&run, Timestamp::now()));
    tracing::warn!(run = %run.name_any(), namespace = ?run.namespace(), error = %error, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// The wait before retrying a failed pass: the backoff, cut short by the deadline while it is ahead. Past the
/// deadline it is the finishing itself that fails, and the backoff stands.
fn retry_wait(backoff: Duration, left: Option<Duration>) -> Duration {
    match left {
        Some(left) if !left.is_zero() => backoff.min(left + DEADLINE_SLACK),
        _ => backoff,
    }
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

/// What one pass over an unfinished run reads once and carries through its phases.
struct Pass<'a> {
    run: &'a BenchmarkRun,
    ctx: &'a Ctx,
    pods_api: Api<Pod>,
    namespace: String,
    now: Timestamp,
    generation: Option<i64>,
    /// Launcher pods the run has (its parallelism).
    expected: u32,
    /// The status as read at the start of the pass.
    old: Option<BenchmarkRunStatus>,
    /// The status as this pass makes it.
    status: BenchmarkRunStatus,
}

impl<'a> Pass<'a> {
    fn new(run: &'a BenchmarkRun, ctx: &'a Ctx) -> Result<Self, Error> {
        let namespace = run.namespace().unwrap_or_default();
        let old = run.status.clone();
        let expected = launcher_count(run)?;
        let generation = run.metadata.generation;
        let mut status = old.clone().unwrap_or_default();
        status.observed_generation = generation;
        status.results_path = Some(results_path(run)?);
        status.profile_config_map = Some(profile_config_map_name(run));
        status.launcher_pods = (0..expected).map(|i| launcher_pod_name(run, i)).collect();
        if status.phase.is_none() {
            status.phase = Some(Phase::Pending);
        }
        if let Some(stack) = standalone(run)
            && status.stack.is_none()
        {
            status.stack = Some(crate::stack::initial_status(
                stack_name(run),
                stack_url(run, stack),
                stack_image(stack),
            ));
        }
        Ok(Pass {
            run,
            ctx,
            pods_api: Api::namespaced(ctx.client.clone(), &namespace),
            namespace,
            now: Timestamp::now(),
            generation,
            expected,
            old,
            status,
        })
    }
}

/// How a pass ends: what `finish` writes and does.
#[derive(Debug)]
enum Outcome {
    /// Under way: the phase and reason to show, and when to look again at the latest.
    InFlight {
        phase: Phase,
        reason: &'static str,
        poll: Duration,
    },
    /// Every launcher succeeded (and a sharded run's merge pod, whose name and termination message come along).
    Succeeded {
        shards: Vec<(u32, String, String)>,
        merged: Option<(String, String)>,
    },
    Failed(PodFailure),
    /// The standalone stack could not start (StackNotReady) or died during the run (StackFailed).
    StackDown {
        reason: FailureReason,
        message: String,
    },
    /// The run outlived `spec.timeout`, counted from its creation.
    TimedOut,
}

/// What `prepare` leaves for `start`.
enum Prepared {
    /// The profile does not render: nothing may be started.
    NotRendered(ResolveError),
    /// The ConfigMap and the claim are there; the claim's access modes decide where shards may go.
    Ready { access_modes: Vec<String> },
}

async fn apply(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    if let Some(done) = run.status.as_ref().filter(|s| is_finished(Some(s))) {
        return settle_finished(run, done, ctx).await;
    }
    let mut pass = Pass::new(run, ctx)?;
    let mut pods = list_pods(run, &pass.pods_api).await?;
    // First, so that a run whose every pass fails further on (a quota, an admission webhook) still ends.
    if remaining(run, pass.now).is_some_and(|left| left.is_zero()) {
        return finish(pass, Outcome::TimedOut, &pods).await;
    }
    if pass.status.start_time.is_none() {
        if (pods.len() as u32) < pass.expected {
            // A standalone stack first: the launchers start once it is ready.
            if let Some(stack) = standalone(run)
                && let Some(outcome) = stack_step(&mut pass, stack).await?
            {
                return finish(pass, outcome, &pods).await;
            }
            match prepare(&mut pass).await? {
                Prepared::NotRendered(error) => return profile_not_rendered(pass, &error).await,
                Prepared::Ready { access_modes } => {
                    pods = start(&pass, &pods, &access_modes).await?;
                }
            }
        }
        mark_started(&mut pass, &pods);
    }
    let mut outcome = observe(&mut pass, &pods).await?;
    // The heartbeat: while the launchers run (or when one failed, perhaps because of it), a stack that died is
    // the run's failure.
    // A merge (or a collector) reads the volume only: the stack may go by then.
    let sending = match &outcome {
        Outcome::InFlight { reason, .. } => !matches!(*reason, "Merging" | "Collecting"),
        Outcome::Failed(_) => true,
        _ => false,
    };
    if standalone(run).is_some() && sending {
        if let Some(down) = heartbeat(&pass).await? {
            outcome = down;
        } else if let Outcome::InFlight { poll, .. } = &mut outcome {
            *poll = (*poll).min(STACK_HEARTBEAT);
        }
    }
    finish(pass, outcome, &pods).await
}

/// Makes the standalone stack's Deployment and Service where absent and looks at it: `None` once it is ready (the
/// launchers may start), else how the pass ends — still starting, or failed with StackNotReady.
async fn stack_step(
    pass: &mut Pass<'_>,
    stack: &llmbench_api::v1alpha1::StandaloneStack,
) -> Result<Option<Outcome>, Error> {
    let run = pass.run;
    let ctx = pass.ctx;
    let deployment = ensure_stack(run, stack, ctx).await?;
    let stack_pods = list_stack_pods(run, &pass.pods_api).await?;
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
async fn heartbeat(pass: &Pass<'_>) -> Result<Option<Outcome>, Error> {
    let Some((pod, restarts)) = pass
        .status
        .stack
        .as_ref()
        .and_then(|s| Some((s.pod.clone()?, s.restarts.unwrap_or(0))))
    else {
        return Ok(None);
    };
    let run = pass.run;
    let deployments: Api<Deployment> = Api::namespaced(pass.ctx.client.clone(), &pass.namespace);
    let deployment = deployments
        .get_opt(&stack_name(run))
        .await
        .map_err(|source| Error::ReadStack {
            run: run.name_any(),
            source,
        })?;
    let stack_pods = list_stack_pods(run, &pass.pods_api).await?;
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
    ctx: &Ctx,
) -> Result<Deployment, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let name = stack_name(run);
    let uid = builders::uid(run)?;
    let err = |kind: &'static str| {
        let object = format!("{kind} {name}");
        move |source| Error::EnsureStack {
            run: run.name_any(),
            object,
            source,
        }
    };
    let not_owned = |kind: &'static str| Error::StackNotOwned {
        run: run.name_any(),
        kind,
        namespace: namespace.clone(),
        name: name.clone(),
    };
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    match services.get_opt(&name).await.map_err(err("Service"))? {
        Some(found) if !controlled_by(&found.metadata, uid) => return Err(not_owned("Service")),
        Some(_) => {}
        None => {
            services
                .create(&post_params(), &stack_service(run, stack)?)
                .await
                .map_err(err("Service"))?;
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    match deployments
        .get_opt(&name)
        .await
        .map_err(err("Deployment"))?
    {
        Some(found) if !controlled_by(&found.metadata, uid) => Err(not_owned("Deployment")),
        Some(found) => Ok(found),
        None => {
            let created = deployments
                .create(&post_params(), &stack_deployment(run, stack)?)
                .await
                .map_err(err("Deployment"))?;
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

async fn list_stack_pods(run: &BenchmarkRun, pods: &Api<Pod>) -> Result<Vec<Pod>, Error> {
    let selector = stack_selector(run)?;
    Ok(pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::ReadStack {
            run: run.name_any(),
            source,
        })?
        .items)
}

/// The last lines of the stack server's log — of its previous instance when it restarted, which is the one that
/// says why; `None` when there is none or the kubelet cannot be reached.
async fn stack_log_tail(api: &Api<Pod>, pod: &str, previous: bool) -> Option<String> {
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
async fn teardown_stack(run: &BenchmarkRun, ctx: &Ctx, force: bool) -> Result<(), Error> {
    let Some(stack) = standalone(run) else {
        return Ok(());
    };
    if stack.keep && !force {
        return Ok(());
    }
    let namespace = run.namespace().unwrap_or_default();
    let name = stack_name(run);
    let uid = builders::uid(run)?;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    delete_stack_object(run, &deployments, &name, uid, "Deployment").await?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    delete_stack_object(run, &services, &name, uid, "Service").await
}

async fn delete_stack_object<K>(
    run: &BenchmarkRun,
    api: &Api<K>,
    name: &str,
    uid: &str,
    kind: &'static str,
) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let err = |source| Error::DeleteStack {
        run: run.name_any(),
        object: format!("{kind} {name}"),
        source,
    };
    match api.get_opt(name).await.map_err(err)? {
        Some(found) if controlled_by(found.meta(), uid) => {
            if found.meta().deletion_timestamp.is_some() {
                return Ok(());
            }
            match api.delete(name, &only_this(found.meta().uid.clone())).await {
                Ok(_) => {
                    tracing::info!(run = %run.name_any(), kind, name, "deleted the standalone stack");
                    Ok(())
                }
                Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
                Err(e) => Err(err(e)),
            }
        }
        _ => Ok(()),
    }
}

/// The nop harness on a standalone stack: the model-load figures of the stack pod's log, as llm-d-benchmark's nop
/// reads its vLLM pod's log once the harness ran. A log that cannot be read or is no vLLM log is told in a Warning
/// event; the run still succeeds, as upstream's nop does.
async fn stack_model_load(
    run: &BenchmarkRun,
    status: &BenchmarkRunStatus,
    api: &Api<Pod>,
    ctx: &Ctx,
    now: Timestamp,
) -> Option<llmbench_api::summary::v1::ModelLoad> {
    if run.spec.harness != llmbench_api::v1alpha1::Harness::Nop {
        return None;
    }
    let pod = status.stack.as_ref()?.pod.clone()?;
    let params = LogParams {
        container: Some(STACK_CONTAINER.to_owned()),
        limit_bytes: Some(STACK_LOG_LIMIT_BYTES),
        ..LogParams::default()
    };
    let read = match api.logs(&pod, &params).await {
        Ok(log) => {
            let year = now.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC).year();
            crate::stack::model_load(&log, &pod, &run.spec.stack.model, i32::from(year))
        }
        Err(e) => Err(format!("cannot read the log of stack pod {pod}: {e}")),
    };
    match read {
        Ok(load) => Some(load),
        Err(why) => {
            ctx.publish(
                &run.object_ref(&()),
                EventType::Warning,
                "ModelLoadUnread",
                "Collect",
                &format!("the nop harness read no model-load times from the stack: {why}"),
            )
            .await;
            None
        }
    }
}

/// Prepare: render the profile, then make the ConfigMap holding it and ensure the workload claim.
async fn prepare(pass: &mut Pass<'_>) -> Result<Prepared, Error> {
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
    apply_config_map(pass.run, &rendered, pass.ctx).await?;
    let access_modes = ensure_pvc(pass.run, pass.ctx).await?;
    Ok(Prepared::Ready { access_modes })
}

/// Start: create the launcher pods that are missing; returns the run's pods as they are now.
async fn start(pass: &Pass<'_>, pods: &[Pod], access_modes: &[String]) -> Result<Vec<Pod>, Error> {
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
fn mark_started(pass: &mut Pass<'_>, pods: &[Pod]) {
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

/// Observe: where the pods are; a sharded run's launchers are released together once all are ready, and merged
/// once all succeeded.
async fn observe(pass: &mut Pass<'_>, pods: &[Pod]) -> Result<Outcome, Error> {
    let run = pass.run;
    let expected = pass.expected;
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
            match merge_step(run, pods, &pass.pods_api, pass.ctx).await? {
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

/// Finish: the status first, then what follows from it. A status that says Failed is written before any pod is
/// deleted, so a write that fails never leaves a run whose pods are gone while its status says they run (which
/// the next pass would take for lost launchers); a finished run's leftover pods are stopped by
/// [`settle_finished`].
async fn finish(mut pass: Pass<'_>, outcome: Outcome, pods: &[Pod]) -> Result<Action, Error> {
    let run = pass.run;
    let ctx = pass.ctx;
    let now = pass.now;
    let generation = pass.generation;
    let mut status = std::mem::take(&mut pass.status);
    let ends = !matches!(outcome, Outcome::InFlight { .. });
    if ends && let Some(stack) = status.stack.as_mut() {
        // Written before the deletion follows, as every finishing status is (see above).
        stack.deleted = !standalone(run).is_some_and(|s| s.keep);
    }
    let result = match outcome {
        Outcome::Succeeded { shards, merged } => {
            let (mut status, note) = match &merged {
                Some((pod, message)) => status::merged(run, status, &shards, (pod, message), now),
                None => status::succeeded(run, status, &shards, now),
            };
            if let Some(load) = stack_model_load(run, &status, &pass.pods_api, ctx, now).await {
                status
                    .summary
                    .get_or_insert_with(Default::default)
                    .model_load = Some(load);
            }
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
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
            ctx.metrics
                .record_run_results(&pass.namespace, &run.name_any(), &status);
            Ok(Action::await_change())
        }
        Outcome::Failed(failure) => {
            let tail = log_tail(&pass.pods_api, &failure.pod, failure.reason).await;
            let message = failure_message(&failure, tail.as_deref());
            let status = status::failed(status, failure.reason, &message, generation, now);
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
            // A failed shard stops the others.
            stop_active_pods(run, pods, &pass.pods_api).await?;
            ctx.publish(
                &run.object_ref(&()),
                EventType::Warning,
                failure.reason.as_str(),
                "Collect",
                &message,
            )
            .await;
            ctx.metrics
                .record_run_results(&pass.namespace, &run.name_any(), &status);
            Ok(Action::await_change())
        }
        Outcome::StackDown { reason, message } => {
            if let Some(stack) = status.stack.as_mut() {
                stack.ready = false;
            }
            set_condition(
                &mut status.conditions,
                STACK_READY,
                false,
                reason.as_str(),
                &message,
                generation,
                now,
            );
            let status = status::failed(status, reason, &message, generation, now);
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
            // SIGTERM: each launcher records what is in flight as cancelled and writes every report, marked
            // interrupted, before it exits.
            stop_active_pods(run, pods, &pass.pods_api).await?;
            ctx.publish(
                &run.object_ref(&()),
                EventType::Warning,
                reason.as_str(),
                "Heartbeat",
                &message,
            )
            .await;
            ctx.metrics
                .record_run_results(&pass.namespace, &run.name_any(), &status);
            Ok(Action::await_change())
        }
        Outcome::TimedOut => {
            let message = timeout_message(run, &status, pods);
            let status = status::failed(status, FailureReason::Timeout, &message, generation, now);
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
            delete_pods(run, pods, &pass.pods_api).await?;
            ctx.publish(
                &run.object_ref(&()),
                EventType::Warning,
                "Timeout",
                "Timeout",
                &message,
            )
            .await;
            ctx.metrics
                .record_run_results(&pass.namespace, &run.name_any(), &status);
            Ok(Action::await_change())
        }
        Outcome::InFlight {
            phase,
            reason,
            poll,
        } => {
            let status = status::in_flight(run, status, phase, reason, now);
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
            let wait = remaining(run, now).map_or(poll, |left| left.min(poll)) + DEADLINE_SLACK;
            Ok(Action::requeue(wait))
        }
    };
    if ends && result.is_ok() {
        teardown_stack(run, ctx, false).await?;
    }
    result
}

/// Why the run timed out, in words: with the last reconcile error when it never got to start.
fn timeout_message(run: &BenchmarkRun, status: &BenchmarkRunStatus, pods: &[Pod]) -> String {
    let timeout = &run.spec.timeout;
    if !pods.is_empty() {
        return format!(
            "the run exceeded spec.timeout ({timeout}) counted from its creation; its launcher pods were deleted"
        );
    }
    if status.start_time.is_some() {
        return format!("the run exceeded spec.timeout ({timeout}) counted from its creation");
    }
    let why = [RECONCILED, PROFILE_RENDERED]
        .into_iter()
        .find_map(|type_| condition(status, type_).filter(|c| c.status == "False"))
        .map(|c| format!(": {}", c.message))
        .unwrap_or_default();
    format!("the run did not start within spec.timeout ({timeout}) of its creation{why}")
}

/// A finished run is a record; it is never acted on again. Its results are exported again, which is cheap and
/// idempotent, and how they come back after an operator restart. A failed run's pods that still run are stopped:
/// the pass that failed it wrote the status first and may have been cut short before it stopped them.
async fn settle_finished(
    run: &BenchmarkRun,
    done: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<Action, Error> {
    let namespace = run.namespace().unwrap_or_default();
    ctx.metrics
        .record_run_results(&namespace, &run.name_any(), done);
    if done.phase == Some(Phase::Failed) {
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
        let pods = list_pods(run, &api).await?;
        stop_active_pods(run, &pods, &api).await?;
    }
    // The pass that finished the run may have been cut short before it deleted the stack.
    teardown_stack(run, ctx, false).await?;
    // Clears an earlier failure of this very step from the status.
    write_status(run, Some(done), done, ctx).await?;
    Ok(Action::await_change())
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

/// Time left before `spec.timeout`, counted from the run's creation (so a run that can never start still ends),
/// or `None` when the run has no deadline (debug pods wait for the user).
fn remaining(run: &BenchmarkRun, now: Timestamp) -> Option<Duration> {
    if run.spec.launcher.debug {
        return None;
    }
    let created = run
        .metadata
        .creation_timestamp
        .as_ref()
        .or_else(|| run.status.as_ref()?.start_time.as_ref())?
        .0;
    let timeout = match parse_duration(&run.spec.timeout) {
        Ok(t) => t,
        Err(e) => {
            // The CRD admits only valid durations; fall back to the default rather than never timing out.
            tracing::warn!(run = %run.name_any(), error = %e, "unparsable timeout; using 3600s");
            Duration::from_secs(3600)
        }
    };
    let elapsed = now.duration_since(created).unsigned_abs();
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
/// (of the run, or of the WorkloadProfile it references) or for the deadline.
async fn profile_not_rendered(pass: Pass<'_>, error: &ResolveError) -> Result<Action, Error> {
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

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// Creates the profile ConfigMap, or updates it while the run controls it. A ConfigMap of that name that the
/// run does not control (a user's, another run's) is refused, never taken over.
async fn apply_config_map(
    run: &BenchmarkRun,
    rendered: &RenderedProfile,
    ctx: &Ctx,
) -> Result<(), Error> {
    let cm = profile_config_map(run, &rendered.template_name, &rendered.text)?;
    let name = profile_config_map_name(run);
    let namespace = run.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let err = |source| Error::ApplyConfigMap {
        run: run.name_any(),
        name: name.clone(),
        source,
    };
    match api.get_opt(&name).await.map_err(err)? {
        Some(found) if !controlled_by(&found.metadata, builders::uid(run)?) => {
            Err(Error::ConfigMapNotOwned {
                run: run.name_any(),
                namespace,
                name,
            })
        }
        // Ours: the spec of a run that has not started may have changed since.
        Some(_) => {
            api.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&cm),
            )
            .await
            .map_err(err)?;
            Ok(())
        }
        // A create fails if someone made one in between; the next pass then looks at whose it is.
        None => {
            api.create(&post_params(), &cm).await.map_err(err)?;
            Ok(())
        }
    }
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
    match api.create(&post_params(), &pvc).await {
        Ok(created) => Ok(modes(&created)),
        Err(e) if is_already_exists(&e) => match api.get_opt(&name).await.map_err(err)? {
            Some(existing) => Ok(modes(&existing)),
            None => Ok(modes(&pvc)),
        },
        Err(e) => Err(err(e)),
    }
}

/// Creates `pod`, one of the run's; `Ok(true)` when created, `Ok(false)` when the run already has it. A pod of
/// that name that the run does not control (a user's, or an earlier namesake run's still terminating) is refused.
async fn create_pod(run: &BenchmarkRun, pod: &Pod, api: &Api<Pod>) -> Result<bool, Error> {
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
        if create_pod(run, &pod, api).await? {
            created += 1;
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
        if create_pod(run, &pod, api).await? {
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

/// Deletes the pods of a failed run that are still waiting or running (and not already being deleted), so a
/// failed shard stops the others.
async fn stop_active_pods(run: &BenchmarkRun, pods: &[Pod], api: &Api<Pod>) -> Result<(), Error> {
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
async fn delete_pods(run: &BenchmarkRun, pods: &[Pod], api: &Api<Pod>) -> Result<(), Error> {
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

/// Delete parameters that hit only the object with `uid`.
fn only_this(uid: Option<String>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

/// Server-side applies the status a successful pass made, when it changed. Writing it says the pass succeeded,
/// so an earlier `Reconciled=False` turns True.
async fn write_status(
    run: &BenchmarkRun,
    old: Option<&BenchmarkRunStatus>,
    status: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
    let mut status = status.clone();
    status::reconcile_succeeded(&mut status, run.metadata.generation, Timestamp::now());
    if old == Some(&status) {
        return Ok(());
    }
    patch_status(run, &status, ctx).await
}

/// Server-side applies the whole status under the operator's field manager.
async fn patch_status(
    run: &BenchmarkRun,
    status: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
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

/// Tells a failed pass on the run: condition `Reconciled=False` with the error (naming the object and the API
/// server's answer), and a Warning event at most once per reason every few minutes. Best effort: when the API
/// server is what fails, this fails too, and the log has it.
async fn surface_error(run: &BenchmarkRun, error: &Error, ctx: &Ctx) {
    let reason = error.reason();
    let message = error.cause().to_string();
    if let Some(namespace) = run.namespace() {
        let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), &namespace);
        // Read again: the failed pass may have written the status before it failed, and the copy it started
        // from would undo that.
        match api.get_opt(&run.name_any()).await {
            Ok(Some(fresh)) => {
                let old = fresh.status.clone().unwrap_or_default();
                let mut status = old.clone();
                status::reconcile_failed(
                    &mut status,
                    reason,
                    &message,
                    fresh.metadata.generation,
                    Timestamp::now(),
                );
                if status != old
                    && let Err(e) = patch_status(&fresh, &status, ctx).await
                {
                    tracing::warn!(run = %run.name_any(), error = %e, "cannot record the reconcile error on the run");
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(run = %run.name_any(), error = %e, "cannot read the run to record the reconcile error");
            }
        }
    }
    warn_failed(run, reason, &message, ctx).await;
}

/// The run is being deleted: remove its pods and ConfigMap ourselves (owner references do it only where a
/// garbage collector runs), only those it controls. The PVC stays: it holds every run's results.
async fn cleanup(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods = list_pods(run, &pods_api).await?;
    delete_pods(run, &pods, &pods_api).await?;
    let name = profile_config_map_name(run);
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let err = |source| Error::DeleteConfigMap {
        run: run.name_any(),
        name: name.clone(),
        source,
    };
    match cms.get_opt(&name).await.map_err(err)? {
        Some(cm) if controlled_by(&cm.metadata, builders::uid(run)?) => {
            match cms.delete(&name, &only_this(cm.uid())).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) || is_conflict(&e) => {}
                Err(e) => return Err(err(e)),
            }
        }
        Some(_) => {
            tracing::info!(run = %run.name_any(), config_map = name, "the ConfigMap of the run's profile name is not the run's; left alone");
        }
        None => {}
    }
    teardown_stack(run, ctx, true).await?;
    ctx.metrics.forget_run_results(&namespace, &run.name_any());
    ctx.retries.succeeded(&retry_key(run));
    tracing::info!(run = %run.name_any(), namespace, pods = pods.len(), "cleaned up a deleted run");
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;
    use crate::reconcile::fixtures::{ApiServer, context, list};
    use crate::reconcile::retry::FIRST_RETRY;
    use serde_json::Value;

    const RUN_PATH: &str = "/apis/llmbench.dev/v1alpha1/namespaces/team-a/benchmarkruns/bench-1";
    const STATUS_PATH: &str =
        "/apis/llmbench.dev/v1alpha1/namespaces/team-a/benchmarkruns/bench-1/status";
    const PODS_PATH: &str = "/api/v1/namespaces/team-a/pods";
    const CM_PATH: &str = "/api/v1/namespaces/team-a/configmaps";
    const PVC_PATH: &str = "/api/v1/namespaces/team-a/persistentvolumeclaims";
    const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";
    const UID: &str = "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab";

    /// The basic run as the API server has it: finalized, created `age_s` seconds ago.
    fn stored_run(spec: &str, age_s: i64) -> BenchmarkRun {
        let mut run = fixtures::run(spec);
        run.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        run.metadata.generation = Some(1);
        run.metadata.resource_version = Some("7".to_owned());
        let created = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(age_s);
        run.metadata.creation_timestamp = Some(Time(created));
        run
    }

    fn json_of(value: &impl serde::Serialize) -> Value {
        serde_json::to_value(value).expect("serializes")
    }

    /// `object` as created: with a uid and a creation time.
    fn as_created(mut object: Value, uid: &str) -> Value {
        object["metadata"]["uid"] = json!(uid);
        object["metadata"]["creationTimestamp"] = json!(Timestamp::now().to_string());
        object
    }

    fn condition_of<'v>(status: &'v Value, type_: &str) -> &'v Value {
        status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
            .unwrap_or_else(|| panic!("no {type_} condition in {status:#}"))
    }

    /// Runs `reconcile` (and, on error, `error_policy`) against the scripted `scenario`, then checks the scenario
    /// saw every request it expected and no other.
    async fn reconcile_with<F, Fut>(
        run: &BenchmarkRun,
        scenario: F,
    ) -> (Result<Action, Error>, Option<Action>)
    where
        F: FnOnce(ApiServer) -> Fut,
        Fut: std::future::Future<Output = ApiServer> + Send + 'static,
    {
        let (ctx, server) = context();
        let (result, policy, server) = reconcile_on(run, &ctx, scenario(server)).await;
        drop(ctx);
        tokio::time::timeout(Duration::from_secs(5), server.done())
            .await
            .expect("the client is gone");
        (result, policy)
    }

    /// One pass on `ctx`, answered by `scenario`, which hands the API server back for the next pass.
    async fn reconcile_on<Fut>(
        run: &BenchmarkRun,
        ctx: &Ctx,
        scenario: Fut,
    ) -> (Result<Action, Error>, Option<Action>, ApiServer)
    where
        Fut: std::future::Future<Output = ApiServer> + Send + 'static,
    {
        let scenario = tokio::spawn(scenario);
        let result = reconcile(Arc::new(run.clone()), ctx.clone()).await;
        let policy = result
            .as_ref()
            .err()
            .map(|e| error_policy(Arc::new(run.clone()), e, ctx.clone()));
        let server = tokio::time::timeout(Duration::from_secs(5), scenario)
            .await
            .expect("the scenario finished: every expected request came")
            .expect("the scenario's assertions held");
        (result, policy, server)
    }

    #[tokio::test]
    async fn a_fresh_run_makes_its_config_map_claim_and_pod_in_order_then_writes_its_status() {
        let run = stored_run(fixtures::BASIC, 5);
        let stored = json_of(&run);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            let pods = api.expect("GET", PODS_PATH).await;
            assert!(
                pods.query.contains("llmbench.dev%2Frun-uid%3D0f3c9a2e"),
                "{}",
                pods.query
            );
            pods.ok(&list("PodList", vec![]));
            // Prepare: the rendered profile's ConfigMap (made only where none is), then the claim.
            api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                .await
                .not_found("configmaps \"bench-1-profile\"");
            let cm = api.expect("POST", CM_PATH).await;
            assert_eq!(cm.body["metadata"]["ownerReferences"][0]["uid"], UID);
            assert!(cm.body["data"]["profile.yaml"].is_string());
            cm.created();
            api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
                .await
                .not_found("persistentvolumeclaims \"workload-pvc\"");
            api.expect("POST", PVC_PATH).await.created();
            // Start: the launcher, then the event saying so.
            let pod = api.expect("POST", PODS_PATH).await;
            assert_eq!(pod.body["metadata"]["name"], "bench-1-launcher-0");
            let created_pod = as_created(pod.body.clone(), "pod-uid-0");
            pod.reply(201, &created_pod);
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(event.body["reason"], "LaunchersCreated");
            event.created();
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![created_pod]));
            // Observe and finish: Pending, started, written once.
            let patch = api.expect("PATCH", STATUS_PATH).await;
            assert!(
                patch.query.contains("fieldManager=llmbench-operator"),
                "{}",
                patch.query
            );
            let status = &patch.body["status"];
            assert_eq!(status["phase"], "Pending");
            assert!(status["startTime"].is_string(), "{status:#}");
            assert_eq!(condition_of(status, "ProfileRendered")["status"], "True");
            assert_eq!(
                condition_of(status, "LauncherStarted")["reason"],
                "LaunchersCreated"
            );
            let mut answered = stored.clone();
            answered["status"] = status.clone();
            patch.ok(&answered);
            api
        })
        .await;
        let action = result.expect("the pass succeeds");
        assert!(
            action != Action::await_change(),
            "a running run is looked at again"
        );
    }

    #[tokio::test]
    async fn a_refused_pod_becomes_a_reconciled_false_condition_one_event_and_a_growing_backoff() {
        let run = stored_run(fixtures::BASIC, 5);
        let stored = json_of(&run);
        let quota = "pods \"bench-1-launcher-0\" is forbidden: exceeded quota: team-a-quota, requested: \
                     cpu=1, used: cpu=8, limited: cpu=8";
        let profile_cm = |body: Value| as_created(body, "cm-uid");
        let (ctx, server) = context();
        let first = {
            let stored = stored.clone();
            async move {
                let mut api = server;
                api.expect("GET", RUN_PATH).await.ok(&stored);
                api.expect("GET", PODS_PATH)
                    .await
                    .ok(&list("PodList", vec![]));
                api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                    .await
                    .not_found("configmaps \"bench-1-profile\"");
                let cm = api.expect("POST", CM_PATH).await;
                let made = profile_cm(cm.body.clone());
                cm.reply(201, &made);
                api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
                    .await
                    .ok(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                "metadata": {"name": "workload-pvc", "namespace": "team-a"}}));
                api.expect("POST", PODS_PATH)
                    .await
                    .fail(403, "Forbidden", quota);
                // The error, told on the run (read again first) and in a Warning event.
                api.expect("GET", RUN_PATH).await.ok(&stored);
                let patch = api.expect("PATCH", STATUS_PATH).await;
                let reconciled = condition_of(&patch.body["status"], "Reconciled").clone();
                assert_eq!(reconciled["status"], "False");
                assert_eq!(reconciled["reason"], "CreatePodFailed");
                let message = reconciled["message"].as_str().unwrap_or_default();
                assert!(
                    message.contains("launcher pod bench-1-launcher-0 for BenchmarkRun bench-1")
                        && message.contains("exceeded quota"),
                    "{message}"
                );
                let mut answered = stored.clone();
                answered["status"] = patch.body["status"].clone();
                patch.ok(&answered);
                let event = api.expect("POST", EVENTS_PATH).await;
                assert_eq!(
                    (&event.body["type"], &event.body["reason"]),
                    (&json!("Warning"), &json!("CreatePodFailed"))
                );
                event.created();
                (api, answered, made)
            }
        };
        let scenario = tokio::spawn(first);
        let result = reconcile(Arc::new(run.clone()), ctx.clone()).await;
        let error = result.expect_err("the pass fails");
        assert_eq!(error.reason(), "CreatePodFailed");
        assert_eq!(
            error_policy(Arc::new(run.clone()), &error, ctx.clone()),
            Action::requeue(Duration::from_secs(5))
        );
        let (server, failed_run, made_cm) = scenario.await.expect("first scenario");

        // The same refusal again: the condition is already there (no write) and the event is not repeated.
        let second = async move {
            let mut api = server;
            api.expect("GET", RUN_PATH).await.ok(&failed_run);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![]));
            // The run's own ConfigMap, from the first pass: updated in place.
            api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                .await
                .ok(&made_cm);
            let apply = api
                .expect("PATCH", &format!("{CM_PATH}/bench-1-profile"))
                .await;
            assert!(apply.query.contains("force=true"), "{}", apply.query);
            apply.ok(&made_cm);
            api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": "workload-pvc", "namespace": "team-a"}}));
            api.expect("POST", PODS_PATH)
                .await
                .fail(403, "Forbidden", quota);
            api.expect("GET", RUN_PATH).await.ok(&failed_run);
            api
        };
        let (result, policy, server) = reconcile_on(&run, &ctx, second).await;
        assert!(result.is_err());
        assert_eq!(policy, Some(Action::requeue(Duration::from_secs(10))));
        drop(ctx);
        tokio::time::timeout(Duration::from_secs(5), server.done())
            .await
            .expect("no event the second time");
    }

    #[tokio::test]
    async fn a_config_map_of_the_profile_name_that_the_run_does_not_own_is_refused_not_taken_over()
    {
        let run = stored_run(fixtures::BASIC, 5);
        let stored = json_of(&run);
        let (result, policy) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH).await.ok(&list("PodList", vec![]));
            api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "bench-1-profile", "namespace": "team-a", "uid": "users"},
                            "data": {"mine": "keep me"}}));
            // No write to the ConfigMap: the refusal goes on the run.
            api.expect("GET", RUN_PATH).await.ok(&stored);
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let reconciled = condition_of(&patch.body["status"], "Reconciled").clone();
            assert_eq!(reconciled["reason"], "ConfigMapNotOwned");
            assert_eq!(
                reconciled["message"],
                "ConfigMap team-a/bench-1-profile exists and is not owned by BenchmarkRun bench-1; delete or \
                 rename it, or rename the run"
            );
            patch.ok(&stored);
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(event.body["reason"], "ConfigMapNotOwned");
            event.created();
            api
        })
        .await;
        assert!(matches!(
            result,
            Err(Error::Finalizer(ref inner))
                if matches!(inner.as_ref(), finalizer::Error::ApplyFailed(Error::ConfigMapNotOwned { .. }))
        ));
        assert_eq!(policy, Some(Action::requeue(Duration::from_secs(5))));
    }

    #[tokio::test]
    async fn a_pod_of_the_launchers_name_that_the_run_does_not_own_is_refused() {
        let run = stored_run(fixtures::BASIC, 5);
        let stored = json_of(&run);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH).await.ok(&list("PodList", vec![]));
            api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                .await
                .not_found("configmaps \"bench-1-profile\"");
            api.expect("POST", CM_PATH).await.created();
            api.expect("GET", &format!("{PVC_PATH}/workload-pvc"))
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": "workload-pvc", "namespace": "team-a"}}));
            api.expect("POST", PODS_PATH).await.fail(
                409,
                "AlreadyExists",
                "pods \"bench-1-launcher-0\" already exists",
            );
            // An earlier namesake run's pod, still terminating: not ours.
            api.expect("GET", &format!("{PODS_PATH}/bench-1-launcher-0"))
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "bench-1-launcher-0", "namespace": "team-a", "uid": "old",
                                         "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1",
                                             "kind": "BenchmarkRun", "name": "bench-1", "uid": "an-older-run",
                                             "controller": true}]}}));
            api.expect("GET", RUN_PATH).await.ok(&stored);
            let patch = api.expect("PATCH", STATUS_PATH).await;
            assert_eq!(
                condition_of(&patch.body["status"], "Reconciled")["reason"],
                "PodNotOwned"
            );
            patch.ok(&stored);
            api.expect("POST", EVENTS_PATH).await.created();
            api
        })
        .await;
        assert!(result.is_err());
    }

    fn running_pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "bench-1-launcher-0", "namespace": "team-a", "uid": "pod-uid-0",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"llmbench.dev/run-uid": UID, "llmbench.dev/launcher-index": "0"},
                "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
                                     "name": "bench-1", "uid": UID, "controller": true}],
            },
            "status": {"phase": "Running", "containerStatuses": [{"name": "launcher", "image": "i",
                "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
        })
    }

    const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments";
    const SVC_PATH: &str = "/api/v1/namespaces/team-a/services";
    const STANDALONE: &str = "
harness: inference-perf
workload:
  builtin: sanity_random
stack:
  model: m
  standalone:
    image: llmbench:dev
    args: [sim, --host, 0.0.0.0, --port, '8000']
";

    /// `object` as the run's controller owner reference makes it.
    fn owned(mut object: Value) -> Value {
        object["metadata"]["uid"] = json!("stack-uid");
        object["metadata"]["ownerReferences"] = json!([{"apiVersion": "llmbench.dev/v1alpha1",
            "kind": "BenchmarkRun", "name": "bench-1", "uid": UID, "controller": true}]);
        object
    }

    /// The stack's pod: `ready` or not, its container restarted `restarts` times (the last one OOMKilled).
    fn stack_pod(ready: bool, restarts: i32, phase: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bench-1-stack-7d9f", "namespace": "team-a", "uid": "stack-pod-uid",
                         "labels": {"llmbench.dev/stack-of": UID}},
            "status": {"phase": phase,
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "stack", "image": "i", "imageID": "", "ready": ready,
                    "restartCount": restarts, "state": {"running": {}},
                    "lastState": if restarts > 0 {
                        json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
                    } else { json!({}) }}]},
        })
    }

    /// The stack's Deployment as stored: created `age_s` seconds ago, with `available` replicas.
    fn stack_deployment_stored(run: &BenchmarkRun, age_s: i64, available: i32) -> Value {
        let stack = run.spec.stack.standalone.as_ref().expect("standalone");
        let mut deployment = owned(json_of(&stack_deployment(run, stack).expect("builds")));
        let created = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(age_s);
        deployment["metadata"]["creationTimestamp"] = json!(created.to_string());
        deployment["status"] = json!({"availableReplicas": available});
        deployment
    }

    /// The stack's Deployment and Service deleted after the run, each as the very object that was read.
    async fn expect_teardown(api: &mut ApiServer, deployment: Value, service: Value) {
        for (path, object) in [(DEPLOY_PATH, deployment), (SVC_PATH, service)] {
            let name = format!("{path}/bench-1-stack");
            api.expect("GET", &name).await.ok(&object);
            let delete = api.expect("DELETE", &name).await;
            assert_eq!(delete.body["preconditions"]["uid"], "stack-uid");
            delete.ok(&object);
        }
    }

    #[tokio::test]
    async fn a_standalone_run_makes_its_stack_first_and_starts_no_launcher_until_it_is_ready() {
        let run = stored_run(STANDALONE, 5);
        let stored = json_of(&run);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![]));
            api.expect("GET", &format!("{SVC_PATH}/bench-1-stack"))
                .await
                .not_found("services \"bench-1-stack\"");
            let service = api.expect("POST", SVC_PATH).await;
            assert_eq!(service.body["metadata"]["ownerReferences"][0]["uid"], UID);
            assert_eq!(service.body["spec"]["ports"][0]["port"], 8000);
            service.created();
            api.expect("GET", &format!("{DEPLOY_PATH}/bench-1-stack"))
                .await
                .not_found("deployments.apps \"bench-1-stack\"");
            let deployment = api.expect("POST", DEPLOY_PATH).await;
            let container = &deployment.body["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(container["image"], "llmbench:dev");
            assert_eq!(container["args"], json!(["sim", "--host", "0.0.0.0", "--port", "8000"]));
            let created = as_created(deployment.body.clone(), "stack-uid");
            deployment.reply(201, &created);
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(event.body["reason"], "StackCreated");
            event.created();
            let pods = api.expect("GET", PODS_PATH).await;
            assert!(
                pods.query.contains("llmbench.dev%2Fstack-of%3D0f3c9a2e"),
                "{}",
                pods.query
            );
            pods.ok(&list("PodList", vec![stack_pod(false, 0, "Pending")]));
            // No ConfigMap, claim or launcher yet: the run waits for its stack.
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let status = patch.body["status"].clone();
            assert_eq!(status["phase"], "Pending");
            assert!(status.get("startTime").is_none(), "{status:#}");
            let ready = condition_of(&status, "StackReady");
            assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!("StackStarting")));
            assert_eq!(ready["message"], "stack pod bench-1-stack-7d9f: Pending");
            assert_eq!(
                status["stack"],
                json!({"deployment": "bench-1-stack", "service": "bench-1-stack",
                       "url": "http://bench-1-stack.team-a.svc:8000", "image": "llmbench:dev", "ready": false})
            );
            let mut answered = stored.clone();
            answered["status"] = status;
            patch.ok(&answered);
            api
        })
        .await;
        let action = result.expect("the pass succeeds");
        assert!(
            action != Action::await_change(),
            "a starting stack is looked at again"
        );
    }

    #[tokio::test]
    async fn a_stack_not_ready_within_its_timeout_fails_the_run_naming_the_timeout_and_goes() {
        let run = stored_run(
            &format!("{STANDALONE}    readiness: {{timeout: 15m}}\n"),
            20 * 60,
        );
        let stored = json_of(&run);
        let deployment = stack_deployment_stored(&run, 16 * 60, 0);
        let stack = run.spec.stack.standalone.as_ref().expect("standalone");
        let service = owned(json_of(&stack_service(&run, stack).expect("builds")));
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![]));
            api.expect("GET", &format!("{SVC_PATH}/bench-1-stack"))
                .await
                .ok(&service);
            api.expect("GET", &format!("{DEPLOY_PATH}/bench-1-stack"))
                .await
                .ok(&deployment);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![stack_pod(false, 0, "Running")]));
            let log = api
                .expect("GET", &format!("{PODS_PATH}/bench-1-stack-7d9f/log"))
                .await;
            assert!(log.query.contains("container=stack"), "{}", log.query);
            log.text("Loading safetensors checkpoint shards: 40% Completed\n");
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let status = patch.body["status"].clone();
            assert_eq!(status["phase"], "Failed");
            let failed = condition_of(&status, "Failed");
            assert_eq!(failed["reason"], "StackNotReady");
            // By hand from not_ready_message: the timeout, where the pod was, the log tail.
            assert_eq!(
                failed["message"],
                "the standalone stack did not become ready within spec.stack.standalone.readiness.timeout \
                 (15m); stack pod bench-1-stack-7d9f: Running, not ready yet (readiness probe)\nstack log \
                 tail:\nLoading safetensors checkpoint shards: 40% Completed"
            );
            assert_eq!(condition_of(&status, "StackReady")["reason"], "StackNotReady");
            assert_eq!(status["stack"]["deleted"], true);
            let mut answered = stored.clone();
            answered["status"] = status;
            patch.ok(&answered);
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(event.body["reason"], "StackNotReady");
            event.created();
            expect_teardown(&mut api, deployment, service).await;
            api
        })
        .await;
        assert_eq!(result.expect("the pass succeeds"), Action::await_change());
    }

    #[tokio::test]
    async fn a_stack_that_dies_mid_run_fails_it_with_its_reason_and_log_and_stops_the_launchers() {
        let mut run = stored_run(STANDALONE, 60);
        run.status = Some(BenchmarkRunStatus {
            phase: Some(Phase::Running),
            start_time: Some(Time(Timestamp::now())),
            stack: Some(llmbench_api::v1alpha1::StackStatus {
                deployment: "bench-1-stack".to_owned(),
                service: "bench-1-stack".to_owned(),
                url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
                image: "llmbench:dev".to_owned(),
                ready: true,
                pod: Some("bench-1-stack-7d9f".to_owned()),
                restarts: Some(0),
                deleted: false,
            }),
            ..BenchmarkRunStatus::default()
        });
        let stored = json_of(&run);
        let deployment = stack_deployment_stored(&run, 50, 0);
        let stack = run.spec.stack.standalone.as_ref().expect("standalone");
        let service = owned(json_of(&stack_service(&run, stack).expect("builds")));
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![running_pod()]));
            // The heartbeat: the Deployment, then the stack pod, restarted once since the launchers started.
            api.expect("GET", &format!("{DEPLOY_PATH}/bench-1-stack"))
                .await
                .ok(&deployment);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![stack_pod(false, 1, "Running")]));
            // The log of the instance that died.
            let log = api
                .expect("GET", &format!("{PODS_PATH}/bench-1-stack-7d9f/log"))
                .await;
            assert!(log.query.contains("previous=true"), "{}", log.query);
            log.text("CUDA out of memory\n");
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let status = patch.body["status"].clone();
            assert_eq!(status["phase"], "Failed");
            let failed = condition_of(&status, "Failed");
            assert_eq!(failed["reason"], "StackFailed");
            assert_eq!(
                failed["message"],
                "the stack's server in pod bench-1-stack-7d9f terminated (OOMKilled, exit code 137) and was \
                 restarted 1 time(s) during the run; the launchers were stopped, and what they measured until \
                 then is on the workload volume, marked interrupted\nstack log tail:\nCUDA out of memory"
            );
            assert_eq!(status["stack"]["ready"], false);
            let mut answered = stored.clone();
            answered["status"] = status;
            patch.ok(&answered);
            // The status first, then the launcher stopped (SIGTERM: it keeps what it measured).
            let delete = api
                .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-0"))
                .await;
            assert_eq!(delete.body["preconditions"]["uid"], "pod-uid-0");
            delete.ok(&running_pod());
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(event.body["reason"], "StackFailed");
            event.created();
            expect_teardown(&mut api, deployment, service).await;
            api
        })
        .await;
        assert_eq!(result.expect("the pass succeeds"), Action::await_change());
    }

    #[tokio::test]
    async fn a_sharded_runs_merge_does_not_watch_the_stack_it_no_longer_needs() {
        let mut run = stored_run(&format!("{STANDALONE}launcher:\n  parallelism: 2\n"), 60);
        run.status = Some(BenchmarkRunStatus {
            phase: Some(Phase::Collecting),
            start_time: Some(Time(Timestamp::now())),
            stack: Some(llmbench_api::v1alpha1::StackStatus {
                deployment: "bench-1-stack".to_owned(),
                service: "bench-1-stack".to_owned(),
                url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
                image: "llmbench:dev".to_owned(),
                ready: true,
                pod: Some("bench-1-stack-7d9f".to_owned()),
                restarts: Some(0),
                deleted: false,
            }),
            ..BenchmarkRunStatus::default()
        });
        let stored = json_of(&run);
        let launcher = |index: u32| {
            let mut pod = running_pod();
            pod["metadata"]["name"] = json!(format!("bench-1-launcher-{index}"));
            pod["metadata"]["labels"]["llmbench.dev/launcher-index"] = json!(index.to_string());
            pod["status"] = json!({"phase": "Succeeded", "containerStatuses": [{"name": "launcher",
                "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "message": "{}"}}}]});
            pod
        };
        let mut merge = running_pod();
        merge["metadata"]["name"] = json!("bench-1-merge");
        merge["metadata"]["labels"] = json!({"llmbench.dev/run-uid": UID});
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![launcher(0), launcher(1), merge]));
            // No look at the stack's Deployment or pods: the next request is the status.
            let patch = api.expect("PATCH", STATUS_PATH).await;
            assert_eq!(
                condition_of(&patch.body["status"], "Completed")["reason"],
                "Merging"
            );
            let mut answered = stored.clone();
            answered["status"] = patch.body["status"].clone();
            patch.ok(&answered);
            api
        })
        .await;
        assert!(result.is_ok(), "{result:?}");
    }

    #[tokio::test]
    async fn a_nop_run_on_a_standalone_stack_reports_the_model_load_from_the_stack_pods_log() {
        let mut run = stored_run(
            "harness: nop\nworkload:\n  builtin: nop\nstack:\n  model: Qwen/Qwen3-0.6B\n  standalone: {}\n",
            60,
        );
        run.status = Some(BenchmarkRunStatus {
            phase: Some(Phase::Running),
            start_time: Some(Time(Timestamp::now())),
            stack: Some(llmbench_api::v1alpha1::StackStatus {
                deployment: "bench-1-stack".to_owned(),
                service: "bench-1-stack".to_owned(),
                url: "http://bench-1-stack.team-a.svc:8000".to_owned(),
                image: llmbench_api::v1alpha1::DEFAULT_STANDALONE_IMAGE.to_owned(),
                ready: true,
                pod: Some("bench-1-stack-7d9f".to_owned()),
                restarts: Some(0),
                deleted: false,
            }),
            ..BenchmarkRunStatus::default()
        });
        let stored = json_of(&run);
        // The nop launcher's compact summary: no requests.
        let summary = json!({"schema": "llmbench.summary/v1", "run_id": "bench-1-0f3c9a2e", "harness": "nop",
            "requests": {"total": 0, "succeeded": 0, "failed": 0}, "duration_s": 0.5,
            "throughput": {"requests_per_s": 0.0, "input_tokens_per_s": 0.0, "output_tokens_per_s": 0.0},
            "latency_ms": {"ttft": null, "tpot": null, "itl": null, "ntpot": null, "e2e": null}});
        let mut done = running_pod();
        done["status"] = json!({"phase": "Succeeded", "containerStatuses": [{"name": "launcher", "image": "i",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "message": summary.to_string()}}}]});
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![done]));
            let log = api
                .expect("GET", &format!("{PODS_PATH}/bench-1-stack-7d9f/log"))
                .await;
            assert!(log.query.contains("container=stack"), "{}", log.query);
            assert!(
                !log.query.contains("tailLines"),
                "the whole log: {}",
                log.query
            );
            log.text(crate::stack::tests::V1_LOG);
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let status = patch.body["status"].clone();
            assert_eq!(status["phase"], "Succeeded");
            let load = &status["summary"]["modelLoad"];
            // The recorded vLLM 0.11 log's figures (worked out in crate::stack's tests).
            assert_eq!(load["name"], "bench-1-stack-7d9f stack");
            assert_eq!(load["loadSeconds"], 20.442057);
            assert_eq!(load["vllmStartSeconds"], 123.0);
            assert_eq!(status["stack"]["deleted"], true);
            let mut answered = stored.clone();
            answered["status"] = status;
            patch.ok(&answered);
            api.expect("POST", EVENTS_PATH).await.created();
            for path in [DEPLOY_PATH, SVC_PATH] {
                api.expect("GET", &format!("{path}/bench-1-stack"))
                    .await
                    .not_found("bench-1-stack");
            }
            api
        })
        .await;
        assert_eq!(result.expect("the pass succeeds"), Action::await_change());
    }

    /// A Running run created two hours ago with a 90 s timeout.
    fn running_past_its_timeout() -> BenchmarkRun {
        let mut run = stored_run(&format!("{}timeout: 90s\n", fixtures::BASIC), 7200);
        run.status = Some(BenchmarkRunStatus {
            phase: Some(Phase::Running),
            start_time: Some(Time(Timestamp::now())),
            ..BenchmarkRunStatus::default()
        });
        run
    }

    #[tokio::test]
    async fn a_timed_out_run_writes_its_failed_status_before_it_deletes_its_pods() {
        let run = running_past_its_timeout();
        let stored = json_of(&run);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![running_pod()]));
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let status = patch.body["status"].clone();
            assert_eq!(status["phase"], "Failed");
            assert_eq!(condition_of(&status, "Failed")["reason"], "Timeout");
            let mut answered = stored.clone();
            answered["status"] = status;
            patch.ok(&answered);
            // Only then the pod, and only the very pod that was read.
            let delete = api
                .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-0"))
                .await;
            assert_eq!(delete.body["preconditions"]["uid"], "pod-uid-0");
            delete.ok(&running_pod());
            let event = api.expect("POST", EVENTS_PATH).await;
            assert_eq!(event.body["reason"], "Timeout");
            event.created();
            api
        })
        .await;
        assert_eq!(result.expect("the pass succeeds"), Action::await_change());
    }

    #[tokio::test]
    async fn a_timed_out_run_whose_status_write_fails_keeps_its_pods() {
        let run = running_past_its_timeout();
        let stored = json_of(&run);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![running_pod()]));
            api.expect("PATCH", STATUS_PATH).await.fail(
                500,
                "InternalError",
                "etcdserver: request timed out",
            );
            // No DELETE: the error is told, and the next pass times the run out again.
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("PATCH", STATUS_PATH).await.fail(
                500,
                "InternalError",
                "etcdserver: request timed out",
            );
            api.expect("POST", EVENTS_PATH).await.created();
            api
        })
        .await;
        assert_eq!(
            result.map_err(|e| e.reason()).expect_err("fails"),
            "PatchStatusFailed"
        );
    }

    #[tokio::test]
    async fn a_run_that_never_started_fails_with_timeout_counted_from_its_creation() {
        let run = stored_run(&format!("{}timeout: 90s\n", fixtures::BASIC), 120);
        let stored = json_of(&run);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![]));
            let patch = api.expect("PATCH", STATUS_PATH).await;
            let failed = condition_of(&patch.body["status"], "Failed").clone();
            assert_eq!(failed["reason"], "Timeout");
            assert!(
                failed["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("did not start within spec.timeout (90s)")),
                "{failed}"
            );
            patch.ok(&stored);
            api.expect("POST", EVENTS_PATH).await.created();
            api
        })
        .await;
        assert_eq!(result.expect("the pass succeeds"), Action::await_change());
    }

    #[tokio::test]
    async fn deleting_a_run_removes_only_the_pods_and_config_map_it_controls() {
        let mut run = stored_run(fixtures::BASIC, 5);
        run.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        let stored = json_of(&run);
        let mut foreign = running_pod();
        foreign["metadata"]["name"] = json!("impostor");
        foreign["metadata"]["ownerReferences"] = json!([]);
        let (result, _) = reconcile_with(&run, |mut api| async move {
            api.expect("GET", RUN_PATH).await.ok(&stored);
            api.expect("GET", PODS_PATH)
                .await
                .ok(&list("PodList", vec![running_pod(), foreign]));
            let delete = api
                .expect("DELETE", &format!("{PODS_PATH}/bench-1-launcher-0"))
                .await;
            assert_eq!(delete.body["preconditions"]["uid"], "pod-uid-0");
            delete.ok(&running_pod());
            // A user's ConfigMap under the profile's name stays.
            api.expect("GET", &format!("{CM_PATH}/bench-1-profile"))
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "bench-1-profile", "namespace": "team-a", "uid": "users"}}));
            // The finalizer goes: a JSON patch on the run.
            let finalizer = api.expect("PATCH", RUN_PATH).await;
            assert!(finalizer.body.to_string().contains("/metadata/finalizers"));
            finalizer.ok(&stored);
            api
        })
        .await;
        assert_eq!(result.expect("cleaned up"), Action::await_change());
    }

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
    fn the_deadline_runs_from_the_creation_and_debug_runs_have_none() {
        let mut run = fixtures::run(&format!("{}timeout: 90s\n", fixtures::BASIC));
        let at = |s| Timestamp::from_second(s).expect("time");
        run.metadata.creation_timestamp = Some(Time(at(1_000)));
        // The pods came much later; the deadline does not move with them.
        run.status = Some(BenchmarkRunStatus {
            start_time: Some(Time(at(1_080))),
            ..BenchmarkRunStatus::default()
        });
        assert_eq!(remaining(&run, at(1_030)), Some(Duration::from_secs(60)));
        assert_eq!(remaining(&run, at(1_090)), Some(Duration::ZERO));
        assert_eq!(remaining(&run, at(1_200)), Some(Duration::ZERO));
        let mut debug = fixtures::run(&format!("{}launcher:\n  debug: true\n", fixtures::BASIC));
        debug.metadata.creation_timestamp = Some(Time(at(1_000)));
        assert_eq!(remaining(&debug, at(99_999)), None);
    }

    #[test]
    fn a_retry_never_sleeps_past_the_deadline_but_keeps_its_backoff_once_it_has_passed() {
        let backoff = Duration::from_secs(300);
        assert_eq!(
            retry_wait(backoff, Some(Duration::from_secs(20))),
            Duration::from_secs(20) + DEADLINE_SLACK
        );
        assert_eq!(retry_wait(backoff, Some(Duration::from_secs(900))), backoff);
        assert_eq!(retry_wait(backoff, Some(Duration::ZERO)), backoff);
        assert_eq!(retry_wait(backoff, None), backoff);
        assert_eq!(FIRST_RETRY, Duration::from_secs(5));
    }
}
