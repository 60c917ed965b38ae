//! AIPerf 0.13's user-centric phase (`timing/strategies/user_centric_rate.py` `UserCentricStrategy`): `users`
//! users, each a multi-turn session, sharing one request rate.
//!
//! - The stagger is `1 / rate` and each user's turn gap `users / rate`, so `users` users firing once a gap make
//!   the rate. A session lasts `session_turns − 1` gaps (at least 1), `session_turns` being the dataset's mean turns
//!   per conversation rounded half to even.
//! - Start as if in a steady state (`setup_phase`): user `i` of `0..users` has a virtual age of
//!   `(users − i) · lifetime` gaps, so `lifetime − age // users` turns left; user 0 has none (it finished before
//!   the start and is not sampled, though it takes user id 1). The others fire their first turn at
//!   `order · stagger`, `order = users − slot` with `slot = age mod users` — or `(i · step) mod users`, `step` the
//!   smallest integer above 1 coprime with `users`, when `gcd(users, lifetime) > 1` would give two users one slot.
//!   A fresh user with every turn of its conversation fires at 0. Conversations are sampled in that order.
//! - Each user's next spawn is due `max_turns · gap` after its first turn; a spawned user starts a new
//!   conversation (every turn) at once, and schedules the next spawn likewise: an absolute schedule, whatever
//!   the responses do.
//! - A turn that returned schedules the user's next one at `max(now, previous target + gap)`; the last turn ends
//!   the user. Think times (turn delays) are not waited: the gap paces the turns.
//! - The correlation id of a user's turns is its user id.
//! - The request count (turns), the session count and the duration stop the sending as in AIPerf's issuer: no
//!   turn after the request count or the duration, no new user once the session count started.

use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::aiperf_sessions::exchange;
use super::conversation::{AiperfSession, Conversations};
use super::{Credit, Phase, StageContext, until};

/// The shape of a user-centric phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct UserCentric {
    pub rate: f64,
    pub users: u32,
}

/// An initial user: the turns it has left at the start, and its place in the first round of sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InitialUser {
    /// AIPerf's user id (ids start at 1; user 1, "virtually done", is never sampled).
    id: u64,
    /// Turns to send (`max_turns`); `None`: every turn of its conversation (the fresh user).
    turns: Option<u64>,
    /// Its first turn goes at `order · stagger`.
    order: u64,
}

/// `setup_phase`'s users, in the order their conversations are sampled.
fn initial_users(users: u64, average_turns: f64) -> Vec<InitialUser> {
    // Python's `round` rounds halves to even.
    let session_turns = average_turns.round_ties_even().max(0.0) as u64;
    let lifetime = session_turns.saturating_sub(1).max(1);
    let step = (gcd(users, lifetime) > 1).then(|| alternate_step(users));
    let mut out = Vec::with_capacity(users as usize + 1);
    for i in 0..users {
        let virtual_age = (users - i) * lifetime;
        let turns = lifetime - virtual_age / users;
        if turns == 0 {
            continue;
        }
        let slot = match step {
            Some(step) => (i * step) % users,
            None => virtual_age % users,
        };
        out.push(InitialUser {
            id: i + 1,
            turns: Some(turns),
            order: users - slot,
        });
    }
    out.push(InitialUser {
        id: users + 1,
        turns: None,
        order: 0,
    });
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `_find_alternate_spacing_step`: the smallest step above 1 coprime with `n`, or 1 when there is none.
fn alternate_step(n: u64) -> u64 {
    (2..n).find(|step| gcd(n, *step) == 1).unwrap_or(1)
}

/// A user between turns: its session and the target of its last send, in seconds from the phase's start.
struct User {
    session: AiperfSession,
    target: f64,
}

/// What the driver waits for.
enum Due {
    /// A user's next turn (its first one too).
    Turn(User),
    /// A new user (`execute_phase`'s spawn queue).
    Spawn,
}

/// What is due, and when: earliest first, ties in the order they were queued.
struct Queue {
    heap: BinaryHeap<Pending>,
    queued: u64,
}

struct Pending {
    when: Instant,
    order: u64,
    due: Due,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.when, self.order) == (other.when, other.order)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    /// Reversed, so the max-heap pops the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.when, other.order).cmp(&(self.when, self.order))
    }
}

