//! The worker thread: owns the device and the model, runs requests again and again, times every
//! phase with an explicit device synchronize, and sends typed events.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor, D};
use crossbeam_channel::{Receiver, Sender};

use super::control::{Inbox, Intent};
use super::spans;
use super::timer::{self, device_memory, GpuTimer};
use super::workload::{Dialogue, RequestShape, Sampler, Sampling, Workload};
use crate::event::{
    Control, DecodeStep, Event, ModelLoaded, Notice, RequestDone, RunInfo, StepBatch, StepParts,
    StopReason,
};
use crate::model::{self, CausalLm, DeviceSpec, ModelSpec};
use crate::telemetry::alloc;
use crate::traffic::len::doubled;
use crate::traffic::TrafficPlan;
use crate::util::{fnv1a, format, one_line};

/// Everything the worker needs, planned from the flags (`plan::engine`).
#[derive(Clone)]
pub struct WorkerConfig {
    pub model: ModelSpec,
    pub device: DeviceSpec,
    pub dtype: DType,
    /// CPU threads candle uses (informational; set through RAYON_NUM_THREADS before start).
    pub threads: usize,
    /// What is sent, how much of it, and which requests are warmup.
    pub traffic: TrafficPlan,
    /// How the traffic becomes token ids: the batch, given prompts, the vocabulary.
    pub workload: Workload,
    pub stop_at_eos: bool,
    pub record_tokens: bool,
    /// Decodes generated ids for `--record-tokens`.
    pub tokenizer: Option<tokenizers::Tokenizer>,
    /// `--sampling`: host-side sampling in place of greedy argmax (`None`: greedy).
    pub sampling: Option<Sampling>,
    /// `--step-parts N`: one prefill in N and one decode step in N timed in parts.
    pub step_parts: Option<u32>,
}

/// The worker thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const WORKER_THREAD: &str = "infertop-engine-candle";

/// A fault injected for tests (the hidden `--fault` flag): in request N, after its prefill,
/// the worker panics or fails as a candle error would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Panic(u64),
    Error(u64),
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
    super::spawn_engine(WORKER_THREAD, "worker", events, move |tx| {
        run(cfg, fault, tx, control)
    })
}

fn run(
    cfg: WorkerConfig,
    fault: Option<Fault>,
    tx: &Sender<Event>,
    control: Receiver<Control>,
) -> Result<StopReason, String> {
    // A load a signal stopped ends the run as the signal's stop.
    let mut model = match load(&cfg, tx) {
        Ok(m) => m,
        Err(e) => return crate::signals::pending().ok_or(e),
    };
    run_on(&mut model, cfg, fault, tx, control)
}

/// A model loaded on its device.
struct LoadedModel {
    device: Device,
    loaded: model::Loaded,
    /// This machine's peaks, probed before the load (`--step-parts` on the CPU).
    peak: Option<crate::event::MachinePeak>,
}

