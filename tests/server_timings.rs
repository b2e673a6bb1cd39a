//! The server's own timings of each request joined to the client's TTFT, against the
//! in-process server that reports known timings as vLLM and llama.cpp do (and, as a check of
//! the parser's shape only, as SGLang's native `meta_info`): its wait for one of its slots as
//! the queue, its injected TTFT as the prefill, and a hop it spends before its clock starts
//! (unreported) that must come out as the rest of the TTFT. The tests at rising load print
//! their table of the TTFT's parts per load (`--nocapture` shows it).
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::event::{Control, Event, RequestDone, ServerTimings};
use infertop::fold::RunFold;
use infertop::stats::{Part, SplitSummary, Summary};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;
use stream_server::{Dialect, Options, Reporting, Timing};

const TTFT: Duration = Duration::from_millis(40);
const ITL: Duration = Duration::from_millis(5);
const TOKENS: usize = 5;
const HOP: Duration = Duration::from_millis(25);

fn server(dialect: Dialect, slots: Option<usize>, hop: Duration) -> String {
    stream_server::start_reporting(
        Options {
            timing: Timing {
                ttft: TTFT,
                itl: ITL,
                tokens: TOKENS,
            },
            slots,
            reset_route: None,
        },
        Reporting {
            dialect,
            hop,
            cached: 3,
        },
    )
    .unwrap()
    .url
}

fn config(url: &str, concurrency: usize, requests: u64) -> HttpConfig {
    HttpConfig {
        endpoints: vec![Endpoint::parse(url).unwrap()],
        api: Api::Completions,
        served_model: Some("m".into()),
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(8)),
            output: LenSpec::Fixed(TOKENS),
            seed: 0,
            warmup: 0,
            requests: Some(requests),
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: Default::default(),
        },
        prompts: Default::default(),
        concurrency: Some(concurrency),
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(20),
        exact_output: true,
        chunk_usage: false,
        chunk_timings: false,
        record_tokens: false,
        preconnect: true,
        reset_prefix_cache: false,
        shape: Default::default(),
        start_at: None,
        prompt_salt: 0,
        cancel: None,
        canary: None,
    }
}

/// Every event of a run to its end (at most 60 s).
fn events(cfg: HttpConfig) -> Vec<Event> {
    let (tx, rx) = bounded(1 << 16);
    let (_ctl, ctl_rx) = unbounded::<Control>();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Finished(r)) => {
                out.push(Event::Finished(r));
                break;
            }
            Ok(Event::RequestFailed(f)) => panic!("{f:?}"),
            Ok(ev) => out.push(ev),
            Err(_) => {}
        }
    }
    handle.join().unwrap();
    out
}

fn done(events: &[Event]) -> Vec<&RequestDone> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RequestDone(r) => Some(r.as_ref()),
            _ => None,
        })
        .collect()
}

fn timings(r: &RequestDone) -> &ServerTimings {
    r.client.as_ref().unwrap().server.as_ref().unwrap()
}

fn ms(s: f64) -> f64 {
    s * 1e3
}

/// A table of the TTFT and its parts at each load, on stderr (`--nocapture` shows it) so the
/// figures can be quoted: p50 / p99 of each in ms, and which part grew most since the first
/// row, at p50 and at p99.
fn print_split_table(title: &str, rows: &[(String, SplitSummary)]) {
    let pair = |s: &Summary| {
        if s.n == 0 {
            "-".to_string()
        } else {
            format!("{:.1} / {:.1}", ms(s.p50), ms(s.p99))
        }
    };
    let first = rows
        .first()
        .map(|(load, _)| load.clone())
        .unwrap_or_default();
    eprintln!("\n{title}");
    eprintln!(
        "{:<16} {:>4} {:>15} {:>15} {:>15} {:>18}   grew most since {first} (p50 | p99)",
        "load", "n", "TTFT p50/p99", "queue", "prefill", "network+client"
    );
    for (load, split) in rows {
        let grew = |q| match rows.first() {
            Some((_, base)) if !std::ptr::eq(base, split) => split
                .grew_most_since(base, q)
                .map_or("-".into(), |(p, by)| {
                    format!("{} {:+.1} ms", p.label(), ms(by))
                }),
            _ => "-".into(),
        };
        eprintln!(
            "{load:<16} {:>4} {:>15} {:>15} {:>15} {:>18}   {} | {}",
            split.ttft.n,
            pair(&split.ttft),
            pair(&split.queue),
            pair(&split.prefill),
            pair(&split.rest),
            grew(50),
            grew(99)
        );
    }
}

