//! guidellm's over-saturation detector (`scheduler/constraints/saturation.py`, vllm-project/guidellm ee7a774):
//! the `over_saturation` constraint. Pure: the engine feeds it each request's start (guidellm's `in_progress`
//! update, with the number of requests then in flight, this one included), its first token (the `first_token`
//! update; a non-streamed answer reports its TTFT when it completes) and its end, each at its time in seconds since
//! the stage started, and after every event asks whether the stage is over-saturated.
//!
//! The algorithm, as guidellm writes it:
//!
//! - Two online least-squares fits ([`SlopeChecker`]): in-flight count against time (one point per start) and
//!   TTFT against time (one point per first token). A TTFT above `minimum_ttft` is a violation.
//! - After every event the windows are pruned from the oldest point: to `int(total_ever × maximum_window_ratio)`
//!   points, then to points at most `max_window_seconds` old.
//! - Over-saturated when the stage has run `min_seconds` (and `minimum_ttft` seconds, a check guidellm makes on
//!   the same clock), at least half the TTFT window are violations, the in-flight window's effective size
//!   `min(elapsed seconds, points)` reaches `minimum_window_size`, and its slope is positive with a margin of
//!   error (`t · SE / slope`, `t` from [`approx_t_ppf`] at `confidence`, `n − 2` degrees of freedom with the
//!   effective `n`) below `moe_threshold`; when the TTFT window also reaches `minimum_window_size`, its slope
//!   must pass the same test.
//!
//! `enforce` stops issuing and cancels what is in flight (`stop_all`), for the stage (`stopping_scope: current`)
//! or the run (`all`); `monitor` only reports.

use super::error::WorkloadError;
use super::model::StopScope;
use super::reader::{At, Ctx, MapReader};
use super::yaml::Value;

/// `OverSaturationConstraintArgs`, with guidellm's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverSaturation {
    /// `mode: enforce` (stop) or `monitor` (report only).
    pub enforce: bool,
    pub min_seconds: f64,
    pub max_window_seconds: f64,
    pub moe_threshold: f64,
    pub minimum_ttft: f64,
    pub maximum_window_ratio: f64,
    pub minimum_window_size: u64,
    pub confidence: f64,
    pub scope: StopScope,
    /// guidellm before 0.7 (the flat format's `over_saturation` dict) took a request's TTFT only when it
    /// completed; 0.7 and later take it at its first token.
    pub ttft_at_completion: bool,
}

impl Default for OverSaturation {
    fn default() -> Self {
        OverSaturation {
            enforce: true,
            min_seconds: 30.0,
            max_window_seconds: 120.0,
            moe_threshold: 2.0,
            minimum_ttft: 2.5,
            maximum_window_ratio: 0.75,
            minimum_window_size: 5,
            confidence: 0.95,
            scope: StopScope::Stage,
            ttft_at_completion: false,
        }
    }
}

/// guidellm's `eps` for the slope fits.
const EPS: f64 = 1e-12;

/// `approx_t_ppf`: the t-distribution's quantile at `p` with `df` degrees of freedom, from the normal quantile
/// (Abramowitz & Stegun 26.2.23) and two Cornish-Fisher terms; NaN for `df ≤ 0`.
pub fn approx_t_ppf(p: f64, df: f64) -> f64 {
    if df <= 0.0 {
        return f64::NAN;
    }
    let c = [2.515517, 0.802853, 0.010328];
    let d = [1.432788, 0.189269, 0.001308];
    let z = if p < 0.5 {
        let t = (-2.0 * p.ln()).sqrt();
        -(t - ((c[2] * t + c[1]) * t + c[0]) / (((d[2] * t + d[1]) * t + d[0]) * t + 1.0))
    } else {
        let t = (-2.0 * (1.0 - p).ln()).sqrt();
        t - ((c[2] * t + c[1]) * t + c[0]) / (((d[2] * t + d[1]) * t + d[0]) * t + 1.0)
    };
    let z2 = z * z;
    let z3 = z2 * z;
    let z4 = z3 * z;
    let g1 = (z3 + z) / 4.0;
    let g2 = (5.0 * z4 + 16.0 * z3 + 3.0 * z2) / 96.0;
    z + g1 / df + g2 / (df * df)
}

