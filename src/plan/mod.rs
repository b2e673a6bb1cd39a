//! The planner: flags (`opts`) → a typed plan, checked before anything starts, so a mistake is
//! one line and exit 2 and nothing half-runs. A run's plan is its engine (`engine`), what it
//! writes (record, summary), what it draws (`Screen`), and the record's header (`header`); a
//! sweep's (`sweep`) is the same with one engine per cell, each planned once. The traffic
//! (`traffic`, `prompts`) and a generator's shard (`shard`) are planned here, and so is what
//! the record screens and `watch` read: a replay's record and header (`replay`), a follow's
//! sources (`follow`), a watch's nodes, name and header (`watch`). `session` carries the plans
//! out; `cli` only parses and dispatches.

pub mod determinism;
pub mod engine;
pub mod follow;
pub mod header;
pub mod opts;
mod prompts;
pub mod repeat;
pub mod replay;
pub mod shard;
pub mod sweep;
pub mod traffic;
pub mod values;
pub mod watch;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use crate::exit::Failure;
use crate::record::line::Header;
use crate::stats::Slo;
use crate::summary::SummaryFormat;
use crate::telemetry::TelemetryDevice;
use crate::ui::{AppConfig, Look};

pub use engine::EnginePlan;
pub use opts::{DisplayOpts, Faults, RunOpts};

/// A full-screen view, planned: how it looks (themes and keys loaded and checked once) and
/// how often it draws.
#[derive(Clone, Debug)]
pub struct ScreenPlan {
    pub app: AppConfig,
    pub fps: u32,
}

/// Where a run's measurements go besides the screen.
#[derive(Clone, Debug)]
pub struct Outputs {
    pub record: Option<PathBuf>,
    /// A line per decode step (stdout and the record).
    pub jsonl_steps: bool,
    pub format: SummaryFormat,
    /// `--metrics-listen`: where the client's figures are served as Prometheus text.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// What the telemetry thread samples, and how often (`None`: `--no-telemetry`).
#[derive(Clone, Copy, Debug)]
pub struct Telemetry {
    pub device: TelemetryDevice,
    pub interval: Duration,
}

/// Everything a run needs, validated.
pub struct RunPlan {
    pub engine: EnginePlan,
    pub header: Header,
    pub outputs: Outputs,
    pub telemetry: Option<Telemetry>,
    /// `--server-metrics`: the URLs to scrape (their windows add up); empty without the flag.
    pub server_metrics: Vec<reqwest::Url>,
    /// The dashboard; `None` when the run is headless.
    pub screen: Option<ScreenPlan>,
    pub faults: Faults,
    /// `--jsonl`: the whole record on stdout (header first, footer last), nothing else there.
    pub jsonl: bool,
    /// A run of several generators (`--shard`) or at a time (`--start-at`): the clock to
    /// measure and the time to start at; what to say before it starts.
    pub spread: shard::Spread,
    /// `--runs N`: the run repeated, with a cooldown between runs.
    pub repeat: Option<repeat::Repeat>,
}

/// Plans a run: every flag and file checked.
pub fn run(opts: &RunOpts) -> Result<RunPlan, Failure> {
    let mut engine = EnginePlan::of(opts)?;
    let now = crate::engine::http::clock::unix_s(std::time::SystemTime::now());
    let spread = shard::plan(opts, &mut engine, &|k| std::env::var(k).ok(), now)?;
    let slo = opts.output.slo.unwrap_or_default();
    let screen = screen_for_run(opts, slo)?;
    let server_metrics = server_metrics_urls(&opts.server.server_metrics, &opts.server.endpoint)?;
    let header = header::header(opts, &engine, slo);
    let repeat = repeat::plan(opts, &engine, &header)?;
    Ok(RunPlan {
        telemetry: telemetry(
            opts,
            engine.telemetry_device(),
            matches!(engine, EnginePlan::Http(_)),
        ),
        header,
        screen,
        server_metrics,
        outputs: Outputs {
            record: opts.output.record.clone(),
            jsonl_steps: opts.output.jsonl_steps,
            format: opts.output.format,
            metrics_listen: opts.output.metrics_listen,
        },
        jsonl: opts.output.jsonl,
        faults: opts.fault.unwrap_or_default(),
        engine,
        spread,
        repeat,
    })
}

/// `--telemetry-gpu` names the GPU to sample; without it, the run's own device (`server`: a
/// server run, whose own device is this client's process).
fn telemetry(opts: &RunOpts, device: TelemetryDevice, server: bool) -> Option<Telemetry> {
    let gpu = opts.output.telemetry_gpu;
    let interval = opts
        .output
        .sample_interval
        .unwrap_or(if server && gpu.is_none() {
            crate::telemetry::CLIENT_INTERVAL
        } else {
            crate::telemetry::DEFAULT_INTERVAL
        });
    (!opts.output.no_telemetry).then_some(Telemetry {
        device: gpu.map_or(device, TelemetryDevice::Gpu),
        interval,
    })
}

/// Whether the output is for a script: `--headless`, or stdout is not a terminal.
pub fn headless(flag: bool) -> bool {
    flag || !std::io::stdout().is_terminal()
}

/// The run dashboard's settings, checked in headless runs too (a mistake in a script should
/// not pass unnoticed until the same command is run in a terminal); `None` when headless.
pub fn screen_for_run(opts: &RunOpts, slo: Slo) -> Result<Option<ScreenPlan>, Failure> {
    let baseline = match &opts.output.baseline {
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
    let look = look(&opts.display)?;
    let fps = look.fps;
    let app = AppConfig {
        keys: look.keys,
        themes: look.themes,
        ascii: look.ascii,
        slo,
        output_step: 16,
        baseline,
    };
    // `--jsonl` makes stdout the record's: no screen there.
    let headless = headless(opts.output.headless || opts.output.jsonl);
    Ok((!headless).then_some(ScreenPlan { app, fps }))
}

/// The display flags, loaded and checked: themes, keys file, frame rate.
pub fn look(display: &DisplayOpts) -> Result<Look, Failure> {
    Look::load(
        &display.theme,
        display.color,
        display.ascii,
        display.keys.as_deref(),
        display.fps.unwrap_or_else(default_fps),
    )
    .map_err(|e| Failure::usage(crate::util::one_line(&e.to_string())))
}

/// Frames per second when `--fps` is not given: fewer over SSH (`SSH_CONNECTION` or `SSH_TTY`
/// set), where every byte crosses a link that may be slow; the charts lose nothing at 5.
pub fn default_fps() -> u32 {
    let over_ssh = ["SSH_CONNECTION", "SSH_TTY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    if over_ssh {
        5
    } else {
        10
    }
}

/// `--server-metrics`: the URLs given, or for a bare flag every endpoint's `/metrics` (each
/// replica of a round-robin run; the windows add them up).
fn server_metrics_urls(
    given: &[String],
    endpoints: &[crate::engine::http::Endpoint],
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
