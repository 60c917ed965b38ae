//! Exact descriptive statistics, with the percentile methods of the tools we stand in for: numpy's default
//! linear interpolation (inference-perf, vllm bench serve, the llm-d report adapter) and MLPerf LoadGen's
//! `sorted[floor(n·p)]`. Exact means every value is kept and every percentile is read off true order
//! statistics; nothing is approximated by a histogram or a sketch.
//!
//! [`Stats`] needs only a dozen order statistics (the two neighbours of each percentile's virtual index), so it
//! finds them without sorting: for nanosecond samples by bucketed selection over the integer values, in two
//! linear passes (`select_ranks`), which keeps a summary of tens of millions of pooled ITL gaps fast.
//! Mean and standard deviation come from exact integer sums gathered while the values are collected.

pub use llmbench_core::percentile::linear as percentile_linear;
pub use llmbench_core::percentile::{linear_at, linear_neighbours};
use serde::{Deserialize, Serialize};

use super::spill::{f64_key, f64_of_key};

/// Descriptive statistics of one metric. The unit is the caller's (the summary uses milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub count: u64,
    pub mean: f64,
    /// Sample standard deviation (ddof = 1, as the llm-d report adapter computes it); 0 for a single value.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
}

/// The percentiles [`Stats`] reports, as fractions.
const PERCENTILES: [f64; 5] = [0.5, 0.9, 0.95, 0.99, 0.999];

impl Stats {
    /// Statistics of finite values in any order; `None` for an empty sample. Percentiles are
    /// [`percentile_linear`]'s. The values are reordered (partially sorted), not changed.
    pub fn from_values(values: &mut [f64]) -> Option<Stats> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        // Plain summation: the two-pass stddev keeps the spread accurate, and the mean of latencies (positive,
        // of similar magnitude) loses nothing measurable to rounding.
        let mean = values.iter().sum::<f64>() / n as f64;
        let moments = Moments {
            mean,
            stddev: two_pass_stddev(values.iter().copied(), mean, n),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        };
        // Put each order statistic the percentiles read at its sorted position. Selecting in ascending order,
        // each selection only searches what lies right of the previous one, whose elements all rank after it.
        let mut start = 0;
        for rank in interior_ranks(n) {
            values[start..].select_nth_unstable_by(rank - start, f64::total_cmp);
            start = rank + 1;
        }
        Some(describe(n, moments, |i| values[i]))
    }

    /// Statistics in milliseconds of durations in nanoseconds, in any order.
    #[cfg(test)]
    pub(crate) fn from_ns_as_ms(values: &[u64]) -> Option<Stats> {
        let mut moments = NsMoments::default();
        values.iter().for_each(|&v| moments.add(v));
        Stats::from_ns_with_moments(values, &moments)
    }

    /// Statistics in milliseconds of durations in nanoseconds, in any order, with their moments gathered while
    /// they were collected.
    pub(crate) fn from_ns_with_moments(values: &[u64], moments: &NsMoments) -> Option<Stats> {
        debug_assert_eq!(moments.count, values.len() as u64);
        Stats::from_ns_moments(
            moments,
            |ranks| {
                let mut selected = Vec::with_capacity(ranks.len());
                select_ranks(values, moments.min, moments.max, ranks, &mut selected);
                selected
            },
            |mean_ns| squared_deviations(values.iter().copied(), mean_ns),
        )
    }

    /// Statistics in milliseconds of nanosecond durations held anywhere (in memory, or in spill files on disk):
    /// `moments` are theirs, `select` returns the values at the given sorted positions (ascending, distinct), and
    /// `squares` the exactly rounded sum of their squared deviations from a mean, asked only when the exact
    /// integer variance overflows. Both callers of the same values get the same statistics to the last bit.
    pub fn from_ns_moments(
        moments: &NsMoments,
        select: impl FnOnce(&[usize]) -> Vec<u64>,
        squares: impl FnOnce(f64) -> f64,
    ) -> Option<Stats> {
        let n = usize::try_from(moments.count).ok()?;
        if n == 0 {
            return None;
        }
        let mean_ns = moments.sum as f64 / n as f64;
        let n128 = n as u128;
        // Sample variance n·Σx² − (Σx)² over n·(n − 1), exact until the final division. The float two-pass
        // formula only where that overflows u128: n·rms beyond 2^64 ns, e.g. 16 M values of 18 minutes.
        let exact_numerator = (!moments.overflowed)
            .then(|| {
                let (sum, squares) = (moments.sum, moments.squares);
                n128.checked_mul(squares)?
                    .checked_sub(sum.checked_mul(sum)?)
            })
            .flatten();
        let stddev_ns = match (n, exact_numerator) {
            (1, _) => 0.0,
            (_, Some(numerator)) => (numerator as f64 / (n as f64 * (n - 1) as f64)).sqrt(),
            (_, None) => (squares(mean_ns) / (n - 1) as f64).sqrt(),
        };
        let summary = Moments {
            mean: mean_ns / NS_PER_MS,
            stddev: stddev_ns / NS_PER_MS,
            min: ns_to_ms(moments.min),
            max: ns_to_ms(moments.max),
        };
        let ranks = interior_ranks(n);
        let selected = if ranks.is_empty() {
            Vec::new()
        } else {
            select(&ranks)
        };
        Some(describe(n, summary, |i| {
            ranks
                .binary_search(&i)
                .ok()
                .and_then(|k| selected.get(k))
                .map_or(f64::NAN, |&v| ns_to_ms(v))
        }))
    }
}

