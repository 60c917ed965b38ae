//! guidellm's distribution summaries (`guidellm/schemas/statistics.py`), which differ from numpy's in three
//! ways: values carry weights (ITL is weighted by `output_tokens − 1`, TPOT by `output_tokens`), percentiles
//! are read off the weighted CDF without interpolation (the first value whose cumulative probability reaches
//! p), and the variance is the weighted population variance. Rates and concurrency are distributions over
//! time built from event timestamps.

use serde::{Deserialize, Serialize};

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
        let mut sorted: Vec<(f64, f64)> =
            values.iter().copied().filter(|v| v.0.is_finite()).collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut pdf: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
        for (value, weight) in sorted {
            match pdf.last_mut() {
                Some(last) if last.0 == value => last.1 += weight,
                _ => pdf.push((value, weight)),
            }
        }
        let mut nonzero: Vec<(f64, f64)> = pdf.iter().copied().filter(|v| v.1 > 0.0).collect();
        let mut total: f64 = nonzero.iter().map(|v| v.1).sum();
        if total <= EPSILON {
            // guidellm falls back to a uniform distribution over the values it kept, those with positive weight.
            nonzero = nonzero.iter().map(|v| (v.0, 1.0)).collect();
            total = nonzero.len() as f64;
        }
        if nonzero.is_empty() {
            return Self::empty(count);
        }
        for v in &mut nonzero {
            v.1 /= total;
        }
        Self::from_pdf(&nonzero, count)
    }

    /// `DistributionSummary.from_pdf`: `pdf` is (value, probability), values ascending, probabilities summing
    /// to 1.
    fn from_pdf(pdf: &[(f64, f64)], count: u64) -> Self {
        let mean: f64 = pdf.iter().map(|(v, p)| v * p).sum();
        let variance: f64 = pdf.iter().map(|(v, p)| (v - mean).powi(2) * p).sum();
        // np.argmax takes the first maximum.
        let mode = pdf
            .iter()
            .fold((f64::NAN, f64::NEG_INFINITY), |best, &(v, p)| {
                if p > best.1 { (v, p) } else { best }
            })
            .0;
        let percentiles = percentiles_from_pdf(pdf);
        GuidellmDistribution {
            mean,
            median: percentiles.p50,
            mode,
            variance,
            std_dev: variance.sqrt(),
            min: pdf[0].0,
            max: pdf[pdf.len() - 1].0,
            count,
            total_sum: mean * count as f64,
            percentiles,
        }
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
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        let times = merge_close_times(&times, GUIDELLM_MERGE_THRESHOLD_S);
        if times.len() <= 1 {
            // guidellm's `from_values([], count=…)` returns before it reads `count`: the summary counts 0.
            return Self::empty(0);
        }
        let n = times.len();
        let midpoints: Vec<f64> = times.windows(2).map(|w| (w[0].0 + w[1].0) / 2.0).collect();
        let mut durations = vec![0.0; n];
        durations[0] = midpoints[0] - times[0].0;
        for i in 1..n - 1 {
            durations[i] = midpoints[i] - midpoints[i - 1];
        }
        durations[n - 1] = (times[n - 1].0 - midpoints[n - 2]).max(EPSILON);
        let count = times.iter().map(|t| t.1).sum::<f64>().round() as u64;
        let rates: Vec<(f64, f64)> = times
            .iter()
            .zip(&durations)
            .map(|(&(_, occurrences), &duration)| {
                let rate = if duration > 0.0 {
                    occurrences / duration
                } else {
                    0.0
                };
                (rate, duration)
            })
            .collect();
        Self::from_weighted(&rates, Some(count))
    }

    /// `concurrency_distribution_from_timings`: intervals (start, end) in seconds; the number in flight over
    /// time, each level weighted by how long it held.
    pub fn concurrency_from_intervals(intervals: &[(f64, f64)]) -> Self {
        let count = intervals.len() as u64;
        let mut changes: Vec<(f64, f64)> = intervals
            .iter()
            .flat_map(|&(s, e)| [(s, 1.0), (e, -1.0)])
            .collect();
        changes.sort_by(|a, b| a.0.total_cmp(&b.0));
        let changes = merge_close_times(&changes, GUIDELLM_MERGE_THRESHOLD_S);
        if changes.len() <= 1 {
            return match changes.first() {
                Some(&(_, level)) if count > 0 => Self::from_values(&[level.max(0.0)]),
                _ => Self::empty(0),
            };
        }
        let mut level = 0.0;
        let mut weighted = Vec::with_capacity(changes.len() - 1);
        for w in changes.windows(2) {
            level += w[0].1;
            weighted.push((f64::max(level, 0.0), (w[1].0 - w[0].0).max(0.0)));
        }
        if weighted.iter().all(|w| w.1 <= 0.0) {
            return Self::empty(count);
        }
        Self::from_weighted(&weighted, Some(count))
    }
}

/// guidellm's `Percentiles.from_pdf`: the first value whose cumulative probability reaches p.
fn percentiles_from_pdf(pdf: &[(f64, f64)]) -> GuidellmPercentiles {
    let mut cdf = Vec::with_capacity(pdf.len());
    let mut acc = 0.0;
    for &(_, p) in pdf {
        acc += p;
        cdf.push(acc);
    }
    let at = |q: f64| {
        // np.searchsorted(cdf, q, side="left"), clamped to the last value against rounding.
        let i = cdf.partition_point(|&c| c < q).min(pdf.len() - 1);
        pdf[i].0
    };
    GuidellmPercentiles {
        p001: at(0.001),
        p01: at(0.01),
        p05: at(0.05),
        p10: at(0.1),
        p25: at(0.25),
        p50: at(0.5),
        p75: at(0.75),
        p90: at(0.9),
        p95: at(0.95),
        p99: at(0.99),
        p999: at(0.999),
    }
}

/// Sums the weights of equal times, then merges each run of times within `threshold` of the run's first time
/// into that first time (guidellm's `_merge_sorted_times_with_weights`). `times` must be sorted.
fn merge_close_times(times: &[(f64, f64)], threshold: f64) -> Vec<(f64, f64)> {
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(times.len());
    for &(t, w) in times {
        match merged.last_mut() {
            Some(last) if t - last.0 <= threshold => last.1 += w,
            _ => merged.push((t, w)),
        }
    }
    merged
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
        let merged = merge_close_times(&[(1.0, 1.0), (1.00005, 1.0), (1.5, 1.0)], 1e-4);
        assert_eq!(merged, vec![(1.0, 2.0), (1.5, 1.0)]);
    }
}
