//! What the table and the panels show: which view of the statistics (`TableView`,
//! `ServerColumns`), and the statistics themselves, computed from the fold at each refresh so
//! that render only reads them.

use crate::fold::RunFold;
use crate::stats::scale::Histogram;
use crate::stats::{
    BreakdownSummary, Metric, ModelSummary, PhaseSummary, ShapeSummary, SpecSummary, SplitSummary,
    StepPartsSummary, Table, WindowKind,
};

/// Bins of the distribution histograms the state keeps; the views merge neighbours to fit
/// their width (120 divides evenly into 60, 40, 30, 24, 20, ... bins).
pub const DIST_BINS: usize = 120;
/// The metrics the distribution views show.
pub const DIST_METRICS: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::Itl];

/// What the table shows, one at a time: the percentiles (their columns as `ServerColumns`
/// says), the client's HTTP phases (`h`), where the TTFT went by the server's own timings
/// (`f`), or the server's speculative decoding (`f` again, when it drafts); with the candle
/// engine and `--step-parts`, `f` shows where a step's time goes. Each key's view replaces
/// whatever the table showed, and the same key brings the percentiles back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TableView {
    #[default]
    Percentiles,
    Phases,
    Split,
    Drafts,
    /// The candle engine's sampled steps in parts (`--step-parts`).
    Parts,
}

impl TableView {
    /// The view after `h`.
    pub fn after_phases(self) -> TableView {
        match self {
            TableView::Phases => TableView::Percentiles,
            _ => TableView::Phases,
        }
    }

    /// The view after `f`: the split, then the drafts (`drafts`: the server has said what it
    /// drafted), then the percentiles.
    pub fn after_split(self, drafts: bool) -> TableView {
        match self {
            TableView::Split if drafts => TableView::Drafts,
            TableView::Split | TableView::Drafts => TableView::Percentiles,
            TableView::Percentiles | TableView::Phases | TableView::Parts => TableView::Split,
        }
    }

    /// The view after `f` in a run of the candle engine with `--step-parts` (which has no
    /// server to split a TTFT by): the step's parts, then the percentiles.
    pub fn after_parts(self) -> TableView {
        match self {
            TableView::Parts => TableView::Percentiles,
            _ => TableView::Parts,
        }
    }
}

/// The percentile table's columns with `--server-metrics`: the client's beside the server's
/// own (the default), a row per server (with several), or the client's alone; `s` steps
/// through them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServerColumns {
    #[default]
    VsServer,
    PerServer,
    Client,
}

impl ServerColumns {
    /// The columns after `s`; `servers`: how many servers' metrics are read.
    pub fn next(self, servers: usize) -> ServerColumns {
        match self {
            ServerColumns::VsServer if servers > 1 => ServerColumns::PerServer,
            ServerColumns::VsServer | ServerColumns::PerServer => ServerColumns::Client,
            ServerColumns::Client => ServerColumns::VsServer,
        }
    }
}

/// The statistics on screen, taken together at a refresh (at most every `FIGURES_HOLD`).
#[derive(Clone, Debug)]
pub struct Views {
    /// The percentiles over the window (steady or recent, with or without warmup).
    pub table: Table,
    /// Histograms of `DIST_METRICS` over the table's window, in that order.
    pub dists: Vec<Option<Histogram>>,
    /// Steady TTFT by turn and cache outcome, and the lengths.
    pub breakdown: BreakdownSummary,
    /// Thinking and answering apart, and the tool calls.
    pub reasoning: ShapeSummary,
    /// Every figure per model.
    pub models: Vec<ModelSummary>,
    /// The table's other views, taken only while shown: the client's HTTP phases, where the
    /// TTFT went, the server's drafts.
    pub phases: Option<PhaseSummary>,
    pub split: Option<SplitSummary>,
    pub spec: Option<SpecSummary>,
    pub parts: Option<StepPartsSummary>,
}

impl Default for Views {
    fn default() -> Self {
        Views {
            table: Table::default(),
            dists: vec![None; DIST_METRICS.len()],
            breakdown: BreakdownSummary::default(),
            reasoning: ShapeSummary::default(),
            models: Vec::new(),
            phases: None,
            split: None,
            spec: None,
            parts: None,
        }
    }
}

impl Views {
    /// Takes every statistic again from `run` (a few µs with full 100k windows: sorted
    /// blocks, BENCHMARKS.md); the table's other views only while `shown`.
    pub fn refresh(&mut self, run: &RunFold, window: WindowKind, warmup: bool, shown: TableView) {
        self.table = run.stats.table(window, warmup);
        if shown == TableView::Phases {
            self.phases = run.phases.summary();
        }
        if matches!(shown, TableView::Split | TableView::Drafts) {
            self.split = run.split.summary();
            self.spec = run.spec.summary();
        }
        if shown == TableView::Parts {
            self.parts = run.step_parts_summary();
        }
        self.dists = DIST_METRICS
            .iter()
            .map(|&m| run.stats.histogram(m, window, warmup, DIST_BINS))
            .collect();
        self.breakdown = run.breakdown.summary();
        self.reasoning = run.shapes.summary();
        self.models = run.models.summaries();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One view at a time: `h` and `f` each replace whatever the table showed and bring the
    /// percentiles back; `f` offers the drafts only when the server drafts. `s` steps the
    /// percentiles' columns, through a row per server only with several.
    #[test]
    fn the_table_shows_one_view_at_a_time() {
        use TableView::*;
        assert_eq!(Percentiles.after_phases(), Phases);
        assert_eq!(Phases.after_phases(), Percentiles);
        assert_eq!(Split.after_phases(), Phases);
        assert_eq!(Phases.after_split(false), Split);
        assert_eq!(Split.after_split(false), Percentiles);
        assert_eq!(Split.after_split(true), Drafts);
        assert_eq!(Percentiles.after_parts(), Parts);
        assert_eq!(Parts.after_parts(), Percentiles);
        assert_eq!(Phases.after_parts(), Parts);
        assert_eq!(Drafts.after_split(true), Percentiles);
        assert_eq!(Drafts.after_phases(), Phases);
        use ServerColumns::*;
        assert_eq!(VsServer.next(1), Client);
        assert_eq!(VsServer.next(3), PerServer);
        assert_eq!(PerServer.next(3), Client);
        assert_eq!(Client.next(3), VsServer);
    }
}
