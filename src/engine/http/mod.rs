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

pub mod cache;
pub mod conn;
mod conversation;
mod events;
pub mod probe;
pub mod request;
pub mod sse;
pub mod tokenize;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use tokio::task::JoinSet;

use crate::engine::workload::{doubled, doubling_factor, LenSpec};
use crate::event::{
    ClientDetail, Control, DecodeStep, Event, ModelInfo, Notice, Origin, RequestDone,
    RequestFailed, RunInfo, StopReason, TrafficInfo, WorkloadDesc,
};
use crate::traffic::{Conversations, Prompt, RequestSource};
use crate::util::{fnv1a, SplitMix64};
use events::Events;
use request::{Ask, Measured, RequestError, Token};
pub use request::{Endpoint, PromptWords};

/// The engine thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const HTTP_THREAD: &str = "infertop-engine-http";

/// A run with no successful request ends after this many failures: the server is not there.
pub const GIVE_UP_AFTER_FAILURES: u64 = 10;

/// How long a closed-loop slot waits after a failure before its next request, so a server that
/// refuses connections is not hammered (and the event queue not flooded).
const FAILURE_BACKOFF: Duration = Duration::from_millis(50);

/// How often the scheduler looks at the control channel when nothing else wakes it.
const CONTROL_POLL: Duration = Duration::from_millis(10);

/// Which OpenAI-compatible API to stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `/v1/completions` with a prompt.
    #[default]
    Completions,
    /// `/v1/chat/completions` with one user message (the chat template adds prompt tokens).
    Chat,
}

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

/// Everything the engine needs; built and validated by the CLI.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Requests go round-robin over these.
    pub endpoints: Vec<Endpoint>,
    pub api: Api,
    /// `None`: the first id of the first endpoint's `GET /v1/models`.
    pub served_model: Option<String>,
    /// Sent as a bearer token; never written anywhere.
    pub api_key: Option<String>,
    /// Prompt lengths, for made-up prompts.
    pub prompt: LenSpec,
    /// What the prompts are made of.
    pub prompts: Prompts,
    pub output: LenSpec,
    pub seed: u64,
    /// Closed loop: requests in flight (default 1). With a rate: the cap (default none).
    pub concurrency: Option<usize>,
    /// Open loop: requests per second, Poisson arrivals.
    pub rate: Option<f64>,
    /// The shape of the gamma-distributed gaps between arrivals: 1 is Poisson, below 1 burstier,
    /// above 1 more regular (the mean stays 1/rate).
    pub burstiness: f64,
    pub warmup: u64,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub request_timeout: Duration,
    /// Ask for exactly the output length (`ignore_eos`, `min_tokens`).
    pub exact_output: bool,
    /// Ask for the running usage in every chunk (`--chunk-usage`), so a chunk of several tokens
    /// (speculative decoding) is recorded with its count.
    pub chunk_usage: bool,
    pub record_tokens: bool,
    /// Requests from a dataset or shared-prefix groups instead of made-up lengths.
    pub source: Option<RequestSource>,
    /// `--replay`: each dataset row is sent at its timestamp × this scale (open loop).
    pub replay: Option<f64>,
    /// `--turns`: conversations, turn by turn (`concurrency` then counts conversations).
    pub conversations: Option<Conversations>,
    /// Open the connections the first requests will use before the first one is timed
    /// (`--no-preconnect` turns it off), so the first wave pays no connect storm; see
    /// `preconnect_count`.
    pub preconnect: bool,
    /// Empty every endpoint's prefix cache before the first request (`--reset-prefix-cache`).
    pub reset_prefix_cache: bool,
}

