//! The flags of everything that runs load or draws a screen, as clap groups: one struct per
//! `--help` heading (model, workload, traffic, server, output, display, repetitions), flattened into `run`,
//! `sweep` and, for the display, `watch`. The planner reads these and nothing else; `cli` only parses
//! them and dispatches.

use std::path::PathBuf;
use std::time::Duration;

use crate::event::FloatDtype;
use clap::Args;

use super::values;
use crate::engine::http::{Api, Endpoint};
use crate::engine::worker;
use crate::engine::workload::Sampling;
use crate::model::DeviceSpec;
use crate::stats::Slo;
use crate::summary::SummaryFormat;
use crate::traffic::dataset::{self, Format};
use crate::traffic::len::LenSpec;
use crate::traffic::{Order, SharedPrefix, ThinkTime, Turns, DEFAULT_BLOCK_SIZE};
use crate::ui::ColorMode;

/// What model runs, and where (the candle engine).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Model")]
pub struct ModelOpts {
    /// A Hugging Face directory, a .gguf file, or synthetic:NAME (see `infertop presets`).
    #[arg(long, short, default_value = "synthetic:tiny")]
    pub model: String,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu", value_parser = DeviceSpec::parse)]
    pub device: DeviceSpec,
    /// f32, f16 or bf16 (default: f32 on CPU, bf16 on CUDA).
    #[arg(long, value_enum)]
    pub dtype: Option<FloatDtype>,
    /// CPU threads for candle (default: all cores).
    #[arg(long, value_parser = values::positive_usize)]
    pub threads: Option<usize>,
    /// A tokenizer.json to use instead of the model's own (e.g. a GGUF without tokenizer metadata);
    /// with --endpoint, the served model's (prompts of exact length), or `server` for the
    /// server's own /tokenize.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Time one prefill in N and one decode step in N in parts (embedding, attention, MLP,
    /// LM head, sampling, copy and synchronize), from the model's own tracing spans (or the
    /// norms around its parts); on CUDA from events on the stream, read after the step.
    #[arg(long, value_name = "N", value_parser = values::positive)]
    pub step_parts: Option<u64>,
}

/// What each request asks for, and how many.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Workload")]
pub struct WorkloadOpts {
    /// Prompt tokens: N, a list cycled per request (128,512), or a range (64..512).
    #[arg(long, short = 'p', value_parser = LenSpec::parse)]
    pub prompt_tokens: Option<LenSpec>,
    /// Output tokens per sequence: N, a list, or a range.
    #[arg(long, short = 'n', default_value = "32", value_parser = LenSpec::parse)]
    pub output_tokens: LenSpec,
    /// Sequences per request.
    #[arg(long, short, default_value = "1", value_parser = values::positive_usize)]
    pub batch: usize,
    /// Prompt text (tokenized with the model's tokenizer).
    #[arg(long, conflicts_with = "prompt_file")]
    pub prompt: Option<String>,
    /// A file of prompts, one per line, cycled per request.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// Seed for synthetic weights, prompt ids and length ranges.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop a sequence at its end-of-sequence token (ignored by default).
    #[arg(long)]
    pub stop_at_eos: bool,
    /// Sample on the host instead of greedy argmax: temperature=T,top_p=P,top_k=K,seed=S.
    #[arg(long, value_parser = Sampling::parse)]
    pub sampling: Option<Sampling>,
    /// The first N requests are warmup, kept out of steady-state statistics.
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Stop after N requests (default: run until stopped).
    #[arg(long, value_parser = values::positive)]
    pub requests: Option<u64>,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(long, value_parser = values::duration)]
    pub duration: Option<Duration>,
}

impl WorkloadOpts {
    /// Whether the prompts are texts (`--prompt`, `--prompt-file`) rather than made up.
    pub fn has_text(&self) -> bool {
        self.prompt.is_some() || self.prompt_file.is_some()
    }
}

