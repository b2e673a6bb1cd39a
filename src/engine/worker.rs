//! The worker thread: owns the device and the model, runs requests again and again, times every
//! phase with an explicit device synchronize, and sends typed events.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor, D};
use crossbeam_channel::{Receiver, Sender};

use super::events::{Control, Event, RequestDone, RunInfo, StopReason};
use super::timer::{device_memory, GpuTimer};
use super::workload::Workload;
use crate::model::synthetic::fnv1a;
use crate::model::{self, one_line, CausalLm, DeviceSpec, ModelSpec};
use crate::telemetry::alloc;

/// Everything the worker needs; built and validated by the CLI.
pub struct WorkerConfig {
    pub model: ModelSpec,
    pub device: DeviceSpec,
    pub dtype: DType,
    /// CPU threads candle uses (informational; set through RAYON_NUM_THREADS before start).
    pub threads: usize,
    pub workload: Workload,
    pub warmup: u64,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub stop_at_eos: bool,
    pub record_tokens: bool,
    /// Decodes generated ids for `--record-tokens`.
    pub tokenizer: Option<tokenizers::Tokenizer>,
}

/// The worker thread's name; the panic hook recognises the worker by it.
pub const WORKER_THREAD: &str = "infertop-worker";

/// A fault injected for tests (the hidden `--fault` flag): in request N, after its prefill,
/// the worker panics or fails as a candle error would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Panic(u64),
    Error(u64),
}

thread_local! {
    /// Where the worker panicked, noted by the panic hook for the report.
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Makes panics on the worker thread silent: `spawn` catches them and reports them as one
/// fatal error (with the location noted here), so they neither print a multi-line message
/// into a running dashboard nor run ratatui's hook, which restores the terminal on any
/// thread's panic and would leave a still-running dashboard drawing on the normal screen.
/// Panics on other threads go to the hook installed before. Call it after any other hook
/// (the dashboard calls it again after `ratatui::init`); `spawn` calls it once.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(WORKER_THREAD) {
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()));
            PANIC_AT.with(|p| *p.borrow_mut() = at);
        } else {
            previous(info);
        }
    }));
}

/// Starts the worker on a named thread. It reports through `events` and ends with
/// `Event::Finished`; a panic inside it is caught and reported as a fatal error.
pub fn spawn(
    cfg: WorkerConfig,
    events: Sender<Event>,
    control: Receiver<Control>,
) -> std::io::Result<JoinHandle<()>> {
    spawn_with_fault(cfg, None, events, control)
}

/// `spawn`, with a fault injected for tests (`--fault`).
pub fn spawn_with_fault(
    cfg: WorkerConfig,
    fault: Option<Fault>,
    events: Sender<Event>,
    control: Receiver<Control>,
) -> std::io::Result<JoinHandle<()>> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(install_panic_hook);
    std::thread::Builder::new()
        .name(WORKER_THREAD.into())
        .spawn(move || {
            let tx = events.clone();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(cfg, fault, &events, &control)
            }));
            let reason = match result {
                Ok(Ok(reason)) => reason,
                Ok(Err(message)) => {
                    let _ = tx.send(Event::Error {
                        message,
                        fatal: true,
                    });
                    StopReason::Error
                }
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "unknown panic".into());
                    let at = PANIC_AT.with(|p| p.borrow_mut().take()).unwrap_or_default();
                    let _ = tx.send(Event::Error {
                        message: format!("worker panicked: {}{at}", one_line(&what)),
                        fatal: true,
                    });
                    StopReason::Error
                }
            };
            let _ = tx.send(Event::Finished(reason));
        })
}

/// Control messages that arrived while a request was running, applied at the next boundary.
struct Inbox<'a> {
    rx: &'a Receiver<Control>,
    pending: VecDeque<Control>,
}

impl Inbox<'_> {
    /// Takes everything waiting; returns a stop if one arrived (it is not queued).
    fn poll_stop(&mut self) -> Option<StopReason> {
        while let Ok(c) = self.rx.try_recv() {
            if let Control::Stop(r) = c {
                return Some(r);
            }
            self.pending.push_back(c);
        }
        None
    }
}

