//! `infertop compare A.jsonl B.jsonl [...]`: each run against the first (the baseline).
//!
//! - Side by side: the steady-state summaries and the change of each percentile (absolute, %).
//! - For TTFT, TPOT and E2E: the difference of medians (B − A) with a seeded bootstrap confidence
//!   interval (resample each run's steady requests with replacement, 2000 times by default, and
//!   take the 2.5th and 97.5th percentiles of the differences), and a verdict in plain words:
//!   *faster* / *slower* when the interval excludes 0, else *no detectable change at this n*.
//! - The outputs: request `i` of B must produce the same `output_hash` as request `i` of A. If any
//!   differ, the report says so first and loudest, and `infertop compare` exits with
//!   [`EXIT_OUTPUTS_DIFFER`] (3) — a speed-up that changed the answers must not pass unseen.

use serde::Serialize;
use serde_json::Value;

use super::settling;
use crate::record::reader::Record;
use crate::stats::{median_in_place, percentile_sorted, Metric, Part, SettleRule, Summary};
use crate::summary::format_value;
use crate::util::table::{or_missing, TextTable, MISSING};
use crate::util::SplitMix64;

use crate::exit::EXIT_OUTPUTS_DIFFER;

/// Bootstrap parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CompareOptions {
    pub resamples: usize,
    /// e.g. 0.95.
    pub confidence: f64,
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            resamples: 2000,
            confidence: 0.95,
            seed: 0,
        }
    }
}

/// The output format of `compare`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// Markdown tables (the default).
    #[default]
    #[value(alias = "markdown")]
    Md,
    /// One JSON object.
    Json,
}

/// One run as the comparison shows it.
#[derive(Clone, Debug, Serialize)]
pub struct RunSide {
    /// "A", "B", ...
    pub label: String,
    pub file: String,
    pub model: String,
    pub device: String,
    pub dtype: String,
    /// "prompt/output/batch" as configured.
    pub workload: String,
    pub requests: u64,
    pub warmup_requests: u64,
    pub settled_at: Option<u64>,
    /// Steady-state summaries, one per metric (`Metric::ALL` order), keyed by metric key.
    pub steady: Vec<(String, Summary)>,
}

/// The difference of medians `other − base` with its bootstrap interval, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MedianDiff {
    pub base_median: f64,
    pub other_median: f64,
    pub diff: f64,
    pub lo: f64,
    pub hi: f64,
    pub confidence: f64,
    pub resamples: usize,
    pub seed: u64,
    pub n_base: usize,
    pub n_other: usize,
}

/// What the interval says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    NoDetectableChange,
    TooFewRequests,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoDetectableChange => "no detectable change at this n",
            Verdict::TooFewRequests => "too few steady requests to tell",
        }
    }
}

