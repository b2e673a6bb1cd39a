//! One run, folded from its events: the statistics, the memory and energy figures, which
//! request is in flight, and how the run ended. Headless runs, the dashboard, `replay`, `follow`
//! and `report` apply the same events to the same fold, so all print the same summary from the
//! same code; the dashboard keeps only its view (histories, events pane, outliers) beside it.

use crate::event::{Event, RequestDone, RunInfo, StopReason};
use crate::exit::{EXIT_FAILURE, EXIT_OK};
use crate::signals::Signals;
use crate::stats::{
    Breakdown, EndpointStats, ModelStats, PhaseStats, RunStats, ServerSteady, ShapeStats, Slo,
    SloCounts, SpecStats, SplitStats, Window, RECENT_REQUESTS,
};
use crate::summary::resources::Resources;
use crate::summary::GoodputSummary;
use crate::summary::RunSummary;

mod views;
use views::{Ended, RequestView, VIEWS};

/// Decode steps reserved per request in flight when it starts, at most (its output length
/// says how many it will send; a longer one grows its list).
const STEPS_RESERVED: usize = 1024;

/// The fold of one run's events. `apply` is pure: no I/O, no clock, and amortised O(log n) at
/// most.
#[derive(Clone, Debug, Default)]
pub struct RunFold {
    /// The model and workload, once the engine has started.
    pub info: Option<RunInfo>,
    /// Every finished request and decode step since the start or the last reset.
    pub stats: RunStats,
    /// The same requests per server endpoint (empty for the candle engine).
    pub endpoints: EndpointStats,
    /// A server run's HTTP phases and time to second token (nothing for the candle engine).
    pub phases: PhaseStats,
    /// The same requests per model, when the run sends to several (`--served-model a=3,b=1`).
    pub models: ModelStats,
    /// A server run's thinking and answering apart, and its tool calls.
    pub shapes: ShapeStats,
    /// Where each TTFT went by the server's own timings (queue, prefill, the rest), when the
    /// server sends them.
    pub split: SplitStats,
    /// Speculative decoding by the server's own count, when it drafts.
    pub spec: SpecStats,
    /// The canary lane (`--probe`), apart from the run's requests.
    pub canary: crate::stats::CanaryStats,
    /// The candle engine's sampled steps in parts (`--step-parts N`).
    pub step_parts: crate::stats::StepPartsStats,
    /// Peak memory and energy over the whole run (not reset by `r`).
    pub resources: Resources,
    /// Requests finished since the start (not reset by `r`).
    pub requests_done: u64,
    /// Requests started since the start (not reset by `r`).
    pub started_requests: u64,
    /// Requests that completed since the start (not reset by `r`).
    pub completed_requests: u64,
    /// A server engine's send delays (schedule → send) of the last requests, and their p99:
    /// a client that cannot keep its schedule shows here first.
    send_delays: Option<Window>,
    pub send_delay_p99_s: Option<f64>,
    /// Requests that failed since the start (not reset by `r`): never latency samples.
    pub failed_requests: u64,
    /// Requests the client cancelled on purpose since the start (`--cancel`; not reset by
    /// `r`): neither samples nor failures.
    pub cancelled_requests: u64,
    /// What the server did after them, once the engine has checked.
    pub cancel_check: Option<crate::event::CancelCheck>,
    /// The last failure's reason, for the end-of-run line when every request failed.
    pub last_failure: Option<String>,
    /// Whether the request in flight is warmup: its decode steps are counted with it.
    in_flight_warmup: bool,
    /// Where the run is in its warmup, as the requests started tell it.
    pub warmup: WarmupProgress,
    /// Decode steps of requests in flight, by request: their ITLs enter the statistics when
    /// the request completes, and never when it fails (a failed request is no sample). One
    /// entry per request in flight (a map: a server run has a thousand at once); emptied at a
    /// reset, as the record's reader does.
    pending_steps: rustc_hash::FxHashMap<u64, Vec<f64>>,
    /// The server's own view (`--server-metrics`): its last window and its steady span.
    pub server: ServerSteady,
    /// Steady requests by cache outcome and turn, and their lengths.
    pub breakdown: Breakdown,
    /// How far into a replayed trace the finished requests reach (seconds of trace time).
    pub trace_covered_s: Option<f64>,
    /// The SLO goodput is counted against (none: no goodput).
    pub slo: Slo,
    /// Steady requests that ended, against the SLO (GuideLLM's rules: failures are misses,
    /// requests cut off by the run's end are not counted). Reset by `r`.
    pub goodput: SloCounts,
    /// Set by `Event::Finished`: the engine has stopped and says why.
    pub stop: Option<StopReason>,
    /// The fatal error that ended the run, if one did.
    pub failed: Option<String>,
}