/// guidellm's `SlopeChecker`: running sums of a least-squares line, points added and removed in O(1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlopeChecker {
    pub n: u64,
    sum_x: f64,
    sum_y: f64,
    sum_xy: f64,
    sum_x2: f64,
    sum_y2: f64,
    /// The last fit's slope and margin of error (`None` until a fit was made).
    pub slope: Option<f64>,
    pub margin_of_error: Option<f64>,
}

impl SlopeChecker {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        self.sum_x += x;
        self.sum_y += y;
        self.sum_xy += x * y;
        self.sum_x2 += x * x;
        self.sum_y2 += y * y;
    }

    fn remove(&mut self, x: f64, y: f64) {
        self.n -= 1;
        self.sum_x -= x;
        self.sum_y -= y;
        self.sum_xy -= x * y;
        self.sum_x2 -= x * x;
        self.sum_y2 -= y * y;
    }

    /// `check_slope`: whether the fit's slope is positive with a margin of error below `moe_threshold`, judged
    /// with `effective_n` points (fewer than 3: never).
    pub fn check_slope(&mut self, effective_n: f64, moe_threshold: f64, confidence: f64) -> bool {
        if effective_n < 3.0 {
            return false;
        }
        let n = self.n as f64;
        let centered_xx = self.sum_x2 - self.sum_x * self.sum_x / n;
        let centered_xy = self.sum_xy - self.sum_x * self.sum_y / n;
        let centered_yy = self.sum_y2 - self.sum_y * self.sum_y / n;
        let xx = centered_xx.max(EPS);
        let slope = centered_xy / xx;
        let rss = (centered_yy - centered_xy * centered_xy / xx).max(0.0);
        let dof = effective_n - 2.0;
        let standard_error = (rss / dof / xx).sqrt();
        let t_crit = approx_t_ppf(1.0 - (1.0 - confidence) / 2.0, dof);
        let margin_of_error = t_crit * standard_error / slope.max(EPS);
        self.slope = Some(slope);
        self.margin_of_error = Some(margin_of_error);
        slope > 0.0 && margin_of_error < moe_threshold
    }
}

/// What the detector last concluded, as guidellm's constraint metadata has it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub over_saturated: bool,
    pub ttft_slope: Option<f64>,
    pub ttft_slope_moe: Option<f64>,
    pub ttft_n: u64,
    pub ttft_violations: u64,
    pub concurrent_slope: Option<f64>,
    pub concurrent_slope_moe: Option<f64>,
    pub concurrent_n: u64,
}

/// `OverSaturationConstraint`'s state for one stage (guidellm makes a new one per benchmark).
#[derive(Debug, Clone)]
pub struct Detector {
    config: OverSaturation,
    duration: f64,
    /// (time, in-flight count) of each start in the window, oldest first.
    started: std::collections::VecDeque<(f64, f64)>,
    /// (time, TTFT) of each first token in the window, oldest first.
    finished: std::collections::VecDeque<(f64, f64)>,
    ttft_violations: u64,
    total_started: u64,
    total_finished: u64,
    concurrent: SlopeChecker,
    ttft: SlopeChecker,
}

impl Detector {
    pub fn new(config: OverSaturation) -> Self {
        Detector {
            config,
            duration: 0.0,
            started: Default::default(),
            finished: Default::default(),
            ttft_violations: 0,
            total_started: 0,
            total_finished: 0,
            concurrent: SlopeChecker::default(),
            ttft: SlopeChecker::default(),
        }
    }

    pub fn config(&self) -> &OverSaturation {
        &self.config
    }

    /// A request started `at` seconds into the stage with `in_flight` requests (itself included) in flight.
    pub fn started(&mut self, at: f64, in_flight: u64) -> Verdict {
        self.total_started += 1;
        self.started.push_back((at, in_flight as f64));
        self.concurrent.add(at, in_flight as f64);
        self.evaluate(at)
    }

    /// A request's first token arrived `at` seconds into the stage, `ttft` seconds after it was sent.
    pub fn first_token(&mut self, at: f64, ttft: f64) -> Verdict {
        self.total_finished += 1;
        self.finished.push_back((at, ttft));
        if ttft > self.config.minimum_ttft {
            self.ttft_violations += 1;
        }
        self.ttft.add(at, ttft);
        self.evaluate(at)
    }

