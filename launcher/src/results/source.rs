//! The pure Kubernetes side of `llmbench results`: where a run's results are (claim and directory), the reader pod
//! that mounts them, how far a pod has got, what an exec's status says, what an API error means to the user, and
//! the table of runs. No client: everything here is tested with plain objects.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status as ExecStatus};
use kube::ResourceExt;
use llmbench_api::security;
use llmbench_api::v1alpha1::{BenchmarkRun, LauncherSpec, Phase, WORKLOAD_MOUNT_PATH};

use super::ResultsError;

/// The image the operator starts launchers with when a run names none: the llmbench image of this very version
/// (the operator's `--launcher-image` default; both crates share the workspace version).
pub(crate) const DEFAULT_IMAGE: &str =
    concat!("ghcr.io/llmbench/llmbench:", env!("CARGO_PKG_VERSION"));
/// The reader pod's container.
pub(crate) const READER_CONTAINER: &str = "reader";
/// `app.kubernetes.io/component` of reader pods: `kubectl delete pod -l app.kubernetes.io/component=results-reader`
/// clears any a killed fetch left behind (their deadline ends them anyway).
pub(crate) const READER_COMPONENT: &str = "results-reader";
/// Label with the uid of the run a reader pod reads. Deliberately not the operator's `llmbench.dev/run-uid`: the
/// operator counts the pods carrying that label as the run's launchers.
pub(crate) const READER_RUN_UID_LABEL: &str = "llmbench.dev/results-of-run-uid";
/// Annotation with the name of the run a reader pod reads (a name can be longer than a label value may be).
pub(crate) const READER_RUN_ANNOTATION: &str = "llmbench.dev/results-of";
/// Who manages reader pods: this CLI, not the operator (whose pod watch selects `llmbench-operator`).
const READER_MANAGER: &str = "llmbench-cli";

/// Where a run's results are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunResults {
    pub(crate) run: String,
    pub(crate) namespace: String,
    pub(crate) uid: String,
    /// The PVC holding them.
    pub(crate) claim: String,
    /// The run's directory on the claim, relative to its root (`bench-1-0f3c9a2e`, `team-a/bench-7`).
    pub(crate) dir: String,
    pub(crate) phase: Option<Phase>,
}

impl RunResults {
    /// The directory in the reader pod: `/requests/<dir>`.
    pub(crate) fn mount_path(&self) -> String {
        format!("{WORKLOAD_MOUNT_PATH}/{}", self.dir)
    }

    /// Whether the run has ended, so that its directory is complete.
    pub(crate) fn finished(&self) -> bool {
        matches!(self.phase, Some(Phase::Succeeded | Phase::Failed))
    }

    /// The phase in words, for messages.
    pub(crate) fn phase_name(&self) -> String {
        self.phase.map_or_else(
            || "not yet started (no status)".to_owned(),
            |p| format!("{p:?}"),
        )
    }
}

/// Where `run`'s results are: `status.resultsPath` (`<claim>:/requests/<dir>`, what the operator actually used)
/// when set, else the spec as the operator resolves it (the claim of `storage`, `resultsDir` or
/// `<run>-<first 8 of its uid>`). An emptyDir run has no results to fetch.
pub(crate) fn locate(run: &BenchmarkRun) -> Result<RunResults, ResultsError> {
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let uid = run.uid().ok_or_else(|| ResultsError::MissingMetadata {
        run: name.clone(),
        field: "metadata.uid",
    })?;
    let empty_dir = || ResultsError::EmptyDirRun {
        run: name.clone(),
        namespace: namespace.clone(),
    };
    let status_path = run.status.as_ref().and_then(|s| s.results_path.as_deref());
    let (claim, dir) = match status_path {
        Some(path) => {
            let bad = |reason| ResultsError::BadResultsPath {
                run: name.clone(),
                path: path.to_owned(),
                reason,
            };
            let (volume, full) = path
                .split_once(':')
                .ok_or_else(|| bad("is not <claim>:/requests/<dir>"))?;
            if volume == "emptyDir" {
                return Err(empty_dir());
            }
            let dir = full
                .strip_prefix(WORKLOAD_MOUNT_PATH)
                .and_then(|rest| rest.strip_prefix('/'))
                .ok_or_else(|| bad("is not under /requests"))?;
            (volume.to_owned(), dir.to_owned())
        }
        None => {
            let claim = run.spec.storage.pvc_name().ok_or_else(empty_dir)?;
            let dir = match &run.spec.results_dir {
                Some(dir) => dir.clone(),
                None => format!("{name}-{}", uid.chars().take(8).collect::<String>()),
            };
            (claim.to_owned(), dir)
        }
    };
    check_dir(&name, &dir)?;
    Ok(RunResults {
        run: name,
        namespace,
        uid,
        claim,
        dir,
        phase: run.status.as_ref().and_then(|s| s.phase),
    })
}

