//! `infertop sweep`'s flags and plan: a run's flags with `--batch`, `--prompt-tokens`,
//! `--output-tokens` (and, with `--endpoint`, `--concurrency`, `--rate`) taking comma lists;
//! one typed cell (`sweep::CellSpec`) per combination, each planned once into its engine.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::engine::{candle_threads, EnginePlan};
use super::opts::RunOpts;
use super::{header, telemetry, values, Outputs, ScreenPlan, Telemetry};
use crate::engine::workload::LenSpec;
use crate::record::line::{Header, SweepConfig};
use crate::run::Failure;
use crate::stats::Slo;
use crate::sweep::table::SweepFormat;
use crate::sweep::{len_axis, Axes, CellSpec, Repetitions};

/// How each cell is measured.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Sweep")]
pub struct SweepOpts {
    /// Steady requests per cell, after its warmup (with --precision: the least per cell).
    #[arg(long, default_value = "10", value_parser = values::positive)]
    pub repetitions: u64,
    /// Measure each cell until the bootstrap 95 % CI of its median TPOT is within this much of
    /// the median, e.g. 5% (or 0.05); at least --repetitions, at most --max-repetitions.
    #[arg(long, value_parser = values::precision)]
    pub precision: Option<f64>,
    /// With --precision: the most steady requests per cell (default 100).
    #[arg(long, value_parser = values::positive, requires = "precision")]
    pub max_repetitions: Option<u64>,
    /// Do not run the short CPU bandwidth probe the roofline line of a CPU sweep needs.
    #[arg(long)]
    pub no_probe: bool,
}

/// `infertop sweep`'s flags: a run's, with lists where a run takes one value.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    pub run: RunOpts,
    pub opts: SweepOpts,
    pub batch: Vec<usize>,
    pub concurrency: Vec<usize>,
    pub rate: Vec<f64>,
    pub format: SweepFormat,
}

