//! One history chart, shared by TTFT, TPOT and memory: bars on a scale with nice steps, the
//! scale in the title (`11.0..13.2ms`), an optional marker row under the bars, and a line of
//! figures in the bottom border.
//!
//! The chart does not scroll: item number `k` (counted since the start) is drawn in column
//! `k mod width`, and the column after the newest item is left empty, so "now" is the gap and
//! the sweep moves right, wrapping at the edge like an oscilloscope. A new item rewrites two
//! columns and nothing else; a scrolling chart rewrites every cell of the chart at each new
//! item, which is what made the dashboard too heavy for a slow SSH link (BENCHMARKS.md).
//!
//! For the same reason the scale moves in nice steps (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times
//! a power of ten) rather than with every new maximum. It starts at zero unless every visible
//! value is in the upper half of the range, in which case it starts at a nice value below the
//! smallest one: steady latencies sit within a few percent of each other, and bars from zero
//! would all be full height with the variation lost in the top eighth of a cell. The title
//! always says where the scale starts.
//!
//! A bar may carry a whisker (`Bar::max`): a thin line from the top of the bar up to the cell
//! of its `max`, for a column that stands for many requests (its median as the bar, its
//! slowest as the whisker; `buckets`). The scale then holds the whiskers too.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::stats::scale::bar_scale;
use crate::ui::state::App;

/// One bar: its value (`None` for a request without one, e.g. TPOT with one output token).
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub value: Option<f64>,
    /// The top of a whisker above the bar (`None`: a plain bar).
    pub max: Option<f64>,
    pub style: Style,
    /// The character under the bar in the marker row (`' '` for none).
    pub marker: char,
}

pub struct History<'a> {
    pub block: super::panel::Panel<'a>,
    /// Oldest first; the last of them is item number `newest` (counted from 0 since the
    /// start). Only the last `width - 1` are drawn.
    pub bars: Vec<Bar>,
    pub newest: u64,
    pub style: Style,
    /// Formats the scale (the value of a full-height bar).
    pub scale: &'a dyn Fn(f64) -> String,
    /// Reserve a marker row under the bars.
    pub markers: bool,
    /// Put the scale (`floor..top`) in the title; narrow strips leave it out.
    pub scale_title: bool,
    /// Shown centred when there are no bars yet.
    pub empty: &'a str,
}

/// Height of a bar in eighths of a cell, for `rows` rows.
pub(crate) fn eighths(v: f64, floor: f64, top: f64, rows: u16) -> u32 {
    let span = top - floor;
    if span <= 0.0 || !v.is_finite() {
        return 0;
    }
    let frac = ((v - floor) / span).clamp(0.0, 1.0);
    (frac * f64::from(rows) * 8.0).round() as u32
}

/// The column item `k` is drawn in, for a chart `width` columns wide.
pub fn column_of(k: u64, width: u16) -> u16 {
    (k % u64::from(width.max(1))) as u16
}

pub fn render(frame: &mut Frame, app: &App, rect: Rect, h: History) {
    let theme = app.theme();
    let inner = h.block.inner(rect);
    let width = inner.width;
    let shown = usize::from(width.saturating_sub(1));
    let skip = h.bars.len().saturating_sub(shown);
    let visible = &h.bars[skip..];
    // The scale is the range of what is on screen: O(width), no statistics.
    let (low, high) = visible
        .iter()
        .filter_map(|b| b.value.map(|v| (v, b.max.unwrap_or(v))))
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), (v, top)| {
            (lo.min(v), hi.max(v).max(top))
        });
    let (floor, top) = bar_scale(low, high);
    let block = if top > 0.0 && h.scale_title {
        let from = if floor > 0.0 {
            (h.scale)(floor)
        } else {
            "0".to_string()
        };
        h.block
            .title(Line::styled(format!("{from}..{}", (h.scale)(top)), theme.dim).right_aligned())
    } else {
        h.block
    };
    frame.render_widget(block, rect);
    if visible.is_empty() {
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        let line_rect = Rect::new(inner.x, y, inner.width, inner.height.min(1));
        frame.render_widget(
            Paragraph::new(Line::styled(h.empty.to_string(), theme.dim)).centered(),
            line_rect,
        );
        return;
    }
    let with_markers = h.markers && inner.height >= 3;
    let bar_rows = inner.height - u16::from(with_markers);
    let buf = frame.buffer_mut();
    let first = h.newest + 1 - visible.len() as u64;
    for (i, bar) in visible.iter().enumerate() {
        let x = inner.x + column_of(first + i as u64, width);
        if let Some(v) = bar.value {
            let e = eighths(v, floor, top, bar_rows);
            let style = h.style.patch(bar.style);
            draw_bar(buf, app, x, inner.y, bar_rows, e, style);
            if let Some(m) = bar.max {
                let whisker = if app.face.glyphs.ascii { "|" } else { "│" };
                let (body, reach) = (e.div_ceil(8), eighths(m, floor, top, bar_rows).div_ceil(8));
                for cell in body + 1..=reach.min(u32::from(bar_rows)) {
                    buf[(x, inner.y + bar_rows - cell as u16)]
                        .set_symbol(whisker)
                        .set_style(style);
                }
            }
        }
        if with_markers && bar.marker != ' ' {
            let mut tmp = [0u8; 4];
            buf[(x, inner.y + bar_rows)]
                .set_symbol(bar.marker.encode_utf8(&mut tmp))
                .set_style(theme.marker);
        }
    }
}

/// One bar of `e` eighths, bottom up, in column `x` of the rows `y..y + rows`.
pub(super) fn draw_bar(
    buf: &mut Buffer,
    app: &App,
    x: u16,
    y: u16,
    rows: u16,
    e: u32,
    style: Style,
) {
    draw_bar_with(buf, &app.face.glyphs.bars, x, y, rows, e, style);
}

/// `draw_bar` with the bar glyphs given (for views that have no `App`, such as `watch`).
pub(crate) fn draw_bar_with(
    buf: &mut Buffer,
    set: &ratatui::symbols::bar::Set,
    x: u16,
    y: u16,
    rows: u16,
    e: u32,
    style: Style,
) {
    for r in 0..rows {
        let row_bottom = u32::from(rows - 1 - r) * 8;
        let level = e.saturating_sub(row_bottom).min(8);
        let symbol = match level {
            0 => continue,
            1 => set.one_eighth,
            2 => set.one_quarter,
            3 => set.three_eighths,
            4 => set.half,
            5 => set.five_eighths,
            6 => set.three_quarters,
            7 => set.seven_eighths,
            _ => set.full,
        };
        buf[(x, y + r)].set_symbol(symbol).set_style(style);
    }
}

#[cfg(test)]
mod tests {
    use super::column_of;

    #[test]
    fn items_keep_their_column() {
        assert_eq!(column_of(0, 10), 0);
        assert_eq!(column_of(13, 10), 3);
        assert_eq!(column_of(5, 0), 0);
    }
}
