//! GGUF files through candle's quantized llama (llama, mistral, and phi3 with its fused matrices
//! split), qwen2 and qwen3, and our own Gemma 2/3 (`model::gemma`), with the tokenizer they carry.

pub mod tokenizer;

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::Path;

use candle_core::quantized::QMatMul;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

use crate::model::arch::CausalLm;
use crate::model::config::{Arch, ArchConfig, Gemma};
use crate::model::gemma::{GemmaModel, GemmaWeights, Proj};
use crate::model::synthetic::tensor_values;
use crate::model::{one_line, ModelError, ModelInfo};

/// candle's quantized llama precomputes RoPE tables for this many positions.
pub const GGUF_MAX_POSITIONS: usize = quantized_llama::MAX_SEQ_LEN;

fn md_u32(ct: &gguf_file::Content, key: &str) -> Option<usize> {
    ct.metadata
        .get(key)
        .and_then(|v| v.to_u32().ok())
        .map(|v| v as usize)
}

fn md_f32(ct: &gguf_file::Content, key: &str) -> Option<f64> {
    ct.metadata
        .get(key)
        .and_then(|v| v.to_f32().ok())
        .map(f64::from)
}

/// Opens a GGUF file and reads its header (metadata and tensor table).
fn open(path: &Path) -> Result<(File, gguf_file::Content), ModelError> {
    let mut file = File::open(path).map_err(|e| ModelError::io(path, e))?;
    let ct = gguf_file::Content::read(&mut file).map_err(|e| {
        ModelError::new(format!(
            "{}: not a valid GGUF file ({}); the download may be truncated",
            path.display(),
            one_line(&e.to_string())
        ))
    })?;
    Ok((file, ct))
}

/// The tokenizer a GGUF file carries in its `tokenizer.ggml.*` metadata.
pub fn read_tokenizer(path: &Path) -> Result<tokenizers::Tokenizer, ModelError> {
    let (_, ct) = open(path)?;
    tokenizer::from_metadata(&ct.metadata, path)
}

/// Reads the GGUF header only: a corrupt or truncated file is reported before anything starts.
pub fn check_header(path: &Path) -> Result<(), ModelError> {
    let (file, ct) = open(path)?;
    check_arch_settings(&ct, arch_of(&ct, path)?, path)?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    // In file order, so the message names the first tensor cut off (the map's order is random).
    let mut infos: Vec<_> = ct.tensor_infos.iter().collect();
    infos.sort_by_key(|(_, info)| info.offset);
    for (name, info) in infos {
        let size =
            info.shape.elem_count() / info.ggml_dtype.block_size() * info.ggml_dtype.type_size();
        if ct.tensor_data_offset + info.offset + size as u64 > len {
            return Err(ModelError::new(format!(
                "{}: tensor `{name}` extends past the end of the file; the download is truncated",
                path.display()
            )));
        }
    }
    Ok(())
}

/// The architecture a GGUF file declares, if we can run it.
fn arch_of(ct: &gguf_file::Content, path: &Path) -> Result<Arch, ModelError> {
    let arch_name = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    match arch_name.as_str() {
        "llama" | "mistral" => Ok(Arch::Llama),
        "qwen2" => Ok(Arch::Qwen2),
        "qwen3" => Ok(Arch::Qwen3),
        "gemma2" => Ok(Arch::Gemma2),
        "gemma3" => Ok(Arch::Gemma3),
        "phi3" => Ok(Arch::Phi3),
        other => Err(ModelError::new(format!(
            "{}: GGUF architecture `{other}` is not supported (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3)",
            path.display()
        ))),
    }
}

