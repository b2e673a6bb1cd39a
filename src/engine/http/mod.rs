//! The http engine (`--endpoint URL`): a client of OpenAI-compatible streaming servers that
//! speaks the same protocol as the candle engine, so the run fold, the dashboard, the headless
//! lines and the record work unchanged.
//!
//! The engine thread runs a multi-threaded tokio runtime (2 to 4 workers, see `spawn`): on the
//! engine thread a scheduler launches requests (closed loop: `--concurrency N` in flight; open
//! loop: Poisson arrivals at `--rate R`, seeded), each a task on the workers that times its own
//! stream (see `request`), so one busy thread does not make every chunk's timestamp late. Events
//! go out live as chunks arrive: the TTFT with the first content chunk, each decode step with
//! its chunk; the request's result when its stream ends. The run fold keeps a request's steps
//! aside until then and counts them only if it completes, so a failed request never leaves
//! latency samples behind.
//!
//! A run is the server found out (`discover`: the model's name and the longest prompt it
//! takes, prompts from its own tokenizer, its prefix cache emptied), its first connections
//! opened (`preconnect`), then one loop on the one scheduler (`schedule`): single requests
//! (`completions`) or conversations turn by turn (`conversation`). What is sent, how much and
//! which requests are warmup is the run's `TrafficPlan`, shared with the candle engine; what a
//! control message means is `engine::control`'s.

pub mod api;
pub mod cache;
pub mod canary;
pub mod cancel;
pub mod clock;
mod completions;
pub mod conn;
mod conversation;
mod events;
pub mod extra;
mod outcome;
pub mod parts;
pub mod probe;
mod reading;
pub mod request;
mod schedule;
pub mod sse;
mod timings;
pub mod tokenize;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use tokio::task::JoinSet;

use crate::engine::control::Inbox;
use crate::event::{
    ApiPicked, ClientDetail, Control, DecodeStep, Event, ModelInfo, Notice, Origin, RequestDone,
    RunInfo, StopReason, TrafficInfo, WorkloadDesc,
};
use crate::traffic::dataset::Role;
use crate::traffic::len::{doubled, doubling_factor};
use crate::traffic::words::PromptWords;
use crate::traffic::{Prompt, RequestSource, ThinkTime, TrafficPlan};
use crate::util::fnv1a;
pub use api::{Api, Message, ToolCall, ToolChoice, Tools};
use completions::Launched;
use events::Events;
use outcome::{Measured, Token};
pub use request::Endpoint;
use schedule::MAX_CONCURRENCY;
pub use schedule::{open_loop_due_s, GIVE_UP_AFTER_FAILURES};

/// The engine thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const HTTP_THREAD: &str = "infertop-engine-http";

/// Where a request's prompt text comes from.
#[derive(Clone, Debug, Default)]
pub enum Prompts {
    /// Made-up text of about `prompt` tokens; the server's usage chunk says how long it was.
    #[default]
    Approximate,
    /// Made of the server's one-token words (from `--tokenizer`): exactly `prompt` tokens.
    Words(Arc<PromptWords>),
    /// Given texts (`--prompt`, `--prompt-file`), cycled per request.
    Texts(Arc<Vec<PromptText>>),
    /// `--tokenizer server`: the server's own `/tokenize` makes prompts of exact length (or
    /// counts the given texts) when the run starts; then `Words` or `Texts`.
    Server { texts: Option<Arc<Vec<String>>> },
}

/// A given prompt and how many tokens it is, as far as the client knows.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptText {
    pub text: String,
    pub tokens: usize,
    /// Counted with the server's tokenizer (`--tokenizer`), not estimated.
    pub exact: bool,
}

impl PromptText {
    /// A prompt counted with `tokenizer` when there is one, else estimated (about four
    /// characters a token, as BPE vocabularies of English text average).
    pub fn new(text: String, tokenizer: Option<&tokenizers::Tokenizer>) -> PromptText {
        let counted = tokenizer
            .and_then(|tk| tk.encode(text.as_str(), false).ok())
            .map(|e| e.get_ids().len());
        PromptText {
            tokens: counted.unwrap_or_else(|| text.chars().count().div_ceil(4).max(1)),
            exact: counted.is_some(),
            text,
        }
    }
}

/// Everything the engine needs, planned from the flags (`plan::engine`).
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Requests go round-robin over these.
    pub endpoints: Vec<Endpoint>,
    pub api: Api,
    /// `None`: the first id of the first endpoint's `GET /v1/models`.
    pub served_model: Option<String>,
    /// Sent as a bearer token; never written anywhere.
    pub api_key: Option<String>,
    /// What is sent, how much of it, and which requests are warmup.
    pub traffic: TrafficPlan,
    /// What made-up and given prompts are made of.
    pub prompts: Prompts,
    /// Closed loop: requests in flight (default 1). With a rate: the cap (default none).
    pub concurrency: Option<usize>,
    /// Open loop: requests per second, Poisson arrivals.
    pub rate: Option<f64>,
    /// The shape of the gamma-distributed gaps between arrivals: 1 is Poisson, below 1 burstier,
    /// above 1 more regular (the mean stays 1/rate).
    pub burstiness: f64,
    pub request_timeout: Duration,
    /// Ask for exactly the output length (`ignore_eos`, `min_tokens`).
    pub exact_output: bool,
    /// Ask for the running usage in every chunk (`--chunk-usage`), so a chunk of several tokens
    /// (speculative decoding) is recorded with its count.
    pub chunk_usage: bool,
    /// Ask for the server's timings in every chunk (llama.cpp's `timings_per_token`): set when
    /// `/v1/models` says the server is llama.cpp's, so tokens of empty text are counted.
    pub chunk_timings: bool,
    pub record_tokens: bool,
    /// Open the connections the first requests will use before the first one is timed
    /// (`--no-preconnect` turns it off), so the first wave pays no connect storm; see
    /// `preconnect_count`.
    pub preconnect: bool,
    /// Empty every endpoint's prefix cache before the first request (`--reset-prefix-cache`).
    pub reset_prefix_cache: bool,
    /// `--start-at`, on this machine's clock (the reference clock's time less this machine's
    /// offset from it): the engine waits for it once the server is found out and the first
    /// connections are open, and the schedule counts from it. `None`: from when the loop
    /// starts.
    pub start_at: Option<SystemTime>,
    /// What requests carry beyond their prompt and lengths: tools, several models, a batch.
    pub shape: Shape,
    /// Mixed into every made-up prompt's text (not its length): a sweep's cell k sends texts
    /// of its own, so no cell is served from the prefix cache an earlier cell filled with the
    /// same prompts (a server's prompt cache made a probe's first requests fast and its TTFT
    /// "grow" through it). 0 for a run.
    pub prompt_salt: u64,
    /// `--cancel`: which requests the client abandons, when, and where the server says what it
    /// did after.
    pub cancel: Option<cancel::CancelPlan>,
    /// `--probe`: a canary lane of small requests beside the load.
    pub canary: Option<canary::CanaryPlan>,
}