/// A cell's `ttft_split` as the sweep's JSON writes it, read back.
fn split_of_json(v: &serde_json::Value) -> SplitSummary {
    let part = |key: &str| serde_json::from_value::<Summary>(v[key].clone()).unwrap_or_default();
    SplitSummary {
        requests: v["requests"].as_u64().unwrap_or(0),
        ttft: part("ttft_s"),
        queue: part("queue_s"),
        prefill: part("prefill_s"),
        rest: part("network_client_s"),
        decode: part("decode_s"),
        ..Default::default()
    }
}

/// One request at a time on a free slot: no queue, the prefill exactly as reported, the
/// unreported hop as the rest of the TTFT, the decode as reported, and the cached and
/// computed prompt tokens from the usage.
#[test]
fn vllm_metrics_split_the_ttft_and_the_hop_is_the_rest() {
    let url = server(Dialect::Vllm, Some(4), HOP);
    let evs = events(config(&url, 1, 6));
    let done = done(&evs);
    assert_eq!(done.len(), 6);
    for r in &done {
        let t = timings(r);
        assert_eq!(t.source, "vllm");
        assert!(ms(t.queue_s.unwrap()) < 5.0, "{t:?}");
        assert!((ms(t.prefill_s.unwrap()) - 40.0).abs() < 1e-6, "{t:?}");
        assert!((ms(t.decode_s.unwrap()) - 20.0).abs() < 1e-6, "{t:?}");
        let rest = ms(t.rest_s.unwrap());
        assert!(
            (rest - 25.0).abs() < 15.0,
            "rest {rest} ms, hop 25 ms: {t:?}"
        );
        let sum = t.queue_s.unwrap() + t.prefill_s.unwrap() + t.rest_s.unwrap();
        assert!((sum - r.ttft_s).abs() < 1e-9, "parts add up to the TTFT");
        assert_eq!((t.cached_tokens, t.computed_tokens), (Some(3), Some(5)));
        assert_eq!(r.client.as_ref().unwrap().cached_tokens, Some(3));
    }
    let mut fold = RunFold::new();
    for e in &evs {
        fold.apply(e);
    }
    let split = fold.summary().split.unwrap();
    assert_eq!((split.requests, split.queue.n, split.rest.n), (6, 6, 6));
    assert_eq!((split.cached_tokens, split.computed_tokens), (18, 30));
    let json = fold.summary().to_json();
    assert_eq!(json["ttft_split"]["requests"], 6);
    assert!((json["ttft_split"]["prefill_s"]["p50"].as_f64().unwrap() - 0.040).abs() < 1e-9);
}

/// llama.cpp sends no queue: the split says so (no queue samples) and the rest holds what
/// the server did not count; its `cache_n` is the request's cached tokens.
#[test]
fn llama_cpp_timings_have_no_queue_and_their_cache_counts() {
    let url = server(Dialect::LlamaCpp, None, Duration::ZERO);
    let evs = events(config(&url, 2, 4));
    for r in done(&evs) {
        let t = timings(r);
        assert_eq!((t.source.as_str(), t.queue_s), ("llama.cpp", None));
        assert!((ms(t.prefill_s.unwrap()) - 40.0).abs() < 1e-6);
        assert_eq!((t.cached_tokens, t.computed_tokens), (Some(3), Some(5)));
        assert_eq!(r.client.as_ref().unwrap().cached_tokens, Some(3));
        assert!(ms(t.rest_s.unwrap()) < 15.0, "{t:?}");
    }
    let mut fold = RunFold::new();
    for e in &evs {
        fold.apply(e);
    }
    let split = fold.summary().split.unwrap();
    assert_eq!((split.queue.n, split.prefill.n), (0, 4));
    let md = fold.summary().render(infertop::summary::SummaryFormat::Md);
    assert!(md.contains("| queue | - |"), "{md}");
    assert!(md.contains("not sent by this server"), "{md}");
}

