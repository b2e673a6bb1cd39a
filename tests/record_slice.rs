//! `infertop report RUN.jsonl --slice DUR`: every statistic per window of run time. Records are
//! written here line by line with known end times, and every window's figures are checked
//! against values computed in this file (numpy's linear percentiles, written out again); a
//! real headless run checks that one window over the whole run is the report's own summary.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;
use serde_json::{json, Value};

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary is built")
}

/// One request of a hand-made record.
#[derive(Clone)]
struct Req {
    /// When it ended (its line's `t_s`).
    t_s: f64,
    index: u64,
    warmup: bool,
    ttft_s: f64,
    e2e_s: f64,
    output_tokens: usize,
    /// Its decode steps' ITLs (step lines before its request line).
    steps: Vec<f64>,
    /// It failed (a `request_failed` line) instead of completing.
    failed: bool,
}

impl Req {
    fn ok(t_s: f64, index: u64, ttft_s: f64, e2e_s: f64, output_tokens: usize) -> Req {
        Req {
            t_s,
            index,
            warmup: false,
            ttft_s,
            e2e_s,
            output_tokens,
            steps: Vec::new(),
            failed: false,
        }
    }

    fn tpot_s(&self) -> Option<f64> {
        (self.output_tokens > 1)
            .then(|| (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) as f64)
    }
}

/// A record of `reqs` (in the order given) whose run ended at `elapsed_s` (`None`: cut off,
/// no footer).
fn record_text(reqs: &[Req], elapsed_s: Option<f64>) -> String {
    let mut lines = vec![json!({
        "type": "header", "infertop_version": "0.1.0", "record_format": 1,
        "config": {"warmup": 2}
    })];
    for r in reqs {
        for (k, itl) in r.steps.iter().enumerate() {
            lines.push(json!({
                "type": "step", "index": r.index, "step": k + 1, "itl_s": itl, "t_s": r.t_s
            }));
        }
        if r.failed {
            lines.push(json!({
                "type": "request_failed", "index": r.index, "warmup": r.warmup,
                "reason": "HTTP 500: boom", "status": 500, "elapsed_s": r.e2e_s, "t_s": r.t_s
            }));
        } else {
            lines.push(json!({
                "type": "request", "index": r.index, "warmup": r.warmup, "batch": 1,
                "prompt_tokens": 16, "output_tokens": r.output_tokens, "ttft_s": r.ttft_s,
                "tpot_s": r.tpot_s(), "e2e_s": r.e2e_s, "output_hash": "0000000000000000",
                "t_s": r.t_s
            }));
        }
    }
    if let Some(e) = elapsed_s {
        lines.push(
            json!({"type": "footer", "stop": "duration_limit", "elapsed_s": e, "summary": {}}),
        );
    }
    lines.iter().map(|l| l.to_string() + "\n").collect()
}

/// numpy.percentile(values, q) with its default `linear` method, written out here apart from
/// the project's: sort, virtual index (n − 1)·q/100, interpolate between the neighbours.
fn numpy_percentile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let idx = (v.len() - 1) as f64 * q / 100.0;
    let lo = idx.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    let g = idx - lo as f64;
    v[lo] + (v[hi] - v[lo]) * g
}

fn close(got: &Value, want: f64, what: &str) {
    let got = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {got}"));
    assert!(
        (got - want).abs() <= 1e-12 * want.abs().max(1e-3),
        "{what}: {got} ≠ {want}"
    );
}

/// A window's summary of one metric against the samples it should cover.
fn check_summary(window: &Value, key: &str, samples: &[f64]) {
    let s = &window[key];
    let at = format!("window {} {key}", window["window"]);
    assert_eq!(s["n"], samples.len(), "{at}: n");
    if samples.is_empty() {
        for stat in ["mean", "p50", "p90", "p99"] {
            assert!(s[stat].is_null(), "{at}: {stat} of nothing is null");
        }
        return;
    }
    close(
        &s["mean"],
        samples.iter().sum::<f64>() / samples.len() as f64,
        &format!("{at} mean"),
    );
    for q in [50.0, 90.0, 95.0, 99.0] {
        close(
            &s[format!("p{q}")],
            numpy_percentile(samples, q),
            &format!("{at} p{q}"),
        );
    }
    close(
        &s["max"],
        samples.iter().copied().fold(f64::MIN, f64::max),
        &format!("{at} max"),
    );
}

