//! The one reading of `Control` for every engine: messages from the dashboard's keys and a
//! sweep's stopping rule become intents (`Intent`), each decided here once, so the candle
//! worker, the http engine's request loop and its conversation loop agree on what a message
//! means:
//!
//! - `Pause` and `Resume` change nothing when the engine already is (paused, running), and
//!   are not passed on then; a paused engine starts nothing until resumed.
//! - `EndCell` (a sweep's cell has measured enough) is `Intent::Drain`: start nothing more, let
//!   what is in flight end and count, then stop at the request limit. The cell's drain is part
//!   of what it measured (`stats::held`).
//! - `Stop` and a closed channel stop at once: what is in flight is not a measurement.
//! - `CellVerdict` is the sweep engine's (its search), never a cell's.
//!
//! The engine echoes each change it makes as an event (`Intent::echo` for the ones whose echo
//! is the same everywhere), so every consumer sees it at the same point of the stream.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use crate::event::{Control, Event, StopReason};

/// What a control message asks of an engine, once decided.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    Pause,
    Resume,
    /// Reset the statistics (echoed as `Event::StatsReset`).
    ResetStats,
    /// Change the output length by this many tokens from the next request on.
    Output(i64),
    /// Double (+1) or halve (−1) the prompt lengths from the next request on.
    Prompt(i64),
    /// Double (+1) or halve (−1) the load from the next request on: the batch (candle), the
    /// requests in flight (closed loop) or the rate (open loop, a replay's speed).
    Load(i64),
    /// Start nothing more; stop at the request limit once what is in flight has ended.
    Drain,
    /// Stop now.
    Stop(StopReason),
}

impl Intent {
    /// The event that echoes this intent where it is the same for every engine (pause,
    /// resume, reset); workload changes are echoed by the engine with its own description.
    pub fn echo(&self) -> Option<Event> {
        match self {
            Intent::Pause => Some(Event::Paused),
            Intent::Resume => Some(Event::Resumed),
            Intent::ResetStats => Some(Event::StatsReset),
            _ => None,
        }
    }
}

/// An engine's control channel, read as intents, with what it has been asked so far.
pub struct Inbox {
    rx: Receiver<Control>,
    /// Rung as each message arrives, for an async loop to wait on (`arrived`) instead of
    /// looking at the channel on a timer.
    bell: Option<Arc<tokio::sync::Notify>>,
    /// Intents read while looking for a stop mid-request, for the next boundary.
    held: VecDeque<Intent>,
    paused: bool,
    draining: bool,
}

impl Inbox {
    pub fn new(rx: Receiver<Control>) -> Inbox {
        Inbox {
            rx,
            bell: None,
            held: VecDeque::new(),
            paused: false,
            draining: false,
        }
    }

    /// An inbox an async loop can wait on: a thread (`infertop-control`) passes each message
    /// on from `rx` and rings the bell, so the loop wakes when a control comes and sleeps
    /// otherwise. The thread ends when either side of the channel goes.
    pub fn ringing(rx: Receiver<Control>) -> std::io::Result<Inbox> {
        let (tx, forwarded) = crossbeam_channel::unbounded();
        let bell = Arc::new(tokio::sync::Notify::new());
        let ring = bell.clone();
        std::thread::Builder::new()
            .name("infertop-control".into())
            .spawn(move || {
                for control in rx.iter() {
                    if tx.send(control).is_err() {
                        return;
                    }
                    ring.notify_one();
                }
                // The sender went: the loop reads the closed channel as a stop.
                drop(tx);
                ring.notify_one();
            })?;
        Ok(Inbox {
            bell: Some(bell),
            ..Inbox::new(forwarded)
        })
    }

