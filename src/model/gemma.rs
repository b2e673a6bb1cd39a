//! Gemma 2 and Gemma 3 (text), written with candle ops to compute what transformers computes.
//!
//! candle-transformers 0.11 has both, but they disagree with transformers in ways a tiny model
//! shows at once (the golden fixtures use `query_pre_attn_scalar` 24 with head_dim 32 and a
//! window of 8 under prompts of up to 26 tokens + 16 generated):
//! - both scale scores by `head_dim^-0.5`, ignoring `query_pre_attn_scalar` (equal in the
//!   published Gemma 2 2B/9B and Gemma 3, not in Gemma 2 27B: 144 vs head_dim 128);
//! - its Gemma 2 masks the window on every layer during prefill (transformers: only the layers
//!   `layer_types` marks) and not at all during decode (full cache, no decode mask);
//! - in prefill both let a query see `sliding_window + 1` positions (`j + w < i` masked;
//!   transformers: `i - j < w`, the query's own position included).
//!
//! This module follows transformers' `modeling_gemma2.py` / `modeling_gemma3.py`:
//!
//! - embeddings scaled by `sqrt(hidden_size)`, rounded to the weights' dtype;
//! - RMSNorm computed in f32 with gain `1 + w`, around both the attention and the MLP block
//!   (input, post-attention, pre- and post-feedforward norms);
//! - attention scores `q·k * query_pre_attn_scalar^-0.5`, optionally soft-capped
//!   (`cap * tanh(s / cap)`), softmax in f32; Gemma 3 RMS-norms every query and key head before
//!   RoPE, and uses its own RoPE base (and linear scaling) per layer type;
//! - a sliding layer lets position `i` see positions `j` with `i - j < sliding_window`; its KV
//!   cache keeps only the `sliding_window - 1` newest positions, as transformers' sliding cache;
//! - MLP `down(gelu_tanh(gate(x)) * up(x))`; logits optionally soft-capped.

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{Linear, VarBuilder};

use super::config::{ArchConfig, Gemma};

/// RMSNorm with Gemma's `1 + w` gain, computed in f32.
struct GemmaNorm {
    /// `1 + w`, in f32.
    gain: Tensor,
    eps: f64,
}

impl GemmaNorm {
    fn new(gain: Tensor, eps: f64) -> Self {
        Self { gain, eps }
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dtype = x.dtype();
        let x = x.to_dtype(DType::F32)?;
        let mean_sq = x.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = x.broadcast_div(&(mean_sq + self.eps)?.sqrt()?)?;
        normed.broadcast_mul(&self.gain)?.to_dtype(dtype)
    }
}

/// A projection: a dense matrix (Hugging Face weights) or a GGUF one, quantized or not.
pub enum Proj {
    Dense(Linear),
    Gguf {
        q: QMatMul,
        /// Multiply many rows at once (a prefill) as one dense f32 matmul: see [`Proj::gguf`].
        dense_rows: bool,
    },
}

/// Rows (tokens) from which a quantized projection that candle does not repack runs as one
/// dense f32 matmul against its dequantized matrix; below this, as in every decode step, the
/// quantized kernel reads a quarter of the bytes and wins.
pub const DENSE_ROWS: usize = 32;

