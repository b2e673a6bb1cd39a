//! `infertop report RUN.jsonl --plot OUT.svg`: TTFT and TPOT per request (warmup shaded, the
//! detected settling point, steady p50/p99 lines) and the steady-state latency CDFs, as one
//! self-contained SVG. Written by hand: a few shapes, no fonts embedded, no timestamps, so the same
//! record always gives the same bytes.
//!
//! ```text
//! ┌ title: model, device, workload, n ─────────────────────────────┐
//! │ TTFT per request  (warmup shaded, settled marker, p50/p99)     │
//! │ TPOT per request                                               │
//! │ CDF TTFT      │ CDF TPOT      │ CDF ITL (or E2E)               │
//! └────────────────────────────────────────────────────────────────┘
//! ```

use std::fmt::Write as _;

use super::Settling;
use crate::record::reader::Record;
use crate::stats::{Metric, Summary};

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 900.0;
/// Above this many requests, per-request panels draw a min/max envelope per bucket.
const MAX_POINTS: usize = 2000;

const CSS: &str = "
text { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; fill: #111827; }
.title { font-size: 17px; font-weight: bold; }
.sub { font-size: 12px; fill: #4b5563; }
.ptitle { font-size: 13px; font-weight: bold; }
.tick { font-size: 10px; fill: #4b5563; }
.label { font-size: 11px; fill: #374151; }
.note { font-size: 10px; paint-order: stroke; stroke: #ffffff; stroke-width: 3px; stroke-linejoin: round; }
.frame { fill: #ffffff; stroke: #9ca3af; stroke-width: 1; }
.grid { stroke: #e5e7eb; stroke-width: 1; }
.warm { fill: #e5e7eb; }
.settle { stroke: #6b7280; stroke-width: 1.2; stroke-dasharray: 5 3; }
.p50 { stroke: #16a34a; stroke-width: 1.3; stroke-dasharray: 6 3; }
.p99 { stroke: #dc2626; stroke-width: 1.3; stroke-dasharray: 2 2; }
.series { fill: none; stroke-width: 1.2; }
";

/// Colours of the three series.
const TTFT_COLOR: &str = "#2563eb";
const TPOT_COLOR: &str = "#ea580c";
const THIRD_COLOR: &str = "#7c3aed";

/// A tiny SVG writer: shapes append to one string, numbers with one decimal.
struct Svg {
    out: String,
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Svg {
    fn new(w: f64, h: f64) -> Svg {
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n<style>{CSS}</style>\n<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#f9fafb\"/>\n"
        );
        Svg { out }
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, class: &str) {
        let _ = writeln!(
            self.out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" class=\"{class}\"/>",
            w.max(0.0),
            h.max(0.0)
        );
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = writeln!(
            self.out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" class=\"{class}\"/>"
        );
    }

    fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, content: &str) {
        let _ = writeln!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" class=\"{class}\">{}</text>",
            esc(content)
        );
    }

    fn colored_text(
        &mut self,
        x: f64,
        y: f64,
        anchor: &str,
        class: &str,
        color: &str,
        content: &str,
    ) {
        let _ = writeln!(
            self.out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" class=\"{class}\" style=\"fill:{color}\">{}</text>",
            esc(content)
        );
    }

    fn polyline(&mut self, points: &[(f64, f64)], color: &str) {
        if points.is_empty() {
            return;
        }
        let mut d = String::with_capacity(points.len() * 12);
        for (i, (x, y)) in points.iter().enumerate() {
            let _ = write!(d, "{}{x:.1},{y:.1}", if i == 0 { "" } else { " " });
        }
        let _ = writeln!(
            self.out,
            "<polyline points=\"{d}\" class=\"series\" style=\"stroke:{color}\"/>"
        );
    }

    fn circle(&mut self, x: f64, y: f64, r: f64, color: &str) {
        let _ = writeln!(
            self.out,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" style=\"fill:{color}\"/>"
        );
    }

    fn triangle_up(&mut self, x: f64, y: f64, color: &str) {
        let _ = writeln!(
            self.out,
            "<path d=\"M{:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z\" style=\"fill:{color}\"/>",
            x,
            y,
            x - 4.0,
            y + 7.0,
            x + 4.0,
            y + 7.0
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// A linear map from data to pixels.
#[derive(Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    px_lo: f64,
    px_hi: f64,
}

impl Scale {
    fn map(&self, v: f64) -> f64 {
        let span = if self.hi > self.lo {
            self.hi - self.lo
        } else {
            1.0
        };
        self.px_lo + (v - self.lo) / span * (self.px_hi - self.px_lo)
    }
}

/// About `target` round ticks (1, 2, 5 × 10^k) covering `lo..=hi`.
fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * 0.8)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut ticks = Vec::new();
    let mut i = 0;
    loop {
        let t = first + step * i as f64;
        if t > hi + step * 1e-9 || i > 100 {
            break;
        }
        // Snap -0.0 and float dust to the step grid.
        ticks.push(((t / step).round() * step * 1e9).round() / 1e9 + 0.0);
        i += 1;
    }
    ticks
}

/// A tick label with just enough decimals for the step between ticks.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// One request's value for a panel.
struct Point {
    index: u64,
    value_ms: f64,
    warmup: bool,
}

struct Frame {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

fn draw_axes(
    svg: &mut Svg,
    f: &Frame,
    xs: &Scale,
    ys: &Scale,
    x_label: &str,
    y_label: &str,
    y_pct: bool,
) {
    let yt = nice_ticks(ys.lo, ys.hi, 5);
    let ystep = if yt.len() > 1 { yt[1] - yt[0] } else { 1.0 };
    for &t in &yt {
        let y = ys.map(t);
        svg.line(f.x, y, f.x + f.w, y, "grid");
        let label = if y_pct {
            format!("{:.0}%", t * 100.0)
        } else {
            tick_label(t, ystep)
        };
        svg.text(f.x - 5.0, y + 3.5, "end", "tick", &label);
    }
    let xt = nice_ticks(xs.lo, xs.hi, 6);
    let xstep = if xt.len() > 1 { xt[1] - xt[0] } else { 1.0 };
    for &t in &xt {
        let x = xs.map(t);
        svg.line(x, f.y + f.h, x, f.y + f.h + 4.0, "frame");
        svg.text(x, f.y + f.h + 15.0, "middle", "tick", &tick_label(t, xstep));
    }
    svg.text(
        f.x + f.w / 2.0,
        f.y + f.h + 30.0,
        "middle",
        "label",
        x_label,
    );
    let _ = writeln!(
        svg.out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"label\" transform=\"rotate(-90 {:.1} {:.1})\">{}</text>",
        f.x - 45.0,
        f.y + f.h / 2.0,
        f.x - 45.0,
        f.y + f.h / 2.0,
        esc(y_label)
    );
}

/// TTFT or TPOT per request.
#[allow(clippy::too_many_arguments)]
fn per_request_panel(
    svg: &mut Svg,
    f: &Frame,
    title: &str,
    color: &str,
    points: &[Point],
    steady: &Summary,
    settled_at: Option<u64>,
) {
    svg.text(f.x, f.y - 8.0, "start", "ptitle", title);
    svg.rect(f.x, f.y, f.w, f.h, "frame");
    if points.is_empty() {
        svg.text(
            f.x + f.w / 2.0,
            f.y + f.h / 2.0,
            "middle",
            "label",
            "no data",
        );
        return;
    }
    let first = points[0].index as f64;
    let last = points[points.len() - 1].index as f64;
    let xs = Scale {
        lo: first - 0.5,
        hi: last + 0.5,
        px_lo: f.x,
        px_hi: f.x + f.w,
    };
    // The y range covers steady values; warmup spikes beyond 3 × the steady p99 are clipped to
    // the top edge and marked, so one slow first request does not flatten the rest.
    let steady_max = points
        .iter()
        .filter(|p| !p.warmup)
        .map(|p| p.value_ms)
        .fold(0.0, f64::max);
    let all_max = points.iter().map(|p| p.value_ms).fold(0.0, f64::max);
    let cap = if steady.n > 0 {
        (3.0 * steady.p99 * 1e3).max(steady_max)
    } else {
        all_max
    };
    let top = all_max.min(cap).max(steady_max) * 1.08;
    let top = if top > 0.0 { top } else { 1.0 };
    let ys = Scale {
        lo: 0.0,
        hi: top,
        px_lo: f.y + f.h,
        px_hi: f.y,
    };
    // Warmup shading: runs of consecutive warmup requests.
    let mut run_start: Option<u64> = None;
    let mut prev = 0u64;
    let shade = |svg: &mut Svg, a: u64, b: u64| {
        let x0 = xs.map(a as f64 - 0.5);
        let x1 = xs.map(b as f64 + 0.5);
        svg.rect(x0, f.y, x1 - x0, f.h, "warm");
        svg.text((x0 + x1) / 2.0, f.y + 12.0, "middle", "note", "warmup");
    };
    for p in points {
        match (p.warmup, run_start) {
            (true, None) => run_start = Some(p.index),
            (false, Some(s)) => {
                shade(svg, s, prev);
                run_start = None;
            }
            _ => {}
        }
        prev = p.index;
    }
    if let Some(s) = run_start {
        shade(svg, s, prev);
    }
    draw_axes(
        svg,
        f,
        &xs,
        &ys,
        "request index",
        &format!("{title} (ms)"),
        false,
    );
    if let Some(s) = settled_at.filter(|&s| s > points[0].index) {
        let x = xs.map(s as f64 - 0.5);
        svg.line(x, f.y, x, f.y + f.h, "settle");
        svg.text(
            x + 3.0,
            f.y + 24.0,
            "start",
            "note",
            &format!("settled at #{s}"),
        );
    }
    // The series (an envelope of per-bucket min/max beyond MAX_POINTS).
    let clip = |v: f64| v.min(top);
    let pts: Vec<(f64, f64)> = if points.len() <= MAX_POINTS {
        points
            .iter()
            .map(|p| (xs.map(p.index as f64), ys.map(clip(p.value_ms))))
            .collect()
    } else {
        let per = points.len().div_ceil(MAX_POINTS / 2);
        points
            .chunks(per)
            .flat_map(|c| {
                let lo = c.iter().map(|p| p.value_ms).fold(f64::INFINITY, f64::min);
                let hi = c.iter().map(|p| p.value_ms).fold(0.0, f64::max);
                let x = xs.map(c[c.len() / 2].index as f64);
                [(x, ys.map(clip(lo))), (x, ys.map(clip(hi)))]
            })
            .collect()
    };
    svg.polyline(&pts, color);
    if points.len() <= 300 {
        for p in points {
            if p.value_ms <= top {
                svg.circle(xs.map(p.index as f64), ys.map(p.value_ms), 2.2, color);
            }
        }
    }
    let clipped: Vec<&Point> = points.iter().filter(|p| p.value_ms > top).collect();
    for p in &clipped {
        svg.triangle_up(xs.map(p.index as f64), f.y + 2.0, color);
    }
    if let Some(p) = clipped
        .iter()
        .max_by(|a, b| a.value_ms.total_cmp(&b.value_ms))
    {
        svg.colored_text(
            xs.map(p.index as f64) + 7.0,
            f.y + 36.0,
            "start",
            "note",
            color,
            &format!("▲ off scale: up to {:.3} ms", p.value_ms),
        );
    }
    if steady.n > 0 {
        for (v, class, name) in [(steady.p50, "p50", "p50"), (steady.p99, "p99", "p99")] {
            let y = ys.map(v * 1e3);
            svg.line(f.x, y, f.x + f.w, y, class);
            let color = if class == "p50" { "#16a34a" } else { "#dc2626" };
            svg.colored_text(
                f.x + f.w - 4.0,
                y - 3.0,
                "end",
                "note",
                color,
                &format!("steady {name} {:.3} ms", v * 1e3),
            );
        }
    }
}

/// The empirical CDF of steady samples (seconds in, ms on the axis).
fn cdf_panel(svg: &mut Svg, f: &Frame, title: &str, color: &str, samples_s: &[f64]) {
    let mut v: Vec<f64> = samples_s
        .iter()
        .filter(|x| x.is_finite())
        .map(|x| x * 1e3)
        .collect();
    v.sort_by(f64::total_cmp);
    svg.text(
        f.x,
        f.y - 8.0,
        "start",
        "ptitle",
        &format!("{title} CDF (steady, n = {})", v.len()),
    );
    svg.rect(f.x, f.y, f.w, f.h, "frame");
    if v.is_empty() {
        svg.text(
            f.x + f.w / 2.0,
            f.y + f.h / 2.0,
            "middle",
            "label",
            "no data",
        );
        return;
    }
    let (min, true_max) = (v[0], v[v.len() - 1]);
    let s = Summary::of(samples_s);
    // A long tail (one 1 s stall among 3 ms steps) would squash the body: the axis ends at
    // 2 × p99 and the maximum is written out instead.
    let max = true_max.min(2.0 * s.p99 * 1e3).max(min);
    let pad = ((max - min) * 0.05).max(max * 0.01).max(1e-6);
    let xs = Scale {
        lo: (min - pad).max(0.0),
        hi: max + pad,
        px_lo: f.x,
        px_hi: f.x + f.w,
    };
    let ys = Scale {
        lo: 0.0,
        hi: 1.0,
        px_lo: f.y + f.h,
        px_hi: f.y,
    };
    draw_axes(
        svg,
        f,
        &xs,
        &ys,
        &format!("{title} (ms)"),
        "share of requests",
        true,
    );
    // A step function: 0 before the first sample, (i + 1)/n from sample i on.
    let n = v.len() as f64;
    let step = v.len().div_ceil(2 * MAX_POINTS).max(1);
    let mut pts = vec![(xs.map(xs.lo), ys.map(0.0)), (xs.map(v[0]), ys.map(0.0))];
    for (i, &x) in v.iter().enumerate() {
        if i % step != 0 && i + 1 != v.len() {
            continue;
        }
        let before = i as f64 / n;
        pts.push((xs.map(x), ys.map(before)));
        pts.push((xs.map(x), ys.map((i + 1) as f64 / n)));
    }
    pts.push((xs.map(xs.hi), ys.map(1.0)));
    let pts: Vec<(f64, f64)> = pts
        .into_iter()
        .map(|(x, y)| (x.min(f.x + f.w), y))
        .collect();
    svg.polyline(&pts, color);
    if true_max > max {
        svg.colored_text(
            f.x + f.w - 4.0,
            f.y + f.h - 8.0,
            "end",
            "note",
            color,
            &format!("max {true_max:.3} ms (off scale)"),
        );
    }
    for (q, val, class, c) in [
        (0.5, s.p50, "p50", "#16a34a"),
        (0.99, s.p99, "p99", "#dc2626"),
    ] {
        let x = xs.map(val * 1e3);
        svg.line(x, f.y, x, f.y + f.h, class);
        let label = format!("p{} {:.3}", (q * 100.0) as u32, val * 1e3);
        let right = x > f.x + f.w * 0.6;
        let y = if class == "p50" {
            f.y + 14.0
        } else {
            f.y + 28.0
        };
        svg.colored_text(
            if right { x - 3.0 } else { x + 3.0 },
            y,
            if right { "end" } else { "start" },
            "note",
            c,
            &label,
        );
    }
}

/// The SVG for a record.
pub fn plot_svg(rec: &Record, settling: &Settling) -> String {
    let reqs = rec.counted();
    let summary = rec.summary();
    let mut svg = Svg::new(WIDTH, HEIGHT);
    // Title.
    let model = rec.model.as_ref();
    let name = model
        .map(|m| m.name.clone())
        .or_else(|| rec.config_str("model"))
        .unwrap_or_else(|| "?".into());
    let device = rec.config_str("device").unwrap_or_else(|| "?".into());
    let dtype = model
        .map(|m| m.dtype.clone())
        .or_else(|| rec.config_str("dtype"))
        .unwrap_or_default();
    svg.text(
        20.0,
        28.0,
        "start",
        "title",
        &format!("{name} on {device} ({dtype})"),
    );
    let file = rec
        .path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    svg.text(
        20.0,
        46.0,
        "start",
        "sub",
        &format!(
            "prompt {} tok · output {} tok · batch {} · {} requests ({} warmup) · {}",
            rec.config_str("prompt_tokens")
                .unwrap_or_else(|| "?".into()),
            rec.config_str("output_tokens")
                .unwrap_or_else(|| "?".into()),
            rec.config_str("batch").unwrap_or_else(|| "?".into()),
            summary.requests,
            summary.warmup_requests,
            file
        ),
    );
    let settled = match settling.settled_at {
        Some(i) => format!("settled at request #{i} ({})", settling.rule),
        None => format!("not settled ({})", settling.rule),
    };
    svg.text(
        WIDTH - 20.0,
        28.0,
        "end",
        "sub",
        &format!("infertop {}", env!("CARGO_PKG_VERSION")),
    );
    svg.text(20.0, 62.0, "start", "sub", &settled);

    let left = 80.0;
    let w = WIDTH - left - 30.0;
    let ttft: Vec<Point> = reqs
        .iter()
        .map(|r| Point {
            index: r.index,
            value_ms: r.ttft_s * 1e3,
            warmup: r.warmup,
        })
        .collect();
    let tpot: Vec<Point> = reqs
        .iter()
        .filter_map(|r| {
            r.tpot_s.map(|t| Point {
                index: r.index,
                value_ms: t * 1e3,
                warmup: r.warmup,
            })
        })
        .collect();
    per_request_panel(
        &mut svg,
        &Frame {
            x: left,
            y: 100.0,
            w,
            h: 200.0,
        },
        "TTFT",
        TTFT_COLOR,
        &ttft,
        &summary.steady.get(Metric::Ttft),
        settling.settled_at,
    );
    per_request_panel(
        &mut svg,
        &Frame {
            x: left,
            y: 370.0,
            w,
            h: 200.0,
        },
        "TPOT",
        TPOT_COLOR,
        &tpot,
        &summary.steady.get(Metric::Tpot),
        settling.settled_at,
    );
    // CDFs of steady samples.
    let steady: Vec<_> = rec.steady().collect();
    let ttft_s: Vec<f64> = steady.iter().map(|r| r.ttft_s).collect();
    let tpot_s: Vec<f64> = steady.iter().filter_map(|r| r.tpot_s).collect();
    let warm: std::collections::HashSet<u64> =
        reqs.iter().filter(|r| r.warmup).map(|r| r.index).collect();
    let itl_s: Vec<f64> = rec
        .counted_steps()
        .iter()
        .filter(|s| !warm.contains(&s.index))
        .map(|s| s.itl_s)
        .collect();
    let (third_name, third) = if itl_s.is_empty() {
        ("E2E", steady.iter().map(|r| r.e2e_s).collect::<Vec<f64>>())
    } else {
        ("ITL", itl_s)
    };
    let gap = 70.0;
    let cw = (WIDTH - left - 30.0 - 2.0 * gap) / 3.0;
    let cy = 650.0;
    let ch = 190.0;
    cdf_panel(
        &mut svg,
        &Frame {
            x: left,
            y: cy,
            w: cw,
            h: ch,
        },
        "TTFT",
        TTFT_COLOR,
        &ttft_s,
    );
    cdf_panel(
        &mut svg,
        &Frame {
            x: left + cw + gap,
            y: cy,
            w: cw,
            h: ch,
        },
        "TPOT",
        TPOT_COLOR,
        &tpot_s,
    );
    cdf_panel(
        &mut svg,
        &Frame {
            x: left + 2.0 * (cw + gap),
            y: cy,
            w: cw,
            h: ch,
        },
        third_name,
        THIRD_COLOR,
        &third,
    );
    svg.text(
        20.0,
        HEIGHT - 12.0,
        "start",
        "sub",
        "Times in ms. Shaded: requests marked warmup (--warmup). Green/red dashes: steady p50/p99 (numpy linear). Grey dashes: settling point.",
    );
    svg.finish()
}

/// Colours of a sweep's curves, one per workload (cycled).
const CURVE_COLORS: [&str; 6] = [
    TTFT_COLOR,
    TPOT_COLOR,
    THIRD_COLOR,
    "#16a34a",
    "#dc2626",
    "#0891b2",
];

/// Latency (ms) against load, one line per workload.
fn sweep_load_panel(
    svg: &mut Svg,
    f: &Frame,
    title: &str,
    curves: &[(String, Vec<(f64, f64)>)],
    load_name: &str,
) {
    svg.text(f.x, f.y - 8.0, "start", "ptitle", title);
    svg.rect(f.x, f.y, f.w, f.h, "frame");
    let all = curves.iter().flat_map(|(_, p)| p.iter());
    let (mut x_hi, mut y_hi) = (1.0f64, 0.0f64);
    for &(x, y) in all {
        x_hi = x_hi.max(x);
        y_hi = y_hi.max(y);
    }
    let xs = Scale {
        lo: 0.0,
        hi: x_hi * 1.05,
        px_lo: f.x,
        px_hi: f.x + f.w,
    };
    let ys = Scale {
        lo: 0.0,
        hi: (y_hi * 1.1).max(1e-6),
        px_lo: f.y + f.h,
        px_hi: f.y,
    };
    draw_axes(svg, f, &xs, &ys, load_name, "p50 (ms)", false);
    for (i, (name, pts)) in curves.iter().enumerate() {
        let color = CURVE_COLORS[i % CURVE_COLORS.len()];
        let px: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (xs.map(x), ys.map(y))).collect();
        svg.polyline(&px, color);
        for &(x, y) in &px {
            svg.circle(x, y, 3.0, color);
        }
        svg.colored_text(
            f.x + 8.0,
            f.y + 14.0 + 13.0 * i as f64,
            "start",
            "note",
            color,
            name,
        );
    }
}

/// The cells on the front: none has both more throughput and less latency.
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = points.to_vec();
    // Highest throughput first; the front keeps each point faster than all before it.
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.total_cmp(&b.1)));
    let mut front = Vec::new();
    let mut best = f64::INFINITY;
    for p in sorted {
        if p.1 < best {
            best = p.1;
            front.push(p);
        }
    }
    front.reverse();
    front
}

/// Throughput against latency p50 and p99 over every cell, with the Pareto front of each.
fn sweep_pareto_panel(svg: &mut Svg, f: &Frame, plot: &SweepPlot, latency: &SweepLatency) {
    let label = latency.label.as_str();
    svg.text(
        f.x,
        f.y - 8.0,
        "start",
        "ptitle",
        &format!("Throughput vs {label} p50 and p99 (lines: Pareto front)"),
    );
    svg.rect(f.x, f.y, f.w, f.h, "frame");
    let series = [
        ("p50", "#16a34a", &latency.p50),
        ("p99", "#dc2626", &latency.p99),
    ];
    let (mut x_hi, mut y_hi) = (1e-6f64, 1e-6f64);
    for (_, _, pts) in &series {
        for &(x, y) in pts.iter() {
            x_hi = x_hi.max(x);
            y_hi = y_hi.max(y);
        }
    }
    let xs = Scale {
        lo: 0.0,
        hi: x_hi * 1.05,
        px_lo: f.x,
        px_hi: f.x + f.w,
    };
    let ys = Scale {
        lo: 0.0,
        hi: y_hi * 1.1,
        px_lo: f.y + f.h,
        px_hi: f.y,
    };
    draw_axes(
        svg,
        f,
        &xs,
        &ys,
        &plot.throughput_name,
        &format!("{label} (ms)"),
        false,
    );
    for (i, (name, color, pts)) in series.iter().enumerate() {
        for &(x, y) in pts.iter() {
            svg.circle(xs.map(x), ys.map(y), 3.0, color);
        }
        let front: Vec<(f64, f64)> = pareto_front(pts)
            .iter()
            .map(|&(x, y)| (xs.map(x), ys.map(y)))
            .collect();
        svg.polyline(&front, color);
        svg.colored_text(
            f.x + 8.0,
            f.y + 14.0 + 13.0 * i as f64,
            "start",
            "note",
            color,
            &format!("{label} {name}"),
        );
    }
}

/// What a sweep's plot shows, prepared by the sweep: curves of p50 latency against the load per
/// workload, and (throughput, latency) points per measured cell.
#[derive(Clone, Debug, Default)]
pub struct SweepPlot {
    /// The load axis: `batch`, `concurrency` or `rate`.
    pub load_name: String,
    /// `decode tok/s` (candle) or `output tok/s` (servers).
    pub throughput_name: String,
    pub cells: usize,
    pub measured: usize,
    /// (workload, (load, p50 ms) points in load order), one curve per workload.
    pub tpot_curves: Vec<(String, Vec<(f64, f64)>)>,
    pub ttft_curves: Vec<(String, Vec<(f64, f64)>)>,
    pub tpot: SweepLatency,
    pub ttft: SweepLatency,
}

/// (throughput, latency ms) points of every measured cell, at p50 and at p99.
#[derive(Clone, Debug, Default)]
pub struct SweepLatency {
    pub label: String,
    pub p50: Vec<(f64, f64)>,
    pub p99: Vec<(f64, f64)>,
}

/// The SVG for a sweep: TPOT and TTFT against the load per workload, and throughput against
/// latency (the Pareto front). Cells that failed are left out.
pub fn sweep_plot_svg(plot: &SweepPlot) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.text(
        20.0,
        28.0,
        "start",
        "title",
        &format!("Sweep: latency against {}", plot.load_name),
    );
    svg.text(
        20.0,
        46.0,
        "start",
        "sub",
        &format!(
            "{} of {} cells measured; p50 over each cell's steady requests",
            plot.measured, plot.cells
        ),
    );
    let (w, h) = ((WIDTH - 140.0) / 2.0, 300.0);
    let left = Frame {
        x: 70.0,
        y: 90.0,
        w,
        h,
    };
    let right = Frame {
        x: 70.0 + w + 60.0,
        y: 90.0,
        w,
        h,
    };
    sweep_load_panel(
        &mut svg,
        &left,
        "TPOT against load",
        &plot.tpot_curves,
        &plot.load_name,
    );
    sweep_load_panel(
        &mut svg,
        &right,
        "TTFT against load",
        &plot.ttft_curves,
        &plot.load_name,
    );
    let bottom_left = Frame {
        x: 70.0,
        y: 480.0,
        w,
        h: 340.0,
    };
    let bottom_right = Frame {
        x: 70.0 + w + 60.0,
        y: 480.0,
        w,
        h: 340.0,
    };
    sweep_pareto_panel(&mut svg, &bottom_left, plot, &plot.tpot);
    sweep_pareto_panel(&mut svg, &bottom_right, plot, &plot.ttft);
    svg.finish()
}

/// Writes the plot: SVG as is, or PNG (by extension) through `rsvg-convert` if installed.
pub fn write_plot(out: &std::path::Path, svg: &str) -> Result<(), String> {
    let png = out
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        return std::fs::write(out, svg)
            .map_err(|e| format!("--plot {}: cannot write ({e})", out.display()));
    }
    let svg_path = out.with_extension("svg");
    std::fs::write(&svg_path, svg)
        .map_err(|e| format!("--plot {}: cannot write ({e})", svg_path.display()))?;
    let status = std::process::Command::new("rsvg-convert")
        .arg("-o")
        .arg(out)
        .arg(&svg_path)
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!(
            "--plot {}: rsvg-convert failed ({s}); the SVG is at {}",
            out.display(),
            svg_path.display()
        )),
        Err(_) => Err(format!(
            "--plot {}: PNG needs rsvg-convert (Debian: apt install librsvg2-bin); wrote the SVG to {} instead",
            out.display(),
            svg_path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_are_round() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(nice_ticks(0.0, 0.9, 4), vec![0.0, 0.2, 0.4, 0.6, 0.8]);
        assert_eq!(
            nice_ticks(-0.5, 11.5, 6),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(tick_label(0.2, 0.2), "0.2");
        assert_eq!(tick_label(12.0, 2.0), "12");
        assert_eq!(tick_label(0.05, 0.05), "0.05");
        let t = nice_ticks(-0.5, 3.5, 4);
        assert_eq!(tick_label(t[0], 1.0), "0", "no negative zero");
    }

    #[test]
    fn the_pareto_front_keeps_undominated_cells() {
        let pts = [
            (100.0, 5.0),
            (200.0, 6.0),
            (150.0, 9.0),
            (300.0, 20.0),
            (250.0, 25.0),
        ];
        assert_eq!(
            pareto_front(&pts),
            vec![(100.0, 5.0), (200.0, 6.0), (300.0, 20.0)]
        );
        assert!(pareto_front(&[]).is_empty());
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
