//! The SLO capacity search: which load points to run, how long each runs, and what the answer is. It is pure —
//! no clock, no network, no files — so the whole search is tested against a scripted "server". The caller runs
//! each [`Point`] as one stage of a run, feeds the stage's [`Summary`] back with [`Search::record`], and writes
//! [`Search::outcome`] into `summary.json` as `capacity`.
//!
//! # The rule
//!
//! A point **passes** when every objective holds on its summary ([`evaluate`]). A figure the summary lacks —
//! TTFT without streaming, any latency of a point where no request succeeded, goodput when the profile sets no
//! goodput objectives — does not hold: a search must not pass a point on a figure it never measured.
//!
//! 1. **Ramp.** Loads `start`, `start·growth`, `start·growth²`, …, capped at `max` (the last ramp point is `max`
//!    itself), until a point fails. Concurrency loads are whole numbers: each step is rounded up to the next
//!    integer and is at least one more than the last. If the first point fails, the search ends `below_start`
//!    (no answer; `start` is an upper bound). If `max` passes, it ends `above_max` with `max` as a lower bound. If
//!    the points run out before either, it ends `incomplete` with the highest passing load as a lower bound.
//! 2. **Bisection** between the highest passing load `lo` and the lowest failing load `hi`, until
//!    (hi − lo)/lo ≤ `tolerance` (rate) or hi − lo ≤ 1 (concurrency), or until only the two points the
//!    confirmations need remain. A rate midpoint is geometric, √(lo·hi), rounded to the fewest significant digits
//!    (at least 3) that move it by at most 5% of the bracket: the stop rule is relative, and the geometric
//!    midpoint halves the bracket's relative width with every point, as the ramp grows it by a factor (the
//!    arithmetic midpoint of 16..32 would spend its point on the upper, relatively narrower, half). A
//!    concurrency midpoint is ⌊(lo + hi)/2⌋: that stop rule is absolute (one apart), which the arithmetic
//!    midpoint halves.
//! 3. **Confirmation.** `lo` is run again (phase `confirm`) and must pass again; then `hi` (phase
//!    `confirm_above`) must fail again. A load whose last two runs already agree is not run a third time.
//!    - If `lo` fails its confirmation, the answer is not stable: `lo` becomes the failing end, the passing end
//!      drops to the highest load below it whose latest run passed, and the search bisects and confirms again
//!      there. If no lower load passed, or the points run out before a passing end is confirmed, the search ends
//!      `unstable` without an answer.
//!    - If `hi` passes its confirmation, it becomes the passing end; the failing end is the lowest higher load
//!      whose latest run failed (bisect again), or, when there is none, the ramp continues upward from it.
//!
//! `max_points` bounds every point, confirmations included; the ramp may use all of them (there is nothing to
//! confirm before a failure). Every point run, failed confirmations included, is kept in the report.
//!
//! # Point size
//!
//! Each point is long enough to be stable: it runs at least `min_duration` and sends at least `min_requests`.
//! A rate point runs `max(min_duration, min_requests ÷ rate)` (rounded up to the millisecond) and sends
//! `ceil(rate × duration)` requests. A concurrency point is a closed loop bounded by time (`requests: None`): it
//! runs `max(min_duration, min_requests ÷ expected requests/s)`, the expected rate being the throughput measured
//! at the nearest concurrency at or below it already run (its latest run) scaled by the ratio of the
//! concurrencies; before any such point — or when it served nothing — `min_duration`.
//!
//! # Outcome
//!
//! The answer is the highest load that met every objective; `confirmed` says that it passed a rerun and the
//! failing load above it failed a rerun. The uncertainty is the bracket's width, absolute (hi − lo) and relative
//! to the answer ((hi − lo)/lo). The **knee** is read from every point, one per load (the latest run of a
//! repeated load), sorted by load: the throughput efficiency between consecutive points is
//! (Δ requests/s ÷ Δ load) ÷ (requests/s ÷ load of the lowest point), i.e. how much of each added unit of load
//! is still served compared with light load. The knee is the last point before the efficiency first drops below
//! 0.5, or the highest point if it never does; there is none with fewer than two loads, or when the lowest load
//! served nothing (no baseline).

use std::time::Duration;

use llmbench_core::capacity::{
    CapacitySearch, LatencyMetric, LoadAxis, Metric, Objective, Statistic,
};
use serde::{Deserialize, Serialize};

use super::{Stats, Summary};

/// The points bisection leaves for the two confirmations.
const CONFIRMATIONS: usize = 2;

/// Below this throughput efficiency (relative to light load) the server is past its knee.
const KNEE_EFFICIENCY: f64 = 0.5;

/// How far a rounded rate midpoint may move, as a fraction of the bracket.
const MIDPOINT_SLACK: f64 = 0.05;

/// One objective judged on one point's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveResult {
    /// The objective as written back (`ttft_p99<=500ms`).
    pub objective: String,
    /// The measured figure in the objective's unit; `None` when the summary lacks it.
    pub value: Option<f64>,
    pub met: bool,
}

/// Judges `summary` by each objective, in order. A figure the summary lacks is not met: no TTFT without
/// streaming, no latency at all when no request succeeded, no goodput when it was not configured, no failure
/// rate without requests.
pub fn evaluate(objectives: &[Objective], summary: &Summary) -> Vec<ObjectiveResult> {
    objectives
        .iter()
        .map(|objective| {
            let value = measure(objective.metric, summary).filter(|v| v.is_finite());
            ObjectiveResult {
                objective: objective.to_string(),
                value,
                met: value.is_some_and(|v| objective.met_by(v)),
            }
        })
        .collect()
}

