//! What every view knows about the model under test.

use serde::{Deserialize, Serialize};

/// Where a model's weights came from, as records name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelSource {
    /// A Hugging Face directory.
    Hf,
    /// A GGUF file (candle's quantized models: batch 1 only).
    Gguf,
    /// Random weights of a named shape, built in memory.
    #[default]
    Synthetic,
    /// A model behind a server (the http engine): its shape is not known here.
    Http,
    /// Written by a newer version.
    #[serde(other)]
    Other,
}

/// What every view knows about the model under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Display name: the directory or file name, or `synthetic:tiny`.
    pub name: String,
    /// The architecture as `model::Arch::name` spells it (`llama`, `mistral`, `qwen2`, `qwen3`,
    /// `phi3`, `mixtral`, `qwen3_moe`, `gemma2`, `gemma3`), or `served` for a model behind a
    /// server (see [`Self::served`]).
    pub arch: String,
    /// Where the weights came from (`hf`, `gguf`, `synthetic`), or `http` for a served model.
    pub source: ModelSource,
    pub params: u64,
    /// Parameters one token runs through: `params` for dense models, less the experts a MoE
    /// router skips. Records written before this field read it as 0: see [`Self::active`].
    #[serde(default)]
    pub active_params: u64,
    /// Bytes of weights as held on the device.
    pub weight_bytes: u64,
    /// KV-cache bytes per token per sequence: 2 × layers × kv heads × head dim × dtype bytes.
    /// Layers in `kv_window` stop growing at their window (see [`Self::kv_bytes_at`]).
    pub kv_bytes_per_token: u64,
    /// Layers whose KV cache keeps only the last `window` positions (Gemma's sliding layers).
    /// Absent (older records, other models): every layer grows with the context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_window: Option<KvWindow>,
    /// `f32`, `f16`, `bf16`, or the GGUF quantization such as `q8_0`.
    pub dtype: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    pub max_positions: usize,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    /// The weights of each part of a forward, for `--step-parts`' roofline (candle models;
    /// absent for served models and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<PartWeights>,
}

/// Parameters and bytes of weights (as held on the device) of one part of a forward.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weights {
    pub params: u64,
    pub bytes: u64,
}

impl Weights {
    fn add(&mut self, params: u64, bytes: u64) {
        self.params += params;
        self.bytes += bytes;
    }
}

/// What each part of a forward reads of the weights, one token through it: every layer's
/// attention projections, every layer's MLP (a mixture of experts: the experts one token is
/// routed to), the LM head (the embedding matrix where the head is tied to it), and the one
/// row of the embedding table a token looks up. Norms are in none of them (the forward's
/// "rest").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartWeights {
    pub attention: Weights,
    pub mlp: Weights,
    pub head: Weights,
    pub embedding_row_bytes: u64,
}

/// Which part of a forward a weight tensor belongs to, by its name in a Hugging Face
/// checkpoint (`model.layers.0.self_attn.q_proj.weight`) or a GGUF file
/// (`blk.0.attn_q.weight`); `None` for norms and anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Embedding,
    Attention,
    Mlp,
    Head,
}

fn owner(name: &str) -> Option<Owner> {
    if name.contains("norm") {
        return None;
    }
    if name.contains("embed_tokens") || name.starts_with("token_embd") {
        Some(Owner::Embedding)
    } else if name.starts_with("lm_head") || name == "output.weight" {
        Some(Owner::Head)
    } else if name.contains(".self_attn.") || name.contains(".attn_") {
        Some(Owner::Attention)
    } else if name.contains(".mlp.") || name.contains(".ffn_") || name.contains("block_sparse_moe")
    {
        Some(Owner::Mlp)
    } else {
        None
    }
}

impl PartWeights {
    /// From every tensor of a model as `(name, parameters, bytes)`, with its embedding width
    /// `hidden`. `idle_params`: parameters a token does not run through (the experts a MoE
    /// router skips), taken off the MLP in proportion. `None` when no tensor is recognised.
    pub fn of_tensors<'a>(
        tensors: impl IntoIterator<Item = (&'a str, u64, u64)>,
        hidden: usize,
        idle_params: u64,
    ) -> Option<PartWeights> {
        let mut w = PartWeights::default();
        let mut embedding = Weights::default();
        let mut head_seen = false;
        for (name, params, bytes) in tensors {
            match owner(name) {
                Some(Owner::Embedding) => embedding.add(params, bytes),
                Some(Owner::Attention) => w.attention.add(params, bytes),
                Some(Owner::Mlp) => w.mlp.add(params, bytes),
                Some(Owner::Head) => {
                    head_seen = true;
                    w.head.add(params, bytes);
                }
                None => {}
            }
        }
        if embedding.params == 0 && w.attention.params == 0 && w.mlp.params == 0 {
            return None;
        }
        if !head_seen {
            // Tied: the head multiplies by the embedding matrix.
            w.head = embedding;
        }
        let vocab = embedding.params / hidden.max(1) as u64;
        w.embedding_row_bytes = embedding.bytes / vocab.max(1);
        if idle_params > 0 && w.mlp.params > idle_params {
            let active = w.mlp.params - idle_params;
            w.mlp.bytes = (w.mlp.bytes as u128 * active as u128 / w.mlp.params as u128) as u64;
            w.mlp.params = active;
        }
        Some(w)
    }
}

/// Of a model's layers, how many keep only a window of positions in their KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWindow {
    pub sliding_layers: usize,
    pub window: usize,
}

