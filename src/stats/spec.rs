//! Speculative decoding by the server's own count, request by request
//! (`event::ServerTimings::draft_tokens`, `draft_accepted`, `spec_steps`): the share of drafted
//! tokens each request had accepted and the accepted tokens per verify step, with their
//! percentiles over the steady requests (warmup excluded, since the last reset), numpy-exact
//! over bounded windows like every other table; and what acceptance does to the TPOT: the TPOT
//! of the requests in each band of acceptance, and the correlation of the two.
//!
//! Per-request figures, not the server's averages: a server-wide acceptance rate weighs long
//! completions most, and hides the requests whose drafts were all refused. Both are kept: the
//! token-weighted share (accepted ÷ drafted, summed) beside each request's own.

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::RequestDone;

/// Requests with a TPOT and a drafted token before a correlation is said.
pub const MIN_CORRELATED: u64 = 8;

/// The bands of acceptance the TPOT is split by: `[lo, hi)`, the last one up to 1 included.
pub const BANDS: [(f64, f64); 4] = [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)];

/// The TPOT of the requests whose acceptance fell in one band (or that drafted nothing).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// `none drafted`, `<25%`, `25-50%`, `50-75%`, `>=75%`.
    pub label: String,
    /// Its bounds as shares (`None`: the requests that drafted nothing).
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub tpot: Summary,
}

/// Speculative decoding at the end of a run (or of a record, or a sweep's cell).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecSummary {
    /// Steady requests whose server said how many tokens it drafted for them.
    pub requests: u64,
    /// Of those, the ones it drafted none for.
    pub undrafted: u64,
    /// Which server said it (`vllm`, `llama.cpp`).
    pub source: String,
    /// Drafted and accepted tokens, summed over the requests.
    pub drafted: u64,
    pub accepted: u64,
    /// Verify steps, summed, where the server says them (vLLM).
    pub steps: u64,
    /// Each request's accepted ÷ drafted (requests that drafted something).
    pub acceptance: Summary,
    /// Each request's accepted tokens per verify step (where the server says its steps): a
    /// step also makes one token of its own, so tokens per step are one more.
    pub accepted_per_step: Summary,
    /// The TPOT by band of acceptance; the band of requests that drafted nothing first.
    pub tpot_by_acceptance: Vec<Band>,
    /// Pearson's r of acceptance against TPOT over the requests that drafted and had a TPOT,
    /// once `MIN_CORRELATED` did and both varied: below zero, more accepted is faster.
    pub tpot_correlation: Option<f64>,
}

impl SpecSummary {
    /// Accepted ÷ drafted over every request: the server-wide rate, long requests weighing most.
    pub fn token_acceptance(&self) -> Option<f64> {
        (self.drafted > 0).then(|| self.accepted as f64 / self.drafted as f64)
    }

    /// Accepted tokens per verify step over every request (vLLM's mean acceptance length is
    /// one more).
    pub fn mean_accepted_per_step(&self) -> Option<f64> {
        (self.steps > 0).then(|| self.accepted as f64 / self.steps as f64)
    }

    /// JSON as the summary writes it (`speculative_decoding`).
    pub fn to_json(&self) -> serde_json::Value {
        let s = Summary::to_json;
        let bands: Vec<serde_json::Value> = self
            .tpot_by_acceptance
            .iter()
            .map(|b| serde_json::json!({"acceptance": b.label, "lo": b.lo, "hi": b.hi, "tpot_s": s(&b.tpot)}))
            .collect();
        serde_json::json!({
            "source": self.source,
            "requests": self.requests,
            "requests_undrafted": self.undrafted,
            "drafted_tokens": self.drafted,
            "accepted_tokens": self.accepted,
            "verify_steps": self.steps,
            "token_acceptance": self.token_acceptance(),
            "accepted_per_step": self.mean_accepted_per_step(),
            "acceptance_per_request": s(&self.acceptance),
            "accepted_per_step_per_request": s(&self.accepted_per_step),
            "tpot_by_acceptance": bands,
            "tpot_acceptance_correlation": self.tpot_correlation,
        })
    }
}

/// Running sums for Pearson's r.
#[derive(Clone, Copy, Debug, Default)]
struct Corr {
    n: u64,
    x: f64,
    y: f64,
    xx: f64,
    yy: f64,
    xy: f64,
}

