//! `infertop report`: the summary a run printed, recomputed from its record, with settling,
//! goodput, roofline, cost and an optional plot; for a sweep's record, its table and findings;
//! for a record of repeated runs (`--runs N`), each run and every statistic across them;
//! with `--slice DUR`, every statistic per window of the run instead (`report::slice`).

use std::path::PathBuf;

use clap::Args;

use super::{print_stdout, say};
use crate::exit::Failure;
use crate::exit::EXIT_OK;
use crate::plan::values;
use crate::report::{Report, ReportOptions};
use crate::stats::{roofline, SettleRule, Slo};
use crate::summary::SummaryFormat;
use crate::sweep::record::{read, AnyRecord};
use crate::sweep::table::SweepFormat;

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The record (JSONL) written with --record; several (one per load generator, e.g.
    /// each client machine's) are reported as one run: n summed, percentiles over the union
    /// of their raw samples, and a row per record.
    #[arg(required = true, num_args = 1..)]
    pub records: Vec<PathBuf>,
    /// Output format (csv: the summary table only; llm-d: llm-d's Benchmark Report v0.2 as
    /// JSON, one per run, an array of one per cell for a sweep).
    #[arg(long, value_enum, default_value_t = ReportFormat::Md)]
    pub format: ReportFormat,
    /// Also draw TTFT/TPOT per request and the latency CDFs to this SVG (or .png, through
    /// rsvg-convert when it is installed).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Latency objectives for goodput, e.g. ttft=200ms,tpot=50ms (default: the run's --slo).
    #[arg(long, value_parser = Slo::parse)]
    pub slo: Option<Slo>,
    /// Hardware cost per hour (any currency) for the cost per million output tokens.
    #[arg(long, value_parser = values::cost)]
    pub cost_per_hour: Option<f64>,
    /// Peak memory bandwidth for the roofline, e.g. 3.35TB/s (a bare number is GB/s).
    #[arg(long, value_parser = roofline::parse_bandwidth)]
    pub peak_bw: Option<f64>,
    /// Peak FLOP/s for the roofline, e.g. 989T (a bare number is TFLOP/s).
    #[arg(long, value_parser = roofline::parse_flops)]
    pub peak_flops: Option<f64>,
    /// Take peak figures from the known-device table, e.g. "H100", "A100 80GB PCIe", "L4".
    #[arg(long, value_parser = values::known_device)]
    pub device_name: Option<String>,
    /// Do not run the short CPU bandwidth/FLOP probe for CPU records.
    #[arg(long)]
    pub no_probe: bool,
    /// Also write the run as a Chrome trace-event file (JSON) for Perfetto (ui.perfetto.dev) or
    /// chrome://tracing: a track per request slot with each request's prefill and decode (and
    /// steps, with --jsonl-steps), the run's events, and counters for memory, GPU and the
    /// server's metrics.
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Every statistic per window of DUR (e.g. 10s, 5m, 1h) of the run, to see drift over a
    /// soak: a row per window instead of the summary. Windows are taken on the run's clock
    /// from its start, by when each request ENDED (one that started in a window and ended in
    /// the next is the next one's); the last is partial when the run ends inside it, and a
    /// window without requests is a row with n = 0. Per window: requests completed, failed
    /// and warmup (in no statistic), TTFT, TPOT, E2E and ITL (ITL needs --jsonl-steps) as
    /// mean and p50/p90/p95/p99/max, output tok/s and requests/s over the window's length.
    /// md: a table; json: an array of windows; csv: a row per window. Several records are
    /// sliced as one run; a sweep's record is refused.
    #[arg(
        long,
        value_name = "DUR",
        value_parser = slice_length,
        conflicts_with_all = ["plot", "trace", "slo", "cost_per_hour", "peak_bw", "peak_flops", "device_name"]
    )]
    pub slice: Option<f64>,
}

/// `--slice`: a positive duration, as every duration flag takes one (`values::duration`).
fn slice_length(s: &str) -> Result<f64, String> {
    match values::duration(s) {
        Ok(d) if d.as_secs_f64() > 0.0 => Ok(d.as_secs_f64()),
        _ => Err(format!(
            "`{s}` is not a window length (give a positive duration such as 10s, 5m or 1h)"
        )),
    }
}

/// `report --format`: infertop's own (the run's summary formats) or llm-d's exchange format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// A markdown table and sections (the default).
    #[default]
    #[value(alias = "markdown")]
    Md,
    /// One JSON object.
    Json,
    /// One row per window and metric.
    Csv,
    /// llm-d's Benchmark Report v0.2 (JSON).
    #[value(name = "llm-d", alias = "llmd")]
    LlmD,
}

