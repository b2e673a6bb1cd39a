//! `infertop watch URL…`: a passive `top` for serving engines already in production. No load
//! is generated: each node's Prometheus `/metrics` (and its GPU and host exporters, with
//! `--gpu-metrics`) is read every `--interval`, and each window's figures (request rate,
//! running and waiting, KV-cache usage, preemptions, prefix-cache hits, TTFT / ITL / E2E /
//! queue percentiles from the histograms' bucket deltas, and the other signals) are shown per
//! node and in total: on the live screen, as lines, or as JSON lines with `--format json`;
//! `--record FILE` keeps them. On exit (`--duration`, Ctrl-C), the whole watch is one more
//! window, the first scrape to the last, and with several nodes each node's too.
//!
//! Nodes are the URLs given, hostlists expanded at `--port`, or the Slurm job's nodes. A node
//! that cannot be read is marked and tried again every interval; the watch ends at the start
//! only if no server can be read at all.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::print_stdout;
use crate::event::{
    NodeTelemetry, ServerQuantiles as Quantiles, ServerWindow as Window, StopReason,
};
use crate::exit::{Failure, EXIT_OK};
use crate::plan::opts::{WatchFormat, WatchOpts};
use crate::plan::watch::WatchPlan;
use crate::record::line::{Line, NodeMetricsLine, ScrapeFailedLine, ServerMetricsLine};
use crate::record::writer::Recorder;
use crate::scrape::{Collector, Report};
use crate::signals::Signals;
use crate::stats::ServerSpan;
use crate::ui::watch::WatchEvent;
use crate::util::format;
use crate::util::say;
use crate::util::table::{or_missing, TextTable, MISSING};