fn measure(metric: Metric, summary: &Summary) -> Option<f64> {
    let throughput = &summary.throughput;
    match metric {
        Metric::Latency(latency, statistic) => {
            // A latency of nothing served is no latency: the statistics of failed requests (or their schedule
            // delay alone) must not let an overloaded point pass.
            if summary.requests.succeeded == 0 {
                return None;
            }
            let l = &summary.latency_ms;
            let stats = match latency {
                LatencyMetric::Ttft => l.ttft,
                LatencyMetric::Tpot => l.tpot,
                LatencyMetric::Itl => l.itl,
                LatencyMetric::Ntpot => l.ntpot,
                LatencyMetric::E2e => l.e2e,
                LatencyMetric::TtftFromScheduled => l.ttft_from_scheduled,
                LatencyMetric::E2eFromScheduled => l.e2e_from_scheduled,
                LatencyMetric::ScheduleDelay => summary.schedule.delay_ms,
            }?;
            Some(statistic_of(&stats, statistic))
        }
        Metric::FailureRate => (summary.requests.total > 0).then_some(summary.failure_rate),
        Metric::Goodput => summary.goodput.as_ref().map(|g| g.percentage),
        Metric::RequestsPerS => Some(throughput.requests_per_s),
        Metric::OutputTokensPerS => Some(throughput.output_tokens_per_s),
        Metric::InputTokensPerS => Some(throughput.input_tokens_per_s),
        Metric::TotalTokensPerS => Some(throughput.total_tokens_per_s),
    }
}

fn statistic_of(stats: &Stats, statistic: Statistic) -> f64 {
    match statistic {
        Statistic::Mean => stats.mean,
        Statistic::P50 => stats.p50,
        Statistic::P90 => stats.p90,
        Statistic::P95 => stats.p95,
        Statistic::P99 => stats.p99,
        Statistic::P999 => stats.p999,
        Statistic::Max => stats.max,
    }
}

/// Why a point is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Growing the load until a point fails.
    Ramp,
    /// Narrowing the bracket between the highest passing and the lowest failing load.
    Bisect,
    /// Rerunning the answer: it must pass again.
    Confirm,
    /// Rerunning the failing load above the answer: it must fail again.
    ConfirmAbove,
}

/// One load point to run: a rate (requests per second, open loop) or a concurrency (closed loop).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub load: f64,
    pub phase: Phase,
    pub duration: Duration,
    /// Requests to send (rate points); `None` for a concurrency point, which is bounded by `duration`.
    pub requests: Option<u64>,
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A passing and a failing load bracket the capacity.
    Found,
    /// The first point failed: the capacity is below `start`.
    BelowStart,
    /// `max` passed: the capacity is at least `max`.
    AboveMax,
    /// The answer failed its confirmation and no lower load could be confirmed in its place.
    Unstable,
    /// The points ran out before any load failed (or before the search began): the answer is a lower bound.
    Incomplete,
}

/// The loads either side of the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bracket {
    /// The highest load that passed (latest run).
    pub passing: Option<f64>,
    /// The lowest load above it that failed (latest run).
    pub failing: Option<f64>,
}

/// The bracket's width.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Uncertainty {
    /// failing − passing, in load units.
    pub absolute: f64,
    /// (failing − passing) / passing.
    pub relative: f64,
}

/// Where added load stops being served (see the module documentation for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    pub load: f64,
    pub requests_per_s: f64,
}

/// A latency's median and 99th percentile, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

impl From<&Stats> for Percentiles {
    fn from(stats: &Stats) -> Self {
        Percentiles {
            p50: stats.p50,
            p99: stats.p99,
        }
    }
}

/// One point as run and judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointReport {
    /// Position in run order, from 0.
    pub index: u32,
    /// The run's stage the point ran as, when the caller said ([`Search::set_stage`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<u32>,
    pub load: f64,
    pub phase: Phase,
    /// How long the point was planned to run.
    pub duration_s: f64,
    /// Requests the point sent, as measured.
    pub requests: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub failure_rate: f64,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub ttft_ms: Option<Percentiles>,
    pub tpot_ms: Option<Percentiles>,
    pub itl_ms: Option<Percentiles>,
    pub e2e_ms: Option<Percentiles>,
    pub goodput_percentage: Option<f64>,
    /// Every objective met.
    pub passed: bool,
    pub objectives: Vec<ObjectiveResult>,
}

/// What the search found: `summary.json`'s `capacity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityOutcome {
    pub load: LoadAxis,
    pub objectives: Vec<String>,
    pub status: Status,
    /// The highest load that met every objective (`found`, `above_max`, or a lower bound when `incomplete`).
    pub answer: Option<f64>,
    pub bracket: Bracket,
    pub uncertainty: Option<Uncertainty>,
    /// The answer passed a rerun and the failing load above it failed a rerun.
    pub confirmed: bool,
    pub knee: Option<Knee>,
    /// Every point, in run order.
    pub points: Vec<PointReport>,
    /// The point-size rule with this search's figures.
    pub rule: String,
}

/// Where the search is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Ramp,
    Bisect,
    Confirm,
    ConfirmAbove,
    Done,
}

/// The outcome of a search whose points ran as `stages` (stage index, its summary), in run order: the search is
/// deterministic given what each point measured, so replaying the stages' summaries gives exactly the outcome the
/// run decided by. `llmbench report` re-derives a run's `capacity` this way from its records. Stages beyond the
/// points the search asked for are ignored; a run that stopped early gives the outcome so far.
pub fn replay(spec: CapacitySearch, stages: &[(u32, &Summary)]) -> CapacityOutcome {
    let mut search = Search::new(spec);
    for (stage, summary) in stages {
        let Some(point) = search.next_point() else {
            break;
        };
        search.set_stage(*stage);
        search.record(&point, summary);
    }
    search.outcome()
}

/// The capacity search as a state machine: [`next_point`](Search::next_point), run it,
/// [`record`](Search::record), until `next_point` says `None`; then [`outcome`](Search::outcome).
#[derive(Debug, Clone)]
pub struct Search {
    spec: CapacitySearch,
    /// Every recorded point, in run order.
    runs: Vec<PointReport>,
    /// The point handed out and not yet recorded.
    pending: Option<Point>,
    /// The stage the pending point runs as, if the caller said before recording it.
    pending_stage: Option<u32>,
    /// The highest passing load of the current bracket.
    lo: Option<f64>,
    /// The lowest failing load above `lo`.
    hi: Option<f64>,
    step: Step,
    /// An answer failed its confirmation; cleared in effect once the current `lo` passes twice in a row.
    unstable: bool,
}

