//! The instrument's own cost on the measured loop (issue 8), measured side by side:
//!
//! - **harness overhead**: the mean decode step inside infertop's worker (channel, statistics
//!   consumer, no telemetry) vs a bare candle loop doing exactly the same tensor work (same model,
//!   shapes and threads; no channel, no telemetry);
//! - **telemetry cost**: the worker with the telemetry thread sampling every 100 ms vs without;
//! - **step parts cost** (with `OVERHEAD_STEP_PARTS=N`): the worker with `--step-parts N` vs
//!   without. The span timer is then the process's subscriber for every variant (a tracing
//!   subscriber cannot be taken back), so `bare` and `worker` include what an unsampled step
//!   pays for it (a thread-local check per span): compare them with a run without the variable
//!   for that, and `worker+parts` with `worker` for the sampled steps' cost.
//!
//! Variants run interleaved in rounds (bare, harness, harness+telemetry[, harness+parts],
//! rotated) so drift on a noisy machine hits all of them alike. Run: `cargo bench --bench
//! overhead` (`OVERHEAD_PRESETS=tiny,small OVERHEAD_ROUNDS=5` to change the set).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor, D};
use infertop::engine::worker::{self, WorkerConfig};
use infertop::engine::workload::{PromptSource, Workload};
use infertop::event::{Control, Event};
use infertop::model::{self, DeviceSpec, ModelSpec};
use infertop::stats::RunStats;
use infertop::telemetry::{self, TelemetryDevice};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;

const PROMPT: usize = 64;
const OUTPUT: usize = 64;
const REQUESTS: u64 = 6;

fn workload(vocab: usize) -> Workload {
    Workload {
        batch: 1,
        source: PromptSource::Synthetic,
        vocab,
        tokenizer: None,
    }
}

/// `REQUESTS` requests of `PROMPT` tokens in, `OUTPUT` out, the first two warmup.
fn traffic() -> TrafficPlan {
    TrafficPlan {
        warmup: 2,
        requests: Some(REQUESTS),
        ..TrafficPlan::made_up(LenSpec::Fixed(PROMPT), LenSpec::Fixed(OUTPUT), 0)
    }
}

/// The same tensor work as the worker's request loop, without the instrument around it.
fn bare(preset: &str) -> Vec<f64> {
    let spec = ModelSpec::Synthetic {
        preset: preset.into(),
        seed: 0,
    };
    let dev = Device::Cpu;
    let mut loaded = model::load(
        &spec,
        &dev,
        DeviceSpec::Cpu,
        DType::F32,
        Arc::new(|_: &str, _: u64, _: u64| true),
    )
    .expect("load");
    let w = workload(loaded.info.vocab);
    let mut steps = Vec::new();
    for index in 0..REQUESTS {
        let shape = w.request(&traffic(), index);
        loaded.model.reset();
        let input = Tensor::from_slice(&shape.ids, (1, PROMPT), &dev).unwrap();
        let logits = loaded.model.forward(&input, 0).unwrap();
        let mut next = logits.argmax_keepdim(D::Minus1).unwrap();
        let _ = next.flatten_all().unwrap().to_vec1::<u32>().unwrap();
        dev.synchronize().unwrap();
        for step in 1..OUTPUT {
            let t = Instant::now();
            let logits = loaded.model.forward(&next, PROMPT + step - 1).unwrap();
            next = logits.argmax_keepdim(D::Minus1).unwrap();
            let ids = next.flatten_all().unwrap().to_vec1::<u32>().unwrap();
            dev.synchronize().unwrap();
            let dt = t.elapsed().as_secs_f64();
            std::hint::black_box(ids);
            if index >= 2 {
                steps.push(dt);
            }
        }
    }
    steps
}

/// The worker as infertop runs it headless, with a consumer applying every event to statistics.
fn harness(preset: &str, with_telemetry: bool, step_parts: Option<u32>) -> Vec<f64> {
    harness_sampled(preset, with_telemetry, step_parts, &mut Vec::new())
}

