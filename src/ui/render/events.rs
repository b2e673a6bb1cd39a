//! The events pane: warmup finished, outliers, errors, pauses, workload changes, resets —
//! newest first, time-stamped with the dashboard clock, as many as fit.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{hint, panel};
use crate::ui::format;
use crate::ui::state::{App, Level};

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let block = panel(app, "Events");
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    if app.events.is_empty() {
        frame.render_widget(Paragraph::new(hint(app, "nothing yet")), inner);
        return;
    }
    let lines: Vec<Line> = app
        .events
        .iter()
        .rev()
        .take(inner.height as usize)
        .map(|e| {
            let style = match e.level {
                Level::Info => theme.event_info,
                Level::Warn => theme.event_warn,
                Level::Error => theme.event_error,
            };
            Line::from(vec![
                Span::styled(format!("{:>5} ", format::elapsed(e.at)), theme.dim),
                Span::styled(e.text.clone(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
