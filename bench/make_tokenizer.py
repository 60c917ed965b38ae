"""Builds the benchmark's local tokenizer: a byte-level BPE (GPT-2 style, the kind Llama 3 and Qwen use) trained on
the text that ships with Python (pydoc's English topic pages and the standard library's top-level modules), so it needs no network and is the same on every
machine with the same Python. Writes tokenizer.json + tokenizer_config.json, which transformers' AutoTokenizer
(guidellm, inference-perf) and llmbench (`--tokenizer DIR`) all load offline.

usage: python make_tokenizer.py OUT_DIR [VOCAB_SIZE]
"""

import json
import os
import sys
import sysconfig

from pydoc_data.topics import topics
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS = "<|endoftext|>"


def main() -> None:
    out = sys.argv[1]
    vocab_size = int(sys.argv[2]) if len(sys.argv) > 2 else 32000
    os.makedirs(out, exist_ok=True)
    text = [topics[k] for k in sorted(topics)]
    stdlib = sysconfig.get_paths()["stdlib"]
    for name in sorted(os.listdir(stdlib)):
        if name.endswith(".py"):
            with open(os.path.join(stdlib, name), encoding="utf-8", errors="replace") as f:
                text.append(f.read())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text, trainer=trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOS,
        "eos_token": EOS,
        "unk_token": EOS,
        "add_bos_token": False,
        "model_max_length": 1 << 20,
        "clean_up_tokenization_spaces": False,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": EOS, "eos_token": EOS, "unk_token": EOS}, f, indent=2)
    print(f"tokenizer: {out} ({tok.get_vocab_size()} tokens)")


if __name__ == "__main__":
    main()
