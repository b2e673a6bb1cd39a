//! Least-significant-digit radix sort of `u64` keys (a window's samples as ordered bits) with
//! a second buffer the caller keeps.
//!
//! A sort by radix needs a second buffer as long as the keys. Allocated per sort, that buffer
//! is fresh pages each time (a 100,000-sample window is 800 KB, which the allocator maps and
//! returns), and zeroing those pages cost the dashboard as much as the sort. Here the buffer
//! lives as long as the thread that sorts ([`with_buffers`]), at the size of the largest
//! window it sorted.
//!
//! Eight passes of eight bits, the counts of all eight digits taken in one read, and a digit
//! that is the same in every key (the sign and top exponent bits of latencies) skipped.

use std::cell::RefCell;

thread_local! {
    static BUFFERS: RefCell<Buffers> = RefCell::default();
}

/// A thread's sort buffers: `keys` for a copy to sort, `scratch` for the sort's second half.
#[derive(Default)]
pub(crate) struct Buffers {
    pub keys: Vec<u64>,
    pub scratch: Vec<u64>,
}

/// Runs `f` with this thread's buffers. Not re-entrant: `f` must not call it again.
pub(crate) fn with_buffers<R>(f: impl FnOnce(&mut Buffers) -> R) -> R {
    BUFFERS.with_borrow_mut(f)
}

/// Sorts `keys` ascending, using `scratch` (grown to `keys.len()` if shorter) as the second
/// buffer. Returns the sorted keys: `keys` itself or the front of `scratch`, whichever the
/// last pass wrote, so that a caller that copies them out anyway need not copy them back.
pub(crate) fn sort<'a>(keys: &'a mut [u64], scratch: &'a mut Vec<u64>) -> &'a [u64] {
    let n = keys.len();
    if passes(keys, scratch) {
        &scratch[..n]
    } else {
        keys
    }
}

/// Sorts `keys` ascending in place, with `scratch` as the second buffer.
pub(crate) fn sort_in_place(keys: &mut [u64], scratch: &mut Vec<u64>) {
    if passes(keys, scratch) {
        keys.copy_from_slice(&scratch[..keys.len()]);
    }
}

/// The passes; true when the last one wrote `scratch` (so the sorted keys are there).
fn passes(keys: &mut [u64], scratch: &mut Vec<u64>) -> bool {
    let n = keys.len();
    if n < 2 {
        return false;
    }
    let mut counts = [[0u32; 256]; 8];
    for &k in keys.iter() {
        for (d, c) in counts.iter_mut().enumerate() {
            c[digit(k, d)] += 1;
        }
    }
    if scratch.len() < n {
        scratch.resize(n, 0);
    }
    let scratch = &mut scratch[..n];
    let first = keys[0];
    let mut in_scratch = false;
    for (d, c) in counts.iter().enumerate() {
        // A digit every key shares moves nothing.
        if c[digit(first, d)] as usize == n {
            continue;
        }
        let mut offsets = [0u32; 256];
        let mut sum = 0;
        for (o, &c) in offsets.iter_mut().zip(c) {
            *o = sum;
            sum += c;
        }
        let (src, dst): (&[u64], &mut [u64]) = if in_scratch {
            (scratch, keys)
        } else {
            (keys, scratch)
        };
        for &k in src {
            let o = &mut offsets[digit(k, d)];
            dst[*o as usize] = k;
            *o += 1;
        }
        in_scratch = !in_scratch;
    }
    in_scratch
}

#[inline(always)]
fn digit(k: u64, d: usize) -> usize {
    (k >> (d * 8)) as u8 as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same order as the standard sort, for keys that share digits (small ranges,
        /// duplicates) and keys that differ everywhere, in place and by the returned slice.
        #[test]
        fn sorts_like_sort_unstable(
            keys in prop::collection::vec(
                prop_oneof![any::<u64>(), 0u64..4, (0u64..300).prop_map(|k| k << 40)],
                0..600,
            ),
            scratch_len in 0usize..700,
        ) {
            let mut want = keys.clone();
            want.sort_unstable();
            let mut scratch = vec![7; scratch_len];
            let mut got = keys.clone();
            prop_assert_eq!(sort(&mut got, &mut scratch), &want[..]);
            let mut got = keys.clone();
            sort_in_place(&mut got, &mut scratch);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn latencies_sort_by_value() {
        let values = [0.25, 1e-6, 0.0, 3.5, 1e-3, 1e-3, 120.0];
        let mut keys: Vec<u64> = values.iter().map(|v: &f64| v.to_bits()).collect();
        with_buffers(|b| sort_in_place(&mut keys, &mut b.scratch));
        let back: Vec<f64> = keys.iter().map(|&k| f64::from_bits(k)).collect();
        assert_eq!(back, [0.0, 1e-6, 1e-3, 1e-3, 0.25, 3.5, 120.0]);
    }
}
