//! Least-significant-digit radix sort of `u64` keys (a window's samples as ordered bits) with
//! a second buffer the caller keeps.
//!
//! A sort by radix needs a second buffer as long as the keys. Allocated per sort, that buffer
//! is fresh pages each time (a 100,000-sample window is 800 KB, which the allocator maps and
//! returns), and zeroing those pages cost the dashboard as much as the sort. Here the buffer
//! lives as long as the thread that sorts ([`with_buffers`]), at the size of the largest
//! window it sorted.
//!
//! Digits of eight bits (eight passes) for short lists, of eleven bits (six passes) from
//! [`WIDE_FROM`] keys on, where fewer passes over the keys outweigh the larger counts: a
//! 100,000-sample window, the ITLs at 100,000 decode steps a second, sorts in about a fifth
//! less time. The counts of all digits are taken in one read, and a digit that is the same
//! in every key (the sign and top exponent bits of latencies) is skipped.

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

/// Sorts `keys` ascending in place, with `scratch` as the second buffer.
pub(crate) fn sort_in_place(keys: &mut [u64], scratch: &mut Vec<u64>) {
    if passes(None, keys, scratch) {
        keys.copy_from_slice(&scratch[..keys.len()]);
    }
}

/// The keys of `parts` (a window's ring, its two halves) sorted ascending into `keys` or
/// `scratch` (each grown to their length if shorter), which the sorted keys are the front
/// of. The first pass reads `parts` as they are, so they are not copied first.
pub(crate) fn sort_from<'a>(
    parts: [&[u64]; 2],
    keys: &'a mut Vec<u64>,
    scratch: &'a mut Vec<u64>,
) -> &'a [u64] {
    let n = parts[0].len() + parts[1].len();
    if keys.len() < n {
        keys.resize(n, 0);
    }
    if passes(Some(parts), &mut keys[..n], scratch) {
        &scratch[..n]
    } else {
        &keys[..n]
    }
}

/// Keys from which a sort takes digits of eleven bits: below, clearing and summing six
/// counts of 2,048 costs more than the two passes it saves (500 keys: 4 µs in eight-bit
/// digits, 7 µs in eleven; 5,000: 30 and 27 µs; 100,000: 0.69 and 0.55 ms).
const WIDE_FROM: usize = 4096;

/// The passes over the keys of `parts`, or of `keys` when there are none (`keys` is as long
/// as they are either way); true when the last one wrote `scratch` (so the sorted keys are
/// there), false when they are in `keys`.
fn passes(parts: Option<[&[u64]; 2]>, keys: &mut [u64], scratch: &mut Vec<u64>) -> bool {
    if keys.len() >= WIDE_FROM {
        passes_by::<2048, 6>(parts, keys, scratch)
    } else {
        passes_by::<256, 8>(parts, keys, scratch)
    }
}

/// The passes in `DIGITS` digits of `RADIX` values each (a power of two; the top digit may
/// have fewer bits).
fn passes_by<const RADIX: usize, const DIGITS: usize>(
    mut parts: Option<[&[u64]; 2]>,
    keys: &mut [u64],
    scratch: &mut Vec<u64>,
) -> bool {
    let n = keys.len();
    let bits = RADIX.trailing_zeros() as usize;
    let digit = |k: u64, d: usize| (k >> (d * bits)) as usize & (RADIX - 1);
    let mut counts = [[0u32; RADIX]; DIGITS];
    let mut count = |part: &[u64]| {
        for &k in part {
            for (d, c) in counts.iter_mut().enumerate() {
                c[digit(k, d)] += 1;
            }
        }
    };
    let first = match parts {
        Some([a, b]) => {
            count(a);
            count(b);
            a.first().or(b.first()).copied()
        }
        None => {
            count(keys);
            keys.first().copied()
        }
    };
    let Some(first) = first.filter(|_| n >= 2) else {
        copy_parts(parts, keys);
        return false;
    };
    if scratch.len() < n {
        scratch.resize(n, 0);
    }
    let scratch = &mut scratch[..n];
    let mut in_scratch = false;
    for (d, c) in counts.iter().enumerate() {
        // A digit every key shares moves nothing.
        if c[digit(first, d)] as usize == n {
            continue;
        }
        let mut offsets = [0u32; RADIX];
        let mut sum = 0;
        for (o, &c) in offsets.iter_mut().zip(c) {
            *o = sum;
            sum += c;
        }
        let mut scatter = |src: &[u64], dst: &mut [u64]| {
            for &k in src {
                let o = &mut offsets[digit(k, d)];
                dst[*o as usize] = k;
                *o += 1;
            }
        };
        if let Some([a, b]) = parts.take() {
            scatter(a, scratch);
            scatter(b, scratch);
        } else if in_scratch {
            scatter(scratch, keys);
        } else {
            scatter(keys, scratch);
        }
        in_scratch = !in_scratch;
    }
    // Every digit shared: the keys are all equal, and still where they came from.
    copy_parts(parts, keys);
    in_scratch
}

/// `parts`, if any, one after the other into `keys` (as long as both).
fn copy_parts(parts: Option<[&[u64]; 2]>, keys: &mut [u64]) {
    if let Some([a, b]) = parts {
        keys[..a.len()].copy_from_slice(a);
        keys[a.len()..].copy_from_slice(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same order as the standard sort, for keys that share digits (small ranges,
        /// duplicates) and keys that differ everywhere, in place and from a ring's halves.
        #[test]
        fn sorts_like_sort_unstable(
            keys in prop::collection::vec(
                prop_oneof![any::<u64>(), 0u64..4, (0u64..300).prop_map(|k| k << 40)],
                0..600,
            ),
            wide in any::<bool>(),
            split in any::<prop::sample::Index>(),
            scratch_len in 0usize..700,
        ) {
            // Repeated past `WIDE_FROM`, the same keys take the eleven-bit digits.
            let keys = if wide && !keys.is_empty() {
                keys.iter().copied().cycle().take(WIDE_FROM + keys.len()).collect()
            } else {
                keys
            };
            let mut want = keys.clone();
            want.sort_unstable();
            let mut scratch = vec![7; scratch_len];
            let mut got = keys.clone();
            sort_in_place(&mut got, &mut scratch);
            prop_assert_eq!(&got, &want);
            // From a ring's two halves, split anywhere, into buffers of any length.
            let cut = split.index(keys.len() + 1);
            let mut buffer = vec![3; scratch_len / 2];
            prop_assert_eq!(
                sort_from([&keys[..cut], &keys[cut..]], &mut buffer, &mut scratch),
                &want[..]
            );
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