    /// Any other update (a request ended) `at` seconds into the stage: the windows age, the test is made again.
    pub fn tick(&mut self, at: f64) -> Verdict {
        self.evaluate(at)
    }

    fn evaluate(&mut self, at: f64) -> Verdict {
        self.prune(at);
        let over_saturated = self.check_alert();
        Verdict {
            over_saturated,
            ttft_slope: self.ttft.slope,
            ttft_slope_moe: self.ttft.margin_of_error,
            ttft_n: self.ttft.n,
            ttft_violations: self.ttft_violations,
            concurrent_slope: self.concurrent.slope,
            concurrent_slope_moe: self.concurrent.margin_of_error,
            concurrent_n: self.concurrent.n,
        }
    }

    /// `_update_duration`: the windows cut to their ratio of everything seen, then to their age.
    fn prune(&mut self, duration: f64) {
        self.duration = duration;
        let ratio = self.config.maximum_window_ratio;
        let max_window = self.config.max_window_seconds;
        // Python's `int()` truncates.
        let finished_cap = (self.total_finished as f64 * ratio) as usize;
        while self.finished.len() > finished_cap {
            self.drop_oldest_finished();
        }
        while self
            .finished
            .front()
            .is_some_and(|(t, _)| duration - t > max_window)
        {
            self.drop_oldest_finished();
        }
        let started_cap = (self.total_started as f64 * ratio) as usize;
        while self.started.len() > started_cap {
            self.drop_oldest_started();
        }
        while self
            .started
            .front()
            .is_some_and(|(t, _)| duration - t > max_window)
        {
            self.drop_oldest_started();
        }
    }

    fn drop_oldest_finished(&mut self) {
        if let Some((t, ttft)) = self.finished.pop_front() {
            if ttft > self.config.minimum_ttft {
                self.ttft_violations -= 1;
            }
            self.ttft.remove(t, ttft);
        }
    }

    fn drop_oldest_started(&mut self) {
        if let Some((t, c)) = self.started.pop_front() {
            self.concurrent.remove(t, c);
        }
    }

    /// `_check_alert`.
    fn check_alert(&mut self) -> bool {
        let c = self.config;
        // guidellm caps the sample size at the elapsed seconds: requests of one second are correlated.
        let concurrent_n = self.duration.min(self.concurrent.n as f64);
        let ttft_n = self.duration.min(self.ttft.n as f64);
        if self.duration < c.min_seconds
            || self.ttft.n > self.ttft_violations * 2
            || self.duration < c.minimum_ttft
            || concurrent_n < c.minimum_window_size as f64
        {
            return false;
        }
        let concurrent_rising =
            self.concurrent
                .check_slope(concurrent_n, c.moe_threshold, c.confidence);
        if ttft_n < c.minimum_window_size as f64 {
            return concurrent_rising;
        }
        let ttft_rising = self.ttft.check_slope(ttft_n, c.moe_threshold, c.confidence);
        concurrent_rising && ttft_rising
    }
}

/// A guidellm `over_saturation` constraint's arguments (`OverSaturationConstraintArgs`): each bound as pydantic
/// checks it (`ge=0`; the ratio and the confidence at most 1); `stopping_scope` is read by the caller.
pub(crate) fn parse_args(
    ctx: &mut Ctx,
    c: &mut MapReader<'_>,
    scope: StopScope,
) -> Result<OverSaturation, WorkloadError> {
    let mut o = OverSaturation {
        scope,
        ..OverSaturation::default()
    };
    if let Some(f) = c.get("mode") {
        read_mode(ctx, &f, &mut o)?;
    }
    read_bounds(ctx, c, &mut o)?;
    Ok(o)
}

