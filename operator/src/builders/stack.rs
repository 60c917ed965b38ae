//! A run's standalone stack (`spec.stack.standalone`): the Deployment and Service `<run>-stack`, owned by the run,
//! and the stack-info record the launchers are given (`llmbench run --stack-info`), as llm-d-benchmark's
//! standalone mode stands one up.
//!
//! Upstream (llm-d/llm-d-benchmark): `config/templates/jinja/14_standalone-deployment_yaml.j2` (one Deployment,
//! `replicas: 1`, a readinessProbe `httpGet` on `/health` at the vLLM port, `periodSeconds: 5`,
//! `failureThreshold: 3`), `15_standalone-service_yaml.j2` (a ClusterIP Service onto that port) and the
//! `build_standalone_vllm_command` macro of `_macros.j2` (`vllm serve <model> --host 0.0.0.0 --served-model-name
//! <model> --port … --max-model-len … --tensor-parallel-size …`). What we leave out, and why: upstream's
//! startupProbe (its 60 × 30 s is what `readiness.timeout` says here, judged by the operator so the run can fail
//! with a reason) and its tcpSocket livenessProbe (a restart mid-run must fail the run, not hide behind a
//! restarted server), and its defaulted `--block-size`, `--load-format`, `--gpu-memory-utilization` flags (vLLM's
//! own defaults stand unless `extraArgs` sets them).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, Service, ServicePort,
    ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use llmbench_api::v1alpha1::{BenchmarkRun, DEFAULT_STANDALONE_IMAGE, StandaloneStack};
use llmbench_core::stack_info::StackInfo;

use super::names::{MAX_LABEL_VALUE, bounded_name, label_value};
use super::{BuildError, FIELD_MANAGER, PROFILE_MOUNT_PATH, RUN_LABEL, owner_reference, uid};

/// Label carrying the run's UID on its stack's objects. Not [`super::RUN_UID_LABEL`]: that one selects the run's
/// launcher pods (and their affinity), which the stack's pod must never be taken for.
pub const STACK_OF_LABEL: &str = "llmbench.dev/stack-of";
/// The stack's container, whose log the operator reads.
pub const STACK_CONTAINER: &str = "stack";
/// The name of the stack's port, on the container and the Service.
pub const STACK_PORT_NAME: &str = "http";
/// The key of the stack-info record in the run's ConfigMap, and its file name in the launcher pod.
pub const STACK_INFO_FILE: &str = "stack-info.json";
/// The readinessProbe's period and failure threshold: llm-d-benchmark's standalone readiness probe.
const PROBE_PERIOD_SECONDS: i32 = 5;
const PROBE_FAILURE_THRESHOLD: i32 = 3;
/// A loaded server may answer /health late under load; the kubelet's default of 1 s would call it unready.
const PROBE_TIMEOUT_SECONDS: i32 = 5;

/// The run's standalone stack, when it has one.
pub fn standalone(run: &BenchmarkRun) -> Option<&StandaloneStack> {
    run.spec.stack.standalone.as_ref()
}

/// `<run>-stack`, the Deployment's and the Service's name. A Service name is a DNS-1035 label: at most 63
/// characters, no dots, starting with a letter; a run's name may be a longer DNS subdomain, so dots become dashes,
/// a name that starts with a digit gets an `s-` in front, and a long one is shortened with a hash.
pub fn stack_name(run: &BenchmarkRun) -> String {
    let mut base = run.name_any().replace('.', "-");
    if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
        base.insert_str(0, "s-");
    }
    bounded_name(&format!("{base}-stack"), MAX_LABEL_VALUE)
}

/// The stack's base URL as the launchers reach it, through its Service.
pub fn stack_url(run: &BenchmarkRun, stack: &StandaloneStack) -> String {
    format!(
        "http://{}.{}.svc:{}",
        stack_name(run),
        run.namespace().unwrap_or_default(),
        stack.port
    )
}

