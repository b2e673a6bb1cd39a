//! The client's own figures as Prometheus text (`--metrics-listen`), so that the Grafana that
//! shows a server's `/metrics` shows the client's view beside it: histograms of TTFT, time to
//! answer, TPOT, ITL, E2E and the send lag, the TTFT's parts by the server's own timings,
//! request counts by outcome, and the requests in flight.
//!
//! Folded from the events on the consumer's side (never on the engine's path), into fixed
//! buckets: memory does not grow with the run. Every request counts, warmup included, as a
//! server's own `/metrics` counts them; a failed request is counted by its outcome and is no
//! latency sample. ITL counts each step as it arrives (so a request cut later still counted
//! its steps, as a server's histogram would).

use crate::event::{Event, RequestDone, RequestFailed};
use crate::util::exposition::{labels, Kind, Page};

/// Upper bounds of the latency buckets, in seconds (as vLLM's own histograms have them, a
/// little finer at the low end for ITL).
pub const LATENCY_BUCKETS_S: [f64; 22] = [
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
    0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0,
];

/// The metric names, `infertop_` as the agent's.
pub mod names {
    pub const TTFT: &str = "infertop_time_to_first_token_seconds";
    pub const TIME_TO_ANSWER: &str = "infertop_time_to_answer_seconds";
    pub const TPOT: &str = "infertop_time_per_output_token_seconds";
    pub const ITL: &str = "infertop_inter_token_latency_seconds";
    pub const E2E: &str = "infertop_e2e_request_latency_seconds";
    pub const SEND_LAG: &str = "infertop_send_lag_seconds";
    pub const SERVER_QUEUE: &str = "infertop_server_queue_seconds";
    pub const SERVER_PREFILL: &str = "infertop_server_prefill_seconds";
    pub const TTFT_REST: &str = "infertop_ttft_network_client_seconds";
    pub const REQUESTS: &str = "infertop_requests_total";
    pub const IN_FLIGHT: &str = "infertop_requests_in_flight";
}

/// A cumulative histogram over `LATENCY_BUCKETS_S`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyBuckets {
    /// Counts per bucket (not cumulative; the last is +Inf).
    counts: [u64; LATENCY_BUCKETS_S.len() + 1],
    sum: f64,
    count: u64,
}

impl LatencyBuckets {
    pub fn observe(&mut self, v: f64) {
        if !v.is_finite() || v < 0.0 {
            return;
        }
        let i = LATENCY_BUCKETS_S.partition_point(|&b| b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    fn write(&self, page: &mut Page, name: &str, help: &str) {
        page.histogram(name, help, &LATENCY_BUCKETS_S, &self.counts, self.sum);
    }
}

/// How a request ended, as the `outcome` label says it.
pub const OUTCOMES: [&str; 5] = ["ok", "http_error", "timeout", "stream_error", "error"];

fn outcome_of(f: &RequestFailed) -> usize {
    let reason = f.reason.as_str();
    if f.status.is_some() {
        1
    } else if reason.starts_with("timed out") {
        2
    } else if reason.starts_with("stream") || reason.starts_with("malformed") {
        3
    } else {
        4
    }
}

/// The time to the first answer token (text or a tool call): after the reasoning, when the
/// output reasoned; the TTFT otherwise. `None` for an output that never answered.
pub fn time_to_answer_s(r: &RequestDone) -> Option<f64> {
    match &r.parts {
        Some(p) => p.ttfa_s,
        None => Some(r.ttft_s),
    }
}

/// The client's figures, folded from its events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientExposition {
    ttft: LatencyBuckets,
    time_to_answer: LatencyBuckets,
    tpot: LatencyBuckets,
    itl: LatencyBuckets,
    e2e: LatencyBuckets,
    send_lag: LatencyBuckets,
    queue: LatencyBuckets,
    prefill: LatencyBuckets,
    rest: LatencyBuckets,
    outcomes: [u64; OUTCOMES.len()],
    started: u64,
}

impl ClientExposition {
    pub fn new() -> ClientExposition {
        ClientExposition::default()
    }

    /// One event, as the consumer gets it: O(1), no allocation.
    pub fn observe(&mut self, ev: &Event) {
        match ev {
            Event::RequestStarted { .. } => self.started += 1,
            Event::DecodeSteps(steps) => {
                for s in steps.iter() {
                    self.itl.observe(s.itl_s);
                }
            }
            Event::RequestDone(r) => {
                self.outcomes[0] += 1;
                self.ttft.observe(r.ttft_s);
                if let Some(t) = time_to_answer_s(r) {
                    self.time_to_answer.observe(t);
                }
                if let Some(t) = r.tpot_s {
                    self.tpot.observe(t);
                }
                self.e2e.observe(r.e2e_s);
                if let Some(c) = &r.client {
                    self.send_lag.observe(c.send_delay_s);
                    if let Some(t) = &c.server {
                        if let Some(q) = t.queue_s {
                            self.queue.observe(q);
                        }
                        if let Some(p) = t.prefill_s {
                            self.prefill.observe(p);
                        }
                        if let Some(r) = t.rest_s {
                            self.rest.observe(r);
                        }
                    }
                }
            }
            Event::RequestFailed(f) => self.outcomes[outcome_of(f)] += 1,
            _ => {}
        }
    }

