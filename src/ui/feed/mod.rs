//! The dashboard on a record: `infertop replay` (a finished run, paced) and `infertop follow`
//! (a record another infertop is still writing, or several at once). The producers
//! (`session::replay`, `session::follow`) turn lines into the run's events
//! (`record::feed::Feeder`) and send them, tagged with their source, on the one channel; this
//! screen folds them into the run dashboard's own state (`App`), so what it shows is what the
//! run's dashboard showed, from the same code, and its statistics are the record's.
//!
//! Several sources (many load generators against one service) are merged here, as they come:
//! each source's request numbers are mapped to one sequence (they all count from 0), the
//! table is over the union of their raw samples (n summed, numpy-exact), and each source
//! keeps a row of its own (the sources pane, in place of the memory panel, whose figures
//! would mix machines). The sources' times go on one axis as `report` of their records puts
//! them (`record::merge::align`): on the reference clock when every header says its start on
//! it (sharded runs and `--start-at` measure it), else at their starts, so no clock needs to
//! agree with another machine's; the dashboard's time is the latest any source has reached.
//! The shards of one run (`--shard K/N`, each K once) keep their request numbers, the run's.
//!
//! The keys: a replay's pause, step and speed go back to its producer (`FeedControl`); the
//! load keys and reset are refused with a line (`ui::state::Producer`), and in a follow so is
//! pause: the run is another process's, and quitting the viewer leaves it running.

pub mod render;

use std::collections::HashMap;
use std::time::Duration;

use crossbeam_channel::Sender;
use ratatui::crossterm::event::KeyEvent;
use ratatui::Frame;

use super::keys::Action;
use super::log::Level;
use super::screen::Screen;
use super::state::{App, KeyOutcome, Producer};
use crate::event::{Event, StopReason};
use crate::record::feed::{FeedControl, FeedEvent, FooterItl, Note, Position, SourceState};
use crate::record::line::Header;
use crate::stats::{Metric, Summary, Window, WindowKind};

/// Requests per source kept for its row's medians.
pub const SOURCE_WINDOW: usize = 1000;

/// A followed source that has written nothing for this long is said to be quiet.
pub const QUIET_AFTER: Duration = Duration::from_secs(10);

/// One source, as its row shows it.
#[derive(Clone, Debug)]
pub struct SourceRow {
    pub name: String,
    pub state: SourceState,
    /// The model it measured (its header's, then its `run_started`'s).
    pub model: Option<String>,
    pub requests: u64,
    pub failed: u64,
    /// Its own clock: the time of its last event, and of its first request's start.
    pub t_s: f64,
    pub first_t_s: Option<f64>,
    /// How its run ended (its `Finished`).
    pub stop: Option<StopReason>,
    /// The loop's time when it last sent something, and whether it has been said to be quiet.
    pub last_seen: Option<Duration>,
    pub quiet: bool,
    ttft: Window,
    tpot: Window,
    /// Medians of its last `SOURCE_WINDOW` steady requests (computed in `refresh`).
    pub ttft_p50: Option<f64>,
    pub tpot_p50: Option<f64>,
    /// Whether it writes step lines: decided by its first finished request (a step before it).
    pub steps: Option<bool>,
    /// Its header, once it has come.
    pub header: Option<Box<Header>>,
    steps_before_first: bool,
    dirty: bool,
}

impl SourceRow {
    pub fn new(name: String) -> SourceRow {
        SourceRow {
            name,
            state: SourceState::Waiting,
            model: None,
            requests: 0,
            failed: 0,
            t_s: 0.0,
            first_t_s: None,
            stop: None,
            last_seen: None,
            quiet: false,
            ttft: Window::new(SOURCE_WINDOW),
            tpot: Window::new(SOURCE_WINDOW),
            ttft_p50: None,
            tpot_p50: None,
            steps: None,
            header: None,
            steps_before_first: false,
            dirty: false,
        }
    }

    /// Finished requests per second on its own clock.
    pub fn rate(&self) -> Option<f64> {
        let span = self.t_s - self.first_t_s?;
        (span > 0.0).then(|| self.requests as f64 / span)
    }

