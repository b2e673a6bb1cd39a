//! One line of a record, typed: the writer serializes these and the reader deserializes them, so
//! the format (docs/record-format.md) is written down once. Every line is a JSON object whose
//! `type` names the variant; readers skip types they do not know.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{
    CacheReset, ModelInfo, ModelLoaded, NodeTelemetry, RequestDone, RequestFailed, Sample,
    ServerWindow, StopReason, WorkloadDesc,
};
use crate::stats::Slo;

/// The record format version (`header.record_format`), bumped when a field changes meaning.
pub const RECORD_FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header(Box<Header>),
    Event(EventLine),
    Request(RequestLine),
    /// A request that failed (never a latency sample).
    RequestFailed(FailedLine),
    Step(StepLine),
    /// A sampled step of the candle engine in parts (`--step-parts N`).
    StepParts(StepPartsLine),
    Telemetry(Sample),
    /// The server's own view over one window (`--server-metrics`, `watch`).
    ServerMetrics(ServerMetricsLine),
    /// One node's GPU and host figures from its exporters (`watch --gpu-metrics`).
    NodeMetrics(NodeMetricsLine),
    /// A node's metrics page (or one of its exporters) could not be read (`watch`).
    ScrapeFailed(ScrapeFailedLine),
    Footer(Footer),
    /// A sweep's grid and how each cell is measured (line 2 of a sweep's record).
    Sweep(SweepConfig),
    /// A sweep cell starts: the lines up to its `cell_end` are its run.
    Cell(CellLine),
    /// A sweep cell ended: how, and the summary it printed.
    CellEnd(CellEnd),
    /// What a `--determinism` run found (before its footer).
    Determinism(Box<crate::determinism::DeterminismSummary>),
    /// A `type` this version does not know (written by a newer one): skipped.
    #[serde(other)]
    Unknown,
}

/// `{"type":"server_metrics","t_s":…,…}`: a window of the server's own metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerMetricsLine {
    pub t_s: f64,
    #[serde(flatten)]
    pub window: ServerWindow,
}

/// `{"type":"node_metrics","t_s":…,"source":…,…}`: one node's exporters, read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeMetricsLine {
    pub t_s: f64,
    /// The node (as `server_metrics` lines' `source` name it).
    pub source: String,
    #[serde(flatten)]
    pub telemetry: NodeTelemetry,
}

/// `{"type":"scrape_failed","t_s":…,"source":…,"message":…}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScrapeFailedLine {
    pub t_s: f64,
    /// The node; absent when a single server is watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The exporter's URL when it was an exporter that failed, not the server's page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exporter: Option<String>,
    pub message: String,
}

/// Line 1: who wrote the record, how the run was configured, on what machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    #[serde(default)]
    pub infertop_version: String,
    #[serde(default)]
    pub record_format: u32,
    /// The command line, as an array of arguments.
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub config: RunConfig,
    #[serde(default)]
    pub machine: Machine,
    /// The model, when the writer knew it before the run started (older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    /// When the record's time 0 was, on this machine's clock and on the run's reference clock
    /// (records of one run from several machines line up by it); absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<RunClock>,
}

/// The record's time 0 on the clocks: this machine's, and the reference's that the run's
/// generators measured themselves against (`--clock-ref`: a server's `Date`, or `local`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunClock {
    /// This machine's clock at the record's time 0, in unix seconds.
    pub started_unix_s: f64,
    /// The reference clock less this machine's, in seconds; absent: not measured (the run
    /// was neither sharded nor started at a time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_s: Option<f64>,
    /// The offset is known to within ± this many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncertainty_s: Option<f64>,
    /// What the offset was measured against: a URL (its `Date` header), or `local` (this
    /// machine's clock taken as it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

impl RunClock {
    /// The record's time 0 on the reference clock (unix seconds), when the offset is known.
    pub fn reference_start_s(&self) -> Option<f64> {
        Some(self.started_unix_s + self.offset_s?).filter(|t| t.is_finite())
    }
}

