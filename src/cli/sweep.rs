//! `infertop sweep`: every flag of a run, with `--batch`, `--prompt-tokens`, `--output-tokens`
//! (and, with `--endpoint`, `--concurrency`, `--rate`) taking comma lists; one cell per
//! combination, each measured like a run (see `crate::sweep`). Prints one line per cell to
//! stderr as it completes, then the table and the findings on stdout.

use std::path::PathBuf;
use std::time::Instant;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::run::{self as run_cli, RunArgs};
use super::{args, print_stdout, say, Failure};
use crate::engine::workload::LenSpec;
use crate::record::line::{CellParams, CellStatus, Line, SweepConfig};
use crate::record::report::{peak_for, ReportOptions};
use crate::record::{reader::Record, Recorder};
use crate::run::{Signals, EXIT_FAILURE, EXIT_OK};
use crate::stats::{SettleRule, Slo};
use crate::sweep::analysis::findings;
use crate::sweep::table::{SweepFormat, SweepTable};
use crate::sweep::{self, len_axis, Axes, CellResult, Finish, Update};

/// How each cell is measured.
#[derive(Args, Debug, Clone)]
pub struct SweepOpts {
    /// Steady requests per cell, after its warmup (with --precision: the least per cell).
    #[arg(long, default_value = "10", value_parser = args::positive)]
    pub repetitions: u64,
    /// Measure each cell until the bootstrap 95 % CI of its median TPOT is within this much of
    /// the median, e.g. 5% (or 0.05); at least --repetitions, at most --max-repetitions.
    #[arg(long, value_parser = precision)]
    pub precision: Option<f64>,
    /// With --precision: the most steady requests per cell (default 100).
    #[arg(long, value_parser = args::positive, requires = "precision")]
    pub max_repetitions: Option<u64>,
    /// Do not run the short CPU bandwidth probe the roofline line of a CPU sweep needs.
    #[arg(long)]
    pub no_probe: bool,
}

/// `infertop sweep`'s flags: a run's, with lists where a run takes one value.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    pub run: RunArgs,
    pub opts: SweepOpts,
    pub batch: Vec<usize>,
    pub concurrency: Vec<usize>,
    pub rate: Vec<f64>,
    pub format: SweepFormat,
}

/// `5%` or `0.05`: a fraction above 0 and below 1.
pub fn precision(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let bad = || format!("`{s}` is not a precision (use a percentage above 0, e.g. 5%)");
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => t.parse::<f64>().map_err(|_| bad())?,
    };
    if v.is_finite() && v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(bad())
    }
}

/// One value of a `--batch` or `--concurrency` list.
fn list_count(s: &str) -> Result<usize, String> {
    if s.trim().is_empty() {
        return Err("empty value in the list (write e.g. 1,2,4,8)".into());
    }
    args::positive_usize(s)
}

/// One value of a `--rate` list.
fn list_rate(s: &str) -> Result<f64, String> {
    if s.trim().is_empty() {
        return Err("empty value in the list (write e.g. 1,2,4)".into());
    }
    args::rate(s)
}

