//! Sweeps: a grid of workloads over one engine, each cell measured like a run (warmup, then
//! repetitions or until the median TPOT is known precisely enough), then what the grid shows
//! (`analysis`) and the table (`table`).
//!
//! A sweep is an engine like the others (`engine`): it sequences the cells on the one event
//! channel, each cell's engine speaking the run protocol; the consumer (headless or the
//! dashboard) folds the stream with `fold::SweepFold`, one `fold::RunFold` per cell.
//!
//! `--runs N` (`repeat`) is carried out by the same machinery: N cells of one workload.

pub mod analysis;
pub mod engine;
pub mod findings_text;
pub mod fold;
/// The held interval of a cell's load (a statistic of its own, in `stats`).
use crate::stats::held;
pub mod plot;
pub mod record;
pub mod repeat;
pub mod report;
pub mod search;
pub mod sustain;
pub mod table;

use serde::Serialize;

use crate::event::{CellLen, CellParams, FloatDtype, ModelInfo, RequestDone, RequestFailed};
use crate::record::line::{CellStatus, PrefixCache, SweepConfig};
use crate::report::compare::{bootstrap_median_ci, CompareOptions};
use crate::stats::{roofline, Metric, Slo, Summary};
use crate::summary::RunSummary;
use crate::traffic::len::LenSpec;

/// Bootstrap resamples for the stopping rule (checked after every steady request).
const PRECISION_RESAMPLES: usize = 1000;

/// The grid's axes, as given on the command line; a list becomes one cell per value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Axes {
    pub batch: Vec<usize>,
    pub prompt: Vec<LenSpec>,
    pub output: Vec<LenSpec>,
    /// Server sweeps; `[None]` for the candle engine.
    pub concurrency: Vec<Option<usize>>,
    /// Server sweeps, open loop; `[None]` otherwise.
    pub rate: Vec<Option<f64>>,
    /// The candle engine: the models (as given), dtypes (`f16`) and CPU thread counts when
    /// the grid varies them; `[None]` (the run's own) otherwise.
    pub model: Vec<Option<String>>,
    pub dtype: Vec<Option<FloatDtype>>,
    pub threads: Vec<Option<usize>>,
}

/// One cell per value of a length: a list is an axis, a single length or a range one value.
pub fn len_axis(spec: &LenSpec) -> Vec<LenSpec> {
    match spec {
        LenSpec::List(v) => v.iter().map(|&n| LenSpec::Fixed(n)).collect(),
        other => vec![other.clone()],
    }
}

/// One cell of the grid, typed: what its run is planned from. `prompt` `None` means text
/// prompts of their own length.
#[derive(Clone, Debug, PartialEq)]
pub struct CellSpec {
    pub batch: usize,
    pub prompt: Option<LenSpec>,
    pub output: LenSpec,
    pub concurrency: Option<usize>,
    pub rate: Option<f64>,
    /// Set when the grid varies it (else the run's own).
    pub model: Option<String>,
    pub dtype: Option<FloatDtype>,
    pub threads: Option<usize>,
}

/// A length as a cell's record names it: a number when fixed, else as written.
pub fn cell_len(spec: &LenSpec) -> CellLen {
    match spec {
        LenSpec::Fixed(n) => CellLen::Tokens(*n),
        other => CellLen::Written(other.to_string()),
    }
}

/// The prompt axis' value with text prompts of their own length.
pub const TEXT_LENGTH: &str = "text";

impl CellSpec {
    /// The cell's parameters as the record, the table and the grid show them.
    pub fn params(&self) -> CellParams {
        CellParams {
            batch: self.batch,
            prompt_tokens: self
                .prompt
                .as_ref()
                .map_or(CellLen::Written(TEXT_LENGTH.into()), cell_len),
            output_tokens: cell_len(&self.output),
            concurrency: self.concurrency,
            rate: self.rate,
            model: self.model.clone(),
            dtype: self.dtype,
            threads: self.threads,
            hold: false,
        }
    }
}

