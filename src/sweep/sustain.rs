//! Whether a server cell's load was one the server can hold, whatever its percentiles say: a
//! capacity must be sustainable, not a burst that a queue absorbed for the length of a probe.
//!
//! Two signs of a load above capacity, each judged on the cell's steady requests (their start,
//! TTFT and end on the consumer's clock, `held::Span`):
//!
//! - **The queue grows** (open loops only; a closed loop's arrivals are its completions): over
//!   the second half of the time requests arrived (the first half holds the ramp and the queue
//!   a stable load settles to), the requests in flight, sampled at every arrival and averaged
//!   over eight blocks of that half, trend up: the blocks' regression line rises by at least
//!   `MIN_GROWTH` requests over the half, and its slope is more than `T_LIMIT` standard errors
//!   above zero. A stable load's queue goes up and down; an overloaded one only up, by
//!   (arrival rate − completion rate) × time.
//! - **TTFT trends up**: the median TTFT of the last third of the requests (by start) is more
//!   than twice the first third's, and above the first third's p90: queueing builds through
//!   the probe instead of settling.
//!
//! A cell too short to tell (fewer than `MIN_REQUESTS` steady requests) is not judged.

use serde::Serialize;

use crate::stats::held::Span;
use crate::stats::{median, percentile_sorted};

/// Steady requests a cell needs before it is judged.
pub const MIN_REQUESTS: usize = 12;

/// A queue grows when its trend adds at least this many requests over the second half.
const MIN_GROWTH: f64 = 1.5;

/// ... and its slope is this many standard errors above zero (eight blocks: six degrees of
/// freedom, above 3.71 one time in two hundred by chance).
const T_LIMIT: f64 = 3.71;

/// Blocks the second half is averaged over.
const BLOCKS: usize = 8;

/// What the cell's requests say of the load it was offered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sustain {
    /// Over the second half of the arrivals: steady requests that arrived, and that completed.
    pub arrivals: u64,
    pub completions: u64,
    /// How much the requests in flight grew over that half, by their trend, and the slope's
    /// t statistic (`None` with too few arrivals to tell).
    pub growth: f64,
    pub t: Option<f64>,
    /// Median TTFT of the first and the last third of the steady requests.
    pub ttft_early_s: Option<f64>,
    pub ttft_late_s: Option<f64>,
    /// Why the load is over capacity, in words; `None` when it was held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
}

impl Sustain {
    pub fn held(&self) -> bool {
        self.over.is_none()
    }
}

/// Judges a cell's requests (`open_loop`: arrivals on a schedule); `None` when there are too
/// few steady ones.
pub fn judge(spans: &[Span], open_loop: bool) -> Option<Sustain> {
    let mut steady: Vec<&Span> = spans.iter().filter(|s| !s.warmup).collect();
    if steady.len() < MIN_REQUESTS {
        return None;
    }
    steady.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let first = steady.first()?.start_s;
    let last = steady.last()?.start_s;
    let mid = first + (last - first) / 2.0;
    let arrivals = steady.iter().filter(|s| s.start_s > mid).count() as u64;
    let completions = steady
        .iter()
        .filter(|s| s.end_s > mid && s.end_s <= last)
        .count() as u64;
    let (growth, t) = in_flight_trend(&steady, mid, last);
    let ttfts = |part: &[&Span]| -> Vec<f64> { part.iter().filter_map(|s| s.ttft_s).collect() };
    let third = steady.len() / 3;
    let early = ttfts(&steady[..third]);
    let late = ttfts(&steady[steady.len() - third..]);
    let ttft_early_s = median(&early);
    let ttft_late_s = median(&late);
    let early_p90 = {
        let mut e = early.clone();
        e.sort_by(f64::total_cmp);
        percentile_sorted(&e, 90.0)
    };
    let queue_grows = growth >= MIN_GROWTH && t.is_some_and(|t| t > T_LIMIT);
    let over = if open_loop && queue_grows {
        Some(format!(
            "over capacity: {arrivals} requests arrived and {completions} completed in the probe's second half, the queue growing by {growth:.1} (t = {:.1})",
            t.unwrap_or(0.0)
        ))
    } else {
        match (ttft_early_s, ttft_late_s, early_p90) {
            (Some(e), Some(l), Some(p90)) if l > 2.0 * e && l > p90 => Some(format!(
                "over capacity: TTFT grew through the probe (median {:.1} ms in its first third, {:.1} ms in its last)",
                e * 1e3,
                l * 1e3
            )),
            _ => None,
        }
    };
    Some(Sustain {
        arrivals,
        completions,
        growth,
        t,
        ttft_early_s,
        ttft_late_s,
        over,
    })
}

