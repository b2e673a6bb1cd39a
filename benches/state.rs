//! The cost of keeping the dashboard's state (issue 8: ≤ 1 µs per decode-step event,
//! amortised, percentile bookkeeping included), with full windows (the standard feed of
//! `common`: 100,000 decode steps, so every push also evicts the oldest sample):
//!
//! - `apply/decode_step`: `App::apply` of one decode step: the step ring, the current
//!   request, and the step kept until its request completes;
//! - `run_stats/record_step` and `run_stats/record_request`: the statistics alone;
//! - `run_stats/table_100k/*`: `RunStats::table` (6 metrics: mean, p50, p90, p95, p99, max,
//!   n) with every window full (100,000 requests, 100,000 steps), for the steady, "all" and
//!   "recent, warmup included" views; `table_90k_1k_warmup/all` is the "all" view while
//!   1,000 warmup requests (10,000 warmup steps) are still inside it;
//! - `apply/request`: one whole request of 10 steps (start, prefill, steps, done), per request;
//! - `refresh/dirty/table`: `App::refresh()` after one step made it dirty, recomputing the
//!   percentile table (six metrics) and the outlier reference; it runs at most once per
//!   frame. `refresh/clean` is the no-change path. `refresh/dirty_100k_requests/table` is the
//!   same after 100,000 requests (1,000,000 steps), when every window is full: the ceiling of
//!   a long run;
//! - `window_push/current`: one `stats::Window::push` at 100,000 samples (evict + insert,
//!   merged into the sorted blocks in batches), never read; `read_every_500`,
//!   `read_every_5000` and `read_every_50000` read a summary every 500, 5,000 or 50,000
//!   pushes, as the dashboard reads its windows twice a second at 1,000 requests/s (a
//!   request metric), 10,000 and 100,000 steps/s (ITL).
//!   A decode step is one push: the recent and warmup-including windows are derived from
//!   the steady and warmup ones.
//!
//! - `exposition/*` (`--metrics-listen`): `ClientExposition::observe` of one decode step and
//!   of one finished request, under the listener's lock as the consumer takes them (target
//!   ≤ 100 ns a step: nothing beside `apply`'s microsecond), and `render` of a scrape.
//!
//! Run: `cargo bench --bench state`.
#![allow(clippy::unwrap_used)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use infertop::event::Event;
use infertop::stats::{RunStats, Window, WindowKind};
use infertop::ui::{App, AppConfig};

/// Pre-generated latencies, so the generator is not timed.
fn itls(n: usize) -> Vec<f64> {
    let mut feed = common::Feed::default();
    (0..n).map(|_| feed.itl_s()).collect()
}

