//! The percentile table: mean, p50, p90, p95, p99, max and n for every metric over the chosen
//! window. Cells above an SLO limit are drawn in the `slo_fail` style and end in `!`, which
//! still shows without colour. With a baseline (`--baseline`), the columns become the live p50
//! and p99 beside the baseline's and their relative change. The HTTP phases (`h`) and the
//! TTFT split (`f`) take the table's place when asked for, with a baseline too: the key is the
//! person's own choice, and the same key brings the baseline's columns back.

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

use super::panel;
use super::panel::Panel;
use crate::event::ServerQuantiles;
use crate::stats::step_parts::{labels, PhaseParts};
use crate::stats::{Metric, Part, Phase, SplitSummary, StepPartsSummary, Summary};
use crate::ui::keys::Action;
use crate::ui::state::App;
use crate::ui::views::{ServerColumns, TableView};
use crate::util::format;

const HEADINGS: [&str; 8] = ["", "mean", "p50", "p90", "p95", "p99", "max", "n"];
const BASELINE_HEADINGS: [&str; 8] = [
    "", "p50", "base p50", "dp50", "p99", "base p99", "dp99", "n",
];
const SERVER_HEADINGS: [&str; 8] = [
    "", "p50", "srv p50", "gap", "p99", "srv p99", "gap", "n/srv",
];

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    match (
        app.table_view,
        &app.views.phases,
        &app.views.split,
        &app.views.spec,
    ) {
        (TableView::Phases, Some(phases), _, _) => return render_phases(frame, app, rect, phases),
        (TableView::Split, _, Some(split), _) => return render_split(frame, app, rect, split),
        (TableView::Drafts, _, _, Some(spec)) => return render_spec(frame, app, rect, spec),
        _ => {}
    }
    if let (TableView::Parts, Some(parts)) = (app.table_view, &app.views.parts) {
        return render_parts(frame, app, rect, parts);
    }
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let title = format!(
        "Percentiles {} {}",
        app.face.glyphs.sep,
        app.window.label(app.include_warmup)
    );
    let mut block = panel(app, title);
    if let Some(slo) = slo_text(app) {
        block = block.title(Line::styled(slo, theme.dim).right_aligned());
    }
    if let Some(g) = app.figures.goodput {
        // Goodput by GuideLLM's rules: failures are misses, requests cut off are not counted.
        let share = g
            .share()
            .map_or("-".into(), |s| format!("{:.1}%", s * 100.0));
        let style = if g.share().is_some_and(|s| s < 1.0) {
            theme.slo_fail
        } else {
            theme.dim
        };
        block = block.title_bottom(
            Line::styled(format!("goodput {share} of {}", g.requests()), style).right_aligned(),
        );
    }
    let only_warmup = !app.include_warmup
        && app.views.table.get(Metric::Ttft).n == 0
        && app.figures.warmup_requests > 0;
    if only_warmup {
        if let Some(key) = app.face.keys.short_label(Action::ToggleWarmup) {
            block = block.title_bottom(Line::styled(
                format!("only warmup requests so far: {key} includes them"),
                theme.dim,
            ));
        }
    }
    if let Some(base) = &app.baseline {
        block = block.title_bottom(Line::styled(format!("baseline: {}", base.name), theme.dim));
    }
    let server = app.server_columns != ServerColumns::Client
        && app.baseline.is_none()
        && app.run.server.last.is_some();
    if server && app.server_columns == ServerColumns::PerServer && app.run.server.nodes.len() > 1 {
        server_nodes(frame, app, block, rect);
        return;
    }
    if server {
        block = block.title_bottom(Line::styled(server_note(app), theme.dim));
    }
    let headings = if app.baseline.is_some() {
        &BASELINE_HEADINGS
    } else if server {
        &SERVER_HEADINGS
    } else {
        &HEADINGS
    };
    let header = Row::new(
        headings
            .iter()
            .map(|h| Cell::from(Line::from(*h).right_aligned())),
    )
    .style(theme.table_header);
    let rows = app.views.table.rows.iter().map(|(metric, s)| {
        let limit = app.slo_limit(*metric);
        let mut cells = vec![Cell::from(Span::styled(metric.label(), theme.text))];
        if let Some(base) = &app.baseline {
            baseline_cells(&mut cells, app, *metric, s, &base.table.get(*metric));
            return Row::new(cells);
        }
        if server {
            server_cells(&mut cells, app, *metric, s);
            return Row::new(cells);
        }
        // The column of the limit's percentile (mean, p50, p90, p95, p99, max).
        let limited = limit.map(|l| match l.percentile {
            50 => 1,
            90 => 2,
            95 => 3,
            _ => 4,
        });
        for (column, v) in values(s).into_iter().enumerate() {
            let text = if s.n == 0 {
                "-".to_string()
            } else if metric.is_latency() {
                format::duration(v, ascii)
            } else {
                format::si(v)
            };
            let crossed =
                s.n > 0 && limited == Some(column) && limit.is_some_and(|l| v > l.limit_s);
            let (text, style) = if crossed {
                (format!("{text}!"), theme.slo_fail)
            } else {
                (format!("{text} "), theme.text)
            };
            cells.push(Cell::from(Line::styled(text, style).right_aligned()));
        }
        cells.push(Cell::from(
            Line::styled(format!("{} ", s.n), theme.dim).right_aligned(),
        ));
        Row::new(cells)
    });
    let mut widths = vec![Constraint::Length(13)];
    widths.extend([Constraint::Fill(1); 6]);
    if server {
        // Both counts must show whole: the column is as wide as the widest.
        let widest = app
            .views
            .table
            .rows
            .iter()
            .map(|(m, s)| server_n(s, server_quantiles(app, *m)).chars().count())
            .max()
            .unwrap_or(1);
        widths.push(Constraint::Length(
            widest.max(SERVER_HEADINGS[7].len()) as u16
        ));
    } else {
        widths.push(Constraint::Fill(1));
    }
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(table, inner);
}

