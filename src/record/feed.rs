//! A record read back as the run's events, in the order they happened: what `replay` and
//! `follow` feed the dashboard, so the screen folds a record exactly as it folded the live
//! stream (the same `App::apply`, the same `fold::RunFold`), and its statistics are the record's own.
//!
//! A record is written in the order the consumer got things (docs/record-format.md): a
//! request's line when it ended. The feeder puts each request back on the record's clock: it
//! starts at `t_s − e2e_s` (`RequestStarted`), has its first token at the start + TTFT
//! (`PrefillDone`), its steps at their own `t_s`, and ends at `t_s` (`RequestDone`). Since a
//! start lies before lines already read (a server run has many requests in flight), events are
//! held in a heap for as long as the longest request seen so far (at most `MAX_HELD` events)
//! and let out in time order; what the record wrote (the order of requests, of steps, of a
//! `stats_reset` among them) keeps its order, so the run's statistics come out the same.
//!
//! Records written before lines carried `t_s` have no clock for their requests: they are laid
//! end to end (each request taking its E2E, as a run of one request at a time does), and the
//! feeder says so once.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::event::{CellStart, Event, ModelInfo, RunInfo, StopReason, WorkloadDesc};
use crate::stats::Summary;

use super::line::{CellStatus, Header, Line, RunEvent, SweepConfig};

/// Events held at most for reordering: past this the oldest goes out whatever its time (a
/// request that took minutes must not make memory grow with the rate).
pub const MAX_HELD: usize = 100_000;

/// The longest request the feeder waits for before letting later lines out.
const MAX_HORIZON_S: f64 = 600.0;

/// What a record-fed producer sends to its screen, from one source (a file, a stream) of
/// several (`source`, 0-based, in the order given).
#[derive(Clone, Debug)]
pub enum FeedEvent {
    /// The source's header: sent first (the session waits for every source's before it draws).
    Header { source: usize, header: Box<Header> },
    /// One of the run's events at `t_s`, on the source's own clock (seconds since its run began).
    Run {
        source: usize,
        t_s: f64,
        event: Event,
    },
    /// A sweep's grid (line 2 of a sweep's record): the screen folds the cells as a sweep.
    Sweep {
        source: usize,
        config: Box<SweepConfig>,
    },
    /// The footer of a record without step lines: the run's own ITL, which `report` also
    /// takes from the footer.
    FooterItl { source: usize, itl: FooterItl },
    /// The source's state changed, or it has something to say (a line for the events pane).
    Source {
        source: usize,
        state: Option<SourceState>,
        note: Option<Note>,
    },
    /// Where a replay is.
    Position(Position),
    /// Several of the above in order: a replay at full speed sends its events in batches, so
    /// the channel's hand-offs (a wake-up each) do not cost more than the fold.
    Batch(Vec<FeedEvent>),
}

/// A line for the events pane, from a source.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    pub warn: bool,
    pub text: String,
}

impl Note {
    pub fn info(text: impl Into<String>) -> Note {
        Note {
            warn: false,
            text: text.into(),
        }
    }

    pub fn warn(text: impl Into<String>) -> Note {
        Note {
            warn: true,
            text: text.into(),
        }
    }
}

/// How a source is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceState {
    /// No header yet.
    Waiting,
    /// Lines come.
    Live,
    /// Its footer came: the run ended (how: the `Finished` it carried).
    Ended,
    /// It ended without a footer (the stream closed, the agent exited, the file was cut):
    /// why, in one line.
    Died(String),
}

/// A replay's speed: a multiple of the record's own pace, or as fast as it reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    Times(f64),
    Max,
}

impl Speed {
    /// The slowest and the fastest paced speeds; faster than the fastest is `Max`.
    pub const MIN: f64 = 1.0 / 16.0;
    pub const MAX: f64 = 1024.0;

    /// Twice as fast (past 1024× as fast as it reads).
    pub fn faster(self) -> Speed {
        match self {
            Speed::Times(x) if x * 2.0 <= Speed::MAX => Speed::Times(x * 2.0),
            _ => Speed::Max,
        }
    }