impl Search {
    /// A search for `spec`, which is expected valid (as `CapacitySearch::try_from` makes it); an invalid one
    /// still ends within `max_points`.
    pub fn new(spec: CapacitySearch) -> Search {
        Search {
            spec,
            runs: Vec::new(),
            pending: None,
            pending_stage: None,
            lo: None,
            hi: None,
            step: Step::Ramp,
            unstable: false,
        }
    }

    /// The next point to run; `None` when the search is over. Asking again before recording returns the same
    /// point.
    pub fn next_point(&mut self) -> Option<Point> {
        if let Some(point) = &self.pending {
            return Some(point.clone());
        }
        let (load, phase) = self.plan()?;
        let point = self.point(load, phase);
        self.pending = Some(point.clone());
        Some(point)
    }

    /// What the point returned by the last `next_point` measured. A point that is not that one is kept in the
    /// report (and counts against `max_points`) but does not steer the search.
    pub fn record(&mut self, point: &Point, summary: &Summary) {
        let objectives = evaluate(&self.spec.objectives, summary);
        let passed = objectives.iter().all(|o| o.met);
        let steers = self.pending.as_ref() == Some(point);
        let stage = if steers {
            self.pending_stage.take()
        } else {
            None
        };
        let index = u32::try_from(self.runs.len()).unwrap_or(u32::MAX);
        self.runs.push(point_report(
            index, stage, point, summary, passed, objectives,
        ));
        if steers {
            self.pending = None;
            self.advance(point.load, point.phase, passed);
        }
    }

    /// The stage of the run the current point runs as: the pending point's if one is handed out and not yet
    /// recorded, else the last recorded point's. So the caller may say it before or after `record`.
    pub fn set_stage(&mut self, stage: u32) {
        if self.pending.is_some() {
            self.pending_stage = Some(stage);
        } else if let Some(last) = self.runs.last_mut() {
            last.stage = Some(stage);
        }
    }

    /// What the search has found so far (final once `next_point` returned `None`).
    pub fn outcome(&self) -> CapacityOutcome {
        let (lo, hi) = (self.lo, self.hi);
        let lo_confirmed = lo.is_some_and(|l| self.repeated(l, true));
        let hi_confirmed = hi.is_some_and(|h| self.repeated(h, false));
        let status = match (lo, hi) {
            _ if self.unstable && !lo_confirmed => Status::Unstable,
            (None, Some(_)) => Status::BelowStart,
            (None, None) => Status::Incomplete,
            (Some(l), None) if l >= self.top() => Status::AboveMax,
            (Some(_), None) => Status::Incomplete,
            (Some(_), Some(_)) => Status::Found,
        };
        let uncertainty = match (lo, hi) {
            (Some(lo), Some(hi)) if lo > 0.0 => Some(Uncertainty {
                absolute: hi - lo,
                relative: (hi - lo) / lo,
            }),
            _ => None,
        };
        CapacityOutcome {
            load: self.spec.load,
            objectives: self.spec.objectives.iter().map(|o| o.to_string()).collect(),
            status,
            answer: match status {
                Status::Found | Status::AboveMax | Status::Incomplete => lo,
                Status::BelowStart | Status::Unstable => None,
            },
            bracket: Bracket {
                passing: lo,
                failing: hi,
            },
            uncertainty,
            confirmed: lo_confirmed && hi_confirmed,
            knee: knee(&self.runs),
            points: self.runs.clone(),
            rule: self.rule(),
        }
    }

    /// The next load and phase, or `None` when the search is over.
    fn plan(&mut self) -> Option<(f64, Phase)> {
        loop {
            let remaining = (self.spec.max_points as usize).saturating_sub(self.runs.len());
            if remaining == 0 {
                self.step = Step::Done;
            }
            match self.step {
                Step::Done => return None,
                Step::Ramp => return self.ramp_load().map(|load| (load, Phase::Ramp)),
                Step::Bisect => {
                    let midpoint = match (self.lo, self.hi) {
                        (Some(lo), Some(hi)) if remaining > CONFIRMATIONS => self.midpoint(lo, hi),
                        _ => None,
                    };
                    match midpoint {
                        Some(load) => return Some((load, Phase::Bisect)),
                        None => self.step = Step::Confirm,
                    }
                }
                Step::Confirm => match self.lo {
                    Some(lo) if !self.repeated(lo, true) => return Some((lo, Phase::Confirm)),
                    _ => self.step = Step::ConfirmAbove,
                },
                Step::ConfirmAbove => match self.hi {
                    Some(hi) if !self.repeated(hi, false) => {
                        return Some((hi, Phase::ConfirmAbove));
                    }
                    _ => self.step = Step::Done,
                },
            }
        }
    }

    /// Moves the search on from a point of `phase` at `load` that `passed` or not.
    fn advance(&mut self, load: f64, phase: Phase, passed: bool) {
        match (phase, passed) {
            (Phase::Ramp, true) => {
                self.lo = Some(load);
                if load >= self.top() {
                    self.step = Step::Done;
                }
            }
            (Phase::Ramp, false) => {
                self.hi = Some(load);
                self.step = if self.lo.is_some() {
                    Step::Bisect
                } else {
                    Step::Done
                };
            }
            (Phase::Bisect, true) => self.lo = Some(load),
            (Phase::Bisect, false) => self.hi = Some(load),
            (Phase::Confirm, true) => self.step = Step::ConfirmAbove,
            (Phase::Confirm, false) => {
                self.unstable = true;
                self.lo = self.highest_passing_below(load);
                match self.lo {
                    Some(lo) => {
                        // `load` itself now qualifies, so the failing end is at most `load`.
                        self.hi = self.lowest_failing_above(lo).or(Some(load));
                        self.step = Step::Bisect;
                    }
                    None => {
                        self.hi = Some(load);
                        self.step = Step::Done;
                    }
                }
            }
            (Phase::ConfirmAbove, false) => self.step = Step::Done,
            (Phase::ConfirmAbove, true) => {
                self.lo = Some(load);
                self.hi = self.lowest_failing_above(load);
                self.step = if self.hi.is_some() {
                    Step::Bisect
                } else if load >= self.top() {
                    Step::Done
                } else {
                    Step::Ramp
                };
            }
        }
    }

