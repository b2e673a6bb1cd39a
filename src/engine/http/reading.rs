//! One stream read chunk by chunk: which chunks are tokens, how many each carried, and the
//! timings and counts the request's result is made of. No I/O: `request::stream` feeds it the
//! chunks as they arrive (and a unit test feeds it chunks by hand, as a server would send them).
//!
//! A chunk is a token when the server says it generated one, whatever its text: it carried
//! text, reasoning or a tool call; or its token ids; or its running count of generated tokens
//! went up (`stream_options.continuous_usage_stats` as vLLM and SGLang send it, llama.cpp's
//! `timings.predicted_n` with `timings_per_token`). A special token the server leaves out of the
//! text, or a character split over two tokens, is still a token: its chunk's text is empty, and
//! only the count says it. A role-only, empty or usage-only chunk is not.
//!
//! The TTFT ends at the first token chunk; each later chunk ends an interval. A chunk of `k`
//! tokens (speculative decoding, held-back bytes) that came `d` after the one before is `k`
//! ITLs of `d / k`: every token is one ITL sample, so the ITL percentiles weigh tokens, not
//! chunks, and the ITLs of a request add up to E2E − TTFT, as its TPOT does. The extra tokens
//! of the first chunk came with the first token, and are no ITL. Each chunk's count is kept
//! (`Measured::chunk_tokens`), so the chunking itself is still in the record. A stream that ended properly whose tokens only the final usage
//! counted (no chunk said it carried one) is complete: its first token is known at its end.

use std::time::Instant;

use super::outcome::{Measured, RequestError, Token};
use super::parts::Tally;
use super::sse::{Chunk, SseLines};

/// The most ITL samples one chunk is split into: a chunk that says it carried more (a whole
/// output in its last chunk) is that many intervals, however long it says it was.
const MAX_STEPS_PER_CHUNK: usize = 4096;

/// A stream being read.
#[derive(Debug)]
pub struct Reading {
    /// The request's start: its TTFT and E2E count from here.
    scheduled: Instant,
    /// The request asked for a running count with every chunk, so a count on a chunk is a
    /// running count, not only a final total.
    running_asked: bool,
    /// The last running count of generated tokens a chunk carried.
    running: Option<usize>,
    first: Option<Instant>,
    last: Option<Instant>,
    done: Option<Instant>,
    tally: Tally,
    out: Measured,
}

impl Reading {
    /// A stream of a request started at `scheduled`; `running_asked`: it asked for a running
    /// count of tokens with every chunk. `out` holds what is known before the first chunk (the
    /// send delay, the HTTP phases).
    pub fn new(scheduled: Instant, running_asked: bool, out: Measured) -> Reading {
        Reading {
            scheduled,
            running_asked,
            running: None,
            first: None,
            last: None,
            done: None,
            tally: Tally::default(),
            out,
        }
    }

