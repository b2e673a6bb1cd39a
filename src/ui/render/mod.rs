//! Drawing: one small function per screen region, each `render(frame, app, rect)` reading
//! `&App` only. Nothing here sorts or computes a percentile: the numbers come from the caches
//! `App::refresh` filled; the most render does is take the max of the visible bars for a scale.
//!
//! The layout at the minimum useful size, 80x22 (80x24 gives the sparklines two more rows):
//! ```text
//!  RUNNING  synthetic:tiny llama · 1.2M params · f32 · cpu | prompt 128 · out 64   header
//!  elapsed 1:23 · 123 requests (5 warmup) · decode 456 tok/s · steady state
//! ┌TTFT per request──────0..20.1ms┐┌TPOT per request──────0..2.10ms┐   sparklines: bars,
//! │▁▂▃▅▂▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁││▁▂▃▄▅▆▇█▂▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂▁▂│   then a marker row
//! │wwwww    |                     ││wwwww    |                     │   (w warmup, | change,
//! └now 12.1ms p50 11.0ms p99 14.2ms┘└now 1.01ms p50 1.00ms p99 1.2ms┘    ! outlier)
//! ┌Percentiles · steady state──────────────────────────────SLO ttft≤200ms┐
//! │               mean     p50     p90     p95     p99     max       n   │   table, 9 rows
//! │TTFT ... TPOT ... ITL ... E2E ... prefill tok/s ... decode tok/s ...  │
//! └──────────────────────────────────────────────────────────────────────┘
//! ┌Memory──────────────────────────────┐┌Events──────────────────────────┐   4 rows
//! │alloc [███░░░] 300MiB/peak 1.00GiB  ││0:12 #123 TTFT 45ms > p99 30ms   │
//! │rss   [████░░] 1.10GiB/peak 1.30GiB ││0:03 warmup finished after 5 ... │
//! └────────────────────────────────────┘└────────────────────────────────┘
//!  q quit  ? help  space pause  r reset  w warmup  tab window  +/- output ...  footer
//! ```
//! The chart area (the sparklines above) shows one view at a time, cycled by `v`: TTFT and
//! TPOT per request, their distributions (with ITL's), p50/p99 bands over time, or the ITL
//! heatmap. From 34 rows the ITL heatmap has a row of its own under the chart area and the
//! bottom row grows; from 120 columns the memory panel moves beside the table (with a
//! memory-over-time strip), and with both, every view is on screen at once:
//! ```text
//!  header (2 rows)
//! ┌TTFT per request────────────┐┌TPOT per request────────────┐   chart area (`v` cycles)
//! ┌ITL heatmap────────────────┐┌TTFT bands┐┌TPOT bands┐┌ITL bands┐
//! ┌Percentiles────────────────────────┐┌Memory / GPU──────────┐
//! ┌TTFT distr.┐┌TPOT distr.┐┌ITL distr.┐┌Events─────────────────┐
//!  footer
//! ```
//! Below 80x22 only a message asking for a larger terminal is drawn, never a garbled frame.
//! The help overlay (`?`) is drawn over everything.
//!
//! Every chart is drawn so that new data rewrites few cells (no scrolling, scales in nice
//! steps): a region whose figures did not change is not drawn at all (`ui::parts`), and of
//! those drawn only the cells that changed are written (`ui::coalesce`'s own diff), which is
//! what crosses an SSH link.
//! What changes does not grow with the event rate either: above 10 requests/s the per-request
//! charts draw a column per 200 ms of run time (`ui::buckets`), and the text's figures are the
//! ones `App::refresh_paced` took at most twice a second (`App::figures`, `App::table`).

mod bands;
mod breakdown;
mod dist;
mod events;
mod footer;
mod header;
mod heatmap;
pub(crate) mod help;
pub(crate) mod history;
mod loading;
mod memory;
pub(crate) mod panel;
mod requests;
mod shapes;
mod table;
pub(crate) mod too_small;

use panel::Panel;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::buckets::bucket_of;
use super::parts::{self, key, Parts};
use super::state::{App, View};
use crate::event::RunPhase;
use crate::stats::Metric;

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 22;
/// From this height the decode-steps pane is shown.
pub const TALL_HEIGHT: u16 = 34;
/// From this width the memory panel sits beside the table.
pub const WIDE_WIDTH: u16 = 120;
/// Borders + header row + the six metrics.
const TABLE_HEIGHT: u16 = 9;