/// The directory goes into a command line and an archive prefix: only plain relative segments.
fn check_dir(run: &str, dir: &str) -> Result<(), ResultsError> {
    let bad = |reason| ResultsError::BadResultsPath {
        run: run.to_owned(),
        path: dir.to_owned(),
        reason,
    };
    // Split by hand: `Path::components` quietly drops `.` and empty segments, which must be refused here (the
    // unpacker matches archive names against this very text).
    let plain = |segment: &str| {
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && matches!(
                Path::new(segment).components().next(),
                Some(Component::Normal(_))
            )
    };
    if !dir.split('/').all(plain) {
        return Err(bad("is not a relative path of plain segments"));
    }
    Ok(())
}

/// How the reader pod is made, beyond what the run says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReaderSettings {
    pub(crate) image: String,
    pub(crate) image_pull_policy: Option<String>,
    /// Its lifetime: `activeDeadlineSeconds` and the length of its sleep.
    pub(crate) deadline: Duration,
    /// The node it must run on: where a live pod of the run has the claim attached (see [`pin_node`]).
    pub(crate) node: Option<String>,
}

/// The reader pod of `results`: the launcher image sleeping with the claim mounted read-only, locked down like the
/// launchers (non-root 65532, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault
/// seccomp, no API token), on the launchers' node selector and tolerations and as their service account (whose
/// image pull secrets the image may need). Named `<run>-results-<random>` by the API server.
pub(crate) fn reader_pod(
    launcher: &LauncherSpec,
    results: &RunResults,
    settings: &ReaderSettings,
) -> Pod {
    let deadline = settings.deadline.as_secs().max(1);
    let affinity = settings.node.as_ref().map(|node| Affinity {
        // By node name (a field, as the DaemonSet controller pins pods), not the hostname label, which may differ.
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![node.clone()]),
                    }]),
                    ..NodeSelectorTerm::default()
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    });
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])
    };
    let container = Container {
        name: READER_CONTAINER.to_owned(),
        image: Some(settings.image.clone()),
        image_pull_policy: settings.image_pull_policy.clone(),
        // busybox `sleep` takes seconds. The pod outlives the copy only by as long as it takes us to delete it.
        command: Some(vec!["sleep".to_owned(), deadline.to_string()]),
        // `tar` and `du` stream files; a little CPU, next to no memory.
        resources: Some(ResourceRequirements {
            requests: Some(quantities("100m", "32Mi")),
            limits: Some(quantities("1", "256Mi")),
            ..ResourceRequirements::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "workload".to_owned(),
            mount_path: WORKLOAD_MOUNT_PATH.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        security_context: Some(security::restricted_container()),
        ..Container::default()
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-results-", results.run)),
            namespace: Some(results.namespace.clone()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_owned(), "llmbench".to_owned()),
                (
                    "app.kubernetes.io/component".to_owned(),
                    READER_COMPONENT.to_owned(),
                ),
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    READER_MANAGER.to_owned(),
                ),
                (READER_RUN_UID_LABEL.to_owned(), results.uid.clone()),
            ])),
            annotations: Some(BTreeMap::from([(
                READER_RUN_ANNOTATION.to_owned(),
                results.run.clone(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            active_deadline_seconds: Some(i64::try_from(deadline).unwrap_or(i64::MAX)),
            // `sleep` as PID 1 ignores SIGTERM: there is nothing to shut down cleanly.
            termination_grace_period_seconds: Some(1),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            service_account_name: launcher.service_account_name.clone(),
            node_selector: Some(launcher.node_selector.clone()).filter(|s| !s.is_empty()),
            tolerations: Some(launcher.tolerations.clone()).filter(|t| !t.is_empty()),
            affinity,
            // No fsGroup: on a volume that supports ownership management the kubelet would chown and chmod every
            // file of the claim before starting the pod (slow on a large claim, and a write to what we only read).
            // The launchers wrote the files as this very user.
            // No fs_group: the reader only reads, and the kubelet would chown the whole claim to mount it.
            security_context: Some(security::restricted_pod()),
            containers: vec![container],
            volumes: Some(vec![Volume {
                name: "workload".to_owned(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: results.claim.clone(),
                    read_only: Some(true),
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// The results directory of a run that is gone, from the directories `find` saw at the claim's root (full paths
/// or names): the one named `<run>-<8 lowercase hex digits>` (the operator's default, `<run>-<first 8 of its
/// uid>`). None is an error that asks for --dir; several (runs of one name made and deleted over time) too, naming
/// them.
pub(crate) fn pick_run_dir(run: &str, claim: &str, listed: &str) -> Result<String, ResultsError> {
    let mut found: Vec<String> = listed
        .lines()
        .filter_map(|line| line.trim().rsplit('/').next())
        .filter(|name| {
            name.strip_prefix(run)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|uid8| {
                    uid8.len() == 8
                        && uid8
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                })
        })
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    match found.len() {
        0 => Err(ResultsError::NoRunDirOnClaim {
            run: run.to_owned(),
            claim: claim.to_owned(),
        }),
        1 => Ok(found.remove(0)),
        _ => Err(ResultsError::SeveralRunDirsOnClaim {
            run: run.to_owned(),
            claim: claim.to_owned(),
            found,
        }),
    }
}

/// The node a reader pod must share with the run's live pods, if any. A ReadWriteOnce volume attached to a node
/// for a running launcher cannot be attached elsewhere, and the scheduler does not know that (short of
/// ReadWriteOncePod): a reader elsewhere would hang in ContainerCreating on a Multi-Attach error. So while a pod of
/// the run that mounts the claim is alive, the reader goes to its node. Once the run's pods have ended the volume
/// is free and the scheduler places the reader (volume topology included) by itself. `access_modes` are the
/// claim's; a claim that several nodes may mount needs no pin.
pub(crate) fn pin_node(pods: &[Pod], claim: &str, access_modes: &[String]) -> Option<String> {
    if access_modes
        .iter()
        .any(|m| m == "ReadWriteMany" || m == "ReadOnlyMany")
    {
        return None;
    }
    pods.iter()
        .filter(|pod| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter(|pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|volumes| {
                    volumes.iter().any(|v| {
                        v.persistent_volume_claim
                            .as_ref()
                            .is_some_and(|c| c.claim_name == claim)
                    })
                })
        })
        .find_map(|pod| pod.spec.as_ref().and_then(|s| s.node_name.clone()))
}

/// The image and pull policy of the first of `pods` that has one: what the run's launchers actually ran.
pub(crate) fn launcher_image(pods: &[Pod]) -> Option<(String, Option<String>)> {
    pods.iter().find_map(|pod| {
        let container = pod.spec.as_ref()?.containers.first()?;
        Some((
            container.image.clone()?,
            container.image_pull_policy.clone(),
        ))
    })
}

/// How far a reader pod has got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PodState {
    /// Its container runs: exec may start.
    Running,
    /// Not yet, and why (e.g. `Unschedulable: 0/1 nodes are available…`, `ImagePullBackOff: …`).
    Waiting(String),
    /// It will never run, and why.
    Failed(String),
}

/// Waiting reasons that never clear by themselves: waiting on them only delays the error.
const HOPELESS_WAITING: [&str; 4] = [
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Where `pod` is, with the reason a person needs when it is not running.
pub(crate) fn pod_state(pod: &Pod) -> PodState {
    let Some(status) = pod.status.as_ref() else {
        return PodState::Waiting("Pending: no status yet".to_owned());
    };
    let container = status
        .container_statuses
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.name == READER_CONTAINER));
    let container_state = container.and_then(|c| c.state.as_ref());
    let phase = status.phase.as_deref().unwrap_or("Pending");
    if matches!(phase, "Failed" | "Succeeded") {
        let mut why = format!("it is {phase}");
        if let Some(reason) = status.reason.as_deref() {
            why.push_str(&format!(" ({reason})"));
        }
        if let Some(terminated) = container_state.and_then(|s| s.terminated.as_ref()) {
            why.push_str(&format!(
                ": container {} with exit code {}",
                terminated.reason.as_deref().unwrap_or("terminated"),
                terminated.exit_code
            ));
        }
        if let Some(message) = status.message.as_deref().filter(|m| !m.is_empty()) {
            why.push_str(&format!(": {message}"));
        }
        return PodState::Failed(why);
    }
    if container_state.is_some_and(|s| s.running.is_some()) {
        return PodState::Running;
    }
    if let Some(waiting) = container_state.and_then(|s| s.waiting.as_ref()) {
        let reason = waiting.reason.as_deref().unwrap_or("Waiting");
        let why = match waiting.message.as_deref().filter(|m| !m.is_empty()) {
            Some(message) => format!("{reason}: {message}"),
            None => reason.to_owned(),
        };
        return if HOPELESS_WAITING.contains(&reason) {
            PodState::Failed(why)
        } else {
            PodState::Waiting(why)
        };
    }
    let unscheduled = status.conditions.as_ref().and_then(|conditions| {
        conditions
            .iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    });
    if let Some(condition) = unscheduled {
        return PodState::Waiting(format!(
            "{}: {}",
            condition.reason.as_deref().unwrap_or("NotScheduled"),
            condition.message.as_deref().unwrap_or("not scheduled yet")
        ));
    }
    PodState::Waiting(format!("{phase}: the container has not started"))
}

/// How an exec ended, from the Status the API server sends on its error channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExecOutcome {
    Success,
    /// The command ran and exited with this non-zero code.
    ExitCode(i32),
    /// The exec itself failed (the command not found, the container gone…).
    Failure(String),
    /// The stream closed without a status.
    Unknown,
}

/// Reads an exec's final Status: `Success`, or `Failure` with reason `NonZeroExitCode` and the code in a cause
/// `ExitCode`, or another failure.
pub(crate) fn exec_outcome(status: Option<&ExecStatus>) -> ExecOutcome {
    let Some(status) = status else {
        return ExecOutcome::Unknown;
    };
    if status.status.as_deref() == Some("Success") {
        return ExecOutcome::Success;
    }
    if status.reason.as_deref() == Some("NonZeroExitCode")
        && let Some(code) = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|causes| {
                causes
                    .iter()
                    .find(|c| c.reason.as_deref() == Some("ExitCode"))
            })
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse::<i32>().ok())
    {
        return ExecOutcome::ExitCode(code);
    }
    ExecOutcome::Failure(
        status
            .message
            .clone()
            .or_else(|| status.reason.clone())
            .unwrap_or_else(|| "the exec failed without a message".to_owned()),
    )
}

/// One request to the API server, for error messages: what we tried, on what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request<'a> {
    /// The RBAC verb: get, list, create, delete.
    pub(crate) verb: &'static str,
    /// The RBAC resource: `benchmarkruns.llmbench.dev`, `pods`, `pods/exec`, `persistentvolumeclaims`.
    pub(crate) resource: &'static str,
    pub(crate) name: Option<&'a str>,
    /// `None` for every namespace.
    pub(crate) namespace: Option<&'a str>,
}

impl Request<'_> {
    fn describe(&self) -> String {
        let mut text = format!("{} {}", self.verb, self.resource);
        if let Some(name) = self.name {
            let _ = write!(text, " {name}");
        }
        match self.namespace {
            Some(namespace) => {
                let _ = write!(text, " in namespace {namespace}");
            }
            None => text.push_str(" in all namespaces"),
        }
        text
    }
}

