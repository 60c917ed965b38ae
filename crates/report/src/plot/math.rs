//! The arithmetic behind the pictures, pure and bounded: a uniform sample that keeps at most a fixed number of
//! values however many it is shown, histogram bins, empirical CDF points, time bins, per-bin percentiles,
//! scatter decimation and the Pareto frontier. Percentiles are read with the summaries' own method
//! ([`percentile_linear`]), so a line drawn at p99 here is where `summary.json` puts it.

use llmbench_metrics::metrics::percentile_linear;

/// At most this many values are kept per distribution: beyond it, a uniform sample stands for the rest. A CDF
/// or histogram of a million values looks the same as one of all of them, and memory stays bounded.
pub(crate) const MAX_SAMPLE: usize = 1 << 20;

/// At most this many points are drawn per scatter series.
pub(crate) const MAX_SCATTER: usize = 10_000;

/// At most this many time bins per run; longer runs get wider bins.
pub(crate) const MAX_TIME_BINS: usize = 1200;

/// A uniform random sample of at most `cap` values (Algorithm R), deterministic (a fixed seed), so the same
/// run always gives the same picture. Below the cap it keeps every value, in order.
#[derive(Debug, Clone)]
pub struct Reservoir<T = f64> {
    cap: usize,
    seen: u64,
    values: Vec<T>,
    rng: u64,
}

impl<T> Reservoir<T> {
    pub fn new(cap: usize) -> Reservoir<T> {
        Reservoir {
            cap: cap.max(1),
            seen: 0,
            values: Vec::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    pub fn push(&mut self, value: T) {
        self.seen += 1;
        if self.values.len() < self.cap {
            self.values.push(value);
            return;
        }
        // Keep the new value with probability cap / seen, in a uniformly chosen slot.
        let slot = self.next_below(self.seen);
        if let Some(kept) = self.values.get_mut(slot as usize) {
            *kept = value;
        }
    }

    /// How many values were pushed.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Whether some values were left out.
    pub fn sampled(&self) -> bool {
        self.seen > self.values.len() as u64
    }

    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// The kept values, in the order they were kept.
    pub(crate) fn into_values(self) -> Vec<T> {
        self.values
    }

    /// xorshift64*: uniform enough for sampling, and no dependency on rand's API.
    fn next_below(&mut self, bound: u64) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound
    }
}

impl Reservoir<f64> {
    /// The kept values sorted ascending.
    pub(crate) fn into_sorted(self) -> Vec<f64> {
        let mut values = self.values;
        values.sort_by(f64::total_cmp);
        values
    }
}

/// The smallest "nice" number (1, 2, 2.5 or 5 times a power of ten) at least `raw`: bin widths a person can
/// read off an axis.
pub(crate) fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw * (1.0 - 1e-12))
        .unwrap_or(10.0 * magnitude)
}

/// A histogram of sorted values: equal bins of a nice width from `lo` (rounded down to a multiple of the
/// width), `counts[i]` values in `[lo + i·width, lo + (i + 1)·width)`, the last bin closed. Values above
/// `clip` are left out and counted in `above`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub lo: f64,
    pub width: f64,
    pub counts: Vec<u64>,
    /// Values above the range, not drawn.
    pub above: u64,
    /// Where the range was cut, when it was.
    pub clip: Option<f64>,
}

impl Histogram {
    /// About `bins` bins over the values (sorted ascending). When the largest value is more than twice the
    /// p99.9, the range ends at the p99.9 so one stall does not squeeze every other value into one bin; the
    /// CDF beside it shows the whole range. `None` for no values.
    pub(crate) fn of_sorted(sorted: &[f64], bins: usize) -> Option<Histogram> {
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let p999 = percentile_linear(sorted, 0.999)?;
        let clip = (max > 2.0 * p999 && p999 > min).then_some(p999);
        let hi = clip.unwrap_or(max);
        let width = if hi > min {
            nice_step((hi - min) / bins.max(1) as f64)
        } else {
            // One distinct value: a single bin around it.
            nice_step(min.abs().max(1.0) / 100.0)
        };
        let lo = (min / width).floor() * width;
        let n = (((hi - lo) / width).floor() as usize + 1).max(1);
        let mut counts = vec![0u64; n];
        let mut above = 0;
        for &v in sorted {
            if v > hi {
                above += 1;
                continue;
            }
            let i = (((v - lo) / width).floor() as usize).min(n - 1);
            counts[i] += 1;
        }
        // The last bin only holds the values equal to its left edge when hi sits exactly on one: fold it into
        // the one before, so the top value shares a closed last bin rather than standing alone.
        if n > 1 && lo + (n - 1) as f64 * width >= hi {
            let last = counts.pop().unwrap_or(0);
            if let Some(prev) = counts.last_mut() {
                *prev += last;
            }
        }
        Some(Histogram {
            lo,
            width,
            counts,
            above,
            clip,
        })
    }

