//! guidellm's distribution summaries (`guidellm/schemas/statistics.py`), which differ from numpy's in three
//! ways: values carry weights (ITL is weighted by `output_tokens − 1`, TPOT by `output_tokens`), percentiles
//! are read off the weighted CDF without interpolation (the first value whose cumulative probability reaches
//! p), and the variance is the weighted population variance. Rates and concurrency are distributions over
//! time built from event timestamps.

use serde::{Deserialize, Serialize};

use super::radix::stable_sort_by_f64_key;

/// guidellm's `DistributionSummary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuidellmDistribution {
    pub mean: f64,
    pub median: f64,
    pub mode: f64,
    pub variance: f64,
    pub std_dev: f64,
    pub min: f64,
    pub max: f64,
    pub count: u64,
    pub total_sum: f64,
    pub percentiles: GuidellmPercentiles,
}

/// guidellm's `Percentiles`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct GuidellmPercentiles {
    pub p001: f64,
    pub p01: f64,
    pub p05: f64,
    pub p10: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
}

/// guidellm merges event times closer than this (seconds) before computing rates and concurrency.
pub(crate) const GUIDELLM_MERGE_THRESHOLD_S: f64 = 1e-4;
const EPSILON: f64 = 1e-6;

impl GuidellmDistribution {
    /// The all-zero summary guidellm writes for an empty sample.
    pub fn empty(count: u64) -> Self {
        GuidellmDistribution {
            mean: 0.0,
            median: 0.0,
            mode: 0.0,
            variance: 0.0,
            std_dev: 0.0,
            min: 0.0,
            max: 0.0,
            count,
            total_sum: 0.0,
            percentiles: GuidellmPercentiles::default(),
        }
    }

    /// `DistributionSummary.from_values` of unweighted values.
    pub fn from_values(values: &[f64]) -> Self {
        let weighted: Vec<(f64, f64)> = values.iter().map(|&v| (v, 1.0)).collect();
        Self::from_weighted(&weighted, None)
    }

    /// `DistributionSummary.from_values` of `(value, weight)` pairs. `count` defaults to the rounded sum of the
    /// weights. Duplicate values are merged, zero weights dropped; if the kept weights sum to (almost)
    /// nothing, the kept values count equally.
    pub fn from_weighted(values: &[(f64, f64)], count: Option<u64>) -> Self {
        if values.is_empty() {
            return Self::empty(0);
        }
        let count = count.unwrap_or_else(|| values.iter().map(|v| v.1).sum::<f64>().round() as u64);
        let mut sorted = values.to_vec();
        // Stable: equal values' weights are summed in the order given.
        stable_sort_by_f64_key(&mut sorted, |e| e.0);
        let mut pdf: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
        let mut merge = PdfMerge::default();
        for (value, weight) in sorted {
            merge.push(value, weight, &mut |v, w| pdf.push((v, w)));
        }
        merge.finish(&mut |v, w| pdf.push((v, w)));
        infallible(Self::from_merged_pdf(count, |f| {
            pdf.iter().for_each(|&(v, w)| f(v, w));
            Ok(())
        }))
    }