/// A soak-like record over 34.5 s: window 0 (0–10 s) has two warmup requests, steady ones
/// with steps and a failure; window 1 has a request that started in window 0; window 2 has
/// nothing; window 3 (30–34.5 s) is partial.
fn soak() -> Vec<Req> {
    let mut reqs = vec![
        Req {
            warmup: true,
            steps: vec![0.5, 0.6],
            ..Req::ok(0.9, 0, 0.8, 0.9, 3)
        },
        Req {
            warmup: true,
            failed: true,
            ..Req::ok(1.2, 1, 0.0, 1.1, 0)
        },
    ];
    // Steady requests 2..=9 in window 0, TTFT and E2E varied, 4 tokens each (3 steps).
    let ttfts = [0.031, 0.029, 0.044, 0.027, 0.030, 0.052, 0.033, 0.028];
    for (k, ttft) in ttfts.iter().enumerate() {
        let i = k as u64 + 2;
        let e2e = ttft + 0.010 * (1.0 + k as f64 * 0.37);
        let steps: Vec<f64> = (0..3)
            .map(|s| (e2e - ttft) / 3.0 + (s as f64 - 1.0) * 1e-4)
            .collect();
        reqs.push(Req {
            steps,
            ..Req::ok(1.5 + k as f64, i, *ttft, e2e, 4)
        });
    }
    reqs.push(Req {
        failed: true,
        ..Req::ok(9.75, 10, 0.0, 0.5, 0)
    });
    // Started at 9.5 s, ended at 10.0 s: window 1's (and exactly on its start).
    reqs.push(Req::ok(10.0, 11, 0.120, 0.500, 8));
    reqs.push(Req::ok(14.25, 12, 0.090, 0.300, 1));
    // Window 3: the run ends at 34.5 s.
    reqs.push(Req::ok(31.0, 13, 0.200, 0.900, 5));
    reqs.push(Req::ok(33.5, 14, 0.210, 0.950, 5));
    reqs
}

fn write_record(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write record");
    path
}

fn slice_out(paths: &[&Path], extra: &[&str]) -> Output {
    infertop()
        .arg("report")
        .args(paths)
        .args(extra)
        .output()
        .expect("runs")
}

fn slice_json(paths: &[&Path], slice: &str) -> Vec<Value> {
    let out = slice_out(paths, &["--slice", slice, "--format", "json"]);
    assert!(
        out.status.success(),
        "report --slice failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON value");
    v.as_array().expect("an array of windows").clone()
}

/// What a window of `[start, end)` should hold, computed from the requests directly.
struct Want {
    requests: usize,
    failed: usize,
    warmup: usize,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    itl: Vec<f64>,
    tokens: usize,
}

fn want(reqs: &[Req], start: f64, end: f64) -> Want {
    let inside: Vec<&Req> = reqs
        .iter()
        .filter(|r| r.t_s >= start && r.t_s < end)
        .collect();
    let steady: Vec<&&Req> = inside.iter().filter(|r| !r.warmup && !r.failed).collect();
    Want {
        requests: steady.len(),
        failed: inside.iter().filter(|r| !r.warmup && r.failed).count(),
        warmup: inside.iter().filter(|r| r.warmup).count(),
        ttft: steady.iter().map(|r| r.ttft_s).collect(),
        tpot: steady.iter().filter_map(|r| r.tpot_s()).collect(),
        e2e: steady.iter().map(|r| r.e2e_s).collect(),
        itl: steady.iter().flat_map(|r| r.steps.clone()).collect(),
        tokens: steady.iter().map(|r| r.output_tokens).sum(),
    }
}