    /// The highest load a point may have: `max`, a whole number for concurrency.
    fn top(&self) -> f64 {
        let first = self.first_load();
        match self.spec.load {
            LoadAxis::Rate => self.spec.max.max(first),
            LoadAxis::Concurrency => self.spec.max.floor().max(first),
        }
    }

    fn first_load(&self) -> f64 {
        match self.spec.load {
            LoadAxis::Rate => self.spec.start,
            LoadAxis::Concurrency => self.spec.start.ceil().max(1.0),
        }
    }

    /// The ramp's next load: `start`, then a factor `growth` above the passing end, capped at the top.
    fn ramp_load(&self) -> Option<f64> {
        let top = self.top();
        let Some(lo) = self.lo else {
            return Some(self.first_load());
        };
        if lo >= top {
            return None;
        }
        let grown = lo * self.spec.growth;
        let next = match self.spec.load {
            // Twelve significant digits drop the float noise of repeated products (1.1·1.1 = 1.2100000000000002).
            LoadAxis::Rate => round_significant(grown, 12),
            LoadAxis::Concurrency => ceil_tolerant(grown).max(lo + 1.0),
        };
        // A growth that does not grow (an invalid spec) goes straight to the top.
        Some(if next > lo { next.min(top) } else { top })
    }

    /// The bisection point strictly inside (lo, hi); `None` when the bracket is narrow enough.
    fn midpoint(&self, lo: f64, hi: f64) -> Option<f64> {
        let mid = match self.spec.load {
            LoadAxis::Rate => {
                if (hi - lo) / lo <= self.spec.tolerance {
                    return None;
                }
                tidy((lo * hi).sqrt(), lo, hi)
            }
            LoadAxis::Concurrency => {
                if hi - lo <= 1.0 {
                    return None;
                }
                ((lo + hi) / 2.0).floor()
            }
        };
        (mid > lo && mid < hi).then_some(mid)
    }

    /// The point to run at `load`, sized by the point-size rule.
    fn point(&self, load: f64, phase: Phase) -> Point {
        let min_duration = self.spec.min_duration;
        let min_requests = self.spec.min_requests;
        let (duration, requests) = match self.spec.load {
            LoadAxis::Rate => {
                let duration = at_least(min_duration, min_requests as f64 / load);
                // rate × max(d, n/rate) = max(rate × d, n): computed so, the count is exact.
                let over_min_duration = ceil_tolerant(load * min_duration.as_secs_f64());
                let requests = if over_min_duration.is_finite() {
                    (over_min_duration as u64).max(min_requests)
                } else {
                    min_requests
                };
                (duration, Some(requests))
            }
            LoadAxis::Concurrency => {
                let duration = match self.expected_rps(load) {
                    Some(rps) => at_least(min_duration, min_requests as f64 / rps),
                    None => min_duration,
                };
                (duration, None)
            }
        };
        Point {
            load,
            phase,
            duration,
            requests,
        }
    }

    /// The throughput expected at concurrency `load`: the latest measured at the highest concurrency at or
    /// below it, scaled by the ratio of concurrencies. `None` before any, or when that point served nothing.
    fn expected_rps(&self, load: f64) -> Option<f64> {
        let (below, rps) = latest_per_load(&self.runs)
            .into_iter()
            .filter(|r| r.load <= load && r.load > 0.0)
            .map(|r| (r.load, r.requests_per_s))
            .max_by(|a, b| a.0.total_cmp(&b.0))?;
        let expected = rps * load / below;
        (expected.is_finite() && expected > 0.0).then_some(expected)
    }

    /// Whether the last two runs at `load` both `passed` (or both failed).
    fn repeated(&self, load: f64, passed: bool) -> bool {
        let mut at_load = self.runs.iter().rev().filter(|r| r.load == load);
        let mut last = || at_load.next().is_some_and(|r| r.passed == passed);
        last() && last()
    }

    /// The highest load below `load` whose latest run passed.
    fn highest_passing_below(&self, load: f64) -> Option<f64> {
        latest_per_load(&self.runs)
            .into_iter()
            .filter(|r| r.passed && r.load < load)
            .map(|r| r.load)
            .max_by(f64::total_cmp)
    }

    /// The lowest load above `load` whose latest run failed.
    fn lowest_failing_above(&self, load: f64) -> Option<f64> {
        latest_per_load(&self.runs)
            .into_iter()
            .filter(|r| !r.passed && r.load > load)
            .map(|r| r.load)
            .min_by(f64::total_cmp)
    }

    /// The point-size rule in one sentence, with this search's figures.
    fn rule(&self) -> String {
        let duration = humantime::format_duration(self.spec.min_duration);
        let requests = self.spec.min_requests;
        match self.spec.load {
            LoadAxis::Rate => format!(
                "each rate point runs max({duration}, {requests} requests ÷ rate) and sends ceil(rate × duration) \
                 requests, so at least {requests} requests over at least {duration}"
            ),
            LoadAxis::Concurrency => format!(
                "each concurrency point runs closed loop for max({duration}, {requests} requests ÷ expected \
                 requests/s), the expected rate being the throughput measured at the nearest concurrency at or \
                 below it scaled by the ratio of concurrencies ({duration} while none has been measured)"
            ),
        }
    }
}