/// The exactly rounded sum of the squared deviations of nanosecond `values` from `mean`: the two-pass variance's
/// numerator, whatever order the values come in.
pub(crate) fn squared_deviations(values: impl Iterator<Item = u64>, mean: f64) -> f64 {
    super::fsum::fsum(values.map(|v| squared_deviation(v, mean)))
}

/// One term of [`squared_deviations`].
pub fn squared_deviation(value: u64, mean: f64) -> f64 {
    (value as f64 - mean).powi(2)
}

/// Exact running moments of nanosecond durations: count, sum, sum of squares, min and max, in integers, so
/// they merge across stages and give the same mean and stddev whatever the order of the values.
#[derive(Debug, Clone, Copy)]
pub struct NsMoments {
    count: u64,
    sum: u128,
    squares: u128,
    /// The sum of squares wrapped (values of days by the million); stddev then takes the float path.
    overflowed: bool,
    min: u64,
    max: u64,
}

impl Default for NsMoments {
    fn default() -> Self {
        NsMoments {
            count: 0,
            sum: 0,
            squares: 0,
            overflowed: false,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl NsMoments {
    /// The smallest value added (`u64::MAX` before any).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The largest value added (0 before any).
    pub fn max(&self) -> u64 {
        self.max
    }

    pub(crate) fn add(&mut self, ns: u64) {
        let v = u128::from(ns);
        self.count += 1;
        // Cannot overflow: fewer than 2^64 values, each below 2^64.
        self.sum += v;
        let (squares, wrapped) = self.squares.overflowing_add(v * v);
        self.squares = squares;
        self.overflowed |= wrapped;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    pub(crate) fn merge(&mut self, other: &NsMoments) {
        self.count += other.count;
        self.sum += other.sum;
        let (squares, wrapped) = self.squares.overflowing_add(other.squares);
        self.squares = squares;
        self.overflowed |= wrapped || other.overflowed;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

const NS_PER_MS: f64 = 1e6;

fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}

/// The statistics not read off order statistics.
struct Moments {
    mean: f64,
    stddev: f64,
    min: f64,
    max: f64,
}

/// Sample standard deviation (ddof = 1) by the two-pass formula; 0 for one value.
fn two_pass_stddev(values: impl Iterator<Item = f64>, mean: f64, n: usize) -> f64 {
    if n < 2 {
        return 0.0;
    }
    let squares: f64 = values.map(|v| (v - mean).powi(2)).sum();
    (squares / (n - 1) as f64).sqrt()
}

/// The sorted positions the reported percentiles read, ascending and distinct, without 0 and n − 1: the
/// extremes come from the moments.
fn interior_ranks(n: usize) -> Vec<usize> {
    let mut ranks: Vec<usize> = PERCENTILES
        .iter()
        .flat_map(|&p| {
            let (lo, hi) = linear_neighbours(n, p);
            [lo, hi]
        })
        .filter(|&rank| rank != 0 && rank != n - 1)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}

/// The statistics of a non-empty sample of `n` values, its moments given, `value(i)` reading the value of
/// sorted position `i` for the interior ranks.
fn describe(n: usize, moments: Moments, value: impl Fn(usize) -> f64) -> Stats {
    let value = |i: usize| match i {
        0 => moments.min,
        i if i == n - 1 => moments.max,
        i => value(i),
    };
    let p = |q| linear_at(n, q, value).unwrap_or(f64::NAN);
    Stats {
        count: n as u64,
        mean: moments.mean,
        stddev: moments.stddev,
        min: moments.min,
        max: moments.max,
        p50: p(PERCENTILES[0]),
        p90: p(PERCENTILES[1]),
        p95: p(PERCENTILES[2]),
        p99: p(PERCENTILES[3]),
        p999: p(PERCENTILES[4]),
    }
}

/// Below this many values, selection sorts a copy.
const SORT_BELOW: usize = 2048;
/// Bits of `value − min` each bucketing level resolves: 4096 counters, which stay in the L1 cache.
const BUCKET_BITS: u32 = 12;

/// Appends to `out` the values at sorted positions `ranks` (ascending, distinct, each < `values.len()`) of
/// `values`, whose smallest and largest are `min` and `max`. Exact: it counts the values per bucket of the
/// high bits of `value − min`, finds the bucket of each rank, gathers only those buckets' values and recurses
/// into them with their own, at least 2^11 times narrower, span. Two linear passes per level, where a
/// selection algorithm makes several per percentile; it leaves `values` as they are.
fn select_ranks(values: &[u64], min: u64, max: u64, ranks: &[usize], out: &mut Vec<u64>) {
    select_ranks_by(values, |v| v, min, max, ranks, out);
}

/// [`select_ranks`] of the keys `key` gives `values` (their order), read off `values` as they are: the first
/// level reads the values, the levels below the keys it gathered.
fn select_ranks_by<T: Copy>(
    values: &[T],
    key: impl Fn(T) -> u64,
    min: u64,
    max: u64,
    ranks: &[usize],
    out: &mut Vec<u64>,
) {
    if ranks.is_empty() {
        return;
    }
    if min == max {
        out.extend(ranks.iter().map(|_| min));
        return;
    }
    if values.len() < SORT_BELOW {
        let mut sorted: Vec<u64> = values.iter().map(|&v| key(v)).collect();
        sorted.sort_unstable();
        out.extend(ranks.iter().map(|&rank| sorted[rank]));
        return;
    }

    let span = max - min;
    let shift = (u64::BITS - span.leading_zeros()).saturating_sub(BUCKET_BITS);
    let bucket = |v: u64| ((v - min) >> shift) as usize;
    let mut counts = vec![0usize; bucket(max) + 1];
    for &v in values {
        counts[bucket(key(v))] += 1;
    }

    // The bucket holding each rank, and the rank within that bucket; ascending ranks give ascending buckets.
    let mut wanted: Vec<(usize, Vec<usize>)> = Vec::new();
    let (mut bucket_index, mut below) = (0, 0);
    for &rank in ranks {
        while below + counts[bucket_index] <= rank {
            below += counts[bucket_index];
            bucket_index += 1;
        }
        match wanted.last_mut() {
            Some((b, inner)) if *b == bucket_index => inner.push(rank - below),
            _ => wanted.push((bucket_index, vec![rank - below])),
        }
    }

    // Gather the wanted buckets' values in one pass.
    const NOT_WANTED: u32 = u32::MAX;
    let mut slot_of = vec![NOT_WANTED; counts.len()];
    let mut gathered: Vec<(Vec<u64>, u64, u64)> = Vec::with_capacity(wanted.len());
    for (slot, (b, _)) in wanted.iter().enumerate() {
        slot_of[*b] = slot as u32;
        gathered.push((Vec::with_capacity(counts[*b]), u64::MAX, 0));
    }
    for &v in values {
        let v = key(v);
        let slot = slot_of[bucket(v)];
        if slot != NOT_WANTED {
            let (bucket_values, lo, hi) = &mut gathered[slot as usize];
            bucket_values.push(v);
            *lo = (*lo).min(v);
            *hi = (*hi).max(v);
        }
    }
    for ((_, inner_ranks), (bucket_values, lo, hi)) in wanted.iter().zip(&gathered) {
        select_ranks(bucket_values, *lo, *hi, inner_ranks, out);
    }
}

/// The values of `values` at sorted positions `ranks` (by `f64::total_cmp`; in any order, each below
/// `values.len()`), in the order of `ranks`: what indexing a sorted copy gives, found by bucketed selection
/// ([`select_ranks`]) on the floats' order-preserving keys, without sorting. Values equal by `total_cmp` have
/// the same bits, so the value at a rank is one float however it is found.
pub fn select_f64_ranks(values: &[f64], ranks: &[usize]) -> Vec<f64> {
    if values.is_empty() || ranks.is_empty() {
        return Vec::new();
    }
    let mut wanted = ranks.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let (mut min, mut max) = (u64::MAX, 0);
    for &v in values {
        let k = f64_key(v);
        min = min.min(k);
        max = max.max(k);
    }
    let last = values.len() - 1;
    let mut keys = Vec::with_capacity(wanted.len());
    // The extremes alone need no more than the pass that found them.
    if wanted.iter().all(|&r| r == 0 || r == last) {
        keys.extend(wanted.iter().map(|&r| if r == 0 { min } else { max }));
    } else {
        select_ranks_by(values, f64_key, min, max, &wanted, &mut keys);
    }
    ranks
        .iter()
        .map(|r| {
            let i = wanted.partition_point(|w| w < r);
            f64_of_key(keys[i])
        })
        .collect()
}

/// The `p` quantile (a fraction: 0.99 is p99) of a sample sorted ascending, as MLPerf LoadGen computes it:
/// `sorted[floor(n·p)]`, clamped to the last value. `None` for an empty sample or a NaN `p`.
///
/// `[1, 2, 3, 4]`: p = 0.5 → index 2 → 3; p = 0.9 → floor(3.6) = 3 → 4; p = 0.2 → floor(0.8) = 0 → 1.
pub fn percentile_mlperf(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || p.is_nan() {
        return None;
    }
    // `as usize` floors a non-negative value and saturates, so p > 1 lands on the clamp.
    let index = (sorted.len() as f64 * p.max(0.0)) as usize;
    Some(sorted[index.min(sorted.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn mlperf_percentile_takes_the_floor_index_without_interpolating() {
        let v = [1.0, 2.0, 3.0, 4.0];
        // floor(4·0.5) = 2 → 3 (numpy would say 2.5).
        assert_eq!(percentile_mlperf(&v, 0.5), Some(3.0));
        // floor(4·0.9) = floor(3.6) = 3 → 4.
        assert_eq!(percentile_mlperf(&v, 0.9), Some(4.0));
        // floor(4·0.2) = 0 → 1.
        assert_eq!(percentile_mlperf(&v, 0.2), Some(1.0));
        // floor(4·1.0) = 4, clamped to the last index.
        assert_eq!(percentile_mlperf(&v, 1.0), Some(4.0));
        assert_eq!(percentile_mlperf(&[], 0.5), None);
    }

    #[test]
    fn mlperf_p999_of_a_thousand_values_is_the_last_one() {
        // 1000·0.999 = 999 exactly in f64, so the index is 999: LoadGen's answer for 1..=1000 is 1000.
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile_mlperf(&v, 0.999), Some(1000.0));
        // floor(1000·0.99) = 990 → 991.
        assert_eq!(percentile_mlperf(&v, 0.99), Some(991.0));
    }

    #[test]
    fn stats_use_sample_stddev_and_linear_percentiles() {
        // [1, 2, 3, 4]: mean 2.5; squares 2.25 + 0.25 + 0.25 + 2.25 = 5; 5 / (4 − 1) = 1.6667; sqrt = 1.290994.
        let s = Stats::from_values(&mut [4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.count, 4);
        assert_eq!(s.mean, 2.5);
        assert!(close(s.stddev, (5.0f64 / 3.0).sqrt()));
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert_eq!(s.p50, 2.5);
        assert!(close(s.p90, 3.7));
        assert!(close(s.p95, 3.85));
        assert!(close(s.p99, 3.97));
        assert!(close(s.p999, 3.997));
    }

    #[test]
    fn stats_of_one_value_have_zero_spread() {
        let s = Stats::from_values(&mut [5.0]).unwrap();
        assert_eq!(
            (s.count, s.mean, s.stddev, s.p50, s.p999),
            (1, 5.0, 0.0, 5.0, 5.0)
        );
        assert_eq!(Stats::from_values(&mut []), None);
    }

    #[test]
    fn nanosecond_stats_are_reported_in_milliseconds() {
        // 1, 2, 3, 4 ms in ns: the same statistics as [1, 2, 3, 4].
        let s = Stats::from_ns_as_ms(&[3_000_000, 1_000_000, 4_000_000, 2_000_000]).unwrap();
        let f = Stats::from_values(&mut [1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s, f);
    }

    #[test]
    fn nanosecond_stddev_is_exact_and_independent_of_order() {
        // [1, 2, 3, 4] ms: n·Σx² − (Σx)² = 4·30 − 100 = 20 (in ms²), over 4·3 = 12 → sqrt(5/3).
        let ms = |v: u64| v * 1_000_000;
        let forward = Stats::from_ns_as_ms(&[1, 2, 3, 4].map(ms)).unwrap();
        let backward = Stats::from_ns_as_ms(&[4, 3, 2, 1].map(ms)).unwrap();
        assert!(close(forward.stddev, (5.0f64 / 3.0).sqrt()));
        assert_eq!(forward, backward);
    }

    #[test]
    fn nanosecond_stddev_falls_back_when_squares_overflow_u128() {
        // Values near 2^64 ns: their squares overflow a u128 sum, so the float formula takes over.
        let values = [1u64 << 63, u64::MAX, u64::MAX, u64::MAX];
        let s = Stats::from_ns_as_ms(&values).unwrap();
        // Values a = 2^63, b = 2^64 (as floats): mean = (a + 3b)/4, squares (3/4·2^63)² + 3·(1/4·2^63)²
        // = 2^126·(9 + 3)/16 = 0.75·2^126, over 3 → 0.25·2^126 → stddev 2^62 ns.
        assert!((s.stddev - (1u64 << 62) as f64 / 1e6).abs() < 1e-3 * s.stddev);
        assert_eq!(s.max, u64::MAX as f64 / 1e6);
    }

    #[test]
    fn small_samples_read_their_extremes_as_percentile_neighbours() {
        // n = 2: every percentile interpolates between min and max, which are not selected but known.
        let s = Stats::from_ns_as_ms(&[4_000_000, 2_000_000]).unwrap();
        // p50: index 0.5 → 3; p90: index 0.9 → 3.8.
        assert_eq!((s.min, s.max, s.p50), (2.0, 4.0, 3.0));
        assert!(close(s.p90, 3.8));
        let s = Stats::from_ns_as_ms(&[3_000_000, 1_000_000, 2_000_000]).unwrap();
        assert_eq!((s.min, s.p50, s.max), (1.0, 2.0, 3.0));
    }

    #[test]
    fn selected_float_ranks_are_what_a_sorted_copy_holds() {
        // Gaps in seconds from whole nanoseconds, zeros and repeats among them, a negative and −0 too.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut values: Vec<f64> = (0..50_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 10 == 0 {
                    0.0
                } else {
                    (x % 20_000_000) as f64 / 1e9
                }
            })
            .collect();
        values.extend([-1.5, -0.0, 0.0]);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let n = values.len();
        let ranks = [n - 1, 0, 1, n / 2, 5_001, 5_000, n / 2, 49_999, n - 2];
        let want: Vec<u64> = ranks.iter().map(|&r| sorted[r].to_bits()).collect();
        let got: Vec<u64> = select_f64_ranks(&values, &ranks)
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(got, want);
        // The extremes alone: −1.5 and the largest gap.
        assert_eq!(
            select_f64_ranks(&values, &[n - 1, 0]),
            vec![sorted[n - 1], -1.5]
        );
        assert_eq!(select_f64_ranks(&[], &[]), Vec::<f64>::new());
        assert_eq!(select_f64_ranks(&[2.0], &[0, 0]), vec![2.0, 2.0]);
    }

    /// Checks `select_ranks` against a full sort at many ranks, the reported percentiles among them.
    fn assert_selects_like_sorting(values: &[u64]) {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let n = values.len();
        let mut ranks: Vec<usize> = (0..n)
            .step_by(n / 97 + 1)
            .chain(interior_ranks(n))
            .chain([n - 1])
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        let mut selected = Vec::new();
        select_ranks(values, sorted[0], sorted[n - 1], &ranks, &mut selected);
        let expected: Vec<u64> = ranks.iter().map(|&r| sorted[r]).collect();
        assert_eq!(selected, expected);
    }

    #[test]
    fn bucketed_selection_finds_the_same_order_statistics_as_sorting() {
        let n = 50_000u64;
        // Scrambled distinct values over a wide span.
        assert_selects_like_sorting(
            &(0..n)
                .map(|i| (i * 7919 % n) * 1_000_003)
                .collect::<Vec<_>>(),
        );
        // All equal, and two distinct values.
        assert_selects_like_sorting(&vec![42; n as usize]);
        assert_selects_like_sorting(
            &(0..n)
                .map(|i| if i % 3 == 0 { 5 } else { 9 })
                .collect::<Vec<_>>(),
        );
        // A tight cluster (10 ms ± 1 µs) with a 30 s stall: the first level lumps the cluster into one bucket,
        // the second resolves it.
        let mut stalled: Vec<u64> = (0..n).map(|i| 10_000_000 + (i * 7919 % 2000)).collect();
        stalled[123] = 30_000_000_000;
        assert_selects_like_sorting(&stalled);
        // Geometric spread down to 0 and up to the top of u64, with many duplicates.
        assert_selects_like_sorting(&(0..n).map(|i| u64::MAX >> (i % 64)).collect::<Vec<_>>());
        assert_selects_like_sorting(&(0..n).map(|i| (i % 64).pow(7)).collect::<Vec<_>>());
        // Small samples take the sorting path.
        assert_selects_like_sorting(&[3, 1, 2]);
    }

    #[test]
    fn selected_percentiles_equal_those_of_a_full_sort() {
        // A scrambled sample of 10,007 values (7919 is prime to 10,007, so i·7919 mod 10,007 visits each value
        // once): the selection must read the same order statistics as sorting does.
        let n = 10_007u64;
        let values: Vec<u64> = (0..n).map(|i| (i * 7919 % n) * 1000 + i % 3).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        let sorted_ms: Vec<f64> = sorted.iter().map(|&v| ns_to_ms(v)).collect();
        let s = Stats::from_ns_as_ms(&values).unwrap();
        assert_eq!(s.min, sorted_ms[0]);
        assert_eq!(s.max, sorted_ms[sorted_ms.len() - 1]);
        for (got, p) in [
            (s.p50, 0.5),
            (s.p90, 0.9),
            (s.p95, 0.95),
            (s.p99, 0.99),
            (s.p999, 0.999),
        ] {
            assert_eq!(Some(got), percentile_linear(&sorted_ms, p), "p{p}");
        }
    }
}
