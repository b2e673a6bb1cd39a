//! The detail pane: everything the selected row's server and exporters say. Its latency
//! table (last window and the span, p50 / p90 / p99 / n of every histogram the server
//! exports), then throughput, finish reasons, HTTP status, speculative decoding and MFU, a
//! line per GPU and one for the host, and a data-parallel server's engines.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::nodes::gpu_sum;
use super::state::WatchState;
use crate::event::{NodeTelemetry, ServerQuantiles, ServerWindow};
use crate::util::format;

pub fn render(frame: &mut Frame, s: &WatchState, rect: Rect) {
    let theme = s.theme();
    let sep = s.face.glyphs.sep;
    let block = crate::ui::render::bordered(
        theme,
        &s.face.glyphs,
        format!("Detail {sep} {}", s.selected_name()),
    );
    let series = s.selected_series();
    let last = series.last.as_ref();
    let span = &series.span_window;
    let dur = |v: f64| format::duration(v, s.face.glyphs.ascii);
    let count = |v: f64| format::si(v);
    let mut lines = Vec::new();
    let group = format!("{:>7}{:>7}{:>7}{:>6}", "p50", "p90", "p99", "n");
    let span_label = if s.span_from_s > 0.0 {
        "since reset"
    } else {
        "whole watch"
    };
    lines.push(Line::styled(
        format!("{:9}{:<27} {span_label}", "", "last window"),
        theme.dim,
    ));
    lines.push(Line::styled(
        format!("{:9}{group} {group}", ""),
        theme.table_header,
    ));
    type Pick = fn(&ServerWindow) -> Option<ServerQuantiles>;
    let rows: [(&str, Pick, bool); 8] = [
        ("TTFT", |w| w.ttft_s, true),
        ("ITL", |w| w.itl_s, true),
        ("E2E", |w| w.e2e_s, true),
        ("queue", |w| w.signals.queue_s, true),
        ("prefill", |w| w.signals.prefill_s, true),
        ("decode", |w| w.signals.decode_s, true),
        ("prompt", |w| w.signals.prompt_len, false),
        ("output", |w| w.signals.generation_len, false),
    ];
    for (name, pick, is_time) in rows {
        let (now, all) = (last.and_then(pick), pick(span));
        if now.is_none() && all.is_none() {
            continue;
        }
        let cell = |q: Option<ServerQuantiles>| match q {
            Some(q) => {
                let f = |v: f64| if is_time { dur(v) } else { count(v) };
                format!(
                    "{:>7}{:>7}{:>7}{:>6}",
                    f(q.p50),
                    f(q.p90),
                    f(q.p99),
                    count(q.n as f64)
                )
            }
            None => format!("{:>7}{:>7}{:>7}{:>6}", "-", "-", "-", "0"),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{name:<9}"), theme.title),
            Span::styled(cell(now), theme.text),
            Span::styled(format!(" {}", cell(all)), theme.text),
        ]));
    }
    if let Some(w) = last {
        signals(&mut lines, s, w);
    }
    // GPUs and host: the node's, or every node's for the total.
    match s.selected_node() {
        Some(n) if s.nodes.len() == 1 || s.selected > 0 => {
            if let Some(t) = &n.telemetry {
                telemetry(&mut lines, s, t);
            }
            if let Some((k, message)) = &n.exporter_failing {
                lines.push(Line::styled(
                    format!("exporter: {k} failed ({message})"),
                    theme.event_warn,
                ));
            }
        }
        _ => {
            let g = gpu_sum(s.nodes.iter().filter_map(|n| n.telemetry.as_ref()));
            if g.gpus > 0 {
                let mut parts = vec![format!("{} GPUs", g.gpus)];
                if let Some(u) = g.util_pct {
                    parts.push(format!("util {u:.0}% mean"));
                }
                if let Some(m) = g.mem_share {
                    parts.push(format!("VRAM {:.0}% used", m * 100.0));
                }
                if let Some(p) = g.power_w {
                    parts.push(format!("{p:.0}W"));
                }
                lines.push(Line::styled(parts.join(&format!(" {sep} ")), theme.text));
            }
        }
    }
    if let Some(w) = last {
        for (e, ew) in &w.engines {
            lines.push(Line::styled(
                format!(
                    "engine {e}: run {} wait {} kv {} TTFT p99 {}",
                    ew.running.map_or("-".into(), format::si),
                    ew.waiting.map_or("-".into(), format::si),
                    ew.kv_usage
                        .map_or("-".into(), |v| format!("{:.0}%", v * 100.0)),
                    ew.ttft_s.map_or("-".into(), |q| dur(q.p99)),
                ),
                theme.dim,
            ));
        }
    }
    if last.is_none() && s.selected_node().is_none_or(|n| n.telemetry.is_none()) {
        lines.push(Line::styled("no window yet", theme.dim));
    }
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

