//! The whole dashboard loop (`run_app`) on a `TestBackend` with scripted keys and a fake worker
//! thread: keys become control messages, the worker's echoes change what is drawn, quitting
//! and signals stop the worker and wait (bounded) for `Finished`, every drained event reaches
//! `on_event`.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use infertop::event::{Control, Event, StopReason};
use infertop::signals::Signals;
use infertop::ui::{run_app, App, Input, LoopOptions};

const STOP_WAIT: Duration = Duration::from_millis(500);
use infertop::ui::coalesce::Coalesce;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers,
};
use ratatui::Terminal;

/// Keys delivered one at a time, `gap` apart, then nothing (the loop keeps polling).
struct Script {
    keys: VecDeque<TermEvent>,
    gap: Duration,
    next_at: Instant,
}

impl Script {
    fn new(keys: &[TermEvent], gap: Duration) -> Script {
        Script {
            keys: keys.iter().cloned().collect(),
            gap,
            next_at: Instant::now() + gap,
        }
    }
}

impl Input for Script {
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<TermEvent>> {
        let now = Instant::now();
        if now >= self.next_at {
            if let Some(k) = self.keys.pop_front() {
                self.next_at = now + self.gap;
                return Ok(Some(k));
            }
        }
        thread::sleep(
            timeout
                .min(self.next_at.saturating_duration_since(now))
                .min(Duration::from_millis(20)),
        );
        Ok(None)
    }
}

fn key(code: KeyCode, kind: KeyEventKind) -> TermEvent {
    TermEvent::Key(KeyEvent {
        code,
        modifiers: KeyModifiers::NONE,
        kind,
        state: KeyEventState::NONE,
    })
}

fn press(c: char) -> TermEvent {
    key(KeyCode::Char(c), KeyEventKind::Press)
}

/// A worker that echoes Pause/Resume/ResetStats and answers Stop with Finished; it records
/// every control message it got.
fn fake_worker(
    events: Sender<Event>,
    control: Receiver<Control>,
    answer_stop: bool,
) -> thread::JoinHandle<Vec<Control>> {
    thread::spawn(move || {
        let mut got = Vec::new();
        while let Ok(msg) = control.recv_timeout(Duration::from_secs(10)) {
            got.push(msg.clone());
            let reply = match msg {
                Control::Pause => Some(Event::Paused),
                Control::Resume => Some(Event::Resumed),
                Control::ResetStats => Some(Event::StatsReset),
                Control::Stop(reason) if answer_stop => {
                    let _ = events.send(Event::Finished(reason));
                    break;
                }
                _ => None,
            };
            if let Some(ev) = reply {
                let _ = events.send(ev);
            }
        }
        got
    })
}

fn run_info() -> Event {
    let info: infertop::event::RunInfo = serde_json::from_value(serde_json::json!({
        "model": {
            "name": "synthetic:tiny", "arch": "llama", "source": "synthetic", "params": 1000,
            "weight_bytes": 4000, "kv_bytes_per_token": 64, "dtype": "f32", "device": "cpu",
            "max_positions": 256, "layers": 1, "hidden": 8, "heads": 1, "kv_heads": 1,
            "head_dim": 8, "vocab": 32
        },
        "workload": { "prompt_tokens": "8", "output_tokens": "4", "batch": 1 },
        "warmup_requests": 0,
        "threads": 1
    }))
    .expect("run info");
    Event::RunStarted(Box::new(info))
}

