//! The exactly rounded sum of floats (Shewchuk's algorithm, as Python's `math.fsum`): the exact sum of every
//! value added, rounded once. It does not depend on the order the values come in, so a mean or a variance taken
//! over a sample held in memory and over the same sample streamed back from disk in another order are the same to
//! the last bit — what lets a long run's reports be computed from its spill files exactly as a short run's are.
//!
//! The state is a handful of non-overlapping partial sums (at most a few dozen for any finite doubles), so it
//! costs nothing to keep one per metric.

/// A running exact sum of finite floats. Non-finite values are summed apart, as IEEE arithmetic would (an
/// infinity stays infinite, opposite infinities or a NaN give NaN).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fsum {
    /// Non-overlapping partial sums, increasing in magnitude; their exact sum is the sum so far.
    partials: Vec<f64>,
    /// The sum of the non-finite values added, 0 when there were none.
    special: f64,
}

impl Fsum {
    pub fn new() -> Fsum {
        Fsum::default()
    }

    /// Adds `x` exactly.
    pub fn add(&mut self, x: f64) {
        if !x.is_finite() {
            self.special += x;
            return;
        }
        let mut x = x;
        let mut i = 0;
        for j in 0..self.partials.len() {
            let mut y = self.partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        self.partials.truncate(i);
        self.partials.push(x);
    }

    /// Adds everything `other` holds: the same as adding its values one by one.
    pub fn merge(&mut self, other: &Fsum) {
        for &p in &other.partials {
            self.add(p);
        }
        self.special += other.special;
    }

    /// The exact sum, correctly rounded to the nearest double (ties to even), as `math.fsum` rounds it.
    pub fn value(&self) -> f64 {
        if self.special != 0.0 || self.special.is_nan() {
            return self.special;
        }
        let partials = &self.partials;
        let mut n = partials.len();
        if n == 0 {
            return 0.0;
        }
        n -= 1;
        let mut hi = partials[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = partials[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // Half-way cases: the partials below decide which way the rounding goes.
        if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
        hi
    }
}

/// The exactly rounded sum of `values`.
pub fn fsum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut sum = Fsum::new();
    values.into_iter().for_each(|v| sum.add(v));
    sum.value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fsum_is_exact_where_naive_summation_is_not() {
        // 0.1 + 0.2 + 0.3 naively is 0.6000000000000001; exactly rounded it is 0.6.
        assert_eq!(fsum([0.1, 0.2, 0.3]), 0.6);
        // A large value cancelled by its negative leaves the small ones intact.
        assert_eq!(fsum([1e100, 1.0, -1e100, 1e-100]), 1.0 + 1e-100);
        assert_eq!(fsum([]), 0.0);
        assert_eq!(fsum([f64::INFINITY, 1.0]), f64::INFINITY);
        assert!(fsum([f64::INFINITY, f64::NEG_INFINITY]).is_nan());
    }

    #[test]
    fn merged_sums_equal_one_sum() {
        let mut a = Fsum::new();
        let mut b = Fsum::new();
        [1e16, 1.0, 3.3].iter().for_each(|&v| a.add(v));
        [-1e16, 0.7, 1e-3].iter().for_each(|&v| b.add(v));
        a.merge(&b);
        assert_eq!(a.value(), fsum([1e16, 1.0, 3.3, -1e16, 0.7, 1e-3]));
    }

    proptest! {
        #[test]
        fn fsum_does_not_depend_on_order(
            mut values in proptest::collection::vec(-1e12f64..1e12, 0..200),
            seed in any::<u64>(),
        ) {
            let forward = fsum(values.iter().copied());
            // A deterministic shuffle.
            let mut x = seed | 1;
            for i in (1..values.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                values.swap(i, (x % (i as u64 + 1)) as usize);
            }
            prop_assert_eq!(forward.to_bits(), fsum(values.iter().copied()).to_bits());
        }
    }
}
