//! A bounded window of samples with exact order statistics and an exact mean.
//!
//! Every summary is meant to be recomputed once per frame for a whole table (6 metrics,
//! 100,000 samples each), so nothing here walks or sorts all the samples:
//!
//! - the samples are kept twice: in arrival order (a ring, for eviction and `iter`) and as
//!   an ordered multiset of *sorted blocks* of at most [`BLOCK_MAX`] values (split when
//!   full, merged or rebalanced when under [`BLOCK_MIN`]). A push is one evict and one
//!   insert: a binary search over the block maxima, one inside a block, and a `memmove`
//!   of half a block at most. Rank selection walks the block lengths (about a thousand at
//!   100,000 samples), so the nine ranks a summary needs cost O(n / block) in one pass;
//! - the sum is an exact fixed-point integer (a Kulisch accumulator: every finite
//!   non-negative `f64` is an integer multiple of 2⁻¹⁰⁷⁴), so adding and evicting never
//!   drift, and the mean is the exact sum divided by n, *correctly rounded* (the closest
//!   double to the true mean). numpy's `a.mean()` sums pairwise in floating point, with its
//!   own rounding, so it can differ from that in the last bit: in the cases tested against
//!   numpy 2.4 (n = 1 to 100,001, evicted windows, duplicates) it is equal or 1 ulp apart,
//!   and the tests pin both. The percentiles and the max are numpy's, bit for bit.
//!
//! Memory: 8 B per sample in the ring plus 8 B per sample in the blocks at 100 % fill
//! (blocks hold between `BLOCK_MIN` and `BLOCK_MAX` of `BLOCK_MAX + 1` slots, about 3/4
//! full under random churn), about 19 B per sample in all, and 272 B per window for the sum.

use std::collections::VecDeque;

use super::percentile::{lerp, ranks};
use super::Summary;

/// A block is split in two when it grows past this many values. Smaller blocks make a push
/// cheaper (less to move) and a summary dearer (more blocks to walk); a push happens per
/// decode step, a summary per frame, so the blocks are small (`benches/state.rs`: 124 ns a
/// push into a full 100k window at 128, 170 ns at 512; a 100k table 4.1 µs against 2.0 µs).
const BLOCK_MAX: usize = 128;
/// A block this small is merged with (or refilled from) a neighbour.
const BLOCK_MIN: usize = BLOCK_MAX / 8;

/// The last `capacity` samples in arrival order, plus the same samples as an ordered multiset
/// (sorted blocks) and their exact sum.
#[derive(Clone, Debug)]
pub struct Window {
    capacity: usize,
    order: VecDeque<f64>,
    sorted: SortedBlocks,
    sum: ExactSum,
}

