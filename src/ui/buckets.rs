//! The per-request charts once requests come faster than their columns can advance. A chart
//! that gives each request a column rewrites a column per request: at 1,000 requests/s that
//! is the whole chart every frame (about 40 KB/s at 200x60 for the TTFT chart alone), and a
//! sweep that wraps in a tenth of a second, which no one can read. So above `SWITCH_RATE`
//! requests/s a column is a slice of run time (`BUCKET_S`) instead: its bar is the median
//! request finished in it and a whisker goes up to its slowest, so a column advances every
//! `BUCKET_S` whatever the rate, and an outlier still stands out (the whisker reaches it, the
//! column takes the outlier style and its `!`).
//!
//! A bucket is two frames long at the default 10 fps: requests are timed into buckets when
//! the dashboard folds them, which it does a few times a frame, so a bucket of one frame
//! would be empty or double whenever a frame came a little late.
//!
//! Each bucket is summarised once, when it closes (exact median, numpy's method, over its own
//! requests); only closed buckets are drawn, so a column is written once. What is kept is
//! bounded (`BUCKET_HISTORY` buckets).
//!
//! The charts switch to buckets when more than `SWITCH_RATE` requests finished per second
//! over the last `RATE_SPAN_S`, and back below `SWITCH_BACK` of it, at most once every
//! `SWITCH_DWELL_S`
//! (a switch redraws the chart whole, and a rate near the threshold must not make it flap).
//! So a chart advances at most `SWITCH_RATE` columns a second, one per request below it and
//! `1 / BUCKET_S` above it.

use std::collections::VecDeque;

use crate::stats::median_in_place;

/// One finished request, as the TTFT/TPOT sparklines draw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestPoint {
    pub index: u64,
    pub ttft_s: f64,
    pub tpot_s: Option<f64>,
    pub warmup: bool,
    /// The first request after a workload change: drawn with a boundary marker.
    pub boundary: bool,
    /// Logged as an outlier (above the running p99) by its TTFT, by its TPOT: each chart marks
    /// its own.
    pub outlier_ttft: bool,
    pub outlier_tpot: bool,
}

/// Run time per column once the charts are in buckets.
pub const BUCKET_S: f64 = 0.2;
/// Requests per second above which a chart column is a bucket, not a request: a sweep of
/// one column per request would then move faster than a frame at the default 10 fps.
pub const SWITCH_RATE: f64 = 10.0;
/// The share of `SWITCH_RATE` below which the charts go back to a column per request.
pub const SWITCH_BACK: f64 = 0.8;
/// The span the request rate is measured over.
pub const RATE_SPAN_S: f64 = 2.0;
/// The least time between two switches of the charts' columns.
pub const SWITCH_DWELL_S: f64 = 5.0;
/// Closed buckets kept: more than the widest chart has columns.
pub const BUCKET_HISTORY: usize = 512;

/// The median and the largest value of one bucket's requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub p50: f64,
    pub max: f64,
}

impl Spread {
    /// Reorders `values`.
    fn of(values: &mut [f64]) -> Option<Spread> {
        let max = values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?;
        Some(Spread {
            p50: median_in_place(values)?,
            max,
        })
    }
}

/// One closed bucket: the requests that finished in run time `index * BUCKET_S` to
/// `(index + 1) * BUCKET_S`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub index: u64,
    /// Requests in it.
    pub n: u32,
    pub ttft: Option<Spread>,
    pub tpot: Option<Spread>,
    /// Any of them warmup, the first after a workload change, an outlier by its TTFT, by
    /// its TPOT.
    pub warmup: bool,
    pub boundary: bool,
    pub outlier_ttft: bool,
    pub outlier_tpot: bool,
}

/// The closed buckets, the open one, and which kind of column the charts draw.
#[derive(Clone, Debug, Default)]
pub struct Buckets {
    closed: VecDeque<Bucket>,
    open: Option<Bucket>,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    by_time: bool,
    switched_at: Option<f64>,
}

/// The bucket run time `t_s` falls in.
pub fn bucket_of(t_s: f64) -> u64 {
    if t_s.is_finite() && t_s > 0.0 {
        (t_s / BUCKET_S).floor() as u64
    } else {
        0
    }
}

impl Buckets {
    /// A request finished at run time `t_s`.
    pub fn observe(&mut self, t_s: f64, p: &RequestPoint) {
        self.advance(t_s);
        let index = bucket_of(t_s);
        let b = self.open.get_or_insert(Bucket {
            index,
            n: 0,
            ttft: None,
            tpot: None,
            warmup: false,
            boundary: false,
            outlier_ttft: false,
            outlier_tpot: false,
        });
        b.n += 1;
        b.warmup |= p.warmup;
        b.boundary |= p.boundary;
        b.outlier_ttft |= p.outlier_ttft;
        b.outlier_tpot |= p.outlier_tpot;
        self.ttft.push(p.ttft_s);
        if let Some(t) = p.tpot_s {
            self.tpot.push(t);
        }
    }

