//! `infertop watch` over a cluster: a row per node, their total, data-parallel engines, GPUs
//! from the exporters already there, nodes that fail, Slurm's nodes, the record, and
//! `infertop agent`. The in-process servers serve real-sized vLLM and DCGM pages
//! (`common/metrics_pages.rs`) whose windows are known.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use infertop::event::{NodeTelemetry, ServerWindow};
use infertop::scrape;
use infertop::ui::theme::{Glyphs, Theme};
use infertop::ui::watch::{render, WatchConfig, WatchEvent, WatchState};
use infertop::ui::{Action, KeyMap};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::Value;

#[path = "common/metrics_pages.rs"]
mod pages;
#[path = "common/metrics_server.rs"]
mod server;

mod common;

use pages::{dcgm_page, node_exporter_page, vllm_page, VllmSpec};

const BIN: &str = env!("CARGO_BIN_EXE_infertop");

fn vllm(spec: VllmSpec) -> server::Served {
    server::serve(Arc::new(move |k| (200, vllm_page(&spec, k))))
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn name(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

fn watch(args: &[&str]) -> std::process::Output {
    Command::new(BIN).arg("watch").args(args).output().unwrap()
}

/// The generated page really is real-sized: about 50 KB, of vLLM's own names.
#[test]
fn the_generated_vllm_page_is_real_sized() {
    let page = vllm_page(&VllmSpec::default(), 100);
    assert!(
        (40_000..70_000).contains(&page.len()),
        "{} bytes",
        page.len()
    );
    let s = scrape::parse(&page).unwrap();
    assert_eq!(s.server(), "vllm");
    assert!(s.skipped.is_none());
    let w = scrape::window(
        &scrape::parse(&vllm_page(&VllmSpec::default(), 99)).unwrap(),
        &s,
        1.0,
    );
    assert_eq!(w.ttft_s.unwrap().n, 20);
    assert_eq!(w.signals.queue_s.unwrap().n, 20);
    assert_eq!(w.signals.finished["stop"], 16.0);
    // Our own scrapes of /metrics are not counted as the server's traffic (20 completions
    // and a health check).
    assert_eq!(w.signals.http["2xx"], 21.0);
    assert!(w.engines.is_empty(), "one engine is no sub-row");
    let dp = VllmSpec {
        engines: 2,
        ..VllmSpec::default()
    };
    let two = scrape::window(
        &scrape::parse(&vllm_page(&dp, 1)).unwrap(),
        &scrape::parse(&vllm_page(&dp, 2)).unwrap(),
        1.0,
    );
    assert_eq!(two.engines.keys().collect::<Vec<_>>(), ["0", "1"]);
    assert_eq!(
        (two.ttft_s.unwrap().n, two.engines["1"].ttft_s.unwrap().n),
        (40, 20)
    );
    let dcgm = dcgm_page("gpu01", 8, &[87.0]);
    assert!(dcgm.len() > 30_000, "{}", dcgm.len());
}

#[test]
fn two_servers_of_different_speed_keep_distinct_rows() {
    let fast = vllm(VllmSpec {
        ttft_s: 0.05,
        ..VllmSpec::default()
    });
    let slow = vllm(VllmSpec {
        ttft_s: 0.6,
        ..VllmSpec::default()
    });
    let o = watch(&[
        &fast.url,
        &slow.url,
        "--interval",
        "200ms",
        "--duration",
        "1300ms",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = json_lines(&o.stdout);
    let windows = |source: Option<&str>| -> Vec<&Value> {
        lines
            .iter()
            .filter(|v| v["type"] == "window")
            .filter(|v| match source {
                Some(s) => v["source"] == s,
                None => v["source"].is_null(),
            })
            .collect()
    };
    let (f, s, total) = (
        windows(Some(&name(&fast.url))),
        windows(Some(&name(&slow.url))),
        windows(None),
    );
    assert!(
        !f.is_empty() && !s.is_empty() && !total.is_empty(),
        "{lines:?}"
    );
    for w in &f {
        assert_eq!(w["ttft_s"]["n"], 20, "{w}");
        assert!(w["ttft_s"]["p99"].as_f64().unwrap() < 0.1, "{w}");
    }
    for w in &s {
        assert!(w["ttft_s"]["p50"].as_f64().unwrap() > 0.25, "{w}");
    }
    // The total counts both, and its tail is the slow node's.
    for w in &total {
        assert_eq!(w["sources"], 2, "{w}");
        assert_eq!(w["ttft_s"]["n"], 40, "{w}");
        assert!(w["ttft_s"]["p99"].as_f64().unwrap() > 0.25, "{w}");
    }
    let summary = lines.last().unwrap();
    assert_eq!(summary["type"], "watch_summary");
    let nodes = summary["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["source"], name(&fast.url));
    assert_eq!(nodes[0]["ttft_s"]["n"], 20 * f.len() as u64);
    assert!(nodes[1]["ttft_s"]["p50"].as_f64().unwrap() > 0.25);
}

#[test]
fn a_dcgm_page_reaches_the_json_lines() {
    let v = vllm(VllmSpec::default());
    let dcgm = server::serve(Arc::new(|_| (200, dcgm_page("gpu01", 8, &[87.0, 12.0]))));
    let node = server::serve(Arc::new(|k| (200, node_exporter_page(4, k))));
    let o = watch(&[
        &v.url,
        "--gpu-metrics",
        &dcgm.url,
        &node.url,
        "--interval",
        "200ms",
        "--duration",
        "900ms",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = json_lines(&o.stdout);
    let gpu: Vec<&Value> = lines
        .iter()
        .filter(|v| v["type"] == "node_metrics")
        .collect();
    assert!(gpu.len() >= 2, "{lines:?}");
    for g in &gpu {
        // Both exporters are on the server's host: they go with its node.
        assert_eq!(g["source"], name(&v.url), "{g}");
        let gpus = g["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 8, "{g}");
        assert_eq!(gpus[0]["util_pct"], 87.0);
        assert_eq!(gpus[1]["util_pct"], 12.0);
        assert_eq!(gpus[0]["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(gpus[0]["mem_used_bytes"], 70000.0 * 1024.0 * 1024.0);
        assert_eq!(g["exporters"], serde_json::json!(["dcgm", "node"]));
    }
    // The host's CPU share needs two scrapes of node_exporter's counters: 60 % busy.
    let cpu = gpu.last().unwrap()["host"]["cpu_pct"].as_f64().unwrap();
    assert!((cpu - 60.0).abs() < 1e-6, "{cpu}");
}

#[test]
fn an_unreachable_node_is_marked_and_retried_and_one_that_comes_back_is_read() {
    let up = vllm(VllmSpec::default());
    let dead = server::dead_url();
    // Fails its first three scrapes, then serves.
    let flaky = server::serve(Arc::new(|k| {
        if k < 3 {
            (503, "starting".into())
        } else {
            (200, vllm_page(&VllmSpec::default(), k))
        }
    }));
    let o = watch(&[
        &up.url,
        &dead,
        &flaky.url,
        "--interval",
        "200ms",
        "--duration",
        "1700ms",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 of 3 nodes cannot be read yet"), "{err}");
    let lines = json_lines(&o.stdout);
    let failed = |node: &str| {
        lines
            .iter()
            .filter(|v| v["type"] == "scrape_failed" && v["source"] == node)
            .count()
    };
    let windows = |node: &str| {
        lines
            .iter()
            .filter(|v| v["type"] == "window" && v["source"] == node)
            .count()
    };
    assert!(failed(&name(&dead)) >= 3, "tried every interval: {lines:?}");
    assert_eq!(windows(&name(&dead)), 0);
    assert!(lines.iter().any(|v| v["type"] == "scrape_failed"
        && v["message"]
            .as_str()
            .unwrap()
            .contains("connection refused")));
    assert_eq!(failed(&name(&flaky.url)), 3, "{lines:?}");
    assert!(
        windows(&name(&flaky.url)) >= 1,
        "read once it answered: {lines:?}"
    );
    assert!(windows(&name(&up.url)) >= 4);
}

#[test]
fn every_node_down_at_start_is_one_line() {
    let (a, b) = (server::dead_url(), server::dead_url());
    let o = watch(&[&a, &b, "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot read any of the 2 nodes") && err.contains("connection refused"),
        "{err}"
    );
}

#[test]
fn a_malformed_page_names_the_url_and_line() {
    let bad = server::serve(Arc::new(|_| {
        (200, "# HELP x y\nvllm:num_requests_running{model_name=\"m\"} 1\nvllm:num_requests_waiting{model_name=\"m\" 2\n".into())
    }));
    let o = watch(&[&bad.url, "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}/metrics: line 3:", bad.url)),
        "{err}"
    );
    // An exporter's malformed page is a failure of that exporter, named the same way.
    let v = vllm(VllmSpec::default());
    let exporter = server::serve(Arc::new(|_| {
        (200, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 5\n".into())
    }));
    let o = watch(&[
        &v.url,
        "--gpu-metrics",
        &exporter.url,
        "--interval",
        "200ms",
        "--duration",
        "700ms",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = json_lines(&o.stdout);
    let f = lines
        .iter()
        .find(|v| v["type"] == "scrape_failed")
        .expect("the exporter's failure");
    assert_eq!(f["exporter"], format!("{}/metrics", exporter.url));
    assert!(f["message"].as_str().unwrap().contains("line 1:"), "{f}");
    assert!(
        lines.iter().any(|v| v["type"] == "window"),
        "the server is still read"
    );
}

#[test]
fn slurm_nodes_at_port() {
    let v = vllm(VllmSpec::default());
    let port = v.url.rsplit(':').next().unwrap().to_string();
    let o = Command::new(BIN)
        .args([
            "watch",
            "--port",
            &port,
            "--interval",
            "200ms",
            "--duration",
            "700ms",
            "--format",
            "json",
        ])
        .env("SLURM_JOB_NODELIST", "127.0.0.[1]")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = json_lines(&o.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "window" && l["ttft_s"]["n"] == 20),
        "{lines:?}"
    );
    let o = Command::new(BIN)
        .args(["watch"])
        .env_remove("SLURM_JOB_NODELIST")
        .env_remove("SLURM_NODELIST")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SLURM_JOB_NODELIST"));
}

/// `watch --record`: each node's windows and their total, the exporters and the failures are
/// lines of a record that `report` and `compare` read; the summary is the whole watch.
#[test]
fn a_watch_record_reads_back() {
    let (a, b) = (
        vllm(VllmSpec::default()),
        vllm(VllmSpec {
            ttft_s: 0.6,
            ..VllmSpec::default()
        }),
    );
    let dcgm = server::serve(Arc::new(|_| (200, dcgm_page("gpu01", 2, &[50.0]))));
    let dead = server::dead_url();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("watch.jsonl");
    let o = watch(&[
        &a.url,
        &b.url,
        &dead,
        "--gpu-metrics",
        &dcgm.url,
        "--interval",
        "200ms",
        "--duration",
        "1100ms",
        "--format",
        "json",
        "--record",
        rec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = json_lines(&o.stdout);
    let summary = printed.last().unwrap();
    let lines = json_lines(&std::fs::read(&rec).unwrap());
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[0]["config"]["engine"], "watch");
    assert_eq!(lines[0]["config"]["endpoints"].as_array().unwrap().len(), 3);
    assert_eq!(lines.last().unwrap()["type"], "footer");
    let count = |t: &str| lines.iter().filter(|l| l["type"] == t).count();
    assert!(
        count("server_metrics") >= 3 && count("node_metrics") >= 1 && count("scrape_failed") >= 1,
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|l| l["type"] == "server_metrics" && l["source"] == name(&b.url)));
    let o = Command::new(BIN)
        .args(["report", rec.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    // The record's server view is the whole watch, as the watch printed it.
    assert_eq!(report["server"]["ttft_s"], summary["ttft_s"], "{report}");
    assert_eq!(report["server"]["windows"], count_totals(&lines));
    let md = Command::new(BIN)
        .args(["report", rec.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(md.status.success());
    assert!(
        String::from_utf8_lossy(&md.stdout).contains("| TTFT |"),
        "{}",
        String::from_utf8_lossy(&md.stdout)
    );
    let o = Command::new(BIN)
        .args(["compare", rec.to_str().unwrap(), rec.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0)),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn count_totals(lines: &[Value]) -> u64 {
    lines
        .iter()
        .filter(|l| l["type"] == "server_metrics" && l["source"].is_null())
        .count() as u64
}

/// `infertop agent` here (no NVML): it serves the host's figures, says NVML is unavailable,
/// and `watch --gpu-metrics` reads it.
#[test]
fn the_agent_serves_host_figures_and_watch_reads_them() {
    let mut agent = Command::new(BIN)
        .args(["agent", "--port", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(agent.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(
        line.contains("unauthenticated") && line.contains("this machine only"),
        "{line}"
    );
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string();
    let mut conn = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut page = String::new();
    conn.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("infertop_host_memory_total_bytes"), "{page}");
    if page.contains("infertop_agent_nvml_available 0") {
        assert!(
            line.contains("NVML unavailable") && page.contains("# NVML unavailable"),
            "{line}{page}"
        );
    }
    let v = vllm(VllmSpec::default());
    let o = watch(&[
        &v.url,
        "--gpu-metrics",
        &url,
        "--interval",
        "200ms",
        "--duration",
        "700ms",
        "--format",
        "json",
    ]);
    let _ = agent.kill();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines = json_lines(&o.stdout);
    let t = lines
        .iter()
        .find(|l| l["type"] == "node_metrics")
        .expect("the agent's figures");
    assert_eq!(t["exporters"], serde_json::json!(["infertop"]));
    assert!(t["host"]["mem_total_bytes"].as_f64().unwrap() > 0.0, "{t}");
    let _ = agent.wait();
}

// ---- The screen ----

fn config(nodes: &[&str]) -> WatchConfig {
    WatchConfig {
        url: format!("{} nodes", nodes.len()),
        server: "vllm".into(),
        interval: Duration::from_secs(1),
        themes: vec![Theme::fallback()],
        glyphs: Glyphs::new(false),
        keys: KeyMap::default(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
    }
}

/// The window between scrapes `k − 1` and `k` of a page.
fn window_of(spec: &VllmSpec, k: u64, source: Option<&str>) -> ServerWindow {
    let a = scrape::parse(&vllm_page(spec, k - 1)).unwrap();
    let b = scrape::parse(&vllm_page(spec, k)).unwrap();
    let mut w = scrape::window(&a, &b, 1.0);
    w.source = source.map(str::to_string);
    w
}

fn dcgm(host: &str, util: &[f64]) -> NodeTelemetry {
    let s = scrape::exporter::parse(&dcgm_page(host, 8, util)).unwrap();
    scrape::exporter::telemetry(None, &s, 1.0)
}

/// Four nodes: gpu01 fast, gpu02 slow with a queue, gpu03 down, gpu04 two data-parallel
/// engines; DCGM on gpu01 and gpu02.
fn cluster() -> WatchState {
    let names = ["gpu01:8000", "gpu02:8000", "gpu03:8000", "gpu04:8000"];
    let mut s = WatchState::new(config(&names));
    let fast = VllmSpec {
        ttft_s: 0.08,
        ..VllmSpec::default()
    };
    let slow = VllmSpec {
        ttft_s: 0.9,
        queue_s: 2.0,
        waiting: 12,
        kv_usage: 0.97,
        ..VllmSpec::default()
    };
    let dp = VllmSpec {
        engines: 2,
        ttft_s: 0.1,
        spec: Some((300, 0.7)),
        mfu_flops: Some(4e14),
        ..VllmSpec::default()
    };
    for k in 1..=30u64 {
        let t = k as f64;
        let ws = [
            window_of(&fast, k, Some(names[0])),
            window_of(&slow, k, Some(names[1])),
            window_of(&dp, k, Some(names[3])),
        ];
        for w in &ws {
            s.apply(WatchEvent::Window {
                t_s: t,
                window: Box::new(w.clone()),
            });
        }
        let refs: Vec<&ServerWindow> = ws.iter().collect();
        let total = infertop::stats::total_window(&refs, 1.0);
        s.apply(WatchEvent::Window {
            t_s: t,
            window: Box::new(total),
        });
        if k > 20 {
            s.apply(WatchEvent::NodeFailed {
                t_s: t,
                node: names[2].into(),
                exporter: None,
                message: format!("http://{}/metrics (connection refused)", names[2]),
            });
        } else {
            let w = window_of(&fast, k, Some(names[2]));
            s.apply(WatchEvent::Window {
                t_s: t,
                window: Box::new(w),
            });
        }
    }
    s.apply(WatchEvent::Telemetry {
        t_s: 30.0,
        node: names[0].into(),
        telemetry: Box::new(dcgm("gpu01", &[87.0, 85.0])),
    });
    s.apply(WatchEvent::Telemetry {
        t_s: 30.0,
        node: names[1].into(),
        telemetry: Box::new(dcgm("gpu02", &[35.0])),
    });
    s.tick(Duration::from_secs(30));
    s
}

fn draw(s: &WatchState, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render::render(f, s)).unwrap();
    terminal
}

fn text(t: &Terminal<TestBackend>) -> String {
    let buf = t.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

#[test]
fn cluster_screen_at_both_sizes() {
    let s = cluster();
    let small = draw(&s, 80, 24);
    let screen = text(&small);
    // The slow node stands out, the down node says so, the engines are sub-rows.
    assert!(
        screen.contains("gpu02:8000") && screen.contains('!'),
        "{screen}"
    );
    assert!(screen.contains("down: connection refused"), "{screen}");
    insta::assert_snapshot!("cluster_80x24", small.backend());
    let big = draw(&s, 200, 60);
    let screen = text(&big);
    assert!(
        screen.contains("engine 1"),
        "all engines where they fit: {screen}"
    );
    assert!(
        screen.contains("Detail · total") && screen.contains("16 GPUs"),
        "{screen}"
    );
    insta::assert_snapshot!("cluster_200x60", big.backend());
    // A node's detail has a line per GPU.
    let mut s = s;
    s.update(Action::SelectDown);
    let screen = text(&draw(&s, 200, 60));
    assert!(
        screen.contains("gpu0 util 87%") && screen.contains("gpu1 util 85%"),
        "{screen}"
    );
}

#[test]
fn selecting_a_node_shows_its_charts_and_detail() {
    let mut s = cluster();
    s.update(Action::SelectDown);
    s.update(Action::SelectDown);
    assert_eq!(s.selected_name(), "gpu02:8000");
    let screen = text(&draw(&s, 80, 24));
    assert!(screen.contains("> gpu02:8000"), "{screen}");
    // Wide enough, the charts say whose they are.
    let screen = text(&draw(&s, 200, 60));
    assert!(screen.contains("TTFT p50/p99 · gpu02:8000"), "{screen}");
    s.update(Action::CycleView);
    let detail = draw(&s, 80, 24);
    let screen = text(&detail);
    assert!(
        screen.contains("Detail · gpu02:8000") && screen.contains("queue"),
        "{screen}"
    );
    insta::assert_snapshot!("cluster_detail_80x24", detail.backend());
    // The selection stays within the rows.
    for _ in 0..10 {
        s.update(Action::SelectDown);
    }
    assert_eq!(s.selected_name(), "gpu04:8000");
    s.update(Action::CycleView);
    let screen = text(&draw(&s, 80, 24));
    assert!(
        screen.contains("engine 1"),
        "the selected node's engines: {screen}"
    );
    for _ in 0..10 {
        s.update(Action::SelectUp);
    }
    assert_eq!(s.selected_name(), "total");
}

/// Many nodes: the table scrolls to keep the selection in view.
#[test]
fn sixty_four_nodes_scroll() {
    let names: Vec<String> = (1..=64).map(|i| format!("gpu{i:02}:8000")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut s = WatchState::new(config(&refs));
    let spec = VllmSpec::default();
    for n in &names {
        s.apply(WatchEvent::Window {
            t_s: 1.0,
            window: Box::new(window_of(&spec, 1, Some(n))),
        });
    }
    for _ in 0..40 {
        s.update(Action::SelectDown);
    }
    let screen = text(&draw(&s, 80, 24));
    assert!(screen.contains("> gpu40:8000"), "{screen}");
    assert!(screen.contains("more up, 24 down"), "{screen}");
}

/// In a real terminal: the node table draws, `j` selects the next row and `v` shows its
/// detail; q quits and the summary has a row per node.
#[test]
fn in_a_terminal_rows_select_and_detail_shows() {
    let (a, b) = (
        vllm(VllmSpec::default()),
        vllm(VllmSpec {
            ttft_s: 0.6,
            ..VllmSpec::default()
        }),
    );
    let mut s = common::pty::Session::start(
        &["watch", &a.url, &b.url, "--interval", "200ms"],
        80,
        24,
        100,
    );
    s.wait_for(
        &["Nodes", "total", &name(&b.url), "2 of 2 up"],
        Duration::from_secs(60),
    );
    s.send("j");
    s.wait_for(&[&format!("> {}", name(&a.url))], Duration::from_secs(20));
    s.send("v");
    s.wait_for(
        &[&format!("Detail · {}", name(&a.url)), "queue"],
        Duration::from_secs(20),
    );
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}; screen:\n{}", s.contents());
    s.assert_restored();
    s.wait_for(
        &["the whole watch", "| node |", &name(&b.url)],
        Duration::from_secs(5),
    );
}