/// Where each region goes; `None` for regions the size leaves out.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Regions {
    pub header: Rect,
    pub ttft: Rect,
    pub tpot: Rect,
    /// The ITL heatmap's own row (from 34 rows).
    pub heatmap: Option<Rect>,
    /// The p50/p99 bands, beside the heatmap (from 34 rows and 120 columns).
    pub bands: Option<Rect>,
    pub table: Rect,
    pub memory: Rect,
    /// The distributions, beside the events pane (from 34 rows and 120 columns).
    pub dists: Option<Rect>,
    pub events: Rect,
    pub footer: Rect,
}

impl Regions {
    /// Every region that is drawn, for the no-overlap test.
    pub fn all(&self) -> Vec<Rect> {
        let mut v = vec![
            self.header,
            self.ttft,
            self.tpot,
            self.table,
            self.memory,
            self.events,
            self.footer,
        ];
        v.extend(self.heatmap);
        v.extend(self.bands);
        v.extend(self.dists);
        v
    }

    /// The chart area: the TTFT and TPOT panes together.
    pub fn charts(&self) -> Rect {
        self.ttft.union(self.tpot)
    }

    /// Every region that is drawn, with its name (for the bytes-per-region bench).
    pub fn named(&self) -> Vec<(&'static str, Rect)> {
        let mut v = vec![
            ("header", self.header),
            ("ttft", self.ttft),
            ("tpot", self.tpot),
            ("table", self.table),
            ("memory", self.memory),
            ("events", self.events),
            ("footer", self.footer),
        ];
        v.extend(self.heatmap.map(|d| ("heatmap", d)));
        v.extend(self.bands.map(|d| ("bands", d)));
        v.extend(self.dists.map(|d| ("dists", d)));
        v
    }
}

/// The regions for a terminal of this size, or `None` when it is below the minimum.
pub fn layout(area: Rect) -> Option<Regions> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let tall = area.height >= TALL_HEIGHT;
    let wide = area.width >= WIDE_WIDTH;
    let decode_h = if tall {
        6 + (area.height - TALL_HEIGHT) / 4
    } else {
        0
    };
    // What is left for the sparklines and the bottom row (memory/events, or events alone).
    let rest = area.height - 2 - 1 - TABLE_HEIGHT - decode_h;
    let bottom_h = if tall { (rest * 45 / 100).max(4) } else { 4 };
    let sparks_h = rest - bottom_h;

    let [header, sparks, decode, middle, bottom, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(sparks_h),
        Constraint::Length(decode_h),
        Constraint::Length(TABLE_HEIGHT),
        Constraint::Length(bottom_h),
        Constraint::Length(1),
    ])
    .areas(area);
    let [ttft, tpot] = Layout::horizontal([Constraint::Fill(1); 2]).areas(sparks);
    let (table, memory, events, dists) = if wide {
        let table_w = (area.width * 58 / 100).max(78);
        let [table, memory] =
            Layout::horizontal([Constraint::Length(table_w), Constraint::Fill(1)]).areas(middle);
        if tall {
            let events_w = (area.width * 30 / 100).max(40);
            let [dists, events] =
                Layout::horizontal([Constraint::Fill(1), Constraint::Length(events_w)])
                    .areas(bottom);
            (table, memory, events, Some(dists))
        } else {
            (table, memory, bottom, None)
        }
    } else {
        let [memory, events] = Layout::horizontal([Constraint::Fill(1); 2]).areas(bottom);
        (middle, memory, events, None)
    };
    let (heatmap, bands) = match (tall, wide) {
        (true, true) => {
            let [heatmap, bands] = Layout::horizontal([Constraint::Fill(1); 2]).areas(decode);
            (Some(heatmap), Some(bands))
        }
        (true, false) => (Some(decode), None),
        _ => (None, None),
    };
    Some(Regions {
        header,
        ttft,
        tpot,
        heatmap,
        bands,
        table,
        memory,
        dists,
        events,
        footer,
    })
}

/// Draws one frame.
/// Draws the whole dashboard on a blank frame.
pub fn render(frame: &mut Frame, app: &App) {
    render_parts(frame, app, &mut Parts::every());
}

