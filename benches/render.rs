//! One full dashboard frame with full histories (issue 8: ≤ 1 ms at 80x24 and 200x60).
//!
//! The app has seen the standard feed (`common`: 10,000 requests, 100,000 decode steps,
//! telemetry every 100 ms, workload changes, outliers). Variants per size:
//!
//! - `test_backend/same`: `terminal.draw(|f| render(f, &app))` on ratatui's `TestBackend`, the
//!   same state each frame (layout, widgets, the buffer diff; nothing to flush);
//! - `test_backend/changing`: two states one request apart drawn in turn, so every frame has
//!   a diff to flush, as a live run has;
//! - `crossterm_sink/changing`: the same through the real `CrosstermBackend`, writing the
//!   escape sequences into `io::sink()` (what the UI thread pays per frame, less the write(2)).
//!
//! Run: `cargo bench --bench render`.
//!
//! `RENDER_PARTS=bytes cargo bench --profile dev --bench render` instead prints where the
//! terminal bytes go: the standard feed goes on in simulated time, a frame is drawn every
//! 100 ms (10 fps, the default), and the escape sequences `CrosstermBackend` would write for
//! each frame's diff are counted per screen region (the real pty figure is the observer
//! bench's `bytes` part).
#![allow(clippy::unwrap_used)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, BenchmarkId, Criterion};
use infertop::ui::render::render;
use infertop::ui::App;
use ratatui::backend::{Backend, CrosstermBackend, TestBackend};
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 60)];

fn draw<B: Backend>(terminal: &mut Terminal<B>, app: &App) {
    terminal
        .draw(|f| render(f, black_box(app)))
        .map(|_| ())
        .unwrap_or_else(|_| panic!("draw failed"));
}

fn frames(c: &mut Criterion) {
    let (app, mut feed) = common::full_app();
    // The same state one request later: the sparklines shift, the table and header change.
    let mut next = app.clone();
    common::feed_app(&mut next, &mut feed, common::REQUESTS, 1, 1);
    let apps = [&app, &next];

    let mut group = c.benchmark_group("frame");
    for (w, h) in SIZES {
        let size = format!("{w}x{h}");
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        group.bench_function(BenchmarkId::new("test_backend/same", &size), |b| {
            b.iter(|| draw(&mut terminal, &app))
        });
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        let mut i = 0usize;
        group.bench_function(BenchmarkId::new("test_backend/changing", &size), |b| {
            b.iter(|| {
                i += 1;
                draw(&mut terminal, apps[i % 2])
            })
        });
        let mut terminal = Terminal::with_options(
            CrosstermBackend::new(std::io::sink()),
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
            },
        )
        .expect("terminal");
        group.bench_function(BenchmarkId::new("crossterm_sink/changing", &size), |b| {
            b.iter(|| {
                i += 1;
                draw(&mut terminal, apps[i % 2])
            })
        });
    }
    group.finish();
}

/// Bytes per second of simulated run time, per screen region, at each size.
fn bytes_by_region() {
    use infertop::ui::render::layout;
    use ratatui::buffer::Buffer;
    const FRAMES: u64 = 300;
    for (w, h) in SIZES {
        let (mut app, mut feed) = common::full_app();
        let mut index = common::REQUESTS;
        let mut pending: std::collections::VecDeque<(f64, infertop::event::Event)> =
            Default::default();
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        draw(&mut terminal, &app);
        let mut prev: Buffer = terminal.backend().buffer().clone();
        let regions = layout(Rect::new(0, 0, w, h)).unwrap();
        let names = regions.named();
        let mut per_region = vec![0u64; names.len() + 1];
        let t0 = app.now.as_secs_f64();
        for frame in 1..=FRAMES {
            let t = t0 + frame as f64 * 0.1;
            loop {
                if pending.is_empty() {
                    let mut out = Vec::new();
                    feed.request(index, &mut out);
                    index += 1;
                    pending.extend(out);
                }
                let Some((et, _)) = pending.front() else {
                    break;
                };
                if *et > t {
                    break;
                }
                let (et, ev) = pending.pop_front().unwrap();
                app.tick(std::time::Duration::from_secs_f64(et));
                app.apply(&ev);
            }
            app.tick(std::time::Duration::from_secs_f64(t));
            app.refresh();
            draw(&mut terminal, &app);
            let cur = terminal.backend().buffer().clone();
            let diff = prev.diff(&cur);
            for (i, slot) in per_region.iter_mut().enumerate() {
                let cells = diff.iter().copied().filter(|(x, y, _)| {
                    let p = ratatui::layout::Position::new(*x, *y);
                    match names.get(i) {
                        Some((_, r)) => r.contains(p),
                        None => !names.iter().any(|(_, r)| r.contains(p)),
                    }
                });
                let mut out = Vec::<u8>::new();
                CrosstermBackend::new(&mut out).draw(cells).unwrap();
                *slot += out.len() as u64;
            }
            prev = cur;
        }
        let secs = FRAMES as f64 * 0.1;
        let total: u64 = per_region.iter().sum();
        println!(
            "## {w}x{h}: {:.1} KB/s in all (simulated feed, 10 fps)",
            total as f64 / secs / 1e3
        );
        for (i, bytes) in per_region.iter().enumerate() {
            let name = names.get(i).map_or("other", |(n, _)| n);
            println!("{name:>10}: {:>7.2} KB/s", *bytes as f64 / secs / 1e3);
        }
    }
}

criterion_group!(benches, frames);

fn main() {
    if std::env::var("RENDER_PARTS").is_ok_and(|p| p.contains("bytes")) {
        bytes_by_region();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
