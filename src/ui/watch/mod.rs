//! `infertop watch` in a terminal: a live screen of a serving engine's own metrics.
//!
//! Data flows one way: the scraper (a thread in `session::watch`) sends a `WatchEvent` per
//! scrape; the one screen loop (`ui::screen`) folds them into `WatchState` (which computes
//! every figure once per window) and draws with `render`, which only reads the state. The
//! terminal is the run dashboard's (`ui::on_terminal`), restored on quit, signals, errors
//! and (by ratatui's hook) panics.

pub mod detail;
pub mod nodes;
pub mod render;
pub mod state;

use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use ratatui::backend::Backend;
use ratatui::crossterm::event::KeyEvent;
use ratatui::{Frame, Terminal};

pub use state::{NodeView, Pane, Series, WatchConfig, WatchEvent, WatchState};

use super::coalesce::Coalesce;
use super::screen::{run_screen, LoopOptions, Screen};
use super::Input;
use crate::event::StopReason;
use crate::signals::Signals;

/// Loop settings that are not part of the state.
pub struct WatchLoop {
    pub signals: Signals,
    /// When the watch began: the clock the header shows.
    pub started: Instant,
    /// `--duration`: stop at this instant.
    pub deadline: Option<Instant>,
    /// Frames per second at most (a new window draws at once).
    pub fps: u32,
}

impl WatchLoop {
    fn loop_options(&self) -> LoopOptions {
        LoopOptions {
            fps: self.fps,
            signals: self.signals.clone(),
            started: self.started,
            deadline: self.deadline,
        }
    }
}

impl Screen for WatchState {
    type Event = WatchEvent;

    fn apply(&mut self, event: &WatchEvent) -> bool {
        WatchState::apply(self, event.clone());
        true
    }

    fn disconnected(&mut self) -> anyhow::Result<()> {
        // The scraper only stops when told to: gone means it failed (a panic).
        anyhow::bail!("the scraper thread stopped; the summary covers what it read")
    }

    fn tick(&mut self, now: Duration) {
        WatchState::tick(self, now);
    }

    fn key(&mut self, key: &KeyEvent) -> crate::ui::KeyOutcome {
        self.handle_key(key)
    }

    fn draw(&self, frame: &mut Frame) {
        render::render(frame, self);
    }
}

/// Takes over the terminal, runs the screen until quit, a signal, `--duration` or an error,
/// and gives the terminal back on every one of those paths (`ui::on_terminal`).
pub fn run(
    events: Receiver<WatchEvent>,
    config: WatchConfig,
    opts: &WatchLoop,
) -> Result<StopReason, crate::ui::ScreenFailure> {
    let mut state = WatchState::new(config);
    super::on_terminal("watch screen", |terminal| {
        run_loop(
            terminal,
            &mut super::TerminalInput,
            &events,
            &mut state,
            opts,
        )
    })
}

/// The loop on any backend and input (tests drive it on a `TestBackend`).
pub fn run_loop<B>(
    terminal: &mut Terminal<Coalesce<B>>,
    input: &mut dyn Input,
    events: &Receiver<WatchEvent>,
    state: &mut WatchState,
    opts: &WatchLoop,
) -> anyhow::Result<StopReason>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    run_screen(
        terminal,
        input,
        events,
        None,
        state,
        &opts.loop_options(),
        &mut |_, _| {},
    )
}