/// Labels of the stack's objects; the selector is [`STACK_OF_LABEL`] alone.
pub fn stack_labels(run: &BenchmarkRun) -> Result<BTreeMap<String, String>, BuildError> {
    Ok(BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "llmbench".to_owned()),
        ("app.kubernetes.io/component".to_owned(), "stack".to_owned()),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            FIELD_MANAGER.to_owned(),
        ),
        (RUN_LABEL.to_owned(), label_value(&run.name_any())),
        (STACK_OF_LABEL.to_owned(), uid(run)?.to_owned()),
    ]))
}

/// The label selector of the stack's pods.
pub fn stack_selector(run: &BenchmarkRun) -> Result<String, BuildError> {
    Ok(format!("{STACK_OF_LABEL}={}", uid(run)?))
}

/// The image the stack runs.
pub fn stack_image(stack: &StandaloneStack) -> String {
    stack
        .image
        .clone()
        .unwrap_or_else(|| DEFAULT_STANDALONE_IMAGE.to_owned())
}

/// The container's command and args: `vllm serve` with llm-d-benchmark's standalone args unless given, then
/// `extraArgs`. An empty command means the image's entrypoint.
pub fn stack_command(run: &BenchmarkRun, stack: &StandaloneStack) -> (Vec<String>, Vec<String>) {
    let model = &run.spec.stack.model;
    let (command, mut args) = match (&stack.args, stack.command.is_empty()) {
        (Some(args), _) => (stack.command.clone(), args.clone()),
        (None, no_command) => {
            let command = if no_command {
                vec!["vllm".to_owned(), "serve".to_owned()]
            } else {
                stack.command.clone()
            };
            let mut args = vec![
                model.clone(),
                "--host".to_owned(),
                "0.0.0.0".to_owned(),
                "--port".to_owned(),
                stack.port.to_string(),
                "--served-model-name".to_owned(),
                model.clone(),
            ];
            if let Some(len) = run.spec.stack.max_model_len {
                args.extend(["--max-model-len".to_owned(), len.to_string()]);
            }
            if let Some(tp) = stack.tensor_parallel_size {
                args.extend(["--tensor-parallel-size".to_owned(), tp.to_string()]);
            }
            (command, args)
        }
    };
    args.extend(stack.extra_args.iter().cloned());
    (command, args)
}

/// The stack-info record (`llmbench run --stack-info`): how the stack was started. `env` holds the literal values
/// only: a value from a Secret or a field is not the operator's to copy.
pub fn stack_info(run: &BenchmarkRun, stack: &StandaloneStack) -> StackInfo {
    let (command, args) = stack_command(run, stack);
    let env = stack
        .env
        .iter()
        .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
        .collect();
    StackInfo::new(Some(stack_image(stack)), command, args, env)
}

/// Where the launchers find the stack-info record: the run's ConfigMap, mounted with the profile.
pub fn stack_info_path() -> String {
    format!("{PROFILE_MOUNT_PATH}/{STACK_INFO_FILE}")
}

fn metadata(run: &BenchmarkRun) -> Result<ObjectMeta, BuildError> {
    Ok(ObjectMeta {
        name: Some(stack_name(run)),
        namespace: run.namespace(),
        labels: Some(stack_labels(run)?),
        owner_references: Some(vec![owner_reference(run)?]),
        ..ObjectMeta::default()
    })
}

