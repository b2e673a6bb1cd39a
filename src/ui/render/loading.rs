//! Loading: the first frame appears before the model has loaded, with what is being loaded
//! and a progress gauge.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{events, gauge_line, hint, panel};
use crate::ui::state::App;
use crate::util::format;

/// Loading progress counts bytes or tensors; a total this large can only be bytes.
const BYTES_THRESHOLD: u64 = 1 << 20;

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let [progress, rest] =
        Layout::vertical([Constraint::Length(5), Constraint::Fill(1)]).areas(rect);
    let block = panel(app, "Loading");
    let inner = block.inner(progress);
    frame.render_widget(block, progress);
    let lines: Vec<Line> = match &app.loading {
        Some(l) => {
            let ratio = if l.total > 0 {
                l.done as f64 / l.total as f64
            } else {
                0.0
            };
            let amount = if l.total >= BYTES_THRESHOLD {
                format!("{}/{}", format::bytes(l.done), format::bytes(l.total))
            } else {
                format!("{}/{}", l.done, l.total)
            };
            vec![
                Line::styled(format!(" {}", l.what), app.theme().text),
                gauge_line(
                    app,
                    " ",
                    ratio,
                    format!("{:>3.0}%  {amount}", ratio * 100.0),
                    inner.width,
                ),
            ]
        }
        None => vec![hint(app, " starting the worker")],
    };
    frame.render_widget(Paragraph::new(lines), inner);
    if rest.height >= 3 {
        events::render(frame, app, rest);
    }
}