/// Live p50, baseline p50, change, live p99, baseline p99, change, n.
fn baseline_cells(
    cells: &mut Vec<Cell>,
    app: &App,
    metric: Metric,
    live: &Summary,
    base: &Summary,
) {
    let theme = app.theme();
    let fmt = |v: f64, n: usize| {
        if n == 0 {
            "-".to_string()
        } else if metric.is_latency() {
            format::duration(v, app.face.glyphs.ascii)
        } else {
            format::si(v)
        }
    };
    for (now, old) in [(live.p50, base.p50), (live.p99, base.p99)] {
        cells.push(Cell::from(
            Line::styled(format!("{} ", fmt(now, live.n)), theme.text).right_aligned(),
        ));
        cells.push(Cell::from(
            Line::styled(format!("{} ", fmt(old, base.n)), theme.dim).right_aligned(),
        ));
        let delta = if live.n > 0 && base.n > 0 && old > 0.0 {
            format!("{:+.1}% ", (now / old - 1.0) * 100.0)
        } else {
            "- ".to_string()
        };
        cells.push(Cell::from(Line::styled(delta, theme.text).right_aligned()));
    }
    cells.push(Cell::from(
        Line::styled(format!("{} ", live.n), theme.dim).right_aligned(),
    ));
}

/// The server's figure for a table row: its own histogram over the steady state, for the
/// metrics a server measures (TTFT, ITL, E2E).
fn server_quantiles(app: &App, metric: Metric) -> Option<ServerQuantiles> {
    let span = app.run.server.summary.as_ref()?;
    match metric {
        Metric::Ttft => span.ttft_s,
        Metric::Itl => span.itl_s,
        Metric::E2e => span.e2e_s,
        _ => None,
    }
}

