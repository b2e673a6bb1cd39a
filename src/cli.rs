//! Command-line interface: parse, validate everything up front (exit 2 with one line naming the
//! flag or file), then dispatch to the dashboard, a headless run, or a subcommand.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::engine::events::{Control, Event, StopReason};
use crate::engine::worker::{self, WorkerConfig};
use crate::engine::workload::{LenSpec, PromptSource, Workload};
use crate::model::{self, presets, DeviceSpec, ModelSpec};
use crate::record::{Recorder, RunSummary, SummaryFormat};
use crate::stats::{parse_duration_s, RunStats, Slo};
use crate::telemetry;

/// Prints a line to stderr, ignoring failure: stderr may be a terminal that has hung up, and
/// `eprintln!` would panic there before the record is closed.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Events the channel from the worker and the sampler holds before producers wait
/// (about 40 s of decode steps of the tiny model; a few MB preallocated).
pub const EVENT_QUEUE: usize = 1 << 16;

/// Exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// top for LLM inference latency: live TTFT/TPOT of repeated prefill/decode runs.
#[derive(Parser, Debug)]
#[command(name = "infertop", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the benchmark (the default): the dashboard in a terminal, JSON lines otherwise.
    Run(Box<RunArgs>),
    /// List the synthetic presets with their parameters and memory.
    Presets,
    /// Write a synthetic model as a Hugging Face directory (or a GGUF file).
    MakeModel(MakeModelArgs),
    /// List the CPU and GPUs (through NVML).
    Devices {
        /// text or json
        #[arg(long, default_value = "text")]
        format: String,
    },
    /// Recompute the summary from a record (JSONL) file, with warmup/settling, goodput, roofline,
    /// cost, and an optional plot.
    Report(ReportArgs),
    /// Compare records: steady-state percentiles, bootstrap CIs of the median differences, and
    /// whether the generated outputs differ (exit code 3 if they do).
    Compare(CompareArgs),
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// A Hugging Face directory, a .gguf file, or synthetic:NAME (see `infertop presets`).
    #[arg(long, short, default_value = "synthetic:tiny")]
    pub model: String,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// f32, f16 or bf16 (default: f32 on CPU, bf16 on CUDA).
    #[arg(long)]
    pub dtype: Option<String>,
    /// CPU threads for candle (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seed for synthetic weights, prompt ids and length ranges.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Prompt tokens: N, a list cycled per request (128,512), or a range (64..512).
    #[arg(long, short = 'p')]
    pub prompt_tokens: Option<String>,
    /// Output tokens per sequence: N, a list, or a range.
    #[arg(long, short = 'n', default_value = "32")]
    pub output_tokens: String,
    /// Sequences per request.
    #[arg(long, short, default_value = "1")]
    pub batch: String,
    /// Prompt text (tokenized with the model's tokenizer).
    #[arg(long, conflicts_with = "prompt_file")]
    pub prompt: Option<String>,
    /// A file of prompts, one per line, cycled per request.
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// Stop a sequence at its end-of-sequence token (ignored by default).
    #[arg(long)]
    pub stop_at_eos: bool,
    /// The first N requests are warmup, kept out of steady-state statistics.
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Stop after N requests (default: run until stopped).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(long)]
    pub duration: Option<String>,
    /// Add generated ids and text to request lines.
    #[arg(long)]
    pub record_tokens: bool,
    /// No dashboard: JSON lines and a summary on stdout (automatic when stdout is not a terminal).
    #[arg(long)]
    pub headless: bool,
    /// Also emit one line per decode step.
    #[arg(long)]
    pub jsonl_steps: bool,
    /// Summary format: md, json or csv.
    #[arg(long, default_value = "md")]
    pub format: String,
    /// Write the JSONL record to FILE (flushed after every request).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Latency objectives, e.g. ttft=200ms,tpot=50ms.
    #[arg(long)]
    pub slo: Option<String>,
    /// Telemetry sample interval.
    #[arg(long, default_value = "100ms")]
    pub sample_interval: String,
    /// Do not start the telemetry thread.
    #[arg(long)]
    pub no_telemetry: bool,
    /// Dashboard frames per second.
    #[arg(long, default_value_t = 10)]
    pub fps: u32,
    /// Dashboard theme: a name (default, light, high-contrast, mono) or a TOML file.
    #[arg(long, default_value = "default")]
    pub theme: String,
    /// auto, always or never.
    #[arg(long, default_value = "auto")]
    pub color: String,
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
    #[arg(long, hide = true)]
    pub fault: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct MakeModelArgs {
    /// Output directory (or .gguf file with --gguf).
    pub out: PathBuf,
    /// Preset shape (see `infertop presets`).
    #[arg(long, default_value = "tiny")]
    pub preset: String,
    /// llama, qwen2 or mistral (default: the preset's).
    #[arg(long)]
    pub arch: Option<String>,
    /// Write a GGUF file (q8_0) instead of a directory.
    #[arg(long)]
    pub gguf: bool,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// A failure with its exit code; the message is one line.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn usage(m: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: m.into(),
        }
    }

    pub fn runtime(m: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILURE,
            message: m.into(),
        }
    }
}

