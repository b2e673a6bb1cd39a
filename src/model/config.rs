//! `config.json` as current and older transformers write it, adapted to one `ArchConfig`.

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, SeqAccess, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::Value;

pub use super::architectures::Arch;
use super::architectures::{
    ArchRow, GemmaRow, Mlp, RopeScalingRule, VisionModel, WindowRule, WindowSupport,
};
use super::ModelError;
use crate::util::one_line;

/// Llama 3 style RoPE frequency scaling.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RopeScaling {
    pub factor: f32,
    pub low_freq_factor: f32,
    pub high_freq_factor: f32,
    pub original_max_position_embeddings: usize,
}

/// A mixture-of-experts feed-forward: each token runs `experts_per_tok` of `num_experts` experts.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Moe {
    pub num_experts: usize,
    pub experts_per_tok: usize,
    /// Width of one expert (mixtral: `intermediate_size`; qwen3_moe: `moe_intermediate_size`).
    pub expert_intermediate_size: usize,
    /// Whether the top-k routing weights are renormalized to sum to 1 (always in mixtral).
    pub norm_topk_prob: bool,
    /// Every `decoder_sparse_step`-th layer is MoE, the others dense (qwen3_moe; 1: all).
    pub decoder_sparse_step: usize,
}

impl Moe {
    /// Whether layer `l` (from 0) has experts.
    pub fn is_moe_layer(&self, l: usize) -> bool {
        (l + 1).is_multiple_of(self.decoder_sparse_step.max(1))
    }
}

/// The shape of a decoder-only transformer, whatever wrote it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArchConfig {
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: Option<RopeScaling>,
    pub tie_word_embeddings: bool,
    pub sliding_window: Option<usize>,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
    /// Experts in place of the dense MLP (mixtral, qwen3_moe).
    pub moe: Option<Moe>,
    /// The fraction of each head that RoPE rotates (phi3); `None`: all of it.
    pub partial_rotary_factor: Option<f64>,
    /// What Gemma 2 and Gemma 3 add (`None` for the other architectures).
    pub gemma: Option<Gemma>,
}

impl Gemma {
    /// The settings the published models of `arch` share, for `layers` layers of `head_dim`
    /// (its row's [`GemmaRow`], queries scaled by `head_dim^-0.5`). `None` for the
    /// architectures without Gemma's settings.
    pub fn published(arch: Arch, layers: usize, head_dim: usize) -> Option<Gemma> {
        let row = arch.row();
        let g = row.gemma.as_ref()?;
        Some(Gemma {
            query_pre_attn_scalar: head_dim as f64,
            attn_logit_softcapping: g.attn_logit_softcapping,
            final_logit_softcapping: g.final_logit_softcapping,
            sliding_layers: GemmaRow::sliding_layers(g.full_every, layers),
            rope_local_theta: g.rope_local_theta.unwrap_or(row.defaults.rope_theta),
            rope_linear_factor: None,
            qk_norm: row.layout.qk_norm,
        })
    }

    /// Gemma's fields of config.json, in the layout current transformers write: RoPE per layer
    /// type where the sliding layers have their own base (`per_layer_type`).
    fn write_json(
        &self,
        obj: &mut serde_json::Map<String, Value>,
        rope_theta: f64,
        per_layer_type: bool,
    ) {
        obj.remove("rope_theta");
        obj.insert(
            "query_pre_attn_scalar".into(),
            self.query_pre_attn_scalar.into(),
        );
        obj.insert(
            "attn_logit_softcapping".into(),
            self.attn_logit_softcapping.into(),
        );
        obj.insert(
            "final_logit_softcapping".into(),
            self.final_logit_softcapping.into(),
        );
        let types: Vec<&str> = self
            .sliding_layers
            .iter()
            .map(|&s| {
                if s {
                    "sliding_attention"
                } else {
                    "full_attention"
                }
            })
            .collect();
        obj.insert("layer_types".into(), types.into());
        let rope = |theta: f64, linear: Option<f64>| match linear {
            Some(f) => serde_json::json!({"rope_type": "linear", "factor": f, "rope_theta": theta}),
            None => serde_json::json!({"rope_type": "default", "rope_theta": theta}),
        };
        let params = if per_layer_type {
            serde_json::json!({
                "full_attention": rope(rope_theta, self.rope_linear_factor),
                "sliding_attention": rope(self.rope_local_theta, None),
            })
        } else {
            rope(rope_theta, self.rope_linear_factor)
        };
        obj.insert("rope_parameters".into(), params);
    }
}

/// What Gemma 2 and Gemma 3 add to the common shape. Their window applies only to the layers
/// `sliding_layers` marks, with `ArchConfig::sliding_window` as its width.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gemma {
    /// Attention scores are scaled by `query_pre_attn_scalar^-0.5`, not `head_dim^-0.5`.
    pub query_pre_attn_scalar: f64,
    /// Scores become `cap * tanh(score / cap)` before the mask (Gemma 2).
    pub attn_logit_softcapping: Option<f64>,
    /// Logits become `cap * tanh(logit / cap)` (Gemma 2).
    pub final_logit_softcapping: Option<f64>,
    /// Per layer: true where a query sees only the last `sliding_window` positions.
    pub sliding_layers: Vec<bool>,
    /// RoPE base of the sliding layers (Gemma 3: `rope_local_base_freq`); full layers use
    /// `rope_theta`.
    pub rope_local_theta: f64,
    /// Linear RoPE scaling (positions divided by it) of the full-attention layers (Gemma 3).
    pub rope_linear_factor: Option<f64>,
    /// RMSNorm of every query and key head before RoPE (Gemma 3).
    pub qk_norm: bool,
}

