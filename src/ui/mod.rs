//! The screens: the run dashboard's state (`state`), key bindings (`keys`), themes (`theme`),
//! one render function per screen region (`render`), drawn part by part (`parts`) onto one
//! canvas with its own diff (`coalesce`); the dashboard on a record being replayed or followed
//! (`feed`), the watch screen (`watch`), and the one loop that drives any of them (`screen`),
//! on the terminal taken and given back in one place (`on_terminal`).
//!
//! The run dashboard is the `App` screen over the engine's channel: `run_dashboard` takes the
//! terminal, runs the loop, and on the way out asks a still-running engine to stop and waits
//! (bounded) for its `Finished`, so the record closes with everything measured.

pub mod buckets;
pub mod charts;
pub mod coalesce;
pub mod config;
pub mod face;
pub mod feed;
pub mod keys;
pub mod log;
pub mod outliers;
pub mod parts;
pub mod render;
pub mod ring;
pub mod screen;
pub mod source;
pub mod state;
pub mod theme;
mod tty;
pub mod views;
pub mod watch;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use ratatui::backend::Backend;
use ratatui::crossterm::event::{self as term, Event as TermEvent, KeyEvent};
use ratatui::{Frame, Terminal};

use crate::event::{Control, Event, StopReason};
use crate::signals::Signals;

pub use keys::{Action, KeyMap};
pub use screen::{run_screen, LoopOptions, Screen};
pub use state::{App, AppConfig, KeyOutcome};
pub use theme::{ColorDepth, ColorMode, Theme};

/// How long quitting waits for the engine to confirm with `Event::Finished`.
pub const STOP_WAIT: Duration = crate::signals::STOP_GRACE;

/// How every screen looks and which keys it takes: loaded and checked once, before the
/// terminal is touched, so a mistake in a theme or keys file is an ordinary one-line error.
#[derive(Clone, Debug)]
pub struct Look {
    /// The themes `t` cycles through, the chosen one first (already at the terminal's depth).
    pub themes: Vec<Theme>,
    pub keys: KeyMap,
    /// Plain ASCII borders and bars, for terminals without UTF-8.
    pub ascii: bool,
    pub fps: u32,
}

impl Look {
    /// A theme name or file, the colour mode, `--ascii`, a keys file and the frame rate.
    pub fn load(
        theme: &str,
        color: ColorMode,
        ascii: bool,
        keys_file: Option<&Path>,
        fps: u32,
    ) -> anyhow::Result<Look> {
        let depth = ColorDepth::from_env(color);
        let themes = Theme::cycle(Theme::load(theme)?)?
            .into_iter()
            .map(|t| t.for_depth(depth))
            .collect();
        let keys = match keys_file {
            Some(path) => KeyMap::load(path)?,
            None => KeyMap::default(),
        };
        Ok(Look {
            themes,
            keys,
            ascii,
            fps,
        })
    }
}

/// Runs the dashboard on `app` until quit, a signal, or the engine finishing and the user
/// quitting. `on_event` is called for every event drained from the channel, after `app` has
/// folded it (the session writes the record there). The terminal is restored on every path
/// (`on_terminal`). Returns why it stopped; `app` keeps the final state, whose fold the summary
/// comes from, after a failure too.
pub fn run_dashboard(
    events: Receiver<Event>,
    control: Sender<Control>,
    app: &mut App,
    fps: u32,
    signals: &Signals,
    on_event: &mut dyn FnMut(&Event, &mut App),
) -> Result<StopReason, ScreenFailure> {
    tty::lower_ui_priority();
    let loop_opts = LoopOptions {
        fps,
        signals: signals.clone(),
        started: Instant::now(),
        deadline: None,
    };
    on_terminal("dashboard", |terminal| {
        run_app(
            terminal,
            &mut TerminalInput,
            &events,
            &control,
            app,
            &loop_opts,
            STOP_WAIT,
            on_event,
        )
    })
}

