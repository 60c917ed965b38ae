//! Pure builders for a BenchmarkExperiment: the names and labels of what it owns, its owned BenchmarkRuns (the
//! template with a treatment's overrides and a results directory below the experiment's), the ConfigMap holding
//! its plan file, and the collector pod that writes the comparison.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use llmbench_api::experiment::{PlannedRun, ResolvedTreatment, run_overrides};
use llmbench_api::v1alpha1::{
    BenchmarkExperiment, BenchmarkRun, BenchmarkRunSpec, CacheState, WORKLOAD_MOUNT_PATH,
};

use super::names::MAX_OBJECT_NAME;
pub use super::names::bounded_name;
use super::{BuildError, FIELD_MANAGER, LauncherSettings, PodParts, llmbench_pod};
use crate::hook_call::HookCall;

/// Label with the experiment's name (shortened to a label value) on everything it owns.
pub const EXPERIMENT_LABEL: &str = "llmbench.dev/experiment";
/// Label with the experiment's UID: selecting by it finds this experiment's objects and no namesake's.
pub const EXPERIMENT_UID_LABEL: &str = "llmbench.dev/experiment-uid";
/// Label with a run's treatment.
pub const TREATMENT_LABEL: &str = "llmbench.dev/treatment";
/// Label with a run's repeat, 1-based.
pub const REPEAT_LABEL: &str = "llmbench.dev/repeat";
/// Annotation on a run: the hooks called right before it was created and how each went, as a JSON list.
pub const HOOKS_ANNOTATION: &str = "llmbench.dev/hooks";
/// Where the collector mounts the plan ConfigMap.
pub const PLAN_MOUNT_PATH: &str = "/etc/llmbench";
/// The key (and file name in the collector) of the plan.
pub const PLAN_FILE: &str = "experiment.json";
/// The longest name a run of an experiment is given: short enough to be a label value as it is.
pub const MAX_RUN_NAME: usize = super::names::MAX_LABEL_VALUE;
/// The longest results directory a run may have (BenchmarkRun.spec.resultsDir's bound).
pub const MAX_RESULTS_DIR: usize = 253;

/// The name of the run of `planned`: `<experiment>-<treatment>-r<repeat>`, shortened to 63 characters.
pub fn experiment_run_name(experiment: &str, dir_name: &str) -> String {
    bounded_name(&format!("{experiment}-{dir_name}"), MAX_RUN_NAME)
}

/// `<experiment>-plan`: the ConfigMap with the plan file.
pub fn plan_config_map_name(experiment: &BenchmarkExperiment) -> String {
    bounded_name(&format!("{}-plan", experiment.name_any()), MAX_OBJECT_NAME)
}

/// `<experiment>-collector`: the pod that writes the comparison files.
pub fn collector_pod_name(experiment: &BenchmarkExperiment) -> String {
    bounded_name(
        &format!("{}-collector", experiment.name_any()),
        MAX_OBJECT_NAME,
    )
}

fn uid(experiment: &BenchmarkExperiment) -> Result<&str, BuildError> {
    experiment
        .meta()
        .uid
        .as_deref()
        .ok_or_else(|| BuildError::ExperimentMetadata {
            experiment: experiment.name_any(),
            field: "metadata.uid",
        })
}

/// The experiment's directory on the workload volume, relative to its root: the template's resultsDir when set,
/// else `<experiment>-<first 8 of its uid>` (the name shortened to 63 characters), unique per experiment.
pub fn experiment_dir(experiment: &BenchmarkExperiment) -> Result<String, BuildError> {
    if let Some(dir) = &experiment.spec.template.results_dir {
        return Ok(dir.clone());
    }
    let uid = uid(experiment)?;
    Ok(format!(
        "{}-{}",
        bounded_name(&experiment.name_any(), MAX_RUN_NAME),
        uid.chars().take(8).collect::<String>()
    ))
}

/// The label selector of everything `experiment` owns.
pub fn experiment_selector(experiment: &BenchmarkExperiment) -> Result<String, BuildError> {
    Ok(format!("{EXPERIMENT_UID_LABEL}={}", uid(experiment)?))
}