impl ModelInfo {
    /// A model behind a server: its name and where it is served; the shape is not known to
    /// the client, so the sizes are 0 and the dtype `?`.
    pub fn served(name: &str, device: &str) -> ModelInfo {
        ModelInfo {
            name: name.to_string(),
            arch: "served".into(),
            source: ModelSource::Http,
            params: 0,
            active_params: 0,
            weight_bytes: 0,
            kv_bytes_per_token: 0,
            kv_window: None,
            dtype: "?".into(),
            device: device.to_string(),
            max_positions: 0,
            layers: 0,
            hidden: 0,
            heads: 0,
            kv_heads: 0,
            head_dim: 0,
            vocab: 0,
            parts: None,
        }
    }

    /// Parameters one token runs through (`params` where the record does not say).
    pub fn active(&self) -> u64 {
        if self.active_params == 0 {
            self.params
        } else {
            self.active_params
        }
    }

    /// Whether only part of the weights run per token (a mixture of experts).
    pub fn is_sparse(&self) -> bool {
        self.active() < self.params
    }

    /// Bytes of weights one token reads: `weight_bytes` scaled by active / total parameters
    /// (all of them for a dense model).
    pub fn active_weight_bytes(&self) -> u64 {
        if self.params == 0 || !self.is_sparse() {
            return self.weight_bytes;
        }
        (self.weight_bytes as u128 * self.active() as u128 / self.params as u128) as u64
    }

    /// KV-cache bytes of one sequence at `context` positions: the full layers hold every
    /// position, the sliding ones at most their window.
    pub fn kv_bytes_at(&self, context: f64) -> f64 {
        self.kv_bytes_per_token as f64 * self.kv_layers_at(|w| context.min(w))
    }

    /// KV-cache bytes one decode step of a request reads per sequence, averaged over its steps
    /// (context from `prompt` to `prompt + output`, continuously): `P + G/2` positions on full
    /// layers, the mean of `min(context, window)` on sliding ones.
    pub fn decode_kv_bytes(&self, prompt: usize, output: usize) -> f64 {
        let (p, g) = (prompt as f64, output as f64);
        let mean_min = |w: f64| {
            if g <= 0.0 || p + g <= w {
                (p + g / 2.0).min(w)
            } else if p >= w {
                w
            } else {
                // ∫ from p to p + g of min(c, w) dc, over g.
                ((w * w - p * p) / 2.0 + w * (p + g - w)) / g
            }
        };
        self.kv_bytes_per_token as f64 * self.kv_layers_at(mean_min)
    }

    /// Positions held per layer, on average over the layers: `held(window)` on sliding layers,
    /// `held(∞)` (the whole context) on full ones.
    fn kv_layers_at(&self, held: impl Fn(f64) -> f64) -> f64 {
        match self.kv_window {
            Some(w) if self.layers > 0 && w.sliding_layers <= self.layers => {
                let full = (self.layers - w.sliding_layers) as f64 * held(f64::INFINITY);
                (full + w.sliding_layers as f64 * held(w.window as f64)) / self.layers as f64
            }
            _ => held(f64::INFINITY),
        }
    }

    /// Expected KV-cache bytes for `tokens` positions of `batch` sequences.
    pub fn expected_kv_bytes(&self, tokens: usize, batch: usize) -> u64 {
        (self.kv_bytes_at(tokens as f64) * batch as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_weights_by_tensor_name_in_both_namings() {
        // A Hugging Face checkpoint with its own head: 2 bytes per parameter.
        let hf = [
            ("model.embed_tokens.weight", 4_000, 8_000),
            ("model.layers.0.self_attn.q_proj.weight", 100, 200),
            ("model.layers.0.self_attn.q_proj.bias", 10, 20),
            ("model.layers.0.self_attn.q_norm.weight", 5, 10),
            ("model.layers.0.mlp.down_proj.weight", 300, 600),
            ("model.layers.0.input_layernorm.weight", 10, 20),
            ("model.norm.weight", 10, 20),
            ("lm_head.weight", 4_000, 8_000),
        ];
        let w = PartWeights::of_tensors(hf, 10, 0).unwrap();
        assert_eq!(
            w.attention,
            Weights {
                params: 110,
                bytes: 220
            }
        );
        assert_eq!(
            w.mlp,
            Weights {
                params: 300,
                bytes: 600
            }
        );
        assert_eq!(
            w.head,
            Weights {
                params: 4_000,
                bytes: 8_000
            }
        );
        // 400 rows of 10: one row is 20 bytes.
        assert_eq!(w.embedding_row_bytes, 20);

        // A GGUF file with the head tied to the embedding: the head reads that matrix.
        let gguf = [
            ("token_embd.weight", 4_000, 1_000),
            ("blk.0.attn_q.weight", 100, 25),
            ("blk.0.attn_norm.weight", 10, 40),
            ("blk.0.ffn_up.weight", 300, 75),
            ("blk.0.ffn_norm.weight", 10, 40),
            ("output_norm.weight", 10, 40),
        ];
        let w = PartWeights::of_tensors(gguf, 10, 0).unwrap();
        assert_eq!(
            w.attention,
            Weights {
                params: 100,
                bytes: 25
            }
        );
        assert_eq!(
            w.mlp,
            Weights {
                params: 300,
                bytes: 75
            }
        );
        assert_eq!(
            w.head,
            Weights {
                params: 4_000,
                bytes: 1_000
            }
        );

        // A mixture of experts: the MLP a token runs through, less the idle experts.
        let moe = [
            ("model.embed_tokens.weight", 40, 80),
            (
                "model.layers.0.block_sparse_moe.experts.0.w1.weight",
                400,
                800,
            ),
        ];
        let w = PartWeights::of_tensors(moe, 10, 300).unwrap();
        assert_eq!(
            w.mlp,
            Weights {
                params: 100,
                bytes: 200
            }
        );
        assert_eq!(PartWeights::of_tensors([("x.weight", 1, 1)], 10, 0), None);
    }
}
