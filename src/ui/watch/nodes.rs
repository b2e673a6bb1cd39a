//! The node table: a row for the total, one per node (a data-parallel server's engines as
//! sub-rows under it), the selected row marked `>`. Each row is its last window's figures and
//! its exporters' GPUs: a slow node's p99 ends in `!` (over `SLOW_FACTOR` times the nodes'
//! median), a node that cannot be read says so across its row.
//!
//! ```text
//! ┌Nodes · 4 · 3 up─────────────────────────────────────────────────────────────┐
//! │  node              req/s  run wait  kv%    TTFT   p99    E2E p99  err  GPU  │
//! │> total              48.2   20    3  45%   120ms   198ms    1.98s    0  78%  │
//! │  gpu01:8000         12.1    5    0  44%   118ms   190ms    1.90s    0  80%  │
//! │  gpu03:8000         down: connection refused (3 failed, last good 0:12)     │
//! └─────────────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::state::{NodeView, SlowFlags, WatchState};
use crate::event::{NodeTelemetry, ServerQuantiles, ServerWindow};
use crate::util::format;

/// From this width the table has its wide columns.
pub const WIDE: u16 = 140;

/// What one line of the table is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    Total,
    Node(usize),
    /// A node's data-parallel engine (its label).
    Engine(usize, String),
}

/// The table's lines in order, with the selection index of each selectable one; a node's
/// engines under it when `engines` (else only under the selected node).
pub fn lines(s: &WatchState, engines: bool) -> Vec<(Row, Option<usize>)> {
    let mut out = Vec::new();
    let several = s.nodes.len() > 1;
    if several {
        out.push((Row::Total, Some(0)));
    }
    for (i, n) in s.nodes.iter().enumerate() {
        let sel = if several { i + 1 } else { 0 };
        out.push((Row::Node(i), Some(sel)));
        if !n.down() && (engines || sel == s.selected) {
            if let Some(w) = &n.series.last {
                for e in w.engines.keys() {
                    out.push((Row::Engine(i, e.clone()), None));
                }
            }
        }
    }
    out
}

/// A column: heading and width; its cell comes from `cells`.
struct Column {
    heading: &'static str,
    width: usize,
}

const NARROW: &[Column] = &[
    Column {
        heading: "req/s",
        width: 6,
    },
    Column {
        heading: "run",
        width: 4,
    },
    Column {
        heading: "wait",
        width: 4,
    },
    Column {
        heading: "kv%",
        width: 4,
    },
    Column {
        heading: "TTFT",
        width: 7,
    },
    Column {
        heading: "p99",
        width: 8,
    },
    Column {
        heading: "E2E p99",
        width: 8,
    },
    Column {
        heading: "err",
        width: 4,
    },
    Column {
        heading: "GPU",
        width: 5,
    },
];

const WIDE_EXTRA: &[Column] = &[
    Column {
        heading: "ITL",
        width: 7,
    },
    Column {
        heading: "queue p99",
        width: 9,
    },
    Column {
        heading: "out tok/s",
        width: 9,
    },
    Column {
        heading: "spec",
        width: 5,
    },
    Column {
        heading: "VRAM",
        width: 5,
    },
    Column {
        heading: "power",
        width: 6,
    },
    Column {
        heading: "temp",
        width: 5,
    },
    Column {
        heading: "cpu",
        width: 4,
    },
];

/// One cell: its text, and whether it stands out (a slow p99, errors).
type Cell = (String, bool);

fn dur(s: &WatchState, q: Option<ServerQuantiles>, pick: fn(&ServerQuantiles) -> f64) -> String {
    q.map_or("-".into(), |q| {
        format::duration(pick(&q), s.face.glyphs.ascii)
    })
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

/// Errors in the window: HTTP 5xx responses and requests that finished in error, where the
/// server counts them.
pub fn errors(w: &ServerWindow) -> Option<f64> {
    let s = &w.signals;
    let http = s
        .http
        .iter()
        .filter(|(k, _)| k.starts_with('5'))
        .map(|(_, v)| v)
        .sum::<f64>();
    let failed = s.finished.get("error").copied().unwrap_or(0.0);
    (!s.http.is_empty() || !s.finished.is_empty()).then_some(http + failed)
}

/// GPUs of these nodes: mean utilisation, memory used as a share, power, hottest.
pub struct GpuSum {
    pub gpus: usize,
    pub util_pct: Option<f64>,
    pub mem_share: Option<f64>,
    pub power_w: Option<f64>,
    pub max_temp_c: Option<f64>,
    pub cpu_pct: Option<f64>,
}

pub fn gpu_sum<'a>(telemetry: impl Iterator<Item = &'a NodeTelemetry>) -> GpuSum {
    let (mut gpus, mut util, mut util_n, mut used, mut total, mut power) =
        (0, 0.0, 0, 0.0, 0.0, None);
    let (mut temp, mut cpu, mut cpu_n) = (None::<f64>, 0.0, 0);
    for t in telemetry {
        for g in &t.gpus {
            gpus += 1;
            if let Some(u) = g.util_pct {
                util += u;
                util_n += 1;
            }
            if let (Some(u), Some(t)) = (g.mem_used_bytes, g.mem_total_bytes) {
                used += u;
                total += t;
            }
            if let Some(w) = g.power_w {
                power = Some(power.unwrap_or(0.0) + w);
            }
            if let Some(c) = g.temperature_c {
                temp = Some(temp.map_or(c, |t| t.max(c)));
            }
        }
        if let Some(c) = t.host.cpu_pct {
            cpu += c;
            cpu_n += 1;
        }
    }
    GpuSum {
        gpus,
        util_pct: (util_n > 0).then(|| util / f64::from(util_n)),
        mem_share: (total > 0.0).then(|| used / total),
        power_w: power,
        max_temp_c: temp,
        cpu_pct: (cpu_n > 0).then(|| cpu / f64::from(cpu_n)),
    }
}

