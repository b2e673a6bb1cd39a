//! The dashboard's state: everything render reads, changed only by `apply` (events from the
//! worker and the telemetry thread), `update` (user actions) and `tick` (the clock, injected so
//! tests never read wall-clock time). Statistics are computed in `refresh` (or, on screen,
//! `refresh_paced`: the figures at most every `FIGURES_HOLD`), at most once per frame and only
//! when something changed; render only reads the cached results.

use std::time::Duration;

use crate::event::Sample;
use crate::event::{Control, Event, RequestDone, RunInfo, RunPhase, WorkloadDesc};
use crate::fold::RunFold;
use crate::stats::{Metric, Slo, WindowKind};

pub use super::buckets::RequestPoint;
use super::charts::{Charts, DECODE_RATE_STEPS};
use super::face::Face;
use super::keys::{Action, KeyMap};
use super::log::{EventLog, Level};
use super::outliers::Outliers;
pub use super::source::Producer;
use super::theme::{Glyphs, Theme};
use super::views::{ServerColumns, TableView, Views};
use crate::util::format;

/// The figures on screen (the table, the header's counts and rates, the charts' `now`, the
/// distributions) change at most this often: a figure that changes at every frame (a count at
/// 1,000 requests/s, the last request's TTFT) is unreadable, and each change is bytes on an
/// SSH link. A change after a quiet spell shows at the next frame; what the user changes
/// (window, warmup, reset) and the end of the run show at once. Every figure shown is exact
/// at the moment it was taken.
pub const FIGURES_HOLD: Duration = Duration::from_millis(500);

/// What the chart area shows where there is no room for every view at once (the view key
/// cycles it; at 200x60 the other views have panes of their own).
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub enum View {
    /// TTFT and TPOT per request.
    #[default]
    Requests,
    /// Histograms of TTFT, TPOT and ITL over the table's window, percentiles marked.
    Distributions,
    /// p50 and p99 per slice of run time, TTFT, TPOT and ITL.
    Bands,
    /// ITL per slice of run time and latency bucket.
    Heatmap,
    /// TTFT by conversation turn and by cache outcome (when the run has either).
    Breakdown,
    /// Thinking and answering apart: TTFT beside TTFA, the reasoning's and the answer's time,
    /// reasoning tokens, tool calls (when the output had reasoning or tool calls).
    Thinking,
    /// Every figure per model (when the run sends to several).
    Models,
}

impl View {
    pub fn next(self) -> View {
        match self {
            View::Requests => View::Distributions,
            View::Distributions => View::Bands,
            View::Bands => View::Heatmap,
            View::Heatmap => View::Breakdown,
            View::Breakdown => View::Thinking,
            View::Thinking => View::Models,
            View::Models => View::Requests,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            View::Requests => "per request",
            View::Distributions => "distributions",
            View::Bands => "bands",
            View::Heatmap => "heatmap",
            View::Breakdown => "by turn & cache",
            View::Thinking => "thinking & answering",
            View::Models => "by model",
        }
    }
}

/// The request being run now.
#[derive(Clone, Debug, PartialEq)]
pub struct CurrentRequest {
    pub index: u64,
    pub warmup: bool,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    pub batch: usize,
    pub ttft_s: Option<f64>,
    /// Decode steps done so far.
    pub steps: u32,
    /// Run time when it started.
    pub started: Duration,
}

/// A request shows its progress once it has run this long: shorter ones would only flicker a
/// counter every frame (bytes on an SSH link) that nobody can read.
pub const SHOW_PROGRESS_AFTER: Duration = Duration::from_secs(1);

impl CurrentRequest {
    /// `#12`, then after `SHOW_PROGRESS_AFTER` `#12 prefill` or `#12 step 7/15` (a request of
    /// G tokens has G − 1 decode steps).
    pub fn progress(&self, now: Duration) -> String {
        if now.saturating_sub(self.started) < SHOW_PROGRESS_AFTER {
            format!("#{}", self.index)
        } else if self.ttft_s.is_none() && self.steps == 0 {
            format!("#{} prefill", self.index)
        } else {
            format!(
                "#{} step {}/{}",
                self.index,
                self.steps,
                self.output_tokens.saturating_sub(1)
            )
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct LoadingProgress {
    pub what: String,
    pub done: u64,
    pub total: u64,
}

/// The figures the text shows, taken together at most every `FIGURES_HOLD` (`refresh`), so
/// that the header, the table and the charts' lines agree with each other.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub requests_done: u64,
    pub warmup_requests: u64,
    pub in_flight: u64,
    pub failed_requests: u64,
    pub error_rate: f64,
    /// Requests cancelled on purpose (`--cancel`).
    pub cancelled_requests: u64,
    /// The canary lane (`--probe`), once a canary has ended.
    pub canary: Option<crate::stats::CanarySummary>,
    pub send_delay_p99_s: Option<f64>,
    pub current: Option<CurrentRequest>,
    /// The newest request's TTFT and TPOT, and the newest decode step's ITL.
    pub last_ttft_s: Option<f64>,
    pub last_tpot_s: Option<f64>,
    pub last_itl_s: Option<f64>,
    /// Requests started (a dataset's rows sent) and how far a replayed trace has got.
    pub started_requests: u64,
    pub trace_covered_s: Option<f64>,
    /// Steady requests against the SLO, when there is one.
    pub goodput: Option<crate::stats::SloCounts>,
}

/// How many times each kind of state the screen shows has changed: with the slices' and the
/// buckets' own newest, the keys of the parts `render` draws (`ui::parts`), so a part whose
/// counts are those of the last frame is not drawn again.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub struct Changes {
    /// Keys, the view, and every event but a request's, a decode step and a telemetry sample
    /// (the run starting, resets, workload changes, server windows, notices, the end).
    pub rare: u64,
    /// The figures taken (`refresh`): the header's, the table's, the distributions'.
    pub figures: u64,
    /// Requests finished: the per-request charts.
    pub requests: u64,
    /// Lines added to the events pane or changed in it.
    pub events: u64,
    /// Telemetry samples: the memory panel.
    pub telemetry: u64,
}

/// What the loop does after a key: nothing more, quit, or send a message to the worker.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyOutcome {
    None,
    Quit,
    Send(Control),
}