    /// A histogram of whole numbers (token counts), sorted ascending: about `bins` bins of a whole, nice width
    /// (1, 2, 3, 5, 10, 20, 25, …), each bin `[lo + i·width, lo + (i + 1)·width)` with `lo` half a unit below a
    /// multiple of the width, so a bin of width 1 is centred on its number. Nothing is clipped: a count has no
    /// stall to hide. `None` for no values.
    pub(crate) fn of_sorted_counts(sorted: &[f64], bins: usize) -> Option<Histogram> {
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let width = nice_step((max - min) / bins.max(1) as f64).max(1.0).ceil();
        let lo = (min / width).floor() * width - 0.5;
        let n = (((max - lo) / width).floor() as usize + 1).max(1);
        let mut counts = vec![0u64; n];
        for &v in sorted {
            counts[(((v - lo) / width).floor().max(0.0) as usize).min(n - 1)] += 1;
        }
        Some(Histogram {
            lo,
            width,
            counts,
            above: 0,
            clip: None,
        })
    }

    /// Where the bins start and end.
    pub fn range(&self) -> (f64, f64) {
        (self.lo, self.lo + self.counts.len() as f64 * self.width)
    }

    /// `(bin centre, count)` per bin.
    pub fn bars(&self) -> Vec<(f64, f64)> {
        self.counts
            .iter()
            .enumerate()
            .map(|(i, &c)| (self.lo + (i as f64 + 0.5) * self.width, c as f64))
            .collect()
    }
}

/// The empirical CDF of sorted values as at most about `points` + 5 points `(value, percent ≤ value)`:
/// evenly spaced ranks plus the ranks of p99, p99.5, p99.9, p99.95 and p99.99, where the tail a person looks
/// for would otherwise fall between two points.
pub(crate) fn cdf_points(sorted: &[f64], points: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let k = points.clamp(1, n);
    let mut ranks: Vec<usize> = (0..=k)
        .map(|i| ((i as f64 * (n - 1) as f64) / k as f64).round() as usize)
        .chain(
            [0.99, 0.995, 0.999, 0.9995, 0.9999]
                .into_iter()
                .map(|q: f64| ((q * n as f64 - 1e-9).ceil() as usize).clamp(1, n) - 1),
        )
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
        .into_iter()
        .map(|r| (sorted[r], (r + 1) as f64 * 100.0 / n as f64))
        .collect()
}

/// The width of time bins for a run of `span_s` seconds: 1 s, unless that makes more than [`MAX_TIME_BINS`]
/// bins, then the smallest of 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1 h … that does not.
pub(crate) fn time_bin_s(span_s: f64) -> f64 {
    const STEPS: [f64; 13] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
    ];
    let fits = |bin: f64| span_s / bin <= MAX_TIME_BINS as f64;
    STEPS.into_iter().find(|&bin| fits(bin)).unwrap_or_else(|| {
        // Days: whole hours.
        (span_s / MAX_TIME_BINS as f64 / 3600.0).ceil() * 3600.0
    })
}

