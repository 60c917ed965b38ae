//! Where a run's standalone stack is, from its Deployment and pods alone, and what its log says about loading the
//! model. Pure: the reconciler reads the objects and the log, and writes back what comes out.
//!
//! Before the launchers start, the stack is *starting* until its Deployment is available with a ready pod, or
//! *failed* when it cannot start at all (an image that cannot be pulled, a container that cannot be created or
//! crash-loops). Once the launchers run against a pod, that pod is the heartbeat: the stack *failed* as soon as
//! its container restarts or terminates, it stops being ready, it is deleted or replaced, or the Deployment is no
//! longer available — a benchmark against a server that restarted in between measures two servers.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt;
use llmbench_api::summary::v1::ModelLoad;
use llmbench_api::v1alpha1::StackStatus;
use llmbench_api::vllm_log::{self, LogSource, ModelLoadSummary};

use crate::builders::stack::STACK_CONTAINER;

/// The condition that says whether the run's standalone stack is ready: False/`StackStarting` while it starts,
/// True/`StackReady` once the launchers may start, False/`StackNotReady` or `StackFailed` when it failed.
pub const STACK_READY: &str = "StackReady";

/// Where the stack is.
#[derive(Debug, Clone, PartialEq)]
pub enum StackState {
    /// Not available yet: what it waits on, in words.
    Starting { detail: String },
    /// Available, with this ready pod, and the restarts its container had by then.
    Ready { pod: String, restarts: i32 },
    /// It died or cannot start: the pod (if any) and why, in words.
    Failed {
        pod: Option<String>,
        detail: String,
        /// Whether the container restarted: its previous instance's log is the one that says why.
        restarted: bool,
    },
}

/// Waiting reasons that do not resolve while a benchmark waits: the stack fails at once instead of at its timeout.
const HOPELESS_WAITING: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

fn stack_container(pod: &Pod) -> Option<&ContainerStatus> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .iter()
        .find(|c| c.name == STACK_CONTAINER)
        .or(statuses.first())
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn available(deployment: Option<&Deployment>) -> bool {
    deployment
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.available_replicas)
        .is_some_and(|n| n >= 1)
}

/// How the container's last instance ended: "OOMKilled, exit code 137" or "Error, exit code 1, signal 9".
fn termination(status: &ContainerStatus) -> Option<String> {
    let terminated = status
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .or_else(|| status.last_state.as_ref()?.terminated.as_ref())?;
    let signal = terminated
        .signal
        .map(|s| format!(", signal {s}"))
        .unwrap_or_default();
    Some(format!(
        "{}, exit code {}{signal}",
        terminated.reason.as_deref().unwrap_or("Error"),
        terminated.exit_code
    ))
}

/// Why `pod` cannot go on serving, if it cannot. `restarts_allowed` is how many restarts the container had when
/// the launchers started (none count before that: the timeout judges a slow or flaky start).
fn pod_failure(pod: &Pod, restarts_allowed: Option<i32>) -> Option<String> {
    let name = pod.name_any();
    let status = pod.status.as_ref();
    if status.and_then(|s| s.reason.as_deref()) == Some("Evicted") {
        return Some(format!(
            "stack pod {name} was evicted: {}",
            status
                .and_then(|s| s.message.as_deref())
                .unwrap_or("no message")
        ));
    }
    if status.and_then(|s| s.phase.as_deref()) == Some("Failed") {
        return Some(format!(
            "stack pod {name} failed: {}",
            status
                .and_then(|s| s.message.as_deref())
                .unwrap_or("no message")
        ));
    }
    let container = stack_container(pod)?;
    if let Some(waiting) = container.state.as_ref().and_then(|s| s.waiting.as_ref())
        && let Some(reason) = waiting.reason.as_deref()
        && HOPELESS_WAITING.contains(&reason)
    {
        let last = termination(container)
            .map(|t| format!("; last terminated: {t}"))
            .unwrap_or_default();
        return Some(format!(
            "stack pod {name} cannot run its server: {reason}: {}{last}",
            waiting.message.as_deref().unwrap_or("no message")
        ));
    }
    let allowed = restarts_allowed?;
    if container
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .is_some()
        || container.restart_count > allowed
    {
        return Some(format!(
            "the stack's server in pod {name} terminated ({}) and was restarted {} time(s) during the run",
            termination(container).unwrap_or_else(|| "no termination state".to_owned()),
            container.restart_count - allowed
        ));
    }
    None
}

