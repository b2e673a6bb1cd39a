//! A server's own latency histograms (Prometheus buckets, `--server-metrics` and `watch`):
//! percentiles as Prometheus' `histogram_quantile` computes them, and the sum of many windows'
//! bucket deltas, so that the server's percentiles over a whole run stand beside the client's.
//!
//! Buckets are `(upper bound, cumulative count)`, ascending, `+Inf` last, as the exposition
//! format has them. A window keeps only the buckets that decide any quantile (see `trim`).

use crate::event::{ServerHistograms, ServerQuantiles, ServerWindow};

/// Prometheus' histogram_quantile over cumulative buckets; `None` when there was no
/// observation. Linear within the bucket that holds the rank (from the previous bound, 0 for
/// the first); a rank in the `+Inf` bucket reads as the last finite bound.
pub fn quantiles(buckets: &[(f64, f64)]) -> Option<ServerQuantiles> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let q = |q: f64| {
        let rank = q * total;
        let mut lower = (0.0, 0.0);
        for &(le, cum) in buckets {
            if cum >= rank {
                if le.is_infinite() {
                    return lower.0;
                }
                let in_bucket = cum - lower.1;
                if in_bucket <= 0.0 {
                    return le;
                }
                return lower.0 + (le - lower.0) * (rank - lower.1) / in_bucket;
            }
            lower = (le, cum);
        }
        lower.0
    };
    Some(ServerQuantiles {
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        n: total.round() as u64,
    })
}

/// The buckets that decide every quantile: from the last empty one (the lower bound of the
/// first that has observations) to the first that holds them all. Quantiles of the result
/// equal those of the input; a window at steady load keeps a handful of its server's buckets.
pub fn trim(buckets: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let Some(&(_, total)) = buckets.last() else {
        return Vec::new();
    };
    if total <= 0.0 {
        return Vec::new();
    }
    let from = buckets.iter().rposition(|b| b.1 <= 0.0).unwrap_or(0);
    let to = buckets
        .iter()
        .position(|b| b.1 >= total)
        .unwrap_or(buckets.len() - 1);
    let mut kept = buckets[from..=to].to_vec();
    // The total must stay last, as the `+Inf` bucket carries it.
    if let Some(last) = kept.last_mut() {
        last.1 = total;
    }
    kept
}

/// Cumulative count at `le` of trimmed buckets: 0 below them, the total above them.
fn cumulative_at(buckets: &[(f64, f64)], le: f64) -> f64 {
    match buckets.iter().position(|b| b.0 >= le) {
        Some(i) if buckets[i].0 == le => buckets[i].1,
        Some(0) => 0.0,
        Some(i) => buckets[i - 1].1,
        None => buckets.last().map_or(0.0, |b| b.1),
    }
}

/// The sum of many windows' bucket deltas of one histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSum {
    buckets: Vec<(f64, f64)>,
}

impl HistogramSum {
    /// Adds one window's (trimmed or whole) cumulative buckets.
    pub fn add(&mut self, window: &[(f64, f64)]) {
        if window.last().is_none_or(|b| b.1 <= 0.0) {
            return;
        }
        let mut bounds: Vec<f64> = self
            .buckets
            .iter()
            .chain(window)
            .map(|b| b.0)
            .filter(|le| !le.is_nan())
            .collect();
        bounds.sort_by(f64::total_cmp);
        bounds.dedup();
        self.buckets = bounds
            .into_iter()
            .map(|le| {
                (
                    le,
                    cumulative_at(&self.buckets, le) + cumulative_at(window, le),
                )
            })
            .collect();
    }

    pub fn quantiles(&self) -> Option<ServerQuantiles> {
        quantiles(&self.buckets)
    }

    pub fn buckets(&self) -> &[(f64, f64)] {
        &self.buckets
    }
}