/// `infertop watch`.
pub fn watch(args: &WatchOpts) -> Result<i32, Failure> {
    let WatchPlan {
        nodes,
        shown,
        look,
        header,
    } = crate::plan::watch::plan(args)?;
    let several = nodes.len() > 1;
    let signals =
        Signals::register().map_err(|e| Failure::runtime(format!("cannot watch signals: {e}")))?;
    let started = Instant::now();
    let timeout = Duration::from_secs(10).min(args.interval * 5);
    let mut collector =
        Collector::new(nodes.clone(), timeout, started).map_err(Failure::runtime)?;
    // The first round decides, before the terminal is taken over, whether there is anything
    // to watch: when no server can be read, that is one line and exit 1.
    let first = collector.first_round();
    let servers: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].metrics.is_some())
        .collect();
    let read: Vec<usize> = servers
        .iter()
        .copied()
        .filter(|&i| collector.has_read(i))
        .collect();
    let exporters_read = first.iter().any(|r| matches!(r, Report::Telemetry { .. }));
    if read.is_empty() && !(servers.is_empty() && exporters_read) {
        let failed: Vec<&str> = first
            .iter()
            .filter_map(|r| match r {
                Report::Failed { message, .. } => Some(message.as_str()),
                _ => None,
            })
            .collect();
        let what = if servers.is_empty() {
            "exporter"
        } else {
            "server"
        };
        let first_failure = failed.first().copied().unwrap_or("no response");
        return Err(Failure::runtime(match failed.len() {
            0 | 1 => format!(
                "watch: cannot read {first_failure}; is the {what} up and does it export Prometheus metrics?"
            ),
            n => format!(
                "watch: cannot read any of the {n} nodes: {first_failure} (and {} more); are the servers up?",
                n - 1
            ),
        }));
    }
    let server = read
        .first()
        .and_then(|&i| collector.last_scrape(i))
        .map_or(
            if servers.is_empty() {
                "exporters"
            } else {
                "unknown"
            },
            |s| s.server(),
        )
        .to_string();
    let dashboard =
        !args.headless && args.format == WatchFormat::Text && std::io::stdout().is_terminal();
    say!(
        "infertop: watching {shown} ({server}), a window every {:?}; {} stops",
        args.interval,
        if dashboard { "q or Ctrl-C" } else { "Ctrl-C" }
    );
    if several && read.len() < servers.len() {
        say!(
            "infertop: warning: {} of {} nodes cannot be read yet; their rows are marked and they are tried every interval",
            servers.len() - read.len(),
            servers.len()
        );
    }
    let recorder = match &args.record {
        Some(path) => Some(Recorder::create(path, header, false).map_err(Failure::usage)?),
        None => None,
    };
    let book = Arc::new(Mutex::new(Book {
        server: server.clone(),
        several,
        screen: dashboard,
        total: ServerSpan::default(),
        nodes: nodes
            .iter()
            .map(|n| NodeBook {
                name: n.name.clone(),
                span: ServerSpan::default(),
                failures: 0,
            })
            .collect(),
        recorder,
        last_t_s: 0.0,
        canary: crate::stats::CanaryStats::default(),
    }));
    let (tx, rx) = crossbeam_channel::unbounded::<WatchEvent>();
    let stop = Arc::new(AtomicBool::new(false));
    let interval = args.interval;
    let canary_tx = tx.clone();
    let thread = {
        let (stop, book) = (stop.clone(), book.clone());
        std::thread::Builder::new()
            .name("infertop-watch".into())
            .spawn(move || {
                let mut emit = |t_s: f64, report: Report| {
                    let ev = match book.lock() {
                        Ok(mut b) => b.take(t_s, report),
                        Err(_) => return false,
                    };
                    ev.is_none_or(|ev| tx.send(ev).is_ok())
                };
                for r in first {
                    if !emit(0.0, r) {
                        return;
                    }
                }
                collector.run(interval, &stop, &mut emit);
            })
            .map_err(|e| Failure::runtime(format!("watch: cannot start the scraper: {e}")))?
    };
    if let Some(plan) = args.probe {
        start_canary(plan, args, &nodes, book.clone(), canary_tx, started)?;
    }
    let config = crate::ui::watch::WatchConfig {
        url: shown,
        server: server.clone(),
        interval: args.interval,
        themes: look.themes,
        glyphs: crate::ui::theme::Glyphs::new(look.ascii),
        keys: look.keys,
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
    };
    let deadline = args.duration.map(|d| started + d);
    let outcome = if dashboard {
        watch_dashboard(args, rx, config, &signals, started, deadline)
    } else {
        watch_lines(args, &rx, &signals, several, deadline)
    };
    // The thread ends at its next look at `stop`, or with the process: quitting never waits
    // on a scrape in flight (up to 5 intervals when a server hangs).
    stop.store(true, Ordering::Relaxed);
    drop(thread);
    let (stop_reason, result) = match outcome {
        Ok(reason) => (reason, Ok(())),
        Err(f) => (StopReason::Error, Err(f)),
    };
    let Finished {
        total,
        nodes: per_node,
        record_error,
        canary,
    } = match book.lock() {
        Ok(mut b) => b.finish(&stop_reason, started.elapsed().as_secs_f64()),
        Err(poisoned) => poisoned
            .into_inner()
            .finish(&stop_reason, started.elapsed().as_secs_f64()),
    };
    let mut text = summary(&total, &per_node, args.format);
    if let Some(c) = canary {
        text.push_str(&match args.format {
            WatchFormat::Text => crate::summary::canary_markdown(&c),
            WatchFormat::Json => {
                let mut v = c.to_json();
                v["type"] = "canary_summary".into();
                format!("{v}\n")
            }
        });
    }
    if dashboard {
        // The terminal may have hung up (SIGHUP): nothing better to do with a failed write.
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    } else {
        print_stdout(&text)?;
    }
    if let Some(e) = record_error {
        say!("infertop: warning: the record is incomplete: {e}");
    }
    result?;
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// What the watch keeps for its summary and record: the total's span and each node's, and
/// the record being written. The scraper's thread folds every report in here, then hands
/// the screen or the printer its event.
struct Book {
    server: String,
    several: bool,
    /// The live screen has the terminal: nothing goes to stderr.
    screen: bool,
    total: ServerSpan,
    nodes: Vec<NodeBook>,
    recorder: Option<Recorder>,
    last_t_s: f64,
    /// The canary lane's figures (`--probe`).
    canary: crate::stats::CanaryStats,
}

/// What the book hands back at the end: the whole watch's window, each node's (with its
/// failed scrapes), the record's error if it could not be finished, and the canary lane's.
struct Finished {
    total: Window,
    nodes: Vec<(String, Window, u64)>,
    record_error: Option<String>,
    canary: Option<crate::stats::CanarySummary>,
}

struct NodeBook {
    name: String,
    span: ServerSpan,
    failures: u64,
}

