//! `--determinism`'s plan: the run's flags checked for what a comparison of outputs needs (a
//! server, a closed loop of more than one request in flight, a fixed number of single
//! prompts, greedy sampling), then the run planned as any other (`plan::run`) and its http
//! engine made into the two passes (see `determinism`): the same prompts (no sweep salt),
//! with their text kept, one at a time and then `--concurrency` at once.

use serde_json::Value;

use super::opts::RunOpts;
use super::{EnginePlan, RunPlan};
use crate::determinism::pass_name;
use crate::engine::http::{Api, HttpConfig};
use crate::exit::Failure;
use crate::summary::SummaryFormat;

/// Prompts per pass without `--requests`: this many times the concurrency, so that most of
/// the loaded pass runs with every slot full.
pub const REQUESTS_PER_SLOT: u64 = 4;

/// A `--determinism` run, planned.
pub struct DeterminismPlan {
    /// The run's plan (record, header, telemetry, outputs); its engine is the loaded pass's.
    pub run: RunPlan,
    /// Alone (`concurrency 1`), then loaded (`concurrency N`).
    pub passes: [HttpConfig; 2],
    pub concurrency: usize,
    /// Prompts each pass sends.
    pub prompts: u64,
    /// Tokens of each output compared at most (the longest output asked for).
    pub max_output_tokens: usize,
}

/// Plans `infertop --endpoint URL --determinism …`: every mistake is one line naming its
/// flag, before anything starts.
pub fn plan(opts: &RunOpts) -> Result<DeterminismPlan, Failure> {
    check(opts)?;
    let mut run = super::run(opts)?;
    let EnginePlan::Http(h) = &run.engine else {
        return Err(Failure::usage(
            "--determinism: compares a server's outputs; give --endpoint URL",
        ));
    };
    if !h.traffic.shard.is_whole() {
        return Err(Failure::usage(format!(
            "--shard {}: --determinism sends both passes from one generator; run it without a shard (nor JOB_COMPLETION_INDEX or SLURM_PROCID in its environment)",
            h.traffic.shard
        )));
    }
    let concurrency = opts.server.concurrency.unwrap_or(1);
    let prompts = match h.traffic.request_limit() {
        Some(n) => n,
        None => REQUESTS_PER_SLOT.saturating_mul(concurrency as u64),
    };
    if prompts < concurrency as u64 {
        return Err(Failure::usage(format!(
            "--requests {prompts}: fewer than --concurrency {concurrency}, so the loaded pass would never have {concurrency} in flight; give --requests {concurrency} or more"
        )));
    }
    let output = h.traffic.output.max();
    let max_output_tokens = h
        .traffic
        .source
        .as_ref()
        .map_or(output, |s| s.max_positions(output).max(output))
        .max(1);
    let pass = |c: usize| {
        let mut p = h.as_ref().clone();
        p.concurrency = Some(c);
        p.traffic.requests = Some(prompts);
        p.prompt_salt = 0;
        // The outputs' text and pieces come with each request (and go in the record).
        p.record_tokens = true;
        p.shape.pass = Some(pass_name(c));
        p
    };
    let passes = [pass(1), pass(concurrency)];
    run.header.config.requests = Some(prompts);
    Ok(DeterminismPlan {
        run,
        passes,
        concurrency,
        prompts,
        max_output_tokens,
    })
}

/// The flags a comparison of outputs cannot take, each refused in one line.
fn check(opts: &RunOpts) -> Result<(), Failure> {
    let (s, w, t) = (&opts.server, &opts.workload, &opts.traffic);
    let usage = |m: &str| Err(Failure::usage(m));
    if s.endpoint.is_empty() {
        return usage("--determinism: compares a server's outputs; give --endpoint URL");
    }
    match s.concurrency {
        Some(c) if c > 1 => {}
        given => {
            return Err(Failure::usage(format!(
                "--concurrency {}: --determinism compares one request at a time with N at once; give --concurrency N with N > 1",
                given.unwrap_or(1)
            )))
        }
    }
    if s.rate.is_some() {
        return usage("--rate: --determinism runs closed loops (one request at a time, then --concurrency at once); drop --rate");
    }
    if t.replay {
        return usage("--replay: --determinism runs closed loops (one request at a time, then --concurrency at once); drop --replay");
    }
    if t.turns.is_some() {
        return usage("--turns: a conversation resends its replies, so the second pass's prompts would follow the first pass's outputs; --determinism sends single prompts");
    }
    if w.duration.is_some() {
        return usage("--duration: --determinism sends the same prompts in both passes; give --requests N instead");
    }
    if w.sampling.is_some() {
        return usage("--sampling: samples on the host (the candle engine); --determinism compares a server's greedy outputs");
    }
    if let Some(t) = s.extra_body.as_ref().and_then(|b| b.get("temperature")) {
        if t.as_f64() != Some(0.0) {
            return Err(Failure::usage(format!(
                "--extra-body: sets temperature {t}; --determinism compares greedy outputs (temperature 0)"
            )));
        }
    }
    if matches!(s.api, Api::Embeddings | Api::Rerank) {
        return Err(Failure::usage(format!(
            "--api {}: generates no output to compare; --determinism takes completions, chat, responses or messages",
            s.api.name()
        )));
    }
    if s.shard.is_some() || s.start_at.is_some() {
        return usage(
            "--shard/--start-at: --determinism sends both passes from one generator; drop them",
        );
    }
    if opts.output.jsonl {
        return usage("--jsonl: --determinism prints its comparison on stdout; write the record with --record FILE");
    }
    if opts.output.format == SummaryFormat::Csv {
        return usage("--format csv: --determinism prints md or json");
    }
    Ok(())
}

/// The API the passes go through, once the server has said (`--api auto` resolved on the
/// first pass): both passes take it, and where it takes a `seed` (completions, chat) each
/// request carries the run's `--seed` unless `--extra-body` gives one. Returns the seed sent.
pub fn settle_api(passes: &mut [HttpConfig; 2], seed: u64) -> Option<u64> {
    let [first, second] = passes;
    second.api = first.api;
    second.shape.api_picked = first.shape.api_picked.clone();
    if !matches!(first.api, Api::Completions | Api::Chat) {
        return None;
    }
    let mut extra = first.shape.extra.as_ref().clone();
    let body = extra.body.get_or_insert_with(Default::default);
    let sent = match body.get("seed") {
        Some(given) => given.as_u64(),
        None => {
            body.insert("seed".into(), Value::from(seed));
            Some(seed)
        }
    };
    let extra = std::sync::Arc::new(extra);
    first.shape.extra = extra.clone();
    second.shape.extra = extra;
    sent
}

/// Whether the server's prefix cache cannot serve one pass the other's prompts: it is emptied
/// before each pass (`--reset-prefix-cache`), or the requests ask llama.cpp's server not to
/// use it (`"cache_prompt": false` in `--extra-body`).
pub fn prefix_cache_ruled_out(h: &HttpConfig) -> bool {
    let unused = h
        .shape
        .extra
        .body
        .as_ref()
        .and_then(|b| b.get("cache_prompt"))
        .is_some_and(|v| v == &Value::Bool(false));
    h.reset_prefix_cache || unused
}
