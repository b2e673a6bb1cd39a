//! This machine's clock against a reference's, from the reference's `Date` header: how far the
//! generators of one run (`--shard`) are apart, so that `--start-at` starts them together and
//! the merged views line their records up on one clock.
//!
//! A `Date` says the reference's clock in whole seconds, read somewhere between the probe's
//! send and its answer: each probe bounds the offset (reference − local) to
//! `[date − received, date + 1 − sent]`, and the bounds of every probe together narrow it to
//! where the reference's second turns over. Probes go every 20 ms until one sees the second
//! turn (a window of about 20 ms), then every half millisecond (or back to back) across the
//! window of the next turn, which leaves the offset known to about a round trip: a
//! millisecond or less on one network, in about two seconds of probing (`Prober`).
//!
//! A server that renders its `Date` for every response (hyper, nginx, Python's http.server)
//! turns its second on time; one that caches it for a tick turns it late by as much for every
//! generator, so the generators still agree with each other to within the probes.

use std::time::{Duration, Instant, SystemTime};

/// The reference clock less this machine's, as measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Offset {
    /// Seconds to add to this machine's clock to read the reference's.
    pub offset_s: f64,
    /// The offset is known to within ± this.
    pub uncertainty_s: f64,
    /// Probes sent.
    pub probes: u32,
}

/// Why no offset came back.
#[derive(Debug, PartialEq)]
pub enum ClockError {
    /// A signal asked to stop while probing.
    Stopped,
    /// One line: what failed, and what to do.
    Failed(String),
}

/// What the probes so far say of the offset: it lies in `[lo, hi]`.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    lo: f64,
    hi: f64,
    probes: u32,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
            probes: 0,
        }
    }
}

impl Bounds {
    /// A probe sent at `sent` and answered at `received` (this machine's unix seconds) whose
    /// `Date` said `date` (the reference's unix seconds, whole: its clock was somewhere in
    /// `[date, date + 1)` between the two).
    pub fn observe(&mut self, sent: f64, received: f64, date: i64) {
        let date = date as f64;
        self.lo = self.lo.max(date - received);
        self.hi = self.hi.min(date + 1.0 - sent);
        self.probes += 1;
    }

    /// The width of the interval (infinite before the first probe; negative when the probes
    /// disagree: the reference's clock stepped, or its `Date` lags).
    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }

    /// The offset the probes say, if they agree.
    pub fn offset(&self) -> Option<Offset> {
        let width = self.width();
        (width.is_finite() && width >= 0.0).then(|| Offset {
            offset_s: (self.lo + self.hi) / 2.0,
            uncertainty_s: width / 2.0,
            probes: self.probes,
        })
    }
}

/// Probes every this long until one sees the reference's second turn.
const COARSE_GAP_S: f64 = 0.020;
/// Then every this long across the window of its next turn (or back to back, when a round
/// trip is longer).
const FINE_GAP_S: f64 = 0.000_5;
/// The fine window reaches this far beyond what the coarse probes left.
const FINE_MARGIN_S: f64 = 0.002;
/// A fine window that leaves the offset wider than this is probed again at the next turn.
const REFINE_ABOVE_S: f64 = 0.002;
/// Probing ends after this long whatever it has found (a slow reference).
const GIVE_UP_S: f64 = 3.5;

/// When to send the next probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// At this local unix time (now, or later).
    At(f64),
    Done,
}

/// The probes' plan: coarse until the reference's second is seen to turn, then fine across
/// the window of its next turn. Pure: the caller says the time and sends the probes.
#[derive(Clone, Debug)]
pub struct Prober {
    pub bounds: Bounds,
    started: f64,
    last_sent: Option<f64>,
    /// The first probe's date, and whether a later one has seen the second turn.
    first_date: Option<i64>,
    turned: bool,
    /// The window (local unix times) of the turn being probed finely.
    fine: Option<(f64, f64)>,
}

impl Prober {
    pub fn new(now: f64) -> Prober {
        Prober {
            bounds: Bounds::default(),
            started: now,
            last_sent: None,
            first_date: None,
            turned: false,
            fine: None,
        }
    }