/// Per-second rates in bins of `bin_s` from 0 to `end_s`: each event `(time_s, amount)` adds its amount to
/// the bin its time falls in (events at or past `end_s` to the last bin, before 0 to the first), and each bin's
/// sum is divided by its width. The last bin ends at `end_s`; when that leaves it less than half a bin, it is
/// merged into the one before, so a sliver at the end does not read as a collapse or a spike. Returns `(start,
/// end, rate)` per bin.
pub(crate) fn binned_rates(
    events: impl Iterator<Item = (f64, f64)>,
    bin_s: f64,
    end_s: f64,
) -> Vec<(f64, f64, f64)> {
    let n = ((end_s / bin_s).ceil() as usize).max(1);
    let mut sums = vec![0.0; n];
    for (t, amount) in events {
        let i = ((t / bin_s).floor().max(0.0) as usize).min(n - 1);
        sums[i] += amount;
    }
    rates_of_sums(sums, bin_s, end_s)
}

/// [`binned_rates`] of amounts already summed per slot of `slot_s` whole seconds (`per_slot[i]`: the events in
/// `[i·slot_s, (i + 1)·slot_s)`, those before 0 in the first), and `late` past the slots (to the last bin). Exact
/// when `bin_s` is a whole number of slots, as every width [`time_bin_s`] picks is of the slots a run's length
/// gives it (`plot::run::Sampled`).
pub(crate) fn binned_rates_per_slot(
    per_slot: &[f64],
    slot_s: f64,
    late: f64,
    bin_s: f64,
    end_s: f64,
) -> Vec<(f64, f64, f64)> {
    let n = ((end_s / bin_s).ceil() as usize).max(1);
    let mut sums = vec![0.0; n];
    let slots_per_bin = ((bin_s / slot_s).round() as usize).max(1);
    for (slot, amount) in per_slot.iter().enumerate() {
        sums[(slot / slots_per_bin).min(n - 1)] += amount;
    }
    sums[n - 1] += late;
    rates_of_sums(sums, bin_s, end_s)
}

fn rates_of_sums(sums: Vec<f64>, bin_s: f64, end_s: f64) -> Vec<(f64, f64, f64)> {
    let mut bins: Vec<(f64, f64, f64)> = sums
        .into_iter()
        .enumerate()
        .map(|(i, sum)| (i as f64 * bin_s, ((i + 1) as f64 * bin_s).min(end_s), sum))
        .collect();
    if bins.len() > 1
        && let Some(&(start, end, sum)) = bins.last()
        && end - start < bin_s / 2.0
    {
        bins.pop();
        if let Some(previous) = bins.last_mut() {
            previous.1 = end;
            previous.2 += sum;
        }
    }
    bins.into_iter()
        .map(|(start, end, sum)| {
            let width = end - start;
            (start, end, if width > 0.0 { sum / width } else { 0.0 })
        })
        .collect()
}

/// A step line through per-bin values: `(start, v), (end, v)` for each bin, so a rate reads as constant over
/// its bin rather than as a slope between bin centres.
pub(crate) fn step_points(bins: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    bins.iter()
        .flat_map(|&(start, end, v)| [(start, v), (end, v)])
        .collect()
}

/// The `p` quantiles (fractions) of the values in each time bin of `bin_s`, by the summaries' linear method:
/// one `(bin centre, [value per p])` per bin that has any values, in time order. `points` are `(time_s,
/// value)` in any order.
pub(crate) fn binned_percentiles(
    points: &[(f64, f64)],
    bin_s: f64,
    ps: &[f64],
) -> Vec<(f64, Vec<f64>)> {
    let mut by_bin: Vec<(i64, f64)> = points
        .iter()
        .filter(|(t, v)| t.is_finite() && v.is_finite())
        .map(|&(t, v)| ((t / bin_s).floor() as i64, v))
        .collect();
    by_bin.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out = Vec::new();
    let mut start = 0;
    while start < by_bin.len() {
        let bin = by_bin[start].0;
        let end = start + by_bin[start..].partition_point(|(b, _)| *b == bin);
        let values: Vec<f64> = by_bin[start..end].iter().map(|(_, v)| *v).collect();
        let qs = ps
            .iter()
            .map(|&p| percentile_linear(&values, p).unwrap_or(f64::NAN))
            .collect();
        out.push(((bin as f64 + 0.5) * bin_s, qs));
        start = end;
    }
    out
}