impl HttpConfig {
    pub fn describe(&self) -> WorkloadDesc {
        let traffic = match (&self.conversations, &self.source) {
            (Some(c), _) => Some(c.describe()),
            (None, Some(s)) => Some(s.describe()),
            (None, None) => None,
        };
        WorkloadDesc {
            prompt_tokens: match (&self.prompts, traffic) {
                (_, Some(t)) => t,
                (Prompts::Words(_), None) => self.prompt.to_string(),
                (Prompts::Approximate, None) => format!("~{}", self.prompt),
                (Prompts::Texts(t), None) if t.len() == 1 => {
                    format!("text ({} tokens)", t[0].tokens)
                }
                (Prompts::Texts(t), None) => format!("{} texts", t.len()),
                (Prompts::Server { .. }, None) => self.prompt.to_string(),
            },
            output_tokens: self.output.to_string(),
            batch: 1,
            load: Some(match (self.replay, self.rate, self.concurrency) {
                (Some(scale), _, _) => format!("replay ×{}", 1.0 / scale),
                (None, Some(r), Some(cap)) => format!("rate {r}/s (≤ {cap} in flight)"),
                (None, Some(r), None) => format!("rate {r}/s"),
                (None, None, c) if self.conversations.is_some() => {
                    format!("{} conversations at once", c.unwrap_or(1))
                }
                (None, None, c) => format!("concurrency {}", c.unwrap_or(1)),
            }),
        }
    }

    /// What the record says of the traffic (`None` for made-up lengths).
    pub fn traffic_info(&self) -> Option<TrafficInfo> {
        let mut info = match (&self.conversations, &self.source) {
            (Some(c), _) => c.info(),
            (None, Some(s)) => s.info(),
            (None, None) => return None,
        };
        info.time_scale = self.replay;
        if self.replay.is_none() {
            info.trace_span_s = None;
        }
        info.exact_lengths = info.exact_lengths || matches!(self.prompts, Prompts::Words(_));
        info.cache = Some("cached_tokens as each request's usage reports it".into());
        Some(info)
    }

    /// Requests the traffic bounds the run to: `--requests`, else every dataset row once (a
    /// replayed trace: at most every row).
    fn request_limit(&self) -> Option<u64> {
        let rows = self
            .source
            .as_ref()
            .and_then(RequestSource::rows)
            .map(|n| n as u64);
        match (self.requests, rows) {
            (Some(n), Some(rows)) if self.replay.is_some() => Some(n.min(rows)),
            (Some(n), _) => Some(n),
            (None, Some(rows)) if self.duration.is_none() || self.replay.is_some() => Some(rows),
            (None, _) => None,
        }
    }

    /// Whether requests go out on a schedule (a rate, a replayed trace) rather than as slots
    /// free up.
    fn open_loop(&self) -> bool {
        self.rate.is_some() || self.replay.is_some()
    }

    /// Requests in flight at most: the concurrency (default 1), or in an open loop its cap
    /// (none).
    fn in_flight_cap(&self) -> usize {
        if self.open_loop() {
            self.concurrency.unwrap_or(usize::MAX)
        } else {
            self.concurrency.unwrap_or(1)
        }
        .max(1)
    }

