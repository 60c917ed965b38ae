//! Trace replay on the wire (AIPerf's Mooncake traces): each session's first turn goes out at its time on the
//! fixed schedule (or when one of `concurrency` session slots frees, for a trace without timestamps), and each
//! later turn once the previous one has returned — at its own time, after its delay, or at once
//! ([`TurnTiming`], `aiperf/timing/fixed_schedule_strategy.py` `_dispatch_by_timing`).
//!
//! A turn is sent alone, as AIPerf's worker sends it (`aiperf/workers/worker.py` `_execute_single_credit_internal`
//! formats each turn's payload from that turn only): a Mooncake trace's `hash_ids` already carry the context a
//! turn shares with the turns before it. Bodies are joined from shared blocks when their turn goes out, so memory
//! holds each distinct block once; joining is copying text, never tokenisation.
//!
//! Every scheduled turn ends up recorded: sent, or — when the run stops before its time — not at all, as an
//! open-loop stage leaves its unsent arrivals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::{PreparedRequest, StageContext};
use llmbench_data::Prompt;
use llmbench_model::record::TurnOf;
use llmbench_workload::request::{BodySettings, prepare};
use llmbench_workload::workload::mooncake::TurnTiming;

/// A trace's sessions, ready to send.
#[derive(Debug, Clone)]
pub struct Replay {
    /// In the order their first turns go out.
    pub sessions: Vec<ReplaySession>,
    pub settings: BodySettings,
    /// `None`: the fixed schedule (each first turn is [`TurnTiming::At`]); `Some(n)`: n sessions at a time.
    pub concurrency: Option<usize>,
    /// On the fixed schedule, at most this many requests in flight: one due while all are taken waits for the
    /// first to free, in time order (inference-perf's worker semaphores, `load_generator.py` `Worker.run`; AIPerf
    /// caps nothing, `None`).
    pub in_flight_cap: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct ReplaySession {
    /// The session's index in the whole trace (records of multi-turn sessions carry it as their conversation).
    pub id: u32,
    pub turns: Vec<ReplayTurn>,
}

/// One request of the trace.
#[derive(Debug, Clone)]
pub struct ReplayTurn {
    /// The prompt's blocks, joined with a space when sent (as `conversations::join` joins pieces).
    pub blocks: Vec<Arc<str>>,
    /// The prompt's length in tokens.
    pub tokens: u32,
    pub max_tokens: Option<u32>,
    pub timing: TurnTiming,
}

impl Replay {
    /// How many requests the replay sends.
    pub fn requests(&self) -> u64 {
        self.sessions.iter().map(|s| s.turns.len() as u64).sum()
    }

    /// When the last first turn is due (the fixed schedule's length, at least).
    pub fn span(&self) -> Duration {
        self.sessions
            .iter()
            .filter_map(|s| match s.turns.first()?.timing {
                TurnTiming::At(at) => Some(at),
                _ => None,
            })
            .max()
            .unwrap_or_default()
    }