/// Client p50, server p50, client − server, the same at p99, and both n: the gap is the
/// network plus whatever queueing the server's own timers do not see.
fn server_cells(cells: &mut Vec<Cell>, app: &App, metric: Metric, live: &Summary) {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let fmt = |v: Option<f64>| match v {
        Some(v) if metric.is_latency() => format::duration(v, ascii),
        Some(v) => format::si(v),
        None => "-".to_string(),
    };
    let client = |v: f64| (live.n > 0).then_some(v);
    let srv = server_quantiles(app, metric);
    for (now, theirs) in [
        (client(live.p50), srv.map(|q| q.p50)),
        (client(live.p99), srv.map(|q| q.p99)),
    ] {
        cells.push(Cell::from(
            Line::styled(format!("{} ", fmt(now)), theme.text).right_aligned(),
        ));
        cells.push(Cell::from(
            Line::styled(format!("{} ", fmt(theirs)), theme.dim).right_aligned(),
        ));
        let gap = match (now, theirs) {
            (Some(a), Some(b)) => {
                let sign = if a >= b { "+" } else { "-" };
                format!("{sign}{} ", format::duration((a - b).abs(), ascii))
            }
            _ => "- ".to_string(),
        };
        cells.push(Cell::from(Line::styled(gap, theme.text).right_aligned()));
    }
    cells.push(Cell::from(
        Line::styled(server_n(live, srv), theme.dim).right_aligned(),
    ));
}

/// `client n/server n`, or the client's alone for a row the server does not measure.
fn server_n(live: &Summary, srv: Option<ServerQuantiles>) -> String {
    match srv {
        Some(q) => format!("{}/{} ", live.n, q.n),
        None => format!("{} ", live.n),
    }
}

/// `server vllm · 12 s after warmup · prefix hits 80% · 3 preemptions`, the bottom title of
/// the table in client-vs-server mode.
fn server_note(app: &App) -> String {
    let sep = app.face.glyphs.sep;
    let mut parts = Vec::new();
    if let Some(w) = &app.run.server.last {
        match w.sources {
            0 | 1 => parts.push(format!("server {}", w.server)),
            n => parts.push(format!("{n} servers ({})", w.server)),
        }
    }
    match &app.run.server.summary {
        Some(span) => parts.push(format!("{:.0} s after warmup", span.seconds)),
        None => parts.push("waiting for a window after warmup".into()),
    }
    if let Some(h) = app.run.server.last.as_ref().and_then(|w| w.prefix_hit_rate) {
        parts.push(format!("prefix hits {:.0}%", h * 100.0));
    }
    if let Some(span) = &app.run.server.summary {
        if span.preemptions > 0 {
            let s = if span.preemptions == 1 { "" } else { "s" };
            parts.push(format!("{} preemption{s}", span.preemptions));
        }
    }
    parts.join(&format!(" {sep} "))
}

const NODE_HEADINGS: [&str; 8] = [
    "server", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "E2E p50", "E2E p99", "n",
];

/// A row per server (`--server-metrics` with several): its own TTFT, ITL and E2E over the
/// steady state, slowest TTFT p99 first, so that a slow server shows at once; a p99 over 1.5
/// times the servers' median ends in `!` (both decided in state, once per window).
fn server_nodes(frame: &mut Frame, app: &App, block: Panel, rect: Rect) {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let server = &app.run.server;
    let header = Row::new(
        NODE_HEADINGS
            .iter()
            .map(|h| Cell::from(Line::from(*h).right_aligned())),
    )
    .style(theme.table_header);
    let shown = usize::from(rect.height.saturating_sub(3));
    let rows = server.slowest_first.iter().take(shown).filter_map(|&i| {
        let n = server.nodes.get(i)?;
        let s = n.summary.as_ref();
        let c = n.source.chars().count();
        let name: String = n.source.chars().skip(c.saturating_sub(13)).collect();
        let mut cells = vec![Cell::from(Span::styled(name, theme.text))];
        let picks: [Option<ServerQuantiles>; 3] = [
            s.and_then(|s| s.ttft_s),
            s.and_then(|s| s.itl_s),
            s.and_then(|s| s.e2e_s),
        ];
        for (k, q) in picks.into_iter().enumerate() {
            for (v, slow) in [(q.map(|q| q.p50), false), (q.map(|q| q.p99), n.slow[k])] {
                let (text, style) = match v {
                    Some(v) if slow => (format!("{}!", format::duration(v, ascii)), theme.slo_fail),
                    Some(v) => (format!("{} ", format::duration(v, ascii)), theme.text),
                    None => ("- ".to_string(), theme.dim),
                };
                cells.push(Cell::from(Line::styled(text, style).right_aligned()));
            }
        }
        let count = picks[0].or(picks[2]).map_or(0, |q| q.n);
        cells.push(Cell::from(
            Line::styled(format!("{count} "), theme.dim).right_aligned(),
        ));
        Some(Row::new(cells))
    });
    let sep = app.face.glyphs.sep;
    let note = format!(
        "{} servers {sep} slowest TTFT p99 first {sep} their own histograms after warmup",
        server.nodes.len()
    );
    let mut widths = vec![Constraint::Length(13)];
    widths.extend([Constraint::Fill(1); 7]);
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    let block = block.title_bottom(Line::styled(note, theme.dim));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(table, inner);
}

