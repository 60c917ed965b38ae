//! guidellm's warm-up and cool-down: which of a stage's requests are measured. Every request is sent and
//! recorded; the ones in a transient phase are left out of every metric and report, as guidellm leaves them out.
//!
//! Two generations of rules, both kept so each profile means what its guidellm version meant:
//! - v0.3 `warmup_percent` / `cooldown_percent` (`benchmark/aggregator.py`): a request is left out when its
//!   completion index is within the first `f × max_requests` (the last, for cool-down), or when it started within
//!   the first `f × max_duration` of the stage (the last).
//! - v0.4+ `TransientPhaseConfig` (`benchmark/schemas/base.py`, `accumulator.py`): the phase sets the stage's
//!   measurement window, `[measure_start, measure_end]`, and the measured requests are those that end after it
//!   starts and start before it ends (`get_within_range`).

use llmbench_model::record::RequestRecord;
use llmbench_workload::workload::{Transient, TransientMode, TransientPhase};

/// What a stage's warm-up and cool-down are measured against.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageBounds {
    /// When the stage started on the run clock (guidellm's scheduler start); `None` uses its first scheduled send.
    pub start_ns: Option<u64>,
    /// `max_requests` of the stage.
    pub max_requests: Option<u64>,
    /// `max_duration` of the stage, in seconds.
    pub max_duration_s: Option<f64>,
    pub warmup: Option<Transient>,
    pub cooldown: Option<Transient>,
}

/// How many of a stage's requests each phase left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Excluded {
    pub warmup: u64,
    pub cooldown: u64,
}

/// A request's place in its stage's completion order (the order guidellm's accumulator sees requests in): by
/// end, then by `tie` — the record's id, or for the records of a merged sharded run what their renumbered ids
/// follow — with its send time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Completed {
    pub end_ns: u64,
    pub tie: [u64; 3],
    pub sent_ns: u64,
}

impl Completed {
    /// A record's place, its id breaking ties.
    pub fn of(r: &RequestRecord) -> Completed {
        Completed {
            end_ns: r.end_ns,
            tie: [0, 0, r.id],
            sent_ns: r.sent_ns,
        }
    }
}

/// What a stage's warm-up and cool-down rules need of its records as a whole, wherever they are (in memory, or
/// spilled to disk for a long run).
pub trait CompletionOrder {
    /// How many records the stage has (warm-up requests of `--num-warmups` are not among them).
    fn count(&self) -> u64;
    /// Their earliest send.
    fn min_sent_ns(&self) -> u64;
    /// Their earliest scheduled send.
    fn min_scheduled_ns(&self) -> u64;
    /// The record at `position` (from 0) in completion order; `None` past the end.
    fn at(&mut self, position: u64) -> Option<Completed>;
}

/// Which of a stage's requests its warm-up and cool-down leave out, decided request by request from
/// [`Completed`] places: what [`cuts`] works out once per stage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cuts {
    warmup: Option<Cut>,
    cooldown: Option<Cut>,
}

/// One phase's rule for a request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cut {
    /// guidellm v0.3: by completion position, or by start time since the stage's first send.
    Fraction {
        position: Option<Position>,
        /// Seconds after the stage's first send: warm-up takes those started at or before, cool-down those
        /// started after.
        started_s: Option<f64>,
        first_sent_ns: u64,
    },
    /// guidellm v0.4+ warm-up: requests that ended before the measurement window opened.
    EndedBefore(u64),
    /// guidellm v0.4+ cool-down: requests sent after the measurement window closed.
    SentAfter(u64),
}

/// Where a completion position rule cuts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Position {
    /// Every request.
    All,
    /// No request.
    Nobody,
    /// Warm-up: the requests completed before this one. Cool-down: this one and those completed after it.
    At(Completed),
}

/// The stage's cuts, from its bounds and its records' completion order.
pub fn cuts(bounds: &StageBounds, order: &mut dyn CompletionOrder) -> Cuts {
    if order.count() == 0 {
        return Cuts::default();
    }
    let mut phase_cut = |phase: Option<Transient>, is_warmup: bool| match phase? {
        Transient::GuidellmFraction { fraction } => {
            Some(fraction_rule(order, bounds, fraction, is_warmup))
        }
        Transient::GuidellmPhase(phase) => window_rule(order, bounds, &phase, is_warmup),
    };
    Cuts {
        warmup: phase_cut(bounds.warmup, true),
        cooldown: phase_cut(bounds.cooldown, false),
    }
}

impl Cuts {
    /// Whether the stage has any phase to leave requests out.
    pub fn is_empty(&self) -> bool {
        self.warmup.is_none() && self.cooldown.is_none()
    }