/// Parses the command line and runs; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return EXIT_OK;
            }
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            say!("infertop: error: {first} (see infertop --help)");
            return EXIT_USAGE;
        }
    };
    let result = match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(*args),
        Some(Command::Presets) => {
            print!("{}", presets_table());
            Ok(EXIT_OK)
        }
        Some(Command::MakeModel(args)) => make_model(&args).map(|_| EXIT_OK),
        Some(Command::Devices { format }) => devices(&format),
        Some(Command::Report(args)) => report(&args),
        Some(Command::Compare(args)) => compare(&args),
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            say!("infertop: error: {}", f.message);
            f.code
        }
    }
}

fn devices(format: &str) -> Result<i32, Failure> {
    let json = match format {
        "text" => false,
        "json" => true,
        other => {
            return Err(Failure::usage(format!(
                "--format: unknown format `{other}` (use text or json)"
            )))
        }
    };
    let text = telemetry::devices_report(json).map_err(|e| Failure::runtime(e.to_string()))?;
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    Ok(EXIT_OK)
}

/// `infertop report`.
#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The record (JSONL) written with --record.
    pub record: PathBuf,
    /// md, json or csv (csv: the summary table only).
    #[arg(long, default_value = "md")]
    pub format: String,
    /// Also draw TTFT/TPOT per request and the latency CDFs to this SVG (or .png, through
    /// rsvg-convert when it is installed).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Latency objectives for goodput, e.g. ttft=200ms,tpot=50ms (default: the run's --slo).
    #[arg(long)]
    pub slo: Option<String>,
    /// Hardware cost per hour (any currency) for the cost per million output tokens.
    #[arg(long)]
    pub cost_per_hour: Option<f64>,
    /// Peak memory bandwidth for the roofline, e.g. 3.35TB/s (a bare number is GB/s).
    #[arg(long)]
    pub peak_bw: Option<String>,
    /// Peak FLOP/s for the roofline, e.g. 989T (a bare number is TFLOP/s).
    #[arg(long)]
    pub peak_flops: Option<String>,
    /// Take peak figures from the known-device table, e.g. "H100", "A100 80GB PCIe", "L4".
    #[arg(long)]
    pub device_name: Option<String>,
    /// Do not run the short CPU bandwidth/FLOP probe for CPU records.
    #[arg(long)]
    pub no_probe: bool,
}

/// `infertop compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Two or more records; the first is the baseline.
    #[arg(required = true, num_args = 2..)]
    pub records: Vec<PathBuf>,
    /// md or json.
    #[arg(long, default_value = "md")]
    pub format: String,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 2000)]
    pub resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

