//! `report --format llm-d`: a run's record and a sweep's against the in-process server that
//! reports its own timings, written as llm-d's Benchmark Report v0.2, validated with a JSON
//! Schema validator against the project's own schema of v0.2
//! (`tests/fixtures/llmd/br_v0_2.schema.json`: required fields, types, integers, enumerations,
//! closed objects), and checked against the server's truth.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::path::Path;
use std::time::Duration;

use assert_cmd::prelude::*;
use serde_json::{json, Value};
use stream_server::{Dialect, Options, Reporting, Timing};

fn infertop() -> std::process::Command {
    std::process::Command::cargo_bin("infertop").unwrap()
}

/// The schema, compiled once per test (format assertions on: a `date-time` must be one).
struct Schema {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl Schema {
    fn load() -> Schema {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llmd/br_v0_2.schema.json");
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        compiler.enable_format_assertions();
        let index = compiler
            .compile(path.to_str().unwrap(), &mut schemas)
            .unwrap_or_else(|e| panic!("{e:#}"));
        Schema { schemas, index }
    }

    /// Why `doc` is not a v0.2 report (`None`: it is one).
    fn errors(&self, doc: &Value) -> Option<String> {
        self.schemas
            .validate(doc, self.index)
            .err()
            .map(|e| format!("{e}"))
    }

