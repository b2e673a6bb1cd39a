//! The architectures infertop runs, one row each in [`ARCHITECTURES`]: their names, what
//! transformers assumes when config.json leaves a field out, their tensor layout, what candle's
//! implementation can run, what Gemma adds, and their GGUF names. Reading and writing
//! config.json (`config`), the tensor list (`ArchConfig::tensor_specs`), the presets, the
//! safetensors loader (`hf`) and GGUF (`gguf`) all read these rows; only the loaders that build
//! candle's models (`arch`, and `gguf::load` for GGUF) are code per architecture.

/// An architecture infertop runs. Everything about it is its row: [`Arch::row`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Llama,
    Mistral,
    Qwen2,
    Qwen3,
    Phi3,
    Mixtral,
    Qwen3Moe,
    Gemma2,
    Gemma3,
}

/// One architecture: everything that differs between architectures, in one place.
#[derive(Debug)]
pub struct ArchRow {
    /// The key; rows are in `Arch`'s order.
    pub arch: Arch,
    /// Our name: `--arch`, the dashboard, records, messages.
    pub name: &'static str,
    /// Said beside the name in `make-model --help`.
    pub help: Option<&'static str>,
    /// transformers' `model_type`.
    pub model_type: &'static str,
    /// transformers' class (`architectures` in config.json).
    pub hf_class: &'static str,
    /// A multimodal model whose text model is this architecture, read from its `text_config`.
    pub vision: Option<VisionModel>,
    pub defaults: Defaults,
    pub layout: Layout,
    /// How config.json's `sliding_window` is read.
    pub window: WindowRule,
    /// What candle's implementation does with a window.
    pub window_support: WindowSupport,
    pub rope_scaling: RopeScalingRule,
    /// Whether `partial_rotary_factor` is read (RoPE over a fraction of each head).
    pub partial_rotary: bool,
    pub activation: Activation,
    /// Whether config.json has an `attention_bias` switch (`make-model` writes it false).
    pub attention_bias_field: bool,
    /// Whether candle's implementation takes a `head_dim` other than hidden / heads.
    pub free_head_dim: bool,
    /// What Gemma 2 and 3 add (`None` for the others).
    pub gemma: Option<GemmaRow>,
    /// Its GGUF files (`None`: infertop reads and writes none of this architecture).
    pub gguf: Option<GgufRow>,
}

/// What transformers assumes when config.json leaves a field out.
#[derive(Debug)]
pub struct Defaults {
    /// `None`: one key/value head per attention head (multi-head attention).
    pub num_key_value_heads: Option<usize>,
    /// `None`: hidden_size / num_attention_heads.
    pub head_dim: Option<usize>,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    /// Whether the head reuses the embeddings.
    pub tie_word_embeddings: bool,
}

/// The tensors of a layer beyond the common ones (`embed_tokens`, `o_proj`, the two norms of a
/// pre-norm block, `model.norm`, `lm_head` unless tied), in Hugging Face's names.
#[derive(Debug)]
pub struct Layout {
    /// q, k and v as one `qkv_proj` (their rows in that order), not three matrices.
    pub fused_qkv: bool,
    /// Biases on q, k and v (`q_proj.bias`, ...).
    pub qkv_bias: bool,
    /// An RMSNorm of every query and key head before RoPE (`q_norm`, `k_norm`).
    pub qk_norm: bool,
    pub mlp: Mlp,
    /// Gemma's norms: also before and after the MLP (`pre_feedforward_layernorm`,
    /// `post_feedforward_layernorm`), each gain stored as `w` and applied as `1 + w`.
    pub gemma_norms: bool,
    /// candle's implementation always loads `lm_head.weight`: a checkpoint without one has its
    /// head read from the embeddings, and `make-model` writes one.
    pub own_lm_head: bool,
}

/// The feed-forward block, with the expert counts transformers assumes for a mixture of experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mlp {
    /// `mlp.gate_proj`, `mlp.up_proj`, `mlp.down_proj`.
    Dense,
    /// `mlp.gate_up_proj` (gate rows, then up rows) and `mlp.down_proj`.
    FusedGateUp,
    /// `block_sparse_moe.gate` and `block_sparse_moe.experts.N.{w1,w2,w3}` in every layer, each
    /// expert `intermediate_size` wide; the top-k weights are always renormalized.
    BlockSparseMoe {
        num_experts: usize,
        experts_per_tok: usize,
    },
    /// `mlp.gate` and `mlp.experts.N.{gate,up,down}_proj` in every `decoder_sparse_step`-th
    /// layer (the others dense), each expert `moe_intermediate_size` wide.
    SparseMoe {
        num_experts: usize,
        experts_per_tok: usize,
        moe_intermediate_size: usize,
        norm_topk_prob: bool,
    },
}

