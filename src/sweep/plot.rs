//! What `report --plot` draws for a sweep, prepared from the cells: the record module draws it
//! (`report::plot::sweep_plot_svg`) without knowing what a cell is.

use super::{analysis, is_server, CellResult, LoadAxis};
use crate::report::plot::{SweepLatency, SweepPlot};
use crate::stats::Summary;

/// The plot of `cells` against `axis`: p50 curves per workload (prompt × output), and every
/// measured cell's throughput against its p50 and p99.
pub fn sweep_plot(cells: &[CellResult], axis: LoadAxis) -> SweepPlot {
    let mut workloads: Vec<(String, Vec<&CellResult>)> = Vec::new();
    for c in cells {
        let name = format!(
            "prompt {}, output {}",
            c.params.prompt_tokens, c.params.output_tokens
        );
        match workloads.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(c),
            None => workloads.push((name, vec![c])),
        }
    }
    let ms_p50 = |s: Summary| (s.n > 0).then_some(s.p50 * 1e3);
    let curves = |value: &dyn Fn(&CellResult) -> Option<f64>| {
        workloads
            .iter()
            .map(|(name, v)| (name.clone(), curve_points(v, axis, value)))
            .collect()
    };
    let latency = |label: &str, summary: &dyn Fn(&CellResult) -> Summary| {
        let points = |p99: bool| {
            cells
                .iter()
                .filter(|c| c.measured() && summary(c).n > 0)
                .filter_map(|c| {
                    let s = summary(c);
                    let t = analysis::throughput(c)?;
                    Some((t, if p99 { s.p99 } else { s.p50 } * 1e3))
                })
                .collect()
        };
        SweepLatency {
            label: label.to_string(),
            p50: points(false),
            p99: points(true),
        }
    };
    let server = cells.iter().any(|c| is_server(&c.params));
    SweepPlot {
        load_name: axis.name().to_string(),
        throughput_name: if server {
            "output tok/s"
        } else {
            "decode tok/s"
        }
        .to_string(),
        cells: cells.len(),
        measured: cells.iter().filter(|c| c.measured()).count(),
        tpot_curves: curves(&|c| ms_p50(c.tpot)),
        ttft_curves: curves(&|c| ms_p50(c.ttft)),
        tpot: latency("TPOT", &|c| c.tpot),
        ttft: latency("TTFT", &|c| c.ttft),
    }
}

/// The cells of one curve (same workload, load increasing) as (load, value) points.
fn curve_points(
    cells: &[&CellResult],
    axis: LoadAxis,
    value: &dyn Fn(&CellResult) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = cells
        .iter()
        .filter(|c| c.measured())
        .filter_map(|c| Some((axis.load(&c.params), value(c)?)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}
