//! The event channel is bounded: a slow consumer slows the worker between steps but loses
//! nothing, and a consumer that goes away cannot leave the worker blocked.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use candle_core::DType;
use infertop::engine::worker::{self, WorkerConfig};
use infertop::engine::workload::{PromptSource, Workload};
use infertop::event::{Control, Event, StopReason};
use infertop::model::{DeviceSpec, ModelSpec};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;

fn config(requests: Option<u64>) -> WorkerConfig {
    WorkerConfig {
        model: ModelSpec::Synthetic {
            preset: "tiny".into(),
            seed: 0,
        },
        device: DeviceSpec::Cpu,
        dtype: DType::F32,
        threads: 1,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(8)),
            output: LenSpec::Fixed(8),
            seed: 0,
            warmup: 0,
            requests,
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
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
    }
}

#[test]
fn a_slow_consumer_loses_no_event() {
    let (tx, rx) = crossbeam_channel::bounded::<Event>(4);
    let (_ctl, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let handle = worker::spawn(config(Some(3)), tx, ctl_rx).expect("spawn");
    let (mut steps, mut done, mut finished) = (0, 0, None);
    for ev in rx.iter() {
        std::thread::sleep(Duration::from_millis(2));
        match ev {
            Event::DecodeSteps(s) => steps += s.len(),
            Event::RequestDone(_) => done += 1,
            Event::Finished(r) => {
                finished = Some(r);
                break;
            }
            _ => {}
        }
    }
    handle.join().expect("worker");
    assert_eq!(done, 3);
    assert_eq!(steps, 3 * 7, "every decode step arrives");
    assert_eq!(finished, Some(StopReason::RequestLimit));
}

#[test]
fn a_consumer_that_goes_away_does_not_block_the_worker() {
    let (tx, rx) = crossbeam_channel::bounded::<Event>(4);
    let (ctl, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let handle = worker::spawn(config(None), tx, ctl_rx).expect("spawn");
    // Let the queue fill: the worker is now blocked sending.
    let t0 = Instant::now();
    while !rx.is_full() {
        assert!(t0.elapsed() < Duration::from_secs(60), "queue never filled");
        std::thread::sleep(Duration::from_millis(10));
    }
    ctl.send(Control::Stop(StopReason::UserStop)).expect("stop");
    drop(rx);
    let t1 = Instant::now();
    while !handle.is_finished() {
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "worker still blocked after its consumer went away"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    handle.join().expect("worker");
}