/// What requests carry beyond their prompt and lengths, planned from the flags.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    /// `--tools FILE` with `--tool-choice`: offered with every request of an API of messages
    /// (a dataset row's own tools take their place for its requests).
    pub tools: Option<Arc<Tools>>,
    /// `--tool-choice`, for a dataset's tools too.
    pub tool_choice: Option<ToolChoice>,
    /// `--extra-body` and `--header`: added to every request.
    pub extra: Arc<extra::Extra>,
    /// `--tool-time`: how long the simulated tool takes before a conversation answers a tool
    /// call with its result (the next request of the turn).
    pub tool_time: Option<ThinkTime>,
    /// `--served-model a=3,b=1`: each request goes to one of these, drawn by weight from its
    /// own seeded draws (a conversation's turns all to one); empty: one model.
    pub models: Vec<(String, u32)>,
    /// Inputs per request of a pooling API (`--batch`; 1 otherwise).
    pub batch: usize,
    /// Why the API is the one it is (`--api auto`'s pick), said when the run starts.
    pub api_picked: Option<String>,
    /// The `--determinism` pass these requests belong to (`concurrency 1`, `concurrency N`),
    /// carried in each request's origin; `None` in any other run.
    pub pass: Option<String>,
}

/// The salt of the model draws, so they are a stream of their own beside the lengths'.
const MODEL_SALT: u64 = 0x0A0D_E15E_ED00_0000;

impl Shape {
    /// The model request (or conversation) `unit` goes to when there are several, drawn by
    /// weight from its own seeded generator (`traffic::request_rng`).
    pub fn model_for(&self, seed: u64, unit: u64) -> Option<&str> {
        if self.models.len() < 2 {
            return None;
        }
        let total: u64 = self.models.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut rng = crate::traffic::request_rng(seed ^ MODEL_SALT, unit);
        let mut x = rng.below(usize::try_from(total.max(1)).unwrap_or(usize::MAX)) as u64;
        for (name, w) in &self.models {
            if x < u64::from(*w) {
                return Some(name);
            }
            x -= u64::from(*w);
        }
        self.models.last().map(|(n, _)| n.as_str())
    }

    /// The tools of a request: its row's (with `--tool-choice`), else `--tools`.
    fn tools_for(&self, row_tools: Option<&str>) -> Option<Arc<Tools>> {
        match row_tools.map(crate::traffic::tools::parse_tools) {
            Some(Ok(defs)) => Some(Arc::new(Tools {
                defs,
                choice: self.tool_choice.clone(),
            })),
            _ => self.tools.clone(),
        }
    }
}

impl HttpConfig {
    pub fn describe(&self) -> WorkloadDesc {
        let t = &self.traffic;
        let prompt = t
            .prompt
            .clone()
            .unwrap_or(crate::traffic::LenSpec::Fixed(128));
        WorkloadDesc {
            prompt_tokens: match (&self.prompts, t.describe_source()) {
                (_, Some(source)) => source,
                (Prompts::Words(_), None) => prompt.to_string(),
                (Prompts::Approximate, None) => format!("~{prompt}"),
                (Prompts::Texts(texts), None) if texts.len() == 1 => {
                    format!("text ({} tokens)", texts[0].tokens)
                }
                (Prompts::Texts(texts), None) => format!("{} texts", texts.len()),
                (Prompts::Server { .. }, None) => prompt.to_string(),
            },
            output_tokens: if self.api.streams() {
                t.output.to_string()
            } else {
                "0".into()
            },
            batch: self.shape.batch.max(1),
            load: Some(match (t.replay, self.rate, self.concurrency) {
                (Some(scale), _, _) => format!("replay ×{}", 1.0 / scale),
                (None, Some(r), Some(cap)) => format!("rate {r}/s (≤ {cap} in flight)"),
                (None, Some(r), None) => format!("rate {r}/s"),
                (None, None, c) if t.conversations.is_some() => {
                    format!("{} conversations at once", c.unwrap_or(1))
                }
                (None, None, c) => format!("concurrency {}", c.unwrap_or(1)),
            })
            .map(|load| match t.shard.is_whole() {
                true => load,
                false => format!("{load}, shard {}", t.shard),
            }),
        }
    }