impl Proj {
    /// A GGUF matrix. candle 0.11 multiplies a quantized matrix on the CPU in one of two ways:
    /// Q4_K, Q6_K and Q8_0 matrices whose rows are whole 256-value blocks (and whose count is
    /// a multiple of 16) are repacked into tiles and multiplied with int8 dot products, fast
    /// for one row and for many; every other matrix (Gemma 3 1B's 1,152-wide rows, the Q5_0
    /// that a Q4_K_M file falls back to for them) is multiplied row by row, a dot product per
    /// row and output. For those, a prefill's many rows go faster through candle's dense f32
    /// GEMM on the matrix dequantized for the forward: measured on Gemma 3 1B Q8_0, a prompt of
    /// 512 prefills in half the time (BENCHMARKS.md), while on a repacked shape the same
    /// dequantization made a prefill of 128 twice as slow. So only the first kind goes dense.
    pub fn gguf(q: QMatMul) -> Self {
        use candle_core::quantized::GgmlDType;
        let dense_rows = match &q {
            QMatMul::QTensor(t) => {
                let repacked = match t.shape().dims() {
                    &[n, k] => {
                        matches!(t.dtype(), GgmlDType::Q4K | GgmlDType::Q6K | GgmlDType::Q8_0)
                            && k % 256 == 0
                            && n % 16 == 0
                    }
                    _ => false,
                };
                !repacked
            }
            // f32, f16 and bf16 matrices, which candle widens to f32 at load.
            QMatMul::Tensor(_) | QMatMul::TensorF16(_) => false,
        };
        Proj::Gguf { q, dense_rows }
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Proj::Dense(l) => l.forward(x),
            Proj::Gguf {
                q: QMatMul::QTensor(q),
                dense_rows: true,
            } if x.device().is_cpu() && rows(x) >= DENSE_ROWS => {
                let w = q.dequantize(x.device())?.to_dtype(x.dtype())?;
                x.broadcast_matmul(&w.t()?)
            }
            Proj::Gguf { q, .. } => q.forward(x),
        }
    }
}

/// The rows of `x` a projection multiplies: every dimension but the last.
fn rows(x: &Tensor) -> usize {
    x.dims()
        .split_last()
        .map_or(0, |(_, lead)| lead.iter().product())
}

/// Where a Gemma's weights come from, in Hugging Face's names (without `.weight`).
pub trait GemmaWeights {
    /// The matrix `name`, (out, in).
    fn proj(&mut self, name: &str, out: usize, inp: usize) -> candle_core::Result<Proj>;
    /// The norm `name`'s gain `1 + w`, in f32.
    fn gain(&mut self, name: &str, dim: usize) -> candle_core::Result<Tensor>;
    /// The token embeddings (vocab, hidden), and the output projection (the same matrix when
    /// the embeddings are tied).
    fn embeddings(
        &mut self,
        vocab: usize,
        hidden: usize,
        tied: bool,
    ) -> candle_core::Result<(Tensor, Proj)>;
}

/// Hugging Face weights (safetensors or in memory), which store norms as `w`.
pub struct HfWeights<'a>(pub VarBuilder<'a>);

impl GemmaWeights for HfWeights<'_> {
    fn proj(&mut self, name: &str, out: usize, inp: usize) -> candle_core::Result<Proj> {
        candle_nn::linear_no_bias(inp, out, self.0.pp(name)).map(Proj::Dense)
    }

    fn gain(&mut self, name: &str, dim: usize) -> candle_core::Result<Tensor> {
        self.0.pp(name).get(dim, "weight")?.to_dtype(DType::F32)? + 1.0
    }

    fn embeddings(
        &mut self,
        vocab: usize,
        hidden: usize,
        tied: bool,
    ) -> candle_core::Result<(Tensor, Proj)> {
        let embed = self.0.get((vocab, hidden), "model.embed_tokens.weight")?;
        let head = if tied {
            Linear::new(embed.clone(), None)
        } else {
            candle_nn::linear_no_bias(hidden, vocab, self.0.pp("lm_head"))?
        };
        Ok((embed, Proj::Dense(head)))
    }
}

/// cos/sin tables of one RoPE base, grown on demand (a real Gemma 3 allows 131072 positions:
/// tables of that length for every layer type would cost more memory than the KV cache).
struct Rope {
    inv_freq: Vec<f64>,
    cos: Option<Tensor>,
    sin: Option<Tensor>,
    len: usize,
    dtype: DType,
    device: Device,
}

impl Rope {
    fn new(
        head_dim: usize,
        theta: f64,
        linear: Option<f64>,
        dtype: DType,
        device: &Device,
    ) -> Self {
        let scale = linear.unwrap_or(1.0);
        let inv_freq = (0..head_dim)
            .step_by(2)
            .map(|i| 1.0 / theta.powf(i as f64 / head_dim as f64) / scale)
            .collect();
        Self {
            inv_freq,
            cos: None,
            sin: None,
            len: 0,
            dtype,
            device: device.clone(),
        }
    }