/// A server's windows added up: seconds covered, requests finished, preemptions, and its
/// TTFT / ITL / E2E histograms over all of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSpan {
    pub windows: u64,
    pub seconds: f64,
    pub requests: f64,
    pub preemptions: f64,
    pub ttft: HistogramSum,
    pub itl: HistogramSum,
    pub e2e: HistogramSum,
}

impl ServerSpan {
    pub fn add(&mut self, w: &ServerWindow) {
        self.windows += 1;
        self.seconds += w.seconds;
        self.requests += w.requests_per_s.unwrap_or(0.0) * w.seconds;
        self.preemptions += w.preemptions.unwrap_or(0.0);
        let ServerHistograms { ttft, itl, e2e } = &w.histograms;
        self.ttft.add(ttft);
        self.itl.add(itl);
        self.e2e.add(e2e);
    }

    /// The span's percentiles, in the `ServerWindow` shape (gauges left empty).
    pub fn summary(&self, server: &str) -> ServerSpanSummary {
        ServerSpanSummary {
            server: server.to_string(),
            windows: self.windows,
            seconds: self.seconds,
            requests: self.requests.round() as u64,
            preemptions: self.preemptions.round() as u64,
            ttft_s: self.ttft.quantiles(),
            itl_s: self.itl.quantiles(),
            e2e_s: self.e2e.quantiles(),
        }
    }
}

/// What the server's own histograms say over a run's steady state (summary and report).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerSpanSummary {
    pub server: String,
    pub windows: u64,
    pub seconds: f64,
    pub requests: u64,
    pub preemptions: u64,
    pub ttft_s: Option<ServerQuantiles>,
    pub itl_s: Option<ServerQuantiles>,
    pub e2e_s: Option<ServerQuantiles>,
}

/// The server's view of a run, folded from its windows in event order, by the run (live) and
/// by a record's reader (`report`) alike. The steady span adds only windows that began after
/// every warmup request had ended (the window in which warmup ends may hold some of it), and
/// starts again after a statistics reset, so it covers what the client's steady table covers;
/// other traffic on the server is in it too.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSteady {
    warmup_requests: u64,
    warmup_ended: u64,
    open: bool,
    /// The last window, for the live view (gauges, per-window percentiles).
    pub last: Option<ServerWindow>,
    pub span: ServerSpan,
    /// The span's percentiles, computed once per window.
    pub summary: Option<ServerSpanSummary>,
}

impl ServerSteady {
    pub fn new(warmup_requests: u64) -> ServerSteady {
        ServerSteady {
            warmup_requests,
            open: warmup_requests == 0,
            ..ServerSteady::default()
        }
    }

    /// A request ended, completed or failed.
    pub fn request_ended(&mut self, warmup: bool) {
        if warmup {
            self.warmup_ended += 1;
        }
    }

    pub fn window(&mut self, w: &ServerWindow) {
        if self.open {
            self.span.add(w);
            self.summary = Some(self.span.summary(&w.server));
        }
        self.open = self.warmup_ended >= self.warmup_requests;
        self.last = Some(w.clone());
    }

