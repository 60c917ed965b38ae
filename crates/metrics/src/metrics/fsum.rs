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

/// The exactly rounded sum of `values`: the bits adding each to an [`Fsum`] gives, a few times faster on many
/// values. Each finite value is an integer mantissa times a power of two fixed by its exponent; the mantissas
/// are summed exactly per exponent (in 128 bits, room for 2^73 of them), and only those sums, cut into pieces
/// a float holds exactly, go through an [`Fsum`]. The exact sum is the same, so is its correct rounding; a zero
/// sum is −0 only when every value was −0, as [`Fsum`] gives it. Non-finite values and values too large for
/// their pieces to stay finite go to the [`Fsum`] as they come.
pub fn fsum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut bins = vec![0i128; BINNED_EXPONENTS];
    let mut rest = Fsum::new();
    let (mut any, mut not_all_negative_zero) = (false, false);
    for v in values {
        let bits = v.to_bits();
        any = true;
        not_all_negative_zero |= bits != NEGATIVE_ZERO;
        let exponent = ((bits >> 52) & 0x7ff) as usize;
        if exponent >= BINNED_EXPONENTS {
            rest.add(v);
            continue;
        }
        let fraction = i128::from(bits & FRACTION);
        // A subnormal's (exponent 0) scale is that of exponent 1, without the implicit bit.
        let (bin, mantissa) = if exponent == 0 {
            (1, fraction)
        } else {
            (exponent, fraction | 1 << 52)
        };
        if bits >> 63 == 1 {
            bins[bin] -= mantissa;
        } else {
            bins[bin] += mantissa;
        }
    }
    for (exponent, &sum) in bins.iter().enumerate() {
        if sum == 0 {
            continue;
        }
        let magnitude = sum.unsigned_abs();
        for shift in [0u32, 53, 106] {
            let chunk = ((magnitude >> shift) & ((1 << 53) - 1)) as u64;
            if chunk != 0 {
                // chunk · 2^(exponent − 1075 + shift), exactly: a multiple of 2^−1074 of at most 53 bits.
                let piece = scaled(chunk, exponent as i32 - 1075 + shift as i32);
                rest.add(if sum < 0 { -piece } else { piece });
            }
        }
    }
    let value = rest.value();
    if value == 0.0 && any && !not_all_negative_zero {
        -0.0
    } else {
        value
    }
}

/// Exponents (biased) whose values [`fsum`] bins: below this, a bin's largest piece (2^53 · 2^(e − 1075 + 106))
/// stays far below the largest float.
const BINNED_EXPONENTS: usize = 1900;
const FRACTION: u64 = (1 << 52) - 1;
const NEGATIVE_ZERO: u64 = 1 << 63;

/// `m · 2^k` for `m` < 2^53 and −1074 ≤ `k` ≤ 1000, exactly (the result is a multiple of 2^−1074 of at most 53
/// significant bits, which a float holds).
fn scaled(m: u64, k: i32) -> f64 {
    let power = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    if k >= -1022 {
        m as f64 * power(k)
    } else {
        // m · 2^(k + 64) is normal and exact; the second product is the exact result, rounded to itself.
        m as f64 * power(k + 64) * power(-64)
    }
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

    /// Adding one by one to an [`Fsum`], which [`fsum`] must match to the bit.
    fn one_by_one(values: &[f64]) -> f64 {
        let mut sum = Fsum::new();
        values.iter().for_each(|&v| sum.add(v));
        sum.value()
    }

    #[test]
    fn binned_sums_give_the_bits_of_adding_one_by_one() {
        let tiny = f64::from_bits(1);
        let cases: Vec<Vec<f64>> = vec![
            vec![],
            vec![-0.0],
            vec![-0.0, -0.0],
            vec![0.0, -0.0],
            vec![-0.0, 1.0, -1.0],
            vec![1.0, -1.0],
            vec![0.1, 0.2, 0.3],
            vec![1e100, 1.0, -1e100, 1e-100],
            // Subnormals, alone and against normals; the smallest positive float's halves round to even.
            vec![tiny, tiny, tiny],
            vec![f64::MIN_POSITIVE, -tiny, 3.0 * tiny],
            vec![1.0, 1.1102230246251565e-16],
            vec![1.0, 1.1102230246251565e-16, tiny],
            vec![1.0, 1.1102230246251565e-16, -tiny],
            // Past the binned exponents, near the largest float, and beyond it.
            vec![1e300, 1e-300, -1e300],
            vec![f64::MAX, -f64::MAX, 1.0],
            vec![f64::INFINITY, 1.0],
            vec![f64::INFINITY, f64::NEG_INFINITY],
            vec![f64::NAN, 1.0],
            // 2^53 values of 1 would not fit a float's mantissa; their sum in one bin is exact.
            vec![9007199254740992.0, 1.0, 1.0, 1.0],
        ];
        for values in &cases {
            let (want, got) = (one_by_one(values), fsum(values.iter().copied()));
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "{values:?}: {want:e} vs {got:e}"
            );
        }
        // Many values of mixed signs and scales, squares of deviations among them.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let values: Vec<f64> = (0..100_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = f64::from_bits(x >> 2) % 1e6;
                let v = if i % 3 == 0 { -v } else { v };
                if i % 7 == 0 { (v - 0.37).powi(2) } else { v }
            })
            .collect();
        assert_eq!(
            one_by_one(&values).to_bits(),
            fsum(values.iter().copied()).to_bits()
        );
    }

    proptest! {
        #[test]
        fn binned_sums_match_adding_one_by_one(
            values in proptest::collection::vec(
                prop_oneof![-1e12f64..1e12, -1e-300f64..1e-300, any::<f64>()],
                0..200,
            ),
        ) {
            let (want, got) = (one_by_one(&values), fsum(values.iter().copied()));
            prop_assert!(want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()));
        }

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
