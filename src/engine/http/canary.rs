//! A canary lane (`--probe 'every=1s,prompt=32,output=8'`): small requests of a fixed size,
//! one every `every`, sent beside the main load by a client of their own (its own connections),
//! and counted apart. What a small request waits while heavy ones run is what a user of the
//! server feels; the main load's statistics cannot show it, since its own requests are the heavy
//! ones. Each canary's prompt is fresh text of the same length (its own seed), so it is a real
//! prefill of that many tokens, not a prefix-cache hit.
//!
//! A canary's result goes out as `Event::Canary`, never as a request of the run: it is in no
//! statistic of the run, no request count, no goodput.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::api::{Api, Ask};
use super::conn::Pool;
use super::events::Events;
use super::request::{self, Endpoint};
use crate::event::{CanaryDone, Event};
use crate::traffic::words::PromptWords;

/// `--probe`, parsed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CanaryPlan {
    /// One canary request every this long (its send does not wait for the one before).
    pub every: Duration,
    /// Its prompt and output tokens.
    pub prompt: usize,
    pub output: usize,
}

/// At most this many canaries in flight: a server that stops answering is not sent a pile.
const MAX_IN_FLIGHT: usize = 16;

impl CanaryPlan {
    /// `every=1s,prompt=32,output=8` (defaults: every 1s, prompt 32, output 8).
    pub fn parse(raw: &str) -> Result<CanaryPlan, String> {
        let mut plan = CanaryPlan {
            every: Duration::from_secs(1),
            prompt: 32,
            output: 8,
        };
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!(
                    "`{part}` is not key=value (write e.g. every=1s,prompt=32,output=8)"
                ));
            };
            let count = |what: &str| -> Result<usize, String> {
                match value.trim().parse::<usize>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(format!(
                        "{what} `{value}` is not a number of tokens above 0"
                    )),
                }
            };
            match key.trim() {
                "every" => {
                    let s = crate::stats::parse_duration_s(value).map_err(|_| {
                        format!("every `{value}` is not a duration (e.g. 500ms, 1s)")
                    })?;
                    if !(s.is_finite() && s >= 0.01) {
                        return Err(format!(
                            "every `{value}` is too short (10ms at least: a canary measures, it does not load)"
                        ));
                    }
                    plan.every = Duration::from_secs_f64(s);
                }
                "prompt" => plan.prompt = count("prompt")?,
                "output" => plan.output = count("output")?,
                other => {
                    return Err(format!(
                        "unknown key `{other}` (keys: every, prompt, output; e.g. every=1s,prompt=32,output=8)"
                    ))
                }
            }
        }
        Ok(plan)
    }

    /// `every 1s, prompt 32, output 8`, as the record's configuration and the summary say it.
    pub fn words(&self) -> String {
        format!(
            "every {}, prompt {}, output {}",
            crate::util::format::duration(self.every.as_secs_f64(), true),
            self.prompt,
            self.output
        )
    }
}

/// What the lane sends with: the run's server, API, model and what goes with every request.
pub struct Lane {
    pub plan: CanaryPlan,
    pub endpoint: Endpoint,
    pub api: Api,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub extra: Arc<super::extra::Extra>,
    /// The server's tokenizer's words, when the run has them (exact prompt lengths).
    pub words: Option<Arc<PromptWords>>,
    /// Ask for the running usage in every chunk, as the run does.
    pub chunk_usage: bool,
    pub chunk_timings: bool,
    /// Seeds the canaries' prompt texts.
    pub seed: u64,
}

impl Lane {
    /// Canary `index`'s request.
    fn ask(&self, index: u64) -> Ask {
        let seed = crate::traffic::request_seed(self.seed ^ 0x6361_6e61_7279, index);
        let prompt = match &self.words {
            Some(w) => w.prompt(self.plan.prompt, seed),
            None => crate::traffic::words::approximate_prompt(self.plan.prompt, seed),
        };
        Ask {
            model: self.model.clone(),
            api: self.api,
            prompt,
            messages: None,
            session: None,
            output_tokens: self.plan.output,
            exact_output: true,
            chunk_usage: self.chunk_usage,
            chunk_timings: self.chunk_timings,
            tools: None,
            inputs: Vec::new(),
            extra: self.extra.clone(),
        }
    }
}