/// Settings the dashboard starts with (validated before the terminal is touched).
#[derive(Clone, Debug)]
pub struct AppConfig {
    pub keys: KeyMap,
    /// The themes `t` cycles through; the first is the one in use at start.
    pub themes: Vec<Theme>,
    pub ascii: bool,
    pub slo: Slo,
    pub output_step: i64,
    /// A previous run's steady-state table (`--baseline RUN.jsonl`), shown beside the live one.
    pub baseline: Option<Baseline>,
}

/// A previous run to compare against live: its name and steady-state table.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    pub name: String,
    pub table: crate::stats::Table,
}

impl Default for AppConfig {
    fn default() -> Self {
        let themes = Theme::cycle(Theme::builtin("default").unwrap_or_else(|_| Theme::fallback()))
            .unwrap_or_else(|_| vec![Theme::fallback()]);
        AppConfig {
            keys: KeyMap::default(),
            themes,
            ascii: false,
            slo: Slo::default(),
            output_step: 16,
            baseline: None,
        }
    }
}

/// The whole dashboard state.
#[derive(Clone, Debug)]
pub struct App {
    // Configuration.
    pub face: Face,
    pub slo: Slo,
    pub output_step: i64,
    pub baseline: Option<Baseline>,

    // The run, as the events tell it: the same fold a headless run keeps, plus the view.
    pub run: RunFold,
    /// When a stop was asked of the engine (q, a signal): every wait for it to finish (the
    /// dashboard's, then the session's for its thread) shares one grace from then.
    pub stop_asked: Option<std::time::Instant>,
    pub phase: RunPhase,
    pub loading: Option<LoadingProgress>,
    pub workload: Option<WorkloadDesc>,
    pub current: Option<CurrentRequest>,
    /// The charts' histories: per request, per step, per telemetry sample, per slice of time.
    pub charts: Charts,
    pub telemetry: Option<Sample>,
    /// Oldest first; the pane shows them newest first.
    pub events: EventLog,

    // Time, injected by `tick`.
    pub now: Duration,
    /// When the run stopped; elapsed time freezes there.
    pub finished_at: Option<Duration>,
    /// `--runs N --cooldown D`: when the cooldown under way ends (dashboard clock).
    pub cooldown_until: Option<Duration>,

    // View.
    pub window: WindowKind,
    pub include_warmup: bool,
    pub view: View,

    /// What the table and the panels show, computed at `refresh`.
    pub views: Views,
    /// The reference outliers and settling are judged by.
    outliers: Outliers,
    pub decode_tok_s: Option<f64>,
    /// The header's and the charts' figures, taken with the table.
    pub figures: Figures,
    /// When the figures were last taken; whether something changed since; whether the next
    /// frame must show it (a key, a reset, the end).
    figures_at: Option<Duration>,
    figures_stale: bool,
    urgent: bool,
    /// What the table shows (`h`, `f`), and the percentiles' columns with the server's
    /// metrics (`s`).
    pub table_view: TableView,
    pub server_columns: ServerColumns,
    /// A sweep's fold (`infertop sweep` in a terminal): its cells so far and the grid; `run`
    /// is then the open cell's.
    pub sweep: Option<crate::sweep::fold::SweepFold>,
    /// Where the events come from (an engine, or a record replayed or followed).
    pub producer: Producer,
    /// What changed, for drawing only the parts that did.
    pub changes: Changes,
    dirty: bool,

    // Bookkeeping for events that are noticed rather than sent.
    pending_boundary: bool,
    nvml_noted: bool,
}

impl Default for App {
    fn default() -> Self {
        App::new(AppConfig::default())
    }
}

impl App {
    pub fn new(config: AppConfig) -> App {
        App {
            face: Face::new(config.keys, Glyphs::new(config.ascii), config.themes),
            slo: config.slo,
            baseline: config.baseline,
            output_step: config.output_step,
            run: RunFold::with_slo(config.slo),
            stop_asked: None,
            phase: RunPhase::Loading,
            loading: None,
            workload: None,
            current: None,
            charts: Charts::default(),
            telemetry: None,
            events: EventLog::default(),
            now: Duration::ZERO,
            finished_at: None,
            cooldown_until: None,
            window: WindowKind::Steady,
            include_warmup: false,
            view: View::default(),
            views: Views::default(),
            outliers: Outliers::default(),
            decode_tok_s: None,
            figures: Figures::default(),
            figures_at: None,
            figures_stale: true,
            urgent: false,
            table_view: TableView::Percentiles,
            server_columns: ServerColumns::VsServer,
            sweep: None,
            producer: Producer::Engine,
            changes: Changes::default(),
            dirty: true,
            pending_boundary: false,
            nvml_noted: false,
        }
    }

