//! Conversations over `--api chat` (`--turns`): each conversation is a task that sends its
//! turns one after another, every turn resending the whole history with the replies the server
//! actually streamed, after the think time (measured from the end of the previous reply), with
//! one `X-Session-ID` per conversation. `--concurrency` counts conversations in flight (with
//! `--rate`, conversations start at that rate), on the same scheduler as single requests
//! (`schedule`); a conversation that fails a turn stops there, counted. Every turn is a
//! request of the run: `--requests` bounds them all, and a drain or the end of `--duration`
//! lets the turns in flight finish and starts no more. A reply that ends in tool calls is
//! answered with the tools' results after `--tool-time`, one more request of the same turn. A
//! finished conversation's history is dropped with its task. A shard of the run (`--shard`)
//! sends its own conversations, every turn of each, numbered from the conversation's place in
//! the list (`Settings::firsts`; a sharded run offers no tools, whose rounds would add requests
//! those numbers do not know).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::api::Ask;
use super::api::{Message, ToolCall};
use super::finished::{request_done, send_token, Launched};
use super::prompts::render;
use super::request;
use super::schedule::{Scheduler, Unit};
use super::{Events, HttpConfig, Prompts, Shared};
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
    let tools_offered = cfg.api.takes_messages()
        && (cfg.shape.tools.is_some() || convs.list.iter().any(|c| c.tools.is_some()));
    let limit = cfg
        .traffic
        .conversation_limit(tools_offered)
        .unwrap_or(u64::MAX);
    let settings = Arc::new(Settings {
        model,
        cfg: cfg.clone(),
        limit,
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
            _ = inbox.arrived() => {}
        }
    }
}

/// Tool calls answered in one turn at most before the next user turn (a model that calls
/// tools for ever does not hold its conversation for ever).
pub const MAX_TOOL_ROUNDS: u32 = 8;

/// The salt of a conversation's model draw and of its tool times.
const CONVERSATION_SALT: u64 = 0x00C0_4E25_A710_0000;
const TOOL_SALT: u64 = 0x0070_0171_3E00_0000;

/// What a made-up tool returns when the dataset says nothing.
fn made_up_result(call: &ToolCall) -> String {
    serde_json::json!({"tool": call.name, "ok": true, "result": "42"}).to_string()
}

/// One conversation, turn by turn: each turn's reply resent with the history; a reply that
/// ends in tool calls is answered, after the simulated tool's time (`--tool-time`), by a tool
/// message per call (the dataset's result, or a made-up one), and the turn goes on with one
/// more request (its `tool_round`) until a reply does not call a tool.
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
    let model = cfg
        .shape
        .model_for(cfg.traffic.seed ^ CONVERSATION_SALT, conversation)
        .map(str::to_string);
    let tools = if cfg.api.takes_messages() {
        cfg.shape.tools_for(conv.tools.as_deref())
    } else {
        None
    };
    let mut history: Vec<Message> = conv
        .system
        .iter()
        .map(|s| Message::new("system", s.clone()))
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
        let (text, _) = render(&turn.user, super::Api::Completions, words.as_deref(), None);
        history.push(Message::new("user", text));
        history_tokens += turn.tokens;
        let mut round: u32 = 0;
        loop {
            // Held while paused; no further request once the run ends.
            match gate.wait_for(|g| !g.paused || g.ending).await {
                Ok(g) if !g.ending => {}
                _ => return end,
            }
            let Some(index) = s.take_index(conversation, t) else {
                return end;
            };
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
                model: model.clone().unwrap_or_else(|| s.model.clone()),
                api: cfg.api,
                prompt: String::new(),
                messages: Some(history.clone()),
                session: Some(session.clone()),
                output_tokens,
                exact_output: cfg.exact_output,
                chunk_usage: cfg.chunk_usage,
                chunk_timings: cfg.chunk_timings,
                tools: tools.clone(),
                inputs: Vec::new(),
                extra: cfg.shape.extra.clone(),
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
                // A conversation's turns build on each other: none is cancelled.
                None,
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
                    tool_round: (round > 0).then_some(round),
                    ..Origin::default()
                }),
                model: model.clone(),
            };
            super::say_news(&shared.pool, &shared.events);
            let m = match result {
                Ok(m) => m,
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
                            model: model.clone(),
                        })));
                    return end;
                }
            };
            super::say_output_notes(&shared, index, &m);
            let reply = m.answer.clone();
            let calls = m.tool_calls.clone();
            let called =
                !calls.is_empty() && m.parts.as_ref().is_some_and(|p| p.ended_in_tool_call);
            history_tokens += m.usage_completion_tokens.unwrap_or(m.content_chunks);
            let done = request_done(cfg.record_tokens, &launched, m);
            let _ = shared.events.send(Event::RequestDone(Box::new(done)));
            history.push(Message::assistant(reply, calls.clone()));
            end.completed += 1;
            if !called || round >= MAX_TOOL_ROUNDS {
                break;
            }
            // The tool runs: its time, then its result, then the turn goes on.
            round += 1;
            if let Some(tool_time) = &cfg.shape.tool_time {
                let pause = tool_time.sample(
                    cfg.traffic.seed ^ TOOL_SALT,
                    conversation,
                    (t as u32).saturating_mul(MAX_TOOL_ROUNDS + 1) + round,
                );
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = gate.wait_for(|g| g.ending) => {}
                }
            }
            for call in &calls {
                let result = turn
                    .tool_result
                    .clone()
                    .unwrap_or_else(|| made_up_result(call));
                history_tokens += result.chars().count().div_ceil(4).max(1);
                history.push(Message::tool_result(call, result));
            }
        }
    }
    end
}