/// The stack's Deployment: one replica of the server, ready when `readiness.path` answers.
pub fn stack_deployment(
    run: &BenchmarkRun,
    stack: &StandaloneStack,
) -> Result<Deployment, BuildError> {
    let labels = stack_labels(run)?;
    let (command, args) = stack_command(run, stack);
    let port = i32::from(stack.port);
    let container = Container {
        name: STACK_CONTAINER.to_owned(),
        image: Some(stack_image(stack)),
        command: Some(command).filter(|c| !c.is_empty()),
        args: Some(args).filter(|a| !a.is_empty()),
        env: Some(stack.env.clone()).filter(|e| !e.is_empty()),
        ports: Some(vec![ContainerPort {
            name: Some(STACK_PORT_NAME.to_owned()),
            container_port: port,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some(stack.readiness.path.clone()),
                port: IntOrString::Int(port),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(PROBE_PERIOD_SECONDS),
            failure_threshold: Some(PROBE_FAILURE_THRESHOLD),
            timeout_seconds: Some(PROBE_TIMEOUT_SECONDS),
            ..Probe::default()
        }),
        resources: stack.resources.clone(),
        ..Container::default()
    };
    Ok(Deployment {
        metadata: metadata(run)?,
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    STACK_OF_LABEL.to_owned(),
                    uid(run)?.to_owned(),
                )])),
                ..LabelSelector::default()
            },
            // One server at a time: a GPU pod cannot surge beside its predecessor.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_owned()),
                ..DeploymentStrategy::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    node_selector: Some(stack.node_selector.clone()).filter(|s| !s.is_empty()),
                    tolerations: Some(stack.tolerations.clone()).filter(|t| !t.is_empty()),
                    // Service links would put `<SERVICE>_PORT=tcp://…` variables in the server's environment, and
                    // vLLM reads `VLLM_PORT` as its own setting: a Service named `vllm` in the namespace breaks it.
                    enable_service_links: Some(false),
                    // The server needs no API access.
                    automount_service_account_token: Some(false),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    })
}

