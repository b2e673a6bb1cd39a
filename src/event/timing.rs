//! What a server said of one request's time on its side (vLLM's per-request `metrics`,
//! llama.cpp's `timings`, SGLang's `meta_info`), joined to the client's TTFT: queue, prefill,
//! and the rest of the TTFT (network, HTTP and the client) as a figure of its own.

use serde::{Deserialize, Serialize};

/// A server's own timings of one request, as it sent them; every field is `None` where it
/// did not say (nothing is assumed). Times in seconds, as every time in a record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    /// Which report it came from: `vllm` (`metrics`), `llama.cpp` (`timings`) or `sglang`
    /// (`meta_info`).
    pub source: String,
    /// Waiting for the scheduler (vLLM `queue_time_ms`; SGLang `queue_time` plus
    /// `prefill_launch_delay`). llama.cpp reports none: its wait for a slot is in `rest_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_s: Option<f64>,
    /// Scheduled → first token (vLLM `time_to_first_token_ms`, from scheduling; llama.cpp
    /// `prompt_ms`; SGLang `prefill_launch_latency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_s: Option<f64>,
    /// First token → last (vLLM `generation_time_ms`; llama.cpp `predicted_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_s: Option<f64>,
    /// The server's whole request (SGLang `e2e_latency`; vLLM queue + TTFT + generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_s: Option<f64>,
    /// The server's mean inter-token latency (vLLM `mean_itl_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_itl_s: Option<f64>,
    /// Prompt tokens its cache held (llama.cpp `cache_n`, SGLang `cached_tokens`, vLLM
    /// `usage.prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<usize>,
    /// Prompt tokens it computed (llama.cpp `prompt_n`; elsewhere the usage's prompt tokens
    /// less the cached ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed_tokens: Option<usize>,
    /// vLLM's `output_token_metrics` (`--enable-per-request-output-token-metrics`): output
    /// tokens of reasoning and of content, when it sends them as counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_tokens: Option<usize>,
    /// Speculative decoding, as the server counted it for this request: tokens drafted
    /// (llama.cpp `draft_n`, vLLM `speculative_decoding.num_draft_tokens`) and of those the
    /// target model accepted (`draft_n_accepted`, `num_accepted_draft_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_accepted: Option<usize>,
    /// Verify steps (vLLM `num_spec_steps`): accepted tokens per step is
    /// `draft_accepted / spec_steps`, plus the one the target model adds each step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_steps: Option<usize>,
    /// The client's TTFT less the server's queue and prefill: the network both ways, HTTP, and
    /// the client's own time (its send delay in an open loop included). Set when the server
    /// said its prefill; without its queue (llama.cpp) the queue is in here too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_s: Option<f64>,
}

impl ServerTimings {
    /// The share of drafted tokens the target model accepted, when the server drafted any.
    pub fn acceptance_rate(&self) -> Option<f64> {
        match (self.draft_accepted, self.draft_tokens) {
            (Some(a), Some(d)) if d > 0 => Some(a as f64 / d as f64),
            _ => None,
        }
    }

    /// Whether it says anything a split can use.
    pub fn is_empty(&self) -> bool {
        self.queue_s.is_none()
            && self.prefill_s.is_none()
            && self.decode_s.is_none()
            && self.e2e_s.is_none()
            && self.cached_tokens.is_none()
            && self.computed_tokens.is_none()
    }

    /// Joins the server's figures to the client's TTFT: `rest_s` = TTFT − queue − prefill
    /// (never below zero: clocks and rounding on both sides), where the prefill is known.
    pub fn join_ttft(&mut self, ttft_s: f64) {
        self.rest_s = self
            .prefill_s
            .map(|p| (ttft_s - p - self.queue_s.unwrap_or(0.0)).max(0.0));
    }
}