fn report(args: &ReportArgs) -> Result<i32, Failure> {
    use crate::record::report::{Report, ReportOptions};
    use crate::stats::roofline;
    let format = SummaryFormat::parse(&args.format).map_err(Failure::usage)?;
    let slo = match &args.slo {
        Some(s) => Some(Slo::parse(s).map_err(|m| Failure::usage(format!("--slo: {m}")))?),
        None => None,
    };
    if let Some(c) = args.cost_per_hour {
        if !(c.is_finite() && c >= 0.0) {
            return Err(Failure::usage(format!(
                "--cost-per-hour: {c} is not a cost (use a number ≥ 0, e.g. 2.5)"
            )));
        }
    }
    let peak_bw = match &args.peak_bw {
        Some(s) => Some(
            roofline::parse_bandwidth(s).map_err(|m| Failure::usage(format!("--peak-bw: {m}")))?,
        ),
        None => None,
    };
    let peak_flops = match &args.peak_flops {
        Some(s) => Some(
            roofline::parse_flops(s).map_err(|m| Failure::usage(format!("--peak-flops: {m}")))?,
        ),
        None => None,
    };
    if let Some(d) = &args.device_name {
        if roofline::lookup(d).is_none() {
            let known: Vec<&str> = roofline::KNOWN_DEVICES.iter().map(|k| k.name).collect();
            return Err(Failure::usage(format!(
                "--device-name: `{d}` is not in the table (known: {}); or pass --peak-bw and --peak-flops",
                known.join(", ")
            )));
        }
    }
    if args.record.is_dir() {
        return Err(Failure::usage(format!(
            "{}: is a directory; pass a record file written with --record FILE",
            args.record.display()
        )));
    }
    let rec = crate::record::reader::read(&args.record).map_err(Failure::usage)?;
    let opts = ReportOptions {
        slo,
        cost_per_hour: args.cost_per_hour,
        peak_bw,
        peak_flops,
        device_name: args.device_name.clone(),
        probe: !args.no_probe,
        rule: crate::stats::SettleRule::default(),
    };
    let report = Report::of(&rec, &opts);
    if let Some(out) = &args.plot {
        let svg = crate::record::plot::plot_svg(&rec, &report.analysis.settling);
        crate::record::plot::write_plot(out, &svg).map_err(Failure::usage)?;
        say!("wrote {}", out.display());
    }
    print!("{}", report.render(format));
    Ok(EXIT_OK)
}

/// `infertop compare`: exit 0, or 3 when generated outputs differ (see `record::compare`).
fn compare(args: &CompareArgs) -> Result<i32, Failure> {
    use crate::record::compare::{compare_files, CompareFormat, CompareOptions};
    let format = CompareFormat::parse(&args.format).map_err(Failure::usage)?;
    if args.resamples == 0 {
        return Err(Failure::usage(
            "--resamples: 0 resamples gives no interval (use e.g. 2000)",
        ));
    }
    let opts = CompareOptions {
        resamples: args.resamples,
        seed: args.seed,
        ..CompareOptions::default()
    };
    let paths: Vec<&Path> = args.records.iter().map(PathBuf::as_path).collect();
    let cmp = compare_files(&paths, &opts).map_err(Failure::usage)?;
    print!("{}", cmp.render(format));
    let _ = std::io::stdout().flush();
    for alarm in cmp.alarms() {
        say!("infertop: {alarm}");
    }
    Ok(cmp.exit_code())
}

/// `infertop presets`.
pub fn presets_table() -> String {
    let mut out = String::from(
        "| preset | arch | params | layers | hidden | heads/kv | vocab | positions | f32 | bf16 | about |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for p in presets::PRESETS {
        let c = (p.config)();
        let params = c.params();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} |\n",
            p.name,
            c.arch.name(),
            human_count(params),
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.vocab_size,
            c.max_position_embeddings,
            human_bytes(params * 4),
            human_bytes(params * 2),
            p.about
        ));
    }
    out
}

pub fn human_count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2}B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}K", n as f64 / 1e3),
        n => n.to_string(),
    }
}

pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b} B")
    }
}