    /// Seconds from the request's start to `t`.
    fn since(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.scheduled).as_secs_f64()
    }

    /// Token chunks so far.
    pub fn token_chunks(&self) -> usize {
        self.out.content_chunks
    }

    /// The stream said it ended (`[DONE]`, or the API's own end event) at `at`.
    pub fn done(&mut self, at: Instant) {
        self.done.get_or_insert(at);
    }

    /// Whether the stream has said it ended; what comes after is not measured.
    pub fn is_done(&self) -> bool {
        self.done.is_some()
    }

    /// Reads `chunk`, which arrived at `at`: its counts and timings, and, when it carried
    /// tokens, the token event it is (the first: TTFT; then each interval).
    pub fn chunk(&mut self, chunk: &Chunk, at: Instant) -> Option<Token> {
        let out = &mut self.out;
        if chunk.done {
            self.done.get_or_insert(at);
        }
        if chunk.reasoning_tokens.is_some() {
            self.tally.usage_reasoning_tokens = chunk.reasoning_tokens;
        }
        if chunk.prompt_tokens.is_some() {
            out.usage_prompt_tokens = chunk.prompt_tokens;
        }
        if chunk.cached_tokens.is_some() {
            out.cached_tokens = chunk.cached_tokens;
        }
        if chunk.completion_tokens.is_some() {
            out.usage_completion_tokens = chunk.completion_tokens;
        }
        if chunk.finish_reason.is_some() {
            out.finish_reason = chunk.finish_reason.clone();
        }
        if chunk.server.is_some() {
            out.server = chunk.server.clone();
        }
        let tokens = self.tokens_in(chunk);
        if tokens == 0 {
            return None;
        }
        let at_s = self.since(at);
        let out = &mut self.out;
        let token = match self.last {
            None => {
                self.first = Some(at);
                out.ttft_s = at_s;
                Token::First { ttft_s: at_s }
            }
            Some(prev) => {
                let gap_s = at.saturating_duration_since(prev).as_secs_f64();
                out.ttst_s.get_or_insert(gap_s);
                let k = u32::try_from(tokens).unwrap_or(u32::MAX);
                let itl_s = gap_s / f64::from(k);
                let first_step = out.itls_s.len() as u32 + 1;
                out.itls_s
                    .extend(std::iter::repeat_n(itl_s, tokens.min(MAX_STEPS_PER_CHUNK)));
                Token::Steps {
                    first_step,
                    tokens: k.min(MAX_STEPS_PER_CHUNK as u32),
                    itl_s,
                }
            }
        };
        self.last = Some(at);
        out.chunk_tokens
            .push(u32::try_from(tokens).unwrap_or(u32::MAX));
        out.content_chunks += 1;
        self.tally.observe(chunk, at_s, tokens);
        out.text.push_str(&chunk.reasoning);
        out.text.push_str(&chunk.text);
        for call in &chunk.tool_calls {
            out.text.push_str(call.name.as_deref().unwrap_or_default());
            out.text.push_str(&call.arguments);
        }
        out.text_ends
            .push(u32::try_from(out.text.len()).unwrap_or(u32::MAX));
        out.answer.push_str(&chunk.text);
        Some(token)
    }

    /// How many generated tokens `chunk` carried, by the best thing it says: its token ids,
    /// the rise of a running count, or (text, reasoning, a tool call) at least one. A count on
    /// a chunk of the choice is a running count when every chunk was asked to carry one (a
    /// server that sends a stream's tokens only in its last chunk, as llama.cpp's does for some
    /// streams near its capacity, has them all there), or when the chunk carries output (a
    /// server that sends its running usage unasked); otherwise a count on the chunk that
    /// finishes the choice is its total (llama.cpp puts the usage there), not a rise.
    fn tokens_in(&mut self, chunk: &Chunk) -> usize {
        let mut tokens = chunk.token_ids.unwrap_or(0);
        let output = chunk.is_output();
        let count = chunk.completion_tokens.max(chunk.predicted_tokens);
        if let Some(now) = count.filter(|_| chunk.has_choice) {
            let running = self.running_asked
                || (output && (self.running.is_some() || chunk.finish_reason.is_none()));
            if running {
                let before = self.running.unwrap_or(0);
                tokens = tokens.max(now.saturating_sub(before));
                self.running = Some(now.max(before));
            }
        }
        if output {
            tokens = tokens.max(1);
        }
        tokens
    }

    /// The stream's end at `end` (its last bytes): the request's result, or why it failed.
    pub fn finish(mut self, end: Instant, sse: &SseLines) -> Result<Measured, RequestError> {
        let finished = match (self.done, self.out.finish_reason.is_some()) {
            (Some(t), _) => t,
            // No [DONE], but the server said the choice finished: the end of the stream counts.
            (None, true) => end,
            (None, false) if self.first.is_none() => {
                return Err(RequestError::new(match &sse.first_unknown {
                    Some(line) => format!(
                        "malformed SSE: no data lines ({} others, first: {line})",
                        sse.unknown_lines
                    ),
                    None => "the stream ended without data".to_string(),
                }))
            }
            (None, false) => {
                return Err(RequestError::new(format!(
                    "stream ended before [DONE] after {} content chunks",
                    self.out.content_chunks
                )))
            }
        };
        let counted = self.out.usage_completion_tokens.unwrap_or(0);
        if self.first.is_none() {
            if counted == 0 {
                return Err(RequestError::new(
                    "the stream carried no generated token (no text, and no count of tokens)",
                ));
            }
            // Every token's text was empty and no chunk said it carried one: the server's
            // final count is all there is, and the first token is known at the end.
            self.out.ttft_s = self.since(finished);
        }
        self.out.e2e_s = self.since(finished);
        self.out.parts = self.tally.finish(self.out.finish_reason.as_deref());
        self.out.tool_calls = self.tally.tool_calls();
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;
    use crate::engine::http::api::{self, Api};

    /// Feeds `payloads` (one `data:` JSON each, `[DONE]` ends) 10 ms apart, as `api` streams
    /// them; returns the token events and the result.
    fn read(
        api: Api,
        running_asked: bool,
        payloads: &[&str],
    ) -> (Vec<Token>, Result<Measured, RequestError>) {
        let t0 = Instant::now();
        let mut r = Reading::new(t0, running_asked, Measured::default());
        let mut tokens = Vec::new();
        let mut at = t0;
        for p in payloads {
            at += Duration::from_millis(10);
            if *p == "[DONE]" {
                r.done(at);
                continue;
            }
            let chunk = api::decode(api, p).unwrap();
            tokens.extend(r.chunk(&chunk, at));
        }
        (tokens, r.finish(at, &SseLines::new()))
    }

    fn ms(s: f64) -> f64 {
        (s * 1e3).round()
    }

    /// vLLM's completions of special tokens: every chunk's text is empty, the running usage
    /// (asked for) says one token each; the usage-only chunk after them is no token.
    #[test]
    fn empty_text_counted_by_running_usage_is_tokens() {
        let (tokens, m) = read(
            Api::Completions,
            true,
            &[
                r#"{"choices":[{"index":0,"text":"","finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
                r#"{"choices":[{"index":0,"text":"","finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
                r#"{"choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3}}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}"#,
                "[DONE]",
            ],
        );
        let m = m.unwrap();
        assert_eq!(tokens.len(), 3);
        assert_eq!(ms(m.ttft_s), 10.0);
        assert_eq!(
            m.itls_s.iter().map(|&s| ms(s)).collect::<Vec<_>>(),
            [10.0, 10.0]
        );
        assert_eq!((m.content_chunks, m.usage_completion_tokens), (3, Some(3)));
        assert_eq!(ms(m.e2e_s), 50.0);
        assert!(m.text.is_empty());
    }

    /// The role-only first chunk of a chat stream is no token, even with a count of 0.
    #[test]
    fn a_role_only_chunk_is_no_token() {
        let (tokens, m) = read(
            Api::Chat,
            true,
            &[
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":3,"completion_tokens":0}}"#,
                r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
                r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
                "[DONE]",
            ],
        );
        let m = m.unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(ms(m.ttft_s), 20.0, "the first token is the second chunk");
        assert_eq!(m.text, "Hi");
    }

    /// llama.cpp with `timings_per_token`: `predicted_n` counts; a chunk that held back a
    /// split character carries two tokens; the finishing chunk (empty, same count) is none.
    #[test]
    fn llama_cpp_running_timings_count_tokens() {
        let (tokens, m) = read(
            Api::Completions,
            true,
            &[
                r#"{"choices":[{"text":"a","index":0,"finish_reason":null}],"timings":{"prompt_n":3,"prompt_ms":5.0,"predicted_n":1,"predicted_ms":0.0}}"#,
                r#"{"choices":[{"text":"é","index":0,"finish_reason":null}],"timings":{"prompt_n":3,"prompt_ms":5.0,"predicted_n":3,"predicted_ms":7.0}}"#,
                r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":3,"prompt_tokens":3},"timings":{"prompt_n":3,"prompt_ms":5.0,"predicted_n":3,"predicted_ms":7.0}}"#,
                "[DONE]",
            ],
        );
        let m = m.unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!(m.chunk_tokens, [1, 2]);
        assert_eq!(m.usage_completion_tokens, Some(3));
        assert!(m.server.is_some());
    }

    /// A chunk of three tokens 30 ms after the one before is three ITLs of 10 ms, steps 2 to 4
    /// (speculative decoding): the ITLs add up to E2E − TTFT; TTST is the first gap, whole.
    #[test]
    fn a_chunk_of_several_tokens_is_an_itl_per_token() {
        let t0 = Instant::now();
        let mut r = Reading::new(t0, true, Measured::default());
        let chunk = |n: usize| {
            api::decode(
                Api::Completions,
                &format!(
                    r#"{{"choices":[{{"text":"x","index":0,"finish_reason":null}}],"usage":{{"completion_tokens":{n},"prompt_tokens":3}}}}"#
                ),
            )
            .unwrap()
        };
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut tokens: Vec<Token> = Vec::new();
        tokens.extend(r.chunk(&chunk(1), at(10)));
        tokens.extend(r.chunk(&chunk(2), at(20)));
        tokens.extend(r.chunk(&chunk(5), at(50)));
        r.done(at(50));
        let m = r.finish(at(50), &SseLines::new()).unwrap();
        assert_eq!(m.chunk_tokens, [1, 1, 3]);
        assert_eq!(
            m.itls_s.iter().map(|&v| ms(v)).collect::<Vec<_>>(),
            [10.0; 4]
        );
        assert_eq!(ms(m.itls_s.iter().sum::<f64>()), ms(m.e2e_s - m.ttft_s));
        assert_eq!(m.ttst_s.map(ms), Some(10.0));
        match tokens.as_slice() {
            [Token::First { .. }, Token::Steps {
                first_step: 1,
                tokens: 1,
                ..
            }, Token::Steps {
                first_step: 2,
                tokens: 3,
                itl_s,
            }] => {
                assert_eq!(ms(*itl_s), 10.0)
            }
            other => panic!("{other:?}"),
        }
    }

    /// Without a running count asked for, llama.cpp's finishing chunk (a choice with empty
    /// text, and the usage's total) is no token: the total is not a rise.
    #[test]
    fn a_total_on_the_finishing_chunk_is_no_token() {
        let (tokens, m) = read(
            Api::Completions,
            false,
            &[
                r#"{"choices":[{"text":"a","index":0,"finish_reason":null}]}"#,
                r#"{"choices":[{"text":"b","index":0,"finish_reason":null}]}"#,
                r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":2,"prompt_tokens":3}}"#,
                "[DONE]",
            ],
        );
        assert_eq!(tokens.len(), 2);
        assert_eq!(m.unwrap().chunk_tokens, [1, 1]);
    }

    /// A stream whose tokens all came in its last chunk (llama.cpp's server does this to some
    /// streams near its capacity): with the running count asked for, that chunk is all of them.
    #[test]
    fn tokens_all_in_the_last_chunk_are_its_tokens() {
        let (tokens, m) = read(
            Api::Completions,
            true,
            &[
                r#"{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":32,"prompt_tokens":95},"timings":{"prompt_n":95,"prompt_ms":10.0,"predicted_n":32,"predicted_ms":30.5}}"#,
                "[DONE]",
            ],
        );
        let m = m.unwrap();
        assert_eq!(tokens, [Token::First { ttft_s: 0.01 }]);
        assert_eq!(
            (m.content_chunks, m.chunk_tokens.as_slice()),
            (1, &[32][..])
        );
        assert_eq!((ms(m.ttft_s), ms(m.e2e_s)), (10.0, 20.0));
    }

    /// Token ids say a chunk's tokens exactly, text or none.
    #[test]
    fn token_ids_are_tokens() {
        let (tokens, m) = read(
            Api::Completions,
            false,
            &[
                r#"{"choices":[{"text":"","index":0,"token_ids":[7]}]}"#,
                r#"{"choices":[{"text":"xy","index":0,"token_ids":[8,9]}]}"#,
                r#"{"choices":[{"text":"","index":0,"token_ids":[],"finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
        );
        assert_eq!(tokens.len(), 2);
        assert_eq!(m.unwrap().chunk_tokens, [1, 2]);
    }

    /// A stream whose every token had empty text and no count until the final usage is
    /// complete, not failed: its first token is known at its end.
    #[test]
    fn tokens_known_only_from_the_final_usage_complete_the_request() {
        let (tokens, m) = read(
            Api::Completions,
            false,
            &[
                r#"{"choices":[{"index":0,"text":"","finish_reason":null}]}"#,
                r#"{"choices":[{"index":0,"text":"","finish_reason":"length"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":16}}"#,
                "[DONE]",
            ],
        );
        assert!(tokens.is_empty());
        let m = m.unwrap();
        assert_eq!((ms(m.ttft_s), ms(m.e2e_s)), (40.0, 40.0));
        assert_eq!((m.content_chunks, m.usage_completion_tokens), (0, Some(16)));
    }

    /// A stream that ended with no token and no count says so; one cut before its end too.
    #[test]
    fn streams_without_tokens_or_an_end_fail() {
        let (_, m) = read(
            Api::Completions,
            false,
            &[
                r#"{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
        );
        assert!(m.unwrap_err().reason.contains("no generated token"));
        let (_, m) = read(
            Api::Completions,
            false,
            &[r#"{"choices":[{"index":0,"text":"a"}]}"#],
        );
        assert!(m.unwrap_err().reason.contains("before [DONE] after 1"));
    }

    /// Anthropic's stream: deltas are tokens, the message's usage gives the total.
    #[test]
    fn messages_events_are_read_the_same_way() {
        let (tokens, m) = read(
            Api::Messages,
            false,
            &[
                r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":0}}}"#,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":2}}"#,
                r#"{"type":"message_stop"}"#,
            ],
        );
        let m = m.unwrap();
        assert_eq!(tokens.len(), 2);
        assert_eq!((ms(m.ttft_s), ms(m.e2e_s)), (30.0, 60.0));
        assert_eq!(
            (m.usage_prompt_tokens, m.usage_completion_tokens),
            (Some(5), Some(2))
        );
    }
}
