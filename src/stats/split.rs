//! Where each request's TTFT went, by the server's own word (`event::ServerTimings`): its
//! queue, its prefill, and the rest (network both ways, HTTP and the client), each with its
//! percentiles over the steady requests whose server said (warmup excluded, since the last
//! reset), numpy-exact over bounded windows like every other table; the server's decode time
//! and the prompt tokens it cached and computed beside them.
//!
//! Which part grows when the load grows: each part is fitted against the requests in flight
//! when the request ended (least squares over every steady request, O(1) memory), and the
//! part with the steepest rise is named. A run at one level of load has no slope to fit
//! (every request saw about the same number in flight) and names none; a sweep compares its
//! cells instead.

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::RequestDone;

/// Requests that must have been fitted before a part is said to grow.
pub const MIN_FIT: u64 = 8;

/// How much the TTFT must rise over one standard deviation of the load, as a share of its
/// mean, before a part is named as the one that grows.
pub const GROWTH_SHARE: f64 = 0.05;

/// One part of the split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Waiting for the server's scheduler.
    Queue,
    /// The server's prefill (scheduled → first token).
    Prefill,
    /// The client's TTFT less queue and prefill: network, HTTP and the client.
    #[serde(rename = "network_client")]
    Rest,
    /// The server's decode (first token → last): not in the TTFT, shown beside it.
    Decode,
}

impl Part {
    pub const ALL: [Part; 4] = [Part::Queue, Part::Prefill, Part::Rest, Part::Decode];
    /// The parts that add up to the TTFT, in time order.
    pub const TTFT: [Part; 3] = [Part::Queue, Part::Prefill, Part::Rest];

    /// The label in tables (at most 14 characters).
    pub fn label(self) -> &'static str {
        match self {
            Part::Queue => "queue",
            Part::Prefill => "prefill",
            Part::Rest => "network+client",
            Part::Decode => "decode",
        }
    }

    /// The key in JSON and CSV.
    pub fn key(self) -> &'static str {
        match self {
            Part::Queue => "queue_s",
            Part::Prefill => "prefill_s",
            Part::Rest => "network_client_s",
            Part::Decode => "decode_s",
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Part::Queue => "the server's queue (waiting to be scheduled)",
            Part::Prefill => "the server's prefill (scheduled → first token)",
            Part::Rest => "TTFT − queue − prefill: network, HTTP and the client",
            Part::Decode => "the server's decode (first → last token), not in the TTFT",
        }
    }

    /// This part of a request, when its server said it.
    pub fn of_request(self, r: &RequestDone) -> Option<f64> {
        self.of(r.client.as_ref()?.server.as_ref()?)
    }

    fn of(self, t: &crate::event::ServerTimings) -> Option<f64> {
        match self {
            Part::Queue => t.queue_s,
            Part::Prefill => t.prefill_s,
            Part::Rest => t.rest_s,
            Part::Decode => t.decode_s,
        }
        .filter(|v| v.is_finite())
    }
}

/// A least-squares line of y against x, from running sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Fit {
    n: u64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl Fit {
    fn push(&mut self, x: f64, y: f64) {
        self.n += 1;
        self.x += x;
        self.y += y;
        self.xx += x * x;
        self.xy += x * y;
    }

    /// The standard deviation of x.
    fn sd_x(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let n = self.n as f64;
        ((self.xx - self.x * self.x / n) / n).max(0.0).sqrt()
    }

    fn mean_y(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.y / self.n as f64
        }
    }

    /// dy/dx, when x varied.
    fn slope(&self) -> Option<f64> {
        if self.n < MIN_FIT {
            return None;
        }
        let n = self.n as f64;
        let var = self.xx - self.x * self.x / n;
        // x is a count of requests: a spread below a tenth of one per request is no spread.
        (var > 0.01 * n).then(|| (self.xy - self.x * self.y / n) / var)
    }
}

