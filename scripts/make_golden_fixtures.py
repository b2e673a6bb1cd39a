#!/usr/bin/env python3
"""Golden fixtures made by Hugging Face transformers itself.

For each architecture this writes tests/fixtures/golden/<arch>/ with
  config.json, model.safetensors  exactly as `save_pretrained` writes them (float32),
  tokenizer.json                  a byte-level BPE trained on assets/corpus.txt,
  golden.json                     prompt ids and 16 greedy ids per prompt, from transformers,
so that infertop's loading and decoding can be checked against the reference implementation.

Deterministic: fixed seeds. A seed is only skipped (the next one tried) when the model's greedy
outputs are not diverse or some argmax is too close to call (top-1 minus top-2 logit below
MIN_MARGIN), so that float differences between candle and torch cannot flip a token.

Usage (needs torch, transformers, safetensors, tokenizers; no network):
    python scripts/make_golden_fixtures.py [--out tests/fixtures/golden] [--only llama,qwen2]
"""

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoConfig, PreTrainedTokenizerFast

REPO = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 512
SPECIALS = ["<unk>", "<s>", "</s>"]
NEW_TOKENS = 16
MIN_MARGIN = 1e-2
# Fewest distinct ids in one greedy continuation: a model stuck on one token tests little.
MIN_DISTINCT = 6
# Weights are re-drawn larger than transformers' default init (std 0.02): a tiny random model at
# the default scale repeats one token forever, which would test nothing.
LINEAR_STD = 0.3
EMBED_STD = 0.5
# Gemma multiplies embeddings by sqrt(hidden) = 8, ties them to the head and norms every block's
# output: at 0.5 the input token's own embedding outweighs every layer and the model echoes its
# last input. Smaller embeddings, with the final norm's gain raised to keep logits apart.
GEMMA_EMBED_STD = 0.02
GEMMA_FINAL_NORM_SHIFT = 10.0
BIAS_STD = 0.1
NORM_STD = 0.1
BASE_SEED = 1234
MAX_TRIES = 200

PROMPTS = [
    "The first request is always slow.",
    "A language model reads the whole prompt at once",
    "Decode is limited by memory, because each new token has to read all of the weights",
    "Time per output token",
    "prefill",
]

# Shared shape: hidden 64, 4 heads, 2 kv heads, intermediate 128, 512 positions.
COMMON = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=None,
)

