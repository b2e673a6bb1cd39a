//! Command-line interface: parse, dispatch, and say what failed in one line. The flags of what
//! runs load or draws a screen (`run`, `sweep`, `watch`) are the planner's (`plan::opts`), and
//! `session` carries them out; the small commands (`report`, `compare`, `presets`, `make-model`,
//! `devices`) have a file each here. Flags are typed by clap (`ValueEnum`s and value parsers),
//! so a bad value is refused before anything starts, as one line naming the flag and what to
//! write instead, with exit code 2.

mod args;
mod compare;
mod devices;
mod make_model;
mod report;

use clap::{Parser, Subcommand};

use crate::exit::Failure;
use crate::exit::{EXIT_OK, EXIT_USAGE};
use crate::plan::RunOpts;
pub use make_model::{make_model, presets_table, MakeModelArgs};

pub(crate) use crate::session::print_stdout;
pub(crate) use crate::util::say;

/// top for LLM inference latency: live TTFT/TPOT of repeated prefill/decode runs.
#[derive(Parser, Debug)]
#[command(name = "infertop", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunOpts,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the benchmark (the default): the dashboard in a terminal, JSON lines otherwise.
    Run(Box<RunOpts>),
    /// List the synthetic presets with their parameters and memory.
    Presets,
    /// Write a synthetic model as a Hugging Face directory (or a GGUF file).
    MakeModel(MakeModelArgs),
    /// List the CPU and GPUs (through NVML).
    Devices(devices::DevicesArgs),
    /// Recompute the summary from a record (JSONL) file, with warmup/settling, goodput, roofline,
    /// cost, and an optional plot; or every statistic per window of the run (--slice).
    Report(report::ReportArgs),
    /// Compare records: steady-state percentiles, bootstrap CIs of the median differences, and
    /// whether the generated outputs differ (exit code 3 if they do).
    Compare(compare::CompareArgs),
    /// Run a grid of workloads (comma lists of --batch, --prompt-tokens, --output-tokens; with
    /// --endpoint, --concurrency or --rate), each cell measured like a run; print one row per
    /// cell and what the grid shows (knee, best cell, saturation, roofline).
    Sweep(Box<crate::plan::sweep::SweepArgs>),
    /// Watch running servers' own Prometheus metrics (no load generated): a row per node and
    /// their total, request rate, running/waiting, KV cache, TTFT/ITL/E2E/queue percentiles
    /// per window, and GPUs and hosts from the exporters already there (--gpu-metrics).
    Watch(crate::plan::opts::WatchOpts),
    /// The dashboard drawn from a record (a run's, a sweep's or a watch's), at its own pace,
    /// faster, or as fast as it reads: pause, step and speed keys, a position bar, the final
    /// screen held at the end. Its statistics are the record's (report's numbers).
    Replay(crate::plan::opts::ReplayOpts),
    /// The dashboard attached to records other infertop runs are writing (files, - for stdin,
    /// or --agent commands such as an ssh line), several merged into one: quitting never stops
    /// them.
    Follow(crate::plan::opts::FollowOpts),
    /// Serve this machine's GPUs (NVML) and host (CPU, memory, load) as Prometheus text for
    /// `watch --gpu-metrics`. Unauthenticated: it listens on 127.0.0.1 unless --bind widens it.
    Agent(crate::plan::opts::AgentOpts),
}

/// A run, or with `--determinism` a run's two passes compared.
fn run(opts: &RunOpts) -> Result<i32, Failure> {
    if opts.server.determinism {
        crate::session::determinism::run(opts)
    } else {
        crate::session::run::run(opts)
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
            say!("infertop: error: {}", args::one_line_error(&e));
            return EXIT_USAGE;
        }
    };
    let result = match cli.command {
        None => run(&cli.run),
        Some(Command::Run(args)) => run(&args),
        Some(Command::Presets) => print_stdout(&presets_table()).map(|_| EXIT_OK),
        Some(Command::MakeModel(args)) => make_model(&args).map(|_| EXIT_OK),
        Some(Command::Devices(args)) => devices::devices(&args),
        Some(Command::Report(args)) => report::report(&args),
        Some(Command::Compare(args)) => compare::compare(&args),
        Some(Command::Sweep(args)) if args.run.output.jsonl => Err(Failure::usage(
            "--jsonl: a sweep does not stream its record; write it with --record FILE and \
             follow that file (infertop follow FILE)",
        )),
        Some(Command::Sweep(args)) if args.run.server.determinism => Err(Failure::usage(
            "--determinism: not a sweep's flag; run infertop --endpoint URL --determinism \
             --concurrency N",
        )),
        Some(Command::Sweep(args)) => crate::session::sweep::sweep(&args),
        Some(Command::Watch(args)) => crate::session::watch::watch(&args),
        Some(Command::Replay(args)) => crate::session::replay::replay(&args),
        Some(Command::Follow(args)) => crate::session::follow::follow(&args),
        Some(Command::Agent(args)) => crate::session::agent::agent(&args),
    };
    match result {
        Ok(code) => code,
        // A signal's stop is no error: it says what it stopped.
        Err(f) if f.interrupted() => {
            say!("infertop: {}", f.message);
            f.code
        }
        Err(f) => {
            say!("infertop: error: {}", f.message);
            f.code
        }
    }
}
