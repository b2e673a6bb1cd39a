//! What a record-fed dashboard draws besides the run dashboard's own regions: the bottom row
//! becomes a position bar (a replay: play state, speed, how far, its keys) or the follow's
//! line (what is followed, how the sources are doing), and with several sources the memory
//! panel becomes the sources pane, a row per source:
//! ```text
//! ┌Sources · 3, aligned at their starts──┐
//! │gpu1 live    1234 req  12.1ms  1.20ms │   name, state, requests, TTFT/TPOT p50
//! │gpu2 died       8 req  11.9ms  1.31ms │
//! └──────────────────────────────────────┘
//!  ▶ 4× [██████████░░░░░░░░] 0:42/1:30  space pause  n step  </> speed  ? help  q quit
//! ```
//! Reads the screen's state only.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::{FeedScreen, SourceRow};
use crate::record::feed::{Position, SourceState};
use crate::ui::keys::Action;
use crate::ui::render::{bordered, layout};
use crate::ui::state::Producer;
use crate::util::format;

/// Draws over the run dashboard's frame (the bottom row; with several sources, the memory
/// panel, unless the help overlay or the loading screen is over it). Nothing over a too-small
/// message.
pub fn render(frame: &mut Frame, screen: &FeedScreen) {
    let Some(r) = layout(frame.area()) else {
        return;
    };
    // The help overlay is drawn over the middle rows; the bottom row stays the bar's.
    frame.render_widget(Clear, r.footer);
    let line = match (&screen.position, screen.app.producer) {
        (Some(p), Producer::Replay) => replay_line(screen, p, r.footer.width as usize),
        _ => follow_line(screen, r.footer.width as usize),
    };
    frame.render_widget(Paragraph::new(line), r.footer);
    if screen.merged() && screen.app.run.info.is_some() && !screen.app.face.show_help {
        sources(frame, screen, r.memory);
    }
}

