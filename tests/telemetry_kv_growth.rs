//! The measured side of the expected-KV comparison: a real candle KV cache grows by what
//! `ModelInfo::expected_kv_bytes` says (the KV bytes per token of the config), and the allocator's per-request peak grows with prompt length.
//!
//! One test in its own binary, so no other test allocates while the counters are read.
#![allow(clippy::unwrap_used)]

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Config, Llama};
use infertop::model::arch::llama_config;
use infertop::model::{Arch, ArchConfig};
use infertop::telemetry::alloc::{current_bytes, peak_bytes, reset_peak};

const LAYERS: usize = 2;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HIDDEN: usize = 128;
const HEAD_DIM: usize = HIDDEN / HEADS;

/// The shape as infertop describes it; candle's config is derived from it as the worker does.
fn arch() -> ArchConfig {
    ArchConfig {
        arch: Arch::Llama,
        vocab_size: 512,
        hidden_size: HIDDEN,
        intermediate_size: 256,
        num_hidden_layers: LAYERS,
        num_attention_heads: HEADS,
        num_key_value_heads: KV_HEADS,
        head_dim: HEAD_DIM,
        max_position_embeddings: 1024,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: false,
        sliding_window: None,
        bos_token_id: None,
        eos_token_ids: Vec::new(),
        moe: None,
        partial_rotary_factor: None,
        gemma: None,
    }
}

fn config() -> Config {
    llama_config(&arch())
}

/// (bytes the prefill left allocated, allocator peak above the start) for a prompt of `tokens`.
fn prefill(tokens: usize) -> candle_core::Result<(u64, u64)> {
    let device = Device::Cpu;
    let cfg = config();
    let model = Llama::load(VarBuilder::zeros(DType::F32, &device), &cfg)?;
    let prompt = Tensor::zeros((1, tokens), DType::U32, &device)?;
    // Warmup, as in a real run: the first forward of a shape also allocates thread pools and
    // per-thread matmul buffers that stay for the life of the process.
    let mut warm_cache = Cache::new(true, DType::F32, &cfg, &device)?;
    drop(model.forward(&prompt, 0, &mut warm_cache)?);
    drop(warm_cache);
    let mut cache = Cache::new(true, DType::F32, &cfg, &device)?;

    let start = current_bytes();
    reset_peak();
    let logits = model.forward(&prompt, 0, &mut cache)?;
    drop(logits);
    let retained = current_bytes() - start;
    let peak = peak_bytes() - start;
    drop(cache);
    Ok((retained, peak))
}

#[test]
fn kv_cache_grows_as_expected_and_the_peak_with_prompt_length() -> candle_core::Result<()> {
    let mut peaks = Vec::new();
    for tokens in [32usize, 128, 512] {
        let (retained, peak) = prefill(tokens)?;
        let expected = arch().kv_bytes_per_token(4) * tokens as u64;
        // What stays after the prefill is the KV cache, plus candle's cached causal mask (one
        // byte per position pair) and tensor metadata (1.4 KiB here, whatever the length).
        let mask = (tokens * tokens) as u64;
        println!("P={tokens}: expected KV {expected} B, retained {retained} B, peak {peak} B");
        assert!(
            retained >= expected,
            "P={tokens}: retained {retained} < expected {expected}"
        );
        assert!(
            retained <= expected + mask + 8 * 1024,
            "P={tokens}: retained {retained} far above expected {expected} + mask {mask}"
        );
        assert!(peak >= retained);
        peaks.push(peak);
    }
    assert!(
        peaks.windows(2).all(|w| w[1] > 2 * w[0]),
        "peak grows with prompt: {peaks:?}"
    );
    Ok(())
}