fn values(s: &Summary) -> [f64; 6] {
    [s.mean, s.p50, s.p90, s.p95, s.p99, s.max]
}

/// `SLO ttft:p95≤200ms tpot≤50ms`, or `None` without an SLO.
fn slo_text(app: &App) -> Option<String> {
    let ascii = app.face.glyphs.ascii;
    (!app.slo.is_empty()).then(|| {
        format!(
            "SLO {}",
            app.slo
                .words(app.face.glyphs.le, |l| format::duration(l, ascii))
        )
    })
}

/// The phases the table keeps when it cannot show them all, most telling first.
const PHASE_PRIORITY: [Phase; 9] = [
    Phase::TtftNew,
    Phase::TtftKept,
    Phase::FirstByte,
    Phase::FirstByteToToken,
    Phase::Ttst,
    Phase::Tcp,
    Phase::Dns,
    Phase::Tls,
    Phase::Sent,
];

/// `h`: a server run's HTTP phases (steady requests since the last reset) in the table's
/// columns, rows without samples left out (TLS over http, DNS for an IP address); when the
/// panel is short, the least telling rows go (`PHASE_PRIORITY`).
fn render_phases(frame: &mut Frame, app: &App, rect: Rect, phases: &crate::stats::PhaseSummary) {
    let theme = app.theme();
    let sep = app.face.glyphs.sep;
    let c = phases.connections;
    let block = panel(
        app,
        format!(
            "HTTP phases {sep} steady {sep} {} new, {} kept, {} preopened",
            c.new, c.reused, c.preopened
        ),
    );
    let header = Row::new(
        HEADINGS
            .iter()
            .map(|h| Cell::from(Line::from(*h).right_aligned())),
    )
    .style(theme.table_header);
    let room = usize::from(rect.height.saturating_sub(3));
    let shown: Vec<Phase> = PHASE_PRIORITY
        .iter()
        .copied()
        .filter(|p| phases.get(*p).n > 0)
        .take(room)
        .collect();
    let rows = phases
        .rows
        .iter()
        .filter(|(p, _)| shown.contains(p))
        .map(|(phase, s)| {
            let mut cells = vec![Cell::from(Span::styled(phase.label(), theme.text))];
            for v in values(s) {
                cells.push(Cell::from(
                    Line::styled(
                        format!("{} ", format::duration(v, app.face.glyphs.ascii)),
                        theme.text,
                    )
                    .right_aligned(),
                ));
            }
            cells.push(Cell::from(
                Line::styled(format!("{} ", s.n), theme.dim).right_aligned(),
            ));
            Row::new(cells)
        });
    let mut widths = vec![Constraint::Length(13)];
    widths.extend([Constraint::Fill(1); 7]);
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(table, inner);
}

const SPLIT_HEADINGS: [&str; 8] = ["", "p50", "p90", "p99", "max", "n", "of p50", "/req"];

