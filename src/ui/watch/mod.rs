//! `infertop watch` in a terminal: a live screen of a serving engine's own metrics.
//!
//! Data flows one way: the scraper (a thread in `cli::watch`) sends a `WatchEvent` per scrape;
//! the loop here drains them into `WatchState` (which computes every figure once per window)
//! and draws with `render`, which only reads the state. The terminal is the run dashboard's
//! (`ui::enter_terminal`), restored on quit, signals, errors and (by ratatui's hook) panics.

pub mod render;
pub mod state;

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use ratatui::backend::Backend;
use ratatui::crossterm::event::Event as TermEvent;
use ratatui::Terminal;

pub use state::{Update, WatchConfig, WatchEvent, WatchState};

use super::Input;
use crate::event::StopReason;
use crate::run::Signals;

/// How often the screen is drawn when nothing happens (the elapsed clock); new windows and
/// keys draw at once.
const IDLE_FRAME: Duration = Duration::from_millis(250);

/// Loop settings that are not part of the state.
pub struct WatchLoop {
    pub signals: Signals,
    /// When the watch began: the clock the header shows.
    pub started: Instant,
    /// `--duration`: stop at this instant.
    pub deadline: Option<Instant>,
}

/// Takes over the terminal, runs the screen until quit, a signal, `--duration` or an error,
/// and gives the terminal back on every one of those paths.
pub fn run(
    events: Receiver<WatchEvent>,
    config: WatchConfig,
    opts: &WatchLoop,
) -> anyhow::Result<StopReason> {
    let mut state = WatchState::new(config);
    let mut terminal = super::enter_terminal()?;
    let result = run_loop(
        &mut terminal,
        &mut super::TerminalInput,
        &events,
        &mut state,
        opts,
    );
    super::leave_terminal(terminal);
    result
}

/// The loop on any backend and input (tests drive it on a `TestBackend`).
pub fn run_loop<B>(
    terminal: &mut Terminal<B>,
    input: &mut dyn Input,
    events: &Receiver<WatchEvent>,
    state: &mut WatchState,
    opts: &WatchLoop,
) -> anyhow::Result<StopReason>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    let mut next_draw = Instant::now();
    loop {
        loop {
            match events.try_recv() {
                Ok(ev) => {
                    state.apply(ev);
                    next_draw = Instant::now();
                }
                Err(TryRecvError::Empty) => break,
                // The scraper only stops when told to: gone means it failed (a panic).
                Err(TryRecvError::Disconnected) => {
                    anyhow::bail!("the scraper thread stopped; the summary covers what it read")
                }
            }
        }
        if let Some(reason) = opts.signals.stop_reason() {
            return Ok(reason);
        }
        if opts.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(StopReason::DurationLimit);
        }
        let now = Instant::now();
        if now >= next_draw {
            state.tick(opts.started.elapsed());
            if let Err(e) = terminal.draw(|f| render::render(f, state)) {
                // A hung-up terminal fails here, possibly before the SIGHUP flag is seen.
                return opts.signals.stop_reason().ok_or_else(|| e.into());
            }
            next_draw = now + IDLE_FRAME;
        }
        // Wake for the next frame, or sooner for a window (polled at a short step).
        let timeout = next_draw
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        let event = match input.next(timeout) {
            Ok(ev) => ev,
            Err(e) => return opts.signals.stop_reason().ok_or_else(|| e.into()),
        };
        match event {
            Some(TermEvent::Key(key)) => {
                if state.handle_key(&key) == Update::Quit {
                    return Ok(StopReason::UserStop);
                }
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