/// Labels on everything `experiment` owns.
pub fn experiment_labels(
    experiment: &BenchmarkExperiment,
) -> Result<BTreeMap<String, String>, BuildError> {
    Ok(BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_owned(),
            FIELD_MANAGER.to_owned(),
        ),
        (
            EXPERIMENT_LABEL.to_owned(),
            bounded_name(&experiment.name_any(), MAX_RUN_NAME),
        ),
        (EXPERIMENT_UID_LABEL.to_owned(), uid(experiment)?.to_owned()),
    ]))
}

/// A controller owner reference to `experiment` that blocks its deletion in the foreground until the object is
/// gone, as a Job's pods do.
pub fn experiment_owner_reference(
    experiment: &BenchmarkExperiment,
) -> Result<OwnerReference, BuildError> {
    let mut owner =
        experiment
            .controller_owner_ref(&())
            .ok_or_else(|| BuildError::ExperimentMetadata {
                experiment: experiment.name_any(),
                field: "metadata.uid",
            })?;
    owner.block_owner_deletion = Some(true);
    Ok(owner)
}

/// The spec of one run: the template, the treatment's overrides after the template's, the run's results
/// directory below the experiment's, and the experiment's capacity search (else the template's).
pub fn experiment_run_spec(
    experiment: &BenchmarkExperiment,
    treatment: &ResolvedTreatment,
    results_dir: String,
) -> BenchmarkRunSpec {
    let template = &experiment.spec.template;
    let mut spec = template.clone();
    spec.overrides = run_overrides(&template.overrides, treatment);
    if let Some(model) = &treatment.model {
        spec.stack.model = model.clone();
    }
    spec.results_dir = Some(results_dir);
    if let Some(search) = &experiment.spec.capacity_search {
        spec.capacity_search = Some(search.clone());
    }
    // A cold run meets an emptied cache, a warm one a cache primed with its own prompts.
    spec.prefix_cache.reset |= experiment.spec.cache_reset;
    match treatment.cache {
        Some(CacheState::Cold) => {
            spec.prefix_cache.reset = true;
            spec.prefix_cache.warm = false;
        }
        Some(CacheState::Warm) => spec.prefix_cache.warm = true,
        None => {}
    }
    spec
}

/// The BenchmarkRun of `planned`, owned by `experiment`; `hooks` are the hooks called right before it.
pub fn experiment_run(
    experiment: &BenchmarkExperiment,
    treatments: &[ResolvedTreatment],
    planned: &PlannedRun,
    hooks: &[HookCall],
) -> Result<BenchmarkRun, BuildError> {
    let treatment =
        treatments
            .get(planned.treatment)
            .ok_or_else(|| BuildError::ExperimentMetadata {
                experiment: experiment.name_any(),
                field: "a treatment of the plan",
            })?;
    let dir_name = planned.dir_name(treatments);
    let results_dir = format!("{}/{dir_name}", experiment_dir(experiment)?);
    let mut labels = experiment_labels(experiment)?;
    labels.insert(TREATMENT_LABEL.to_owned(), treatment.name.clone());
    labels.insert(REPEAT_LABEL.to_owned(), planned.repeat.to_string());
    let annotations = if hooks.is_empty() {
        None
    } else {
        let record = serde_json::to_string(hooks).map_err(|e| BuildError::Encode {
            experiment: experiment.name_any(),
            what: "the hooks record of a run",
            message: e.to_string(),
        })?;
        Some(BTreeMap::from([(HOOKS_ANNOTATION.to_owned(), record)]))
    };
    let mut run = BenchmarkRun::new(
        &experiment_run_name(&experiment.name_any(), &dir_name),
        experiment_run_spec(experiment, treatment, results_dir),
    );
    run.metadata = ObjectMeta {
        name: run.metadata.name,
        namespace: experiment.namespace(),
        labels: Some(labels),
        annotations,
        owner_references: Some(vec![experiment_owner_reference(experiment)?]),
        ..ObjectMeta::default()
    };
    Ok(run)
}

/// The hooks recorded on a run created by an experiment.
pub fn recorded_hooks(run: &BenchmarkRun) -> Vec<HookCall> {
    run.annotations()
        .get(HOOKS_ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// The ConfigMap holding the plan file the collector reads.
pub fn plan_config_map(
    experiment: &BenchmarkExperiment,
    plan_json: &str,
) -> Result<ConfigMap, BuildError> {
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(plan_config_map_name(experiment)),
            namespace: experiment.namespace(),
            labels: Some(experiment_labels(experiment)?),
            owner_references: Some(vec![experiment_owner_reference(experiment)?]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            PLAN_FILE.to_owned(),
            plan_json.to_owned(),
        )])),
        ..ConfigMap::default()
    })
}

