//! Memory: device memory (used/total) when NVML or CUDA report it, the allocator (current
//! against its peak) and process RSS, then GPU utilisation, power, temperature and clocks when
//! known, and, if rows are left, memory over time. Every telemetry field may be missing: a line
//! is drawn only for what is known.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::history::{self, Bar, History};
use super::panel::Panel;
use super::{gauge_line, hint, panel};
use crate::event::Sample;
use crate::ui::charts::GpuPoint;
use crate::ui::state::App;
use crate::util::format;

/// Rows the memory-over-time strip needs to be worth drawing.
const STRIP_MIN_ROWS: u16 = 3;

pub fn render(frame: &mut Frame, app: &App, rect: Rect) {
    let block = panel(app, "Memory");
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let Some(sample) = &app.telemetry else {
        frame.render_widget(Paragraph::new(hint(app, "waiting for telemetry")), inner);
        return;
    };
    let lines = lines(app, sample, inner.width);
    let text_rows = (lines.len() as u16).min(inner.height);
    frame.render_widget(
        Paragraph::new(lines),
        Rect::new(inner.x, inner.y, inner.width, text_rows),
    );
    let left = inner.height - text_rows;
    if left >= STRIP_MIN_ROWS && app.charts.memory.len() > 1 {
        let strip = Rect::new(inner.x, inner.y + text_rows, inner.width, left);
        // Only while the GPU is read: after it is lost, its last figures are not "now".
        let gpu_now = sample.gpu_util_pct.is_some()
            || sample.sm_clock_mhz.is_some()
            || sample.power_w.is_some()
            || sample.temperature_c.is_some();
        if gpu_now && app.charts.gpu.len() > 1 && strip.width >= 60 {
            // Memory, utilisation, SM clock, power and temperature side by side, each on its
            // own scale, in step with each other (one column per telemetry sample).
            let parts: [Rect; 5] = Layout::horizontal([Constraint::Fill(1); 5])
                .spacing(1)
                .areas(strip);
            render_strip(frame, app, parts[0]);
            let gpu_strips: [(&str, GpuValue); 4] = [
                ("util %", |g| g.util_pct.map(f64::from)),
                ("SM MHz", |g| g.sm_clock_mhz.map(f64::from)),
                ("power W", |g| g.power_w),
                ("temp C", |g| g.temperature_c.map(f64::from)),
            ];
            // Narrow strips: the label and the latest value, no scale.
            for (rect, (label, value)) in parts[1..].iter().zip(gpu_strips) {
                render_gpu_strip(frame, app, *rect, label, value);
            }
        } else {
            render_strip(frame, app, strip);
        }
    }
}

type GpuValue = fn(&GpuPoint) -> Option<f64>;

fn render_gpu_strip(frame: &mut Frame, app: &App, rect: Rect, label: &str, value: GpuValue) {
    let theme = app.theme();
    let width = rect.width as usize;
    let bars = app
        .charts
        .gpu
        .last_n(width)
        .map(|g| Bar {
            value: value(g),
            max: None,
            style: theme.memory,
            marker: ' ',
        })
        .collect();
    let latest = app
        .charts
        .gpu
        .last()
        .and_then(value)
        .map_or("-".to_string(), |v| format!("{v:.0}"));
    let block = Panel::borderless().title(Line::styled(format!("{label} {latest}"), theme.dim));
    let scale = |v: f64| format!("{v:.0}");
    history::render(
        frame,
        app,
        rect,
        History {
            block,
            bars,
            newest: app.charts.gpu.newest_number(),
            style: theme.memory,
            scale: &scale,
            markers: false,
            scale_title: false,
            empty: "",
        },
    );
}

