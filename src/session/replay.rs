//! `infertop replay RECORD`: the dashboard drawn from a record. A player thread reads the file
//! line by line (never all of it: a million-request record streams through), turns lines into
//! the run's events (`record::feed::Feeder`), paces them by the record's own clock at
//! `--speed` (or as fast as the screen takes them), and sends them on the one channel; the one
//! screen loop folds them into the run dashboard's state (`ui::feed::FeedScreen`). Pause, step
//! and speed go back to the player; at the end the final screen stays until q, and the summary
//! is printed as the run printed it. A watch's record plays on the watch screen.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::print_stdout;
use crate::event::Event;
use crate::exit::{Failure, EXIT_OK};
use crate::plan::opts::ReplayOpts;
use crate::record::feed::{
    end_time, Fed, FeedControl, FeedEvent, Feeder, Position, SourceState, Speed,
};
use crate::record::line::{Header, Line};
use crate::signals::Signals;
use crate::ui::feed::FeedScreen;
use crate::ui::state::Producer;
use crate::ui::{App, AppConfig, Look};
use crate::util::say;

/// How often the position bar hears where the player is.
const POSITION_EVERY: Duration = Duration::from_millis(100);

/// The longest wait between two looks at the controls.
const CONTROL_POLL: Duration = Duration::from_millis(50);

/// `infertop replay`.
pub fn replay(opts: &ReplayOpts) -> Result<i32, Failure> {
    let path = &opts.record;
    let header = read_header(path)?;
    let look = crate::plan::look(&opts.display)?;
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let headless = crate::plan::headless(opts.headless || opts.jsonl);
    if opts.jsonl {
        return stream_lines(path, opts.speed, &signals);
    }
    if header.config.engine.as_deref() == Some("watch") {
        if headless {
            return Err(Failure::usage(format!(
                "{}: a watch's record plays on the watch screen, in a terminal; its lines are \
                 its JSON (or replay it with --jsonl)",
                path.display()
            )));
        }
        return replay_watch(path, &header, opts, look, &signals);
    }
    let speed = if headless { Speed::Max } else { opts.speed };
    let (tx, rx) = crossbeam_channel::bounded::<FeedEvent>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<FeedControl>();
    let handle = spawn_player(path, speed, opts.paused && !headless, tx, ctl_rx)?;
    let app = App::new(app_config(&look, &header));
    let mut screen = FeedScreen::new(
        app,
        Producer::Replay,
        vec![display_name(path)],
        Some(ctl_tx.clone()),
    );
    let shown = if headless {
        fold_headless(&mut screen, &rx, &signals);
        Ok(())
    } else {
        show(&mut screen, &rx, look.fps, &signals)
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
        print_stdout(&screen.summary().render(opts.format))?;
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

/// The dashboard's settings for a record: the user's look, the record's SLO.
pub(crate) fn app_config(look: &Look, header: &Header) -> AppConfig {
    AppConfig {
        keys: look.keys.clone(),
        themes: look.themes.clone(),
        ascii: look.ascii,
        slo: header.config.slo,
        output_step: 16,
        baseline: None,
    }
}

/// A file's name as a source row shows it.
pub(crate) fn display_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The record's first line, which must be its header (of a format this version reads): one
/// line and exit 2 otherwise, before anything is drawn.
pub(crate) fn read_header(path: &Path) -> Result<Header, Failure> {
    if path.is_dir() {
        return Err(Failure::usage(format!(
            "{}: is a directory; pass a record file written with --record FILE",
            path.display()
        )));
    }
    let file = File::open(path).map_err(|e| Failure::usage(crate::util::io_error(path, &e)))?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Failure::usage(crate::util::io_error(path, &e)))?;
        if n == 0 {
            return Err(Failure::usage(format!(
                "{}: not an infertop record (the file is empty); make one with --record FILE",
                path.display()
            )));
        }
        if !buf.trim_ascii().is_empty() {
            break;
        }
    }
    header_of(&path.display().to_string(), &buf).map_err(Failure::usage)
}

/// Line 1 of a record as its header, or the one line that says why it is not one.
pub(crate) fn header_of(name: &str, line: &[u8]) -> Result<Header, String> {
    header_reason(line).map_err(|why| format!("{name}: {why}"))
}