impl ArchConfig {
    /// Reads and adapts `config.json`; errors name the file and the field.
    pub fn from_file(path: &Path) -> Result<ArchConfig, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            ModelError::new(format!(
                "{}: not valid JSON ({e}); re-download the model's config.json",
                path.display()
            ))
        })?;
        Self::from_json(&value).map_err(|m| ModelError::new(format!("{}: {m}", path.display())))
    }

    /// Adapts a parsed config.json: serde reads it into [`RawConfig`], whose `adapt` applies
    /// transformers' defaults and the checks. The architecture is read first, so an unsupported
    /// model is named before its fields are checked.
    pub fn from_json(v: &Value) -> Result<ArchConfig, String> {
        if !v.is_object() {
            return Err("config.json must be a JSON object".to_string());
        }
        let names = deserialize::<RawArchNames>(v)?;
        let arch = names.arch()?;
        if let Some(vision) = arch.row().vision.as_ref().filter(|m| names.is(m)) {
            let text = text_config(v, vision)?;
            return deserialize::<RawConfig>(&text)
                .and_then(|raw| raw.adapt(arch))
                .map_err(|m| match m.strip_prefix('`') {
                    Some(rest) => format!("`text_config.{rest}"),
                    None => format!("text_config: {m}"),
                });
        }
        deserialize::<RawConfig>(v)?.adapt(arch)
    }

    /// The config.json `make-model` writes (the current transformers layout).
    pub fn to_json(&self) -> Value {
        let row = self.arch.row();
        let (act_field, act) = row.activation.field();
        let mut v = serde_json::json!({
            "architectures": [row.hf_class],
            "model_type": row.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_word_embeddings,
            act_field: act,
            "torch_dtype": "float32",
        });
        if let Some(obj) = v.as_object_mut() {
            if let Some(s) = &self.rope_scaling {
                obj.insert(
                    "rope_scaling".into(),
                    serde_json::json!({
                        "rope_type": "llama3",
                        "factor": s.factor,
                        "low_freq_factor": s.low_freq_factor,
                        "high_freq_factor": s.high_freq_factor,
                        "original_max_position_embeddings": s.original_max_position_embeddings,
                    }),
                );
            }
            if row.window != WindowRule::Never {
                obj.insert("sliding_window".into(), self.sliding_window.into());
            }
            if row.window == WindowRule::WhenEnabled {
                obj.insert(
                    "use_sliding_window".into(),
                    self.sliding_window.is_some().into(),
                );
            }
            if let Some(b) = self.bos_token_id {
                obj.insert("bos_token_id".into(), b.into());
            }
            if let Some(&e) = self.eos_token_ids.first() {
                obj.insert("eos_token_id".into(), e.into());
            }
            if row.attention_bias_field {
                obj.insert("attention_bias".into(), false.into());
            }
            if let Some(f) = self.partial_rotary_factor {
                obj.insert("partial_rotary_factor".into(), f.into());
            }
            if let Some(m) = &self.moe {
                obj.insert("num_local_experts".into(), m.num_experts.into());
                obj.insert("num_experts_per_tok".into(), m.experts_per_tok.into());
                if let Mlp::SparseMoe { .. } = row.layout.mlp {
                    obj.insert(
                        "moe_intermediate_size".into(),
                        m.expert_intermediate_size.into(),
                    );
                    obj.insert("norm_topk_prob".into(), m.norm_topk_prob.into());
                    obj.insert("decoder_sparse_step".into(), m.decoder_sparse_step.into());
                    obj.insert("mlp_only_layers".into(), serde_json::json!([]));
                }
            }
            if let Some(g) = &self.gemma {
                let per_layer_type = row
                    .gemma
                    .as_ref()
                    .is_some_and(|g| g.rope_local_theta.is_some());
                g.write_json(obj, self.rope_theta, per_layer_type);
            }
        }
        v
    }

    /// Parameters, counting tied embeddings once.
    pub fn params(&self) -> u64 {
        self.tensor_specs().iter().map(|t| t.numel() as u64).sum()
    }

    /// Parameters one token runs through: all of them, less the experts a MoE router skips.
    pub fn active_params(&self) -> u64 {
        let Some(m) = &self.moe else {
            return self.params();
        };
        let per_expert = 3 * (self.hidden_size * m.expert_intermediate_size) as u64;
        let moe_layers = (0..self.num_hidden_layers)
            .filter(|&l| m.is_moe_layer(l))
            .count() as u64;
        let idle = m.num_experts.saturating_sub(m.experts_per_tok) as u64;
        self.params() - moe_layers * idle * per_expert
    }

    /// The layers whose KV cache holds only the window (Gemma's sliding layers: our Gemma keeps
    /// no more). Other architectures' windows, where candle applies them, still cache every
    /// position.
    pub fn kv_window(&self) -> Option<crate::event::KvWindow> {
        let g = self.gemma.as_ref()?;
        let window = self.sliding_window?;
        let sliding_layers = g.sliding_layers.iter().filter(|&&s| s).count();
        (sliding_layers > 0).then_some(crate::event::KvWindow {
            sliding_layers,
            window,
        })
    }

    /// 2 × layers × kv heads × head dim × dtype bytes.
    pub fn kv_bytes_per_token(&self, dtype_bytes: usize) -> u64 {
        2 * (self.num_hidden_layers * self.num_key_value_heads * self.head_dim * dtype_bytes) as u64
    }

    /// Every tensor the architecture loads, with its shape, in the HF naming.
    pub fn tensor_specs(&self) -> Vec<TensorSpec> {
        let (h, v) = (self.hidden_size, self.vocab_size);
        let q_out = self.num_attention_heads * self.head_dim;
        let kv_out = self.num_key_value_heads * self.head_dim;
        let layout = &self.arch.row().layout;
        let mut specs = vec![TensorSpec::new("model.embed_tokens.weight", vec![v, h], h)];
        for l in 0..self.num_hidden_layers {
            let p = format!("model.layers.{l}");
            let attn = format!("{p}.self_attn");
            if layout.fused_qkv {
                specs.push(TensorSpec::new(
                    format!("{attn}.qkv_proj.weight"),
                    vec![q_out + 2 * kv_out, h],
                    h,
                ));
            } else {
                for (n, o) in [("q", q_out), ("k", kv_out), ("v", kv_out)] {
                    specs.push(TensorSpec::new(
                        format!("{attn}.{n}_proj.weight"),
                        vec![o, h],
                        h,
                    ));
                }
            }
            if layout.qkv_bias {
                for (n, o) in [("q", q_out), ("k", kv_out), ("v", kv_out)] {
                    specs.push(TensorSpec::new(format!("{attn}.{n}_proj.bias"), vec![o], h));
                }
            }
            specs.push(TensorSpec::new(
                format!("{attn}.o_proj.weight"),
                vec![h, q_out],
                q_out,
            ));
            // Gemma's own setting, which its implementation reads.
            let qk_norm = self.gemma.as_ref().map_or(layout.qk_norm, |g| g.qk_norm);
            if qk_norm {
                for n in ["q_norm", "k_norm"] {
                    specs.push(self.norm(format!("{attn}.{n}.weight"), self.head_dim));
                }
            }
            self.push_mlp(&mut specs, &p, l);
            let mut norms = vec!["input_layernorm", "post_attention_layernorm"];
            if layout.gemma_norms {
                norms.extend(["pre_feedforward_layernorm", "post_feedforward_layernorm"]);
            }
            for n in norms {
                specs.push(self.norm(format!("{p}.{n}.weight"), h));
            }
        }
        specs.push(self.norm("model.norm.weight".to_string(), h));
        if !self.tie_word_embeddings {
            specs.push(TensorSpec::new("lm_head.weight", vec![v, h], h));
        }
        specs
    }

    /// A norm's gain: Gemma stores `w` and multiplies by `1 + w`, so its neutral gain is 0.
    fn norm(&self, name: String, dim: usize) -> TensorSpec {
        let mut spec = TensorSpec::norm(name, dim);
        if self.arch.row().layout.gemma_norms {
            spec.norm_init = 0.0;
        }
        spec
    }

    /// The feed-forward tensors of layer `l` (prefix `p`): dense, fused (phi3) or experts.
    fn push_mlp(&self, specs: &mut Vec<TensorSpec>, p: &str, l: usize) {
        let (h, i) = (self.hidden_size, self.intermediate_size);
        let dense = |specs: &mut Vec<TensorSpec>, p: &str, i: usize| {
            for (n, shape, fan_in) in [
                ("gate_proj", vec![i, h], h),
                ("up_proj", vec![i, h], h),
                ("down_proj", vec![h, i], i),
            ] {
                specs.push(TensorSpec::new(format!("{p}.{n}.weight"), shape, fan_in));
            }
        };
        match (&self.moe, self.arch.row().layout.mlp) {
            (Some(m), Mlp::BlockSparseMoe { .. }) => {
                let e = m.expert_intermediate_size;
                let moe = format!("{p}.block_sparse_moe");
                specs.push(TensorSpec::new(
                    format!("{moe}.gate.weight"),
                    vec![m.num_experts, h],
                    h,
                ));
                for x in 0..m.num_experts {
                    for (n, shape, fan_in) in [
                        ("w1", vec![e, h], h),
                        ("w2", vec![h, e], e),
                        ("w3", vec![e, h], h),
                    ] {
                        specs.push(TensorSpec::new(
                            format!("{moe}.experts.{x}.{n}.weight"),
                            shape,
                            fan_in,
                        ));
                    }
                }
            }
            (Some(m), _) if m.is_moe_layer(l) => {
                specs.push(TensorSpec::new(
                    format!("{p}.mlp.gate.weight"),
                    vec![m.num_experts, h],
                    h,
                ));
                for x in 0..m.num_experts {
                    dense(
                        specs,
                        &format!("{p}.mlp.experts.{x}"),
                        m.expert_intermediate_size,
                    );
                }
            }
            (_, Mlp::FusedGateUp) => {
                specs.push(TensorSpec::new(
                    format!("{p}.mlp.gate_up_proj.weight"),
                    vec![2 * i, h],
                    h,
                ));
                specs.push(TensorSpec::new(
                    format!("{p}.mlp.down_proj.weight"),
                    vec![h, i],
                    i,
                ));
            }
            _ => dense(specs, &format!("{p}.mlp"), i),
        }
    }

    /// What candle's implementations of this architecture cannot run, said plainly.
    pub fn check_supported(&self) -> Result<(), String> {
        let row = self.arch.row();
        let natural = self.hidden_size / self.num_attention_heads;
        if self.head_dim != natural && !row.free_head_dim {
            return Err(format!(
                "head_dim {} differs from hidden_size/num_attention_heads = {natural}; candle's {} implementation does not support that",
                self.head_dim,
                self.arch.name()
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(format!("head_dim {} must be even for RoPE", self.head_dim));
        }
        if let Some(f) = self.partial_rotary_factor {
            let rotated = (f * self.head_dim as f64) as usize;
            if !(f > 0.0 && f <= 1.0 && rotated.is_multiple_of(2)) {
                return Err(format!(
                    "partial_rotary_factor {f} rotates {rotated} of head_dim {}; it must be in (0, 1] and rotate an even number",
                    self.head_dim
                ));
            }
        }
        if let (Some(w), WindowSupport::Refused) = (self.sliding_window, row.window_support) {
            return Err(format!(
                "sliding_window {w} with use_sliding_window: candle's {} implementation has no sliding window",
                self.arch.name()
            ));
        }
        if let Some(m) = &self.moe {
            if m.experts_per_tok == 0 || m.experts_per_tok > m.num_experts {
                return Err(format!(
                    "num_experts_per_tok {} must be between 1 and the {} experts",
                    m.experts_per_tok, m.num_experts
                ));
            }
            if matches!(row.layout.mlp, Mlp::BlockSparseMoe { .. }) && m.decoder_sparse_step != 1 {
                return Err(format!("{} has experts in every layer", row.name));
            }
        }
        Ok(())
    }
}

/// One tensor's name and shape, and the fan-in used to scale synthetic weights.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub fan_in: usize,
    pub is_norm: bool,
    /// The value a synthetic norm gain starts at (1, or 0 where the model adds 1 itself).
    pub norm_init: f32,
}