/// `f`: where the TTFT went by the server's own timings (steady requests since the last
/// reset): the TTFT, its queue, prefill and network+client, the server's decode beside them;
/// each part's share of the TTFT's median and its rise per request in flight, the part that
/// grows with the load in the title, and the last request's TTFT as a bar of its parts.
fn render_split(frame: &mut Frame, app: &App, rect: Rect, split: &SplitSummary) {
    let theme = app.theme();
    let sep = app.face.glyphs.sep;
    let ascii = app.face.glyphs.ascii;
    let grows = split
        .grows
        .map_or("no part fitted to the load yet".to_string(), |p| {
            format!("grows with load: {}", p.label())
        });
    let mut block = panel(
        app,
        format!(
            "Where the TTFT went {sep} {} {sep} {} steady {sep} {grows}",
            split.source, split.requests
        ),
    );
    if let Some(last) = &app.run.split.last {
        block = block.title_bottom(last_split_line(app, last));
    }
    let header = Row::new(
        SPLIT_HEADINGS
            .iter()
            .map(|h| Cell::from(Line::from(*h).right_aligned())),
    )
    .style(theme.table_header);
    let dur = |v: f64| format!("{} ", format::duration(v, ascii));
    let mut rows = Vec::new();
    let mut row = |label: &str, s: Summary, share: String, slope: String, style| {
        let mut cells = vec![Cell::from(Span::styled(label.to_string(), style))];
        if s.n == 0 {
            for _ in 0..4 {
                cells.push(Cell::from(Line::styled("- ", theme.dim).right_aligned()));
            }
        } else {
            for v in [s.p50, s.p90, s.p99, s.max] {
                cells.push(Cell::from(Line::styled(dur(v), theme.text).right_aligned()));
            }
        }
        cells.push(Cell::from(
            Line::styled(format!("{} ", s.n), theme.dim).right_aligned(),
        ));
        cells.push(Cell::from(Line::styled(share, theme.dim).right_aligned()));
        cells.push(Cell::from(Line::styled(slope, theme.dim).right_aligned()));
        rows.push(Row::new(cells));
    };
    row("TTFT", split.ttft, String::new(), String::new(), theme.text);
    for p in Part::ALL {
        let share = match p {
            Part::Decode => String::new(),
            _ => split
                .share(p)
                .map_or(String::new(), |x| format!("{:.0}% ", 100.0 * x)),
        };
        let slope = split
            .slope_s_per_request
            .iter()
            .find(|(q, _)| *q == p)
            .and_then(|(_, s)| *s)
            .map_or(String::new(), |s| {
                let ms = s * 1e3;
                if ms.abs() < 0.05 {
                    "0ms ".to_string()
                } else {
                    format!("{ms:+.1}ms ")
                }
            });
        let style = match p {
            Part::Queue => theme.event_warn,
            Part::Prefill => theme.ttft,
            Part::Rest => theme.itl,
            Part::Decode => theme.dim,
        };
        row(p.label(), split.get(p), share, slope, style);
    }
    let mut widths = vec![Constraint::Length(14)];
    widths.extend([Constraint::Fill(1); 7]);
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(table, inner);
}

