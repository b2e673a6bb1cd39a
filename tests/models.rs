//! Model sources end to end: what make-model writes loads through the same path as a download.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use candle_core::{DType, Device, Tensor, D};
use infertop::model::{self, DeviceSpec, ModelSpec};

fn quiet() -> model::Progress {
    Arc::new(|_: &str, _: u64, _: u64| true)
}

fn make(args: &[&str]) {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_infertop"))
        .arg("make-model")
        .args(args)
        .status()
        .expect("run infertop make-model");
    assert!(status.success(), "make-model {args:?} failed");
}

fn load(spec: &ModelSpec) -> model::Loaded {
    model::load(spec, &Device::Cpu, DeviceSpec::Cpu, DType::F32, quiet()).expect("model loads")
}

/// Greedy ids of a short generation, plus the prefill logits.
fn greedy(lm: &mut model::CausalLm, prompt: &[u32], n: usize) -> (Vec<u32>, Vec<f32>) {
    lm.reset();
    let input = Tensor::from_slice(prompt, (1, prompt.len()), &Device::Cpu).unwrap();
    let logits = lm.forward(&input, 0).unwrap();
    let first_logits = logits.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let mut next = logits.argmax_keepdim(D::Minus1).unwrap();
    let mut ids = vec![next.to_vec2::<u32>().unwrap()[0][0]];
    for i in 1..n {
        let logits = lm.forward(&next, prompt.len() + i - 1).unwrap();
        next = logits.argmax_keepdim(D::Minus1).unwrap();
        ids.push(next.to_vec2::<u32>().unwrap()[0][0]);
    }
    (ids, first_logits)
}

const PROMPT: [u32; 12] = [5, 17, 99, 250, 3, 1000, 42, 7, 512, 77, 1999, 64];

#[test]
fn made_directory_matches_in_memory_model_and_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tiny");
    make(&[out.to_str().unwrap(), "--preset", "tiny", "--seed", "7"]);
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    let mut from_dir = load(&ModelSpec::HfDir(out.clone()));
    let mut in_memory = load(&ModelSpec::Synthetic {
        preset: "tiny".into(),
        seed: 7,
    });
    assert_eq!(from_dir.info.params, in_memory.info.params);
    assert_eq!(from_dir.info.arch, "llama");
    let (ids_a, logits_a) = greedy(&mut from_dir.model, &PROMPT, 8);
    let (ids_b, logits_b) = greedy(&mut in_memory.model, &PROMPT, 8);
    assert_eq!(logits_a, logits_b, "same weights give the same logits");
    assert_eq!(ids_a, ids_b);
    // Deterministic: a second run (after reset) gives the same ids.
    let (ids_c, _) = greedy(&mut from_dir.model, &PROMPT, 8);
    assert_eq!(ids_a, ids_c);
    // A different seed gives different weights.
    let mut other = load(&ModelSpec::Synthetic {
        preset: "tiny".into(),
        seed: 8,
    });
    let (_, logits_d) = greedy(&mut other.model, &PROMPT, 1);
    assert_ne!(logits_a, logits_d);
}

#[test]
fn every_architecture_make_model_writes_loads_and_generates() {
    let dir = tempfile::tempdir().unwrap();
    for arch in [
        "qwen2",
        "mistral",
        "qwen3",
        "phi3",
        "mixtral",
        "qwen3_moe",
        "gemma2",
        "gemma3",
    ] {
        let out = dir.path().join(arch);
        make(&[out.to_str().unwrap(), "--preset", "tiny", "--arch", arch]);
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap())
                .unwrap();
        let model_type = if arch == "gemma3" {
            "gemma3_text"
        } else {
            arch
        };
        assert_eq!(cfg["model_type"], model_type);
        let mut m = load(&ModelSpec::HfDir(out));
        assert_eq!(m.info.arch, arch);
        let moe = matches!(arch, "mixtral" | "qwen3_moe");
        assert_eq!(
            m.info.active_params < m.info.params,
            moe,
            "{arch}: active {} of {} params",
            m.info.active_params,
            m.info.params
        );
        let (ids, logits) = greedy(&mut m.model, &PROMPT, 4);
        assert_eq!(ids.len(), 4);
        assert!(logits.iter().all(|v| v.is_finite()));
        let (again, _) = greedy(&mut m.model, &PROMPT, 4);
        assert_eq!(ids, again, "{arch} is deterministic");
    }
}

