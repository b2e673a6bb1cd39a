//! Goodput (requests that met every SLO, per second of run time, by GuideLLM's rules: a failed
//! request is a miss and counts among the requests) and the cost of output tokens.
//!
//! Requests run one after another, so the run time of a set of requests is the sum of their E2E
//! times (`busy_time_s`): model loading and pauses are not in it.

use serde::Serialize;

use super::Slo;
use crate::event::RequestDone;

/// How many requests met the SLOs, and goodput.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Goodput {
    /// Requests considered: completed and failed.
    pub requests: usize,
    /// Of them, failed (misses).
    #[serde(default)]
    pub failed: usize,
    /// Requests that met every limit of the SLO.
    pub met: usize,
    /// `met / requests` (0 when there are none).
    pub share: f64,
    /// Run time the goodput is divided by, in seconds.
    pub duration_s: f64,
    /// `met / duration_s`: requests per second that met the SLO.
    pub goodput_rps: f64,
    /// `met × batch / duration_s`: sequences per second that met the SLO.
    pub goodput_seq_s: f64,
}

/// Sum of E2E of `requests`: the wall time spent serving them back to back.
pub fn busy_time_s<'a>(requests: impl IntoIterator<Item = &'a RequestDone>) -> f64 {
    requests.into_iter().map(|r| r.e2e_s).sum()
}

/// Goodput of `requests` and `failed` failures over `duration_s` seconds of run time (see
/// `busy_time_s`).
pub fn goodput<'a>(
    requests: impl IntoIterator<Item = &'a RequestDone>,
    failed: usize,
    slo: &Slo,
    duration_s: f64,
) -> Goodput {
    let mut n = failed;
    let mut met = 0usize;
    let mut met_seqs = 0usize;
    for r in requests {
        n += 1;
        if slo.met_by(r) {
            met += 1;
            met_seqs += r.batch;
        }
    }
    let per_s = |x: usize| {
        if duration_s > 0.0 {
            x as f64 / duration_s
        } else {
            0.0
        }
    };
    Goodput {
        requests: n,
        failed,
        met,
        share: if n > 0 { met as f64 / n as f64 } else { 0.0 },
        duration_s,
        goodput_rps: per_s(met),
        goodput_seq_s: per_s(met_seqs),
    }
}

/// Cost of a million output tokens: hardware cost per second / output tokens per second.
/// `None` when nothing was generated or no time passed.
pub fn cost_per_million_tokens(
    cost_per_hour: f64,
    output_tokens: u64,
    duration_s: f64,
) -> Option<f64> {
    if output_tokens == 0 || duration_s <= 0.0 || !cost_per_hour.is_finite() {
        return None;
    }
    let tok_s = output_tokens as f64 / duration_s;
    Some(cost_per_hour / 3600.0 / tok_s * 1e6)
}

/// Output tokens of a request: every sequence's generated tokens (B × G).
pub fn output_tokens(r: &RequestDone) -> u64 {
    (r.batch * r.output_tokens) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ttft: f64, tpot: Option<f64>, e2e: f64, batch: usize) -> RequestDone {
        RequestDone {
            index: 0,
            warmup: false,
            batch,
            prompt_tokens: 128,
            output_tokens: 10,
            ttft_s: ttft,
            tpot_s: tpot,
            e2e_s: e2e,
            ..Default::default()
        }
    }

    #[test]
    fn goodput_by_hand() {
        let slo = Slo::parse("ttft=100ms,tpot=10ms").unwrap();
        let rs = [
            req(0.050, Some(0.008), 0.5, 2), // meets both
            req(0.150, Some(0.008), 0.5, 2), // TTFT too slow
            req(0.090, Some(0.012), 0.5, 2), // TPOT too slow
            req(0.100, Some(0.010), 0.5, 2), // exactly at both limits: meets
            req(0.020, None, 0.5, 2),        // no TPOT (G = 1): only TTFT counts
        ];
        let busy = busy_time_s(&rs);
        assert!((busy - 2.5).abs() < 1e-12);
        let g = goodput(&rs, 0, &slo, busy);
        assert_eq!(g.requests, 5);
        assert_eq!(g.met, 3);
        assert!((g.share - 0.6).abs() < 1e-12);
        // A failure is a miss: 3 of 6.
        let with_failure = goodput(&rs, 1, &slo, busy);
        assert_eq!((with_failure.requests, with_failure.met), (6, 3));
        assert!((with_failure.share - 0.5).abs() < 1e-12);
        // 3 requests / 2.5 s = 1.2 req/s; 6 sequences / 2.5 s = 2.4 seq/s.
        assert!((g.goodput_rps - 1.2).abs() < 1e-12);
        assert!((g.goodput_seq_s - 2.4).abs() < 1e-12);
    }

    #[test]
    fn e2e_limit_and_empty() {
        let slo = Slo::parse("e2e=1s").unwrap();
        let rs = [req(0.1, Some(0.01), 0.9, 1), req(0.1, Some(0.01), 1.1, 1)];
        let g = goodput(&rs, 0, &slo, 4.0);
        assert_eq!(g.met, 1);
        assert!((g.goodput_rps - 0.25).abs() < 1e-12);
        let none = goodput(&[], 0, &slo, 0.0);
        assert_eq!(
            (none.requests, none.met, none.share, none.goodput_rps),
            (0, 0, 0.0, 0.0)
        );
    }

    #[test]
    fn cost_by_hand() {
        // $3.60/h = $0.001/s; 1000 tokens in 2 s = 500 tok/s → $0.000002/token = $2 per million.
        let c = cost_per_million_tokens(3.6, 1000, 2.0).unwrap();
        assert!((c - 2.0).abs() < 1e-9, "{c}");
        assert_eq!(cost_per_million_tokens(3.6, 0, 2.0), None);
        assert_eq!(cost_per_million_tokens(3.6, 10, 0.0), None);
        assert_eq!(output_tokens(&req(0.1, None, 0.2, 4)), 40);
    }
}