/// How an architecture reads `sliding_window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowRule {
    /// Full attention: config.json has no `sliding_window`.
    Never,
    /// The window is used whenever `sliding_window` is set.
    WhenSet,
    /// Only with `use_sliding_window: true` (qwen2 writes a window it does not use).
    WhenEnabled,
    /// On the layers `layer_types` marks (read with the rest of [`GemmaRow`]).
    PerLayerType,
}

/// What candle's implementation does with a window config.json asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSupport {
    Applied,
    /// Attends over every position: runs longer than the window are warned about.
    Ignored,
    /// Has no window: a config.json that uses one is refused.
    Refused,
}

/// The RoPE scaling (`rope_scaling`, or inside `rope_parameters`) read besides `default`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeScalingRule {
    /// Llama 3's frequency scaling, applied.
    Llama3,
    /// Llama 3's is read and written back, but candle's implementation has no RoPE scaling;
    /// `make-model --arch` drops it.
    Llama3Unapplied,
    /// Positions divided by `factor` on the full-attention layers (Gemma).
    Linear,
}

impl RopeScalingRule {
    /// The `rope_type` it reads.
    pub fn kind(self) -> &'static str {
        match self {
            RopeScalingRule::Llama3 | RopeScalingRule::Llama3Unapplied => "llama3",
            RopeScalingRule::Linear => "linear",
        }
    }
}

/// The MLP's activation, the only one candle's implementation has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `hidden_act: silu` (not read).
    Silu,
    /// `hidden_activation: gelu_pytorch_tanh`; another one named there is refused.
    GeluTanh,
}

impl Activation {
    /// config.json's field and value.
    pub fn field(self) -> (&'static str, &'static str) {
        match self {
            Activation::Silu => ("hidden_act", "silu"),
            Activation::GeluTanh => ("hidden_activation", "gelu_pytorch_tanh"),
        }
    }
}

/// A multimodal model of which only the text model is read, from `text_config`, where published
/// configs write only what differs from the text model's defaults.
#[derive(Debug)]
pub struct VisionModel {
    pub hf_class: &'static str,
    pub model_type: &'static str,
    /// The text model's sizes where `text_config` leaves them out (its config class's
    /// defaults); its other fields default as the row says.
    pub text_sizes: TextSizes,
}

#[derive(Debug)]
pub struct TextSizes {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
}

/// What Gemma 2 and Gemma 3 add: transformers' defaults, which are also the settings of their
/// published models and llama.cpp's fixed choices.
#[derive(Debug)]
pub struct GemmaRow {
    /// Every `full_every`-th layer attends to every position, the others (the first one
    /// included) to the window: transformers' default `layer_types`, and llama.cpp's pattern.
    pub full_every: usize,
    pub sliding_window: usize,
    pub query_pre_attn_scalar: f64,
    /// Scores become `cap * tanh(score / cap)`.
    pub attn_logit_softcapping: Option<f64>,
    /// Logits become `cap * tanh(logit / cap)`.
    pub final_logit_softcapping: Option<f64>,
    /// The sliding layers' own RoPE base (`rope_local_base_freq`, or per layer type inside
    /// `rope_parameters`); `None`: one RoPE for every layer.
    pub rope_local_theta: Option<f64>,
    /// The layer count of the 27B model, whose queries llama.cpp scales by
    /// `(hidden / heads)^-0.5` (its `query_pre_attn_scalar`), not `head_dim^-0.5`.
    pub gguf_27b_layers: usize,
    /// The window `make-model --arch` gives a shape converted to this architecture.
    pub synthetic_window: usize,
}

impl GemmaRow {
    /// Per layer, true where it slides (the default pattern, every `every`-th layer full).
    pub fn sliding_layers(every: usize, layers: usize) -> Vec<bool> {
        (0..layers)
            .map(|l| !(l + 1).is_multiple_of(every))
            .collect()
    }
}