/// One percentile's change.
#[derive(Clone, Debug, Serialize)]
pub struct StatChange {
    pub stat: String,
    pub base: Option<f64>,
    pub other: Option<f64>,
    pub change: Option<f64>,
    pub change_pct: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MetricChange {
    pub metric: String,
    pub label: String,
    pub changes: Vec<StatChange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_diff: Option<MedianDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Whether the runs generated the same tokens, request by request (by `output_hash`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct OutputCheck {
    /// Requests with the same index in both runs.
    pub compared: usize,
    pub differing: usize,
    /// The first request index whose output differs.
    pub first_differing: Option<u64>,
    /// Requests at the same index with a different prompt length, output length or batch.
    pub workload_differs: usize,
    /// Header config keys (model, seed, dtype, ...) that differ between the runs.
    pub config_differs: Vec<String>,
}

impl OutputCheck {
    pub fn outputs_differ(&self) -> bool {
        self.differing > 0
    }
}

/// One part of the TTFT (by the servers' own timings) in both runs.
#[derive(Clone, Debug, Serialize)]
pub struct PartChange {
    pub part: String,
    pub label: String,
    pub base: [Option<f64>; 2],
    pub other: [Option<f64>; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_diff: Option<MedianDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One run against the baseline.
#[derive(Clone, Debug, Serialize)]
pub struct Pair {
    pub base: String,
    pub other: String,
    pub metrics: Vec<MetricChange>,
    /// Thinking and answering, when either run reasoned or called tools: TTFA, the reasoning's
    /// time and tokens, the answer's time.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<FigureChange>,
    /// Every model either run sent to (`--served-model a=3,b=1`), with n on both sides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelChange>,
    pub outputs: OutputCheck,
    /// Where the TTFT changed, part by part (p50 and p99 of each), when both servers sent
    /// their own timings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ttft_split: Vec<PartChange>,
    /// The part whose median moved most (`queue_s`, `prefill_s`, `network_client_s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_moved_most: Option<String>,
    /// Speculative decoding by the servers' count, when either drafted: each request's
    /// acceptance (%) and accepted tokens per verify step.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spec: Vec<FigureChange>,
    /// The candle engine's sampled steps in parts (`--step-parts`), when both runs sampled:
    /// each part of the prefill and of a decode step.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub step_parts: Vec<FigureChange>,
}

/// Each part of the sampled steady steps of both runs (prefill and decode apart), with the
/// bootstrap verdict on its median; empty unless both runs sampled their steps.
fn step_parts_changes(base: &Record, other: &Record, opts: &CompareOptions) -> Vec<FigureChange> {
    if base.step_parts.is_empty() || other.step_parts.is_empty() {
        return Vec::new();
    }
    use crate::event::StepParts;
    // The step itself, then each part (`None`: the step's own time).
    let rows = std::iter::once((("step", "step"), None)).chain(
        StepParts::PARTS
            .iter()
            .copied()
            .enumerate()
            .map(|(i, p)| (p, Some(i))),
    );
    let mut out = Vec::new();
    for (phase, prefill) in [("prefill", true), ("decode", false)] {
        let take = |r: &Record, part: Option<usize>| -> Vec<f64> {
            r.step_parts
                .iter()
                .filter(|p| !p.warmup && p.is_prefill() == prefill)
                .filter_map(|p| match part {
                    None => Some(p.wall_s),
                    Some(i) => p.seconds()[i],
                })
                .collect()
        };
        for ((key, label), part) in rows.clone() {
            let (a, b) = (take(base, part), take(other, part));
            if a.is_empty() && b.is_empty() {
                continue;
            }
            out.push(figure(
                &format!("{phase}_{key}_s"),
                &format!("{phase} {label}"),
                &a,
                &b,
                true,
                opts,
            ));
        }
    }
    out
}

/// Each part of the TTFT in both runs, with the bootstrap verdict on its median; empty unless
/// both runs' servers said their timings.
fn split_changes(
    base: &Record,
    other: &Record,
    opts: &CompareOptions,
) -> (Vec<PartChange>, Option<String>) {
    let (Some(a), Some(b)) = (base.summary().split, other.summary().split) else {
        return (Vec::new(), None);
    };
    let part_samples = |rec: &Record, p: Part| -> Vec<f64> {
        rec.steady().filter_map(|r| p.of_request(r)).collect()
    };
    let both = |s: &Summary| (s.n > 0).then_some([Some(s.p50), Some(s.p99)]);
    let mut out = Vec::new();
    let mut moved: Option<(Part, f64)> = None;
    for p in Part::TTFT {
        let (sa, sb) = (a.get(p), b.get(p));
        let median_diff =
            bootstrap_median_diff(&part_samples(base, p), &part_samples(other, p), opts);
        if let Some(d) = &median_diff {
            if moved.is_none_or(|(_, m)| d.diff.abs() > m.abs()) {
                moved = Some((p, d.diff));
            }
        }
        out.push(PartChange {
            part: p.key().into(),
            label: p.label().into(),
            base: both(&sa).unwrap_or([None, None]),
            other: both(&sb).unwrap_or([None, None]),
            verdict: median_diff.as_ref().map(verdict),
            median_diff,
        });
    }
    (out, moved.map(|(p, _)| p.key().to_string()))
}

/// One figure's p50 and p99 in both runs, with n (a latency in seconds, or a count).
#[derive(Clone, Debug, Serialize)]
pub struct FigureChange {
    pub figure: String,
    pub label: String,
    pub base: Summary,
    pub other: Summary,
    /// The difference of medians with its bootstrap interval (latencies only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_diff: Option<MedianDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One model's figures in both runs.
#[derive(Clone, Debug, Serialize)]
pub struct ModelChange {
    pub model: String,
    pub figures: Vec<FigureChange>,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub runs: Vec<RunSide>,
    pub pairs: Vec<Pair>,
    pub options: CompareOptions,
    /// Differences between the runs that can explain a change in latency by themselves
    /// (a server's prefix cache emptied before one run and not the other).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A warning when server runs differ in prefix-cache state: emptied before the run
/// (`--reset-prefix-cache`, cold) or not (warm: it may serve prompts an earlier run sent).
/// `records` are (label, header) pairs.
pub fn cache_warning(records: &[(String, Option<&crate::record::line::Header>)]) -> Option<String> {
    let server: Vec<(&String, bool)> = records
        .iter()
        .filter_map(|(l, h)| {
            let c = &h.as_ref()?.config;
            c.is_server().then_some((l, c.reset_prefix_cache))
        })
        .collect();
    let cold = server.iter().filter(|(_, r)| *r).count();
    if cold == 0 || cold == server.len() {
        return None;
    }
    let names = |reset: bool| {
        server
            .iter()
            .filter(|(_, r)| *r == reset)
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "the runs differ in the server's prefix cache: {} emptied it first (cold), {} did not (warm: served from prompts it had seen, TTFT can be shorter for that alone); rerun with --reset-prefix-cache on both",
        names(true),
        names(false)
    ))
}

/// The median the verdicts use (`stats::median_in_place`, numpy's p50; reorders `v`); NaN when
/// no value is finite.
fn median_of(v: &mut [f64]) -> f64 {
    median_in_place(v).unwrap_or(f64::NAN)
}

/// Bootstrap interval of `median(other) − median(base)`. `None` if either side is empty.
pub fn bootstrap_median_diff(
    base: &[f64],
    other: &[f64],
    opts: &CompareOptions,
) -> Option<MedianDiff> {
    if base.is_empty() || other.is_empty() {
        return None;
    }
    let base_median = median_of(&mut base.to_vec());
    let other_median = median_of(&mut other.to_vec());
    let mut rng = SplitMix64::new(opts.seed);
    let mut a = vec![0.0; base.len()];
    let mut b = vec![0.0; other.len()];
    let resamples = opts.resamples.max(1);
    let mut diffs = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        resample(&mut a, base, &mut rng);
        resample(&mut b, other, &mut rng);
        diffs.push(median_of(&mut b) - median_of(&mut a));
    }
    diffs.sort_by(f64::total_cmp);
    let tail = tail_pct(opts);
    Some(MedianDiff {
        base_median,
        other_median,
        diff: other_median - base_median,
        lo: percentile_sorted(&diffs, tail).unwrap_or(f64::NAN),
        hi: percentile_sorted(&diffs, 100.0 - tail).unwrap_or(f64::NAN),
        confidence: opts.confidence,
        resamples,
        seed: opts.seed,
        n_base: base.len(),
        n_other: other.len(),
    })
}

/// Fills `into` with draws from `from`, with replacement.
fn resample(into: &mut [f64], from: &[f64], rng: &mut SplitMix64) {
    for x in into.iter_mut() {
        *x = from[rng.below(from.len())];
    }
}

/// The percentile each tail of the interval leaves out (2.5 for 95 %).
fn tail_pct(opts: &CompareOptions) -> f64 {
    (1.0 - opts.confidence.clamp(0.0, 1.0)) / 2.0 * 100.0
}

/// The median of `samples` with its bootstrap interval `(median, lo, hi)`, the same way as
/// `bootstrap_median_diff` (a sweep stops a cell once this interval is narrow enough).
/// `None` if there are no samples.
pub fn bootstrap_median_ci(samples: &[f64], opts: &CompareOptions) -> Option<(f64, f64, f64)> {
    if samples.is_empty() {
        return None;
    }
    let median = median_of(&mut samples.to_vec());
    let mut rng = SplitMix64::new(opts.seed);
    let mut buf = vec![0.0; samples.len()];
    let mut medians: Vec<f64> = (0..opts.resamples.max(1))
        .map(|_| {
            resample(&mut buf, samples, &mut rng);
            median_of(&mut buf)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let tail = tail_pct(opts);
    Some((
        median,
        percentile_sorted(&medians, tail).unwrap_or(f64::NAN),
        percentile_sorted(&medians, 100.0 - tail).unwrap_or(f64::NAN),
    ))
}

/// Fewer steady requests than this on either side: no verdict.
pub const MIN_N: usize = 3;

/// The verdict for a latency (lower is better).
pub fn verdict(d: &MedianDiff) -> Verdict {
    if d.n_base < MIN_N || d.n_other < MIN_N {
        Verdict::TooFewRequests
    } else if d.lo > 0.0 {
        Verdict::Slower
    } else if d.hi < 0.0 {
        Verdict::Faster
    } else {
        Verdict::NoDetectableChange
    }
}

fn side(rec: &Record, label: &str) -> RunSide {
    let summary = rec.summary();
    let cfg = |k: &str| rec.config_str(k).unwrap_or_else(|| "?".into());
    RunSide {
        label: label.into(),
        file: rec.path.display().to_string(),
        model: rec
            .model
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_else(|| cfg("model")),
        device: cfg("device"),
        dtype: rec
            .model
            .as_ref()
            .map(|m| m.dtype.clone())
            .unwrap_or_else(|| cfg("dtype")),
        workload: format!(
            "{}/{}/{}",
            cfg("prompt_tokens"),
            cfg("output_tokens"),
            cfg("batch")
        ),
        requests: summary.requests,
        warmup_requests: summary.warmup_requests,
        settled_at: settling(rec, &SettleRule::default()).settled_at,
        steady: Metric::ALL
            .iter()
            .map(|&m| (m.key().to_string(), summary.steady.get(m)))
            .collect(),
    }
}

fn stats_of(s: &Summary) -> [(&'static str, Option<f64>); 6] {
    let v = |x: f64| (s.n > 0).then_some(x);
    [
        ("mean", v(s.mean)),
        ("p50", v(s.p50)),
        ("p90", v(s.p90)),
        ("p95", v(s.p95)),
        ("p99", v(s.p99)),
        ("max", v(s.max)),
    ]
}

fn samples(rec: &Record, m: Metric) -> Vec<f64> {
    rec.steady()
        .filter_map(|r| match m {
            Metric::Ttft => Some(r.ttft_s),
            Metric::Tpot => r.tpot_s,
            Metric::E2e => Some(r.e2e_s),
            _ => None,
        })
        .collect()
}

/// A request's place in its run: its index, and in a `--determinism` record its pass (where
/// each index comes once per pass).
fn place(r: &crate::event::RequestDone) -> (u64, Option<&str>) {
    (r.index, r.origin.as_ref().and_then(|o| o.pass.as_deref()))
}

fn output_check(base: &Record, other: &Record) -> OutputCheck {
    let by_place: std::collections::HashMap<(u64, Option<&str>), &crate::event::RequestDone> =
        base.requests.iter().map(|r| (place(r), r)).collect();
    let mut check = OutputCheck::default();
    for r in &other.requests {
        let Some(b) = by_place.get(&place(r)) else {
            continue;
        };
        check.compared += 1;
        if (b.prompt_tokens, b.output_tokens, b.batch)
            != (r.prompt_tokens, r.output_tokens, r.batch)
        {
            check.workload_differs += 1;
        }
        if b.output_hash != r.output_hash {
            check.differing += 1;
            if check.first_differing.is_none() {
                check.first_differing = Some(r.index);
            }
        }
    }
    for key in [
        "model",
        "seed",
        "dtype",
        "device",
        "prompt_tokens",
        "output_tokens",
        "batch",
        "stop_at_eos",
    ] {
        let a = base.config_value(key).unwrap_or(Value::Null);
        let b = other.config_value(key).unwrap_or(Value::Null);
        if a != b {
            check.config_differs.push(format!("{key}: {a} → {b}"));
        }
    }
    // Different traffic is a different experiment: a dataset of other rows, another mix.
    let traffic = |r: &Record| r.config().and_then(|c| c.traffic.clone());
    for d in crate::event::TrafficInfo::differences(traffic(base).as_ref(), traffic(other).as_ref())
    {
        check.config_differs.push(format!("traffic: {d}"));
    }
    check
}

/// A figure of both runs as summaries of their samples, with the bootstrap when it is a
/// latency.
fn figure(
    key: &str,
    label: &str,
    a: &[f64],
    b: &[f64],
    latency: bool,
    opts: &CompareOptions,
) -> FigureChange {
    let median_diff = latency.then(|| bootstrap_median_diff(a, b, opts)).flatten();
    FigureChange {
        figure: key.into(),
        label: label.into(),
        base: Summary::of(a),
        other: Summary::of(b),
        verdict: median_diff.as_ref().map(verdict),
        median_diff,
    }
}

/// A server request's first answer token (its TTFT when it did not reason).
fn ttfa(r: &crate::event::RequestDone) -> Option<f64> {
    match &r.parts {
        Some(p) => p.ttfa_s,
        None => Some(r.ttft_s),
    }
}

/// Thinking and answering of both runs, when either had reasoning or tool calls.
fn reasoning_changes(base: &Record, other: &Record, opts: &CompareOptions) -> Vec<FigureChange> {
    let has = |r: &Record| r.steady().any(|q| q.parts.is_some());
    if !has(base) && !has(other) {
        return Vec::new();
    }
    let served = |r: &Record| -> Vec<crate::event::RequestDone> {
        r.steady().filter(|q| q.client.is_some()).cloned().collect()
    };
    let (a, b) = (served(base), served(other));
    let take = |v: &[crate::event::RequestDone],
                f: &dyn Fn(&crate::event::RequestDone) -> Option<f64>| {
        v.iter().filter_map(f).collect::<Vec<f64>>()
    };
    let reasoning_s = |q: &crate::event::RequestDone| {
        Some(q.parts.as_ref().and_then(|p| p.reasoning_s).unwrap_or(0.0))
    };
    let tokens = |q: &crate::event::RequestDone| {
        Some(q.parts.as_ref().map_or(0, |p| p.reasoning_tokens) as f64)
    };
    let answer = |q: &crate::event::RequestDone| ttfa(q).map(|t| (q.e2e_s - t).max(0.0));
    vec![
        figure(
            "ttfa_s",
            "TTFA",
            &take(&a, &ttfa),
            &take(&b, &ttfa),
            true,
            opts,
        ),
        figure(
            "reasoning_s",
            "reasoning time",
            &take(&a, &reasoning_s),
            &take(&b, &reasoning_s),
            true,
            opts,
        ),
        figure(
            "answer_s",
            "answer time",
            &take(&a, &answer),
            &take(&b, &answer),
            true,
            opts,
        ),
        figure(
            "reasoning_tokens",
            "reasoning tokens",
            &take(&a, &tokens),
            &take(&b, &tokens),
            false,
            opts,
        ),
    ]
}

/// Speculative decoding of both runs by their servers' count, when either drafted.
fn spec_changes(base: &Record, other: &Record, opts: &CompareOptions) -> Vec<FigureChange> {
    let timings = |q: &crate::event::RequestDone| {
        q.client
            .as_ref()
            .and_then(|c| c.server.clone())
            .filter(|t| t.draft_tokens.is_some())
    };
    let take = |r: &Record, f: &dyn Fn(&crate::event::ServerTimings) -> Option<f64>| {
        r.steady()
            .filter_map(|q| timings(q).and_then(|t| f(&t)))
            .collect::<Vec<f64>>()
    };
    let acceptance = |t: &crate::event::ServerTimings| t.acceptance_rate().map(|a| a * 100.0);
    let per_step = |t: &crate::event::ServerTimings| match (t.draft_accepted, t.spec_steps) {
        (Some(a), Some(n)) if n > 0 => Some(a as f64 / n as f64),
        _ => None,
    };
    let (a, b) = (take(base, &acceptance), take(other, &acceptance));
    if a.is_empty() && b.is_empty() {
        return Vec::new();
    }
    let mut out = vec![figure(
        "acceptance_pct",
        "acceptance (%)",
        &a,
        &b,
        false,
        opts,
    )];
    let (a, b) = (take(base, &per_step), take(other, &per_step));
    if !a.is_empty() || !b.is_empty() {
        out.push(figure(
            "accepted_per_step",
            "accepted per verify step",
            &a,
            &b,
            false,
            opts,
        ));
    }
    out
}

/// Every model either run sent to, its figures in both.
fn model_changes(base: &Record, other: &Record, opts: &CompareOptions) -> Vec<ModelChange> {
    let mut names: Vec<String> = base
        .steady()
        .chain(other.steady())
        .filter_map(|r| r.model.clone())
        .collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|model| {
            let of = |r: &Record, f: &dyn Fn(&crate::event::RequestDone) -> Option<f64>| {
                r.steady()
                    .filter(|q| q.model.as_deref() == Some(model.as_str()))
                    .filter_map(f)
                    .collect::<Vec<f64>>()
            };
            let pair =
                |key: &str, label: &str, f: &dyn Fn(&crate::event::RequestDone) -> Option<f64>| {
                    figure(key, label, &of(base, f), &of(other, f), true, opts)
                };
            ModelChange {
                figures: vec![
                    pair("ttft_s", "TTFT", &|q| Some(q.ttft_s)),
                    pair("ttfa_s", "TTFA", &ttfa),
                    pair("tpot_s", "TPOT", &|q| q.tpot_s),
                    pair("e2e_s", "E2E", &|q| Some(q.e2e_s)),
                ],
                model,
            }
        })
        .collect()
}

/// Compares records already read; the first is the baseline.
pub fn compare_records(records: &[Record], opts: &CompareOptions) -> Comparison {
    let label = |i: usize| -> String {
        if i < 26 {
            char::from(b'A' + i as u8).to_string()
        } else {
            format!("R{i}")
        }
    };
    let runs: Vec<RunSide> = records
        .iter()
        .enumerate()
        .map(|(i, r)| side(r, &label(i)))
        .collect();
    let mut pairs = Vec::new();
    if let Some(base) = records.first() {
        for (i, other) in records.iter().enumerate().skip(1) {
            let mut metrics = Vec::new();
            for (mi, &m) in Metric::ALL.iter().enumerate() {
                let (a, b) = (runs[0].steady[mi].1, runs[i].steady[mi].1);
                let changes = stats_of(&a)
                    .iter()
                    .zip(stats_of(&b).iter())
                    .map(|(&(name, x), &(_, y))| {
                        let change = x.zip(y).map(|(x, y)| y - x);
                        StatChange {
                            stat: name.into(),
                            base: x,
                            other: y,
                            change,
                            change_pct: change
                                .zip(x)
                                .and_then(|(c, x)| (x != 0.0).then(|| c / x * 100.0)),
                        }
                    })
                    .collect();
                let median_diff = matches!(m, Metric::Ttft | Metric::Tpot | Metric::E2e)
                    .then(|| bootstrap_median_diff(&samples(base, m), &samples(other, m), opts))
                    .flatten();
                metrics.push(MetricChange {
                    metric: m.key().into(),
                    label: m.label().into(),
                    changes,
                    verdict: median_diff.as_ref().map(verdict),
                    median_diff,
                });
            }
            let (ttft_split, split_moved_most) = split_changes(base, other, opts);
            pairs.push(Pair {
                base: runs[0].label.clone(),
                other: runs[i].label.clone(),
                metrics,
                reasoning: reasoning_changes(base, other, opts),
                models: model_changes(base, other, opts),
                outputs: output_check(base, other),
                ttft_split,
                split_moved_most,
                spec: spec_changes(base, other, opts),
                step_parts: step_parts_changes(base, other, opts),
            });
        }
    }
    let headers: Vec<(String, Option<&crate::record::line::Header>)> = runs
        .iter()
        .zip(records)
        .map(|(side, r)| (side.label.clone(), r.header.as_ref()))
        .collect();
    Comparison {
        runs,
        pairs,
        options: *opts,
        warnings: cache_warning(&headers).into_iter().collect(),
    }
}

/// Where the TTFT's change went, by the servers' own timings.
fn split_markdown(p: &Pair) -> String {
    if p.ttft_split.is_empty() {
        return String::new();
    }
    let m = Metric::Ttft;
    let v = |x: Option<f64>| or_missing(x.map(|x| format_value(m, x)));
    let gap = |a: Option<f64>, b: Option<f64>| or_missing(a.zip(b).map(|(a, b)| signed(m, b - a)));
    let (a, b) = (&p.base, &p.other);
    let mut t = TextTable::new()
        .left(["part"])
        .right([
            format!("{a} p50"),
            format!("{b} p50"),
            "change".into(),
            format!("{a} p99"),
            format!("{b} p99"),
            "change".into(),
        ])
        .left(["median"]);
    for c in &p.ttft_split {
        t.row([
            c.label.to_string(),
            v(c.base[0]),
            v(c.other[0]),
            gap(c.base[0], c.other[0]),
            v(c.base[1]),
            v(c.other[1]),
            gap(c.base[1], c.other[1]),
            c.verdict.map_or(MISSING, |v| v.words()).to_string(),
        ]);
    }
    let mut out =
        "\n### Where the TTFT went (the servers' own timings)\n\n".to_string() + &t.markdown();
    if let Some(key) = &p.split_moved_most {
        let label = Part::TTFT
            .iter()
            .find(|q| q.key() == key)
            .map_or(key.as_str(), |q| q.label());
        out.push_str(&format!("\nThe part that moved most: {label}.\n"));
    }
    out
}

fn signed(m: Metric, v: f64) -> String {
    let s = format_value(m, v.abs());
    if v < 0.0 {
        format!("−{s}")
    } else {
        format!("+{s}")
    }
}

/// One figure's cells: p50 and p99 of both runs, n of both, and the median's change.
fn figure_cells(f: &FigureChange) -> [String; 6] {
    let latency = f.median_diff.is_some() || f.figure.ends_with("_s");
    let v = |s: &Summary, x: f64| {
        if s.n == 0 {
            MISSING.to_string()
        } else if latency {
            format_value(Metric::Ttft, x)
        } else {
            format!("{x:.1}")
        }
    };
    let change = match (&f.median_diff, f.verdict) {
        (Some(d), Some(verdict)) => {
            format!("{} ({})", signed(Metric::Ttft, d.diff), verdict.words())
        }
        _ => MISSING.into(),
    };
    [
        v(&f.base, f.base.p50),
        v(&f.other, f.other.p50),
        v(&f.base, f.base.p99),
        v(&f.other, f.other.p99),
        format!("{} / {}", f.base.n, f.other.n),
        change,
    ]
}

/// A table of figures of both runs (`figure_cells`), after the `lead` columns that name them.
fn figure_table(p: &Pair, lead: &[&str]) -> TextTable {
    let (a, b) = (&p.base, &p.other);
    TextTable::new()
        .left(lead)
        .right([
            format!("{a} p50"),
            format!("{b} p50"),
            format!("{a} p99"),
            format!("{b} p99"),
            format!("n {a} / {b}"),
        ])
        .left(["median change"])
}

fn signed_pct(v: f64) -> String {
    if v < 0.0 {
        format!("−{:.1} %", -v)
    } else {
        format!("+{v:.1} %")
    }
}

impl Comparison {
    /// True if any run generated different outputs than the baseline.
    pub fn outputs_differ(&self) -> bool {
        self.pairs.iter().any(|p| p.outputs.outputs_differ())
    }

    /// The exit code `compare` ends with: 0, or [`EXIT_OUTPUTS_DIFFER`].
    pub fn exit_code(&self) -> i32 {
        if self.outputs_differ() {
            EXIT_OUTPUTS_DIFFER
        } else {
            0
        }
    }

    /// The loud lines, one per run whose outputs differ (also printed to stderr by the CLI).
    pub fn alarms(&self) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|p| p.outputs.outputs_differ())
            .map(|p| {
                let o = &p.outputs;
                let mut line = format!(
                    "!!! OUTPUTS DIFFER: {} of {} requests of {} generated different tokens than {} (first at request #{}): this is not the same computation",
                    o.differing,
                    o.compared,
                    p.other,
                    p.base,
                    o.first_differing.unwrap_or_default()
                );
                if o.workload_differs > 0 || !o.config_differs.is_empty() {
                    line.push_str(" (the runs' configurations differ too: expected if intended)");
                }
                line
            })
            .collect()
    }

    pub fn render(&self, format: CompareFormat) -> String {
        match format {
            CompareFormat::Json => {
                let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("type".into(), "comparison".into());
                    obj.insert("outputs_differ".into(), self.outputs_differ().into());
                    obj.insert("alarms".into(), self.alarms().into());
                }
                v.to_string() + "\n"
            }
            CompareFormat::Md => self.to_markdown(),
        }
    }

    fn to_markdown(&self) -> String {
        let mut out = String::new();
        for a in self.alarms() {
            out.push_str(&format!("\n**{a}**\n"));
        }
        for w in &self.warnings {
            out.push_str(&format!("\nWarning: {w}.\n"));
        }
        let mut runs = TextTable::new()
            .left([""])
            .left(self.runs.iter().map(|r| r.label.as_str()));
        let mut row = |name: &str, f: &dyn Fn(&RunSide) -> String| {
            runs.row(std::iter::once(name.to_string()).chain(self.runs.iter().map(f)));
        };
        row("file", &|r| format!("`{}`", r.file));
        row("model", &|r| r.model.clone());
        row("device / dtype", &|r| format!("{} / {}", r.device, r.dtype));
        row("prompt/output/batch", &|r| r.workload.clone());
        row("requests (warmup)", &|r| {
            format!("{} ({})", r.requests, r.warmup_requests)
        });
        row("settled at", &|r| {
            r.settled_at
                .map_or("not settled".into(), |i| format!("#{i}"))
        });
        out.push_str("\n## Runs\n\n");
        out.push_str(&runs.markdown());
        for p in &self.pairs {
            out.push_str(&format!(
                "\n## {} vs {} (steady state)\n\n",
                p.other, p.base
            ));
            let mut t = TextTable::new().left(["metric", "stat"]).right([
                p.base.as_str(),
                p.other.as_str(),
                "change",
                "change %",
            ]);
            for (mc, &m) in p.metrics.iter().zip(Metric::ALL.iter()) {
                for c in &mc.changes {
                    let v = |x: Option<f64>| or_missing(x.map(|x| format_value(m, x)));
                    t.row([
                        mc.label.to_string(),
                        c.stat.to_string(),
                        v(c.base),
                        v(c.other),
                        or_missing(c.change.map(|x| signed(m, x))),
                        or_missing(c.change_pct.map(signed_pct)),
                    ]);
                }
            }
            out.push_str(&t.markdown());
            let o = &self.options;
            out.push_str(&format!(
                "\n### Verdicts (median of {} − median of {}; bootstrap {:.0} % CI, {} resamples, seed {})\n\n",
                p.other,
                p.base,
                o.confidence * 100.0,
                o.resamples,
                o.seed
            ));
            for mc in &p.metrics {
                let (Some(d), Some(v)) = (&mc.median_diff, mc.verdict) else {
                    continue;
                };
                let m = Metric::ALL
                    .iter()
                    .copied()
                    .find(|m| m.key() == mc.metric)
                    .unwrap_or(Metric::E2e);
                let rel = if d.base_median != 0.0 {
                    d.diff / d.base_median * 100.0
                } else {
                    0.0
                };
                let what = match v {
                    Verdict::Faster | Verdict::Slower => format!("**{}**", v.words()),
                    _ => v.words().to_string(),
                };
                out.push_str(&format!(
                    "- {}: {what}: {} ({}), {:.0} % CI [{}, {}]; n = {} vs {}.\n",
                    mc.label,
                    signed(m, d.diff),
                    signed_pct(rel),
                    d.confidence * 100.0,
                    signed(m, d.lo),
                    signed(m, d.hi),
                    d.n_base,
                    d.n_other
                ));
            }
            if !p.reasoning.is_empty() {
                let mut t = figure_table(p, &["figure"]);
                for f in &p.reasoning {
                    t.row(std::iter::once(f.label.to_string()).chain(figure_cells(f)));
                }
                out.push_str("\n### Thinking and answering (steady requests)\n\n");
                out.push_str(&t.markdown());
            }
            if !p.models.is_empty() {
                let mut t = figure_table(p, &["model", "figure"]);
                for m in &p.models {
                    for f in &m.figures {
                        let lead = [m.model.to_string(), f.label.to_string()];
                        t.row(lead.into_iter().chain(figure_cells(f)));
                    }
                }
                out.push_str("\n### By model (steady requests)\n\n");
                out.push_str(&t.markdown());
            }
            out.push_str(&split_markdown(p));
            if !p.spec.is_empty() {
                let mut t = figure_table(p, &["figure"]);
                for f in &p.spec {
                    t.row(std::iter::once(f.label.to_string()).chain(figure_cells(f)));
                }
                out.push_str(
                    "\n### Speculative decoding (the servers' count, steady requests)\n\n",
                );
                out.push_str(&t.markdown());
            }
            if !p.step_parts.is_empty() {
                let mut t = figure_table(p, &["part"]);
                for f in &p.step_parts {
                    t.row(std::iter::once(f.label.to_string()).chain(figure_cells(f)));
                }
                out.push_str("\n### Where a step's time goes (sampled steady steps)\n\n");
                out.push_str(&t.markdown());
            }
            out.push_str("\n### Outputs\n\n");
            let oc = &p.outputs;
            if oc.compared == 0 {
                out.push_str("- Not checked: no request index in common.\n");
            } else if oc.outputs_differ() {
                out.push_str(&format!(
                    "- **DIFFERENT**: {} of {} requests generated different tokens (output_hash), first at request #{}.\n",
                    oc.differing,
                    oc.compared,
                    oc.first_differing.unwrap_or_default()
                ));
            } else {
                out.push_str(&format!(
                    "- Same: all {} requests with the same index generated identical tokens (output_hash).\n",
                    oc.compared
                ));
            }
            if oc.workload_differs > 0 {
                out.push_str(&format!(
                    "- {} requests had a different prompt length, output length or batch.\n",
                    oc.workload_differs
                ));
            }
            for c in &oc.config_differs {
                out.push_str(&format!("- Config differs: {c}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_shift() {
        let a: Vec<f64> = (0..40)
            .map(|i| 1.0 + 0.01 * ((i * 7) % 10) as f64)
            .collect();
        let b: Vec<f64> = a.iter().map(|x| x + 0.5).collect();
        let o = CompareOptions::default();
        let d1 = bootstrap_median_diff(&a, &b, &o).unwrap();
        let d2 = bootstrap_median_diff(&a, &b, &o).unwrap();
        assert_eq!(d1, d2, "same seed, same interval");
        assert!((d1.diff - 0.5).abs() < 1e-12);
        assert!(d1.lo > 0.4 && d1.hi < 0.6, "{d1:?}");
        assert_eq!(verdict(&d1), Verdict::Slower);
        let back = bootstrap_median_diff(&b, &a, &o).unwrap();
        assert_eq!(verdict(&back), Verdict::Faster);
        let same = bootstrap_median_diff(&a, &a, &o).unwrap();
        assert_eq!(same.diff, 0.0);
        assert_eq!(verdict(&same), Verdict::NoDetectableChange);
        let few = bootstrap_median_diff(&a[..2], &b[..2], &o).unwrap();
        assert_eq!(verdict(&few), Verdict::TooFewRequests);
        assert!(bootstrap_median_diff(&[], &b, &o).is_none());
    }

    /// A `--determinism` record has each index once per pass: requests match by both.
    #[test]
    fn outputs_match_by_index_and_pass() {
        use crate::event::{Origin, RequestDone};
        let done = |index: u64, pass: &str, hash: &str| RequestDone {
            index,
            output_hash: hash.into(),
            origin: Some(Box::new(Origin {
                pass: Some(pass.into()),
                ..Origin::default()
            })),
            ..RequestDone::default()
        };
        let mut rec = Record::new(std::path::Path::new("determinism.jsonl"));
        rec.requests = vec![done(0, "concurrency 1", "a"), done(0, "concurrency 4", "b")];
        let check = output_check(&rec, &rec);
        assert_eq!((check.compared, check.differing), (2, 0));
    }
}