    /// Whether it will send nothing more.
    pub fn done(&self) -> bool {
        matches!(self.state, SourceState::Ended | SourceState::Died(_))
    }

    /// Counts an event of this source; `medians`: keep its own TTFT/TPOT for its row (only
    /// a merge shows rows; a replay of one record skips the work).
    fn observe(&mut self, t_s: f64, event: &Event, medians: bool) {
        match event {
            Event::DecodeSteps(_) => self.steps_before_first = true,
            Event::RequestDone(r) => {
                self.steps.get_or_insert(self.steps_before_first);
                self.requests += 1;
                self.first_t_s.get_or_insert(t_s - r.e2e_s);
                if medians && !r.warmup {
                    self.ttft.push(r.ttft_s);
                    if let Some(t) = r.tpot_s {
                        self.tpot.push(t);
                    }
                }
                self.dirty = true;
            }
            Event::RequestFailed(_) => self.failed += 1,
            Event::RunStarted(info) => self.model = Some(info.model.name.clone()),
            Event::Finished(reason) => {
                self.stop = Some(reason.clone());
                self.state = SourceState::Ended;
            }
            _ => {}
        }
    }
}

/// A record-fed dashboard: the run dashboard's state, the sources, and the replay's position.
pub struct FeedScreen {
    pub app: App,
    pub sources: Vec<SourceRow>,
    /// Where a replay is (none in a follow).
    pub position: Option<Position>,
    control: Option<Sender<FeedControl>>,
    /// The run's own ITL, from the footer of a record without step lines (single source).
    itl: FooterItl,
    /// Several sources: each one's request number → the merged one.
    ids: HashMap<(usize, u64), u64>,
    next_id: u64,
    run_started: bool,
    server_noted: bool,
    /// Whether a source's missing steps have been said.
    no_steps_noted: bool,
    finished: bool,
    /// The dashboard's time: the latest any source has reached on the union's axis.
    clock: f64,
    /// How the sources' times go on one axis, and whether they are the shards of one run
    /// (then their request numbers are the run's): settled at the first event of a run, when
    /// every source's header is in.
    pub alignment: Option<crate::record::merge::Alignment>,
    sharded: bool,
    /// The loop's clock (quiet sources are noticed by it).
    pub wall: Duration,
    pub quiet_after: Duration,
}

impl FeedScreen {
    /// `app` is the dashboard as configured; `producer` says whether it replays or follows;
    /// `names` are the sources' names, in order; `control` reaches a replay's producer.
    pub fn new(
        mut app: App,
        producer: Producer,
        names: Vec<String>,
        control: Option<Sender<FeedControl>>,
    ) -> FeedScreen {
        app.producer = producer;
        FeedScreen {
            app,
            sources: names.into_iter().map(SourceRow::new).collect(),
            position: None,
            control,
            itl: FooterItl::default(),
            ids: HashMap::new(),
            next_id: 0,
            run_started: false,
            server_noted: false,
            no_steps_noted: false,
            finished: false,
            clock: 0.0,
            alignment: None,
            sharded: false,
            wall: Duration::ZERO,
            quiet_after: QUIET_AFTER,
        }
    }

    /// Whether several sources are merged.
    pub fn merged(&self) -> bool {
        self.sources.len() > 1
    }

    /// Whether every source has ended (or died), and the dashboard's run with them.
    pub fn finished(&self) -> bool {
        self.finished || !self.app.worker_live()
    }

    /// The summary the dashboard's fold gives, as the run printed it: the record's footer ITL
    /// where the record has no steps (`record::reader::summary`, as `report` takes it); a
    /// merge without every source's steps has no ITL.
    pub fn summary(&self) -> crate::summary::RunSummary {
        let mut s = crate::record::reader::summary(&self.app.run, &self.itl);
        if self.itl_left_out() {
            s.steady.set(Metric::Itl, Summary::default());
            s.warmup.set(Metric::Itl, Summary::default());
        }
        s
    }

