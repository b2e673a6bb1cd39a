//! `infertop watch`: a server's own Prometheus metrics, read passively, turned into windows.
//! The test server's metrics move by a known amount between scrapes, so every window's figures
//! are known.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infertop::event::{ServerWindow, StopReason};
use infertop::scrape;
use infertop::signals::Signals;
use infertop::ui::coalesce::Coalesce;
use infertop::ui::theme::{Glyphs, Theme};
use infertop::ui::watch::{self, render, WatchConfig, WatchEvent, WatchLoop, WatchState};
use infertop::ui::KeyMap;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use serde_json::Value;

#[path = "common/stream_server.rs"]
mod stream_server;

mod common;

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

/// Several servers (replicas) are watched as one: each window adds them up.
#[test]
fn watching_replicas_adds_them_up() {
    let (a, b) = (serve(), serve());
    let o = Command::new(BIN)
        .args([
            "watch",
            &a,
            &b,
            "--interval",
            "200ms",
            "--duration",
            "900ms",
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "window")
        .collect();
    // Each node's window names it; the total names none.
    let (nodes, windows): (Vec<&Value>, Vec<&Value>) =
        all.iter().partition(|w| w["source"].is_string());
    assert!(!windows.is_empty());
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(w["sources"], 2, "{w}");
        assert_eq!(w["ttft_s"]["n"], 40, "{w}");
        assert_eq!(w["running"], 2.0 * (i + 1) as f64, "{w}");
    }
    for url in [&a, &b] {
        let name = url.trim_start_matches("http://");
        let mine: Vec<&&Value> = nodes.iter().filter(|w| w["source"] == name).collect();
        assert_eq!(mine.len(), windows.len(), "{name}: {nodes:?}");
        assert!(mine.iter().all(|w| w["ttft_s"]["n"] == 20), "{mine:?}");
    }
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
        err.contains("cannot read")
            && err.contains("/metrics")
            && err.contains("connection refused"),
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

/// Replicas: `--server-metrics` given twice reads both servers each second and adds them up (a
/// bare flag does the same for every `--endpoint`).
#[test]
fn replicas_metrics_add_up() {
    let endpoint = stream_server::start(stream_server::Timing {
        ttft: std::time::Duration::from_millis(20),
        itl: std::time::Duration::from_millis(5),
        tokens: 8,
    })
    .unwrap();
    let (a, b) = (serve(), serve());
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let o = Command::new(BIN)
        .args(["--endpoint", &endpoint, "--served-model", "m", "--headless"])
        .args(["--requests", "40", "--warmup", "0", "-p", "8", "-n", "8"])
        .args(["--server-metrics", &a, "--server-metrics", &b])
        .args(["--record", record.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let server: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "server_metrics")
        .collect();
    assert!(!server.is_empty());
    // Each server's own windows (with `source`) are recorded beside their total.
    let (nodes, server): (Vec<Value>, Vec<Value>) =
        server.into_iter().partition(|w| w["source"].is_string());
    assert!(nodes.len() >= server.len(), "{nodes:?}");
    assert!(nodes.iter().all(|w| w["ttft_s"]["n"] == 20), "{nodes:?}");
    for w in &server {
        assert_eq!(w["sources"], 2, "{w}");
        // Each server: 20 TTFTs a scrape, running k at scrape k; KV 25 % on both.
        assert_eq!(w["ttft_s"]["n"], 40, "{w}");
        assert_eq!(w["kv_usage"], 0.25, "{w}");
    }
}

/// A triangle wave 0..=10 over 20 windows: load that rises and falls.
fn tri(k: u64) -> u64 {
    let p = k % 20;
    if p <= 10 {
        p
    } else {
        20 - p
    }
}

/// Cumulative vLLM metrics after `upto` windows of known load: window k finishes 10 + tri(k)
/// requests, a slow TTFT/E2E tail every 7th window, a long ITL tail every 5th.
fn vllm_text(upto: u64) -> String {
    let (mut ttft, mut itl, mut e2e) = ([0u64; 5], [0u64; 4], [0u64; 4]);
    let (mut preempt, mut hits, mut queries) = (0, 0, 0);
    for k in 1..=upto {
        let n = 10 + tri(k);
        let slow = if k % 7 == 0 { 3 } else { 0 };
        let mid = n / 3;
        for (i, c) in [2, n - 2 - mid - slow, mid, 0, slow].iter().enumerate() {
            ttft[i] += c;
        }
        let tail = k % 5;
        for (i, c) in [4 * n, 5 * n, n - tail, tail].iter().enumerate() {
            itl[i] += c;
        }
        for (i, c) in [n / 2, n - n / 2 - slow, slow, 0].iter().enumerate() {
            e2e[i] += c;
        }
        preempt += u64::from(k % 11 == 0);
        hits += 50 + 2 * tri(k);
        queries += 100;
    }
    let t = tri(upto);
    let mut out = format!(
        "vllm:num_requests_running{{model_name=\"m\"}} {}\n\
         vllm:num_requests_waiting{{model_name=\"m\"}} {}\n\
         vllm:kv_cache_usage_perc{{model_name=\"m\"}} {}\n\
         vllm:num_preemptions_total{{model_name=\"m\"}} {preempt}\n\
         vllm:prefix_cache_hits_total{{model_name=\"m\"}} {hits}\n\
         vllm:prefix_cache_queries_total{{model_name=\"m\"}} {queries}\n",
        4 + t / 2,
        t.saturating_sub(7),
        (20 + 6 * t) as f64 / 100.0,
    );
    let mut hist = |name: &str, bounds: &[&str], counts: &[u64]| {
        let mut cum = 0;
        for (b, c) in bounds.iter().zip(counts) {
            cum += c;
            out.push_str(&format!(
                "{name}_bucket{{le=\"{b}\",model_name=\"m\"}} {cum}\n"
            ));
        }
        out.push_str(&format!(
            "{name}_bucket{{le=\"+Inf\",model_name=\"m\"}} {cum}\n"
        ));
    };
    hist(
        "vllm:time_to_first_token_seconds",
        &["0.05", "0.1", "0.25", "0.5", "1"],
        &ttft,
    );
    hist(
        "vllm:inter_token_latency_seconds",
        &["0.01", "0.02", "0.04", "0.08"],
        &itl,
    );
    hist(
        "vllm:e2e_request_latency_seconds",
        &["1", "2", "5", "10"],
        &e2e,
    );
    out
}

/// The windows between scrapes 0..=n of `text`, one a second.
fn windows(n: u64, text: fn(u64) -> String) -> Vec<ServerWindow> {
    (1..=n)
        .map(|k| {
            let a = scrape::parse(&text(k - 1)).unwrap();
            let b = scrape::parse(&text(k)).unwrap();
            scrape::window(&a, &b, 1.0)
        })
        .collect()
}

fn config(server: &str) -> WatchConfig {
    WatchConfig {
        url: "http://vllm-0.prod:8000/metrics".into(),
        server: server.into(),
        interval: Duration::from_secs(1),
        themes: vec![Theme::fallback()],
        glyphs: Glyphs::new(false),
        keys: KeyMap::default(),
        nodes: vec![],
    }
}

fn watch_state(server: &str) -> WatchState {
    WatchState::new(config(server))
}

/// A watch that has read `n` windows of `text`, at `n` seconds.
fn watched(server: &str, n: u64, text: fn(u64) -> String) -> WatchState {
    let mut s = watch_state(server);
    for (k, w) in windows(n, text).into_iter().enumerate() {
        s.apply(WatchEvent::Window {
            t_s: (k + 1) as f64,
            window: Box::new(w),
        });
    }
    s.tick(Duration::from_secs(n));
    s
}

fn draw(s: &WatchState, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render::render(f, s)).unwrap();
    terminal
}

#[test]
fn watch_screen_at_both_sizes() {
    let s = watched("vllm", 45, vllm_text);
    insta::assert_snapshot!("watch_vllm_80x24", draw(&s, 80, 24).backend());
    insta::assert_snapshot!("watch_vllm_200x60", draw(&s, 200, 60).backend());
}

/// TGI exports no TTFT, ITL, KV usage, prefix cache or preemptions: those read `-` or "not
/// exported"; a failing scrape is a warning in the header; pausing holds windows.
fn tgi_text(upto: u64) -> String {
    let n = 6 * upto;
    format!(
        "tgi_batch_current_size 3\ntgi_queue_size 1\n\
         tgi_request_duration_bucket{{le=\"0.5\"}} {}\n\
         tgi_request_duration_bucket{{le=\"1\"}} {n}\n\
         tgi_request_duration_bucket{{le=\"+Inf\"}} {n}\n",
        n / 2
    )
}

#[test]
fn watch_screen_of_a_server_without_most_metrics_failing_and_paused() {
    let mut s = watched("tgi", 12, tgi_text);
    s.update(infertop::ui::Action::PauseResume);
    let w = windows(13, tgi_text).pop().unwrap();
    s.apply(WatchEvent::Window {
        t_s: 13.0,
        window: Box::new(w),
    });
    for t in [14.0, 15.0] {
        s.apply(WatchEvent::ScrapeFailed {
            t_s: t,
            message: "HTTP 503".into(),
        });
    }
    s.tick(Duration::from_secs(15));
    insta::assert_snapshot!("watch_tgi_failing_paused_80x24", draw(&s, 80, 24).backend());
}

#[test]
fn watch_screen_before_the_first_window_with_help_and_too_small() {
    let mut s = watch_state("vllm");
    s.tick(Duration::from_millis(400));
    insta::assert_snapshot!("watch_first_window_80x24", draw(&s, 80, 24).backend());
    let mut s = watched("vllm", 10, vllm_text);
    s.update(infertop::ui::Action::Help);
    insta::assert_snapshot!("watch_help_80x24", draw(&s, 80, 24).backend());
    insta::assert_snapshot!("watch_too_small_70x20", draw(&s, 70, 20).backend());
}

/// The table's whole-watch percentiles, summed window by window from the trimmed bucket
/// deltas, equal those of one window from the first scrape to the last.
#[test]
fn whole_watch_percentiles_are_those_of_one_window_over_everything() {
    let n = 45;
    let s = watched("vllm", n, vllm_text);
    let first = scrape::parse(&vllm_text(0)).unwrap();
    let last = scrape::parse(&vllm_text(n)).unwrap();
    let all = scrape::window(&first, &last, n as f64);
    let span = &s.total.span_summary;
    assert_eq!(span.windows, n);
    for (got, want) in [
        (span.ttft_s, all.ttft_s),
        (span.itl_s, all.itl_s),
        (span.e2e_s, all.e2e_s),
    ] {
        let (got, want) = (got.unwrap(), want.unwrap());
        assert_eq!(got.n, want.n);
        for (g, w) in [
            (got.p50, want.p50),
            (got.p90, want.p90),
            (got.p99, want.p99),
        ] {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    }
    // The slow tail (every 7th window) is in the whole watch's p99, not in most windows'.
    assert!(span.ttft_s.unwrap().p99 > 0.5);
    assert!(s.total.last.as_ref().unwrap().ttft_s.unwrap().p99 < 0.25);
}

/// Input scripted as a list; `None` entries are idle waits.
struct Script(std::collections::VecDeque<Option<TermEvent>>);

impl infertop::ui::Input for Script {
    fn next(&mut self, _timeout: Duration) -> std::io::Result<Option<TermEvent>> {
        Ok(self.0.pop_front().flatten())
    }
}

fn key(c: char) -> Option<TermEvent> {
    Some(TermEvent::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::NONE,
    )))
}