/// The text lines, most important first (the panel shows as many as fit).
fn lines<'a>(app: &App, s: &Sample, width: u16) -> Vec<Line<'a>> {
    let theme = app.theme();
    let mut out = Vec::new();
    if let (Some(used), Some(total)) = (s.device_used_bytes, s.device_total_bytes) {
        out.push(gauge_line(
            app,
            "device",
            used as f64 / total.max(1) as f64,
            format!("{}/{}", format::bytes(used), format::bytes(total)),
            width,
        ));
    }
    if let Some(current) = s.alloc_bytes {
        let peak = s.alloc_peak_bytes.unwrap_or(current).max(current);
        out.push(gauge_line(
            app,
            "alloc",
            current as f64 / peak.max(1) as f64,
            format!("{}/peak {}", format::bytes(current), format::bytes(peak)),
            width,
        ));
    }
    if let Some(rss) = s.rss_bytes {
        let peak = s.rss_peak_bytes.unwrap_or(rss).max(rss);
        out.push(gauge_line(
            app,
            "rss",
            rss as f64 / peak.max(1) as f64,
            format!("{}/peak {}", format::bytes(rss), format::bytes(peak)),
            width,
        ));
    }
    let sep = format!(" {} ", app.face.glyphs.sep);
    let mut gpu = Vec::new();
    if let Some(u) = s.gpu_util_pct {
        gpu.push(format!("gpu {u}%"));
    }
    if let Some(u) = s.mem_util_pct {
        gpu.push(format!("mem {u}%"));
    }
    match (s.power_w, s.power_limit_w) {
        (Some(p), Some(l)) => gpu.push(format!("{p:.0}/{l:.0}W")),
        (Some(p), None) => gpu.push(format!("{p:.0}W")),
        _ => {}
    }
    if let Some(t) = s.temperature_c {
        gpu.push(format!("{t}C"));
    }
    if let Some(c) = s.sm_clock_mhz {
        gpu.push(format!("{c}MHz"));
    }
    if !gpu.is_empty() || !s.throttle.is_empty() {
        let mut spans = vec![Span::styled(gpu.join(&sep), theme.text)];
        if !s.throttle.is_empty() {
            if !gpu.is_empty() {
                spans.push(Span::styled(sep.clone(), theme.dim));
            }
            spans.push(Span::styled("throttle ", theme.dim));
            spans.push(Span::styled(s.throttle.join(", "), theme.event_warn));
        }
        out.push(Line::from(spans));
    }
    // Who holds memory on the GPU, most first (this process marked `*`), on one line.
    if !s.gpu_processes.is_empty() {
        let me = std::process::id();
        let procs: Vec<String> = s
            .gpu_processes
            .iter()
            .map(|p| {
                format!(
                    "{}{} {} {}",
                    if p.pid == me { "*" } else { "" },
                    p.name,
                    p.pid,
                    p.bytes.map_or("?".to_string(), format::bytes)
                )
            })
            .collect();
        out.push(Line::from(vec![
            Span::styled("procs  ", theme.dim),
            Span::styled(procs.join(&sep), theme.text),
        ]));
    }
    if s.device_used_bytes.is_none() {
        if let Some(reason) = &s.nvml_unavailable {
            out.push(hint(app, reason.clone()));
        }
    }
    if out.is_empty() {
        out.push(hint(app, "no memory figures reported"));
    }
    out
}

fn render_strip(frame: &mut Frame, app: &App, rect: Rect) {
    let theme = app.theme();
    let width = rect.width as usize;
    let bars = app
        .charts
        .memory
        .last_n(width)
        .map(|m| Bar {
            value: Some(m.bytes as f64),
            max: None,
            style: theme.memory,
            marker: ' ',
        })
        .collect();
    // A title row and no border: the strip sits inside the memory panel.
    let block = Panel::borderless().title(Line::styled("over time", theme.dim));
    let scale = |v: f64| format::bytes(v.round() as u64);
    history::render(
        frame,
        app,
        rect,
        History {
            block,
            bars,
            newest: app.charts.memory.newest_number(),
            style: theme.memory,
            scale: &scale,
            markers: false,
            scale_title: true,
            empty: "",
        },
    );
}