impl Axes {
    /// Every cell: the model, dtype and threads outermost (so the cells of one model and
    /// dtype run together, on the model loaded once), the load (batch, concurrency, rate)
    /// innermost so each curve fills in before the next starts. An empty prompt axis is one
    /// cell per other value, with text prompts of their own length; an empty model, dtype or
    /// threads axis is the run's own.
    pub fn cells(&self) -> Vec<CellSpec> {
        let prompts: Vec<Option<LenSpec>> = if self.prompt.is_empty() {
            vec![None]
        } else {
            self.prompt.iter().cloned().map(Some).collect()
        };
        fn own<T: Clone>(v: &[Option<T>]) -> Vec<Option<T>> {
            if v.is_empty() {
                vec![None]
            } else {
                v.to_vec()
            }
        }
        let threads = if self.threads.is_empty() {
            vec![None]
        } else {
            self.threads.clone()
        };
        let base = CellSpec {
            batch: 1,
            prompt: None,
            output: LenSpec::Fixed(1),
            concurrency: None,
            rate: None,
            model: None,
            dtype: None,
            threads: None,
        };
        let cells = expand(vec![base], &own(&self.model), |c, v| c.model = v);
        let cells = expand(cells, &own(&self.dtype), |c, v| c.dtype = v);
        let cells = expand(cells, &threads, |c, v| c.threads = v);
        let cells = expand(cells, &prompts, |c, v| c.prompt = v);
        let cells = expand(cells, &self.output, |c, v| c.output = v);
        let cells = expand(cells, &self.batch, |c, v| c.batch = v);
        let cells = expand(cells, &self.concurrency, |c, v| c.concurrency = v);
        expand(cells, &self.rate, |c, v| c.rate = v)
    }
}

/// Every cell of `cells` once per value of an axis, the cells outer and the values inner.
fn expand<T: Clone>(
    cells: Vec<CellSpec>,
    values: &[T],
    set: impl Fn(&mut CellSpec, T),
) -> Vec<CellSpec> {
    let mut out = Vec::with_capacity(cells.len() * values.len());
    for c in cells {
        for v in values {
            let mut c = c.clone();
            set(&mut c, v.clone());
            out.push(c);
        }
    }
    out
}

/// What grows along a curve of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadAxis {
    Batch,
    Concurrency,
    Rate,
}

impl LoadAxis {
    /// The axis the cells vary the load on: the rate when any cell has one, else concurrency
    /// for servers, else the batch.
    pub fn of(cells: &[CellParams]) -> LoadAxis {
        if cells.iter().any(|c| c.rate.is_some()) {
            LoadAxis::Rate
        } else if cells.iter().any(|c| c.concurrency.is_some()) {
            LoadAxis::Concurrency
        } else {
            LoadAxis::Batch
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LoadAxis::Batch => "batch",
            LoadAxis::Concurrency => "concurrency",
            LoadAxis::Rate => "rate",
        }
    }

    /// The cell's load on this axis.
    pub fn load(self, p: &CellParams) -> f64 {
        match self {
            LoadAxis::Batch => p.batch as f64,
            LoadAxis::Concurrency => p.concurrency.unwrap_or(1) as f64,
            LoadAxis::Rate => p.rate.unwrap_or(0.0),
        }
    }
}

/// Whether a cell ran against a server (its throughput divides by wall time, not by the sum
/// of E2E, since its requests overlap).
pub fn is_server(p: &CellParams) -> bool {
    p.concurrency.is_some() || p.rate.is_some()
}

/// How a server cell offered its load (`None` for the candle engine).
pub fn load_of(p: &CellParams) -> Option<held::Load> {
    match (p.rate, p.concurrency) {
        (Some(_), _) => Some(held::Load::Open),
        (None, Some(c)) => Some(held::Load::Closed(c)),
        (None, None) => None,
    }
}

