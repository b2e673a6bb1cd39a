//! The dashboard: app state (`state`), key bindings (`keys`), themes (`theme`), one render
//! function per screen region (`render`), and the loop that ties them to the worker's channel.
//!
//! The loop, once per iteration: drain the event channel with `try_recv` (never blocking the
//! worker, calling `on_event` for each before applying it), refresh the cached statistics if
//! anything changed, draw at `--fps`, then wait for input until the next frame is due.
//! `run_app` is generic over the ratatui backend and the input source, so tests drive the whole
//! loop on a `TestBackend` with scripted keys.

pub mod coalesce;
pub mod config;
pub use crate::util::format;
pub mod keys;
pub mod render;
pub mod ring;
pub mod state;
pub mod theme;
mod tty;
pub mod watch;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use ratatui::backend::Backend;
use ratatui::crossterm::event::{self as term, Event as TermEvent};
use ratatui::Terminal;

use crate::event::{Control, Event, StopReason};
use crate::run::{Outcome, Signals};
use crate::stats::Slo;

pub use keys::{Action, KeyMap};
pub use state::{App, AppConfig, Update};
pub use theme::{ColorDepth, ColorMode, Theme};

/// How the CLI starts the dashboard.
pub struct DashboardOptions {
    /// Frames per second (default 10; the CLI takes 1 to 120, the loop clamps to that).
    pub fps: u32,
    /// A built-in theme name or a path to a theme file.
    pub theme: String,
    pub color: ColorMode,
    /// Plain ASCII borders and bars, for terminals without UTF-8.
    pub ascii: bool,
    pub slo: Slo,
    pub keys_file: Option<PathBuf>,
    /// Tokens per +/- press, e.g. 16.
    pub output_step: i64,
    /// A previous run's steady-state table to show beside the live one (`--baseline`).
    pub baseline: Option<state::Baseline>,
    /// SIGINT/SIGTERM/SIGHUP, as the CLI's handler noted them.
    pub signals: Signals,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions {
            fps: 10,
            theme: "default".to_string(),
            color: ColorMode::Auto,
            ascii: false,
            slo: Slo::default(),
            keys_file: None,
            output_step: 16,
            baseline: None,
            signals: Signals::none(),
        }
    }
}

/// How long quitting waits for the worker to confirm with `Event::Finished`.
pub const STOP_WAIT: Duration = Duration::from_secs(2);

/// Checks the theme and keys files (and the numbers) before the terminal is touched, so
/// mistakes print as ordinary errors rather than inside the alternate screen.
pub fn validate_options(opts: &DashboardOptions) -> anyhow::Result<()> {
    app_config(opts).map(|_| ())
}

/// The validated settings the dashboard starts with.
pub fn app_config(opts: &DashboardOptions) -> anyhow::Result<AppConfig> {
    if opts.output_step <= 0 {
        anyhow::bail!(
            "the output-token step must be positive (got {})",
            opts.output_step
        );
    }
    let depth = ColorDepth::from_env(opts.color);
    let themes = Theme::cycle(Theme::load(&opts.theme)?)?
        .into_iter()
        .map(|t| t.for_depth(depth))
        .collect();
    let keys = match &opts.keys_file {
        Some(path) => KeyMap::load(path)?,
        None => KeyMap::default(),
    };
    Ok(AppConfig {
        keys,
        themes,
        ascii: opts.ascii,
        slo: opts.slo,
        output_step: opts.output_step,
        baseline: opts.baseline.clone(),
    })
}

