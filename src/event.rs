//! The protocol: what every engine (and the telemetry thread) sends and every consumer (the run
//! fold, the dashboard, the recorder, the headless printer) reads. A leaf module: it names no
//! other module of the crate, so engines and consumers depend on it and never on each other.
//!
//! Data flows one way: producers send `Event`s over one channel, consumers `apply` them;
//! `Control` messages go back to the engine.

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

/// What the record keeps of the file: enough to know two runs replayed the same traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// The file's name (not its directory).
    pub file: String,
    /// The format read (`auto` resolved).
    pub format: String,
    pub bytes: u64,
    pub sha256: String,
    /// Rows read (kept), before any selection.
    pub rows: u64,
    /// Rows left out, by reason (`malformed`, `filtered out`, `no prompt`, `response tokens 0`,
    /// and at selection `too long for the model`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// Whether every row has a time (a trace that `--replay` can send at its timestamps).
    pub timed: bool,
    /// `--dataset-filter` as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// What a run's traffic is beyond made-up lengths: the dataset, the trace, conversations,
/// shared prefixes, and what can be said of the server's cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetInfo>,
    /// Requests (or conversations) the run sends, when bounded by the traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// `--replay`: the trace's span (seconds) and `--time-scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_span_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
    /// Tokens per hash id (`--block-size`), when rows have hash ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<usize>,
    /// Conversations and the turns sent of each (`all` or N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<String>,
    /// `--shared-prefix` as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<String>,
    /// Whether prompt lengths are counted exactly (a tokenizer) or estimated.
    #[serde(default)]
    pub exact_lengths: bool,
    /// What can be said of a prefix cache: `none` for the candle engine (it has none), else
    /// what the server reports per request (`cached_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
}

impl TrafficInfo {
    /// The traffic in one line: `dataset rows.jsonl (mooncake, 1,200 rows, sha256 1a2b3c4d…);
    /// replayed ×2; 3 rows skipped (malformed)`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(d) = &self.dataset {
            let sha: String = d.sha256.chars().take(12).collect();
            let mut s = format!(
                "dataset {} ({}, {} rows, sha256 {sha}…",
                d.file, d.format, d.rows
            );
            if let Some(f) = &d.filter {
                s.push_str(&format!(", filter {f}"));
            }
            s.push(')');
            parts.push(s);
            let skipped: Vec<String> = d.skipped.iter().map(|(r, n)| format!("{n} {r}")).collect();
            if !skipped.is_empty() {
                parts.push(format!("rows skipped: {}", skipped.join(", ")));
            }
        }
        if let Some(scale) = self.time_scale {
            parts.push(format!("replayed at its timestamps, time scale {scale}"));
        }
        if let Some(n) = self.conversations {
            let turns = self.turns.as_deref().unwrap_or("all");
            parts.push(format!("{n} conversations, turns {turns}"));
        }
        if let Some(sp) = &self.shared_prefix {
            parts.push(format!("shared prefix {sp}"));
        }
        parts.push(if self.exact_lengths {
            "lengths exact".to_string()
        } else {
            "lengths estimated (no tokenizer)".to_string()
        });
        if let Some(c) = &self.cache {
            parts.push(format!("cache: {c}"));
        }
        parts.join("; ")
    }

    /// What makes two runs' traffic different (the dataset's content, its filter, the shared
    /// prefix, the conversations' turns, the replay's scale), as `what: a → b` lines.
    pub fn differences(a: Option<&TrafficInfo>, b: Option<&TrafficInfo>) -> Vec<String> {
        let key = |t: Option<&TrafficInfo>| {
            let t = t.cloned().unwrap_or_default();
            [
                (
                    "dataset",
                    t.dataset.as_ref().map(|d| {
                        format!(
                            "{} (sha256 {})",
                            d.file,
                            d.sha256.chars().take(12).collect::<String>()
                        )
                    }),
                ),
                (
                    "dataset filter",
                    t.dataset.as_ref().and_then(|d| d.filter.clone()),
                ),
                ("shared prefix", t.shared_prefix.clone()),
                ("turns", t.turns.clone()),
                ("time scale", t.time_scale.map(|s| s.to_string())),
            ]
        };
        key(a)
            .into_iter()
            .zip(key(b))
            .filter(|((_, x), (_, y))| x != y)
            .map(|((what, x), (_, y))| {
                let show = |v: Option<String>| v.unwrap_or_else(|| "none".into());
                format!("{what}: {} → {}", show(x), show(y))
            })
            .collect()
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
}