impl TensorSpec {
    fn new(name: impl Into<String>, shape: Vec<usize>, fan_in: usize) -> Self {
        Self {
            name: name.into(),
            shape,
            fan_in,
            is_norm: false,
            norm_init: 1.0,
        }
    }

    fn norm(name: String, h: usize) -> Self {
        Self {
            name,
            shape: vec![h],
            fan_in: h,
            is_norm: true,
            norm_init: 1.0,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Deserializes `T` from config.json; an error names the field (`rope_parameters.factor`) in
/// one line.
fn deserialize<'de, T: Deserialize<'de>>(v: &'de Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let message = one_line(&e.into_inner().to_string());
        if path == "." {
            message
        } else {
            format!("`{path}`: {message}")
        }
    })
}

/// `architectures` and `model_type`: which model this is.
#[derive(Deserialize)]
struct RawArchNames {
    architectures: Option<Vec<String>>,
    model_type: Option<String>,
}

/// A multimodal model's config.json (`vision`) keeps its text model's settings in
/// `text_config`, where published configs write only what differs from the text config class's
/// defaults: its sizes are filled in (the rest default as for the text model itself), as
/// transformers does, and the top level's token ids and tying apply where `text_config` has none.
fn text_config(v: &Value, vision: &VisionModel) -> Result<Value, String> {
    let Some(text) = v.get("text_config").and_then(Value::as_object) else {
        return Err(format!(
            "`text_config`: missing; a {} config.json holds the text model's settings there",
            vision.hf_class
        ));
    };
    let sizes = &vision.text_sizes;
    let mut merged = serde_json::json!({
        "vocab_size": sizes.vocab_size,
        "hidden_size": sizes.hidden_size,
        "intermediate_size": sizes.intermediate_size,
        "num_hidden_layers": sizes.num_hidden_layers,
        "num_attention_heads": sizes.num_attention_heads,
    });
    if let Some(obj) = merged.as_object_mut() {
        for key in ["tie_word_embeddings", "bos_token_id", "eos_token_id"] {
            if let Some(top) = v.get(key) {
                obj.insert(key.to_string(), top.clone());
            }
        }
        for (k, val) in text {
            obj.insert(k.clone(), val.clone());
        }
    }
    Ok(merged)
}

impl RawArchNames {
    /// Whether this is the multimodal model `vision` (its class first in `architectures`, or,
    /// without them, its `model_type`), whose text model is read from `text_config`.
    fn is(&self, vision: &VisionModel) -> bool {
        match self.architectures.as_ref().and_then(|list| list.first()) {
            Some(first) => first.eq_ignore_ascii_case(vision.hf_class),
            None => self.model_type.as_deref() == Some(vision.model_type),
        }
    }

