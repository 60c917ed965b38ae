//! Kueue, as GPU clusters that run llm-d usually admit their workloads: a BenchmarkRun labelled with
//! `kueue.x-k8s.io/queue-name` has its launcher pods made as one Kueue pod group (Kueue's plain-pod integration:
//! the group label and total-count annotation), each created behind Kueue's admission scheduling gate. Kueue admits
//! the group as one workload and removes the gates of all its pods together, so the shards start together or not
//! at all; until then the run is Pending/Queued, and neither its timeout nor its launchers' start timeout runs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use kube::ResourceExt;
use llmbench_api::v1alpha1::BenchmarkRun;

use super::BuildError;
use super::names::{MAX_LABEL_VALUE, bounded_name};
use super::uid;

/// The label that names the LocalQueue a workload is submitted to.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// The label that makes pods one Kueue pod group.
pub const POD_GROUP_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// How many pods the group has: Kueue admits it once all are there.
pub const POD_GROUP_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
/// The scheduling gate Kueue removes on admission.
pub const ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

/// The LocalQueue the run is submitted to, if it is queued.
pub fn queue_of(run: &BenchmarkRun) -> Option<&str> {
    run.labels()
        .get(QUEUE_LABEL)
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// Makes `pod` one of the run's queued pod group of `count`: labels, annotation and the admission gate.
pub fn queue_pod(
    pod: &mut Pod,
    run: &BenchmarkRun,
    queue: &str,
    count: u32,
) -> Result<(), BuildError> {
    let group = bounded_name(
        &format!(
            "{}-{}",
            run.name_any(),
            uid(run)?.chars().take(8).collect::<String>()
        ),
        MAX_LABEL_VALUE,
    );
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(QUEUE_LABEL.to_owned(), queue.to_owned());
    labels.insert(POD_GROUP_LABEL.to_owned(), group);
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_GROUP_COUNT_ANNOTATION.to_owned(), count.to_string());
    if let Some(spec) = pod.spec.as_mut() {
        spec.scheduling_gates = Some(vec![PodSchedulingGate {
            name: ADMISSION_GATE.to_owned(),
        }]);
    }
    Ok(())
}

/// Whether `pod` still waits behind a scheduling gate (Kueue's, or anyone's): not admitted yet.
pub fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| !gates.is_empty())
}