/// The flat format's `over_saturation` (guidellm 0.5–0.6 `BenchmarkGenerativeTextArgs.over_saturation`, its
/// `OverSaturationConstraintInitializer`): a map (or its JSON text) of `enabled` (true: stop; false: report only)
/// and the same bounds (the caller turns the command line's JSON text into a map); `null` is off. That version
/// reported a request's TTFT when it completed.
pub(crate) fn parse_flat(
    ctx: &mut Ctx,
    f: &At<'_>,
) -> Result<Option<OverSaturation>, WorkloadError> {
    if matches!(f.node.value, Value::Null) {
        return Ok(None);
    }
    let mut m = f.map(ctx)?;
    let mut o = OverSaturation {
        ttft_at_completion: true,
        ..OverSaturation::default()
    };
    if let Some(e) = m.get("enabled") {
        o.enforce = e.bool(ctx)?;
    }
    read_bounds(ctx, &mut m, &mut o)?;
    m.finish(ctx, &[]);
    Ok(Some(o))
}

fn read_mode(ctx: &Ctx, f: &At<'_>, o: &mut OverSaturation) -> Result<(), WorkloadError> {
    {
        o.enforce = match f.str(ctx)? {
            "enforce" => true,
            "monitor" => false,
            other => {
                return Err(f.invalid(
                    ctx,
                    format!("unknown mode `{other}`; expected enforce or monitor"),
                ));
            }
        };
    }
    Ok(())
}

