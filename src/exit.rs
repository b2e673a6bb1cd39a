//! How a command ends: its exit code, and the one-line failure that carries one (README,
//! "Exit codes and errors").

/// Exit codes (README, "Exit codes and errors").
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

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
}