impl Queue {
    fn new() -> Queue {
        Queue {
            heap: BinaryHeap::new(),
            queued: 0,
        }
    }

    fn push(&mut self, when: Instant, due: Due) {
        self.heap.push(Pending {
            when,
            order: self.queued,
            due,
        });
        self.queued += 1;
    }

    fn next_time(&self) -> Option<Instant> {
        self.heap.peek().map(|p| p.when)
    }

    fn pop(&mut self) -> Option<(Instant, Due)> {
        self.heap.pop().map(|p| (p.when, p.due))
    }
}

/// The user-centric phase over `conversations` (see the module's comment).
pub(super) async fn send_phase(
    context: &StageContext,
    conversations: &Arc<Conversations>,
    phase: Phase,
    shape: UserCentric,
    in_flight: &mut JoinSet<()>,
) {
    let Phase {
        start,
        total,
        sending_ends,
        sessions,
        // Refused beside the user-centric phase when the profile is read.
        prefill: _,
        cancellation,
        // The user-centric strategy takes no rate ramp (AIPerf warns and keeps its rate): dropped when read.
        rate_ramp: _,
        rate_series: _,
    } = phase;
    let mut cancellations = cancellation.map(|c| c.decisions());
    let rate_ok = shape.rate.is_finite() && shape.rate > 0.0;
    if total == Some(0) || sessions == Some(0) || !rate_ok || shape.users == 0 {
        return;
    }
    let users = u64::from(shape.users);
    let stagger = 1.0 / shape.rate;
    let gap = users as f64 / shape.rate;
    let at =
        |offset: f64| start + Duration::try_from_secs_f64(offset.max(0.0)).unwrap_or(Duration::MAX);

    let mut queue = Queue::new();
    let mut next_id = users + 2;
    for user in initial_users(users, conversations.aiperf_average_turns()) {
        let Some(mut session) = conversations.aiperf_session() else {
            return;
        };
        if let Some(turns) = user.turns {
            session.limit_turns(usize::try_from(turns).unwrap_or(usize::MAX));
        }
        session.set_correlation_id(user.id.to_string());
        let target = user.order as f64 * stagger;
        let max_turns = conversations.aiperf_turns(&session) as f64;
        queue.push(at(target + max_turns * gap), Due::Spawn);
        queue.push(at(target), Due::Turn(User { session, target }));
    }

    // Turns that returned: the user, for its next turn, or `None` when it has sent its last.
    let (returned, mut returns) = mpsc::unbounded_channel::<Option<User>>();
    let (mut sent, mut started) = (0u64, 0u64);
    let mut active = 0u64;
    let mut spawning = true;
    loop {
        if !spawning && active == 0 {
            break;
        }
        let next = queue.next_time();
        let sending_over = until(sending_ends);
        let due_now = async {
            match next {
                Some(when) => llmbench_model::timer::sleep_until(when).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = context.control.issuing_ended() => break,
            () = sending_over => break,
            back = returns.recv() => match back {
                Some(Some(mut user)) => {
                    // `handle_credit_return`: the next turn at max(now, previous target + gap).
                    let now = start.elapsed().as_secs_f64();
                    user.target = now.max(user.target + gap);
                    queue.push(at(user.target), Due::Turn(user));
                }
                Some(None) => active = active.saturating_sub(1),
                None => break,
            },
            () = due_now => {
                let Some((when, due)) = queue.pop() else {
                    continue;
                };
                let user = match due {
                    Due::Turn(user) => user,
                    Due::Spawn if !spawning => continue,
                    Due::Spawn => {
                        let Some(mut session) = conversations.aiperf_session() else {
                            spawning = false;
                            continue;
                        };
                        session.set_correlation_id(next_id.to_string());
                        next_id += 1;
                        let target = when.saturating_duration_since(start).as_secs_f64();
                        let max_turns = conversations.aiperf_turns(&session) as f64;
                        queue.push(at(target + max_turns * gap), Due::Spawn);
                        User { session, target }
                    }
                };
                let first = user.session.sent_turns() == 0;
                if first {
                    // `can_start_new_session`: no new user once the session count started.
                    if sessions.is_some_and(|n| started >= n) {
                        spawning = false;
                        continue;
                    }
                    started += 1;
                    active += 1;
                }
                sent += 1;
                let credit = Credit {
                    abandon_after: cancellations.as_mut().and_then(|c| c.next_credit()),
                    prefill: None,
                };
                let scheduled_ns = context.clock.ns_of(when);
                send_turn(context, conversations, (user, credit), scheduled_ns, &returned, in_flight);
                while in_flight.try_join_next().is_some() {}
                // The final credit: the request count reached ends the sending.
                if total.is_some_and(|total| sent >= total) {
                    break;
                }
            }
        }
    }
}

/// Sends `user`'s next turn; once it returned, hands the user back for its next turn, or `None` after its last.
fn send_turn(
    context: &StageContext,
    conversations: &Arc<Conversations>,
    (mut user, credit): (User, Credit),
    scheduled_ns: u64,
    returned: &mpsc::UnboundedSender<Option<User>>,
    in_flight: &mut JoinSet<()>,
) {
    let context = context.clone();
    let conversations = Arc::clone(conversations);
    let returned = returned.clone();
    in_flight.spawn(async move {
        exchange(
            &context,
            &conversations,
            &mut user.session,
            scheduled_ns,
            credit,
        )
        .await;
        let more = conversations.aiperf_next_delay(&user.session).is_some();
        // The driver may have stopped sending; what it no longer reads is dropped.
        let _ = returned.send(more.then_some(user));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orders(users: u64, average_turns: f64) -> Vec<(u64, Option<u64>, u64)> {
        initial_users(users, average_turns)
            .into_iter()
            .map(|u| (u.id, u.turns, u.order))
            .collect()
    }

    // The module docstring's table of `user_centric_rate.py`: 15 users, 20 turns, 1.0 QPS — user 5 fires at 1 s
    // with 6 turns, 9 at 2 s with 11, 13 at 3 s with 16, 2 at 4 s with 2, …, 12 at 14 s with 14; user 16 (fresh)
    // at 0 s with all 20; user 1 never. Worked from `setup_phase`: lifetime 19, gcd(15, 19) = 1, so user i + 1 has
    // 19 − ((15 − i)·19 // 15) turns and order 15 − ((15 − i)·19 mod 15).
    #[test]
    fn initial_users_stagger_as_aiperfs_steady_state_table() {
        let mut by_order = orders(15, 20.0);
        by_order.sort_by_key(|u| u.2);
        assert_eq!(
            by_order,
            [
                (16, None, 0),
                (5, Some(6), 1),
                (9, Some(11), 2),
                (13, Some(16), 3),
                (2, Some(2), 4),
                (6, Some(7), 5),
                (10, Some(12), 6),
                (14, Some(17), 7),
                (3, Some(3), 8),
                (7, Some(8), 9),
                (11, Some(13), 10),
                (15, Some(18), 11),
                (4, Some(4), 12),
                (8, Some(9), 13),
                (12, Some(14), 14),
            ]
        );
    }

    // 4 users, mean 3 turns (lifetime 2): gcd(4, 2) = 2, so the alternate step 3 (the smallest coprime with 4 above
    // 1) spreads them: i = 1: age 6, 2 − 6 // 4 = 1 turn, slot 3 → order 1; i = 2: age 4, 1 turn, slot 2 → order 2;
    // i = 3: age 2, 2 turns, slot 1 → order 3; then the fresh user 5 at 0. A mean of 2.5 rounds to 2 (half to even),
    // lifetime 1: i = 1..3 have 1 − (4 − i) // 4 = 1 turn each, slots (4 − i) mod 4 = 3, 2, 1.
    #[test]
    fn shared_factors_take_the_alternate_spacing_and_means_round_half_to_even() {
        assert_eq!(
            orders(4, 3.0),
            [
                (2, Some(1), 1),
                (3, Some(1), 2),
                (4, Some(2), 3),
                (5, None, 0)
            ]
        );
        assert_eq!(
            orders(4, 2.5),
            [
                (2, Some(1), 1),
                (3, Some(1), 2),
                (4, Some(1), 3),
                (5, None, 0)
            ]
        );
        assert_eq!(alternate_step(2), 1);
        assert_eq!(alternate_step(6), 5);
        assert_eq!(orders(1, 5.0), [(2, None, 0)]);
    }
}
