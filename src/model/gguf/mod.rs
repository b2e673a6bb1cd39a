//! GGUF files through candle's quantized llama, qwen2 and qwen3, with the tokenizer they carry.

pub mod tokenizer;

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

use crate::model::arch::CausalLm;
use crate::model::config::{Arch, ArchConfig};
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
    arch_of(&ct, path)?;
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
        other => Err(ModelError::new(format!(
            "{}: GGUF architecture `{other}` is not supported (supported: llama, mistral, qwen2, qwen3)",
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
    // Qwen3's head width is its own (`key_length`), not hidden / heads.
    let head_dim = match arch {
        Arch::Qwen3 => need("attention.key_length")?,
        _ => hidden / heads.max(1),
    };
    // candle's quantized llama and qwen2 precompute RoPE for a fixed length; qwen3 for the
    // file's context length.
    let max_positions = match arch {
        Arch::Qwen3 => context,
        _ => context.min(GGUF_MAX_POSITIONS),
    };
    for required in [
        "token_embd.weight",
        "output_norm.weight",
        "blk.0.attn_q.weight",
    ] {
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
    let model = match arch {
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

/// Writes a synthetic llama-family model as a complete GGUF file, as llama.cpp expects one:
/// matrices of type `quant` (f32 norms), the hyperparameters, and `tk` as `tokenizer.ggml.*`
/// metadata.
pub fn write_synthetic(
    cfg: &ArchConfig,
    seed: u64,
    quant: GgufType,
    tk: &tokenizers::Tokenizer,
    path: &Path,
) -> Result<(), ModelError> {
    if cfg.arch == Arch::Mistral {
        return Err(ModelError::new(
            "--gguf writes llama, qwen2 or qwen3; use --arch llama for a Mistral-shaped GGUF"
                .to_string(),
        ));
    }
    if !matches!(cfg.arch, Arch::Llama | Arch::Qwen2 | Arch::Qwen3) {
        return Err(ModelError::new(format!(
            "--gguf writes llama, qwen2 or qwen3, not {}; write a Hugging Face directory instead (drop --gguf)",
            cfg.arch.name()
        )));
    }
    let prefix = gguf_prefix(cfg.arch);
    let cerr = |e: candle_core::Error| ModelError::new(format!("writing {}: {e}", path.display()));
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for spec in cfg.tensor_specs() {
        let gguf_name = gguf_name(&spec.name);
        let values = tensor_values(&spec, seed);
        let t = Tensor::from_vec(values, spec.shape.as_slice(), &Device::Cpu).map_err(cerr)?;
        let q = if spec.shape.len() == 2 && spec.shape[1].is_multiple_of(quant.block()) {
            QTensor::quantize(&t, quant.ggml())
        } else {
            QTensor::quantize(&t, GgmlDType::F32)
        }
        .map_err(cerr)?;
        tensors.push((gguf_name, q));
    }
    use gguf_file::Value as V;
    let mut md: Vec<(String, V)> = vec![
        ("general.architecture".into(), V::String(prefix.into())),
        (
            "general.name".into(),
            V::String("infertop synthetic".into()),
        ),
        (
            format!("{prefix}.attention.head_count"),
            V::U32(cfg.num_attention_heads as u32),
        ),
        (
            format!("{prefix}.attention.head_count_kv"),
            V::U32(cfg.num_key_value_heads as u32),
        ),
        (
            format!("{prefix}.block_count"),
            V::U32(cfg.num_hidden_layers as u32),
        ),
        (
            format!("{prefix}.embedding_length"),
            V::U32(cfg.hidden_size as u32),
        ),
        (
            format!("{prefix}.feed_forward_length"),
            V::U32(cfg.intermediate_size as u32),
        ),
        (
            format!("{prefix}.context_length"),
            V::U32(cfg.max_position_embeddings.min(GGUF_MAX_POSITIONS) as u32),
        ),
        (
            format!("{prefix}.rope.dimension_count"),
            V::U32(cfg.head_dim as u32),
        ),
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
    if cfg.arch == Arch::Qwen3 {
        for key in ["key_length", "value_length"] {
            md.push((
                format!("{prefix}.attention.{key}"),
                V::U32(cfg.head_dim as u32),
            ));
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

/// The matrix type `make-model --gguf` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GgufType {
    F32,
    F16,
    #[value(name = "q8_0")]
    Q8_0,
    #[value(name = "q4_0")]
    Q4_0,
}

impl GgufType {
    fn ggml(self) -> GgmlDType {
        match self {
            GgufType::F32 => GgmlDType::F32,
            GgufType::F16 => GgmlDType::F16,
            GgufType::Q8_0 => GgmlDType::Q8_0,
            GgufType::Q4_0 => GgmlDType::Q4_0,
        }
    }

    /// Elements per block: a matrix row must be a whole number of blocks.
    fn block(self) -> usize {
        self.ggml().block_size()
    }

    /// `general.file_type`, in llama.cpp's numbering (`llama_ftype`).
    fn file_type(self) -> u32 {
        match self {
            GgufType::F32 => 0,
            GgufType::F16 => 1,
            GgufType::Q4_0 => 2,
            GgufType::Q8_0 => 7,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GgufType::F32 => "f32",
            GgufType::F16 => "f16",
            GgufType::Q8_0 => "q8_0",
            GgufType::Q4_0 => "q4_0",
        }
    }
}

/// The metadata prefix (`general.architecture`) of an architecture's GGUF.
fn gguf_prefix(arch: Arch) -> &'static str {
    match arch {
        Arch::Qwen2 => "qwen2",
        Arch::Qwen3 => "qwen3",
        _ => "llama",
    }
}

/// HF tensor name → llama.cpp tensor name.
fn gguf_name(hf: &str) -> String {
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
    let mapped = match tail {
        "self_attn.q_proj.weight" => "attn_q.weight",
        "self_attn.k_proj.weight" => "attn_k.weight",
        "self_attn.v_proj.weight" => "attn_v.weight",
        "self_attn.q_proj.bias" => "attn_q.bias",
        "self_attn.k_proj.bias" => "attn_k.bias",
        "self_attn.v_proj.bias" => "attn_v.bias",
        "self_attn.o_proj.weight" => "attn_output.weight",
        "self_attn.q_norm.weight" => "attn_q_norm.weight",
        "self_attn.k_norm.weight" => "attn_k_norm.weight",
        "mlp.gate_proj.weight" => "ffn_gate.weight",
        "mlp.up_proj.weight" => "ffn_up.weight",
        "mlp.down_proj.weight" => "ffn_down.weight",
        "input_layernorm.weight" => "attn_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        other => other,
    };
    format!("blk.{layer}.{mapped}")
}