/// The bounds both forms take, each checked as pydantic checks it.
fn read_bounds(
    ctx: &mut Ctx,
    c: &mut MapReader<'_>,
    o: &mut OverSaturation,
) -> Result<(), WorkloadError> {
    for (key, slot) in [
        ("min_seconds", &mut o.min_seconds),
        ("max_window_seconds", &mut o.max_window_seconds),
        ("moe_threshold", &mut o.moe_threshold),
        ("minimum_ttft", &mut o.minimum_ttft),
    ] {
        if let Some(f) = c.get(key) {
            *slot = f.non_negative_f64(ctx)?;
        }
    }
    for (key, slot) in [
        ("maximum_window_ratio", &mut o.maximum_window_ratio),
        ("confidence", &mut o.confidence),
    ] {
        if let Some(f) = c.get(key) {
            let v = f.non_negative_f64(ctx)?;
            if v > 1.0 {
                return Err(f.invalid(ctx, format!("`{key}` is a fraction in [0, 1], found {v}")));
            }
            *slot = v;
        }
    }
    if let Some(f) = c.get("minimum_window_size") {
        o.minimum_window_size = f.u64(ctx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thresholds that let a handful of points decide: no minimum duration, every point kept.
    fn small() -> OverSaturation {
        OverSaturation {
            min_seconds: 0.0,
            minimum_ttft: 0.5,
            maximum_window_ratio: 1.0,
            minimum_window_size: 3,
            ..OverSaturation::default()
        }
    }

    #[test]
    fn t_quantile_is_guidellms_approximation_not_the_exact_one() {
        // By hand from `approx_t_ppf`: p = 0.975 gives t = sqrt(−2 ln 0.025) = 2.716206, z = 2.716206 −
        // 4.772468 / 6.314347 = 1.960390; df = 3 adds g1/3 = 2.373606/3 and g2/9 = 2.145022/9: 2.98993 (the exact
        // quantile is 3.182). For p = 0.025, z = −1.960390 and g2 = −0.366322: −2.79230, not −2.98993.
        assert!((approx_t_ppf(0.975, 3.0) - 2.98993).abs() < 1e-4);
        assert!((approx_t_ppf(0.025, 3.0) + 2.79230).abs() < 1e-4);
        assert!(approx_t_ppf(0.975, 0.0).is_nan());
    }

    #[test]
    fn rising_in_flight_count_alone_is_over_saturation_before_any_first_token() {
        let mut d = Detector::new(small());
        // Effective n = min(elapsed, points): 1 and 2 are below the window size of 3.
        assert!(!d.started(1.0, 1).over_saturated);
        assert!(!d.started(2.0, 2).over_saturated);
        // Three points on a line: slope 1, no residual, a margin of error of 0; no TTFT point to contradict it.
        let v = d.started(3.0, 3);
        assert!(v.over_saturated);
        assert_eq!(v.concurrent_slope, Some(1.0));
        assert_eq!(v.concurrent_slope_moe, Some(0.0));
        assert_eq!((v.concurrent_n, v.ttft_n), (3, 0));
    }

    #[test]
    fn the_window_ratio_truncates_so_the_default_keeps_three_of_four_points() {
        let config = OverSaturation {
            maximum_window_ratio: 0.75,
            ..small()
        };
        let mut d = Detector::new(config);
        d.started(1.0, 1);
        d.started(2.0, 2);
        // int(3 × 0.75) = 2 points kept: too few.
        let third = d.started(3.0, 3);
        assert!(!third.over_saturated);
        assert_eq!(third.concurrent_n, 2);
        // int(4 × 0.75) = 3: (2, 2), (3, 3), (4, 4).
        let fourth = d.started(4.0, 4);
        assert!(fourth.over_saturated);
        assert_eq!(fourth.concurrent_n, 3);
    }

    #[test]
    fn the_margin_of_error_is_t_times_the_standard_error_over_the_slope() {
        // (1, 1), (2, 3), (3, 2), (4, 4): Sxx = 5, Sxy = 4, Syy = 5, slope 0.8, RSS = 5 − 16/5 = 1.8, two degrees
        // of freedom, SE = sqrt(1.8 / 2 / 5) = 0.424264, t = approx_t_ppf(0.975, 2) = 3.683465: MOE = 1.953452.
        let feed = |threshold: f64| {
            let mut d = Detector::new(OverSaturation {
                moe_threshold: threshold,
                ..small()
            });
            d.started(1.0, 1);
            d.started(2.0, 3);
            d.started(3.0, 2);
            d.started(4.0, 4)
        };
        let passes = feed(2.0);
        assert!(passes.over_saturated);
        assert!((passes.concurrent_slope.unwrap() - 0.8).abs() < 1e-12);
        assert!((passes.concurrent_slope_moe.unwrap() - 1.953452).abs() < 1e-5);
        assert!(!feed(1.95).over_saturated);
    }

    #[test]
    fn ttft_under_the_minimum_for_half_the_window_holds_the_alert_off() {
        let mut d = Detector::new(small());
        d.started(1.0, 1);
        d.started(2.0, 2);
        // One TTFT point, no violation: 1 > 2 × 0.
        d.first_token(2.5, 0.1);
        let v = d.started(3.0, 3);
        assert!(!v.over_saturated);
        assert_eq!((v.ttft_n, v.ttft_violations), (1, 0));
        // A violation makes it 1 of 2: not more than twice the violations, so the slopes decide again.
        d.first_token(3.2, 0.9);
        assert!(d.started(4.0, 4).over_saturated);
    }

    #[test]
    fn a_falling_ttft_overrules_a_rising_in_flight_count_once_its_window_is_full() {
        let mut d = Detector::new(small());
        d.started(1.0, 1);
        d.first_token(1.5, 3.0);
        d.started(2.0, 2);
        d.first_token(2.5, 2.0);
        // Effective n = min(2.8, 2) for the starts: too few.
        assert!(!d.first_token(2.8, 1.0).over_saturated);
        // Starts rise; TTFTs (1.5, 3), (2.5, 2), (2.8, 1) fall: slope −1.3 / 0.926667 = −1.402878.
        let v = d.started(3.0, 3);
        assert!(!v.over_saturated);
        assert!((v.ttft_slope.unwrap() + 1.402878).abs() < 1e-6);
        assert_eq!(v.concurrent_slope, Some(1.0));
    }

    #[test]
    fn points_older_than_the_window_leave_it() {
        let mut d = Detector::new(OverSaturation {
            max_window_seconds: 10.0,
            ..small()
        });
        d.started(1.0, 1);
        d.started(2.0, 2);
        d.started(3.0, 3);
        // 12.5 − 1 and 12.5 − 2 exceed 10 s; 12.5 − 3 does not.
        assert_eq!(d.tick(12.5).concurrent_n, 1);
    }

    #[test]
    fn nothing_is_judged_before_min_seconds() {
        let mut d = Detector::new(OverSaturation {
            min_seconds: 30.0,
            ..small()
        });
        for i in 1..=29 {
            assert!(!d.started(f64::from(i), u64::from(i as u32)).over_saturated);
        }
        assert!(d.started(30.0, 30).over_saturated);
    }
}