/// Loads a GGUF file; checks the metadata first so errors name what is missing.
pub fn load(
    path: &Path,
    device: &Device,
    display_device: &str,
) -> Result<(CausalLm, ModelInfo), ModelError> {
    let (mut file, ct) = open(path)?;
    let arch = arch_of(&ct, path)?;
    let p = gguf_prefix(arch);
    let need = |k: &str| {
        md_u32(&ct, &format!("{p}.{k}")).ok_or_else(|| {
            ModelError::new(format!(
                "{}: GGUF metadata `{p}.{k}` is missing or not an integer",
                path.display()
            ))
        })
    };
    let heads = need("attention.head_count")?;
    let kv_heads = need("attention.head_count_kv")?;
    let layers = need("block_count")?;
    let hidden = need("embedding_length")?;
    let context = md_u32(&ct, &format!("{p}.context_length")).unwrap_or(GGUF_MAX_POSITIONS);
    // Qwen3's and Gemma's head width is their own (`key_length`), not hidden / heads.
    let head_dim = match arch {
        Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3 => need("attention.key_length")?,
        _ => hidden / heads.max(1),
    };
    // candle's quantized llama (which also runs phi3) and qwen2 precompute RoPE for a fixed
    // length; qwen3 for the file's context length, and our Gemma grows its tables on demand.
    let max_positions = match arch {
        Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3 => context,
        _ => context.min(GGUF_MAX_POSITIONS),
    };
    let attn_in = match arch {
        Arch::Phi3 => "blk.0.attn_qkv.weight",
        _ => "blk.0.attn_q.weight",
    };
    for required in ["token_embd.weight", "output_norm.weight", attn_in] {
        if !ct.tensor_infos.contains_key(required) {
            return Err(ModelError::new(format!(
                "{}: tensor `{required}` is missing",
                path.display()
            )));
        }
    }
    let vocab = ct
        .tensor_infos
        .get("token_embd.weight")
        .map(|t| t.shape.dims()[0])
        .unwrap_or(0);
    let mut params = 0u64;
    let mut bytes = 0u64;
    let mut dtypes = std::collections::BTreeMap::<String, u64>::new();
    for info in ct.tensor_infos.values() {
        let n = info.shape.elem_count() as u64;
        params += n;
        let b = n * info.ggml_dtype.type_size() as u64 / info.ggml_dtype.block_size() as u64;
        bytes += b;
        *dtypes
            .entry(format!("{:?}", info.ggml_dtype).to_lowercase())
            .or_insert(0) += b;
    }
    let dtype = dtypes
        .iter()
        .max_by_key(|(_, b)| **b)
        .map(|(d, _)| d.clone())
        .unwrap_or_default();
    check_arch_settings(&ct, arch, path)?;
    let gemma_cfg = match arch {
        Arch::Gemma2 | Arch::Gemma3 => Some(gemma_config(&ct, arch, path)?),
        _ => None,
    };
    let mut ct = ct;
    if arch == Arch::Phi3 {
        phi3_as_llama(&mut ct, path)?;
    }
    let model = match arch {
        Arch::Gemma2 | Arch::Gemma3 => match &gemma_cfg {
            Some((cfg, g)) => GemmaModel::load(
                cfg,
                g,
                &mut GgufWeights {
                    ct: &ct,
                    file: &mut file,
                    device,
                    arch,
                },
                DType::F32,
                device,
            )
            .map(CausalLm::Gemma),
            None => Err(candle_core::Error::Msg("no Gemma settings".into())),
        },
        Arch::Qwen2 => quantized_qwen2::ModelWeights::from_gguf(ct, &mut file, device)
            .map(CausalLm::QuantQwen2),
        Arch::Qwen3 => quantized_qwen3::ModelWeights::from_gguf(ct, &mut file, device)
            .map(CausalLm::QuantQwen3),
        _ => quantized_llama::ModelWeights::from_gguf(ct, &mut file, device).map(CausalLm::QuantLlama),
    }
    .map_err(|e| {
        ModelError::new(format!(
            "{}: cannot load GGUF ({}); supported tensor types are candle's (q4_0..q8_0, k-quants, f16, f32)",
            path.display(),
            one_line(&e.to_string())
        ))
    })?;
    let info = ModelInfo {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        arch: arch.name().to_string(),
        source: "gguf".into(),
        params,
        active_params: params,
        weight_bytes: bytes,
        // candle's quantized models keep the KV cache in f32.
        kv_bytes_per_token: 2 * (layers * kv_heads * head_dim * 4) as u64,
        kv_window: gemma_cfg.as_ref().and_then(|(cfg, g)| {
            ArchConfig {
                gemma: Some(g.clone()),
                ..cfg.clone()
            }
            .kv_window()
        }),
        dtype,
        device: display_device.to_string(),
        max_positions,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        vocab,
    };
    Ok((model, info))
}