# fixture directory -> (transformers model_type, class name, config overrides). Each one exercises
# a quirk the loader must read from config.json.
ARCHS = {
    "llama": (
        "llama",
        "LlamaForCausalLM",
        dict(num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False),
    ),
    "mistral": (
        "mistral",
        "MistralForCausalLM",
        # The window is far longer than any fixture sequence (as in Mistral 7B v0.1). A short one
        # fails today: candle's mistral masks sliding_window + 1 positions at prefill and none
        # in decode, transformers masks sliding_window positions in both.
        dict(num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=4096,
             tie_word_embeddings=False),
    ),
    "qwen2": (
        "qwen2",
        "Qwen2ForCausalLM",
        # q/k/v biases, tied embeddings.
        dict(num_hidden_layers=2, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
             use_sliding_window=False),
    ),
    "qwen3": (
        "qwen3",
        "Qwen3ForCausalLM",
        # head_dim 32 != 64/4, q/k RMSNorm, untied.
        dict(num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=1000000.0,
             tie_word_embeddings=False, attention_bias=False),
    ),
    "qwen3_moe": (
        "qwen3_moe",
        "Qwen3MoeForCausalLM",
        # 4 experts, top-2, renormalised routing, head_dim 32.
        dict(num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=1000000.0,
             tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, decoder_sparse_step=1, norm_topk_prob=True,
             mlp_only_layers=[]),
    ),
    "gemma2": (
        "gemma2",
        "Gemma2ForCausalLM",
        # head_dim 32, query_pre_attn_scalar, both soft-caps, a sliding layer (window 8) and a
        # full one,
        # tied embeddings, (1 + w) norms, gelu-tanh.
        dict(num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=10000.0,
             query_pre_attn_scalar=24, attn_logit_softcapping=20.0, final_logit_softcapping=15.0,
             sliding_window=8, layer_types=["sliding_attention", "full_attention"],
             tie_word_embeddings=True, pad_token_id=0),
    ),
    "gemma3": (
        "gemma3_text",
        "Gemma3ForCausalLM",
        # head_dim 32, q/k norms, a sliding layer (window 8, its own rope base) and a full one,
        # tied embeddings.
        dict(num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6, query_pre_attn_scalar=24,
             sliding_window=8, layer_types=["sliding_attention", "full_attention"],
             tie_word_embeddings=True, pad_token_id=0),
    ),
    "gemma3_vision": (
        "gemma3",
        "Gemma3ForConditionalGeneration",
        # The vision-wrapped Gemma 3 that the published 4B and larger ship: the text model of the
        # gemma3 fixture in `text_config`, its tensors under `model.language_model.`, and a tiny
        # vision tower (one SigLIP layer of width 16, 28-pixel images of 14-pixel patches, 4
        # tokens per image) that infertop must ignore.
        dict(
            text_config=dict(num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6,
                             query_pre_attn_scalar=24, sliding_window=8,
                             layer_types=["sliding_attention", "full_attention"],
                             tie_word_embeddings=True, pad_token_id=0),
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2, image_size=28, patch_size=14),
            mm_tokens_per_image=4,
        ),
    ),
    "phi3": (
        "phi3",
        "Phi3ForCausalLM",
        # fused qkv_proj and gate_up_proj, partial rotary.
        dict(num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=10000.0, partial_rotary_factor=0.5,
             tie_word_embeddings=False, sliding_window=None),
    ),
    "mixtral": (
        "mixtral",
        "MixtralForCausalLM",
        # 4 experts of width 64, top-2.
        dict(num_hidden_layers=2, intermediate_size=64, rms_norm_eps=1e-5, rope_theta=1000000.0,
             num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
             tie_word_embeddings=False),
    ),
}


def train_tokenizer(path: Path) -> None:
    """Byte-level BPE on the shipped corpus, configured like infertop's own `train_bpe`."""
    corpus = (REPO / "assets" / "corpus.txt").read_text(encoding="utf-8")
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(corpus.splitlines(), trainer)
    for i, s in enumerate(SPECIALS):
        assert tk.token_to_id(s) == i, f"{s} must be id {i}"
    tk.save(str(path))


def rescale_(model: torch.nn.Module, seed: int, gemma: bool) -> None:
    """Re-draws every parameter at a scale where greedy decoding is not degenerate."""
    embed_std = GEMMA_EMBED_STD if gemma else EMBED_STD
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            if "norm" in name:
                # Gemma stores norms as w in x * (1 + w) and inits them to 0; the others init to 1.
                # Random values around the init catch a loader that gets the offset wrong.
                p.copy_(p + NORM_STD * noise)
                if gemma and name in ("model.norm.weight", "model.language_model.norm.weight"):
                    p.add_(GEMMA_FINAL_NORM_SHIFT)
            elif name.endswith("bias"):
                p.copy_(BIAS_STD * noise)
            elif "embed" in name:
                p.copy_(embed_std * noise)
            else:
                p.copy_(LINEAR_STD * noise)


def greedy(model, ids):
    """Argmax loop with the KV cache; returns (greedy ids, smallest top1-top2 logit margin,
    the prefill's last-position logits)."""
    out = []
    margins = []
    with torch.no_grad():
        inp = torch.tensor([ids])
        cache = None
        first_logits = None
        for _ in range(NEW_TOKENS):
            res = model(input_ids=inp, cache=cache, use_cache=True)
            cache = res.cache
            logits = res.logits[0, -1].float()
            if first_logits is None:
                first_logits = logits.clone()
            top2 = torch.topk(logits, 2)
            margins.append(float(top2.values[0] - top2.values[1]))
            nxt = int(top2.indices[0])
            out.append(nxt)
            inp = torch.tensor([[nxt]])
    return out, min(margins), first_logits


