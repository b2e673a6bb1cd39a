//! Command-line interface, one file per subcommand: `run` (the default), `report`, `compare`,
//! `presets`, `make-model`, `devices` and `sweep`. Flags are typed by clap (`ValueEnum`s and value
//! parsers), so a bad value is refused before anything starts, as one line naming the flag and
//! what to write instead, with exit code 2.

mod args;
mod compare;
mod devices;
mod make_model;
mod prompt;
mod report;
pub mod run;
mod sweep;
mod watch;

use std::io::Write;

use clap::{Parser, Subcommand};

pub use crate::event::EVENT_QUEUE;
pub use crate::run::{EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
pub use make_model::{make_model, presets_table, MakeModelArgs};
pub use run::RunArgs;

/// Prints a line to stderr, ignoring failure: stderr may be a terminal that has hung up, and
/// `eprintln!` would panic there before the record is closed.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

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
    Devices(devices::DevicesArgs),
    /// Recompute the summary from a record (JSONL) file, with warmup/settling, goodput, roofline,
    /// cost, and an optional plot.
    Report(report::ReportArgs),
    /// Compare records: steady-state percentiles, bootstrap CIs of the median differences, and
    /// whether the generated outputs differ (exit code 3 if they do).
    Compare(compare::CompareArgs),
    /// Run a grid of workloads (comma lists of --batch, --prompt-tokens, --output-tokens; with
    /// --endpoint, --concurrency or --rate), each cell measured like a run; print one row per
    /// cell and what the grid shows (knee, best cell, saturation, roofline).
    Sweep(Box<sweep::SweepArgs>),
    /// Watch a running server's own Prometheus metrics (no load generated): request rate,
    /// running/waiting, KV cache, and its TTFT/ITL/E2E percentiles per window.
    Watch(watch::WatchArgs),
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
            say!("infertop: error: {}", args::one_line_error(&e));
            return EXIT_USAGE;
        }
    };
    let result = match cli.command {
        None => run::run(cli.run),
        Some(Command::Run(args)) => run::run(*args),
        Some(Command::Presets) => print_stdout(&presets_table()).map(|_| EXIT_OK),
        Some(Command::MakeModel(args)) => make_model(&args).map(|_| EXIT_OK),
        Some(Command::Devices(args)) => devices::devices(&args),
        Some(Command::Report(args)) => report::report(&args),
        Some(Command::Compare(args)) => compare::compare(&args),
        Some(Command::Sweep(args)) => sweep::sweep(&args),
        Some(Command::Watch(args)) => watch::watch(&args),
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            say!("infertop: error: {}", f.message);
            f.code
        }
    }
}

/// Writes `text` to stdout and flushes. A reader that went away early (`infertop report … |
/// head -1`) is not an error: it has what it wanted, and the command exits 0 (`print!` would
/// panic there). Any other write error (a full disk) is one.
pub(crate) fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::runtime(format!(
            "cannot write to standard output ({})",
            crate::util::one_line(&e.to_string())
        ))),
    }
}