/// The loop drains the scraper's channel into the state, draws, and turns keys and signals
/// into the way the watch ends.
#[test]
fn the_loop_applies_windows_keys_and_signals() {
    let (tx, rx) = crossbeam_channel::unbounded();
    for (k, w) in windows(3, vllm_text).into_iter().enumerate() {
        tx.send(WatchEvent::Window {
            t_s: (k + 1) as f64,
            window: Box::new(w),
        })
        .unwrap();
    }
    let opts = WatchLoop {
        fps: 4,
        signals: Signals::none(),
        started: Instant::now(),
        deadline: None,
    };
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).unwrap();
    let mut state = watch_state("vllm");
    let mut input = Script([None, key(' '), None, key('q'), key('q')].into());
    let stop = watch::run_loop(&mut terminal, &mut input, &rx, &mut state, &opts).unwrap();
    assert_eq!(stop, StopReason::UserStop);
    assert_eq!(state.windows_read, 3);
    assert!(state.paused);
    let screen = format!("{}", terminal.backend().inner());
    assert!(
        screen.contains(" PAUSED ") && screen.contains("space resume"),
        "{screen}"
    );

    // A signal ends it whatever the keys say; so does --duration.
    opts.signals.raise(1);
    let mut input = Script(std::iter::repeat_n(None, 3).collect());
    let stop = watch::run_loop(&mut terminal, &mut input, &rx, &mut state, &opts).unwrap();
    assert_eq!(stop, StopReason::Signal("SIGHUP".into()));
    let opts = WatchLoop {
        fps: 4,
        signals: Signals::none(),
        started: Instant::now(),
        deadline: Some(Instant::now()),
    };
    let stop = watch::run_loop(&mut terminal, &mut input, &rx, &mut state, &opts).unwrap();
    assert_eq!(stop, StopReason::DurationLimit);
    // A scraper that died (its sender dropped) is an error, not a frozen screen.
    drop(tx);
    let opts = WatchLoop {
        fps: 4,
        signals: Signals::none(),
        started: Instant::now(),
        deadline: None,
    };
    let err = watch::run_loop(&mut terminal, &mut input, &rx, &mut state, &opts).unwrap_err();
    assert!(err.to_string().contains("scraper"), "{err}");
}

