//! Per-run statistics: every finished request and decode step lands here once; views read
//! summaries computed from bounded windows.

use serde::{Deserialize, Serialize};

use std::borrow::Cow;
use std::collections::VecDeque;

use super::scale::{Axis, Histogram};
use super::window::{combined_summary, is_sample};
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

/// Which of the last `capacity` samples of one metric were warmup, run-length encoded (a run
/// has a few long runs: warmup first, then steady), so the "all" windows need no samples of
/// their own.
#[derive(Clone, Debug)]
struct Membership {
    capacity: usize,
    runs: VecDeque<(bool, u32)>,
    len: usize,
    warmup: usize,
}

impl Membership {
    fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            runs: VecDeque::new(),
            len: 0,
            warmup: 0,
        }
    }

    fn push(&mut self, warmup: bool) {
        self.push_n(warmup, 1);
    }

    /// `n` samples of the same kind, then the oldest evicted down to the capacity.
    fn push_n(&mut self, warmup: bool, n: usize) {
        let mut left = n;
        while left > 0 {
            let take = match self.runs.back_mut() {
                Some((w, count)) if *w == warmup && *count < u32::MAX => {
                    let take = left.min((u32::MAX - *count) as usize);
                    *count += take as u32;
                    take
                }
                _ => {
                    let take = left.min(u32::MAX as usize);
                    self.runs.push_back((warmup, take as u32));
                    take
                }
            };
            left -= take;
        }
        self.len += n;
        if warmup {
            self.warmup += n;
        }
        while self.len > self.capacity {
            let Some((w, count)) = self.runs.front_mut() else {
                break;
            };
            let w = *w;
            let drop = (*count as usize).min(self.len - self.capacity);
            *count -= drop as u32;
            if *count == 0 {
                self.runs.pop_front();
            }
            self.len -= drop;
            if w {
                self.warmup -= drop;
            }
        }
    }

    fn steady(&self) -> usize {
        self.len - self.warmup
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.len = 0;
        self.warmup = 0;
    }
}

/// One metric's samples. Only steady and warmup samples are stored (plus the last `recent`
/// steady ones); the windows that mix them ("all": the last `long` samples, warmup
/// included; "recent, warmup included": the last `recent`) are the newest samples of each,
/// in the proportions `Membership` counts, summarised without being built. The recent
/// windows are the newest `recent` samples of the long ones, copied out when they are read
/// (a table is read twice a second, a decode step pushed up to 100,000 times), so every
/// sample is one window push.
#[derive(Clone, Debug)]
struct MetricWindows {
    steady: Window,
    warmup: Window,
    /// How many samples the recent windows hold (at most the long windows' capacity).
    recent: usize,
    all: Membership,
    recent_all: Membership,
}

impl MetricWindows {
    fn new(long: usize, recent: usize) -> Self {
        // The recent mixed window takes its warmup samples from the long warmup window.
        let recent = recent.min(long);
        Self {
            steady: Window::new(long),
            warmup: Window::new(long),
            recent,
            all: Membership::new(long),
            recent_all: Membership::new(recent),
        }
    }

    fn push(&mut self, v: f64, warmup: bool) {
        if !is_sample(v) {
            return;
        }
        self.all.push(warmup);
        self.recent_all.push(warmup);
        if warmup {
            self.warmup.push(v);
        } else {
            self.steady.push(v);
        }
    }

    /// Several samples of the same kind (a request's decode steps): the same as pushing them
    /// one by one, with the membership counted once.
    fn push_all(&mut self, values: &[f64], warmup: bool) {
        let n = values.iter().filter(|&&v| is_sample(v)).count();
        if n == 0 {
            return;
        }
        self.all.push_n(warmup, n);
        self.recent_all.push_n(warmup, n);
        let samples = values.iter().copied().filter(|&v| is_sample(v));
        let window = if warmup {
            &mut self.warmup
        } else {
            &mut self.steady
        };
        samples.for_each(|v| window.push(v));
    }

