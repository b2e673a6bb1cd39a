//! Small helpers every module may use: one-line error text, a seeded generator, a hash, and the
//! number formatters (`format`). A leaf module, like `event`.

pub mod exposition;
pub mod format;
pub mod table;

/// Prints a line to stderr, ignoring failure: stderr may be a terminal that has hung up, and
/// `eprintln!` would panic there before the record is closed.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

use std::path::Path;

/// Rows as CSV text (RFC 4180, as `csv::Writer` writes it): a field with a comma, a quote or a
/// line break is quoted, its quotes doubled. Every CSV infertop prints goes through here.
pub fn csv_text<I, R, F>(rows: I) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = F>,
    F: AsRef<[u8]>,
{
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    for row in rows {
        // Writing into memory cannot fail but for a field the writer refuses; none is.
        let _ = w.write_record(row);
    }
    let bytes = w
        .into_inner()
        .unwrap_or_else(|e| e.into_inner().get_ref().clone());
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A file's name as a row or a title shows it: its last component (the whole path when it has
/// none).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The first line of `s`, trimmed: every error infertop prints is one line.
pub fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// `PATH: not found` / `permission denied` / ...: an I/O error on a file the user named, in
/// one line that names the file.
pub fn io_error(path: &Path, e: &std::io::Error) -> String {
    let what = match e.kind() {
        std::io::ErrorKind::NotFound => "not found".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory; pass a file".to_string(),
        _ => one_line(&e.to_string()),
    };
    format!("{}: {what}", path.display())
}

/// SplitMix64: small, fast, and the same numbers on every machine for a given seed (synthetic
/// weights, prompt ids, length ranges, bootstrap resamples).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn next_signed_unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Uniform integer in [lo, hi] (inclusive).
    pub fn next_in(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Engine threads are named with this prefix; their panics are caught by the engine and
/// reported as one fatal error, so the panic hook keeps quiet about them.
pub const ENGINE_THREAD_PREFIX: &str = "infertop-engine";

thread_local! {
    /// Where an engine thread panicked, noted by the hook for the engine's report.
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Makes panics on engine threads silent: the engine catches them at the thread boundary and
/// reports them as one fatal error (with the location noted here, see `take_panic_location`),
/// so they neither print a multi-line message into a running dashboard nor run ratatui's hook,
/// which restores the terminal on any thread's panic and would leave a still-running dashboard
/// drawing on the normal screen. Panics on other threads go to the hook installed before.
/// Call it after any other hook is installed (the dashboard calls it again after
/// `ratatui::init`); calling it more than once is harmless.
pub fn quiet_engine_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let engine = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with(ENGINE_THREAD_PREFIX));
        if engine {
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()));
            PANIC_AT.with(|p| *p.borrow_mut() = at);
        } else {
            previous(info);
        }
    }));
}

/// Where the calling engine thread last panicked (` at src/file.rs:12`), once.
pub fn take_panic_location() -> Option<String> {
    PANIC_AT.with(|p| p.borrow_mut().take())
}

/// The message of a caught panic payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// FNV-1a 64: per-tensor seeds and the hash of generated outputs.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// A reqwest error as one line, most specific cause first, without the URL (callers name the
/// endpoint themselves, without credentials).
pub fn http_error(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    let e = e.without_url();
    error_line(&e, timeout)
}

/// Any error of a network client as one line: a known I/O cause in plain words (`connection
/// refused`, `connection reset by the server`, `timed out`), else the two innermost causes
/// ("dns error: ...", "invalid peer certificate ..."), which say the most.
pub fn error_line(e: &(dyn std::error::Error + 'static), timeout: bool) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut parts: Vec<String> = Vec::new();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            let known = match io.kind() {
                K::ConnectionRefused => Some("connection refused"),
                K::ConnectionReset => Some("connection reset by the server"),
                K::ConnectionAborted => Some("connection aborted"),
                K::UnexpectedEof => Some("unexpected end of the connection"),
                K::TimedOut => Some("timed out"),
                _ => None,
            };
            if let Some(k) = known {
                return k.to_string();
            }
        }
        let text = one_line(&s.to_string());
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    if timeout {
        parts.insert(0, "timed out".into());
    }
    let n = parts.len();
    parts[n.saturating_sub(2)..].join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_in_range_and_next_in_is_inclusive() {
        let mut r = SplitMix64::new(42);
        for n in [1usize, 2, 3, 10, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        let mut seen = [false; 3];
        for _ in 0..1000 {
            seen[(r.next_in(5, 7) - 5) as usize] = true;
        }
        assert_eq!(seen, [true; 3]);
    }

    #[test]
    fn fnv1a_of_known_input() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn one_line_keeps_the_first_line() {
        assert_eq!(one_line("  a  \nb"), "a");
        assert_eq!(one_line(""), "");
    }
}