/// Input that waits as long as the loop asks, noting each wait and how long was left to
/// `deadline` when it was asked.
struct Waits {
    deadline: Instant,
    asked: Vec<(Duration, Duration)>,
}

impl infertop::ui::Input for Waits {
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<TermEvent>> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.asked.push((timeout, left));
        std::thread::sleep(timeout);
        Ok(None)
    }
}

/// `--duration` ends the watch when it is due, not at the next frame or poll: at one frame a
/// second, no wait the loop asks for runs past the deadline.
#[test]
fn the_loop_never_waits_past_its_deadline() {
    let (_tx, rx) = crossbeam_channel::unbounded::<WatchEvent>();
    let deadline = Instant::now() + Duration::from_millis(250);
    let opts = WatchLoop {
        fps: 1,
        signals: Signals::none(),
        started: Instant::now(),
        deadline: Some(deadline),
    };
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).unwrap();
    let mut state = watch_state("vllm");
    let mut input = Waits {
        deadline,
        asked: Vec::new(),
    };
    let stop = watch::run_loop(&mut terminal, &mut input, &rx, &mut state, &opts).unwrap();
    assert_eq!(stop, StopReason::DurationLimit);
    assert!(!input.asked.is_empty());
    // The loop takes its timeout a moment before the input sees the clock: 1 ms of slack.
    for &(timeout, left) in &input.asked {
        assert!(
            timeout <= left + Duration::from_millis(1),
            "asked to wait {timeout:?} with {left:?} left"
        );
    }
}

