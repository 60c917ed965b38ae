//! The BenchmarkRun reconciler, as named phases: **prepare** (render the profile, the ConfigMap, the workload PVC)
//! → **pre-flight** (a pod checks the stack from the launchers' network) → **start** (the launcher pods, the start
//! time) → **observe** (where the pods are; release and merge a sharded
//! run) → **finish** (the status, written first, then what follows from it: pods stopped, events, metrics). A run
//! that is being deleted is cleaned up instead. The decisions are in `crate::status`.
//!
//! Every object made by name is made only if absent, or changed or deleted only while the run controls it (a
//! controller owner reference with the run's uid): a namesake someone else made is never taken over. A failed pass
//! is told on the run (condition `Reconciled`) and in a rate-limited Warning event, and retried with a backoff; the
//! run's deadline counts from its creation, so a run that can never start still ends, with reason Timeout.

mod cleanup;
mod error;
mod finish;
mod kept_results;
mod launchers;
mod live_progress;
mod observe;
mod preflight;
mod prepare;
mod shards;
mod standalone_stack;
mod user_stack;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use llmbench_api::v1alpha1::{BenchmarkRun, BenchmarkRunStatus, Phase, WORKLOAD_MOUNT_PATH};

use crate::builders;
use crate::builders::stack::{stack_image, stack_name, stack_url, standalone};
use crate::builders::{BuildError, launcher_pod_name, profile_config_map_name, run_id};
use crate::metrics::ControllerName;
use crate::reconcile::children::Children;
use crate::reconcile::{Ctx, DEADLINE_SLACK, Reason, retry_key};
use crate::status::{FailureReason, PodFailure, is_finished, parse_duration};

use cleanup::cleanup;
pub use error::Error;
use finish::{finish, settle_finished, surface_error};
use launchers::{list_pods, mark_started, start};
use observe::observe;
use preflight::preflight_step;
use prepare::{Prepared, prepare, profile_not_rendered};
use standalone_stack::{STACK_HEARTBEAT, heartbeat, stack_step};

/// The finalizer that removes a run's pods and ConfigMap before the run goes, garbage collector or not.
pub const FINALIZER: &str = "llmbench.dev/cleanup";

/// How often a running run is looked at even without events.
const RESYNC: Duration = Duration::from_secs(60);

/// Lines of a failed launcher's log kept in the Failed condition.
const LOG_TAIL_LINES: i64 = 40;

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

/// The run's pods, ConfigMap and standalone stack: what it controls by its uid.
fn children_of(run: &BenchmarkRun, ctx: &Ctx) -> Result<Children, Error> {
    Ok(Children::new(
        ctx.client.clone(),
        &run.namespace().unwrap_or_default(),
        builders::uid(run)?,
    ))
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
    /// For the pods' logs: a failed launcher's tail, the stack's.
    pods_api: Api<Pod>,
    /// The run's pods, ConfigMap and stack, made and removed through one place.
    children: Children,
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
            children: children_of(run, ctx)?,
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

async fn apply(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    if let Some(done) = run.status.as_ref().filter(|s| is_finished(Some(s))) {
        return settle_finished(run, done, ctx).await;
    }
    let mut pass = Pass::new(run, ctx)?;
    let mut pods = list_pods(run, &pass.children).await?;
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
                    // The stack checked from the launchers' network first: a failure makes no launcher.
                    if let Some(outcome) = preflight::outcome(preflight_step(&mut pass).await?) {
                        return finish(pass, outcome, &pods).await;
                    }
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
    // The Progress column: read from the running launchers while they send (`finish` clears it at the end).
    if let Outcome::InFlight {
        phase: Phase::Running,
        poll,
        ..
    } = &mut outcome
    {
        *poll = (*poll).min(live_progress::POLL);
        let answered = live_progress::read(&ctx.http, &pods).await;
        if let Some(progress) = live_progress::render(&answered, pass.expected) {
            pass.status.progress = Some(progress);
        }
    }
    finish(pass, outcome, &pods).await
}

/// Time left before `spec.timeout`, counted from the run's creation (so a run that can never start still ends),
/// or `None` when the run has no deadline (debug pods wait for the user).
fn remaining(run: &BenchmarkRun, now: Timestamp) -> Option<Duration> {
    if run.spec.launcher.debug {
        return None;
    }
    // A run queued through Kueue has no deadline until it is admitted, and its timeout counts from there.
    let created = if builders::kueue::queue_of(run).is_some() {
        run.status.as_ref()?.admission_time.as_ref()?.0
    } else {
        run.metadata
            .creation_timestamp
            .as_ref()
            .or_else(|| run.status.as_ref()?.start_time.as_ref())?
            .0
    };
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

#[cfg(test)]
mod tests;