/// Gemma 2/3 settings from GGUF metadata, as llama.cpp reads them: the sliding layers follow
/// llama.cpp's fixed patterns (Gemma 2: every other layer from the first; Gemma 3: five of every
/// six), the sliding layers of Gemma 3 use RoPE base 10000, and queries are scaled by
/// `key_length^-0.5` except in the 27B models (`(hidden / heads)^-0.5`, their
/// `query_pre_attn_scalar`).
fn gemma_config(
    ct: &gguf_file::Content,
    arch: Arch,
    path: &Path,
) -> Result<(ArchConfig, Gemma), ModelError> {
    let p = gguf_prefix(arch);
    let need = |k: &str| {
        md_u32(ct, &format!("{p}.{k}")).ok_or_else(|| {
            ModelError::new(format!(
                "{}: GGUF metadata `{p}.{k}` is missing or not an integer",
                path.display()
            ))
        })
    };
    let layers = need("block_count")?;
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    let head_dim = need("attention.key_length")?;
    let window = need("attention.sliding_window")?;
    if heads == 0 || layers == 0 || window == 0 || head_dim % 2 != 0 {
        return Err(ModelError::new(format!(
            "{}: GGUF metadata gives {heads} heads, {layers} layers, window {window}, head width {head_dim}; the file is damaged",
            path.display()
        )));
    }
    let (every, big) = match arch {
        Arch::Gemma2 => (2, 46),
        _ => (6, 62),
    };
    let rope_theta = md_f32(ct, &format!("{p}.rope.freq_base")).unwrap_or(10_000.0);
    let linear = match ct
        .metadata
        .get(&format!("{p}.rope.scaling.type"))
        .and_then(|v| v.to_string().ok())
        .map(String::as_str)
    {
        None | Some("none") => None,
        Some("linear") => md_f32(ct, &format!("{p}.rope.scaling.factor")).filter(|&f| f != 1.0),
        Some(other) => {
            return Err(ModelError::new(format!(
                "{}: GGUF RoPE scaling `{other}` is not supported for {p} (linear is)",
                path.display()
            )))
        }
    };
    let gemma = Gemma {
        query_pre_attn_scalar: if layers == big {
            (hidden / heads) as f64
        } else {
            head_dim as f64
        },
        attn_logit_softcapping: md_f32(ct, &format!("{p}.attn_logit_softcapping")),
        final_logit_softcapping: md_f32(ct, &format!("{p}.final_logit_softcapping")),
        sliding_layers: (0..layers).map(|l| l % every < every - 1).collect(),
        rope_local_theta: if arch == Arch::Gemma3 {
            10_000.0
        } else {
            rope_theta
        },
        rope_linear_factor: linear,
        qk_norm: arch == Arch::Gemma3,
    };
    let vocab = ct
        .tensor_infos
        .get("token_embd.weight")
        .map(|t| t.shape.dims()[0])
        .unwrap_or(0);
    let cfg = ArchConfig {
        arch,
        vocab_size: vocab,
        hidden_size: hidden,
        intermediate_size: need("feed_forward_length")?,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: need("attention.head_count_kv")?,
        head_dim,
        max_position_embeddings: md_u32(ct, &format!("{p}.context_length")).unwrap_or(8192),
        rms_norm_eps: md_f32(ct, &format!("{p}.attention.layer_norm_rms_epsilon")).unwrap_or(1e-6),
        rope_theta,
        rope_scaling: None,
        tie_word_embeddings: !ct.tensor_infos.contains_key("output.weight"),
        sliding_window: Some(window),
        bos_token_id: None,
        eos_token_ids: Vec::new(),
        moe: None,
        partial_rotary_factor: None,
        gemma: None,
    };
    Ok((cfg, gemma))
}

