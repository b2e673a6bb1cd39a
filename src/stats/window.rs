//! A bounded window of samples with exact order statistics and an exact mean.
//!
//! A whole table (6 metrics, 100,000 samples each) is summarised twice a second, and a window
//! may be pushed to 100,000 times a second (a decode step each), so nothing here walks or
//! sorts all the samples per push or per summary:
//!
//! - the samples are kept twice: in arrival order (a ring, for eviction and `iter`) and as
//!   an ordered multiset of *sorted blocks* of at most [`BLOCK_MAX`] values. The sorted side
//!   is brought up to date in batches. A push appends to the ring, and its value (and the
//!   value it evicts) to two pending lists. The first query after that sorts the lists
//!   (by radix, `stats/radix.rs`) and merges them into the blocks in one forward pass.
//!   Blocks no change falls in are kept as they are. A block with a few changes is edited
//!   in place (a binary search and a `memmove` each). A block with many is rewritten by two branch-free
//!   passes, then cut into blocks when it outgrows `BLOCK_MAX` or joined to a neighbour
//!   under [`BLOCK_MIN`]. Pushing one by one into the blocks instead cost two cache-missing
//!   binary searches and a `memmove` per sample: at 100,000 decode steps a second, most of
//!   the dashboard's CPU;
//! - once the lists reach a quarter of the samples (a fortieth from 8,192: [`rebuild_at`]),
//!   a merge costs more than what replaces it: the window stops listing (it is *stale*). A
//!   window pushed much faster than it is read (the ITLs at 10,000 decode steps a second and
//!   more, read twice a second) then costs a ring write per push, and its summary, its
//!   counts below edges and its min and max are answered from counts of the ring's samples
//!   per bucket, without sorting them (`stats/coarse.rs`: two passes that only read, then
//!   one per query over the few buckets it needs). Only a query that needs the blocks
//!   themselves (a mixed window that adds or drops samples) sorts all the samples afresh;
//! - rank selection walks the block lengths (about a thousand at 100,000 samples), so the
//!   nine ranks a summary needs cost O(n / block) in one pass;
//! - the sum is an exact fixed-point integer (a Kulisch accumulator: every finite
//!   non-negative `f64` is an integer multiple of 2⁻¹⁰⁷⁴), so adding and evicting never
//!   drift, and the mean is the exact sum divided by n, *correctly rounded* (the closest
//!   double to the true mean). numpy's `a.mean()` sums pairwise in floating point, with its
//!   own rounding, so it can differ from that in the last bit: in the cases tested against
//!   numpy 2.4 (n = 1 to 100,001, evicted windows, duplicates) it is equal or 1 ulp apart,
//!   and the tests pin both. The percentiles and the max are numpy's, bit for bit.
//!
//! Memory: 8 B per sample in the ring (the samples' keys, so that a fresh sort reads them
//! where they are) plus 8 B per sample in the blocks (each block's
//! allocation is its length rounded up to 16 values), plus the pending lists (at most
//! 2 × 8 B × [`rebuild_at`]: 40 KB for a 100,000-sample window), about 17 B per sample in
//! all, 272 B per window for the sum, and 16 KB for the bucket counts of a window once it is
//! read while stale. Sorts (the lists, or all the
//! samples afresh) use buffers the sorting thread keeps (`radix`): two of the largest
//! window's size per thread, 1.6 MB for 100,000 samples, however many windows it reads.

use std::cell::{Ref, RefCell};
use std::collections::VecDeque;

use super::coarse::Coarse;
use super::percentile::{lerp, ranks};
use super::radix;
use super::Summary;

/// A block never holds more than this many values. Smaller blocks make a summary dearer
/// (more blocks to walk: a 100k table takes about 3.5 µs at 128, 5.4 µs at 64) and an edit
/// in place cheaper; at 32 or 64 pushes were no faster (`benches/state.rs`).
const BLOCK_MAX: usize = 128;
/// A block this small is merged with a neighbour when a batch is merged in.
const BLOCK_MIN: usize = BLOCK_MAX / 8;
/// How full a block is when a merge cuts a run of values into blocks: room for a few more
/// without splitting, and what is left over (more than `BLOCK_MAX - FILL`) is never small.
const FILL: usize = BLOCK_MAX * 3 / 4;

