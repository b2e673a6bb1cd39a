//! One request's result: a finished request (`RequestDone`, the unit every statistic is built
//! from) with what only a server's client knows, or a failed one.

use serde::{Deserialize, Serialize};

/// One finished request: the unit every statistic and every record line is built from.
/// `Default` is for tests and benches that build one by hand (`..Default::default()`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestDone {
    /// 0-based index since the run started (not reset by `r`).
    pub index: u64,
    pub warmup: bool,
    pub batch: usize,
    pub prompt_tokens: usize,
    /// Generated tokens per sequence (G).
    pub output_tokens: usize,
    /// Prefill + first sampling, ending with a device synchronize.
    pub ttft_s: f64,
    /// (E2E − TTFT) / (G − 1); `None` when G < 2.
    pub tpot_s: Option<f64>,
    pub e2e_s: f64,
    /// GPU time of the prefill from CUDA events (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_ttft_s: Option<f64>,
    /// Sum of GPU time of the decode steps from CUDA events (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_decode_s: Option<f64>,
    /// The request's slowest decode step (wall time), for an ITL limit of an SLO; absent with
    /// one token, and in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_max_s: Option<f64>,
    /// Peak allocator bytes during the request (CPU: counting allocator; CUDA: used device memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_alloc_bytes: Option<u64>,
    /// FNV-1a 64 of what was generated, as 16 hex digits, so a changed output is noticed
    /// (`compare`). The candle engine hashes the generated ids of every sequence (each step's
    /// ids for the whole batch, in order, as little-endian u32); the http engine hashes the
    /// streamed text (UTF-8), all it sees. Hashes from the two engines never match each other.
    pub output_hash: String,
    /// Generated ids of the first sequence (`--record-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<u32>>,
    /// Decoded text of the first sequence (`--record-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// What only a client of a server knows (the http engine); `None` for in-process engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<Box<ClientDetail>>,
    /// Where the request came from (a dataset's row, a conversation's turn, a shared-prefix
    /// group); `None` for made-up traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Box<Origin>>,
    /// The model (or adapter) the request went to, when the run sends to several
    /// (`--served-model a=3,b=1`); every statistic can be split by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the output was made of, when it was more than answer text: reasoning before the
    /// answer, tool calls (a server engine's, from the stream and the server's counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Box<OutputParts>>,
}

/// A request's output split into thinking and answering: `RequestDone::ttft_s` is the first
/// token of any kind (reasoning, answer text or a tool call), `ttfa_s` the first answer token
/// (text or a tool call), `reasoning_s` how long the reasoning lasted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputParts {
    /// The (scheduled) start → the first answer token (text or tool call); `None` when none
    /// came (the output ended while reasoning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_s: Option<f64>,
    /// Tokens of reasoning: the server's count (`usage.completion_tokens_details` /
    /// `output_tokens_details.reasoning_tokens`) when it gave one, else counted from the stream.
    #[serde(default)]
    pub reasoning_tokens: usize,
    /// `usage` or `counted`.
    #[serde(default)]
    pub reasoning_tokens_from: String,
    /// The first reasoning token → the first answer token after it (the last reasoning chunk
    /// when no answer came); `None` without reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_s: Option<f64>,
    /// Tool calls the output made (each a function name and its arguments).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: usize,
    /// The output ended in a tool call (`finish_reason: tool_calls`, `stop_reason: tool_use`,
    /// or a function call as the Responses API's last output item).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_in_tool_call: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl OutputParts {
    /// Tokens of the answer (text and tool calls): the output's less its reasoning.
    pub fn answer_tokens(&self, output_tokens: usize) -> usize {
        output_tokens.saturating_sub(self.reasoning_tokens)
    }
}

/// Where a request came from, so any statistic can be split by it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// The dataset row's line in its file (1-based; the position in a JSON array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<u32>,
    /// The conversation (0-based, in the order they started) and the turn in it (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Within a turn, the request that sent a tool's result back (1 for the first tool call
    /// answered); absent for the turn's first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_round: Option<u32>,
    /// The shared-prefix group (0-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// The row's time in the trace (seconds from its start), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// The pass of a `--determinism` run the request belongs to, named by its load:
    /// `concurrency 1` (alone), then `concurrency N`; both passes send the same prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,
}