    /// `Control::AdjustLoad`: the rate of an open loop (a replay's speed), else the
    /// concurrency, ×2 per step.
    fn adjust_load(&mut self, steps: i64) {
        if let Some(scale) = self.replay {
            self.replay = Some((scale / doubling_factor(steps)).clamp(1e-6, 1e6));
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

/// The most requests in flight the load keys go to.
const MAX_CONCURRENCY: usize = 4096;

/// The most connections opened before the run (per run, over all endpoints).
const MAX_PRECONNECT: usize = 4096;

impl HttpConfig {
    /// Connections to open before the first timed request: one per request the first wave has
    /// in flight (the concurrency; an open loop: one second of arrivals, within its cap).
    /// Requests beyond them open their own, and their records say so.
    pub fn preconnect_count(&self) -> usize {
        if !self.preconnect {
            return 0;
        }
        let first_wave = match self.rate {
            Some(r) => (r.ceil() as usize).min(self.in_flight_cap()),
            None => self.in_flight_cap(),
        };
        first_wave.clamp(1, MAX_PRECONNECT)
    }
}

/// Opens `cfg.preconnect_count()` connections, spread over the endpoints as the requests will
/// be (round-robin), each origin's at once.
async fn preconnect(cfg: &HttpConfig, pool: &Arc<conn::Pool>) {
    let n = cfg.preconnect_count();
    if n == 0 || cfg.endpoints.is_empty() {
        return;
    }
    let mut per_origin: Vec<(conn::Origin, usize)> = Vec::new();
    for i in 0..n {
        let endpoint = &cfg.endpoints[i % cfg.endpoints.len()];
        let Ok(origin) = conn::Origin::of(&endpoint.url("/")) else {
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
        rt.block_on(run(cfg, tx, &control))
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
}

/// A launched request, as the scheduler remembers it.
struct Launched {
    index: u64,
    warmup: bool,
    endpoint: Endpoint,
    requested_prompt_tokens: usize,
    /// The prompt is `requested_prompt_tokens` long in the server's tokenizer.
    exact_prompt: bool,
    scheduled: Instant,
    origin: Option<Origin>,
}

async fn run(
    cfg: HttpConfig,
    tx: &Sender<Event>,
    control: &Receiver<Control>,
) -> Result<StopReason, String> {
    let events = Events::new(tx.clone());
    let result = drive(cfg, &events, control).await;
    // The steps still held go out before the engine's `Finished`.
    events.flush();
    result
}

async fn drive(
    mut cfg: HttpConfig,
    tx: &Events,
    control: &Receiver<Control>,
) -> Result<StopReason, String> {
    if cfg.endpoints.is_empty() {
        return Err("no --endpoint given".into());
    }
    // This machine's timer jitter, measured before anything else runs on the runtime.
    let calibration = probe::calibrate().await;
    let mut in_flight_cap = cfg.in_flight_cap();
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(in_flight_cap.min(4096))
        .build()
        .map_err(|e| format!("cannot build the http client: {}", request::describe(e)))?;
    let first = &cfg.endpoints[0];
    // The model list names the model (unless --served-model does) and, for a dataset, the
    // longest prompt + output the server takes.
    let wants_list =
        cfg.served_model.is_none() || matches!(cfg.source, Some(RequestSource::Dataset(_)));
    let listed = if wants_list {
        request::first_model(&client, first, cfg.api_key.as_deref()).await
    } else {
        Err("not asked".to_string())
    };
    let model = match (&cfg.served_model, &listed) {
        (Some(m), _) => m.clone(),
        (None, Ok(served)) => served.id.clone(),
        (None, Err(e)) => {
            return Err(format!(
                "cannot list the models of {} ({e}); pass --served-model NAME",
                first.display()
            ))
        }
    };
    if let Prompts::Server { texts } = &cfg.prompts {
        cfg.prompts = server_prompts(&client, &cfg, &model, texts.as_deref()).await?;
    }
    if cfg.reset_prefix_cache {
        for e in &cfg.endpoints {
            let done = cache::reset_prefix_cache(&client, e, cfg.api_key.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            let _ = tx.send(Event::Notice(Box::new(Notice::PrefixCacheReset(done))));
        }
    }
    // Rows the server cannot take (prompt + output beyond its max_model_len) are left out,
    // counted, before anything is sent.
    if let (Some(max), Some(RequestSource::Dataset(d))) = (
        listed.as_ref().ok().and_then(|s| s.max_model_len),
        cfg.source.as_mut(),
    ) {
        let output = cfg.output.max();
        d.restrict(max, output);
        if d.is_empty() {
            return Err(format!(
                "every dataset row is longer than the server's {max} positions (max_model_len); use shorter rows or a model that takes more"
            ));
        }
    }
    let pool = Arc::new(conn::Pool::new());
    preconnect(&cfg, &pool).await;
    let _ = tx.send(Event::RunStarted(Box::new(RunInfo {
        model: model_info(&model, &cfg.endpoints),
        workload: cfg.describe(),
        warmup_requests: cfg.warmup,
        threads: 0,
        traffic: cfg.traffic_info().map(Box::new),
    })));
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
    });

    // Dropped (and so stopped) when the run returns.
    let mut probe = JoinSet::new();
    probe.spawn(probe::watch(tx.sender(), probe::EVERY, calibration));
    probe.spawn(events::flush_every(tx.clone()));
    if cfg.conversations.is_some() {
        return conversation::run(cfg, shared, model, tx, control).await;
    }
    let limit_requests = cfg.request_limit();

    let started = Instant::now();
    let mut arrivals = Arrivals::new(cfg.rate, cfg.burstiness, cfg.seed ^ 0x5EED_A771_0A15)?;
    let mut next_due = started;
    // A replayed trace's clock: row times count from here (moved on by pauses).
    let mut replay_origin = started;
    let mut paused_at = started;
    let mut hold_until = started;
    let mut paused = false;
    let mut index: u64 = 0;
    let mut completed: u64 = 0;
    let mut failed: u64 = 0;
    let mut last_failure = String::new();
    // A sweep's cell has measured enough (`EndCell`): launch no more and let those in flight
    // end, as at the request limit, so the cell's drain is seen (see `sweep::held`).
    let mut ending = false;
    let mut tasks: JoinSet<(Launched, Result<Measured, RequestError>)> = JoinSet::new();
    loop {
        // Control messages first.
        loop {
            match control.try_recv() {
                // Dropping `tasks` aborts what is in flight.
                Ok(c @ Control::Stop(_)) => return Ok(c.stop().unwrap_or(StopReason::UserStop)),
                Ok(Control::EndCell) => ending = true,
                Ok(Control::Pause) if !paused => {
                    paused = true;
                    paused_at = Instant::now();
                    let _ = tx.send(Event::Paused);
                }
                Ok(Control::Resume) if paused => {
                    paused = false;
                    // A replayed trace goes on where it stopped: its clock skips the pause.
                    replay_origin += paused_at.elapsed();
                    next_due = match replay_due(&cfg, replay_origin, index) {
                        Some(due) => due,
                        None => Instant::now(),
                    };
                    let _ = tx.send(Event::Resumed);
                }
                Ok(Control::Pause | Control::Resume | Control::CellVerdict { .. }) => {}
                Ok(Control::ResetStats) => {
                    let _ = tx.send(Event::StatsReset);
                }
                Ok(Control::AdjustOutputTokens(delta)) => {
                    cfg.output = cfg.output.plus(delta);
                    let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
                }
                Ok(Control::AdjustLoad(steps)) => {
                    let before = cfg.replay;
                    cfg.adjust_load(steps);
                    in_flight_cap = cfg.in_flight_cap();
                    arrivals = Arrivals::new(cfg.rate, cfg.burstiness, cfg.seed ^ index)?;
                    next_due = next_due.min(Instant::now() + Duration::from_secs(1));
                    if let (Some(old), Some(new)) = (before, cfg.replay) {
                        // The trace time already covered stays covered; the rest runs faster.
                        let now = Instant::now();
                        let covered =
                            now.saturating_duration_since(replay_origin).as_secs_f64() / old;
                        replay_origin =
                            now - Duration::from_secs_f64(covered * new).min(now - started);
                        if let Some(due) = replay_due(&cfg, replay_origin, index) {
                            next_due = due;
                        }
                    }
                    let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
                }
                Ok(Control::AdjustPromptTokens(steps)) => {
                    cfg.prompt = cfg.prompt.doubled(steps);
                    let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Ok(StopReason::UserStop),
            }
        }
        if completed == 0 && failed >= GIVE_UP_AFTER_FAILURES {
            return Err(all_failed(failed, &last_failure));
        }

        // Launch what is due.
        let limit = if ending || limit_requests.is_some_and(|n| index >= n) {
            Some(StopReason::RequestLimit)
        } else if cfg.duration.is_some_and(|d| started.elapsed() >= d) {
            Some(StopReason::DurationLimit)
        } else {
            None
        };
        if let Some(reason) = &limit {
            if tasks.is_empty() {
                if completed == 0 && failed > 0 {
                    return Err(all_failed(failed, &last_failure));
                }
                return Ok(reason.clone());
            }
        }
        let now = Instant::now();
        if limit.is_none() && !paused && now >= hold_until {
            while tasks.len() < in_flight_cap
                && limit_requests.is_none_or(|n| index < n)
                && (!cfg.open_loop() || now >= next_due)
            {
                // Closed loop: a request is launched now (its time starts when it begins to
                // be sent, see `request::Start`).
                let scheduled = if cfg.open_loop() {
                    next_due
                } else {
                    Instant::now()
                };
                launch(&cfg, &shared, &model, index, scheduled, &mut tasks);
                index += 1;
                if let Some(due) = replay_due(&cfg, replay_origin, index) {
                    next_due = due;
                } else if let Some(arrivals) = arrivals.as_mut() {
                    next_due += arrivals.gap();
                }
            }
        }

        // Wait for a result, the next arrival, or the next look at the controls.
        let mut wake = Instant::now() + CONTROL_POLL;
        let on_schedule = cfg.open_loop() && !paused && tasks.len() < in_flight_cap;
        if on_schedule {
            wake = wake.min(next_due.checked_sub(TIMER_SLACK).unwrap_or(next_due));
        }
        if hold_until > Instant::now() {
            wake = wake.min(hold_until);
        }
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                let (launched, result) = match joined {
                    Ok(r) => r,
                    Err(e) => {
                        // A task panicked: the request is lost, the run goes on.
                        failed += 1;
                        last_failure = format!("client task failed: {e}");
                        let _ = tx.send(Event::Error { message: last_failure.clone(), fatal: false });
                        continue;
                    }
                };
                match result {
                    Ok(m) => {
                        completed += 1;
                        finish(&cfg, launched, m, tx);
                    }
                    Err(f) => {
                        failed += 1;
                        last_failure = f.reason.clone();
                        if cfg.rate.is_none() {
                            hold_until = Instant::now() + FAILURE_BACKOFF;
                        }
                        let elapsed_s = launched.scheduled.elapsed().as_secs_f64();
                        let _ = tx.send(Event::RequestFailed(Box::new(RequestFailed {
                            index: launched.index,
                            warmup: launched.warmup,
                            reason: f.reason,
                            status: f.status,
                            endpoint: Some(launched.endpoint.display().to_string()),
                            elapsed_s,
                        })));
                    }
                }
            }
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
        // The runtime's timer rounds up to the millisecond: a send due within that is waited
        // for on this thread, whose sleep is finer (the requests in flight are read on the
        // runtime's workers meanwhile).
        if on_schedule {
            let left = next_due.saturating_duration_since(Instant::now());
            if left <= TIMER_SLACK {
                std::thread::sleep(left);
            }
        }
    }
}

/// How late the runtime's timer may wake: it rounds deadlines up to the millisecond.
const TIMER_SLACK: Duration = Duration::from_micros(1500);

/// Gaps between open-loop arrivals: gamma-distributed with mean 1/rate, seeded.
struct Arrivals {
    rng: rand::rngs::StdRng,
    gaps: rand_distr::Gamma<f64>,
}

impl Arrivals {
    fn new(rate: Option<f64>, burstiness: f64, seed: u64) -> Result<Option<Arrivals>, String> {
        use rand::SeedableRng;
        let Some(rate) = rate else {
            return Ok(None);
        };
        let gaps = rand_distr::Gamma::new(burstiness, 1.0 / (rate * burstiness))
            .map_err(|e| format!("arrivals of rate {rate} and burstiness {burstiness}: {e}"))?;
        Ok(Some(Arrivals {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            gaps,
        }))
    }

    fn gap(&mut self) -> Duration {
        use rand_distr::Distribution;
        Duration::from_secs_f64(self.gaps.sample(&mut self.rng))
    }
}

/// When request `index` of a replayed trace is due: the trace's clock origin plus its row's
/// time, scaled (`--time-scale 0.5` is twice as fast); `None` outside a replay.
fn replay_due(cfg: &HttpConfig, origin: Instant, index: u64) -> Option<Instant> {
    let scale = cfg.replay?;
    let at_s = cfg.source.as_ref()?.dataset()?.at_s(index)?;
    Some(origin + Duration::from_secs_f64((at_s * scale).max(0.0)))
}

fn all_failed(failed: u64, last: &str) -> String {
    format!("every request failed ({failed} of {failed}); the last: {last}")
}

/// What one request sends: its prompt (text, or chat messages as written), its lengths, and
/// where it came from.
pub(crate) struct WhatToSend {
    pub prompt: String,
    pub messages: Option<Vec<(String, String)>>,
    pub prompt_tokens: usize,
    /// `prompt_tokens` is the server's count (made of its one-token words, or counted with
    /// its tokenizer), not an estimate.
    pub exact: bool,
    pub output_tokens: usize,
    pub origin: Option<Origin>,
}

/// Request `index`: from the traffic source (a dataset row, a shared-prefix group), else from
/// the given texts or made-up lengths.
fn what_to_send(cfg: &HttpConfig, index: u64) -> WhatToSend {
    let mut rng = SplitMix64::new(cfg.seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
    let made_up_tokens = cfg.prompt.pick(index, &mut rng);
    let output_tokens = cfg.output.pick(index, &mut rng);
    let words = match &cfg.prompts {
        Prompts::Words(w) => Some(w.as_ref()),
        _ => None,
    };
    if let Some(planned) = cfg.source.as_ref().and_then(|s| s.request(cfg.seed, index)) {
        let counted = cfg
            .source
            .as_ref()
            .and_then(RequestSource::dataset)
            .is_some_and(|d| d.counted);
        let exact = match &planned.prompt {
            Prompt::Made(_) => words.is_some(),
            Prompt::Text(_) | Prompt::Messages(_) => counted,
        };
        let (prompt, messages) = render(&planned.prompt, cfg.api, words, None);
        return WhatToSend {
            prompt,
            messages,
            prompt_tokens: planned.prompt_tokens,
            exact,
            output_tokens: planned.output_tokens.unwrap_or(output_tokens),
            origin: Some(planned.origin),
        };
    }
    let given = match &cfg.prompts {
        Prompts::Texts(texts) => texts.get((index as usize) % texts.len().max(1)),
        _ => None,
    };
    let (prompt, prompt_tokens, exact) = match (given, words) {
        (Some(t), _) => (t.text.clone(), t.tokens, t.exact),
        (None, Some(words)) => (
            words.prompt(made_up_tokens, rng.next_u64()),
            made_up_tokens,
            true,
        ),
        (None, None) => (
            request::approximate_prompt(made_up_tokens, rng.next_u64()),
            made_up_tokens,
            false,
        ),
    };
    WhatToSend {
        prompt,
        messages: None,
        prompt_tokens,
        exact,
        output_tokens,
        origin: None,
    }
}

/// A prompt as the API takes it: text for completions; for chat, messages as written (with
/// `system` first, when given), or one user message.
pub(crate) fn render(
    prompt: &Prompt,
    api: Api,
    words: Option<&PromptWords>,
    system: Option<&str>,
) -> (String, Option<Vec<(String, String)>>) {
    match (prompt, api) {
        (Prompt::Messages(m), Api::Chat) => {
            let mut messages: Vec<(String, String)> = system
                .map(|s| ("system".to_string(), s.to_string()))
                .into_iter()
                .collect();
            messages.extend(m.iter().map(|(r, t)| (r.name().to_string(), t.clone())));
            (String::new(), Some(messages))
        }
        (p, Api::Chat) if system.is_some() => {
            let messages = vec![
                ("system".to_string(), system.unwrap_or_default().to_string()),
                ("user".to_string(), p.text(words)),
            ];
            (String::new(), Some(messages))
        }
        (p, _) => (p.text(words), None),
    }
}

/// Starts request `index` as a task.
fn launch(
    cfg: &HttpConfig,
    shared: &Arc<Shared>,
    model: &str,
    index: u64,
    scheduled: Instant,
    tasks: &mut JoinSet<(Launched, Result<Measured, RequestError>)>,
) {
    let what = what_to_send(cfg, index);
    let endpoint = cfg.endpoints[(index as usize) % cfg.endpoints.len()].clone();
    let warmup = index < cfg.warmup;
    let (prompt_tokens, output_tokens, exact_prompt) =
        (what.prompt_tokens, what.output_tokens, what.exact);
    let ask = Ask {
        model: model.to_string(),
        api: cfg.api,
        prompt: what.prompt,
        messages: what.messages,
        session: None,
        output_tokens,
        exact_output: cfg.exact_output,
        chunk_usage: cfg.chunk_usage,
    };
    let _ = shared.events.send(Event::RequestStarted {
        index,
        warmup,
        prompt_tokens,
        output_tokens,
        batch: 1,
    });
    let launched = Launched {
        index,
        warmup,
        endpoint,
        requested_prompt_tokens: prompt_tokens,
        exact_prompt,
        scheduled,
        origin: what.origin,
    };
    let shared = shared.clone();
    let start = if cfg.open_loop() {
        request::Start::Due(scheduled)
    } else {
        request::Start::Launched(scheduled)
    };
    tasks.spawn(async move {
        let events = shared.events.clone();
        let result = request::measure(
            &shared.pool,
            &launched.endpoint,
            shared.api_key.as_deref(),
            &ask,
            start,
            shared.timeout,
            |token| send_token(&events, index, token),
        )
        .await;
        (launched, result)
    });
}

/// A content chunk of request `index` as the protocol says it: its first token, then a step.
fn send_token(events: &Events, index: u64, token: Token) {
    match token {
        Token::First { ttft_s } => {
            let _ = events.send(Event::PrefillDone { index, ttft_s });
        }
        Token::Step { step, itl_s } => events.step(DecodeStep::new(index, step, itl_s, None)),
    }
}

/// A measured stream ends as a request (its decode steps went out as they arrived).
fn finish(cfg: &HttpConfig, launched: Launched, m: Measured, tx: &Events) {
    let done = request_done(cfg.record_tokens, &launched, m);
    let _ = tx.send(Event::RequestDone(Box::new(done)));
}

/// TPOT = (E2E − TTFT) / (G − 1), G from the usage chunk when the server sent one, else the
/// content chunks counted.
fn request_done(record_tokens: bool, launched: &Launched, m: Measured) -> RequestDone {
    let (output_tokens, output_from) = match m.usage_completion_tokens {
        Some(g) if g > 0 => (g, "usage"),
        _ => (m.content_chunks, "counted"),
    };
    let (prompt_tokens, prompt_from) = match m.usage_prompt_tokens {
        Some(p) => (p, "usage"),
        None if launched.exact_prompt => (launched.requested_prompt_tokens, "tokenizer"),
        None => (launched.requested_prompt_tokens, "approx"),
    };
    RequestDone {
        index: launched.index,
        warmup: launched.warmup,
        batch: 1,
        prompt_tokens,
        output_tokens,
        ttft_s: m.ttft_s,
        tpot_s: (output_tokens > 1).then(|| (m.e2e_s - m.ttft_s) / (output_tokens - 1) as f64),
        e2e_s: m.e2e_s,
        gpu_ttft_s: None,
        gpu_decode_s: None,
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
            finish_reason: m.finish_reason,
            cached_tokens: m.cached_tokens,
            http: m.http,
            ttst_s: m.ttst_s,
        })),
        origin: launched.origin.clone().map(Box::new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gaps keep the asked mean rate; their spread is the gamma shape's (coefficient of
    /// variation 1/sqrt(burstiness): 1 for Poisson, 2 at 0.25, 0.5 at 4).
    #[test]
    fn arrivals_have_the_rate_and_the_spread_asked() {
        for (burstiness, cv_want) in [(1.0, 1.0), (0.25, 2.0), (4.0, 0.5)] {
            let mut a = Arrivals::new(Some(8.0), burstiness, 7).unwrap().unwrap();
            let gaps: Vec<f64> = (0..40_000).map(|_| a.gap().as_secs_f64()).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            let cv = var.sqrt() / mean;
            assert!(
                (mean * 8.0 - 1.0).abs() < 0.03,
                "b={burstiness}: mean gap {mean}"
            );
            assert!((cv / cv_want - 1.0).abs() < 0.05, "b={burstiness}: cv {cv}");
        }
        assert!(Arrivals::new(None, 1.0, 0).unwrap().is_none());
    }

    fn launched() -> Launched {
        Launched {
            index: 3,
            warmup: false,
            endpoint: Endpoint::parse("http://127.0.0.1:1").unwrap(),
            requested_prompt_tokens: 100,
            exact_prompt: false,
            scheduled: Instant::now(),
            origin: None,
        }
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
