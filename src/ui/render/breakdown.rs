//! The breakdown view: steady TTFT by conversation turn (as conversations progress, a turn
//! whose prefix the server cached should come in lower) and by what the cache did (hit, miss,
//! unknown as the server reported per request), each row's p50 as a bar with its p99 marked and
//! n beside it, and the achieved hit share beside the server's own prefix-cache hit rate
//! (`--server-metrics`). The figures come from `App::refresh` (`stats::Breakdown`).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{hint, panel};
use crate::stats::Summary;
use crate::ui::state::App;
use crate::util::format;

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let b = &app.views.breakdown;
    let [turns, cache]: [Rect; 2] =
        Layout::horizontal([Constraint::Fill(3), Constraint::Fill(2)]).areas(rect);
    let turn_rows: Vec<(String, Summary)> = b
        .ttft_by_turn
        .iter()
        .map(|(t, s)| (format!("turn {t}"), *s))
        .collect();
    rows(
        frame,
        app,
        turns,
        "TTFT by turn",
        &turn_rows,
        "no conversations",
    );
    // An engine without a prefix cache (candle) has nothing to split by it.
    let no_cache = app
        .run
        .info
        .as_ref()
        .and_then(|i| i.traffic.as_ref())
        .and_then(|t| t.cache.as_deref())
        .is_some_and(|c| c.starts_with("none"));
    let cache_rows: Vec<(String, Summary)> = if no_cache {
        Vec::new()
    } else {
        b.ttft_by_cache
            .iter()
            .map(|(o, s)| (o.name().to_string(), *s))
            .collect()
    };
    let mut title = "TTFT by cache".to_string();
    if let Some(h) = b.hit_share {
        title.push_str(&format!(" {} hits {:.0}%", app.face.glyphs.sep, h * 100.0));
    }
    if let Some(srv) = app.run.server.last.as_ref().and_then(|w| w.prefix_hit_rate) {
        title.push_str(&format!(" (server {:.0}%)", srv * 100.0));
    }
    let empty = if no_cache {
        "no prefix cache (candle)"
    } else {
        "no requests yet"
    };
    rows(frame, app, cache, &title, &cache_rows, empty);
}

/// One row per group: `label  ████▏   p50 · p99 · n`, bars to a common scale (the largest p99);
/// the figures are never cut, the bars take what is left.
pub(super) fn rows(
    frame: &mut Frame,
    app: &App,
    rect: Rect,
    title: &str,
    rows: &[(String, Summary)],
    empty: &str,
) {
    let theme = app.theme();
    let block = panel(app, title.to_string());
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    if rows.is_empty() {
        frame.render_widget(Paragraph::new(hint(app, empty)), inner);
        return;
    }
    let ascii = app.face.glyphs.ascii;
    let scale = rows.iter().map(|(_, s)| s.p99).fold(0.0, f64::max);
    let label_w = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(4)
        + 1;
    let figures: Vec<String> = rows
        .iter()
        .map(|(_, s)| {
            format!(
                "{} · p99 {} · n {}",
                format::duration(s.p50, ascii),
                format::duration(s.p99, ascii),
                s.n
            )
        })
        .collect();
    let text_w = figures.iter().map(|f| f.chars().count()).max().unwrap_or(0);
    let bar_w = (inner.width as usize).saturating_sub(label_w + text_w + 1);
    let cells = |v: f64| {
        if scale > 0.0 {
            (((v / scale) * bar_w as f64).round() as usize).min(bar_w)
        } else {
            0
        }
    };
    let lines: Vec<Line> = rows
        .iter()
        .zip(figures)
        .take(inner.height as usize)
        .map(|((label, s), text)| {
            let (p50, p99) = (cells(s.p50), cells(s.p99));
            let mut bar = app.face.glyphs.gauge_fill.repeat(p50);
            if p99 > p50 {
                bar.push_str(&" ".repeat(p99 - p50 - 1));
                bar.push(if ascii { '|' } else { '┃' });
            }
            let pad = bar_w.saturating_sub(bar.chars().count());
            Line::from(vec![
                Span::styled(format!("{label:<label_w$}"), theme.dim),
                Span::styled(bar, theme.ttft),
                Span::raw(" ".repeat(pad + 1)),
                Span::styled(text, theme.text),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
