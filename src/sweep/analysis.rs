//! What a sweep finds, from its cells alone (pure functions, so tests feed known numbers):
//!
//! - **the knee** of each curve (the cells that differ only in load): the first load that no
//!   larger one beats by 10 % throughput per doubling, or the last before one that breaks the
//!   SLO (each limit at its percentile) or fails;
//! - **the best cell** of each workload (prompt × output): the most goodput among the cells
//!   that meet the SLO;
//! - **over-saturation** of a server: from the load where TTFT p50 has more than doubled over
//!   the lightest load while throughput stopped growing (requests queue, as GuideLLM detects);
//! - **the roofline** of the candle engine: how close decode gets to the peak memory bandwidth;
//! - **the capacity** a `--find-max` search found: the highest load that met the SLO and that
//!   the server held (`sweep::sustain`), the bracket it was narrowed to, the probes that decided
//!   it (`sweep::search`), and with `--hold` whether it held for longer.
//!
//! What they say in words (the summary's "What the sweep found") is `sweep::findings_text`'s.

use serde::Serialize;

use super::search::{axis_of, without_load, Search, SearchEnd};
use super::{is_server, CellResult, LoadAxis};
use crate::event::CellParams;
use crate::record::line::{CellStatus, SearchConfig};
use crate::stats::roofline::Peak;
use crate::stats::{Slo, SloMetric};

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
    /// `--find-max`: one per workload searched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<SearchFinding>,
    /// Server sweeps whose server sent its own timings: which part of the TTFT grew with the
    /// load, per curve.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ttft_split: Vec<SplitFinding>,
}

/// Which part of the TTFT (queue, prefill, network+client, by the server's own timings) grew
/// from a curve's lightest load to where it is judged: the first load that breaks the SLO,
/// else the heaviest. The parts are compared at the percentile the SLO judges the TTFT at
/// (`ttft:p95=...`: p95); when the SLO sets no TTFT limit, at that of the first limit broken;
/// with neither, at p50.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitFinding {
    pub curve: String,
    pub base_load: f64,
    pub at_load: f64,
    /// Whether `at_load` is where the SLO broke first.
    pub breaks_slo: bool,
    /// The limits broken at `at_load` (`TTFT p95`, `TPOT p99`); empty when none is.
    pub broken: Vec<String>,
    /// Whether the TTFT is among them.
    pub ttft_broke: bool,
    /// 50, 90, 95 or 99: the percentile compared.
    pub percentile: u8,
    /// The part that grew most, and by how much (seconds).
    pub part: crate::stats::Part,
    pub grew_s: f64,
    /// Every part's growth (seconds), in time order.
    pub parts: Vec<(crate::stats::Part, f64)>,
}

/// The split findings of each curve with at least two cells that carry a split.
pub fn split_findings(
    curves: &[(String, Vec<&CellResult>)],
    axis: LoadAxis,
    slo: &Slo,
) -> Vec<SplitFinding> {
    curves
        .iter()
        .filter_map(|(name, cells)| {
            let with: Vec<(&CellResult, &crate::stats::SplitSummary)> = cells
                .iter()
                .filter(|c| c.measured())
                .filter_map(|c| Some((*c, c.ttft_split.as_ref()?)))
                .collect();
            let (base, base_split) = *with.first()?;
            let broke = with
                .iter()
                .skip(1)
                .map(|(c, s)| ((*c, *s), broken_metrics(c, slo)))
                .find(|(_, broken)| !broken.is_empty());
            let ((at, at_split), broken) = match broke {
                Some(b) => b,
                None => (*with.last()?, Vec::new()),
            };
            if at.cell == base.cell {
                return None;
            }
            let q = slo
                .get(SloMetric::Ttft)
                .or_else(|| broken.first().and_then(|m| slo.get(*m)))
                .map_or(50, |l| l.percentile);
            let (part, grew_s) = at_split.grew_most_since(base_split, q)?;
            Some(SplitFinding {
                curve: name.clone(),
                base_load: axis.load(&base.params),
                at_load: axis.load(&at.params),
                breaks_slo: !broken.is_empty(),
                broken: broken.iter().map(|m| limit_label(*m, slo)).collect(),
                ttft_broke: broken.contains(&SloMetric::Ttft),
                percentile: q,
                part,
                grew_s,
                parts: at_split.growth_since(base_split, q),
            })
        })
        .collect()
}

