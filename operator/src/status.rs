//! Where a run is, derived from its launcher pods alone, and the status that says so. Pure: the reconciler
//! passes in what it read (the run, its pods, the time) and writes back what comes out, so an operator restart
//! mid-run derives the same answer.
//!
//! Conditions (type → reasons):
//! - `ProfileRendered`: True/`Rendered`; False/the renderer's reason (`UnresolvedPlaceholder`, `UnmatchedOverride`,
//!   `ProfileNotFound`, …) — the run stays Pending and no pod is created.
//! - `PreflightPassed`: True/`Passed` with the pre-flight pod's verdict (what it listed, what answered);
//!   False/`PreflightFailed` (or how the pod failed, e.g. `ImagePullFailed`) with the check's own words — no launcher
//!   is created. Absent for runs that send nothing (`skipRun`, debug, `nop`).
//! - `LauncherStarted`: True/`LaunchersCreated` (or `CollectorCreated` with skipRun).
//! - `Completed`: False/`Pending`|`Running`|`Collecting`|`Debug` while under way; True/`Succeeded` (or
//!   `SucceededWithoutSummary`); False/the failure reason when the run failed.
//! - `Failed`: True/`LauncherFailed`|`PreflightFailed`|`OOMKilled`|`ImagePullFailed`|`ContainerConfigError`|`Evicted`|`Timeout`|
//!   `LauncherLost`|`StackNotReady`|`StackFailed` with the pod, the exit code and the log tail in the message; absent otherwise.
//! - `SLOMet`: True/`WithinSLO` or False/`SLOViolated`|`NoSummary`, when `spec.slo` is set or the harness gives a
//!   verdict of its own (MLPerf's VALID/INVALID); both must pass when both are there.
//! - `Reconciled`: False/the failed action's reason (`CreatePodFailed`, `ConfigMapNotOwned`, …) with the error,
//!   naming the object and the API server's answer, while the operator cannot act on the run (it retries with a
//!   backoff); True/`Reconciled` once a later pass succeeds; absent while no pass ever failed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use llmbench_api::v1alpha1::{
    BenchmarkRun, BenchmarkRunStatus, Phase, RunSummary, ShardSummary, WORKLOAD_MOUNT_PATH,
};
use llmbench_core::launcher_command::RunExit;

use crate::builders::LAUNCHER_INDEX_LABEL;
pub use crate::duration::parse_duration;
use crate::summary::{SummaryError, aggregate, harness_verdict, parse_summary, slo_verdict};

pub const PROFILE_RENDERED: &str = "ProfileRendered";
pub const LAUNCHER_STARTED: &str = "LauncherStarted";
pub const PREFLIGHT_PASSED: &str = "PreflightPassed";
pub const COMPLETED: &str = "Completed";
pub const FAILED: &str = "Failed";
pub const SLO_MET: &str = "SLOMet";
pub const RECONCILED: &str = "Reconciled";

/// Condition messages are bounded by the API (32 KiB); keep them readable in `kubectl describe`.
const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// Why a run failed: the reason of its `Failed` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// The launcher exited non-zero.
    LauncherFailed,
    /// The launcher's pre-flight found the stack unusable (exit code 6): nothing was run.
    PreflightFailed,
    /// The launcher was killed for exceeding its memory limit.
    OomKilled,
    /// The launcher image could not be pulled.
    ImagePullFailed,
    /// The container could not be created (e.g. the HF token Secret is missing).
    ContainerConfigError,
    /// The kubelet evicted the pod.
    Evicted,
    /// The run outlived `spec.timeout`.
    Timeout,
    /// A launcher pod disappeared after the run started; it is never re-created, so load is never sent twice.
    LauncherLost,
    /// Not every shard of a sharded run became ready within `launcher.startTimeout`; none was released.
    ShardsNotReady,
    /// The run's standalone stack could not start, or did not become ready within its readiness timeout.
    StackNotReady,
    /// The run's standalone stack died while the launchers ran against it.
    StackFailed,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::LauncherFailed => "LauncherFailed",
            FailureReason::PreflightFailed => "PreflightFailed",
            FailureReason::OomKilled => "OOMKilled",
            FailureReason::ImagePullFailed => "ImagePullFailed",
            FailureReason::ContainerConfigError => "ContainerConfigError",
            FailureReason::Evicted => "Evicted",
            FailureReason::Timeout => "Timeout",
            FailureReason::LauncherLost => "LauncherLost",
            FailureReason::ShardsNotReady => "ShardsNotReady",
            FailureReason::StackNotReady => "StackNotReady",
            FailureReason::StackFailed => "StackFailed",
        }
    }
}

/// Why one pod failed, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct PodFailure {
    pub pod: String,
    pub reason: FailureReason,
    pub detail: String,
    /// The termination message (the log tail, with `FallbackToLogsOnError`), if any.
    pub termination_message: Option<String>,
}

/// What one launcher pod says.
#[derive(Debug, Clone, PartialEq)]
pub enum PodOutcome {
    /// Not running yet (unscheduled, pulling, creating).
    Waiting,
    Running,
    Succeeded {
        termination_message: String,
    },
    Failed(PodFailure),
}

/// Waiting reasons that never resolve on their own quickly enough to keep a benchmark waiting.
fn waiting_failure(reason: &str) -> Option<FailureReason> {
    match reason {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
            Some(FailureReason::ImagePullFailed)
        }
        "CreateContainerConfigError" | "CreateContainerError" => {
            Some(FailureReason::ContainerConfigError)
        }
        _ => None,
    }
}

fn launcher_container(pod: &Pod) -> Option<&ContainerStatus> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .iter()
        .find(|c| c.name == "launcher")
        .or(statuses.first())
}

