//! A sweep folded from its one stream of events, as a run is (`run::Run`): the sweep engine
//! (`sweep::engine`) sends `CellStarted`, then the cell's engine speaks the run protocol on the
//! same channel up to its `Finished`, and the next cell begins; the sweep's own `Finished` comes
//! when no cell is open. The headless sweep and the dashboard apply the same events to this
//! same fold, so both have the same cells, grid and table from the same code.
//!
//! The fold is pure (no I/O, no clock): time comes in as `t_s`, the consumer's clock. What it
//! wants done (end a cell that has measured enough; write a cell's end line) it leaves to be
//! taken: `take_control`, `take_closed`.

use crate::event::{CellParams, Control, Event, ModelInfo, StopReason};
use crate::record::line::{CellEnd, CellStatus, SweepConfig};
use crate::run::Run;
use crate::stats::{Slo, Summary};

use super::{analysis, CellEnding, CellResult, CellTally, Repetitions};

/// One cell of a sweep as the dashboard's grid shows it: running (`ok` none) or ended.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRow {
    /// 0-based, of `cells`.
    pub cell: usize,
    pub cells: usize,
    /// The cell in words (`CellParams::words`).
    pub label: String,
    /// `None` while it runs; then whether it was measured (`false`: failed or stopped).
    pub ok: Option<bool>,
    pub tpot_p50_s: Option<f64>,
    pub ttft_p50_s: Option<f64>,
    /// Decode tok/s (candle) or output tok/s (servers).
    pub throughput: Option<f64>,
    /// Share of steady requests that met the SLO (only with `--slo`).
    pub slo_met_share: Option<f64>,
    /// Why it failed, in one line.
    pub reason: Option<String>,
}

impl GridRow {
    fn of(cell: usize, cells: usize, params: &CellParams, result: Option<&CellResult>) -> GridRow {
        let p50 = |s: &Summary| (s.n > 0).then_some(s.p50);
        GridRow {
            cell,
            cells,
            label: params.words(),
            ok: result.map(|r| r.status == CellStatus::Ok),
            tpot_p50_s: result.and_then(|r| p50(&r.tpot)),
            ttft_p50_s: result.and_then(|r| p50(&r.ttft)),
            throughput: result.and_then(analysis::throughput),
            slo_met_share: result.and_then(|r| r.slo_met_share),
            reason: result.and_then(|r| r.reason.clone()),
        }
    }
}

/// The cell being measured.
#[derive(Clone, Debug)]
struct OpenCell {
    cell: usize,
    params: CellParams,
    started_s: f64,
    tally: CellTally,
    first_steady_s: Option<f64>,
    last_steady_s: Option<f64>,
    /// The stopping rule asked for the cell's end.
    end_asked: bool,
}

/// The fold of a sweep's events.
#[derive(Clone, Debug)]
pub struct SweepFold {
    pub config: SweepConfig,
    pub slo: Slo,
    reps: Repetitions,
    open: Option<OpenCell>,
    /// Every cell that ended, in grid order.
    pub results: Vec<CellResult>,
    /// The grid so far: one row per cell that started.
    pub grid: Vec<GridRow>,
    /// The model the first cell that started reported.
    pub model: Option<ModelInfo>,
    /// The sweep's own `Finished`: how it ended.
    pub stop: Option<StopReason>,
    control: Option<Control>,
    closed: Option<CellEnd>,
}

impl SweepFold {
    pub fn new(config: SweepConfig, slo: Slo) -> SweepFold {
        SweepFold {
            reps: Repetitions::of(&config),
            config,
            slo,
            open: None,
            results: Vec::new(),
            grid: Vec::new(),
            model: None,
            stop: None,
            control: None,
            closed: None,
        }
    }

    /// Whether the sweep is still running (no `Finished` of its own yet).
    pub fn live(&self) -> bool {
        self.stop.is_none()
    }

    /// The cell being measured, if one is.
    pub fn open_cell(&self) -> Option<usize> {
        self.open.as_ref().map(|c| c.cell)
    }

    /// The stop reason when a signal or the user cut the sweep short.
    pub fn interrupted(&self) -> Option<&StopReason> {
        self.stop
            .as_ref()
            .filter(|r| matches!(r, StopReason::UserStop | StopReason::Signal(_)))
    }

