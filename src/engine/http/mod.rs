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

pub mod cache;
mod completions;
pub mod conn;
mod conversation;
mod events;
pub mod probe;
pub mod request;
mod schedule;
pub mod sse;
mod timings;
pub mod tokenize;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use tokio::task::JoinSet;

use crate::engine::control::Inbox;
use crate::engine::workload::{doubled, doubling_factor};
use crate::event::{
    ClientDetail, Control, DecodeStep, Event, ModelInfo, Notice, Origin, RequestDone, RunInfo,
    StopReason, TrafficInfo, WorkloadDesc,
};
use crate::traffic::{Prompt, RequestSource, TrafficPlan};
use crate::util::fnv1a;
use completions::Launched;
use events::Events;
pub use request::{Endpoint, PromptWords};
use request::{Measured, Token};
pub use schedule::GIVE_UP_AFTER_FAILURES;
use schedule::MAX_CONCURRENCY;

/// The engine thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const HTTP_THREAD: &str = "infertop-engine-http";

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
    pub record_tokens: bool,
    /// Open the connections the first requests will use before the first one is timed
    /// (`--no-preconnect` turns it off), so the first wave pays no connect storm; see
    /// `preconnect_count`.
    pub preconnect: bool,
    /// Empty every endpoint's prefix cache before the first request (`--reset-prefix-cache`).
    pub reset_prefix_cache: bool,
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
            output_tokens: t.output.to_string(),
            batch: 1,
            load: Some(match (t.replay, self.rate, self.concurrency) {
                (Some(scale), _, _) => format!("replay ×{}", 1.0 / scale),
                (None, Some(r), Some(cap)) => format!("rate {r}/s (≤ {cap} in flight)"),
                (None, Some(r), None) => format!("rate {r}/s"),
                (None, None, c) if t.conversations.is_some() => {
                    format!("{} conversations at once", c.unwrap_or(1))
                }
                (None, None, c) => format!("concurrency {}", c.unwrap_or(1)),
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
    /// (none).
    fn in_flight_cap(&self) -> usize {
        if self.open_loop() {
            self.concurrency.unwrap_or(usize::MAX)
        } else {
            self.concurrency.unwrap_or(1)
        }
        .max(1)
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
}

async fn run(
    cfg: HttpConfig,
    tx: &Sender<Event>,
    control: Receiver<Control>,
) -> Result<StopReason, String> {
    let events = Events::new(tx.clone());
    let mut inbox = Inbox::new(control);
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
    let calibration = probe::calibrate().await;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(cfg.in_flight_cap().min(4096))
        .build()
        .map_err(|e| format!("cannot build the http client: {}", request::describe(e)))?;
    let model = discover(&client, &mut cfg, tx).await?;
    let pool = Arc::new(conn::Pool::new());
    preconnect(&cfg, &pool).await;
    let _ = tx.send(Event::RunStarted(Box::new(RunInfo {
        model: model_info(&model, &cfg.endpoints),
        workload: cfg.describe(),
        warmup_requests: cfg.traffic.warmup,
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
    if cfg.traffic.conversations.is_some() {
        conversation::run(cfg, shared, model, tx, inbox).await
    } else {
        completions::run(cfg, shared, model, tx, inbox).await
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
    let first = &cfg.endpoints[0];
    let has_dataset = cfg
        .traffic
        .source
        .as_deref()
        .is_some_and(|s| matches!(s, RequestSource::Dataset(_)));
    let wants_list = cfg.served_model.is_none() || has_dataset;
    let listed = if wants_list {
        request::first_model(client, first, cfg.api_key.as_deref()).await
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

/// A content chunk of request `index` as the protocol says it: its first token, then a step.
fn send_token(events: &Events, index: u64, token: Token) {
    match token {
        Token::First { ttft_s } => {
            let _ = events.send(Event::PrefillDone { index, ttft_s });
        }
        Token::Step { step, itl_s } => events.step(DecodeStep::new(index, step, itl_s, None)),
    }
}

/// TPOT = (E2E − TTFT) / (G − 1), G from the usage chunk when the server sent one, else the
/// content chunks counted.
fn request_done(record_tokens: bool, launched: &Launched, m: Measured) -> RequestDone {
    let (output_tokens, output_from) = match m.usage_completion_tokens {
        Some(g) if g > 0 => (g, "usage"),
        _ => (m.content_chunks, "counted"),
    };
    let server = server_timings(&m);
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
            // llama.cpp says its cache in `timings.cache_n` alone.
            cached_tokens: m
                .cached_tokens
                .or(server.as_ref().and_then(|s| s.cached_tokens)),
            http: m.http,
            ttst_s: m.ttst_s,
            server,
        })),
        origin: launched.origin.clone().map(Box::new),
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