/// Whether `v` is a sample a window keeps: latencies and rates are finite and never negative.
pub(crate) fn is_sample(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// Non-negative finite floats order like their bit patterns (`-0.0` is stored as `+0.0`).
fn key(v: f64) -> u64 {
    v.to_bits()
}

impl Window {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            order: VecDeque::with_capacity(capacity.clamp(1, 1 << 16)),
            sorted: SortedBlocks::default(),
            sum: ExactSum::default(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Adds a sample; negative, NaN or infinite values are ignored (they are not latencies).
    pub fn push(&mut self, v: f64) {
        if !is_sample(v) {
            return;
        }
        // -0.0 + 0.0 == +0.0, whose bits order first.
        let v = v + 0.0;
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.sorted.remove(key(old));
                self.sum.sub(old);
            }
        } else if self.order.len() == self.order.capacity() {
            // Grow to the capacity at most, not to the next power of two.
            let want = (self.order.len() * 2).min(self.capacity);
            self.order.reserve_exact(want - self.order.len());
        }
        self.order.push_back(v);
        self.sorted.insert(key(v));
        self.sum.add(v);
    }

    pub fn clear(&mut self) {
        self.order.clear();
        self.sorted = SortedBlocks::default();
        self.sum = ExactSum::default();
    }

    /// Samples in arrival order (oldest first).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = f64> + '_ {
        self.order.iter().copied()
    }

    /// The smallest sample, if any.
    pub fn min(&self) -> Option<f64> {
        self.sorted
            .blocks
            .first()
            .and_then(|b| b.first())
            .map(|&k| f64::from_bits(k))
    }

    /// The largest sample, if any.
    pub fn max(&self) -> Option<f64> {
        self.sorted
            .blocks
            .last()
            .and_then(|b| b.last())
            .map(|&k| f64::from_bits(k))
    }

    /// How many samples are below each of `edges` (ascending): a histogram's cumulative
    /// counts, exact, in one forward pass over the sorted blocks.
    pub fn counts_below(&self, edges: &[f64]) -> Vec<usize> {
        let mut cursor = Cursor::default();
        edges
            .iter()
            .map(|&e| {
                if e <= 0.0 || e.is_nan() {
                    0
                } else {
                    cursor.lower_bound(&self.sorted, key(e))
                }
            })
            .collect()
    }

    /// mean, p50, p90, p95, p99, max and n over these samples: the percentiles exactly as
    /// `numpy.percentile` (default `linear` method), the mean correctly rounded (see the
    /// module comment for how that compares with numpy's pairwise mean).
    pub fn summary(&self) -> Summary {
        summarize(&self.sorted, &[], &[], self.sum.clone())
    }
}

/// The summary of the newest `keep_a` samples of `a` together with the newest `keep_b`
/// samples of `b` (each clamped to the window's length), without building that window:
/// the larger part serves as the sorted base, the other part's kept samples are sorted and
/// merged in, and the base's dropped (oldest) samples are sorted and taken out. The cost is
/// one pass over the base's blocks plus O(m log m) for the m samples added or taken out,
/// which is small whenever the two windows barely overlap in time (warmup, then steady).
pub(crate) fn combined_summary(a: &Window, keep_a: usize, b: &Window, keep_b: usize) -> Summary {
    let (keep_a, keep_b) = (keep_a.min(a.len()), keep_b.min(b.len()));
    let (base, keep_base, other, keep_other) = if keep_a >= keep_b {
        (a, keep_a, b, keep_b)
    } else {
        (b, keep_b, a, keep_a)
    };
    let mut sum = base.sum.clone();
    let mut removed: Vec<u64> = base
        .order
        .iter()
        .take(base.len() - keep_base)
        .map(|&v| {
            sum.sub(v);
            key(v)
        })
        .collect();
    let mut added: Vec<u64> = other
        .order
        .iter()
        .skip(other.len() - keep_other)
        .map(|&v| {
            sum.add(v);
            key(v)
        })
        .collect();
    removed.sort_unstable();
    added.sort_unstable();
    summarize(&base.sorted, &added, &removed, sum)
}

/// The summary of the multiset `base + added − removed` (`removed` ⊆ `base`; both slices
/// sorted), whose exact sum is `sum`.
fn summarize(base: &SortedBlocks, added: &[u64], removed: &[u64], sum: ExactSum) -> Summary {
    let n = (base.len() + added.len()).saturating_sub(removed.len());
    if n == 0 {
        return Summary::default();
    }
    let qs = [50.0, 90.0, 95.0, 99.0];
    let fracs = qs.map(|q| ranks(n, q));
    // The nine ranks wanted (lo and hi of each percentile, then the max), ascending.
    let mut want: [(usize, usize); 9] = [(n - 1, 8); 9];
    for (i, &(lo, hi, _)) in fracs.iter().enumerate() {
        want[2 * i] = (lo, 2 * i);
        want[2 * i + 1] = (hi, 2 * i + 1);
    }
    want.sort_unstable();
    let values = select_ranks(base, added, removed, &want);
    let at = |slot: usize| f64::from_bits(values[slot]);
    let p = |i: usize| lerp(at(2 * i), at(2 * i + 1), fracs[i].2);
    Summary {
        n,
        mean: sum.mean(n as u64),
        p50: p(0),
        p90: p(1),
        p95: p(2),
        p99: p(3),
        max: at(8),
    }
}

