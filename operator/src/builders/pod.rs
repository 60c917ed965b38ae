//! The launcher pods `<run>-launcher-<i>`: `llmbench run` with the rendered profile and the workload volume, locked
//! down (non-root, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp)
//! and with no API credentials: the launcher talks only to the stack.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, ObjectFieldSelector, PersistentVolumeClaimVolumeSource, Pod, PodAffinity,
    PodAffinityTerm, PodSecurityContext, PodSpec, ResourceRequirements, SecretKeySelector, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;
use llmbench_api::release::{RELEASE_PORT, RELEASE_PORT_NAME};
use llmbench_api::render::well_known;
use llmbench_api::security;
use llmbench_api::v1alpha1::{
    BenchmarkRun, EmptyDirSpec, LauncherSpec, StorageSpec, WORKLOAD_MOUNT_PATH,
};
use llmbench_core::harness::Harness;

use super::names::{MAX_LABEL_VALUE, MAX_OBJECT_NAME, bounded_name};
use super::{
    BuildError, COMPONENT_LABEL, PREFLIGHT_COMPONENT, PROFILE_FILE, RUN_UID_LABEL, owner_reference,
    profile_config_map_name, run_labels, uid,
};
use crate::duration::parse_duration;
use llmbench_core::launcher_command::{Release, RunCommand, report_argv};

/// Where the rendered profile is mounted.
pub const PROFILE_MOUNT_PATH: &str = "/etc/llmbench/profile";
/// The file the launcher writes its compact summary to; the kubelet turns it into the termination message.
pub const TERMINATION_LOG: &str = "/dev/termination-log";
/// The non-root user of the launcher image.
pub const LAUNCHER_UID: i64 = security::IMAGE_UID;
/// Label with the pod's index among the run's launchers.
pub const LAUNCHER_INDEX_LABEL: &str = "llmbench.dev/launcher-index";
/// The pod's `terminationGracePeriodSeconds`: the launcher's interrupt grace ([`llmbench_core::launcher_command::DEFAULT_INTERRUPT_GRACE`]), then time to write every report of
/// a long run (a million records take a few seconds per format), before the kubelet sends SIGKILL.
pub const LAUNCHER_TERMINATION_GRACE_SECONDS: i64 = 60;
/// The port of a running launcher's live metrics (`llmbench run --metrics-listen`): the OpenTelemetry/Prometheus
/// exporter convention, clear of the stacks' own ports (vLLM's 8000, llm-d's 8080 and 9090).
pub const LAUNCHER_METRICS_PORT: i32 = 9464;
/// The name of that container port, which the chart's launcher PodMonitor scrapes.
pub const LAUNCHER_METRICS_PORT_NAME: &str = "metrics";
/// The environment variable a launcher finds its pod's IP in (the downward API's `status.podIP`).
pub const POD_IP_ENV: &str = "POD_IP";
/// How much longer than `launcher.startTimeout` a shard waits for its release before it gives up by itself.
const RELEASE_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_secs(120);
/// Nodes, for pod affinity: the shards of a run on a ReadWriteOnce claim share one.
const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";

/// Operator-wide launcher settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LauncherSettings {
    /// The default launcher image: the operator's own image at its own version.
    pub image: String,
    pub image_pull_policy: Option<String>,
    /// What runs leave unset (the chart's `launcher.defaults`).
    pub defaults: super::LauncherDefaults,
}

/// `<run>-launcher-<index>`, shortened with a hash when the run's name is too long for it. (The kubelet cuts a
/// pod's hostname to 63 characters by itself; nothing of ours resolves it.)
pub fn launcher_pod_name(run: &BenchmarkRun, index: u32) -> String {
    bounded_name(
        &format!("{}-launcher-{index}", run.name_any()),
        MAX_OBJECT_NAME,
    )
}

/// `<run>-merge`, shortened with a hash when the run's name is too long for it.
pub fn merge_pod_name(run: &BenchmarkRun) -> String {
    bounded_name(&format!("{}-merge", run.name_any()), MAX_OBJECT_NAME)
}

/// The pod that merges a sharded run once every launcher succeeded: `llmbench report` on the run's directory, which
/// merges the shards' raw records onto one timeline and writes the exact summary and every report at its root, and
/// its compact summary to the termination message the status is read from. It carries the run's labels but no
/// launcher index, so it is never taken for a shard.
pub fn merge_pod(run: &BenchmarkRun, settings: &LauncherSettings) -> Result<Pod, BuildError> {
    let spec = &run.spec;
    Ok(llmbench_pod(PodParts {
        metadata: ObjectMeta {
            name: Some(merge_pod_name(run)),
            namespace: run.namespace(),
            labels: Some(run_labels(run)?),
            owner_references: Some(vec![owner_reference(run)?]),
            ..ObjectMeta::default()
        },
        container_name: "merge",
        command: vec![
            "llmbench".to_owned(),
            "report".to_owned(),
            format!("{WORKLOAD_MOUNT_PATH}/{}", run_id(run)?),
            "--summary-file".to_owned(),
            TERMINATION_LOG.to_owned(),
        ],
        env: Vec::new(),
        config_map: profile_config_map_name(run),
        config_mount_path: PROFILE_MOUNT_PATH,
        launcher: &spec.launcher,
        storage: &spec.storage,
        settings,
    }))
}

/// `<run>-preflight`, shortened with a hash when the run's name is too long for it.
pub fn preflight_pod_name(run: &BenchmarkRun) -> String {
    bounded_name(&format!("{}-preflight", run.name_any()), MAX_OBJECT_NAME)
}

/// The container of the pre-flight pod.
const PREFLIGHT_CONTAINER: &str = "preflight";

/// Whether a run's stack is checked by a pre-flight pod before its launchers are made: every run that sends load
/// (not a `skipRun` collector, a debug pod, or `nop`, which sends nothing).
pub fn needs_preflight(run: &BenchmarkRun) -> bool {
    let spec = &run.spec;
    !spec.skip_run && !spec.launcher.debug && spec.harness != Harness::Nop
}

