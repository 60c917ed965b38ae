//! Which LoRA adapter each request of a run names as its `model`, chosen before the clock starts as each tool
//! chooses it:
//!
//! - vLLM's bench (`vllm/benchmarks/serve.py`, `benchmark()`, at vllm-project/vllm 009e6d4): after the warm-ups,
//!   `round-robin` takes `lora_modules[i % len]` for input request `i`; `random` (the default) takes
//!   `[random.choice(lora_modules) for _ in range(len(input_requests))]` from Python's global generator, which
//!   `main_async` seeded with `random.seed(args.seed)`. Each request then sends the adapter as both `model` and
//!   `model_name`; the warm-ups keep the base model.
//! - inference-perf (`loadgen/load_generator.py` `_get_lora_adapter`, at kubernetes-sigs/inference-perf 7de5ef2):
//!   `np.random.choice(adapters, p=splits)` per request, from numpy's legacy global generator, which the main
//!   process never seeds. llmbench seeds a legacy `RandomState` with the run's seed instead, so a run repeats;
//!   `choice` with `p` is `cdf = cumsum(p); cdf /= cdf[-1]; cdf.searchsorted(random_sample(), side="right")`
//!   (`numpy/random/mtrand.pyx`).

use crate::workload::{LoraPick, LoraTraffic};
use llmbench_text::py_random::{NumpyRandomState, PyRandom};

/// For each of `count` requests in send order, the index of its adapter in `lora.adapters`.
pub(crate) fn assign(lora: &LoraTraffic, count: usize) -> Vec<usize> {
    let n = lora.adapters.len().max(1);
    match &lora.pick {
        LoraPick::RoundRobin => (0..count).map(|i| i % n).collect(),
        LoraPick::PythonChoice { seed } => {
            let mut random = PyRandom::seed(*seed);
            (0..count)
                .map(|_| random.choice_index(n).unwrap_or(0))
                .collect()
        }
        LoraPick::Weighted { weights, seed } => {
            let mut cdf: Vec<f64> = weights
                .iter()
                .scan(0.0, |sum, w| {
                    *sum += w;
                    Some(*sum)
                })
                .collect();
            let total = cdf.last().copied().unwrap_or(1.0);
            for c in &mut cdf {
                *c /= total;
            }
            let mut random = NumpyRandomState::seed(*seed);
            (0..count)
                .map(|_| {
                    let u = random.random_sample();
                    cdf.partition_point(|c| *c <= u).min(n - 1)
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(pick: LoraPick) -> LoraTraffic {
        LoraTraffic {
            adapters: vec!["a".to_owned(), "b".to_owned(), "c".to_owned()],
            pick,
        }
    }

    #[test]
    fn round_robin_cycles_through_the_adapters_in_their_order() {
        assert_eq!(
            assign(&traffic(LoraPick::RoundRobin), 7),
            [0, 1, 2, 0, 1, 2, 0]
        );
    }

    #[test]
    fn vllm_random_assignment_is_python_s_random_choice_after_random_seed() {
        // CPython 3: random.seed(0); "".join(random.choice("abc") for _ in range(8)) == "bbabcbbb", and
        // random.seed(42) gives "caacbaaa": each choice is _randbelow(3), the top two bits of one 32-bit output,
        // drawn again when they make 3.
        let picks = |seed| -> String {
            assign(&traffic(LoraPick::PythonChoice { seed }), 8)
                .into_iter()
                .map(|i| ["a", "b", "c"][i])
                .collect()
        };
        assert_eq!(picks(0), "bbabcbbb");
        assert_eq!(picks(42), "caacbaaa");
    }

    #[test]
    fn weighted_assignment_is_numpy_s_choice_with_p_on_a_seeded_random_state() {
        // rs = np.random.RandomState(0); rs.choice(["a", "b", "c"], p=[0.5, 0.25, 0.25]) six times: its
        // random_sample() draws are np.random.seed(0)'s well-known 0.5488, 0.7152, 0.6028, 0.5449, 0.4237,
        // 0.6459 (checked with CPython's Mersenne Twister set to init_genrand(0)); against the cdf
        // [0.5, 0.75, 1.0] (searchsorted, side right) that is b, b, b, b, a, b.
        let picks: String = assign(
            &traffic(LoraPick::Weighted {
                weights: vec![0.5, 0.25, 0.25],
                seed: 0,
            }),
            6,
        )
        .into_iter()
        .map(|i| ["a", "b", "c"][i])
        .collect();
        assert_eq!(picks, "bbbbab");
    }

    #[test]
    fn a_zero_weight_adapter_is_never_chosen() {
        let picks = assign(
            &traffic(LoraPick::Weighted {
                weights: vec![0.0, 1.0, 0.0],
                seed: 7,
            }),
            200,
        );
        assert!(picks.iter().all(|&i| i == 1), "{picks:?}");
    }
}
