//! The counting allocator reports exact current and peak bytes and resets its peak.
//!
//! One test in its own binary: no other test thread allocates while it measures, so the deltas
//! are exact. Sizes are large (MiBs) so a stray allocation by the harness would show as a small
//! mismatch rather than pass silently.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use infertop::telemetry::alloc::{current_bytes, peak_bytes, reset_peak};

const MIB: u64 = 1 << 20;

#[test]
fn counts_current_and_peak_exactly_and_resets() {
    // alloc + dealloc: exactly the requested size, and back.
    let base = current_bytes();
    let block = black_box(Vec::<u8>::with_capacity(64 * MIB as usize));
    assert_eq!(current_bytes() - base, 64 * MIB);
    drop(block);
    assert_eq!(current_bytes(), base);

    // alloc_zeroed (vec![0; n]) is counted too.
    let zeroed = black_box(vec![0u8; 3 * MIB as usize]);
    assert_eq!(current_bytes() - base, 3 * MIB);
    drop(zeroed);
    assert_eq!(current_bytes(), base);

    // Peak: a reset starts the window at the current level; a 32 MiB block freed before an
    // 8 MiB one leaves the peak at +32 MiB while current is +8 MiB.
    reset_peak();
    assert_eq!(peak_bytes(), current_bytes());
    let big = black_box(Vec::<u8>::with_capacity(32 * MIB as usize));
    drop(big);
    let small = black_box(Vec::<u8>::with_capacity(8 * MIB as usize));
    assert_eq!(peak_bytes() - base, 32 * MIB);
    assert_eq!(current_bytes() - base, 8 * MIB);

    // A reset drops the old peak to the current level.
    reset_peak();
    assert_eq!(peak_bytes() - base, 8 * MIB);

    // realloc in both directions counts the difference.
    let mut grown = small;
    grown.reserve_exact(40 * MIB as usize); // capacity 8 MiB → 40 MiB (len is 0)
    let grown = black_box(grown);
    assert_eq!(current_bytes() - base, 40 * MIB);
    assert_eq!(peak_bytes() - base, 40 * MIB);
    let mut shrunk = grown;
    shrunk.shrink_to(MIB as usize);
    let shrunk = black_box(shrunk);
    assert_eq!(shrunk.capacity() as u64, MIB);
    assert_eq!(current_bytes() - base, MIB);
    assert_eq!(peak_bytes() - base, 40 * MIB);
    drop(shrunk);
    assert_eq!(current_bytes(), base);

    // Many threads allocating and freeing at once: the counter does not drift.
    let before_threads = current_bytes();
    let workers: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..20_000usize {
                    let v = black_box(Vec::<u8>::with_capacity(1 + (i * 7 + t * 13) % 5000));
                    drop(v);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("allocating thread");
    }
    // Thread bookkeeping may leave a few small blocks behind; lost updates over 80 000
    // allocations of up to 5000 bytes would be far more than this.
    let drift = current_bytes().abs_diff(before_threads);
    assert!(drift < 64 * 1024, "counter drifted by {drift} bytes");
}