/// Measuring a server instead of a model of our own.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Server")]
pub struct ServerOpts {
    /// Measure an OpenAI-compatible streaming server instead of a local model (repeat the flag
    /// to spread requests over replicas round-robin), e.g. http://127.0.0.1:8000.
    #[arg(long, value_name = "URL", value_parser = Endpoint::parse)]
    pub endpoint: Vec<Endpoint>,
    /// With --endpoint: the API to measure through (auto: what /v1/models says, else the first
    /// API route the server answers; said when the run starts).
    #[arg(long, value_enum, default_value_t = Api::Completions, requires = "endpoint")]
    pub api: Api,
    /// With --endpoint: the model name the server serves (default: the first of GET /v1/models),
    /// or several with weights, a=3,b=1 (adapters behind one server): each request goes to
    /// one, drawn by --seed, and every figure is split by model.
    #[arg(long, value_name = "NAME|a=3,b=1", requires = "endpoint", value_parser = values::served_models)]
    pub served_model: Option<values::ServedModels>,
    /// With --endpoint: a JSON array of OpenAI tool definitions sent with every request of
    /// --api chat, responses or messages (a dataset row's own tools take their place).
    #[arg(long, value_name = "FILE", requires = "endpoint")]
    pub tools: Option<PathBuf>,
    /// With --endpoint: the tool choice sent with the tools: auto, none, required or a
    /// function's name.
    #[arg(long, value_name = "CHOICE", requires = "endpoint", value_parser = crate::engine::http::ToolChoice::parse)]
    pub tool_choice: Option<crate::engine::http::ToolChoice>,
    /// With --endpoint: fields merged into every request's body, a JSON object or @FILE
    /// (thinking on or off, a JSON schema, priority, sampling options; null removes a field).
    /// The record keeps it.
    #[arg(long, value_name = "JSON", requires = "endpoint", value_parser = crate::engine::http::extra::parse_body)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// With --endpoint: a header sent with every request, 'Name: value' (repeat for several:
    /// routing, tenants, a gateway's key). The record keeps them, credentials masked.
    #[arg(long = "header", value_name = "'NAME: VALUE'", requires = "endpoint", value_parser = crate::engine::http::extra::parse_header)]
    pub headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    /// With --endpoint: cancel a share of the steady requests as users do, by closing the
    /// stream at the first token (after=ttft) or a time after the send (after=0.5s), e.g.
    /// share=0.1,after=ttft (drawn by --seed). Cancelled requests are counted apart, in no
    /// statistic; after the run, the server's /metrics (--server-metrics URLs, else each
    /// endpoint's) say whether its running requests and KV cache came back to where they were.
    #[arg(long, value_name = "share=S,after=ttft|DUR", requires = "endpoint", value_parser = crate::engine::http::cancel::CancelPlan::parse)]
    pub cancel: Option<crate::engine::http::cancel::CancelPlan>,
    /// With --endpoint: a canary lane beside the load: a small request of a fixed size every
    /// so often from a client of its own, e.g. every=1s,prompt=32,output=8, its TTFT and E2E
    /// shown and recorded apart (in no statistic of the run): what a user's small request
    /// waits while the load runs.
    #[arg(long, value_name = "every=DUR,prompt=N,output=N", requires = "endpoint", value_parser = crate::engine::http::canary::CanaryPlan::parse)]
    pub probe: Option<crate::engine::http::canary::CanaryPlan>,
    /// With --endpoint: bearer token (default: $OPENAI_API_KEY); never recorded or printed.
    #[arg(long, value_name = "KEY", requires = "endpoint", value_parser = values::secret)]
    pub api_key: Option<values::Secret>,
    /// With --endpoint: requests in flight (closed loop; default 1). With --rate: the cap.
    #[arg(long, value_parser = values::positive_usize, requires = "endpoint")]
    pub concurrency: Option<usize>,
    /// With --endpoint: open loop, this many requests per second (Poisson arrivals, seeded);
    /// latency counts from each request's scheduled send time.
    #[arg(long, value_name = "R", value_parser = values::rate, requires = "endpoint")]
    pub rate: Option<f64>,
    /// With --rate: the shape of the gamma-distributed gaps between arrivals (1: Poisson; below
    /// 1 burstier, above 1 more regular; the mean rate stays --rate).
    #[arg(long, value_name = "B", default_value = "1", value_parser = values::burstiness, requires = "rate")]
    pub burstiness: f64,
    /// With --endpoint: send the same --requests prompts greedily twice, one at a time and
    /// then --concurrency (> 1) at once, and compare each prompt's output between the two
    /// passes: how many differ and at which token each first diverges (exit 3 when any does).
    /// Headless only, for now.
    #[arg(long)]
    pub determinism: bool,
    /// With --endpoint: also read the server's Prometheus metrics every second (default: every
    /// endpoint's /metrics; repeat the flag for several URLs, which add up) and show and record
    /// them beside the client's numbers.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "", requires = "endpoint")]
    pub server_metrics: Vec<String>,
    /// With --endpoint: ask for the running usage in every chunk (vLLM and SGLang:
    /// stream_options.continuous_usage_stats), so that a chunk of several tokens (speculative
    /// decoding) is recorded with its count.
    #[arg(long, requires = "endpoint")]
    pub chunk_usage: bool,
    /// With --endpoint: a request still unfinished after this long fails (e.g. 30s, 5m).
    #[arg(long, default_value = "5m", value_parser = values::duration)]
    pub request_timeout: Duration,
    /// With --endpoint: do not open the first wave's connections before the first request is
    /// timed; each then opens its own, and its TTFT includes the connect, as a new client's
    /// would (every record says which requests paid a connect).
    #[arg(long, requires = "endpoint")]
    pub no_preconnect: bool,
    /// With --endpoint: empty the server's prefix cache before the run (in a sweep, before
    /// every cell), so no run is served from prompts an earlier one sent: vLLM's POST
    /// /reset_prefix_cache (VLLM_SERVER_DEV_MODE=1), SGLang's POST /flush_cache.
    #[arg(long, requires = "endpoint")]
    pub reset_prefix_cache: bool,
    /// With --endpoint: send generator K's part of a run that N generators send together
    /// (K from 0 to N-1): given the same flags, they send one seeded schedule between them,
    /// and their records merge into the one run's (`report A B …`, `follow A B …`). Default:
    /// from JOB_COMPLETION_INDEX/JOB_COMPLETION_COUNT (a Kubernetes Indexed Job), else
    /// SLURM_PROCID/SLURM_NTASKS (an srun step), when set; 0/1 is the whole run.
    #[arg(long, value_name = "K/N", value_parser = crate::traffic::Shard::parse, requires = "endpoint")]
    pub shard: Option<crate::traffic::Shard>,
    /// With --endpoint: start the schedule at TIME, unix seconds or RFC 3339
    /// (2026-01-01T12:00:00Z), on the reference clock (--clock-ref): the server is found out
    /// and the first connections opened before it, so N generators start at once.
    #[arg(long, value_name = "TIME", value_parser = values::start_at, requires = "endpoint")]
    pub start_at: Option<f64>,
    /// With --shard or --start-at: the clock to go by: a URL whose Date header gives it
    /// (default: the first endpoint's /v1/models; a peer's machine serving HTTP), or `local`
    /// for this machine's own (nodes kept in step by NTP or PTP).
    #[arg(long, value_name = "URL|local", requires = "endpoint")]
    pub clock_ref: Option<String>,
}

