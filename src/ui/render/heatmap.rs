//! The ITL heatmap: one column per slice of run time (`SLICE_S`), one row per latency band on
//! a log axis, each cell shaded by the share of that slice's decode steps in the band. A
//! steady decode is one dark stripe; a second mode is a second stripe; a periodic stall (GC,
//! thermal, another process) is a stripe of dots at the same height. Shades are characters
//! (`░▒▓█`, or `.:*#` in ASCII mode), so they read the same without colour; a single step in
//! a cell is enough to show.
//!
//! Like the history charts it does not scroll: slice `k` is drawn in column `k mod width`
//! and the column after the newest is empty ("now"), so each second rewrites two columns.
//! The title follows the request in flight; the bottom border has the live ITL figures.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::panel;
use crate::stats::slices::{bucket_floor_s, Slice, SLICE_S};
use crate::stats::Metric;
use crate::ui::state::App;
use crate::util::format;

const SHADES: [&str; 4] = ["░", "▒", "▓", "█"];
const ASCII_SHADES: [&str; 4] = [".", ":", "*", "#"];

/// The shade of a cell holding `share` (0..=1] of its slice's steps: any step at all shows.
pub fn shade_level(share: f64) -> usize {
    if share >= 0.5 {
        3
    } else if share >= 0.2 {
        2
    } else if share >= 0.05 {
        1
    } else {
        0
    }
}

/// Rows as `(first bucket, buckets per row)` so that buckets `low..=high` fit in `rows`
/// rows; the first bucket is a multiple of the buckets per row, so the rows stay put while
/// the extremes move inside them.
pub fn row_buckets(low: u16, high: u16, rows: u16) -> (u16, u16) {
    let rows = rows.max(1);
    let mut per = 1u16;
    loop {
        let base = low / per * per;
        if (high - base) / per < rows || per >= high.max(1) {
            return (base, per);
        }
        per += 1;
    }
}

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let mut title = vec![Span::raw(format!(
        "ITL heatmap {} {}/column",
        app.face.glyphs.sep,
        format::duration(SLICE_S, ascii)
    ))];
    if let Some(c) = &app.figures.current {
        title.push(Span::styled(
            format!(
                " {} request {}",
                app.face.glyphs.sep,
                c.progress(app.elapsed())
            ),
            theme.dim,
        ));
    }
    let summary = app.views.table.get(Metric::Itl);
    let fmt = |v: f64| format::duration(v, ascii);
    let mut figures = vec![
        Span::styled("now ", theme.dim),
        Span::styled(
            app.figures.last_itl_s.map_or("-".to_string(), fmt),
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
    let mut block = panel(app, Line::from(title)).title_bottom(Line::from(figures));
    let inner = block.inner(rect);
    let width = inner.width.max(1);
    let span = u64::from(width.saturating_sub(1));
    let visible: Vec<&Slice> = app
        .charts
        .slices
        .last_span(span)
        .filter(|s| !s.itl_buckets.is_empty())
        .collect();
    let low = visible
        .iter()
        .filter_map(|s| s.itl_buckets.first())
        .map(|b| b.0)
        .min();
    let high = visible
        .iter()
        .filter_map(|s| s.itl_buckets.last())
        .map(|b| b.0)
        .max();
    let (Some(low), Some(high)) = (low, high) else {
        frame.render_widget(block, rect);
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        frame.render_widget(
            Paragraph::new(Line::styled(
                "waiting for the first second of decode steps",
                theme.dim,
            ))
            .centered(),
            Rect::new(inner.x, y, inner.width, inner.height.min(1)),
        );
        return;
    };
    let rows = inner.height;
    if rows == 0 {
        frame.render_widget(block, rect);
        return;
    }
    let (base, per) = row_buckets(low, high, rows);
    let used = (high - base) / per + 1;
    // The y axis: the top row's upper edge in the top border, the bottom row's lower edge in
    // the bottom border, on the right.
    block = block
        .title(Line::styled(fmt(bucket_floor_s(base + rows * per)), theme.dim).right_aligned())
        .title_bottom(
            Line::styled(format!("{} log", fmt(bucket_floor_s(base))), theme.dim).right_aligned(),
        );
    frame.render_widget(block, rect);
    let shades = if ascii { ASCII_SHADES } else { SHADES };
    let buf = frame.buffer_mut();
    for slice in visible {
        let total = f64::from(slice.itl_n().max(1));
        let x = inner.x + (slice.index % u64::from(width)) as u16;
        let mut row_counts = vec![0u32; usize::from(used)];
        for &(b, c) in &slice.itl_buckets {
            let r = usize::from(b.saturating_sub(base) / per);
            if let Some(slot) = row_counts.get_mut(r) {
                *slot += c;
            }
        }
        for (r, &c) in row_counts.iter().enumerate() {
            if c == 0 || r >= usize::from(rows) {
                continue;
            }
            let y = inner.y + rows - 1 - r as u16;
            buf[(x, y)]
                .set_symbol(shades[shade_level(f64::from(c) / total)])
                .set_style(theme.itl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{row_buckets, shade_level};

    #[test]
    fn rows_hold_every_bucket() {
        assert_eq!(row_buckets(40, 45, 10), (40, 1));
        let (base, per) = row_buckets(40, 80, 10);
        assert!(base <= 40 && (80 - base) / per < 10, "{base} {per}");
        assert_eq!(base % per, 0);
        // A lone step still shows, a majority is the darkest.
        assert_eq!(shade_level(0.001), 0);
        assert_eq!(shade_level(0.9), 3);
    }
}
