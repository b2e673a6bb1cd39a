//! The load keys (`b` / `B`): a person sweeps by hand while watching. The candle engine doubles
//! and halves its batch, a server engine its concurrency, from the next request on, and both
//! say so with a `WorkloadChanged` event (the header, the events pane and the record show it).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use candle_core::DType;
use crossbeam_channel::{bounded, unbounded, Receiver};
use infertop::engine::worker::{self, WorkerConfig};
use infertop::engine::workload::{PromptSource, Workload};
use infertop::event::{Control, Event};
use infertop::model::{DeviceSpec, ModelSpec};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;

fn collect(rx: &Receiver<Event>) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut events = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Finished(r)) => {
                events.push(Event::Finished(r));
                return events;
            }
            Ok(e) => events.push(e),
            Err(_) => {}
        }
    }
    panic!("the engine did not finish within 60 s");
}

#[test]
fn the_candle_engine_doubles_and_halves_its_batch() {
    let cfg = WorkerConfig {
        model: ModelSpec::Synthetic {
            preset: "tiny".into(),
            seed: 0,
        },
        device: DeviceSpec::Cpu,
        dtype: DType::F32,
        threads: 1,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(8)),
            output: LenSpec::Fixed(4),
            seed: 0,
            warmup: 0,
            requests: Some(3),
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
        workload: Workload {
            batch: 2,
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
    let (ctl, ctl_rx) = unbounded();
    // Waiting before the first request: B twice, then b once → batch 4.
    ctl.send(Control::AdjustLoad(1)).unwrap();
    ctl.send(Control::AdjustLoad(1)).unwrap();
    ctl.send(Control::AdjustLoad(-1)).unwrap();
    let handle = worker::spawn(cfg, tx, ctl_rx).unwrap();
    let events = collect(&rx);
    handle.join().unwrap();
    let loads: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::WorkloadChanged(w) => Some(w.load_text()),
            _ => None,
        })
        .collect();
    assert_eq!(loads, ["batch 4", "batch 8", "batch 4"]);
    for e in &events {
        if let Event::RequestDone(r) = e {
            assert_eq!(
                r.batch, 4,
                "every request after the keys runs the new batch"
            );
        }
    }
}
