//! Hugging Face directories: config.json + (sharded) safetensors + tokenizer.json, mmapped.
// Mapping the weight files is unsafe in Rust's terms (see `open_checked`).
#![allow(unsafe_code)]

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

use super::config::ArchConfig;
use super::{one_line, ModelError, Progress};

/// The safetensors files of a directory: `model.safetensors`, or the shards an index names.
pub fn weight_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let text = std::fs::read_to_string(&index).map_err(|e| ModelError::io(&index, e))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ModelError::new(format!("{}: not valid JSON ({e})", index.display())))?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| {
                ModelError::new(format!("{}: no `weight_map` object", index.display()))
            })?;
        let files: BTreeSet<&str> = map.values().filter_map(|f| f.as_str()).collect();
        let mut out = Vec::new();
        for f in files {
            let p = dir.join(f);
            if !p.is_file() {
                return Err(ModelError::new(format!(
                    "{}: shard `{f}` named in model.safetensors.index.json is missing; finish the download",
                    dir.display()
                )));
            }
            out.push(p);
        }
        if out.is_empty() {
            return Err(ModelError::new(format!(
                "{}: weight_map names no shard",
                index.display()
            )));
        }
        return Ok(out);
    }
    Err(ModelError::new(format!(
        "{}: no model.safetensors or model.safetensors.index.json; point --model at a Hugging Face snapshot directory",
        dir.display()
    )))
}

/// Where a vision model keeps its text tower's tensors (Gemma3ForConditionalGeneration): current
/// transformers under `model.language_model.`, older ones under `language_model.model.` (and its
/// head as `language_model.lm_head`). The vision tower's tensors are never read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TextTower {
    /// The plain causal LM layout (`model.…`, `lm_head.weight`).
    Plain,
    ModelLanguageModel,
    LanguageModelModel,
}

impl TextTower {
    fn detect(has: impl Fn(&str) -> bool) -> TextTower {
        if has("model.embed_tokens.weight") {
            TextTower::Plain
        } else if has("model.language_model.embed_tokens.weight") {
            TextTower::ModelLanguageModel
        } else if has("language_model.model.embed_tokens.weight") {
            TextTower::LanguageModelModel
        } else {
            TextTower::Plain
        }
    }

    /// The stored name of the causal LM's tensor `name`.
    fn stored(self, name: &str) -> String {
        match (self, name.strip_prefix("model.")) {
            (TextTower::Plain, _) => name.to_string(),
            (TextTower::ModelLanguageModel, Some(rest)) => format!("model.language_model.{rest}"),
            (TextTower::LanguageModelModel, Some(rest)) => format!("language_model.model.{rest}"),
            (TextTower::ModelLanguageModel, None) => name.to_string(),
            (TextTower::LanguageModelModel, None) => format!("language_model.{name}"),
        }
    }
}

/// Maps the files and checks every tensor the architecture needs: present, right shape, float dtype.
/// candle's loaders unwrap on a missing tensor, so nothing reaches them unchecked.
pub fn open_checked(
    cfg: &ArchConfig,
    files: &[PathBuf],
) -> Result<(MmapedSafetensors, u64), ModelError> {
    // SAFETY: the files are mapped read-only; a file changed underneath us while mapped is the
    // user's doing, as with every mmap loader (transformers, candle, llama.cpp).
    let st = unsafe { MmapedSafetensors::multi(files) }.map_err(|e| {
        let first = files
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        ModelError::new(format!(
            "{first}: not a valid safetensors file ({}); the download may be truncated",
            one_line(&e.to_string())
        ))
    })?;
    let found: HashMap<String, (Vec<usize>, safetensors::Dtype)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, (v.shape().to_vec(), v.dtype())))
        .collect();
    let file_label = if files.len() == 1 {
        files[0].display().to_string()
    } else {
        format!(
            "{} shards in {}",
            files.len(),
            files[0]
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    };
    let mut bytes = 0u64;
    let tower = TextTower::detect(|n| found.contains_key(n));
    for spec in cfg.tensor_specs() {
        let name = if spec.name == "lm_head.weight"
            && cfg.arch.row().layout.own_lm_head
            && !found.contains_key("lm_head.weight")
        {
            "model.embed_tokens.weight".to_string()
        } else {
            tower.stored(&spec.name)
        };
        let Some((shape, dtype)) = found.get(&name) else {
            return Err(ModelError::new(format!(
                "{file_label}: tensor `{}` is missing (incomplete download, or weights of another architecture than {})",
                name,
                cfg.arch.name()
            )));
        };
        if *shape != spec.shape {
            return Err(ModelError::new(format!(
                "{file_label}: tensor `{}` has shape {:?}, config.json implies {:?}",
                spec.name, shape, spec.shape
            )));
        }
        use safetensors::Dtype as D;
        let size = match dtype {
            D::F32 => 4,
            D::F16 | D::BF16 => 2,
            other => {
                return Err(ModelError::new(format!(
                    "{file_label}: tensor `{}` has dtype {other:?}; only F32, F16 and BF16 are supported (use a GGUF file for quantized weights)",
                    spec.name
                )))
            }
        };
        bytes += (spec.numel() * size) as u64;
    }
    Ok((st, bytes))
}

/// A candle var-builder backend over mmapped safetensors that reports loading progress.
struct ProgressBackend {
    st: MmapedSafetensors,
    alias_lm_head: bool,
    tower: TextTower,
    done: AtomicU64,
    total: u64,
    progress: Progress,
}

impl ProgressBackend {
    fn resolve(&self, name: &str) -> String {
        if self.alias_lm_head && name == "lm_head.weight" {
            "model.embed_tokens.weight".to_string()
        } else {
            self.tower.stored(name)
        }
    }

    fn load(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let t = self.st.load(&self.resolve(name), dev)?.to_dtype(dtype)?;
        let bytes = (t.elem_count() * dtype.size_in_bytes()) as u64;
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if !(self.progress)(name, done.min(self.total), self.total) {
            candle_core::bail!("{}", super::STOPPED);
        }
        Ok(t)
    }
}

impl SimpleBackend for ProgressBackend {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _h: Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let t = self.load(name, dtype, dev)?;
        if t.shape() != &s {
            candle_core::bail!(
                "tensor `{name}` has shape {:?}, expected {:?}",
                t.shape(),
                s
            )
        }
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.load(name, dtype, dev)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.st.get(&self.resolve(name)).is_ok()
    }
}

/// A var-builder over the checked files, converting to `dtype` and reporting progress.
pub fn var_builder(
    cfg: &ArchConfig,
    st: MmapedSafetensors,
    dtype: DType,
    device: &Device,
    progress: Progress,
) -> VarBuilder<'static> {
    let alias_lm_head = cfg.arch.row().layout.own_lm_head && st.get("lm_head.weight").is_err();
    let total = cfg.params() * dtype.size_in_bytes() as u64;
    let tower = TextTower::detect(|n| st.get(n).is_ok());
    let backend = ProgressBackend {
        st,
        alias_lm_head,
        tower,
        done: AtomicU64::new(0),
        total,
        progress,
    };
    VarBuilder::from_backend(Box::new(backend), dtype, device.clone())
}
