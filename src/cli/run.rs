//! `infertop [run]`: check everything up front (`plan`), start the engine and the telemetry
//! thread, consume their events (the dashboard or headless JSON lines), then close the record
//! and print the summary. Whatever consumes the events, `run::Run` folds them, so both modes
//! print the same summary from the same code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::DType;
use clap::Args;
use crossbeam_channel::{Receiver, Sender};

use super::prompt::{load_tokenizer, prompt_source};
use super::{args, say, Failure};
use crate::engine::http::{self, Api, Endpoint, HttpConfig};
use crate::engine::worker::{self, WorkerConfig};
use crate::engine::workload::{LenSpec, PromptSource, Sampling, Workload};
use crate::event::{Control, Event, StopReason};
use crate::model::{self, DeviceSpec, ModelSpec};
use crate::record::line::{Header, Machine, RunConfig, RECORD_FORMAT};
use crate::record::{Recorder, SummaryFormat};
use crate::run::{since, Consumer, Outcome, Run, Signals, EXIT_FAILURE};
use crate::stats::Slo;
use crate::telemetry;
use crate::ui::ColorMode;

/// `--dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DTypeArg {
    #[value(alias = "float32")]
    F32,
    #[value(alias = "float16", alias = "half")]
    F16,
    #[value(alias = "bfloat16")]
    Bf16,
}