/// Samples from which a stale window answers from bucket counts (`stats/coarse.rs`) rather
/// than a sort: below, sorting them costs less than counting into 4,096 buckets.
const COARSE_FROM: usize = 8192;

/// Pushes a window takes into its pending lists before it stops listing them (goes stale)
/// and takes each further push into its ring alone: a quarter of its samples (at least 16),
/// past which sorting the samples afresh when next read costs less than sorting the lists and
/// rewriting every block; from `COARSE_FROM` samples, where a stale window is read from
/// bucket counts, a fortieth. A merge of k pushes into 100,000 samples cost about 0.19 ms at
/// k = 500 and 1.0 ms at 5,000, the counts and one query about 0.45 ms at any k
/// (`benches/state.rs`, `window_push`), and the dashboard makes two queries of a window per
/// read: they break even near k = 2,500. Nothing grows with pushes: the lists stay under a
/// quarter of the capacity.
fn rebuild_at(len: usize) -> usize {
    if len >= COARSE_FROM {
        len / 40
    } else {
        (len / 4).max(16)
    }
}

/// The last `capacity` samples in arrival order, plus the same samples as an ordered multiset
/// (sorted blocks) and their exact sum.
#[derive(Clone, Debug)]
pub struct Window {
    capacity: usize,
    /// The samples as keys (`key`), oldest first: a fresh sort reads them as they are.
    order: VecDeque<u64>,
    /// The sorted blocks and the pushes and evictions not yet merged into them. Queries take
    /// `&self` and merge first, hence the cell: a window is used by one thread.
    sorted: RefCell<Lazy>,
    sum: ExactSum,
}

/// Grows a pending list by doubling, but never past the limit it is merged at.
fn reserve_pending(list: &mut Vec<u64>, limit: usize) {
    if list.len() == list.capacity() {
        let want = (list.capacity() * 2).clamp(8, limit.max(list.len() + 1));
        list.reserve_exact(want - list.len());
    }
}

/// Sorted blocks plus the keys added and removed since they were last brought up to date,
/// or, once those are too many (`rebuild_at`), a mark that the blocks are to be sorted
/// afresh from the samples.
#[derive(Clone, Debug, Default)]
struct Lazy {
    blocks: SortedBlocks,
    added: Vec<u64>,
    removed: Vec<u64>,
    stale: bool,
    /// While stale: the per-bucket counts of the samples (`stats/coarse.rs`) that a summary,
    /// the counts below edges and the min and max are answered from without sorting; valid
    /// until the next push.
    coarse: Option<Coarse>,
    coarse_valid: bool,
    /// Pushes since the blocks or the counts were last brought up to date, while stale.
    pushed: usize,
}

impl Lazy {
    /// Brings the blocks up to date with `order`, the window's samples.
    fn settle(&mut self, order: &VecDeque<u64>) {
        self.pushed = 0;
        if self.stale {
            self.stale = false;
            radix::with_buffers(|b| {
                let (front, back) = order.as_slices();
                self.blocks
                    .rebuild(radix::sort_from([front, back], &mut b.keys, &mut b.scratch));
            });
        } else if !self.added.is_empty() || !self.removed.is_empty() {
            self.blocks.apply(&mut self.added, &mut self.removed);
        }
    }

    /// Stops listing pushes: the next read that needs the blocks sorts the samples afresh.
    fn mark_stale(&mut self) {
        self.stale = true;
        self.added.clear();
        self.removed.clear();
    }