/// Where the measurements go.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub struct OutputOpts {
    /// No dashboard: JSON lines and a summary on stdout (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Write the JSONL record to FILE (flushed after every request).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Also emit one line per decode step.
    #[arg(long)]
    pub jsonl_steps: bool,
    /// Add generated ids and text to request lines.
    #[arg(long)]
    pub record_tokens: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Md)]
    pub format: SummaryFormat,
    /// Latency objectives, e.g. ttft=200ms,tpot=50ms.
    #[arg(long, value_parser = Slo::parse)]
    pub slo: Option<Slo>,
    /// Telemetry sample interval [default: 100ms; 1s for a server run without
    /// --telemetry-gpu, whose telemetry is only this client's own memory].
    #[arg(long, value_parser = values::duration, value_name = "DURATION")]
    pub sample_interval: Option<Duration>,
    /// Do not start the telemetry thread.
    #[arg(long)]
    pub no_telemetry: bool,
    /// Sample this GPU's NVML figures (memory, processes, utilisation, power, clocks) beside
    /// the run: its NVML index, as nvidia-smi numbers them. For a CPU run or a server on this
    /// machine; a CUDA run samples its own device without it.
    #[arg(long, value_name = "INDEX", conflicts_with = "no_telemetry")]
    pub telemetry_gpu: Option<u32>,
    /// A previous run's record: the dashboard shows its p50/p99 beside the live ones.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Serve the client's own figures as Prometheus text at http://ADDR/metrics while it runs
    /// (histograms of TTFT, time to answer, TPOT, ITL, E2E and send lag, the TTFT's parts by
    /// the server's timings, requests by outcome, in flight): a bare port listens on
    /// 127.0.0.1, HOST:PORT where it says (unauthenticated).
    #[arg(long, value_name = "ADDR", value_parser = values::listen_addr)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Stream the whole record on stdout as JSON lines, header first and footer last (implies
    /// --headless; the summary is the footer's): what `infertop follow -` reads, e.g.
    /// `ssh gpu1 infertop --jsonl … | infertop follow -`.
    #[arg(long)]
    pub jsonl: bool,
}