impl DTypeArg {
    pub fn dtype(self) -> DType {
        match self {
            DTypeArg::F32 => DType::F32,
            DTypeArg::F16 => DType::F16,
            DTypeArg::Bf16 => DType::BF16,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// A Hugging Face directory, a .gguf file, or synthetic:NAME (see `infertop presets`).
    #[arg(long, short, default_value = "synthetic:tiny")]
    pub model: String,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu", value_parser = DeviceSpec::parse)]
    pub device: DeviceSpec,
    /// f32, f16 or bf16 (default: f32 on CPU, bf16 on CUDA).
    #[arg(long, value_enum)]
    pub dtype: Option<DTypeArg>,
    /// CPU threads for candle (default: all cores).
    #[arg(long, value_parser = args::positive_usize)]
    pub threads: Option<usize>,
    /// Seed for synthetic weights, prompt ids and length ranges.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Prompt tokens: N, a list cycled per request (128,512), or a range (64..512).
    #[arg(long, short = 'p', value_parser = LenSpec::parse)]
    pub prompt_tokens: Option<LenSpec>,
    /// Output tokens per sequence: N, a list, or a range.
    #[arg(long, short = 'n', default_value = "32", value_parser = LenSpec::parse)]
    pub output_tokens: LenSpec,
    /// Sequences per request.
    #[arg(long, short, default_value = "1", value_parser = args::positive_usize)]
    pub batch: usize,
    /// Prompt text (tokenized with the model's tokenizer).
    #[arg(long, conflicts_with = "prompt_file")]
    pub prompt: Option<String>,
    /// A file of prompts, one per line, cycled per request.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// A tokenizer.json to use instead of the model's own (e.g. a GGUF without tokenizer metadata);
    /// with --endpoint, the served model's (prompts of exact length), or `server` for the
    /// server's own /tokenize.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
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
    #[arg(long, value_parser = args::positive)]
    pub requests: Option<u64>,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(long, value_parser = args::duration)]
    pub duration: Option<Duration>,
    /// Add generated ids and text to request lines.
    #[arg(long)]
    pub record_tokens: bool,
    /// No dashboard: JSON lines and a summary on stdout (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Also emit one line per decode step.
    #[arg(long)]
    pub jsonl_steps: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Md)]
    pub format: SummaryFormat,
    /// Write the JSONL record to FILE (flushed after every request).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Latency objectives, e.g. ttft=200ms,tpot=50ms.
    #[arg(long, value_parser = Slo::parse)]
    pub slo: Option<Slo>,
    /// Telemetry sample interval.
    #[arg(long, default_value = "100ms", value_parser = args::duration)]
    pub sample_interval: Duration,
    /// Do not start the telemetry thread.
    #[arg(long)]
    pub no_telemetry: bool,
    /// Dashboard frames per second, 1 to 120 (default 10; 5 over SSH, where bytes cost more).
    #[arg(long, value_parser = args::fps)]
    pub fps: Option<u32>,
    /// Dashboard theme: a name (default, light, high-contrast, mono) or a TOML file.
    #[arg(long, default_value = "default")]
    pub theme: String,
    /// Colour in the dashboard.
    #[arg(long, value_enum, default_value_t = ColorMode::Auto)]
    pub color: ColorMode,
    /// Only ASCII characters in the dashboard.
    #[arg(long)]
    pub ascii: bool,
    /// Key bindings TOML file.
    #[arg(long)]
    pub keys: Option<PathBuf>,
    /// A previous run's record: the dashboard shows its p50/p99 beside the live ones.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Test-only fault injection, hidden from --help: `panic@N` or `error@N` makes the worker
    /// panic or fail in request N (0-based, after its prefill), `ui-panic@N` makes the dashboard
    /// thread panic when request N finishes. The fault tests use it to check that a failure
    /// is reported, the record keeps what was measured, and the terminal is restored.
    #[arg(long, hide = true, value_parser = parse_fault)]
    pub fault: Option<Faults>,
    /// Measure an OpenAI-compatible streaming server instead of a local model (repeat the flag
    /// to spread requests over replicas round-robin), e.g. http://127.0.0.1:8000.
    #[arg(long, value_name = "URL", value_parser = Endpoint::parse)]
    pub endpoint: Vec<Endpoint>,
    /// With --endpoint: the API to stream.
    #[arg(long, value_enum, default_value_t = Api::Completions, requires = "endpoint")]
    pub api: Api,
    /// With --endpoint: the model name the server serves (default: the first of GET /v1/models).
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    pub served_model: Option<String>,
    /// With --endpoint: bearer token (default: $OPENAI_API_KEY); never recorded or printed.
    #[arg(long, value_name = "KEY", requires = "endpoint", value_parser = args::secret)]
    pub api_key: Option<args::Secret>,
    /// With --endpoint: requests in flight (closed loop; default 1). With --rate: the cap.
    #[arg(long, value_parser = args::positive_usize, requires = "endpoint")]
    pub concurrency: Option<usize>,
    /// With --endpoint: open loop, this many requests per second (Poisson arrivals, seeded);
    /// latency counts from each request's scheduled send time.
    #[arg(long, value_name = "R", value_parser = args::rate, requires = "endpoint")]
    pub rate: Option<f64>,
    /// With --rate: the shape of the gamma-distributed gaps between arrivals (1: Poisson; below
    /// 1 burstier, above 1 more regular; the mean rate stays --rate).
    #[arg(long, value_name = "B", default_value = "1", value_parser = args::burstiness, requires = "rate")]
    pub burstiness: f64,
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
    #[arg(long, default_value = "5m", value_parser = args::duration)]
    pub request_timeout: Duration,
}

/// The engine a run drives (a sweep plans one per cell).
pub(crate) enum EnginePlan {
    Candle(Box<WorkerConfig>),
    Http(Box<HttpConfig>),
}

/// Everything a run needs, validated.
struct RunPlan {
    engine: EnginePlan,
    slo: Slo,
    dashboard: Option<crate::ui::DashboardOptions>,
    /// `--server-metrics`: the URLs to scrape (their windows add up); empty without the flag.
    server_metrics: Vec<reqwest::Url>,
}

