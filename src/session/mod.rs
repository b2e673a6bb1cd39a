//! Sessions: a plan (`plan`) carried out, nothing decided here. Each starts the producers (an
//! engine, the telemetry thread, the metrics scraper, a record's player or follower), consumes
//! their one event stream (a screen, or headless lines), writes the record as it goes, and
//! prints the summary at the end: `run` (and `determinism`, a run's two passes compared;
//! `repeat`, a run N times), `sweep`, `watch`, `replay`, `follow`, and `agent`
//! (which serves this machine's figures instead); `metrics` serves the client's own figures
//! as Prometheus text while a run or sweep goes on.

pub mod agent;
pub mod determinism;
pub mod follow;
mod lines;
pub mod metrics;
mod page_server;
pub mod repeat;
pub mod replay;
pub mod run;
pub mod sweep;
pub mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::io::Write;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::event::Event;
use crate::event::{Control, StopReason};
use crate::exit::Failure;
use crate::plan::Telemetry;
use crate::signals::Signals;

/// The threads beside the engine that feed the same channel: telemetry and the server's
/// metrics. Stopped (and joined) together.
pub(crate) struct Producers {
    sampler: Option<crate::telemetry::SamplerHandle>,
    scrape_stop: Arc<AtomicBool>,
    scraper: Option<JoinHandle<()>>,
}

impl Producers {
    /// Starts the telemetry thread (unless `--no-telemetry`) and, with `--server-metrics`, the
    /// scraper, both sending on `events` with times since `started`.
    pub(crate) fn start(
        telemetry: Option<Telemetry>,
        server_metrics: &[reqwest::Url],
        events: &Sender<Event>,
        started: Instant,
    ) -> Result<Producers, Failure> {
        let sampler = telemetry.map(|t| {
            crate::telemetry::spawn_default(t.device, t.interval, events.clone(), started)
        });
        let scrape_stop = Arc::new(AtomicBool::new(false));
        let scraper = match server_metrics.is_empty() {
            false => Some(
                crate::scrape::spawn_scraper(
                    server_metrics.to_vec(),
                    Duration::from_secs(1),
                    events.clone(),
                    scrape_stop.clone(),
                )
                .map_err(|e| Failure::runtime(format!("cannot start the metrics thread: {e}")))?,
            ),
            true => None,
        };
        Ok(Producers {
            sampler,
            scrape_stop,
            scraper,
        })
    }

    pub(crate) fn stop(self) {
        if let Some(s) = self.sampler {
            s.stop();
        }
        self.scrape_stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.scraper {
            let _ = s.join();
        }
    }
}

/// `--reset-prefix-cache`: empties every endpoint's prefix cache once before the engine
/// starts, so a server that has no way to (no known route) is one line and exit 2 before
/// anything is measured, and one that cannot be reached is one line too. The engine empties
/// it again right before the first request (each sweep cell's, before its own).
pub(crate) fn check_cache_reset(
    endpoints: &[crate::engine::http::Endpoint],
    api_key: Option<&str>,
    extra: &crate::engine::http::extra::Extra,
) -> Result<(), Failure> {
    use crate::engine::http::cache::{reset_all_blocking, ResetError};
    if endpoints.is_empty() {
        return Ok(());
    }
    match reset_all_blocking(endpoints, api_key, extra) {
        Ok(_) => Ok(()),
        Err(ResetError::Unsupported(m)) => Err(Failure::usage(m)),
        Err(ResetError::Failed(m)) => Err(Failure::runtime(m)),
    }
}

