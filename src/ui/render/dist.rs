//! Distribution views: a histogram of TTFT, TPOT or ITL over the table's window (the `tab`
//! key), with p50, p90 and p99 marked under the bars (`^50 ^90 ^99`, their values are the
//! table's), n in the title and the ends of the x axis in the bottom border. The axis is
//! logarithmic when the largest sample is more than `LOG_SPREAD` times the smallest, so a
//! long tail and a second mode both stay in view; any bin with a sample has at least an
//! eighth of a cell, so a lone outlier is never lost to rounding.
//!
//! The counts come from `App::refresh` (exact, from the window's sorted blocks); this only
//! merges neighbouring bins to fit the width.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::panel;
use crate::stats::Metric;
use crate::ui::state::App;
use crate::ui::views::{DIST_BINS, DIST_METRICS};
use crate::util::format;

/// The most bins that fit `width` columns and divide the state's bins evenly.
pub fn bins_for(width: u16) -> usize {
    (1..=DIST_BINS)
        .rev()
        .find(|b| DIST_BINS.is_multiple_of(*b) && *b <= usize::from(width))
        .unwrap_or(1)
}

pub fn render(frame: &mut Frame, app: &App, rect: Rect, metric: Metric) {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let fmt = |v: f64| format::duration(v, ascii);
    let style = match metric {
        Metric::Ttft => theme.ttft,
        Metric::Tpot => theme.tpot,
        _ => theme.itl,
    };
    let hist = DIST_METRICS
        .iter()
        .position(|m| *m == metric)
        .and_then(|i| app.views.dists.get(i))
        .and_then(|h| h.as_ref())
        .filter(|h| h.n > 0);
    let summary = app.views.table.get(metric);
    let mut block = panel(
        app,
        format!(
            "{}{} {} n {}",
            metric.label(),
            if rect.width >= 40 {
                " distribution"
            } else {
                ""
            },
            app.face.glyphs.sep,
            hist.map_or(0, |h| h.n)
        ),
    )
    .title(
        Line::styled(
            if summary.n > 0 {
                format!("p99 {}", fmt(summary.p99))
            } else {
                String::new()
            },
            theme.dim,
        )
        .right_aligned(),
    );
    let Some(hist) = hist else {
        let inner = block.inner(rect);
        frame.render_widget(block, rect);
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        frame.render_widget(
            Paragraph::new(Line::styled("no samples in this window yet", theme.dim)).centered(),
            Rect::new(inner.x, y, inner.width, inner.height.min(1)),
        );
        return;
    };
    // The x axis: its ends under the chart, in the bottom border.
    let axis = hist.axis;
    block = block
        .title_bottom(Line::styled(fmt(axis.lo), theme.dim))
        .title_bottom(
            Line::styled(
                format!("{}{}", fmt(axis.hi), if axis.log { " log" } else { "" }),
                theme.dim,
            )
            .right_aligned(),
        );
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    if inner.height < 2 || inner.width == 0 {
        return;
    }
    let bins = bins_for(inner.width);
    let per = inner.width / bins as u16;
    let counts = hist.merged(bins);
    let chart_w = per * bins as u16;
    let bar_rows = inner.height - 1;
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    let buf = frame.buffer_mut();
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let e = ((c as f64 / most as f64) * f64::from(bar_rows) * 8.0).round() as u32;
        let e = e.max(1);
        for dx in 0..per {
            let x = inner.x + i as u16 * per + dx;
            super::history::draw_bar(buf, app, x, inner.y, bar_rows, e, style);
        }
    }
    if summary.n == 0 {
        return;
    }
    // The marker row: `^50`, `^90`, `^99` starting at each percentile's column, each
    // pushed right of the one before when they would overlap.
    let y = inner.y + bar_rows;
    let mut next_free = inner.x;
    for (q, v) in [
        ("50", summary.p50),
        ("90", summary.p90),
        ("99", summary.p99),
    ] {
        let col = (axis.fraction(v) * f64::from(chart_w)).floor() as u16;
        let x = (inner.x + col.min(chart_w.saturating_sub(1))).max(next_free);
        let label = format!("^{q}");
        for (k, ch) in label.chars().enumerate() {
            let cx = x + k as u16;
            if cx < inner.right() {
                let mut tmp = [0u8; 4];
                buf[(cx, y)]
                    .set_symbol(ch.encode_utf8(&mut tmp))
                    .set_style(theme.marker);
            }
        }
        next_free = x + label.len() as u16;
    }
}

#[cfg(test)]
mod tests {
    use super::bins_for;

    #[test]
    fn bins_divide_evenly_and_fit() {
        assert_eq!(bins_for(200), 120);
        assert_eq!(bins_for(78), 60);
        assert_eq!(bins_for(24), 24);
        assert_eq!(bins_for(25), 24);
        assert_eq!(bins_for(0), 1);
    }
}