    /// When the next probe goes, at `now`.
    pub fn next(&mut self, now: f64) -> Next {
        if now - self.started > GIVE_UP_S || self.bounds.width() < 0.0 {
            return Next::Done;
        }
        let after = |gap: f64| self.last_sent.map_or(now, |t| now.max(t + gap));
        if let Some((from, to)) = self.fine {
            if now <= to {
                return Next::At(after(FINE_GAP_S).max(from));
            }
            // A window whose probes were held up (a busy machine) is probed again at the
            // next turn, while there is time.
            let again = self.bounds.width() > REFINE_ABOVE_S
                && now + 1.0 + (to - from) < self.started + GIVE_UP_S;
            if !again {
                return Next::Done;
            }
        } else if !self.turned {
            return Next::At(after(COARSE_GAP_S));
        }
        // The reference's clock reaches second `s` at local time `s − offset`, somewhere in
        // `[s − hi, s − lo]`: the first such window still ahead is probed finely.
        let (lo, hi) = (self.bounds.lo, self.bounds.hi);
        let s = (now + hi + FINE_MARGIN_S + 0.005).ceil();
        let window = (s - hi - FINE_MARGIN_S, s - lo + FINE_MARGIN_S);
        self.fine = Some(window);
        Next::At(window.0)
    }

