//! The BenchmarkExperiment reconciler: validate (before the first run) → observe the owned runs → start what the
//! schedule says, hooks first → when every run finished, write the plan file and start the collector → status.
//! Each step is a named function; the decisions are in `crate::experiment`.
//!
//! Runs are found by the experiment's UID label and matched to the plan by name, so an operator restart mid-way
//! derives the same state: a run is never created twice, and a run that vanished counts as failed rather than
//! being run again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{self, Event as FinalizerEvent, finalizer};
use kube::{Resource, ResourceExt};
use llmbench_api::experiment::RunResult;
use llmbench_api::render::well_known;
use llmbench_api::v1alpha1::{
    BenchmarkExperiment, BenchmarkExperimentStatus, BenchmarkRun, ExperimentPhase,
    WORKLOAD_MOUNT_PATH, WorkloadProfile,
};
use serde_json::json;

use super::children::{ChildError, Children};
use super::{Ctx, Reason, retry_key, warn_failed};
use crate::builders::experiment::{
    collector_pod, collector_pod_name, experiment_run, experiment_selector, plan_config_map,
    plan_config_map_name,
};
use crate::builders::{BuildError, FIELD_MANAGER};
use crate::experiment::hooks::{HookCall, call_hooks};
use crate::experiment::schedule::{RunState, schedule};
use crate::experiment::status::{
    Observation, VALID, comparison, experiment_runs, finished, observe, plan_file, progress,
};
use crate::experiment::validate::{Invalid, Plan, plan_of, validate};
use crate::metrics::ControllerName;
use crate::status::{COMPLETED, PodOutcome, failure_message, pod_outcome, set_condition};

/// The finalizer that deletes an experiment's runs, plan and collector before the experiment goes, garbage
/// collector or not.
pub const FINALIZER: &str = "llmbench.dev/cleanup";
/// How often an experiment under way is looked at even without events.
const RESYNC: Duration = Duration::from_secs(60);
/// Condition messages stay readable in `kubectl describe`.
const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// Why reconciling a BenchmarkExperiment failed; each names the action and the object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("BenchmarkExperiment {experiment} has no namespace")]
    MissingNamespace { experiment: String },
    #[error("failed to read BenchmarkExperiment {experiment}: {source}")]
    GetExperiment {
        experiment: String,
        source: kube::Error,
    },
    #[error("failed to list the BenchmarkRuns of BenchmarkExperiment {experiment}: {source}")]
    ListRuns {
        experiment: String,
        source: kube::Error,
    },
    #[error("failed to read WorkloadProfile {name} for BenchmarkExperiment {experiment}: {source}")]
    GetProfile {
        experiment: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to create BenchmarkRun {run} of BenchmarkExperiment {experiment}: {source}")]
    CreateRun {
        experiment: String,
        run: String,
        source: kube::Error,
    },
    #[error(
        "BenchmarkRun {run} exists and does not belong to BenchmarkExperiment {experiment}; delete it or rename \
         the experiment"
    )]
    RunNameTaken { experiment: String, run: String },
    #[error(
        "{what} {namespace}/{name} exists and is not owned by BenchmarkExperiment {experiment}; delete or rename \
         it, or rename the experiment"
    )]
    NotOwned {
        experiment: String,
        what: &'static str,
        namespace: String,
        name: String,
    },
    #[error("failed to apply plan ConfigMap {name} of BenchmarkExperiment {experiment}: {source}")]
    ApplyPlan {
        experiment: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "failed to read or create collector pod {name} of BenchmarkExperiment {experiment}: {source}"
    )]
    Collector {
        experiment: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to delete {what} {name} of BenchmarkExperiment {experiment}: {source}")]
    Delete {
        experiment: String,
        what: &'static str,
        name: String,
        source: kube::Error,
    },
    #[error("failed to write the status of BenchmarkExperiment {experiment}: {source}")]
    PatchStatus {
        experiment: String,
        source: kube::Error,
    },
    #[error("cannot build the objects of BenchmarkExperiment: {0}")]
    Build(#[from] BuildError),
    #[error("BenchmarkExperiment finalizer: {0}")]
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
            Error::GetExperiment { .. } => "GetExperimentFailed",
            Error::ListRuns { .. } => "ListRunsFailed",
            Error::GetProfile { .. } => "GetProfileFailed",
            Error::CreateRun { .. } => "CreateRunFailed",
            Error::RunNameTaken { .. } => "RunNameTaken",
            Error::NotOwned { .. } => "ObjectNotOwned",
            Error::ApplyPlan { .. } => "ApplyPlanFailed",
            Error::Collector { .. } => "CollectorFailed",
            Error::Delete { .. } => "DeleteFailed",
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

fn bounded(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_owned();
    }
    let mut cut = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &message[..cut])
}