    /// Which phase leaves `r` (at `place` in completion order) out, if one does: warm-up before cool-down.
    pub fn leaves_out(&self, r: &RequestRecord, place: &Completed) -> Option<Phase> {
        if self.warmup.is_some_and(|cut| cut.takes(r, place, true)) {
            Some(Phase::Warmup)
        } else if self.cooldown.is_some_and(|cut| cut.takes(r, place, false)) {
            Some(Phase::Cooldown)
        } else {
            None
        }
    }
}

/// A transient phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Warmup,
    Cooldown,
}

impl Excluded {
    /// Counts one request `phase` left out.
    pub fn count(&mut self, phase: Phase) {
        match phase {
            Phase::Warmup => self.warmup += 1,
            Phase::Cooldown => self.cooldown += 1,
        }
    }
}

impl Cut {
    fn takes(&self, r: &RequestRecord, place: &Completed, warmup: bool) -> bool {
        match *self {
            Cut::Fraction {
                position,
                started_s,
                first_sent_ns,
            } => {
                let by_position = match position {
                    None => false,
                    Some(Position::All) => true,
                    Some(Position::Nobody) => false,
                    Some(Position::At(edge)) if warmup => *place < edge,
                    Some(Position::At(edge)) => *place >= edge,
                };
                let started = r.sent_ns.saturating_sub(first_sent_ns) as f64 / 1e9;
                let by_time =
                    started_s.is_some_and(|d| if warmup { started <= d } else { started > d });
                by_position || by_time
            }
            Cut::EndedBefore(edge) => r.end_ns < edge,
            Cut::SentAfter(edge) => r.sent_ns > edge,
        }
    }
}

/// Records held in memory, as a [`CompletionOrder`].
struct InMemory<'a> {
    records: &'a [&'a RequestRecord],
    /// Indexes in completion order.
    by_end: Vec<usize>,
}

impl CompletionOrder for InMemory<'_> {
    fn count(&self) -> u64 {
        self.records.len() as u64
    }

    fn min_sent_ns(&self) -> u64 {
        self.records.iter().map(|r| r.sent_ns).min().unwrap_or(0)
    }

    fn min_scheduled_ns(&self) -> u64 {
        self.records
            .iter()
            .map(|r| r.scheduled_ns)
            .min()
            .unwrap_or(0)
    }

    fn at(&mut self, position: u64) -> Option<Completed> {
        let i = *self.by_end.get(usize::try_from(position).ok()?)?;
        Some(Completed::of(self.records[i]))
    }
}

/// Whether each of `records` (one stage's, in any order) is measured, and how many each phase left out.
pub fn measured(records: &[&RequestRecord], bounds: &StageBounds) -> (Vec<bool>, Excluded) {
    let mut keep = vec![true; records.len()];
    let mut excluded = Excluded::default();
    if records.is_empty() || (bounds.warmup.is_none() && bounds.cooldown.is_none()) {
        return (keep, excluded);
    }
    let mut by_end: Vec<usize> = (0..records.len()).collect();
    by_end.sort_by_key(|&i| Completed::of(records[i]));
    let cuts = cuts(bounds, &mut InMemory { records, by_end });
    for (r, keep) in records.iter().zip(&mut keep) {
        if let Some(phase) = cuts.leaves_out(r, &Completed::of(r)) {
            *keep = false;
            excluded.count(phase);
        }
    }
    (keep, excluded)
}

/// guidellm v0.3: per request, by completion index or by start time.
fn fraction_rule(
    order: &mut dyn CompletionOrder,
    bounds: &StageBounds,
    fraction: f64,
    warmup: bool,
) -> Cut {
    let number = bounds
        .max_requests
        .map(|n| (fraction * n as f64) as u64)
        .filter(|n| *n > 0);
    let seconds = bounds
        .max_duration_s
        .map(|d| fraction * d)
        .filter(|d| *d > 0.0);
    // Warm-up: the first `number` to complete (completion index ≤ number). Cool-down: those whose completion
    // index passes max − number.
    let first_out = if warmup {
        number
    } else {
        number
            .zip(bounds.max_requests)
            .map(|(n, max)| max.saturating_sub(n))
    };
    let position = first_out.map(|k| {
        if warmup {
            order.at(k).map_or(Position::All, Position::At)
        } else {
            // Past the end: nobody completes that late.
            order.at(k).map_or(Position::Nobody, Position::At)
        }
    });
    let started_s = if warmup {
        seconds
    } else {
        seconds.zip(bounds.max_duration_s).map(|(d, max)| max - d)
    };
    Cut::Fraction {
        position,
        started_s,
        first_sent_ns: order.min_sent_ns(),
    }
}