/// The values at the given ranks (ascending, 0-based) of `base + added − removed`, written to
/// their slots. Corrections are applied in value order; between two of them the result is a
/// run of consecutive base values, so each rank falls either on a correction or on one base
/// element, found by a forward walk over the blocks.
fn select_ranks(
    base: &SortedBlocks,
    added: &[u64],
    removed: &[u64],
    want: &[(usize, usize); 9],
) -> [u64; 9] {
    let mut out = [0u64; 9];
    let mut wi = 0;
    // Result elements emitted so far, and base elements consumed so far.
    let (mut r, mut s) = (0usize, 0usize);
    let mut select = Cursor::default();
    let mut bound = Cursor::default();
    let (mut ai, mut ri) = (0, 0);
    loop {
        // The next correction in value order (an addition first on ties; either is right).
        let (x, is_add) = match (added.get(ai), removed.get(ri)) {
            (Some(&a), Some(&d)) if a <= d => (a, true),
            (_, Some(&d)) => (d, false),
            (Some(&a), None) => (a, true),
            (None, None) => break,
        };
        let lb = bound.lower_bound(base, x).max(s);
        while wi < want.len() && want[wi].0 < r + (lb - s) {
            out[want[wi].1] = select.select(base, s + (want[wi].0 - r));
            wi += 1;
        }
        r += lb - s;
        s = lb;
        if is_add {
            while wi < want.len() && want[wi].0 == r {
                out[want[wi].1] = x;
                wi += 1;
            }
            r += 1;
            ai += 1;
        } else {
            // base[s] == x: skip it.
            s += 1;
            ri += 1;
        }
    }
    while wi < want.len() {
        out[want[wi].1] = select.select(base, s + (want[wi].0 - r));
        wi += 1;
    }
    out
}

/// A forward-only position in a `SortedBlocks`: block index and elements before it.
#[derive(Default)]
struct Cursor {
    block: usize,
    before: usize,
}

impl Cursor {
    /// The element at global index `j` (non-decreasing between calls); 0 past the end.
    fn select(&mut self, s: &SortedBlocks, j: usize) -> u64 {
        while let Some(b) = s.blocks.get(self.block) {
            if j < self.before + b.len() {
                return b[j - self.before];
            }
            self.before += b.len();
            self.block += 1;
        }
        0
    }

    /// How many elements are `< x` (`x` non-decreasing between calls).
    fn lower_bound(&mut self, s: &SortedBlocks, x: u64) -> usize {
        while let (Some(b), Some(&max)) = (s.blocks.get(self.block), s.maxes.get(self.block)) {
            if max >= x {
                return self.before + b.partition_point(|&y| y < x);
            }
            self.before += b.len();
            self.block += 1;
        }
        self.before
    }
}

/// An ordered multiset of `u64` as consecutive sorted blocks, with each block's maximum
/// kept apart so finding a value's block is a binary search over one small array.
#[derive(Clone, Debug, Default)]
struct SortedBlocks {
    blocks: Vec<Vec<u64>>,
    maxes: Vec<u64>,
    len: usize,
}

impl SortedBlocks {
    fn len(&self) -> usize {
        self.len
    }

    fn new_block() -> Vec<u64> {
        Vec::with_capacity(BLOCK_MAX + 1)
    }

    /// The first block whose maximum is ≥ `k` (`blocks.len()` if none).
    fn block_for(&self, k: u64) -> usize {
        self.maxes.partition_point(|&m| m < k)
    }