/// One finished request: the unit every statistic and every record line is built from.
/// `Default` is for tests and benches that build one by hand (`..Default::default()`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestDone {
    /// 0-based index since the run started (not reset by `r`).
    pub index: u64,
    pub warmup: bool,
    pub batch: usize,
    pub prompt_tokens: usize,
    /// Generated tokens per sequence (G).
    pub output_tokens: usize,
    /// Prefill + first sampling, ending with a device synchronize.
    pub ttft_s: f64,
    /// (E2E − TTFT) / (G − 1); `None` when G < 2.
    pub tpot_s: Option<f64>,
    pub e2e_s: f64,
    /// GPU time of the prefill from CUDA events (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_ttft_s: Option<f64>,
    /// Sum of GPU time of the decode steps from CUDA events (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_decode_s: Option<f64>,
    /// Peak allocator bytes during the request (CPU: counting allocator; CUDA: used device memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_alloc_bytes: Option<u64>,
    /// FNV-1a 64 of what was generated, as 16 hex digits, so a changed output is noticed
    /// (`compare`). The candle engine hashes the generated ids of every sequence (each step's
    /// ids for the whole batch, in order, as little-endian u32); the http engine hashes the
    /// streamed text (UTF-8), all it sees. Hashes from the two engines never match each other.
    pub output_hash: String,
    /// Generated ids of the first sequence (`--record-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<u32>>,
    /// Decoded text of the first sequence (`--record-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// What only a client of a server knows (the http engine); `None` for in-process engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Box<ClientDetail>>,
    /// Where the request came from (a dataset's row, a conversation's turn, a shared-prefix
    /// group); `None` for made-up traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Box<Origin>>,
}

/// Where a request came from, so any statistic can be split by it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// The dataset row's line in its file (1-based; the position in a JSON array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<u32>,
    /// The conversation (0-based, in the order they started) and the turn in it (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The shared-prefix group (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// The row's time in the trace (seconds from its start), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
}

/// A request measured by a client of a serving endpoint: where it went, how late it was sent,
/// and where its token counts came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientDetail {
    /// The endpoint's base URL (credentials stripped).
    pub endpoint: String,
    /// Open loop: scheduled send time → actual send; TTFT and E2E count from the scheduled
    /// time, so a saturated client cannot hide queueing. Closed loop: the scheduler's launch →
    /// the actual send (the client's own queueing); TTFT and E2E count from the send's start.
    pub send_delay_s: f64,
    /// `usage` (the server's usage chunk) or `counted` (chunks carrying text).
    pub output_tokens_from: String,
    /// `usage` (server-reported) or `approx` (the prompt was built to roughly this many tokens).
    pub prompt_tokens_from: String,
    /// The prompt length asked for (approximate without the server's tokenizer).
    pub requested_prompt_tokens: usize,
    /// SSE chunks that carried generated text; `output_tokens / content_chunks` > 1 means
    /// chunks of several tokens (speculative decoding, server-side batching of the stream).
    pub content_chunks: usize,
    /// Tokens per content chunk, in order, when a chunk carried more than one by the server's
    /// running usage (`--chunk-usage`; speculative decoding); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_tokens: Vec<u32>,
    /// The server's `finish_reason` (`length`, `stop`, ...), when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Prompt tokens the server said it had cached (`usage.prompt_tokens_details.cached_tokens`,
    /// as vLLM, SGLang and OpenAI report it); `None` when it did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<usize>,
    /// Where the time before the first token went on the request's connection; absent in
    /// records written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpPhases>,
    /// Time to second token: from the first content chunk to the second (AIPerf's TTST), so a
    /// slow first decode step is told apart from a slow prefill; absent with one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttst_s: Option<f64>,
}

/// How a request got its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionUse {
    /// Opened for this request while it was timed: the connect is inside its TTFT, as it was.
    New,
    /// Kept alive after an earlier request.
    Reused,
    /// Opened before the run's first timed request (`--preconnect`); this request was its first.
    Preopened,
    /// Written by a newer version.
    #[serde(other)]
    Other,
}

impl ConnectionUse {
    pub fn name(self) -> &'static str {
        match self {
            ConnectionUse::New => "new",
            ConnectionUse::Reused => "reused",
            ConnectionUse::Preopened => "preopened",
            ConnectionUse::Other => "other",
        }
    }
}

/// A request's HTTP phases (k6's and AIPerf's names). The opening's steps are durations, of the
/// connection's opening (for `new` and `preopened` connections: a preopened one's is not in the
/// request's time); the rest are instants in seconds since the request's start (its scheduled
/// time, the origin of its TTFT), so `connected_s ≤ sent_s ≤ first_byte_s ≤ ttft_s`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpPhases {
    pub connection: ConnectionUse,
    /// The name lookup (absent for an IP address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_s: Option<f64>,
    /// The TCP handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_s: Option<f64>,
    /// The TLS handshake (https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_s: Option<f64>,
    /// The connection was ready for the request (a new one: opened).
    pub connected_s: f64,
    /// The request's last bytes went to the socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_s: Option<f64>,
    /// The response's first byte came back (time to first byte).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_s: Option<f64>,
}