#[test]
fn windows_hold_the_requests_that_ended_in_them_with_numpys_percentiles() {
    let dir = tempfile::tempdir().expect("temp dir");
    let reqs = soak();
    let rec = write_record(dir.path(), "soak.jsonl", &record_text(&reqs, Some(34.5)));
    let windows = slice_json(&[&rec], "10s");
    assert_eq!(windows.len(), 4, "{windows:#?}");
    for (k, w) in windows.iter().enumerate() {
        let start = 10.0 * k as f64;
        let end = (start + 10.0).min(34.5);
        assert_eq!(w["window"], k);
        close(&w["start_s"], start, "start_s");
        close(&w["end_s"], end, "end_s");
        close(&w["length_s"], end - start, "length_s");
        assert_eq!(w["partial"], k == 3, "window {k}");
        let x = want(&reqs, start, end + if k == 3 { 1e-9 } else { 0.0 });
        assert_eq!(w["requests"], x.requests, "window {k}");
        assert_eq!(w["failed"], x.failed, "window {k}");
        assert_eq!(w["warmup"], x.warmup, "window {k}");
        assert_eq!(w["output_tokens"], x.tokens, "window {k}");
        close(
            &w["output_tok_s"],
            x.tokens as f64 / (end - start),
            "output_tok_s",
        );
        close(
            &w["requests_s"],
            x.requests as f64 / (end - start),
            "requests_s",
        );
        check_summary(w, "ttft_s", &x.ttft);
        check_summary(w, "tpot_s", &x.tpot);
        check_summary(w, "e2e_s", &x.e2e);
        check_summary(w, "itl_s", &x.itl);
    }
    // The figures by hand, for the first window: 8 steady, 1 failed, 2 warmup.
    let w0 = &windows[0];
    assert_eq!(
        (
            w0["requests"].as_u64(),
            w0["failed"].as_u64(),
            w0["warmup"].as_u64()
        ),
        (Some(8), Some(1), Some(2))
    );
    // numpy.percentile([0.031, 0.029, 0.044, 0.027, 0.030, 0.052, 0.033, 0.028], [50, 99])
    //   = [0.0305, 0.05144]: sorted, p50 is halfway between 0.030 and 0.031 (index 3.5), p99
    //   at index 6.93 is 0.044 + 0.93 × (0.052 − 0.044).
    close(&w0["ttft_s"]["p50"], 0.0305, "ttft p50");
    close(&w0["ttft_s"]["p99"], 0.05144, "ttft p99");
    assert_eq!(
        w0["itl_s"]["n"], 24,
        "3 steps of 8 steady requests; warmup's left out"
    );
    // The request that ended at exactly 10 s is window 1's.
    assert_eq!(windows[1]["requests"], 2);
    close(&windows[1]["ttft_s"]["p50"], 0.105, "window 1 ttft p50");
    // Window 2: nothing ended there, and it is a row all the same.
    let w2 = &windows[2];
    assert_eq!(w2["requests"], 0);
    assert_eq!(w2["ttft_s"]["n"], 0);
    assert!(w2["ttft_s"]["p50"].is_null());
    assert_eq!(w2["requests_s"], 0.0);
    // Window 3: partial, its rates over its 4.5 s.
    close(&windows[3]["requests_s"], 2.0 / 4.5, "partial requests_s");
}

