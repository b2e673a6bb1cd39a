//! Load from many generators, end to end: N infertop processes started as a Kubernetes
//! Indexed Job starts its pods (`JOB_COMPLETION_INDEX`/`JOB_COMPLETION_COUNT`) or as srun
//! starts a step's tasks (`SLURM_PROCID`/`SLURM_NTASKS`), the same flags and one
//! `--start-at`, against an in-process server that records when each request arrives and
//! sends a `Date` header (tests/common/traffic_server.rs). The server's log is the truth: the
//! N send the one generator's schedule between them (every row once, at its time), and
//! `report` and `follow` of their records give the one run's figures.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use assert_cmd::prelude::*;
use common::traffic_server::{now_unix_s, Seen, Timing, TrafficServer};
use serde_json::Value;

fn infertop() -> Command {
    Command::cargo_bin("infertop").unwrap()
}

/// TTFT = 20 ms, then 4 tokens 2 ms apart: the truth every generator measures.
fn server(skew: f64) -> TrafficServer {
    TrafficServer::start_with_clock(
        Timing {
            base: Duration::from_millis(20),
            per_token: Duration::ZERO,
            itl: Duration::from_millis(2),
            max_model_len: 4096,
        },
        skew,
    )
}

/// A dataset whose row `i` says `r{i}` first, so the server's log names each request's row.
fn rows(dir: &Path, n: usize) -> PathBuf {
    let text: String = (0..n)
        .map(|i| format!("{{\"prompt\":\"r{i} tell me more\",\"output_length\":4}}\n"))
        .collect();
    let p = dir.join("rows.jsonl");
    std::fs::write(&p, text).unwrap();
    p
}

/// How a job starts its N processes: the variables each one gets.
#[derive(Clone, Copy, Debug)]
enum Launcher {
    /// One generator, no job.
    Alone,
    IndexedJob,
    Srun,
}

fn env_of(launcher: Launcher, k: usize, n: usize) -> Vec<(&'static str, String)> {
    match launcher {
        Launcher::Alone => Vec::new(),
        Launcher::IndexedJob => vec![
            ("JOB_COMPLETION_INDEX", k.to_string()),
            ("JOB_COMPLETION_COUNT", n.to_string()),
        ],
        Launcher::Srun => vec![
            ("SLURM_PROCID", k.to_string()),
            ("SLURM_NTASKS", n.to_string()),
            ("SLURM_STEP_ID", "0".to_string()),
        ],
    }
}

/// Starts `n` generators as `launcher` would, each writing `dir/{tag}-{k}.jsonl`; waits for
/// all and returns their records.
fn generators(
    launcher: Launcher,
    n: usize,
    tag: &str,
    dir: &Path,
    args: &[String],
) -> Vec<PathBuf> {
    let mut children: Vec<(PathBuf, Child)> = Vec::new();
    for k in 0..n {
        let record = dir.join(format!("{tag}-{k}.jsonl"));
        let mut cmd = infertop();
        cmd.args(args)
            .arg("--record")
            .arg(&record)
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("SLURM_PROCID")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env_of(launcher, k, n) {
            cmd.env(k, v);
        }
        children.push((record, cmd.spawn().unwrap()));
    }
    children
        .into_iter()
        .map(|(record, child)| {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{launcher:?} {tag}: {stderr}");
            // What each generator said (its shard, its clock, its start), for --nocapture.
            eprint!("{tag}: {stderr}");
            record
        })
        .collect()
}

fn header(record: &Path) -> Value {
    let text = std::fs::read_to_string(record).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// The requests of a record, as lines.
fn requests(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "request")
        .collect()
}