fn screen(terminal: &Terminal<Coalesce<TestBackend>>) -> String {
    let buf = terminal.backend().inner().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn options(signals: Signals) -> LoopOptions {
    LoopOptions {
        fps: 30,
        signals,
        started: Instant::now(),
        deadline: None,
    }
}

#[test]
fn space_pauses_and_q_stops_the_worker() {
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, ctl_rx) = unbounded();
    ev_tx.send(run_info()).expect("send");
    let worker = fake_worker(ev_tx, ctl_rx, true);
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).expect("terminal");
    let mut app = App::default();
    // A key release must do nothing (only presses count); q comes long after PAUSED is drawn.
    let mut input = Script::new(
        &[
            key(KeyCode::Char('q'), KeyEventKind::Release),
            press(' '),
            press('q'),
        ],
        Duration::from_millis(300),
    );
    let mut seen = Vec::new();
    let signals = Signals::none();
    let mut on_event = |ev: &Event, _: &mut App| seen.push(format!("{ev:?}"));
    let started = Instant::now();
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(signals),
        STOP_WAIT,
        &mut on_event,
    )
    .expect("loop");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(stop, StopReason::UserStop);
    let text = screen(&terminal);
    assert!(text.contains(" PAUSED "), "PAUSED not drawn:\n{text}");
    assert!(
        text.contains("space resume"),
        "footer should offer resume:\n{text}"
    );
    let got = worker.join().expect("worker");
    assert_eq!(
        got,
        vec![Control::Pause, Control::Stop(StopReason::UserStop)]
    );
    assert!(seen[0].starts_with("RunStarted"), "{seen:?}");
    assert!(seen.iter().any(|e| e == "Paused"), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("Finished(UserStop)"));
}

#[test]
fn a_signal_stops_the_worker_with_its_name() {
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, ctl_rx) = unbounded();
    ev_tx.send(run_info()).expect("send");
    let worker = fake_worker(ev_tx, ctl_rx, true);
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).expect("terminal");
    let mut app = App::default();
    let signals = Signals::none();
    let setter = {
        let signals = signals.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            signals.raise(signal_hook::consts::SIGTERM);
        })
    };
    let mut input = Script::new(&[], Duration::from_millis(50));
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(signals),
        STOP_WAIT,
        &mut |_, _| {},
    )
    .expect("loop");
    setter.join().expect("setter");
    assert_eq!(stop, StopReason::Signal("SIGTERM".into()));
    assert_eq!(
        worker.join().expect("worker"),
        vec![Control::Stop(StopReason::Signal("SIGTERM".into()))]
    );
}

#[test]
fn quitting_waits_for_a_silent_worker_only_so_long() {
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, ctl_rx) = unbounded();
    ev_tx.send(run_info()).expect("send");
    let worker = fake_worker(ev_tx, ctl_rx, false);
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).expect("terminal");
    let mut app = App::default();
    let mut input = Script::new(&[press('q')], Duration::from_millis(50));
    let started = Instant::now();
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(Signals::none()),
        STOP_WAIT,
        &mut |_, _| {},
    )
    .expect("loop");
    let took = started.elapsed();
    assert_eq!(stop, StopReason::UserStop);
    assert!(took >= Duration::from_millis(500), "did not wait: {took:?}");
    assert!(took < Duration::from_secs(3), "waited too long: {took:?}");
    drop(ctl_tx);
    worker.join().expect("worker");
}

#[test]
fn a_finished_run_stays_on_screen_until_quit() {
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, ctl_rx) = unbounded::<Control>();
    ev_tx.send(run_info()).expect("send");
    ev_tx
        .send(Event::Finished(StopReason::RequestLimit))
        .expect("send");
    drop(ev_tx);
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).expect("terminal");
    let mut app = App::default();
    // Space after the finish must not send anything; q then quits at once.
    let mut input = Script::new(&[press(' '), press('q')], Duration::from_millis(200));
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(Signals::none()),
        STOP_WAIT,
        &mut |_, _| {},
    )
    .expect("loop");
    assert_eq!(stop, StopReason::RequestLimit);
    assert!(
        ctl_rx.try_recv().is_err(),
        "nothing may be sent to a finished worker"
    );
    let text = screen(&terminal);
    assert!(text.contains(" STOPPED "), "{text}");
    assert!(text.contains("stopped at the request limit"), "{text}");
}

