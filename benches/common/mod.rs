//! A fixed, realistic event sequence for the render, state and memory benches: what the
//! dashboard has seen after a long run (10,000 requests, 100,000 decode steps, a telemetry
//! sample every 100 ms of run time, workload changes and outliers in the events pane). No
//! wall-clock time: the clock is injected, as in the UI snapshot tests.

#![allow(dead_code)] // each bench binary uses part of it

pub mod env;
pub mod rate;

use std::time::Duration;

use infertop::event::ModelInfo;
use infertop::event::Sample;
use infertop::event::{Event, RequestDone, RunInfo, WorkloadDesc};
use infertop::ui::{App, AppConfig};

/// Requests in the standard feed.
pub const REQUESTS: u64 = 10_000;
/// Generated tokens per request: 10 decode steps each, so 100,000 steps in all.
pub const OUTPUT_TOKENS: usize = 11;
/// Warmup requests at the start of the feed.
pub const WARMUP: u64 = 2;

pub fn model() -> ModelInfo {
    ModelInfo {
        name: "synthetic:tiny".into(),
        arch: "llama".into(),
        source: infertop::event::ModelSource::Synthetic,
        params: 4_620_000,
        active_params: 4_620_000,
        weight_bytes: 18_480_000,
        kv_bytes_per_token: 4096,
        kv_window: None,
        dtype: "f32".into(),
        device: "cpu".into(),
        max_positions: 2048,
        layers: 4,
        hidden: 256,
        heads: 8,
        kv_heads: 4,
        head_dim: 32,
        vocab: 32000,
        parts: None,
    }
}

fn workload(prompt: usize) -> WorkloadDesc {
    WorkloadDesc {
        prompt_tokens: prompt.to_string(),
        output_tokens: OUTPUT_TOKENS.to_string(),
        batch: 1,
        load: None,
    }
}

/// A deterministic generator of realistic timings: every value distinct (as nanosecond
/// timings are), so the ordered windows hold one entry per sample, their worst case.
pub struct Feed {
    seed: u64,
    /// Simulated run time, seconds.
    pub t: f64,
    next_sample: f64,
    prompt: usize,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            seed: 0x2545_f491_4f6c_dd1d,
            t: 0.0,
            next_sample: 0.0,
            prompt: 128,
        }
    }
}

impl Feed {
    /// Uniform in [0, 1), from a fixed xorshift sequence.
    pub fn unit(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An inter-token latency around 2 ms with a long right tail.
    pub fn itl_s(&mut self) -> f64 {
        let u = self.unit();
        0.0019 + 0.0002 * u + if u > 0.99 { 0.004 * self.unit() } else { 0.0 }
    }

    fn ttft_s(&mut self, index: u64) -> f64 {
        let base = 0.020 * self.prompt as f64 / 128.0;
        // An outlier now and then, for the events pane.
        let spike = if index % 997 == 500 { 3.0 } else { 1.0 };
        (base + 0.002 * self.unit()) * spike
    }

    /// The events that start a run (model loaded).
    pub fn start(&mut self) -> Vec<(f64, Event)> {
        vec![
            (
                0.0,
                Event::Loading {
                    what: "synthetic weights".into(),
                    done: 18_480_000,
                    total: 18_480_000,
                },
            ),
            (
                0.35,
                Event::RunStarted(Box::new(RunInfo {
                    model: model(),
                    workload: workload(self.prompt),
                    warmup_requests: WARMUP,
                    threads: 2,
                    traffic: None,
                    peak: None,
                })),
            ),
        ]
    }

    /// The events of one whole request (with the telemetry samples due meanwhile), each with
    /// the simulated time it happens at.
    pub fn request(&mut self, index: u64, out: &mut Vec<(f64, Event)>) {
        // A workload change every 2,500 requests (a boundary marker, a line in the events pane).
        if index > 0 && index.is_multiple_of(2_500) {
            self.prompt = if self.prompt == 128 { 256 } else { 128 };
            out.push((
                self.t,
                Event::WorkloadChanged(Box::new(workload(self.prompt))),
            ));
        }
        let warmup = index < WARMUP;
        out.push((
            self.t,
            Event::RequestStarted {
                index,
                warmup,
                prompt_tokens: self.prompt,
                output_tokens: OUTPUT_TOKENS,
                batch: 1,
            },
        ));
        let ttft_s = self.ttft_s(index) * if warmup { 5.0 } else { 1.0 };
        let start = self.t;
        self.advance(ttft_s, out);
        out.push((self.t, Event::PrefillDone { index, ttft_s }));
        for step in 1..OUTPUT_TOKENS as u32 {
            let itl_s = self.itl_s();
            self.advance(itl_s, out);
            out.push((self.t, Event::decode_step(index, step, itl_s, None)));
        }
        let e2e_s = self.t - start;
        let tpot_s = (e2e_s - ttft_s) / (OUTPUT_TOKENS - 1) as f64;
        out.push((
            self.t,
            Event::RequestDone(Box::new(RequestDone {
                index,
                warmup,
                batch: 1,
                prompt_tokens: self.prompt,
                output_tokens: OUTPUT_TOKENS,
                ttft_s,
                tpot_s: Some(tpot_s),
                e2e_s,
                gpu_ttft_s: None,
                gpu_decode_s: None,
                itl_max_s: None,
                peak_alloc_bytes: Some(3 << 20),
                output_hash: format!("{:016x}", index.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                ..Default::default()
            })),
        ));
    }

    /// Moves the clock on, emitting the telemetry samples (every 100 ms) that fall due.
    fn advance(&mut self, dt: f64, out: &mut Vec<(f64, Event)>) {
        self.t += dt;
        while self.next_sample <= self.t {
            let t_s = self.next_sample;
            let wobble = (self.unit() * 8.0) as u64;
            out.push((
                t_s,
                Event::Telemetry(Box::new(Sample {
                    t_s,
                    rss_bytes: Some((96 + wobble) << 20),
                    rss_peak_bytes: Some(120 << 20),
                    alloc_bytes: Some((40 + wobble) << 20),
                    alloc_peak_bytes: Some(64 << 20),
                    ..Sample::default()
                })),
            ));
            self.next_sample += 0.1;
        }
    }
}

/// Applies the events to the app as the loop would: the clock first, then the event, and a
/// `refresh` every `refresh_every` requests (the loop refreshes once per frame).
pub fn feed_app(app: &mut App, feed: &mut Feed, from: u64, requests: u64, refresh_every: u64) {
    let mut events = Vec::new();
    if from == 0 {
        events = feed.start();
    }
    for (t, ev) in events.drain(..) {
        app.tick(Duration::from_secs_f64(t));
        app.apply(&ev);
    }
    for index in from..from + requests {
        feed.request(index, &mut events);
        for (t, ev) in events.drain(..) {
            app.tick(Duration::from_secs_f64(t));
            app.apply(&ev);
        }
        if (index + 1) % refresh_every == 0 {
            app.refresh();
        }
    }
    app.refresh();
}

/// An app that has seen the standard feed: full histories everywhere.
pub fn full_app() -> (App, Feed) {
    let mut app = App::new(AppConfig::default());
    let mut feed = Feed::default();
    feed_app(&mut app, &mut feed, 0, REQUESTS, 50);
    (app, feed)
}