fn state(c: &mut Criterion) {
    let (app, mut feed) = common::full_app();
    let values = itls(1 << 16);

    let mut group = c.benchmark_group("apply");
    {
        let mut app = app.clone();
        let index = common::REQUESTS;
        let mut i = 0usize;
        group.bench_function("decode_step", |b| {
            b.iter(|| {
                i += 1;
                let ev =
                    Event::decode_step(index, (i % 10) as u32 + 1, values[i % values.len()], None);
                app.apply(black_box(&ev));
            })
        });
    }
    {
        let mut app = app.clone();
        let mut next = common::REQUESTS;
        let mut events = Vec::new();
        group.bench_function("request_10_steps", |b| {
            b.iter_batched(
                || {
                    events.clear();
                    feed.request(next, &mut events);
                    next += 1;
                    events.split_off(0)
                },
                |evs| {
                    for (_, ev) in &evs {
                        app.apply(ev);
                    }
                    evs
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("run_stats");
    {
        let mut stats = RunStats::new();
        for (i, v) in values.iter().cycle().take(200_000).enumerate() {
            stats.record_step(*v, i < 20);
        }
        let mut i = 0usize;
        group.bench_function("record_step", |b| {
            b.iter(|| {
                i += 1;
                stats.record_step(black_box(values[i % values.len()]), false)
            })
        });
        let mut events = Vec::new();
        let mut requests = Vec::new();
        let mut f = common::Feed::default();
        for index in 0..(1 << 12) {
            f.request(index + 100, &mut events);
            for (_, ev) in events.drain(..) {
                if let Event::RequestDone(r) = ev {
                    requests.push(*r);
                }
            }
        }
        for r in requests.iter().cycle().take(110_000) {
            stats.record_request(r);
        }
        let mut j = 0usize;
        group.bench_function("record_request", |b| {
            b.iter(|| {
                j += 1;
                stats.record_request(black_box(&requests[j % requests.len()]))
            })
        });
        // Every window full (100,000 requests, 100,000 steps, 20 warmup steps long gone).
        group.bench_function("table_100k/steady", |b| {
            b.iter(|| black_box(&stats).table(WindowKind::Steady, false))
        });
        group.bench_function("table_100k/all", |b| {
            b.iter(|| black_box(&stats).table(WindowKind::All, true))
        });
        group.bench_function("table_100k/recent_all", |b| {
            b.iter(|| black_box(&stats).table(WindowKind::Recent, true))
        });
        // Warmup requests still inside the "all" window: they are merged in per summary.
        let mut early = RunStats::new();
        for (k, r) in requests.iter().cycle().take(90_000).enumerate() {
            let mut r = r.clone();
            r.warmup = k < 1_000;
            early.record_request(&r);
        }
        for (k, v) in values.iter().cycle().take(90_000).enumerate() {
            early.record_step(*v, k < 10_000);
        }
        group.bench_function("table_90k_1k_warmup/all", |b| {
            b.iter(|| black_box(&early).table(WindowKind::All, true))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("refresh");
    {
        let mut app = app.clone();
        let mut i = 0usize;
        group.bench_function("dirty/table", |b| {
            b.iter(|| {
                i += 1;
                app.apply(&Event::decode_step(
                    common::REQUESTS,
                    1,
                    values[i % values.len()],
                    None,
                ));
                app.refresh();
            })
        });
        app.refresh();
        group.bench_function("clean", |b| b.iter(|| black_box(&mut app).refresh()));
    }
    {
        let mut long = App::new(AppConfig::default());
        let mut feed = common::Feed::default();
        common::feed_app(&mut long, &mut feed, 0, 100_000, 1_000);
        let mut i = 0usize;
        let mut step = |app: &mut App| {
            i += 1;
            app.apply(&Event::decode_step(
                100_000,
                1,
                values[i % values.len()],
                None,
            ));
        };
        group.bench_function("dirty_100k_requests/table", |b| {
            b.iter(|| {
                step(&mut long);
                long.refresh();
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("window_push");
    {
        let mut w = Window::new(100_000);
        for v in values.iter().cycle().take(200_000) {
            w.push(*v);
        }
        let mut i = 0usize;
        group.bench_function("current", |b| {
            b.iter(|| {
                i += 1;
                w.push(black_box(values[i % values.len()]))
            })
        });
        // Read every 500, 5,000 or 50,000 pushes, as the dashboard reads its windows every
        // 500 ms: at 1,000 requests/s a request metric, at 10,000 and 100,000 steps/s the ITL
        // window (past a fortieth of the window between reads, answered from bucket counts
        // without a sort: `stats/coarse.rs`).
        for every in [500usize, 5000, 50_000] {
            group.bench_function(format!("read_every_{every}"), |b| {
                b.iter(|| {
                    i += 1;
                    w.push(black_box(values[i % values.len()]));
                    if i.is_multiple_of(every) {
                        black_box(w.summary());
                    }
                })
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("exposition");
    {
        use infertop::stats::exposition::ClientExposition;
        let figures = std::sync::Mutex::new(ClientExposition::new());
        let step = Event::decode_step(1, 1, values[0], None);
        group.bench_function("decode_step", |b| {
            b.iter(|| figures.lock().unwrap().observe(black_box(&step)))
        });
        let mut events = Vec::new();
        feed.request(1, &mut events);
        let done = events
            .into_iter()
            .map(|(_, e)| e)
            .find(|e| matches!(e, Event::RequestDone(_)))
            .unwrap();
        group.bench_function("request_done", |b| {
            b.iter(|| figures.lock().unwrap().observe(black_box(&done)))
        });
        group.bench_function("render", |b| {
            b.iter(|| black_box(figures.lock().unwrap().clone().render()))
        });
    }
    group.finish();
}

criterion_group!(benches, state);
criterion_main!(benches);