    /// Folds one message in. Pure: no I/O, no clock of its own.
    pub fn apply(&mut self, ev: &FeedEvent) -> bool {
        match ev {
            FeedEvent::Batch(evs) => {
                let mut draw_now = false;
                for e in evs {
                    draw_now |= self.apply(e);
                }
                return draw_now;
            }
            FeedEvent::Header { source, header } => {
                let merged = self.merged();
                if let Some(row) = self.sources.get_mut(*source) {
                    row.state = SourceState::Live;
                    row.model = Some(header.config.model.clone());
                    row.last_seen = Some(self.wall);
                    row.header = Some(header.clone());
                    if merged {
                        let text = format!(
                            "{}: {} on {}",
                            row.name, header.config.model, header.config.device
                        );
                        self.app.note(Level::Info, text);
                    }
                }
            }
            FeedEvent::Run { source, t_s, event } => self.run_event(*source, *t_s, event),
            FeedEvent::Sweep { source, config } => {
                if self.merged() {
                    // A sweep's cells are runs of their own: not one run's union.
                    let why = "a sweep's record: follow or replay a sweep on its own".to_string();
                    self.source_event(*source, Some(&SourceState::Died(why)), None);
                } else if self.app.sweep.is_none() {
                    self.app.sweep = Some(crate::sweep::fold::SweepFold::new(
                        config.as_ref().clone(),
                        self.app.slo,
                    ));
                }
            }
            FeedEvent::FooterItl { itl, .. } => {
                if !self.merged() {
                    self.itl = itl.clone();
                }
            }
            FeedEvent::Source {
                source,
                state,
                note,
            } => self.source_event(*source, state.as_ref(), note.as_ref()),
            FeedEvent::Position(p) => {
                self.position = Some(p.clone());
            }
        }
        false
    }

    fn name(&self, source: usize) -> String {
        self.sources
            .get(source)
            .map_or_else(|| format!("source {source}"), |r| r.name.clone())
    }

    fn source_event(&mut self, source: usize, state: Option<&SourceState>, note: Option<&Note>) {
        let merged = self.merged();
        let prefix = if merged {
            format!("{}: ", self.name(source))
        } else {
            String::new()
        };
        if let Some(n) = note {
            let level = if n.warn { Level::Warn } else { Level::Info };
            self.app.note(level, format!("{prefix}{}", n.text));
        }
        let Some(state) = state else { return };
        let Some(row) = self.sources.get_mut(source) else {
            return;
        };
        if row.done() {
            return;
        }
        row.state = state.clone();
        if let SourceState::Died(why) = state {
            let text = format!("{prefix}{why}");
            if merged {
                self.app
                    .note(Level::Error, format!("{text} (the others go on)"));
                self.check_all_done();
            } else if self.app.run.live() {
                self.app.apply(&Event::Error {
                    message: text,
                    fatal: true,
                });
                self.app.apply(&Event::Finished(StopReason::Error));
                self.finished = true;
            }
        }
    }

    /// Says once, at a source's first request, when it has no step lines: ITL then has no
    /// samples until the footer (one source: the run's own figure), or is left out of a merge
    /// (it cannot be merged without every source's steps, as `report` of the records says).
    fn note_steps(&mut self, source: usize, event: &Event) {
        if !matches!(event, Event::RequestDone(_)) || self.no_steps_noted {
            return;
        }
        let Some(row) = self.sources.get(source) else {
            return;
        };
        if row.steps != Some(false) || row.requests != 1 {
            return;
        }
        self.no_steps_noted = true;
        let text = if self.merged() {
            format!(
                "{} has no step lines (--jsonl-steps): ITL is left out of the merge, which needs \
                 every source's steps",
                row.name
            )
        } else if self.app.producer == Producer::Replay {
            "no step lines (--jsonl-steps) in this record: ITL is the run's own, from its footer"
                .to_string()
        } else {
            "no step lines (--jsonl-steps): ITL is the run's own, once its footer comes".to_string()
        };
        self.app.note(Level::Info, text);
    }

