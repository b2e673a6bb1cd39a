//! A bordered, titled panel that draws its border and titles only.
//!
//! ratatui's `Block` first gives its style to every cell of its area, even when the style
//! changes nothing (the panels' default), and the panels tile the screen: one more pass over
//! the whole frame buffer, 12,000 cells ten times a second at 200x60, where each frame finds
//! the buffer cold. Under `perf` at 1 request/s that pass was 14% of the dashboard's samples
//! (4% left with panels; part of the cost moves to the next pass over the same cells). A
//! `Panel` draws the same cells as `Block::bordered()` (or `Block::new()`, borderless) with
//! the same border set, border style, style and titles, but as four strips (the top and
//! bottom rows with their titles, the two sides), so only a styled panel (the help overlay)
//! pays for its inside. The tests compare it with `Block` cell by cell.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::border;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Widget};

/// Where a title goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edge {
    Top,
    Bottom,
}

/// `Block::bordered()` with a border set, a border style, a style and titles, drawn without
/// a pass over its inside when the style is the default.
#[derive(Clone, Debug)]
pub struct Panel<'a> {
    /// Bordered, or a title row alone (`Block::new()`).
    borders: bool,
    border_set: border::Set<'a>,
    border_style: Style,
    style: Style,
    titles: Vec<(Edge, Line<'a>)>,
}

impl<'a> Panel<'a> {
    pub fn new(border_set: border::Set<'a>, border_style: Style) -> Self {
        Panel {
            borders: true,
            border_set,
            border_style,
            style: Style::default(),
            titles: Vec::new(),
        }
    }

    /// No border, only titles: `Block::new()`.
    pub fn borderless() -> Self {
        Panel {
            borders: false,
            ..Panel::new(border::PLAIN, Style::default())
        }
    }

    /// A title in the top border, as `Block::title`.
    pub fn title(mut self, title: impl Into<Line<'a>>) -> Self {
        self.titles.push((Edge::Top, title.into()));
        self
    }

    /// A title in the bottom border, as `Block::title_bottom`.
    pub fn title_bottom(mut self, title: impl Into<Line<'a>>) -> Self {
        self.titles.push((Edge::Bottom, title.into()));
        self
    }

    /// The style of every cell of the panel, as `Block::style`.
    pub fn style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }

    /// The area inside the border (or under and above the title rows), as `Block::inner`.
    pub fn inner(&self, area: Rect) -> Rect {
        if self.borders {
            return Block::bordered().inner(area);
        }
        // A title row is kept where there is a title, whatever it says.
        let at = |edge| self.titles.iter().any(|(e, _)| *e == edge);
        let mut block = Block::new();
        if at(Edge::Top) {
            block = block.title_top(Line::default());
        }
        if at(Edge::Bottom) {
            block = block.title_bottom(Line::default());
        }
        block.inner(area)
    }

    /// The same panel as one `Block`.
    fn into_block(self) -> Block<'a> {
        let block = if self.borders {
            Block::bordered()
        } else {
            Block::new()
        };
        let block = block
            .border_set(self.border_set)
            .border_style(self.border_style)
            .style(self.style);
        self.titles
            .into_iter()
            .fold(block, |b, (edge, t)| match edge {
                Edge::Top => b.title(t),
                Edge::Bottom => b.title_bottom(t),
            })
    }
}

impl<'a> Widget for Panel<'a> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.width < 2 || area.height < 2 {
            // Top and bottom (or the sides) are one row (column): as `Block` draws it.
            self.into_block().render(area, buf);
            return;
        }
        if self.style != Style::default() {
            buf.set_style(area, self.style);
        }
        let Panel {
            borders: bordered,
            border_set,
            border_style,
            titles,
            ..
        } = self;
        let strip = |borders, titles: Vec<(Edge, Line<'a>)>| {
            strip(borders, border_set, border_style, titles)
        };
        let row = |y| Rect {
            y,
            height: 1,
            ..area
        };
        let (top, bottom): (Vec<_>, Vec<_>) =
            titles.into_iter().partition(|(edge, _)| *edge == Edge::Top);
        let (sides, top_edge, bottom_edge) = if bordered {
            (
                Borders::LEFT | Borders::RIGHT,
                Borders::TOP,
                Borders::BOTTOM,
            )
        } else {
            (Borders::NONE, Borders::NONE, Borders::NONE)
        };
        strip(top_edge | sides, top).render(row(area.y), buf);
        strip(bottom_edge | sides, bottom).render(row(area.bottom() - 1), buf);
        if bordered && area.height > 2 {
            let column = |x| Rect {
                x,
                y: area.y + 1,
                width: 1,
                height: area.height - 2,
            };
            strip(Borders::LEFT, Vec::new()).render(column(area.x), buf);
            strip(Borders::RIGHT, Vec::new()).render(column(area.right() - 1), buf);
        }
    }
}

