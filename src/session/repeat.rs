//! `infertop --runs N [--cooldown D]`: the run's plan carried out N times, one after another,
//! as a sweep of N cells of one workload: the sweep engine sequences the runs on the one
//! channel (idle for the cooldown between two, said as a notice), `sweep::fold` folds each run
//! on its own (a fold, a summary and a `cell_end` line each), and the record has a `cell` line
//! per run. Headless, stdout carries a run's lines (a request per line) and, at the end, the
//! table across runs (`sweep::repeat`); each run's figures go to stderr as it ends. In a
//! terminal the dashboard stays up across the runs (its charts go on; the header says which
//! run, and the cooldown) and the table is printed when it closes.

use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::{since, Consumer, Producers, SweepEnds};
use crate::engine::worker::{Fault, ModelHost};
use crate::event::{Control, Event, Notice, StopReason};
use crate::exit::{Failure, EXIT_FAILURE, EXIT_OK};
use crate::fold::RunFold;
use crate::plan::repeat::Repeat;
use crate::plan::{EnginePlan, RunPlan};
use crate::record::line::{CellStatus, Footer, Line, RunClock, SweepConfig};
use crate::record::Recorder;
use crate::signals::Signals;
use crate::sweep::engine::{CellHandle, Cells, StartCell};
use crate::sweep::fold::SweepFold;
use crate::sweep::repeat::{title, RunsTable};
use crate::sweep::CellResult;
use crate::util::say;

