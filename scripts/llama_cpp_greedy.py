#!/usr/bin/env python3
"""Greedy ids of a GGUF under llama.cpp itself (llama-cpp-python), for tests/gguf.rs.

Prints one JSON line per prompt: {"prompt": [ids], "greedy": [ids]}. The KV cache is f32 and
flash attention off, as candle computes attention, so only the matmuls' arithmetic differs.
Weights are not repacked (llama.cpp's `--no-repack`): on CPUs with AMX, llama.cpp's repacked
AMX matmul crashes on a tiny model's q8_0 tensors (a segfault in ggml_backend_amx_mul_mat), and
unrepacked weights take the same dot products on every CPU.

Usage: python scripts/llama_cpp_greedy.py MODEL.gguf N_NEW PROMPT [PROMPT ...]
"""

import json
import sys

import llama_cpp.llama_cpp as llama_c
from llama_cpp import Llama

GGML_TYPE_F32 = 0

_default_model_params = llama_c.llama_model_default_params


def _model_params_without_repacking():
    params = _default_model_params()
    params.use_extra_bufts = False
    return params


# Llama() takes its model parameters from this function; there is no keyword for it.
llama_c.llama_model_default_params = _model_params_without_repacking


def main() -> None:
    path, n_new, prompts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    llm = Llama(
        model_path=path,
        n_ctx=512,
        n_threads=2,
        seed=0,
        type_k=GGML_TYPE_F32,
        type_v=GGML_TYPE_F32,
        flash_attn=False,
        verbose=False,
    )
    for text in prompts:
        ids = llm.tokenize(text.encode(), add_bos=False, special=False)
        out = []
        for token in llm.generate(ids, temp=0.0, top_k=1, reset=True):
            out.append(token)
            if len(out) >= n_new:
                break
        print(json.dumps({"prompt": ids, "greedy": out}), flush=True)


if __name__ == "__main__":
    main()