fn cells(
    s: &WatchState,
    w: Option<&ServerWindow>,
    gpu: Option<&GpuSum>,
    slow: SlowFlags,
    wide: bool,
) -> Vec<Cell> {
    let plain = |t: String| (t, false);
    let flagged = |t: String, f: bool| {
        if f && t != "-" {
            (format!("{t}!"), true)
        } else {
            (t, false)
        }
    };
    let errs = w.and_then(errors);
    let mut out = vec![
        plain(opt(w.and_then(|w| w.requests_per_s), format::si)),
        plain(opt(w.and_then(|w| w.running), format::si)),
        plain(opt(w.and_then(|w| w.waiting), format::si)),
        plain(opt(w.and_then(|w| w.kv_usage), |v| {
            format!("{:.0}%", v * 100.0)
        })),
        plain(dur(s, w.and_then(|w| w.ttft_s), |q| q.p50)),
        flagged(dur(s, w.and_then(|w| w.ttft_s), |q| q.p99), slow.ttft),
        flagged(dur(s, w.and_then(|w| w.e2e_s), |q| q.p99), slow.e2e),
        (opt(errs, format::si), errs.is_some_and(|e| e > 0.0)),
        plain(opt(gpu.and_then(|g| g.util_pct), |v| format!("{v:.0}%"))),
    ];
    if wide {
        out.extend([
            plain(dur(s, w.and_then(|w| w.itl_s), |q| q.p50)),
            flagged(
                dur(s, w.and_then(|w| w.signals.queue_s), |q| q.p99),
                slow.queue,
            ),
            plain(opt(
                w.and_then(|w| w.signals.generation_tokens_per_s),
                format::si,
            )),
            plain(opt(w.and_then(|w| w.signals.spec_accept_rate()), |v| {
                format!("{:.0}%", v * 100.0)
            })),
            plain(opt(gpu.and_then(|g| g.mem_share), |v| {
                format!("{:.0}%", v * 100.0)
            })),
            plain(opt(gpu.and_then(|g| g.power_w), |v| format!("{v:.0}W"))),
            plain(opt(gpu.and_then(|g| g.max_temp_c), |v| format!("{v:.0}C"))),
            plain(opt(gpu.and_then(|g| g.cpu_pct), |v| format!("{v:.0}%"))),
        ]);
    }
    out
}

fn columns(wide: bool) -> impl Iterator<Item = &'static Column> {
    let extra: &[Column] = if wide { WIDE_EXTRA } else { &[] };
    NARROW.iter().chain(extra)
}

/// The name column's width.
fn name_width(wide: bool) -> usize {
    if wide {
        24
    } else {
        16
    }
}

/// `name` in `width` cells: cut at the start (node names differ at the end: gpu01, gpu02).
fn fit(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width {
        return format!("{name:<width$}");
    }
    let tail: String = name.chars().skip(n + 1 - width).collect();
    format!("~{tail}")
}