/// guidellm v0.4+: the measurement window the phase sets, then the requests outside it.
fn window_rule(
    order: &mut dyn CompletionOrder,
    bounds: &StageBounds,
    phase: &TransientPhase,
    warmup: bool,
) -> Option<Cut> {
    let start = bounds.start_ns.unwrap_or_else(|| order.min_scheduled_ns());
    let (duration_s, requests) = limits(phase, bounds.max_requests, bounds.max_duration_s);
    let at = |seconds: f64| start.saturating_add((seconds.max(0.0) * 1e9) as u64);
    if warmup {
        // Warm-up ends at start + duration, and at the start of the (n + 1)-th request to finish; with both, the
        // later of the two. A count never reached leaves no warm-up at all (guidellm's `measure_start` stays unset).
        let by_time = duration_s.map(at);
        let by_count = requests.map(|n| order.at(n).map(|c| c.sent_ns));
        let edge = match (by_time, by_count) {
            (_, Some(None)) => None,
            (Some(t), Some(Some(c))) => Some(t.max(c)),
            (Some(t), None) => Some(t),
            (None, Some(Some(c))) => Some(c),
            (None, None) => None,
        };
        edge.map(Cut::EndedBefore)
    } else {
        // Cool-down starts at start + max_duration − duration, and at the end of the request that leaves n + 1 to
        // go; with both, the earlier. Without the stage limit it refers to, there is no cool-down.
        let by_time = duration_s.map(|d| bounds.max_duration_s.map(|max| at(max - d)));
        let by_count = requests.map(|n| {
            bounds.max_requests.and_then(|max| {
                let processed = max.checked_sub(n + 1)?;
                let position = processed.checked_sub(1)?;
                order.at(position).map(|c| c.end_ns)
            })
        });
        let edge = match (by_time, by_count) {
            (Some(None), _) | (_, Some(None)) => None,
            (Some(Some(t)), Some(Some(c))) => Some(t.min(c)),
            (Some(Some(t)), None) => Some(t),
            (None, Some(Some(c))) => Some(c),
            (None, None) => None,
        };
        edge.map(Cut::SentAfter)
    }
}