    /// The summary of a pdf as [`PdfMerge`] gives it — finite values ascending, each once, with its summed
    /// weight — that `pass` hands over (as many times as called: three). Zero weights are dropped; the others are
    /// normalised by their sum, or, if that is (almost) nothing, count equally (guidellm's `from_values`, then
    /// `from_pdf`). Each sum is taken in ascending order of value, as the in-memory arrays are summed, so a pdf
    /// streamed from disk gives the same bits.
    pub fn from_merged_pdf<E>(
        count: u64,
        mut pass: impl FnMut(&mut dyn FnMut(f64, f64)) -> Result<(), E>,
    ) -> Result<Self, E> {
        // `Iterator::sum` of floats starts at −0.0; so do these.
        let mut total = -0.0;
        let mut kept = 0u64;
        pass(&mut |_, w| {
            if w > 0.0 {
                total += w;
                kept += 1;
            }
        })?;
        // guidellm falls back to a uniform distribution over the values it kept, those with positive weight.
        let uniform = total <= EPSILON;
        if uniform {
            total = kept as f64;
        }
        if kept == 0 {
            return Ok(Self::empty(count));
        }
        let probability = |w: f64| if uniform { 1.0 } else { w } / total;
        let mut mean = -0.0;
        // np.argmax takes the first maximum.
        let mut mode = (f64::NAN, f64::NEG_INFINITY);
        let (mut min, mut max) = (f64::NAN, f64::NAN);
        // np.searchsorted(cdf, q, side="left"): the first value whose cumulative probability reaches q; the last
        // value where rounding leaves every one short.
        let mut cdf = 0.0;
        let mut percentiles = [f64::NAN; PERCENTILES.len()];
        let mut reached = 0;
        pass(&mut |v, w| {
            if w <= 0.0 {
                return;
            }
            let p = probability(w);
            mean += v * p;
            if p > mode.1 {
                mode = (v, p);
            }
            if min.is_nan() {
                min = v;
            }
            max = v;
            cdf += p;
            while reached < PERCENTILES.len() && cdf >= PERCENTILES[reached] {
                percentiles[reached] = v;
                reached += 1;
            }
        })?;
        percentiles[reached..].fill(max);
        let mut variance = -0.0;
        pass(&mut |v, w| {
            if w > 0.0 {
                variance += (v - mean).powi(2) * probability(w);
            }
        })?;
        let [p001, p01, p05, p10, p25, p50, p75, p90, p95, p99, p999] = percentiles;
        Ok(GuidellmDistribution {
            mean,
            median: p50,
            mode: mode.0,
            variance,
            std_dev: variance.sqrt(),
            min,
            max,
            count,
            total_sum: mean * count as f64,
            percentiles: GuidellmPercentiles {
                p001,
                p01,
                p05,
                p10,
                p25,
                p50,
                p75,
                p90,
                p95,
                p99,
                p999,
            },
        })
    }

    /// `rate_distribution_from_timings`: events at times (seconds) with weights (1 per request, or a token
    /// count), optionally clipped to `[start, end]`. Each event's rate is its weight over the time it
    /// represents (half the span to each neighbour), and those rates are weighted by that time.
    pub fn rate_from_timings(events: &[(f64, f64)], start: Option<f64>, end: Option<f64>) -> Self {
        let mut times: Vec<(f64, f64)> = events
            .iter()
            .copied()
            .filter(|e| start.is_none_or(|s| e.0 >= s) && end.is_none_or(|t| e.0 <= t))
            .collect();
        if let Some(s) = start {
            times.push((s, 0.0));
        }
        if let Some(t) = end {
            times.push((t, 0.0));
        }
        stable_sort_by_f64_key(&mut times, |e| e.0);
        Self::rate_from_sorted_timings(times)
    }

    /// [`rate_from_timings`](Self::rate_from_timings) of events already in time order, unclipped. Events at
    /// the same time may come in any order when every weight is a whole number (a count of requests or tokens):
    /// equal times fall in the same run of close times ([`CloseTimes`]), whose weights are summed, and whole
    /// numbers' sums (below 2⁵³) are exact in any order, so the rates come out the same bits as from the stable
    /// sort.
    pub fn rate_from_sorted_timings(events: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut rates: Vec<(f64, f64)> = Vec::new();
        let mut steps = RateSteps::default();
        let mut close = CloseTimes::default();
        for (t, w) in events {
            close.push(t, w, &mut |t, w| {
                steps.push(t, w, &mut |r, d| rates.push((r, d)))
            });
        }
        close.finish(&mut |t, w| steps.push(t, w, &mut |r, d| rates.push((r, d))));
        match steps.finish(&mut |r, d| rates.push((r, d))) {
            // guidellm's `from_values([], count=…)` returns before it reads `count`: the summary counts 0.
            None => Self::empty(0),
            Some(count) => Self::from_weighted(&rates, Some(count)),
        }
    }

