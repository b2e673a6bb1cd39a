use serde::{Deserialize, Serialize};

/// What every view knows about the model under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Display name: the directory or file name, or `synthetic:tiny`.
    pub name: String,
    /// `llama`, `mistral` or `qwen2`.
    pub arch: String,
    /// `hf`, `gguf` or `synthetic`.
    pub source: String,
    pub params: u64,
    /// Bytes of weights as held on the device.
    pub weight_bytes: u64,
    /// KV-cache bytes per token per sequence: 2 × layers × kv heads × head dim × dtype bytes.
    pub kv_bytes_per_token: u64,
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
}

impl ModelInfo {
    /// Expected KV-cache bytes for `tokens` positions of `batch` sequences.
    pub fn expected_kv_bytes(&self, tokens: usize, batch: usize) -> u64 {
        self.kv_bytes_per_token * tokens as u64 * batch as u64
    }
}
