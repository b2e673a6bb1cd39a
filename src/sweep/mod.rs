//! Sweeps: a grid of workloads over one engine, each cell measured like a run (warmup, then
//! repetitions or until the median TPOT is known precisely enough), then what the grid shows
//! (`analysis`) and the table (`table`).
//!
//! The cell loop knows no engine: the caller starts each cell's engine (`Starter`), the loop
//! folds its events with the same `run::Run` a run uses, records them, and reports progress
//! through `Update`s, so the headless CLI prints a line per cell and a dashboard could forward
//! the same updates over a channel.

pub mod analysis;
pub mod plot;
pub mod record;
pub mod table;

use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use serde::Serialize;

use crate::engine::workload::LenSpec;
use crate::event::{Control, Event, ModelInfo, RequestDone, StopReason};
use crate::record::compare::{bootstrap_median_ci, CompareOptions};
use crate::record::line::{CellEnd, CellLine, CellParams, CellStatus, Line, SweepConfig};
use crate::record::{Recorder, RunSummary};
use crate::run::{since, Consumer, Run, Signals};
use crate::stats::{roofline, Metric, Slo, Summary};

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
}

/// One cell per value of a length: a list is an axis, a single length or a range one value.
pub fn len_axis(spec: &LenSpec) -> Vec<LenSpec> {
    match spec {
        LenSpec::List(v) => v.iter().map(|&n| LenSpec::Fixed(n)).collect(),
        other => vec![other.clone()],
    }
}

impl Axes {
    /// Every cell, the load (batch, concurrency, rate) innermost so each curve fills in
    /// before the next starts.
    pub fn cells(&self) -> Vec<CellParams> {
        let mut cells = Vec::new();
        for prompt in &self.prompt {
            for output in &self.output {
                for &batch in &self.batch {
                    for &concurrency in &self.concurrency {
                        for &rate in &self.rate {
                            cells.push(CellParams {
                                batch,
                                prompt_tokens: prompt.to_string(),
                                output_tokens: output.to_string(),
                                concurrency,
                                rate,
                            });
                        }
                    }
                }
            }
        }
        cells
    }
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
    /// Achieved decode bandwidth per steady request (bytes read per step / TPOT), for models
    /// whose size is known.
    pub decode_bw: Vec<f64>,
}

impl CellTally {
    /// Folds one finished request in (warmup requests are skipped).
    pub fn observe(&mut self, r: &RequestDone, slo: &Slo, model: Option<&ModelInfo>) {
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
    pub ttft: Summary,
    pub tpot: Summary,
    pub itl: Summary,
    pub e2e: Summary,
    /// Medians over steady requests: B·P / TTFT and B / TPOT.
    pub prefill_tok_s: Option<f64>,
    pub decode_tok_s: Option<f64>,
    /// Generated tokens per second of the cell: over the steady wall time for a server, over
    /// the sum of E2E for the candle engine (requests one after another).
    pub output_tok_s: Option<f64>,
    /// Sequences per second that met every limit of the SLO (with no SLO: every sequence).
    pub goodput_seq_s: Option<f64>,
    /// Steady requests that met the SLO, as a fraction.
    pub slo_met_share: Option<f64>,
    /// The highest per-request peak (allocator on CPU, device memory on CUDA), else the
    /// process's or device's peak.
    pub peak_memory_bytes: Option<u64>,
    /// Median achieved decode bandwidth (weights + KV cache read per step / TPOT), bytes/s.
    pub decode_bw_bytes_s: Option<f64>,
    pub elapsed_s: f64,
}

/// How a cell ended, and the time figures the fold alone does not know.
#[derive(Clone, Debug, PartialEq)]
pub struct CellEnding {
    pub status: CellStatus,
    pub reason: Option<String>,
    pub elapsed_s: f64,
    pub steady_wall_s: Option<f64>,
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
        let duration = if is_server(&params) {
            ending.steady_wall_s.and_then(positive)
        } else {
            positive(tally.busy_s)
        };
        let per_s = |x: u64| duration.map(|d| x as f64 / d);
        let res = &summary.resources;
        CellResult {
            cell,
            status: ending.status,
            reason: ending.reason,
            n: tally.steady,
            warmup_requests: summary.warmup_requests,
            failed_requests: summary.failed_requests,
            ttft: summary.steady.get(Metric::Ttft),
            tpot: summary.steady.get(Metric::Tpot),
            itl: summary.steady.get(Metric::Itl),
            e2e: summary.steady.get(Metric::E2e),
            prefill_tok_s: p50(Metric::PrefillTokS),
            decode_tok_s: p50(Metric::DecodeTokS),
            output_tok_s: per_s(tally.output_tokens).filter(|_| tally.steady > 0),
            goodput_seq_s: per_s(tally.met_seqs).filter(|_| tally.steady > 0),
            slo_met_share: (tally.steady > 0).then(|| tally.met as f64 / tally.steady as f64),
            peak_memory_bytes: res
                .request_peak_bytes
                .or(res.device_used_peak_bytes)
                .or(res.rss_peak_bytes),
            decode_bw_bytes_s: crate::stats::median(&tally.decode_bw),
            elapsed_s: ending.elapsed_s,
            params,
        }
    }