    /// Launcher `index` of `count`'s share: every `count`-th session from its index (sessions stay whole, so a
    /// session's turns keep following each other); the concurrency is split as a closed loop's is.
    pub fn shard(&self, index: u32, count: u32) -> Replay {
        let count = count.max(1) as usize;
        let index = index as usize;
        Replay {
            sessions: self
                .sessions
                .iter()
                .skip(index)
                .step_by(count)
                .cloned()
                .collect(),
            settings: self.settings.clone(),
            concurrency: self.concurrency.map(|c| {
                let base = c / count;
                (base + usize::from(index < c % count)).max(1)
            }),
            in_flight_cap: self.in_flight_cap.map(|c| {
                let base = c / count;
                (base + usize::from(index < c % count)).max(1)
            }),
        }
    }
}

impl ReplayTurn {
    fn prompt(&self) -> Prompt {
        let parts: Vec<&str> = self.blocks.iter().map(|b| &**b).collect();
        Prompt::text(
            llmbench_workload::conversations::join(&parts),
            self.tokens,
            self.max_tokens,
        )
    }
}

/// Runs `replay` as a stage that started at `start`.
pub(super) async fn run_trace(context: StageContext, start: Instant, replay: Arc<Replay>) {
    let slots = replay
        .concurrency
        .map(|n| Arc::new(Semaphore::new(n.max(1))));
    // Tokio's semaphore is fair, so requests waiting for a slot go out in time order.
    let cap = replay
        .in_flight_cap
        .map(|n| Arc::new(Semaphore::new(n.max(1))));
    let mut in_flight = JoinSet::new();
    for index in 0..replay.sessions.len() {
        let Some(first) = replay.sessions[index].turns.first() else {
            continue;
        };
        // Built before its time, so the send is not late by the body's serialisation.
        let request = prepare(&first.prompt(), &replay.settings);
        let (due, slot) = match (first.timing, &slots) {
            (TurnTiming::At(at), None) => {
                let due = start + at;
                tokio::select! {
                    biased;
                    () = context.control.issuing_ended() => break,
                    () = llmbench_model::timer::sleep_until(due) => {}
                }
                // Still scheduled at `due`: the wait for a slot is schedule delay.
                let slot = match &cap {
                    Some(cap) => tokio::select! {
                        biased;
                        () = context.control.issuing_ended() => break,
                        slot = Arc::clone(cap).acquire_owned() => slot.ok(),
                    },
                    None => None,
                };
                (due, slot)
            }
            (_, Some(slots)) => {
                let slot = tokio::select! {
                    biased;
                    () = context.control.issuing_ended() => break,
                    slot = Arc::clone(slots).acquire_owned() => slot.ok(),
                };
                (Instant::now(), slot)
            }
            // A first turn without a time on the fixed schedule is refused when the replay is built; sent at once
            // here rather than lost.
            (_, None) => (Instant::now(), None),
        };
        let context = context.clone();
        let replay = Arc::clone(&replay);
        in_flight.spawn(async move {
            let _slot = slot;
            run_session(&context, start, &replay, index, due, request).await;
        });
        while in_flight.try_join_next().is_some() {}
    }
    while in_flight.join_next().await.is_some() {}
}

/// Sends the turns of session `index`, the first (`first`, already built) at `first_due`, each later one as its
/// timing says once the previous one has returned (its body built before it is due).
async fn run_session(
    context: &StageContext,
    start: Instant,
    replay: &Replay,
    index: usize,
    first_due: Instant,
    first: PreparedRequest,
) {
    let session = &replay.sessions[index];
    let mut previous_end = first_due;
    let mut first = Some(first);
    for (position, turn) in session.turns.iter().enumerate() {
        let (due, request) = match first.take() {
            Some(request) => (first_due, request),
            None => (
                next_due(turn.timing, start, previous_end),
                prepare(&turn.prompt(), &replay.settings),
            ),
        };
        tokio::select! {
            biased;
            () = context.control.issuing_ended() => return,
            () = llmbench_model::timer::sleep_until(due) => {}
        }
        let mut record = context
            .send(&request, context.clock.ns_of(due), false)
            .await;
        previous_end = Instant::now();
        // Like `Conversations`, only records of multi-turn sessions say their session and turn.
        if session.turns.len() > 1 {
            record.conversation = Some(TurnOf {
                id: session.id,
                turn: position as u32,
            });
        }
        context.record(record);
    }
}

/// When a later turn is due, given when the previous turn of its session returned: at its time on the schedule
/// (or at once if that has passed), after its delay, or at once. Pure, so the rule is tested alone.
pub(crate) fn next_due(timing: TurnTiming, start: Instant, previous_end: Instant) -> Instant {
    match timing {
        TurnTiming::At(at) => (start + at).max(previous_end),
        TurnTiming::After(delay) => previous_end + delay,
        TurnTiming::Immediately => previous_end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_turn_waits_its_delay_after_the_previous_answer_or_its_time() {
        let start = Instant::now();
        let answered = start + Duration::from_millis(300);
        // Delay 50 ms after an answer at 300 ms: 350 ms.
        assert_eq!(
            next_due(
                TurnTiming::After(Duration::from_millis(50)),
                start,
                answered
            ),
            start + Duration::from_millis(350)
        );
        // A time still ahead is kept; a time already passed goes at once.
        assert_eq!(
            next_due(TurnTiming::At(Duration::from_millis(500)), start, answered),
            start + Duration::from_millis(500)
        );
        assert_eq!(
            next_due(TurnTiming::At(Duration::from_millis(100)), start, answered),
            answered
        );
        assert_eq!(next_due(TurnTiming::Immediately, start, answered), answered);
    }

    fn session(id: u32) -> ReplaySession {
        ReplaySession {
            id,
            turns: vec![ReplayTurn {
                blocks: vec![Arc::from("x")],
                tokens: 1,
                max_tokens: None,
                timing: TurnTiming::At(Duration::from_millis(u64::from(id))),
            }],
        }
    }

    #[test]
    fn shards_take_every_nth_session_and_split_the_concurrency() {
        let replay = Replay {
            sessions: (0..5).map(session).collect(),
            settings: BodySettings::new(
                &llmbench_workload::workload::Api::default(),
                "m".to_owned(),
                llmbench_workload::request::BodyStyle::Aiperf,
            ),
            concurrency: Some(5),
            in_flight_cap: None,
        };
        let ids = |r: &Replay| r.sessions.iter().map(|s| s.id).collect::<Vec<_>>();
        let a = replay.shard(0, 2);
        let b = replay.shard(1, 2);
        assert_eq!((ids(&a), ids(&b)), (vec![0, 2, 4], vec![1, 3]));
        assert_eq!((a.concurrency, b.concurrency), (Some(3), Some(2)));
        assert_eq!(replay.requests(), 5);
        assert_eq!(replay.span(), Duration::from_millis(4));
    }
}
