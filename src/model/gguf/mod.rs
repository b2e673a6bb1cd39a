//! GGUF files through candle's quantized llama (llama, mistral, and phi3 with its fused matrices
//! split), qwen2 and qwen3, and our own Gemma 2/3 (`model::gemma`), with the tokenizer they carry.
//! Which architecture a file is, and what runs it, is its row's [`GgufRow`].

pub mod tokenizer;

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::Path;

use candle_core::quantized::QMatMul;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

use crate::model::arch::CausalLm;
use crate::model::architectures::{Arch, ArchRow, GemmaRow, GgufLoader, GgufRow, ARCHITECTURES};
use crate::model::config::{ArchConfig, Gemma};
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
    let (row, gguf) = arch_of(&ct, path)?;
    check_arch_settings(&ct, row, gguf, path)?;
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

/// The architecture a GGUF file declares (`general.architecture`, one of a row's GGUF names),
/// if we can run it.
fn arch_of(
    ct: &gguf_file::Content,
    path: &Path,
) -> Result<(&'static ArchRow, &'static GgufRow), ModelError> {
    let arch_name = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    ARCHITECTURES
        .iter()
        .find_map(|row| {
            let gguf = row.gguf.as_ref()?;
            gguf.names
                .contains(&arch_name.as_str())
                .then_some((row, gguf))
        })
        .ok_or_else(|| {
            let supported: Vec<&str> = ARCHITECTURES
                .iter()
                .filter_map(|row| row.gguf.as_ref())
                .flat_map(|g| g.names.iter().copied())
                .collect();
            ModelError::new(format!(
                "{}: GGUF architecture `{arch_name}` is not supported (supported: {})",
                path.display(),
                supported.join(", ")
            ))
        })
}