/// Runs `plan` `repeat.runs` times.
pub(super) fn execute(plan: RunPlan, repeat: Repeat, signals: &Signals) -> Result<i32, Failure> {
    let RunPlan {
        mut engine,
        mut header,
        outputs,
        telemetry,
        server_metrics,
        screen,
        faults,
        ..
    } = plan;
    let slo = header.config.slo;
    let entered = Instant::now();
    // Stopped by a signal before the engine starts: the record still opens and closes.
    let unstarted = |f: Failure, header: &crate::record::line::Header| {
        super::unstarted(outputs.record.as_deref(), header, f, entered)
    };
    if let EnginePlan::Http(h) = &mut engine {
        super::check_api(h, Some(&mut header)).map_err(|f| unstarted(f, &header))?;
        if h.reset_prefix_cache {
            super::check_cache_reset(&h.endpoints, h.api_key.as_deref(), &h.shape.extra)?;
        }
    }
    let started = Instant::now();
    header.clock = Some(RunClock {
        started_unix_s: crate::engine::http::clock::unix_s(std::time::SystemTime::now()),
        ..RunClock::default()
    });
    let config = SweepConfig {
        cells: vec![repeat.params.clone(); repeat.runs],
        warmup: engine.traffic().warmup,
        repetitions: repeat.steady,
        precision: None,
        max_repetitions: None,
        search: None,
        repeat: Some(repeat.config()),
    };
    let mut recorder = super::sweep::recorder(&outputs, &header, &config)?;
    let metrics = outputs
        .metrics_listen
        .map(super::metrics::MetricsListener::start)
        .transpose()?;
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let producers = Producers::start(telemetry, &server_metrics, &ev_tx, started)?;
    let cells = Cells::Repeat {
        params: repeat.params.clone(),
        runs: repeat.runs,
        cooldown: repeat.cooldown,
    };
    let handle =
        crate::sweep::engine::spawn(cells, run_starter(engine, faults.worker), ev_tx, ctl_rx)
            .map_err(|e| Failure::runtime(format!("cannot start the runs' thread: {e}")))?;
    let fold = SweepFold::new(config.clone(), slo);
    let (fold, asked) = match screen {
        None => headless(
            fold,
            &ev_rx,
            &ctl_tx,
            signals,
            recorder.as_mut(),
            metrics.as_ref(),
            started,
            outputs.jsonl_steps,
        ),
        Some(screen) => super::sweep::dashboard(
            fold,
            screen,
            &ev_rx,
            &ctl_tx,
            signals,
            &mut recorder,
            metrics.as_ref(),
            started,
        ),
    };
    drop(ev_rx);
    producers.stop();
    let _ = ctl_tx.send(Control::Stop(StopReason::UserStop));
    super::join_by(handle, asked);
    let fold = fold?;

    let table = RunsTable::of(
        title(&header, fold.model.as_ref(), &config),
        repeat.config(),
        &fold.results,
        &slo,
        fold.not_run(),
        fold.interrupted().map(StopReason::words),
    );
    if let Some(r) = recorder.as_mut() {
        r.write_line(&Line::Footer(Footer {
            stop: fold.stop.clone().unwrap_or(StopReason::RequestLimit),
            elapsed_s: since(started),
            summary: table.to_json(),
        }));
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    super::print_stdout(&table.render(outputs.format))?;
    if let Some(code) = signals.exit_code() {
        return Ok(code);
    }
    let failed: Vec<&CellResult> = fold
        .results
        .iter()
        .filter(|r| r.status == CellStatus::Failed)
        .collect();
    if let Some(first) = failed.first() {
        say!(
            "infertop: error: {} of {} runs failed; run {}: {}",
            failed.len(),
            repeat.runs,
            first.cell + 1,
            first.reason.as_deref().unwrap_or("?")
        );
        return Ok(EXIT_FAILURE);
    }
    Ok(EXIT_OK)
}

/// How the sweep engine starts each run: the one plan again (so the same requests), the
/// candle engine's on the model loaded once for all of them.
fn run_starter(engine: EnginePlan, fault: Option<Fault>) -> StartCell {
    let mut host: Option<ModelHost> = None;
    Box::new(move |_, _, tx, rx| {
        let started = |e: std::io::Error| format!("cannot start the engine thread: {e}");
        match engine.clone() {
            EnginePlan::Candle(w) => {
                if host.is_none() {
                    host = Some(ModelHost::spawn(&w, tx).map_err(started)?);
                }
                let done = host
                    .as_ref()
                    .ok_or("the model's thread has gone")?
                    .run(*w, fault, rx)?;
                Ok(CellHandle::job(done))
            }
            http => http
                .spawn(fault, tx, rx)
                .map(CellHandle::thread)
                .map_err(started),
        }
    })
}

/// Headless: a run's lines on stdout, a line per run on stderr.
#[allow(clippy::too_many_arguments)]
fn headless(
    mut fold: SweepFold,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signals: &Signals,
    mut recorder: Option<&mut Recorder>,
    metrics: Option<&super::metrics::MetricsListener>,
    started: Instant,
    steps: bool,
) -> (Result<SweepFold, Failure>, Option<Instant>) {
    let mut run = RunFold::with_slo(fold.slo);
    let mut consumer = Consumer::new(events, control, signals);
    let stdout = std::io::stdout();
    // What the client saw a server do is said once a run: once is enough for them all.
    let mut noted: Vec<String> = Vec::new();
    while fold.live() {
        let Some(ev) = consumer.next_event(&mut SweepEnds(&mut fold, &mut run, since(started)))
        else {
            continue;
        };
        let t_s = since(started);
        fold.apply(t_s, &mut run, &ev);
        match &ev {
            Event::CellStarted(c) => say!("infertop: run {}/{}", c.cell + 1, c.cells),
            Event::Notice(n) if matches!(n.as_ref(), Notice::Cooldown(_)) => {
                say!("infertop: {}", n.words())
            }
            Event::Notice(n) => match n.as_ref() {
                Notice::ServerNote(note) if noted.contains(&note.what) => {}
                Notice::ServerNote(note) => {
                    noted.push(note.what.clone());
                    super::lines::print_line(&mut stdout.lock(), &ev, steps, t_s);
                }
                _ => super::lines::print_line(&mut stdout.lock(), &ev, steps, t_s),
            },
            _ => super::lines::print_line(&mut stdout.lock(), &ev, steps, t_s),
        }
        let closed =
            super::sweep::after_event(&mut fold, &ev, recorder.as_deref_mut(), metrics, t_s);
        if let Some(result) = closed {
            say!(
                "infertop: {}",
                progress_line(fold.config.cells.len(), &result)
            );
        }
    }
    (Ok(fold), consumer.asked_at)
}

/// `run 1/3: n 4, TTFT p50 12.345 ms, TPOT p50 1.234 ms, 812.3 output tok/s, 0.9 s`.
fn progress_line(runs: usize, r: &CellResult) -> String {
    let head = format!("run {}/{runs}", r.cell + 1);
    if r.status == CellStatus::Failed {
        return format!("{head}: FAILED: {}", r.reason.as_deref().unwrap_or("?"));
    }
    let p50 = |s: &crate::stats::Summary| {
        if s.n > 0 {
            crate::util::format::ms(s.p50)
        } else {
            "-".into()
        }
    };
    let mut line = format!(
        "{head}: n {}, TTFT p50 {}, TPOT p50 {}, {} output tok/s, {:.1} s",
        r.n,
        p50(&r.ttft),
        p50(&r.tpot),
        r.output_tok_s.map_or("-".into(), |t| format!("{t:.1}")),
        r.elapsed_s
    );
    if r.failed_requests > 0 {
        line.push_str(&format!(", {} failed requests", r.failed_requests));
    }
    if let Some(why) = &r.reason {
        line.push_str(&format!(" ({why})"));
    }
    line
}
