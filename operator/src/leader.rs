//! Leader election on a `coordination.k8s.io/v1` Lease, so two replicas never reconcile at once.
//!
//! The protocol is client-go's: the holder renews `renewTime` every retry period; another candidate takes over
//! only after it has seen the same lease record unchanged for a whole lease duration *by its own clock* (never by
//! comparing timestamps written by another machine, so clock skew cannot cause two leaders). Every write is a
//! `replace` carrying the resourceVersion that was read, so of two candidates racing for an expired lease exactly
//! one wins. The holder releases the lease on shutdown, so a successor need not wait out the duration.
//!
//! Fencing: the leader stops its work (aborts the controllers, mid-reconcile if need be) the moment it has gone a
//! renew deadline without a successful renewal, by its own monotonic clock counted from the start of the last
//! round that renewed — whether the rounds since failed or hung. Every API call of a round is bounded by a timeout
//! shorter than the renew deadline, and a round by the deadline itself, so a hung call cannot keep a leader that
//! may already have been succeeded reconciling. The renew deadline is shorter than the lease duration, so the
//! leader stops before any other candidate may take over.

use std::future::Future;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::Shared;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::builders::FIELD_MANAGER;
use crate::reconcile::{is_already_exists, is_not_found};

/// How a lease is held.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This candidate, e.g. its pod name.
    pub identity: String,
    /// How long a lease record must stay unchanged before another candidate may take it.
    pub lease_duration: Duration,
    /// The longest any one API call may take (see [`Timing::call_timeout`]).
    pub call_timeout: Duration,
}

/// The parts of a lease record that tell whether it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRecord {
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub lease_duration_seconds: Option<i32>,
    pub transitions: i32,
}

impl LeaseRecord {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseRecord {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.map(|t| t.0),
            lease_duration_seconds: spec.lease_duration_seconds,
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }
}

/// What a candidate should do with the lease it just read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it, or the holder stopped renewing: take it.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds it and renews: stand by.
    StandBy { holder: String },
}

/// The decision for `record`, which this candidate has seen unchanged for `unchanged_for`.
pub fn decide(
    record: &LeaseRecord,
    me: &str,
    unchanged_for: Duration,
    default_duration: Duration,
) -> Decision {
    let Some(holder) = record.holder.as_deref() else {
        return Decision::Acquire;
    };
    if holder == me {
        return Decision::Renew;
    }
    let duration = record
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(default_duration);
    if unchanged_for >= duration {
        Decision::Acquire
    } else {
        Decision::StandBy {
            holder: holder.to_owned(),
        }
    }
}

