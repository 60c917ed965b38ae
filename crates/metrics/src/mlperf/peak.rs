//! LoadGen's `FindPeakPerformance` mode, the search itself (`loadgen.cc` `FindPeakPerformanceMode`,
//! `FindBoundaries`, `FindPeakPerformanceBinarySearch`; `test_settings_internal.h` `find_peak_performance`):
//!
//! 1. a performance pass at the requested `target_qps` (the lower bound); if its performance constraints
//!    (`PerformanceSummary::PerfConstraintsMet`: Server's TTFT and TPOT percentiles under their limits) are not
//!    met, the search ends there with an error, and that pass is the result;
//! 2. `FindBoundaries`: the upper bound widened to `qps · (1 + boundary_step_size)` and run, again and again from
//!    each bound that met the constraints, until one does not: `[l, u)`;
//! 3. `FindPeakPerformanceBinarySearch`: until `⌊l · 10^decimals⌋ + 1 ≥ ⌊u · 10^decimals⌋`, a pass at
//!    `l + (u − l) / 2`, which becomes `l` when it meets the constraints and `u` when it does not; the result is
//!    the last `l`'s pass.
//!
//! Only the performance constraints steer the search; duration, query count and early stopping are left to the
//! user's settings, as LoadGen leaves them. `decimals` and `boundary_step_size` are LoadGen's defaults (1 and 1):
//! `TestSettings::FromConfig` reads neither from a conf file. The detail log's messages are LoadGen's, the
//! bounds written by `std::to_string(double)` (`%f`).

/// A detail-log line the search writes between passes.
#[derive(Debug, Clone, PartialEq)]
pub enum PeakLine {
    /// A `generic_message`.
    Message(String),
    /// `LoadSamplesToRam` of the performance set: its `loaded_qsl_set` line.
    LoadSet,
}

/// What the search asks for next.
#[derive(Debug, Clone, PartialEq)]
pub enum PeakStep {
    /// Log `lines`, then run a performance pass at `target_qps`.
    Run {
        target_qps: f64,
        lines: Vec<PeakLine>,
    },
    /// The search is over: the result is the pass numbered `pass` (0-based, in run order), logged after
    /// `lines`, with `error` (an `error_runtime` line) when the lower bound already failed.
    Done {
        pass: usize,
        lines: Vec<PeakLine>,
        error: Option<String>,
    },
}

/// A bound: a pass's target QPS and its number.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bound {
    qps: f64,
    pass: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Nothing has run.
    Start,
    /// The base pass is running.
    Base,
    /// An upper bound from `lower` is running.
    Widening { lower: Bound },
    /// A mid value between the bounds is running.
    Binary { lower: Bound, upper: Bound },
}

/// The search's state between passes.
#[derive(Debug, Clone)]
pub struct PeakSearch {
    base_qps: f64,
    decimals: i32,
    boundary_step_size: f64,
    phase: Phase,
    passes: usize,
    /// The QPS of the pass now running.
    running: f64,
}

/// `std::to_string(double)`: `%f`, six decimals.
pub fn qps_field(qps: f64) -> String {
    format!("{qps:.6}")
}

impl PeakSearch {
    /// LoadGen's defaults: `server_find_peak_qps_decimals_of_precision` 1, `…_boundary_step_size` 1.
    pub fn new(base_qps: f64) -> Self {
        PeakSearch {
            base_qps,
            decimals: 1,
            boundary_step_size: 1.0,
            phase: Phase::Start,
            passes: 0,
            running: base_qps,
        }
    }

