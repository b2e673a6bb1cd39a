//! The per-endpoint breakdown of a server run: with several `--endpoint` replicas, the pooled
//! percentiles can hide one slow or failing replica, so each endpoint keeps its own steady-state
//! TTFT, TPOT and E2E (bounded windows, numpy-exact like the pooled ones) and its failures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::{RequestDone, RequestFailed};

/// One endpoint's figures at the end of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointSummary {
    pub endpoint: String,
    /// Steady-state requests that completed (warmup excluded).
    pub requests: u64,
    /// Requests that failed, warmup included (as the run's `failed_requests`).
    pub failed: u64,
    pub ttft_s: Summary,
    pub tpot_s: Summary,
    pub e2e_s: Summary,
}

/// The fold behind `EndpointSummary`: fed every request a server engine finished.
#[derive(Clone, Debug, Default)]
pub struct EndpointStats(BTreeMap<String, Endpoint>);

#[derive(Clone, Debug)]
struct Endpoint {
    requests: u64,
    failed: u64,
    ttft: Window,
    tpot: Window,
    e2e: Window,
}

impl Endpoint {
    fn new() -> Endpoint {
        Endpoint {
            requests: 0,
            failed: 0,
            ttft: Window::new(REQUEST_WINDOW),
            tpot: Window::new(REQUEST_WINDOW),
            e2e: Window::new(REQUEST_WINDOW),
        }
    }
}

impl EndpointStats {
    fn entry(&mut self, endpoint: &str) -> &mut Endpoint {
        self.0
            .entry(endpoint.to_string())
            .or_insert_with(Endpoint::new)
    }

    /// A completed request; those of the candle engine (no endpoint) and warmup are skipped.
    pub fn record_request(&mut self, r: &RequestDone) {
        let Some(client) = &r.client else {
            return;
        };
        if r.warmup {
            return;
        }
        let e = self.entry(&client.endpoint);
        e.requests += 1;
        e.ttft.push(r.ttft_s);
        e.e2e.push(r.e2e_s);
        if let Some(tpot) = r.tpot_s {
            e.tpot.push(tpot);
        }
    }

    pub fn record_failure(&mut self, f: &RequestFailed) {
        if let Some(endpoint) = &f.endpoint {
            self.entry(endpoint).failed += 1;
        }
    }

    /// Statistics reset (`r`): latencies start again, failures are kept (as the run's are).
    pub fn reset(&mut self) {
        for e in self.0.values_mut() {
            let failed = e.failed;
            *e = Endpoint::new();
            e.failed = failed;
        }
    }

    /// One row per endpoint, in URL order.
    pub fn summaries(&self) -> Vec<EndpointSummary> {
        self.0
            .iter()
            .map(|(endpoint, e)| EndpointSummary {
                endpoint: endpoint.clone(),
                requests: e.requests,
                failed: e.failed,
                ttft_s: e.ttft.summary(),
                tpot_s: e.tpot.summary(),
                e2e_s: e.e2e.summary(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::ClientDetail;

    fn done(index: u64, endpoint: &str, ttft_s: f64, warmup: bool) -> RequestDone {
        RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 16,
            output_tokens: 5,
            ttft_s,
            tpot_s: Some(ttft_s / 10.0),
            e2e_s: ttft_s * 2.0,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: String::new(),
            tokens: None,
            text: None,
            client: Some(Box::new(ClientDetail {
                endpoint: endpoint.to_string(),
                ..Default::default()
            })),
            origin: None,
            model: None,
            parts: None,
        }
    }

    #[test]
    fn each_endpoint_has_its_own_percentiles_and_failures() {
        let mut s = EndpointStats::default();
        s.record_request(&done(0, "http://b", 9.0, true));
        for i in 0..10 {
            s.record_request(&done(1 + i, "http://a", 0.010 * (i + 1) as f64, false));
            s.record_request(&done(11 + i, "http://b", 0.100, false));
        }
        s.record_failure(&RequestFailed {
            index: 30,
            warmup: false,
            reason: "HTTP 503".into(),
            status: Some(503),
            endpoint: Some("http://b".into()),
            elapsed_s: 0.1,
            model: None,
        });
        let rows = s.summaries();
        assert_eq!(rows.len(), 2);
        let (a, b) = (&rows[0], &rows[1]);
        assert_eq!(
            (a.endpoint.as_str(), a.requests, a.failed),
            ("http://a", 10, 0)
        );
        assert_eq!(
            (b.endpoint.as_str(), b.requests, b.failed),
            ("http://b", 10, 1)
        );
        // numpy: np.percentile(np.arange(1, 11) * 0.010, 50) == 0.055; warmup left out of b.
        assert!((a.ttft_s.p50 - 0.055).abs() < 1e-12);
        assert_eq!((b.ttft_s.max, b.ttft_s.n, b.tpot_s.n), (0.100, 10, 10));
        s.reset();
        let rows = s.summaries();
        assert_eq!(
            (rows[1].requests, rows[1].failed, rows[1].ttft_s.n),
            (0, 1, 0)
        );
    }
}