/// As `header_of`, the reason without a name (a followed source's row names it).
pub(crate) fn header_reason(line: &[u8]) -> Result<Header, String> {
    match serde_json::from_slice::<Line>(line.trim_ascii()) {
        Ok(Line::Header(h)) => match crate::record::reader::format_problem(&h) {
            Some(why) => Err(why),
            None => Ok(*h),
        },
        _ => Err(
            "not an infertop record (line 1 is not a record header); make one with \
             --record FILE, or stream one with --jsonl"
                .into(),
        ),
    }
}

/// Draws `screen` in the terminal until q or a signal.
pub(crate) fn show(
    screen: &mut FeedScreen,
    rx: &Receiver<FeedEvent>,
    fps: u32,
    signals: &Signals,
) -> Result<(), Failure> {
    let mut terminal = crate::ui::enter_terminal().map_err(|e| Failure::runtime(e.to_string()))?;
    crate::util::quiet_engine_panics();
    let opts = crate::ui::LoopOptions {
        fps,
        signals: signals.clone(),
        started: Instant::now(),
        deadline: None,
    };
    // A panic in the screen has restored the terminal (ratatui's hook) and printed itself.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::ui::run_screen(
            &mut terminal,
            &mut crate::ui::TerminalInput,
            rx,
            None,
            screen,
            &opts,
            &mut |_, _| {},
        )
    }));
    crate::ui::leave_terminal(terminal);
    match result {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Failure::runtime(format!(
            "the screen failed ({})",
            crate::util::one_line(&e.to_string())
        ))),
        Err(_) => Err(Failure::runtime("the screen panicked (see above)")),
    }
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
    reader: BufReader<File>,
    feeder: Feeder,
    tx: Sender<FeedEvent>,
    control: Receiver<FeedControl>,
    speed: Speed,
    paused: bool,
    /// Pause when the first request starts (`--paused`).
    pause_at_first: bool,
    /// Playing one request (`n`), then pausing.
    stepping: bool,
    /// Wall time and record time the pace counts from.
    anchor: Option<(Instant, f64)>,
    t_s: f64,
    read_bytes: u64,
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
        let file = File::open(path).map_err(|e| Failure::usage(crate::util::io_error(path, &e)))?;
        let total_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Player {
            name: path.display().to_string(),
            reader: BufReader::with_capacity(1 << 16, file),
            feeder: Feeder::new(),
            tx,
            control,
            speed,
            paused: false,
            pause_at_first: paused,
            stepping: false,
            anchor: None,
            t_s: 0.0,
            read_bytes: 0,
            total_bytes,
            end_s: end_time(path),
            last_position: None,
            done: false,
            pending: Vec::new(),
        })
    }

    fn play(mut self) {
        let _ = self.play_lines();
    }

    fn play_lines(&mut self) -> Result<(), Stopped> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            buf.clear();
            let n = match self.reader.read_until(b'\n', &mut buf) {
                Ok(n) => n,
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
            if n == 0 {
                break;
            }
            self.read_bytes += n as u64;
            let text = buf.trim_ascii();
            if text.is_empty() {
                continue;
            }
            let line = serde_json::from_slice::<Line>(text).ok();
            if let Some(Line::Header(h)) = &line {
                if self.feeder.header().is_none() {
                    self.send(FeedEvent::Header {
                        source: 0,
                        header: h.clone(),
                    })?;
                }
            }
            self.feeder.push(line, &mut out);
            for fed in out.drain(..) {
                self.fed(fed)?;
            }
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

    /// Sends an event: at once when the replay is paced (or paused, or stepping), else with
    /// the next batch.
    fn send(&mut self, ev: FeedEvent) -> Result<(), Stopped> {
        let batching = self.speed == Speed::Max && !self.paused && !self.stepping && !self.done;
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
            read_bytes: self.read_bytes,
            total_bytes: self.total_bytes,
            t_s: self.t_s,
            end_s: self.end_s,
            speed: self.speed,
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
            self.anchor = None;
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
            let Speed::Times(speed) = self.speed else {
                return Ok(());
            };
            if self.stepping {
                return Ok(());
            }
            let (wall, from) = *self.anchor.get_or_insert((Instant::now(), t_s));
            let ahead = ((t_s - from) / speed).clamp(0.0, 1e9);
            let due = wall + Duration::from_secs_f64(ahead);
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
            FeedControl::Faster => self.speed = self.speed.faster(),
            FeedControl::Slower => self.speed = self.speed.slower(),
        }
        // The pace counts again from here: what was played stays played.
        self.anchor = Some((Instant::now(), self.t_s));
        self.position()
    }
}