/// How many steady requests a cell measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Repetitions {
    /// Exactly this many, or with `precision` at least this many.
    pub min: u64,
    /// Stop once the bootstrap 95 % CI of the median TPOT is within this fraction of it.
    pub precision: Option<f64>,
    /// With `precision`: the cap.
    pub max: u64,
}

impl Repetitions {
    pub fn of(config: &SweepConfig) -> Repetitions {
        Repetitions {
            min: config.repetitions,
            precision: config.precision,
            max: config
                .precision
                .and(config.max_repetitions)
                .unwrap_or(config.repetitions)
                .max(config.repetitions),
        }
    }

    /// Whether `tally` has measured enough (with `precision`; a fixed count is left to the
    /// engine, which stops itself after warmup + `max` requests).
    pub fn enough(&self, tally: &CellTally) -> bool {
        let Some(precision) = self.precision else {
            return false;
        };
        if tally.steady < self.min {
            return false;
        }
        let samples = if tally.tpot_s.is_empty() {
            &tally.ttft_s
        } else {
            &tally.tpot_s
        };
        ci_within(samples, precision)
    }
}

/// Whether the bootstrap 95 % CI of the median of `samples` lies within ±`precision` of it.
pub fn ci_within(samples: &[f64], precision: f64) -> bool {
    let opts = CompareOptions {
        resamples: PRECISION_RESAMPLES,
        ..CompareOptions::default()
    };
    match bootstrap_median_ci(samples, &opts) {
        Some((median, lo, hi)) if median > 0.0 => {
            (median - lo).max(hi - median) <= precision * median
        }
        _ => false,
    }
}

/// What a cell's steady requests add up to beyond the run's summary: SLO hits, tokens, busy
/// time, the samples the stopping rule needs, and decode bandwidth. Folded live from events
/// and from a record's request lines alike.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CellTally {
    pub steady: u64,
    /// Steady requests that failed: misses of the SLO (goodput's rule).
    pub failed: u64,
    /// Steady requests that met every limit of the SLO (all of them without one).
    pub met: u64,
    /// Sequences of those requests.
    pub met_seqs: u64,
    /// Generated tokens of steady requests, every sequence.
    pub output_tokens: u64,
    /// Sum of steady E2E: the run time of requests that ran one after another.
    pub busy_s: f64,
    pub ttft_s: Vec<f64>,
    pub tpot_s: Vec<f64>,
    /// E2E / output tokens of each steady request (for an NTPOT limit).
    pub ntpot_s: Vec<f64>,
    /// Achieved decode bandwidth per steady request (bytes read per step / TPOT), for models
    /// whose size is known.
    pub decode_bw: Vec<f64>,
    /// Every request that ended with a known end time (warmup and failed ones too: they held
    /// the load), for the throughput over the held interval (`held`).
    pub spans: Vec<held::Span>,
}

impl CellTally {
    /// Folds one finished request in, ended at `end_s` on the consumer's clock when known
    /// (its span); warmup requests add only their span.
    pub fn observe(
        &mut self,
        r: &RequestDone,
        end_s: Option<f64>,
        slo: &Slo,
        model: Option<&ModelInfo>,
    ) {
        if let Some(t) = end_s {
            self.spans.push(held::Span::done(r, t, slo.met_by(r)));
        }
        if r.warmup {
            return;
        }
        self.steady += 1;
        if slo.met_by(r) {
            self.met += 1;
            self.met_seqs += r.batch as u64;
        }
        self.output_tokens += crate::stats::goodput::output_tokens(r);
        self.busy_s += r.e2e_s;
        self.ttft_s.push(r.ttft_s);
        if let Some(n) = crate::stats::ntpot(r) {
            self.ntpot_s.push(n);
        }
        if let Some(tpot) = r.tpot_s {
            self.tpot_s.push(tpot);
            if let Some(m) = model.filter(|m| m.weight_bytes > 0) {
                let bytes = roofline::decode_bytes_per_step(
                    m.weight_bytes,
                    m,
                    r.prompt_tokens,
                    r.output_tokens,
                    r.batch,
                );
                if tpot > 0.0 {
                    self.decode_bw.push(bytes / tpot);
                }
            }
        }
    }