/// A request measured by a client of a serving endpoint: where it went, how late it was sent,
/// and where its token counts came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientDetail {
    /// The endpoint's base URL (credentials stripped).
    pub endpoint: String,
    /// Open loop: scheduled send time → actual send; TTFT and E2E count from the scheduled
    /// time, so a saturated client cannot hide queueing. Closed loop: the scheduler's launch →
    /// the actual send (the client's own queueing); TTFT and E2E count from the send's start.
    pub send_delay_s: f64,
    /// `usage` (the server's usage chunk) or `counted` (chunks carrying text).
    pub output_tokens_from: String,
    /// `usage` (server-reported) or `approx` (the prompt was built to roughly this many tokens).
    pub prompt_tokens_from: String,
    /// The prompt length asked for (approximate without the server's tokenizer).
    pub requested_prompt_tokens: usize,
    /// SSE chunks that carried generated text; `output_tokens / content_chunks` > 1 means
    /// chunks of several tokens (speculative decoding, server-side batching of the stream).
    pub content_chunks: usize,
    /// Tokens per content chunk, in order, when a chunk carried more than one by the server's
    /// running usage (`--chunk-usage`; speculative decoding); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_tokens: Vec<u32>,
    /// With the output's text recorded (`text`: `--record-tokens`, `--determinism`): its
    /// length in bytes after each content chunk, so the text splits into the pieces it was
    /// streamed in (each of `chunk_tokens` tokens, 1 where that is empty); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text_ends: Vec<u32>,
    /// The server's `finish_reason` (`length`, `stop`, ...), when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Prompt tokens the server said it had cached (`usage.prompt_tokens_details.cached_tokens`,
    /// as vLLM, SGLang and OpenAI report it); `None` when it did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<usize>,
    /// Where the time before the first token went on the request's connection; absent in
    /// records written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpPhases>,
    /// Time to second token: from the first content chunk to the second (AIPerf's TTST), so a
    /// slow first decode step is told apart from a slow prefill; absent with one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttst_s: Option<f64>,
    /// The server's own timings of the request (queue, prefill, decode, cached and computed
    /// prompt tokens) and the rest of the TTFT, when the server sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<super::ServerTimings>,
}

/// How a request got its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionUse {
    /// Opened for this request while it was timed: the connect is inside its TTFT, as it was.
    New,
    /// Kept alive after an earlier request.
    Reused,
    /// Opened ahead of this request, outside its time: before the run's first timed request
    /// (preconnect), or as a spare for a server that closes after every response; this
    /// request was its first.
    Preopened,
    /// Written by a newer version.
    #[serde(other)]
    Other,
}

impl ConnectionUse {
    pub fn name(self) -> &'static str {
        match self {
            ConnectionUse::New => "new",
            ConnectionUse::Reused => "reused",
            ConnectionUse::Preopened => "preopened",
            ConnectionUse::Other => "other",
        }
    }
}

/// A request's HTTP phases (k6's and AIPerf's names). The opening's steps are durations, of the
/// connection's opening (for `new` and `preopened` connections: a preopened one's is not in the
/// request's time); the rest are instants in seconds since the request's start (its scheduled
/// time, the origin of its TTFT), so `connected_s ≤ sent_s ≤ first_byte_s ≤ ttft_s`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpPhases {
    pub connection: ConnectionUse,
    /// The name lookup (absent for an IP address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_s: Option<f64>,
    /// The TCP handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_s: Option<f64>,
    /// The TLS handshake (https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_s: Option<f64>,
    /// The connection was ready for the request (a new one: opened).
    pub connected_s: f64,
    /// The request's last bytes went to the socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_s: Option<f64>,
    /// The response's first byte came back (time to first byte).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_s: Option<f64>,
    /// Times the request was sent: more than once when a connection closed before any answer
    /// came back (the phases above are of the last); 1 in records written before it was kept.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// A request that did not complete: never a latency sample, always counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestFailed {
    pub index: u64,
    pub warmup: bool,
    /// One line: `connection refused`, `HTTP 500: <excerpt>`, `timed out after 5s`, ...
    pub reason: String,
    /// The HTTP status, when the server answered with an error status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// From the (scheduled) send to the failure.
    pub elapsed_s: f64,
    /// The model (or adapter) it went to, when the run sends to several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A request the client abandoned on purpose (`--cancel`), by closing its stream: neither a
/// latency sample nor a failure, counted apart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestCancelled {
    pub index: u64,
    pub warmup: bool,
    /// From the (scheduled) send to the cancel.
    pub elapsed_s: f64,
    /// Its TTFT, when its first token came before the cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<f64>,
    /// Token chunks that came before the cancel.
    pub content_chunks: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A canary request's result (`--probe`): a small request of a fixed size sent beside the main
/// load, in none of the run's statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CanaryDone {
    /// 0-based, the canaries' own count.
    pub index: u64,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    /// Its send → first token; `None` when it failed before one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<f64>,
    /// Its send → its end (or its failure).
    pub e2e_s: f64,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RequestDone {
    /// Prefill throughput: B·P / TTFT.
    pub fn prefill_tok_s(&self) -> f64 {
        (self.batch * self.prompt_tokens) as f64 / self.ttft_s
    }

    /// Decode throughput of the request: B / TPOT.
    pub fn decode_tok_s(&self) -> Option<f64> {
        self.tpot_s.map(|t| self.batch as f64 / t)
    }
}
