//! Scales for the dashboard's charts, and the histogram the distribution views draw.
//!
//! Scales move in nice steps (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten) rather
//! than with every new extreme: a chart whose scale moves must be redrawn whole, and a chart
//! redrawn whole at every frame is what makes a dashboard too heavy for a slow SSH link.

/// Mantissas of the nice steps.
const NICE: [f64; 10] = [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0];

/// A distribution is drawn on a log axis when its largest value is more than this many times
/// its smallest: below it a linear axis shows the shape better.
pub const LOG_SPREAD: f64 = 4.0;

/// The smallest nice value at or above `v` (0 for anything not positive).
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 0.0;
    }
    let mut p = 10f64.powf(v.log10().floor() - 1.0);
    for _ in 0..3 {
        for m in NICE {
            if m * p >= v * (1.0 - 1e-12) {
                return m * p;
            }
        }
        p *= 10.0;
    }
    v
}

/// The largest nice value at or below `v` (0 for anything not positive).
pub fn nice_floor(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 0.0;
    }
    let mut p = 10f64.powf(v.log10().floor() + 1.0);
    for _ in 0..3 {
        for m in NICE.iter().rev() {
            if m * p <= v * (1.0 + 1e-12) {
                return m * p;
            }
        }
        p /= 10.0;
    }
    v
}

/// The scale `(floor, top)` for bars of values from `low` to `high`: a nice top, and a
/// floor at zero unless all values are close (then a grid line below the smallest, so the
/// smallest bar still shows). Both ends sit on grids tied to the top's order of magnitude,
/// not to the values, so small moves of the extremes leave the scale where it was.
pub fn bar_scale(low: f64, high: f64) -> (f64, f64) {
    let top = nice_ceil(high);
    if top <= 0.0 || low < top * 0.5 || high - low <= high * 1e-6 {
        return (0.0, top);
    }
    let want = low - (high - low) * 0.25;
    let floor_grid = top / 20.0;
    let floor = ((want / floor_grid).floor() * floor_grid).max(0.0);
    let top_grid = top / 10.0;
    let top = ((high / top_grid).ceil() * top_grid).min(top);
    (floor, top)
}

/// A value axis: linear or logarithmic from `lo` to `hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
}

impl Axis {
    /// An axis with nice ends that holds `min..=max`: logarithmic when the spread needs it.
    pub fn fit(min: f64, max: f64) -> Axis {
        if min > 0.0 && max / min > LOG_SPREAD {
            return Axis {
                lo: nice_floor(min),
                hi: nice_ceil(max),
                log: true,
            };
        }
        let (lo, hi) = bar_scale(min, max);
        let hi = if hi > lo { hi } else { lo + hi.max(1e-9) };
        Axis { lo, hi, log: false }
    }

    /// The value at fraction `f` (0..=1) of the axis.
    pub fn at(&self, f: f64) -> f64 {
        if self.log {
            self.lo * (self.hi / self.lo).powf(f)
        } else {
            self.lo + (self.hi - self.lo) * f
        }
    }

    /// Where `v` sits on the axis, as a fraction (clamped to 0..=1).
    pub fn fraction(&self, v: f64) -> f64 {
        let f = if self.log {
            (v / self.lo).ln() / (self.hi / self.lo).ln()
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// Counts of a window's samples in equal bins of an axis (equal in log space on a log
/// axis). Exact: every sample of the window is counted once.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub axis: Axis,
    pub counts: Vec<usize>,
    pub n: usize,
}

impl Histogram {
    /// The counts merged into `bins` bins (each the sum of `counts.len() / bins` neighbours;
    /// `bins` must divide the count of bins for exact edges, otherwise the last takes the rest).
    pub fn merged(&self, bins: usize) -> Vec<usize> {
        let bins = bins.clamp(1, self.counts.len().max(1));
        let per = (self.counts.len() / bins).max(1);
        let mut out: Vec<usize> = self.counts.chunks(per).map(|c| c.iter().sum()).collect();
        while out.len() > bins {
            let last = out.pop().unwrap_or(0);
            if let Some(l) = out.last_mut() {
                *l += last;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_ceil(0.0898), 0.1);
        assert!((nice_ceil(0.00461) - 0.005).abs() < 1e-15);
        assert_eq!(nice_ceil(1.0), 1.0);
        assert_eq!(nice_ceil(1.01), 1.2);
        assert_eq!(nice_ceil(7.0), 8.0);
        assert_eq!(nice_ceil(8.5), 10.0);
        assert_eq!(nice_ceil(0.0), 0.0);
        assert_eq!(nice_floor(0.0019), 0.0015);
        assert_eq!(nice_floor(9.9), 8.0);
        assert_eq!(nice_floor(10.0), 10.0);
    }

    #[test]
    fn bar_scale_starts_at_zero_unless_values_are_close() {
        assert_eq!(bar_scale(1.0, 9.0), (0.0, 10.0));
        assert_eq!(bar_scale(5.0, 5.0), (0.0, 5.0));
        let (floor, top) = bar_scale(12.0, 13.0);
        assert!(floor > 0.0 && floor < 12.0 && top >= 13.0, "{floor} {top}");
        // A new value inside the range leaves the scale as it was.
        assert_eq!(bar_scale(12.1, 12.9), (floor, top));
    }

    #[test]
    fn axes_are_log_only_when_the_spread_needs_it() {
        let a = Axis::fit(0.0019, 0.0023);
        assert!(!a.log && a.lo <= 0.0019 && a.hi >= 0.0023, "{a:?}");
        let a = Axis::fit(0.001, 0.5);
        assert!(a.log && a.lo == 0.001 && a.hi == 0.5, "{a:?}");
        assert!((a.fraction(a.at(0.3)) - 0.3).abs() < 1e-12);
    }

    #[test]
    fn merging_bins_keeps_every_sample() {
        let h = Histogram {
            axis: Axis::fit(1.0, 2.0),
            counts: (0..120).collect(),
            n: (0..120).sum(),
        };
        for bins in [1, 7, 24, 40, 120, 500] {
            let m = h.merged(bins);
            assert!(m.len() <= bins.max(1));
            assert_eq!(m.iter().sum::<usize>(), h.n, "{bins}");
        }
    }
}
