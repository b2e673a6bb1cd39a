//! `infertop report RECORD --trace OUT.json`: the trace validates against the trace-event format
//! (required fields, timestamps in order on every track, slices that nest, one slice per
//! request) for records of real runs (the tiny model with every step, a server with its HTTP
//! phases) and for a hand-written record with every kind of line; bad input is one line.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary is built")
}

/// `report RECORD --trace OUT`: the parsed trace and what was said on stderr.
fn trace(record: &Path, out: &Path) -> (Value, String) {
    let o = infertop()
        .arg("report")
        .arg(record)
        .args(["--no-probe", "--trace"])
        .arg(out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    let text = std::fs::read_to_string(out).unwrap();
    (serde_json::from_str(&text).unwrap(), stderr)
}

const EPS_US: f64 = 1e-3;

/// Checks `trace` against the trace-event format and returns its events. Every event has a
/// name, a phase, a pid and a tid; all but metadata a timestamp (µs, ≥ 0); slices a duration;
/// counters numeric values. On every thread, slices and instants come in time order and nest
/// (a slice ends within the one it starts in); every counter series is in time order; every
/// thread that has slices is named.
fn validate(trace: &Value) -> Vec<Value> {
    assert_eq!(trace["displayTimeUnit"], "ms");
    let events = trace["traceEvents"].as_array().unwrap().clone();
    assert!(!events.is_empty());
    let mut stacks: HashMap<(u64, u64), Vec<f64>> = HashMap::new();
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    let mut counter_ts: HashMap<(u64, String), f64> = HashMap::new();
    let mut named: HashMap<(u64, u64), String> = HashMap::new();
    let mut used: Vec<(u64, u64)> = Vec::new();
    for e in &events {
        let name = e["name"].as_str().unwrap_or_else(|| panic!("no name: {e}"));
        assert!(!name.is_empty(), "{e}");
        let ph = e["ph"].as_str().unwrap();
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("no pid: {e}"));
        let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("no tid: {e}"));
        if ph == "M" {
            assert!(e["args"].is_object(), "{e}");
            if name == "thread_name" {
                named.insert((pid, tid), e["args"]["name"].as_str().unwrap().into());
            }
            continue;
        }
        let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("no ts: {e}"));
        assert!(ts >= 0.0, "{e}");
        match ph {
            "X" | "i" => {
                let dur = if ph == "X" {
                    e["dur"].as_f64().unwrap_or_else(|| panic!("no dur: {e}"))
                } else {
                    assert_eq!(e["s"], "t", "{e}");
                    0.0
                };
                assert!(dur >= 0.0, "{e}");
                let track = (pid, tid);
                used.push(track);
                let last = last_ts.entry(track).or_insert(0.0);
                assert!(ts + EPS_US >= *last, "out of order on {track:?}: {e}");
                *last = ts;
                let end = ts + dur;
                let stack = stacks.entry(track).or_default();
                while stack.last().is_some_and(|&top| top <= ts + EPS_US) {
                    stack.pop();
                }
                if let Some(&top) = stack.last() {
                    assert!(end <= top + EPS_US, "does not nest on {track:?}: {e}");
                }
                if ph == "X" {
                    stack.push(end);
                }
            }
            "C" => {
                let args = e["args"].as_object().unwrap();
                assert!(!args.is_empty(), "{e}");
                for (k, v) in args {
                    assert!(v.as_f64().is_some_and(f64::is_finite), "{e}");
                    let series = (pid, format!("{name} {k}"));
                    let last = counter_ts.entry(series).or_insert(0.0);
                    assert!(ts + EPS_US >= *last, "counter out of order: {e}");
                    *last = ts;
                }
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for track in used {
        if track.0 >= 10 {
            assert!(named.contains_key(&track), "unnamed thread {track:?}");
        }
    }
    events
}

fn slices<'a>(events: &'a [Value], cat: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == cat)
        .collect()
}

