//! `--probe`: a canary lane of small requests beside the load, counted apart. The server's
//! truth is set by the test (`common::stream_server` with one slot: a request waits for the one
//! being served): beside a load that always holds the slot, each canary waits for it, so its
//! TTFT is the wait, while the run's own requests and statistics hold no canary.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::time::Duration;

use common::real_server::{infertop, json_lines};
use serde_json::Value;
use stream_server::{Options, Timing};

#[test]
fn canaries_wait_beside_the_load_and_are_counted_apart() {
    // A request: first token after 5 ms, then one every 5 ms, 20 in all (about 100 ms).
    let server = stream_server::start_with(Options {
        timing: Timing {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(5),
            tokens: 20,
        },
        slots: Some(1),
        reset_route: None,
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let (code, stdout, stderr) = infertop(&[
        "--endpoint",
        &server.url,
        "--served-model",
        "m",
        "--headless",
        "--format",
        "json",
        "--duration",
        "3s",
        "--warmup",
        "0",
        "--concurrency",
        "1",
        "-p",
        "8",
        "-n",
        "20",
        "--probe",
        "every=400ms,prompt=4,output=2",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let summary = json_lines(&stdout).pop().unwrap();
    let lines = json_lines(&std::fs::read_to_string(&record).unwrap());
    let canaries: Vec<&Value> = lines.iter().filter(|l| l["event"] == "canary").collect();
    let requests = lines.iter().filter(|l| l["type"] == "request").count();
    let c = &summary["canary"];
    assert!(canaries.len() >= 5, "{} canaries: {stderr}", canaries.len());
    assert_eq!(c["completed"], canaries.len(), "{c}");
    assert_eq!(c["failed"], 0, "{c}");
    // The run's statistics are its own requests alone.
    assert_eq!(summary["requests"], requests, "{summary}");
    assert_eq!(summary["metrics"]["ttft_s"]["n"], requests, "{summary}");
    // Every canary found the slot taken (the load holds it but for an instant) and waited for
    // the request being served (100 ms; a freed slot may go to the load's next request first):
    // its TTFT is the wait, many times its 5 ms alone.
    let ttft_p50 = c["ttft_s"]["p50"].as_f64().unwrap();
    assert!((0.025..1.0).contains(&ttft_p50), "{c}");
    let record_p50 = {
        let mut t: Vec<f64> = canaries
            .iter()
            .map(|c| c["ttft_s"].as_f64().unwrap())
            .collect();
        t.sort_by(f64::total_cmp);
        let mid = t.len() / 2;
        if t.len() % 2 == 1 {
            t[mid]
        } else {
            (t[mid - 1] + t[mid]) / 2.0
        }
    };
    assert!((record_p50 - ttft_p50).abs() < 1e-12, "{record_p50} {c}");
    assert_eq!(
        lines[0]["config"]["probe"], "every 400ms, prompt 4, output 2",
        "{}",
        lines[0]
    );
    // `report` of the record says the same.
    let (code, out, err) = infertop(&["report", record.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["canary"]["ttft_s"], c["ttft_s"]);
}

#[test]
fn bad_probes_are_refused() {
    for (spec, says) in [
        ("every=1ms", "too short"),
        ("prompt=0", "above 0"),
        ("rate=2", "unknown key `rate`"),
    ] {
        let (code, _, stderr) = infertop(&[
            "--endpoint",
            "http://127.0.0.1:9",
            "--headless",
            "--probe",
            spec,
        ]);
        assert_eq!(code, Some(2), "{spec}: {stderr}");
        assert!(
            stderr.contains("--probe") && stderr.contains(says),
            "{stderr}"
        );
    }
    let (code, _, stderr) = infertop(&[
        "--endpoint",
        "http://127.0.0.1:9",
        "--headless",
        "--api",
        "embeddings",
        "--probe",
        "every=1s",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("generates nothing"), "{stderr}");
}

/// `watch --probe`: the canary alone measures a server the watch does not load: a line per
/// canary (JSON), its summary at the end, and the record's canary events.
#[test]
fn watch_sends_canaries_and_sums_them_up() {
    let server = common::cancel_server::start(Duration::from_millis(5), 4, false);
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("watch.jsonl");
    let metrics = format!("{}/metrics", server.url);
    let (code, stdout, stderr) = infertop(&[
        "watch",
        &metrics,
        "--duration",
        "2s",
        "--interval",
        "500ms",
        "--format",
        "json",
        "--probe",
        "every=200ms,prompt=4,output=2",
        "--probe-model",
        "m",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines = json_lines(&stdout);
    let canaries: Vec<&Value> = lines.iter().filter(|l| l["type"] == "canary").collect();
    assert!(canaries.len() >= 5, "{stdout}{stderr}");
    for c in &canaries {
        // Four tokens 5 ms apart: the first after 5 ms, the end after about 25.
        let ttft = c["ttft_s"].as_f64().unwrap();
        assert!((0.004..0.5).contains(&ttft), "{c}");
        assert!(c["e2e_s"].as_f64().unwrap() >= ttft, "{c}");
    }
    let summary = lines
        .iter()
        .find(|l| l["type"] == "canary_summary")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(summary["completed"], canaries.len(), "{summary}");
    let recorded = std::fs::read_to_string(&record).unwrap();
    let in_record = json_lines(&recorded)
        .iter()
        .filter(|l| l["event"] == "canary")
        .count();
    assert_eq!(in_record, canaries.len());
}
