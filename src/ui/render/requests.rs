//! The TTFT-per-request and TPOT-per-request sparklines, from the first request on. Warmup
//! requests are drawn in the warmup style and marked `w`; the first request after a workload
//! change is marked `|`; outliers (above the running p99) are drawn in the outlier style and
//! marked `!`, each chart its own (a request slow to its first token is marked in the TTFT
//! chart, not in the TPOT one). Markers are characters so they survive NO_COLOR and the mono
//! theme.
//!
//! Once requests finish faster than the columns can advance (`buckets::SWITCH_RATE`), a
//! column is a bucket of run time (`BUCKET_S`): the bar is the median request of the bucket
//! and a whisker (`│`) reaches its slowest, the title says so (`TTFT p50│max per 200ms`),
//! and a bucket with a warmup request, a workload change or an outlier is styled and marked
//! as that request would be. The chart then advances one column per bucket whatever the
//! rate; an empty bucket is an empty column.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::history::{self, Bar, History};
use super::panel;
use crate::stats::Metric;
use crate::ui::buckets::{bucket_of, Bucket, Spread, BUCKET_S};
use crate::ui::state::{App, RequestPoint};
use crate::util::format;

pub fn render_ttft(frame: &mut Frame, app: &App, rect: Rect) {
    let now = app.figures.last_ttft_s;
    render_metric(
        frame,
        app,
        rect,
        Metric::Ttft,
        app.theme().ttft,
        now,
        Column {
            request: |p| (Some(p.ttft_s), p.outlier_ttft),
            bucket: |b| (b.ttft, b.outlier_ttft),
        },
    );
}

pub fn render_tpot(frame: &mut Frame, app: &App, rect: Rect) {
    let now = app.figures.last_tpot_s;
    render_metric(
        frame,
        app,
        rect,
        Metric::Tpot,
        app.theme().tpot,
        now,
        Column {
            request: |p| (p.tpot_s, p.outlier_tpot),
            bucket: |b| (b.tpot, b.outlier_tpot),
        },
    );
}

/// The value a column shows, per request and per bucket, and whether it is an outlier in it.
struct Column {
    request: fn(&RequestPoint) -> (Option<f64>, bool),
    bucket: fn(&Bucket) -> (Option<Spread>, bool),
}

/// The style and marker of a column that is (or holds) an outlier, a warmup request, the
/// first request after a workload change.
fn look(app: &App, style: Style, warmup: bool, boundary: bool, outlier: bool) -> (Style, char) {
    let theme = app.theme();
    let style = if outlier {
        theme.outlier
    } else if warmup {
        theme.warmup
    } else {
        style
    };
    let marker = if boundary {
        '|'
    } else if outlier {
        '!'
    } else if warmup {
        'w'
    } else {
        ' '
    };
    (style, marker)
}

/// One bar per request, the newest `width`, numbered as the requests are.
fn request_bars(app: &App, width: usize, style: Style, column: &Column) -> (Vec<Bar>, u64) {
    let bars = app
        .charts
        .requests
        .last_n(width)
        .map(|p| {
            let (value, outlier) = (column.request)(p);
            let (style, marker) = look(app, style, p.warmup, p.boundary, outlier);
            Bar {
                value,
                max: None,
                style,
                marker,
            }
        })
        .collect();
    (bars, app.charts.requests.newest_number())
}

/// One bar per bucket of run time up to the newest closed one (empty buckets empty), numbered
/// by bucket, so a column stays put and the gap after the newest moves with the clock.
fn bucket_bars(app: &App, width: usize, style: Style, column: &Column) -> (Vec<Bar>, u64) {
    let newest = bucket_of(app.now.as_secs_f64()).saturating_sub(1);
    let first = (newest + 1).saturating_sub(width as u64);
    let mut bars: Vec<Bar> = (first..=newest)
        .map(|_| Bar {
            value: None,
            max: None,
            style,
            marker: ' ',
        })
        .collect();
    for b in app.charts.buckets.closed().iter().rev() {
        if b.index < first {
            break;
        }
        let Some(slot) = b
            .index
            .checked_sub(first)
            .and_then(|i| bars.get_mut(i as usize))
        else {
            continue;
        };
        let (spread, outlier) = (column.bucket)(b);
        let (style, marker) = look(app, style, b.warmup, b.boundary, outlier);
        *slot = Bar {
            value: spread.map(|s| s.p50),
            max: spread.map(|s| s.max),
            style,
            marker,
        };
    }
    (bars, newest)
}

#[allow(clippy::too_many_arguments)]
fn render_metric(
    frame: &mut Frame,
    app: &App,
    rect: Rect,
    metric: Metric,
    style: Style,
    now: Option<f64>,
    column: Column,
) {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let width = rect.width.saturating_sub(2) as usize;
    let by_time = app.charts.buckets.by_time() && !app.charts.requests.is_empty();
    let (bars, newest) = if by_time {
        bucket_bars(app, width, style, &column)
    } else {
        request_bars(app, width, style, &column)
    };

    let summary = app.views.table.get(metric);
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
    let title = if by_time {
        format!(
            "{} p50{}max per {}",
            metric.label(),
            if ascii { "|" } else { "│" },
            format::duration(BUCKET_S, ascii)
        )
    } else {
        format!("{} per request", metric.label())
    };
    let block = panel(app, title).title_bottom(Line::from(figures));
    let scale = move |v: f64| format::duration(v, ascii);
    history::render(
        frame,
        app,
        rect,
        History {
            block,
            bars,
            newest,
            style,
            scale: &scale,
            markers: true,
            scale_title: true,
            empty: "waiting for the first request",
        },
    );
}