    /// The counts of `order` per bucket, brought up to date, while the window is stale, holds
    /// `COARSE_FROM` samples or more and is pushed fast. One pushed slowly again (fewer than
    /// `rebuild_at` pushes since it was last read) gets none: that read sorts once, and the
    /// window takes its pushes into the lists again.
    fn coarse(&mut self, order: &VecDeque<u64>) -> Option<&Coarse> {
        // The counts are `u32`: a window past that many samples sorts instead.
        if !self.stale || order.len() < COARSE_FROM || order.len() > u32::MAX as usize {
            return None;
        }
        let parts = {
            let (front, back) = order.as_slices();
            [front, back]
        };
        if !self.coarse_valid {
            if self.pushed < rebuild_at(order.len()) {
                return None;
            }
            self.pushed = 0;
            self.coarse_valid = match self.coarse.as_mut() {
                Some(c) => c.rebuild(parts),
                None => {
                    self.coarse = Coarse::build(parts);
                    self.coarse.is_some()
                }
            };
        }
        self.coarse.as_ref().filter(|_| self.coarse_valid)
    }
}

/// Whether `v` is a sample a window keeps: latencies and rates are finite and never negative.
pub(crate) fn is_sample(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// Non-negative finite floats order like their bit patterns (`-0.0` is stored as `+0.0`).
fn key(v: f64) -> u64 {
    v.to_bits()
}

/// The sample a key stands for.
fn value(k: u64) -> f64 {
    f64::from_bits(k)
}

impl Window {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            order: VecDeque::with_capacity(capacity.clamp(1, 1 << 16)),
            sorted: RefCell::default(),
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
        let lazy = self.sorted.get_mut();
        lazy.coarse_valid = false;
        lazy.pushed += 1;
        let limit = rebuild_at(self.capacity);
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                if !lazy.stale {
                    reserve_pending(&mut lazy.removed, limit);
                    lazy.removed.push(old);
                }
                self.sum.sub(value(old));
            }
        } else if self.order.len() == self.order.capacity() {
            // Grow to the capacity at most, not to the next power of two.
            let want = (self.order.len() * 2).min(self.capacity);
            self.order.reserve_exact(want - self.order.len());
        }
        self.order.push_back(key(v));
        self.sum.add(v);
        if !lazy.stale {
            reserve_pending(&mut lazy.added, limit);
            lazy.added.push(key(v));
            if lazy.added.len() >= rebuild_at(self.order.len()) {
                lazy.mark_stale();
            }
        }
    }

    pub fn clear(&mut self) {
        self.order.clear();
        *self.sorted.get_mut() = Lazy::default();
        self.sum = ExactSum::default();
    }

    /// The sorted blocks, with every push merged in.
    fn settled(&self) -> Ref<'_, SortedBlocks> {
        self.sorted.borrow_mut().settle(&self.order);
        Ref::map(self.sorted.borrow(), |l| &l.blocks)
    }

    /// A window of the newest `k` samples (all of them if there are fewer), its capacity `k`.
    /// O(k) here; they are sorted when it is first read.
    pub fn newest(&self, k: usize) -> Window {
        let mut w = Window::new(k);
        let skip = self.len().saturating_sub(w.capacity);
        w.order.extend(self.order.iter().skip(skip));
        for &k in &w.order {
            w.sum.add(value(k));
        }
        w.sorted.get_mut().stale = true;
        w
    }

    /// Samples in arrival order (oldest first).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = f64> + '_ {
        self.order.iter().map(|&k| value(k))
    }

    /// The window's samples as they are in the ring, and their counts per bucket when the
    /// window is stale (pushed faster than read): what the queries below answer from without
    /// sorting the samples.
    fn coarse<R>(&self, f: impl FnOnce(&Coarse, [&[u64]; 2]) -> R) -> Option<R> {
        let mut lazy = self.sorted.borrow_mut();
        let coarse = lazy.coarse(&self.order)?;
        let (front, back) = self.order.as_slices();
        Some(f(coarse, [front, back]))
    }

    /// The smallest sample, if any.
    pub fn min(&self) -> Option<f64> {
        if let Some(min) = self.coarse(|c, _| c.min()) {
            return Some(value(min));
        }
        self.settled()
            .blocks
            .first()
            .and_then(|b| b.first())
            .map(|&k| f64::from_bits(k))
    }

    /// The largest sample, if any.
    pub fn max(&self) -> Option<f64> {
        if let Some(max) = self.coarse(|c, _| c.max()) {
            return Some(value(max));
        }
        self.settled()
            .blocks
            .last()
            .and_then(|b| b.last())
            .map(|&k| f64::from_bits(k))
    }

    /// How many samples are below each of `edges` (ascending): a histogram's cumulative
    /// counts, exact, in one forward pass over the sorted blocks.
    pub fn counts_below(&self, edges: &[f64]) -> Vec<usize> {
        // Edges at or below zero (or NaN) have nothing below them: key 0 counts nothing.
        let edge_key = |e: f64| if e <= 0.0 || e.is_nan() { 0 } else { key(e) };
        let keys: Vec<u64> = edges.iter().map(|&e| edge_key(e)).collect();
        if let Some(counts) = self.coarse(|c, parts| c.counts_below(parts, &keys)) {
            return counts;
        }
        let sorted = self.settled();
        let mut cursor = Cursor::default();
        keys.iter()
            .map(|&k| cursor.lower_bound(&sorted, k))
            .collect()
    }

    /// mean, p50, p90, p95, p99, max and n over these samples: the percentiles exactly as
    /// `numpy.percentile` (default `linear` method), the mean correctly rounded (see the
    /// module comment for how that compares with numpy's pairwise mean).
    pub fn summary(&self) -> Summary {
        let n = self.len();
        let from_coarse = self.coarse(|c, parts| {
            summary_of(n, self.sum.clone(), |want| {
                let ranks: Vec<usize> = want.iter().map(|&(r, _)| r).collect();
                let mut out = [0u64; 9];
                for (&(_, slot), v) in want.iter().zip(c.select(parts, &ranks)) {
                    out[slot] = v;
                }
                out
            })
        });
        from_coarse.unwrap_or_else(|| summarize(&self.settled(), &[], &[], self.sum.clone()))
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
    if keep_other == 0 && keep_base == base.len() {
        // One window whole (the warmup samples have left the mixed window): its own summary,
        // which a window pushed faster than it is read answers without sorting.
        return base.summary();
    }
    let mut sum = base.sum.clone();
    let mut removed: Vec<u64> = base
        .order
        .iter()
        .take(base.len() - keep_base)
        .map(|&k| {
            sum.sub(value(k));
            k
        })
        .collect();
    let mut added: Vec<u64> = other
        .order
        .iter()
        .skip(other.len() - keep_other)
        .map(|&k| {
            sum.add(value(k));
            k
        })
        .collect();
    removed.sort_unstable();
    added.sort_unstable();
    summarize(&base.settled(), &added, &removed, sum)
}