/// Loads a GGUF file; checks the metadata first so errors name what is missing.
pub fn load(
    path: &Path,
    device: &Device,
    display_device: &str,
) -> Result<(CausalLm, ModelInfo), ModelError> {
    let (mut file, ct) = open(path)?;
    let (row, gguf) = arch_of(&ct, path)?;
    let arch = row.arch;
    let p = gguf.names[0];
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
    let head_dim = if gguf.loader.reads_key_length() {
        need("attention.key_length")?
    } else {
        hidden / heads.max(1)
    };
    let max_positions = if gguf.loader.caps_positions() {
        context.min(GGUF_MAX_POSITIONS)
    } else {
        context
    };
    let attn_in = if row.layout.fused_qkv {
        "blk.0.attn_qkv.weight"
    } else {
        "blk.0.attn_q.weight"
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
    let (params, bytes, dtype) = tensor_totals(&ct);
    let parts = crate::event::PartWeights::of_tensors(
        ct.tensor_infos.iter().map(|(name, t)| {
            let (n, b) = tensor_size(t);
            (name.as_str(), n, b)
        }),
        hidden,
        0,
    );
    check_arch_settings(&ct, row, gguf, path)?;
    let gemma_cfg = match gguf.loader {
        GgufLoader::Gemma => Some(gemma_config(&ct, row, gguf, path)?),
        _ => None,
    };
    let mut ct = ct;
    if gguf.loader == GgufLoader::LlamaFused {
        split_fused(&mut ct, p, path)?;
    }
    let model = match (gguf.loader, &gemma_cfg) {
        (GgufLoader::Gemma, Some((cfg, g))) => {
            let mut weights = GgufWeights {
                ct: &ct,
                file: &mut file,
                device,
                arch,
            };
            GemmaModel::load(cfg, g, &mut weights, DType::F32, device).map(CausalLm::Gemma)
        }
        (GgufLoader::Gemma, None) => Err(candle_core::Error::Msg("no Gemma settings".into())),
        (GgufLoader::Qwen2, _) => quantized_qwen2::ModelWeights::from_gguf(ct, &mut file, device)
            .map(CausalLm::QuantQwen2),
        (GgufLoader::Qwen3, _) => quantized_qwen3::ModelWeights::from_gguf(ct, &mut file, device)
            .map(CausalLm::QuantQwen3),
        (GgufLoader::Llama | GgufLoader::LlamaFused, _) => {
            quantized_llama::ModelWeights::from_gguf(ct, &mut file, device)
                .map(CausalLm::QuantLlama)
        }
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
        source: crate::event::ModelSource::Gguf,
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
        parts,
    };
    Ok((model, info))
}

/// One tensor's parameters and bytes as candle holds them: quantized types as stored, f16 and
/// bf16 widened to f32 (candle's quantized models dequantize float tensors at load and run
/// them through its dense f32 matmul), so a decode step reads 4 bytes per parameter of an
/// f16 file.
fn tensor_size(info: &gguf_file::TensorInfo) -> (u64, u64) {
    use candle_core::quantized::GgmlDType;
    let n = info.shape.elem_count() as u64;
    let bytes = match info.ggml_dtype {
        GgmlDType::F16 | GgmlDType::BF16 | GgmlDType::F32 => 4 * n,
        t => n * t.type_size() as u64 / t.block_size() as u64,
    };
    (n, bytes)
}

/// Parameters, bytes, and the type holding most of the bytes, of every tensor in the file.
fn tensor_totals(ct: &gguf_file::Content) -> (u64, u64, String) {
    let mut params = 0u64;
    let mut bytes = 0u64;
    let mut dtypes = std::collections::BTreeMap::<String, u64>::new();
    for info in ct.tensor_infos.values() {
        let (n, b) = tensor_size(info);
        params += n;
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
    (params, bytes, dtype)
}

/// llama.cpp's RoPE base where a file names none.
const LLAMA_CPP_ROPE_BASE: f64 = 10_000.0;

/// Gemma 2/3 settings from GGUF metadata, as llama.cpp reads them: the sliding layers follow
/// llama.cpp's fixed patterns (the row's `full_every`: Gemma 2 every other layer from the
/// first, Gemma 3 five of every six), the sliding layers of Gemma 3 use its fixed local RoPE
/// base, and queries are scaled by `key_length^-0.5` except in the 27B models
/// (`(hidden / heads)^-0.5`, their `query_pre_attn_scalar`).
fn gemma_config(
    ct: &gguf_file::Content,
    row: &ArchRow,
    gguf: &GgufRow,
    path: &Path,
) -> Result<(ArchConfig, Gemma), ModelError> {
    let p = gguf.names[0];
    let Some(g) = &row.gemma else {
        return Err(ModelError::new(format!(
            "{}: {} has no Gemma settings",
            path.display(),
            row.name
        )));
    };
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
    let rope_theta = md_f32(ct, &format!("{p}.rope.freq_base")).unwrap_or(LLAMA_CPP_ROPE_BASE);
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
        query_pre_attn_scalar: if layers == g.gguf_27b_layers {
            (hidden / heads) as f64
        } else {
            head_dim as f64
        },
        attn_logit_softcapping: md_f32(ct, &format!("{p}.attn_logit_softcapping")),
        final_logit_softcapping: md_f32(ct, &format!("{p}.final_logit_softcapping")),
        sliding_layers: GemmaRow::sliding_layers(g.full_every, layers),
        rope_local_theta: g.rope_local_theta.unwrap_or(rope_theta),
        rope_linear_factor: linear,
        qk_norm: row.layout.qk_norm,
    };
    let vocab = ct
        .tensor_infos
        .get("token_embd.weight")
        .map(|t| t.shape.dims()[0])
        .unwrap_or(0);
    let cfg = ArchConfig {
        arch: row.arch,
        vocab_size: vocab,
        hidden_size: hidden,
        intermediate_size: need("feed_forward_length")?,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: need("attention.head_count_kv")?,
        head_dim,
        max_position_embeddings: md_u32(ct, &format!("{p}.context_length"))
            .unwrap_or(row.defaults.max_position_embeddings),
        rms_norm_eps: md_f32(ct, &format!("{p}.attention.layer_norm_rms_epsilon"))
            .unwrap_or(row.defaults.rms_norm_eps),
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

/// The settings an architecture's GGUF needs and its loader can compute, checked before any
/// weight is read.
fn check_arch_settings(
    ct: &gguf_file::Content,
    row: &ArchRow,
    gguf: &GgufRow,
    path: &Path,
) -> Result<(), ModelError> {
    let p = gguf.names[0];
    match gguf.loader {
        GgufLoader::Gemma => gemma_config(ct, row, gguf, path).map(|_| ()),
        GgufLoader::LlamaFused => {
            let hidden = md_u32(ct, &format!("{p}.embedding_length")).unwrap_or(0);
            let heads = md_u32(ct, &format!("{p}.attention.head_count"))
                .unwrap_or(1)
                .max(1);
            check_fused(ct, p, hidden / heads, path)
        }
        GgufLoader::Llama | GgufLoader::Qwen2 | GgufLoader::Qwen3 => Ok(()),
    }
}

/// Phi-3 (`GgufLoader::LlamaFused`, metadata prefix `p`) is llama with fused matrices and NEOX
/// RoPE, which candle's quantized llama applies to a `phi3` file: what it cannot compute is
/// refused here. candle's own quantized_phi3 is not used: it fixes RoPE at base 10000 (Phi-4's
/// is 250000).
fn check_fused(
    ct: &gguf_file::Content,
    p: &str,
    head_dim: usize,
    path: &Path,
) -> Result<(), ModelError> {
    let refuse = |what: String| {
        Err(ModelError::new(format!(
            "{}: {what}; candle's quantized llama, which runs Phi-3 GGUFs, rotates whole heads without LongRoPE (Phi-3 mini/medium 4k, Phi-4 run)",
            path.display()
        )))
    };
    if let Some(dims) = md_u32(ct, &format!("{p}.rope.dimension_count")).filter(|&d| d != head_dim)
    {
        return refuse(format!(
            "Phi-3 GGUF rotating {dims} of {head_dim} dimensions per head"
        ));
    }
    if let Some(name) = ct.tensor_infos.keys().find(|n| n.contains("rope_factors")) {
        return refuse(format!("Phi-3 GGUF with LongRoPE factors (`{name}`)"));
    }
    Ok(())
}

/// Presents a Phi-3 GGUF (metadata prefix `p`) as candle's quantized llama reads one: `llama.*`
/// copies of the `{p}.*` metadata, and the fused `attn_qkv` (q, k, v rows) and `ffn_up` (gate,
/// then up rows) as separate tensors over the same bytes (a row of any GGML type is a whole
/// number of blocks). `general.architecture` stays `phi3`, for which candle applies NEOX RoPE
/// as llama.cpp does.
fn split_fused(ct: &mut gguf_file::Content, p: &str, path: &Path) -> Result<(), ModelError> {
    let prefix = format!("{p}.");
    let copies: Vec<(String, gguf_file::Value)> = ct
        .metadata
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(&prefix)
                .map(|rest| (format!("llama.{rest}"), v.clone()))
        })
        .collect();
    ct.metadata.extend(copies);
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
        QMatMul::from_qtensor(self.tensor(&name, &[out, inp])?).map(Proj::gguf)
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
        Ok((values, Proj::gguf(QMatMul::from_qtensor(head)?)))
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
    let gguf = writable(cfg)?;
    let cerr = |e: candle_core::Error| ModelError::new(format!("writing {}: {e}", path.display()));
    let tensors = synthetic_tensors(cfg, gguf, seed, quant).map_err(cerr)?;
    let mut md = metadata(cfg, gguf, quant);
    if let (Some(g), Some(defaults)) = (&cfg.gemma, &cfg.arch.row().gemma) {
        gemma_metadata(cfg, g, defaults, gguf.names[0], &mut md)?;
    }
    md.extend(tokenizer::metadata_for(tk, cfg.vocab_size)?);
    let md_refs: Vec<(&str, &gguf_file::Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let file = File::create(path).map_err(|e| ModelError::io(path, e))?;
    let mut w = BufWriter::new(file);
    gguf_file::write(&mut w, &md_refs, &t_refs).map_err(cerr)?;
    w.flush().map_err(|e| ModelError::io(path, e))?;
    w.stream_position().map_err(|e| ModelError::io(path, e))?;
    Ok(())
}

/// The GGUF layout `cfg` is written in, or why it cannot be.
fn writable(cfg: &ArchConfig) -> Result<&'static GgufRow, ModelError> {
    let row = cfg.arch.row();
    let Some(gguf) = &row.gguf else {
        let writes: Vec<&str> = ARCHITECTURES
            .iter()
            .filter_map(|r| r.gguf.as_ref().map(|g| g.names[0]))
            .collect();
        let writes = match writes.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        // An architecture whose GGUFs another one reads (mistral's, as llama).
        let reader = ARCHITECTURES
            .iter()
            .find(|r| r.gguf.as_ref().is_some_and(|g| g.names.contains(&row.name)));
        return Err(ModelError::new(match reader {
            Some(r) => format!(
                "--gguf writes {writes}; use --arch {} for a {}-shaped GGUF",
                r.name, row.name
            ),
            None => format!(
                "--gguf writes {writes}, not {}; write a Hugging Face directory instead (drop --gguf)",
                row.name
            ),
        }));
    };
    if row.partial_rotary && cfg.partial_rotary_factor.is_some() {
        return Err(ModelError::new(format!(
            "--gguf writes {} with RoPE over whole heads only (candle's quantized {})",
            row.name, row.name
        )));
    }
    Ok(gguf)
}

/// Every tensor of `cfg` under llama.cpp's name, as convert_hf_to_gguf.py stores it, of the
/// matrix type `quant` picks (norms in f32).
fn synthetic_tensors(
    cfg: &ArchConfig,
    gguf: &GgufRow,
    seed: u64,
    quant: GgufType,
) -> candle_core::Result<Vec<(String, QTensor)>> {
    let gemma_norms = cfg.arch.row().layout.gemma_norms;
    let mut tensors = Vec::new();
    for spec in cfg.tensor_specs() {
        let gguf_name = gguf_name(cfg.arch, &spec.name);
        let mut values = tensor_values(&spec, seed);
        if spec.is_norm && gemma_norms {
            // convert_hf_to_gguf.py stores Gemma's gain `1 + w`.
            values.iter_mut().for_each(|v| *v += 1.0);
        }
        let mut t = Tensor::from_vec(values, spec.shape.as_slice(), &Device::Cpu)?;
        if gguf.loader == GgufLoader::Llama {
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
                t = permute_rope_rows(&t, n)?;
            }
        }
        let dtype = if spec.shape.len() == 2 {
            let tied = cfg.tie_word_embeddings;
            quant.tensor_type(&gguf_name, cfg.num_hidden_layers, tied, spec.shape[1])
        } else {
            GgmlDType::F32
        };
        tensors.push((gguf_name, QTensor::quantize(&t, dtype)?));
    }
    Ok(tensors)
}