    /// The first of `architectures`, else `model_type`.
    fn arch(&self) -> Result<Arch, String> {
        let supported = Arch::supported_hf_classes();
        if let Some(first) = self.architectures.as_ref().and_then(|list| list.first()) {
            return Arch::parse(first).ok_or_else(|| {
                format!(
                    "architecture `{}` is not supported (supported: {supported})",
                    first.escape_debug()
                )
            });
        }
        if let Some(mt) = &self.model_type {
            return Arch::parse(mt).ok_or_else(|| {
                format!(
                    "model_type `{}` is not supported (supported: {supported})",
                    mt.escape_debug()
                )
            });
        }
        Err(format!(
            "names no architecture (neither `architectures` nor `model_type`); supported: {supported}"
        ))
    }
}

/// The fields of config.json infertop reads, as current and older transformers write them.
/// Nothing is decided here; [`RawConfig::adapt`] holds the rules.
#[derive(Deserialize)]
struct RawConfig {
    // Required, in the order a missing one is reported.
    hidden_size: Positive,
    num_attention_heads: Positive,
    num_hidden_layers: Positive,
    vocab_size: Positive,
    intermediate_size: Positive,
    /// Absent in multi-head configs.
    num_key_value_heads: Option<Positive>,
    /// Absent in older configs: hidden_size / num_attention_heads.
    head_dim: Option<Positive>,
    max_position_embeddings: Option<Positive>,
    rms_norm_eps: Option<f64>,
    /// Older transformers write it here; current ones inside `rope_parameters`.
    rope_theta: Option<f64>,
    rope_parameters: Option<RawRope>,
    rope_scaling: Option<RawRope>,
    tie_word_embeddings: Option<bool>,
    use_sliding_window: Option<bool>,
    sliding_window: Option<usize>,
    bos_token_id: Option<u32>,
    eos_token_id: Option<TokenIds>,
    /// Phi-3 writes it at top level and (current) inside `rope_parameters`.
    partial_rotary_factor: Option<f64>,
    // Mixture of experts. Current transformers write `num_local_experts` for both mixtral and
    // qwen3_moe; older qwen3_moe configs `num_experts`.
    num_local_experts: Option<Positive>,
    num_experts: Option<Positive>,
    num_experts_per_tok: Option<Positive>,
    moe_intermediate_size: Option<Positive>,
    norm_topk_prob: Option<bool>,
    decoder_sparse_step: Option<Positive>,
    mlp_only_layers: Option<Vec<usize>>,
    // Gemma. The soft-caps tell absent (the architecture's default) from `null` (none).
    query_pre_attn_scalar: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    attn_logit_softcapping: Option<Option<f64>>,
    #[serde(default, deserialize_with = "present")]
    final_logit_softcapping: Option<Option<f64>>,
    /// Current layout: `sliding_attention` or `full_attention` per layer.
    layer_types: Option<Vec<String>>,
    /// Older Gemma 3: every `sliding_window_pattern`-th layer is full, the others sliding.
    sliding_window_pattern: Option<Positive>,
    /// Older Gemma 3: the RoPE base of the sliding layers.
    rope_local_base_freq: Option<f64>,
    hidden_activation: Option<String>,
    attention_bias: Option<bool>,
    use_bidirectional_attention: Option<bool>,
}

/// A field that may be present as `null`: `Some(None)`, told apart from absent (`None`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Gemma's reading of config.json (less RoPE), folded into [`ArchConfig`] and [`Gemma`].
struct GemmaParts {
    sliding_layers: Vec<bool>,
    /// The window of the sliding layers, if any layer slides.
    window: Option<usize>,
    query_pre_attn_scalar: f64,
    attn_logit_softcapping: Option<f64>,
    final_logit_softcapping: Option<f64>,
}

/// RoPE as config.json sets it, wherever it is written.
struct RopeParts {
    /// The base (of the full-attention layers where layer types differ).
    theta: f64,
    /// The sliding layers' base (Gemma).
    local_theta: f64,
    /// The scaling (of the full-attention layers), of the kind the architecture reads.
    scaling: Option<Scaling>,
}

/// A RoPE scaling, of a kind [`RopeScalingRule`] names.
enum Scaling {
    Llama3(RopeScaling),
    /// Positions divided by the factor.
    Linear(f64),
}

/// `rope_scaling` (older) or `rope_parameters` (current, which also holds `rope_theta`).
#[derive(Deserialize)]
struct RawRope {
    rope_type: Option<String>,
    /// The older spelling of `rope_type`.
    #[serde(rename = "type")]
    legacy_type: Option<String>,
    rope_theta: Option<f64>,
    factor: Option<f64>,
    low_freq_factor: Option<f64>,
    high_freq_factor: Option<f64>,
    original_max_position_embeddings: Option<Positive>,
    partial_rotary_factor: Option<f64>,
    /// Current Gemma 3: one set of RoPE parameters per layer type.
    full_attention: Option<Box<RawRope>>,
    sliding_attention: Option<Box<RawRope>>,
}

impl RawConfig {
    /// The rules: the architecture's defaults, where RoPE settings live, and the shape checks.
    fn adapt(self, arch: Arch) -> Result<ArchConfig, String> {
        let row = arch.row();
        let defaults = &row.defaults;
        let hidden_size = self.hidden_size.0;
        let num_attention_heads = self.num_attention_heads.0;
        let num_key_value_heads = match self.num_key_value_heads {
            Some(kv) => kv.0,
            None => defaults.num_key_value_heads.unwrap_or(num_attention_heads),
        };
        let head_dim = match (self.head_dim, defaults.head_dim) {
            (Some(d), _) => d.0,
            (None, Some(d)) => d,
            (None, None) => hidden_size / num_attention_heads,
        };
        if head_dim == 0 {
            return Err(format!(
                "hidden_size ({hidden_size}) is smaller than num_attention_heads ({num_attention_heads})"
            ));
        }
        if !num_attention_heads.is_multiple_of(num_key_value_heads) {
            return Err(format!(
                "num_attention_heads ({num_attention_heads}) must be a multiple of num_key_value_heads ({num_key_value_heads})"
            ));
        }
        let gemma = match &row.gemma {
            Some(g) => Some(self.gemma(row, g, self.num_hidden_layers.0)?),
            None => None,
        };
        let rope = self.rope(row)?;
        let partial_rotary_factor = self
            .partial_rotary_factor
            .or_else(|| {
                self.rope_parameters
                    .as_ref()
                    .and_then(|p| p.partial_rotary_factor)
            })
            .filter(|&f| row.partial_rotary && f != 1.0);
        let moe = self.moe(row)?;
        let (rope_scaling, rope_linear_factor) = match rope.scaling {
            Some(Scaling::Llama3(s)) => (Some(s), None),
            Some(Scaling::Linear(f)) => (None, Some(f)),
            None => (None, None),
        };
        Ok(ArchConfig {
            arch,
            vocab_size: self.vocab_size.0,
            hidden_size,
            intermediate_size: self.intermediate_size.0,
            num_hidden_layers: self.num_hidden_layers.0,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            max_position_embeddings: self
                .max_position_embeddings
                .map_or(defaults.max_position_embeddings, |m| m.0),
            rms_norm_eps: self.rms_norm_eps.unwrap_or(defaults.rms_norm_eps),
            rope_theta: rope.theta,
            rope_scaling,
            tie_word_embeddings: self
                .tie_word_embeddings
                .unwrap_or(defaults.tie_word_embeddings),
            sliding_window: match &gemma {
                Some(g) => g.window,
                None => self.sliding_window(row)?,
            },
            bos_token_id: self.bos_token_id,
            eos_token_ids: self.eos_token_id.map(|ids| ids.0).unwrap_or_default(),
            moe,
            partial_rotary_factor,
            gemma: gemma.map(|g| Gemma {
                query_pre_attn_scalar: g.query_pre_attn_scalar,
                attn_logit_softcapping: g.attn_logit_softcapping,
                final_logit_softcapping: g.final_logit_softcapping,
                sliding_layers: g.sliding_layers,
                rope_local_theta: rope.local_theta,
                rope_linear_factor,
                qk_norm: row.layout.qk_norm,
            }),
        })
    }