/// A request that did not complete: never a latency sample, always counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestFailed {
    pub index: u64,
    pub warmup: bool,
    /// One line: `connection refused`, `HTTP 500: <excerpt>`, `timed out after 5s`, ...
    pub reason: String,
    /// The HTTP status, when the server answered with an error status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// From the (scheduled) send to the failure.
    pub elapsed_s: f64,
}

impl Event {
    /// One decode step as an event of its own.
    pub fn decode_step(index: u64, step: u32, itl_s: f64, gpu_s: Option<f64>) -> Event {
        Event::DecodeSteps(vec![DecodeStep::new(index, step, itl_s, gpu_s)])
    }
}

impl RequestDone {
    /// Prefill throughput: B·P / TTFT.
    pub fn prefill_tok_s(&self) -> f64 {
        (self.batch * self.prompt_tokens) as f64 / self.ttft_s
    }

    /// Decode throughput of the request: B / TPOT.
    pub fn decode_tok_s(&self) -> Option<f64> {
        self.tpot_s.map(|t| self.batch as f64 / t)
    }
}

/// One decode step (one token per sequence) of request `index`; `step` counts from 1 (the
/// token after the first).
///
/// 32 bytes: at 100,000 steps a second the dashboard reads every step once from memory the
/// engine's thread wrote, and an `Option<f64>` for the GPU time made it 40. The GPU time is
/// kept as bits, with `NO_GPU` (a NaN no timer gives) for none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeStep {
    pub index: u64,
    pub itl_s: f64,
    gpu_bits: u64,
    pub step: u32,
}

/// `DecodeStep::gpu_bits` when the step has no GPU time.
const NO_GPU: u64 = u64::MAX;

impl DecodeStep {
    /// A step with its wall-clock ITL and, where a device timer measured it, its GPU time (a
    /// NaN GPU time is none).
    pub fn new(index: u64, step: u32, itl_s: f64, gpu_s: Option<f64>) -> DecodeStep {
        DecodeStep {
            index,
            itl_s,
            gpu_bits: gpu_s.filter(|g| !g.is_nan()).map_or(NO_GPU, f64::to_bits),
            step,
        }
    }

    /// The step's GPU time, when a device timer measured it.
    pub fn gpu_s(&self) -> Option<f64> {
        (self.gpu_bits != NO_GPU).then(|| f64::from_bits(self.gpu_bits))
    }
}

/// How long an engine holds decode steps before it sends them as one event: a fast engine
/// (a small model on a GPU, a server at high concurrency) hands the consumers one event a
/// millisecond instead of one per token, and the dashboard still sees every step well inside
/// a frame.
pub const STEP_BATCH: std::time::Duration = std::time::Duration::from_millis(1);

/// Decode steps on their way into the channel. A step goes out at once when the last send
/// was `STEP_BATCH` ago or more, else it waits for the next step that is, for `flush`, or
/// for the next other event: a producer flushes before any other event it sends, so the
/// channel keeps every event in the order it happened (a request's steps before its
/// `RequestDone`).
#[derive(Debug)]
pub struct StepBatch {
    steps: Vec<DecodeStep>,
    /// The last send; none yet sends the first step at once.
    sent: Option<std::time::Instant>,
}

impl Default for StepBatch {
    fn default() -> Self {
        StepBatch::new()
    }
}

impl StepBatch {
    pub fn new() -> StepBatch {
        StepBatch {
            steps: Vec::new(),
            sent: None,
        }
    }

    /// Holds `step`, and sends what is held if the last send was `STEP_BATCH` ago or more.
    pub fn push(&mut self, step: DecodeStep, tx: &crossbeam_channel::Sender<Event>) {
        self.push_at(step, std::time::Instant::now(), tx);
    }

    /// `push` at `now`.
    pub fn push_at(
        &mut self,
        step: DecodeStep,
        now: std::time::Instant,
        tx: &crossbeam_channel::Sender<Event>,
    ) {
        if self.steps.capacity() == 0 {
            // Taken when a step comes rather than at each send, so a batch that ends (the
            // request's last flush) does not take a list from the pool only to drop it.
            self.steps = spare_steps();
        }
        self.steps.push(step);
        if self
            .sent
            .is_none_or(|t| now.saturating_duration_since(t) >= STEP_BATCH)
        {
            self.send(now, tx);
        }
    }

    /// Sends the steps held, if any.
    pub fn flush(&mut self, tx: &crossbeam_channel::Sender<Event>) {
        if !self.steps.is_empty() {
            self.send(std::time::Instant::now(), tx);
        }
    }

    fn send(&mut self, now: std::time::Instant, tx: &crossbeam_channel::Sender<Event>) {
        let _ = tx.send(Event::DecodeSteps(std::mem::take(&mut self.steps)));
        self.sent = Some(now);
    }

