//! The sweep engine: a sweep's cells one after another on the one event channel. For each cell
//! it sends `CellStarted`, starts the cell's engine on the same channel (whose `Finished` ends
//! the cell), and passes the consumer's controls on to it; after the last cell (or a stop) its
//! own `Finished` ends the sweep. What a cell measured is the consumer's to fold
//! (`sweep::fold`); this thread only sequences.
//!
//! A grid's cells are known before it starts. A `--find-max` search's are not: after each probe
//! the engine waits for the consumer's verdict on it (`Control::CellVerdict`, sent by the fold
//! when the probe's cell closes, on the same control channel as every key), and its `Search`
//! chooses the next load from it. Data still flows one way: measurements as events from the
//! engines to the fold, and decisions as controls from the fold back, as the stopping rule's
//! `EndCell` already did.
//!
//! `--runs N` is a sequence of this kind too: one cell's workload N times (`Cells::Repeat`),
//! with `--cooldown` of idle time between two runs, announced as a notice so every consumer
//! shows and records it.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::fold::{LOAD_KEYS_OFF, LOAD_KEYS_OFF_RUNS};
use super::search::{with_load, Search};
use crate::event::{CellParams, CellStart, Control, Cooldown, Event, Notice, StopReason};
use crate::record::line::SearchConfig;

/// The sweep engine thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const SWEEP_THREAD: &str = "infertop-engine-sweep";

/// How often the engine looks at its controls and at whether the cell's engine has ended.
const POLL: Duration = Duration::from_millis(20);

/// A cell's engine, running: its own thread, or a job on a thread that outlives it (the candle
/// engine keeps a model loaded across the cells that share it).
pub struct CellHandle(Running);

enum Running {
    Thread(JoinHandle<()>),
    /// Done when a unit arrives or the sender is dropped.
    Job {
        done: Receiver<()>,
        ended: bool,
    },
}

impl CellHandle {
    pub fn thread(handle: JoinHandle<()>) -> CellHandle {
        CellHandle(Running::Thread(handle))
    }

    /// A job whose end is signalled on `done` (after its `Finished` is sent).
    pub fn job(done: Receiver<()>) -> CellHandle {
        CellHandle(Running::Job { done, ended: false })
    }

    fn is_finished(&mut self) -> bool {
        match &mut self.0 {
            Running::Thread(h) => h.is_finished(),
            Running::Job { done, ended } => {
                if !*ended {
                    *ended = !matches!(done.try_recv(), Err(TryRecvError::Empty));
                }
                *ended
            }
        }
    }

    fn join(self) {
        match self.0 {
            Running::Thread(h) => {
                let _ = h.join();
            }
            Running::Job { done, ended } => {
                if !ended {
                    let _ = done.recv();
                }
            }
        }
    }
}

/// Starts cell `cell` (of parameters `params`) sending on `events` and obeying `control`;
/// `Err` is the one-line reason the cell cannot run (a workload the model cannot take).
pub type StartCell = Box<
    dyn FnMut(usize, &CellParams, Sender<Event>, Receiver<Control>) -> Result<CellHandle, String>
        + Send,
>;

/// What the sweep runs.
#[derive(Clone, Debug)]
pub enum Cells {
    /// A grid, every cell known before it starts.
    Grid(Vec<CellParams>),
    /// `--find-max`: per workload, probes chosen from the verdicts on the last ones.
    Search(SearchConfig),
    /// `--runs N`: the one workload `runs` times, idle for `cooldown` between two runs.
    Repeat {
        params: CellParams,
        runs: usize,
        cooldown: Duration,
    },
}

/// The sweep engine's channels, and what it answers a load key with.
struct Link<'a> {
    tx: &'a Sender<Event>,
    control: &'a Receiver<Control>,
    keys_off: &'static str,
}

/// Starts the sweep on its thread. It ends with `Event::Finished`, after every cell's own.
pub fn spawn(
    cells: Cells,
    start: StartCell,
    events: Sender<Event>,
    control: Receiver<Control>,
) -> std::io::Result<JoinHandle<()>> {
    crate::engine::spawn_engine(SWEEP_THREAD, "sweep engine", events, move |tx| {
        Ok(run(cells, start, tx, &control))
    })
}

