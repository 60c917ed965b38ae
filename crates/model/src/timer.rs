//! Sleeps precise to a fraction of a millisecond, for the send schedule and the simulator's token clock.
//!
//! tokio's timer wheel ticks every millisecond and rounds deadlines up to the next tick, so a task asked to wake at
//! `t` wakes anywhere in `[t, t + 1 ms)` plus its wake-up latency. That is too coarse for a 1 000 req/s schedule
//! (one request per tick) and for a simulator whose TTFT is the truth a client's measurements are checked against.
//!
//! [`sleep_until`] therefore waits on one dedicated timer thread that keeps the near deadlines in a heap and waits
//! on a condition variable until the earliest. A sleep longer than [`COARSE_ABOVE`] first waits on tokio's wheel
//! until [`COARSE_MARGIN`] before its deadline (cheap, cancellable, no entry here), so long waits such as 10 000
//! slow streams keep the heap small; shorter ones go to the thread whole, one wake-up each. On Linux that wait is a futex with an hrtimer, late by
//! the thread's timer slack (50 µs by default), not by a millisecond. The thread never spins: its cost is one wake-up
//! per due deadline (deadlines due together are fired together).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

/// How long before a deadline the coarse tokio sleep hands over to the timer thread: more than the wheel's tick
/// plus its rounding, so the hand-over is never late itself.
pub(crate) const COARSE_MARGIN: Duration = Duration::from_millis(3);

/// Sleeps up to this long skip the coarse step: for them it would cost a second wake-up (a simulator token every
/// 10 ms would wake twice) only to keep a short-lived entry off the timer thread's heap.
pub(crate) const COARSE_ABOVE: Duration = Duration::from_millis(25);

/// Waits until `deadline`, waking within tens of microseconds after it (see the module documentation).
/// Dropping the future cancels the wait.
pub async fn sleep_until(deadline: Instant) {
    if deadline.saturating_duration_since(Instant::now()) > COARSE_ABOVE {
        tokio::time::sleep_until((deadline - COARSE_MARGIN).into()).await;
    }
    match timer() {
        Some(timer) => {
            PreciseSleep {
                timer,
                deadline,
                entry: None,
            }
            .await
        }
        // No timer thread could be started: millisecond precision is still correct, only coarser.
        None => tokio::time::sleep_until(deadline.into()).await,
    }
}

/// The precise last step of a sleep: registered with the timer thread on first poll.
struct PreciseSleep {
    timer: &'static Timer,
    deadline: Instant,
    entry: Option<Arc<Entry>>,
}

/// One pending deadline, shared by its future and the timer thread.
#[derive(Debug)]
struct Entry {
    fired: AtomicBool,
    waker: AtomicWaker,
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        match &self.entry {
            Some(entry) => {
                // Register before checking, so a firing in between is not missed.
                entry.waker.register(cx.waker());
                if entry.fired.load(Ordering::Acquire) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
            None => {
                let entry = Arc::new(Entry {
                    fired: AtomicBool::new(false),
                    waker: AtomicWaker::new(),
                });
                entry.waker.register(cx.waker());
                self.timer.schedule(self.deadline, Arc::clone(&entry));
                self.entry = Some(entry);
                Poll::Pending
            }
        }
    }
}

/// The timer thread's shared half.
struct Timer {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<Pending>>,
    /// Breaks ties between equal deadlines, so the heap never compares entries.
    next_seq: u64,
}

struct Pending {
    deadline: Instant,
    seq: u64,
    entry: Arc<Entry>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

/// The process's timer thread, started on first use. One per process, like tokio's own time driver: the thread
/// holds nothing but deadlines, so sharing it between the engine and an embedded simulator is harmless.
fn timer() -> Option<&'static Timer> {
    static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();
    *TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new()
            .name("llmbench-timer".to_owned())
            .spawn(move || timer.run());
        match spawned {
            Ok(_) => Some(timer),
            Err(error) => {
                tracing::warn!(%error, "cannot start the timer thread; sleeps fall back to millisecond precision");
                None
            }
        }
    })
}

impl Timer {
    fn schedule(&self, deadline: Instant, entry: Arc<Entry>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = state.next_seq;
        state.next_seq += 1;
        let earliest = state
            .heap
            .peek()
            .is_none_or(|Reverse(first)| deadline < first.deadline);
        state.heap.push(Reverse(Pending {
            deadline,
            seq,
            entry,
        }));
        drop(state);
        if earliest {
            self.changed.notify_one();
        }
    }

    fn run(&self) {
        let mut due: Vec<Arc<Entry>> = Vec::new();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = Instant::now();
            while let Some(Reverse(first)) = state.heap.peek()
                && first.deadline <= now
            {
                if let Some(Reverse(pending)) = state.heap.pop() {
                    due.push(pending.entry);
                }
            }
            if !due.is_empty() {
                // Wake outside the lock: a woken task may schedule its next deadline at once.
                drop(state);
                for entry in due.drain(..) {
                    entry.fired.store(true, Ordering::Release);
                    entry.waker.wake();
                }
                state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state = match state.heap.peek() {
                Some(Reverse(first)) => {
                    let wait = first.deadline.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(state, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sleep_never_ends_before_its_deadline() {
        for micros in [0_u64, 50, 700, 4_000] {
            let deadline = Instant::now() + Duration::from_micros(micros);
            sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "woke before {micros} µs");
        }
    }

    #[tokio::test]
    async fn many_sleeps_out_of_order_all_end() {
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in (0..200_u64).rev() {
            let deadline = start + Duration::from_micros((i * 37) % 5_000);
            tasks.spawn(async move {
                sleep_until(deadline).await;
                Instant::now() >= deadline
            });
        }
        while let Some(done) = tasks.join_next().await {
            assert!(matches!(done, Ok(true)));
        }
    }

    #[tokio::test]
    async fn a_dropped_sleep_does_not_disturb_the_others() {
        let deadline = Instant::now() + Duration::from_millis(1);
        let dropped = tokio::time::timeout(Duration::from_micros(10), sleep_until(deadline)).await;
        assert!(dropped.is_err() || Instant::now() >= deadline);
        sleep_until(deadline + Duration::from_micros(100)).await;
    }
}