/// Opens the device and loads `cfg`'s model (weights, tokenizer-free), then says so with a
/// `model_loaded` notice: how long it took and the bytes of weights it holds.
fn load(cfg: &WorkerConfig, tx: &Sender<Event>) -> Result<LoadedModel, String> {
    let t0 = Instant::now();
    let device = cfg.device.open().map_err(|e| e.to_string())?;
    // Say how much memory the weights need before allocating them on the GPU.
    if let (Some((used, total)), Ok(Some(arch))) =
        (device_memory(&device), model::arch_config_of(&cfg.model))
    {
        let need = arch.params() * cfg.dtype.size_in_bytes() as u64;
        let free = total.saturating_sub(used);
        if need > free {
            return Err(format!(
                "{} needs {} of weights in {} but {} has {} free of {}; use a smaller model or --dtype bf16",
                cfg.model.display(),
                format::bytes(need),
                model::dtype_name(cfg.dtype),
                cfg.device.name(),
                format::bytes(free),
                format::bytes(total)
            ));
        }
    }
    // The spans the model makes while it is built are timed only if the span timer is the
    // process's subscriber by then (`--step-parts`); without the flag none is installed.
    if cfg.step_parts.is_some() && !spans::install() {
        let _ = tx.send(Event::Error {
            message: "--step-parts: the process already has a tracing subscriber; the forward is shown whole".into(),
            fatal: false,
        });
    }
    // The roofline the parts are read against, measured once, before anything is timed and
    // while nothing else runs (about 0.4 s, as `report --probe` measures it).
    let peak = (cfg.step_parts.is_some() && cfg.device == DeviceSpec::Cpu).then(|| {
        let _ = tx.send(Event::Loading {
            what: "probing this machine's bandwidth and FLOP/s".into(),
            done: 0,
            total: 1,
        });
        crate::stats::roofline::probe_cpu().into()
    });
    let progress_tx = tx.clone();
    // A signal stops the load between two tensors: half a billion parameters take seconds.
    let progress: model::Progress = Arc::new(move |what: &str, done: u64, total: u64| {
        let _ = progress_tx.send(Event::Loading {
            what: what.to_string(),
            done,
            total,
        });
        crate::signals::pending().is_none()
    });
    let loaded = model::load(&cfg.model, &device, cfg.device, cfg.dtype, progress)
        .map_err(|e| e.to_string())?;
    let _ = tx.send(Event::Notice(Box::new(Notice::ModelLoaded(ModelLoaded {
        model: cfg.model.display(),
        dtype: loaded.info.dtype.clone(),
        load_s: t0.elapsed().as_secs_f64(),
        bytes: loaded.info.weight_bytes,
    }))));
    Ok(LoadedModel {
        device,
        loaded,
        peak,
    })
}

/// Which loaded model a cell can run on.
fn host_key(cfg: &WorkerConfig) -> (String, DeviceSpec, DType) {
    (cfg.model.display(), cfg.device, cfg.dtype)
}

