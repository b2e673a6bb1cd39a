//! `infertop [run]`: the plan carried out. Starts the engine and its producers, consumes their
//! events (the dashboard or headless JSON lines), then closes the record and prints the
//! summary. Whatever consumes the events, `fold::RunFold` folds them, so both modes print the same
//! summary from the same code.

use std::io::Write;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::Producers;
use super::{since, Consumer, Received};
use crate::event::{Control, Event, StopReason};
use crate::exit::{Failure, EXIT_FAILURE};
use crate::fold::{Outcome, RunFold};
use crate::plan::{self, RunOpts, RunPlan, ScreenPlan};
use crate::record::Recorder;
use crate::signals::Signals;
use crate::util::say;

/// A benchmark run: dashboard or headless.
pub fn run(opts: &RunOpts) -> Result<i32, Failure> {
    super::pin_threads(plan::engine::candle_threads(opts));
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let plan = plan::run(opts)?;
    execute(plan, &signals)
}

fn execute(plan: RunPlan, signals: &Signals) -> Result<i32, Failure> {
    let RunPlan {
        engine,
        header,
        outputs,
        telemetry,
        server_metrics,
        screen,
        faults,
        jsonl,
    } = plan;
    // `--jsonl`: the same record on stdout, for a viewer elsewhere (`infertop follow -`).
    let mut stream = jsonl.then(|| Recorder::stdout(header.clone(), outputs.jsonl_steps));
    if let plan::EnginePlan::Http(h) = &engine {
        if h.reset_prefix_cache {
            super::check_cache_reset(&h.endpoints, h.api_key.as_deref())?;
        }
    }
    let mut recorder = match &outputs.record {
        Some(path) => {
            Some(Recorder::create(path, header, outputs.jsonl_steps).map_err(Failure::usage)?)
        }
        None => None,
    };
    // Bounded, so a consumer that stalls (a frozen SSH connection blocks the dashboard in its
    // terminal write) cannot make memory grow for hours: once full, the engine waits between
    // steps, outside every timed region, and goes on when the consumer does.
    // Listening before the engine starts, so a scraper sees the run from its first request.
    let metrics = outputs
        .metrics_listen
        .map(super::metrics::MetricsListener::start)
        .transpose()?;
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let started = Instant::now();
    let producers = Producers::start(telemetry, &server_metrics, &ev_tx, started)?;
    let handle = engine
        .spawn(faults.worker, ev_tx, ctl_rx)
        .map_err(|e| Failure::runtime(format!("cannot start the worker thread: {e}")))?;

    let outcome = match screen {
        None => headless(
            &ev_rx,
            &ctl_tx,
            signals,
            [recorder.as_mut(), stream.as_mut()],
            metrics.as_ref(),
            started,
            outputs.jsonl_steps,
        ),
        Some(screen) => dashboard(
            screen,
            &ev_rx,
            &ctl_tx,
            signals,
            &mut recorder,
            metrics.as_ref(),
            started,
            faults.ui_panic,
        ),
    };
    // Nobody reads events any more: dropping the receiver turns a producer blocked on a full
    // queue into a failed send, so neither the sampler nor the worker can hang the exit.
    drop(ev_rx);
    producers.stop();
    // The worker got a stop (or finished); it ends within one decode step.
    let _ = ctl_tx.send(Control::Stop(outcome.stop.clone()));
    let _ = handle.join();

    let elapsed_s = started.elapsed().as_secs_f64();
    if let Some(r) = recorder.as_mut() {
        r.finish(&outcome.stop, elapsed_s, &outcome.summary);
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    match stream.as_mut() {
        // The footer carries the summary; a reader that went away is no warning.
        Some(s) => s.finish(&outcome.stop, elapsed_s, &outcome.summary),
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(outcome.summary.render(outputs.format).as_bytes());
            let _ = out.flush();
        }
    }
    if let Some(msg) = &outcome.failed {
        say!("infertop: error: {msg}");
        return Ok(EXIT_FAILURE);
    }
    Ok(outcome.exit_code(signals))
}

/// In a terminal: the dashboard folds the events; the record is written as they are drained.
#[allow(clippy::too_many_arguments)]
fn dashboard(
    screen: ScreenPlan,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signals: &Signals,
    recorder: &mut Option<Recorder>,
    metrics: Option<&super::metrics::MetricsListener>,
    started: Instant,
    ui_panic: Option<u64>,
) -> Outcome {
    let mut on_event = |ev: &Event, _: &mut crate::ui::App| {
        if let Some(r) = recorder.as_mut() {
            r.on_event(since(started), ev);
        }
        super::metrics::observe(metrics, ev);
        if let (Some(n), Event::RequestDone(r)) = (ui_panic, ev) {
            if r.index == n {
                panic!("injected fault (--fault ui-panic@{n})");
            }
        }
    };
    let app = crate::ui::App::new(screen.app);
    match super::dashboard(app, screen.fps, events, control, signals, &mut on_event) {
        (Ok(stop), app) => app.run.outcome(stop),
        (Err(e), app) => Outcome::failed(&app.run, e),
    }
}

/// Headless: JSON lines per request (and step) on stdout until the engine finishes.
fn headless(
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signals: &Signals,
    mut recorders: [Option<&mut Recorder>; 2],
    metrics: Option<&super::metrics::MetricsListener>,
    started: Instant,
    steps: bool,
) -> Outcome {
    // The second is the record streamed on stdout (`--jsonl`): then stdout has nothing else.
    let lines = recorders[1].is_none();
    let mut run = RunFold::new();
    let mut consumer = Consumer {
        events,
        control,
        signals,
        interrupted: None,
    };
    let stdout = std::io::stdout();
    while run.live() {
        let ev = match consumer.recv() {
            Received::Event(ev) => ev,
            Received::Idle => continue,
            Received::Closed => {
                run.disconnected();
                continue;
            }
        };
        let t_s = since(started);
        for r in recorders.iter_mut().flatten() {
            r.on_event(t_s, &ev);
        }
        super::metrics::observe(metrics, &ev);
        run.apply(&ev);
        if lines {
            print_line(&mut stdout.lock(), &ev, steps, t_s);
        } else if let Event::Error {
            message,
            fatal: false,
        } = &ev
        {
            say!("infertop: warning: {message}");
        }
    }
    if run.failed_requests > 0 {
        say!(
            "infertop: {} of {} requests failed ({:.1}%); the last: {}",
            run.failed_requests,
            run.failed_requests + run.completed_requests,
            100.0 * run.error_rate(),
            run.last_failure.as_deref().unwrap_or("")
        );
    }
    run.outcome(consumer.interrupted.unwrap_or(StopReason::UserStop))
}

/// The headless line of an event, if it has one: requests (flushed), failures, steps with
/// `--jsonl-steps`; warnings go to stderr.
pub(crate) fn print_line(out: &mut impl Write, ev: &Event, steps: bool, t_s: f64) {
    match ev {
        Event::DecodeSteps(batch) if steps => {
            for s in batch {
                let line =
                    crate::record::writer::step_line(s.index, s.step, s.itl_s, s.gpu_s(), t_s);
                let _ = writeln!(out, "{line}");
            }
        }
        Event::RequestDone(r) => {
            let _ = writeln!(out, "{}", crate::record::writer::request_line(r, t_s));
            let _ = out.flush();
        }
        Event::RequestFailed(f) => {
            let _ = writeln!(out, "{}", crate::record::writer::failed_line(f, t_s));
            let _ = out.flush();
        }
        Event::Error {
            message,
            fatal: false,
        } => say!("infertop: warning: {message}"),
        _ => {}
    }
}
