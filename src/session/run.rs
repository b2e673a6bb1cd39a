//! `infertop [run]`: the plan carried out. Starts the engine and its producers, consumes their
//! events (the dashboard or headless JSON lines), then closes the record and prints the
//! summary. Whatever consumes the events, `fold::RunFold` folds them, so both modes print the same
//! summary from the same code.

use std::io::Write;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::Producers;
use super::{since, Consumer};
use crate::engine::http::clock::{self, ClockError};
use crate::event::{Control, Event, StopReason};
use crate::exit::{Failure, EXIT_FAILURE};
use crate::fold::{Outcome, RunFold};
use crate::plan::shard::ClockRef;
use crate::plan::{self, RunOpts, RunPlan, ScreenPlan};
use crate::record::line::RunClock;
use crate::record::Recorder;
use crate::signals::Signals;
use crate::util::say;

/// A benchmark run: dashboard or headless.
pub fn run(opts: &RunOpts) -> Result<i32, Failure> {
    let started = Instant::now();
    super::pin_threads(plan::engine::candle_threads(opts));
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let plan = match plan::run(opts) {
        Ok(plan) => plan,
        Err(f) => return Err(super::unplanned(opts, f, started)),
    };
    // A signal while planning that no phase noticed (a tokenizer loading) stops here too.
    if let Some(code) = signals.exit_code() {
        let f = Failure {
            code,
            message: signals
                .stop_reason()
                .map(|r| format!("{} before the run started", r.words()))
                .unwrap_or_default(),
        };
        return Err(super::unplanned(opts, f, started));
    }
    execute(plan, &signals)
}