/// `--api`: the API's route is checked to exist on every endpoint, and `auto` is resolved
/// (and said, and written in the header), before the engine starts, so that a server without
/// it is one line naming the flag and the endpoint, and exit 2, before anything is measured.
/// A server slow to answer does not hold a signal (the failure then carries its exit code).
/// What depends on the API (a batch, tools, conversations) is checked again against the one
/// `auto` picked.
pub(crate) fn check_api(
    h: &mut crate::engine::http::HttpConfig,
    header: Option<&mut crate::record::line::Header>,
) -> Result<(), Failure> {
    use crate::engine::http::api::detect::{resolve_blocking, DetectError};
    use crate::engine::http::Api;
    if h.endpoints.is_empty() {
        return Ok(());
    }
    let asked = h.api;
    let stop = || crate::signals::pending().is_some();
    let picked = resolve_blocking(
        &h.endpoints,
        h.api_key.as_deref(),
        &h.shape.extra,
        asked,
        &stop,
    )
    .map_err(|e| match e {
        DetectError::Missing(m) => Failure::usage(m),
        DetectError::Failed(m) => Failure::runtime(m),
        DetectError::Stopped => Failure {
            code: crate::signals::pending_exit_code().unwrap_or(crate::exit::EXIT_FAILURE),
            message: format!(
                "{} while asking {} whether it answers --api {}",
                crate::signals::pending()
                    .map(|r| r.words())
                    .unwrap_or_else(|| "stopped".into()),
                h.endpoints[0].display(),
                asked.name()
            ),
        },
    })?;
    h.api = picked.api;
    if asked != Api::Auto {
        return Ok(());
    }
    crate::util::say!(
        "infertop: --api auto: {} ({})",
        picked.api.name(),
        picked.why
    );
    let name = picked.api.name();
    h.shape.api_picked = Some(picked.why);
    if let Some(header) = header {
        header.config.api = Some(name.into());
    }
    if h.shape.batch > 1 && !h.api.takes_batch() {
        return Err(Failure::usage(format!(
            "--batch {}: --api auto picked {name}, which takes one sequence per request; drop --batch, or give --api embeddings or rerank",
            h.shape.batch
        )));
    }
    if !h.api.takes_messages() {
        if h.shape.tools.is_some() {
            return Err(Failure::usage(format!(
                "--tools: --api auto picked {name}, which has no tools; give --api chat, responses or messages"
            )));
        }
        if h.traffic.conversations.is_some() {
            return Err(Failure::usage(format!(
                "--turns: --api auto picked {name}, which takes no conversation; give --api chat, responses or messages"
            )));
        }
    }
    Ok(())
}

/// Sets candle's CPU thread count before anything else starts. candle's CPU kernels size their
/// thread pools from RAYON_NUM_THREADS; unset, candle recounts the cores on every matmul by
/// reading /proc/cpuinfo, a file read inside every timed step. It must be set while this is the
/// only thread, before anything (tokenizer training in the planner) uses rayon.
pub fn pin_threads(threads: usize) {
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
}

/// Writes `text` to stdout and flushes. A reader that went away early (`infertop report … |
/// head -1`) is not an error: it has what it wanted, and the command exits 0 (`print!` would
/// panic there). Any other write error (a full disk) is one.
pub fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::runtime(format!(
            "cannot write to standard output ({})",
            crate::util::one_line(&e.to_string())
        ))),
    }
}

/// Runs the dashboard on `app` over the engine's channel; a failure or a panic in it becomes
/// an error line, so the session still stops the engine and writes the record's footer.
pub(crate) fn dashboard(
    app: crate::ui::App,
    screen_fps: u32,
    events: &Receiver<Event>,
    control: &Sender<crate::event::Control>,
    signals: &Signals,
    on_event: &mut dyn FnMut(&Event, &mut crate::ui::App),
) -> (Result<crate::event::StopReason, String>, crate::ui::App) {
    use crate::ui::ScreenFailure;
    let mut app = app;
    let shown = crate::ui::run_dashboard(
        events.clone(),
        control.clone(),
        &mut app,
        screen_fps,
        signals,
        on_event,
    );
    let result = shown.map_err(|f| match f {
        ScreenFailure::Panicked { .. } => {
            format!("{f}; the record keeps every finished request")
        }
        ScreenFailure::Failed { why, .. } => format!("dashboard: {why}"),
    });
    // The app comes back after a failure too: what it had folded when it failed is what the
    // footer's summary and the printed one are made from.
    (result, app)
}

use crate::signals::STOP_GRACE;

/// A fold a headless consumer feeds, told how its events ended when the engine did not say:
/// every producer went away (`disconnected`), or a signal's stop was not answered within
/// `STOP_GRACE` and the session ends without the engine (`abandoned`).
pub trait Ends {
    fn disconnected(&mut self);
    fn abandoned(&mut self, reason: StopReason);
}

impl Ends for crate::fold::RunFold {
    fn disconnected(&mut self) {
        crate::fold::RunFold::disconnected(self);
    }
    fn abandoned(&mut self, reason: StopReason) {
        crate::fold::RunFold::abandoned(self, reason);
    }
}

impl Ends for crate::determinism::DeterminismFold {
    fn disconnected(&mut self) {
        crate::determinism::DeterminismFold::disconnected(self);
    }
    fn abandoned(&mut self, reason: StopReason) {
        crate::determinism::DeterminismFold::abandoned(self, reason);
    }
}

