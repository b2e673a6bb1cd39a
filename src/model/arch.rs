//! One interface over candle-transformers' architectures: forward with a KV cache, and reset.

use candle_core::{DType, Device, Tensor};
use candle_nn::{Activation, VarBuilder};
use candle_transformers::models::{
    llama, mistral, mixtral, phi3, quantized_llama, quantized_qwen2, quantized_qwen3, qwen2, qwen3,
    qwen3_moe,
};

use super::architectures::Arch;
use super::config::ArchConfig;
use super::gemma::{GemmaModel, HfWeights};

/// How many norm spans one layer of a pre-norm transformer enters: 2 (input and
/// post-attention), or 4 where attention normalizes its queries and keys (Qwen3) in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Norms(pub u32);

/// A loaded causal LM. `forward` returns last-position logits as `(batch, vocab)`.
// One per process, owned by the worker: the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum CausalLm {
    Llama {
        model: llama::Llama,
        /// A fresh cache, cloned at every reset (cheap: tensors are shared).
        fresh: llama::Cache,
        cache: llama::Cache,
    },
    Mistral(mistral::Model),
    Qwen2(qwen2::ModelForCausalLM),
    Qwen3(qwen3::ModelForCausalLM),
    Phi3(phi3::Model),
    Mixtral {
        /// candle's Mixtral cannot clear its KV cache: reset clones this cache-less model
        /// (cheap: tensors are shared).
        fresh: mixtral::Model,
        model: mixtral::Model,
    },
    Qwen3Moe(qwen3_moe::ModelForCausalLM),
    /// Gemma 2 and 3: our own implementation (see `model::gemma` for why not candle's).
    Gemma(GemmaModel),
    QuantLlama(quantized_llama::ModelWeights),
    QuantQwen2(quantized_qwen2::ModelWeights),
    QuantQwen3(quantized_qwen3::ModelWeights),
}

