//! Exact order statistics of an unsorted list of keys (a window's ring) without sorting it:
//! a count of the keys per coarse bucket, then, per query, the keys of the few buckets the
//! query falls in, gathered and sorted.
//!
//! A window pushed much faster than it is read (the ITLs at 100,000 decode steps a second,
//! read twice a second) used to sort all its keys at every read, and with the sorted copy
//! out of cache by the next read, that sort was a fifth of the dashboard's CPU. What a read
//! needs is nine ranks (a summary) or the counts below a histogram's edges, so here:
//!
//! - one pass takes the smallest and largest key; the keys share every bit above the
//!   highest bit where those two differ, and the [`BITS`] bits below it number the buckets
//!   (in key order: a bucket's keys all come before the next bucket's);
//! - a second pass counts the keys per bucket, and the sums of those counts say which
//!   bucket holds a rank or an edge;
//! - per query, one more pass copies out the keys of the buckets it needs, and each of
//!   those buckets is sorted alone (`radix`). The answer is exact: a rank is the same key
//!   a full sort puts there, a count below an edge the same count.
//!
//! Three passes that only read, and a sort of a few percent of the keys, in place of six
//! passes that scatter every key. When most keys fall in one bucket (a tight cluster far
//! from one outlier) the gathered keys approach all of them and the cost that of a sort.

use super::radix;

/// Bits of a bucket number: 4,096 buckets, whose counts (16 KB) stay in the first-level
/// cache while a pass counts.
const BITS: u32 = 12;
const BUCKETS: usize = 1 << BITS;

/// Per-bucket counts of a list of keys. Built for one state of the list: any change to the
/// keys makes it stale (the owner rebuilds it).
#[derive(Clone, Debug)]
pub(crate) struct Coarse {
    lo: u64,
    hi: u64,
    shift: u32,
    /// `below[b]`: keys in buckets before `b`; `below[BUCKETS]` is all of them.
    below: Vec<u32>,
}

impl Coarse {
    /// The counts of the keys of `parts` (a ring's two halves), or none when there are none.
    pub(crate) fn build(parts: [&[u64]; 2]) -> Option<Coarse> {
        let mut coarse = Coarse {
            lo: 0,
            hi: 0,
            shift: 0,
            below: vec![0; BUCKETS + 1],
        };
        coarse.rebuild(parts).then_some(coarse)
    }

    /// `build` again, in the same allocation; false when there are no keys.
    pub(crate) fn rebuild(&mut self, parts: [&[u64]; 2]) -> bool {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for part in parts {
            for &k in part {
                lo = lo.min(k);
                hi = hi.max(k);
            }
        }
        if lo > hi {
            return false;
        }
        let differ = 64 - (lo ^ hi).leading_zeros();
        self.lo = lo;
        self.hi = hi;
        self.shift = differ.saturating_sub(BITS);
        let counts = &mut self.below[1..];
        counts.fill(0);
        for part in parts {
            for &k in part {
                counts[((k >> self.shift) as usize) & (BUCKETS - 1)] += 1;
            }
        }
        // Bucket `b`'s count is at `b + 1`: the running sum there is what comes before `b + 1`.
        self.below[0] = 0;
        let mut sum = 0;
        for c in &mut self.below {
            sum += *c;
            *c = sum;
        }
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.below[BUCKETS] as usize
    }

    pub(crate) fn min(&self) -> u64 {
        self.lo
    }

    pub(crate) fn max(&self) -> u64 {
        self.hi
    }

    fn bucket(&self, k: u64) -> usize {
        ((k >> self.shift) as usize) & (BUCKETS - 1)
    }

    /// The bucket that holds rank `r` (< len).
    fn bucket_of_rank(&self, r: usize) -> usize {
        self.below.partition_point(|&c| c as usize <= r) - 1
    }

    /// The keys at `ranks` (each below `len`), in the same order.
    pub(crate) fn select(&self, parts: [&[u64]; 2], ranks: &[usize]) -> Vec<u64> {
        let buckets: Vec<usize> = ranks.iter().map(|&r| self.bucket_of_rank(r)).collect();
        self.gathered(parts, &buckets, |got| {
            ranks
                .iter()
                .zip(&buckets)
                .map(|(&r, &b)| got.bucket(b)[r - self.below[b] as usize])
                .collect()
        })
    }

    /// How many keys are below each of `keys`.
    pub(crate) fn counts_below(&self, parts: [&[u64]; 2], keys: &[u64]) -> Vec<usize> {
        let inside = |k: u64| k > self.lo && k <= self.hi;
        let buckets: Vec<usize> = keys
            .iter()
            .filter(|&&k| inside(k))
            .map(|&k| self.bucket(k))
            .collect();
        self.gathered(parts, &buckets, |got| {
            keys.iter()
                .map(|&k| {
                    if k <= self.lo {
                        0
                    } else if k > self.hi {
                        self.len()
                    } else {
                        let b = self.bucket(k);
                        self.below[b] as usize + got.bucket(b).partition_point(|&x| x < k)
                    }
                })
                .collect()
        })
    }

