//! `infertop watch URL`: a passive `top` for a serving engine already in production. No load is
//! generated: its Prometheus `/metrics` is read every `--interval`, and each window's figures
//! (request rate, running and waiting, KV-cache usage, preemptions, prefix-cache hits, and
//! TTFT / ITL / E2E percentiles from the histograms' bucket deltas) are printed as a line, or
//! as JSON lines with `--format json`. On exit (`--duration`, Ctrl-C), the whole watch is one
//! more window: the first scrape to the last.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::print_stdout;
use crate::event::{ServerQuantiles as Quantiles, ServerWindow as Window};
use crate::plan::opts::{WatchFormat, WatchOpts};
use crate::run::{Failure, Signals, EXIT_OK};
use crate::scrape;
use crate::ui::Look;
use crate::util::say;

/// `infertop watch`.
pub fn watch(args: &WatchOpts) -> Result<i32, Failure> {
    if args.interval < Duration::from_millis(100) {
        return Err(Failure::usage(
            "--interval: below 100ms (use e.g. 1s; servers update their metrics about once a second)",
        ));
    }
    let urls = args
        .url
        .iter()
        .map(|u| scrape::metrics_url(u).map_err(|e| Failure::usage(format!("watch: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let shown = match urls.as_slice() {
        [one] => one.to_string(),
        [first, ..] => format!("{} servers ({first}, ...)", urls.len()),
        [] => String::new(),
    };
    // The theme and keys are checked in headless watches too, as runs check theirs: a mistake
    // in a script should not wait for the same command in a terminal to show.
    let look = crate::plan::look(&args.display)?;
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
    // The first scrape decides, before the terminal is taken over, whether there is anything
    // to watch: a server that cannot be read is one line and exit 1.
    let first = rt
        .block_on(scrape::fetch_all(&client, &urls))
        .map_err(|e| {
            Failure::runtime(format!(
                "watch: cannot read {e}; is the server up and does it export Prometheus metrics?"
            ))
        })?;
    let dashboard =
        !args.headless && args.format == WatchFormat::Text && std::io::stdout().is_terminal();
    say!(
        "infertop: watching {shown} ({}), a window every {:?}; {} stops",
        first.server(),
        args.interval,
        if dashboard { "q or Ctrl-C" } else { "Ctrl-C" }
    );
    let scraper = Scraper {
        rt,
        client,
        urls,
        shown,
        first: first.clone(),
        prev: first,
        prev_t: Instant::now(),
        started,
    };
    if dashboard {
        return watch_dashboard(args, scraper, look, &signals);
    }
    if args.format == WatchFormat::Text {
        print_stdout(&format!("{}\n", text_header()))?;
    }
    let mut scraper = scraper;
    let mut next = scraper.prev_t + args.interval;
    while signals.stop_reason().is_none() && args.duration.is_none_or(|d| started.elapsed() < d) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(20).min(next - Instant::now()));
            continue;
        }
        next += args.interval;
        match scraper.next() {
            Ok(w) => print_stdout(&render(&w, args.format, started.elapsed().as_secs_f64()))?,
            Err(e) => say!(
                "infertop: warning: scrape failed: {e}; next in {:?}",
                args.interval
            ),
        }
    }
    print_stdout(&summary(&scraper.total(), args.format))?;
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// Frames per second of the live screen when `--fps` is not given: its figures change once a
/// window, and a new window draws at once.
const WATCH_FPS: u32 = 4;

/// The scrapes so far: the first (the whole watch starts there) and the last good one (the
/// next window starts there).
struct Scraper {
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
    urls: Vec<reqwest::Url>,
    /// The URL, or how many and the first.
    shown: String,
    first: scrape::Scrape,
    prev: scrape::Scrape,
    prev_t: Instant,
    started: Instant,
}

impl Scraper {
    /// One more scrape (of every URL, merged): the window since the last good one, or why it
    /// could not be read (naming the URL that failed).
    fn next(&mut self) -> Result<Window, String> {
        let now = Instant::now();
        let s = self
            .rt
            .block_on(scrape::fetch_all(&self.client, &self.urls))?;
        let w = scrape::window(
            &self.prev,
            &s,
            now.duration_since(self.prev_t).as_secs_f64(),
        );
        (self.prev, self.prev_t) = (s, now);
        Ok(w)
    }

    /// The whole watch as one window: from the first scrape to the last good one.
    fn total(&self) -> Window {
        scrape::window(
            &self.first,
            &self.prev,
            self.prev_t.duration_since(self.started).as_secs_f64(),
        )
    }
}

/// The live screen: the scrapes go on in a thread that sends a `WatchEvent` per scrape; the
/// screen runs here until q, a signal or `--duration`; then the whole watch's summary is
/// printed on the restored terminal, as the headless watch prints it.
fn watch_dashboard(
    args: &WatchOpts,
    scraper: Scraper,
    look: Look,
    signals: &Signals,
) -> Result<i32, Failure> {
    use crate::ui::theme::Glyphs;
    use crate::ui::watch::{WatchConfig, WatchEvent, WatchLoop};

    let config = WatchConfig {
        url: scraper.shown.clone(),
        server: scraper.first.server().to_string(),
        interval: args.interval,
        themes: look.themes,
        glyphs: Glyphs::new(look.ascii),
        keys: look.keys,
    };
    let opts = WatchLoop {
        signals: signals.clone(),
        started: scraper.started,
        deadline: args.duration.map(|d| scraper.started + d),
        fps: args.display.fps.unwrap_or(WATCH_FPS),
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let stop = Arc::new(AtomicBool::new(false));
    // The scrapes so far, for the summary: shared, so that quitting never waits on a scrape
    // in flight (up to 5 intervals when the server hangs).
    let shared = Arc::new(Mutex::new(scraper.total()));
    let interval = args.interval;
    let thread = {
        let (stop, shared) = (stop.clone(), shared.clone());
        let mut scraper = scraper;
        std::thread::Builder::new()
            .name("infertop-watch".into())
            .spawn(move || {
                let mut next = scraper.prev_t + interval;
                while !stop.load(Ordering::Relaxed) {
                    if Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(20).min(next - Instant::now()));
                        continue;
                    }
                    next += interval;
                    let ev = match scraper.next() {
                        Ok(w) => {
                            if let Ok(mut total) = shared.lock() {
                                *total = scraper.total();
                            }
                            WatchEvent::Window {
                                t_s: scraper.started.elapsed().as_secs_f64(),
                                window: Box::new(w),
                            }
                        }
                        Err(message) => WatchEvent::ScrapeFailed {
                            t_s: scraper.started.elapsed().as_secs_f64(),
                            message,
                        },
                    };
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| Failure::runtime(format!("watch: cannot start the scraper: {e}")))?
    };
    // A panic in the screen has restored the terminal (ratatui's hook) and printed itself;
    // catching it here still prints what was measured.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::ui::watch::run(rx, config, &opts)
    }));
    // The thread ends at its next look at `stop`, or with the process: quitting never waits
    // on a scrape in flight.
    stop.store(true, Ordering::Relaxed);
    drop(thread);
    let total = match shared.lock() {
        Ok(t) => t.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    // The terminal may have hung up (SIGHUP): nothing better to do with a failed write.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(summary(&total, WatchFormat::Text).as_bytes());
    let _ = out.flush();
    match result {
        Ok(Ok(_)) => Ok(signals.exit_code().unwrap_or(EXIT_OK)),
        Ok(Err(e)) => Err(Failure::runtime(format!("watch: the screen failed ({e})"))),
        Err(_) => Err(Failure::runtime(
            "watch: the screen panicked (see above); the summary covers every window read",
        )),
    }
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
