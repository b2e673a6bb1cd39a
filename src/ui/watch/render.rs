//! The watch screen, drawn from `&WatchState` only: one small function per region.
//!
//! At the minimum size, 80x24 (bigger terminals give the charts the extra rows and columns):
//! ```text
//!  WATCH  vllm · elapsed 1:23 · every 1s · http://localhost:8000/metrics        header
//!  83 windows · scrape ok · prefix hit 62.0% · preemptions 0 (2 in all)
//! ┌Requests/s──0..15┐┌Running+waiting──0..12┐┌KV cache──0..100%┐   charts: a bar per
//! │ ▂▃▅▆▇█▇▆▅▃▂   ▁▂│ ...                                           window, the last N
//! └12.3/s───────────┘└run 5 · wait 3────────┘└45.0%────────────┘   (N = the width)
//! ┌TTFT p50/p99─────┐┌ITL p50/p99───────────┐┌E2E p50/p99───────┐   p99 behind p50
//! └p50 120ms p99 198┘└...───────────────────┘└...───────────────┘
//! ┌Server latency (histogram_quantile: as fine as its buckets)──────────┐
//! │      last window (1.00s)              since start (1:23)            │
//! │        p50     p90     p99       n    p50     p90     p99       n   │
//! │TTFT  ...  ITL  ...  E2E  ...                                        │
//! └─────────────────────────────────────────────────────────────────────┘
//!  q quit  ? help  space pause  r reset span  t theme                           footer
//! ```
//! Below 80x24 only a message asking for a larger terminal is drawn. The help overlay (`?`)
//! is drawn over everything.
//!
//! The charts do not scroll, as the run dashboard's do (`ui::render::history`): window `k` is
//! drawn in column `k mod width`, the column after the newest is the gap that marks "now",
//! and scales move in nice steps, so a new window rewrites two columns of each chart: what
//! crosses an SSH link is small.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::state::{Pane, Point, Series, WatchState};
use crate::event::ServerQuantiles;
use crate::stats::scale::{bar_scale, nice_ceil};
use crate::ui::keys::Action;
use crate::ui::render::history::{column_of, draw_bar_with, eighths};
use crate::ui::render::panel::Panel;
use crate::util::format;

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;
/// Borders, two header rows and TTFT / ITL / E2E.
const TABLE_HEIGHT: u16 = 7;

/// Where each region goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regions {
    pub header: Rect,
    /// The node table (several nodes, or exporter figures); empty otherwise.
    pub nodes: Rect,
    /// Requests/s, running+waiting, KV cache; then TTFT, ITL, E2E (of the selected row).
    /// Empty where the detail pane has the area (`v`).
    pub charts: [Rect; 6],
    /// The selected row's figures in full; empty where there is none.
    pub detail: Rect,
    /// The latency table (a single server's screen).
    pub table: Rect,
    pub footer: Rect,
}

/// From this width the detail pane stands beside the charts.
pub const DETAIL_BESIDE: u16 = 160;

/// The regions for a terminal of this size, or `None` below the minimum. `node_rows`: the
/// node table's rows (the total, nodes and engines), or `None` for a single server's screen.
pub fn layout(area: Rect, node_rows: Option<usize>, pane: Pane) -> Option<Regions> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let Some(rows) = node_rows else {
        let [header, charts, table, footer] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Fill(1),
            Constraint::Length(TABLE_HEIGHT),
            Constraint::Length(1),
        ])
        .areas(area);
        return Some(Regions {
            header,
            nodes: Rect::default(),
            charts: chart_grid(charts),
            detail: Rect::default(),
            table,
            footer,
        });
    };
    // The node table takes what its rows need, up to 45 % of the body, leaving the charts
    // two rows of bars each at least.
    let body = area.height - 3;
    // With the detail pane in place of the charts, it gets the room.
    let share = if pane == Pane::Detail && area.width < DETAIL_BESIDE {
        30
    } else {
        45
    };
    let cap = (body * share / 100).max(5);
    let want = u16::try_from(rows).unwrap_or(u16::MAX).saturating_add(3);
    let [header, nodes, below, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(want.min(cap)),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let (charts, detail) = if area.width >= DETAIL_BESIDE {
        let [c, d] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(below);
        (chart_grid(c), d)
    } else if pane == Pane::Detail {
        ([Rect::default(); 6], below)
    } else {
        (chart_grid(below), Rect::default())
    };
    Some(Regions {
        header,
        nodes,
        charts,
        detail,
        table: Rect::default(),
        footer,
    })
}

