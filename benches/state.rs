//! The cost of keeping the dashboard's state (issue 8: ≤ 1 µs per decode-step event,
//! amortised, percentile bookkeeping included), with full windows (the standard feed of
//! `common`: 100,000 decode steps, so every push also evicts the oldest sample):
//!
//! - `apply/decode_step`: `App::apply(&Event::DecodeStep)`: the step ring, the current
//!   request, and `RunStats::record_step` (the ITL windows' ordered multisets, O(log n));
//! - `run_stats/record_step` and `run_stats/record_request`: the statistics alone;
//! - `apply/request`: one whole request of 10 steps (start, prefill, steps, done), per request;
//! - `refresh/dirty/table`: `App::refresh()` after one step made it dirty, recomputing the
//!   percentile table (one in-order walk per window, six metrics) and the outlier reference;
//!   it runs at most once per frame. `refresh/dirty/throttled`: a frame between two tables
//!   (the standard feed is above `ui::state::TABLE_THROTTLE_SAMPLES`). `refresh/clean` is the
//!   no-change path. `refresh/dirty_100k_requests`
//!   is the same after 100,000 requests (1,000,000 steps), when every window is full: the
//!   ceiling of a long run: `/table` recomputes the whole table (the clock moves a
//!   `TABLE_PERIOD` per call), `/throttled` is a frame between two tables (above
//!   `ui::state::TABLE_THROTTLE_SAMPLES` the table is recomputed at most once a second);
//! - `window_push/current`: one `stats::Window::push` at 100,000 samples (evict + insert);
//!   a decode step does four (all, steady, and the two 10,000-step "recent" windows).
//!
//! Run: `cargo bench --bench state`.
#![allow(clippy::unwrap_used)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use infertop::event::Event;
use infertop::stats::{RunStats, Window};
use infertop::ui::state::TABLE_PERIOD;
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
                let ev = Event::DecodeStep {
                    index,
                    step: (i % 10) as u32 + 1,
                    itl_s: values[i % values.len()],
                    gpu_s: None,
                };
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
    }
    group.finish();

    let mut group = c.benchmark_group("refresh");
    {
        let mut app = app.clone();
        let mut i = 0usize;
        // The clock moves a table period per frame: the whole table every time.
        group.bench_function("dirty/table", |b| {
            b.iter(|| {
                i += 1;
                app.apply(&Event::DecodeStep {
                    index: common::REQUESTS,
                    step: 1,
                    itl_s: values[i % values.len()],
                    gpu_s: None,
                });
                let now = app.now + TABLE_PERIOD;
                app.tick(now);
                app.refresh();
            })
        });
        group.bench_function("dirty/throttled", |b| {
            b.iter(|| {
                i += 1;
                app.apply(&Event::DecodeStep {
                    index: common::REQUESTS,
                    step: 1,
                    itl_s: values[i % values.len()],
                    gpu_s: None,
                });
                app.refresh();
            })
        });
        let now = app.now + TABLE_PERIOD;
        app.tick(now);
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
            app.apply(&Event::DecodeStep {
                index: 100_000,
                step: 1,
                itl_s: values[i % values.len()],
                gpu_s: None,
            });
        };
        // The clock moves a table period per frame: the whole table every time.
        group.bench_function("dirty_100k_requests/table", |b| {
            b.iter(|| {
                step(&mut long);
                let now = long.now + TABLE_PERIOD;
                long.tick(now);
                long.refresh();
            })
        });
        // The clock stands still: frames between two table recomputations.
        group.bench_function("dirty_100k_requests/throttled", |b| {
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
    }
    group.finish();
}

criterion_group!(benches, state);
criterion_main!(benches);