    /// A failed request that ended at `end_s`: it held a slot of the load.
    pub fn observe_failed(&mut self, f: &RequestFailed, end_s: f64) {
        self.spans.push(held::Span::failed(f, end_s));
        if !f.warmup {
            self.failed += 1;
        }
    }
}

/// One measured cell: its parameters, how it ended, and the figures of a row of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellResult {
    pub cell: usize,
    pub params: CellParams,
    pub status: CellStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Steady requests (the n of every latency below but ITL, which counts steps).
    pub n: u64,
    pub warmup_requests: u64,
    pub failed_requests: u64,
    /// Failed requests past the warmup: each a miss of the SLO, counted in `slo_met_share`
    /// and, ranked above every completed request, in its percentiles (`slo_broken`).
    #[serde(default)]
    pub steady_failed: u64,
    pub ttft: Summary,
    pub tpot: Summary,
    pub itl: Summary,
    pub e2e: Summary,
    /// E2E / output tokens of the steady requests (inference-perf's NTPOT).
    #[serde(default)]
    pub ntpot: Summary,
    /// A server cell: whether its load was one the server can hold (`sustain`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sustain: Option<sustain::Sustain>,
    /// Medians over steady requests: B·P / TTFT and B / TPOT.
    pub prefill_tok_s: Option<f64>,
    pub decode_tok_s: Option<f64>,
    /// Generated tokens per second of the cell: for a server, over the interval in which its
    /// load was held (`held`; over the steady wall time when it never was, see `held_s`); for
    /// the candle engine over the sum of E2E (requests one after another).
    pub output_tok_s: Option<f64>,
    /// Sequences per second that met every limit of the SLO (with no SLO: every sequence), on
    /// the same basis as `output_tok_s`.
    pub goodput_seq_s: Option<f64>,
    /// Requests that completed per second, on the same basis as `output_tok_s`.
    #[serde(default)]
    pub requests_s: Option<f64>,
    /// A server cell: how long its load was held (what `output_tok_s` divides by); `None` when
    /// it never was (fewer requests than the concurrency) or the record has no request times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_s: Option<f64>,
    /// A server cell: steady tokens over the steady wall time (first steady start to last
    /// end), ramp-up and drain included: the figure other tools print, biased low.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_output_tok_s: Option<f64>,
    /// Steady requests that met the SLO, as a fraction of the steady requests that completed
    /// or failed (a failure is a miss).
    pub slo_met_share: Option<f64>,
    /// The highest per-request peak (allocator on CPU, device memory on CUDA), else the
    /// process's or device's peak.
    pub peak_memory_bytes: Option<u64>,
    /// Median achieved decode bandwidth (weights + KV cache read per step / TPOT), bytes/s.
    pub decode_bw_bytes_s: Option<f64>,
    /// A server cell: its prefix cache emptied just before it (`cold`) or not (`warm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCache>,
    pub elapsed_s: f64,
    /// Thinking and answering apart, when the cell's output had reasoning or tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<crate::stats::ShapeSummary>,
    /// Every figure per model, when the cell sent to several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<crate::stats::ModelSummary>,
    /// A server cell whose server sent its own timings: where its TTFT went (as a run's
    /// summary writes it).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "split_json")]
    pub ttft_split: Option<crate::stats::SplitSummary>,
    /// A server cell whose server drafted: speculative decoding by its count (as a run's
    /// summary writes it).
    #[serde(
        rename = "speculative_decoding",
        skip_serializing_if = "Option::is_none",
        serialize_with = "spec_json"
    )]
    pub spec: Option<crate::stats::SpecSummary>,
}