/// An architecture's GGUF files.
#[derive(Debug)]
pub struct GgufRow {
    /// `general.architecture` values read as this architecture; the first is the prefix of its
    /// metadata keys and what `make-model --gguf` writes.
    pub names: &'static [&'static str],
    pub loader: GgufLoader,
}

/// The implementation that runs a GGUF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgufLoader {
    /// candle's quantized llama, with llama.cpp's interleaved RoPE (q and k rows permuted by
    /// convert_hf_to_gguf.py).
    Llama,
    /// candle's quantized llama after splitting fused `attn_qkv` and `ffn_up` and copying the
    /// metadata to `llama.*`; candle applies NEOX RoPE over whole heads (phi3).
    LlamaFused,
    /// candle's quantized qwen2.
    Qwen2,
    /// candle's quantized qwen3.
    Qwen3,
    /// infertop's own Gemma (`model::gemma`).
    Gemma,
}

impl GgufLoader {
    /// Whether the head width is the file's own (`attention.key_length`), not hidden / heads.
    pub fn reads_key_length(self) -> bool {
        matches!(self, GgufLoader::Qwen3 | GgufLoader::Gemma)
    }

    /// Whether it precomputes RoPE for a fixed length (`GGUF_MAX_POSITIONS`) whatever the
    /// file's context length.
    pub fn caps_positions(self) -> bool {
        matches!(
            self,
            GgufLoader::Llama | GgufLoader::LlamaFused | GgufLoader::Qwen2
        )
    }
}

/// transformers' defaults shared by the llama-like rows.
const LLAMA_DEFAULTS: Defaults = Defaults {
    num_key_value_heads: None,
    head_dim: None,
    max_position_embeddings: 2048,
    rms_norm_eps: 1e-6,
    rope_theta: 10_000.0,
    tie_word_embeddings: false,
};

/// The plain pre-norm layout: separate q, k, v without biases, a dense MLP.
const PLAIN: Layout = Layout {
    fused_qkv: false,
    qkv_bias: false,
    qk_norm: false,
    mlp: Mlp::Dense,
    gemma_norms: false,
    own_lm_head: false,
};

/// The llama row, of which the other rows say what differs.
const LLAMA: ArchRow = ArchRow {
    arch: Arch::Llama,
    name: "llama",
    help: None,
    model_type: "llama",
    hf_class: "LlamaForCausalLM",
    vision: None,
    defaults: LLAMA_DEFAULTS,
    layout: PLAIN,
    window: WindowRule::Never,
    window_support: WindowSupport::Applied,
    rope_scaling: RopeScalingRule::Llama3,
    partial_rotary: false,
    activation: Activation::Silu,
    attention_bias_field: false,
    free_head_dim: false,
    gemma: None,
    gguf: Some(GgufRow {
        // Mistral's GGUFs are llama's, read as llama.
        names: &["llama", "mistral"],
        loader: GgufLoader::Llama,
    }),
};

/// What Gemma 2 adds, of which Gemma 3's says what differs.
const GEMMA2_SETTINGS: GemmaRow = GemmaRow {
    full_every: 2,
    sliding_window: 4096,
    query_pre_attn_scalar: 256.0,
    attn_logit_softcapping: Some(50.0),
    final_logit_softcapping: Some(30.0),
    rope_local_theta: None,
    gguf_27b_layers: 46,
    synthetic_window: 4096,
};

/// Gemma 2's row, of which Gemma 3's says what differs.
const GEMMA2: ArchRow = ArchRow {
    arch: Arch::Gemma2,
    name: "gemma2",
    help: None,
    model_type: "gemma2",
    hf_class: "Gemma2ForCausalLM",
    defaults: Defaults {
        num_key_value_heads: Some(4),
        head_dim: Some(256),
        max_position_embeddings: 8192,
        rms_norm_eps: 1e-6,
        rope_theta: 10_000.0,
        tie_word_embeddings: true,
    },
    layout: Layout {
        gemma_norms: true,
        ..PLAIN
    },
    window: WindowRule::PerLayerType,
    rope_scaling: RopeScalingRule::Linear,
    activation: Activation::GeluTanh,
    attention_bias_field: true,
    free_head_dim: true,
    gemma: Some(GEMMA2_SETTINGS),
    gguf: Some(GgufRow {
        names: &["gemma2"],
        loader: GgufLoader::Gemma,
    }),
    ..LLAMA
};