    fn clear(&mut self) {
        self.steady.clear();
        self.warmup.clear();
        self.all.clear();
        self.recent_all.clear();
    }

    /// The last `recent` steady samples, as a window of their own.
    fn recent_steady(&self) -> Window {
        self.steady.newest(self.recent)
    }

    fn summary(&self, kind: WindowKind, include_warmup: bool) -> Summary {
        let mixed = |steady: &Window, m: &Membership| {
            combined_summary(steady, m.steady(), &self.warmup, m.warmup)
        };
        match (kind, include_warmup) {
            (WindowKind::Steady, false) => self.steady.summary(),
            (WindowKind::Recent, false) => self.recent_steady().summary(),
            (WindowKind::Recent, true) => mixed(&self.recent_steady(), &self.recent_all),
            (WindowKind::Steady, true) | (WindowKind::All, _) => mixed(&self.steady, &self.all),
        }
    }
}

impl MetricWindows {
    /// The windows whose samples a histogram of this window counts: the window itself when it
    /// is stored, else the stored steady and warmup windows it mixes (in full: their n can
    /// exceed the mixed window's once the long window has wrapped).
    fn parts(&self, kind: WindowKind, include_warmup: bool) -> Vec<Cow<'_, Window>> {
        let recent = || Cow::Owned(self.recent_steady());
        let (steady, warmup) = (Cow::Borrowed(&self.steady), Cow::Borrowed(&self.warmup));
        match (kind, include_warmup) {
            (WindowKind::Steady, false) => vec![steady],
            (WindowKind::Recent, false) => vec![recent()],
            (WindowKind::Recent, true) => vec![recent(), warmup],
            (WindowKind::Steady, true) | (WindowKind::All, _) => vec![steady, warmup],
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

    /// Puts `s` in the row of `metric` (a new row at the end when there is none).
    pub fn set(&mut self, metric: Metric, s: Summary) {
        match self.rows.iter_mut().find(|r| r.0 == metric) {
            Some(row) => row.1 = s,
            None => self.rows.push((metric, s)),
        }
    }
}

/// The statistics of one run. A sample is one window push (amortised tens of ns, see
/// `stats::window`); a summary is one walk over the block lengths (O(n / 128)), and a
/// recent view copies out its newest samples (O(recent)), cheap enough to recompute the
/// whole table twice a second.
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

    /// Adds a request's decode steps' inter-token latencies, in order: the same as
    /// `record_step` for each.
    pub fn record_steps(&mut self, itls_s: &[f64], warmup: bool) {
        self.steps += itls_s.len() as u64;
        self.metrics[Metric::Itl.index()].push_all(itls_s, warmup);
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
        self.metrics[metric.index()].summary(kind, include_warmup)
    }

    /// The summary of the warmup requests alone.
    pub fn warmup_summary(&self, metric: Metric) -> Summary {
        self.metrics[metric.index()].warmup.summary()
    }

