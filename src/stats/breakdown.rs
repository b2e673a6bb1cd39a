//! Steady requests split by where they came from and what the cache did: TTFT by cache outcome
//! (hit: the server said it had cached prompt tokens; miss: it said none; unknown: it did not
//! say) and by conversation turn, with n each, plus the prompt and output length distributions
//! (so two runs on different mixes cannot be mistaken for each other). Exact percentiles over
//! bounded windows, as every table; folded live and from a record's request lines alike.

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::RequestDone;
use crate::util::table::TextTable;

/// Turns kept apart; later turns share the last row (`8+`).
pub const TURN_ROWS: usize = 8;

/// What the cache did for a request, as the server said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheOutcome {
    Hit,
    Miss,
    Unknown,
}

impl CacheOutcome {
    pub const ALL: [CacheOutcome; 3] =
        [CacheOutcome::Hit, CacheOutcome::Miss, CacheOutcome::Unknown];

    pub fn of(r: &RequestDone) -> CacheOutcome {
        match r.client.as_ref().and_then(|c| c.cached_tokens) {
            Some(0) => CacheOutcome::Miss,
            Some(_) => CacheOutcome::Hit,
            None => CacheOutcome::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Unknown => "unknown",
        }
    }
}

/// The folded breakdown.
#[derive(Clone, Debug, Default)]
pub struct Breakdown {
    // Made on first use: a run with no conversations never holds the by-turn windows.
    by_cache: [Option<Window>; 3],
    by_turn: [Option<Window>; TURN_ROWS],
    prompt: Option<Window>,
    output: Option<Window>,
    /// Prompt tokens and cached prompt tokens of steady requests whose server said.
    pub prompt_tokens_reported: u64,
    pub cached_tokens: u64,
    /// Whether any request came from a conversation (the by-turn rows mean something).
    pub conversations: bool,
}

/// Pushes into a window made on first use.
fn push(w: &mut Option<Window>, v: f64) {
    w.get_or_insert_with(|| Window::new(REQUEST_WINDOW)).push(v);
}

fn summary_of(w: &Option<Window>) -> Summary {
    w.as_ref().map(Window::summary).unwrap_or_default()
}

fn len_of(w: &Option<Window>) -> usize {
    w.as_ref().map_or(0, Window::len)
}

impl Breakdown {
    /// Folds a finished request in (warmup requests are left out, as in every steady figure).
    pub fn observe(&mut self, r: &RequestDone) {
        if r.warmup {
            return;
        }
        let outcome = CacheOutcome::of(r);
        push(&mut self.by_cache[outcome as usize], r.ttft_s);
        if let Some(turn) = r.origin.as_ref().and_then(|o| o.turn) {
            self.conversations = true;
            let row = (turn.max(1) as usize - 1).min(TURN_ROWS - 1);
            push(&mut self.by_turn[row], r.ttft_s);
        }
        push(&mut self.prompt, r.prompt_tokens as f64);
        push(&mut self.output, r.output_tokens as f64);
        if let Some(cached) = r.client.as_ref().and_then(|c| c.cached_tokens) {
            self.prompt_tokens_reported += r.prompt_tokens as u64;
            self.cached_tokens += cached as u64;
        }
    }

    pub fn reset(&mut self) {
        *self = Breakdown::default();
    }

    /// The figures, computed once (a summary, a report, a frame that needs them).
    pub fn summary(&self) -> BreakdownSummary {
        let by_cache = CacheOutcome::ALL
            .iter()
            .map(|&o| (o, summary_of(&self.by_cache[o as usize])))
            .filter(|(_, s)| s.n > 0)
            .collect();
        let by_turn = if self.conversations {
            self.by_turn
                .iter()
                .enumerate()
                .map(|(i, w)| (turn_label(i), summary_of(w)))
                .filter(|(_, s)| s.n > 0)
                .collect()
        } else {
            Vec::new()
        };
        let hits = len_of(&self.by_cache[CacheOutcome::Hit as usize]);
        let told = hits + len_of(&self.by_cache[CacheOutcome::Miss as usize]);
        BreakdownSummary {
            ttft_by_cache: by_cache,
            ttft_by_turn: by_turn,
            prompt_tokens: summary_of(&self.prompt),
            output_tokens: summary_of(&self.output),
            hit_share: (told > 0).then(|| hits as f64 / told as f64),
            cached_token_share: (self.prompt_tokens_reported > 0)
                .then(|| self.cached_tokens as f64 / self.prompt_tokens_reported as f64),
        }
    }
}

/// `1`, `2`, ..., `8+`.
pub fn turn_label(row: usize) -> String {
    if row + 1 >= TURN_ROWS {
        format!("{TURN_ROWS}+")
    } else {
        (row + 1).to_string()
    }
}

