//! A run being deleted: its pods, ConfigMap and stack removed, only those it controls.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use llmbench_api::v1alpha1::BenchmarkRun;

use super::error::Error;
use super::launchers::{delete_pods, list_pods};
use super::standalone_stack::teardown_stack;
use super::{is_conflict, only_this};
use crate::builders::names::controlled_by;
use crate::builders::{self, profile_config_map_name};
use crate::reconcile::{Ctx, is_not_found, retry_key};

/// The run is being deleted: remove its pods and ConfigMap ourselves (owner references do it only where a
/// garbage collector runs), only those it controls. The PVC stays: it holds every run's results.
pub(super) async fn cleanup(run: &BenchmarkRun, ctx: &Ctx) -> Result<Action, Error> {
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