/// guidellm's `compute_limits` with its preference enforced: the phase's length in seconds and in requests.
fn limits(
    phase: &TransientPhase,
    max_requests: Option<u64>,
    max_seconds: Option<f64>,
) -> (Option<f64>, Option<u64>) {
    let mut duration = None;
    let mut requests = None;
    if phase.mode != TransientMode::Requests
        && let Some(max) = max_seconds
    {
        duration = phase.percent.map(|p| p * max).or(phase.value);
    }
    if phase.mode != TransientMode::Duration
        && let Some(max) = max_requests
    {
        requests = phase
            .percent
            .map(|p| (p * max as f64) as u64)
            .or(phase.value.map(|v| v as u64));
    }
    match phase.mode {
        TransientMode::PreferDuration if duration.is_some() => requests = None,
        TransientMode::PreferRequests if requests.is_some() => duration = None,
        _ => {}
    }
    (duration, requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request sent at `sent_ms` and finished at `end_ms` (scheduled at its send).
    fn record(id: u64, sent_ms: u64, end_ms: u64) -> RequestRecord {
        RequestRecord::builder(id)
            .sent(sent_ms * 1_000_000)
            .end(end_ms * 1_000_000)
            .input_tokens(1)
            .ok()
            .build()
    }

    /// Ten requests, one sent every second from t = 0 s, each taking 500 ms.
    fn ten() -> Vec<RequestRecord> {
        (0..10)
            .map(|i| record(i, i * 1000, i * 1000 + 500))
            .collect()
    }

    fn kept(records: &[RequestRecord], bounds: StageBounds) -> (Vec<u64>, Excluded) {
        let refs: Vec<&RequestRecord> = records.iter().collect();
        let (keep, excluded) = measured(&refs, &bounds);
        let ids = records
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(r, _)| r.id)
            .collect();
        (ids, excluded)
    }

    fn phase(percent: Option<f64>, value: Option<f64>, mode: TransientMode) -> Option<Transient> {
        Some(Transient::GuidellmPhase(TransientPhase {
            percent,
            value,
            mode,
        }))
    }

    #[test]
    fn without_phases_every_request_is_measured() {
        let (ids, excluded) = kept(&ten(), StageBounds::default());
        assert_eq!(ids.len(), 10);
        assert_eq!(excluded, Excluded::default());
    }

    #[test]
    fn a_duration_warmup_leaves_out_requests_that_ended_before_the_window() {
        // max_duration 10 s, warmup 0.25 → 2.5 s: requests 0 (ends 0.5 s) and 1 (ends 1.5 s) end before 2.5 s;
        // request 2 (2.0–2.5 s) ends exactly at the edge and overlaps the window (end ≥ start): measured.
        let bounds = StageBounds {
            start_ns: Some(0),
            max_duration_s: Some(10.0),
            warmup: phase(Some(0.25), None, TransientMode::PreferDuration),
            ..StageBounds::default()
        };
        let (ids, excluded) = kept(&ten(), bounds);
        assert_eq!(ids, (2..10).collect::<Vec<_>>());
        assert_eq!(excluded.warmup, 2);
    }

    #[test]
    fn a_request_count_warmup_starts_the_window_at_the_next_request_to_finish() {
        // max_requests 10, warmup value 3 in requests mode: the window starts when the 4th request to finish
        // started (request 3 at 3.0 s); requests 0–2 ended before it.
        let bounds = StageBounds {
            start_ns: Some(0),
            max_requests: Some(10),
            warmup: phase(None, Some(3.0), TransientMode::Requests),
            ..StageBounds::default()
        };
        let (ids, excluded) = kept(&ten(), bounds);
        assert_eq!(ids, (3..10).collect::<Vec<_>>());
        assert_eq!(excluded.warmup, 3);
    }

    #[test]
    fn prefer_duration_falls_back_to_requests_without_a_duration_limit() {
        // Only max_requests is known: percent 0.2 of 10 requests = 2.
        let bounds = StageBounds {
            start_ns: Some(0),
            max_requests: Some(10),
            warmup: phase(Some(0.2), None, TransientMode::PreferDuration),
            ..StageBounds::default()
        };
        assert_eq!(kept(&ten(), bounds).0, (2..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_cooldown_by_count_ends_the_window_when_n_plus_one_requests_are_left() {
        // max_requests 10, cooldown 2 requests: the window ends when the request leaving 3 to go finished, i.e.
        // the 7th to finish (request 6, ends 6.5 s); requests 7–9 start after it.
        let bounds = StageBounds {
            start_ns: Some(0),
            max_requests: Some(10),
            cooldown: phase(None, Some(2.0), TransientMode::Requests),
            ..StageBounds::default()
        };
        let (ids, excluded) = kept(&ten(), bounds);
        assert_eq!(ids, (0..7).collect::<Vec<_>>());
        assert_eq!(excluded.cooldown, 3);
    }

    #[test]
    fn a_cooldown_by_duration_ends_the_window_before_the_stage_limit() {
        // max_duration 10 s, cooldown 3 s: the window ends at 7 s; requests 8 and 9 start after it, request 7
        // starts exactly at 7 s (start ≤ end): measured.
        let bounds = StageBounds {
            start_ns: Some(0),
            max_duration_s: Some(10.0),
            cooldown: phase(None, Some(3.0), TransientMode::Duration),
            ..StageBounds::default()
        };
        assert_eq!(kept(&ten(), bounds).0, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn both_modes_take_the_later_start_and_the_earlier_end() {
        let bounds = StageBounds {
            start_ns: Some(0),
            max_requests: Some(10),
            max_duration_s: Some(10.0),
            warmup: phase(Some(0.25), None, TransientMode::Both),
            cooldown: phase(Some(0.25), None, TransientMode::Both),
        };
        // Warm-up: 2.5 s by time, and the 3rd request to finish (request 2, sent at 2.0 s) by count: the window
        // starts at max(2.5, 2.0) = 2.5 s, so requests 0 and 1 are out. Cool-down: 10 − 2.5 = 7.5 s by time, and
        // the end of the 7th to finish (request 6, 6.5 s) by count: it ends at min(7.5, 6.5) = 6.5 s.
        assert_eq!(kept(&ten(), bounds).0, (2..7).collect::<Vec<_>>());
    }

    #[test]
    fn a_warmup_count_never_reached_measures_everything() {
        let bounds = StageBounds {
            start_ns: Some(0),
            max_requests: Some(100),
            warmup: phase(None, Some(50.0), TransientMode::Requests),
            ..StageBounds::default()
        };
        assert_eq!(kept(&ten(), bounds).0.len(), 10);
    }

    #[test]
    fn guidellm_v03_fractions_leave_out_by_completion_index_or_start_time() {
        // max_requests 10, warmup_percent 0.2: the first 2 to complete; cooldown 0.3: the last 3.
        let bounds = StageBounds {
            max_requests: Some(10),
            warmup: Some(Transient::GuidellmFraction { fraction: 0.2 }),
            cooldown: Some(Transient::GuidellmFraction { fraction: 0.3 }),
            ..StageBounds::default()
        };
        let (ids, excluded) = kept(&ten(), bounds);
        assert_eq!(ids, vec![2, 3, 4, 5, 6]);
        assert_eq!(
            excluded,
            Excluded {
                warmup: 2,
                cooldown: 3
            }
        );
        // By time: max_duration 10 s, 0.15 → 1.5 s: requests started at 0 and 1 s are warm-up.
        let bounds = StageBounds {
            max_duration_s: Some(10.0),
            warmup: Some(Transient::GuidellmFraction { fraction: 0.15 }),
            ..StageBounds::default()
        };
        assert_eq!(kept(&ten(), bounds).0, (2..10).collect::<Vec<_>>());
    }
}
