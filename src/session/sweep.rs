//! `infertop sweep`: the plan carried out. The sweep engine (`sweep::engine`) runs the cells on
//! one channel; the headless loop or the dashboard folds the stream with `sweep::fold` (one
//! fold, one channel, real controls), writing the record as it goes. Headless, one line per
//! cell goes to stderr as it completes; at the end the table and the findings go to stdout.

use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::Producers;
use super::{since, Consumer, SweepEnds};
use crate::engine::worker::ModelHost;
use crate::event::{Control, Event, StopReason};
use crate::exit::{Failure, EXIT_FAILURE, EXIT_OK};
use crate::fold::RunFold;
use crate::plan::sweep::{CellPlans, SweepArgs, SweepPlan};
use crate::plan::{self, EnginePlan, ScreenPlan};
use crate::record::line::{CellStatus, Line, SweepConfig};
use crate::record::Recorder;
use crate::report::{peak_for, ReportOptions};
use crate::signals::Signals;
use crate::stats::SettleRule;
use crate::sweep::analysis::findings;
use crate::sweep::engine::CellHandle;
use crate::sweep::fold::SweepFold;
use crate::sweep::report::title;
use crate::sweep::table::SweepTable;
use crate::sweep::{self, is_server, CellResult, Repetitions};
use crate::util::say;

/// `infertop sweep`.
pub fn sweep(a: &SweepArgs) -> Result<i32, Failure> {
    super::pin_threads(plan::engine::candle_threads(&a.run));
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let started = std::time::Instant::now();
    let plan = plan::sweep::plan(a).map_err(|f| super::unplanned(&a.run, f, started))?;
    execute(plan, &signals)
}