    /// RoPE from either layout: `rope_theta` at top level (older) or inside `rope_parameters`
    /// (current); the scaling in `rope_scaling` (older) or `rope_parameters`. Where the sliding
    /// layers have their own base (Gemma 3), current configs write one set of parameters per
    /// layer type (`rope_parameters.{full,sliding}_attention`), older ones
    /// `rope_local_base_freq` and `rope_scaling` for the full layers.
    fn rope(&self, row: &ArchRow) -> Result<RopeParts, String> {
        let params = self.rope_parameters.as_ref();
        let theta = self
            .rope_theta
            .or_else(|| params.and_then(|p| p.rope_theta))
            .unwrap_or(row.defaults.rope_theta);
        let full = params.and_then(|p| p.full_attention.as_deref());
        let local = params.and_then(|p| p.sliding_attention.as_deref());
        if row.gemma.is_some() {
            if let Some(Scaling::Linear(factor)) =
                local.map(|r| r.scaling(row)).transpose()?.flatten()
            {
                return Err(format!(
                    "`rope_parameters.sliding_attention`: scaling (factor {factor}) of the sliding layers is not supported"
                ));
            }
        }
        let local_default = row.gemma.as_ref().and_then(|g| g.rope_local_theta);
        let Some(local_default) = local_default else {
            let scaling = self.rope_scaling.as_ref().or(params);
            return Ok(RopeParts {
                theta,
                local_theta: theta,
                scaling: scaling.map(|r| r.scaling(row)).transpose()?.flatten(),
            });
        };
        let scaling = full.or(self.rope_scaling.as_ref());
        Ok(RopeParts {
            theta: full.and_then(|r| r.rope_theta).unwrap_or(theta),
            local_theta: local
                .and_then(|r| r.rope_theta)
                .or(self.rope_local_base_freq)
                .unwrap_or(local_default),
            scaling: scaling.map(|r| r.scaling(row)).transpose()?.flatten(),
        })
    }