    /// Half as fast (from as fast as it reads, 1024×).
    pub fn slower(self) -> Speed {
        match self {
            Speed::Max => Speed::Times(Speed::MAX),
            Speed::Times(x) => Speed::Times((x / 2.0).max(Speed::MIN)),
        }
    }

    /// `1×`, `0.25×`, `64×`, `max`.
    pub fn label(self) -> String {
        match self {
            Speed::Max => "max".into(),
            Speed::Times(x) if x >= 1.0 => format!("{x:.0}×"),
            Speed::Times(x) => format!("{x}×"),
        }
    }

    /// `--speed`: a multiple (`2`, `0.5`, `4x`) or `max`.
    pub fn parse(s: &str) -> Result<Speed, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "max" || t == "fast" {
            return Ok(Speed::Max);
        }
        let n = t.trim_end_matches(['x', '×']);
        match n.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(Speed::Times(x.clamp(Speed::MIN, Speed::MAX))),
            _ => Err(format!(
                "`{s}` is not a speed (use a multiple of the record's pace such as 1, 4 or 0.5, or max)"
            )),
        }
    }
}

/// Pacing on the record's clock, the one way every player of a record keeps time (a replay's
/// dashboard, `replay --jsonl`, a watch's record): from an anchor (a wall-clock instant and the
/// record's time then), the line at record time `t_s` is due `(t_s − from) / speed` later. The
/// first line anchors the pace; a pause, a step or a change of speed anchors it again where the
/// record is, so what was played stays played.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    speed: Speed,
    anchor: Option<(std::time::Instant, f64)>,
}

impl Pace {
    pub fn new(speed: Speed) -> Pace {
        Pace {
            speed,
            anchor: None,
        }
    }

    pub fn speed(&self) -> Speed {
        self.speed
    }

    /// A new speed from record time `t_s` on.
    pub fn set_speed(&mut self, speed: Speed, t_s: f64) {
        self.speed = speed;
        self.restart(t_s);
    }

    /// Counts again from now, where the record is at `t_s`.
    pub fn restart(&mut self, t_s: f64) {
        self.anchor = Some((std::time::Instant::now(), t_s));
    }

    /// Forgets the anchor: the next line anchors the pace again (a step played at once).
    pub fn forget(&mut self) {
        self.anchor = None;
    }

    /// When the line at record time `t_s` is due on the wall clock; `None` as fast as it reads.
    pub fn due(&mut self, t_s: f64) -> Option<std::time::Instant> {
        let Speed::Times(x) = self.speed else {
            return None;
        };
        let (wall, from) = *self
            .anchor
            .get_or_insert_with(|| (std::time::Instant::now(), t_s));
        Some(wall + std::time::Duration::from_secs_f64(((t_s - from) / x).clamp(0.0, 1e9)))
    }
}

/// Where a replay is, for the position bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Position {
    /// Bytes of the record read, of its size.
    pub read_bytes: u64,
    pub total_bytes: u64,
    /// The record's time of the last event sent.
    pub t_s: f64,
    /// The record's time at its end (footer or last line), when the record has times.
    pub end_s: Option<f64>,
    pub speed: Speed,
    pub paused: bool,
    /// The record's requests carry no times: played end to end.
    pub untimed: bool,
    /// Every line has been played.
    pub done: bool,
}