/// The lease as it should be written after `decision`.
pub fn next_spec(
    current: Option<&LeaseSpec>,
    decision: &Decision,
    me: &str,
    lease_duration: Duration,
    now: Timestamp,
) -> Option<LeaseSpec> {
    let current = current.cloned().unwrap_or_default();
    let seconds = i32::try_from(lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    match decision {
        Decision::StandBy { .. } => None,
        Decision::Renew => Some(LeaseSpec {
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(seconds),
            holder_identity: Some(me.to_owned()),
            ..current
        }),
        Decision::Acquire => {
            let changed_hands = current
                .holder_identity
                .as_deref()
                .is_some_and(|h| !h.is_empty() && h != me);
            let transitions = current.lease_transitions.unwrap_or(0);
            Some(LeaseSpec {
                holder_identity: Some(me.to_owned()),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_duration_seconds: Some(seconds),
                lease_transitions: Some(if changed_hands {
                    transitions.saturating_add(1)
                } else {
                    transitions
                }),
                ..current
            })
        }
    }
}

/// Why a lease round failed (a lost race is not an error: it is `Ok(false)`).
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("failed to read Lease {namespace}/{name}: {source}")]
    Get {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("failed to write Lease {namespace}/{name}: {source}")]
    Write {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "the API server did not answer the {call} of Lease {namespace}/{name} within {after:?}"
    )]
    TimedOut {
        namespace: String,
        name: String,
        call: &'static str,
        after: Duration,
    },
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The last record seen and when it was first seen in that state, by our own monotonic clock.
    observed: Option<(LeaseRecord, Instant)>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    fn get_err(&self, source: kube::Error) -> LeaseError {
        LeaseError::Get {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// `call` bounded by the call timeout: a hung API server must not hold a round for ever.
    async fn within<T>(
        &self,
        call: &'static str,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, LeaseError> {
        tokio::time::timeout(self.config.call_timeout, request)
            .await
            .map_err(|_| LeaseError::TimedOut {
                namespace: self.config.namespace.clone(),
                name: self.config.name.clone(),
                call,
                after: self.config.call_timeout,
            })
    }

    fn write_err(&self, source: kube::Error) -> LeaseError {
        LeaseError::Write {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// One round: `Ok(true)` while we lead after it, `Ok(false)` while another candidate does.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let me = self.config.identity.clone();
        let now = Timestamp::now();
        let Some(lease) = self
            .within("read", self.api.get_opt(&self.config.name))
            .await?
            .map_err(|e| self.get_err(e))?
        else {
            let spec = next_spec(
                None,
                &Decision::Acquire,
                &me,
                self.config.lease_duration,
                now,
            );
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec,
            };
            return match self
                .within("create", self.api.create(&post_params(), &lease))
                .await?
            {
                Ok(created) => {
                    self.observed = Some((LeaseRecord::of(&created), Instant::now()));
                    Ok(true)
                }
                Err(e) if is_already_exists(&e) => Ok(false),
                Err(e) => Err(self.write_err(e)),
            };
        };
        let record = LeaseRecord::of(&lease);
        let since = match &self.observed {
            Some((seen, at)) if *seen == record => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((record.clone(), at));
                at
            }
        };
        let decision = decide(&record, &me, since.elapsed(), self.config.lease_duration);
        let Some(spec) = next_spec(
            lease.spec.as_ref(),
            &decision,
            &me,
            self.config.lease_duration,
            now,
        ) else {
            return Ok(false);
        };
        if let Decision::Acquire = decision {
            tracing::info!(lease = %self.config.name, previous = ?record.holder, "acquiring the lease");
        }
        let updated = Lease {
            metadata: lease.metadata.clone(),
            spec: Some(spec),
        };
        match self
            .within(
                "renewal",
                self.api
                    .replace(&self.config.name, &post_params(), &updated),
            )
            .await?
        {
            Ok(written) => {
                self.observed = Some((LeaseRecord::of(&written), Instant::now()));
                Ok(true)
            }
            // Someone wrote in between: they won this round.
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
            Err(e) => Err(self.write_err(e)),
        }
    }

    /// Gives the lease up if we hold it, so a successor takes over at once.
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        let lease = match self
            .within("read", self.api.get_opt(&self.config.name))
            .await?
        {
            Ok(Some(lease)) => lease,
            Ok(None) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(self.get_err(e)),
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        let released = Lease {
            metadata: lease.metadata.clone(),
            spec: Some(spec),
        };
        match self
            .within(
                "release",
                self.api
                    .replace(&self.config.name, &post_params(), &released),
            )
            .await?
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(()),
            Err(e) => Err(self.write_err(e)),
        }
    }
}

/// How the lease loop keeps time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How often the lease is renewed (or, standing by, looked at).
    pub retry_period: Duration,
    /// How long a leader may go without a successful renewal before it stops its work.
    pub renew_deadline: Duration,
}

impl Timing {
    /// The bound on one API call: half the renew deadline, so that a hung call leaves room for another try
    /// before the deadline.
    pub fn call_timeout(&self) -> Duration {
        (self.renew_deadline / 2).max(Duration::from_millis(1))
    }
}

/// What one round of the lease loop came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// We hold the lease (acquired or renewed).
    Held,
    /// Another candidate holds it.
    NotHeld,
    /// The round failed or did not finish in time; the lease may or may not still be ours.
    Failed(String),
}

/// What to do after a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Lead (start the work if it is not running); the renewal counts from `renewed_at`.
    Lead { renewed_at: Instant },
    /// Keep leading on the last renewal, and try again.
    Hold,
    /// Stand by: another candidate leads, or we never led and the round failed.
    StandBy,
    /// Stop the work now: the lease can no longer be counted on.
    Fence { why: String },
}

/// The verdict on `round`, which started at `started` and ended at `now`, for a candidate whose last successful
/// renewal started at `renewed` (`None` while it does not lead). Pure: every instant is on our own monotonic
/// clock, never on another machine's.
pub fn judge(
    round: Round,
    started: Instant,
    now: Instant,
    renewed: Option<Instant>,
    renew_deadline: Duration,
) -> Verdict {
    match (round, renewed) {
        // Counted from the round's start: the other candidates saw the renewal no earlier than that.
        (Round::Held, _) => Verdict::Lead {
            renewed_at: started,
        },
        (Round::NotHeld, Some(_)) => Verdict::Fence {
            why: "another replica holds the lease".to_owned(),
        },
        (Round::Failed(why), Some(last))
            if now.saturating_duration_since(last) >= renew_deadline =>
        {
            Verdict::Fence {
                why: format!(
                    "could not renew the lease within the renew deadline ({renew_deadline:?}): {why}"
                ),
            }
        }
        (Round::Failed(_), Some(_)) => Verdict::Hold,
        (Round::NotHeld | Round::Failed(_), None) => Verdict::StandBy,
    }
}

