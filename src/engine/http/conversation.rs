//! Conversations over `--api chat` (`--turns`): each conversation is a task that sends its
//! turns one after another, every turn resending the whole history with the replies the server
//! actually streamed, after the think time (measured from the end of the previous reply), with
//! one `X-Session-ID` per conversation. `--concurrency` counts conversations in flight (with
//! `--rate`, conversations start at that rate), on the same scheduler as single requests
//! (`schedule`); a conversation that fails a turn stops there, counted. Every turn is a
//! request of the run: `--requests` bounds them all, and a drain or the end of `--duration`
//! lets the turns in flight finish and starts no more. A finished conversation's history is
//! dropped with its task. A shard of the run (`--shard`) sends its own conversations, every
//! turn of each, numbered from the conversation's place in the list (`Settings::firsts`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::completions::Launched;
use super::request::{self, Ask};
use super::schedule::{Scheduler, Unit};
use super::{render, request_done, send_token, Events, HttpConfig, Prompts, Shared};
use crate::engine::control::Inbox;
use crate::event::{Event, Origin, RequestFailed, StopReason};
use crate::traffic::{Conversation, Conversations};

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
    convs: Arc<Conversations>,
    /// The next request's number (every turn of every conversation is a request).
    next_index: AtomicU64,
    /// Requests the run sends at most.
    limit: u64,
    /// A shard's numbering (`--shard`): conversation `c`'s turn `t` is request
    /// `firsts[c] + t`, the same on every shard, so the shards' numbers never meet and the
    /// limit is the same requests for all. `None` (the whole run): turns are numbered as they
    /// are taken, so the first requests (warmup) are the first sent.
    firsts: Option<Vec<u64>>,
}

impl Settings {
    /// The request number of `conversation`'s turn `turn` (0-based), or `None` when the run
    /// has sent all it may.
    fn take_index(&self, conversation: u64, turn: usize) -> Option<u64> {
        let index = match &self.firsts {
            Some(firsts) => firsts.get(conversation as usize)? + turn as u64,
            None => self.next_index.fetch_add(1, Ordering::Relaxed),
        };
        (index < self.limit).then_some(index)
    }

    fn requests_left(&self) -> bool {
        self.firsts.is_some() || self.next_index.load(Ordering::Relaxed) < self.limit
    }

    /// Conversations the run starts at most: all of them, or for a shard those with a
    /// request within the limit.
    fn conversations(&self) -> u64 {
        match &self.firsts {
            Some(firsts) => firsts.iter().take_while(|&&f| f < self.limit).count() as u64,
            None => self.convs.list.len() as u64,
        }
    }
}

/// What the conversations in flight are told: hold the next turn, or start no more.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Gate {
    paused: bool,
    ending: bool,
}

/// Runs every conversation (`cfg.traffic.conversations`) until done, stopped, drained, or the
/// duration is up.
pub(super) async fn run(
    mut cfg: HttpConfig,
    shared: Arc<Shared>,
    model: String,
    tx: &Events,
    inbox: &mut Inbox,
) -> Result<StopReason, String> {
    let Some(convs) = cfg.traffic.conversations.clone() else {
        return Err("no conversations to send".into());
    };
    let settings = Arc::new(Settings {
        model,
        cfg: cfg.clone(),
        limit: cfg.traffic.request_limit().unwrap_or(u64::MAX),
        next_index: AtomicU64::new(0),
        convs: convs.clone(),
        firsts: (!cfg.traffic.shard.is_whole()).then(|| convs.first_requests()),
    });
    let (gate_tx, gate_rx) = watch::channel(Gate::default());
    let mut schedule = Scheduler::new(&cfg, Unit::Conversation, Some(settings.conversations()))?;
    let mut tasks: JoinSet<Ended> = JoinSet::new();
    loop {
        if let Some(stop) = schedule.intents(inbox, &mut cfg, tx)? {
            return Ok(stop);
        }
        let gate = Gate {
            paused: inbox.paused(),
            ending: schedule.ending(inbox),
        };
        gate_tx.send_if_modified(|g| std::mem::replace(g, gate) != gate);
        if !settings.requests_left() {
            schedule.close();
        }
        if let Some(verdict) = schedule.verdict(tasks.len(), inbox) {
            return verdict;
        }
        while !gate.ending && schedule.may_launch(tasks.len(), &cfg, inbox) {
            let conversation = schedule.launched;
            let Some(conv) = convs.list.get(conversation as usize).cloned() else {
                schedule.close();
                break;
            };
            tasks.spawn(converse(
                shared.clone(),
                settings.clone(),
                conversation,
                conv,
                gate_rx.clone(),
            ));
            schedule.launched_one(&cfg);
        }
        if gate.ending {
            schedule.close();
        }
        let wake = schedule.wake(tasks.len(), &cfg, inbox);
        tokio::select! {
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                match joined {
                    Ok(end) => schedule.ended(end.completed, end.failed, end.last_failure, &cfg),
                    Err(e) => {
                        let message = format!("client task failed: {e}");
                        schedule.ended(0, 1, Some(message.clone()), &cfg);
                        let _ = tx.send(Event::Error { message, fatal: false });
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
    mut gate: watch::Receiver<Gate>,
) -> Ended {
    let cfg = &s.cfg;
    let words = match &cfg.prompts {
        Prompts::Words(w) => Some(w.clone()),
        _ => None,
    };
    let session = format!("infertop-{:x}-{conversation}", cfg.traffic.seed);
    let endpoint = cfg.endpoints[(conversation as usize) % cfg.endpoints.len()].clone();
    let mut history: Vec<(String, String)> = conv
        .system
        .iter()
        .map(|s| ("system".to_string(), s.clone()))
        .collect();
    let mut history_tokens: usize = 0;
    let mut end = Ended::default();
    let turns = s.convs.turns.take(conv.turns.len());
    for (t, turn) in conv.turns.iter().take(turns).enumerate() {
        if t > 0 {
            if let Some(think) = &s.convs.think {
                let pause = think.sample(cfg.traffic.seed, conversation, t as u32);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = gate.wait_for(|g| g.ending) => {}
                }
            }
        }
        // Held while paused; no further turn once the run ends.
        match gate.wait_for(|g| !g.paused || g.ending).await {
            Ok(g) if !g.ending => {}
            _ => return end,
        }
        let Some(index) = s.take_index(conversation, t) else {
            return end;
        };
        let (text, _) = render(&turn.user, super::Api::Completions, words.as_deref(), None);
        history.push(("user".to_string(), text));
        history_tokens += turn.tokens;
        let mut rng = cfg.traffic.rng(index);
        let output_tokens = turn
            .output_tokens
            .unwrap_or_else(|| cfg.traffic.output.pick(index, &mut rng));
        let warmup = cfg.traffic.is_warmup(index);
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
