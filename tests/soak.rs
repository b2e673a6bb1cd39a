//! A long run in seconds: one million decode-step events (plus their requests and telemetry)
//! from a fast synthetic source go through the dashboard's state (`App::apply`), the cached
//! statistics (`refresh`, once per frame as the dashboard does it), rendering into a
//! `TestBackend`, and the recorder (step lines off, to a temporary file). Memory must be flat
//! once the bounded windows are full: everything that grows with run length has a fixed size.
//!
//! Warm-up here is filling the windows: the statistics keep the last 100,000 requests
//! (`REQUEST_WINDOW`) and 100,000 decode steps (`STEP_WINDOW`) per window; at 3 decode steps per
//! request both are full after 300,000 steps. The test compares memory at 400,000 steps with
//! memory at 1,000,000, both as live heap bytes (the crate's counting allocator, exact) and as
//! resident memory (VmRSS).
//!
//! The million-step test is `#[ignore]`d: in the debug test profile the crate itself is not
//! optimised, a refresh over full 100,000-sample windows takes ~0.4 s and an event ~25 µs, so
//! it takes two to three minutes. Run it with `cargo test --test soak -- --ignored --nocapture`
//! (it prints the memory every 100,000 steps). `soak_smoke` runs the same path briefly.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use infertop::event::ModelInfo;
use infertop::event::Sample;
use infertop::event::{Event, RequestDone, RunInfo, WorkloadDesc};
use infertop::record::Recorder;
use infertop::stats::{REQUEST_WINDOW, STEP_WINDOW};
use infertop::summary::RunSummary;
use infertop::telemetry::alloc;
use infertop::ui::App;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// Decode steps in the whole soak.
const STEPS: u64 = 1_000_000;
/// Decode steps per request (output tokens 4).
const STEPS_PER_REQUEST: u64 = 3;
/// Where memory is compared: after the windows are full, and at the end.
const MEASURE_AT: u64 = 400_000;
/// A frame (refresh + draw) every this many events. The dashboard refreshes once per frame
/// (10 fps) whatever arrived; at a 1 ms decode step that is ~200 events per frame. Fewer
/// frames here keep the debug-profile run short; memory does not depend on how often.
const FRAME_EVERY_EVENTS: u64 = 10_000;
/// Allowed growth between `MEASURE_AT` and the end.
const MAX_GROWTH_BYTES: i64 = 4 << 20;

/// Resident memory of this process (VmRSS), in bytes.
fn rss_bytes() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// xorshift64*: latencies that differ from one another, as real ones do (the ordered windows
/// store one node per distinct value, so equal values would understate their memory).
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn model_info() -> ModelInfo {
    ModelInfo {
        name: "synthetic:soak".into(),
        arch: "llama".into(),
        source: infertop::event::ModelSource::Synthetic,
        params: 8_030_000_000,
        active_params: 8_030_000_000,
        weight_bytes: 16_060_000_000,
        kv_bytes_per_token: 131_072,
        kv_window: None,
        dtype: "bf16".into(),
        device: "cuda:0".into(),
        max_positions: 8192,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        vocab: 128_256,
        parts: None,
    }
}

struct Soak {
    app: App,
    terminal: Terminal<TestBackend>,
    recorder: Recorder,
    events: u64,
    frames: u64,
    events_at_last_frame: u64,
}

impl Soak {
    fn feed(&mut self, ev: Event) {
        let t_s = self.events as f64 * 1e-3;
        self.recorder.on_event(t_s, &ev);
        self.app.apply(&ev);
        self.events += 1;
        if self.events - self.events_at_last_frame >= FRAME_EVERY_EVENTS {
            self.frame();
        }
    }

    fn frame(&mut self) {
        self.app.tick(Duration::from_millis(self.events));
        self.app.refresh();
        self.terminal
            .draw(|f| infertop::ui::render::render(f, &self.app))
            .expect("draw");
        self.frames += 1;
        self.events_at_last_frame = self.events;
    }
}

/// Memory at one point of the soak.
struct Mark {
    steps: u64,
    heap: i64,
    rss: i64,
}

struct Soaked {
    app: App,
    steps: u64,
    requests: u64,
    record_lines: usize,
    marks: Vec<Mark>,
}