/// What `pod` says about its launcher.
pub fn pod_outcome(pod: &Pod) -> PodOutcome {
    let name = pod.name_any();
    let status = pod.status.clone().unwrap_or_default();
    let phase = status.phase.as_deref().unwrap_or("Pending");
    if status.reason.as_deref() == Some("Evicted") {
        return PodOutcome::Failed(PodFailure {
            pod: name.clone(),
            reason: FailureReason::Evicted,
            detail: format!(
                "launcher pod {name} was evicted: {}",
                status.message.as_deref().unwrap_or("no message")
            ),
            termination_message: None,
        });
    }
    let state = launcher_container(pod).and_then(|c| c.state.clone());
    if let Some(terminated) = state.as_ref().and_then(|s| s.terminated.as_ref()) {
        let message = terminated.message.clone().filter(|m| !m.trim().is_empty());
        if terminated.exit_code == 0 {
            return PodOutcome::Succeeded {
                termination_message: message.unwrap_or_default(),
            };
        }
        let reason_text = terminated.reason.as_deref().unwrap_or("Error");
        let exit = RunExit::from_code(terminated.exit_code);
        let reason = if reason_text == "OOMKilled" {
            FailureReason::OomKilled
        } else if exit == Some(RunExit::PreflightFailed) {
            FailureReason::PreflightFailed
        } else {
            FailureReason::LauncherFailed
        };
        let signal = terminated
            .signal
            .map(|s| format!(", signal {s}"))
            .unwrap_or_default();
        // The launcher's own exit codes, typed in core's RunExit.
        let hint = match (reason, exit) {
            (FailureReason::OomKilled, _) => "; raise spec.launcher.resources.limits.memory",
            (_, Some(RunExit::NoRequestSucceeded)) => {
                "; no request succeeded: see the errors in the summary and requests.bin (llmbench export)"
            }
            (_, Some(RunExit::Interrupted)) => {
                "; the launcher was interrupted (SIGTERM): what it measured is on the workload volume, every \
                 report marked interrupted"
            }
            (_, Some(RunExit::PreflightFailed)) => {
                "; the pre-flight found the stack unusable (unreachable, no such API path or model, or its test \
                 request failed): nothing was run; the launcher's log says what it tried and how to fix it"
            }
            (_, Some(RunExit::ServerStoppedAnswering)) => {
                "; the stack stopped answering mid-run (connection failures in a row): what was measured is on the \
                 workload volume, every report marked stopped"
            }
            (_, Some(RunExit::FailedRequestThreshold)) => {
                "; the failed requests went above the profile's --failed-request-threshold (AIPerf): what was \
                 measured is on the workload volume, every report marked stopped"
            }
            _ => "",
        };
        return PodOutcome::Failed(PodFailure {
            pod: name.clone(),
            reason,
            detail: format!(
                "launcher pod {name} exited with code {} ({reason_text}{signal}){hint}",
                terminated.exit_code
            ),
            termination_message: message,
        });
    }
    if let Some(waiting) = state.as_ref().and_then(|s| s.waiting.as_ref())
        && let Some(reason) = waiting.reason.as_deref().and_then(waiting_failure)
    {
        return PodOutcome::Failed(PodFailure {
            pod: name.clone(),
            reason,
            detail: format!(
                "launcher pod {name} cannot start: {}: {}",
                waiting.reason.as_deref().unwrap_or_default(),
                waiting.message.as_deref().unwrap_or("no message")
            ),
            termination_message: None,
        });
    }
    match phase {
        "Succeeded" => PodOutcome::Succeeded {
            termination_message: String::new(),
        },
        "Failed" => PodOutcome::Failed(PodFailure {
            pod: name.clone(),
            reason: FailureReason::LauncherFailed,
            detail: format!(
                "launcher pod {name} failed: {}: {}",
                status.reason.as_deref().unwrap_or("no reason"),
                status.message.as_deref().unwrap_or("no message")
            ),
            termination_message: None,
        }),
        "Running" => PodOutcome::Running,
        _ => PodOutcome::Waiting,
    }
}

/// The Failed condition's message: what happened, the termination message and the log tail, bounded.
pub fn failure_message(failure: &PodFailure, log_tail: Option<&str>) -> String {
    let mut message = failure.detail.clone();
    let tail = log_tail.map(str::trim).filter(|t| !t.is_empty());
    if let Some(term) = failure.termination_message.as_deref().map(str::trim)
        && !term.is_empty()
        && !tail.is_some_and(|t| t.contains(term))
    {
        message.push_str("\ntermination message:\n");
        message.push_str(term);
    }
    if let Some(tail) = tail {
        message.push_str("\nlog tail:\n");
        message.push_str(tail);
    }
    truncate_keep_end(&message, MAX_MESSAGE_BYTES, &failure.detail)
}

/// Keeps `head` and the end of `text` within `max` bytes: the end of a log is where the error is.
fn truncate_keep_end(text: &str, max: usize, head: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let marker = "\n[…]\n";
    let budget = max.saturating_sub(head.len() + marker.len());
    let mut start = text.len() - budget;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("{head}{marker}{}", &text[start..])
}

/// Where the run's pods are, all of them considered.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Under way: the phase to show.
    InFlight { phase: Phase, reason: &'static str },
    /// Every launcher succeeded; their termination messages, by shard index.
    Succeeded { shards: Vec<(u32, String, String)> },
    /// A launcher failed (the first, by index); the other pods must be stopped.
    Failed(PodFailure),
}

/// The shard index of a launcher pod, from its label (the name is a fallback).
pub fn pod_index(pod: &Pod) -> Option<u32> {
    pod.labels()
        .get(LAUNCHER_INDEX_LABEL)
        .and_then(|i| i.parse().ok())
        .or_else(|| pod.name_any().rsplit('-').next()?.parse().ok())
}