/// `infertop make-model`.
pub fn make_model(args: &MakeModelArgs) -> Result<(), Failure> {
    let preset = presets::find(&args.preset).ok_or_else(|| {
        Failure::usage(format!(
            "--preset: unknown preset `{}` (known: {})",
            args.preset,
            presets::names()
        ))
    })?;
    let mut cfg = (preset.config)();
    if let Some(a) = &args.arch {
        let arch = model::Arch::parse(a).ok_or_else(|| {
            Failure::usage(format!(
                "--arch: unknown architecture `{a}` (use llama, qwen2 or mistral)"
            ))
        })?;
        cfg = presets::with_arch(cfg, arch);
    }
    let need = cfg.params() * 4;
    if need > 8_000_000_000 {
        return Err(Failure::usage(format!(
            "--preset {}: {} of f32 weights is too large to write; benchmark it in memory with --model synthetic:{}",
            args.preset,
            human_bytes(need),
            args.preset
        )));
    }
    let tokenizer = model::tokenizer::train_bpe(cfg.vocab_size.min(4096))
        .map_err(|e| Failure::runtime(e.to_string()))?;
    if args.gguf {
        if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| Failure::usage(model::ModelError::io(parent, e).to_string()))?;
        }
        model::gguf::write_synthetic(&cfg, args.seed, &args.out)
            .map_err(|e| Failure::usage(e.to_string()))?;
        let tk_path = args.out.with_extension("tokenizer.json");
        tokenizer
            .save(&tk_path, false)
            .map_err(|e| Failure::runtime(format!("{}: {e}", tk_path.display())))?;
        say!(
            "wrote {} ({} {} parameters, q8_0) and {}",
            args.out.display(),
            human_count(cfg.params()),
            cfg.arch.name(),
            tk_path.display()
        );
        return Ok(());
    }
    if args.out.is_file() {
        return Err(Failure::usage(format!(
            "{}: is a file; make-model writes a directory",
            args.out.display()
        )));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::usage(model::ModelError::io(&args.out, e).to_string()))?;
    let cfg_path = args.out.join("config.json");
    let text = serde_json::to_string_pretty(&cfg.to_json()).unwrap_or_default();
    std::fs::write(&cfg_path, text + "\n")
        .map_err(|e| Failure::runtime(model::ModelError::io(&cfg_path, e).to_string()))?;
    let mut tensors = std::collections::HashMap::new();
    for spec in cfg.tensor_specs() {
        let values = model::synthetic::tensor_values(&spec, args.seed);
        let t =
            candle_core::Tensor::from_vec(values, spec.shape.as_slice(), &candle_core::Device::Cpu)
                .map_err(|e| Failure::runtime(e.to_string()))?;
        tensors.insert(spec.name.clone(), t);
    }
    let st_path = args.out.join("model.safetensors");
    candle_core::safetensors::save(&tensors, &st_path)
        .map_err(|e| Failure::runtime(format!("{}: {e}", st_path.display())))?;
    let tk_path = args.out.join("tokenizer.json");
    tokenizer
        .save(&tk_path, false)
        .map_err(|e| Failure::runtime(format!("{}: {e}", tk_path.display())))?;
    say!(
        "wrote {} ({} {} parameters, f32): config.json, model.safetensors, tokenizer.json",
        args.out.display(),
        human_count(cfg.params()),
        cfg.arch.name()
    );
    Ok(())
}

/// Everything a run needs, validated.
struct RunPlan {
    worker: WorkerConfig,
    headless: bool,
    format: SummaryFormat,
    slo: Slo,
    sample_interval: Option<Duration>,
    dashboard: Option<crate::ui::DashboardOptions>,
}