/// The settings an architecture's GGUF needs and the implementation can compute, checked before
/// any weight is read.
fn check_arch_settings(ct: &gguf_file::Content, arch: Arch, path: &Path) -> Result<(), ModelError> {
    match arch {
        Arch::Gemma2 | Arch::Gemma3 => gemma_config(ct, arch, path).map(|_| ()),
        Arch::Phi3 => {
            let hidden = md_u32(ct, "phi3.embedding_length").unwrap_or(0);
            let heads = md_u32(ct, "phi3.attention.head_count").unwrap_or(1).max(1);
            check_phi3(ct, hidden / heads, path)
        }
        _ => Ok(()),
    }
}

/// Phi-3 is llama with fused matrices and NEOX RoPE, which candle's quantized llama applies to
/// a `phi3` file: what it cannot compute is refused here. candle's own quantized_phi3 is not
/// used: it fixes RoPE at base 10000 (Phi-4's is 250000).
fn check_phi3(ct: &gguf_file::Content, head_dim: usize, path: &Path) -> Result<(), ModelError> {
    let refuse = |what: String| {
        Err(ModelError::new(format!(
            "{}: {what}; candle's quantized llama, which runs Phi-3 GGUFs, rotates whole heads without LongRoPE (Phi-3 mini/medium 4k, Phi-4 run)",
            path.display()
        )))
    };
    if let Some(dims) = md_u32(ct, "phi3.rope.dimension_count").filter(|&d| d != head_dim) {
        return refuse(format!(
            "Phi-3 GGUF rotating {dims} of {head_dim} dimensions per head"
        ));
    }
    if let Some(name) = ct.tensor_infos.keys().find(|n| n.contains("rope_factors")) {
        return refuse(format!("Phi-3 GGUF with LongRoPE factors (`{name}`)"));
    }
    Ok(())
}

/// Presents a Phi-3 GGUF as candle's quantized llama reads one: `llama.*` copies of the
/// `phi3.*` metadata, and the fused `attn_qkv` (q, k, v rows) and `ffn_up` (gate, then up rows)
/// as separate tensors over the same bytes (a row of any GGML type is a whole number of blocks).
/// `general.architecture` stays `phi3`, for which candle applies NEOX RoPE as llama.cpp does.
fn phi3_as_llama(ct: &mut gguf_file::Content, path: &Path) -> Result<(), ModelError> {
    let copies: Vec<(String, gguf_file::Value)> = ct
        .metadata
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("phi3.")
                .map(|rest| (format!("llama.{rest}"), v.clone()))
        })
        .collect();
    ct.metadata.extend(copies);
    let need = |k: &str| {
        md_u32(ct, &format!("phi3.{k}")).ok_or_else(|| {
            ModelError::new(format!(
                "{}: GGUF metadata `phi3.{k}` is missing or not an integer",
                path.display()
            ))
        })
    };
    let layers = need("block_count")?;
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?.max(1);
    let kv_heads = need("attention.head_count_kv")?;
    let ff = need("feed_forward_length")?;
    let head_dim = hidden / heads;
    for l in 0..layers {
        let split = |ct: &mut gguf_file::Content,
                     fused: &str,
                     parts: &[(&str, usize)]|
         -> Result<(), ModelError> {
            let name = format!("blk.{l}.{fused}.weight");
            let Some(info) = ct.tensor_infos.get(&name) else {
                return Ok(()); // already separate, or missing: the loader names it
            };
            let (rows, cols) = match info.shape.dims() {
                [r, c] => (*r, *c),
                _ => (0, 0),
            };
            let want: usize = parts.iter().map(|(_, r)| r).sum();
            let block = info.ggml_dtype.block_size();
            if rows != want || cols % block != 0 {
                return Err(ModelError::new(format!(
                    "{}: tensor `{name}` has shape {:?}, the metadata implies [{want}, {hidden}]",
                    path.display(),
                    info.shape.dims()
                )));
            }
            let row_bytes = (cols / block * info.ggml_dtype.type_size()) as u64;
            let (dtype, mut offset) = (info.ggml_dtype, info.offset);
            for (part, part_rows) in parts {
                ct.tensor_infos.insert(
                    format!("blk.{l}.{part}.weight"),
                    gguf_file::TensorInfo {
                        ggml_dtype: dtype,
                        shape: candle_core::Shape::from((*part_rows, cols)),
                        offset,
                    },
                );
                offset += row_bytes * *part_rows as u64;
            }
            Ok(())
        };
        split(
            ct,
            "attn_qkv",
            &[
                ("attn_q", heads * head_dim),
                ("attn_k", kv_heads * head_dim),
                ("attn_v", kv_heads * head_dim),
            ],
        )?;
        if !ct
            .tensor_infos
            .contains_key(&format!("blk.{l}.ffn_gate.weight"))
        {
            split(ct, "ffn_up", &[("ffn_gate", ff), ("ffn_up", ff)])?;
        }
    }
    Ok(())
}