/// The hyperparameters llama.cpp reads, under the layout's prefix.
fn metadata(cfg: &ArchConfig, gguf: &GgufRow, quant: GgufType) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let prefix = gguf.names[0];
    let u = |v: usize| V::U32(v as u32);
    let context = if gguf.loader.caps_positions() {
        cfg.max_position_embeddings.min(GGUF_MAX_POSITIONS)
    } else {
        cfg.max_position_embeddings
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
        (format!("{prefix}.block_count"), u(cfg.num_hidden_layers)),
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
    if gguf.loader.reads_key_length() {
        for key in ["key_length", "value_length"] {
            md.push((format!("{prefix}.attention.{key}"), u(cfg.head_dim)));
        }
    }
    md
}

/// Gemma's settings (`g`) as llama.cpp's metadata, or why llama.cpp cannot express them: it
/// derives the sliding layers, the query scale and the sliding layers' RoPE base itself (the
/// row's `defaults`).
fn gemma_metadata(
    cfg: &ArchConfig,
    g: &Gemma,
    defaults: &GemmaRow,
    prefix: &str,
    md: &mut Vec<(String, gguf_file::Value)>,
) -> Result<(), ModelError> {
    use gguf_file::Value as V;
    let window = cfg.sliding_window.unwrap_or(cfg.max_position_embeddings);
    md.push((
        format!("{prefix}.attention.sliding_window"),
        V::U32(window as u32),
    ));
    let every = defaults.full_every;
    if g.sliding_layers != GemmaRow::sliding_layers(every, cfg.num_hidden_layers) {
        return Err(ModelError::new(format!(
            "--gguf: llama.cpp's {prefix} slides {} of every {every} layers; this shape's layer types differ",
            every - 1
        )));
    }
    if g.query_pre_attn_scalar != cfg.head_dim as f64 {
        return Err(ModelError::new(format!(
            "--gguf: llama.cpp scales {prefix} queries by head_dim^-0.5, not query_pre_attn_scalar {}",
            g.query_pre_attn_scalar
        )));
    }
    if let Some(base) = defaults
        .rope_local_theta
        .filter(|&b| b != g.rope_local_theta)
    {
        return Err(ModelError::new(format!(
            "--gguf: llama.cpp's {prefix} uses RoPE base {base} on sliding layers, not {}",
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
    let gemma = arch.row().layout.gemma_norms;
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