    /// A merge's ITL is left out when a source has no steps (its ITL cannot join the union).
    fn itl_left_out(&self) -> bool {
        self.merged() && self.sources.iter().any(|r| r.steps == Some(false))
    }

    /// The dashboard's clock moves to the latest time any source has reached.
    fn advance(&mut self, t_s: f64) {
        if t_s > self.clock {
            self.clock = t_s;
            self.app.tick(Duration::from_secs_f64(t_s));
        }
    }

    /// Puts the sources on one axis and tells whether they are the shards of one run, once
    /// (every header is in by the first event of a run); what the merge leaves out is said.
    fn settle_alignment(&mut self) {
        if self.alignment.is_some() || !self.merged() {
            return;
        }
        let names: Vec<String> = self.sources.iter().map(|r| r.name.clone()).collect();
        let headers: Vec<Option<&Header>> =
            self.sources.iter().map(|r| r.header.as_deref()).collect();
        let alignment = crate::record::merge::align(&names, &headers);
        let (sharded, notes) = crate::record::merge::shards(&names, &headers);
        for n in alignment.note.iter().chain(&notes) {
            self.app.note(Level::Warn, n.clone());
        }
        self.sharded = sharded;
        self.alignment = Some(alignment);
    }

    /// Seconds added to `source`'s times to put them on the union's axis.
    fn shift(&self, source: usize) -> f64 {
        self.alignment
            .as_ref()
            .and_then(|a| a.shifts.get(source).copied())
            .unwrap_or(0.0)
    }

    fn run_event(&mut self, source: usize, t_s: f64, event: &Event) {
        self.settle_alignment();
        let t_s = t_s + self.shift(source);
        let wall = self.wall;
        let merged = self.merged();
        let Some(row) = self.sources.get_mut(source) else {
            return;
        };
        // A source marked dead sends nothing more into the union (what is in flight from a
        // cut stream, or a sweep among runs).
        if matches!(row.state, SourceState::Died(_)) {
            return;
        }
        if row.quiet {
            row.quiet = false;
            let text = match row.last_seen {
                Some(at) => format!(
                    "{}: lines again after {:.0}s",
                    row.name,
                    wall.saturating_sub(at).as_secs_f64()
                ),
                None => format!("{}: lines again", row.name),
            };
            self.app.note(Level::Info, text);
        }
        let row = &mut self.sources[source];
        row.last_seen = Some(wall);
        row.t_s = t_s;
        if row.state == SourceState::Waiting {
            row.state = SourceState::Live;
        }
        row.observe(t_s, event, merged);
        self.note_steps(source, event);
        if !merged {
            self.advance(t_s);
            self.app.apply(event);
            return;
        }
        self.advance(t_s);
        if let Some(ev) = self.admit(source, event) {
            self.app.apply(&ev);
        }
        if matches!(event, Event::Finished(_)) {
            self.check_all_done();
        }
    }