/// A sweep's fold with the run under way and the time now: a cell still open is closed with
/// what its run had.
pub struct SweepEnds<'a>(
    pub &'a mut crate::sweep::fold::SweepFold,
    pub &'a mut crate::fold::RunFold,
    pub f64,
);

impl Ends for SweepEnds<'_> {
    fn disconnected(&mut self) {
        self.0.disconnected(self.2, self.1);
    }
    fn abandoned(&mut self, reason: StopReason) {
        self.0.abandoned(self.2, self.1, reason);
    }
}

/// A headless consumer of one engine's events: passes a signal on as a stop (once), and waits
/// a little for the next event. What it does with the event (record it, fold it) is the
/// caller's.
pub struct Consumer<'a> {
    pub events: &'a Receiver<Event>,
    pub control: &'a Sender<Control>,
    pub signals: &'a Signals,
    /// The stop a signal asked for, once one has.
    pub interrupted: Option<StopReason>,
    /// When it was asked.
    pub asked_at: Option<Instant>,
}

impl<'a> Consumer<'a> {
    pub fn new(
        events: &'a Receiver<Event>,
        control: &'a Sender<Control>,
        signals: &'a Signals,
    ) -> Consumer<'a> {
        Consumer {
            events,
            control,
            signals,
            interrupted: None,
            asked_at: None,
        }
    }

    /// The next event, waiting at most 50 ms for it. `None` when there was none, or when the
    /// events ended without the engine's last word: then `fold` was told how (`Ends`), and
    /// stops being live.
    pub fn next_event(&mut self, fold: &mut impl Ends) -> Option<Event> {
        if let (Some(reason), None) = (self.signals.stop_reason(), &self.interrupted) {
            self.interrupted = Some(reason.clone());
            self.asked_at = Some(Instant::now());
            let _ = self.control.send(Control::Stop(reason));
        }
        if let (Some(reason), Some(at)) = (&self.interrupted, self.asked_at) {
            if at.elapsed() >= STOP_GRACE {
                fold.abandoned(reason.clone());
                return None;
            }
        }
        match self.events.recv_timeout(Duration::from_millis(50)) {
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                fold.disconnected();
                None
            }
        }
    }
}

/// A run a signal stopped while it was planned (its dataset read, its tokens counted): its
/// record (`--record`) still opens and closes, saying what was asked and why it stopped.
/// Returns the failure, to end the command with.
pub(crate) fn unplanned(opts: &crate::plan::RunOpts, f: Failure, started: Instant) -> Failure {
    if !f.interrupted() {
        return f;
    }
    if let Some(path) = &opts.output.record {
        close_unstarted(path, crate::plan::header::unplanned(opts), started);
    }
    f
}

/// A run a signal stopped after it was planned but before its engine started (asking the
/// server which API it answers, reading a reference clock): its record still opens and closes.
/// Returns the failure, to end the command with.
pub(crate) fn unstarted(
    record: Option<&std::path::Path>,
    header: &crate::record::line::Header,
    f: Failure,
    started: Instant,
) -> Failure {
    if let (true, Some(path)) = (f.interrupted(), record) {
        close_unstarted(path, header.clone(), started);
    }
    f
}

/// The record of a run no request of which started: its header, then a footer naming the
/// signal that stopped it.
fn close_unstarted(path: &std::path::Path, header: crate::record::line::Header, started: Instant) {
    if let Some(reason) = crate::signals::pending() {
        if let Ok(mut r) = crate::record::Recorder::create(path, header, false) {
            let summary = crate::summary::RunSummary::default();
            r.finish(&reason, started.elapsed().as_secs_f64(), &summary);
        }
    }
}

/// Waits for a thread to end, at most `STOP_GRACE` after the stop was `asked` (now, if it
/// was not asked before): a stopped engine ends within a decode step, but one loading a model
/// or waiting on a server may not look at its controls until it is done, and the session must
/// not wait for that (the process's exit ends it), nor wait the grace twice.
pub(crate) fn join_by(handle: JoinHandle<()>, asked: Option<Instant>) {
    let deadline = asked.unwrap_or_else(Instant::now) + STOP_GRACE;
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if handle.is_finished() {
        let _ = handle.join();
    }
}

/// Seconds since `started`, for record lines.
pub fn since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}
