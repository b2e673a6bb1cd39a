//! The http engine's configuration: where prompts come from (`Prompts`), what every request
//! is shaped like (`Shape`), and the whole run (`HttpConfig`), as the planner builds it.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::api::{Api, ToolChoice, Tools};
use super::request::Endpoint;
use super::schedule::MAX_CONCURRENCY;
use super::{canary, cancel, extra};
use crate::event::{TrafficInfo, WorkloadDesc};
use crate::traffic::len::{doubled, doubling_factor};
use crate::traffic::words::PromptWords;
use crate::traffic::{ThinkTime, TrafficPlan};

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
    pub(super) fn tools_for(&self, row_tools: Option<&str>) -> Option<Arc<Tools>> {
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
    pub(super) fn open_loop(&self) -> bool {
        self.rate.is_some() || self.traffic.replay.is_some()
    }

    /// Requests in flight at most: the concurrency (default 1), or in an open loop its cap
    /// (none); a shard holds its share of it (`Shard::share`).
    pub(super) fn in_flight_cap(&self) -> usize {
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
    pub(super) fn schedule_origin(&self) -> Instant {
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
    pub(super) fn adjust_load(&mut self, steps: i64) {
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
