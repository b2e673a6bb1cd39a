//! The sweep's findings (`analysis`) in words: the bullets under "What the sweep found" and a
//! search's capacity with its bracket and probes. Rendering only; every figure is computed in
//! `analysis`.

use super::analysis::{Findings, KneeWhy, SearchFinding, KNEE_GAIN, SATURATION_TTFT_RATIO};
use super::search::SearchEnd;
use super::{CellResult, LoadAxis};
use crate::stats::SloMetric;

/// `4` for a batch or concurrency, `2.5/s` for a rate.
pub fn load_text(axis: LoadAxis, load: f64) -> String {
    match axis {
        LoadAxis::Rate => format!("{load}/s"),
        _ => format!("{load}"),
    }
}

fn tput_unit(axis: LoadAxis) -> &'static str {
    match axis {
        LoadAxis::Batch => "decode tok/s",
        _ => "output tok/s",
    }
}

impl Findings {
    /// The findings in words, one bullet each.
    pub fn to_markdown(&self, cells: &[CellResult]) -> String {
        let axis = self.axis;
        let name = axis.name();
        let l = |x: f64| load_text(axis, x);
        let mut out = String::from("\n## What the sweep found\n\n");
        let slo = if self.slo.is_empty() {
            "no --slo given".to_string()
        } else {
            format!("SLO: {}", crate::report::slo_text(&self.slo))
        };
        out.push_str(&format!(
            "Knee: the {name} past which doubling it gains < {:.0} % {} or breaks the SLO ({slo}).\n\n",
            KNEE_GAIN * 100.0,
            tput_unit(axis),
        ));
        for k in &self.knees {
            let at = |load: Option<f64>, t: Option<f64>| {
                format!(
                    "{name} {}{}",
                    load.map(l).unwrap_or_else(|| "?".into()),
                    t.map(|t| format!(" ({t:.1} {})", tput_unit(axis)))
                        .unwrap_or_default()
                )
            };
            let line = match &k.why {
                KneeWhy::Saturated { next, gain } => format!(
                    "knee at {}: no larger {name} gains ≥ {:.0} % per doubling (at best {:+.1} %, at {name} {})",
                    at(k.load, k.throughput),
                    KNEE_GAIN * 100.0,
                    gain * 100.0,
                    l(*next)
                ),
                KneeWhy::SloBroken { next, metrics } => format!(
                    "knee at {}: {name} {} breaks the SLO ({})",
                    at(k.load, k.throughput),
                    l(*next),
                    metrics.join(", ")
                ),
                KneeWhy::Failed { next } => format!(
                    "knee at {}: {name} {} failed",
                    at(k.load, k.throughput),
                    l(*next)
                ),
                KneeWhy::StillScaling => format!(
                    "no knee: throughput still grows ≥ {:.0} % per doubling up to the largest {name} measured",
                    KNEE_GAIN * 100.0
                ),
                KneeWhy::NothingMeetsSlo => {
                    format!("no knee: even the smallest {name} breaks the SLO")
                }
                KneeWhy::TooFew => format!("no knee: fewer than two {name} values measured"),
            };
            out.push_str(&format!("- {}: {line}.\n", k.curve));
        }
        out.push('\n');
        if self.best.is_empty() {
            out.push_str("- Best cell: none measured meets the SLO.\n");
        }
        for b in &self.best {
            out.push_str(&format!(
                "- Best cell for {}: {name} {} (cell {}), {:.2} sequences/s {}.\n",
                b.workload,
                l(b.load),
                b.cell,
                b.goodput_seq_s,
                if self.slo.is_empty() {
                    "(no SLO: every request counts)"
                } else {
                    "meeting the SLO"
                }
            ));
        }
        for s in &self.saturation {
            let line = match s.oversaturated_at {
                Some(at) => format!(
                    "over-saturated from {name} {}: TTFT p50 {:.1}× that at {name} {} while throughput gains < {:.0} % per doubling (requests queue)",
                    l(at),
                    s.peak_ratio,
                    l(s.base_load),
                    KNEE_GAIN * 100.0
                ),
                None if s.peak_ratio > SATURATION_TTFT_RATIO => format!(
                    "TTFT rises with load ({:.1}× at {name} {}) but throughput still grows: not over-saturated yet",
                    s.peak_ratio,
                    l(s.peak_load)
                ),
                None => format!(
                    "not over-saturated: TTFT p50 stays within {:.1}× of {:.3} ms up to {name} {}",
                    s.peak_ratio.max(1.0),
                    s.base_ttft_s * 1e3,
                    l(s.peak_load)
                ),
            };
            out.push_str(&format!("- {}: {line}.\n", s.curve));
        }
        for f in &self.searches {
            out.push_str(&search_markdown(f));
        }
        for f in &self.ttft_split {
            let others: Vec<String> = f
                .parts
                .iter()
                .filter(|(p, _)| *p != f.part)
                .map(|(p, g)| format!("{} {:+.3} ms", p.label(), g * 1e3))
                .collect();
            let when = if f.breaks_slo {
                // Named by what broke: the TTFT's parts are shown even when the TTFT met its
                // limit (or had none) and another metric broke the SLO.
                let not_ttft = if f.ttft_broke {
                    ""
                } else if self.slo.get(SloMetric::Ttft).is_some() {
                    " (the TTFT within its limit)"
                } else {
                    " (the SLO sets no TTFT limit)"
                };
                format!(
                    "{} {} the SLO first at {name} {}{not_ttft}",
                    f.broken.join(" and "),
                    if f.broken.len() == 1 {
                        "breaks"
                    } else {
                        "break"
                    },
                    l(f.at_load)
                )
            } else {
                format!("up to {name} {}", l(f.at_load))
            };
            out.push_str(&format!(
                "- {}: {when}; of the TTFT the {} grew most, {:+.3} ms at p{} since {name} {} ({}; the server's own timings).\n",
                f.curve,
                f.part.label(),
                f.grew_s * 1e3,
                f.percentile,
                l(f.base_load),
                others.join(", ")
            ));
        }
        match (&self.roofline, &self.roofline_unavailable) {
            (Some(r), _) => {
                let describe = |i: usize| {
                    cells
                        .iter()
                        .find(|c| c.cell == i)
                        .map(|c| {
                            format!(
                                "batch {}, prompt {}, output {}",
                                c.params.batch, c.params.prompt_tokens, c.params.output_tokens
                            )
                        })
                        .unwrap_or_default()
                };
                let contrast = if r.lightest_cell == r.best_cell {
                    String::new()
                } else {
                    format!(
                        " ({:.1} % at {})",
                        r.lightest_utilisation * 100.0,
                        describe(r.lightest_cell)
                    )
                };
                out.push_str(&format!(
                    "- Roofline: decode reaches {:.1} % of peak memory bandwidth at {}{contrast}; weights + KV cache read per step / TPOT, median; peak: {}.\n",
                    r.best_utilisation * 100.0,
                    describe(r.best_cell),
                    r.peak.basis.join("; ")
                ));
            }
            (None, Some(why)) => out.push_str(&format!("- Roofline: not available: {why}.\n")),
            (None, None) => {}
        }
        let failed: Vec<&CellResult> = cells
            .iter()
            .filter(|c| c.status == crate::record::line::CellStatus::Failed)
            .collect();
        for c in failed {
            out.push_str(&format!(
                "- Cell {} failed: {}.\n",
                c.cell,
                c.reason.as_deref().unwrap_or("?")
            ));
        }
        out
    }
}