    /// Waits until a control message may have arrived (for ever, for an inbox without a
    /// bell); `poll` then reads it.
    pub async fn arrived(&self) {
        match &self.bell {
            Some(bell) => bell.notified().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the engine is paused (it starts nothing until resumed).
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Whether the engine has been asked to drain (`EndCell`).
    pub fn draining(&self) -> bool {
        self.draining
    }

    /// The next intent, without waiting; `None` when nothing is waiting.
    pub fn poll(&mut self) -> Option<Intent> {
        loop {
            let intent = match self.held.pop_front() {
                Some(i) => Some(i),
                None => match self.rx.try_recv() {
                    Ok(c) => decide(c),
                    Err(TryRecvError::Empty) => return None,
                    Err(TryRecvError::Disconnected) => {
                        return Some(Intent::Stop(StopReason::UserStop))
                    }
                },
            };
            if let Some(i) = intent.and_then(|i| self.note(i)) {
                return Some(i);
            }
        }
    }

    /// The next intent, waiting up to `timeout` for one (a paused engine waits here).
    pub fn wait(&mut self, timeout: Duration) -> Option<Intent> {
        if let Some(i) = self.poll() {
            return Some(i);
        }
        loop {
            let control = match self.rx.recv_timeout(timeout) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => {
                    return Some(Intent::Stop(StopReason::UserStop))
                }
            };
            if let Some(i) = decide(control).and_then(|i| self.note(i)) {
                return Some(i);
            }
        }
    }

    /// Between two decode steps: a stop that has arrived, if one has. Everything else waits
    /// for the next request boundary (`poll`), in order; a drain lets the request finish.
    pub fn stop_now(&mut self) -> Option<StopReason> {
        loop {
            let control = match self.rx.try_recv() {
                Ok(c) => c,
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => return Some(StopReason::UserStop),
            };
            match control {
                Control::Stop(reason) => return Some(reason),
                other => {
                    if let Some(i) = decide(other) {
                        self.held.push_back(i);
                    }
                }
            }
        }
    }

    /// Keeps the state an intent changes; `None` when it changes nothing (a pause of a
    /// paused engine, a resume of a running one, a second drain).
    fn note(&mut self, intent: Intent) -> Option<Intent> {
        match intent {
            Intent::Pause if self.paused => return None,
            Intent::Resume if !self.paused => return None,
            Intent::Drain if self.draining => return None,
            Intent::Pause => self.paused = true,
            Intent::Resume => self.paused = false,
            Intent::Drain => self.draining = true,
            _ => {}
        }
        Some(intent)
    }
}

/// What a message means; `None` for one that is not a cell's (`CellVerdict`).
fn decide(control: Control) -> Option<Intent> {
    Some(match control {
        Control::Pause => Intent::Pause,
        Control::Resume => Intent::Resume,
        Control::ResetStats => Intent::ResetStats,
        Control::AdjustOutputTokens(d) => Intent::Output(d),
        Control::AdjustPromptTokens(s) => Intent::Prompt(s),
        Control::AdjustLoad(s) => Intent::Load(s),
        Control::EndCell => Intent::Drain,
        Control::Stop(reason) => Intent::Stop(reason),
        Control::CellVerdict { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbox(controls: &[Control]) -> Inbox {
        let (tx, rx) = crossbeam_channel::unbounded();
        for c in controls {
            tx.send(c.clone()).ok();
        }
        // Kept open: a closed channel is a stop.
        std::mem::forget(tx);
        Inbox::new(rx)
    }

    fn drain(inbox: &mut Inbox) -> Vec<Intent> {
        std::iter::from_fn(|| inbox.poll()).collect()
    }

    /// A pause of a paused engine, a resume of a running one and a sweep's verdict do
    /// nothing; EndCell is a drain, remembered.
    #[test]
    fn controls_become_intents_once() {
        let mut i = inbox(&[
            Control::Resume,
            Control::Pause,
            Control::Pause,
            Control::CellVerdict {
                cell: 0,
                meets_slo: true,
            },
            Control::Resume,
            Control::EndCell,
            Control::EndCell,
        ]);
        assert_eq!(
            drain(&mut i),
            [Intent::Pause, Intent::Resume, Intent::Drain]
        );
        assert!(i.draining() && !i.paused());
    }

    /// Mid-request only a stop interrupts; what came before it waits for the boundary, in
    /// order, and a drain lets the request finish.
    #[test]
    fn only_a_stop_interrupts_a_request() {
        let mut i = inbox(&[
            Control::ResetStats,
            Control::EndCell,
            Control::AdjustLoad(1),
        ]);
        assert_eq!(i.stop_now(), None);
        assert_eq!(
            drain(&mut i),
            [Intent::ResetStats, Intent::Drain, Intent::Load(1)]
        );
        let mut i = inbox(&[
            Control::AdjustOutputTokens(16),
            Control::Stop(StopReason::UserStop),
        ]);
        assert_eq!(i.stop_now(), Some(StopReason::UserStop));
        assert_eq!(drain(&mut i), [Intent::Output(16)]);
    }

    #[test]
    fn a_closed_channel_is_a_stop() {
        let (tx, rx) = crossbeam_channel::unbounded::<Control>();
        drop(tx);
        let mut i = Inbox::new(rx);
        assert_eq!(i.poll(), Some(Intent::Stop(StopReason::UserStop)));
        assert_eq!(i.stop_now(), Some(StopReason::UserStop));
        assert_eq!(
            i.wait(Duration::from_millis(1)),
            Some(Intent::Stop(StopReason::UserStop))
        );
    }
}
