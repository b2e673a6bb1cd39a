//! `infertop report` against records written by real headless runs.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary is built")
}

/// A real headless run on the synthetic tiny model, recorded; returns its stdout.
fn record_run(path: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "--headless",
        "--requests",
        "8",
        "-n",
        "8",
        "-p",
        "32",
        "--warmup",
        "2",
        "--format",
        "json",
        "--record",
    ];
    let p = path.to_str().expect("utf-8 temp path");
    args.push(p);
    args.extend_from_slice(extra);
    let out = infertop().args(&args).output().expect("runs");
    assert!(
        out.status.success(),
        "run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn last_json_line(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .expect("some output");
    serde_json::from_str(line).expect("the last line is JSON")
}

fn report_json(path: &Path, extra: &[&str]) -> Value {
    let out = infertop()
        .arg("report")
        .arg(path)
        .args(["--format", "json", "--no-probe"])
        .args(extra)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json_line(&out.stdout)
}

fn same_summary(printed: &Value, reported: &Value) {
    for key in [
        "requests",
        "warmup_requests",
        "metrics",
        "warmup",
        "resources",
    ] {
        assert_eq!(
            printed[key], reported[key],
            "`{key}` differs between the run and the report"
        );
    }
}

#[test]
fn report_recomputes_the_summary_the_run_printed() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, extra) in [
        ("plain.jsonl", &[][..]),
        ("steps.jsonl", &["--jsonl-steps"][..]),
    ] {
        let rec = dir.path().join(name);
        let out = record_run(&rec, extra);
        let printed = last_json_line(&out.stdout);
        assert_eq!(printed["type"], "summary");
        assert_eq!(printed["requests"], 8);
        let reported = report_json(&rec, &[]);
        same_summary(&printed, &reported);
        // The analysis is there too.
        let a = &reported["analysis"];
        assert_eq!(a["settling"]["warmup_requests_flagged"], 2);
        assert!(a["settling"]["rule"]
            .as_str()
            .is_some_and(|r| r.contains("rolling median")));
    }
}

#[test]
fn truncated_record_still_reads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = dir.path().join("run.jsonl");
    record_run(&rec, &[]);
    let text = std::fs::read_to_string(&rec).expect("record");
    // Cut in the middle of the 5th request line (a crash while writing it).
    let lines: Vec<&str> = text.lines().collect();
    let request_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("\"type\":\"request\""))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(request_lines.len(), 8);
    let cut_line = request_lines[4];
    let mut cut: String = lines[..cut_line].iter().map(|l| format!("{l}\n")).collect();
    cut.push_str(&lines[cut_line][..lines[cut_line].len() / 2]);
    let cut_path = dir.path().join("cut.jsonl");
    std::fs::write(&cut_path, cut).expect("write");

    let reported = report_json(&cut_path, &[]);
    assert_eq!(
        reported["requests"], 4,
        "the 4 whole request lines are read"
    );
    assert_eq!(reported["warmup_requests"], 2);
    assert_eq!(reported["metrics"]["ttft_s"]["n"], 2);
    let rec = infertop::record::reader::read(&cut_path).expect("reads");
    assert_eq!(rec.bad_lines, 1);
    assert!(rec.footer.is_none());
}

#[test]
fn plot_is_a_deterministic_svg_and_slo_gives_goodput() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = dir.path().join("run.jsonl");
    record_run(&rec, &["--slo", "ttft=30s,tpot=10s"]);
    let svg_a = dir.path().join("a.svg");
    let svg_b = dir.path().join("b.svg");
    for svg in [&svg_a, &svg_b] {
        let out = infertop()
            .arg("report")
            .arg(&rec)
            .args(["--no-probe", "--cost-per-hour", "3.6", "--plot"])
            .arg(svg)
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let md = String::from_utf8_lossy(&out.stdout);
        assert!(md.contains("## Warmup and steady state"), "{md}");
        assert!(md.contains("## Goodput"), "{md}");
        assert!(
            md.contains("6 of 6 steady requests (100.0 %) met every SLO"),
            "{md}"
        );
        assert!(md.contains("per million output tokens"), "{md}");
    }
    let a = std::fs::read_to_string(&svg_a).expect("svg");
    let b = std::fs::read_to_string(&svg_b).expect("svg");
    assert_eq!(a, b, "same record, same picture");
    assert!(a.starts_with("<svg"));
    assert!(a.trim_end().ends_with("</svg>"));
    for needle in [
        "TTFT (ms)",
        "TPOT (ms)",
        "CDF",
        "warmup",
        "steady p50",
        "steady p99",
        "request index",
    ] {
        assert!(a.contains(needle), "the plot lacks `{needle}`");
    }

    // The record's own SLO is used when report gets none; --slo overrides it.
    let v = report_json(&rec, &[]);
    assert_eq!(v["analysis"]["goodput"]["slo_from"], "record");
    assert_eq!(v["analysis"]["goodput"]["met"], 6);
    let v = report_json(&rec, &["--slo", "ttft=1us"]);
    assert_eq!(v["analysis"]["goodput"]["slo_from"], "--slo");
    assert_eq!(v["analysis"]["goodput"]["met"], 0);
    assert_eq!(v["analysis"]["goodput"]["goodput_rps"], 0.0);
    // Roofline against a known device; the basis says so.
    let v = report_json(&rec, &["--device-name", "H100"]);
    let basis = v["analysis"]["roofline"]["peak"]["basis"][0]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(basis.contains("H100"), "{basis}");
    let v = report_json(&rec, &["--peak-bw", "100GB/s", "--peak-flops", "1T"]);
    let r = &v["analysis"]["roofline"];
    assert_eq!(r["peak"]["bandwidth"], 100e9);
    let util = r["decode_bw_utilisation"].as_f64().expect("a number");
    let achieved = r["decode_bw_achieved"].as_f64().expect("a number");
    assert!((util - achieved / 100e9).abs() < 1e-12);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope.jsonl");
    let out = infertop()
        .arg("report")
        .arg(&missing)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("nope.jsonl"), "{err}");

    let not_record = dir.path().join("x.jsonl");
    std::fs::write(&not_record, "{\"hello\":1}\n").expect("write");
    let out = infertop()
        .arg("report")
        .arg(&not_record)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an infertop record"));

    let out = infertop()
        .arg("report")
        .arg(&not_record)
        .args(["--peak-bw", "fast"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--peak-bw"));
}
