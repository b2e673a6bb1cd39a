//! The fold of a `--determinism` run's one event stream (see the module above): which pass is
//! running (`CellStarted` … its `Finished`), a `RunFold` per pass and one over both (the
//! footer's summary, as `report` recomputes it from the lines), and the outputs. A first-pass
//! output waits (kept to the run's longest output) for the same prompt's second-pass output;
//! the two are compared as soon as it comes and both are dropped, so the fold holds at most
//! one pass's outputs. `apply` is pure: no I/O, no clock.

use rustc_hash::FxHashMap;

use super::compare::{divergence, Output};
use super::{pass_name, DeterminismSummary, Divergence, Kind, PassLatency};
use crate::event::{Event, StopReason};
use crate::fold::RunFold;
use crate::stats::{Metric, Slo};

/// The passes, in order: alone, then loaded.
const PASSES: usize = 2;

/// A `--determinism` run, folded.
#[derive(Debug)]
pub struct DeterminismFold {
    prompts: u64,
    concurrency: usize,
    max_output_tokens: usize,
    seed: Option<u64>,
    prefix_cache_ruled_out: bool,
    /// The pass running (0: alone, 1: loaded), between its `CellStarted` and its `Finished`.
    open: Option<usize>,
    /// Each pass's own fold.
    pub passes: [RunFold; PASSES],
    /// Both passes as one run: the record's footer.
    pub whole: RunFold,
    /// First-pass outputs waiting for their second.
    alone: FxHashMap<u64, Output>,
    compared: u64,
    identical: u64,
    divergences: Vec<Divergence>,
    /// The run's own end (the sequencer's `Finished`, after both passes').
    pub stop: Option<StopReason>,
    /// A pass ended with an error: its words (the run should stop there).
    pub pass_failed: Option<String>,
}

impl DeterminismFold {
    /// The fold of `prompts` prompts sent alone and then `concurrency` at once, outputs kept
    /// to `max_output_tokens`; `seed`: the one the requests carry, if any;
    /// `prefix_cache_ruled_out`: the server's prefix cache cannot serve one pass the other's
    /// prompts.
    pub fn new(
        prompts: u64,
        concurrency: usize,
        max_output_tokens: usize,
        seed: Option<u64>,
        prefix_cache_ruled_out: bool,
        slo: Slo,
    ) -> DeterminismFold {
        DeterminismFold {
            prompts,
            concurrency,
            max_output_tokens,
            seed,
            prefix_cache_ruled_out,
            open: None,
            passes: [RunFold::with_slo(slo), RunFold::with_slo(slo)],
            whole: RunFold::with_slo(slo),
            alone: FxHashMap::default(),
            compared: 0,
            identical: 0,
            divergences: Vec::new(),
            stop: None,
            pass_failed: None,
        }
    }

    /// Whether the run goes on (no `Finished` of its own yet).
    pub fn live(&self) -> bool {
        self.stop.is_none()
    }

    /// The pass running, if one is (0: alone, 1: loaded).
    pub fn pass(&self) -> Option<usize> {
        self.open
    }

    /// Folds one event in.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::CellStarted(c) => {
                self.open = Some(c.cell.min(PASSES - 1));
                return;
            }
            Event::Finished(reason) if self.open.is_none() => {
                self.stop = Some(reason.clone());
                self.whole.apply(event);
                return;
            }
            _ => {}
        }
        // Telemetry and the server's metrics between passes belong to the run.
        self.whole.apply(event);
        let Some(pass) = self.open else {
            return;
        };
        self.passes[pass].apply(event);
        match event {
            Event::RequestDone(r) => {
                let output = Output::of(r, self.max_output_tokens);
                if pass == 0 {
                    self.alone.insert(r.index, output);
                } else if let Some(alone) = self.alone.remove(&r.index) {
                    self.compared += 1;
                    match divergence(r.index, &alone, &output) {
                        None => self.identical += 1,
                        Some(d) => self.divergences.push(d),
                    }
                }
            }
            Event::Finished(reason) => {
                if *reason == StopReason::Error && self.pass_failed.is_none() {
                    self.pass_failed = Some(
                        self.passes[pass]
                            .failed
                            .clone()
                            .unwrap_or_else(|| "its engine stopped with an error".into()),
                    );
                }
                self.open = None;
            }
            _ => {}
        }
    }

    /// The channel closed without the run's `Finished`: the engine is gone.
    pub fn disconnected(&mut self) {
        if self.stop.is_none() {
            self.whole.disconnected();
            self.stop = Some(StopReason::Error);
            self.pass_failed
                .get_or_insert_with(|| "the engine exited without finishing".into());
        }
    }

    /// The session ends without the run's `Finished` (a signal's stop it did not answer in
    /// time).
    pub fn abandoned(&mut self, reason: StopReason) {
        self.whole.abandoned(reason.clone());
        self.stop.get_or_insert(reason);
    }

    /// What the run found, so far.
    pub fn summary(&self) -> DeterminismSummary {
        let mut divergences = self.divergences.clone();
        divergences.sort_by_key(|d| d.index);
        let count = |kind: Kind| divergences.iter().filter(|d| d.kind == kind).count() as u64;
        let sent = self.passes[0]
            .started_requests
            .max(self.passes[1].started_requests);
        DeterminismSummary {
            prompts: self.prompts,
            concurrency: self.concurrency,
            max_output_tokens: self.max_output_tokens,
            seed: self.seed,
            prefix_cache_ruled_out: self.prefix_cache_ruled_out,
            compared: self.compared,
            identical: self.identical,
            differ: count(Kind::Tokens),
            length_only: count(Kind::Length),
            not_compared: sent.max(self.prompts).saturating_sub(self.compared),
            passes: [1, self.concurrency]
                .iter()
                .zip(&self.passes)
                .map(|(&c, fold)| latency(c, fold))
                .collect(),
            divergences,
        }
    }
}