/// The pod that checks the run's stack before any launcher exists: `llmbench run --preflight-only` with the
/// launchers' own profile, endpoint, model, image, service account and placement, so it checks the stack from the
/// launchers' network with the launchers' code; its verdict goes to its termination message. It needs neither
/// the workload claim (a scratch volume stands in, so it never waits for or pins a ReadWriteOnce volume) nor the
/// launchers' resources, and it carries the run's labels but no launcher index, so it is never taken for a shard.
pub fn preflight_pod(run: &BenchmarkRun, settings: &LauncherSettings) -> Result<Pod, BuildError> {
    let spec = &run.spec;
    let parallelism = u32::try_from(spec.launcher.parallelism).unwrap_or(1).max(1);
    let argv = launch_command(run, 0, parallelism)?
        .preflight_only()
        .argv()
        .map_err(|e| BuildError::CapacitySearch {
            run: run.name_any(),
            message: e.to_string(),
        })?;
    let mut labels = run_labels(run)?;
    labels.insert(COMPONENT_LABEL.to_owned(), PREFLIGHT_COMPONENT.to_owned());
    let scratch = StorageSpec {
        pvc: None,
        empty_dir: Some(EmptyDirSpec::default()),
    };
    let mut pod = llmbench_pod(PodParts {
        metadata: ObjectMeta {
            name: Some(preflight_pod_name(run)),
            namespace: run.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner_reference(run)?]),
            ..ObjectMeta::default()
        },
        container_name: PREFLIGHT_CONTAINER,
        command: argv,
        env: Vec::new(),
        config_map: profile_config_map_name(run),
        config_mount_path: PROFILE_MOUNT_PATH,
        launcher: &spec.launcher,
        storage: &scratch,
        settings,
    });
    if let Some(container) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        // Two HTTP calls and a profile parsed: a tenth of a core, whatever the launchers ask for their load.
        let quantities = |cpu: &str, memory: &str| {
            BTreeMap::from([
                ("cpu".to_owned(), Quantity(cpu.to_owned())),
                ("memory".to_owned(), Quantity(memory.to_owned())),
            ])
        };
        container.resources = Some(ResourceRequirements {
            requests: Some(quantities("100m", "128Mi")),
            limits: Some(quantities("1", "512Mi")),
            ..ResourceRequirements::default()
        });
    }
    Ok(pod)
}

/// Whether a run needs a merge pod after its launchers: several shards that generated load.
pub fn needs_merge(run: &BenchmarkRun) -> bool {
    let spec = &run.spec;
    spec.launcher.parallelism > 1 && !spec.skip_run && !spec.launcher.debug
}

/// The run's id and results directory on the workload volume, relative to its root: `spec.resultsDir` when set,
/// else `<run>-<first 8 of its uid>`, unique even when a run is deleted and re-created under the same name (the
/// name shortened to 63 characters, so the directory's name stays well inside a file system's 255 bytes).
pub fn run_id(run: &BenchmarkRun) -> Result<String, BuildError> {
    if let Some(dir) = &run.spec.results_dir {
        return Ok(dir.clone());
    }
    let uid = run.uid().ok_or_else(|| BuildError::MissingMetadata {
        run: run.name_any(),
        field: "metadata.uid",
    })?;
    Ok(format!(
        "{}-{}",
        bounded_name(&run.name_any(), MAX_LABEL_VALUE),
        uid.chars().take(8).collect::<String>()
    ))
}

/// Requests and limits sized for the llmbench launcher (one async process, a few threads), not for Python
/// harnesses.
fn default_resources() -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities("1", "1Gi")),
        limits: Some(quantities("2", "4Gi")),
        ..ResourceRequirements::default()
    }
}

/// Launcher pod `index` of `run`.
pub fn launcher_pod(
    run: &BenchmarkRun,
    index: u32,
    settings: &LauncherSettings,
) -> Result<Pod, BuildError> {
    let spec = &run.spec;
    let parallelism = u32::try_from(spec.launcher.parallelism)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| BuildError::Parallelism {
            run: run.name_any(),
            parallelism: spec.launcher.parallelism,
        })?;
    let mut labels = run_labels(run)?;
    labels.insert(LAUNCHER_INDEX_LABEL.to_owned(), index.to_string());

    let command = if spec.launcher.debug {
        // The image's busybox `sleep` (distroless debug variant) takes seconds, not `infinity`: ~68 years.
        vec!["sleep".to_owned(), "2147483647".to_owned()]
    } else if spec.skip_run {
        // Collect only: re-analyse what an earlier run left on the volume; no load is generated.
        report_argv(
            &format!("{WORKLOAD_MOUNT_PATH}/{}", run_id(run)?),
            TERMINATION_LOG,
        )
    } else {
        launch_command(run, index, parallelism)?
            .argv()
            .map_err(|e| BuildError::CapacitySearch {
                run: run.name_any(),
                message: e.to_string(),
            })?
    };

    let mut env = Vec::new();
    if !spec.launcher.debug && !spec.skip_run {
        env.push(EnvVar {
            name: POD_IP_ENV.to_owned(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "status.podIP".to_owned(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        });
    }
    let hf_token = spec
        .launcher
        .hf_token_secret_ref
        .clone()
        .or_else(|| settings.defaults.hf_token_secret());
    if let Some(secret) = hf_token {
        env.push(EnvVar {
            name: "HF_TOKEN".to_owned(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.name,
                    key: secret.key,
                    optional: secret.optional,
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        });
    }

    // Only `llmbench run` serves live metrics: a debug pod sleeps and a collector only reports.
    let serves_metrics = !spec.launcher.debug && !spec.skip_run;
    let mut pod = llmbench_pod(PodParts {
        metadata: ObjectMeta {
            name: Some(launcher_pod_name(run, index)),
            namespace: run.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner_reference(run)?]),
            ..ObjectMeta::default()
        },
        container_name: "launcher",
        command,
        env,
        config_map: profile_config_map_name(run),
        config_mount_path: PROFILE_MOUNT_PATH,
        launcher: &spec.launcher,
        storage: &spec.storage,
        settings,
    });
    if serves_metrics
        && let Some(container) = pod.spec.as_mut().and_then(|s| s.containers.first_mut())
    {
        let port = |name: &str, number: i32| ContainerPort {
            name: Some(name.to_owned()),
            container_port: number,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        };
        let mut ports = vec![port(LAUNCHER_METRICS_PORT_NAME, LAUNCHER_METRICS_PORT)];
        if parallelism > 1 {
            ports.push(port(RELEASE_PORT_NAME, i32::from(RELEASE_PORT)));
        }
        container.ports = Some(ports);
    }
    if let Some(queue) = super::kueue::queue_of(run) {
        super::kueue::queue_pod(&mut pod, run, queue, parallelism)?;
    }
    Ok(pod)
}

