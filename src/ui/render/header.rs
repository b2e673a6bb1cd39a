//! The header: run state, model, device, workload (row 1); elapsed, requests, decode rate and
//! the statistics window (row 2). A fatal error replaces row 2, so it is never missed.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::phase_label;
use crate::engine::events::RunPhase;
use crate::ui::format;
use crate::ui::state::{stop_text, App};

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let sep = format!(" {} ", app.glyphs.sep);
    let mut top = vec![
        Span::styled(format!(" {} ", phase_label(app.phase)), theme.badge(app.phase)),
        Span::raw(" "),
    ];
    match &app.run {
        Some(run) => {
            let m = &run.model;
            top.push(Span::styled(m.name.clone(), theme.title));
            top.push(Span::styled(
                format!(
                    " {}{sep}{} params{sep}{}{sep}{}",
                    m.arch,
                    format::si(m.params as f64),
                    m.dtype,
                    m.device
                ),
                theme.text,
            ));
            if run.threads > 0 {
                top.push(Span::styled(format!(" ({} threads)", run.threads), theme.dim));
            }
        }
        None => top.push(Span::styled("infertop: loading the model", theme.title)),
    }
    if let Some(w) = &app.workload {
        top.push(Span::styled(format!(" {} ", app.glyphs.sep), theme.dim));
        top.push(Span::styled(
            format!(
                "prompt {}{sep}out {}{sep}batch {}",
                w.prompt_tokens, w.output_tokens, w.batch
            ),
            theme.text,
        ));
    }

    let second = match (&app.failed, app.phase) {
        (Some(message), RunPhase::Error) => Line::from(vec![
            Span::styled(" error: ", theme.event_error),
            Span::styled(message.clone(), theme.event_error),
        ]),
        _ => status_line(app, &sep),
    };
    frame.render_widget(Paragraph::new(vec![Line::from(top), second]), rect);
}

fn status_line<'a>(app: &App, sep: &str) -> Line<'a> {
    let theme = app.theme();
    let mut spans = vec![
        Span::styled(" elapsed ", theme.dim),
        Span::styled(format::elapsed(app.elapsed()), theme.text),
        Span::styled(sep.to_string(), theme.dim),
        Span::styled(app.requests_done.to_string(), theme.text),
        Span::styled(" requests", theme.dim),
    ];
    let warmup = app.stats.warmup_requests();
    if warmup > 0 {
        spans.push(Span::styled(format!(" ({warmup} warmup)"), theme.dim));
    }
    if let Some(rate) = app.decode_tok_s {
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled("decode ", theme.dim));
        spans.push(Span::styled(format::si(rate), theme.text));
        spans.push(Span::styled(" tok/s", theme.dim));
    }
    if let Some(c) = &app.current {
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled(
            format!("#{} step {}/{}", c.index, c.steps, c.output_tokens.saturating_sub(1)),
            theme.dim,
        ));
    }
    if let Some(reason) = &app.stop {
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled(format!("stopped: {}", stop_text(reason)), theme.text));
    }
    Line::from(spans)
}