    /// Requests started and not yet ended.
    pub fn in_flight(&self) -> u64 {
        self.started
            .saturating_sub(self.outcomes.iter().sum::<u64>())
    }

    /// The exposition text (format 0.0.4).
    pub fn render(&self) -> String {
        let mut page = Page::with_capacity(16 * 1024);
        let hists: [(&LatencyBuckets, &str, &str); 9] = [
            (
                &self.ttft,
                names::TTFT,
                "The client's time to first token (from the scheduled send).",
            ),
            (
                &self.time_to_answer,
                names::TIME_TO_ANSWER,
                "The client's time to the first answer token.",
            ),
            (
                &self.tpot,
                names::TPOT,
                "The client's time per output token, (E2E - TTFT) / (G - 1).",
            ),
            (
                &self.itl,
                names::ITL,
                "The client's interval between content chunks.",
            ),
            (
                &self.e2e,
                names::E2E,
                "The client's whole request, to the end of the stream.",
            ),
            (
                &self.send_lag,
                names::SEND_LAG,
                "When a request was due (or launched) to when it was sent.",
            ),
            (
                &self.queue,
                names::SERVER_QUEUE,
                "The server's queue time, as the server reported it per request.",
            ),
            (
                &self.prefill,
                names::SERVER_PREFILL,
                "The server's prefill time, as the server reported it per request.",
            ),
            (
                &self.rest,
                names::TTFT_REST,
                "The client's TTFT less the server's queue and prefill: network, HTTP and client.",
            ),
        ];
        for (h, name, help) in hists {
            h.write(&mut page, name, help);
        }
        let by_outcome: Vec<_> = OUTCOMES
            .iter()
            .zip(self.outcomes)
            .map(|(o, n)| (labels(&[("outcome", o)]), n as f64))
            .collect();
        page.family(
            names::REQUESTS,
            "Requests ended, by outcome.",
            Kind::Counter,
            &by_outcome,
        );
        page.single(
            names::IN_FLIGHT,
            "Requests started and not yet ended.",
            Kind::Gauge,
            self.in_flight() as f64,
        );
        page.finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{ClientDetail, ServerTimings};

    fn started() -> Event {
        Event::RequestStarted {
            index: 0,
            warmup: false,
            prompt_tokens: 8,
            output_tokens: 4,
            batch: 1,
        }
    }

    #[test]
    fn buckets_are_cumulative_and_counts_by_outcome() {
        let mut m = ClientExposition::new();
        for _ in 0..3 {
            m.observe(&started());
        }
        m.observe(&Event::RequestDone(Box::new(RequestDone {
            ttft_s: 0.03,
            tpot_s: Some(0.004),
            e2e_s: 0.05,
            client: Some(Box::new(ClientDetail {
                send_delay_s: 0.0001,
                server: Some(ServerTimings {
                    queue_s: Some(0.01),
                    prefill_s: Some(0.015),
                    rest_s: Some(0.005),
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..Default::default()
        })));
        m.observe(&Event::RequestFailed(Box::new(RequestFailed {
            index: 1,
            warmup: false,
            reason: "HTTP 503: busy".into(),
            status: Some(503),
            endpoint: None,
            elapsed_s: 0.1,
            model: None,
        })));
        m.observe(&Event::decode_step(0, 1, 0.004, None));
        let text = m.render();
        assert!(text.contains("infertop_time_to_first_token_seconds_bucket{le=\"0.025\"} 0\n"));
        assert!(text.contains("infertop_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("infertop_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n"));
        assert!(text.contains("infertop_time_to_first_token_seconds_sum 0.03\n"));
        assert!(text.contains("infertop_inter_token_latency_seconds_count 1\n"));
        assert!(
            text.contains("infertop_server_queue_seconds_bucket{le=\"0.01\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("infertop_requests_total{outcome=\"ok\"} 1\n"));
        assert!(text.contains("infertop_requests_total{outcome=\"http_error\"} 1\n"));
        assert!(text.contains("infertop_requests_in_flight 1\n"));
        // Every sample line is `name{labels} value` or `name value`, with a number.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(line.starts_with("infertop_"), "{line}");
        }
    }

    /// A value on a bucket's bound falls in it (Prometheus' `le`), NaN and negatives nowhere.
    #[test]
    fn bounds_are_inclusive() {
        let mut h = LatencyBuckets::default();
        h.observe(0.001);
        h.observe(f64::NAN);
        h.observe(-1.0);
        h.observe(1e9);
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[LATENCY_BUCKETS_S.len()], 1);
        assert_eq!(h.count(), 2);
    }
}
