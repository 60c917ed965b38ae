//! Which runs of an experiment start now: a pure decision over what each planned run is doing, the ordering
//! rules and the clock, so the reconciler only carries it out.
//!
//! Rules: runs start in plan order; at most `parallelism` are unfinished at once; after any run finishes, no run
//! starts until `cooldown` has passed since the latest finish (the stack rests between runs); once a run has
//! failed and `stopOnFailure` is set, nothing more starts and the runs in flight finish.
//!
//! A run's completion time is recorded to the second (metav1.Time), so the rest is counted from the end of that
//! second: the stack rests at least `cooldown`, at most a second more.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How precisely a finish time is recorded.
const FINISH_PRECISION: Duration = Duration::from_secs(1);

/// What one planned run is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Not created yet.
    NotCreated,
    /// Created and not finished.
    Active,
    /// Finished: how, and when (unknown for a run that vanished).
    Finished { failed: bool, at: Option<Timestamp> },
}

/// The ordering rules of `spec.ordering`, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderingRules {
    pub parallelism: u32,
    pub cooldown: Duration,
    pub stop_on_failure: bool,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Schedule {
    /// Plan indices to create now, in plan order.
    pub start: Vec<usize>,
    /// Runs wait for the cool-down: look again after this long.
    pub wake_after: Option<Duration>,
    /// A run failed under stopOnFailure: nothing more starts.
    pub stopped: bool,
    /// Nothing is in flight and nothing more will start: the experiment's runs are done.
    pub done: bool,
}

/// Decides which runs start now.
pub fn schedule(states: &[RunState], rules: &OrderingRules, now: Timestamp) -> Schedule {
    let active = states
        .iter()
        .filter(|s| matches!(s, RunState::Active))
        .count();
    let stopped = rules.stop_on_failure
        && states
            .iter()
            .any(|s| matches!(s, RunState::Finished { failed: true, .. }));
    let waiting: Vec<usize> = states
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, RunState::NotCreated))
        .map(|(i, _)| i)
        .collect();
    let done = active == 0 && (waiting.is_empty() || stopped);
    if stopped || waiting.is_empty() {
        return Schedule {
            stopped,
            done,
            ..Schedule::default()
        };
    }
    let free = (rules.parallelism.max(1) as usize).saturating_sub(active);
    if free == 0 {
        return Schedule::default();
    }
    let last_finish = states
        .iter()
        .filter_map(|s| match s {
            RunState::Finished { at, .. } => *at,
            _ => None,
        })
        .max();
    if let Some(last) = last_finish
        && !rules.cooldown.is_zero()
    {
        let since = now.duration_since(last);
        let rested = if since.is_negative() {
            Duration::ZERO
        } else {
            since.unsigned_abs().saturating_sub(FINISH_PRECISION)
        };
        if rested < rules.cooldown {
            return Schedule {
                wake_after: Some(rules.cooldown - rested),
                ..Schedule::default()
            };
        }
    }
    Schedule {
        start: waiting.into_iter().take(free).collect(),
        ..Schedule::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunState::{Active, Finished, NotCreated};

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("time")
    }

    fn ok(second: i64) -> RunState {
        Finished {
            failed: false,
            at: Some(at(second)),
        }
    }

    fn failed(second: i64) -> RunState {
        Finished {
            failed: true,
            at: Some(at(second)),
        }
    }

    const ONE_AT_A_TIME: OrderingRules = OrderingRules {
        parallelism: 1,
        cooldown: Duration::ZERO,
        stop_on_failure: false,
    };

    #[test]
    fn one_at_a_time_starts_the_next_run_in_plan_order_once_the_last_finished() {
        let fresh = schedule(&[NotCreated; 4], &ONE_AT_A_TIME, at(0));
        assert_eq!(fresh.start, [0]);
        let busy = schedule(
            &[ok(1), Active, NotCreated, NotCreated],
            &ONE_AT_A_TIME,
            at(5),
        );
        assert_eq!(busy, Schedule::default(), "never two at once");
        let next = schedule(
            &[ok(1), ok(4), NotCreated, NotCreated],
            &ONE_AT_A_TIME,
            at(5),
        );
        assert_eq!(next.start, [2]);
        assert!(!next.done);
    }

    #[test]
    fn parallelism_fills_the_free_slots_in_plan_order() {
        let rules = OrderingRules {
            parallelism: 3,
            ..ONE_AT_A_TIME
        };
        assert_eq!(schedule(&[NotCreated; 5], &rules, at(0)).start, [0, 1, 2]);
        let states = [ok(1), Active, Active, NotCreated, NotCreated];
        assert_eq!(schedule(&states, &rules, at(2)).start, [3]);
    }

    #[test]
    fn the_cooldown_runs_from_the_latest_finish() {
        let rules = OrderingRules {
            cooldown: Duration::from_secs(30),
            ..ONE_AT_A_TIME
        };
        let states = [ok(100), ok(110), NotCreated];
        let resting = schedule(&states, &rules, at(125));
        assert!(resting.start.is_empty());
        // Finished at 110.x (recorded as 110): rested 14 s for sure at 125.
        assert_eq!(resting.wake_after, Some(Duration::from_secs(16)));
        assert!(schedule(&states, &rules, at(140)).start.is_empty());
        assert_eq!(schedule(&states, &rules, at(141)).start, [2]);
        // A clock behind the recorded finish rests the whole cool-down.
        assert_eq!(
            schedule(&states, &rules, at(105)).wake_after,
            Some(Duration::from_secs(30))
        );
        // Before any run has finished there is nothing to rest from.
        assert_eq!(schedule(&[NotCreated; 2], &rules, at(0)).start, [0]);
        // A run that vanished has no finish time and imposes no rest.
        let lost = [
            Finished {
                failed: true,
                at: None,
            },
            NotCreated,
        ];
        assert_eq!(schedule(&lost, &rules, at(0)).start, [1]);
    }

    #[test]
    fn a_failure_stops_new_runs_only_with_stop_on_failure_and_lets_running_ones_finish() {
        let going_on = schedule(&[failed(1), NotCreated], &ONE_AT_A_TIME, at(2));
        assert_eq!(going_on.start, [1], "a failed run does not stop the others");
        let rules = OrderingRules {
            parallelism: 2,
            stop_on_failure: true,
            ..ONE_AT_A_TIME
        };
        let stopping = schedule(&[failed(1), Active, NotCreated], &rules, at(2));
        assert_eq!(
            stopping,
            Schedule {
                stopped: true,
                ..Schedule::default()
            }
        );
        let stopped = schedule(&[failed(1), ok(3), NotCreated], &rules, at(4));
        assert!(stopped.stopped && stopped.done && stopped.start.is_empty());
    }

    #[test]
    fn the_runs_are_done_when_every_one_finished() {
        let done = schedule(&[ok(1), failed(2)], &ONE_AT_A_TIME, at(3));
        assert!(done.done && !done.stopped && done.start.is_empty());
        assert!(!schedule(&[ok(1), Active], &ONE_AT_A_TIME, at(3)).done);
        assert!(schedule(&[], &ONE_AT_A_TIME, at(3)).done);
    }
}
