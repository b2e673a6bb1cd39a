//! Statistics, computed once in state and only read by views: percentiles exactly as numpy
//! computes them over bounded windows (`window`, sorted by `radix`, answered from bucket
//! counts when pushed faster than read: `coarse`), the run's table (`run`), per endpoint
//! (`endpoints`) and per model (`models`), thinking and answering apart (`shapes`), HTTP
//! phases (`phases`), the TTFT split by the server's own timings (`split`), speculative
//! decoding by the server's count (`spec`), the split by cache
//! and turn (`breakdown`), the server's own histograms summed over windows (`server`),
//! settling (`steady`), SLOs and goodput (`slo`, `goodput`), the interval a load was held
//! (`held`), the roofline (`roofline`), chart scales (`scale`), the per-request slices of the
//! charts (`slices`), and the client's figures as Prometheus text (`exposition`).

pub mod breakdown;
pub mod canary;
mod coarse;
mod endpoints;
pub mod exposition;
pub mod goodput;
pub mod held;
mod models;
mod percentile;
pub mod phases;
mod radix;
pub mod repeat;
pub mod roofline;
mod run;
pub mod scale;
mod server;
pub mod shapes;
pub mod slices;
mod slo;
pub mod spec;
pub mod split;
pub mod steady;
pub mod step_parts;
mod window;

pub use breakdown::{Breakdown, BreakdownSummary, CacheOutcome};
pub use canary::{CanaryStats, CanarySummary};
pub use endpoints::{EndpointStats, EndpointSummary};
pub use models::{ModelStats, ModelSummary};
pub use percentile::{median, median_in_place, percentile_sorted};
pub use phases::{Phase, PhaseStats, PhaseSummary};
pub use run::{
    Metric, RunStats, Table, WindowKind, RECENT_REQUESTS, RECENT_STEPS, REQUEST_WINDOW, STEP_WINDOW,
};
pub use server::{
    quantiles as histogram_quantiles, total_window, trim as trim_buckets, HistogramSum, NodeSteady,
    ServerSpan, ServerSpanSummary, ServerSteady,
};
pub use shapes::{ShapeStats, ShapeSummary};
pub use slo::{ntpot, parse_duration_s, Limit, Slo, SloCounts, SloMetric};
pub use spec::{SpecStats, SpecSummary};
pub use split::{Part, SplitStats, SplitSummary};
pub use steady::{settle_point, warmup_cost_s, SettleRule};
pub use step_parts::{StepPartsStats, StepPartsSummary};
pub use window::Window;

use serde::{Deserialize, Serialize};

/// mean, p50, p90, p95, p99, max — always with n.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    /// JSON as the summary's sections write it: every figure with n, or `{"n": 0}` when there
    /// were no samples.
    pub fn to_json(&self) -> serde_json::Value {
        if self.n == 0 {
            return serde_json::json!({"n": 0});
        }
        serde_json::json!({"mean": self.mean, "p50": self.p50, "p90": self.p90, "p95": self.p95,
            "p99": self.p99, "max": self.max, "n": self.n})
    }

    /// The summary of arbitrary samples; for records, reports and tests, not per frame.
    pub fn of(samples: &[f64]) -> Summary {
        let mut w = Window::new(samples.len().max(1));
        for &s in samples {
            w.push(s);
        }
        w.summary()
    }

    /// The percentile `q` of those it keeps (50, 90, 95 or 99, as an SLO limit may be at); any
    /// other `q` is the p99.
    pub fn percentile(&self, q: u8) -> f64 {
        match q {
            50 => self.p50,
            90 => self.p90,
            95 => self.p95,
            _ => self.p99,
        }
    }
}
