//! The one screen loop: every full-screen view (a run's dashboard, a sweep's, a watch, and the
//! record-fed views) is a `Screen` that this loop drives the same way. Once per iteration it
//! drains the event channel without blocking (folding each event into the screen's state,
//! then handing it to `on_event`, e.g. the recorder), sends what the state asks for, refreshes
//! the cached statistics and draws when a frame is due, then waits for input until the next
//! frame (or a short poll, so new events are seen soon). Generic over the ratatui backend under
//! `Coalesce` and the input source, so tests drive it on a `TestBackend` with scripted keys.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use ratatui::backend::Backend;
use ratatui::crossterm::event::{Event as TermEvent, KeyEvent};
use ratatui::{Frame, Terminal};

use super::coalesce::{self, Coalesce};
use super::parts::Parts;
use super::state::KeyOutcome;
use super::Input;
use crate::event::{Control, StopReason};
use crate::signals::Signals;

/// A full-screen view: a pure fold of its events, a key handler and a renderer.
pub trait Screen {
    /// What its producer sends.
    type Event;
    /// Folds one event in. Returns whether to draw at once rather than at the next frame (a
    /// watch's new window); a stream of many events per frame returns false.
    fn apply(&mut self, event: &Self::Event) -> bool;
    /// Takes an event back once it is folded in and handed to `on_event` (the dashboard
    /// returns a decode-step list to the engines' pool, `event::recycle`).
    fn done(&mut self, _event: Self::Event) {}
    /// Every producer has gone. An error ends the loop with it.
    fn disconnected(&mut self) -> anyhow::Result<()>;
    /// Sets the clock (time since the loop started; tests set it by hand).
    fn tick(&mut self, now: Duration);
    /// Recomputes cached statistics before a frame, if anything changed.
    fn refresh(&mut self) {}
    /// A key press: nothing more, quit, or a message to the producer.
    fn key(&mut self, key: &KeyEvent) -> KeyOutcome;
    /// A message the state itself wants sent (a sweep's stopping rule), once.
    fn take_control(&mut self) -> Option<Control> {
        None
    }
    /// Draws the whole screen from the state; never changes it.
    fn draw(&self, frame: &mut Frame);
    /// Draws the screen on a canvas that holds the last frame's parts (`Parts`); by
    /// default whole, as `draw` does.
    fn draw_parts(&self, frame: &mut Frame, parts: &mut Parts) {
        parts.whole(frame.buffer_mut());
        self.draw(frame);
    }
}

/// Loop settings that are not part of the state.
pub struct LoopOptions {
    /// Frames per second (clamped to 1..=120).
    pub fps: u32,
    pub signals: Signals,
    /// The clock's origin: the screen's `tick` counts from here.
    pub started: Instant,
    /// Stop at this instant (`watch --duration`).
    pub deadline: Option<Instant>,
}

/// Messages applied per drain at most, and for how long, so a flood from the producer (a
/// replay at full speed sends batches of events) cannot starve drawing.
const MAX_DRAIN: usize = 100_000;
const MAX_DRAIN_TIME: Duration = Duration::from_millis(50);

/// How long the loop waits for input at most, so a new event is seen within this even when
/// the next frame is further away (below 10 fps). At 10 fps and more the loop wakes once a
/// frame: each wakeup costs the dashboard its scheduling and a cold start, and at 50 ms it
/// woke twice a frame for nothing.
const POLL: Duration = Duration::from_millis(100);