/// The `llmbench run` of launcher `index` of `parallelism`.
fn launch_command(
    run: &BenchmarkRun,
    index: u32,
    parallelism: u32,
) -> Result<RunCommand, BuildError> {
    let spec = &run.spec;
    let values = super::run_values(run);
    // A nested resultsDir (`team/bench-1`) is an output directory and a run id: the launcher takes a run id
    // of one path component only.
    let results_dir = run_id(run)?;
    let (output, id) = match results_dir.rsplit_once('/') {
        Some((parent, id)) => (format!("{WORKLOAD_MOUNT_PATH}/{parent}"), id.to_owned()),
        None => (WORKLOAD_MOUNT_PATH.to_owned(), results_dir.clone()),
    };
    let mut launch = RunCommand::new(
        spec.harness,
        format!("{PROFILE_MOUNT_PATH}/{PROFILE_FILE}"),
        spec.stack.model.clone(),
        output,
        id,
        TERMINATION_LOG,
    );
    launch.shard = (index, parallelism);
    // The pod's own address rather than 0.0.0.0: the same in a pod network, and launchers that share a
    // host's network (hostNetwork, a test kubelet) each bind their own.
    launch.metrics_listen = Some(format!("$({POD_IP_ENV}):{LAUNCHER_METRICS_PORT}"));
    // An emptyDir goes with the pod: the launcher ends by writing its results into its log for the operator.
    if spec.storage.pvc_name().is_none() {
        launch.results_to_log = Some(llmbench_api::results_log::DEFAULT_CAP_BYTES);
    }
    if parallelism > 1 {
        // Every shard waits for the operator's release, so all start their clocks at one instant; it gives up
        // a while after the operator would have failed the run (ShardsNotReady) had the shards not come up.
        let start_timeout = parse_duration(&spec.launcher.start_timeout).map_err(|message| {
            BuildError::StartTimeout {
                run: run.name_any(),
                message,
            }
        })?;
        launch.release = Some(Release {
            address: format!("$({POD_IP_ENV}):{RELEASE_PORT}"),
            // Whole seconds, as the operator has always written it.
            timeout: std::time::Duration::from_secs(
                (start_timeout + RELEASE_TIMEOUT_MARGIN).as_secs(),
            ),
        });
    }
    launch.endpoint = values.get(well_known::ENDPOINT_URL).cloned();
    launch.tokenizer = values.get(well_known::TOKENIZER).cloned();
    // Every shard is told; the launcher of shard 0 scrapes them for the whole run.
    launch.metrics_endpoints = spec.stack.metrics_endpoints.clone();
    if super::stack::standalone(run).is_some() {
        launch.stack_info = Some(super::stack::stack_info_path());
    }
    if let Some(profiling) = &spec.stack.profiling {
        launch.vllm_profiler = profiling.vllm;
        launch.profiler_start = profiling.start.clone();
        launch.profiler_stop = profiling.stop.clone();
    }
    launch.reset_prefix_cache = spec.prefix_cache.reset;
    launch.warm_prefix_cache = spec.prefix_cache.warm;
    // The launcher reads the same type (llmbench_core::capacity::CapacitySearchSpec) from this JSON.
    launch.capacity_search = spec.capacity_search.clone();
    Ok(launch)
}

/// Whether the shards of `run` must share one node: more than one launcher on a claim without ReadWriteMany
/// (`access_modes` are the claim's own), which only pods of one node can mount together.
pub fn shards_share_a_node(run: &BenchmarkRun, access_modes: &[String]) -> bool {
    run.spec.launcher.parallelism > 1
        && run.spec.storage.pvc_name().is_some()
        && !access_modes.iter().any(|m| m == "ReadWriteMany")
}

/// Puts launcher pod `pod` on the node of the run's other launchers (required pod affinity on the run's label,
/// per hostname). The first shard goes wherever the scheduler puts it: a pod that matches its own affinity term
/// may start a group.
pub fn colocate_shards(pod: &mut Pod, run: &BenchmarkRun) -> Result<(), BuildError> {
    let uid = uid(run)?.to_owned();
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(());
    };
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(RUN_UID_LABEL.to_owned(), uid)])),
            ..LabelSelector::default()
        }),
        topology_key: HOSTNAME_TOPOLOGY_KEY.to_owned(),
        ..PodAffinityTerm::default()
    };
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .pod_affinity
        .get_or_insert_with(PodAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term);
    Ok(())
}

