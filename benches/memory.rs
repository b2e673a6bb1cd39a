//! Memory kept by the dashboard's bounded structures (issue 8: resident memory independent of
//! run length; bytes kept per request and per step).
//!
//! Heap bytes come from the crate's counting global allocator (`telemetry::alloc`, exact live
//! bytes), RSS from `/proc/self/statm`. Three parts:
//!
//! 1. bytes per sample of one statistics window (`stats::Window`: arrival ring + ordered
//!    multiset) and of the UI rings, measured by filling them;
//! 2. the ceiling those give with the capacities the code uses (`REQUEST_WINDOW`,
//!    `STEP_WINDOW`, `REQUEST_HISTORY`, ...);
//! 3. an `App` fed the synthetic run of `common` for `MEMORY_REQUESTS` requests (default
//!    400,000 requests = 4,000,000 decode steps, 40x the windows), heap and RSS at checkpoints:
//!    the growth stops once the windows are full.
//!
//! Run: `cargo bench --bench memory` (`MEMORY_REQUESTS=1000000` for a longer feed).
#![allow(clippy::unwrap_used)]

mod common;

use infertop::stats::{
    RunStats, Window, RECENT_REQUESTS, RECENT_STEPS, REQUEST_WINDOW, STEP_WINDOW,
};
use infertop::telemetry::alloc::current_bytes;
use infertop::ui::charts::{MemoryPoint, StepPoint, MEMORY_HISTORY, REQUEST_HISTORY, STEP_HISTORY};
use infertop::ui::log::EVENT_HISTORY;
use infertop::ui::outliers::OUTLIER_WINDOW;
use infertop::ui::state::RequestPoint;
use infertop::ui::{App, AppConfig};

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / (1u64 << 20) as f64)
}

/// Live heap bytes per sample of a full `Window` of `n` distinct samples.
fn window_bytes_per_sample(n: usize) -> f64 {
    let mut feed = common::Feed::default();
    let before = current_bytes();
    let mut w = Window::new(n);
    // Twice the capacity, so it has evicted as a long run does.
    for _ in 0..2 * n {
        w.push(feed.itl_s());
    }
    let after = current_bytes();
    std::hint::black_box(&w);
    (after.saturating_sub(before)) as f64 / n as f64
}

fn main() {
    // Criterion passes `--bench`; nothing else to parse.
    let requests: u64 = std::env::var("MEMORY_REQUESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400_000);

    println!("## 1. bytes per sample");
    let per_sample = window_bytes_per_sample(100_000);
    let per_sample_small = window_bytes_per_sample(RECENT_REQUESTS);
    println!("stats::Window (100,000 distinct samples): {per_sample:.1} B/sample");
    println!("stats::Window (100 samples):              {per_sample_small:.1} B/sample");
    let request_point = std::mem::size_of::<RequestPoint>();
    let step_point = std::mem::size_of::<StepPoint>();
    let memory_point = std::mem::size_of::<MemoryPoint>();
    println!(
        "ui RequestPoint {request_point} B, StepPoint {step_point} B, MemoryPoint {memory_point} B"
    );

    println!("\n## 2. ceiling from the capacities");
    // Per request, five metrics (TTFT, TPOT, E2E, prefill and decode tok/s) go into the `all`
    // window and into `steady` (or `warmup`), each of REQUEST_WINDOW; plus two 100-sample
    // "recent" windows. Per step, ITL goes into `all` and `steady` of STEP_WINDOW each.
    let req_windows = 5.0 * 2.0 * REQUEST_WINDOW as f64 * per_sample;
    let warmup_windows = 5.0 * REQUEST_WINDOW as f64 * per_sample; // only if that many warmups
    let step_windows =
        2.0 * STEP_WINDOW as f64 * per_sample + 2.0 * RECENT_STEPS as f64 * per_sample;
    let ui_rings = (REQUEST_HISTORY * request_point
        + STEP_HISTORY * step_point
        + MEMORY_HISTORY * memory_point) as f64
        + 2.0 * OUTLIER_WINDOW as f64 * per_sample;
    println!(
        "RunStats request windows: 5 metrics x 2 x {REQUEST_WINDOW} x {per_sample:.1} B = {} ({:.0} B per request kept, until {REQUEST_WINDOW} requests)",
        mib(req_windows),
        req_windows / REQUEST_WINDOW as f64
    );
    println!(
        "RunStats ITL windows:     2 x {STEP_WINDOW} + 2 x {RECENT_STEPS} samples = {} ({:.0} B per step kept, until {STEP_WINDOW} steps)",
        mib(step_windows),
        2.0 * per_sample
    );
    println!(
        "RunStats warmup windows:  at most {} (only with {REQUEST_WINDOW} warmup requests)",
        mib(warmup_windows)
    );
    println!(
        "UI rings + outlier reference: {} (+ {EVENT_HISTORY} event lines)",
        mib(ui_rings)
    );
    println!(
        "ceiling (steady run): {}",
        mib(req_windows + step_windows + ui_rings)
    );

    println!(
        "\n## 3. an App fed {requests} requests ({} decode steps)",
        requests * 10
    );
    let rss0 = rss_bytes();
    let heap0 = current_bytes();
    let mut app = App::new(AppConfig::default());
    let mut feed = common::Feed::default();
    let mut done = 0u64;
    let mut checkpoints: Vec<u64> = [1_000u64, 10_000, 50_000, 100_000, 200_000, 400_000]
        .into_iter()
        .filter(|&n| n < requests)
        .collect();
    checkpoints.push(requests);
    println!("| requests | decode steps | heap kept | RSS | heap growth per request since last |");
    println!("|---:|---:|---:|---:|---:|");
    let mut last_heap = heap0;
    let mut last_done = 0u64;
    for &n in &checkpoints {
        // A refresh every 100 requests, as a frame would (the caches are part of the state).
        common::feed_app(&mut app, &mut feed, done, n - done, 100);
        done = n;
        let heap = current_bytes();
        let growth = (heap as f64 - last_heap as f64) / (n - last_done) as f64;
        println!(
            "| {n} | {} | {} | {} | {growth:.1} B |",
            n * 10,
            mib(heap.saturating_sub(heap0) as f64),
            mib(rss_bytes() as f64),
            // RSS includes the allocator's retained pages and the binary.
        );
        last_heap = heap;
        last_done = n;
    }
    println!("(RSS before the App: {})", mib(rss0 as f64));
    std::hint::black_box(&app);

    // RunStats alone (the headless printer and the recorder keep one too).
    let heap0 = current_bytes();
    let mut stats = RunStats::new();
    let mut values = common::Feed::default();
    for i in 0..(4 * STEP_WINDOW) {
        stats.record_step(values.itl_s(), i < 20);
    }
    println!(
        "\nRunStats after {} steps (ITL windows full): {}",
        4 * STEP_WINDOW,
        mib(current_bytes().saturating_sub(heap0) as f64)
    );
    std::hint::black_box(&stats);
}
