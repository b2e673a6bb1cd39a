//! What a sweep finds, from its cells alone (pure functions, so tests feed known numbers):
//!
//! - **the knee** of each curve (the cells that differ only in load): the first load that no
//!   larger one beats by 10 % throughput per doubling, or the last before one that breaks the
//!   SLO at p99 or fails;
//! - **the best cell** of each workload (prompt × output): the most goodput among the cells
//!   whose p99 meets the SLO;
//! - **over-saturation** of a server: from the load where TTFT p50 has more than doubled over
//!   the lightest load while throughput stopped growing (requests queue, as GuideLLM detects);
//! - **the roofline** of the candle engine: how close decode gets to the peak memory bandwidth.

use serde::Serialize;

use super::{is_server, CellResult, LoadAxis};
use crate::record::line::CellParams;
use crate::stats::roofline::Peak;
use crate::stats::{Metric, Slo};

/// Doubling the load must add at least this much throughput to be worth it.
pub const KNEE_GAIN: f64 = 0.10;
/// TTFT p50 above this multiple of the lightest load's is TTFT rising with load.
pub const SATURATION_TTFT_RATIO: f64 = 2.0;

/// Why a curve's knee is where it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum KneeWhy {
    /// No larger load gains `KNEE_GAIN` per doubling; `next` gains the most, `gain` (a fraction
    /// per doubling of the load).
    Saturated { next: f64, gain: f64 },
    /// At `next` the p99 of these metrics broke the SLO.
    SloBroken { next: f64, metrics: Vec<String> },
    /// The cell at `next` failed.
    Failed { next: f64 },
    /// Throughput still grows at the largest load measured.
    StillScaling,
    /// Not even the lightest load meets the SLO (or it failed).
    NothingMeetsSlo,
    /// Fewer than two measured loads.
    TooFew,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Knee {
    /// The curve in words: `prompt 128, output 32`.
    pub curve: String,
    /// The load at the knee (`None`: still scaling, or nothing to say).
    pub load: Option<f64>,
    /// Its throughput (decode tok/s for the candle engine, output tok/s for a server).
    pub throughput: Option<f64>,
    #[serde(flatten)]
    pub why: KneeWhy,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Best {
    /// The workload in words: `prompt 128, output 32`.
    pub workload: String,
    pub cell: usize,
    pub load: f64,
    pub goodput_seq_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Saturation {
    pub curve: String,
    /// The lightest load and its TTFT p50.
    pub base_load: f64,
    pub base_ttft_s: f64,
    /// Where TTFT p50 was highest over the base, and by what factor.
    pub peak_load: f64,
    pub peak_ratio: f64,
    /// The first load over-saturated (TTFT p50 > 2× base and < 10 % throughput gain per
    /// doubling), if any.
    pub oversaturated_at: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RooflineFinding {
    pub peak: Peak,
    /// The cell closest to the peak, and its fraction of it.
    pub best_cell: usize,
    pub best_utilisation: f64,
    /// The lightest-load cell of the same workload, for contrast.
    pub lightest_cell: usize,
    pub lightest_utilisation: f64,
}

/// Everything the sweep says in words under its table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Findings {
    pub axis: LoadAxis,
    /// The SLO the knee and the best cell were judged by (empty: none).
    pub slo: Slo,
    pub knees: Vec<Knee>,
    pub best: Vec<Best>,
    /// Server sweeps only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub saturation: Vec<Saturation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RooflineFinding>,
    /// Why there is no roofline line, for the candle engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline_unavailable: Option<String>,
}

/// The throughput a curve is judged by: decode tok/s (B / TPOT) for the candle engine, output
/// tok/s for a server.
pub fn throughput(c: &CellResult) -> Option<f64> {
    if is_server(&c.params) {
        c.output_tok_s
    } else {
        c.decode_tok_s.or(c.output_tok_s)
    }
}

/// The SLO's metrics whose p99 the cell breaks (none without an SLO).
pub fn slo_broken(c: &CellResult, slo: &Slo) -> Vec<String> {
    slo.limits()
        .filter(|&(m, limit)| {
            let s = match m {
                Metric::Ttft => &c.ttft,
                Metric::Tpot => &c.tpot,
                _ => &c.e2e,
            };
            s.n > 0 && s.p99 > limit
        })
        .map(|(m, _)| m.label().to_string())
        .collect()
}

/// `prompt 128, output 32` plus the other axes that are set, without the load axis.
fn curve_name(p: &CellParams, axis: LoadAxis) -> String {
    let mut parts = vec![
        format!("prompt {}", p.prompt_tokens),
        format!("output {}", p.output_tokens),
    ];
    if axis != LoadAxis::Batch && p.batch != 1 {
        parts.push(format!("batch {}", p.batch));
    }
    if axis != LoadAxis::Concurrency {
        if let Some(c) = p.concurrency {
            parts.push(format!("concurrency {c}"));
        }
    }
    if axis != LoadAxis::Rate {
        if let Some(r) = p.rate {
            parts.push(format!("rate {r}/s"));
        }
    }
    parts.join(", ")
}

fn workload_name(p: &CellParams) -> String {
    format!("prompt {}, output {}", p.prompt_tokens, p.output_tokens)
}

/// The cells grouped by `key`, in first-seen order; each group sorted by load.
fn groups(
    cells: &[CellResult],
    axis: LoadAxis,
    key: impl Fn(&CellParams) -> String,
) -> Vec<(String, Vec<&CellResult>)> {
    let mut out: Vec<(String, Vec<&CellResult>)> = Vec::new();
    for c in cells {
        let k = key(&c.params);
        match out.iter_mut().find(|(name, _)| *name == k) {
            Some((_, v)) => v.push(c),
            None => out.push((k, vec![c])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by(|a, b| axis.load(&a.params).total_cmp(&axis.load(&b.params)));
    }
    out
}

/// Throughput gain per doubling of the load from `a` to `b` (0.1 = +10 %).
pub fn gain_per_doubling(load_a: f64, tput_a: f64, load_b: f64, tput_b: f64) -> Option<f64> {
    let doublings = (load_b / load_a).log2();
    (doublings.is_finite() && doublings > 0.0 && tput_a > 0.0 && tput_b.is_finite())
        .then(|| (tput_b / tput_a).max(0.0).powf(1.0 / doublings) - 1.0)
}

/// The knee of one curve (cells sorted by load).
pub fn knee(curve: &str, cells: &[&CellResult], axis: LoadAxis, slo: &Slo) -> Knee {
    let make = |load: Option<f64>, throughput: Option<f64>, why| Knee {
        curve: curve.to_string(),
        load,
        throughput,
        why,
    };
    let ok = |c: &CellResult| c.measured() && throughput(c).is_some();
    let Some(first) = cells.iter().position(|c| ok(c)) else {
        return make(None, None, KneeWhy::TooFew);
    };
    if !slo_broken(cells[first], slo).is_empty() {
        return make(None, None, KneeWhy::NothingMeetsSlo);
    }
    if cells.len() - first < 2 {
        return make(None, None, KneeWhy::TooFew);
    }
    // The curve ends before the first cell that fails or breaks the SLO.
    let mut usable: Vec<&CellResult> = vec![cells[first]];
    let mut limit: Option<KneeWhy> = None;
    for &c in &cells[first + 1..] {
        let load = axis.load(&c.params);
        if !ok(c) {
            limit = Some(KneeWhy::Failed { next: load });
            break;
        }
        let broken = slo_broken(c, slo);
        if !broken.is_empty() {
            limit = Some(KneeWhy::SloBroken {
                next: load,
                metrics: broken,
            });
            break;
        }
        usable.push(c);
    }
    // The knee: the first load that no larger one beats by KNEE_GAIN per doubling, so one
    // noisy dip does not end a curve that goes on scaling.
    for (i, &a) in usable.iter().enumerate() {
        let la = axis.load(&a.params);
        let ta = throughput(a);
        let best_later = usable[i + 1..]
            .iter()
            .filter_map(|&b| {
                let lb = axis.load(&b.params);
                Some((lb, gain_per_doubling(la, ta?, lb, throughput(b)?)?))
            })
            .max_by(|x, y| x.1.total_cmp(&y.1));
        match best_later {
            Some((_, gain)) if gain >= KNEE_GAIN => continue,
            Some((next, gain)) => return make(Some(la), ta, KneeWhy::Saturated { next, gain }),
            None if i + 1 < usable.len() => continue,
            None => {}
        }
    }
    match (limit, usable.last()) {
        (Some(why), Some(last)) => make(Some(axis.load(&last.params)), throughput(last), why),
        _ => make(None, None, KneeWhy::StillScaling),
    }
}

/// TTFT against load for one server curve.
pub fn saturation(curve: &str, cells: &[&CellResult], axis: LoadAxis) -> Option<Saturation> {
    let measured: Vec<&CellResult> = cells
        .iter()
        .copied()
        .filter(|c| c.measured() && c.ttft.n > 0)
        .collect();
    let base = *measured.first()?;
    if measured.len() < 2 || base.ttft.p50 <= 0.0 {
        return None;
    }
    let ratio = |c: &CellResult| c.ttft.p50 / base.ttft.p50;
    let peak = measured
        .iter()
        .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))
        .copied()
        .unwrap_or(base);
    let oversaturated_at = measured.windows(2).find_map(|pair| {
        let (a, b) = (pair[0], pair[1]);
        let gain = gain_per_doubling(
            axis.load(&a.params),
            throughput(a)?,
            axis.load(&b.params),
            throughput(b)?,
        )?;
        (ratio(b) > SATURATION_TTFT_RATIO && gain < KNEE_GAIN).then(|| axis.load(&b.params))
    });
    Some(Saturation {
        curve: curve.to_string(),
        base_load: axis.load(&base.params),
        base_ttft_s: base.ttft.p50,
        peak_load: axis.load(&peak.params),
        peak_ratio: ratio(peak),
        oversaturated_at,
    })
}

/// The decode roofline over the cells that know their bandwidth (candle cells).
pub fn roofline(cells: &[CellResult], axis: LoadAxis, peak: &Peak) -> Option<RooflineFinding> {
    let bw = peak.bandwidth.filter(|b| *b > 0.0)?;
    let util = |c: &CellResult| c.decode_bw_bytes_s.map(|a| a / bw);
    let best = cells
        .iter()
        .filter(|c| c.measured() && util(c).is_some())
        .max_by(|a, b| util(a).unwrap_or(0.0).total_cmp(&util(b).unwrap_or(0.0)))?;
    let lightest = cells
        .iter()
        .filter(|c| {
            c.measured()
                && util(c).is_some()
                && workload_name(&c.params) == workload_name(&best.params)
        })
        .min_by(|a, b| axis.load(&a.params).total_cmp(&axis.load(&b.params)))
        .unwrap_or(best);
    Some(RooflineFinding {
        peak: peak.clone(),
        best_cell: best.cell,
        best_utilisation: util(best).unwrap_or(0.0),
        lightest_cell: lightest.cell,
        lightest_utilisation: util(lightest).unwrap_or(0.0),
    })
}

/// Everything at once. `peak`: the device's peak figures, when known (candle sweeps).
pub fn findings(
    cells: &[CellResult],
    slo: &Slo,
    peak: Option<&Peak>,
    peak_unavailable: Option<String>,
) -> Findings {
    let params: Vec<CellParams> = cells.iter().map(|c| c.params.clone()).collect();
    let axis = LoadAxis::of(&params);
    let curves = groups(cells, axis, |p| curve_name(p, axis));
    let knees = curves
        .iter()
        .map(|(name, v)| knee(name, v, axis, slo))
        .collect();
    let best = groups(cells, axis, workload_name)
        .into_iter()
        .filter_map(|(workload, v)| {
            let c = v
                .into_iter()
                .filter(|c| c.measured() && slo_broken(c, slo).is_empty())
                .filter(|c| c.goodput_seq_s.is_some_and(|g| g > 0.0))
                .max_by(|a, b| {
                    a.goodput_seq_s
                        .unwrap_or(0.0)
                        .total_cmp(&b.goodput_seq_s.unwrap_or(0.0))
                })?;
            Some(Best {
                workload,
                cell: c.cell,
                load: axis.load(&c.params),
                goodput_seq_s: c.goodput_seq_s.unwrap_or(0.0),
            })
        })
        .collect();
    let server = cells.iter().any(|c| is_server(&c.params));
    let saturation = if server {
        curves
            .iter()
            .filter_map(|(name, v)| saturation(name, v, axis))
            .collect()
    } else {
        Vec::new()
    };
    let (roofline, roofline_unavailable) = if server {
        (None, None)
    } else {
        match peak.and_then(|p| roofline(cells, axis, p)) {
            Some(r) => (Some(r), None),
            None => (
                None,
                Some(peak_unavailable.unwrap_or_else(|| {
                    "no peak bandwidth, or no cell decoded more than one token".into()
                })),
            ),
        }
    };
    Findings {
        axis,
        slo: *slo,
        knees,
        best,
        saturation,
        roofline,
        roofline_unavailable,
    }
}

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
            format!("SLO at p99: {}", crate::record::report::slo_text(&self.slo))
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
                    "knee at {}: {name} {} breaks the SLO (p99 {})",
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
                    format!("no knee: even the smallest {name} breaks the SLO at p99")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::line::CellStatus;
    use crate::stats::Summary;

    /// A candle cell at `batch` with a decode throughput of `tok_s` and TPOT p99 `tpot_p99`.
    fn candle(cell: usize, batch: usize, tok_s: f64, tpot_p99: f64) -> CellResult {
        let tpot = Summary {
            p50: batch as f64 / tok_s,
            p99: tpot_p99,
            n: 10,
            ..Summary::default()
        };
        CellResult {
            cell,
            params: CellParams {
                batch,
                prompt_tokens: "128".into(),
                output_tokens: "32".into(),
                concurrency: None,
                rate: None,
            },
            status: CellStatus::Ok,
            reason: None,
            n: 10,
            warmup_requests: 1,
            failed_requests: 0,
            ttft: Summary {
                p50: 0.01,
                p99: 0.01,
                n: 10,
                ..Summary::default()
            },
            tpot,
            itl: Summary::default(),
            e2e: Summary {
                p50: 0.1,
                p99: 0.1,
                n: 10,
                ..Summary::default()
            },
            prefill_tok_s: Some(1000.0),
            decode_tok_s: Some(tok_s),
            output_tok_s: Some(tok_s),
            goodput_seq_s: Some(tok_s / 32.0),
            slo_met_share: Some(1.0),
            peak_memory_bytes: None,
            decode_bw_bytes_s: Some(tok_s * 1e6 / batch as f64),
            elapsed_s: 1.0,
        }
    }

    fn server(cell: usize, conc: usize, out_tok_s: f64, ttft_p50: f64) -> CellResult {
        let mut c = candle(cell, 1, out_tok_s, 0.001);
        c.params.concurrency = Some(conc);
        c.decode_tok_s = None;
        c.decode_bw_bytes_s = None;
        c.ttft.p50 = ttft_p50;
        c.ttft.p99 = ttft_p50;
        c
    }

    #[test]
    fn the_knee_is_where_doubling_stops_paying() {
        // 100 → 190 (+90 %) → 360 (+89 %) → 380 (+5.6 %): the knee is batch 4.
        let cells = vec![
            candle(0, 1, 100.0, 0.011),
            candle(1, 2, 190.0, 0.011),
            candle(2, 4, 360.0, 0.012),
            candle(3, 8, 380.0, 0.022),
        ];
        let f = findings(&cells, &Slo::default(), None, None);
        assert_eq!(f.axis, LoadAxis::Batch);
        assert_eq!(f.knees.len(), 1);
        let k = &f.knees[0];
        assert_eq!(k.load, Some(4.0));
        assert_eq!(k.throughput, Some(360.0));
        match &k.why {
            KneeWhy::Saturated { next, gain } => {
                assert_eq!(*next, 8.0);
                assert!((gain - (380.0 / 360.0 - 1.0)).abs() < 1e-12, "{gain}");
            }
            other => panic!("{other:?}"),
        }
        // The best cell without an SLO: the most sequences per second.
        assert_eq!(f.best.len(), 1);
        assert_eq!((f.best[0].cell, f.best[0].load), (3, 8.0));
        // An SLO on TPOT at 15 ms: batch 8 (p99 22 ms) breaks it, so the knee is at 4 for
        // that reason and the best cell is batch 4.
        let slo = Slo::parse("tpot=15ms").unwrap_or_default();
        let f = findings(&cells, &slo, None, None);
        assert_eq!(f.knees[0].load, Some(4.0));
        assert_eq!(
            f.knees[0].why,
            KneeWhy::SloBroken {
                next: 8.0,
                metrics: vec!["TPOT".into()]
            }
        );
        assert_eq!(f.best[0].cell, 2);
        let text = f.to_markdown(&cells);
        assert!(
            text.contains(
                "knee at batch 4 (360.0 decode tok/s): batch 8 breaks the SLO (p99 TPOT)"
            ),
            "{text}"
        );
    }

    #[test]
    fn gains_count_per_doubling_and_failures_end_a_curve() {
        // 1 → 4 is two doublings: 100 → 121 is +10 % per doubling.
        let g = gain_per_doubling(1.0, 100.0, 4.0, 121.0).unwrap_or(f64::NAN);
        assert!((g - 0.1).abs() < 1e-12, "{g}");
        assert_eq!(gain_per_doubling(2.0, 100.0, 2.0, 150.0), None);
        let mut cells = vec![
            candle(0, 1, 100.0, 0.01),
            candle(1, 2, 200.0, 0.01),
            candle(2, 4, 0.0, 0.01),
        ];
        cells[2].status = CellStatus::Failed;
        cells[2].reason = Some("out of memory".into());
        cells[2].n = 0;
        let f = findings(&cells, &Slo::default(), None, None);
        assert_eq!(f.knees[0].load, Some(2.0));
        assert_eq!(f.knees[0].why, KneeWhy::Failed { next: 4.0 });
        assert!(f
            .to_markdown(&cells)
            .contains("Cell 2 failed: out of memory."));
        // A dip does not end a curve that goes on scaling: batch 1 → 4 still gains 73 % per
        // doubling, past the slower batch 2.
        let dip = vec![
            candle(0, 1, 100.0, 0.01),
            candle(1, 2, 80.0, 0.01),
            candle(2, 4, 300.0, 0.01),
        ];
        let f = findings(&dip, &Slo::default(), None, None);
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        // Still scaling.
        let f = findings(&cells[..2], &Slo::default(), None, None);
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        assert_eq!(f.knees[0].load, None);
        // One load only.
        let f = findings(&cells[..1], &Slo::default(), None, None);
        assert_eq!(f.knees[0].why, KneeWhy::TooFew);
    }

    #[test]
    fn curves_are_per_prompt_length() {
        let mut cells = vec![
            candle(0, 1, 100.0, 0.01),
            candle(1, 2, 200.0, 0.01),
            candle(2, 1, 50.0, 0.01),
            candle(3, 2, 52.0, 0.01),
        ];
        cells[2].params.prompt_tokens = "2048".into();
        cells[3].params.prompt_tokens = "2048".into();
        let f = findings(&cells, &Slo::default(), None, None);
        assert_eq!(f.knees.len(), 2);
        assert_eq!(f.knees[0].curve, "prompt 128, output 32");
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        assert_eq!(f.knees[1].curve, "prompt 2048, output 32");
        assert_eq!(f.knees[1].load, Some(1.0));
        assert_eq!(f.best.len(), 2);
    }

    #[test]
    fn a_server_over_saturates_when_ttft_climbs_and_throughput_does_not() {
        let cells = vec![
            server(0, 1, 100.0, 0.020),
            server(1, 2, 195.0, 0.021),
            server(2, 4, 380.0, 0.025),
            server(3, 8, 400.0, 0.090),
            server(4, 16, 405.0, 0.200),
        ];
        let f = findings(&cells, &Slo::default(), None, None);
        assert_eq!(f.axis, LoadAxis::Concurrency);
        assert_eq!(f.knees[0].load, Some(4.0));
        let s = &f.saturation[0];
        assert_eq!(s.oversaturated_at, Some(8.0));
        assert_eq!(s.peak_load, 16.0);
        assert!((s.peak_ratio - 10.0).abs() < 1e-9);
        assert!(f.roofline.is_none() && f.roofline_unavailable.is_none());
        let text = f.to_markdown(&cells);
        assert!(text.contains("over-saturated from concurrency 8"), "{text}");
        // Flat TTFT, linear throughput: neither.
        let calm = vec![server(0, 1, 100.0, 0.02), server(1, 2, 200.0, 0.02)];
        let f = findings(&calm, &Slo::default(), None, None);
        assert_eq!(f.saturation[0].oversaturated_at, None);
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
    }

    #[test]
    fn the_roofline_names_the_cell_closest_to_the_peak() {
        // decode_bw = tok_s × 1e6 / batch: 100e6, 95e6, 90e6 bytes/s.
        let cells = vec![
            candle(0, 1, 100.0, 0.01),
            candle(1, 2, 190.0, 0.01),
            candle(2, 4, 360.0, 0.01),
        ];
        let peak = Peak {
            bandwidth: Some(200e6),
            flops: None,
            basis: vec!["--peak-bw".into()],
        };
        let f = findings(&cells, &Slo::default(), Some(&peak), None);
        let r = f.roofline.clone().unwrap_or_else(|| panic!("{f:?}"));
        assert_eq!((r.best_cell, r.lightest_cell), (0, 0));
        assert!((r.best_utilisation - 0.5).abs() < 1e-12);
        let f = findings(&cells, &Slo::default(), None, Some("no probe".into()));
        assert_eq!(f.roofline_unavailable.as_deref(), Some("no probe"));
    }
}
