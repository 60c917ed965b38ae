//! The controllers: thin shells that read the cluster, call the pure builders and status functions, and write
//! back with server-side apply under one field manager. Nothing that decides what to do is remembered between
//! reconciles; only when to retry a failing object and which Warning events went out lately (`retry`). Every
//! object a reconciler owns is made, found and removed through one child manager (`children`).

mod children;
mod experiment;
mod profile;
mod release;
pub(crate) mod retry;
mod run;

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, ResourceExt};

use crate::builders::LauncherSettings;
use crate::metrics::Metrics;

/// Wake a little after a deadline (a run's timeout, a TTL) rather than a little before it.
pub(crate) const DEADLINE_SLACK: std::time::Duration = std::time::Duration::from_millis(500);

/// What every reconcile needs, shared as `Arc`.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub launcher: LauncherSettings,
    /// For experiment hooks: HTTP calls on the stack between runs.
    pub http: reqwest::Client,
    /// Failing objects' backoff and the rate limit of their Warning events, by uid.
    pub retries: retry::Retries,
    /// How long finished runs and experiments are kept when their spec sets no `ttlSecondsAfterFinished`
    /// (`--ttl-seconds-after-finished`, the chart's `ttlSecondsAfterFinished`); `None` keeps them.
    pub ttl_after_finished: Option<std::time::Duration>,
}

impl Context {
    /// Publishes an event about `object`. A failure is logged, never fatal: events are for humans.
    pub async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        // The events API bounds a note to 1 KiB.
        let mut note = note.to_owned();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push('…');
        }
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, object).await {
            tracing::warn!(
                reason,
                object = object.name.as_deref().unwrap_or_default(),
                error = %e,
                "cannot publish event"
            );
        }
    }
}

/// The shared context type.
pub type Ctx = Arc<Context>;

/// How to tell a reconcile error: a short machine reason for conditions and events (`CreatePodFailed`).
pub trait Reason {
    fn reason(&self) -> &'static str;
}

/// The metrics' `action` label of a failed reconcile, derived from its reason so the two cannot disagree: snake
/// case without the `Failed` suffix (`CreatePodFailed` → `create_pod`, `ConfigMapNotOwned` → `config_map_not_owned`).
pub(crate) fn action_of(reason: &str) -> String {
    let stem = reason.strip_suffix("Failed").unwrap_or(reason);
    let mut action = String::with_capacity(stem.len() + 4);
    for (i, c) in stem.char_indices() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                action.push('_');
            }
            action.push(c.to_ascii_lowercase());
        } else {
            action.push(c);
        }
    }
    action
}

/// The key of `object` in [`retry::Retries`]: its uid, unique across kinds and re-creations.
pub(crate) fn retry_key<K: kube::Resource>(object: &K) -> String {
    object.meta().uid.clone().unwrap_or_else(|| {
        format!(
            "{}/{}",
            object.meta().namespace.as_deref().unwrap_or_default(),
            object.meta().name.as_deref().unwrap_or_default()
        )
    })
}

/// Publishes a Warning event about `object` for a failed reconcile, unless one with the same reason went out
/// for it within [`retry::EVENT_INTERVAL`].
pub(crate) async fn warn_failed<K>(object: &K, reason: &str, message: &str, ctx: &Context)
where
    K: kube::Resource<DynamicType = ()>,
{
    if ctx.retries.may_publish(&retry_key(object), reason) {
        ctx.publish(
            &object.object_ref(&()),
            EventType::Warning,
            reason,
            "Reconcile",
            message,
        )
        .await;
    }
}

/// The reconciler's own error inside the finalizer's wrapping (its apply or cleanup failed), if that is what it is.
pub(crate) fn own_error<E>(error: &kube::runtime::finalizer::Error<E>) -> Option<&E>
where
    E: std::error::Error + 'static,
{
    use kube::runtime::finalizer::Error;
    match error {
        Error::ApplyFailed(e) | Error::CleanupFailed(e) => Some(e),
        _ => None,
    }
}