/// A shape check of the parser, not of SGLang: SGLang's own OpenAI-compatible streams carry
/// no `meta_info` (it is its native `/generate` API's); here a chunk in that shape is read
/// as the native API means it (seconds, its queue and prefill).
#[test]
fn a_meta_info_in_sglangs_native_shape_is_read() {
    let url = server(Dialect::Sglang, Some(1), Duration::ZERO);
    let evs = events(config(&url, 1, 3));
    for r in done(&evs) {
        let t = timings(r);
        assert_eq!(t.source, "sglang");
        assert!((ms(t.prefill_s.unwrap()) - 40.0).abs() < 1e-6);
        assert!(t.queue_s.is_some() && t.e2e_s.is_some());
        assert_eq!((t.cached_tokens, t.computed_tokens), (Some(3), Some(5)));
    }
}

/// A server that sends no timings: nothing is assumed, no split is shown.
#[test]
fn a_server_that_says_nothing_gets_no_split() {
    let url = stream_server::start(Timing {
        ttft: TTFT,
        itl: ITL,
        tokens: TOKENS,
    })
    .unwrap();
    let evs = events(config(&url, 1, 2));
    let mut fold = RunFold::new();
    for r in done(&evs) {
        assert!(r.client.as_ref().unwrap().server.is_none());
    }
    for e in &evs {
        fold.apply(e);
    }
    let s = fold.summary();
    assert!(s.split.is_none());
    assert!(s.to_json().get("ttft_split").is_none());
    assert!(!s
        .render(infertop::summary::SummaryFormat::Md)
        .contains("where the TTFT went"));
}

/// A server of 2 slots at rising concurrency, a run per level: the queue is what grows (about
/// one service time per wave beyond the slots), the prefill stays what the server reports.
#[test]
fn the_queue_grows_with_the_load_on_a_server_of_two_slots() {
    let url = server(Dialect::Vllm, Some(2), Duration::ZERO);
    let mut rows = Vec::new();
    for c in [1usize, 2, 4, 8] {
        let evs = events(config(&url, c, (4 * c) as u64));
        let mut fold = RunFold::new();
        for e in &evs {
            fold.apply(e);
        }
        let split = fold.summary().split.unwrap();
        assert!((ms(split.prefill.p50) - 40.0).abs() < 1e-6);
        rows.push((format!("concurrency {c}"), split));
    }
    print_split_table(
        "A run per level against 2 slots (prefill 40 ms, decode 4 × 5 ms, no hop), ms:",
        &rows,
    );
    let queue_p50: Vec<f64> = rows.iter().map(|(_, s)| ms(s.queue.p50)).collect();
    // Service time ≈ 40 + 4 × 5 = 60 ms; at 4 in flight half wait one service, at 8 three
    // quarters wait one to three.
    assert!(queue_p50[0] < 5.0 && queue_p50[1] < 5.0, "{queue_p50:?}");
    assert!(queue_p50[2] > 20.0, "{queue_p50:?}");
    assert!(queue_p50[3] > queue_p50[2] + 30.0, "{queue_p50:?}");
    let (part, _) = rows[3].1.grew_most_since(&rows[0].1, 99).unwrap();
    assert_eq!(part, Part::Queue);
}

