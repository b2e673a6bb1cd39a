//! `--runs N --cooldown D`: the run repeated, checked. Every run is the planned one (the same
//! engine plan, so the same seed and requests, each with its own warmup); what makes no sense
//! repeated is one line and exit 2 here: a run with no end, a streamed record, a schedule
//! shared with other generators or started at a time.

use std::time::Duration;

use super::engine::EnginePlan;
use super::opts::RunOpts;
use crate::event::{CellLen, CellParams};
use crate::exit::Failure;
use crate::record::line::{Header, RepeatConfig};

/// A run repeated.
#[derive(Clone, Debug, PartialEq)]
pub struct Repeat {
    pub runs: usize,
    /// Idle between two runs.
    pub cooldown: Duration,
    /// The workload every run sends, as a cell of the record names it.
    pub params: CellParams,
    /// Steady requests per run when the run is a number of requests (0: it runs for a time).
    pub steady: u64,
}

impl Repeat {
    pub fn config(&self) -> RepeatConfig {
        RepeatConfig {
            runs: self.runs,
            cooldown_s: self.cooldown.as_secs_f64(),
        }
    }
}

/// `--runs` checked against the rest of the plan; `None` without it.
pub fn plan(
    opts: &RunOpts,
    engine: &EnginePlan,
    header: &Header,
) -> Result<Option<Repeat>, Failure> {
    let Some(runs) = opts.repeat.runs else {
        return Ok(None);
    };
    if opts.output.jsonl {
        return Err(Failure::usage(
            "--jsonl with --runs: the runs' record is not streamed; write it with --record FILE and follow that file (infertop follow FILE)",
        ));
    }
    let s = &opts.server;
    if s.shard.is_some() || s.start_at.is_some() || s.clock_ref.is_some() {
        return Err(Failure::usage(
            "--shard, --start-at, --clock-ref with --runs: repeated runs are sent from one generator, one after another; repeat the sharded run itself",
        ));
    }
    let traffic = engine.traffic();
    let limit = traffic.request_limit();
    if limit.is_none() && traffic.duration.is_none() {
        return Err(Failure::usage(format!(
            "--runs {runs}: each run needs an end to be repeated; give --requests N or --duration D"
        )));
    }
    let warmup = traffic.warmup;
    let steady = match (limit, traffic.duration) {
        (Some(n), None) if n <= warmup => {
            return Err(Failure::usage(format!(
                "--requests {n}: each run's first --warmup {warmup} are warmup, leaving none to compare across runs; give more than {warmup}"
            )))
        }
        (Some(n), None) => n - warmup,
        _ => 0,
    };
    let c = &header.config;
    let server = opts.is_server();
    let params = CellParams {
        batch: c.batch,
        prompt_tokens: CellLen::from(c.prompt_tokens.as_str()),
        output_tokens: CellLen::from(c.output_tokens.as_str()),
        // A server's load, as a sweep's cell has it (a closed loop of 1 by default), so its
        // throughput is measured over the interval the load was held.
        concurrency: match (server, c.rate) {
            (true, None) => Some(c.concurrency.unwrap_or(1)),
            _ => c.concurrency,
        },
        rate: c.rate,
        ..CellParams::default()
    };
    Ok(Some(Repeat {
        runs,
        cooldown: opts.repeat.cooldown.unwrap_or(Duration::ZERO),
        params,
        steady,
    }))
}