/// The summary of the multiset `base + added − removed` (`removed` ⊆ `base`; both slices
/// sorted), whose exact sum is `sum`.
fn summarize(base: &SortedBlocks, added: &[u64], removed: &[u64], sum: ExactSum) -> Summary {
    let n = (base.len() + added.len()).saturating_sub(removed.len());
    summary_of(n, sum, |want| select_ranks(base, added, removed, want))
}

/// The summary of `n` samples whose exact sum is `sum`, with `select` giving the values at
/// the ranks it is handed (ascending, 0-based, below `n`), each written to its slot.
fn summary_of(
    n: usize,
    sum: ExactSum,
    select: impl FnOnce(&[(usize, usize); 9]) -> [u64; 9],
) -> Summary {
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
    let values = select(&want);
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

/// An ordered multiset of `u64` as consecutive sorted blocks, each non-empty and at most
/// `BLOCK_MAX` long, with each block's maximum kept apart (what `Cursor` compares against).
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

    /// Exactly `keys` (sorted), in blocks of at most `FILL` as even as they come (so none
    /// is under `BLOCK_MIN` unless it is the only one), written into the old blocks'
    /// allocations while they last.
    fn rebuild(&mut self, keys: &[u64]) {
        let n = keys.len();
        let count = n.div_ceil(FILL);
        let mut spare = std::mem::take(&mut self.blocks);
        spare.truncate(count);
        self.blocks.reserve_exact(count);
        self.maxes.clear();
        let mut start = 0;
        for i in 0..count {
            // The first `n % count` blocks take one more.
            let len = n / count + usize::from(i < n % count);
            let values = &keys[start..start + len];
            start += len;
            let mut block = spare.pop().unwrap_or_default();
            block.clear();
            block.reserve_exact(block_room(len));
            block.extend_from_slice(values);
            self.maxes.push(values[len - 1]);
            self.blocks.push(block);
        }
        self.len = n;
    }

    /// Adds `added` and takes out `removed` (each a multiset, in any order; `removed` must be
    /// contained in this plus `added`). Both lists are sorted, copies in both cancel, and the
    /// rest is merged in one forward pass: a block no change falls in is moved as it is, the
    /// others are rewritten with their changes, cut into blocks of `FILL` when they outgrow
    /// `BLOCK_MAX`, and joined to a neighbour when under `BLOCK_MIN`. The lists are left
    /// empty, their allocations kept for the next batch.
    fn apply(&mut self, added: &mut Vec<u64>, removed: &mut Vec<u64>) {
        radix::with_buffers(|b| {
            radix::sort_in_place(added, &mut b.scratch);
            radix::sort_in_place(removed, &mut b.scratch);
        });
        cancel_common(added, removed);
        let old = std::mem::take(&mut self.blocks);
        self.maxes.clear();
        let mut out = Builder {
            blocks: Vec::with_capacity(old.len() + added.len() / FILL + 1),
            maxes: std::mem::take(&mut self.maxes),
            carry: Vec::new(),
            scratch: Vec::with_capacity(2 * BLOCK_MAX),
        };
        let (mut ai, mut ri) = (0, 0);
        let last = old.len().saturating_sub(1);
        for (i, mut block) in old.into_iter().enumerate() {
            let Some(&max) = block.last() else { continue };
            let is_last = i == last;
            let untouched = !is_last
                && added.get(ai).is_none_or(|&k| k > max)
                && removed.get(ri).is_none_or(|&k| k > max);
            if untouched {
                out.block(block);
                continue;
            }
            // The changes this block's range takes: up to its maximum, or all that are left
            // for the last block. A removal equal to the maximum that this block holds too
            // few copies of stays for the next block, which starts with the same value.
            let (a_end, r_end) = if is_last {
                (added.len(), removed.len())
            } else {
                (
                    ai + added[ai..].partition_point(|&k| k <= max),
                    ri + removed[ri..].partition_point(|&k| k <= max),
                )
            };
            let (adds, rems) = (&added[ai..a_end], &removed[ri..r_end]);
            ai = a_end;
            let len = block.len();
            let in_bounds = len + adds.len() <= BLOCK_MAX && len >= BLOCK_MIN + rems.len();
            if out.carry.is_empty() && in_bounds && 4 * (adds.len() + rems.len()) <= len {
                // A few changes (up to a quarter of the block, the fastest cut in
                // `benches/state.rs`): in place, each a search and a move of part of it.
                ri += edit_block(&mut block, adds, rems);
                out.emit(block);
                continue;
            }
            out.scratch.clear();
            ri += merge_block(&block, adds, rems, &mut out.scratch);
            out.rewritten(block);
        }
        // Into an empty multiset: everything added is the new content.
        out.carry.extend_from_slice(&added[ai..]);
        out.spill();
        debug_assert!(
            ri == removed.len(),
            "removed a value the window did not hold"
        );
        let (blocks, maxes) = out.finish();
        self.len = blocks.iter().map(Vec::len).sum();
        self.blocks = blocks;
        self.maxes = maxes;
        added.clear();
        removed.clear();
    }
}

