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
/// Marks a pod group that is never retried: once one of its pods failed and none runs, Kueue counts the group
/// finished and frees its quota. Without it Kueue waits for a replacement pod (it never re-creates one itself), so
/// a failed run — whose launchers llmbench never re-creates — would hold its quota until it is deleted.
pub const RETRIABLE_IN_GROUP_ANNOTATION: &str = "kueue.x-k8s.io/retriable-in-group";
/// The scheduling gate Kueue removes on admission.
pub const ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

/// The LocalQueue the run is submitted to, if it is queued.
pub fn queue_of(run: &BenchmarkRun) -> Option<&str> {
    run.labels()
        .get(QUEUE_LABEL)
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// Makes `pod` one of the run's queued pod group of `count`: labels, annotations and the admission gate, as
/// Kueue's plain-pod integration reads them (`pkg/controller/jobs/pod/constants`; the webhook adds the gate
/// itself, but a pod made with it is gated even before the webhook or without one).
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
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(POD_GROUP_COUNT_ANNOTATION.to_owned(), count.to_string());
    annotations.insert(RETRIABLE_IN_GROUP_ANNOTATION.to_owned(), "false".to_owned());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{LauncherDefaults, LauncherSettings, fixtures, launcher_pod};

    #[test]
    fn a_queued_runs_launchers_are_one_gated_pod_group_that_is_never_retried() {
        let mut run = fixtures::run(&format!("{}launcher:\n  parallelism: 3\n", fixtures::BASIC));
        run.metadata.labels = Some(BTreeMap::from([(QUEUE_LABEL.to_owned(), "gpu".to_owned())]));
        let settings = LauncherSettings {
            image: "llmbench:test".to_owned(),
            image_pull_policy: None,
            defaults: LauncherDefaults::default(),
        };
        let pods: Vec<Pod> = (0..3)
            .map(|i| launcher_pod(&run, i, &settings).expect("builds"))
            .collect();
        for pod in &pods {
            assert_eq!(pod.labels()[QUEUE_LABEL], "gpu");
            assert_eq!(pod.labels()[POD_GROUP_LABEL], "bench-1-0f3c9a2e");
            assert_eq!(pod.annotations()[POD_GROUP_COUNT_ANNOTATION], "3");
            assert_eq!(pod.annotations()[RETRIABLE_IN_GROUP_ANNOTATION], "false");
            assert!(is_gated(pod));
            let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.clone());
            assert_eq!(
                gates,
                Some(vec![PodSchedulingGate {
                    name: ADMISSION_GATE.to_owned()
                }])
            );
        }
        // Not queued: no group, no gate.
        let plain = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings).expect("builds");
        assert!(!is_gated(&plain));
        assert!(!plain.labels().contains_key(POD_GROUP_LABEL));
    }
}