/// `--headless` in a terminal prints the lines a pipe gets.
#[test]
fn headless_in_a_terminal_prints_lines() {
    let url = serve();
    let mut s = common::pty::Session::start(
        &[
            "watch",
            &url,
            "--interval",
            "200ms",
            "--duration",
            "700ms",
            "--headless",
        ],
        120,
        24,
        100,
    );
    let status = s.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{}", s.contents());
    assert!(
        !s.raw_text().contains("\x1b[?1049h"),
        "took over the screen"
    );
    s.wait_for(
        &[
            "req/s",
            "the whole watch",
            "| metric (server's histograms) | p50 | p90 | p99 | n |",
            "|---|---:|---:|---:|---:|",
            "| TTFT | 150.000 ms |",
        ],
        Duration::from_secs(5),
    );
}

/// In a real terminal: the screen draws from the server's windows, q quits, the terminal is
/// restored and the whole watch's summary is printed under it.
#[test]
fn in_a_terminal_the_screen_draws_and_q_prints_the_summary() {
    let url = serve();
    let mut s = common::pty::Session::start(&["watch", &url, "--interval", "200ms"], 80, 24, 100);
    s.wait_for(
        &[
            " WATCH ",
            "Requests/s",
            "TTFT p50/p99",
            "q quit",
            "scrape ok",
        ],
        Duration::from_secs(60),
    );
    // 20 TTFTs a window in (0.1, 0.2]: the last window's p50 is 150ms.
    s.wait_for(&["p50 150ms"], Duration::from_secs(60));
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}; screen:\n{}", s.contents());
    s.assert_restored();
    s.wait_for(&["the whole watch", "| TTFT |"], Duration::from_secs(5));
}

#[test]
fn in_a_terminal_a_hangup_restores_it() {
    let url = serve();
    let mut s = common::pty::Session::start(&["watch", &url, "--interval", "200ms"], 80, 24, 100);
    s.wait_for(&[" WATCH ", "q quit"], Duration::from_secs(60));
    s.signal("HUP");
    let status = s.wait_exit(Duration::from_secs(20));
    assert_eq!(status.exit_code(), 129, "{}", s.contents());
    s.assert_restored();
}

/// p99 is drawn behind p50 in its own style (colours are not in the snapshots).
#[test]
fn p99_and_p50_bars_have_their_own_styles() {
    let theme = Theme::builtin("default").unwrap();
    let mut s = WatchState::new(WatchConfig {
        themes: vec![theme.clone()],
        ..config("vllm")
    });
    for (k, w) in windows(30, vllm_text).into_iter().enumerate() {
        s.apply(WatchEvent::Window {
            t_s: (k + 1) as f64,
            window: Box::new(w),
        });
    }
    let terminal = draw(&s, 80, 24);
    let buf = terminal.backend().buffer();
    let regions = render::regions(&s, buf.area).unwrap();
    for (chart, front) in [(3, theme.ttft), (4, theme.itl)] {
        assert_ne!(front.fg, theme.outlier.fg, "the theme tells them apart");
        let r = regions.charts[chart];
        let fgs: Vec<_> = (r.y + 1..r.bottom() - 1)
            .flat_map(|y| (r.x + 1..r.right() - 1).map(move |x| (x, y)))
            .filter(|&(x, y)| buf[(x, y)].symbol() != " ")
            .map(|(x, y)| buf[(x, y)].fg)
            .collect();
        assert!(
            fgs.contains(&theme.outlier.fg.unwrap()),
            "no p99 in chart {chart}"
        );
        assert!(fgs.contains(&front.fg.unwrap()), "no p50 in chart {chart}");
    }
}