impl CausalLm {
    /// Builds the model from tensors behind `vb` (an in-memory map or mmapped safetensors).
    pub fn load(
        cfg: &ArchConfig,
        vb: VarBuilder,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<CausalLm> {
        Ok(match cfg.arch {
            Arch::Llama => {
                let c = llama_config(cfg);
                let model = llama::Llama::load(vb, &c)?;
                let fresh = llama::Cache::new(true, dtype, &c, device)?;
                CausalLm::Llama {
                    model,
                    cache: fresh.clone(),
                    fresh,
                }
            }
            Arch::Mistral => CausalLm::Mistral(mistral::Model::new(&mistral_config(cfg), vb)?),
            Arch::Qwen2 => CausalLm::Qwen2(qwen2::ModelForCausalLM::new(&qwen2_config(cfg), vb)?),
            Arch::Qwen3 => CausalLm::Qwen3(qwen3::ModelForCausalLM::new(&qwen3_config(cfg), vb)?),
            Arch::Phi3 => CausalLm::Phi3(phi3::Model::new(&phi3_config(cfg), vb)?),
            Arch::Mixtral => {
                let fresh = mixtral::Model::new(&mixtral_config(cfg)?, vb)?;
                CausalLm::Mixtral {
                    model: fresh.clone(),
                    fresh,
                }
            }
            Arch::Qwen3Moe => CausalLm::Qwen3Moe(qwen3_moe::ModelForCausalLM::new(
                &qwen3_moe_config(cfg),
                vb,
            )?),
            Arch::Gemma2 | Arch::Gemma3 => match &cfg.gemma {
                Some(g) => {
                    CausalLm::Gemma(GemmaModel::load(cfg, g, &mut HfWeights(vb), dtype, device)?)
                }
                None => candle_core::bail!("{} config without its Gemma settings", cfg.arch.name()),
            },
        })
    }

    /// Forgets the KV cache: the next forward starts a new sequence at position 0.
    pub fn reset(&mut self) {
        match self {
            CausalLm::Llama { fresh, cache, .. } => *cache = fresh.clone(),
            CausalLm::Mistral(m) => m.clear_kv_cache(),
            CausalLm::Qwen2(m) => m.clear_kv_cache(),
            CausalLm::Qwen3(m) => m.clear_kv_cache(),
            CausalLm::Phi3(m) => m.clear_kv_cache(),
            CausalLm::Mixtral { fresh, model } => *model = fresh.clone(),
            CausalLm::Qwen3Moe(m) => m.clear_kv_cache(),
            CausalLm::Gemma(m) => m.clear_kv_cache(),
            CausalLm::QuantLlama(m) => m.clear_kv_cache(),
            CausalLm::QuantQwen2(m) => m.clear_kv_cache(),
            CausalLm::QuantQwen3(m) => m.clear_kv_cache(),
        }
    }

    /// The norm spans one layer enters, for candle-transformers' dense models, whose
    /// attention and MLP (or, in Llama, head) enter no span of their own: `engine::spans`
    /// tells those parts apart by the norms around them. `None` where the model traces every
    /// part itself.
    pub fn norms(&self) -> Option<Norms> {
        match self {
            CausalLm::Llama { .. }
            | CausalLm::Mistral(_)
            | CausalLm::Qwen2(_)
            | CausalLm::Phi3(_)
            | CausalLm::Mixtral { .. } => Some(Norms(2)),
            // Input, query, key and post-attention norms.
            CausalLm::Qwen3(_) | CausalLm::Qwen3Moe(_) => Some(Norms(4)),
            CausalLm::Gemma(_)
            | CausalLm::QuantLlama(_)
            | CausalLm::QuantQwen2(_)
            | CausalLm::QuantQwen3(_) => None,
        }
    }

    /// Runs `ids` (batch, seq) at position `pos`; returns f32 logits (batch, vocab).
    pub fn forward(&mut self, ids: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        let logits = match self {
            CausalLm::Llama { model, cache, .. } => model.forward(ids, pos, cache)?,
            CausalLm::Mistral(m) => m.forward(ids, pos)?,
            CausalLm::Qwen2(m) => m.forward(ids, pos)?,
            CausalLm::Qwen3(m) => m.forward(ids, pos)?,
            CausalLm::Phi3(m) => m.forward(ids, pos)?,
            CausalLm::Mixtral { model, .. } => model.forward(ids, pos)?,
            CausalLm::Qwen3Moe(m) => m.forward(ids, pos)?,
            CausalLm::Gemma(m) => m.forward(ids, pos)?,
            CausalLm::QuantLlama(m) => m.forward(ids, pos)?,
            CausalLm::QuantQwen2(m) => m.forward(ids, pos)?,
            CausalLm::QuantQwen3(m) => m.forward(ids, pos)?,
        };
        let logits = if logits.rank() == 3 {
            logits.squeeze(1)?
        } else {
            logits
        };
        logits.to_dtype(DType::F32)
    }
}

pub fn llama_config(cfg: &ArchConfig) -> llama::Config {
    llama::Config {
        hidden_size: cfg.hidden_size,
        intermediate_size: cfg.intermediate_size,
        vocab_size: cfg.vocab_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        num_key_value_heads: cfg.num_key_value_heads,
        use_flash_attn: false,
        rms_norm_eps: cfg.rms_norm_eps,
        rope_theta: cfg.rope_theta as f32,
        bos_token_id: cfg.bos_token_id,
        eos_token_id: cfg
            .eos_token_ids
            .first()
            .map(|&e| llama::LlamaEosToks::Single(e)),
        rope_scaling: cfg.rope_scaling.as_ref().map(|s| llama::Llama3RopeConfig {
            factor: s.factor,
            low_freq_factor: s.low_freq_factor,
            high_freq_factor: s.high_freq_factor,
            original_max_position_embeddings: s.original_max_position_embeddings,
            rope_type: llama::Llama3RopeType::Llama3,
        }),
        max_position_embeddings: cfg.max_position_embeddings,
        tie_word_embeddings: cfg.tie_word_embeddings,
    }
}

fn mistral_config(cfg: &ArchConfig) -> mistral::Config {
    mistral::Config {
        vocab_size: cfg.vocab_size,
        hidden_size: cfg.hidden_size,
        intermediate_size: cfg.intermediate_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        head_dim: Some(cfg.head_dim),
        num_key_value_heads: cfg.num_key_value_heads,
        hidden_act: Activation::Silu,
        max_position_embeddings: cfg.max_position_embeddings,
        rms_norm_eps: cfg.rms_norm_eps,
        rope_theta: cfg.rope_theta,
        sliding_window: cfg.sliding_window,
        use_flash_attn: false,
    }
}

fn qwen2_config(cfg: &ArchConfig) -> qwen2::Config {
    qwen2::Config {
        vocab_size: cfg.vocab_size,
        hidden_size: cfg.hidden_size,
        intermediate_size: cfg.intermediate_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        num_key_value_heads: cfg.num_key_value_heads,
        max_position_embeddings: cfg.max_position_embeddings,
        sliding_window: cfg.sliding_window.unwrap_or(cfg.max_position_embeddings),
        max_window_layers: cfg.num_hidden_layers,
        tie_word_embeddings: cfg.tie_word_embeddings,
        rope_theta: cfg.rope_theta,
        rms_norm_eps: cfg.rms_norm_eps,
        use_sliding_window: cfg.sliding_window.is_some(),
        hidden_act: Activation::Silu,
    }
}

fn qwen3_config(cfg: &ArchConfig) -> qwen3::Config {
    qwen3::Config {
        vocab_size: cfg.vocab_size,
        hidden_size: cfg.hidden_size,
        intermediate_size: cfg.intermediate_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        head_dim: cfg.head_dim,
        attention_bias: false,
        num_key_value_heads: cfg.num_key_value_heads,
        max_position_embeddings: cfg.max_position_embeddings,
        // `check_supported` refuses a window: candle's qwen3 has none.
        sliding_window: None,
        max_window_layers: cfg.num_hidden_layers,
        tie_word_embeddings: cfg.tie_word_embeddings,
        rope_theta: cfg.rope_theta,
        rms_norm_eps: cfg.rms_norm_eps,
        use_sliding_window: false,
        hidden_act: Activation::Silu,
    }
}

fn qwen3_moe_config(cfg: &ArchConfig) -> qwen3_moe::Config {
    let moe = cfg.moe.as_ref();
    qwen3_moe::Config {
        vocab_size: cfg.vocab_size,
        hidden_size: cfg.hidden_size,
        intermediate_size: cfg.intermediate_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        head_dim: cfg.head_dim,
        attention_bias: false,
        num_key_value_heads: cfg.num_key_value_heads,
        max_position_embeddings: cfg.max_position_embeddings,
        sliding_window: None,
        max_window_layers: cfg.num_hidden_layers,
        tie_word_embeddings: cfg.tie_word_embeddings,
        rope_theta: cfg.rope_theta,
        rms_norm_eps: cfg.rms_norm_eps,
        use_sliding_window: false,
        hidden_act: Activation::Silu,
        decoder_sparse_step: moe.map_or(1, |m| m.decoder_sparse_step),
        moe_intermediate_size: moe.map_or(cfg.intermediate_size, |m| m.expert_intermediate_size),
        num_experts_per_tok: moe.map_or(1, |m| m.experts_per_tok),
        num_experts: moe.map_or(0, |m| m.num_experts),
        norm_topk_prob: moe.is_some_and(|m| m.norm_topk_prob),
    }
}

fn phi3_config(cfg: &ArchConfig) -> phi3::Config {
    phi3::Config {
        vocab_size: cfg.vocab_size,
        hidden_act: Activation::Silu,
        hidden_size: cfg.hidden_size,
        intermediate_size: cfg.intermediate_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        num_key_value_heads: cfg.num_key_value_heads,
        rms_norm_eps: cfg.rms_norm_eps,
        rope_theta: cfg.rope_theta,
        bos_token_id: cfg.bos_token_id,
        eos_token_id: cfg.eos_token_ids.first().copied(),
        rope_scaling: None,
        max_position_embeddings: cfg.max_position_embeddings,
        original_max_position_embeddings: None,
        partial_rotary_factor: cfg.partial_rotary_factor,
        tie_word_embeddings: cfg.tie_word_embeddings,
    }
}

/// candle's `mixtral::Config` fields are crate-private: it is built through its serde form.
fn mixtral_config(cfg: &ArchConfig) -> candle_core::Result<mixtral::Config> {
    let (experts, per_tok) = cfg
        .moe
        .as_ref()
        .map_or((1, 1), |m| (m.num_experts, m.experts_per_tok));
    let json = serde_json::json!({
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.moe.as_ref().map_or(cfg.intermediate_size, |m| m.expert_intermediate_size),
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        // No window: the mask's window never reaches past the positions.
        "sliding_window": cfg.sliding_window.unwrap_or(cfg.max_position_embeddings),
        "num_experts_per_tok": per_tok,
        "num_local_experts": experts,
        "use_flash_attn": false,
    });
    serde_json::from_value(json)
        .map_err(|e| candle_core::Error::Msg(format!("building candle's mixtral config: {e}")))
}
