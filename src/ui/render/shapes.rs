//! The thinking view and the models view. Thinking: a request's time split where its answer
//! began (TTFT, the first token of any kind, beside TTFA, the first answer token; the
//! reasoning's time and the answer's, each a p50 bar with its p99 marked and n), and beside it
//! the reasoning tokens and the tool calls. Models: one row per model (or adapter) with n,
//! failures and every latency's p50 (and TTFT's and E2E's p99). The figures come from
//! `App::refresh` (`stats::ShapeStats`, `stats::ModelStats`).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::breakdown::rows;
use super::{hint, panel};
use crate::stats::{Metric, Summary};
use crate::ui::state::App;
use crate::util::format;

pub fn render_thinking(frame: &mut Frame, app: &App, rect: Rect) {
    let r = &app.views.reasoning;
    let [times, counts]: [Rect; 2] =
        Layout::horizontal([Constraint::Fill(3), Constraint::Fill(2)]).areas(rect);
    let time_rows: Vec<(String, Summary)> = if r.requests == 0 {
        Vec::new()
    } else {
        vec![
            ("TTFT (any)".into(), app.views.table.get(Metric::Ttft)),
            ("TTFA (answer)".into(), r.ttfa_s),
            ("thinking".into(), r.reasoning_s),
            ("answering".into(), r.answer_s),
        ]
    };
    rows(
        frame,
        app,
        times,
        "thinking & answering",
        &time_rows,
        "no reasoning or tool calls yet",
    );
    let theme = app.theme();
    let block = panel(app, "reasoning & tools");
    let inner = block.inner(counts);
    frame.render_widget(block, counts);
    if r.requests == 0 {
        frame.render_widget(Paragraph::new(hint(app, "no requests yet")), inner);
        return;
    }
    let t = &r.reasoning_tokens;
    let from = if r.reasoning_tokens_from_usage > 0 {
        "server"
    } else {
        "counted"
    };
    let line = |label: &str, value: String| {
        Line::from(vec![
            Span::styled(format!("{label:<14}"), theme.dim),
            Span::styled(value, theme.text),
        ])
    };
    let lines = vec![
        line(
            "reasoned",
            format!("{} of {}", r.reasoning_requests, r.requests),
        ),
        line(
            "think tokens",
            if t.n > 0 {
                format!("{:.0} · p99 {:.0} {from}", t.p50, t.p99)
            } else {
                "-".into()
            },
        ),
        line("tool calls", format!("{} requests", r.tool_call_requests)),
        line("ended in call", r.ended_in_tool_call.to_string()),
        line("no answer", r.no_answer.to_string()),
    ];
    frame.render_widget(Paragraph::new(lines), inner);
}

pub fn render_models(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let block = panel(
        app,
        format!("by model {} steady requests", app.face.glyphs.sep),
    );
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    if app.views.models.is_empty() {
        frame.render_widget(
            Paragraph::new(hint(
                app,
                "one model (--served-model a=3,b=1 splits by model)",
            )),
            inner,
        );
        return;
    }
    let ascii = app.face.glyphs.ascii;
    let d = |s: &Summary, v: f64| {
        if s.n == 0 {
            "-".to_string()
        } else {
            format::duration(v, ascii)
        }
    };
    let head = [
        "n", "fail", "TTFT p50", "p99", "TTFA p50", "TPOT p50", "ITL p50", "E2E p50", "p99",
    ];
    let cells: Vec<(String, [String; 9])> = app
        .views
        .models
        .iter()
        .map(|m| {
            (
                m.model.clone(),
                [
                    m.requests.to_string(),
                    m.failed.to_string(),
                    d(&m.ttft_s, m.ttft_s.p50),
                    d(&m.ttft_s, m.ttft_s.p99),
                    d(&m.ttfa_s, m.ttfa_s.p50),
                    d(&m.tpot_s, m.tpot_s.p50),
                    d(&m.itl_s, m.itl_s.p50),
                    d(&m.e2e_s, m.e2e_s.p50),
                    d(&m.e2e_s, m.e2e_s.p99),
                ],
            )
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            cells
                .iter()
                .map(|(_, c)| c[i].chars().count())
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let figures: usize = widths.iter().map(|w| w + 1).sum();
    let name_w = (inner.width as usize).saturating_sub(figures).clamp(4, 32);
    let row = |name: &str, values: &[String], style| {
        let mut name: String = name.chars().take(name_w).collect();
        name = format!("{name:<name_w$}");
        let mut spans = vec![Span::styled(name, style)];
        for (v, w) in values.iter().zip(&widths) {
            spans.push(Span::styled(format!(" {v:>w$}"), style));
        }
        Line::from(spans)
    };
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    let mut lines = vec![row("model", &head, theme.dim)];
    for (name, values) in cells.iter().take(inner.height.saturating_sub(1) as usize) {
        lines.push(row(name, values, theme.text));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