    /// A histogram of one metric over a window in `bins` bins spanning its samples, on a log
    /// axis when the largest is more than `LOG_SPREAD` times the smallest.
    pub fn histogram(
        &self,
        metric: Metric,
        kind: WindowKind,
        include_warmup: bool,
        bins: usize,
    ) -> Option<Histogram> {
        let parts = self.metrics[metric.index()].parts(kind, include_warmup);
        let min = parts
            .iter()
            .filter_map(|w| w.min())
            .fold(f64::INFINITY, f64::min);
        let max = parts.iter().filter_map(|w| w.max()).fold(0.0f64, f64::max);
        if !min.is_finite() || bins == 0 {
            return None;
        }
        let axis = Axis::fit(min, max);
        let edges: Vec<f64> = (1..bins).map(|i| axis.at(i as f64 / bins as f64)).collect();
        let mut below = vec![0usize; edges.len()];
        let mut n = 0;
        for w in parts {
            n += w.len();
            for (b, c) in below.iter_mut().zip(w.counts_below(&edges)) {
                *b += c;
            }
        }
        let mut counts = Vec::with_capacity(bins);
        let mut prev = 0;
        for b in below.iter().copied().chain(std::iter::once(n)) {
            counts.push(b - prev);
            prev = b;
        }
        Some(Histogram { axis, counts, n })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The next value of a 64-bit LCG (Knuth's MMIX constants), its high 31 bits.
    fn lcg(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 33
    }

    /// The mixed windows, derived from steady + warmup, against windows fed directly with the
    /// same samples (bit-for-bit, mean included: the exact mean does not depend on order).
    /// Warmup comes first, interleaves (concurrent requests finishing out of order), and
    /// returns late; capacities are small so everything evicts many times.
    #[test]
    fn mixed_windows_match_windows_built_directly() {
        let (long, recent) = (50, 7);
        let mut m = MetricWindows::new(long, recent);
        let mut all = Window::new(long);
        let mut recent_all = Window::new(recent);
        let mut recent_steady = Window::new(recent);
        let mut x = 7u64;
        for i in 0..3_000u64 {
            let r = lcg(&mut x);
            let warmup = match i {
                0..=29 => true,
                30..=199 => r.is_multiple_of(3),
                1000..=1060 => r.is_multiple_of(2),
                _ => r.is_multiple_of(500),
            };
            let v = if r.is_multiple_of(5) {
                0.5
            } else {
                (r % 1000) as f64 * 0.00123
            };
            m.push(v, warmup);
            all.push(v);
            recent_all.push(v);
            if !warmup {
                recent_steady.push(v);
            }
            if i % 7 == 0 || (20..80).contains(&i) {
                assert_eq!(
                    m.summary(WindowKind::Recent, false),
                    recent_steady.summary(),
                    "i={i}"
                );
                assert_eq!(m.summary(WindowKind::All, false), all.summary(), "i={i}");
                assert_eq!(m.summary(WindowKind::Steady, true), all.summary());
                assert_eq!(
                    m.summary(WindowKind::Recent, true),
                    recent_all.summary(),
                    "i={i}"
                );
            }
        }
        m.push(f64::NAN, true);
        m.push(-1.0, false);
        assert_eq!(m.summary(WindowKind::All, false), all.summary());
        assert_eq!(m.summary(WindowKind::All, false).n, long);
    }

    /// A request's steps pushed together give what pushing them one by one gives, in every
    /// window, through evictions that cut runs of warmup and steady samples.
    #[test]
    fn steps_pushed_together_match_steps_pushed_one_by_one() {
        let (long, recent) = (60, 9);
        let mut together = MetricWindows::new(long, recent);
        let mut one_by_one = MetricWindows::new(long, recent);
        let mut x = 11u64;
        for i in 0..400u64 {
            let r = lcg(&mut x);
            let warmup = i < 5 || r.is_multiple_of(7);
            // 0 to 80 steps: some requests are longer than the long window.
            let steps: Vec<f64> = (0..r % 81)
                .map(|k| match (r + k) % 13 {
                    0 => f64::NAN,
                    _ => ((r >> 8) % 997 + k) as f64 * 1e-4,
                })
                .collect();
            together.push_all(&steps, warmup);
            for &v in &steps {
                one_by_one.push(v, warmup);
            }
            for kind in [WindowKind::Steady, WindowKind::Recent, WindowKind::All] {
                for warm in [false, true] {
                    assert_eq!(
                        together.summary(kind, warm),
                        one_by_one.summary(kind, warm),
                        "request {i}, {kind:?}, warmup included {warm}"
                    );
                }
            }
            assert_eq!(together.all.runs, one_by_one.all.runs, "request {i}");
            assert_eq!(together.recent_all.runs, one_by_one.recent_all.runs);
        }
    }

    #[test]
    fn reset_forgets_everything() {
        let mut s = RunStats::with_capacity(10, 10);
        for i in 0..30 {
            s.record_step(i as f64, i < 3);
        }
        s.reset();
        s.record_step(2.0, false);
        let t = s.summary(Metric::Itl, WindowKind::All, true);
        assert_eq!((t.n, t.mean, t.max), (1, 2.0, 2.0));
    }
}