/// How a full-screen view looks: every subcommand that draws one takes these.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Display")]
pub struct DisplayOpts {
    /// Frames per second, 1 to 120 (default 10; 5 over SSH, where bytes cost more).
    #[arg(long, value_parser = values::fps)]
    pub fps: Option<u32>,
    /// Theme: a name (default, light, high-contrast, mono) or a TOML file.
    #[arg(long, default_value = "default")]
    pub theme: String,
    /// Colour on the screen.
    #[arg(long, value_enum, default_value_t = ColorMode::Auto)]
    pub color: ColorMode,
    /// Only ASCII characters on the screen.
    #[arg(long)]
    pub ascii: bool,
    /// Key bindings TOML file.
    #[arg(long)]
    pub keys: Option<PathBuf>,
}

/// What is sent beyond made-up lengths: datasets, traces, conversations, shared prefixes.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Traffic")]
pub struct TrafficOpts {
    /// A dataset or trace to send: ShareGPT (.json array or JSONL), JSONL rows (text, prompt,
    /// messages or input_length; output_length; timestamp or delay in ms; hash_ids), Mooncake
    /// traces, or BurstGPT's CSV. Every row once, unless --requests or --duration.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "prompt_file", "shared_prefix"])]
    pub dataset: Option<PathBuf>,
    /// The dataset's format (auto: from the extension and the first row).
    #[arg(long, value_enum, default_value_t = Format::Auto, requires = "dataset")]
    pub dataset_format: Format,
    /// Keep only rows whose field (or CSV column) has this value, e.g. model=GPT-4; several
    /// comma-separated.
    #[arg(long, value_name = "KEY=VALUE", requires = "dataset", value_parser = dataset::parse_filter_flag)]
    pub dataset_filter: Option<dataset::Filter>,
    /// The order rows are sent in (shuffle: with --seed).
    #[arg(long, value_enum, default_value_t = Order::Sequential, requires = "dataset")]
    pub dataset_order: Order,
    /// Skip malformed rows (counted and recorded) instead of stopping at the first.
    #[arg(long, requires = "dataset")]
    pub skip_bad_rows: bool,
    /// Tokens per hash id of a trace's rows (Mooncake's 512; Alibaba's traces use 16).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE, value_parser = values::positive_usize, requires = "dataset")]
    pub block_size: usize,
    /// Send each row at its timestamp (open loop; latency counts from the scheduled time), with
    /// servers only; --concurrency caps what is in flight.
    #[arg(long, requires = "dataset", conflicts_with_all = ["rate", "turns"])]
    pub replay: bool,
    /// With --replay: the trace's clock scaled, e.g. 0.5 sends it twice as fast.
    #[arg(long, value_name = "X", default_value = "1", value_parser = time_scale, requires = "replay")]
    pub time_scale: f64,
    /// Replay conversations turn by turn over --api chat, each turn resending the history with
    /// the replies streamed: `all` turns or the first N (with --dataset, or --conversations).
    #[arg(long, value_name = "all|N", value_parser = Turns::parse)]
    pub turns: Option<Turns>,
    /// With --turns: this many synthetic conversations, turns of -p tokens, replies of -n.
    #[arg(long, value_name = "N", value_parser = values::positive_usize, requires = "turns", conflicts_with = "dataset")]
    pub conversations: Option<usize>,
    /// With --turns: the pause before each turn after the first, from the end of the reply:
    /// a duration (2s), or exp:2s (exponential, mean 2 s), or uniform:1s..3s.
    #[arg(long, value_name = "D", value_parser = ThinkTime::parse, requires = "turns")]
    pub think_time: Option<ThinkTime>,
    /// With --turns: how long a simulated tool takes to answer a reply that ends in tool calls
    /// (its result, the dataset's or a made-up one, goes back before the next turn): a
    /// duration, exp:2s or uniform:1s..3s (default 0).
    #[arg(long, value_name = "D", value_parser = ThinkTime::parse, requires = "turns")]
    pub tool_time: Option<ThinkTime>,
    /// Requests in G groups whose prompts share a P-token prefix, then a Q-token question of
    /// their own: groups=G,prefix=P,question=Q[,distribution=zipf].
    #[arg(long, value_name = "SPEC", value_parser = SharedPrefix::parse)]
    pub shared_prefix: Option<SharedPrefix>,
}

