//! CPython's `random` module, as far as inference-perf's trace session replay uses it: `random.seed(n)` for a
//! non-negative int, then `random.shuffle(list)`. The order a corpus of sessions is replayed in is this shuffle of
//! its row indices (`otel_trace_replay_datagen.py`: `random.seed(self.base_seed); random.shuffle(order)`), so
//! reproducing it exactly makes a stage replay the same sessions in the same order as upstream.
//!
//! MT19937 with CPython's seeding (`Modules/_randommodule.c`: `random_seed` → `init_by_array` over the seed's
//! 32-bit words, least significant first), `getrandbits(k)` for k ≤ 32 (`genrand_uint32() >> (32 − k)`),
//! `_randbelow_with_getrandbits` (rejection sampling on `n.bit_length()` bits) and `shuffle` (Fisher–Yates from
//! the end: `for i in reversed(range(1, len(x))): j = _randbelow(i + 1)`), all from `Lib/random.py`; `random()`
//! (`random_random`: 53 bits from two draws) and `expovariate(lambd)` (`-log(1.0 - random()) / lambd`), which
//! AIPerf's Poisson rate generator draws its gaps with (`aiperf/timing/request_rate_strategy.py`).
//!
//! The same generator seeded as numpy's legacy `RandomState(seed)` seeds it ([`NumpyRandomState`]), for
//! `DataFrame.sample(n, random_state=seed)`, which vLLM's BurstGPT dataset samples its rows with.

const N: usize = 624;

/// The seed AIPerf 0.13 gives the generator of component `identifier` in a run seeded with `root`
/// (`aiperf/common/random_generator.py` `_RNGManager.derive`): the first 8 bytes, big-endian, of
/// SHA-256(`f"{root}:{identifier}"`). Its `RandomGenerator` seeds a CPython `random.Random` with it, so
/// `PyRandom::seed(aiperf_derived_seed(…))` draws what AIPerf draws.
pub fn aiperf_derived_seed(root: u64, identifier: &str) -> u64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{root}:{identifier}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}
const M: usize = 397;

/// A Mersenne Twister seeded as CPython's `random.seed(n)` seeds it.
#[derive(Clone)]
pub struct PyRandom {
    state: Box<[u32; N]>,
    index: usize,
    /// `Random.gauss_next`: the second normal of the last pair `gauss` drew, handed out by the next call.
    gauss_next: Option<f64>,
}

impl PyRandom {
    /// `random.seed(seed)` for a non-negative int.
    pub fn seed(seed: u64) -> PyRandom {
        // `random_seed`: the absolute value's 32-bit words, least significant first; 0 is one word, 0.
        let low = seed as u32;
        let high = (seed >> 32) as u32;
        let key: Vec<u32> = if high == 0 {
            vec![low]
        } else {
            vec![low, high]
        };
        let mut rng = PyRandom {
            state: Box::new([0; N]),
            index: N,
            gauss_next: None,
        };
        rng.init_by_array(&key);
        rng
    }