/// A search's finding in words: the max, its bracket and precision, the cells that decided it
/// and every probe.
fn search_markdown(f: &SearchFinding) -> String {
    let name = f.axis.name();
    let l = |x: f64| load_text(f.axis, x);
    let n = f.probes.iter().map(|p| p.n).min().unwrap_or(0);
    let probe_words: Vec<String> = f
        .probes
        .iter()
        .map(|p| {
            let goodput = match (p.goodput, p.failed) {
                (Some(g), 0) => format!(", goodput {:.1} %", g * 100.0),
                (Some(g), f) => format!(", goodput {:.1} %, {f} failed", g * 100.0),
                (None, _) => String::new(),
            };
            if p.meets_slo {
                format!("{} meets{goodput}", l(p.load))
            } else {
                format!("{} breaks ({}{goodput})", l(p.load), p.broken.join(", "))
            }
        })
        .collect();
    let broken_at = |load: f64| {
        f.probes
            .iter()
            .rev()
            .find(|p| p.load == load)
            .map(|p| p.broken.join(", "))
            .unwrap_or_default()
    };
    let cells = |c: &[usize]| {
        c.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" and ")
    };
    let what = match (f.end, f.max, f.broke_at) {
        (SearchEnd::Bracketed, Some(m), Some(b)) => format!(
            "**{}**: {name} {} meets the SLO and {} breaks it ({}); the max lies in [{}, {}), known to {} (cells {})",
            l(m),
            l(m),
            l(b),
            broken_at(b),
            l(m),
            l(b),
            match f.axis {
                LoadAxis::Rate => format!("±{:.1} %", f.resolution().unwrap_or(0.0) * 100.0),
                _ => format!("{} request{} in flight", b - m, if b - m == 1.0 { "" } else { "s" }),
            },
            cells(&f.decided_by)
        ),
        (SearchEnd::AtLeastTop, Some(m), _) => format!(
            "at least **{}**: every {name} probed met the SLO, up to the top of the range searched (cell {})",
            l(m),
            cells(&f.decided_by)
        ),
        (SearchEnd::NothingMeets, _, b) => format!(
            "none: even {name} {} breaks the SLO ({})",
            b.map(l).unwrap_or_else(|| "?".into()),
            b.map(broken_at).unwrap_or_default()
        ),
        (_, m, b) => format!(
            "unfinished: cut short with the max in [{}, {})",
            m.map(l).unwrap_or_else(|| "?".into()),
            b.map(l).unwrap_or_else(|| "?".into())
        ),
    };
    let length = match f.probe_s {
        Some(s) => format!("of at least {s:.0} s and {n} steady requests each"),
        None => format!("of at least {n} steady requests each (the p99 of {n} requests)"),
    };
    let mut out = format!(
        "- Max {name} for {}: {what}; {} probes {length}, each also judged on whether the server held its load, searched in [{}, {}] to within {:.0} %: {}.\n",
        f.workload,
        f.probes.len(),
        l(f.range.0),
        l(f.range.1),
        f.tolerance * 100.0,
        probe_words.join(", ")
    );
    if let Some(h) = &f.hold {
        let how_long = h.seconds.map_or("?".into(), |s| format!("{s:.0} s"));
        if !h.not_held.is_empty() {
            let loads: Vec<String> = h.not_held.iter().map(|&x| l(x)).collect();
            out.push_str(&format!(
                "  - Held at {name} {} first: it did **not** hold (a queue too slow for a probe to see), so the next lower load a probe met the SLO at was held.\n",
                loads.join(", then ")
            ));
        }
        out.push_str(&if h.meets_slo {
            format!(
                "  - Held at {name} {} for {how_long} ({} steady requests, cell {}): it met the SLO and the server held the load.\n",
                l(h.load),
                h.n,
                h.cell
            )
        } else {
            format!(
                "  - Held at {name} {} for {how_long} ({} steady requests, cell {}): it did **not** hold ({}).\n",
                l(h.load),
                h.n,
                h.cell,
                h.broken.join(", ")
            )
        });
    }
    out
}
