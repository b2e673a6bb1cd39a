//! `--cancel`: a seeded share of the steady requests is abandoned as users do (the stream
//! closed at the first token or a time after the send), counted apart from completions and
//! failures, in the record and the summary; and what the server did after is read from its
//! `/metrics`: back at its baseline (an honest server) or not (one that leaks under
//! cancellation). The servers' truth is set by the test (`common::cancel_server`); the same
//! against the real llama.cpp server is in `llama_server.rs`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cancel_server;
use common::real_server::{infertop, json_lines};
use infertop::engine::http::cancel::CancelPlan;
use serde_json::Value;

const SEED: u64 = 3;

/// The steady requests of 40 (2 warmup) that the plan cancels: the truth the run must match.
fn picked(spec: &str) -> BTreeSet<u64> {
    let plan = CancelPlan::parse(spec).unwrap();
    (2..40).filter(|&i| plan.picks(SEED, i)).collect()
}

/// A headless run of 40 requests, 4 in flight, recorded: its record's lines and stderr.
fn run(url: &str, spec: &str, dir: &tempfile::TempDir) -> (Vec<Value>, Value, String) {
    let record = dir.path().join("run.jsonl");
    let seed = SEED.to_string();
    let (code, stdout, stderr) = infertop(&[
        "--endpoint",
        url,
        "--headless",
        "--format",
        "json",
        "--requests",
        "40",
        "--warmup",
        "2",
        "--concurrency",
        "4",
        "-p",
        "8",
        "-n",
        "10",
        "--seed",
        &seed,
        "--served-model",
        "m",
        "--cancel",
        spec,
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let summary = json_lines(&stdout).pop().unwrap();
    let lines = json_lines(&std::fs::read_to_string(&record).unwrap());
    (lines, summary, stderr)
}

fn cancelled(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["event"] == "request_cancelled")
        .collect()
}

/// The requests the seed picks are the ones cancelled, right after their first token; the
/// others complete; nothing fails; the honest server is back at its baseline.
#[test]
fn cancels_the_picked_share_at_the_first_token_and_the_server_comes_back() {
    let server = cancel_server::start(Duration::from_millis(20), 10, false);
    let dir = tempfile::tempdir().unwrap();
    let spec = "share=0.25,after=ttft";
    let want = picked(spec);
    assert!(want.len() >= 4, "{want:?}");
    let (lines, summary, stderr) = run(&server.url, spec, &dir);
    let got: BTreeSet<u64> = cancelled(&lines)
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(got, want, "{stderr}");
    for c in cancelled(&lines) {
        assert!(c["ttft_s"].as_f64().unwrap() > 0.015, "{c}");
        assert_eq!(c["content_chunks"], 1, "{c}");
    }
    let done = lines.iter().filter(|l| l["type"] == "request").count();
    assert_eq!(done, 40 - want.len(), "{stderr}");
    assert_eq!(summary["failed_requests"], 0, "{summary}");
    assert_eq!(summary["cancelled_requests"], want.len(), "{summary}");
    // The steady statistics hold the completed requests alone.
    assert_eq!(
        summary["metrics"]["ttft_s"]["n"],
        38 - want.len(),
        "{summary}"
    );
    let after = &summary["after_cancellation"];
    assert_eq!(after["leaked"], false, "{after}");
    assert_eq!(after["cancelled"], want.len(), "{after}");
    assert_eq!(after["after"]["running"], 0.0, "{after}");
    assert!(after["back_after_s"].as_f64().unwrap() < 2.0, "{after}");
    // The server saw each cancel as its client going away.
    assert_eq!(
        server.cut.load(std::sync::atomic::Ordering::SeqCst),
        want.len()
    );
    let check = lines
        .iter()
        .find(|l| l["event"] == "cancel_check")
        .unwrap_or_else(|| panic!("no cancel_check line"));
    assert_eq!(check["back_after_s"], after["back_after_s"]);
    assert!(
        lines[0]["config"]["cancel"]
            .as_str()
            .is_some_and(|c| c.starts_with("25% of steady requests")),
        "{}",
        lines[0]
    );
}

/// A server that never frees a cancelled request's slot: the run says it did not come back,
/// with its running requests against the baseline; `report` says the same from the record.
#[test]
fn a_server_that_leaks_under_cancellation_is_caught() {
    let server = cancel_server::start(Duration::from_millis(20), 10, true);
    let dir = tempfile::tempdir().unwrap();
    let spec = "share=0.25,after=50ms";
    let want = picked(spec);
    let (lines, summary, stderr) = run(&server.url, spec, &dir);
    assert_eq!(cancelled(&lines).len(), want.len(), "{stderr}");
    for c in cancelled(&lines) {
        // 50 ms into a stream of a token every 20 ms: its first two tokens, at most.
        let chunks = c["content_chunks"].as_u64().unwrap();
        assert!((1..=2).contains(&chunks), "{c}");
        assert!(c["elapsed_s"].as_f64().unwrap() >= 0.05, "{c}");
    }
    let after = &summary["after_cancellation"];
    assert_eq!(after["leaked"], true, "{after}");
    assert!(after["back_after_s"].is_null(), "{after}");
    assert_eq!(after["baseline"]["running"], 0.0, "{after}");
    assert_eq!(after["after"]["running"], want.len() as f64, "{after}");
    assert!(
        stderr.contains("did NOT come back to its baseline"),
        "{stderr}"
    );
    let (code, out, err) = infertop(&["report", dir.path().join("run.jsonl").to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&format!("{} cancelled on purpose", want.len()))
            && out.contains("did NOT come back"),
        "{out}"
    );
}

/// Bad `--cancel` values are one line and exit 2.
#[test]
fn bad_cancel_values_are_refused() {
    for (spec, says) in [
        ("share=2", "outside (0, 1]"),
        ("after=ttft", "no share"),
        ("share=0.1,after=later", "neither ttft nor a duration"),
    ] {
        let (code, _, stderr) = infertop(&[
            "--endpoint",
            "http://127.0.0.1:9",
            "--headless",
            "--cancel",
            spec,
        ]);
        assert_eq!(code, Some(2), "{spec}: {stderr}");
        assert!(
            stderr.contains("--cancel") && stderr.contains(says),
            "{stderr}"
        );
    }
}
