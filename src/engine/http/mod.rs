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
//!
//! The run's configuration is `config`; what each request sends, `prompts`; a stream timed and
//! read chunk by chunk, `request` and `reading` (what it came to: `outcome`); and what the loops
//! hand the run, a chunk's events and a finished request's `RequestDone`, `finished`.

pub mod api;
pub mod cache;
pub mod canary;
pub mod cancel;
pub mod clock;
mod completions;
mod config;
pub mod conn;
mod conversation;
mod events;
pub mod extra;
mod finished;
mod outcome;
pub mod parts;
pub mod probe;
mod prompts;
mod reading;
pub mod request;
mod schedule;
pub mod sse;
mod timings;
pub mod tokenize;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use tokio::task::JoinSet;

use crate::engine::control::Inbox;
use crate::event::{ApiPicked, Control, Event, ModelInfo, Notice, RunInfo, StopReason};
pub use api::{Api, Message, ToolCall, ToolChoice, Tools};
pub use config::{HttpConfig, PromptText, Prompts, Shape};
use events::Events;
use outcome::Measured;
pub use request::Endpoint;
pub use schedule::{open_loop_due_s, GIVE_UP_AFTER_FAILURES};

/// The engine thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const HTTP_THREAD: &str = "infertop-engine-http";

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
        peak: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::TrafficPlan;

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
}
