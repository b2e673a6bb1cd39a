//! `infertop watch`: a server's own Prometheus metrics, read passively, turned into windows.
//! The test server's metrics move by a known amount between scrapes, so every window's figures
//! are known.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::Value;

#[path = "common/stream_server.rs"]
mod stream_server;

const BIN: &str = env!("CARGO_BIN_EXE_infertop");

/// Scrape k: k requests running, 20·k TTFTs in (0.1, 0.2] s, 20·k requests finished.
fn metrics(k: u64) -> String {
    let n = 20 * k;
    format!(
        "# TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{model_name=\"m\"}} {k}\n\
         vllm:num_requests_waiting{{model_name=\"m\"}} 0\n\
         vllm:kv_cache_usage_perc{{model_name=\"m\"}} 0.25\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"0.1\",model_name=\"m\"}} 0\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"0.2\",model_name=\"m\"}} {n}\n\
         vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\",model_name=\"m\"}} {n}\n\
         vllm:e2e_request_latency_seconds_bucket{{le=\"1\",model_name=\"m\"}} {n}\n\
         vllm:e2e_request_latency_seconds_bucket{{le=\"+Inf\",model_name=\"m\"}} {n}\n"
    )
}

/// Serves `metrics(k)` for the k-th request, one request per connection.
fn serve() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let scrapes = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let body = metrics(scrapes.fetch_add(1, Ordering::SeqCst));
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[test]
fn windows_come_from_the_difference_of_scrapes() {
    let url = serve();
    let o = Command::new(BIN)
        .args(["watch", &url, "--interval", "200ms", "--duration", "1100ms"])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let windows: Vec<&Value> = lines.iter().filter(|v| v["type"] == "window").collect();
    // About 5 windows; fewer when a loaded machine delays the scrapes.
    assert!((2..=6).contains(&windows.len()), "{lines:?}");
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(w["server"], "vllm");
        assert_eq!(w["running"], (i + 1) as f64, "{w}");
        assert_eq!(w["kv_usage"], 0.25);
        // 20 new TTFTs, all in (0.1, 0.2]: histogram_quantile puts p50 in the middle.
        assert_eq!(w["ttft_s"]["n"], 20, "{w}");
        assert!(
            (w["ttft_s"]["p50"].as_f64().unwrap() - 0.15).abs() < 1e-9,
            "{w}"
        );
        // 20 requests over the window's own length (200 ms asked; 0.1–2 s allowed for load).
        let (rate, secs) = (
            w["requests_per_s"].as_f64().unwrap(),
            w["seconds"].as_f64().unwrap(),
        );
        assert!((0.1..2.0).contains(&secs), "{w}");
        assert!((rate * secs - 20.0).abs() < 1e-6, "{w}");
        assert!(w["itl_s"].is_null(), "no ITL histogram exported");
    }
    let total = lines.last().unwrap();
    assert_eq!(total["type"], "watch_summary");
    assert_eq!(total["ttft_s"]["n"], 20 * windows.len() as u64);
}

#[test]
fn a_server_without_metrics_is_one_clear_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let o = Command::new(BIN)
        .args(["watch", &url, "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot read") && err.contains("/metrics"),
        "{err}"
    );
}

/// `--server-metrics` during a load run: the server's windows go to the record beside the
/// client's requests, and the run's own numbers are unchanged by them.
#[test]
fn a_load_run_records_the_servers_own_view() {
    let endpoint = stream_server::start(stream_server::Timing {
        ttft: std::time::Duration::from_millis(20),
        itl: std::time::Duration::from_millis(5),
        tokens: 8,
    })
    .unwrap();
    let metrics = serve();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let o = Command::new(BIN)
        .args(["--endpoint", &endpoint, "--served-model", "m", "--headless"])
        .args(["--requests", "40", "--warmup", "0", "-p", "8", "-n", "8"])
        .args(["--server-metrics", &format!("{metrics}/metrics")])
        .args(["--record", record.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let live: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let server: Vec<&Value> = lines
        .iter()
        .filter(|v| v["type"] == "server_metrics")
        .collect();
    assert!(
        !server.is_empty(),
        "a 40-request run lasts over 2 s: {lines:?}"
    );
    for w in &server {
        assert_eq!(w["server"], "vllm");
        assert_eq!(w["ttft_s"]["n"], 20, "{w}");
        assert!(w["t_s"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(lines.iter().filter(|v| v["type"] == "request").count(), 40);
    // The summary puts the server's own percentiles over the run beside the client's: every
    // window counts (no warmup), each with 20 TTFTs in (0.1, 0.2] s.
    let srv = &live["server"];
    assert_eq!(srv["server"], "vllm", "{live}");
    let windows = srv["windows"].as_u64().unwrap();
    assert!(windows >= 1 && windows <= server.len() as u64, "{srv}");
    assert_eq!(srv["ttft_s"]["n"], 20 * windows, "{srv}");
    assert!((srv["ttft_s"]["p50"].as_f64().unwrap() - 0.15).abs() < 1e-9);
    assert_eq!(live["metrics"]["ttft_s"]["n"], 40);
    // The record reads back to the same summary, the server's view included.
    let o = Command::new(BIN)
        .args(["report", record.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["server"], live["server"]);
    let md = Command::new(BIN)
        .args(["report", record.to_str().unwrap()])
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("| TTFT |") && md.contains("client − server"),
        "{md}"
    );
}