    /// (cos, sin) of positions `pos..pos + n`, each (n, head_dim / 2).
    fn at(&mut self, pos: usize, n: usize) -> candle_core::Result<(Tensor, Tensor)> {
        if pos + n > self.len || self.cos.is_none() {
            let len = (pos + n).next_power_of_two().max(256);
            let half = self.inv_freq.len();
            let mut cos = Vec::with_capacity(len * half);
            let mut sin = Vec::with_capacity(len * half);
            for p in 0..len {
                for f in &self.inv_freq {
                    // transformers computes the angle in f32.
                    let angle = (p as f32) * (*f as f32);
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
            self.cos =
                Some(Tensor::from_vec(cos, (len, half), &self.device)?.to_dtype(self.dtype)?);
            self.sin =
                Some(Tensor::from_vec(sin, (len, half), &self.device)?.to_dtype(self.dtype)?);
            self.len = len;
        }
        match (&self.cos, &self.sin) {
            (Some(c), Some(s)) => Ok((c.narrow(0, pos, n)?, s.narrow(0, pos, n)?)),
            _ => candle_core::bail!("rope tables missing"),
        }
    }
}

/// One layer's keys and values (batch, kv heads, positions, head dim), from position `start`.
#[derive(Default)]
struct KvCache {
    kv: Option<(Tensor, Tensor)>,
    start: usize,
}

struct Attention {
    q_proj: Proj,
    k_proj: Proj,
    v_proj: Proj,
    o_proj: Proj,
    qk_norm: Option<(GemmaNorm, GemmaNorm)>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    scale: f64,
    softcap: Option<f64>,
    /// `Some(w)` on sliding layers.
    window: Option<usize>,
    cache: KvCache,
    /// `attn`, as candle-transformers' models name theirs (`--step-parts` times it).
    span: tracing::Span,
}

impl Attention {
    fn forward(&mut self, x: &Tensor, pos: usize, rope: &mut Rope) -> candle_core::Result<Tensor> {
        let _span = self.span.enter();
        let (b, n, _) = x.dims3()?;
        let shape =
            |t: Tensor, heads: usize| t.reshape((b, n, heads, self.head_dim))?.transpose(1, 2);
        let mut q = shape(self.q_proj.forward(x)?, self.heads)?;
        let mut k = shape(self.k_proj.forward(x)?, self.kv_heads)?;
        let v = shape(self.v_proj.forward(x)?, self.kv_heads)?.contiguous()?;
        if let Some((qn, kn)) = &self.qk_norm {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let (cos, sin) = rope.at(pos, n)?;
        let q = candle_nn::rotary_emb::rope(&q.contiguous()?, &cos, &sin)?;
        let k = candle_nn::rotary_emb::rope(&k.contiguous()?, &cos, &sin)?;

        let (k, v) = match self.cache.kv.take() {
            None => {
                self.cache.start = pos;
                (k, v)
            }
            Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
        };
        let start = self.cache.start;
        let kv_len = k.dim(2)?;

        // Grouped-query attention without a copy of the keys and values per query head:
        // the `groups` query heads that share a KV head (consecutive heads, as transformers'
        // `repeat_kv` pairs them) are stacked as rows of one matmul against that head's keys.
        let groups = self.heads / self.kv_heads;
        let hd = self.head_dim;
        let q = q.reshape((b, self.kv_heads, groups * n, hd))?;
        let mut scores = (q.matmul(&k.t()?)? * self.scale)?.reshape((b, self.heads, n, kv_len))?;
        if let Some(cap) = self.softcap {
            scores = ((scores / cap)?.tanh()? * cap)?;
        }
        if let Some(mask) = self.mask(pos, n, start, kv_len, x.device())? {
            scores = scores.broadcast_add(&mask.to_dtype(scores.dtype())?)?;
        }
        let dtype = scores.dtype();
        let probs =
            candle_nn::ops::softmax_last_dim(&scores.to_dtype(DType::F32)?)?.to_dtype(dtype)?;
        let out = probs
            .reshape((b, self.kv_heads, groups * n, kv_len))?
            .matmul(&v)?
            .reshape((b, self.heads, n, hd))?
            .transpose(1, 2)?
            .reshape((b, n, self.heads * hd))?;

        // A sliding layer's next query (at pos + n) sees only the newest `window - 1` of these.
        let (k, v) = match self.window {
            Some(w) if kv_len > w - 1 => {
                let keep = w - 1;
                self.cache.start = start + kv_len - keep;
                (
                    k.narrow(2, kv_len - keep, keep)?,
                    v.narrow(2, kv_len - keep, keep)?,
                )
            }
            _ => (k, v),
        };
        self.cache.kv = Some((k, v));
        self.o_proj.forward(&out)
    }

    /// `-inf` where query `pos + i` may not see key `start + j`: a later position, or (sliding)
    /// one `window` or more behind. `None` when every query sees every key.
    fn mask(
        &self,
        pos: usize,
        n: usize,
        start: usize,
        kv_len: usize,
        device: &Device,
    ) -> candle_core::Result<Option<Tensor>> {
        let hidden = |i: usize, j: usize| {
            let (q, k) = (pos + i, start + j);
            k > q || self.window.is_some_and(|w| q - k >= w)
        };
        let any = (0..n).any(|i| (0..kv_len).any(|j| hidden(i, j)));
        if !any {
            return Ok(None);
        }
        let values: Vec<f32> = (0..n)
            .flat_map(|i| (0..kv_len).map(move |j| (i, j)))
            .map(|(i, j)| if hidden(i, j) { f32::NEG_INFINITY } else { 0.0 })
            .collect();
        Tensor::from_vec(values, (1, 1, n, kv_len), device).map(Some)
    }
}

struct Layer {
    attn: Attention,
    gate_proj: Proj,
    up_proj: Proj,
    down_proj: Proj,
    input_norm: GemmaNorm,
    post_attn_norm: GemmaNorm,
    pre_ff_norm: GemmaNorm,
    post_ff_norm: GemmaNorm,
    sliding: bool,
    /// `mlp`: the feed-forward block between its norms.
    mlp_span: tracing::Span,
}

impl Layer {
    fn forward(&mut self, x: &Tensor, pos: usize, rope: &mut Rope) -> candle_core::Result<Tensor> {
        let h = self.attn.forward(&self.input_norm.forward(x)?, pos, rope)?;
        let x = (x + self.post_attn_norm.forward(&h)?)?;
        let h = self.pre_ff_norm.forward(&x)?;
        let h = {
            let _span = self.mlp_span.enter();
            let gate = self.gate_proj.forward(&h)?.gelu()?;
            self.down_proj
                .forward(&(gate * self.up_proj.forward(&h)?)?)?
        };
        x + self.post_ff_norm.forward(&h)?
    }
}

/// A Gemma 2 or Gemma 3 text model with its KV cache.
pub struct GemmaModel {
    embed: candle_nn::Embedding,
    /// `sqrt(hidden_size)` in the weights' dtype.
    embed_scale: Tensor,
    layers: Vec<Layer>,
    norm: GemmaNorm,
    lm_head: Proj,
    final_softcap: Option<f64>,
    /// RoPE of the full-attention layers and of the sliding ones.
    rope_full: Rope,
    rope_local: Rope,
    /// `embedding` and `output` (the LM head and its soft-cap).
    embed_span: tracing::Span,
    head_span: tracing::Span,
}

impl GemmaModel {
    /// Builds the model from `w`; activations and RoPE tables in `dtype`.
    pub fn load(
        cfg: &ArchConfig,
        gemma: &Gemma,
        w: &mut dyn GemmaWeights,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Self> {
        let (h, hd) = (cfg.hidden_size, cfg.head_dim);
        let (heads, kv_heads) = (cfg.num_attention_heads, cfg.num_key_value_heads);
        let eps = cfg.rms_norm_eps;
        let (embeddings, lm_head) = w.embeddings(cfg.vocab_size, h, cfg.tie_word_embeddings)?;
        let embed = candle_nn::Embedding::new(embeddings, h);
        let embed_scale = Tensor::new((h as f32).sqrt(), device)?.to_dtype(dtype)?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{l}");
            let a = format!("{p}.self_attn");
            let sliding = gemma.sliding_layers.get(l).copied().unwrap_or(false);
            let mut norm = |name: String, dim: usize| -> candle_core::Result<GemmaNorm> {
                Ok(GemmaNorm::new(w.gain(&name, dim)?, eps))
            };
            let qk_norm = if gemma.qk_norm {
                Some((
                    norm(format!("{a}.q_norm"), hd)?,
                    norm(format!("{a}.k_norm"), hd)?,
                ))
            } else {
                None
            };
            let input_norm = norm(format!("{p}.input_layernorm"), h)?;
            let post_attn_norm = norm(format!("{p}.post_attention_layernorm"), h)?;
            let pre_ff_norm = norm(format!("{p}.pre_feedforward_layernorm"), h)?;
            let post_ff_norm = norm(format!("{p}.post_feedforward_layernorm"), h)?;
            let attn = Attention {
                q_proj: w.proj(&format!("{a}.q_proj"), heads * hd, h)?,
                k_proj: w.proj(&format!("{a}.k_proj"), kv_heads * hd, h)?,
                v_proj: w.proj(&format!("{a}.v_proj"), kv_heads * hd, h)?,
                o_proj: w.proj(&format!("{a}.o_proj"), h, heads * hd)?,
                qk_norm,
                heads,
                kv_heads,
                head_dim: hd,
                scale: 1.0 / gemma.query_pre_attn_scalar.sqrt(),
                softcap: gemma.attn_logit_softcapping,
                window: if sliding { cfg.sliding_window } else { None },
                cache: KvCache::default(),
                span: tracing::trace_span!("attn"),
            };
            let i = cfg.intermediate_size;
            layers.push(Layer {
                attn,
                gate_proj: w.proj(&format!("{p}.mlp.gate_proj"), i, h)?,
                up_proj: w.proj(&format!("{p}.mlp.up_proj"), i, h)?,
                down_proj: w.proj(&format!("{p}.mlp.down_proj"), h, i)?,
                input_norm,
                post_attn_norm,
                pre_ff_norm,
                post_ff_norm,
                sliding,
                mlp_span: tracing::trace_span!("mlp"),
            });
        }
        let norm = GemmaNorm::new(w.gain("model.norm", h)?, eps);
        Ok(Self {
            embed,
            embed_scale,
            layers,
            norm,
            lm_head,
            final_softcap: gemma.final_logit_softcapping,
            rope_full: Rope::new(hd, cfg.rope_theta, gemma.rope_linear_factor, dtype, device),
            rope_local: Rope::new(hd, gemma.rope_local_theta, None, dtype, device),
            embed_span: tracing::trace_span!("embedding"),
            head_span: tracing::trace_span!("output"),
        })
    }

    pub fn clear_kv_cache(&mut self) {
        for l in &mut self.layers {
            l.attn.cache = KvCache::default();
        }
    }

    /// Runs `ids` (batch, seq) at position `pos`; returns the last position's logits (batch, vocab).
    pub fn forward(&mut self, ids: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        let (_, n) = ids.dims2()?;
        let mut x = {
            let _span = self.embed_span.enter();
            self.embed.forward(ids)?.broadcast_mul(&self.embed_scale)?
        };
        for l in &mut self.layers {
            let rope = if l.sliding {
                &mut self.rope_local
            } else {
                &mut self.rope_full
            };
            x = l.forward(&x, pos, rope)?;
        }
        let last = x.narrow(1, n - 1, 1)?.squeeze(1)?;
        let last = self.norm.forward(&last)?;
        let _span = self.head_span.enter();
        let logits = self.lm_head.forward(&last)?;
        match self.final_softcap {
            Some(cap) => (logits / cap)?.tanh()? * cap,
            None => Ok(logits),
        }
    }
}
