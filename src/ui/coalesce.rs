//! A backend wrapper that sends fewer bytes for the same screen. ratatui hands the backend
//! only the cells that changed, and the crossterm backend moves the cursor before every run
//! of them: in a table whose figures change by a digit or two, a cursor move (7–8 bytes)
//! per changed digit is most of what crosses the link (measured: 45 % of the bytes at 80x24
//! were cursor moves, BENCHMARKS.md). This keeps a copy of what the terminal shows and,
//! where two changed cells on one row are a few cells apart, writes the unchanged cells
//! between them again instead of moving the cursor: the same screen, fewer bytes. It only
//! bridges plain ASCII cells in the style of the cell before them, so it never adds a
//! colour change.

use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::{Position, Rect, Size};

/// The widest gap bridged: a cursor move costs about this many bytes.
const MAX_GAP: u16 = 6;

pub struct Coalesce<B: Backend> {
    inner: B,
    /// What the terminal shows, as far as this backend has drawn it; `None` when unknown
    /// (after a partial clear), and then nothing is bridged until the next full clear.
    screen: Option<Buffer>,
}

impl<B: Backend> Coalesce<B> {
    pub fn new(inner: B) -> Self {
        let mut c = Coalesce {
            inner,
            screen: None,
        };
        c.reset_screen();
        c
    }

    /// For a backend that cannot say its size (a writer that is not a terminal, as the
    /// benches and tests use): the screen is `size`, blank.
    pub fn with_size(inner: B, size: Size) -> Self {
        Coalesce {
            inner,
            screen: Some(Buffer::empty(Rect::new(0, 0, size.width, size.height))),
        }
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// After a full clear the terminal is blank: every cell a default space.
    fn reset_screen(&mut self) {
        self.screen = self
            .inner
            .size()
            .ok()
            .map(|s| Buffer::empty(Rect::new(0, 0, s.width, s.height)));
    }

    /// The cells to write for these changes: the changes, plus the unchanged cells that
    /// bridge short gaps between them.
    fn bridged(&self, changes: Vec<(u16, u16, Cell)>) -> Vec<(u16, u16, Cell)> {
        let Some(screen) = &self.screen else {
            return changes;
        };
        let mut out: Vec<(u16, u16, Cell)> = Vec::with_capacity(changes.len() * 2);
        for (x, y, cell) in changes {
            if let Some((px, py, prev)) = out.last() {
                let (px, py) = (*px, *py);
                if py == y && x > px + 1 && x - px - 1 <= MAX_GAP {
                    let style = prev.style();
                    let gap: Option<Vec<Cell>> = (px + 1..x)
                        .map(|bx| {
                            screen
                                .cell(Position::new(bx, y))
                                .filter(|m| m.symbol().len() == 1 && m.style() == style)
                                .cloned()
                        })
                        .collect();
                    if let Some(gap) = gap {
                        out.extend(gap.into_iter().zip(px + 1..x).map(|(c, bx)| (bx, y, c)));
                    }
                }
            }
            out.push((x, y, cell));
        }
        out
    }
}

impl<B: Backend> Backend for Coalesce<B> {
    type Error = B::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let changes: Vec<(u16, u16, Cell)> = content.map(|(x, y, c)| (x, y, c.clone())).collect();
        let out = self.bridged(changes);
        if let Some(screen) = &mut self.screen {
            for (x, y, c) in &out {
                if let Some(slot) = screen.cell_mut(Position::new(*x, *y)) {
                    *slot = c.clone();
                }
            }
        }
        self.inner.draw(out.iter().map(|(x, y, c)| (*x, *y, c)))
    }

    fn append_lines(&mut self, n: u16) -> Result<(), Self::Error> {
        self.screen = None;
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()?;
        self.reset_screen();
        Ok(())
    }

    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)?;
        if clear_type == ClearType::All {
            self.reset_screen();
        } else {
            self.screen = None;
        }
        Ok(())
    }

    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }

    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::Coalesce;
    use ratatui::backend::TestBackend;
    use ratatui::text::Line;
    use ratatui::widgets::Paragraph;
    use ratatui::Terminal;

    fn frame(i: u32) -> Vec<Line<'static>> {
        vec![
            Line::from(format!(
                "p50 {}.{:02}ms  p99 {}.{:02}ms  n {}",
                i % 7,
                i % 100,
                i % 9,
                (i * 7) % 100,
                1000 + i * 13
            )),
            Line::from("█".repeat((i % 20) as usize)),
            Line::from("x".repeat((i % 5) as usize)),
        ]
    }

    #[test]
    fn the_screen_is_the_same_as_without_it() {
        let mut plain = Terminal::new(TestBackend::new(40, 4)).unwrap_or_else(|_| unreachable!());
        let mut merged = Terminal::new(Coalesce::new(TestBackend::new(40, 4)))
            .unwrap_or_else(|_| unreachable!());
        for i in 0..200 {
            let lines = frame(i);
            let _ = plain.draw(|f| f.render_widget(Paragraph::new(lines.clone()), f.area()));
            let _ = merged.draw(|f| f.render_widget(Paragraph::new(lines), f.area()));
            assert_eq!(
                plain.backend().buffer(),
                merged.backend().inner().buffer(),
                "frame {i}"
            );
        }
    }
}