/// The breakdown's figures, as the summary, `report` and the dashboard show them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BreakdownSummary {
    /// Steady TTFT per cache outcome that had requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_cache: Vec<(CacheOutcome, Summary)>,
    /// Steady TTFT per turn (`1` .. `8+`), for conversations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_turn: Vec<(String, Summary)>,
    /// Prompt and output tokens of steady requests.
    pub prompt_tokens: Summary,
    pub output_tokens: Summary,
    /// Requests the server said were hits, of those it said anything about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_share: Option<f64>,
    /// Cached prompt tokens over prompt tokens, where the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_token_share: Option<f64>,
}

impl BreakdownSummary {
    /// Whether there is anything beyond the length distributions to show.
    pub fn has_splits(&self) -> bool {
        !self.ttft_by_turn.is_empty()
            || self
                .ttft_by_cache
                .iter()
                .any(|(o, _)| *o != CacheOutcome::Unknown)
    }

    /// The markdown section `report` and the summary print.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let row = |label: String, s: &Summary, scale: f64, digits: usize| {
            let f = |v: f64| format!("{:.digits$}", v * scale);
            [label, f(s.p50), f(s.p90), f(s.p99), s.n.to_string()]
        };
        let quantiles = ["p50", "p90", "p99", "n"];
        if self.prompt_tokens.n > 0 {
            let mut t = TextTable::new().left(["lengths (steady)"]).right(quantiles);
            t.row(row("prompt tokens".into(), &self.prompt_tokens, 1.0, 0));
            t.row(row("output tokens".into(), &self.output_tokens, 1.0, 0));
            out.push('\n');
            out.push_str(&t.markdown());
        }
        if self.has_splits() {
            let mut t = TextTable::new()
                .left(["TTFT (ms, steady) by"])
                .right(quantiles);
            for (o, s) in &self.ttft_by_cache {
                t.row(row(format!("cache {}", o.name()), s, 1e3, 3));
            }
            for (turn, s) in &self.ttft_by_turn {
                t.row(row(format!("turn {turn}"), s, 1e3, 3));
            }
            out.push('\n');
            out.push_str(&t.markdown());
            let mut shares = Vec::new();
            if let Some(h) = self.hit_share {
                shares.push(format!("{:.1} % of requests hit the cache", h * 100.0));
            }
            if let Some(c) = self.cached_token_share {
                shares.push(format!("{:.1} % of prompt tokens were cached", c * 100.0));
            }
            if !shares.is_empty() {
                out.push_str(&format!(
                    "\nAs the server reported per request: {}.\n",
                    shares.join("; ")
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{ClientDetail, Origin};

    fn req(ttft_s: f64, cached: Option<usize>, turn: Option<u32>) -> RequestDone {
        RequestDone {
            index: 0,
            warmup: false,
            batch: 1,
            prompt_tokens: 100,
            output_tokens: 8,
            ttft_s,
            tpot_s: None,
            e2e_s: ttft_s,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: String::new(),
            tokens: None,
            text: None,
            client: Some(Box::new(ClientDetail {
                cached_tokens: cached,
                ..ClientDetail::default()
            })),
            origin: turn.map(|t| {
                Box::new(Origin {
                    turn: Some(t),
                    ..Origin::default()
                })
            }),
            model: None,
            parts: None,
        }
    }

    #[test]
    fn ttft_splits_by_cache_outcome_and_turn_with_n() {
        let mut b = Breakdown::default();
        for r in [
            req(0.10, Some(0), Some(1)),
            req(0.12, Some(0), Some(1)),
            req(0.02, Some(90), Some(2)),
            req(0.03, Some(80), Some(12)),
            req(0.05, None, None),
        ] {
            b.observe(&r);
        }
        let s = b.summary();
        let get = |o| s.ttft_by_cache.iter().find(|(x, _)| *x == o).unwrap().1;
        assert_eq!(
            (get(CacheOutcome::Miss).n, get(CacheOutcome::Hit).n),
            (2, 2)
        );
        assert!((get(CacheOutcome::Miss).p50 - 0.11).abs() < 1e-12);
        let turns: Vec<(&str, usize)> = s
            .ttft_by_turn
            .iter()
            .map(|(t, x)| (t.as_str(), x.n))
            .collect();
        assert_eq!(turns, [("1", 2), ("2", 1), ("8+", 1)]);
        assert_eq!(s.hit_share, Some(0.5));
        assert!((s.cached_token_share.unwrap() - 170.0 / 400.0).abs() < 1e-12);
        assert!(
            s.markdown().contains("| cache hit | 25.000 |"),
            "{}",
            s.markdown()
        );
    }
}