#[test]
fn a_worker_that_vanishes_is_an_error_on_screen() {
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, _ctl_rx) = unbounded::<Control>();
    ev_tx.send(run_info()).expect("send");
    drop(ev_tx);
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(80, 24))).expect("terminal");
    let mut app = App::default();
    let mut input = Script::new(&[press('q')], Duration::from_millis(200));
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(Signals::none()),
        STOP_WAIT,
        &mut |_, _| {},
    )
    .expect("loop");
    assert_eq!(stop, StopReason::Error);
    assert!(app.run.failed.is_some());
    let text = screen(&terminal);
    assert!(text.contains(" ERROR "), "{text}");
    assert!(
        text.contains("the engine exited without finishing"),
        "{text}"
    );
}

/// `infertop sweep` in the dashboard: the sweep engine runs the cells on the one channel the
/// dashboard folds; space pauses the cell's engine (it echoes `Paused`), a load key is refused
/// with a line and reaches no engine, and q stops the cell in flight and the sweep after it.
#[test]
fn a_sweep_in_the_dashboard_takes_real_controls_through_one_channel() {
    use infertop::record::line::SweepConfig;
    use infertop::sweep::engine::{self, StartCell};
    use infertop::sweep::fold::SweepFold;
    use infertop::sweep::fold::LOAD_KEYS_OFF;
    use infertop::sweep::CellSpec;
    use infertop::traffic::LenSpec;

    let cells: Vec<_> = [1usize, 2]
        .iter()
        .map(|&b| {
            CellSpec {
                batch: b,
                prompt: Some(LenSpec::Fixed(8)),
                output: LenSpec::Fixed(4),
                concurrency: None,
                rate: None,
                model: None,
                dtype: None,
                threads: None,
            }
            .params()
        })
        .collect();
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, ctl_rx) = unbounded();
    let (got_tx, got_rx) = unbounded::<Vec<Control>>();
    let start: StartCell = Box::new(
        move |_cell, _params: &_, tx: Sender<Event>, rx: Receiver<Control>| {
            let got_tx = got_tx.clone();
            Ok(engine::CellHandle::thread(thread::spawn(move || {
                let _ = tx.send(run_info());
                let got = fake_worker(tx, rx, true).join().unwrap();
                let _ = got_tx.send(got);
            })))
        },
    );
    let sweep = engine::spawn(engine::Cells::Grid(cells.clone()), start, ev_tx, ctl_rx).unwrap();
    let mut app = App::default();
    app.sweep = Some(SweepFold::new(
        SweepConfig {
            cells,
            warmup: 0,
            repetitions: 3,
            ..SweepConfig::default()
        },
        Default::default(),
    ));
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(100, 30))).unwrap();
    let mut input = Script::new(
        &[press(' '), press('B'), press('q')],
        Duration::from_millis(300),
    );
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(Signals::none()),
        STOP_WAIT,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(stop, StopReason::UserStop);
    sweep.join().unwrap();
    // The first cell's engine got the pause and the stop, and nothing for the load key.
    let got = got_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(got, [Control::Pause, Control::Stop(StopReason::UserStop)]);
    assert!(got_rx.try_recv().is_err(), "the second cell never started");
    let fold = app.sweep.as_ref().unwrap();
    assert_eq!(fold.results.len(), 1);
    assert_eq!(fold.not_run(), 1);
    assert_eq!(fold.interrupted(), Some(&StopReason::UserStop));
    assert!(app.events.iter().any(|e| e.text == LOAD_KEYS_OFF));
    assert!(app.events.iter().any(|e| e.text == "paused"));
}

