//! The saturation alarm: is the client itself late? A timer on the client's runtime that fires
//! late means every stream on it is read late, so its chunks' timestamps are late by as much.
//!
//! Timers run late on every machine, though: tokio's wheel rounds a deadline up to its next
//! millisecond and the kernel wakes a thread when a core is free, so on a shared machine an idle
//! client already sees a few milliseconds now and then. A fixed limit either cries wolf there or
//! stays deaf on a quiet machine. So the alarm is calibrated: before the run, with nothing else
//! on the runtime, it measures how late this machine's timers are (`calibrate`); during the run
//! it fires only when the median lateness of the last `WINDOW` probes is above that baseline by a
//! margin: a spike is jitter, a late median is a loop that cannot keep up.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::event::Event;

/// How often the event loop's lateness is probed during the run: each probe wakes the
/// runtime, which at one stream costs as much as the stream's own chunks (4 a second here).
pub const EVERY: Duration = Duration::from_millis(250);
/// Probes whose median decides (two seconds at `EVERY`).
pub const WINDOW: usize = 8;
/// Probes of the calibration, and their period.
const CALIBRATION_PROBES: usize = 32;
const CALIBRATION_EVERY: Duration = Duration::from_millis(3);
/// The threshold is never below this (a sub-millisecond timer is not resolvable on tokio's
/// wheel) nor above `MAX_LIMIT` (past it, the machine is the problem, and it is said at start).
const MIN_LIMIT: Duration = Duration::from_millis(2);
const MAX_LIMIT: Duration = Duration::from_millis(25);
/// Above the threshold by this much, on top of twice the idle jitter.
const MARGIN: Duration = Duration::from_millis(1);
/// At most one warning this often.
const REPEAT: Duration = Duration::from_secs(10);

/// How late this machine's timers are with the client idle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// The 90th percentile of the idle probes' lateness.
    pub idle_p90: Duration,
    /// The median lateness past which the loop counts as saturated.
    pub limit: Duration,
}