/// Runs `screen` until a quit key, a signal, the deadline or an error; returns why it stopped.
/// `control` (when the producer takes messages) gets what keys and the state ask for.
pub fn run_screen<B, S>(
    terminal: &mut Terminal<Coalesce<B>>,
    input: &mut dyn Input,
    events: &Receiver<S::Event>,
    control: Option<&Sender<Control>>,
    screen: &mut S,
    opts: &LoopOptions,
    on_event: &mut dyn FnMut(&S::Event, &mut S),
) -> anyhow::Result<StopReason>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    S: Screen,
{
    let frame_time = Duration::from_secs_f64(1.0 / f64::from(opts.fps.clamp(1, 120)));
    let mut next_draw = Instant::now();
    loop {
        screen.tick(opts.started.elapsed());
        if drain(events, screen, on_event)? {
            next_draw = Instant::now();
        }
        if let (Some(c), Some(tx)) = (screen.take_control(), control) {
            let _ = tx.send(c);
        }
        if let Some(reason) = opts.signals.stop_reason() {
            return Ok(reason);
        }
        if opts.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(StopReason::DurationLimit);
        }
        let now = Instant::now();
        if now >= next_draw {
            screen.refresh();
            if let Err(e) = coalesce::draw_parts(terminal, |f, parts| screen.draw_parts(f, parts)) {
                // A hung-up terminal fails here, possibly before the SIGHUP flag is seen.
                return opts.signals.stop_reason().ok_or_else(|| e.into());
            }
            next_draw = (next_draw + frame_time).max(now);
        }
        let wake = opts.deadline.map_or(next_draw, |d| d.min(next_draw));
        let timeout = wake.saturating_duration_since(Instant::now()).min(POLL);
        let event = match input.next(timeout) {
            Ok(ev) => ev,
            Err(e) => return opts.signals.stop_reason().ok_or_else(|| e.into()),
        };
        match event {
            Some(TermEvent::Key(key)) => {
                match screen.key(&key) {
                    KeyOutcome::Quit => return Ok(StopReason::UserStop),
                    // The producer echoes the change as an event; if it has gone there is no
                    // one to tell, and the footer no longer offers these keys.
                    KeyOutcome::Send(msg) => {
                        if let Some(tx) = control {
                            let _ = tx.send(msg);
                        }
                    }
                    KeyOutcome::None => {}
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

/// Applies what is in the channel now, without blocking; returns whether an event asked to be
/// drawn at once.
pub fn drain<S: Screen>(
    events: &Receiver<S::Event>,
    screen: &mut S,
    on_event: &mut dyn FnMut(&S::Event, &mut S),
) -> anyhow::Result<bool> {
    let mut draw_now = false;
    let started = Instant::now();
    for i in 0..MAX_DRAIN {
        if i % 64 == 63 && started.elapsed() >= MAX_DRAIN_TIME {
            break;
        }
        match events.try_recv() {
            Ok(ev) => {
                draw_now |= screen.apply(&ev);
                on_event(&ev, screen);
                screen.done(ev);
            }
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Disconnected) => {
                screen.disconnected()?;
                break;
            }
        }
    }
    Ok(draw_now)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Folds numbers, and notes what is handed back.
    #[derive(Default)]
    struct Numbers {
        applied: Vec<u32>,
        done: Vec<u32>,
    }

    impl Screen for Numbers {
        type Event = u32;
        fn apply(&mut self, event: &u32) -> bool {
            self.applied.push(*event);
            false
        }
        fn done(&mut self, event: u32) {
            self.done.push(event);
        }
        fn disconnected(&mut self) -> anyhow::Result<()> {
            Ok(())
        }
        fn tick(&mut self, _now: Duration) {}
        fn key(&mut self, _key: &KeyEvent) -> KeyOutcome {
            KeyOutcome::None
        }
        fn draw(&self, _frame: &mut Frame) {}
    }

    /// Each event is folded in, handed to `on_event`, then given back to the screen (where
    /// the dashboard returns a step list to the engines' pool), in order.
    #[test]
    fn a_drained_event_is_given_back_after_it_is_handed_on() {
        let (tx, rx) = crossbeam_channel::unbounded();
        for n in 1..=3 {
            tx.send(n).unwrap();
        }
        let mut screen = Numbers::default();
        let mut handed = Vec::new();
        let mut on_event = |ev: &u32, s: &mut Numbers| {
            assert!(
                !s.done.contains(ev),
                "{ev} given back before it was handed on"
            );
            handed.push(*ev);
        };
        drain(&rx, &mut screen, &mut on_event).unwrap();
        assert_eq!(handed, [1, 2, 3]);
        assert_eq!(screen.applied, [1, 2, 3]);
        assert_eq!(screen.done, [1, 2, 3]);
    }
}