/// The trend of the requests in flight over `(from, to]` (sampled at every arrival there,
/// averaged per block): how much it rises over that span, and its slope's t statistic.
fn in_flight_trend(spans: &[&Span], from: f64, to: f64) -> (f64, Option<f64>) {
    let mut starts: Vec<f64> = spans.iter().map(|s| s.start_s).collect();
    let mut ends: Vec<f64> = spans.iter().map(|s| s.end_s).collect();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let width = (to - from) / BLOCKS as f64;
    if width <= 0.0 {
        return (0.0, None);
    }
    let mut blocks: Vec<(f64, f64, usize)> = vec![(0.0, 0.0, 0); BLOCKS];
    let (mut started, mut ended) = (0usize, 0usize);
    for &t in &starts {
        started += 1;
        if t <= from {
            continue;
        }
        while ended < ends.len() && ends[ended] <= t {
            ended += 1;
        }
        let b = (((t - from) / width) as usize).min(BLOCKS - 1);
        blocks[b].0 += t;
        blocks[b].1 += started.saturating_sub(ended) as f64;
        blocks[b].2 += 1;
    }
    let points: Vec<(f64, f64)> = blocks
        .iter()
        .filter(|b| b.2 >= 2)
        .map(|b| (b.0 / b.2 as f64, b.1 / b.2 as f64))
        .collect();
    if points.len() < BLOCKS - 1 {
        return (0.0, None);
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return (0.0, None);
    }
    let slope = sxy / sxx;
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - (my + slope * (p.0 - mx))).powi(2))
        .sum();
    let se = (residual / (n - 2.0) / sxx).sqrt();
    let t = if se > 0.0 {
        slope / se
    } else if slope > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    (slope * (to - from), Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An open loop at `rate` requests/s (constant gaps) for `secs`, served by `slots` slots of
    /// `service` seconds each, first come first served.
    fn queue(rate: f64, secs: f64, slots: usize, service: f64) -> Vec<Span> {
        let mut free = vec![0.0f64; slots];
        let n = (rate * secs) as usize;
        (0..n)
            .map(|i| {
                let arrive = i as f64 / rate;
                let k = (0..slots)
                    .min_by(|&a, &b| free[a].total_cmp(&free[b]))
                    .unwrap_or(0);
                let begin = free[k].max(arrive);
                free[k] = begin + service;
                Span {
                    start_s: arrive,
                    end_s: begin + service,
                    tokens: 16,
                    met_seqs: 1,
                    warmup: false,
                    ttft_s: Some(begin - arrive + 0.02),
                }
            })
            .collect()
    }

    /// 4 slots of 50 ms serve 80 requests/s: 2% below is held, 2% above is not.
    #[test]
    fn a_queue_that_grows_is_over_capacity_a_stable_one_is_not() {
        let below = judge(&queue(78.4, 10.0, 4, 0.05), true).unwrap_or_else(|| panic!());
        assert!(below.held(), "{below:?}");
        let above = judge(&queue(81.6, 10.0, 4, 0.05), true).unwrap_or_else(|| panic!());
        assert!(!above.held(), "{above:?}");
        assert!(above
            .over
            .as_deref()
            .unwrap_or("")
            .contains("the queue growing"));
        // A closed loop is not judged by its queue, only by the TTFT trend.
        let closed = judge(&queue(81.6, 10.0, 4, 0.05), false).unwrap_or_else(|| panic!());
        assert!(
            closed.over.as_deref().unwrap_or("").contains("TTFT grew"),
            "{closed:?}"
        );
        assert_eq!(judge(&queue(10.0, 0.5, 4, 0.05), true), None);
    }
}