    /// Whether steps are held.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// Emptied step lists for new batches, bounded by their room: `SPARE_ROOM` steps in all
/// (2 MB). Never waits: whichever side finds it held goes without (a new list, or a free).
struct StepPool {
    spare: std::sync::Mutex<Spare>,
}

struct Spare {
    lists: Vec<Vec<DecodeStep>>,
    /// The lists' capacities, summed.
    room: usize,
}

const SPARE_ROOM: usize = 65_536;

impl StepPool {
    const fn new() -> StepPool {
        StepPool {
            spare: std::sync::Mutex::new(Spare {
                lists: Vec::new(),
                room: 0,
            }),
        }
    }

    /// A list given back, or a new one.
    fn take(&self) -> Vec<DecodeStep> {
        let Ok(mut spare) = self.spare.try_lock() else {
            return Vec::new();
        };
        let list = spare.lists.pop().unwrap_or_default();
        spare.room -= list.capacity();
        list
    }

    /// Keeps `event`'s step list, emptied, when there is room; drops anything else.
    fn give(&self, event: Event) {
        let Event::DecodeSteps(mut steps) = event else {
            return;
        };
        if steps.capacity() == 0 {
            return;
        }
        if let Ok(mut spare) = self.spare.try_lock() {
            if spare.room + steps.capacity() <= SPARE_ROOM {
                steps.clear();
                spare.room += steps.capacity();
                spare.lists.push(steps);
            }
        }
    }
}

/// Step lists the dashboard has folded in, for the engines' next batches: at 100,000 steps a
/// second a list is allocated on the engine's thread and freed on the dashboard's about a
/// thousand times a second, and a free of another thread's block takes that thread's arena
/// in the system allocator, the one the engine allocates its tensors from. The dashboard
/// takes a frame's batches at once (a hundred at 10 fps), hence room for that many. Only the
/// dashboard gives lists back (`recycle`); with no dashboard the pool stays empty and a batch
/// starts with a new list, as it did before.
static STEP_POOL: StepPool = StepPool::new();

/// An empty step list for a new batch: one the dashboard gave back, or a new one.
pub fn spare_steps() -> Vec<DecodeStep> {
    STEP_POOL.take()
}

/// Takes back an event a consumer is done with: a decode-step list goes to the pool for the
/// next batch (`spare_steps`) when there is room, anything else is dropped.
pub fn recycle(event: Event) {
    STEP_POOL.give(event);
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
    RequestDone(Box<RequestDone>),
    /// A request that failed (a server engine's fault, a cut stream, a timeout): counted, never
    /// a latency sample. Its decode steps, if any, went out as they arrived; the statistics
    /// leave them out.
    RequestFailed(Box<RequestFailed>),
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

/// Percentiles of one histogram over a window, and how many observations it had.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerQuantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub n: u64,
}

/// What a server did between two scrapes of its Prometheus metrics (`watch`,
/// `--server-metrics`), as `scrape::window` computes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerWindow {
    pub seconds: f64,
    /// vllm, sglang, tgi, llama.cpp or unknown.
    pub server: String,
    /// How many servers' metrics the window adds up (replicas with `--server-metrics` each).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub sources: usize,
    /// Requests finished per second (the E2E histogram's count).
    pub requests_per_s: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache usage, 0 to 1.
    pub kv_usage: Option<f64>,
    pub preemptions: Option<f64>,
    /// Prefix-cache hit rate, 0 to 1.
    pub prefix_hit_rate: Option<f64>,
    pub ttft_s: Option<ServerQuantiles>,
    pub itl_s: Option<ServerQuantiles>,
    pub e2e_s: Option<ServerQuantiles>,
    /// The window's bucket deltas, trimmed to those that decide a quantile, so that windows
    /// add up to a whole run's percentiles (`stats::ServerSpan`).
    #[serde(default, skip_serializing_if = "ServerHistograms::is_empty")]
    pub histograms: ServerHistograms,
    /// The node this window is of (its metrics URL's `host:port`) when several are watched;
    /// absent for their total, and for a single server's windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A data-parallel server's engines, each its own window (vLLM's `engine` label), when
    /// the server has more than one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub engines: std::collections::BTreeMap<String, ServerWindow>,
    /// The other signals, where the server exports them (boxed: most windows' are small
    /// beside them).
    #[serde(default, skip_serializing_if = "no_signals")]
    pub signals: Box<ServerSignals>,
}

#[allow(clippy::borrowed_box)] // serde hands the field as it is
fn no_signals(s: &Box<ServerSignals>) -> bool {
    s.is_empty()
}

impl Default for ServerWindow {
    fn default() -> ServerWindow {
        ServerWindow {
            seconds: 0.0,
            server: String::new(),
            sources: 1,
            requests_per_s: None,
            running: None,
            waiting: None,
            kv_usage: None,
            preemptions: None,
            prefix_hit_rate: None,
            ttft_s: None,
            itl_s: None,
            e2e_s: None,
            histograms: ServerHistograms::default(),
            source: None,
            engines: Default::default(),
            signals: Box::default(),
        }
    }
}