    /// What the record says of the traffic (`None` for made-up lengths): the plan's, with
    /// what this client knows of lengths and of the server's cache.
    pub fn traffic_info(&self) -> Option<TrafficInfo> {
        let mut info = self.traffic.info()?;
        info.exact_lengths = info.exact_lengths || matches!(self.prompts, Prompts::Words(_));
        info.cache = Some("cached_tokens as each request's usage reports it".into());
        Some(info)
    }

    /// Whether requests go out on a schedule (a rate, a replayed trace) rather than as slots
    /// free up.
    fn open_loop(&self) -> bool {
        self.rate.is_some() || self.traffic.replay.is_some()
    }

    /// Requests in flight at most: the concurrency (default 1), or in an open loop its cap
    /// (none); a shard holds its share of it (`Shard::share`).
    fn in_flight_cap(&self) -> usize {
        let shard = self.traffic.shard;
        if self.open_loop() {
            self.concurrency.map_or(usize::MAX, |c| shard.share(c))
        } else {
            shard.share(self.concurrency.unwrap_or(1))
        }
        .max(1)
    }

    /// The instant the schedule counts from: `start_at` on the monotonic clock (the engine
    /// has waited for it), else now.
    fn schedule_origin(&self) -> Instant {
        let now = Instant::now();
        let Some(at) = self.start_at else {
            return now;
        };
        match at.duration_since(SystemTime::now()) {
            Ok(ahead) => now + ahead,
            Err(past) => now.checked_sub(past.duration()).unwrap_or(now),
        }
    }

    /// `Intent::Load`: the rate of an open loop (a replay's speed), else the concurrency, ×2
    /// per step.
    fn adjust_load(&mut self, steps: i64) {
        if let Some(scale) = self.traffic.replay {
            self.traffic.replay = Some((scale / doubling_factor(steps)).clamp(1e-6, 1e6));
            return;
        }
        match self.rate {
            Some(r) => self.rate = Some((r * doubling_factor(steps)).clamp(1e-3, 1e6)),
            None => {
                let c = doubled(self.concurrency.unwrap_or(1), steps);
                self.concurrency = Some(c.clamp(1, MAX_CONCURRENCY));
            }
        }
    }
}

/// The most connections opened before the run (per run, over all endpoints).
const MAX_PRECONNECT: usize = 4096;

/// The first wave of an open loop: the arrivals of its first second, the E2E a first request
/// is taken to need (connections beyond it open when a request needs one, as `new`).
const FIRST_WAVE_S: f64 = 1.0;

impl HttpConfig {
    /// Connections to open before the first timed request: no more than the first wave can
    /// have in flight. At most the requests the run sends and the requests in flight at once
    /// (the concurrency; an open loop's cap); for an open loop at most its arrivals in the first
    /// second (a replayed trace: its own first rows). Requests beyond them open their own, and
    /// their records say so.
    pub fn preconnect_count(&self) -> usize {
        if !self.preconnect {
            return 0;
        }
        let cap = self.in_flight_cap();
        let shard = &self.traffic.shard;
        // This generator's own arrivals (a shard sends its part of the one schedule).
        let first_wave = if self.traffic.replay.is_some() {
            (0..)
                .map_while(|i| self.traffic.due_s(i).map(|t| (i, t)))
                .take_while(|&(_, t)| t < FIRST_WAVE_S)
                .filter(|&(i, _)| shard.owns(i))
                .count()
        } else {
            match self.rate {
                Some(r) => shard.share((r * FIRST_WAVE_S).ceil() as usize),
                None => cap,
            }
        };
        let requests = self
            .traffic
            .request_limit()
            .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let requests = shard.share(requests);
        first_wave.min(cap).min(requests).clamp(1, MAX_PRECONNECT)
    }
}

/// Opens `cfg.preconnect_count()` connections, spread over the endpoints as the requests will
/// be (round-robin), each origin's at once.
async fn preconnect(cfg: &HttpConfig, pool: &Arc<conn::Pool>) {
    let n = cfg.preconnect_count();
    if n == 0 || cfg.endpoints.is_empty() {
        return;
    }
    let mut per_origin: Vec<(conn::Peer, usize)> = Vec::new();
    for i in 0..n {
        let endpoint = &cfg.endpoints[i % cfg.endpoints.len()];
        let Ok(origin) = conn::Peer::of(&endpoint.url("/")) else {
            continue;
        };
        match per_origin.iter_mut().find(|(o, _)| *o == origin) {
            Some((_, count)) => *count += 1,
            None => per_origin.push((origin, 1)),
        }
    }
    let mut opening = JoinSet::new();
    for (origin, count) in per_origin {
        let (pool, timeout) = (pool.clone(), cfg.request_timeout);
        opening.spawn(async move { pool.preopen(&origin, count, timeout).await });
    }
    while opening.join_next().await.is_some() {}
}

/// Starts the engine on a named thread. It reports through `events` and ends with
/// `Event::Finished`; a panic inside it is caught and reported as a fatal error.
pub fn spawn(
    cfg: HttpConfig,
    events: Sender<Event>,
    control: Receiver<Control>,
) -> std::io::Result<JoinHandle<()>> {
    crate::engine::spawn_engine(HTTP_THREAD, "http engine", events, move |tx| {
        // Streams are read on several threads, so that one busy thread does not make every
        // chunk's timestamp late (see BENCHMARKS.md, "HTTP client"); the scheduler itself runs
        // on this engine thread.
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("infertop-http")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the http client runtime: {e}"))?;
        rt.block_on(run(cfg, tx, control))
    })
}

