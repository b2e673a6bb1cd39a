//! `infertop --endpoint URL --determinism`: the plan carried out (see `determinism` for why it
//! has this shape). The two passes are the run's http engine twice, one at a time and then
//! `--concurrency` at once, sequenced on one channel by the sweep engine; the headless loop
//! folds the stream with `DeterminismFold`, writes the record as it goes (each request carries
//! its pass in `origin.pass`), and at the end prints the comparison, writes it as the
//! record's `determinism` line before the footer, and ends with its exit code: 0 when every
//! output was the same, 3 when any changed, 1 when a pass failed or a prompt could not be
//! compared.
//!
//! There is no dashboard for it yet: in a terminal it says so once and runs headless, with
//! its progress on stderr instead of the request lines.

use std::time::Instant;

use super::{since, Consumer, Producers};
use crate::determinism::{self, render, DeterminismFold};
use crate::engine::http::{self, HttpConfig};
use crate::event::{CellParams, Control, Event, StopReason};
use crate::exit::EXIT_OUTPUTS_DIFFER;
use crate::exit::{Failure, EXIT_FAILURE, EXIT_OK};
use crate::plan::determinism::{settle_api, DeterminismPlan};
use crate::plan::{self, RunOpts};
use crate::record::line::{Line, RunClock};
use crate::record::Recorder;
use crate::signals::Signals;
use crate::summary::SummaryFormat;
use crate::sweep::engine::{self as sequencer, CellHandle, Cells, StartCell};
use crate::util::say;

/// A `--determinism` run.
pub fn run(opts: &RunOpts) -> Result<i32, Failure> {
    let started = Instant::now();
    super::pin_threads(plan::engine::candle_threads(opts));
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let plan = match plan::determinism::plan(opts) {
        Ok(plan) => plan,
        Err(f) => return Err(super::unplanned(opts, f, started)),
    };
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
    execute(plan, opts.workload.seed, &signals)
}

