//! The help overlay (`?`): every binding in force, and what the marks on screen mean.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::{centered, panel};
use crate::ui::keys::Action;
use crate::ui::state::App;

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let mut lines: Vec<Line> = Action::TABLE
        .iter()
        .map(|(action, _, _, _)| {
            let keys = app.keys.label(*action);
            let keys = if keys.is_empty() {
                "(unbound)".to_string()
            } else {
                keys
            };
            Line::from(vec![
                Span::styled(format!(" {keys:<16}"), theme.key),
                Span::styled(action.describe(), theme.help),
            ])
        })
        .collect();
    let legend = [
        "",
        " Sparkline marks: w warmup request, | workload change, ! outlier",
        " (above the running p99). Table: ! crosses the SLO.",
        " Charts do not scroll: the newest is just left of the gap.",
        " +/-, ]/[ and b/B take effect from the next request.",
        " Esc or ? closes this help.",
    ];
    lines.extend(legend.iter().map(|l| Line::styled(*l, theme.dim)));
    let height = lines.len() as u16 + 2;
    let rect = centered(area, 70, height);
    frame.render_widget(Clear, rect);
    let block = panel(app, "Keys").style(theme.help);
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        rect,
    );
}