fn spec_json<S: serde::Serializer>(
    spec: &Option<crate::stats::SpecSummary>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    spec.as_ref().map(|t| t.to_json()).serialize(s)
}

fn split_json<S: serde::Serializer>(
    split: &Option<crate::stats::SplitSummary>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    split.as_ref().map(|t| t.to_json()).serialize(s)
}

/// How a cell ended, and the time figures the fold alone does not know.
#[derive(Clone, Debug, PartialEq)]
pub struct CellEnding {
    pub status: CellStatus,
    pub reason: Option<String>,
    pub elapsed_s: f64,
    pub steady_wall_s: Option<f64>,
    pub prefix_cache: Option<PrefixCache>,
}

fn positive(x: f64) -> Option<f64> {
    (x.is_finite() && x > 0.0).then_some(x)
}

impl CellResult {
    pub fn new(
        cell: usize,
        params: CellParams,
        ending: CellEnding,
        summary: &RunSummary,
        tally: &CellTally,
    ) -> CellResult {
        let p50 = |m: Metric| {
            let s = summary.steady.get(m);
            (s.n > 0).then_some(s.p50)
        };
        let wall = ending.steady_wall_s.and_then(positive);
        let duration = if is_server(&params) {
            wall
        } else {
            positive(tally.busy_s)
        };
        let per_s = |x: u64| duration.map(|d| x as f64 / d);
        let measured = tally.steady > 0;
        let held = load_of(&params)
            .filter(|_| measured)
            .and_then(|load| held::held(&tally.spans, load));
        let (output_tok_s, goodput_seq_s, requests_s) = match &held {
            Some(h) => (
                Some(h.output_tok_s()),
                Some(h.goodput_seq_s()),
                Some(h.requests_s()),
            ),
            None => (
                per_s(tally.output_tokens).filter(|_| measured),
                per_s(tally.met_seqs).filter(|_| measured),
                per_s(tally.steady).filter(|_| measured),
            ),
        };
        let wall_output_tok_s = if is_server(&params) && measured {
            wall.map(|w| tally.output_tokens as f64 / w)
        } else {
            None
        };
        let res = &summary.resources;
        CellResult {
            cell,
            status: ending.status,
            reason: ending.reason,
            n: tally.steady,
            warmup_requests: summary.warmup_requests,
            failed_requests: summary.failed_requests,
            steady_failed: tally.failed,
            ttft: summary.steady.get(Metric::Ttft),
            tpot: summary.steady.get(Metric::Tpot),
            itl: summary.steady.get(Metric::Itl),
            e2e: summary.steady.get(Metric::E2e),
            ntpot: Summary::of(&tally.ntpot_s),
            sustain: load_of(&params)
                .filter(|_| measured)
                .and_then(|load| sustain::judge(&tally.spans, load == held::Load::Open)),
            prefill_tok_s: p50(Metric::PrefillTokS),
            decode_tok_s: p50(Metric::DecodeTokS),
            output_tok_s,
            goodput_seq_s,
            requests_s,
            held_s: held.map(|h| h.seconds()),
            wall_output_tok_s,
            slo_met_share: {
                let counted = tally.steady + tally.failed;
                (counted > 0).then(|| tally.met as f64 / counted as f64)
            },
            peak_memory_bytes: res
                .request_peak_bytes
                .or(res.device_used_peak_bytes)
                .or(res.rss_peak_bytes),
            decode_bw_bytes_s: crate::stats::median(&tally.decode_bw),
            prefix_cache: ending.prefix_cache,
            elapsed_s: ending.elapsed_s,
            reasoning: summary.reasoning.clone(),
            models: summary.models.clone(),
            ttft_split: summary.split.clone(),
            spec: summary.spec.clone(),
            params,
        }
    }

