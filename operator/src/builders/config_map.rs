//! The ConfigMap `<run>-profile` that holds the rendered profile the launcher reads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use llmbench_api::v1alpha1::BenchmarkRun;

use super::names::{MAX_OBJECT_NAME, bounded_name};
use super::{BuildError, owner_reference, run_labels};

/// The key (and file name in the pod) of the rendered profile.
pub const PROFILE_FILE: &str = "profile.yaml";

/// `<run>-profile`, shortened with a hash when the run's name is too long for it.
pub fn profile_config_map_name(run: &BenchmarkRun) -> String {
    bounded_name(&format!("{}-profile", run.name_any()), MAX_OBJECT_NAME)
}

/// The ConfigMap holding `rendered`, owned by `run`. `template_name` records where the profile came from.
pub fn profile_config_map(
    run: &BenchmarkRun,
    template_name: &str,
    rendered: &str,
) -> Result<ConfigMap, BuildError> {
    let mut annotations = BTreeMap::new();
    annotations.insert("llmbench.dev/template".to_owned(), template_name.to_owned());
    let mut data = BTreeMap::from([(PROFILE_FILE.to_owned(), rendered.to_owned())]);
    // How the run's standalone stack is started, for the launchers to record (`llmbench run --stack-info`).
    if let Some(stack) = super::stack::standalone(run) {
        data.insert(
            super::stack::STACK_INFO_FILE.to_owned(),
            super::stack::stack_info(run, stack).to_json(),
        );
    }
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(profile_config_map_name(run)),
            namespace: run.namespace(),
            labels: Some(run_labels(run)?),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(run)?]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    })
}

/// The ConfigMaps that keep an emptyDir run's results `archive` (`llmbench_api::results_log`), owned by `run`:
/// `<run>-results-<i>`, each with up to `PART_BYTES` of it under `PART_KEY`.
pub fn results_config_maps(
    run: &BenchmarkRun,
    archive: &[u8],
) -> Result<Vec<ConfigMap>, BuildError> {
    use k8s_openapi::ByteString;
    use llmbench_api::results_log::{PART_BYTES, PART_KEY, part_name};
    archive
        .chunks(PART_BYTES)
        .enumerate()
        .map(|(index, part)| {
            Ok(ConfigMap {
                metadata: ObjectMeta {
                    name: Some(bounded_name(
                        &part_name(&run.name_any(), index),
                        MAX_OBJECT_NAME,
                    )),
                    namespace: run.namespace(),
                    labels: Some(run_labels(run)?),
                    owner_references: Some(vec![owner_reference(run)?]),
                    ..ObjectMeta::default()
                },
                binary_data: Some(BTreeMap::from([(
                    PART_KEY.to_owned(),
                    ByteString(part.to_vec()),
                )])),
                ..ConfigMap::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;

    #[test]
    fn the_profile_config_map_is_named_after_the_run_and_owned_by_it() {
        let run = fixtures::run(fixtures::BASIC);
        let cm = profile_config_map(&run, "inference-perf/sanity_random.yaml.in", "load: {}\n")
            .expect("builds");
        assert_eq!(cm.metadata.name.as_deref(), Some("bench-1-profile"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("team-a"));
        let owner = &cm.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("BenchmarkRun", "bench-1", Some(true))
        );
        let data = cm.data.expect("data");
        assert_eq!(data[PROFILE_FILE], "load: {}\n");
        assert!(
            !data.contains_key(super::super::stack::STACK_INFO_FILE),
            "no stack info without a standalone stack"
        );
    }

    #[test]
    fn a_standalone_runs_config_map_carries_the_stack_info_the_launchers_read() {
        let run = fixtures::run(
            "harness: nop\nworkload:\n  builtin: nop\nstack:\n  model: m\n  standalone:\n    image: sim:1\n    \
             command: [llmbench]\n    args: [sim, --port, '8000']\n",
        );
        let cm = profile_config_map(&run, "nop/nop.yaml.in", "x: 1\n").expect("builds");
        let data = cm.data.expect("data");
        let info: serde_json::Value = serde_json::from_str(&data["stack-info.json"]).expect("JSON");
        // By hand: the image, the given command and args (no extra args), no env.
        assert_eq!(
            info,
            serde_json::json!({"schema": "llmbench.stack-info/v1", "image": "sim:1", "command": ["llmbench"], "args": ["sim", "--port", "8000"], "env": {}})
        );
    }
}