/// The collector: `llmbench experiment report` on the experiment's directory with the plan file, on the
/// template's storage, image and scheduling. It writes the comparison files next to the runs' directories.
pub fn collector_pod(
    experiment: &BenchmarkExperiment,
    settings: &LauncherSettings,
) -> Result<Pod, BuildError> {
    let template = &experiment.spec.template;
    let mut labels = experiment_labels(experiment)?;
    // The label every llmbench pod carries (the test kubelet and `kubectl get pods -l` select by it).
    labels.insert("app.kubernetes.io/name".to_owned(), "llmbench".to_owned());
    labels.insert(
        "app.kubernetes.io/component".to_owned(),
        "collector".to_owned(),
    );
    let command = llmbench_core::launcher_command::experiment_report_argv(
        &format!("{WORKLOAD_MOUNT_PATH}/{}", experiment_dir(experiment)?),
        &format!("{PLAN_MOUNT_PATH}/{PLAN_FILE}"),
    );
    Ok(llmbench_pod(PodParts {
        metadata: ObjectMeta {
            name: Some(collector_pod_name(experiment)),
            namespace: experiment.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![experiment_owner_reference(experiment)?]),
            ..ObjectMeta::default()
        },
        container_name: "collector",
        command,
        env: Vec::new(),
        config_map: plan_config_map_name(experiment),
        config_mount_path: PLAN_MOUNT_PATH,
        launcher: &template.launcher,
        storage: &template.storage,
        settings,
    }))
}

#[cfg(test)]
pub(crate) mod fixtures {
    use llmbench_api::v1alpha1::{BenchmarkExperiment, BenchmarkExperimentSpec};

    /// An experiment as the API server returns it, from inline YAML.
    pub fn experiment(spec_yaml: &str) -> BenchmarkExperiment {
        let spec: BenchmarkExperimentSpec =
            serde_saphyr::from_str(spec_yaml).expect("fixture spec is valid");
        let mut experiment = BenchmarkExperiment::new("sweep", spec);
        experiment.metadata.namespace = Some("team-a".to_owned());
        experiment.metadata.uid = Some("7d1e2f30-aaaa-bbbb-cccc-1234567890ab".to_owned());
        experiment
    }

    /// Two treatments × two repeats of inference-perf's sanity_random.
    pub const TWO_BY_TWO: &str = "
template:
  harness: inference-perf
  workload:
    builtin: sanity_random
  stack:
    endpoint: http://vllm.llm-d.svc:8000/
    model: meta-llama/Llama-3.1-8B-Instruct
  overrides: [load.stages.0.duration=5]
factors:
  - name: rate
    key: load.stages.0.rate
    levels: ['5', '10']
repeats: 2
";
}

#[cfg(test)]
mod tests {
    use super::fixtures::{TWO_BY_TWO, experiment};
    use super::*;
    use llmbench_api::experiment::plan;