/// The run's configuration as given (lengths as written: `128`, `128,512`, `64..512`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    pub model: String,
    pub device: String,
    pub dtype: String,
    pub threads: usize,
    pub seed: u64,
    pub prompt_tokens: String,
    pub output_tokens: String,
    pub batch: usize,
    pub warmup: u64,
    pub requests: Option<u64>,
    pub duration: Option<String>,
    pub stop_at_eos: bool,
    /// `--sampling` in canonical form; absent: greedy argmax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<String>,
    /// `--step-parts N`: one prefill and one decode step in N timed in parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_parts: Option<u64>,
    pub slo: Slo,
    /// What measured: `http` for `--endpoint` runs, `watch` for a watch; absent for the
    /// candle engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,
    /// The servers an `--endpoint` run spread its requests over (round-robin).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// `completions`, `chat`, `responses`, `messages`, `embeddings` or `rerank` (`--api auto`
    /// writes the one it picked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The served model, or several with their weights (`a=3,b=1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_model: Option<String>,
    /// How many tool definitions `--tools` offered with each request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
    /// `--tool-choice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// `--extra-body`: the fields merged into every request's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Value>,
    /// `--header`s sent with every request, `Name: value`, credentials as `***`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// `--cancel`: which requests the client abandoned, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<String>,
    /// `--probe`: the canary lane beside the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// `--tool-time`: the simulated tool's time in a conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_time: Option<String>,
    /// Requests in flight at most (closed loop, or the cap of an open loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Requests per second of an open loop (Poisson arrivals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// The gamma shape of the open loop's gaps (1: Poisson).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_timeout_s: Option<f64>,
    /// The traffic beyond made-up lengths: the dataset (file, format, size, sha256, rows used
    /// and skipped), a replayed trace, conversations, shared prefixes, what can be said of the
    /// cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<crate::event::TrafficInfo>,
    /// `--reset-prefix-cache`: the server's prefix cache was emptied before the run (before
    /// every cell of a sweep). Absent: it was not, so a warm cache may have served prompts it
    /// had seen.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reset_prefix_cache: bool,
    /// `--shard K/N`: this record is generator K's part of a run that N send together (the
    /// request numbers are the run's); absent: the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::traffic::Shard>,
    /// `--start-at`: when the schedule started, in unix seconds on the reference clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_at_unix_s: Option<f64>,
}

/// What wrote a record, besides the candle engine (which names none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// The http engine (`--endpoint`): a client of a server.
    Http,
    /// `infertop watch`: a server's own metrics, no load.
    Watch,
    /// Written by a newer version.
    #[serde(other)]
    Other,
}

impl RunConfig {
    /// Whether a server was measured (the http engine), not the candle engine.
    pub fn is_server(&self) -> bool {
        self.engine == Some(EngineKind::Http)
    }

    /// Whether the record is a watch's (its lines are windows, not requests).
    pub fn is_watch(&self) -> bool {
        self.engine == Some(EngineKind::Watch)
    }
}

/// Where the run ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// GPU name (NVML) on CUDA runs; the roofline's known-device table is keyed by it.
    pub gpu: Option<String>,
    pub driver: Option<String>,
    pub cores: usize,
    pub os: String,
    pub arch: String,
    pub candle_version: String,
    pub cuda_feature: bool,
}

/// A run event: `{type:"event", t_s, event, ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// Seconds since the run started.
    pub t_s: f64,
    #[serde(flatten)]
    pub event: RunEvent,
}