fn chart_grid(area: Rect) -> [Rect; 6] {
    let [top, bottom] = Layout::vertical([Constraint::Fill(1); 2]).areas(area);
    let [a, b, c] = Layout::horizontal([Constraint::Fill(1); 3]).areas(top);
    let [d, e, f] = Layout::horizontal([Constraint::Fill(1); 3]).areas(bottom);
    [a, b, c, d, e, f]
}

/// The regions of this state's screen at `area`.
pub fn regions(s: &WatchState, area: Rect) -> Option<Regions> {
    let rows = s
        .has_node_rows()
        .then(|| super::nodes::lines(s, true).len());
    layout(area, rows, s.pane)
}

/// Draws one frame.
pub fn render(frame: &mut Frame, s: &WatchState) {
    let area = frame.area();
    crate::ui::render::fill(frame.buffer_mut(), s.theme().text);
    let Some(r) = regions(s, area) else {
        too_small(frame, s, area);
        return;
    };
    header(frame, s, r.header);
    if !r.nodes.is_empty() {
        super::nodes::render(frame, s, r.nodes);
    }
    if !r.charts[0].is_empty() {
        charts(frame, s, &r.charts);
    }
    if !r.detail.is_empty() {
        super::detail::render(frame, s, r.detail);
    }
    if !r.table.is_empty() {
        table(frame, s, r.table);
    }
    footer(frame, s, r.footer);
    if s.face.show_help {
        help(frame, s, area);
    }
}

fn dur(s: &WatchState, secs: f64) -> String {
    format::duration(secs, s.face.glyphs.ascii)
}

/// `v` as a percentage with one decimal, `-` when the server does not export it.
fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn count(v: Option<f64>) -> String {
    v.map_or("-".into(), format::si)
}

fn header(frame: &mut Frame, s: &WatchState, rect: Rect) {
    let theme = s.theme();
    let sep = || Span::styled(format!(" {} ", s.face.glyphs.sep), theme.dim);
    let (badge, badge_style) = if s.paused {
        (" PAUSED ", theme.badge_paused)
    } else {
        (" WATCH ", theme.badge_running)
    };
    let top = Line::from(vec![
        Span::styled(badge, badge_style),
        Span::raw(" "),
        Span::styled(s.server.clone(), theme.title),
        sep(),
        Span::styled("elapsed ", theme.dim),
        Span::styled(format::elapsed(s.now), theme.text),
        sep(),
        Span::styled("every ", theme.dim),
        Span::styled(dur(s, s.interval.as_secs_f64()), theme.text),
        sep(),
        Span::styled(s.url.clone(), theme.text),
    ]);
    let mut second = vec![
        Span::raw(" "),
        Span::styled(s.windows_read.to_string(), theme.text),
        Span::styled(" windows", theme.dim),
        sep(),
    ];
    match &s.scrape.failing {
        Some((n, message)) => {
            let last = s
                .scrape
                .last_ok_s
                .map_or("never".into(), |t| format::elapsed(secs(t)));
            second.push(Span::styled(
                format!(
                    "warning: {n} {} failed ({message}); last good {last}",
                    if *n == 1 { "scrape" } else { "scrapes" }
                ),
                theme.event_warn,
            ));
        }
        None => second.push(Span::styled("scrape ok", theme.text)),
    }
    // The canary lane: the one request the watch sends.
    if let Some(c) = s.canary.as_ref().filter(|c| c.ttft.n > 0) {
        second.push(sep());
        second.push(Span::styled("canary TTFT ", theme.dim));
        second.push(Span::styled(dur(s, c.ttft.p50), theme.text));
        second.push(Span::styled(
            format!(
                " p99 {} E2E {} (n {}{})",
                dur(s, c.ttft.p99),
                dur(s, c.e2e.p50),
                c.ttft.n,
                if c.failed > 0 {
                    format!(", {} failed", c.failed)
                } else {
                    String::new()
                }
            ),
            theme.dim,
        ));
    } else if let Some(m) = &s.canary_failed {
        second.push(sep());
        second.push(Span::styled(format!("canary: {m}"), theme.event_warn));
    }
    if s.paused {
        second.push(sep());
        second.push(Span::styled(
            format!(
                "{} {} held",
                s.held(),
                if s.held() == 1 { "window" } else { "windows" }
            ),
            theme.dim,
        ));
    }
    let last = s.total.last.as_ref();
    second.push(sep());
    second.push(Span::styled("prefix hit ", theme.dim));
    second.push(Span::styled(
        percent(last.and_then(|w| w.prefix_hit_rate)),
        theme.text,
    ));
    second.push(sep());
    second.push(Span::styled("preemptions ", theme.dim));
    let preempt = match last.and_then(|w| w.preemptions) {
        Some(p) => format!(
            "{} ({} in all)",
            format::si(p),
            format::si(s.total.preemptions_total)
        ),
        None => "-".into(),
    };
    second.push(Span::styled(preempt, theme.text));
    frame.render_widget(Paragraph::new(vec![top, Line::from(second)]), rect);
}

