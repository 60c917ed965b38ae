"""Times inference-perf's own prompt generator (its `random` data type: exact-length prompts of random vocabulary
tokens, converged by re-tokenising) building COUNT prompts of TOKENS tokens with the benchmark tokenizer, the way
its workers do (load_lazy_data per request), stopping early after BUDGET seconds. Prints one JSON line:
{"prompts", "tokens", "seconds", "exact_sample"}.

usage: python peer_prompts.py TOKENIZER_DIR COUNT TOKENS [BUDGET_SECONDS]
"""

import json
import sys
import time

from inference_perf.apis import LazyLoadInferenceAPIData
from inference_perf.config import APIConfig, DataConfig, CustomTokenizerConfig
from inference_perf.datagen.synthetic.random_datagen import RandomDataGenerator
from inference_perf.utils.custom_tokenizer import CustomTokenizer


def main() -> None:
    tokenizer_dir, count, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    budget = float(sys.argv[4]) if len(sys.argv) > 4 else float("inf")
    tokenizer = CustomTokenizer(CustomTokenizerConfig(pretrained_model_name_or_path=tokenizer_dir))
    fixed = {"type": "fixed", "min": tokens, "max": tokens, "mean": tokens, "std_dev": 0, "total_count": count}
    data = DataConfig(
        type="random",
        input_distribution=fixed,
        output_distribution={**fixed, "min": 16, "max": 16, "mean": 16},
    )
    start = time.perf_counter()
    generator = RandomDataGenerator(APIConfig(type="completion"), data, tokenizer, seed=42)
    prompts = []
    for i in range(count):
        prompts.append(generator.load_lazy_data(LazyLoadInferenceAPIData(data_index=i)).prompt)
        if time.perf_counter() - start > budget:
            break
    seconds = time.perf_counter() - start
    sample = prompts[: min(50, count)]
    exact = all(tokenizer.count_tokens(p, add_special_tokens=False) == tokens for p in sample)
    print(json.dumps({"prompts": len(prompts), "tokens": tokens, "seconds": seconds, "exact_sample": exact}))


if __name__ == "__main__":
    main()
