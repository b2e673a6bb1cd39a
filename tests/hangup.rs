//! The terminal disappearing under a running dashboard (an SSH connection dropping, a tmux server
//! killed): the pty master closes, the kernel hangs up the terminal and sends SIGHUP. infertop
//! must stop the worker, close the record with a footer saying so, and exit — not spin on the
//! dead terminal (crossterm's reader loops forever on a hung-up tty) or panic printing to it.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};

#[test]
fn pulling_the_plug_closes_the_record_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("run.jsonl");
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 80,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("openpty");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_infertop"));
    cmd.args(["-n", "16", "-p", "32", "--record"]);
    cmd.arg(record.as_os_str());
    cmd.env("TERM", "xterm-256color");
    let mut child = pty.slave.spawn_command(cmd).expect("spawn");
    drop(pty.slave);
    // Nobody reads the screen: once the pty buffer fills, the dashboard blocks in write, as it
    // would on a stalled SSH connection. The worker measures on regardless.
    let requests = || {
        std::fs::read_to_string(&record)
            .map(|t| t.matches("\"type\":\"request\"").count())
            .unwrap_or(0)
    };
    let t0 = Instant::now();
    while requests() < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no requests recorded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Pull the plug: close the master side of the terminal.
    drop(pty.master);
    let t1 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if t1.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("infertop kept running for 10 s after its terminal hung up");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        !status.success(),
        "a hang-up is not a clean exit: {status:?}"
    );
    let text = std::fs::read_to_string(&record).expect("record");
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a line")).expect("whole JSON");
    assert_eq!(last["type"], "footer", "the record is closed");
    assert_eq!(last["stop"]["signal"], "SIGHUP");
    assert!(last["summary"]["requests"].as_u64().unwrap_or(0) >= 3);
}
