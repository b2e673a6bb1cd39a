//! The binary as users and scripts run it: headless runs, summaries, signals, bad input.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::prelude::*;
use infertop::stats::Summary;

fn infertop() -> Command {
    Command::cargo_bin("infertop").unwrap()
}

fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn headless_run_prints_one_line_per_request_and_a_summary_that_recomputes() {
    let out = infertop()
        .args([
            "--headless",
            "--requests",
            "6",
            "-n",
            "8",
            "-p",
            "16",
            "--warmup",
            "2",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let requests: Vec<_> = lines.iter().filter(|v| v["type"] == "request").collect();
    assert_eq!(requests.len(), 6);
    for (i, r) in requests.iter().enumerate() {
        assert_eq!(r["index"], i as u64);
        assert_eq!(r["warmup"], i < 2);
        assert_eq!(r["prompt_tokens"], 16);
        assert_eq!(r["output_tokens"], 8);
        let ttft = r["ttft_s"].as_f64().unwrap();
        let tpot = r["tpot_s"].as_f64().unwrap();
        let e2e = r["e2e_s"].as_f64().unwrap();
        assert!(ttft > 0.0 && tpot > 0.0);
        // TPOT = (E2E - TTFT) / (G - 1)
        assert!(((e2e - ttft) / 7.0 - tpot).abs() < 1e-12);
    }
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    let steady: Vec<f64> = requests[2..]
        .iter()
        .map(|r| r["ttft_s"].as_f64().unwrap())
        .collect();
    let want = Summary::of(&steady);
    let got = &summary["metrics"]["ttft_s"];
    assert_eq!(got["n"], 4);
    assert_eq!(got["p50"].as_f64().unwrap(), want.p50);
    assert_eq!(got["p99"].as_f64().unwrap(), want.p99);
    assert_eq!(got["max"].as_f64().unwrap(), want.max);
    let tpots: Vec<f64> = requests[2..]
        .iter()
        .map(|r| r["tpot_s"].as_f64().unwrap())
        .collect();
    assert_eq!(
        summary["metrics"]["tpot_s"]["p90"].as_f64().unwrap(),
        Summary::of(&tpots).p90
    );
    // ITL: 4 steady requests x 7 decode steps.
    assert_eq!(summary["metrics"]["itl_s"]["n"], 28);
    assert_eq!(summary["warmup"]["ttft_s"]["n"], 2);
}

#[test]
fn markdown_summary_and_record_file() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("run.jsonl");
    let out = infertop()
        .args([
            "--headless",
            "--requests",
            "3",
            "-n",
            "4",
            "-p",
            "8",
            "--jsonl-steps",
            "--record",
        ])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("| metric | mean | p50 | p90 | p95 | p99 | max | n |"),
        "{text}"
    );
    assert!(text.contains("| TTFT |"));
    let steps = json_lines(&out.stdout)
        .iter()
        .filter(|v| v["type"] == "step")
        .count();
    assert_eq!(steps, 3 * 3);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&rec)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.first().unwrap()["type"], "header");
    assert_eq!(lines.last().unwrap()["type"], "footer");
    assert_eq!(lines.last().unwrap()["stop"], "request_limit");
    assert_eq!(lines.iter().filter(|v| v["type"] == "request").count(), 3);
}