    fn insert(&mut self, k: u64) {
        self.len += 1;
        if self.blocks.is_empty() {
            let mut b = Self::new_block();
            b.push(k);
            self.blocks.push(b);
            self.maxes.push(k);
            return;
        }
        let i = self.block_for(k).min(self.blocks.len() - 1);
        let b = &mut self.blocks[i];
        let pos = b.partition_point(|&y| y <= k);
        b.insert(pos, k);
        if k > self.maxes[i] {
            self.maxes[i] = k;
        }
        if b.len() > BLOCK_MAX {
            let mut tail = Self::new_block();
            tail.extend_from_slice(&b[BLOCK_MAX / 2..]);
            b.truncate(BLOCK_MAX / 2);
            let tail_max = self.maxes[i];
            self.maxes[i] = b[b.len() - 1];
            self.blocks.insert(i + 1, tail);
            self.maxes.insert(i + 1, tail_max);
        }
    }

    /// Removes one copy of `k`; false if there is none.
    fn remove(&mut self, k: u64) -> bool {
        let i = self.block_for(k);
        let Some(b) = self.blocks.get_mut(i) else {
            return false;
        };
        let pos = b.partition_point(|&y| y < k);
        if b.get(pos) != Some(&k) {
            return false;
        }
        b.remove(pos);
        self.len -= 1;
        if b.is_empty() {
            self.blocks.remove(i);
            self.maxes.remove(i);
            return true;
        }
        if pos == b.len() {
            self.maxes[i] = b[pos - 1];
        }
        if b.len() < BLOCK_MIN && self.blocks.len() > 1 {
            self.rebalance(i);
        }
        true
    }

    /// Block `i` is small: merge it with a neighbour, or even the two out if that would
    /// overflow a block.
    fn rebalance(&mut self, i: usize) {
        let lo = if i + 1 < self.blocks.len() { i } else { i - 1 };
        let (left, right) = self.blocks.split_at_mut(lo + 1);
        let (a, b) = (&mut left[lo], &mut right[0]);
        if a.len() + b.len() <= BLOCK_MAX {
            a.extend_from_slice(b);
            self.blocks.remove(lo + 1);
            self.maxes.remove(lo);
            return;
        }
        let half = (a.len() + b.len()) / 2;
        if a.len() < half {
            let m = half - a.len();
            a.extend(b.drain(..m));
        } else {
            let m = a.len() - half;
            b.splice(0..0, a.drain(a.len() - m..));
        }
        self.maxes[lo] = a[a.len() - 1];
    }
}

/// Limbs of the fixed-point sum: values up to 2¹⁰²⁴ in units of 2⁻¹⁰⁷⁴ take 2,098 bits; 34
/// limbs leave 78 bits of headroom for the count.
const LIMBS: usize = 34;

/// The exact sum of non-negative finite `f64`s, as an integer count of 2⁻¹⁰⁷⁴ (the smallest
/// subnormal, of which every finite `f64` is a multiple). Adding and subtracting are exact,
/// so a window's sum never drifts however long it slides.
#[derive(Clone, Debug)]
struct ExactSum {
    limbs: [u64; LIMBS],
}

impl Default for ExactSum {
    fn default() -> Self {
        Self { limbs: [0; LIMBS] }
    }
}

/// `v` as `m · 2^(offset − 1074)` with `m < 2⁵³`.
fn fixed_point(v: f64) -> (u64, usize) {
    let bits = v.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as usize;
    let fraction = bits & ((1u64 << 52) - 1);
    if exponent == 0 {
        (fraction, 0)
    } else {
        (fraction | (1u64 << 52), exponent - 1)
    }
}

impl ExactSum {
    fn add(&mut self, v: f64) {
        let (m, offset) = fixed_point(v);
        let (i, shift) = (offset / 64, offset % 64);
        let wide = u128::from(m) << shift;
        let mut carry = 0u64;
        for (j, part) in [wide as u64, (wide >> 64) as u64].into_iter().enumerate() {
            let (x, c1) = self.limbs[i + j].overflowing_add(part);
            let (x, c2) = x.overflowing_add(carry);
            self.limbs[i + j] = x;
            carry = u64::from(c1 || c2);
        }
        for limb in &mut self.limbs[i + 2..] {
            if carry == 0 {
                break;
            }
            let (x, c) = limb.overflowing_add(carry);
            *limb = x;
            carry = u64::from(c);
        }
    }

