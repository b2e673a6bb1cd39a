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
use common::traffic_server::{now_unix_s, peak_in_flight, Seen, Timing, TrafficServer};
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
    /// `--shard K/N` on each command line.
    Flag,
}

fn env_of(launcher: Launcher, k: usize, n: usize) -> Vec<(&'static str, String)> {
    match launcher {
        Launcher::Alone | Launcher::Flag => Vec::new(),
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
        if let Launcher::Flag = launcher {
            cmd.args(["--shard", &format!("{k}/{n}")]);
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

/// The run's `--concurrency C` split over N generators: together they hold C requests in
/// flight at the server, each its share (`C / N`, the remainder to the first shards), counted
/// by the server from each request's arrival to its last token (tests/common/traffic_server.rs).
/// Replies take 200 ms, so every slot is busy for most of the run.
#[test]
fn n_generators_hold_the_runs_concurrency_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2;
    for (total, shares) in [(6, [3, 3]), (7, [4, 3])] {
        let srv = TrafficServer::start(Timing {
            base: Duration::from_millis(200),
            per_token: Duration::ZERO,
            itl: Duration::from_millis(2),
            max_model_len: 4096,
        });
        let total_requests = 6 * total;
        let data = rows(dir.path(), total_requests);
        let start_at = (now_unix_s() + 4.0).floor();
        let args = flags(
            &srv.url,
            &[
                "--dataset",
                data.to_str().unwrap(),
                "--concurrency",
                &total.to_string(),
                "--start-at",
                &start_at.to_string(),
            ],
        );
        let records = generators(Launcher::Flag, n, &format!("c{total}"), dir.path(), &args);
        let seen: Vec<Seen> = srv
            .seen()
            .into_iter()
            .filter(|s| s.path.ends_with("/completions"))
            .collect();
        assert_eq!(seen.len(), total_requests);
        assert!(
            seen.iter().all(|s| s.left.is_some()),
            "a request never let go of"
        );
        // Row i is request i, shard i mod N's.
        let shard_of = |s: &Seen| -> usize {
            s.words[0].trim_start_matches('r').parse::<usize>().unwrap() % n
        };
        let per_shard: Vec<usize> = (0..n)
            .map(|k| peak_in_flight(seen.iter().filter(|s| shard_of(s) == k)))
            .collect();
        let together = srv.in_flight_peak();
        eprintln!(
            "--concurrency {total} over {n} generators: {together} in flight at the server at most ({} by the requests' intervals), {} by shard",
            peak_in_flight(&seen),
            per_shard
                .iter()
                .enumerate()
                .map(|(k, p)| format!("{k}/{n}: {p}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(together, total, "the run's concurrency, together");
        assert_eq!(peak_in_flight(&seen), total);
        assert_eq!(per_shard, shares, "each shard its share");
        // Each shard sent its own rows, all of them.
        for (k, record) in records.iter().enumerate() {
            let mine = requests(record);
            assert_eq!(
                mine.len(),
                total_requests / n + usize::from(k < total_requests % n)
            );
            assert!(mine
                .iter()
                .all(|r| r["index"].as_u64().unwrap() as usize % n == k));
        }
        assert_eq!(report(&records)["requests"], total_requests as u64);
    }
}

/// `record` as if its generator's machine had a clock `behind_s` seconds behind the
/// reference's and had started its record `late_s` seconds later: its header's start (on
/// that machine's clock) and measured offset say so, and every time in it counts from the
/// later start. With `offset` false, a record that measured no offset.
fn on_another_machine(record: &Path, out: &Path, behind_s: f64, late_s: f64, offset: bool) {
    let text = std::fs::read_to_string(record).unwrap();
    let mut lines = Vec::new();
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "header" {
            let clock = &mut v["clock"];
            let started = clock["started_unix_s"].as_f64().unwrap();
            clock["started_unix_s"] = (started - behind_s + late_s).into();
            let measured = clock["offset_s"].as_f64().unwrap();
            if offset {
                clock["offset_s"] = (measured + behind_s).into();
            } else if let Some(c) = clock.as_object_mut() {
                c.remove("offset_s");
                c.remove("uncertainty_s");
                c.remove("reference");
            }
        }
        for key in ["t_s", "elapsed_s"] {
            if let Some(t) = v[key].as_f64() {
                v[key] = (t - late_s).into();
            }
        }
        lines.push(v.to_string());
    }
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
}

/// Per record of a merge, where its requests' starts (`t_s − e2e_s`) put on the merged axis
/// (by the record's `shift_s` in `report`) say the axis's 0 was, on the server's clock: the
/// median over the record's requests of the server's arrival less the merged start.
fn axis_zero_by_record(srv: &TrafficServer, records: &[PathBuf], merged: &Value) -> Vec<f64> {
    let arrival: std::collections::HashMap<usize, f64> = arrivals(srv, 0).into_iter().collect();
    records
        .iter()
        .enumerate()
        .map(|(k, record)| {
            let shift = merged["sources"][k]["shift_s"].as_f64().unwrap();
            let mut zero: Vec<f64> = requests(record)
                .iter()
                .map(|r| {
                    let row = r["index"].as_u64().unwrap() as usize;
                    let start = r["t_s"].as_f64().unwrap() - r["e2e_s"].as_f64().unwrap();
                    arrival[&row] - (start + shift)
                })
                .collect();
            zero.sort_by(f64::total_cmp);
            percentile(&zero, 50.0)
        })
        .collect()
}

/// Two shards started at an RFC 3339 time (with an offset from UTC) send the schedule from
/// that instant; then one shard's record is made that of a machine whose clock is 90 s
/// behind and which started 1.5 s later. `report` of the two puts both on the reference clock
/// by their measured offsets: the same union and figures as the records as written, and every
/// request where the server saw it arrive. Without the offset (a record that measured none)
/// the union is aligned at the starts, and the shard is 1.5 s off.
#[test]
fn shards_on_different_clocks_line_up_when_merged() {
    use time::format_description::well_known::Rfc3339;
    let srv = server(0.0);
    let dir = tempfile::tempdir().unwrap();
    let (rate, n_requests, seed) = (20.0, 40, 7);
    let data = rows(dir.path(), n_requests);
    let start_at = (now_unix_s() + 5.0).floor();
    let rfc3339 = time::OffsetDateTime::from_unix_timestamp(start_at as i64)
        .unwrap()
        .to_offset(time::UtcOffset::from_hms(2, 0, 0).unwrap())
        .format(&Rfc3339)
        .unwrap();
    assert!(rfc3339.ends_with("+02:00"), "{rfc3339}");
    let args = flags(
        &srv.url,
        &[
            "--dataset",
            data.to_str().unwrap(),
            "--rate",
            &rate.to_string(),
            "--seed",
            &seed.to_string(),
            "--start-at",
            &rfc3339,
        ],
    );
    let records = generators(Launcher::Flag, 2, "rfc", dir.path(), &args);

    // The start is the RFC 3339 time, and each request went at its instant from it.
    for record in &records {
        let h = header(record);
        assert_eq!(h["config"]["start_at_unix_s"], start_at, "{rfc3339}");
    }
    let due = infertop::engine::http::open_loop_due_s(rate, 1.0, seed, n_requests).unwrap();
    let seen = arrivals(&srv, 0);
    assert_eq!(
        seen.iter().map(|a| a.0).collect::<Vec<_>>(),
        (0..n_requests).collect::<Vec<_>>()
    );
    let mut errors: Vec<f64> = seen
        .iter()
        .map(|(row, at)| (at - start_at - due[*row]).abs())
        .collect();
    errors.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&errors, 50.0), percentile(&errors, 99.0));
    eprintln!(
        "--start-at {rfc3339}: schedule error p50 {:.2} ms, p99 {:.2} ms",
        p50 * 1e3,
        p99 * 1e3
    );
    assert!(p50 < 0.010, "schedule error p50 {p50} s");

    let (behind_s, late_s) = (90.0, 1.5);
    let moved = dir.path().join("rfc-1-elsewhere.jsonl");
    on_another_machine(&records[1], &moved, behind_s, late_s, true);
    let unmeasured = dir.path().join("rfc-1-unmeasured.jsonl");
    on_another_machine(&records[1], &unmeasured, behind_s, late_s, false);
    let as_written = report(&records);
    let elsewhere_set = [records[0].clone(), moved.clone()];
    let elsewhere = report(&elsewhere_set);
    let unmeasured_set = [records[0].clone(), unmeasured.clone()];
    let at_starts = report(&unmeasured_set);

    // On the reference clock: the one run's figures, whatever the machines' clocks.
    assert!(
        elsewhere["alignment"]
            .as_str()
            .unwrap()
            .contains("reference clock"),
        "{}",
        elsewhere["alignment"]
    );
    assert_eq!(elsewhere["requests"], n_requests as u64);
    assert_eq!(elsewhere["metrics"], as_written["metrics"]);
    // The moved shard is `late_s` further from the other than as written (each shift is from
    // the earliest start, which is either shard's: they started within a millisecond).
    let shift = |v: &Value, k: usize| v["sources"][k]["shift_s"].as_f64().unwrap();
    let apart = |v: &Value| shift(v, 1) - shift(v, 0);
    assert!(
        (apart(&elsewhere) - apart(&as_written) - late_s).abs() < 1e-6,
        "{} vs {}",
        apart(&elsewhere),
        apart(&as_written)
    );
    // Every request where the server saw it: both records say the same axis 0.
    let zero = axis_zero_by_record(&srv, &records, &as_written);
    let zero_elsewhere = axis_zero_by_record(&srv, &elsewhere_set, &elsewhere);
    let zero_at_starts = axis_zero_by_record(&srv, &unmeasured_set, &at_starts);
    eprintln!(
        "merged axis 0 by shard (ms after the first of them, median over its requests): as written {:+.2}, on a clock {behind_s} s behind and started {late_s} s later {:+.2}, without its offset {:+.2}",
        (zero[1] - zero[0]) * 1e3,
        (zero_elsewhere[1] - zero_elsewhere[0]) * 1e3,
        (zero_at_starts[1] - zero_at_starts[0]) * 1e3,
    );
    assert!((zero[1] - zero[0]).abs() < 0.005, "{zero:?}");
    assert!(
        (zero_elsewhere[1] - zero_elsewhere[0]).abs() < 0.005,
        "{zero_elsewhere:?}"
    );
    // The llm-d report's rate over the held interval is the run's.
    let llmd = |set: &[PathBuf]| -> f64 {
        let out = infertop()
            .arg("report")
            .args(set)
            .args(["--format", "llm-d", "--no-probe"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["results"]["request_performance"]["aggregate"]["throughput"]["request_rate"]["mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("no request rate in {v}"))
    };
    let (rate_written, rate_elsewhere, rate_at_starts) =
        (llmd(&records), llmd(&elsewhere_set), llmd(&unmeasured_set));
    eprintln!(
        "request rate over the held interval: as written {rate_written:.2}/s, elsewhere {rate_elsewhere:.2}/s, without the offset {rate_at_starts:.2}/s (sent at {rate}/s)"
    );
    assert!((rate_elsewhere - rate_written).abs() < 1e-6 * rate_written);
    assert!(
        (rate_at_starts - rate_written).abs() > 0.1 * rate_written,
        "misaligned shards should not give the run's rate"
    );

    // Without the offset: aligned at the starts, said so, and the shard is off by its late
    // start.
    assert!(
        at_starts["merge_notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("measured no clock offset")),
        "{}",
        at_starts["merge_notes"]
    );
    assert!(
        ((zero_at_starts[1] - zero_at_starts[0]) - late_s).abs() < 0.05,
        "{zero_at_starts:?}"
    );
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
