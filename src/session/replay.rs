//! `infertop replay RECORD`: the dashboard drawn from a record. A player thread reads the file
//! line by line (never all of it: a million-request record streams through), turns lines into
//! the run's events (`record::feed::Feeder`), paces them by the record's own clock at
//! `--speed` (or as fast as the screen takes them), and sends them on the one channel; the one
//! screen loop folds them into the run dashboard's state (`ui::feed::FeedScreen`). Pause, step
//! and speed go back to the player; at the end the final screen stays until q, and the summary
//! is printed as the run printed it. A watch's record plays on the watch screen.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::print_stdout;
use crate::event::Event;
use crate::exit::{Failure, EXIT_OK};
use crate::plan::opts::ReplayOpts;
use crate::plan::replay::{record_screen, Play, ReplayPlan};
use crate::record::feed::{
    Fed, FeedControl, FeedEvent, Feeder, Pace, Position, SourceState, Speed,
};
use crate::record::line::Line;
use crate::record::reader::{self, LineReader};
use crate::signals::Signals;
use crate::ui::feed::FeedScreen;
use crate::ui::state::Producer;
use crate::ui::App;
use crate::util::say;

/// How often the position bar hears where the player is.
const POSITION_EVERY: Duration = Duration::from_millis(100);

/// The longest wait between two looks at the controls.
const CONTROL_POLL: Duration = Duration::from_millis(50);

