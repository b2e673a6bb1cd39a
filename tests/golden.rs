//! infertop against Hugging Face transformers: the fixtures under tests/fixtures/golden were
//! written by transformers' `save_pretrained`, and their golden.json holds the prompt ids and the
//! greedy ids transformers produced (scripts/make_golden_fixtures.py). Loading a directory the
//! way a run does must give the same ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor, D};
use infertop::model::{self, DeviceSpec, ModelSpec};
use serde_json::Value;

/// The fixtures whose architecture infertop loads: every one in tests/fixtures/golden.
const SUPPORTED: &[&str] = &[
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "phi3",
    "mixtral",
    "qwen3_moe",
    "gemma2",
    "gemma3",
    "gemma3_vision",
];

/// Prefill logits may differ from torch's by float rounding only. Measured: at most 1.4e-5 (logits
/// are a few units in size); reading `rms_norm_eps` as 1e-6 instead of 1e-5 moves them by 4e-4
/// or more, a wrong `rope_theta` by whole units. Greedy ids are safe from rounding: every argmax
/// in golden.json is ahead of the runner-up by more than 1e-2.
const LOGIT_TOLERANCE: f32 = 2e-4;

struct Prompt {
    text: String,
    ids: Vec<u32>,
    greedy: Vec<u32>,
    prefill_logits: Vec<f32>,
}

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/golden")
        .join(name)
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("a list of ids")
        .iter()
        .map(|x| u32::try_from(x.as_u64().expect("an id")).expect("an id fits u32"))
        .collect()
}

fn golden(dir: &Path) -> (String, Vec<Prompt>) {
    let text = std::fs::read_to_string(dir.join("golden.json")).expect("golden.json");
    let v: Value = serde_json::from_str(&text).expect("golden.json is JSON");
    let arch = v["arch"].as_str().expect("arch").to_string();
    let prompts = v["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .map(|p| Prompt {
            text: p["text"].as_str().expect("text").to_string(),
            ids: ids(&p["ids"]),
            greedy: ids(&p["greedy"]),
            prefill_logits: p["prefill_logits"]
                .as_array()
                .expect("prefill_logits")
                .iter()
                .map(|x| x.as_f64().expect("a logit") as f32)
                .collect(),
        })
        .collect();
    (arch, prompts)
}

/// Greedy decoding as a run does it: prefill at position 0, then one token per step.
fn greedy(lm: &mut model::CausalLm, prompt: &[u32], n: usize) -> (Vec<u32>, Vec<f32>) {
    lm.reset();
    let input = Tensor::from_slice(prompt, (1, prompt.len()), &Device::Cpu).unwrap();
    let logits = lm.forward(&input, 0).unwrap();
    assert_eq!(
        logits.dims(),
        &[1, logits.dim(1).unwrap()],
        "(batch, vocab)"
    );
    let prefill_logits = logits.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let mut next = logits.argmax_keepdim(D::Minus1).unwrap();
    let mut out = vec![next.to_vec2::<u32>().unwrap()[0][0]];
    for i in 1..n {
        let logits = lm.forward(&next, prompt.len() + i - 1).unwrap();
        next = logits.argmax_keepdim(D::Minus1).unwrap();
        out.push(next.to_vec2::<u32>().unwrap()[0][0]);
    }
    (out, prefill_logits)
}

fn check(name: &str) {
    check_dir(name, &fixture_dir(name), name);
}

