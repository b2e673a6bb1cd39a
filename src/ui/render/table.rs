//! The percentile table: mean, p50, p90, p95, p99, max and n for every metric over the chosen
//! window. Cells above an SLO limit are drawn in the `slo_fail` style and end in `!`, which
//! still shows without colour. With a baseline (`--baseline`), the columns become the live p50
//! and p99 beside the baseline's and their relative change.

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

use super::panel;
use crate::stats::{Metric, Summary};
use crate::ui::format;
use crate::ui::keys::Action;
use crate::ui::state::App;

const HEADINGS: [&str; 8] = ["", "mean", "p50", "p90", "p95", "p99", "max", "n"];
const BASELINE_HEADINGS: [&str; 8] = [
    "", "p50", "base p50", "dp50", "p99", "base p99", "dp99", "n",
];

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let ascii = app.glyphs.ascii;
    let title = format!(
        "Percentiles {} {}",
        app.glyphs.sep,
        app.window.label(app.include_warmup)
    );
    let mut block = panel(app, title);
    if let Some(slo) = slo_text(app) {
        block = block.title(Line::styled(slo, theme.dim).right_aligned());
    }
    let only_warmup = !app.include_warmup
        && app.table.get(Metric::Ttft).n == 0
        && app.run.stats.warmup_requests() > 0;
    if only_warmup {
        if let Some(key) = app.keys.short_label(Action::ToggleWarmup) {
            block = block.title_bottom(Line::styled(
                format!("only warmup requests so far: {key} includes them"),
                theme.dim,
            ));
        }
    }
    if let Some(base) = &app.baseline {
        block = block.title_bottom(Line::styled(format!("baseline: {}", base.name), theme.dim));
    }
    let headings = if app.baseline.is_some() {
        &BASELINE_HEADINGS
    } else {
        &HEADINGS
    };
    let header = Row::new(
        headings
            .iter()
            .map(|h| Cell::from(Line::from(*h).right_aligned())),
    )
    .style(theme.table_header);
    let rows = app.table.rows.iter().map(|(metric, s)| {
        let limit = app.slo_limit(*metric);
        let mut cells = vec![Cell::from(Span::styled(metric.label(), theme.text))];
        if let Some(base) = &app.baseline {
            baseline_cells(&mut cells, app, *metric, s, &base.table.get(*metric));
            return Row::new(cells);
        }
        for v in values(s) {
            let text = if s.n == 0 {
                "-".to_string()
            } else if metric.is_latency() {
                format::duration(v, ascii)
            } else {
                format::si(v)
            };
            let crossed = s.n > 0 && limit.is_some_and(|l| v > l);
            let (text, style) = if crossed {
                (format!("{text}!"), theme.slo_fail)
            } else {
                (format!("{text} "), theme.text)
            };
            cells.push(Cell::from(Line::styled(text, style).right_aligned()));
        }
        cells.push(Cell::from(
            Line::styled(format!("{} ", s.n), theme.dim).right_aligned(),
        ));
        Row::new(cells)
    });
    let mut widths = vec![Constraint::Length(13)];
    widths.extend([Constraint::Fill(1); 6]);
    widths.push(Constraint::Fill(1));
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .block(block);
    frame.render_widget(table, rect);
}

/// Live p50, baseline p50, change, live p99, baseline p99, change, n.
fn baseline_cells(
    cells: &mut Vec<Cell>,
    app: &App,
    metric: Metric,
    live: &Summary,
    base: &Summary,
) {
    let theme = app.theme();
    let fmt = |v: f64, n: usize| {
        if n == 0 {
            "-".to_string()
        } else if metric.is_latency() {
            format::duration(v, app.glyphs.ascii)
        } else {
            format::si(v)
        }
    };
    for (now, old) in [(live.p50, base.p50), (live.p99, base.p99)] {
        cells.push(Cell::from(
            Line::styled(format!("{} ", fmt(now, live.n)), theme.text).right_aligned(),
        ));
        cells.push(Cell::from(
            Line::styled(format!("{} ", fmt(old, base.n)), theme.dim).right_aligned(),
        ));
        let delta = if live.n > 0 && base.n > 0 && old > 0.0 {
            format!("{:+.1}% ", (now / old - 1.0) * 100.0)
        } else {
            "- ".to_string()
        };
        cells.push(Cell::from(Line::styled(delta, theme.text).right_aligned()));
    }
    cells.push(Cell::from(
        Line::styled(format!("{} ", live.n), theme.dim).right_aligned(),
    ));
}

fn values(s: &Summary) -> [f64; 6] {
    [s.mean, s.p50, s.p90, s.p95, s.p99, s.max]
}

/// `SLO ttft≤200ms tpot≤50ms`, or `None` without an SLO.
fn slo_text(app: &App) -> Option<String> {
    let parts: Vec<String> = [Metric::Ttft, Metric::Tpot, Metric::E2e]
        .iter()
        .filter_map(|m| {
            app.slo_limit(*m).map(|l| {
                format!(
                    "{}{}{}",
                    m.label().to_ascii_lowercase(),
                    app.glyphs.le,
                    format::duration(l, app.glyphs.ascii)
                )
            })
        })
        .collect();
    (!parts.is_empty()).then(|| format!("SLO {}", parts.join(" ")))
}