/// Server-side applies `status` as the whole status of `object` under the operator's field manager.
/// A finished run or experiment whose TTL is due is deleted (its finalizer then removes its pods and objects; the
/// results on the PVC stay); one whose TTL is still running is looked at again when it is due.
pub(crate) async fn expire_after_ttl<K>(
    object: &K,
    left: Option<std::time::Duration>,
    results: &str,
    ctx: &Context,
) -> Result<kube::runtime::controller::Action, kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    use kube::runtime::controller::Action;
    match left {
        None => Ok(Action::await_change()),
        Some(left) if !left.is_zero() => Ok(Action::requeue(left + DEADLINE_SLACK)),
        Some(_) => {
            let kind = K::kind(&());
            let note = format!("{kind} deleted: its ttlSecondsAfterFinished passed; {results}");
            ctx.publish(
                &object.object_ref(&()),
                EventType::Normal,
                "Expired",
                "Delete",
                &note,
            )
            .await;
            let api: Api<K> =
                Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
            match api
                .delete(&object.name_any(), &kube::api::DeleteParams::background())
                .await
            {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(status)) if status.is_not_found() => {
                    Ok(Action::await_change())
                }
                Err(e) => Err(e),
            }
        }
    }
}

pub(crate) async fn apply_status<K>(
    client: &Client,
    object: &K,
    status: &impl serde::Serialize,
) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &object.name_any(),
        &PatchParams::apply(crate::builders::FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// Whether `e` is the API's 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

/// Whether `e` is the API's 409 AlreadyExists.
pub(crate) fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_already_exists())
}

/// The controllers' caches, for the metrics endpoint to count objects by phase.
pub struct Stores {
    pub runs: kube::runtime::reflector::Store<llmbench_api::v1alpha1::BenchmarkRun>,
    pub experiments: kube::runtime::reflector::Store<llmbench_api::v1alpha1::BenchmarkExperiment>,
}

/// The default of how many objects each controller reconciles at once.
pub const DEFAULT_CONCURRENCY: u16 = 8;

