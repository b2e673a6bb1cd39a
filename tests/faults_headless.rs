//! Faults in headless runs, on a real child process: SIGTERM and SIGHUP in the middle of a
//! request, kill -9, and a worker that fails or panics (the hidden `--fault` flag). What was
//! measured is kept: the record holds every finished request (and nothing of the one cut
//! short), then a footer saying how the run ended; the summary is printed.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;
use serde_json::Value;

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary")
}

/// A headless child whose stdout lines arrive on a channel as they are written.
struct Run {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Run {
    fn start(args: &[&str], record: &Path) -> Run {
        let mut child = infertop()
            .args(["--headless", "--format", "json", "--no-telemetry"])
            .args(args)
            .arg("--record")
            .arg(record)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn infertop");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Run {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads stdout until `done` holds for the lines so far.
    fn wait_until(&mut self, what: &str, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!(
                    "timed out waiting for {what}; stdout so far: {:?}",
                    self.seen
                ),
            }
        }
    }

    /// Waits until at least `n` requests are done and the next one is decoding.
    fn wait_mid_request(&mut self, n: usize) {
        self.wait_until("a request in progress", |lines| {
            let requests = lines.iter().filter(|l| is_type(l, "request")).count();
            requests >= n && lines.last().is_some_and(|l| is_type(l, "step"))
        });
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
    }

    /// The exit code, every stdout line, and stderr.
    fn finish(mut self) -> (Option<i32>, Vec<String>, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            assert!(Instant::now() < deadline, "infertop did not exit");
            thread::sleep(Duration::from_millis(20));
        };
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        (status.code(), std::mem::take(&mut self.seen), err)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is_type(line: &str, ty: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| v["type"] == ty)
}

fn parse_all(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn record_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("record")
        .lines()
        .map(str::to_string)
        .collect()
}

/// The indices of the request lines, which must be 0, 1, 2, ... (none lost, none partial).
fn request_indices(values: &[Value]) -> Vec<u64> {
    let idx: Vec<u64> = values
        .iter()
        .filter(|v| v["type"] == "request")
        .map(|v| v["index"].as_u64().expect("index"))
        .collect();
    assert_eq!(idx, (0..idx.len() as u64).collect::<Vec<_>>());
    idx
}

/// A signal mid-request: exit code, summary on stdout, record complete up to the last finished
/// request, footer naming the signal.
fn signal_mid_request(sig: &str, code: i32) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let mut run = Run::start(&["-n", "64", "-p", "32", "--jsonl-steps"], &rec);
    run.wait_mid_request(3);
    run.signal(sig);
    let (status, stdout, err) = run.finish();
    assert_eq!(status, Some(code), "{sig}: stderr {err}");
    assert!(!err.contains("panicked"), "{err}");

    let out = parse_all(&stdout);
    let summary = out.last().expect("stdout");
    assert_eq!(summary["type"], "summary", "the summary is the last line");
    let printed = request_indices(&out);
    assert!(printed.len() >= 3);

    let values = parse_all(&record_lines(&rec));
    assert_eq!(values[0]["type"], "header");
    let recorded = request_indices(&values);
    assert_eq!(recorded, printed, "the record has every finished request");
    // The request cut short has no request line (its decode steps, measured, may have step lines).
    let footer = values.last().expect("footer");
    assert_eq!(footer["type"], "footer");
    assert_eq!(
        footer["stop"],
        serde_json::json!({ "signal": sig_name(sig) })
    );
    assert_eq!(
        footer["summary"]["warmup"]["ttft_s"]["n"]
            .as_u64()
            .unwrap_or(0)
            + footer["summary"]["metrics"]["ttft_s"]["n"]
                .as_u64()
                .unwrap_or(0),
        printed.len() as u64,
        "the footer's summary covers the finished requests: {footer}"
    );
}

fn sig_name(sig: &str) -> String {
    format!("SIG{sig}")
}

#[test]
fn sigterm_mid_request_keeps_the_record_and_exits_143() {
    signal_mid_request("TERM", 143);
}

#[test]
fn sighup_mid_request_keeps_the_record_and_exits_129() {
    signal_mid_request("HUP", 129);
}

#[test]
fn kill_9_leaves_whole_json_lines_that_report_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let mut run = Run::start(&["-n", "48", "-p", "16", "--jsonl-steps"], &rec);
    run.wait_mid_request(4);
    run.signal("KILL");
    let (status, _, _) = run.finish();
    assert_eq!(status, None, "killed by a signal");

    let lines = record_lines(&rec);
    let (last, whole) = lines.split_last().expect("lines");
    let mut values = parse_all(whole);
    assert_eq!(values[0]["type"], "header");
    // The last line may be cut; if it is whole it is not a footer (there was no time to write one).
    if let Ok(v) = serde_json::from_str::<Value>(last) {
        assert_ne!(v["type"], "footer", "no footer after kill -9");
        values.push(v);
    }
    // Request lines are flushed one by one: at least the four that stdout showed.
    assert!(request_indices(&values).len() >= 4);

    let report = |path: &Path| {
        infertop()
            .args(["report", "--no-probe", "--format", "json"])
            .arg(path)
            .output()
            .expect("report")
    };
    let out = report(&rec);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And when the kill fell in the middle of a line (cut one here by hand).
    let mut text = std::fs::read_to_string(&rec).expect("record");
    text.push_str(r#"{"type":"step","index":4,"st"#);
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, text).expect("write");
    let out = report(&cut);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A worker fault: exit 1, one error line, the summary of the requests before it, and the
/// record with those requests, the error event and a footer.
fn worker_fault(fault: &str, message: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("run.jsonl");
    let run = Run::start(
        &[
            "-n",
            "8",
            "-p",
            "16",
            "--warmup",
            "1",
            "--requests",
            "10",
            "--fault",
            fault,
        ],
        &rec,
    );
    let (status, stdout, err) = run.finish();
    assert_eq!(status, Some(1), "{fault}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("infertop: error: ") && err.contains(message),
        "{err}"
    );

    let out = parse_all(&stdout);
    assert_eq!(request_indices(&out), vec![0, 1, 2]);
    let summary = out.last().expect("summary");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["metrics"]["ttft_s"]["n"], 2, "{summary}");

    let values = parse_all(&record_lines(&rec));
    assert_eq!(request_indices(&values), vec![0, 1, 2]);
    let error = values
        .iter()
        .find(|v| v["event"] == "error")
        .expect("an error event");
    assert_eq!(error["detail"]["fatal"], true);
    assert!(error["detail"]["message"]
        .as_str()
        .is_some_and(|m| m.contains(message)));
    let footer = values.last().expect("footer");
    assert_eq!(footer["type"], "footer");
    assert_eq!(footer["stop"], "error");
}

#[test]
fn a_worker_error_is_reported_and_ends_the_run_with_exit_1() {
    worker_fault(
        "error@3",
        "request 3 (batch 1 × prompt 16 + output 8) failed: injected fault (--fault error@3)",
    );
}

#[test]
fn a_worker_panic_is_caught_reported_in_one_line_and_ends_the_run_with_exit_1() {
    worker_fault(
        "panic@3",
        "worker panicked: injected fault (--fault panic@3) at src/engine/worker.rs:",
    );
}

#[test]
fn a_bad_fault_spec_is_a_usage_error() {
    let out = infertop()
        .args(["--headless", "--fault", "boom"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "infertop: error: --fault: `boom` is not panic@N, error@N or ui-panic@N\n"
    );
}