/// A pass's latency, from its fold's steady table.
fn latency(concurrency: usize, fold: &RunFold) -> PassLatency {
    let table = &fold.summary().steady;
    let at = |m: Metric, p99: bool| {
        let s = table.get(m);
        (s.n > 0).then_some(if p99 { s.p99 } else { s.p50 })
    };
    PassLatency {
        pass: pass_name(concurrency),
        concurrency,
        completed: fold.completed_requests,
        failed: fold.failed_requests,
        ttft_p50_s: at(Metric::Ttft, false),
        ttft_p99_s: at(Metric::Ttft, true),
        tpot_p50_s: at(Metric::Tpot, false),
        e2e_p50_s: at(Metric::E2e, false),
        e2e_p99_s: at(Metric::E2e, true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CellParams, CellStart, ClientDetail, RequestDone, RequestFailed};

    fn started(cell: usize) -> Event {
        Event::CellStarted(Box::new(CellStart {
            cell,
            cells: 2,
            params: CellParams::default(),
        }))
    }

    fn done(index: u64, words: &[&str]) -> Event {
        let mut text = String::new();
        let mut ends = Vec::new();
        for w in words {
            text.push_str(w);
            ends.push(text.len() as u32);
        }
        Event::RequestDone(Box::new(RequestDone {
            index,
            output_tokens: words.len(),
            ttft_s: 0.01,
            e2e_s: 0.05,
            output_hash: String::new(),
            text: Some(text),
            client: Some(Box::new(ClientDetail {
                text_ends: ends,
                ..ClientDetail::default()
            })),
            ..RequestDone::default()
        }))
    }

    fn failed(index: u64) -> Event {
        Event::RequestFailed(Box::new(RequestFailed {
            index,
            warmup: false,
            reason: "HTTP 500".into(),
            status: Some(500),
            endpoint: None,
            elapsed_s: 0.1,
            model: None,
        }))
    }

    /// Two passes of four prompts: one differs at its third token, one stops early, one
    /// failed in the second pass; the run's own `Finished` comes after both passes'.
    #[test]
    fn each_prompt_is_compared_between_the_passes() {
        let mut f = DeterminismFold::new(4, 2, 32, Some(0), false, Slo::default());
        let words = [" a", " b", " c", " d"];
        f.apply(&started(0));
        for i in 0..4 {
            f.apply(&done(i, &words));
        }
        f.apply(&Event::Finished(StopReason::RequestLimit));
        assert!(f.live());
        f.apply(&started(1));
        f.apply(&done(1, &[" a", " b", " x", " d"]));
        f.apply(&done(0, &words));
        f.apply(&done(2, &[" a", " b"]));
        f.apply(&failed(3));
        f.apply(&Event::Finished(StopReason::RequestLimit));
        f.apply(&Event::Finished(StopReason::RequestLimit));
        assert!(!f.live());
        let s = f.summary();
        assert_eq!(
            (
                s.compared,
                s.identical,
                s.differ,
                s.length_only,
                s.not_compared
            ),
            (3, 1, 1, 1, 1)
        );
        let at: Vec<(u64, Kind, usize)> = s
            .divergences
            .iter()
            .map(|d| (d.index, d.kind, d.at_token))
            .collect();
        assert_eq!(at, [(1, Kind::Tokens, 2), (2, Kind::Length, 2)]);
        assert_eq!((s.passes[0].completed, s.passes[1].completed), (4, 3));
        assert_eq!(s.passes[1].failed, 1);
        assert_eq!(s.passes[1].pass, "concurrency 2");
        assert!(f.pass_failed.is_none());
        assert_eq!(f.whole.completed_requests, 7);
    }

    /// A pass whose engine failed says so, once.
    #[test]
    fn a_failed_pass_is_said() {
        let mut f = DeterminismFold::new(4, 2, 32, None, false, Slo::default());
        f.apply(&started(0));
        f.apply(&Event::Error {
            message: "cannot list the models".into(),
            fatal: true,
        });
        f.apply(&Event::Finished(StopReason::Error));
        assert_eq!(f.pass_failed.as_deref(), Some("cannot list the models"));
        assert_eq!(f.summary().not_compared, 4);
    }
}
