//! A server that stopped answering is not a storm. A connection-level failure (refused, a name that does not
//! resolve, a connection reset before any byte of a response) costs the client nothing, so a closed loop that
//! re-sends each failed slot at once turns a dead server into a hundred thousand failure records a second, none
//! of which measures anything.
//!
//! Two rules keep the numbers honest:
//! - the run stops once `limit` requests in a row (in the order they finished, across every stage) failed at
//!   the connection level, with [`StopReason::ServerStoppedAnswering`] naming when the streak began; every record
//!   is kept and every report written. Any other outcome — a success, an HTTP error, a stream cut after the
//!   head — ends the streak: the server is answering, however badly, and that is what the run measures.
//!   Cancelled requests say nothing about the server and neither count nor end a streak.
//! - between connection failures a closed-loop slot waits ([`Backoff`]: 10 ms, doubling to 1 s) instead of
//!   re-sending at once; an open-loop stage keeps its schedule, which bounds it already.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::StopReason;
use llmbench_model::record::{ErrorClass, RequestRecord};

/// How many connection-level failures in a row stop a run unless `--max-connect-failures` says otherwise: enough
/// that a server restarting one of several replicas, or a connection pool's stale sockets, do not stop it, few
/// enough that a dead server costs a run seconds, not its whole length.
pub const DEFAULT_MAX_CONNECT_FAILURES: u32 = 20;

/// A closed-loop slot's first wait after a connection failure.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest a closed-loop slot waits between connection failures.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Whether `record` failed before the server answered anything: the connection could not be made (refused,
/// DNS, unreachable), or it was reset or closed before a response head arrived.
pub(crate) fn is_connection_failure(record: &RequestRecord) -> bool {
    match record.error_class() {
        Some(ErrorClass::Connect) => true,
        Some(ErrorClass::ConnectionReset) => record.http_status.is_none(),
        _ => false,
    }
}

/// The run's streak of connection-level failures, shared by every request task. Two atomics and no lock: every
/// finished request passes here, and one that succeeds only reads the counter unless a streak was running.
#[derive(Debug)]
pub(crate) struct ConnectFailures {
    /// 0: never stop.
    limit: u32,
    in_a_row: AtomicU32,
    /// When the first request of the current streak was sent, on the run clock. Set by the request that starts a
    /// streak; two streaks racing (one ending as another begins) can leave it a request early or late, which
    /// moves the reported instant by one request's time at most.
    since_ns: AtomicU64,
}

impl ConnectFailures {
    pub fn new(limit: u32) -> Self {
        ConnectFailures {
            limit,
            in_a_row: AtomicU32::new(0),
            since_ns: AtomicU64::new(0),
        }
    }

    /// Counts one finished request. Returns the reason to stop the run when this request made the streak reach
    /// the limit (once per streak).
    pub fn observe(&self, record: &RequestRecord) -> Option<StopReason> {
        if record.error_class() == Some(ErrorClass::Cancelled) {
            return None;
        }
        if !is_connection_failure(record) {
            // Read first: a run whose requests succeed never writes the shared counter.
            if self.in_a_row.load(Ordering::Relaxed) != 0 {
                self.in_a_row.store(0, Ordering::Relaxed);
            }
            return None;
        }
        let in_a_row = self.in_a_row.fetch_add(1, Ordering::AcqRel) + 1;
        if in_a_row == 1 {
            self.since_ns.store(record.sent_ns, Ordering::Relaxed);
        }
        (self.limit != 0 && in_a_row == self.limit).then(|| StopReason::ServerStoppedAnswering {
            at_ms: self.since_ns.load(Ordering::Relaxed) / 1_000_000,
            failures: in_a_row,
        })
    }
}

/// How long one closed-loop slot waits before its next request: nothing after a request the server answered,
/// [`FIRST_BACKOFF`] after a first connection failure, twice the last wait after each further one, at most
/// [`MAX_BACKOFF`].
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    last: Option<Duration>,
}

impl Backoff {
    /// The wait after a request that did (`true`) or did not fail at the connection level.
    pub fn after(&mut self, connection_failed: bool) -> Option<Duration> {
        if !connection_failed {
            self.last = None;
            return None;
        }
        let wait = self
            .last
            .map_or(FIRST_BACKOFF, |last| (last * 2).min(MAX_BACKOFF));
        self.last = Some(wait);
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_model::record::RequestError;

    fn finished(
        class: Option<ErrorClass>,
        http_status: Option<u16>,
        sent_ns: u64,
    ) -> RequestRecord {
        let mut record: RequestRecord = serde_json::from_value(serde_json::json!({
            "id": 0, "stage": 0, "scheduled_ns": sent_ns, "sent_ns": sent_ns, "end_ns": sent_ns + 1,
            "input_tokens": 1, "streaming": true,
        }))
        .expect("a minimal record");
        record.http_status = http_status;
        record.error = class.map(|class| {
            Box::new(RequestError {
                class,
                message: "x".to_owned(),
            })
        });
        record
    }

    #[test]
    fn only_failures_before_any_answer_are_connection_failures() {
        assert!(is_connection_failure(&finished(
            Some(ErrorClass::Connect),
            None,
            0
        )));
        assert!(is_connection_failure(&finished(
            Some(ErrorClass::ConnectionReset),
            None,
            0
        )));
        // A reset after the head arrived is the server answering badly, not a server that is gone.
        assert!(!is_connection_failure(&finished(
            Some(ErrorClass::ConnectionReset),
            Some(200),
            0
        )));
        for class in [
            ErrorClass::HttpStatus,
            ErrorClass::Timeout,
            ErrorClass::StreamCut,
            ErrorClass::Cancelled,
        ] {
            assert!(!is_connection_failure(&finished(Some(class), Some(503), 0)));
        }
        assert!(!is_connection_failure(&finished(None, Some(200), 0)));
    }

    #[test]
    fn the_limit_trips_once_on_a_streak_and_names_when_it_began() {
        let watch = ConnectFailures::new(3);
        let refused = |ms: u64| finished(Some(ErrorClass::Connect), None, ms * 1_000_000);
        assert_eq!(watch.observe(&refused(1)), None);
        assert_eq!(watch.observe(&refused(2)), None);
        // An answer, however bad, ends the streak.
        assert_eq!(
            watch.observe(&finished(Some(ErrorClass::HttpStatus), Some(500), 0)),
            None
        );
        assert_eq!(watch.observe(&refused(10)), None);
        assert_eq!(watch.observe(&refused(11)), None);
        // A cancelled request neither counts nor ends it.
        assert_eq!(
            watch.observe(&finished(Some(ErrorClass::Cancelled), None, 0)),
            None
        );
        assert_eq!(
            watch.observe(&refused(12)),
            Some(StopReason::ServerStoppedAnswering {
                at_ms: 10,
                failures: 3
            })
        );
        assert_eq!(watch.observe(&refused(13)), None);
    }

    #[test]
    fn a_limit_of_zero_never_stops() {
        let watch = ConnectFailures::new(0);
        for _ in 0..1000 {
            assert_eq!(
                watch.observe(&finished(Some(ErrorClass::Connect), None, 0)),
                None
            );
        }
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_and_resets_on_an_answer() {
        let mut backoff = Backoff::default();
        assert_eq!(backoff.after(false), None);
        let waits: Vec<u64> = (0..9)
            .map(|_| backoff.after(true).expect("waits").as_millis() as u64)
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(backoff.after(false), None);
        assert_eq!(backoff.after(true), Some(FIRST_BACKOFF));
    }
}