/// Holds a search tries, each at a lower load than the last: the first at the max found.
const MAX_HOLDS: usize = 3;

/// The highest load below `load` that a probe met the SLO at.
fn next_lower_met(probes: &[(f64, bool)], load: f64) -> Option<f64> {
    probes
        .iter()
        .filter(|&&(l, meets)| meets && l < load)
        .map(|&(l, _)| l)
        .max_by(f64::total_cmp)
}

fn run(
    cells: Cells,
    mut start: StartCell,
    tx: &Sender<Event>,
    control: &Receiver<Control>,
) -> StopReason {
    let link = Link {
        tx,
        control,
        keys_off: match cells {
            Cells::Repeat { .. } => LOAD_KEYS_OFF_RUNS,
            _ => LOAD_KEYS_OFF,
        },
    };
    let link = &link;
    match cells {
        Cells::Grid(cells) => {
            for (cell, params) in cells.iter().enumerate() {
                let mut verdict = None;
                if let Some(stop) =
                    one_cell(cell, cells.len(), params, &mut start, link, &mut verdict)
                {
                    return stop;
                }
            }
        }
        Cells::Repeat {
            params,
            runs,
            cooldown,
        } => {
            for run in 0..runs {
                if run > 0 {
                    if let Some(stop) = cool_down(run - 1, cooldown, link) {
                        return stop;
                    }
                }
                let mut verdict = None;
                if let Some(stop) = one_cell(run, runs, &params, &mut start, link, &mut verdict) {
                    return stop;
                }
            }
        }
        Cells::Search(config) => {
            let mut cell = 0;
            for workload in &config.workloads {
                let mut search = Search::new(&config);
                while let Some(load) = search.next() {
                    let params = with_load(workload, search.axis, load);
                    let mut early = None;
                    if let Some(stop) =
                        one_cell(cell, cell + 1, &params, &mut start, link, &mut early)
                    {
                        return stop;
                    }
                    match verdict(cell, control, early) {
                        Ok(meets) => search.record(load, meets),
                        Err(stop) => return stop,
                    }
                    cell += 1;
                }
                // `--hold`: the highest load that met the SLO, held as one more cell. A load
                // that met it in a probe but does not hold (a queue that builds too slowly for
                // a probe to see) gives way to the next lower load a probe met it at.
                let mut next = config.hold_s.and(search.meets);
                let mut held = 0;
                while let Some(load) = next {
                    let params = CellParams {
                        hold: true,
                        ..with_load(workload, search.axis, load)
                    };
                    let mut early = None;
                    if let Some(stop) =
                        one_cell(cell, cell + 1, &params, &mut start, link, &mut early)
                    {
                        return stop;
                    }
                    let holds = match verdict(cell, control, early) {
                        Ok(holds) => holds,
                        Err(stop) => return stop,
                    };
                    cell += 1;
                    held += 1;
                    next = (!holds && held < MAX_HOLDS)
                        .then(|| next_lower_met(&search.probes, load))
                        .flatten();
                }
            }
        }
    }
    StopReason::RequestLimit
}

/// `--cooldown`: idle for `cooldown` after run `after_run` (nothing at 0), said first; returns
/// the stop the consumer asked for meanwhile (then no more runs). Pause and reset have no run to
/// reach: they are let go.
fn cool_down(after_run: usize, cooldown: Duration, link: &Link) -> Option<StopReason> {
    if cooldown.is_zero() {
        return None;
    }
    let _ = link
        .tx
        .send(Event::Notice(Box::new(Notice::Cooldown(Cooldown {
            after_run,
            seconds: cooldown.as_secs_f64(),
        }))));
    let until = Instant::now() + cooldown;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        match link.control.recv_timeout(left.min(POLL)) {
            Ok(Control::Stop(reason)) => return Some(reason),
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Some(StopReason::UserStop),
        }
    }
}