/// What happened, named by the line's `event` field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
// RunStarted (with the model's description) is written once per run: its size costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum RunEvent {
    RunStarted {
        model: ModelInfo,
        workload: WorkloadDesc,
        /// The traffic as the engine started it (a server's `max_model_len` may have left
        /// rows out since the header was written).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traffic: Option<Box<crate::event::TrafficInfo>>,
        /// This machine's peaks as the run measured them (`--step-parts`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peak: Option<crate::event::MachinePeak>,
    },
    Paused,
    Resumed,
    /// The run's statistics (and its printed summary) start again from here.
    StatsReset,
    WorkloadChanged {
        detail: WorkloadDesc,
    },
    Error {
        detail: ErrorDetail,
    },
    /// The candle engine loaded a model: `model`, `dtype`, `load_s`, `bytes`.
    ModelLoaded(ModelLoaded),
    /// A server's prefix cache was emptied: `endpoint`, `via`, `seconds`.
    PrefixCacheReset(CacheReset),
    /// `--api auto` picked the run's API: `api`, `why`.
    ApiPicked(crate::event::ApiPicked),
    /// What the client saw a server do, said once: `what`, `words`.
    ServerNote(crate::event::ServerNote),
    /// A request the client cancelled on purpose (`--cancel`): `index`, `elapsed_s`, `ttft_s`.
    RequestCancelled(crate::event::RequestCancelled),
    /// A canary request ended (`--probe`): `index`, `ttft_s`, `e2e_s`, `error`.
    Canary(crate::event::CanaryDone),
    /// What the server did after the run's cancellations: `cancelled`, `baseline`, `after`,
    /// `back_after_s`.
    CancelCheck(crate::event::CancelCheck),
    /// `--runs N --cooldown D`: the idle time after run `after_run` (0-based) begins, for
    /// `seconds`.
    Cooldown(crate::event::Cooldown),
    /// An event this version does not know: kept in the count, otherwise skipped.
    #[serde(other)]
    Other,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub message: String,
    pub fatal: bool,
}

/// A finished request, with its derived throughputs (stdout and the record carry the same).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestLine {
    #[serde(flatten)]
    pub request: RequestDone,
    /// When the consumer got it, in seconds since the run began (the record's clock, as every
    /// line's `t_s`): the request's end. Records written before this have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_s: Option<f64>,
    /// B·P / TTFT.
    #[serde(default)]
    pub prefill_tok_s: Option<f64>,
    /// B / TPOT; `null` when G < 2.
    #[serde(default)]
    pub decode_tok_s: Option<f64>,
}

impl RequestLine {
    pub fn of(r: &RequestDone, t_s: Option<f64>) -> RequestLine {
        RequestLine {
            request: r.clone(),
            t_s,
            prefill_tok_s: Some(r.prefill_tok_s()),
            decode_tok_s: r.decode_tok_s(),
        }
    }
}

/// A failed request's line: the event, and when the consumer got it (`t_s`, as requests').
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedLine {
    #[serde(flatten)]
    pub failed: RequestFailed,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_s: Option<f64>,
}

/// One decode step (`--jsonl-steps`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepLine {
    pub index: u64,
    pub step: u32,
    pub itl_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_s: Option<f64>,
    /// When the consumer got it (seconds since the run began); none in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_s: Option<f64>,
}

/// `{"type":"step_parts",…}`: one sampled step in parts, and when the consumer got it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepPartsLine {
    #[serde(flatten)]
    pub parts: crate::event::StepParts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_s: Option<f64>,
}

/// The last line: how the run ended and the summary it printed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Footer {
    pub stop: StopReason,
    pub elapsed_s: f64,
    /// The summary object exactly as `--format json` prints it.
    pub summary: Value,
}

/// One cell of a sweep (the protocol's, since a sweep's engine announces each cell).
use crate::event::CellParams;

/// How a sweep's cells are measured, and the grid (`{"type":"sweep", ...}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepConfig {
    /// Every cell, in the order they run.
    pub cells: Vec<CellParams>,
    /// Warmup requests per cell (excluded from its statistics).
    pub warmup: u64,
    /// Steady requests per cell (with `precision`: the minimum).
    pub repetitions: u64,
    /// Stop a cell once the bootstrap 95 % CI of its median TPOT is within this fraction of
    /// the median (0.05 = 5 %).
    pub precision: Option<f64>,
    /// With `precision`: the most steady requests per cell.
    pub max_repetitions: Option<u64>,
    /// `--find-max`: the cells are probes the sweep chooses as it goes (`cells` is empty);
    /// absent for a grid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchConfig>,
    /// `--runs N`: the cells are N runs of one workload (a run repeated, not a grid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<RepeatConfig>,
}

/// `--runs N --cooldown D`: how a run was repeated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepeatConfig {
    pub runs: usize,
    /// Idle seconds between two runs.
    pub cooldown_s: f64,
}