/// `--tokenizer server`: prompts of exact length from the first endpoint's own tokenizer, or
/// the given texts counted by it.
async fn server_prompts(
    client: &reqwest::Client,
    cfg: &HttpConfig,
    model: &str,
    texts: Option<&Vec<String>>,
) -> Result<Prompts, String> {
    let first = &cfg.endpoints[0];
    let fail = |e: String| {
        format!("--tokenizer server: {e}; pass the served model's tokenizer.json instead")
    };
    let tk = tokenize::ServerTokenizer::connect(client, first, cfg.api_key.as_deref(), model)
        .await
        .map_err(fail)?;
    let (words, offset) = tk.prompt_words().await.map_err(|e| {
        fail(format!(
            "cannot make prompts of exact length with {}'s tokenizer ({e})",
            first.display()
        ))
    })?;
    Ok(match texts {
        None => Prompts::Words(Arc::new(words)),
        Some(texts) => {
            let counts = tk.count_texts(texts, offset).await.map_err(fail)?;
            Prompts::Texts(Arc::new(
                texts
                    .iter()
                    .zip(counts)
                    .map(|(t, tokens)| PromptText {
                        text: t.clone(),
                        tokens: tokens.max(1),
                        exact: true,
                    })
                    .collect(),
            ))
        }
    })
}

/// What the engine knows of the model behind an endpoint.
fn model_info(model: &str, endpoints: &[Endpoint]) -> ModelInfo {
    let shown: Vec<&str> = endpoints.iter().map(Endpoint::display).collect();
    ModelInfo::served(model, &shown.join(", "))
}

/// What every request task shares.
struct Shared {
    /// The streamed requests' connections.
    pool: Arc<conn::Pool>,
    api_key: Option<String>,
    timeout: Duration,
    events: Events,
    /// What the run has said of its outputs (`say_output_notes`).
    said: Said,
    /// Requests cancelled on purpose so far (`--cancel`).
    cancelled: std::sync::atomic::AtomicU64,
}

async fn run(
    cfg: HttpConfig,
    tx: &Sender<Event>,
    control: Receiver<Control>,
) -> Result<StopReason, String> {
    let events = Events::new(tx.clone());
    let mut inbox =
        Inbox::ringing(control).map_err(|e| format!("cannot start the control thread: {e}"))?;
    let result = drive(cfg, &events, &mut inbox).await;
    // The steps still held go out before the engine's `Finished`.
    events.flush();
    result
}

/// The run: the server found out, the first connections opened, `RunStarted`, then the loop.
async fn drive(mut cfg: HttpConfig, tx: &Events, inbox: &mut Inbox) -> Result<StopReason, String> {
    if cfg.endpoints.is_empty() {
        return Err("no --endpoint given".into());
    }
    // This machine's timer jitter, measured before anything else runs on the runtime.
    let calibration = tokio::select! {
        c = probe::calibrate() => c,
        stop = stopped(inbox) => return Ok(stop),
    };
    // The user's headers go with the route check, the model list and the tokenizer too: a
    // gateway that routes by them answers those as well.
    let client = cfg
        .shape
        .extra
        .client()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(cfg.in_flight_cap().min(4096))
        .build()
        .map_err(|e| {
            format!(
                "cannot build the http client: {}",
                crate::util::http_error(e)
            )
        })?;
    let pool = Arc::new(conn::Pool::new(cfg.preconnect));
    // The server found out and the first connections opened, or a stop meanwhile: a server
    // that answers slowly (or a listen queue that drops SYNs) must not hold a Ctrl-C.
    let prepared = async {
        let model = discover(&client, &mut cfg, tx).await?;
        preconnect(&cfg, &pool).await;
        Ok::<String, String>(model)
    };
    let model = tokio::select! {
        model = prepared => model?,
        stop = stopped(inbox) => return Ok(stop),
    };
    // The server's gauges before the first request, for what it does after cancellations.
    let cancel_baseline = match &cfg.cancel {
        Some(plan) => Some(cancel::gauges(&client, &plan.metrics).await),
        None => None,
    };
    let late = match wait_for_start(&mut cfg, inbox).await {
        Waited::Stopped(reason) => return Ok(reason),
        Waited::OnTime => None,
        Waited::Late(message) => Some(message),
    };
    let _ = tx.send(Event::RunStarted(Box::new(RunInfo {
        model: model_info(&model, &cfg.endpoints),
        workload: cfg.describe(),
        warmup_requests: cfg.traffic.warmup,
        threads: 0,
        traffic: cfg.traffic_info().map(Box::new),
    })));
    if let Some(message) = late {
        let _ = tx.send(Event::Error {
            message,
            fatal: false,
        });
    }
    if let Some(warning) = calibration.warning() {
        let _ = tx.send(Event::Error {
            message: warning,
            fatal: false,
        });
    }
    let shared = Arc::new(Shared {
        pool,
        api_key: cfg.api_key.clone(),
        timeout: cfg.request_timeout,
        events: tx.clone(),
        said: Said::default(),
        cancelled: Default::default(),
    });
    // Dropped (and so stopped) when the run returns.
    let mut probe = JoinSet::new();
    probe.spawn(probe::watch(tx.sender(), probe::EVERY, calibration));
    probe.spawn(events::flush_every(tx.clone()));
    if let Some(plan) = cfg.canary {
        probe.spawn(canary::run(
            canary::Lane {
                plan,
                endpoint: cfg.endpoints[0].clone(),
                api: cfg.api,
                model: model.clone(),
                api_key: cfg.api_key.clone(),
                timeout: cfg.request_timeout,
                extra: cfg.shape.extra.clone(),
                words: match &cfg.prompts {
                    Prompts::Words(w) => Some(w.clone()),
                    _ => None,
                },
                chunk_usage: cfg.chunk_usage,
                chunk_timings: cfg.chunk_timings,
                seed: cfg.traffic.seed,
            },
            tx.clone(),
        ));
    }
    let plan = cfg.cancel.clone();
    let stop = if cfg.traffic.conversations.is_some() {
        conversation::run(cfg, shared.clone(), model, tx, inbox).await
    } else {
        completions::run(cfg, shared.clone(), model, tx, inbox).await
    }?;
    // What the server did after the cancellations, unless the user asked to stop now.
    let cancelled = shared.cancelled.load(std::sync::atomic::Ordering::Relaxed);
    if let (Some(plan), Some(baseline)) = (plan, cancel_baseline) {
        if cancelled > 0 && matches!(stop, StopReason::RequestLimit | StopReason::DurationLimit) {
            let check = tokio::select! {
                c = cancel::check(&client, &plan, baseline, cancelled) => Some(c),
                _ = stopped(inbox) => None,
            };
            if let Some(c) = check {
                let _ = tx.send(Event::Notice(Box::new(Notice::CancelCheck(c))));
            }
        }
    }
    Ok(stop)
}