/// Takes the values both sorted lists hold (as multisets) out of both, keeping them sorted.
fn cancel_common(a: &mut Vec<u64>, b: &mut Vec<u64>) {
    let (mut i, mut j) = (0, 0);
    let (mut keep_a, mut keep_b) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => {
                a[keep_a] = a[i];
                keep_a += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                b[keep_b] = b[j];
                keep_b += 1;
                j += 1;
            }
        }
    }
    a.copy_within(i.., keep_a);
    a.truncate(keep_a + (a.len() - i));
    b.copy_within(j.., keep_b);
    b.truncate(keep_b + (b.len() - j));
}

/// `merge_block` for a few changes, in place: each removal and addition found by a binary
/// search and made by moving the block's tail (a `memmove`), so a batch of a few hundred
/// changes into a large window costs what pushing them one by one would.
fn edit_block(block: &mut Vec<u64>, added: &[u64], removed: &[u64]) -> usize {
    let mut taken = 0;
    for &r in removed {
        let pos = block.partition_point(|&v| v < r);
        match block.get(pos) {
            Some(&v) if v == r => {
                block.remove(pos);
                taken += 1;
            }
            // Past this block's copies (of its maximum): the rest is the next block's.
            None => break,
            Some(_) => {
                debug_assert!(false, "removed a value the window did not hold");
                taken += 1;
            }
        }
    }
    let want = block_room(block.len() + added.len());
    block.reserve_exact(want.saturating_sub(block.len()));
    for &a in added {
        let pos = block.partition_point(|&v| v <= a);
        block.insert(pos, a);
    }
    taken
}

