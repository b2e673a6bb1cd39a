//! A frame drawn part by part: each region of a screen is drawn again only when what it shows
//! has changed, and only the regions drawn again are compared with what the terminal shows.
//!
//! At 200x60 a frame is 12,000 cells of about 48 bytes. Blanking them, drawing every region
//! and comparing every cell with the screen copy was most of the dashboard's CPU at 10 fps,
//! yet between two frames most regions show the same thing: the table and the distributions
//! change at most twice a second (`FIGURES_HOLD`), the bands and the heatmap once a slice,
//! the memory panel once a sample. So a screen names its regions with a key, a hash of the
//! state the region shows (change counters, the figures' generation, the view); a region
//! whose key and rectangle are those of the last frame keeps its cells on the canvas as they
//! are, which is what it would draw again.
//!
//! Everything is drawn and compared when the layout changes (another size, view or overlay),
//! when what the terminal shows is unknown or was drawn by other means, and for screens that
//! do not name parts ([`Parts::whole`]).

use std::hash::{DefaultHasher, Hash, Hasher};

use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::Frame;

/// The key of what a part shows: a hash of everything it reads that can change.
pub fn key(what: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    what.hash(&mut h);
    h.finish()
}

/// Which cells of the canvas this frame drew: all of them, or these rectangles.
#[derive(Clone, Debug, PartialEq)]
pub enum Drawn {
    All,
    Rects(Vec<Rect>),
}

/// The parts the canvas holds, by the order a frame draws them.
#[derive(Clone, Debug)]
pub struct Parts {
    /// Whether parts are kept between frames (false: every part is drawn, as in a fresh frame).
    keep: bool,
    /// The canvas area and layout key the kept parts were drawn for (none: draw everything).
    layout: Option<(Rect, u64)>,
    /// Per part, in the order drawn: its rectangle and key (none: drawn every frame).
    kept: Vec<(Rect, Option<u64>)>,
    /// The next part's number in this frame.
    next: usize,
    drawn: Drawn,
}

impl Default for Parts {
    fn default() -> Self {
        Parts::new()
    }
}

impl Parts {
    /// Parts kept from frame to frame on one canvas (the screen loop's).
    pub fn new() -> Parts {
        Parts {
            keep: true,
            layout: None,
            kept: Vec::new(),
            next: 0,
            drawn: Drawn::All,
        }
    }

    /// Every part drawn on a blank canvas: a single frame (a snapshot, a test, a bench).
    pub fn every() -> Parts {
        Parts {
            keep: false,
            ..Parts::new()
        }
    }

    /// Forgets what the canvas holds: the next frame draws everything.
    pub fn forget(&mut self) {
        self.layout = None;
        self.kept.clear();
    }

    /// Starts a frame whose parts are laid out as `layout` says: when the canvas was not
    /// drawn for that layout at its size, it is blanked, given `style`, and every part is
    /// drawn.
    pub fn begin(&mut self, buf: &mut Buffer, layout: u64, style: Style) {
        self.next = 0;
        let same = self.keep && self.layout == Some((buf.area, layout));
        if same {
            self.drawn = Drawn::Rects(Vec::new());
        } else {
            buf.reset();
            fill(buf, buf.area, style);
            self.kept.clear();
            self.layout = Some((buf.area, layout));
            self.drawn = Drawn::All;
        }
    }

    /// A frame that is not drawn by parts: the canvas is blanked and everything compared.
    pub fn whole(&mut self, buf: &mut Buffer) {
        self.forget();
        self.next = 0;
        buf.reset();
        self.drawn = Drawn::All;
    }

    /// Draws one part in `rect` with `draw`, unless the canvas holds it already: the same
    /// `key` (none: always draw) in the same rectangle last frame. A part drawn again is
    /// blanked and given `style` first, as a fresh frame's cells are.
    pub fn part(
        &mut self,
        frame: &mut Frame,
        rect: Rect,
        key: Option<u64>,
        style: Style,
        draw: impl FnOnce(&mut Frame),
    ) {
        let n = self.next;
        self.next += 1;
        let slot = (rect, key);
        if let Drawn::Rects(rects) = &mut self.drawn {
            if key.is_some() && self.kept.get(n) == Some(&slot) {
                return;
            }
            let buf = frame.buffer_mut();
            let rect = rect.intersection(buf.area);
            blank(buf, rect);
            fill(buf, rect, style);
            rects.push(rect);
        }
        draw(frame);
        if self.kept.len() <= n {
            self.kept.resize(n + 1, (Rect::ZERO, None));
        }
        self.kept[n] = slot;
    }

    /// What this frame drew, for the comparison with the screen.
    pub fn drawn(&self) -> &Drawn {
        &self.drawn
    }
}

/// The cells of `rect` (inside `buf`), row by row.
fn rows(buf: &mut Buffer, rect: Rect) -> impl Iterator<Item = &mut [Cell]> {
    let (area, w) = (buf.area, usize::from(buf.area.width));
    let x0 = usize::from(rect.x.saturating_sub(area.x));
    let x1 = x0 + usize::from(rect.width);
    let y0 = usize::from(rect.y.saturating_sub(area.y));
    let y1 = y0 + usize::from(rect.height);
    buf.content
        .chunks_mut(w.max(1))
        .skip(y0)
        .take(y1 - y0)
        .filter_map(move |row| row.get_mut(x0..x1))
}

fn blank(buf: &mut Buffer, rect: Rect) {
    for row in rows(buf, rect) {
        row.iter_mut().for_each(Cell::reset);
    }
}

/// Gives every cell of `rect` `style`, as `Block::new().style(style)` does; nothing at all for
/// a style that leaves a blank cell as it is (the default theme's text, `reset`).
pub(crate) fn fill(buf: &mut Buffer, rect: Rect, style: Style) {
    let mut blank = Cell::EMPTY;
    blank.set_style(style);
    if blank == Cell::EMPTY {
        return;
    }
    for row in rows(buf, rect) {
        for cell in row {
            cell.set_style(style);
        }
    }
}