/// `infertop replay`.
pub fn replay(opts: &ReplayOpts) -> Result<i32, Failure> {
    let plan = crate::plan::replay::plan(opts)?;
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let (speed, paused, headless) = match plan.play {
        Play::Lines { speed } => return stream_lines(&plan.path, speed, &signals),
        Play::Watch { speed, fps } => return replay_watch(&plan, speed, fps, &signals),
        Play::Dashboard {
            speed,
            paused,
            headless,
        } => (speed, paused, headless),
    };
    let path = &plan.path;
    let (tx, rx) = crossbeam_channel::bounded::<FeedEvent>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<FeedControl>();
    let handle = spawn_player(path, speed, paused, tx, ctl_rx)?;
    let app = App::new(record_screen(&plan.look, &plan.header));
    let mut screen = FeedScreen::new(
        app,
        Producer::Replay,
        vec![crate::util::file_name(path)],
        Some(ctl_tx.clone()),
    );
    let shown = if headless {
        fold_headless(&mut screen, &rx, &signals);
        Ok(())
    } else {
        show(&mut screen, &rx, plan.look.fps, &signals)
    };
    let _ = ctl_tx.send(FeedControl::Stop);
    drop(rx);
    let _ = handle.join();
    shown?;
    if screen.app.sweep.is_some() {
        let cells = screen.app.sweep.as_ref().map_or(0, |s| s.results.len());
        say!(
            "infertop: replayed {cells} cells of {}; infertop report {} prints the sweep's table",
            path.display(),
            path.display()
        );
    } else {
        print_stdout(&screen.summary().render(plan.format))?;
    }
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// Starts the player on its thread: `path` read line by line, its events sent on `tx` at
/// `speed` (paused at the first request with `paused`), obeying `control`. It ends when the
/// record has been played (the channel then closes), on `FeedControl::Stop`, or when the
/// receiver has gone.
pub fn spawn_player(
    path: &Path,
    speed: Speed,
    paused: bool,
    tx: Sender<FeedEvent>,
    control: Receiver<FeedControl>,
) -> Result<std::thread::JoinHandle<()>, Failure> {
    let player = Player::open(path, speed, paused, tx, control)?;
    std::thread::Builder::new()
        .name("infertop-replay".into())
        .spawn(move || player.play())
        .map_err(|e| Failure::runtime(format!("cannot start the replay thread: {e}")))
}

/// Draws a record-fed `screen` in the terminal until q or a signal.
pub(crate) fn show(
    screen: &mut FeedScreen,
    rx: &Receiver<FeedEvent>,
    fps: u32,
    signals: &Signals,
) -> Result<(), Failure> {
    let opts = crate::ui::LoopOptions {
        fps,
        signals: signals.clone(),
        started: Instant::now(),
        deadline: None,
    };
    crate::ui::show("screen", screen, rx, &opts)
        .map(|_| ())
        .map_err(|f| Failure::runtime(f.to_string()))
}

/// Folds everything the producers send (no screen) until they are done, every source has
/// ended, or a signal.
pub(crate) fn fold_headless(screen: &mut FeedScreen, rx: &Receiver<FeedEvent>, signals: &Signals) {
    let started = Instant::now();
    loop {
        if signals.stop_reason().is_some() {
            break;
        }
        match rx.recv_timeout(CONTROL_POLL) {
            Ok(ev) => {
                screen.apply(&ev);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        screen.tick(started.elapsed());
        if screen.finished() && rx.is_empty() {
            break;
        }
    }
    screen.refresh();
}

/// The player: a record file read line by line, paced, its events sent to the screen.
struct Player {
    name: String,
    lines: LineReader<BufReader<File>>,
    feeder: Feeder,
    tx: Sender<FeedEvent>,
    control: Receiver<FeedControl>,
    pace: Pace,
    paused: bool,
    /// Pause when the first request starts (`--paused`).
    pause_at_first: bool,
    /// Playing one request (`n`), then pausing.
    stepping: bool,
    t_s: f64,
    total_bytes: u64,
    end_s: Option<f64>,
    last_position: Option<Instant>,
    done: bool,
    /// Events not yet sent: at full speed they go in batches of `BATCH`.
    pending: Vec<FeedEvent>,
}

/// Events a full-speed replay sends at once.
const BATCH: usize = 256;

/// Why the player stopped early: the screen asked, or went away.
struct Stopped;

impl Player {
    fn open(
        path: &Path,
        speed: Speed,
        paused: bool,
        tx: Sender<FeedEvent>,
        control: Receiver<FeedControl>,
    ) -> Result<Player, Failure> {
        let lines = LineReader::open(path).map_err(Failure::usage)?;
        let total_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        Ok(Player {
            name: path.display().to_string(),
            lines,
            feeder: Feeder::new(),
            tx,
            control,
            pace: Pace::new(speed),
            paused: false,
            pause_at_first: paused,
            stepping: false,
            t_s: 0.0,
            total_bytes,
            end_s: reader::end_time(path),
            last_position: None,
            done: false,
            pending: Vec::new(),
        })
    }

    fn play(mut self) {
        let _ = self.play_lines();
    }

    fn play_lines(&mut self) -> Result<(), Stopped> {
        let mut out = Vec::new();
        loop {
            // A last line cut off by a crash is played if it parses, as report reads it.
            let line = match self.lines.next_or_last() {
                Ok(Some(l)) => reader::parse(l),
                Ok(None) => break,
                Err(e) => {
                    let why = format!("cannot read {} ({e})", self.name);
                    self.send(FeedEvent::Source {
                        source: 0,
                        state: Some(SourceState::Died(why)),
                        note: None,
                    })?;
                    return Ok(());
                }
            };
            self.line(line, &mut out)?;
        }
        let name = self.name.clone();
        self.feeder.finish(&name, &mut out);
        for fed in out.drain(..) {
            self.fed(fed)?;
        }
        self.done = true;
        self.position()?;
        self.flush()
    }

    /// One line of the record: its header to the screen first, then its events.
    fn line(&mut self, line: Option<Line>, out: &mut Vec<Fed>) -> Result<(), Stopped> {
        if let Some(Line::Header(h)) = &line {
            if self.feeder.header().is_none() {
                self.send(FeedEvent::Header {
                    source: 0,
                    header: h.clone(),
                })?;
            }
        }
        self.feeder.push(line, out);
        for fed in out.drain(..) {
            self.fed(fed)?;
        }
        Ok(())
    }

    /// Sends an event: at once when the replay is paced (or paused, or stepping), else with
    /// the next batch.
    fn send(&mut self, ev: FeedEvent) -> Result<(), Stopped> {
        let batching =
            self.pace.speed() == Speed::Max && !self.paused && !self.stepping && !self.done;
        if !batching {
            self.flush()?;
            return self.tx.send(ev).map_err(|_| Stopped);
        }
        self.pending.push(ev);
        if self.pending.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends what is pending.
    fn flush(&mut self) -> Result<(), Stopped> {
        match self.pending.len() {
            0 => Ok(()),
            1 => {
                let ev = self.pending.pop().ok_or(Stopped)?;
                self.tx.send(ev).map_err(|_| Stopped)
            }
            _ => {
                let batch = std::mem::take(&mut self.pending);
                self.tx.send(FeedEvent::Batch(batch)).map_err(|_| Stopped)
            }
        }
    }

    fn position(&mut self) -> Result<(), Stopped> {
        self.last_position = Some(Instant::now());
        self.send(FeedEvent::Position(Position {
            read_bytes: self.lines.read_bytes(),
            total_bytes: self.total_bytes,
            t_s: self.t_s,
            end_s: self.end_s,
            speed: self.pace.speed(),
            paused: self.paused,
            untimed: self.feeder.untimed(),
            done: self.done,
        }))
    }

    fn fed(&mut self, fed: Fed) -> Result<(), Stopped> {
        match fed {
            Fed::Event { t_s, event } => self.event(t_s, event),
            Fed::Sweep(config) => self.send(FeedEvent::Sweep { source: 0, config }),
            Fed::FooterItl(itl) => self.send(FeedEvent::FooterItl { source: 0, itl }),
            Fed::Note(note) => self.send(FeedEvent::Source {
                source: 0,
                state: None,
                note: Some(note),
            }),
        }
    }

    /// Sends one event when the record's clock says, at the speed asked.
    fn event(&mut self, t_s: f64, event: Event) -> Result<(), Stopped> {
        if self.pause_at_first && matches!(event, Event::RequestStarted { .. }) {
            self.pause_at_first = false;
            self.paused = true;
            self.position()?;
        }
        self.wait_until(t_s)?;
        self.t_s = t_s;
        let ends_request = matches!(event, Event::RequestDone(_) | Event::RequestFailed(_));
        self.send(FeedEvent::Run {
            source: 0,
            t_s,
            event,
        })?;
        if self.stepping && ends_request {
            self.stepping = false;
            self.pace.forget();
            self.position()?;
        } else if self
            .last_position
            .is_none_or(|at| at.elapsed() >= POSITION_EVERY)
        {
            self.position()?;
        }
        Ok(())
    }

    fn wait_until(&mut self, t_s: f64) -> Result<(), Stopped> {
        loop {
            loop {
                match self.control.try_recv() {
                    Ok(c) => self.obey(c)?,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Err(Stopped),
                }
            }
            if self.paused && !self.stepping {
                self.flush()?;
                match self.control.recv_timeout(CONTROL_POLL) {
                    Ok(c) => self.obey(c)?,
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return Err(Stopped),
                }
                continue;
            }
            if self.stepping {
                return Ok(());
            }
            let Some(due) = self.pace.due(t_s) else {
                return Ok(());
            };
            let now = Instant::now();
            if now >= due {
                return Ok(());
            }
            self.flush()?;
            match self.control.recv_timeout((due - now).min(CONTROL_POLL)) {
                Ok(c) => self.obey(c)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(Stopped),
            }
            if self
                .last_position
                .is_none_or(|at| at.elapsed() >= POSITION_EVERY)
            {
                self.position()?;
            }
        }
    }

    fn obey(&mut self, c: FeedControl) -> Result<(), Stopped> {
        match c {
            FeedControl::Stop => return Err(Stopped),
            FeedControl::TogglePause => {
                self.paused = !self.paused;
                self.stepping = false;
            }
            FeedControl::Step => {
                self.paused = true;
                self.stepping = true;
            }
            FeedControl::Faster => self.pace.set_speed(self.pace.speed().faster(), self.t_s),
            FeedControl::Slower => self.pace.set_speed(self.pace.speed().slower(), self.t_s),
        }
        // The pace counts again from here: what was played stays played.
        self.pace.restart(self.t_s);
        self.position()
    }
}

/// `--jsonl`: the record's lines on stdout, each when the record's clock says at `speed`, as
/// a live run streams them with `--jsonl` (so `follow -` can be tried on a finished run).
fn stream_lines(path: &Path, speed: Speed, signals: &Signals) -> Result<i32, Failure> {
    let mut lines = LineReader::open(path).map_err(Failure::usage)?;
    let mut out = std::io::stdout().lock();
    let mut pace = Pace::new(speed);
    let mut clock = 0.0f64;
    loop {
        if signals.stop_reason().is_some() {
            break;
        }
        let Some(line) = lines
            .next_or_last()
            .map_err(|e| Failure::runtime(crate::util::io_error(path, &e)))?
            .map(<[u8]>::to_vec)
        else {
            break;
        };
        if speed != Speed::Max {
            if let Some(t) = reader::parse(&line).as_ref().and_then(reader::line_time) {
                clock = clock.max(t);
                if let Some(due) = pace.due(clock) {
                    while Instant::now() < due && signals.stop_reason().is_none() {
                        std::thread::sleep((due - Instant::now()).min(CONTROL_POLL));
                    }
                }
            }
        }
        let written = out
            .write_all(&line)
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if written.is_err() {
            // The reader went away: it has what it wanted.
            break;
        }
    }
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// A watch's record on the watch screen: its windows at their times (`--speed`), the
/// screen's own keys (pause holds windows, r starts its span again).
fn replay_watch(
    plan: &ReplayPlan,
    speed: Speed,
    fps: Option<u32>,
    signals: &Signals,
) -> Result<i32, Failure> {
    use crate::ui::theme::Glyphs;
    use crate::ui::watch::{WatchConfig, WatchEvent, WatchLoop};

    let (path, header, look) = (&plan.path, &plan.header, &plan.look);
    let events = watch_events(path)?;
    let windows: Vec<(f64, &crate::event::ServerWindow)> = events
        .iter()
        .filter_map(|(t, e)| match e {
            WatchEvent::Window { window, .. } => Some((*t, window.as_ref())),
            _ => None,
        })
        .collect();
    if windows.is_empty() {
        return Err(Failure::usage(format!(
            "{}: a watch's record without a window (server_metrics line) to show",
            path.display()
        )));
    }
    let server = windows
        .first()
        .map(|(_, w)| w.server.clone())
        .unwrap_or_default();
    let mut seconds: Vec<f64> = windows.iter().map(|(_, w)| w.seconds).collect();
    let count = windows.len();
    let interval = crate::stats::median_in_place(&mut seconds)
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(1.0);
    let url = match header.config.endpoints.as_slice() {
        [] => format!("record {}", crate::util::file_name(path)),
        [one] => format!("{one} (record {})", crate::util::file_name(path)),
        [first, ..] => format!(
            "{} servers ({first}, ...; record {})",
            header.config.endpoints.len(),
            crate::util::file_name(path)
        ),
    };
    let config = WatchConfig {
        url,
        server,
        interval: Duration::from_secs_f64(interval.min(3600.0)),
        themes: look.themes.clone(),
        glyphs: Glyphs::new(look.ascii),
        keys: look.keys.clone(),
        nodes: Vec::new(),
    };
    let started = Instant::now();
    let loop_opts = WatchLoop {
        signals: signals.clone(),
        started,
        deadline: None,
        fps: fps.unwrap_or(4),
    };
    let (tx, rx) = crossbeam_channel::unbounded::<WatchEvent>();
    // The thread ends when the screen has gone (its send fails) or the windows are played.
    std::thread::Builder::new()
        .name("infertop-replay-watch".into())
        .spawn(move || {
            let mut pace = Pace::new(speed);
            for (t_s, ev) in events {
                if let Some(due) = pace.due(t_s) {
                    while Instant::now() < due {
                        std::thread::sleep((due - Instant::now()).min(CONTROL_POLL));
                    }
                }
                if tx.send(ev).is_err() {
                    return;
                }
            }
            // Kept open so that the screen holds the last window (a closed channel ends it).
            std::thread::park();
        })
        .map_err(|e| Failure::runtime(format!("cannot start the replay thread: {e}")))?;
    match crate::ui::watch::run(rx, config, &loop_opts) {
        Ok(_) => {
            say!("infertop: replayed {} ({count} windows)", path.display());
            Ok(signals.exit_code().unwrap_or(EXIT_OK))
        }
        Err(f) => Err(Failure::runtime(format!("replay: {f}"))),
    }
}

/// A watch's record as the watch screen's events, in order: every window (each node's, with
/// its `source`, and the total), each node's GPU and host figures, and the scrapes that failed.
fn watch_events(path: &Path) -> Result<Vec<(f64, crate::ui::watch::WatchEvent)>, Failure> {
    use crate::ui::watch::WatchEvent;
    let lines = crate::record::reader::parse_lines(path).map_err(Failure::usage)?;
    Ok(lines
        .into_iter()
        .flatten()
        .filter_map(|line| match line {
            Line::ServerMetrics(m) => Some((
                m.t_s,
                WatchEvent::Window {
                    t_s: m.t_s,
                    window: Box::new(m.window),
                },
            )),
            Line::NodeMetrics(n) => Some((
                n.t_s,
                WatchEvent::Telemetry {
                    t_s: n.t_s,
                    node: n.source,
                    telemetry: Box::new(n.telemetry),
                },
            )),
            Line::ScrapeFailed(f) => Some((
                f.t_s,
                match (f.source, f.exporter) {
                    (None, None) => WatchEvent::ScrapeFailed {
                        t_s: f.t_s,
                        message: f.message,
                    },
                    (node, exporter) => WatchEvent::NodeFailed {
                        t_s: f.t_s,
                        node: node.unwrap_or_default(),
                        exporter,
                        message: f.message,
                    },
                },
            )),
            _ => None,
        })
        .collect())
}
