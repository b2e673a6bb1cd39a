//! The dashboard's thinking view (thinking and answering apart, tool calls) and its models view
//! (every figure per model with n), drawn on ratatui's `TestBackend` from fixed events: a
//! reasoning model's requests (40 ms to the first reasoning token, 120 ms to the first answer
//! token) spread over two adapters, one of them calling a tool.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use infertop::event::WorkloadDesc;
use infertop::event::{ClientDetail, Event, ModelInfo, OutputParts, RequestDone, RunInfo};
use infertop::ui::render::render;
use infertop::ui::state::View;
use infertop::ui::{App, AppConfig};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render(f, app)).unwrap();
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn app_with_requests() -> App {
    let mut app = App::new(AppConfig::default());
    app.tick(Duration::from_millis(100));
    app.apply(&Event::RunStarted(Box::new(RunInfo {
        model: ModelInfo::served("adapters", "http://127.0.0.1:8000"),
        workload: WorkloadDesc {
            prompt_tokens: "128".into(),
            output_tokens: "32".into(),
            batch: 1,
            load: Some("concurrency 4".into()),
        },
        warmup_requests: 0,
        threads: 0,
        traffic: None,
        peak: None,
    })));
    for i in 0..20u64 {
        let model = if i % 4 == 0 { "sql-lora" } else { "chat-lora" };
        let tool = i % 5 == 0;
        app.apply(&Event::RequestStarted {
            index: i,
            warmup: false,
            prompt_tokens: 128,
            output_tokens: 32,
            batch: 1,
        });
        app.apply(&Event::RequestDone(Box::new(RequestDone {
            index: i,
            batch: 1,
            prompt_tokens: 128,
            output_tokens: 32,
            ttft_s: 0.040,
            tpot_s: Some(0.010),
            e2e_s: 0.350,
            client: Some(Box::new(ClientDetail {
                endpoint: "http://127.0.0.1:8000".into(),
                ..Default::default()
            })),
            model: Some(model.into()),
            parts: Some(Box::new(OutputParts {
                ttfa_s: Some(0.120),
                reasoning_tokens: 8,
                reasoning_tokens_from: "usage".into(),
                reasoning_s: Some(0.080),
                tool_calls: usize::from(tool),
                ended_in_tool_call: tool,
            })),
            ..Default::default()
        })));
        app.tick(Duration::from_millis(200 + 50 * i));
    }
    app.refresh();
    app
}

#[test]
fn the_thinking_view_shows_thinking_and_answering_apart() {
    let mut app = app_with_requests();
    app.view = View::Breakdown;
    // Neither turns nor a cache outcome to split by: the view key goes on to the thinking view.
    app.view = app.next_view();
    assert_eq!(app.view, View::Thinking);
    let text = screen(&app, 100, 30);
    if std::env::var_os("SHOW").is_some() {
        println!("{text}{}", screen(&app, 80, 24));
    }
    for want in [
        "thinking & answering",
        "TTFT (any)",
        "TTFA (answer)",
        "thinking",
        "answering",
        "40.0ms",
        "120ms",
        "80.0ms",
        "230ms",
        "reasoned      20 of 20",
        "think tokens  8 · p99 8 server",
        "tool calls    4 requests",
        "ended in call 4",
    ] {
        assert!(text.contains(want), "{want:?} not on the screen:\n{text}");
    }
}

#[test]
fn the_models_view_splits_every_figure_by_model_with_n() {
    let mut app = app_with_requests();
    app.view = View::Thinking;
    app.view = app.next_view();
    assert_eq!(app.view, View::Models);
    let text = screen(&app, 100, 30);
    if std::env::var_os("SHOW").is_some() {
        println!("{text}{}", screen(&app, 80, 24));
    }
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no row of {name}:\n{text}"))
            .to_string()
    };
    assert!(text.contains("by model"), "{text}");
    let chat = row("chat-lora");
    let sql = row("sql-lora");
    assert!(chat.contains(" 15 ") && chat.contains("40.0ms"), "{chat}");
    assert!(sql.contains(" 5 ") && sql.contains("120ms"), "{sql}");
    // Without several models, the view is skipped.
    let mut plain = App::new(AppConfig::default());
    plain.view = View::Breakdown;
    assert_eq!(plain.next_view(), View::Requests);
}