    /// A probe went at `sent`, answered at `received` with `date`.
    pub fn observe(&mut self, sent: f64, received: f64, date: i64) {
        self.last_sent = Some(sent);
        self.turned |= *self.first_date.get_or_insert(date) != date;
        self.bounds.observe(sent, received, date);
    }
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110's IMF-fixdate) as unix seconds.
pub fn parse_http_date(text: &str) -> Option<i64> {
    use time::format_description::well_known::Rfc2822;
    time::OffsetDateTime::parse(text.trim(), &Rfc2822)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// This machine's clock as unix seconds, read through the monotonic clock from one reading of
/// the wall clock, so that a step of the wall clock while probing does not skew the probes.
struct LocalClock {
    at: Instant,
    unix_s: f64,
}

impl LocalClock {
    fn new() -> LocalClock {
        LocalClock {
            at: Instant::now(),
            unix_s: unix_s(SystemTime::now()),
        }
    }

    fn now(&self) -> f64 {
        self.unix_s + self.at.elapsed().as_secs_f64()
    }
}

/// `t` as unix seconds (negative before 1970).
pub fn unix_s(t: SystemTime) -> f64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Unix seconds as a time of this machine's clock.
pub fn system_time(unix_s: f64) -> SystemTime {
    let d = Duration::from_secs_f64(unix_s.abs().min(1e12));
    if unix_s >= 0.0 {
        SystemTime::UNIX_EPOCH + d
    } else {
        SystemTime::UNIX_EPOCH
            .checked_sub(d)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// Measures the offset against `url`'s `Date` header (any status: an error page carries one
/// too), probing as `Prober` plans, one probe at a time; `stop` is asked between probes.
async fn measure(
    client: &reqwest::Client,
    url: &reqwest::Url,
    stop: &dyn Fn() -> bool,
) -> Result<Offset, ClockError> {
    let shown = without_credentials(url);
    let clock = LocalClock::new();
    let mut prober = Prober::new(clock.now());
    loop {
        if stop() {
            return Err(ClockError::Stopped);
        }
        let now = clock.now();
        match prober.next(now) {
            Next::Done => break,
            // The runtime's timer counts whole milliseconds: a shorter wait is slept here
            // (the runtime runs nothing else meanwhile).
            Next::At(t) if t - now < 0.002 => {
                std::thread::sleep(Duration::from_secs_f64((t - now).max(0.0)))
            }
            Next::At(t) => tokio::time::sleep(Duration::from_secs_f64(t - now)).await,
        }
        let sent = clock.now();
        let response = client
            .get(url.clone())
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .map_err(|e| {
                ClockError::Failed(format!(
                    "cannot read the clock of {shown} ({}); pass --clock-ref with a server this machine reaches, or local",
                    crate::util::http_error(e)
                ))
            })?;
        let received = clock.now();
        let date = response
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_http_date);
        // The body is read so that the connection is kept for the next probe.
        let _ = response.bytes().await;
        let Some(date) = date else {
            return Err(ClockError::Failed(format!(
                "{shown} answers without a Date header, so its clock cannot be read; pass --clock-ref with another server (any web server sends one), or local"
            )));
        };
        prober.observe(sent, received, date);
    }
    prober.bounds.offset().ok_or_else(|| {
        ClockError::Failed(format!(
            "the Date headers of {shown} disagree with each other (its clock stepped while probed, or it caches its Date); pass --clock-ref with another server, or local"
        ))
    })
}

/// `url` as messages and records show it: without a user name or password in it.
pub fn without_credentials(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string()
}

/// `measure` on a runtime of its own, for a session that has none yet.
pub fn measure_blocking(url: &reqwest::Url, stop: &dyn Fn() -> bool) -> Result<Offset, ClockError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClockError::Failed(format!("cannot start the http client runtime: {e}")))?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .map_err(|e| {
                ClockError::Failed(format!(
                    "cannot build the http client: {}",
                    crate::util::http_error(e)
                ))
            })?;
        measure(&client, url, stop).await
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A reference `offset` seconds ahead, answering after `rtt` (half each way): the prober
    /// finds the offset to within its uncertainty, and the uncertainty to about a round trip.
    fn simulate(offset: f64, rtt: f64, start: f64) -> (Offset, f64) {
        simulate_with(offset, start, &|_| rtt)
    }

    /// As `simulate`, the round trip of a probe sent `since` seconds after the start being
    /// `rtt(since)`.
    fn simulate_with(offset: f64, start: f64, rtt: &dyn Fn(f64) -> f64) -> (Offset, f64) {
        let mut now = start;
        let mut p = Prober::new(now);
        let mut rng = crate::util::SplitMix64::new(offset.to_bits());
        loop {
            match p.next(now) {
                Next::Done => break,
                Next::At(t) => now = now.max(t),
            }
            // Each round trip a little different.
            let trip = rtt(now - start) * (0.5 + (rng.next_u64() % 1000) as f64 / 1000.0);
            let sent = now;
            let rendered = sent + trip / 2.0 + offset;
            now = sent + trip;
            p.observe(sent, now, rendered.floor() as i64);
        }
        (p.bounds.offset().unwrap(), now - start)
    }

    #[test]
    fn the_offset_is_found_to_about_a_round_trip() {
        for (offset, rtt, start) in [
            (37.456_7, 0.000_3, 1_700_000_000.123),
            (-2.5, 0.001, 1_700_000_000.999),
            (0.0, 0.000_2, 1_700_000_000.5),
            (1_234.987_65, 0.004, 1_700_000_000.0),
        ] {
            let (o, took) = simulate(offset, rtt, start);
            assert!(
                (o.offset_s - offset).abs() <= o.uncertainty_s + 1e-9,
                "offset {offset}: found {o:?}"
            );
            assert!(
                o.uncertainty_s <= 1.5 * rtt + FINE_GAP_S,
                "offset {offset}, rtt {rtt}: ± {}",
                o.uncertainty_s
            );
            assert!(took < GIVE_UP_S, "probing took {took} s");
        }
    }

    /// Probes held up while the first fine window passes (a busy machine) leave it wide: the
    /// next turn is probed again, and the offset comes out narrow.
    #[test]
    fn a_window_held_up_is_probed_again() {
        for start in [1_700_000_000.05, 1_700_000_000.5, 1_700_000_000.95] {
            let slow_at_first = |since: f64| if since < 2.05 { 0.008 } else { 0.000_3 };
            let (o, took) = simulate_with(-0.75, start, &slow_at_first);
            assert!((o.offset_s + 0.75).abs() <= o.uncertainty_s, "{o:?}");
            assert!(o.uncertainty_s < 0.001, "start {start}: {o:?}");
            assert!(took < GIVE_UP_S + 0.1, "{took}");
        }
    }

    /// A slow reference (a round trip of 300 ms) still gives an offset, wider, within the
    /// time probing may take.
    #[test]
    fn a_slow_reference_gives_a_wider_offset_in_time() {
        let (o, took) = simulate(5.25, 0.3, 1_700_000_000.7);
        assert!((o.offset_s - 5.25).abs() <= o.uncertainty_s);
        assert!(o.uncertainty_s < 0.35, "{o:?}");
        assert!(took <= GIVE_UP_S + 0.7, "{took}");
    }

    #[test]
    fn probes_that_disagree_give_no_offset() {
        let mut b = Bounds::default();
        assert!(b.offset().is_none());
        b.observe(100.0, 100.001, 100);
        assert!(b.offset().is_some());
        // A date a whole second behind what the first said: the clock stepped.
        b.observe(100.5, 100.501, 98);
        assert!(b.offset().is_none());
    }

    #[test]
    fn http_dates_read_as_unix_seconds() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("yesterday"), None);
        assert_eq!(unix_s(system_time(1.5)), 1.5);
    }
}