/// The dashboard's options, checked (in headless runs too: a mistake in a script should not pass
/// unnoticed until the same command is run in a terminal); `None` when the run is headless.
pub(crate) fn dashboard_options(
    args: &RunArgs,
    slo: Slo,
    signals: &Signals,
) -> Result<Option<crate::ui::DashboardOptions>, Failure> {
    let headless = args.headless || !std::io::stdout().is_terminal();
    // The dashboard's flags and files are checked in headless runs too: a mistake in a script
    // should not pass unnoticed until the same command is run in a terminal.
    {
        let baseline = match &args.baseline {
            Some(path) => {
                let summary = crate::record::reader::summary_of(path)
                    .map_err(|m| Failure::usage(format!("--baseline: {m}")))?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| path.display().to_string());
                Some(crate::ui::state::Baseline {
                    name,
                    table: summary.steady,
                })
            }
            None => None,
        };
        let opts = crate::ui::DashboardOptions {
            baseline,
            fps: args.fps.unwrap_or_else(default_fps),
            theme: args.theme.clone(),
            color: args.color,
            ascii: args.ascii,
            slo,
            keys_file: args.keys.clone(),
            output_step: 16,
            signals: signals.clone(),
        };
        crate::ui::validate_options(&opts).map_err(|e| Failure::usage(e.to_string()))?;
        Ok((!headless).then_some(opts))
    }
}

/// Checks every flag and file before anything starts, so a mistake is one line and exit 2.
fn plan(args: &RunArgs, signals: &Signals) -> Result<RunPlan, Failure> {
    let engine = plan_engine(args)?;
    let slo = args.slo.unwrap_or_default();
    let dashboard = dashboard_options(args, slo, signals)?;
    let server_metrics = server_metrics_urls(&args.server_metrics, &args.endpoint)?;
    Ok(RunPlan {
        engine,
        slo,
        dashboard,
        server_metrics,
    })
}

/// `--server-metrics`: the URLs given, or for a bare flag every endpoint's `/metrics` (each
/// replica of a round-robin run; the windows add them up).
fn server_metrics_urls(
    given: &[String],
    endpoints: &[Endpoint],
) -> Result<Vec<reqwest::Url>, Failure> {
    let mut raw: Vec<String> = Vec::new();
    for g in given {
        match g.trim() {
            "" => raw.extend(endpoints.iter().map(|e| e.url("/metrics").to_string())),
            u => raw.push(u.to_string()),
        }
    }
    raw.dedup();
    raw.iter()
        .map(|r| {
            crate::scrape::metrics_url(r)
                .map_err(|e| Failure::usage(format!("--server-metrics: {e}")))
        })
        .collect()
}

/// Frames per second when `--fps` is not given: fewer over SSH (`SSH_CONNECTION` or `SSH_TTY`
/// set), where every byte crosses a link that may be slow; the charts lose nothing at 5.
fn default_fps() -> u32 {
    let over_ssh = ["SSH_CONNECTION", "SSH_TTY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if over_ssh {
        5
    } else {
        10
    }
}

/// The engine `args` ask for, checked: candle, or the http engine with `--endpoint`.
pub(crate) fn plan_engine(args: &RunArgs) -> Result<EnginePlan, Failure> {
    Ok(if args.endpoint.is_empty() {
        EnginePlan::Candle(Box::new(plan_candle(args)?))
    } else {
        EnginePlan::Http(Box::new(plan_http(args)?))
    })
}

impl EnginePlan {
    /// What the telemetry thread samples: the device of the candle engine; for a server, only
    /// this process (the server's device is not ours to sample).
    pub(crate) fn telemetry_device(&self) -> telemetry::TelemetryDevice {
        match self {
            EnginePlan::Candle(w) => match w.device {
                DeviceSpec::Cpu => telemetry::TelemetryDevice::Cpu,
                DeviceSpec::Cuda(n) => telemetry::TelemetryDevice::Cuda(n),
            },
            EnginePlan::Http(_) => telemetry::TelemetryDevice::Cpu,
        }
    }

    /// Starts the engine on its thread.
    pub(crate) fn spawn(
        self,
        fault: Option<worker::Fault>,
        events: Sender<Event>,
        control: Receiver<Control>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        match self {
            EnginePlan::Candle(w) => worker::spawn_with_fault(*w, fault, events, control),
            EnginePlan::Http(h) => http::spawn(*h, events, control),
        }
    }
}