fn p50(q: Option<ServerQuantiles>) -> Option<f64> {
    q.map(|q| q.p50)
}

fn p99(q: Option<ServerQuantiles>) -> Option<f64> {
    q.map(|q| q.p99)
}

fn secs(t: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(t.max(0.0))
}

/// A bordered panel in the theme's style.
fn panel<'a>(s: &WatchState, title: impl Into<Line<'a>>) -> Panel<'a> {
    crate::ui::render::bordered(s.theme(), &s.face.glyphs, title)
}

/// One figure of a window, as a chart reads it.
type Figure = fn(&Point) -> Option<f64>;

/// One chart: a bar per window in each layer, the first layer behind the others (it must be
/// the tallest: p99 behind p50, running+waiting behind running).
struct Chart<'a> {
    title: &'a str,
    layers: Vec<(Figure, Style)>,
    /// A fixed full-height value (KV cache: 100%); else the scale follows the data.
    fixed_top: Option<f64>,
    /// Bars start at zero (counts and rates); latencies may start at a nice value below the
    /// smallest, as the run dashboard's do, so that steady figures still show their moves.
    from_zero: bool,
    scale: &'a dyn Fn(f64) -> String,
    /// The newest window's figures, in the bottom border.
    now: String,
}

fn charts(frame: &mut Frame, s: &WatchState, rects: &[Rect; 6]) {
    let theme = s.theme();
    let series = s.selected_series();
    let last = series.history.last();
    let rate = |v: f64| format::si(v);
    let pct = |v: f64| format!("{:.0}%", v * 100.0);
    let time = |v: f64| dur(s, v);
    let quantiles = |q: Option<ServerQuantiles>| match q {
        Some(q) => format!("p50 {} p99 {}", dur(s, q.p50), dur(s, q.p99)),
        None => String::new(),
    };
    let list = [
        Chart {
            title: "Requests/s",
            layers: vec![(|p| p.requests_per_s, theme.memory)],
            fixed_top: None,
            from_zero: true,
            scale: &rate,
            now: last
                .and_then(|p| p.requests_per_s)
                .map_or(String::new(), |r| format!("{}/s", format::si(r))),
        },
        Chart {
            title: "Running+waiting",
            layers: vec![
                (
                    |p| match (p.running, p.waiting) {
                        (None, None) => None,
                        (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
                    },
                    theme.event_warn,
                ),
                (|p| p.running, theme.gauge_fill),
            ],
            fixed_top: None,
            from_zero: true,
            scale: &rate,
            now: last
                .filter(|p| p.running.is_some() || p.waiting.is_some())
                .map_or(String::new(), |p| {
                    format!("run {} wait {}", count(p.running), count(p.waiting))
                }),
        },
        Chart {
            title: "KV cache",
            layers: vec![(|p| p.kv_usage, theme.memory)],
            fixed_top: Some(1.0),
            from_zero: true,
            scale: &pct,
            now: last
                .and_then(|p| p.kv_usage)
                .map_or(String::new(), |v| percent(Some(v))),
        },
        Chart {
            title: "TTFT p50/p99",
            layers: vec![
                (|p| p99(p.ttft), theme.outlier),
                (|p| p50(p.ttft), theme.ttft),
            ],
            fixed_top: None,
            from_zero: false,
            scale: &time,
            now: last.map_or(String::new(), |p| quantiles(p.ttft)),
        },
        Chart {
            title: "ITL p50/p99",
            layers: vec![(|p| p99(p.itl), theme.outlier), (|p| p50(p.itl), theme.itl)],
            fixed_top: None,
            from_zero: false,
            scale: &time,
            now: last.map_or(String::new(), |p| quantiles(p.itl)),
        },
        Chart {
            title: "E2E p50/p99",
            layers: vec![
                (|p| p99(p.e2e), theme.outlier),
                (|p| p50(p.e2e), theme.tpot),
            ],
            fixed_top: None,
            from_zero: false,
            scale: &time,
            now: last.map_or(String::new(), |p| quantiles(p.e2e)),
        },
    ];
    // With a row per node the charts say whose they are.
    let whose = (s.nodes.len() > 1).then(|| s.selected_name());
    for (chart, rect) in list.into_iter().zip(rects) {
        draw_chart(frame, s, series, *rect, chart, whose);
    }
}

fn draw_chart(
    frame: &mut Frame,
    s: &WatchState,
    series: &Series,
    rect: Rect,
    c: Chart,
    whose: Option<&str>,
) {
    let theme = s.theme();
    // The row's name goes in the title where it fits beside the scale.
    let title = match whose {
        Some(name) if c.title.len() + name.chars().count() + 16 <= usize::from(rect.width) => {
            format!("{} {} {name}", c.title, s.face.glyphs.sep)
        }
        _ => c.title.to_string(),
    };
    let mut block = panel(s, title);
    let inner = block.inner(rect);
    let width = inner.width;
    let shown = usize::from(width.saturating_sub(1)).min(series.history.len());
    let visible: Vec<&Point> = series.history.last_n(shown).collect();
    // The scale is the range on screen: the back layer's top, the front layer's bottom.
    let back = c.layers.first().map(|l| l.0);
    let front = c.layers.last().map(|l| l.0);
    let high = back.map_or(0.0, |f| {
        visible.iter().filter_map(|p| f(p)).fold(0.0f64, f64::max)
    });
    let low = front.map_or(0.0, |f| {
        visible
            .iter()
            .filter_map(|p| f(p))
            .fold(f64::INFINITY, f64::min)
    });
    let (floor, top) = match c.fixed_top {
        Some(top) => (0.0, top),
        None if c.from_zero => (0.0, nice_ceil(high)),
        None => bar_scale(low, high),
    };
    if top > 0.0 {
        let from = if floor > 0.0 {
            (c.scale)(floor)
        } else {
            "0".into()
        };
        block = block
            .title(Line::styled(format!("{from}..{}", (c.scale)(top)), theme.dim).right_aligned());
    }
    if !c.now.is_empty() {
        block = block.title_bottom(Line::styled(c.now, theme.text));
    }
    frame.render_widget(block, rect);
    let has_data = visible
        .iter()
        .any(|p| c.layers.iter().any(|(f, _)| f(p).is_some()));
    if !has_data {
        let text = if series.history.is_empty() {
            "no window yet"
        } else {
            "not exported"
        };
        let y = inner.y + inner.height.saturating_sub(1) / 2;
        frame.render_widget(
            Paragraph::new(Line::styled(text, theme.dim)).centered(),
            Rect::new(inner.x, y, inner.width, inner.height.min(1)),
        );
        return;
    }
    let rows = inner.height;
    let buf = frame.buffer_mut();
    let first = series.history.newest_number() + 1 - visible.len() as u64;
    for (i, p) in visible.iter().enumerate() {
        let x = inner.x + column_of(first + i as u64, width);
        for (value, style) in &c.layers {
            if let Some(v) = value(p) {
                let e = eighths(v, floor, top, rows);
                draw_bar_with(buf, &s.face.glyphs.bars, x, inner.y, rows, e, *style);
            }
        }
    }
}

fn table(frame: &mut Frame, s: &WatchState, rect: Rect) {
    let theme = s.theme();
    let block = panel(
        s,
        "Server latency (histogram_quantile estimates: as fine as its buckets)",
    );
    let last = s.total.last.as_ref();
    let window_label = last.map_or("last window".into(), |w| {
        format!("last window ({})", dur(s, w.seconds))
    });
    let span_label = if s.span_from_s > 0.0 {
        format!(
            "since reset at {} ({} windows)",
            format::elapsed(secs(s.span_from_s)),
            s.total.span_summary.windows
        )
    } else {
        format!("whole watch ({} windows)", s.total.span_summary.windows)
    };
    let cell = |q: Option<ServerQuantiles>| -> String {
        match q {
            Some(q) => format!(
                "{:>8}{:>8}{:>8}{:>7}",
                dur(s, q.p50),
                dur(s, q.p90),
                dur(s, q.p99),
                format::si(q.n as f64)
            ),
            None => format!("{:>8}{:>8}{:>8}{:>7}", "-", "-", "-", "0"),
        }
    };
    let group = format!("{:>8}{:>8}{:>8}{:>7}", "p50", "p90", "p99", "n");
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{:6}{window_label:<31}", ""), theme.dim),
            Span::styled(format!("   {span_label}"), theme.dim),
        ]),
        Line::styled(format!("{:6}{group}   {group}", ""), theme.table_header),
    ];
    let span = &s.total.span_summary;
    for (name, now, all) in [
        ("TTFT", last.and_then(|w| w.ttft_s), span.ttft_s),
        ("ITL", last.and_then(|w| w.itl_s), span.itl_s),
        ("E2E", last.and_then(|w| w.e2e_s), span.e2e_s),
    ] {
        lines.push(Line::from(vec![
            Span::styled(format!("{name:<6}"), theme.title),
            Span::styled(cell(now), theme.text),
            Span::styled(format!("   {}", cell(all)), theme.text),
        ]));
    }
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The watch's keys, as bound.
const KEYS: [(Action, &str, &str); 5] = [
    (
        Action::Quit,
        "quit",
        "quit (prints the whole watch's summary)",
    ),
    (Action::Help, "help", "this help"),
    (
        Action::PauseResume,
        "pause",
        "pause / resume the view (scrapes go on)",
    ),
    (
        Action::ResetStats,
        "reset span",
        "start the span in the table over",
    ),
    (Action::NextTheme, "theme", "next colour theme"),
];

