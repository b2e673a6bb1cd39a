//! `infertop watch URL`: a passive `top` for a serving engine already in production. No load is
//! generated: its Prometheus `/metrics` is read every `--interval`, and each window's figures
//! (request rate, running and waiting, KV-cache usage, preemptions, prefix-cache hits, and
//! TTFT / ITL / E2E percentiles from the histograms' bucket deltas) are printed as a line, or
//! as JSON lines with `--format json`. On exit (`--duration`, Ctrl-C), the whole watch is one
//! more window: the first scrape to the last.

use std::time::{Duration, Instant};

use clap::Args;

use super::{args, print_stdout, say, Failure};
use crate::event::{ServerQuantiles as Quantiles, ServerWindow as Window};
use crate::run::{Signals, EXIT_OK};
use crate::scrape;

/// `--format` of watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchFormat {
    /// A line of text per window, a markdown table at the end.
    #[default]
    Text,
    /// A JSON object per window (`"type":"window"`), then one for the whole watch.
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct WatchArgs {
    /// The server's metrics URL, or its base URL (then /metrics is read).
    pub url: String,
    /// Seconds between scrapes (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = args::duration)]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = args::duration)]
    pub duration: Option<Duration>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: WatchFormat,
    /// Accepted for symmetry with runs: watch always prints lines.
    #[arg(long)]
    pub headless: bool,
}

/// `infertop watch`.
pub fn watch(args: &WatchArgs) -> Result<i32, Failure> {
    if args.interval < Duration::from_millis(100) {
        return Err(Failure::usage(
            "--interval: below 100ms (use e.g. 1s; servers update their metrics about once a second)",
        ));
    }
    let url = scrape::metrics_url(&args.url).map_err(|e| Failure::usage(format!("watch: {e}")))?;
    let signals =
        Signals::register().map_err(|e| Failure::runtime(format!("cannot watch signals: {e}")))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(format!("cannot start the http client: {e}")))?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10).min(args.interval * 5))
        .build()
        .map_err(|e| Failure::runtime(format!("cannot build the http client: {e}")))?;
    let started = Instant::now();
    let first = rt.block_on(scrape::fetch(&client, &url)).map_err(|e| {
        Failure::runtime(format!(
            "watch: cannot read {url} ({e}); is the server up and does it export Prometheus metrics?"
        ))
    })?;
    say!(
        "infertop: watching {url} ({}), a window every {:?}; Ctrl-C stops",
        first.server(),
        args.interval
    );
    if args.format == WatchFormat::Text {
        print_stdout(&format!("{}\n", text_header()))?;
    }
    let (mut prev, mut prev_t) = (first.clone(), Instant::now());
    let mut last = first.clone();
    let mut next = prev_t + args.interval;
    while signals.stop_reason().is_none() && args.duration.is_none_or(|d| started.elapsed() < d) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(20).min(next - Instant::now()));
            continue;
        }
        next += args.interval;
        let now = Instant::now();
        match rt.block_on(scrape::fetch(&client, &url)) {
            Ok(s) => {
                let w = scrape::window(&prev, &s, now.duration_since(prev_t).as_secs_f64());
                print_stdout(&render(&w, args.format, started.elapsed().as_secs_f64()))?;
                (prev, prev_t, last) = (s.clone(), now, s);
            }
            Err(e) => say!(
                "infertop: warning: scrape of {url} failed ({e}); next in {:?}",
                args.interval
            ),
        }
    }
    let total = scrape::window(&first, &last, prev_t.duration_since(started).as_secs_f64());
    print_stdout(&summary(&total, args.format))?;
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
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

fn text_header() -> &'static str {
    "     t  req/s  running  waiting  kv %  preempt  prefix hit %  TTFT p50/p99 ms  ITL p50/p99 ms  E2E p50/p99 ms"
}

fn render(w: &Window, format: WatchFormat, t_s: f64) -> String {
    match format {
        WatchFormat::Json => {
            let mut v = serde_json::to_value(w).unwrap_or_default();
            v["type"] = "window".into();
            v["t_s"] = t_s.into();
            format!("{v}\n")
        }
        WatchFormat::Text => format!(
            "{:>5.0}s {:>6} {:>8} {:>8} {:>5} {:>8} {:>13} {:>16} {:>15} {:>15}\n",
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
        ),
    }
}

fn summary(w: &Window, format: WatchFormat) -> String {
    match format {
        WatchFormat::Json => {
            let mut v = serde_json::to_value(w).unwrap_or_default();
            v["type"] = "watch_summary".into();
            format!("{v}\n")
        }
        WatchFormat::Text => {
            let row = |name: &str, q: Option<Quantiles>| match q {
                Some(q) => format!(
                    "| {name} | {:.3} ms | {:.3} ms | {:.3} ms | {} |\n",
                    q.p50 * 1e3,
                    q.p90 * 1e3,
                    q.p99 * 1e3,
                    q.n
                ),
                None => format!("| {name} | - | - | - | 0 |\n"),
            };
            format!(
                "\nthe whole watch: {:.0} s of {} metrics, {} requests/s, {} preemptions\n\n| metric (server's histograms) | p50 | p90 | p99 | n |\n|---|---:|---:|---:|---:|\n{}{}{}",
                w.seconds,
                w.server,
                num(w.requests_per_s, 1.0, 2),
                num(w.preemptions, 1.0, 0),
                row("TTFT", w.ttft_s),
                row("ITL", w.itl_s),
                row("E2E", w.e2e_s),
            )
        }
    }
}
