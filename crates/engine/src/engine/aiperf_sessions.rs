//! AIPerf 0.13's rate loop over multi-turn sessions (`timing/strategies/request_rate.py` `execute_phase` and
//! `handle_credit_return`, `credit/issuer.py`, `timing/phase/stop_conditions.py`, `timing/phase/credit_counter.py`).
//!
//! Every turn is a credit issued at the end of a rate interval (intervals of 0 without a rate). At each interval:
//! a queued continuation turn goes first; else, when the session count allows, a new session starts if one of
//! the `--concurrency` session slots is free (a rate's interval without one sends nothing; the burst waits for a
//! slot or a continuation); else, when every started session's turns were sent, the phase is over. A
//! continuation is queued when the turn before it returned, after the turn's `delay` (think time). A session
//! holds its slot from its first turn until its last returned.
//!
//! The phase stops sending at the request count (turns, mid-session included), once the session count was
//! reached and every turn of the started sessions was sent, or at the duration; continuations of turns still in
//! flight are then dropped, as AIPerf's sending-complete phase issues none.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::conversation::{AiperfSession, Conversations};
use super::{Credit, Issue, Paced, Phase, RateTicks, StageContext, until};

/// Continuations waiting for an interval, and the end of the phase's sending.
#[derive(Default)]
struct Continuations {
    queue: Mutex<VecDeque<AiperfSession>>,
    /// A continuation was queued.
    queued: Notify,
    over: AtomicBool,
    ended: Notify,
}

impl Continuations {
    fn push(&self, session: AiperfSession) {
        if self.over.load(Ordering::Acquire) {
            return;
        }
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(session);
        self.queued.notify_one();
    }

    fn pop(&self) -> Option<AiperfSession> {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    /// Sending is over: what is queued is dropped (its slots freed) and nothing more is queued.
    fn end(&self) {
        self.over.store(true, Ordering::Release);
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.ended.notify_waiters();
    }

    async fn ended(&self) {
        let ended = self.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        if !self.over.load(Ordering::Acquire) {
            ended.await;
        }
    }
}

/// One phase of AIPerf's rate loop over `conversations`' sessions (see the module's comment).
pub(super) async fn send_phase(
    context: &StageContext,
    conversations: &Arc<Conversations>,
    phase: Phase,
    paced: &Paced,
    slots: Option<&Arc<Semaphore>>,
    in_flight: &mut JoinSet<()>,
) {
    let Phase {
        start,
        total,
        sending_ends,
        sessions,
        prefill,
        cancellation,
        rate_ramp,
        rate_series,
    } = phase;
    if total == Some(0) || sessions == Some(0) {
        return;
    }
    let burst = paced.pace == llmbench_workload::workload::AiperfPace::Burst;
    let continuations = Arc::new(Continuations::default());
    let mut ticks = RateTicks::new(paced, start, rate_ramp, rate_series);
    let mut cancellations = cancellation.map(|c| c.decisions());
    let (mut sent, mut started, mut session_turns) = (0u64, 0u64, 0u64);
    loop {
        let Some(due) = ticks.next(context, sending_ends).await else {
            break;
        };
        let mut prefill_slot = None;
        // Priority 1: a continuation (it holds its session's slot already); `issue_credit` waits for its prefill
        // slot, holding up the loop.
        let session = if let Some(session) = continuations.pop() {
            if let Some(p) = &prefill {
                let slot = tokio::select! {
                    biased;
                    () = context.control.issuing_ended() => None,
                    () = until(sending_ends) => None,
                    slot = Arc::clone(p).acquire_owned() => slot.ok(),
                };
                let Some(slot) = slot else {
                    break;
                };
                prefill_slot = Some(slot);
            }
            Some(session)
        } else if sessions.is_none_or(|n| started < n) {
            // Priority 2: a new session, if a session slot and then a prefill slot are free (`try_issue_credit`).
            let slot = match slots {
                None => None,
                Some(s) => match Arc::clone(s).try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    Err(_) if !burst => continue,
                    Err(_) => {
                        // The burst polls until a slot frees or a continuation is queued.
                        wait_for_work(context, &continuations, Some(s), sending_ends).await;
                        if context.control.issuing_stopped() {
                            break;
                        }
                        ticks.reanchor(Instant::now());
                        continue;
                    }
                },
            };
            if let Some(p) = &prefill {
                match Arc::clone(p).try_acquire_owned() {
                    Ok(p) => prefill_slot = Some(p),
                    // The session slot is given back.
                    Err(_) if !burst => continue,
                    Err(_) => {
                        drop(slot);
                        wait_for_work(context, &continuations, Some(p), sending_ends).await;
                        if context.control.issuing_stopped() {
                            break;
                        }
                        ticks.reanchor(Instant::now());
                        continue;
                    }
                }
            }
            conversations.aiperf_session().map(|mut session| {
                session.slot = slot;
                started += 1;
                session_turns += conversations.aiperf_turns(&session) as u64;
                session
            })
        } else if sent >= session_turns {
            // Priority 3: no session may start and every started one sent all its turns.
            break;
        } else {
            // Sessions still have turns to come back: this interval sends nothing.
            if burst {
                wait_for_work(context, &continuations, None, sending_ends).await;
                if context.control.issuing_stopped() {
                    break;
                }
                ticks.reanchor(Instant::now());
            }
            continue;
        };
        let Some(session) = session else {
            break;
        };
        sent += 1;
        let credit = Credit {
            abandon_after: cancellations.as_mut().and_then(|c| c.next_credit()),
            prefill: prefill_slot,
        };
        spawn_turn(
            context,
            conversations,
            &continuations,
            (session, credit),
            context.clock.ns_of(due),
            in_flight,
        );
        while in_flight.try_join_next().is_some() {}
        // The final credit (`increment_sent`): the request count, or the session count with every turn sent.
        if total.is_some_and(|total| sent >= total)
            || sessions.is_some_and(|n| started >= n && sent >= session_turns)
        {
            break;
        }
    }
    continuations.end();
}

