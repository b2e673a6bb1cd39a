//! `infertop sweep`'s flags and plan: a run's flags with `--batch`, `--prompt-tokens`,
//! `--output-tokens` (for the candle engine also `--model`, `--dtype` and `--threads`; with
//! `--endpoint`, `--concurrency`, `--rate`) taking comma lists; one typed cell
//! (`sweep::CellSpec`) per combination, each planned once into its engine. With `--find-max`
//! the cells are probes chosen as the sweep goes: each is planned once, when it is chosen
//! (`ProbePlanner`), and the first of each workload now, so a mistake is one line up front.

use clap::builder::{EnumValueParser, TypedValueParser};
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::engine::EnginePlan;
use super::opts::RunOpts;
use super::{header, telemetry, values, Outputs, ScreenPlan, Telemetry};
use crate::event::CellParams;
use crate::event::FloatDtype;
use crate::exit::Failure;
use crate::model::DeviceSpec;
use crate::record::line::{Header, SearchConfig, SweepConfig};
use crate::stats::Slo;
use crate::sweep::search::{with_load, without_load};
use crate::sweep::table::SweepFormat;
use crate::sweep::{len_axis, Axes, CellSpec, LoadAxis, Repetitions};
use crate::traffic::len::LenSpec;

/// `--find-max`: the load a search varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FindMax {
    /// Requests in flight (a closed loop).
    Concurrency,
    /// Requests per second (an open loop).
    Rate,
}

/// A search's range without a `--concurrency` / `--rate` giving it.
const CONCURRENCY_TOP: f64 = 1024.0;
/// A rate search given one start goes this many times below and above it.
const RATE_BELOW: f64 = 16.0;
const RATE_ABOVE: f64 = 1024.0;

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
    /// With --endpoint and --slo: search for the highest load whose p99 meets every limit of
    /// the SLO, each probe measured like a cell (doubling or halving to a bracket, then
    /// bisection). --concurrency / --rate give where it starts, or START,TOP its range.
    #[arg(long, value_enum, value_name = "LOAD")]
    pub find_max: Option<FindMax>,
    /// With --find-max: stop once the bracket is within this much of its low end (concurrency
    /// also stops at one request apart).
    #[arg(long, default_value = "5%", value_parser = values::precision)]
    pub search_tolerance: f64,
    /// With --find-max: how long each probe runs at least (and at least 5 of its E2E times,
    /// until two looks agree on its verdict): long enough for a queue to build, so that the
    /// load found is one the server can hold.
    #[arg(long, default_value = "30s", value_parser = values::duration, value_name = "DURATION")]
    pub probe_duration: std::time::Duration,
    /// With --find-max: then hold the highest load that met the SLO this long, as one more
    /// cell, and say whether it held.
    #[arg(long, value_parser = values::duration, value_name = "DURATION", requires = "find_max")]
    pub hold: Option<std::time::Duration>,
}

/// `infertop sweep`'s flags: a run's, with lists where a run takes one value.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    pub run: RunOpts,
    pub opts: SweepOpts,
    pub batch: Vec<usize>,
    pub concurrency: Vec<usize>,
    pub rate: Vec<f64>,
    /// The candle engine: models, dtypes and CPU thread counts, each a list.
    pub models: Vec<String>,
    pub dtypes: Vec<FloatDtype>,
    pub threads: Vec<usize>,
    /// `--repetitions` was given (not its default).
    pub repetitions_given: bool,
    pub format: SweepFormat,
}