/// What else a server says about a window, each where it exports it: token throughput, the
/// phases of a request (queue, prefill, decode), request lengths, speculative decoding,
/// how requests finished, the HTTP responses, and vLLM's MFU counters
/// (`--enable-mfu-metrics`). Counts are the window's; rates are per second of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSignals {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_tokens_per_s: Option<f64>,
    /// Time waiting to be scheduled, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_s: Option<ServerQuantiles>,
    /// Time in prefill, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_s: Option<ServerQuantiles>,
    /// Time in decode, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_s: Option<ServerQuantiles>,
    /// Prompt tokens per request (a length, not a time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_len: Option<ServerQuantiles>,
    /// Generated tokens per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_len: Option<ServerQuantiles>,
    /// Speculative decoding: draft tokens proposed, and accepted, in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_draft_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_accepted_tokens: Option<f64>,
    /// Drafts (verification steps) in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_drafts: Option<f64>,
    /// Tokens per verification step: 1 + accepted / drafts (vLLM), or SGLang's own gauge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_accept_length: Option<f64>,
    /// Requests that finished in the window, by reason (`stop`, `length`, `abort`, ...).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub finished: std::collections::BTreeMap<String, f64>,
    /// HTTP responses in the window by status (`2xx`, `4xx`, `5xx` as the server groups
    /// them), its own `/metrics` (our scrapes) left out.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub http: std::collections::BTreeMap<String, f64>,
    /// Prefix-cache tokens queried in the window (what its hit rate is a share of).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_queries: Option<f64>,
    /// vLLM's estimated FLOP/s per GPU (`--enable-mfu-metrics`; the mean over its engines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_gpu: Option<f64>,
    /// vLLM's estimated memory traffic (read + write) per GPU, bytes per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_bytes_per_gpu: Option<f64>,
    /// The window's bucket deltas of the histograms above (trimmed, as `histograms`).
    #[serde(skip_serializing_if = "SignalHistograms::is_empty")]
    pub histograms: SignalHistograms,
}

impl ServerSignals {
    pub fn is_empty(&self) -> bool {
        *self == ServerSignals::default()
    }

    /// Accepted draft tokens as a share of those proposed.
    pub fn spec_accept_rate(&self) -> Option<f64> {
        match (self.spec_accepted_tokens, self.spec_draft_tokens) {
            (Some(a), Some(d)) if d > 0.0 => Some(a / d),
            _ => None,
        }
    }
}

/// Bucket deltas of the request-phase and length histograms (`ServerSignals`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SignalHistograms {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queue: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prefill: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decode: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompt_len: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub generation_len: Vec<(f64, f64)>,
}

impl SignalHistograms {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
            && self.prefill.is_empty()
            && self.decode.is_empty()
            && self.prompt_len.is_empty()
            && self.generation_len.is_empty()
    }
}

/// One node's GPU and host figures, read from the exporters it already runs (DCGM, nvitop's
/// exporter, node_exporter, `infertop agent`) at one scrape. Rates (CPU busy, InfiniBand) are
/// over `seconds`, since the scrape before.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeTelemetry {
    pub seconds: f64,
    /// Which exporters the figures came from: `dcgm`, `nvitop`, `node`, `infertop`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exporters: Vec<String>,
    /// Per GPU, in the exporter's order of its index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuFigures>,
    #[serde(skip_serializing_if = "HostFigures::is_empty")]
    pub host: HostFigures,
}

/// One GPU as an exporter reports it. Every field is where the exporter has it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuFigures {
    /// The exporter's GPU index (`gpu`, `index`).
    pub gpu: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Percent of time a kernel ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
    /// Percent of time the memory was read or written (DCGM's MEM_COPY_UTIL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_util_pct: Option<f64>,
    /// Share of cycles the memory interface was busy, 0 to 1 (DCGM's PROF_DRAM_ACTIVE: the
    /// memory bandwidth used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_active: Option<f64>,
    /// Share of cycles the tensor pipes were busy, 0 to 1 (DCGM's PROF_PIPE_TENSOR_ACTIVE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_active: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
}

/// A node's host figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostFigures {
    /// Percent of all CPUs' time busy (not idle or waiting on I/O).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<f64>,
    /// The 1-minute load average.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load1: Option<f64>,
    /// InfiniBand bytes per second over every port (node_exporter's infiniband collector).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ib_rx_bytes_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ib_tx_bytes_per_s: Option<f64>,
}

impl HostFigures {
    pub fn is_empty(&self) -> bool {
        *self == HostFigures::default()
    }
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// A window's histogram deltas as cumulative `(upper bound, count)` buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerHistograms {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft: Vec<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl: Vec<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e2e: Vec<(f64, f64)>,
}

impl ServerHistograms {
    pub fn is_empty(&self) -> bool {
        self.ttft.is_empty() && self.itl.is_empty() && self.e2e.is_empty()
    }
}