impl Corr {
    fn push(&mut self, x: f64, y: f64) {
        self.n += 1;
        self.x += x;
        self.y += y;
        self.xx += x * x;
        self.yy += y * y;
        self.xy += x * y;
    }

    fn r(&self) -> Option<f64> {
        if self.n < MIN_CORRELATED {
            return None;
        }
        let n = self.n as f64;
        let vx = self.xx - self.x * self.x / n;
        let vy = self.yy - self.y * self.y / n;
        // Shares and seconds: a spread this small is rounding, not variation.
        if vx <= 1e-12 * n || vy <= 1e-18 * n {
            return None;
        }
        Some(((self.xy - self.x * self.y / n) / (vx * vy).sqrt()).clamp(-1.0, 1.0))
    }
}

/// The band label of a share, as tables print it.
fn band_label(lo: f64, hi: f64) -> String {
    match (lo, hi) {
        (0.0, _) => format!("<{:.0}%", hi * 100.0),
        (_, 1.0) => format!(">={:.0}%", lo * 100.0),
        _ => format!("{:.0}-{:.0}%", lo * 100.0, hi * 100.0),
    }
}

/// The fold behind `SpecSummary`; allocates nothing until a request whose server drafted
/// arrives.
#[derive(Clone, Debug, Default)]
pub struct SpecStats {
    inner: Option<Box<Inner>>,
}

#[derive(Clone, Debug)]
struct Inner {
    source: String,
    requests: u64,
    undrafted: u64,
    drafted: u64,
    accepted: u64,
    steps: u64,
    acceptance: Window,
    accepted_per_step: Window,
    /// The TPOT of the requests that drafted nothing, then one per band.
    tpot: [Window; 1 + BANDS.len()],
    corr: Corr,
}

impl SpecStats {
    /// A completed request: counted when steady and its server said what it drafted.
    pub fn record_request(&mut self, r: &RequestDone) {
        let Some(t) = r.client.as_ref().and_then(|c| c.server.as_ref()) else {
            return;
        };
        let Some(drafted) = t.draft_tokens else {
            return;
        };
        if r.warmup {
            return;
        }
        let s = self.inner.get_or_insert_with(|| {
            Box::new(Inner {
                source: t.source.clone(),
                requests: 0,
                undrafted: 0,
                drafted: 0,
                accepted: 0,
                steps: 0,
                acceptance: Window::new(REQUEST_WINDOW),
                accepted_per_step: Window::new(REQUEST_WINDOW),
                tpot: std::array::from_fn(|_| Window::new(REQUEST_WINDOW)),
                corr: Corr::default(),
            })
        });
        let accepted = t.draft_accepted.unwrap_or(0).min(drafted);
        s.requests += 1;
        s.drafted += drafted as u64;
        s.accepted += accepted as u64;
        if let Some(steps) = t.spec_steps.filter(|&n| n > 0) {
            s.steps += steps as u64;
            s.accepted_per_step.push(accepted as f64 / steps as f64);
        }
        let tpot = r.tpot_s.filter(|v| v.is_finite());
        if drafted == 0 {
            s.undrafted += 1;
            if let Some(v) = tpot {
                s.tpot[0].push(v);
            }
            return;
        }
        let share = accepted as f64 / drafted as f64;
        s.acceptance.push(share);
        if let Some(v) = tpot {
            let band = BANDS
                .iter()
                .position(|&(_, hi)| share < hi)
                .unwrap_or(BANDS.len() - 1);
            s.tpot[1 + band].push(v);
            s.corr.push(share, v);
        }
    }

    /// Whether a request whose server drafted has been counted since the last reset.
    pub fn has_samples(&self) -> bool {
        self.inner.is_some()
    }

    pub fn reset(&mut self) {
        self.inner = None;
    }

