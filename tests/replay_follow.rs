//! `infertop replay` and `infertop follow` end to end, on records written by real headless runs
//! of the synthetic tiny model (and a few written by hand): the replayed dashboard's numbers
//! are the run's own (the summary it printed, `report`'s table), a followed record's n grows
//! as it is written, two runs merged give the union's numpy percentiles (in `follow` and in
//! `report`), a dying source is marked while the others go on, and bad input is one line.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

use common::pty::Session;
use infertop::event::{ModelInfo, RequestDone, StopReason, WorkloadDesc};
use infertop::record::feed::Speed;
use infertop::record::line::{EventLine, Footer, Header, Line, RequestLine, RunEvent};
use infertop::ui::feed::FeedScreen;
use infertop::ui::state::Producer;
use infertop::ui::App;

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary is built")
}

fn bin() -> String {
    env!("CARGO_BIN_EXE_infertop").to_string()
}

/// A real headless run, recorded; returns the summary it printed (its last JSON line).
fn record_run(path: &Path, extra: &[&str]) -> Value {
    let out = infertop()
        .args([
            "--headless",
            "--requests",
            "12",
            "-n",
            "8",
            "-p",
            "16",
            "--warmup",
            "2",
            "--format",
            "json",
            "--record",
        ])
        .arg(path)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    last_json(&out.stdout)
}