    /// Closes the open bucket if run time `t_s` is past it.
    pub fn advance(&mut self, t_s: f64) {
        let Some(open) = self.open else { return };
        if bucket_of(t_s) <= open.index {
            return;
        }
        let bucket = Bucket {
            ttft: Spread::of(&mut self.ttft),
            tpot: Spread::of(&mut self.tpot),
            ..open
        };
        self.ttft.clear();
        self.tpot.clear();
        self.open = None;
        if self.closed.len() == BUCKET_HISTORY {
            self.closed.pop_front();
        }
        self.closed.push_back(bucket);
    }

    /// Closed buckets, oldest first (buckets without a request are left out).
    pub fn closed(&self) -> &VecDeque<Bucket> {
        &self.closed
    }

    /// Requests per second over the `RATE_SPAN_S` before run time `t_s`.
    pub fn rate(&self, t_s: f64) -> f64 {
        let span = (RATE_SPAN_S / BUCKET_S).round() as u64;
        let from = bucket_of(t_s).saturating_sub(span);
        let n: u64 = self
            .closed
            .iter()
            .rev()
            .take_while(|b| b.index >= from)
            .map(|b| u64::from(b.n))
            .sum();
        n as f64 / RATE_SPAN_S
    }

    /// Decides, at run time `t_s`, whether the charts draw buckets or requests.
    pub fn update_mode(&mut self, t_s: f64) {
        if self.switched_at.is_some_and(|at| t_s - at < SWITCH_DWELL_S) {
            return;
        }
        let rate = self.rate(t_s);
        let want = if self.by_time {
            rate >= SWITCH_RATE * SWITCH_BACK
        } else {
            rate > SWITCH_RATE
        };
        if want != self.by_time {
            self.by_time = want;
            self.switched_at = Some(t_s);
        }
    }

    /// Whether the charts' columns are buckets of run time (else one request each).
    pub fn by_time(&self) -> bool {
        self.by_time
    }

    /// Forgets every bucket (a statistics reset, a sweep's next cell).
    pub fn clear(&mut self) {
        *self = Buckets::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(ttft_s: f64, outlier: bool) -> RequestPoint {
        RequestPoint {
            index: 0,
            ttft_s,
            tpot_s: Some(ttft_s / 10.0),
            warmup: false,
            boundary: false,
            outlier_ttft: outlier,
            outlier_tpot: false,
        }
    }

    #[test]
    fn a_bucket_keeps_its_median_and_its_slowest() {
        let mut b = Buckets::default();
        for (i, v) in [0.010, 0.012, 0.011, 0.090].iter().enumerate() {
            b.observe(0.21 + 0.01 * i as f64, &point(*v, *v > 0.05));
        }
        assert!(b.closed().is_empty(), "the open bucket is not drawn");
        b.advance(0.39);
        assert!(b.closed().is_empty());
        b.advance(0.41);
        let c = b.closed()[0];
        assert_eq!(c.index, 1);
        assert_eq!(c.n, 4);
        // numpy.median([0.010, 0.012, 0.011, 0.090]) = 0.0115
        let ttft = c.ttft.unwrap_or(Spread { p50: 0.0, max: 0.0 });
        assert!((ttft.p50 - 0.0115).abs() < 1e-15, "{ttft:?}");
        assert_eq!(ttft.max, 0.090);
        assert!(c.outlier_ttft && !c.outlier_tpot && !c.warmup && !c.boundary);
    }

    #[test]
    fn columns_become_buckets_above_the_rate_and_do_not_flap() {
        let mut b = Buckets::default();
        // 5 requests/s: one column each.
        let mut t = 0.0;
        while t < 4.0 {
            b.observe(t, &point(0.01, false));
            t += 0.2;
        }
        b.update_mode(t);
        assert!(!b.by_time());
        // 100 requests/s: buckets.
        while t < 8.0 {
            b.observe(t, &point(0.01, false));
            t += 0.01;
        }
        b.update_mode(t);
        assert!(b.by_time());
        // Down to 9/s (between the way back and the threshold): still buckets.
        let until = t + 10.0;
        while t < until {
            b.observe(t, &point(0.01, false));
            t += 1.0 / 9.0;
            b.update_mode(t);
        }
        assert!(b.by_time());
        // Idle: back to one column per request, but not before the dwell has passed.
        b.advance(t + 3.0);
        b.update_mode(t + 3.0);
        assert!(!b.by_time());
        let at = t + 3.0;
        for i in 0..300 {
            b.observe(at + 0.003 * f64::from(i), &point(0.01, false));
        }
        b.update_mode(at + 2.0);
        assert!(!b.by_time(), "switched again within the dwell");
        b.clear();
        assert!(!b.by_time() && b.closed().is_empty());
    }
}