/// Draws the dashboard part by part: a region whose key is that of the last frame keeps what
/// the canvas holds (`ui::parts`). Each key hashes what its region reads that can change;
/// every key holds the view's (`Changes::rare`, the figures' generation, the phase, the
/// theme), the layout's holds the size, which regions there are, the view and the theme.
pub fn render_parts(frame: &mut Frame, app: &App, parts: &mut Parts) {
    let area = frame.area();
    let theme = app.theme();
    let loading = app.phase == RunPhase::Loading && app.run.info.is_none();
    let r = match layout(area) {
        Some(r) if !app.face.show_help && !loading => r,
        _ => {
            // The help over everything, too small a terminal, the loading progress: drawn
            // whole, as they are rare and brief.
            parts.whole(frame.buffer_mut());
            return render_whole(frame, app, area);
        }
    };
    // The theme is in the layout's key too: a change of theme blanks the canvas in the new
    // text style, not only the regions.
    parts.begin(
        frame.buffer_mut(),
        key((r, app.view, app.face.theme_index())),
        theme.text,
    );
    let c = &app.changes;
    let view = key((c.rare, c.figures, app.phase, app.face.theme_index()));
    let slices = (
        app.charts.slices.closed().len(),
        app.charts.slices.closed().back().map(|s| s.index),
    );
    // The per-request charts draw a column per request, or per bucket of run time once
    // requests outpace the columns; those are numbered up to the clock's bucket, so the gap
    // after the newest moves with it.
    let requests = Some(
        if app.charts.buckets.by_time() && !app.charts.requests.is_empty() {
            let newest = app.charts.buckets.closed().back().map(|b| b.index);
            let clock = bucket_of(app.now.as_secs_f64());
            key((view, app.charts.buckets.closed().len(), newest, clock))
        } else {
            key((view, c.requests))
        },
    );
    // The heatmap's title shows the current request's progress, which depends on the clock.
    let progress = app
        .figures
        .current
        .as_ref()
        .map(|c| c.progress(app.elapsed()));
    let style = theme.text;
    // The header shows the clock: drawn every frame, as the footer (two and one rows).
    parts.part(frame, r.header, None, style, |f| {
        header::render(f, app, r.header)
    });
    match app.view {
        View::Requests => {
            parts.part(frame, r.ttft, requests, style, |f| {
                requests::render_ttft(f, app, r.ttft)
            });
            parts.part(frame, r.tpot, requests, style, |f| {
                requests::render_tpot(f, app, r.tpot)
            });
        }
        View::Distributions => parts.part(frame, r.charts(), Some(view), style, |f| {
            three(f, app, r.charts(), dist::render)
        }),
        View::Bands => parts.part(frame, r.charts(), Some(key((view, slices))), style, |f| {
            three(f, app, r.charts(), bands::render)
        }),
        View::Heatmap => {
            let k = Some(key((view, slices, &progress)));
            parts.part(frame, r.charts(), k, style, |f| {
                heatmap::render(f, app, r.charts())
            })
        }
        View::Breakdown => parts.part(frame, r.charts(), Some(view), style, |f| {
            breakdown::render(f, app, r.charts())
        }),
        View::Thinking => parts.part(frame, r.charts(), Some(view), style, |f| {
            shapes::render_thinking(f, app, r.charts())
        }),
        View::Models => parts.part(frame, r.charts(), Some(view), style, |f| {
            shapes::render_models(f, app, r.charts())
        }),
    }
    if let Some(rect) = r.heatmap {
        let k = Some(key((view, slices, &progress)));
        parts.part(frame, rect, k, style, |f| heatmap::render(f, app, rect));
    }
    if let Some(rect) = r.bands {
        parts.part(frame, rect, Some(key((view, slices))), style, |f| {
            three(f, app, rect, bands::render)
        });
    }
    if let Some(rect) = r.dists {
        parts.part(frame, rect, Some(view), style, |f| {
            three(f, app, rect, dist::render)
        });
    }
    parts.part(frame, r.table, Some(view), style, |f| {
        table::render(f, app, r.table)
    });
    parts.part(
        frame,
        r.memory,
        Some(key((view, c.telemetry))),
        style,
        |f| memory::render(f, app, r.memory),
    );
    // A sweep's grid follows its cells: drawn every frame.
    let events = app.sweep.is_none().then(|| key((view, c.events)));
    parts.part(frame, r.events, events, style, |f| {
        events::render(f, app, r.events)
    });
    parts.part(frame, r.footer, None, style, |f| {
        footer::render(f, app, r.footer)
    });
}

