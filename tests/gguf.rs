//! GGUF files as downloaded: the tokenizer comes from the file's own `tokenizer.ggml.*` metadata,
//! and the files `make-model --gguf` writes are complete enough for llama.cpp itself.
//!
//! The llama.cpp tests run upstream llama.cpp's own `llama-server` (`INFERTOP_LLAMA_BIN`, the
//! folder `scripts/real-servers.sh` builds it into): its tokenizer and its greedy ids, asked of
//! `/tokenize` and `/completion`. Without it they say so and pass, unless
//! INFERTOP_REQUIRE_REAL=1 (set by CI), where a missing llama.cpp is a failure. The server's
//! measurement end to end is `tests/llama_server.rs`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::real_server;
use infertop::model::gguf::GgufType;
use infertop::model::Arch;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_infertop");

/// Prompts whose greedy continuations start differently on the tiny preset.
const PROMPTS: [&str; 3] = [
    "Tell me about rivers",
    "The mountain",
    "Water flows down to the sea, and the",
];

fn infertop(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn make_gguf(dir: &Path, gguf_type: &str) -> PathBuf {
    make_gguf_arch(dir, "llama", gguf_type)
}

fn make_gguf_arch(dir: &Path, arch: &str, gguf_type: &str) -> PathBuf {
    let out = dir.join(format!("tiny-{arch}-{gguf_type}.gguf"));
    let o = infertop(&[
        "make-model",
        out.to_str().unwrap(),
        "--preset",
        "tiny",
        "--arch",
        arch,
        "--gguf",
        "--gguf-type",
        gguf_type,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The generated ids of each request line a headless run printed.
fn generated_ids(stdout: &[u8]) -> Vec<Vec<u64>> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "request")
        .map(|v| {
            v["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn a_gguf_prompt_needs_no_tokenizer_json() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = make_gguf(dir.path(), "q8_0");
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1, "make-model --gguf writes one file");
    let o = infertop(&[
        "--model",
        gguf.to_str().unwrap(),
        "--prompt",
        "Tell me about rivers",
        "-n",
        "4",
        "--requests",
        "1",
        "--warmup",
        "0",
        "--headless",
        "--record-tokens",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tk = infertop::model::gguf::read_tokenizer(&gguf).unwrap();
    let want = tk
        .encode("Tell me about rivers", false)
        .unwrap()
        .get_ids()
        .len();
    let line = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "request")
        .unwrap();
    assert_eq!(line["prompt_tokens"].as_u64(), Some(want as u64));
    assert!(line["text"].as_str().is_some_and(|t| !t.is_empty()));
}

#[test]
fn a_gguf_without_tokenizer_metadata_says_how_to_pass_one() {
    use candle_core::quantized::{gguf_file, QTensor};
    let dir = tempfile::tempdir().unwrap();
    let full = make_gguf(dir.path(), "f32");
    // The same file without its tokenizer.ggml.* keys.
    let mut f = std::fs::File::open(&full).unwrap();
    let ct = gguf_file::Content::read(&mut f).unwrap();
    let md: Vec<(String, gguf_file::Value)> = ct
        .metadata
        .iter()
        .filter(|(k, _)| !k.starts_with("tokenizer."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let tensors: Vec<(String, QTensor)> = ct
        .tensor_infos
        .keys()
        .map(|name| {
            let t = ct.tensor(&mut f, name, &candle_core::Device::Cpu).unwrap();
            (name.clone(), t)
        })
        .collect();
    let bare = dir.path().join("bare.gguf");
    let mut w = std::fs::File::create(&bare).unwrap();
    let md_refs: Vec<_> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<_> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut w, &md_refs, &t_refs).unwrap();
    drop(w);

    // Synthetic prompts need no tokenizer: the run works.
    let o = infertop(&[
        "--model",
        bare.to_str().unwrap(),
        "-p",
        "8",
        "-n",
        "2",
        "--requests",
        "1",
        "--headless",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Text prompts do: one line naming the file and the flag.
    let o = infertop(&[
        "--model",
        bare.to_str().unwrap(),
        "--prompt",
        "hi",
        "--requests",
        "1",
        "--headless",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bare.gguf: GGUF tokenizer metadata is missing")
            && err.contains("--tokenizer"),
        "{err}"
    );
    // And --tokenizer is the way out.
    let tk = dir.path().join("tk.json");
    infertop::model::tokenizer::train_bpe(2048)
        .unwrap()
        .save(&tk, false)
        .unwrap();
    let o = infertop(&[
        "--model",
        bare.to_str().unwrap(),
        "--prompt",
        "hi",
        "--tokenizer",
        tk.to_str().unwrap(),
        "-n",
        "2",
        "--requests",
        "1",
        "--headless",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// llama.cpp's prompt ids and greedy ids of each of [`PROMPTS`] on `gguf`: its own server, one
/// sequence, the KV cache in f32 and flash attention off (as candle computes attention, so only
/// the matmuls' arithmetic differs), no prompt cache, EOS not stopping it.
fn llama_cpp_greedy(bin: &Path, gguf: &Path, n: usize) -> Vec<(Vec<u64>, Vec<u64>)> {
    let server = real_server::llama_server(
        bin,
        gguf,
        &[
            "-np", "1", "-c", "512", "-t", "2", "-ctk", "f32", "-ctv", "f32", "-fa", "off",
        ],
    );
    PROMPTS
        .iter()
        .map(|prompt| {
            let (status, body) = real_server::post(
                server.port,
                "/tokenize",
                &json!({"content": prompt, "add_special": false}),
            );
            assert_eq!(status, 200, "{body}");
            let ids: Vec<u64> = serde_json::from_value(
                serde_json::from_str::<Value>(&body).unwrap()["tokens"].clone(),
            )
            .unwrap();
            let (status, body) = real_server::post(
                server.port,
                "/completion",
                &json!({"prompt": ids, "n_predict": n, "temperature": 0.0, "top_k": 1,
                        "cache_prompt": false, "ignore_eos": true, "return_tokens": true}),
            );
            assert_eq!(status, 200, "{body}\n{}", server.log_tail(2000));
            let greedy: Vec<u64> = serde_json::from_value(
                serde_json::from_str::<Value>(&body).unwrap()["tokens"].clone(),
            )
            .unwrap();
            assert_eq!(greedy.len(), n, "{body}");
            (ids, greedy)
        })
        .collect()
}

/// infertop's greedy ids of `prompt` on `gguf` (a headless run, as users run it).
fn infertop_greedy(gguf: &Path, prompt: &str, n: usize) -> Vec<u64> {
    let o = infertop(&[
        "--model",
        gguf.to_str().unwrap(),
        "--prompt",
        prompt,
        "-n",
        &n.to_string(),
        "--requests",
        "1",
        "--warmup",
        "0",
        "--headless",
        "--record-tokens",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    generated_ids(&o.stdout).remove(0)
}

/// llama.cpp tokenizes each prompt as infertop does and its greedy ids equal infertop's.
fn assert_llama_cpp_agrees(bin: &Path, gguf: &Path, what: &str) {
    let tk = infertop::model::gguf::read_tokenizer(gguf).unwrap();
    let reference = llama_cpp_greedy(bin, gguf, 12);
    let mut firsts = Vec::new();
    for (prompt, (want_prompt, want_ids)) in PROMPTS.iter().zip(&reference) {
        let ids: Vec<u64> = tk
            .encode(*prompt, false)
            .unwrap()
            .get_ids()
            .iter()
            .map(|&i| u64::from(i))
            .collect();
        assert_eq!(&ids, want_prompt, "{what}: prompt ids of {prompt:?}");
        let got = infertop_greedy(gguf, prompt, 12);
        assert_eq!(&got, want_ids, "{what}: greedy ids of {prompt:?}");
        firsts.push(got[0]);
    }
    firsts.dedup();
    assert!(
        firsts.len() > 1,
        "{what}: prompts should not all continue alike"
    );
}

/// A Gemma 3 of the tiny shape whose window matters: six layers (five sliding, one full) and a
/// window of 8, which the longest prompt and its continuation outgrow; the full layer's RoPE
/// linearly scaled.
fn windowed_gemma3(dir: &Path) -> PathBuf {
    use infertop::model::config::Gemma;
    tiny_gguf(dir, "windowed-gemma3", Arch::Gemma3, GgufType::F32, |cfg| {
        cfg.num_hidden_layers = 6;
        cfg.sliding_window = Some(8);
        cfg.gemma = Gemma::published(Arch::Gemma3, 6, cfg.head_dim);
        // Linear RoPE scaling on the full layers, as Gemma 3 4B and larger have (factor 8).
        if let Some(g) = cfg.gemma.as_mut() {
            g.rope_linear_factor = Some(8.0);
        }
    })
}

/// The tiny preset as `arch`, edited by `edit`, written to `dir` as the GGUF `name` of `ty`
/// with a trained tokenizer.
fn tiny_gguf(
    dir: &Path,
    name: &str,
    arch: Arch,
    ty: GgufType,
    edit: impl FnOnce(&mut infertop::model::config::ArchConfig),
) -> PathBuf {
    let tiny = (infertop::model::presets::find("tiny").unwrap().config)();
    let mut cfg = infertop::model::presets::with_arch(tiny, arch);
    edit(&mut cfg);
    let path = dir.join(format!("{name}.gguf"));
    let tk = infertop::model::tokenizer::train_bpe(2048).unwrap();
    infertop::model::gguf::write_synthetic(&cfg, 0, ty, &tk, &path).unwrap();
    path
}

/// The tiny Phi-3 with another RoPE base, as f32 GGUF.
fn phi3_with_rope_base(dir: &Path, base: f64) -> PathBuf {
    tiny_gguf(dir, "phi3-rope", Arch::Phi3, GgufType::F32, |cfg| {
        cfg.rope_theta = base
    })
}

/// llama.cpp loads the GGUFs make-model writes (llama, qwen2, qwen3, gemma2, gemma3, phi3),
/// tokenizes text as infertop does, and its greedy ids equal infertop's. f32 and f16 weights
/// agree to the last id (the quantized types are compared in
/// `llama_cpp_and_infertop_differ_only_at_near_ties_when_quantized`).
#[test]
fn llama_cpp_loads_the_gguf_and_agrees_on_ids() {
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (arch, gguf_type) in [
        ("llama", "f32"),
        ("llama", "f16"),
        ("qwen2", "f32"),
        ("qwen3", "f32"),
        ("gemma2", "f32"),
        ("gemma3", "f32"),
        ("gemma3", "f16"),
        ("phi3", "f32"),
    ] {
        let gguf = make_gguf_arch(dir.path(), arch, gguf_type);
        assert_llama_cpp_agrees(&bin, &gguf, &format!("{arch} {gguf_type}"));
    }
    // Phi-4's RoPE base (250000; candle's own quantized_phi3 would use 10000).
    let gguf = phi3_with_rope_base(dir.path(), 250_000.0);
    assert_llama_cpp_agrees(&bin, &gguf, "phi3 with RoPE base 250000");
    // Sliding layers, a full one with scaled RoPE, and sequences longer than the window (where
    // candle's own quantized_gemma3 and llama.cpp part ways).
    let gguf = windowed_gemma3(dir.path());
    let tk = infertop::model::gguf::read_tokenizer(&gguf).unwrap();
    let longest = PROMPTS
        .iter()
        .map(|p| tk.encode(*p, false).unwrap().get_ids().len())
        .max()
        .unwrap();
    assert!(longest > 8, "a prompt of {longest} tokens fits the window");
    assert_llama_cpp_agrees(&bin, &gguf, "gemma3 with window 8, RoPE scaled by 8");
}

/// infertop's logits (f32) at each step of `prompt` followed by `forced`, teacher-forced: the
/// logits that chose `forced[i]`, for every i.
fn forced_logits(
    lm: &mut infertop::model::CausalLm,
    prompt: &[u32],
    forced: &[u32],
) -> Vec<Vec<f32>> {
    use candle_core::{Device, Tensor};
    lm.reset();
    let mut out = Vec::new();
    let input = Tensor::from_slice(prompt, (1, prompt.len()), &Device::Cpu).unwrap();
    out.push(
        lm.forward(&input, 0)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap(),
    );
    for (i, &id) in forced.iter().enumerate().take(forced.len() - 1) {
        let input = Tensor::from_slice(&[id], (1, 1), &Device::Cpu).unwrap();
        let logits = lm.forward(&input, prompt.len() + i).unwrap();
        out.push(logits.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    }
    out
}

/// The quantized types (and bf16) against llama.cpp. Both sides round activations before the
/// matrix products (q8_0/q4_0 to 8-bit blocks, k-quants to Q8_K, bf16: llama.cpp rounds the
/// activations to bf16, candle dequantizes the weights and multiplies in f32) and sum the
/// blocks in their own order, so an argmax between two logits closer than that rounding can
/// fall either way; f32 and f16 agree id for id (above). So, teacher-forced along llama.cpp's
/// greedy path: llama.cpp's id is infertop's argmax at nearly every step, and where not, it is
/// a near-tie (within 1.5% of the logit range; measured: at most 3 of 36 steps, at most 0.6%).
#[test]
fn llama_cpp_and_infertop_differ_only_at_near_ties_when_quantized() {
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for arch in ["llama", "qwen3", "gemma3", "phi3"] {
        for gguf_type in ["q8_0", "q4_0", "q4_k_m", "q6_k", "bf16"] {
            let what = format!("{arch} {gguf_type}");
            let gguf = make_gguf_arch(dir.path(), arch, gguf_type);
            let reference = llama_cpp_greedy(&bin, &gguf, 12);
            let mut m = load_gguf(&gguf);
            let (mut steps, mut flips) = (0, 0);
            for (prompt, ids) in &reference {
                let prompt: Vec<u32> = prompt.iter().map(|&i| i as u32).collect();
                let ids: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
                for (step, logits) in forced_logits(&mut m.model, &prompt, &ids)
                    .iter()
                    .enumerate()
                {
                    let max = logits.iter().copied().fold(f32::MIN, f32::max);
                    let min = logits.iter().copied().fold(f32::MAX, f32::min);
                    let gap = max - logits[ids[step] as usize];
                    steps += 1;
                    if gap > 0.0 {
                        flips += 1;
                        assert!(
                            gap <= 0.015 * (max - min),
                            "{what}: step {step}: llama.cpp's id {} is {gap} below infertop's best (logits span {})",
                            ids[step],
                            max - min
                        );
                    }
                }
            }
            assert!(
                flips * 9 <= steps,
                "{what}: llama.cpp's id is not infertop's at {flips} of {steps} steps"
            );
        }
    }
}

/// A Gemma 3 of the tiny shape but `hidden` wide with an MLP of `inter`, as a GGUF of `ty`.
fn gemma3_of_width(dir: &Path, hidden: usize, inter: usize, ty: GgufType) -> PathBuf {
    use infertop::model::config::Gemma;
    let name = format!("gemma3-{hidden}-{inter}-{ty:?}");
    tiny_gguf(dir, &name, Arch::Gemma3, ty, |cfg| {
        cfg.hidden_size = hidden;
        cfg.intermediate_size = inter;
        cfg.head_dim = hidden / cfg.num_attention_heads;
        cfg.gemma = Gemma::published(Arch::Gemma3, cfg.num_hidden_layers, cfg.head_dim);
    })
}

/// A quantized Gemma's prefill of `DENSE_ROWS` tokens or more, where candle would multiply
/// row by row (rows that are not whole 256-value blocks: 288 and 800 here, as Gemma 3 1B's
/// 1,152), multiplies dense f32 matrices dequantized from the file. It computes what the same
/// model computes with those matrices stored as f32: a copy of the file with every layer's
/// matrix widened (the embeddings, also the LM head, which runs on one position, kept) gives
/// the prompt's last logits to float rounding, where candle's quantized kernel, which rounds
/// the activations to 8-bit blocks, is about 1 % of the logits' range away. Where candle
/// repacks the matrices (the tiny shape's 256 and 768), the prefill stays on its kernel.
#[test]
fn a_quantized_gemmas_prefill_is_its_dequantized_matrices_in_f32() {
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};
    let dir = tempfile::tempdir().unwrap();
    let n = infertop::model::gemma::DENSE_ROWS + 8;
    let prompt: Vec<u32> = (0..n as u32).map(|i| (i * 37 + 5) % 1000).collect();
    let last_logits = |path: &Path| -> Vec<f32> {
        let mut m = load_gguf(path);
        let input = Tensor::from_slice(&prompt, (1, n), &Device::Cpu).unwrap();
        let out = m.model.forward(&input, 0).unwrap();
        out.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    };
    for (hidden, inter, ty, dense) in [
        (288, 800, GgufType::Q8_0, true),
        (288, 800, GgufType::Q4KM, true),
        (256, 768, GgufType::Q8_0, false),
    ] {
        let what = format!("{ty:?}, hidden {hidden}, MLP {inter}");
        let gguf = gemma3_of_width(dir.path(), hidden, inter, ty);
        let widened = dir.path().join("widened.gguf");
        rewrite_gguf_tensors(
            &gguf,
            &widened,
            |_| {},
            |name, t| {
                if name.starts_with("blk.") && t.dtype() != GgmlDType::F32 {
                    let values = t.dequantize(&Device::Cpu).unwrap();
                    QTensor::quantize(&values, GgmlDType::F32).unwrap()
                } else {
                    t
                }
            },
        );
        let (prefill, reference) = (last_logits(&gguf), last_logits(&widened));
        let range = reference.iter().copied().fold(f32::MIN, f32::max)
            - reference.iter().copied().fold(f32::MAX, f32::min);
        let worst = prefill
            .iter()
            .zip(&reference)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        if dense {
            assert!(
                worst < 1e-4 * range,
                "{what}: the prefill's logits are up to {worst} from the f32 model's (range {range})"
            );
        } else {
            assert!(
                worst > 1e-3 * range,
                "{what}: the prefill's logits ({worst} from the f32 model's, range {range}) are not candle's quantized kernel's"
            );
        }
    }
}

fn load_gguf(path: &Path) -> infertop::model::Loaded {
    infertop::model::load(
        &infertop::model::ModelSpec::Gguf(path.to_path_buf()),
        &candle_core::Device::Cpu,
        infertop::model::DeviceSpec::Cpu,
        candle_core::DType::F32,
        std::sync::Arc::new(|_: &str, _: u64, _: u64| true),
    )
    .unwrap()
}

/// `--gguf-type q4_k_m` is llama.cpp's mix (file type 15): Q4_K, with Q6_K for the output
/// matrix (the embeddings, when tied) and for `attn_v` and `ffn_down` in the layers llama.cpp's
/// `use_more_bits` picks (of 4: the last two), Q5_K for Phi-3's fused qkv, f32 norms. Every
/// written type loads and decodes.
#[test]
fn gguf_types_are_llama_cpps_and_decode() {
    use candle_core::quantized::{gguf_file, GgmlDType};
    let dir = tempfile::tempdir().unwrap();
    let types = |path: &Path| {
        let mut f = std::fs::File::open(path).unwrap();
        let ct = gguf_file::Content::read(&mut f).unwrap();
        let file_type = ct.metadata["general.file_type"].to_u32().unwrap();
        let types: std::collections::HashMap<String, GgmlDType> = ct
            .tensor_infos
            .iter()
            .map(|(k, v)| (k.clone(), v.ggml_dtype))
            .collect();
        (file_type, types)
    };
    let (file_type, t) = types(&make_gguf_arch(dir.path(), "llama", "q4_k_m"));
    assert_eq!(file_type, 15);
    assert_eq!(t["output.weight"], GgmlDType::Q6K);
    assert_eq!(t["token_embd.weight"], GgmlDType::Q4K);
    for l in 0..4 {
        let more = if l >= 2 {
            GgmlDType::Q6K
        } else {
            GgmlDType::Q4K
        };
        assert_eq!(t[&format!("blk.{l}.attn_v.weight")], more, "layer {l}");
        assert_eq!(t[&format!("blk.{l}.ffn_down.weight")], more, "layer {l}");
        for n in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
            assert_eq!(t[&format!("blk.{l}.{n}.weight")], GgmlDType::Q4K, "{n} {l}");
        }
        assert_eq!(t[&format!("blk.{l}.attn_norm.weight")], GgmlDType::F32);
    }
    let (_, t) = types(&make_gguf_arch(dir.path(), "gemma3", "q4_k_m"));
    assert_eq!(
        t["token_embd.weight"],
        GgmlDType::Q6K,
        "tied: the output matrix"
    );
    let (_, t) = types(&make_gguf_arch(dir.path(), "phi3", "q4_k_m"));
    assert_eq!(t["blk.0.attn_qkv.weight"], GgmlDType::Q5K);
    for (gguf_type, file_type, dtype) in [
        ("q6_k", 18, "q6k"),
        ("bf16", 32, "bf16"),
        ("q4_k_m", 15, "q4k"),
    ] {
        let path = make_gguf_arch(dir.path(), "qwen3", gguf_type);
        assert_eq!(types(&path).0, file_type, "{gguf_type}");
        let mut m = load_gguf(&path);
        assert_eq!(m.info.dtype, dtype, "{gguf_type}: the type of most bytes");
        let prompt = [5u32, 17, 99, 250, 3];
        let ids: Vec<u32> = (0..4).map(|i| i * 100).collect();
        let logits = forced_logits(&mut m.model, &prompt, &ids);
        assert_eq!(logits.len(), 4);
        assert!(
            logits.iter().flatten().all(|v| v.is_finite()),
            "{gguf_type}"
        );
    }
}

/// A copy of the GGUF at `src` with its metadata edited by `edit`.
fn rewrite_gguf(
    src: &Path,
    dst: &Path,
    edit: impl Fn(&mut Vec<(String, candle_core::quantized::gguf_file::Value)>),
) {
    rewrite_gguf_tensors(src, dst, edit, |_, t| t);
}

/// A copy of the GGUF at `src` with its metadata edited by `edit` and each tensor mapped by
/// `map` (its name, its stored value).
fn rewrite_gguf_tensors(
    src: &Path,
    dst: &Path,
    edit: impl Fn(&mut Vec<(String, candle_core::quantized::gguf_file::Value)>),
    map: impl Fn(&str, candle_core::quantized::QTensor) -> candle_core::quantized::QTensor,
) {
    use candle_core::quantized::{gguf_file, QTensor};
    let mut f = std::fs::File::open(src).unwrap();
    let ct = gguf_file::Content::read(&mut f).unwrap();
    let mut md: Vec<(String, gguf_file::Value)> = ct
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    edit(&mut md);
    let tensors: Vec<(String, QTensor)> = ct
        .tensor_infos
        .keys()
        .map(|name| {
            let t = ct.tensor(&mut f, name, &candle_core::Device::Cpu).unwrap();
            (name.clone(), map(name, t))
        })
        .collect();
    let mut w = std::fs::File::create(dst).unwrap();
    let md_refs: Vec<_> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<_> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut w, &md_refs, &t_refs).unwrap();
}

/// A Phi-3 GGUF infertop would compute wrongly (here RoPE over 32 of 64 dimensions, as
/// Phi-4-mini's partial rotary) is refused in one line that says why, not run.
#[test]
fn a_phi3_gguf_candle_would_compute_wrongly_is_refused() {
    use candle_core::quantized::gguf_file::Value as V;
    let dir = tempfile::tempdir().unwrap();
    let good = make_gguf_arch(dir.path(), "phi3", "q8_0");
    let bad = dir.path().join("partial-rotary.gguf");
    rewrite_gguf(&good, &bad, |md| {
        for (k, v) in md.iter_mut() {
            if k == "phi3.rope.dimension_count" {
                *v = V::U32(32);
            }
        }
    });
    let run = |p: &Path| {
        infertop(&[
            "--model",
            p.to_str().unwrap(),
            "-p",
            "4",
            "-n",
            "2",
            "--requests",
            "1",
            "--headless",
        ])
    };
    let o = run(&good);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&bad);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("partial-rotary.gguf: Phi-3 GGUF rotating 32 of 64 dimensions per head")
            && err.contains("without LongRoPE"),
        "{err}"
    );
}
