//! Synthetic presets: real shapes with random weights, like vLLM's dummy weights.

use super::architectures::{Arch, Mlp, RopeScalingRule, WindowRule};
use super::config::{ArchConfig, Gemma, Moe, RopeScaling};

pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    pub config: fn() -> ArchConfig,
}

fn base(arch: Arch) -> ArchConfig {
    ArchConfig {
        arch,
        vocab_size: 0,
        hidden_size: 0,
        intermediate_size: 0,
        num_hidden_layers: 0,
        num_attention_heads: 0,
        num_key_value_heads: 0,
        head_dim: 0,
        max_position_embeddings: 0,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        rope_scaling: None,
        tie_word_embeddings: false,
        sliding_window: None,
        bos_token_id: Some(1),
        eos_token_ids: vec![2],
        moe: None,
        partial_rotary_factor: None,
        gemma: None,
    }
}

#[allow(clippy::too_many_arguments)]
fn shape(
    arch: Arch,
    vocab: usize,
    hidden: usize,
    inter: usize,
    layers: usize,
    heads: usize,
    kv: usize,
    max_pos: usize,
) -> ArchConfig {
    ArchConfig {
        vocab_size: vocab,
        hidden_size: hidden,
        intermediate_size: inter,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: kv,
        head_dim: hidden / heads,
        max_position_embeddings: max_pos,
        ..base(arch)
    }
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "tiny",
        about: "test shape, fast on 2 CPU cores (the default)",
        config: || shape(Arch::Llama, 2048, 256, 768, 4, 4, 2, 4096),
    },
    Preset {
        name: "small",
        about: "a larger CPU shape (~50M parameters)",
        config: || shape(Arch::Llama, 8192, 512, 1536, 8, 8, 4, 4096),
    },
    Preset {
        name: "qwen2.5-0.5b",
        about: "Qwen2.5-0.5B shape",
        config: || ArchConfig {
            rope_theta: 1_000_000.0,
            rms_norm_eps: 1e-6,
            tie_word_embeddings: true,
            bos_token_id: None,
            eos_token_ids: vec![151643],
            ..shape(Arch::Qwen2, 151936, 896, 4864, 24, 14, 2, 32768)
        },
    },
    Preset {
        name: "llama-3.2-1b",
        about: "Llama 3.2 1B shape",
        config: || ArchConfig {
            rope_theta: 500_000.0,
            tie_word_embeddings: true,
            rope_scaling: Some(RopeScaling {
                factor: 32.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 8192,
            }),
            bos_token_id: Some(128000),
            eos_token_ids: vec![128001],
            ..shape(Arch::Llama, 128256, 2048, 8192, 16, 32, 8, 131072)
        },
    },
    Preset {
        name: "llama-2-7b",
        about: "Llama 2 7B shape",
        config: || shape(Arch::Llama, 32000, 4096, 11008, 32, 32, 32, 4096),
    },
    Preset {
        name: "llama-3-8b",
        about: "Llama 3 8B shape",
        config: || ArchConfig {
            rope_theta: 500_000.0,
            bos_token_id: Some(128000),
            eos_token_ids: vec![128001],
            ..shape(Arch::Llama, 128256, 4096, 14336, 32, 32, 8, 8192)
        },
    },
    Preset {
        name: "mistral-7b",
        about: "Mistral 7B v0.1 shape",
        config: || ArchConfig {
            sliding_window: Some(4096),
            ..shape(Arch::Mistral, 32000, 4096, 14336, 32, 32, 8, 32768)
        },
    },
    Preset {
        name: "qwen2.5-7b",
        about: "Qwen2.5-7B shape",
        config: || ArchConfig {
            rope_theta: 1_000_000.0,
            rms_norm_eps: 1e-6,
            bos_token_id: None,
            eos_token_ids: vec![151643],
            ..shape(Arch::Qwen2, 152064, 3584, 18944, 28, 28, 4, 32768)
        },
    },
    // The shapes below are the published config.json values of each model.
    Preset {
        name: "qwen3-0.6b",
        about: "Qwen3-0.6B shape (head_dim 128, q/k norms, tied)",
        config: || ArchConfig {
            head_dim: 128,
            rope_theta: 1_000_000.0,
            rms_norm_eps: 1e-6,
            tie_word_embeddings: true,
            bos_token_id: Some(151643),
            eos_token_ids: vec![151645],
            ..shape(Arch::Qwen3, 151936, 1024, 3072, 28, 16, 8, 40960)
        },
    },
    Preset {
        name: "qwen3-8b",
        about: "Qwen3-8B shape",
        config: || ArchConfig {
            head_dim: 128,
            rope_theta: 1_000_000.0,
            rms_norm_eps: 1e-6,
            bos_token_id: Some(151643),
            eos_token_ids: vec![151645],
            ..shape(Arch::Qwen3, 151936, 4096, 12288, 36, 32, 8, 40960)
        },
    },
    Preset {
        name: "gemma-3-1b",
        about: "Gemma 3 1B shape (window 512 on 5 of 6 layers, 1 kv head)",
        config: || gemma3(262144, 1152, 6912, 26, 4, 1, 32768, 512, None),
    },
    Preset {
        name: "gemma-3-4b",
        about: "Gemma 3 4B text shape (window 1024, linear RoPE x8 on full layers)",
        config: || gemma3(262208, 2560, 10240, 34, 8, 4, 131072, 1024, Some(8.0)),
    },
    Preset {
        name: "phi-3-mini",
        about: "Phi-3-mini-4k shape (fused qkv, window 2047)",
        config: || ArchConfig {
            sliding_window: Some(2047),
            bos_token_id: Some(1),
            eos_token_ids: vec![32000],
            ..shape(Arch::Phi3, 32064, 3072, 8192, 32, 32, 32, 4096)
        },
    },
    Preset {
        name: "qwen3-30b-a3b",
        about: "Qwen3-30B-A3B shape (128 experts, 8 per token: ~3B active)",
        config: || ArchConfig {
            head_dim: 128,
            rope_theta: 1_000_000.0,
            rms_norm_eps: 1e-6,
            bos_token_id: Some(151643),
            eos_token_ids: vec![151645],
            moe: Some(Moe {
                num_experts: 128,
                experts_per_tok: 8,
                expert_intermediate_size: 768,
                norm_topk_prob: true,
                decoder_sparse_step: 1,
            }),
            ..shape(Arch::Qwen3Moe, 151936, 2048, 6144, 48, 32, 4, 40960)
        },
    },
    Preset {
        name: "mixtral-8x7b",
        about: "Mixtral-8x7B shape (8 experts, 2 per token: ~13B active)",
        config: || ArchConfig {
            rope_theta: 1_000_000.0,
            eos_token_ids: vec![2],
            moe: Some(Moe {
                num_experts: 8,
                experts_per_tok: 2,
                expert_intermediate_size: 14336,
                norm_topk_prob: true,
                decoder_sparse_step: 1,
            }),
            ..shape(Arch::Mixtral, 32000, 4096, 14336, 32, 32, 8, 32768)
        },
    },
];

