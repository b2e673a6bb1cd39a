//! Where a server run's time went before the first token, per phase (the record's
//! `client.http`, see `event::HttpPhases`), and the time to second token: steady-state requests
//! (warmup excluded, since the last reset), numpy-exact over bounded windows like every other
//! table. TTFT is split by whether the request paid a connect while it was timed, so a connection
//! storm in the first wave shows as its own row instead of a tail of the whole.

use serde::{Deserialize, Serialize};

use super::{Summary, Window, REQUEST_WINDOW};
use crate::event::{ConnectionUse, RequestDone};

/// One row of the phases table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// TTFT of requests that opened their connection while timed.
    TtftNew,
    /// TTFT of requests on a kept (or preopened) connection.
    TtftKept,
    /// Name lookup, TCP and TLS of every connection opened (new and preopened).
    Dns,
    Tcp,
    Tls,
    /// The request's start → its last byte written.
    Sent,
    /// The request's start → the response's first byte (time to first byte).
    FirstByte,
    /// The response's first byte → the first content chunk (the TTFT after the first byte).
    FirstByteToToken,
    /// The first content chunk → the second.
    Ttst,
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::TtftNew,
        Phase::TtftKept,
        Phase::Dns,
        Phase::Tcp,
        Phase::Tls,
        Phase::Sent,
        Phase::FirstByte,
        Phase::FirstByteToToken,
        Phase::Ttst,
    ];

    /// The row's label in tables (report, summary, dashboard; at most 13 characters).
    pub fn label(self) -> &'static str {
        match self {
            Phase::TtftNew => "TTFT new conn",
            Phase::TtftKept => "TTFT kept",
            Phase::Dns => "DNS",
            Phase::Tcp => "TCP connect",
            Phase::Tls => "TLS",
            Phase::Sent => "sent",
            Phase::FirstByte => "first byte",
            Phase::FirstByteToToken => "byte → token",
            Phase::Ttst => "TTST",
        }
    }

    /// The key in the summary's JSON and CSV.
    pub fn key(self) -> &'static str {
        match self {
            Phase::TtftNew => "ttft_new_connection_s",
            Phase::TtftKept => "ttft_kept_connection_s",
            Phase::Dns => "dns_s",
            Phase::Tcp => "tcp_s",
            Phase::Tls => "tls_s",
            Phase::Sent => "sent_s",
            Phase::FirstByte => "first_byte_s",
            Phase::FirstByteToToken => "first_byte_to_token_s",
            Phase::Ttst => "ttst_s",
        }
    }

    /// What the row measures, for the report's table.
    pub fn meaning(self) -> &'static str {
        match self {
            Phase::TtftNew => "TTFT of requests that opened their connection while timed",
            Phase::TtftKept => "TTFT of requests on a kept or preopened connection",
            Phase::Dns => "name lookup of each connection opened",
            Phase::Tcp => "TCP handshake of each connection opened",
            Phase::Tls => "TLS handshake of each connection opened",
            Phase::Sent => "start → request written",
            Phase::FirstByte => "start → first byte of the response (TTFB)",
            Phase::FirstByteToToken => "first byte → first content chunk",
            Phase::Ttst => "first content chunk → second (time to second token)",
        }
    }
}

/// How many requests used each kind of connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCounts {
    pub new: u64,
    pub reused: u64,
    pub preopened: u64,
}

/// The phases at the end of a run (or of a record).
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseSummary {
    pub connections: ConnectionCounts,
    pub rows: Vec<(Phase, Summary)>,
}

impl PhaseSummary {
    pub fn get(&self, p: Phase) -> Summary {
        self.rows
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }
}

/// The fold behind `PhaseSummary`; allocates nothing until a request with phases arrives.
#[derive(Clone, Debug, Default)]
pub struct PhaseStats {
    windows: Option<Box<[Window; 9]>>,
    connections: ConnectionCounts,
}