impl RunFold {
    pub fn new() -> RunFold {
        RunFold::default()
    }

    /// A fold that counts goodput against `slo`.
    pub fn with_slo(slo: Slo) -> RunFold {
        RunFold {
            slo,
            ..RunFold::default()
        }
    }

    /// Folds one event in.
    pub fn apply(&mut self, event: &Event) {
        self.resources.observe(event);
        match event {
            Event::RunStarted(info) => {
                self.server = ServerSteady::new(info.warmup_requests);
                self.info = Some(info.as_ref().clone());
                self.warmup.newest = info.warmup_requests > 0;
            }
            Event::RequestStarted {
                index,
                warmup,
                output_tokens,
                ..
            } => {
                self.in_flight_warmup = *warmup;
                self.warmup.started(*index, *warmup);
                self.started_requests += 1;
                // Room for the steps it will send (the first token is not a step), so the
                // list is not grown step by step.
                let steps = output_tokens.saturating_sub(1).min(STEPS_RESERVED);
                self.pending_steps
                    .entry(*index)
                    .or_insert_with(|| Vec::with_capacity(steps));
            }
            Event::DecodeSteps(steps) => {
                // With several requests in flight (a server engine), a step belongs to its own
                // request: warmup is decided by its index, as the engines number them.
                if let Some(last) = steps.last() {
                    self.in_flight_warmup = self.step_warmup(last.index);
                }
                // A batch holds runs of one request's steps: one map lookup a run.
                let mut rest = &steps[..];
                while let Some(first) = rest.first() {
                    let n = rest.iter().take_while(|s| s.index == first.index).count();
                    let (run, next) = rest.split_at(n);
                    self.pending_steps
                        .entry(first.index)
                        .or_default()
                        .extend(run.iter().map(|s| s.itl_s));
                    rest = next;
                }
            }
            Event::RequestDone(r) => {
                let steps = self.take_steps(r.index);
                if let Some(steps) = &steps {
                    self.stats.record_steps(steps, r.warmup);
                }
                self.server.request_ended(r.warmup);
                self.request_done(r, steps.as_deref().unwrap_or_default())
            }
            Event::RequestFailed(f) => {
                self.take_steps(f.index);
                self.server.request_ended(f.warmup);
                for view in self.views_mut() {
                    view.failed(f);
                }
                if !f.warmup {
                    self.goodput.failed();
                }
                self.failed_requests += 1;
                self.last_failure = Some(f.reason.clone());
            }
            Event::Canary(c) => self.canary.record(c),
            Event::RequestCancelled(c) => {
                self.take_steps(c.index);
                self.server.request_ended(c.warmup);
                self.cancelled_requests += 1;
            }
            Event::Notice(n) => {
                if let crate::event::Notice::CancelCheck(c) = n.as_ref() {
                    self.cancel_check = Some(c.clone());
                }
            }
            Event::ServerMetrics(w) => self.server.window(w),
            Event::StepParts(p) => self
                .step_parts
                .record(p, self.info.as_ref().map(|i| &i.model)),
            Event::StatsReset => {
                self.stats.reset();
                self.step_parts.reset();
                for view in self.views_mut() {
                    view.reset();
                }
                self.canary.reset();
                self.server.reset();
                self.goodput = SloCounts::default();
                for steps in self.pending_steps.values_mut() {
                    steps.clear();
                }
            }
            Event::Error { message, fatal } if *fatal => self.failed = Some(message.clone()),
            Event::Finished(reason) => {
                if *reason == StopReason::Error && self.failed.is_none() {
                    self.failed = Some("the engine stopped with an error".into());
                }
                self.stop = Some(reason.clone());
            }
            _ => {}
        }
    }

