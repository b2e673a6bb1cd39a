//! The protocol: what every engine (and the telemetry thread) sends and every consumer (the run
//! fold, the dashboard, the recorder, the headless printer) reads. A leaf module: it names no
//! other module of the crate, so engines and consumers depend on it and never on each other.
//!
//! Data flows one way: producers send `Event`s over one channel, consumers `apply` them;
//! `Control` messages go back to the engine.
//!
//! This file holds the messages themselves; what they carry lives by meaning beside it: a
//! request's result (`request`), decode steps and how they travel (`steps`), the traffic's
//! description (`traffic`), the model's (`model`), telemetry samples (`telemetry`), a server's
//! and a node's windows (`server`), a server's own timings of one request (`timing`), and a
//! sweep's cells (`sweep`).

mod model;
mod request;
mod server;
mod steps;
mod sweep;
mod telemetry;
mod timing;
mod traffic;

pub use model::{KvWindow, ModelInfo, ModelSource, PartWeights, Weights};
pub use request::{
    CanaryDone, ClientDetail, ConnectionUse, HttpPhases, Origin, OutputParts, RequestCancelled,
    RequestDone, RequestFailed,
};
pub use server::{
    CancelCheck, GpuFigures, HostFigures, NodeTelemetry, ServerGauges, ServerHistograms,
    ServerQuantiles, ServerSignals, ServerWindow, SignalHistograms,
};
pub use steps::{recycle, spare_steps, DecodeStep, StepBatch, StepParts, STEP_BATCH};
pub use sweep::{CellLen, CellParams, CellStart, FloatDtype};
pub use telemetry::{GpuProcess, Sample};
pub use timing::ServerTimings;
pub use traffic::{DatasetInfo, TrafficInfo};

use serde::{Deserialize, Serialize};

/// Events the channel from the engine and the sampler holds before producers wait
/// (about 40 s of decode steps of the tiny model; a few MB preallocated).
pub const EVENT_QUEUE: usize = 1 << 16;

/// What a run is doing, as shown in the dashboard header.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunPhase {
    Loading,
    Warmup,
    Running,
    Paused,
    /// `--runs N --cooldown D`: idle between two runs.
    Cooldown,
    Stopped,
    Error,
}

/// Why a run ended; written in the record footer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// `--requests N` reached.
    RequestLimit,
    /// `--duration` elapsed.
    DurationLimit,
    /// The user asked (q, Ctrl-C, SIGINT).
    UserStop,
    /// SIGTERM or SIGHUP.
    Signal(String),
    /// The worker failed; the message is in the preceding `Event::Error`.
    Error,
}

impl StopReason {
    /// How every text says why a run, a cell or a sweep stopped (the dashboard's header and
    /// events, the sweep's cell status and summary): `stopped by the user`, `stopped by SIGTERM`,
    /// `stopped at the request limit`. One phrase for q, Ctrl-C and SIGINT alike: the record
    /// cannot tell them apart either.
    pub fn words(&self) -> String {
        match self {
            StopReason::RequestLimit => "stopped at the request limit".into(),
            StopReason::DurationLimit => "stopped at the duration limit".into(),
            StopReason::UserStop => "stopped by the user".into(),
            StopReason::Signal(name) => format!("stopped by {name}"),
            StopReason::Error => "stopped by an error".into(),
        }
    }
}

/// The workload of the next requests, as the user wrote it and as it resolves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadDesc {
    /// e.g. "128", "128,512", "64..512" or "prompt file (12 prompts)".
    pub prompt_tokens: String,
    pub output_tokens: String,
    pub batch: usize,
    /// A server engine's load instead of a batch: `concurrency 8` or `rate 4/s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
}

impl WorkloadDesc {
    /// The load part of the workload: `batch 4`, or a server's `concurrency 8` / `rate 4/s`.
    pub fn load_text(&self) -> String {
        match &self.load {
            Some(l) => l.clone(),
            None => format!("batch {}", self.batch),
        }
    }
}

