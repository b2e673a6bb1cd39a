//! The two system calls the dashboard makes itself: waiting on stdin with poll(2), because
//! crossterm spins forever on a hung-up terminal, and lowering the UI thread's priority.
// Both are plain libc calls on this thread with no memory shared beyond one local struct.
#![allow(unsafe_code)]

use std::time::Duration;

/// The nice value the dashboard thread gives itself by default (Linux; 0 = unchanged). On the
/// 2-core machine this was measured on, a lowered UI (nice 10) showed no better TPOT ratio
/// than an unchanged one (both within the noise, about ±3%; BENCHMARKS.md), so the default
/// leaves it alone. `INFERTOP_UI_NICE=N` (1-19) lowers it, e.g. on a machine that is busy
/// with other work, so that drawing never preempts candle's threads mid-step.
pub const UI_NICE: i32 = 0;

/// Lowers the calling thread's scheduling priority to `UI_NICE` (or `INFERTOP_UI_NICE`).
/// Per thread on Linux: the worker, the telemetry thread and candle's pool keep theirs (they
/// are started before, or from, other threads). Elsewhere `setpriority` would renice the
/// whole process, so it is not called. Failure is harmless and ignored.
pub(super) fn lower_ui_priority() {
    #[cfg(target_os = "linux")]
    {
        let nice = std::env::var("INFERTOP_UI_NICE")
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .unwrap_or(UI_NICE)
            .clamp(0, 19);
        if nice > 0 {
            // SAFETY: plain syscalls on this thread's id; no memory is passed.
            unsafe {
                let tid = libc::gettid();
                libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
            }
        }
    }
}

/// Waits up to `timeout` for input on stdin; true if the terminal has hung up. A signal
/// (SIGWINCH, SIGHUP, ...) ends the wait early without error.
pub(super) fn stdin_hung_up(timeout: Duration) -> std::io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // Rounded up: a wait truncated to whole milliseconds returns at once for the last
    // fraction of one, and the screen loop then spun on `poll(0)` until its frame was due.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0)
}