    /// Whether the cell measured anything.
    pub fn measured(&self) -> bool {
        self.status != CellStatus::Failed && self.n > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(index: u64, warmup: bool, ttft: f64, tpot: f64) -> RequestDone {
        RequestDone {
            index,
            warmup,
            batch: 2,
            prompt_tokens: 8,
            output_tokens: 5,
            ttft_s: ttft,
            tpot_s: Some(tpot),
            e2e_s: ttft + 4.0 * tpot,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            peak_alloc_bytes: Some(1000),
            ..Default::default()
        }
    }

    #[test]
    fn lists_are_axes_and_the_load_is_innermost() {
        let axes = Axes {
            batch: vec![1, 2],
            prompt: len_axis(&LenSpec::List(vec![16, 32])),
            output: len_axis(&LenSpec::Range(4, 8)),
            concurrency: vec![None],
            rate: vec![None],
            ..Axes::default()
        };
        let cells: Vec<CellParams> = axes.cells().iter().map(CellSpec::params).collect();
        let shown: Vec<(usize, String, String)> = cells
            .iter()
            .map(|c| {
                (
                    c.batch,
                    c.prompt_tokens.to_string(),
                    c.output_tokens.to_string(),
                )
            })
            .collect();
        let want = |b: usize, p: &str| (b, p.to_string(), "4..8".to_string());
        assert_eq!(
            shown,
            [want(1, "16"), want(2, "16"), want(1, "32"), want(2, "32")]
        );
        assert_eq!(cells[0].prompt_tokens, CellLen::Tokens(16));
        assert_eq!(
            serde_json::to_value(&cells[0]).unwrap(),
            serde_json::json!({"batch": 1, "prompt_tokens": 16, "output_tokens": "4..8"})
        );
        assert_eq!(LoadAxis::of(&cells), LoadAxis::Batch);
        let server = CellParams {
            concurrency: Some(4),
            ..CellParams::default()
        };
        assert_eq!(
            LoadAxis::of(std::slice::from_ref(&server)),
            LoadAxis::Concurrency
        );
        assert!(is_server(&server));
        assert_eq!(LoadAxis::Concurrency.load(&server), 4.0);
    }

    #[test]
    fn the_stopping_rule_waits_for_a_narrow_interval() {
        let reps = Repetitions {
            min: 5,
            precision: Some(0.05),
            max: 100,
        };
        let slo = Slo::default();
        let mut tally = CellTally::default();
        // Identical samples: the interval is a point, but not before the minimum.
        for i in 0..4 {
            tally.observe(&req(i, false, 0.01, 0.002), None, &slo, None);
            assert!(!reps.enough(&tally));
        }
        tally.observe(&req(4, false, 0.01, 0.002), None, &slo, None);
        assert!(reps.enough(&tally));
        // Samples spread over ±50 %: the median is not known to 5 % from ten of them.
        let mut wide = CellTally::default();
        for i in 0..10 {
            let tpot = 0.002 * (0.5 + (i % 5) as f64 * 0.25);
            wide.observe(&req(i, false, 0.01, tpot), None, &slo, None);
        }
        assert!(!reps.enough(&wide));
        assert!(ci_within(&wide.tpot_s, 0.6));
        // Fixed repetitions are the engine's to count.
        let fixed = Repetitions {
            precision: None,
            ..reps
        };
        assert!(!fixed.enough(&tally));
    }

    #[test]
    fn the_tally_skips_warmup_and_counts_slo_hits() {
        let slo = Slo::parse("tpot=3ms").unwrap_or_default();
        let mut t = CellTally::default();
        t.observe(&req(0, true, 1.0, 1.0), None, &slo, None);
        t.observe(&req(1, false, 0.01, 0.002), None, &slo, None);
        t.observe(&req(2, false, 0.01, 0.004), None, &slo, None);
        assert_eq!(
            (t.steady, t.met, t.met_seqs, t.output_tokens),
            (2, 1, 2, 20)
        );
        assert!((t.busy_s - (0.018 + 0.026)).abs() < 1e-12);
    }
}
