#!/usr/bin/env python3
"""Make the tiny model of the real-engine tests: a llama-architecture GGUF with random weights and a real byte-level
BPE tokenizer, written both into the GGUF (as llama.cpp's `gpt2` tokenizer) and as a Hugging Face tokenizer.json, so
llmbench builds its prompts with the very tokenizer the server counts with.

    make-tiny-model.py --gguf-py DIR --corpus FILE... --out DIR

writes DIR/tiny.gguf and DIR/tokenizer.json. Nothing is downloaded: the tokenizer is trained on the local text
given. Everything is seeded, so the same inputs give the same files. The model answers nonsense, fast, on a CPU:
what the tests check is counts and classes (prompt tokens, max_tokens under ignore_eos, cached tokens, finish
reasons, metrics names), never what it says or how fast.

Needs numpy and tokenizers (tests/tools/build-llama-server.sh makes a venv with both) and llama.cpp's gguf-py.
"""

import argparse
import json
import sys
from pathlib import Path

# Small enough to load in a blink and answer hundreds of tokens a second on one core; big enough to be a real llama
# graph (grouped attention off, RoPE, SwiGLU, RMS norm).
VOCAB_SIZE = 1024
N_EMBD = 64
N_HEAD = 4
N_LAYER = 2
N_FF = 128
CONTEXT_LENGTH = 4096
SEED = 20261127

BOS = "<|bos|>"
EOS = "<|eos|>"
# ChatML, as llama.cpp renders it when a model names no template of its own; written into the GGUF so the server
# and anyone reading the model see the same one.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(corpus: list[Path]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS, EOS, "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(p) for p in corpus], trainer)
    # A BOS in front of every encoded text, as Llama's tokenizers add it: the case where a client that counts
    # without special tokens is one short of the server.
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tokenizer


def write_gguf(path: Path, tokenizer, gguf) -> None:
    import numpy as np

    vocab = tokenizer.get_vocab()
    tokens = [""] * len(vocab)
    for text, index in vocab.items():
        tokens[index] = text
    specials = {BOS, EOS, "<|im_start|>", "<|im_end|>"}
    token_types = [
        gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens
    ]
    model = json.loads(tokenizer.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("llmbench-tiny")
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(vocab[BOS])
    writer.add_eos_token_id(vocab[EOS])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(SEED)

    def weight(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    n_vocab = len(tokens)
    writer.add_tensor("token_embd.weight", weight(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones(N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones(N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", ones(N_EMBD))
    writer.add_tensor("output.weight", weight(n_vocab, N_EMBD))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf-py", required=True, type=Path, help="llama.cpp's gguf-py directory")
    parser.add_argument("--corpus", required=True, nargs="+", type=Path, help="text files to train the BPE on")
    parser.add_argument("--out", required=True, type=Path, help="where tiny.gguf and tokenizer.json go")
    args = parser.parse_args()
    sys.path.insert(0, str(args.gguf_py))
    import gguf

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(args.corpus)
    tokenizer.save(str(args.out / "tokenizer.json"))
    write_gguf(args.out / "tiny.gguf", tokenizer, gguf)
    print(f"wrote {args.out / 'tiny.gguf'} and {args.out / 'tokenizer.json'} ({tokenizer.get_vocab_size()} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
