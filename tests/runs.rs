//! `--runs N --cooldown D` end to end: three runs on the synthetic tiny model, headless, whose
//! record has the three runs apart (their requests, n and summaries), the idle time between
//! them, and a table across runs whose mean, standard deviation and Student-t interval are
//! those this test computes from the per-run values it reads from the record (and `report`
//! prints the same); then three runs against an in-process server whose TTFT grows by a known
//! step from run to run, through `--endpoint`, and `compare` of such records.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::process::Command;
use std::time::Duration;

use assert_cmd::prelude::*;
use serde_json::Value;

fn infertop() -> Command {
    Command::cargo_bin("infertop").unwrap()
}

/// Student's t, 0.975 quantile, 2 degrees of freedom (scipy.stats.t.ppf(0.975, 2)).
const T_2: f64 = 4.302652729911275;

/// numpy's default (linear) percentile.
fn percentile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-9)
}

/// One run of the record: its steady request lines and its `cell_end`.
struct Run {
    requests: Vec<Value>,
    warmup: usize,
    end: Value,
}

/// The record's lines, and its runs (the lines between each `cell` and `cell_end`).
fn runs_of(text: &str) -> (Vec<Value>, Vec<Run>) {
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut runs = Vec::new();
    let mut open: Option<Run> = None;
    for l in &lines {
        match l["type"].as_str().unwrap() {
            "cell" => {
                assert_eq!(l["cell"].as_u64().unwrap() as usize, runs.len());
                open = Some(Run {
                    requests: Vec::new(),
                    warmup: 0,
                    end: Value::Null,
                });
            }
            "request" => {
                let run = open.as_mut().unwrap();
                if l["warmup"].as_bool().unwrap() {
                    run.warmup += 1;
                } else {
                    run.requests.push(l.clone());
                }
            }
            "cell_end" => {
                let mut run = open.take().unwrap();
                run.end = l.clone();
                runs.push(run);
            }
            _ => {}
        }
    }
    (lines, runs)
}

/// The mean, sample sd and 95 % interval (t at 2 df) of three values, as the test computes
/// them.
fn spread3(v: &[f64]) -> (f64, f64, f64, f64) {
    assert_eq!(v.len(), 3);
    let mean = v.iter().sum::<f64>() / 3.0;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let half = T_2 * sd / 3f64.sqrt();
    (mean, sd, mean - half, mean + half)
}

/// The across-runs row of `statistic` in a table's JSON.
fn row<'a>(doc: &'a Value, statistic: &str) -> &'a Value {
    doc["across_runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["statistic"] == statistic)
        .unwrap_or_else(|| panic!("no {statistic} in {doc}"))
}

