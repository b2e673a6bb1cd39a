//! `infertop watch` over a cluster (issue 26): what watching 64 nodes costs.
//!
//! In-process metrics servers serve real-sized pages (`tests/common/metrics_pages.rs`: a
//! vLLM page of about 50 KB per node, and with `WATCH_BENCH_GPU=1` a DCGM exporter's page
//! for 8 GPUs per node as well). The scraper (`scrape::Collector`, one thread) reads every
//! node each interval; a second thread folds its reports into the watch screen's state and
//! draws it at the watch's default 4 fps into a terminal backend that counts the bytes it
//! would send. Each thread's CPU time comes from `/proc/thread-self/schedstat`.
//!
//! Printed: the scraper's and the screen's CPU as % of one core (target: both together
//! ≤ 10 % at 64 nodes each second), windows and failures read, the parse cost per page, and
//! the bytes per second the screen sends (the SSH budget: ≤ 20 KB/s at 200x60).
//!
//! Run: `cargo bench --bench watch`. Environment (defaults in brackets): `WATCH_BENCH_NODES`
//! [64], `WATCH_BENCH_SECS` [30], `WATCH_BENCH_INTERVAL_MS` [1000], `WATCH_BENCH_GPU` [1],
//! `WATCH_BENCH_SIZE` [200x60].
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infertop::scrape::{self, Collector, Node, Report};
use infertop::ui::theme::{Glyphs, Theme};
use infertop::ui::watch::{render, WatchConfig, WatchEvent, WatchState};
use infertop::ui::KeyMap;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

