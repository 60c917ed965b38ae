//! Releasing the shards of a sharded run at one instant (the protocol: `llmbench_api::release`).
//!
//! While a run with `parallelism > 1` is under way and not every shard is confirmed released, each reconcile asks
//! every launcher pod's release port where it is. Once all answer `waiting`, every one of them is sent the same
//! instant, [`RELEASE_LEAD`] ahead, and starts its clock then. A shard that does not become ready within
//! `launcher.startTimeout` of the run's start fails the run with reason ShardsNotReady, naming each shard that is
//! not ready and why. The decision ([`decide`]) is pure; [`probe`] and [`send`] are the thin HTTP shell.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use llmbench_api::release::{READY_PATH, RELEASE_PATH, RELEASE_PORT, ReadyAnswer, ReleaseRequest};

/// How far ahead of the decision the shards are told to start: room for the release to reach every shard (the
/// POSTs go out together; each takes a loopback or pod-network round trip).
pub const RELEASE_LEAD: Duration = Duration::from_secs(1);
/// How long one probe or release call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a run whose shards are not all released is looked at again.
pub const POLL: Duration = Duration::from_secs(1);

/// Where one shard is, as the operator sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ShardState {
    /// No pod with this index.
    Missing,
    /// The pod is not running yet (or no longer): its phase and why.
    NotRunning(String),
    /// The pod runs but its release port does not answer (yet).
    Unreachable(String),
    /// Its launcher answered.
    Answered(ReadyAnswer),
    /// The pod finished: it was released (a launcher only runs after its release) or failed.
    Finished,
}

/// What to do about a run's release.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Not every shard is ready: look again soon.
    Wait,
    /// Start every shard in `send_to` at `at_unix_ns` (a fresh instant, or the one a shard already accepted);
    /// `confirmed` shards already have it.
    Release {
        at_unix_ns: u64,
        send_to: Vec<u32>,
        confirmed: u32,
    },
    /// Not every shard became ready within the start timeout.
    NotReady { message: String },
}

/// The decision for shards `states` (by index, every index from 0 to parallelism − 1), `elapsed` after the run
/// started, with `timeout` to become ready.
pub fn decide(
    states: &[(u32, ShardState)],
    now_unix_ns: u64,
    elapsed: Duration,
    timeout: Duration,
) -> Decision {
    let accepted = states
        .iter()
        .filter_map(|(_, state)| match state {
            ShardState::Answered(ReadyAnswer::Released { at_unix_ns }) => Some(*at_unix_ns),
            _ => None,
        })
        .min();
    let confirmed = states
        .iter()
        .filter(|(_, s)| {
            matches!(
                s,
                ShardState::Answered(ReadyAnswer::Released { .. }) | ShardState::Finished
            )
        })
        .count() as u32;
    let unreleased = |wanted: fn(&ShardState) -> bool| -> Vec<u32> {
        states
            .iter()
            .filter(|(_, s)| wanted(s))
            .map(|(i, _)| *i)
            .collect()
    };
    // Some shard has its instant already (an earlier reconcile released it and its status write was lost, or
    // a shard was restarted): the others get the same one, never a new one.
    if let Some(at_unix_ns) = accepted {
        return Decision::Release {
            at_unix_ns,
            send_to: unreleased(|s| {
                matches!(
                    s,
                    ShardState::Answered(ReadyAnswer::Waiting | ReadyAnswer::Preparing)
                )
            }),
            confirmed,
        };
    }
    let all_waiting = !states.is_empty()
        && states
            .iter()
            .all(|(_, s)| *s == ShardState::Answered(ReadyAnswer::Waiting));
    if all_waiting {
        return Decision::Release {
            at_unix_ns: now_unix_ns.saturating_add(RELEASE_LEAD.as_nanos() as u64),
            send_to: states.iter().map(|(i, _)| *i).collect(),
            confirmed: 0,
        };
    }
    if elapsed < timeout {
        return Decision::Wait;
    }
    let not_ready: Vec<String> = states
        .iter()
        .filter_map(|(i, state)| {
            let why = match state {
                ShardState::Answered(ReadyAnswer::Waiting) => return None,
                ShardState::Missing => "no pod".to_owned(),
                ShardState::NotRunning(why) => why.clone(),
                ShardState::Unreachable(why) => format!("its release port does not answer: {why}"),
                ShardState::Answered(_) => "still preparing".to_owned(),
                ShardState::Finished => "finished without being released".to_owned(),
            };
            Some(format!("shard {i}: {why}"))
        })
        .collect();
    Decision::NotReady {
        message: format!(
            "{} of {} shard(s) were not ready {}s after the run started (launcher.startTimeout), so no shard \
             was released and no load was sent: {}",
            not_ready.len(),
            states.len(),
            timeout.as_secs(),
            not_ready.join("; ")
        ),
    }
}