/// The split at the end of a run (or of a record), or of a sweep's cell.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitSummary {
    /// Steady requests whose server sent its timings.
    pub requests: u64,
    /// Which servers said it (`vllm`, `llama.cpp`, `sglang`).
    pub source: String,
    /// The TTFT of those requests, to set the parts against.
    pub ttft: Summary,
    pub queue: Summary,
    pub prefill: Summary,
    pub rest: Summary,
    pub decode: Summary,
    /// Prompt tokens the server said it cached and computed, summed.
    pub cached_tokens: u64,
    pub computed_tokens: u64,
    /// Seconds each part grows per request more in flight (`None`: the load did not vary).
    pub slope_s_per_request: Vec<(Part, Option<f64>)>,
    /// The part of the TTFT that grows most with the load, when one does.
    pub grows: Option<Part>,
}

impl SplitSummary {
    pub fn get(&self, p: Part) -> Summary {
        match p {
            Part::Queue => self.queue,
            Part::Prefill => self.prefill,
            Part::Rest => self.rest,
            Part::Decode => self.decode,
        }
    }

    /// The share of the TTFT's median each part's median is (of the three that add up to it).
    pub fn share(&self, p: Part) -> Option<f64> {
        let s = self.get(p);
        (s.n > 0 && self.ttft.n > 0 && self.ttft.p50 > 0.0).then(|| s.p50 / self.ttft.p50)
    }

    /// How much each of the TTFT's parts grew at percentile `q` (50, 90, 95 or 99) from `base`
    /// to `self`, in time order; a part either side did not report is left out.
    pub fn growth_since(&self, base: &SplitSummary, q: u8) -> Vec<(Part, f64)> {
        Part::TTFT
            .iter()
            .filter(|&&p| self.get(p).n > 0 && base.get(p).n > 0)
            .map(|&p| (p, self.get(p).percentile(q) - base.get(p).percentile(q)))
            .collect()
    }

    /// Of the TTFT's parts, the one whose percentile `q` grew most from `base` to `self`, with
    /// how much: what a rising load did to the TTFT, cell against cell.
    pub fn grew_most_since(&self, base: &SplitSummary, q: u8) -> Option<(Part, f64)> {
        self.growth_since(base, q)
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// JSON as the summary writes it (`ttft_split`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("requests".into(), self.requests.into());
        m.insert("source".into(), self.source.clone().into());
        m.insert("ttft_s".into(), self.ttft.to_json());
        for p in Part::ALL {
            m.insert(p.key().into(), self.get(p).to_json());
        }
        m.insert("cached_tokens".into(), self.cached_tokens.into());
        m.insert("computed_tokens".into(), self.computed_tokens.into());
        let mut slopes = serde_json::Map::new();
        for (p, s) in &self.slope_s_per_request {
            slopes.insert(p.key().into(), (*s).into());
        }
        m.insert("slope_s_per_request_in_flight".into(), slopes.into());
        m.insert("grows_with_load".into(), self.grows.map(|p| p.key()).into());
        serde_json::Value::Object(m)
    }
}

/// The last request's split, for the dashboard's bar.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LastSplit {
    pub index: u64,
    pub ttft_s: f64,
    pub queue_s: Option<f64>,
    pub prefill_s: Option<f64>,
    pub rest_s: Option<f64>,
}

/// The fold behind `SplitSummary`; allocates nothing until a request with server timings
/// arrives.
#[derive(Clone, Debug, Default)]
pub struct SplitStats {
    windows: Option<Box<[Window; 5]>>,
    fits: [Fit; 4],
    ttft_fit: Fit,
    requests: u64,
    cached_tokens: u64,
    computed_tokens: u64,
    source: String,
    /// The last steady request's split.
    pub last: Option<LastSplit>,
}

