//! Latency over time in fixed slices of run time: per slice, the exact p50 and p99 of TTFT,
//! TPOT and ITL (numpy's method, over the slice's own samples) for the percentile bands, and
//! the ITL samples counted in log buckets for the heatmap. A slice is summarised once, when it
//! closes; what is kept is bounded (`SLICE_HISTORY` slices), so a run can go on for days.

use std::collections::VecDeque;

use super::percentile::percentiles_in_place;

/// Length of one slice of run time.
pub const SLICE_S: f64 = 1.0;
/// Slices kept: more columns than the widest terminal shows at two slices a column.
pub const SLICE_HISTORY: usize = 600;
/// Heatmap buckets per doubling of latency (each bucket about 19 % wide).
pub const BUCKETS_PER_OCTAVE: f64 = 4.0;
/// The lower edge of heatmap bucket 0.
pub const BUCKET_BASE_S: f64 = 1e-6;
/// Heatmap buckets: 1 µs up to about 70 minutes.
pub const BUCKETS: u16 = 128;

/// The heatmap bucket of a latency.
pub fn bucket_of(v_s: f64) -> u16 {
    if !(v_s.is_finite() && v_s > BUCKET_BASE_S) {
        return 0;
    }
    // Positive here, so the cast's truncation is the floor (a call to `floor` per decode
    // step, about 2% of the dashboard's CPU at 100,000 steps a second, saved).
    let b = (v_s / BUCKET_BASE_S).log2() * BUCKETS_PER_OCTAVE;
    (b as u16).min(BUCKETS - 1)
}

/// The lower edge of heatmap bucket `b`, in seconds.
pub fn bucket_floor_s(b: u16) -> f64 {
    BUCKET_BASE_S * 2f64.powf(f64::from(b) / BUCKETS_PER_OCTAVE)
}

/// p50 and p99 of one slice's samples of one metric, with their n.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Band {
    pub p50: f64,
    pub p99: f64,
    pub n: usize,
}

impl Band {
    /// The band of a slice's samples (all finite), in O(n): a slice can hold every decode
    /// step of a second, 100,000 of them at a high rate.
    fn of(values: &mut [f64]) -> Option<Band> {
        let [p50, p99] = percentiles_in_place(values, [50.0, 99.0])?;
        Some(Band {
            p50,
            p99,
            n: values.len(),
        })
    }
}

/// The metrics a slice keeps bands of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceMetric {
    Ttft = 0,
    Tpot = 1,
    Itl = 2,
}

/// One closed slice.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slice {
    /// Slice number: run time `index * SLICE_S` to `(index + 1) * SLICE_S`.
    pub index: u64,
    /// TTFT, TPOT and ITL bands (`None` where the slice had no sample).
    pub bands: [Option<Band>; 3],
    /// ITL samples per heatmap bucket, ascending by bucket, buckets without samples left out.
    pub itl_buckets: Vec<(u16, u32)>,
}

impl Slice {
    pub fn band(&self, m: SliceMetric) -> Option<Band> {
        self.bands[m as usize]
    }

    pub fn itl_n(&self) -> u32 {
        self.itl_buckets.iter().map(|(_, c)| c).sum()
    }
}

/// The slices so far and the one still open.
#[derive(Clone, Debug, Default)]
pub struct Slices {
    closed: VecDeque<Slice>,
    open: Option<u64>,
    values: [Vec<f64>; 3],
}

impl Slices {
    /// Adds a sample at run time `t_s` (closing the open slice first if `t_s` is past it).
    pub fn observe(&mut self, t_s: f64, metric: SliceMetric, v: f64) {
        self.observe_all(t_s, metric, [v]);
    }

    /// `observe` for several values at one time.
    pub fn observe_all(
        &mut self,
        t_s: f64,
        metric: SliceMetric,
        vs: impl IntoIterator<Item = f64>,
    ) {
        let index = slice_of(t_s);
        self.advance(t_s);
        let values = &mut self.values[metric as usize];
        let before = values.len();
        values.extend(vs.into_iter().filter(|v| v.is_finite() && *v >= 0.0));
        if values.len() > before {
            self.open = Some(self.open.map_or(index, |o| o.max(index)));
        }
    }

    /// Closes the open slice if run time `t_s` is past it. Returns whether one closed.
    pub fn advance(&mut self, t_s: f64) -> bool {
        match self.open {
            Some(open) if slice_of(t_s) > open => {
                self.close(open);
                true
            }
            _ => false,
        }
    }