/// How a `--find-max` sweep searches: per workload, the highest load on `axis` within
/// `[lo, hi]` whose p99 meets every limit of the SLO, by bracketing from `start` (doubling
/// or halving), then bisection until the bracket is within `tolerance` of its low end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchConfig {
    /// `concurrency` or `rate`.
    pub axis: String,
    pub start: f64,
    pub lo: f64,
    pub hi: f64,
    pub tolerance: f64,
    /// One search per workload, in order: each a cell's parameters without the load.
    pub workloads: Vec<CellParams>,
    /// How long each probe runs at least (`--probe-duration`, seconds); absent in records of
    /// searches whose probes ran `repetitions` requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_s: Option<f64>,
    /// `--hold D`: after each workload's search, its highest load that met the SLO is held
    /// this long (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_s: Option<f64>,
}

/// A server's prefix cache during a cell: emptied just before it, or not (`warm`: it may hold
/// prompts earlier cells or runs sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixCache {
    Cold,
    Warm,
}

/// `{"type":"cell","cell":N,"params":{...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellLine {
    /// 0-based position in the grid.
    pub cell: usize,
    pub params: CellParams,
}

/// How a cell ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Measured as asked.
    Ok,
    /// Could not be measured: out of memory, too many positions, every request failed.
    Failed,
    /// Cut short by Ctrl-C or a signal: what it measured is kept.
    Stopped,
}

/// `{"type":"cell_end","cell":N,"status":"ok",...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellEnd {
    pub cell: usize,
    pub status: CellStatus,
    /// One line: why the cell failed or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Seconds the cell took, engine start to end.
    pub elapsed_s: f64,
    /// Wall time from the first steady request's start to the last steady request's end: what
    /// a server's output tok/s and goodput divide by (requests overlap there).
    #[serde(default)]
    pub steady_wall_s: Option<f64>,
    /// A server cell: whether its prefix cache was emptied before it (`cold`) or not (`warm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCache>,
    /// The cell's summary, as a run's footer has it.
    pub summary: Value,
}

impl Line {
    /// The line as one JSON object (no newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            // Only a map with non-string keys fails here, and no line has one.
            format!("{{\"type\":\"unwritable\",\"error\":{:?}}}", e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_written() {
        let lines = [
            Line::Header(Box::new(Header {
                infertop_version: "0.1.0".into(),
                record_format: RECORD_FORMAT,
                ..Header::default()
            })),
            Line::Event(EventLine {
                t_s: 1.5,
                event: RunEvent::Paused,
            }),
            Line::Event(EventLine {
                t_s: 2.0,
                event: RunEvent::Error {
                    detail: ErrorDetail {
                        message: "disk".into(),
                        fatal: false,
                    },
                },
            }),
            Line::Step(StepLine {
                index: 3,
                step: 1,
                itl_s: 0.1 + 0.2,
                gpu_s: None,
                t_s: None,
            }),
        ];
        for line in lines {
            let text = line.to_json();
            let back: Line = serde_json::from_str(&text).unwrap();
            assert_eq!(back, line, "{text}");
        }
    }

    #[test]
    fn the_wire_format_is_the_documented_one() {
        let text = Line::Event(EventLine {
            t_s: 0.5,
            event: RunEvent::StatsReset,
        })
        .to_json();
        assert_eq!(text, r#"{"type":"event","t_s":0.5,"event":"stats_reset"}"#);
        let text = Line::Step(StepLine {
            index: 1,
            step: 2,
            itl_s: 0.25,
            gpu_s: None,
            t_s: None,
        })
        .to_json();
        assert_eq!(text, r#"{"type":"step","index":1,"step":2,"itl_s":0.25}"#);
    }

    #[test]
    fn unknown_types_and_events_are_skipped_not_errors() {
        let l: Line = serde_json::from_str(r#"{"type":"hologram","x":1}"#).unwrap();
        assert_eq!(l, Line::Unknown);
        let l: Line =
            serde_json::from_str(r#"{"type":"event","t_s":1,"event":"teleported"}"#).unwrap();
        assert!(matches!(
            l,
            Line::Event(EventLine {
                event: RunEvent::Other,
                ..
            })
        ));
    }
}
