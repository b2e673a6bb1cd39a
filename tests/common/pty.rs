//! The infertop binary in a real pseudo-terminal (portable-pty), its screen read with the `vt100`
//! terminal emulator: the shared harness of the end-to-end dashboard tests.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, ExitStatus, PtySize};

pub struct Session {
    pub child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    screen: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Session {
    /// Starts `infertop ARGS` in a `cols`×`rows` terminal with `scrollback` lines kept, so
    /// what is printed after the dashboard (the summary) can be read too.
    pub fn start<S: AsRef<OsStr>>(args: &[S], cols: u16, rows: u16, scrollback: usize) -> Session {
        Self::start_with_env(args, &[], cols, rows, scrollback)
    }

    /// As `start`, with these environment variables set for the child.
    pub fn start_with_env<S: AsRef<OsStr>>(
        args: &[S],
        env: &[(&str, &OsStr)],
        cols: u16,
        rows: u16,
        scrollback: usize,
    ) -> Session {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_infertop"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env("RUST_BACKTRACE", "0");
        cmd.env_remove("NO_COLOR");
        for (key, value) in env {
            cmd.env(key, value);
        }
        let child = pty.slave.spawn_command(cmd).expect("spawn infertop");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().expect("reader");
        let writer = pty.master.take_writer().expect("writer");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, scrollback)));
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

    pub fn contents(&self) -> String {
        self.screen.lock().expect("screen").screen().contents()
    }

    /// Everything written to the terminal, as text (escapes included).
    pub fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().expect("raw")).into_owned()
    }

    pub fn on_alternate_screen(&self) -> bool {
        self.screen
            .lock()
            .expect("screen")
            .screen()
            .alternate_screen()
    }

    /// Waits until the screen shows every needle, or fails with what it shows.
    pub fn wait_for(&self, needles: &[&str], timeout: Duration) {
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

    pub fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("write");
        self.writer.flush().expect("flush");
    }

    /// Sends a signal by name (`TERM`, `HUP`, ...) to the child.
    pub fn signal(&mut self, sig: &str) {
        let pid = self.child.process_id().expect("pid");
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid.to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
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

    /// The terminal is as the shell left it: normal screen, cursor visible, and the last thing
    /// the dashboard did with the alternate screen was to leave it.
    pub fn assert_restored(&self) {
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