    /// The channel closed without `Finished`: the engine is gone (it crashed or dropped its
    /// sender). Returns false when it had finished properly.
    pub fn disconnected(&mut self) -> bool {
        if self.stop.is_some() {
            return false;
        }
        self.failed
            .get_or_insert_with(|| "the engine exited without finishing".into());
        self.stop = Some(StopReason::Error);
        true
    }

    /// The session ended without the engine's `Finished` (a signal's stop it did not answer
    /// in time): the run ends here, as the signal asked.
    pub fn abandoned(&mut self, reason: StopReason) {
        self.stop.get_or_insert(reason);
    }

    fn take_steps(&mut self, index: u64) -> Option<Vec<f64>> {
        self.pending_steps.remove(&index)
    }

    fn request_done(&mut self, r: &RequestDone, itls: &[f64]) {
        let ended = Ended {
            request: r,
            itls,
            // In flight when it ended, itself included (it is counted done just below).
            in_flight: self.in_flight(),
        };
        for view in self.views_mut() {
            view.done(&ended);
        }
        self.stats.record_request(r);
        if !r.warmup {
            self.goodput.completed(self.slo.met_by(r));
        }
        if let Some(t) = r.origin.as_ref().and_then(|o| o.at_s) {
            self.trace_covered_s = Some(self.trace_covered_s.map_or(t, |c| c.max(t)));
        }
        if let Some(c) = &r.client {
            let w = self
                .send_delays
                .get_or_insert_with(|| Window::new(RECENT_REQUESTS));
            w.push(c.send_delay_s);
            self.send_delay_p99_s = Some(w.summary().p99);
        }
        self.requests_done = self.requests_done.max(r.index + 1);
        self.completed_requests += 1;
    }

    /// Requests started and not yet ended (a server engine has many).
    pub fn in_flight(&self) -> u64 {
        self.started_requests.saturating_sub(
            self.completed_requests + self.failed_requests + self.cancelled_requests,
        )
    }

    /// Failed requests as a fraction of all that ended (0 when none has).
    pub fn error_rate(&self) -> f64 {
        let ended = self.failed_requests + self.completed_requests;
        if ended == 0 {
            0.0
        } else {
            self.failed_requests as f64 / ended as f64
        }
    }

    /// Whether the engine is still running (no `Finished` yet).
    pub fn live(&self) -> bool {
        self.stop.is_none()
    }

    /// Whether a decode step of request `index` is warmup: by its index once the run has
    /// started (engines number warmup requests first), else as the request in flight.
    pub fn step_warmup(&self, index: u64) -> bool {
        self.info
            .as_ref()
            .map_or(self.in_flight_warmup, |i| index < i.warmup_requests)
    }

    /// The per-request views, in the order they observe, reset and summarize.
    fn views(&self) -> [&dyn RequestView; VIEWS] {
        [
            &self.endpoints,
            &self.models,
            &self.breakdown,
            &self.phases,
            &self.shapes,
            &self.split,
            &self.spec,
        ]
    }

    /// `views`, to change them: the same list in the same order.
    fn views_mut(&mut self) -> [&mut dyn RequestView; VIEWS] {
        [
            &mut self.endpoints,
            &mut self.models,
            &mut self.breakdown,
            &mut self.phases,
            &mut self.shapes,
            &mut self.split,
            &mut self.spec,
        ]
    }

    /// The end-of-run summary: steady state, warmup, memory and energy.
    pub fn summary(&self) -> RunSummary {
        let mut summary = RunSummary::from_stats(&self.stats)
            .with_resources(self.resources.clone())
            .with_failures(self.failed_requests)
            .with_cancelled(self.cancelled_requests, self.cancel_check.clone())
            .with_canary(self.canary.summary())
            .with_server(self.server.summary.clone())
            .with_goodput(self.goodput_summary());
        for view in self.views() {
            view.summarize(&mut summary);
        }
        summary.step_parts = self.step_parts_summary();
        summary
    }

    /// The sampled steps' parts (`--step-parts`), against the peaks the run measured.
    pub fn step_parts_summary(&self) -> Option<crate::stats::StepPartsSummary> {
        let peak = self.info.as_ref().and_then(|i| i.peak.as_ref());
        self.step_parts.summary(peak)
    }