/// The dashboard drawn whole on a blank frame: what a frame that is not laid out in parts
/// shows (the help over it, the loading progress, too small a terminal).
fn render_whole(frame: &mut Frame, app: &App, area: Rect) {
    fill(frame.buffer_mut(), app.theme().text);
    let Some(r) = layout(area) else {
        too_small::render(frame, app, area);
        return;
    };
    header::render(frame, app, r.header);
    if app.phase == RunPhase::Loading && app.run.info.is_none() {
        // Before the model has loaded there is nothing to plot: the body is the progress.
        let body = Rect::new(
            area.x,
            r.header.bottom(),
            area.width,
            r.footer.y.saturating_sub(r.header.bottom()),
        );
        loading::render(frame, app, body);
    } else {
        match app.view {
            View::Requests => {
                requests::render_ttft(frame, app, r.ttft);
                requests::render_tpot(frame, app, r.tpot);
            }
            View::Distributions => three(frame, app, r.charts(), dist::render),
            View::Bands => three(frame, app, r.charts(), bands::render),
            View::Heatmap => heatmap::render(frame, app, r.charts()),
            View::Breakdown => breakdown::render(frame, app, r.charts()),
            View::Thinking => shapes::render_thinking(frame, app, r.charts()),
            View::Models => shapes::render_models(frame, app, r.charts()),
        }
        if let Some(rect) = r.heatmap {
            heatmap::render(frame, app, rect);
        }
        if let Some(rect) = r.bands {
            three(frame, app, rect, bands::render);
        }
        if let Some(rect) = r.dists {
            three(frame, app, rect, dist::render);
        }
        table::render(frame, app, r.table);
        memory::render(frame, app, r.memory);
        events::render(frame, app, r.events);
    }
    footer::render(frame, app, r.footer);
    if app.face.show_help {
        help::render(frame, app, area);
    }
}

/// Gives every cell of a fresh frame `style`, as `Block::new().style(style)` over the whole
/// area does (`parts::fill`).
pub(crate) fn fill(buf: &mut ratatui::buffer::Buffer, style: ratatui::style::Style) {
    let area = buf.area;
    parts::fill(buf, area, style);
}

/// TTFT, TPOT and ITL side by side, each drawn by `draw`.
fn three(frame: &mut Frame, app: &App, rect: Rect, draw: fn(&mut Frame, &App, Rect, Metric)) {
    let areas: [Rect; 3] = Layout::horizontal([Constraint::Fill(1); 3]).areas(rect);
    for (area, metric) in areas
        .into_iter()
        .zip([Metric::Ttft, Metric::Tpot, Metric::Itl])
    {
        draw(frame, app, area, metric);
    }
}

/// A bordered panel in the theme's style.
fn panel<'a>(app: &App, title: impl Into<Line<'a>>) -> Panel<'a> {
    bordered(app.theme(), &app.face.glyphs, title)
}

/// A titled, bordered panel in `theme` (the run dashboard's and `watch`'s).
pub(crate) fn bordered<'a>(
    theme: &crate::ui::theme::Theme,
    glyphs: &crate::ui::theme::Glyphs,
    title: impl Into<Line<'a>>,
) -> Panel<'a> {
    Panel::new(glyphs.border, theme.border).title(title.into().style(theme.title))
}

/// Cells kept for the text after a gauge (`43.8MiB/peak 64.0MiB`), so that the bars of the
/// gauges in one panel line up.
const GAUGE_TEXT: usize = 21;