fn execute(mut plan: RunPlan, signals: &Signals) -> Result<i32, Failure> {
    if let Some(repeat) = plan.repeat.take() {
        return super::repeat::execute(plan, repeat, signals);
    }
    let RunPlan {
        mut engine,
        mut header,
        outputs,
        telemetry,
        server_metrics,
        screen,
        faults,
        jsonl,
        spread,
        repeat: _,
    } = plan;
    let slo = header.config.slo;
    let entered = Instant::now();
    for n in &spread.notices {
        say!("infertop: {n}");
    }
    // Stopped by a signal before the engine starts: the record still opens and closes.
    let unstarted = |f: Failure, header: &crate::record::line::Header| {
        super::unstarted(outputs.record.as_deref(), header, f, entered)
    };
    if let plan::EnginePlan::Http(h) = &mut engine {
        super::check_api(h, Some(&mut header)).map_err(|f| unstarted(f, &header))?;
    }
    if let plan::EnginePlan::Http(h) = &engine {
        if h.reset_prefix_cache {
            super::check_cache_reset(&h.endpoints, h.api_key.as_deref(), &h.shape.extra)?;
        }
    }
    // Before the record's time 0: where this machine's clock stands against the run's
    // reference, and the start time on this machine's clock.
    let offset = match &spread.clock {
        Some(c) => Some(measure_clock(&c.reference, signals).map_err(|f| unstarted(f, &header))?),
        None => None,
    };
    if let (Some(c), Some(o), plan::EnginePlan::Http(h)) = (&spread.clock, &offset, &mut engine) {
        if let Some(at) = c.start_at_unix_s {
            h.start_at = Some(clock::system_time(at - o.offset_s));
            let wait = at - o.offset_s - clock::unix_s(std::time::SystemTime::now());
            say!(
                "infertop: the schedule starts at {} on that clock ({}; Ctrl-C stops)",
                plan::values::rfc3339(at),
                if wait >= 0.0 {
                    format!("in {wait:.1} s")
                } else {
                    format!("{:.1} s ago: at once", -wait)
                }
            );
        }
    }
    // The record's time 0, on this machine's clock and on the reference's.
    let started = Instant::now();
    header.clock = Some(RunClock {
        started_unix_s: clock::unix_s(std::time::SystemTime::now()),
        offset_s: offset.as_ref().map(|o| o.offset_s),
        uncertainty_s: offset.as_ref().map(|o| o.uncertainty_s),
        reference: spread.clock.as_ref().map(|c| c.reference.describe()),
    });
    // `--jsonl`: the same record on stdout, for a viewer elsewhere (`infertop follow -`).
    let mut stream = jsonl.then(|| Recorder::stdout(header.clone(), outputs.jsonl_steps));
    let mut recorder = match &outputs.record {
        Some(path) => {
            Some(Recorder::create(path, header, outputs.jsonl_steps).map_err(Failure::usage)?)
        }
        None => None,
    };
    // Listening before the engine starts, so a scraper sees the run from its first request.
    let metrics = outputs
        .metrics_listen
        .map(super::metrics::MetricsListener::start)
        .transpose()?;
    // Bounded, so a consumer that stalls (a frozen SSH connection blocks the dashboard in its
    // terminal write) cannot make memory grow for hours: once full, the engine waits between
    // steps, outside every timed region, and goes on when the consumer does.
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let producers = Producers::start(telemetry, &server_metrics, &ev_tx, started)?;
    let handle = engine
        .spawn(faults.worker, ev_tx, ctl_rx)
        .map_err(|e| Failure::runtime(format!("cannot start the worker thread: {e}")))?;

    // When the stop was asked (a signal seen, q pressed): the wait for the engine runs from it.
    let (outcome, asked) = match screen {
        None => headless(
            &mut Consumer::new(&ev_rx, &ctl_tx, signals),
            [recorder.as_mut(), stream.as_mut()],
            metrics.as_ref(),
            started,
            outputs.jsonl_steps,
            slo,
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
    // The worker got a stop (or finished); it ends within one decode step, unless a phase
    // that does not look at its controls holds it (a model loading): then it is left behind.
    let _ = ctl_tx.send(Control::Stop(outcome.stop.clone()));
    super::join_by(handle, asked);

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

/// Where this machine's clock stands against `reference` (said on stderr); a signal while
/// probing stops the run before it starts.
fn measure_clock(reference: &ClockRef, signals: &Signals) -> Result<clock::Offset, Failure> {
    let offset = match reference {
        ClockRef::Local => clock::Offset {
            offset_s: 0.0,
            uncertainty_s: 0.0,
            probes: 0,
        },
        ClockRef::Url(url) => clock::measure_blocking(url, &|| signals.received().is_some())
            .map_err(|e| match e {
                ClockError::Stopped => Failure {
                    code: signals.exit_code().unwrap_or(EXIT_FAILURE),
                    message: format!(
                        "stopped while reading the clock of {}",
                        reference.describe()
                    ),
                },
                ClockError::Failed(m) => Failure::runtime(m),
            })?,
    };
    if let ClockRef::Url(_) = reference {
        say!(
            "infertop: clock: {:+.4} s ± {:.4} s against {} ({} probes)",
            offset.offset_s,
            offset.uncertainty_s,
            reference.describe(),
            offset.probes
        );
    }
    Ok(offset)
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
) -> (Outcome, Option<Instant>) {
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
        (Ok(stop), app) => (app.run.outcome(stop), app.stop_asked),
        (Err(e), app) => (Outcome::failed(&app.run, e), app.stop_asked),
    }
}

/// Headless: JSON lines per request (and step) on stdout until the engine finishes.
fn headless(
    consumer: &mut Consumer,
    mut recorders: [Option<&mut Recorder>; 2],
    metrics: Option<&super::metrics::MetricsListener>,
    started: Instant,
    steps: bool,
    slo: crate::stats::Slo,
) -> (Outcome, Option<Instant>) {
    // The second is the record streamed on stdout (`--jsonl`): then stdout has nothing else.
    let lines = recorders[1].is_none();
    let mut run = RunFold::with_slo(slo);
    let stdout = std::io::stdout();
    while run.live() {
        let Some(ev) = consumer.next_event(&mut run) else {
            continue;
        };
        let t_s = since(started);
        for r in recorders.iter_mut().flatten() {
            r.on_event(t_s, &ev);
        }
        super::metrics::observe(metrics, &ev);
        run.apply(&ev);
        if lines {
            super::lines::print_line(&mut stdout.lock(), &ev, steps, t_s);
        } else {
            super::lines::say_aside(&ev);
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
    let stop = consumer.interrupted.clone().unwrap_or(StopReason::UserStop);
    (run.outcome(stop), consumer.asked_at)
}