    pub fn theme(&self) -> &Theme {
        self.face.theme()
    }

    /// Run time shown in the header: frozen once the run has stopped.
    pub fn elapsed(&self) -> Duration {
        self.finished_at.unwrap_or(self.now)
    }

    /// Whether the engine (a sweep's, for a sweep) still takes control messages.
    pub fn worker_live(&self) -> bool {
        match &self.sweep {
            Some(s) => s.live(),
            None => self.run.live(),
        }
    }

    /// `--runs N`: the run under way (1-based) and N; `None` for a run or a sweep.
    pub fn repeat_position(&self) -> Option<(usize, usize)> {
        self.sweep.as_ref()?.runs()
    }

    /// Seconds left of the cooldown between two runs, while one is under way.
    pub fn cooldown_left_s(&self) -> Option<f64> {
        let until = self.cooldown_until?;
        Some(until.saturating_sub(self.now).as_secs_f64())
    }

    /// Whether the load keys (output, prompt, load) reach an engine that acts on them: a live
    /// run's, not a sweep's (each cell runs its grid workload).
    pub fn takes_load_keys(&self) -> bool {
        self.worker_live()
            && self.run.info.is_some()
            && self.sweep.is_none()
            && self.producer == Producer::Engine
    }

    /// Whether `action` does something for this source (the help lists only those).
    pub fn offers(&self, action: Action) -> bool {
        self.producer.refuses(action).is_none()
    }