/// A Gemma's weights in a GGUF file: llama.cpp's names, norms stored as `1 + w`.
struct GgufWeights<'a> {
    ct: &'a gguf_file::Content,
    file: &'a mut File,
    device: &'a Device,
    arch: Arch,
}

impl GgufWeights<'_> {
    fn tensor(&mut self, name: &str, dims: &[usize]) -> candle_core::Result<QTensor> {
        let t = self.ct.tensor(self.file, name, self.device)?;
        if t.shape().dims() != dims {
            candle_core::bail!(
                "tensor `{name}` has shape {:?}, expected {dims:?}",
                t.shape().dims()
            );
        }
        Ok(t)
    }
}

impl GemmaWeights for GgufWeights<'_> {
    fn proj(&mut self, name: &str, out: usize, inp: usize) -> candle_core::Result<Proj> {
        let name = gguf_name(self.arch, &format!("{name}.weight"));
        QMatMul::from_qtensor(self.tensor(&name, &[out, inp])?).map(Proj::Gguf)
    }

    fn gain(&mut self, name: &str, dim: usize) -> candle_core::Result<Tensor> {
        let name = gguf_name(self.arch, &format!("{name}.weight"));
        self.tensor(&name, &[dim])?.dequantize(self.device)
    }

    fn embeddings(
        &mut self,
        vocab: usize,
        hidden: usize,
        tied: bool,
    ) -> candle_core::Result<(Tensor, Proj)> {
        let embed = self.tensor("token_embd.weight", &[vocab, hidden])?;
        let values = embed.dequantize(self.device)?;
        // llama.cpp multiplies by the stored matrix itself, quantized or not.
        let head = if tied {
            embed
        } else {
            self.tensor("output.weight", &[vocab, hidden])?
        };
        Ok((values, Proj::Gguf(QMatMul::from_qtensor(head)?)))
    }
}