#[test]
fn gguf_loads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tiny.gguf");
    make(&[out.to_str().unwrap(), "--preset", "tiny", "--gguf"]);
    let mut m = load(&ModelSpec::Gguf(out.clone()));
    assert_eq!(m.info.source, infertop::event::ModelSource::Gguf);
    assert_eq!(m.info.dtype, "q8_0");
    assert_eq!(m.info.layers, 4);
    let (ids, _) = greedy(&mut m.model, &PROMPT, 6);
    let (again, _) = greedy(&mut m.model, &PROMPT, 6);
    assert_eq!(ids, again);
    infertop::model::gguf::read_tokenizer(&out).unwrap();
}

#[test]
fn config_json_as_older_and_current_transformers_write_it() {
    use infertop::model::ArchConfig;
    let old = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 768,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
        "rope_theta": 500000.0, "max_position_embeddings": 1024
    });
    let new = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 768,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
        "tie_word_embeddings": true, "head_dim": 64
    });
    let a = ArchConfig::from_json(&old).unwrap();
    let b = ArchConfig::from_json(&new).unwrap();
    assert_eq!(a.rope_theta, 500000.0);
    assert_eq!(b.rope_theta, 500000.0);
    assert_eq!(a.num_key_value_heads, 4, "defaults to attention heads");
    assert_eq!(b.num_key_value_heads, 2);
    assert_eq!(a.max_position_embeddings, 1024);
    assert_eq!(
        b.max_position_embeddings, 2048,
        "transformers' llama default"
    );
    assert!(!a.tie_word_embeddings && b.tie_word_embeddings);
    assert_eq!(b.rope_scaling.as_ref().map(|s| s.factor), Some(8.0));
    assert_eq!(a.rms_norm_eps, 1e-6);
    assert_eq!(b.head_dim, 64);
}

/// The presets' shapes are the published models': their parameter counts (total and, for a
/// mixture of experts, active per token) are the published figures.
#[test]
fn presets_have_the_published_parameter_counts() {
    use infertop::model::presets;
    // (preset, total, active) in billions, as the model cards state them.
    let published = [
        ("qwen3-0.6b", 0.596, 0.596),
        ("qwen3-8b", 8.19, 8.19),
        ("gemma-3-1b", 1.00, 1.00),
        ("gemma-3-4b", 3.88, 3.88),
        ("phi-3-mini", 3.82, 3.82),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("mixtral-8x7b", 46.7, 12.9),
    ];
    for (name, total, active) in published {
        let cfg = (presets::find(name).unwrap().config)();
        cfg.check_supported().unwrap();
        let (t, a) = (cfg.params() as f64 / 1e9, cfg.active_params() as f64 / 1e9);
        assert!(
            (t / total - 1.0).abs() < 0.02,
            "{name}: {t:.3}B total, published {total}B"
        );
        assert!(
            (a / active - 1.0).abs() < 0.03,
            "{name}: {a:.3}B active, published {active}B"
        );
    }
}

