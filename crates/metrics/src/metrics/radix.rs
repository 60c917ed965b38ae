//! A stable sort by an `f64` key that gives exactly what `sort_by(|a, b| key(a).total_cmp(&key(b)))` gives, in a
//! few linear passes instead of n·log n comparisons: a least-significant-digit radix sort on the keys' bit
//! patterns. For keys whose sign bit is clear (every non-negative value, +0, +∞ and positive NaNs), `total_cmp`'s
//! order is the order of the bits read as an unsigned integer; an LSD radix sort keeps equal keys in the order
//! given, as the stable sort does. Only the bits that differ between the smallest and the largest key are
//! sorted on: a run's timestamps in epoch seconds, a few seconds or hours apart, differ in their low 25–35 bits
//! only, three passes. Inputs with a negative key, or too short to be worth the passes, take the stable sort.

/// Below this many elements the comparison sort is as quick.
const RADIX_MIN_LEN: usize = 4096;
/// At most this many bits per pass: 2¹¹ counters stay in the first-level cache.
const MAX_DIGIT_BITS: u32 = 11;

/// Sorts `v` by `key`, stably, exactly as `v.sort_by(|a, b| key(a).total_cmp(&key(b)))` does.
pub fn stable_sort_by_f64_key<T: Copy + Default>(v: &mut Vec<T>, key: impl Fn(&T) -> f64) {
    if v.len() < RADIX_MIN_LEN || v.iter().any(|e| key(e).is_sign_negative()) {
        v.sort_by(|a, b| key(a).total_cmp(&key(b)));
        return;
    }
    let bits = |e: &T| key(e).to_bits();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for e in v.iter() {
        let b = bits(e);
        lo = lo.min(b);
        hi = hi.max(b);
    }
    let span_bits = u64::BITS - (hi - lo).leading_zeros();
    if span_bits == 0 {
        return;
    }
    let passes = span_bits.div_ceil(MAX_DIGIT_BITS);
    let digit_bits = span_bits.div_ceil(passes);
    let buckets = 1usize << digit_bits;
    let mask = (buckets - 1) as u64;
    let digit = |e: &T, pass: u32| (((bits(e) - lo) >> (pass * digit_bits)) & mask) as usize;
    // Every pass's counts in one read.
    let mut counts = vec![0usize; buckets * passes as usize];
    for e in v.iter() {
        for pass in 0..passes {
            counts[pass as usize * buckets + digit(e, pass)] += 1;
        }
    }
    let mut dst = vec![T::default(); v.len()];
    let mut src = std::mem::take(v);
    for pass in 0..passes {
        let counts = &mut counts[pass as usize * buckets..][..buckets];
        // A digit every key shares moves nothing.
        if counts.iter().any(|&c| c == src.len()) {
            continue;
        }
        let mut start = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = start;
            start += n;
        }
        for e in &src {
            let d = digit(e, pass);
            dst[counts[d]] = *e;
            counts[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *v = src;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_comparison(v: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let mut sorted = v.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        sorted
    }

    /// A deterministic stream of pseudo-random numbers (xorshift64*).
    fn numbers(seed: u64) -> impl Iterator<Item = u64> {
        let mut x = seed;
        std::iter::repeat_with(move || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        })
    }

    #[test]
    fn equal_keys_keep_the_order_given() {
        // 3.0 (weights 1, 2, 3 in that order), 1.0 (4, 5), 2.0 (6): the stable order by key is
        // (1,4) (1,5) (2,6) (3,1) (3,2) (3,3), repeated past the radix threshold with the key shifted by
        // 10 each time so each copy stays apart.
        let block = [
            (3.0, 1.0),
            (1.0, 4.0),
            (3.0, 2.0),
            (2.0, 6.0),
            (1.0, 5.0),
            (3.0, 3.0),
        ];
        let copies = RADIX_MIN_LEN / block.len() + 1;
        let v: Vec<(f64, f64)> = (0..copies)
            .rev()
            .flat_map(|c| block.map(|(k, w)| (k + 10.0 * c as f64, w)))
            .collect();
        let mut sorted = v.clone();
        stable_sort_by_f64_key(&mut sorted, |e| e.0);
        assert_eq!(
            &sorted[..6],
            &[
                (1.0, 4.0),
                (1.0, 5.0),
                (2.0, 6.0),
                (3.0, 1.0),
                (3.0, 2.0),
                (3.0, 3.0)
            ]
        );
        assert_eq!(sorted, by_comparison(&v));
    }

    #[test]
    fn epoch_times_with_ties_sort_as_the_stable_sort_does() {
        // Times over 10 s of epoch seconds, on a 1 µs grid so many repeat, each with a distinct weight that
        // shows its place among equal times.
        let v: Vec<(f64, f64)> = numbers(7)
            .take(50_000)
            .enumerate()
            .map(|(i, x)| (1.764e9 + (x % 10_000_000) as f64 / 1e6, i as f64))
            .collect();
        let mut sorted = v.clone();
        stable_sort_by_f64_key(&mut sorted, |e| e.0);
        assert_eq!(sorted, by_comparison(&v));
    }

    #[test]
    fn keys_spanning_every_bit_zero_infinity_and_nan_sort_by_total_cmp() {
        let mut v: Vec<(f64, f64)> = numbers(11)
            .take(20_000)
            .enumerate()
            .map(|(i, x)| (f64::from_bits(x >> 1), i as f64))
            .collect();
        v.extend([
            (0.0, -1.0),
            (f64::INFINITY, -2.0),
            (f64::NAN, -3.0),
            (0.0, -4.0),
        ]);
        let mut sorted = v.clone();
        stable_sort_by_f64_key(&mut sorted, |e| e.0);
        let bits = |v: &[(f64, f64)]| -> Vec<(u64, u64)> {
            v.iter().map(|e| (e.0.to_bits(), e.1.to_bits())).collect()
        };
        assert_eq!(bits(&sorted), bits(&by_comparison(&v)));
    }

    #[test]
    fn a_negative_key_falls_back_to_the_comparison_sort() {
        let mut v: Vec<(f64, f64)> = (0..RADIX_MIN_LEN)
            .map(|i| ((i % 7) as f64 - 3.0, i as f64))
            .collect();
        v.push((-0.0, -1.0));
        let mut sorted = v.clone();
        stable_sort_by_f64_key(&mut sorted, |e| e.0);
        assert_eq!(sorted, by_comparison(&v));
        assert_eq!(sorted[0], (-3.0, 0.0));
    }

    #[test]
    fn short_and_constant_inputs_come_back_sorted() {
        let mut short = vec![(2.0, 1.0), (1.0, 2.0), (2.0, 3.0)];
        stable_sort_by_f64_key(&mut short, |e| e.0);
        assert_eq!(short, vec![(1.0, 2.0), (2.0, 1.0), (2.0, 3.0)]);
        let constant: Vec<(f64, f64)> = (0..RADIX_MIN_LEN * 2).map(|i| (5.0, i as f64)).collect();
        let mut sorted = constant.clone();
        stable_sort_by_f64_key(&mut sorted, |e| e.0);
        assert_eq!(sorted, constant);
    }
}