/// `--endpoint`: the http engine's configuration.
fn plan_http(args: &RunArgs) -> Result<HttpConfig, Failure> {
    if args.batch > 1 {
        return Err(Failure::usage(format!(
            "--batch {}: with --endpoint every request is one sequence; use --concurrency for parallel requests",
            args.batch
        )));
    }
    let api_key = match &args.api_key {
        Some(k) => Some(k.expose().to_string()),
        None => std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty()),
    };
    if server_tokenizer(args) {
        let texts = super::prompt::prompt_texts(args)?.map(std::sync::Arc::new);
        return Ok(http_config(args, api_key, http::Prompts::Server { texts }));
    }
    let tokenizer = match &args.tokenizer {
        Some(path) => Some(super::prompt::tokenizer_flag(path)?),
        None => None,
    };
    let prompts = match super::prompt::prompt_texts(args)? {
        Some(texts) => http::Prompts::Texts(std::sync::Arc::new(
            texts
                .into_iter()
                .map(|t| http::PromptText::new(t, tokenizer.as_ref()))
                .collect(),
        )),
        None => match (&tokenizer, &args.tokenizer) {
            (Some(tk), Some(path)) => {
                let words = http::PromptWords::from_tokenizer(tk).map_err(|why| {
                    Failure::usage(format!(
                        "--tokenizer {}: cannot make prompts of exact length with it ({why}); drop --tokenizer for approximate prompts",
                        path.display()
                    ))
                })?;
                http::Prompts::Words(std::sync::Arc::new(words))
            }
            _ => http::Prompts::Approximate,
        },
    };
    Ok(http_config(args, api_key, prompts))
}

/// `--tokenizer server`: the server's own `/tokenize` (servers only).
fn server_tokenizer(args: &RunArgs) -> bool {
    args.tokenizer.as_deref() == Some(std::path::Path::new("server"))
}

fn http_config(args: &RunArgs, api_key: Option<String>, prompts: http::Prompts) -> HttpConfig {
    HttpConfig {
        endpoints: args.endpoint.clone(),
        prompts,
        api: args.api,
        served_model: args.served_model.clone(),
        api_key,
        prompt: args.prompt_tokens.clone().unwrap_or(LenSpec::Fixed(128)),
        output: args.output_tokens.clone(),
        seed: args.seed,
        concurrency: args.concurrency,
        rate: args.rate,
        burstiness: args.burstiness,
        warmup: args.warmup,
        requests: args.requests,
        duration: args.duration,
        request_timeout: args.request_timeout,
        exact_output: !args.stop_at_eos,
        chunk_usage: args.chunk_usage,
        record_tokens: args.record_tokens,
    }
}

