//! The help overlay (`?`): every binding in force, and what the marks on screen mean.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::{bordered, centered};
use crate::ui::keys::Action;
use crate::ui::state::App;
use crate::ui::theme::{Glyphs, Theme};

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    // Row selection is `watch`'s alone; its help lists it.
    let own = |a: &Action| !matches!(a, Action::SelectUp | Action::SelectDown);
    let offered = Action::TABLE
        .iter()
        .filter(|(a, ..)| own(a) && app.offers(*a));
    let keys = offered.map(|(action, _, _, _)| {
        let keys = app.face.keys.label(*action);
        let keys = if keys.is_empty() {
            "(unbound)".to_string()
        } else {
            keys
        };
        (keys, app.describe(*action))
    });
    let legend = [
        " Sparkline marks: w warmup request, | workload change, ! outlier",
        " (above the running p99). Table: ! crosses the SLO.",
        " Charts do not scroll: the newest is just left of the gap.",
        " +/-, ]/[ and b/B apply from the next request. Esc or ? closes.",
    ];
    overlay(
        frame,
        app.theme(),
        &app.face.glyphs,
        area,
        70,
        keys,
        &legend,
    );
}

/// A help overlay `width` cells wide, centred: a line per key binding, then the legend (the
/// run dashboard's and `watch`'s).
pub(crate) fn overlay<'a>(
    frame: &mut Frame,
    theme: &Theme,
    glyphs: &Glyphs,
    area: Rect,
    width: u16,
    keys: impl Iterator<Item = (String, &'a str)>,
    legend: &[&'a str],
) {
    let mut lines: Vec<Line> = keys
        .map(|(keys, describe)| {
            Line::from(vec![
                Span::styled(format!(" {keys:<16}"), theme.key),
                Span::styled(describe, theme.help),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.extend(legend.iter().map(|l| Line::styled(*l, theme.dim)));
    let height = lines.len() as u16 + 2;
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = bordered(theme, glyphs, "Keys").style(theme.help);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
