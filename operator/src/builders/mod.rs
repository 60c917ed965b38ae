//! Pure builders: the desired ConfigMap, PVC and launcher pods of a BenchmarkRun, and the runs, plan ConfigMap and
//! collector pod of a BenchmarkExperiment. No client, no I/O; tested with plain objects.

mod config_map;
mod defaults;
pub(crate) mod experiment;
pub(crate) mod kueue;
pub(crate) mod names;
mod pod;
mod pvc;
pub(crate) mod stack;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use llmbench_api::v1alpha1::BenchmarkRun;

pub use config_map::{
    PROFILE_FILE, profile_config_map, profile_config_map_name, results_config_maps,
};
pub use defaults::{LAUNCHER_DEFAULTS_ENV, LauncherDefaults};
pub use pod::{
    LAUNCHER_INDEX_LABEL, LAUNCHER_METRICS_PORT, LauncherSettings, PROFILE_MOUNT_PATH, PodParts,
    colocate_shards, launcher_pod, launcher_pod_name, llmbench_pod, merge_pod, merge_pod_name,
    needs_merge, needs_preflight, preflight_pod, preflight_pod_name, run_id, shards_share_a_node,
};
pub use pvc::workload_pvc;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "llmbench-operator";
/// Label carrying the run's name on everything the run owns; a name longer than a label value may be is
/// shortened with a hash (see [`names::label_value`]), so select by [`RUN_UID_LABEL`].
pub const RUN_LABEL: &str = "llmbench.dev/run";
/// The label that says what part a pod plays: `launcher` (launchers, the merge and collector pods), `preflight`.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// The component of a run's pre-flight pod.
pub const PREFLIGHT_COMPONENT: &str = "preflight";
/// Label carrying the run's UID, so two runs of the same name over time never see each other's pods.
pub const RUN_UID_LABEL: &str = "llmbench.dev/run-uid";

/// Why a desired object could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BuildError {
    #[error(
        "BenchmarkRun {run} has no {field} yet; it must be read from the API server before it is built on"
    )]
    MissingMetadata { run: String, field: &'static str },
    #[error(
        "BenchmarkRun {run}: spec.launcher.parallelism is {parallelism}; it must be at least 1"
    )]
    Parallelism { run: String, parallelism: i32 },
    #[error(
        "BenchmarkRun {run}: spec.capacitySearch cannot be encoded for the launcher: {message}"
    )]
    CapacitySearch { run: String, message: String },
    #[error(
        "BenchmarkExperiment {experiment} has no {field} yet; it must be read from the API server before it is built on"
    )]
    ExperimentMetadata {
        experiment: String,
        field: &'static str,
    },
    #[error("BenchmarkRun {run}: spec.launcher.startTimeout: {message}")]
    StartTimeout { run: String, message: String },
    #[error("BenchmarkExperiment {experiment}: cannot encode {what}: {message}")]
    Encode {
        experiment: String,
        what: &'static str,
        message: String,
    },
}

/// The placeholder values of `run` (see `BenchmarkRunSpec::render_values`), with a standalone stack's Service URL
/// as the endpoint unless the run's own `env` sets one.
pub fn run_values(run: &BenchmarkRun) -> BTreeMap<String, String> {
    let namespace = run.namespace().unwrap_or_default();
    let mut values = run.spec.render_values(&namespace);
    if let Some(stack) = stack::standalone(run) {
        values
            .entry(llmbench_api::render::well_known::ENDPOINT_URL.to_owned())
            .or_insert_with(|| stack::stack_url(run, stack));
    }
    values
}

/// Labels unique to `run`: selecting by them finds this run's pods and nothing else.
pub fn run_labels(run: &BenchmarkRun) -> Result<BTreeMap<String, String>, BuildError> {
    let uid = uid(run)?;
    Ok(BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "llmbench".to_owned()),
        (COMPONENT_LABEL.to_owned(), "launcher".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            FIELD_MANAGER.to_owned(),
        ),
        (RUN_LABEL.to_owned(), names::label_value(&run.name_any())),
        (RUN_UID_LABEL.to_owned(), uid.to_owned()),
    ]))
}

/// The label selector of a run's pods.
pub fn run_selector(run: &BenchmarkRun) -> Result<String, BuildError> {
    Ok(format!("{RUN_UID_LABEL}={}", uid(run)?))
}

/// The run's UID, which everything it owns carries in its controller owner reference.
pub fn uid(run: &BenchmarkRun) -> Result<&str, BuildError> {
    run.meta()
        .uid
        .as_deref()
        .ok_or_else(|| BuildError::MissingMetadata {
            run: run.name_any(),
            field: "metadata.uid",
        })
}

/// A controller owner reference to `run`, so its objects are garbage-collected with it.
pub fn owner_reference(run: &BenchmarkRun) -> Result<OwnerReference, BuildError> {
    run.controller_owner_ref(&())
        .ok_or_else(|| BuildError::MissingMetadata {
            run: run.name_any(),
            field: "metadata.uid",
        })
}

#[cfg(test)]
pub(crate) mod fixtures {
    use llmbench_api::v1alpha1::{BenchmarkRun, BenchmarkRunSpec};

    /// A run as the API server returns it, from inline YAML.
    pub fn run(spec_yaml: &str) -> BenchmarkRun {
        let spec: BenchmarkRunSpec =
            serde_saphyr::from_str(spec_yaml).expect("fixture spec is valid");
        let mut run = BenchmarkRun::new("bench-1", spec);
        run.metadata.namespace = Some("team-a".to_owned());
        run.metadata.uid = Some("0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab".to_owned());
        run
    }

    pub const BASIC: &str = "
harness: inference-perf
workload:
  builtin: sanity_random
stack:
  endpoint: http://vllm.llm-d.svc:8000
  model: meta-llama/Llama-3.1-8B-Instruct
";
}