    /// `None` until a steady request whose server said its drafts has been seen.
    pub fn summary(&self) -> Option<SpecSummary> {
        let s = self.inner.as_ref()?;
        let mut bands = vec![Band {
            label: "none drafted".into(),
            lo: None,
            hi: None,
            tpot: s.tpot[0].summary(),
        }];
        for (i, &(lo, hi)) in BANDS.iter().enumerate() {
            bands.push(Band {
                label: band_label(lo, hi),
                lo: Some(lo),
                hi: Some(hi),
                tpot: s.tpot[1 + i].summary(),
            });
        }
        Some(SpecSummary {
            requests: s.requests,
            undrafted: s.undrafted,
            source: s.source.clone(),
            drafted: s.drafted,
            accepted: s.accepted,
            steps: s.steps,
            acceptance: s.acceptance.summary(),
            accepted_per_step: s.accepted_per_step.summary(),
            tpot_by_acceptance: bands,
            tpot_correlation: s.corr.r(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{ClientDetail, ServerTimings};

    fn request(warmup: bool, drafted: Option<usize>, accepted: usize, tpot: f64) -> RequestDone {
        RequestDone {
            warmup,
            output_tokens: 32,
            tpot_s: Some(tpot),
            client: Some(Box::new(ClientDetail {
                server: Some(ServerTimings {
                    source: "vllm".into(),
                    draft_tokens: drafted,
                    draft_accepted: drafted.map(|_| accepted),
                    spec_steps: drafted.map(|_| 10),
                    ..ServerTimings::default()
                }),
                ..ClientDetail::default()
            })),
            ..RequestDone::default()
        }
    }

    /// Per-request shares and their percentiles, the token-weighted share beside them, and
    /// warmup and servers that said nothing left out.
    #[test]
    fn acceptance_per_request_and_per_token() {
        let mut s = SpecStats::default();
        s.record_request(&request(true, Some(10), 0, 0.05));
        s.record_request(&request(false, None, 0, 0.05));
        assert!(s.summary().is_none());
        // 10 of 10, 1 of 10, 30 of 40: shares 1.0, 0.1, 0.75.
        s.record_request(&request(false, Some(10), 10, 0.01));
        s.record_request(&request(false, Some(10), 1, 0.04));
        s.record_request(&request(false, Some(40), 30, 0.02));
        s.record_request(&request(false, Some(0), 0, 0.05));
        let m = s.summary().unwrap();
        assert_eq!((m.requests, m.undrafted), (4, 1));
        assert_eq!((m.drafted, m.accepted, m.steps), (60, 41, 40));
        assert_eq!(m.acceptance.n, 3);
        // numpy.percentile([0.1, 0.75, 1.0], 50) = 0.75; 90 → 0.95.
        assert!((m.acceptance.p50 - 0.75).abs() < 1e-12);
        assert!((m.acceptance.p90 - 0.95).abs() < 1e-12);
        assert!((m.token_acceptance().unwrap() - 41.0 / 60.0).abs() < 1e-12);
        assert!((m.mean_accepted_per_step().unwrap() - 41.0 / 40.0).abs() < 1e-12);
        let n: Vec<usize> = m.tpot_by_acceptance.iter().map(|b| b.tpot.n).collect();
        assert_eq!(n, [1, 1, 0, 0, 2], "none, <25%, 25-50%, 50-75%, >=75%");
        let labels: Vec<&str> = m
            .tpot_by_acceptance
            .iter()
            .map(|b| b.label.as_str())
            .collect();
        assert_eq!(
            labels,
            ["none drafted", "<25%", "25-50%", "50-75%", ">=75%"]
        );
        assert!(m.tpot_correlation.is_none(), "three requests are too few");
        s.reset();
        assert!(!s.has_samples());
    }

    /// TPOT falling as acceptance rises is a correlation near −1; r is Pearson's, as numpy's
    /// corrcoef gives it.
    #[test]
    fn tpot_falls_with_acceptance() {
        let mut s = SpecStats::default();
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for i in 0..10usize {
            let tpot = 0.05 - 0.004 * i as f64 + if i % 2 == 0 { 0.001 } else { 0.0 };
            s.record_request(&request(false, Some(10), i, tpot));
            xs.push(i as f64 / 10.0);
            ys.push(tpot);
        }
        let r = s.summary().unwrap().tpot_correlation.unwrap();
        let n = xs.len() as f64;
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let cov: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let sx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>().sqrt();
        let sy: f64 = ys.iter().map(|y| (y - my).powi(2)).sum::<f64>().sqrt();
        assert!((r - cov / (sx * sy)).abs() < 1e-9, "{r}");
        assert!(r < -0.9);
    }
}