impl SplitStats {
    /// A completed request with `in_flight` requests in flight when it ended (itself
    /// included); warmup and requests whose server said nothing are skipped.
    pub fn record_request(&mut self, r: &RequestDone, in_flight: u64) {
        let Some(t) = r.client.as_ref().and_then(|c| c.server.as_ref()) else {
            return;
        };
        if r.warmup {
            return;
        }
        let w = self
            .windows
            .get_or_insert_with(|| Box::new(std::array::from_fn(|_| Window::new(REQUEST_WINDOW))));
        self.requests += 1;
        if self.source.is_empty() {
            self.source = t.source.clone();
        }
        let x = in_flight as f64;
        if r.ttft_s.is_finite() {
            w[4].push(r.ttft_s);
            self.ttft_fit.push(x, r.ttft_s);
        }
        for p in Part::ALL {
            if let Some(v) = p.of(t) {
                w[p as usize].push(v);
                self.fits[p as usize].push(x, v);
            }
        }
        self.cached_tokens += t.cached_tokens.unwrap_or(0) as u64;
        self.computed_tokens += t.computed_tokens.unwrap_or(0) as u64;
        self.last = Some(LastSplit {
            index: r.index,
            ttft_s: r.ttft_s,
            queue_s: Part::Queue.of(t),
            prefill_s: Part::Prefill.of(t),
            rest_s: Part::Rest.of(t),
        });
    }

    /// Whether a request with server timings has been counted since the last reset.
    pub fn has_samples(&self) -> bool {
        self.windows.is_some()
    }

    pub fn reset(&mut self) {
        *self = SplitStats::default();
    }