    /// Gemma 2 and 3 (`g`: the row's Gemma defaults), from either layout: which layers slide
    /// (`layer_types`, current; or older Gemma 3's `sliding_window_pattern`; by default every
    /// `full_every`-th layer is full), the window, the query scale and the soft-caps.
    fn gemma(&self, row: &ArchRow, g: &GemmaRow, layers: usize) -> Result<GemmaParts, String> {
        let (act_field, act) = row.activation.field();
        if let Some(found) = self.hidden_activation.as_deref() {
            if found != act {
                return Err(format!(
                    "`{act_field}`: `{}` is not supported for {} (supported: {act})",
                    found.escape_debug(),
                    row.name
                ));
            }
        }
        if self.attention_bias == Some(true) {
            return Err(format!(
                "`attention_bias`: true is not supported for {} (its published models have no biases)",
                row.name
            ));
        }
        if self.use_bidirectional_attention == Some(true) {
            return Err(
                "`use_bidirectional_attention`: true makes an encoder, not a causal LM; infertop measures causal decoding"
                    .to_string(),
            );
        }
        let sliding_layers: Vec<bool> = match (&self.layer_types, self.sliding_window_pattern) {
            (Some(types), _) => {
                if types.len() != layers {
                    return Err(format!(
                        "`layer_types` has {} entries for num_hidden_layers {layers}",
                        types.len()
                    ));
                }
                types
                    .iter()
                    .enumerate()
                    .map(|(i, t)| match t.as_str() {
                        "sliding_attention" => Ok(true),
                        "full_attention" => Ok(false),
                        other => Err(format!(
                            "`layer_types[{i}]`: `{}` is not supported (sliding_attention or full_attention)",
                            other.escape_debug()
                        )),
                    })
                    .collect::<Result<_, _>>()?
            }
            (None, pattern) => {
                GemmaRow::sliding_layers(pattern.map_or(g.full_every, |p| p.0), layers)
            }
        };
        let window = match self.sliding_window {
            Some(0) => {
                return Err("`sliding_window`: must be a positive integer, found 0".to_string())
            }
            w => w.unwrap_or(g.sliding_window),
        };
        let query_pre_attn_scalar = self
            .query_pre_attn_scalar
            .unwrap_or(g.query_pre_attn_scalar);
        if query_pre_attn_scalar.is_nan() || query_pre_attn_scalar <= 0.0 {
            return Err(format!(
                "`query_pre_attn_scalar`: must be positive, found {query_pre_attn_scalar}"
            ));
        }
        let cap = |field: &str, v: Option<Option<f64>>, default: Option<f64>| match v
            .unwrap_or(default)
        {
            Some(c) if c.is_nan() || c <= 0.0 => {
                Err(format!("`{field}`: must be positive or null, found {c}"))
            }
            c => Ok(c),
        };
        Ok(GemmaParts {
            window: sliding_layers.iter().any(|&s| s).then_some(window),
            sliding_layers,
            query_pre_attn_scalar,
            attn_logit_softcapping: cap(
                "attn_logit_softcapping",
                self.attn_logit_softcapping,
                g.attn_logit_softcapping,
            )?,
            final_logit_softcapping: cap(
                "final_logit_softcapping",
                self.final_logit_softcapping,
                g.final_logit_softcapping,
            )?,
        })
    }

    /// The experts, for the architectures that have them, with the row's counts as defaults.
    fn moe(&self, row: &ArchRow) -> Result<Option<Moe>, String> {
        let experts = |default: usize| {
            self.num_local_experts
                .or(self.num_experts)
                .map_or(default, |n| n.0)
        };
        let per_tok = |default: usize| self.num_experts_per_tok.map_or(default, |n| n.0);
        match row.layout.mlp {
            Mlp::Dense | Mlp::FusedGateUp => Ok(None),
            Mlp::BlockSparseMoe {
                num_experts,
                experts_per_tok,
            } => Ok(Some(Moe {
                num_experts: experts(num_experts),
                experts_per_tok: per_tok(experts_per_tok),
                expert_intermediate_size: self.intermediate_size.0,
                norm_topk_prob: true,
                decoder_sparse_step: 1,
            })),
            Mlp::SparseMoe {
                num_experts,
                experts_per_tok,
                moe_intermediate_size,
                norm_topk_prob,
            } => {
                if let Some(l) = self.mlp_only_layers.as_ref().and_then(|l| l.first()) {
                    return Err(format!(
                        "`mlp_only_layers`: layer {l} is dense, and candle's {} implementation puts experts in every layer",
                        row.name
                    ));
                }
                Ok(Some(Moe {
                    num_experts: experts(num_experts),
                    experts_per_tok: per_tok(experts_per_tok),
                    expert_intermediate_size: self
                        .moe_intermediate_size
                        .map_or(moe_intermediate_size, |n| n.0),
                    norm_topk_prob: self.norm_topk_prob.unwrap_or(norm_topk_prob),
                    decoder_sparse_step: self.decoder_sparse_step.map_or(1, |n| n.0),
                }))
            }
        }
    }

    /// The window, by the row's rule (Gemma's per layer type is read by `gemma`).
    fn sliding_window(&self, row: &ArchRow) -> Result<Option<usize>, String> {
        let used = match row.window {
            WindowRule::Never | WindowRule::PerLayerType => false,
            WindowRule::WhenSet => true,
            WindowRule::WhenEnabled => self.use_sliding_window.unwrap_or(false),
        };
        match self.sliding_window {
            Some(0) if used => Err(
                "`sliding_window`: must be a positive integer when the window is used, found 0"
                    .to_string(),
            ),
            window if used => Ok(window),
            _ => Ok(None),
        }
    }
}

impl RawRope {
    /// The scaling asked for: `None` for plain RoPE (`default`, or no type), else the one kind
    /// `row` reads, with its fields; any other kind is refused.
    fn scaling(&self, row: &ArchRow) -> Result<Option<Scaling>, String> {
        let kind = self
            .rope_type
            .as_deref()
            .or(self.legacy_type.as_deref())
            .unwrap_or("default");
        let read = row.rope_scaling.kind();
        if kind == "default" {
            return Ok(None);
        }
        if kind != read {
            return Err(format!(
                "rope scaling type `{}` is not supported for {} (supported: default, {read})",
                kind.escape_debug(),
                row.name
            ));
        }
        let lacks = |k: &str| format!("rope scaling `{read}` lacks `{k}`");
        let factor = self.factor.ok_or_else(|| lacks("factor"))?;
        Ok(Some(match row.rope_scaling {
            RopeScalingRule::Linear if factor > 0.0 => Scaling::Linear(factor),
            RopeScalingRule::Linear => {
                return Err(format!(
                    "rope scaling `linear`: factor must be positive, found {factor}"
                ))
            }
            RopeScalingRule::Llama3 | RopeScalingRule::Llama3Unapplied => {
                Scaling::Llama3(RopeScaling {
                    factor: factor as f32,
                    low_freq_factor: self
                        .low_freq_factor
                        .ok_or_else(|| lacks("low_freq_factor"))?
                        as f32,
                    high_freq_factor: self
                        .high_freq_factor
                        .ok_or_else(|| lacks("high_freq_factor"))?
                        as f32,
                    original_max_position_embeddings: self
                        .original_max_position_embeddings
                        .ok_or_else(|| lacks("original_max_position_embeddings"))?
                        .0,
                })
            }
        }))
    }
}

/// A count that must be at least 1: sizes, heads, layers.
#[derive(Clone, Copy, Debug)]
struct Positive(usize);

impl<'de> Deserialize<'de> for Positive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PositiveVisitor;
        impl Visitor<'_> for PositiveVisitor {
            type Value = Positive;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive integer")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Positive, E> {
                usize::try_from(n)
                    .ok()
                    .filter(|n| *n > 0)
                    .map(Positive)
                    .ok_or_else(|| E::invalid_value(Unexpected::Unsigned(n), &self))
            }
        }
        d.deserialize_u64(PositiveVisitor)
    }
}