impl Book {
    fn node(&mut self, name: &str) -> Option<&mut NodeBook> {
        self.nodes.iter_mut().find(|n| n.name == name)
    }

    fn line(&mut self, line: Line) {
        if let Some(r) = &mut self.recorder {
            r.write_line(&line);
        }
    }

    /// Folds one report in, records it, and returns what the view gets.
    fn take(&mut self, t_s: f64, report: Report) -> Option<WatchEvent> {
        self.last_t_s = t_s;
        match report {
            Report::Window(w) => {
                match &w.source {
                    Some(node) => {
                        let node = node.clone();
                        if let Some(n) = self.node(&node) {
                            n.span.add(&w);
                        }
                    }
                    None => self.total.add(&w),
                }
                self.line(Line::ServerMetrics(ServerMetricsLine {
                    t_s,
                    window: w.as_ref().clone(),
                }));
                Some(WatchEvent::Window { t_s, window: w })
            }
            Report::Telemetry { node, telemetry } => {
                self.line(Line::NodeMetrics(NodeMetricsLine {
                    t_s,
                    source: node.clone(),
                    telemetry: telemetry.as_ref().clone(),
                }));
                Some(WatchEvent::Telemetry {
                    t_s,
                    node,
                    telemetry,
                })
            }
            Report::Failed {
                node,
                exporter,
                message,
            } => {
                if let Some(n) = self.node(&node) {
                    n.failures += 1;
                }
                let single_server = !self.several && exporter.is_none();
                self.line(Line::ScrapeFailed(ScrapeFailedLine {
                    t_s,
                    source: (!single_server).then(|| node.clone()),
                    exporter: exporter.clone(),
                    message: message.clone(),
                }));
                Some(if single_server {
                    WatchEvent::ScrapeFailed { t_s, message }
                } else {
                    WatchEvent::NodeFailed {
                        t_s,
                        node,
                        exporter,
                        message,
                    }
                })
            }
            Report::Skipped { message, .. } => {
                // On the live screen stderr is the screen: said in line mode only.
                if !self.screen {
                    say!("infertop: warning: {message}");
                }
                None
            }
        }
    }

    /// A canary ended at `t_s`: recorded, and the view's event.
    fn canary(&mut self, t_s: f64, done: Box<crate::event::CanaryDone>) -> WatchEvent {
        self.canary.record(&done);
        self.line(Line::Event(crate::record::line::EventLine {
            t_s,
            event: crate::record::line::RunEvent::Canary(done.as_ref().clone()),
        }));
        WatchEvent::Canary {
            t_s,
            done,
            summary: Box::new(self.canary.summary().unwrap_or_default()),
        }
    }