    #[test]
    fn a_model_list_gives_each_run_its_model_as_stack_model_and_keeps_the_rest_of_the_stack() {
        let exp = experiment(&format!("{TWO_BY_TWO}models: [org/a-7b, org/b-8b]\n"));
        let (treatments, runs) = plan(&exp.spec).expect("plans");
        // 2 models × 2 rates, the model slowest; repeat 1 first.
        let names: Vec<String> = runs[..4]
            .iter()
            .map(|r| experiment_run(&exp, &treatments, r, &[]).expect("builds"))
            .map(|r| {
                format!(
                    "{} {}",
                    r.metadata.name.unwrap_or_default(),
                    r.spec.stack.model
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "sweep-rate-5-a-7b-r1 org/a-7b",
                "sweep-rate-10-a-7b-r1 org/a-7b",
                "sweep-rate-5-b-8b-r1 org/b-8b",
                "sweep-rate-10-b-8b-r1 org/b-8b",
            ]
        );
        let run = experiment_run(&exp, &treatments, &runs[2], &[]).expect("builds");
        assert_eq!(
            run.spec.stack.endpoint, exp.spec.template.stack.endpoint,
            "only the model changes"
        );
        assert_eq!(
            run.spec.stack.tokenizer, None,
            "the tokenizer follows the model"
        );
        assert_eq!(
            run.spec.overrides,
            ["load.stages.0.duration=5", "load.stages.0.rate=5"]
        );
    }

    #[test]
    fn cache_states_make_cold_runs_reset_and_warm_runs_prime_the_prefix_cache() {
        let exp = experiment(&format!("{TWO_BY_TWO}cacheStates: [cold, warm]\n"));
        let (treatments, runs) = plan(&exp.spec).expect("plan");
        let run_of = |name: &str| {
            let planned = runs
                .iter()
                .find(|r| treatments[r.treatment].name == name)
                .expect("planned");
            experiment_run(&exp, &treatments, planned, &[]).expect("run")
        };
        let cold = run_of("rate-5-cold");
        assert!(cold.spec.prefix_cache.reset && !cold.spec.prefix_cache.warm);
        let warm = run_of("rate-5-warm");
        assert!(!warm.spec.prefix_cache.reset && warm.spec.prefix_cache.warm);
        // cacheReset resets before every run, warm ones too.
        let exp = experiment(&format!("{TWO_BY_TWO}cacheReset: true\n"));
        let (treatments, runs) = plan(&exp.spec).expect("plan");
        let run = experiment_run(&exp, &treatments, &runs[0], &[]).expect("run");
        assert!(run.spec.prefix_cache.reset && !run.spec.prefix_cache.warm);
    }

    #[test]
    fn a_run_is_the_template_with_its_treatment_after_the_template_overrides() {
        let exp = experiment(TWO_BY_TWO);
        let (treatments, runs) = plan(&exp.spec).expect("plans");
        let run = experiment_run(&exp, &treatments, &runs[3], &[]).expect("builds");
        assert_eq!(run.metadata.name.as_deref(), Some("sweep-rate-10-r2"));
        assert_eq!(run.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            run.spec.overrides,
            ["load.stages.0.duration=5", "load.stages.0.rate=10"]
        );
        assert_eq!(
            run.spec.results_dir.as_deref(),
            Some("sweep-7d1e2f30/rate-10-r2")
        );
        assert_eq!(run.spec.harness, exp.spec.template.harness);
        assert_eq!(run.spec.stack, exp.spec.template.stack);
        let labels = run.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels[EXPERIMENT_LABEL], "sweep");
        assert_eq!(
            labels[EXPERIMENT_UID_LABEL],
            "7d1e2f30-aaaa-bbbb-cccc-1234567890ab"
        );
        assert_eq!(labels[TREATMENT_LABEL], "rate-10");
        assert_eq!(labels[REPEAT_LABEL], "2");
        assert!(run.metadata.annotations.is_none(), "no hooks, no record");
    }

    #[test]
    fn runs_are_owned_by_the_experiment_and_block_its_foreground_deletion() {
        let exp = experiment(TWO_BY_TWO);
        let (treatments, runs) = plan(&exp.spec).expect("plans");
        let run = experiment_run(&exp, &treatments, &runs[0], &[]).expect("builds");
        let owner = &run.metadata.owner_references.expect("owned")[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            (
                "BenchmarkExperiment",
                "sweep",
                "7d1e2f30-aaaa-bbbb-cccc-1234567890ab",
                Some(true),
                Some(true)
            )
        );
    }

    #[test]
    fn the_experiment_capacity_search_and_results_dir_reach_every_run() {
        let exp = experiment(&format!(
            "{TWO_BY_TWO}capacitySearch:\n  load: rate\n  slo: ['ttft_p99<=200ms']\n"
        ));
        let (treatments, runs) = plan(&exp.spec).expect("plans");
        let run = experiment_run(&exp, &treatments, &runs[0], &[]).expect("builds");
        assert_eq!(
            run.spec.capacity_search.as_ref().map(|c| c.slo.clone()),
            Some(vec!["ttft_p99<=200ms".to_owned()])
        );
        let mut nested = exp.clone();
        nested.spec.template.results_dir = Some("nightly/sweep".to_owned());
        let run = experiment_run(&nested, &treatments, &runs[1], &[]).expect("builds");
        assert_eq!(
            run.spec.results_dir.as_deref(),
            Some("nightly/sweep/rate-10-r1")
        );
    }