impl Args for SweepArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = SweepOpts::augment_args(RunArgs::augment_args(cmd));
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
                .value_parser(list_count)
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
                .value_parser(list_count)
                .help("With --endpoint: requests in flight, a list (e.g. 1,2,4,8,16)")
        })
        .mut_arg("rate", |a| {
            a.value_delimiter(',')
                .value_parser(list_rate)
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
            run: RunArgs::from_arg_matches_mut(m)?,
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

/// The prompt axis' value when no `--prompt-tokens` is given with text prompts: each prompt's
/// own length.
const TEXT_LENGTH: &str = "text";

/// The grid the flags ask for.
fn axes(a: &SweepArgs) -> Axes {
    let text = a.run.prompt.is_some() || a.run.prompt_file.is_some();
    let prompt = match &a.run.prompt_tokens {
        Some(spec) => len_axis(spec),
        None if text => Vec::new(),
        None => vec![LenSpec::Fixed(128)],
    };
    let server = !a.run.endpoint.is_empty();
    Axes {
        batch: if a.batch.is_empty() {
            vec![1]
        } else {
            a.batch.clone()
        },
        prompt,
        output: len_axis(&a.run.output_tokens),
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

/// The cells, with the text-length cell when prompts are text of their own length.
fn cells_of(a: &SweepArgs) -> Vec<CellParams> {
    let mut axes = axes(a);
    if axes.prompt.is_empty() {
        // One placeholder value, renamed after the grid is built.
        axes.prompt = vec![LenSpec::Fixed(1)];
        let mut cells = axes.cells();
        for c in &mut cells {
            c.prompt_tokens = TEXT_LENGTH.into();
        }
        return cells;
    }
    axes.cells()
}

/// A run's flags for one cell: its workload, and requests enough for warmup + the most
/// repetitions (the cell loop stops it sooner with --precision).
fn cell_args(base: &RunArgs, p: &CellParams, requests: u64) -> RunArgs {
    let mut a = base.clone();
    a.batch = p.batch;
    a.prompt_tokens = if p.prompt_tokens == TEXT_LENGTH {
        None
    } else {
        LenSpec::parse(&p.prompt_tokens).ok()
    };
    if let Ok(o) = LenSpec::parse(&p.output_tokens) {
        a.output_tokens = o;
    }
    a.concurrency = p.concurrency;
    a.rate = p.rate;
    a.requests = Some(requests);
    a.duration = None;
    a.record = None;
    a.headless = true;
    a
}

/// `batch 4, prompt 512, output 32` (and concurrency / rate when set).
fn cell_words(p: &CellParams) -> String {
    let mut s = format!(
        "batch {}, prompt {}, output {}",
        p.batch, p.prompt_tokens, p.output_tokens
    );
    if let Some(c) = p.concurrency {
        s.push_str(&format!(", concurrency {c}"));
    }
    if let Some(r) = p.rate {
        s.push_str(&format!(", rate {r}/s"));
    }
    s
}

/// The progress line of a finished cell.
/// A cell as the dashboard's grid shows it: running (`result` none) or ended.
fn cell_view(
    cell: usize,
    of: usize,
    params: &CellParams,
    result: Option<&CellResult>,
) -> crate::event::SweepCellView {
    let p50 = |s: &crate::stats::Summary| (s.n > 0).then_some(s.p50);
    crate::event::SweepCellView {
        cell,
        cells: of,
        label: cell_words(params),
        ok: result.map(|r| r.status == CellStatus::Ok),
        tpot_p50_s: result.and_then(|r| p50(&r.tpot)),
        ttft_p50_s: result.and_then(|r| p50(&r.ttft)),
        throughput: result.and_then(sweep::analysis::throughput),
        slo_met_share: result.and_then(|r| r.slo_met_share),
        reason: result.and_then(|r| r.reason.clone()),
    }
}

fn progress_line(of: usize, c: &CellResult) -> String {
    let head = format!("cell {}/{of} ({})", c.cell + 1, cell_words(&c.params));
    if c.status == CellStatus::Failed {
        return format!("{head}: FAILED: {}", c.reason.as_deref().unwrap_or("?"));
    }
    let p50 = |s: &crate::stats::Summary| {
        if s.n > 0 {
            format!("{:.3} ms", s.p50 * 1e3)
        } else {
            "-".into()
        }
    };
    let tput = if sweep::is_server(&c.params) {
        c.output_tok_s
            .map(|t| format!("{t:.1} output tok/s"))
            .unwrap_or_default()
    } else {
        c.decode_tok_s
            .map(|t| format!("{t:.1} decode tok/s"))
            .unwrap_or_default()
    };
    let mut line = format!(
        "{head}: n {}, TTFT p50 {}, TPOT p50 {}, {tput}, {:.1} s",
        c.n,
        p50(&c.ttft),
        p50(&c.tpot),
        c.elapsed_s
    );
    if c.failed_requests > 0 {
        line.push_str(&format!(", {} failed requests", c.failed_requests));
    }
    if let Some(r) = &c.reason {
        line.push_str(&format!(" ({r})"));
    }
    line
}

fn check(a: &SweepArgs) -> Result<(), Failure> {
    if a.run.requests.is_some() {
        return Err(Failure::usage(
            "--requests: a sweep measures --repetitions steady requests per cell; use --repetitions N",
        ));
    }
    if a.run.duration.is_some() {
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
    if !a.run.endpoint.is_empty() && a.batch.iter().any(|&b| b > 1) {
        return Err(Failure::usage(
            "--batch: with --endpoint every request is one sequence; sweep --concurrency (or --rate) instead",
        ));
    }
    Ok(())
}

/// `infertop sweep`.
pub fn sweep(a: &SweepArgs) -> Result<i32, Failure> {
    check(a)?;
    std::env::set_var(
        "RAYON_NUM_THREADS",
        run_cli::candle_threads(&a.run).to_string(),
    );
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let warmup = a.run.warmup;
    let config = SweepConfig {
        cells: cells_of(a),
        warmup,
        repetitions: a.opts.repetitions,
        precision: a.opts.precision,
        max_repetitions: a
            .opts
            .precision
            .map(|_| a.opts.max_repetitions.unwrap_or(100)),
    };
    let reps = sweep::Repetitions::of(&config);
    let requests = warmup + reps.max;

    // Plan every cell now: a mistake every cell shares (a model path, a flag) is one line and
    // exit 2 before anything runs; a cell only some workloads break fails on its own.
    let mut planned = Vec::with_capacity(config.cells.len());
    for p in &config.cells {
        planned.push(run_cli::plan_engine(&cell_args(&a.run, p, requests)));
    }
    if let Some(Err(first)) = planned.first() {
        if planned.iter().all(|r| r.is_err()) {
            return Err(Failure::usage(first.message.clone()));
        }
    }
    let Some(first_ok) = config
        .cells
        .iter()
        .zip(&planned)
        .find_map(|(p, r)| r.as_ref().ok().map(|e| (p, e)))
    else {
        return Err(Failure::usage("the sweep has no cells"));
    };
    let slo = a.run.slo.unwrap_or_default();
    let header = {
        let mut h = run_cli::header(&cell_args(&a.run, first_ok.0, requests), first_ok.1, slo);
        h.config.prompt_tokens = a
            .run
            .prompt_tokens
            .as_ref()
            .map_or(first_ok.0.prompt_tokens.clone(), |p| p.to_string());
        h.config.requests = None;
        h
    };
    let mut recorder = match &a.run.record {
        Some(path) => {
            let mut r = Recorder::create(path, header.clone(), a.run.jsonl_steps)
                .map_err(Failure::usage)?;
            r.write_line(&Line::Sweep(config.clone()));
            Some(r)
        }
        None => None,
    };
    drop(planned);

    let telemetry = !a.run.no_telemetry;
    let interval = a.run.sample_interval;
    let base = a.run.clone();
    let mut start = |p: &CellParams,
                     tx: crossbeam_channel::Sender<crate::event::Event>,
                     rx: crossbeam_channel::Receiver<crate::event::Control>|
     -> Result<Finish, String> {
        let engine = run_cli::plan_engine(&cell_args(&base, p, requests)).map_err(|f| f.message)?;
        let sampler = telemetry.then(|| {
            crate::telemetry::spawn_default(
                engine.telemetry_device(),
                interval,
                tx.clone(),
                Instant::now(),
            )
        });
        let handle = engine
            .spawn(None, tx, rx)
            .map_err(|e| format!("cannot start the engine thread: {e}"))?;
        Ok(Box::new(move || {
            if let Some(s) = sampler {
                s.stop();
            }
            let _ = handle.join();
        }))
    };
    let mut observe = |u: Update| match u {
        Update::CellStarted { cell: 0, of, .. } => say!(
            "infertop: sweep of {of} cells, {warmup} warmup + {} each",
            match reps.precision {
                Some(p) => format!(
                    "{}..{} steady requests (until the median TPOT is known to ±{:.1} %)",
                    reps.min,
                    reps.max,
                    p * 100.0
                ),
                None => format!("{} steady requests", reps.min),
            }
        ),
        Update::CellDone { of, result } => say!("infertop: {}", progress_line(of, result)),
        Update::CellStarted { .. } | Update::Event { .. } => {}
    };
    let outcome = match run_cli::dashboard_options(&a.run, slo, &signals)? {
        None => sweep::run_cells(
            &config,
            &slo,
            &mut start,
            recorder.as_mut(),
            &signals,
            &mut observe,
        ),
        // In a terminal: the cells run on a thread and the dashboard shows the current cell
        // live, with the grid filling in where the events pane was.
        Some(opts) => {
            let (ui_tx, ui_rx) = crossbeam_channel::bounded(crate::event::EVENT_QUEUE);
            let (ui_ctl, ui_ctl_rx) = crossbeam_channel::unbounded::<crate::event::Control>();
            let dashboard = std::thread::scope(|scope| {
                let recorder = recorder.as_mut();
                let (config, slo, signals) = (&config, &slo, &signals);
                let start = &mut start;
                let cells = scope.spawn(move || {
                    let tx = ui_tx.clone();
                    let mut forward = |u: Update| {
                        let _ = match u {
                            Update::CellStarted { cell, of, params } => {
                                tx.send(crate::event::Event::StatsReset).and_then(|_| {
                                    tx.send(crate::event::Event::SweepCell(Box::new(cell_view(
                                        cell, of, params, None,
                                    ))))
                                })
                            }
                            Update::Event { event, .. } => match event {
                                crate::event::Event::Finished(_) => Ok(()),
                                e => tx.send(e.clone()),
                            },
                            Update::CellDone { of, result } => {
                                tx.send(crate::event::Event::SweepCell(Box::new(cell_view(
                                    result.cell,
                                    of,
                                    &result.params,
                                    Some(result),
                                ))))
                            }
                        };
                    };
                    let outcome =
                        sweep::run_cells(config, slo, start, recorder, signals, &mut forward);
                    let reason = outcome
                        .interrupted
                        .clone()
                        .unwrap_or(crate::event::StopReason::RequestLimit);
                    let _ = ui_tx.send(crate::event::Event::Finished(reason));
                    outcome
                });
                // Quitting the dashboard stops the sweep as Ctrl-C would.
                let stopper = scope.spawn(move || {
                    for c in ui_ctl_rx.iter() {
                        if let crate::event::Control::Stop(_) = c {
                            signals.raise(2);
                        }
                    }
                });
                let shown = crate::ui::run_dashboard(ui_rx, ui_ctl, opts, &mut |_| {});
                let outcome = cells.join();
                let _ = stopper.join();
                (shown, outcome)
            });
            match dashboard {
                (Ok(_), Ok(outcome)) => outcome,
                (Err(e), _) => return Err(Failure::runtime(format!("dashboard: {e}"))),
                (_, Err(_)) => return Err(Failure::runtime("the sweep thread panicked")),
            }
        }
    };

    let model = outcome.model.clone();
    let (peak, peak_unavailable) = match &model {
        Some(m) if m.weight_bytes > 0 => {
            let rec = Record {
                header: Some(header.clone()),
                ..Record::default()
            };
            let opts = ReportOptions {
                probe: !a.opts.no_probe,
                rule: SettleRule::default(),
                ..ReportOptions::default()
            };
            let peak = peak_for(&rec, &m.dtype, &opts);
            if peak.bandwidth.is_some() {
                (Some(peak), None)
            } else {
                (
                    None,
                    Some(format!(
                        "no peak bandwidth for device `{}` (a GPU not in the table, or --no-probe); `infertop report --peak-bw` on the record gives it",
                        header.config.device
                    )),
                )
            }
        }
        _ => (None, None),
    };
    let found = findings(&outcome.cells, &slo, peak.as_ref(), peak_unavailable);
    let interrupted = outcome
        .interrupted
        .as_ref()
        .map(crate::event::StopReason::words);
    let table = SweepTable {
        title: title(&header, model.as_ref(), &config),
        cells: &outcome.cells,
        findings: &found,
        not_run: config.cells.len() - outcome.cells.len(),
        interrupted,
    };
    if let Some(r) = recorder.as_mut() {
        r.write_line(&Line::Footer(crate::record::line::Footer {
            stop: outcome
                .interrupted
                .clone()
                .unwrap_or(crate::event::StopReason::RequestLimit),
            elapsed_s: outcome.elapsed_s,
            summary: table.to_json(),
        }));
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    print_stdout(&table.render(a.format))?;
    if let Some(code) = signals.exit_code() {
        return Ok(code);
    }
    if !outcome.cells.is_empty() && outcome.cells.iter().all(|c| c.status == CellStatus::Failed) {
        say!("infertop: error: every cell of the sweep failed");
        return Ok(EXIT_FAILURE);
    }
    Ok(EXIT_OK)
}

/// `infertop sweep: synthetic:tiny (llama, f32) on cpu, 6 cells, 2 warmup + 10 requests each`.
pub fn title(
    header: &crate::record::line::Header,
    model: Option<&crate::event::ModelInfo>,
    config: &SweepConfig,
) -> String {
    let c = &header.config;
    let what = match model {
        Some(m) if m.source != "http" => {
            format!("{} ({}, {}) on {}", m.name, m.arch, m.dtype, c.device)
        }
        Some(m) => format!("{} at {}", m.name, c.endpoints.join(", ")),
        None => format!("{} on {}", c.model, c.device),
    };
    let reps = match (config.precision, config.max_repetitions) {
        (Some(p), Some(max)) => format!(
            "{}..{max} steady requests (until the median TPOT is within ±{:.1} %)",
            config.repetitions,
            p * 100.0
        ),
        _ => format!("{} steady requests", config.repetitions),
    };
    format!(
        "infertop sweep: {what}; {} cells, {} warmup + {reps} each",
        config.cells.len(),
        config.warmup
    )
}

/// `report` of a sweep's record: the table and findings again, from the record's lines.
pub fn report_sweep(
    rec: &crate::sweep::record::SweepRecord,
    slo_override: Option<Slo>,
    opts: &ReportOptions,
    format: SweepFormat,
    plot: Option<&PathBuf>,
) -> Result<String, Failure> {
    let slo = slo_override.unwrap_or(rec.header.config.slo);
    let cells = rec.results(&slo);
    let model = rec.cells.iter().find_map(|c| c.record.model.clone());
    let (peak, unavailable) = match &model {
        Some(m) if m.weight_bytes > 0 => {
            let r = Record {
                header: Some(rec.header.clone()),
                ..Record::default()
            };
            let peak = peak_for(&r, &m.dtype, opts);
            if peak.bandwidth.is_some() {
                (Some(peak), None)
            } else {
                (
                    None,
                    Some("no peak bandwidth: pass --peak-bw or --device-name".to_string()),
                )
            }
        }
        _ => (None, None),
    };
    let found = findings(&cells, &slo, peak.as_ref(), unavailable);
    if let Some(out) = plot {
        let svg = crate::record::plot::sweep_plot_svg(&crate::sweep::plot::sweep_plot(
            &cells, found.axis,
        ));
        crate::record::plot::write_plot(out, &svg).map_err(Failure::usage)?;
        say!("wrote {}", out.display());
    }
    let not_run = rec.not_run();
    let table = SweepTable {
        title: title(&rec.header, model.as_ref(), &rec.config),
        cells: &cells,
        findings: &found,
        not_run,
        interrupted: (not_run > 0).then(|| "cut short".to_string()),
    };
    Ok(table.render(format))
}
