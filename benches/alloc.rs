//! Cost of the counting global allocator (`telemetry::alloc`) on the worker's hot path.
//!
//! - `alloc_free/*`: one allocate + free of 64 B and 4 KiB through the C library's `System`,
//!   through the allocator `CountingAlloc` wraps (`Inner`, mimalloc) directly, through
//!   `CountingAlloc` called directly, and through the global allocator (`std::alloc::alloc`,
//!   which is `CountingAlloc` in this crate): counting minus inner is the counting.
//! - `contended/*`: the same with a second thread allocating at once (the counters' cache line
//!   bounces between cores).
//! - `step_trace/*`: a decode-step-sized allocation pattern (2 000 allocations of mixed sizes,
//!   each intermediate freed when the next is made, as candle's CPU ops do).
//! - `decode_step/tiny_llama_f32`: a real candle decode step (8 layers, hidden 512), for scale.
//!
//! `INFERTOP_BENCH_DECODE_STEPS=N` runs N decode steps and exits instead of benchmarking, so
//! `valgrind --tool=dhat` can count the allocations one step makes (dhat counts the C
//! library's malloc: point the counting allocator's `INNER` at `std::alloc::System` for that
//! run, since mimalloc takes its memory from the OS in segments).
#![allow(clippy::unwrap_used)]
// Calls allocators directly: what the bench measures.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Config, Llama};
use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion};
use infertop::telemetry::alloc::{current_bytes, peak_bytes, reset_peak, CountingAlloc, Inner};

/// Allocates and frees one block through `allocator`.
#[inline(always)]
fn alloc_free<A: GlobalAlloc>(allocator: &A, layout: Layout) {
    // SAFETY: the layout has non-zero size; the block is freed with the layout it was made with.
    unsafe {
        let p = allocator.alloc(layout);
        black_box(p);
        if !p.is_null() {
            allocator.dealloc(p, layout);
        }
    }
}

/// Through the process's global allocator, as `Vec`/`Box`/candle do.
struct Global;

// SAFETY: forwards to the global allocator.
unsafe impl GlobalAlloc for Global {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { std::alloc::alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { std::alloc::dealloc(ptr, layout) }
    }
}

fn bench_alloc_free(c: &mut Criterion) {
    let mut group = c.benchmark_group("alloc_free");
    for size in [64usize, 4096] {
        let Ok(layout) = Layout::from_size_align(size, 16) else {
            continue;
        };
        group.bench_with_input(BenchmarkId::new("system", size), &layout, |b, &l| {
            b.iter(|| alloc_free(&System, l))
        });
        group.bench_with_input(BenchmarkId::new("inner", size), &layout, |b, &l| {
            b.iter(|| alloc_free(&Inner {}, l))
        });
        group.bench_with_input(BenchmarkId::new("counting", size), &layout, |b, &l| {
            b.iter(|| alloc_free(&CountingAlloc, l))
        });
        group.bench_with_input(BenchmarkId::new("global", size), &layout, |b, &l| {
            b.iter(|| alloc_free(&Global, l))
        });
    }
    group.finish();
}

/// Times `iters` allocate+free pairs on this thread while a second thread does the same.
fn contended<A: GlobalAlloc + Sync + 'static>(allocator: &'static A, iters: u64) -> Duration {
    let Ok(layout) = Layout::from_size_align(64, 16) else {
        return Duration::ZERO;
    };
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let other_barrier = barrier.clone();
    let other = std::thread::spawn(move || {
        other_barrier.wait();
        for _ in 0..iters {
            alloc_free(allocator, layout);
        }
    });
    barrier.wait();
    let start = Instant::now();
    for _ in 0..iters {
        alloc_free(allocator, layout);
    }
    let elapsed = start.elapsed();
    let _ = other.join();
    elapsed
}

fn bench_contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("contended_2_threads");
    group.bench_function("system/64", |b| {
        b.iter_custom(|iters| contended(&System, iters))
    });
    group.bench_function("inner/64", |b| {
        static INNER: Inner = Inner {};
        b.iter_custom(|iters| contended(&INNER, iters))
    });
    group.bench_function("counting/64", |b| {
        b.iter_custom(|iters| contended(&CountingAlloc, iters))
    });
    group.finish();
}

/// A decode step's allocation pattern: op outputs of mixed sizes (shape/stride vectors, `Arc`s,
/// activations, attention rows), each freed one op later.
fn step_trace<A: GlobalAlloc>(allocator: &A, layouts: &[Layout]) {
    let mut previous: Option<(*mut u8, Layout)> = None;
    for &layout in layouts {
        // SAFETY: each block is freed once, with its own layout.
        unsafe {
            let p = allocator.alloc(layout);
            black_box(p);
            if let Some((q, l)) = previous.take() {
                allocator.dealloc(q, l);
            }
            if !p.is_null() {
                previous = Some((p, layout));
            }
        }
    }
    if let Some((q, l)) = previous {
        // SAFETY: as above.
        unsafe { allocator.dealloc(q, l) };
    }
}

