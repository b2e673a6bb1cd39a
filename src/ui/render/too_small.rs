//! Below the minimum size: a clear message instead of a garbled frame.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::{phase_label, MIN_HEIGHT, MIN_WIDTH};
use crate::ui::state::App;
use crate::ui::theme::Theme;

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let status = format!(
        "{} {} requests, q quits",
        phase_label(app.phase),
        app.run.requests_done
    );
    message(frame, app.theme(), area, (MIN_WIDTH, MIN_HEIGHT), status);
}

/// The message itself for a screen that needs `min` (columns, rows), with one line of `status`
/// under it (the run dashboard's and `watch`'s).
pub(crate) fn message(
    frame: &mut Frame,
    theme: &Theme,
    area: Rect,
    min: (u16, u16),
    status: String,
) {
    let lines = vec![
        Line::styled(
            format!("Terminal too small: {}x{}", area.width, area.height),
            theme.title,
        ),
        Line::styled(
            format!("Enlarge the terminal to at least {}x{}.", min.0, min.1),
            theme.text,
        ),
        Line::styled(status, theme.dim),
    ];
    let height = (lines.len() as u16).min(area.height);
    let y = area.y + (area.height - height) / 2;
    frame.render_widget(
        Paragraph::new(lines).centered().wrap(Wrap { trim: true }),
        Rect::new(area.x, y, area.width, area.height - (y - area.y)),
    );
}