/// Runs one run (or sweep cell) of `cfg`'s workload on a model already loaded.
fn run_on(
    m: &mut LoadedModel,
    mut cfg: WorkerConfig,
    fault: Option<Fault>,
    tx: &Sender<Event>,
    control: Receiver<Control>,
) -> Result<StopReason, String> {
    let device = &m.device;
    let info = m.loaded.info.clone();
    cfg.workload.vocab = info.vocab.max(4);
    let needed = cfg.workload.max_positions_needed(&cfg.traffic);
    if needed > info.max_positions {
        return Err(format!(
            "prompt + output tokens ({needed}) exceed the model's {} positions; lower --prompt-tokens or --output-tokens",
            info.max_positions
        ));
    }
    let _ = tx.send(Event::RunStarted(Box::new(RunInfo {
        model: info.clone(),
        workload: cfg.workload.describe(&cfg.traffic),
        warmup_requests: cfg.traffic.warmup,
        threads: if cfg.device == DeviceSpec::Cpu {
            cfg.threads
        } else {
            0
        },
        traffic: Workload::traffic_info(&cfg.traffic).map(Box::new),
        peak: m.peak.clone(),
    })));
    if let Some(w) = m.loaded.unapplied_window.filter(|&w| needed > w) {
        // Warn rather than refuse: the cost of attending over every position is what is
        // measured, and a run longer than the window is still a useful latency figure.
        let _ = tx.send(Event::Error {
            message: format!(
                "{} declares sliding_window {w}, which candle's {} does not apply: with prompt + output up to {needed} tokens, attention past {w} positions differs from the reference model (latency then counts full attention)",
                cfg.model.display(),
                info.arch
            ),
            fatal: false,
        });
    }

    let started = Instant::now();
    let mut inbox = Inbox::new(control);
    let mut measure = Measure {
        gpu: GpuTimer::new(device),
        lm: &mut m.loaded.model,
        device,
        eos_ids: &m.loaded.eos_ids,
        stop_at_eos: cfg.stop_at_eos,
        tx,
        fault,
        sampler: cfg.sampling.clone().map(Sampler::new),
        parts: cfg.step_parts.and_then(|every| {
            spans::use_clock(timer::parts_clock(device)?);
            Some(PartsEvery::new(every))
        }),
    };
    // candle's quantized (GGUF) models run batch 1 only (see the check in `plan`).
    let max_batch = if info.source == crate::event::ModelSource::Gguf {
        1
    } else {
        MAX_BATCH
    };
    let mut index: u64 = 0;
    let mut dialogue = cfg.traffic.conversations.clone().map(Dialogue::new);
    let limit = cfg.traffic.request_limit();
    loop {
        // Request boundary: carry out what the controls ask, honour limits.
        if let Some(reason) = boundary(&mut inbox, &mut cfg, info.max_positions, max_batch, tx) {
            return Ok(reason);
        }
        if limit.is_some_and(|n| index >= n) {
            return Ok(StopReason::RequestLimit);
        }
        if cfg.traffic.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(StopReason::DurationLimit);
        }

        let shape = match dialogue.as_mut() {
            Some(d) => match d.next(&cfg.workload, &cfg.traffic, index, info.max_positions) {
                None => return Ok(StopReason::RequestLimit),
                Some(Ok(shape)) => shape,
                Some(Err(why)) => {
                    let _ = tx.send(Event::Error {
                        message: why,
                        fatal: false,
                    });
                    continue;
                }
            },
            None => cfg.workload.try_request(&cfg.traffic, index)?,
        };
        let warmup = cfg.traffic.is_warmup(index);
        let _ = tx.send(Event::RequestStarted {
            index,
            warmup,
            prompt_tokens: shape.prompt_tokens,
            output_tokens: shape.output_tokens,
            batch: shape.batch,
        });
        match measure.request(&shape, index, warmup, &mut inbox) {
            Ok(Request::Done(ids)) => {
                if let Some(d) = dialogue.as_mut() {
                    d.replied(&ids.first_sequence());
                }
                let mut done = ids.finish(&cfg);
                done.origin = shape.origin.clone().map(Box::new);
                let _ = tx.send(Event::RequestDone(Box::new(done)));
            }
            // Stopped mid-request: the partial request is not a measurement.
            Ok(Request::Stopped(reason)) => return Ok(reason),
            Err(e) => return Err(request_failed(&e, &shape, index, device, &info)),
        }
        index += 1;
    }
}

/// A thread that keeps one model loaded and runs cells on it one after another: a sweep's
/// cells of one (model, device, dtype) share a load. Each cell is a job: its configuration
/// and control channel; the host sends the cell's events up to its `Finished` on the sweep's
/// channel, then signals the job done. The first job loads the model (its cell then shows the
/// loading and the `model_loaded` notice); a load that failed fails every later job with the
/// same line; a cell that panicked drops the model, and the next job loads it again.
pub struct ModelHost {
    jobs: Option<Sender<Job>>,
    handle: Option<JoinHandle<()>>,
    key: (String, DeviceSpec, DType),
}

struct Job {
    cfg: WorkerConfig,
    fault: Option<Fault>,
    control: Receiver<Control>,
    done: Sender<()>,
}

impl ModelHost {
    /// A host for `cfg`'s model (not loaded until its first job), sending on `events`.
    pub fn spawn(cfg: &WorkerConfig, events: Sender<Event>) -> std::io::Result<ModelHost> {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(crate::util::quiet_engine_panics);
        let (jobs, rx) = crossbeam_channel::unbounded::<Job>();
        let handle = std::thread::Builder::new()
            .name(WORKER_THREAD.into())
            .spawn(move || host(&rx, &events))?;
        Ok(ModelHost {
            jobs: Some(jobs),
            handle: Some(handle),
            key: host_key(cfg),
        })
    }

    /// Whether `cfg` runs on this host's model.
    pub fn holds(&self, cfg: &WorkerConfig) -> bool {
        self.key == host_key(cfg)
    }

