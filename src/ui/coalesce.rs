//! A backend wrapper that sends fewer bytes for the same screen, and the frame loop's draw
//! that writes through it. ratatui hands the backend only the cells that changed, and the
//! crossterm backend moves the cursor before every run of them: in a table whose figures
//! change by a digit or two, a cursor move (7–8 bytes) per changed digit is most of what
//! crosses the link (measured: 45 % of the bytes at 80x24 were cursor moves, BENCHMARKS.md).
//! This keeps a copy of what the terminal shows and, where two changed cells on one row are a
//! few cells apart, writes the unchanged cells between them again instead of moving the
//! cursor: the same screen, fewer bytes. It only bridges plain ASCII cells in the style of the
//! cell before them, so it never adds a colour change.
//!
//! Since that copy is what the terminal shows, [`draw`] compares each new frame with it
//! directly instead of going through `Terminal::draw`, whose diff measures the display width
//! of every cell of every frame, changed or not (a sixth of the dashboard thread at 200x60,
//! BENCHMARKS.md). Here a width is looked up only for a symbol of more than one byte, and
//! a run of the same symbol (a border, a bar) is looked up once.

use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::{Position, Rect, Size};
use ratatui::{Frame, Terminal};

use super::parts::{Drawn, Parts};

/// The widest gap bridged: a cursor move costs about this many bytes.
const MAX_GAP: u16 = 6;

/// What the screen copy holds in the columns a wide symbol covers after its first: never
/// equal to a frame's cell (a frame holds a blank there), so a narrow symbol that replaces
/// the wide one is followed by whatever the frame has in those columns; never bridged.
const COVERED: Cell = Cell::new("");

/// Renders a frame with `render` and writes what differs from what the terminal shows: what
/// `Terminal::draw` does for this backend, without its diff. The cursor stays hidden (no
/// screen places it). The frame is the whole canvas, blanked first.
pub fn draw<B: Backend>(
    terminal: &mut Terminal<Coalesce<B>>,
    render: impl FnOnce(&mut Frame),
) -> Result<(), B::Error> {
    draw_parts(terminal, |frame, parts| {
        parts.whole(frame.buffer_mut());
        render(frame);
    })
}

/// `draw` for a screen drawn part by part (`Parts`): the canvas keeps the parts the last
/// frame drew, and only the parts drawn again are compared with what the terminal shows.
pub fn draw_parts<B: Backend>(
    terminal: &mut Terminal<Coalesce<B>>,
    render: impl FnOnce(&mut Frame, &mut Parts),
) -> Result<(), B::Error> {
    // As `Terminal::draw` does: a frame is never drawn for a size the terminal no longer has.
    terminal.autoresize()?;
    // One canvas rather than `Terminal::draw`'s two (the other blanked a frame ahead): the
    // frame and the screen copy are all the memory a frame goes through, and what a frame
    // draws is in the cache when it is compared.
    let mut parts = std::mem::take(&mut terminal.backend_mut().parts);
    render(&mut terminal.get_frame(), &mut parts);
    let next = std::mem::take(terminal.current_buffer_mut());
    let written = terminal.backend_mut().present(&next, parts.drawn());
    *terminal.current_buffer_mut() = next;
    terminal.backend_mut().parts = parts;
    written?;
    terminal.hide_cursor()?;
    terminal.backend_mut().flush()
}

pub struct Coalesce<B: Backend> {
    inner: B,
    /// What the terminal shows, as far as this backend has drawn it; `None` when unknown
    /// (after a partial clear). Then [`draw`] writes every cell, which makes it known again,
    /// and `Terminal::draw` bridges nothing until the next full clear.
    screen: Option<Buffer>,
    /// What the canvas holds, for [`draw_parts`]; forgotten whenever the terminal is drawn
    /// or cleared by other means.
    parts: Parts,
}