/// What the connection pool learnt of the servers, said once each (before the result of the
/// request that showed it).
fn say_news(pool: &conn::Pool, tx: &Events) {
    for note in pool.news() {
        let _ = tx.send(Event::Notice(Box::new(Notice::ServerNote(note))));
    }
}

/// What a completed request shows of how its server streams, said once a run each: tokens
/// whose text was empty (special tokens the server leaves out of its text), and tokens sent only
/// at the stream's end (none as they were generated).
fn say_output_notes(shared: &Shared, index: u64, m: &Measured) {
    use std::sync::atomic::Ordering;
    let generated = m.usage_completion_tokens.unwrap_or(0).max(m.content_chunks);
    if m.inputs > 0 || generated == 0 {
        return;
    }
    let note = if generated > 1 && m.content_chunks <= 1 {
        if shared.said.unstreamed.swap(true, Ordering::Relaxed) {
            return;
        }
        crate::event::ServerNote {
            what: "unstreamed".into(),
            words: format!(
                "the server sent request {index}'s {generated} tokens only at the end of its stream, none as they were generated (text it held back: bytes of a character never made whole, or a server that does not stream): its TTFT is the stream's end, as its client saw it, and it has no TPOT"
            ),
        }
    } else if m.text.is_empty() {
        if shared.said.empty_text.swap(true, Ordering::Relaxed) {
            return;
        }
        crate::event::ServerNote {
            what: "empty-text".into(),
            words: format!(
                "the server generated {generated} tokens with no text for request {index} (special tokens it leaves out of its text?); they are tokens, counted chunk by chunk from what the server says of them ({} chunks), not failures",
                m.content_chunks
            ),
        }
    } else {
        return;
    };
    let _ = shared
        .events
        .send(Event::Notice(Box::new(Notice::ServerNote(note))));
}

/// The notes a run has said (`say_output_notes`).
#[derive(Default)]
struct Said {
    empty_text: std::sync::atomic::AtomicBool,
    unstreamed: std::sync::atomic::AtomicBool,
}

/// A stop that arrives while the run prepares (its other controls wait for the loop).
async fn stopped(inbox: &mut Inbox) -> StopReason {
    loop {
        if let Some(reason) = inbox.stop_now() {
            return reason;
        }
        inbox.arrived().await;
    }
}

/// How often a wait for `--start-at` looks for a stop.
const START_POLL: Duration = Duration::from_millis(50);

/// A start this late still keeps its time (the first arrivals go at once, a little late).
const START_LATE_OK: Duration = Duration::from_millis(20);

/// How the wait for `--start-at` ended.
enum Waited {
    OnTime,
    /// The time had passed when the engine was ready: the schedule starts now, and this says
    /// by how much it is late.
    Late(String),
    Stopped(StopReason),
}

/// `--start-at` (`cfg.start_at`): waits for it, answering a stop within `START_POLL`; the
/// last stretch on this thread's finer sleep, so the schedule starts within a fraction of a
/// millisecond of it. A time already past by more than `START_LATE_OK` starts the schedule
/// now instead (`cfg.start_at` cleared): its first arrivals would all go at once.
async fn wait_for_start(cfg: &mut HttpConfig, inbox: &mut Inbox) -> Waited {
    let Some(at) = cfg.start_at else {
        return Waited::OnTime;
    };
    if let Err(late) = at.duration_since(SystemTime::now()) {
        let late = late.duration();
        if late <= START_LATE_OK {
            return Waited::OnTime;
        }
        cfg.start_at = None;
        return Waited::Late(format!(
            "--start-at had passed {:.2} s before this generator was ready (the server found out, the first connections open): its schedule starts now, that late; give the generators more time",
            late.as_secs_f64()
        ));
    }
    loop {
        if let Some(reason) = inbox.stop_now() {
            return Waited::Stopped(reason);
        }
        let left = at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        if left > START_POLL {
            tokio::time::sleep(START_POLL).await;
            continue;
        }
        // The runtime's timer wakes up to a millisecond late: the rest on this thread.
        tokio::time::sleep(left.saturating_sub(Duration::from_millis(2))).await;
        let rest = at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        std::thread::sleep(rest);
        return Waited::OnTime;
    }
}

