//! The request loop: each request a task on the runtime's workers that times its own stream
//! (`request::measure`), launched when the scheduler says (`schedule`), its events sent live as
//! its chunks arrive and its result when its stream ends.

use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinSet;

use super::api::Ask;
use super::finished::{request_done, send_token, Launched};
use super::outcome::{Measured, RequestError};
use super::prompts::what_to_send;
use super::request;
use super::schedule::{Scheduler, Unit};
use super::{Events, HttpConfig, Shared};
use crate::engine::control::Inbox;
use crate::event::{Event, Origin, RequestCancelled, RequestFailed, StopReason};

type Task = (Launched, Result<Measured, RequestError>);

/// Sends the run's requests until its limit, its duration, a drain or a stop.
pub(super) async fn run(
    mut cfg: HttpConfig,
    shared: Arc<Shared>,
    model: String,
    tx: &Events,
    inbox: &mut Inbox,
) -> Result<StopReason, String> {
    let mut schedule = Scheduler::new(&cfg, Unit::Request, cfg.traffic.request_limit())?;
    // Dropping `tasks` (a stop) aborts what is in flight.
    let mut tasks: JoinSet<Task> = JoinSet::new();
    loop {
        if let Some(stop) = schedule.intents(inbox, &mut cfg, tx)? {
            return Ok(stop);
        }
        if let Some(verdict) = schedule.verdict(tasks.len(), inbox) {
            return verdict;
        }
        while schedule.may_launch(tasks.len(), &cfg, inbox) {
            let scheduled = schedule.scheduled(&cfg);
            launch(
                &cfg,
                &shared,
                &model,
                schedule.launched,
                scheduled,
                &mut tasks,
            );
            schedule.launched_one(&cfg);
        }
        let wake = schedule.wake(tasks.len(), &cfg, inbox);
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                ended(joined, &shared, &cfg, &mut schedule, tx);
            }
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = inbox.arrived() => {}
        }
        schedule.sleep_to_due(tasks.len(), &cfg, inbox);
    }
}

/// A request's task ended: its result as an event, its outcome to the scheduler.
fn ended(
    joined: Result<Task, tokio::task::JoinError>,
    shared: &Shared,
    cfg: &HttpConfig,
    schedule: &mut Scheduler,
    tx: &Events,
) {
    let (launched, result) = match joined {
        Ok(r) => r,
        Err(e) => {
            // A task panicked: the request is lost, the run goes on.
            let message = format!("client task failed: {e}");
            schedule.ended(0, 1, Some(message.clone()), cfg);
            let _ = tx.send(Event::Error {
                message,
                fatal: false,
            });
            return;
        }
    };
    super::say_news(&shared.pool, tx);
    match result {
        Ok(m) => {
            schedule.ended(1, 0, None, cfg);
            super::say_output_notes(shared, launched.index, &m);
            let done = request_done(cfg.record_tokens, &launched, m);
            let _ = tx.send(Event::RequestDone(Box::new(done)));
        }
        Err(RequestError {
            cancelled: Some(c), ..
        }) => {
            // On purpose: neither completed nor failed, for the scheduler as for the stats.
            schedule.ended(0, 0, None, cfg);
            shared
                .cancelled
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = tx.send(Event::RequestCancelled(Box::new(RequestCancelled {
                index: launched.index,
                warmup: launched.warmup,
                elapsed_s: launched.scheduled.elapsed().as_secs_f64(),
                ttft_s: c.ttft_s,
                content_chunks: c.content_chunks,
                endpoint: Some(launched.endpoint.display().to_string()),
                model: launched.model,
            })));
        }
        Err(f) => {
            schedule.ended(0, 1, Some(f.reason.clone()), cfg);
            let _ = tx.send(Event::RequestFailed(Box::new(RequestFailed {
                index: launched.index,
                warmup: launched.warmup,
                reason: f.reason,
                status: f.status,
                endpoint: Some(launched.endpoint.display().to_string()),
                elapsed_s: launched.scheduled.elapsed().as_secs_f64(),
                model: launched.model,
            })));
        }
    }
}

/// Starts request `index` as a task.
fn launch(
    cfg: &HttpConfig,
    shared: &Arc<Shared>,
    model: &str,
    index: u64,
    scheduled: Instant,
    tasks: &mut JoinSet<Task>,
) {
    let what = what_to_send(cfg, index);
    let endpoint = cfg.endpoints[(index as usize) % cfg.endpoints.len()].clone();
    let warmup = cfg.traffic.is_warmup(index);
    let (prompt_tokens, output_tokens, exact_prompt) =
        (what.prompt_tokens, what.output_tokens, what.exact);
    let chosen = cfg.shape.model_for(cfg.traffic.seed, index);
    let batch = what.inputs.len().max(1);
    let ask = Ask {
        model: chosen.unwrap_or(model).to_string(),
        api: cfg.api,
        prompt: what.prompt,
        messages: what.messages,
        session: None,
        output_tokens,
        exact_output: cfg.exact_output,
        chunk_usage: cfg.chunk_usage,
        chunk_timings: cfg.chunk_timings,
        tools: what.tools,
        inputs: what.inputs,
        extra: cfg.shape.extra.clone(),
    };
    let _ = shared.events.send(Event::RequestStarted {
        index,
        warmup,
        prompt_tokens,
        output_tokens,
        batch,
    });
    let launched = Launched {
        index,
        warmup,
        endpoint,
        requested_prompt_tokens: prompt_tokens,
        exact_prompt,
        scheduled,
        origin: match &cfg.shape.pass {
            Some(pass) => Some(Origin {
                pass: Some(pass.clone()),
                ..what.origin.unwrap_or_default()
            }),
            None => what.origin,
        },
        model: chosen.map(str::to_string),
    };
    let shared = shared.clone();
    // Warmup is never cancelled: the steady requests are the ones a user cancels.
    let cancel = cfg
        .cancel
        .as_ref()
        .filter(|c| !warmup && c.picks(cfg.traffic.seed, index))
        .map(|c| c.after);
    let start = if cfg.open_loop() {
        request::Start::Due(scheduled)
    } else {
        request::Start::Launched(scheduled)
    };
    tasks.spawn(async move {
        let events = shared.events.clone();
        let result = request::measure(
            &shared.pool,
            &launched.endpoint,
            shared.api_key.as_deref(),
            &ask,
            start,
            shared.timeout,
            cancel,
            |token| send_token(&events, index, token),
        )
        .await;
        (launched, result)
    });
}