/// `report --format json` of these records.
fn report(records: &[PathBuf]) -> Value {
    let out = infertop()
        .arg("report")
        .args(records)
        .args(["--format", "json", "--no-probe"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The row each request the server saw was for, and when it arrived (this machine's unix
/// seconds), sorted by row.
fn arrivals(srv: &TrafficServer, from: usize) -> Vec<(usize, f64)> {
    let seen: Vec<Seen> = srv.seen();
    let mut out: Vec<(usize, f64)> = seen[from..]
        .iter()
        .filter(|s| s.path.ends_with("/completions"))
        .map(|s| {
            let row = s.words[0].trim_start_matches('r').parse().unwrap();
            (row, srv.started_unix_s + s.at.as_secs_f64())
        })
        .collect();
    out.sort_by_key(|a| a.0);
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

const RATE: f64 = 40.0;
const REQUESTS: usize = 160;
const SEED: u64 = 11;

/// N = 1, 2 and 4 generators at one total rate: the same requests at the same instants of
/// the one schedule, and the same percentiles.
#[test]
fn n_generators_send_the_one_schedule_and_merge_into_its_figures() {
    let srv = server(0.0);
    let dir = tempfile::tempdir().unwrap();
    let data = rows(dir.path(), REQUESTS);
    let due = infertop::engine::http::open_loop_due_s(RATE, 1.0, SEED, REQUESTS).unwrap();
    let mut figures = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    for (n, launcher) in [
        (1, Launcher::Alone),
        (2, Launcher::IndexedJob),
        (4, Launcher::Srun),
    ] {
        let from = srv.seen().len();
        // Time enough for N processes to start, read the clock and open their connections.
        let start_at = (now_unix_s() + 6.0).floor();
        let args: Vec<String> = [
            "--endpoint",
            &srv.url,
            "--headless",
            "--no-telemetry",
            "--dataset",
            data.to_str().unwrap(),
            "--rate",
            &RATE.to_string(),
            "--seed",
            &SEED.to_string(),
            "--warmup",
            "8",
            "--start-at",
            &start_at.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut args = args;
        if n == 1 {
            args.extend(["--shard".to_string(), "0/1".to_string()]);
        }
        let records = generators(launcher, n, &format!("n{n}"), dir.path(), &args);

        // Every row once, none missed, from the shard the schedule gives it.
        let seen = arrivals(&srv, from);
        let rows_seen: Vec<usize> = seen.iter().map(|a| a.0).collect();
        assert_eq!(rows_seen, (0..REQUESTS).collect::<Vec<_>>(), "N = {n}");
        for (k, record) in records.iter().enumerate() {
            let h = header(record);
            let clock = &h["clock"];
            assert!(clock["offset_s"].as_f64().unwrap().abs() < 0.01, "{clock}");
            if n > 1 {
                assert_eq!(h["config"]["shard"]["index"], k as u64);
                assert_eq!(h["config"]["shard"]["count"], n as u64);
            }
            for r in requests(record) {
                let i = r["index"].as_u64().unwrap() as usize;
                assert_eq!(i % n, k, "request {i} from shard {k} of {n}");
                assert_eq!(r["origin"]["row"].as_u64(), Some(i as u64 + 1));
            }
        }
        // Each request arrived at the server at its instant of the one schedule.
        let mut errors: Vec<f64> = seen
            .iter()
            .map(|(row, at)| (at - start_at - due[*row]).abs())
            .collect();
        errors.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(&errors, 50.0), percentile(&errors, 99.0));
        assert!(p50 < 0.010, "N = {n}: schedule error p50 {p50} s");

        // The records merged are the run: every request, its percentiles.
        let merged = report(&records);
        assert_eq!(merged["requests"], REQUESTS as u64, "{merged}");
        let ttft = &merged["metrics"]["ttft_s"];
        let e2e = &merged["metrics"]["e2e_s"];
        assert_eq!(ttft["n"], (REQUESTS - 8) as u64);
        figures.push((
            n,
            p50,
            p99,
            ttft["p50"].as_f64().unwrap(),
            ttft["p99"].as_f64().unwrap(),
            e2e["p50"].as_f64().unwrap(),
        ));
        groups.push(
            records
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join("+"),
        );

        // follow of the finished records prints the same summary.
        let out = infertop()
            .arg("follow")
            .args(&records)
            .args(["--headless", "--format", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let followed: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(followed["requests"], merged["requests"]);
        assert_eq!(followed["metrics"]["ttft_s"], merged["metrics"]["ttft_s"]);
    }
    for (n, err50, err99, ttft50, ttft99, e2e50) in &figures {
        eprintln!(
            "N = {n}: schedule error p50 {:.2} ms p99 {:.2} ms; TTFT p50 {:.2} ms p99 {:.2} ms; E2E p50 {:.2} ms",
            err50 * 1e3,
            err99 * 1e3,
            ttft50 * 1e3,
            ttft99 * 1e3,
            e2e50 * 1e3
        );
    }
    // The server's truth is TTFT 20 ms: every N measures it alike.
    let one = figures[0].3;
    for f in &figures[1..] {
        assert!((f.3 - one).abs() < 0.003, "TTFT p50 {} vs {one}", f.3);
    }
    // `compare` of the one generator with the merged N: the same requests (the same
    // numbers, the same outputs), and the difference of TTFT medians with its bootstrap CI.
    let out = infertop()
        .arg("compare")
        .args(&groups)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmp: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (pair, n) in cmp["pairs"].as_array().unwrap().iter().zip([2, 4]) {
        assert_eq!(pair["outputs"]["compared"], REQUESTS as u64, "{pair}");
        assert_eq!(pair["outputs"]["differing"], 0);
        let ttft = pair["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "ttft_s")
            .unwrap();
        let d = &ttft["median_diff"];
        eprintln!(
            "N = {n} vs 1: TTFT median {:+.3} ms (95 % CI {:+.3} .. {:+.3} ms), {}",
            d["diff"].as_f64().unwrap() * 1e3,
            d["lo"].as_f64().unwrap() * 1e3,
            d["hi"].as_f64().unwrap() * 1e3,
            ttft["verdict"]
        );
    }
}

/// The common flags of a small sharded run against `url`.
fn flags(url: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "--endpoint",
        url,
        "--headless",
        "--no-telemetry",
        "--warmup",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// A trace's timestamps: two shards send its rows between them, each at its time.
#[test]
fn a_traces_rows_go_at_their_times_from_two_shards() {
    let srv = server(0.0);
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..40)
        .map(|i| {
            format!(
                "{{\"timestamp\":{},\"prompt\":\"r{i} hi\",\"output_length\":2}}\n",
                i * 40
            )
        })
        .collect();
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(&trace, text).unwrap();
    let start_at = (now_unix_s() + 5.0).floor();
    let args = flags(
        &srv.url,
        &[
            "--dataset",
            trace.to_str().unwrap(),
            "--replay",
            // A cap keeps the connections opened before the start to a few.
            "--concurrency",
            "8",
            "--start-at",
            &start_at.to_string(),
        ],
    );
    generators(Launcher::IndexedJob, 2, "trace", dir.path(), &args);
    let seen = arrivals(&srv, 0);
    assert_eq!(
        seen.iter().map(|a| a.0).collect::<Vec<_>>(),
        (0..40).collect::<Vec<_>>()
    );
    let mut late: Vec<f64> = seen
        .iter()
        .map(|(row, at)| (at - start_at - *row as f64 * 0.040).abs())
        .collect();
    late.sort_by(f64::total_cmp);
    assert!(percentile(&late, 50.0) < 0.010, "{late:?}");
}

/// Conversations: each stays on one shard, turn after turn; together the shards send every
/// turn of every conversation once, numbered as the run numbers them.
#[test]
fn a_conversation_stays_on_one_shard() {
    let srv = server(0.0);
    let dir = tempfile::tempdir().unwrap();
    let args = flags(
        &srv.url,
        &[
            "--api",
            "chat",
            "--turns",
            "3",
            "--conversations",
            "8",
            "-p",
            "4",
            "-n",
            "2",
            "--concurrency",
            "4",
        ],
    );
    let records = generators(Launcher::Srun, 2, "conv", dir.path(), &args);
    let mut numbers = Vec::new();
    for (k, record) in records.iter().enumerate() {
        for r in requests(record) {
            let conv = r["origin"]["conversation"].as_u64().unwrap();
            let turn = r["origin"]["turn"].as_u64().unwrap();
            assert_eq!(conv % 2, k as u64, "conversation {conv} on shard {k}");
            // Conversation c's turn t (1-based) is request 3c + t - 1.
            assert_eq!(r["index"].as_u64().unwrap(), conv * 3 + turn - 1);
            numbers.push(r["index"].as_u64().unwrap());
        }
    }
    numbers.sort();
    assert_eq!(numbers, (0..24).collect::<Vec<_>>());
    let mut sessions: Vec<String> = srv.seen().into_iter().filter_map(|s| s.session).collect();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), 8);
    assert_eq!(report(&records)["requests"], 24);
}

/// The offset is measured against the server's clock (here 37.25 s ahead of this machine's),
/// the record keeps it, and --start-at is read on that clock.
#[test]
fn the_start_is_read_on_the_servers_clock() {
    let skew = 37.25;
    let srv = server(skew);
    let dir = tempfile::tempdir().unwrap();
    let start_at = (now_unix_s() + skew + 4.0).floor();
    let args = flags(
        &srv.url,
        &[
            "--rate",
            "20",
            "--requests",
            "10",
            "--start-at",
            &start_at.to_string(),
        ],
    );
    let records = generators(Launcher::Alone, 1, "skew", dir.path(), &args);
    let clock = header(&records[0])["clock"].clone();
    let offset = clock["offset_s"].as_f64().unwrap();
    let uncertainty = clock["uncertainty_s"].as_f64().unwrap();
    assert!(
        (offset - skew).abs() <= uncertainty + 0.002 && uncertainty < 0.02,
        "{clock}"
    );
    assert!(clock["reference"].as_str().unwrap().ends_with("/v1/models"));
    // The first request went at the start, on the server's clock.
    let first = srv.started_unix_s
        + srv
            .seen()
            .iter()
            .find(|s| s.path.ends_with("/completions"))
            .unwrap()
            .at
            .as_secs_f64();
    assert!(
        (first + skew - start_at).abs() < 0.05,
        "{}",
        first + skew - start_at
    );
}

/// Ctrl-C while waiting for --start-at stops the run at once, with its record closed.
#[test]
fn ctrl_c_answers_while_waiting_for_the_start() {
    use std::io::{BufRead, BufReader};
    let srv = server(0.0);
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("wait.jsonl");
    let start_at = (now_unix_s() + 120.0).floor();
    let mut child = infertop()
        .args(flags(
            &srv.url,
            &["--rate", "5", "--start-at", &start_at.to_string()],
        ))
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("the schedule starts at") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no start line");
    }
    // Into the engine's wait (the server found out, the connections opened).
    std::thread::sleep(Duration::from_millis(500));
    let asked = std::time::Instant::now();
    assert_eq!(interrupt(child.id()), 0);
    let status = child.wait().unwrap();
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(130));
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(
        text.lines().last().unwrap().contains("\"footer\""),
        "{text}"
    );
    assert!(srv.seen().iter().all(|s| !s.path.ends_with("/completions")));
}

/// SIGINT to `pid`, as Ctrl-C sends it.
fn interrupt(pid: u32) -> i32 {
    Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .map_or(-1, |s| s.code().unwrap_or(-1))
}

/// A split that leaves a shard nothing to hold, a job that says half of a shard, a start time
/// that is no time, a sharded sweep: one line each, exit 2, before anything is sent.
#[test]
fn bad_splits_and_times_are_one_line_and_exit_2() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (
            &["--shard", "0/4", "--concurrency", "2"],
            &[],
            "--concurrency 2",
        ),
        (
            &[],
            &[("JOB_COMPLETION_INDEX", "1")],
            "JOB_COMPLETION_COUNT",
        ),
        (&["--shard", "4/4"], &[], "--shard"),
        (&["--start-at", "soon"], &[], "--start-at"),
        (&["--clock-ref", "nowhere"], &[], "--clock-ref"),
    ];
    for (args, env, says) in cases {
        let mut cmd = infertop();
        cmd.args(flags("http://127.0.0.1:9", args))
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("SLURM_PROCID");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = infertop()
        .args([
            "sweep",
            "--endpoint",
            "http://127.0.0.1:9",
            "--concurrency",
            "1,2",
            "--shard",
            "0/2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sweep"));
}