/// Writes a synthetic model as a complete GGUF file, as llama.cpp's convert_hf_to_gguf.py
/// would: its tensor names, llama's q/k rows permuted for interleaved RoPE, Gemma's norms
/// as `1 + w`, matrices of type `quant` (f32 norms), the hyperparameters, and `tk` as
/// `tokenizer.ggml.*` metadata.
pub fn write_synthetic(
    cfg: &ArchConfig,
    seed: u64,
    quant: GgufType,
    tk: &tokenizers::Tokenizer,
    path: &Path,
) -> Result<(), ModelError> {
    const WRITES: &str = "llama, qwen2, qwen3, gemma2, gemma3 or phi3";
    if cfg.arch == Arch::Mistral {
        return Err(ModelError::new(format!(
            "--gguf writes {WRITES}; use --arch llama for a Mistral-shaped GGUF"
        )));
    }
    if !matches!(
        cfg.arch,
        Arch::Llama | Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3 | Arch::Phi3
    ) {
        return Err(ModelError::new(format!(
            "--gguf writes {WRITES}, not {}; write a Hugging Face directory instead (drop --gguf)",
            cfg.arch.name()
        )));
    }
    if cfg.arch == Arch::Phi3 && cfg.partial_rotary_factor.is_some() {
        return Err(ModelError::new(
            "--gguf writes Phi-3 with RoPE over whole heads only (candle's quantized Phi-3)"
                .to_string(),
        ));
    }
    let arch = cfg.arch;
    let prefix = gguf_prefix(arch);
    let cerr = |e: candle_core::Error| ModelError::new(format!("writing {}: {e}", path.display()));
    let layers = cfg.num_hidden_layers;
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for spec in cfg.tensor_specs() {
        let gguf_name = gguf_name(arch, &spec.name);
        let mut values = tensor_values(&spec, seed);
        if spec.is_norm && cfg.gemma.is_some() {
            // convert_hf_to_gguf.py stores Gemma's gain `1 + w`.
            values.iter_mut().for_each(|v| *v += 1.0);
        }
        let mut t = Tensor::from_vec(values, spec.shape.as_slice(), &Device::Cpu).map_err(cerr)?;
        if arch == Arch::Llama {
            // llama.cpp's llama rotates interleaved pairs: convert_hf_to_gguf.py permutes the
            // rows of q and k so that the same model comes out.
            let heads = if gguf_name.ends_with("attn_q.weight") {
                Some(cfg.num_attention_heads)
            } else if gguf_name.ends_with("attn_k.weight") {
                Some(cfg.num_key_value_heads)
            } else {
                None
            };
            if let Some(n) = heads {
                t = permute_rope_rows(&t, n).map_err(cerr)?;
            }
        }
        let dtype = if spec.shape.len() == 2 {
            quant.tensor_type(&gguf_name, layers, cfg.tie_word_embeddings, spec.shape[1])
        } else {
            GgmlDType::F32
        };
        let q = QTensor::quantize(&t, dtype).map_err(cerr)?;
        tensors.push((gguf_name, q));
    }
    use gguf_file::Value as V;
    let u = |v: usize| V::U32(v as u32);
    let context = match arch {
        // Gemma and qwen3 take the file's length; the others are capped by candle.
        Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3 => cfg.max_position_embeddings,
        _ => cfg.max_position_embeddings.min(GGUF_MAX_POSITIONS),
    };
    let mut md: Vec<(String, V)> = vec![
        ("general.architecture".into(), V::String(prefix.into())),
        (
            "general.name".into(),
            V::String("infertop synthetic".into()),
        ),
        (
            format!("{prefix}.attention.head_count"),
            u(cfg.num_attention_heads),
        ),
        (
            format!("{prefix}.attention.head_count_kv"),
            u(cfg.num_key_value_heads),
        ),
        (format!("{prefix}.block_count"), u(layers)),
        (format!("{prefix}.embedding_length"), u(cfg.hidden_size)),
        (
            format!("{prefix}.feed_forward_length"),
            u(cfg.intermediate_size),
        ),
        (format!("{prefix}.context_length"), u(context)),
        (format!("{prefix}.rope.dimension_count"), u(cfg.head_dim)),
        (
            format!("{prefix}.attention.layer_norm_rms_epsilon"),
            V::F32(cfg.rms_norm_eps as f32),
        ),
        (
            format!("{prefix}.rope.freq_base"),
            V::F32(cfg.rope_theta as f32),
        ),
        ("general.file_type".into(), V::U32(quant.file_type())),
    ];
    if matches!(arch, Arch::Qwen3 | Arch::Gemma2 | Arch::Gemma3) {
        for key in ["key_length", "value_length"] {
            md.push((format!("{prefix}.attention.{key}"), u(cfg.head_dim)));
        }
    }
    if let Some(g) = &cfg.gemma {
        let window = cfg.sliding_window.unwrap_or(cfg.max_position_embeddings);
        md.push((format!("{prefix}.attention.sliding_window"), u(window)));
        // What llama.cpp derives from the layer count and cannot be told otherwise.
        let every = if arch == Arch::Gemma2 { 2 } else { 6 };
        let pattern: Vec<bool> = (0..layers).map(|l| l % every < every - 1).collect();
        if g.sliding_layers != pattern {
            return Err(ModelError::new(format!(
                "--gguf: llama.cpp's {prefix} slides {every_name} layers; this shape's layer types differ",
                every_name = if every == 2 { "every other" } else { "five of six" }
            )));
        }
        if g.query_pre_attn_scalar != cfg.head_dim as f64 {
            return Err(ModelError::new(format!(
                "--gguf: llama.cpp scales {prefix} queries by head_dim^-0.5, not query_pre_attn_scalar {}",
                g.query_pre_attn_scalar
            )));
        }
        if arch == Arch::Gemma3 && g.rope_local_theta != 10_000.0 {
            return Err(ModelError::new(format!(
                "--gguf: llama.cpp's gemma3 uses RoPE base 10000 on sliding layers, not {}",
                g.rope_local_theta
            )));
        }
        if let Some(cap) = g.attn_logit_softcapping {
            md.push((
                format!("{prefix}.attn_logit_softcapping"),
                V::F32(cap as f32),
            ));
        }
        if let Some(cap) = g.final_logit_softcapping {
            md.push((
                format!("{prefix}.final_logit_softcapping"),
                V::F32(cap as f32),
            ));
        }
        if let Some(f) = g.rope_linear_factor {
            md.push((
                format!("{prefix}.rope.scaling.type"),
                V::String("linear".into()),
            ));
            md.push((format!("{prefix}.rope.scaling.factor"), V::F32(f as f32)));
        }
    }
    md.extend(tokenizer::metadata_for(tk, cfg.vocab_size)?);
    let md_refs: Vec<(&str, &V)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let file = File::create(path).map_err(|e| ModelError::io(path, e))?;
    let mut w = BufWriter::new(file);
    gguf_file::write(&mut w, &md_refs, &t_refs).map_err(cerr)?;
    w.flush().map_err(|e| ModelError::io(path, e))?;
    w.stream_position().map_err(|e| ModelError::io(path, e))?;
    Ok(())
}