/// A pod that has not started running, in words: its phase and the reason the scheduler or kubelet gives.
fn not_running(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    let condition = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.status == "False" && (c.reason.is_some() || c.message.is_some()))
        })
        .map(|c| {
            format!(
                "{} {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        });
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|statuses| {
            statuses
                .iter()
                .find_map(|c| c.state.as_ref()?.waiting.clone())
        })
        .map(|w| {
            format!(
                "{} {}",
                w.reason.unwrap_or_default(),
                w.message.unwrap_or_default()
            )
        });
    match waiting.or(condition) {
        Some(why) => format!("{phase}: {}", why.trim()),
        None => phase,
    }
}

/// Where shard `pod` is: from its phase, and for a running pod from its release port.
pub async fn probe(http: &reqwest::Client, pod: Option<&Pod>) -> ShardState {
    let Some(pod) = pod else {
        return ShardState::Missing;
    };
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded" | "Failed") => return ShardState::Finished,
        Some("Running") => {}
        _ => return ShardState::NotRunning(not_running(pod)),
    }
    let Some(ip) = status.and_then(|s| s.pod_ip.as_deref()) else {
        return ShardState::NotRunning("Running without a pod IP yet".to_owned());
    };
    let url = format!("http://{}{READY_PATH}", host_port(ip));
    let answer = async {
        let response = http.get(&url).timeout(CALL_TIMEOUT).send().await?;
        response.json::<ReadyAnswer>().await
    };
    match answer.await {
        Ok(answer) => ShardState::Answered(answer),
        Err(e) => ShardState::Unreachable(format!("{url}: {e}")),
    }
}

/// Sends `at_unix_ns` to every pod in `pods`, all at once; the shards that did not take it, with why.
pub async fn send(http: &reqwest::Client, pods: &[&Pod], at_unix_ns: u64) -> Vec<String> {
    let calls = pods.iter().map(|pod| async move {
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref())?;
        let url = format!("http://{}{RELEASE_PATH}", host_port(ip));
        let sent = http
            .post(&url)
            .timeout(CALL_TIMEOUT)
            .json(&ReleaseRequest { at_unix_ns })
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        sent.err().map(|e| format!("{}: {e}", pod.name_any()))
    });
    futures_util::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// `ip:port` of the release port, with an IPv6 pod IP in brackets.
fn host_port(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{RELEASE_PORT}")
    } else {
        format!("{ip}:{RELEASE_PORT}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);
    const NOW: u64 = 1_000_000_000_000;

    fn waiting() -> ShardState {
        ShardState::Answered(ReadyAnswer::Waiting)
    }

    #[test]
    fn shards_are_released_together_once_every_one_is_waiting() {
        let states = [(0, waiting()), (1, waiting()), (2, waiting())];
        assert_eq!(
            decide(&states, NOW, Duration::ZERO, MINUTE),
            Decision::Release {
                at_unix_ns: NOW + 1_000_000_000,
                send_to: vec![0, 1, 2],
                confirmed: 0
            }
        );
    }

    #[test]
    fn a_shard_not_ready_holds_every_other_back_until_the_timeout() {
        let states = [
            (0, waiting()),
            (
                1,
                ShardState::NotRunning("Pending: Unschedulable 0/3 nodes".to_owned()),
            ),
            (2, ShardState::Answered(ReadyAnswer::Preparing)),
            (3, ShardState::Missing),
        ];
        assert_eq!(decide(&states, NOW, MINUTE / 2, MINUTE), Decision::Wait);
        let Decision::NotReady { message } = decide(&states, NOW, MINUTE, MINUTE) else {
            panic!("expected NotReady");
        };
        assert!(
            message.starts_with("3 of 4 shard(s) were not ready 60s after the run started"),
            "{message}"
        );
        assert!(
            message.contains("shard 1: Pending: Unschedulable 0/3 nodes"),
            "{message}"
        );
        assert!(message.contains("shard 2: still preparing"), "{message}");
        assert!(message.contains("shard 3: no pod"), "{message}");
        assert!(!message.contains("shard 0"), "{message}");
    }

    #[test]
    fn an_instant_a_shard_already_took_is_sent_to_the_rest_never_a_new_one() {
        // The operator restarted after releasing shard 0 only: shard 1 gets shard 0's instant, even past it.
        let states = [
            (
                0,
                ShardState::Answered(ReadyAnswer::Released { at_unix_ns: 5 }),
            ),
            (1, waiting()),
            (2, ShardState::Finished),
        ];
        assert_eq!(
            decide(&states, NOW, 10 * MINUTE, MINUTE),
            Decision::Release {
                at_unix_ns: 5,
                send_to: vec![1],
                confirmed: 2
            }
        );
    }

    #[test]
    fn ipv6_pod_ips_are_bracketed() {
        assert_eq!(host_port("10.1.2.3"), "10.1.2.3:9465");
        assert_eq!(host_port("fd00::5"), "[fd00::5]:9465");
    }
}