    fn close(&mut self, index: u64) {
        let mut slice = Slice {
            index,
            ..Slice::default()
        };
        for (band, values) in slice.bands.iter_mut().zip(self.values.iter_mut()) {
            *band = Band::of(values);
        }
        // Counted, not sorted: a slice can hold 100,000 steps.
        let mut counts = [0u32; BUCKETS as usize];
        for &v in &self.values[SliceMetric::Itl as usize] {
            counts[usize::from(bucket_of(v))] += 1;
        }
        slice.itl_buckets = (0..BUCKETS).zip(counts).filter(|&(_, n)| n > 0).collect();
        for v in &mut self.values {
            v.clear();
        }
        self.open = None;
        if self.closed.len() == SLICE_HISTORY {
            self.closed.pop_front();
        }
        self.closed.push_back(slice);
    }

    /// Closed slices, oldest first.
    pub fn closed(&self) -> &VecDeque<Slice> {
        &self.closed
    }

    /// The newest closed slices covering at most `count` slice numbers, oldest first.
    pub fn last_span(&self, count: u64) -> impl Iterator<Item = &Slice> {
        let newest = self.closed.back().map_or(0, |s| s.index);
        let from = (newest + 1).saturating_sub(count);
        self.closed.iter().filter(move |s| s.index >= from)
    }

    pub fn clear(&mut self) {
        self.closed.clear();
        self.open = None;
        for v in &mut self.values {
            v.clear();
        }
    }
}

/// The slice run time `t_s` falls in.
pub fn slice_of(t_s: f64) -> u64 {
    if t_s.is_finite() && t_s > 0.0 {
        (t_s / SLICE_S).floor() as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket is the floor of `4 · log2(v / 1 µs)`, for latencies from below a
    /// microsecond to hours and at the buckets' own edges.
    #[test]
    fn a_bucket_is_the_floor_of_its_log() {
        let floor = |v: f64| {
            let b = ((v / BUCKET_BASE_S).log2() * BUCKETS_PER_OCTAVE).floor();
            (b as u16).min(BUCKETS - 1)
        };
        let mut v = 1e-7;
        while v < 1e5 {
            assert_eq!(
                bucket_of(v),
                if v > BUCKET_BASE_S { floor(v) } else { 0 },
                "{v}"
            );
            v *= 1.0007;
        }
        for b in 1..BUCKETS {
            let edge = bucket_floor_s(b);
            for x in [edge, edge.next_down(), edge.next_up()] {
                assert_eq!(bucket_of(x), floor(x), "{x}");
            }
        }
    }

    #[test]
    fn buckets_are_log_spaced() {
        assert_eq!(bucket_of(0.0), 0);
        assert_eq!(bucket_of(2e-6), 4);
        let b = bucket_of(0.002);
        assert!(bucket_floor_s(b) <= 0.002 && 0.002 < bucket_floor_s(b + 1));
        assert_eq!(bucket_of(1e9), BUCKETS - 1);
    }

    #[test]
    fn slices_close_with_exact_bands_and_counts() {
        let mut s = Slices::default();
        // Slice 0: ITL 1..=100 ms; slice 2: one TTFT; nothing in slice 1.
        for i in 1..=100 {
            s.observe(0.5, SliceMetric::Itl, f64::from(i) * 1e-3);
        }
        assert!(s.closed().is_empty());
        s.observe(2.2, SliceMetric::Ttft, 0.02);
        assert!(s.advance(3.0));
        let c: Vec<&Slice> = s.closed().iter().collect();
        assert_eq!(c.len(), 2);
        let itl = c[0].band(SliceMetric::Itl).unwrap_or_default();
        // numpy.percentile(np.arange(1, 101) * 1e-3, [50, 99]) = [0.0505, 0.09901]
        assert!((itl.p50 - 0.0505).abs() < 1e-15 && (itl.p99 - 0.09901).abs() < 1e-15);
        assert_eq!(itl.n, 100);
        assert_eq!(c[0].itl_n(), 100);
        assert_eq!(c[0].band(SliceMetric::Ttft), None);
        assert_eq!(c[1].index, 2);
        assert_eq!(c[1].band(SliceMetric::Ttft).map(|b| b.p99), Some(0.02));
        assert_eq!(s.last_span(1).count(), 1);
        assert_eq!(s.last_span(3).count(), 2);
    }
}
