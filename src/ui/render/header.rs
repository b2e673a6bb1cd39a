//! The header: run state, model, device, workload (row 1); elapsed, requests, decode rate and
//! the statistics window (row 2). A fatal error replaces row 2, so it is never missed.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::phase_label;
use crate::event::RunPhase;
use crate::ui::state::App;
use crate::util::format;

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let sep = format!(" {} ", app.face.glyphs.sep);
    let top = top_line(app, &sep, rect.width as usize);
    let second = match (&app.run.failed, app.phase) {
        (Some(message), RunPhase::Error) => Line::from(vec![
            Span::styled(" error: ", theme.event_error),
            Span::styled(message.clone(), theme.event_error),
        ]),
        _ => status_line(app, &sep, rect.width as usize),
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
            app.face.glyphs.sep,
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
    // A served model: where it is served is all infertop knows of it.
    let served = [format!(" {}", m.device), String::new()];
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
    let details: &[String] = if m.source == crate::event::ModelSource::Http {
        &served
    } else {
        &details
    };
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

/// Elapsed, requests, decode rate, then what the run has: the request in flight (candle), or
/// requests in flight, errors, send delay and the server's own view (servers); how it stopped.
/// Each part is kept whole: one that does not fit is left out (a later, shorter one may still
/// fit), and the stop reason always has its room. The counts and rates are the held figures
/// (`App::figures`, taken with the table), so they agree with it and change at most twice a
/// second.
fn status_line<'a>(app: &App, sep: &str, width: usize) -> Line<'a> {
    let theme = app.theme();
    let (dim, text) = (theme.dim, theme.text);
    let mut first = Vec::new();
    // `--runs N`: which run, and the idle time between two, before anything else.
    if let Some((run, runs)) = app.repeat_position() {
        first.push(Span::styled(" run ", dim));
        first.push(Span::styled(format!("{run}/{runs}"), text));
        if app.phase == RunPhase::Cooldown {
            let left = app.cooldown_left_s().unwrap_or(0.0);
            first.push(Span::styled(sep.to_string(), dim));
            first.push(Span::styled("cooldown ", dim));
            first.push(Span::styled(format!("{left:.1} s"), text));
            first.push(Span::styled(" left", dim));
        }
        first.push(Span::styled(sep.trim_end().to_string(), dim));
    }
    first.extend([
        Span::styled(" elapsed ", dim),
        Span::styled(format::elapsed(app.elapsed()), text),
        Span::styled(sep.to_string(), dim),
        Span::styled(app.figures.requests_done.to_string(), text),
        Span::styled(" requests", dim),
    ]);
    let warmup = app.figures.warmup_requests;
    if warmup > 0 {
        first.push(Span::styled(format!(" ({warmup} warmup)"), dim));
    }
    let mut parts: Vec<Vec<Span<'a>>> = Vec::new();
    let mut part = |label: String, value: String, unit: &str| {
        let mut p = Vec::new();
        if !label.is_empty() {
            p.push(Span::styled(label, dim));
        }
        p.push(Span::styled(value, text));
        if !unit.is_empty() {
            p.push(Span::styled(unit.to_string(), dim));
        }
        parts.push(p);
    };
    if let Some(rate) = app.decode_tok_s {
        part("decode ".into(), format::si(rate), " tok/s");
    }
    // A dataset's progress: the row sent of how many, and a replayed trace's clock.
    if let Some(t) = app.run.info.as_ref().and_then(|i| i.traffic.as_deref()) {
        if let (Some(n), None) = (t.requests, t.conversations) {
            let sent = app.figures.started_requests.min(n);
            part("row ".into(), format!("{sent} of {n}"), "");
        }
        if let (Some(span), Some(_)) = (t.trace_span_s, t.time_scale) {
            let covered = app.figures.trace_covered_s.unwrap_or(0.0);
            part(
                "trace ".into(),
                format!(
                    "{} of {}",
                    format::elapsed(std::time::Duration::from_secs_f64(covered.max(0.0))),
                    format::elapsed(std::time::Duration::from_secs_f64(span.max(0.0)))
                ),
                "",
            );
        }
    }
    let server = app
        .run
        .info
        .as_ref()
        .is_some_and(|i| i.model.source == crate::event::ModelSource::Http);
    if server {
        // A server run has many requests at once: how many, how many failed, and whether the
        // client keeps its schedule (send delay).
        part(
            String::new(),
            app.figures.in_flight.to_string(),
            " in flight",
        );
        let failed = app.figures.failed_requests;
        if failed > 0 {
            let s = if failed == 1 { "" } else { "s" };
            part(
                String::new(),
                format!("{failed} error{s} ({:.1}%)", 100.0 * app.figures.error_rate),
                "",
            );
        }
        let cancelled = app.figures.cancelled_requests;
        if cancelled > 0 {
            part(String::new(), cancelled.to_string(), " cancelled");
        }
        // The canary lane: what a small request waits beside the load.
        if let Some(c) = app.figures.canary.as_ref().filter(|c| c.ttft.n > 0) {
            let d = |v: f64| format::duration(v, app.face.glyphs.ascii);
            let failed = if c.failed > 0 {
                format!(", {} failed", c.failed)
            } else {
                String::new()
            };
            part(
                "canary TTFT ".into(),
                d(c.ttft.p50),
                &format!(" p99 {} (n {}{failed})", d(c.ttft.p99), c.ttft.n),
            );
        }
        if let Some(d) = app.figures.send_delay_p99_s {
            part(
                "send delay p99 ".into(),
                format::duration(d, app.face.glyphs.ascii),
                "",
            );
        }
        // The server's own view (`--server-metrics`), beside the client's.
        if let Some(w) = &app.run.server.last {
            if let (Some(r), Some(q)) = (w.running, w.waiting) {
                part(
                    "server running/waiting ".into(),
                    format!("{r:.0}/{q:.0}"),
                    "",
                );
            }
            if let Some(kv) = w.kv_usage {
                part("server KV ".into(), format!("{:.0}%", kv * 100.0), "");
            }
            if let Some(t) = w.ttft_s {
                part(
                    "server TTFT p50 ".into(),
                    format::duration(t.p50, app.face.glyphs.ascii),
                    "",
                );
            }
        }
    } else if let Some(c) = &app.figures.current {
        parts.push(vec![Span::styled(c.progress(app.elapsed()), dim)]);
    }
    // A run of several ends when the last does: the others' ends are in the events pane.
    let stopped = match app.repeat_position() {
        Some(_) => app.stop_reason(),
        None => app.run.stop.clone(),
    };
    let stop = stopped.as_ref().map(|reason| {
        vec![
            Span::styled(sep.to_string(), dim),
            Span::styled(reason.words(), text),
        ]
    });
    let len = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
    let mut room = width
        .saturating_sub(len(&first))
        .saturating_sub(stop.as_deref().map_or(0, len));
    let mut spans = first;
    for p in parts {
        let need = sep.chars().count() + len(&p);
        if need <= room {
            room -= need;
            spans.push(Span::styled(sep.to_string(), dim));
            spans.extend(p);
        }
    }
    spans.extend(stop.into_iter().flatten());
    Line::from(spans)
}
