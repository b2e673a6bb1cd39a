//! `report --format llm-d`: a run's record against the in-process server that reports its
//! own timings, written as llm-d's Benchmark Report v0.2 and checked against that schema's
//! documented fields (the keys each object allows, the ones it requires, the types and the
//! enumerations of units, distributions and sources), and against the server's truth.
#![allow(clippy::unwrap_used)]

#[path = "common/stream_server.rs"]
mod stream_server;

use std::time::Duration;

use assert_cmd::prelude::*;
use serde_json::Value;
use stream_server::{Dialect, Options, Reporting, Timing};

fn infertop() -> std::process::Command {
    std::process::Command::cargo_bin("infertop").unwrap()
}

/// The object's keys are among `allowed` and include `required` (the schema's
/// `additionalProperties: false` and `required`).
fn keys(v: &Value, at: &str, allowed: &[&str], required: &[&str]) {
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("{at}: not an object: {v}"));
    for k in o.keys() {
        assert!(
            allowed.contains(&k.as_str()),
            "{at}: `{k}` is not in the schema"
        );
    }
    for k in required {
        assert!(o.contains_key(*k), "{at}: `{k}` is required");
    }
}

const UNITS: &[&str] = &[
    "count",
    "percent",
    "fraction",
    "ms",
    "s",
    "MB",
    "GB",
    "TB",
    "MiB",
    "GiB",
    "TiB",
    "Mbit/s",
    "Gbit/s",
    "Tbit/s",
    "GiB/s",
    "MB/s",
    "GB/s",
    "TB/s",
    "ms/token",
    "s/token",
    "tokens/s",
    "queries/s",
    "Watts",
];

/// A `Statistics`: `units` (of the enumeration) and `mean` required, every other field a
/// number.
fn statistics(v: &Value, at: &str) {
    keys(
        v,
        at,
        &[
            "units", "mean", "mode", "stddev", "min", "p0p1", "p1", "p5", "p10", "p25", "p50",
            "p75", "p90", "p95", "p99", "p99p9", "max",
        ],
        &["units", "mean"],
    );
    assert!(UNITS.contains(&v["units"].as_str().unwrap()), "{at}: units");
    for (k, x) in v.as_object().unwrap() {
        if k != "units" {
            assert!(x.is_number(), "{at}.{k}: not a number");
        }
    }
}

fn seq_len(v: &Value, at: &str) {
    keys(
        v,
        at,
        &["distribution", "value", "std_dev", "min", "max"],
        &["distribution", "value"],
    );
    let d = v["distribution"].as_str().unwrap();
    assert!(
        ["fixed", "gaussian", "uniform", "other"].contains(&d),
        "{at}: {d}"
    );
    assert!(v["value"].as_f64().unwrap() >= 0.0, "{at}");
}

/// The report against the v0.2 schema's documented fields.
fn check_schema(br: &Value) {
    keys(
        br,
        "report",
        &["version", "run", "scenario", "results"],
        &["run", "results"],
    );
    assert_eq!(br["version"], "0.2");
    let run = &br["run"];
    keys(
        run,
        "run",
        &[
            "uid",
            "eid",
            "cid",
            "pid",
            "time",
            "user",
            "description",
            "keywords",
        ],
        &["uid"],
    );
    assert!(run["uid"].is_string());
    if let Some(t) = run.get("time") {
        keys(t, "run.time", &["start", "end", "duration"], &[]);
        let d = t["duration"].as_str().unwrap();
        assert!(d.starts_with("PT") && d.ends_with('S'), "{d}");
    }
    for k in run["keywords"].as_array().unwrap() {
        assert!(k.is_string());
    }
    let scenario = &br["scenario"];
    keys(scenario, "scenario", &["stack", "load"], &[]);
    for (i, c) in scenario["stack"].as_array().unwrap().iter().enumerate() {
        let at = format!("scenario.stack[{i}]");
        keys(
            c,
            &at,
            &["metadata", "standardized", "native"],
            &["metadata", "standardized", "native"],
        );
        keys(
            &c["metadata"],
            &at,
            &["schema_version", "label", "cfg_id", "description"],
            &["label", "cfg_id"],
        );
        // A generic component: kind, tool and tool_version required, anything else allowed.
        let s = &c["standardized"];
        assert_eq!(s["kind"], "generic", "{at}");
        assert!(
            s["tool"].is_string() && s["tool_version"].is_string(),
            "{at}"
        );
        keys(&c["native"], &at, &["args", "envars", "config"], &[]);
    }
    let load = &scenario["load"];
    keys(
        load,
        "load",
        &["metadata", "standardized", "native"],
        &["metadata", "standardized", "native"],
    );
    keys(
        &load["metadata"],
        "load.metadata",
        &["schema_version", "cfg_id", "description"],
        &[],
    );
    let s = &load["standardized"];
    keys(
        s,
        "load.standardized",
        &[
            "tool",
            "tool_version",
            "parallelism",
            "source",
            "stage",
            "input_seq_len",
            "output_seq_len",
            "prefix",
            "multi_turn",
            "rate_qps",
            "concurrency",
        ],
        &["tool", "tool_version", "source", "input_seq_len"],
    );
    assert!(["random", "sampled", "unknown"].contains(&s["source"].as_str().unwrap()));
    seq_len(&s["input_seq_len"], "input_seq_len");
    if let Some(o) = s.get("output_seq_len") {
        seq_len(o, "output_seq_len");
    }
    if let Some(c) = s.get("concurrency") {
        assert!(c.as_f64().unwrap() >= 1.0);
    }
    keys(
        &load["native"],
        "load.native",
        &["args", "envars", "config"],
        &[],
    );
    assert!(load["native"]["args"].is_object());

    let results = &br["results"];
    keys(
        results,
        "results",
        &[
            "request_performance",
            "observability",
            "profiling",
            "component_health",
        ],
        &[],
    );
    let rp = &results["request_performance"];
    keys(
        rp,
        "request_performance",
        &["aggregate", "time_series"],
        &[],
    );
    let agg = &rp["aggregate"];
    keys(
        agg,
        "aggregate",
        &["requests", "latency", "throughput"],
        &[],
    );
    let req = &agg["requests"];
    keys(
        req,
        "requests",
        &[
            "total",
            "failures",
            "incomplete",
            "input_length",
            "output_length",
        ],
        &["total"],
    );
    assert!(req["total"].is_u64());
    for k in ["input_length", "output_length"] {
        if let Some(v) = req.get(k) {
            statistics(v, k);
        }
    }
    let lat = &agg["latency"];
    keys(
        lat,
        "latency",
        &[
            "time_to_first_token",
            "normalized_time_per_output_token",
            "time_per_output_token",
            "inter_token_latency",
            "request_latency",
        ],
        &[],
    );
    for (k, v) in lat.as_object().unwrap() {
        statistics(v, k);
    }
    let thr = &agg["throughput"];
    keys(
        thr,
        "throughput",
        &[
            "input_token_rate",
            "output_token_rate",
            "total_token_rate",
            "request_rate",
        ],
        &[],
    );
    for (k, v) in thr.as_object().unwrap() {
        statistics(v, k);
    }
}