impl Args for SweepArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = SweepOpts::augment_args(RunOpts::augment_args(cmd));
        let formats = PossibleValuesParser::new(
            SweepFormat::NAMES
                .iter()
                .map(|n| PossibleValue::new(*n))
                .collect::<Vec<_>>(),
        )
        .map(|s| match s.as_str() {
            "csv" => crate::record::SummaryFormat::Csv,
            "json" | "jsonl" => crate::record::SummaryFormat::Json,
            _ => crate::record::SummaryFormat::Md,
        });
        cmd.mut_arg("batch", |a| {
            a.value_delimiter(',')
                .value_parser(values::list_count)
                .help("Sequences per request: a list, one cell per value (e.g. 1,2,4,8,16)")
        })
        .mut_arg("prompt_tokens", |a| {
            a.help("Prompt tokens: a list, one cell per value (e.g. 128,512,2048)")
        })
        .mut_arg("output_tokens", |a| {
            a.help("Output tokens per sequence: a list, one cell per value")
        })
        .mut_arg("concurrency", |a| {
            a.value_delimiter(',')
                .value_parser(values::list_count)
                .help("With --endpoint: requests in flight, a list (e.g. 1,2,4,8,16)")
        })
        .mut_arg("rate", |a| {
            a.value_delimiter(',')
                .value_parser(values::list_rate)
                .help("With --endpoint: open-loop requests per second, a list (e.g. 1,2,4)")
        })
        .mut_arg("format", |a| {
            a.value_parser(formats)
                .help("The table's format: md, csv, json (one document) or jsonl (a line per cell)")
        })
        .mut_arg("warmup", |a| {
            a.help("Warmup requests per cell, kept out of its statistics")
        })
        .mut_arg("record", |a| {
            a.help("Write one JSONL record of every cell (flushed after every request)")
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for SweepArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut m.clone())
    }

    fn from_arg_matches_mut(m: &mut ArgMatches) -> Result<Self, clap::Error> {
        let many = |m: &ArgMatches, id: &str| -> Vec<usize> {
            m.get_many::<usize>(id)
                .map(|v| v.copied().collect())
                .unwrap_or_default()
        };
        let batch = many(m, "batch");
        let concurrency = many(m, "concurrency");
        let rate: Vec<f64> = m
            .get_many::<f64>("rate")
            .map(|v| v.copied().collect())
            .unwrap_or_default();
        let format = m
            .get_raw("format")
            .and_then(|mut v| v.next())
            .and_then(|v| SweepFormat::parse(&v.to_string_lossy()))
            .unwrap_or_default();
        Ok(SweepArgs {
            run: RunOpts::from_arg_matches_mut(m)?,
            opts: SweepOpts::from_arg_matches_mut(m)?,
            batch,
            concurrency,
            rate,
            format,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// The grid the flags ask for.
fn axes(a: &SweepArgs) -> Axes {
    let w = &a.run.workload;
    let prompt = match &w.prompt_tokens {
        Some(spec) => len_axis(spec),
        None if w.has_text() => Vec::new(),
        None => vec![LenSpec::Fixed(128)],
    };
    let server = a.run.is_server();
    Axes {
        batch: if a.batch.is_empty() {
            vec![1]
        } else {
            a.batch.clone()
        },
        prompt,
        output: len_axis(&w.output_tokens),
        concurrency: match (server, a.concurrency.is_empty(), a.rate.is_empty()) {
            (false, _, _) => vec![None],
            (true, true, true) => vec![Some(1)],
            (true, true, false) => vec![None],
            (true, false, _) => a.concurrency.iter().map(|&c| Some(c)).collect(),
        },
        rate: if a.rate.is_empty() {
            vec![None]
        } else {
            a.rate.iter().map(|&r| Some(r)).collect()
        },
    }
}

/// A run's flags for one cell: its workload, and requests enough for warmup + the most
/// repetitions (the sweep's fold ends it sooner with --precision).
fn cell_opts(base: &RunOpts, c: &CellSpec, requests: u64) -> RunOpts {
    let mut o = base.clone();
    o.workload.batch = c.batch;
    o.workload.prompt_tokens = c.prompt.clone();
    o.workload.output_tokens = c.output.clone();
    o.server.concurrency = c.concurrency;
    o.server.rate = c.rate;
    o.workload.requests = Some(requests);
    o.workload.duration = None;
    o.output.record = None;
    o.output.headless = true;
    o
}

/// Everything a sweep needs, validated; each cell's engine planned once.
pub struct SweepPlan {
    pub config: SweepConfig,
    /// Per cell, its engine or the one-line reason it cannot run (it fails alone).
    pub cells: Vec<Result<EnginePlan, String>>,
    pub header: Header,
    pub slo: Slo,
    pub outputs: Outputs,
    pub format: SweepFormat,
    pub telemetry: Option<Telemetry>,
    pub screen: Option<ScreenPlan>,
    pub threads: usize,
    /// Run the CPU bandwidth probe for the roofline finding.
    pub probe: bool,
}

fn check(a: &SweepArgs) -> Result<(), Failure> {
    let w = &a.run.workload;
    if w.requests.is_some() {
        return Err(Failure::usage(
            "--requests: a sweep measures --repetitions steady requests per cell; use --repetitions N",
        ));
    }
    if w.duration.is_some() {
        return Err(Failure::usage(
            "--duration: a sweep measures --repetitions steady requests per cell; use --repetitions N (or --precision)",
        ));
    }
    if let (Some(max), true) = (a.opts.max_repetitions, a.opts.precision.is_some()) {
        if max < a.opts.repetitions {
            return Err(Failure::usage(format!(
                "--max-repetitions {max}: below --repetitions {}; raise it or lower --repetitions",
                a.opts.repetitions
            )));
        }
    }
    if a.run.is_server() && a.batch.iter().any(|&b| b > 1) {
        return Err(Failure::usage(
            "--batch: with --endpoint every request is one sequence; sweep --concurrency (or --rate) instead",
        ));
    }
    Ok(())
}

/// Plans a sweep: a mistake every cell shares (a model path, a flag) is one line and exit 2
/// before anything runs; a cell only some workloads break fails on its own.
pub fn plan(a: &SweepArgs) -> Result<SweepPlan, Failure> {
    check(a)?;
    let specs = axes(a).cells();
    let warmup = a.run.workload.warmup;
    let config = SweepConfig {
        cells: specs.iter().map(CellSpec::params).collect(),
        warmup,
        repetitions: a.opts.repetitions,
        precision: a.opts.precision,
        max_repetitions: a
            .opts
            .precision
            .map(|_| a.opts.max_repetitions.unwrap_or(100)),
    };
    let requests = warmup + Repetitions::of(&config).max;
    let planned: Vec<(RunOpts, Result<EnginePlan, Failure>)> = specs
        .iter()
        .map(|c| {
            let o = cell_opts(&a.run, c, requests);
            let e = EnginePlan::of(&o);
            (o, e)
        })
        .collect();
    if let Some((_, Err(first))) = planned.first() {
        if planned.iter().all(|(_, r)| r.is_err()) {
            return Err(Failure::usage(first.message.clone()));
        }
    }
    let slo = a.run.output.slo.unwrap_or_default();
    // The grid's header: its first runnable cell's, with the axes as written and no request
    // count (each cell has its own).
    let Some((first_opts, first)) = planned
        .iter()
        .find_map(|(o, e)| e.as_ref().ok().map(|e| (o, e)))
    else {
        return Err(Failure::usage("the sweep has no cells"));
    };
    let mut header = header::header(first_opts, first, slo);
    if let Some(p) = &a.run.workload.prompt_tokens {
        header.config.prompt_tokens = p.to_string();
    }
    header.config.output_tokens = a.run.workload.output_tokens.to_string();
    header.config.requests = None;
    let telemetry = telemetry(&a.run, first.telemetry_device());
    let screen = super::screen_for_run(&a.run, slo)?;
    Ok(SweepPlan {
        config,
        cells: planned
            .into_iter()
            .map(|(_, e)| e.map_err(|f| f.message))
            .collect(),
        header,
        slo,
        outputs: Outputs {
            record: a.run.output.record.clone(),
            jsonl_steps: a.run.output.jsonl_steps,
            format: a.run.output.format,
        },
        format: a.format,
        telemetry,
        screen,
        threads: candle_threads(&a.run),
        probe: !a.opts.no_probe,
    })
}