fn plan(args: &RunArgs, signal: &Arc<AtomicUsize>) -> Result<RunPlan, Failure> {
    let spec = ModelSpec::parse(&args.model, args.seed).map_err(Failure::usage)?;
    let device = DeviceSpec::parse(&args.device).map_err(Failure::usage)?;
    let dtype = match &args.dtype {
        Some(d) => model::parse_dtype(d).map_err(Failure::usage)?,
        None => device.default_dtype(),
    };
    let batch = match args.batch.trim().parse::<i64>() {
        Ok(b) if b >= 1 => b as usize,
        Ok(b) => {
            return Err(Failure::usage(format!(
                "--batch: {b} is not a positive batch size (use 1 or more)"
            )))
        }
        Err(_) => {
            return Err(Failure::usage(format!(
                "--batch: `{}` is not a number",
                args.batch
            )))
        }
    };
    let output = LenSpec::parse("--output-tokens", &args.output_tokens).map_err(Failure::usage)?;
    let prompt_len = match &args.prompt_tokens {
        Some(p) => Some(LenSpec::parse("--prompt-tokens", p).map_err(Failure::usage)?),
        None => None,
    };
    if let Some(t) = args.threads {
        if t == 0 {
            return Err(Failure::usage(
                "--threads: 0 is not a thread count (use 1 or more)",
            ));
        }
    }
    let duration = match &args.duration {
        Some(d) => Some(Duration::from_secs_f64(
            parse_duration_s(d).map_err(|m| Failure::usage(format!("--duration: {m}")))?,
        )),
        None => None,
    };
    if args.requests == Some(0) {
        return Err(Failure::usage(
            "--requests: 0 requests measures nothing (use 1 or more)",
        ));
    }
    let slo = match &args.slo {
        Some(s) => Slo::parse(s).map_err(|m| Failure::usage(format!("--slo: {m}")))?,
        None => Slo::default(),
    };
    let format = SummaryFormat::parse(&args.format).map_err(Failure::usage)?;
    let sample_interval = if args.no_telemetry {
        None
    } else {
        let s = parse_duration_s(&args.sample_interval)
            .map_err(|m| Failure::usage(format!("--sample-interval: {m}")))?;
        Some(Duration::from_secs_f64(s.max(0.001)))
    };
    if args.fps == 0 || args.fps > 120 {
        return Err(Failure::usage(format!(
            "--fps: {} is out of range (use 1 to 120)",
            args.fps
        )));
    }

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
        Some(load_tokenizer(&spec, arch.as_ref())?)
    } else {
        None
    };
    let source = if let Some(text) = &args.prompt {
        let tk = tokenizer
            .as_ref()
            .ok_or_else(|| Failure::usage("--prompt: no tokenizer"))?;
        let ids = encode(tk, text, "--prompt")?;
        PromptSource::Text(vec![ids])
    } else if let Some(file) = &args.prompt_file {
        let tk = tokenizer
            .as_ref()
            .ok_or_else(|| Failure::usage("--prompt-file: no tokenizer"))?;
        let lines = read_prompt_file(file)?;
        let mut all = Vec::with_capacity(lines.len());
        for l in &lines {
            all.push(encode(tk, l, &format!("--prompt-file {}", file.display()))?);
        }
        PromptSource::Text(all)
    } else {
        PromptSource::Synthetic
    };
    let prompt_len = match (&source, prompt_len) {
        (PromptSource::Synthetic, None) => Some(LenSpec::Fixed(128)),
        (_, p) => p,
    };
    let workload = Workload {
        prompt: prompt_len,
        output,
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

    let headless = args.headless || !std::io::stdout().is_terminal();
    // The dashboard's flags and files are checked in headless runs too: a mistake in a script
    // should not pass unnoticed until the same command is run in a terminal.
    let dashboard = {
        let color = crate::ui::ColorMode::parse(&args.color).map_err(Failure::usage)?;
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
            fps: args.fps,
            theme: args.theme.clone(),
            color,
            ascii: args.ascii,
            slo,
            keys_file: args.keys.clone(),
            output_step: 16,
            signal: signal.clone(),
        };
        crate::ui::validate_options(&opts).map_err(|e| Failure::usage(e.to_string()))?;
        (!headless).then_some(opts)
    };
    // What candle will use: RAYON_NUM_THREADS (set from --threads in `run`) or every core.
    let threads = args
        .threads
        .unwrap_or_else(candle_core::utils::get_num_threads);
    Ok(RunPlan {
        worker: WorkerConfig {
            model: spec,
            device,
            dtype,
            threads,
            workload,
            warmup: args.warmup,
            requests: args.requests,
            duration,
            stop_at_eos: args.stop_at_eos,
            record_tokens: args.record_tokens,
            tokenizer: if args.record_tokens { tokenizer } else { None },
        },
        headless,
        format,
        slo,
        sample_interval,
        dashboard,
    })
}

