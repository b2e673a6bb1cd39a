//! The record-fed dashboards (issue 25), through their real parts:
//!
//! - `replay`: a 1,000,000-request record (a server run's lines: 64 requests in flight, each
//!   line as the recorder writes it) played as fast as it reads: the player thread reads,
//!   parses and reorders the lines (`record::feed`), the screen folds every event into the
//!   dashboard's state (`ui::feed::FeedScreen`) and draws a 200x60 frame every 100 ms on a
//!   `TestBackend`, as the screen loop does at 10 fps. Target: ≤ 10 s for the whole record.
//! - `follow`: 8 record files, each written by a thread at 1,000 requests/s (a line per
//!   request, in batches every 10 ms), followed by the real file sources
//!   (`session::follow::follow_files`) into one merged screen at 10 fps. Reported: the UI's
//!   work per frame (drain, refresh, draw) against its 100 ms budget, and how long after its
//!   write each line was folded in (target ≤ 200 ms).
//!
//! The replay also times the player alone (its events counted, not folded), which says how
//! much of the whole is the dashboard's fold: the run's own statistics (exact 100k windows per
//! metric and per endpoint), as a live run pays them per request.
//!
//! Run: `cargo bench --bench replay` (about a minute); `-- --quick` for a short check.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::TryRecvError;
use infertop::event::{RequestDone, StopReason, WorkloadDesc};
use infertop::record::feed::{FeedEvent, Speed};
use infertop::record::line::{EventLine, Footer, Header, Line, RequestLine, RunEvent};
use infertop::ui::feed::FeedScreen;
use infertop::ui::state::Producer;
use infertop::ui::{App, Screen};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

const FRAME: Duration = Duration::from_millis(100);

fn request(index: u64, rng: &mut u64) -> RequestDone {
    // A small xorshift: distinct, repeatable timings without a clock.
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let u = (*rng >> 11) as f64 / (1u64 << 53) as f64;
    let ttft_s = 0.020 + 0.030 * u;
    let tpot_s = 0.008 + 0.004 * u;
    RequestDone {
        index,
        warmup: index < 8,
        batch: 1,
        prompt_tokens: 512,
        output_tokens: 64,
        ttft_s,
        tpot_s: Some(tpot_s),
        e2e_s: ttft_s + 63.0 * tpot_s,
        gpu_ttft_s: None,
        gpu_decode_s: None,
        itl_max_s: None,
        peak_alloc_bytes: None,
        output_hash: format!("{:016x}", *rng),
        tokens: None,
        text: None,
        client: Some(Box::new(infertop::event::ClientDetail {
            endpoint: "http://10.0.0.1:8000".into(),
            send_delay_s: 0.0,
            output_tokens_from: "usage".into(),
            prompt_tokens_from: "usage".into(),
            requested_prompt_tokens: 512,
            content_chunks: 64,
            chunk_tokens: Vec::new(),
            finish_reason: Some("length".into()),
            ..Default::default()
        })),
        origin: None,
        model: None,
        parts: None,
    }
}

fn header_lines(out: &mut impl Write) {
    let header = Line::Header(Box::new(Header {
        infertop_version: "0.1.0".into(),
        record_format: infertop::record::line::RECORD_FORMAT,
        ..Header::default()
    }));
    writeln!(out, "{}", header.to_json()).unwrap();
    let started = Line::Event(EventLine {
        t_s: 0.0,
        event: RunEvent::RunStarted {
            model: common::model(),
            workload: WorkloadDesc {
                prompt_tokens: "512".into(),
                output_tokens: "64".into(),
                batch: 1,
                load: Some("concurrency 64".into()),
            },
            traffic: None,
            peak: None,
        },
    });
    writeln!(out, "{}", started.to_json()).unwrap();
}