impl ReportFormat {
    /// The summary's own format (llm-d's report is built beside it, from the JSON).
    fn summary(self) -> SummaryFormat {
        match self {
            ReportFormat::Md => SummaryFormat::Md,
            ReportFormat::Json | ReportFormat::LlmD => SummaryFormat::Json,
            ReportFormat::Csv => SummaryFormat::Csv,
        }
    }
}

pub fn report(args: &ReportArgs) -> Result<i32, Failure> {
    for r in &args.records {
        if r.is_dir() {
            return Err(Failure::usage(format!(
                "{}: is a directory; pass a record file written with --record FILE",
                r.display()
            )));
        }
    }
    if let Some(width_s) = args.slice {
        return report_slices(args, width_s);
    }
    let opts = ReportOptions {
        slo: args.slo,
        cost_per_hour: args.cost_per_hour,
        peak_bw: args.peak_bw,
        peak_flops: args.peak_flops,
        device_name: args.device_name.clone(),
        probe: !args.no_probe,
        rule: SettleRule::default(),
    };
    if let [_, _, ..] = args.records.as_slice() {
        return report_merged(args, &opts);
    }
    let Some(path) = args.records.first() else {
        return Err(Failure::usage(
            "report needs a record (infertop report RUN.jsonl)",
        ));
    };
    if let Some(out) = &args.trace {
        trace(path, out)?;
    }
    // One read and one parse: the lines say whether it is a sweep's record or a run's.
    let rec = match read(path).map_err(Failure::usage)? {
        AnyRecord::Sweep(sweep) => {
            let format = match args.format {
                ReportFormat::LlmD => {
                    let reports: Vec<serde_json::Value> = sweep
                        .cells
                        .iter()
                        .map(|c| {
                            let mut br = crate::report::llmd::benchmark_report(
                                &c.record,
                                &c.record.summary(),
                            );
                            br["scenario"]["load"]["standardized"]["stage"] = c.cell.into();
                            br
                        })
                        .collect();
                    print_stdout(&(serde_json::Value::from(reports).to_string() + "\n"))?;
                    return Ok(EXIT_OK);
                }
                ReportFormat::Md => SweepFormat::Md,
                ReportFormat::Json => SweepFormat::Json,
                ReportFormat::Csv => SweepFormat::Csv,
            };
            if sweep.config.repeat.is_some() {
                if args.plot.is_some() {
                    return Err(Failure::usage(format!(
                        "--plot: {} is a record of repeated runs (--runs), which has no plot; report it without --plot",
                        path.display()
                    )));
                }
                let text =
                    crate::sweep::repeat::report_runs(&sweep, args.slo, args.format.summary());
                print_stdout(&text)?;
                return Ok(EXIT_OK);
            }
            let text = crate::sweep::report::report_sweep(
                &sweep,
                args.slo,
                &opts,
                format,
                args.plot.as_ref(),
            )?;
            print_stdout(&text)?;
            return Ok(EXIT_OK);
        }
        AnyRecord::Run(rec) => *rec,
    };
    if let Some(shard) = rec.config().and_then(|c| c.shard) {
        say!(
            "{}: shard {shard} of a run, its part of the schedule only: report the {} records together for the run's figures",
            path.display(),
            shard.count
        );
    }
    let report = Report::of(&rec, &opts);
    if let Some(out) = &args.plot {
        let svg = crate::report::plot::plot_svg(&rec, &report.analysis.settling);
        crate::report::plot::write_plot(out, &svg).map_err(Failure::usage)?;
        say!("wrote {}", out.display());
    }
    if args.format == ReportFormat::LlmD {
        let br = crate::report::llmd::benchmark_report(&rec, &report.summary);
        print_stdout(&(br.to_string() + "\n"))?;
        return Ok(EXIT_OK);
    }
    let text = match &rec.determinism {
        Some(d) => with_determinism(&report, args.format.summary(), d),
        None => report.render(args.format.summary()),
    };
    print_stdout(&text)?;
    Ok(EXIT_OK)
}