impl Calibration {
    /// The threshold from idle lateness samples: twice their 90th percentile plus a margin,
    /// within [`MIN_LIMIT`, `MAX_LIMIT`].
    pub fn from_samples(mut late: Vec<Duration>) -> Calibration {
        late.sort_unstable();
        let idle_p90 = late
            .get((late.len() * 9 / 10).min(late.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default();
        Calibration {
            idle_p90,
            limit: (idle_p90 * 2 + MARGIN).clamp(MIN_LIMIT, MAX_LIMIT),
        }
    }

    /// A warning for the start of the run when the machine's timers are so late even idle that
    /// every timestamp is that uncertain.
    pub fn warning(&self) -> Option<String> {
        (self.idle_p90 * 2 + MARGIN > MAX_LIMIT).then(|| {
            format!(
                "this machine's timers run {:.1} ms late with the client idle (p90), so every timestamp is that uncertain (a busy or throttled machine?)",
                ms(self.idle_p90)
            )
        })
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// How late one sleep until `now + period` wakes.
async fn lateness(period: Duration) -> Duration {
    let due = Instant::now() + period;
    tokio::time::sleep_until(due.into()).await;
    Instant::now().saturating_duration_since(due)
}

/// Measures this machine's timer lateness on the calling runtime, with nothing else running on
/// it (about 0.1 s).
pub async fn calibrate() -> Calibration {
    let mut late = Vec::with_capacity(CALIBRATION_PROBES);
    for _ in 0..CALIBRATION_PROBES {
        late.push(lateness(CALIBRATION_EVERY).await);
    }
    Calibration::from_samples(late)
}

/// The median of a window of probes.
fn median(window: &VecDeque<Duration>) -> Duration {
    let mut v: Vec<Duration> = window.iter().copied().collect();
    v.sort_unstable();
    match v.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

/// Probes the loop every `every` until dropped, and warns (a non-fatal event, shown in the
/// events pane and written to the record) when the median lateness of the last `WINDOW` probes
/// passes `cal.limit`, at most once per `REPEAT`.
pub async fn watch(tx: Sender<Event>, every: Duration, cal: Calibration) {
    let mut window: VecDeque<Duration> = VecDeque::with_capacity(WINDOW);
    let mut warned: Option<Instant> = None;
    loop {
        if window.len() == WINDOW {
            window.pop_front();
        }
        window.push_back(lateness(every).await);
        if window.len() < WINDOW {
            continue;
        }
        let late = median(&window);
        if late > cal.limit && warned.is_none_or(|w| w.elapsed() >= REPEAT) {
            warned = Some(Instant::now());
            let _ = tx.send(Event::Error {
                message: format!(
                    "client saturated: its event loop ran {:.1} ms late (median of {:.1} s; idle it ran {:.1} ms late), so chunk timestamps and sends may be that late (lower --concurrency/--rate, or run more clients)",
                    ms(late),
                    (every * WINDOW as u32).as_secs_f64(),
                    ms(cal.idle_p90),
                ),
                fatal: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn warnings(rx: &crossbeam_channel::Receiver<Event>) -> Vec<String> {
        rx.try_iter()
            .filter_map(|e| match e {
                Event::Error {
                    message,
                    fatal: false,
                } => Some(message),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_threshold_follows_the_idle_jitter_within_bounds() {
        let ms = Duration::from_millis;
        // A quiet machine: sub-millisecond lateness; the floor holds.
        let quiet = Calibration::from_samples(vec![Duration::from_micros(300); 32]);
        assert_eq!(quiet.limit, MIN_LIMIT);
        assert!(quiet.warning().is_none());
        // A shared machine: 3 ms now and then, 1 ms usually → 2 × p90 + 1.
        let mut shared = vec![ms(1); 28];
        shared.extend([ms(3); 4]);
        let c = Calibration::from_samples(shared);
        assert_eq!((c.idle_p90, c.limit), (ms(3), ms(7)));
        // A machine that is no place to measure: capped, and said.
        let bad = Calibration::from_samples(vec![ms(40); 32]);
        assert_eq!(bad.limit, MAX_LIMIT);
        assert!(bad.warning().is_some());
        assert_eq!(Calibration::from_samples(Vec::new()).limit, MIN_LIMIT);
    }

    #[test]
    fn a_median_is_not_moved_by_one_spike() {
        let ms = Duration::from_millis;
        let w: VecDeque<Duration> = [1, 1, 30, 1, 2, 1, 1, 1, 2, 1].map(ms).into();
        assert_eq!(median(&w), ms(1));
        let w: VecDeque<Duration> = [1, 3].map(ms).into();
        assert_eq!(median(&w), ms(2));
    }

    /// An idle client on this (shared) machine: calibrated, the alarm says nothing, though its
    /// timers run late now and then.
    #[test]
    fn an_idle_client_raises_no_alarm() {
        let rt = runtime();
        let (tx, rx) = crossbeam_channel::unbounded();
        rt.block_on(async {
            let cal = calibrate().await;
            let probe = tokio::spawn(watch(tx, Duration::from_millis(10), cal));
            tokio::time::sleep(Duration::from_millis(600)).await;
            probe.abort();
        });
        assert_eq!(warnings(&rx), Vec::<String>::new());
    }

    /// A client starved of CPU (its loop held by work, as thousands of busy streams would hold
    /// it): the alarm fires, once per `REPEAT`.
    #[test]
    fn a_starved_client_raises_the_alarm_once() {
        let rt = runtime();
        let (tx, rx) = crossbeam_channel::unbounded();
        rt.block_on(async {
            let cal = calibrate().await;
            let probe = tokio::spawn(watch(tx, Duration::from_millis(5), cal));
            // 60 ms of every 61 held: every probe is late by most of that, past any limit.
            let until = Instant::now() + Duration::from_millis(1500);
            while Instant::now() < until {
                let busy = Instant::now() + Duration::from_millis(60);
                while Instant::now() < busy {
                    std::hint::spin_loop();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            probe.abort();
        });
        let w = warnings(&rx);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("client saturated"), "{}", w[0]);
    }
}
