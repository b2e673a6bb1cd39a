//! `--determinism`: the same prompts alone and then N at once, each prompt's two outputs
//! compared. Against an in-process server whose truth the test sets (it changes chosen tokens
//! of chosen prompts only while other requests are in flight, and says which it changed), the
//! client must find exactly those, at those tokens, and exit 3; against an honest one, none
//! and exit 0. Against upstream llama.cpp's `llama-server` (when installed), what holds
//! whatever the server does: every prompt compared, the counts adding up, every divergence
//! within the outputs.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/determinism_server.rs"]
mod determinism_server;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::real_server::{self, infertop, json_lines, one_at_a_time};
use determinism_server::Truth;
use serde_json::Value;

/// `prompt 0` … `prompt N-1`, one per line, in `dir`.
fn prompt_file(dir: &Path, n: u64) -> PathBuf {
    let path = dir.join("prompts.txt");
    let text: String = (0..n).map(|i| format!("prompt {i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn truth(flip: &[(u64, usize)], cut: &[(u64, usize)]) -> Truth {
    Truth {
        flip: flip.iter().copied().collect(),
        cut: cut.iter().copied().collect(),
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(15),
    }
}

/// The summary a `--format json` run printed last on stdout.
fn summary_of(stdout: &str) -> Value {
    json_lines(stdout)
        .into_iter()
        .rev()
        .find(|v| v.get("divergences").is_some())
        .unwrap_or_else(|| panic!("no summary on stdout:\n{stdout}"))
}

/// (prompt, kind, token) of each divergence the summary names, in order.
fn divergences(summary: &Value) -> Vec<(u64, String, u64)> {
    summary["divergences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["index"].as_u64().unwrap(),
                d["kind"].as_str().unwrap().to_string(),
                d["at_token"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Under load the server changes prompt 1's token 4 and prompt 3's token 6, and ends prompt
/// 2's output after 5 tokens: the client finds those three and no other, at those tokens,
/// says so in its record (each request's pass, the `determinism` line before the footer) and
/// in `report`, and exits 3.
#[test]
fn changes_under_load_are_found_where_the_server_made_them() {
    let flip = [(1, 4), (3, 6)];
    let cut = [(2, 5)];
    let server = determinism_server::start(truth(&flip, &cut)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let prompts = prompt_file(dir.path(), 8);
    let record = dir.path().join("run.jsonl");
    let (code, stdout, stderr) = infertop(&[
        "--endpoint",
        &server.url,
        "--determinism",
        "--concurrency",
        "4",
        "--requests",
        "8",
        "--prompt-file",
        prompts.to_str().unwrap(),
        "-n",
        "12",
        "--headless",
        "--format",
        "json",
        "--record",
        record.to_str().unwrap(),
    ]);
    // What the server did (the first wave of the loaded pass has all four in flight).
    let mut injected = server.injected.lock().unwrap().clone();
    injected.sort();
    assert_eq!(
        injected,
        [(1, 4, "flip"), (2, 5, "cut"), (3, 6, "flip")],
        "{stderr}"
    );
    assert_eq!(code, Some(3), "{stderr}");
    let s = summary_of(&stdout);
    assert_eq!(
        (
            &s["prompts"],
            &s["compared"],
            &s["identical"],
            &s["differ"],
            &s["length_only"],
            &s["not_compared"]
        ),
        (
            &Value::from(8),
            &Value::from(8),
            &Value::from(5),
            &Value::from(2),
            &Value::from(1),
            &Value::from(0)
        ),
        "{s}"
    );
    assert_eq!(
        divergences(&s),
        [
            (1, "tokens".into(), 4),
            (2, "length".into(), 5),
            (3, "tokens".into(), 6)
        ]
    );
    // Token 4 of prompt 1 is ` w…` alone and ` X…` under load: the excerpts part after
    // the space they share.
    let d1 = &s["divergences"][0];
    let alone_token = determinism_server::token(1, 4);
    assert!(d1["before"].as_str().unwrap().ends_with(' '), "{d1}");
    assert!(
        d1["alone"].as_str().unwrap().starts_with(&alone_token[1..]),
        "{d1}"
    );
    assert!(d1["loaded"].as_str().unwrap().starts_with('X'), "{d1}");
    let d2 = &s["divergences"][1];
    assert_eq!(
        (&d2["alone_tokens"], &d2["loaded_tokens"]),
        (&Value::from(12), &Value::from(5))
    );
    assert_eq!(d2["loaded"], "", "{d2}");
    assert!(
        stderr.contains("3 of 8 outputs changed under load (exit 3)"),
        "{stderr}"
    );

    // Both passes sent the same prompts, greedily, with one seed.
    let bodies = server.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 16);
    let mut by_prompt: HashMap<String, usize> = HashMap::new();
    for b in &bodies {
        assert_eq!(b["temperature"], 0, "{b}");
        assert_eq!(b["seed"], 0, "{b}");
        *by_prompt
            .entry(b["prompt"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(by_prompt.len(), 8);
    assert!(by_prompt.values().all(|&n| n == 2), "{by_prompt:?}");

    // The record: each request with its pass; the comparison, then the footer.
    let text = std::fs::read_to_string(&record).unwrap();
    let lines = json_lines(&text);
    let passes: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "request")
        .map(|l| l["origin"]["pass"].as_str().unwrap())
        .collect();
    assert_eq!(passes.len(), 16);
    assert!(
        passes[..8].iter().all(|p| *p == "concurrency 1"),
        "{passes:?}"
    );
    assert!(
        passes[8..].iter().all(|p| *p == "concurrency 4"),
        "{passes:?}"
    );
    let n = lines.len();
    assert_eq!(lines[n - 2]["type"], "determinism");
    assert_eq!(lines[n - 2]["differ"], 2);
    assert_eq!(lines[n - 1]["type"], "footer");
    let (code, report, stderr) = infertop(&["report", record.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        report.contains("**DIFFERENT**: 3 of 8 outputs changed at concurrency 4 (2 in a token, 1 in length only); the first at prompt 1, token 4"),
        "{report}"
    );
    assert!(report.contains("| 2 | length | 5 | 12 / 5 |"), "{report}");
    // JSON: the summary object, its analysis, and the comparison under its own key.
    let (code, json, stderr) = infertop(&["report", record.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(v["analysis"].is_object(), "{json}");
    assert_eq!(v["determinism"]["differ"], lines[n - 2]["differ"], "{json}");
    eprintln!(
        "{}",
        &report[report.find("\n## Determinism").unwrap_or(0)..]
    );
}

/// An honest server: every output the same alone and under load, exit 0, and the markdown
/// says so.
#[test]
fn an_honest_server_has_no_difference() {
    let server = determinism_server::start(truth(&[], &[])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let prompts = prompt_file(dir.path(), 5);
    let (code, stdout, stderr) = infertop(&[
        "--endpoint",
        &server.url,
        "--determinism",
        "--concurrency",
        "3",
        "--prompt-file",
        prompts.to_str().unwrap(),
        "-n",
        "8",
        "--headless",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(server.injected.lock().unwrap().is_empty());
    // Without --requests: four prompts per slot.
    assert!(
        stdout.contains("Same: all 12 outputs identical alone and at concurrency 3"),
        "{stdout}"
    );
    assert!(stdout.contains("| differ in a token | 0 |"), "{stdout}");
    assert!(stdout.contains("| concurrency 3 | 12 | 0 |"), "{stdout}");
    assert!(
        stderr.contains("pass 2 of 2: 12 completed, 0 failed"),
        "{stderr}"
    );
}

/// Where the tests' models are written once per build (made, never downloaded).
fn tiny_gguf() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-servers");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny-q8_0.gguf");
    if !path.exists() {
        let (code, _, stderr) = infertop(&[
            "make-model",
            path.to_str().unwrap(),
            "--preset",
            "tiny",
            "--gguf",
            "--gguf-type",
            "q8_0",
        ]);
        assert_eq!(code, Some(0), "{stderr}");
    }
    path
}

/// Upstream `llama-server` with four slots, 16 prompts alone and then four at once, its
/// prompt cache off (`cache_prompt: false`: the second pass would otherwise read the first's
/// prompts from it, which changes outputs by itself): whatever it does, every prompt is
/// compared, identical + changed adds up to the compared, each divergence lies within its
/// outputs, and the exit code says whether any changed. What it found is printed
/// (`--nocapture`).
#[test]
fn llama_server_outputs_are_compared_alone_and_under_load() {
    let _one = one_at_a_time();
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let gguf = tiny_gguf();
    let server = real_server::llama_server(&bin, &gguf, &["-np", "4"]);
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("llama.jsonl");
    let common = [
        "--endpoint",
        &server.url,
        "--determinism",
        "--concurrency",
        "4",
        "--requests",
        "16",
        "-p",
        "64",
        "-n",
        "32",
        "--extra-body",
        r#"{"cache_prompt": false}"#,
        "--headless",
    ];
    let mut args = common.to_vec();
    args.extend(["--format", "json", "--record", record.to_str().unwrap()]);
    let (code, stdout, stderr) = infertop(&args);
    let s = summary_of(&stdout);
    let (compared, identical, differ, length) = (
        s["compared"].as_u64().unwrap(),
        s["identical"].as_u64().unwrap(),
        s["differ"].as_u64().unwrap(),
        s["length_only"].as_u64().unwrap(),
    );
    assert_eq!(
        (compared, s["not_compared"].as_u64()),
        (16, Some(0)),
        "{stderr}"
    );
    assert_eq!(identical + differ + length, compared, "{s}");
    let changed = differ + length;
    assert_eq!(code, Some(if changed > 0 { 3 } else { 0 }), "{stderr}");
    for d in s["divergences"].as_array().unwrap() {
        let at = d["at_token"].as_u64().unwrap();
        let (a, b) = (
            d["alone_tokens"].as_u64().unwrap(),
            d["loaded_tokens"].as_u64().unwrap(),
        );
        assert!(a <= 32 && b <= 32, "{d}");
        match d["kind"].as_str().unwrap() {
            "tokens" => assert!(at < a.min(b), "{d}"),
            _ => assert!(
                at <= a.min(b) && (a != b || d["alone"] != d["loaded"]),
                "{d}"
            ),
        }
    }
    // Every request of both passes completed, each with its pass.
    let lines = json_lines(&std::fs::read_to_string(&record).unwrap());
    let requests: Vec<&Value> = lines.iter().filter(|l| l["type"] == "request").collect();
    assert_eq!(requests.len(), 32);
    for r in &requests {
        assert_eq!(r["output_tokens"], 32, "{r}");
    }
    let (_, report, _) = infertop(&["report", record.to_str().unwrap()]);
    eprintln!(
        "llama-server -np 4, --determinism --concurrency 4:{}",
        &report[report.find("\n## Determinism").unwrap_or(0)..]
    );
}