/// Appends `block` with `added` merged in and `removed` taken out (all sorted, and no value
/// in both) to `out`; returns how many of `removed` it took out (copies of the block's
/// maximum past those it holds are left for the next block). Two passes without
/// data-dependent branches (a batch's changes land at random places, so a branch per
/// comparison would mispredict often): the removals are filtered out forwards, then the
/// additions merged in backwards, in place.
fn merge_block(block: &[u64], added: &[u64], removed: &[u64], out: &mut Vec<u64>) -> usize {
    let start = out.len();
    out.resize(start + block.len() + added.len(), 0);
    let buf = &mut out[start..];
    // Forwards: keep each value unless it is the next removal. No key is u64::MAX (that
    // would be a NaN), so it stands for "no removal left".
    let (mut kept, mut y) = (0, 0);
    for &v in block {
        let next = removed.get(y).copied().unwrap_or(u64::MAX);
        let hit = usize::from(next == v);
        buf[kept] = v;
        kept += 1 - hit;
        y += hit;
    }
    debug_assert!(
        removed[y..].iter().all(|&r| Some(&r) == block.last()),
        "removed a value the window did not hold"
    );
    // Backwards: the larger of the two tails goes last.
    let (mut i, mut j) = (kept, added.len());
    let mut w = kept + added.len();
    while j > 0 {
        let b = added[j - 1];
        let a = if i > 0 { buf[i - 1] } else { 0 };
        let take_a = i > 0 && a > b;
        w -= 1;
        buf[w] = if take_a { a } else { b };
        i -= usize::from(take_a);
        j -= usize::from(!take_a);
    }
    out.truncate(start + kept + added.len());
    y
}

/// Collects blocks in order while a batch is merged: values rewritten from changed blocks
/// wait in `carry` until there are enough of them to make a block.
struct Builder {
    blocks: Vec<Vec<u64>>,
    maxes: Vec<u64>,
    carry: Vec<u64>,
    /// A changed block's new values.
    scratch: Vec<u64>,
}

/// A block's allocation: its length rounded up to 16 values, so a block that takes a few
/// more at the next batch is rewritten in place, and memory stays near 8 B a value.
fn block_room(len: usize) -> usize {
    len.next_multiple_of(16)
}

fn new_block(values: &[u64]) -> Vec<u64> {
    let mut b = Vec::with_capacity(block_room(values.len()));
    b.extend_from_slice(values);
    b
}

impl Builder {
    /// A changed block, its new values in `scratch`: written back into its own allocation
    /// when they still make one block, else carried.
    fn rewritten(&mut self, mut block: Vec<u64>) {
        if self.carry.is_empty() && (BLOCK_MIN..=BLOCK_MAX).contains(&self.scratch.len()) {
            block.clear();
            block.reserve_exact(block_room(self.scratch.len()));
            block.extend_from_slice(&self.scratch);
            self.emit(block);
        } else {
            self.carry.extend_from_slice(&self.scratch);
            self.spill();
        }
    }

