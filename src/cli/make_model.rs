//! `infertop presets` and `infertop make-model`: synthetic shapes, listed or written to disk as
//! a real Hugging Face directory (or GGUF file) so the loading path is exercised end to end.

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::exit::Failure;
use crate::model::{self, presets};
use crate::util::format;
use crate::util::table::TextTable;

#[derive(Args, Debug, Clone)]
pub struct MakeModelArgs {
    /// Output directory (or .gguf file with --gguf).
    pub out: PathBuf,
    /// Preset shape (see `infertop presets`).
    #[arg(long, default_value = "tiny")]
    pub preset: String,
    /// The architecture (default: the preset's).
    #[arg(long, value_enum)]
    pub arch: Option<model::Arch>,
    /// Write a GGUF file (with its tokenizer) instead of a directory.
    #[arg(long)]
    pub gguf: bool,
    /// The GGUF's matrix type.
    #[arg(long, value_enum, default_value = "q8_0", requires = "gguf")]
    pub gguf_type: model::gguf::GgufType,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `infertop presets`: every shape with its parameters (active: what one token runs through,
/// less than all of them for a mixture of experts) and the memory its weights take.
pub fn presets_table() -> String {
    let mut t = TextTable::new()
        .left(["preset", "arch"])
        .right([
            "params",
            "active",
            "layers",
            "hidden",
            "heads/kv",
            "vocab",
            "positions",
            "f32",
            "bf16",
        ])
        .left(["about"]);
    for p in presets::PRESETS {
        let c = (p.config)();
        let params = c.params();
        t.row([
            p.name.to_string(),
            c.arch.name().to_string(),
            format::si(params as f64),
            format::si(c.active_params() as f64),
            c.num_hidden_layers.to_string(),
            c.hidden_size.to_string(),
            format!("{}/{}", c.num_attention_heads, c.num_key_value_heads),
            c.vocab_size.to_string(),
            c.max_position_embeddings.to_string(),
            format::bytes(params * 4),
            format::bytes(params * 2),
            p.about.to_string(),
        ]);
    }
    t.markdown()
}

/// `infertop make-model`.
pub fn make_model(args: &MakeModelArgs) -> Result<(), Failure> {
    let preset = presets::find(&args.preset).ok_or_else(|| {
        Failure::usage(format!(
            "--preset: unknown preset `{}` (known: {})",
            args.preset,
            presets::names()
        ))
    })?;
    let mut cfg = (preset.config)();
    if let Some(arch) = args.arch {
        cfg = presets::with_arch(cfg, arch);
    }
    let need = cfg.params() * 4;
    if need > 8_000_000_000 {
        return Err(Failure::usage(format!(
            "--preset {}: {} of f32 weights is too large to write; benchmark it in memory with --model synthetic:{}",
            args.preset,
            format::bytes(need),
            args.preset
        )));
    }
    let tokenizer =
        model::tokenizer::synthetic(cfg.vocab_size).map_err(|e| Failure::runtime(e.to_string()))?;
    if args.gguf {
        if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| Failure::usage(crate::util::io_error(parent, &e)))?;
        }
        model::gguf::write_synthetic(&cfg, args.seed, args.gguf_type, &tokenizer, &args.out)
            .map_err(|e| Failure::usage(e.to_string()))?;
        say!(
            "wrote {} ({} {} parameters, {}, with its tokenizer)",
            args.out.display(),
            format::si(cfg.params() as f64),
            cfg.arch.name(),
            args.gguf_type.name(),
        );
        return Ok(());
    }
    if args.out.is_file() {
        return Err(Failure::usage(format!(
            "{}: is a file; make-model writes a directory",
            args.out.display()
        )));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::usage(crate::util::io_error(&args.out, &e)))?;
    let cfg_path = args.out.join("config.json");
    let text = serde_json::to_string_pretty(&cfg.to_json()).unwrap_or_default();
    std::fs::write(&cfg_path, text + "\n")
        .map_err(|e| Failure::runtime(crate::util::io_error(&cfg_path, &e)))?;
    let mut tensors = std::collections::HashMap::new();
    for spec in cfg.tensor_specs() {
        let values = model::synthetic::tensor_values(&spec, args.seed);
        let t =
            candle_core::Tensor::from_vec(values, spec.shape.as_slice(), &candle_core::Device::Cpu)
                .map_err(|e| Failure::runtime(e.to_string()))?;
        tensors.insert(spec.name.clone(), t);
    }
    let st_path = args.out.join("model.safetensors");
    candle_core::safetensors::save(&tensors, &st_path)
        .map_err(|e| Failure::runtime(format!("{}: {e}", st_path.display())))?;
    let tk_path = args.out.join("tokenizer.json");
    tokenizer
        .save(&tk_path, false)
        .map_err(|e| Failure::runtime(format!("{}: {e}", tk_path.display())))?;
    // What servers read beside the weights: the chat template and special tokens, and the
    // generation defaults (transformers' and vLLM's generation_config.json).
    let generation = serde_json::json!({
        "bos_token_id": 1,
        "eos_token_id": 2,
    });
    for (name, value) in [
        (
            "tokenizer_config.json",
            model::tokenizer::config_json(cfg.max_position_embeddings),
        ),
        ("generation_config.json", generation),
    ] {
        let path = args.out.join(name);
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        std::fs::write(&path, text + "\n")
            .map_err(|e| Failure::runtime(crate::util::io_error(&path, &e)))?;
    }
    say!(
        "wrote {} ({} {} parameters, f32): config.json, model.safetensors, tokenizer.json, tokenizer_config.json, generation_config.json",
        args.out.display(),
        format::si(cfg.params() as f64),
        cfg.arch.name()
    );
    Ok(())
}