fn last_json(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("no output: {text}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// What a summary says, without what only a live run knows (none: every key compared).
const SUMMARY_KEYS: [&str; 6] = [
    "requests",
    "warmup_requests",
    "metrics",
    "warmup",
    "resources",
    "failed_requests",
];

/// Plays `path` through the real player into the dashboard's state, as fast as it reads.
fn replay_into_screen(path: &Path) -> FeedScreen {
    let (tx, rx) = crossbeam_channel::bounded(1024);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded();
    let handle =
        infertop::session::replay::spawn_player(path, Speed::Max, false, tx, ctl_rx).unwrap();
    let mut screen = FeedScreen::new(
        App::default(),
        Producer::Replay,
        vec!["r".into()],
        Some(ctl_tx),
    );
    for ev in rx.iter() {
        screen.apply(&ev);
    }
    handle.join().unwrap();
    screen.refresh();
    screen
}

#[test]
fn replay_reproduces_the_summary_the_run_printed() {
    let dir = tempfile::tempdir().unwrap();
    // With step lines (ITL recomputed from them) and without (ITL the footer's, as report).
    for (name, extra) in [
        ("steps.jsonl", &["--jsonl-steps"][..]),
        ("plain.jsonl", &[][..]),
    ] {
        let path = dir.path().join(name);
        let printed = record_run(&path, extra);
        let out = infertop()
            .args(["replay", "--headless", "--format", "json"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let replayed = last_json(&out.stdout);
        for key in SUMMARY_KEYS {
            assert_eq!(replayed[key], printed[key], "{name}: {key}");
        }
        assert!(printed["metrics"]["ttft_s"]["n"].as_u64().unwrap() == 10);
    }
}

#[test]
fn the_replayed_dashboards_table_is_reports() {
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("steps.jsonl", &["--jsonl-steps"][..]),
        ("plain.jsonl", &[][..]),
    ] {
        let path = dir.path().join(name);
        record_run(&path, extra);
        let screen = replay_into_screen(&path);
        let report = infertop::record::reader::summary_of(&path).unwrap();
        // The table the dashboard draws at the end, exactly (every f64 bit).
        assert_eq!(screen.app.views.table, report.steady, "{name}");
        assert_eq!(screen.summary(), report, "{name}");
        assert!(
            !screen.app.run.live(),
            "{name}: the replay reached the footer"
        );
        assert_eq!(screen.position.as_ref().map(|p| p.done), Some(true));
    }
}

/// A record written by hand, a line at a time, as a run writes it.
struct Writer {
    file: std::fs::File,
    index: u64,
    t_s: f64,
}

impl Writer {
    fn create(path: &Path) -> Writer {
        let mut w = Writer {
            file: std::fs::File::create(path).unwrap(),
            index: 0,
            t_s: 0.0,
        };
        w.line(&Line::Header(Box::new(Header {
            infertop_version: "0.1.0".into(),
            record_format: infertop::record::line::RECORD_FORMAT,
            ..Header::default()
        })));
        w.line(&Line::Event(EventLine {
            t_s: 0.1,
            event: RunEvent::RunStarted {
                model: ModelInfo::served("hand-written", "http://127.0.0.1:9"),
                workload: WorkloadDesc {
                    prompt_tokens: "16".into(),
                    output_tokens: "8".into(),
                    batch: 1,
                    load: None,
                },
                traffic: None,
                peak: None,
            },
        }));
        w
    }

    fn line(&mut self, line: &Line) {
        writeln!(self.file, "{}", line.to_json()).unwrap();
        self.file.flush().unwrap();
    }

    fn requests(&mut self, ttfts: &[f64]) {
        for &ttft in ttfts {
            self.t_s += 0.05;
            let r = RequestDone {
                index: self.index,
                warmup: false,
                batch: 1,
                prompt_tokens: 16,
                output_tokens: 8,
                ttft_s: ttft,
                tpot_s: Some(0.002),
                e2e_s: ttft + 0.014,
                gpu_ttft_s: None,
                gpu_decode_s: None,
                itl_max_s: None,
                peak_alloc_bytes: None,
                output_hash: "0000000000000000".into(),
                ..Default::default()
            };
            self.index += 1;
            let t = self.t_s;
            self.line(&Line::Request(RequestLine::of(&r, Some(t))));
        }
    }

    fn footer(&mut self) {
        self.line(&Line::Footer(Footer {
            stop: StopReason::RequestLimit,
            elapsed_s: self.t_s + 0.1,
            summary: serde_json::json!({}),
        }));
    }
}

#[test]
fn follow_of_a_growing_record_shows_its_n_grow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("growing.jsonl");
    let mut w = Writer::create(&path);
    w.requests(&[0.010, 0.011, 0.012]);
    let mut s = Session::start(
        &["follow", path.to_str().unwrap(), "--fps", "20"],
        80,
        24,
        200,
    );
    s.wait_for(
        &["following growing.jsonl", "3 requests"],
        Duration::from_secs(30),
    );
    w.requests(&[0.013, 0.014, 0.015, 0.016]);
    s.wait_for(&["7 requests"], Duration::from_secs(10));
    // Nothing here controls the run: a load key and pause get a line, not a change.
    s.send("+");
    s.wait_for(&["following a run that another"], Duration::from_secs(5));
    w.requests(&[0.017]);
    w.footer();
    s.wait_for(&["STOPPED", "8 requests", "ended"], Duration::from_secs(10));
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    s.assert_restored();
}

/// numpy's default percentile (linear interpolation between closest ranks), written out
/// here apart from the crate's own.
fn numpy_percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The steady TTFTs a record holds (its request lines not marked warmup).
fn steady_ttfts(path: &Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "request" && v["warmup"] == false)
        .map(|v| v["ttft_s"].as_f64().unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-9)
}

#[test]
fn two_runs_piped_into_one_follow_and_their_report_give_the_unions_percentiles() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    let agent = |name: &str, rec: &PathBuf, n: &str, seed: &str| {
        format!(
            "{name}={} --jsonl --jsonl-steps --no-telemetry --requests {n} -n 6 -p 16 --warmup 1 --seed {seed} --record {}",
            bin(),
            rec.display()
        )
    };
    let out = infertop()
        .args(["follow", "--headless", "--format", "json"])
        .args(["--agent", &agent("gpu1", &a, "9", "1")])
        .args(["--agent", &agent("gpu2", &b, "14", "2")])
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let followed = last_json(&out.stdout);
    let out = infertop()
        .args(["report", "--format", "json", "--no-probe"])
        .args([&a, &b])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reported = last_json(&out.stdout);

    let mut union = steady_ttfts(&a);
    union.extend(steady_ttfts(&b));
    union.sort_by(f64::total_cmp);
    assert_eq!(union.len(), 8 + 13);
    for doc in [&followed, &reported] {
        let ttft = &doc["metrics"]["ttft_s"];
        assert_eq!(ttft["n"].as_u64(), Some(21), "{doc}");
        for (key, q) in [("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0)] {
            let got = ttft[key].as_f64().unwrap();
            let want = numpy_percentile(&union, q);
            assert!(close(got, want), "{key}: {got} vs numpy {want}");
        }
        assert_eq!(ttft["max"].as_f64(), union.last().copied());
        assert_eq!(doc["requests"].as_u64(), Some(23));
    }
    // The live view and the report of the records are the same numbers (means to rounding).
    for m in ["ttft_s", "tpot_s", "itl_s", "e2e_s"] {
        for key in ["p50", "p90", "p95", "p99", "max", "n"] {
            assert_eq!(
                followed["metrics"][m][key], reported["metrics"][m][key],
                "{m} {key}"
            );
        }
        let (x, y) = (
            followed["metrics"][m]["mean"].as_f64().unwrap(),
            reported["metrics"][m]["mean"].as_f64().unwrap(),
        );
        assert!(close(x, y), "{m} mean {x} vs {y}");
    }
    // A row per record in the report.
    let sources = reported["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2);
    assert_eq!(sources[1]["summary"]["requests"].as_u64(), Some(14));
}

#[test]
fn a_run_streamed_into_follow_dash_is_folded_as_it_printed() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("s.jsonl");
    let mut run = std::process::Command::new(bin())
        .args([
            "--jsonl",
            "--jsonl-steps",
            "--requests",
            "6",
            "-n",
            "6",
            "-p",
            "16",
        ])
        .arg("--record")
        .arg(&rec)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = std::process::Command::new(bin())
        .args(["follow", "-", "--headless", "--format", "json"])
        .stdin(run.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(run.wait().unwrap().success());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let followed = last_json(&out.stdout);
    // The stream is the record: header first, footer last, the same lines as the file.
    let footer: Value = serde_json::from_str(
        std::fs::read_to_string(&rec)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    for key in SUMMARY_KEYS {
        assert_eq!(followed[key], footer["summary"][key], "{key}");
    }
}

#[test]
fn a_dying_source_is_marked_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.jsonl");
    let mut w = Writer::create(&whole);
    w.requests(&[0.010, 0.020, 0.030]);
    w.footer();
    // The header, run_started and one request: then the stream stops, without a footer.
    let cut = format!("cut=head -n 3 {}; exit 7", whole.display());
    let out = infertop()
        .args(["follow", "--headless"])
        .arg(&whole)
        .args(["--agent", &cut])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("4 requests"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| cut |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        row.contains("died: the stream ended without a footer (the agent exited with status 7"),
        "{row}"
    );
    assert!(md.contains("| whole.jsonl | ended | 3 |"), "{md}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let not_record = dir.path().join("not.jsonl");
    std::fs::write(&not_record, "{\"hello\":1}\n").unwrap();
    let newer = dir.path().join("newer.jsonl");
    std::fs::write(
        &newer,
        "{\"type\":\"header\",\"infertop_version\":\"9.0.0\",\"record_format\":99}\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.jsonl");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["replay", not_record.to_str().unwrap()],
            format!("{}: not an infertop record", not_record.display()),
        ),
        (
            vec!["follow", not_record.to_str().unwrap()],
            "not.jsonl: not an infertop record".into(),
        ),
        (
            vec!["replay", newer.to_str().unwrap()],
            format!(
                "{}: record format 99 (written by infertop 9.0.0) is newer",
                newer.display()
            ),
        ),
        (
            vec!["report", newer.to_str().unwrap()],
            format!("{}: record format 99", newer.display()),
        ),
        (
            vec!["follow", missing.to_str().unwrap()],
            format!("{}: not found", missing.display()),
        ),
        (
            vec!["replay", dir.path().to_str().unwrap()],
            "is a directory".into(),
        ),
        (vec!["follow"], "follow needs a record".into()),
        (
            vec!["replay", "--speed", "warp", "x.jsonl"],
            "--speed: `warp` is not a speed".into(),
        ),
    ];
    for (args, want) in cases {
        let out = infertop().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_replayed_sweep_folds_its_cells_as_the_sweep_did() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("sweep.jsonl");
    let out = infertop()
        .args([
            "sweep",
            "--batch",
            "1,2",
            "-p",
            "8",
            "-n",
            "4",
            "--warmup",
            "1",
            "--repetitions",
            "2",
            "--no-telemetry",
            "--headless",
            "--record",
        ])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = replay_into_screen(&rec);
    let sweep = screen.app.sweep.as_ref().expect("the sweep's grid");
    assert_eq!(sweep.results.len(), 2);
    assert!(!sweep.live());
    let recorded = match infertop::sweep::record::read(&rec).unwrap() {
        infertop::sweep::record::AnyRecord::Sweep(s) => s,
        _ => panic!("a sweep's record"),
    };
    for (cell, result) in recorded.cells.iter().zip(&sweep.results) {
        let end = cell.end.as_ref().unwrap();
        assert_eq!(result.status, end.status);
        let summary: infertop::summary::RunSummary =
            infertop::record::reader::Record::summary(&cell.record);
        assert_eq!(
            result.tpot,
            summary.steady.get(infertop::stats::Metric::Tpot)
        );
    }
}

#[test]
fn replay_keys_pause_step_speed_and_hold_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.jsonl");
    record_run(&path, &["--jsonl-steps"]);
    let mut s = Session::start(
        &["replay", path.to_str().unwrap(), "--paused", "--fps", "20"],
        80,
        24,
        200,
    );
    s.wait_for(&["paused (1×)", "n step"], Duration::from_secs(30));
    s.wait_for(&[" 0 requests"], Duration::from_secs(5));
    s.send("n");
    s.wait_for(&[" 1 requests"], Duration::from_secs(5));
    s.send("n");
    s.wait_for(&[" 2 requests"], Duration::from_secs(5));
    s.send(">");
    s.wait_for(&["paused (2×)"], Duration::from_secs(5));
    s.send("<<");
    s.wait_for(&["paused (0.5×)"], Duration::from_secs(5));
    // A load key changes nothing in a replay, and says so.
    s.send("]");
    s.wait_for(&["a replay shows a finished run"], Duration::from_secs(5));
    // As fast as it reads, to the end; the final screen stays.
    s.send(">>>>>>>>>>>>");
    s.send(" ");
    s.wait_for(
        &[
            "■ end",
            "12 requests",
            "stopped at the request limit",
            "STOPPED",
        ],
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(s.child.try_wait().unwrap().is_none(), "the end is held");
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    s.assert_restored();
    // The summary the run printed, on the normal screen after the dashboard.
    s.wait_for(
        &["12 requests (2 warmup", "| TTFT |"],
        Duration::from_secs(5),
    );
}

#[test]
fn a_watch_record_plays_on_the_watch_screen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("watch.jsonl");
    let mut text = String::from(
        "{\"type\":\"header\",\"infertop_version\":\"0.1.0\",\"record_format\":1,\"config\":{\"engine\":\"watch\",\"endpoints\":[\"http://10.0.0.1:8000\"]}}\n",
    );
    for i in 1..=5 {
        text.push_str(&format!(
            "{{\"type\":\"server_metrics\",\"t_s\":{i},\"seconds\":1.0,\"server\":\"vllm\",\"requests_per_s\":{}.0,\"running\":3.0,\"waiting\":1.0,\"kv_usage\":0.25,\"preemptions\":0.0,\"prefix_hit_rate\":null,\"ttft_s\":null,\"itl_s\":null,\"e2e_s\":null}}\n",
            10 + i
        ));
        // A node's own window beside the sum: not drawn twice.
        text.push_str(&format!(
            "{{\"type\":\"server_metrics\",\"source\":\"node-a\",\"t_s\":{i},\"seconds\":1.0,\"server\":\"vllm\",\"requests_per_s\":999.0,\"running\":1.0,\"waiting\":0.0,\"kv_usage\":0.1,\"preemptions\":0.0,\"prefix_hit_rate\":null,\"ttft_s\":null,\"itl_s\":null,\"e2e_s\":null}}\n"
        ));
    }
    std::fs::write(&path, text).unwrap();
    let mut s = Session::start(
        &["replay", path.to_str().unwrap(), "--speed", "max"],
        100,
        30,
        0,
    );
    s.wait_for(
        &["WATCH", "http://10.0.0.1:8000", "5 windows"],
        Duration::from_secs(30),
    );
    assert!(!s.contents().contains("999"), "{}", s.contents());
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    s.assert_restored();
}