/// `f` in a run of the candle engine with `--step-parts N`: the mean steady step in parts,
/// prefill and decode side by side, each part's time and share of the step, n in the title.
fn render_parts(frame: &mut Frame, app: &App, rect: Rect, parts: &StepPartsSummary) {
    let theme = app.theme();
    let sep = app.face.glyphs.sep;
    let ascii = app.face.glyphs.ascii;
    let phases: Vec<(&str, &PhaseParts)> = parts.phases().collect();
    let counts: Vec<String> = phases
        .iter()
        .map(|(name, p)| format!("{name} n={}", p.n))
        .collect();
    let block = panel(
        app,
        format!(
            "Where a step's time goes {sep} steady means {sep} {}",
            counts.join(", ")
        ),
    );
    // With the model's parts known, a third column per phase: the part against the
    // machine's roofline ("mem 24%": memory-bound at 24 % of the peak bandwidth).
    let roofs = phases
        .iter()
        .any(|(_, p)| p.bytes.iter().any(Option::is_some));
    let per_phase = if roofs { 3 } else { 2 };
    let mut headings = vec![String::new()];
    for (name, _) in &phases {
        headings.push(name.to_string());
        headings.push("share".to_string());
        if roofs {
            headings.push("roof".to_string());
        }
    }
    let header = Row::new(
        headings
            .iter()
            .map(|h| Cell::from(Line::from(h.clone()).right_aligned())),
    )
    .style(theme.table_header);
    let cell =
        |text: String, style| Cell::from(Line::styled(format!("{text} "), style).right_aligned());
    // The step first, then the parts its model traces (a short panel keeps the top rows).
    let mut cells = vec![Cell::from(Span::styled("step", theme.ttft))];
    for (_, p) in &phases {
        cells.push(cell(format::duration(p.wall_s, ascii), theme.ttft));
        cells.extend((1..per_phase).map(|_| cell(String::new(), theme.dim)));
    }
    let mut rows = vec![Row::new(cells)];
    for (i, label) in labels().enumerate() {
        if phases.iter().all(|(_, p)| p.parts_s[i].is_none()) {
            continue;
        }
        let mut cells = vec![Cell::from(Span::styled(label.to_string(), theme.text))];
        for (_, p) in &phases {
            match p.parts_s[i] {
                Some(s) => {
                    cells.push(cell(format::duration(s, ascii), theme.text));
                    let share = if p.wall_s > 0.0 {
                        100.0 * s / p.wall_s
                    } else {
                        0.0
                    };
                    cells.push(cell(format!("{share:.0}%"), theme.dim));
                }
                None => {
                    cells.push(cell("-".into(), theme.dim));
                    cells.push(cell(String::new(), theme.dim));
                }
            }
            if roofs {
                // No trailing space: "mem 125%" (a part served from cache) fills the column
                // at 80 columns.
                let text = roof_text(p, i);
                cells.push(Cell::from(Line::styled(text, theme.dim).right_aligned()));
            }
        }
        rows.push(Row::new(cells));
    }
    let mut widths = vec![Constraint::Length(22)];
    widths.extend(std::iter::repeat_n(
        Constraint::Fill(1),
        per_phase * phases.len(),
    ));
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(table, inner);
}

/// A part's roof in a few characters: "mem 24%" or "FLOP 40%" of the peak that bounds it, the
/// bandwidth it reached where no peak was measured, empty where it has no figure.
fn roof_text(p: &PhaseParts, i: usize) -> String {
    match p.roofs[i] {
        Some(r) => {
            let what = match r.bound {
                crate::stats::roofline::Bound::Memory => "mem",
                crate::stats::roofline::Bound::Compute => "FLOP",
            };
            format!("{what} {:.0}%", 100.0 * r.of_peak)
        }
        None => match (p.bytes[i], p.parts_s[i]) {
            (Some(b), Some(s)) if s > 0.0 => format::si_unit(b / s, "B/s"),
            _ => String::new(),
        },
    }
}

const SPEC_HEADINGS: [&str; 6] = ["", "p50", "p90", "p99", "max", "n"];