/// The shutdown signal handed to the work: resolves when the work should stop gracefully.
pub type Shutdown = Shared<oneshot::Receiver<()>>;

/// Work that runs only while leading (the controllers): stopped gracefully on shutdown, aborted on fencing.
pub struct Work {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Work {
    /// Spawns `work`, giving it the signal of a graceful stop.
    pub fn spawn<F, Fut>(work: F) -> Self
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(work(stopped.shared()));
        Work { stop, task }
    }

    /// Asks the work to stop and waits for it up to `grace` (reconciles under way finish); then stops it at once.
    pub async fn stop(self, grace: Duration) {
        let _ = self.stop.send(());
        let abort = self.task.abort_handle();
        if tokio::time::timeout(grace, self.task).await.is_err() {
            tracing::warn!(
                ?grace,
                "the controllers did not stop within the grace period; stopping them now"
            );
            abort.abort();
        }
    }

    /// Stops the work at once, reconciles under way included: another replica may be leading already. A
    /// reconcile cut short is safe, since reconciles are idempotent and the successor does it again.
    pub async fn fence(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Why leading ended with an error.
#[derive(Debug, thiserror::Error)]
#[error("lost leadership: {why}")]
pub struct Lost {
    pub why: String,
}

/// Campaigns for the lease every retry period and runs `start`'s work while leading, until `stop` turns true
/// (then the work stops gracefully, within `grace`, and the lease is released) or the lease is lost (then the
/// work is fenced at once and `Lost` comes back). `on_lease` hears whether we hold the lease after each round that
/// read it.
pub async fn lead(
    elector: &mut LeaderElector,
    timing: Timing,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
    on_lease: impl Fn(bool),
    mut start: impl FnMut() -> Work,
) -> Result<(), Lost> {
    let mut work: Option<Work> = None;
    let mut renewed: Option<Instant> = None;
    let mut ticker = tokio::time::interval(timing.retry_period);
    // After a slow round, wait a whole period rather than firing the missed ticks in a burst.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let lost = loop {
        let fence_at = renewed.map(|at| at + timing.renew_deadline);
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break None;
                }
                continue;
            }
            // Between rounds too: the deadline holds even if the loop itself were late.
            _ = sleep_until_some(fence_at) => {
                break Some(format!(
                    "no successful renewal within the renew deadline ({:?})",
                    timing.renew_deadline
                ));
            }
            _ = ticker.tick() => {}
        }
        let started = Instant::now();
        let round = match fence_at {
            Some(deadline) => {
                match tokio::time::timeout_at(deadline, elector.try_acquire_or_renew()).await {
                    Ok(result) => result,
                    Err(_) => Err(LeaseError::TimedOut {
                        namespace: elector.config.namespace.clone(),
                        name: elector.config.name.clone(),
                        call: "renewal round",
                        after: deadline.saturating_duration_since(started),
                    }),
                }
            }
            None => elector.try_acquire_or_renew().await,
        };
        let round = match round {
            Ok(true) => Round::Held,
            Ok(false) => Round::NotHeld,
            Err(e) => {
                tracing::warn!(error = %e, "lease round failed");
                Round::Failed(e.to_string())
            }
        };
        // Only a round that read the lease tells whether another candidate holds it.
        let someone_else = round == Round::NotHeld;
        match judge(
            round,
            started,
            Instant::now(),
            renewed,
            timing.renew_deadline,
        ) {
            Verdict::Lead { renewed_at } => {
                renewed = Some(renewed_at);
                on_lease(true);
                if work.is_none() {
                    tracing::info!(identity = elector.identity(), "leading");
                    work = Some(start());
                }
            }
            Verdict::Hold => {}
            Verdict::StandBy if someone_else => on_lease(false),
            Verdict::StandBy => {}
            Verdict::Fence { why } => break Some(why),
        }
    };
    match lost {
        Some(why) => {
            on_lease(false);
            if let Some(running) = work {
                running.fence().await;
                tracing::error!(%why, "lost the lease; the controllers were stopped");
            }
            Err(Lost { why })
        }
        None => {
            if let Some(running) = work {
                // No renewal happens while the controllers wind down, so the lease's own deadline bounds the grace.
                let left = renewed.map_or(Duration::ZERO, |at| {
                    (at + timing.renew_deadline).saturating_duration_since(Instant::now())
                });
                running.stop(grace.min(left)).await;
            }
            match elector.release().await {
                Ok(()) => tracing::info!("lease released"),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot release the lease; a successor waits for it to expire")
                }
            }
            Ok(())
        }
    }
}

