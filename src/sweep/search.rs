//! `sweep --find-max rate|concurrency --slo …`: the highest load whose p99 meets every limit
//! of the SLO, found by probing. Each probe is a cell, measured like any other; its verdict
//! (every SLO metric's p99 within its limit, and the cell measured) decides the next load:
//!
//! 1. **bracketing**: from the start, double while the probes meet the SLO (up to the range's
//!    top), or halve while they break it (down to its bottom), until one meets and a larger
//!    one breaks;
//! 2. **bisection**: probe the middle of the bracket (a whole number of requests in flight for
//!    concurrency) until it is within the tolerance of its low end (for concurrency also when
//!    it is one apart, the resolution there).
//!
//! The search assumes that a load meeting the SLO means every lower one would: tail latency
//! grows with load. The precision it can state is the bracket: the max lies between the
//! highest load that met and the lowest that broke, each measured once, its p99 from that
//! probe's steady requests. This is the method of vLLM's `serve_sla` and AIPerf's search: a
//! probe costs as much as a cell, and bisection halves the bracket with each one.
//!
//! Pure: the sweep engine calls `next` and `record`; the findings replay the recorded probes
//! through the same rules (`replay`), so a record read back states the same bracket.

use serde::Serialize;

use super::LoadAxis;
use crate::event::CellParams;
use crate::record::line::SearchConfig;

/// The axis a search varies.
pub fn axis_of(config: &SearchConfig) -> LoadAxis {
    if config.axis == "rate" {
        LoadAxis::Rate
    } else {
        LoadAxis::Concurrency
    }
}

/// A probe's parameters without the load the search varies: its workload (a hold's too).
pub fn without_load(p: &CellParams, axis: LoadAxis) -> CellParams {
    let mut w = p.clone();
    w.hold = false;
    match axis {
        LoadAxis::Rate => w.rate = None,
        _ => w.concurrency = None,
    }
    w
}

/// The probe of `workload` at `load`.
pub fn with_load(workload: &CellParams, axis: LoadAxis, load: f64) -> CellParams {
    let mut p = workload.clone();
    match axis {
        LoadAxis::Rate => p.rate = Some(load),
        // A whole number of requests in flight (`Search::next` gives one).
        _ => p.concurrency = Some(load.round().max(1.0) as usize),
    }
    p
}

/// The state of one search.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    pub axis: LoadAxis,
    pub start: f64,
    pub lo: f64,
    pub hi: f64,
    pub tolerance: f64,
    /// The highest load that met the SLO, and the lowest that broke it, so far.
    pub meets: Option<f64>,
    pub breaks: Option<f64>,
    /// Every probe in order: its load and whether it met the SLO.
    pub probes: Vec<(f64, bool)>,
}

/// How a search ended (or stands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchEnd {
    /// A probe met and a larger one broke, within the tolerance of each other.
    Bracketed,
    /// Every load probed met the SLO, up to the top of the range: the max is at least that.
    AtLeastTop,
    /// Not even the bottom of the range met it.
    NothingMeets,
    /// Cut short before the bracket was narrow enough.
    Unfinished,
}

impl Search {
    pub fn new(config: &SearchConfig) -> Search {
        Search {
            axis: axis_of(config),
            start: config.start.clamp(config.lo, config.hi),
            lo: config.lo,
            hi: config.hi,
            tolerance: config.tolerance,
            meets: None,
            breaks: None,
            probes: Vec::new(),
        }
    }

    fn round(&self, load: f64) -> f64 {
        match self.axis {
            LoadAxis::Rate => load,
            _ => load.round().max(1.0),
        }
    }

    /// Whether the bracket is as narrow as asked.
    fn narrow(&self, meets: f64, breaks: f64) -> bool {
        let gap = breaks - meets;
        let whole = self.axis != LoadAxis::Rate && gap <= 1.0;
        whole || gap <= self.tolerance * meets
    }

