//! Every figure split by the model (or adapter) a request went to, for runs that spread
//! requests over several (`--served-model a=3,b=1`): one model's slow tail or failures must
//! not hide in the pooled percentiles. Keyed by the request's `model`, as `endpoints` keys by
//! endpoint: steady TTFT, TPOT, ITL, E2E and TTFA (bounded windows, numpy-exact like the
//! pooled ones), output tokens, and failures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW, STEP_WINDOW};
use crate::event::{RequestDone, RequestFailed};

/// One model's figures at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub model: String,
    /// Steady-state requests that completed (warmup excluded).
    pub requests: u64,
    /// Requests that failed, warmup included.
    pub failed: u64,
    /// Output tokens of the steady requests.
    #[serde(default)]
    pub output_tokens: u64,
    pub ttft_s: Summary,
    pub tpot_s: Summary,
    #[serde(default)]
    pub itl_s: Summary,
    pub e2e_s: Summary,
    /// The first answer token (what `ttft_s` is for a model that does not reason).
    #[serde(default)]
    pub ttfa_s: Summary,
}

#[derive(Clone, Debug)]
struct Split {
    requests: u64,
    failed: u64,
    output_tokens: u64,
    ttft: Window,
    tpot: Window,
    itl: Window,
    e2e: Window,
    ttfa: Window,
}

impl Split {
    fn new() -> Split {
        Split {
            requests: 0,
            failed: 0,
            output_tokens: 0,
            ttft: Window::new(REQUEST_WINDOW),
            tpot: Window::new(REQUEST_WINDOW),
            itl: Window::new(STEP_WINDOW),
            e2e: Window::new(REQUEST_WINDOW),
            ttfa: Window::new(REQUEST_WINDOW),
        }
    }
}

/// The fold behind `ModelSummary`: fed every request that names its model.
#[derive(Clone, Debug, Default)]
pub struct ModelStats(BTreeMap<String, Split>);

impl ModelStats {
    fn entry(&mut self, model: &str) -> &mut Split {
        self.0.entry(model.to_string()).or_insert_with(Split::new)
    }

    /// A completed request with its decode steps (ITLs); those without a model and warmup
    /// are skipped.
    pub fn record_request(&mut self, r: &RequestDone, itls: &[f64]) {
        let Some(model) = &r.model else { return };
        if r.warmup {
            return;
        }
        let s = self.entry(model);
        s.requests += 1;
        s.output_tokens += (r.batch * r.output_tokens) as u64;
        s.ttft.push(r.ttft_s);
        s.e2e.push(r.e2e_s);
        if let Some(t) = r.tpot_s {
            s.tpot.push(t);
        }
        for &itl in itls {
            s.itl.push(itl);
        }
        let ttfa = match &r.parts {
            Some(p) => p.ttfa_s,
            None => Some(r.ttft_s),
        };
        if let Some(t) = ttfa {
            s.ttfa.push(t);
        }
    }

    pub fn record_failure(&mut self, f: &RequestFailed) {
        if let Some(model) = &f.model {
            self.entry(model).failed += 1;
        }
    }

    /// Statistics reset (`r`): latencies start again, failures are kept (as the run's are).
    pub fn reset(&mut self) {
        for s in self.0.values_mut() {
            let failed = s.failed;
            *s = Split::new();
            s.failed = failed;
        }
    }

    /// Whether any request named a model.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One row per model, in name order.
    pub fn summaries(&self) -> Vec<ModelSummary> {
        self.0
            .iter()
            .map(|(model, s)| ModelSummary {
                model: model.clone(),
                requests: s.requests,
                failed: s.failed,
                output_tokens: s.output_tokens,
                ttft_s: s.ttft.summary(),
                tpot_s: s.tpot.summary(),
                itl_s: s.itl.summary(),
                e2e_s: s.e2e.summary(),
                ttfa_s: s.ttfa.summary(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn done(model: Option<&str>, ttft_s: f64, warmup: bool) -> RequestDone {
        RequestDone {
            warmup,
            batch: 1,
            output_tokens: 4,
            ttft_s,
            tpot_s: Some(0.01),
            e2e_s: ttft_s + 0.03,
            model: model.map(str::to_string),
            ..RequestDone::default()
        }
    }

    #[test]
    fn each_model_has_its_own_percentiles_steps_and_failures() {
        let mut s = ModelStats::default();
        s.record_request(&done(Some("a"), 9.0, true), &[9.0]);
        for i in 0..3 {
            s.record_request(
                &done(Some("a"), 0.01 * (i + 1) as f64, false),
                &[0.01, 0.01],
            );
        }
        s.record_request(&done(Some("b"), 0.5, false), &[0.02]);
        s.record_request(&done(None, 1.0, false), &[]);
        s.record_failure(&RequestFailed {
            index: 9,
            warmup: false,
            reason: "HTTP 404".into(),
            status: Some(404),
            endpoint: None,
            elapsed_s: 0.0,
            model: Some("b".into()),
        });
        let rows = s.summaries();
        assert_eq!(rows.len(), 2);
        let (a, b) = (&rows[0], &rows[1]);
        assert_eq!(
            (a.model.as_str(), a.requests, a.failed, a.output_tokens),
            ("a", 3, 0, 12)
        );
        assert_eq!((a.itl_s.n, a.ttft_s.n, a.ttfa_s.n), (6, 3, 3));
        assert!((a.ttft_s.p50 - 0.02).abs() < 1e-12);
        assert_eq!((b.requests, b.failed, b.ttft_s.max), (1, 1, 0.5));
        s.reset();
        let rows = s.summaries();
        assert_eq!((rows[1].requests, rows[1].failed), (0, 1));
    }
}
