//! The per-request views of a run: each sees every request that ended (and, when it counts
//! them, every failure), starts over at a reset (`r`), and puts its figures into the run's
//! summary. The fold keeps them in one list (`RunFold::views`), so that each is observed,
//! reset and summarized in one order and none is forgotten in one of the three.
//!
//! Adding a view: its statistics in `stats/` (with its summary type), a field of `RunSummary`,
//! an `impl RequestView` here, a field of `RunFold` and its place in both lists
//! (`views`, `views_mut`: the compiler holds them to `VIEWS`). docs/layout.md says where it
//! goes on from there (the report's markdown, `compare`, sweep cells, the dashboard).

use crate::event::{RequestDone, RequestFailed};
use crate::stats::{
    Breakdown, EndpointStats, ModelStats, PhaseStats, ShapeStats, SpecStats, SplitStats,
};
use crate::summary::RunSummary;

/// How many per-request views a run keeps.
pub const VIEWS: usize = 7;

/// A request that ended, as every per-request view sees it.
pub struct Ended<'a> {
    pub request: &'a RequestDone,
    /// Its decode steps' ITLs (empty when the engine sent none).
    pub itls: &'a [f64],
    /// Requests in flight when it ended, itself included.
    pub in_flight: u64,
}

/// One per-request view of a run.
pub trait RequestView {
    fn done(&mut self, ended: &Ended<'_>);
    /// A request that failed; most views count only what ended well.
    fn failed(&mut self, _failure: &RequestFailed) {}
    fn reset(&mut self);
    /// Its figures into the run's summary.
    fn summarize(&self, into: &mut RunSummary);
}

impl RequestView for EndpointStats {
    fn done(&mut self, e: &Ended<'_>) {
        self.record_request(e.request);
    }
    fn failed(&mut self, f: &RequestFailed) {
        self.record_failure(f);
    }
    fn reset(&mut self) {
        EndpointStats::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        into.endpoints = self.summaries();
    }
}

impl RequestView for ModelStats {
    fn done(&mut self, e: &Ended<'_>) {
        self.record_request(e.request, e.itls);
    }
    fn failed(&mut self, f: &RequestFailed) {
        self.record_failure(f);
    }
    fn reset(&mut self) {
        ModelStats::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        into.models = self.summaries();
    }
}

impl RequestView for Breakdown {
    fn done(&mut self, e: &Ended<'_>) {
        self.observe(e.request);
    }
    fn reset(&mut self) {
        Breakdown::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        // Kept when a steady request was seen.
        let s = self.summary();
        into.breakdown = (s.prompt_tokens.n > 0).then_some(s);
    }
}

impl RequestView for PhaseStats {
    fn done(&mut self, e: &Ended<'_>) {
        self.record_request(e.request);
    }
    fn reset(&mut self) {
        PhaseStats::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        into.phases = self.summary();
    }
}

impl RequestView for ShapeStats {
    fn done(&mut self, e: &Ended<'_>) {
        self.record_request(e.request);
    }
    fn reset(&mut self) {
        ShapeStats::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        // Kept when there was reasoning or a tool call.
        let s = self.summary();
        into.reasoning = s.has_parts().then_some(s);
    }
}

impl RequestView for SplitStats {
    fn done(&mut self, e: &Ended<'_>) {
        self.record_request(e.request, e.in_flight);
    }
    fn reset(&mut self) {
        SplitStats::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        into.split = self.summary();
    }
}

impl RequestView for SpecStats {
    fn done(&mut self, e: &Ended<'_>) {
        self.record_request(e.request);
    }
    fn reset(&mut self) {
        SpecStats::reset(self);
    }
    fn summarize(&self, into: &mut RunSummary) {
        into.spec = self.summary();
    }
}