    #[test]
    fn hooks_are_recorded_on_the_run_they_preceded() {
        let exp = experiment(TWO_BY_TWO);
        let (treatments, runs) = plan(&exp.spec).expect("plans");
        let call = |name: &str, status: Option<u16>, error: Option<&str>| HookCall {
            name: name.to_owned(),
            method: "POST".to_owned(),
            url: format!("http://vllm.llm-d.svc:8000/{name}"),
            status,
            error: error.map(str::to_owned),
        };
        let hooks = vec![
            call("reset-prefix-cache", Some(200), None),
            call("warm", None, Some("no answer within 10s")),
        ];
        let run = experiment_run(&exp, &treatments, &runs[0], &hooks).expect("builds");
        assert_eq!(recorded_hooks(&run), hooks);
    }

    #[test]
    fn long_names_are_shortened_to_distinct_dns_names_of_63_characters() {
        let long = "a-very-long-experiment-name-that-goes-on-and-on-for-quite-a-while";
        let a = experiment_run_name(long, "system-prompt-len-8000-num-groups-40-r1");
        let b = experiment_run_name(long, "system-prompt-len-8000-num-groups-40-r2");
        assert!(
            a.len() <= MAX_RUN_NAME && b.len() <= MAX_RUN_NAME,
            "{a} {b}"
        );
        assert_ne!(a, b);
        assert!(
            !a.ends_with('-') && a.starts_with("a-very-long-experiment"),
            "{a}"
        );
        assert_eq!(experiment_run_name("short", "t-r1"), "short-t-r1");
        assert_eq!(bounded_name("abc", 3), "abc");
        let cut = bounded_name("abc-defghijklmnop", 12);
        assert_eq!(cut.len(), 12, "{cut}");
        assert!(cut.starts_with("abc-"), "{cut}");
    }

    #[test]
    fn the_experiment_dir_defaults_to_its_name_and_uid() {
        let exp = experiment(TWO_BY_TWO);
        assert_eq!(experiment_dir(&exp).expect("dir"), "sweep-7d1e2f30");
        let mut no_uid = exp.clone();
        no_uid.metadata.uid = None;
        assert!(matches!(
            experiment_dir(&no_uid),
            Err(BuildError::ExperimentMetadata { .. })
        ));
    }

    #[test]
    fn the_collector_reports_on_the_experiment_dir_with_the_mounted_plan() {
        let exp = experiment(TWO_BY_TWO);
        let settings = LauncherSettings {
            image: "ghcr.io/llmbench/llmbench:0.1.0".to_owned(),
            image_pull_policy: None,
            defaults: crate::builders::LauncherDefaults::default(),
        };
        let pod = collector_pod(&exp, &settings).expect("builds");
        assert_eq!(pod.metadata.name.as_deref(), Some("sweep-collector"));
        let spec = pod.spec.as_ref().expect("spec");
        let container = &spec.containers[0];
        assert_eq!(
            container.command.clone().expect("command").join(" "),
            "llmbench experiment report /requests/sweep-7d1e2f30 --plan /etc/llmbench/experiment.json"
        );
        assert_eq!(
            container.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        let volumes = spec.volumes.clone().expect("volumes");
        let plan = volumes
            .iter()
            .find_map(|v| v.config_map.as_ref())
            .expect("the plan ConfigMap is mounted");
        assert_eq!(plan.name, "sweep-plan");
        let claim = volumes
            .iter()
            .find_map(|v| v.persistent_volume_claim.as_ref())
            .expect("the workload claim");
        assert_eq!(claim.claim_name, "workload-pvc");
        let labels = pod.metadata.labels.expect("labels");
        assert_eq!(labels["app.kubernetes.io/name"], "llmbench");
        assert_eq!(
            labels[EXPERIMENT_UID_LABEL],
            "7d1e2f30-aaaa-bbbb-cccc-1234567890ab"
        );
        let cm = plan_config_map(&exp, "{}").expect("builds");
        assert_eq!(cm.data.expect("data")[PLAN_FILE], "{}");
    }
}
