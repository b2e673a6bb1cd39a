//! Synthetic event streams at a chosen rate, for the screen-cost benches and the regression
//! test that compares bytes per second at two rates (`tests/ui_rate.rs` includes this file).
//!
//! `RateFeed` is a server at a fixed arrival rate: request `i` starts at `i / rate` seconds,
//! its TTFT is about 20 ms and each of its decode steps about 2 ms, so many requests are in
//! flight at once (at 1,000 requests/s and 100 steps each, about 220) and the steps of
//! different requests interleave, as they do at high concurrency. Timings come from a fixed
//! xorshift sequence and do not depend on the rate: at any rate the screen shows the same
//! distributions, only more or fewer samples of them. One request in 1,000 has a TTFT three
//! times the usual (an outlier for the events pane and the charts' `!`). A telemetry sample
//! comes every 100 ms of run time. Decode steps come out as the engines send them
//! (`event::StepBatch`): a step within `STEP_BATCH` of the last send waits for the next step
//! past it or the next other event, and goes with it. No wall-clock time: the caller says how
//! far to go.
//!
//! `screen_bytes` draws the real dashboard from such a feed at 10 frames per simulated second
//! through the real backend stack (`Coalesce` over `CrosstermBackend`), calling the `Screen`
//! methods the loop calls, and counts the bytes written.

#![allow(dead_code)] // each binary uses part of it

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;
use std::time::{Duration, Instant};

use infertop::event::{
    DecodeStep, Event, ModelInfo, RequestDone, RunInfo, Sample, WorkloadDesc, STEP_BATCH,
};

/// Warmup requests at the start of every rate feed.
pub const RATE_WARMUP: u64 = 3;

/// Events at a fixed request rate, in simulated time.
pub struct RateFeed {
    rate: f64,
    steps: u32,
    seed: u64,
    /// The next request to start.
    next: u64,
    next_sample: f64,
    /// Events generated but not yet taken, by (time in ns, sequence number).
    pending: BTreeMap<(u64, u64), Event>,
    seq: u64,
    /// Steps held as `StepBatch` holds them, and when steps were last sent.
    held: Vec<DecodeStep>,
    sent: Option<f64>,
}

fn model() -> ModelInfo {
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

impl RateFeed {
    /// `rate` requests per second, each with `steps` decode steps (so `rate * steps` decode
    /// steps per second).
    pub fn new(rate: f64, steps: u32) -> RateFeed {
        let mut feed = RateFeed {
            rate: rate.max(1e-3),
            steps,
            seed: 0x2545_f491_4f6c_dd1d,
            next: 0,
            next_sample: 0.0,
            pending: BTreeMap::new(),
            seq: 0,
            held: Vec::new(),
            sent: None,
        };
        feed.push(
            0.0,
            Event::Loading {
                what: "synthetic weights".into(),
                done: 18_480_000,
                total: 18_480_000,
            },
        );
        feed.push(
            0.0,
            Event::RunStarted(Box::new(RunInfo {
                model: model(),
                workload: WorkloadDesc {
                    prompt_tokens: "128".into(),
                    output_tokens: (steps + 1).to_string(),
                    batch: 1,
                    load: Some(format!("rate {rate}/s")),
                },
                warmup_requests: RATE_WARMUP,
                threads: 2,
                traffic: None,
                peak: None,
            })),
        );
        feed
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 11) as f64 / (1u64 << 53) as f64
    }

    fn push(&mut self, t: f64, ev: Event) {
        let ns = (t.max(0.0) * 1e9).round() as u64;
        self.pending.insert((ns, self.seq), ev);
        self.seq += 1;
    }

    /// Generates request `index`, which starts at `start`.
    fn request(&mut self, index: u64, start: f64) {
        let warmup = index < RATE_WARMUP;
        let slow = if warmup { 3.0 } else { 1.0 };
        let spike = if index % 1000 == 500 { 3.0 } else { 1.0 };
        let ttft_s = 0.020 * (1.0 + 0.1 * self.unit()) * slow * spike;
        self.push(
            start,
            Event::RequestStarted {
                index,
                warmup,
                prompt_tokens: 128,
                output_tokens: self.steps as usize + 1,
                batch: 1,
            },
        );
        let mut t = start + ttft_s;
        self.push(t, Event::PrefillDone { index, ttft_s });
        for step in 1..=self.steps {
            let u = self.unit();
            let itl_s = 0.002 * (1.0 + 0.1 * u) * slow * if u > 0.99 { 3.0 } else { 1.0 };
            t += itl_s;
            self.push(t, Event::decode_step(index, step, itl_s, None));
        }
        let e2e_s = t - start;
        let tpot_s = (self.steps > 0).then(|| (e2e_s - ttft_s) / f64::from(self.steps));
        self.push(
            t,
            Event::RequestDone(Box::new(RequestDone {
                index,
                warmup,
                batch: 1,
                prompt_tokens: 128,
                output_tokens: self.steps as usize + 1,
                ttft_s,
                tpot_s,
                e2e_s,
                ..Default::default()
            })),
        );
    }

    /// Every event up to run time `t` (seconds), oldest first, with its time.
    pub fn until(&mut self, t: f64, out: &mut Vec<(f64, Event)>) {
        loop {
            let start = self.next as f64 / self.rate;
            if start > t {
                break;
            }
            self.request(self.next, start);
            self.next += 1;
        }
        while self.next_sample <= t {
            let t_s = self.next_sample;
            let wobble = (self.unit() * 8.0) as u64;
            self.push(
                t_s,
                Event::Telemetry(Box::new(Sample {
                    t_s,
                    rss_bytes: Some((96 + wobble) << 20),
                    rss_peak_bytes: Some(120 << 20),
                    alloc_bytes: Some((40 + wobble) << 20),
                    alloc_peak_bytes: Some(64 << 20),
                    ..Sample::default()
                })),
            );
            self.next_sample += 0.1;
        }
        let limit = (t.max(0.0) * 1e9).round() as u64;
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > limit {
                break;
            }
            let t_s = entry.key().0 as f64 / 1e9;
            match entry.remove() {
                Event::DecodeSteps(steps) => {
                    self.held.extend(steps);
                    if self
                        .sent
                        .is_none_or(|s| t_s - s >= STEP_BATCH.as_secs_f64())
                    {
                        self.send_held(t_s, out);
                    }
                }
                other => {
                    self.send_held(t_s, out);
                    out.push((t_s, other));
                }
            }
        }
    }

    fn send_held(&mut self, t_s: f64, out: &mut Vec<(f64, Event)>) {
        if !self.held.is_empty() {
            let held = std::mem::replace(&mut self.held, infertop::event::spare_steps());
            out.push((t_s, Event::DecodeSteps(held)));
            self.sent = Some(t_s);
        }
    }
}