/// The keys the footer offers: the watch's own, and with a node table the selection and
/// (where the detail pane does not fit beside the charts) the pane key.
fn footer_keys(s: &WatchState, width: u16) -> Vec<(Action, &'static str)> {
    let mut keys: Vec<(Action, &'static str)> =
        KEYS.iter().map(|(a, what, _)| (*a, *what)).collect();
    if s.has_node_rows() {
        if s.rows() > 1 {
            keys.insert(2, (Action::SelectDown, "next row"));
        }
        if width < DETAIL_BESIDE {
            let what = match s.pane {
                Pane::Charts => "detail",
                Pane::Detail => "charts",
            };
            keys.insert(2, (Action::CycleView, what));
        }
    }
    keys
}

fn footer(frame: &mut Frame, s: &WatchState, rect: Rect) {
    let theme = s.theme();
    let mut spans = vec![Span::raw(" ")];
    let mut used = 1usize;
    for (action, what) in footer_keys(s, rect.width) {
        let Some(key) = s.face.keys.short_label(action) else {
            continue;
        };
        let what = if action == Action::PauseResume && s.paused {
            "resume"
        } else {
            what
        };
        let len = key.chars().count() + 1 + what.len() + 2;
        if used + len > usize::from(rect.width) {
            break;
        }
        used += len;
        spans.push(Span::styled(key, theme.key));
        spans.push(Span::styled(format!(" {what}  "), theme.dim));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), rect);
}