impl Position {
    /// How far, 0 to 1: by the record's clock when its end is known, else by bytes.
    pub fn fraction(&self) -> f64 {
        if self.done {
            return 1.0;
        }
        let f = match self.end_s {
            Some(end) if end > 0.0 && !self.untimed => self.t_s / end,
            _ if self.total_bytes > 0 => self.read_bytes as f64 / self.total_bytes as f64,
            _ => 0.0,
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// What a replay's keys ask of its producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedControl {
    TogglePause,
    /// Play up to the next request's end, then pause.
    Step,
    Faster,
    Slower,
    Stop,
}

/// What the feeder lets out: an event at a time, or what the record says besides.
#[derive(Clone, Debug)]
pub enum Fed {
    Event { t_s: f64, event: Event },
    Sweep(Box<SweepConfig>),
    FooterItl(FooterItl),
    Note(Note),
}

/// The ITL a run printed (its footer's), for a record without step lines to recompute it from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FooterItl {
    /// Steady state (`metrics.itl_s`).
    pub steady: Option<Summary>,
    /// The warmup requests' (`warmup.itl_s`).
    pub warmup: Option<Summary>,
    /// Each model's (`models[].itl_s`), when the run split by model.
    pub models: Vec<(String, Summary)>,
}

/// An event held for reordering, in time order (then the order it was made).
#[derive(Debug)]
struct Held {
    t_s: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .t_s
            .total_cmp(&self.t_s)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Whether the record's requests carry times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timing {
    Unknown,
    Timed,
    Untimed,
}

/// One record's lines → the run's events, in time order (see the module docs). Pure: no I/O,
/// no clock.
#[derive(Debug)]
pub struct Feeder {
    header: Option<Header>,
    warmup: u64,
    sweep_cells: Option<usize>,
    timing: Timing,
    /// The record's time of the last line read.
    clock: f64,
    /// The time of the last event let out (what is let out never goes back in time).
    released: f64,
    /// Nothing made up (a request's start) goes before the last line that starts something
    /// (`run_started`, `stats_reset`, a cell's start or end).
    barrier: f64,
    /// How long the longest request seen took: lines are held this long for starts to come
    /// (until the first request says, everything is held).
    horizon: Option<f64>,
    seq: u64,
    heap: BinaryHeap<Held>,
    run_started: bool,
    steps_seen: bool,
    footer_seen: bool,
    lines: u64,
    bad_lines: u64,
}

impl Default for Feeder {
    fn default() -> Self {
        Feeder::new()
    }
}

impl Feeder {
    pub fn new() -> Feeder {
        Feeder {
            header: None,
            warmup: 0,
            sweep_cells: None,
            timing: Timing::Unknown,
            clock: 0.0,
            released: 0.0,
            barrier: 0.0,
            horizon: None,
            seq: 0,
            heap: BinaryHeap::new(),
            run_started: false,
            steps_seen: false,
            footer_seen: false,
            lines: 0,
            bad_lines: 0,
        }
    }

    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// Whether the footer has been read (the run ended).
    pub fn footer_seen(&self) -> bool {
        self.footer_seen
    }

    /// Whether the record's requests have no times (played end to end).
    pub fn untimed(&self) -> bool {
        self.timing == Timing::Untimed
    }

    /// Whole lines read, and those that were not JSON.
    pub fn lines(&self) -> (u64, u64) {
        (self.lines, self.bad_lines)
    }

    /// Events held for reordering.
    pub fn held(&self) -> usize {
        self.heap.len()
    }