/// A length of a sweep cell's workload: a number of tokens, or as written (a range such as
/// `64..512`, or `text`: each prompt's own length). Fixed lengths are numbers in JSON; records
/// written before that said `"16"`, which reads as the number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellLen {
    Tokens(usize),
    Written(String),
}

impl Default for CellLen {
    fn default() -> Self {
        CellLen::Tokens(1)
    }
}

impl From<&str> for CellLen {
    fn from(s: &str) -> CellLen {
        match s.trim().parse::<usize>() {
            Ok(n) => CellLen::Tokens(n),
            Err(_) => CellLen::Written(s.to_string()),
        }
    }
}

impl std::fmt::Display for CellLen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellLen::Tokens(n) => write!(f, "{n}"),
            CellLen::Written(s) => f.write_str(s),
        }
    }
}

impl Serialize for CellLen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CellLen::Tokens(n) => s.serialize_u64(*n as u64),
            CellLen::Written(w) => s.serialize_str(w),
        }
    }
}

impl<'de> Deserialize<'de> for CellLen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CellLen, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::N(n) => CellLen::Tokens(usize::try_from(n).map_err(serde::de::Error::custom)?),
            Raw::S(s) => CellLen::from(s.as_str()),
        })
    }
}

/// One cell of a sweep: the workload it runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CellParams {
    pub batch: usize,
    pub prompt_tokens: CellLen,
    pub output_tokens: CellLen,
    /// Server sweeps: requests in flight (closed loop) or the cap of an open loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Server sweeps: open-loop requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Candle sweeps over several models: the model as given (only when the grid has more
    /// than one; the title names a single one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Candle sweeps over several dtypes (only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Candle sweeps over several CPU thread counts (only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

impl CellParams {
    /// `prompt 512, output 32`: the workload without the load.
    pub fn workload_words(&self) -> String {
        format!(
            "prompt {}, output {}",
            self.prompt_tokens, self.output_tokens
        )
    }

    /// The load parts that are set, each as `batch 4`, `concurrency 8`, `rate 2/s`; the batch
    /// only when it is not 1 unless `always_batch`.
    pub fn load_words(&self, always_batch: bool) -> Vec<String> {
        let mut parts = Vec::new();
        if always_batch || self.batch != 1 {
            parts.push(format!("batch {}", self.batch));
        }
        if let Some(c) = self.concurrency {
            parts.push(format!("concurrency {c}"));
        }
        if let Some(r) = self.rate {
            parts.push(format!("rate {r}/s"));
        }
        parts
    }

    /// The model, dtype and threads parts that are set: `tiny f16, 4 threads`.
    pub fn build_words(&self) -> Option<String> {
        let mut parts = Vec::new();
        let what: Vec<&str> = [self.model.as_deref(), self.dtype.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        if !what.is_empty() {
            parts.push(what.join(" "));
        }
        if let Some(t) = self.threads {
            parts.push(format!("{t} thread{}", if t == 1 { "" } else { "s" }));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// `batch 4, prompt 512, output 32` (and concurrency / rate when set, and the model,
    /// dtype and threads first when the grid varies them): the cell in words, as progress
    /// lines, the grid and comparisons name it.
    pub fn words(&self) -> String {
        let mut parts: Vec<String> = self.build_words().into_iter().collect();
        parts.push(format!("batch {}", self.batch));
        parts.push(self.workload_words());
        parts.extend(
            self.load_words(false)
                .into_iter()
                .filter(|p| !p.starts_with("batch")),
        );
        parts.join(", ")
    }
}

/// A sweep's cell begins (the sweep engine sends it before the cell's engine starts; the cell
/// ends with that engine's `Finished`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellStart {
    /// 0-based, of `cells`.
    pub cell: usize,
    pub cells: usize,
    pub params: CellParams,
}

/// Messages into the engine: what the dashboard's keys (and a sweep's stopping rule) ask for.
/// Every engine gives them the same meaning: the load keys change the workload of the next
/// requests, never one in flight (`engine::workload::LenSpec::plus`, `doubled`), and the
/// engine echoes every change it makes as an event, so each consumer sees it at the same point
/// of the stream.
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

impl Control {
    /// The stop this message asks of an engine: `Stop`, or `EndCell` (the sweep's cell has
    /// measured enough, which for the cell's engine is its request limit).
    pub fn stop(&self) -> Option<StopReason> {
        match self {
            Control::Stop(r) => Some(r.clone()),
            Control::EndCell => Some(StopReason::RequestLimit),
            _ => None,
        }
    }
}

/// One telemetry sample. Every field is optional: a source that is unavailable leaves it `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// Process resident set size.
    pub rss_bytes: Option<u64>,
    /// Peak resident set size (VmHWM).
    pub rss_peak_bytes: Option<u64>,
    /// Allocator: bytes currently allocated (CPU counting allocator or CUDA used memory).
    pub alloc_bytes: Option<u64>,
    /// Allocator: peak since the current request started.
    pub alloc_peak_bytes: Option<u64>,
    /// Device memory used / total (NVML or CUDA context).
    pub device_used_bytes: Option<u64>,
    pub device_total_bytes: Option<u64>,
    /// This process's device memory (NVML running compute processes).
    pub process_device_bytes: Option<u64>,
    pub gpu_util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub temperature_c: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    /// Clock throttle / event reasons, e.g. "power cap", "thermal".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle: Vec<String>,
    /// Total energy since the driver loaded, in joules.
    pub energy_j: Option<f64>,
    /// Processes holding memory on the device in use, most first (NVML): another job on the
    /// same GPU shows here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_processes: Vec<GpuProcess>,
    /// Why NVML is not there, once, e.g. "NVML unavailable: libnvidia-ml.so not found".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_unavailable: Option<String>,
}

/// One process on the GPU, as NVML lists it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// The process's name (`/proc/PID/comm`), or `?` where it cannot be read.
    pub name: String,
    /// Device memory it holds (`None` where NVML does not say, e.g. under MIG).
    pub bytes: Option<u64>,
}

