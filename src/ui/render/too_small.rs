//! Below the minimum size: a clear message instead of a garbled frame.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::{phase_label, MIN_HEIGHT, MIN_WIDTH};
use crate::ui::state::App;

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let lines = vec![
        Line::styled(
            format!("Terminal too small: {}x{}", area.width, area.height),
            theme.title,
        ),
        Line::styled(
            format!("Enlarge the terminal to at least {MIN_WIDTH}x{MIN_HEIGHT}."),
            theme.text,
        ),
        Line::styled(
            format!(
                "{} {} requests, q quits",
                phase_label(app.phase),
                app.run.requests_done
            ),
            theme.dim,
        ),
    ];
    let height = (lines.len() as u16).min(area.height);
    let y = area.y + (area.height - height) / 2;
    frame.render_widget(
        Paragraph::new(lines).centered().wrap(Wrap { trim: true }),
        Rect::new(area.x, y, area.width, area.height - (y - area.y)),
    );
}