    fn emit(&mut self, block: Vec<u64>) {
        if let Some(&max) = block.last() {
            self.maxes.push(max);
            self.blocks.push(block);
        }
    }

    /// An unchanged block, whose values all follow the carried ones.
    fn block(&mut self, block: Vec<u64>) {
        if self.carry.len() < BLOCK_MIN && !self.carry.is_empty() {
            // Too few to stand alone: they join this block.
            self.carry.extend_from_slice(&block);
            self.spill();
            return;
        }
        self.emit_carry();
        self.emit(block);
    }

    /// Cuts blocks of `FILL` off the front of the carry while more than a block is waiting.
    fn spill(&mut self) {
        let mut start = 0;
        while self.carry.len() - start > BLOCK_MAX {
            let head = new_block(&self.carry[start..start + FILL]);
            self.emit(head);
            start += FILL;
        }
        self.carry.drain(..start);
    }

    fn emit_carry(&mut self) {
        if !self.carry.is_empty() {
            let block = new_block(&self.carry);
            self.carry.clear();
            self.emit(block);
        }
    }

    /// The blocks and their maxima. A small remainder joins the last block, or shares a
    /// block's worth with it.
    fn finish(mut self) -> (Vec<Vec<u64>>, Vec<u64>) {
        if !self.carry.is_empty() && self.carry.len() < BLOCK_MIN {
            if let Some(mut prev) = self.blocks.pop() {
                self.maxes.pop();
                if prev.len() + self.carry.len() <= BLOCK_MAX {
                    prev.reserve_exact(block_room(prev.len() + self.carry.len()) - prev.len());
                    prev.extend_from_slice(&self.carry);
                    self.emit(prev);
                } else {
                    // Two blocks of the same size, both over `BLOCK_MIN`.
                    let half = (prev.len() + self.carry.len()) / 2;
                    let mut tail = new_block(&prev[half..]);
                    tail.extend_from_slice(&self.carry);
                    prev.truncate(half);
                    self.emit(prev);
                    self.emit(tail);
                }
                self.carry.clear();
            }
        }
        self.emit_carry();
        (self.blocks, self.maxes)
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

    /// Heap bytes a window holds (ring, blocks, block index, pending lists).
    fn heap_bytes(w: &Window) -> usize {
        let lazy = w.sorted.borrow();
        let blocks: usize = lazy.blocks.blocks.iter().map(|b| b.capacity() * 8).sum();
        w.order.capacity() * 8
            + blocks
            + lazy.blocks.blocks.capacity() * std::mem::size_of::<Vec<u64>>()
            + lazy.blocks.maxes.capacity() * 8
            + (lazy.added.capacity() + lazy.removed.capacity()) * 8
    }

    /// The blocks hold exactly the window's samples, sorted, within the size bounds.
    fn assert_blocks_hold(w: &Window) {
        let sorted = w.settled();
        let flat: Vec<u64> = sorted.blocks.iter().flatten().copied().collect();
        let mut want: Vec<u64> = w.iter().map(key).collect();
        want.sort_unstable();
        assert_eq!(flat, want);
        assert_eq!(sorted.len(), w.len());
        assert_eq!(sorted.blocks.len(), sorted.maxes.len());
        let single = sorted.blocks.len() == 1;
        for (b, &m) in sorted.blocks.iter().zip(&sorted.maxes) {
            assert!(
                !b.is_empty() && b.len() <= BLOCK_MAX,
                "block of {}",
                b.len()
            );
            assert!(single || b.len() >= BLOCK_MIN, "block of {}", b.len());
            assert_eq!(b.last(), Some(&m));
        }
    }

    /// Read every 500 pushes (merged batches) or every 50,000 (fresh sorts), a full window
    /// holds its ring, its blocks and its pending lists, and no more (a fresh sort's buffers
    /// are the thread's, not the window's).
    #[test]
    fn bytes_per_sample_stay_bounded() {
        for every in [500, 50_000] {
            let mut w = Window::new(100_000);
            let mut worst = 0.0f64;
            for i in 0..300_000 {
                w.push(gen(i));
                if i % every == every - 1 {
                    w.summary();
                }
                if i >= 100_000 && i % 997 == 0 {
                    worst = worst.max(heap_bytes(&w) as f64 / w.len() as f64);
                }
            }
            eprintln!("read every {every}: at most {worst:.1} B per sample");
            assert!(worst < 24.0, "read every {every}: {worst} B per sample");
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
                assert_blocks_hold(&w);
            }
        }
    }