/// `--slice DUR`: the record (or the records, as one run) per window, read in one pass.
fn report_slices(args: &ReportArgs, width_s: f64) -> Result<i32, Failure> {
    if args.format == ReportFormat::LlmD {
        return Err(Failure::usage(
            "--slice: llm-d's report has no windows; use --format md, json or csv",
        ));
    }
    let sliced = crate::report::slice::slice(&args.records, width_s).map_err(Failure::usage)?;
    let text = match args.format {
        ReportFormat::Json | ReportFormat::LlmD => sliced.to_json().to_string() + "\n",
        ReportFormat::Csv => sliced.to_csv(),
        ReportFormat::Md => sliced.to_markdown(),
    };
    print_stdout(&text)?;
    // Markdown carries the notes; JSON and CSV are rows only.
    if args.format != ReportFormat::Md {
        for n in &sliced.notes {
            say!("infertop: note: {n}");
        }
    }
    Ok(EXIT_OK)
}

/// The report of a `--determinism` record: its comparison in a section after it (markdown),
/// as a `determinism` key (JSON), or on stderr (CSV has no room for it).
fn with_determinism(
    report: &Report,
    format: SummaryFormat,
    d: &crate::determinism::DeterminismSummary,
) -> String {
    use crate::determinism::render;
    match format {
        SummaryFormat::Md => report.render(format) + &render::markdown(d),
        SummaryFormat::Json => {
            let mut v = report.to_json();
            if let Some(obj) = v.as_object_mut() {
                obj.insert(
                    "determinism".into(),
                    serde_json::to_value(d).unwrap_or_default(),
                );
            }
            v.to_string() + "\n"
        }
        SummaryFormat::Csv => {
            say!("infertop: note: {}", render::verdict(d));
            report.render(format)
        }
    }
}

/// `--trace OUT`: the record's trace, or one line saying why not (before the report prints).
fn trace(record: &std::path::Path, out: &std::path::Path) -> Result<(), Failure> {
    let lines = crate::record::reader::parse_lines(record).map_err(Failure::usage)?;
    let written = crate::report::trace::write(record, &lines, out).map_err(|e| {
        Failure::usage(if e.starts_with("--trace") {
            e
        } else {
            format!("--trace: {}: {e}", record.display())
        })
    })?;
    let failed = if written.failed > 0 {
        format!(" and {} failed", written.failed)
    } else {
        String::new()
    };
    say!(
        "wrote {}: {} requests{failed} on {} slots, {} events (open it in ui.perfetto.dev or chrome://tracing)",
        out.display(),
        written.requests,
        written.slots,
        written.events
    );
    if written.laid_end_to_end {
        say!(
            "{}: written before requests carried their time (t_s), so they are laid end to end",
            record.display()
        );
    }
    Ok(())
}

/// Several records as one run (`record::merge`): the union's report, then a row per record.
fn report_merged(args: &ReportArgs, opts: &ReportOptions) -> Result<i32, Failure> {
    let parts = read_runs(&args.records, "report")?;
    let merged = crate::record::merge::merge(parts);
    let report = Report::of(&merged.record, opts);
    if let Some(out) = &args.plot {
        let svg = crate::report::plot::plot_svg(&merged.record, &report.analysis.settling);
        crate::report::plot::write_plot(out, &svg).map_err(Failure::usage)?;
        say!("wrote {}", out.display());
    }
    let text = match args.format {
        ReportFormat::LlmD => {
            crate::report::llmd::benchmark_report(&merged.record, &report.summary).to_string()
                + "\n"
        }
        ReportFormat::Md => report.render(SummaryFormat::Md) + &merged.to_markdown(),
        ReportFormat::Json => {
            let mut v = report.to_json();
            if let (Some(obj), serde_json::Value::Object(extra)) =
                (v.as_object_mut(), merged.to_json())
            {
                obj.extend(extra);
            }
            v.to_string() + "\n"
        }
        ReportFormat::Csv => report.render(SummaryFormat::Csv),
    };
    print_stdout(&text)?;
    // Markdown and JSON carry the notes; CSV has no room for them.
    if args.format == ReportFormat::Csv {
        for n in &merged.notes {
            say!("infertop: note: {n}");
        }
    }
    Ok(EXIT_OK)
}

/// Reads each record once; every one must be a run's (sweeps are reported one at a time).
pub(crate) fn read_runs(
    paths: &[PathBuf],
    what: &str,
) -> Result<Vec<crate::record::reader::Record>, Failure> {
    let mut parts = Vec::new();
    for p in paths {
        match read(p).map_err(Failure::usage)? {
            AnyRecord::Run(r) => parts.push(*r),
            AnyRecord::Sweep(_) => {
                return Err(Failure::usage(format!(
                    "{}: a sweep's record; {what} takes several records as one run only for runs \
                     (report a sweep on its own)",
                    p.display()
                )))
            }
        }
    }
    Ok(parts)
}