    /// Runs `answer` with a lookup from each of `buckets` (any order, repeats allowed) to its
    /// keys, sorted. The keys are copied out of `parts` in one pass into this thread's sort
    /// buffer, each bucket's together, and each bucket is then sorted alone.
    fn gathered<R>(
        &self,
        parts: [&[u64]; 2],
        buckets: &[usize],
        answer: impl FnOnce(&Gathered<'_>) -> R,
    ) -> R {
        let mut wanted: Vec<usize> = buckets.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let count = |b: usize| (self.below[b + 1] - self.below[b]) as usize;
        wanted.retain(|&b| count(b) > 0);
        // Where each wanted bucket starts in the buffer, and its next free place.
        let mut starts = Vec::with_capacity(wanted.len() + 1);
        let mut total = 0;
        for &b in &wanted {
            starts.push(total);
            total += count(b);
        }
        starts.push(total);
        radix::with_buffers(|buffers| {
            if buffers.keys.len() < total {
                buffers.keys.resize(total, 0);
            }
            let keys = &mut buffers.keys[..total];
            if !wanted.is_empty() {
                // A bitmap for the test per key, the slot found only for the keys kept.
                let mut member = [0u64; BUCKETS / 64];
                for &b in &wanted {
                    member[b / 64] |= 1 << (b % 64);
                }
                let mut next: Vec<usize> = starts[..wanted.len()].to_vec();
                for part in parts {
                    for &k in part {
                        let b = self.bucket(k);
                        if member[b / 64] & (1 << (b % 64)) != 0 {
                            let slot = wanted.partition_point(|&w| w < b);
                            keys[next[slot]] = k;
                            next[slot] += 1;
                        }
                    }
                }
                for i in 0..wanted.len() {
                    radix::sort_in_place(&mut keys[starts[i]..starts[i + 1]], &mut buffers.scratch);
                }
            }
            answer(&Gathered {
                wanted: &wanted,
                starts: &starts,
                keys,
            })
        })
    }
}

/// The keys of some buckets, each bucket's sorted and together.
struct Gathered<'a> {
    /// The buckets, ascending.
    wanted: &'a [usize],
    /// Where each of them starts in `keys`, and the end.
    starts: &'a [usize],
    keys: &'a [u64],
}

impl Gathered<'_> {
    /// Bucket `b`'s keys, sorted (none if it was not gathered).
    fn bucket(&self, b: usize) -> &[u64] {
        match self.wanted.binary_search(&b) {
            Ok(i) => &self.keys[self.starts[i]..self.starts[i + 1]],
            Err(_) => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Ranks and counts below are those of the sorted keys, for keys spread over every
        /// bit, a few values, a tight band, the band with outliers, and all of these mixed;
        /// from a ring split anywhere.
        #[test]
        fn answers_as_a_full_sort_does(
            keys in prop_oneof![
                // Every bit varies: the buckets split on the top bits.
                prop::collection::vec(any::<u64>(), 1..3000),
                // A few values: all in one or two buckets, most keys equal.
                prop::collection::vec(0u64..4, 1..3000),
                // ITL-like: latencies in a 10% band, spread over many buckets.
                prop::collection::vec((0.002f64..0.0022).prop_map(f64::to_bits), 1..3000),
                // The same band with rare outliers far above: most keys in a few buckets.
                prop::collection::vec(
                    prop_oneof![
                        50 => (0.002f64..0.0022).prop_map(f64::to_bits),
                        1 => Just(0.5f64.to_bits()),
                    ],
                    1..3000,
                ),
                // Every kind mixed.
                prop::collection::vec(
                    prop_oneof![
                        any::<u64>(),
                        0u64..4,
                        (0u64..300).prop_map(|k| k << 40),
                        (0.002f64..0.0022).prop_map(f64::to_bits),
                    ],
                    1..3000,
                ),
            ],
            split in any::<prop::sample::Index>(),
            probes in prop::collection::vec(any::<prop::sample::Index>(), 1..20),
            extra in prop::collection::vec(any::<u64>(), 0..5),
        ) {
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            let cut = split.index(keys.len() + 1);
            let parts = [&keys[..cut], &keys[cut..]];
            let coarse = Coarse::build(parts).unwrap();
            prop_assert_eq!(coarse.len(), keys.len());
            prop_assert_eq!(coarse.min(), sorted[0]);
            prop_assert_eq!(coarse.max(), sorted[keys.len() - 1]);
            let ranks: Vec<usize> = probes.iter().map(|p| p.index(keys.len())).collect();
            let want: Vec<u64> = ranks.iter().map(|&r| sorted[r]).collect();
            prop_assert_eq!(coarse.select(parts, &ranks), want);
            // Edges at the keys themselves, next to them, and anywhere.
            let mut edges: Vec<u64> = ranks
                .iter()
                .flat_map(|&r| [sorted[r], sorted[r].wrapping_add(1), sorted[r].wrapping_sub(1)])
                .chain(extra)
                .collect();
            edges.sort_unstable();
            let want: Vec<usize> = edges.iter().map(|&e| sorted.partition_point(|&k| k < e)).collect();
            prop_assert_eq!(coarse.counts_below(parts, &edges), want);
        }
    }

    #[test]
    fn no_keys_no_counts() {
        assert!(Coarse::build([&[], &[]]).is_none());
    }
}