/// The stack's Service: a ClusterIP on the server's port.
pub fn stack_service(run: &BenchmarkRun, stack: &StandaloneStack) -> Result<Service, BuildError> {
    Ok(Service {
        metadata: metadata(run)?,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(BTreeMap::from([(
                STACK_OF_LABEL.to_owned(),
                uid(run)?.to_owned(),
            )])),
            ports: Some(vec![ServicePort {
                name: Some(STACK_PORT_NAME.to_owned()),
                port: i32::from(stack.port),
                target_port: Some(IntOrString::String(STACK_PORT_NAME.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;
    use serde_json::json;

    const STANDALONE: &str = "
harness: inference-perf
workload:
  builtin: sanity_random
stack:
  model: meta-llama/Llama-3.1-8B-Instruct
  maxModelLen: 8192
  standalone:
    tensorParallelSize: 2
    extraArgs: [--enable-prefix-caching]
    env:
    - {name: VLLM_LOGGING_LEVEL, value: DEBUG}
    - name: HF_TOKEN
      valueFrom: {secretKeyRef: {name: hf, key: token}}
    resources:
      limits: {nvidia.com/gpu: '2'}
";

    fn run() -> BenchmarkRun {
        fixtures::run(STANDALONE)
    }

    fn stack(run: &BenchmarkRun) -> &StandaloneStack {
        standalone(run).expect("standalone")
    }

    #[test]
    fn the_default_command_is_llm_d_benchmarks_vllm_serve_with_the_runs_model_length_and_parallelism()
     {
        let run = run();
        let (command, args) = stack_command(&run, stack(&run));
        assert_eq!(command, ["vllm", "serve"]);
        // By hand from _macros.j2's build_standalone_vllm_command: model, host, port (default 8000), served name,
        // then --max-model-len from stack.maxModelLen and --tensor-parallel-size, then the extra flags.
        assert_eq!(
            args.join(" "),
            "meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 8000 --served-model-name \
             meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --tensor-parallel-size 2 --enable-prefix-caching"
        );
    }

    #[test]
    fn given_args_replace_the_default_ones_and_run_under_the_images_entrypoint() {
        let run = fixtures::run(&STANDALONE.replace(
            "    tensorParallelSize: 2\n",
            "    image: llmbench:dev\n    args: [sim, --port, '9000']\n",
        ));
        let (command, args) = stack_command(&run, stack(&run));
        assert!(command.is_empty(), "{command:?}");
        assert_eq!(args, ["sim", "--port", "9000", "--enable-prefix-caching"]);
        let deployment = stack_deployment(&run, stack(&run)).expect("builds");
        let container = &deployment
            .spec
            .expect("spec")
            .template
            .spec
            .expect("pod")
            .containers[0];
        assert_eq!(container.command, None, "the image's entrypoint runs");
        assert_eq!(container.image.as_deref(), Some("llmbench:dev"));
    }

    #[test]
    fn the_deployment_is_one_replica_owned_by_the_run_with_a_readiness_probe_on_health() {
        let run = run();
        let deployment = stack_deployment(&run, stack(&run)).expect("builds");
        let value = serde_json::to_value(&deployment).expect("serializes");
        // Worked out by hand from the builder: the names, the labels, the selector on the run's uid only, the
        // probe on /health at 8000 every 5 s with 3 failures and a 5 s timeout.
        assert_eq!(value["metadata"]["name"], "bench-1-stack");
        assert_eq!(value["metadata"]["namespace"], "team-a");
        assert_eq!(
            value["metadata"]["ownerReferences"][0]["kind"],
            "BenchmarkRun"
        );
        assert_eq!(value["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            value["spec"]["selector"],
            json!({"matchLabels": {"llmbench.dev/stack-of": "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab"}})
        );
        assert_eq!(value["spec"]["replicas"], 1);
        assert_eq!(value["spec"]["strategy"]["type"], "Recreate");
        let labels = &value["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/component"], "stack");
        assert_eq!(labels["llmbench.dev/run"], "bench-1");
        assert!(
            labels.get("llmbench.dev/run-uid").is_none(),
            "the stack pod must not be taken for a launcher: {labels}"
        );
        let container = &value["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["name"], "stack");
        assert_eq!(container["image"], DEFAULT_STANDALONE_IMAGE);
        assert_eq!(
            container["readinessProbe"],
            json!({"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5, "failureThreshold": 3,
                   "timeoutSeconds": 5})
        );
        assert_eq!(
            container["ports"],
            json!([{"name": "http", "containerPort": 8000, "protocol": "TCP"}])
        );
        assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], "2");
        assert_eq!(
            container["env"][1]["valueFrom"]["secretKeyRef"]["name"],
            "hf"
        );
        assert_eq!(
            value["spec"]["template"]["spec"]["enableServiceLinks"],
            false
        );
    }

    #[test]
    fn the_service_fronts_the_stacks_port_by_name_and_the_url_names_it_in_the_runs_namespace() {
        let run = run();
        let service = stack_service(&run, stack(&run)).expect("builds");
        let value = serde_json::to_value(&service).expect("serializes");
        assert_eq!(
            value["spec"],
            json!({
                "type": "ClusterIP",
                "selector": {"llmbench.dev/stack-of": "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab"},
                "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
            })
        );
        assert_eq!(
            stack_url(&run, stack(&run)),
            "http://bench-1-stack.team-a.svc:8000"
        );
    }

    #[test]
    fn the_stack_info_has_the_image_the_command_line_and_the_literal_env_only() {
        let run = run();
        assert_eq!(
            serde_json::to_value(stack_info(&run, stack(&run))).expect("JSON"),
            json!({
                "schema": "llmbench.stack-info/v1",
                "image": "docker.io/vllm/vllm-openai:v0.26.0",
                "command": ["vllm", "serve"],
                "args": ["meta-llama/Llama-3.1-8B-Instruct", "--host", "0.0.0.0", "--port", "8000",
                         "--served-model-name", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192",
                         "--tensor-parallel-size", "2", "--enable-prefix-caching"],
                "env": {"VLLM_LOGGING_LEVEL": "DEBUG"}
            })
        );
        assert_eq!(stack_info_path(), "/etc/llmbench/profile/stack-info.json");
    }

    #[test]
    fn a_stack_name_is_a_dns_label_whatever_the_runs_name() {
        let named = |name: &str| {
            let mut run = run();
            run.metadata.name = Some(name.to_owned());
            stack_name(&run)
        };
        assert_eq!(named("bench-1"), "bench-1-stack");
        assert_eq!(named("llama.8b"), "llama-8b-stack");
        assert_eq!(named("8b-run"), "s-8b-run-stack");
        let long = named(&"x".repeat(100));
        assert!(long.len() <= 63 && long.starts_with("xxx"), "{long}");
    }
}
