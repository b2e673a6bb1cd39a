//! A server cell's throughput over the interval in which its load was actually held.
//!
//! Tokens over the whole wall time of a cell (what peers report) are biased low: the first
//! requests ramp the load up and the last wave drains with fewer in flight, so the figure moves
//! with the number of requests (282 instead of 561 tok/s at concurrency 16 with 32 requests).
//! Here the cell's requests, each known by its start, first token and end on the consumer's
//! clock (`t_s − e2e_s` is its start, see docs/record-format.md), give the interval in which
//! the load was held, and the throughput counts what was generated inside it:
//!
//! - **closed loop** (`--concurrency c`): from the moment the c-th request is in flight to the
//!   end of the first request of the draining tail. Every launch after the first c replaces a
//!   request that ended, so of N requests the first N − c ends (in time) were replaced and the
//!   last c were not: the drain begins at the (N − c + 1)-th end. In between, c are in flight.
//! - **open loop** (`--rate`): from the first end (requests that arrived since have a full
//!   population before them) to the last arrival (after it, none replace those that end).
//!
//! Inside the interval each request counts in proportion to its overlap with it: its tokens
//! (and, for goodput, the request) spread evenly over its E2E. Why evenly, and not at the
//! moments its tokens arrived: a closed loop's slot runs requests back to back, so spread over
//! their E2E its output is G / E2E at every instant whatever the phase of the slot, and the
//! interval's edges may fall anywhere (the first wave starts together, a later one staggered,
//! and no wave need fit the interval); by the renewal-reward theorem the time average of that
//! rate is E[G] / E[E2E] per slot, c × E[G] / E[E2E] in all, for requests of any mix of
//! lengths. In an open loop the requests in flight at an instant are as many, and as long, as
//! at any other once the first has ended (Campbell's theorem: λ × E[G] per unit of time). A
//! token counted at its arrival would make the figure depend on where in a request's phases
//! (a prefill with no token, then a token per step) the edges fall. So the figure no longer
//! depends on how many requests the cell ran. The interval never starts before the first
//! steady request; warmup requests in flight inside it are load too and count.

/// One request of a cell as the estimator sees it (seconds on the consumer's clock).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub start_s: f64,
    pub end_s: f64,
    /// Generated tokens, every sequence (0 for a failed request).
    pub tokens: u64,
    /// Sequences of the request that met every limit of the SLO (0 for a failed request).
    pub met_seqs: u64,
    pub warmup: bool,
    /// Its TTFT (`None` for a failed request), for the trend of a probe (`sweep::sustain`).
    pub ttft_s: Option<f64>,
}

impl Span {
    /// A finished request that ended at `end_s`.
    pub fn done(r: &crate::event::RequestDone, end_s: f64, met: bool) -> Span {
        let seqs = r.batch as u64;
        Span {
            start_s: end_s - r.e2e_s.max(0.0),
            end_s,
            tokens: crate::stats::goodput::output_tokens(r),
            met_seqs: if met { seqs } else { 0 },
            warmup: r.warmup,
            ttft_s: Some(r.ttft_s),
        }
    }

    /// A failed request that ended at `end_s`: it held a slot, and produced nothing counted.
    pub fn failed(f: &crate::event::RequestFailed, end_s: f64) -> Span {
        Span {
            start_s: end_s - f.elapsed_s.max(0.0),
            end_s,
            tokens: 0,
            met_seqs: 0,
            warmup: f.warmup,
            ttft_s: None,
        }
    }
}

/// How the cell's load was offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// A closed loop of this many requests in flight.
    Closed(usize),
    /// An open loop (arrivals on a schedule).
    Open,
}

/// The interval in which a cell's load was held, and what it produced there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    pub from_s: f64,
    pub to_s: f64,
    /// Generated tokens inside the interval (fractions of the requests at its edges).
    pub tokens: f64,
    /// Sequences that met the SLO, inside the interval.
    pub met_seqs: f64,
    /// Requests that completed (failed ones held a slot but are not counted), inside the
    /// interval.
    pub requests: f64,
}

impl Held {
    pub fn seconds(&self) -> f64 {
        self.to_s - self.from_s
    }

    pub fn output_tok_s(&self) -> f64 {
        self.tokens / self.seconds()
    }