    /// The summary a window must give: numpy's percentiles of the last `capacity` values,
    /// computed from a sorted copy.
    fn naive(feed: &[f64], capacity: usize) -> Summary {
        let mut v: Vec<f64> = feed[feed.len().saturating_sub(capacity)..].to_vec();
        v.sort_by(f64::total_cmp);
        let p = |q| crate::stats::percentile_sorted(&v, q).unwrap_or(0.0);
        let mut exact = ExactSum::default();
        for &x in &v {
            exact.add(x);
        }
        Summary {
            n: v.len(),
            mean: exact.mean(v.len() as u64),
            p50: p(50.0),
            p90: p(90.0),
            p95: p(95.0),
            p99: p(99.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Pushes in batches of any size, with queries in between, give the same answers
        /// as the naive window at every query: few distinct values (runs of one value
        /// across blocks), many, small windows that evict within a batch, large ones.
        #[test]
        fn batched_merges_match_the_naive_window(
            capacity in proptest::prop_oneof![
                1usize..=20,
                100usize..=300,
                2000usize..=5000,
                // From `COARSE_FROM` samples: chunks over a fortieth of them are answered
                // from bucket counts, smaller ones from the blocks.
                COARSE_FROM..=10_000,
            ],
            distinct in proptest::prop_oneof![1u64..=3, 1000u64..=1_000_000],
            chunks in proptest::collection::vec(0usize..3000, 1..12),
            seed in 0u64..u64::MAX,
        ) {
            let mut w = Window::new(capacity);
            let mut feed = Vec::new();
            let mut x = seed | 1;
            for chunk in chunks {
                for _ in 0..chunk {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let v = (x % distinct) as f64 * 0.001;
                    w.push(v);
                    feed.push(v);
                }
                proptest::prop_assert_eq!(w.summary(), naive(&feed, capacity));
                let edges = [0.0005, 0.25, 1.0, 999.0];
                let want: Vec<usize> = edges
                    .iter()
                    .map(|&e| feed[feed.len().saturating_sub(capacity)..].iter().filter(|&&v| v < e).count())
                    .collect();
                proptest::prop_assert_eq!(w.counts_below(&edges), want);
                assert_blocks_hold(&w);
            }
        }
    }

    #[test]
    fn combined_summary_sees_unmerged_pushes() {
        let (mut a, mut b) = (Window::new(10_000), Window::new(10_000));
        let mut feed = Vec::new();
        for i in 0..5003 {
            a.push(gen(i));
            feed.push(gen(i));
        }
        for i in 5003..5103 {
            b.push(gen(i));
            feed.push(gen(i));
            if i == 5090 {
                b.summary();
            }
        }
        // Never queried, `a` waits for a fresh sort; `b` holds the twelve pushes since its
        // last query in its lists.
        assert!(a.sorted.borrow().stale);
        assert_eq!(b.sorted.borrow().added.len(), 12);
        assert!(!b.sorted.borrow().stale);
        assert_eq!(combined_summary(&a, 5003, &b, 100), naive(&feed, 5103));
        assert_eq!(combined_summary(&a, 4000, &b, 50), {
            let mut mixed = feed[1003..5003].to_vec();
            mixed.extend_from_slice(&feed[5053..]);
            naive(&mixed, 4050)
        });
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