/// Waits until a continuation is queued or (with `slots`) a session slot frees, or sending ends.
async fn wait_for_work(
    context: &StageContext,
    continuations: &Continuations,
    slots: Option<&Arc<Semaphore>>,
    sending_ends: Option<Instant>,
) {
    let slot_freed = async {
        match slots {
            // Acquired only to wait for it; the loop takes it again.
            Some(s) => drop(s.acquire().await),
            None => std::future::pending().await,
        }
    };
    let sending_over = until(sending_ends);
    tokio::select! {
        biased;
        () = context.control.issuing_ended() => {}
        () = sending_over => {}
        () = continuations.queued.notified() => {}
        () = slot_freed => {}
    }
}

/// Sends `session`'s next turn; when it returns, records it and queues the session's next turn after its
/// think time (or ends the session, freeing its slot).
fn spawn_turn(
    context: &StageContext,
    conversations: &Arc<Conversations>,
    continuations: &Arc<Continuations>,
    (mut session, credit): (AiperfSession, Credit),
    scheduled_ns: u64,
    in_flight: &mut JoinSet<()>,
) {
    let context = context.clone();
    let conversations = Arc::clone(conversations);
    let continuations = Arc::clone(continuations);
    in_flight.spawn(async move {
        exchange(&context, &conversations, &mut session, scheduled_ns, credit).await;
        // `handle_credit_return`: nothing after the final turn; else the next turn is queued, after its delay.
        let Some(delay) = conversations.aiperf_next_delay(&session) else {
            return;
        };
        if let Some(think) = delay {
            tokio::select! {
                () = tokio::time::sleep(think) => {}
                () = continuations.ended() => return,
            }
        }
        continuations.push(session);
    });
}

/// Sends `session`'s next turn, scheduled at `scheduled_ns`, and records it once it returned, its answer kept in
/// the session's history.
pub(super) async fn exchange(
    context: &StageContext,
    conversations: &Conversations,
    session: &mut AiperfSession,
    scheduled_ns: u64,
    credit: Credit,
) {
    let (request, of) = conversations.aiperf_request(session);
    let issue = Issue {
        id: context.next_id.fetch_add(1, Ordering::Relaxed),
        stage: context.stage,
        scheduled_ns,
        abandon_after: credit.abandon_after,
    };
    let cancel = context.control.in_flight();
    context.went_out(&issue, &request, false);
    let mut record = context
        .execute(&request, issue, cancel, credit.prefill)
        .await;
    conversations.aiperf_answered(session, of, &mut record);
    context.record(record);
}