/// Every architecture, in `Arch`'s order.
///
/// Adding an architecture is its row here and its loader:
/// 1. A variant in [`Arch`] and its row in this table, at the same position (a compile-time
///    check below keeps the two in step): our name, transformers' `model_type` and class, the
///    defaults of transformers' config class, the tensor layout, how `sliding_window` and RoPE
///    scaling are read, what candle's implementation cannot run and, where the architecture has
///    GGUF files, their `general.architecture` names and the [`GgufLoader`] that runs them.
///    From the row alone config.json is read and written (`config`), the tensors are listed,
///    checked and made up (`ArchConfig::tensor_specs`), `make-model --arch` converts a preset
///    (`presets::with_arch`), and GGUF files are read and written (`gguf`). Only a kind of
///    tensor no [`Layout`] field describes yet needs code: the field, its tensors in
///    `ArchConfig::tensor_specs`, and its llama.cpp name in `gguf::gguf_name`.
/// 2. Its loader in `model/arch.rs`: an arm in `CausalLm::load` that builds candle's model from
///    the `ArchConfig` (and, when candle's model type is new, a `CausalLm` variant with its arms
///    in `reset` and `forward`). GGUF files that no [`GgufLoader`] runs need a new one, with its
///    arm in `gguf::load`.
/// 3. Its checks: a golden fixture written by transformers (`scripts/make_golden_fixtures.py`
///    into `tests/fixtures/golden/<name>`, listed in `tests/golden.rs`), a preset in
///    `model/presets.rs` where a published shape is worth benchmarking, and its name in the
///    lists of architectures in README.md and docs/measure-a-model.md.
pub static ARCHITECTURES: &[ArchRow] = &[
    LLAMA,
    ArchRow {
        arch: Arch::Mistral,
        name: "mistral",
        model_type: "mistral",
        hf_class: "MistralForCausalLM",
        defaults: Defaults {
            num_key_value_heads: Some(8),
            max_position_embeddings: 32768,
            ..LLAMA_DEFAULTS
        },
        layout: Layout {
            own_lm_head: true,
            ..PLAIN
        },
        window: WindowRule::WhenSet,
        rope_scaling: RopeScalingRule::Llama3Unapplied,
        free_head_dim: true,
        gguf: None,
        ..LLAMA
    },
    ArchRow {
        arch: Arch::Qwen2,
        name: "qwen2",
        model_type: "qwen2",
        hf_class: "Qwen2ForCausalLM",
        defaults: Defaults {
            max_position_embeddings: 32768,
            ..LLAMA_DEFAULTS
        },
        layout: Layout {
            qkv_bias: true,
            ..PLAIN
        },
        window: WindowRule::WhenEnabled,
        rope_scaling: RopeScalingRule::Llama3Unapplied,
        gguf: Some(GgufRow {
            names: &["qwen2"],
            loader: GgufLoader::Qwen2,
        }),
        ..LLAMA
    },
    ArchRow {
        arch: Arch::Qwen3,
        name: "qwen3",
        model_type: "qwen3",
        hf_class: "Qwen3ForCausalLM",
        defaults: Defaults {
            num_key_value_heads: Some(32),
            head_dim: Some(128),
            max_position_embeddings: 32768,
            ..LLAMA_DEFAULTS
        },
        layout: Layout {
            qk_norm: true,
            ..PLAIN
        },
        window: WindowRule::WhenEnabled,
        window_support: WindowSupport::Refused,
        rope_scaling: RopeScalingRule::Llama3Unapplied,
        attention_bias_field: true,
        free_head_dim: true,
        gguf: Some(GgufRow {
            names: &["qwen3"],
            loader: GgufLoader::Qwen3,
        }),
        ..LLAMA
    },
    ArchRow {
        arch: Arch::Phi3,
        name: "phi3",
        model_type: "phi3",
        hf_class: "Phi3ForCausalLM",
        defaults: Defaults {
            max_position_embeddings: 4096,
            rms_norm_eps: 1e-5,
            ..LLAMA_DEFAULTS
        },
        layout: Layout {
            fused_qkv: true,
            mlp: Mlp::FusedGateUp,
            ..PLAIN
        },
        window: WindowRule::WhenSet,
        window_support: WindowSupport::Ignored,
        rope_scaling: RopeScalingRule::Llama3Unapplied,
        partial_rotary: true,
        gguf: Some(GgufRow {
            names: &["phi3"],
            loader: GgufLoader::LlamaFused,
        }),
        ..LLAMA
    },
    ArchRow {
        arch: Arch::Mixtral,
        name: "mixtral",
        model_type: "mixtral",
        hf_class: "MixtralForCausalLM",
        defaults: Defaults {
            num_key_value_heads: Some(8),
            max_position_embeddings: 4096 * 32,
            rms_norm_eps: 1e-5,
            rope_theta: 1e6,
            ..LLAMA_DEFAULTS
        },
        layout: Layout {
            mlp: Mlp::BlockSparseMoe {
                num_experts: 8,
                experts_per_tok: 2,
            },
            own_lm_head: true,
            ..PLAIN
        },
        window: WindowRule::WhenSet,
        rope_scaling: RopeScalingRule::Llama3Unapplied,
        gguf: None,
        ..LLAMA
    },
    ArchRow {
        arch: Arch::Qwen3Moe,
        name: "qwen3_moe",
        model_type: "qwen3_moe",
        hf_class: "Qwen3MoeForCausalLM",
        defaults: Defaults {
            num_key_value_heads: Some(4),
            max_position_embeddings: 32768,
            ..LLAMA_DEFAULTS
        },
        layout: Layout {
            qk_norm: true,
            mlp: Mlp::SparseMoe {
                num_experts: 128,
                experts_per_tok: 8,
                moe_intermediate_size: 768,
                norm_topk_prob: false,
            },
            ..PLAIN
        },
        window: WindowRule::WhenEnabled,
        window_support: WindowSupport::Refused,
        rope_scaling: RopeScalingRule::Llama3Unapplied,
        attention_bias_field: true,
        free_head_dim: true,
        gguf: None,
        ..LLAMA
    },
    GEMMA2,
    ArchRow {
        arch: Arch::Gemma3,
        name: "gemma3",
        help: Some(
            "Gemma 3's text model (`gemma3_text`; of the vision model, `Gemma3ForConditionalGeneration`, only the text tower is read)",
        ),
        model_type: "gemma3_text",
        hf_class: "Gemma3ForCausalLM",
        vision: Some(VisionModel {
            hf_class: "Gemma3ForConditionalGeneration",
            model_type: "gemma3",
            text_sizes: TextSizes {
                vocab_size: 262_208,
                hidden_size: 2304,
                intermediate_size: 9216,
                num_hidden_layers: 26,
                num_attention_heads: 8,
            },
        }),
        defaults: Defaults {
            max_position_embeddings: 131_072,
            rope_theta: 1e6,
            ..GEMMA2.defaults
        },
        layout: Layout {
            qk_norm: true,
            ..GEMMA2.layout
        },
        gemma: Some(GemmaRow {
            full_every: 6,
            attn_logit_softcapping: None,
            final_logit_softcapping: None,
            rope_local_theta: Some(10_000.0),
            gguf_27b_layers: 62,
            // Gemma 3 1B's (its 4B and larger use 1024).
            synthetic_window: 512,
            ..GEMMA2_SETTINGS
        }),
        gguf: Some(GgufRow {
            names: &["gemma3"],
            loader: GgufLoader::Gemma,
        }),
        ..GEMMA2
    },
];