/// A headless run against a server of 2 slots reporting as vLLM, at concurrency 2: the
/// report is the schema's, and says what the server's truth says.
#[test]
fn a_run_reports_as_llm_d_benchmark_report_v0_2() {
    let server = stream_server::start_reporting(
        Options {
            timing: Timing {
                ttft: Duration::from_millis(40),
                itl: Duration::from_millis(5),
                tokens: 5,
            },
            slots: Some(2),
            reset_route: None,
        },
        Reporting {
            dialect: Dialect::Vllm,
            hop: Duration::from_millis(10),
            cached: 3,
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let out = infertop()
        .args(["--endpoint", &server.url, "--served-model", "m"])
        .args(["--requests", "9", "--warmup", "1", "--concurrency", "2"])
        .args(["-p", "8", "-n", "5", "--headless", "--no-telemetry"])
        .arg("--record")
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = infertop()
        .args(["report", "--format", "llm-d"])
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let br: Value = serde_json::from_str(stdout.trim()).unwrap();
    if let Some(path) = std::env::var_os("INFERTOP_TEST_WRITE_BR") {
        std::fs::write(path, stdout.as_bytes()).unwrap();
    }
    check_schema(&br);

    let agg = &br["results"]["request_performance"]["aggregate"];
    assert_eq!(agg["requests"]["total"], 8, "steady requests: {br}");
    assert_eq!(agg["requests"]["failures"], 0);
    assert_eq!(agg["requests"]["output_length"]["mean"], 5.0);
    let ttft = agg["latency"]["time_to_first_token"]["p50"]
        .as_f64()
        .unwrap();
    assert!(
        (0.045..0.080).contains(&ttft),
        "prefill 40 ms + hop 10 ms: {ttft}"
    );
    let tpot = agg["latency"]["time_per_output_token"]["p50"]
        .as_f64()
        .unwrap();
    assert!((0.004..0.012).contains(&tpot), "{tpot}");
    // Two slots, each about 40 + 4 × 5 + 10 = 70 ms a request: about 28 requests/s.
    let rate = agg["throughput"]["request_rate"]["mean"].as_f64().unwrap();
    assert!((10.0..40.0).contains(&rate), "{rate}");
    let load = &br["scenario"]["load"]["standardized"];
    assert_eq!(
        (load["tool"].as_str(), load["concurrency"].as_u64()),
        (Some("infertop"), Some(2))
    );
    assert_eq!(load["input_seq_len"]["distribution"], "fixed");
    // The split has no place in the format's fields: it is under profiling.
    let split = &br["results"]["profiling"]["infertop"]["ttft_split"];
    assert_eq!(split["requests"], 8);
    assert!((split["prefill_s"]["p50"].as_f64().unwrap() - 0.040).abs() < 1e-9);
    assert_eq!(split["cached_tokens"], 24);
}