/// The fixture `name`'s golden.json against the model directory `dir`, which infertop loads as
/// `arch`.
fn check_dir(name: &str, dir: &Path, arch_loaded: &str) {
    let (arch, prompts) = golden(&fixture_dir(name));
    assert_eq!(arch, name, "{name}: golden.json names its fixture");
    assert!(prompts.len() >= 4, "{name}: golden.json has its prompts");

    let spec = ModelSpec::parse(dir.to_str().unwrap(), 0).unwrap();
    let progress: model::Progress = Arc::new(|_: &str, _: u64, _: u64| true);
    let mut loaded = model::load(&spec, &Device::Cpu, DeviceSpec::Cpu, DType::F32, progress)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(loaded.info.arch, arch_loaded);
    let tokenizer = model::tokenizer::load(&dir.join("tokenizer.json")).unwrap();

    for p in &prompts {
        let enc = tokenizer.encode(p.text.as_str(), false).unwrap();
        assert_eq!(enc.get_ids(), p.ids, "{name}: prompt ids of {:?}", p.text);
        let (got, logits) = greedy(&mut loaded.model, &p.ids, p.greedy.len());
        assert_eq!(logits.len(), p.prefill_logits.len(), "{name}: vocab size");
        let worst = logits
            .iter()
            .zip(&p.prefill_logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst < LOGIT_TOLERANCE,
            "{name}: prefill logits of {:?} differ from transformers' by up to {worst}",
            p.text
        );
        assert_eq!(got, p.greedy, "{name}: greedy ids of {:?}", p.text);
    }
}

#[test]
fn llama_matches_transformers() {
    check("llama");
}

#[test]
fn mistral_matches_transformers() {
    check("mistral");
}

#[test]
fn qwen2_matches_transformers() {
    check("qwen2");
}

#[test]
fn qwen3_matches_transformers() {
    check("qwen3");
}

#[test]
fn phi3_matches_transformers() {
    check("phi3");
}

#[test]
fn mixtral_matches_transformers() {
    check("mixtral");
}

#[test]
fn qwen3_moe_matches_transformers() {
    check("qwen3_moe");
}

#[test]
fn gemma2_matches_transformers() {
    check("gemma2");
}

#[test]
fn gemma3_matches_transformers() {
    check("gemma3");
}

/// Gemma3ForConditionalGeneration as transformers 5.24 saves it (text tower under
/// `language_model.model.`, a tiny vision tower beside it): the text model is read, the vision
/// tower ignored. Its text weights are the gemma3 fixture's (same seed, same order of draws), so
/// its ids are too.
#[test]
fn gemma3_with_vision_matches_transformers() {
    check_dir("gemma3_vision", &fixture_dir("gemma3_vision"), "gemma3");
    let (_, wrapped) = golden(&fixture_dir("gemma3_vision"));
    let (_, plain) = golden(&fixture_dir("gemma3"));
    let greedy = |p: &[Prompt]| p.iter().map(|p| p.greedy.clone()).collect::<Vec<_>>();
    assert_eq!(greedy(&wrapped), greedy(&plain));
}

/// The same model in the layout transformers holds in memory (and some versions saved):
/// `model.language_model.`, `model.vision_tower.`, `model.multi_modal_projector.`.
#[test]
fn gemma3_with_vision_in_the_current_layout_matches_transformers() {
    let src = fixture_dir("gemma3_vision");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gemma3_vision");
    std::fs::create_dir(&dir).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let tensors =
        candle_core::safetensors::load(src.join("model.safetensors"), &Device::Cpu).unwrap();
    let renamed: std::collections::HashMap<String, Tensor> = tensors
        .into_iter()
        .map(|(name, t)| {
            let name = match name.strip_prefix("language_model.model.") {
                Some(rest) => format!("model.language_model.{rest}"),
                None => format!("model.{name}"),
            };
            (name, t)
        })
        .collect();
    assert!(renamed.contains_key("model.vision_tower.embeddings.patch_embedding.weight"));
    candle_core::safetensors::save(&renamed, dir.join("model.safetensors")).unwrap();
    check_dir("gemma3_vision", &dir, "gemma3");
}

/// Every fixture directory is complete, and the supported ones are each tested above.
#[test]
fn fixtures_are_complete() {
    let root = fixture_dir("");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in &names {
        for f in [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "golden.json",
        ] {
            assert!(root.join(n).join(f).is_file(), "{n}/{f} present");
        }
    }
    for s in SUPPORTED {
        assert!(names.iter().any(|n| n == s), "fixture {s} present");
    }
}
