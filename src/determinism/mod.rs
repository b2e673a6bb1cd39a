//! `--determinism`: whether a server gives a prompt the same greedy output under load as it
//! gives it alone. Servers are meant to (batch-invariant kernels), and often do not: the
//! batch a request shares changes the order of its reductions, and an argmax that was close
//! flips. The same prompts go out twice, greedily (temperature 0, and a fixed `seed` where
//! the API takes one): first one at a time, then `--concurrency N` at once; each prompt's two
//! outputs are compared piece by piece as they were streamed.
//!
//! The shape: a two-cell sweep of one plan, without a sweep's extras. The passes are the
//! run's own http engine twice (concurrency 1, then N), sequenced on one channel by the sweep
//! engine (`sweep::engine`: `CellStarted`, the pass's run events, its `Finished`), so controls,
//! signals and the record's `cell` lines work as in a sweep. The sweep's prompt salt
//! (`HttpConfig::prompt_salt`) stays 0, so both passes send the same texts, and the sweep's fold
//! is not used: its per-cell warmup, repetitions and findings are about latency, while here
//! what matters is each prompt's output. The consumer folds the stream with
//! [`fold::DeterminismFold`]: a `RunFold` per pass (their latency, a bonus) and the first
//! pass's outputs, kept (bounded) until the same prompt's second output arrives, compared at
//! once ([`compare`]) and dropped. The summary ([`DeterminismSummary`]) is made there once;
//! [`render`] only formats it; the record ends with it as a `determinism` line, before the
//! footer, and `report` prints it.

pub mod compare;
pub mod fold;
pub mod render;

use serde::{Deserialize, Serialize};

pub use fold::DeterminismFold;

/// The name of a pass, as each request's `origin.pass` and the tables say it.
pub fn pass_name(concurrency: usize) -> String {
    format!("concurrency {concurrency}")
}

/// What a `--determinism` run found: the `determinism` line of its record, and what it prints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeterminismSummary {
    /// Prompts each pass sends (`--requests`).
    pub prompts: u64,
    /// Requests in flight in the second pass (`--concurrency`).
    pub concurrency: usize,
    /// At most this many tokens of each output are kept and compared (the longest `-n`).
    pub max_output_tokens: usize,
    /// The `seed` every request carried (completions and chat), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The server's prefix cache could not serve the second pass the first pass's prompts:
    /// emptied before each pass (`--reset-prefix-cache`), or not used (llama.cpp's
    /// `cache_prompt: false` in `--extra-body`). Otherwise a prompt read from the cache can
    /// give another output than the same prompt computed, and a difference may be the
    /// cache's, not the load's.
    #[serde(default)]
    pub prefix_cache_ruled_out: bool,
    /// Prompts with an output from both passes.
    pub compared: u64,
    /// Of them, outputs the same text in the same number of tokens.
    pub identical: u64,
    /// Outputs that differ in a token.
    pub differ: u64,
    /// Outputs of which one is the other's beginning (one stopped earlier), or the same text
    /// in a different number of tokens.
    pub length_only: u64,
    /// Prompts without an output from both passes (a request failed, or a stop came before
    /// both passes had sent it).
    pub not_compared: u64,
    /// Every output that differs (both kinds), by prompt index.
    pub divergences: Vec<Divergence>,
    /// Each pass's latency, alone first: a bonus beside the outputs.
    pub passes: Vec<PassLatency>,
}

impl DeterminismSummary {
    /// Outputs that changed under load, of either kind.
    pub fn changed(&self) -> u64 {
        self.differ + self.length_only
    }

    /// The first output that changed (the lowest prompt index), if any did.
    pub fn first_changed(&self) -> Option<&Divergence> {
        self.divergences.first()
    }
}

/// How two outputs of one prompt differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A token differs.
    Tokens,
    /// One is the other's beginning (or the same text in another number of tokens).
    Length,
}

/// One prompt whose output changed under load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// The prompt (request index, the same in both passes).
    pub index: u64,
    pub kind: Kind,
    /// The first token (0-based) that is not the same in both: the first that differs, or
    /// for `length` the first that only one output has.
    pub at_token: usize,
    /// Tokens each output had (as compared: at most `max_output_tokens`).
    pub alone_tokens: usize,
    pub loaded_tokens: usize,
    /// The text both had just before the divergence (its last few characters).
    pub before: String,
    /// What each output had from there (its first few characters; empty where it ended).
    pub alone: String,
    pub loaded: String,
}

/// One pass's latency, from its own fold (warmup excluded).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PassLatency {
    /// `concurrency 1`, `concurrency N`.
    pub pass: String,
    pub concurrency: usize,
    /// Requests that completed, and that failed.
    pub completed: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p50_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p50_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p99_s: Option<f64>,
}