/// Words for a pod that is not ready yet: its phase and why.
fn starting_detail(pod: &Pod) -> String {
    let name = pod.name_any();
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.as_deref().unwrap_or("Pending");
    let unscheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| {
            format!(
                ": {}: {}",
                c.reason.as_deref().unwrap_or("Unschedulable"),
                c.message.as_deref().unwrap_or_default()
            )
        });
    let container = stack_container(pod).and_then(|c| {
        let waiting = c.state.as_ref()?.waiting.as_ref()?;
        Some(format!(
            ", container waiting: {}",
            waiting.reason.as_deref().unwrap_or("unknown")
        ))
    });
    let restarts = stack_container(pod)
        .filter(|c| c.restart_count > 0)
        .map(|c| {
            format!(
                ", {} restart(s), last terminated: {}",
                c.restart_count,
                termination(c).unwrap_or_default()
            )
        });
    let ready = if phase == "Running" {
        ", not ready yet (readiness probe)"
    } else {
        ""
    };
    format!(
        "stack pod {name}: {phase}{}{}{}{ready}",
        unscheduled.unwrap_or_default(),
        container.unwrap_or_default(),
        restarts.unwrap_or_default()
    )
}

/// Where the stack is. `ran_against` is the pod the launchers were started against and the restarts its container
/// had then (`status.stack`), `None` before they start.
pub fn stack_state(
    deployment: Option<&Deployment>,
    pods: &[Pod],
    ran_against: Option<(&str, i32)>,
) -> StackState {
    if let Some((name, restarts)) = ran_against {
        let Some(pod) = pods.iter().find(|p| p.name_any() == name) else {
            return StackState::Failed {
                pod: Some(name.to_owned()),
                detail: format!("stack pod {name} disappeared during the run"),
                restarted: false,
            };
        };
        if let Some(detail) = pod_failure(pod, Some(restarts)) {
            let restarted = stack_container(pod).is_some_and(|c| c.restart_count > restarts);
            return StackState::Failed {
                pod: Some(name.to_owned()),
                detail,
                restarted,
            };
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return StackState::Failed {
                pod: Some(name.to_owned()),
                detail: format!("stack pod {name} was deleted during the run"),
                restarted: false,
            };
        }
        if !is_ready(pod) || !available(deployment) {
            return StackState::Failed {
                pod: Some(name.to_owned()),
                detail: format!(
                    "stack pod {name} stopped being ready during the run (its readiness probe fails); the \
                     Deployment is {}available",
                    if available(deployment) { "" } else { "not " }
                ),
                restarted: false,
            };
        }
        return StackState::Ready {
            pod: name.to_owned(),
            restarts,
        };
    }
    let live: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    if let Some((pod, detail)) = live.iter().find_map(|p| Some((*p, pod_failure(p, None)?))) {
        return StackState::Failed {
            pod: Some(pod.name_any()),
            detail,
            restarted: stack_container(pod).is_some_and(|c| c.restart_count > 0),
        };
    }
    if available(deployment)
        && let Some(pod) = live.iter().find(|p| is_ready(p))
    {
        return StackState::Ready {
            pod: pod.name_any(),
            restarts: stack_container(pod).map_or(0, |c| c.restart_count),
        };
    }
    let detail = match (deployment, live.first()) {
        (None, _) => "the stack's Deployment is not created yet".to_owned(),
        (Some(_), None) => "the stack's Deployment has no pod yet".to_owned(),
        (Some(_), Some(pod)) => starting_detail(pod),
    };
    StackState::Starting { detail }
}

/// The StackNotReady message: the timeout, what the stack was waiting on and its log tail.
pub fn not_ready_message(timeout: &str, detail: &str, log_tail: Option<&str>) -> String {
    let mut message = format!(
        "the standalone stack did not become ready within spec.stack.standalone.readiness.timeout ({timeout}); \
         {detail}"
    );
    append_tail(&mut message, log_tail);
    message
}

/// The StackNotReady message of a stack that cannot start at all (its image, its container, a crash loop).
pub fn cannot_start_message(detail: &str, log_tail: Option<&str>) -> String {
    let mut message = format!("the standalone stack cannot start: {detail}");
    append_tail(&mut message, log_tail);
    message
}

/// The StackFailed message: what happened to the stack, that the launchers were stopped keeping what they
/// measured, and its log tail.
pub fn failed_message(detail: &str, log_tail: Option<&str>) -> String {
    let mut message = format!(
        "{detail}; the launchers were stopped, and what they measured until then is on the workload volume, \
         marked interrupted"
    );
    append_tail(&mut message, log_tail);
    message
}