/// A block of `borders` in `border_set` and `border_style`, with `titles`.
fn strip<'a>(
    borders: Borders,
    border_set: border::Set<'a>,
    border_style: Style,
    titles: Vec<(Edge, Line<'a>)>,
) -> Block<'a> {
    titles.into_iter().fold(
        Block::new()
            .borders(borders)
            .border_set(border_set)
            .border_style(border_style),
        |b, (_, t)| b.title(t),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier, Stylize};

    fn titled(p: Panel<'static>, titles: &[(Edge, Line<'static>)]) -> Panel<'static> {
        titles.iter().cloned().fold(p, |p, (edge, t)| match edge {
            Edge::Top => p.title(t),
            Edge::Bottom => p.title_bottom(t),
        })
    }

    /// Every cell the same as `Block::bordered()` draws, over a buffer that already holds
    /// text (a panel must leave its inside as it is, as a block with no style does), at every
    /// size from 0x0 to 12x5, for titles that fit, overflow, align and sit at both edges.
    #[test]
    fn a_panel_draws_what_a_block_draws() {
        let title_sets: Vec<Vec<(Edge, Line<'static>)>> = vec![
            vec![],
            vec![(Edge::Top, Line::styled("TTFT per request", Color::Cyan))],
            vec![
                (Edge::Top, Line::from("left")),
                (Edge::Top, Line::from("0..20ms").right_aligned()),
                (Edge::Bottom, Line::from("now 12ms p99 14ms")),
                (Edge::Bottom, Line::from("log").right_aligned()),
            ],
            vec![
                (Edge::Bottom, Line::from("only below").centered()),
                (Edge::Top, Line::from("x").bold()),
            ],
        ];
        let styles = [
            Style::default(),
            Style::new().fg(Color::Yellow).bg(Color::Blue),
            Style::new().add_modifier(Modifier::DIM),
        ];
        let sets = [border::PLAIN, border::ROUNDED, border::THICK];
        let outer = Rect::new(0, 0, 14, 7);
        for (titles, (style, set)) in title_sets
            .iter()
            .flat_map(|t| styles.iter().zip(sets.iter()).map(move |s| (t, s)))
        {
            for w in 0..=12 {
                for h in 0..=5 {
                    let area = Rect::new(1, 1, w, h);
                    let mut want = Buffer::empty(outer);
                    let mut got = Buffer::empty(outer);
                    for b in [&mut want, &mut got] {
                        for y in 0..outer.height {
                            b.set_string(0, y, "abcdefghijklmn", Style::new().fg(Color::Red));
                        }
                    }
                    for bordered in [true, false] {
                        let border_style = Style::new().fg(Color::DarkGray);
                        let (panel, block) = if bordered {
                            let block = Block::bordered()
                                .border_set(*set)
                                .border_style(border_style);
                            (Panel::new(*set, border_style), block)
                        } else {
                            (Panel::borderless(), Block::new())
                        };
                        let panel = titled(panel.style(*style), titles);
                        let block =
                            titles
                                .iter()
                                .cloned()
                                .fold(block.style(*style), |b, (edge, t)| match edge {
                                    Edge::Top => b.title(t),
                                    Edge::Bottom => b.title_bottom(t),
                                });
                        assert_eq!(panel.inner(area), block.inner(area));
                        block.render(area, &mut want);
                        panel.render(area, &mut got);
                        assert_eq!(
                            got, want,
                            "{w}x{h}, bordered {bordered}, style {style:?}, titles {titles:?}"
                        );
                    }
                }
            }
        }
    }
}