/// `eos_token_id`: one id, or a list of them (Llama 3 instruct models stop on several).
#[derive(Debug)]
struct TokenIds(Vec<u32>);

impl<'de> Deserialize<'de> for TokenIds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TokenIdsVisitor;
        impl<'de> Visitor<'de> for TokenIdsVisitor {
            type Value = TokenIds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a token id or a list of token ids")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<TokenIds, E> {
                u32::try_from(n)
                    .map(|id| TokenIds(vec![id]))
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(n), &self))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TokenIds, A::Error> {
                let mut ids = Vec::new();
                while let Some(id) = seq.next_element::<u32>()? {
                    ids.push(id);
                }
                Ok(TokenIds(ids))
            }
        }
        d.deserialize_any(TokenIdsVisitor)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A llama config.json with `extra` merged over its required fields.
    fn llama(extra: Value) -> Value {
        let mut v = json!({
            "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 768,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000
        });
        if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), extra) {
            obj.extend(extra);
        }
        v
    }

    #[test]
    fn older_layout_rope_theta_at_top_level_without_head_dim() {
        let c = ArchConfig::from_json(&llama(json!({
            "rope_theta": 500000.0,
            "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
        })))
        .unwrap();
        assert_eq!(c.rope_theta, 500000.0);
        assert_eq!(c.head_dim, 64, "hidden_size / num_attention_heads");
        assert_eq!(c.num_key_value_heads, 4, "one kv head per attention head");
        assert_eq!(
            c.max_position_embeddings, 2048,
            "transformers' llama default"
        );
        assert_eq!(c.rms_norm_eps, 1e-6);
        let s = c.rope_scaling.unwrap();
        assert_eq!((s.factor, s.original_max_position_embeddings), (8.0, 8192));
    }

    #[test]
    fn current_layout_rope_parameters() {
        let c = ArchConfig::from_json(&llama(json!({
            "num_key_value_heads": 2, "head_dim": 64, "tie_word_embeddings": true,
            "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}
        })))
        .unwrap();
        assert_eq!(c.rope_theta, 1e6);
        assert_eq!(c.rope_scaling, None);
        assert_eq!((c.num_key_value_heads, c.head_dim), (2, 64));
        assert!(c.tie_word_embeddings);
        // Both spellings of the type, as transformers re-saves older configs.
        let both = llama(json!({"rope_scaling": {"type": "yarn", "rope_type": "default"}}));
        assert_eq!(ArchConfig::from_json(&both).unwrap().rope_scaling, None);
    }

    #[test]
    fn a_wrong_typed_field_is_named_in_one_line() {
        let cases = [
            (
                json!({"hidden_size": "abc"}),
                "`hidden_size`: invalid type: string \"abc\", expected a positive integer",
            ),
            (
                json!({"num_key_value_heads": 0}),
                "`num_key_value_heads`: invalid value: integer `0`, expected a positive integer",
            ),
            (
                json!({"rope_parameters": {"rope_type": "llama3", "factor": "8"}}),
                "`rope_parameters.factor`: invalid type: string \"8\", expected f64",
            ),
            (
                json!({"eos_token_id": [1, "x"]}),
                "`eos_token_id[1]`: invalid type: string \"x\", expected u32",
            ),
            (
                json!({"tie_word_embeddings": "yes"}),
                "`tie_word_embeddings`: invalid type: string \"yes\", expected a boolean",
            ),
        ];
        for (extra, want) in cases {
            assert_eq!(ArchConfig::from_json(&llama(extra)).unwrap_err(), want);
        }
        let mut v = llama(json!({}));
        v.as_object_mut().unwrap().remove("vocab_size");
        assert_eq!(
            ArchConfig::from_json(&v).unwrap_err(),
            "missing field `vocab_size`"
        );
    }

    #[test]
    fn eos_token_id_as_a_number_or_a_list() {
        let one = ArchConfig::from_json(&llama(json!({"eos_token_id": 2}))).unwrap();
        assert_eq!(one.eos_token_ids, vec![2]);
        let many = llama(json!({"eos_token_id": [128001, 128008, 128009]}));
        let many = ArchConfig::from_json(&many).unwrap();
        assert_eq!(many.eos_token_ids, vec![128001, 128008, 128009]);
        let none = ArchConfig::from_json(&llama(json!({"eos_token_id": null}))).unwrap();
        assert!(none.eos_token_ids.is_empty());
    }

    #[test]
    fn qwen2_uses_its_sliding_window_only_when_enabled() {
        let qwen2 = |extra: Value| {
            let mut v = llama(extra);
            v["architectures"] = json!(["Qwen2ForCausalLM"]);
            ArchConfig::from_json(&v)
        };
        let off = qwen2(json!({"sliding_window": 4096, "use_sliding_window": false})).unwrap();
        assert_eq!(off.sliding_window, None);
        let unset = qwen2(json!({"sliding_window": 4096})).unwrap();
        assert_eq!(unset.sliding_window, None);
        let on = qwen2(json!({"sliding_window": 4096, "use_sliding_window": true})).unwrap();
        assert_eq!(on.sliding_window, Some(4096));
        assert_eq!(
            on.max_position_embeddings, 32768,
            "transformers' qwen2 default"
        );
        let zero = qwen2(json!({"sliding_window": 0, "use_sliding_window": true}));
        assert!(zero.unwrap_err().starts_with("`sliding_window`"));
    }

    #[test]
    fn the_adapter_checks_heads_and_rope_scaling() {
        let kv = ArchConfig::from_json(&llama(json!({"num_key_value_heads": 3}))).unwrap_err();
        assert_eq!(
            kv,
            "num_attention_heads (4) must be a multiple of num_key_value_heads (3)"
        );
        let yarn = llama(json!({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}));
        assert_eq!(
            ArchConfig::from_json(&yarn).unwrap_err(),
            "rope scaling type `yarn` is not supported for llama (supported: default, llama3)"
        );
        let partial = llama(json!({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}}));
        assert_eq!(
            ArchConfig::from_json(&partial).unwrap_err(),
            "rope scaling `llama3` lacks `low_freq_factor`"
        );
        let mistral = json!({"model_type": "mistral", "hidden_size": 256, "intermediate_size": 768,
            "num_hidden_layers": 2, "num_attention_heads": 32, "vocab_size": 1000,
            "sliding_window": 4096});
        let m = ArchConfig::from_json(&mistral).unwrap();
        assert_eq!((m.num_key_value_heads, m.sliding_window), (8, Some(4096)));
    }

    /// A Gemma config.json (`arch`: Gemma2ForCausalLM or Gemma3ForCausalLM) with `extra`.
    fn gemma(arch: &str, extra: Value) -> Result<ArchConfig, String> {
        let mut v = json!({
            "architectures": [arch], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 32, "vocab_size": 512
        });
        if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), extra) {
            obj.extend(extra);
        }
        ArchConfig::from_json(&v)
    }

    #[test]
    fn gemma3_current_layout_layer_types_and_rope_per_layer_type() {
        let c = gemma(
            "Gemma3ForCausalLM",
            json!({
                "query_pre_attn_scalar": 24, "sliding_window": 8,
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                    "sliding_attention", "sliding_attention", "full_attention"],
                "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
            }),
        )
        .unwrap();
        let g = c.gemma.as_ref().unwrap();
        assert_eq!(g.sliding_layers, vec![true, false, true, true, true, false]);
        assert_eq!((c.rope_theta, g.rope_local_theta), (1e6, 1e4));
        assert_eq!(g.rope_linear_factor, Some(8.0));
        assert_eq!(g.query_pre_attn_scalar, 24.0);
        assert_eq!(c.sliding_window, Some(8));
        assert!(g.qk_norm && c.tie_word_embeddings, "Gemma ties by default");
        assert_eq!(
            (g.attn_logit_softcapping, g.final_logit_softcapping),
            (None, None)
        );
        assert_eq!(ArchConfig::from_json(&c.to_json()).unwrap(), c);
    }

    #[test]
    fn gemma3_older_layout_pattern_and_local_base_freq() {
        let c = gemma(
            "Gemma3ForCausalLM",
            json!({
                "sliding_window_pattern": 3, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "sliding_window": 1024
            }),
        )
        .unwrap();
        let g = c.gemma.as_ref().unwrap();
        assert_eq!(g.sliding_layers, vec![true, true, false, true, true, false]);
        assert_eq!((c.rope_theta, g.rope_local_theta), (1e6, 1e4));
        assert_eq!(g.rope_linear_factor, Some(8.0));
        assert_eq!(g.query_pre_attn_scalar, 256.0, "transformers' default");
        let by_default = gemma("Gemma3ForCausalLM", json!({})).unwrap();
        assert_eq!(
            by_default.gemma.unwrap().sliding_layers,
            vec![true, true, true, true, true, false],
            "five sliding layers to one full"
        );
    }

    #[test]
    fn gemma2_alternates_and_soft_caps_by_default() {
        let c = gemma("Gemma2ForCausalLM", json!({"rope_theta": 10000.0})).unwrap();
        let g = c.gemma.as_ref().unwrap();
        assert_eq!(
            g.sliding_layers,
            vec![true, false, true, false, true, false]
        );
        assert_eq!(
            (g.attn_logit_softcapping, g.final_logit_softcapping),
            (Some(50.0), Some(30.0))
        );
        assert!(!g.qk_norm);
        assert_eq!(c.sliding_window, Some(4096));
        let off = gemma(
            "Gemma2ForCausalLM",
            json!({"attn_logit_softcapping": null, "final_logit_softcapping": null}),
        )
        .unwrap();
        let g = off.gemma.unwrap();
        assert_eq!(
            (g.attn_logit_softcapping, g.final_logit_softcapping),
            (None, None),
            "null is no cap"
        );
    }

    #[test]
    fn gemma_bad_fields_are_named() {
        let cases = [
            (
                json!({"layer_types": ["full_attention"]}),
                "`layer_types` has 1 entries for num_hidden_layers 6",
            ),
            (
                json!({"layer_types": ["full_attention", "chunked_attention", "full_attention",
                    "full_attention", "full_attention", "full_attention"]}),
                "`layer_types[1]`: `chunked_attention` is not supported (sliding_attention or full_attention)",
            ),
            (
                json!({"hidden_activation": "relu"}),
                "`hidden_activation`: `relu` is not supported for gemma2 (supported: gelu_pytorch_tanh)",
            ),
            (
                json!({"query_pre_attn_scalar": "x"}),
                "`query_pre_attn_scalar`: invalid type: string \"x\", expected f64",
            ),
            (
                json!({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}),
                "rope scaling type `yarn` is not supported for gemma2 (supported: default, linear)",
            ),
        ];
        for (extra, want) in cases {
            assert_eq!(gemma("Gemma2ForCausalLM", extra).unwrap_err(), want);
        }
        let vision =
            json!({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"});
        assert!(ArchConfig::from_json(&vision)
            .unwrap_err()
            .starts_with("`text_config`: missing"));
    }

    /// gemma-3-4b-it's config.json as published (transformers 4.50): the text model's settings
    /// in a sparse `text_config`, the rest from Gemma3TextConfig's defaults. It is the
    /// gemma-3-4b preset's shape.
    #[test]
    fn gemma3_with_vision_reads_its_text_config() {
        let published = json!({
            "architectures": ["Gemma3ForConditionalGeneration"],
            "boi_token_index": 255999, "eoi_token_index": 256000, "eos_token_id": [1, 106],
            "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
            "model_type": "gemma3",
            "text_config": {
                "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024
            },
            "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
            "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                "model_type": "siglip_vision_model", "num_attention_heads": 16,
                "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}
        });
        let c = ArchConfig::from_json(&published).unwrap();
        let preset = (crate::model::presets::find("gemma-3-4b").unwrap().config)();
        assert_eq!(c.arch, Arch::Gemma3);
        assert_eq!(c.eos_token_ids, vec![1, 106]);
        assert_eq!(c.params(), preset.params());
        assert_eq!(c.gemma, preset.gemma);
        assert_eq!(
            (
                c.sliding_window,
                c.head_dim,
                c.num_key_value_heads,
                c.rope_theta
            ),
            (Some(1024), 256, 4, 1e6)
        );
        let bad = json!({"architectures": ["Gemma3ForConditionalGeneration"],
            "text_config": {"hidden_size": "wide"}});
        assert_eq!(
            ArchConfig::from_json(&bad).unwrap_err(),
            "`text_config.hidden_size`: invalid type: string \"wide\", expected a positive integer"
        );
    }

    #[test]
    fn to_json_reads_back_the_same() {
        let c =
            ArchConfig::from_json(&llama(json!({"eos_token_id": 7, "bos_token_id": 1}))).unwrap();
        assert_eq!(ArchConfig::from_json(&c.to_json()).unwrap(), c);
    }
}
