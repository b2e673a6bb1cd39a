//! What one request came to: its client-side timings and what the server said of it
//! (`Measured`), the reason it did not complete (`RequestError`), and each content chunk as it
//! arrives (`Token`). Made by `request` from what `reading` counted, read by the loops that
//! send requests.

use super::api::ToolCall;
use crate::event::{HttpPhases, OutputParts};

/// A finished stream's client-side timings and what the server said about it.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Scheduled send → first content chunk.
    pub ttft_s: f64,
    /// One interval per token after the first chunk: a chunk of `k` tokens is `k` of its gap
    /// divided by `k`.
    pub itls_s: Vec<f64>,
    /// Scheduled send → end of stream (`[DONE]`).
    pub e2e_s: f64,
    /// When the request was due (open loop) or launched (closed loop) → its actual send.
    pub send_delay_s: f64,
    pub content_chunks: usize,
    pub usage_prompt_tokens: Option<usize>,
    pub usage_completion_tokens: Option<usize>,
    /// Tokens each content chunk carried, from the running usage of a server that sends it in
    /// every chunk (1 where it does not say).
    pub chunk_tokens: Vec<u32>,
    pub finish_reason: Option<String>,
    pub text: String,
    /// `text`'s length in bytes after each content chunk (one entry per `chunk_tokens` entry),
    /// so the text splits into the pieces it came in.
    pub text_ends: Vec<u32>,
    /// The usage chunk's `prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<usize>,
    /// From the first content chunk to the second.
    pub ttst_s: Option<f64>,
    /// The connection and its phases before the first token.
    pub http: Option<HttpPhases>,
    /// The answer's text alone (no reasoning), as a conversation resends it.
    pub answer: String,
    /// The tool calls the output made, assembled from their pieces.
    pub tool_calls: Vec<ToolCall>,
    /// Reasoning and tool calls, when the output had either (see `parts`).
    pub parts: Option<OutputParts>,
    /// A pooling request: the inputs it carried.
    pub inputs: usize,
    /// The server's own timings, from the last chunk that carried them.
    pub server: Option<crate::event::ServerTimings>,
}

/// A request that did not complete.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestError {
    pub reason: String,
    pub status: Option<u16>,
    /// Set when the client cancelled it on purpose (`--cancel`): no failure.
    pub cancelled: Option<Cancelled>,
}

/// How far a request the client cancelled had got.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cancelled {
    /// Its TTFT, when the first token came before the cancel.
    pub ttft_s: Option<f64>,
    /// Token chunks that came before the cancel.
    pub content_chunks: usize,
}

impl RequestError {
    pub(super) fn new(reason: impl Into<String>) -> RequestError {
        RequestError {
            reason: reason.into(),
            status: None,
            cancelled: None,
        }
    }

    /// The client cancelled it, as `--cancel` asked.
    pub(super) fn cancelled(how: Cancelled) -> RequestError {
        RequestError {
            reason: "cancelled by the client (--cancel)".into(),
            status: None,
            cancelled: Some(how),
        }
    }
}

/// A content chunk as it arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Token {
    /// The first: the request's start → now.
    First { ttft_s: f64 },
    /// A later chunk of `tokens` tokens, each `itl_s` after the one before (the chunk's gap
    /// shared out): steps `first_step` to `first_step + tokens - 1` (1 for the first token
    /// after the first chunk).
    Steps {
        first_step: u32,
        tokens: u32,
        itl_s: f64,
    },
}
