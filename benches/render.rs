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
//!   escape sequences into `io::sink()` (what the UI thread pays per frame, less the write(2));
//! - `dashboard_parts/same`, `dashboard_parts/changing`: the dashboard's stack (`Coalesce`
//!   over that backend) drawn as the dashboard draws (`coalesce::draw_parts`: a part whose key
//!   is the last frame's is neither drawn nor compared; the two states differ everywhere, so
//!   `changing` draws every part); `dashboard/…` the whole frame with `Coalesce`'s own diff
//!   (`coalesce::draw`); `dashboard_ratatui_diff/…` the same stack through `Terminal::draw`.
//!
//! Run: `cargo bench --bench render`.
//!
//! `RENDER_PARTS=bytes cargo bench --profile dev --bench render` instead prints where the
//! terminal bytes go: the standard feed goes on in simulated time, a frame is drawn every
//! 100 ms (10 fps, the default), and the escape sequences `CrosstermBackend` would write for
//! each frame's diff are counted per screen region (the real pty figure is the observer
//! bench's `bytes` part).
//!
//! `RENDER_PARTS=rates cargo bench --bench render` feeds the dashboard synthetic events at
//! each of `RENDER_RATES` (requests/s:decode steps each; default
//! `1:10,10:10,100:10,1000:10,1000:100`) in simulated time and prints, per size, the bytes a
//! second the real backend stack writes, the time the dashboard thread spends folding the
//! events and drawing (per second of run time: % of a core), and the bytes per screen region
//! (`RENDER_WARM_SECS` [20], `RENDER_SECS` [30]). The real pty figures are the observer
//! bench's `rates` part.
#![allow(clippy::unwrap_used)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, BenchmarkId, Criterion};
use infertop::ui::coalesce::Coalesce;
use infertop::ui::render::{render, render_parts};
use infertop::ui::App;
use ratatui::backend::{Backend, CrosstermBackend, TestBackend};
use ratatui::layout::{Rect, Size};
use ratatui::{Terminal, TerminalOptions, Viewport};

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 60)];

fn draw<B: Backend>(terminal: &mut Terminal<B>, app: &App) {
    terminal
        .draw(|f| render(f, black_box(app)))
        .map(|_| ())
        .unwrap_or_else(|_| panic!("draw failed"));
}

