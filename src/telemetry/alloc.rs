//! A counting global allocator: current and peak heap bytes, with atomics only.
//!
//! The analogue of torch's `memory_allocated` / `max_memory_allocated` /
//! `reset_peak_memory_stats` for CPU runs. It counts the bytes *requested* (`Layout::size`), not
//! what the system allocator rounds them up to, and it counts every thread of the process (the UI
//! and the telemetry thread allocate a little too; their share is tiny next to a model's tensors).
//!
//! Cost on the hot path: one `fetch_add` per allocation and one `fetch_sub` per free. The peak is
//! only written (`fetch_max`) when the new level is above the last peak seen, so below the peak —
//! the steady state of a decode loop that frees what it allocated — an allocation costs one atomic
//! read-modify-write and one plain load. `benches/alloc.rs` measures it against the allocator it
//! wraps.
//!
//! The allocator underneath is mimalloc, not the C library's. candle allocates every op's
//! output afresh and frees it an op later; glibc's malloc serves the larger of those blocks
//! (a prefill's activations, the logits) from fresh `mmap`s whose pages fault in on every step.
//! mimalloc keeps freed pages for reuse: decode 6–9 % faster on the CPU engine (Q8_0 and F32
//! qwen2.5-0.5b, Q8_0 qwen3-0.6b, Q8_0 Gemma 3 1B; BENCHMARKS.md), for 5–7 % more resident memory.
// A GlobalAlloc impl is unsafe by definition; it only forwards to the allocator it wraps.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

/// The allocator the counting one wraps.
pub type Inner = mimalloc::MiMalloc;

const INNER: Inner = mimalloc::MiMalloc;

/// Keeps a counter on its own cache line, so that reading `PEAK` on every allocation does not
/// share a line with `CURRENT`'s writes from other threads.
#[repr(align(64))]
struct Counter(AtomicU64);

static CURRENT: Counter = Counter(AtomicU64::new(0));
static PEAK: Counter = Counter(AtomicU64::new(0));

/// Wraps mimalloc and counts live bytes.
pub struct CountingAlloc;

// SAFETY: every method forwards to `INNER` unchanged and only updates counters afterwards.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { INNER.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as u64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { INNER.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as u64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { INNER.dealloc(ptr, layout) };
        sub(layout.size() as u64);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { INNER.realloc(ptr, layout, new_size) };
        // On failure the old block is untouched, so the count stays as it was.
        if !p.is_null() {
            let old = layout.size() as u64;
            let new = new_size as u64;
            if new > old {
                add(new - old);
            } else {
                sub(old - new);
            }
        }
        p
    }
}

#[inline]
fn add(bytes: u64) {
    let now = CURRENT.0.fetch_add(bytes, Ordering::Relaxed) + bytes;
    // A plain load first: below the peak there is nothing to write, and a `fetch_max` is a
    // compare-exchange loop that takes the cache line exclusively.
    if now > PEAK.0.load(Ordering::Relaxed) {
        PEAK.0.fetch_max(now, Ordering::Relaxed);
    }
}

#[inline]
fn sub(bytes: u64) {
    CURRENT.0.fetch_sub(bytes, Ordering::Relaxed);
}

/// Bytes currently allocated through the global allocator (all threads).
pub fn current_bytes() -> u64 {
    CURRENT.0.load(Ordering::Relaxed)
}

/// Peak of [`current_bytes`] since the last [`reset_peak`] (or since the process started).
pub fn peak_bytes() -> u64 {
    PEAK.0.load(Ordering::Relaxed)
}

/// Starts a new peak window at the current level (like torch's `reset_peak_memory_stats`).
///
/// An allocation racing with the reset on another thread may be missed by the new window's peak
/// for that one instant; the next allocation above the level corrects it. The worker calls this
/// from its own thread at request start, where its own allocations cannot race it.
pub fn reset_peak() {
    PEAK.0
        .store(CURRENT.0.load(Ordering::Relaxed), Ordering::Relaxed);
}
