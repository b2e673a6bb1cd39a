//! End to end in a real pseudo-terminal: the binary starts on the synthetic default model,
//! draws the panels, reacts to keys (space shows PAUSED, q quits), exits 0 and leaves the
//! terminal usable (alternate screen left, cursor shown, summary printed on the normal screen).
//! A second test hangs up on it (SIGHUP, as when an SSH connection drops).
//!
//! The screen is read with the `vt100` crate, the terminal emulator in these tests.
#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::Duration;

mod common;

use common::pty::Session;

const ROWS: u16 = 24;
const COLS: u16 = 80;

fn start(args: &[&str]) -> Session {
    Session::start(args, COLS, ROWS, 0)
}

const PANELS: [&str; 5] = [
    "TTFT per request",
    "TPOT per request",
    "Percentiles",
    "Memory",
    "q quit",
];

#[test]
fn dashboard_runs_pauses_and_quits_cleanly() {
    let mut s = start(&["--warmup", "1", "--output-tokens", "8", "--fps", "20"]);
    s.wait_for(&PANELS, Duration::from_secs(60));
    s.wait_for(&[" RUNNING "], Duration::from_secs(30));
    s.send(" ");
    s.wait_for(&[" PAUSED ", "space resume"], Duration::from_secs(10));
    s.send(" ");
    s.wait_for(&[" RUNNING "], Duration::from_secs(10));
    s.send("?");
    s.wait_for(&["Keys", "this help"], Duration::from_secs(5));
    s.send("\x1b"); // Esc closes the help, it does not quit
    thread::sleep(Duration::from_millis(500));
    assert!(
        s.child.try_wait().expect("try_wait").is_none(),
        "Esc in help quit"
    );
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(15));
    assert!(
        status.success(),
        "exit status {status:?}; screen:\n{}",
        s.contents()
    );
    s.assert_restored();
    // The summary is printed on the normal screen after the dashboard is gone.
    s.wait_for(&["TTFT", "p99"], Duration::from_secs(2));
}

#[test]
fn hangup_restores_the_terminal() {
    let mut s = start(&["--output-tokens", "8"]);
    s.wait_for(&PANELS, Duration::from_secs(60));
    s.signal("HUP");
    s.wait_exit(Duration::from_secs(15));
    s.assert_restored();
}