/// A server run's record of `n` requests: 64 in flight, a line as each ends.
fn write_record(path: &Path, n: u64) -> u64 {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    header_lines(&mut out);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut t = 0.0;
    for i in 0..n {
        let r = request(i, &mut rng);
        // 64 streams: one ends every e2e/64 seconds.
        t += r.e2e_s / 64.0;
        writeln!(
            out,
            "{}",
            Line::Request(RequestLine::of(&r, Some(t))).to_json()
        )
        .unwrap();
    }
    let footer = Line::Footer(Footer {
        stop: StopReason::RequestLimit,
        elapsed_s: t,
        summary: serde_json::json!({}),
    });
    writeln!(out, "{}", footer.to_json()).unwrap();
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

fn draw(terminal: &mut Terminal<TestBackend>, screen: &mut FeedScreen) -> Duration {
    let t = Instant::now();
    screen.refresh();
    terminal.draw(|f| screen.draw(f)).unwrap();
    t.elapsed()
}

fn replay(dir: &Path, n: u64) {
    let path = dir.join("replay.jsonl");
    let t = Instant::now();
    let bytes = write_record(&path, n);
    println!(
        "replay: wrote {n} requests ({:.0} MB) in {:.1} s",
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    // The player alone (read, parse, reorder, send), its events only counted: the part that
    // is not the dashboard's fold.
    {
        let (tx, rx) = crossbeam_channel::bounded(infertop::event::EVENT_QUEUE);
        let (_ctl_tx, ctl_rx) = crossbeam_channel::unbounded();
        let started = Instant::now();
        let player =
            infertop::session::replay::spawn_player(&path, Speed::Max, false, tx, ctl_rx).unwrap();
        let is_done = |ev: &FeedEvent| {
            matches!(
                ev,
                FeedEvent::Run {
                    event: infertop::event::Event::RequestDone(_),
                    ..
                }
            )
        };
        let done: usize = rx
            .iter()
            .map(|ev| match &ev {
                FeedEvent::Batch(evs) => evs.iter().filter(|e| is_done(e)).count(),
                e => usize::from(is_done(e)),
            })
            .sum();
        player.join().unwrap();
        assert_eq!(done as u64, n);
        println!(
            "replay: the player alone (read, parse, reorder, send): {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    let (tx, rx) = crossbeam_channel::bounded(infertop::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded();
    let started = Instant::now();
    let player =
        infertop::session::replay::spawn_player(&path, Speed::Max, false, tx, ctl_rx).unwrap();
    let mut screen = FeedScreen::new(
        App::default(),
        Producer::Replay,
        vec!["replay.jsonl".into()],
        Some(ctl_tx),
    );
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let mut next_frame = Instant::now();
    let mut frames = 0u32;
    let mut draw_total = Duration::ZERO;
    loop {
        let mut gone = false;
        // As the screen loop: drain what is there, at most 100,000 messages or 50 ms, then a
        // frame.
        let drain_started = Instant::now();
        for i in 0..100_000 {
            if i % 64 == 63 && drain_started.elapsed() >= Duration::from_millis(50) {
                break;
            }
            match rx.try_recv() {
                Ok(ev) => {
                    screen.apply(&ev);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    gone = true;
                    break;
                }
            }
        }
        if Instant::now() >= next_frame || gone {
            draw_total += draw(&mut terminal, &mut screen);
            frames += 1;
            next_frame += FRAME;
        }
        if gone {
            break;
        }
        if rx.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    player.join().unwrap();
    let took = started.elapsed().as_secs_f64();
    let n_seen = screen.app.run.completed_requests;
    assert_eq!(n_seen, n, "every request folded");
    println!(
        "replay: {n} requests at full speed in {took:.2} s ({:.0}k requests/s, {frames} frames \
         drawn, {:.1} ms per frame); target ≤ 10 s for 1,000,000",
        n as f64 / took / 1e3,
        draw_total.as_secs_f64() * 1e3 / frames.max(1) as f64
    );
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let pos = q / 100.0 * (v.len().saturating_sub(1)) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn follow(dir: &Path, seconds: u64) {
    const SOURCES: usize = 8;
    const RATE: u64 = 1000;
    let paths: Vec<PathBuf> = (0..SOURCES)
        .map(|i| dir.join(format!("gen{i}.jsonl")))
        .collect();
    // When each source's k-th request line was written.
    let written: Vec<Arc<Mutex<Vec<Instant>>>> = (0..SOURCES)
        .map(|_| Arc::new(Mutex::new(Vec::new())))
        .collect();
    for p in &paths {
        let mut f = std::fs::File::create(p).unwrap();
        header_lines(&mut f);
    }
    let t0 = Instant::now();
    let total = RATE * seconds;
    let writers: Vec<_> = paths
        .iter()
        .zip(&written)
        .enumerate()
        .map(|(k, (p, w))| {
            let (p, w) = (p.clone(), w.clone());
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
                let mut rng = 0x1234_5678u64 + k as u64;
                let mut i = 0u64;
                let mut buf = String::new();
                while i < total {
                    // Due: RATE per second since t0, written in 10 ms batches.
                    let due = ((t0.elapsed().as_secs_f64() * RATE as f64) as u64).min(total);
                    buf.clear();
                    let from = i;
                    while i < due {
                        let r = request(i, &mut rng);
                        let t = t0.elapsed().as_secs_f64();
                        buf.push_str(&Line::Request(RequestLine::of(&r, Some(t))).to_json());
                        buf.push('\n');
                        i += 1;
                    }
                    if i > from {
                        f.write_all(buf.as_bytes()).unwrap();
                        let now = Instant::now();
                        w.lock().unwrap().extend((from..i).map(|_| now));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let footer = Line::Footer(Footer {
                    stop: StopReason::RequestLimit,
                    elapsed_s: t0.elapsed().as_secs_f64(),
                    summary: serde_json::json!({}),
                });
                writeln!(f, "{}", footer.to_json()).unwrap();
            })
        })
        .collect();
    let (tx, rx) = crossbeam_channel::bounded::<FeedEvent>(infertop::event::EVENT_QUEUE);
    let stop = infertop::session::follow::follow_files(&paths, tx).unwrap();
    let names = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut screen = FeedScreen::new(App::default(), Producer::Follow, names, None);
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let mut work_ms = Vec::new();
    let mut lag_ms = Vec::new();
    let mut seen = [0u64; SOURCES];
    let mut next_frame = Instant::now();
    let deadline = t0 + Duration::from_secs(seconds + 30);
    while !screen.finished() && Instant::now() < deadline {
        let t = Instant::now();
        for _ in 0..100_000 {
            match rx.try_recv() {
                Ok(ev) => {
                    screen.apply(&ev);
                }
                Err(_) => break,
            }
        }
        screen.tick(t0.elapsed());
        let drained = Instant::now();
        for (k, row) in screen.sources.iter().enumerate() {
            let w = written[k].lock().unwrap();
            for c in seen[k]..row.requests {
                if let Some(at) = w.get(c as usize) {
                    lag_ms.push(drained.duration_since(*at).as_secs_f64() * 1e3);
                }
            }
            seen[k] = row.requests;
        }
        if drained >= next_frame {
            draw(&mut terminal, &mut screen);
            work_ms.push(t.elapsed().as_secs_f64() * 1e3);
            next_frame += FRAME;
        }
        // The screen loop waits for input up to 50 ms; a tick less here to sample the lag.
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let folded: u64 = screen.sources.iter().map(|r| r.requests).sum();
    println!(
        "follow: {SOURCES} sources x {RATE} requests/s for {seconds} s: {folded} of {} requests \
         folded, table n {}",
        SOURCES as u64 * total,
        screen.app.views.table.get(infertop::stats::Metric::Ttft).n
    );
    println!(
        "follow: UI work per frame (drain + refresh + draw 200x60): p50 {:.2} ms, p99 {:.2} ms, \
         max {:.2} ms of the 100 ms budget ({} frames)",
        percentile(&mut work_ms, 50.0),
        percentile(&mut work_ms, 99.0),
        work_ms.iter().copied().fold(0.0, f64::max),
        work_ms.len()
    );
    println!(
        "follow: write to fold: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (target ≤ 200 ms; \
         files are polled every 50 ms)",
        percentile(&mut lag_ms, 50.0),
        percentile(&mut lag_ms, 99.0),
        lag_ms.iter().copied().fold(0.0, f64::max)
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dir = tempfile::tempdir().unwrap();
    replay(dir.path(), if quick { 20_000 } else { 1_000_000 });
    follow(dir.path(), if quick { 2 } else { 20 });
}
