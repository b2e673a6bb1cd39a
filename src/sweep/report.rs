//! A sweep's table from a record or a finished sweep: its title and, for `report`, the table
//! and findings recomputed from the record's lines.

use std::path::PathBuf;

use super::analysis::findings;
use super::table::{SweepFormat, SweepTable};
use crate::exit::Failure;
use crate::record::line::SweepConfig;
use crate::report::{peak_for, ReportOptions};
use crate::stats::Slo;

/// `infertop sweep: synthetic:tiny (llama, f32) on cpu, 6 cells, 2 warmup + 10 requests each`.
pub fn title(
    header: &crate::record::line::Header,
    model: Option<&crate::event::ModelInfo>,
    config: &SweepConfig,
) -> String {
    let c = &header.config;
    let distinct = |f: &dyn Fn(&crate::event::CellParams) -> Option<String>| {
        let mut v: Vec<String> = Vec::new();
        for x in config.cells.iter().filter_map(f) {
            if !v.contains(&x) {
                v.push(x);
            }
        }
        v
    };
    let models = distinct(&|p| p.model.clone());
    let dtypes = distinct(&|p| p.dtype.map(|d| d.to_string()));
    let what = match model {
        _ if !models.is_empty() || !dtypes.is_empty() => {
            let m = if models.is_empty() {
                model.map_or(c.model.clone(), |m| m.name.clone())
            } else {
                format!("{} models ({})", models.len(), models.join(", "))
            };
            let d = if dtypes.is_empty() {
                model.map_or(c.dtype.clone(), |m| m.dtype.clone())
            } else {
                dtypes.join(", ")
            };
            format!("{m} in {d}, each loaded once per dtype, on {}", c.device)
        }
        Some(m) if m.source != crate::event::ModelSource::Http => {
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
    match &config.search {
        Some(s) => format!(
            "infertop sweep: {what}; a search for the max {} meeting the SLO that the server holds, {} warmup + {} per probe",
            s.axis,
            config.warmup,
            match s.probe_s {
                Some(p) => format!("at least {p:.0} s and {reps}"),
                None => reps.clone(),
            }
        ),
        None => format!(
            "infertop sweep: {what}; {} cells, {} warmup + {reps} each",
            config.cells.len(),
            config.warmup
        ),
    }
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
            let peak = peak_for(Some(&rec.header), &m.dtype, opts);
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
    let found = findings(
        &cells,
        &slo,
        peak.as_ref(),
        unavailable,
        rec.config.search.as_ref(),
    );
    if let Some(out) = plot {
        let svg = crate::report::plot::sweep_plot_svg(&crate::sweep::plot::sweep_plot(
            &cells, found.axis,
        ));
        crate::report::plot::write_plot(out, &svg).map_err(Failure::usage)?;
        crate::util::say!("wrote {}", out.display());
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