/// Each request's slice once, by (process, index).
fn one_slice_per_request(events: &[Value]) -> BTreeMap<(u64, u64), &Value> {
    let mut by_index = BTreeMap::new();
    for e in slices(events, "request") {
        let key = (
            e["pid"].as_u64().unwrap(),
            e["args"]["index"].as_u64().unwrap(),
        );
        assert!(by_index.insert(key, e).is_none(), "two slices for {key:?}");
    }
    by_index
}

/// The child slices of `parent` (same thread, within it) with category `cat`.
fn children<'a>(events: &'a [Value], parent: &Value, cat: &str) -> Vec<&'a Value> {
    let (from, to) = (
        parent["ts"].as_f64().unwrap(),
        parent["ts"].as_f64().unwrap() + parent["dur"].as_f64().unwrap(),
    );
    slices(events, cat)
        .into_iter()
        .filter(|e| e["pid"] == parent["pid"] && e["tid"] == parent["tid"])
        .filter(|e| {
            let ts = e["ts"].as_f64().unwrap();
            ts + EPS_US >= from && ts + e["dur"].as_f64().unwrap() <= to + EPS_US
        })
        .collect()
}

#[test]
fn a_model_run_with_every_step_traces_each_request_prefill_decode_and_steps() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let out = infertop()
        .args(["--headless", "--requests", "6", "-n", "5", "-p", "16"])
        .args(["--warmup", "2", "--jsonl-steps", "--record"])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (t, stderr) = trace(&record, &dir.path().join("run.json"));
    assert!(stderr.contains("6 requests on 1 slots"), "{stderr}");
    let events = validate(&t);
    let requests = one_slice_per_request(&events);
    assert_eq!(requests.len(), 6);
    for r in requests.values() {
        assert_eq!(children(&events, r, "prefill").len(), 1, "{r}");
        let decode = children(&events, r, "decode");
        assert_eq!(decode.len(), 1, "{r}");
        // 5 tokens: 4 decode steps, each within the decode.
        assert_eq!(children(&events, decode[0], "step").len(), 4, "{r}");
    }
    let warm = requests
        .values()
        .filter(|r| r["args"]["warmup"] == true)
        .count();
    assert_eq!(warm, 2);
    assert!(events.iter().any(|e| e["name"] == "warmup ended"));
    assert!(events.iter().any(|e| e["name"] == "run started"));
    // The telemetry sampler's memory.
    assert!(events.iter().any(|e| e["ph"] == "C" && e["name"] == "RSS"));
}