/// `--time-scale`: a factor > 0.
fn time_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!(
            "`{s}` is not a time scale (use a number > 0: 0.5 is twice as fast, 2 half as fast)"
        )),
    }
}

/// Repeating the whole run.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Repetitions")]
pub struct RepeatOpts {
    /// Repeat the whole run N times (N ≥ 2; the same flags and seed, so the same requests, each
    /// run with its own warmup), then print every headline statistic per run with its mean,
    /// standard deviation, coefficient of variation and 95 % confidence interval across runs.
    #[arg(long, value_name = "N", value_parser = values::runs)]
    pub runs: Option<usize>,
    /// With --runs: idle time between two runs, e.g. 10s (default 0s).
    #[arg(long, value_name = "DURATION", value_parser = values::cooldown, requires = "runs")]
    pub cooldown: Option<Duration>,
}

/// Everything a run takes: `infertop [run]`, and the base of every sweep cell.
#[derive(Args, Debug, Clone)]
pub struct RunOpts {
    #[command(flatten)]
    pub model: ModelOpts,
    #[command(flatten)]
    pub workload: WorkloadOpts,
    #[command(flatten)]
    pub traffic: TrafficOpts,
    #[command(flatten)]
    pub server: ServerOpts,
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub display: DisplayOpts,
    #[command(flatten)]
    pub repeat: RepeatOpts,
    /// Test-only fault injection, hidden from --help: `panic@N` or `error@N` makes the worker
    /// panic or fail in request N (0-based, after its prefill), `ui-panic@N` makes the dashboard
    /// thread panic when request N finishes. The fault tests use it to check that a failure
    /// is reported, the record keeps what was measured, and the terminal is restored.
    #[arg(long, hide = true, value_parser = parse_fault)]
    pub fault: Option<Faults>,
}

impl RunOpts {
    /// Whether the run measures a server (`--endpoint`) rather than a model of its own.
    pub fn is_server(&self) -> bool {
        !self.server.endpoint.is_empty()
    }
}

/// The faults `--fault` injects (test-only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub worker: Option<worker::Fault>,
    /// Panic on the dashboard thread when this request finishes.
    pub ui_panic: Option<u64>,
}

fn parse_fault(spec: &str) -> Result<Faults, String> {
    let bad = || format!("`{spec}` is not panic@N, error@N or ui-panic@N");
    let (kind, n) = spec.split_once('@').ok_or_else(bad)?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    let mut f = Faults::default();
    match kind {
        "panic" => f.worker = Some(worker::Fault::Panic(n)),
        "error" => f.worker = Some(worker::Fault::Error(n)),
        "ui-panic" => f.ui_panic = Some(n),
        _ => return Err(bad()),
    }
    Ok(f)
}