    /// One line of the record (`None`: not whole JSON); what is ready goes to `out`.
    pub fn push(&mut self, line: Option<Line>, out: &mut Vec<Fed>) {
        self.lines += 1;
        let Some(line) = line else {
            self.bad_lines += 1;
            if self.bad_lines == 1 {
                out.push(Fed::Note(Note::warn(format!(
                    "line {} is not whole JSON: skipped (as report skips it)",
                    self.lines
                ))));
            }
            return;
        };
        match line {
            Line::Header(h) => {
                if self.header.is_none() {
                    self.warmup = h.config.warmup;
                    self.header = Some(*h);
                } else {
                    out.push(Fed::Note(Note::warn(format!(
                        "line {}: a second header (two runs in one file?): skipped",
                        self.lines
                    ))));
                }
            }
            Line::Event(e) => {
                let t = self.line_time(Some(e.t_s));
                let event = match e.event {
                    RunEvent::RunStarted {
                        model,
                        workload,
                        traffic,
                        peak,
                    } => {
                        self.barrier = t;
                        self.run_started = true;
                        let mut info = self.run_info(model, workload);
                        info.traffic = traffic;
                        info.peak = peak;
                        Some(Event::RunStarted(Box::new(info)))
                    }
                    RunEvent::Paused => Some(Event::Paused),
                    RunEvent::Resumed => Some(Event::Resumed),
                    RunEvent::StatsReset => {
                        self.barrier = t;
                        Some(Event::StatsReset)
                    }
                    RunEvent::WorkloadChanged { detail } => {
                        Some(Event::WorkloadChanged(Box::new(detail)))
                    }
                    RunEvent::Error { detail } => Some(Event::Error {
                        message: detail.message,
                        fatal: detail.fatal,
                    }),
                    RunEvent::ModelLoaded(m) => Some(Event::Notice(Box::new(
                        crate::event::Notice::ModelLoaded(m),
                    ))),
                    RunEvent::PrefixCacheReset(c) => Some(Event::Notice(Box::new(
                        crate::event::Notice::PrefixCacheReset(c),
                    ))),
                    RunEvent::ApiPicked(a) => {
                        Some(Event::Notice(Box::new(crate::event::Notice::ApiPicked(a))))
                    }
                    RunEvent::ServerNote(n) => {
                        Some(Event::Notice(Box::new(crate::event::Notice::ServerNote(n))))
                    }
                    RunEvent::Canary(c) => Some(Event::Canary(Box::new(c))),
                    RunEvent::CancelCheck(c) => Some(Event::Notice(Box::new(
                        crate::event::Notice::CancelCheck(c),
                    ))),
                    RunEvent::Cooldown(c) => {
                        Some(Event::Notice(Box::new(crate::event::Notice::Cooldown(c))))
                    }
                    RunEvent::RequestCancelled(c) => {
                        // Started when it was sent, as a failed request's line says it.
                        let start = (t - finite(c.elapsed_s)).max(self.barrier);
                        self.ensure_run_started(start);
                        let (prompt_tokens, output_tokens, batch) = self.configured_lengths();
                        self.hold(
                            start,
                            Event::RequestStarted {
                                index: c.index,
                                warmup: c.warmup,
                                prompt_tokens,
                                output_tokens,
                                batch,
                            },
                        );
                        Some(Event::RequestCancelled(Box::new(c)))
                    }
                    RunEvent::Other => None,
                };
                if let Some(ev) = event {
                    self.hold(t, ev);
                }
            }
            Line::Request(r) => {
                self.timing_of(r.t_s.is_some(), out);
                let e2e = finite(r.request.e2e_s);
                let (start, end) = self.span(r.t_s, e2e);
                self.ensure_run_started(start);
                let start = start.max(self.barrier);
                let req = r.request;
                self.hold(
                    start,
                    Event::RequestStarted {
                        index: req.index,
                        warmup: req.warmup,
                        prompt_tokens: req.prompt_tokens,
                        output_tokens: req.output_tokens,
                        batch: req.batch,
                    },
                );
                self.hold(
                    (start + finite(req.ttft_s)).min(end),
                    Event::PrefillDone {
                        index: req.index,
                        ttft_s: req.ttft_s,
                    },
                );
                self.hold(end, Event::RequestDone(Box::new(req)));
            }
            Line::RequestFailed(f) => {
                self.timing_of(f.t_s.is_some(), out);
                let (start, end) = self.span(f.t_s, finite(f.failed.elapsed_s));
                self.ensure_run_started(start);
                let start = start.max(self.barrier);
                let (prompt_tokens, output_tokens, batch) = self.configured_lengths();
                self.hold(
                    start,
                    Event::RequestStarted {
                        index: f.failed.index,
                        warmup: f.failed.warmup,
                        prompt_tokens,
                        output_tokens,
                        batch,
                    },
                );
                self.hold(end, Event::RequestFailed(Box::new(f.failed)));
            }
            Line::Step(s) => {
                self.steps_seen = true;
                let t = self.line_time(s.t_s);
                self.hold(t, Event::decode_step(s.index, s.step, s.itl_s, s.gpu_s));
            }
            Line::StepParts(p) => {
                let t = self.line_time(p.t_s);
                self.hold(t, Event::StepParts(Box::new(p.parts)));
            }
            Line::Telemetry(s) => {
                let t = self.line_time(Some(s.t_s));
                self.hold(t, Event::Telemetry(Box::new(s)));
            }
            Line::ServerMetrics(m) => {
                let t = self.line_time(Some(m.t_s));
                self.hold(t, Event::ServerMetrics(Box::new(m.window)));
            }
            // A watch's own lines: its screen reads them (`session::replay`), a run's does not.
            Line::NodeMetrics(_) | Line::ScrapeFailed(_) => {}
            // What a `--determinism` run found: `report` prints it, no screen folds it.
            Line::Determinism(_) => {}
            Line::Sweep(config) => {
                self.release(f64::INFINITY, out);
                self.warmup = config.warmup;
                self.sweep_cells = Some(config.cells.len());
                out.push(Fed::Sweep(Box::new(config)));
            }
            Line::Cell(c) => {
                let t = self.line_time(None);
                self.barrier = t;
                self.run_started = false;
                self.hold(
                    t,
                    Event::CellStarted(Box::new(CellStart {
                        cell: c.cell,
                        cells: self.sweep_cells.unwrap_or(c.cell + 1),
                        params: c.params,
                    })),
                );
            }
            Line::CellEnd(end) => {
                let t = self.line_time(None);
                self.barrier = t;
                let stop = match end.status {
                    CellStatus::Ok => StopReason::RequestLimit,
                    CellStatus::Stopped => StopReason::UserStop,
                    CellStatus::Failed => {
                        let message = end.reason.unwrap_or_else(|| "the cell failed".into());
                        self.hold(
                            t,
                            Event::Error {
                                message,
                                fatal: true,
                            },
                        );
                        StopReason::Error
                    }
                };
                self.hold(t, Event::Finished(stop));
            }
            Line::Footer(f) => {
                let t = self.line_time(None).max(finite(f.elapsed_s));
                self.clock = t;
                self.footer_seen = true;
                if !self.steps_seen && self.sweep_cells.is_none() {
                    let itl = FooterItl {
                        steady: footer_itl(&f.summary, "metrics"),
                        warmup: footer_itl(&f.summary, "warmup"),
                        models: footer_model_itl(&f.summary),
                    };
                    if itl != FooterItl::default() {
                        out.push(Fed::FooterItl(itl));
                    }
                }
                self.hold(t, Event::Finished(f.stop));
            }
            Line::Unknown => {}
        }
        let limit = self.clock - self.horizon.unwrap_or(f64::INFINITY);
        self.release(limit, out);
    }