/// candle's Phi-3 attends over every position: a run longer than the window config.json
/// declares is warned about (and still measured).
#[test]
fn phi3_warns_when_a_run_outgrows_its_unapplied_window() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("phi3");
    make(&[out.to_str().unwrap(), "--preset", "tiny", "--arch", "phi3"]);
    let cfg_path = out.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    cfg["sliding_window"] = 16.into();
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let run = |prompt: &str| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_infertop"))
            .args([
                "--model",
                out.to_str().unwrap(),
                "--headless",
                "--requests",
                "1",
            ])
            .args(["-p", prompt, "-n", "4"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let long = run("20");
    assert!(
        long.contains("declares sliding_window 16, which candle's phi3 does not apply"),
        "{long}"
    );
    let short = run("8");
    assert!(!short.contains("declares sliding_window"), "{short}");
}

/// A Gemma 3 of the tiny shape whose window matters: six layers (five sliding, one full, its
/// RoPE scaled by 8) and a window of 8 under prompts of 12 tokens and more.
fn windowed_gemma3() -> infertop::model::ArchConfig {
    use infertop::model::config::Gemma;
    use infertop::model::{presets, Arch};
    let tiny = (presets::find("tiny").unwrap().config)();
    let mut cfg = presets::with_arch(tiny, Arch::Gemma3);
    cfg.num_hidden_layers = 6;
    cfg.sliding_window = Some(8);
    cfg.gemma = Gemma::published(Arch::Gemma3, 6, cfg.head_dim);
    // Linear RoPE scaling on the full layer, as Gemma 3 4B and larger have.
    if let Some(g) = cfg.gemma.as_mut() {
        g.rope_linear_factor = Some(8.0);
    }
    cfg
}

/// The GGUF make-model writes (f32) is the same model as the directory it writes from the same
/// seed: llama's q/k rows permuted for interleaved RoPE, Gemma's norms stored as `1 + w`, Phi-3
/// through candle's quantized phi3 and Gemma through our own. Same greedy ids, logits within
/// rounding.
#[test]
fn gguf_f32_is_the_same_model_as_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let check = |arch: &str, hf: &mut model::CausalLm, gguf: &mut model::CausalLm| {
        let (ids_hf, logits_hf) = greedy(hf, &PROMPT, 12);
        let (ids_gguf, logits_gguf) = greedy(gguf, &PROMPT, 12);
        let worst = logits_hf
            .iter()
            .zip(&logits_gguf)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-3, "{arch}: prefill logits differ by {worst}");
        assert_eq!(ids_hf, ids_gguf, "{arch}: greedy ids");
    };
    for arch in ["llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"] {
        let hf_dir = dir.path().join(arch);
        let gguf = dir.path().join(format!("{arch}.gguf"));
        make(&[hf_dir.to_str().unwrap(), "--arch", arch, "--seed", "3"]);
        make(&[
            gguf.to_str().unwrap(),
            "--arch",
            arch,
            "--seed",
            "3",
            "--gguf",
            "--gguf-type",
            "f32",
        ]);
        let mut a = load(&ModelSpec::HfDir(hf_dir));
        let mut b = load(&ModelSpec::Gguf(gguf));
        assert_eq!(b.info.arch, arch);
        assert_eq!(a.info.params, b.info.params, "{arch}: parameters");
        assert_eq!(
            (a.info.kv_bytes_per_token, a.info.kv_window),
            (b.info.kv_bytes_per_token, b.info.kv_window),
            "{arch}: KV cache"
        );
        assert_eq!(b.info.kv_window.is_some(), arch.starts_with("gemma"));
        check(arch, &mut a.model, &mut b.model);
    }
    // Five sliding layers and one full, with a window the prompt outgrows.
    let cfg = windowed_gemma3();
    let tensors = infertop::model::synthetic::build_tensors(
        &cfg,
        3,
        DType::F32,
        &Device::Cpu,
        &mut |_, _, _| true,
    )
    .unwrap();
    let vb = candle_nn::VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    let mut hf = model::CausalLm::load(&cfg, vb, DType::F32, &Device::Cpu).unwrap();
    let path = dir.path().join("windowed.gguf");
    let tk = infertop::model::tokenizer::train_bpe(2048).unwrap();
    infertop::model::gguf::write_synthetic(
        &cfg,
        3,
        infertop::model::gguf::GgufType::F32,
        &tk,
        &path,
    )
    .unwrap();
    let mut gguf = load(&ModelSpec::Gguf(path));
    assert_eq!(gguf.info.layers, 6);
    check("windowed gemma3", &mut hf, &mut gguf.model);
}
