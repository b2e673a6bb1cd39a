//! `infertop compare` on synthetic records with known differences.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{json, Value};

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary is built")
}

/// A deterministic ±4 % jitter.
fn jitter(i: usize) -> f64 {
    let pattern = [
        0.0, 0.6, -0.4, 0.9, -0.8, 0.3, -0.2, 0.7, -0.6, 0.1, 0.5, -0.9, 0.2,
    ];
    1.0 + 0.04 * pattern[i % pattern.len()]
}

/// Writes a record of `n` requests (2 warmup) with TTFT ≈ 50 ms × `ttft_scale`, TPOT ≈ 4 ms ×
/// `tpot_scale`, G = 16; `hash(i)` gives each request's output hash.
fn write_record(
    path: &Path,
    n: usize,
    ttft_scale: f64,
    tpot_scale: f64,
    hash: &dyn Fn(usize) -> String,
) {
    let mut lines = vec![json!({
        "type": "header", "infertop_version": "0.1.0", "record_format": 1,
        "command": ["infertop"],
        "config": {"model": "synthetic:tiny", "device": "cpu", "dtype": "f32", "seed": 0,
                   "prompt_tokens": "128", "output_tokens": "16", "batch": 1, "warmup": 2,
                   "slo": {"ttft_s": null, "tpot_s": null, "e2e_s": null}},
        "machine": {"cpu": "test"},
    })];
    for i in 0..n {
        let ttft = 0.050 * ttft_scale * jitter(i + 3);
        let tpot = 0.004 * tpot_scale * jitter(i);
        let e2e = ttft + 15.0 * tpot;
        lines.push(json!({
            "type": "request", "index": i, "warmup": i < 2, "batch": 1, "prompt_tokens": 128,
            "output_tokens": 16, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e,
            "output_hash": hash(i), "prefill_tok_s": 128.0 / ttft, "decode_tok_s": 1.0 / tpot,
        }));
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write record");
}

fn same_hash(i: usize) -> String {
    format!("{:016x}", i * 7919)
}

fn compare_json(paths: &[&PathBuf]) -> (Option<i32>, Value, String) {
    let out = infertop()
        .arg("compare")
        .args(paths)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json output");
    (
        out.status.code(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verdict(v: &Value, metric: &str) -> String {
    v["pairs"][0]["metrics"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["metric"] == metric))
        .map(|m| m["verdict"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

#[test]
fn a_known_tpot_shift_is_detected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    write_record(&a, 30, 1.0, 1.0, &same_hash);
    write_record(&b, 30, 1.0, 1.5, &same_hash);
    let (code, v, _) = compare_json(&[&a, &b]);
    assert_eq!(code, Some(0), "same outputs: exit 0");
    assert_eq!(verdict(&v, "tpot_s"), "slower");
    assert_eq!(verdict(&v, "ttft_s"), "no_detectable_change");
    assert_eq!(verdict(&v, "e2e_s"), "slower");
    let tpot = v["pairs"][0]["metrics"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["metric"] == "tpot_s"))
        .cloned()
        .expect("tpot row");
    // +50 % at every percentile; the CI of the median difference brackets +2 ms.
    let p50 = tpot["changes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["stat"] == "p50"))
        .expect("p50");
    assert!(
        (p50["change_pct"].as_f64().expect("pct") - 50.0).abs() < 1e-6,
        "{p50}"
    );
    let d = &tpot["median_diff"];
    let (lo, hi) = (d["lo"].as_f64().expect("lo"), d["hi"].as_f64().expect("hi"));
    assert!(lo > 0.0 && lo <= 0.002 && hi >= 0.002, "{d}");
    assert_eq!(d["resamples"], 2000);
    assert_eq!(v["outputs_differ"], false);

    // The other way round it is faster; the markdown says it in words.
    let out = infertop()
        .arg("compare")
        .arg(&b)
        .arg(&a)
        .output()
        .expect("runs");
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("- TPOT: **faster**"), "{md}");
    assert!(
        md.contains("- TTFT: no detectable change at this n"),
        "{md}"
    );
    assert!(md.contains("Same: all 30 requests"), "{md}");
}

#[test]
fn the_same_run_twice_shows_no_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("a.jsonl");
    write_record(&a, 20, 1.0, 1.0, &same_hash);
    let copy = dir.path().join("copy.jsonl");
    std::fs::copy(&a, &copy).expect("copy");
    let (code, v, err) = compare_json(&[&a, &copy]);
    assert_eq!(code, Some(0), "{err}");
    for m in ["ttft_s", "tpot_s", "e2e_s"] {
        assert_eq!(verdict(&v, m), "no_detectable_change", "{m}");
    }
    assert!(err.is_empty(), "no alarm: {err}");
}

#[test]
fn different_outputs_fire_the_alarm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    write_record(&a, 12, 1.0, 1.0, &same_hash);
    // Faster, but requests 5 and 9 generated something else.
    write_record(&b, 12, 1.0, 0.5, &|i| {
        if i == 5 || i == 9 {
            "deadbeefdeadbeef".into()
        } else {
            same_hash(i)
        }
    });
    let (code, v, err) = compare_json(&[&a, &b]);
    assert_eq!(code, Some(3), "outputs differ: exit 3");
    assert_eq!(v["outputs_differ"], true);
    assert_eq!(v["pairs"][0]["outputs"]["differing"], 2);
    assert_eq!(v["pairs"][0]["outputs"]["first_differing"], 5);
    assert!(err.contains("OUTPUTS DIFFER"), "stderr: {err}");

    let out = infertop()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(3));
    let md = String::from_utf8_lossy(&out.stdout);
    let first = md
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        first.contains("!!! OUTPUTS DIFFER: 2 of 12 requests of B"),
        "the alarm comes first: {md}"
    );
}

#[test]
fn compare_usage_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("a.jsonl");
    write_record(&a, 5, 1.0, 1.0, &same_hash);
    let missing = dir.path().join("missing.jsonl");
    let out = infertop()
        .arg("compare")
        .arg(&a)
        .arg(&missing)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing.jsonl") && err.trim().lines().count() == 1,
        "{err}"
    );
    let out = infertop().arg("compare").arg(&a).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let out = infertop()
        .arg("compare")
        .arg(&a)
        .arg(&a)
        .args(["--format", "csv"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}