    /// No more lines for now (a followed record is idle) or ever: everything held goes out.
    pub fn flush(&mut self, out: &mut Vec<Fed>) {
        self.release(f64::INFINITY, out);
    }

    /// The record has ended. Without a footer, the run was cut off (or is still being
    /// written): a fatal error says so, and the run finishes there.
    pub fn finish(&mut self, name: &str, out: &mut Vec<Fed>) {
        if !self.footer_seen && self.header.is_some() {
            let t = self.clock;
            let (lines, _) = self.lines();
            self.hold(
                t,
                Event::Error {
                    message: format!(
                        "{name} ends without a footer after {lines} lines: the run was cut off \
                         (its statistics are those of the lines up to there), or it is still \
                         being written (infertop follow {name})"
                    ),
                    fatal: true,
                },
            );
            self.hold(t, Event::Finished(StopReason::Error));
            self.footer_seen = true;
        }
        self.flush(out);
    }

    fn run_info(&self, model: ModelInfo, workload: WorkloadDesc) -> RunInfo {
        RunInfo {
            model,
            workload,
            warmup_requests: self.warmup,
            threads: self.header.as_ref().map_or(0, |h| h.config.threads),
            traffic: self
                .header
                .as_ref()
                .and_then(|h| h.config.traffic.clone())
                .map(Box::new),
            peak: None,
        }
    }

