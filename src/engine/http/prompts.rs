//! What each request sends (`WhatToSend`): its prompt from the traffic's plan (a dataset row,
//! a shared-prefix group), the given texts or made-up lengths; a pooling API's batch; a prompt
//! as the API takes it, text or messages (`render`).

use std::sync::Arc;

use super::api::{Api, Message, Tools};
use super::config::{HttpConfig, Prompts};
use crate::event::Origin;
use crate::traffic::dataset::Role;
use crate::traffic::words::PromptWords;
use crate::traffic::{Prompt, RequestSource};

/// What one request sends: its prompt (text, or chat messages as written), its tools, a
/// pooling API's batch, its lengths, and where it came from.
#[derive(Default)]
pub(crate) struct WhatToSend {
    pub prompt: String,
    pub messages: Option<Vec<Message>>,
    pub tools: Option<Arc<Tools>>,
    /// A pooling API's batch: texts to embed, or documents to rank against `prompt`.
    pub inputs: Vec<String>,
    /// Per sequence (a pooling batch: per input, the query's with a document's for a rerank).
    pub prompt_tokens: usize,
    /// `prompt_tokens` is the server's count (made of its one-token words, or counted with
    /// its tokenizer), not an estimate.
    pub exact: bool,
    pub output_tokens: usize,
    pub origin: Option<Origin>,
}

/// Request `index`: one prompt, or a pooling API's batch of them (each input drawn as a
/// request of its own would be: request `i` of batch `B` takes units `i·B … i·B + B − 1`, a
/// rerank's query first).
pub(super) fn what_to_send(cfg: &HttpConfig, index: u64) -> WhatToSend {
    if !cfg.api.takes_batch() {
        return one_prompt(cfg, index);
    }
    let b = cfg.shape.batch.max(1) as u64;
    let rerank = cfg.api == Api::Rerank;
    let per = b + u64::from(rerank);
    let units: Vec<WhatToSend> = (0..per)
        .map(|j| one_prompt(cfg, index.saturating_mul(per).saturating_add(j)))
        .collect();
    let exact = units.iter().all(|u| u.exact);
    let origin = units.first().and_then(|u| u.origin.clone());
    let (query, docs) = if rerank {
        let (q, d) = units.split_at(1);
        (q.first(), d)
    } else {
        (None, &units[..])
    };
    let doc_tokens: usize = docs.iter().map(|u| u.prompt_tokens).sum();
    let query_tokens = query.map_or(0, |q| q.prompt_tokens);
    WhatToSend {
        prompt: query.map(|q| q.prompt.clone()).unwrap_or_default(),
        inputs: docs.iter().map(|u| u.prompt.clone()).collect(),
        prompt_tokens: query_tokens + doc_tokens.div_ceil(docs.len().max(1)),
        exact,
        output_tokens: 0,
        origin,
        ..WhatToSend::default()
    }
}

/// Unit `index` of the traffic: from its source (a dataset row, a shared-prefix group), else
/// from the given texts or made-up lengths.
fn one_prompt(cfg: &HttpConfig, index: u64) -> WhatToSend {
    let t = &cfg.traffic;
    let mut rng = t.rng(index);
    let made_up_tokens = t.prompt.as_ref().map_or(1, |p| p.pick(index, &mut rng));
    let output_tokens = t.output.pick(index, &mut rng);
    let words = match &cfg.prompts {
        Prompts::Words(w) => Some(w.as_ref()),
        _ => None,
    };
    if let Some(planned) = t.planned(index) {
        let counted = t
            .source
            .as_deref()
            .and_then(RequestSource::dataset)
            .is_some_and(|d| d.counted);
        let exact = match &planned.prompt {
            Prompt::Made(_) => words.is_some(),
            Prompt::Text(_) | Prompt::Messages(_) => counted,
        };
        let (prompt, messages) = render(&planned.prompt, cfg.api, words, None);
        let tools = if cfg.api.takes_messages() {
            cfg.shape.tools_for(row_tools(&planned.prompt))
        } else {
            None
        };
        return WhatToSend {
            prompt,
            messages,
            tools,
            prompt_tokens: planned.prompt_tokens,
            exact,
            output_tokens: planned.output_tokens.unwrap_or(output_tokens),
            origin: Some(planned.origin),
            ..WhatToSend::default()
        };
    }
    let given = match &cfg.prompts {
        Prompts::Texts(texts) => texts.get((index as usize) % texts.len().max(1)),
        _ => None,
    };
    let (prompt, prompt_tokens, exact) = match (given, words) {
        (Some(t), _) => (t.text.clone(), t.tokens, t.exact),
        (None, Some(words)) => (
            words.prompt(made_up_tokens, salted(rng.next_u64(), cfg.prompt_salt)),
            made_up_tokens,
            true,
        ),
        (None, None) => (
            crate::traffic::words::approximate_prompt(
                made_up_tokens,
                salted(rng.next_u64(), cfg.prompt_salt),
            ),
            made_up_tokens,
            false,
        ),
    };
    WhatToSend {
        prompt,
        tools: if cfg.api.takes_messages() {
            cfg.shape.tools.clone()
        } else {
            None
        },
        prompt_tokens,
        exact,
        output_tokens,
        ..WhatToSend::default()
    }
}

/// A made-up prompt's text seed with `salt` mixed in (unchanged with no salt).
fn salted(seed: u64, salt: u64) -> u64 {
    if salt == 0 {
        seed
    } else {
        crate::traffic::request_seed(seed, salt)
    }
}

/// A dataset row's tool definitions (its `tools`, as JSON text), if it has any.
pub(crate) fn row_tools(prompt: &Prompt) -> Option<&str> {
    match prompt {
        Prompt::Messages(m) => m
            .iter()
            .find(|(r, _)| *r == Role::Tools)
            .map(|(_, t)| t.as_str()),
        _ => None,
    }
}

/// A prompt as the API takes it: text for completions (a row's tools written into it); for
/// an API of messages, messages as written (with `system` first, when given; a row's tools
/// go apart, see `row_tools`), or one user message.
pub(crate) fn render(
    prompt: &Prompt,
    api: Api,
    words: Option<&PromptWords>,
    system: Option<&str>,
) -> (String, Option<Vec<Message>>) {
    let chat = api.takes_messages();
    match (prompt, chat) {
        (Prompt::Messages(m), true) => {
            let mut messages: Vec<Message> = system
                .map(|s| Message::new("system", s))
                .into_iter()
                .collect();
            messages.extend(
                m.iter()
                    .filter(|(r, _)| *r != Role::Tools)
                    .map(|(r, t)| Message::new(r.name(), t.clone())),
            );
            (String::new(), Some(messages))
        }
        (p, true) if system.is_some() => {
            let messages = vec![
                Message::new("system", system.unwrap_or_default()),
                Message::new("user", p.text(words)),
            ];
            (String::new(), Some(messages))
        }
        (p, _) => (p.text(words), None),
    }
}