/// Sent once, when the model has loaded and the first request is about to start.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunInfo {
    pub model: ModelInfo,
    pub workload: WorkloadDesc,
    pub warmup_requests: u64,
    /// CPU threads candle uses (0 when not on CPU).
    pub threads: usize,
    /// The traffic beyond made-up lengths (a dataset, conversations, shared prefixes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Box<TrafficInfo>>,
    /// This machine's peaks, measured once before the model loaded, where the run times its
    /// steps in parts (`--step-parts`): the roofline each part is read against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<MachinePeak>,
}

/// A machine's peak memory bandwidth and FLOP/s, and in words where they came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachinePeak {
    /// Bytes per second.
    pub bandwidth: Option<f64>,
    pub flops: Option<f64>,
    pub basis: Vec<String>,
}

/// Everything that crosses the channel into the consumers.
#[derive(Clone, Debug)]
pub enum Event {
    /// Model loading progress (bytes or tensors), before `RunStarted`.
    Loading {
        what: String,
        done: u64,
        total: u64,
    },
    RunStarted(Box<RunInfo>),
    RequestStarted {
        index: u64,
        warmup: bool,
        prompt_tokens: usize,
        output_tokens: usize,
        batch: usize,
    },
    PrefillDone {
        index: u64,
        ttft_s: f64,
    },
    /// Decode steps in the order they were measured: one, or, from an engine stepping faster
    /// than `STEP_BATCH`, those of about that long together (`StepBatch`). Never empty.
    DecodeSteps(Vec<DecodeStep>),
    /// One step in N of the candle engine in parts (`--step-parts N`).
    StepParts(Box<StepParts>),
    RequestDone(Box<RequestDone>),
    /// A request that failed (a server engine's fault, a cut stream, a timeout): counted, never
    /// a latency sample. Its decode steps, if any, went out as they arrived; the statistics
    /// leave them out.
    RequestFailed(Box<RequestFailed>),
    /// A request the client cancelled on purpose (`--cancel`): counted apart, never a latency
    /// sample or a failure; its decode steps, if any, went out as they arrived and are left out.
    RequestCancelled(Box<RequestCancelled>),
    /// A canary request ended (`--probe`): counted apart from the run's requests.
    Canary(Box<CanaryDone>),
    Telemetry(Box<Sample>),
    Paused,
    Resumed,
    StatsReset,
    WorkloadChanged(Box<WorkloadDesc>),
    /// The server's own view over the last window (`--server-metrics`).
    ServerMetrics(Box<ServerWindow>),
    /// A sweep's cell starts; the events up to its engine's `Finished` are the cell's, and the
    /// sweep's own `Finished` comes when no cell is open.
    CellStarted(Box<CellStart>),
    /// Something an engine did besides measuring (a model loaded, a server's cache emptied):
    /// written to the record and shown in the events pane.
    Notice(Box<Notice>),
    /// A worker or telemetry error. `fatal` errors end the run.
    Error {
        message: String,
        fatal: bool,
    },
    /// The worker has stopped; no more events follow from it.
    Finished(StopReason),
}

/// Something an engine did besides measuring, as the record's `event` line names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Notice {
    /// The candle engine loaded a model (in a sweep, once per model and dtype).
    ModelLoaded(ModelLoaded),
    /// A server's prefix cache was emptied (`--reset-prefix-cache`) before the run or cell.
    PrefixCacheReset(CacheReset),
    /// `--api auto` picked the API the run speaks.
    ApiPicked(ApiPicked),
    /// Something the client saw a server do that shapes what is measured (it closes
    /// connections after every response; its outputs carry no text), said once a run.
    ServerNote(ServerNote),
    /// What the server did after the run's cancellations (`--cancel`): back at its baseline
    /// of running requests and KV-cache usage, or not.
    CancelCheck(CancelCheck),
    /// `--runs N --cooldown D`: the idle time between two runs begins.
    Cooldown(Cooldown),
}