/// The candle engine's configuration: the model, checked without loading its weights.
fn plan_candle(args: &RunArgs) -> Result<WorkerConfig, Failure> {
    let spec = ModelSpec::parse(&args.model, args.seed).map_err(Failure::usage)?;
    if server_tokenizer(args) {
        return Err(Failure::usage(
            "--tokenizer server: only with --endpoint (a model of infertop's own has its tokenizer; or give a tokenizer.json)",
        ));
    }
    let device = args.device;
    let dtype = args
        .dtype
        .map(DTypeArg::dtype)
        .unwrap_or_else(|| device.default_dtype());
    let batch = args.batch;

    // The model's shape (without loading weights) for up-front checks.
    let arch = model::arch_config_of(&spec).map_err(|e| Failure::usage(e.to_string()))?;
    if let (Some(cfg), ModelSpec::HfDir(dir)) = (&arch, &spec) {
        cfg.check_supported()
            .map_err(|m| Failure::usage(format!("{}: {m}", dir.join("config.json").display())))?;
        // Map the files and check every tensor's name, shape and dtype now, so a broken download
        // is a one-line error before the dashboard starts (mapping reads only the headers).
        let files = model::hf::weight_files(dir).map_err(|e| Failure::usage(e.to_string()))?;
        model::hf::open_checked(cfg, &files).map_err(|e| Failure::usage(e.to_string()))?;
    }
    if let ModelSpec::Gguf(path) = &spec {
        model::gguf::check_header(path).map_err(|e| Failure::usage(e.to_string()))?;
        if batch > 1 {
            // candle's quantized llama/qwen2 take the last position of a (batch, seq) activation as a
            // strided view that its quantized matmul rejects ("input tensor is not contiguous").
            return Err(Failure::usage(format!(
                "--batch {batch}: candle's quantized (GGUF) models run batch 1 only; use --batch 1, or a Hugging Face directory for batched runs"
            )));
        }
    }

    // Prompts.
    let needs_text = args.prompt.is_some() || args.prompt_file.is_some();
    let tokenizer = if needs_text || args.record_tokens {
        Some(load_tokenizer(
            &spec,
            arch.as_ref(),
            args.tokenizer.as_deref(),
        )?)
    } else {
        None
    };
    let source = prompt_source(args, tokenizer.as_ref())?;
    let prompt_len = match (&source, &args.prompt_tokens) {
        (PromptSource::Synthetic, None) => Some(LenSpec::Fixed(128)),
        (_, p) => p.clone(),
    };
    let workload = Workload {
        prompt: prompt_len,
        output: args.output_tokens.clone(),
        batch,
        source,
        vocab: arch.as_ref().map(|c| c.vocab_size).unwrap_or(32000),
        seed: args.seed,
    };
    if let Some(cfg) = &arch {
        let needed = workload.max_positions_needed();
        if needed > cfg.max_position_embeddings {
            return Err(Failure::usage(format!(
                "prompt + output tokens ({needed}) exceed the model's {} positions; lower --prompt-tokens or --output-tokens",
                cfg.max_position_embeddings
            )));
        }
    }

    Ok(WorkerConfig {
        model: spec,
        device,
        dtype,
        threads: candle_threads(args),
        workload,
        warmup: args.warmup,
        requests: args.requests,
        duration: args.duration,
        stop_at_eos: args.stop_at_eos,
        record_tokens: args.record_tokens,
        tokenizer: if args.record_tokens { tokenizer } else { None },
        sampling: args.sampling.clone(),
    })
}

/// The CPU threads candle will use: `--threads`, else `RAYON_NUM_THREADS`, else every core.
pub(crate) fn candle_threads(args: &RunArgs) -> usize {
    args.threads
        .unwrap_or_else(candle_core::utils::get_num_threads)
}

/// The faults `--fault` injects (test-only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    worker: Option<worker::Fault>,
    /// Panic on the dashboard thread when this request finishes.
    ui_panic: Option<u64>,
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