/// The keys of `items` that are bound, as `key what` pairs.
fn keys(screen: &FeedScreen, items: &[(&[Action], &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .filter_map(|(actions, what)| {
            let k: Vec<String> = actions
                .iter()
                .filter_map(|a| screen.app.face.keys.short_label(*a))
                .collect();
            (!k.is_empty()).then(|| (k.join("/"), what.to_string()))
        })
        .collect()
}

fn key_spans<'a>(screen: &FeedScreen, keys: &[(String, String)]) -> Vec<Span<'a>> {
    let theme = screen.app.theme();
    keys.iter()
        .flat_map(|(k, what)| {
            [
                Span::styled(format!("  {k}"), theme.key),
                Span::styled(format!(" {what}"), theme.dim),
            ]
        })
        .collect()
}

fn keys_width(keys: &[(String, String)]) -> usize {
    keys.iter()
        .map(|(k, w)| 2 + k.chars().count() + 1 + w.chars().count())
        .sum()
}

/// `▶ 4× [████░░░░] 0:42/1:30  space pause  n step  </> speed  ? help  q quit`.
fn replay_line<'a>(screen: &FeedScreen, p: &Position, width: usize) -> Line<'a> {
    let app = &screen.app;
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let speed = match (p.speed, ascii) {
        (s, true) => s.label().replace('×', "x"),
        (s, false) => s.label(),
    };
    let state = match (p.done, p.paused, ascii) {
        (true, _, false) => "■ end".to_string(),
        (true, _, true) => "[] end".to_string(),
        (false, true, false) => format!("‖ paused ({speed})"),
        (false, true, true) => format!("|| paused ({speed})"),
        (false, false, false) => format!("▶ {speed}"),
        (false, false, true) => format!("> {speed}"),
    };
    let at = std::time::Duration::from_secs_f64(p.t_s.max(0.0));
    let when = match (p.end_s, p.untimed) {
        (Some(end), false) => format!(
            "{}/{}",
            format::elapsed(at),
            format::elapsed(std::time::Duration::from_secs_f64(end.max(0.0)))
        ),
        _ => format!("{:.0}% of the file", p.fraction() * 100.0),
    };
    let pause_what = if p.paused { "play" } else { "pause" };
    let mut k = keys(
        screen,
        &[
            (&[Action::PauseResume], pause_what),
            (&[Action::Step], "step"),
            (&[Action::SpeedDown, Action::SpeedUp], "speed"),
            (&[Action::Help], "help"),
            (&[Action::Quit], "quit"),
        ],
    );
    if p.done {
        k.retain(|(_, w)| w == "help" || w == "quit");
    }
    let fixed = 1 + state.chars().count() + 1 + 2 + 1 + when.chars().count();
    let mut bar_w = width.saturating_sub(fixed + keys_width(&k));
    // Where room is short the bar keeps 8 cells; the keys go, help first (? still opens it),
    // quit last.
    for drop in ["help", "step", "speed", "pause", "play", "quit"] {
        if bar_w >= 8 {
            break;
        }
        k.retain(|(_, w)| w != drop);
        bar_w = width.saturating_sub(fixed + keys_width(&k));
    }
    let bar_w = bar_w.min(40);
    let filled = ((p.fraction() * bar_w as f64).round() as usize).min(bar_w);
    let state_style = if p.paused || p.done {
        theme.event_warn
    } else {
        theme.key
    };
    let mut spans = vec![
        Span::raw(" "),
        Span::styled(state, state_style),
        Span::raw(" "),
    ];
    if bar_w >= 4 {
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
    spans.push(Span::styled(when, theme.text));
    spans.extend(key_spans(screen, &k));
    Line::from(spans)
}

/// A source's state in a word or two.
pub fn state_words(row: &SourceRow, wall: std::time::Duration) -> String {
    match &row.state {
        SourceState::Waiting => "waiting".into(),
        SourceState::Live if row.quiet => match row.last_seen {
            Some(at) => format!("quiet {:.0}s", wall.saturating_sub(at).as_secs_f64()),
            None => "quiet".into(),
        },
        SourceState::Live => "live".into(),
        SourceState::Ended => "ended".into(),
        SourceState::Died(_) => "died".into(),
    }
}

/// `following run.jsonl · live · 1234 requests  ? help  q quit (the run goes on)`, or for
/// several sources how many are live, quiet, ended and dead.
fn follow_line<'a>(screen: &FeedScreen, width: usize) -> Line<'a> {
    let app = &screen.app;
    let theme = app.theme();
    let sep = format!(" {} ", app.face.glyphs.sep);
    let what = match screen.sources.as_slice() {
        [one] => format!(
            "following {}{sep}{}{sep}{} requests",
            one.name,
            state_words(one, screen.wall),
            one.requests
        ),
        rows => {
            let count = |f: &dyn Fn(&SourceRow) -> bool| rows.iter().filter(|r| f(r)).count();
            let parts = [
                (count(&|r| r.state == SourceState::Live && !r.quiet), "live"),
                (count(&|r| r.state == SourceState::Live && r.quiet), "quiet"),
                (count(&|r| r.state == SourceState::Waiting), "waiting"),
                (count(&|r| r.state == SourceState::Ended), "ended"),
                (count(&|r| matches!(r.state, SourceState::Died(_))), "died"),
            ];
            let states: Vec<String> = parts
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, w)| format!("{n} {w}"))
                .collect();
            let requests: u64 = rows.iter().map(|r| r.requests).sum();
            format!(
                "following {} sources: {}{sep}{requests} requests",
                rows.len(),
                states.join(", ")
            )
        }
    };
    let mut k = keys(
        screen,
        &[
            (&[Action::Help], "help"),
            (&[Action::Quit], "quit (the run goes on)"),
        ],
    );
    while 1 + what.chars().count() + keys_width(&k) > width && !k.is_empty() {
        k.remove(0);
    }
    let mut spans = vec![Span::raw(" "), Span::styled(what, theme.text)];
    spans.extend(key_spans(screen, &k));
    Line::from(spans)
}

/// The sources pane: a row per source (name, state, requests, TTFT and TPOT p50, failures and
/// rate where there is room), as many as fit; the rest share the last line, name, state and n.
fn sources(frame: &mut Frame, screen: &FeedScreen, rect: Rect) {
    let app = &screen.app;
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let title = format!(
        "Sources {} {}, aligned at their starts",
        app.face.glyphs.sep,
        screen.sources.len()
    );
    let block = bordered(theme, &app.face.glyphs, title);
    let inner = block.inner(rect);
    frame.render_widget(Clear, rect);
    frame.render_widget(block, rect);
    let rows = inner.height as usize;
    let width = inner.width as usize;
    if rows == 0 {
        return;
    }
    let states: Vec<String> = screen
        .sources
        .iter()
        .map(|r| state_words(r, screen.wall))
        .collect();
    let name_w = screen
        .sources
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 16);
    let state_w = states.iter().map(|s| s.chars().count()).max().unwrap_or(4);
    let count_w = screen
        .sources
        .iter()
        .map(|r| r.requests.to_string().len())
        .max()
        .unwrap_or(1)
        .max(3);
    let shown = if screen.sources.len() > rows {
        rows.saturating_sub(1)
    } else {
        rows
    };
    let dur = |v: Option<f64>| v.map_or("-".to_string(), |v| format::duration(v, ascii));
    let style_of = |row: &SourceRow| match (&row.state, row.quiet) {
        (SourceState::Died(_), _) => theme.event_error,
        (SourceState::Live, true) => theme.event_warn,
        (SourceState::Live, false) => theme.text,
        _ => theme.dim,
    };
    let mut lines: Vec<Line> = screen
        .sources
        .iter()
        .zip(&states)
        .take(shown)
        .map(|(row, state)| {
            let name: String = row.name.chars().take(name_w).collect();
            let mut spans = vec![
                Span::styled(format!("{name:<name_w$} "), theme.title),
                Span::styled(format!("{state:<state_w$} "), style_of(row)),
                Span::styled(format!("{:>count_w$}", row.requests), theme.text),
                Span::styled(" req", theme.dim),
            ];
            let mut rest = vec![
                (format!("  {:>7}", dur(row.ttft_p50)), true),
                (format!(" {:>7}", dur(row.tpot_p50)), true),
            ];
            if row.failed > 0 {
                rest.push((format!("  {} failed", row.failed), false));
            }
            if let Some(rate) = row.rate() {
                rest.push((format!("  {}/s", format::si(rate)), false));
            }
            let mut used: usize = spans.iter().map(Span::width).sum();
            for (text, plain) in rest {
                let w = text.chars().count();
                if used + w > width {
                    break;
                }
                used += w;
                spans.push(Span::styled(
                    text,
                    if plain { theme.text } else { theme.dim },
                ));
            }
            Line::from(spans)
        })
        .collect();
    if shown < screen.sources.len() {
        // The rest, as short as can be: `gpu3 live 80 · gpu4 died 8`.
        let rest: Vec<String> = screen
            .sources
            .iter()
            .zip(&states)
            .skip(shown)
            .map(|(r, st)| format!("{} {st} {}", r.name, r.requests))
            .collect();
        let text: String = format!("+ {}", rest.join(&format!(" {} ", app.face.glyphs.sep)))
            .chars()
            .take(width)
            .collect();
        lines.push(Line::styled(text, theme.dim));
    } else if lines.len() < rows {
        let pad = name_w + 1 + state_w + 1 + count_w + 4;
        lines.push(Line::styled(
            format!(
                "{:pad$}  TTFT/TPOT p50 of its last {}",
                "",
                super::SOURCE_WINDOW
            ),
            theme.dim,
        ));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;
    use crate::record::feed::{FeedEvent, Speed};
    use crate::ui::screen::Screen;
    use crate::ui::App;

    fn rows(screen: &FeedScreen, w: u16, h: u16) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        t.draw(|f| screen.draw(f)).expect("draw");
        let buf = t.backend().buffer().clone();
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect())
            .collect()
    }

    fn position(paused: bool, done: bool) -> Position {
        Position {
            read_bytes: 50,
            total_bytes: 100,
            t_s: 42.0,
            end_s: Some(90.0),
            speed: Speed::Times(2.0),
            paused,
            untimed: false,
            done,
        }
    }

    #[test]
    fn the_position_bar_says_where_and_how_fast_and_keeps_its_keys_in_80_columns() {
        let mut s = FeedScreen::new(App::default(), Producer::Replay, vec!["r".into()], None);
        s.apply(&FeedEvent::Position(position(false, false)));
        let last = rows(&s, 80, 24).pop().expect("a row");
        assert!(last.starts_with(" ▶ 2× ["), "{last}");
        assert!(last.contains("] 0:42/1:30"), "{last}");
        for k in ["space pause", "n step", "</> speed", "q quit"] {
            assert!(last.contains(k), "{k}: {last}");
        }
        s.apply(&FeedEvent::Position(position(true, false)));
        let last = rows(&s, 80, 24).pop().expect("a row");
        assert!(
            last.contains("‖ paused (2×)") && last.contains("space play"),
            "{last}"
        );
        s.apply(&FeedEvent::Position(position(false, true)));
        let last = rows(&s, 80, 24).pop().expect("a row");
        assert!(last.contains("■ end") && !last.contains("step"), "{last}");
    }

    #[test]
    fn a_merge_has_a_row_per_source_where_the_memory_panel_was() {
        let names = vec!["gpu1".into(), "gpu2".into()];
        let mut s = FeedScreen::new(App::default(), Producer::Follow, names, None);
        s.apply(&FeedEvent::Run {
            source: 0,
            t_s: 0.0,
            event: crate::event::Event::RunStarted(Box::new(crate::event::RunInfo {
                model: crate::event::ModelInfo::served("m", "http://x"),
                workload: crate::event::WorkloadDesc {
                    prompt_tokens: "8".into(),
                    output_tokens: "4".into(),
                    batch: 1,
                    load: None,
                },
                warmup_requests: 0,
                threads: 0,
                traffic: None,
                peak: None,
            })),
        });
        s.apply(&FeedEvent::Source {
            source: 1,
            state: Some(SourceState::Died("gone".into())),
            note: None,
        });
        let text = rows(&s, 80, 24).join("\n");
        assert!(
            text.contains("Sources · 2, aligned at their starts"),
            "{text}"
        );
        assert!(text.contains("gpu1 live"), "{text}");
        assert!(text.contains("gpu2 died"), "{text}");
        assert!(
            text.contains("following 2 sources: 1 live, 1 died"),
            "{text}"
        );
        assert!(!text.contains("Memory"), "{text}");
    }
}
