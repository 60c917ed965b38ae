//! Leader election on a `coordination.k8s.io/v1` Lease, so two replicas never reconcile at once.
//!
//! The protocol is client-go's: the holder renews `renewTime` every retry period; another candidate takes over
//! only after it has seen the same lease record unchanged for a whole lease duration *by its own clock* (never by
//! comparing timestamps written by another machine, so clock skew cannot cause two leaders). Every write is a
//! `replace` carrying the resourceVersion that was read, so of two candidates racing for an expired lease exactly
//! one wins. The holder releases the lease on shutdown, so a successor need not wait out the duration.

use std::time::{Duration, Instant};

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
            .api
            .get_opt(&self.config.name)
            .await
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
            return match self.api.create(&post_params(), &lease).await {
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
            .api
            .replace(&self.config.name, &post_params(), &updated)
            .await
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
        let lease = match self.api.get_opt(&self.config.name).await {
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
            .api
            .replace(&self.config.name, &post_params(), &released)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(()),
            Err(e) => Err(self.write_err(e)),
        }
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
}