impl PhaseStats {
    /// A completed request; warmup and requests without phases are skipped.
    pub fn record_request(&mut self, r: &RequestDone) {
        let Some(client) = &r.client else { return };
        let Some(http) = &client.http else { return };
        if r.warmup {
            return;
        }
        let w = self
            .windows
            .get_or_insert_with(|| Box::new(std::array::from_fn(|_| Window::new(REQUEST_WINDOW))));
        let mut push = |p: Phase, v: Option<f64>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                w[p as usize].push(v);
            }
        };
        match http.connection {
            ConnectionUse::New => {
                self.connections.new += 1;
                push(Phase::TtftNew, Some(r.ttft_s));
            }
            ConnectionUse::Reused => {
                self.connections.reused += 1;
                push(Phase::TtftKept, Some(r.ttft_s));
            }
            ConnectionUse::Preopened => {
                self.connections.preopened += 1;
                push(Phase::TtftKept, Some(r.ttft_s));
            }
            ConnectionUse::Other => {}
        }
        push(Phase::Dns, http.dns_s);
        push(Phase::Tcp, http.tcp_s);
        push(Phase::Tls, http.tls_s);
        push(Phase::Sent, http.sent_s);
        push(Phase::FirstByte, http.first_byte_s);
        push(
            Phase::FirstByteToToken,
            http.first_byte_s.map(|b| (r.ttft_s - b).max(0.0)),
        );
        push(Phase::Ttst, client.ttst_s);
    }

    /// Whether a request with phases has been counted (a server run, since the last reset).
    pub fn has_samples(&self) -> bool {
        self.windows.is_some()
    }

    /// Statistics reset (`r`): everything starts again.
    pub fn reset(&mut self) {
        *self = PhaseStats::default();
    }

    /// `None` until a steady request with phases has been seen (the candle engine, old records).
    pub fn summary(&self) -> Option<PhaseSummary> {
        let w = self.windows.as_ref()?;
        Some(PhaseSummary {
            connections: self.connections,
            rows: Phase::ALL
                .iter()
                .map(|&p| (p, w[p as usize].summary()))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::{ClientDetail, HttpPhases};

    fn done(index: u64, ttft_s: f64, connection: ConnectionUse, warmup: bool) -> RequestDone {
        let new = connection != ConnectionUse::Reused;
        RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 8,
            output_tokens: 4,
            ttft_s,
            tpot_s: Some(0.01),
            e2e_s: ttft_s + 0.03,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: String::new(),
            tokens: None,
            text: None,
            client: Some(Box::new(ClientDetail {
                endpoint: "http://a".into(),
                http: Some(HttpPhases {
                    connection,
                    dns_s: None,
                    tcp_s: new.then_some(0.002),
                    tls_s: None,
                    connected_s: 0.001,
                    sent_s: Some(0.0015),
                    first_byte_s: Some(0.004),
                    attempts: 1,
                }),
                ttst_s: Some(0.011),
                ..Default::default()
            })),
            origin: None,
            model: None,
            parts: None,
        }
    }

    #[test]
    fn ttft_is_split_by_connection_and_phases_are_counted_once_each() {
        let mut s = PhaseStats::default();
        assert!(s.summary().is_none());
        s.record_request(&done(0, 9.0, ConnectionUse::New, true));
        s.record_request(&done(1, 0.250, ConnectionUse::New, false));
        s.record_request(&done(2, 0.150, ConnectionUse::Preopened, false));
        for i in 3..10 {
            s.record_request(&done(
                i,
                0.100 + i as f64 * 0.001,
                ConnectionUse::Reused,
                false,
            ));
        }
        let sum = s.summary().unwrap();
        assert_eq!(
            sum.connections,
            ConnectionCounts {
                new: 1,
                reused: 7,
                preopened: 1
            }
        );
        let new = sum.get(Phase::TtftNew);
        assert_eq!((new.n, new.max), (1, 0.250), "warmup left out");
        assert_eq!(sum.get(Phase::TtftKept).n, 8);
        // The opening is counted for the new and the preopened connection, not the kept ones.
        assert_eq!(sum.get(Phase::Tcp).n, 2);
        assert_eq!(sum.get(Phase::Dns).n, 0);
        assert_eq!(sum.get(Phase::FirstByte).n, 9);
        // numpy: np.percentile([0.103, ..., 0.109, 0.150, 0.250], 50) == 0.107
        assert!((sum.get(Phase::FirstByteToToken).p50 - (0.107 - 0.004)).abs() < 1e-12);
        assert_eq!(sum.get(Phase::Ttst).p50, 0.011);
        s.reset();
        assert!(s.summary().is_none());
    }
}