/// What differs between the pods that run `llmbench`: a launcher of a run, or an experiment's collector.
pub struct PodParts<'a> {
    pub metadata: ObjectMeta,
    /// The container's name (`launcher` or `collector`).
    pub container_name: &'a str,
    pub command: Vec<String>,
    /// Environment beyond what every llmbench pod gets (log format, HF_HOME, POD_NAME).
    pub env: Vec<EnvVar>,
    /// A ConfigMap mounted read-only at `config_mount_path`.
    pub config_map: String,
    pub config_mount_path: &'a str,
    /// Image, resources and scheduling.
    pub launcher: &'a LauncherSpec,
    /// The workload volume, mounted at /requests.
    pub storage: &'a StorageSpec,
    pub settings: &'a LauncherSettings,
}

/// A locked-down pod running one `llmbench` container with a ConfigMap, the workload volume and a scratch /tmp.
pub fn llmbench_pod(parts: PodParts<'_>) -> Pod {
    let PodParts {
        metadata,
        container_name,
        command,
        env: extra_env,
        config_map,
        config_mount_path,
        launcher,
        storage,
        settings,
    } = parts;
    let defaults = &settings.defaults;
    let mut env = vec![
        EnvVar {
            name: "LLMBENCH_LOG_FORMAT".to_owned(),
            value: Some("json".to_owned()),
            ..EnvVar::default()
        },
        EnvVar {
            name: "HF_HOME".to_owned(),
            value: Some(format!("{WORKLOAD_MOUNT_PATH}/.cache/huggingface")),
            ..EnvVar::default()
        },
        EnvVar {
            name: "POD_NAME".to_owned(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.name".to_owned(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        },
    ];
    env.extend(extra_env);
    let workload_volume = match storage.pvc_name() {
        Some(claim) => Volume {
            name: "workload".to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_owned(),
                read_only: Some(false),
            }),
            ..Volume::default()
        },
        None => Volume {
            name: "workload".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: storage
                    .empty_dir
                    .as_ref()
                    .and_then(|e| e.size_limit.clone())
                    .map(Quantity),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        },
    };
    let volumes = vec![
        Volume {
            name: "profile".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map,
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        workload_volume,
        Volume {
            name: "tmp".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    ];
    let mounts = vec![
        VolumeMount {
            name: "profile".to_owned(),
            mount_path: config_mount_path.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "workload".to_owned(),
            mount_path: WORKLOAD_MOUNT_PATH.to_owned(),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "tmp".to_owned(),
            mount_path: "/tmp".to_owned(),
            ..VolumeMount::default()
        },
    ];

    let container = Container {
        name: container_name.to_owned(),
        image: Some(
            launcher
                .image
                .clone()
                .unwrap_or_else(|| settings.image.clone()),
        ),
        image_pull_policy: settings.image_pull_policy.clone(),
        command: Some(command),
        env: Some(env),
        resources: Some(
            launcher
                .resources
                .clone()
                .or_else(|| defaults.resources.clone())
                .unwrap_or_else(default_resources),
        ),
        volume_mounts: Some(mounts),
        termination_message_path: Some(TERMINATION_LOG.to_owned()),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        security_context: Some(security::restricted_container()),
        ..Container::default()
    };

    Pod {
        metadata,
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            termination_grace_period_seconds: Some(LAUNCHER_TERMINATION_GRACE_SECONDS),
            service_account_name: launcher
                .service_account_name
                .clone()
                .or_else(|| defaults.service_account_name.clone()),
            // The launcher needs no API access: no token is mounted.
            automount_service_account_token: Some(false),
            node_selector: Some(if launcher.node_selector.is_empty() {
                defaults.node_selector.clone()
            } else {
                launcher.node_selector.clone()
            })
            .filter(|s| !s.is_empty()),
            tolerations: Some(if launcher.tolerations.is_empty() {
                defaults.tolerations.clone()
            } else {
                launcher.tolerations.clone()
            })
            .filter(|t| !t.is_empty()),
            image_pull_secrets: Some(defaults.image_pull_secrets.clone()).filter(|s| !s.is_empty()),
            // The launchers write to the volume, which fs_group makes theirs.
            security_context: Some(PodSecurityContext {
                fs_group: Some(LAUNCHER_UID),
                ..security::restricted_pod()
            }),
            containers: vec![container],
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{LauncherDefaults, RUN_UID_LABEL, fixtures};

    fn settings() -> LauncherSettings {
        LauncherSettings {
            image: "ghcr.io/llmbench/llmbench:0.1.0".to_owned(),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            defaults: LauncherDefaults::default(),
        }
    }

    fn container(pod: &Pod) -> &Container {
        &pod.spec.as_ref().expect("spec").containers[0]
    }

    #[test]
    fn the_launcher_runs_llmbench_with_the_profile_endpoint_and_summary_file() {
        let run = fixtures::run(fixtures::BASIC);
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        assert_eq!(pod.metadata.name.as_deref(), Some("bench-1-launcher-0"));
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert_eq!(
            command,
            "llmbench run --harness inference-perf --profile /etc/llmbench/profile/profile.yaml --model \
             meta-llama/Llama-3.1-8B-Instruct --output /requests --run-id bench-1-0f3c9a2e --summary-file \
             /dev/termination-log --shard 0/1 --interrupt-grace 5s --metrics-listen $(POD_IP):9464 --endpoint \
             http://vllm.llm-d.svc:8000 --tokenizer meta-llama/Llama-3.1-8B-Instruct"
        );
        assert_eq!(
            container(&pod).image.as_deref(),
            Some("ghcr.io/llmbench/llmbench:0.1.0")
        );
    }

    #[test]
    fn the_preflight_pod_checks_the_stack_as_launcher_0_would_with_its_placement_but_no_claim() {
        let mut run = fixtures::run(&format!(
            "{}launcher:\n  parallelism: 2\n  serviceAccountName: bench\n  nodeSelector:\n    pool: cpu\n\
             \x20 resources:\n    requests:\n      cpu: '8'\n",
            fixtures::BASIC
        ));
        run.metadata.labels = Some(BTreeMap::from([(
            super::super::kueue::QUEUE_LABEL.to_owned(),
            "bench".to_owned(),
        )]));
        let pod = preflight_pod(&run, &settings()).expect("builds");
        assert_eq!(pod.metadata.name.as_deref(), Some("bench-1-preflight"));
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert_eq!(
            command,
            "llmbench run --harness inference-perf --profile /etc/llmbench/profile/profile.yaml --model \
             meta-llama/Llama-3.1-8B-Instruct --output /requests --run-id bench-1-0f3c9a2e --summary-file \
             /dev/termination-log --shard 0/1 --interrupt-grace 5s --endpoint http://vllm.llm-d.svc:8000 \
             --tokenizer meta-llama/Llama-3.1-8B-Instruct --preflight-only"
        );
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(labels[COMPONENT_LABEL], PREFLIGHT_COMPONENT);
        assert_eq!(
            labels[RUN_UID_LABEL],
            "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab"
        );
        // Never taken for a shard, and never queued: it runs before the launchers are queued.
        assert!(!labels.contains_key(LAUNCHER_INDEX_LABEL), "{labels:?}");
        assert!(
            !labels.keys().any(|k| k.starts_with("kueue.x-k8s.io/")),
            "{labels:?}"
        );
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.scheduling_gates, None);
        // The launchers' network and identity: their service account and node selector.
        assert_eq!(spec.service_account_name.as_deref(), Some("bench"));
        assert_eq!(
            spec.node_selector.as_ref().map(|s| s["pool"].as_str()),
            Some("cpu")
        );
        // No claim to wait for or to pin; small resources whatever the launchers ask.
        let volumes = spec.volumes.as_ref().expect("volumes");
        assert!(
            volumes.iter().all(|v| v.persistent_volume_claim.is_none()),
            "{volumes:?}"
        );
        let resources = container(&pod).resources.clone().expect("resources");
        assert_eq!(
            resources.requests.expect("requests")["cpu"],
            Quantity("100m".to_owned())
        );
        assert_eq!(container(&pod).name, "preflight");
        assert_eq!(
            container(&pod).termination_message_path.as_deref(),
            Some(TERMINATION_LOG)
        );
    }

    #[test]
    fn only_runs_that_send_load_have_a_preflight() {
        assert!(needs_preflight(&fixtures::run(fixtures::BASIC)));
        for extra in ["skipRun: true\n", "launcher:\n  debug: true\n"] {
            let run = fixtures::run(&format!("{}{extra}", fixtures::BASIC));
            assert!(!needs_preflight(&run), "{extra}");
        }
        let nop = fixtures::run(&fixtures::BASIC.replace("inference-perf", "nop"));
        assert!(!needs_preflight(&nop));
    }

    #[test]
    fn a_sharded_run_is_merged_by_a_report_pod_on_its_directory() {
        let sharded = fixtures::run(&format!("{}launcher:\n  parallelism: 4\n", fixtures::BASIC));
        assert!(needs_merge(&sharded));
        assert!(!needs_merge(&fixtures::run(fixtures::BASIC)));
        let pod = merge_pod(&sharded, &settings()).expect("builds");
        assert_eq!(pod.metadata.name.as_deref(), Some("bench-1-merge"));
        let labels = pod.metadata.labels.clone().expect("labels");
        assert!(!labels.contains_key(LAUNCHER_INDEX_LABEL), "{labels:?}");
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert_eq!(
            command,
            "llmbench report /requests/bench-1-0f3c9a2e --summary-file /dev/termination-log"
        );
    }

    #[test]
    fn a_standalone_stacks_launcher_goes_to_its_service_with_the_stack_info_and_the_profiler_hooks()
    {
        let run = fixtures::run(
            "harness: inference-perf\nworkload:\n  builtin: sanity_random\nstack:\n  model: m\n  standalone: {}\n  \
             profiling: {vllm: true}\n",
        );
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let command = container(&pod).command.clone().expect("command").join(" ");
        // The Service <run>-stack in the run's namespace on the default port 8000; the ConfigMap's stack-info.json.
        assert!(
            command.contains("--endpoint http://bench-1-stack.team-a.svc:8000"),
            "{command}"
        );
        assert!(
            command.contains("--stack-info /etc/llmbench/profile/stack-info.json --vllm-profiler"),
            "{command}"
        );
        let named = fixtures::run(&format!(
            "{}  profiling: {{start: /start, stop: 'http://prof:9/stop'}}\n",
            fixtures::BASIC
        ));
        let command = container(&launcher_pod(&named, 0, &settings()).expect("builds"))
            .command
            .clone()
            .expect("command")
            .join(" ");
        assert!(
            command.contains("--profiler-start /start --profiler-stop http://prof:9/stop"),
            "{command}"
        );
        assert!(!command.contains("--stack-info"), "{command}");
        assert!(!command.contains("--vllm-profiler"), "{command}");
    }

    #[test]
    fn the_runs_prefix_cache_spec_becomes_launcher_flags() {
        let plain = container(
            &launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds"),
        )
        .command
        .clone()
        .expect("command")
        .join(" ");
        assert!(!plain.contains("prefix-cache"), "{plain}");
        let run = fixtures::run(&format!(
            "{}prefixCache: {{reset: true, warm: true}}\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert!(
            command.contains("--reset-prefix-cache --warm-prefix-cache"),
            "{command}"
        );
    }

    #[test]
    fn the_stacks_metrics_endpoints_become_launcher_flags() {
        let run = fixtures::run(&fixtures::BASIC.replace(
            "  model: meta",
            "  metricsEndpoints: [http://vllm-0:8000/metrics, http://epp:9090/metrics]\n  model: meta",
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert!(
            command.contains(
                "--metrics-endpoint http://vllm-0:8000/metrics --metrics-endpoint http://epp:9090/metrics"
            ),
            "{command}"
        );
    }

    #[test]
    fn a_running_launcher_declares_its_live_metrics_port() {
        let pod = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds");
        let ports = container(&pod).ports.clone().expect("ports");
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].name.as_deref(), Some("metrics"));
        assert_eq!(ports[0].container_port, 9464);
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        // The port it declares is the port it listens on.
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert!(
            command.contains("--metrics-listen $(POD_IP):9464"),
            "{command}"
        );
        // …on the pod's own IP, which the kubelet substitutes from the downward API.
        let env = container(&pod).env.clone().expect("env");
        let pod_ip = env.iter().find(|e| e.name == "POD_IP").expect("POD_IP");
        let field = pod_ip
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .expect("a fieldRef");
        assert_eq!(field.field_path, "status.podIP");
    }

    #[test]
    fn shards_wait_for_the_release_on_their_release_port_and_a_single_launcher_does_not() {
        let sharded = fixtures::run(&format!(
            "{}launcher:\n  parallelism: 4\n  startTimeout: 5m\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&sharded, 2, &settings()).expect("builds");
        let command = container(&pod).command.clone().expect("command").join(" ");
        // 5 minutes for the operator, then 2 more before the launcher gives up by itself.
        assert!(
            command.contains(
                "--shard 2/4 --interrupt-grace 5s --metrics-listen $(POD_IP):9464 --wait-for-release \
                 $(POD_IP):9465 --release-timeout 420s"
            ),
            "{command}"
        );
        let ports = container(&pod).ports.clone().expect("ports");
        let named: Vec<(Option<&str>, i32)> = ports
            .iter()
            .map(|p| (p.name.as_deref(), p.container_port))
            .collect();
        assert_eq!(
            named,
            vec![(Some("metrics"), 9464), (Some("release"), 9465)]
        );

        let single = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds");
        let command = container(&single).command.clone().expect("command");
        assert!(!command.contains(&"--wait-for-release".to_owned()));
    }

    #[test]
    fn shards_on_a_claim_without_read_write_many_share_a_node() {
        let sharded = fixtures::run(&format!("{}launcher:\n  parallelism: 2\n", fixtures::BASIC));
        let rwo = vec!["ReadWriteOnce".to_owned()];
        let rwx = vec!["ReadWriteMany".to_owned()];
        assert!(shards_share_a_node(&sharded, &rwo));
        assert!(shards_share_a_node(&sharded, &[]));
        assert!(!shards_share_a_node(&sharded, &rwx));
        assert!(!shards_share_a_node(&fixtures::run(fixtures::BASIC), &rwo));

        let mut pod = launcher_pod(&sharded, 1, &settings()).expect("builds");
        colocate_shards(&mut pod, &sharded).expect("has a uid");
        let terms = pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .clone()
            })
            .expect("required pod affinity");
        assert_eq!(terms.len(), 1);
        assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
        let selector = terms[0]
            .label_selector
            .as_ref()
            .and_then(|s| s.match_labels.clone())
            .expect("labels");
        // The run's uid label: shards of this run, never of an earlier run of the same name.
        let labels = pod.metadata.labels.clone().expect("labels");
        for (key, value) in &selector {
            assert_eq!(labels.get(key), Some(value), "{key}");
        }
        assert!(
            selector.contains_key("llmbench.dev/run-uid"),
            "{selector:?}"
        );
    }

    #[test]
    fn pods_that_do_not_run_a_benchmark_serve_no_metrics() {
        for extra in ["launcher:\n  debug: true\n", "skipRun: true\n"] {
            let run = fixtures::run(&format!("{}{extra}", fixtures::BASIC));
            let pod = launcher_pod(&run, 0, &settings()).expect("builds");
            assert_eq!(container(&pod).ports, None, "{extra}");
            let command = container(&pod).command.clone().expect("command");
            assert!(!command.contains(&"--metrics-listen".to_owned()), "{extra}");
        }
    }

    #[test]
    fn a_capacity_search_reaches_the_launcher_as_json() {
        let run = fixtures::run(&format!(
            "{}capacitySearch:\n  load: concurrency\n  slo: ['ttft_p99<=500ms']\n  maxPoints: 8\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let command = container(&pod).command.clone().expect("command");
        let at = command
            .iter()
            .position(|a| a == "--capacity-search")
            .expect("--capacity-search is passed");
        let json: serde_json::Value = serde_json::from_str(&command[at + 1]).expect("JSON");
        assert_eq!(
            json,
            serde_json::json!({"load": "concurrency", "slo": ["ttft_p99<=500ms"], "maxPoints": 8})
        );
        let plain = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds");
        assert!(
            !container(&plain)
                .command
                .clone()
                .expect("command")
                .contains(&"--capacity-search".to_owned())
        );
    }

    #[test]
    fn the_pod_gives_the_launcher_time_to_record_an_interrupted_run() {
        let pod = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds");
        let spec = pod.spec.as_ref().expect("spec");
        let grace = spec
            .termination_grace_period_seconds
            .expect("a termination grace period");
        // The launcher's own grace for requests in flight, then at least 30 s to write its reports.
        assert!(
            grace >= llmbench_core::launcher_command::DEFAULT_INTERRUPT_GRACE.as_secs() as i64 + 30,
            "{grace}"
        );
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert!(command.contains("--interrupt-grace 5s"), "{command}");
    }

    #[test]
    fn a_nested_results_dir_becomes_an_output_directory_and_a_one_component_run_id() {
        let mut run = fixtures::run(fixtures::BASIC);
        run.spec.results_dir = Some("team-a/bench-7".to_owned());
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert!(
            command.contains("--output /requests/team-a --run-id bench-7 "),
            "{command}"
        );
    }

    #[test]
    fn the_pod_is_locked_down_and_carries_no_api_credentials() {
        let pod = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds");
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.automount_service_account_token, Some(false));
        let pod_security = spec.security_context.as_ref().expect("pod security");
        assert_eq!(pod_security.run_as_non_root, Some(true));
        assert_eq!(
            pod_security
                .seccomp_profile
                .as_ref()
                .map(|s| s.type_.as_str()),
            Some("RuntimeDefault")
        );
        let security = container(&pod)
            .security_context
            .as_ref()
            .expect("container security");
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(
            security.capabilities.as_ref().and_then(|c| c.drop.clone()),
            Some(vec!["ALL".to_owned()])
        );
        let env = container(&pod).env.clone().unwrap_or_default();
        assert!(
            env.iter()
                .all(|e| !e.name.contains("KUBECONFIG") && !e.name.contains("CONTEXT"))
        );
        assert!(
            env.iter().all(|e| e.name != "HF_TOKEN"),
            "no token unless a secret is referenced"
        );
    }

    #[test]
    fn the_hf_token_comes_only_from_the_referenced_secret() {
        let run = fixtures::run(&format!(
            "{}launcher:\n  hfTokenSecretRef:\n    name: hf\n    key: token\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let env = container(&pod).env.clone().unwrap_or_default();
        let token = env
            .iter()
            .find(|e| e.name == "HF_TOKEN")
            .expect("HF_TOKEN is set");
        assert_eq!(token.value, None, "never a literal value");
        let secret = token
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
            .expect("secret ref");
        assert_eq!((secret.name.as_str(), secret.key.as_str()), ("hf", "token"));
    }

    #[test]
    fn labels_are_unique_to_the_run_and_name_the_launcher_index() {
        let run = fixtures::run(&format!("{}launcher:\n  parallelism: 3\n", fixtures::BASIC));
        let pod = launcher_pod(&run, 2, &settings()).expect("builds");
        let labels = pod.metadata.labels.expect("labels");
        assert_eq!(
            labels[RUN_UID_LABEL],
            "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab"
        );
        assert_eq!(labels[LAUNCHER_INDEX_LABEL], "2");
        assert!(
            container(&launcher_pod(&run, 2, &settings()).expect("builds"))
                .command
                .clone()
                .expect("command")
                .contains(&"2/3".to_owned())
        );
    }

    #[test]
    fn spec_resources_scheduling_and_image_override_the_defaults() {
        let run = fixtures::run(&format!(
            "{}launcher:\n  image: my/launcher:dev\n  serviceAccountName: bench\n  nodeSelector:\n    pool: cpu\n  \
             tolerations:\n  - key: dedicated\n    operator: Exists\n  resources:\n    limits:\n      cpu: '4'\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some("bench"));
        assert_eq!(
            spec.node_selector.as_ref().expect("selector")["pool"],
            "cpu"
        );
        assert_eq!(
            spec.tolerations.as_ref().expect("tolerations")[0]
                .key
                .as_deref(),
            Some("dedicated")
        );
        assert_eq!(container(&pod).image.as_deref(), Some("my/launcher:dev"));
        let limits = container(&pod)
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .expect("limits");
        assert_eq!(limits["cpu"], Quantity("4".to_owned()));
    }

    /// The chart's `launcher.defaults` as a platform team would set them.
    fn platform_defaults() -> LauncherSettings {
        LauncherSettings {
            defaults: LauncherDefaults::from_json(
                r#"{"resources":{"limits":{"cpu":"8"}},"nodeSelector":{"pool":"bench"},
                    "tolerations":[{"key":"bench","operator":"Exists"}],"imagePullSecrets":[{"name":"regcred"}],
                    "serviceAccountName":"bench-runner","hfTokenSecretRef":{"name":"hf-platform","key":"t"}}"#,
            )
            .expect("valid defaults"),
            ..settings()
        }
    }

    #[test]
    fn a_run_that_sets_nothing_inherits_every_platform_default() {
        let settings = platform_defaults();
        for pod in [
            launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings).expect("builds"),
            merge_pod(
                &fixtures::run(&format!("{}launcher:\n  parallelism: 2\n", fixtures::BASIC)),
                &settings,
            )
            .expect("builds"),
        ] {
            let spec = pod.spec.as_ref().expect("spec");
            assert_eq!(spec.service_account_name.as_deref(), Some("bench-runner"));
            assert_eq!(
                spec.node_selector.as_ref().expect("selector")["pool"],
                "bench"
            );
            assert_eq!(
                spec.tolerations.as_ref().expect("tolerations")[0]
                    .key
                    .as_deref(),
                Some("bench")
            );
            assert_eq!(
                spec.image_pull_secrets.as_ref().expect("pull secrets")[0].name,
                "regcred"
            );
            let limits = container(&pod)
                .resources
                .as_ref()
                .and_then(|r| r.limits.clone())
                .expect("limits");
            assert_eq!(limits["cpu"], Quantity("8".to_owned()));
        }
        let pod = launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings).expect("builds");
        let env = container(&pod).env.clone().unwrap_or_default();
        let secret = env
            .iter()
            .find(|e| e.name == "HF_TOKEN")
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.secret_key_ref.as_ref())
            .expect("HF_TOKEN from the default secret");
        assert_eq!(
            (secret.name.as_str(), secret.key.as_str()),
            ("hf-platform", "t")
        );
    }

    #[test]
    fn a_runs_own_launcher_fields_win_over_the_platform_defaults_whole() {
        let run = fixtures::run(&format!(
            "{}launcher:\n  serviceAccountName: mine\n  nodeSelector:\n    zone: a\n  \
             tolerations:\n  - key: gpu\n    operator: Exists\n  resources:\n    limits:\n      cpu: '2'\n  \
             hfTokenSecretRef:\n    name: hf-mine\n    key: token\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &platform_defaults()).expect("builds");
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some("mine"));
        let selector = spec.node_selector.as_ref().expect("selector");
        assert_eq!(selector.len(), 1, "replaced, not merged: {selector:?}");
        assert_eq!(selector["zone"], "a");
        let tolerations = spec.tolerations.as_ref().expect("tolerations");
        assert_eq!(tolerations.len(), 1);
        assert_eq!(tolerations[0].key.as_deref(), Some("gpu"));
        let limits = container(&pod)
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .expect("limits");
        assert_eq!(limits["cpu"], Quantity("2".to_owned()));
        let env = container(&pod).env.clone().unwrap_or_default();
        let hf: Vec<_> = env.iter().filter(|e| e.name == "HF_TOKEN").collect();
        assert_eq!(hf.len(), 1);
        let secret = hf[0]
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
            .expect("secret ref");
        assert_eq!(secret.name, "hf-mine");
        assert_eq!(
            spec.image_pull_secrets.as_ref().expect("pull secrets")[0].name,
            "regcred",
            "runs have no pull-secret field, so the platform's always apply"
        );
    }

    #[test]
    fn debug_keeps_a_sleeping_pod() {
        let run = fixtures::run(&format!("{}launcher:\n  debug: true\n", fixtures::BASIC));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        assert_eq!(
            container(&pod).command,
            Some(vec!["sleep".to_owned(), "2147483647".to_owned()])
        );
    }

    #[test]
    fn skip_run_starts_a_collector_that_reports_on_the_results_dir() {
        let run = fixtures::run(&format!(
            "{}skipRun: true\nresultsDir: earlier/bench-0\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        assert_eq!(
            container(&pod).command.clone().expect("command").join(" "),
            "llmbench report /requests/earlier/bench-0 --summary-file /dev/termination-log"
        );
    }

    #[test]
    fn results_dir_replaces_the_default_run_id() {
        let run = fixtures::run(&format!("{}resultsDir: nightly\n", fixtures::BASIC));
        assert_eq!(run_id(&run).expect("id"), "nightly");
        assert_eq!(
            run_id(&fixtures::run(fixtures::BASIC)).expect("id"),
            "bench-1-0f3c9a2e"
        );
    }

    #[test]
    fn an_empty_dir_run_mounts_scratch_space_instead_of_a_claim() {
        let run = fixtures::run(&format!(
            "{}storage:\n  emptyDir:\n    sizeLimit: 5Gi\n",
            fixtures::BASIC
        ));
        let pod = launcher_pod(&run, 0, &settings()).expect("builds");
        let volumes = pod.spec.clone().and_then(|s| s.volumes).expect("volumes");
        let workload = volumes
            .iter()
            .find(|v| v.name == "workload")
            .expect("workload volume");
        assert!(workload.persistent_volume_claim.is_none());
        assert_eq!(
            workload
                .empty_dir
                .as_ref()
                .and_then(|e| e.size_limit.clone()),
            Some(Quantity("5Gi".to_owned()))
        );
        // The emptyDir goes with the pod: the launcher writes its results into its log for the operator to keep.
        let command = container(&pod).command.clone().expect("command").join(" ");
        assert!(command.contains("--results-to-log 4194304"), "{command}");
        let on_claim =
            launcher_pod(&fixtures::run(fixtures::BASIC), 0, &settings()).expect("builds");
        let command = container(&on_claim)
            .command
            .clone()
            .expect("command")
            .join(" ");
        assert!(!command.contains("--results-to-log"), "{command}");
    }

    #[test]
    fn a_run_without_a_uid_cannot_be_built_on() {
        let mut run = fixtures::run(fixtures::BASIC);
        run.metadata.uid = None;
        assert!(matches!(
            launcher_pod(&run, 0, &settings()),
            Err(BuildError::MissingMetadata { .. })
        ));
    }

    #[test]
    fn a_run_named_with_253_characters_gets_valid_label_values_and_child_names() {
        let mut run = fixtures::run(&format!(
            "{}launcher:\n  parallelism: 1024\n",
            fixtures::BASIC
        ));
        let name = format!("{}.{}", "r".repeat(126), "s".repeat(126));
        assert_eq!(name.len(), 253, "the longest name the API server admits");
        run.metadata.name = Some(name.clone());
        let pods = [
            launcher_pod(&run, 0, &settings()).expect("builds"),
            launcher_pod(&run, 1023, &settings()).expect("builds"),
            merge_pod(&run, &settings()).expect("builds"),
        ];
        let mut names = Vec::new();
        for pod in &pods {
            let pod_name = pod.metadata.name.clone().expect("name");
            assert!(pod_name.len() <= 253, "{pod_name}");
            assert!(pod_name.starts_with("rrrr"), "{pod_name}");
            names.push(pod_name);
            for (key, value) in pod.metadata.labels.as_ref().expect("labels") {
                assert!(value.len() <= 63, "label {key}={value}");
                assert!(
                    value
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphanumeric())
                        && value
                            .chars()
                            .last()
                            .is_some_and(|c| c.is_ascii_alphanumeric()),
                    "label {key}={value}"
                );
            }
            let volumes = pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.clone())
                .expect("volumes");
            let config_map = volumes
                .iter()
                .find_map(|v| v.config_map.as_ref())
                .expect("profile volume");
            assert_eq!(config_map.name, profile_config_map_name(&run));
        }
        names.dedup();
        assert_eq!(
            names.len(),
            3,
            "launchers and the merge pod keep distinct names: {names:?}"
        );
        assert!(profile_config_map_name(&run).len() <= 253);
        let id = run_id(&run).expect("id");
        assert!(id.len() <= 63 + 9 && id.ends_with("-0f3c9a2e"), "{id}");
        // A name that fits is used as it is.
        let short = fixtures::run(fixtures::BASIC);
        assert_eq!(launcher_pod_name(&short, 3), "bench-1-launcher-3");
        assert_eq!(merge_pod_name(&short), "bench-1-merge");
        assert_eq!(profile_config_map_name(&short), "bench-1-profile");
    }
}