// Each row sits at its `Arch`'s position, so `Arch::row` is an index.
const _: () = {
    let mut i = 0;
    while i < ARCHITECTURES.len() {
        assert!(
            ARCHITECTURES[i].arch as usize == i,
            "ARCHITECTURES must list one row per Arch, in Arch's order"
        );
        i += 1;
    }
};

impl Arch {
    /// Every architecture, in the table's order.
    pub fn all() -> impl Iterator<Item = Arch> {
        ARCHITECTURES.iter().map(|row| row.arch)
    }

    pub fn row(self) -> &'static ArchRow {
        &ARCHITECTURES[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// Our name, a `model_type` or a class name (of the architecture or of a multimodal model
    /// whose text model it is), in any case.
    pub fn parse(s: &str) -> Option<Arch> {
        let names = |row: &ArchRow| {
            let vision = row.vision.as_ref();
            [row.name, row.model_type, row.hf_class]
                .into_iter()
                .chain(vision.map(|v| v.hf_class))
                .chain(vision.map(|v| v.model_type))
                .collect::<Vec<_>>()
        };
        ARCHITECTURES
            .iter()
            .find(|row| names(row).iter().any(|n| n.eq_ignore_ascii_case(s)))
            .map(|row| row.arch)
    }

    /// The class names config.json may give, for messages.
    pub fn supported_hf_classes() -> String {
        ARCHITECTURES
            .iter()
            .flat_map(|row| [Some(row.hf_class), row.vision.as_ref().map(|v| v.hf_class)])
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `--arch NAME`, by our name; a row's `help` is said beside its name.
impl clap::ValueEnum for Arch {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<Arch>> =
            std::sync::LazyLock::new(|| Arch::all().collect());
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let row = self.row();
        let value = clap::builder::PossibleValue::new(row.name);
        Some(match row.help {
            Some(help) => value.help(help),
            None => value,
        })
    }
}

/// By our name.
impl serde::Serialize for Arch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Arch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        ARCHITECTURES
            .iter()
            .find(|row| row.name == name)
            .map(|row| row.arch)
            .ok_or_else(|| {
                let names: Vec<&str> = ARCHITECTURES.iter().map(|row| row.name).collect();
                serde::de::Error::custom(format!(
                    "unknown architecture `{}` (known: {})",
                    name.escape_debug(),
                    names.join(", ")
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_to_their_row() {
        for row in ARCHITECTURES {
            assert_eq!(row.arch.row().name, row.name);
            for n in [row.name, row.model_type, row.hf_class] {
                assert_eq!(Arch::parse(n), Some(row.arch), "{n}");
                assert_eq!(Arch::parse(&n.to_ascii_uppercase()), Some(row.arch), "{n}");
            }
            let json = serde_json::to_string(&row.arch).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", row.name));
            let back: Result<Arch, _> = serde_json::from_str(&json);
            assert_eq!(back.ok(), Some(row.arch));
        }
        assert_eq!(Arch::parse("gemma3"), Some(Arch::Gemma3));
        assert_eq!(
            Arch::parse("Gemma3ForConditionalGeneration"),
            Some(Arch::Gemma3)
        );
        assert_eq!(Arch::parse("qwen3moe"), None);
        assert!(serde_json::from_str::<Arch>("\"gpt2\"").is_err());
    }

    /// Every name says one architecture: a row that forgets to set its own (inheriting
    /// llama's GGUF names through `..LLAMA`, say) is caught here.
    #[test]
    fn names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for row in ARCHITECTURES {
            let vision = row.vision.as_ref();
            let gguf = row.gguf.as_ref().map_or(&[][..], |g| g.names);
            let mut names = vec![row.name.to_string(), row.hf_class.to_ascii_lowercase()];
            if row.model_type != row.name {
                names.push(row.model_type.to_string());
            }
            names.extend(vision.map(|v| v.hf_class.to_ascii_lowercase()));
            names.extend(
                vision
                    .map(|v| v.model_type)
                    .filter(|&m| m != row.name)
                    .map(String::from),
            );
            names.extend(gguf.iter().map(|g| format!("gguf:{g}")));
            for n in names {
                assert!(seen.insert(n.clone()), "{n} names two architectures");
            }
        }
    }

    /// Rows agree with themselves: a GGUF loader matches the layout it can read, Gemma's parts
    /// come together.
    #[test]
    fn rows_are_consistent() {
        for row in ARCHITECTURES {
            let gemma = row.gemma.is_some();
            assert_eq!(row.layout.gemma_norms, gemma, "{}", row.name);
            assert_eq!(
                row.window == WindowRule::PerLayerType,
                gemma,
                "{}",
                row.name
            );
            assert_eq!(
                row.activation == Activation::GeluTanh,
                gemma,
                "{}",
                row.name
            );
            assert_eq!(
                row.rope_scaling == RopeScalingRule::Linear,
                gemma,
                "{}",
                row.name
            );
            if let Some(g) = &row.gguf {
                assert!(!g.names.is_empty(), "{}", row.name);
                assert_eq!(g.loader == GgufLoader::Gemma, gemma, "{}", row.name);
                assert_eq!(
                    g.loader == GgufLoader::LlamaFused,
                    row.layout.fused_qkv,
                    "{}",
                    row.name
                );
            }
        }
    }
}