    /// Runs a cell on the model; the receiver gets a unit (or is dropped) once its `Finished`
    /// is sent.
    pub fn run(
        &self,
        cfg: WorkerConfig,
        fault: Option<Fault>,
        control: Receiver<Control>,
    ) -> Result<Receiver<()>, String> {
        let (done, rx) = crossbeam_channel::bounded(1);
        let job = Job {
            cfg,
            fault,
            control,
            done,
        };
        self.jobs
            .as_ref()
            .ok_or("the model's thread has gone")?
            .send(job)
            .map_err(|_| "the model's thread has gone".to_string())?;
        Ok(rx)
    }
}

impl Drop for ModelHost {
    /// No more jobs: the host ends, and the model is freed before this returns.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The host thread: each job a cell, on the model loaded once.
fn host(jobs: &Receiver<Job>, tx: &Sender<Event>) {
    let mut model: Option<Result<LoadedModel, String>> = None;
    let mut pools: Vec<(usize, rayon::ThreadPool)> = Vec::new();
    for job in jobs {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if model.is_none() {
                model = Some(load(&job.cfg, tx));
            }
            match model.as_mut() {
                Some(Ok(m)) => {
                    let threads = job.cfg.threads;
                    set_threads(threads, job.cfg.device);
                    if job.cfg.device == DeviceSpec::Cpu
                        && threads > 0
                        && !pools.iter().any(|(n, _)| *n == threads)
                    {
                        if let Some(pool) = thread_pool(threads) {
                            pools.push((threads, pool));
                        }
                    }
                    let pool = pools
                        .iter()
                        .find(|(n, _)| *n == threads && job.cfg.device == DeviceSpec::Cpu);
                    match pool {
                        Some((_, pool)) => {
                            pool.install(|| run_on(m, job.cfg, job.fault, tx, job.control))
                        }
                        None => run_on(m, job.cfg, job.fault, tx, job.control),
                    }
                }
                // A load a signal stopped: the sweep ends as the signal's stop.
                Some(Err(e)) => crate::signals::pending().ok_or_else(|| e.clone()),
                None => Err("the model did not load".into()),
            }
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
                // The model's state is unknown after a panic: load it again for the next cell.
                model = None;
                let message = crate::util::panic_message(panic.as_ref());
                let at = crate::util::take_panic_location().unwrap_or_default();
                let _ = tx.send(Event::Error {
                    message: format!("worker panicked: {}{at}", one_line(&message)),
                    fatal: true,
                });
                StopReason::Error
            }
        };
        let _ = tx.send(Event::Finished(reason));
        let _ = job.done.send(());
    }
}

/// candle's dense matmuls split into as many tasks as `RAYON_NUM_THREADS` says, read on every
/// call; the host sets it to the cell's `--threads` before the cell (no kernel running). Its
/// quantized matmuls and large element-wise ops run on a pool sized once per process, which is
/// why a sweep takes one `--threads` value (`plan::sweep`). Std's environment lock orders this
/// write with candle's reads.
fn set_threads(threads: usize, device: DeviceSpec) {
    if device != DeviceSpec::Cpu || threads == 0 {
        return;
    }
    let want = threads.to_string();
    if std::env::var("RAYON_NUM_THREADS").ok().as_deref() != Some(want.as_str()) {
        std::env::set_var("RAYON_NUM_THREADS", want);
    }
}

/// A pool of exactly the cell's threads, so that the kernels' tasks (and every other parallel
/// loop of candle's) run on that many: the process's global pool is sized once, at first use.
fn thread_pool(threads: usize) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("infertop-candle-{i}"))
        .build()
        .ok()
}

