//! The workload PVC: created if absent, reused if present, never owned by a run (so never deleted with it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use llmbench_api::v1alpha1::{BenchmarkRun, DEFAULT_PVC_NAME, DEFAULT_PVC_SIZE, PvcSpec};

/// The PVC `run` writes to, or `None` when it uses an emptyDir. Deliberately without an owner reference: the
/// claim holds every run's results and outlives them. A run naming no storage class gets `default_class` (the
/// chart's `launcher.defaults.storageClassName`), else the cluster's default class.
pub fn workload_pvc(
    run: &BenchmarkRun,
    default_class: Option<&str>,
) -> Option<PersistentVolumeClaim> {
    let storage = &run.spec.storage;
    if storage.pvc.is_none() && storage.empty_dir.is_some() {
        return None;
    }
    let default = PvcSpec {
        name: DEFAULT_PVC_NAME.to_owned(),
        size: DEFAULT_PVC_SIZE.to_owned(),
        storage_class_name: None,
        access_modes: Vec::new(),
    };
    let pvc = storage.pvc.as_ref().unwrap_or(&default);
    let access_modes = if pvc.access_modes.is_empty() {
        vec!["ReadWriteOnce".to_owned()]
    } else {
        pvc.access_modes.clone()
    };
    Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(pvc.name.clone()),
            namespace: run.namespace(),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_owned(), "llmbench".to_owned()),
                (
                    "app.kubernetes.io/component".to_owned(),
                    "workload-storage".to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(access_modes),
            storage_class_name: pvc
                .storage_class_name
                .clone()
                .or_else(|| default_class.map(str::to_owned)),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(pvc.size.clone()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;

    #[test]
    fn the_default_claim_is_workload_pvc_of_20gi_and_has_no_owner() {
        let pvc = workload_pvc(&fixtures::run(fixtures::BASIC), None).expect("a claim");
        assert_eq!(pvc.metadata.name.as_deref(), Some("workload-pvc"));
        assert!(
            pvc.metadata.owner_references.is_none(),
            "the claim outlives the run"
        );
        let spec = pvc.spec.expect("spec");
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
        assert_eq!(
            spec.resources.and_then(|r| r.requests).expect("requests")["storage"],
            Quantity("20Gi".to_owned())
        );
    }

    #[test]
    fn a_named_claim_keeps_its_class_size_and_modes() {
        let run = fixtures::run(&format!(
            "{}storage:\n  pvc:\n    name: results\n    size: 100Gi\n    storageClassName: fast\n    accessModes: [ReadWriteMany]\n",
            fixtures::BASIC
        ));
        let pvc = workload_pvc(&run, None).expect("a claim");
        assert_eq!(pvc.metadata.name.as_deref(), Some("results"));
        let spec = pvc.spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteMany".to_owned()]));
    }

    #[test]
    fn the_charts_default_class_applies_only_where_the_run_names_none() {
        let pvc =
            workload_pvc(&fixtures::run(fixtures::BASIC), Some("bench-ssd")).expect("a claim");
        assert_eq!(
            pvc.spec.and_then(|s| s.storage_class_name).as_deref(),
            Some("bench-ssd")
        );
        let named = fixtures::run(&format!(
            "{}storage:\n  pvc:\n    name: results\n    size: 1Gi\n    storageClassName: fast\n",
            fixtures::BASIC
        ));
        let pvc = workload_pvc(&named, Some("bench-ssd")).expect("a claim");
        assert_eq!(
            pvc.spec.and_then(|s| s.storage_class_name).as_deref(),
            Some("fast")
        );
    }

    #[test]
    fn an_empty_dir_run_needs_no_claim() {
        let run = fixtures::run(&format!("{}storage:\n  emptyDir: {{}}\n", fixtures::BASIC));
        assert!(workload_pvc(&run, Some("fast")).is_none());
    }
}
