//! `--metrics-listen`: the client's figures as Prometheus text while a run goes on, scraped
//! from a headless run against the in-process server that reports its own timings, and read
//! back with the same parser `watch` reads any exporter with.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;
use stream_server::{Dialect, Options, Reporting, Timing};

fn infertop() -> std::process::Command {
    std::process::Command::cargo_bin("infertop").unwrap()
}

fn get(addr: &str) -> Option<String> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// A sample's value: `name` with the label `key="val"` (`""`: a sample without labels).
fn value(text: &str, name: &str, label: &str) -> f64 {
    let (key, val) = label.split_once('=').unwrap_or(("", ""));
    let val = val.trim_matches('"');
    let mut found = None;
    infertop::scrape::text::for_each_sample(text, &|n| n == name, &mut |s| {
        if key.is_empty() || s.label(key).as_deref() == Some(val) {
            found = Some(s.value);
        }
    })
    .unwrap();
    found.unwrap_or_else(|| panic!("{name}{{{label}}} not in:\n{text}"))
}

#[test]
fn a_running_client_serves_its_histograms() {
    let server = stream_server::start_reporting(
        Options {
            timing: Timing {
                ttft: Duration::from_millis(30),
                itl: Duration::from_millis(5),
                tokens: 4,
            },
            slots: Some(1),
            reset_route: None,
        },
        Reporting {
            dialect: Dialect::Vllm,
            hop: Duration::ZERO,
            cached: 0,
        },
    )
    .unwrap();
    let mut child = infertop()
        .args(["--endpoint", &server.url, "--served-model", "m"])
        .args([
            "--requests",
            "40",
            "--concurrency",
            "2",
            "-p",
            "8",
            "-n",
            "4",
        ])
        .args([
            "--headless",
            "--no-telemetry",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no address said");
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Scrape until half the requests are done (about 1.4 s for all 40 on one slot).
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        assert!(Instant::now() < deadline, "never saw 10 requests");
        if let Some(t) = get(&addr) {
            if value(&t, "infertop_requests_total", "outcome=\"ok\"") >= 10.0 {
                break t;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let status = child.wait().unwrap();
    assert!(status.success());

    let ok = value(&text, "infertop_requests_total", "outcome=\"ok\"");
    let count = |name: &str| value(&text, &format!("{name}_count"), "");
    for h in [
        "infertop_time_to_first_token_seconds",
        "infertop_time_to_answer_seconds",
        "infertop_time_per_output_token_seconds",
        "infertop_e2e_request_latency_seconds",
        "infertop_send_lag_seconds",
        "infertop_server_queue_seconds",
        "infertop_server_prefill_seconds",
        "infertop_ttft_network_client_seconds",
    ] {
        // The scrape is one consistent copy: every histogram counted the same requests.
        assert_eq!(count(h), ok, "{h}");
        assert_eq!(
            value(&text, &format!("{h}_bucket"), "le=\"+Inf\""),
            ok,
            "{h}"
        );
    }
    assert!(count("infertop_inter_token_latency_seconds") >= 3.0 * ok);
    // One slot, two in flight: the second waits a whole request (30 + 3 × 5 ms); its TTFT is
    // above 25 ms, every prefill at 30 ms, so none of either is under 25 ms.
    let prefill_fast = value(
        &text,
        "infertop_server_prefill_seconds_bucket",
        "le=\"0.025\"",
    );
    assert_eq!(prefill_fast, 0.0);
    let ttft_fast = value(
        &text,
        "infertop_time_to_first_token_seconds_bucket",
        "le=\"0.025\"",
    );
    assert_eq!(ttft_fast, 0.0);
    let queued = ok
        - value(
            &text,
            "infertop_server_queue_seconds_bucket",
            "le=\"0.025\"",
        );
    assert!(
        queued >= ok / 2.0 - 1.0,
        "about half wait a request: {queued} of {ok}"
    );
    let in_flight = value(&text, "infertop_requests_in_flight", "");
    assert!((0.0..=2.0).contains(&in_flight), "{in_flight}");
    assert_eq!(
        value(&text, "infertop_requests_total", "outcome=\"http_error\""),
        0.0
    );
}

/// A sweep serves the figures while it runs, across its cells: scraped again and again
/// while it goes on, the count of requests only rises, and goes past what its first cell
/// sends (the counters are the whole sweep's, not reset per cell, as Prometheus counters
/// must not be).
#[test]
fn a_sweep_serves_its_figures_while_it_runs() {
    let server = stream_server::start_reporting(
        Options {
            timing: Timing {
                ttft: Duration::from_millis(30),
                itl: Duration::from_millis(5),
                tokens: 4,
            },
            slots: Some(1),
            reset_route: None,
        },
        Reporting {
            dialect: Dialect::Vllm,
            hop: Duration::ZERO,
            cached: 0,
        },
    )
    .unwrap();
    // Two cells of 1 warmup + 20 steady requests, about 45 ms each on the one slot: about
    // 1 s a cell.
    let per_cell = 21.0;
    let mut child = infertop()
        .args(["sweep", "--endpoint", &server.url, "--served-model", "m"])
        .args(["--concurrency", "1,2", "-p", "8", "-n", "4"])
        .args(["--warmup", "1", "--repetitions", "20", "--no-telemetry"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no address said");
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // The rest of stderr is read aside, so the sweep never waits on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: Vec<f64> = Vec::new();
    let mut in_flight_seen = false;
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the sweep did not end within 30 s"
        );
        if let Some(t) = get(&addr) {
            // Scraped while the sweep still runs.
            let ok = value(&t, "infertop_requests_total", "outcome=\"ok\"");
            assert_eq!(
                value(&t, "infertop_time_to_first_token_seconds_count", ""),
                ok
            );
            in_flight_seen |= value(&t, "infertop_requests_in_flight", "") >= 1.0;
            seen.push(ok);
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    let status = child.wait().unwrap();
    let stderr = rest.join().unwrap();
    assert!(status.success(), "{stderr}");
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "a counter went down: {seen:?}"
    );
    let distinct = {
        let mut d = seen.clone();
        d.dedup();
        d.len()
    };
    assert!(
        distinct >= 5,
        "the count rose while the sweep ran: {seen:?}"
    );
    assert!(in_flight_seen, "requests in flight were seen");
    let last = seen.last().copied().unwrap_or(0.0);
    assert!(
        last > per_cell && last <= 2.0 * per_cell,
        "scraped into the second cell: {seen:?}"
    );
}

#[test]
fn a_bad_address_is_one_line_and_exit_2() {
    let out = infertop()
        .args([
            "--endpoint",
            "http://127.0.0.1:9",
            "--metrics-listen",
            "nine",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics-listen") && err.contains("HOST:PORT"),
        "{err}"
    );
    // A port already taken is said before anything runs.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = infertop()
        .args([
            "--endpoint",
            "http://127.0.0.1:9",
            "--headless",
            "--metrics-listen",
            &port,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot listen on"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