/// Per-bin points (bin centres `bin_s` apart) with a `(x, NaN)` gap after any point whose next one is more than a
/// bin away, so a line drawn through them breaks over the empty bins (a pause between stages, a queue draining)
/// instead of bridging time in which nothing was measured.
pub(crate) fn broken_at_gaps(
    points: impl IntoIterator<Item = (f64, f64)>,
    bin_s: f64,
) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (x, y) in points {
        if let Some(&(previous, _)) = out.last()
            && x - previous > 1.5 * bin_s
        {
            out.push((previous + bin_s, f64::NAN));
        }
        out.push((x, y));
    }
    out
}

/// A scatter cut down to a budget: an even sample, and the highest points kept apart so a picture can draw them
/// as what they are (a selection), not as part of the sample.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decimated {
    /// Every point when they fit the budget, else every k-th in x order.
    pub even: Vec<(f64, f64)>,
    /// When they did not fit: the highest fifth of the budget by y (the slow requests a reader looks for) that
    /// the even sample did not take.
    pub highest: Vec<(f64, f64)>,
}

/// At most `max` of `points` for a scatter, keeping both its density and its outliers: four fifths of the budget
/// an even sample in x order (so the dots are as dense as the requests were), one fifth the highest by y. Both
/// sorted by x; non-finite points dropped.
pub(crate) fn decimate(mut points: Vec<(f64, f64)>, max: usize) -> Decimated {
    points.retain(|(x, y)| x.is_finite() && y.is_finite());
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = points.len();
    if n <= max {
        return Decimated {
            even: points,
            highest: Vec::new(),
        };
    }
    let top = max / 5;
    let even = max - top;
    // 0 not kept, 1 in the even sample, 2 among the highest.
    let mut keep = vec![0u8; n];
    for i in 0..even {
        keep[i * n / even] = 1;
    }
    if top > 0 {
        let mut by_y: Vec<usize> = (0..n).collect();
        by_y.select_nth_unstable_by(n - top, |&a, &b| points[a].1.total_cmp(&points[b].1));
        for &i in &by_y[n - top..] {
            if keep[i] == 0 {
                keep[i] = 2;
            }
        }
    }
    let mut out = Decimated::default();
    for (p, k) in points.into_iter().zip(keep) {
        match k {
            1 => out.even.push(p),
            2 => out.highest.push(p),
            _ => {}
        }
    }
    out
}