    /// The next load to probe, or `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.probes.is_empty() {
            return Some(self.round(self.start));
        }
        let load = match (self.meets, self.breaks) {
            (Some(m), None) => {
                if m >= self.hi {
                    return None;
                }
                (m * 2.0).min(self.hi)
            }
            (None, Some(b)) => {
                if b <= self.lo {
                    return None;
                }
                (b / 2.0).max(self.lo)
            }
            (Some(m), Some(b)) => {
                if self.narrow(m, b) {
                    return None;
                }
                m + (b - m) / 2.0
            }
            (None, None) => return None,
        };
        let load = match self.axis {
            LoadAxis::Rate => load,
            // Strictly inside the bracket, a whole number.
            _ => match (self.meets, self.breaks) {
                (Some(m), Some(_)) => load.floor().max(m + 1.0),
                (None, Some(b)) => load.floor().min(b - 1.0).max(1.0),
                _ => load.ceil(),
            },
        };
        Some(load)
    }

    /// The verdict of a probe at `load`.
    pub fn record(&mut self, load: f64, meets: bool) {
        self.probes.push((load, meets));
        if meets {
            // Above a load that broke, a probe that met says the two disagree; the bracket
            // keeps the lower one broken and this as the highest that met below it.
            if self.breaks.is_none_or(|b| load < b) {
                self.meets = Some(self.meets.map_or(load, |m| m.max(load)));
            }
        } else {
            self.breaks = Some(self.breaks.map_or(load, |b| b.min(load)));
            if self.meets.is_some_and(|m| m >= load) {
                // A lower load met once; below this break it is the best known.
                self.meets = self
                    .probes
                    .iter()
                    .filter(|(l, ok)| *ok && *l < load)
                    .map(|(l, _)| *l)
                    .max_by(f64::total_cmp);
            }
        }
    }

    /// How the search stands.
    pub fn end(&self) -> SearchEnd {
        match (self.meets, self.breaks, self.next()) {
            (_, _, Some(_)) => SearchEnd::Unfinished,
            (Some(_), Some(_), None) => SearchEnd::Bracketed,
            (Some(_), None, None) => SearchEnd::AtLeastTop,
            (None, _, None) => SearchEnd::NothingMeets,
        }
    }

    /// The probes' verdicts replayed in order, as the engine saw them.
    pub fn replay(config: &SearchConfig, probes: &[(f64, bool)]) -> Search {
        let mut s = Search::new(config);
        for &(load, meets) in probes {
            s.record(load, meets);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(axis: &str, start: f64, lo: f64, hi: f64, tolerance: f64) -> SearchConfig {
        SearchConfig {
            axis: axis.into(),
            start,
            lo,
            hi,
            tolerance,
            workloads: Vec::new(),
            probe_s: None,
            hold_s: None,
        }
    }

    /// Runs a search against a server whose SLO holds up to `capacity`.
    fn run(cfg: &SearchConfig, capacity: f64) -> Search {
        let mut s = Search::new(cfg);
        let mut guard = 0;
        while let Some(load) = s.next() {
            s.record(load, load <= capacity);
            guard += 1;
            assert!(guard < 64, "{s:?}");
        }
        s
    }

    #[test]
    fn concurrency_is_found_exactly_by_doubling_then_bisection() {
        let cfg = config("concurrency", 1.0, 1.0, 1024.0, 0.0);
        for capacity in [1.0, 2.0, 3.0, 5.0, 12.0, 100.0, 1000.0] {
            let s = run(&cfg, capacity);
            assert_eq!(s.meets, Some(capacity), "{s:?}");
            assert_eq!(s.breaks, Some(capacity + 1.0), "{s:?}");
            assert_eq!(s.end(), SearchEnd::Bracketed);
            // Doublings up to the first break, then at most log2 of the bracket.
            assert!(s.probes.len() <= 2 * 11, "{s:?}");
        }
        let s = run(&cfg, 5000.0);
        assert_eq!((s.meets, s.end()), (Some(1024.0), SearchEnd::AtLeastTop));
        let s = run(&config("concurrency", 8.0, 1.0, 64.0, 0.0), 0.5);
        assert_eq!((s.meets, s.end()), (None, SearchEnd::NothingMeets));
        assert_eq!(
            s.probes.iter().map(|p| p.0).collect::<Vec<_>>(),
            [8.0, 4.0, 2.0, 1.0]
        );
        // Starting above the capacity: halving, then bisection up.
        let s = run(&config("concurrency", 64.0, 1.0, 1024.0, 0.0), 20.0);
        assert_eq!((s.meets, s.breaks), (Some(20.0), Some(21.0)));
    }

    #[test]
    fn a_rate_is_bracketed_to_the_tolerance() {
        let cfg = config("rate", 1.0, 1.0 / 16.0, 1024.0, 0.05);
        let s = run(&cfg, 7.3);
        let (m, b) = (s.meets.unwrap(), s.breaks.unwrap());
        assert!(m <= 7.3 && b > 7.3 && b - m <= 0.05 * m, "{s:?}");
        assert_eq!(s.end(), SearchEnd::Bracketed);
        // Replaying the probes gives the same bracket (what `report` does).
        let again = Search::replay(&cfg, &s.probes);
        assert_eq!((again.meets, again.breaks), (s.meets, s.breaks));
        assert_eq!(again.next(), None);
    }

    #[test]
    fn a_verdict_that_contradicts_the_bracket_keeps_the_lower_break() {
        let cfg = config("concurrency", 4.0, 1.0, 64.0, 0.0);
        let mut s = Search::new(&cfg);
        s.record(4.0, true);
        s.record(8.0, false);
        s.record(6.0, true);
        // Noise: 7 breaks, then a probe above the break meets.
        s.record(7.0, false);
        assert_eq!((s.meets, s.breaks), (Some(6.0), Some(7.0)));
        s.record(12.0, true);
        assert_eq!((s.meets, s.breaks), (Some(6.0), Some(7.0)));
        // A break below the best that met moves both down.
        s.record(5.0, false);
        assert_eq!((s.meets, s.breaks), (Some(4.0), Some(5.0)));
        assert_eq!(s.end(), SearchEnd::Bracketed);
    }
}