fn append_tail(message: &mut String, log_tail: Option<&str>) {
    if let Some(tail) = log_tail.map(str::trim).filter(|t| !t.is_empty()) {
        message.push_str("\nstack log tail:\n");
        message.push_str(tail);
    }
}

/// The model-load figures of a stack pod's log, as llm-d-benchmark's nop harness reads the vLLM pod's log
/// (`workload/harnesses/nop_functions.py`, `parse_logs`): `core::vllm_log`, the very parser the launcher's
/// `--vllm-log` uses. The server's name is the pod's and its container's, as upstream names it (`<pod>
/// <container>`).
pub fn model_load(
    log: &str,
    pod: &str,
    container: &str,
    model: &str,
    year: i32,
) -> Result<ModelLoad, String> {
    let source = LogSource {
        name: format!("{pod} {container}"),
        model: model.to_owned(),
        year,
    };
    let analysis = vllm_log::analyze(log, &source).map_err(|e| e.to_string())?;
    Ok(ModelLoad::from(&ModelLoadSummary::new(&analysis)))
}

/// `status.stack` before anything about readiness is known.
pub fn initial_status(deployment: String, url: String, image: String) -> StackStatus {
    StackStatus {
        service: deployment.clone(),
        deployment,
        url,
        image,
        ready: false,
        pod: None,
        restarts: None,
        deleted: false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
        PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn deployment(available: i32) -> Deployment {
        Deployment {
            status: Some(DeploymentStatus {
                available_replicas: Some(available),
                ..DeploymentStatus::default()
            }),
            ..Deployment::default()
        }
    }

    fn pod(name: &str, ready: bool, restarts: i32, state: ContainerState) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.status = Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: if ready { "True" } else { "False" }.to_owned(),
                ..PodCondition::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "stack".to_owned(),
                restart_count: restarts,
                state: Some(state),
                last_state: (restarts > 0).then(|| ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 137,
                        reason: Some("OOMKilled".to_owned()),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        });
        pod
    }

    fn running() -> ContainerState {
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_owned()),
                message: Some("back-off pulling image \"nope:1\"".to_owned()),
            }),
            ..ContainerState::default()
        }
    }

    #[test]
    fn a_stack_is_ready_once_its_deployment_is_available_with_a_ready_pod() {
        let ready = pod("s-1", true, 0, running());
        assert_eq!(
            stack_state(Some(&deployment(1)), std::slice::from_ref(&ready), None),
            StackState::Ready {
                pod: "s-1".to_owned(),
                restarts: 0
            }
        );
        // Ready pod, but the Deployment has not counted it available yet (minReadySeconds, a stale status).
        assert!(matches!(
            stack_state(Some(&deployment(0)), &[ready], None),
            StackState::Starting { .. }
        ));
    }

    #[test]
    fn a_starting_stack_says_what_it_waits_on() {
        assert_eq!(
            stack_state(None, &[], None),
            StackState::Starting {
                detail: "the stack's Deployment is not created yet".to_owned()
            }
        );
        let loading = pod("s-1", false, 0, running());
        assert_eq!(
            stack_state(Some(&deployment(0)), &[loading], None),
            StackState::Starting {
                detail: "stack pod s-1: Running, not ready yet (readiness probe)".to_owned()
            }
        );
    }

    #[test]
    fn an_image_that_cannot_be_pulled_fails_the_stack_at_once() {
        let state = stack_state(
            Some(&deployment(0)),
            &[pod("s-1", false, 0, waiting("ImagePullBackOff"))],
            None,
        );
        assert_eq!(
            state,
            StackState::Failed {
                pod: Some("s-1".to_owned()),
                detail: "stack pod s-1 cannot run its server: ImagePullBackOff: back-off pulling image \"nope:1\""
                    .to_owned(),
                restarted: false,
            }
        );
    }

    #[test]
    fn a_restart_before_the_run_is_the_timeouts_to_judge_but_one_during_the_run_fails_it() {
        // Restarted once while loading, then ready: the launchers start, remembering that one restart.
        let once = pod("s-1", true, 1, running());
        assert_eq!(
            stack_state(Some(&deployment(1)), std::slice::from_ref(&once), None),
            StackState::Ready {
                pod: "s-1".to_owned(),
                restarts: 1
            }
        );
        assert!(matches!(
            stack_state(Some(&deployment(1)), &[once], Some(("s-1", 1))),
            StackState::Ready { .. }
        ));
        // A second restart during the run: failed, with how the last instance ended.
        let twice = pod("s-1", false, 2, running());
        assert_eq!(
            stack_state(Some(&deployment(0)), &[twice], Some(("s-1", 1))),
            StackState::Failed {
                pod: Some("s-1".to_owned()),
                detail: "the stack's server in pod s-1 terminated (OOMKilled, exit code 137) and was restarted 1 \
                         time(s) during the run"
                    .to_owned(),
                restarted: true,
            }
        );
    }

    #[test]
    fn a_stack_pod_that_goes_away_or_stops_being_ready_during_the_run_fails_it() {
        let replaced = pod("s-2", true, 0, running());
        assert_eq!(
            stack_state(Some(&deployment(1)), &[replaced], Some(("s-1", 0))),
            StackState::Failed {
                pod: Some("s-1".to_owned()),
                detail: "stack pod s-1 disappeared during the run".to_owned(),
                restarted: false,
            }
        );
        let mut deleting = pod("s-1", true, 0, running());
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(matches!(
            stack_state(Some(&deployment(1)), &[deleting], Some(("s-1", 0))),
            StackState::Failed { detail, .. } if detail.contains("was deleted during the run")
        ));
        let unready = pod("s-1", false, 0, running());
        assert!(matches!(
            stack_state(Some(&deployment(0)), &[unready], Some(("s-1", 0))),
            StackState::Failed { detail, .. } if detail.contains("stopped being ready") && detail.contains("not available")
        ));
    }

    #[test]
    fn the_messages_name_the_timeout_or_the_cause_and_carry_the_log_tail() {
        assert_eq!(
            not_ready_message("15m", "stack pod s-1: Pending", Some("loading…\n")),
            "the standalone stack did not become ready within spec.stack.standalone.readiness.timeout (15m); \
             stack pod s-1: Pending\nstack log tail:\nloading…"
        );
        assert_eq!(
            failed_message("stack pod s-1 disappeared during the run", None),
            "stack pod s-1 disappeared during the run; the launchers were stopped, and what they measured until \
             then is on the workload volume, marked interrupted"
        );
    }

    /// A vLLM 0.11 startup as `kubectl logs` (the pods/log API) gives it: `core::vllm_log`'s recorded fixture.
    pub(crate) const V1_LOG: &str =
        include_str!("../../core/src/vllm_log/fixtures/vllm-0.11-startup.log");

    #[test]
    fn a_stack_pods_vllm_log_gives_the_model_load_figures_by_phase() {
        let load = model_load(
            V1_LOG,
            "bench-1-stack-7d9f",
            STACK_CONTAINER,
            "Qwen/Qwen3-0.6B",
            2025,
        )
        .expect("a vLLM log");
        // Upstream names a server `<pod> <container>`.
        assert_eq!(load.name, "bench-1-stack-7d9f stack");
        // "Model loading took 3.8844 GiB and 20.442057 seconds".
        assert_eq!((load.load_gib, load.load_seconds), (3.8844, 20.442057));
        // "non-default args:" at 15:48:29 → "Available routes are:" at 15:50:32: 123 s.
        assert_eq!(load.vllm_start_seconds, 123.0);
        assert_eq!(load.torch_compile_seconds, 13.29);
        // The phases, Pytorch Compilation's two sub-phases flattened under it (elapsed worked out in
        // core::vllm_log's tests: model loading 15:48:47 → 15:49:08, compilation 15:49:11 → 15:49:41).
        let phase = |title: &str| {
            load.phases
                .iter()
                .find(|p| p.title == title)
                .map(|p| p.elapsed_seconds)
        };
        assert_eq!(phase("Model Loading"), Some(21.0));
        assert_eq!(phase("Pytorch Compilation"), Some(30.0));
        assert_eq!(phase("Pytorch Compilation / Inductor"), Some(30.0));
        assert_eq!(phase("CUDA Graph Capture"), Some(48.0));
        assert_eq!(
            load.missing,
            [
                "Directly load the compiled graph(s) for ",
                "Memory profiling takes"
            ]
        );
    }

    #[test]
    fn a_log_that_is_no_vllm_log_is_refused_naming_the_server() {
        let error = model_load(
            "llmbench sim listening on 0.0.0.0:8000\n",
            "s-1",
            STACK_CONTAINER,
            "m",
            2025,
        )
        .expect_err("not a vLLM log");
        assert!(error.contains("s-1 stack"), "{error}");
    }
}