    /// Subtracts a value added before (the sum never goes negative).
    fn sub(&mut self, v: f64) {
        let (m, offset) = fixed_point(v);
        let (i, shift) = (offset / 64, offset % 64);
        let wide = u128::from(m) << shift;
        let mut borrow = 0u64;
        for (j, part) in [wide as u64, (wide >> 64) as u64].into_iter().enumerate() {
            let (x, b1) = self.limbs[i + j].overflowing_sub(part);
            let (x, b2) = x.overflowing_sub(borrow);
            self.limbs[i + j] = x;
            borrow = u64::from(b1 || b2);
        }
        for limb in &mut self.limbs[i + 2..] {
            if borrow == 0 {
                break;
            }
            let (x, b) = limb.overflowing_sub(borrow);
            *limb = x;
            borrow = u64::from(b);
        }
    }

    /// The sum divided by `n`, correctly rounded (to nearest, ties to even).
    fn mean(&self, n: u64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        // q = sum · 2⁶⁴ / n, in units of 2^(−1074−64); one extra limb for the fraction.
        let mut q = [0u64; LIMBS + 1];
        let mut rem = 0u128;
        let d = u128::from(n);
        for i in (0..LIMBS).rev() {
            let cur = (rem << 64) | u128::from(self.limbs[i]);
            q[i + 1] = (cur / d) as u64;
            rem = cur % d;
        }
        let cur = rem << 64;
        q[0] = (cur / d) as u64;
        let inexact = !cur.is_multiple_of(d);
        let Some(top) = q.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        let bit_len = 64 * top + (64 - q[top].leading_zeros() as usize);
        // Keep 53 significant bits, but nothing below 2⁻¹⁰⁷⁴ (bit 64 of q).
        let p = bit_len.saturating_sub(53).max(64);
        let bits_at = |pos: usize| -> u64 {
            let (i, sh) = (pos / 64, pos % 64);
            let lo = q.get(i).copied().unwrap_or(0) >> sh;
            let hi = if sh == 0 {
                0
            } else {
                q.get(i + 1).copied().unwrap_or(0) << (64 - sh)
            };
            lo | hi
        };
        let mut m = bits_at(p) & ((1u64 << 53) - 1);
        let half = (q[(p - 1) / 64] >> ((p - 1) % 64)) & 1 == 1;
        let below = (p - 1) / 64;
        let sticky = inexact
            || q[..below].iter().any(|&l| l != 0)
            || q[below] & ((1u64 << ((p - 1) % 64)) - 1) != 0;
        let mut exp = p as i64 - 1138; // the value is m · 2^exp
        if half && (sticky || m & 1 == 1) {
            m += 1;
            if m == 1 << 53 {
                m >>= 1;
                exp += 1;
            }
        }
        if m < 1 << 52 {
            // Subnormal (exp == −1074): the fraction field is m itself.
            return f64::from_bits(m);
        }
        let biased = exp + 52 + 1023;
        if biased >= 0x7ff {
            return f64::INFINITY;
        }
        f64::from_bits(((biased as u64) << 52) | (m & ((1u64 << 52) - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator `numpy_cases` feeds, the same in Python (two IEEE roundings, no FMA).
    fn gen(i: u64) -> f64 {
        let k = ((i * 2654435761) % (1 << 32)) >> 16;
        k as f64 * 1.5e-7 + 0.004
    }

    /// The distance in ulps between two positive doubles.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    /// (capacity, samples fed, [p50, p90, p95, p99, numpy mean, exact mean, max]) from
    /// numpy 2.4.6 over the last `capacity` samples, made once with this script:
    ///
    /// ```python
    /// import numpy as np
    /// from fractions import Fraction
    /// def gen(i):
    ///     k = ((i * 2654435761) % 2**32) >> 16
    ///     return float(k) * 1.5e-7 + 0.004
    /// def describe(cap, feed):
    ///     a = np.array(feed[-cap:], dtype=np.float64)
    ///     ps = [float(np.percentile(a, q)) for q in (50, 90, 95, 99)]
    ///     exact = float(sum(Fraction(x) for x in a.tolist()) / len(a))  # correctly rounded
    ///     print(ps, float(a.mean()), exact, float(a.max()))
    /// describe(100001, [gen(i) for i in range(100001)])  # and so on, one call per case
    /// ```
    #[allow(clippy::type_complexity)]
    fn numpy_cases() -> Vec<(usize, Vec<f64>, [f64; 7])> {
        let dup10 = vec![
            0.012, 0.015, 0.012, 0.019, 0.013, 0.014, 0.250, 0.016, 0.012, 0.017,
        ];
        let dup25 = vec![
            0.5, 0.25, 0.1, 0.1, 0.3, 0.3, 0.3, 0.7, 0.1, 0.2, 0.9, 0.1, 0.1, 0.3, 0.3, 0.2, 0.4,
            0.4, 0.4, 0.4, 0.1, 0.6, 0.05, 0.3, 0.3,
        ];
        let gen_n = |n: u64| (0..n).map(gen).collect::<Vec<_>>();
        vec![
            (1, vec![0.0123], [0.0123; 7]),
            (
                2,
                vec![0.010, 0.030],
                [0.02, 0.028, 0.028999999999999998, 0.0298, 0.02, 0.02, 0.03],
            ),
            // numpy's mean is 1 ulp above the exact one here.
            (
                10,
                dup10,
                [
                    0.014499999999999999,
                    0.042099999999999915,
                    0.14604999999999974,
                    0.22921000000000002,
                    0.038000000000000006,
                    0.038,
                    0.25,
                ],
            ),
            // Evicted: the last 10 of 25, duplicates; numpy's mean 1 ulp below the exact one.
            (
                10,
                dup25,
                [
                    0.35,
                    0.41999999999999993,
                    0.5099999999999998,
                    0.582,
                    0.31499999999999995,
                    0.315,
                    0.6,
                ],
            ),
            (
                100_001,
                gen_n(100_001),
                [
                    0.0089152,
                    0.012847299999999999,
                    0.0133387,
                    0.013732,
                    0.008915130577694223,
                    0.008915130577694223,
                    0.013830249999999999,
                ],
            ),
            (
                1000,
                gen_n(5000),
                [
                    0.00891385,
                    0.01284277,
                    0.01333321,
                    0.0137281435,
                    0.0089143726,
                    0.0089143726,
                    0.0138196,
                ],
            ),
            // The last 100,001 of 250,000; numpy's mean 1 ulp above the exact one.
            (
                100_001,
                gen_n(250_000),
                [
                    0.0089152,
                    0.012847299999999999,
                    0.01333885,
                    0.013732,
                    0.008915194817551826,
                    0.008915194817551824,
                    0.013830249999999999,
                ],
            ),
        ]
    }

    #[test]
    fn counts_below_edges_are_exact() {
        let mut w = Window::new(1000);
        for i in 0..1000u32 {
            w.push(f64::from(i % 100) * 0.5);
        }
        // Ten of each of 0.0, 0.5, ..., 49.5.
        assert_eq!(
            w.counts_below(&[0.0, 0.25, 0.5, 10.0, 49.5, 50.0]),
            [0, 10, 10, 200, 990, 1000]
        );
        assert_eq!(w.min(), Some(0.0));
        assert_eq!(w.max(), Some(49.5));
        assert_eq!(Window::new(4).min(), None);
    }

    #[test]
    fn summaries_match_numpy() {
        for (capacity, feed, [p50, p90, p95, p99, np_mean, exact_mean, max]) in numpy_cases() {
            let mut w = Window::new(capacity);
            for &v in &feed {
                w.push(v);
            }
            let s = w.summary();
            let case = format!("capacity {capacity}, {} fed", feed.len());
            assert_eq!(s.n, capacity.min(feed.len()), "{case}");
            assert_eq!(
                [s.p50, s.p90, s.p95, s.p99, s.max],
                [p50, p90, p95, p99, max],
                "{case}"
            );
            assert_eq!(s.mean, exact_mean, "{case}: the correctly rounded mean");
            assert!(
                ulps(s.mean, np_mean) <= 1,
                "{case}: {} vs numpy {np_mean}",
                s.mean
            );
        }
    }

    /// Heap bytes a window holds (ring, blocks, block index).
    fn heap_bytes(w: &Window) -> usize {
        let blocks: usize = w.sorted.blocks.iter().map(|b| b.capacity() * 8).sum();
        w.order.capacity() * 8
            + blocks
            + w.sorted.blocks.capacity() * std::mem::size_of::<Vec<u64>>()
            + w.sorted.maxes.capacity() * 8
    }

    #[test]
    fn bytes_per_sample_stay_bounded() {
        let mut w = Window::new(100_000);
        for i in 0..300_000 {
            w.push(gen(i));
            if i == 100_000 || i == 299_999 {
                let per_sample = heap_bytes(&w) as f64 / w.len() as f64;
                eprintln!("{per_sample:.1} B per sample after {} pushes", i + 1);
                assert!(per_sample < 24.0, "{per_sample} B per sample");
            }
        }
    }

    #[test]
    fn sorted_blocks_stay_sorted_under_churn() {
        let mut w = Window::new(3000);
        let mut x = 12345u64;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Many duplicates and a few runs of one value.
            let v = if i % 7 == 0 { 1.0 } else { (x >> 54) as f64 };
            w.push(v);
            if i % 997 == 0 {
                let flat: Vec<u64> = w.sorted.blocks.iter().flatten().copied().collect();
                let mut want: Vec<u64> = w.iter().map(key).collect();
                want.sort_unstable();
                assert_eq!(flat, want);
                assert_eq!(w.sorted.len(), w.len());
                for (b, &m) in w.sorted.blocks.iter().zip(&w.sorted.maxes) {
                    assert!(!b.is_empty() && b.len() <= BLOCK_MAX);
                    assert_eq!(b.last(), Some(&m));
                }
            }
        }
    }

    #[test]
    fn exact_sum_has_no_drift() {
        let mut s = ExactSum::default();
        for v in [1e300, 1.0, 1e-300, 5e-324, f64::MAX, 0.1] {
            s.add(v);
        }
        for v in [1e300, 1e-300, 5e-324, f64::MAX, 0.1] {
            s.sub(v);
        }
        assert_eq!(s.mean(1), 1.0);
        s.sub(1.0);
        assert!(s.limbs.iter().all(|&l| l == 0));
    }

    #[test]
    fn mean_is_correctly_rounded() {
        let of = |vs: &[f64]| {
            let mut s = ExactSum::default();
            for &v in vs {
                s.add(v);
            }
            s.mean(vs.len() as u64)
        };
        assert_eq!(of(&[0.1, 0.2]), 0.15000000000000002);
        assert_eq!(of(&[0.1, 0.2, 0.3]), 0.2);
        assert_eq!(of(&[1.0, 2.0]), 1.5);
        assert_eq!(of(&[5e-324]), 5e-324);
        assert_eq!(of(&[5e-324, 0.0]), 0.0); // half of the smallest subnormal: ties to even
        assert_eq!(of(&[5e-324, 5e-324, 5e-324, 0.0]), 5e-324); // 0.75 rounds up
        assert_eq!(of(&[f64::MAX, f64::MAX]), f64::MAX);
        assert_eq!(of(&[2.2250738585072014e-308]), 2.2250738585072014e-308);
        assert_eq!(of(&[0.0]), 0.0);
    }
}