/// convert_hf_to_gguf.py's `LlamaModel.permute`: within each of `heads` heads, rows
/// `(0, half, 1, half + 1, ...)` in place of `(0, 1, ..., half - 1, half, ...)`.
fn permute_rope_rows(t: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
    let (rows, cols) = t.dims2()?;
    let half = rows / heads / 2;
    t.reshape((heads, 2, half, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((rows, cols))
}

/// The matrix types `make-model --gguf` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GgufType {
    F32,
    F16,
    Bf16,
    #[value(name = "q8_0")]
    Q8_0,
    #[value(name = "q4_0")]
    Q4_0,
    /// llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for the output matrix and for `attn_v` and
    /// `ffn_down` in the layers llama.cpp gives more bits.
    #[value(name = "q4_k_m")]
    Q4KM,
    #[value(name = "q6_k")]
    Q6K,
}

impl GgufType {
    /// The type of matrix `name` with rows of `cols` values, as llama.cpp's quantizer picks
    /// it (`llama_tensor_get_type`): k-quants need rows of whole 256-value blocks, and a matrix
    /// whose rows are not falls back to Q5_0 (for Q4_K) or Q8_0 (for Q6_K), or to f32.
    fn tensor_type(self, name: &str, layers: usize, tied: bool, cols: usize) -> GgmlDType {
        let layer = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|l| l.parse::<usize>().ok());
        let output = name == "output.weight" || (tied && name == "token_embd.weight");
        let wanted = match self {
            GgufType::F32 => GgmlDType::F32,
            GgufType::F16 => GgmlDType::F16,
            GgufType::Bf16 => GgmlDType::BF16,
            GgufType::Q8_0 => GgmlDType::Q8_0,
            GgufType::Q4_0 => GgmlDType::Q4_0,
            GgufType::Q6K => GgmlDType::Q6K,
            GgufType::Q4KM => {
                let more_bits = layer.is_some_and(|i| use_more_bits(i, layers));
                if output
                    || (more_bits
                        && (name.ends_with("attn_v.weight") || name.ends_with("ffn_down.weight")))
                {
                    GgmlDType::Q6K
                } else if name.ends_with("attn_qkv.weight") {
                    GgmlDType::Q5K
                } else {
                    GgmlDType::Q4K
                }
            }
        };
        if cols.is_multiple_of(wanted.block_size()) {
            return wanted;
        }
        let fallback = match wanted {
            GgmlDType::Q4K => GgmlDType::Q5_0,
            GgmlDType::Q5K => GgmlDType::Q5_1,
            GgmlDType::Q6K => GgmlDType::Q8_0,
            _ => GgmlDType::F32,
        };
        if cols.is_multiple_of(fallback.block_size()) {
            fallback
        } else {
            GgmlDType::F32
        }
    }

    /// `general.file_type`, in llama.cpp's numbering (`llama_ftype`).
    fn file_type(self) -> u32 {
        match self {
            GgufType::F32 => 0,
            GgufType::F16 => 1,
            GgufType::Q4_0 => 2,
            GgufType::Q8_0 => 7,
            GgufType::Q4KM => 15,
            GgufType::Q6K => 18,
            GgufType::Bf16 => 32,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GgufType::F32 => "f32",
            GgufType::F16 => "f16",
            GgufType::Bf16 => "bf16",
            GgufType::Q8_0 => "q8_0",
            GgufType::Q4_0 => "q4_0",
            GgufType::Q4KM => "q4_k_m",
            GgufType::Q6K => "q6_k",
        }
    }
}