fn run(
    mut cfg: WorkerConfig,
    fault: Option<Fault>,
    tx: &Sender<Event>,
    control: &Receiver<Control>,
) -> Result<StopReason, String> {
    let device = cfg.device.open().map_err(|e| e.to_string())?;
    // Say how much memory the weights need before allocating them on the GPU.
    if let (Some((used, total)), Ok(Some(arch))) =
        (device_memory(&device), model::arch_config_of(&cfg.model))
    {
        let need = arch.params() * cfg.dtype.size_in_bytes() as u64;
        let free = total.saturating_sub(used);
        if need > free {
            return Err(format!(
                "{} needs {:.1} GB of weights in {} but {} has {:.1} GB free of {:.1} GB; use a smaller model or --dtype bf16",
                cfg.model.display(),
                need as f64 / 1e9,
                model::dtype_name(cfg.dtype),
                cfg.device.name(),
                free as f64 / 1e9,
                total as f64 / 1e9
            ));
        }
    }
    let progress_tx = tx.clone();
    let progress: model::Progress = Arc::new(move |what: &str, done: u64, total: u64| {
        let _ = progress_tx.send(Event::Loading {
            what: what.to_string(),
            done,
            total,
        });
    });
    let loaded = model::load(&cfg.model, &device, cfg.device, cfg.dtype, progress)
        .map_err(|e| e.to_string())?;
    let mut lm = loaded.model;
    let info = loaded.info;
    cfg.workload.vocab = info.vocab.max(4);
    let needed = cfg.workload.max_positions_needed();
    if needed > info.max_positions {
        return Err(format!(
            "prompt + output tokens ({needed}) exceed the model's {} positions; lower --prompt-tokens or --output-tokens",
            info.max_positions
        ));
    }
    let _ = tx.send(Event::RunStarted(Box::new(RunInfo {
        model: info.clone(),
        workload: cfg.workload.describe(),
        warmup_requests: cfg.warmup,
        threads: if cfg.device == DeviceSpec::Cpu {
            cfg.threads
        } else {
            0
        },
    })));

    let started = Instant::now();
    let mut inbox = Inbox {
        rx: control,
        pending: VecDeque::new(),
    };
    let mut gpu = GpuTimer::new(&device);
    let mut index: u64 = 0;
    loop {
        // Request boundary: apply control messages, honour limits.
        if let Some(r) = inbox.poll_stop() {
            return Ok(r);
        }
        while let Some(c) = inbox.pending.pop_front() {
            match c {
                Control::Pause => {
                    let _ = tx.send(Event::Paused);
                    // Block until resumed or stopped; nothing is measured meanwhile.
                    loop {
                        match control.recv() {
                            Ok(Control::Resume) => break,
                            Ok(Control::Stop(r)) => return Ok(r),
                            Ok(other) => inbox.pending.push_back(other),
                            Err(_) => return Ok(StopReason::UserStop),
                        }
                    }
                    let _ = tx.send(Event::Resumed);
                }
                Control::Resume => {}
                Control::ResetStats => {
                    let _ = tx.send(Event::StatsReset);
                }
                Control::AdjustOutputTokens(delta) => {
                    adjust(&mut cfg.workload, info.max_positions, tx, |w| {
                        w.output = w.output.map(|n| (n as i64 + delta).max(1) as usize);
                    });
                }
                Control::AdjustPromptTokens(steps) => {
                    adjust(&mut cfg.workload, info.max_positions, tx, |w| {
                        if let Some(p) = &w.prompt {
                            w.prompt = Some(p.map(|n| {
                                if steps >= 0 {
                                    n << steps.min(8)
                                } else {
                                    n >> (-steps).min(8)
                                }
                            }));
                        }
                    });
                }
                Control::Stop(r) => return Ok(r),
            }
        }
        if cfg.requests.is_some_and(|n| index >= n) {
            return Ok(StopReason::RequestLimit);
        }
        if cfg.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(StopReason::DurationLimit);
        }

        let shape = cfg.workload.request(index);
        let warmup = index < cfg.warmup;
        let _ = tx.send(Event::RequestStarted {
            index,
            warmup,
            prompt_tokens: shape.prompt_tokens,
            output_tokens: shape.output_tokens,
            batch: shape.batch,
        });
        match run_request(
            &mut lm,
            &device,
            &mut gpu,
            &shape,
            index,
            warmup,
            &cfg,
            &mut inbox,
            tx,
            &loaded.eos_ids,
            fault,
        ) {
            Ok(Some(done)) => {
                let _ = tx.send(Event::RequestDone(Box::new(done)));
            }
            Ok(None) => {
                // Stopped mid-request: the partial request is not a measurement.
                return Ok(inbox_stop_reason(&mut inbox));
            }
            Err(e) => {
                let msg = one_line(&e.to_string());
                let memory = match device_memory(&device) {
                    Some((used, total)) => format!(
                        "; device memory {:.2}/{:.2} GB used, weights {:.2} GB, KV cache for this request {:.2} GB",
                        used as f64 / 1e9,
                        total as f64 / 1e9,
                        info.weight_bytes as f64 / 1e9,
                        info.expected_kv_bytes(shape.prompt_tokens + shape.output_tokens, shape.batch) as f64 / 1e9
                    ),
                    None => String::new(),
                };
                let hint = if msg.to_ascii_lowercase().contains("out of memory") {
                    " (out of memory: lower --batch, --prompt-tokens or --output-tokens)"
                } else {
                    ""
                };
                return Err(format!(
                    "request {index} (batch {} × prompt {} + output {}) failed: {msg}{memory}{hint}",
                    shape.batch, shape.prompt_tokens, shape.output_tokens,
                ));
            }
        }
        index += 1;
    }
}