fn load_tokenizer(
    spec: &ModelSpec,
    arch: Option<&model::ArchConfig>,
) -> Result<tokenizers::Tokenizer, Failure> {
    match spec {
        ModelSpec::Synthetic { .. } => {
            let vocab = arch.map(|c| c.vocab_size).unwrap_or(2048).min(4096);
            model::tokenizer::train_bpe(vocab).map_err(|e| Failure::runtime(e.to_string()))
        }
        ModelSpec::HfDir(dir) => model::tokenizer::load(&dir.join("tokenizer.json"))
            .map_err(|e| Failure::usage(e.to_string())),
        ModelSpec::Gguf(path) => {
            let beside = path.with_extension("tokenizer.json");
            let in_dir = path.parent().map(|p| p.join("tokenizer.json"));
            let found = [Some(beside.clone()), in_dir]
                .into_iter()
                .flatten()
                .find(|p| p.is_file());
            match found {
                Some(p) => model::tokenizer::load(&p).map_err(|e| Failure::usage(e.to_string())),
                None => Err(Failure::usage(format!(
                    "{}: text prompts need a tokenizer; put tokenizer.json next to the GGUF file (as {})",
                    path.display(),
                    beside.display()
                ))),
            }
        }
    }
}

fn encode(tk: &tokenizers::Tokenizer, text: &str, what: &str) -> Result<Vec<u32>, Failure> {
    let enc = tk
        .encode(text, false)
        .map_err(|e| Failure::usage(format!("{what}: cannot tokenize ({e})")))?;
    let ids = enc.get_ids().to_vec();
    if ids.is_empty() {
        return Err(Failure::usage(format!(
            "{what}: the prompt is empty after tokenization"
        )));
    }
    Ok(ids)
}

/// Maximum length of one prompt line.
const MAX_PROMPT_LINE: usize = 1 << 20;

fn read_prompt_file(path: &Path) -> Result<Vec<String>, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::usage(format!("--prompt-file {}", model::ModelError::io(path, e))))?;
    if bytes.contains(&0) {
        return Err(Failure::usage(format!(
            "--prompt-file {}: looks binary (contains NUL bytes); use a UTF-8 text file with one prompt per line",
            path.display()
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        Failure::usage(format!(
            "--prompt-file {}: is not UTF-8 text",
            path.display()
        ))
    })?;
    let mut lines = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.len() > MAX_PROMPT_LINE {
            return Err(Failure::usage(format!(
                "--prompt-file {}: line {} is {} bytes, over the 1 MiB limit for one prompt; split it, or use --prompt-tokens N for long synthetic prompts",
                path.display(),
                i + 1,
                l.len()
            )));
        }
        if !l.trim().is_empty() {
            lines.push(l.to_string());
        }
    }
    if lines.is_empty() {
        return Err(Failure::usage(format!(
            "--prompt-file {}: has no prompts (one prompt per line)",
            path.display()
        )));
    }
    Ok(lines)
}

/// The faults `--fault` injects (test-only).
#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    worker: Option<worker::Fault>,
    /// Panic on the dashboard thread when this request finishes.
    ui_panic: Option<u64>,
}