/// One probe of a search: its cell, load and verdict, and the p99s that decided it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Probe {
    pub cell: usize,
    pub load: f64,
    pub meets_slo: bool,
    /// The SLO metrics whose p99 broke their limit (empty when it met; `failed` when the cell
    /// measured nothing).
    pub broken: Vec<String>,
    pub ttft_p99_s: Option<f64>,
    pub tpot_p99_s: Option<f64>,
    pub e2e_p99_s: Option<f64>,
    /// Steady requests the p99s are of.
    pub n: u64,
    /// Steady requests that failed (misses).
    pub failed: u64,
    /// The share of steady requests that met the SLO, failures counted as misses.
    pub goodput: Option<f64>,
}

/// What a `--find-max` search found for one workload. In JSON the max is `max_concurrency` or
/// `max_rate` (after the axis), `null` when no load met the SLO.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchFinding {
    pub workload: String,
    pub axis: LoadAxis,
    /// The highest load that met the SLO (`None`: none did).
    pub max: Option<f64>,
    /// The lowest load that broke it, above `max` (`None`: none did, up to the range's top).
    pub broke_at: Option<f64>,
    pub end: SearchEnd,
    /// The probes at the bracket's ends: the cell of `max`, then the cell of `broke_at`.
    pub decided_by: Vec<usize>,
    pub probes: Vec<Probe>,
    /// The range searched and the tolerance asked for.
    pub range: (f64, f64),
    pub tolerance: f64,
    /// How long each probe ran at least (`--probe-duration`), when probes were timed.
    pub probe_s: Option<f64>,
    /// `--hold`: the max held as one more cell, and whether it held.
    pub hold: Option<Hold>,
}

/// The highest load a search found, held (`--hold`): for how long, and whether it still met
/// the SLO and its load was one the server could hold.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hold {
    pub cell: usize,
    pub load: f64,
    /// Steady requests and their wall time.
    pub n: u64,
    pub seconds: Option<f64>,
    pub meets_slo: bool,
    /// Why not, when it did not.
    pub broken: Vec<String>,
    pub ttft_p99_s: Option<f64>,
    /// Loads held before this one that did not hold (each higher than the next): a load a
    /// probe saw met gives way to the next lower one that met.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_held: Vec<f64>,
}

impl SearchFinding {
    /// `broke_at − max`, as a fraction of `max`: how precisely the max is known.
    pub fn resolution(&self) -> Option<f64> {
        let (m, b) = (self.max?, self.broke_at?);
        (m > 0.0).then(|| (b - m) / m)
    }
}

impl Serialize for SearchFinding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("workload", &self.workload)?;
        m.serialize_entry("axis", &self.axis)?;
        m.serialize_entry(&format!("max_{}", self.axis.name()), &self.max)?;
        m.serialize_entry("bracket", &[self.max, self.broke_at])?;
        m.serialize_entry("resolution", &self.resolution())?;
        m.serialize_entry("end", &self.end)?;
        m.serialize_entry("decided_by", &self.decided_by)?;
        m.serialize_entry("range", &[self.range.0, self.range.1])?;
        m.serialize_entry("tolerance", &self.tolerance)?;
        m.serialize_entry("probes", &self.probes)?;
        if let Some(p) = self.probe_s {
            m.serialize_entry("probe_s", &p)?;
        }
        if let Some(h) = &self.hold {
            m.serialize_entry("hold", h)?;
        }
        m.end()
    }
}