/// Runs the three controllers until `shutdown` resolves. `namespace` limits the watch; `None` watches every
/// namespace. Each controller reconciles at most `concurrency` objects at once (0: no bound). `synced` is called
/// once the BenchmarkRun cache has its first full list; `store_sink` receives the run and experiment caches so the
/// metrics endpoint can count them by phase.
pub async fn run_controllers(
    ctx: Ctx,
    namespace: Option<&str>,
    concurrency: u16,
    shutdown: impl std::future::Future + Send + Sync + Clone + 'static,
    synced: impl FnOnce() + Send + 'static,
    store_sink: impl FnOnce(Stores),
) {
    use futures_util::{FutureExt, StreamExt};
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::{Controller, watcher};
    use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkRun, WorkloadProfile};

    fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }

    /// Only our objects: the label every object the operator makes carries.
    fn ours() -> watcher::Config {
        watcher::Config::default().labels(&format!(
            "app.kubernetes.io/managed-by={}",
            crate::builders::FIELD_MANAGER
        ))
    }

    /// The objects in `store` whose WorkloadProfile reference (`profile_ref`) names `profile`.
    fn referencing_profile<K>(
        store: &kube::runtime::reflector::Store<K>,
        profile: &WorkloadProfile,
        profile_ref: impl Fn(&K) -> Option<&llmbench_api::v1alpha1::ProfileRef>,
    ) -> Vec<ObjectRef<K>>
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let name = profile.name_any();
        let namespace = profile.namespace();
        store
            .state()
            .into_iter()
            .filter(|object| {
                object.namespace() == namespace
                    && profile_ref(object).is_some_and(|r| r.name == name)
            })
            .map(|object| ObjectRef::from_obj(object.as_ref()))
            .collect()
    }

    let client = ctx.client.clone();
    let runs: Api<BenchmarkRun> = api(&client, namespace);
    let pods: Api<Pod> = api(&client, namespace);
    let profiles: Api<WorkloadProfile> = api(&client, namespace);

    let experiments: Api<BenchmarkExperiment> = api(&client, namespace);

    // Bounded, so a burst of objects (an operator restart over thousands of runs) does not open as many
    // requests to the API server at once.
    let config = || kube::runtime::controller::Config::default().concurrency(concurrency);
    let run_controller = Controller::new(runs.clone(), watcher::Config::default().any_semantic())
        .with_config(config());
    let store = run_controller.store();
    let experiment_controller =
        Controller::new(experiments, watcher::Config::default().any_semantic())
            .with_config(config());
    let experiment_store = experiment_controller.store();
    store_sink(Stores {
        runs: store.clone(),
        experiments: experiment_store.clone(),
    });
    let waiting_store = store.clone();
    tokio::spawn(async move {
        // The readiness signal keeps one waker, and the controller itself waits on it too; polling again each
        // second makes sure this task sees it.
        loop {
            match tokio::time::timeout(
                std::time::Duration::from_secs(1),
                waiting_store.wait_until_ready(),
            )
            .await
            {
                Ok(Ok(())) => {
                    synced();
                    return;
                }
                Ok(Err(_)) => return,
                Err(_) => continue,
            }
        }
    });
    let referencing = store.clone();
    let run_controller = run_controller
        // Only our pods: the label every launcher carries.
        .owns(pods.clone(), ours())
        // Standalone stacks: a Deployment that becomes available starts the launchers, one that stops being
        // available is the heartbeat failing.
        .owns(
            api::<k8s_openapi::api::apps::v1::Deployment>(&client, namespace),
            ours(),
        )
        // A WorkloadProfile that appears or changes wakes the runs that reference it (e.g. ProfileNotFound).
        .watches(
            profiles.clone(),
            watcher::Config::default(),
            move |profile| {
                referencing_profile(&referencing, &profile, |run: &BenchmarkRun| {
                    run.spec.workload.profile_ref.as_ref()
                })
            },
        )
        .graceful_shutdown_on(shutdown.clone().map(|_| ()))
        .run(run::reconcile, run::error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "BenchmarkRun controller event");
            }
        });
    let referencing = experiment_store.clone();
    let experiment_controller = experiment_controller
        // Its runs: any change of a run's status may finish it, start the next or fill the table.
        .owns(
            runs,
            watcher::Config::default().labels(crate::builders::experiment::EXPERIMENT_UID_LABEL),
        )
        // Its collector pod.
        .owns(pods, ours())
        // A WorkloadProfile that appears or changes wakes the experiments whose template references it.
        .watches(
            profiles.clone(),
            watcher::Config::default(),
            move |profile| {
                referencing_profile(
                    &referencing,
                    &profile,
                    |experiment: &BenchmarkExperiment| {
                        experiment.spec.template.workload.profile_ref.as_ref()
                    },
                )
            },
        )
        .graceful_shutdown_on(shutdown.clone().map(|_| ()))
        .run(experiment::reconcile, experiment::error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "BenchmarkExperiment controller event");
            }
        });
    let profile_controller = Controller::new(profiles, watcher::Config::default().any_semantic())
        .with_config(config())
        .graceful_shutdown_on(shutdown.map(|_| ()))
        .run(profile::reconcile, profile::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "WorkloadProfile controller event");
            }
        });
    futures_util::future::join3(run_controller, experiment_controller, profile_controller).await;
}

#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod action_tests {
    use super::action_of;

    #[test]
    fn the_metrics_action_is_the_reason_in_snake_case_without_failed() {
        assert_eq!(action_of("CreatePodFailed"), "create_pod");
        assert_eq!(action_of("ConfigMapNotOwned"), "config_map_not_owned");
        assert_eq!(action_of("MissingNamespace"), "missing_namespace");
        assert_eq!(action_of("BuildFailed"), "build");
        assert_eq!(action_of("PatchStatusFailed"), "patch_status");
    }
}
