//! An experiment being deleted: its runs, plan ConfigMap and collector removed, only those it controls.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::DeleteParams;
use kube::runtime::controller::Action;
use llmbench_api::v1alpha1::BenchmarkExperiment;

use super::error::Error;
use super::runs::{children_of, list_runs};
use crate::builders::experiment::{collector_pod_name, plan_config_map_name};
use crate::reconcile::Ctx;

/// The experiment is being deleted: delete its runs (whose own finalizers remove their pods and ConfigMaps), its
/// plan ConfigMap and its collector ourselves — owner references do it only where a garbage collector runs.
/// `kubectl delete --cascade=orphan` keeps them all. The results on the volume are never deleted.
pub(super) async fn cleanup(experiment: &BenchmarkExperiment, ctx: &Ctx) -> Result<Action, Error> {
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