/// Whether `error` is the API server's 404. By code as well as reason: kube words a refusal whose body is not a
/// Status (an exec upgrade refused, a proxy's answer) with its own reason and the HTTP code.
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found() || status.code == 404)
}

/// Whether `error` is the API server's 403 (by reason or code, as [`is_not_found`]).
pub(crate) fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_forbidden() || status.code == 403)
}

/// What `error` from `request` means to the user: a 403 names the verb and resource they lack (an exec refused is
/// a failed upgrade with status 403, carrying no Status body), a 401 their credentials; anything else keeps the
/// request and the error. 404s mean different things per request and are handled by the callers.
pub(crate) fn api_error(error: kube::Error, request: &Request<'_>) -> ResultsError {
    let namespace = request.namespace.unwrap_or("all namespaces").to_owned();
    let forbidden = is_forbidden(&error);
    match error {
        kube::Error::Api(status) if forbidden => ResultsError::Forbidden {
            verb: request.verb,
            resource: request.resource,
            namespace,
            message: if status.message.is_empty() {
                format!("{} {}", status.code, status.reason)
            } else {
                status.message
            },
        },
        kube::Error::Api(status) if status.code == 401 => ResultsError::Unauthorized {
            action: request.describe(),
            message: status.message,
        },
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(
            code,
        )) if code.as_u16() == 403 => ResultsError::Forbidden {
            verb: request.verb,
            resource: request.resource,
            namespace,
            message: "the exec upgrade was refused with 403 Forbidden".to_owned(),
        },
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(
            code,
        )) if code.as_u16() == 401 => ResultsError::Unauthorized {
            action: request.describe(),
            message: "the exec upgrade was refused with 401 Unauthorized".to_owned(),
        },
        other => ResultsError::Api {
            action: request.describe(),
            source: Box::new(other),
        },
    }
}