#[derive(Clone, Copy)]
enum Draw {
    Parts,
    Whole,
    Ratatui,
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
        // The dashboard's stack (`Coalesce` over crossterm) drawn as the dashboard draws
        // (`coalesce::draw_parts`: only the parts whose key changed are drawn and compared),
        // whole with its own diff (`coalesce::draw`), and as `Terminal::draw` would (ratatui's
        // diff).
        for (name, how) in [
            ("dashboard_parts", Draw::Parts),
            ("dashboard", Draw::Whole),
            ("dashboard_ratatui_diff", Draw::Ratatui),
        ] {
            let mut terminal = Terminal::with_options(
                Coalesce::with_size(CrosstermBackend::new(std::io::sink()), Size::new(w, h)),
                TerminalOptions {
                    viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
                },
            )
            .expect("terminal");
            let mut draw_on = move |app: &App| match how {
                Draw::Parts => infertop::ui::coalesce::draw_parts(&mut terminal, |f, parts| {
                    render_parts(f, black_box(app), parts)
                })
                .unwrap_or_else(|_| panic!("draw failed")),
                Draw::Whole => {
                    infertop::ui::coalesce::draw(&mut terminal, |f| render(f, black_box(app)))
                        .unwrap_or_else(|_| panic!("draw failed"))
                }
                Draw::Ratatui => draw(&mut terminal, app),
            };
            group.bench_function(BenchmarkId::new(format!("{name}/same"), &size), |b| {
                b.iter(|| draw_on(&app))
            });
            group.bench_function(BenchmarkId::new(format!("{name}/changing"), &size), |b| {
                b.iter(|| {
                    i += 1;
                    draw_on(apps[i % 2])
                })
            });
        }
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
            app.refresh_paced();
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

/// The rates of `RENDER_RATES` (requests/s:decode steps per request), default
/// `1:10,10:10,100:10,1000:10,1000:100` (the last is 100k decode steps/s).
fn rate_list() -> Vec<(f64, u32)> {
    std::env::var("RENDER_RATES")
        .unwrap_or_else(|_| "1:10,10:10,100:10,1000:10,1000:100".into())
        .split(',')
        .filter_map(|v| {
            let (r, s) = v.trim().split_once(':')?;
            Some((r.parse().ok()?, s.parse().ok()?))
        })
        .collect()
}

/// Bytes per second at each request rate: the whole stack (`Coalesce` over crossterm, as the
/// dashboard writes), then per region (each region's diff through crossterm alone, without
/// the bridging, to see where the bytes go).
fn bytes_by_rate() {
    use common::rate::{screen_bytes, RateFeed};
    use infertop::ui::render::layout;
    use infertop::ui::{AppConfig, Screen};
    use ratatui::buffer::Buffer;
    let warm: f64 = std::env::var("RENDER_WARM_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20.0);
    let secs: f64 = std::env::var("RENDER_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30.0);
    println!("## bytes per second by request rate (simulated, 10 fps, {secs} s after {warm} s)");
    println!();
    println!(
        "| size | requests/s | decode steps/s | KB/s | bytes/frame | fold (apply), % of a core | screen (refresh + draw), % of a core |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (w, h) in SIZES {
        for (rate, steps) in rate_list() {
            let b = screen_bytes(w, h, rate, steps, 10, warm, secs);
            println!(
                "| {w}x{h} | {rate} | {} | {:.2} | {:.0} | {:.2}% | {:.2}% |",
                rate * f64::from(steps),
                b.per_s / 1e3,
                b.per_s / 10.0,
                100.0 * b.fold_s_per_s,
                100.0 * b.screen_s_per_s
            );
        }
    }
    println!();
    for (w, h) in SIZES {
        let regions = layout(Rect::new(0, 0, w, h)).unwrap();
        let names = regions.named();
        let mut header = "| requests/s | steps/s |".to_string();
        for (n, _) in &names {
            header.push_str(&format!(" {n} |"));
        }
        println!("### {w}x{h}, KB/s per region (without bridging)");
        println!("{header} other |");
        println!("|{}", "---:|".repeat(names.len() + 3));
        for (rate, steps) in rate_list() {
            let mut app = infertop::ui::App::new(AppConfig::default());
            let mut feed = RateFeed::new(rate, steps);
            let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
            let mut prev = Buffer::empty(Rect::new(0, 0, w, h));
            let mut per_region = vec![0u64; names.len() + 1];
            let mut events = Vec::new();
            let total = ((warm + secs) * 10.0) as u64;
            for frame in 1..=total {
                let t = frame as f64 * 0.1;
                feed.until(t, &mut events);
                for (et, ev) in events.drain(..) {
                    Screen::tick(&mut app, std::time::Duration::from_secs_f64(et));
                    Screen::apply(&mut app, &ev);
                }
                Screen::tick(&mut app, std::time::Duration::from_secs_f64(t));
                Screen::refresh(&mut app);
                terminal.draw(|f| Screen::draw(&app, f)).unwrap();
                let cur = terminal.backend().buffer().clone();
                if t > warm {
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
                }
                prev = cur;
            }
            let mut line = format!("| {rate} | {} |", rate * f64::from(steps));
            for b in &per_region {
                line.push_str(&format!(" {:.2} |", *b as f64 / secs / 1e3));
            }
            println!("{line}");
        }
        println!();
    }
}

criterion_group!(benches, frames);

fn main() {
    if std::env::var("RENDER_PARTS").is_ok_and(|p| p.contains("bytes")) {
        bytes_by_region();
        return;
    }
    if std::env::var("RENDER_PARTS").is_ok_and(|p| p.contains("rates")) {
        bytes_by_rate();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
