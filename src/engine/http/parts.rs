//! What a stream's output was made of, told apart as it arrives: reasoning (thinking), the
//! answer's text, and tool calls. The request's TTFT is its first output chunk of any kind;
//! the first answer token (text or a tool call) is its TTFA; the reasoning lasts from its first
//! chunk to the first answer chunk after it. Reasoning tokens are the server's count when it
//! gives one (`reasoning_tokens` in the usage), else the reasoning chunks' tokens.

use super::api::ToolCall;
use super::sse::Chunk;
use crate::event::OutputParts;

/// The tally of one stream.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    first_reasoning_s: Option<f64>,
    last_reasoning_s: Option<f64>,
    first_answer_s: Option<f64>,
    /// The first answer chunk after reasoning began.
    answer_after_reasoning_s: Option<f64>,
    reasoning_tokens: usize,
    /// The last output chunk was (part of) a tool call.
    last_was_tool: bool,
    calls: Vec<ToolCall>,
    /// The server's count of reasoning tokens, when it sent one.
    pub usage_reasoning_tokens: Option<usize>,
}

impl Tally {
    /// An output chunk at `at_s` (since the request's start) of `tokens` tokens.
    pub fn observe(&mut self, chunk: &Chunk, at_s: f64, tokens: usize) {
        let reasoning = !chunk.reasoning.is_empty();
        let answer = !chunk.text.is_empty() || !chunk.tool_calls.is_empty();
        if reasoning {
            self.first_reasoning_s.get_or_insert(at_s);
            self.last_reasoning_s = Some(at_s);
            // A chunk of both counts one token of reasoning, the rest as answer.
            self.reasoning_tokens += if answer { 1 } else { tokens };
        }
        if answer {
            self.first_answer_s.get_or_insert(at_s);
            if self.first_reasoning_s.is_some() {
                self.answer_after_reasoning_s.get_or_insert(at_s);
            }
        }
        if reasoning || answer {
            self.last_was_tool = !chunk.tool_calls.is_empty();
        }
        for d in &chunk.tool_calls {
            // Calls are numbered by their position in the output (at most 256 are kept).
            let i = d.index.min(255);
            while self.calls.len() <= i {
                self.calls.push(ToolCall::default());
            }
            let call = &mut self.calls[i];
            if let Some(id) = &d.id {
                if call.id.is_empty() {
                    call.id = id.clone();
                }
            }
            if let Some(name) = &d.name {
                call.name.push_str(name);
            }
            call.arguments.push_str(&d.arguments);
        }
    }

    /// The tool calls streamed, in order (each with an id: the server's, or `call_N`).
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.calls
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.name.is_empty() || !c.arguments.is_empty() || !c.id.is_empty())
            .map(|(i, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id.clone()
                },
                ..c.clone()
            })
            .collect()
    }

    /// The output's parts once the stream ended (`finish_reason` as the API said it, mapped to
    /// OpenAI's names); `None` when it was answer text only.
    pub fn finish(&self, finish_reason: Option<&str>) -> Option<OutputParts> {
        let calls = self.tool_calls().len();
        let reasoned = self.first_reasoning_s.is_some() || self.usage_reasoning_tokens > Some(0);
        if !reasoned && calls == 0 {
            return None;
        }
        let (reasoning_tokens, from) = match self.usage_reasoning_tokens {
            Some(n) => (n, "usage"),
            None => (self.reasoning_tokens, "counted"),
        };
        let reasoning_s = self.first_reasoning_s.map(|first| {
            let end = self
                .answer_after_reasoning_s
                .or(self.last_reasoning_s)
                .unwrap_or(first);
            (end - first).max(0.0)
        });
        Some(OutputParts {
            ttfa_s: self.first_answer_s,
            reasoning_tokens,
            reasoning_tokens_from: from.into(),
            reasoning_s,
            tool_calls: calls,
            ended_in_tool_call: finish_reason == Some("tool_calls")
                || (calls > 0 && self.last_was_tool && finish_reason != Some("length")),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::engine::http::sse::ToolDelta;

    fn reasoning(s: &str) -> Chunk {
        Chunk {
            reasoning: s.into(),
            ..Chunk::default()
        }
    }

    fn text(s: &str) -> Chunk {
        Chunk {
            text: s.into(),
            ..Chunk::default()
        }
    }

    #[test]
    fn thinking_then_answering_is_split_at_the_first_answer() {
        let mut t = Tally::default();
        for (i, c) in [
            reasoning("a"),
            reasoning("b"),
            reasoning("c"),
            text("x"),
            text("y"),
        ]
        .iter()
        .enumerate()
        {
            t.observe(c, 0.1 + 0.01 * i as f64, 1);
        }
        let p = t.finish(Some("length")).unwrap();
        assert!((p.ttfa_s.unwrap() - 0.13).abs() < 1e-12);
        assert!((p.reasoning_s.unwrap() - 0.03).abs() < 1e-12);
        assert_eq!(
            (p.reasoning_tokens, p.reasoning_tokens_from.as_str()),
            (3, "counted")
        );
        assert!(!p.ended_in_tool_call);
        t.usage_reasoning_tokens = Some(30);
        assert_eq!(t.finish(None).unwrap().reasoning_tokens, 30);
        let mut plain = Tally::default();
        plain.observe(&text("x"), 0.1, 1);
        assert!(plain.finish(Some("stop")).is_none());
    }

    #[test]
    fn tool_calls_are_assembled_and_end_the_output() {
        let mut t = Tally::default();
        let delta = |index, id: Option<&str>, name: Option<&str>, args: &str| Chunk {
            tool_calls: vec![ToolDelta {
                index,
                id: id.map(str::to_string),
                name: name.map(str::to_string),
                arguments: args.into(),
            }],
            ..Chunk::default()
        };
        t.observe(&delta(0, Some("c1"), Some("get"), ""), 0.2, 1);
        t.observe(&delta(0, None, None, "{\"a\":"), 0.21, 1);
        t.observe(&delta(0, None, None, "1}"), 0.22, 1);
        t.observe(&delta(1, None, Some("put"), "{}"), 0.23, 1);
        let calls = t.tool_calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("c1", "{\"a\":1}")
        );
        assert_eq!(calls[1].id, "call_1");
        let p = t.finish(None).unwrap();
        assert!(p.ended_in_tool_call);
        assert_eq!((p.tool_calls, p.ttfa_s), (2, Some(0.2)));
        assert_eq!(p.reasoning_s, None);
    }
}
