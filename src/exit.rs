//! How a command ends: its exit code, and the one-line failure that carries one (README,
//! "Exit codes and errors").

/// Exit codes (README, "Exit codes and errors").
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
/// Generated outputs differ: between two runs (`compare`), or alone and under load
/// (`--determinism`).
pub const EXIT_OUTPUTS_DIFFER: i32 = 3;

/// A failure with its exit code; the message is one line.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    /// A mistake in the flags or files: exit 2, before anything has run.
    pub fn usage(m: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: m.into(),
        }
    }

    /// Something that failed while running: exit 1.
    pub fn runtime(m: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILURE,
            message: m.into(),
        }
    }

    /// `usage`, unless a signal is why it failed (a phase that gave up when one arrived): then
    /// the signal's exit code (130, 143, 129), and `interrupted` says so.
    pub fn usage_or_signal(m: impl Into<String>) -> Self {
        match crate::signals::pending_exit_code() {
            Some(code) => Self {
                code,
                message: m.into(),
            },
            None => Self::usage(m),
        }
    }

    /// Whether a signal ended it (its exit code is a signal's).
    pub fn interrupted(&self) -> bool {
        self.code > 128
    }
}
