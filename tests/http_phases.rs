//! The HTTP phases every request to a server carries (its connection: new, reused or preopened;
//! DNS, TCP and TLS of a connection it opened; when it was sent and the first byte came back),
//! against the in-process streaming server with exact timings, on new and kept connections.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/stream_server.rs"]
mod stream_server;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::event::{ConnectionUse, Control, Event, HttpPhases, RequestDone};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;

const TTFT: Duration = Duration::from_millis(60);
const ITL: Duration = Duration::from_millis(8);

fn timing() -> stream_server::Timing {
    stream_server::Timing {
        ttft: TTFT,
        itl: ITL,
        tokens: 4,
    }
}

fn config(url: &str, concurrency: usize, requests: u64, preconnect: bool) -> HttpConfig {
    HttpConfig {
        endpoints: vec![Endpoint::parse(url).unwrap()],
        api: Api::Completions,
        served_model: Some("m".into()),
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(8)),
            output: LenSpec::Fixed(4),
            seed: 0,
            warmup: 0,
            requests: Some(requests),
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
        prompts: Default::default(),
        concurrency: Some(concurrency),
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(10),
        exact_output: true,
        chunk_usage: false,
        chunk_timings: false,
        record_tokens: false,
        preconnect,
        reset_prefix_cache: false,
        shape: Default::default(),
        start_at: None,
        prompt_salt: 0,
        cancel: None,
        canary: None,
    }
}

/// The completed requests of a run to its end (at most 30 s), in index order.
fn run(cfg: HttpConfig) -> Vec<RequestDone> {
    run_with_warnings(cfg).0
}

/// The completed requests and the warnings of a run.
fn run_with_warnings(cfg: HttpConfig) -> (Vec<RequestDone>, Vec<String>) {
    let (tx, rx) = bounded(1 << 16);
    let (_ctl, ctl_rx) = unbounded::<Control>();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut done, mut warnings) = (Vec::new(), Vec::new());
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Finished(_)) => break,
            Ok(Event::RequestDone(r)) => done.push(*r),
            Ok(Event::RequestFailed(f)) => panic!("{f:?}"),
            Ok(Event::Error { message, .. }) => warnings.push(message),
            _ => {}
        }
    }
    handle.join().unwrap();
    done.sort_by_key(|r| r.index);
    (done, warnings)
}

fn phases(r: &RequestDone) -> &HttpPhases {
    r.client.as_ref().unwrap().http.as_ref().unwrap()
}

fn uses(done: &[RequestDone]) -> Vec<ConnectionUse> {
    done.iter().map(|r| phases(r).connection).collect()
}

/// connected ≤ sent ≤ first byte ≤ first content chunk (the TTFT), all since the request's
/// start; the server writes its head at once and the first token after TTFT, so the first byte
/// comes well before the first chunk; TTST is the server's token interval.
fn assert_ordered(r: &RequestDone) {
    let p = phases(r);
    let sent = p.sent_s.unwrap();
    let first_byte = p.first_byte_s.unwrap();
    assert!(p.connected_s >= 0.0, "{p:?}");
    assert!(p.connected_s <= sent, "{p:?}");
    assert!(sent <= first_byte, "{p:?}");
    assert!(first_byte <= r.ttft_s, "{p:?} ttft {}", r.ttft_s);
    assert!(
        r.ttft_s - first_byte > TTFT.as_secs_f64() * 0.5,
        "the head came with the first token: {p:?} ttft {}",
        r.ttft_s
    );
    let ttst = r.client.as_ref().unwrap().ttst_s.unwrap();
    assert!(ttst >= ITL.as_secs_f64() * 0.5, "ttst {ttst}");
    if p.connection == ConnectionUse::New {
        // The connect is inside the request's time, before it was sent.
        let tcp = p.tcp_s.unwrap();
        assert!(tcp <= p.connected_s, "{p:?}");
    }
}

