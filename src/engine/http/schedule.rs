//! When the next unit of load goes out, how many may be in flight, and when the loop ends:
//! the one scheduler of the http engine, shared by its request loop (`completions`, a unit is
//! a request) and its conversation loop (`conversation`, a unit is a conversation).
//!
//! A closed loop launches a unit whenever one of `--concurrency` slots is free; an open loop
//! at its arrival times (gamma gaps of mean 1/rate, seeded, or a replayed trace's rows, on a
//! clock that skips pauses). The loop asks `intents` first, then `verdict` (is it over?), then
//! launches what `may_launch` allows, and waits until `wake`.

use std::time::{Duration, Instant};

use super::events::Events;
use super::HttpConfig;
use crate::engine::control::{Inbox, Intent};
use crate::event::{Event, StopReason};

/// A run with no successful request ends after this many failures: the server is not there.
pub const GIVE_UP_AFTER_FAILURES: u64 = 10;

/// How long a closed-loop slot waits after a failure before its next request, so a server that
/// refuses connections is not hammered (and the event queue not flooded).
const FAILURE_BACKOFF: Duration = Duration::from_millis(50);

/// How often the loop looks at the control channel when nothing else wakes it.
const CONTROL_POLL: Duration = Duration::from_millis(10);

/// How late the runtime's timer may wake: it rounds deadlines up to the millisecond.
const TIMER_SLACK: Duration = Duration::from_micros(1500);

/// The most requests in flight the load keys go to.
pub const MAX_CONCURRENCY: usize = 4096;

/// What the loop schedules: requests (a replay may pace them by its rows) or conversations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Request,
    Conversation,
}

/// Gaps between open-loop arrivals: gamma-distributed with mean 1/rate, seeded.
pub struct Arrivals {
    rng: rand::rngs::StdRng,
    gaps: rand_distr::Gamma<f64>,
}

impl Arrivals {
    pub fn new(rate: Option<f64>, burstiness: f64, seed: u64) -> Result<Option<Arrivals>, String> {
        use rand::SeedableRng;
        let Some(rate) = rate else {
            return Ok(None);
        };
        let gaps = rand_distr::Gamma::new(burstiness, 1.0 / (rate * burstiness))
            .map_err(|e| format!("arrivals of rate {rate} and burstiness {burstiness}: {e}"))?;
        Ok(Some(Arrivals {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            gaps,
        }))
    }

    pub fn gap(&mut self) -> Duration {
        use rand_distr::Distribution;
        Duration::from_secs_f64(self.gaps.sample(&mut self.rng))
    }
}

/// The scheduler's state over one run (or sweep cell).
pub struct Scheduler {
    unit: Unit,
    started: Instant,
    /// Units launched so far (the next one's number).
    pub launched: u64,
    /// Units the run launches at most.
    limit: Option<u64>,
    duration: Option<Duration>,
    arrivals: Option<Arrivals>,
    /// The seed arrivals are drawn from (the load key re-seeds from it).
    seed: u64,
    /// Open loop: when the next unit is due.
    next_due: Instant,
    /// A replayed trace's clock: row times count from here (moved on by pauses).
    replay_origin: Instant,
    paused_at: Instant,
    /// A closed loop holds its next launch until here after a failure.
    hold_until: Instant,
    /// Units in flight at most.
    cap: usize,
    /// Requests that completed and failed (a conversation's turns each count).
    completed: u64,
    failed: u64,
    last_failure: String,
}

impl Scheduler {
    /// A scheduler for `cfg`'s load, launching `limit` units at most.
    pub fn new(cfg: &HttpConfig, unit: Unit, limit: Option<u64>) -> Result<Scheduler, String> {
        let seed = cfg.traffic.seed
            ^ match unit {
                Unit::Request => 0x5EED_A771_0A15,
                Unit::Conversation => 0xC0_4E25,
            };
        let started = Instant::now();
        Ok(Scheduler {
            unit,
            started,
            launched: 0,
            limit,
            duration: cfg.traffic.duration,
            arrivals: Arrivals::new(cfg.rate, cfg.burstiness, seed)?,
            seed,
            next_due: started,
            replay_origin: started,
            paused_at: started,
            hold_until: started,
            cap: cfg.in_flight_cap(),
            completed: 0,
            failed: 0,
            last_failure: String::new(),
        })
    }

    /// Whether units go out on a schedule rather than as slots free up.
    fn open_loop(&self, cfg: &HttpConfig) -> bool {
        match self.unit {
            Unit::Request => cfg.open_loop(),
            Unit::Conversation => cfg.rate.is_some(),
        }
    }