async fn apply(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Result<Action, Error> {
    let old = experiment.status.clone();
    if is_finished(old.as_ref()) {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    let generation = experiment.metadata.generation;
    let namespace = experiment.namespace().unwrap_or_default();
    let mut status = old.clone().unwrap_or_default();
    status.observed_generation = generation;

    let children = children_of(experiment, ctx);
    let owned = list_runs(experiment, &children).await?;
    // Once a run exists the spec is frozen (the CRD's rule): the plan is never re-made, only re-derived.
    let started = status.start_time.is_some() || !owned.is_empty();
    let checked = if started {
        plan_of(experiment)
    } else {
        let profile = referenced_profile(experiment, ctx).await?;
        validate(experiment, profile.as_ref())
    };
    let plan = match checked {
        Ok(plan) => plan,
        Err(invalid) => return invalid_experiment(experiment, status, &invalid, ctx, now).await,
    };
    set_condition(
        &mut status.conditions,
        VALID,
        true,
        "Valid",
        &format!(
            "{} treatment(s) × {} repeat(s) = {} run(s), every profile renders",
            plan.treatments.len(),
            experiment.spec.repeats,
            plan.runs.len()
        ),
        generation,
        now,
    );
    let volume = experiment
        .spec
        .template
        .storage
        .pvc_name()
        .unwrap_or("emptyDir");
    status.results_path = Some(format!(
        "{volume}:{WORKLOAD_MOUNT_PATH}/{}",
        plan.experiment_dir
    ));

    let mut observations = observe_runs(&plan, &owned, old.as_ref());
    announce_run_failures(experiment, &plan, &observations, old.as_ref(), ctx).await;
    let states: Vec<RunState> = observations.iter().map(|o| o.state).collect();
    let decision = schedule(&states, &plan.ordering, now);
    let endpoint = experiment
        .spec
        .template
        .render_values(&namespace)
        .get(well_known::ENDPOINT_URL)
        .cloned();
    for &index in &decision.start {
        let hooks = run_hooks(experiment, &plan, index, endpoint.as_deref(), ctx).await;
        let run = experiment_run(experiment, &plan.treatments, &plan.runs[index], &hooks)?;
        create_run(experiment, &run, &children).await?;
        let planned = &plan.runs[index];
        ctx.publish(
            &experiment.object_ref(&()),
            EventType::Normal,
            "RunCreated",
            "CreateRun",
            &format!(
                "created BenchmarkRun {} (treatment {}, repeat {}; run {} of {})",
                plan.names[index],
                plan.treatments[planned.treatment].name,
                planned.repeat,
                index + 1,
                plan.runs.len()
            ),
        )
        .await;
        observations[index] = Observation::created(hooks);
    }

    if status.start_time.is_none() {
        // The earliest run's creation is the start, so a status write lost to a restart changes nothing.
        status.start_time = owned
            .iter()
            .filter_map(|r| r.metadata.creation_timestamp.clone())
            .min_by_key(|t| t.0)
            .or_else(|| (!decision.start.is_empty()).then_some(Time(now)));
    }
    status.runs = experiment_runs(&plan, &observations);
    status.progress = Some(progress(&observations));
    let (table, best) = comparison(&plan, &observations);
    status.table = table;
    status.best = best;

    // As the table counts them: a run that failed, vanished, or left no summary to compare.
    let failed_runs = observations
        .iter()
        .filter(|o| o.result == RunResult::Failed)
        .count();
    let action = if decision.done {
        // stopOnFailure: the runs that never started are `skipped` in the plan file, and the comparison covers
        // the finished ones; the experiment still fails.
        let stopped = decision.stopped.then(|| {
            let first = plan
                .names
                .iter()
                .zip(&observations)
                .find(|(_, o)| matches!(o.state, RunState::Finished { failed: true, .. }))
                .map(|(n, _)| n.as_str())
                .unwrap_or("a run");
            let skipped = observations
                .iter()
                .filter(|o| o.state == RunState::NotCreated)
                .count();
            format!(
                "BenchmarkRun {first} failed and spec.ordering.stopOnFailure is set: {skipped} of {} run(s) were \
                 not started",
                plan.runs.len()
            )
        });
        match collect(
            experiment,
            &plan,
            &observations,
            endpoint,
            &children,
            ctx,
            now,
        )
        .await?
        {
            Collected::InFlight => {
                status.phase = Some(ExperimentPhase::Collecting);
                let finished_what = match &stopped {
                    Some(why) => format!("{why}; the finished runs"),
                    None => "every run finished".to_owned(),
                };
                set_condition(
                    &mut status.conditions,
                    COMPLETED,
                    false,
                    "Collecting",
                    &format!(
                        "{finished_what} ({failed_runs} failed): collector pod {} is writing the comparison",
                        collector_pod_name(experiment)
                    ),
                    generation,
                    now,
                );
                Action::requeue(RESYNC)
            }
            Collected::Succeeded => {
                let compared = format!(
                    "{} run(s), {failed_runs} failed; the comparison is in {}{}",
                    plan.runs.len(),
                    status.results_path.as_deref().unwrap_or_default(),
                    status
                        .best
                        .as_deref()
                        .map(|b| format!("; best treatment: {b}"))
                        .unwrap_or_default()
                );
                match &stopped {
                    Some(why) => finish(
                        &mut status,
                        false,
                        &format!("{why}. {compared}"),
                        generation,
                        now,
                    ),
                    None => finish(&mut status, true, &compared, generation, now),
                }
                Action::await_change()
            }
            Collected::Failed(why) => {
                finish(
                    &mut status,
                    false,
                    &format!("the comparison could not be written: {why}"),
                    generation,
                    now,
                );
                Action::await_change()
            }
        }
    } else {
        let running = status.start_time.is_some();
        status.phase = Some(if running {
            ExperimentPhase::Running
        } else {
            ExperimentPhase::Pending
        });
        let (reason, message) = match decision.wake_after {
            Some(wait) => (
                "CoolingDown",
                format!(
                    "{} of {} run(s) finished; the next starts after the cool-down, in {}s",
                    finished(&observations),
                    plan.runs.len(),
                    wait.as_secs()
                ),
            ),
            None if running => (
                "Running",
                format!(
                    "{} of {} run(s) finished ({failed_runs} failed)",
                    finished(&observations),
                    plan.runs.len()
                ),
            ),
            None => ("Pending", "no run has started yet".to_owned()),
        };
        set_condition(
            &mut status.conditions,
            COMPLETED,
            false,
            reason,
            &message,
            generation,
            now,
        );
        match decision.wake_after {
            Some(wait) => Action::requeue(wait + Duration::from_millis(250)),
            None => Action::requeue(RESYNC),
        }
    };
    announce_phase(experiment, old.as_ref(), &status, ctx).await;
    write_status(experiment, old.as_ref(), &status, ctx).await?;
    Ok(action)
}

/// Marks the experiment Succeeded or Failed, with `Completed=True` either way so `kubectl wait` returns.
fn finish(
    status: &mut BenchmarkExperimentStatus,
    succeeded: bool,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    status.phase = Some(if succeeded {
        ExperimentPhase::Succeeded
    } else {
        ExperimentPhase::Failed
    });
    status.completion_time.get_or_insert(Time(now));
    set_condition(
        &mut status.conditions,
        COMPLETED,
        true,
        if succeeded { "Succeeded" } else { "Failed" },
        &bounded(message),
        generation,
        now,
    );
}

/// Each planned run as observed: from the owned run of its name, or not created yet, or lost (it existed — an
/// earlier status saw it, or a later run of the plan exists — and is gone).
fn observe_runs(
    plan: &Plan,
    owned: &[BenchmarkRun],
    old: Option<&BenchmarkExperimentStatus>,
) -> Vec<Observation> {
    let by_name: BTreeMap<String, &BenchmarkRun> =
        owned.iter().map(|r| (r.name_any(), r)).collect();
    let seen_before: BTreeMap<&str, bool> = old
        .map(|s| {
            s.runs
                .iter()
                .map(|r| (r.name.as_str(), r.phase.is_some()))
                .collect()
        })
        .unwrap_or_default();
    let last_existing = plan.names.iter().rposition(|n| by_name.contains_key(n));
    plan.names
        .iter()
        .enumerate()
        .map(|(index, name)| match by_name.get(name) {
            Some(run) => observe(run),
            None if last_existing.is_some_and(|last| index < last)
                || seen_before.get(name.as_str()).copied().unwrap_or(false) =>
            {
                Observation::lost()
            }
            None => Observation::not_created(),
        })
        .collect()
}

/// A Warning event for each run that failed (or vanished) since the last status.
async fn announce_run_failures(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    observations: &[Observation],
    old: Option<&BenchmarkExperimentStatus>,
    ctx: &Ctx,
) {
    let before: BTreeMap<&str, Option<&str>> = old
        .map(|s| {
            s.runs
                .iter()
                .map(|r| (r.name.as_str(), r.phase.as_deref()))
                .collect()
        })
        .unwrap_or_default();
    for (name, seen) in plan.names.iter().zip(observations) {
        let now_phase = seen.phase.as_deref();
        if !matches!(now_phase, Some("Failed" | "Lost")) {
            continue;
        }
        if before.get(name.as_str()).copied().flatten() == now_phase {
            continue;
        }
        let continuing = if experiment.spec.ordering.stop_on_failure {
            "stopOnFailure is set: no more runs start"
        } else {
            "the experiment goes on"
        };
        ctx.publish(
            &experiment.object_ref(&()),
            EventType::Warning,
            "RunFailed",
            "ObserveRun",
            &format!(
                "BenchmarkRun {name} {}: {}; {continuing}",
                if now_phase == Some("Lost") {
                    "was lost"
                } else {
                    "failed"
                },
                seen.error.as_deref().unwrap_or("no reason given")
            ),
        )
        .await;
    }
}

/// Calls the experiment's hooks before run `index`; a failed hook becomes a Warning event and its record.
async fn run_hooks(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    index: usize,
    endpoint: Option<&str>,
    ctx: &Ctx,
) -> Vec<HookCall> {
    if experiment.spec.hooks.is_empty() {
        return Vec::new();
    }
    let calls = call_hooks(&ctx.http, &experiment.spec.hooks, endpoint).await;
    let mut hooks = Vec::with_capacity(calls.len());
    for (call, failure) in calls {
        if let Some(failure) = failure {
            ctx.publish(
                &experiment.object_ref(&()),
                EventType::Warning,
                "HookFailed",
                "CallHook",
                &format!(
                    "hook {} before BenchmarkRun {}: {failure}; the run starts anyway",
                    call.name, plan.names[index]
                ),
            )
            .await;
        }
        hooks.push(call);
    }
    hooks
}

/// A Normal or Warning event when the experiment's phase changes.
async fn announce_phase(
    experiment: &BenchmarkExperiment,
    old: Option<&BenchmarkExperimentStatus>,
    status: &BenchmarkExperimentStatus,
    ctx: &Ctx,
) {
    if old.and_then(|s| s.phase) == status.phase {
        return;
    }
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == COMPLETED)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let (type_, reason) = match status.phase {
        Some(ExperimentPhase::Collecting) => (EventType::Normal, "Collecting"),
        Some(ExperimentPhase::Succeeded) => (EventType::Normal, "ExperimentSucceeded"),
        Some(ExperimentPhase::Failed) => (EventType::Warning, "ExperimentFailed"),
        _ => return,
    };
    ctx.publish(
        &experiment.object_ref(&()),
        type_,
        reason,
        "Reconcile",
        &message,
    )
    .await;
}

/// The WorkloadProfile the template references, when it does and it exists.
async fn referenced_profile(
    experiment: &BenchmarkExperiment,
    ctx: &Ctx,
) -> Result<Option<WorkloadProfile>, Error> {
    let Some(reference) = &experiment.spec.template.workload.profile_ref else {
        return Ok(None);
    };
    let api: Api<WorkloadProfile> = Api::namespaced(
        ctx.client.clone(),
        &experiment.namespace().unwrap_or_default(),
    );
    api.get_opt(&reference.name)
        .await
        .map_err(|source| Error::GetProfile {
            experiment: experiment.name_any(),
            name: reference.name.clone(),
            source,
        })
}

/// The experiment cannot start: say why on it and in a Warning event, create nothing, and wait for a change (of
/// the experiment, or of the WorkloadProfile it references). A missing WorkloadProfile keeps it Pending, as it
/// keeps a BenchmarkRun; anything else fails it until the spec is fixed.
async fn invalid_experiment(
    experiment: &BenchmarkExperiment,
    mut status: BenchmarkExperimentStatus,
    invalid: &Invalid,
    ctx: &Ctx,
    now: Timestamp,
) -> Result<Action, Error> {
    let message = bounded(&invalid.to_string());
    let reason = invalid.reason();
    let unchanged = status.conditions.iter().any(|c| {
        c.type_ == VALID && c.status == "False" && c.reason == reason && c.message == message
    });
    let generation = experiment.metadata.generation;
    set_condition(
        &mut status.conditions,
        VALID,
        false,
        reason,
        &message,
        generation,
        now,
    );
    if reason == "ProfileNotFound" {
        status.phase = Some(ExperimentPhase::Pending);
        set_condition(
            &mut status.conditions,
            COMPLETED,
            false,
            "Pending",
            "waiting for the WorkloadProfile the template references; no run was created",
            generation,
            now,
        );
    } else {
        status.phase = Some(ExperimentPhase::Failed);
        set_condition(
            &mut status.conditions,
            COMPLETED,
            true,
            "Failed",
            &format!("the experiment is invalid ({reason}); no run was created"),
            generation,
            now,
        );
    }
    if !unchanged {
        ctx.publish(
            &experiment.object_ref(&()),
            EventType::Warning,
            reason,
            "Validate",
            &message,
        )
        .await;
    }
    let old = experiment.status.clone();
    write_status(experiment, old.as_ref(), &status, ctx).await?;
    Ok(Action::await_change())
}

async fn list_runs(
    experiment: &BenchmarkExperiment,
    children: &Children,
) -> Result<Vec<BenchmarkRun>, Error> {
    children
        .list(&experiment_selector(experiment)?)
        .await
        .map_err(|source| Error::ListRuns {
            experiment: experiment.name_any(),
            source,
        })
}

/// The experiment's runs, plan ConfigMap and collector pod: what it controls by its uid.
fn children_of(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Children {
    Children::new(
        ctx.client.clone(),
        &experiment.namespace().unwrap_or_default(),
        &experiment.uid().unwrap_or_default(),
    )
}

/// Creates `run`; one that already exists is this experiment's only if the experiment controls it.
async fn create_run(
    experiment: &BenchmarkExperiment,
    run: &BenchmarkRun,
    children: &Children,
) -> Result<(), Error> {
    match children.create(run).await {
        Ok(_) => Ok(()),
        Err(ChildError::NotOwned) => Err(Error::RunNameTaken {
            experiment: experiment.name_any(),
            run: run.name_any(),
        }),
        Err(ChildError::Api(source)) => Err(Error::CreateRun {
            experiment: experiment.name_any(),
            run: run.name_any(),
            source,
        }),
    }
}

/// How the collector is doing.
enum Collected {
    InFlight,
    Succeeded,
    Failed(String),
}

/// Every run finished: write the plan file into a ConfigMap and start the collector, or read how it went.
async fn collect(
    experiment: &BenchmarkExperiment,
    plan: &Plan,
    observations: &[Observation],
    endpoint: Option<String>,
    children: &Children,
    ctx: &Ctx,
    now: Timestamp,
) -> Result<Collected, Error> {
    let name = collector_pod_name(experiment);
    let not_owned = |what, name: String| Error::NotOwned {
        experiment: experiment.name_any(),
        what,
        namespace: experiment.namespace().unwrap_or_default(),
        name,
    };
    let collector_err = |source| Error::Collector {
        experiment: experiment.name_any(),
        name: name.clone(),
        source,
    };
    if let Some(pod) = children.get::<Pod>(&name).await.map_err(collector_err)? {
        if !children.controls(&pod.metadata) {
            return Err(not_owned("pod", name));
        }
        return Ok(match pod_outcome(&pod) {
            PodOutcome::Succeeded { .. } => Collected::Succeeded,
            PodOutcome::Failed(mut failure) => {
                failure.detail = failure.detail.replacen("launcher pod", "collector pod", 1);
                Collected::Failed(failure_message(&failure, None))
            }
            PodOutcome::Waiting | PodOutcome::Running => Collected::InFlight,
        });
    }
    // Collection only reads the runs' directories and writes the comparison next to them, so a collector that
    // vanished before it finished is simply started again.
    let file = plan_file(experiment, plan, observations, endpoint, now);
    let json = serde_json::to_string_pretty(&file).map_err(|e| BuildError::Encode {
        experiment: experiment.name_any(),
        what: "the plan file",
        message: e.to_string(),
    })?;
    let plan_name = plan_config_map_name(experiment);
    children
        .apply(&plan_config_map(experiment, &json)?)
        .await
        .map_err(|e| match e {
            ChildError::NotOwned => not_owned("ConfigMap", plan_name.clone()),
            ChildError::Api(source) => Error::ApplyPlan {
                experiment: experiment.name_any(),
                name: plan_name.clone(),
                source,
            },
        })?;
    children
        .create(&collector_pod(experiment, &ctx.launcher)?)
        .await
        .map_err(|e| match e {
            ChildError::NotOwned => not_owned("pod", name.clone()),
            ChildError::Api(source) => collector_err(source),
        })?;
    Ok(Collected::InFlight)
}

/// Server-side applies the whole status, when it changed.
async fn write_status(
    experiment: &BenchmarkExperiment,
    old: Option<&BenchmarkExperimentStatus>,
    status: &BenchmarkExperimentStatus,
    ctx: &Ctx,
) -> Result<(), Error> {
    if old == Some(status) {
        return Ok(());
    }
    let api: Api<BenchmarkExperiment> = Api::namespaced(
        ctx.client.clone(),
        &experiment.namespace().unwrap_or_default(),
    );
    let patch = json!({
        "apiVersion": BenchmarkExperiment::api_version(&()),
        "kind": BenchmarkExperiment::kind(&()),
        "status": status,
    });
    api.patch_status(
        &experiment.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::PatchStatus {
        experiment: experiment.name_any(),
        source,
    })?;
    Ok(())
}

/// The experiment is being deleted: delete its runs (whose own finalizers remove their pods and ConfigMaps), its
/// plan ConfigMap and its collector ourselves — owner references do it only where a garbage collector runs.
/// `kubectl delete --cascade=orphan` keeps them all. The results on the volume are never deleted.
async fn cleanup(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Result<Action, Error> {
    if experiment.finalizers().iter().any(|f| f == "orphan") {
        tracing::info!(experiment = %experiment.name_any(), "deleted with orphan propagation; its runs stay");
        return Ok(Action::await_change());
    }
    let namespace = experiment.namespace().unwrap_or_default();
    let children = children_of(experiment, ctx);
    let delete_err = |what: &'static str, name: String| {
        move |source| Error::Delete {
            experiment: experiment.name_any(),
            what,
            name,
            source,
        }
    };
    // Only what the experiment controls, each only as the very object that was read.
    let runs = list_runs(experiment, &children).await?;
    for run in &runs {
        children
            .delete(run, DeleteParams::background())
            .await
            .map_err(delete_err("BenchmarkRun", run.name_any()))?;
    }
    let pod = collector_pod_name(experiment);
    children
        .delete_named::<Pod>(&pod, DeleteParams::default())
        .await
        .map_err(delete_err("collector pod", pod.clone()))?;
    let cm = plan_config_map_name(experiment);
    children
        .delete_named::<ConfigMap>(&cm, DeleteParams::default())
        .await
        .map_err(delete_err("plan ConfigMap", cm.clone()))?;
    tracing::info!(
        experiment = %experiment.name_any(),
        namespace,
        runs = runs.len(),
        "cleaned up a deleted experiment"
    );
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::experiment::fixtures::{TWO_BY_TWO, experiment};
    use llmbench_api::v1alpha1::{BenchmarkRunStatus, ExperimentRun, Phase};

    fn owned(plan: &Plan, index: usize, phase: Phase) -> BenchmarkRun {
        let exp = experiment(TWO_BY_TWO);
        let mut run =
            experiment_run(&exp, &plan.treatments, &plan.runs[index], &[]).expect("builds");
        run.status = Some(BenchmarkRunStatus {
            phase: Some(phase),
            ..BenchmarkRunStatus::default()
        });
        run
    }

    #[test]
    fn runs_are_matched_to_the_plan_by_name_and_a_vanished_one_is_lost_not_rerun() {
        let plan = validate(&experiment(TWO_BY_TWO), None).expect("valid");
        // Run 0 is gone while run 1 exists: it was created before it, so it is lost.
        let seen = observe_runs(&plan, &[owned(&plan, 1, Phase::Running)], None);
        let phases: Vec<Option<&str>> = seen.iter().map(|o| o.phase.as_deref()).collect();
        assert_eq!(phases, [Some("Lost"), Some("Running"), None, None]);
        // The last created run vanished: only the earlier status knows it existed.
        let old = BenchmarkExperimentStatus {
            runs: vec![ExperimentRun {
                name: plan.names[0].clone(),
                treatment: "rate-5".into(),
                repeat: 1,
                phase: Some("Running".into()),
                hooks: Vec::new(),
            }],
            ..BenchmarkExperimentStatus::default()
        };
        let seen = observe_runs(&plan, &[], Some(&old));
        assert_eq!(seen[0].phase.as_deref(), Some("Lost"));
        assert_eq!(seen[1].state, RunState::NotCreated);
        let fresh = observe_runs(&plan, &[], None);
        assert!(fresh.iter().all(|o| o.state == RunState::NotCreated));
    }

    #[test]
    fn only_an_experiment_that_started_and_ended_is_final() {
        let ended = |phase, started: bool| BenchmarkExperimentStatus {
            phase: Some(phase),
            start_time: started.then(|| Time(Timestamp::now())),
            ..BenchmarkExperimentStatus::default()
        };
        assert!(is_finished(Some(&ended(ExperimentPhase::Succeeded, true))));
        assert!(is_finished(Some(&ended(ExperimentPhase::Failed, true))));
        assert!(
            !is_finished(Some(&ended(ExperimentPhase::Failed, false))),
            "an invalid experiment is looked at again when its spec changes"
        );
        assert!(!is_finished(Some(&ended(ExperimentPhase::Running, true))));
        assert!(!is_finished(None));
    }

    #[test]
    fn long_messages_are_bounded_on_a_char_boundary() {
        let message = "é".repeat(MAX_MESSAGE_BYTES);
        let short = bounded(&message);
        assert!(short.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert_eq!(bounded("fine"), "fine");
    }

    #[tokio::test]
    async fn deleting_an_experiment_removes_only_the_runs_and_objects_it_controls() {
        use crate::reconcile::fixtures::{context, list};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

        let mut exp = experiment(TWO_BY_TWO);
        exp.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        exp.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        let stored = serde_json::to_value(&exp).expect("json");
        let plan = validate(&exp, None).expect("valid");
        let mut ours = serde_json::to_value(owned(&plan, 0, Phase::Running)).expect("json");
        ours["metadata"]["uid"] = json!("run-uid-0");
        // A run that carries the experiment's label but no owner reference to it: someone else's.
        let mut stray = ours.clone();
        stray["metadata"]["name"] = json!("stray");
        stray["metadata"]["ownerReferences"] = json!([]);
        let run_name = ours["metadata"]["name"].as_str().expect("name").to_owned();
        const BASE: &str = "/apis/llmbench.dev/v1alpha1/namespaces/team-a";
        let (ctx, mut api) = context();
        let scenario = tokio::spawn(async move {
            api.expect("GET", &format!("{BASE}/benchmarkexperiments/sweep"))
                .await
                .ok(&stored);
            api.expect("GET", &format!("{BASE}/benchmarkruns"))
                .await
                .ok(&list("BenchmarkRunList", vec![ours.clone(), stray]));
            let delete = api
                .expect("DELETE", &format!("{BASE}/benchmarkruns/{run_name}"))
                .await;
            assert_eq!(delete.body["preconditions"]["uid"], "run-uid-0");
            delete.ok(&ours);
            api.expect("GET", "/api/v1/namespaces/team-a/pods/sweep-collector")
                .await
                .not_found("pods \"sweep-collector\"");
            // A user's ConfigMap under the plan's name stays.
            api.expect("GET", "/api/v1/namespaces/team-a/configmaps/sweep-plan")
                .await
                .ok(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "sweep-plan", "namespace": "team-a", "uid": "users"}}));
            api.expect("PATCH", &format!("{BASE}/benchmarkexperiments/sweep"))
                .await
                .ok(&stored);
            api
        });
        let result = reconcile(Arc::new(exp), ctx.clone()).await;
        assert_eq!(result.expect("cleaned up"), Action::await_change());
        let api = tokio::time::timeout(Duration::from_secs(5), scenario)
            .await
            .expect("every expected request came")
            .expect("the scenario's assertions held");
        drop(ctx);
        tokio::time::timeout(Duration::from_secs(5), api.done())
            .await
            .expect("no other request");
    }
}
