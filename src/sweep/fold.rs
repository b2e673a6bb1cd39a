//! A sweep folded from its one stream of events, as a run is (`fold::RunFold`): the sweep engine
//! (`sweep::engine`) sends `CellStarted`, then the cell's engine speaks the run protocol on the
//! same channel up to its `Finished`, and the next cell begins; the sweep's own `Finished` comes
//! when no cell is open. The headless sweep and the dashboard apply the same events to this
//! same fold, so both have the same cells, grid and table from the same code.
//!
//! The fold is pure (no I/O, no clock): time comes in as `t_s`, the consumer's clock. What it
//! wants done (end a cell that has measured enough; write a cell's end line) it leaves to be
//! taken: `take_control`, `take_closed`.

use std::collections::VecDeque;

use crate::event::{CellParams, Control, Event, ModelInfo, Notice, StopReason};
use crate::fold::RunFold;
use crate::record::line::{CellEnd, CellStatus, PrefixCache, SweepConfig};
use crate::stats::{Slo, Summary};

use super::search::Search;
use super::{analysis, is_server, CellEnding, CellResult, CellTally, Repetitions};

/// One cell of a sweep as the dashboard's grid shows it: running (`ok` none) or ended.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRow {
    /// 0-based, of `cells`.
    pub cell: usize,
    pub cells: usize,
    /// The cell in words (`CellParams::words`; a server's load first).
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
    /// A `--find-max` probe: whether its p99 met the SLO (`None` for a grid's cell, or while
    /// it runs).
    pub probe: Option<bool>,
}

impl GridRow {
    fn of(
        cell: usize,
        cells: usize,
        params: &CellParams,
        result: Option<&CellResult>,
        probe: Option<bool>,
    ) -> GridRow {
        let p50 = |s: &Summary| (s.n > 0).then_some(s.p50);
        GridRow {
            cell,
            cells,
            label: label(params),
            ok: result.map(|r| r.status == CellStatus::Ok),
            tpot_p50_s: result.and_then(|r| p50(&r.tpot)),
            ttft_p50_s: result.and_then(|r| p50(&r.ttft)),
            throughput: result.and_then(analysis::throughput),
            slo_met_share: result.and_then(|r| r.slo_met_share),
            reason: result.and_then(|r| r.reason.clone()),
            probe,
        }
    }
}

/// A cell in the grid's words: a server's load first (its batch is always 1), so that a
/// narrow grid still shows what differs from line to line; a candle cell as `words` has it.
fn label(p: &CellParams) -> String {
    if !is_server(p) {
        return p.words();
    }
    let mut parts = p.load_words(false);
    parts.push(p.workload_words());
    parts.join(", ")
}

/// Where a `--find-max` search stands, as the dashboard's grid title shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchView {
    /// `concurrency` or `rate`.
    pub axis: &'static str,
    /// The highest load that met the SLO, and the lowest that broke it, so far.
    pub meets: Option<f64>,
    pub breaks: Option<f64>,
    pub probes: usize,
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
    /// The server's prefix cache was emptied before the cell.
    cache_reset: bool,
    /// A timed probe: when it is next looked at, and the verdict the last look gave.
    next_look_s: Option<f64>,
    last_verdict: Option<bool>,
    /// Steady requests in flight and when they started: a look counts them as arrivals (a
    /// queue that grows is mostly requests still waiting).
    in_flight: std::collections::HashMap<u64, f64>,
}

/// What the last event set from its time, for `SweepFold::stamp`.
#[derive(Clone, Copy, Debug, Default)]
struct Stamped {
    span: bool,
    first_steady: bool,
    last_steady: bool,
}

/// What a load key gets in a sweep: each cell's workload is its place in the grid.
pub const LOAD_KEYS_OFF: &str =
    "load keys are off in a sweep: each cell runs the workload of its place in the grid";

