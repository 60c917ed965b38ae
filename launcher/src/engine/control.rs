//! Stopping a run, or one stage of it, before its plan is done — and saying why.
//!
//! A run stops early for four reasons: an interrupt (SIGTERM when a pod is deleted or times out, SIGINT at a
//! terminal), records that can no longer be written (a full disk: load that cannot be recorded is not sent), and a
//! stage's error limit (guidellm `max_errors`, `max_error_rate`, `max_global_error_rate`), which ends that stage or,
//! with `stopping_scope: all`, the whole run. Each has two steps: stop issuing, then cancel what is in flight. An
//! interrupt leaves the requests in flight a grace period to finish; the other reasons cancel them at once, as
//! guidellm's `stop_all` does. A cancelled request is still recorded, as `cancelled`, with the timings it had.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// Why a run or a stage stopped before its plan was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StopReason {
    /// A signal asked the launcher to stop (SIGTERM, SIGINT).
    Interrupted { signal: Signal },
    /// `requests.jsonl` could not be written (e.g. the disk is full).
    RecordsUnwritable,
    /// guidellm `max_errors` tripped.
    MaxErrors,
    /// guidellm `max_error_rate` tripped.
    MaxErrorRate,
    /// guidellm `max_global_error_rate` tripped.
    MaxGlobalErrorRate,
}

/// The signals a launcher handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Signal {
    Sigterm,
    Sigint,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Sigterm => "SIGTERM",
            Signal::Sigint => "SIGINT",
        })
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Interrupted { signal } => write!(f, "interrupted by {signal}"),
            StopReason::RecordsUnwritable => {
                f.write_str("the request records could not be written")
            }
            StopReason::MaxErrors => f.write_str("max_errors reached"),
            StopReason::MaxErrorRate => f.write_str("max_error_rate reached"),
            StopReason::MaxGlobalErrorRate => f.write_str("max_global_error_rate reached"),
        }
    }
}

/// One level of stopping (the run, or a stage): a token to stop issuing, one to cancel what is in flight, and the
/// first reason given.
#[derive(Debug, Clone)]
pub struct Control {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    issuing: CancellationToken,
    in_flight: CancellationToken,
    reason: Mutex<Option<StopReason>>,
}

impl Default for Control {
    fn default() -> Self {
        Control::new(CancellationToken::new(), CancellationToken::new())
    }
}

impl Control {
    fn new(issuing: CancellationToken, in_flight: CancellationToken) -> Self {
        Control {
            inner: Arc::new(Inner {
                issuing,
                in_flight,
                reason: Mutex::new(None),
            }),
        }
    }

    /// A stage's control: stopped whenever this one is, and stoppable on its own.
    pub fn child(&self) -> Control {
        Control::new(
            self.inner.issuing.child_token(),
            self.inner.in_flight.child_token(),
        )
    }

    /// Records `reason` (the first one given wins).
    fn note(&self, reason: StopReason) {
        let mut slot = self
            .inner
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(reason);
    }

    /// Stops issuing and cancels every request in flight now.
    pub fn stop_now(&self, reason: StopReason) {
        self.note(reason);
        self.inner.issuing.cancel();
        self.inner.in_flight.cancel();
    }

    /// Stops issuing now and cancels what is still in flight after `grace`. Must be called in a Tokio runtime.
    pub fn stop_after(&self, reason: StopReason, grace: Duration) {
        self.note(reason);
        self.inner.issuing.cancel();
        let in_flight = self.inner.in_flight.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            in_flight.cancel();
        });
    }

    /// The reason this level was stopped for, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        *self
            .inner
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no new request may be issued.
    pub fn issuing_stopped(&self) -> bool {
        self.inner.issuing.is_cancelled()
    }

    /// Resolves when issuing stops.
    pub async fn issuing_ended(&self) {
        self.inner.issuing.cancelled().await;
    }

    /// The token that cancels requests in flight.
    pub fn in_flight(&self) -> &CancellationToken {
        &self.inner.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stage_stops_with_its_run_but_not_the_other_way_round() {
        let run = Control::default();
        let first = run.child();
        first.stop_now(StopReason::MaxErrors);
        assert!(first.issuing_stopped() && first.in_flight().is_cancelled());
        assert!(!run.issuing_stopped());
        let second = run.child();
        run.stop_now(StopReason::RecordsUnwritable);
        assert!(second.issuing_stopped() && second.in_flight().is_cancelled());
        assert_eq!(first.reason(), Some(StopReason::MaxErrors));
        assert_eq!(run.reason(), Some(StopReason::RecordsUnwritable));
    }

    #[tokio::test(start_paused = true)]
    async fn an_interrupt_leaves_requests_in_flight_their_grace() {
        let run = Control::default();
        run.stop_after(
            StopReason::Interrupted {
                signal: Signal::Sigterm,
            },
            Duration::from_secs(5),
        );
        assert!(run.issuing_stopped());
        assert!(!run.in_flight().is_cancelled());
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert!(!run.in_flight().is_cancelled());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(run.in_flight().is_cancelled());
        // A second reason does not replace the first.
        run.stop_now(StopReason::RecordsUnwritable);
        assert_eq!(
            run.reason(),
            Some(StopReason::Interrupted {
                signal: Signal::Sigterm
            })
        );
    }

    #[test]
    fn reasons_serialize_as_tagged_snake_case() {
        let json = serde_json::to_string(&StopReason::Interrupted {
            signal: Signal::Sigint,
        })
        .expect("json");
        assert_eq!(json, r#"{"reason":"interrupted","signal":"SIGINT"}"#);
        assert_eq!(
            serde_json::to_string(&StopReason::MaxErrorRate).expect("json"),
            r#"{"reason":"max_error_rate"}"#
        );
    }
}