    /// A merged source's event as the union's: its request numbers mapped to the union's,
    /// what only one run has (its model's start, its memory, its pauses) kept to its row and
    /// the events pane.
    fn admit(&mut self, source: usize, event: &Event) -> Option<Event> {
        let name = self.name(source);
        // The shards of one run number their requests as the run does: the numbers stay.
        let sharded = self.sharded;
        let mut id = |ids: &mut HashMap<(usize, u64), u64>, index: u64, end: bool| {
            if sharded {
                return index;
            }
            let id = match end {
                true => ids.remove(&(source, index)),
                false => ids.get(&(source, index)).copied(),
            };
            id.unwrap_or_else(|| {
                let id = self.next_id;
                self.next_id += 1;
                if !end {
                    ids.insert((source, index), id);
                }
                id
            })
        };
        let ids = &mut self.ids;
        match event {
            Event::RunStarted(_) if !self.run_started => {
                self.run_started = true;
                Some(event.clone())
            }
            Event::RequestStarted {
                index,
                warmup,
                prompt_tokens,
                output_tokens,
                batch,
            } => Some(Event::RequestStarted {
                index: id(ids, *index, false),
                warmup: *warmup,
                prompt_tokens: *prompt_tokens,
                output_tokens: *output_tokens,
                batch: *batch,
            }),
            Event::PrefillDone { index, ttft_s } => Some(Event::PrefillDone {
                index: id(ids, *index, false),
                ttft_s: *ttft_s,
            }),
            Event::DecodeSteps(steps) => Some(Event::DecodeSteps(
                steps
                    .iter()
                    .map(|s| {
                        let mut step = *s;
                        step.index = id(ids, s.index, false);
                        step
                    })
                    .collect(),
            )),
            Event::RequestDone(r) => {
                let mut r = r.clone();
                r.index = id(ids, r.index, true);
                Some(Event::RequestDone(r))
            }
            Event::RequestFailed(f) => {
                let mut f = f.clone();
                f.index = id(ids, f.index, true);
                Some(Event::RequestFailed(f))
            }
            // Each source's canaries are its own: merged, their indexes would collide.
            Event::Canary(_) => Some(event.clone()),
            Event::StepParts(p) => {
                let mut p = p.clone();
                p.index = id(ids, p.index, false);
                Some(Event::StepParts(p))
            }
            Event::RequestCancelled(c) => {
                let mut c = c.clone();
                c.index = id(ids, c.index, true);
                Some(Event::RequestCancelled(c))
            }
            Event::ServerMetrics(_) => {
                if !self.server_noted {
                    self.server_noted = true;
                    self.app.note(
                        Level::Info,
                        "the server's own metrics are not merged (each source scraped its own view)"
                            .into(),
                    );
                }
                None
            }
            Event::Paused => {
                self.app.note(Level::Info, format!("{name}: paused"));
                None
            }
            Event::Resumed => {
                self.app.note(Level::Info, format!("{name}: resumed"));
                None
            }
            Event::StatsReset => {
                self.app.note(
                    Level::Warn,
                    format!(
                        "{name} reset its statistics: the union keeps its earlier requests \
                         (report of the records counts each from its last reset)"
                    ),
                );
                None
            }
            Event::WorkloadChanged(w) => {
                self.app.note(
                    Level::Info,
                    format!(
                        "{name}: workload prompt {}, output {}, {}",
                        w.prompt_tokens,
                        w.output_tokens,
                        w.load_text()
                    ),
                );
                None
            }
            Event::Error { message, fatal } => {
                let level = if *fatal { Level::Error } else { Level::Warn };
                let what = if *fatal { "fatal: " } else { "" };
                self.app.note(level, format!("{name}: {what}{message}"));
                None
            }
            Event::Finished(reason) => {
                self.app
                    .note(Level::Info, format!("{name}: {}", reason.words()));
                None
            }
            // A run's own start after the first, its memory and loading, a sweep's cells (a
            // sweep is never merged): not the union's.
            Event::RunStarted(_)
            | Event::Telemetry(_)
            | Event::Loading { .. }
            | Event::CellStarted(_)
            | Event::Notice(_) => None,
        }
    }

    /// When every merged source has ended, so has the union.
    fn check_all_done(&mut self) {
        if self.finished || !self.sources.iter().all(SourceRow::done) {
            return;
        }
        self.finished = true;
        let ended: Vec<&StopReason> = self
            .sources
            .iter()
            .filter_map(|r| r.stop.as_ref())
            .collect();
        let reason = match ended.first() {
            Some(first) if ended.iter().all(|r| r == first) => (*first).clone(),
            Some(_) => StopReason::RequestLimit,
            None => {
                self.app.apply(&Event::Error {
                    message: "every source ended without a footer".into(),
                    fatal: true,
                });
                StopReason::Error
            }
        };
        self.app.apply(&Event::Finished(reason));
    }

