//! Decode steps live: the ITL of the most recent decode steps, one bar per step, so a stall
//! inside one request is visible while it happens (the per-request sparklines only move when a
//! request ends).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::history::{self, Bar, History};
use super::panel;
use crate::stats::Metric;
use crate::ui::format;
use crate::ui::state::App;

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let ascii = app.glyphs.ascii;
    let width = rect.width.saturating_sub(2) as usize;
    let bars = app
        .steps
        .last_n(width)
        .map(|s| Bar {
            value: Some(s.itl_s),
            style: if s.warmup { theme.warmup } else { theme.itl },
            marker: ' ',
        })
        .collect();
    let mut title = vec![Span::raw("Decode steps (ITL)")];
    if let Some(c) = &app.current {
        title.push(Span::styled(
            format!(" {} request {}", app.glyphs.sep, c.progress()),
            theme.dim,
        ));
    }
    let summary = app.table.get(Metric::Itl);
    let fmt = |v: f64| format::duration(v, ascii);
    let mut figures = vec![
        Span::styled("now ", theme.dim),
        Span::styled(
            app.steps.last().map_or("-".to_string(), |s| fmt(s.itl_s)),
            theme.text,
        ),
    ];
    if summary.n > 0 {
        figures.extend([
            Span::styled(" p50 ", theme.dim),
            Span::styled(fmt(summary.p50), theme.text),
            Span::styled(" p99 ", theme.dim),
            Span::styled(fmt(summary.p99), theme.text),
            Span::styled(" max ", theme.dim),
            Span::styled(fmt(summary.max), theme.text),
        ]);
    }
    let block = panel(app, Line::from(title)).title_bottom(Line::from(figures));
    let scale = move |v: f64| format::duration(v, ascii);
    history::render(
        frame,
        app,
        rect,
        History {
            block,
            bars,
            style: theme.itl,
            scale: &scale,
            markers: false,
            empty: "waiting for the first decode step",
        },
    );
}