    /// The next step, given whether the pass that just ran met its performance constraints (`None` before the
    /// first) and, when it did not, the recommendation `PerfConstraintsMet` gave.
    pub fn next(&mut self, last: Option<(bool, &str)>) -> PeakStep {
        let finished = Bound {
            qps: self.running,
            pass: self.passes.saturating_sub(1),
        };
        match (self.phase, last) {
            (Phase::Start, _) | (_, None) => {
                self.phase = Phase::Base;
                self.run(
                    self.base_qps,
                    vec![
                        PeakLine::Message(format!(
                            "FindPeakPerformance: Check validity of the base settings field: {}",
                            qps_field(self.base_qps)
                        )),
                        PeakLine::LoadSet,
                    ],
                )
            }
            (Phase::Base, Some((false, msg))) => PeakStep::Done {
                pass: finished.pass,
                lines: Vec::new(),
                error: Some(format!(
                    "FindPeakPerformance: Initial lower bound does not satisfy performance constraints, msg: {msg}"
                )),
            },
            (Phase::Base, Some((true, _))) => self.widen(finished),
            (Phase::Widening { .. }, Some((true, _))) => self.widen(finished),
            (Phase::Widening { lower }, Some((false, _))) => {
                // The performance set is loaded once for the binary search, after the boundaries are logged and
                // before the search looks at them.
                let lines = vec![
                    PeakLine::Message(format!(
                        "FindPeakPerformance: Found boundaries: [{}, {})",
                        qps_field(lower.qps),
                        qps_field(finished.qps)
                    )),
                    PeakLine::LoadSet,
                ];
                self.binary(lower, finished, lines)
            }
            (Phase::Binary { upper, .. }, Some((true, _))) => {
                self.binary(finished, upper, Vec::new())
            }
            (Phase::Binary { lower, .. }, Some((false, _))) => {
                self.binary(lower, finished, Vec::new())
            }
        }
    }

    fn run(&mut self, target_qps: f64, lines: Vec<PeakLine>) -> PeakStep {
        self.running = target_qps;
        self.passes += 1;
        PeakStep::Run { target_qps, lines }
    }

    /// `FindBoundaries`: the next upper bound above `lower`, which met the constraints.
    fn widen(&mut self, lower: Bound) -> PeakStep {
        let upper = lower.qps * (1.0 + self.boundary_step_size);
        self.phase = Phase::Widening { lower };
        // Every `FindBoundaries` call loads the performance set for its pass.
        self.run(
            upper,
            vec![
                PeakLine::Message(format!(
                    "FindBoundaries: Checking fields [{}, {})",
                    qps_field(lower.qps),
                    qps_field(upper)
                )),
                PeakLine::LoadSet,
            ],
        )
    }