impl<B: Backend> Coalesce<B> {
    pub fn new(inner: B) -> Self {
        let mut c = Coalesce {
            inner,
            screen: None,
            parts: Parts::new(),
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
            parts: Parts::new(),
        }
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The backend under it (a test resizes its `TestBackend`).
    pub fn inner_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// After a full clear the terminal is blank: every cell a default space.
    fn reset_screen(&mut self) {
        self.parts.forget();
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
                // Not after a wide symbol: the gap starts in the column it covers, and a
                // cell written there would break it.
                let narrow = prev.symbol().len() == 1 || prev.cell_width() <= 1;
                if narrow && py == y && x > px + 1 && x - px - 1 <= MAX_GAP {
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

    /// Writes these changes, bridged, and notes them in the screen copy.
    fn write(&mut self, changes: Vec<(u16, u16, Cell)>) -> Result<(), B::Error> {
        let out = self.bridged(changes);
        if let Some(screen) = &mut self.screen {
            for (x, y, c) in &out {
                note(screen, *x, *y, c);
            }
        }
        self.inner.draw(out.iter().map(|(x, y, c)| (*x, *y, c)))
    }

    /// Writes the cells of `next` that differ from the screen copy, bridged: of the parts
    /// `drawn`, or of every cell when what the terminal shows is unknown or of another size.
    fn present(&mut self, next: &Buffer, drawn: &Drawn) -> Result<(), B::Error> {
        if self.screen.as_ref().is_some_and(|s| s.area != next.area) {
            self.screen = None;
        }
        let mut changes = Vec::new();
        changed_cells(self.screen.as_ref(), next, drawn, &mut changes);
        if self.screen.is_none() {
            // Every cell but those the diff passes over is written below: from then on the
            // copy is what the terminal shows.
            self.screen = Some(Buffer::empty(next.area));
        }
        self.write(changes)
    }
}

/// Notes in `screen` that `cell` was written at (`x`, `y`), and the columns it covers if wide.
fn note(screen: &mut Buffer, x: u16, y: u16, cell: &Cell) {
    let Some(slot) = screen.cell_mut(Position::new(x, y)) else {
        return;
    };
    *slot = cell.clone();
    for cx in x.saturating_add(1)..x.saturating_add(cell.cell_width()) {
        match screen.cell_mut(Position::new(cx, y)) {
            Some(slot) => *slot = COVERED,
            None => break,
        }
    }
}

/// Whether the diff passes over `cell` (set by widgets that draw by other means).
#[allow(deprecated)]
fn is_skip(cell: &Cell) -> bool {
    matches!(cell.diff_option, CellDiffOption::Skip)
        || (cell.skip && matches!(cell.diff_option, CellDiffOption::None))
}

/// Appends to `out`, row by row and left to right, the cells of `next` that differ from
/// `shown`: those of the rectangles `drawn`, or every cell when `drawn` is all or `shown` is
/// `None` (`shown` has `next`'s area). The columns a wide symbol covers after its first are
/// the symbol's and are not compared.
fn changed_cells(
    shown: Option<&Buffer>,
    next: &Buffer,
    drawn: &Drawn,
    out: &mut Vec<(u16, u16, Cell)>,
) {
    let area = next.area;
    let w = usize::from(area.width);
    if w == 0 {
        return;
    }
    let mut spans: Vec<(usize, usize, Rect)> = match (shown, drawn) {
        (Some(_), Drawn::Rects(rects)) => rects
            .iter()
            .map(|r| r.intersection(area))
            .filter(|r| !r.is_empty())
            .map(|r| {
                let x0 = usize::from(r.x - area.x);
                (x0, x0 + usize::from(r.width), r)
            })
            .collect(),
        _ => vec![(0, w, area)],
    };
    spans.sort_by_key(|&(x0, _, _)| x0);
    // The width of the last symbol of more than one byte: borders and bars repeat one.
    let mut last: Option<(&str, u16)> = None;
    for (y, (row, start)) in (area.y..).zip(next.content.chunks(w).zip((0..).step_by(w))) {
        for &(x0, x1, _) in spans.iter().filter(|(_, _, r)| r.y <= y && y < r.bottom()) {
            let mut x = x0;
            while x < x1.min(row.len()) {
                let cell = &row[x];
                if is_skip(cell) {
                    x += 1;
                    continue;
                }
                let differs = match shown.and_then(|s| s.content.get(start + x)) {
                    Some(seen) => seen != cell || cell.diff_option == CellDiffOption::AlwaysUpdate,
                    None => true,
                };
                if differs {
                    // `x` < `w`, which is a u16.
                    out.push((area.x + x as u16, y, cell.clone()));
                }
                let symbol = cell.symbol();
                let width = match cell.diff_option {
                    CellDiffOption::ForcedWidth(n) => n.get(),
                    _ if symbol.len() == 1 => 1,
                    _ => match last {
                        Some((s, n)) if s == symbol => n,
                        _ => {
                            let n = symbol.cell_width();
                            last = Some((symbol, n));
                            n
                        }
                    },
                };
                x += usize::from(width.max(1));
            }
        }
    }
}

impl<B: Backend> Backend for Coalesce<B> {
    type Error = B::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        // Drawn by other means (`Terminal::draw`): the canvas is no longer what it was.
        self.parts.forget();
        self.write(content.map(|(x, y, c)| (x, y, c.clone())).collect())
    }

    fn append_lines(&mut self, n: u16) -> Result<(), Self::Error> {
        self.screen = None;
        self.parts.forget();
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
            self.parts.forget();
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
    use super::{draw, Coalesce};
    use proptest::prelude::*;
    use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
    use ratatui::buffer::{Buffer, Cell, CellWidth};
    use ratatui::layout::{Position, Size};
    use ratatui::style::{Color, Style};
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
        let mut own = Terminal::new(Coalesce::new(TestBackend::new(40, 4)))
            .unwrap_or_else(|_| unreachable!());
        for i in 0..200 {
            let lines = frame(i);
            let _ = plain.draw(|f| f.render_widget(Paragraph::new(lines.clone()), f.area()));
            let _ = merged.draw(|f| f.render_widget(Paragraph::new(lines.clone()), f.area()));
            let _ = draw(&mut own, |f| {
                f.render_widget(Paragraph::new(lines), f.area())
            });
            let shown = plain.backend().buffer();
            assert_eq!(shown, merged.backend().inner().buffer(), "frame {i}");
            assert_eq!(shown, own.backend().inner().buffer(), "frame {i}, own diff");
        }
    }

    /// A cell of a terminal: a symbol, or the second column of the wide symbol before it.
    #[derive(Clone, Debug, PartialEq)]
    enum Shown {
        Symbol(Cell),
        SecondHalf,
    }

    /// A terminal as wide symbols behave on one: a wide symbol takes two columns, and writing
    /// over either half of one blanks its other half.
    struct Emulator {
        size: Size,
        cells: Vec<Shown>,
    }

    impl Emulator {
        fn new(size: Size) -> Self {
            let n = usize::from(size.width) * usize::from(size.height);
            Emulator {
                size,
                cells: vec![Shown::Symbol(Cell::EMPTY); n],
            }
        }

        fn at(&self, x: u16, y: u16) -> &Shown {
            &self.cells[usize::from(y) * usize::from(self.size.width) + usize::from(x)]
        }

        fn set(&mut self, x: u16, y: u16, v: Shown) {
            let (w, h) = (self.size.width, self.size.height);
            if x >= w || y >= h {
                return;
            }
            let i = usize::from(y) * usize::from(w) + usize::from(x);
            // Breaking a wide symbol blanks the half not written.
            if self.cells[i] == Shown::SecondHalf && x > 0 {
                self.cells[i - 1] = Shown::Symbol(Cell::EMPTY);
            }
            if let Shown::Symbol(old) = &self.cells[i] {
                if old.cell_width() > 1 && x + 1 < w {
                    self.cells[i + 1] = Shown::Symbol(Cell::EMPTY);
                }
            }
            self.cells[i] = v;
        }
    }

    impl Backend for Emulator {
        type Error = std::io::Error;

        fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
        where
            I: Iterator<Item = (u16, u16, &'a Cell)>,
        {
            for (x, y, cell) in content {
                self.set(x, y, Shown::Symbol(cell.clone()));
                if cell.cell_width() > 1 {
                    self.set(x + 1, y, Shown::SecondHalf);
                }
            }
            Ok(())
        }
        fn hide_cursor(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn show_cursor(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn get_cursor_position(&mut self) -> std::io::Result<Position> {
            Ok(Position::ORIGIN)
        }
        fn set_cursor_position<P: Into<Position>>(&mut self, _: P) -> std::io::Result<()> {
            Ok(())
        }
        fn clear(&mut self) -> std::io::Result<()> {
            *self = Emulator::new(self.size);
            Ok(())
        }
        fn clear_region(&mut self, _: ClearType) -> std::io::Result<()> {
            self.clear()
        }
        fn size(&self) -> std::io::Result<Size> {
            Ok(self.size)
        }
        fn window_size(&mut self) -> std::io::Result<WindowSize> {
            Ok(WindowSize {
                columns_rows: self.size,
                pixels: Size::ZERO,
            })
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Strings written one after another at (x, y) in a colour: each frame of the test.
    type Writes = Vec<(u16, u16, String, u8)>;

    fn writes() -> impl Strategy<Value = Writes> {
        let symbol = prop::sample::select(vec!["a", "7", " ", "─", "█", "⣿", "中", "あ"]);
        let text = prop::collection::vec(symbol, 1..6).prop_map(|v| v.concat());
        prop::collection::vec((0u16..12, 0u16..3, text, 0u8..3), 0..8)
    }

    fn paint(buf: &mut Buffer, writes: &Writes) {
        let colours = [Color::Reset, Color::Red, Color::Blue];
        for (x, y, text, c) in writes {
            let style = Style::default().fg(colours[usize::from(*c)]);
            buf.set_string(*x, *y, text, style);
        }
    }

    /// What the terminal shows equals the frame in every column, wide symbols included.
    fn shows(emulator: &Emulator, frame: &Buffer) -> Result<(), TestCaseError> {
        for y in 0..frame.area.height {
            let mut x = 0;
            while x < frame.area.width {
                let cell = &frame[(x, y)];
                prop_assert_eq!(
                    emulator.at(x, y),
                    &Shown::Symbol(cell.clone()),
                    "({}, {})",
                    x,
                    y
                );
                let w = cell.cell_width().max(1);
                for cx in x + 1..(x + w).min(frame.area.width) {
                    prop_assert_eq!(emulator.at(cx, y), &Shown::SecondHalf, "({}, {})", cx, y);
                }
                x += w;
            }
        }
        Ok(())
    }

    proptest! {
        /// Frame after frame of narrow and wide symbols in a few colours, the terminal shows
        /// each frame exactly, also after the terminal is resized midway.
        #[test]
        fn every_frame_is_shown_as_drawn(frames in prop::collection::vec(writes(), 1..24),
                                         resize_at in 0usize..24) {
            let mut terminal = Terminal::new(Coalesce::new(Emulator::new(Size::new(12, 3))))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for (i, writes) in frames.iter().enumerate() {
                if i == resize_at {
                    terminal.backend_mut().inner = Emulator::new(Size::new(10, 3));
                }
                let mut drawn = Buffer::empty(ratatui::layout::Rect::ZERO);
                draw(&mut terminal, |f| {
                    paint(f.buffer_mut(), writes);
                    drawn = f.buffer_mut().clone();
                })
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                shows(terminal.backend().inner(), &drawn)?;
            }
        }
    }
}