    /// Sets the loop's clock; a followed source that has been silent for `quiet_after` is
    /// said to be quiet, once.
    pub fn tick(&mut self, now: Duration) {
        self.wall = now;
        if self.app.producer != Producer::Follow {
            return;
        }
        let quiet_after = self.quiet_after;
        let mut notes = Vec::new();
        for row in &mut self.sources {
            if row.done() || row.quiet {
                continue;
            }
            let Some(at) = row.last_seen else { continue };
            if now.saturating_sub(at) >= quiet_after {
                row.quiet = true;
                notes.push(format!(
                    "{}: no new line for {}s (the run is paused, between long requests, or \
                     stopped without a footer)",
                    row.name,
                    quiet_after.as_secs()
                ));
            }
        }
        for n in notes {
            self.app.note(Level::Warn, n);
        }
    }

    /// Recomputes the dashboard's caches (and the sources' medians) when something changed.
    pub fn refresh(&mut self) {
        self.app.refresh();
        if let Some(itl) = self.itl.steady {
            if self.app.window == WindowKind::Steady && !self.app.include_warmup {
                self.app.views.table.set(Metric::Itl, itl);
            }
        }
        if self.itl_left_out() {
            self.app.views.table.set(Metric::Itl, Summary::default());
            let at = crate::ui::views::DIST_METRICS
                .iter()
                .position(|m| *m == Metric::Itl);
            if let Some(d) = at.and_then(|i| self.app.views.dists.get_mut(i)) {
                *d = None;
            }
        }
        for row in &mut self.sources {
            if row.dirty {
                let p50 = |w: &Window| (!w.is_empty()).then(|| w.summary().p50);
                row.ttft_p50 = p50(&row.ttft);
                row.tpot_p50 = p50(&row.tpot);
                row.dirty = false;
            }
        }
    }

    /// A key: a replay's own go to its producer; the rest are the dashboard's (which refuses,
    /// with a line, what does not apply to a record).
    pub fn handle_key(&mut self, key: &KeyEvent) -> KeyOutcome {
        let Some(action) = self
            .app
            .face
            .keys
            .action_over_help(key, &mut self.app.face.show_help)
        else {
            return KeyOutcome::None;
        };
        let message = match (self.app.producer, action) {
            (Producer::Replay, Action::PauseResume) => Some(FeedControl::TogglePause),
            (Producer::Replay, Action::Step) => Some(FeedControl::Step),
            (Producer::Replay, Action::SpeedUp) => Some(FeedControl::Faster),
            (Producer::Replay, Action::SpeedDown) => Some(FeedControl::Slower),
            _ => None,
        };
        let Some(message) = message else {
            return self.app.update(action);
        };
        let at_end = self.position.as_ref().is_some_and(|p| p.done);
        let sent = self
            .control
            .as_ref()
            .is_some_and(|c| c.send(message).is_ok());
        if at_end || !sent {
            self.app.note(
                Level::Info,
                "the replay is at the record's end (q quits)".into(),
            );
        }
        KeyOutcome::None
    }
}

impl Screen for FeedScreen {
    type Event = FeedEvent;

    fn apply(&mut self, event: &FeedEvent) -> bool {
        FeedScreen::apply(self, event)
    }

    fn disconnected(&mut self) -> anyhow::Result<()> {
        // Every producer sends how it ended before it goes; gone is the end of the feed.
        Ok(())
    }

    fn tick(&mut self, now: Duration) {
        FeedScreen::tick(self, now);
    }

    fn refresh(&mut self) {
        FeedScreen::refresh(self);
    }

    fn key(&mut self, key: &KeyEvent) -> KeyOutcome {
        self.handle_key(key)
    }

