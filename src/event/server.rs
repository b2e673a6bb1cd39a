//! What a server's and a node's own metrics say over a window (`watch`, `--server-metrics`).

use serde::{Deserialize, Serialize};

/// Percentiles of one histogram over a window, and how many observations it had.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerQuantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub n: u64,
}

/// What a server did between two scrapes of its Prometheus metrics (`watch`,
/// `--server-metrics`), as `scrape::window` computes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerWindow {
    pub seconds: f64,
    /// vllm, sglang, tgi, llama.cpp or unknown.
    pub server: String,
    /// How many servers' metrics the window adds up (replicas with `--server-metrics` each).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub sources: usize,
    /// Requests finished per second (the E2E histogram's count).
    pub requests_per_s: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache usage, 0 to 1.
    pub kv_usage: Option<f64>,
    pub preemptions: Option<f64>,
    /// Prefix-cache hit rate, 0 to 1.
    pub prefix_hit_rate: Option<f64>,
    pub ttft_s: Option<ServerQuantiles>,
    pub itl_s: Option<ServerQuantiles>,
    pub e2e_s: Option<ServerQuantiles>,
    /// The window's bucket deltas, trimmed to those that decide a quantile, so that windows
    /// add up to a whole run's percentiles (`stats::ServerSpan`).
    #[serde(default, skip_serializing_if = "ServerHistograms::is_empty")]
    pub histograms: ServerHistograms,
    /// The node this window is of (its metrics URL's `host:port`) when several are watched;
    /// absent for their total, and for a single server's windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A data-parallel server's engines, each its own window (vLLM's `engine` label), when
    /// the server has more than one.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub engines: std::collections::BTreeMap<String, ServerWindow>,
    /// The other signals, where the server exports them (boxed: most windows' are small
    /// beside them).
    #[serde(default, skip_serializing_if = "no_signals")]
    pub signals: Box<ServerSignals>,
}

#[allow(clippy::borrowed_box)] // serde hands the field as it is
fn no_signals(s: &Box<ServerSignals>) -> bool {
    s.is_empty()
}

impl Default for ServerWindow {
    fn default() -> ServerWindow {
        ServerWindow {
            seconds: 0.0,
            server: String::new(),
            sources: 1,
            requests_per_s: None,
            running: None,
            waiting: None,
            kv_usage: None,
            preemptions: None,
            prefix_hit_rate: None,
            ttft_s: None,
            itl_s: None,
            e2e_s: None,
            histograms: ServerHistograms::default(),
            source: None,
            engines: Default::default(),
            signals: Box::default(),
        }
    }
}

/// What else a server says about a window, each where it exports it: token throughput, the
/// phases of a request (queue, prefill, decode), request lengths, speculative decoding,
/// how requests finished, the HTTP responses, and vLLM's MFU counters
/// (`--enable-mfu-metrics`). Counts are the window's; rates are per second of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSignals {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_tokens_per_s: Option<f64>,
    /// Time waiting to be scheduled, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_s: Option<ServerQuantiles>,
    /// Time in prefill, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_s: Option<ServerQuantiles>,
    /// Time in decode, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_s: Option<ServerQuantiles>,
    /// Prompt tokens per request (a length, not a time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_len: Option<ServerQuantiles>,
    /// Generated tokens per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_len: Option<ServerQuantiles>,
    /// Speculative decoding: draft tokens proposed, and accepted, in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_draft_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_accepted_tokens: Option<f64>,
    /// Drafts (verification steps) in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_drafts: Option<f64>,
    /// Tokens per verification step: 1 + accepted / drafts (vLLM), or SGLang's own gauge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_accept_length: Option<f64>,
    /// Requests that finished in the window, by reason (`stop`, `length`, `abort`, ...).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub finished: std::collections::BTreeMap<String, f64>,
    /// HTTP responses in the window by status (`2xx`, `4xx`, `5xx` as the server groups
    /// them), its own `/metrics` (our scrapes) left out.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub http: std::collections::BTreeMap<String, f64>,
    /// Prefix-cache tokens queried in the window (what its hit rate is a share of).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_queries: Option<f64>,
    /// vLLM's estimated FLOP/s per GPU (`--enable-mfu-metrics`; the mean over its engines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_gpu: Option<f64>,
    /// vLLM's estimated memory traffic (read + write) per GPU, bytes per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_bytes_per_gpu: Option<f64>,
    /// The window's bucket deltas of the histograms above (trimmed, as `histograms`).
    #[serde(skip_serializing_if = "SignalHistograms::is_empty")]
    pub histograms: SignalHistograms,
}

impl ServerSignals {
    pub fn is_empty(&self) -> bool {
        *self == ServerSignals::default()
    }