/// The canary lane on a thread of its own, for `watch` (which runs no engine): the model is
/// `model`, else the first of the server's `/v1/models`; each result goes to `tx` as an
/// `Event::Canary`, for as long as the process runs. An error (no runtime, no model) is said once,
/// as an `Event::Error`, and the lane ends.
pub fn spawn(
    plan: CanaryPlan,
    endpoint: Endpoint,
    model: Option<String>,
    api_key: Option<String>,
    tx: crossbeam_channel::Sender<Event>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("infertop-canary".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Event::Error {
                        message: format!("--probe: cannot start the canary lane: {e}"),
                        fatal: false,
                    });
                    return;
                }
            };
            runtime.block_on(async move {
                let model = match model {
                    Some(m) => m,
                    None => match first_model(&endpoint, api_key.as_deref()).await {
                        Ok(m) => m,
                        Err(e) => {
                            let _ = tx.send(Event::Error {
                                message: format!("--probe: {e}; pass --probe-model NAME"),
                                fatal: false,
                            });
                            return;
                        }
                    },
                };
                let lane = Lane {
                    plan,
                    endpoint,
                    api: Api::Completions,
                    model,
                    api_key,
                    timeout: Duration::from_secs(60),
                    extra: Arc::default(),
                    words: None,
                    chunk_usage: false,
                    chunk_timings: false,
                    seed: 0,
                };
                // Runs as long as the process (a watch ends by exiting).
                run(lane, Events::new(tx)).await;
            });
        })
}

/// The first model of the server's `/v1/models`.
async fn first_model(endpoint: &Endpoint, api_key: Option<&str>) -> Result<String, String> {
    let url = endpoint.url("/v1/models");
    let mut req = reqwest::Client::new()
        .get(url.clone())
        .timeout(Duration::from_secs(10));
    if let Some(k) = api_key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.map_err(|e| {
        format!(
            "cannot list the models of {url} ({})",
            crate::util::http_error(e)
        )
    })?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| format!("{url} ({})", crate::util::http_error(e)))?;
    let body: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| format!("{url} answered {status} without a model list"))?;
    body["data"][0]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{url} lists no model"))
}

/// Sends a canary every `plan.every` until dropped (the run's end aborts it), each result as
/// an `Event::Canary`.
pub async fn run(lane: Lane, events: Events) {
    let lane = Arc::new(lane);
    // A client of its own: the main load's connections are not shared, nor waited for.
    let pool = Arc::new(Pool::new(true));
    let mut tasks: JoinSet<CanaryDone> = JoinSet::new();
    let mut next = Instant::now();
    let mut index = 0u64;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {
                next += lane.plan.every;
                // Late (a busy machine): the next one is a full interval away, not a burst.
                let now = Instant::now();
                if next < now {
                    next = now + lane.plan.every;
                }
                if tasks.len() >= MAX_IN_FLIGHT {
                    continue;
                }
                let (lane, pool) = (lane.clone(), pool.clone());
                let i = index;
                index += 1;
                tasks.spawn(async move { one(&lane, &pool, i).await });
            }
            Some(Ok(done)) = tasks.join_next(), if !tasks.is_empty() => {
                let _ = events.send(Event::Canary(Box::new(done)));
            }
        }
    }
}

/// One canary, timed from its send.
async fn one(lane: &Lane, pool: &Arc<Pool>, index: u64) -> CanaryDone {
    let ask = lane.ask(index);
    let start = Instant::now();
    let result = request::measure(
        pool,
        &lane.endpoint,
        lane.api_key.as_deref(),
        &ask,
        request::Start::Due(start),
        lane.timeout,
        None,
        |_| {},
    )
    .await;
    match result {
        Ok(m) => {
            let output_tokens = m.usage_completion_tokens.unwrap_or(m.content_chunks);
            CanaryDone {
                index,
                prompt_tokens: m.usage_prompt_tokens.unwrap_or(lane.plan.prompt),
                output_tokens,
                ttft_s: Some(m.ttft_s),
                tpot_s: (output_tokens > 1 && m.content_chunks > 1)
                    .then(|| (m.e2e_s - m.ttft_s) / (output_tokens - 1) as f64),
                e2e_s: m.e2e_s,
                error: None,
            }
        }
        Err(e) => CanaryDone {
            index,
            prompt_tokens: lane.plan.prompt,
            output_tokens: 0,
            ttft_s: None,
            tpot_s: None,
            e2e_s: start.elapsed().as_secs_f64(),
            error: Some(e.reason),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_with_defaults_and_refuses() {
        let p = CanaryPlan::parse("every=250ms,prompt=64,output=4").unwrap();
        assert_eq!(
            (p.every, p.prompt, p.output),
            (Duration::from_millis(250), 64, 4)
        );
        let p = CanaryPlan::parse("").unwrap();
        assert_eq!(
            (p.every, p.prompt, p.output),
            (Duration::from_secs(1), 32, 8)
        );
        for (bad, says) in [
            ("every=soon", "not a duration"),
            ("every=1ms", "too short"),
            ("prompt=0", "above 0"),
            ("output=x", "above 0"),
            ("rate=2", "unknown key `rate`"),
            ("1s", "not key=value"),
        ] {
            let e = CanaryPlan::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