/// A text gauge `label  [████░░░░] text` that fits `width` cells: the bar shrinks first and
/// goes away when there is no room. Drawn with characters, not colour, so it reads the same
/// with NO_COLOR, in the mono theme and in `--ascii` mode.
fn gauge_line<'a>(app: &App, label: &str, ratio: f64, text: String, width: u16) -> Line<'a> {
    let theme = app.theme();
    let label = format!("{label:<7}");
    let fixed = label.chars().count() + GAUGE_TEXT.max(text.chars().count()) + 3;
    let bar_w = (width as usize).saturating_sub(fixed).min(30);
    let mut spans = vec![Span::styled(label, theme.dim)];
    if bar_w >= 4 {
        let ratio = if ratio.is_finite() {
            ratio.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let filled = ((ratio * bar_w as f64).round() as usize).min(bar_w);
        spans.push(Span::styled("[", theme.dim));
        spans.push(Span::styled(
            app.face.glyphs.gauge_fill.repeat(filled),
            theme.gauge_fill,
        ));
        spans.push(Span::styled(
            app.face.glyphs.gauge_empty.repeat(bar_w - filled),
            theme.gauge_empty,
        ));
        spans.push(Span::styled("] ", theme.dim));
    }
    spans.push(Span::styled(text, theme.text));
    Line::from(spans)
}

/// A `Rect` of at most `w`x`h` centred in `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// A dim hint line, for empty panels.
fn hint<'a>(app: &App, text: impl Into<String>) -> Line<'a> {
    Line::from(Span::styled(text.into(), app.theme().dim))
}

/// Style of a phase badge, and its label.
fn phase_label(phase: RunPhase) -> &'static str {
    match phase {
        RunPhase::Loading => "LOADING",
        RunPhase::Warmup => "WARMUP",
        RunPhase::Running => "RUNNING",
        RunPhase::Paused => "PAUSED",
        RunPhase::Cooldown => "COOLDOWN",
        RunPhase::Stopped => "STOPPED",
        RunPhase::Error => "ERROR",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The base fill paints a fresh frame exactly as a styled block over it would, for every
    /// built-in theme and for a text style with a background and a modifier.
    #[test]
    fn fill_paints_a_fresh_frame_like_a_styled_block() {
        use ratatui::buffer::Buffer;
        use ratatui::style::{Color, Style};
        use ratatui::widgets::Widget;
        let mut styles: Vec<Style> = crate::ui::theme::Theme::builtin_names()
            .into_iter()
            .map(|n| {
                crate::ui::theme::Theme::builtin(n)
                    .expect("built-in theme")
                    .text
            })
            .collect();
        styles.push(Style::new().fg(Color::Black).bg(Color::White).bold());
        for style in styles {
            let area = Rect::new(0, 0, 7, 3);
            let mut want = Buffer::empty(area);
            ratatui::widgets::Block::new()
                .style(style)
                .render(area, &mut want);
            let mut got = Buffer::empty(area);
            fill(&mut got, style);
            assert_eq!(got, want, "{style:?}");
        }
    }

    #[test]
    fn regions_never_overlap_and_stay_inside() {
        for w in (MIN_WIDTH..=260).step_by(7) {
            for h in (MIN_HEIGHT..=80).step_by(3) {
                let area = Rect::new(0, 0, w, h);
                let r = layout(area).expect("big enough");
                let all = r.all();
                for (i, a) in all.iter().enumerate() {
                    assert!(area.contains(a.as_position()) || a.area() == 0, "{w}x{h}");
                    assert!(
                        a.right() <= area.right() && a.bottom() <= area.bottom(),
                        "{w}x{h} {a:?}"
                    );
                    for b in &all[i + 1..] {
                        assert!(!a.intersects(*b), "{w}x{h}: {a:?} overlaps {b:?}");
                    }
                }
                // The essentials always get room to show something.
                assert!(r.ttft.height >= 6 && r.tpot.height >= 6, "{w}x{h}");
                assert_eq!(r.table.height, TABLE_HEIGHT);
                assert!(
                    r.memory.height >= 4 && r.memory.width >= 38,
                    "{w}x{h} {:?}",
                    r.memory
                );
            }
        }
    }

    #[test]
    fn below_the_minimum_there_is_no_layout() {
        assert!(layout(Rect::new(0, 0, MIN_WIDTH - 1, 40)).is_none());
        assert!(layout(Rect::new(0, 0, 200, MIN_HEIGHT - 1)).is_none());
        assert!(layout(Rect::new(0, 0, 80, 24)).is_some_and(|r| r.heatmap.is_none()));
        assert!(layout(Rect::new(0, 0, 160, 48))
            .is_some_and(|r| r.heatmap.is_some() && r.bands.is_some() && r.dists.is_some()));
        assert!(layout(Rect::new(0, 0, 100, 48))
            .is_some_and(|r| r.heatmap.is_some() && r.bands.is_none() && r.dists.is_none()));
    }
}