/// What every view knows about the model under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Display name: the directory or file name, or `synthetic:tiny`.
    pub name: String,
    /// The architecture as `model::Arch::name` spells it (`llama`, `mistral`, `qwen2`, `qwen3`,
    /// `phi3`, `mixtral`, `qwen3_moe`, `gemma2`, `gemma3`), or `served` for a model behind a
    /// server (see [`Self::served`]).
    pub arch: String,
    /// `hf`, `gguf` or `synthetic`.
    pub source: String,
    pub params: u64,
    /// Parameters one token runs through: `params` for dense models, less the experts a MoE
    /// router skips. Records written before this field read it as 0: see [`Self::active`].
    #[serde(default)]
    pub active_params: u64,
    /// Bytes of weights as held on the device.
    pub weight_bytes: u64,
    /// KV-cache bytes per token per sequence: 2 × layers × kv heads × head dim × dtype bytes.
    /// Layers in `kv_window` stop growing at their window (see [`Self::kv_bytes_at`]).
    pub kv_bytes_per_token: u64,
    /// Layers whose KV cache keeps only the last `window` positions (Gemma's sliding layers).
    /// Absent (older records, other models): every layer grows with the context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_window: Option<KvWindow>,
    /// `f32`, `f16`, `bf16`, or the GGUF quantization such as `q8_0`.
    pub dtype: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    pub max_positions: usize,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
}

/// Of a model's layers, how many keep only a window of positions in their KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWindow {
    pub sliding_layers: usize,
    pub window: usize,
}

impl ModelInfo {
    /// A model behind a server: its name and where it is served; the shape is not known to
    /// the client, so the sizes are 0 and the dtype `?`.
    pub fn served(name: &str, device: &str) -> ModelInfo {
        ModelInfo {
            name: name.to_string(),
            arch: "served".into(),
            source: "http".into(),
            params: 0,
            active_params: 0,
            weight_bytes: 0,
            kv_bytes_per_token: 0,
            kv_window: None,
            dtype: "?".into(),
            device: device.to_string(),
            max_positions: 0,
            layers: 0,
            hidden: 0,
            heads: 0,
            kv_heads: 0,
            head_dim: 0,
            vocab: 0,
        }
    }

    /// Parameters one token runs through (`params` where the record does not say).
    pub fn active(&self) -> u64 {
        if self.active_params == 0 {
            self.params
        } else {
            self.active_params
        }
    }

    /// Whether only part of the weights run per token (a mixture of experts).
    pub fn is_sparse(&self) -> bool {
        self.active() < self.params
    }

    /// Bytes of weights one token reads: `weight_bytes` scaled by active / total parameters
    /// (all of them for a dense model).
    pub fn active_weight_bytes(&self) -> u64 {
        if self.params == 0 || !self.is_sparse() {
            return self.weight_bytes;
        }
        (self.weight_bytes as u128 * self.active() as u128 / self.params as u128) as u64
    }

    /// KV-cache bytes of one sequence at `context` positions: the full layers hold every
    /// position, the sliding ones at most their window.
    pub fn kv_bytes_at(&self, context: f64) -> f64 {
        self.kv_bytes_per_token as f64 * self.kv_layers_at(|w| context.min(w))
    }

    /// KV-cache bytes one decode step of a request reads per sequence, averaged over its steps
    /// (context from `prompt` to `prompt + output`, continuously): `P + G/2` positions on full
    /// layers, the mean of `min(context, window)` on sliding ones.
    pub fn decode_kv_bytes(&self, prompt: usize, output: usize) -> f64 {
        let (p, g) = (prompt as f64, output as f64);
        let mean_min = |w: f64| {
            if g <= 0.0 || p + g <= w {
                (p + g / 2.0).min(w)
            } else if p >= w {
                w
            } else {
                // ∫ from p to p + g of min(c, w) dc, over g.
                ((w * w - p * p) / 2.0 + w * (p + g - w)) / g
            }
        };
        self.kv_bytes_per_token as f64 * self.kv_layers_at(mean_min)
    }