/// The record's header for a run of `engine` (a sweep writes one for the whole grid).
pub(crate) fn header(args: &RunArgs, engine: &EnginePlan, slo: Slo) -> Header {
    // The command line, with an --api-key value blanked.
    let mut command: Vec<String> = std::env::args().collect();
    for i in 0..command.len() {
        if command[i].starts_with("--api-key=") {
            command[i] = "--api-key=***".into();
        } else if command[i] == "--api-key" {
            if let Some(v) = command.get_mut(i + 1) {
                *v = "***".into();
            }
        }
    }
    let common = RunConfig {
        model: args.model.clone(),
        seed: args.seed,
        output_tokens: args.output_tokens.to_string(),
        warmup: args.warmup,
        requests: args.requests,
        duration: args.duration.map(|d| format!("{}s", d.as_secs_f64())),
        stop_at_eos: args.stop_at_eos,
        sampling: args.sampling.as_ref().map(Sampling::describe),
        slo,
        ..RunConfig::default()
    };
    let (config, device) = match engine {
        EnginePlan::Candle(w) => (
            RunConfig {
                device: w.device.name(),
                dtype: model::dtype_name(w.dtype).to_string(),
                threads: w.threads,
                prompt_tokens: w.workload.describe().prompt_tokens,
                batch: w.workload.batch,
                ..common
            },
            w.device,
        ),
        // No API key here: it is never written.
        EnginePlan::Http(h) => (
            RunConfig {
                engine: Some("http".into()),
                endpoints: h
                    .endpoints
                    .iter()
                    .map(|e| e.display().to_string())
                    .collect(),
                api: Some(
                    match h.api {
                        Api::Completions => "completions",
                        Api::Chat => "chat",
                    }
                    .into(),
                ),
                served_model: h.served_model.clone(),
                concurrency: h.concurrency,
                rate: h.rate,
                burstiness: h.rate.map(|_| h.burstiness),
                request_timeout_s: Some(h.request_timeout.as_secs_f64()),
                device: "http".into(),
                prompt_tokens: h.describe().prompt_tokens,
                output_tokens: h.output.to_string(),
                batch: 1,
                ..common
            },
            DeviceSpec::Cpu,
        ),
    };
    Header {
        infertop_version: env!("CARGO_PKG_VERSION").to_string(),
        record_format: RECORD_FORMAT,
        command,
        config,
        machine: machine(device),
        model: None,
    }
}

fn machine(device: DeviceSpec) -> Machine {
    let cpu = telemetry::process::cpu_model_name();
    // On CUDA, the GPU (through NVML) names the peak figures `report` uses for the roofline.
    let (gpu, driver) = match device {
        DeviceSpec::Cpu => (None, None),
        DeviceSpec::Cuda(n) => {
            let devices = telemetry::devices::collect();
            (
                devices.gpus.get(n).and_then(|g| g.name.clone()),
                devices.driver_version,
            )
        }
    };
    Machine {
        cpu,
        gpu,
        driver,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        candle_version: env!("INFERTOP_CANDLE_VERSION").to_string(),
        cuda_feature: cfg!(feature = "cuda"),
    }
}