    /// Records whose header carried the model (older ones) have no `run_started`: the run
    /// starts with its first request.
    fn ensure_run_started(&mut self, t: f64) {
        if self.run_started {
            return;
        }
        self.run_started = true;
        let (prompt_tokens, output_tokens, batch) = self.configured_lengths();
        let (model, workload) = match &self.header {
            Some(h) => (
                h.model
                    .clone()
                    .unwrap_or_else(|| ModelInfo::served(&h.config.model, &h.config.device)),
                WorkloadDesc {
                    prompt_tokens: h.config.prompt_tokens.clone(),
                    output_tokens: h.config.output_tokens.clone(),
                    batch,
                    load: None,
                },
            ),
            None => (
                ModelInfo::served("?", "?"),
                WorkloadDesc {
                    prompt_tokens: prompt_tokens.to_string(),
                    output_tokens: output_tokens.to_string(),
                    batch,
                    load: None,
                },
            ),
        };
        let info = self.run_info(model, workload);
        let t = t.max(self.released);
        self.barrier = self.barrier.max(t);
        self.hold(t, Event::RunStarted(Box::new(info)));
    }

    /// The header's lengths, where they are numbers (a failed request's line has none).
    fn configured_lengths(&self) -> (usize, usize, usize) {
        let Some(h) = &self.header else {
            return (0, 0, 1);
        };
        let n = |s: &str| {
            s.trim()
                .trim_start_matches('~')
                .parse::<usize>()
                .unwrap_or(0)
        };
        (
            n(&h.config.prompt_tokens),
            n(&h.config.output_tokens),
            h.config.batch.max(1),
        )
    }

    /// Decided at the first request: whether requests carry times.
    fn timing_of(&mut self, has_t: bool, out: &mut Vec<Fed>) {
        if self.timing != Timing::Unknown {
            return;
        }
        self.timing = if has_t {
            Timing::Timed
        } else {
            out.push(Fed::Note(Note::info(
                "this record's requests carry no times (written before they did): they are \
                 played end to end, each taking its E2E",
            )));
            // End to end, the lines are already in time order: nothing to hold.
            self.horizon = Some(0.0);
            Timing::Untimed
        };
    }

    /// A request's start and end: from its `t_s` (its end), or end to end.
    fn span(&mut self, t_s: Option<f64>, took: f64) -> (f64, f64) {
        match (self.timing, t_s) {
            (Timing::Timed, Some(t)) => {
                let longest = self.horizon.unwrap_or(0.0).max(took).min(MAX_HORIZON_S);
                self.horizon = Some(longest);
                let end = self.line_time(Some(t));
                ((end - took).max(self.barrier), end)
            }
            _ => {
                let start = self.line_time(None);
                let end = start + took;
                self.clock = end;
                (start, end)
            }
        }
    }

    /// The time of a line: its own, or where the record is when it has none (or is played
    /// end to end); never before the previous line's.
    fn line_time(&mut self, t: Option<f64>) -> f64 {
        let t = match (self.timing, t) {
            (Timing::Untimed, _) | (_, None) => self.clock,
            (_, Some(t)) => finite(t).max(self.clock),
        };
        self.clock = t;
        t
    }

    fn hold(&mut self, t_s: f64, event: Event) {
        self.seq += 1;
        self.heap.push(Held {
            t_s,
            seq: self.seq,
            event,
        });
    }