    /// Goodput against the fold's SLO, when it has one.
    pub fn goodput_summary(&self) -> Option<GoodputSummary> {
        (!self.slo.is_empty()).then_some(GoodputSummary {
            slo: self.slo,
            counts: self.goodput,
        })
    }

    /// How the run ended: the engine's own reason when it said one, else `asked` (the stop
    /// that was sent to it).
    pub fn outcome(&self, asked: StopReason) -> Outcome {
        Outcome {
            summary: self.summary(),
            stop: self.stop.clone().unwrap_or(asked),
            failed: self.failed.clone(),
        }
    }
}

/// Where a run is in its warmup, as the requests started tell it (the engines start every
/// warmup request before the first steady one).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WarmupProgress {
    /// Whether a warmup request has started.
    pub seen: bool,
    /// The first steady request to start after warmup ones: where the steady state begins.
    pub steady_from: Option<u64>,
    /// Whether the newest request to start is warmup (before any: whether the run has warmup).
    pub newest: bool,
}

impl WarmupProgress {
    fn started(&mut self, index: u64, warmup: bool) {
        if warmup {
            self.seen = true;
        } else if self.seen && self.steady_from.is_none() {
            self.steady_from = Some(index);
        }
        self.newest = warmup;
    }
}

/// What a run hands back to the command that started it, whatever ran it.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub summary: RunSummary,
    pub stop: StopReason,
    /// The fatal error that ended the run (engine, dashboard), if one did.
    pub failed: Option<String>,
}

impl Outcome {
    /// A run that could not go on (the dashboard failed before the fold saw the end).
    pub fn failed(run: &RunFold, message: String) -> Outcome {
        Outcome {
            failed: Some(message),
            ..run.outcome(StopReason::Error)
        }
    }

    /// The process exit code: 1 after a failure, the signal's code after a signal, else 0.
    pub fn exit_code(&self, signals: &Signals) -> i32 {
        if self.failed.is_some() {
            return EXIT_FAILURE;
        }
        signals.exit_code().unwrap_or(EXIT_OK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Metric, WindowKind};

    fn done(index: u64, warmup: bool) -> Event {
        Event::RequestDone(Box::new(RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 8,
            output_tokens: 3,
            ttft_s: 0.01,
            tpot_s: Some(0.002),
            e2e_s: 0.014,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            peak_alloc_bytes: Some(100),
            ..Default::default()
        }))
    }

    fn started(index: u64, warmup: bool) -> Event {
        Event::RequestStarted {
            index,
            warmup,
            prompt_tokens: 8,
            output_tokens: 3,
            batch: 1,
        }
    }

    fn step(index: u64, itl_s: f64) -> Event {
        Event::decode_step(index, 1, itl_s, None)
    }

    #[test]
    fn decode_steps_count_with_their_request_warmup_or_not() {
        let mut run = RunFold::new();
        for ev in [
            started(0, true),
            step(0, 0.5),
            done(0, true),
            started(1, false),
            step(1, 0.002),
            step(1, 0.004),
            done(1, false),
        ] {
            run.apply(&ev);
        }
        let itl = run.stats.summary(Metric::Itl, WindowKind::Steady, false);
        assert_eq!((itl.n, itl.max), (2, 0.004));
        assert_eq!(run.stats.warmup_summary(Metric::Itl).n, 1);
        assert_eq!(run.requests_done, 2);
        let s = run.summary();
        assert_eq!((s.requests, s.warmup_requests), (2, 1));
        assert_eq!(s.resources.request_peak_bytes, Some(100));
    }

    #[test]
    fn the_outcome_says_how_it_ended() {
        let mut run = RunFold::new();
        assert_eq!(run.outcome(StopReason::UserStop).stop, StopReason::UserStop);
        run.apply(&Event::Error {
            message: "not fatal".into(),
            fatal: false,
        });
        assert!(run.failed.is_none());
        run.apply(&Event::Error {
            message: "out of memory".into(),
            fatal: true,
        });
        run.apply(&Event::Finished(StopReason::Error));
        let o = run.outcome(StopReason::UserStop);
        assert_eq!(o.stop, StopReason::Error);
        assert_eq!(o.failed.as_deref(), Some("out of memory"));
        assert_eq!(o.exit_code(&Signals::none()), EXIT_FAILURE);
        assert!(!run.live());
    }