#[test]
fn new_connections_then_kept_ones_each_with_ordered_phases() {
    let server = stream_server::start_counted(timing(), true).unwrap();
    // `localhost` is looked up, so a new connection has a DNS phase.
    let url = server.url.replace("127.0.0.1", "localhost");
    let done = run(config(&url, 2, 6, false));
    assert_eq!(done.len(), 6);
    // Two for the requests, one for the model list (read before the run, by its own client).
    assert_eq!(server.connections.load(Ordering::SeqCst), 3);
    let uses = uses(&done);
    assert_eq!(
        uses.iter().filter(|u| **u == ConnectionUse::New).count(),
        2,
        "{uses:?}"
    );
    assert_eq!(
        uses.iter().filter(|u| **u == ConnectionUse::Reused).count(),
        4,
        "{uses:?}"
    );
    // The first two opened the connections the other four reused.
    assert_eq!(&uses[..2], &[ConnectionUse::New, ConnectionUse::New]);
    for r in &done {
        assert_ordered(r);
        let p = phases(r);
        match p.connection {
            ConnectionUse::New => {
                assert!(p.dns_s.is_some() && p.tcp_s.is_some(), "{p:?}");
                assert!(p.tls_s.is_none(), "plain http: {p:?}");
            }
            _ => assert!(
                p.dns_s.is_none() && p.tcp_s.is_none(),
                "a kept connection has no opening: {p:?}"
            ),
        }
    }
}

#[test]
fn preconnected_connections_serve_the_first_wave_and_say_so() {
    let server = stream_server::start_counted(timing(), true).unwrap();
    let done = run(config(&server.url, 3, 9, true));
    assert_eq!(done.len(), 9);
    assert_eq!(server.connections.load(Ordering::SeqCst), 3 + 1);
    let uses = uses(&done);
    assert_eq!(&uses[..3], &[ConnectionUse::Preopened; 3], "{uses:?}");
    assert!(
        uses[3..].iter().all(|u| *u == ConnectionUse::Reused),
        "{uses:?}"
    );
    for r in &done {
        assert_ordered(r);
        let p = phases(r);
        if p.connection == ConnectionUse::Preopened {
            // Its opening is recorded (an IP address: no lookup), though not in its time.
            assert!(p.tcp_s.is_some() && p.dns_s.is_none(), "{p:?}");
        }
    }
}

/// A server that closes every connection after its response (`Connection: close`): once two
/// have shown it, a connection is opened in the place of each it closes, so the later requests
/// start on one opened ahead (`preopened`, their connect out of their TTFT); at most one
/// request before that opens its own. Without preconnect, every request opens its own.
#[test]
fn a_server_that_closes_every_connection_gets_one_opened_ahead_of_each_request() {
    let server = stream_server::start_counted(timing(), false).unwrap();
    let (done, _) = run_with_warnings(config(&server.url, 2, 8, true));
    assert_eq!(done.len(), 8);
    let uses = uses(&done);
    assert_eq!(&uses[..2], &[ConnectionUse::Preopened; 2], "{uses:?}");
    let own = uses.iter().filter(|u| **u == ConnectionUse::New).count();
    assert!(own <= 1, "{uses:?}");
    assert!(
        uses[4..].iter().all(|u| *u == ConnectionUse::Preopened),
        "{uses:?}"
    );
    // Each request's connection, the model list's, and at most one spare per request in
    // flight left unused at the end.
    let opened = server.connections.load(Ordering::SeqCst);
    assert!((8 + 1..=8 + 1 + 2).contains(&opened), "{opened}");
    for r in &done {
        assert_ordered(r);
    }

    let server = stream_server::start_counted(timing(), false).unwrap();
    let done = run(config(&server.url, 2, 6, false));
    let own = self::uses(&done);
    assert!(own.iter().all(|u| *u == ConnectionUse::New), "{own:?}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 6 + 1);
}

/// One stream, a few chunks a second: the client is idle, and its saturation alarm (calibrated
/// against this machine's own timer jitter at the start) stays silent, however busy the machine.
#[test]
fn a_light_run_raises_no_saturation_alarm() {
    let server = stream_server::start_counted(timing(), true).unwrap();
    let (done, warnings) = run_with_warnings(config(&server.url, 1, 12, true));
    assert_eq!(done.len(), 12);
    assert!(
        !warnings.iter().any(|w| w.contains("client saturated")),
        "{warnings:?}"
    );
}
