//! Stopping a run, or one stage of it, before its plan is done — and saying why.
//!
//! A run stops early for four reasons: an interrupt (SIGTERM when a pod is deleted or times out, SIGINT at a
//! terminal), records that can no longer be written (a full disk: load that cannot be recorded is not sent), and a
//! stage's error limit (guidellm `max_errors`, `max_error_rate`, `max_global_error_rate`), which ends that stage or,
//! with `stopping_scope: all`, the whole run. Each has two steps: stop issuing, then cancel what is in flight. An
//! interrupt leaves the requests in flight a grace period to finish; the other reasons cancel them at once, as
//! guidellm's `stop_all` does. A cancelled request is still recorded, as `cancelled`, with the timings it had.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

/// Why a run stopped, and the signals it handles: part of the summary contract (`summary.json`'s `run`).
pub use llmbench_core::summary::v1::{Signal, StopReason};

/// One level of stopping (the run, or a stage): a flag to stop issuing, one to cancel what is in flight, and the
/// first reason given. Stopping a level stops every level below it.
///
/// Every request in flight waits on the in-flight flag, and wakes on every network read: checking it must not take a
/// lock. A flag is an atomic boolean checked on each wake-up, and a [`Notify`] a waiter registers with once (see
/// [`Cancelled`]); a `tokio_util` `CancellationToken` takes two locks on each poll, which cost 5 % of the
/// launcher's ceiling at 30 000 requests per second.
#[derive(Debug, Clone)]
pub struct Control {
    level: Arc<Level>,
}

#[derive(Debug, Default)]
struct Level {
    issuing: Flag,
    in_flight: Flag,
    reason: Mutex<Option<StopReason>>,
    /// The levels below this one (the stages of a run).
    children: Mutex<Vec<Weak<Level>>>,
}

/// A one-way switch tasks can wait on.
#[derive(Debug, Default)]
pub struct Flag {
    raised: AtomicBool,
    notify: Notify,
}

impl Flag {
    /// Whether the flag is raised: one atomic load.
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    fn raise(&self) {
        if !self.raised.swap(true, Ordering::AcqRel) {
            self.notify.notify_waiters();
        }
    }

    /// Resolves once the flag is raised.
    pub fn raised(&self) -> Cancelled<'_> {
        Cancelled {
            flag: self,
            // Created before the flag is checked: a raise in between still completes it (`notify_waiters` counts).
            notified: Box::pin(self.notify.notified()),
            hook: None,
        }
    }
}

/// Waits for a [`Flag`]: registers with the flag's [`Notify`] on its first poll, and on later polls only checks
/// the flag and whether its own waker fired — no lock per poll.
pub struct Cancelled<'a> {
    flag: &'a Flag,
    notified: Pin<Box<Notified<'a>>>,
    hook: Option<Arc<Hook>>,
}

/// The waker given to the `Notify`: it records that it fired, then wakes the task.
struct Hook {
    fired: AtomicBool,
    task: Waker,
}

impl Wake for Hook {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.flag.is_raised() {
            return Poll::Ready(());
        }
        if let Some(hook) = &self.hook
            && !hook.fired.load(Ordering::Acquire)
            && hook.task.will_wake(cx.waker())
        {
            return Poll::Pending;
        }
        let hook = Arc::new(Hook {
            fired: AtomicBool::new(false),
            task: cx.waker().clone(),
        });
        let waker = Waker::from(Arc::clone(&hook));
        let polled = self
            .notified
            .as_mut()
            .poll(&mut Context::from_waker(&waker));
        self.hook = Some(hook);
        if polled.is_ready() || self.flag.is_raised() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Default for Control {
    fn default() -> Self {
        Control {
            level: Arc::new(Level::default()),
        }
    }
}

impl Control {
    /// A stage's control: stopped whenever this one is, and stoppable on its own.
    pub fn child(&self) -> Control {
        let child = Arc::new(Level::default());
        let mut children = self
            .level
            .children
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        children.retain(|c| c.strong_count() > 0);
        children.push(Arc::downgrade(&child));
        // Under the lock, so a stop that raced the registration is not missed.
        if self.level.issuing.is_raised() {
            child.issuing.raise();
        }
        if self.level.in_flight.is_raised() {
            child.in_flight.raise();
        }
        drop(children);
        Control { level: child }
    }

    /// Records `reason` (the first one given wins).
    fn note(&self, reason: StopReason) {
        let mut slot = self
            .level
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(reason);
    }

    /// Stops issuing and cancels every request in flight now.
    pub fn stop_now(&self, reason: StopReason) {
        self.note(reason);
        raise(&self.level, |l| &l.issuing);
        raise(&self.level, |l| &l.in_flight);
    }

    /// Stops issuing now and cancels what is still in flight after `grace`. Must be called in a Tokio runtime.
    pub fn stop_after(&self, reason: StopReason, grace: Duration) {
        self.note(reason);
        raise(&self.level, |l| &l.issuing);
        let level = Arc::clone(&self.level);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            raise(&level, |l| &l.in_flight);
        });
    }

    /// The reason this level was stopped for, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        *self
            .level
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no new request may be issued.
    pub(crate) fn issuing_stopped(&self) -> bool {
        self.level.issuing.is_raised()
    }

    /// Resolves when issuing stops.
    pub(crate) fn issuing_ended(&self) -> Cancelled<'_> {
        self.level.issuing.raised()
    }

    /// The flag that cancels requests in flight.
    pub fn in_flight(&self) -> &Flag {
        &self.level.in_flight
    }
}

/// Raises `which` flag of `level` and of every level below it.
fn raise(level: &Arc<Level>, which: fn(&Level) -> &Flag) {
    which(level).raise();
    let children: Vec<Arc<Level>> = level
        .children
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for child in &children {
        raise(child, which);
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
        assert!(first.issuing_stopped() && first.in_flight().is_raised());
        assert!(!run.issuing_stopped());
        let second = run.child();
        run.stop_now(StopReason::RecordsUnwritable);
        assert!(second.issuing_stopped() && second.in_flight().is_raised());
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
        assert!(!run.in_flight().is_raised());
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert!(!run.in_flight().is_raised());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(run.in_flight().is_raised());
        // A second reason does not replace the first.
        run.stop_now(StopReason::RecordsUnwritable);
        assert_eq!(
            run.reason(),
            Some(StopReason::Interrupted {
                signal: Signal::Sigterm
            })
        );
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_its_flag_is_raised_and_not_before() {
        let run = Control::default();
        let stage = run.child();
        let waiting = {
            let stage = stage.clone();
            tokio::spawn(async move { stage.in_flight().raised().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        run.stop_now(StopReason::RecordsUnwritable);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("woken")
            .expect("joins");
        // A stage made after the stop starts stopped.
        assert!(run.child().in_flight().is_raised());
    }

    #[tokio::test]
    async fn a_waiter_polled_many_times_before_the_raise_still_wakes() {
        let flag = Flag::default();
        let mut waiter = Box::pin(flag.raised());
        for _ in 0..3 {
            assert!(futures_util::poll!(waiter.as_mut()).is_pending());
        }
        flag.raise();
        assert!(futures_util::poll!(waiter.as_mut()).is_ready());
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
