//! The sweep engine: a grid's cells one after another on the one event channel. For each cell
//! it sends `CellStarted`, starts the cell's engine on the same channel (whose `Finished` ends
//! the cell), and passes the consumer's controls on to it; after the last cell (or a stop) its
//! own `Finished` ends the sweep. What a cell measured is the consumer's to fold
//! (`sweep::fold`); this thread only sequences.

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::event::{CellParams, CellStart, Control, Event, StopReason};

/// The sweep engine thread's name (an engine thread: see `util::quiet_engine_panics`).
pub const SWEEP_THREAD: &str = "infertop-engine-sweep";

/// How often the engine looks at its controls and at whether the cell's engine has ended.
const POLL: Duration = Duration::from_millis(20);

/// Starts cell `cell`'s engine sending on `events` and obeying `control`; `Err` is the
/// one-line reason the cell cannot run (a workload the model cannot take).
pub type StartCell = Box<
    dyn FnMut(usize, Sender<Event>, Receiver<Control>) -> Result<JoinHandle<()>, String> + Send,
>;

/// What a load key gets in a sweep: each cell's workload is its place in the grid.
pub const LOAD_KEYS_OFF: &str =
    "load keys are off in a sweep: each cell runs the workload of its place in the grid";

/// Starts the sweep on its thread. It ends with `Event::Finished`, after every cell's own.
pub fn spawn(
    cells: Vec<CellParams>,
    start: StartCell,
    events: Sender<Event>,
    control: Receiver<Control>,
) -> std::io::Result<JoinHandle<()>> {
    crate::engine::spawn_engine(SWEEP_THREAD, "sweep engine", events, move |tx| {
        Ok(run(&cells, start, tx, &control))
    })
}

fn run(
    cells: &[CellParams],
    mut start: StartCell,
    tx: &Sender<Event>,
    control: &Receiver<Control>,
) -> StopReason {
    for (cell, params) in cells.iter().enumerate() {
        let _ = tx.send(Event::CellStarted(Box::new(CellStart {
            cell,
            cells: cells.len(),
            params: params.clone(),
        })));
        let (cell_tx, cell_rx) = crossbeam_channel::unbounded::<Control>();
        let handle = match start(cell, tx.clone(), cell_rx) {
            Ok(h) => h,
            Err(message) => {
                let _ = tx.send(Event::Error {
                    message,
                    fatal: true,
                });
                let _ = tx.send(Event::Finished(StopReason::Error));
                continue;
            }
        };
        if let Some(stop) = drive(&handle, &cell_tx, tx, control) {
            let _ = handle.join();
            return stop;
        }
        let _ = handle.join();
    }
    StopReason::RequestLimit
}

/// Passes controls on to the cell's engine until it has ended; returns the stop the consumer
/// asked for, if it did (then no more cells run).
fn drive(
    handle: &JoinHandle<()>,
    cell: &Sender<Control>,
    tx: &Sender<Event>,
    control: &Receiver<Control>,
) -> Option<StopReason> {
    let mut stop: Option<StopReason> = None;
    while !handle.is_finished() {
        match control.recv_timeout(POLL) {
            Ok(Control::Stop(reason)) => {
                let _ = cell.send(Control::Stop(reason.clone()));
                stop = Some(reason);
            }
            Ok(Control::EndCell) => {
                let _ = cell.send(Control::Stop(StopReason::RequestLimit));
            }
            Ok(c @ (Control::Pause | Control::Resume | Control::ResetStats)) => {
                let _ = cell.send(c);
            }
            Ok(
                Control::AdjustLoad(_)
                | Control::AdjustOutputTokens(_)
                | Control::AdjustPromptTokens(_),
            ) => {
                let _ = tx.send(Event::Error {
                    message: LOAD_KEYS_OFF.into(),
                    fatal: false,
                });
            }
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