fn execute(plan: SweepPlan, signals: &Signals) -> Result<i32, Failure> {
    let SweepPlan {
        config,
        cells,
        mut header,
        slo,
        outputs,
        format,
        telemetry,
        screen,
        probe,
        reset_prefix_cache,
        api_key,
        api_check,
    } = plan;
    let extra = api_check
        .as_ref()
        .map(|h| h.shape.extra.clone())
        .unwrap_or_default();
    if let Some(mut h) = api_check {
        super::check_api(&mut h, Some(&mut header))?;
    }
    // A server that cannot empty its prefix cache is known before anything runs (every cell
    // empties it again as it starts).
    super::check_cache_reset(&reset_prefix_cache, api_key.as_deref(), &extra)?;
    let mut recorder = recorder(&outputs, &header, &config)?;
    let metrics = outputs
        .metrics_listen
        .map(super::metrics::MetricsListener::start)
        .transpose()?;
    let (ev_tx, ev_rx) = crossbeam_channel::bounded::<Event>(crate::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let started = Instant::now();
    let producers = Producers::start(telemetry, &[], &ev_tx, started)?;
    let engine_cells = match &config.search {
        Some(search) => sweep::engine::Cells::Search(search.clone()),
        None => sweep::engine::Cells::Grid(config.cells.clone()),
    };
    let start = cell_starter(cells);
    let handle = sweep::engine::spawn(engine_cells, start, ev_tx, ctl_rx)
        .map_err(|e| Failure::runtime(format!("cannot start the sweep thread: {e}")))?;
    let fold = SweepFold::new(config.clone(), slo);
    // When the stop was asked (a signal seen, q pressed): the wait for the engine runs from it.
    let (fold, asked) = match screen {
        None => headless(
            fold,
            &ev_rx,
            &ctl_tx,
            signals,
            recorder.as_mut(),
            metrics.as_ref(),
            started,
        ),
        Some(screen) => dashboard(
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
    // A cell loading its model does not look at its controls: the sweep is not held by it.
    super::join_by(handle, asked);
    let fold = fold?;

    let found = {
        // A sweep a signal cut short answers at once: no bandwidth probe (a second of the
        // CPU's time) for its roofline.
        let probe = probe && fold.interrupted().is_none();
        let (peak, peak_unavailable) = peak(&fold, &header, probe);
        findings(
            &fold.results,
            &slo,
            peak.as_ref(),
            peak_unavailable,
            config.search.as_ref(),
        )
    };
    let interrupted = fold.interrupted().map(crate::event::StopReason::words);
    let table = SweepTable {
        title: title(&header, fold.model.as_ref(), &config),
        cells: &fold.results,
        findings: &found,
        not_run: fold.not_run(),
        interrupted,
    };
    if let Some(r) = recorder.as_mut() {
        r.write_line(&Line::Footer(crate::record::line::Footer {
            stop: fold.stop.clone().unwrap_or(StopReason::RequestLimit),
            elapsed_s: since(started),
            summary: table.to_json(),
        }));
        if let Some(e) = r.error() {
            say!("infertop: warning: {e}");
        }
    }
    super::print_stdout(&table.render(format))?;
    if let Some(code) = signals.exit_code() {
        return Ok(code);
    }
    if !fold.results.is_empty() && fold.results.iter().all(|c| c.status == CellStatus::Failed) {
        say!("infertop: error: every cell of the sweep failed");
        return Ok(EXIT_FAILURE);
    }
    Ok(EXIT_OK)
}

/// How the sweep engine starts each cell: a grid's cell from its plan, a probe planned now;
/// the candle engine's cells of one model and dtype on one `ModelHost`, so the model is
/// loaded once for them (the host of the last group is dropped, and its model freed, before
/// the next group's loads).
/// The sweep's record (`--record`), its grid written after the header; a run repeated
/// (`--runs`) writes the same.
pub(super) fn recorder(
    outputs: &crate::plan::Outputs,
    header: &crate::record::line::Header,
    config: &SweepConfig,
) -> Result<Option<Recorder>, Failure> {
    let Some(path) = &outputs.record else {
        return Ok(None);
    };
    let mut r =
        Recorder::create(path, header.clone(), outputs.jsonl_steps).map_err(Failure::usage)?;
    r.write_line(&Line::Sweep(config.clone()));
    Ok(Some(r))
}

fn cell_starter(cells: CellPlans) -> sweep::engine::StartCell {
    let mut grid: Vec<Option<Result<EnginePlan, String>>> = Vec::new();
    let mut probes = None;
    match cells {
        CellPlans::Grid(plans) => grid = plans.into_iter().map(Some).collect(),
        CellPlans::Search(p) => probes = Some(p),
    }
    let mut host: Option<ModelHost> = None;
    Box::new(move |cell, params, tx, rx| {
        let engine = match &probes {
            Some(p) => p.plan(params)?,
            None => grid
                .get_mut(cell)
                .and_then(Option::take)
                .unwrap_or_else(|| Err(format!("cell {cell} is not in the plan")))?,
        };
        let started = |e: std::io::Error| format!("cannot start the engine thread: {e}");
        match engine {
            EnginePlan::Candle(w) => {
                if !host.as_ref().is_some_and(|h| h.holds(&w)) {
                    host = None;
                    host = Some(ModelHost::spawn(&w, tx).map_err(started)?);
                }
                let done = host
                    .as_ref()
                    .ok_or("the model's thread has gone")?
                    .run(*w, None, rx)?;
                Ok(CellHandle::job(done))
            }
            http => http
                .in_cell(cell)
                .spawn(None, tx, rx)
                .map(CellHandle::thread)
                .map_err(started),
        }
    })
}

/// The device's peak figures for the roofline finding, or why there are none.
fn peak(
    fold: &SweepFold,
    header: &crate::record::line::Header,
    probe: bool,
) -> (Option<crate::stats::roofline::Peak>, Option<String>) {
    match &fold.model {
        Some(m) if m.weight_bytes > 0 => {
            let opts = ReportOptions {
                probe,
                rule: SettleRule::default(),
                ..ReportOptions::default()
            };
            let peak = peak_for(Some(header), &m.dtype, &opts);
            if peak.bandwidth.is_some() {
                (Some(peak), None)
            } else {
                (
                    None,
                    Some(format!(
                        "no peak bandwidth for device `{}` (a GPU not in the table, or --no-probe); `infertop report --peak-bw` on the record gives it",
                        header.config.device
                    )),
                )
            }
        }
        _ => (None, None),
    }
}

/// One step of consuming the sweep's stream, the same headless and in the dashboard: the
/// record gets the event (and a closed cell's end line), the fold's wishes are sent.
pub(super) fn after_event(
    fold: &mut SweepFold,
    ev: &Event,
    recorder: Option<&mut Recorder>,
    metrics: Option<&super::metrics::MetricsListener>,
    t_s: f64,
) -> Option<CellResult> {
    super::metrics::observe(metrics, ev);
    let closed = fold.take_closed();
    if let Some(r) = recorder {
        r.on_event(t_s, ev);
        if let Some(end) = &closed {
            r.write_line(&Line::CellEnd(end.clone()));
        }
    }
    closed.and(fold.last_result().cloned())
}

/// Headless: the fold, a line per cell on stderr.
fn headless(
    mut fold: SweepFold,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signals: &Signals,
    mut recorder: Option<&mut Recorder>,
    metrics: Option<&super::metrics::MetricsListener>,
    started: Instant,
) -> (Result<SweepFold, Failure>, Option<Instant>) {
    let mut run = RunFold::with_slo(fold.slo);
    let mut consumer = Consumer::new(events, control, signals);
    let of = fold.config.cells.len();
    while fold.live() {
        let Some(ev) = consumer.next_event(&mut SweepEnds(&mut fold, &mut run, since(started)))
        else {
            // A probe whose requests stall is still looked at (a closed cell is not).
            fold.tick(since(started), &run);
            if let Some(c) = fold.take_control() {
                let _ = control.send(c);
            }
            continue;
        };
        let t_s = since(started);
        fold.apply(t_s, &mut run, &ev);
        if let Some(c) = fold.take_control() {
            let _ = control.send(c);
        }
        match &ev {
            Event::CellStarted(c) if c.cell == 0 => {
                say!("infertop: {}", opening_line(&fold.config));
            }
            Event::Notice(n) => say!("infertop: {}", n.words()),
            _ => {}
        }
        if let Some(result) = after_event(&mut fold, &ev, recorder.as_deref_mut(), metrics, t_s) {
            let verdict = fold.config.search.is_some().then(|| {
                use crate::sweep::analysis::{meets_slo, probe_reasons};
                let over = result.sustain.as_ref().and_then(|s| s.over.clone());
                if meets_slo(&result, &fold.slo) {
                    "meets the SLO and holds its load".to_string()
                } else if let Some(why) = over {
                    format!(
                        "breaks the SLO ({}): {why}",
                        probe_reasons(&result, &fold.slo).join(", ")
                    )
                } else {
                    format!(
                        "breaks the SLO ({})",
                        probe_reasons(&result, &fold.slo).join(", ")
                    )
                }
            });
            let line = progress_line(of, &result);
            match verdict {
                Some(v) => say!("infertop: {line}: {v}"),
                None => say!("infertop: {line}"),
            }
        }
    }
    (Ok(fold), consumer.asked_at)
}

/// In a terminal: the dashboard folds the stream (its `sweep`), the grid fills in where the
/// events pane was, and pause, reset and quit reach the cell's engine through the sweep's.
#[allow(clippy::too_many_arguments)]
pub(super) fn dashboard(
    fold: SweepFold,
    screen: ScreenPlan,
    events: &Receiver<Event>,
    control: &Sender<Control>,
    signals: &Signals,
    recorder: &mut Option<Recorder>,
    metrics: Option<&super::metrics::MetricsListener>,
    started: Instant,
) -> (Result<SweepFold, Failure>, Option<Instant>) {
    let mut app = crate::ui::App::new(screen.app);
    app.sweep = Some(fold);
    let mut on_event = |ev: &Event, app: &mut crate::ui::App| {
        if let Some(fold) = app.sweep.as_mut() {
            // The dashboard folded the event at its frame's time; the record's clock is finer.
            let t_s = since(started);
            fold.stamp(t_s);
            after_event(fold, ev, recorder.as_mut(), metrics, t_s);
        }
    };
    match super::dashboard(app, screen.fps, events, control, signals, &mut on_event) {
        (Ok(_), mut app) => {
            let fold = app.sweep.take();
            (
                fold.ok_or_else(|| Failure::runtime("the sweep's state was lost")),
                app.stop_asked,
            )
        }
        (Err(e), app) => (Err(Failure::runtime(e)), app.stop_asked),
    }
}

/// `sweep of 6 cells, 2 warmup + 10 steady requests each`.
fn opening_line(config: &SweepConfig) -> String {
    let reps = Repetitions::of(config);
    let what = match &config.search {
        Some(s) => format!(
            "search for the max {} meeting the SLO that the server holds in [{}, {}], probes of{}",
            s.axis,
            s.lo,
            s.hi,
            s.probe_s
                .map(|p| format!(" at least {p:.0} s (until two looks agree),"))
                .unwrap_or_default()
        ),
        None => format!("sweep of {} cells,", config.cells.len()),
    };
    let hold = config
        .search
        .as_ref()
        .and_then(|s| s.hold_s)
        .map(|h| format!("; then the max held for {h:.0} s"))
        .unwrap_or_default();
    format!(
        "{what} {} warmup + {} each{hold}",
        config.warmup,
        match reps.precision {
            Some(p) => format!(
                "{}..{} steady requests (until the median TPOT is known to ±{:.1} %)",
                reps.min,
                reps.max,
                p * 100.0
            ),
            None => format!("{} steady requests", reps.min),
        }
    )
}

/// The progress line of a finished cell.
fn progress_line(of: usize, c: &CellResult) -> String {
    let head = if of == 0 {
        format!("probe {} ({})", c.cell + 1, c.params.words())
    } else {
        format!("cell {}/{of} ({})", c.cell + 1, c.params.words())
    };
    if c.status == CellStatus::Failed {
        return format!("{head}: FAILED: {}", c.reason.as_deref().unwrap_or("?"));
    }
    let p50 = |s: &crate::stats::Summary| {
        if s.n > 0 {
            format!("{:.3} ms", s.p50 * 1e3)
        } else {
            "-".into()
        }
    };
    let tput = if is_server(&c.params) {
        let over = match (c.held_s, c.wall_output_tok_s) {
            (Some(h), Some(w)) => format!(" over {h:.2} s held ({w:.1} over the whole wall time)"),
            (Some(h), None) => format!(" over {h:.2} s held"),
            (None, _) => " (load never held: over the steady wall time)".into(),
        };
        c.output_tok_s
            .map(|t| format!("{t:.1} output tok/s{over}"))
            .unwrap_or_default()
    } else {
        c.decode_tok_s
            .map(|t| format!("{t:.1} decode tok/s"))
            .unwrap_or_default()
    };
    let mut line = format!(
        "{head}: n {}, TTFT p50 {}, TPOT p50 {}, {tput}, {:.1} s",
        c.n,
        p50(&c.ttft),
        p50(&c.tpot),
        c.elapsed_s
    );
    if c.failed_requests > 0 {
        line.push_str(&format!(", {} failed requests", c.failed_requests));
    }
    if let Some(r) = &c.reason {
        line.push_str(&format!(" ({r})"));
    }
    line
}