/// One run whose load rises while it goes (the dashboard's load key, as `Control::AdjustLoad`:
/// concurrency 1, 2, 4, then 8) against a server of 2 slots: the summary's fit of each part
/// against the requests in flight names the queue as the part that grows with the load, and
/// the prefill's rise is none. In the steady state each request in flight beyond the 2 slots
/// adds half a service time (30 ms of 60) to the queue; the fit over the whole run comes out
/// lower (about 20 ms), as the drain's last requests end with few in flight after a long
/// wait.
#[test]
fn a_run_at_rising_load_names_the_queue_as_the_part_that_grows() {
    let url = server(Dialect::Vllm, Some(2), Duration::ZERO);
    // Requests done at each level before the load doubles.
    let per_level = [4u64, 8, 16, 32];
    let (tx, rx) = bounded(1 << 16);
    let (ctl, ctl_rx) = unbounded::<Control>();
    let handle = http::spawn(config(&url, 1, per_level.iter().sum()), tx, ctl_rx).unwrap();
    let mut fold = RunFold::new();
    let mut level_of_started = std::collections::HashMap::new();
    let mut level = 0usize;
    let mut by_level: Vec<Vec<RequestDone>> = vec![Vec::new(); per_level.len()];
    let mut done = 0u64;
    let mut next_step = per_level[0];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the run did not end within 60 s");
        let Ok(ev) = rx.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        fold.apply(&ev);
        match &ev {
            Event::WorkloadChanged(_) => level = (level + 1).min(per_level.len() - 1),
            Event::RequestStarted { index, .. } => {
                level_of_started.insert(*index, level);
            }
            Event::RequestDone(r) => {
                let at = level_of_started.get(&r.index).copied().unwrap_or(level);
                by_level[at].push(r.as_ref().clone());
                done += 1;
                if done == next_step && level + 1 < per_level.len() {
                    ctl.send(Control::AdjustLoad(1)).unwrap();
                    next_step += per_level[level + 1];
                }
            }
            Event::RequestFailed(f) => panic!("{f:?}"),
            Event::Finished(_) => break,
            _ => {}
        }
    }
    handle.join().unwrap();

    let summary = fold.summary();
    let split = summary.split.clone().unwrap();
    let rows: Vec<(String, SplitSummary)> = by_level
        .iter()
        .enumerate()
        .map(|(i, reqs)| {
            let of = |p: Part| {
                Summary::of(
                    &reqs
                        .iter()
                        .filter_map(|r| p.of_request(r))
                        .collect::<Vec<_>>(),
                )
            };
            let split = SplitSummary {
                ttft: Summary::of(&reqs.iter().map(|r| r.ttft_s).collect::<Vec<_>>()),
                queue: of(Part::Queue),
                prefill: of(Part::Prefill),
                rest: of(Part::Rest),
                ..Default::default()
            };
            (format!("concurrency {}", 1 << i), split)
        })
        .collect();
    print_split_table(
        "One run, its load doubled while it ran (by the concurrency its requests started at), ms:",
        &rows,
    );
    let slope = |p: Part| {
        split
            .slope_s_per_request
            .iter()
            .find(|(q, _)| *q == p)
            .and_then(|(_, s)| *s)
    };
    eprintln!(
        "fitted over the run ({} requests): rise per request in flight: queue {:+.1} ms, prefill {:+.3} ms, network+client {:+.3} ms; grows with load: {}",
        split.requests,
        ms(slope(Part::Queue).unwrap_or(f64::NAN)),
        ms(slope(Part::Prefill).unwrap_or(f64::NAN)),
        ms(slope(Part::Rest).unwrap_or(f64::NAN)),
        split.grows.map_or("none", |p| p.label())
    );

    assert_eq!(split.requests, per_level.iter().sum::<u64>());
    assert_eq!(split.grows, Some(Part::Queue), "{split:?}");
    assert_eq!(
        summary.to_json()["ttft_split"]["grows_with_load"],
        "queue_s"
    );
    let queue = slope(Part::Queue).unwrap();
    assert!(
        (0.010..0.035).contains(&queue),
        "queue {queue} s per request in flight"
    );
    assert!(
        slope(Part::Prefill).unwrap().abs() < 1e-6,
        "the prefill is 40 ms at any load"
    );
    assert!(slope(Part::Rest).unwrap() < queue / 10.0);
    let queue_p50: Vec<f64> = rows.iter().map(|(_, s)| ms(s.queue.p50)).collect();
    assert!(queue_p50[0] < 5.0 && queue_p50[1] < 5.0, "{queue_p50:?}");
    assert!(queue_p50[3] > queue_p50[2] + 30.0, "{queue_p50:?}");
}

fn infertop() -> std::process::Command {
    use assert_cmd::cargo::CommandCargoExt;
    std::process::Command::cargo_bin("infertop").unwrap()
}