impl Notice {
    /// In words, as the events pane and a run's or sweep's progress lines show it:
    /// `loaded synthetic:tiny (f32) in 0.02 s, 6.2MiB of weights`.
    pub fn words(&self) -> String {
        match self {
            Notice::ModelLoaded(m) => format!(
                "loaded {} ({}) in {:.2} s, {} of weights",
                m.model,
                m.dtype,
                m.load_s,
                crate::util::format::bytes(m.bytes)
            ),
            Notice::PrefixCacheReset(c) => format!(
                "prefix cache of {} emptied ({}, {:.0} ms)",
                c.endpoint,
                c.via,
                c.seconds * 1e3
            ),
            Notice::ApiPicked(a) => format!("--api auto: {} ({})", a.api, a.why),
            Notice::ServerNote(n) => n.words.clone(),
            Notice::CancelCheck(c) => c.words(),
            Notice::Cooldown(c) => format!(
                "run {} ended; {} s of cooldown before the next",
                c.after_run + 1,
                c.seconds
            ),
        }
    }
}

/// `--runs N --cooldown D`: the idle time between two runs begins, after run `after_run`
/// (0-based) ended; the next starts `seconds` later (unless stopped meanwhile).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cooldown {
    pub after_run: usize,
    pub seconds: f64,
}

/// What the client saw a server do, once: `what` names it for scripts (`closes-connections`,
/// `empty-text`), `words` says it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerNote {
    pub what: String,
    pub words: String,
}

/// The API `--api auto` picked, and what told it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiPicked {
    pub api: String,
    pub why: String,
}

/// A model loaded: which, how long it took (device open and weights), how many bytes of
/// weights it holds on the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelLoaded {
    /// As given (`synthetic:tiny`, a directory, a .gguf file).
    pub model: String,
    pub dtype: String,
    pub load_s: f64,
    pub bytes: u64,
}

/// A server's prefix cache emptied: where, by which request, in how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheReset {
    pub endpoint: String,
    /// The request that did it, e.g. `POST /reset_prefix_cache` (vLLM), `POST /flush_cache`
    /// (SGLang).
    pub via: String,
    pub seconds: f64,
}

impl Event {
    /// One decode step as an event of its own.
    pub fn decode_step(index: u64, step: u32, itl_s: f64, gpu_s: Option<f64>) -> Event {
        Event::DecodeSteps(vec![DecodeStep::new(index, step, itl_s, gpu_s)])
    }
}

/// Messages into the engine: what the dashboard's keys (and a sweep's stopping rule) ask for.
/// Every engine gives them the same meaning, decided once in `engine::control`: the load keys
/// change the workload of the next requests, never one in flight, and the engine echoes every
/// change it makes as an event, so each consumer sees it at the same point of the stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Control {
    Pause,
    Resume,
    /// Reset statistics: the worker echoes `Event::StatsReset` so every consumer resets at the
    /// same point of the stream.
    ResetStats,
    /// Change output tokens by this many (clamped to ≥ 1) from the next request on.
    AdjustOutputTokens(i64),
    /// Change prompt tokens by this factor step (×2 / ÷2) from the next request on.
    AdjustPromptTokens(i64),
    /// Double (+1) or halve (−1) the load from the next request on: the batch (candle engine),
    /// the requests in flight (server, closed loop) or the request rate (server, open loop).
    AdjustLoad(i64),
    /// A sweep: end the current cell (it has measured enough) and go on with the next.
    EndCell,
    /// A sweep that searches for the highest load meeting the SLO (`--find-max`): the
    /// consumer's verdict on cell `cell`, which the sweep engine waits for before it chooses
    /// the next load. Never forwarded to a cell's engine.
    CellVerdict {
        cell: usize,
        meets_slo: bool,
    },
    Stop(StopReason),
}