#[test]
fn markdown_and_csv_have_a_row_per_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    let reqs = soak();
    let rec = write_record(dir.path(), "soak.jsonl", &record_text(&reqs, Some(34.5)));

    let out = slice_out(&[&rec], &["--slice", "10s"]);
    assert!(out.status.success());
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("4 windows of 10 s over 34.5 s of run time (the last partial: 4.5 s)"),
        "{md}"
    );
    assert!(md.contains("in which it ended"), "{md}");
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 5, "the head and a row per window:\n{md}");
    assert!(
        rows[0].contains("TTFT p50") && rows[0].contains("ITL p99") && rows[0].contains("tok/s")
    );
    assert!(
        rows[1].starts_with("| 0–10 | 8 | 1 | 2 | 30.500 | 51.440 |"),
        "{}",
        rows[1]
    );
    assert!(
        rows[3].starts_with("| 20–30 | 0 | 0 | 0 | - | - | - | - | - | - | 0.0 | 0.00 |"),
        "{}",
        rows[3]
    );
    assert!(
        rows[4].starts_with("| 30–34.5* | 2 | 0 | 0 |"),
        "{}",
        rows[4]
    );
    assert!(
        md.contains("* partial: the run ended 4.5 s into this window"),
        "{md}"
    );
    for row in &rows {
        assert!(row.chars().count() <= 120, "wider than 120 columns: {row}");
    }

    let out = slice_out(&[&rec], &["--slice", "10s", "--format", "csv"]);
    assert!(out.status.success());
    let mut csv = csv::Reader::from_reader(out.stdout.as_slice());
    let head: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(head.len(), 11 + 4 * 7);
    for col in [
        "window",
        "start_s",
        "end_s",
        "partial",
        "requests",
        "failed",
        "warmup",
        "output_tok_s",
        "requests_s",
        "ttft_s_p50",
        "tpot_s_p99",
        "itl_s_n",
        "e2e_s_mean",
    ] {
        assert!(head.iter().any(|h| h == col), "no column {col}: {head:?}");
    }
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(&rows[0][col("requests")], "8");
    assert_eq!(
        &rows[0][col("ttft_s_p50")].parse::<f64>().unwrap(),
        &numpy_percentile(&want(&reqs, 0.0, 10.0).ttft, 50.0)
    );
    assert_eq!(&rows[2][col("requests")], "0");
    assert_eq!(&rows[2][col("ttft_s_p50")], "", "no samples: empty");
    assert_eq!(&rows[2][col("ttft_s_n")], "0");
    assert_eq!(&rows[3][col("partial")], "true");
    assert_eq!(&rows[3][col("length_s")], "4.5");
}

#[test]
fn several_records_are_sliced_as_one_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let reqs = soak();
    // The same request numbers in all three, each record's steps its own.
    let a = write_record(dir.path(), "a.jsonl", &record_text(&reqs, Some(34.5)));
    let mut other = reqs.clone();
    for r in &mut other {
        r.ttft_s *= 2.0;
        r.e2e_s *= 2.0;
        for s in &mut r.steps {
            *s *= 2.0;
        }
        r.t_s = (r.t_s + 0.3).min(40.0);
    }
    let b = write_record(dir.path(), "b.jsonl", &record_text(&other, Some(40.0)));
    let windows = slice_json(&[&a, &b], "10s");
    assert_eq!(windows.len(), 4);
    let union: Vec<Req> = reqs.iter().chain(&other).cloned().collect();
    for (k, w) in windows.iter().enumerate() {
        let start = 10.0 * k as f64;
        let x = want(&union, start, start + 10.0);
        assert_eq!(w["requests"], x.requests, "window {k}");
        assert_eq!(w["failed"], x.failed, "window {k}");
        check_summary(w, "ttft_s", &x.ttft);
        check_summary(w, "e2e_s", &x.e2e);
        check_summary(w, "itl_s", &x.itl);
    }
    assert_eq!(windows[3]["partial"], false, "the union ends at 40 s");

    // A third record without step lines: ITL is the others' alone, and the report says so.
    let mut third = reqs.clone();
    for r in &mut third {
        r.steps.clear();
    }
    let c = write_record(dir.path(), "c.jsonl", &record_text(&third, Some(34.5)));
    let windows = slice_json(&[&a, &b, &c], "10s");
    let union: Vec<Req> = reqs.iter().chain(&other).chain(&third).cloned().collect();
    for (k, w) in windows.iter().enumerate() {
        let start = 10.0 * k as f64;
        let x = want(&union, start, start + 10.0);
        assert_eq!(w["requests"], x.requests, "window {k}");
        check_summary(w, "itl_s", &x.itl);
    }
    let out = slice_out(&[&a, &b, &c], &["--slice", "10s"]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("3 records sliced as one run"), "{md}");
    assert!(
        md.contains("ITL per window is over the other records' decode steps only")
            && md.contains("c.jsonl has no step lines"),
        "{md}"
    );
}