impl Args for SweepArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = SweepOpts::augment_args(RunOpts::augment_args(cmd));
        // One flag for both: the run's summary format is the sweep format's (its cells'
        // summaries), and the sweep's is read back from the same argument.
        let formats = EnumValueParser::<SweepFormat>::new().map(SweepFormat::summary_format);
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
        .mut_arg("model", |a| {
            a.value_delimiter(',').help(
                "A Hugging Face directory, a .gguf file or synthetic:NAME: a list, one group of cells per model, each loaded once per dtype",
            )
        })
        .mut_arg("dtype", |a| {
            a.value_delimiter(',')
                .help("f32, f16 or bf16: a list, one group of cells per dtype (default: f32 on CPU, bf16 on CUDA)")
        })
        .mut_arg("threads", |a| {
            a.value_delimiter(',')
                .value_parser(values::list_count)
                .help("CPU threads for candle: one value per sweep, as candle sizes its thread pool once per process (default: all cores)")
        })
        .mut_arg("requests", |a| {
            a.help("Requests per cell, the first --warmup of them warmup (instead of --repetitions)")
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
        // A run's repetitions: refused in a sweep (`check`), so not offered.
        .mut_arg("runs", |a| a.hide(true))
        .mut_arg("cooldown", |a| a.hide(true))
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
        let threads = many(m, "threads");
        let models: Vec<String> = m
            .get_many::<String>("model")
            .map(|v| v.map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        let dtypes: Vec<FloatDtype> = m
            .get_many::<FloatDtype>("dtype")
            .map(|v| v.copied().collect())
            .unwrap_or_default();
        let repetitions_given = matches!(
            m.value_source("repetitions"),
            Some(clap::parser::ValueSource::CommandLine | clap::parser::ValueSource::EnvVariable)
        );
        let rate: Vec<f64> = m
            .get_many::<f64>("rate")
            .map(|v| v.copied().collect())
            .unwrap_or_default();
        let format = m
            .get_raw("format")
            .and_then(|mut v| v.next())
            .and_then(|v| {
                <SweepFormat as clap::ValueEnum>::from_str(&v.to_string_lossy(), true).ok()
            })
            .unwrap_or_default();
        Ok(SweepArgs {
            run: RunOpts::from_arg_matches_mut(m)?,
            opts: SweepOpts::from_arg_matches_mut(m)?,
            batch,
            concurrency,
            rate,
            models,
            dtypes,
            threads,
            repetitions_given,
            format,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// A list the grid varies: its values when there are several (one alone is the run's own,
/// already in `RunOpts`, and the title names it).
fn varied<T: Clone>(v: &[T]) -> Vec<T> {
    if v.len() > 1 {
        v.to_vec()
    } else {
        Vec::new()
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
        model: varied(&a.models).into_iter().map(Some).collect(),
        dtype: varied(&a.dtypes).into_iter().map(Some).collect(),
        threads: varied(&a.threads).into_iter().map(Some).collect(),
    }
}

/// How long a cell runs: a number of requests (warmup + the most repetitions; the sweep's fold
/// ends it sooner with --precision), or a time (a search's probe, which the fold ends when it
/// has run long enough, the duration only a bound; a hold).
#[derive(Clone, Copy, Debug, PartialEq)]
enum CellLength {
    Requests(u64),
    Duration(std::time::Duration),
}

/// A run's flags for one cell: its workload, model, dtype and threads, and its length.
fn cell_opts(base: &RunOpts, c: &CellSpec, length: CellLength) -> RunOpts {
    let mut o = base.clone();
    o.workload.batch = c.batch;
    o.workload.prompt_tokens = c.prompt.clone();
    o.workload.output_tokens = c.output.clone();
    o.server.concurrency = c.concurrency;
    o.server.rate = c.rate;
    if let Some(m) = &c.model {
        o.model.model = m.clone();
    }
    if let Some(d) = c.dtype {
        o.model.dtype = Some(d);
    }
    if let Some(t) = c.threads {
        o.model.threads = Some(t);
    }
    (o.workload.requests, o.workload.duration) = match length {
        CellLength::Requests(n) => (Some(n), None),
        CellLength::Duration(d) => (None, Some(d)),
    };
    o.output.record = None;
    o.output.headless = true;
    o
}

/// A sweep's cells, planned.
pub enum CellPlans {
    /// Per grid cell, its engine or the one-line reason it cannot run (it fails alone).
    Grid(Vec<Result<EnginePlan, String>>),
    /// `--find-max`: each probe planned when the search chooses it.
    Search(Box<ProbePlanner>),
}

/// Plans a `--find-max` probe once it is chosen: the run's flags with its workload and load.
pub struct ProbePlanner {
    base: RunOpts,
    axis: LoadAxis,
    /// Each search's workload, as the cells name it and as it is planned.
    workloads: Vec<(CellParams, CellSpec)>,
    /// A probe's length: a time the fold ends it within (`--probe-duration`; records of older
    /// searches: requests), and a hold's.
    probe: CellLength,
    hold: Option<std::time::Duration>,
}

/// A probe runs until the sweep's fold has seen enough of it; this long at most.
const PROBE_CAP: u32 = 10;

impl ProbePlanner {
    /// The engine of the probe `params`.
    pub fn plan(&self, params: &CellParams) -> Result<EnginePlan, String> {
        let workload = without_load(params, self.axis);
        let (_, spec) = self
            .workloads
            .iter()
            .find(|(w, _)| *w == workload)
            .ok_or_else(|| format!("the probe {} is not in the search", params.words()))?;
        let spec = CellSpec {
            concurrency: params.concurrency,
            rate: params.rate,
            ..spec.clone()
        };
        let length = match (params.hold, self.hold) {
            (true, Some(d)) => CellLength::Duration(d),
            _ => self.probe,
        };
        EnginePlan::of(&cell_opts(&self.base, &spec, length)).map_err(|f| f.message)
    }
}

/// Everything a sweep needs, validated; each cell's engine planned once.
pub struct SweepPlan {
    pub config: SweepConfig,
    pub cells: CellPlans,
    pub header: Header,
    pub slo: Slo,
    pub outputs: Outputs,
    pub format: SweepFormat,
    pub telemetry: Option<Telemetry>,
    pub screen: Option<ScreenPlan>,
    /// Run the CPU bandwidth probe for the roofline finding.
    pub probe: bool,
    /// `--reset-prefix-cache`: the endpoints whose caches every cell empties (checked before
    /// the sweep starts); empty without the flag.
    pub reset_prefix_cache: Vec<crate::engine::http::Endpoint>,
    pub api_key: Option<String>,
    /// A server sweep's first cell, whose `--api` is checked (or picked) before the sweep
    /// starts; every cell's engine picks `auto` again as it starts.
    pub api_check: Option<Box<crate::engine::http::HttpConfig>>,
}

fn search_axis(f: FindMax) -> LoadAxis {
    match f {
        FindMax::Concurrency => LoadAxis::Concurrency,
        FindMax::Rate => LoadAxis::Rate,
    }
}

/// Steady requests per cell: `--repetitions`, or `--requests` less the warmup.
fn repetitions(a: &SweepArgs) -> Result<u64, Failure> {
    let warmup = a.run.workload.warmup;
    let Some(requests) = a.run.workload.requests else {
        return Ok(a.opts.repetitions);
    };
    if a.repetitions_given {
        return Err(Failure::usage(
            "--requests and --repetitions: give one (--requests counts each cell's warmup too)",
        ));
    }
    if a.opts.precision.is_some() {
        return Err(Failure::usage(
            "--requests with --precision: a cell then measures until its median is known; bound it with --repetitions and --max-repetitions",
        ));
    }
    if requests <= warmup {
        return Err(Failure::usage(format!(
            "--requests {requests}: each cell's first --warmup {warmup} are warmup, leaving none to measure; give more than {warmup}"
        )));
    }
    Ok(requests - warmup)
}

fn check(a: &SweepArgs) -> Result<(), Failure> {
    let w = &a.run.workload;
    let s = &a.run.server;
    if a.run.repeat.runs.is_some() {
        return Err(Failure::usage(
            "--runs: a sweep measures each cell once; repeat a run (infertop --runs N …), or run the sweep again",
        ));
    }
    if s.shard.is_some() || s.start_at.is_some() || s.clock_ref.is_some() {
        return Err(Failure::usage(
            "--shard, --start-at, --clock-ref: a sweep runs from one generator; shard a run (infertop --endpoint … --shard K/N) instead",
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
    if a.run.is_server() && (a.models.len() > 1 || a.dtypes.len() > 1 || a.threads.len() > 1) {
        return Err(Failure::usage(
            "--model, --dtype, --threads lists: with --endpoint the server's model is measured; sweep --concurrency (or --rate) instead",
        ));
    }
    if a.threads.len() > 1 && a.run.model.device != DeviceSpec::Cpu {
        return Err(Failure::usage(
            "--threads list: on CUDA the kernels run on the GPU and candle's CPU threads do not change them; sweep --threads with --device cpu",
        ));
    }
    // candle's CPU kernels share one pool of threads that it sizes at its first use and never
    // again: a later cell's --threads would change the label and not the threads.
    let mut counts = a.threads.clone();
    counts.dedup();
    if let [first, second, ..] = counts[..] {
        let list: Vec<String> = a.threads.iter().map(usize::to_string).collect();
        return Err(Failure::usage(format!(
            "--threads {}: candle sizes its CPU thread pool once per process, so a second thread count would run on the first's pool; sweep one --threads value per run (--threads {first}, then --threads {second})",
            list.join(",")
        )));
    }
    Ok(())
}

/// The search `--find-max` asks for, checked.
fn search_config(a: &SweepArgs, axis: FindMax) -> Result<SearchConfig, Failure> {
    if !a.run.is_server() {
        return Err(Failure::usage(
            "--find-max: searches the load a server takes; give --endpoint URL",
        ));
    }
    if a.run.output.slo.is_none() {
        return Err(Failure::usage(
            "--find-max: give --slo (e.g. ttft=500ms,tpot=50ms): the search finds the highest load whose p99 meets it",
        ));
    }
    let range = |given: &[f64], flag: &str| -> Result<Option<(f64, f64)>, Failure> {
        match given {
            [] => Ok(None),
            [start] => Ok(Some((*start, *start))),
            [lo, hi] if lo < hi => Ok(Some((*lo, *hi))),
            [lo, hi] => Err(Failure::usage(format!(
                "{flag} {lo},{hi}: with --find-max a range is LOW,HIGH with LOW below HIGH"
            ))),
            _ => Err(Failure::usage(format!(
                "{flag}: with --find-max give where the search starts (one value) or its range (LOW,HIGH), not a list"
            ))),
        }
    };
    let (name, start, lo, hi) = match axis {
        FindMax::Concurrency => {
            if !a.rate.is_empty() {
                return Err(Failure::usage(
                    "--find-max concurrency searches a closed loop; drop --rate, or search --find-max rate",
                ));
            }
            let given: Vec<f64> = a.concurrency.iter().map(|&c| c as f64).collect();
            match range(&given, "--concurrency")? {
                None => ("concurrency", 1.0, 1.0, CONCURRENCY_TOP),
                Some((s, e)) if s == e => ("concurrency", s, 1.0, s.max(CONCURRENCY_TOP)),
                Some((s, e)) => ("concurrency", s, s, e),
            }
        }
        FindMax::Rate => {
            if a.concurrency.len() > 1 {
                return Err(Failure::usage(
                    "--concurrency: with --find-max rate it is the cap on requests in flight, one value",
                ));
            }
            match range(&a.rate, "--rate")? {
                None => ("rate", 1.0, 1.0 / RATE_BELOW, RATE_ABOVE),
                Some((s, e)) if s == e => ("rate", s, s / RATE_BELOW, s * RATE_ABOVE),
                Some((s, e)) => ("rate", s, s, e),
            }
        }
    };
    Ok(SearchConfig {
        axis: name.into(),
        start,
        lo,
        hi,
        tolerance: a.opts.search_tolerance,
        workloads: search_workloads(a, axis)
            .iter()
            .map(CellSpec::params)
            .collect(),
        probe_s: Some(a.opts.probe_duration.as_secs_f64()),
        hold_s: a.opts.hold.map(|h| h.as_secs_f64()),
    })
}

/// The workloads of a search: the grid's other axes as given, the searched load left out (a
/// rate search keeps its cap on requests in flight).
fn search_workloads(a: &SweepArgs, axis: FindMax) -> Vec<CellSpec> {
    let mut workloads = axes(a);
    match axis {
        FindMax::Concurrency => workloads.concurrency = vec![None],
        FindMax::Rate => {
            workloads.rate = vec![None];
            workloads.concurrency = vec![a.concurrency.first().copied()];
        }
    }
    workloads.cells()
}

/// Plans a sweep: a mistake every cell shares (a model path, a flag) is one line and exit 2
/// before anything runs; a cell only some workloads break fails on its own.
pub fn plan(a: &SweepArgs) -> Result<SweepPlan, Failure> {
    check(a)?;
    let repetitions = repetitions(a)?;
    let search = a.opts.find_max.map(|f| search_config(a, f)).transpose()?;
    let warmup = a.run.workload.warmup;
    // A grid's cells; a search's workloads, each planned now at its first probe's load.
    let specs: Vec<CellSpec> = match (&search, a.opts.find_max) {
        (Some(config), Some(axis)) => search_workloads(a, axis)
            .into_iter()
            .map(|w| {
                let probe = with_load(&w.params(), search_axis(axis), config.start);
                CellSpec {
                    concurrency: probe.concurrency,
                    rate: probe.rate,
                    ..w
                }
            })
            .collect(),
        _ => axes(a).cells(),
    };
    let config = SweepConfig {
        cells: if search.is_some() {
            Vec::new()
        } else {
            specs.iter().map(CellSpec::params).collect()
        },
        warmup,
        repetitions,
        precision: a.opts.precision,
        max_repetitions: a
            .opts
            .precision
            .map(|_| a.opts.max_repetitions.unwrap_or(100)),
        search,
        repeat: None,
    };
    let requests = warmup + Repetitions::of(&config).max;
    let planned: Vec<(RunOpts, Result<EnginePlan, Failure>)> = specs
        .iter()
        .map(|c| {
            let o = cell_opts(&a.run, c, CellLength::Requests(requests));
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
    if a.models.len() > 1 {
        header.config.model = a.models.join(",");
    }
    if a.dtypes.len() > 1 {
        header.config.dtype = a
            .dtypes
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(",");
    }
    let telemetry = telemetry(
        &a.run,
        first.telemetry_device(),
        matches!(first, EnginePlan::Http(_)),
    );
    let screen = super::screen_for_run(&a.run, slo)?;
    let (api_key, api_check) = match first {
        EnginePlan::Http(h) => (h.api_key.clone(), Some(h.clone())),
        EnginePlan::Candle(_) => (None, None),
    };
    let cells = match &config.search {
        Some(search) => CellPlans::Search(Box::new(ProbePlanner {
            base: a.run.clone(),
            axis: crate::sweep::search::axis_of(search),
            workloads: search
                .workloads
                .iter()
                .cloned()
                .zip(specs.iter().cloned())
                .collect(),
            probe: match search.probe_s {
                Some(_) => CellLength::Duration(a.opts.probe_duration * PROBE_CAP),
                None => CellLength::Requests(requests),
            },
            hold: a.opts.hold,
        })),
        None => CellPlans::Grid(
            planned
                .into_iter()
                .map(|(_, e)| e.map_err(|f| f.message))
                .collect(),
        ),
    };
    Ok(SweepPlan {
        config,
        cells,
        header,
        slo,
        outputs: Outputs {
            record: a.run.output.record.clone(),
            jsonl_steps: a.run.output.jsonl_steps,
            format: a.run.output.format,
            metrics_listen: a.run.output.metrics_listen,
        },
        format: a.format,
        telemetry,
        screen,
        probe: !a.opts.no_probe,
        reset_prefix_cache: if a.run.server.reset_prefix_cache {
            a.run.server.endpoint.clone()
        } else {
            Vec::new()
        },
        api_key,
        api_check,
    })
}
