//! Model sources (HF directory, GGUF, synthetic presets), architectures and the tokenizer.

pub mod arch;
pub mod architectures;
pub mod config;
pub mod gemma;
pub mod gguf;
pub mod hf;
pub mod presets;
pub mod synthetic;
pub mod tokenizer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;

use crate::event::ModelInfo;
use crate::util::one_line;
pub use arch::CausalLm;
pub use architectures::Arch;
use architectures::WindowSupport;
pub use config::ArchConfig;

/// A user-facing model error: one line naming the file or flag and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

impl ModelError {
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }

    pub fn io(path: &Path, e: std::io::Error) -> Self {
        Self(crate::util::io_error(path, &e))
    }
}

/// Loading progress: (what, done, total) in bytes; returns whether to go on (`false` when a
/// stop was asked: the load ends with an error between two tensors).
pub type Progress = Arc<dyn Fn(&str, u64, u64) -> bool + Send + Sync>;

/// The error of a load its progress stopped.
pub const STOPPED: &str = "loading stopped";

/// Where the weights come from (`--model`).
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSpec {
    Synthetic { preset: String, seed: u64 },
    HfDir(PathBuf),
    Gguf(PathBuf),
}

impl ModelSpec {
    /// `synthetic:NAME`, a directory, or a `.gguf` file.
    pub fn parse(s: &str, seed: u64) -> Result<ModelSpec, String> {
        if let Some(name) = s.strip_prefix("synthetic:") {
            if presets::find(name).is_none() {
                return Err(format!(
                    "--model: unknown synthetic preset `{name}` (known: {}; see `infertop presets`)",
                    presets::names()
                ));
            }
            return Ok(ModelSpec::Synthetic {
                preset: name.to_ascii_lowercase(),
                seed,
            });
        }
        let p = PathBuf::from(s);
        if p.is_dir() {
            return Ok(ModelSpec::HfDir(p));
        }
        if p.is_file() {
            if p.extension().and_then(|e| e.to_str()) == Some("gguf") {
                return Ok(ModelSpec::Gguf(p));
            }
            if p.file_name().and_then(|n| n.to_str()) == Some("config.json") {
                return Err(format!(
                    "--model {s}: is a file; pass the directory that holds config.json"
                ));
            }
            return Err(format!(
                "--model {s}: is a file but not a .gguf; pass a Hugging Face directory, a .gguf file or synthetic:NAME"
            ));
        }
        if p.exists() {
            return Err(format!("--model {s}: cannot be read"));
        }
        Err(format!(
            "--model {s}: no such file or directory (use a Hugging Face directory, a .gguf file, or synthetic:NAME)"
        ))
    }

    pub fn display(&self) -> String {
        match self {
            ModelSpec::Synthetic { preset, .. } => format!("synthetic:{preset}"),
            ModelSpec::HfDir(p) | ModelSpec::Gguf(p) => p.display().to_string(),
        }
    }
}

/// The candle dtype of a `--dtype`.
pub fn candle_dtype(d: crate::event::FloatDtype) -> DType {
    use crate::event::FloatDtype;
    match d {
        FloatDtype::F32 => DType::F32,
        FloatDtype::F16 => DType::F16,
        FloatDtype::Bf16 => DType::BF16,
    }
}

pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "other",
    }
}

/// `--device cpu | cuda[:N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    Cpu,
    Cuda(usize),
}

impl DeviceSpec {
    pub fn parse(s: &str) -> Result<DeviceSpec, String> {
        let l = s.to_ascii_lowercase();
        if l == "cpu" {
            return Ok(DeviceSpec::Cpu);
        }
        let ordinal = if l == "cuda" || l == "gpu" {
            Some(0)
        } else {
            l.strip_prefix("cuda:")
                .and_then(|n| n.parse::<usize>().ok())
        };
        match ordinal {
            Some(n) => {
                if cfg!(feature = "cuda") {
                    Ok(DeviceSpec::Cuda(n))
                } else {
                    Err(format!(
                        "this infertop was built without CUDA (asked for `{s}`); rebuild with `cargo build --release --features cuda`"
                    ))
                }
            }
            None => Err(format!("unknown device `{s}` (use cpu, cuda or cuda:N)")),
        }
    }

