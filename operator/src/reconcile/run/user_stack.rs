//! A stack the user deployed (stack.endpoint or stack.serviceRef, the common llm-d case): what only its serving
//! pods' logs tell — the nop harness's model-load times — read from the pods `stack.pods.selector` picks, or by
//! default those the selector of stack.serviceRef's Service picks, in their `stack.pods.container` (default the
//! first). The operator needs nothing more than it has for its own pods: `get` on services, `list` on pods and
//! `get` on pods/log, in the run's namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, ListParams, LogParams};
use llmbench_api::summary::v1::ModelLoad;
use llmbench_api::v1alpha1::BenchmarkRun;

use super::standalone_stack::STACK_LOG_LIMIT_BYTES;

/// Serving pods read at most: a stack of more replicas has them all loaded alike, and each log is read whole.
const MAX_PODS: usize = 16;

/// The model-load figures of a user-deployed stack's serving pods: the first pod's by name, with a note of every
/// pod read (or why none was). `Err` says why nothing was read.
pub(super) async fn model_load(
    run: &BenchmarkRun,
    client: &kube::Client,
    year: i32,
) -> Result<(ModelLoad, String), String> {
    let namespace = run.namespace().unwrap_or_default();
    let stack = &run.spec.stack;
    let selector = match (&stack.pods, &stack.service_ref) {
        (Some(pods), _) if !pods.selector.is_empty() => pods.selector.clone(),
        (_, Some(service)) => {
            let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
            let found = services
                .get(&service.name)
                .await
                .map_err(|e| format!("cannot read Service {}: {e}", service.name))?;
            let selector = found
                .spec
                .and_then(|s| s.selector)
                .filter(|s| !s.is_empty());
            selector.ok_or_else(|| {
                format!(
                    "Service {} selects no pods: name the serving pods with stack.pods.selector",
                    service.name
                )
            })?
        }
        _ => {
            return Err(
                "the stack is an endpoint: name its serving pods with stack.pods.selector"
                    .to_owned(),
            );
        }
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let mut found = pods
        .list(&ListParams::default().labels(&label_selector(&selector)))
        .await
        .map_err(|e| format!("cannot list the stack's pods: {e}"))?
        .items;
    if found.is_empty() {
        return Err(format!(
            "no pod in {namespace} has the labels {}",
            label_selector(&selector)
        ));
    }
    found.sort_by_key(|p| p.name_any());
    let container = stack.pods.as_ref().and_then(|p| p.container.clone());
    let mut loads = Vec::new();
    let mut unread = Vec::new();
    for pod in found.iter().take(MAX_PODS) {
        let name = pod.name_any();
        // The named container, else the pod's first (the log API's own default needs a pod of one container).
        let Some(container) = container.clone().or_else(|| {
            let spec = pod.spec.as_ref()?;
            Some(spec.containers.first()?.name.clone())
        }) else {
            unread.push(format!("pod {name} has no container"));
            continue;
        };
        let params = LogParams {
            container: Some(container.clone()),
            limit_bytes: Some(STACK_LOG_LIMIT_BYTES),
            ..LogParams::default()
        };
        let read = match pods.logs(&name, &params).await {
            Ok(log) => crate::stack::model_load(&log, &name, &container, &stack.model, year),
            Err(e) => Err(format!("cannot read the log of pod {name}: {e}")),
        };
        match read {
            Ok(load) => loads.push(load),
            Err(why) => unread.push(why),
        }
    }
    let note = note(&loads, &unread, found.len());
    match loads.into_iter().next() {
        Some(first) => Ok((first, note)),
        None => Err(note),
    }
}

/// `key=value,…`, as a list call's labelSelector takes matchLabels.
fn label_selector(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the event says: each pod's load time, the pods not read and why, and those past [`MAX_PODS`].
fn note(loads: &[ModelLoad], unread: &[String], pods: usize) -> String {
    let mut parts: Vec<String> = loads
        .iter()
        .map(|l| format!("{} loaded the model in {:.1} s", l.name, l.load_seconds))
        .collect();
    parts.extend(unread.iter().cloned());
    if pods > MAX_PODS {
        parts.push(format!("{} more pods not read", pods - MAX_PODS));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_labels_become_a_label_selector() {
        let labels: BTreeMap<String, String> = [
            ("app".to_owned(), "vllm".to_owned()),
            ("llm-d.ai/role".to_owned(), "decode".to_owned()),
        ]
        .into();
        assert_eq!(label_selector(&labels), "app=vllm,llm-d.ai/role=decode");
    }

    #[test]
    fn the_note_names_each_pod_read_and_why_others_were_not() {
        let load = |name: &str, seconds: f64| ModelLoad {
            name: name.to_owned(),
            load_seconds: seconds,
            ..ModelLoad::default()
        };
        assert_eq!(
            note(
                &[load("vllm-0 vllm", 20.44), load("vllm-1 vllm", 21.0)],
                &["cannot read the log of pod vllm-2: forbidden".to_owned()],
                20
            ),
            "vllm-0 vllm loaded the model in 20.4 s; vllm-1 vllm loaded the model in 21.0 s; cannot read the \
             log of pod vllm-2: forbidden; 4 more pods not read"
        );
    }
}
