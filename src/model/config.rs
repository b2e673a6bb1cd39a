//! `config.json` as current and older transformers write it, adapted to one `ArchConfig`.

use std::path::Path;

use serde_json::Value;

use super::ModelError;

/// Architectures infertop runs, with the names `config.json` uses for them.
pub const SUPPORTED_ARCHITECTURES: &[&str] =
    &["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"];

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    Llama,
    Mistral,
    Qwen2,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
        }
    }

    pub fn hf_class(self) -> &'static str {
        match self {
            Arch::Llama => "LlamaForCausalLM",
            Arch::Mistral => "MistralForCausalLM",
            Arch::Qwen2 => "Qwen2ForCausalLM",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        match s.to_ascii_lowercase().as_str() {
            "llama" | "llamaforcausallm" => Some(Arch::Llama),
            "mistral" | "mistralforcausallm" => Some(Arch::Mistral),
            "qwen2" | "qwen2forcausallm" => Some(Arch::Qwen2),
            _ => None,
        }
    }
}

/// Llama 3 style RoPE frequency scaling.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RopeScaling {
    pub factor: f32,
    pub low_freq_factor: f32,
    pub high_freq_factor: f32,
    pub original_max_position_embeddings: usize,
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

    /// Adapts a parsed config.json. Optional fields take the defaults transformers uses.
    pub fn from_json(v: &Value) -> Result<ArchConfig, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| "config.json must be a JSON object".to_string())?;
        let arch = detect_arch(v)?;
        let req = |k: &str| -> Result<usize, String> {
            match obj.get(k) {
                Some(x) => x
                    .as_u64()
                    .filter(|n| *n > 0)
                    .map(|n| n as usize)
                    .ok_or_else(|| format!("`{k}` must be a positive integer, found {x}")),
                None => Err(format!("missing required field `{k}`")),
            }
        };
        let opt_usize = |k: &str| -> Result<Option<usize>, String> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x
                    .as_u64()
                    .filter(|n| *n > 0)
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| format!("`{k}` must be a positive integer, found {x}")),
            }
        };
        let opt_f64 = |k: &str| -> Result<Option<f64>, String> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x
                    .as_f64()
                    .map(Some)
                    .ok_or_else(|| format!("`{k}` must be a number, found {x}")),
            }
        };
        let hidden_size = req("hidden_size")?;
        let num_attention_heads = req("num_attention_heads")?;
        let num_hidden_layers = req("num_hidden_layers")?;
        let vocab_size = req("vocab_size")?;
        let intermediate_size = req("intermediate_size")?;
        let num_key_value_heads = opt_usize("num_key_value_heads")?.unwrap_or(match arch {
            Arch::Mistral => 8,
            _ => num_attention_heads,
        });
        let head_dim = opt_usize("head_dim")?.unwrap_or(hidden_size / num_attention_heads);
        if head_dim == 0 {
            return Err(format!(
                "hidden_size ({hidden_size}) is smaller than num_attention_heads ({num_attention_heads})"
            ));
        }
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(format!(
                "num_attention_heads ({num_attention_heads}) must be a multiple of num_key_value_heads ({num_key_value_heads})"
            ));
        }
        let default_max_pos = match arch {
            Arch::Llama => 2048,
            Arch::Mistral | Arch::Qwen2 => 32768,
        };
        let default_rms = 1e-6;
        // transformers >= 4.5x may move rope settings into `rope_parameters`.
        let rope_params = obj.get("rope_parameters").and_then(Value::as_object);
        let rope_theta = match opt_f64("rope_theta")? {
            Some(t) => t,
            None => rope_params
                .and_then(|p| p.get("rope_theta"))
                .and_then(Value::as_f64)
                .unwrap_or(10_000.0),
        };
        let scaling_obj = obj
            .get("rope_scaling")
            .and_then(Value::as_object)
            .or(rope_params);
        let rope_scaling = match scaling_obj {
            Some(s) => {
                let kind = s
                    .get("rope_type")
                    .or_else(|| s.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("default");
                match kind {
                    "default" => None,
                    "llama3" => {
                        let f = |k: &str| {
                            s.get(k)
                                .and_then(Value::as_f64)
                                .ok_or_else(|| format!("rope scaling `llama3` lacks `{k}`"))
                        };
                        Some(RopeScaling {
                            factor: f("factor")? as f32,
                            low_freq_factor: f("low_freq_factor")? as f32,
                            high_freq_factor: f("high_freq_factor")? as f32,
                            original_max_position_embeddings: f("original_max_position_embeddings")?
                                as usize,
                        })
                    }
                    other => {
                        return Err(format!(
                        "rope scaling type `{other}` is not supported (supported: default, llama3)"
                    ))
                    }
                }
            }
            None => None,
        };
        let tie_word_embeddings = obj
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let sliding_window = match arch {
            Arch::Llama => None,
            Arch::Mistral => opt_usize("sliding_window")?,
            Arch::Qwen2 => {
                let use_sw = obj
                    .get("use_sliding_window")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if use_sw {
                    opt_usize("sliding_window")?
                } else {
                    None
                }
            }
        };
        let eos_token_ids = match obj.get("eos_token_id") {
            Some(Value::Number(n)) => n.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_u64)
                .map(|x| x as u32)
                .collect(),
            _ => Vec::new(),
        };
        Ok(ArchConfig {
            arch,
            vocab_size,
            hidden_size,
            intermediate_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            max_position_embeddings: opt_usize("max_position_embeddings")?
                .unwrap_or(default_max_pos),
            rms_norm_eps: opt_f64("rms_norm_eps")?.unwrap_or(default_rms),
            rope_theta,
            rope_scaling,
            tie_word_embeddings,
            sliding_window,
            bos_token_id: obj
                .get("bos_token_id")
                .and_then(Value::as_u64)
                .map(|x| x as u32),
            eos_token_ids,
        })
    }

    /// The config.json `make-model` writes (the current transformers layout).
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({
            "architectures": [self.arch.hf_class()],
            "model_type": self.arch.name(),
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
            "hidden_act": "silu",
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
            if let Some(w) = self.sliding_window {
                obj.insert("sliding_window".into(), w.into());
                if self.arch == Arch::Qwen2 {
                    obj.insert("use_sliding_window".into(), true.into());
                }
            } else if self.arch != Arch::Llama {
                obj.insert("sliding_window".into(), Value::Null);
            }
            if let Some(b) = self.bos_token_id {
                obj.insert("bos_token_id".into(), b.into());
            }
            if let Some(&e) = self.eos_token_ids.first() {
                obj.insert("eos_token_id".into(), e.into());
            }
        }
        v
    }

    /// Parameters, counting tied embeddings once.
    pub fn params(&self) -> u64 {
        self.tensor_specs().iter().map(|t| t.numel() as u64).sum()
    }

    /// 2 × layers × kv heads × head dim × dtype bytes.
    pub fn kv_bytes_per_token(&self, dtype_bytes: usize) -> u64 {
        2 * (self.num_hidden_layers * self.num_key_value_heads * self.head_dim * dtype_bytes) as u64
    }

    /// Every tensor the architecture loads, with its shape, in the HF naming.
    pub fn tensor_specs(&self) -> Vec<TensorSpec> {
        let (h, i, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let q_out = self.num_attention_heads * self.head_dim;
        let kv_out = self.num_key_value_heads * self.head_dim;
        let mut specs = vec![TensorSpec::new("model.embed_tokens.weight", vec![v, h], h)];
        for l in 0..self.num_hidden_layers {
            let p = format!("model.layers.{l}");
            specs.push(TensorSpec::new(
                format!("{p}.self_attn.q_proj.weight"),
                vec![q_out, h],
                h,
            ));
            specs.push(TensorSpec::new(
                format!("{p}.self_attn.k_proj.weight"),
                vec![kv_out, h],
                h,
            ));
            specs.push(TensorSpec::new(
                format!("{p}.self_attn.v_proj.weight"),
                vec![kv_out, h],
                h,
            ));
            if self.arch == Arch::Qwen2 {
                for (n, o) in [("q", q_out), ("k", kv_out), ("v", kv_out)] {
                    specs.push(TensorSpec::new(
                        format!("{p}.self_attn.{n}_proj.bias"),
                        vec![o],
                        h,
                    ));
                }
            }
            specs.push(TensorSpec::new(
                format!("{p}.self_attn.o_proj.weight"),
                vec![h, q_out],
                q_out,
            ));
            specs.push(TensorSpec::new(
                format!("{p}.mlp.gate_proj.weight"),
                vec![i, h],
                h,
            ));
            specs.push(TensorSpec::new(
                format!("{p}.mlp.up_proj.weight"),
                vec![i, h],
                h,
            ));
            specs.push(TensorSpec::new(
                format!("{p}.mlp.down_proj.weight"),
                vec![h, i],
                i,
            ));
            specs.push(TensorSpec::norm(format!("{p}.input_layernorm.weight"), h));
            specs.push(TensorSpec::norm(
                format!("{p}.post_attention_layernorm.weight"),
                h,
            ));
        }
        specs.push(TensorSpec::norm("model.norm.weight".to_string(), h));
        if !self.tie_word_embeddings {
            specs.push(TensorSpec::new("lm_head.weight", vec![v, h], h));
        }
        specs
    }

    /// What candle's implementations of this architecture cannot run, said plainly.
    pub fn check_supported(&self) -> Result<(), String> {
        let natural = self.hidden_size / self.num_attention_heads;
        if self.head_dim != natural && self.arch != Arch::Mistral {
            return Err(format!(
                "head_dim {} differs from hidden_size/num_attention_heads = {natural}; candle's {} implementation does not support that",
                self.head_dim,
                self.arch.name()
            ));
        }
        if self.head_dim % 2 != 0 {
            return Err(format!("head_dim {} must be even for RoPE", self.head_dim));
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
}

impl TensorSpec {
    fn new(name: impl Into<String>, shape: Vec<usize>, fan_in: usize) -> Self {
        Self {
            name: name.into(),
            shape,
            fan_in,
            is_norm: false,
        }
    }

    fn norm(name: String, h: usize) -> Self {
        Self {
            name,
            shape: vec![h],
            fan_in: h,
            is_norm: true,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

fn detect_arch(v: &Value) -> Result<Arch, String> {
    let supported = SUPPORTED_ARCHITECTURES.join(", ");
    if let Some(list) = v.get("architectures").and_then(Value::as_array) {
        if let Some(first) = list.first().and_then(Value::as_str) {
            return Arch::parse(first).ok_or_else(|| {
                format!("architecture `{first}` is not supported (supported: {supported})")
            });
        }
    }
    if let Some(mt) = v.get("model_type").and_then(Value::as_str) {
        return Arch::parse(mt)
            .ok_or_else(|| format!("model_type `{mt}` is not supported (supported: {supported})"));
    }
    Err(format!(
        "names no architecture (neither `architectures` nor `model_type`); supported: {supported}"
    ))
}