    /// Carries out what the controls ask (the pause itself is the inbox's), echoing each
    /// change; `Some(reason)` to stop now.
    pub fn obey(
        &mut self,
        intent: Intent,
        cfg: &mut HttpConfig,
        tx: &Events,
    ) -> Result<Option<StopReason>, String> {
        if let Some(echo) = intent.echo() {
            let _ = tx.send(echo);
        }
        match intent {
            Intent::Stop(reason) => return Ok(Some(reason)),
            Intent::Pause => self.paused_at = Instant::now(),
            Intent::Resume => {
                // A replayed trace goes on where it stopped: its clock skips the pause.
                self.replay_origin += self.paused_at.elapsed();
                self.next_due = self.replay_due(cfg).unwrap_or_else(Instant::now);
            }
            Intent::Load(steps) => {
                let before = cfg.traffic.replay;
                cfg.adjust_load(steps);
                self.cap = cfg.in_flight_cap();
                self.arrivals = Arrivals::new(cfg.rate, cfg.burstiness, self.seed ^ self.launched)?;
                self.next_due = self.next_due.min(Instant::now() + Duration::from_secs(1));
                if let (Some(old), Some(new)) = (before, cfg.traffic.replay) {
                    // The trace time already covered stays covered; the rest runs faster.
                    let now = Instant::now();
                    let covered = now
                        .saturating_duration_since(self.replay_origin)
                        .as_secs_f64()
                        / old;
                    self.replay_origin = now
                        - Duration::from_secs_f64(covered * new)
                            .min(now.saturating_duration_since(self.started));
                    if let Some(due) = self.replay_due(cfg) {
                        self.next_due = due;
                    }
                }
                let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
            }
            Intent::Output(delta) if self.unit == Unit::Request => {
                cfg.traffic.adjust_output(delta);
                let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
            }
            Intent::Prompt(steps) if self.unit == Unit::Request => {
                cfg.traffic.adjust_prompt(steps);
                let _ = tx.send(Event::WorkloadChanged(Box::new(cfg.describe())));
            }
            Intent::Output(_) | Intent::Prompt(_) => {
                let _ = tx.send(Event::Error {
                    message: "a conversation's turns keep their lengths: only the load key (conversations in flight) changes them".into(),
                    fatal: false,
                });
            }
            Intent::ResetStats | Intent::Drain => {}
        }
        Ok(None)
    }

    /// Takes every intent waiting and carries it out; `Some(reason)` to stop now.
    pub fn intents(
        &mut self,
        inbox: &mut Inbox,
        cfg: &mut HttpConfig,
        tx: &Events,
    ) -> Result<Option<StopReason>, String> {
        while let Some(intent) = inbox.poll() {
            if let Some(stop) = self.obey(intent, cfg, tx)? {
                return Ok(Some(stop));
            }
        }
        Ok(None)
    }

    /// Whether the run is over with `in_flight` units still out: every request failed so far
    /// (the server is not there), or the limit, the duration or a drain reached and nothing
    /// left in flight.
    pub fn verdict(&self, in_flight: usize, inbox: &Inbox) -> Option<Result<StopReason, String>> {
        if self.completed == 0 && self.failed >= GIVE_UP_AFTER_FAILURES {
            return Some(Err(self.all_failed()));
        }
        let reason = self.limit_reached(inbox)?;
        if in_flight > 0 {
            return None;
        }
        if self.completed == 0 && self.failed > 0 {
            return Some(Err(self.all_failed()));
        }
        Some(Ok(reason))
    }

    /// Why no more units are launched, if none are.
    fn limit_reached(&self, inbox: &Inbox) -> Option<StopReason> {
        if inbox.draining() || self.limit.is_some_and(|n| self.launched >= n) {
            Some(StopReason::RequestLimit)
        } else if self.duration.is_some_and(|d| self.started.elapsed() >= d) {
            Some(StopReason::DurationLimit)
        } else {
            None
        }
    }

    /// No unit is launched after those already out (a conversation loop whose requests have
    /// all been given out).
    pub fn close(&mut self) {
        self.limit = Some(self.limit.map_or(self.launched, |n| n.min(self.launched)));
    }

    /// Whether the units in flight should wind down: a drain, or the duration is up. Requests
    /// in flight end either way; a conversation starts no more turns.
    pub fn ending(&self, inbox: &Inbox) -> bool {
        inbox.draining() || self.duration.is_some_and(|d| self.started.elapsed() >= d)
    }