fn help(frame: &mut Frame, s: &WatchState, area: Rect) {
    let mut keys: Vec<(String, &str)> = KEYS
        .iter()
        .map(|(action, _, describe)| (s.face.keys.label(*action), *describe))
        .collect();
    if s.has_node_rows() {
        keys.push((
            format!(
                "{}/{}",
                s.face.keys.label(Action::SelectUp),
                s.face.keys.label(Action::SelectDown)
            ),
            "select a row: the charts and detail show it",
        ));
        keys.push((
            s.face.keys.label(Action::CycleView),
            "charts / detail (narrow screens)",
        ));
    }
    let mut legend = vec![
        " Nothing is sent to the server: its /metrics is read every interval,",
        " and each window is the difference of two scrapes.",
        " Percentiles are Prometheus' histogram_quantile over the window's",
        " bucket deltas: linear within a bucket, so as fine as its buckets.",
        " Charts: a bar per window, p99 behind p50, waiting stacked on",
        " running; they do not scroll: the newest is just left of the gap.",
    ];
    if s.has_node_rows() {
        legend.push(" Nodes: ! marks a p99 over 1.5x the nodes' median; a node that");
        legend.push(" cannot be read is marked down and tried every interval.");
    }
    legend.push(" Esc or ? closes this help.");
    crate::ui::render::help::overlay(
        frame,
        s.theme(),
        &s.face.glyphs,
        area,
        72,
        keys.into_iter(),
        &legend,
    );
}