/// The table of `llmbench results list`: one row per run, columns padded to their widest cell, a NAMESPACE column
/// first when the runs span namespaces. Creation times are RFC 3339 (UTC); requests and throughputs come from
/// `status.summary`, `-` where a run has none.
pub(crate) fn list_table(runs: &[BenchmarkRun], all_namespaces: bool) -> String {
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(runs.len() + 1);
    let mut header = vec![
        "NAME",
        "PHASE",
        "STORAGE",
        "RESULTS",
        "CREATED",
        "REQUESTS",
        "REQ/S",
        "OUT TOK/S",
    ];
    if all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    rows.push(header.into_iter().map(str::to_owned).collect());
    for run in runs {
        let status = run.status.as_ref();
        let summary = status.and_then(|s| s.summary.as_ref());
        let (storage, dir) = match locate(run) {
            Ok(results) => (results.claim, results.dir),
            Err(ResultsError::EmptyDirRun { .. }) => ("emptyDir".to_owned(), "-".to_owned()),
            Err(_) => (
                run.spec.storage.pvc_name().unwrap_or("emptyDir").to_owned(),
                "?".to_owned(),
            ),
        };
        let mut row = vec![
            run.name_any(),
            status
                .and_then(|s| s.phase)
                .map_or_else(|| "-".to_owned(), |p| format!("{p:?}")),
            storage,
            dir,
            run.metadata
                .creation_timestamp
                .as_ref()
                .map_or_else(|| "-".to_owned(), |t| t.0.to_string()),
            summary.map_or_else(|| "-".to_owned(), |s| s.requests.to_string()),
            summary.map_or_else(
                || "-".to_owned(),
                |s| format!("{:.2}", s.throughput.requests_per_second),
            ),
            summary.map_or_else(
                || "-".to_owned(),
                |s| format!("{:.1}", s.throughput.output_tokens_per_second),
            ),
        ];
        if all_namespaces {
            row.insert(0, run.namespace().unwrap_or_default());
        }
        rows.push(row);
    }
    let columns = rows[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut table = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == columns {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}   ", width = widths[i]);
            }
        }
        table.push_str(line.trim_end());
        table.push('\n');
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
        ContainerStatus, PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};
    use llmbench_api::v1alpha1::{BenchmarkRunSpec, BenchmarkRunStatus};

    const BASIC: &str = "