pub fn render(frame: &mut Frame, s: &WatchState, rect: Rect) {
    let theme = s.theme();
    let wide = rect.width >= WIDE;
    // Every node's engines where they fit, else only the selected node's.
    let lines_room = usize::from(rect.height.saturating_sub(3));
    let mut all = lines(s, true);
    if all.len() > lines_room {
        all = lines(s, false);
    }
    let up = s
        .nodes
        .iter()
        .filter(|n| !n.down() && n.series.last.is_some())
        .count();
    let servers = s
        .nodes
        .iter()
        .filter(|n| n.series.last.is_some() || n.down())
        .count();
    let sep = s.face.glyphs.sep;
    let title = if s.nodes.len() > 1 {
        format!("Nodes {sep} {} {sep} {up} of {servers} up", s.nodes.len())
    } else {
        format!(
            "Node {sep} {}",
            s.nodes.first().map_or("", |n| n.name.as_str())
        )
    };
    let block = crate::ui::render::bordered(theme, &s.face.glyphs, title);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let nw = name_width(wide);
    let mut heading = format!("  {:<nw$}", "node");
    for c in columns(wide) {
        heading.push_str(&format!(" {:>w$}", c.heading, w = c.width));
    }
    let mut out = vec![Line::styled(heading, theme.table_header)];
    // Scroll so that the selected row stays in view; the last line says how many more.
    let room = if all.len() > lines_room {
        lines_room.saturating_sub(1)
    } else {
        lines_room
    };
    let mut at = all
        .iter()
        .position(|(_, sel)| *sel == Some(s.selected))
        .unwrap_or(0);
    // The selected node's engines come into view with it.
    while matches!(all.get(at + 1), Some((Row::Engine(..), _))) {
        at += 1;
    }
    let offset = (at + 1).saturating_sub(room);
    for (row, sel) in all.iter().skip(offset).take(room) {
        let selected = *sel == Some(s.selected);
        let marker = if selected { "> " } else { "  " };
        let name_style = if selected { theme.key } else { theme.title };
        let mut spans = vec![Span::styled(marker, theme.key)];
        match row {
            Row::Total => {
                let gpu = gpu_sum(s.nodes.iter().filter_map(|n| n.telemetry.as_ref()));
                spans.push(Span::styled(fit("total", nw), name_style));
                push_cells(
                    &mut spans,
                    s,
                    cells(
                        s,
                        s.total.last.as_ref(),
                        Some(&gpu),
                        SlowFlags::default(),
                        wide,
                    ),
                    wide,
                );
            }
            Row::Node(i) => {
                let n = &s.nodes[*i];
                spans.push(Span::styled(fit(&n.name, nw), name_style));
                match down_text(s, n) {
                    Some(text) => spans.push(Span::styled(format!(" {text}"), theme.event_warn)),
                    None => {
                        let gpu = n.telemetry.as_ref().map(|t| gpu_sum(std::iter::once(t)));
                        let mut c = cells(s, n.series.last.as_ref(), gpu.as_ref(), n.slow, wide);
                        if n.exporter_failing.is_some() {
                            if let Some(g) = c.get_mut(8) {
                                *g = ("!".into(), true);
                            }
                        }
                        push_cells(&mut spans, s, c, wide);
                    }
                }
            }
            Row::Engine(i, e) => {
                let w = s.nodes[*i]
                    .series
                    .last
                    .as_ref()
                    .and_then(|w| w.engines.get(e));
                let branch = if s.face.glyphs.ascii { "`-" } else { "└" };
                spans.push(Span::styled(
                    fit(&format!(" {branch} engine {e}"), nw),
                    theme.dim,
                ));
                let mut c = cells(s, w, None, SlowFlags::default(), wide);
                // An engine's GPU figures are its node's.
                if let Some(g) = c.get_mut(8) {
                    *g = (String::new(), false);
                }
                push_cells(&mut spans, s, c, wide);
            }
        }
        out.push(Line::from(spans));
    }
    if all.len() > room {
        let (above, below) = (offset, all.len().saturating_sub(offset + room));
        let text = match (above, below) {
            (0, b) => format!("  ... {b} more (down)"),
            (a, 0) => format!("  ... {a} more (up)"),
            (a, b) => format!("  ... {a} more up, {b} down"),
        };
        out.push(Line::styled(text, theme.dim));
    }
    frame.render_widget(Paragraph::new(out), inner);
}

fn push_cells(spans: &mut Vec<Span<'static>>, s: &WatchState, cells: Vec<Cell>, wide: bool) {
    let theme = s.theme();
    for ((text, stands_out), col) in cells.into_iter().zip(columns(wide)) {
        let style: Style = if stands_out {
            theme.slo_fail
        } else {
            theme.text
        };
        spans.push(Span::styled(format!(" {text:>w$}", w = col.width), style));
    }
}

/// `down: connection refused (3 failed, last good 0:12)` for a node whose page fails now.
fn down_text(s: &WatchState, n: &NodeView) -> Option<String> {
    let (count, message) = n.status.failing.as_ref()?;
    let last = n.status.last_ok_s.map_or("never read".to_string(), |t| {
        format!(
            "last good {}",
            format::elapsed(std::time::Duration::from_secs_f64(t.max(0.0)))
        )
    });
    let _ = s;
    Some(format!(
        "down: {} ({count} failed, {last})",
        reason(message)
    ))
}

/// A failure's reason without the URL the row already names: `connection refused`,
/// `HTTP 503`, `line 12: ...`.
fn reason(message: &str) -> &str {
    if !message.starts_with("http") {
        return message;
    }
    match message.find(" (") {
        Some(i) if message.ends_with(')') && !message[..i].contains(": ") => {
            &message[i + 2..message.len() - 1]
        }
        _ => match message.find("/metrics: ") {
            Some(i) => &message[i + "/metrics: ".len()..],
            None => message,
        },
    }
}