/// `--jsonl`: the record's lines on stdout, each when the record's clock says at `speed`, as
/// a live run streams them with `--jsonl` (so `follow -` can be tried on a finished run).
fn stream_lines(path: &Path, speed: Speed, signals: &Signals) -> Result<i32, Failure> {
    let file = File::open(path).map_err(|e| Failure::usage(crate::util::io_error(path, &e)))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut anchor: Option<(Instant, f64)> = None;
    let mut clock = 0.0f64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Failure::runtime(crate::util::io_error(path, &e)))?;
        if n == 0 || signals.stop_reason().is_some() {
            break;
        }
        if let (Speed::Times(x), Some(t)) = (speed, line_time(&buf)) {
            clock = clock.max(t);
            let (wall, from) = *anchor.get_or_insert((Instant::now(), clock));
            let due = wall + Duration::from_secs_f64(((clock - from) / x).clamp(0.0, 1e9));
            while Instant::now() < due && signals.stop_reason().is_none() {
                std::thread::sleep((due - Instant::now()).min(CONTROL_POLL));
            }
        }
        let written = out.write_all(&buf).and_then(|_| {
            if buf.ends_with(b"\n") {
                Ok(())
            } else {
                out.write_all(b"\n")
            }
        });
        if written.and_then(|_| out.flush()).is_err() {
            // The reader went away: it has what it wanted.
            break;
        }
    }
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// A line's time on the record's clock, if it says one.
fn line_time(line: &[u8]) -> Option<f64> {
    #[derive(serde::Deserialize)]
    struct Times {
        t_s: Option<f64>,
        elapsed_s: Option<f64>,
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let t: Times = serde_json::from_slice(line.trim_ascii()).ok()?;
    match t.kind.as_deref() {
        Some("footer") => t.elapsed_s,
        _ => t.t_s,
    }
}

/// A watch's record on the watch screen: its windows at their times (`--speed`), the
/// screen's own keys (pause holds windows, r starts its span again).
fn replay_watch(
    path: &Path,
    header: &Header,
    opts: &ReplayOpts,
    look: Look,
    signals: &Signals,
) -> Result<i32, Failure> {
    use crate::ui::theme::Glyphs;
    use crate::ui::watch::{WatchConfig, WatchEvent, WatchLoop};

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
        [] => format!("record {}", display_name(path)),
        [one] => format!("{one} (record {})", display_name(path)),
        [first, ..] => format!(
            "{} servers ({first}, ...; record {})",
            header.config.endpoints.len(),
            display_name(path)
        ),
    };
    let config = WatchConfig {
        url,
        server,
        interval: Duration::from_secs_f64(interval.min(3600.0)),
        themes: look.themes,
        glyphs: Glyphs::new(look.ascii),
        keys: look.keys,
        nodes: Vec::new(),
    };
    let started = Instant::now();
    let loop_opts = WatchLoop {
        signals: signals.clone(),
        started,
        deadline: None,
        fps: opts.display.fps.unwrap_or(4),
    };
    let (tx, rx) = crossbeam_channel::unbounded::<WatchEvent>();
    let speed = opts.speed;
    // The thread ends when the screen has gone (its send fails) or the windows are played.
    std::thread::Builder::new()
        .name("infertop-replay-watch".into())
        .spawn(move || {
            let from = events.first().map_or(0.0, |(t, _)| *t);
            for (t_s, ev) in events {
                if let Speed::Times(x) = speed {
                    let due = started + Duration::from_secs_f64(((t_s - from) / x).clamp(0.0, 1e9));
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
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::ui::watch::run(rx, config, &loop_opts)
    }));
    match result {
        Ok(Ok(_)) => {
            say!("infertop: replayed {} ({count} windows)", path.display());
            Ok(signals.exit_code().unwrap_or(EXIT_OK))
        }
        Ok(Err(e)) => Err(Failure::runtime(format!("replay: the screen failed ({e})"))),
        Err(_) => Err(Failure::runtime("replay: the screen panicked (see above)")),
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