    #[test]
    fn failed_requests_are_counted_never_sampled() {
        let mut run = RunFold::new();
        run.apply(&started(0, false));
        run.apply(&Event::RequestFailed(Box::new(
            crate::event::RequestFailed {
                index: 0,
                warmup: false,
                reason: "HTTP 500: boom".into(),
                status: Some(500),
                endpoint: None,
                elapsed_s: 0.01,
                model: None,
            },
        )));
        run.apply(&started(1, false));
        run.apply(&done(1, false));
        assert_eq!((run.failed_requests, run.completed_requests), (1, 1));
        assert_eq!(run.last_failure.as_deref(), Some("HTTP 500: boom"));
        assert_eq!(run.error_rate(), 0.5);
        let s = run.summary();
        assert_eq!(s.requests, 1);
        assert!(run.failed.is_none());
        assert_eq!(run.in_flight(), 0);
    }

    /// A server run's header figures: requests in flight, and the p99 of the send delays.
    #[test]
    fn in_flight_and_send_delay_follow_the_events() {
        let mut run = RunFold::new();
        for i in 0..3 {
            run.apply(&started(i, false));
        }
        assert_eq!(run.in_flight(), 3);
        for (i, delay) in [(0, 0.001), (1, 0.003)] {
            let mut d = match done(i, false) {
                Event::RequestDone(d) => d,
                _ => unreachable!(),
            };
            d.client = Some(Box::new(crate::event::ClientDetail {
                endpoint: "http://a".into(),
                send_delay_s: delay,
                ..Default::default()
            }));
            run.apply(&Event::RequestDone(d));
        }
        assert_eq!(run.in_flight(), 1);
        // numpy: np.percentile([0.001, 0.003], 99) == 0.00298
        assert!((run.send_delay_p99_s.unwrap() - 0.00298).abs() < 1e-12);
    }

    #[test]
    fn concurrent_steps_count_by_their_own_index() {
        let mut run = RunFold::new();
        run.apply(&Event::RunStarted(Box::new(RunInfo {
            model: crate::event::ModelInfo::served("m", ""),
            workload: crate::event::WorkloadDesc {
                prompt_tokens: "8".into(),
                output_tokens: "3".into(),
                batch: 1,
                load: None,
            },
            warmup_requests: 1,
            threads: 0,
            traffic: None,
            peak: None,
        })));
        // Request 1 (steady) starts before warmup request 0's steps arrive.
        for ev in [
            started(0, true),
            started(1, false),
            step(0, 0.5),
            step(1, 0.002),
        ] {
            run.apply(&ev);
        }
        // Steps count when their request completes.
        assert_eq!(run.stats.summary(Metric::Itl, WindowKind::All, true).n, 0);
        run.apply(&done(1, false));
        run.apply(&done(0, true));
        assert_eq!(run.stats.warmup_summary(Metric::Itl).n, 1);
        let itl = run.stats.summary(Metric::Itl, WindowKind::Steady, false);
        assert_eq!((itl.n, itl.max), (1, 0.002));
    }

    #[test]
    fn a_failed_request_leaves_no_step_in_the_statistics() {
        let mut run = RunFold::new();
        for ev in [
            started(0, false),
            started(1, false),
            step(0, 0.002),
            step(1, 9.0),
            step(0, 0.002),
        ] {
            run.apply(&ev);
        }
        run.apply(&Event::RequestFailed(Box::new(
            crate::event::RequestFailed {
                index: 1,
                warmup: false,
                reason: "stream cut after 2 content chunks".into(),
                status: None,
                endpoint: None,
                elapsed_s: 1.0,
                model: None,
            },
        )));
        run.apply(&done(0, false));
        let itl = run.stats.summary(Metric::Itl, WindowKind::Steady, false);
        assert_eq!((itl.n, itl.max), (2, 0.002));
        assert!(
            run.pending_steps.is_empty(),
            "nothing kept once requests end"
        );
    }
}