/// `--format` of watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchFormat {
    /// A line of text per window, a markdown table at the end.
    #[default]
    Text,
    /// A JSON object per window (`"type":"window"`), then one for the whole watch.
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct WatchOpts {
    /// The servers' metrics URLs, or base URLs (then /metrics is read), or Slurm hostlists
    /// such as gpu[01-04] (read at --port): a row per node, and their total. Without any,
    /// the nodes of this Slurm job ($SLURM_JOB_NODELIST) at --port.
    #[arg(num_args = 0..)]
    pub url: Vec<String>,
    /// The servers' port, for hostlists and Slurm's nodes.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// GPU and host exporters to read beside the servers: NVIDIA's DCGM exporter, nvitop's
    /// exporter, node_exporter or `infertop agent` (repeat the flag, or list several). Each
    /// goes with the node on its host; one on a host without a server is a row of its own.
    #[arg(long, value_name = "URL", num_args = 1..)]
    pub gpu_metrics: Vec<String>,
    /// Every node's exporter at this port of its host (repeat for several, e.g. 9400 for
    /// DCGM and 9100 for node_exporter).
    #[arg(long, value_name = "PORT")]
    pub gpu_port: Vec<u16>,
    /// Seconds between scrapes (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = values::duration)]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = values::duration)]
    pub duration: Option<Duration>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: WatchFormat,
    /// Print lines even in a terminal (the default there is the live screen). Lines are also
    /// what a pipe, a file or `--format json` gets.
    #[arg(long)]
    pub headless: bool,
    /// Write every window (each node's and the total), the exporters' figures and failed
    /// scrapes to FILE as a record that `report` and `compare` read.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// A canary lane: a small completions request of a fixed size every so often to the first
    /// node's server, e.g. every=5s,prompt=32,output=8: what a user's request waits there, the
    /// one request the watch sends (its TTFT and E2E shown and recorded beside the metrics).
    #[arg(long, value_name = "every=DUR,prompt=N,output=N", value_parser = crate::engine::http::canary::CanaryPlan::parse)]
    pub probe: Option<crate::engine::http::canary::CanaryPlan>,
    /// With --probe: the model the canaries ask for (default: the first of /v1/models).
    #[arg(long, value_name = "NAME", requires = "probe")]
    pub probe_model: Option<String>,
    #[command(flatten)]
    pub display: DisplayOpts,
}

/// `infertop replay RECORD`.
#[derive(Args, Debug, Clone)]
pub struct ReplayOpts {
    /// The record (JSONL) to play: a run's, a sweep's or a watch's (written with --record).
    pub record: PathBuf,
    /// How fast: a multiple of the record's own pace (1, 4, 0.25) or max (as fast as it reads).
    #[arg(long, default_value = "1", value_parser = crate::record::feed::Speed::parse)]
    pub speed: crate::record::feed::Speed,
    /// Start paused at the first request (space plays, n steps one request at a time).
    #[arg(long)]
    pub paused: bool,
    /// No dashboard: fold the whole record as the dashboard does and print the summary, as the
    /// run printed it (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Write the record's lines to stdout at --speed instead, as a live run streams them with
    /// --jsonl (into `infertop follow -`, say).
    #[arg(long)]
    pub jsonl: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Md)]
    pub format: SummaryFormat,
    #[command(flatten)]
    pub display: DisplayOpts,
}

/// `infertop follow RECORD|- … [--agent CMD …]`.
#[derive(Args, Debug, Clone)]
pub struct FollowOpts {
    /// Records another infertop is writing (its --record FILE), or - for a stream of record
    /// lines on stdin (`ssh gpu1 infertop --jsonl … | infertop follow -`). Several are merged.
    #[arg(value_name = "RECORD|-")]
    pub sources: Vec<PathBuf>,
    /// A command whose stdout is a record's lines (an infertop run with --jsonl, locally or
    /// over ssh), started and read by infertop; repeat for several machines. `NAME=CMD` names
    /// its row. It runs in its own process group: Ctrl-C here never reaches it, and it cannot
    /// ask for a password (use SSH keys).
    #[arg(long, value_name = "CMD")]
    pub agent: Vec<String>,
    /// A source that has written nothing for this long is said to be quiet.
    #[arg(long, default_value = "10s", value_parser = values::duration)]
    pub quiet_after: Duration,
    /// No dashboard: print the summary over every source once all have ended (or on Ctrl-C),
    /// automatic when stdout is not a terminal.
    #[arg(long)]
    pub headless: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Md)]
    pub format: SummaryFormat,
    #[command(flatten)]
    pub display: DisplayOpts,
}

/// `infertop agent`: this machine's GPUs (NVML) and host as Prometheus text, for nodes that
/// run no exporter. It is unauthenticated: whoever can reach the address can read it.
#[derive(Args, Debug, Clone)]
pub struct AgentOpts {
    /// The address to listen on. The default is this machine only; anything else (e.g.
    /// 0.0.0.0) serves every network that can reach it, without authentication.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// The port to listen on.
    #[arg(long, default_value_t = 9401)]
    pub port: u16,
}