/// Feeds `total_steps` decode steps (and their requests and telemetry) through state, frames
/// and the recorder; marks memory every `mark_every` steps.
fn soak(total_steps: u64, mark_every: u64) -> Soaked {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("soak.jsonl");
    let recorder = Recorder::create(&path, infertop::record::line::Header::default(), false)
        .expect("recorder");
    let mut soak = Soak {
        app: App::default(),
        terminal: Terminal::new(TestBackend::new(160, 48)).expect("terminal"),
        recorder,
        events: 0,
        frames: 0,
        events_at_last_frame: 0,
    };
    let workload = WorkloadDesc {
        prompt_tokens: "512".into(),
        output_tokens: "4".into(),
        batch: 1,
        load: None,
    };
    soak.feed(Event::RunStarted(Box::new(RunInfo {
        model: model_info(),
        workload: workload.clone(),
        warmup_requests: 2,
        threads: 0,
        traffic: None,
        peak: None,
    })));

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut steps = 0u64;
    let mut index = 0u64;
    let mut marks = Vec::new();
    while steps < total_steps {
        let warmup = index < 2;
        soak.feed(Event::RequestStarted {
            index,
            warmup,
            prompt_tokens: 512,
            output_tokens: 4,
            batch: 1,
        });
        let ttft = 0.020 + 0.005 * rng.next_f64();
        soak.feed(Event::PrefillDone {
            index,
            ttft_s: ttft,
        });
        let mut decode = 0.0;
        for step in 1..=STEPS_PER_REQUEST {
            let itl = 0.008 + 0.002 * rng.next_f64();
            decode += itl;
            soak.feed(Event::decode_step(
                index,
                step as u32,
                itl,
                Some(itl * 0.97),
            ));
            steps += 1;
            if steps.is_multiple_of(mark_every) {
                marks.push(Mark {
                    steps,
                    heap: alloc::current_bytes() as i64,
                    rss: rss_bytes(),
                });
            }
        }
        let done = RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 512,
            output_tokens: 4,
            ttft_s: ttft,
            tpot_s: Some(decode / STEPS_PER_REQUEST as f64),
            e2e_s: ttft + decode,
            gpu_ttft_s: Some(ttft * 0.95),
            gpu_decode_s: Some(decode * 0.97),
            peak_alloc_bytes: Some(17_000_000_000 + (index % 1000) * 4096),
            output_hash: format!("{:016x}", index % 7),
            ..Default::default()
        };
        soak.feed(Event::RequestDone(Box::new(done)));
        if index.is_multiple_of(50) {
            soak.feed(Event::Telemetry(Box::new(Sample {
                t_s: soak.events as f64 * 1e-3,
                rss_bytes: Some(2_000_000_000),
                device_used_bytes: Some(17_000_000_000 + (index % 100) * 1_000_000),
                device_total_bytes: Some(80_000_000_000),
                power_w: Some(300.0 + 100.0 * rng.next_f64()),
                ..Sample::default()
            })));
        }
        index += 1;
    }
    soak.frame();
    let summary = RunSummary::from_stats(&soak.app.run.stats);
    soak.recorder
        .finish(&infertop::event::StopReason::RequestLimit, 0.0, &summary);
    assert!(
        soak.recorder.error().is_none(),
        "{:?}",
        soak.recorder.error()
    );

    let lines = std::fs::read_to_string(&path)
        .expect("record")
        .lines()
        .count();
    eprintln!(
        "soak: {steps} decode steps, {index} requests, {} events, {} frames, {lines} record lines in {:.1} s",
        soak.events,
        soak.frames,
        started.elapsed().as_secs_f64()
    );
    for m in &marks {
        eprintln!(
            "  at {:>9} steps: heap {:>7.2} MB, RSS {:>7.2} MB",
            m.steps,
            m.heap as f64 / 1e6,
            m.rss as f64 / 1e6
        );
    }
    Soaked {
        app: soak.app,
        steps,
        requests: index,
        record_lines: lines,
        marks,
    }
}

/// The same path, briefly, in every test run: the record gets the header, one line per request
/// and per telemetry sample, and the footer (no step lines).
#[test]
fn soak_smoke() {
    let s = soak(30_000, 10_000);
    assert_eq!(s.app.run.stats.steps(), s.steps);
    assert_eq!(s.app.run.stats.requests(), s.requests);
    let telemetry = s.requests.div_ceil(50) as usize;
    assert_eq!(s.record_lines, 1 + 1 + s.requests as usize + telemetry + 1);
}

#[test]
#[ignore = "two to three minutes in the debug profile; run with --ignored"]
fn a_million_decode_steps_keep_memory_flat() {
    let s = soak(STEPS, 100_000);
    let at = |steps| {
        s.marks
            .iter()
            .find(|m| m.steps == steps)
            .expect("a mark at that step")
    };
    let (mid, end) = (at(MEASURE_AT), at(STEPS));
    eprintln!(
        "  growth {MEASURE_AT} -> {STEPS} steps: heap {:+.3} MB, RSS {:+.3} MB",
        (end.heap - mid.heap) as f64 / 1e6,
        (end.rss - mid.rss) as f64 / 1e6
    );
    // The windows are full and no fuller.
    let n = |m| {
        s.app
            .run
            .stats
            .summary(m, infertop::stats::WindowKind::All, true)
            .n
    };
    assert_eq!(n(infertop::stats::Metric::Ttft), REQUEST_WINDOW);
    assert_eq!(n(infertop::stats::Metric::Itl), STEP_WINDOW);
    assert!(
        end.heap - mid.heap < MAX_GROWTH_BYTES,
        "heap grew {} bytes after warm-up",
        end.heap - mid.heap
    );
    assert!(
        end.rss - mid.rss < MAX_GROWTH_BYTES,
        "RSS grew {} bytes after warm-up",
        end.rss - mid.rss
    );
}
