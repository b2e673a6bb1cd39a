//! One sparkline panel, shared by TTFT, TPOT, decode steps and memory: bars scaled to the
//! visible values, the scale in the title (`11.0..13.2ms`), an optional marker row under the
//! bars, and a line of figures in the bottom border.
//!
//! The scale starts at zero unless every visible value is in the upper half of the range, in
//! which case it starts a little below the smallest one: steady latencies sit within a few
//! percent of each other, and bars from zero would all be full height with the variation lost
//! in the top eighth of a cell. The title always says where the scale starts.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Sparkline, SparklineBar};
use ratatui::Frame;

use crate::ui::state::App;

/// One bar: its value (`None` for a request without one, e.g. TPOT with one output token).
pub struct Bar {
    pub value: Option<f64>,
    pub style: Style,
    /// The character under the bar in the marker row (`' '` for none).
    pub marker: char,
}

pub struct History<'a> {
    pub block: Block<'a>,
    /// Oldest first; only the last `width` are drawn.
    pub bars: Vec<Bar>,
    pub style: Style,
    /// Formats the scale (the value of a full-height bar).
    pub scale: &'a dyn Fn(f64) -> String,
    /// Reserve a marker row under the bars.
    pub markers: bool,
    /// Shown centred when there are no bars yet.
    pub empty: &'a str,
}

/// Sparkline bars are integers: each value becomes a fraction of the scale in millionths,
/// far finer than the eight levels a cell can show, whatever the unit.
const RESOLUTION: f64 = 1e6;

fn units(v: f64, floor: f64, top: f64) -> u64 {
    let span = top - floor;
    if span <= 0.0 {
        return 0;
    }
    ((v - floor) / span * RESOLUTION)
        .round()
        .clamp(0.0, RESOLUTION) as u64
}

/// Where the scale starts: zero, or below the smallest value when all values are close (the
/// smallest bar then has a fifth of the height, so it is still seen).
fn floor_of(low: f64, top: f64) -> f64 {
    if low >= top * 0.5 && top - low > top * 1e-6 {
        (low - (top - low) * 0.25).max(0.0)
    } else {
        0.0
    }
}

pub fn render(frame: &mut Frame, app: &App, rect: Rect, h: History) {
    let theme = app.theme();
    let inner = h.block.inner(rect);
    let width = inner.width as usize;
    let skip = h.bars.len().saturating_sub(width);
    let visible = &h.bars[skip..];
    // The scale is the range of what is on screen: O(width), no statistics.
    let (low, top) = visible
        .iter()
        .filter_map(|b| b.value)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let floor = floor_of(low, top);
    let block = if top > 0.0 {
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
    let [bars_rect, marker_rect] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(u16::from(with_markers)),
    ])
    .areas(inner);
    let data: Vec<SparklineBar> = visible
        .iter()
        .map(|b| SparklineBar::from(b.value.map(|v| units(v, floor, top))).style(Some(b.style)))
        .collect();
    let spark = Sparkline::default()
        .data(data)
        .max(RESOLUTION as u64)
        .bar_set(app.glyphs.bars.clone())
        .style(h.style);
    frame.render_widget(spark, bars_rect);
    if with_markers {
        let row: String = visible.iter().map(|b| b.marker).collect();
        frame.render_widget(Paragraph::new(Line::styled(row, theme.marker)), marker_rect);
    }
}

#[cfg(test)]
mod tests {
    use super::{floor_of, units, RESOLUTION};

    #[test]
    fn scale_starts_at_zero_unless_values_are_close() {
        assert_eq!(floor_of(1.0, 10.0), 0.0);
        assert_eq!(floor_of(5.0, 5.0), 0.0);
        let f = floor_of(12.0, 13.0);
        assert!((f - 11.75).abs() < 1e-12, "{f}");
        assert_eq!(units(13.0, f, 13.0), RESOLUTION as u64);
        assert_eq!(units(12.0, f, 13.0), (RESOLUTION * 0.2).round() as u64);
        assert_eq!(units(1.0, 0.0, 0.0), 0);
    }
}