    pub fn name(self) -> String {
        match self {
            DeviceSpec::Cpu => "cpu".into(),
            DeviceSpec::Cuda(n) => format!("cuda:{n}"),
        }
    }

    /// The default dtype: bf16 on CUDA, f32 on CPU.
    pub fn default_dtype(self) -> DType {
        match self {
            DeviceSpec::Cpu => DType::F32,
            DeviceSpec::Cuda(_) => DType::BF16,
        }
    }

    pub fn open(self) -> Result<Device, ModelError> {
        match self {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Cuda(n) => Device::new_cuda(n).map_err(|e| {
                ModelError::new(format!(
                    "--device cuda:{n}: cannot open the GPU ({})",
                    one_line(&e.to_string())
                ))
            }),
        }
    }
}

/// A model ready to run.
pub struct Loaded {
    pub model: CausalLm,
    pub info: ModelInfo,
    /// End-of-sequence ids, for `--stop-at-eos`.
    pub eos_ids: Vec<u32>,
    /// A sliding window config.json declares but the implementation does not apply (candle's
    /// Phi-3 attends over every position): sequences longer than it are computed differently
    /// from the reference model, which the worker warns about.
    pub unapplied_window: Option<usize>,
}

/// The window of `cfg` that its implementation ignores, if any (see [`Loaded::unapplied_window`]).
fn unapplied_window(cfg: &ArchConfig) -> Option<usize> {
    match cfg.arch.row().window_support {
        WindowSupport::Ignored => cfg.sliding_window,
        WindowSupport::Applied | WindowSupport::Refused => None,
    }
}

/// The shape of a spec's model without loading weights (for up-front checks and `presets`).
pub fn arch_config_of(spec: &ModelSpec) -> Result<Option<ArchConfig>, ModelError> {
    match spec {
        ModelSpec::Synthetic { preset, .. } => Ok(presets::find(preset).map(|p| (p.config)())),
        ModelSpec::HfDir(dir) => {
            let cfg_path = dir.join("config.json");
            if !cfg_path.is_file() {
                return Err(ModelError::new(format!(
                    "{}: config.json not found; point --model at a Hugging Face snapshot directory",
                    dir.display()
                )));
            }
            ArchConfig::from_file(&cfg_path).map(Some)
        }
        ModelSpec::Gguf(_) => Ok(None),
    }
}

/// Bytes of memory available to this process (MemAvailable), where the OS says.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

fn info_from(
    cfg: &ArchConfig,
    name: String,
    source: crate::event::ModelSource,
    dtype: DType,
    device: &str,
) -> ModelInfo {
    ModelInfo {
        name,
        arch: cfg.arch.name().to_string(),
        source,
        params: cfg.params(),
        active_params: cfg.active_params(),
        weight_bytes: cfg.params() * dtype.size_in_bytes() as u64,
        kv_bytes_per_token: cfg.kv_bytes_per_token(dtype.size_in_bytes()),
        kv_window: cfg.kv_window(),
        dtype: dtype_name(dtype).to_string(),
        device: device.to_string(),
        max_positions: cfg.max_position_embeddings,
        layers: cfg.num_hidden_layers,
        hidden: cfg.hidden_size,
        heads: cfg.num_attention_heads,
        kv_heads: cfg.num_key_value_heads,
        head_dim: cfg.head_dim,
        vocab: cfg.vocab_size,
        parts: crate::event::PartWeights::of_tensors(
            cfg.tensor_specs().iter().map(|t| {
                let n = t.numel() as u64;
                (t.name.as_str(), n, n * dtype.size_in_bytes() as u64)
            }),
            cfg.hidden_size,
            cfg.params() - cfg.active_params(),
        ),
    }
}