/// Draws `screen` over `events` in the terminal until q, a signal or the end the screen says
/// (a replay's, a follow's), restoring the terminal on every path.
pub fn show<S: Screen>(
    what: &'static str,
    screen: &mut S,
    events: &Receiver<S::Event>,
    opts: &LoopOptions,
) -> Result<StopReason, ScreenFailure> {
    on_terminal(what, |terminal| {
        run_screen(
            terminal,
            &mut TerminalInput,
            events,
            None,
            screen,
            opts,
            &mut |_, _| {},
        )
    })
}

/// Why a screen ended early: it failed (the terminal went away, a write failed), or it
/// panicked (ratatui's hook restored the terminal and printed the panic).
#[derive(Debug)]
pub enum ScreenFailure {
    Failed { what: &'static str, why: String },
    Panicked { what: &'static str },
}

impl std::fmt::Display for ScreenFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScreenFailure::Failed { what, why } => write!(f, "the {what} failed ({why})"),
            ScreenFailure::Panicked { what } => write!(f, "the {what} panicked (see above)"),
        }
    }
}

/// The one way a screen takes the terminal: raw mode, the alternate screen and ratatui's
/// panic hook for `body`, engine panics kept quiet (they are the engine's to report), and the
/// terminal given back whatever happens: `body`'s error, a panic in it (caught here, so the
/// session still stops the engine and writes the record's footer), or its end.
pub fn on_terminal<T>(
    what: &'static str,
    body: impl FnOnce(&mut DashboardTerminal) -> anyhow::Result<T>,
) -> Result<T, ScreenFailure> {
    let mut terminal = enter_terminal().map_err(|e| ScreenFailure::Failed {
        what,
        why: crate::util::one_line(&e.to_string()),
    })?;
    // ratatui's hook restores the terminal on a panic on any thread; a worker panic is the
    // worker's to report (as ERROR in the dashboard), so it must not reach that hook.
    crate::util::quiet_engine_panics();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut terminal)));
    leave_terminal(terminal);
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(ScreenFailure::Failed {
            what,
            why: crate::util::one_line(&e.to_string()),
        }),
        Err(_) => Err(ScreenFailure::Panicked { what }),
    }
}

/// The terminal every screen draws on (`on_terminal`).
pub type DashboardTerminal =
    Terminal<coalesce::Coalesce<ratatui::backend::CrosstermBackend<std::io::Stdout>>>;

/// Takes over the terminal: raw mode, the alternate screen, and ratatui's panic hook (which
/// restores the terminal on a panic on any thread). On failure the terminal is restored.
fn enter_terminal() -> anyhow::Result<DashboardTerminal> {
    match ratatui::try_init().and_then(|t| {
        // try_init set up raw mode, the alternate screen and the panic hook; the terminal it
        // returns is replaced by one whose backend bridges short gaps (fewer bytes a frame).
        std::mem::forget(t);
        Terminal::new(coalesce::Coalesce::new(
            ratatui::backend::CrosstermBackend::new(std::io::stdout()),
        ))
    }) {
        Ok(t) => Ok(t),
        Err(e) => {
            restore_terminal();
            Err(anyhow::anyhow!("cannot set up the terminal: {e}"))
        }
    }
}

/// Gives the terminal back: cursor shown, raw mode and the alternate screen left.
fn leave_terminal(mut terminal: DashboardTerminal) {
    // Terminal's Drop reports a failure to show the cursor with eprintln!, which panics when
    // stderr is a hung-up terminal (an SSH connection dropped); show it here, ignoring errors,
    // and skip the Drop so the run can still write its record footer and exit cleanly.
    let _ = terminal.show_cursor();
    std::mem::forget(terminal);
    restore_terminal();
}

/// Leaves raw mode and the alternate screen and shows the cursor; errors are reported, not
/// returned, since there is nothing better to do with them on the way out.
fn restore_terminal() {
    // Not `ratatui::restore()`: it eprintln!s its error, which panics on a hung-up terminal.
    let _ = ratatui::try_restore();
    let mut out = std::io::stdout();
    let _ = ratatui::crossterm::execute!(out, ratatui::crossterm::cursor::Show);
    let _ = out.flush();
}