    fn check(&self, doc: &Value, what: &str) {
        if let Some(e) = self.errors(doc) {
            panic!("{what} is not a Benchmark Report v0.2:\n{e}\n{doc:#}");
        }
    }
}

/// `report --format llm-d RECORD`, parsed.
fn llm_d(record: &Path) -> Value {
    let out = infertop()
        .args(["report", "--format", "llm-d"])
        .arg(record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(path) = std::env::var_os("INFERTOP_TEST_WRITE_BR") {
        let name = record.file_stem().unwrap().to_string_lossy().to_string();
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(
            Path::new(&path).join(format!("{name}.json")),
            stdout.as_bytes(),
        )
        .unwrap();
    }
    serde_json::from_str(stdout.trim()).unwrap()
}

fn reporting_server(slots: usize) -> String {
    stream_server::start_reporting(
        Options {
            timing: Timing {
                ttft: Duration::from_millis(40),
                itl: Duration::from_millis(5),
                tokens: 5,
            },
            slots: Some(slots),
            reset_route: None,
        },
        Reporting {
            dialect: Dialect::Vllm,
            hop: Duration::from_millis(10),
            cached: 3,
        },
    )
    .unwrap()
    .url
}

/// The schema is applied, not merely loaded: a report it must refuse, one fault at a time
/// (each a way a writer goes wrong: a count as a fraction, a unit v0.2 does not have, a
/// missing required field, a key v0.2 does not have, a bound broken, a wrong version).
#[test]
fn the_schema_refuses_what_v0_2_does_not_allow() {
    let schema = Schema::load();
    let good = json!({
        "version": "0.2",
        "run": { "uid": "u", "time": { "duration": "PT1.5S" }, "keywords": ["infertop"] },
        "scenario": {
            "stack": [{
                "metadata": { "label": "server", "cfg_id": "c" },
                "standardized": { "kind": "generic", "tool": "t", "tool_version": "1", "extra": 1 },
                "native": {}
            }],
            "load": {
                "metadata": { "cfg_id": "c", "description": null },
                "standardized": {
                    "tool": "infertop", "tool_version": "0.1.0", "source": "random", "stage": 0,
                    "input_seq_len": { "distribution": "uniform", "value": 96.5, "min": 64, "max": 128 },
                    "concurrency": 2
                },
                "native": { "args": {}, "config": { "anything": [1, 2] } }
            }
        },
        "results": {
            "request_performance": { "aggregate": {
                "requests": { "total": 8, "failures": 0,
                    "output_length": { "units": "count", "mean": 5.0, "p50": 5 } },
                "latency": { "time_to_first_token": { "units": "s", "mean": 0.05, "p99": 0.07 } },
                "throughput": { "request_rate": { "units": "queries/s", "mean": 28.5 } }
            } },
            "profiling": { "infertop": { "anything": true } }
        }
    });
    assert_eq!(schema.errors(&good), None);
    let faults: [(&str, Value); 10] = [
        (
            "/results/request_performance/aggregate/requests/total",
            json!(8.5),
        ),
        (
            "/results/request_performance/aggregate/latency/time_to_first_token/units",
            json!("sec"),
        ),
        (
            "/results/request_performance/aggregate/latency/time_to_first_token/p99",
            json!("70ms"),
        ),
        (
            "/results/request_performance/aggregate/latency/time_to_first_token/p999",
            json!(0.1),
        ),
        (
            "/scenario/load/standardized/input_seq_len/distribution",
            json!("normal"),
        ),
        ("/scenario/load/standardized/input_seq_len/min", json!(64.5)),
        ("/scenario/load/standardized/source", json!("synthetic")),
        ("/scenario/load/standardized/concurrency", json!(0)),
        (
            "/scenario/stack/0/standardized/kind",
            json!("inference_engine"),
        ),
        ("/version", json!("0.1")),
    ];
    for (pointer, value) in faults {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        bad.pointer_mut(parent).unwrap()[key] = value.clone();
        assert!(
            schema.errors(&bad).is_some(),
            "{pointer} = {value} was let through"
        );
    }
    for pointer in [
        "/run/uid",
        "/scenario/load/standardized/input_seq_len",
        "/results",
    ] {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        bad.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
        assert!(
            schema.errors(&bad).is_some(),
            "without {pointer}: let through"
        );
    }
    let mut bad = good.clone();
    bad["run"]["time"]["start"] = json!("yesterday");
    assert!(
        schema.errors(&bad).is_some(),
        "a start that is no date-time"
    );
    bad["run"]["time"]["start"] = json!("2026-12-05T10:00:00Z");
    assert_eq!(schema.errors(&bad), None);
}

/// A headless run against a server of 2 slots reporting as vLLM, at concurrency 2: the
/// report is valid v0.2, and says what the server's truth says.
#[test]
fn a_run_reports_as_llm_d_benchmark_report_v0_2() {
    let schema = Schema::load();
    let url = reporting_server(2);
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let out = infertop()
        .args(["--endpoint", &url, "--served-model", "m"])
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
    let br = llm_d(&record);
    schema.check(&br, "the run's report");
    assert_eq!(br["version"], "0.2");

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

/// A sweep's record: one report per cell, as a JSON array, each valid v0.2 on its own, its
/// stage the cell's number and its load the cell's.
#[test]
fn a_sweep_reports_one_benchmark_report_per_cell() {
    let schema = Schema::load();
    let url = reporting_server(2);
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("sweep.jsonl");
    let out = infertop()
        .args(["sweep", "--endpoint", &url, "--served-model", "m"])
        .args(["--concurrency", "1,2,4", "-p", "8", "-n", "5"])
        .args(["--warmup", "1", "--repetitions", "6", "--no-telemetry"])
        .arg("--record")
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = llm_d(&record);
    let cells = doc
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {doc}"));
    assert_eq!(cells.len(), 3);
    for (i, (br, concurrency)) in cells.iter().zip([1u64, 2, 4]).enumerate() {
        schema.check(br, &format!("cell {i}'s report"));
        let load = &br["scenario"]["load"]["standardized"];
        assert_eq!(load["stage"], i, "{br}");
        assert_eq!(load["concurrency"], concurrency, "{br}");
        let agg = &br["results"]["request_performance"]["aggregate"];
        assert_eq!(agg["requests"]["total"], 6, "steady requests of cell {i}");
        assert_eq!(agg["requests"]["failures"], 0);
        let prefill = br["results"]["profiling"]["infertop"]["ttft_split"]["prefill_s"]["p50"]
            .as_f64()
            .unwrap();
        assert!((prefill - 0.040).abs() < 1e-9, "cell {i}: {prefill}");
    }
    // Two slots: at 4 in flight half the requests wait a whole service (about 60 ms), so
    // the TTFT p99 rises from cell to cell while the prefill stays 40 ms.
    let ttft_p99: Vec<f64> = cells
        .iter()
        .map(|br| {
            br["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
                ["p99"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(ttft_p99[2] > ttft_p99[0] + 0.030, "{ttft_p99:?}");
    let uids: std::collections::HashSet<&str> = cells
        .iter()
        .map(|br| br["run"]["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids.len(), 3, "each cell's report has its own uid");
}