/// Runs the dashboard until quit, a signal, or the worker finishing and the user quitting.
/// `on_event` is called for every event drained from the channel, before it is applied (the
/// CLI uses it to write the record). The terminal is restored on every path; a panic is
/// restored by the hook `ratatui::init` installs.
pub fn run_dashboard(
    events: Receiver<Event>,
    control: Sender<Control>,
    opts: DashboardOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<Outcome> {
    tty::lower_ui_priority();
    let mut app = App::new(app_config(&opts)?);
    let mut terminal = enter_terminal()?;
    // ratatui's hook restores the terminal on a panic on any thread; a worker panic is the
    // worker's to report (as ERROR in the dashboard), so it must not reach that hook.
    crate::util::quiet_engine_panics();
    let loop_opts = LoopOptions {
        fps: opts.fps,
        signals: opts.signals.clone(),
        stop_wait: STOP_WAIT,
    };
    let result = run_app(
        &mut terminal,
        &mut TerminalInput,
        &events,
        &control,
        &mut app,
        &loop_opts,
        on_event,
    );
    leave_terminal(terminal);
    let stop = result?;
    Ok(app.run.outcome(stop))
}

/// The dashboard's terminal, as `run_dashboard` and `watch` draw on it.
pub(crate) type DashboardTerminal =
    Terminal<coalesce::Coalesce<ratatui::backend::CrosstermBackend<std::io::Stdout>>>;

/// Takes over the terminal: raw mode, the alternate screen, and ratatui's panic hook (which
/// restores the terminal on a panic on any thread). On failure the terminal is restored.
pub(crate) fn enter_terminal() -> anyhow::Result<DashboardTerminal> {
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
pub(crate) fn leave_terminal(mut terminal: DashboardTerminal) {
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

/// Loop settings that are not part of the app state.
pub struct LoopOptions {
    pub fps: u32,
    pub signals: Signals,
    /// How long to wait for `Finished` after asking the worker to stop.
    pub stop_wait: Duration,
}

/// Events applied per drain at most, so a flood from the worker cannot starve drawing.
const MAX_DRAIN: usize = 100_000;

/// The whole dashboard loop on any backend and input; returns why the run stopped. Before
/// returning (also on error) it asks a still-running worker to stop and waits up to
/// `stop_wait` for `Finished`, passing every event it drains to `on_event`.
pub fn run_app<B>(
    terminal: &mut Terminal<B>,
    input: &mut dyn Input,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    app: &mut App,
    opts: &LoopOptions,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<StopReason>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    match event_loop(terminal, input, events, app, opts, control, on_event) {
        Ok(reason) => Ok(stop_worker(
            app,
            events,
            control,
            reason,
            opts.stop_wait,
            on_event,
        )),
        Err(e) => {
            stop_worker(
                app,
                events,
                control,
                StopReason::Error,
                opts.stop_wait,
                on_event,
            );
            Err(e)
        }
    }
}

fn event_loop<B>(
    terminal: &mut Terminal<B>,
    input: &mut dyn Input,
    events: &Receiver<Event>,
    app: &mut App,
    opts: &LoopOptions,
    control: &Sender<Control>,
    on_event: &mut dyn FnMut(&Event),
) -> anyhow::Result<StopReason>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    let start = Instant::now();
    let frame_time = Duration::from_secs_f64(1.0 / f64::from(opts.fps.clamp(1, 120)));
    let mut next_draw = start;
    loop {
        app.tick(start.elapsed());
        drain(events, app, on_event);
        if let Some(reason) = opts.signals.stop_reason() {
            return Ok(reason);
        }
        let now = Instant::now();
        if now >= next_draw {
            app.refresh();
            if let Err(e) = terminal.draw(|f| render::render(f, app)) {
                // A hung-up terminal fails here, possibly before the SIGHUP flag is seen.
                return opts.signals.stop_reason().ok_or_else(|| e.into());
            }
            next_draw = (next_draw + frame_time).max(now);
        }
        let timeout = next_draw.saturating_duration_since(Instant::now());
        let event = match input.next(timeout) {
            Ok(ev) => ev,
            Err(e) => return opts.signals.stop_reason().ok_or_else(|| e.into()),
        };
        match event {
            Some(TermEvent::Key(key)) => {
                match app.handle_key(&key) {
                    Update::Quit => return Ok(StopReason::UserStop),
                    // The worker echoes the change as an event; if it has gone there is no one
                    // to tell, and the footer no longer offers these keys.
                    Update::Send(msg) => {
                        let _ = control.send(msg);
                    }
                    Update::None => {}
                }
                // Show the effect of a key at once rather than at the next frame.
                next_draw = Instant::now();
            }
            Some(TermEvent::Resize(..)) => {
                terminal.autoresize()?;
                next_draw = Instant::now();
            }
            _ => {}
        }
    }
}

/// Applies what is in the channel now, without blocking.
fn drain(events: &Receiver<Event>, app: &mut App, on_event: &mut dyn FnMut(&Event)) {
    for _ in 0..MAX_DRAIN {
        match events.try_recv() {
            Ok(ev) => {
                on_event(&ev);
                app.apply(&ev);
            }
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {
                app.worker_disconnected();
                return;
            }
        }
    }
}

/// Asks a running worker to stop and waits (bounded) for `Finished`. Returns the reason the
/// run ended: the worker's own if it had finished already, else the one asked for.
fn stop_worker(
    app: &mut App,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    reason: StopReason,
    wait: Duration,
    on_event: &mut dyn FnMut(&Event),
) -> StopReason {
    if let Some(done) = &app.run.stop {
        return done.clone();
    }
    if control.send(Control::Stop(reason.clone())).is_err() {
        // The worker dropped its receiver; whatever it sent is still in the channel.
        drain(events, app, on_event);
        return app.run.stop.clone().unwrap_or(reason);
    }
    let deadline = Instant::now() + wait;
    while app.run.stop.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(ev) => {
                on_event(&ev);
                app.apply(&ev);
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // `Finished` carries the worker's view (e.g. `Error` if it failed while stopping).
    app.run.stop.clone().unwrap_or(reason)
}
