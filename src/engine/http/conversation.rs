//! Conversations over `--api chat` (`--turns`): each conversation is a task that sends its
//! turns one after another, every turn resending the whole history with the replies the server
//! actually streamed, after the think time (measured from the end of the previous reply), with
//! one `X-Session-ID` per conversation. `--concurrency` counts conversations in flight (with
//! `--rate`, conversations start at that rate); a conversation that fails a turn stops there,
//! counted. A finished conversation's history is dropped with its task.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, TryRecvError};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::request::{self, Ask};
use super::{
    all_failed, render, request_done, send_token, Arrivals, Events, HttpConfig, Launched, Prompts,
    Shared, CONTROL_POLL, GIVE_UP_AFTER_FAILURES,
};
use crate::event::{Control, Event, Origin, RequestFailed, StopReason};
use crate::traffic::{Conversation, ThinkTime};
use crate::util::SplitMix64;

/// What a conversation's task hands back when it ends.
#[derive(Debug, Default)]
struct Ended {
    completed: u64,
    failed: u64,
    last_failure: Option<String>,
}

/// What every conversation task shares besides the client.
struct Settings {
    model: String,
    cfg: HttpConfig,
    think: Option<ThinkTime>,
    turns: crate::traffic::Turns,
    next_index: AtomicU64,
}

