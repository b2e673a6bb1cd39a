//! The TTFT-per-request and TPOT-per-request sparklines, from the first request on. Warmup
//! requests are drawn in the warmup style and marked `w`; the first request after a workload
//! change is marked `|`; outliers (above the running p99) are drawn in the outlier style and
//! marked `!`. Markers are characters so they survive NO_COLOR and the mono theme.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::history::{self, Bar, History};
use super::panel;
use crate::stats::Metric;
use crate::ui::state::{App, RequestPoint};
use crate::util::format;

pub fn render_ttft(frame: &mut Frame, app: &App, rect: Rect) {
    let now = app.requests.last().map(|p| p.ttft_s);
    render_metric(frame, app, rect, Metric::Ttft, app.theme().ttft, now, |p| {
        Some(p.ttft_s)
    });
}

pub fn render_tpot(frame: &mut Frame, app: &App, rect: Rect) {
    let now = app.requests.last().and_then(|p| p.tpot_s);
    render_metric(frame, app, rect, Metric::Tpot, app.theme().tpot, now, |p| {
        p.tpot_s
    });
}

#[allow(clippy::too_many_arguments)]
fn render_metric(
    frame: &mut Frame,
    app: &App,
    rect: Rect,
    metric: Metric,
    style: Style,
    now: Option<f64>,
    value: impl Fn(&RequestPoint) -> Option<f64>,
) {
    let theme = app.theme();
    let ascii = app.glyphs.ascii;
    let width = rect.width.saturating_sub(2) as usize;
    let bars = app
        .requests
        .last_n(width)
        .map(|p| Bar {
            value: value(p),
            style: if p.outlier {
                theme.outlier
            } else if p.warmup {
                theme.warmup
            } else {
                style
            },
            marker: if p.boundary {
                '|'
            } else if p.outlier {
                '!'
            } else if p.warmup {
                'w'
            } else {
                ' '
            },
        })
        .collect();

    let summary = app.table.get(metric);
    let fmt = |v: f64| format::duration(v, ascii);
    let mut figures = vec![
        Span::styled("now ", theme.dim),
        Span::styled(now.map_or("-".to_string(), fmt), theme.text),
    ];
    if summary.n > 0 {
        figures.extend([
            Span::styled(" p50 ", theme.dim),
            Span::styled(fmt(summary.p50), theme.text),
            Span::styled(" p99 ", theme.dim),
            Span::styled(fmt(summary.p99), theme.text),
        ]);
    }
    let title = format!("{} per request", metric.label());
    let block = panel(app, title).title_bottom(Line::from(figures));
    let scale = move |v: f64| format::duration(v, ascii);
    history::render(
        frame,
        app,
        rect,
        History {
            block,
            bars,
            newest: app.requests.newest_number(),
            style,
            scale: &scale,
            markers: true,
            scale_title: true,
            empty: "waiting for the first request",
        },
    );
}