/// `--step-parts 2`: every other prefill and decode step has its parts as slices inside it,
/// valid trace-event slices (they nest), their lengths the record's.
#[test]
fn sampled_steps_have_their_parts_as_slices_inside_them() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let out = infertop()
        .args(["--headless", "--requests", "4", "-n", "6", "-p", "16"])
        .args([
            "--warmup",
            "1",
            "--jsonl-steps",
            "--step-parts",
            "2",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (t, _) = trace(&record, &dir.path().join("run.json"));
    let events = validate(&t);
    let requests = one_slice_per_request(&events);
    let (mut prefills, mut steps) = (0, 0);
    for r in requests.values() {
        let prefill = children(&events, r, "prefill")[0];
        let parts = children(&events, prefill, "parts");
        if !parts.is_empty() {
            prefills += 1;
            let names: Vec<&str> = parts.iter().map(|p| p["name"].as_str().unwrap()).collect();
            assert_eq!(
                names,
                [
                    "input",
                    "attention",
                    "mlp",
                    "lm head",
                    "rest of forward",
                    "sample + copy + sync"
                ],
                "{r}"
            );
            let sum: f64 = parts.iter().map(|p| p["dur"].as_f64().unwrap()).sum();
            let whole = prefill["dur"].as_f64().unwrap();
            assert!(
                (sum - whole).abs() <= 0.01 * whole + 1.0,
                "{sum} vs {whole}"
            );
        }
        let decode = children(&events, r, "decode")[0];
        for step in children(&events, decode, "step") {
            if !children(&events, step, "parts").is_empty() {
                steps += 1;
            }
        }
    }
    // Prefills 0 and 2 of 4; decode steps 0, 2, … of the 20 (5 per request).
    assert_eq!((prefills, steps), (2, 10));
}

#[test]
fn a_server_run_traces_slots_http_phases_and_requests_in_flight() {
    let server = stream_server::start_counted(
        stream_server::Timing {
            ttft: Duration::from_millis(40),
            itl: Duration::from_millis(5),
            tokens: 4,
        },
        true,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("server.jsonl");
    let out = infertop()
        .args(["--endpoint", &server.url, "--served-model", "m"])
        .args([
            "--concurrency",
            "3",
            "--requests",
            "9",
            "--output-tokens",
            "4",
        ])
        .args([
            "--headless",
            "--no-telemetry",
            "--no-preconnect",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (t, stderr) = trace(&record, &dir.path().join("server.json"));
    let events = validate(&t);
    let requests = one_slice_per_request(&events);
    assert_eq!(requests.len(), 9);
    // Three in flight at a time: three slots (a slot frees as the next request starts).
    assert!(stderr.contains("9 requests on 3 slots"), "{stderr}");
    let mut connects = 0;
    for r in requests.values() {
        let prefill = children(&events, r, "prefill");
        assert_eq!(prefill.len(), 1);
        let http = children(&events, prefill[0], "http");
        let names: Vec<&str> = http.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"waiting for the first byte"), "{names:?}");
        assert!(names.contains(&"first byte → first token"), "{names:?}");
        if names.contains(&"connect") {
            connects += 1;
            assert_eq!(r["args"]["connection"], "new");
        }
    }
    // Without preconnecting, the first three opened the connections the rest kept.
    assert_eq!(connects, 3);
    let in_flight: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "in flight")
        .map(|e| e["args"]["requests"].as_f64().unwrap())
        .collect();
    assert_eq!(in_flight.iter().cloned().fold(0.0, f64::max), 3.0);
    assert_eq!(in_flight.last(), Some(&0.0));
}

/// A server that reports its own timings (a slot each for two requests in flight, queued
/// behind one): each request's prefill holds "network + client", "server queue" and "server
/// prefill" in time order, nested and adding up to its TTFT, the prefill as the server said.
#[test]
fn a_server_that_reports_its_timings_has_them_as_slices_inside_the_prefill() {
    let server = stream_server::start_reporting(
        stream_server::Options {
            timing: stream_server::Timing {
                ttft: Duration::from_millis(40),
                itl: Duration::from_millis(5),
                tokens: 4,
            },
            slots: Some(1),
            reset_route: None,
        },
        stream_server::Reporting {
            dialect: stream_server::Dialect::Vllm,
            hop: Duration::from_millis(10),
            cached: 2,
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("split.jsonl");
    let out = infertop()
        .args(["--endpoint", &server.url, "--served-model", "m"])
        .args(["--concurrency", "2", "--requests", "6", "-n", "4"])
        .args(["--headless", "--no-telemetry", "--record"])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (t, _) = trace(&record, &dir.path().join("split.json"));
    let events = validate(&t);
    let requests = one_slice_per_request(&events);
    assert_eq!(requests.len(), 6);
    let mut queued = 0;
    for r in requests.values() {
        let prefill = children(&events, r, "prefill");
        assert_eq!(prefill.len(), 1);
        let split = children(&events, prefill[0], "split");
        let names: Vec<&str> = split.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["network + client", "server queue", "server prefill"],
            "{r}"
        );
        let dur = |e: &Value| e["dur"].as_f64().unwrap() / 1e3;
        // Laid end to end over the whole prefill (µs rounding aside).
        let total: f64 = split.iter().map(|e| dur(e)).sum();
        assert!(
            (total - dur(prefill[0])).abs() < 0.01,
            "{total} vs {}",
            dur(prefill[0])
        );
        assert!(
            (dur(split[2]) - 40.0).abs() < 0.01,
            "the reported prefill: {}",
            dur(split[2])
        );
        assert!(
            dur(split[0]) >= 9.0,
            "the 10 ms hop is in the rest: {}",
            dur(split[0])
        );
        if dur(split[1]) > 30.0 {
            queued += 1;
        }
        assert_eq!(r["args"]["server"]["source"], "vllm");
        assert_eq!(r["args"]["server"]["cached_tokens"], 2);
    }
    // One slot, two in flight: most requests waited for the other's whole request.
    assert!(queued >= 3, "{queued} of 6 queued");
}

/// Every kind of line, written by hand: a sweep of two cells, a pause, a workload change, an
/// error, a failed request, telemetry and the server's metrics.
#[test]
fn events_counters_failures_and_sweep_cells_are_on_their_tracks() {
    let lines = [
        r#"{"type":"header","infertop_version":"0.1.0","record_format":1,"command":["infertop","sweep"],"config":{}}"#,
        r#"{"type":"sweep","cells":[],"warmup":0,"repetitions":2}"#,
        r#"{"type":"cell","cell":0,"params":{"batch":1,"prompt_tokens":16,"output_tokens":4,"concurrency":1}}"#,
        r#"{"type":"event","t_s":0.01,"event":"run_started","model":{"name":"m","arch":"llama","source":"synthetic","params":1,"weight_bytes":1,"kv_bytes_per_token":1,"dtype":"f32","device":"cpu","max_positions":64,"layers":1,"hidden":8,"heads":1,"kv_heads":1,"head_dim":8,"vocab":32},"workload":{"prompt_tokens":"16","output_tokens":"4","batch":1}}"#,
        r#"{"type":"request","index":0,"warmup":false,"batch":1,"prompt_tokens":16,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0","t_s":0.1}"#,
        r#"{"type":"telemetry","t_s":0.1,"rss_bytes":1048576,"rss_peak_bytes":null,"alloc_bytes":null,"alloc_peak_bytes":null,"device_used_bytes":null,"device_total_bytes":null,"process_device_bytes":null,"gpu_util_pct":40,"mem_util_pct":null,"power_w":150.5,"power_limit_w":null,"temperature_c":null,"sm_clock_mhz":null,"mem_clock_mhz":null,"energy_j":null}"#,
        r#"{"type":"event","t_s":0.12,"event":"paused"}"#,
        r#"{"type":"event","t_s":0.2,"event":"resumed"}"#,
        r#"{"type":"request_failed","index":1,"warmup":false,"reason":"HTTP 503","status":503,"elapsed_s":0.01,"t_s":0.22}"#,
        r#"{"type":"server_metrics","t_s":0.25,"seconds":1.0,"server":"vllm","requests_per_s":2.0,"running":3.0,"waiting":1.0,"kv_usage":0.5,"preemptions":0.0,"prefix_hit_rate":null,"ttft_s":null,"itl_s":null,"e2e_s":null}"#,
        r#"{"type":"request","index":2,"warmup":false,"batch":1,"prompt_tokens":16,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0","t_s":0.31}"#,
        r#"{"type":"cell_end","cell":0,"status":"ok","elapsed_s":0.3,"summary":{}}"#,
        r#"{"type":"cell","cell":1,"params":{"batch":1,"prompt_tokens":16,"output_tokens":4,"concurrency":2}}"#,
        r#"{"type":"event","t_s":0.32,"event":"workload_changed","detail":{"prompt_tokens":"32","output_tokens":"4","batch":1}}"#,
        r#"{"type":"event","t_s":0.33,"event":"error","detail":{"message":"client saturated: ...","fatal":false}}"#,
        r#"{"type":"request","index":0,"warmup":false,"batch":1,"prompt_tokens":32,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0","t_s":0.42}"#,
        r#"{"type":"request","index":1,"warmup":false,"batch":1,"prompt_tokens":32,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0","t_s":0.43}"#,
        r#"{"type":"cell_end","cell":1,"status":"ok","elapsed_s":0.2,"summary":{}}"#,
    ];
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("sweep.jsonl");
    std::fs::write(&record, lines.join("\n") + "\n").unwrap();
    let (t, stderr) = trace(&record, &dir.path().join("sweep.json"));
    assert!(
        stderr.contains("4 requests and 1 failed on 3 slots"),
        "{stderr}"
    );
    let events = validate(&t);
    // Each cell's requests in a process of their own (indices start again in each cell).
    let requests = one_slice_per_request(&events);
    assert_eq!(requests.len(), 4);
    let processes: Vec<String> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        processes.iter().any(|p| p.starts_with("cell 0 requests")),
        "{processes:?}"
    );
    assert!(
        processes.iter().any(|p| p.starts_with("cell 1 requests")),
        "{processes:?}"
    );
    let paused = slices(&events, "run");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["name"], "paused");
    assert!((paused[0]["ts"].as_f64().unwrap() - 120_000.0).abs() < 1e-6);
    assert!((paused[0]["dur"].as_f64().unwrap() - 80_000.0).abs() < 1e-6);
    assert_eq!(slices(&events, "failed").len(), 1);
    let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
    for want in [
        "warning",
        "run started",
        "RSS",
        "GPU util",
        "power",
        "server running",
    ] {
        assert!(names.contains(&want), "{want}: {names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("workload: prompt 32")));
    let kv = events
        .iter()
        .find(|e| e["name"] == "server KV cache")
        .unwrap();
    assert_eq!(kv["args"]["%"], 50.0);
}

#[test]
fn an_old_record_without_request_times_is_laid_end_to_end_and_says_so() {
    let lines = [
        r#"{"type":"header","infertop_version":"0.1.0","record_format":1,"command":[],"config":{}}"#,
        r#"{"type":"request","index":0,"warmup":false,"batch":1,"prompt_tokens":16,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0"}"#,
        r#"{"type":"request","index":1,"warmup":false,"batch":1,"prompt_tokens":16,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0"}"#,
    ];
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("old.jsonl");
    std::fs::write(&record, lines.join("\n") + "\n").unwrap();
    let (t, stderr) = trace(&record, &dir.path().join("old.json"));
    assert!(stderr.contains("laid end to end"), "{stderr}");
    let events = validate(&t);
    let requests = one_slice_per_request(&events);
    let starts: Vec<f64> = requests
        .values()
        .map(|r| r["ts"].as_f64().unwrap())
        .collect();
    assert_eq!(starts, [0.0, 80_000.0]);
    assert_eq!(t["otherData"]["requests_laid_end_to_end"], true);
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(
        &empty,
        r#"{"type":"header","infertop_version":"0.1.0","record_format":1,"command":[],"config":{}}"#,
    )
    .unwrap();
    let out_path = dir.path().join("t.json");
    let o = infertop()
        .arg("report")
        .arg(&empty)
        .args(["--no-probe", "--trace"])
        .arg(&out_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no requests to trace"), "{stderr}");
    assert!(!out_path.exists());

    // A record with requests, to a path that cannot be written.
    let record = dir.path().join("one.jsonl");
    std::fs::write(
        &record,
        [
            r#"{"type":"header","infertop_version":"0.1.0","record_format":1,"command":[],"config":{}}"#,
            r#"{"type":"request","index":0,"warmup":false,"batch":1,"prompt_tokens":16,"output_tokens":4,"ttft_s":0.05,"tpot_s":0.01,"e2e_s":0.08,"output_hash":"0","t_s":0.1}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    for bad in [
        dir.path().join("no/such/dir/t.json"),
        dir.path().to_path_buf(),
    ] {
        let o = infertop()
            .arg("report")
            .arg(&record)
            .args(["--no-probe", "--trace"])
            .arg(&bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--trace") && stderr.contains("cannot write"),
            "{stderr}"
        );
        assert!(o.stdout.is_empty(), "no report after a failed --trace");
    }
}