/// A Gemma 3 text shape: the published models' settings (Gemma 3's row: head_dim 256, as
/// query_pre_attn_scalar; five sliding layers to one full; RoPE base 1e6 on full layers and 1e4
/// on sliding ones; tied embeddings).
#[allow(clippy::too_many_arguments)]
fn gemma3(
    vocab: usize,
    hidden: usize,
    inter: usize,
    layers: usize,
    heads: usize,
    kv: usize,
    max_pos: usize,
    window: usize,
    linear_rope: Option<f64>,
) -> ArchConfig {
    let defaults = &Arch::Gemma3.row().defaults;
    let head_dim = defaults.head_dim.unwrap_or(hidden / heads);
    let mut gemma = Gemma::published(Arch::Gemma3, layers, head_dim);
    if let Some(g) = gemma.as_mut() {
        g.rope_linear_factor = linear_rope;
    }
    ArchConfig {
        head_dim,
        rope_theta: defaults.rope_theta,
        rms_norm_eps: defaults.rms_norm_eps,
        tie_word_embeddings: defaults.tie_word_embeddings,
        sliding_window: Some(window),
        bos_token_id: Some(2),
        eos_token_ids: vec![1, 106],
        gemma,
        ..shape(
            Arch::Gemma3,
            vocab,
            hidden,
            inter,
            layers,
            heads,
            kv,
            max_pos,
        )
    }
}

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The same preset shape as another architecture (`make-model --arch`), by the target's row:
/// what it cannot express is dropped (a head width of its own, RoPE scaling it does not apply,
/// partial rotary, a window that `sliding_window` alone does not turn on), Gemma gets its
/// published settings and window, and MoE targets get 4 experts (top 2) of the dense width.
pub fn with_arch(mut cfg: ArchConfig, arch: Arch) -> ArchConfig {
    if cfg.arch == arch {
        return cfg;
    }
    let row = arch.row();
    cfg.arch = arch;
    if !row.free_head_dim {
        cfg.head_dim = cfg.hidden_size / cfg.num_attention_heads.max(1);
    }
    if row.rope_scaling != RopeScalingRule::Llama3 {
        cfg.rope_scaling = None;
    }
    if !row.partial_rotary {
        cfg.partial_rotary_factor = None;
    }
    if row.window != WindowRule::WhenSet {
        cfg.sliding_window = None;
    }
    cfg.gemma = Gemma::published(arch, cfg.num_hidden_layers, cfg.head_dim);
    if let Some(g) = &row.gemma {
        cfg.sliding_window = Some(g.synthetic_window);
        cfg.tie_word_embeddings = row.defaults.tie_word_embeddings;
    }
    let converted = |cfg: &ArchConfig| {
        cfg.moe.clone().unwrap_or(Moe {
            num_experts: 4,
            experts_per_tok: 2,
            expert_intermediate_size: cfg.intermediate_size,
            norm_topk_prob: true,
            decoder_sparse_step: 1,
        })
    };
    cfg.moe = match row.layout.mlp {
        Mlp::Dense | Mlp::FusedGateUp => None,
        Mlp::SparseMoe { .. } => Some(converted(&cfg)),
        Mlp::BlockSparseMoe { .. } => {
            // Experts `intermediate_size` wide, in every layer, always renormalized.
            let m = converted(&cfg);
            cfg.intermediate_size = m.expert_intermediate_size;
            Some(Moe {
                norm_topk_prob: true,
                decoder_sparse_step: 1,
                ..m
            })
        }
    };
    if row.layout.own_lm_head {
        cfg.tie_word_embeddings = false;
    }
    cfg
}
