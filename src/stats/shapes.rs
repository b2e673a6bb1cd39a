//! Thinking and answering apart, and tool calls: over a server run's steady requests, the time
//! to the first answer token (TTFA: text or a tool call; TTFT counts reasoning too), how long
//! the reasoning lasted, how long the answer took after it (E2E − TTFA), the reasoning tokens
//! (the server's count where it gives one), and how many requests made tool calls or ended in
//! one. A request without reasoning thought for 0 s and 0 tokens and answered at its TTFT.
//! Exact percentiles over bounded windows, as every table; the windows are made with the
//! first request of a server engine (the candle engine has none of this).

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::RequestDone;

/// The figures at the end of a run (or of a record).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShapeSummary {
    /// Steady requests measured (a server's).
    pub requests: u64,
    /// Of them: with reasoning, that made tool calls, that ended in a tool call, that never
    /// answered (the output ended while reasoning).
    pub reasoning_requests: u64,
    pub tool_call_requests: u64,
    pub ended_in_tool_call: u64,
    pub no_answer: u64,
    /// Reasoning tokens counted by the server (`usage`) rather than from the stream.
    #[serde(default)]
    pub reasoning_tokens_from_usage: u64,
    /// The first answer token (requests that answered).
    pub ttfa_s: Summary,
    /// The first reasoning token → the first answer token (0 without reasoning).
    pub reasoning_s: Summary,
    /// The first answer token → the end (E2E − TTFA).
    pub answer_s: Summary,
    pub reasoning_tokens: Summary,
}

impl ShapeSummary {
    /// Whether the run had anything to split: reasoning or tool calls.
    pub fn has_parts(&self) -> bool {
        self.reasoning_requests > 0 || self.tool_call_requests > 0
    }
}

#[derive(Clone, Debug)]
struct Windows {
    ttfa: Window,
    reasoning: Window,
    answer: Window,
    tokens: Window,
}

/// The fold behind `ShapeSummary`.
#[derive(Clone, Debug, Default)]
pub struct ShapeStats {
    windows: Option<Box<Windows>>,
    counts: ShapeSummary,
}

impl ShapeStats {
    /// A completed request; warmup and the candle engine's are skipped.
    pub fn record_request(&mut self, r: &RequestDone) {
        if r.warmup || r.client.is_none() {
            return;
        }
        let w = self.windows.get_or_insert_with(|| {
            Box::new(Windows {
                ttfa: Window::new(REQUEST_WINDOW),
                reasoning: Window::new(REQUEST_WINDOW),
                answer: Window::new(REQUEST_WINDOW),
                tokens: Window::new(REQUEST_WINDOW),
            })
        });
        let c = &mut self.counts;
        c.requests += 1;
        let (ttfa, reasoning_s, tokens) = match &r.parts {
            Some(p) => {
                if p.reasoning_tokens > 0 || p.reasoning_s.is_some() {
                    c.reasoning_requests += 1;
                    if p.reasoning_tokens_from == "usage" {
                        c.reasoning_tokens_from_usage += 1;
                    }
                }
                if p.tool_calls > 0 {
                    c.tool_call_requests += 1;
                }
                if p.ended_in_tool_call {
                    c.ended_in_tool_call += 1;
                }
                (p.ttfa_s, p.reasoning_s.unwrap_or(0.0), p.reasoning_tokens)
            }
            None => (Some(r.ttft_s), 0.0, 0),
        };
        match ttfa.filter(|t| t.is_finite()) {
            Some(t) => {
                w.ttfa.push(t);
                w.answer.push((r.e2e_s - t).max(0.0));
            }
            None => c.no_answer += 1,
        }
        w.reasoning.push(reasoning_s);
        w.tokens.push(tokens as f64);
    }

    /// Statistics reset (`r`).
    pub fn reset(&mut self) {
        *self = ShapeStats::default();
    }

    pub fn summary(&self) -> ShapeSummary {
        let mut s = self.counts.clone();
        if let Some(w) = &self.windows {
            s.ttfa_s = w.ttfa.summary();
            s.reasoning_s = w.reasoning.summary();
            s.answer_s = w.answer.summary();
            s.reasoning_tokens = w.tokens.summary();
        }
        s
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{ClientDetail, OutputParts};

    fn done(ttft_s: f64, e2e_s: f64, parts: Option<OutputParts>) -> RequestDone {
        RequestDone {
            ttft_s,
            e2e_s,
            client: Some(Box::new(ClientDetail::default())),
            parts: parts.map(Box::new),
            ..RequestDone::default()
        }
    }

    #[test]
    fn thinking_and_answering_are_apart_and_plain_requests_answer_at_their_ttft() {
        let mut s = ShapeStats::default();
        for i in 0..4 {
            s.record_request(&done(
                0.05,
                1.0,
                Some(OutputParts {
                    ttfa_s: Some(0.05 + 0.2 + 0.1 * i as f64),
                    reasoning_tokens: 20 + i,
                    reasoning_tokens_from: "usage".into(),
                    reasoning_s: Some(0.2 + 0.1 * i as f64),
                    ..OutputParts::default()
                }),
            ));
        }
        s.record_request(&done(0.05, 0.5, None));
        s.record_request(&done(
            0.05,
            0.3,
            Some(OutputParts {
                ttfa_s: None,
                reasoning_tokens: 9,
                reasoning_tokens_from: "counted".into(),
                reasoning_s: Some(0.25),
                ..OutputParts::default()
            }),
        ));
        s.record_request(&done(
            0.02,
            0.1,
            Some(OutputParts {
                ttfa_s: Some(0.02),
                tool_calls: 1,
                ended_in_tool_call: true,
                reasoning_tokens_from: "counted".into(),
                ..OutputParts::default()
            }),
        ));
        let mut warm = done(9.0, 9.0, None);
        warm.warmup = true;
        s.record_request(&warm);
        let sum = s.summary();
        assert!(sum.has_parts());
        assert_eq!(
            (
                sum.requests,
                sum.reasoning_requests,
                sum.no_answer,
                sum.reasoning_tokens_from_usage
            ),
            (7, 5, 1, 4)
        );
        assert_eq!((sum.tool_call_requests, sum.ended_in_tool_call), (1, 1));
        // TTFA: 0.25, 0.35, 0.45, 0.55 (reasoning), 0.05 (plain), 0.02 (tool call): six.
        assert_eq!(sum.ttfa_s.n, 6);
        // numpy: np.percentile([0.25, 0.35, 0.45, 0.55, 0.05, 0.02], 50) == 0.3
        assert!((sum.ttfa_s.p50 - 0.3).abs() < 1e-12);
        assert_eq!((sum.reasoning_s.n, sum.reasoning_tokens.max), (7, 23.0));
        assert!((sum.answer_s.max - 0.75).abs() < 1e-12);
        s.reset();
        assert_eq!(s.summary(), ShapeSummary::default());
    }
}