/// llama.cpp's choice of the layers whose `attn_v` and `ffn_down` get more bits: the first and
/// last eighth, and every third layer between.
fn use_more_bits(layer: usize, layers: usize) -> bool {
    let eighth = layers / 8;
    layer < eighth || layer >= 7 * layers / 8 || (layer - eighth) % 3 == 2
}

/// The metadata prefix (`general.architecture`) of an architecture's GGUF.
fn gguf_prefix(arch: Arch) -> &'static str {
    match arch {
        Arch::Qwen2 => "qwen2",
        Arch::Qwen3 => "qwen3",
        Arch::Gemma2 => "gemma2",
        Arch::Gemma3 => "gemma3",
        Arch::Phi3 => "phi3",
        _ => "llama",
    }
}

/// HF tensor name → llama.cpp tensor name (convert_hf_to_gguf.py's mapping).
fn gguf_name(arch: Arch, hf: &str) -> String {
    match hf {
        "model.embed_tokens.weight" => return "token_embd.weight".into(),
        "model.norm.weight" => return "output_norm.weight".into(),
        "lm_head.weight" => return "output.weight".into(),
        _ => {}
    }
    let Some(rest) = hf.strip_prefix("model.layers.") else {
        return hf.to_string();
    };
    let (layer, tail) = rest.split_once('.').unwrap_or((rest, ""));
    let gemma = matches!(arch, Arch::Gemma2 | Arch::Gemma3);
    let mapped = match tail {
        "self_attn.q_proj.weight" => "attn_q.weight",
        "self_attn.k_proj.weight" => "attn_k.weight",
        "self_attn.v_proj.weight" => "attn_v.weight",
        "self_attn.qkv_proj.weight" => "attn_qkv.weight",
        "self_attn.q_proj.bias" => "attn_q.bias",
        "self_attn.k_proj.bias" => "attn_k.bias",
        "self_attn.v_proj.bias" => "attn_v.bias",
        "self_attn.o_proj.weight" => "attn_output.weight",
        "self_attn.q_norm.weight" => "attn_q_norm.weight",
        "self_attn.k_norm.weight" => "attn_k_norm.weight",
        "mlp.gate_proj.weight" => "ffn_gate.weight",
        "mlp.up_proj.weight" => "ffn_up.weight",
        // Phi-3's gate and up rows in one matrix, gate first.
        "mlp.gate_up_proj.weight" => "ffn_up.weight",
        "mlp.down_proj.weight" => "ffn_down.weight",
        "input_layernorm.weight" => "attn_norm.weight",
        "post_attention_layernorm.weight" if gemma => "post_attention_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        "pre_feedforward_layernorm.weight" => "ffn_norm.weight",
        "post_feedforward_layernorm.weight" => "post_ffw_norm.weight",
        other => other,
    };
    format!("blk.{layer}.{mapped}")
}