    /// Whether the cell measured anything.
    pub fn measured(&self) -> bool {
        self.status != CellStatus::Failed && self.n > 0
    }
}

/// What the cell loop reports as it goes (a UI forwards these over a channel).
#[derive(Clone, Copy, Debug)]
pub enum Update<'a> {
    /// Cell `cell` of `of` starts.
    CellStarted {
        cell: usize,
        of: usize,
        params: &'a CellParams,
    },
    /// An event of the current cell's engine, after the fold and the record have it.
    Event { cell: usize, event: &'a Event },
    /// The cell ended.
    CellDone { of: usize, result: &'a CellResult },
}

/// Stops a cell's engine (and its telemetry) and waits for its thread.
pub type Finish = Box<dyn FnOnce()>;

/// Starts a cell's engine sending on `events` and obeying `control`; `Err` is the one-line
/// reason the cell cannot run (a workload the model cannot take).
pub type Starter<'a> =
    dyn FnMut(&CellParams, Sender<Event>, Receiver<Control>) -> Result<Finish, String> + 'a;

/// Every cell the loop got to, and whether it was interrupted.
#[derive(Clone, Debug, Default)]
pub struct SweepOutcome {
    pub cells: Vec<CellResult>,
    /// The signal's stop reason when Ctrl-C or a signal ended the sweep early.
    pub interrupted: Option<StopReason>,
    /// The model the first cell that started reported.
    pub model: Option<ModelInfo>,
    pub elapsed_s: f64,
}

/// Runs the cells of `config` one after another, each through `start`.
pub fn run_cells(
    config: &SweepConfig,
    slo: &Slo,
    start: &mut Starter,
    mut recorder: Option<&mut Recorder>,
    signals: &Signals,
    observe: &mut dyn FnMut(Update),
) -> SweepOutcome {
    let started = Instant::now();
    let reps = Repetitions::of(config);
    let of = config.cells.len();
    let mut out = SweepOutcome::default();
    for (cell, params) in config.cells.iter().enumerate() {
        if let Some(reason) = signals.stop_reason() {
            out.interrupted = Some(reason);
            break;
        }
        observe(Update::CellStarted { cell, of, params });
        if let Some(r) = recorder.as_deref_mut() {
            r.write_line(&Line::Cell(CellLine {
                cell,
                params: params.clone(),
            }));
        }
        let measured = measure_cell(
            cell,
            params,
            &reps,
            slo,
            start,
            recorder.as_deref_mut(),
            signals,
            started,
            observe,
        );
        let (result, run, interrupted) = measured;
        if let Some(r) = recorder.as_deref_mut() {
            r.write_line(&Line::CellEnd(CellEnd {
                cell,
                status: result.status.clone(),
                reason: result.reason.clone(),
                elapsed_s: result.elapsed_s,
                steady_wall_s: run.steady_wall_s,
                summary: run.summary.to_json(),
            }));
        }
        if out.model.is_none() {
            out.model = run.model;
        }
        observe(Update::CellDone {
            of,
            result: &result,
        });
        out.cells.push(result);
        if interrupted.is_some() {
            out.interrupted = interrupted;
            break;
        }
    }
    out.elapsed_s = started.elapsed().as_secs_f64();
    out
}

/// What a cell's fold ended with, besides its result.
struct CellRun {
    summary: RunSummary,
    steady_wall_s: Option<f64>,
    model: Option<ModelInfo>,
}

#[allow(clippy::too_many_arguments)]
fn measure_cell(
    cell: usize,
    params: &CellParams,
    reps: &Repetitions,
    slo: &Slo,
    start: &mut Starter,
    mut recorder: Option<&mut Recorder>,
    signals: &Signals,
    sweep_started: Instant,
    observe: &mut dyn FnMut(Update),
) -> (CellResult, CellRun, Option<StopReason>) {
    let t0 = Instant::now();
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let finish = match start(params, ev_tx, ctl_rx) {
        Ok(f) => f,
        Err(reason) => {
            let ending = CellEnding {
                status: CellStatus::Failed,
                reason: Some(reason),
                elapsed_s: t0.elapsed().as_secs_f64(),
                steady_wall_s: None,
            };
            let summary = RunSummary::default();
            let result = CellResult::new(
                cell,
                params.clone(),
                ending,
                &summary,
                &CellTally::default(),
            );
            let run = CellRun {
                summary,
                steady_wall_s: None,
                model: None,
            };
            return (result, run, None);
        }
    };
    let mut run = Run::new();
    let mut tally = CellTally::default();
    let mut consumer = Consumer {
        events: &ev_rx,
        control: &ctl_tx,
        signals,
        interrupted: None,
    };
    let mut stop_sent = false;
    let mut first_steady: Option<Instant> = None;
    let mut last_steady: Option<Instant> = None;
    while run.live() {
        let Some(ev) = consumer.next(&mut run, recorder.as_deref_mut(), || since(sweep_started))
        else {
            continue;
        };
        match &ev {
            Event::RequestStarted { warmup: false, .. } => {
                first_steady.get_or_insert_with(Instant::now);
            }
            Event::RequestDone(r) if !r.warmup => {
                last_steady = Some(Instant::now());
                tally.observe(r, slo, run.info.as_ref().map(|i| &i.model));
                if !stop_sent && reps.enough(&tally) {
                    stop_sent = true;
                    let _ = ctl_tx.send(Control::Stop(StopReason::RequestLimit));
                }
            }
            Event::RequestFailed(f) if !f.warmup => last_steady = Some(Instant::now()),
            _ => {}
        }
        observe(Update::Event { cell, event: &ev });
    }
    let interrupted = consumer.interrupted.take();
    // Nobody reads any more: a producer blocked on a full queue fails its send and ends.
    drop(consumer);
    drop(ev_rx);
    let _ = ctl_tx.send(Control::Stop(
        interrupted.clone().unwrap_or(StopReason::RequestLimit),
    ));
    finish();

    let (status, reason) = if let Some(msg) = &run.failed {
        (CellStatus::Failed, Some(crate::util::one_line(msg)))
    } else if run.completed_requests == 0 && run.failed_requests > 0 {
        (
            CellStatus::Failed,
            Some(format!(
                "every request failed ({}); the last: {}",
                run.failed_requests,
                run.last_failure.as_deref().unwrap_or("?")
            )),
        )
    } else if let Some(reason) = &interrupted {
        (CellStatus::Stopped, Some(reason.words()))
    } else if let (Some(p), false) = (reps.precision, stop_sent) {
        // The engine stopped at the cap: say the interval never got narrow enough.
        (
            CellStatus::Ok,
            Some(format!(
                "precision not reached: the median's 95 % CI was still wider than ±{:.1} % after {} requests",
                p * 100.0,
                tally.steady
            )),
        )
    } else {
        (CellStatus::Ok, None)
    };
    let steady_wall_s = first_steady
        .zip(last_steady)
        .map(|(a, b)| b.saturating_duration_since(a).as_secs_f64());
    let summary = run.summary();
    let ending = CellEnding {
        status,
        reason,
        elapsed_s: t0.elapsed().as_secs_f64(),
        steady_wall_s,
    };
    let result = CellResult::new(cell, params.clone(), ending, &summary, &tally);
    let cell_run = CellRun {
        summary,
        steady_wall_s,
        model: run.info.map(|i| i.model),
    };
    (result, cell_run, interrupted)
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
            output_hash: String::new(),
            tokens: None,
            text: None,
            client: None,
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
        };
        let cells = axes.cells();
        let shown: Vec<(usize, &str, &str)> = cells
            .iter()
            .map(|c| (c.batch, c.prompt_tokens.as_str(), c.output_tokens.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (1, "16", "4..8"),
                (2, "16", "4..8"),
                (1, "32", "4..8"),
                (2, "32", "4..8")
            ]
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
            tally.observe(&req(i, false, 0.01, 0.002), &slo, None);
            assert!(!reps.enough(&tally));
        }
        tally.observe(&req(4, false, 0.01, 0.002), &slo, None);
        assert!(reps.enough(&tally));
        // Samples spread over ±50 %: the median is not known to 5 % from ten of them.
        let mut wide = CellTally::default();
        for i in 0..10 {
            let tpot = 0.002 * (0.5 + (i % 5) as f64 * 0.25);
            wide.observe(&req(i, false, 0.01, tpot), &slo, None);
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
        t.observe(&req(0, true, 1.0, 1.0), &slo, None);
        t.observe(&req(1, false, 0.01, 0.002), &slo, None);
        t.observe(&req(2, false, 0.01, 0.004), &slo, None);
        assert_eq!(
            (t.steady, t.met, t.met_seqs, t.output_tokens),
            (2, 1, 2, 20)
        );
        assert!((t.busy_s - (0.018 + 0.026)).abs() < 1e-12);
    }
}
