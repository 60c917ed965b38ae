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
    lsd_sort(v, span_bits, |e| bits(e) - lo);
}

/// Sorts `v` stably by `key`, whose values are below 2^`span_bits`: least significant digit first, each pass a
/// counting sort, which keeps equal digits in the order they come.
fn lsd_sort<T: Copy + Default>(v: &mut Vec<T>, span_bits: u32, key: impl Fn(&T) -> u64) {
    if span_bits == 0 {
        return;
    }
    let passes = span_bits.div_ceil(MAX_DIGIT_BITS);
    let digit_bits = span_bits.div_ceil(passes);
    let buckets = 1usize << digit_bits;
    let mask = (buckets - 1) as u64;
    let digit = |e: &T, pass: u32| ((key(e) >> (pass * digit_bits)) & mask) as usize;
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
        if counts.contains(&src.len()) {
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

/// `(time, weight)` events whose times lie in a range fixed beforehand (non-negative seconds) and whose weights
/// are whole numbers (counts of requests or tokens), packed one to a `u64`: the time's bits above the range's
/// first, then the weight. Half the memory of `(f64, f64)` pairs, and [`sort`](Self::sort)ed by time in radix
/// passes over the time bits alone, which keep events at equal times in the order they came: the order
/// `stable_sort_by_f64_key` gives the pairs.
#[derive(Debug, Clone)]
pub struct PackedEvents {
    /// The bits of the range's first time.
    lo: u64,
    /// How many bits the times above `lo` take; the weights have the rest.
    span_bits: u32,
    packed: Vec<u64>,
}

impl PackedEvents {
    /// Room for `capacity` events at times from `first` to `last` (or a little beyond: the range is a power of
    /// two of steps of the float's bits); none unless `first` ≤ `last` are
    /// non-negative and finite, or when the range leaves the weights too few bits (fewer than 8).
    pub fn new(first: f64, last: f64, capacity: usize) -> Option<PackedEvents> {
        if !(first.is_finite() && last.is_finite() && !first.is_sign_negative() && first <= last) {
            return None;
        }
        let lo = first.to_bits();
        // At least one bit, so a weight's shift stays below 64.
        let span_bits = (u64::BITS - (last.to_bits() - lo).leading_zeros()).max(1);
        (span_bits <= u64::BITS - 8).then(|| PackedEvents {
            lo,
            span_bits,
            packed: Vec::with_capacity(capacity),
        })
    }

    fn weight_bits(&self) -> u32 {
        u64::BITS - self.span_bits
    }

    /// Adds an event; false, adding nothing, when its time is outside the range, or its weight is not a whole
    /// number (+0 included, −0 not) below 2^(64 − the range's bits).
    pub fn push(&mut self, t: f64, w: f64) -> bool {
        let above = t.to_bits().wrapping_sub(self.lo);
        let weight_bits = self.weight_bits();
        let fits = t.to_bits() >= self.lo
            && above >> self.span_bits == 0
            && w.to_bits() >> 63 == 0
            && w.fract() == 0.0
            && w < (1u64 << weight_bits) as f64;
        if fits {
            self.packed.push(above << weight_bits | w as u64);
        }
        fits
    }

    /// Sorts the events by time, stably.
    pub fn sort(&mut self) {
        let weight_bits = self.weight_bits();
        lsd_sort(&mut self.packed, self.span_bits, |&p| p >> weight_bits);
    }

    pub fn len(&self) -> usize {
        self.packed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    /// The events, as `(time, weight)`, in the order they are held.
    pub fn iter(&self) -> PackedIter<'_> {
        PackedIter {
            lo: self.lo,
            weight_bits: self.weight_bits(),
            packed: self.packed.iter(),
        }
    }
}

/// [`PackedEvents::iter`].
#[derive(Debug, Clone)]
pub struct PackedIter<'a> {
    lo: u64,
    weight_bits: u32,
    packed: std::slice::Iter<'a, u64>,
}

impl Iterator for PackedIter<'_> {
    type Item = (f64, f64);

    #[inline]
    fn next(&mut self) -> Option<(f64, f64)> {
        let &p = self.packed.next()?;
        let mask = (1u64 << self.weight_bits) - 1;
        Some((
            f64::from_bits(self.lo + (p >> self.weight_bits)),
            (p & mask) as f64,
        ))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.packed.size_hint()
    }
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
    fn packed_events_sort_as_the_pairs_do_and_refuse_what_does_not_fit() {
        // Times on a 1 µs grid over 10 s of epoch seconds (many repeat), weights whole token counts, each
        // distinct so its place among equal times shows.
        let pairs: Vec<(f64, f64)> = numbers(5)
            .take(30_000)
            .enumerate()
            .map(|(i, x)| (1.764e9 + (x % 10_000_000) as f64 / 1e6, i as f64))
            .collect();
        let mut packed = PackedEvents::new(1.764e9, 1.764e9 + 10.0, pairs.len()).expect("fits");
        for &(t, w) in &pairs {
            assert!(packed.push(t, w));
        }
        assert_eq!(packed.iter().collect::<Vec<_>>(), pairs);
        packed.sort();
        assert_eq!(packed.iter().collect::<Vec<_>>(), by_comparison(&pairs));
        // Outside the range (10 s at 2^30 s takes 26 bits of 2^-22 s steps: up to 16 s past the first), a
        // fraction, −0, a negative weight: refused, nothing added.
        assert!(packed.push(1.764e9 + 15.0, 1.0));
        packed.packed.pop();
        for (t, w) in [
            (1.763e9, 1.0),
            (1.764e9 + 17.0, 1.0),
            (1.764e9, 0.5),
            (1.764e9, -0.0),
            (1.764e9, -1.0),
        ] {
            assert!(!packed.push(t, w), "{t} {w}");
        }
        assert_eq!(packed.len(), pairs.len());
        // 10 s at 2^30 s has 2^-22 s steps: 26 bits of time, leaving 38 for weights.
        assert!(packed.push(1.764e9, (1u64 << 38) as f64 - 1.0));
        assert!(!packed.push(1.764e9, (1u64 << 38) as f64));
        // A range over every bit leaves no room; a negative or reversed one is none.
        assert!(PackedEvents::new(0.0, f64::MAX, 1).is_none());
        assert!(PackedEvents::new(-1.0, 1.0, 1).is_none());
        assert!(PackedEvents::new(2.0, 1.0, 1).is_none());
        // One instant: a range of one bit, the instant and the float after it; the one after that is out.
        let mut one = PackedEvents::new(3.0, 3.0, 2).expect("fits");
        let next = |k: u64| f64::from_bits(3f64.to_bits() + k);
        assert!(one.push(next(1), 7.0) && one.push(3.0, 0.0) && !one.push(next(2), 1.0));
        one.sort();
        assert_eq!(
            one.iter().collect::<Vec<_>>(),
            vec![(3.0, 0.0), (next(1), 7.0)]
        );
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