    /// `FindPeakPerformanceBinarySearch` between `lower` (met) and `upper` (not met), after `lines`.
    fn binary(&mut self, lower: Bound, upper: Bound, mut lines: Vec<PeakLine>) -> PeakStep {
        let scale = 10f64.powi(self.decimals);
        if (lower.qps * scale).floor() + 1.0 >= (upper.qps * scale).floor() {
            lines.push(PeakLine::Message(format!(
                "FindPeakPerformance: Found peak performance field: {}",
                qps_field(lower.qps)
            )));
            return PeakStep::Done {
                pass: lower.pass,
                lines,
                error: None,
            };
        }
        let mid = lower.qps + (upper.qps - lower.qps) / 2.0;
        self.phase = Phase::Binary { lower, upper };
        lines.push(PeakLine::Message(format!(
            "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [{}, {}): {}",
            qps_field(lower.qps),
            qps_field(upper.qps),
            qps_field(mid)
        )));
        self.run(mid, lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> PeakLine {
        PeakLine::Message(text.to_owned())
    }

    /// Runs the search against a server that meets its constraints up to `peak` QPS; returns every step.
    fn search(base: f64, peak: f64) -> Vec<PeakStep> {
        let mut search = PeakSearch::new(base);
        let mut steps = vec![search.next(None)];
        while let Some(PeakStep::Run { target_qps, .. }) = steps.last() {
            let met = *target_qps <= peak;
            let step = search.next(Some((
                met,
                "TTFT constrain not met: Reduce target QPS to improve latency.",
            )));
            steps.push(step);
        }
        steps
    }

    fn tested(steps: &[PeakStep]) -> Vec<f64> {
        steps
            .iter()
            .filter_map(|s| match s {
                PeakStep::Run { target_qps, .. } => Some(*target_qps),
                PeakStep::Done { .. } => None,
            })
            .collect()
    }

    #[test]
    fn the_search_widens_by_doubling_then_halves_the_bounds_to_a_tenth_of_a_qps() {
        // Worked by hand, peak 13.37: base 10 met → [10, 20) 20 failed → mid 15 failed → [10, 15) mid 12.5 met
        // → [12.5, 15) mid 13.75 failed → [12.5, 13.75) mid 13.125 met → [13.125, 13.75): ⌊131.25⌋ + 1 = 132
        // < ⌊137.5⌋ = 137, mid 13.4375 failed → [13.125, 13.4375): 132 < 134, mid 13.28125 met →
        // [13.28125, 13.4375): 133 < 134, mid 13.359375 met → [13.359375, 13.4375): 134 ≥ 134, done.
        let steps = search(10.0, 13.37);
        assert_eq!(
            tested(&steps),
            [
                10.0, 20.0, 15.0, 12.5, 13.75, 13.125, 13.4375, 13.28125, 13.359375
            ]
        );
        // The peak is the last lower bound, the 9th pass (index 8).
        assert_eq!(
            steps.last(),
            Some(&PeakStep::Done {
                pass: 8,
                lines: vec![message(
                    "FindPeakPerformance: Found peak performance field: 13.359375"
                )],
                error: None,
            })
        );
        assert_eq!(
            steps[0],
            PeakStep::Run {
                target_qps: 10.0,
                lines: vec![
                    message(
                        "FindPeakPerformance: Check validity of the base settings field: 10.000000"
                    ),
                    PeakLine::LoadSet,
                ],
            }
        );
        assert_eq!(
            steps[1],
            PeakStep::Run {
                target_qps: 20.0,
                lines: vec![
                    message("FindBoundaries: Checking fields [10.000000, 20.000000)"),
                    PeakLine::LoadSet,
                ],
            }
        );
        assert_eq!(
            steps[2],
            PeakStep::Run {
                target_qps: 15.0,
                lines: vec![
                    message("FindPeakPerformance: Found boundaries: [10.000000, 20.000000)"),
                    PeakLine::LoadSet,
                    message(
                        "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [10.000000, \
                         20.000000): 15.000000"
                    ),
                ],
            }
        );
        assert_eq!(
            steps[3],
            PeakStep::Run {
                target_qps: 12.5,
                lines: vec![message(
                    "FindPeakPerformanceBinarySearch: Testing the mid value of bounds [10.000000, 15.000000): \
                     12.500000"
                )],
            }
        );
    }

    #[test]
    fn widening_goes_on_while_every_upper_bound_meets_the_constraints() {
        // 1 → 2 → 4 → 8 met, 16 failed: [8, 16), then 12 met, 14 failed, 13 met, 13.5 failed, 13.25 met,
        // 13.375 failed ([13.25, 13.375): ⌊132.5⌋ + 1 = 133 ≥ ⌊133.75⌋ = 133, done at 13.25).
        let steps = search(1.0, 13.3);
        assert_eq!(
            tested(&steps),
            [
                1.0, 2.0, 4.0, 8.0, 16.0, 12.0, 14.0, 13.0, 13.5, 13.25, 13.375
            ]
        );
        assert!(matches!(
            steps.last(),
            Some(PeakStep::Done {
                pass: 9,
                error: None,
                ..
            })
        ));
    }

    #[test]
    fn a_lower_bound_that_fails_ends_the_search_with_loadgens_error() {
        let steps = search(10.0, 5.0);
        assert_eq!(tested(&steps), [10.0]);
        assert_eq!(
            steps.last(),
            Some(&PeakStep::Done {
                pass: 0,
                lines: Vec::new(),
                error: Some(
                    "FindPeakPerformance: Initial lower bound does not satisfy performance constraints, msg: \
                     TTFT constrain not met: Reduce target QPS to improve latency."
                        .to_owned()
                ),
            })
        );
    }

    #[test]
    fn bounds_already_a_tenth_apart_end_the_search_after_the_set_loads() {
        // 0.06 met, 0.12 failed: ⌊0.6⌋ + 1 = 1 ≥ ⌊1.2⌋ = 1, so no mid value is tested.
        let steps = search(0.06, 0.1);
        assert_eq!(tested(&steps), [0.06, 0.12]);
        assert_eq!(
            steps.last(),
            Some(&PeakStep::Done {
                pass: 0,
                lines: vec![
                    message("FindPeakPerformance: Found boundaries: [0.060000, 0.120000)"),
                    PeakLine::LoadSet,
                    message("FindPeakPerformance: Found peak performance field: 0.060000"),
                ],
                error: None,
            })
        );
    }
}