fn parse_fault(spec: Option<&str>) -> Result<Faults, Failure> {
    let Some(spec) = spec else {
        return Ok(Faults::default());
    };
    let bad = || {
        Failure::usage(format!(
            "--fault: `{spec}` is not panic@N, error@N or ui-panic@N"
        ))
    };
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

/// The signal that asked us to stop, as a stop reason and conventional exit code.
fn signal_stop(sig: usize) -> (StopReason, i32) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    match sig as i32 {
        SIGINT => (StopReason::UserStop, 130),
        SIGTERM => (StopReason::Signal("SIGTERM".into()), 143),
        SIGHUP => (StopReason::Signal("SIGHUP".into()), 129),
        other => (StopReason::Signal(format!("signal {other}")), 128 + other),
    }
}

fn register_signals() -> Result<Arc<AtomicUsize>, Failure> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(sig, flag.clone(), sig as usize)
            .map_err(|e| Failure::runtime(format!("cannot install signal handler: {e}")))?;
    }
    Ok(flag)
}

fn header_line(args: &RunArgs, plan: &RunPlan) -> serde_json::Value {
    let cmd: Vec<String> = std::env::args().collect();
    serde_json::json!({
        "type": "header",
        "infertop_version": env!("CARGO_PKG_VERSION"),
        "record_format": 1,
        "command": cmd,
        "config": {
            "model": args.model,
            "device": plan.worker.device.name(),
            "dtype": model::dtype_name(plan.worker.dtype),
            "threads": plan.worker.threads,
            "seed": args.seed,
            "prompt_tokens": plan.worker.workload.describe().prompt_tokens,
            "output_tokens": args.output_tokens,
            "batch": plan.worker.workload.batch,
            "warmup": args.warmup,
            "requests": args.requests,
            "duration": args.duration,
            "stop_at_eos": args.stop_at_eos,
            "slo": plan.slo,
        },
        "machine": machine_info(plan.worker.device),
    })
}

fn machine_info(device: DeviceSpec) -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
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
    serde_json::json!({
        "cpu": cpu,
        "gpu": gpu,
        "driver": driver,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "candle_version": "0.11.1",
        "cuda_feature": cfg!(feature = "cuda"),
    })
}