fn trace_layouts() -> Vec<Layout> {
    // Deterministic mix: 3 small blocks (24–96 B) per 4 KiB–64 KiB activation.
    (0..2000usize)
        .filter_map(|i| {
            let size = if i % 4 == 3 {
                4096 << (i / 4 % 5)
            } else {
                24 + (i * 37) % 73
            };
            Layout::from_size_align(size, 16).ok()
        })
        .collect()
}

fn bench_step_trace(c: &mut Criterion) {
    let layouts = trace_layouts();
    let mut group = c.benchmark_group("step_trace_2000_allocs");
    group.bench_function("system", |b| b.iter(|| step_trace(&System, &layouts)));
    group.bench_function("inner", |b| b.iter(|| step_trace(&Inner {}, &layouts)));
    group.bench_function("counting", |b| {
        b.iter(|| step_trace(&CountingAlloc, &layouts))
    });
    group.finish();
}

/// A small llama (8 layers, hidden 512, GQA 8/4 heads, vocab 4096), zero weights: timing does not
/// depend on the values.
fn tiny_llama() -> candle_core::Result<(Llama, Cache, Device)> {
    let device = Device::Cpu;
    let config = Config {
        hidden_size: 512,
        intermediate_size: 1376,
        vocab_size: 4096,
        num_hidden_layers: 8,
        num_attention_heads: 8,
        num_key_value_heads: 4,
        use_flash_attn: false,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        bos_token_id: None,
        eos_token_id: None,
        rope_scaling: None,
        max_position_embeddings: 1024,
        tie_word_embeddings: false,
    };
    let vb = VarBuilder::zeros(DType::F32, &device);
    let model = Llama::load(vb, &config)?;
    let cache = Cache::new(true, DType::F32, &config, &device)?;
    Ok((model, cache, device))
}

const PROMPT_TOKENS: usize = 128;

/// Builds the model and runs a prefill of `PROMPT_TOKENS`, returning the state to decode from.
fn prefilled() -> candle_core::Result<(Llama, Cache, Tensor)> {
    let (model, mut cache, device) = tiny_llama()?;
    let prompt = Tensor::zeros((1, PROMPT_TOKENS), DType::U32, &device)?;
    model.forward(&prompt, 0, &mut cache)?;
    let next = Tensor::zeros((1, 1), DType::U32, &device)?;
    Ok((model, cache, next))
}

fn bench_decode_step(c: &mut Criterion) {
    let Ok((model, cache, next)) = prefilled() else {
        eprintln!("decode_step: could not build the model; skipped");
        return;
    };
    // One step's allocator footprint, for the note beside the timing. A state of its own (not a
    // clone sharing the KV tensors) so the old cache is freed as in a real run.
    if let Ok((probe_model, mut probe_cache, probe_next)) = prefilled() {
        let before = current_bytes();
        reset_peak();
        let _ = probe_model.forward(&probe_next, PROMPT_TOKENS, &mut probe_cache);
        eprintln!(
            "decode_step: allocator peak +{} KiB over the step's start, net +{} KiB",
            (peak_bytes() - before) / 1024,
            current_bytes().saturating_sub(before) / 1024
        );
    }

    let mut group = c.benchmark_group("decode_step");
    group.sample_size(30);
    group.bench_function("tiny_llama_f32", |b| {
        b.iter_batched(
            || cache.clone(),
            |mut cache| model.forward(&next, PROMPT_TOKENS, &mut cache),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// `INFERTOP_BENCH_DECODE_STEPS=N`: run N decode steps and exit (for allocation counting under
/// `valgrind --tool=dhat`: the difference between two N is the per-step count).
fn decode_steps_only(steps: usize) -> candle_core::Result<()> {
    let (model, mut cache, next) = prefilled()?;
    for step in 0..steps {
        model.forward(&next, PROMPT_TOKENS + step, &mut cache)?;
    }
    Ok(())
}

criterion_group!(
    benches,
    bench_alloc_free,
    bench_contended,
    bench_step_trace,
    bench_decode_step
);

fn main() {
    // The counting allocator must be the global one in this binary, or "global" measures nothing.
    let before = current_bytes();
    let probe = black_box(vec![0u8; 1 << 20]);
    assert!(
        current_bytes() >= before + (1 << 20),
        "CountingAlloc is not the global allocator"
    );
    drop(probe);

    if let Ok(steps) = std::env::var("INFERTOP_BENCH_DECODE_STEPS") {
        let steps = steps.parse().unwrap_or(1);
        if let Err(e) = decode_steps_only(steps) {
            eprintln!("decode steps failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
