//! The header: run state, model, device, workload (row 1); elapsed, requests, decode rate and
//! the statistics window (row 2). A fatal error replaces row 2, so it is never missed.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::phase_label;
use crate::event::RunPhase;
use crate::ui::format;
use crate::ui::state::{stop_text, App};

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let sep = format!(" {} ", app.glyphs.sep);
    let top = top_line(app, &sep, rect.width as usize);
    let second = match (&app.run.failed, app.phase) {
        (Some(message), RunPhase::Error) => Line::from(vec![
            Span::styled(" error: ", theme.event_error),
            Span::styled(message.clone(), theme.event_error),
        ]),
        _ => status_line(app, &sep),
    };
    frame.render_widget(Paragraph::new(vec![top, second]), rect);
}

/// State badge, model, device and workload. The workload is what a user changes while
/// watching, so on a narrow terminal the model details give way first: threads, then
/// parameters, then architecture and dtype.
fn top_line<'a>(app: &App, sep: &str, width: usize) -> Line<'a> {
    let theme = app.theme();
    let badge = Span::styled(
        format!(" {} ", phase_label(app.phase)),
        theme.badge(app.phase),
    );
    let workload = app.workload.as_ref().map(|w| {
        format!(
            " {} prompt {}{sep}out {}{sep}{}",
            app.glyphs.sep,
            w.prompt_tokens,
            w.output_tokens,
            w.load_text()
        )
    });
    let Some(run) = &app.run.info else {
        return Line::from(vec![
            badge,
            Span::raw(" "),
            Span::styled("infertop: loading the model", theme.title),
        ]);
    };
    let m = &run.model;
    let threads = if run.threads > 0 {
        format!(" ({} threads)", run.threads)
    } else {
        String::new()
    };
    // A mixture of experts runs only part of its weights per token: show both.
    let params = if m.is_sparse() {
        format!(
            "{} active/{}",
            format::si(m.active() as f64),
            format::si(m.params as f64)
        )
    } else {
        format::si(m.params as f64)
    };
    let details = [
        format!(
            " {}{sep}{params} params{sep}{}{sep}{}{threads}",
            m.arch, m.dtype, m.device
        ),
        format!(
            " {}{sep}{params} params{sep}{}{sep}{}",
            m.arch, m.dtype, m.device
        ),
        format!(" {} {}{sep}{}", m.arch, m.dtype, m.device),
        format!(" {}", m.device),
    ];
    let fixed = badge.width()
        + 1
        + m.name.chars().count()
        + workload.as_ref().map_or(0, |w| w.chars().count());
    let details = details
        .iter()
        .find(|d| fixed + d.chars().count() <= width)
        .unwrap_or(&details[details.len() - 1])
        .clone();
    let mut spans = vec![
        badge,
        Span::raw(" "),
        Span::styled(m.name.clone(), theme.title),
        Span::styled(details, theme.text),
    ];
    if let Some(w) = workload {
        spans.push(Span::styled(w, theme.text));
    }
    Line::from(spans)
}

fn status_line<'a>(app: &App, sep: &str) -> Line<'a> {
    let theme = app.theme();
    let mut spans = vec![
        Span::styled(" elapsed ", theme.dim),
        Span::styled(format::elapsed(app.elapsed()), theme.text),
        Span::styled(sep.to_string(), theme.dim),
        Span::styled(app.run.requests_done.to_string(), theme.text),
        Span::styled(" requests", theme.dim),
    ];
    let warmup = app.run.stats.warmup_requests();
    if warmup > 0 {
        spans.push(Span::styled(format!(" ({warmup} warmup)"), theme.dim));
    }
    if let Some(rate) = app.decode_tok_s {
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled("decode ", theme.dim));
        spans.push(Span::styled(format::si(rate), theme.text));
        spans.push(Span::styled(" tok/s", theme.dim));
    }
    let server = app
        .run
        .info
        .as_ref()
        .is_some_and(|i| i.model.source == "http");
    if server {
        // A server run has many requests at once: how many, how many failed, and whether the
        // client keeps its schedule (send delay).
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled(app.run.in_flight().to_string(), theme.text));
        spans.push(Span::styled(" in flight", theme.dim));
        if app.run.failed_requests > 0 {
            spans.push(Span::styled(sep.to_string(), theme.dim));
            spans.push(Span::styled(
                format!(
                    "{} error{} ({:.1}%)",
                    app.run.failed_requests,
                    if app.run.failed_requests == 1 {
                        ""
                    } else {
                        "s"
                    },
                    100.0 * app.run.error_rate()
                ),
                theme.text,
            ));
        }
        if let Some(d) = app.run.send_delay_p99_s {
            spans.push(Span::styled(sep.to_string(), theme.dim));
            spans.push(Span::styled("send delay p99 ", theme.dim));
            spans.push(Span::styled(
                format::duration(d, app.glyphs.ascii),
                theme.text,
            ));
        }
        // The server's own view (`--server-metrics`), beside the client's.
        if let Some(w) = &app.run.server.last {
            let mut part = |label: &str, value: String| {
                spans.push(Span::styled(sep.to_string(), theme.dim));
                spans.push(Span::styled(format!("server {label} "), theme.dim));
                spans.push(Span::styled(value, theme.text));
            };
            if let (Some(r), Some(q)) = (w.running, w.waiting) {
                part("running/waiting", format!("{r:.0}/{q:.0}"));
            }
            if let Some(kv) = w.kv_usage {
                part("KV", format!("{:.0}%", kv * 100.0));
            }
            if let Some(t) = w.ttft_s {
                part("TTFT p50", format::duration(t.p50, app.glyphs.ascii));
            }
        }
    } else if let Some(c) = &app.current {
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled(c.progress(app.elapsed()), theme.dim));
    }
    if let Some(reason) = &app.run.stop {
        spans.push(Span::styled(sep.to_string(), theme.dim));
        spans.push(Span::styled(
            format!("stopped: {}", stop_text(reason)),
            theme.text,
        ));
    }
    Line::from(spans)
}
