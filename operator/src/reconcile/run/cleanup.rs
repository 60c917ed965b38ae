//! A run being deleted: its pods, ConfigMap and stack removed, only those it controls.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::DeleteParams;
use kube::runtime::controller::Action;
use llmbench_api::v1alpha1::BenchmarkRun;

use super::children_of;
use super::error::Error;
use super::launchers::{delete_pods, list_all_pods};
use super::standalone_stack::teardown_stack;
use crate::builders::profile_config_map_name;
use crate::reconcile::children::Removal;
use crate::reconcile::{Ctx, retry_key};

/// The run is being deleted: remove its pods and ConfigMap ourselves (owner references do it only where a
/// garbage collector runs), only those it controls. The PVC stays: it holds every run's results.
pub(super) async fn cleanup(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
    let namespace = run.namespace().unwrap_or_default();
    let children = children_of(run, ctx)?;
    let pods = list_all_pods(run, &children).await?;
    delete_pods(run, &pods, &children).await?;
    let name = profile_config_map_name(run);
    let removal = children
        .delete_named::<ConfigMap>(&name, DeleteParams::default())
        .await
        .map_err(|source| Error::DeleteConfigMap {
            run: run.name_any(),
            name: name.clone(),
            source,
        })?;
    if removal == Removal::NotOwned {
        tracing::info!(run = %run.name_any(), config_map = name, "the ConfigMap of the run's profile name is not the run's; left alone");
    }
    teardown_stack(run, ctx, true).await?;
    ctx.metrics.forget_run_results(&namespace, &run.name_any());
    ctx.retries.succeeded(&retry_key(run));
    tracing::info!(run = %run.name_any(), namespace, pods = pods.len(), "cleaned up a deleted run");
    Ok(Action::await_change())
}
