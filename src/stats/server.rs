//! A server's own latency histograms (Prometheus buckets, `--server-metrics` and `watch`):
//! percentiles as Prometheus' `histogram_quantile` computes them, and the sum of many windows'
//! bucket deltas, so that the server's percentiles over a whole run stand beside the client's.
//!
//! Buckets are `(upper bound, cumulative count)`, ascending, `+Inf` last, as the exposition
//! format has them. A window keeps only the buckets that decide any quantile (see `trim`).

use std::collections::BTreeMap;

use crate::event::{
    ServerHistograms, ServerQuantiles, ServerSignals, ServerWindow, SignalHistograms,
};

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

/// A server's windows added up: seconds covered, requests finished, preemptions, its TTFT /
/// ITL / E2E histograms, and the other signals' histograms and counts, over all of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerSpan {
    pub windows: u64,
    pub seconds: f64,
    pub requests: f64,
    pub preemptions: f64,
    pub ttft: HistogramSum,
    pub itl: HistogramSum,
    pub e2e: HistogramSum,
    pub queue: HistogramSum,
    pub prefill: HistogramSum,
    pub decode: HistogramSum,
    pub prompt_len: HistogramSum,
    pub generation_len: HistogramSum,
    /// Counts over the span (`None` while no window had the figure).
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub spec_draft_tokens: Option<f64>,
    pub spec_accepted_tokens: Option<f64>,
    pub spec_drafts: Option<f64>,
    pub finished: BTreeMap<String, f64>,
    pub http: BTreeMap<String, f64>,
    /// Whether any window had a request rate (a span of windows without one has none).
    has_requests: bool,
    has_preemptions: bool,
}

fn add_opt(sum: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *sum = Some(sum.unwrap_or(0.0) + v);
    }
}

impl ServerSpan {
    pub fn add(&mut self, w: &ServerWindow) {
        self.windows += 1;
        self.seconds += w.seconds;
        self.requests += w.requests_per_s.unwrap_or(0.0) * w.seconds;
        self.has_requests |= w.requests_per_s.is_some();
        self.preemptions += w.preemptions.unwrap_or(0.0);
        self.has_preemptions |= w.preemptions.is_some();
        let ServerHistograms { ttft, itl, e2e } = &w.histograms;
        self.ttft.add(ttft);
        self.itl.add(itl);
        self.e2e.add(e2e);
        let s = &w.signals;
        let h = &s.histograms;
        self.queue.add(&h.queue);
        self.prefill.add(&h.prefill);
        self.decode.add(&h.decode);
        self.prompt_len.add(&h.prompt_len);
        self.generation_len.add(&h.generation_len);
        add_opt(
            &mut self.prompt_tokens,
            s.prompt_tokens_per_s.map(|r| r * w.seconds),
        );
        add_opt(
            &mut self.generation_tokens,
            s.generation_tokens_per_s.map(|r| r * w.seconds),
        );
        add_opt(&mut self.spec_draft_tokens, s.spec_draft_tokens);
        add_opt(&mut self.spec_accepted_tokens, s.spec_accepted_tokens);
        add_opt(&mut self.spec_drafts, s.spec_drafts);
        for (k, v) in &s.finished {
            *self.finished.entry(k.clone()).or_insert(0.0) += v;
        }
        for (k, v) in &s.http {
            *self.http.entry(k.clone()).or_insert(0.0) += v;
        }
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
            queue_s: self.queue.quantiles(),
            prefill_s: self.prefill.quantiles(),
            decode_s: self.decode.quantiles(),
        }
    }

    /// The whole span as one window: what one window from its first scrape to its last would
    /// say (counters and histograms; the gauges are left empty).
    pub fn window(&self, server: &str) -> ServerWindow {
        let per_s = |n: f64| n / self.seconds.max(1e-9);
        let signals = ServerSignals {
            prompt_tokens_per_s: self.prompt_tokens.map(per_s),
            generation_tokens_per_s: self.generation_tokens.map(per_s),
            queue_s: self.queue.quantiles(),
            prefill_s: self.prefill.quantiles(),
            decode_s: self.decode.quantiles(),
            prompt_len: self.prompt_len.quantiles(),
            generation_len: self.generation_len.quantiles(),
            spec_draft_tokens: self.spec_draft_tokens,
            spec_accepted_tokens: self.spec_accepted_tokens,
            spec_drafts: self.spec_drafts,
            spec_accept_length: match (self.spec_accepted_tokens, self.spec_drafts) {
                (Some(a), Some(d)) if d > 0.0 => Some(1.0 + a / d),
                _ => None,
            },
            finished: self.finished.clone(),
            http: self.http.clone(),
            ..ServerSignals::default()
        };
        ServerWindow {
            seconds: self.seconds,
            server: server.to_string(),
            requests_per_s: self.has_requests.then(|| per_s(self.requests)),
            preemptions: self.has_preemptions.then_some(self.preemptions),
            ttft_s: self.ttft.quantiles(),
            itl_s: self.itl.quantiles(),
            e2e_s: self.e2e.quantiles(),
            histograms: ServerHistograms {
                ttft: self.ttft.buckets().to_vec(),
                itl: self.itl.buckets().to_vec(),
                e2e: self.e2e.buckets().to_vec(),
            },
            signals: Box::new(signals),
            ..ServerWindow::default()
        }
    }
}