#[test]
fn three_runs_are_three_cells_of_the_record_and_the_spread_is_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("runs.jsonl");
    let out = infertop()
        .args([
            "--headless",
            "--runs",
            "3",
            "--cooldown",
            "1s",
            "--requests",
            "5",
            "--warmup",
            "1",
            "-p",
            "8",
            "-n",
            "4",
            "--no-telemetry",
            "--format",
            "json",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // stdout: each run's request lines, then the table across runs.
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (doc, requests) = lines.split_last().unwrap();
    assert_eq!(doc["type"], "runs");
    assert_eq!(requests.len(), 15);
    assert!(requests.iter().all(|r| r["type"] == "request"));
    for k in 1..=3 {
        assert!(
            stderr.contains(&format!("infertop: run {k}/3: n 4, ")),
            "{stderr}"
        );
    }

    let text = std::fs::read_to_string(&record).unwrap();
    let (lines, runs) = runs_of(&text);
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[1]["type"], "sweep");
    assert_eq!(lines[1]["repeat"]["runs"], 3);
    assert_eq!(lines[1]["repeat"]["cooldown_s"], 1.0);
    assert_eq!(lines.last().unwrap()["type"], "footer");
    // Three repetitions, each with its own warmup and n.
    assert_eq!(runs.len(), 3);
    for (k, run) in runs.iter().enumerate() {
        assert_eq!(run.warmup, 1, "run {k}");
        assert_eq!(run.requests.len(), 4, "run {k}");
        assert_eq!(run.end["status"], "ok");
        assert_eq!(run.end["summary"]["metrics"]["ttft_s"]["n"], 4);
        assert_eq!(doc["per_run"][k]["n"], 4);
        assert_eq!(doc["per_run"][k]["run"], k + 1);
        // The run's own p50, numpy's over its request lines, is the record's and the table's.
        let ttft: Vec<f64> = run
            .requests
            .iter()
            .map(|r| r["ttft_s"].as_f64().unwrap())
            .collect();
        let p50 = percentile(&ttft, 50.0);
        let summary_p50 = run.end["summary"]["metrics"]["ttft_s"]["p50"]
            .as_f64()
            .unwrap();
        assert!(close(p50, summary_p50), "{p50} vs {summary_p50}");
        assert!(close(
            p50,
            row(doc, "ttft_s.p50")["values"][k].as_f64().unwrap()
        ));
    }
    // The same requests each run (same seed): the same outputs, request by request.
    let hashes = |run: &Run| -> Vec<Value> {
        run.requests
            .iter()
            .map(|r| r["output_hash"].clone())
            .collect()
    };
    assert_eq!(hashes(&runs[0]), hashes(&runs[1]));
    assert_eq!(hashes(&runs[0]), hashes(&runs[2]));
    // The cooldown: at least 1 s from the last end of a run to the first start of the next.
    for k in 1..3 {
        let last_end = runs[k - 1]
            .requests
            .iter()
            .map(|r| r["t_s"].as_f64().unwrap())
            .fold(f64::MIN, f64::max);
        let first = &lines
            .iter()
            .skip_while(|l| !(l["type"] == "cell" && l["cell"] == k))
            .find(|l| l["type"] == "request")
            .unwrap();
        let first_start = first["t_s"].as_f64().unwrap() - first["e2e_s"].as_f64().unwrap();
        assert!(
            first_start - last_end >= 1.0,
            "run {k}: {first_start} - {last_end}"
        );
    }
    let cooldowns: Vec<&Value> = lines.iter().filter(|l| l["event"] == "cooldown").collect();
    assert_eq!(cooldowns.len(), 2);

    // Across runs: the mean, sd and interval of the per-run values the record holds.
    let footer = &lines.last().unwrap()["summary"];
    for (metric, stat) in [
        ("ttft_s", "p50"),
        ("ttft_s", "p99"),
        ("tpot_s", "p90"),
        ("itl_s", "p50"),
        ("e2e_s", "mean"),
    ] {
        let values: Vec<f64> = runs
            .iter()
            .map(|r| r.end["summary"]["metrics"][metric][stat].as_f64().unwrap())
            .collect();
        let (mean, sd, lo, hi) = spread3(&values);
        for table in [doc, footer] {
            let r = row(table, &format!("{metric}.{stat}"));
            assert_eq!(r["n"], 3);
            for (k, v) in values.iter().enumerate() {
                assert!(close(*v, r["values"][k].as_f64().unwrap()), "{r}");
            }
            assert!(close(mean, r["mean"].as_f64().unwrap()), "{r}");
            assert!(close(sd, r["sd"].as_f64().unwrap()), "{r}");
            assert!(close(sd / mean, r["cv"].as_f64().unwrap()), "{r}");
            assert!(close(lo, r["ci_lo"].as_f64().unwrap()), "{r}");
            assert!(close(hi, r["ci_hi"].as_f64().unwrap()), "{r}");
        }
    }
    // Output tok/s per run (the candle engine's: tokens over the sum of E2E), and across.
    let tok_s: Vec<f64> = runs
        .iter()
        .map(|run| {
            let tokens: f64 = run
                .requests
                .iter()
                .map(|r| r["output_tokens"].as_f64().unwrap())
                .sum();
            let busy: f64 = run
                .requests
                .iter()
                .map(|r| r["e2e_s"].as_f64().unwrap())
                .sum();
            tokens / busy
        })
        .collect();
    let r = row(doc, "output_tok_s");
    for (k, v) in tok_s.iter().enumerate() {
        assert!(close(*v, r["values"][k].as_f64().unwrap()), "{r}");
    }
    assert!(close(spread3(&tok_s).0, r["mean"].as_f64().unwrap()));
    // No SLO, no goodput.
    assert!(doc["across_runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["metric"] != "goodput_seq_s"));

    // `report` prints the same table from the record.
    let report = infertop()
        .args(["report", "--format", "json"])
        .arg(&record)
        .output()
        .unwrap();
    assert_eq!(report.status.code(), Some(0));
    let again: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(again["type"], "runs");
    for (a, b) in doc["across_runs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["across_runs"].as_array().unwrap())
    {
        assert_eq!(a["statistic"], b["statistic"]);
        for key in ["mean", "sd", "ci_lo", "ci_hi"] {
            assert!(
                close(a[key].as_f64().unwrap(), b[key].as_f64().unwrap()),
                "{key}: {a} vs {b}"
            );
        }
    }
    let md = infertop().arg("report").arg(&record).output().unwrap();
    let md = String::from_utf8_lossy(&md.stdout).to_string();
    assert!(md.contains("| TTFT p50 (ms) | 3 | "), "{md}");
    assert!(
        md.contains("Student's t at 2 degrees of freedom (t = 4.303)"),
        "{md}"
    );
}

/// Three runs through `--endpoint` against a server whose TTFT is 30, 60 and 90 ms in the
/// first, second and third run (its 4 requests each): each run reads its own, and the spread
/// across runs is theirs. `compare` of the record pools the runs' requests.
#[test]
fn three_runs_against_a_server_read_each_runs_own_ttft() {
    let timing = stream_server::Timing {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(2),
        tokens: 4,
    };
    let url = stream_server::start_stepped(timing, 4, Duration::from_millis(30)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("server.jsonl");
    let out = infertop()
        .args([
            "--headless",
            "--endpoint",
            &url,
            "--served-model",
            "tiny",
            "--runs",
            "3",
            "--requests",
            "4",
            "--warmup",
            "1",
            "-p",
            "8",
            "-n",
            "4",
            "--concurrency",
            "1",
            "--no-telemetry",
            "--format",
            "json",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(doc["type"], "runs");
    let r = row(&doc, "ttft_s.p50");
    assert_eq!(r["n"], 3);
    let mut per_run = Vec::new();
    for k in 0..3 {
        assert_eq!(doc["per_run"][k]["n"], 3, "{doc}");
        assert_eq!(doc["per_run"][k]["params"]["concurrency"], 1);
        let injected = 0.030 * (k + 1) as f64;
        let got = r["values"][k].as_f64().unwrap();
        assert!(
            got >= injected && got < injected + 0.025,
            "run {k}: TTFT p50 {got} against {injected} injected"
        );
        per_run.push(got);
    }
    let (mean, sd, lo, hi) = spread3(&per_run);
    assert!(close(mean, r["mean"].as_f64().unwrap()));
    assert!(close(lo, r["ci_lo"].as_f64().unwrap()));
    assert!(close(hi, r["ci_hi"].as_f64().unwrap()));
    // 30, 60, 90 ms: sd 30 ms, give or take the client's own time.
    assert!((sd - 0.030).abs() < 0.006, "sd {sd}");
    // A closed loop of 1: throughput over the held interval, for each run.
    let tok = row(&doc, "output_tok_s");
    assert_eq!(tok["n"], 3);
    // No cooldown asked: none in the record.
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(!text.contains("\"event\":\"cooldown\""));
    let (_, runs) = runs_of(&text);
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r.requests.len() == 3 && r.warmup == 1));

    // compare: the runs' requests pooled, compared as one run's.
    let cmp = infertop()
        .args(["compare", "--resamples", "200"])
        .arg(&record)
        .arg(&record)
        .output()
        .unwrap();
    let cmp_err = String::from_utf8_lossy(&cmp.stderr).to_string();
    assert_eq!(cmp.status.code(), Some(0), "{cmp_err}");
    assert!(
        cmp_err.contains("3 runs, their steady requests pooled"),
        "{cmp_err}"
    );
    let cmp_out = String::from_utf8_lossy(&cmp.stdout).to_string();
    assert!(
        cmp_out.contains("| requests (warmup) | 12 (3) | 12 (3) |"),
        "{cmp_out}"
    );
}
