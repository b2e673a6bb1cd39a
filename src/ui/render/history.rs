//! One sparkline panel, shared by TTFT, TPOT, decode steps and memory: bars scaled from zero to
//! the largest visible value (the scale is in the title), an optional marker row under the
//! bars, and a line of figures in the bottom border.

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

fn units(v: f64, top: f64) -> u64 {
    (v / top * RESOLUTION).round().clamp(0.0, RESOLUTION) as u64
}

pub fn render(frame: &mut Frame, app: &App, rect: Rect, h: History) {
    let theme = app.theme();
    let inner = h.block.inner(rect);
    let width = inner.width as usize;
    let skip = h.bars.len().saturating_sub(width);
    let visible = &h.bars[skip..];
    // The scale is the max of what is on screen: O(width), no statistics.
    let top = visible
        .iter()
        .filter_map(|b| b.value)
        .fold(0.0f64, f64::max);
    let block = if top > 0.0 {
        h.block.title(
            Line::styled(format!("0..{}", (h.scale)(top)), theme.dim).right_aligned(),
        )
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
        .map(|b| SparklineBar::from(b.value.map(|v| units(v, top))).style(Some(b.style)))
        .collect();
    let spark = Sparkline::default()
        .data(data)
        .max(RESOLUTION as u64)
        .bar_set(app.glyphs.bars)
        .style(h.style);
    frame.render_widget(spark, bars_rect);
    if with_markers {
        let row: String = visible.iter().map(|b| b.marker).collect();
        frame.render_widget(
            Paragraph::new(Line::styled(row, theme.marker)),
            marker_rect,
        );
    }
}