/// The run's progress from its pods. `expected` is the number of launcher pods; `started` says whether the
/// run has started (pods were created), so a missing pod means it was lost.
pub fn progress(run: &BenchmarkRun, pods: &[Pod], expected: u32, started: bool) -> Progress {
    let mut outcomes: Vec<(u32, &Pod, PodOutcome)> = pods
        .iter()
        .filter_map(|p| Some((pod_index(p)?, p, pod_outcome(p))))
        .filter(|(i, _, _)| *i < expected)
        .collect();
    outcomes.sort_by_key(|(i, _, _)| *i);
    if let Some((_, _, PodOutcome::Failed(failure))) = outcomes
        .iter()
        .find(|(_, _, o)| matches!(o, PodOutcome::Failed(_)))
    {
        return Progress::Failed(failure.clone());
    }
    if started && outcomes.len() < expected as usize {
        let missing: Vec<String> = (0..expected)
            .filter(|i| !outcomes.iter().any(|(j, _, _)| j == i))
            .map(|i| crate::builders::launcher_pod_name(run, i))
            .collect();
        return Progress::Failed(PodFailure {
            pod: missing.first().cloned().unwrap_or_default(),
            reason: FailureReason::LauncherLost,
            detail: format!(
                "launcher pod(s) {} disappeared after the run started; llmbench never re-creates a launcher, so \
                 no load is sent twice",
                missing.join(", ")
            ),
            termination_message: None,
        });
    }
    let all_done = !outcomes.is_empty()
        && outcomes.len() == expected as usize
        && outcomes
            .iter()
            .all(|(_, _, o)| matches!(o, PodOutcome::Succeeded { .. }));
    if all_done {
        return Progress::Succeeded {
            shards: outcomes
                .into_iter()
                .filter_map(|(i, p, o)| match o {
                    PodOutcome::Succeeded {
                        termination_message,
                    } => Some((i, p.name_any(), termination_message)),
                    _ => None,
                })
                .collect(),
        };
    }
    let any_active = outcomes
        .iter()
        .any(|(_, _, o)| matches!(o, PodOutcome::Running | PodOutcome::Succeeded { .. }));
    let spec = &run.spec;
    match (any_active, spec.launcher.debug, spec.skip_run) {
        (false, _, _) => Progress::InFlight {
            phase: Phase::Pending,
            reason: "Pending",
        },
        (true, true, _) => Progress::InFlight {
            phase: Phase::Running,
            reason: "Debug",
        },
        (true, false, true) => Progress::InFlight {
            phase: Phase::Collecting,
            reason: "Collecting",
        },
        (true, false, false) => Progress::InFlight {
            phase: Phase::Running,
            reason: "Running",
        },
    }
}

/// Sets condition `type_` in `conditions`, keeping its transition time when its status does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" }.to_owned();
    let transition = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    conditions.retain(|c| c.type_ != type_);
    conditions.push(Condition {
        type_: type_.to_owned(),
        status,
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time: transition,
    });
}

/// Records that a reconcile of the run failed for `reason` with `message` (see [`RECONCILED`]).
pub fn reconcile_failed(
    status: &mut BenchmarkRunStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let message = truncate_keep_end(message, MAX_MESSAGE_BYTES, "");
    set_condition(
        &mut status.conditions,
        RECONCILED,
        false,
        reason,
        &message,
        generation,
        now,
    );
}

/// Records that a reconcile succeeded, when an earlier one had failed; a run that never failed carries no
/// `Reconciled` condition at all.
pub fn reconcile_succeeded(
    status: &mut BenchmarkRunStatus,
    generation: Option<i64>,
    now: Timestamp,
) {
    if condition(status, RECONCILED).is_some_and(|c| c.status == "False") {
        set_condition(
            &mut status.conditions,
            RECONCILED,
            true,
            "Reconciled",
            "the operator acts on the run again",
            generation,
            now,
        );
    }
}

/// Removes condition `type_`.
pub fn clear_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// The condition of `type_`, if set.
pub fn condition<'s>(status: &'s BenchmarkRunStatus, type_: &str) -> Option<&'s Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the run has reached Succeeded or Failed; a finished run is never touched again.
/// The Failed % column: failed requests in percent of those sent, rounded to 0.01; none without requests.
pub fn failure_percent(summary: Option<&RunSummary>) -> Option<f64> {
    let summary = summary.filter(|s| s.requests > 0)?;
    let percent = summary.failures as f64 * 100.0 / summary.requests as f64;
    Some((percent * 100.0).round() / 100.0)
}

/// How long until a finished run or experiment is deleted by its TTL (`ttlSecondsAfterFinished`, else the
/// operator's `default`), counted from its completion time: `None` when it has no TTL or no completion time yet,
/// zero once it is due. A negative TTL (the CRD admits none) counts as zero.
pub fn ttl_left(
    ttl_seconds: Option<i32>,
    default: Option<Duration>,
    completion: Option<&Time>,
    now: Timestamp,
) -> Option<Duration> {
    let ttl = ttl_seconds
        .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
        .or(default)?;
    let since = now.duration_since(completion?.0);
    let elapsed = Duration::try_from(since).unwrap_or(Duration::ZERO);
    Some(ttl.saturating_sub(elapsed))
}