/// Sleeps until `at`, or for ever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::fixtures;
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const DURATION: Duration = Duration::from_secs(15);

    fn held_by(holder: Option<&str>) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_owned),
            renew_time: None,
            lease_duration_seconds: Some(15),
            transitions: 2,
        }
    }

    #[test]
    fn a_free_lease_is_acquired_and_our_own_is_renewed() {
        assert_eq!(
            decide(&held_by(None), "a", Duration::ZERO, DURATION),
            Decision::Acquire
        );
        assert_eq!(
            decide(&held_by(Some("a")), "a", Duration::ZERO, DURATION),
            Decision::Renew
        );
    }

    #[test]
    fn another_holder_is_respected_until_its_record_stays_unchanged_for_the_duration() {
        assert_eq!(
            decide(&held_by(Some("b")), "a", Duration::from_secs(14), DURATION),
            Decision::StandBy {
                holder: "b".to_owned()
            }
        );
        assert_eq!(
            decide(&held_by(Some("b")), "a", Duration::from_secs(15), DURATION),
            Decision::Acquire
        );
    }

    #[test]
    fn the_holders_own_duration_wins_over_ours() {
        let mut record = held_by(Some("b"));
        record.lease_duration_seconds = Some(60);
        assert!(matches!(
            decide(&record, "a", Duration::from_secs(30), DURATION),
            Decision::StandBy { .. }
        ));
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_does_not() {
        let now = Timestamp::from_second(100).expect("time");
        let current = LeaseSpec {
            holder_identity: Some("b".to_owned()),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        };
        let taken =
            next_spec(Some(&current), &Decision::Acquire, "a", DURATION, now).expect("spec");
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));
        let mine = LeaseSpec {
            holder_identity: Some("a".to_owned()),
            lease_transitions: Some(3),
            acquire_time: Some(MicroTime(Timestamp::from_second(1).expect("time"))),
            ..LeaseSpec::default()
        };
        let renewed = next_spec(Some(&mine), &Decision::Renew, "a", DURATION, now).expect("spec");
        assert_eq!(renewed.lease_transitions, Some(3));
        assert_eq!(renewed.acquire_time, mine.acquire_time);
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));
        assert_eq!(renewed.lease_duration_seconds, Some(15));
        assert_eq!(
            next_spec(
                Some(&mine),
                &Decision::StandBy {
                    holder: "b".to_owned()
                },
                "a",
                DURATION,
                now
            ),
            None
        );
    }

    #[test]
    fn a_leader_is_fenced_a_renew_deadline_after_its_last_renewal_whether_rounds_fail_or_hang() {
        let deadline = Duration::from_secs(10);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let failed = || Round::Failed("timed out".to_owned());
        assert_eq!(
            judge(Round::Held, at(0), at(1), None, deadline),
            Verdict::Lead { renewed_at: at(0) },
            "the renewal counts from the round's start, not its end"
        );
        assert_eq!(
            judge(failed(), at(2), at(9), Some(at(0)), deadline),
            Verdict::Hold
        );
        assert!(matches!(
            judge(failed(), at(2), at(10), Some(at(0)), deadline),
            Verdict::Fence { .. }
        ));
        assert!(matches!(
            judge(Round::NotHeld, at(2), at(3), Some(at(0)), deadline),
            Verdict::Fence { .. }
        ));
        assert_eq!(
            judge(failed(), at(2), at(30), None, deadline),
            Verdict::StandBy
        );
        assert_eq!(
            judge(Round::NotHeld, at(2), at(3), None, deadline),
            Verdict::StandBy
        );
    }

    #[test]
    fn each_lease_call_is_bounded_well_inside_the_renew_deadline() {
        let timing = Timing {
            retry_period: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(10),
        };
        assert_eq!(timing.call_timeout(), Duration::from_secs(5));
    }

    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_renewal_never_answers_stops_its_work_at_the_renew_deadline() {
        let timing = Timing {
            retry_period: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(10),
        };
        let (client, mut api) = fixtures::client();
        let mut elector = LeaderElector::new(
            client,
            LeaseConfig {
                name: "llmbench-operator".to_owned(),
                namespace: "ops".to_owned(),
                identity: "a".to_owned(),
                lease_duration: Duration::from_secs(15),
                call_timeout: timing.call_timeout(),
            },
        );
        let scenario = tokio::spawn(async move {
            // Round 1: no lease yet; ours is created.
            api.expect("GET", &format!("{LEASES}/llmbench-operator"))
                .await
                .not_found("leases \"llmbench-operator\"");
            let create = api.expect("POST", LEASES).await;
            let mut lease = create.body.clone();
            lease["metadata"]["resourceVersion"] = json!("1");
            create.reply(201, &lease);
            // Every later round reads the lease, and its renewal is never answered.
            let mut hung = Vec::new();
            while let Some(read) = api
                .next("GET", &format!("{LEASES}/llmbench-operator"))
                .await
            {
                read.ok(&lease);
                hung.push(
                    api.expect("PUT", &format!("{LEASES}/llmbench-operator"))
                        .await,
                );
            }
            hung.len()
        });
        let started = Instant::now();
        let working = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(AtomicBool::new(false));
        let (_stop_tx, stop_rx) = watch::channel(false);
        let (work_flag, stop_flag) = (working.clone(), stopped.clone());
        let outcome = lead(
            &mut elector,
            timing,
            stop_rx,
            Duration::from_secs(20),
            |_| {},
            move || {
                let (work_flag, stop_flag) = (work_flag.clone(), stop_flag.clone());
                Work::spawn(move |_shutdown| async move {
                    /// Marks the work stopped when its future is dropped (aborted).
                    struct Guard(Arc<AtomicBool>);
                    impl Drop for Guard {
                        fn drop(&mut self) {
                            self.0.store(true, Ordering::SeqCst);
                        }
                    }
                    let _guard = Guard(stop_flag);
                    work_flag.store(true, Ordering::SeqCst);
                    // Reconciling for ever, deaf to a graceful stop: only fencing ends it.
                    std::future::pending::<()>().await;
                })
            },
        )
        .await;
        let fenced_after = started.elapsed();
        let lost = outcome.expect_err("the lease is lost");
        assert!(lost.why.contains("renew deadline"), "{}", lost.why);
        assert!(working.load(Ordering::SeqCst), "the work had started");
        assert!(stopped.load(Ordering::SeqCst), "the work was stopped");
        // Exactly the renew deadline after the round that acquired the lease, not a call timeout later.
        assert_eq!(fenced_after, timing.renew_deadline, "{fenced_after:?}");
        drop(elector);
        let hung = scenario.await.expect("scenario");
        assert!(hung >= 2, "renewals tried while the deadline ran: {hung}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_asked_to_stop_lets_its_work_finish_then_releases_the_lease() {
        let timing = Timing {
            retry_period: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(10),
        };
        let (client, mut api) = fixtures::client();
        let mut elector = LeaderElector::new(
            client,
            LeaseConfig {
                name: "llmbench-operator".to_owned(),
                namespace: "ops".to_owned(),
                identity: "a".to_owned(),
                lease_duration: Duration::from_secs(15),
                call_timeout: timing.call_timeout(),
            },
        );
        let (stop_tx, stop_rx) = watch::channel(false);
        let scenario = tokio::spawn(async move {
            let path = format!("{LEASES}/llmbench-operator");
            api.expect("GET", &path)
                .await
                .not_found("leases \"llmbench-operator\"");
            let create = api.expect("POST", LEASES).await;
            let mut lease = create.body.clone();
            lease["metadata"]["resourceVersion"] = json!("1");
            create.reply(201, &lease);
            // Leading: now the operator is asked to stop.
            let _ = stop_tx.send(true);
            api.expect("GET", &path).await.ok(&lease);
            let release = api.expect("PUT", &path).await;
            assert!(
                release.body["spec"]["holderIdentity"].is_null(),
                "{}",
                release.body
            );
            let released = release.body.clone();
            release.ok(&released);
            api
        });
        let finished = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        lead(
            &mut elector,
            timing,
            stop_rx,
            Duration::from_secs(20),
            |_| {},
            move || {
                let flag = flag.clone();
                Work::spawn(move |shutdown| async move {
                    // A reconcile under way finishes after the graceful stop is asked for.
                    let _ = shutdown.await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    flag.store(true, Ordering::SeqCst);
                })
            },
        )
        .await
        .expect("a clean stop");
        assert!(
            finished.load(Ordering::SeqCst),
            "the work finished gracefully"
        );
        drop(elector);
        scenario.await.expect("scenario").done().await;
    }
}