/// Runs every conversation (`cfg.conversations`) until done, stopped, or the duration is up.
pub(super) async fn run(
    mut cfg: HttpConfig,
    shared: Arc<Shared>,
    model: String,
    tx: &Events,
    control: &Receiver<Control>,
) -> Result<StopReason, String> {
    let Some(convs) = cfg.conversations.take() else {
        return Err("no conversations to send".into());
    };
    let total = match cfg.requests {
        Some(n) => (n as usize).min(convs.list.len()),
        None => convs.list.len(),
    };
    let mut list = convs.list.into_iter().take(total);
    let settings = Arc::new(Settings {
        model,
        think: convs.think,
        turns: convs.turns,
        next_index: AtomicU64::new(0),
        cfg: cfg.clone(),
    });
    let (pause_tx, pause_rx) = watch::channel(false);
    let started = Instant::now();
    let mut arrivals = Arrivals::new(cfg.rate, cfg.burstiness, cfg.seed ^ 0xC0_4E25)?;
    let mut next_due = started;
    let mut cap = cfg.in_flight_cap();
    let mut paused = false;
    let mut conversation: u64 = 0;
    let (mut completed, mut failed) = (0u64, 0u64);
    let mut last_failure = String::new();
    let mut tasks: JoinSet<Ended> = JoinSet::new();
    loop {
        loop {
            match control.try_recv() {
                Ok(c @ (Control::Stop(_) | Control::EndCell)) => {
                    return Ok(c.stop().unwrap_or(StopReason::UserStop))
                }
                Ok(Control::Pause) if !paused => {
                    paused = true;
                    let _ = pause_tx.send(true);
                    let _ = tx.send(Event::Paused);
                }
                Ok(Control::Resume) if paused => {
                    paused = false;
                    next_due = Instant::now();
                    let _ = pause_tx.send(false);
                    let _ = tx.send(Event::Resumed);
                }
                Ok(Control::ResetStats) => {
                    let _ = tx.send(Event::StatsReset);
                }
                Ok(Control::AdjustLoad(steps)) => {
                    cfg.adjust_load(steps);
                    cap = cfg.in_flight_cap();
                    arrivals = Arrivals::new(cfg.rate, cfg.burstiness, cfg.seed ^ conversation)?;
                    let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
                }
                Ok(Control::AdjustOutputTokens(_) | Control::AdjustPromptTokens(_)) => {
                    let _ = tx.send(Event::Error {
                        message: "a conversation's turns keep their lengths: only the load key (conversations in flight) changes them".into(),
                        fatal: false,
                    });
                }
                Ok(Control::Pause | Control::Resume | Control::CellVerdict { .. }) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Ok(StopReason::UserStop),
            }
        }
        if completed == 0 && failed >= GIVE_UP_AFTER_FAILURES {
            return Err(all_failed(failed, &last_failure));
        }
        let out_of_time = cfg.duration.is_some_and(|d| started.elapsed() >= d);
        let all_started = conversation as usize >= total;
        if (out_of_time || all_started) && tasks.is_empty() {
            if completed == 0 && failed > 0 {
                return Err(all_failed(failed, &last_failure));
            }
            return Ok(if out_of_time {
                StopReason::DurationLimit
            } else {
                StopReason::RequestLimit
            });
        }
        let now = Instant::now();
        if !paused && !out_of_time {
            while tasks.len() < cap && (cfg.rate.is_none() || now >= next_due) {
                let Some(conv) = list.next() else { break };
                tasks.spawn(converse(
                    shared.clone(),
                    settings.clone(),
                    conversation,
                    conv,
                    pause_rx.clone(),
                ));
                conversation += 1;
                if let Some(a) = arrivals.as_mut() {
                    next_due += a.gap();
                }
            }
        }
        let mut wake = Instant::now() + CONTROL_POLL;
        if cfg.rate.is_some() && !paused && tasks.len() < cap {
            wake = wake.min(next_due);
        }
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                match joined {
                    Ok(end) => {
                        completed += end.completed;
                        failed += end.failed;
                        if let Some(f) = end.last_failure {
                            last_failure = f;
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        last_failure = format!("client task failed: {e}");
                        let _ = tx.send(Event::Error { message: last_failure.clone(), fatal: false });
                    }
                }
            }
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

/// One conversation, turn by turn.
async fn converse(
    shared: Arc<Shared>,
    s: Arc<Settings>,
    conversation: u64,
    conv: Conversation,
    mut paused: watch::Receiver<bool>,
) -> Ended {
    let cfg = &s.cfg;
    let words = match &cfg.prompts {
        Prompts::Words(w) => Some(w.clone()),
        _ => None,
    };
    let session = format!("infertop-{:x}-{conversation}", cfg.seed);
    let endpoint = cfg.endpoints[(conversation as usize) % cfg.endpoints.len()].clone();
    let mut history: Vec<(String, String)> = conv
        .system
        .iter()
        .map(|s| ("system".to_string(), s.clone()))
        .collect();
    let mut history_tokens: usize = 0;
    let mut end = Ended::default();
    let turns = s.turns.take(conv.turns.len());
    for (t, turn) in conv.turns.iter().take(turns).enumerate() {
        if t > 0 {
            if let Some(think) = &s.think {
                tokio::time::sleep(think.sample(cfg.seed, conversation, t as u32)).await;
            }
        }
        while *paused.borrow() {
            if paused.changed().await.is_err() {
                return end;
            }
        }
        let (text, _) = render(&turn.user, super::Api::Completions, words.as_deref(), None);
        history.push(("user".to_string(), text));
        history_tokens += turn.tokens;
        let index = s.next_index.fetch_add(1, Ordering::Relaxed);
        let mut rng = SplitMix64::new(cfg.seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
        let output_tokens = turn
            .output_tokens
            .unwrap_or_else(|| cfg.output.pick(index, &mut rng));
        let warmup = index < cfg.warmup;
        let _ = shared.events.send(Event::RequestStarted {
            index,
            warmup,
            prompt_tokens: history_tokens,
            output_tokens,
            batch: 1,
        });
        let ask = Ask {
            model: s.model.clone(),
            api: cfg.api,
            prompt: String::new(),
            messages: Some(history.clone()),
            session: Some(session.clone()),
            output_tokens,
            exact_output: cfg.exact_output,
            chunk_usage: cfg.chunk_usage,
        };
        let scheduled = Instant::now();
        let events = shared.events.clone();
        let result = request::measure(
            &shared.pool,
            &endpoint,
            shared.api_key.as_deref(),
            &ask,
            request::Start::Launched(scheduled),
            shared.timeout,
            |token| send_token(&events, index, token),
        )
        .await;
        let launched = Launched {
            index,
            warmup,
            endpoint: endpoint.clone(),
            requested_prompt_tokens: history_tokens,
            exact_prompt: false,
            scheduled,
            origin: Some(Origin {
                row: (turn.row > 0).then_some(turn.row),
                conversation: Some(conversation),
                turn: Some(t as u32 + 1),
                ..Origin::default()
            }),
        };
        match result {
            Ok(m) => {
                let reply = m.text.clone();
                history_tokens += m.usage_completion_tokens.unwrap_or(m.content_chunks);
                let done = request_done(cfg.record_tokens, &launched, m);
                let _ = shared.events.send(Event::RequestDone(Box::new(done)));
                history.push(("assistant".to_string(), reply));
                end.completed += 1;
            }
            Err(f) => {
                end.failed += 1;
                end.last_failure = Some(f.reason.clone());
                let _ = shared
                    .events
                    .send(Event::RequestFailed(Box::new(RequestFailed {
                        index,
                        warmup,
                        reason: format!(
                            "{} (conversation {conversation} stops at turn {})",
                            f.reason,
                            t + 1
                        ),
                        status: f.status,
                        endpoint: Some(endpoint.display().to_string()),
                        elapsed_s: scheduled.elapsed().as_secs_f64(),
                    })));
                break;
            }
        }
    }
    end
}
