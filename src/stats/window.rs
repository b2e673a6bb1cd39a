//! A bounded window of samples with exact order statistics.

use std::collections::{BTreeMap, VecDeque};

use super::percentile::{lerp, ranks};
use super::Summary;

/// The last `capacity` samples in arrival order, plus the same samples as an ordered multiset so
/// that insert and evict are O(log n) and a summary is one O(n) in-order walk (no sort).
#[derive(Clone, Debug)]
pub struct Window {
    capacity: usize,
    order: VecDeque<f64>,
    sorted: BTreeMap<u64, u32>,
    sum: f64,
}

/// Non-negative finite floats order like their bit patterns; latencies and rates are never negative.
fn key(v: f64) -> u64 {
    v.to_bits()
}

impl Window {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            order: VecDeque::with_capacity(capacity.clamp(1, 1 << 16)),
            sorted: BTreeMap::new(),
            sum: 0.0,
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
        if !(v.is_finite() && v >= 0.0) {
            return;
        }
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.sum -= old;
                if let Some(c) = self.sorted.get_mut(&key(old)) {
                    *c -= 1;
                    if *c == 0 {
                        self.sorted.remove(&key(old));
                    }
                }
            }
        }
        self.order.push_back(v);
        *self.sorted.entry(key(v)).or_insert(0) += 1;
        self.sum += v;
    }

    pub fn clear(&mut self) {
        self.order.clear();
        self.sorted.clear();
        self.sum = 0.0;
    }

    /// Samples in arrival order (oldest first).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = f64> + '_ {
        self.order.iter().copied()
    }

    /// mean, p50, p90, p95, p99, max and n, as numpy computes them over these samples.
    pub fn summary(&self) -> Summary {
        let n = self.order.len();
        if n == 0 {
            return Summary::default();
        }
        // The mean is summed afresh in arrival order (as numpy does) to avoid drift from the
        // running sum over a long run.
        let mean = self.order.iter().sum::<f64>() / n as f64;
        let qs = [50.0, 90.0, 95.0, 99.0];
        let mut want: Vec<(usize, usize, f64)> = qs.iter().map(|&q| ranks(n, q)).collect();
        let mut values = [[0.0f64; 2]; 4];
        // One in-order walk picks every needed rank.
        let mut rank = 0usize;
        for (&k, &count) in &self.sorted {
            let v = f64::from_bits(k);
            let next = rank + count as usize;
            for (i, (lo, hi, _)) in want.iter().enumerate() {
                if *lo >= rank && *lo < next {
                    values[i][0] = v;
                }
                if *hi >= rank && *hi < next {
                    values[i][1] = v;
                }
            }
            rank = next;
        }
        let max = self
            .sorted
            .keys()
            .next_back()
            .map(|&k| f64::from_bits(k))
            .unwrap_or(0.0);
        let mut out = [0.0f64; 4];
        for (i, (_, _, gamma)) in want.drain(..).enumerate() {
            out[i] = lerp(values[i][0], values[i][1], gamma);
        }
        Summary {
            n,
            mean,
            p50: out[0],
            p90: out[1],
            p95: out[2],
            p99: out[3],
            max,
        }
    }
}