fn too_small(frame: &mut Frame, s: &WatchState, area: Rect) {
    let status = format!("watching {}: {} windows, q quits", s.server, s.windows_read);
    crate::ui::render::too_small::message(frame, s.theme(), area, (MIN_WIDTH, MIN_HEIGHT), status);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_stay_inside_and_apart() {
        for w in (MIN_WIDTH..=260).step_by(9) {
            for h in (MIN_HEIGHT..=80).step_by(5) {
                let area = Rect::new(0, 0, w, h);
                for (rows, pane) in [
                    (None, Pane::Charts),
                    (Some(3), Pane::Charts),
                    (Some(70), Pane::Charts),
                    (Some(5), Pane::Detail),
                ] {
                    let r = layout(area, rows, pane).expect("big enough");
                    let mut all = vec![r.header, r.table, r.footer, r.nodes, r.detail];
                    all.extend(r.charts);
                    all.retain(|r| !r.is_empty());
                    for (i, a) in all.iter().enumerate() {
                        assert!(a.right() <= area.right() && a.bottom() <= area.bottom());
                        for b in &all[i + 1..] {
                            assert!(!a.intersects(*b), "{w}x{h}: {a:?} overlaps {b:?}");
                        }
                    }
                    // Every chart drawn has at least two rows of bars and a title that fits.
                    let drawn = r.charts.iter().filter(|c| !c.is_empty());
                    assert!(
                        drawn.clone().all(|c| c.height >= 4 && c.width >= 26),
                        "{w}x{h} {rows:?}"
                    );
                    // The node table shows at least two rows.
                    assert!(rows.is_none() || r.nodes.height >= 5);
                    // A detail pane is there when asked for, or beside the charts.
                    if pane == Pane::Detail && rows.is_some() {
                        assert!(!r.detail.is_empty());
                    }
                }
            }
        }
        assert!(layout(Rect::new(0, 0, 79, 40), None, Pane::Charts).is_none());
        assert!(layout(Rect::new(0, 0, 200, 23), Some(2), Pane::Charts).is_none());
    }
}