/// The indexes of the points on the Pareto frontier when both coordinates are better larger: those no other
/// point matches or beats in both. In ascending x.
pub(crate) fn pareto_frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    // Descending x, and for equal x descending y, so the first of equals is the one that can be on the frontier.
    order.sort_by(|&a, &b| {
        points[b]
            .0
            .total_cmp(&points[a].0)
            .then(points[b].1.total_cmp(&points[a].1))
    });
    let mut best_y = f64::NEG_INFINITY;
    let mut frontier = Vec::new();
    for i in order {
        if points[i].1 > best_y {
            best_y = points[i].1;
            frontier.push(i);
        }
    }
    frontier.reverse();
    frontier
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservoir_keeps_every_value_below_its_cap_in_order() {
        let mut r = Reservoir::new(4);
        for v in [3.0, 1.0, 2.0] {
            r.push(v);
        }
        assert_eq!(r.values(), [3.0, 1.0, 2.0]);
        assert_eq!((r.seen(), r.sampled()), (3, false));
        assert_eq!(r.into_sorted(), [1.0, 2.0, 3.0]);
    }

    #[test]
    fn reservoir_above_its_cap_keeps_cap_values_drawn_uniformly() {
        // 0..100 000 into 1000 slots: 1000 distinct input values whose mean is near the input's 49 999.5 (the
        // sample mean's standard error is about 28 867 / √1000 ≈ 913; the seed is fixed, so this never flakes).
        let mut r = Reservoir::new(1000);
        for v in 0..100_000 {
            r.push(f64::from(v));
        }
        assert_eq!(
            (r.seen(), r.sampled(), r.values().len()),
            (100_000, true, 1000)
        );
        let sorted = r.into_sorted();
        let mut distinct = sorted.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 1000);
        let mean = sorted.iter().sum::<f64>() / 1000.0;
        assert!((mean - 49_999.5).abs() < 4.0 * 913.0, "{mean}");
        // Both ends of the input are represented, not just its first 1000.
        assert!(sorted[999] > 90_000.0 && sorted[0] < 10_000.0);
    }

    #[test]
    fn nice_steps_are_one_two_two_and_a_half_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(2.2), 2.5);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(0.012), 0.02);
        assert_eq!(nice_step(430.0), 500.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
    }

    #[test]
    fn histogram_bins_start_on_a_multiple_of_a_nice_width() {
        // 10 … 19 in ~4 bins: raw width 9 / 4 = 2.25 → 2.5; lo = floor(10 / 2.5)·2.5 = 10; bins [10, 12.5)
        // [12.5, 15) [15, 17.5) [17.5, 20): 10 11 12 | 13 14 | 15 16 17 | 18 19.
        let values: Vec<f64> = (10..20).map(f64::from).collect();
        let h = Histogram::of_sorted(&values, 4).unwrap();
        assert_eq!((h.lo, h.width, h.above, h.clip), (10.0, 2.5, 0, None));
        assert_eq!(h.counts, [3, 2, 3, 2]);
        assert_eq!(h.bars()[0], (11.25, 3.0));
    }

    #[test]
    fn histogram_folds_a_maximum_on_a_bin_edge_into_the_last_bin() {
        // 0, 1, 2, 3, 4 in 4 bins: width 1, and 4 sits on the edge of a fifth bin [4, 5): it joins [3, 4].
        let h = Histogram::of_sorted(&[0.0, 1.0, 2.0, 3.0, 4.0], 4).unwrap();
        assert_eq!((h.lo, h.width), (0.0, 1.0));
        assert_eq!(h.counts, [1, 1, 1, 2]);
    }

    #[test]
    fn histogram_cuts_a_far_outlier_at_the_p999() {
        // 999 values of 1 … 999 ms and one of 100 000 ms. p99.9 by the linear method: index 0.999·999 =
        // 998.001 → 999 + 0.001·(100 000 − 999) = 1098.001; the max is beyond twice that, so the range ends
        // there and the outlier is counted above it.
        let mut values: Vec<f64> = (1..1000).map(f64::from).collect();
        values.push(100_000.0);
        let h = Histogram::of_sorted(&values, 50).unwrap();
        let clip = h.clip.unwrap();
        assert!((clip - 1098.001).abs() < 1e-6, "{clip}");
        assert_eq!(h.above, 1);
        assert_eq!(h.counts.iter().sum::<u64>(), 999);
        // (1098 − 1) / 50 = 21.9 → width 25.
        assert_eq!(h.width, 25.0);
    }

    #[test]
    fn histogram_of_one_repeated_value_is_one_bar() {
        let h = Histogram::of_sorted(&[50.0, 50.0, 50.0], 60).unwrap();
        // width nice(50 / 100 = 0.5) = 0.5; lo = 50; one bin holding all three.
        assert_eq!((h.lo, h.width, h.counts.clone()), (50.0, 0.5, vec![3]));
        assert_eq!(Histogram::of_sorted(&[], 60), None);
    }

    #[test]
    fn token_count_bins_are_whole_and_centred_on_their_numbers() {
        // 30 … 35 in 60 bins: raw width 5 / 60 → nice 0.1, at least 1; lo = 30 − 0.5; each count its own bin,
        // centred on it.
        let h = Histogram::of_sorted_counts(&[30.0, 31.0, 31.0, 35.0], 60).unwrap();
        assert_eq!((h.lo, h.width), (29.5, 1.0));
        assert_eq!(h.counts, [1, 2, 0, 0, 0, 1]);
        assert_eq!(h.bars()[1], (31.0, 2.0));
        assert_eq!(h.range(), (29.5, 35.5));
        // 256 … 512 in 60 bins: raw 4.27 → nice 5; lo = 255 − 0.5, bins [254.5, 259.5) …
        let h = Histogram::of_sorted_counts(&[256.0, 259.0, 260.0, 512.0], 60).unwrap();
        assert_eq!((h.lo, h.width), (254.5, 5.0));
        assert_eq!((h.counts[0], h.counts[1]), (2, 1));
        assert_eq!(h.counts.iter().sum::<u64>(), 4);
        // A nice width of 2.5 is no whole number: 3.
        let h = Histogram::of_sorted_counts(&[0.0, 100.0], 40).unwrap();
        assert_eq!(h.width, 3.0);
        // One length: one bar on it.
        let h = Histogram::of_sorted_counts(&[32.0, 32.0], 60).unwrap();
        assert_eq!((h.bars(), h.range()), (vec![(32.0, 2.0)], (31.5, 32.5)));
        assert_eq!(Histogram::of_sorted_counts(&[], 60), None);
    }

    #[test]
    fn cdf_of_a_small_sample_is_every_value_at_its_rank() {
        // n = 5: every rank, percent (r + 1)/5·100.
        let points = cdf_points(&[1.0, 2.0, 3.0, 4.0, 5.0], 1000);
        assert_eq!(
            points,
            [
                (1.0, 20.0),
                (2.0, 40.0),
                (3.0, 60.0),
                (4.0, 80.0),
                (5.0, 100.0)
            ]
        );
        assert!(cdf_points(&[], 10).is_empty());
    }

    #[test]
    fn cdf_of_a_large_sample_is_bounded_and_keeps_the_tail() {
        // 10 000 values 1 … 10 000 with 100 points: ranks 0, 100, …, 9999 (round(i·9999/100)), plus the tail
        // ranks ceil(q·n) − 1 = 9899, 9949, 9989, 9994, 9998.
        let values: Vec<f64> = (1..=10_000).map(f64::from).collect();
        let points = cdf_points(&values, 100);
        assert!(points.len() <= 106);
        assert_eq!(points[0], (1.0, 0.01));
        assert_eq!(*points.last().unwrap(), (10_000.0, 100.0));
        for tail in [9900.0, 9950.0, 9990.0, 9995.0, 9999.0] {
            assert!(points.iter().any(|p| p.0 == tail), "{tail}");
        }
        // The rank of the p99.9 point: value 9990 is ≤ for 99.9 % of the sample.
        let p = points.iter().find(|p| p.0 == 9990.0).unwrap();
        assert!((p.1 - 99.9).abs() < 1e-9);
        assert!(
            points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1)
        );
    }

    #[test]
    fn time_bins_are_one_second_until_there_would_be_too_many() {
        assert_eq!(time_bin_s(5.0), 1.0);
        assert_eq!(time_bin_s(1200.0), 1.0);
        assert_eq!(time_bin_s(1201.0), 2.0);
        // An hour: 3600 / 1200 = 3 → 5 s bins.
        assert_eq!(time_bin_s(3600.0), 5.0);
        // 10 days: 864 000 / 1200 = 720 s → 15 min.
        assert_eq!(time_bin_s(864_000.0), 900.0);
        // 100 days: 8 640 000 / 1200 / 3600 = 2 h.
        assert_eq!(time_bin_s(8_640_000.0), 7200.0);
    }

    #[test]
    fn binned_rates_divide_each_bins_sum_by_its_width() {
        // Bins of 2 s up to 5 s: [0, 2) [2, 4) [4, 5], the last 1 s wide (half a bin: kept). Events at 0.5 (1),
        // 1.9 (1), 2.0 (3), 4.5 (1), 9 (past the end: last bin, 3), −1 (before 0: first bin, 2).
        let events = [
            (0.5, 1.0),
            (1.9, 1.0),
            (2.0, 3.0),
            (4.5, 1.0),
            (9.0, 3.0),
            (-1.0, 2.0),
        ];
        let bins = binned_rates(events.into_iter(), 2.0, 5.0);
        // 4 / 2, 3 / 2, 4 / 1.
        assert_eq!(bins, [(0.0, 2.0, 2.0), (2.0, 4.0, 1.5), (4.0, 5.0, 4.0)]);
        assert_eq!(
            step_points(&bins[..2]),
            [(0.0, 2.0), (2.0, 2.0), (2.0, 1.5), (4.0, 1.5)]
        );
        // Up to 4.5 s the last bin [4, 4.5] is a quarter of a bin: merged into [2, 4.5], (3 + 4) / 2.5 = 2.8.
        let bins = binned_rates(events.into_iter(), 2.0, 4.5);
        assert_eq!(bins, [(0.0, 2.0, 2.0), (2.0, 4.5, 2.8)]);
        // A run shorter than a bin is one bin of its own length: 4 events in 0.5 s = 8/s.
        let bins = binned_rates([(0.1, 4.0)].into_iter(), 1.0, 0.5);
        assert_eq!(bins, [(0.0, 0.5, 8.0)]);
    }

    #[test]
    fn binned_percentiles_use_the_linear_method_per_bin() {
        // Bin 0 (1 s): 10, 20, 30, 40 → p50 = 25, p90 = index 2.7 → 37. Bin 2: 5 alone. Bin 1 is empty and
        // left out.
        let points = [
            (0.1, 40.0),
            (0.9, 10.0),
            (0.5, 30.0),
            (0.2, 20.0),
            (2.5, 5.0),
        ];
        let out = binned_percentiles(&points, 1.0, &[0.5, 0.9]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0, 0.5);
        assert_eq!(out[0].1[0], 25.0);
        assert!((out[0].1[1] - 37.0).abs() < 1e-9);
        assert_eq!(out[1], (2.5, vec![5.0, 5.0]));
    }

    #[test]
    fn lines_through_bins_break_over_empty_bins() {
        // Bins of 1 s at 0.5, 1.5, then nothing until 4.5: a gap at 2.5 (NaN), none between adjacent bins.
        let out = broken_at_gaps([(0.5, 1.0), (1.5, 2.0), (4.5, 3.0)], 1.0);
        assert_eq!(out.len(), 4);
        assert_eq!(&out[..2], &[(0.5, 1.0), (1.5, 2.0)]);
        assert_eq!(out[2].0, 2.5);
        assert!(out[2].1.is_nan());
        assert_eq!(out[3], (4.5, 3.0));
    }

    #[test]
    fn decimation_keeps_an_even_sample_and_the_highest_points() {
        // 10 points into at most 5: the highest 5 / 5 = 1 by y, (4, 9); and 4 evenly by x, indexes i·10/4 =
        // 0, 2, 5, 7. Together, in x order.
        let ys = [5.0, 3.0, 1.0, 4.0, 9.0, 8.0, 2.0, 6.0, 7.0, 0.0];
        let mut points: Vec<(f64, f64)> =
            ys.iter().enumerate().map(|(x, &y)| (x as f64, y)).collect();
        points.reverse();
        let out = decimate(points, 5);
        assert_eq!(out.even, [(0.0, 5.0), (2.0, 1.0), (5.0, 8.0), (7.0, 6.0)]);
        assert_eq!(out.highest, [(4.0, 9.0)]);
        // A highest point that the even sample also took is kept once, in the sample: at most `max` points.
        let many: Vec<(f64, f64)> = (0..1000)
            .map(|i| (f64::from(i), f64::from(i % 7)))
            .collect();
        let out = decimate(many, 100);
        assert!(out.even.len() + out.highest.len() <= 100);
        // Few points come back sorted, non-finite ones dropped.
        let few = decimate(vec![(2.0, 1.0), (f64::NAN, 1.0), (1.0, 3.0)], 4);
        assert_eq!(few.even, [(1.0, 3.0), (2.0, 1.0)]);
        assert!(few.highest.is_empty());
    }

    #[test]
    fn pareto_frontier_keeps_the_points_nothing_beats_in_both() {
        // (1, 10) (2, 8) (3, 9) (4, 2) (2, 5): (2, 8) is beaten by (3, 9); (2, 5) by (3, 9) too. Frontier in
        // ascending x: (1, 10), (3, 9), (4, 2).
        let points = [(1.0, 10.0), (2.0, 8.0), (3.0, 9.0), (4.0, 2.0), (2.0, 5.0)];
        assert_eq!(pareto_frontier(&points), [0, 2, 3]);
        // Equal points: one of them.
        assert_eq!(pareto_frontier(&[(1.0, 1.0), (1.0, 1.0)]).len(), 1);
        assert!(pareto_frontier(&[]).is_empty());
    }
}
