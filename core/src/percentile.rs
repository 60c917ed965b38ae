//! numpy's default percentile (`np.percentile(..., method="linear")`), to the last bit: the one copy behind every
//! p50/p90/p99 llmbench writes, whichever tool's report it imitates (vLLM, guidellm, AIPerf and inference-perf
//! all call numpy).

/// The `p` quantile (a fraction: 0.99 is p99) of a sample sorted ascending, by numpy's default method: the value
/// at virtual index `(n − 1)·p`, interpolated linearly between its neighbours. `None` for an empty sample or a NaN
/// `p`; `p` is clamped to [0, 1].
///
/// `[1, 2, 3, 4]`: p = 0.5 → index 1.5 → 2.5; p = 0.9 → index 2.7 → 3 + 0.7·(4 − 3) = 3.7.
pub fn linear(sorted: &[f64], p: f64) -> Option<f64> {
    linear_at(sorted.len(), p, |i| sorted[i])
}

/// numpy's virtual index `(n − 1)·p` for a non-empty sample, clamped p.
fn virtual_index(n: usize, p: f64) -> f64 {
    (n - 1) as f64 * p.clamp(0.0, 1.0)
}

/// The sorted positions [`linear_at`] reads for `p` in a non-empty sample of `n` values (for a caller that
/// fetches only those two, e.g. from a file).
pub fn linear_neighbours(n: usize, p: f64) -> (usize, usize) {
    let lo = (virtual_index(n, p).floor() as usize).min(n - 1);
    (lo, (lo + 1).min(n - 1))
}

/// [`linear`] of a sample of `n` values that `value(i)` gives in ascending order.
pub fn linear_at(n: usize, p: f64, value: impl Fn(usize) -> f64) -> Option<f64> {
    if n == 0 || p.is_nan() {
        return None;
    }
    let h = virtual_index(n, p);
    let gamma = h - h.floor();
    let (lo, hi) = linear_neighbours(n, p);
    let (a, b) = (value(lo), value(hi));
    let diff = b - a;
    // numpy's `_lerp`: interpolating from the nearer end, as numpy does, gives its results to the last bit.
    Some(if gamma >= 0.5 {
        b - diff * (1.0 - gamma)
    } else {
        a + diff * gamma
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn linear_percentile_interpolates_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        // index (4 − 1)·0.5 = 1.5 → halfway between 2 and 3.
        assert_eq!(linear(&v, 0.5), Some(2.5));
        // index 2.7 → 3 + 0.7·1 = 3.7 (np.percentile([1,2,3,4], 90) == 3.7).
        assert!(close(linear(&v, 0.9).unwrap(), 3.7));
        // index 2.97 → 3.97.
        assert!(close(linear(&v, 0.99).unwrap(), 3.97));
        // index 0.3 → 1.3 (np.percentile([1,2,3,4], 10) == 1.3).
        assert!(close(linear(&v, 0.1).unwrap(), 1.3));
        assert_eq!(linear(&v, 0.0), Some(1.0));
        assert_eq!(linear(&v, 1.0), Some(4.0));
    }

    #[test]
    fn linear_percentile_of_an_uneven_sample() {
        // [10, 20, 40, 80, 160]: p90 → index 3.6 → 80 + 0.6·80 = 128; p25 → index 1 → 20.
        let v = [10.0, 20.0, 40.0, 80.0, 160.0];
        assert!(close(linear(&v, 0.9).unwrap(), 128.0));
        assert_eq!(linear(&v, 0.25), Some(20.0));
    }

    #[test]
    fn linear_percentile_clamps_p_and_rejects_empty_samples() {
        assert_eq!(linear(&[], 0.5), None);
        assert_eq!(linear(&[1.0], f64::NAN), None);
        assert_eq!(linear(&[7.0], 0.99), Some(7.0));
        assert_eq!(linear(&[1.0, 2.0], 1.5), Some(2.0));
        assert_eq!(linear(&[1.0, 2.0], -1.0), Some(1.0));
    }

    /// numpy's `_lerp` interpolates from the nearer neighbour (`b − diff·(1 − γ)` once γ ≥ 0.5), which the
    /// textbook `a + diff·γ` does not: the two differ in the last bit, and a report compared with numpy's
    /// to the bit (AIPerf's profile_export_aiperf.json, guidellm's benchmarks.json) must take numpy's side.
    #[test]
    fn linear_percentile_rounds_as_numpy_does_where_the_textbook_formula_does_not() {
        // p75 of [0, 0.7, 3.3]: index 1.5, γ = 0.5. numpy: 3.3 − 2.6·0.5 = 2.0 exactly;
        // 0.7 + 2.6·0.5 = 1.9999999999999998.
        let textbook = 0.7 + (3.3 - 0.7) * 0.5;
        assert_eq!(textbook, 1.999_999_999_999_999_8);
        assert_eq!(linear(&[0.0, 0.7, 3.3], 0.75), Some(2.0));
        // p90 of [0.1, 0.2, 0.3, 0.7, 3.3]: index 3.6, γ ≈ 0.6. numpy: 3.3 − 2.6·0.4 = 2.2600000000000002
        // (the textbook form gives 2.26).
        assert_eq!(
            linear(&[0.1, 0.2, 0.3, 0.7, 3.3], 0.9),
            Some(2.260_000_000_000_000_2)
        );
        // Below γ = 0.5 both forms agree: p10 of [0.1, 0.7] is 0.1 + 0.6·0.1.
        assert_eq!(linear(&[0.1, 0.7], 0.1), Some(0.1 + (0.7 - 0.1) * 0.1));
    }
}