    /// Lets out, in time order, what is held up to `limit` (and the oldest beyond `MAX_HELD`).
    fn release(&mut self, limit: f64, out: &mut Vec<Fed>) {
        while let Some(top) = self.heap.peek() {
            if top.t_s > limit && self.heap.len() <= MAX_HELD {
                break;
            }
            let Some(held) = self.heap.pop() else { break };
            let t_s = held.t_s.max(self.released);
            self.released = t_s;
            out.push(Fed::Event {
                t_s,
                event: held.event,
            });
        }
    }
}

/// A time as a number (a record's NaN or infinity would stop the clock): 0 otherwise.
fn finite(t: f64) -> f64 {
    if t.is_finite() {
        t.max(0.0)
    } else {
        0.0
    }
}

/// An ITL the run printed (its footer's `metrics.itl_s` or `warmup.itl_s`), when it has samples.
pub fn footer_itl(summary: &serde_json::Value, table: &str) -> Option<Summary> {
    let s = summary.get(table)?.get("itl_s")?;
    let s: Summary = serde_json::from_value(s.clone()).ok()?;
    (s.n > 0).then_some(s)
}

/// Each model's ITL the run printed (its footer's `models[].itl_s`), where it has samples.
pub fn footer_model_itl(summary: &serde_json::Value) -> Vec<(String, Summary)> {
    let Some(models) = summary.get("models").and_then(serde_json::Value::as_array) else {
        return Vec::new();
    };
    models
        .iter()
        .filter_map(|m| {
            let name = m.get("model")?.as_str()?.to_string();
            let s: Summary = serde_json::from_value(m.get("itl_s")?.clone()).ok()?;
            (s.n > 0).then_some((name, s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::line::{EventLine, Footer, RequestLine, StepLine};
    use crate::summary::{RunSummary, SummaryFormat};

    fn done(index: u64, e2e_s: f64) -> crate::event::RequestDone {
        crate::event::RequestDone {
            index,
            warmup: false,
            batch: 1,
            prompt_tokens: 8,
            output_tokens: 4,
            ttft_s: e2e_s / 4.0,
            tpot_s: Some(e2e_s / 4.0),
            e2e_s,
            ..Default::default()
        }
    }

    fn request(index: u64, e2e_s: f64, t_s: Option<f64>) -> Option<Line> {
        Some(Line::Request(RequestLine::of(&done(index, e2e_s), t_s)))
    }

    fn header() -> Option<Line> {
        Some(Line::Header(Box::default()))
    }

    fn events(fed: &[Fed]) -> Vec<(f64, String)> {
        fed.iter()
            .filter_map(|f| match f {
                Fed::Event { t_s, event } => {
                    let name = match event {
                        Event::RequestStarted { index, .. } => format!("start {index}"),
                        Event::PrefillDone { .. } => return None,
                        Event::RequestDone(r) => format!("done {}", r.index),
                        Event::DecodeSteps(s) => s
                            .iter()
                            .map(|s| format!("step {}.{}", s.index, s.step))
                            .collect::<Vec<_>>()
                            .join(" "),
                        Event::RunStarted(_) => "run".into(),
                        Event::Finished(_) => "finished".into(),
                        Event::StatsReset => "reset".into(),
                        Event::Error { .. } => "error".into(),
                        other => format!("{other:?}"),
                    };
                    Some((*t_s, name))
                }
                _ => None,
            })
            .collect()
    }

    /// Two requests in flight at once (a server run): the second starts before the first
    /// ends, so its start goes out before the first's end although its line comes later.
    #[test]
    fn starts_go_back_in_time_before_later_lines() {
        let mut f = Feeder::new();
        let mut out = Vec::new();
        f.push(header(), &mut out);
        // #0 runs 1.0..3.0, #1 runs 2.0..3.5, #2 runs 3.0..4.0 (each line when it ended).
        f.push(request(0, 2.0, Some(3.0)), &mut out);
        f.push(request(1, 1.5, Some(3.5)), &mut out);
        f.push(request(2, 1.0, Some(4.0)), &mut out);
        f.finish("r.jsonl", &mut out);
        let names: Vec<String> = events(&out).into_iter().map(|(_, n)| n).collect();
        assert_eq!(
            names,
            [
                "run", "start 0", "start 1", "done 0", "start 2", "done 1", "done 2", "error",
                "finished"
            ]
        );
        let times: Vec<f64> = events(&out).into_iter().map(|(t, _)| t).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert_eq!(times[1], 1.0);
    }

    /// The order that decides the statistics is the record's: requests in the order they
    /// ended, steps before their request, a reset among them where it was.
    #[test]
    fn what_the_statistics_count_keeps_the_records_order() {
        let mut f = Feeder::new();
        let mut out = Vec::new();
        f.push(header(), &mut out);
        let step = |index, step, t| {
            Some(Line::Step(StepLine {
                index,
                step,
                itl_s: 0.1,
                gpu_s: None,
                t_s: Some(t),
            }))
        };
        f.push(step(0, 1, 0.5), &mut out);
        f.push(request(0, 1.0, Some(1.0)), &mut out);
        f.push(
            Some(Line::Event(EventLine {
                t_s: 1.0,
                event: RunEvent::StatsReset,
            })),
            &mut out,
        );
        f.push(step(1, 1, 1.5), &mut out);
        f.push(request(1, 0.8, Some(2.0)), &mut out);
        f.push(
            Some(Line::Footer(Footer {
                stop: StopReason::RequestLimit,
                elapsed_s: 2.5,
                summary: serde_json::json!({}),
            })),
            &mut out,
        );
        f.flush(&mut out);
        let names: Vec<String> = events(&out).into_iter().map(|(_, n)| n).collect();
        assert_eq!(
            names,
            [
                "run", "start 0", "step 0.1", "done 0", "reset", "start 1", "step 1.1", "done 1",
                "finished"
            ]
        );
        // The start of #1 (2.0 − 0.8 = 1.2) is after the reset, and the footer at its time.
        let timed = events(&out);
        assert_eq!(timed[5], (1.2, "start 1".to_string()));
        assert_eq!(timed.last().map(|t| t.0), Some(2.5));
    }

    #[test]
    fn records_without_times_play_end_to_end_and_say_so() {
        let mut f = Feeder::new();
        let mut out = Vec::new();
        f.push(header(), &mut out);
        f.push(request(0, 2.0, None), &mut out);
        f.push(request(1, 1.0, None), &mut out);
        f.finish("old.jsonl", &mut out);
        assert!(f.untimed());
        assert!(out
            .iter()
            .any(|o| matches!(o, Fed::Note(n) if n.text.contains("no times"))));
        let timed = events(&out);
        let at = |name: &str| timed.iter().find(|(_, n)| n == name).map(|(t, _)| *t);
        assert_eq!(at("done 0"), Some(2.0));
        assert_eq!(at("start 1"), Some(2.0));
        assert_eq!(at("done 1"), Some(3.0));
    }

    #[test]
    fn the_footer_carries_the_runs_itl_when_there_are_no_steps() {
        let mut summary = RunSummary::default();
        let itl = Summary::of(&[0.001, 0.002, 0.004]);
        summary.steady.rows = vec![(crate::stats::Metric::Itl, itl)];
        let json: serde_json::Value =
            serde_json::from_str(&summary.render(SummaryFormat::Json)).unwrap();
        let mut f = Feeder::new();
        let mut out = Vec::new();
        f.push(header(), &mut out);
        f.push(request(0, 1.0, Some(1.0)), &mut out);
        f.push(
            Some(Line::Footer(Footer {
                stop: StopReason::RequestLimit,
                elapsed_s: 1.0,
                summary: json,
            })),
            &mut out,
        );
        let got = out.iter().find_map(|o| match o {
            Fed::FooterItl(s) => Some(s.clone()),
            _ => None,
        });
        assert_eq!(got.as_ref().and_then(|g| g.steady), Some(itl));
        assert_eq!(got.and_then(|g| g.warmup), None);
    }

    #[test]
    fn held_events_are_bounded() {
        let mut f = Feeder::new();
        let mut out = Vec::new();
        f.push(header(), &mut out);
        // A request that took 500 s makes the feeder hold 500 s of lines, but never more
        // than MAX_HELD events.
        f.push(request(0, 500.0, Some(500.0)), &mut out);
        for i in 1..(MAX_HELD as u64) {
            f.push(request(i, 0.001, Some(500.0 + i as f64 * 1e-4)), &mut out);
        }
        assert!(f.held() <= MAX_HELD + 3, "{}", f.held());
    }

    #[test]
    fn speeds_step_by_doubling_up_to_max() {
        assert_eq!(Speed::Times(1.0).faster(), Speed::Times(2.0));
        assert_eq!(Speed::Times(1024.0).faster(), Speed::Max);
        assert_eq!(Speed::Max.slower(), Speed::Times(1024.0));
        assert_eq!(Speed::Times(Speed::MIN).slower(), Speed::Times(Speed::MIN));
        assert_eq!(Speed::parse("4x"), Ok(Speed::Times(4.0)));
        assert_eq!(Speed::parse("max"), Ok(Speed::Max));
        assert!(Speed::parse("fast-ish").is_err());
        assert!(Speed::parse("0").is_err());
        assert_eq!(Speed::Times(0.25).label(), "0.25×");
    }
}