/// One line saying which request failed, with its shape and, on a GPU, the memory figures.
fn request_failed(
    e: &candle_core::Error,
    shape: &RequestShape,
    index: u64,
    device: &Device,
    info: &crate::event::ModelInfo,
) -> String {
    let msg = one_line(&e.to_string());
    let memory = match device_memory(device) {
        Some((used, total)) => format!(
            "; device memory {}/{} used, weights {}, KV cache for this request {}",
            format::bytes(used),
            format::bytes(total),
            format::bytes(info.weight_bytes),
            format::bytes(
                info.expected_kv_bytes(shape.prompt_tokens + shape.output_tokens, shape.batch)
            )
        ),
        None => String::new(),
    };
    let hint = if msg.to_ascii_lowercase().contains("out of memory") {
        " (out of memory: lower --batch, --prompt-tokens or --output-tokens)"
    } else {
        ""
    };
    format!(
        "request {index} (batch {} × prompt {} + output {}) failed: {msg}{memory}{hint}",
        shape.batch, shape.prompt_tokens, shape.output_tokens,
    )
}

/// The largest batch the load keys go to.
const MAX_BATCH: usize = 1024;

/// How long a paused worker waits for its next control at a time.
const PAUSED_POLL: Duration = Duration::from_millis(100);

/// A request boundary: carries out what the controls asked since the last one, in order (a
/// pause waits here, measuring nothing, until resumed); `Some(reason)` when the run must stop
/// (a stop, or a drain: the request that was in flight has finished).
fn boundary(
    inbox: &mut Inbox,
    cfg: &mut WorkerConfig,
    max_positions: usize,
    max_batch: usize,
    tx: &Sender<Event>,
) -> Option<StopReason> {
    loop {
        let intent = if inbox.paused() {
            inbox.wait(PAUSED_POLL)
        } else {
            inbox.poll()
        };
        let Some(intent) = intent else {
            if inbox.paused() {
                continue;
            }
            break;
        };
        if let Some(echo) = intent.echo() {
            let _ = tx.send(echo);
        }
        match intent {
            Intent::Stop(reason) => return Some(reason),
            Intent::Pause | Intent::Resume | Intent::ResetStats | Intent::Drain => {}
            Intent::Output(delta) => adjust(cfg, max_positions, tx, |t, _| t.adjust_output(delta)),
            Intent::Prompt(steps) => adjust(cfg, max_positions, tx, |t, _| t.adjust_prompt(steps)),
            Intent::Load(steps) => {
                let batch = doubled(cfg.workload.batch, steps).clamp(1, max_batch);
                if batch == cfg.workload.batch {
                    let _ = tx.send(Event::Error {
                        message: format!(
                            "batch stays {batch} (this model runs batch 1 to {max_batch})"
                        ),
                        fatal: false,
                    });
                } else {
                    adjust(cfg, max_positions, tx, |_, w| w.batch = batch);
                }
            }
        }
    }
    inbox.draining().then_some(StopReason::RequestLimit)
}

/// Changes the workload of the next requests, unless the change would not fit the model.
fn adjust(
    cfg: &mut WorkerConfig,
    max_positions: usize,
    tx: &Sender<Event>,
    change: impl FnOnce(&mut TrafficPlan, &mut Workload),
) {
    let (mut traffic, mut workload) = (cfg.traffic.clone(), cfg.workload.clone());
    change(&mut traffic, &mut workload);
    let needed = workload.max_positions_needed(&traffic);
    if needed > max_positions {
        let _ = tx.send(Event::Error {
            message: format!(
                "workload not changed: prompt + output ({needed}) would exceed the model's {max_positions} positions"
            ),
            fatal: false,
        });
        return;
    }
    let _ = tx.send(Event::WorkloadChanged(Box::new(
        workload.describe(&traffic),
    )));
    (cfg.traffic, cfg.workload) = (traffic, workload);
}

/// What the worker measures with: the model on its device, the GPU timer, and where results go.
struct Measure<'a> {
    lm: &'a mut CausalLm,
    device: &'a Device,
    gpu: GpuTimer,
    eos_ids: &'a [u32],
    stop_at_eos: bool,
    tx: &'a Sender<Event>,
    fault: Option<Fault>,
    /// `--sampling`; `None`: greedy argmax on the device.
    sampler: Option<Sampler>,
    /// `--step-parts N`: which steps are timed in parts.
    parts: Option<PartsEvery>,
}

