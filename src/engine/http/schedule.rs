//! When the next unit of load goes out, how many may be in flight, and when the loop ends:
//! the one scheduler of the http engine, shared by its request loop (`completions`, a unit is
//! a request) and its conversation loop (`conversation`, a unit is a conversation).
//!
//! A closed loop launches a unit whenever one of `--concurrency` slots is free; an open loop
//! at its arrival times (gamma gaps of mean 1/rate, seeded, or a replayed trace's rows, on a
//! clock that skips pauses). The loop asks `intents` first, then `verdict` (is it over?), then
//! launches what `may_launch` allows, and waits until `wake`.
//!
//! A shard of a run (`--shard K/N`) walks the whole schedule and launches only its own units
//! (`TrafficPlan::owns`), each at the whole schedule's time, from the schedule's origin
//! (`--start-at`, or when the loop starts): N shards send one generator's schedule between
//! them.

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

/// How often the loop looks again when nothing else wakes it: a control message wakes it when
/// it comes (`Inbox::arrived`), and the end of `--duration` is a wake of its own.
const CONTROL_POLL: Duration = Duration::from_millis(250);

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

/// The seed a run's arrivals of `unit`s are drawn from.
fn arrivals_seed(seed: u64, unit: Unit) -> u64 {
    seed ^ match unit {
        Unit::Request => 0x5EED_A771_0A15,
        Unit::Conversation => 0xC0_4E25,
    }
}