/// Runs one cell to its end; returns the stop the consumer asked for, if it did (then no more
/// cells run). A verdict on the cell that came before its engine was seen to end is kept in
/// `verdict`.
fn one_cell(
    cell: usize,
    cells: usize,
    params: &CellParams,
    start: &mut StartCell,
    link: &Link,
    verdict: &mut Option<(usize, bool)>,
) -> Option<StopReason> {
    let tx = link.tx;
    let _ = tx.send(Event::CellStarted(Box::new(CellStart {
        cell,
        cells,
        params: params.clone(),
    })));
    let (cell_tx, cell_rx) = crossbeam_channel::unbounded::<Control>();
    let mut handle = match start(cell, params, tx.clone(), cell_rx) {
        Ok(h) => h,
        Err(message) => {
            let _ = tx.send(Event::Error {
                message,
                fatal: true,
            });
            let _ = tx.send(Event::Finished(StopReason::Error));
            return None;
        }
    };
    let stop = drive(&mut handle, &cell_tx, link, verdict);
    handle.join();
    stop
}

/// The consumer's verdict on probe `cell` (`early` if it came already), or the stop it asked
/// for meanwhile.
fn verdict(
    cell: usize,
    control: &Receiver<Control>,
    early: Option<(usize, bool)>,
) -> Result<bool, StopReason> {
    if let Some((c, meets)) = early {
        if c == cell {
            return Ok(meets);
        }
    }
    loop {
        match control.recv() {
            Ok(Control::CellVerdict { cell: c, meets_slo }) if c == cell => return Ok(meets_slo),
            Ok(Control::Stop(reason)) => return Err(reason),
            Ok(_) => {}
            Err(_) => return Err(StopReason::UserStop),
        }
    }
}

