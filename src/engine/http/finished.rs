//! What the request loops hand the run: each content chunk as the protocol's events
//! (`send_token`: the first token, then one decode step per token), and a launched request
//! (`Launched`) that finished as its `RequestDone`, the server's own timings joined to the
//! client's (`request_done`).

use std::time::Instant;

use super::events::Events;
use super::outcome::{Measured, Token};
use super::request::Endpoint;
use crate::event::{ClientDetail, DecodeStep, Event, Origin, RequestDone};
use crate::util::fnv1a;

/// A launched request, as the loop remembers it.
pub(super) struct Launched {
    pub index: u64,
    pub warmup: bool,
    pub endpoint: Endpoint,
    pub requested_prompt_tokens: usize,
    /// The prompt is `requested_prompt_tokens` long in the server's tokenizer.
    pub exact_prompt: bool,
    pub scheduled: Instant,
    pub origin: Option<Origin>,
    /// The model it went to, when the run sends to several.
    pub model: Option<String>,
}

/// A content chunk of request `index` as the protocol says it: its first token, then a step.
pub(super) fn send_token(events: &Events, index: u64, token: Token) {
    match token {
        Token::First { ttft_s } => {
            let _ = events.send(Event::PrefillDone { index, ttft_s });
        }
        Token::Steps {
            first_step,
            tokens,
            itl_s,
        } => {
            for step in first_step..first_step.saturating_add(tokens) {
                events.step(DecodeStep::new(index, step, itl_s, None));
            }
        }
    }
}

/// TPOT = (E2E − TTFT) / (G − 1), G from the usage chunk when the server sent one, else the
/// content chunks counted.
pub(super) fn request_done(record_tokens: bool, launched: &Launched, m: Measured) -> RequestDone {
    let (output_tokens, output_from) = match m.usage_completion_tokens {
        Some(g) if g > 0 => (g, "usage"),
        _ => (m.content_chunks, "counted"),
    };
    // A pooling batch's usage counts every input: the record keeps tokens per input.
    let per_input = |p: usize| (p + m.inputs.max(1) / 2) / m.inputs.max(1);
    let server = server_timings(&m);
    let (prompt_tokens, prompt_from) = match m.usage_prompt_tokens {
        Some(p) => (per_input(p), "usage"),
        None if launched.exact_prompt => (launched.requested_prompt_tokens, "tokenizer"),
        None => (launched.requested_prompt_tokens, "approx"),
    };
    RequestDone {
        index: launched.index,
        warmup: launched.warmup,
        batch: m.inputs.max(1),
        prompt_tokens,
        output_tokens,
        ttft_s: m.ttft_s,
        // Tokens that all came in one chunk (or only in the final count) came at no known
        // times of their own: no TPOT.
        tpot_s: (output_tokens > 1 && m.content_chunks > 1)
            .then(|| (m.e2e_s - m.ttft_s) / (output_tokens - 1) as f64),
        e2e_s: m.e2e_s,
        gpu_ttft_s: None,
        gpu_decode_s: None,
        itl_max_s: m.itls_s.iter().copied().reduce(f64::max),
        peak_alloc_bytes: None,
        output_hash: format!("{:016x}", fnv1a(m.text.as_bytes())),
        tokens: None,
        text: record_tokens.then(|| m.text.clone()),
        client: Some(Box::new(ClientDetail {
            endpoint: launched.endpoint.display().to_string(),
            send_delay_s: m.send_delay_s,
            output_tokens_from: output_from.into(),
            prompt_tokens_from: prompt_from.into(),
            requested_prompt_tokens: launched.requested_prompt_tokens,
            content_chunks: m.content_chunks,
            chunk_tokens: if m.chunk_tokens.iter().any(|&t| t > 1) {
                m.chunk_tokens
            } else {
                Vec::new()
            },
            text_ends: if record_tokens {
                m.text_ends
            } else {
                Vec::new()
            },
            finish_reason: m.finish_reason,
            // llama.cpp says its cache in `timings.cache_n` alone.
            cached_tokens: m
                .cached_tokens
                .or(server.as_ref().and_then(|s| s.cached_tokens)),
            http: m.http,
            ttst_s: m.ttst_s,
            server,
        })),
        origin: launched.origin.clone().map(Box::new),
        model: launched.model.clone(),
        parts: m.parts.map(Box::new),
    }
}

/// The server's own timings joined to the client's: the cached and computed prompt tokens
/// from the usage where the timings lack them, and the rest of the TTFT.
fn server_timings(m: &Measured) -> Option<crate::event::ServerTimings> {
    let mut t = m.server.clone()?;
    if t.cached_tokens.is_none() {
        t.cached_tokens = m.cached_tokens;
    }
    if t.computed_tokens.is_none() {
        t.computed_tokens = match (m.usage_prompt_tokens, t.cached_tokens) {
            (Some(p), Some(c)) => Some(p.saturating_sub(c)),
            _ => None,
        };
    }
    t.join_ttft(m.ttft_s);
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launched() -> Launched {
        Launched {
            index: 3,
            warmup: false,
            endpoint: Endpoint::parse("http://127.0.0.1:1").unwrap(),
            requested_prompt_tokens: 100,
            exact_prompt: false,
            scheduled: Instant::now(),
            origin: None,
            model: None,
        }
    }

    #[test]
    fn tpot_uses_the_usage_count_else_the_chunks() {
        let m = Measured {
            ttft_s: 0.05,
            itls_s: vec![0.01; 4],
            e2e_s: 0.09,
            content_chunks: 5,
            usage_completion_tokens: Some(9),
            usage_prompt_tokens: Some(97),
            ..Measured::default()
        };
        let d = request_done(false, &launched(), m.clone());
        assert_eq!((d.output_tokens, d.prompt_tokens), (9, 97));
        assert!((d.tpot_s.unwrap() - 0.04 / 8.0).abs() < 1e-12);
        let c = d.client.unwrap();
        assert_eq!(
            (c.output_tokens_from.as_str(), c.prompt_tokens_from.as_str()),
            ("usage", "usage")
        );
        let counted = request_done(
            false,
            &launched(),
            Measured {
                usage_completion_tokens: None,
                usage_prompt_tokens: None,
                ..m
            },
        );
        assert_eq!((counted.output_tokens, counted.prompt_tokens), (5, 100));
        assert!((counted.tpot_s.unwrap() - 0.01).abs() < 1e-12);
        assert_eq!(counted.client.unwrap().output_tokens_from, "counted");
    }
}
