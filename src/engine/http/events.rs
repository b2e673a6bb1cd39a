//! The HTTP engine's side of the channel, shared by the scheduler and every stream's task.
//!
//! At high concurrency the streams' content chunks come at tens of thousands a second; each
//! is a decode step. They go through one `StepBatch`, so the consumers take one event a
//! millisecond instead of one per chunk, and every other event flushes the batch before it
//! goes, so the channel keeps the order things happened in: a request's steps before its
//! `RequestDone`. A ticker (`flush_every`) sends steps that would otherwise wait for the next
//! event when every stream goes quiet at once; it wakes only when a step is held, so a quiet
//! run (one stream, a step every few tens of milliseconds, each sent at once) costs nothing.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crossbeam_channel::{SendError, Sender};
use tokio::sync::Notify;

use crate::event::{DecodeStep, Event, StepBatch};

/// How often the ticker sends steps held while no other event came.
pub const FLUSH_EVERY: Duration = Duration::from_millis(5);

#[derive(Clone)]
pub struct Events {
    tx: Sender<Event>,
    steps: Arc<Mutex<StepBatch>>,
    /// Told when a step is held rather than sent: the ticker's cue.
    held: Arc<Notify>,
}

impl Events {
    pub fn new(tx: Sender<Event>) -> Events {
        Events {
            tx,
            steps: Arc::default(),
            held: Arc::default(),
        }
    }

    /// Sends `event` after the steps held.
    pub fn send(&self, event: Event) -> Result<(), SendError<Event>> {
        let mut steps = self.steps();
        steps.flush(&self.tx);
        self.tx.send(event)
    }

    /// A decode step: held, or sent with those held (`StepBatch::push`).
    pub fn step(&self, step: DecodeStep) {
        let mut steps = self.steps();
        steps.push(step, &self.tx);
        if !steps.is_empty() {
            // One stored permit however many steps wait: the ticker's next round sends them.
            self.held.notify_one();
        }
    }

    /// Sends the steps held, if any.
    pub fn flush(&self) {
        self.steps().flush(&self.tx);
    }

    /// The channel itself, for a sender whose events need no order with the steps (the
    /// event loop's probe).
    pub fn sender(&self) -> Sender<Event> {
        self.tx.clone()
    }

    fn steps(&self) -> MutexGuard<'_, StepBatch> {
        // A task that panicked while holding it left a batch that is still whole.
        self.steps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sends held steps at most `FLUSH_EVERY` after they were held, until dropped (aborted with
/// the run); asleep while none is.
pub async fn flush_every(events: Events) {
    loop {
        events.held.notified().await;
        tokio::time::sleep(FLUSH_EVERY).await;
        events.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: u64, step: u32) -> DecodeStep {
        DecodeStep::new(index, step, 0.001, None)
    }

    /// Steps within a millisecond of the last send wait; the next other event sends them
    /// first, so a request's steps always come before its end.
    #[test]
    fn held_steps_go_out_before_the_next_event() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let events = Events::new(tx);
        events.step(step(0, 1));
        events.step(step(0, 2));
        events.step(step(0, 3));
        events
            .send(Event::PrefillDone {
                index: 1,
                ttft_s: 0.1,
            })
            .ok();
        let got: Vec<Event> = rx.try_iter().collect();
        let steps: Vec<u32> = got
            .iter()
            .flat_map(|e| match e {
                Event::DecodeSteps(s) => s.iter().map(|s| s.step).collect(),
                _ => vec![],
            })
            .collect();
        assert_eq!(steps, [1, 2, 3]);
        // The first step went at once (nothing was sent before).
        assert!(matches!(got.first(), Some(Event::DecodeSteps(s)) if s.len() == 1));
        assert!(matches!(
            got.last(),
            Some(Event::PrefillDone { index: 1, .. })
        ));
    }

    /// Steps held while nothing else comes are sent by the ticker.
    #[tokio::test]
    async fn the_ticker_sends_steps_held_in_a_quiet_spell() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let events = Events::new(tx);
        events.step(step(0, 1));
        events.step(step(0, 2));
        let ticker = tokio::spawn(flush_every(events.clone()));
        tokio::time::sleep(FLUSH_EVERY * 4).await;
        ticker.abort();
        let steps: usize = rx
            .try_iter()
            .map(|e| match e {
                Event::DecodeSteps(s) => s.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(steps, 2);
    }
}