/// A writer that only counts.
#[derive(Clone, Default)]
pub struct Counter(pub Rc<Cell<u64>>);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.set(self.0.get() + buf.len() as u64);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What `screen_bytes` measured.
#[derive(Clone, Copy, Debug)]
pub struct ScreenBytes {
    /// Bytes per second of simulated time, after the warm-up.
    pub per_s: f64,
    /// Frames drawn in the measured span.
    pub frames: u64,
    /// Requests the dashboard counted by the end.
    pub requests: u64,
    /// Seconds spent, per second of simulated time after the warm-up, folding the events
    /// (`tick` and `apply`) and on the screen (`refresh` and `draw`, through the backend):
    /// what the dashboard thread would spend, less the terminal's `write(2)`.
    pub fold_s_per_s: f64,
    pub screen_s_per_s: f64,
}

/// The dashboard fed by `RateFeed::new(rate, steps)` at `w`x`h`, drawn at `fps` frames per
/// simulated second through `Coalesce<CrosstermBackend>`: the bytes written per second over
/// `secs` seconds after `warm` seconds.
pub fn screen_bytes(
    w: u16,
    h: u16,
    rate: f64,
    steps: u32,
    fps: u32,
    warm: f64,
    secs: f64,
) -> ScreenBytes {
    use infertop::ui::coalesce::Coalesce;
    use infertop::ui::{App, AppConfig, Screen};
    use ratatui::backend::CrosstermBackend;
    use ratatui::layout::{Rect, Size};
    use ratatui::{Terminal, TerminalOptions, Viewport};

    let counter = Counter::default();
    let backend = Coalesce::with_size(CrosstermBackend::new(counter.clone()), Size::new(w, h));
    let mut terminal = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, w, h)),
        },
    )
    .unwrap_or_else(|e| panic!("terminal: {e}"));
    let mut app = App::new(AppConfig::default());
    let mut feed = RateFeed::new(rate, steps);
    let mut events = Vec::new();
    let total = ((warm + secs) * f64::from(fps)).round() as u64;
    let first = (warm * f64::from(fps)).round() as u64;
    let mut at_first = 0;
    let (mut fold, mut screen) = (Duration::ZERO, Duration::ZERO);
    for frame in 1..=total {
        let t = frame as f64 / f64::from(fps);
        feed.until(t, &mut events);
        let t0 = Instant::now();
        for (et, ev) in events.drain(..) {
            Screen::tick(&mut app, Duration::from_secs_f64(et));
            Screen::apply(&mut app, &ev);
        }
        Screen::tick(&mut app, Duration::from_secs_f64(t));
        let t1 = Instant::now();
        Screen::refresh(&mut app);
        infertop::ui::coalesce::draw_parts(&mut terminal, |f, parts| {
            Screen::draw_parts(&app, f, parts)
        })
        .unwrap_or_else(|e| panic!("draw: {e}"));
        if frame > first {
            fold += t1 - t0;
            screen += t1.elapsed();
        }
        if frame == first {
            at_first = counter.0.get();
        }
    }
    ScreenBytes {
        per_s: (counter.0.get() - at_first) as f64 / secs,
        frames: total - first,
        requests: app.run.requests_done,
        fold_s_per_s: fold.as_secs_f64() / secs,
        screen_s_per_s: screen.as_secs_f64() / secs,
    }
}