/// What a load key gets with `--runs`: the runs are comparable only if they send the same.
pub const LOAD_KEYS_OFF_RUNS: &str =
    "load keys are off with --runs: every run sends the same workload, so that the runs compare";

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
    /// `--find-max`: each workload's search, as the verdicts sent so far shape it.
    searches: Vec<(CellParams, Search)>,
    /// The search under way, for the grid's title.
    pub search: Option<SearchView>,
    control: VecDeque<Control>,
    closed: Option<CellEnd>,
    stamped: Stamped,
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
            searches: Vec::new(),
            search: None,
            control: VecDeque::new(),
            closed: None,
            stamped: Stamped::default(),
        }
    }

    /// Whether the sweep is still running (no `Finished` of its own yet).
    pub fn live(&self) -> bool {
        self.stop.is_none()
    }

    /// The stop reason when a signal or the user cut the sweep short.
    pub fn interrupted(&self) -> Option<&StopReason> {
        self.stop
            .as_ref()
            .filter(|r| matches!(r, StopReason::UserStop | StopReason::Signal(_)))
    }

    /// Cells of the grid that never ran (a search has no cells planned ahead).
    pub fn not_run(&self) -> usize {
        self.config.cells.len().saturating_sub(self.results.len())
    }

    /// Folds one event into `run` (the open cell's fold, fresh at each cell) and the sweep.
    pub fn apply(&mut self, t_s: f64, run: &mut RunFold, event: &Event) {
        self.stamped = Stamped::default();
        match event {
            Event::CellStarted(c) => {
                *run = RunFold::with_slo(self.slo);
                self.open = Some(OpenCell {
                    cell: c.cell,
                    params: c.params.clone(),
                    started_s: t_s,
                    tally: CellTally::default(),
                    first_steady_s: None,
                    last_steady_s: None,
                    end_asked: false,
                    cache_reset: false,
                    next_look_s: None,
                    last_verdict: None,
                    in_flight: Default::default(),
                });
                let row = self.row(c.cell, c.cells, &c.params, None, None);
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
            Event::RequestStarted {
                warmup: false,
                index,
                ..
            } => {
                open.in_flight.insert(*index, t_s);
                if open.first_steady_s.is_none() {
                    open.first_steady_s = Some(t_s);
                    self.stamped.first_steady = true;
                }
            }
            Event::RequestDone(r) => {
                open.in_flight.remove(&r.index);
                open.tally
                    .observe(r, Some(t_s), &self.slo, run.info.as_ref().map(|i| &i.model));
                self.stamped.span = true;
                if !r.warmup {
                    open.last_steady_s = Some(t_s);
                    self.stamped.last_steady = true;
                    if !open.end_asked && self.reps.enough(&open.tally) {
                        open.end_asked = true;
                        self.control.push_back(Control::EndCell);
                    }
                }
            }
            Event::RequestFailed(f) => {
                open.in_flight.remove(&f.index);
                open.tally.observe_failed(f, t_s);
                self.stamped.span = true;
                if !f.warmup {
                    open.last_steady_s = Some(t_s);
                    self.stamped.last_steady = true;
                }
            }
            Event::StatsReset => {
                // As the cell's run does: its figures start again from here.
                open.tally = CellTally::default();
                open.first_steady_s = None;
                open.last_steady_s = None;
            }
            Event::Notice(n) if matches!(n.as_ref(), Notice::PrefixCacheReset(_)) => {
                open.cache_reset = true;
            }
            Event::Finished(_) => self.close(t_s, run),
            _ => {}
        }
        self.tick(t_s, run);
    }

    /// Looks at a timed probe (`--probe-duration`): it has run long enough once its steady
    /// requests span the probe's duration and five times their median E2E, it has at least
    /// `--repetitions` of them, and two looks a quarter of that apart agree on its verdict
    /// (or it has run three times that long); then the fold asks for its end. Called on every
    /// event, and by the consumer when nothing comes (a probe whose requests stall still ends).
    pub fn tick(&mut self, t_s: f64, run: &RunFold) {
        let Some(probe_s) = self.config.search.as_ref().and_then(|s| s.probe_s) else {
            return;
        };
        let Some(open) = self.open.as_ref() else {
            return;
        };
        if open.end_asked || open.params.hold {
            return;
        }
        let Some(first) = open.first_steady_s else {
            return;
        };
        if open.next_look_s.is_some_and(|at| t_s < at) {
            return;
        }
        let mut e2e: Vec<f64> = open
            .tally
            .spans
            .iter()
            .filter(|s| !s.warmup)
            .map(|s| s.end_s - s.start_s)
            .collect();
        let long = probe_s.max(5.0 * crate::stats::median_in_place(&mut e2e).unwrap_or(0.0));
        let ran = t_s - first;
        if ran < long || open.tally.steady < self.reps.min {
            // Not yet: look again in a while.
            if let Some(o) = self.open.as_mut() {
                o.next_look_s = Some(t_s + (long - ran).max(0.0).min(long / 4.0).max(0.05));
            }
            return;
        }
        let verdict = {
            let result = self.result_now(t_s, run);
            analysis::meets_slo(&result, &self.slo)
        };
        let Some(open) = self.open.as_mut() else {
            return;
        };
        if open.last_verdict == Some(verdict) || ran >= 3.0 * long {
            open.end_asked = true;
            self.control.push_back(Control::EndCell);
        } else {
            open.last_verdict = Some(verdict);
            open.next_look_s = Some(t_s + long / 4.0);
        }
    }

    /// The open cell's row as it stands.
    fn result_now(&self, t_s: f64, run: &RunFold) -> CellResult {
        let Some(open) = self.open.as_ref() else {
            return CellResult::new(
                0,
                CellParams::default(),
                CellEnding {
                    status: CellStatus::Stopped,
                    reason: None,
                    elapsed_s: 0.0,
                    steady_wall_s: None,
                    prefix_cache: None,
                },
                &run.summary(),
                &CellTally::default(),
            );
        };
        let ending = CellEnding {
            status: CellStatus::Ok,
            reason: None,
            elapsed_s: (t_s - open.started_s).max(0.0),
            steady_wall_s: open
                .first_steady_s
                .zip(open.last_steady_s)
                .map(|(a, b)| (b - a).max(0.0)),
            prefix_cache: None,
        };
        // The requests still in flight arrived and have not completed.
        let mut tally = open.tally.clone();
        tally.spans.extend(
            open.in_flight
                .values()
                .map(|&start_s| crate::stats::held::Span {
                    start_s,
                    end_s: f64::INFINITY,
                    tokens: 0,
                    met_seqs: 0,
                    warmup: false,
                    ttft_s: None,
                }),
        );
        CellResult::new(
            open.cell,
            open.params.clone(),
            ending,
            &run.summary(),
            &tally,
        )
    }

    /// The consumer's own clock for the event `apply` folded last, when it is finer than the
    /// one `apply` was given (the dashboard folds a frame's events at the frame's time, and
    /// the session stamps each with the record's clock right after): the request's span and
    /// the steady wall time then come from the same times as the record's lines, so the
    /// dashboard's table is the one `report` computes from the record.
    pub fn stamp(&mut self, t_s: f64) {
        let stamped = std::mem::take(&mut self.stamped);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        if stamped.first_steady {
            open.first_steady_s = Some(t_s);
        }
        if stamped.last_steady {
            open.last_steady_s = Some(t_s);
        }
        if stamped.span {
            if let Some(s) = open.tally.spans.last_mut() {
                s.start_s += t_s - s.end_s;
                s.end_s = t_s;
            }
        }
    }

    /// The session ends without the sweep engine's `Finished` (a signal's stop it did not
    /// answer in time, between cells or inside one): the open cell closes as stopped, and the
    /// sweep ends as the signal asked.
    pub fn abandoned(&mut self, t_s: f64, run: &mut RunFold, reason: StopReason) {
        if self.open.is_some() {
            run.abandoned(reason.clone());
            self.close(t_s, run);
        }
        self.stop.get_or_insert(reason);
    }

    /// The engine went away without the sweep's `Finished`.
    pub fn disconnected(&mut self, t_s: f64, run: &mut RunFold) {
        if self.open.is_some() {
            run.disconnected();
            self.close(t_s, run);
        }
        self.stop.get_or_insert(StopReason::Error);
    }

    /// A control message the fold wants sent to the sweep engine (the stopping rule's
    /// `EndCell`, a probe's `CellVerdict`), each once, in order.
    pub fn take_control(&mut self) -> Option<Control> {
        self.control.pop_front()
    }

    /// The end line of the cell that just closed, for the record (once).
    pub fn take_closed(&mut self) -> Option<CellEnd> {
        self.closed.take()
    }

    /// `--runs N`: the run under way (1-based) and N; `None` for a sweep.
    pub fn runs(&self) -> Option<(usize, usize)> {
        let runs = self.config.repeat?.runs;
        Some((self.grid.last().map_or(1, |r| r.cell + 1), runs))
    }

    /// What a load key gets: the cells' workloads are the sweep's, not the keys'.
    pub fn load_keys_off(&self) -> &'static str {
        match self.config.repeat {
            Some(_) => LOAD_KEYS_OFF_RUNS,
            None => LOAD_KEYS_OFF,
        }
    }

    /// A cell as the progress lines name it: `run 2/3` (`--runs`), `probe 4` (a search, whose
    /// cells are not planned ahead), `cell 2/6`.
    pub fn cell_name(&self, cell: usize) -> String {
        if let Some(repeat) = self.config.repeat {
            format!("run {}/{}", cell + 1, repeat.runs)
        } else if self.config.search.is_some() {
            format!("probe {}", cell + 1)
        } else {
            format!("cell {}/{}", cell + 1, self.config.cells.len())
        }
    }

    /// The result of the cell that closed last.
    pub fn last_result(&self) -> Option<&CellResult> {
        self.results.last()
    }

    fn close(&mut self, t_s: f64, run: &RunFold) {
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
        let prefix_cache = is_server(&open.params).then_some(if open.cache_reset {
            PrefixCache::Cold
        } else {
            PrefixCache::Warm
        });
        let summary = run.summary();
        let ending = CellEnding {
            status,
            reason,
            elapsed_s: (t_s - open.started_s).max(0.0),
            steady_wall_s,
            prefix_cache,
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
            prefix_cache,
            summary: summary.to_json(),
        });
        if self.model.is_none() {
            self.model = run.info.as_ref().map(|i| i.model.clone());
        }
        // Every cell of a search is judged for the engine: a probe's verdict moves the
        // search, a hold's says whether a lower load is held next.
        let meets = self.config.search.is_some().then(|| {
            let meets = analysis::meets_slo(&result, &self.slo);
            self.control.push_back(Control::CellVerdict {
                cell: open.cell,
                meets_slo: meets,
            });
            meets
        });
        let probe = meets.filter(|_| !open.params.hold);
        if let Some(meets) = probe {
            self.searched(&open.params, meets);
        }
        let cells = if self.config.search.is_some() {
            open.cell + 1
        } else {
            self.config.cells.len()
        };
        let row = self.row(open.cell, cells, &open.params, Some(&result), probe);
        match self.grid.iter_mut().find(|r| r.cell == open.cell) {
            Some(r) => *r = row,
            None => self.grid.push(row),
        }
        self.results.push(result);
    }

    /// The grid's row of a cell: a run of `--runs N` is named by its number (every run has
    /// the one workload).
    fn row(
        &self,
        cell: usize,
        cells: usize,
        params: &CellParams,
        result: Option<&CellResult>,
        probe: Option<bool>,
    ) -> GridRow {
        let mut row = GridRow::of(cell, cells, params, result, probe);
        if self.config.repeat.is_some() {
            row.label = format!("run {}", cell + 1);
        }
        row
    }

    /// A probe's verdict folded into its workload's search (the engine's twin), for the view.
    fn searched(&mut self, params: &CellParams, meets: bool) {
        let Some(config) = &self.config.search else {
            return;
        };
        let axis = super::search::axis_of(config);
        let workload = super::search::without_load(params, axis);
        let i = match self.searches.iter().position(|(w, _)| *w == workload) {
            Some(i) => i,
            None => {
                self.searches.push((workload, Search::new(config)));
                self.searches.len() - 1
            }
        };
        let search = &mut self.searches[i].1;
        search.record(axis.load(params), meets);
        self.search = Some(SearchView {
            axis: axis.name(),
            meets: search.meets,
            breaks: search.breaks,
            probes: search.probes.len(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CellStart, RequestDone};
    use crate::record::line::SearchConfig;

    fn done(index: u64, ttft: f64, e2e: f64) -> Event {
        Event::RequestDone(Box::new(RequestDone {
            index,
            warmup: false,
            batch: 1,
            prompt_tokens: 8,
            output_tokens: 4,
            ttft_s: ttft,
            tpot_s: Some((e2e - ttft) / 3.0),
            e2e_s: e2e,
            ..Default::default()
        }))
    }

    #[test]
    fn a_probe_that_closes_sends_its_verdict_and_stamps_move_its_spans() {
        let config = SweepConfig {
            repetitions: 2,
            search: Some(SearchConfig {
                axis: "concurrency".into(),
                start: 1.0,
                lo: 1.0,
                hi: 8.0,
                tolerance: 0.0,
                workloads: vec![CellParams::default()],
                probe_s: None,
                hold_s: None,
            }),
            ..SweepConfig::default()
        };
        let slo = Slo::parse("ttft=50ms").unwrap_or_default();
        let mut fold = SweepFold::new(config, slo);
        let mut run = RunFold::new();
        let params = CellParams {
            batch: 1,
            concurrency: Some(1),
            ..CellParams::default()
        };
        fold.apply(
            0.0,
            &mut run,
            &Event::CellStarted(Box::new(CellStart {
                cell: 0,
                cells: 1,
                params,
            })),
        );
        // Folded at a frame's time (1.0), stamped with the record's clock (0.9) after.
        fold.apply(1.0, &mut run, &done(0, 0.01, 0.4));
        fold.stamp(0.9);
        let span = fold.open.as_ref().map(|o| o.tally.spans[0]);
        assert_eq!(span.map(|s| (s.start_s, s.end_s)), Some((0.9 - 0.4, 0.9)));
        fold.apply(1.3, &mut run, &done(1, 0.02, 0.4));
        fold.apply(1.3, &mut run, &Event::Finished(StopReason::RequestLimit));
        assert_eq!(
            fold.take_control(),
            Some(Control::CellVerdict {
                cell: 0,
                meets_slo: true
            })
        );
        assert_eq!(fold.take_control(), None);
        let view = fold.search.clone();
        assert_eq!(
            view.map(|v| (v.meets, v.breaks, v.probes)),
            Some((Some(1.0), None, 1))
        );
        assert_eq!(fold.grid[0].probe, Some(true));
        assert_eq!(fold.grid[0].label, "concurrency 1, prompt 1, output 1");
        // A closed loop of 1: held from the first start to the last end.
        let r = &fold.results[0];
        assert!(r.held_s.is_some_and(|h| (h - 0.8).abs() < 1e-9), "{r:?}");
        assert_eq!(r.prefix_cache, Some(PrefixCache::Warm));
    }
}
