//! The random numbers LoadGen draws, reproduced: `std::mt19937` seeded with the 64-bit settings seed (the engine
//! keeps its low 32 bits), and libstdc++'s (GCC ≥ 11) `exponential_distribution<double>`,
//! `uniform_int_distribution` (Lemire's nearly-divisionless method for a 32-bit engine) and `std::shuffle`.
//! Given the same seeds, the same arrival times and sample indices come out as from a LoadGen built with GCC.

/// The 32-bit Mersenne Twister, `std::mt19937`.
#[derive(Clone)]
pub(crate) struct Mt19937 {
    state: [u32; 624],
    index: usize,
}

impl Mt19937 {
    /// `std::mt19937(seed)`: the seed is taken modulo 2^32.
    pub fn new(seed: u64) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed as u32;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: 624 }
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mut next = self.state[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    next ^= 0x9908_b0df;
                }
                self.state[i] = next;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `std::generate_canonical<double, 53>`: two draws, `(g1 + g2·2^32) / 2^64` summed in double, below 1.
    pub(crate) fn canonical(&mut self) -> f64 {
        const R: f64 = 4_294_967_296.0;
        let mut sum = 0.0f64;
        let mut scale = 1.0f64;
        for _ in 0..2 {
            sum += f64::from(self.next_u32()) * scale;
            scale *= R;
        }
        let value = sum / scale;
        if value >= 1.0 {
            1.0f64.next_down()
        } else {
            value
        }
    }

    /// `std::exponential_distribution<double>(lambda)(gen)`: `−ln(1 − u) / λ`.
    pub fn exponential(&mut self, lambda: f64) -> f64 {
        -(1.0 - self.canonical()).ln() / lambda
    }

    /// `std::uniform_int_distribution(0, n − 1)(gen)` for `1 ≤ n ≤ 2^32`, as libstdc++ draws it from a 32-bit
    /// engine.
    pub(crate) fn uniform_below(&mut self, n: u64) -> u64 {
        if n > u64::from(u32::MAX) {
            // Not reached by any sample count; libstdc++ would upscale here. Keep it total.
            return (u64::from(self.next_u32()) << 32 | u64::from(self.next_u32())) % n.max(1);
        }
        let range = n.max(1) as u32;
        let mut product = u64::from(self.next_u32()) * u64::from(range);
        let mut low = product as u32;
        if low < range {
            let threshold = range.wrapping_neg() % range;
            while low < threshold {
                product = u64::from(self.next_u32()) * u64::from(range);
                low = product as u32;
            }
        }
        product >> 32
    }

    /// `std::shuffle(v.begin(), v.end(), gen)` as libstdc++ does it: when the engine's range covers n², two swap
    /// positions come from one draw.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        let n = v.len() as u64;
        if n < 2 {
            return;
        }
        if u64::from(u32::MAX) / n >= n {
            let mut i = 1u64;
            if n.is_multiple_of(2) {
                let j = self.uniform_below(2);
                v.swap(i as usize, j as usize);
                i += 1;
            }
            while i != n {
                let b0 = i + 1;
                let b1 = b0 + 1;
                let x = self.uniform_below(b0 * b1);
                v.swap(i as usize, (x / b1) as usize);
                i += 1;
                v.swap(i as usize, (x % b1) as usize);
                i += 1;
            }
            return;
        }
        for i in 1..n {
            let j = self.uniform_below(i + 1);
            v.swap(i as usize, j as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_the_standard_reference_value() {
        // C++11 [rand.predef]: the 10000th invocation of a default-constructed mt19937 (seed 5489) is 4123659995.
        let mut g = Mt19937::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = g.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
        // The first outputs for seed 5489 (well known): 3499211612, 581869302.
        let mut g = Mt19937::new(5489);
        assert_eq!((g.next_u32(), g.next_u32()), (3_499_211_612, 581_869_302));
    }

    #[test]
    fn seeds_are_taken_modulo_2_to_the_32() {
        let mut a = Mt19937::new(5489 + (7u64 << 32));
        let mut b = Mt19937::new(5489);
        assert_eq!(a.next_u32(), b.next_u32());
    }

    #[test]
    fn canonical_combines_two_draws_low_word_first() {
        let mut g = Mt19937::new(5489);
        let u = g.canonical();
        let expected =
            (3_499_211_612f64 + 581_869_302f64 * 4_294_967_296.0) / 18_446_744_073_709_551_616.0;
        assert_eq!(u, expected);
        let mut g = Mt19937::new(5489);
        assert_eq!(g.exponential(2.0), -(1.0 - expected).ln() / 2.0);
    }

    #[test]
    fn uniform_below_takes_the_high_word_of_the_product() {
        // 3499211612 · 10 = 34992116120; >> 32 = 8 (8 · 2^32 = 34359738368 ≤ it < 9 · 2^32).
        let mut g = Mt19937::new(5489);
        assert_eq!(g.uniform_below(10), 8);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..101).collect();
        Mt19937::new(42).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..101).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }
}