/// Passes controls on to the cell's engine until it has ended; returns the stop the consumer
/// asked for, if it did.
fn drive(
    handle: &mut CellHandle,
    cell: &Sender<Control>,
    link: &Link,
    verdict: &mut Option<(usize, bool)>,
) -> Option<StopReason> {
    let mut stop: Option<StopReason> = None;
    while !handle.is_finished() {
        match link.control.recv_timeout(POLL) {
            Ok(Control::Stop(reason)) => {
                let _ = cell.send(Control::Stop(reason.clone()));
                stop = Some(reason);
            }
            // The cell has measured enough: its engine ends it as at its request limit (a
            // server's requests in flight drain).
            Ok(Control::EndCell) => {
                let _ = cell.send(Control::EndCell);
            }
            Ok(c @ (Control::Pause | Control::Resume | Control::ResetStats)) => {
                let _ = cell.send(c);
            }
            Ok(
                Control::AdjustLoad(_)
                | Control::AdjustOutputTokens(_)
                | Control::AdjustPromptTokens(_),
            ) => {
                let _ = link.tx.send(Event::Error {
                    message: link.keys_off.into(),
                    fatal: false,
                });
            }
            // The consumer judged the cell as its `Finished` arrived, before this loop saw
            // the engine end: kept for the search.
            Ok(Control::CellVerdict { cell, meets_slo }) => *verdict = Some((cell, meets_slo)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                // Nobody consumes any more: end this cell and the sweep.
                if stop.is_none() {
                    let _ = cell.send(Control::Stop(StopReason::UserStop));
                    stop = Some(StopReason::UserStop);
                }
                std::thread::sleep(POLL);
            }
        }
    }
    stop
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell's engine that sends its `Finished` at once.
    fn instant() -> StartCell {
        Box::new(|_, _, tx, _| {
            let h = std::thread::spawn(move || {
                let _ = tx.send(Event::Finished(StopReason::RequestLimit));
            });
            Ok(CellHandle::thread(h))
        })
    }

    /// A search over concurrency from 1 to 64 (holding its max when `hold_s`), the consumer's
    /// verdict on each cell from `judge(concurrency, hold)`: every cell's (concurrency, hold)
    /// in order.
    fn searched(hold_s: Option<f64>, judge: impl Fn(usize, bool) -> bool) -> Vec<(usize, bool)> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded();
        let config = SearchConfig {
            axis: "concurrency".into(),
            start: 1.0,
            lo: 1.0,
            hi: 64.0,
            tolerance: 0.0,
            workloads: vec![CellParams::default()],
            probe_s: None,
            hold_s,
        };
        let h = spawn(Cells::Search(config), instant(), tx, ctl_rx).unwrap();
        let mut cells = Vec::new();
        let mut open: Option<(usize, usize, bool)> = None;
        loop {
            match rx.recv().unwrap() {
                Event::CellStarted(c) => {
                    open = Some((c.cell, c.params.concurrency.unwrap(), c.params.hold))
                }
                Event::Finished(_) => match open.take() {
                    Some((cell, conc, hold)) => {
                        cells.push((conc, hold));
                        let meets_slo = judge(conc, hold);
                        ctl_tx
                            .send(Control::CellVerdict { cell, meets_slo })
                            .unwrap();
                    }
                    None => break,
                },
                _ => {}
            }
        }
        h.join().unwrap();
        cells
    }

    /// `--runs 3 --cooldown`: the one workload three times, a notice and the idle time between
    /// two runs; a stop during a cooldown ends the runs there.
    #[test]
    fn repeated_runs_are_the_same_cell_with_a_cooldown_between() {
        let cooldown = Duration::from_millis(150);
        let params = CellParams {
            batch: 2,
            ..CellParams::default()
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let (_ctl_tx, ctl_rx) = crossbeam_channel::unbounded();
        let cells = Cells::Repeat {
            params: params.clone(),
            runs: 3,
            cooldown,
        };
        // Run k starts after k cooldowns: a bound the receiver can check whenever it reads
        // (a receive is never before its send; a busy machine only delays it).
        let spawned = Instant::now();
        let h = spawn(cells, instant(), tx, ctl_rx).unwrap();
        let mut seen = Vec::new();
        while let Ok(ev) = rx.recv() {
            match ev {
                Event::CellStarted(c) => {
                    assert_eq!((c.cells, &c.params), (3, &params));
                    let idle = spawned.elapsed();
                    assert!(
                        idle >= cooldown * c.cell as u32,
                        "{idle:?} at run {}",
                        c.cell
                    );
                    seen.push(format!("run {}", c.cell));
                }
                Event::Notice(n) => match *n {
                    Notice::Cooldown(c) => {
                        assert_eq!(c.seconds, 0.15);
                        seen.push(format!("cooldown after {}", c.after_run));
                    }
                    other => panic!("{other:?}"),
                },
                Event::Finished(StopReason::RequestLimit) => seen.push("finished".into()),
                other => panic!("{other:?}"),
            }
        }
        h.join().unwrap();
        assert_eq!(
            seen,
            [
                "run 0",
                "finished",
                "cooldown after 0",
                "run 1",
                "finished",
                "cooldown after 1",
                "run 2",
                "finished",
                "finished"
            ]
        );

        // A stop while cooling down: no more runs.
        let (tx, rx) = crossbeam_channel::unbounded();
        let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded();
        let cells = Cells::Repeat {
            params,
            runs: 3,
            cooldown: Duration::from_secs(30),
        };
        let started = Instant::now();
        let h = spawn(cells, instant(), tx, ctl_rx).unwrap();
        let mut runs = 0;
        while let Ok(ev) = rx.recv() {
            match ev {
                Event::CellStarted(_) => runs += 1,
                Event::Notice(_) => ctl_tx.send(Control::Stop(StopReason::UserStop)).unwrap(),
                _ => {}
            }
        }
        h.join().unwrap();
        assert_eq!(runs, 1);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_search_waits_for_each_verdict_and_follows_it() {
        // Meeting up to 5 in flight.
        let probed: Vec<usize> = searched(None, |conc, _| conc <= 5)
            .into_iter()
            .map(|(conc, _)| conc)
            .collect();
        assert_eq!(probed, [1, 2, 4, 8, 6, 5]);
    }

    /// `--hold`: a max that a probe saw met but that does not hold gives way to the next lower
    /// load a probe met, until one holds (or three were tried).
    #[test]
    fn a_hold_that_fails_steps_down_to_the_next_load_that_met() {
        // Probes meet up to 5 in flight; held, only 2 does.
        let cells = searched(Some(60.0), |conc, hold| conc <= if hold { 2 } else { 5 });
        let held: Vec<usize> = cells
            .into_iter()
            .filter(|&(_, hold)| hold)
            .map(|(conc, _)| conc)
            .collect();
        assert_eq!(held, [5, 4, 2]);
        assert_eq!(next_lower_met(&[(1.0, true), (8.0, false)], 1.0), None);
    }
}