    /// `concurrency_distribution_from_timings`: intervals (start, end) in seconds; the number in flight over
    /// time, each level weighted by how long it held.
    pub fn concurrency_from_intervals(intervals: &[(f64, f64)]) -> Self {
        let mut changes: Vec<(f64, f64)> = intervals
            .iter()
            .flat_map(|&(s, e)| [(s, 1.0), (e, -1.0)])
            .collect();
        stable_sort_by_f64_key(&mut changes, |e| e.0);
        let mut levels = ConcurrencyLevels::default();
        let mut close = CloseTimes::default();
        for (t, w) in changes {
            close.push(t, w, &mut |t, w| levels.push(t, w));
        }
        close.finish(&mut |t, w| levels.push(t, w));
        levels.finish(intervals.len() as u64)
    }
}

/// guidellm's percentiles, as fractions, in the order of [`GuidellmPercentiles`]' fields.
const PERCENTILES: [f64; 11] = [
    0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999,
];

fn infallible<T>(result: Result<T, std::convert::Infallible>) -> T {
    match result {
        Ok(value) => value,
        Err(never) => match never {},
    }
}

/// Two streams of `(time, weight)` events, each in time order, as one in time order; on equal times `a`'s come
/// first. What [`GuidellmDistribution::rate_from_sorted_timings`] takes, when its weights are whole numbers.
pub fn merge_by_time(
    a: impl IntoIterator<Item = (f64, f64)>,
    b: impl IntoIterator<Item = (f64, f64)>,
) -> impl Iterator<Item = (f64, f64)> {
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y.0.total_cmp(&x.0).is_lt() => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

/// Builds a pdf from `(value, weight)` pairs sorted by value: non-finite values dropped, equal values merged
/// into one with their weights summed in the order given (guidellm's `np.unique` and `np.add.at`).
#[derive(Debug, Default)]
pub struct PdfMerge {
    last: Option<(f64, f64)>,
}

impl PdfMerge {
    pub fn push(&mut self, value: f64, weight: f64, out: &mut impl FnMut(f64, f64)) {
        if !value.is_finite() {
            return;
        }
        match &mut self.last {
            Some(last) if last.0 == value => last.1 += weight,
            _ => {
                if let Some((v, w)) = self.last.replace((value, weight)) {
                    out(v, w);
                }
            }
        }
    }

    pub fn finish(self, out: &mut impl FnMut(f64, f64)) {
        if let Some((v, w)) = self.last {
            out(v, w);
        }
    }
}

/// Merges time-ordered `(time, weight)` events as guidellm's `_merge_sorted_times_with_weights` does: each run of
/// times within [`GUIDELLM_MERGE_THRESHOLD_S`] of the run's first becomes that first time, with the run's
/// weights summed.
#[derive(Debug, Default)]
pub struct CloseTimes {
    last: Option<(f64, f64)>,
}

impl CloseTimes {
    pub fn push(&mut self, t: f64, w: f64, out: &mut impl FnMut(f64, f64)) {
        match &mut self.last {
            Some(last) if t - last.0 <= GUIDELLM_MERGE_THRESHOLD_S => last.1 += w,
            _ => {
                if let Some((t, w)) = self.last.replace((t, w)) {
                    out(t, w);
                }
            }
        }
    }

    pub fn finish(self, out: &mut impl FnMut(f64, f64)) {
        if let Some((t, w)) = self.last {
            out(t, w);
        }
    }
}

/// `rate_distribution_from_timings` over merged times, one at a time: each time's rate (its weight over the span
/// it stands for, from the midpoint before it to the midpoint after it) and that span, in time order, handed on
/// one time late.
#[derive(Debug, Default)]
pub struct RateSteps {
    times: u64,
    /// The time before, and its weight.
    previous: Option<(f64, f64)>,
    /// The midpoint before the previous time (none while it is the first).
    midpoint: Option<f64>,
    occurrences: f64,
}

impl RateSteps {
    pub fn push(&mut self, t: f64, w: f64, out: &mut impl FnMut(f64, f64)) {
        if self.times == 0 {
            self.occurrences = -0.0;
        }
        self.times += 1;
        self.occurrences += w;
        if let Some((before, occurrences)) = self.previous {
            let midpoint = (before + t) / 2.0;
            let duration = midpoint - self.midpoint.unwrap_or(before);
            out(rate(occurrences, duration), duration);
            self.midpoint = Some(midpoint);
        }
        self.previous = Some((t, w));
    }

    /// Hands on the last time's rate; returns the events' count (their weights' rounded sum), or none when
    /// fewer than two times were given (no rate).
    pub fn finish(self, out: &mut impl FnMut(f64, f64)) -> Option<u64> {
        let (Some((last, occurrences)), Some(midpoint)) = (self.previous, self.midpoint) else {
            return None;
        };
        let duration = (last - midpoint).max(EPSILON);
        out(rate(occurrences, duration), duration);
        Some(self.occurrences.round() as u64)
    }
}

fn rate(occurrences: f64, duration: f64) -> f64 {
    if duration > 0.0 {
        occurrences / duration
    } else {
        0.0
    }
}

/// `concurrency_distribution_from_timings` over merged changes (+1 at a start, −1 at an end), one at a time:
/// each level held and for how long, summed per level in time order (what sorting by level and merging equal
/// levels does); the levels are few (at most the peak in flight).
#[derive(Debug, Default)]
pub struct ConcurrencyLevels {
    changes: u64,
    first: Option<(f64, f64)>,
    previous: Option<(f64, f64)>,
    level: f64,
    held: std::collections::BTreeMap<u64, (f64, f64)>,
    any_held: bool,
}

impl ConcurrencyLevels {
    pub fn push(&mut self, t: f64, w: f64) {
        self.changes += 1;
        self.first.get_or_insert((t, w));
        if let Some((before, change)) = self.previous {
            self.level += change;
            let level = f64::max(self.level, 0.0);
            let duration = (t - before).max(0.0);
            self.any_held |= duration > 0.0;
            self.held
                .entry(super::spill::f64_key(level))
                .and_modify(|held| held.1 += duration)
                .or_insert((level, duration));
        }
        self.previous = Some((t, w));
    }

    /// The distribution of `intervals` requests' concurrency.
    pub fn finish(self, intervals: u64) -> GuidellmDistribution {
        if self.changes <= 1 {
            return match self.first {
                Some((_, level)) if intervals > 0 => {
                    GuidellmDistribution::from_values(&[level.max(0.0)])
                }
                _ => GuidellmDistribution::empty(0),
            };
        }
        if !self.any_held {
            return GuidellmDistribution::empty(intervals);
        }
        infallible(GuidellmDistribution::from_merged_pdf(intervals, |f| {
            self.held.values().for_each(|&(v, w)| f(v, w));
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn percentiles_take_the_first_value_reaching_the_cdf_without_interpolating() {
        // [1, 2, 3, 4], each 0.25: CDF 0.25, 0.5, 0.75, 1. p50 → first CDF ≥ 0.5 → 2 (numpy says 2.5);
        // p90 → 4; p25 → 1; p001 → 1.
        let d = GuidellmDistribution::from_values(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(d.percentiles.p50, 2.0);
        assert_eq!(d.median, 2.0);
        assert_eq!(d.percentiles.p90, 4.0);
        assert_eq!(d.percentiles.p25, 1.0);
        assert_eq!(d.percentiles.p001, 1.0);
        // Population variance: squares 2.25 + 0.25 + 0.25 + 2.25 = 5, over 4 = 1.25.
        assert_eq!(d.mean, 2.5);
        assert!(close(d.variance, 1.25));
        assert!(close(d.std_dev, 1.25f64.sqrt()));
        assert_eq!((d.min, d.max, d.count, d.total_sum), (1.0, 4.0, 4, 10.0));
    }

    #[test]
    fn weights_shift_the_mean_and_the_percentiles() {
        // ITL of 10 ms over 9 gaps and 40 ms over 1 gap: mean (90 + 40) / 10 = 13; p50 10, p95 40 (CDF 0.9, 1).
        let d = GuidellmDistribution::from_weighted(&[(10.0, 9.0), (40.0, 1.0)], None);
        assert!(close(d.mean, 13.0));
        assert_eq!(
            (d.percentiles.p50, d.percentiles.p90, d.percentiles.p95),
            (10.0, 10.0, 40.0)
        );
        assert_eq!((d.mode, d.count), (10.0, 10));
        // (10 − 13)²·0.9 + (40 − 13)²·0.1 = 8.1 + 72.9 = 81.
        assert!(close(d.variance, 81.0));
    }

    #[test]
    fn an_empty_sample_is_all_zero() {
        let d = GuidellmDistribution::from_values(&[]);
        assert_eq!(d, GuidellmDistribution::empty(0));
    }

    #[test]
    fn near_zero_weights_fall_back_to_equal_weights_over_the_positive_ones_only() {
        // guidellm drops the zero-weight value 100 before it falls back to a uniform pdf over 1 and 3.
        let d =
            GuidellmDistribution::from_weighted(&[(1.0, 1e-9), (3.0, 1e-9), (100.0, 0.0)], Some(3));
        assert!(close(d.mean, 2.0), "{d:?}");
        assert_eq!((d.min, d.max, d.count), (1.0, 3.0, 3));
    }

    #[test]
    fn a_rate_from_a_single_time_counts_nothing_as_guidellm_does() {
        let d = GuidellmDistribution::rate_from_timings(&[(1.0, 1.0)], None, None);
        assert_eq!(d, GuidellmDistribution::empty(0));
    }

    #[test]
    fn rate_weights_each_event_by_the_time_it_stands_for() {
        // Requests end at 1, 2, 3 s inside a window [0, 4]: events (0,0), (1,1), (2,1), (3,1), (4,0).
        // Durations 0.5, 1, 1, 1, 0.5 → rates 0, 1, 1, 1, 0 weighted 0.5, 1, 1, 1, 0.5 (total 4):
        // mean = 3/4 = 0.75; count = 3.
        let events = [(1.0, 1.0), (2.0, 1.0), (3.0, 1.0)];
        let d = GuidellmDistribution::rate_from_timings(&events, Some(0.0), Some(4.0));
        assert!(close(d.mean, 0.75));
        assert_eq!(d.count, 3);
        assert_eq!((d.min, d.max), (0.0, 1.0));
    }

    #[test]
    fn concurrency_is_the_time_weighted_number_in_flight() {
        // [0, 2] and [1, 3]: level 1 for 1 s, 2 for 1 s, 1 for 1 s → mean 4/3, max 2, count 2 intervals.
        let d = GuidellmDistribution::concurrency_from_intervals(&[(0.0, 2.0), (1.0, 3.0)]);
        assert!(close(d.mean, 4.0 / 3.0));
        assert_eq!((d.max, d.min, d.count), (2.0, 1.0, 2));
    }

    #[test]
    fn times_closer_than_the_threshold_merge_into_the_first() {
        let mut merged = Vec::new();
        let mut close = CloseTimes::default();
        for (t, w) in [(1.0, 1.0), (1.00005, 1.0), (1.5, 1.0)] {
            close.push(t, w, &mut |t, w| merged.push((t, w)));
        }
        close.finish(&mut |t, w| merged.push((t, w)));
        assert_eq!(merged, vec![(1.0, 2.0), (1.5, 1.0)]);
    }
}
