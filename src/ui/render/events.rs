//! The events pane: warmup finished, outliers, errors, pauses, workload changes, resets —
//! newest first, time-stamped with the dashboard clock, as many as fit.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{hint, panel};
use crate::ui::format;
use crate::ui::state::{App, Level};

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    if !app.sweep.is_empty() {
        return sweep_grid(frame, app, rect);
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

/// A sweep in a terminal: the grid filling in, one line per cell (✓ measured, ! SLO missed by
/// some requests, ✗ failed, ▶ running), with TPOT and TTFT p50 and the throughput, so the curve
/// so far reads down the lines. The newest cells are kept in view.
fn sweep_grid(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let cells = app.sweep.first().map_or(0, |c| c.cells);
    let done = app.sweep.iter().filter(|c| c.ok.is_some()).count();
    let block = panel(app, format!("Sweep · {done} of {cells} cells"));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |s| format::duration(s, app.glyphs.ascii));
    let skip = app.sweep.len().saturating_sub(inner.height as usize);
    let lines: Vec<Line> = app
        .sweep
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
            let figures = match (&c.ok, &c.reason) {
                (Some(false), Some(r)) => r.clone(),
                _ => format!(
                    "TPOT {} · TTFT {} · {} tok/s",
                    ms(c.tpot_p50_s),
                    ms(c.ttft_p50_s),
                    c.throughput.map_or("-".to_string(), format::si)
                ),
            };
            Line::from(vec![
                Span::styled(format!("{mark} "), style),
                Span::styled(format!("{} ", c.label), style),
                Span::styled(figures, theme.dim),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
