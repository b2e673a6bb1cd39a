//! The footer: the keys that matter now, as bound (overrides included). Items that do not fit
//! are left out from the end; quit and help come first so they always show.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::event::RunPhase;
use crate::ui::keys::Action;
use crate::ui::state::App;
use crate::ui::views::{ServerColumns, TableView};

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let live = app.worker_live() && app.run.info.is_some();
    let pause = if app.phase == RunPhase::Paused {
        "resume"
    } else {
        "pause"
    };
    let warmup = if app.include_warmup {
        "excl. warmup"
    } else {
        "incl. warmup"
    };
    let mut items: Vec<(Vec<Action>, &str)> =
        vec![(vec![Action::Quit], "quit"), (vec![Action::Help], "help")];
    if live {
        items.push((vec![Action::PauseResume], pause));
        items.push((vec![Action::ResetStats], "reset"));
    }
    if app.run.server.last.is_some() && app.baseline.is_none() {
        let what = match app.server_columns.next(app.run.server.nodes.len()) {
            ServerColumns::PerServer => "per server",
            ServerColumns::Client => "client table",
            ServerColumns::VsServer => "vs server",
        };
        items.push((vec![Action::ToggleServer], what));
    }
    // The phases and the split are offered with a baseline too (they replace its columns
    // while shown).
    if app.run.phases.has_samples() {
        let what = match app.table_view.after_phases() {
            TableView::Phases => "phases",
            _ => "latency",
        };
        items.push((vec![Action::TogglePhases], what));
    }
    if app.run.step_parts.has_samples() {
        let what = match app.table_view.after_parts() {
            TableView::Parts => "step parts",
            _ => "latency",
        };
        items.push((vec![Action::ToggleSplit], what));
    } else if app.run.split.has_samples() {
        let what = match app.table_view.after_split(app.run.spec.has_samples()) {
            TableView::Split => "TTFT split",
            TableView::Drafts => "drafts",
            _ => "latency",
        };
        items.push((vec![Action::ToggleSplit], what));
    }
    if app.run.info.is_some() {
        items.push((vec![Action::CycleView], app.next_view().label()));
        items.push((vec![Action::ToggleWarmup], warmup));
        items.push((vec![Action::CycleWindow], "window"));
    }
    if app.takes_load_keys() {
        items.push((vec![Action::OutputMore, Action::OutputLess], "output"));
        items.push((vec![Action::PromptMore, Action::PromptLess], "prompt"));
    }
    items.push((vec![Action::NextTheme], "theme"));

    let mut spans = vec![Span::raw(" ")];
    let mut used = 1usize;
    for (actions, what) in items {
        let keys: Vec<String> = actions
            .iter()
            .filter_map(|a| app.face.keys.short_label(*a))
            .collect();
        if keys.is_empty() {
            continue;
        }
        let keys = keys.join("/");
        let len = keys.chars().count() + 1 + what.len() + 2;
        if used + len > rect.width as usize {
            break;
        }
        used += len;
        spans.push(Span::styled(keys, theme.key));
        spans.push(Span::styled(format!(" {what}  "), theme.dim));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), rect);
}
