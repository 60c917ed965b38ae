//! Finish: the status first, then what follows from it; a finished run settled again; a failed pass told on the run.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::{BenchmarkRun, BenchmarkRunStatus, Phase};

use super::children_of;
use super::error::Error;
use super::kept_results;
use super::launchers::{delete_pods, list_all_pods, log_tail, stop_active_pods};
use super::standalone_stack::{stack_model_load, teardown_stack};
use super::{DEADLINE_SLACK, Outcome, Pass, remaining};
use crate::builders::preflight_pod_name;
use crate::builders::stack::standalone;
use crate::reconcile::{Ctx, Reason, apply_status, expire_after_ttl, warn_failed};
use crate::stack::STACK_READY;
use crate::status::{
    self, COMPLETED, FailureReason, PROFILE_RENDERED, RECONCILED, condition, failure_message,
    set_condition,
};

/// Finish: the status first, then what follows from it. A status that says Failed is written before any pod is
/// deleted, so a write that fails never leaves a run whose pods are gone while its status says they run (which
/// the next pass would take for lost launchers); a finished run's leftover pods are stopped by
/// [`settle_finished`].
pub(super) async fn finish(
    mut pass: Pass<'_>,
    outcome: Outcome,
    pods: &[Pod],
) -> Result<Action, Error> {
    let run = pass.run;
    let ctx = pass.ctx;
    let now = pass.now;
    let generation = pass.generation;
    let mut status = std::mem::take(&mut pass.status);
    let ends = !matches!(outcome, Outcome::InFlight { .. });
    if ends {
        // The Progress column is for a run under way; the phase says the rest.
        status.progress = None;
    }
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
            let (_, unkept) = keep_results(run, &pass, &mut status).await;
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
            warn_unkept(run, ctx, unkept).await;
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
            let mut status = status;
            // An emptyDir launcher's log ends in its results: kept, and its own lines are the tail.
            // The pre-flight pod's termination message is its whole verdict, and no launcher ever ran.
            let before_launchers = failure.pod == preflight_pod_name(run);
            let (tail, unkept) = if before_launchers {
                (None, None)
            } else {
                match keep_results(run, &pass, &mut status).await {
                    (Some(tail), unkept) => (Some(tail), unkept),
                    (None, unkept) => (
                        log_tail(&pass.pods_api, &failure.pod, failure.reason).await,
                        unkept,
                    ),
                }
            };
            let message = failure_message(&failure, tail.as_deref());
            let status = status::failed(status, failure.reason, &message, generation, now);
            write_status(run, pass.old.as_ref(), &status, ctx).await?;
            warn_unkept(run, ctx, unkept).await;
            // A failed shard stops the others.
            stop_active_pods(run, pods, &pass.children).await?;
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
            stop_active_pods(run, pods, &pass.children).await?;
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
            delete_pods(run, pods, &pass.children).await?;
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
pub(super) fn timeout_message(
    run: &BenchmarkRun,
    status: &BenchmarkRunStatus,
    pods: &[Pod],
) -> String {
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
pub(super) async fn settle_finished(
    run: &BenchmarkRun,
    done: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<Action, Error> {
    let namespace = run.namespace().unwrap_or_default();
    ctx.metrics
        .record_run_results(&namespace, &run.name_any(), done);
    if done.phase == Some(Phase::Failed) {
        let children = children_of(run, ctx)?;
        // The pre-flight pod too: a run that timed out while it waited has it still pending.
        let pods = list_all_pods(run, &children).await?;
        stop_active_pods(run, &pods, &children).await?;
    }
    // The pass that finished the run may have been cut short before it deleted the stack.
    teardown_stack(run, ctx, false).await?;
    // Clears an earlier failure of this very step from the status.
    write_status(run, Some(done), done, ctx).await?;
    // A run an experiment owns stays while the experiment does: the experiment's table is built from it.
    let owned_by_experiment = run
        .owner_references()
        .iter()
        .any(|o| o.kind == "BenchmarkExperiment");
    let left = (!owned_by_experiment)
        .then(|| {
            status::ttl_left(
                run.spec.ttl_seconds_after_finished,
                ctx.ttl_after_finished,
                done.completion_time.as_ref(),
                Timestamp::now(),
            )
        })
        .flatten();
    expire_after_ttl(
        run,
        left,
        &status::kept_results(&run.name_any(), &namespace, done.results_path.as_deref()),
        ctx,
    )
    .await
    .map_err(|source| Error::DeleteRun {
        run: run.name_any(),
        source,
    })
}

/// Server-side applies the status a successful pass made, when it changed. Writing it says the pass succeeded,
/// so an earlier `Reconciled=False` turns True.
pub(super) async fn write_status(
    run: &BenchmarkRun,
    old: Option<&BenchmarkRunStatus>,
    status: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
    let mut status = status.clone();
    status.failure_percent = status::failure_percent(status.summary.as_ref());
    status::reconcile_succeeded(&mut status, run.metadata.generation, Timestamp::now());
    if old == Some(&status) {
        return Ok(());
    }
    patch_status(run, &status, ctx).await
}

/// Server-side applies the whole status under the operator's field manager.
pub(super) async fn patch_status(
    run: &BenchmarkRun,
    status: &BenchmarkRunStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
    apply_status(&ctx.client, run, status)
        .await
        .map_err(|source| Error::PatchStatus {
            run: run.name_any(),
            source,
        })
}

/// Tells a failed pass on the run: condition `Reconciled=False` with the error (naming the object and the API
/// server's answer), and a Warning event at most once per reason every few minutes. Best effort: when the API
/// server is what fails, this fails too, and the log has it.
pub(super) async fn surface_error(run: &BenchmarkRun, error: &Error, ctx: &Ctx) {
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

/// An emptyDir run whose launcher ended: its results block read from the launcher's log and kept in ConfigMaps
/// (`status.resultsKept`). Returns the launcher's own last lines before the block (`None` for a run on a PVC, or
/// when the log could not be read) and why the results could not be kept, if they could not.
async fn keep_results(
    run: &BenchmarkRun,
    pass: &Pass<'_>,
    status: &mut BenchmarkRunStatus,
) -> (Option<String>, Option<String>) {
    if run.spec.storage.pvc_name().is_some() || status.results_kept.is_some() {
        return (None, None);
    }
    let pod = crate::builders::launcher_pod_name(run, 0);
    let Some(log) = kept_results::read(&pass.pods_api, &pod).await else {
        return (
            None,
            Some(format!(
                "the log of {pod} could not be read: its emptyDir results went with it"
            )),
        );
    };
    let unkept = match log.archive {
        Ok(Some(archive)) => match kept_results::keep(run, &archive, &pass.ctx.client).await {
            Ok(kept) => {
                status.results_kept = Some(kept);
                None
            }
            Err(why) => Some(why),
        },
        Ok(None) => Some(format!(
            "{pod} wrote no results block into its log (it ended before it could): its emptyDir results went with it"
        )),
        Err(e) => Some(format!("{pod}'s results block cannot be read: {e}")),
    };
    (Some(log.tail), unkept)
}

/// A Warning event when an emptyDir run's results could not be kept.
async fn warn_unkept(run: &BenchmarkRun, ctx: &Ctx, unkept: Option<String>) {
    if let Some(why) = unkept {
        ctx.publish(
            &run.object_ref(&()),
            EventType::Warning,
            "ResultsNotKept",
            "Collect",
            &why,
        )
        .await;
    }
}
