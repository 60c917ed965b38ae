//! How a reconcile that fails is retried and told about: exponential backoff per object (so a run refused by a
//! quota does not hammer the API server every few seconds for ever), and Warning events rate-limited per object and
//! reason (so the same refusal does not fill the event stream). Both are in memory only: an operator restart
//! starts every object's backoff afresh, which costs one early retry each, never a wrong decision.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first retry after a failure.
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between retries.
pub const MAX_RETRY: Duration = Duration::from_secs(300);
/// At most one Warning event per object and reason this often.
pub const EVENT_INTERVAL: Duration = Duration::from_secs(300);

/// The wait before the retry after `failures` consecutive failures (1 for the first): `FIRST_RETRY` doubling
/// with each failure, at most `MAX_RETRY`.
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1u32 << doublings).min(MAX_RETRY)
}

/// When each (object, reason) last had an event, to let at most one through per `interval`.
#[derive(Debug)]
pub struct EventLimiter {
    interval: Duration,
    last: HashMap<(String, String), Instant>,
}

impl EventLimiter {
    pub fn new(interval: Duration) -> Self {
        EventLimiter {
            interval,
            last: HashMap::new(),
        }
    }

    /// Whether an event about `object` (its uid) for `reason` may go out at `now`; if so, it counts as sent.
    pub fn allow(&mut self, object: &str, reason: &str, now: Instant) -> bool {
        // Entries older than the interval decide nothing any more; dropping them bounds the map by the objects
        // that failed recently.
        let interval = self.interval;
        self.last
            .retain(|_, at| now.saturating_duration_since(*at) < interval);
        let key = (object.to_owned(), reason.to_owned());
        if self.last.contains_key(&key) {
            return false;
        }
        self.last.insert(key, now);
        true
    }
}

/// The retry and event state of one controller's objects, shared by its reconciles.
#[derive(Debug)]
pub struct Retries {
    failures: Mutex<HashMap<String, u32>>,
    events: Mutex<EventLimiter>,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            failures: Mutex::new(HashMap::new()),
            events: Mutex::new(EventLimiter::new(EVENT_INTERVAL)),
        }
    }
}

impl Retries {
    /// Counts one more failure of `object` and returns how long to wait before retrying it.
    pub fn failed(&self, object: &str) -> Duration {
        // A poisoned lock means a panic elsewhere while counting; the counts are still usable.
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(object.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        backoff(*count)
    }

    /// `object` reconciled: its next failure starts the backoff again.
    pub fn succeeded(&self, object: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(object);
    }

    /// Whether a Warning event for `reason` about `object` may be published now.
    pub fn may_publish(&self, object: &str, reason: &str) -> bool {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .allow(object, reason, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_five_seconds_up_to_five_minutes() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX), MAX_RETRY);
        assert_eq!(backoff(0), FIRST_RETRY);
    }

    #[test]
    fn a_success_resets_the_backoff_of_that_object_only() {
        let retries = Retries::default();
        assert_eq!(retries.failed("a"), Duration::from_secs(5));
        assert_eq!(retries.failed("a"), Duration::from_secs(10));
        assert_eq!(retries.failed("b"), Duration::from_secs(5));
        retries.succeeded("a");
        assert_eq!(retries.failed("a"), Duration::from_secs(5));
        assert_eq!(retries.failed("b"), Duration::from_secs(10));
    }

    #[test]
    fn one_event_per_object_and_reason_goes_out_per_interval() {
        let mut limiter = EventLimiter::new(Duration::from_secs(300));
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert!(limiter.allow("uid-1", "CreatePodFailed", at(0)));
        assert!(!limiter.allow("uid-1", "CreatePodFailed", at(10)));
        assert!(!limiter.allow("uid-1", "CreatePodFailed", at(299)));
        // Another reason, or another object, is news.
        assert!(limiter.allow("uid-1", "EnsurePvcFailed", at(10)));
        assert!(limiter.allow("uid-2", "CreatePodFailed", at(10)));
        assert!(limiter.allow("uid-1", "CreatePodFailed", at(300)));
        // Old entries are dropped, so the map holds only recent failures.
        assert!(limiter.allow("uid-3", "X", at(1_000)));
        assert_eq!(limiter.last.len(), 1);
    }
}