/// `--runs N` in the dashboard: the runs go one after another on the one channel, the header
/// says which run and shows the cooldown between two as such, the charts go on across runs
/// (the first run's requests are still drawn in the second), the table starts again with each
/// run, and the grid has a line per run.
#[test]
fn repeated_runs_in_the_dashboard_keep_their_charts_and_show_the_cooldown() {
    use infertop::event::{CellParams, Notice, RequestDone, RunPhase};
    use infertop::record::line::{RepeatConfig, SweepConfig};
    use infertop::sweep::engine::{self, StartCell};
    use infertop::sweep::fold::SweepFold;

    let params = CellParams {
        batch: 1,
        ..CellParams::default()
    };
    let (ev_tx, ev_rx) = unbounded();
    let (ctl_tx, ctl_rx) = unbounded();
    let start: StartCell = Box::new(|_, _, tx: Sender<Event>, _rx: Receiver<Control>| {
        Ok(engine::CellHandle::thread(thread::spawn(move || {
            let _ = tx.send(run_info());
            for index in 0..3 {
                let _ = tx.send(Event::RequestStarted {
                    index,
                    warmup: false,
                    prompt_tokens: 8,
                    output_tokens: 4,
                    batch: 1,
                });
                let _ = tx.send(Event::RequestDone(Box::new(RequestDone {
                    index,
                    batch: 1,
                    prompt_tokens: 8,
                    output_tokens: 4,
                    ttft_s: 0.01,
                    tpot_s: Some(0.002),
                    e2e_s: 0.016,
                    ..Default::default()
                })));
            }
            let _ = tx.send(Event::Finished(StopReason::RequestLimit));
        })))
    });
    let cells = engine::Cells::Repeat {
        params: params.clone(),
        runs: 2,
        cooldown: Duration::from_millis(600),
    };
    let runs = engine::spawn(cells, start, ev_tx, ctl_rx).unwrap();
    let mut app = App::default();
    app.sweep = Some(SweepFold::new(
        SweepConfig {
            cells: vec![params; 2],
            repeat: Some(RepeatConfig {
                runs: 2,
                cooldown_s: 0.6,
            }),
            ..SweepConfig::default()
        },
        Default::default(),
    ));
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(100, 30))).unwrap();
    let mut input = Script::new(&[press('q')], Duration::from_millis(2500));
    // What the dashboard showed as the cooldown began, and what the charts held as the second
    // run began.
    let mut in_cooldown: Option<String> = None;
    let mut charted_at_second: Option<(usize, u64)> = None;
    let mut on_event = |ev: &Event, app: &mut App| match ev {
        Event::Notice(n) if matches!(n.as_ref(), Notice::Cooldown(_)) => {
            assert_eq!(app.phase, RunPhase::Cooldown);
            let mut t = Terminal::new(TestBackend::new(100, 30)).unwrap();
            t.draw(|f| infertop::ui::render::render(f, app)).unwrap();
            let buf = t.backend().buffer();
            let mut text = String::new();
            for y in 0..buf.area.height {
                for x in 0..buf.area.width {
                    text.push_str(buf[(x, y)].symbol());
                }
                text.push('\n');
            }
            in_cooldown = Some(text);
        }
        Event::CellStarted(c) if c.cell == 1 => {
            charted_at_second = Some((app.charts.requests.len(), app.run.requests_done));
        }
        _ => {}
    };
    let stop = run_app(
        &mut terminal,
        &mut input,
        &ev_rx,
        &ctl_tx,
        &mut app,
        &options(Signals::none()),
        STOP_WAIT,
        &mut on_event,
    )
    .unwrap();
    runs.join().unwrap();
    // Both runs ended as asked before q closed the dashboard.
    assert_eq!(stop, StopReason::RequestLimit);
    let cooling = in_cooldown.expect("a cooldown between the runs");
    assert!(cooling.contains(" COOLDOWN "), "{cooling}");
    assert!(
        cooling.contains("run 1/2 · cooldown 0.6 s left"),
        "{cooling}"
    );
    assert!(app
        .events
        .iter()
        .any(|e| e.text == "run 1 ended; 0.6 s of cooldown before the next"));
    // The second run begins with the first's requests on the charts and a fresh table.
    assert_eq!(charted_at_second, Some((3, 0)));
    let fold = app.sweep.as_ref().unwrap();
    assert_eq!(fold.results.len(), 2);
    assert_eq!(app.charts.requests.len(), 6);
    let text = screen(&terminal);
    assert!(text.contains("run 2/2"), "{text}");
    assert!(text.contains("Runs · 2 of 2"), "{text}");
    assert!(text.contains("+ run 1 "), "{text}");
    assert!(text.contains("+ run 2 "), "{text}");
}