    /// `None` until a steady request whose server sent its timings has been seen.
    pub fn summary(&self) -> Option<SplitSummary> {
        let w = self.windows.as_ref()?;
        let slopes: Vec<(Part, Option<f64>)> = Part::ALL
            .iter()
            .map(|&p| (p, self.fits[p as usize].slope()))
            .collect();
        // Named only when the TTFT itself grows with the load: by at least a twentieth of its
        // mean over one standard deviation of the requests in flight (a drain's last few
        // requests alone are no rising load).
        let ttft_grows = self
            .ttft_fit
            .slope()
            .is_some_and(|s| s * self.ttft_fit.sd_x() >= GROWTH_SHARE * self.ttft_fit.mean_y());
        let grows = slopes
            .iter()
            .filter(|_| ttft_grows)
            .filter(|(p, _)| Part::TTFT.contains(p))
            .filter_map(|&(p, s)| s.filter(|s| *s > 0.0).map(|s| (p, s)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p);
        Some(SplitSummary {
            requests: self.requests,
            source: self.source.clone(),
            ttft: w[4].summary(),
            queue: w[Part::Queue as usize].summary(),
            prefill: w[Part::Prefill as usize].summary(),
            rest: w[Part::Rest as usize].summary(),
            decode: w[Part::Decode as usize].summary(),
            cached_tokens: self.cached_tokens,
            computed_tokens: self.computed_tokens,
            slope_s_per_request: slopes,
            grows,
        })
    }

    /// The TTFT's own slope against the requests in flight.
    pub fn ttft_slope(&self) -> Option<f64> {
        self.ttft_fit.slope()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{ClientDetail, ServerTimings};

    fn done(index: u64, queue: f64, prefill: f64, rest: f64, warmup: bool) -> RequestDone {
        let mut t = ServerTimings {
            source: "vllm".into(),
            queue_s: Some(queue),
            prefill_s: Some(prefill),
            decode_s: Some(0.1),
            cached_tokens: Some(16),
            computed_tokens: Some(48),
            ..Default::default()
        };
        let ttft = queue + prefill + rest;
        t.join_ttft(ttft);
        RequestDone {
            index,
            warmup,
            ttft_s: ttft,
            e2e_s: ttft + 0.1,
            client: Some(Box::new(ClientDetail {
                server: Some(t),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn the_parts_add_up_to_the_ttft_and_warmup_is_left_out() {
        let mut s = SplitStats::default();
        assert!(s.summary().is_none());
        s.record_request(&done(0, 5.0, 5.0, 5.0, true), 1);
        s.record_request(&RequestDone::default(), 1);
        for i in 1..=4 {
            s.record_request(&done(i, 0.010 * i as f64, 0.050, 0.002, false), 1);
        }
        let sum = s.summary().unwrap();
        assert_eq!((sum.requests, sum.queue.n, sum.ttft.n), (4, 4, 4));
        // numpy: np.percentile([0.01, 0.02, 0.03, 0.04], 50) == 0.025
        assert!((sum.queue.p50 - 0.025).abs() < 1e-12);
        assert!((sum.prefill.max - 0.050).abs() < 1e-12);
        assert!((sum.rest.p50 - 0.002).abs() < 1e-9);
        assert_eq!((sum.cached_tokens, sum.computed_tokens), (64, 192));
        assert_eq!(sum.grows, None, "one level of load: nothing to fit");
        assert_eq!(s.last.unwrap().index, 4);
    }

    /// Queue time that rises with the requests in flight is the part named; a prefill that
    /// does not is not.
    #[test]
    fn the_part_that_grows_with_the_load_is_named() {
        let mut s = SplitStats::default();
        for i in 0..40u64 {
            let in_flight = 1 + i % 8;
            let queue = 0.020 * (in_flight - 1) as f64;
            s.record_request(&done(i, queue, 0.050, 0.001, false), in_flight);
        }
        let sum = s.summary().unwrap();
        assert_eq!(sum.grows, Some(Part::Queue));
        let slope = |p| {
            sum.slope_s_per_request
                .iter()
                .find(|(q, _)| *q == p)
                .unwrap()
                .1
                .unwrap()
        };
        assert!((slope(Part::Queue) - 0.020).abs() < 1e-9);
        assert!(slope(Part::Prefill).abs() < 1e-9);
        assert!((s.ttft_slope().unwrap() - 0.020).abs() < 1e-9);
    }

    /// A load that barely varies (a drain's tail) with a TTFT that does not grow: nothing
    /// is named, whatever a part's tiny slope.
    #[test]
    fn a_ttft_that_does_not_grow_names_no_part() {
        let mut s = SplitStats::default();
        for i in 0..40u64 {
            let in_flight = if i % 10 == 9 { 1 } else { 2 };
            let rest = 0.001 + 0.00001 * in_flight as f64;
            s.record_request(&done(i, 0.0, 0.050, rest, false), in_flight);
        }
        assert_eq!(s.summary().unwrap().grows, None);
    }

    #[test]
    fn cells_say_which_part_grew_most() {
        let base = SplitSummary {
            queue: Summary::of(&[0.001]),
            prefill: Summary::of(&[0.050]),
            rest: Summary::of(&[0.002]),
            ..Default::default()
        };
        let loaded = SplitSummary {
            queue: Summary::of(&[0.300]),
            prefill: Summary::of(&[0.060]),
            rest: Summary::of(&[0.002]),
            ..Default::default()
        };
        let (p, by) = loaded.grew_most_since(&base, 50).unwrap();
        assert_eq!(p, Part::Queue);
        assert!((by - 0.299).abs() < 1e-12);
    }

    /// The part named depends on the percentile compared: a queue that only some requests
    /// wait in grows the tail, a slower prefill grows every request.
    #[test]
    fn the_part_that_grew_most_is_judged_at_the_percentile_asked() {
        let base = SplitSummary {
            queue: Summary::of(&[0.0; 100]),
            prefill: Summary::of(&[0.050; 100]),
            rest: Summary::of(&[0.002; 100]),
            ..Default::default()
        };
        // 90 requests do not wait, 10 wait 200 ms. numpy: np.percentile(q, 50) == 0.0,
        // np.percentile(q, 90) == 0.02, np.percentile(q, 95) == 0.2.
        let mut queue = vec![0.0; 90];
        queue.extend([0.200; 10]);
        let loaded = SplitSummary {
            queue: Summary::of(&queue),
            prefill: Summary::of(&[0.080; 100]),
            rest: Summary::of(&[0.002; 100]),
            ..Default::default()
        };
        let at = |q| loaded.grew_most_since(&base, q).unwrap();
        assert_eq!(at(50).0, Part::Prefill);
        assert!((at(50).1 - 0.030).abs() < 1e-12);
        assert_eq!(at(90).0, Part::Prefill, "p90: queue +20 ms, prefill +30 ms");
        assert_eq!(at(95).0, Part::Queue);
        assert!((at(95).1 - 0.200).abs() < 1e-12);
        assert_eq!(at(99).0, Part::Queue);
        let growth = loaded.growth_since(&base, 90);
        assert_eq!(growth.len(), 3);
        assert!((growth[0].1 - 0.020).abs() < 1e-12, "{growth:?}");
    }
}
