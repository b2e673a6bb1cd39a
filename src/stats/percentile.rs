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