/// Where the loop reads terminal input from.
pub trait Input {
    /// Waits up to `timeout` for one input event.
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<TermEvent>>;
}

/// The real terminal, through crossterm.
pub struct TerminalInput;

impl Input for TerminalInput {
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<TermEvent>> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            // crossterm reads /dev/tty then; let it wait.
            return if term::poll(timeout)? {
                term::read().map(Some)
            } else {
                Ok(None)
            };
        }
        // crossterm spins forever on a hung-up terminal (read returns 0 bytes and its read loop
        // never breaks), so wait on stdin ourselves and report a hang-up as an error; the loop
        // then stops the worker and the run ends like on SIGHUP.
        if tty::stdin_hung_up(timeout)? {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the terminal hung up",
            ));
        }
        if term::poll(Duration::ZERO)? {
            term::read().map(Some)
        } else {
            Ok(None)
        }
    }
}

/// The whole dashboard loop on any backend and input; returns why the run stopped. Before
/// returning (also on error) it asks a still-running engine to stop and waits up to
/// `stop_wait` for `Finished`, passing every event it drains to `on_event`.
#[allow(clippy::too_many_arguments)]
pub fn run_app<B>(
    terminal: &mut Terminal<coalesce::Coalesce<B>>,
    input: &mut dyn Input,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    app: &mut App,
    opts: &LoopOptions,
    stop_wait: Duration,
    on_event: &mut dyn FnMut(&Event, &mut App),
) -> anyhow::Result<StopReason>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    match run_screen(terminal, input, events, Some(control), app, opts, on_event) {
        Ok(reason) => Ok(stop_worker(
            app, events, control, reason, stop_wait, on_event,
        )),
        Err(e) => {
            stop_worker(app, events, control, StopReason::Error, stop_wait, on_event);
            Err(e)
        }
    }
}

impl Screen for App {
    type Event = Event;

    fn apply(&mut self, event: &Event) -> bool {
        App::apply(self, event);
        false
    }

    fn done(&mut self, event: Event) {
        crate::event::recycle(event);
    }

    fn disconnected(&mut self) -> anyhow::Result<()> {
        self.worker_disconnected();
        Ok(())
    }

    fn tick(&mut self, now: Duration) {
        App::tick(self, now);
    }

    fn refresh(&mut self) {
        App::refresh_paced(self);
    }

    fn key(&mut self, key: &KeyEvent) -> KeyOutcome {
        self.handle_key(key)
    }

    fn take_control(&mut self) -> Option<Control> {
        self.sweep.as_mut().and_then(|s| s.take_control())
    }

    fn draw(&self, frame: &mut Frame) {
        render::render(frame, self);
    }

    fn draw_parts(&self, frame: &mut Frame, parts: &mut parts::Parts) {
        render::render_parts(frame, self, parts);
    }
}

/// Asks a running engine to stop and waits (bounded) for `Finished`. Returns the reason the
/// run ended: the engine's own if it had finished already, else the one asked for.
fn stop_worker(
    app: &mut App,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    reason: StopReason,
    wait: Duration,
    on_event: &mut dyn FnMut(&Event, &mut App),
) -> StopReason {
    if let Some(done) = app.stop_reason() {
        return done;
    }
    let asked = *app.stop_asked.get_or_insert_with(Instant::now);
    if control.send(Control::Stop(reason.clone())).is_err() {
        // The engine dropped its receiver; whatever it sent is still in the channel.
        let _ = screen::drain(events, app, on_event);
        return app.stop_reason().unwrap_or(reason);
    }
    let deadline = asked + wait;
    while app.worker_live() {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(ev) => {
                app.apply(&ev);
                on_event(&ev, app);
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // `Finished` carries the engine's view (e.g. `Error` if it failed while stopping).
    app.stop_reason().unwrap_or(reason)
}