/// Loads (or builds) the model on `device`, reporting progress.
pub fn load(
    spec: &ModelSpec,
    device: &Device,
    device_spec: DeviceSpec,
    dtype: DType,
    progress: Progress,
) -> Result<Loaded, ModelError> {
    let dev_name = device_spec.name();
    let cerr = |what: &str, e: candle_core::Error| {
        ModelError::new(format!("{what}: {}", one_line(&e.to_string())))
    };
    match spec {
        ModelSpec::Synthetic { preset, seed } => {
            let p = presets::find(preset).ok_or_else(|| {
                ModelError::new(format!("--model: unknown synthetic preset `{preset}`"))
            })?;
            let cfg = (p.config)();
            check_fits(&cfg, dtype, device_spec, &spec.display())?;
            let mut report = |name: &str, done: u64, total: u64| progress(name, done, total);
            let tensors = synthetic::build_tensors(&cfg, *seed, dtype, device, &mut report)
                .map_err(|e| cerr(&spec.display(), e))?;
            let vb = VarBuilder::from_tensors(tensors, dtype, device);
            let model =
                CausalLm::load(&cfg, vb, dtype, device).map_err(|e| cerr(&spec.display(), e))?;
            Ok(Loaded {
                model,
                info: info_from(
                    &cfg,
                    spec.display(),
                    crate::event::ModelSource::Synthetic,
                    dtype,
                    &dev_name,
                ),
                eos_ids: cfg.eos_token_ids.clone(),
                unapplied_window: unapplied_window(&cfg),
            })
        }
        ModelSpec::HfDir(dir) => {
            let cfg = arch_config_of(spec)?.ok_or_else(|| ModelError::new("no config"))?;
            let cfg_path = dir.join("config.json");
            cfg.check_supported()
                .map_err(|m| ModelError::new(format!("{}: {m}", cfg_path.display())))?;
            let files = hf::weight_files(dir)?;
            let (st, _) = hf::open_checked(&cfg, &files)?;
            check_fits(&cfg, dtype, device_spec, &spec.display())?;
            let vb = hf::var_builder(&cfg, st, dtype, device, progress);
            let model = CausalLm::load(&cfg, vb, dtype, device)
                .map_err(|e| cerr(&dir.display().to_string(), e))?;
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| dir.display().to_string());
            Ok(Loaded {
                model,
                info: info_from(&cfg, name, crate::event::ModelSource::Hf, dtype, &dev_name),
                eos_ids: cfg.eos_token_ids.clone(),
                unapplied_window: unapplied_window(&cfg),
            })
        }
        ModelSpec::Gguf(path) => {
            if !progress(&path.display().to_string(), 0, 1) {
                return Err(ModelError::new(STOPPED));
            }
            let (model, info) = gguf::load(path, device, &dev_name)?;
            progress(&path.display().to_string(), 1, 1);
            Ok(Loaded {
                model,
                info,
                eos_ids: Vec::new(),
                unapplied_window: None,
            })
        }
    }
}