/// The stop reason recorded by `run_request` when it returned early.
fn inbox_stop_reason(inbox: &mut Inbox) -> StopReason {
    match inbox.pending.pop_back() {
        Some(Control::Stop(r)) => r,
        _ => StopReason::UserStop,
    }
}

fn adjust(
    w: &mut Workload,
    max_positions: usize,
    tx: &Sender<Event>,
    change: impl FnOnce(&mut Workload),
) {
    let mut next = w.clone();
    change(&mut next);
    let needed = next.max_positions_needed();
    if needed > max_positions {
        let _ = tx.send(Event::Error {
            message: format!(
                "workload not changed: prompt + output ({needed}) would exceed the model's {max_positions} positions"
            ),
            fatal: false,
        });
        return;
    }
    *w = next;
    let _ = tx.send(Event::WorkloadChanged(w.describe()));
}

fn track_peak(peak: &mut Option<u64>, device: &Device) {
    if let (Some(p), Some((used, _))) = (peak.as_mut(), device_memory(device)) {
        *p = (*p).max(used);
    }
}

/// One request. Returns `Ok(None)` if a stop arrived mid-request.
#[allow(clippy::too_many_arguments)]
fn run_request(
    lm: &mut CausalLm,
    device: &Device,
    gpu: &mut GpuTimer,
    shape: &super::workload::RequestShape,
    index: u64,
    warmup: bool,
    cfg: &WorkerConfig,
    inbox: &mut Inbox,
    tx: &Sender<Event>,
    eos_ids: &[u32],
    fault: Option<Fault>,
) -> candle_core::Result<Option<RequestDone>> {
    let (b, p, g) = (shape.batch, shape.prompt_tokens, shape.output_tokens);
    // Everything allocated up front, outside the timed regions.
    lm.reset();
    let mut generated: Vec<u32> = Vec::with_capacity(b * g);
    let mut finished = vec![false; b];
    device.synchronize()?;
    alloc::reset_peak();
    // On CUDA the per-request peak is the context's used memory, read after each synchronize
    // (outside the timed regions).
    let mut device_peak = device_memory(device).map(|(used, _)| used);

    // ---- prefill: upload, forward over the prompt, argmax, token on the host, synchronize.
    let t0 = Instant::now();
    gpu.start();
    let input = Tensor::from_slice(&shape.ids, (b, p), device)?;
    let logits = lm.forward(&input, 0)?;
    let mut next = logits.argmax_keepdim(D::Minus1)?; // (b, 1) u32
    gpu.stop();
    let first = next.flatten_all()?.to_vec1::<u32>()?;
    device.synchronize()?;
    let ttft = t0.elapsed().as_secs_f64();
    // ---- end of timed region
    let gpu_ttft = gpu.elapsed_s();
    track_peak(&mut device_peak, device);
    for (i, &id) in first.iter().enumerate() {
        generated.push(id);
        finished[i] = cfg.stop_at_eos && eos_ids.contains(&id);
    }
    let _ = tx.send(Event::PrefillDone {
        index,
        ttft_s: ttft,
    });
    match fault {
        Some(Fault::Panic(n)) if n == index => panic!("injected fault (--fault panic@{n})"),
        Some(Fault::Error(n)) if n == index => {
            return Err(candle_core::Error::Msg(format!(
                "injected fault (--fault error@{n})"
            )))
        }
        _ => {}
    }

    let mut decode_total = 0.0f64;
    let mut gpu_decode = gpu.enabled().then_some(0.0f64);
    let mut steps = 0usize;
    for step in 1..g {
        if cfg.stop_at_eos && finished.iter().all(|f| *f) {
            break;
        }
        if let Some(r) = inbox.poll_stop() {
            inbox.pending.push_back(Control::Stop(r));
            return Ok(None);
        }
        // ---- decode step: forward one token per sequence, argmax, ids on the host, synchronize.
        let ts = Instant::now();
        gpu.start();
        let logits = lm.forward(&next, p + step - 1)?;
        next = logits.argmax_keepdim(D::Minus1)?;
        gpu.stop();
        let ids = next.flatten_all()?.to_vec1::<u32>()?;
        device.synchronize()?;
        let itl = ts.elapsed().as_secs_f64();
        // ---- end of timed region
        let gpu_s = gpu.elapsed_s();
        track_peak(&mut device_peak, device);
        if let (Some(total), Some(s)) = (gpu_decode.as_mut(), gpu_s) {
            *total += s;
        }
        decode_total += itl;
        steps += 1;
        for (i, &id) in ids.iter().enumerate() {
            generated.push(id);
            if cfg.stop_at_eos && eos_ids.contains(&id) {
                finished[i] = true;
            }
        }
        let _ = tx.send(Event::DecodeStep {
            index,
            step: step as u32,
            itl_s: itl,
            gpu_s,
        });
    }
    let output_tokens = steps + 1;
    let e2e = ttft + decode_total;
    let peak = device_peak.unwrap_or_else(alloc::peak_bytes);
    let bytes: Vec<u8> = generated.iter().flat_map(|id| id.to_le_bytes()).collect();
    // Generated ids are stored step-major (all sequences' token 1, then token 2...); the first
    // sequence is every b-th id.
    let first_seq: Vec<u32> = generated.iter().step_by(b.max(1)).copied().collect();
    let text = if cfg.record_tokens {
        cfg.tokenizer
            .as_ref()
            .and_then(|t| t.decode(&first_seq, false).ok())
    } else {
        None
    };
    Ok(Some(RequestDone {
        index,
        warmup,
        batch: b,
        prompt_tokens: p,
        output_tokens,
        ttft_s: ttft,
        tpot_s: (output_tokens > 1).then(|| decode_total / (output_tokens - 1) as f64),
        e2e_s: e2e,
        gpu_ttft_s: gpu_ttft,
        gpu_decode_s: gpu_decode,
        peak_alloc_bytes: Some(peak),
        output_hash: format!("{:016x}", fnv1a(&bytes)),
        tokens: cfg.record_tokens.then_some(first_seq),
        text,
    }))
}