    fn draw(&self, frame: &mut Frame) {
        super::render::render(frame, &self.app);
        render::render(frame, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RequestDone;

    fn done(index: u64, ttft_s: f64) -> Event {
        Event::RequestDone(Box::new(RequestDone {
            index,
            warmup: false,
            batch: 1,
            prompt_tokens: 8,
            output_tokens: 4,
            ttft_s,
            tpot_s: Some(0.001),
            e2e_s: ttft_s + 0.003,
            ..Default::default()
        }))
    }

    fn run(source: usize, t_s: f64, event: Event) -> FeedEvent {
        FeedEvent::Run { source, t_s, event }
    }

    fn started(index: u64) -> Event {
        Event::RequestStarted {
            index,
            warmup: false,
            prompt_tokens: 8,
            output_tokens: 4,
            batch: 1,
        }
    }

    fn step(index: u64, itl_s: f64) -> Event {
        Event::decode_step(index, 1, itl_s, None)
    }

    fn merged(n: usize) -> FeedScreen {
        let names = (0..n).map(|i| format!("gpu{i}")).collect();
        FeedScreen::new(App::default(), Producer::Follow, names, None)
    }

    /// Both sources number their requests from 0; their steps must stay with their own
    /// request, and the union has every request once.
    #[test]
    fn merged_sources_keep_their_requests_apart() {
        let mut s = merged(2);
        for (src, itl) in [(0, 0.001), (1, 0.5)] {
            s.apply(&run(src, 1.0, started(0)));
            s.apply(&run(src, 1.1, step(0, itl)));
        }
        s.apply(&run(1, 1.2, done(0, 0.2)));
        s.apply(&run(0, 1.3, done(0, 0.1)));
        s.refresh();
        let itl = s
            .app
            .run
            .stats
            .summary(Metric::Itl, WindowKind::Steady, false);
        assert_eq!((itl.n, itl.max), (2, 0.5));
        assert_eq!(s.app.views.table.get(Metric::Ttft).n, 2);
        assert_eq!(s.app.run.requests_done, 2);
        assert_eq!((s.sources[0].requests, s.sources[1].requests), (1, 1));
        assert_eq!(s.app.run.in_flight(), 0);
    }

    #[test]
    fn the_union_ends_when_every_source_has_and_a_dying_one_is_marked() {
        let mut s = merged(2);
        s.apply(&run(0, 1.0, done(0, 0.1)));
        s.apply(&FeedEvent::Source {
            source: 1,
            state: Some(SourceState::Died(
                "the stream ended without a footer".into(),
            )),
            note: None,
        });
        assert!(s.app.run.live(), "one source died; the other goes on");
        s.apply(&run(0, 2.0, done(1, 0.1)));
        s.apply(&run(0, 2.0, Event::Finished(StopReason::RequestLimit)));
        assert!(!s.app.run.live());
        assert_eq!(s.app.run.stop, Some(StopReason::RequestLimit));
        assert!(s.app.run.failed.is_none());
        let texts: Vec<&str> = s.app.events.iter().map(|e| e.text.as_str()).collect();
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with("gpu1: the stream ended")),
            "{texts:?}"
        );
    }

    fn shard_header(k: u32, n: u32, started_unix_s: f64) -> FeedEvent {
        use crate::record::line::{RunClock, RunConfig};
        FeedEvent::Header {
            source: k as usize,
            header: Box::new(Header {
                config: RunConfig {
                    shard: Some(crate::traffic::Shard { index: k, count: n }),
                    ..RunConfig::default()
                },
                clock: Some(RunClock {
                    started_unix_s,
                    offset_s: Some(-3.0),
                    uncertainty_s: Some(0.0005),
                    reference: Some("http://server/v1/models".into()),
                }),
                ..Header::default()
            }),
        }
    }

    /// The shards of one run keep the run's request numbers, and their times go on the
    /// reference clock: a shard whose record started 2 s later is 2 s later on the axis.
    #[test]
    fn shards_keep_the_runs_numbers_on_the_reference_clock() {
        let mut s = merged(2);
        s.apply(&shard_header(0, 2, 1000.0));
        s.apply(&shard_header(1, 2, 1002.0));
        s.apply(&run(0, 1.0, started(0)));
        s.apply(&run(1, 1.0, started(1)));
        s.apply(&run(1, 1.1, step(1, 0.004)));
        s.apply(&run(0, 1.2, step(0, 0.003)));
        s.apply(&run(1, 1.5, done(1, 0.2)));
        s.apply(&run(0, 1.6, done(0, 0.1)));
        assert_eq!(s.app.now, Duration::from_secs_f64(3.5));
        let a = s.alignment.clone().unwrap();
        assert!(a.clocked && a.shifts == vec![0.0, 2.0], "{a:?}");
        assert_eq!(s.app.run.requests_done, 2);
        assert_eq!(s.app.run.in_flight(), 0);
        // The run's own numbers, not a sequence of the merge's.
        assert!(s.ids.is_empty() && s.next_id == 0);
        s.refresh();
        assert_eq!(s.app.views.table.get(Metric::Itl).n, 2);
    }

