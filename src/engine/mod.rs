//! The engines: each runs requests on its own thread and speaks the protocol in `event`.
//! `worker` is the candle engine (workload, timed regions, CUDA-event timer); `http` is the
//! client of OpenAI-compatible servers. Both send the run's `traffic::TrafficPlan`, read their
//! controls through `control::Inbox`, and start through `spawn_engine`.

pub mod control;
pub mod http;
pub mod spans;
pub mod timer;
pub mod worker;
pub mod workload;

use std::thread::JoinHandle;

use crossbeam_channel::Sender;

use crate::event::{Event, StopReason};
use crate::util::one_line;

/// Starts an engine's `body` on a thread named `name` (with the `infertop-engine` prefix, so
/// its panics stay quiet; see `util::quiet_engine_panics`). Whatever happens, the last event
/// is `Finished`: an `Err` from the body is a fatal `Event::Error` first, and so is a panic
/// (caught here, with where it happened), described as `what panicked`.
pub fn spawn_engine(
    name: &str,
    what: &'static str,
    events: Sender<Event>,
    body: impl FnOnce(&Sender<Event>) -> Result<StopReason, String> + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(crate::util::quiet_engine_panics);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&events)));
            let reason = match result {
                Ok(Ok(reason)) => reason,
                Ok(Err(message)) => {
                    let _ = events.send(Event::Error {
                        message,
                        fatal: true,
                    });
                    StopReason::Error
                }
                Err(panic) => {
                    let message = crate::util::panic_message(panic.as_ref());
                    let at = crate::util::take_panic_location().unwrap_or_default();
                    let _ = events.send(Event::Error {
                        message: format!("{what} panicked: {}{at}", one_line(&message)),
                        fatal: true,
                    });
                    StopReason::Error
                }
            };
            let _ = events.send(Event::Finished(reason));
        })
}