harness: inference-perf
workload:
  builtin: sanity_random
stack:
  endpoint: http://vllm.llm-d.svc:8000
  model: meta-llama/Llama-3.1-8B-Instruct
";

    fn run(spec_yaml: &str) -> BenchmarkRun {
        let spec: BenchmarkRunSpec = serde_saphyr::from_str(spec_yaml).expect("fixture spec");
        let mut run = BenchmarkRun::new("bench-1", spec);
        run.metadata.namespace = Some("team-a".to_owned());
        run.metadata.uid = Some("0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab".to_owned());
        run
    }

    fn with_status(
        mut run: BenchmarkRun,
        phase: Phase,
        results_path: Option<&str>,
    ) -> BenchmarkRun {
        run.status = Some(BenchmarkRunStatus {
            phase: Some(phase),
            results_path: results_path.map(str::to_owned),
            ..BenchmarkRunStatus::default()
        });
        run
    }

    fn settings() -> ReaderSettings {
        ReaderSettings {
            image: "ghcr.io/llmbench/llmbench:0.1.0".to_owned(),
            image_pull_policy: Some("IfNotPresent".to_owned()),
            deadline: Duration::from_secs(3600),
            node: None,
        }
    }

    #[test]
    fn the_default_claim_and_directory_are_the_operators() {
        let results = locate(&run(BASIC)).expect("located");
        assert_eq!(results.claim, "workload-pvc");
        assert_eq!(results.dir, "bench-1-0f3c9a2e");
        assert_eq!(results.mount_path(), "/requests/bench-1-0f3c9a2e");
        assert_eq!(results.namespace, "team-a");
        assert!(!results.finished(), "no status: not started");
    }

    #[test]
    fn a_named_claim_and_results_dir_come_from_the_spec() {
        let results = locate(&run(&format!(
            "{BASIC}storage:\n  pvc:\n    name: results\nresultsDir: team-a/bench-7\n"
        )))
        .expect("located");
        assert_eq!(results.claim, "results");
        assert_eq!(results.dir, "team-a/bench-7");
    }

    #[test]
    fn the_status_results_path_wins_over_the_spec() {
        let run = with_status(
            run(BASIC),
            Phase::Succeeded,
            Some("other-pvc:/requests/nightly/bench-1"),
        );
        let results = locate(&run).expect("located");
        assert_eq!(results.claim, "other-pvc");
        assert_eq!(results.dir, "nightly/bench-1");
        assert!(results.finished());
    }

    #[test]
    fn an_empty_dir_run_has_nothing_to_fetch_by_spec_or_status() {
        let scratch = run(&format!("{BASIC}storage:\n  emptyDir: {{}}\n"));
        assert!(matches!(
            locate(&scratch),
            Err(ResultsError::EmptyDirRun { .. })
        ));
        let by_status = with_status(
            run(BASIC),
            Phase::Succeeded,
            Some("emptyDir:/requests/bench-1-0f3c9a2e"),
        );
        assert!(matches!(
            locate(&by_status),
            Err(ResultsError::EmptyDirRun { .. })
        ));
    }

    #[test]
    fn a_results_path_that_could_leave_the_claim_is_refused() {
        for path in [
            "workload-pvc:/requests/../etc",
            "workload-pvc:/requests/",
            "workload-pvc:/etc/x",
            "workload-pvc:/requests//x",
            "workload-pvc:/requests/a/./b",
            "no-colon",
        ] {
            let run = with_status(run(BASIC), Phase::Succeeded, Some(path));
            assert!(
                matches!(locate(&run), Err(ResultsError::BadResultsPath { .. })),
                "{path}"
            );
        }
    }

    #[test]
    fn the_reader_pod_mounts_the_claim_read_only_and_sleeps_as_non_root() {
        let run = run(BASIC);
        let results = locate(&run).expect("located");
        let pod = reader_pod(&run.spec.launcher, &results, &settings());
        assert_eq!(
            pod.metadata.generate_name.as_deref(),
            Some("bench-1-results-")
        );
        assert_eq!(pod.metadata.namespace.as_deref(), Some("team-a"));
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(labels["app.kubernetes.io/component"], "results-reader");
        assert_eq!(
            labels[READER_RUN_UID_LABEL],
            "0f3c9a2e-5b7d-4c1e-9a8b-1234567890ab"
        );
        // Never taken for one of the run's launchers, nor watched as the operator's pod.
        assert!(!labels.contains_key("llmbench.dev/run-uid"));
        assert_ne!(labels["app.kubernetes.io/managed-by"], "llmbench-operator");

        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.active_deadline_seconds, Some(3600));
        assert_eq!(spec.automount_service_account_token, Some(false));
        let security = spec.security_context.as_ref().expect("pod security");
        assert_eq!(security.run_as_user, Some(65532));
        assert_eq!(security.run_as_non_root, Some(true));
        assert_eq!(security.fs_group, None, "no recursive chown of the claim");
        let volume = &spec.volumes.as_ref().expect("volumes")[0];
        let claim = volume.persistent_volume_claim.as_ref().expect("a claim");
        assert_eq!(claim.claim_name, "workload-pvc");
        assert_eq!(claim.read_only, Some(true));

        let container = &spec.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("ghcr.io/llmbench/llmbench:0.1.0")
        );
        assert_eq!(
            container.command,
            Some(vec!["sleep".to_owned(), "3600".to_owned()])
        );
        let mount = &container.volume_mounts.as_ref().expect("mounts")[0];
        assert_eq!(mount.mount_path, "/requests");
        assert_eq!(mount.read_only, Some(true));
        let container_security = container.security_context.as_ref().expect("security");
        assert_eq!(container_security.read_only_root_filesystem, Some(true));
        assert_eq!(container_security.allow_privilege_escalation, Some(false));
        assert_eq!(spec.affinity, None, "no pin without a live launcher");
    }

    #[test]
    fn the_reader_pod_follows_the_launchers_scheduling_and_account() {
        let run = run(&format!(
            "{BASIC}launcher:\n  serviceAccountName: bench\n  nodeSelector:\n    pool: cpu\n  tolerations:\n  - key: dedicated\n    operator: Exists\n"
        ));
        let results = locate(&run).expect("located");
        let pod = reader_pod(
            &run.spec.launcher,
            &results,
            &ReaderSettings {
                node: Some("node-7".to_owned()),
                ..settings()
            },
        );
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some("bench"));
        assert_eq!(spec.node_selector.expect("selector")["pool"], "cpu");
        assert_eq!(spec.tolerations.expect("tolerations").len(), 1);
        let terms = spec
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .expect("required node affinity")
            .node_selector_terms;
        let field = &terms[0].match_fields.as_ref().expect("fields")[0];
        assert_eq!(field.key, "metadata.name");
        assert_eq!(field.values, Some(vec!["node-7".to_owned()]));
    }

    fn launcher(phase: &str, node: Option<&str>, claim: &str) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_name: node.map(str::to_owned),
                containers: vec![Container {
                    name: "launcher".to_owned(),
                    image: Some("registry.local/llmbench:dev".to_owned()),
                    image_pull_policy: Some("Always".to_owned()),
                    ..Container::default()
                }],
                volumes: Some(vec![Volume {
                    name: "workload".to_owned(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: claim.to_owned(),
                        read_only: Some(false),
                    }),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn a_live_launcher_on_a_read_write_once_claim_pins_the_reader_to_its_node() {
        let rwo = vec!["ReadWriteOnce".to_owned()];
        let pods = vec![
            launcher("Succeeded", Some("node-1"), "workload-pvc"),
            launcher("Running", Some("node-2"), "workload-pvc"),
        ];
        assert_eq!(
            pin_node(&pods, "workload-pvc", &rwo).as_deref(),
            Some("node-2")
        );
        // Unknown modes (the claim could not be read) count as ReadWriteOnce.
        assert_eq!(
            pin_node(&pods, "workload-pvc", &[]).as_deref(),
            Some("node-2")
        );
        assert_eq!(
            pin_node(&pods, "workload-pvc", &["ReadWriteMany".to_owned()]),
            None
        );
        assert_eq!(pin_node(&pods[..1], "workload-pvc", &rwo), None, "ended");
        assert_eq!(pin_node(&pods, "other", &rwo), None, "another claim");
        assert_eq!(
            pin_node(
                &[launcher("Pending", None, "workload-pvc")],
                "workload-pvc",
                &rwo
            ),
            None,
            "not scheduled yet"
        );
    }

    #[test]
    fn the_launchers_image_is_reused() {
        let pods = vec![launcher("Succeeded", None, "workload-pvc")];
        assert_eq!(
            launcher_image(&pods),
            Some((
                "registry.local/llmbench:dev".to_owned(),
                Some("Always".to_owned())
            ))
        );
        assert_eq!(launcher_image(&[]), None);
        assert!(DEFAULT_IMAGE.starts_with("ghcr.io/llmbench/llmbench:"));
    }

    fn reader_with(
        phase: &str,
        state: Option<ContainerState>,
        conditions: Vec<PodCondition>,
    ) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.to_owned()),
                conditions: Some(conditions),
                container_statuses: state.map(|state| {
                    vec![ContainerStatus {
                        name: READER_CONTAINER.to_owned(),
                        state: Some(state),
                        ..ContainerStatus::default()
                    }]
                }),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    fn waiting(reason: &str, message: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_owned()),
                message: Some(message.to_owned()),
            }),
            ..ContainerState::default()
        }
    }

    #[test]
    fn a_running_container_is_ready_for_exec() {
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        };
        assert_eq!(
            pod_state(&reader_with("Running", Some(running), Vec::new())),
            PodState::Running
        );
    }

    #[test]
    fn a_pending_pod_says_why_it_waits() {
        let unschedulable = PodCondition {
            type_: "PodScheduled".to_owned(),
            status: "False".to_owned(),
            reason: Some("Unschedulable".to_owned()),
            message: Some(
                "0/1 nodes are available: 1 node(s) had volume node affinity conflict".to_owned(),
            ),
            ..PodCondition::default()
        };
        assert_eq!(
            pod_state(&reader_with("Pending", None, vec![unschedulable])),
            PodState::Waiting(
                "Unschedulable: 0/1 nodes are available: 1 node(s) had volume node affinity conflict"
                    .to_owned()
            )
        );
        assert_eq!(
            pod_state(&reader_with(
                "Pending",
                Some(waiting("ImagePullBackOff", "Back-off pulling image \"x\"")),
                Vec::new()
            )),
            PodState::Waiting("ImagePullBackOff: Back-off pulling image \"x\"".to_owned())
        );
        assert!(matches!(pod_state(&Pod::default()), PodState::Waiting(_)));
    }

    #[test]
    fn a_pod_that_can_never_run_fails_at_once() {
        assert_eq!(
            pod_state(&reader_with(
                "Pending",
                Some(waiting("InvalidImageName", "bad ref")),
                Vec::new()
            )),
            PodState::Failed("InvalidImageName: bad ref".to_owned())
        );
        let ended = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 127,
                reason: Some("Error".to_owned()),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        };
        let PodState::Failed(why) = pod_state(&reader_with("Failed", Some(ended), Vec::new()))
        else {
            panic!("failed");
        };
        assert!(why.contains("exit code 127"), "{why}");
    }

    #[test]
    fn an_exec_status_gives_success_or_the_exit_code() {
        let success = ExecStatus {
            status: Some("Success".to_owned()),
            ..ExecStatus::default()
        };
        assert_eq!(exec_outcome(Some(&success)), ExecOutcome::Success);
        let exit_2 = ExecStatus {
            status: Some("Failure".to_owned()),
            reason: Some("NonZeroExitCode".to_owned()),
            message: Some("command terminated with non-zero exit code: error executing command [tar cf - -C /requests x], exit code 2".to_owned()),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".to_owned()),
                    message: Some("2".to_owned()),
                    ..StatusCause::default()
                }]),
                ..StatusDetails::default()
            }),
            ..ExecStatus::default()
        };
        assert_eq!(exec_outcome(Some(&exit_2)), ExecOutcome::ExitCode(2));
        let not_found = ExecStatus {
            status: Some("Failure".to_owned()),
            message: Some("exec: \"tar\": executable file not found in $PATH".to_owned()),
            ..ExecStatus::default()
        };
        assert!(matches!(
            exec_outcome(Some(&not_found)),
            ExecOutcome::Failure(m) if m.contains("executable file not found")
        ));
        assert_eq!(exec_outcome(None), ExecOutcome::Unknown);
    }

    fn api_status(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(message, reason).with_code(code),
        ))
    }

    #[test]
    fn a_404_is_recognised_for_the_caller_to_word() {
        assert!(is_not_found(&api_status(
            404,
            "NotFound",
            "benchmarkruns.llmbench.dev \"x\" not found"
        )));
        assert!(!is_not_found(&api_status(403, "Forbidden", "no")));
    }

    #[test]
    fn a_403_names_the_verb_and_resource_the_user_lacks() {
        let request = Request {
            verb: "create",
            resource: "pods",
            name: None,
            namespace: Some("bench"),
        };
        let error = api_error(
            api_status(
                403,
                "Forbidden",
                "pods is forbidden: User \"alice\" cannot create resource \"pods\" in API group \"\" in the namespace \"bench\"",
            ),
            &request,
        );
        let text = error.to_string();
        assert!(
            text.starts_with("forbidden: you may not create pods in namespace bench"),
            "{text}"
        );
        assert!(text.contains("User \"alice\""), "{text}");
    }

    #[test]
    fn a_refused_exec_upgrade_is_a_missing_pods_exec_permission() {
        let request = Request {
            verb: "create",
            resource: "pods/exec",
            name: Some("bench-1-results-x7k2p"),
            namespace: Some("bench"),
        };
        let refused = kube::Error::UpgradeConnection(
            kube::client::UpgradeConnectionError::ProtocolSwitch(http_status(403)),
        );
        let text = api_error(refused, &request).to_string();
        assert!(
            text.starts_with("forbidden: you may not create pods/exec in namespace bench"),
            "{text}"
        );
    }

    fn http_status(code: u16) -> http::StatusCode {
        http::StatusCode::from_u16(code).expect("a status code")
    }

    #[test]
    fn a_401_and_other_errors_keep_the_request_they_come_from() {
        let request = Request {
            verb: "list",
            resource: "benchmarkruns.llmbench.dev",
            name: None,
            namespace: None,
        };
        let text = api_error(api_status(401, "Unauthorized", "Unauthorized"), &request).to_string();
        assert!(text.contains("refused your credentials"), "{text}");
        assert!(
            text.contains("list benchmarkruns.llmbench.dev in all namespaces"),
            "{text}"
        );
        let text = api_error(api_status(500, "InternalError", "etcd down"), &request).to_string();
        assert!(
            text.starts_with("cannot list benchmarkruns.llmbench.dev in all namespaces"),
            "{text}"
        );
    }

    #[test]
    fn the_list_table_shows_storage_results_and_summary_columns() {
        let mut done = with_status(
            run(BASIC),
            Phase::Succeeded,
            Some("workload-pvc:/requests/bench-1-0f3c9a2e"),
        );
        done.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2025-01-02T03:04:05Z".parse().expect("timestamp"),
            ));
        if let Some(status) = done.status.as_mut() {
            status.summary = Some(llmbench_api::v1alpha1::RunSummary {
                requests: 1200,
                throughput: llmbench_api::v1alpha1::Throughput {
                    requests_per_second: 19.987,
                    input_tokens_per_second: 0.0,
                    output_tokens_per_second: 2048.44,
                },
                ..llmbench_api::v1alpha1::RunSummary::default()
            });
        }
        let mut scratch = run(&format!("{BASIC}storage:\n  emptyDir: {{}}\n"));
        scratch.metadata.name = Some("scratch".to_owned());
        let table = list_table(&[done, scratch], false);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "NAME", "PHASE", "STORAGE", "RESULTS", "CREATED", "REQUESTS", "REQ/S", "OUT",
                "TOK/S"
            ]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            [
                "bench-1",
                "Succeeded",
                "workload-pvc",
                "bench-1-0f3c9a2e",
                "2025-01-02T03:04:05Z",
                "1200",
                "19.99",
                "2048.4"
            ]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["scratch", "-", "emptyDir", "-", "-", "-", "-", "-"]
        );
        // Columns line up: every row's second column starts where the header's does.
        let at = lines[0].find("PHASE").expect("PHASE");
        assert_eq!(lines[1].find("Succeeded"), Some(at));

        let everywhere = list_table(&[run(BASIC)], true);
        assert!(everywhere.starts_with("NAMESPACE"), "{everywhere}");
        assert!(
            everywhere
                .lines()
                .nth(1)
                .expect("a row")
                .starts_with("team-a")
        );
    }

    #[test]
    fn a_gone_runs_directory_is_the_one_named_after_it_with_eight_hex_digits() {
        let listed = "/requests/bench-1-0f3c9a2e\n/requests/bench-10-12345678\n/requests/bench-1-extra\n\
                      /requests/bench-1-0F3C9A2E\n/requests/bench-1-0f3c9a2\n";
        assert_eq!(
            pick_run_dir("bench-1", "workload-pvc", listed).expect("one"),
            "bench-1-0f3c9a2e"
        );
        let none = pick_run_dir("bench-2", "workload-pvc", listed).expect_err("none");
        assert!(none.to_string().contains("name it with --dir"), "{none}");
        let several = pick_run_dir(
            "bench-1",
            "workload-pvc",
            "/requests/bench-1-aaaaaaaa\n/requests/bench-1-0f3c9a2e\n",
        )
        .expect_err("two");
        assert_eq!(
            several.to_string(),
            "claim workload-pvc holds the results of several runs named bench-1: bench-1-0f3c9a2e, \
             bench-1-aaaaaaaa; name one with --dir"
        );
    }
}