/// Several nodes' windows of the same interval as one, the total over `seconds` (the
/// interval): counts and histograms add up (each node's rate times its own window's length,
/// so that the total counts every request once), gauges add up, ratios are the nodes' mean
/// (a hit rate weighted by the tokens each node looked up).
pub fn total_window(windows: &[&ServerWindow], seconds: f64) -> ServerWindow {
    let seconds = seconds.max(1e-9);
    let sum = |f: &dyn Fn(&ServerWindow) -> Option<f64>| {
        windows
            .iter()
            .filter_map(|w| f(w))
            .fold(None, |acc: Option<f64>, v| Some(acc.unwrap_or(0.0) + v))
    };
    let mean = |f: &dyn Fn(&ServerWindow) -> Option<f64>| {
        let v: Vec<f64> = windows.iter().filter_map(|w| f(w)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // A rate as the count in each node's window, over the total's interval.
    let rate = |f: &dyn Fn(&ServerWindow) -> Option<f64>| {
        sum(&|w| f(w).map(|r| r * w.seconds)).map(|n| n / seconds)
    };
    let hist = |f: &dyn Fn(&ServerWindow) -> &Vec<(f64, f64)>| {
        let mut h = HistogramSum::default();
        for w in windows {
            h.add(f(w));
        }
        trim(h.buckets())
    };
    let histograms = ServerHistograms {
        ttft: hist(&|w| &w.histograms.ttft),
        itl: hist(&|w| &w.histograms.itl),
        e2e: hist(&|w| &w.histograms.e2e),
    };
    let sh = SignalHistograms {
        queue: hist(&|w| &w.signals.histograms.queue),
        prefill: hist(&|w| &w.signals.histograms.prefill),
        decode: hist(&|w| &w.signals.histograms.decode),
        prompt_len: hist(&|w| &w.signals.histograms.prompt_len),
        generation_len: hist(&|w| &w.signals.histograms.generation_len),
    };
    let weighted_hits = sum(&|w| Some(w.prefix_hit_rate? * w.signals.prefix_queries?));
    let queries = sum(&|w| w.signals.prefix_queries);
    let prefix_hit_rate = match (weighted_hits, queries) {
        (Some(h), Some(q)) if q > 0.0 => Some(h / q),
        _ => mean(&|w| w.prefix_hit_rate),
    };
    let (drafts, accepted) = (
        sum(&|w| w.signals.spec_drafts),
        sum(&|w| w.signals.spec_accepted_tokens),
    );
    let mut finished = BTreeMap::new();
    let mut http = BTreeMap::new();
    for w in windows {
        for (k, v) in &w.signals.finished {
            *finished.entry(k.clone()).or_insert(0.0) += v;
        }
        for (k, v) in &w.signals.http {
            *http.entry(k.clone()).or_insert(0.0) += v;
        }
    }
    let signals = ServerSignals {
        prompt_tokens_per_s: rate(&|w| w.signals.prompt_tokens_per_s),
        generation_tokens_per_s: rate(&|w| w.signals.generation_tokens_per_s),
        queue_s: quantiles(&sh.queue),
        prefill_s: quantiles(&sh.prefill),
        decode_s: quantiles(&sh.decode),
        prompt_len: quantiles(&sh.prompt_len),
        generation_len: quantiles(&sh.generation_len),
        spec_draft_tokens: sum(&|w| w.signals.spec_draft_tokens),
        spec_accepted_tokens: accepted,
        spec_drafts: drafts,
        spec_accept_length: match (accepted, drafts) {
            (Some(a), Some(d)) if d > 0.0 => Some(1.0 + a / d),
            _ => mean(&|w| w.signals.spec_accept_length),
        },
        finished,
        http,
        prefix_queries: queries,
        flops_per_gpu: mean(&|w| w.signals.flops_per_gpu),
        mem_bytes_per_gpu: mean(&|w| w.signals.mem_bytes_per_gpu),
        histograms: sh,
    };
    ServerWindow {
        seconds,
        server: windows
            .first()
            .map_or("unknown".into(), |w| w.server.clone()),
        sources: windows.iter().map(|w| w.sources).sum(),
        requests_per_s: rate(&|w| w.requests_per_s),
        running: sum(&|w| w.running),
        waiting: sum(&|w| w.waiting),
        kv_usage: mean(&|w| w.kv_usage),
        preemptions: sum(&|w| w.preemptions),
        prefix_hit_rate,
        ttft_s: quantiles(&histograms.ttft),
        itl_s: quantiles(&histograms.itl),
        e2e_s: quantiles(&histograms.e2e),
        histograms,
        source: None,
        engines: BTreeMap::new(),
        signals: Box::new(signals),
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
    /// The request phases, where the server exports them (vLLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_s: Option<ServerQuantiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_s: Option<ServerQuantiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_s: Option<ServerQuantiles>,
}

/// One node's share of the server's view (`--server-metrics` with several URLs): its last
/// window and its span, gated as the total's is.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSteady {
    /// The node (`ServerWindow::source`).
    pub source: String,
    pub last: ServerWindow,
    pub span: ServerSpan,
    pub summary: Option<ServerSpanSummary>,
    /// Whether its TTFT / ITL / E2E p99 over the span is above `SLOW_FACTOR` times the
    /// servers' median (computed when a total comes).
    pub slow: [bool; 3],
}

/// A server's p99 counts as slow above this many times the median of every server's.
pub const SLOW_FACTOR: f64 = 1.5;

/// The server's view of a run, folded from its windows in event order, by the run (live) and
/// by a record's reader (`report`) alike. The steady span adds only windows that began after
/// every warmup request had ended (the window in which warmup ends may hold some of it), and
/// starts again after a statistics reset, so it covers what the client's steady table covers;
/// other traffic on the server is in it too. With several servers, the windows without a
/// `source` (their total) make the span, and each server's own windows its `nodes` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSteady {
    warmup_requests: u64,
    warmup_ended: u64,
    open: bool,
    /// The last window, for the live view (gauges, per-window percentiles).
    pub last: Option<ServerWindow>,
    pub span: ServerSpan,
    /// The span's percentiles, computed once per window.
    pub summary: Option<ServerSpanSummary>,
    /// Each node's own, in the order they first reported.
    pub nodes: Vec<NodeSteady>,
    /// `nodes` by TTFT p99 over the span, slowest first (computed when a total comes).
    pub slowest_first: Vec<usize>,
}

impl Default for ServerSteady {
    /// As `new(0)`: without warmup, every window counts (a watch's record).
    fn default() -> ServerSteady {
        ServerSteady::new(0)
    }
}

impl ServerSteady {
    pub fn new(warmup_requests: u64) -> ServerSteady {
        ServerSteady {
            warmup_requests,
            warmup_ended: 0,
            open: warmup_requests == 0,
            last: None,
            span: ServerSpan::default(),
            summary: None,
            nodes: Vec::new(),
            slowest_first: Vec::new(),
        }
    }

    /// A request ended, completed or failed.
    pub fn request_ended(&mut self, warmup: bool) {
        if warmup {
            self.warmup_ended += 1;
        }
    }

    pub fn window(&mut self, w: &ServerWindow) {
        if let Some(source) = &w.source {
            let i = match self.nodes.iter().position(|n| &n.source == source) {
                Some(i) => i,
                None => {
                    self.nodes.push(NodeSteady {
                        source: source.clone(),
                        last: w.clone(),
                        span: ServerSpan::default(),
                        summary: None,
                        slow: [false; 3],
                    });
                    self.nodes.len() - 1
                }
            };
            let node = &mut self.nodes[i];
            if self.open {
                node.span.add(w);
                node.summary = Some(node.span.summary(&w.server));
            }
            node.last = w.clone();
            return;
        }
        if self.open {
            self.span.add(w);
            self.summary = Some(self.span.summary(&w.server));
        }
        self.open = self.warmup_ended >= self.warmup_requests;
        self.last = Some(w.clone());
        self.rank_nodes();
    }

    /// Orders the nodes slowest first and marks the p99s that stand out.
    fn rank_nodes(&mut self) {
        if self.nodes.is_empty() {
            return;
        }
        type Pick = fn(&ServerSpanSummary) -> Option<ServerQuantiles>;
        let picks: [Pick; 3] = [|s| s.ttft_s, |s| s.itl_s, |s| s.e2e_s];
        let p99 = |n: &NodeSteady, f: Pick| n.summary.as_ref().and_then(f).map(|q| q.p99);
        for (k, f) in picks.into_iter().enumerate() {
            let v: Vec<f64> = self.nodes.iter().filter_map(|n| p99(n, f)).collect();
            let median = if v.len() >= 2 {
                super::median(&v)
            } else {
                None
            };
            for n in &mut self.nodes {
                n.slow[k] = matches!((p99(n, f), median), (Some(x), Some(m)) if m > 0.0 && x > SLOW_FACTOR * m);
            }
        }
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        let key = |i: usize| p99(&self.nodes[i], picks[0]).unwrap_or(-1.0);
        order.sort_by(|a, b| key(*b).total_cmp(&key(*a)));
        self.slowest_first = order;
    }

    /// Statistics reset: the span starts again from the next whole window.
    pub fn reset(&mut self) {
        self.span = ServerSpan::default();
        self.summary = None;
        for n in &mut self.nodes {
            n.span = ServerSpan::default();
            n.summary = None;
        }
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
            ttft_s: quantiles(ttft),
            histograms: ServerHistograms {
                ttft: ttft.to_vec(),
                ..Default::default()
            },
            ..ServerWindow::default()
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

    #[test]
    fn nodes_add_up_to_a_total_that_counts_every_request_once() {
        let a = ServerWindow {
            seconds: 1.0,
            requests_per_s: Some(10.0),
            running: Some(2.0),
            kv_usage: Some(0.2),
            prefix_hit_rate: Some(0.5),
            signals: Box::new(ServerSignals {
                prefix_queries: Some(100.0),
                spec_drafts: Some(10.0),
                spec_accepted_tokens: Some(20.0),
                ..Default::default()
            }),
            ..window(&[(0.1, 0.0), (0.2, 10.0)])
        };
        let b = ServerWindow {
            seconds: 2.0,
            requests_per_s: Some(3.0),
            running: Some(1.0),
            kv_usage: Some(0.6),
            prefix_hit_rate: Some(1.0),
            signals: Box::new(ServerSignals {
                prefix_queries: Some(300.0),
                spec_drafts: Some(10.0),
                spec_accepted_tokens: Some(0.0),
                ..Default::default()
            }),
            ..window(&[(0.2, 0.0), (0.5, 6.0)])
        };
        let t = total_window(&[&a, &b], 1.0);
        assert_eq!(
            t.requests_per_s,
            Some(16.0),
            "10 + 3·2 requests in the interval"
        );
        assert_eq!((t.running, t.sources), (Some(3.0), 2));
        assert!((t.kv_usage.unwrap() - 0.4).abs() < 1e-12);
        assert!((t.prefix_hit_rate.unwrap() - 350.0 / 400.0).abs() < 1e-12);
        assert_eq!(t.signals.spec_accept_length, Some(2.0));
        assert_eq!(t.ttft_s.unwrap().n, 16);
        assert_eq!(t.ttft_s, quantiles(&[(0.1, 0.0), (0.2, 10.0), (0.5, 16.0)]));
        // The span of totals is the span of every node's windows.
        let mut span = ServerSpan::default();
        span.add(&t);
        assert_eq!(span.requests, 16.0);
        let whole = span.window("vllm");
        assert_eq!(whole.ttft_s, t.ttft_s);
        assert_eq!(whole.requests_per_s, Some(16.0));
    }

    #[test]
    fn nodes_have_their_own_span_beside_the_total() {
        let mut s = ServerSteady::new(0);
        let slow = ServerWindow {
            source: Some("gpu02:8000".into()),
            ..window(&[(0.5, 0.0), (1.0, 2.0)])
        };
        let fast = ServerWindow {
            source: Some("gpu01:8000".into()),
            ..window(&[(0.01, 0.0), (0.02, 3.0)])
        };
        s.window(&fast);
        s.window(&slow);
        s.window(&total_window(&[&fast, &slow], 1.0));
        assert_eq!(s.nodes.len(), 2);
        assert_eq!(s.nodes[0].source, "gpu01:8000");
        assert_eq!(s.nodes[1].summary.as_ref().unwrap().ttft_s.unwrap().n, 2);
        assert_eq!(s.summary.as_ref().unwrap().ttft_s.unwrap().n, 5);
        assert!(s.last.as_ref().unwrap().source.is_none());
        s.reset();
        assert!(s.nodes.iter().all(|n| n.summary.is_none()));
    }
}