    /// The whole watch (and each node's), and the record's footer written.
    fn finish(&mut self, stop: &StopReason, elapsed_s: f64) -> Finished {
        let total = self.total.window(&self.server);
        let nodes: Vec<(String, Window, u64)> = if self.several {
            self.nodes
                .iter()
                .map(|n| {
                    let mut w = n.span.window(&self.server);
                    w.source = Some(n.name.clone());
                    (n.name.clone(), w, n.failures)
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut error = None;
        if let Some(mut r) = self.recorder.take() {
            let summary = crate::summary::RunSummary::from_stats(&crate::stats::RunStats::new())
                .with_server(Some(self.total.summary(&self.server)))
                .with_canary(self.canary.summary());
            r.finish(stop, elapsed_s, &summary);
            error = r.error().map(str::to_string);
        }
        Finished {
            total,
            nodes,
            record_error: error,
            canary: self.canary.summary(),
        }
    }
}

/// `--probe`: the canary lane on a thread of its own, sending to the first node's server; a
/// thread hands each result to the book (record, summary) and the view.
fn start_canary(
    plan: crate::engine::http::canary::CanaryPlan,
    args: &WatchOpts,
    nodes: &[crate::scrape::Node],
    book: Arc<Mutex<Book>>,
    tx: crossbeam_channel::Sender<WatchEvent>,
    started: Instant,
) -> Result<(), Failure> {
    let Some(metrics) = nodes.iter().find_map(|n| n.metrics.as_ref()) else {
        return Err(Failure::usage(
            "--probe: no server to send canaries to (watch a server's metrics URL)",
        ));
    };
    let base = metrics.origin().ascii_serialization();
    let endpoint = crate::engine::http::Endpoint::parse(&base)
        .map_err(|e| Failure::usage(format!("--probe: {e}")))?;
    let (etx, erx) = crossbeam_channel::unbounded::<crate::event::Event>();
    crate::engine::http::canary::spawn(
        plan,
        endpoint,
        args.probe_model.clone(),
        std::env::var("OPENAI_API_KEY").ok(),
        etx,
    )
    .map_err(|e| Failure::runtime(format!("--probe: cannot start the canary lane: {e}")))?;
    std::thread::Builder::new()
        .name("infertop-canary-book".into())
        .spawn(move || {
            for ev in erx {
                let ev = match ev {
                    crate::event::Event::Canary(done) => {
                        let t_s = started.elapsed().as_secs_f64();
                        match book.lock() {
                            Ok(mut b) => b.canary(t_s, done),
                            Err(_) => return,
                        }
                    }
                    crate::event::Event::Error { message, .. } => {
                        WatchEvent::CanaryFailed { message }
                    }
                    _ => continue,
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| Failure::runtime(format!("--probe: cannot start the canary lane: {e}")))?;
    Ok(())
}

/// Frames per second of the live screen when `--fps` is not given: its figures change once a
/// window, and a new window draws at once.
const WATCH_FPS: u32 = 4;

/// The live screen until q, a signal or `--duration`.
fn watch_dashboard(
    args: &WatchOpts,
    rx: crossbeam_channel::Receiver<WatchEvent>,
    config: crate::ui::watch::WatchConfig,
    signals: &Signals,
    started: Instant,
    deadline: Option<Instant>,
) -> Result<StopReason, Failure> {
    let opts = crate::ui::watch::WatchLoop {
        signals: signals.clone(),
        started,
        deadline,
        fps: args.display.fps.unwrap_or(WATCH_FPS),
    };
    // A panic in the screen has restored the terminal (ratatui's hook) and printed itself;
    // the summary still prints what was measured.
    crate::ui::watch::run(rx, config, &opts)
        .map_err(|f| Failure::runtime(format!("watch: {f}; the summary covers every window read")))
}

/// Lines on stdout until a signal or `--duration`: one per window (each node's, then the
/// total), per exporter reading, and failures (on stderr for text, as lines for JSON).
fn watch_lines(
    args: &WatchOpts,
    rx: &crossbeam_channel::Receiver<WatchEvent>,
    signals: &Signals,
    several: bool,
    deadline: Option<Instant>,
) -> Result<StopReason, Failure> {
    if args.format == WatchFormat::Text {
        print_stdout(&format!("{}\n", text_header(several)))?;
    }
    // With several nodes a failing node is said when it starts failing and when it is back,
    // not every interval.
    let mut failing: Vec<String> = Vec::new();
    loop {
        if let Some(reason) = signals.stop_reason() {
            return Ok(reason);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(StopReason::DurationLimit);
        }
        let ev = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(ev) => ev,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(Failure::runtime(
                    "watch: the scraper thread stopped; the summary covers what it read",
                ))
            }
        };
        match (&ev, args.format) {
            (WatchEvent::Window { t_s, window }, format) => {
                if let Some(node) = &window.source {
                    if let Some(i) = failing.iter().position(|n| n == node) {
                        failing.remove(i);
                        say!("infertop: {node} is read again");
                    }
                }
                print_stdout(&render(window, format, *t_s, several))?;
            }
            (
                WatchEvent::Telemetry {
                    t_s,
                    node,
                    telemetry,
                },
                format,
            ) => {
                print_stdout(&telemetry_line(node, telemetry, format, *t_s))?;
            }
            (WatchEvent::ScrapeFailed { t_s, message }, WatchFormat::Text) => {
                let _ = t_s;
                say!(
                    "infertop: warning: scrape failed: {message}; next in {:?}",
                    args.interval
                )
            }
            (
                WatchEvent::NodeFailed {
                    node,
                    message,
                    exporter,
                    ..
                },
                WatchFormat::Text,
            ) => {
                let key = format!("{node} {}", exporter.as_deref().unwrap_or(""));
                if !failing.contains(&key) {
                    say!(
                        "infertop: warning: {node}: cannot read {message}; retrying every {:?}",
                        args.interval
                    );
                    failing.push(key);
                }
            }
            (WatchEvent::ScrapeFailed { t_s, message }, WatchFormat::Json) => {
                print_stdout(&failed_json(*t_s, None, None, message))?
            }
            (
                WatchEvent::NodeFailed {
                    t_s,
                    node,
                    exporter,
                    message,
                },
                WatchFormat::Json,
            ) => print_stdout(&failed_json(*t_s, Some(node), exporter.as_deref(), message))?,
            (WatchEvent::Canary { t_s, done, .. }, WatchFormat::Text) => {
                let ms = |v: f64| format!("{:.1} ms", v * 1e3);
                match &done.error {
                    Some(e) => say!("infertop: canary #{} failed: {e}", done.index),
                    None => print_stdout(&format!(
                        "{:>8.1}s canary #{}: TTFT {}, E2E {}, {} tokens\n",
                        t_s,
                        done.index,
                        done.ttft_s.map_or("-".into(), ms),
                        ms(done.e2e_s),
                        done.output_tokens
                    ))?,
                }
            }
            (WatchEvent::Canary { t_s, done, .. }, WatchFormat::Json) => {
                let mut v = serde_json::to_value(done.as_ref()).unwrap_or_default();
                v["type"] = "canary".into();
                v["t_s"] = (*t_s).into();
                print_stdout(&format!("{v}\n"))?
            }
            (WatchEvent::CanaryFailed { message }, _) => say!("infertop: warning: {message}"),
        }
        if let WatchEvent::Telemetry { node, .. } = &ev {
            let key = format!("{node} ");
            failing.retain(|k| !(k.starts_with(&key) && k.len() > key.len()));
        }
    }
}

fn failed_json(t_s: f64, node: Option<&str>, exporter: Option<&str>, message: &str) -> String {
    let mut v = serde_json::json!({"type": "scrape_failed", "t_s": t_s, "message": message});
    if let Some(n) = node {
        v["source"] = n.into();
    }
    if let Some(e) = exporter {
        v["exporter"] = e.into();
    }
    format!("{v}\n")
}

fn ms(q: Option<Quantiles>) -> String {
    match q {
        Some(q) => format!("{:.1}/{:.1}", q.p50 * 1e3, q.p99 * 1e3),
        None => "-".into(),
    }
}

fn num(v: Option<f64>, scale: f64, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{:.*}", digits, v * scale))
}

const NODE_COLUMN: usize = 22;

/// At most `n` characters of `s`, its end kept (node names differ at the end: gpu01, gpu02).
fn truncate(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let tail: String = s.chars().skip(count - (n - 1)).collect();
    format!("~{tail}")
}

fn text_header(several: bool) -> String {
    let line = "     t  req/s  running  waiting  kv %  preempt  prefix hit %  TTFT p50/p99 ms  ITL p50/p99 ms  E2E p50/p99 ms";
    if several {
        format!("{:<NODE_COLUMN$} {line}", "node")
    } else {
        line.to_string()
    }
}

fn render(w: &Window, format: WatchFormat, t_s: f64, several: bool) -> String {
    match format {
        WatchFormat::Json => {
            let mut v = serde_json::to_value(w).unwrap_or_default();
            v["type"] = "window".into();
            v["t_s"] = t_s.into();
            format!("{v}\n")
        }
        WatchFormat::Text => {
            let node = if several {
                let name = w.source.as_deref().unwrap_or("total");
                format!("{:<NODE_COLUMN$} ", truncate(name, NODE_COLUMN))
            } else {
                String::new()
            };
            format!(
                "{node}{:>5.0}s {:>6} {:>8} {:>8} {:>5} {:>8} {:>13} {:>16} {:>15} {:>15}\n",
                t_s,
                num(w.requests_per_s, 1.0, 2),
                num(w.running, 1.0, 0),
                num(w.waiting, 1.0, 0),
                num(w.kv_usage, 100.0, 1),
                num(w.preemptions, 1.0, 0),
                num(w.prefix_hit_rate, 100.0, 1),
                ms(w.ttft_s),
                ms(w.itl_s),
                ms(w.e2e_s),
            )
        }
    }
}

fn telemetry_line(node: &str, t: &NodeTelemetry, format: WatchFormat, t_s: f64) -> String {
    match format {
        WatchFormat::Json => {
            let mut v = serde_json::to_value(t).unwrap_or_default();
            v["type"] = "node_metrics".into();
            v["t_s"] = t_s.into();
            v["source"] = node.into();
            format!("{v}\n")
        }
        WatchFormat::Text => {
            let mut parts = Vec::new();
            for g in &t.gpus {
                let mut p = format!("gpu{}", g.gpu);
                if let Some(u) = g.util_pct {
                    p.push_str(&format!(" {u:.0}%"));
                }
                if let (Some(used), Some(total)) = (g.mem_used_bytes, g.mem_total_bytes) {
                    p.push_str(&format!(
                        " {}/{}",
                        format::bytes(used as u64),
                        format::bytes(total as u64)
                    ));
                }
                if let Some(w) = g.power_w {
                    p.push_str(&format!(" {w:.0}W"));
                }
                if let Some(c) = g.temperature_c {
                    p.push_str(&format!(" {c:.0}C"));
                }
                parts.push(p);
            }
            let h = &t.host;
            if let Some(c) = h.cpu_pct {
                parts.push(format!("cpu {c:.0}%"));
            }
            if let (Some(u), Some(total)) = (h.mem_used_bytes, h.mem_total_bytes) {
                parts.push(format!(
                    "mem {}/{}",
                    format::bytes(u as u64),
                    format::bytes(total as u64)
                ));
            }
            if let Some(l) = h.load1 {
                parts.push(format!("load {l:.2}"));
            }
            format!(
                "{:<NODE_COLUMN$} {:>5.0}s {}\n",
                truncate(node, NODE_COLUMN),
                t_s,
                if parts.is_empty() {
                    "no GPU or host figures".to_string()
                } else {
                    parts.join(" · ")
                }
            )
        }
    }
}

fn summary(w: &Window, nodes: &[(String, Window, u64)], format: WatchFormat) -> String {
    match format {
        WatchFormat::Json => {
            let mut v = serde_json::to_value(w).unwrap_or_default();
            v["type"] = "watch_summary".into();
            if !nodes.is_empty() {
                v["nodes"] = nodes
                    .iter()
                    .map(|(_, w, failures)| {
                        let mut n = serde_json::to_value(w).unwrap_or_default();
                        n["failed_scrapes"] = (*failures).into();
                        n
                    })
                    .collect();
            }
            format!("{v}\n")
        }
        WatchFormat::Text => {
            let ms = |v: f64| format!("{:.3} ms", v * 1e3);
            let mut t = TextTable::new()
                .left(["metric (server's histograms)"])
                .right(["p50", "p90", "p99", "n"]);
            let mut row = |name: &str, q: Option<Quantiles>| {
                let figures = match q {
                    Some(q) => [ms(q.p50), ms(q.p90), ms(q.p99), q.n.to_string()],
                    None => [MISSING.into(), MISSING.into(), MISSING.into(), "0".into()],
                };
                t.row(std::iter::once(name.to_string()).chain(figures));
            };
            row("TTFT", w.ttft_s);
            row("ITL", w.itl_s);
            row("E2E", w.e2e_s);
            let s = &w.signals;
            for (name, q) in [
                ("queue", s.queue_s),
                ("prefill", s.prefill_s),
                ("decode", s.decode_s),
            ] {
                if q.is_some() {
                    row(name, q);
                }
            }
            let mut out = format!(
                "\nthe whole watch: {:.0} s of {} metrics, {} requests/s, {} preemptions\n\n{}",
                w.seconds,
                w.server,
                num(w.requests_per_s, 1.0, 2),
                num(w.preemptions, 1.0, 0),
                t.markdown(),
            );
            if !nodes.is_empty() {
                let mut t = TextTable::new().left(["node"]).right([
                    "req/s",
                    "TTFT p50",
                    "TTFT p99",
                    "E2E p99",
                    "n",
                    "failed scrapes",
                ]);
                let cell = |q: Option<Quantiles>, p: fn(&Quantiles) -> f64| {
                    or_missing(q.map(|q| ms(p(&q))))
                };
                for (name, n, failures) in nodes {
                    t.row([
                        name.to_string(),
                        num(n.requests_per_s, 1.0, 2),
                        cell(n.ttft_s, |q| q.p50),
                        cell(n.ttft_s, |q| q.p99),
                        cell(n.e2e_s, |q| q.p99),
                        n.ttft_s.or(n.e2e_s).map_or(0, |q| q.n).to_string(),
                        failures.to_string(),
                    ]);
                }
                out.push('\n');
                out.push_str(&t.markdown());
            }
            out
        }
    }
}