    /// Positions held per layer, on average over the layers: `held(window)` on sliding layers,
    /// `held(∞)` (the whole context) on full ones.
    fn kv_layers_at(&self, held: impl Fn(f64) -> f64) -> f64 {
        match self.kv_window {
            Some(w) if self.layers > 0 && w.sliding_layers <= self.layers => {
                let full = (self.layers - w.sliding_layers) as f64 * held(f64::INFINITY);
                (full + w.sliding_layers as f64 * held(w.window as f64)) / self.layers as f64
            }
            _ => held(f64::INFINITY),
        }
    }

    /// Expected KV-cache bytes for `tokens` positions of `batch` sequences.
    pub fn expected_kv_bytes(&self, tokens: usize, batch: usize) -> u64 {
        (self.kv_bytes_at(tokens as f64) * batch as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn step(step: u32) -> DecodeStep {
        DecodeStep::new(7, step, 0.0004, None)
    }

    /// Takes lists out of `pool` until it gives a new one (no capacity); their capacities.
    fn take_spares(pool: &StepPool) -> Vec<usize> {
        std::iter::repeat_with(|| pool.take())
            .inspect(|l| assert!(l.is_empty(), "a spare list holds steps"))
            .map(|l| l.capacity())
            .take_while(|&c| c > 0)
            .take(10_000)
            .collect()
    }

    /// A step list given back comes out empty with its room for the next batch; the pool
    /// keeps `SPARE_ROOM` steps of room at most, however many are given back, and drops
    /// anything but a step list.
    #[test]
    fn step_lists_given_back_are_reused_and_bounded() {
        let pool = StepPool::new();
        assert!(take_spares(&pool).is_empty());
        let mut list = Vec::with_capacity(333);
        list.extend((1..=200).map(step));
        pool.give(Event::DecodeSteps(list));
        pool.give(Event::Paused);
        pool.give(Event::DecodeSteps(Vec::new()));
        assert_eq!(take_spares(&pool), [333]);
        for _ in 0..500 {
            pool.give(Event::DecodeSteps(Vec::with_capacity(1000)));
        }
        let kept = take_spares(&pool);
        assert_eq!(kept.len(), SPARE_ROOM / 1000);
        // Taken out, the room is free again.
        pool.give(Event::DecodeSteps(Vec::with_capacity(SPARE_ROOM)));
        assert_eq!(take_spares(&pool), [SPARE_ROOM]);
    }

    /// A step is 32 bytes, and keeps its GPU time, or the lack of one, exactly.
    #[test]
    fn a_step_is_small_and_keeps_its_gpu_time() {
        assert_eq!(std::mem::size_of::<DecodeStep>(), 32);
        for gpu in [None, Some(0.0), Some(-0.0), Some(1.25e-4), Some(f64::MAX)] {
            let s = DecodeStep::new(3, 9, 0.002, gpu);
            assert_eq!(s.gpu_s().map(f64::to_bits), gpu.map(f64::to_bits));
            assert_eq!((s.index, s.step, s.itl_s), (3, 9, 0.002));
        }
        assert_eq!(DecodeStep::new(3, 9, 0.002, Some(f64::NAN)).gpu_s(), None);
        assert_ne!(step(1), DecodeStep::new(7, 1, 0.0004, Some(0.0003)));
    }

    fn sent(rx: &crossbeam_channel::Receiver<Event>) -> Vec<Vec<u32>> {
        rx.try_iter()
            .map(|e| match e {
                Event::DecodeSteps(s) => s.iter().map(|s| s.step).collect(),
                other => panic!("not steps: {other:?}"),
            })
            .collect()
    }

    /// The first step goes at once; steps within `STEP_BATCH` of the last send wait for the
    /// first step past it, which takes them along; `flush` sends the rest, and nothing when
    /// nothing is held.
    #[test]
    fn steps_faster_than_the_batch_go_out_together() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut batch = StepBatch::new();
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        batch.push_at(step(1), at(0), &tx);
        batch.push_at(step(2), at(400), &tx);
        batch.push_at(step(3), at(800), &tx);
        assert_eq!(sent(&rx), [vec![1]]);
        batch.push_at(step(4), at(1200), &tx);
        assert_eq!(sent(&rx), [vec![2, 3, 4]]);
        // Slower than the batch: every step goes alone.
        batch.push_at(step(5), at(2300), &tx);
        batch.push_at(step(6), at(3400), &tx);
        assert_eq!(sent(&rx), [vec![5], vec![6]]);
        batch.push_at(step(7), at(3500), &tx);
        assert!(!batch.is_empty());
        batch.flush(&tx);
        batch.flush(&tx);
        assert_eq!(sent(&rx), [vec![7]]);
        assert!(batch.is_empty());
    }
}