/// Throughput, finish reasons, HTTP status, speculative decoding, MFU: each where exported.
fn signals(lines: &mut Vec<Line<'static>>, s: &WatchState, w: &ServerWindow) {
    let theme = s.theme();
    let sep = format!(" {} ", s.face.glyphs.sep);
    let sig = &w.signals;
    let mut parts = Vec::new();
    if let (Some(i), Some(o)) = (sig.prompt_tokens_per_s, sig.generation_tokens_per_s) {
        parts.push(format!("tok/s in {} out {}", format::si(i), format::si(o)));
    }
    if let Some(h) = w.prefix_hit_rate {
        parts.push(format!("prefix hit {:.0}%", h * 100.0));
    }
    let shares = |m: &std::collections::BTreeMap<String, f64>| {
        let total: f64 = m.values().sum();
        m.iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, v)| format!("{k} {:.0}%", 100.0 * v / total.max(1e-9)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if sig.finished.values().any(|v| *v > 0.0) {
        parts.push(format!("finished {}", shares(&sig.finished)));
    }
    if sig.http.values().any(|v| *v > 0.0) {
        let codes: Vec<String> = sig
            .http
            .iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, v)| format!("{k} {}", format::si(*v)))
            .collect();
        parts.push(format!("HTTP {}", codes.join(" ")));
    }
    if !parts.is_empty() {
        lines.push(Line::styled(parts.join(&sep), theme.text));
    }
    let mut parts = Vec::new();
    if let Some(r) = sig.spec_accept_rate() {
        parts.push(format!("spec accept {:.0}%", r * 100.0));
    }
    if let Some(l) = sig.spec_accept_length {
        parts.push(format!("{l:.2} tok/step"));
    }
    if let Some(f) = sig.flops_per_gpu {
        parts.push(format!("{}FLOP/s/GPU", format::si(f)));
    }
    if let Some(b) = sig.mem_bytes_per_gpu {
        parts.push(format!("{}B/s/GPU", format::si(b)));
    }
    if !parts.is_empty() {
        lines.push(Line::styled(parts.join(&sep), theme.text));
    }
}

/// A line per GPU, and the host's.
fn telemetry(lines: &mut Vec<Line<'static>>, s: &WatchState, t: &NodeTelemetry) {
    let theme = s.theme();
    let sep = format!(" {} ", s.face.glyphs.sep);
    let bytes = |v: f64| format::bytes(v.max(0.0) as u64);
    for g in &t.gpus {
        let mut parts = Vec::new();
        if let Some(u) = g.util_pct {
            parts.push(format!("util {u:.0}%"));
        }
        match (g.dram_active, g.mem_util_pct) {
            (Some(d), _) => parts.push(format!("mem bw {:.0}%", d * 100.0)),
            (None, Some(m)) => parts.push(format!("mem busy {m:.0}%")),
            _ => {}
        }
        if let (Some(u), Some(total)) = (g.mem_used_bytes, g.mem_total_bytes) {
            parts.push(format!("VRAM {}/{}", bytes(u), bytes(total)));
        }
        if let Some(p) = g.power_w {
            parts.push(format!("{p:.0}W"));
        }
        if let Some(c) = g.sm_clock_mhz {
            parts.push(format!("{c:.0}MHz"));
        }
        if let Some(c) = g.temperature_c {
            parts.push(format!("{c:.0}C"));
        }
        lines.push(Line::from(vec![
            Span::styled(format!("gpu{} ", g.gpu), theme.title),
            Span::styled(parts.join(&sep), theme.text),
        ]));
    }
    let h = &t.host;
    let mut parts = Vec::new();
    if let Some(c) = h.cpu_pct {
        parts.push(format!("cpu {c:.0}%"));
    }
    if let (Some(u), Some(total)) = (h.mem_used_bytes, h.mem_total_bytes) {
        parts.push(format!("mem {}/{}", bytes(u), bytes(total)));
    }
    if let Some(l) = h.load1 {
        parts.push(format!("load {l:.2}"));
    }
    if let (Some(rx), Some(tx)) = (h.ib_rx_bytes_per_s, h.ib_tx_bytes_per_s) {
        parts.push(format!(
            "IB rx {}B/s tx {}B/s",
            format::si(rx),
            format::si(tx)
        ));
    }
    if !parts.is_empty() {
        lines.push(Line::styled(
            format!("host {}", parts.join(&sep)),
            theme.text,
        ));
    }
}