fn point_report(
    index: u32,
    stage: Option<u32>,
    point: &Point,
    summary: &Summary,
    passed: bool,
    objectives: Vec<ObjectiveResult>,
) -> PointReport {
    let latency = &summary.latency_ms;
    PointReport {
        index,
        stage,
        load: point.load,
        phase: point.phase,
        duration_s: point.duration.as_secs_f64(),
        requests: summary.requests.total,
        succeeded: summary.requests.succeeded,
        failed: summary.requests.failed,
        failure_rate: summary.failure_rate,
        requests_per_s: summary.throughput.requests_per_s,
        output_tokens_per_s: summary.throughput.output_tokens_per_s,
        ttft_ms: latency.ttft.as_ref().map(Percentiles::from),
        tpot_ms: latency.tpot.as_ref().map(Percentiles::from),
        itl_ms: latency.itl.as_ref().map(Percentiles::from),
        e2e_ms: latency.e2e.as_ref().map(Percentiles::from),
        goodput_percentage: summary.goodput.as_ref().map(|g| g.percentage),
        passed,
        objectives,
    }
}

/// The latest run of each load, sorted by load.
fn latest_per_load(runs: &[PointReport]) -> Vec<&PointReport> {
    let mut latest: Vec<&PointReport> = Vec::new();
    for run in runs {
        match latest.iter_mut().find(|r| r.load == run.load) {
            Some(seen) => *seen = run,
            None => latest.push(run),
        }
    }
    latest.sort_by(|a, b| a.load.total_cmp(&b.load));
    latest
}

/// The knee of the throughput curve (the rule is in the module documentation).
fn knee(runs: &[PointReport]) -> Option<Knee> {
    let curve: Vec<Knee> = latest_per_load(runs)
        .into_iter()
        .map(|r| Knee {
            load: r.load,
            requests_per_s: r.requests_per_s,
        })
        .collect();
    let (first, last) = (curve.first()?, curve.last()?);
    if curve.len() < 2 {
        return None;
    }
    let baseline = first.requests_per_s / first.load;
    if !(baseline.is_finite() && baseline > 0.0) {
        return None;
    }
    curve
        .windows(2)
        .find(|pair| {
            let gain =
                (pair[1].requests_per_s - pair[0].requests_per_s) / (pair[1].load - pair[0].load);
            gain / baseline < KNEE_EFFICIENCY
        })
        .map_or(Some(*last), |pair| Some(pair[0]))
}

/// `floor` as a duration, or `seconds` rounded up to the millisecond when that is longer.
fn at_least(floor: Duration, seconds: f64) -> Duration {
    if !(seconds.is_finite() && seconds > floor.as_secs_f64()) {
        return floor;
    }
    // `as` saturates: an absurd length becomes u64::MAX milliseconds rather than a panic.
    Duration::from_millis(ceil_tolerant(seconds * 1000.0) as u64).max(floor)
}

/// `ceil` that ignores float noise just above a whole number (22.6 × 30 = 678.0000000000001 is 678).
fn ceil_tolerant(value: f64) -> f64 {
    (value - value.abs() * 1e-12).ceil()
}

/// `value` rounded to `digits` significant digits, through its decimal form so the result is the float nearest
/// the rounded decimal (22.6, not 22.600000000000001).
fn round_significant(value: f64, digits: usize) -> f64 {
    if !value.is_finite() || value == 0.0 || digits == 0 {
        return value;
    }
    format!("{:.*e}", digits - 1, value)
        .parse()
        .unwrap_or(value)
}