    /// Whether another unit may go out now, with `in_flight` out.
    pub fn may_launch(&self, in_flight: usize, cfg: &HttpConfig, inbox: &Inbox) -> bool {
        let now = Instant::now();
        !inbox.paused()
            && self.limit_reached(inbox).is_none()
            && now >= self.hold_until
            && in_flight < self.cap
            && (!self.open_loop(cfg) || now >= self.next_due)
    }

    /// The time the next unit counts from: its scheduled time in an open loop, now in a closed
    /// one (its time starts when it begins to be sent, see `request::Start`).
    pub fn scheduled(&self, cfg: &HttpConfig) -> Instant {
        if self.open_loop(cfg) {
            self.next_due
        } else {
            Instant::now()
        }
    }

    /// A unit went out: the next one's number and, in an open loop, its time.
    pub fn launched_one(&mut self, cfg: &HttpConfig) {
        self.launched += 1;
        if let Some(due) = self.replay_due(cfg) {
            self.next_due = due;
        } else if let Some(arrivals) = self.arrivals.as_mut() {
            self.next_due += arrivals.gap();
        }
    }

    /// Requests that ended: `completed` and `failed` (a failure's reason, the last one kept).
    /// A closed loop backs off a little after a failure.
    pub fn ended(
        &mut self,
        completed: u64,
        failed: u64,
        failure: Option<String>,
        cfg: &HttpConfig,
    ) {
        self.completed += completed;
        self.failed += failed;
        if let Some(f) = failure {
            self.last_failure = f;
        }
        if failed > 0 && !self.open_loop(cfg) {
            self.hold_until = Instant::now() + FAILURE_BACKOFF;
        }
    }

    /// When the loop should look again: the next arrival, the end of a back-off, or the next
    /// look at the controls, whichever is first.
    pub fn wake(&self, in_flight: usize, cfg: &HttpConfig, inbox: &Inbox) -> Instant {
        let mut wake = Instant::now() + CONTROL_POLL;
        if self.on_schedule(in_flight, cfg, inbox) {
            wake = wake.min(
                self.next_due
                    .checked_sub(TIMER_SLACK)
                    .unwrap_or(self.next_due),
            );
        }
        if self.hold_until > Instant::now() {
            wake = wake.min(self.hold_until);
        }
        wake
    }

    /// The runtime's timer rounds up to the millisecond: a send due within that is waited for
    /// on this thread, whose sleep is finer (the requests in flight are read on the runtime's
    /// workers meanwhile).
    pub fn sleep_to_due(&self, in_flight: usize, cfg: &HttpConfig, inbox: &Inbox) {
        if self.on_schedule(in_flight, cfg, inbox) {
            let left = self.next_due.saturating_duration_since(Instant::now());
            if left <= TIMER_SLACK {
                std::thread::sleep(left);
            }
        }
    }

    fn on_schedule(&self, in_flight: usize, cfg: &HttpConfig, inbox: &Inbox) -> bool {
        self.open_loop(cfg) && !inbox.paused() && in_flight < self.cap
    }

    /// When the next request of a replayed trace is due on the wall clock; `None` outside a
    /// replay (or past its last row).
    fn replay_due(&self, cfg: &HttpConfig) -> Option<Instant> {
        if self.unit != Unit::Request {
            return None;
        }
        let due_s = cfg.traffic.due_s(self.launched)?;
        Some(self.replay_origin + Duration::from_secs_f64(due_s))
    }

    fn all_failed(&self) -> String {
        let failed = self.failed;
        format!(
            "every request failed ({failed} of {failed}); the last: {}",
            self.last_failure
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Gaps keep the asked mean rate; their spread is the gamma shape's (coefficient of
    /// variation 1/sqrt(burstiness): 1 for Poisson, 2 at 0.25, 0.5 at 4).
    #[test]
    fn arrivals_have_the_rate_and_the_spread_asked() {
        for (burstiness, cv_want) in [(1.0, 1.0), (0.25, 2.0), (4.0, 0.5)] {
            let mut a = Arrivals::new(Some(8.0), burstiness, 7).unwrap().unwrap();
            let gaps: Vec<f64> = (0..40_000).map(|_| a.gap().as_secs_f64()).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            let cv = var.sqrt() / mean;
            assert!(
                (mean * 8.0 - 1.0).abs() < 0.03,
                "b={burstiness}: mean gap {mean}"
            );
            assert!((cv / cv_want - 1.0).abs() < 0.05, "b={burstiness}: cv {cv}");
        }
        assert!(Arrivals::new(None, 1.0, 0).unwrap().is_none());
    }
}