/// Each workload's search, replayed from its probes' cells with the verdicts the sweep engine
/// got (`meets_slo`), so a record read back states the same bracket.
pub fn searches(cells: &[CellResult], slo: &Slo, config: &SearchConfig) -> Vec<SearchFinding> {
    let axis = axis_of(config);
    config
        .workloads
        .iter()
        .map(|w| {
            let probes: Vec<&CellResult> = cells
                .iter()
                .filter(|c| !c.params.hold && without_load(&c.params, axis) == *w)
                .collect();
            let holds: Vec<&CellResult> = cells
                .iter()
                .filter(|c| c.params.hold && without_load(&c.params, axis) == *w)
                .collect();
            let hold = holds.last().map(|c| Hold {
                cell: c.cell,
                load: axis.load(&c.params),
                n: c.n,
                seconds: c.held_s,
                meets_slo: meets_slo(c, slo),
                broken: probe_reasons(c, slo),
                ttft_p99_s: (c.ttft.n > 0).then_some(c.ttft.p99),
                not_held: holds[..holds.len() - 1]
                    .iter()
                    .map(|c| axis.load(&c.params))
                    .collect(),
            });
            let verdicts: Vec<(f64, bool)> = probes
                .iter()
                .map(|c| (axis.load(&c.params), meets_slo(c, slo)))
                .collect();
            let search = Search::replay(config, &verdicts);
            let cell_at = |load: Option<f64>| {
                probes
                    .iter()
                    .rev()
                    .find(|c| Some(axis.load(&c.params)) == load)
                    .map(|c| c.cell)
            };
            let p99 = |s: &crate::stats::Summary| (s.n > 0).then_some(s.p99);
            SearchFinding {
                workload: curve_name(w, axis),
                axis,
                max: search.meets,
                broke_at: search.breaks,
                end: search.end(),
                decided_by: [cell_at(search.meets), cell_at(search.breaks)]
                    .into_iter()
                    .flatten()
                    .collect(),
                probes: probes
                    .iter()
                    .map(|c| Probe {
                        cell: c.cell,
                        load: axis.load(&c.params),
                        meets_slo: meets_slo(c, slo),
                        broken: probe_reasons(c, slo),
                        ttft_p99_s: p99(&c.ttft),
                        tpot_p99_s: p99(&c.tpot),
                        e2e_p99_s: p99(&c.e2e),
                        n: c.n,
                        failed: c.steady_failed,
                        goodput: c.slo_met_share,
                    })
                    .collect(),
                range: (config.lo, config.hi),
                tolerance: config.tolerance,
                probe_s: config.probe_s,
                hold,
            }
        })
        .collect()
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

/// The SLO's limits the cell breaks, each metric at its percentile (none without an SLO); its
/// failed requests count as misses, above every completed one (`Slo::broken_by_failures`), so
/// a server that sheds load with errors does not meet an SLO its completed requests meet.
pub fn slo_broken(c: &CellResult, slo: &Slo) -> Vec<String> {
    broken_metrics(c, slo)
        .into_iter()
        .map(|m| limit_label(m, slo))
        .collect()
}

/// The SLO's metrics whose limit a cell breaks, its failures counted, in the SLO's order.
fn broken_metrics(c: &CellResult, slo: &Slo) -> Vec<SloMetric> {
    let mut broken = slo.broken(|m| {
        Some(match m {
            SloMetric::Ttft => c.ttft,
            SloMetric::Tpot => c.tpot,
            SloMetric::Itl => c.itl,
            SloMetric::Ntpot => c.ntpot,
            SloMetric::E2e => c.e2e,
        })
    });
    for m in slo.broken_by_failures(c.n, c.steady_failed) {
        if !broken.contains(&m) {
            broken.push(m);
        }
    }
    broken.sort_by_key(|m| SloMetric::ALL.iter().position(|a| a == m));
    broken
}

/// A limit as the findings name it: `TTFT p95`.
fn limit_label(m: SloMetric, slo: &Slo) -> String {
    match slo.get(m) {
        Some(l) => format!("{} p{}", m.label(), l.percentile),
        None => m.label().to_string(),
    }
}

/// Why a probe does not meet the SLO: the limits it breaks, and whether its load was over
/// capacity (`sustain`); `failed` when nothing was measured.
pub fn probe_reasons(c: &CellResult, slo: &Slo) -> Vec<String> {
    if !c.measured() {
        return vec!["failed".into()];
    }
    let mut why = slo_broken(c, slo);
    if c.sustain.as_ref().is_some_and(|s| !s.held()) {
        why.push("over capacity".into());
    }
    why
}

/// Whether a cell meets the SLO as a `--find-max` probe must: measured, every limit's
/// percentile within it, and its load one the server can hold (`sustain`).
pub fn meets_slo(c: &CellResult, slo: &Slo) -> bool {
    c.measured() && slo_broken(c, slo).is_empty() && c.sustain.as_ref().is_none_or(|s| s.held())
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
    // Another model, dtype or thread count is another curve (each has its own knee).
    if let Some(m) = &p.model {
        parts.insert(0, m.clone());
    }
    if let Some(d) = p.dtype {
        parts.push(d.name().to_string());
    }
    if let Some(t) = p.threads {
        parts.push(format!("{t} threads"));
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
            // A cell a stop cut short ends the curve where the measurements do; it did not fail.
            if c.status != CellStatus::Stopped {
                limit = Some(KneeWhy::Failed { next: load });
            }
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
    if usable.len() < 2 && limit.is_none() {
        return make(None, None, KneeWhy::TooFew);
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

/// Everything at once. `peak`: the device's peak figures, when known (candle sweeps);
/// `search`: how a `--find-max` sweep searched.
pub fn findings(
    cells: &[CellResult],
    slo: &Slo,
    peak: Option<&Peak>,
    peak_unavailable: Option<String>,
    search: Option<&SearchConfig>,
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
        searches: search.map(|s| searches(cells, slo, s)).unwrap_or_default(),
        ttft_split: split_findings(&curves, axis, slo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::line::CellStatus;
    use crate::stats::{Part, Summary};

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
                ..CellParams::default()
            },
            status: CellStatus::Ok,
            reason: None,
            n: 10,
            warmup_requests: 1,
            failed_requests: 0,
            steady_failed: 0,
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
            ntpot: Summary::default(),
            sustain: None,
            prefill_tok_s: Some(1000.0),
            decode_tok_s: Some(tok_s),
            output_tok_s: Some(tok_s),
            goodput_seq_s: Some(tok_s / 32.0),
            requests_s: Some(tok_s / 32.0),
            slo_met_share: Some(1.0),
            peak_memory_bytes: None,
            decode_bw_bytes_s: Some(tok_s * 1e6 / batch as f64),
            held_s: None,
            wall_output_tok_s: None,
            prefix_cache: None,
            elapsed_s: 1.0,
            models: Vec::new(),
            reasoning: None,
            ttft_split: None,
            spec: None,
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
    fn a_cell_that_sheds_load_with_errors_does_not_meet_the_slo() {
        let slo = Slo::parse("ttft:p95=50ms").unwrap();
        // Every completed request well within the limit: 10 of them.
        let mut c = server(0, 8, 100.0, 0.010);
        assert!(meets_slo(&c, &slo));
        // One failure in 11 reaches the p95 (rank 9.5 of 0..10): a miss, the limit broken.
        c.steady_failed = 1;
        assert_eq!(slo_broken(&c, &slo), vec!["TTFT p95".to_string()]);
        assert!(!meets_slo(&c, &slo));
        // Without an SLO nothing is broken, failures or not.
        assert!(slo_broken(&c, &Slo::default()).is_empty());
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
        let f = findings(&cells, &Slo::default(), None, None, None);
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
        let f = findings(&cells, &slo, None, None, None);
        assert_eq!(f.knees[0].load, Some(4.0));
        assert_eq!(
            f.knees[0].why,
            KneeWhy::SloBroken {
                next: 8.0,
                metrics: vec!["TPOT p99".into()]
            }
        );
        assert_eq!(f.best[0].cell, 2);
        let text = f.to_markdown(&cells);
        assert!(
            text.contains(
                "knee at batch 4 (360.0 decode tok/s): batch 8 breaks the SLO (TPOT p99)"
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
        let f = findings(&cells, &Slo::default(), None, None, None);
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
        let f = findings(&dip, &Slo::default(), None, None, None);
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        // Still scaling.
        let f = findings(&cells[..2], &Slo::default(), None, None, None);
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        assert_eq!(f.knees[0].load, None);
        // One load only.
        let f = findings(&cells[..1], &Slo::default(), None, None, None);
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
        let f = findings(&cells, &Slo::default(), None, None, None);
        assert_eq!(f.knees.len(), 2);
        assert_eq!(f.knees[0].curve, "prompt 128, output 32");
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        assert_eq!(f.knees[1].curve, "prompt 2048, output 32");
        assert_eq!(f.knees[1].load, Some(1.0));
        assert_eq!(f.best.len(), 2);
    }

    #[test]
    fn each_model_is_its_own_curve_and_a_stopped_cell_did_not_fail() {
        let mut cells = vec![
            candle(0, 1, 100.0, 0.01),
            candle(1, 2, 200.0, 0.01),
            candle(2, 1, 50.0, 0.01),
            candle(3, 2, 0.0, 0.01),
        ];
        for (c, m) in cells.iter_mut().zip(["a", "a", "b", "b"]) {
            c.params.model = Some(m.into());
        }
        cells[3].status = CellStatus::Stopped;
        cells[3].n = 0;
        let f = findings(&cells, &Slo::default(), None, None, None);
        assert_eq!(f.knees.len(), 2);
        assert_eq!(f.knees[0].curve, "a, prompt 128, output 32");
        assert_eq!(f.knees[0].why, KneeWhy::StillScaling);
        assert_eq!(f.knees[1].curve, "b, prompt 128, output 32");
        assert_eq!(f.knees[1].why, KneeWhy::TooFew);
        assert!(!f.to_markdown(&cells).contains("failed"));
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
        let f = findings(&cells, &Slo::default(), None, None, None);
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
        let f = findings(&calm, &Slo::default(), None, None, None);
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
        let f = findings(&cells, &Slo::default(), Some(&peak), None, None);
        let r = f.roofline.clone().unwrap_or_else(|| panic!("{f:?}"));
        assert_eq!((r.best_cell, r.lightest_cell), (0, 0));
        assert!((r.best_utilisation - 0.5).abs() < 1e-12);
        let f = findings(&cells, &Slo::default(), None, Some("no probe".into()), None);
        assert_eq!(f.roofline_unavailable.as_deref(), Some("no probe"));
    }

    #[test]
    fn a_search_states_its_max_bracket_and_the_cells_that_decided_it() {
        // Probes in the order a search ran them; TTFT p99 stays 20 ms up to 12 in flight and
        // then jumps (requests queue).
        let probes = [1usize, 2, 4, 8, 16, 12, 14, 13];
        let cells: Vec<CellResult> = probes
            .iter()
            .enumerate()
            .map(|(i, &c)| server(i, c, c as f64 * 30.0, if c <= 12 { 0.02 } else { 0.2 }))
            .collect();
        let slo = Slo::parse("ttft=50ms").unwrap_or_default();
        let mut workload = cells[0].params.clone();
        workload.concurrency = None;
        let config = SearchConfig {
            axis: "concurrency".into(),
            start: 1.0,
            lo: 1.0,
            hi: 1024.0,
            tolerance: 0.05,
            workloads: vec![workload],
            probe_s: None,
            hold_s: None,
        };
        let f = findings(&cells, &slo, None, None, Some(&config));
        let s = &f.searches[0];
        assert_eq!(
            (s.max, s.broke_at, s.end),
            (Some(12.0), Some(13.0), SearchEnd::Bracketed)
        );
        assert_eq!(s.decided_by, [5, 7]);
        assert_eq!(s.probes.len(), 8);
        assert_eq!(s.probes[4].broken, ["TTFT p99"]);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["searches"][0]["max_concurrency"], 12.0);
        assert_eq!(
            json["searches"][0]["bracket"],
            serde_json::json!([12.0, 13.0])
        );
        let text = f.to_markdown(&cells);
        assert!(
            text.contains("Max concurrency for prompt 128, output 32: **12**: concurrency 12 meets the SLO and 13 breaks it (TTFT p99); the max lies in [12, 13), known to 1 request in flight (cells 5 and 7)"),
            "{text}"
        );
        // Held: 12 did not hold, 11 was never probed, so the next lower load a probe met (8)
        // was held and held.
        let mut held = cells.clone();
        for (i, (c, ttft)) in [(12usize, 0.2), (8, 0.02)].into_iter().enumerate() {
            let mut cell = server(8 + i, c, c as f64 * 30.0, ttft);
            cell.params.hold = true;
            held.push(cell);
        }
        let f = findings(&held, &slo, None, None, Some(&config));
        let h = f.searches[0]
            .hold
            .clone()
            .unwrap_or_else(|| panic!("{f:?}"));
        assert_eq!((h.load, h.meets_slo, h.not_held), (8.0, true, vec![12.0]));
        assert_eq!(f.searches[0].max, Some(12.0), "the probes' answer stays");
        assert!(f
            .to_markdown(&held)
            .contains("Held at concurrency 12 first: it did **not** hold"));
        // Nothing meets: the first probe breaks, and so does every halving.
        let slow: Vec<CellResult> = [4usize, 2, 1]
            .iter()
            .enumerate()
            .map(|(i, &c)| server(i, c, 10.0, 0.2))
            .collect();
        let config = SearchConfig {
            start: 4.0,
            ..config
        };
        let f = findings(&slow, &slo, None, None, Some(&config));
        assert_eq!(
            (f.searches[0].max, f.searches[0].end),
            (None, SearchEnd::NothingMeets)
        );
        assert!(f
            .to_markdown(&slow)
            .contains("none: even concurrency 1 breaks the SLO (TTFT p99)"));
    }

    /// A server curve at concurrency 1, 2 and 4 whose servers said where the TTFT went: at 4
    /// a tenth of the requests wait 200 ms in the queue (the tail) and every prefill takes
    /// 80 ms instead of 50 (the median). TTFT p50 50, 55, 85 ms; p99 60, 70, 300 ms; TPOT
    /// p90 5, 12, 20 ms.
    fn split_curve() -> Vec<CellResult> {
        use crate::stats::SplitSummary;
        let split = |queue: &[f64], prefill: f64| SplitSummary {
            queue: Summary::of(queue),
            prefill: Summary::of(&[prefill; 100]),
            rest: Summary::of(&[0.002; 100]),
            ..Default::default()
        };
        let mut tail = vec![0.0; 90];
        tail.extend([0.200; 10]);
        [
            (1, 0.050, 0.060, 0.005, split(&[0.0; 100], 0.050)),
            (2, 0.055, 0.070, 0.012, split(&[0.0; 100], 0.052)),
            (4, 0.085, 0.300, 0.020, split(&tail, 0.080)),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (conc, p50, p99, tpot_p90, split))| {
            let mut c = server(i, conc, 100.0 * conc as f64, p50);
            c.ttft.p99 = p99;
            c.ttft.p95 = p99;
            c.tpot.p90 = tpot_p90;
            c.ttft_split = Some(split);
            c
        })
        .collect()
    }

    /// `ttft:p50=...`: the parts are compared at p50, where the prefill grew (the queue's
    /// 200 ms are all in the tail), and the finding says the TTFT p50 broke the SLO.
    #[test]
    fn the_split_is_compared_at_the_slos_own_percentile() {
        let cells = split_curve();
        let slo = Slo::parse("ttft:p50=60ms").unwrap_or_default();
        let f = findings(&cells, &slo, None, None, None);
        let s = &f.ttft_split[0];
        assert_eq!((s.at_load, s.breaks_slo, s.percentile), (4.0, true, 50));
        assert_eq!(s.broken, ["TTFT p50"]);
        assert!(s.ttft_broke);
        assert_eq!(s.part, Part::Prefill);
        assert!((s.grew_s - 0.030).abs() < 1e-12, "{s:?}");
        let text = f.to_markdown(&cells);
        assert!(
            text.contains("TTFT p50 breaks the SLO first at concurrency 4; of the TTFT the prefill grew most, +30.000 ms at p50 since concurrency 1 (queue +0.000 ms, network+client +0.000 ms;"),
            "{text}"
        );
        // The same curve judged at p99: the queue's tail is what grew.
        let slo = Slo::parse("ttft=100ms").unwrap_or_default();
        let f = findings(&cells, &slo, None, None, None);
        let s = &f.ttft_split[0];
        assert_eq!((s.percentile, s.part), (99, Part::Queue));
        assert!((s.grew_s - 0.200).abs() < 1e-12, "{s:?}");
        assert!(f
            .to_markdown(&cells)
            .contains("TTFT p99 breaks the SLO first at concurrency 4; of the TTFT the queue grew most, +200.000 ms at p99"));
    }

    /// Another metric breaks the SLO first: the finding names it, and compares the TTFT's
    /// parts at the TTFT's own percentile when the SLO limits the TTFT, else at that of the
    /// limit broken.
    #[test]
    fn a_split_finding_names_the_metric_that_broke() {
        let cells = split_curve();
        let slo = Slo::parse("ttft=1s,tpot:p90=10ms").unwrap_or_default();
        let f = findings(&cells, &slo, None, None, None);
        let s = &f.ttft_split[0];
        assert_eq!((s.at_load, s.breaks_slo, s.percentile), (2.0, true, 99));
        assert_eq!(s.broken, ["TPOT p90"]);
        assert!(!s.ttft_broke);
        let text = f.to_markdown(&cells);
        assert!(
            text.contains("TPOT p90 breaks the SLO first at concurrency 2 (the TTFT within its limit); of the TTFT the prefill grew most, +2.000 ms at p99"),
            "{text}"
        );
        assert!(!text.contains("TTFT breaks"), "{text}");

        let slo = Slo::parse("tpot:p90=15ms").unwrap_or_default();
        let f = findings(&cells, &slo, None, None, None);
        let s = &f.ttft_split[0];
        assert_eq!((s.at_load, s.percentile, s.part), (4.0, 90, Part::Prefill));
        assert!(f.to_markdown(&cells).contains(
            "TPOT p90 breaks the SLO first at concurrency 4 (the SLO sets no TTFT limit); of the TTFT the prefill grew most, +30.000 ms at p90"
        ));

        // Two limits broken at once are both named.
        let slo = Slo::parse("ttft:p95=100ms,tpot:p90=15ms").unwrap_or_default();
        let f = findings(&cells, &slo, None, None, None);
        let s = &f.ttft_split[0];
        assert_eq!((s.percentile, s.part), (95, Part::Queue));
        assert!(f
            .to_markdown(&cells)
            .contains("TTFT p95 and TPOT p90 break the SLO first at concurrency 4;"));

        // No SLO: the heaviest load, at p50.
        let f = findings(&cells, &Slo::default(), None, None, None);
        let s = &f.ttft_split[0];
        assert_eq!((s.at_load, s.breaks_slo, s.percentile), (4.0, false, 50));
        assert!(s.broken.is_empty());
        assert!(f
            .to_markdown(&cells)
            .contains("up to concurrency 4; of the TTFT the prefill grew most, +30.000 ms at p50"));
    }
}