/// Refuses, before allocating, a model that cannot fit in memory on CPU.
fn check_fits(
    cfg: &ArchConfig,
    dtype: DType,
    device: DeviceSpec,
    what: &str,
) -> Result<(), ModelError> {
    if device != DeviceSpec::Cpu {
        return Ok(());
    }
    let need = cfg.params() * dtype.size_in_bytes() as u64;
    if let Some(avail) = available_memory_bytes() {
        if need > avail / 10 * 9 {
            return Err(ModelError::new(format!(
                "{what} needs {:.1} GB of weights in {} but only {:.1} GB of memory is available; use a smaller preset or --dtype bf16",
                need as f64 / 1e9,
                dtype_name(dtype),
                avail as f64 / 1e9
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::KvWindow;

    fn info(preset: &str, arch: Option<Arch>, dtype: DType) -> ModelInfo {
        let mut cfg = (presets::find(preset).map(|p| (p.config)())).unwrap_or_else(|| {
            panic!("preset {preset}");
        });
        if let Some(a) = arch {
            cfg = presets::with_arch(cfg, a);
        }
        info_from(
            &cfg,
            preset.into(),
            crate::event::ModelSource::Synthetic,
            dtype,
            "cpu",
        )
    }

    /// Gemma's sliding layers hold at most their window: Gemma 3 1B (26 layers, 1 kv head of
    /// 256, window 512) has 22 sliding layers and 4 full ones; in bf16 a layer holds 1 KiB a
    /// position.
    #[test]
    fn gemma_kv_cache_counts_sliding_layers_at_their_window() {
        let g3 = info("gemma-3-1b", None, DType::BF16);
        assert_eq!(g3.kv_bytes_per_token, 2 * 26 * 256 * 2);
        assert_eq!(
            g3.kv_window,
            Some(KvWindow {
                sliding_layers: 22,
                window: 512
            })
        );
        // Within the window every layer grows.
        assert_eq!(g3.expected_kv_bytes(300, 2), 26_624 * 300 * 2);
        // At 4096: 4 full layers × 4096 + 22 sliding × 512 positions, 1 KiB each (not 26 × 4096).
        assert_eq!(g3.expected_kv_bytes(4096, 1), 1024 * (4 * 4096 + 22 * 512));
        // Decode from 400 to 624: full layers read 512 positions on average; sliding ones
        // ((512² − 400²)/2 + 512 × 112) / 224 = 484.
        let close = |a: f64, b: f64| assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
        close(
            g3.decode_kv_bytes(400, 224),
            1024.0 * (4.0 * 512.0 + 22.0 * 484.0),
        );
        close(
            g3.decode_kv_bytes(600, 100),
            1024.0 * (4.0 * 650.0 + 22.0 * 512.0),
        );
        close(
            crate::stats::roofline::decode_bytes_per_step(1_000, &g3, 100, 200, 2),
            1_000.0 + 2.0 * 26_624.0 * 200.0,
        );

        // Gemma 2 alternates: the tiny shape's 4 layers (2 kv heads of 64, f32: 1 KiB a layer
        // and position), 2 of them sliding at 4096.
        let g2 = info("tiny", Some(Arch::Gemma2), DType::F32);
        assert_eq!(
            g2.kv_window,
            Some(KvWindow {
                sliding_layers: 2,
                window: 4096
            })
        );
        assert_eq!(g2.expected_kv_bytes(8192, 1), 1024 * (2 * 8192 + 2 * 4096));

        // Other models, and windows candle keeps every position for, grow on every layer.
        let mistral = info("mistral-7b", None, DType::BF16);
        assert_eq!(mistral.kv_window, None);
        assert_eq!(
            mistral.expected_kv_bytes(8192, 1),
            mistral.kv_bytes_per_token * 8192
        );
    }

    /// `layer_types` and `sliding_window` from config.json decide it.
    #[test]
    fn gemma_kv_window_follows_layer_types() {
        let v = serde_json::json!({
            "architectures": ["Gemma3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 32, "vocab_size": 512, "sliding_window": 8,
            "layer_types": ["sliding_attention", "full_attention", "full_attention"]
        });
        let cfg = ArchConfig::from_json(&v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cfg.kv_window(),
            Some(KvWindow {
                sliding_layers: 1,
                window: 8
            })
        );
        let info = info_from(
            &cfg,
            "g".into(),
            crate::event::ModelSource::Hf,
            DType::F32,
            "cpu",
        );
        // 2 × 2 × 32 × 4 = 512 bytes a layer and position.
        assert_eq!(info.expected_kv_bytes(100, 1), 512 * (2 * 100 + 8));
    }
}