/// `f` a second time, when the server drafts: its speculative decoding by its own count per
/// request (steady requests since the last reset): each request's acceptance and accepted
/// tokens per verify step, then the TPOT of each band of acceptance that has requests, so a
/// glance says whether accepted drafts made tokens faster; the token-weighted acceptance and
/// the correlation of TPOT with acceptance in the title.
fn render_spec(frame: &mut Frame, app: &App, rect: Rect, spec: &crate::stats::SpecSummary) {
    let theme = app.theme();
    let sep = app.face.glyphs.sep;
    let ascii = app.face.glyphs.ascii;
    let share = spec
        .token_acceptance()
        .map_or("nothing drafted".to_string(), |a| {
            format!("{:.0}% of {} accepted", 100.0 * a, spec.drafted)
        });
    let r = spec
        .tpot_correlation
        .map_or(String::new(), |r| format!(" {sep} TPOT r {r:+.2}"));
    let block = panel(
        app,
        format!(
            "Speculative decoding {sep} {} {sep} {} steady {sep} {share}{r}",
            spec.source, spec.requests
        ),
    );
    let header = Row::new(
        SPEC_HEADINGS
            .iter()
            .map(|h| Cell::from(Line::from(*h).right_aligned())),
    )
    .style(theme.table_header);
    let cell = |text: String, style| Cell::from(Line::styled(text, style).right_aligned());
    let mut rows = Vec::new();
    let mut push = |label: String, s: &Summary, f: &dyn Fn(f64) -> String, style| {
        let mut cells = vec![Cell::from(Span::styled(label, style))];
        for v in [s.p50, s.p90, s.p99, s.max] {
            cells.push(if s.n == 0 {
                cell("- ".into(), theme.dim)
            } else {
                cell(format!("{} ", f(v)), theme.text)
            });
        }
        cells.push(cell(format!("{} ", s.n), theme.dim));
        rows.push(Row::new(cells));
    };
    let pct = |v: f64| format!("{:.0}%", 100.0 * v);
    let num = |v: f64| format!("{v:.2}");
    let dur = |v: f64| format::duration(v, ascii);
    push("accepted".into(), &spec.acceptance, &pct, theme.tpot);
    if spec.accepted_per_step.n > 0 {
        push("acc/step".into(), &spec.accepted_per_step, &num, theme.tpot);
    }
    for b in spec.tpot_by_acceptance.iter().filter(|b| b.tpot.n > 0) {
        let band = if b.lo.is_none() {
            "undrafted"
        } else {
            &b.label
        };
        push(format!("TPOT {band}"), &b.tpot, &dur, theme.dim);
    }
    let mut widths = vec![Constraint::Length(14)];
    widths.extend([Constraint::Fill(1); 5]);
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(table, inner);
}

/// Width of the last request's bar, in cells.
const SPLIT_BAR: usize = 16;

/// `#41 194ms = ████████▒▒░ queue 150ms | prefill 40ms | net 4ms`: the last request's TTFT, its parts
/// in time order as a bar (a glyph each, so it reads without colour).
fn last_split_line(app: &App, last: &crate::stats::split::LastSplit) -> Line<'static> {
    let theme = app.theme();
    let ascii = app.face.glyphs.ascii;
    let parts = [
        (
            Part::Queue,
            last.queue_s,
            if ascii { "#" } else { "█" },
            theme.event_warn,
        ),
        (
            Part::Prefill,
            last.prefill_s,
            if ascii { "=" } else { "▒" },
            theme.ttft,
        ),
        (
            Part::Rest,
            last.rest_s,
            if ascii { "." } else { "░" },
            theme.itl,
        ),
    ];
    let total: f64 = parts
        .iter()
        .filter_map(|p| p.1)
        .sum::<f64>()
        .max(last.ttft_s);
    let mut spans = vec![Span::styled(
        format!(
            " #{} {} = ",
            last.index,
            format::duration(last.ttft_s, ascii)
        ),
        theme.dim,
    )];
    let mut words = Vec::new();
    let mut used = 0usize;
    for (i, (part, v, glyph, style)) in parts.iter().enumerate() {
        let Some(v) = v else { continue };
        let mut cells = if total > 0.0 {
            ((v / total) * SPLIT_BAR as f64).round() as usize
        } else {
            0
        };
        if i == parts.len() - 1 {
            cells = SPLIT_BAR.saturating_sub(used).min(cells.max(1));
        }
        cells = cells.min(SPLIT_BAR - used.min(SPLIT_BAR));
        used += cells;
        spans.push(Span::styled(glyph.repeat(cells), *style));
        let label = match part {
            Part::Rest => "net",
            p => p.label(),
        };
        words.push(format!("{label} {}", format::duration(*v, ascii)));
    }
    spans.push(Span::styled(format!(" {} ", words.join(" | ")), theme.dim));
    Line::from(spans)
}
