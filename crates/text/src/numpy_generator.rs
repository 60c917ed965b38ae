//! numpy's `np.random.default_rng(seed)`, as far as Hugging Face `datasets` shuffles with it: `Dataset.shuffle(seed)`
//! takes `default_rng(seed).permutation(len(dataset))`, and a streamed dataset of fewer rows than its shuffle buffer
//! is given the same permutation. vLLM's `hf` datasets are shuffled so (`HuggingFaceDataset.load_data`), so
//! reproducing it sends the same rows in the same order.
//!
//! From numpy 2.x (`numpy/random/bit_generator.pyx`, `_pcg64.pyx`, `src/pcg64/pcg64.h`,
//! `src/distributions/distributions.c`, `_generator.pyx`):
//! - `SeedSequence(seed)`: the seed's 32-bit words (least significant first) hashed into a pool of four words
//!   (`mix_entropy`), then `generate_state(4, uint64)` hashes the pool into eight words read as four little-endian
//!   `u64`s.
//! - `PCG64`: a 128-bit LCG seeded as `pcg_setseq_128_srandom_r(state = words 0‥1, stream = words 2‥3)`, each
//!   output the XSL-RR of the advanced state; `next_uint32` hands out the low half of a 64-bit draw, then its high
//!   half.
//! - `Generator.shuffle` / `permutation(n)`: Fisher–Yates from the end, `j = random_interval(i)` (the smallest
//!   bit mask ≥ i, rejection-sampled on `next_uint32` while i fits in 32 bits).

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;
const PCG_MULTIPLIER: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

/// `np.random.default_rng(seed)` for a non-negative integer seed: a PCG64 generator.
#[derive(Debug, Clone)]
pub struct NumpyGenerator {
    state: u128,
    increment: u128,
    /// The high half of the last 64-bit draw, not yet handed out by `next_uint32`.
    pending_high: Option<u32>,
}

impl NumpyGenerator {
    pub fn seed(seed: u64) -> NumpyGenerator {
        let words = seed_sequence_state(seed);
        let initstate = (u128::from(words[0]) << 64) | u128::from(words[1]);
        let initseq = (u128::from(words[2]) << 64) | u128::from(words[3]);
        let mut rng = NumpyGenerator {
            state: 0,
            increment: (initseq << 1) | 1,
            pending_high: None,
        };
        rng.step();
        rng.state = rng.state.wrapping_add(initstate);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self
            .state
            .wrapping_mul(PCG_MULTIPLIER)
            .wrapping_add(self.increment);
    }

    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let high = (self.state >> 64) as u64;
        let low = self.state as u64;
        (high ^ low).rotate_right((self.state >> 122) as u32)
    }

    /// `Generator.random()`, and `uniform(0.0, 1.0)` (`low + (high - low) * next_double`): the top 53 bits of a
    /// 64-bit draw, times 2⁻⁵³.
    pub fn random(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.pending_high.take() {
            return high;
        }
        let next = self.next_u64();
        self.pending_high = Some((next >> 32) as u32);
        next as u32
    }

    /// `random_interval(max)`: a uniform integer in `0..=max`.
    fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        if max <= u64::from(u32::MAX) {
            loop {
                let value = u64::from(self.next_u32()) & mask;
                if value <= max {
                    return value;
                }
            }
        }
        loop {
            let value = self.next_u64() & mask;
            if value <= max {
                return value;
            }
        }
    }

    /// `Generator.shuffle(items)`, in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.interval(i as u64) as usize;
            items.swap(i, j);
        }
    }

    /// `Generator.permutation(n)`: `0..n` shuffled.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        self.shuffle(&mut order);
        order
    }
}

/// `hashmix` of `SeedSequence`: the running hash constant advanced once per value.
fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut value = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    value = value.wrapping_mul(*hash_const);
    value ^ (value >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let result = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    result ^ (result >> XSHIFT)
}

/// `SeedSequence(seed).generate_state(4, np.uint64)`.
fn seed_sequence_state(seed: u64) -> [u64; 4] {
    // `_coerce_to_uint32_array`: the integer's 32-bit words, least significant first; 0 is one word.
    let entropy: Vec<u32> = if seed >> 32 == 0 {
        vec![seed as u32]
    } else {
        vec![seed as u32, (seed >> 32) as u32]
    };
    let mut hash_const = INIT_A;
    let mut pool = [0u32; POOL_SIZE];
    for (i, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src], &mut hash_const));
            }
        }
    }
    // (An entropy longer than the pool would be mixed in here; a u64 seed is at most two words.)
    let mut hash_const = INIT_B;
    let mut words = [0u32; 2 * 4];
    for (i, word) in words.iter_mut().enumerate() {
        let mut value = pool[i % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        value = value.wrapping_mul(hash_const);
        *word = value ^ (value >> XSHIFT);
    }
    std::array::from_fn(|i| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_draws_match_numpy_default_rng() {
        // numpy 2.4.6: np.random.default_rng(0).integers(0, 2**64, dtype=np.uint64, endpoint=False) draws raw
        // outputs; `random()` is (next_uint64 >> 11) * 2**-53: default_rng(0).random() = 0.6369616873214543,
        // default_rng(42).random() = 0.7739560485559633.
        let unit =
            |seed: u64| (NumpyGenerator::seed(seed).next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        assert_eq!(unit(0), 0.6369616873214543);
        assert_eq!(unit(42), 0.7739560485559633);
    }

    #[test]
    fn uniform_draws_match_numpy_default_rng() {
        // numpy 2.4.6: r = np.random.default_rng(s); r.uniform(0.0, 1.0), r.uniform(0.0, 1.0) for s = 0, 1, 3.
        let cases = [
            (0, [0.6369616873214543, 0.2697867137638703]),
            (1, [0.5118216247002567, 0.9504636963259353]),
            (3, [0.08564916714362436, 0.2368105065960997]),
        ];
        for (seed, expected) in cases {
            let mut rng = NumpyGenerator::seed(seed);
            assert_eq!([rng.random(), rng.random()], expected, "seed {seed}");
        }
    }

    #[test]
    fn permutations_match_numpy_default_rng() {
        // numpy 2.4.6: list(np.random.default_rng(s).permutation(n)) for each (s, n).
        let cases: [(u64, usize, &[usize]); 7] = [
            (0, 8, &[2, 4, 3, 6, 5, 0, 1, 7]),
            (12345, 10, &[4, 8, 1, 3, 7, 9, 6, 0, 2, 5]),
            (7, 3, &[0, 2, 1]),
            ((1 << 40) + 5, 6, &[1, 0, 2, 5, 4, 3]),
            (0, 2, &[0, 1]),
            (3, 5, &[4, 2, 1, 3, 0]),
            (3, 37, &[29, 36, 12, 31, 28, 17, 3, 22]),
        ];
        for (seed, n, head) in cases {
            let got = NumpyGenerator::seed(seed).permutation(n);
            assert_eq!(&got[..head.len()], head, "seed {seed}, n {n}");
        }
    }
}