def check_with_generate(model, ids, expected):
    with torch.no_grad():
        gen = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=NEW_TOKENS,
            eos_token_id=None,
            pad_token_id=0,
        )
    got = gen[0, len(ids):].tolist()
    assert got == expected, f"generate {got} != argmax loop {expected}"


def dumps_compact(value) -> str:
    """JSON with one key per line but every list of numbers on one line."""
    text = json.dumps(value, indent=1)
    return re.sub(r"\[[^\[\]{}\"]*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(0)[1:-1].split(",")) + "]",
                  text)


def build(name: str, vocab: int, seed: int):
    model_type, cls_name, overrides = ARCHS[name]
    if "text_config" in overrides:
        # A vision-wrapped model: the common shape is its text model's.
        text = dict(COMMON)
        text.update(overrides["text_config"])
        text["vocab_size"] = vocab
        kwargs = dict(overrides, text_config=text)
    else:
        kwargs = dict(COMMON)
        kwargs.update(overrides)
        kwargs["vocab_size"] = vocab
    config = AutoConfig.for_model(model_type, **kwargs)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    cls = getattr(transformers, cls_name)
    model = cls(config).eval().float()
    rescale_(model, seed, gemma=model_type.startswith("gemma"))
    return model


def make(name: str, out: Path, tok_path: Path) -> dict:
    hf_tok = PreTrainedTokenizerFast(tokenizer_file=str(tok_path))
    vocab = hf_tok.backend_tokenizer.get_vocab_size()
    prompt_ids = [hf_tok(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    for seed in range(BASE_SEED, BASE_SEED + MAX_TRIES):
        model = build(name, vocab, seed)
        results = [greedy(model, ids) for ids in prompt_ids]
        firsts = [r[0][0] for r in results]
        margin = min(r[1] for r in results)
        distinct = min(len(set(r[0])) for r in results)
        if len(set(firsts)) == len(firsts) and margin > MIN_MARGIN and distinct >= MIN_DISTINCT:
            break
        print(f"  {name}: seed {seed} rejected (first ids {firsts}, margin {margin:.2e}, "
              f"distinct {distinct})", file=sys.stderr)
    else:
        raise SystemExit(f"{name}: no seed in {MAX_TRIES} gives diverse, clear greedy outputs")
    for ids, (g, _, _) in zip(prompt_ids, results):
        check_with_generate(model, ids, g)

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model.save_pretrained(out, safe_serialization=True)
    # Only config.json and the weights belong to the fixture.
    for extra in out.iterdir():
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()
    shutil.copy(tok_path, out / "tokenizer.json")
    golden = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokenizers": tokenizers.__version__,
        "arch": name,
        "model_type": ARCHS[name][0],
        "class": ARCHS[name][1],
        "seed": seed,
        "new_tokens": NEW_TOKENS,
        "prompts": [
            {
                "text": text,
                "ids": ids,
                "greedy": g,
                "min_margin": round(m, 6),
                # The prefill's last-position logits, for a tolerance check finer than argmax.
                "prefill_logits": [float(f"{float(x):.9g}") for x in first],
            }
            for text, ids, (g, m, first) in zip(PROMPTS, prompt_ids, results)
        ],
    }
    (out / "golden.json").write_text(dumps_compact(golden) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"{name}: seed {seed}, margin {margin:.3f}, {size / 1024:.0f} KiB, "
          f"greedy[0] {results[0][0]}")
    return golden


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "golden")
    ap.add_argument("--only", default="", help="comma-separated fixture names (default: all)")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    wanted = [a for a in args.only.split(",") if a] or list(ARCHS)
    with tempfile.TemporaryDirectory() as tmp:
        tok_path = Path(tmp) / "tokenizer.json"
        train_tokenizer(tok_path)
        for name in wanted:
            make(name, args.out / name, tok_path)


if __name__ == "__main__":
    main()