/// What an expired run's event says of its results: where they stay, and how to reach them again once the run
/// object is gone (a collector run on that directory, which `llmbench results fetch` then fetches).
pub fn kept_results(run: &str, namespace: &str, results_path: Option<&str>) -> String {
    let Some(path) = results_path else {
        return "it left no results directory".to_owned();
    };
    match path.split_once(':') {
        Some(("emptyDir", _)) => {
            "its results were on an emptyDir: they went with its pod, and their kept copy with it"
                .to_owned()
        }
        Some((claim, full)) => {
            let dir = full
                .strip_prefix(WORKLOAD_MOUNT_PATH)
                .unwrap_or(full)
                .trim_start_matches('/');
            format!(
                "its results stay in {path}; fetch them with `llmbench results fetch {run} -n {namespace} --claim \
                 {claim} --dir {dir}`"
            )
        }
        None => format!("its results stay in {path}"),
    }
}

pub fn is_finished(status: Option<&BenchmarkRunStatus>) -> bool {
    matches!(
        status.and_then(|s| s.phase),
        Some(Phase::Succeeded | Phase::Failed)
    )
}

/// The status of a run that failed for `reason` with `message`.
pub fn failed(
    mut status: BenchmarkRunStatus,
    reason: FailureReason,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> BenchmarkRunStatus {
    status.phase = Some(Phase::Failed);
    status.completion_time.get_or_insert(Time(now));
    set_condition(
        &mut status.conditions,
        COMPLETED,
        false,
        reason.as_str(),
        message,
        generation,
        now,
    );
    set_condition(
        &mut status.conditions,
        FAILED,
        true,
        reason.as_str(),
        message,
        generation,
        now,
    );
    status
}

/// The status of a run whose launchers all succeeded, and a note when the summary is incomplete.
pub fn succeeded(
    run: &BenchmarkRun,
    status: BenchmarkRunStatus,
    shards: &[(u32, String, String)],
    now: Timestamp,
) -> (BenchmarkRunStatus, Option<String>) {
    succeeded_with(run, status, shards, None, now)
}

/// The status of a sharded run whose merge pod succeeded: the summary is the merge's, exact over every shard's
/// records (`llmbench report` on the run's directory), and the shards' own summaries stay in `status.shards`.
/// `merge` is the merge pod's name and termination message.
pub fn merged(
    run: &BenchmarkRun,
    status: BenchmarkRunStatus,
    shards: &[(u32, String, String)],
    merge: (&str, &str),
    now: Timestamp,
) -> (BenchmarkRunStatus, Option<String>) {
    succeeded_with(run, status, shards, Some(merge), now)
}

fn succeeded_with(
    run: &BenchmarkRun,
    mut status: BenchmarkRunStatus,
    shards: &[(u32, String, String)],
    merge: Option<(&str, &str)>,
    now: Timestamp,
) -> (BenchmarkRunStatus, Option<String>) {
    let generation = run.metadata.generation;
    status.phase = Some(Phase::Succeeded);
    status.completion_time.get_or_insert(Time(now));
    clear_condition(&mut status.conditions, FAILED);
    if run.spec.launcher.debug {
        set_condition(
            &mut status.conditions,
            COMPLETED,
            true,
            "Succeeded",
            "the debug pod exited; nothing is collected in debug mode",
            generation,
            now,
        );
        return (status, None);
    }
    let mut parsed = Vec::new();
    let mut problems: Vec<SummaryError> = Vec::new();
    for (index, pod, message) in shards {
        match parse_summary(pod, message) {
            Ok(summary) => parsed.push(ShardSummary {
                index: *index,
                pod: pod.clone(),
                summary,
            }),
            Err(e) => problems.push(e),
        }
    }
    let summaries: Vec<RunSummary> = parsed.iter().map(|s| s.summary.clone()).collect();
    status.summary = match merge {
        Some((pod, message)) => match parse_summary(pod, message) {
            Ok(summary) => Some(summary),
            Err(e) => {
                problems.push(e);
                aggregate(&summaries)
            }
        },
        None => aggregate(&summaries),
    };
    status.shards = if shards.len() > 1 { parsed } else { Vec::new() };
    let note = if problems.is_empty() {
        None
    } else {
        Some(
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    // An emptyDir goes with its pod: say so where the user looks, instead of pointing at a path that is gone.
    let results = if run.spec.storage.pvc_name().is_none() {
        "the results were on an emptyDir and went with the pod: only this status.summary survives"
            .to_owned()
    } else {
        format!(
            "results in {}",
            status
                .results_path
                .as_deref()
                .unwrap_or("the workload volume")
        )
    };
    let (reason, message) = match &note {
        None => (
            "Succeeded",
            format!(
                "{} launcher pod(s) finished{}; {results}",
                shards.len(),
                if merge.is_some() {
                    ", their records merged exactly"
                } else {
                    ""
                },
            ),
        ),
        Some(note) => ("SucceededWithoutSummary", note.clone()),
    };
    set_condition(
        &mut status.conditions,
        COMPLETED,
        true,
        reason,
        &message,
        generation,
        now,
    );
    // SLOMet judges the spec's SLO bounds and the harness's own verdict (MLPerf's VALID/INVALID) together.
    let slo = run
        .spec
        .slo
        .as_ref()
        .map(|slo| status.summary.as_ref().map(|s| slo_verdict(slo, s)));
    let harness = status
        .summary
        .as_ref()
        .and_then(|s| s.verdict.as_ref())
        .map(harness_verdict);
    match (slo, harness) {
        (None, None) => {}
        (Some(None), _) => set_condition(
            &mut status.conditions,
            SLO_MET,
            false,
            "NoSummary",
            "the run left no summary to judge",
            generation,
            now,
        ),
        (slo, harness) => {
            let judgments: Vec<Result<String, String>> =
                slo.flatten().into_iter().chain(harness).collect();
            let met = judgments.iter().all(Result::is_ok);
            let message = judgments
                .iter()
                .map(|j| match j {
                    Ok(m) | Err(m) => m.as_str(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            let reason = if met { "WithinSLO" } else { "SLOViolated" };
            set_condition(
                &mut status.conditions,
                SLO_MET,
                met,
                reason,
                &message,
                generation,
                now,
            );
        }
    }
    (status, note)
}

/// The status of a run still under way.
pub fn in_flight(
    run: &BenchmarkRun,
    mut status: BenchmarkRunStatus,
    phase: Phase,
    reason: &str,
    now: Timestamp,
) -> BenchmarkRunStatus {
    status.phase = Some(phase);
    let message = match reason {
        "Debug" => "the debug pod sleeps; exec into it, and delete the run when done".to_owned(),
        "Collecting" => "the collector is reporting on earlier results".to_owned(),
        "Merging" => "every launcher succeeded; the merge pod is merging their records".to_owned(),
        "Running" => "the launcher pods are generating load".to_owned(),
        "StackStarting" => {
            "waiting for the standalone stack to become ready; the launchers start then".to_owned()
        }
        "Preflight" => {
            "a pre-flight pod checks the stack from the launchers' network; the launchers start \
                        once it passes"
                .to_owned()
        }
        "Queued" => {
            "queued in Kueue: the launchers are gated until Kueue admits them together".to_owned()
        }
        _ => "waiting for the launcher pods to start".to_owned(),
    };
    set_condition(
        &mut status.conditions,
        COMPLETED,
        false,
        reason,
        &message,
        run.metadata.generation,
        now,
    );
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::fixtures;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
        PodStatus,
    };
    use std::collections::BTreeMap;

    fn pod(index: u32, phase: &str, state: Option<ContainerState>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(format!("bench-1-launcher-{index}"));
        pod.metadata.labels = Some(BTreeMap::from([(
            LAUNCHER_INDEX_LABEL.to_owned(),
            index.to_string(),
        )]));
        pod.status = Some(PodStatus {
            phase: Some(phase.to_owned()),
            container_statuses: state.map(|s| {
                vec![ContainerStatus {
                    name: "launcher".to_owned(),
                    state: Some(s),
                    ..ContainerStatus::default()
                }]
            }),
            ..PodStatus::default()
        });
        pod
    }

    fn terminated(code: i32, reason: &str, message: &str) -> Option<ContainerState> {
        Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                reason: Some(reason.to_owned()),
                message: Some(message.to_owned()),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        })
    }

    fn waiting(reason: &str) -> Option<ContainerState> {
        Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_owned()),
                message: Some("back-off pulling image \"nope:1\"".to_owned()),
            }),
            ..ContainerState::default()
        })
    }

    fn running() -> Option<ContainerState> {
        Some(ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        })
    }

    fn failure(outcome: PodOutcome) -> PodFailure {
        match outcome {
            PodOutcome::Failed(f) => f,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_non_zero_exit_names_the_code_and_keeps_the_termination_message() {
        let f = failure(pod_outcome(&pod(
            0,
            "Failed",
            terminated(3, "Error", "boom"),
        )));
        assert_eq!(f.reason, FailureReason::LauncherFailed);
        assert_eq!(
            f.detail,
            "launcher pod bench-1-launcher-0 exited with code 3 (Error); no request succeeded: see the errors in \
             the summary and requests.bin (llmbench export)"
        );
        assert_eq!(f.termination_message.as_deref(), Some("boom"));
    }

    #[test]
    fn a_failed_pre_flight_and_a_stack_that_stopped_answering_are_told_apart() {
        let f = failure(pod_outcome(&pod(0, "Failed", terminated(6, "Error", ""))));
        assert_eq!(f.reason, FailureReason::PreflightFailed);
        assert!(
            f.detail.contains("code 6") && f.detail.contains("pre-flight"),
            "{}",
            f.detail
        );
        let f = failure(pod_outcome(&pod(0, "Failed", terminated(7, "Error", "{}"))));
        assert_eq!(f.reason, FailureReason::LauncherFailed);
        assert!(
            f.detail.contains("code 7") && f.detail.contains("stopped answering"),
            "{}",
            f.detail
        );
    }

    #[test]
    fn an_interrupted_launcher_says_its_results_were_written() {
        let f = failure(pod_outcome(&pod(0, "Failed", terminated(4, "Error", "{}"))));
        assert!(f.detail.contains("code 4"), "{}", f.detail);
        assert!(f.detail.contains("interrupted"), "{}", f.detail);
    }

    #[test]
    fn an_oom_kill_says_to_raise_the_memory_limit() {
        let f = failure(pod_outcome(&pod(
            0,
            "Failed",
            terminated(137, "OOMKilled", ""),
        )));
        assert_eq!(f.reason.as_str(), "OOMKilled");
        assert!(f.detail.contains("code 137 (OOMKilled)"), "{}", f.detail);
        assert!(f.detail.contains("limits.memory"), "{}", f.detail);
    }

    #[test]
    fn image_pull_errors_fail_the_pod_while_it_is_still_pending() {
        for reason in ["ErrImagePull", "ImagePullBackOff"] {
            let f = failure(pod_outcome(&pod(0, "Pending", waiting(reason))));
            assert_eq!(f.reason, FailureReason::ImagePullFailed);
            assert!(f.detail.contains(reason), "{}", f.detail);
        }
        assert_eq!(
            pod_outcome(&pod(0, "Pending", waiting("ContainerCreating"))),
            PodOutcome::Waiting
        );
    }

    #[test]
    fn an_evicted_pod_fails_with_the_kubelets_message() {
        let mut p = pod(0, "Failed", None);
        if let Some(s) = p.status.as_mut() {
            s.reason = Some("Evicted".to_owned());
            s.message = Some("The node was low on resource: memory.".to_owned());
        }
        let f = failure(pod_outcome(&p));
        assert_eq!(f.reason, FailureReason::Evicted);
        assert!(f.detail.contains("low on resource"), "{}", f.detail);
    }

    #[test]
    fn a_zero_exit_succeeds_even_before_the_pod_phase_catches_up() {
        assert_eq!(
            pod_outcome(&pod(0, "Running", terminated(0, "Completed", "{}"))),
            PodOutcome::Succeeded {
                termination_message: "{}".to_owned()
            }
        );
        assert_eq!(
            pod_outcome(&pod(0, "Running", running())),
            PodOutcome::Running
        );
    }

    #[test]
    fn the_failure_message_carries_the_log_tail_without_repeating_it() {
        let f = failure(pod_outcome(&pod(
            0,
            "Failed",
            terminated(1, "Error", "last line"),
        )));
        let message = failure_message(&f, Some("first line\nlast line\n"));
        assert_eq!(
            message,
            "launcher pod bench-1-launcher-0 exited with code 1 (Error)\nlog tail:\nfirst line\nlast line"
        );
        let message = failure_message(&f, None);
        assert!(
            message.ends_with("termination message:\nlast line"),
            "{message}"
        );
    }

    #[test]
    fn a_huge_log_tail_is_cut_from_the_front() {
        let f = failure(pod_outcome(&pod(0, "Failed", terminated(1, "Error", ""))));
        let tail = format!("{}THE ERROR", "x".repeat(20_000));
        let message = failure_message(&f, Some(&tail));
        assert!(message.len() <= MAX_MESSAGE_BYTES);
        assert!(message.starts_with("launcher pod bench-1-launcher-0 exited"));
        assert!(message.ends_with("THE ERROR"));
    }

    fn parallel_run(n: u32) -> BenchmarkRun {
        fixtures::run(&format!(
            "{}launcher:\n  parallelism: {n}\n",
            fixtures::BASIC
        ))
    }

    #[test]
    fn one_failed_shard_fails_the_run_even_while_others_run() {
        let run = parallel_run(2);
        let pods = [
            pod(0, "Running", running()),
            pod(1, "Failed", terminated(2, "Error", "")),
        ];
        match progress(&run, &pods, 2, true) {
            Progress::Failed(f) => assert_eq!(f.pod, "bench-1-launcher-1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_run_succeeds_only_when_every_shard_has() {
        let run = parallel_run(2);
        let done = pod(0, "Succeeded", terminated(0, "Completed", "{}"));
        assert_eq!(
            progress(&run, &[done.clone(), pod(1, "Running", running())], 2, true),
            Progress::InFlight {
                phase: Phase::Running,
                reason: "Running"
            }
        );
        match progress(&run, &[done.clone(), done_as(1)], 2, true) {
            Progress::Succeeded { shards } => assert_eq!(shards.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    fn done_as(index: u32) -> Pod {
        pod(index, "Succeeded", terminated(0, "Completed", "{}"))
    }

    #[test]
    fn a_pod_missing_after_the_start_is_lost_and_never_recreated() {
        let run = parallel_run(2);
        match progress(&run, &[done_as(0)], 2, true) {
            Progress::Failed(f) => {
                assert_eq!(f.reason, FailureReason::LauncherLost);
                assert!(f.detail.contains("bench-1-launcher-1"), "{}", f.detail);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unstarted_pods_keep_the_run_pending_and_debug_and_skip_run_have_their_own_phase() {
        let run = fixtures::run(fixtures::BASIC);
        assert_eq!(
            progress(&run, &[pod(0, "Pending", None)], 1, true),
            Progress::InFlight {
                phase: Phase::Pending,
                reason: "Pending"
            }
        );
        let debug = fixtures::run(&format!("{}launcher:\n  debug: true\n", fixtures::BASIC));
        assert_eq!(
            progress(&debug, &[pod(0, "Running", running())], 1, true),
            Progress::InFlight {
                phase: Phase::Running,
                reason: "Debug"
            }
        );
        let collect = fixtures::run(&format!(
            "{}skipRun: true\nresultsDir: old\n",
            fixtures::BASIC
        ));
        assert_eq!(
            progress(&collect, &[pod(0, "Running", running())], 1, true),
            Progress::InFlight {
                phase: Phase::Collecting,
                reason: "Collecting"
            }
        );
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let t0 = Timestamp::from_second(1_000).expect("time");
        let t1 = Timestamp::from_second(2_000).expect("time");
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            COMPLETED,
            false,
            "Pending",
            "",
            Some(1),
            t0,
        );
        set_condition(
            &mut conditions,
            COMPLETED,
            false,
            "Running",
            "",
            Some(1),
            t1,
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Time(t0));
        assert_eq!(conditions[0].reason, "Running");
        set_condition(
            &mut conditions,
            COMPLETED,
            true,
            "Succeeded",
            "",
            Some(1),
            t1,
        );
        assert_eq!(conditions[0].last_transition_time, Time(t1));
    }

    #[test]
    fn success_with_several_shards_records_each_and_the_aggregate() {
        let run = parallel_run(2);
        let summary = r#"{"schema":"llmbench.summary/v1","requests":{"total":10,"succeeded":10,"failed":0},"duration_s":2.0,"throughput":{"requests_per_s":5.0,"input_tokens_per_s":1.0,"output_tokens_per_s":1.0},"latency_ms":{"ttft":null,"tpot":null,"itl":null,"ntpot":null,"e2e":null}}"#;
        let shards = vec![
            (0, "bench-1-launcher-0".to_owned(), summary.to_owned()),
            (1, "bench-1-launcher-1".to_owned(), summary.to_owned()),
        ];
        let now = Timestamp::from_second(5).expect("time");
        let (status, note) = succeeded(&run, BenchmarkRunStatus::default(), &shards, now);
        assert_eq!(note, None);
        assert_eq!(status.phase, Some(Phase::Succeeded));
        assert_eq!(status.shards.len(), 2);
        assert_eq!(status.summary.as_ref().map(|s| s.requests), Some(20));
        assert_eq!(
            condition(&status, COMPLETED).map(|c| c.reason.as_str()),
            Some("Succeeded")
        );
    }

    #[test]
    fn an_empty_dir_run_says_only_its_summary_survives_and_a_claim_run_where_its_results_are() {
        let summary = r#"{"schema":"llmbench.summary/v1","requests":{"total":10,"succeeded":10,"failed":0},"duration_s":2.0,"throughput":{"requests_per_s":5.0,"input_tokens_per_s":1.0,"output_tokens_per_s":1.0},"latency_ms":{"ttft":null,"tpot":null,"itl":null,"ntpot":null,"e2e":null}}"#;
        let shards = vec![(0, "bench-1-launcher-0".to_owned(), summary.to_owned())];
        let now = Timestamp::from_second(5).expect("time");
        let message = |run: &BenchmarkRun, path: &str| {
            let status = BenchmarkRunStatus {
                results_path: Some(path.to_owned()),
                ..BenchmarkRunStatus::default()
            };
            let (status, _) = succeeded(run, status, &shards, now);
            condition(&status, COMPLETED)
                .map(|c| c.message.clone())
                .unwrap_or_default()
        };
        let scratch = fixtures::run(&format!("{}storage:\n  emptyDir: {{}}\n", fixtures::BASIC));
        let said = message(&scratch, "emptyDir:/requests/bench-1-0f3c9a2e");
        assert!(said.contains("only this status.summary survives"), "{said}");
        let claim = fixtures::run(fixtures::BASIC);
        let said = message(&claim, "workload-pvc:/requests/bench-1-0f3c9a2e");
        assert!(
            said.ends_with("results in workload-pvc:/requests/bench-1-0f3c9a2e"),
            "{said}"
        );
    }

    #[test]
    fn a_merged_run_takes_the_merge_pods_summary_and_keeps_each_shards() {
        let run = parallel_run(2);
        let shard = r#"{"schema":"llmbench.summary/v1","requests":{"total":10,"succeeded":10,"failed":0},"duration_s":2.0,"throughput":{"requests_per_s":5.0,"input_tokens_per_s":1.0,"output_tokens_per_s":1.0},"latency_ms":{"ttft":null,"tpot":null,"itl":null,"ntpot":null,"e2e":null}}"#;
        // The merge's rate is over the whole run's span (2.5 s), not the shards' rates added up (10/s).
        let merged = r#"{"schema":"llmbench.summary/v1","requests":{"total":20,"succeeded":20,"failed":0},"duration_s":2.5,"throughput":{"requests_per_s":8.0,"input_tokens_per_s":2.0,"output_tokens_per_s":2.0},"latency_ms":{"ttft":null,"tpot":null,"itl":null,"ntpot":null,"e2e":null}}"#;
        let shards = vec![
            (0, "bench-1-launcher-0".to_owned(), shard.to_owned()),
            (1, "bench-1-launcher-1".to_owned(), shard.to_owned()),
        ];
        let now = Timestamp::from_second(5).expect("time");
        let (status, note) = super::merged(
            &run,
            BenchmarkRunStatus::default(),
            &shards,
            ("bench-1-merge", merged),
            now,
        );
        assert_eq!(note, None);
        assert_eq!(status.shards.len(), 2);
        let summary = status.summary.as_ref().expect("summary");
        assert_eq!(summary.requests, 20);
        assert_eq!(summary.throughput.requests_per_second, 8.0);
        assert!(
            condition(&status, COMPLETED).is_some_and(|c| c.message.contains("merged exactly")),
            "{status:#?}"
        );
        // A merge pod that left no summary: the shards' aggregate stands, and the run says why.
        let (status, note) = super::merged(
            &run,
            BenchmarkRunStatus::default(),
            &shards,
            ("bench-1-merge", ""),
            now,
        );
        assert!(note.is_some());
        assert_eq!(
            status
                .summary
                .as_ref()
                .map(|s| s.throughput.requests_per_second),
            Some(10.0)
        );
    }

    #[test]
    fn success_without_a_parsable_summary_says_so() {
        let run = fixtures::run(&format!("{}slo:\n  ttftP99Ms: 100\n", fixtures::BASIC));
        let shards = vec![(0, "bench-1-launcher-0".to_owned(), String::new())];
        let now = Timestamp::from_second(5).expect("time");
        let (status, note) = succeeded(&run, BenchmarkRunStatus::default(), &shards, now);
        assert!(note.is_some());
        assert_eq!(
            condition(&status, COMPLETED).map(|c| c.reason.as_str()),
            Some("SucceededWithoutSummary")
        );
        assert_eq!(
            condition(&status, SLO_MET).map(|c| (c.status.as_str(), c.reason.as_str())),
            Some(("False", "NoSummary"))
        );
    }

    #[test]
    fn an_mlperf_verdict_sets_slomet_without_an_slo_in_the_spec() {
        let run = fixtures::run(fixtures::BASIC);
        let summary = |passed: bool, result: &str, failed: &str| {
            format!(
                r#"{{"schema":"llmbench.summary/v1","requests":{{"total":10,"succeeded":10,"failed":0}},"duration_s":1.0,"throughput":{{"requests_per_s":10.0,"input_tokens_per_s":1.0,"output_tokens_per_s":1.0}},"latency_ms":{{}},"verdict":{{"by":"mlperf","passed":{passed},"result":"{result}","failed_checks":[{failed}]}}}}"#
            )
        };
        let now = Timestamp::from_second(5).expect("time");
        let valid = vec![(0, "p".to_owned(), summary(true, "VALID", ""))];
        let (status, _) = succeeded(&run, BenchmarkRunStatus::default(), &valid, now);
        assert_eq!(
            condition(&status, SLO_MET).map(|c| (
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str()
            )),
            Some(("True", "WithinSLO", "mlperf: VALID"))
        );
        let invalid = vec![(
            0,
            "p".to_owned(),
            summary(false, "INVALID", r#""min_duration""#),
        )];
        let (status, _) = succeeded(&run, BenchmarkRunStatus::default(), &invalid, now);
        assert_eq!(
            condition(&status, SLO_MET).map(|c| (
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str()
            )),
            Some((
                "False",
                "SLOViolated",
                "mlperf: INVALID (failed: min_duration)"
            ))
        );
        assert_eq!(
            status.summary.and_then(|s| s.verdict).map(|v| v.result),
            Some("INVALID".to_owned())
        );
    }

    #[test]
    fn a_reconcile_error_is_a_reconciled_false_condition_until_a_pass_succeeds() {
        let t0 = Timestamp::from_second(1_000).expect("time");
        let t1 = Timestamp::from_second(2_000).expect("time");
        let mut status = BenchmarkRunStatus::default();
        reconcile_succeeded(&mut status, Some(1), t0);
        assert!(
            status.conditions.is_empty(),
            "a run that never failed has no Reconciled condition"
        );
        let message = "failed to create launcher pod bench-1-launcher-0 for BenchmarkRun bench-1: \
                       pods \"bench-1-launcher-0\" is forbidden: exceeded quota";
        reconcile_failed(&mut status, "CreatePodFailed", message, Some(1), t0);
        let c = condition(&status, RECONCILED).expect("condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("False", "CreatePodFailed", message)
        );
        reconcile_succeeded(&mut status, Some(1), t1);
        let c = condition(&status, RECONCILED).expect("condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Reconciled")
        );
        assert_eq!(c.last_transition_time, Time(t1));
        let huge = "x".repeat(100_000);
        reconcile_failed(&mut status, "PatchStatusFailed", &huge, Some(1), t1);
        assert!(
            condition(&status, RECONCILED).is_some_and(|c| c.message.len() <= MAX_MESSAGE_BYTES)
        );
    }

    #[test]
    fn a_failed_run_has_completed_false_and_failed_true_with_the_same_reason() {
        let now = Timestamp::from_second(5).expect("time");
        let status = failed(
            BenchmarkRunStatus::default(),
            FailureReason::Timeout,
            "timed out",
            Some(1),
            now,
        );
        assert_eq!(status.phase, Some(Phase::Failed));
        assert!(status.completion_time.is_some());
        let completed = condition(&status, COMPLETED).expect("completed");
        let failed = condition(&status, FAILED).expect("failed");
        assert_eq!(
            (completed.status.as_str(), completed.reason.as_str()),
            ("False", "Timeout")
        );
        assert_eq!(
            (failed.status.as_str(), failed.reason.as_str()),
            ("True", "Timeout")
        );
        assert!(is_finished(Some(&status)));
    }

    #[test]
    fn the_failure_column_is_failures_over_requests_in_percent_to_two_places() {
        let summary = |requests, failures| RunSummary {
            requests,
            failures,
            ..RunSummary::default()
        };
        assert_eq!(failure_percent(Some(&summary(3, 1))), Some(33.33));
        assert_eq!(failure_percent(Some(&summary(200, 1))), Some(0.5));
        assert_eq!(failure_percent(Some(&summary(7, 0))), Some(0.0));
        assert_eq!(failure_percent(Some(&summary(0, 0))), None, "nothing sent");
        assert_eq!(failure_percent(None), None);
    }

    #[test]
    fn a_ttl_counts_from_completion_and_the_runs_own_wins_over_the_default() {
        let done = Time(Timestamp::from_second(1_000).expect("time"));
        let at = |s| Timestamp::from_second(s).expect("time");
        let hour = Some(Duration::from_secs(3_600));
        assert_eq!(
            ttl_left(None, None, Some(&done), at(5_000)),
            None,
            "no TTL at all"
        );
        assert_eq!(
            ttl_left(Some(60), hour, Some(&done), at(1_010)),
            Some(Duration::from_secs(50)),
            "the run's own 60 s, not the hour"
        );
        assert_eq!(
            ttl_left(None, hour, Some(&done), at(1_600)),
            Some(Duration::from_secs(3_000))
        );
        assert_eq!(
            ttl_left(Some(60), None, Some(&done), at(1_060)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            ttl_left(Some(60), None, Some(&done), at(9_999)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            ttl_left(Some(0), hour, Some(&done), at(1_000)),
            Some(Duration::ZERO)
        );
        assert_eq!(
            ttl_left(Some(60), None, None, at(9_999)),
            None,
            "not finished yet"
        );
        assert_eq!(
            ttl_left(Some(60), None, Some(&done), at(900)),
            Some(Duration::from_secs(60)),
            "a clock behind the completion time waits the whole TTL"
        );
    }

    #[test]
    fn an_expired_runs_event_says_where_its_results_stay_and_how_to_fetch_them() {
        assert_eq!(
            kept_results(
                "sanity",
                "bench",
                Some("workload-pvc:/requests/sanity-1a2b3c4d")
            ),
            "its results stay in workload-pvc:/requests/sanity-1a2b3c4d; fetch them with `llmbench results fetch \
             sanity -n bench --claim workload-pvc --dir sanity-1a2b3c4d`"
        );
        assert!(
            kept_results("x", "bench", Some("emptyDir:/requests/x")).contains("went with its pod")
        );
        assert_eq!(
            kept_results("x", "bench", None),
            "it left no results directory"
        );
    }
}