    /// Statistics reset: the span starts again from the next whole window.
    pub fn reset(&mut self) {
        self.span = ServerSpan::default();
        self.summary = None;
        self.open = false;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const INF: f64 = f64::INFINITY;

    #[test]
    fn histogram_quantile_as_prometheus_computes_it() {
        // 100 observations: 50 in (0, 0.1], 40 in (0.1, 0.5], 10 in (0.5, 1].
        let b = [(0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (INF, 100.0)];
        let q = quantiles(&b).unwrap();
        assert!((q.p50 - 0.1).abs() < 1e-12);
        assert!((q.p90 - 0.5).abs() < 1e-12);
        assert!((q.p99 - 0.95).abs() < 1e-12);
        assert_eq!(q.n, 100);
        assert_eq!(quantiles(&[(0.1, 0.0), (INF, 0.0)]), None);
        // A rank past the last finite bound reads as that bound.
        let q = quantiles(&[(0.1, 1.0), (INF, 10.0)]).unwrap();
        assert_eq!(q.p50, 0.1);
    }

    #[test]
    fn trimming_keeps_every_quantile() {
        let b = [
            (0.01, 0.0),
            (0.02, 0.0),
            (0.05, 3.0),
            (0.1, 7.0),
            (0.2, 10.0),
            (0.5, 10.0),
            (INF, 10.0),
        ];
        let t = trim(&b);
        assert_eq!(t, vec![(0.02, 0.0), (0.05, 3.0), (0.1, 7.0), (0.2, 10.0)]);
        assert_eq!(quantiles(&t), quantiles(&b));
        assert!(trim(&[(0.1, 0.0), (INF, 0.0)]).is_empty());
        // Observations past the last finite bound keep the +Inf bucket.
        let b = [(0.1, 0.0), (0.2, 1.0), (INF, 4.0)];
        assert_eq!(trim(&b), b.to_vec());
    }

    fn window(ttft: &[(f64, f64)]) -> ServerWindow {
        ServerWindow {
            seconds: 1.0,
            server: "vllm".into(),
            sources: 1,
            requests_per_s: None,
            running: None,
            waiting: None,
            kv_usage: None,
            preemptions: None,
            prefix_hit_rate: None,
            ttft_s: quantiles(ttft),
            itl_s: None,
            e2e_s: None,
            histograms: ServerHistograms {
                ttft: ttft.to_vec(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_steady_span_starts_after_warmup_and_after_a_reset() {
        let slow = window(&[(0.5, 0.0), (1.0, 2.0)]);
        let fast = window(&[(0.01, 0.0), (0.02, 3.0)]);
        let mut s = ServerSteady::new(2);
        s.window(&slow);
        s.request_ended(true);
        s.window(&slow); // warmup still running at its start
        s.request_ended(true);
        s.request_ended(false);
        s.window(&slow); // began before the last warmup request ended
        assert_eq!(s.summary, None);
        s.window(&fast);
        s.window(&fast);
        let q = s.summary.as_ref().unwrap().ttft_s.unwrap();
        assert_eq!(q.n, 6);
        assert!(q.p99 <= 0.02, "no warmup window in the span: {q:?}");
        assert_eq!(s.last.as_ref().unwrap().ttft_s, fast.ttft_s);
        s.reset();
        assert_eq!(s.summary, None);
        s.window(&slow); // spans the reset
        s.window(&fast);
        assert_eq!(s.summary.as_ref().unwrap().ttft_s.unwrap().n, 3);
        // Without warmup every window counts.
        let mut s = ServerSteady::new(0);
        s.window(&slow);
        assert_eq!(s.summary.as_ref().unwrap().ttft_s.unwrap().n, 2);
    }

    #[test]
    fn windows_add_up_to_the_whole() {
        let all = [
            (0.01, 0.0),
            (0.02, 0.0),
            (0.05, 3.0),
            (0.1, 7.0),
            (0.2, 15.0),
            (0.5, 20.0),
            (INF, 20.0),
        ];
        // The same observations in two windows: 3+4 in the low buckets, then 8+5.
        let first = [
            (0.01, 0.0),
            (0.02, 0.0),
            (0.05, 3.0),
            (0.1, 7.0),
            (0.2, 7.0),
            (0.5, 7.0),
            (INF, 7.0),
        ];
        let second = [
            (0.01, 0.0),
            (0.02, 0.0),
            (0.05, 0.0),
            (0.1, 0.0),
            (0.2, 8.0),
            (0.5, 13.0),
            (INF, 13.0),
        ];
        let mut sum = HistogramSum::default();
        sum.add(&trim(&first));
        sum.add(&trim(&second));
        assert_eq!(sum.quantiles(), quantiles(&all));
        assert_eq!(sum.quantiles().unwrap().n, 20);
    }
}