/// `--step-parts N`: the first prefill and decode step of every N is timed in parts, each
/// phase counted on its own (so a run with short outputs still samples its prefills).
struct PartsEvery {
    every: u32,
    prefills: u32,
    decodes: u32,
}

impl PartsEvery {
    fn new(every: u32) -> PartsEvery {
        PartsEvery {
            every: every.max(1),
            prefills: 0,
            decodes: 0,
        }
    }

    /// Whether the next step of this phase is sampled.
    fn next(&mut self, prefill: bool) -> bool {
        let count = if prefill {
            &mut self.prefills
        } else {
            &mut self.decodes
        };
        let sampled = *count == 0;
        *count = (*count + 1) % self.every;
        sampled
    }
}

/// One timed forward: the next tokens (on the device and on the host) and how long it took.
struct Timed {
    next: Tensor,
    ids: Vec<u32>,
    wall_s: f64,
    gpu_s: Option<f64>,
    /// A sampled step's parts (`--step-parts`), in seconds from the region's start.
    parts: Option<Box<StepParts>>,
}

/// How a request ended.
enum Request {
    Done(Generated),
    /// A stop arrived between two decode steps.
    Stopped(StopReason),
}

/// A finished request's timings and ids, before they become a `RequestDone`.
struct Generated {
    index: u64,
    warmup: bool,
    batch: usize,
    prompt_tokens: usize,
    ttft_s: f64,
    gpu_ttft_s: Option<f64>,
    /// Sum of the decode steps' wall times, the slowest, and how many there were.
    decode_s: f64,
    itl_max_s: f64,
    gpu_decode_s: Option<f64>,
    steps: usize,
    peak_bytes: u64,
    /// Step-major: every sequence's first token, then every sequence's second, ...
    ids: Vec<u32>,
}

