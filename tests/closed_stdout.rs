//! Every subcommand survives a reader that has gone away (`infertop report RUN.jsonl | head -1`):
//! exit 0, no panic. Standard output is a pipe whose read end is closed before the process
//! starts, so its first write fails with EPIPE (Rust ignores SIGPIPE), deterministically.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;

/// Runs infertop with `args` writing into a pipe nobody reads; returns (exit code, stderr).
fn with_closed_stdout(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::cargo_bin("infertop")
        .unwrap()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_subcommand_exits_0_when_its_reader_has_gone() {
    let dir = tempfile::tempdir().unwrap();
    // Two records to report on and compare, made with an ordinary (read) stdout.
    for name in ["a.jsonl", "b.jsonl"] {
        let status = Command::cargo_bin("infertop")
            .unwrap()
            .args(["--headless", "--requests", "3", "-p", "8", "-n", "4"])
            .args(["--no-telemetry", "--record", name])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "making {name}");
    }
    let cases: &[&[&str]] = &[
        &["presets"],
        &["devices"],
        &["devices", "--format", "json"],
        &["report", "a.jsonl", "--no-probe"],
        &["report", "a.jsonl", "--no-probe", "--format", "json"],
        &["compare", "a.jsonl", "b.jsonl"],
        &["--help"],
        &["--headless", "--requests", "2", "-p", "8", "-n", "4"],
        &[
            "--headless",
            "--requests",
            "2",
            "-p",
            "8",
            "-n",
            "4",
            "--jsonl-steps",
            "--format",
            "csv",
        ],
    ];
    for args in cases {
        let (code, stderr) = with_closed_stdout(args, dir.path());
        assert_eq!(code, Some(0), "{args:?}: exit {code:?}, stderr:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
