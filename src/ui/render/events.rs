//! The events pane: warmup finished, outliers, errors, pauses, workload changes, resets —
//! newest first, time-stamped with the dashboard clock, as many as fit.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{hint, panel};
use crate::sweep::fold::GridRow;
use crate::ui::log::Level;
use crate::ui::state::App;
use crate::util::format;

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    if let Some(grid) = app.sweep.as_ref().map(|s| &s.grid) {
        return sweep_grid(frame, app, grid, rect);
    }
    let theme = app.theme();
    let block = panel(app, "Events");
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    if app.events.is_empty() {
        frame.render_widget(Paragraph::new(hint(app, "nothing yet")), inner);
        return;
    }
    let lines: Vec<Line> = app
        .events
        .iter()
        .rev()
        .take(inner.height as usize)
        .map(|e| {
            let style = match e.level {
                Level::Info => theme.event_info,
                Level::Warn => theme.event_warn,
                Level::Error => theme.event_error,
            };
            Line::from(vec![
                Span::styled(format!("{:>5} ", format::elapsed(e.at)), theme.dim),
                Span::styled(e.text.clone(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// A sweep in a terminal: the grid filling in, one line per cell (`+` measured, `!` SLO missed
/// by some requests, `x` failed or stopped, `>` running; plain ASCII, so every terminal and
/// `--ascii` draw the same), with TPOT and TTFT p50 and the throughput, so the curve so far
/// reads down the lines. The newest cells are kept in view. `--runs N` has a line per run.
fn sweep_grid(frame: &mut Frame, app: &App, grid: &[GridRow], rect: Rect) {
    let theme = app.theme();
    let cells = grid.first().map_or(0, |c| c.cells);
    let done = grid.iter().filter(|c| c.ok.is_some()).count();
    let search = app
        .sweep
        .as_ref()
        .filter(|s| s.config.search.is_some())
        .map(|s| s.search.as_ref());
    let title = match search {
        None if app.repeat_position().is_some() => format!("Runs · {done} of {cells}"),
        None => format!("Sweep · {done} of {cells} cells"),
        Some(None) => "Search · first probe".to_string(),
        Some(Some(v)) => {
            let at = |x: Option<f64>| x.map_or("?".to_string(), |x| format!("{x}"));
            format!(
                "Search · {} [{}, {}) · {} probes",
                v.axis,
                at(v.meets),
                at(v.breaks),
                v.probes
            )
        }
    };
    let block = panel(app, title);
    let mut inner = block.inner(rect);
    frame.render_widget(block, rect);
    // Room to spare: the curve so far beside the lines.
    if inner.width >= 56 && inner.height >= 5 {
        let chart_w = inner.width * 2 / 5;
        let chart = Rect {
            x: inner.x + inner.width - chart_w,
            width: chart_w,
            ..inner
        };
        inner.width -= chart_w + 1;
        curve(frame, app, grid, chart);
    }
    let ms = |v: Option<f64>| {
        v.map_or("-".to_string(), |s| {
            format::duration(s, app.face.glyphs.ascii)
        })
    };
    let skip = grid.len().saturating_sub(inner.height as usize);
    let lines: Vec<Line> = grid
        .iter()
        .skip(skip)
        .map(|c| {
            let slo_missed = c.slo_met_share.is_some_and(|s| s < 1.0);
            let (mark, style) = match c.ok {
                None => (">", theme.text),
                Some(false) => ("x", theme.event_error),
                Some(true) if slo_missed => ("!", theme.event_warn),
                Some(true) => ("+", theme.event_info),
            };
            let mut figures = match (&c.ok, &c.reason) {
                (Some(false), Some(r)) => r.clone(),
                _ => format!(
                    "TPOT {} · TTFT {} · {} tok/s",
                    ms(c.tpot_p50_s),
                    ms(c.ttft_p50_s),
                    c.throughput.map_or("-".to_string(), format::si)
                ),
            };
            match c.probe {
                Some(true) => figures.push_str(" · meets SLO"),
                Some(false) => figures.push_str(" · breaks SLO"),
                None => {}
            }
            Line::from(vec![
                Span::styled(format!("{mark} "), style),
                Span::styled(format!("{} ", c.label), style),
                Span::styled(figures, theme.dim),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Throughput (x) against TPOT p50 (y) of the cells measured so far, as braille points: the
/// tuning curve (where latency starts to climb for little more throughput).
fn curve(frame: &mut Frame, app: &App, grid: &[GridRow], rect: Rect) {
    use ratatui::symbols::Marker;
    use ratatui::widgets::{Axis, Chart, Dataset, GraphType};
    let theme = app.theme();
    let points: Vec<(f64, f64)> = grid
        .iter()
        .filter_map(|c| Some((c.throughput?, c.tpot_p50_s? * 1e3)))
        .collect();
    let x_hi = points.iter().map(|p| p.0).fold(1e-9, f64::max) * 1.1;
    let y_hi = points.iter().map(|p| p.1).fold(1e-9, f64::max) * 1.1;
    let marker = if app.face.glyphs.ascii {
        Marker::Dot
    } else {
        Marker::Braille
    };
    let data = [Dataset::default()
        .marker(marker)
        .graph_type(GraphType::Scatter)
        .style(theme.text)
        .data(&points)];
    let chart = Chart::new(data.to_vec())
        .x_axis(
            Axis::default()
                .bounds([0.0, x_hi])
                .title(Span::styled("tok/s", theme.dim)),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y_hi])
                .title(Span::styled(format!("TPOT ≤{y_hi:.1}ms"), theme.dim)),
        );
    frame.render_widget(chart, rect);
}