/// A sweep at rising concurrency against a server of 2 slots, TTFT SLO 170 ms: the cells
/// carry their split, the queue is what grows, and it is what breaks the SLO first (at 8: a
/// request waits up to three others' 60 ms); `report` of the record says the same.
#[test]
fn a_sweep_says_which_part_of_the_ttft_breaks_the_slo_first() {
    let url = server(Dialect::Vllm, Some(2), Duration::from_millis(10));
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("sweep.jsonl");
    let out = infertop()
        .args(["sweep", "--endpoint", &url, "--served-model", "m"])
        .args(["--concurrency", "1,2,4,8", "-p", "8", "-n", "5"])
        .args([
            "--warmup",
            "1",
            "--repetitions",
            "16",
            "--slo",
            "ttft=170ms",
        ])
        .args(["--no-telemetry", "--format", "json", "--record"])
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    let queue: Vec<f64> = cells
        .iter()
        .map(|c| c["ttft_split"]["queue_s"]["p50"].as_f64().unwrap())
        .collect();
    for c in cells {
        let prefill = c["ttft_split"]["prefill_s"]["p50"].as_f64().unwrap();
        assert!((prefill - 0.040).abs() < 1e-9, "{c}");
    }
    assert!(queue[0] < 0.005 && queue[1] < 0.005, "{queue:?}");
    assert!(queue[3] > queue[2] + 0.030, "{queue:?}");
    let rows: Vec<(String, SplitSummary)> = cells
        .iter()
        .map(|c| {
            (
                format!("concurrency {}", c["params"]["concurrency"]),
                split_of_json(&c["ttft_split"]),
            )
        })
        .collect();
    print_split_table(
        "A sweep against 2 slots (prefill 40 ms, decode 4 × 5 ms, hop 10 ms), SLO TTFT p99 ≤ 170 ms, ms:",
        &rows,
    );
    let f = &doc["findings"]["ttft_split"][0];
    eprintln!("finding: {f}");
    assert_eq!(f["part"], "queue", "{f}");
    assert_eq!(
        (f["breaks_slo"].as_bool(), f["at_load"].as_f64()),
        (Some(true), Some(8.0)),
        "{f}"
    );
    assert_eq!(f["percentile"], 99);
    assert_eq!(f["broken"], serde_json::json!(["TTFT p99"]));

    let out = infertop().arg("report").arg(&record).output().unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        md.contains(
            "TTFT p99 breaks the SLO first at concurrency 8; of the TTFT the queue grew most"
        ),
        "{md}"
    );
    assert!(
        md.contains("Where the TTFT went, by the server's own timings"),
        "{md}"
    );
    // Its table: a row per cell, each cell's prefill p50 the server's 40 ms.
    let table: Vec<&str> = md
        .split("Where the TTFT went, by the server's own timings (ms):\n\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(
        table[0].starts_with("| cell | conc | rate | n | TTFT p50 | p99 | queue p50 |"),
        "{md}"
    );
    assert_eq!(table.len(), 2 + cells.len(), "{md}");
    for row in &table[2..] {
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cols.len(), 15, "{row}");
        assert_eq!(cols[9], "40.000", "prefill p50 of {row}");
    }
}

/// `compare` of a run on a free server and one on a full one: the TTFT's change is the
/// queue's, the prefill did not move.
#[test]
fn compare_says_the_queue_moved_and_the_prefill_did_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = Vec::new();
    for (name, slots, concurrency) in [("free", 4, "2"), ("full", 1, "3")] {
        let url = server(Dialect::Vllm, Some(slots), Duration::ZERO);
        let record = dir.path().join(format!("{name}.jsonl"));
        let out = infertop()
            .args(["--endpoint", &url, "--served-model", "m"])
            .args([
                "--concurrency",
                concurrency,
                "--requests",
                "24",
                "-p",
                "8",
                "-n",
                "5",
            ])
            .args(["--headless", "--no-telemetry", "--record"])
            .arg(&record)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        records.push(record);
    }
    let out = infertop()
        .arg("compare")
        .args(&records)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let pair = &v["pairs"][0];
    assert_eq!(pair["split_moved_most"], "queue_s", "{pair}");
    let parts = pair["ttft_split"].as_array().unwrap();
    let verdict = |key: &str| {
        parts.iter().find(|p| p["part"] == key).unwrap()["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(verdict("queue_s"), "slower");
    assert_eq!(verdict("prefill_s"), "no_detectable_change");
    let out = infertop().arg("compare").args(&records).output().unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("Where the TTFT went (the servers' own timings)"),
        "{md}"
    );
    assert!(md.contains("The part that moved most: queue."), "{md}");
}
