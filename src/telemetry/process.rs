//! Process memory: resident set size and its peak, from `/proc/self/status` (Linux only).
//!
//! Read into a stack buffer so that sampling allocates nothing: the counting allocator would
//! otherwise see the sampler's own reads as the worker's memory.

use std::io::Read;

/// Resident set size and its high-water mark, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessMemory {
    /// `VmRSS`: resident now.
    pub rss_bytes: Option<u64>,
    /// `VmHWM`: the most that has been resident since the process started.
    pub rss_peak_bytes: Option<u64>,
}

/// `/proc/self/status` is about 1.5 KiB; this leaves room for kernels that add fields.
const STATUS_BUF: usize = 8192;

/// Reads RSS and peak RSS of this process. Both `None` where `/proc` is not there (not Linux)
/// or a field is missing.
pub fn read() -> ProcessMemory {
    let mut buf = [0u8; STATUS_BUF];
    match read_status(&mut buf) {
        Some(len) => parse_status(&buf[..len]),
        None => ProcessMemory::default(),
    }
}

fn read_status(buf: &mut [u8]) -> Option<usize> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    // A short path: std builds the C string on the stack, so `open` does not allocate either.
    let mut file = std::fs::File::open("/proc/self/status").ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    Some(len)
}

/// Parses the `VmRSS:` and `VmHWM:` lines (`"VmRSS:\t  123456 kB"`) of a status file.
pub fn parse_status(status: &[u8]) -> ProcessMemory {
    let mut out = ProcessMemory::default();
    for line in status.split(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"VmRSS:") {
            out.rss_bytes = parse_kib(rest);
        } else if let Some(rest) = line.strip_prefix(b"VmHWM:") {
            out.rss_peak_bytes = parse_kib(rest);
        }
    }
    out
}

/// `"\t  123456 kB"` → 123456 × 1024. The kernel's "kB" is KiB.
fn parse_kib(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let mut parts = text.split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

/// The CPU's model name (`/proc/cpuinfo`), or empty where the OS does not say.
pub fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rss_and_hwm_in_kib() {
        let status =
            b"Name:\tinfertop\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1536 kB\n";
        let mem = parse_status(status);
        assert_eq!(mem.rss_bytes, Some(1536 * 1024));
        assert_eq!(mem.rss_peak_bytes, Some(2048 * 1024));
    }

    #[test]
    fn missing_or_malformed_fields_are_none() {
        assert_eq!(parse_status(b"Name:\tx\n"), ProcessMemory::default());
        let mem = parse_status(b"VmRSS:\tlots kB\nVmHWM:\t12 MB\n");
        assert_eq!(mem, ProcessMemory::default());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let mem = read();
        let rss = mem.rss_bytes.expect("VmRSS on Linux");
        let peak = mem.rss_peak_bytes.expect("VmHWM on Linux");
        assert!(rss > 0);
        assert!(peak >= rss);
    }
}