    /// Cells of the grid that never ran.
    pub fn not_run(&self) -> usize {
        self.config.cells.len().saturating_sub(self.results.len())
    }

    /// Folds one event into `run` (the open cell's fold, fresh at each cell) and the sweep.
    pub fn apply(&mut self, t_s: f64, run: &mut Run, event: &Event) {
        match event {
            Event::CellStarted(c) => {
                *run = Run::new();
                self.open = Some(OpenCell {
                    cell: c.cell,
                    params: c.params.clone(),
                    started_s: t_s,
                    tally: CellTally::default(),
                    first_steady_s: None,
                    last_steady_s: None,
                    end_asked: false,
                });
                let row = GridRow::of(c.cell, c.cells, &c.params, None);
                match self.grid.iter_mut().find(|r| r.cell == c.cell) {
                    Some(r) => *r = row,
                    None => self.grid.push(row),
                }
                return;
            }
            Event::Finished(reason) if self.open.is_none() => {
                self.stop = Some(reason.clone());
                return;
            }
            _ => {}
        }
        run.apply(event);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        match event {
            Event::RequestStarted { warmup: false, .. } => {
                open.first_steady_s.get_or_insert(t_s);
            }
            Event::RequestDone(r) if !r.warmup => {
                open.last_steady_s = Some(t_s);
                open.tally
                    .observe(r, &self.slo, run.info.as_ref().map(|i| &i.model));
                if !open.end_asked && self.reps.enough(&open.tally) {
                    open.end_asked = true;
                    self.control = Some(Control::EndCell);
                }
            }
            Event::RequestFailed(f) if !f.warmup => open.last_steady_s = Some(t_s),
            Event::Finished(_) => self.close(t_s, run),
            _ => {}
        }
    }

    /// The engine went away without the sweep's `Finished`.
    pub fn disconnected(&mut self, t_s: f64, run: &mut Run) {
        if self.open.is_some() {
            run.disconnected();
            self.close(t_s, run);
        }
        self.stop.get_or_insert(StopReason::Error);
    }

    /// A control message the fold wants sent to the sweep engine (the stopping rule's
    /// `EndCell`), once.
    pub fn take_control(&mut self) -> Option<Control> {
        self.control.take()
    }

    /// The end line of the cell that just closed, for the record (once).
    pub fn take_closed(&mut self) -> Option<CellEnd> {
        self.closed.take()
    }

    /// The result of the cell that closed last.
    pub fn last_result(&self) -> Option<&CellResult> {
        self.results.last()
    }

    fn close(&mut self, t_s: f64, run: &Run) {
        let Some(open) = self.open.take() else {
            return;
        };
        let interrupted = matches!(
            run.stop,
            Some(StopReason::UserStop) | Some(StopReason::Signal(_))
        );
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
        } else if interrupted {
            (
                CellStatus::Stopped,
                run.stop.as_ref().map(StopReason::words),
            )
        } else if let (Some(p), false) = (self.reps.precision, open.end_asked) {
            // The engine stopped at the cap: say the interval never got narrow enough.
            (
                CellStatus::Ok,
                Some(format!(
                    "precision not reached: the median's 95 % CI was still wider than ±{:.1} % after {} requests",
                    p * 100.0,
                    open.tally.steady
                )),
            )
        } else {
            (CellStatus::Ok, None)
        };
        let steady_wall_s = open
            .first_steady_s
            .zip(open.last_steady_s)
            .map(|(a, b)| (b - a).max(0.0));
        let summary = run.summary();
        let ending = CellEnding {
            status,
            reason,
            elapsed_s: (t_s - open.started_s).max(0.0),
            steady_wall_s,
        };
        let result = CellResult::new(
            open.cell,
            open.params.clone(),
            ending,
            &summary,
            &open.tally,
        );
        self.closed = Some(CellEnd {
            cell: open.cell,
            status: result.status.clone(),
            reason: result.reason.clone(),
            elapsed_s: result.elapsed_s,
            steady_wall_s,
            summary: summary.to_json(),
        });
        if self.model.is_none() {
            self.model = run.info.as_ref().map(|i| i.model.clone());
        }
        let cells = self.config.cells.len();
        let row = GridRow::of(open.cell, cells, &open.params, Some(&result));
        match self.grid.iter_mut().find(|r| r.cell == open.cell) {
            Some(r) => *r = row,
            None => self.grid.push(row),
        }
        self.results.push(result);
    }
}