/// A benchmark run: dashboard or headless.
pub fn run(args: RunArgs) -> Result<i32, Failure> {
    // candle's CPU kernels size their thread pools from RAYON_NUM_THREADS. Unset, candle
    // recounts the cores on every matmul by reading /proc/cpuinfo, a file read inside every
    // timed step; pinning it once keeps that out of the measurement. It is set first, while
    // this is the only thread and before anything (tokenizer training in `plan`) uses rayon.
    std::env::set_var("RAYON_NUM_THREADS", candle_threads(&args).to_string());
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let plan = plan(&args, &signals)?;
    let fault = args.fault.unwrap_or_default();
    let mut recorder = match &args.record {
        Some(path) => Some(
            Recorder::create(
                path,
                header(&args, &plan.engine, plan.slo),
                args.jsonl_steps,
            )
            .map_err(Failure::usage)?,
        ),
        None => None,
    };
    // Bounded, so a consumer that stalls (a frozen SSH connection blocks the dashboard in its
    // terminal write) cannot make memory grow for hours: once full, the engine waits between
    // steps, outside every timed region, and goes on when the consumer does.
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let started = Instant::now();
    let telemetry_device = plan.engine.telemetry_device();
    let sampler = (!args.no_telemetry).then(|| {
        telemetry::spawn_default(
            telemetry_device,
            args.sample_interval,
            ev_tx.clone(),
            started,
        )
    });
    let scrape_stop = Arc::new(AtomicBool::new(false));
    let scraper = match plan.server_metrics.is_empty() {
        false => Some(
            crate::scrape::spawn_scraper(
                plan.server_metrics.clone(),
                Duration::from_secs(1),
                ev_tx.clone(),
                scrape_stop.clone(),
            )
            .map_err(|e| Failure::runtime(format!("cannot start the metrics thread: {e}")))?,
        ),
        true => None,
    };
    let dashboard = plan.dashboard;
    let handle = plan
        .engine
        .spawn(fault.worker, ev_tx, ctl_rx)
        .map_err(|e| Failure::runtime(format!("cannot start the worker thread: {e}")))?;

    let outcome = match dashboard {
        None => run_headless(
            &ev_rx,
            &ctl_tx,
            &signals,
            recorder.as_mut(),
            started,
            args.jsonl_steps,
        ),
        Some(opts) => {
            let mut on_event = |ev: &Event| {
                if let Some(r) = recorder.as_mut() {
                    r.on_event(started.elapsed().as_secs_f64(), ev);
                }
                if let (Some(n), Event::RequestDone(r)) = (fault.ui_panic, ev) {
                    if r.index == n {
                        panic!("injected fault (--fault ui-panic@{n})");
                    }
                }
            };
            // A panic in the dashboard has restored the terminal (ratatui's hook) and printed
            // itself; catching it here stops the worker and writes the record's footer.
            let dashboard = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::ui::run_dashboard(ev_rx.clone(), ctl_tx.clone(), opts, &mut on_event)
            }));
            match dashboard {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => Outcome::failed(&Run::new(), format!("dashboard: {e}")),
                Err(_) => Outcome::failed(
                    &Run::new(),
                    "the dashboard panicked (see above); the record keeps every finished request"
                        .into(),
                ),
            }
        }
    };
    // Nobody reads events any more: dropping the receiver turns a producer blocked on a full
    // queue into a failed send, so neither the sampler nor the worker can hang the exit.
    drop(ev_rx);
    if let Some(s) = sampler {
        s.stop();
    }
    scrape_stop.store(true, Ordering::Relaxed);
    if let Some(s) = scraper {
        let _ = s.join();
    }
    // The worker got a stop (or finished); it ends within one decode step.
    let _ = ctl_tx.send(Control::Stop(outcome.stop.clone()));
    let _ = handle.join();

    if let Some(r) = recorder.as_mut() {
        r.finish(
            &outcome.stop,
            started.elapsed().as_secs_f64(),
            &outcome.summary,
        );
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(outcome.summary.render(args.format).as_bytes());
    let _ = out.flush();
    if let Some(msg) = &outcome.failed {
        say!("infertop: error: {msg}");
        return Ok(EXIT_FAILURE);
    }
    Ok(outcome.exit_code(&signals))
}

/// Headless: JSON lines per request (and step) on stdout until the engine finishes.
fn run_headless(
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signals: &Signals,
    mut recorder: Option<&mut Recorder>,
    started: Instant,
    steps: bool,
) -> Outcome {
    let mut run = Run::new();
    let mut consumer = Consumer {
        events,
        control,
        signals,
        interrupted: None,
    };
    let stdout = std::io::stdout();
    while run.live() {
        let Some(ev) = consumer.next(&mut run, recorder.as_deref_mut(), || since(started)) else {
            continue;
        };
        let mut out = stdout.lock();
        match &ev {
            Event::DecodeStep {
                index,
                step,
                itl_s,
                gpu_s,
            } if steps => {
                let line = crate::record::writer::step_line(*index, *step, *itl_s, *gpu_s);
                let _ = writeln!(out, "{line}");
            }
            Event::RequestDone(r) => {
                let _ = writeln!(out, "{}", crate::record::writer::request_line(r));
                let _ = out.flush();
            }
            Event::RequestFailed(f) => {
                let _ = writeln!(out, "{}", crate::record::writer::failed_line(f));
                let _ = out.flush();
            }
            Event::Error {
                message,
                fatal: false,
            } => say!("infertop: warning: {message}"),
            _ => {}
        }
    }
    if run.failed_requests > 0 {
        say!(
            "infertop: {} of {} requests failed ({:.1}%); the last: {}",
            run.failed_requests,
            run.failed_requests + run.completed_requests,
            100.0 * run.error_rate(),
            run.last_failure.as_deref().unwrap_or("")
        );
    }
    run.outcome(consumer.interrupted.unwrap_or(StopReason::UserStop))
}