/// When the first `n` requests of an open loop (`--rate`, `--burstiness`, `--seed`) are due,
/// in seconds from the schedule's start: the whole run's schedule, as every shard of it draws
/// it (what a run's sends are checked against).
pub fn open_loop_due_s(
    rate: f64,
    burstiness: f64,
    seed: u64,
    n: usize,
) -> Result<Vec<f64>, String> {
    let Some(mut arrivals) =
        Arrivals::new(Some(rate), burstiness, arrivals_seed(seed, Unit::Request))?
    else {
        return Ok(Vec::new());
    };
    let mut due = Duration::ZERO;
    Ok((0..n)
        .map(|i| {
            if i > 0 {
                due += arrivals.gap();
            }
            due.as_secs_f64()
        })
        .collect())
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
        let seed = arrivals_seed(cfg.traffic.seed, unit);
        let started = cfg.schedule_origin();
        let mut scheduler = Scheduler {
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
        };
        // A shard starts at its first unit: the whole schedule's units before it are the
        // other shards'.
        scheduler.skip_others(cfg);
        Ok(scheduler)
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
            Intent::Load(_) | Intent::Output(_) | Intent::Prompt(_)
                if !cfg.traffic.shard.is_whole() =>
            {
                let _ = tx.send(Event::Error {
                    message: format!(
                        "shard {}: the load and the lengths are the {} generators' together; change the flags and start them all again",
                        cfg.traffic.shard, cfg.traffic.shard.count
                    ),
                    fatal: false,
                });
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
        self.advance(cfg);
        self.skip_others(cfg);
    }

    /// The whole schedule's next unit: its number and, in an open loop, its time.
    fn advance(&mut self, cfg: &HttpConfig) {
        self.launched += 1;
        if let Some(due) = self.replay_due(cfg) {
            self.next_due = due;
        } else if let Some(arrivals) = self.arrivals.as_mut() {
            self.next_due += arrivals.gap();
        }
    }

    /// Moves past the units that are other shards' (`--shard`): their gaps are drawn all
    /// the same, so this shard's units go out at the whole schedule's times.
    fn skip_others(&mut self, cfg: &HttpConfig) {
        while !cfg.traffic.owns(self.launched) {
            self.advance(cfg);
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
        if let Some(end) = self.duration.map(|d| self.started + d) {
            if end > Instant::now() {
                wake = wake.min(end);
            }
        }
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
    use crate::engine::http::{Api, Prompts};
    use crate::traffic::{LenSpec, Shard, TrafficPlan};

    fn cfg(rate: Option<f64>, concurrency: Option<usize>, shard: Shard) -> HttpConfig {
        HttpConfig {
            endpoints: Vec::new(),
            api: Api::Completions,
            served_model: None,
            api_key: None,
            traffic: TrafficPlan {
                shard,
                ..TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(4), 7)
            },
            prompts: Prompts::Approximate,
            concurrency,
            rate,
            burstiness: 0.5,
            request_timeout: Duration::from_secs(1),
            exact_output: true,
            chunk_usage: false,
            chunk_timings: false,
            record_tokens: false,
            preconnect: false,
            reset_prefix_cache: false,
            start_at: None,
            prompt_salt: 0,
            cancel: None,
            canary: None,
            shape: Default::default(),
        }
    }

    /// The units a scheduler launches below `limit`: each one's number and when it is due,
    /// from the schedule's start.
    fn units(cfg: &HttpConfig, unit: Unit, limit: u64) -> Vec<(u64, Duration)> {
        let mut s = Scheduler::new(cfg, unit, Some(limit)).unwrap();
        let mut out = Vec::new();
        while s.launched < limit {
            out.push((s.launched, s.next_due - s.started));
            s.launched_one(cfg);
        }
        out
    }

    /// N shards given the same flags send the one generator's schedule between them: every
    /// unit once, at the same instant of the schedule, whatever N.
    #[test]
    fn shards_send_the_whole_schedule_between_them() {
        for unit in [Unit::Request, Unit::Conversation] {
            let whole = units(&cfg(Some(20.0), None, Shard::WHOLE), unit, 500);
            assert_eq!(whole.len(), 500);
            for n in [2u64, 3, 4] {
                let mut union: Vec<(u64, Duration)> = (0..n)
                    .flat_map(|k| {
                        let shard = Shard::new(k, n).unwrap();
                        let mine = units(&cfg(Some(20.0), None, shard), unit, 500);
                        assert!(mine.iter().all(|(i, _)| shard.owns(*i)));
                        mine
                    })
                    .collect();
                union.sort();
                assert_eq!(union, whole, "{n} shards");
            }
        }
    }

    /// A shard's load is the N generators' together: the load and length keys are refused
    /// with a line, and nothing changes.
    #[test]
    fn a_shard_refuses_the_load_keys() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let events = Events::new(tx);
        let mut c = cfg(Some(20.0), None, Shard::new(0, 2).unwrap());
        let mut s = Scheduler::new(&c, Unit::Request, None).unwrap();
        for intent in [Intent::Load(1), Intent::Output(4), Intent::Prompt(1)] {
            assert_eq!(s.obey(intent, &mut c, &events).unwrap(), None);
        }
        assert_eq!(c.rate, Some(20.0));
        assert_eq!(c.traffic.output, LenSpec::Fixed(4));
        events.flush();
        let said: Vec<Event> = rx.try_iter().collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said.iter().all(
            |e| matches!(e, Event::Error { message, fatal: false } if message.contains("shard 0/2"))
        ));
    }

    /// A closed loop's shard takes its own numbers and its share of the slots.
    #[test]
    fn a_closed_loops_shard_takes_its_numbers_and_its_share() {
        let shard = Shard::new(1, 3).unwrap();
        let c = cfg(None, Some(10), shard);
        let numbers: Vec<u64> = units(&c, Unit::Request, 12).iter().map(|u| u.0).collect();
        assert_eq!(numbers, vec![1, 4, 7, 10]);
        assert_eq!(c.in_flight_cap(), 3);
        assert_eq!(
            cfg(None, Some(10), Shard::new(0, 3).unwrap()).in_flight_cap(),
            4
        );
        // A shard whose first number is past the limit has nothing to send.
        let last = Shard::new(3, 4).unwrap();
        assert!(units(&cfg(None, Some(4), last), Unit::Request, 2).is_empty());
    }

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
