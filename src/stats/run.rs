//! Per-run statistics: every finished request and decode step lands here once; views read
//! summaries computed from bounded windows.

use serde::{Deserialize, Serialize};

use super::{Summary, Window};
use crate::event::RequestDone;

/// Requests kept for exact steady-state / all-request percentiles (older ones fall out).
pub const REQUEST_WINDOW: usize = 100_000;
/// Decode steps kept for exact ITL percentiles.
pub const STEP_WINDOW: usize = 100_000;
/// The "last N" window.
pub const RECENT_REQUESTS: usize = 100;
/// ITL steps in the "last N" window.
pub const RECENT_STEPS: usize = 10_000;

/// The six metrics every table shows, in display order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2e,
    PrefillTokS,
    DecodeTokS,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2e,
        Metric::PrefillTokS,
        Metric::DecodeTokS,
    ];

    /// Key in JSON summaries (`ttft_s`, `decode_tok_s`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft_s",
            Metric::Tpot => "tpot_s",
            Metric::Itl => "itl_s",
            Metric::E2e => "e2e_s",
            Metric::PrefillTokS => "prefill_tok_s",
            Metric::DecodeTokS => "decode_tok_s",
        }
    }

    /// Row label in tables.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::E2e => "E2E",
            Metric::PrefillTokS => "prefill tok/s",
            Metric::DecodeTokS => "decode tok/s",
        }
    }

    /// Latencies are in seconds (lower is better); the others are rates (higher is better).
    pub fn is_latency(self) -> bool {
        !matches!(self, Metric::PrefillTokS | Metric::DecodeTokS)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which requests a summary covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// Every request since the start (or the last reset), warmup excluded unless asked.
    #[default]
    Steady,
    /// The last 100 requests (ITL: the last 10,000 steps).
    Recent,
    /// Every request including warmup.
    All,
}

impl WindowKind {
    pub fn next(self) -> Self {
        match self {
            WindowKind::Steady => WindowKind::Recent,
            WindowKind::Recent => WindowKind::All,
            WindowKind::All => WindowKind::Steady,
        }
    }

    pub fn label(self, include_warmup: bool) -> &'static str {
        match (self, include_warmup) {
            (WindowKind::Steady, false) => "steady state",
            (WindowKind::Steady, true) => "all requests (warmup included)",
            (WindowKind::Recent, false) => "last 100 steady",
            (WindowKind::Recent, true) => "last 100 (warmup included)",
            (WindowKind::All, _) => "all requests (warmup included)",
        }
    }
}

#[derive(Clone, Debug)]
struct MetricWindows {
    steady: Window,
    all: Window,
    recent_steady: Window,
    recent_all: Window,
    warmup: Window,
}

impl MetricWindows {
    fn new(long: usize, recent: usize) -> Self {
        Self {
            steady: Window::new(long),
            all: Window::new(long),
            recent_steady: Window::new(recent),
            recent_all: Window::new(recent),
            warmup: Window::new(long),
        }
    }

    fn push(&mut self, v: f64, warmup: bool) {
        self.all.push(v);
        self.recent_all.push(v);
        if warmup {
            self.warmup.push(v);
        } else {
            self.steady.push(v);
            self.recent_steady.push(v);
        }
    }

    fn clear(&mut self) {
        self.steady.clear();
        self.all.clear();
        self.recent_steady.clear();
        self.recent_all.clear();
        self.warmup.clear();
    }

    fn pick(&self, kind: WindowKind, include_warmup: bool) -> &Window {
        match (kind, include_warmup) {
            (WindowKind::Steady, false) => &self.steady,
            (WindowKind::Recent, false) => &self.recent_steady,
            (WindowKind::Recent, true) => &self.recent_all,
            (WindowKind::Steady, true) | (WindowKind::All, _) => &self.all,
        }
    }
}

/// One summary per metric, in `Metric::ALL` order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub rows: Vec<(Metric, Summary)>,
}

impl Table {
    pub fn get(&self, metric: Metric) -> Summary {
        self.rows
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }
}

/// The statistics of one run. Pushes are O(log n); summaries are one O(n) walk per metric, meant
/// to be taken at most once per frame and only when something changed.
#[derive(Clone, Debug)]
pub struct RunStats {
    metrics: Vec<MetricWindows>,
    requests: u64,
    warmup_requests: u64,
    steps: u64,
}

impl Default for RunStats {
    fn default() -> Self {
        Self::new()
    }
}

impl RunStats {
    pub fn new() -> Self {
        Self::with_capacity(REQUEST_WINDOW, STEP_WINDOW)
    }

    pub fn with_capacity(requests: usize, steps: usize) -> Self {
        let metrics = Metric::ALL
            .iter()
            .map(|m| match m {
                Metric::Itl => MetricWindows::new(steps, RECENT_STEPS),
                _ => MetricWindows::new(requests, RECENT_REQUESTS),
            })
            .collect();
        Self {
            metrics,
            requests: 0,
            warmup_requests: 0,
            steps: 0,
        }
    }

    /// Adds a finished request (everything but ITL, which comes per step).
    pub fn record_request(&mut self, r: &RequestDone) {
        self.requests += 1;
        if r.warmup {
            self.warmup_requests += 1;
        }
        self.push(Metric::Ttft, r.ttft_s, r.warmup);
        self.push(Metric::E2e, r.e2e_s, r.warmup);
        self.push(Metric::PrefillTokS, r.prefill_tok_s(), r.warmup);
        if let Some(tpot) = r.tpot_s {
            self.push(Metric::Tpot, tpot, r.warmup);
        }
        if let Some(rate) = r.decode_tok_s() {
            self.push(Metric::DecodeTokS, rate, r.warmup);
        }
    }

    /// Adds one decode step's inter-token latency.
    pub fn record_step(&mut self, itl_s: f64, warmup: bool) {
        self.steps += 1;
        self.push(Metric::Itl, itl_s, warmup);
    }

    fn push(&mut self, metric: Metric, v: f64, warmup: bool) {
        self.metrics[metric.index()].push(v, warmup);
    }

    /// Forgets everything (the `r` key / `Control::ResetStats`).
    pub fn reset(&mut self) {
        for m in &mut self.metrics {
            m.clear();
        }
        self.requests = 0;
        self.warmup_requests = 0;
        self.steps = 0;
    }

    /// Requests recorded since the start or the last reset.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    pub fn warmup_requests(&self) -> u64 {
        self.warmup_requests
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    pub fn summary(&self, metric: Metric, kind: WindowKind, include_warmup: bool) -> Summary {
        self.metrics[metric.index()]
            .pick(kind, include_warmup)
            .summary()
    }

    /// The summary of the warmup requests alone.
    pub fn warmup_summary(&self, metric: Metric) -> Summary {
        self.metrics[metric.index()].warmup.summary()
    }

    /// All six metrics for one window.
    pub fn table(&self, kind: WindowKind, include_warmup: bool) -> Table {
        Table {
            rows: Metric::ALL
                .iter()
                .map(|&m| (m, self.summary(m, kind, include_warmup)))
                .collect(),
        }
    }

    /// The six metrics over the warmup requests alone.
    pub fn warmup_table(&self) -> Table {
        Table {
            rows: Metric::ALL
                .iter()
                .map(|&m| (m, self.warmup_summary(m)))
                .collect(),
        }
    }
}