impl Measure<'_> {
    /// The one timed region, for prefill and decode alike: build the input (the prefill
    /// uploads the prompt ids), forward at `pos`, argmax, copy the ids to the host, and
    /// synchronize. With `--sampling` the logits are copied to the host and sampled there,
    /// and the drawn ids uploaded, all inside the region, as a server pays for them.
    /// Nothing else is inside: buffers are allocated before, events sent after.
    ///
    /// A sampled step (`--step-parts`) also stamps the end of the input and of the forward,
    /// and every span the model enters (`engine::spans`): host clock readings on the CPU,
    /// events on the stream on CUDA, read after the synchronize. A step that is not sampled
    /// reads the clock twice, as before.
    fn timed(
        &mut self,
        input: impl FnOnce(&Device) -> candle_core::Result<Tensor>,
        pos: usize,
        sampled: bool,
    ) -> candle_core::Result<Timed> {
        let t0 = Instant::now();
        self.gpu.start();
        if sampled {
            spans::begin(self.lm.norms());
        }
        let input = input(self.device);
        if sampled {
            spans::input_done();
        }
        let logits = input.and_then(|input| self.lm.forward(&input, pos));
        // Closed before a failed forward returns too, so no later step is timed by mistake.
        let pending = if sampled { spans::end() } else { None };
        let logits = logits?;
        let (next, ids) = match self.sampler.as_mut() {
            None => {
                let next = logits.argmax_keepdim(D::Minus1)?; // (b, 1) u32
                self.gpu.stop();
                let ids = next.flatten_all()?.to_vec1::<u32>()?;
                (next, ids)
            }
            Some(sampler) => {
                self.gpu.stop();
                let rows = logits.to_vec2::<f32>()?;
                let ids: Vec<u32> = rows.iter().map(|row| sampler.sample(row)).collect();
                let next = Tensor::from_slice(&ids, (ids.len(), 1), self.device)?;
                (next, ids)
            }
        };
        self.device.synchronize()?;
        let done = Instant::now();
        let wall_s = (done - t0).as_secs_f64();
        Ok(Timed {
            next,
            ids,
            wall_s,
            gpu_s: self.gpu.elapsed_s(),
            parts: pending
                .and_then(|p| p.resolve())
                .map(|r| Box::new(step_parts(wall_s, &r))),
        })
    }

    /// Runs one request: prefill, then decode steps until G tokens (or every sequence's EOS
    /// with `--stop-at-eos`), checking for a stop between steps.
    fn request(
        &mut self,
        shape: &RequestShape,
        index: u64,
        warmup: bool,
        inbox: &mut Inbox,
    ) -> candle_core::Result<Request> {
        let (b, p, g) = (shape.batch, shape.prompt_tokens, shape.output_tokens);
        // Everything allocated up front, outside the timed regions.
        self.lm.reset();
        if let Some(s) = self.sampler.as_mut() {
            s.start_request(index);
        }
        let mut ids: Vec<u32> = Vec::with_capacity(b * g);
        let mut finished = vec![false; b];
        self.device.synchronize()?;
        alloc::reset_peak();
        // On CUDA the per-request peak is the context's used memory, read after each
        // synchronize (outside the timed regions).
        let mut device_peak = device_memory(self.device).map(|(used, _)| used);

        let sampled = self.parts.as_mut().is_some_and(|e| e.next(true));
        let prefill = self.timed(|d| Tensor::from_slice(&shape.ids, (b, p), d), 0, sampled)?;
        track_peak(&mut device_peak, self.device);
        self.keep(&prefill.ids, &mut ids, &mut finished);
        let _ = self.tx.send(Event::PrefillDone {
            index,
            ttft_s: prefill.wall_s,
        });
        if let Some(mut parts) = prefill.parts {
            (parts.index, parts.step, parts.warmup) = (index, 0, warmup);
            (parts.tokens, parts.context) = (b * p, p);
            let _ = self.tx.send(Event::StepParts(parts));
        }
        match self.fault {
            Some(Fault::Panic(n)) if n == index => panic!("injected fault (--fault panic@{n})"),
            Some(Fault::Error(n)) if n == index => {
                return Err(candle_core::Error::Msg(format!(
                    "injected fault (--fault error@{n})"
                )))
            }
            _ => {}
        }

        let mut next = prefill.next;
        let mut decode_s = 0.0f64;
        let mut itl_max_s = 0.0f64;
        let mut gpu_decode_s = self.gpu.enabled().then_some(0.0f64);
        let mut steps = 0usize;
        // Steps faster than `STEP_BATCH` go out together; the rest before this returns.
        let mut batch = StepBatch::new();
        for step in 1..g {
            if self.stop_at_eos && finished.iter().all(|f| *f) {
                break;
            }
            if let Some(r) = inbox.stop_now() {
                batch.flush(self.tx);
                return Ok(Request::Stopped(r));
            }
            let token = next;
            let sampled = self.parts.as_mut().is_some_and(|e| e.next(false));
            let decoded = match self.timed(move |_| Ok(token), p + step - 1, sampled) {
                Ok(d) => d,
                Err(e) => {
                    batch.flush(self.tx);
                    return Err(e);
                }
            };
            track_peak(&mut device_peak, self.device);
            if let (Some(total), Some(s)) = (gpu_decode_s.as_mut(), decoded.gpu_s) {
                *total += s;
            }
            decode_s += decoded.wall_s;
            itl_max_s = itl_max_s.max(decoded.wall_s);
            steps += 1;
            self.keep(&decoded.ids, &mut ids, &mut finished);
            batch.push(
                DecodeStep::new(index, step as u32, decoded.wall_s, decoded.gpu_s),
                self.tx,
            );
            next = decoded.next;
            if let Some(mut parts) = decoded.parts {
                (parts.index, parts.step, parts.warmup) = (index, step as u32, warmup);
                (parts.tokens, parts.context) = (b, p + step);
                // After the steps before it, so a record keeps them in order.
                batch.flush(self.tx);
                let _ = self.tx.send(Event::StepParts(parts));
            }
        }
        batch.flush(self.tx);
        Ok(Request::Done(Generated {
            index,
            warmup,
            batch: b,
            prompt_tokens: p,
            ttft_s: prefill.wall_s,
            gpu_ttft_s: prefill.gpu_s,
            decode_s,
            itl_max_s,
            gpu_decode_s,
            steps,
            peak_bytes: device_peak.unwrap_or_else(alloc::peak_bytes),
            ids,
        }))
    }

    /// Keeps a step's ids (one per sequence) and notes which sequences reached EOS.
    fn keep(&self, step_ids: &[u32], ids: &mut Vec<u32>, finished: &mut [bool]) {
        for (i, &id) in step_ids.iter().enumerate() {
            ids.push(id);
            if self.stop_at_eos && self.eos_ids.contains(&id) {
                if let Some(f) = finished.get_mut(i) {
                    *f = true;
                }
            }
        }
    }
}

