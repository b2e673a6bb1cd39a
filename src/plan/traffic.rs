//! The plan of the traffic flags (`--dataset`, `--replay`, `--turns`, `--shared-prefix`, ...,
//! declared in `opts.rs` with the other groups): the dataset read and checked, its lengths
//! counted (exactly with a tokenizer, else estimated and said to be), rows too long for the
//! model left out and counted, conversations gathered, a shared-prefix spec checked against
//! the model. Every mistake is one line, exit 2,
//! before anything is sent.

use std::sync::Arc;

use super::opts::RunOpts;
use crate::exit::Failure;
use crate::traffic::dataset::{self, ReadOptions};
use crate::traffic::{
    synthetic_conversations, Conversations, DatasetPlan, LenSpec, RequestSource, TrafficPlan, Turns,
};

/// How prompt texts are counted: a tokenizer (exact), else about four characters a token.
pub fn counter(tokenizer: Option<&tokenizers::Tokenizer>) -> (impl Fn(&str) -> usize + '_, bool) {
    (
        move |text: &str| match tokenizer.and_then(|tk| tk.encode(text, false).ok()) {
            Some(e) => e.get_ids().len(),
            None => text.chars().count().div_ceil(4),
        },
        tokenizer.is_some(),
    )
}

/// Plans the traffic of `opts` for an engine: `server` (the http engine, which may replay
/// and converse) or not; `prompt` the made-up prompt lengths (`None`: each given prompt's
/// own); `tokenizer` counts lengths exactly; `max_positions` (the model's) leaves out rows
/// that cannot fit.
pub fn plan(
    opts: &RunOpts,
    server: bool,
    prompt: Option<LenSpec>,
    tokenizer: Option<&tokenizers::Tokenizer>,
    max_positions: Option<usize>,
) -> Result<TrafficPlan, Failure> {
    let t = &opts.traffic;
    let w = &opts.workload;
    let output = w.output_tokens.max();
    if t.replay && !server {
        return Err(Failure::usage(
            "--replay: the candle engine runs one request at a time, so it cannot keep a trace's arrival times; replay against a server (--endpoint), or drop --replay to take the rows' prompts and lengths",
        ));
    }
    let api = opts.server.api;
    if t.turns.is_some()
        && server
        && !(api.takes_messages() || api == crate::engine::http::Api::Auto)
    {
        return Err(Failure::usage(
            "--turns: a conversation resends its history as chat messages; add --api chat (or responses, messages)",
        ));
    }
    if let Some(sp) = &t.shared_prefix {
        if let Some(max) = max_positions {
            let need = sp.prefix + sp.question + output;
            if need > max {
                return Err(Failure::usage(format!(
                    "--shared-prefix: prefix {} + question {} + output {output} = {need} tokens exceed the model's {max} positions; make them shorter",
                    sp.prefix, sp.question
                )));
            }
        }
    }
    let mut plan = TrafficPlan {
        prompt,
        output: w.output_tokens.clone(),
        seed: w.seed,
        warmup: w.warmup,
        requests: w.requests,
        duration: w.duration,
        source: None,
        conversations: None,
        replay: t.replay.then_some(t.time_scale),
        shard: crate::traffic::Shard::WHOLE,
    };
    let dataset = match &t.dataset {
        Some(path) => Some(read_dataset(opts, path, tokenizer, max_positions, output)?),
        None => None,
    };
    if let Some(turns) = t.turns {
        let (list, info, exact) = match (dataset, t.conversations) {
            (Some(d), _) => {
                let list = d.conversations();
                if !list.iter().any(|c| c.turns.len() > 1) {
                    return Err(Failure::usage(format!(
                        "--turns: {} has no conversations (every row is one turn); use a ShareGPT file, messages with several user turns, or rows with session_id, or drop --turns",
                        d.ds.path.display()
                    )));
                }
                let exact = d.counted;
                (list, Some(d.ds.info.clone()), exact)
            }
            (None, Some(n)) => {
                let k = match turns {
                    Turns::First(k) => k,
                    Turns::All => {
                        return Err(Failure::usage(
                            "--turns all: synthetic conversations need a number of turns (e.g. --conversations 100 --turns 4)",
                        ))
                    }
                };
                let prompt = w
                    .prompt_tokens
                    .clone()
                    .unwrap_or(crate::traffic::LenSpec::Fixed(128));
                if let Some(max) = max_positions {
                    let need = k * (prompt.max() + output);
                    if need > max {
                        return Err(Failure::usage(format!(
                            "--turns {k}: a conversation's last turn holds {need} tokens of history, over the model's {max} positions; fewer turns or shorter -p/-n"
                        )));
                    }
                }
                (synthetic_conversations(n, k, &prompt, w.seed), None, false)
            }
            (None, None) => return Err(Failure::usage(
                "--turns: give --dataset FILE (its conversations) or --conversations N (synthetic)",
            )),
        };
        plan.conversations = Some(Arc::new(Conversations {
            list,
            turns,
            think: t.think_time,
            dataset: info,
            exact_lengths: exact,
        }));
        return Ok(plan);
    }
    plan.source = match (dataset, &t.shared_prefix) {
        (Some(d), _) => Some(Arc::new(RequestSource::Dataset(Box::new(d)))),
        (None, Some(sp)) => Some(Arc::new(RequestSource::SharedPrefix(sp.clone()))),
        (None, None) => None,
    };
    if let (Some(_), Some(d)) = (
        plan.replay,
        plan.source.as_deref().and_then(RequestSource::dataset),
    ) {
        if !d.ds.info.timed {
            let first =
                d.ds.rows()
                    .iter()
                    .find(|r| r.at_s().is_none())
                    .map(|r| r.line)
                    .unwrap_or(0);
            return Err(Failure::usage(format!(
                "--replay: {} has rows without a time (the first at line {first}); give every row a timestamp or delay, or drop --replay",
                d.ds.path.display()
            )));
        }
    }
    Ok(plan)
}

/// Reads, counts and selects the dataset's rows.
fn read_dataset(
    opts: &RunOpts,
    path: &std::path::Path,
    tokenizer: Option<&tokenizers::Tokenizer>,
    max_positions: Option<usize>,
    output: usize,
) -> Result<DatasetPlan, Failure> {
    let t = &opts.traffic;
    let read = ReadOptions {
        format: t.dataset_format,
        filter: t.dataset_filter.clone().map(|f| f.0).unwrap_or_default(),
        skip_bad_rows: t.skip_bad_rows,
    };
    let ds = dataset::read(path, &read)
        .map_err(|e| Failure::usage_or_signal(format!("--dataset {e}")))?;
    let mut plan = DatasetPlan::new(
        ds,
        t.dataset_order,
        opts.workload.seed,
        if t.turns.is_some() {
            None
        } else {
            opts.workload.requests
        },
        t.block_size,
    );
    let (count, exact) = counter(tokenizer);
    plan.count_tokens(count, exact)
        .map_err(|e| Failure::usage_or_signal(format!("--dataset {}: {e}", path.display())))?;
    if let Some(max) = max_positions {
        plan.restrict(max, output);
        if plan.is_empty() {
            return Err(Failure::usage(format!(
                "--dataset {}: every row is longer than the model's {max} positions (prompt + output); use shorter rows or a model that takes more",
                path.display()
            )));
        }
    }
    Ok(plan)
}