/// A midpoint readable in a report (22.6 rather than 22.627416997969522): rounded to the fewest significant
/// digits, at least 3, that keep it inside (lo, hi) and move it by at most 5% of the bracket.
fn tidy(mid: f64, lo: f64, hi: f64) -> f64 {
    let slack = (hi - lo) * MIDPOINT_SLACK;
    (3..=15)
        .map(|digits| round_significant(mid, digits))
        .find(|r| *r > lo && *r < hi && (r - mid).abs() <= slack)
        .unwrap_or(mid)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::Phase::{Bisect, Confirm, ConfirmAbove, Ramp};
    use super::*;
    use crate::metrics::{Goodput, Latency, RequestCounts, Schedule, Throughput};

    fn stats(value: f64) -> Stats {
        Stats {
            count: 100,
            mean: value,
            stddev: 0.0,
            min: value,
            max: value,
            p50: value,
            p90: value,
            p95: value,
            p99: value,
            p999: value,
        }
    }

    /// A streaming point where 100 requests succeeded at `requests_per_s`, every latency `latency_ms`.
    fn served(requests_per_s: f64, latency_ms: f64) -> Summary {
        let l = Some(stats(latency_ms));
        Summary {
            requests: RequestCounts {
                total: 100,
                succeeded: 100,
                failed: 0,
                truncated: 0,
                lost_in_flight: 0,
            },
            failure_rate: 0.0,
            duration_s: 30.0,
            throughput: Throughput {
                requests_per_s,
                input_tokens_per_s: requests_per_s * 100.0,
                output_tokens_per_s: requests_per_s * 10.0,
                total_tokens_per_s: requests_per_s * 110.0,
                inputs_per_s: None,
            },
            latency_ms: Latency {
                ttft: l,
                tpot: l,
                itl: l,
                ntpot: l,
                e2e: l,
                ttfo: None,
                ttft_from_scheduled: l,
                e2e_from_scheduled: l,
            },
            schedule: Schedule {
                requested_rate: None,
                achieved_rate: None,
                delay_ms: Some(stats(1.0)),
            },
            errors: BTreeMap::new(),
            error_samples: BTreeMap::new(),
            lengths: Default::default(),
            goodput: None,
            prefix_cache: None,
            finish_reasons: BTreeMap::new(),
            truncation: None,
            reasoning: None,
        }
    }

    /// The fake server's answer: TTFT p99 100 ms when it copes, 900 ms when it does not; throughput saturates at
    /// 20 requests/s.
    fn server(load: f64, copes: bool) -> Summary {
        served(load.min(20.0), if copes { 100.0 } else { 900.0 })
    }

    fn spec(load: LoadAxis, max: f64, max_points: u32) -> CapacitySearch {
        CapacitySearch {
            load,
            objectives: vec!["ttft_p99<=500ms".parse().unwrap()],
            start: 1.0,
            max,
            growth: 2.0,
            tolerance: 0.05,
            min_duration: Duration::from_secs(30),
            min_requests: 200,
            max_points,
        }
    }

    /// Runs the search to its end against `copes(point, run index)`; the loads and phases it visited, and the
    /// outcome.
    fn run(
        spec: CapacitySearch,
        mut copes: impl FnMut(&Point, usize) -> bool,
    ) -> (Vec<(f64, Phase)>, CapacityOutcome) {
        let mut search = Search::new(spec);
        let mut visited = Vec::new();
        while let Some(point) = search.next_point() {
            assert!(visited.len() < 1000, "the search does not end");
            let summary = server(point.load, copes(&point, visited.len()));
            visited.push((point.load, point.phase));
            search.record(&point, &summary);
        }
        (visited, search.outcome())
    }

    fn loads(visited: &[(f64, Phase)]) -> Vec<f64> {
        visited.iter().map(|(load, _)| *load).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_rate_search_brackets_a_capacity_of_20_and_confirms_it() {
        // Passes iff rate ≤ 20. Ramp 1, 2, 4, 8, 16 pass, 32 fails. Bisect (geometric, tidied to 3 digits):
        // √(16·32) = 22.63 → 22.6 fails; √(16·22.6) = 19.02 → 19.0 passes ((22.6−19)/19 = 0.19 > 0.05);
        // √(19·22.6) = 20.72 → 20.7 fails (0.089); √(19·20.7) = 19.83 → 19.8 passes; (20.7−19.8)/19.8 = 0.045
        // ≤ 0.05: stop. Confirm 19.8 passes again, 20.7 fails again.
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 20), |p, _| p.load <= 20.0);
        assert_eq!(
            visited,
            [
                (1.0, Ramp),
                (2.0, Ramp),
                (4.0, Ramp),
                (8.0, Ramp),
                (16.0, Ramp),
                (32.0, Ramp),
                (22.6, Bisect),
                (19.0, Bisect),
                (20.7, Bisect),
                (19.8, Bisect),
                (19.8, Confirm),
                (20.7, ConfirmAbove),
            ]
        );
        assert_eq!(outcome.status, Status::Found);
        assert_eq!(outcome.answer, Some(19.8));
        assert_eq!(
            outcome.bracket,
            Bracket {
                passing: Some(19.8),
                failing: Some(20.7)
            }
        );
        let uncertainty = outcome.uncertainty.unwrap();
        assert!(close(uncertainty.absolute, 0.9), "{uncertainty:?}");
        assert!(uncertainty.relative <= 0.05);
        assert!(outcome.confirmed);
        assert_eq!(outcome.load, LoadAxis::Rate);
        assert_eq!(outcome.objectives, ["ttft_p99<=500ms"]);
        assert_eq!(
            outcome.points.iter().map(|p| p.index).collect::<Vec<_>>(),
            (0..12).collect::<Vec<_>>()
        );
        assert!(outcome.points[10].passed && !outcome.points[11].passed);
        assert_eq!(outcome.points[11].objectives[0].value, Some(900.0));
    }

    #[test]
    fn a_concurrency_search_steps_through_whole_numbers() {
        // Passes iff concurrency ≤ 10. Ramp 1, 2, 4, 8 pass, 16 fails. Bisect ⌊(8+16)/2⌋ = 12 fails,
        // ⌊(8+12)/2⌋ = 10 passes, ⌊(10+12)/2⌋ = 11 fails; 11 − 10 = 1: stop. Confirm 10, then 11.
        let (visited, outcome) = run(spec(LoadAxis::Concurrency, 64.0, 20), |p, _| p.load <= 10.0);
        assert_eq!(
            visited,
            [
                (1.0, Ramp),
                (2.0, Ramp),
                (4.0, Ramp),
                (8.0, Ramp),
                (16.0, Ramp),
                (12.0, Bisect),
                (10.0, Bisect),
                (11.0, Bisect),
                (10.0, Confirm),
                (11.0, ConfirmAbove),
            ]
        );
        assert_eq!(
            (outcome.status, outcome.answer, outcome.confirmed),
            (Status::Found, Some(10.0), true)
        );
        assert_eq!(
            outcome.uncertainty,
            Some(Uncertainty {
                absolute: 1.0,
                relative: 0.1
            })
        );
    }

    #[test]
    fn a_concurrency_ramp_rounds_each_step_up_and_ends_at_max() {
        // Growth 1.5: 1 → 1.5↑2 → 3 → 4.5↑5 → 7.5↑8 → 12 → 18 → 27, capped at 20.
        let mut spec = spec(LoadAxis::Concurrency, 20.0, 20);
        spec.growth = 1.5;
        let (visited, outcome) = run(spec, |_, _| true);
        assert_eq!(loads(&visited), [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 18.0, 20.0]);
        assert_eq!(outcome.status, Status::AboveMax);
        assert_eq!(outcome.answer, Some(20.0));
    }

    #[test]
    fn a_failing_first_point_ends_below_start() {
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 20), |_, _| false);
        assert_eq!(visited, [(1.0, Ramp)]);
        assert_eq!(outcome.status, Status::BelowStart);
        assert_eq!(outcome.answer, None);
        assert_eq!(
            outcome.bracket,
            Bracket {
                passing: None,
                failing: Some(1.0)
            }
        );
        assert_eq!(outcome.uncertainty, None);
        assert!(!outcome.confirmed);
    }

    #[test]
    fn a_passing_max_ends_above_max_with_max_as_the_answer() {
        let (visited, outcome) = run(spec(LoadAxis::Rate, 100.0, 20), |_, _| true);
        assert_eq!(
            loads(&visited),
            [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 100.0]
        );
        assert_eq!(outcome.status, Status::AboveMax);
        assert_eq!(outcome.answer, Some(100.0));
        assert_eq!(
            outcome.bracket,
            Bracket {
                passing: Some(100.0),
                failing: None
            }
        );
    }

    #[test]
    fn an_answer_that_fails_its_confirmation_once_is_searched_again_below() {
        // As the first test until 19.8's confirmation, which fails once (the flip). 19.8 becomes the failing end,
        // 19.0 (the previous passing load) the passing end; (19.8−19)/19 = 0.042 is narrow, so 19.0 is confirmed
        // (passes). 19.8 is confirmed as failing — and passes: it becomes the passing end again, under 20.7
        // (failed once). Narrow: 19.8 is confirmed (its last two runs, fail then pass, disagree) and 20.7 too.
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 20), |p, i| {
            p.load <= 20.0 && i != 10
        });
        assert_eq!(
            visited[9..],
            [
                (19.8, Bisect),
                (19.8, Confirm),
                (19.0, Confirm),
                (19.8, ConfirmAbove),
                (19.8, Confirm),
                (20.7, ConfirmAbove),
            ]
        );
        assert_eq!(outcome.status, Status::Found);
        assert_eq!(outcome.answer, Some(19.8));
        assert!(outcome.confirmed);
        // The failed confirmation stays in the report.
        assert_eq!(outcome.points.len(), 15);
        assert!(!outcome.points[10].passed);
    }

    #[test]
    fn answers_that_never_pass_twice_end_unstable() {
        // Every load passes its first run (iff ≤ 20) and fails any rerun. With 12 points: the first test's ten,
        // then 19.8's confirmation fails (19.0 becomes the passing end) and 19.0's fails (16 would be next): the
        // points are gone with no confirmed answer.
        let mut seen = Vec::new();
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 12), |p, _| {
            let first = !seen.contains(&p.load);
            seen.push(p.load);
            first && p.load <= 20.0
        });
        assert_eq!(
            loads(&visited),
            [
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 22.6, 19.0, 20.7, 19.8, 19.8, 19.0
            ]
        );
        assert_eq!(outcome.status, Status::Unstable);
        assert_eq!(outcome.answer, None);
        assert!(!outcome.confirmed);
        assert_eq!(
            outcome.bracket,
            Bracket {
                passing: Some(16.0),
                failing: Some(19.0)
            }
        );

        // With all the points it wants, it keeps falling back until nothing passes twice.
        let mut seen = Vec::new();
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 200), |p, _| {
            let first = !seen.contains(&p.load);
            seen.push(p.load);
            first && p.load <= 20.0
        });
        assert_eq!(outcome.status, Status::Unstable);
        assert_eq!(outcome.answer, None);
        assert!(visited.len() < 200);
    }

    #[test]
    fn max_points_bounds_every_search() {
        // Five points: the ramp never fails; the answer is a lower bound.
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 5), |p, _| p.load <= 20.0);
        assert_eq!(loads(&visited), [1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!(
            (outcome.status, outcome.answer),
            (Status::Incomplete, Some(16.0))
        );

        // Eight: the ramp's failure leaves only the two confirmations, no bisection.
        let (visited, outcome) = run(spec(LoadAxis::Rate, 1024.0, 8), |p, _| p.load <= 20.0);
        assert_eq!(
            visited[5..],
            [(32.0, Ramp), (16.0, Confirm), (32.0, ConfirmAbove)]
        );
        assert_eq!(
            (outcome.status, outcome.answer, outcome.confirmed),
            (Status::Found, Some(16.0), true)
        );
        assert_eq!(outcome.uncertainty.map(|u| u.relative), Some(1.0));

        for max_points in 2..=25 {
            for load in [LoadAxis::Rate, LoadAxis::Concurrency] {
                let (visited, _) = run(spec(load, 1024.0, max_points), |p, i| {
                    p.load <= 20.0 && i % 7 != 3
                });
                assert!(visited.len() <= max_points as usize, "{max_points}");
            }
        }
    }

    #[test]
    fn rate_points_last_long_enough_for_min_requests_and_min_duration() {
        let search = Search::new(spec(LoadAxis::Rate, 1024.0, 20));
        let size = |load| {
            let p = search.point(load, Ramp);
            (p.duration, p.requests)
        };
        let secs = Duration::from_secs;
        // 200 requests at 1/s take 200 s; at 4/s, 50 s; at 10/s, 20 s < 30 s, so 30 s and 300 requests.
        assert_eq!(size(1.0), (secs(200), Some(200)));
        assert_eq!(size(4.0), (secs(50), Some(200)));
        assert_eq!(size(10.0), (secs(30), Some(300)));
        assert_eq!(size(22.6), (secs(30), Some(678)));
        assert_eq!(size(3.0), (Duration::from_millis(66_667), Some(200)));
        assert_eq!(
            search.outcome().rule,
            "each rate point runs max(30s, 200 requests ÷ rate) and sends ceil(rate × duration) requests, so \
             at least 200 requests over at least 30s"
        );
    }

    #[test]
    fn concurrency_points_scale_the_throughput_measured_below() {
        let mut search = Search::new(spec(LoadAxis::Concurrency, 1024.0, 20));
        let first = search.next_point().unwrap();
        // Nothing measured yet: min_duration, bounded by time only.
        assert_eq!(
            first,
            Point {
                load: 1.0,
                phase: Ramp,
                duration: Duration::from_secs(30),
                requests: None
            }
        );
        search.record(&first, &served(2.0, 100.0));
        // Concurrency 2 expects 2 × 2/1 = 4 requests/s: 200 requests take 50 s.
        let second = search.next_point().unwrap();
        assert_eq!(
            (second.load, second.duration),
            (2.0, Duration::from_secs(50))
        );
        // Concurrency 4 from 1 (the only one measured) expects 8/s: 25 s, so min_duration.
        assert_eq!(search.point(4.0, Ramp).duration, Duration::from_secs(30));
        // A point that served nothing gives no expectation.
        search.record(&second, &served(0.0, 100.0));
        assert_eq!(search.point(3.0, Ramp).duration, Duration::from_secs(30));
        assert!(search.outcome().rule.starts_with(
            "each concurrency point runs closed loop for max(30s, 200 requests ÷ expected requests/s)"
        ));
    }

    fn curve(points: &[(f64, f64)]) -> Vec<PointReport> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(load, rps))| {
                let point = Point {
                    load,
                    phase: Ramp,
                    duration: Duration::from_secs(30),
                    requests: None,
                };
                point_report(i as u32, None, &point, &served(rps, 1.0), true, Vec::new())
            })
            .collect()
    }

    #[test]
    fn the_knee_is_where_added_load_stops_being_served() {
        // Throughput saturating at 20/s: efficiency 1 up to 16, then (20 − 16)/(32 − 16) = 0.25.
        let saturating: Vec<_> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
            .map(|load: f64| (load, load.min(20.0)))
            .into();
        assert_eq!(
            knee(&curve(&saturating)),
            Some(Knee {
                load: 16.0,
                requests_per_s: 16.0
            })
        );
        // Never dropping: the highest point. One load (repeated): none. Nothing served at the lowest: none.
        assert_eq!(
            knee(&curve(&[(1.0, 0.9), (2.0, 1.8), (4.0, 3.0)])).map(|k| k.load),
            Some(4.0)
        );
        assert_eq!(knee(&curve(&[(5.0, 5.0), (5.0, 4.0)])), None);
        assert_eq!(knee(&curve(&[(1.0, 0.0), (2.0, 2.0)])), None);
        // A repeated load counts with its latest run: 32 re-measured at 32/s removes the knee at 16.
        let mut repeated = saturating.clone();
        repeated.push((32.0, 32.0));
        assert_eq!(knee(&curve(&repeated)).map(|k| k.load), Some(32.0));

        // The search's own points: sorted, 19.8 → 20.7 gains (20 − 19.8)/0.9 = 0.22 of light load's yield.
        let (_, outcome) = run(spec(LoadAxis::Rate, 1024.0, 20), |p, _| p.load <= 20.0);
        assert_eq!(
            outcome.knee,
            Some(Knee {
                load: 19.8,
                requests_per_s: 19.8
            })
        );
    }

    #[test]
    fn missing_figures_fail_their_objectives() {
        let objectives: Vec<Objective> = [
            "ttft_p99<=500ms",
            "e2e_p50<=1s",
            "goodput>=95%",
            "failure_rate<=1%",
            "output_tokens_per_s>=100",
            "schedule_delay_max<=5ms",
        ]
        .iter()
        .map(|o| o.parse().unwrap())
        .collect();
        let mut streaming_off = served(20.0, 800.0);
        streaming_off.latency_ms.ttft = None;
        let results = evaluate(&objectives, &streaming_off);
        let got: Vec<_> = results.iter().map(|r| (r.value, r.met)).collect();
        assert_eq!(
            got,
            [
                (None, false),
                (Some(800.0), true),
                (None, false),
                (Some(0.0), true),
                (Some(200.0), true),
                (Some(1.0), true),
            ]
        );
        assert_eq!(results[0].objective, "ttft_p99<=500ms");
        assert_eq!(results[1].objective, "e2e_p50<=1000ms");

        // Goodput configured: its percentage.
        let mut good = served(20.0, 100.0);
        good.goodput = Some(Goodput {
            good: 90,
            judged: 100,
            percentage: 90.0,
            requests_per_s: 18.0,
            attainment_percentage: BTreeMap::new(),
        });
        assert_eq!(
            evaluate(&objectives[2..3], &good)[0],
            ObjectiveResult {
                objective: "goodput>=95%".into(),
                value: Some(90.0),
                met: false
            }
        );

        // Nothing succeeded: every latency objective fails, whatever statistics the summary carries.
        let mut nothing = served(0.0, 1.0);
        nothing.requests = RequestCounts {
            total: 100,
            succeeded: 0,
            failed: 100,
            truncated: 0,
            lost_in_flight: 0,
        };
        nothing.failure_rate = 1.0;
        let results = evaluate(&objectives, &nothing);
        assert!(results.iter().all(|r| !r.met), "{results:?}");
        assert_eq!(results[1].value, None);
        assert_eq!(results[5].value, None);
        assert_eq!(results[3].value, Some(1.0));
    }

    #[test]
    fn the_stage_may_be_given_before_or_after_recording() {
        let mut search = Search::new(spec(LoadAxis::Rate, 1024.0, 20));
        let first = search.next_point().unwrap();
        // Asking again before recording gives the same point.
        assert_eq!(search.next_point(), Some(first.clone()));
        search.set_stage(3);
        search.record(&first, &server(first.load, true));
        let second = search.next_point().unwrap();
        search.record(&second, &server(second.load, true));
        search.set_stage(4);
        let points = search.outcome().points;
        assert_eq!(
            points.iter().map(|p| p.stage).collect::<Vec<_>>(),
            [Some(3), Some(4)]
        );
    }

    #[test]
    fn the_outcome_reads_back_from_json_in_snake_case() {
        let (_, outcome) = run(spec(LoadAxis::Rate, 1024.0, 20), |p, _| p.load <= 20.0);
        let json = serde_json::to_value(&outcome).unwrap();
        assert_eq!(json["load"], "rate");
        assert_eq!(json["status"], "found");
        assert_eq!(json["points"][11]["phase"], "confirm_above");
        assert_eq!(json["points"][0]["ttft_ms"]["p99"], 100.0);
        let back: CapacityOutcome = serde_json::from_value(json).unwrap();
        assert_eq!(back, outcome);
        let below = run(spec(LoadAxis::Rate, 1024.0, 20), |_, _| false).1;
        assert_eq!(serde_json::to_value(below.status).unwrap(), "below_start");
    }

    #[test]
    fn midpoints_are_rounded_only_as_far_as_the_bracket_allows() {
        assert_eq!(tidy(22.627416997969522, 16.0, 32.0), 22.6);
        // A bracket of 100..100.9: 100 is not inside, 100.4 moves 100.449 by more than 5% of 0.9, 100.45 does not.
        assert_eq!(tidy(100.449, 100.0, 100.9), 100.45);
        assert_eq!(round_significant(1.1 * 1.1, 12), 1.21);
        assert_eq!(ceil_tolerant(22.6 * 30.0), 678.0);
        assert_eq!(ceil_tolerant(678.5), 679.0);
    }
}