impl Generated {
    /// The ids of the first sequence (every b-th id: they are kept step by step).
    fn first_sequence(&self) -> Vec<u32> {
        self.ids
            .iter()
            .step_by(self.batch.max(1))
            .copied()
            .collect()
    }

    /// The request as every consumer sees it: E2E = TTFT + the decode steps (the timed regions
    /// only), TPOT = (E2E − TTFT) / (G − 1), and a hash of every generated id.
    fn finish(self, cfg: &WorkerConfig) -> RequestDone {
        let output_tokens = self.steps + 1;
        let bytes: Vec<u8> = self.ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        let first_seq = self.first_sequence();
        let text = if cfg.record_tokens {
            cfg.tokenizer
                .as_ref()
                .and_then(|t| t.decode(&first_seq, false).ok())
        } else {
            None
        };
        RequestDone {
            index: self.index,
            warmup: self.warmup,
            batch: self.batch,
            prompt_tokens: self.prompt_tokens,
            output_tokens,
            ttft_s: self.ttft_s,
            tpot_s: (output_tokens > 1).then(|| self.decode_s / (output_tokens - 1) as f64),
            e2e_s: self.ttft_s + self.decode_s,
            gpu_ttft_s: self.gpu_ttft_s,
            gpu_decode_s: self.gpu_decode_s,
            itl_max_s: (self.steps > 0).then_some(self.itl_max_s),
            peak_alloc_bytes: Some(self.peak_bytes),
            output_hash: format!("{:016x}", fnv1a(&bytes)),
            tokens: cfg.record_tokens.then_some(first_seq),
            text,
            client: None,
            origin: None,
            model: None,
            parts: None,
        }
    }
}

/// A sampled step's parts from its stamps, given the step's wall time: the input and the
/// forward as the clock read them (on CUDA the device's events), what is left of the wall time
/// after them (argmax or sampling, the copy of the ids, the synchronize) as the sample's.
/// Which request and step it was is the caller's to fill in.
fn step_parts(wall_s: f64, r: &spans::Resolved) -> StepParts {
    let g = r.sample.grouped(r.forward_s);
    let traced = |part| r.sample.entered(part) > 0;
    StepParts {
        index: 0,
        step: 0,
        warmup: false,
        tokens: 0,
        context: 0,
        wall_s,
        input_s: r.input_s,
        embedding_s: traced(spans::Part::Embedding).then_some(g.embedding_s),
        attention_s: traced(spans::Part::Attention).then_some(g.attention_s),
        mlp_s: traced(spans::Part::Mlp).then_some(g.mlp_s),
        head_s: traced(spans::Part::Output).then_some(g.output_s),
        rest_s: g.rest_s,
        matmul_s: traced(spans::Part::Matmul).then_some(g.matmul_s),
        sample_s: (wall_s - r.input_s - r.forward_s).max(0.0),
    }
}

fn track_peak(peak: &mut Option<u64>, device: &Device) {
    if let (Some(p), Some((used, _))) = (peak.as_mut(), device_memory(device)) {
        *p = (*p).max(used);
    }
}
