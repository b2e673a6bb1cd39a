//! SIGINT, SIGTERM and SIGHUP: noted by a handler, read by the loops that consume events, and
//! turned into a stop reason (what the record's footer says) and an exit code in one place.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::event::StopReason;

/// SIGINT, SIGTERM and SIGHUP, noted by a handler and read by the loops that consume events.
#[derive(Clone, Debug, Default)]
pub struct Signals(Arc<AtomicUsize>);

/// How long a stop waits for the engine to finish before the session ends without it: a
/// signal is answered within a second in every phase (a model still loading, a server that
/// does not answer, a cell starting), the record closed with what was measured.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(800);

/// The process's handlers, once installed: what `pending` reads (a planner reading a dataset
/// of a million rows, a model loading, any phase without a consumer loop of its own).
static INSTALLED: std::sync::OnceLock<Signals> = std::sync::OnceLock::new();

impl Signals {
    /// Installs the handlers (they only store the signal number); a second call gives the
    /// ones installed first.
    pub fn register() -> std::io::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        if let Some(s) = INSTALLED.get() {
            return Ok(s.clone());
        }
        let flag = Arc::new(AtomicUsize::new(0));
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal_hook::flag::register_usize(sig, flag.clone(), sig as usize)?;
        }
        Ok(INSTALLED.get_or_init(|| Signals(flag)).clone())
    }

    /// Signals that never fire (tests, benchmarks); `raise` stands in for a real one.
    pub fn none() -> Signals {
        Signals::default()
    }

    /// Records `sig` as if it had arrived.
    pub fn raise(&self, sig: i32) {
        self.0.store(sig.max(0) as usize, Ordering::SeqCst);
    }

    /// The signal that arrived, if one did.
    pub fn received(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => Some(i32::try_from(n).unwrap_or(i32::MAX)),
        }
    }

    /// The stop reason for the signal that arrived: SIGINT is the user's Ctrl-C.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.received().map(stop_reason_for)
    }

    /// The conventional exit code, 128 + the signal number (130, 143, 129).
    pub fn exit_code(&self) -> Option<i32> {
        self.received().map(|n| 128 + n)
    }
}

/// The signal that arrived, if the handlers are installed and one has: every long phase
/// (a dataset read, a tokenizer counting a million prompts) asks this between pieces of work
/// and gives up at once with `interrupted`.
pub fn pending() -> Option<StopReason> {
    INSTALLED.get().and_then(Signals::stop_reason)
}

/// The exit code of the signal that arrived, if one has.
pub fn pending_exit_code() -> Option<i32> {
    INSTALLED.get().and_then(Signals::exit_code)
}

/// `Err` with the one line saying what a signal stopped, when one has arrived.
pub fn check(what: &str) -> Result<(), String> {
    match INSTALLED.get().and_then(Signals::received) {
        Some(sig) => Err(interrupted_words(sig, what)),
        None => Ok(()),
    }
}

/// `stopped by SIGTERM while reading the dataset`.
fn interrupted_words(sig: i32, what: &str) -> String {
    format!("{} while {what}", stop_reason_for(sig).words())
}

/// The one map from a signal to how the record's footer names the stop.
pub fn stop_reason_for(sig: i32) -> StopReason {
    use signal_hook::consts::SIGINT;
    if sig == SIGINT {
        return StopReason::UserStop;
    }
    let name = signal_hook::low_level::signal_name(sig)
        .map(str::to_string)
        .unwrap_or_else(|| format!("signal {sig}"));
    StopReason::Signal(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_to_one_reason_and_code() {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let cases = [
            (SIGINT, StopReason::UserStop, 130),
            (SIGTERM, StopReason::Signal("SIGTERM".into()), 143),
            (SIGHUP, StopReason::Signal("SIGHUP".into()), 129),
        ];
        for (sig, reason, code) in cases {
            let s = Signals::none();
            assert_eq!(s.stop_reason(), None);
            s.raise(sig);
            assert_eq!(s.stop_reason(), Some(reason));
            assert_eq!(s.exit_code(), Some(code));
            let o = crate::fold::RunFold::new().outcome(StopReason::UserStop);
            assert_eq!(o.exit_code(&s), code);
        }
    }
}
