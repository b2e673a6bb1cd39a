//! The canary lane's figures (`--probe`): its requests' TTFT, TPOT and E2E with their
//! percentiles since the last reset, numpy-exact over bounded windows like every other table,
//! how many were sent and failed, and the last one, for the dashboard.

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::CanaryDone;

/// The canary lane at the end of a run (or of a record).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CanarySummary {
    /// Canaries that ended since the last reset: completed and failed.
    pub completed: u64,
    pub failed: u64,
    pub ttft: Summary,
    pub tpot: Summary,
    pub e2e: Summary,
    /// The last failure's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl CanarySummary {
    /// JSON as the summary writes it (`canary`).
    pub fn to_json(&self) -> serde_json::Value {
        let s = Summary::to_json;
        serde_json::json!({
            "completed": self.completed,
            "failed": self.failed,
            "ttft_s": s(&self.ttft),
            "tpot_s": s(&self.tpot),
            "e2e_s": s(&self.e2e),
            "last_error": self.last_error,
        })
    }
}

/// The fold behind `CanarySummary`; allocates nothing until a canary ends.
#[derive(Clone, Debug, Default)]
pub struct CanaryStats {
    windows: Option<Box<[Window; 3]>>,
    completed: u64,
    failed: u64,
    last_error: Option<String>,
    /// The last canary that completed: its TTFT and E2E.
    pub last: Option<(f64, f64)>,
}

impl CanaryStats {
    pub fn record(&mut self, c: &CanaryDone) {
        let w = self
            .windows
            .get_or_insert_with(|| Box::new(std::array::from_fn(|_| Window::new(REQUEST_WINDOW))));
        match (&c.error, c.ttft_s) {
            (None, Some(ttft)) => {
                self.completed += 1;
                w[0].push(ttft);
                if let Some(t) = c.tpot_s.filter(|t| t.is_finite()) {
                    w[1].push(t);
                }
                w[2].push(c.e2e_s);
                self.last = Some((ttft, c.e2e_s));
            }
            (error, _) => {
                self.failed += 1;
                self.last_error = error.clone();
            }
        }
    }

    /// Whether a canary has ended since the last reset.
    pub fn has_samples(&self) -> bool {
        self.windows.is_some()
    }

    pub fn reset(&mut self) {
        *self = CanaryStats::default();
    }

    /// `None` until a canary has ended.
    pub fn summary(&self) -> Option<CanarySummary> {
        let w = self.windows.as_ref()?;
        Some(CanarySummary {
            completed: self.completed,
            failed: self.failed,
            ttft: w[0].summary(),
            tpot: w[1].summary(),
            e2e: w[2].summary(),
            last_error: self.last_error.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn completed_and_failed_apart() {
        let mut s = CanaryStats::default();
        assert!(s.summary().is_none());
        for (i, ttft) in [0.010, 0.020, 0.030, 0.040].into_iter().enumerate() {
            s.record(&CanaryDone {
                index: i as u64,
                ttft_s: Some(ttft),
                tpot_s: Some(0.005),
                e2e_s: ttft + 0.035,
                output_tokens: 8,
                ..CanaryDone::default()
            });
        }
        s.record(&CanaryDone {
            index: 4,
            e2e_s: 1.0,
            error: Some("HTTP 503".into()),
            ..CanaryDone::default()
        });
        let m = s.summary().unwrap();
        assert_eq!((m.completed, m.failed), (4, 1));
        assert_eq!(m.ttft.n, 4);
        // numpy.percentile([10, 20, 30, 40], 50) = 25; 90 → 37.
        assert!((m.ttft.p50 - 0.025).abs() < 1e-12);
        assert!((m.ttft.p90 - 0.037).abs() < 1e-12);
        assert_eq!(m.last_error.as_deref(), Some("HTTP 503"));
        assert_eq!(s.last, Some((0.040, 0.040 + 0.035)));
        s.reset();
        assert!(!s.has_samples());
    }
}
