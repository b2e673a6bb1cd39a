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
#![allow(clippy::unwrap_used)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
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

criterion_group!(benches, frames);
criterion_main!(benches);