    pub fn goodput_seq_s(&self) -> f64 {
        self.met_seqs / self.seconds()
    }

    pub fn requests_s(&self) -> f64 {
        self.requests / self.seconds()
    }
}

/// The share of `[x0, x1]` inside `[a, b]` (a point counts whole when inside).
fn share(x0: f64, x1: f64, a: f64, b: f64) -> f64 {
    if x1 <= x0 {
        return if x0 >= a && x0 <= b { 1.0 } else { 0.0 };
    }
    ((x1.min(b) - x0.max(a)).max(0.0)) / (x1 - x0)
}

/// The held interval of `spans` under `load`, or `None` when the load was never held (fewer
/// requests than the concurrency, or an interval of no length).
pub fn held(spans: &[Span], load: Load) -> Option<Held> {
    let first_steady = spans
        .iter()
        .filter(|s| !s.warmup)
        .map(|s| s.start_s)
        .min_by(f64::total_cmp)?;
    let mut starts: Vec<f64> = spans.iter().map(|s| s.start_s).collect();
    let mut ends: Vec<f64> = spans.iter().map(|s| s.end_s).collect();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let (from_s, to_s) = match load {
        Load::Closed(c) => {
            let c = c.max(1);
            if spans.len() < c {
                return None;
            }
            (starts[c - 1], ends[spans.len() - c])
        }
        Load::Open => (*ends.first()?, *starts.last()?),
    };
    let from_s = from_s.max(first_steady);
    // (NaN compares false: no interval either.)
    if to_s.partial_cmp(&from_s) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let mut tokens = 0.0;
    let mut met_seqs = 0.0;
    let mut requests = 0.0;
    for s in spans {
        let inside = share(s.start_s, s.end_s, from_s, to_s);
        tokens += s.tokens as f64 * inside;
        met_seqs += s.met_seqs as f64 * inside;
        // A span with a TTFT completed (a failed one has none).
        if s.ttft_s.is_some() {
            requests += inside;
        }
    }
    Some(Held {
        from_s,
        to_s,
        tokens,
        met_seqs,
        requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request of `g` tokens starting at `start`, E2E `e2e`.
    fn span(start: f64, e2e: f64, g: u64, warmup: bool) -> Span {
        Span {
            start_s: start,
            end_s: start + e2e,
            tokens: g,
            met_seqs: 1,
            warmup,
            ttft_s: None,
        }
    }

    /// A closed loop of `c` slots running `n` requests back to back (slot k starts its
    /// requests at `offset × k`, then one after another), every request alike.
    fn closed(c: usize, n: usize, offset: f64, warmup: usize) -> Vec<Span> {
        let (e2e, g) = (0.45, 16);
        let mut next = vec![0.0; c];
        for (k, t) in next.iter_mut().enumerate() {
            *t = offset * k as f64;
        }
        let mut spans = Vec::new();
        for i in 0..n {
            // The slot free first takes the next request.
            let k = (0..c)
                .min_by(|&a, &b| next[a].total_cmp(&next[b]))
                .unwrap_or(0);
            spans.push(span(next[k], e2e, g, i < warmup));
            next[k] += e2e;
        }
        spans
    }

    #[test]
    fn a_closed_loop_reads_c_times_g_over_e2e_however_many_requests_it_ran() {
        let truth = |c: usize| c as f64 * 16.0 / 0.45;
        for c in [1usize, 2, 4, 16, 64] {
            // n steady requests after the warmup.
            for n in [2 * c, 2 * c + 2, 3 * c + 1, 10 * c] {
                // In phase (the loop launches its first c together), or staggered within one
                // request.
                for (offset, warmup) in [(0.0, 0), (0.0, 2), (0.2 / c as f64, 1)] {
                    let spans = closed(c, n + warmup, offset, warmup);
                    let h = held(&spans, Load::Closed(c)).unwrap();
                    let got = h.output_tok_s();
                    assert!(
                        (got / truth(c) - 1.0).abs() < 1e-9,
                        "c {c}, n {n}, offset {offset}: {got} vs {}",
                        truth(c)
                    );
                    assert!(h.seconds() > 0.0);
                    assert!((h.goodput_seq_s() / (c as f64 / 0.45) - 1.0).abs() < 1e-9);
                }
            }
        }
        // Fewer requests than slots: the load was never held.
        assert_eq!(held(&closed(8, 4, 0.0, 0), Load::Closed(8)), None);
    }

    #[test]
    fn requests_of_mixed_lengths_read_c_times_the_mean_g_over_the_mean_e2e() {
        // A closed loop whose requests draw their lengths (8, 16 or 32 tokens, E2E 0.1 s +
        // 20 ms a token) from a seeded generator; each goes to the slot that frees first.
        let mut rng = crate::util::SplitMix64::new(7);
        let truth_per_slot = (8.0 + 16.0 + 32.0) / (0.3 + 0.02 * 56.0);
        for c in [1usize, 4, 16] {
            let mut next: Vec<f64> = (0..c).map(|k| 0.005 * k as f64).collect();
            let mut spans = Vec::new();
            for _ in 0..200 * c {
                let k = (0..c)
                    .min_by(|&a, &b| next[a].total_cmp(&next[b]))
                    .unwrap_or(0);
                let g = [8u64, 16, 32][(rng.next_u64() % 3) as usize];
                let e2e = 0.1 + 0.02 * g as f64;
                spans.push(span(next[k], e2e, g, false));
                next[k] += e2e;
            }
            let truth = c as f64 * truth_per_slot;
            let h = held(&spans, Load::Closed(c)).unwrap();
            assert!(
                (h.output_tok_s() / truth - 1.0).abs() < 0.02,
                "c {c}: {} vs {truth}",
                h.output_tok_s()
            );
        }
    }

    #[test]
    fn tokens_over_the_wall_time_are_what_the_drain_biases() {
        // 2 warmup + 32 steady at concurrency 16: the third wave is 2 requests long. Every
        // steady token over first steady start → last end (what peers print) reads 2/3 of the
        // truth; the held interval is the two full waves.
        let spans = closed(16, 34, 0.0, 2);
        let steady: Vec<&Span> = spans.iter().filter(|s| !s.warmup).collect();
        let wall = steady.iter().map(|s| s.end_s).fold(0.0, f64::max)
            - steady.iter().map(|s| s.start_s).fold(f64::MAX, f64::min);
        let biased = steady.iter().map(|s| s.tokens).sum::<u64>() as f64 / wall;
        let truth = 16.0 * 16.0 / 0.45;
        assert!((biased / truth - 2.0 / 3.0).abs() < 0.01, "{biased}");
        let h = held(&spans, Load::Closed(16)).unwrap();
        assert!((h.output_tok_s() / truth - 1.0).abs() < 1e-9, "{h:?}");
        assert!((h.seconds() - 0.9).abs() < 1e-9);
    }

    #[test]
    fn an_open_loop_counts_from_the_first_end_to_the_last_arrival() {
        // Arrivals every gap; in flight on average c = E2E / gap.
        for c in [1usize, 4, 16] {
            let gap = 0.45 / c as f64;
            let n = 2 * c + 1;
            let spans: Vec<Span> = (0..n)
                .map(|i| span(i as f64 * gap, 0.45, 16, i == 0))
                .collect();
            let h = held(&spans, Load::Open).unwrap();
            let truth = 16.0 / gap;
            assert!(
                (h.output_tok_s() / truth - 1.0).abs() < 0.02,
                "c {c}: {} vs {truth}",
                h.output_tok_s()
            );
            assert!((h.from_s - 0.45).abs() < 1e-9 && (h.to_s - 2.0 * c as f64 * gap).abs() < 1e-9);
        }
        // One request: no interval.
        assert_eq!(held(&[span(0.0, 0.2, 4, false)], Load::Open), None);
    }

    #[test]
    fn failed_requests_hold_a_slot_and_produce_nothing() {
        let mut spans = closed(2, 6, 0.0, 0);
        spans[2].tokens = 0;
        spans[2].met_seqs = 0;
        let h = held(&spans, Load::Closed(2)).unwrap();
        let all = held(&closed(2, 6, 0.0, 0), Load::Closed(2)).unwrap();
        assert!(
            (h.tokens - (all.tokens - 16.0)).abs() < 1e-9,
            "{h:?} {all:?}"
        );
        assert!(share(1.0, 1.0, 0.0, 2.0) == 1.0 && share(3.0, 3.0, 0.0, 2.0) == 0.0);
    }
}