    /// Accepted draft tokens as a share of those proposed.
    pub fn spec_accept_rate(&self) -> Option<f64> {
        match (self.spec_accepted_tokens, self.spec_draft_tokens) {
            (Some(a), Some(d)) if d > 0.0 => Some(a / d),
            _ => None,
        }
    }
}

/// Bucket deltas of the request-phase and length histograms (`ServerSignals`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SignalHistograms {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queue: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prefill: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decode: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompt_len: Vec<(f64, f64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub generation_len: Vec<(f64, f64)>,
}

impl SignalHistograms {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
            && self.prefill.is_empty()
            && self.decode.is_empty()
            && self.prompt_len.is_empty()
            && self.generation_len.is_empty()
    }
}

/// One node's GPU and host figures, read from the exporters it already runs (DCGM, nvitop's
/// exporter, node_exporter, `infertop agent`) at one scrape. Rates (CPU busy, InfiniBand) are
/// over `seconds`, since the scrape before.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeTelemetry {
    pub seconds: f64,
    /// Which exporters the figures came from: `dcgm`, `nvitop`, `node`, `infertop`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exporters: Vec<String>,
    /// Per GPU, in the exporter's order of its index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuFigures>,
    #[serde(skip_serializing_if = "HostFigures::is_empty")]
    pub host: HostFigures,
}

/// One GPU as an exporter reports it. Every field is where the exporter has it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuFigures {
    /// The exporter's GPU index (`gpu`, `index`).
    pub gpu: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Percent of time a kernel ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<f64>,
    /// Percent of time the memory was read or written (DCGM's MEM_COPY_UTIL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_util_pct: Option<f64>,
    /// Share of cycles the memory interface was busy, 0 to 1 (DCGM's PROF_DRAM_ACTIVE: the
    /// memory bandwidth used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_active: Option<f64>,
    /// Share of cycles the tensor pipes were busy, 0 to 1 (DCGM's PROF_PIPE_TENSOR_ACTIVE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_active: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
}

/// A node's host figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostFigures {
    /// Percent of all CPUs' time busy (not idle or waiting on I/O).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<f64>,
    /// The 1-minute load average.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load1: Option<f64>,
    /// InfiniBand bytes per second over every port (node_exporter's infiniband collector).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ib_rx_bytes_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ib_tx_bytes_per_s: Option<f64>,
}

impl HostFigures {
    pub fn is_empty(&self) -> bool {
        *self == HostFigures::default()
    }
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// A window's histogram deltas as cumulative `(upper bound, count)` buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerHistograms {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft: Vec<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl: Vec<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub e2e: Vec<(f64, f64)>,
}

impl ServerHistograms {
    pub fn is_empty(&self) -> bool {
        self.ttft.is_empty() && self.itl.is_empty() && self.e2e.is_empty()
    }
}

/// A server's gauges at one moment: requests running and waiting, KV-cache usage (0 to 1);
/// `None` where it does not export one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerGauges {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_usage: Option<f64>,
}

impl ServerGauges {
    /// `running 0, waiting 0, KV 0.0%` (what it exports).
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if let Some(r) = self.running {
            parts.push(format!("running {r}"));
        }
        if let Some(w) = self.waiting {
            parts.push(format!("waiting {w}"));
        }
        if let Some(k) = self.kv_usage {
            parts.push(format!("KV {:.1}%", k * 100.0));
        }
        parts.join(", ")
    }
}

/// What the server did after the cancellations: its gauges before the run and once it ended,
/// and how long they took to come back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CancelCheck {
    /// Requests cancelled in the run.
    pub cancelled: u64,
    /// The server's gauges before the first request; `None`: its metrics could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<ServerGauges>,
    /// Its gauges at the last read after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<ServerGauges>,
    /// Seconds from the run's last request to the first read that was back at the baseline;
    /// `None`: not back within `settle_s` (or not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_after_s: Option<f64>,
    /// How long the client waited for it.
    pub settle_s: f64,
    /// Why nothing is known, when nothing is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

impl CancelCheck {
    /// Whether the server is known not to have come back: a leak, or work still going on.
    pub fn leaked(&self) -> bool {
        self.unknown.is_none() && self.back_after_s.is_none()
    }

    /// One line for the events pane, stderr and the summary.
    pub fn words(&self) -> String {
        let n = self.cancelled;
        if let Some(why) = &self.unknown {
            return format!("{n} requests cancelled; what the server did after is unknown: {why}");
        }
        let (Some(b), Some(a)) = (&self.baseline, &self.after) else {
            return format!("{n} requests cancelled");
        };
        match self.back_after_s {
            Some(s) => format!(
                "{n} requests cancelled; the server came back to its baseline {:.1}s after the run ({})",
                s,
                a.words()
            ),
            None => format!(
                "{n} requests cancelled; the server did NOT come back to its baseline within {:.0}s: {} against {} before the run (a leak under cancellation?)",
                self.settle_s,
                a.words(),
                b.words()
            ),
        }
    }
}
