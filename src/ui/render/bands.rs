//! Percentile bands over time: p50 and p99 of TTFT, TPOT or ITL per slice of run time
//! (`SLICE_S`, exact over each slice's own samples), as two lines at braille resolution (two
//! slices per column, four levels per row), p99 in the outlier style above p50. Warmup shows
//! as the high start of both lines, drift as a slope, a widening tail as the lines parting.
//! In ASCII mode a cell is `*` where p99 passes and `.` where only p50 does.
//!
//! Like the history charts it does not scroll: slice `k` is drawn in column `(k / 2) mod
//! width`, the column after the newest is empty, and the scale moves in nice steps.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::panel;
use crate::stats::scale::Axis;
use crate::stats::slices::{Band, SliceMetric, SLICE_S};
use crate::stats::Metric;
use crate::ui::state::App;
use crate::util::format;

/// Braille dot bits, by sub-column (0, 1) and dot row (0 at the top .. 3).
const DOTS: [[u32; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];

/// One cell's dots, and whether p99 passes through it.
#[derive(Clone, Copy, Default)]
struct Cell {
    bits: u32,
    p99: bool,
}

pub fn render(frame: &mut Frame, app: &App, rect: Rect, metric: Metric) {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let fmt = |v: f64| format::duration(v, ascii);
    let which = match metric {
        Metric::Ttft => SliceMetric::Ttft,
        Metric::Tpot => SliceMetric::Tpot,
        _ => SliceMetric::Itl,
    };
    let style = match which {
        SliceMetric::Ttft => theme.ttft,
        SliceMetric::Tpot => theme.tpot,
        SliceMetric::Itl => theme.itl,
    };
    let mut block = panel(app, format!("{} p50/p99", metric.label()));
    let inner = block.inner(rect);
    let width = inner.width.max(1);
    // Whole columns: the newest slice's column and the `width - 2` before it.
    let newest = app.charts.slices.closed().back().map_or(0, |s| s.index);
    let from_col = (newest / 2 + 2).saturating_sub(u64::from(width));
    let points: Vec<(u64, Band)> = app
        .charts
        .slices
        .closed()
        .iter()
        .filter(|s| s.index / 2 >= from_col)
        .filter_map(|s| s.band(which).map(|b| (s.index, b)))
        .collect();
    let low = points
        .iter()
        .map(|(_, b)| b.p50)
        .fold(f64::INFINITY, f64::min);
    let high = points.iter().map(|(_, b)| b.p99).fold(0.0f64, f64::max);
    if points.is_empty() || inner.height == 0 {
        frame.render_widget(block, rect);
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        frame.render_widget(
            Paragraph::new(Line::styled("waiting for the first second", theme.dim)).centered(),
            Rect::new(inner.x, y, inner.width, inner.height.min(1)),
        );
        return;
    }
    // The y axis: its top in the top border, its bottom in the bottom border, on the right.
    let axis = Axis::fit(low, high);
    block = block
        .title(Line::styled(fmt(axis.hi), theme.dim).right_aligned())
        .title_bottom(
            Line::styled(
                format!("{}{}", fmt(axis.lo), if axis.log { " log" } else { "" }),
                theme.dim,
            )
            .right_aligned(),
        );
    if let Some((_, last)) = points.last() {
        block = block.title_bottom(Line::styled(
            format!("n {} in {}s", last.n, SLICE_S),
            theme.dim,
        ));
    }
    frame.render_widget(block, rect);
    let dots_high = u32::from(inner.height) * 4;
    let dot_of = |v: f64| -> u32 {
        let f = axis.fraction(v);
        ((1.0 - f) * f64::from(dots_high - 1)).round() as u32
    };
    let mut cells = vec![Cell::default(); usize::from(width) * usize::from(inner.height)];
    let mut prev: Option<(u64, u32, u32)> = None;
    for &(k, band) in &points {
        let x = ((k / 2) % u64::from(width)) as usize;
        let sub = (k % 2) as usize;
        let (y50, y99) = (dot_of(band.p50), dot_of(band.p99));
        for (y, is99, prev_y) in [
            (y50, false, prev.filter(|p| p.0 + 1 == k).map(|p| p.1)),
            (y99, true, prev.filter(|p| p.0 + 1 == k).map(|p| p.2)),
        ] {
            // A line: from the previous slice's level to this one, in this sub-column.
            let (a, b) = match prev_y {
                Some(py) => (py.min(y), py.max(y)),
                None => (y, y),
            };
            for dy in a..=b {
                let row = (dy / 4) as usize;
                let cell = &mut cells[row * usize::from(width) + x];
                cell.bits |= DOTS[sub][(dy % 4) as usize];
                cell.p99 |= is99;
            }
        }
        prev = Some((k, y50, y99));
    }
    draw_cells(
        frame.buffer_mut(),
        inner,
        width,
        &cells,
        ascii,
        style,
        theme.outlier,
    );
}

fn draw_cells(
    buf: &mut Buffer,
    inner: Rect,
    width: u16,
    cells: &[Cell],
    ascii: bool,
    p50_style: Style,
    p99_style: Style,
) {
    for (i, cell) in cells.iter().enumerate() {
        if cell.bits == 0 {
            continue;
        }
        let x = inner.x + (i % usize::from(width)) as u16;
        let y = inner.y + (i / usize::from(width)) as u16;
        let style = if cell.p99 { p99_style } else { p50_style };
        let symbol = if ascii {
            if cell.p99 {
                '*'
            } else {
                '.'
            }
        } else {
            char::from_u32(0x2800 + cell.bits).unwrap_or(' ')
        };
        let mut tmp = [0u8; 4];
        buf[(x, y)]
            .set_symbol(symbol.encode_utf8(&mut tmp))
            .set_style(style);
    }
}