    /// What `action` does here, for the help: a replay's and a follow's quit and pause are not
    /// a run's.
    pub fn describe(&self, action: Action) -> &'static str {
        self.producer.describe(action)
    }

    /// Adds a line to the events pane (a record-fed screen's notes about its sources).
    pub fn note(&mut self, level: Level, text: String) {
        self.log(level, text);
    }

    /// How the engine said it ended, once it has.
    pub fn stop_reason(&self) -> Option<crate::event::StopReason> {
        match &self.sweep {
            Some(s) => s.stop.clone(),
            None => self.run.stop.clone(),
        }
    }

    /// Sets the clock (time since the dashboard started).
    pub fn tick(&mut self, now: Duration) {
        self.now = now;
        self.charts.advance(now.as_secs_f64());
        if let Some(sweep) = self.sweep.as_mut() {
            sweep.tick(now.as_secs_f64(), &self.run);
        }
    }

    /// Something changed that the next frame must show whole (not held): a key, a reset, a
    /// workload change, the end of a run or a cell.
    fn invalidate(&mut self) {
        self.changes.rare += 1;
        self.dirty = true;
        self.urgent = true;
    }

    fn log(&mut self, level: Level, text: String) {
        self.changes.events += 1;
        self.events.push(self.now, level, text);
    }

    /// Applies one event: first to the run's fold, then to the view. Pure: no I/O, no clock;
    /// O(log n) at most.
    pub fn apply(&mut self, event: &Event) {
        match event {
            // Shown through the figures (taken at most every `FIGURES_HOLD`), the slices and
            // the buckets, each counted on its own.
            Event::RequestStarted { .. } | Event::PrefillDone { .. } | Event::DecodeSteps(_) => {}
            Event::RequestDone(_) => self.changes.requests += 1,
            Event::RequestFailed(_) | Event::RequestCancelled(_) | Event::Canary(_) => {}
            Event::Telemetry(_) => self.changes.telemetry += 1,
            _ => self.changes.rare += 1,
        }
        match self.sweep.as_mut() {
            Some(sweep) => sweep.apply(self.now.as_secs_f64(), &mut self.run, event),
            None => self.run.apply(event),
        }
        match event {
            Event::Loading { what, done, total } => {
                self.loading = Some(LoadingProgress {
                    what: what.clone(),
                    done: *done,
                    total: *total,
                });
            }
            Event::RunStarted(info) => self.run_started(info),
            Event::RequestStarted {
                index,
                warmup,
                prompt_tokens,
                output_tokens,
                batch,
            } => {
                if self.run.warmup.steady_from == Some(*index) {
                    self.log(
                        Level::Info,
                        format!(
                            "warmup finished after {} requests; steady from #{index}",
                            self.run.stats.warmup_requests()
                        ),
                    );
                }
                self.current = Some(CurrentRequest {
                    index: *index,
                    warmup: *warmup,
                    prompt_tokens: *prompt_tokens,
                    output_tokens: *output_tokens,
                    batch: *batch,
                    ttft_s: None,
                    started: self.now,
                    steps: 0,
                });
                if matches!(self.phase, RunPhase::Warmup | RunPhase::Running) {
                    self.phase = self.active_phase();
                }
                self.figures_stale = true;
            }
            Event::PrefillDone { index, ttft_s } => {
                if let Some(c) = self.current.as_mut().filter(|c| c.index == *index) {
                    c.ttft_s = Some(*ttft_s);
                }
                self.figures_stale = true;
            }
            Event::DecodeSteps(steps) => {
                if let Some(c) = self.current.as_mut() {
                    if let Some(s) = steps.iter().rev().find(|s| s.index == c.index) {
                        c.steps = s.step;
                    }
                }
                let run = &self.run;
                self.charts
                    .decode_steps(self.now.as_secs_f64(), steps, |i| run.step_warmup(i));
                self.dirty = true;
            }
            Event::RequestDone(r) => self.request_done(r),
            Event::RequestFailed(f) => {
                if self.current.as_ref().is_some_and(|c| c.index == f.index) {
                    self.current = None;
                }
                self.figures_stale = true;
                self.log(
                    Level::Warn,
                    format!("request #{} failed: {}", f.index, f.reason),
                );
            }
            Event::Telemetry(sample) => self.telemetry_sample(sample),
            Event::ServerMetrics(_) => self.dirty = true,
            Event::Canary(_) | Event::StepParts(_) => self.figures_stale = true,
            Event::RequestCancelled(c) => {
                // Cancelled on purpose (`--cancel`): counted in the header, not logged one by one.
                if self.current.as_ref().is_some_and(|r| r.index == c.index) {
                    self.current = None;
                }
                self.figures_stale = true;
            }
            Event::Notice(n) => {
                let level = match n.as_ref() {
                    crate::event::Notice::CancelCheck(c) if c.leaked() => Level::Warn,
                    _ => Level::Info,
                };
                if let crate::event::Notice::Cooldown(c) = n.as_ref() {
                    // A replayed record says how long: whatever it says, no panic here.
                    let idle = Duration::try_from_secs_f64(c.seconds).unwrap_or_default();
                    self.cooldown_until = self.now.checked_add(idle);
                    self.phase = RunPhase::Cooldown;
                    self.invalidate();
                }
                self.log(level, n.words())
            }
            Event::CellStarted(c) => {
                let sweep = self.sweep.as_ref();
                let name = sweep.map_or_else(
                    || format!("cell {}/{}", c.cell + 1, c.cells),
                    |s| s.cell_name(c.cell),
                );
                if sweep.is_some_and(|s| s.runs().is_some()) {
                    self.next_run(c.cell == 0);
                    self.log(Level::Info, name);
                } else {
                    self.cell_started();
                    self.log(Level::Info, format!("{name}: {}", c.params.words()));
                }
            }
            Event::Paused => {
                if self.worker_live() {
                    self.phase = RunPhase::Paused;
                }
                self.log(Level::Info, "paused".into());
            }
            Event::Resumed => {
                if self.phase == RunPhase::Paused {
                    self.phase = self.active_phase();
                }
                self.log(Level::Info, "resumed".into());
            }
            Event::StatsReset => {
                self.charts.clear_requests();
                self.clear_outlier_reference();
                self.invalidate();
                self.log(Level::Info, "statistics reset".into());
            }
            Event::WorkloadChanged(desc) => {
                self.log(
                    Level::Info,
                    format!(
                        "workload: prompt {}, output {}, {}",
                        desc.prompt_tokens,
                        desc.output_tokens,
                        desc.load_text()
                    ),
                );
                self.workload = Some(desc.as_ref().clone());
                self.pending_boundary = true;
                self.clear_outlier_reference();
                self.invalidate();
            }
            Event::Error { message, fatal } => {
                if *fatal {
                    self.log(Level::Error, format!("fatal: {message}"));
                    self.phase = RunPhase::Error;
                } else {
                    self.log(Level::Warn, format!("error: {message}"));
                }
            }
            Event::Finished(reason) if self.worker_live() => {
                // A sweep's cell ended; the sweep goes on.
                self.invalidate();
                self.current = None;
                self.decode_tok_s = None;
                let ended = self
                    .sweep
                    .as_ref()
                    .and_then(|s| Some((s, s.last_result()?)));
                let text = match ended {
                    Some((sweep, r)) => format!(
                        "{} ended: {}",
                        sweep.cell_name(r.cell),
                        r.reason.as_deref().unwrap_or("measured")
                    ),
                    None => format!("cell ended: {}", reason.words()),
                };
                self.log(Level::Info, text);
            }
            Event::Finished(reason) => {
                // The last table is exact, whatever the run's length.
                self.invalidate();
                self.finished_at = Some(self.now);
                self.cooldown_until = None;
                self.current = None;
                self.decode_tok_s = None;
                self.phase = if self.run.failed.is_some() {
                    RunPhase::Error
                } else {
                    RunPhase::Stopped
                };
                self.log(Level::Info, reason.words());
            }
        }
    }

    /// A sweep's next cell begins: the view starts over as the fold's run does (the events
    /// pane and the grid stay).
    fn cell_started(&mut self) {
        self.charts.clear_requests();
        self.clear_outlier_reference();
        self.current = None;
        self.loading = None;
        self.finished_at = None;
        self.decode_tok_s = None;
        self.phase = RunPhase::Loading;
        self.pending_boundary = false;
        self.invalidate();
    }

    /// The next run of `--runs N` begins: its statistics start again as the fold's run does,
    /// but the charts go on (the runs are one workload, and their drift from run to run is
    /// what they show), as do the events pane and the grid.
    fn next_run(&mut self, first: bool) {
        self.current = None;
        self.loading = None;
        self.finished_at = None;
        self.cooldown_until = None;
        self.decode_tok_s = None;
        // After the first, nothing loads: the model (or server) is the last run's, and the
        // charts stay up.
        self.phase = if first {
            RunPhase::Loading
        } else {
            RunPhase::Running
        };
        self.figures_stale = true;
        self.invalidate();
    }

    /// The channel closed without `Finished`: the worker is gone (crashed or dropped it).
    pub fn worker_disconnected(&mut self) {
        if let Some(sweep) = self.sweep.as_mut() {
            if !sweep.live() {
                return;
            }
            sweep.disconnected(self.now.as_secs_f64(), &mut self.run);
        } else if !self.run.disconnected() {
            return;
        }
        let message = self.run.failed.clone().unwrap_or_default();
        self.log(Level::Error, message);
        self.finished_at = Some(self.now);
        self.current = None;
        self.phase = RunPhase::Error;
        self.invalidate();
    }

    fn clear_outlier_reference(&mut self) {
        self.outliers.restart();
    }

    fn active_phase(&self) -> RunPhase {
        if self.run.warmup.newest {
            RunPhase::Warmup
        } else {
            RunPhase::Running
        }
    }

    fn run_started(&mut self, info: &RunInfo) {
        self.loading = None;
        self.workload = Some(info.workload.clone());
        if self.phase == RunPhase::Loading {
            self.phase = self.active_phase();
        }
        let m = &info.model;
        self.log(
            Level::Info,
            format!(
                "loaded {} ({} {}, {} params) on {}",
                m.name,
                m.arch,
                m.dtype,
                format::si(m.params as f64),
                m.device
            ),
        );
    }

    fn request_done(&mut self, r: &RequestDone) {
        let judged = self.outliers.observe(r);
        for e in judged.excess.iter().flatten() {
            let ascii = self.face.glyphs.ascii;
            let text = format!(
                "#{} {} {} > p99 {}{}",
                r.index,
                e.metric,
                format::duration(e.value_s, ascii),
                format::duration(e.p99_s, ascii),
                self.context()
            );
            self.events.outlier(self.now, e.value_s / e.p99_s, text);
            self.changes.events += 1;
        }
        if let Some(s) = judged.settled {
            let text = format!(
                "settled at #{} (warmup cost {})",
                s.at_index,
                format::duration(s.warmup_cost_s.max(0.0), self.face.glyphs.ascii)
            );
            self.log(Level::Info, text);
        }
        let point = RequestPoint {
            index: r.index,
            ttft_s: r.ttft_s,
            tpot_s: r.tpot_s,
            warmup: r.warmup,
            boundary: std::mem::take(&mut self.pending_boundary),
            outlier_ttft: judged.excess[0].is_some(),
            outlier_tpot: judged.excess[1].is_some(),
        };
        self.charts.request(self.now.as_secs_f64(), point);
        self.current = self.current.take().filter(|c| c.index != r.index);
        self.dirty = true;
    }

    /// What the machine looked like at the last telemetry sample, for outlier lines.
    fn context(&self) -> String {
        let Some(s) = &self.telemetry else {
            return String::new();
        };
        let mut parts = Vec::new();
        if let Some(b) = s.device_used_bytes {
            parts.push(format!("dev {}", format::bytes(b)));
        } else if let Some(b) = s.alloc_bytes {
            parts.push(format!("alloc {}", format::bytes(b)));
        } else if let Some(b) = s.rss_bytes {
            parts.push(format!("rss {}", format::bytes(b)));
        }
        if let Some(mhz) = s.sm_clock_mhz {
            parts.push(format!("{mhz}MHz"));
        }
        if let Some(w) = s.power_w {
            parts.push(format!("{w:.0}W"));
        }
        if let Some(c) = s.temperature_c {
            parts.push(format!("{c}C"));
        }
        if !s.throttle.is_empty() {
            parts.push(s.throttle.join("+"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    }

    fn telemetry_sample(&mut self, s: &Sample) {
        if let Some(reason) = &s.nvml_unavailable {
            if !self.nvml_noted {
                self.nvml_noted = true;
                self.log(Level::Info, reason.clone());
            }
        }
        self.charts.sample(s);
        self.telemetry = Some(s.clone());
    }

    /// Recomputes the cached statistics and takes the figures now, if anything changed since
    /// the last call: what a test or a snapshot wants. Render never computes statistics.
    pub fn refresh(&mut self) {
        self.refresh_with(true);
    }

    /// What the screen loop calls before each frame: the outlier reference and the charts'
    /// kind of column follow every frame; the figures are taken again only once they are
    /// `FIGURES_HOLD` old (or at once after a key, a reset, the end).
    pub fn refresh_paced(&mut self) {
        self.refresh_with(false);
    }

    fn refresh_with(&mut self, now: bool) {
        self.charts.buckets.update_mode(self.now.as_secs_f64());
        if self.dirty {
            self.outliers.refresh();
            self.figures_stale = true;
            self.dirty = false;
        }
        let due = now
            || self.urgent
            || self
                .figures_at
                .is_none_or(|at| self.now.saturating_sub(at) >= FIGURES_HOLD);
        if !(self.figures_stale && due) {
            return;
        }
        self.figures_stale = false;
        self.urgent = false;
        self.figures_at = Some(self.now);
        self.changes.figures += 1;
        // A few µs with full 100k windows (sorted blocks, BENCHMARKS.md).
        self.views
            .refresh(&self.run, self.window, self.include_warmup, self.table_view);
        self.decode_tok_s = self.current_decode_rate();
        let last = self.charts.requests.last();
        self.figures = Figures {
            requests_done: self.run.requests_done,
            warmup_requests: self.run.stats.warmup_requests(),
            in_flight: self.run.in_flight(),
            failed_requests: self.run.failed_requests,
            error_rate: self.run.error_rate(),
            cancelled_requests: self.run.cancelled_requests,
            canary: self.run.canary.summary(),
            send_delay_p99_s: self.run.send_delay_p99_s,
            current: self.current.clone(),
            last_ttft_s: last.map(|p| p.ttft_s),
            last_tpot_s: last.and_then(|p| p.tpot_s),
            last_itl_s: self.charts.steps.last().map(|s| s.itl_s),
            started_requests: self.run.started_requests,
            trace_covered_s: self.run.trace_covered_s,
            goodput: (!self.slo.is_empty()).then_some(self.run.goodput),
        };
    }

    /// Tokens per second over the last few decode steps (all sequences of the batch).
    fn current_decode_rate(&self) -> Option<f64> {
        if !matches!(self.phase, RunPhase::Warmup | RunPhase::Running) {
            return None;
        }
        let batch = self
            .current
            .as_ref()
            .map(|c| c.batch)
            .or(self.workload.as_ref().map(|w| w.batch))
            .unwrap_or(1)
            .max(1);
        let recent: Vec<f64> = self
            .charts
            .steps
            .last_n(DECODE_RATE_STEPS)
            .map(|s| s.itl_s)
            .collect();
        let total: f64 = recent.iter().sum();
        (total > 0.0).then(|| batch as f64 * recent.len() as f64 / total)
    }

    /// A key press, turned into an action by the key map and applied.
    pub fn handle_key(&mut self, key: &ratatui::crossterm::event::KeyEvent) -> KeyOutcome {
        // Any key may open or close the help.
        self.changes.rare += 1;
        match self.face.action(key) {
            Some(action) => self.update(action),
            None => KeyOutcome::None,
        }
    }

    /// Applies a user action to the view, or says what to send to the worker. Changes to the
    /// run itself are not applied here: the worker echoes them as events.
    pub fn update(&mut self, action: Action) -> KeyOutcome {
        self.changes.rare += 1;
        if let Some(why) = self.producer.refuses(action) {
            self.log(Level::Warn, why.into());
            return KeyOutcome::None;
        }
        let live = self.worker_live() && self.run.info.is_some();
        let load_key = matches!(
            action,
            Action::OutputMore
                | Action::OutputLess
                | Action::PromptMore
                | Action::PromptLess
                | Action::LoadMore
                | Action::LoadLess
        );
        if load_key && live && !self.takes_load_keys() {
            let why = self.sweep.as_ref().map_or("", |s| s.load_keys_off());
            self.log(Level::Warn, why.into());
            return KeyOutcome::None;
        }
        match action {
            Action::Quit => KeyOutcome::Quit,
            Action::PauseResume if live => match self.phase {
                RunPhase::Paused => KeyOutcome::Send(Control::Resume),
                _ => KeyOutcome::Send(Control::Pause),
            },
            Action::ResetStats if live => KeyOutcome::Send(Control::ResetStats),
            Action::OutputMore if live => {
                KeyOutcome::Send(Control::AdjustOutputTokens(self.output_step))
            }
            Action::OutputLess if live => {
                KeyOutcome::Send(Control::AdjustOutputTokens(-self.output_step))
            }
            Action::PromptMore if live => KeyOutcome::Send(Control::AdjustPromptTokens(1)),
            Action::PromptLess if live => KeyOutcome::Send(Control::AdjustPromptTokens(-1)),
            Action::LoadMore if live => KeyOutcome::Send(Control::AdjustLoad(1)),
            Action::LoadLess if live => KeyOutcome::Send(Control::AdjustLoad(-1)),
            Action::ToggleWarmup => {
                self.include_warmup = !self.include_warmup;
                self.invalidate();
                KeyOutcome::None
            }
            Action::CycleWindow => {
                self.window = self.window.next();
                self.invalidate();
                KeyOutcome::None
            }
            Action::CycleView => {
                self.view = self.next_view();
                KeyOutcome::None
            }
            Action::ToggleServer => {
                self.server_columns = self.server_columns.next(self.run.server.nodes.len());
                KeyOutcome::None
            }
            Action::TogglePhases => {
                self.table_view = self.table_view.after_phases();
                self.dirty = true;
                KeyOutcome::None
            }
            Action::ToggleSplit => {
                // The candle engine has no server to split a TTFT by: `f` shows its steps'
                // parts instead, when it samples them.
                self.table_view = if self.run.step_parts.has_samples() {
                    self.table_view.after_parts()
                } else {
                    self.table_view.after_split(self.run.spec.has_samples())
                };
                self.dirty = true;
                KeyOutcome::None
            }
            Action::NextTheme => {
                self.face.next_theme();
                KeyOutcome::None
            }
            Action::Help => {
                self.face.show_help = !self.face.show_help;
                KeyOutcome::None
            }
            // A replay's keys reach its producer before the state (`ui::feed`).
            Action::Step | Action::SpeedUp | Action::SpeedDown => KeyOutcome::None,
            Action::PauseResume
            | Action::ResetStats
            | Action::OutputMore
            | Action::OutputLess
            | Action::PromptMore
            | Action::PromptLess
            | Action::LoadMore
            | Action::LoadLess => KeyOutcome::None,
            // Row selection is `watch`'s.
            Action::SelectUp | Action::SelectDown => KeyOutcome::None,
        }
    }

    /// The view after this one; the breakdown, thinking and models views only when they
    /// have something to show.
    pub fn next_view(&self) -> View {
        let mut next = self.view.next();
        loop {
            let empty = match next {
                View::Breakdown => !self.views.breakdown.has_splits(),
                View::Thinking => !self.views.reasoning.has_parts(),
                View::Models => self.views.models.is_empty(),
                _ => false,
            };
            if !empty {
                return next;
            }
            next = next.next();
        }
    }

    /// The SLO limit for a table row, if one is set.
    pub fn slo_limit(&self, metric: Metric) -> Option<crate::stats::Limit> {
        self.slo.for_metric(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::StopReason;
    use crate::ui::charts::STEP_HISTORY;
    use crate::ui::outliers::MIN_OUTLIER_N;

    /// A short request shows only its number; one that runs long shows where it is.
    #[test]
    fn progress_shows_after_a_second() {
        let c = CurrentRequest {
            index: 3,
            warmup: false,
            prompt_tokens: 8,
            output_tokens: 16,
            batch: 1,
            ttft_s: Some(0.1),
            steps: 7,
            started: Duration::from_secs(10),
        };
        assert_eq!(c.progress(Duration::from_millis(10_500)), "#3");
        assert_eq!(c.progress(Duration::from_millis(11_000)), "#3 step 7/15");
    }
    use crate::event::RequestDone;

    fn done(index: u64, warmup: bool, ttft_s: f64) -> Event {
        Event::RequestDone(Box::new(RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 8,
            output_tokens: 4,
            ttft_s,
            tpot_s: Some(0.001),
            e2e_s: ttft_s + 0.003,
            ..Default::default()
        }))
    }

    fn warnings(app: &App) -> Vec<String> {
        app.events
            .iter()
            .filter(|e| e.level == Level::Warn)
            .map(|e| e.text.clone())
            .collect()
    }

    #[test]
    fn outliers_need_a_reference_and_a_real_excess() {
        let mut app = App::default();
        // Fewer than MIN_OUTLIER_N steady requests: nothing is an outlier yet.
        for i in 0..(MIN_OUTLIER_N as u64 - 1) {
            app.apply(&done(i, false, 0.010 + 0.0001 * (i % 3) as f64));
            app.refresh();
        }
        app.apply(&done(100, false, 0.020));
        app.refresh();
        assert!(warnings(&app).is_empty(), "{:?}", warnings(&app));
        for i in 0..30 {
            app.apply(&done(200 + i, false, 0.010 + 0.0001 * (i % 3) as f64));
            app.refresh();
        }
        // A hair above p99 is not news; far above p99 and the median is.
        app.apply(&done(300, false, 0.0103));
        app.refresh();
        assert!(warnings(&app).is_empty(), "{:?}", warnings(&app));
        app.apply(&done(301, false, 0.040));
        assert_eq!(warnings(&app).len(), 1);
        assert!(
            warnings(&app)[0].starts_with("#301 TTFT 40.0ms > p99 "),
            "{:?}",
            warnings(&app)
        );
        // Warmup requests are never outliers.
        app.apply(&done(302, true, 0.9));
        assert_eq!(warnings(&app).len(), 1);
    }

    #[test]
    fn a_workload_change_restarts_the_outlier_reference() {
        let mut app = App::default();
        for i in 0..40 {
            app.apply(&done(i, false, 0.010));
            app.refresh();
        }
        app.apply(&Event::WorkloadChanged(Box::new(WorkloadDesc {
            prompt_tokens: "16".into(),
            output_tokens: "4".into(),
            batch: 1,
            load: None,
        })));
        app.refresh();
        app.apply(&done(40, false, 0.030));
        assert!(warnings(&app).is_empty(), "{:?}", warnings(&app));
        assert!(app
            .charts
            .requests
            .last()
            .is_some_and(|p| p.boundary && !p.outlier_ttft));
    }

    #[test]
    fn phases_follow_the_events() {
        let mut app = App::default();
        assert_eq!(app.phase, RunPhase::Loading);
        app.apply(&Event::Paused);
        app.apply(&Event::Error {
            message: "disk".into(),
            fatal: false,
        });
        assert_eq!(app.phase, RunPhase::Paused);
        app.apply(&Event::Finished(StopReason::UserStop));
        assert_eq!(app.phase, RunPhase::Stopped);
        assert!(!app.worker_live());
        assert_eq!(app.update(Action::PauseResume), KeyOutcome::None);
        assert_eq!(app.update(Action::Quit), KeyOutcome::Quit);
    }

    #[test]
    fn a_full_table_is_exact_every_frame() {
        let step = Event::decode_step(0, 1, 0.001, None);
        let mut app = App::default();
        for _ in 0..150_000 {
            app.apply(&step);
        }
        app.apply(&done(0, false, 0.01));
        app.refresh();
        assert_eq!(
            app.views.table.get(Metric::Itl).n,
            crate::stats::STEP_WINDOW
        );
        app.apply(&Event::decode_step(1, 1, 0.5, None));
        app.apply(&done(1, false, 0.01));
        app.refresh();
        assert_eq!(app.views.table.get(Metric::Itl).max, 0.5);
    }

    /// A batch pushes only the steps the ring keeps, and they are the batch's newest: the
    /// header's decode rate and the last ITL are the same as with a push per step.
    #[test]
    fn a_batch_leaves_its_newest_steps_in_the_ring() {
        let mut app = App::default();
        let batch: Vec<crate::event::DecodeStep> = (1..=50u32)
            .map(|step| crate::event::DecodeStep::new(0, step, f64::from(step) * 1e-3, None))
            .collect();
        app.apply(&Event::DecodeSteps(batch));
        let kept: Vec<u32> = app
            .charts
            .steps
            .last_n(STEP_HISTORY)
            .map(|p| p.step)
            .collect();
        assert_eq!(kept, (43..=50).collect::<Vec<u32>>());
        assert_eq!(app.charts.steps.last().map(|p| p.itl_s), Some(0.05));
        app.apply(&Event::decode_step(0, 51, 0.1, None));
        assert_eq!(
            app.charts
                .steps
                .last_n(2)
                .map(|p| p.step)
                .collect::<Vec<_>>(),
            [50, 51]
        );
    }

    /// On screen (`refresh_paced`), figures change at most every `FIGURES_HOLD`; a change after
    /// a quiet spell, a key and the end of the run show at once, and what is shown is exact.
    #[test]
    fn figures_are_held_but_exact() {
        let mut app = App::default();
        let at = |app: &mut App, ms: u64| app.tick(Duration::from_millis(ms));
        at(&mut app, 1000);
        app.apply(&done(0, false, 0.01));
        app.refresh_paced();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 1);
        assert_eq!(app.figures.requests_done, 1);
        // Two more within the hold: not yet.
        at(&mut app, 1100);
        app.apply(&done(1, false, 0.02));
        app.refresh_paced();
        at(&mut app, 1400);
        app.apply(&done(2, false, 0.03));
        app.refresh_paced();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 1);
        assert_eq!(app.figures.requests_done, 1);
        assert_eq!(app.figures.last_ttft_s, Some(0.01));
        // Once the hold has passed: both, exactly.
        at(&mut app, 1500);
        app.refresh_paced();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 3);
        assert_eq!(app.views.table.get(Metric::Ttft).max, 0.03);
        assert_eq!(app.figures.requests_done, 3);
        assert_eq!(app.figures.last_ttft_s, Some(0.03));
        // A key shows at once (the warmup request enters the table).
        at(&mut app, 1600);
        app.apply(&done(3, true, 0.5));
        app.update(Action::ToggleWarmup);
        app.refresh_paced();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 4);
        // So does the end of the run.
        at(&mut app, 1700);
        app.apply(&done(4, false, 0.01));
        app.apply(&Event::Finished(StopReason::RequestLimit));
        app.refresh_paced();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 5);
        // A quiet spell, then a change: at the next frame.
        at(&mut app, 5000);
        app.apply(&done(5, false, 0.01));
        app.refresh_paced();
        assert_eq!(app.figures.requests_done, 6);
    }

    /// At a thousand requests a second the outliers of one second share a line: the pane does
    /// not scroll at every frame, and the worst of them is named.
    #[test]
    fn outliers_within_a_second_share_a_line() {
        let mut app = App::default();
        for i in 0..40 {
            app.apply(&done(i, false, 0.010));
            app.refresh();
        }
        let lines = app.events.iter().len();
        app.tick(Duration::from_millis(10_000));
        app.apply(&done(100, false, 0.040));
        app.tick(Duration::from_millis(10_300));
        app.apply(&done(101, false, 0.090));
        app.tick(Duration::from_millis(10_600));
        app.apply(&done(102, false, 0.050));
        assert_eq!(app.events.iter().len(), lines + 1, "{:?}", warnings(&app));
        let w = warnings(&app);
        assert!(
            w[0].starts_with("3 outliers, worst #101 TTFT 90.0ms > p99 "),
            "{w:?}"
        );
        // A second later: a line of its own again.
        app.tick(Duration::from_millis(11_100));
        app.apply(&done(103, false, 0.040));
        let w = warnings(&app);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[1].starts_with("#103 TTFT 40.0ms > p99 "), "{w:?}");
    }

    #[test]
    fn refresh_is_lazy() {
        let mut app = App::default();
        app.apply(&done(0, false, 0.01));
        app.refresh();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 1);
        // Without a refresh the table does not move: render reads a snapshot.
        app.apply(&done(1, false, 0.01));
        assert_eq!(app.views.table.get(Metric::Ttft).n, 1);
        app.refresh();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 2);
        // Toggling the window marks the table stale.
        app.update(Action::ToggleWarmup);
        app.apply(&done(2, true, 0.5));
        app.refresh();
        assert_eq!(app.views.table.get(Metric::Ttft).n, 3);
    }
}
