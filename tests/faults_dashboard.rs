//! Faults while the dashboard runs, in a real pseudo-terminal (read with `vt100`): SIGTERM,
//! a worker that fails or panics (the hidden `--fault` flag), and a panic in the dashboard
//! itself. Every path leaves the terminal as the shell had it and keeps the record.
//!
//! Decided behaviour for a worker failure: the dashboard stays up in the ERROR state with the
//! message (a user watching should see what happened, not a vanished screen); `q` quits with
//! exit code 1, after the summary and the error line are printed on the normal screen.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::thread;
use std::time::Duration;

use serde_json::Value;

mod common;

use common::pty::Session;

const ROWS: u16 = 24;
const COLS: u16 = 100;

/// The dashboard with a record, small and fast requests, and scrollback for the summary.
fn start(args: &[&str], record: &Path) -> Session {
    let mut all: Vec<&std::ffi::OsStr> = ["--no-telemetry", "--output-tokens", "16", "--fps", "20"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    all.extend(args.iter().map(std::ffi::OsStr::new));
    all.push(std::ffi::OsStr::new("--record"));
    all.push(record.as_os_str());
    Session::start(&all, COLS, ROWS, 200)
}

fn record(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("record")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn requests(values: &[Value]) -> usize {
    let idx: Vec<u64> = values
        .iter()
        .filter(|v| v["type"] == "request")
        .map(|v| v["index"].as_u64().expect("index"))
        .collect();
    assert_eq!(idx, (0..idx.len() as u64).collect::<Vec<_>>());
    idx.len()
}

#[test]
fn sigterm_restores_the_terminal_keeps_the_record_and_exits_143() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let mut s = start(&["--warmup", "1"], &rec);
    s.wait_for(&[" RUNNING "], Duration::from_secs(60));
    s.signal("TERM");
    assert_eq!(s.wait_exit(Duration::from_secs(15)).exit_code(), 143);
    s.assert_restored();
    // The summary is printed on the normal screen.
    s.wait_for(&["TTFT", "p99"], Duration::from_secs(2));
    let values = record(&rec);
    assert!(requests(&values) >= 1);
    let footer = values.last().expect("footer");
    assert_eq!(footer["type"], "footer");
    assert_eq!(footer["stop"], serde_json::json!({"signal": "SIGTERM"}));
}

/// A worker fault: ERROR shown with the message while the dashboard stays up (and the terminal
/// still in its hands), then `q` exits 1 with the terminal restored and the error printed.
fn worker_fault_in_dashboard(fault: &str, shown: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let mut s = start(&["--warmup", "1", "--fault", fault], &rec);
    s.wait_for(&[" ERROR ", shown], Duration::from_secs(60));
    // The worker is gone, the dashboard is not: still drawing on the alternate screen, no
    // panic message splashed over it, still taking keys.
    thread::sleep(Duration::from_millis(500));
    assert!(
        s.child.try_wait().expect("try_wait").is_none(),
        "exited on its own"
    );
    assert!(
        s.on_alternate_screen(),
        "the terminal was restored under a running dashboard"
    );
    assert!(
        !s.raw_text().contains("panicked at"),
        "a panic message was printed"
    );
    s.send("q");
    assert_eq!(s.wait_exit(Duration::from_secs(15)).exit_code(), 1);
    s.assert_restored();
    s.wait_for(&["infertop: error: ", "TTFT"], Duration::from_secs(2));
    let values = record(&rec);
    assert_eq!(requests(&values), 2);
    let footer = values.last().expect("footer");
    assert_eq!(footer["stop"], "error");
}

#[test]
fn a_worker_error_shows_error_and_q_exits_1() {
    worker_fault_in_dashboard("error@2", "injected fault");
}

#[test]
fn a_worker_panic_shows_error_without_tearing_down_the_terminal() {
    worker_fault_in_dashboard("panic@2", "worker panicked");
}

#[test]
fn a_dashboard_panic_restores_the_terminal_stops_the_worker_and_keeps_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let mut s = start(&["--warmup", "1", "--fault", "ui-panic@2"], &rec);
    // Nobody presses a key: the process must end by itself (the worker does not keep it alive).
    assert_eq!(s.wait_exit(Duration::from_secs(60)).exit_code(), 1);
    s.assert_restored();
    s.wait_for(
        &["panicked", "infertop: error: the dashboard panicked"],
        Duration::from_secs(2),
    );
    let values = record(&rec);
    assert!(
        requests(&values) >= 3,
        "request 2 finished before the panic"
    );
    let footer = values.last().expect("footer");
    assert_eq!(footer["type"], "footer");
    assert_eq!(footer["stop"], "error");
    // The footer's summary is the fold up to the panic, not an empty run: `on_event` runs
    // after the app has folded an event, so requests 0 (warmup), 1 and 2 are in it, and the
    // steady TTFTs are those of 1 and 2.
    let summary = &footer["summary"];
    assert_eq!(summary["requests"], 3, "{summary}");
    assert_eq!(summary["warmup_requests"], 1, "{summary}");
    assert_eq!(summary["metrics"]["ttft_s"]["n"], 2, "{summary}");
}