    fn init_genrand(&mut self, s: u32) {
        let mt = &mut self.state;
        mt[0] = s;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn init_by_array(&mut self, key: &[u32]) {
        self.init_genrand(19_650_218);
        let mt = &mut self.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
    }

    fn next_u32(&mut self) -> u32 {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        if self.index >= N {
            let mt = &mut self.state;
            for k in 0..N {
                let y = (mt[k] & UPPER) | (mt[(k + 1) % N] & LOWER);
                let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
                mt[k] = mt[(k + M) % N] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `getrandbits(k)` for 1 ≤ k ≤ 32.
    fn getrandbits(&mut self, k: u32) -> u32 {
        self.next_u32() >> (32 - k)
    }

    /// `_randbelow_with_getrandbits(n)` for 1 ≤ n < 2³².
    fn randbelow(&mut self, n: u32) -> u32 {
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random.random()`: `(a·2²⁶ + b) / 2⁵³` with `a` the top 27 bits of one draw and `b` the top 26 of the next.
    pub fn random(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `random.expovariate(lambd)`.
    pub fn expovariate(&mut self, lambd: f64) -> f64 {
        -(1.0 - self.random()).ln() / lambd
    }

    /// `random.gammavariate(alpha, beta)` for `alpha, beta > 0` (`Lib/random.py`): Cheng's rejection method above
    /// a shape of 1, `-log(1 − random()) · beta` at 1, Kennedy & Gentle's algorithm GS below it — the draws
    /// AIPerf's gamma arrivals take their gaps from. `None` for a shape or scale that is not positive (CPython
    /// raises).
    pub fn gammavariate(&mut self, alpha: f64, beta: f64) -> Option<f64> {
        // `alpha <= 0.0 or beta <= 0.0` raises; a NaN passes CPython's test but no caller sends one.
        if !(alpha > 0.0 && beta > 0.0) {
            return None;
        }
        if alpha > 1.0 {
            const LOG4: f64 = std::f64::consts::LN_2 * 2.0;
            // `SG_MAGICCONST = 1.0 + _log(4.5)`.
            let sg_magic = 1.0 + 4.5f64.ln();
            let ainv = (2.0 * alpha - 1.0).sqrt();
            let bbb = alpha - LOG4;
            let ccc = alpha + ainv;
            loop {
                let u1 = self.random();
                if !(1e-7 < u1 && u1 < 0.9999999) {
                    continue;
                }
                let u2 = 1.0 - self.random();
                let v = (u1 / (1.0 - u1)).ln() / ainv;
                let x = alpha * v.exp();
                let z = u1 * u1 * u2;
                let r = bbb + ccc * v - x;
                if r + sg_magic - 4.5 * z >= 0.0 || r >= z.ln() {
                    return Some(x * beta);
                }
            }
        }
        if alpha == 1.0 {
            return Some(-(1.0 - self.random()).ln() * beta);
        }
        let e = std::f64::consts::E;
        loop {
            let u = self.random();
            let b = (e + alpha) / e;
            let p = b * u;
            let x = if p <= 1.0 {
                p.powf(1.0 / alpha)
            } else {
                -((b - p) / alpha).ln()
            };
            let u1 = self.random();
            let accept = if p > 1.0 {
                u1 <= x.powf(alpha - 1.0)
            } else {
                u1 <= (-x).exp()
            };
            if accept {
                return Some(x * beta);
            }
        }
    }

    /// `random.gauss(mu, sigma)`: Box–Muller, two normals per pair of draws, the second kept for the next call.
    pub fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        let z = match self.gauss_next.take() {
            Some(z) => z,
            None => {
                let x2pi = self.random() * std::f64::consts::TAU;
                let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
                self.gauss_next = Some(x2pi.sin() * g2rad);
                x2pi.cos() * g2rad
            }
        };
        mu + z * sigma
    }

    /// AIPerf's `RandomGenerator.sample_positive_normal_integer(mean, stddev)` (`common/random_generator.py`):
    /// `max(1, round(mean))` without a spread, else `gauss` redrawn until it is ≥ 0 (at most 10 000 times, then
    /// the mean), rounded up, at least 1.
    pub fn aiperf_positive_normal_integer(&mut self, mean: f64, stddev: f64) -> u64 {
        if stddev <= 0.0 {
            // Python's `round` rounds halves to even.
            return mean.round_ties_even().max(1.0) as u64;
        }
        let drawn = (0..10_000)
            .map(|_| self.gauss(mean, stddev))
            .find(|n| *n >= 0.0)
            .unwrap_or(mean.max(0.0));
        drawn.ceil().max(1.0) as u64
    }

    /// `random.choice(seq)`'s index into a sequence of `len` items (`_randbelow(len)`); `None` when empty or
    /// past 2³² − 1.
    pub fn choice_index(&mut self, len: usize) -> Option<usize> {
        let n = u32::try_from(len).ok().filter(|n| *n > 0)?;
        Some(self.randbelow(n) as usize)
    }

    /// `random.shuffle(items)`. Lists longer than 2³² − 1 are not shuffled past that index (no corpus comes near).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let Ok(bound) = u32::try_from(i + 1) else {
                continue;
            };
            let j = self.randbelow(bound) as usize;
            items.swap(i, j);
        }
    }
}

/// numpy's legacy `np.random.RandomState(seed)` for a 32-bit seed (`_legacy_seeding` → `mt19937_seed`, Knuth's
/// `init_genrand`), as far as pandas' `DataFrame.sample(n, random_state=seed)` uses it: `choice(len, n,
/// replace)` with no weights (`numpy/random/mtrand.pyx`), whose draws are `random_interval` (masked rejection on
/// 32-bit outputs, `legacy-distributions.c`).
pub struct NumpyRandomState(PyRandom);

impl NumpyRandomState {
    pub fn seed(seed: u32) -> NumpyRandomState {
        let mut rng = PyRandom {
            state: Box::new([0; N]),
            index: N,
            gauss_next: None,
        };
        rng.init_genrand(seed);
        NumpyRandomState(rng)
    }

    /// `random_interval(max)`: uniform in `[0, max]` for `max < 2³²`.
    fn interval(&mut self, max: u32) -> u32 {
        if max == 0 {
            return 0;
        }
        let mask = u32::MAX >> max.leading_zeros();
        loop {
            let value = self.0.next_u32() & mask;
            if value <= max {
                return value;
            }
        }
    }

    /// `choice(population, size, replace=False)`: `permutation(population)[:size]`, the permutation being
    /// `shuffle(arange(population))` (Fisher–Yates from the end with `random_interval(i)`). `None` past 2³².
    pub fn choice_without_replacement(
        &mut self,
        population: usize,
        size: usize,
    ) -> Option<Vec<usize>> {
        u32::try_from(population).ok()?;
        let mut order: Vec<usize> = (0..population).collect();
        for i in (1..population).rev() {
            let j = self.interval(i as u32) as usize;
            order.swap(i, j);
        }
        order.truncate(size);
        Some(order)
    }

    /// `random_sample()`: a double in `[0, 1)` from two outputs, as `random.random()` makes it.
    pub fn random_sample(&mut self) -> f64 {
        self.0.random()
    }

    /// `choice(population, size, replace=True)`: `randint(0, population, size)`, each a `random_interval` of
    /// `population - 1`. `None` when the population is empty or past 2³².
    pub fn choice_with_replacement(
        &mut self,
        population: usize,
        size: usize,
    ) -> Option<Vec<usize>> {
        let max = u32::try_from(population.checked_sub(1)?).ok()?;
        Some((0..size).map(|_| self.interval(max) as usize).collect())
    }
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyRandom")
            .field("index", &self.index)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values printed by CPython 3 on this machine:
    //   random.seed(42); random.getrandbits(32)                  -> 2746317213
    //   random.seed(42); o = list(range(10)); random.shuffle(o) -> [7, 3, 2, 8, 5, 6, 9, 4, 0, 1]
    //   random.seed(7);  o = list(range(3));  random.shuffle(o) -> [2, 0, 1]
    #[test]
    fn seed_42_draws_what_cpython_draws() {
        let mut rng = PyRandom::seed(42);
        assert_eq!(rng.getrandbits(32), 2_746_317_213);
    }

    // random.seed(7); [random.gauss(0, 1) for _ in range(3)]
    //   -> [-0.2558802884476004, 0.511431512516514, -0.2260961647831047]
    #[test]
    fn gauss_draws_what_cpython_draws_keeping_the_second_normal_of_each_pair() {
        let mut rng = PyRandom::seed(7);
        let drawn: Vec<f64> = (0..3).map(|_| rng.gauss(0.0, 1.0)).collect();
        assert_eq!(
            drawn,
            [-0.2558802884476004, 0.511431512516514, -0.2260961647831047]
        );
    }

    // AIPerf 0.13 `--random-seed 1 --conversation-turn-mean 3 --conversation-turn-stddev 1`: its
    // `rng.derive("composer.conversation.turn_count")` drew gauss 0.669…, 3.194…, 4.425…, so 3 conversations of
    // 1, 4 and 5 turns — what the real AIPerf 0.13 sent against `llmbench sim` (its inputs.json).
    #[test]
    fn aiperf_turn_counts_are_its_derived_generators_positive_normal_integers() {
        let mut rng = PyRandom::seed(aiperf_derived_seed(1, "composer.conversation.turn_count"));
        let turns: Vec<u64> = (0..3)
            .map(|_| rng.aiperf_positive_normal_integer(3.0, 1.0))
            .collect();
        assert_eq!(turns, [1, 4, 5]);
        assert_eq!(
            PyRandom::seed(1).aiperf_positive_normal_integer(2.5, 0.0),
            2
        );
    }

    // random.seed(42); [random.random() for _ in range(2)] -> [0.6394267984578837, 0.025010755222666936]
    // random.seed(42); [random.expovariate(2.0) for _ in range(4)]
    //   -> [0.5100301436374005, 0.012664419521369446, 0.1608120320374828, 0.12629309283505677]
    #[test]
    fn random_and_expovariate_draw_what_cpython_draws() {
        let mut rng = PyRandom::seed(42);
        assert_eq!(rng.random(), 0.6394267984578837);
        assert_eq!(rng.random(), 0.025010755222666936);
        let mut rng = PyRandom::seed(42);
        let gaps: Vec<f64> = (0..4).map(|_| rng.expovariate(2.0)).collect();
        assert_eq!(
            gaps,
            [
                0.5100301436374005,
                0.012664419521369446,
                0.1608120320374828,
                0.12629309283505677
            ]
        );
    }

    // hashlib.sha256(b"42:timing.request.poisson_interval").digest()[:8] as a big-endian int
    //   -> 8134544948104704004; random.Random(it): [r.expovariate(10) for _ in range(3)]
    //   -> [0.07315861132188832, 0.035776074871606764, 0.04687624121285631] (a real AIPerf 0.13 run with
    //   `--random-seed 42 --request-rate 10` sent its first requests 73.6, 35.6 and 48.0 ms apart against the sim)
    #[test]
    fn aiperf_derives_a_components_seed_from_sha256_and_draws_with_cpython() {
        let seed = aiperf_derived_seed(42, "timing.request.poisson_interval");
        assert_eq!(seed, 8_134_544_948_104_704_004);
        assert_eq!(
            aiperf_derived_seed(0, "timing.request.poisson_interval"),
            10_970_042_250_496_389_345
        );
        let mut rng = PyRandom::seed(seed);
        let gaps: Vec<f64> = (0..3).map(|_| rng.expovariate(10.0)).collect();
        assert_eq!(
            gaps,
            [
                0.07315861132188832,
                0.035776074871606764,
                0.04687624121285631
            ]
        );
    }

    // CPython 3.11: s = int.from_bytes(sha256(b"42:timing.request.gamma_interval").digest()[:8], "big")
    //   -> 12706910612985774219; r = random.Random(s); [r.gammavariate(k, 1 / (10 * k)) for _ in range(4)] for
    //   k = 0.5, 2.0 and 1.0 (each from a fresh r) — AIPerf's gamma gaps at `--request-rate 10
    //   --arrival-smoothness k --random-seed 42`; then random.Random(7): three gammavariate(0.25, 3.0) and
    //   three gammavariate(5.5, 0.5) from the same generator.
    #[test]
    fn gammavariate_draws_what_cpython_draws_on_each_branch() {
        let seed = aiperf_derived_seed(42, "timing.request.gamma_interval");
        assert_eq!(seed, 12_706_910_612_985_774_219);
        let gaps = |k: f64| -> Vec<f64> {
            let mut rng = PyRandom::seed(seed);
            (0..4)
                .map(|_| rng.gammavariate(k, 1.0 / (10.0 * k)).expect("positive"))
                .collect()
        };
        assert_eq!(
            gaps(0.5),
            [
                0.1776039623429959,
                0.026664615297712902,
                0.005811092887293051,
                0.0003998605412155538
            ]
        );
        assert_eq!(
            gaps(2.0),
            [
                0.12223780171326815,
                0.0627345918064695,
                0.06364547911853832,
                0.035728429286086986
            ]
        );
        assert_eq!(
            gaps(1.0),
            [
                0.08820878513887578,
                0.24313818797318798,
                0.15893538348286673,
                0.03677792846142046
            ]
        );
        let mut rng = PyRandom::seed(7);
        let small: Vec<f64> = (0..3)
            .map(|_| rng.gammavariate(0.25, 3.0).expect("positive"))
            .collect();
        let large: Vec<f64> = (0..3)
            .map(|_| rng.gammavariate(5.5, 0.5).expect("positive"))
            .collect();
        assert_eq!(
            small,
            [0.046908010295885906, 0.7657957450331081, 0.3517552214530447]
        );
        assert_eq!(
            large,
            [1.1389309974547832, 0.9854495924790234, 1.2127796512109803]
        );
        assert_eq!(rng.gammavariate(0.0, 1.0), None);
        assert_eq!(rng.gammavariate(1.0, -1.0), None);
    }

    #[test]
    fn shuffles_as_cpython_shuffles() {
        let mut order: Vec<u32> = (0..10).collect();
        PyRandom::seed(42).shuffle(&mut order);
        assert_eq!(order, [7, 3, 2, 8, 5, 6, 9, 4, 0, 1]);
        let mut order: Vec<u32> = (0..3).collect();
        PyRandom::seed(7).shuffle(&mut order);
        assert_eq!(order, [2, 0, 1]);
    }

    #[test]
    fn a_list_of_one_or_none_is_left_alone() {
        let mut one = [5];
        PyRandom::seed(1).shuffle(&mut one);
        assert_eq!(one, [5]);
        let mut none: [u8; 0] = [];
        PyRandom::seed(1).shuffle(&mut none);
    }

    #[test]
    fn samples_rows_as_numpy_s_legacy_random_state_chooses_them() {
        // numpy 2.4.6: np.random.RandomState(0).permutation(10), RandomState(42).permutation(7),
        // RandomState(0).choice(10, 4, replace=False), RandomState(4294967295).permutation(12).
        let choose = |seed: u32, n: usize, k: usize| {
            NumpyRandomState::seed(seed)
                .choice_without_replacement(n, k)
                .expect("fits")
        };
        assert_eq!(choose(0, 10, 10), [2, 8, 4, 9, 1, 6, 7, 3, 0, 5]);
        assert_eq!(choose(42, 7, 7), [0, 1, 5, 2, 4, 3, 6]);
        assert_eq!(choose(0, 10, 4), [2, 8, 4, 9]);
        assert_eq!(
            choose(u32::MAX, 12, 12),
            [11, 8, 5, 9, 1, 10, 6, 0, 4, 7, 2, 3]
        );
        // RandomState(0).choice(5, 8, replace=True), RandomState(7).choice(300, 6, replace=True).
        let with = |seed: u32, n: usize, k: usize| {
            NumpyRandomState::seed(seed)
                .choice_with_replacement(n, k)
                .expect("fits")
        };
        assert_eq!(with(0, 5, 8), [4, 0, 3, 3, 3, 1, 3, 2]);
        assert_eq!(with(7, 300, 6), [175, 196, 25, 67, 211, 103]);
        assert_eq!(
            NumpyRandomState::seed(0).choice_with_replacement(0, 3),
            None
        );
    }
}