#[test]
fn prompt_text_lengths_and_batches() {
    let out = infertop()
        .args([
            "--headless",
            "--requests",
            "3",
            "-n",
            "3",
            "--batch",
            "2",
            "--prompt",
            "The river was calm in the evening.",
            "--record-tokens",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let r = lines.iter().find(|v| v["type"] == "request").unwrap();
    assert_eq!(r["batch"], 2);
    assert!(
        r["prompt_tokens"].as_u64().unwrap() > 3,
        "the prompt's own length"
    );
    assert_eq!(r["tokens"].as_array().unwrap().len(), 3);
    assert!(r["text"].is_string());
    // Same prompt, greedy: every request generates the same ids.
    let hashes: Vec<_> = lines
        .iter()
        .filter(|v| v["type"] == "request")
        .map(|v| v["output_hash"].clone())
        .collect();
    assert!(hashes.windows(2).all(|w| w[0] == w[1]));

    // Lists cycle per request.
    let out = infertop()
        .args([
            "--headless",
            "--requests",
            "4",
            "-n",
            "2",
            "-p",
            "8,16",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let ps: Vec<u64> = json_lines(&out.stdout)
        .iter()
        .filter(|v| v["type"] == "request")
        .map(|v| v["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(ps, vec![8, 16, 8, 16]);
}

#[test]
fn sigint_in_headless_mode_stops_and_still_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("run.jsonl");
    let child = infertop()
        .args([
            "--headless",
            "-n",
            "64",
            "-p",
            "32",
            "--format",
            "json",
            "--record",
        ])
        .arg(&rec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for a few requests to land in the record.
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&rec)
        .map(|t| t.matches("\"request\"").count())
        .unwrap_or(0)
        < 3
    {
        assert!(t0.elapsed().as_secs() < 60, "no requests recorded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.last().unwrap()["type"], "summary");
    let text = std::fs::read_to_string(&rec).unwrap();
    let footer: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(footer["type"], "footer");
    assert_eq!(footer["stop"], "user_stop");
}

fn expect_usage_error(args: &[&str], dir: Option<&Path>, needle: &str) {
    let mut cmd = infertop();
    cmd.args(args);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line for {args:?}: {err}"
    );
    assert!(err.starts_with("infertop: error: "), "{err}");
    assert!(
        err.contains(needle),
        "{args:?}: `{err}` should mention `{needle}`"
    );
    assert!(!err.contains("panicked"));
}

fn make_tiny(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("tiny");
    let st = infertop().arg("make-model").arg(&out).status().unwrap();
    assert!(st.success());
    out
}

#[test]
fn bad_flags_are_one_line_errors_with_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--headless", "--model", "/no/such/model"],
            "/no/such/model",
        ),
        (
            &["--headless", "--model", "synthetic:huge"],
            "unknown synthetic preset `huge`",
        ),
        (&["--headless", "-n", "0"], "--output-tokens"),
        (&["--headless", "--prompt-tokens=-5"], "--prompt-tokens"),
        (&["--headless", "--batch", "0"], "--batch"),
        (&["--headless", "-p", "512..64"], "inverted"),
        (&["--headless", "-p", "12x"], "not a length"),
        (&["--headless", "--dtype", "f8"], "--dtype"),
        (&["--headless", "--device", "tpu"], "--device"),
        (&["--headless", "--format", "xml"], "--format"),
        (&["--headless", "--slo", "ttft=fast"], "--slo"),
        (
            &["--headless", "-p", "4000", "-n", "200"],
            "exceed the model's 4096 positions",
        ),
        (&["--headless", "--requests", "0"], "--requests"),
        (
            &["--headless", "--prompt-file", "/no/such/prompts.txt"],
            "--prompt-file",
        ),
    ];
    for (args, needle) in cases {
        expect_usage_error(args, None, needle);
    }
    #[cfg(not(feature = "cuda"))]
    expect_usage_error(
        &["--headless", "--device", "cuda"],
        None,
        "built without CUDA",
    );
}

#[test]
fn bad_model_files_are_one_line_errors_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = make_tiny(dir.path());
    let p = |x: &Path| x.to_str().unwrap().to_string();

    // config.json without an architecture.
    let no_arch = dir.path().join("no-arch");
    std::fs::create_dir(&no_arch).unwrap();
    std::fs::write(no_arch.join("config.json"), r#"{"hidden_size": 8}"#).unwrap();
    expect_usage_error(
        &["--headless", "--model", &p(&no_arch)],
        None,
        "names no architecture",
    );

    // An unsupported architecture lists the supported ones.
    let gpt = dir.path().join("gpt2");
    std::fs::create_dir(&gpt).unwrap();
    std::fs::write(
        gpt.join("config.json"),
        r#"{"architectures": ["GPT2LMHeadModel"]}"#,
    )
    .unwrap();
    expect_usage_error(
        &["--headless", "--model", &p(&gpt)],
        None,
        "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM",
    );

    // config.json that is not JSON.
    let bad_json = dir.path().join("bad-json");
    std::fs::create_dir(&bad_json).unwrap();
    std::fs::write(bad_json.join("config.json"), "{not json").unwrap();
    expect_usage_error(
        &["--headless", "--model", &p(&bad_json)],
        None,
        "not valid JSON",
    );

    // A missing tokenizer.json when a text prompt needs it.
    let no_tok = dir.path().join("no-tok");
    std::fs::create_dir(&no_tok).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(tiny.join(f), no_tok.join(f)).unwrap();
    }
    expect_usage_error(
        &["--headless", "--model", &p(&no_tok), "--prompt", "hello"],
        None,
        "tokenizer.json not found",
    );

    // A truncated safetensors file.
    let trunc = dir.path().join("trunc");
    std::fs::create_dir(&trunc).unwrap();
    std::fs::copy(tiny.join("config.json"), trunc.join("config.json")).unwrap();
    let bytes = std::fs::read(tiny.join("model.safetensors")).unwrap();
    std::fs::write(trunc.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    expect_usage_error(&["--headless", "--model", &p(&trunc)], None, "safetensors");

    // A missing tensor is named.
    let missing = dir.path().join("missing");
    std::fs::create_dir(&missing).unwrap();
    std::fs::copy(tiny.join("config.json"), missing.join("config.json")).unwrap();
    let mut tensors =
        candle_core::safetensors::load(tiny.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    tensors.remove("model.layers.2.mlp.up_proj.weight");
    candle_core::safetensors::save(&tensors, missing.join("model.safetensors")).unwrap();
    expect_usage_error(
        &["--headless", "--model", &p(&missing)],
        None,
        "model.layers.2.mlp.up_proj.weight",
    );

    // A file where a directory is expected.
    expect_usage_error(
        &["--headless", "--model", &p(&tiny.join("config.json"))],
        None,
        "pass the directory",
    );

    // An empty prompt file.
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "\n\n").unwrap();
    expect_usage_error(
        &["--headless", "--prompt-file", &p(&empty)],
        None,
        "has no prompts",
    );
}

#[test]
fn presets_lists_shapes_with_memory() {
    let out = infertop().arg("presets").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "tiny",
        "llama-3.2-1b",
        "llama-3-8b",
        "qwen2.5-0.5b",
        "mistral-7b",
    ] {
        assert!(text.contains(&format!("| {name} |")), "{name} in {text}");
    }
    // Llama 3 8B: 8.03B parameters, 16.06e9 bytes = 15.0GiB in bf16.
    assert!(text.contains("8.03B") && text.contains("15.0GiB"), "{text}");
}