#[test]
fn one_window_over_a_real_run_is_the_reports_summary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = dir.path().join("run.jsonl");
    let out = infertop()
        .args([
            "--headless",
            "--requests",
            "8",
            "-n",
            "8",
            "-p",
            "32",
            "--warmup",
            "2",
        ])
        .args(["--jsonl-steps", "--format", "json", "--record"])
        .arg(&rec)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = infertop()
        .arg("report")
        .arg(&rec)
        .args(["--format", "json", "--no-probe"])
        .output()
        .expect("runs");
    assert!(report.status.success());
    let summary: Value = serde_json::from_slice(&report.stdout).expect("JSON");
    let windows = slice_json(&[&rec], "1h");
    assert_eq!(windows.len(), 1);
    let w = &windows[0];
    assert_eq!(w["requests"], 6);
    assert_eq!(w["warmup"], 2);
    assert_eq!(w["failed"], 0);
    assert_eq!(w["partial"], true);
    for key in ["ttft_s", "tpot_s", "itl_s", "e2e_s"] {
        assert_eq!(w[key], summary["metrics"][key], "{key}");
    }
    assert_eq!(w["itl_s"]["n"], 6 * 7);
    assert_eq!(w["output_tokens"], 6 * 8);
}

/// stderr as one line, and the exit code.
fn refused(paths: &[&Path], extra: &[&str]) -> (String, Option<i32>) {
    let out = slice_out(paths, extra);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (err, out.status.code())
}

#[test]
fn bad_slices_and_unsliceable_records_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = write_record(dir.path(), "soak.jsonl", &record_text(&soak(), Some(34.5)));
    for bad in ["0s", "0", "soon", "-5s", "10 parsecs"] {
        let (err, code) = refused(&[&rec], &[&format!("--slice={bad}")]);
        assert_eq!(code, Some(2), "--slice {bad}: {err}");
        assert!(err.contains("--slice"), "{err}");
        assert!(
            err.contains("give a positive duration such as 10s"),
            "{err}"
        );
    }
    let (err, code) = refused(&[&rec], &["--slice", "1us"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("more than 100000 windows; give --slice 1ms or longer"),
        "{err}"
    );
    let (err, code) = refused(&[&rec], &["--slice", "10s", "--format", "llm-d"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--slice: llm-d's report has no windows"),
        "{err}"
    );
    let (err, code) = refused(&[&rec], &["--slice", "10s", "--plot", "x.svg"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--slice") && err.contains("--plot"), "{err}");

    // A sweep's record.
    let sweep = write_record(
        dir.path(),
        "sweep.jsonl",
        "{\"type\":\"header\",\"record_format\":1}\n{\"type\":\"sweep\",\"cells\":[]}\n",
    );
    let (err, code) = refused(&[&sweep], &["--slice", "10s"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("a sweep's record; --slice takes a run's record"),
        "{err}"
    );

    // No requests (a run stopped before its first ended).
    let empty = write_record(dir.path(), "empty-run.jsonl", &record_text(&[], Some(3.0)));
    let (err, code) = refused(&[&empty], &["--slice", "10s"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("empty-run.jsonl: no requests in the record (nothing to slice)"),
        "{err}"
    );

    // Written before request lines carried their time.
    let old = write_record(
        dir.path(),
        "old.jsonl",
        &record_text(&soak(), Some(34.5)).replace(",\"t_s\":", ",\"was_t_s\":"),
    );
    let (err, code) = refused(&[&old], &["--slice", "10s"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot be sliced by time"), "{err}");
}

#[test]
fn a_record_cut_off_ends_at_its_last_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut text = record_text(&soak(), None);
    text.push_str("{\"type\":\"request\",\"index\":99,\"war");
    let rec = write_record(dir.path(), "cut.jsonl", &text);
    let out = slice_out(&[&rec], &["--slice", "10s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("| 30–33.5* | 2 |"), "{md}");
    assert!(md.contains("1 line not whole JSON"), "{md}");
}