/// What the run needs to know of the server before its first request: the model's name (the
/// first of `GET /v1/models` unless `--served-model` names it), prompts from its tokenizer
/// (`--tokenizer server`), its prefix cache emptied (`--reset-prefix-cache`), and a dataset's
/// rows cut to the longest prompt + output it takes (its `max_model_len`), counted.
async fn discover(
    client: &reqwest::Client,
    cfg: &mut HttpConfig,
    tx: &Events,
) -> Result<String, String> {
    if cfg.api == Api::Auto {
        let picked =
            api::detect::resolve(client, &cfg.endpoints[0], cfg.api_key.as_deref(), cfg.api)
                .await
                .map_err(|e| e.to_string())?;
        cfg.api = picked.api;
        cfg.shape.api_picked = Some(picked.why);
    }
    if let Some(why) = &cfg.shape.api_picked {
        let _ = tx.send(Event::Notice(Box::new(Notice::ApiPicked(ApiPicked {
            api: cfg.api.name().into(),
            why: why.clone(),
        }))));
    }
    let first = cfg.endpoints[0].clone();
    // Listed even with --served-model: it says which server this is (and so what it counts
    // per chunk) and how long a prompt it takes; a server without the list is then no error.
    let listed = request::first_model(client, &first, cfg.api, cfg.api_key.as_deref()).await;
    if let Ok(served) = &listed {
        ask_counts_of(cfg, served.owned_by.as_deref());
    }
    let model = match (&cfg.served_model, &listed) {
        (Some(m), _) => m.clone(),
        (None, Ok(served)) => served.id.clone(),
        (None, Err(e)) => {
            // A refused key is not fixed by naming the model.
            let what = if e.contains("HTTP 401") || e.contains("HTTP 403") {
                "check --api-key (or an Authorization --header)"
            } else {
                "pass --served-model NAME"
            };
            return Err(format!(
                "cannot list the models of {} ({e}); {what}",
                first.display()
            ));
        }
    };
    if let Prompts::Server { texts } = &cfg.prompts {
        cfg.prompts = server_prompts(client, cfg, &model, texts.as_deref()).await?;
    }
    if cfg.reset_prefix_cache {
        for e in &cfg.endpoints {
            let done = cache::reset_prefix_cache(client, e, cfg.api_key.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            let _ = tx.send(Event::Notice(Box::new(Notice::PrefixCacheReset(done))));
        }
    }
    if let Some(max) = listed.as_ref().ok().and_then(|s| s.max_model_len) {
        cfg.traffic.fit(max)?;
    }
    Ok(model)
}

/// What a server known by its `/v1/models` `owned_by` is asked to send with every chunk so that
/// each chunk's tokens are counted, text or none: vLLM and SGLang their running usage
/// (`continuous_usage_stats`), llama.cpp's server its timings (`timings_per_token`, whose
/// `predicted_n` runs). Another server is asked nothing it might refuse (`--chunk-usage` asks
/// any for the usage).
fn ask_counts_of(cfg: &mut HttpConfig, owned_by: Option<&str>) {
    match owned_by.map(str::to_ascii_lowercase).as_deref() {
        Some("vllm" | "sglang") => cfg.chunk_usage = true,
        Some("llamacpp") => cfg.chunk_timings = true,
        _ => {}
    }
}

/// What one request sends: its prompt (text, or chat messages as written), its tools, a
/// pooling API's batch, its lengths, and where it came from.
#[derive(Default)]
pub(crate) struct WhatToSend {
    pub prompt: String,
    pub messages: Option<Vec<Message>>,
    pub tools: Option<Arc<Tools>>,
    /// A pooling API's batch: texts to embed, or documents to rank against `prompt`.
    pub inputs: Vec<String>,
    /// Per sequence (a pooling batch: per input, the query's with a document's for a rerank).
    pub prompt_tokens: usize,
    /// `prompt_tokens` is the server's count (made of its one-token words, or counted with
    /// its tokenizer), not an estimate.
    pub exact: bool,
    pub output_tokens: usize,
    pub origin: Option<Origin>,
}

/// Request `index`: one prompt, or a pooling API's batch of them (each input drawn as a
/// request of its own would be: request `i` of batch `B` takes units `i·B … i·B + B − 1`, a
/// rerank's query first).
fn what_to_send(cfg: &HttpConfig, index: u64) -> WhatToSend {
    if !cfg.api.takes_batch() {
        return one_prompt(cfg, index);
    }
    let b = cfg.shape.batch.max(1) as u64;
    let rerank = cfg.api == Api::Rerank;
    let per = b + u64::from(rerank);
    let units: Vec<WhatToSend> = (0..per)
        .map(|j| one_prompt(cfg, index.saturating_mul(per).saturating_add(j)))
        .collect();
    let exact = units.iter().all(|u| u.exact);
    let origin = units.first().and_then(|u| u.origin.clone());
    let (query, docs) = if rerank {
        let (q, d) = units.split_at(1);
        (q.first(), d)
    } else {
        (None, &units[..])
    };
    let doc_tokens: usize = docs.iter().map(|u| u.prompt_tokens).sum();
    let query_tokens = query.map_or(0, |q| q.prompt_tokens);
    WhatToSend {
        prompt: query.map(|q| q.prompt.clone()).unwrap_or_default(),
        inputs: docs.iter().map(|u| u.prompt.clone()).collect(),
        prompt_tokens: query_tokens + doc_tokens.div_ceil(docs.len().max(1)),
        exact,
        output_tokens: 0,
        origin,
        ..WhatToSend::default()
    }
}

/// Unit `index` of the traffic: from its source (a dataset row, a shared-prefix group), else
/// from the given texts or made-up lengths.
fn one_prompt(cfg: &HttpConfig, index: u64) -> WhatToSend {
    let t = &cfg.traffic;
    let mut rng = t.rng(index);
    let made_up_tokens = t.prompt.as_ref().map_or(1, |p| p.pick(index, &mut rng));
    let output_tokens = t.output.pick(index, &mut rng);
    let words = match &cfg.prompts {
        Prompts::Words(w) => Some(w.as_ref()),
        _ => None,
    };
    if let Some(planned) = t.planned(index) {
        let counted = t
            .source
            .as_deref()
            .and_then(RequestSource::dataset)
            .is_some_and(|d| d.counted);
        let exact = match &planned.prompt {
            Prompt::Made(_) => words.is_some(),
            Prompt::Text(_) | Prompt::Messages(_) => counted,
        };
        let (prompt, messages) = render(&planned.prompt, cfg.api, words, None);
        let tools = if cfg.api.takes_messages() {
            cfg.shape.tools_for(row_tools(&planned.prompt))
        } else {
            None
        };
        return WhatToSend {
            prompt,
            messages,
            tools,
            prompt_tokens: planned.prompt_tokens,
            exact,
            output_tokens: planned.output_tokens.unwrap_or(output_tokens),
            origin: Some(planned.origin),
            ..WhatToSend::default()
        };
    }
    let given = match &cfg.prompts {
        Prompts::Texts(texts) => texts.get((index as usize) % texts.len().max(1)),
        _ => None,
    };
    let (prompt, prompt_tokens, exact) = match (given, words) {
        (Some(t), _) => (t.text.clone(), t.tokens, t.exact),
        (None, Some(words)) => (
            words.prompt(made_up_tokens, salted(rng.next_u64(), cfg.prompt_salt)),
            made_up_tokens,
            true,
        ),
        (None, None) => (
            crate::traffic::words::approximate_prompt(
                made_up_tokens,
                salted(rng.next_u64(), cfg.prompt_salt),
            ),
            made_up_tokens,
            false,
        ),
    };
    WhatToSend {
        prompt,
        tools: if cfg.api.takes_messages() {
            cfg.shape.tools.clone()
        } else {
            None
        },
        prompt_tokens,
        exact,
        output_tokens,
        ..WhatToSend::default()
    }
}

/// A made-up prompt's text seed with `salt` mixed in (unchanged with no salt).
fn salted(seed: u64, salt: u64) -> u64 {
    if salt == 0 {
        seed
    } else {
        crate::traffic::request_seed(seed, salt)
    }
}

/// A dataset row's tool definitions (its `tools`, as JSON text), if it has any.
pub(crate) fn row_tools(prompt: &Prompt) -> Option<&str> {
    match prompt {
        Prompt::Messages(m) => m
            .iter()
            .find(|(r, _)| *r == Role::Tools)
            .map(|(_, t)| t.as_str()),
        _ => None,
    }
}

/// A prompt as the API takes it: text for completions (a row's tools written into it); for
/// an API of messages, messages as written (with `system` first, when given; a row's tools
/// go apart, see `row_tools`), or one user message.
pub(crate) fn render(
    prompt: &Prompt,
    api: Api,
    words: Option<&PromptWords>,
    system: Option<&str>,
) -> (String, Option<Vec<Message>>) {
    let chat = api.takes_messages();
    match (prompt, chat) {
        (Prompt::Messages(m), true) => {
            let mut messages: Vec<Message> = system
                .map(|s| Message::new("system", s))
                .into_iter()
                .collect();
            messages.extend(
                m.iter()
                    .filter(|(r, _)| *r != Role::Tools)
                    .map(|(r, t)| Message::new(r.name(), t.clone())),
            );
            (String::new(), Some(messages))
        }
        (p, true) if system.is_some() => {
            let messages = vec![
                Message::new("system", system.unwrap_or_default()),
                Message::new("user", p.text(words)),
            ];
            (String::new(), Some(messages))
        }
        (p, _) => (p.text(words), None),
    }
}

/// A content chunk of request `index` as the protocol says it: its first token, then a step.
fn send_token(events: &Events, index: u64, token: Token) {
    match token {
        Token::First { ttft_s } => {
            let _ = events.send(Event::PrefillDone { index, ttft_s });
        }
        Token::Steps {
            first_step,
            tokens,
            itl_s,
        } => {
            for step in first_step..first_step.saturating_add(tokens) {
                events.step(DecodeStep::new(index, step, itl_s, None));
            }
        }
    }
}

/// TPOT = (E2E − TTFT) / (G − 1), G from the usage chunk when the server sent one, else the
/// content chunks counted.
fn request_done(record_tokens: bool, launched: &Launched, m: Measured) -> RequestDone {
    let (output_tokens, output_from) = match m.usage_completion_tokens {
        Some(g) if g > 0 => (g, "usage"),
        _ => (m.content_chunks, "counted"),
    };
    // A pooling batch's usage counts every input: the record keeps tokens per input.
    let per_input = |p: usize| (p + m.inputs.max(1) / 2) / m.inputs.max(1);
    let server = server_timings(&m);
    let (prompt_tokens, prompt_from) = match m.usage_prompt_tokens {
        Some(p) => (per_input(p), "usage"),
        None if launched.exact_prompt => (launched.requested_prompt_tokens, "tokenizer"),
        None => (launched.requested_prompt_tokens, "approx"),
    };
    RequestDone {
        index: launched.index,
        warmup: launched.warmup,
        batch: m.inputs.max(1),
        prompt_tokens,
        output_tokens,
        ttft_s: m.ttft_s,
        // Tokens that all came in one chunk (or only in the final count) came at no known
        // times of their own: no TPOT.
        tpot_s: (output_tokens > 1 && m.content_chunks > 1)
            .then(|| (m.e2e_s - m.ttft_s) / (output_tokens - 1) as f64),
        e2e_s: m.e2e_s,
        gpu_ttft_s: None,
        gpu_decode_s: None,
        itl_max_s: m.itls_s.iter().copied().reduce(f64::max),
        peak_alloc_bytes: None,
        output_hash: format!("{:016x}", fnv1a(m.text.as_bytes())),
        tokens: None,
        text: record_tokens.then(|| m.text.clone()),
        client: Some(Box::new(ClientDetail {
            endpoint: launched.endpoint.display().to_string(),
            send_delay_s: m.send_delay_s,
            output_tokens_from: output_from.into(),
            prompt_tokens_from: prompt_from.into(),
            requested_prompt_tokens: launched.requested_prompt_tokens,
            content_chunks: m.content_chunks,
            chunk_tokens: if m.chunk_tokens.iter().any(|&t| t > 1) {
                m.chunk_tokens
            } else {
                Vec::new()
            },
            text_ends: if record_tokens {
                m.text_ends
            } else {
                Vec::new()
            },
            finish_reason: m.finish_reason,
            // llama.cpp says its cache in `timings.cache_n` alone.
            cached_tokens: m
                .cached_tokens
                .or(server.as_ref().and_then(|s| s.cached_tokens)),
            http: m.http,
            ttst_s: m.ttst_s,
            server,
        })),
        origin: launched.origin.clone().map(Box::new),
        model: launched.model.clone(),
        parts: m.parts.map(Box::new),
    }
}

/// The server's own timings joined to the client's: the cached and computed prompt tokens
/// from the usage where the timings lack them, and the rest of the TTFT.
fn server_timings(m: &Measured) -> Option<crate::event::ServerTimings> {
    let mut t = m.server.clone()?;
    if t.cached_tokens.is_none() {
        t.cached_tokens = m.cached_tokens;
    }
    if t.computed_tokens.is_none() {
        t.computed_tokens = match (m.usage_prompt_tokens, t.cached_tokens) {
            (Some(p), Some(c)) => Some(p.saturating_sub(c)),
            _ => None,
        };
    }
    t.join_ttft(m.ttft_s);
    Some(t)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn launched() -> Launched {
        Launched {
            index: 3,
            warmup: false,
            endpoint: Endpoint::parse("http://127.0.0.1:1").unwrap(),
            requested_prompt_tokens: 100,
            exact_prompt: false,
            scheduled: Instant::now(),
            origin: None,
            model: None,
        }
    }

    fn config(traffic: TrafficPlan) -> HttpConfig {
        HttpConfig {
            endpoints: vec![Endpoint::parse("http://127.0.0.1:1").unwrap()],
            api: Api::Completions,
            served_model: None,
            api_key: None,
            traffic,
            prompts: Prompts::Approximate,
            concurrency: None,
            rate: None,
            burstiness: 1.0,
            request_timeout: Duration::from_secs(1),
            exact_output: true,
            chunk_usage: false,
            chunk_timings: false,
            record_tokens: false,
            preconnect: true,
            reset_prefix_cache: false,
            start_at: None,
            prompt_salt: 0,
            cancel: None,
            canary: None,
            shape: Default::default(),
        }
    }

    /// Never more connections before the run than its first wave can use: a 30-row trace opens
    /// its first second's rows, a rate its first second's arrivals, a concurrency no more than
    /// the requests.
    #[test]
    fn preconnect_is_bounded_by_what_the_first_wave_can_have_in_flight() {
        use crate::traffic::dataset::{self, ReadOptions};
        use crate::traffic::{DatasetPlan, LenSpec, Order, RequestSource};
        let made_up = || TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(4), 0);
        // A trace of 30 rows, one every 150 ms: 7 in its first second.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let rows: String = (0..30)
            .map(|i| {
                format!(
                    "{{\"timestamp\":{},\"input_length\":8,\"output_length\":4}}\n",
                    i * 150
                )
            })
            .collect();
        std::fs::write(&path, rows).unwrap();
        let ds = dataset::read(&path, &ReadOptions::default()).unwrap();
        let trace = TrafficPlan {
            source: Some(Arc::new(RequestSource::Dataset(Box::new(
                DatasetPlan::new(ds, Order::Sequential, 0, None, 16),
            )))),
            replay: Some(1.0),
            ..made_up()
        };
        assert_eq!(config(trace).preconnect_count(), 7);
        let rate = HttpConfig {
            rate: Some(5.0),
            ..config(made_up())
        };
        assert_eq!(rate.preconnect_count(), 5);
        let few = HttpConfig {
            concurrency: Some(1000),
            ..config(TrafficPlan {
                requests: Some(5),
                ..made_up()
            })
        };
        assert_eq!(few.preconnect_count(), 5);
        assert_eq!(config(made_up()).preconnect_count(), 1);
        let off = HttpConfig {
            preconnect: false,
            ..config(made_up())
        };
        assert_eq!(off.preconnect_count(), 0);
    }

    #[test]
    fn tpot_uses_the_usage_count_else_the_chunks() {
        let m = Measured {
            ttft_s: 0.05,
            itls_s: vec![0.01; 4],
            e2e_s: 0.09,
            content_chunks: 5,
            usage_completion_tokens: Some(9),
            usage_prompt_tokens: Some(97),
            ..Measured::default()
        };
        let d = request_done(false, &launched(), m.clone());
        assert_eq!((d.output_tokens, d.prompt_tokens), (9, 97));
        assert!((d.tpot_s.unwrap() - 0.04 / 8.0).abs() < 1e-12);
        let c = d.client.unwrap();
        assert_eq!(
            (c.output_tokens_from.as_str(), c.prompt_tokens_from.as_str()),
            ("usage", "usage")
        );
        let counted = request_done(
            false,
            &launched(),
            Measured {
                usage_completion_tokens: None,
                usage_prompt_tokens: None,
                ..m
            },
        );
        assert_eq!((counted.output_tokens, counted.prompt_tokens), (5, 100));
        assert!((counted.tpot_s.unwrap() - 0.01).abs() < 1e-12);
        assert_eq!(counted.client.unwrap().output_tokens_from, "counted");
    }
}
