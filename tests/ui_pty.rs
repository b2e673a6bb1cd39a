//! End to end in a real pseudo-terminal: the binary starts on the synthetic default model,
//! draws the panels, reacts to keys (space shows PAUSED, q quits), exits 0 and leaves the
//! terminal usable (alternate screen left, cursor shown, summary printed on the normal screen).
//! A second test hangs up on it (SIGHUP, as when an SSH connection drops).
//!
//! The screen is read with the `vt100` crate, the terminal emulator in these tests.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, PtySize};

const ROWS: u16 = 24;
const COLS: u16 = 80;

struct Session {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_infertop"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("NO_COLOR");
        let child = pty.slave.spawn_command(cmd).expect("spawn infertop");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("reader");
        let writer = pty.master.take_writer().expect("writer");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        {
            let (screen, raw) = (screen.clone(), raw.clone());
            // The master must stay open while the child runs; the reader ends at EOF.
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

    /// Waits until the screen shows every needle, or fails with what it shows.
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

    fn wait_exit(&mut self, timeout: Duration) -> portable_pty::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader take in the last bytes.
                thread::sleep(Duration::from_millis(300));
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("infertop did not exit; screen:\n{}", self.contents());
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The terminal is as the shell left it: normal screen, cursor visible, and the last
    /// thing the dashboard wrote leaves the alternate screen.
    fn assert_restored(&self) {
        let parser = self.screen.lock().expect("screen");
        assert!(
            !parser.screen().alternate_screen(),
            "still on the alternate screen"
        );
        assert!(!parser.screen().hide_cursor(), "cursor left hidden");
        let raw = self.raw.lock().expect("raw");
        let text = String::from_utf8_lossy(&raw);
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

const PANELS: [&str; 5] = [
    "TTFT per request",
    "TPOT per request",
    "Percentiles",
    "Memory",
    "q quit",
];

#[test]
fn dashboard_runs_pauses_and_quits_cleanly() {
    let mut s = Session::start(&["--warmup", "1", "--output-tokens", "8", "--fps", "20"]);
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
    let mut s = Session::start(&["--output-tokens", "8"]);
    s.wait_for(&PANELS, Duration::from_secs(60));
    let pid = s.child.process_id().expect("pid");
    let killed = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    s.wait_exit(Duration::from_secs(15));
    s.assert_restored();
}
