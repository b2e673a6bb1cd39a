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

/// The median: `numpy.percentile(a, 50)` with the default `linear` method, so it is the same
/// number as every p50 the tool shows. (`numpy.median` averages the two middle values instead,
/// which can differ from this in the last bit; the project's definition is the percentile's.)
///
/// NaN and ±inf are left out first: the result is `numpy.percentile(a[numpy.isfinite(a)], 50)`
/// (for data with NaN but no infinity that is `numpy.nanpercentile(a, 50)`). A non-finite value
/// is never a measurement here: a NaN is a missing figure, an infinity a division by a zero
/// duration. `None` when no finite value is left. Copies `values`; see `median_in_place`.
pub fn median(values: &[f64]) -> Option<f64> {
    median_in_place(&mut values.to_vec())
}

/// [`median`] without the copy: reorders `values` (the finite ones first, partially sorted) and
/// runs in O(n), for loops that take many medians (bootstrap resamples).
pub fn median_in_place(values: &mut [f64]) -> Option<f64> {
    percentile_in_place(values, 50.0)
}

/// The `q`-th percentile of the finite values, as [`percentile_sorted`] of them sorted, in
/// O(n) without sorting: reorders `values` as [`median_in_place`] does.
pub fn percentile_in_place(values: &mut [f64], q: f64) -> Option<f64> {
    percentiles_in_place(values, [q]).map(|[p]| p)
}

/// [`percentile_in_place`] for several `qs` at once, in one pass that puts the finite values
/// first and one selection each, every selection after the first searching only right of the
/// rank before it when `qs` ascend (a slice's p50 and p99 over 100,000 steps).
pub fn percentiles_in_place<const K: usize>(values: &mut [f64], qs: [f64; K]) -> Option<[f64; K]> {
    let mut n = 0;
    let mut i = 0;
    while i < values.len() {
        if values[i].is_finite() {
            values.swap(n, i);
            n += 1;
        }
        i += 1;
    }
    if n == 0 {
        return None;
    }
    let mut out = [0.0; K];
    // Every value left of `from` is at most every value from it on.
    let mut from = 0;
    for (p, q) in out.iter_mut().zip(qs) {
        let (lo, hi, gamma) = ranks(n, q);
        if lo < from {
            from = 0;
        }
        let (_, lo_value, right) =
            values[from..n].select_nth_unstable_by(lo - from, f64::total_cmp);
        let lo_value = *lo_value;
        let hi_value = if hi == lo {
            lo_value
        } else {
            // The next rank up is the smallest value right of the `lo`-th.
            right.iter().copied().fold(f64::INFINITY, f64::min)
        };
        *p = lerp(lo_value, hi_value, gamma);
        from = lo;
    }
    Some(out)
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

    /// Each percentile taken in place, alone or several at once (in order or not), is the
    /// percentile of the finite values sorted; a NaN is left out, and nothing finite is none.
    #[test]
    fn percentiles_in_place_are_percentile_sorted() {
        let mut x = 3u64;
        for n in [1usize, 2, 3, 10, 101, 1000, 5000] {
            let mut values: Vec<f64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 300) as f64 * 0.0007
                })
                .collect();
            values.push(f64::NAN);
            let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
            sorted.sort_by(f64::total_cmp);
            let want = |q| percentile_sorted(&sorted, q).unwrap_or(f64::NAN);
            for q in [0.0, 1.0, 50.0, 90.0, 95.0, 99.0, 100.0] {
                let got = percentile_in_place(&mut values.clone(), q);
                assert_eq!(got, Some(want(q)), "n {n}, q {q}");
            }
            let got = percentiles_in_place(&mut values.clone(), [50.0, 99.0]);
            assert_eq!(got, Some([want(50.0), want(99.0)]), "n {n}");
            let got = percentiles_in_place(&mut values.clone(), [99.0, 0.0, 90.0, 1.0]);
            assert_eq!(
                got,
                Some([want(99.0), want(0.0), want(90.0), want(1.0)]),
                "n {n}"
            );
        }
        assert_eq!(percentile_in_place(&mut [f64::NAN], 50.0), None);
        assert_eq!(percentiles_in_place(&mut [f64::NAN], [50.0, 99.0]), None);
    }

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

    /// (data, `np.percentile(a[np.isfinite(a)], 50)`) from numpy 2.x.
    fn median_cases() -> Vec<(Vec<f64>, Option<f64>)> {
        let (nan, inf) = (f64::NAN, f64::INFINITY);
        vec![
            (vec![], None),
            (vec![nan, inf, -inf], None),
            (vec![0.0123], Some(0.0123)),
            (vec![0.010, 0.030], Some(0.02)),
            (vec![0.3, 0.1, 0.7, 0.2], Some(0.25)),
            (
                vec![
                    0.012, 0.015, 0.011, 0.019, 0.013, 0.014, 0.250, 0.016, 0.012, 0.017,
                ],
                Some(0.014499999999999999),
            ),
            (
                vec![
                    3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0, 9.0, 7.0, 9.0, 3.0,
                    2.0, 3.0, 8.0, 4.0, 6.0, 2.0, 6.0,
                ],
                Some(5.0),
            ),
            // `np.median` gives 0.0632794282769812 here, one ulp off the percentile.
            (
                vec![0.12568332230972723, 0.0008755342442351593],
                Some(0.06327942827698119),
            ),
            (
                vec![1e-3, 2.7e-3, 0.0311, 5e-4, 0.0125, 0.0033],
                Some(0.003),
            ),
            // Non-finite values are left out (np.nanpercentile gives the same for these).
            (vec![0.1, nan, 0.7, 0.2], Some(0.2)),
            (vec![inf, 0.5, -inf, 0.25, nan], Some(0.375)),
        ]
    }

    #[test]
    fn median_matches_numpy_bit_for_bit() {
        for (data, want) in median_cases() {
            assert_eq!(median(&data), want, "{data:?}");
            let mut v = data.clone();
            assert_eq!(median_in_place(&mut v), want, "in place {data:?}");
            // The same number as the p50 of the finite values.
            let mut finite: Vec<f64> = data.iter().copied().filter(|x| x.is_finite()).collect();
            finite.sort_by(f64::total_cmp);
            assert_eq!(percentile_sorted(&finite, 50.0), want, "p50 {data:?}");
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
