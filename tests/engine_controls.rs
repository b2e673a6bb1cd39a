//! One meaning of a control message in every engine (`engine::control`): a sweep's `EndCell`
//! drains (nothing new starts, what is in flight ends and counts, the run stops at its request
//! limit) in the candle worker, the http engine's request loop and its conversation loop; and
//! one request limit (`TrafficPlan::request_limit`) bounds a conversation run's turns. Each
//! engine runs for real: the candle worker on the synthetic tiny model, the http engine against
//! an in-process server (tests/common/traffic_server.rs).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::DType;
use common::traffic_server::{Timing, TrafficServer};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::engine::worker::{self, WorkerConfig};
use infertop::engine::workload::{PromptSource, Workload};
use infertop::event::{Control, Event, StopReason};
use infertop::model::{DeviceSpec, ModelSpec};
use infertop::traffic::len::LenSpec;
use infertop::traffic::{synthetic_conversations, Conversations, TrafficPlan, Turns};

fn server() -> TrafficServer {
    TrafficServer::start(Timing {
        base: Duration::from_millis(20),
        per_token: Duration::ZERO,
        itl: Duration::from_millis(5),
        max_model_len: 4096,
    })
}

fn http_config(url: &str, traffic: TrafficPlan, api: Api, concurrency: usize) -> HttpConfig {
    HttpConfig {
        endpoints: vec![Endpoint::parse(url).unwrap()],
        api,
        served_model: Some("m".into()),
        api_key: None,
        traffic,
        prompts: Default::default(),
        concurrency: Some(concurrency),
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(10),
        exact_output: true,
        chunk_usage: false,
        chunk_timings: false,
        record_tokens: false,
        preconnect: false,
        reset_prefix_cache: false,
        shape: Default::default(),
        start_at: None,
        prompt_salt: 0,
        cancel: None,
        canary: None,
    }
}

fn conversations(count: usize, turns: usize) -> Arc<Conversations> {
    Arc::new(Conversations {
        list: synthetic_conversations(count, turns, &LenSpec::Fixed(8), 1),
        turns: Turns::All,
        think: None,
        dataset: None,
        exact_lengths: false,
    })
}

/// Reads the engine's events until its `Finished` (at most 30 s); `on` sees each one as it
/// comes and may send controls.
fn collect(
    rx: &Receiver<Event>,
    ctl: &Sender<Control>,
    mut on: impl FnMut(&Event, &Sender<Control>),
) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    while Instant::now() < deadline {
        if let Ok(ev) = rx.recv_timeout(Duration::from_millis(50)) {
            on(&ev, ctl);
            let end = matches!(ev, Event::Finished(_));
            events.push(ev);
            if end {
                return events;
            }
        }
    }
    panic!("the engine did not finish within 30 s");
}

fn started(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RequestStarted { index, .. } => Some(*index),
            _ => None,
        })
        .collect()
}

fn done(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RequestDone(r) => Some(r.index),
            _ => None,
        })
        .collect()
}

fn stop(events: &[Event]) -> Option<StopReason> {
    events.iter().rev().find_map(|e| match e {
        Event::Finished(r) => Some(r.clone()),
        _ => None,
    })
}

/// Sends `EndCell` once `after` requests have completed.
fn end_cell_after(after: usize) -> impl FnMut(&Event, &Sender<Control>) {
    let mut completed = 0;
    move |ev, ctl| {
        if let Event::RequestDone(_) = ev {
            completed += 1;
            if completed == after {
                ctl.send(Control::EndCell).unwrap();
            }
        }
    }
}

/// Drained: every request that started completed (none was cut), the run stopped at its
/// request limit, and it stopped well before the traffic ran out.
fn assert_drained(events: &[Event], at_most: usize) {
    let (mut s, mut d) = (started(events), done(events));
    s.sort_unstable();
    d.sort_unstable();
    assert_eq!(s, d, "every request in flight at the drain completed");
    assert!(
        s.len() < at_most,
        "{} requests: the drain stopped new ones",
        s.len()
    );
    assert_eq!(stop(events), Some(StopReason::RequestLimit));
}

#[test]
fn end_cell_drains_the_http_request_loop() {
    let srv = server();
    let traffic = TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(8), 0);
    let (tx, rx) = bounded(1 << 16);
    let (ctl_tx, ctl_rx) = unbounded();
    let h = http::spawn(
        http_config(&srv.url, traffic, Api::Completions, 4),
        tx,
        ctl_rx,
    )
    .unwrap();
    let events = collect(&rx, &ctl_tx, end_cell_after(6));
    h.join().unwrap();
    assert!(done(&events).len() >= 6);
    // No limit of its own: only the drain ends it.
    assert_drained(&events, 100);
}

#[test]
fn end_cell_drains_conversations_at_their_next_turn() {
    let srv = server();
    let traffic = TrafficPlan {
        conversations: Some(conversations(6, 5)),
        ..TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(8), 0)
    };
    let (tx, rx) = bounded(1 << 16);
    let (ctl_tx, ctl_rx) = unbounded();
    let h = http::spawn(http_config(&srv.url, traffic, Api::Chat, 2), tx, ctl_rx).unwrap();
    let events = collect(&rx, &ctl_tx, end_cell_after(3));
    h.join().unwrap();
    // The turns in flight finished (they are no partial requests), no further turn started.
    assert_drained(&events, 30);
    // Two conversations in flight: a few turns may start while the message is on its way.
    assert!(done(&events).len() <= 3 + 2 * 3, "{:?}", done(&events));
}

#[test]
fn requests_bound_a_conversation_runs_turns() {
    let srv = server();
    let traffic = TrafficPlan {
        conversations: Some(conversations(3, 4)),
        requests: Some(5),
        ..TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(4), 0)
    };
    let (tx, rx) = bounded(1 << 16);
    let (ctl_tx, ctl_rx) = unbounded();
    let h = http::spawn(http_config(&srv.url, traffic, Api::Chat, 2), tx, ctl_rx).unwrap();
    let events = collect(&rx, &ctl_tx, |_, _| {});
    h.join().unwrap();
    assert_eq!(
        done(&events).len(),
        5,
        "5 requests, whatever the conversations hold"
    );
    assert_eq!(srv.seen().len(), 5);
    assert_eq!(stop(&events), Some(StopReason::RequestLimit));
}

#[test]
fn end_cell_lets_the_candle_request_in_flight_finish() {
    let cfg = WorkerConfig {
        model: ModelSpec::Synthetic {
            preset: "tiny".into(),
            seed: 0,
        },
        device: DeviceSpec::Cpu,
        dtype: DType::F32,
        threads: 1,
        traffic: TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(64), 0),
        workload: Workload {
            batch: 1,
            source: PromptSource::Synthetic,
            vocab: 0,
            tokenizer: None,
        },
        stop_at_eos: false,
        record_tokens: false,
        tokenizer: None,
        sampling: None,
        step_parts: None,
    };
    let (tx, rx) = bounded(1 << 16);
    let (ctl_tx, ctl_rx) = unbounded();
    let h = worker::spawn(cfg, tx, ctl_rx).unwrap();
    // Asked while request 1 is in flight (after its prefill): it still completes, and is the
    // last.
    let events = collect(&rx, &ctl_tx, |ev, ctl| {
        if let Event::PrefillDone { index: 1, .. } = ev {
            ctl.send(Control::EndCell).unwrap();
        }
    });
    h.join().unwrap();
    assert_eq!(done(&events), [0, 1]);
    assert_drained(&events, 3);
}
