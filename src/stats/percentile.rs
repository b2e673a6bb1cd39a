//! Percentiles exactly as `numpy.percentile(a, q)` computes them with its default `linear` method.

/// The `q`-th percentile (0..=100) of `sorted` (ascending, no NaN), as numpy's default method:
/// virtual index `(n − 1)·q/100`, then numpy's `_lerp` between the two neighbours (which
/// interpolates from the upper neighbour when the fraction is ≥ 0.5, for the same rounding).
/// Returns `None` for an empty slice.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let q = q / 100.0;
    let virtual_index = (n as f64 - 1.0) * q;
    let lo = virtual_index.floor();
    let gamma = virtual_index - lo;
    let lo = (lo as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    Some(lerp(sorted[lo], sorted[hi], gamma))
}

/// numpy's `_lerp(a, b, t)`.
pub(crate) fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// The two ranks (0-based, into the sorted data) and the fraction `percentile_sorted` uses.
pub(crate) fn ranks(n: usize, q: f64) -> (usize, usize, f64) {
    let virtual_index = (n as f64 - 1.0) * (q / 100.0);
    let lo = virtual_index.floor();
    let gamma = virtual_index - lo;
    let lo = (lo as usize).min(n - 1);
    (lo, (lo + 1).min(n - 1), gamma)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    /// (data, [p50, p90, p95, p99], mean, max) from numpy 2.x:
    /// `np.percentile(a, q)` (default linear method), `a.mean()`, `a.max()`.
    fn cases() -> Vec<(Vec<f64>, [f64; 4], f64, f64)> {
        vec![
            (vec![0.0123], [0.0123; 4], 0.0123, 0.0123),
            (
                vec![0.010, 0.030],
                [0.02, 0.028, 0.028999999999999998, 0.0298],
                0.02,
                0.03,
            ),
            (
                vec![
                    0.012, 0.015, 0.011, 0.019, 0.013, 0.014, 0.250, 0.016, 0.012, 0.017,
                ],
                [
                    0.014499999999999999,
                    0.042099999999999915,
                    0.14604999999999974,
                    0.22921000000000002,
                ],
                0.0379,
                0.25,
            ),
            (
                vec![
                    3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0, 9.0, 7.0, 9.0, 3.0,
                    2.0, 3.0, 8.0, 4.0, 6.0, 2.0, 6.0,
                ],
                [5.0, 8.8, 9.0, 9.0],
                4.826086956521739,
                9.0,
            ),
        ]
    }

    #[test]
    fn percentiles_match_numpy_bit_for_bit() {
        for (data, want, _, _) in cases() {
            let mut sorted = data.clone();
            sorted.sort_by(f64::total_cmp);
            for (q, w) in [50.0, 90.0, 95.0, 99.0].iter().zip(want) {
                let got = percentile_sorted(&sorted, *q).unwrap();
                assert_eq!(got, w, "p{q} of {data:?}");
            }
        }
    }

    #[test]
    fn window_summary_matches_numpy() {
        for (data, want, mean, max) in cases() {
            let s = Summary::of(&data);
            assert_eq!(s.n, data.len());
            assert_eq!([s.p50, s.p90, s.p95, s.p99], want, "{data:?}");
            assert!(
                (s.mean - mean).abs() <= 1e-15 * mean.abs(),
                "mean {} vs {mean}",
                s.mean
            );
            assert_eq!(s.max, max);
        }
    }

    #[test]
    fn empty_has_no_percentile() {
        assert_eq!(percentile_sorted(&[], 50.0), None);
        assert_eq!(Summary::of(&[]).n, 0);
    }

    #[test]
    fn p90_p99_and_max_differ_at_n_10() {
        // The floor-index bug of some tools makes p90 = p99 = max at n = 10.
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!(s.p90 < s.p99 && s.p99 < s.max, "{s:?}");
    }

    #[test]
    fn window_evicts_oldest_and_keeps_exact_stats() {
        let mut w = crate::stats::Window::new(3);
        for v in [10.0, 1.0, 2.0, 3.0] {
            w.push(v);
        }
        let s = w.summary();
        assert_eq!(s.n, 3);
        assert_eq!(s.max, 3.0);
        assert_eq!(s.p50, 2.0);
        assert_eq!(s.mean, 2.0);
    }
}