fn execute(plan: DeterminismPlan, seed: u64, signals: &Signals) -> Result<i32, Failure> {
    let DeterminismPlan {
        run,
        mut passes,
        concurrency,
        prompts,
        max_output_tokens,
    } = plan;
    let mut header = run.header;
    let outputs = run.outputs;
    let slo = header.config.slo;
    let entered = Instant::now();
    for n in &run.spread.notices {
        say!("infertop: {n}");
    }
    // In a terminal, the request lines would bury the comparison: progress goes to stderr.
    let lines = run.screen.is_none();
    if !lines {
        say!("infertop: note: --determinism has no dashboard yet; it runs headless (progress here, the comparison at the end)");
    }
    let unstarted = |f: Failure, header: &crate::record::line::Header| {
        super::unstarted(outputs.record.as_deref(), header, f, entered)
    };
    super::check_api(&mut passes[0], Some(&mut header)).map_err(|f| unstarted(f, &header))?;
    if !passes[0].api.streams() {
        return Err(Failure::usage(format!(
            "--api auto: picked {}, which generates no output to compare; give --api completions or chat",
            passes[0].api.name()
        )));
    }
    let seed = settle_api(&mut passes, seed);
    let cache_ruled_out = plan::determinism::prefix_cache_ruled_out(&passes[0]);
    if passes[0].reset_prefix_cache {
        let h = &passes[0];
        super::check_cache_reset(&h.endpoints, h.api_key.as_deref(), &h.shape.extra)?;
    }
    let started = Instant::now();
    header.clock = Some(RunClock {
        started_unix_s: http::clock::unix_s(std::time::SystemTime::now()),
        ..RunClock::default()
    });
    let mut recorder = match &outputs.record {
        Some(path) => {
            Some(Recorder::create(path, header, outputs.jsonl_steps).map_err(Failure::usage)?)
        }
        None => None,
    };
    let metrics = outputs
        .metrics_listen
        .map(super::metrics::MetricsListener::start)
        .transpose()?;
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let producers = Producers::start(run.telemetry, &run.server_metrics, &ev_tx, started)?;
    let cells = passes.iter().map(cell_params).collect();
    let handle = sequencer::spawn(Cells::Grid(cells), starter(passes), ev_tx, ctl_rx)
        .map_err(|e| Failure::runtime(format!("cannot start the engine thread: {e}")))?;

    let mut fold = DeterminismFold::new(
        prompts,
        concurrency,
        max_output_tokens,
        seed,
        cache_ruled_out,
        slo,
    );
    let mut consumer = Consumer::new(&ev_rx, &ctl_tx, signals);
    let stdout = std::io::stdout();
    let mut said_failure = false;
    while fold.live() {
        let Some(ev) = consumer.next_event(&mut fold) else {
            continue;
        };
        let t_s = since(started);
        if let Some(r) = recorder.as_mut() {
            r.on_event(t_s, &ev);
        }
        super::metrics::observe(metrics.as_ref(), &ev);
        let running = fold.pass();
        fold.apply(&ev);
        match (&ev, running) {
            (Event::CellStarted(c), _) => {
                let load = if c.cell == 0 { 1 } else { concurrency };
                say!(
                    "infertop: pass {} of 2: {prompts} prompts, {}",
                    c.cell + 1,
                    determinism::pass_name(load)
                );
            }
            (Event::Finished(_), Some(pass)) => {
                let p = &fold.passes[pass];
                say!(
                    "infertop: pass {} of 2: {} completed, {} failed",
                    pass + 1,
                    p.completed_requests,
                    p.failed_requests
                );
            }
            _ if lines => super::lines::print_line(&mut stdout.lock(), &ev, false, t_s),
            _ => {}
        }
        if let (Some(why), false) = (&fold.pass_failed, said_failure) {
            said_failure = true;
            say!("infertop: error: a pass failed ({why}); stopping");
            let _ = ctl_tx.send(Control::Stop(StopReason::Error));
        }
    }
    let (asked, interrupted) = (consumer.asked_at, consumer.interrupted.clone());
    drop(ev_rx);
    producers.stop();
    let _ = ctl_tx.send(Control::Stop(StopReason::UserStop));
    super::join_by(handle, asked);

    let summary = fold.summary();
    let stop = fold
        .stop
        .clone()
        .or(interrupted)
        .unwrap_or(StopReason::UserStop);
    if let Some(r) = recorder.as_mut() {
        r.write_line(&Line::Determinism(Box::new(summary.clone())));
        r.finish(&stop, since(started), &fold.whole.summary());
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    let text = match outputs.format {
        SummaryFormat::Json => render::json(&summary),
        _ => render::markdown(&summary),
    };
    super::print_stdout(&text)?;
    if let Some(code) = signals.exit_code() {
        return Ok(code);
    }
    if summary.changed() > 0 {
        say!(
            "infertop: {} of {} outputs changed under load (exit {EXIT_OUTPUTS_DIFFER})",
            summary.changed(),
            summary.compared
        );
        return Ok(EXIT_OUTPUTS_DIFFER);
    }
    if fold.pass_failed.is_some() {
        return Ok(EXIT_FAILURE);
    }
    if summary.not_compared > 0 {
        let failed: u64 = fold.passes.iter().map(|p| p.failed_requests).sum();
        say!(
            "infertop: error: {} of {prompts} prompts were not compared ({failed} requests failed; the last: {})",
            summary.not_compared,
            fold.passes
                .iter()
                .rev()
                .find_map(|p| p.last_failure.as_deref())
                .unwrap_or("none")
        );
        return Ok(EXIT_FAILURE);
    }
    Ok(EXIT_OK)
}

/// A pass as the record's `cell` line names it.
fn cell_params(h: &HttpConfig) -> CellParams {
    CellParams {
        batch: 1,
        prompt_tokens: h.traffic.prompt.as_ref().map_or(
            crate::event::CellLen::Written(crate::sweep::TEXT_LENGTH.into()),
            crate::sweep::cell_len,
        ),
        output_tokens: crate::sweep::cell_len(&h.traffic.output),
        concurrency: h.concurrency,
        ..CellParams::default()
    }
}

/// How the sequencer starts each pass: its http engine, on the one channel.
fn starter(passes: [HttpConfig; 2]) -> StartCell {
    let mut passes: Vec<Option<HttpConfig>> = passes.into_iter().map(Some).collect();
    Box::new(move |cell, _, tx, rx| {
        let cfg = passes
            .get_mut(cell)
            .and_then(Option::take)
            .ok_or_else(|| format!("pass {} is not in the plan", cell + 1))?;
        http::spawn(cfg, tx, rx)
            .map(CellHandle::thread)
            .map_err(|e| format!("cannot start the engine thread: {e}"))
    })
}