/// `harness`, keeping apart in `sampled` the steady decode steps that `--step-parts` timed in
/// parts (their ITLs are in the returned list too).
fn harness_sampled(
    preset: &str,
    with_telemetry: bool,
    step_parts: Option<u32>,
    sampled: &mut Vec<f64>,
) -> Vec<f64> {
    let (tx, rx) = crossbeam_channel::unbounded::<Event>();
    let (_ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let started = Instant::now();
    let sampler = with_telemetry.then(|| {
        telemetry::spawn_default(
            TelemetryDevice::Cpu,
            Duration::from_millis(100),
            tx.clone(),
            started,
        )
    });
    let cfg = WorkerConfig {
        model: ModelSpec::Synthetic {
            preset: preset.into(),
            seed: 0,
        },
        device: DeviceSpec::Cpu,
        dtype: DType::F32,
        threads: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        traffic: traffic(),
        workload: workload(0),
        stop_at_eos: false,
        record_tokens: false,
        tokenizer: None,
        sampling: None,
        step_parts,
    };
    let handle = worker::spawn(cfg, tx, ctl_rx).expect("spawn");
    let mut stats = RunStats::new();
    let mut steps = Vec::new();
    let mut warm = true;
    for ev in rx.iter() {
        match ev {
            Event::RequestStarted { warmup, .. } => warm = warmup,
            Event::DecodeSteps(batch) => {
                for s in batch {
                    stats.record_step(s.itl_s, warm);
                    if !warm {
                        steps.push(s.itl_s);
                    }
                }
            }
            Event::RequestDone(r) => stats.record_request(&r),
            Event::StepParts(p) if !p.warmup && p.step > 0 => sampled.push(p.wall_s),
            Event::Finished(_) => break,
            _ => {}
        }
    }
    if let Some(s) = sampler {
        s.stop();
    }
    let _ = handle.join();
    steps
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn main() {
    // As `infertop run` does: pin candle's thread count once (unset, candle re-reads
    // /proc/cpuinfo on every matmul), so both variants run the same kernels.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = candle_core::utils::get_num_threads();
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    let presets = std::env::var("OVERHEAD_PRESETS").unwrap_or_else(|_| "tiny,small".into());
    let rounds: usize = std::env::var("OVERHEAD_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let step_parts: Option<u32> = std::env::var("OVERHEAD_STEP_PARTS")
        .ok()
        .and_then(|n| n.parse().ok());
    if step_parts.is_some() {
        // Before any model is built, as the worker does for `--step-parts`.
        assert!(infertop::engine::spans::install());
    }
    let variants = if step_parts.is_some() { 4 } else { 3 };
    println!("decode-step overhead, {rounds} interleaved rounds, {REQUESTS} requests of P={PROMPT} G={OUTPUT} each (2 warmup dropped)");
    for preset in presets.split(',') {
        let (mut b, mut h, mut t, mut p) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut sampled = Vec::new();
        for round in 0..rounds {
            // Rotate the order so no variant always runs first.
            for k in 0..variants {
                match (round + k) % variants {
                    0 => b.extend(bare(preset)),
                    1 => h.extend(harness(preset, false, None)),
                    2 => t.extend(harness(preset, true, None)),
                    _ => p.extend(harness_sampled(preset, false, step_parts, &mut sampled)),
                }
            }
        }
        let (mb, mh, mt) = (mean(&b), mean(&h), mean(&t));
        println!(
            "{preset:>6}: bare {:.4} ms (n={}), worker {:.4} ms (n={}), worker+telemetry {:.4} ms (n={})",
            mb * 1e3,
            b.len(),
            mh * 1e3,
            h.len(),
            mt * 1e3,
            t.len()
        );
        println!(
            "{preset:>6}: harness overhead ratio {:.4} (target <= 1.01), telemetry ratio {:.4} (target <= 1.01)",
            mh / mb,
            mt / mh
        );
        if let Some(n) = step_parts {
            let mp = mean(&p);
            println!(
                "{preset:>6}: worker+parts 1/{n} {:.4} ms (n={}), step parts ratio {:.4} (target <= 1.01)",
                mp * 1e3,
                p.len(),
                mp / mh
            );
            // Paired inside the same requests: the sampled steps against all of them, by
            // median (robust to the machine's own spikes); a run pays it on 1 step in n.
            let (ms, mall) = (median(&sampled), median(&p));
            println!(
                "{preset:>6}: sampled step median {:.4} ms (n={}) vs every step {:.4} ms: {:+.2}% per sampled step, {:+.3}% of the run at 1/{n}",
                ms * 1e3,
                sampled.len(),
                mall * 1e3,
                100.0 * (ms / mall - 1.0),
                100.0 * (ms / mall - 1.0) / n as f64
            );
        }
    }
}
