//! Faults while the dashboard runs, in a real pseudo-terminal (read with `vt100`): SIGTERM,
//! a worker that fails or panics (the hidden `--fault` flag), and a panic in the dashboard
//! itself. Every path leaves the terminal as the shell had it and keeps the record.
//!
//! Decided behaviour for a worker failure: the dashboard stays up in the ERROR state with the
//! message (a user watching should see what happened, not a vanished screen); `q` quits with
//! exit code 1, after the summary and the error line are printed on the normal screen.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, PtySize};
use serde_json::Value;

const ROWS: u16 = 24;
const COLS: u16 = 100;

struct Session {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Session {
    fn start(args: &[&str], record: &Path) -> Session {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_infertop"));
        cmd.args(["--no-telemetry", "--output-tokens", "16", "--fps", "20"]);
        cmd.args(args);
        cmd.arg("--record");
        cmd.arg(record);
        cmd.env("TERM", "xterm-256color");
        cmd.env("RUST_BACKTRACE", "0");
        let child = pty.slave.spawn_command(cmd).expect("spawn infertop");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("reader");
        let writer = pty.master.take_writer().expect("writer");
        // Scrollback, so lines printed after the dashboard are not lost off the top.
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 200)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        {
            let (screen, raw) = (screen.clone(), raw.clone());
            let master = pty.master;
            thread::spawn(move || {
                let _keep = master;
                let mut buf = [0u8; 8192];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    screen.lock().expect("screen").process(&buf[..n]);
                    raw.lock().expect("raw").extend_from_slice(&buf[..n]);
                }
            });
        }
        Session {
            child,
            writer,
            screen,
            raw,
        }
    }

    fn contents(&self) -> String {
        self.screen.lock().expect("screen").screen().contents()
    }

    /// Everything written to the terminal, as text (escapes included).
    fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().expect("raw")).into_owned()
    }

    fn on_alternate_screen(&self) -> bool {
        self.screen
            .lock()
            .expect("screen")
            .screen()
            .alternate_screen()
    }

    fn wait_for(&self, needles: &[&str], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.contents();
            if needles.iter().all(|n| text.contains(n)) {
                return;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {needles:?}; screen:\n{text}");
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("write");
        self.writer.flush().expect("flush");
    }

    fn signal(&mut self, sig: &str) {
        let pid = self.child.process_id().expect("pid");
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid.to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
    }

    fn wait_exit(&mut self, timeout: Duration) -> u32 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                thread::sleep(Duration::from_millis(300));
                return status.exit_code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("infertop did not exit; screen:\n{}", self.contents());
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Normal screen, cursor shown, and the alternate screen left after it was last entered.
    fn assert_restored(&self) {
        let parser = self.screen.lock().expect("screen");
        assert!(
            !parser.screen().alternate_screen(),
            "still on the alternate screen"
        );
        assert!(!parser.screen().hide_cursor(), "cursor left hidden");
        drop(parser);
        let text = self.raw_text();
        let enter = text
            .rfind("\x1b[?1049h")
            .expect("entered the alternate screen");
        let leave = text
            .rfind("\x1b[?1049l")
            .expect("left the alternate screen");
        assert!(
            leave > enter,
            "alternate screen entered again after leaving it"
        );
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
    }
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
    let mut s = Session::start(&["--warmup", "1"], &rec);
    s.wait_for(&[" RUNNING "], Duration::from_secs(60));
    s.signal("TERM");
    assert_eq!(s.wait_exit(Duration::from_secs(15)), 143);
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
    let mut s = Session::start(&["--warmup", "1", "--fault", fault], &rec);
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
    assert_eq!(s.wait_exit(Duration::from_secs(15)), 1);
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
    let mut s = Session::start(&["--warmup", "1", "--fault", "ui-panic@2"], &rec);
    // Nobody presses a key: the process must end by itself (the worker does not keep it alive).
    assert_eq!(s.wait_exit(Duration::from_secs(60)), 1);
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
}