    /// The clock is each source's own, aligned at their starts: the latest any has reached.
    #[test]
    fn the_clock_is_the_latest_any_source_has_reached() {
        let mut s = merged(2);
        s.apply(&run(0, 5.0, done(0, 0.1)));
        s.apply(&run(1, 3.0, done(0, 0.1)));
        assert_eq!(s.app.now, Duration::from_secs(5));
        s.apply(&run(1, 7.5, done(1, 0.1)));
        assert_eq!(s.app.now, Duration::from_secs_f64(7.5));
    }

    #[test]
    fn a_quiet_source_is_said_once_and_again_when_lines_come() {
        let mut s = merged(1);
        s.tick(Duration::from_secs(1));
        s.apply(&run(0, 0.5, done(0, 0.1)));
        s.tick(Duration::from_secs(5));
        s.tick(Duration::from_secs(12));
        s.tick(Duration::from_secs(20));
        let quiet = |s: &FeedScreen| {
            s.app
                .events
                .iter()
                .filter(|e| e.text.contains("no new line"))
                .count()
        };
        assert_eq!(quiet(&s), 1);
        s.apply(&run(0, 30.0, done(1, 0.1)));
        assert!(s.app.events.iter().any(|e| e.text.contains("lines again")));
    }

    /// A source without step lines: ITL cannot join the union, so the merge leaves it out
    /// (as `report` of the records does) rather than show part of it.
    #[test]
    fn a_merge_leaves_itl_out_when_a_source_has_no_steps() {
        let mut s = merged(2);
        s.apply(&run(0, 1.0, started(0)));
        s.apply(&run(0, 1.1, step(0, 0.004)));
        s.apply(&run(0, 1.2, done(0, 0.1)));
        s.refresh();
        assert_eq!(s.app.views.table.get(Metric::Itl).n, 1);
        s.apply(&run(1, 1.0, started(0)));
        s.apply(&run(1, 1.3, done(0, 0.1)));
        s.refresh();
        assert_eq!(s.app.views.table.get(Metric::Itl).n, 0);
        assert_eq!(s.summary().steady.get(Metric::Itl).n, 0);
        assert_eq!(s.app.views.table.get(Metric::Ttft).n, 2);
        assert!(s
            .app
            .events
            .iter()
            .any(|e| e.text.starts_with("gpu1 has no step lines")));
    }

    #[test]
    fn load_keys_and_pause_are_refused_in_a_follow_with_a_line() {
        let mut s = merged(1);
        s.apply(&run(
            0,
            0.0,
            Event::RunStarted(Box::new(crate::event::RunInfo {
                model: crate::event::ModelInfo::served("m", "http://x"),
                workload: crate::event::WorkloadDesc {
                    prompt_tokens: "8".into(),
                    output_tokens: "4".into(),
                    batch: 1,
                    load: None,
                },
                warmup_requests: 0,
                threads: 0,
                traffic: None,
                peak: None,
            })),
        ));
        assert!(!s.app.takes_load_keys());
        for a in [Action::OutputMore, Action::PauseResume, Action::ResetStats] {
            assert_eq!(s.app.update(a), KeyOutcome::None);
        }
        let warns = s
            .app
            .events
            .iter()
            .filter(|e| e.level == Level::Warn && e.text.starts_with("following"))
            .count();
        assert_eq!(warns, 3);
        assert_eq!(s.app.update(Action::Quit), KeyOutcome::Quit);
    }
}
