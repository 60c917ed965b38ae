//! The BenchmarkExperiment reconciler, as named phases like the run's: **validate** (the plan; in full before the
//! first run) → **observe** (the owned runs) → **start** (what the schedule says, hooks first) → **conclude** (once
//! every run finished: the plan file and the collector) or **wait** → **write** the status. An experiment being
//! deleted is cleaned up instead. The decisions are in `crate::experiment`.
//!
//! Runs are found by the experiment's UID label and matched to the plan by name, so an operator restart mid-way
//! derives the same state: a run is never created twice, and a run that vanished counts as failed rather than
//! being run again.

mod cleanup;
mod collect;
mod error;
mod finish;
mod runs;
mod validate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use llmbench_api::render::well_known;
use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkExperimentStatus, ExperimentPhase};

use crate::experiment::schedule::{RunState, schedule};
use crate::metrics::ControllerName;
use crate::reconcile::children::Children;
use crate::reconcile::{Ctx, Reason, retry_key, warn_failed};

use cleanup::cleanup;
use collect::conclude;
pub use error::Error;
use finish::{announce_phase, summarise, wait, write_status};
use runs::{announce_run_failures, children_of, list_runs, mark_started, observe_runs, start_runs};
use validate::{invalid_experiment, validated};

/// The finalizer that deletes an experiment's runs, plan and collector before the experiment goes, garbage
/// collector or not.
pub const FINALIZER: &str = "llmbench.dev/cleanup";

/// How often an experiment under way is looked at even without events.
const RESYNC: Duration = Duration::from_secs(60);

/// Entry point for the controller.
pub async fn reconcile(experiment: Arc<BenchmarkExperiment>, ctx: Ctx) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_fresh(&experiment, &ctx).await;
    ctx.metrics.reconciled(
        ControllerName::benchmarkexperiment,
        started.elapsed().as_secs_f64(),
    );
    match &result {
        Ok(_) => ctx.retries.succeeded(&retry_key(experiment.as_ref())),
        Err(e) => {
            let message = e.cause().to_string();
            warn_failed(experiment.as_ref(), e.reason(), &message, &ctx).await;
        }
    }
    result
}

/// Retry with a backoff per experiment (see `super::retry`): the error is counted, logged and was told in a
/// Warning event by `reconcile`.
pub fn error_policy(experiment: Arc<BenchmarkExperiment>, error: &Error, ctx: Ctx) -> Action {
    ctx.metrics.failed(
        ControllerName::benchmarkexperiment,
        &super::action_of(error.reason()),
    );
    let wait = ctx.retries.failed(&retry_key(experiment.as_ref()));
    tracing::warn!(
        experiment = %experiment.name_any(),
        namespace = ?experiment.namespace(),
        error = %error,
        retry_in = ?wait,
        "reconcile failed"
    );
    Action::requeue(wait)
}

async fn reconcile_fresh(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Result<Action, Error> {
    let name = experiment.name_any();
    let namespace = experiment
        .namespace()
        .ok_or_else(|| Error::MissingNamespace {
            experiment: name.clone(),
        })?;
    let api: Api<BenchmarkExperiment> = Api::namespaced(ctx.client.clone(), &namespace);
    // The cache may lag our own status writes; which runs exist and how far along they are needs the latest.
    let Some(fresh) = api
        .get_opt(&name)
        .await
        .map_err(|source| Error::GetExperiment {
            experiment: name.clone(),
            source,
        })?
    else {
        return Ok(Action::await_change());
    };
    finalizer(&api, FINALIZER, Arc::new(fresh), |event| async {
        match event {
            FinalizerEvent::Apply(experiment) => apply(&experiment, ctx).await,
            FinalizerEvent::Cleanup(experiment) => cleanup(&experiment, ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Whether the experiment has ended after starting: it is a record then, never acted on again. (An invalid
/// experiment never started, so an edit of its spec is looked at.)
fn is_finished(status: Option<&BenchmarkExperimentStatus>) -> bool {
    status.is_some_and(|s| {
        s.start_time.is_some()
            && matches!(
                s.phase,
                Some(ExperimentPhase::Succeeded | ExperimentPhase::Failed)
            )
    })
}

/// What one pass over an unfinished experiment reads once and carries through its phases.
struct Pass<'a> {
    experiment: &'a BenchmarkExperiment,
    ctx: &'a Ctx,
    /// The experiment's runs, plan ConfigMap and collector pod.
    children: Children,
    now: Timestamp,
    generation: Option<i64>,
    /// The status as read at the start of the pass.
    old: Option<BenchmarkExperimentStatus>,
    /// The status as this pass makes it.
    status: BenchmarkExperimentStatus,
}

impl<'a> Pass<'a> {
    fn new(experiment: &'a BenchmarkExperiment, ctx: &'a Ctx) -> Self {
        let old = experiment.status.clone();
        let generation = experiment.metadata.generation;
        let mut status = old.clone().unwrap_or_default();
        status.observed_generation = generation;
        Pass {
            experiment,
            ctx,
            children: children_of(experiment, ctx),
            now: Timestamp::now(),
            generation,
            old,
            status,
        }
    }
}

/// One pass, as named phases: **validate** (the plan, before the first run) → **observe** (the owned runs) →
/// **start** (what the schedule says, hooks first) → **conclude** (once every run finished: the plan file and
/// the collector) or **wait** → **write** the status.
async fn apply(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Result<Action, Error> {
    if let Some(done) = experiment.status.as_ref().filter(|s| is_finished(Some(s))) {
        let left = crate::status::ttl_left(
            experiment.spec.ttl_seconds_after_finished,
            ctx.ttl_after_finished,
            done.completion_time.as_ref(),
            k8s_openapi::jiff::Timestamp::now(),
        );
        return crate::reconcile::expire_after_ttl(
            experiment,
            left,
            &match done.results_path.as_deref() {
                Some(path) => format!("its runs' results and comparison stay in {path}"),
                None => "its runs' results stay on the workload volume".to_owned(),
            },
            ctx,
        )
        .await
        .map_err(|source| Error::DeleteExperiment {
            experiment: experiment.name_any(),
            source,
        });
    }
    let mut pass = Pass::new(experiment, ctx);
    let owned = list_runs(experiment, &pass.children).await?;
    let plan = match validated(&mut pass, &owned).await? {
        Ok(plan) => plan,
        Err(invalid) => return invalid_experiment(pass, &invalid).await,
    };
    let mut observations = observe_runs(&plan, &owned, pass.old.as_ref());
    announce_run_failures(experiment, &plan, &observations, pass.old.as_ref(), ctx).await;
    let states: Vec<RunState> = observations.iter().map(|o| o.state).collect();
    let decision = schedule(&states, &plan.ordering, pass.now);
    let endpoint = experiment
        .spec
        .template
        .render_values(&experiment.namespace().unwrap_or_default())
        .get(well_known::ENDPOINT_URL)
        .cloned();
    start_runs(
        &pass,
        &plan,
        &decision.start,
        &mut observations,
        endpoint.as_deref(),
    )
    .await?;
    mark_started(&mut pass, &owned, !decision.start.is_empty());
    summarise(&mut pass.status, &plan, &observations);
    let action = if decision.done {
        conclude(&mut pass, &plan, &observations, decision.stopped, endpoint).await?
    } else {
        wait(&mut pass, &plan, &observations, decision.wake_after)
    };
    announce_phase(experiment, pass.old.as_ref(), &pass.status, ctx).await;
    write_status(experiment, pass.old.as_ref(), &pass.status, ctx).await?;
    Ok(action)
}

#[cfg(test)]
mod tests;