/// A benchmark run: dashboard or headless.
fn run(args: RunArgs) -> Result<i32, Failure> {
    let signal = register_signals()?;
    let plan = plan(&args, &signal)?;
    let fault = parse_fault(args.fault.as_deref())?;
    // candle's CPU kernels size their thread pools from RAYON_NUM_THREADS (set before any pool
    // exists). Unset, candle recounts the cores on every matmul by reading /proc/cpuinfo, a file
    // read inside every timed step; pinning it once keeps that out of the measurement.
    std::env::set_var("RAYON_NUM_THREADS", plan.worker.threads.to_string());
    let mut recorder = match &args.record {
        Some(path) => Some(
            Recorder::create(path, header_line(&args, &plan), args.jsonl_steps)
                .map_err(Failure::usage)?,
        ),
        None => None,
    };
    // Bounded, so a consumer that stalls (a frozen SSH connection blocks the dashboard in its
    // terminal write) cannot make memory grow for hours: once full, the worker waits between
    // steps, outside every timed region, and goes on when the consumer does.
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let started = Instant::now();
    let telemetry_device = match plan.worker.device {
        DeviceSpec::Cpu => telemetry::TelemetryDevice::Cpu,
        DeviceSpec::Cuda(n) => telemetry::TelemetryDevice::Cuda(n),
    };
    let sampler = plan
        .sample_interval
        .map(|i| telemetry::spawn_default(telemetry_device, i, ev_tx.clone(), started));
    let headless = plan.headless;
    let format = plan.format;
    let dashboard = plan.dashboard;
    let handle = worker::spawn_with_fault(plan.worker, fault.worker, ev_tx, ctl_rx)
        .map_err(|e| Failure::runtime(format!("cannot start the worker thread: {e}")))?;

    let mut resources = crate::record::resources::Resources::default();
    let outcome = if headless {
        run_headless(
            &ev_rx,
            &ctl_tx,
            &signal,
            recorder.as_mut(),
            &mut resources,
            started,
            args.jsonl_steps,
        )
    } else {
        let opts = dashboard.ok_or_else(|| Failure::runtime("no dashboard options"))?;
        let mut on_event = |ev: &Event| {
            resources.observe(ev);
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
            Ok(Ok(o)) => Outcome {
                stats: o.stats,
                stop: o.stop,
                failed: o.failed,
            },
            Ok(Err(e)) => {
                let _ = ctl_tx.send(Control::Stop(StopReason::Error));
                Outcome {
                    stats: RunStats::new(),
                    stop: StopReason::Error,
                    failed: Some(format!("dashboard: {e}")),
                }
            }
            Err(_) => {
                let _ = ctl_tx.send(Control::Stop(StopReason::Error));
                Outcome {
                    stats: RunStats::new(),
                    stop: StopReason::Error,
                    failed: Some(
                        "the dashboard panicked (see above); the record keeps every finished request"
                            .into(),
                    ),
                }
            }
        }
    };
    // Nobody reads events any more: dropping the receiver turns a producer blocked on a full
    // queue into a failed send, so neither the sampler nor the worker can hang the exit.
    drop(ev_rx);
    if let Some(s) = sampler {
        s.stop();
    }
    // The worker got a stop (or finished); it ends within one decode step.
    let _ = ctl_tx.send(Control::Stop(outcome.stop.clone()));
    let _ = handle.join();

    let summary = RunSummary::from_stats(&outcome.stats).with_resources(resources);
    if let Some(r) = recorder.as_mut() {
        r.finish(&outcome.stop, started.elapsed().as_secs_f64(), &summary);
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(summary.render(format).as_bytes());
    let _ = out.flush();
    if let Some(msg) = outcome.failed {
        say!("infertop: error: {msg}");
        return Ok(EXIT_FAILURE);
    }
    let sig = signal.load(Ordering::Relaxed);
    if sig != 0 {
        return Ok(signal_stop(sig).1);
    }
    Ok(EXIT_OK)
}

struct Outcome {
    stats: RunStats,
    stop: StopReason,
    failed: Option<String>,
}

/// Headless: JSON lines per request (and step) on stdout until the worker finishes.
fn run_headless(
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signal: &Arc<AtomicUsize>,
    mut recorder: Option<&mut Recorder>,
    resources: &mut crate::record::resources::Resources,
    started: Instant,
    steps: bool,
) -> Outcome {
    let mut stats = RunStats::new();
    let mut warmup_of_current = false;
    let mut failed = None;
    let mut stop = StopReason::UserStop;
    let mut asked_stop = false;
    let stdout = std::io::stdout();
    loop {
        let sig = signal.load(Ordering::Relaxed);
        if sig != 0 && !asked_stop {
            asked_stop = true;
            let _ = control.send(Control::Stop(signal_stop(sig).0));
        }
        let ev = match events.recv_timeout(Duration::from_millis(50)) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if let Some(r) = recorder.as_deref_mut() {
            r.on_event(started.elapsed().as_secs_f64(), &ev);
        }
        resources.observe(&ev);
        let mut out = stdout.lock();
        match &ev {
            Event::RequestStarted { warmup, .. } => warmup_of_current = *warmup,
            Event::DecodeStep {
                index,
                step,
                itl_s,
                gpu_s,
            } => {
                stats.record_step(*itl_s, warmup_of_current);
                if steps {
                    let _ = writeln!(
                        out,
                        "{}",
                        crate::record::writer::step_line(*index, *step, *itl_s, *gpu_s)
                    );
                }
            }
            Event::RequestDone(r) => {
                stats.record_request(r);
                let _ = writeln!(out, "{}", crate::record::writer::request_line(r));
                let _ = out.flush();
            }
            Event::StatsReset => stats.reset(),
            Event::Error { message, fatal } => {
                if *fatal {
                    failed = Some(message.clone());
                } else {
                    say!("infertop: warning: {message}");
                }
            }
            Event::Finished(reason) => {
                stop = reason.clone();
                break;
            }
            _ => {}
        }
    }
    Outcome {
        stats,
        stop,
        failed,
    }
}