#[path = "../tests/common/metrics_pages.rs"]
mod pages;
#[path = "../tests/common/metrics_server.rs"]
mod server;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This thread's time on a CPU so far.
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns: u64 = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// A writer that counts what it is given and keeps none of it.
struct Count(Arc<AtomicU64>);

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() {
    let n: usize = env_or("WATCH_BENCH_NODES", 64);
    let secs: u64 = env_or("WATCH_BENCH_SECS", 30);
    let interval = Duration::from_millis(env_or("WATCH_BENCH_INTERVAL_MS", 1000));
    let gpu = env_or("WATCH_BENCH_GPU", 1u8) == 1;
    let size: String = env_or("WATCH_BENCH_SIZE", "200x60".to_string());
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .unwrap_or((200u16, 60u16));

    // Parse cost alone, single-threaded, on the real-sized page.
    let spec = pages::VllmSpec::default();
    let page = pages::vllm_page(&spec, 1000);
    let reps = 200;
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(scrape::parse(std::hint::black_box(&page)).unwrap());
    }
    let per_page = t.elapsed() / reps;
    let dcgm = pages::dcgm_page("gpu01", 8, &[80.0]);
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(scrape::exporter::parse(std::hint::black_box(&dcgm)).unwrap());
    }
    let per_dcgm = t.elapsed() / reps;
    println!(
        "page: vLLM {} KB parsed in {per_page:?}; DCGM (8 GPUs) {} KB in {per_dcgm:?}",
        page.len() / 1000,
        dcgm.len() / 1000
    );

    let mut nodes = Vec::new();
    let mut keep = Vec::new();
    for i in 0..n {
        let spec = pages::VllmSpec {
            ttft_s: 0.1 + 0.01 * i as f64,
            ..pages::VllmSpec::default()
        };
        let s = server::serve(Arc::new(move |k| (200, pages::vllm_page(&spec, k))));
        let url = scrape::metrics_url(&s.url).unwrap();
        let mut exporters = Vec::new();
        if gpu {
            let host = format!("gpu{i:02}");
            let d = server::serve(Arc::new(move |_| {
                (200, pages::dcgm_page(&host, 8, &[80.0, 40.0]))
            }));
            exporters.push(scrape::metrics_url(&d.url).unwrap());
            keep.push(d);
        }
        nodes.push(Node {
            name: format!("gpu{i:02}:8000"),
            metrics: Some(url),
            exporters,
        });
        keep.push(s);
    }
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = crossbeam_channel::unbounded::<WatchEvent>();
    let failures = Arc::new(AtomicU64::new(0));
    let scraper = {
        let (stop, failures) = (stop.clone(), failures.clone());
        std::thread::spawn(move || {
            let cpu0 = thread_cpu();
            let mut c = Collector::new(nodes, interval * 5, started).unwrap();
            let mut emit = |t_s: f64, r: Report| {
                let ev = match r {
                    Report::Window(window) => WatchEvent::Window { t_s, window },
                    Report::Telemetry { node, telemetry } => WatchEvent::Telemetry {
                        t_s,
                        node,
                        telemetry,
                    },
                    Report::Failed {
                        node,
                        exporter,
                        message,
                    } => {
                        failures.fetch_add(1, Ordering::Relaxed);
                        WatchEvent::NodeFailed {
                            t_s,
                            node,
                            exporter,
                            message,
                        }
                    }
                    Report::Skipped { .. } => return true,
                };
                tx.send(ev).is_ok()
            };
            for r in c.first_round() {
                emit(0.0, r);
            }
            let wall0 = Instant::now();
            let first = thread_cpu();
            c.run(interval, &stop, &mut emit);
            (first - cpu0, thread_cpu() - first, wall0.elapsed())
        })
    };
    let bytes = Arc::new(AtomicU64::new(0));
    let screen = {
        let (stop, bytes) = (stop.clone(), bytes.clone());
        std::thread::spawn(move || {
            let backend = CrosstermBackend::new(Count(bytes));
            let mut terminal = Terminal::with_options(
                backend,
                TerminalOptions {
                    viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
                },
            )
            .unwrap();
            let mut state = WatchState::new(WatchConfig {
                url: format!("{n} nodes"),
                server: "vllm".into(),
                interval,
                themes: vec![Theme::builtin("default").unwrap()],
                glyphs: Glyphs::new(false),
                keys: KeyMap::default(),
                nodes: names,
            });
            let cpu0 = thread_cpu();
            let wall0 = Instant::now();
            let frame = Duration::from_millis(250);
            let mut next = Instant::now();
            let (mut frames, mut windows) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let mut dirty = false;
                while let Ok(ev) = rx.try_recv() {
                    if matches!(&ev, WatchEvent::Window { window, .. } if window.source.is_none()) {
                        windows += 1;
                    }
                    state.apply(ev);
                    dirty = true;
                }
                let now = Instant::now();
                if now >= next || dirty {
                    state.tick(started.elapsed());
                    terminal.draw(|f| render::render(f, &state)).unwrap();
                    frames += 1;
                    next = now + frame;
                }
                std::thread::sleep(
                    Duration::from_millis(20).min(next.saturating_duration_since(Instant::now())),
                );
            }
            (thread_cpu() - cpu0, wall0.elapsed(), frames, windows)
        })
    };
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let (first_cpu, scrape_cpu, scrape_wall) = scraper.join().unwrap();
    let (screen_cpu, screen_wall, frames, windows) = screen.join().unwrap();
    let pct =
        |cpu: Duration, wall: Duration| 100.0 * cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    let (a, b) = (pct(scrape_cpu, scrape_wall), pct(screen_cpu, screen_wall));
    println!(
        "{n} nodes{} every {interval:?} for {secs} s: {windows} totals, {} failed scrapes",
        if gpu { " (+ a DCGM exporter each)" } else { "" },
        failures.load(Ordering::Relaxed)
    );
    println!("first round: {first_cpu:?} of CPU");
    println!("scraper: {a:.2} % of a core ({scrape_cpu:?} over {scrape_wall:.1?})");
    println!("screen {w}x{h} at 4 fps: {b:.2} % of a core ({frames} frames)");
    println!("total: {:.2} % of a core (target <= 10 %)", a + b);
    println!(
        "terminal: {:.1} KB/s ({} bytes per frame)",
        bytes.load(Ordering::Relaxed) as f64 / 1000.0 / screen_wall.as_secs_f64(),
        bytes.load(Ordering::Relaxed) / frames.max(1)
    );
    drop(keep);
}
