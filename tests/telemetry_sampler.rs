//! The sampler: cadence with a fake source, prompt stop, failing sources, the NVML-unavailable
//! path and the default sources on this machine.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError};
use infertop::event::Event;
use infertop::event::Sample;
use infertop::telemetry::nvml;
use infertop::telemetry::sampler::{spawn, spawn_default, TelemetryDevice};
use infertop::telemetry::Source;

/// Counts its calls and writes the count into `gpu_util_pct`; fails on call `fail_on`, if set.
struct FakeSource {
    calls: Arc<AtomicU32>,
    fail_on: Option<u32>,
}

impl Source for FakeSource {
    fn name(&self) -> &str {
        "fake"
    }

    fn sample(&mut self, sample: &mut Sample) -> Result<(), String> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if Some(n) == self.fail_on {
            return Err("device fell off the bus".into());
        }
        sample.gpu_util_pct = Some(n);
        Ok(())
    }
}

fn fake(fail_on: Option<u32>) -> (Box<dyn Source>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    (
        Box::new(FakeSource {
            calls: calls.clone(),
            fail_on,
        }),
        calls,
    )
}

fn telemetry(events: Vec<Event>) -> Vec<Sample> {
    events
        .into_iter()
        .filter_map(|e| match e {
            Event::Telemetry(s) => Some(*s),
            _ => None,
        })
        .collect()
}

fn drain(rx: &Receiver<Event>) -> Vec<Event> {
    rx.try_iter().collect()
}

#[test]
fn samples_at_its_cadence_and_stops_promptly() {
    let (tx, rx) = unbounded();
    let (source, calls) = fake(None);
    let handle = spawn(Duration::from_millis(20), vec![source], tx, Instant::now());
    std::thread::sleep(Duration::from_millis(300));

    let stop_at = Instant::now();
    handle.stop();
    let stop_took = stop_at.elapsed();
    assert!(
        stop_took < Duration::from_millis(100),
        "stop took {stop_took:?}"
    );

    let got = telemetry(drain(&rx));
    // One at once, then one per 20 ms: 16 in 300 ms. Generous for a loaded 2-core machine.
    assert!(
        (8..=18).contains(&got.len()),
        "{} samples in 300 ms",
        got.len()
    );
    assert_eq!(got.len() as u32, calls.load(Ordering::SeqCst));
    assert!(got[0].t_s < 0.05, "first sample at {} s", got[0].t_s);
    assert!(got.windows(2).all(|w| w[1].t_s > w[0].t_s), "t_s increases");
    // Ticks are scheduled from the start, so sampling time does not push later samples out.
    let last = got.last().map_or(0.0, |s| s.t_s);
    assert!(last < 0.32, "last sample at {last} s");

    // The thread has ended: the channel is disconnected and nothing more arrives.
    match rx.recv_timeout(Duration::from_millis(100)) {
        Err(RecvTimeoutError::Disconnected) => {}
        other => panic!("expected a closed channel after stop, got {other:?}"),
    }
    assert_eq!(calls.load(Ordering::SeqCst), got.len() as u32);
}

#[test]
fn dropping_the_handle_stops_it_and_so_does_a_closed_channel() {
    let (tx, rx) = unbounded();
    let (source, calls) = fake(None);
    let handle = spawn(Duration::from_millis(10), vec![source], tx, Instant::now());
    std::thread::sleep(Duration::from_millis(50));
    drop(handle);
    let after_drop = calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        after_drop,
        "no sampling after drop"
    );
    drop(rx);

    // The consumers going away ends the thread on its own.
    let (tx, rx) = unbounded();
    let (source, _calls) = fake(None);
    let handle = spawn(Duration::from_millis(10), vec![source], tx, Instant::now());
    drop(rx);
    let deadline = Instant::now() + Duration::from_secs(2);
    while handle.is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!handle.is_running(), "sampler outlived its receiver");
}

#[test]
fn a_failing_source_is_reported_once_and_the_rest_goes_on() {
    let (tx, rx) = unbounded();
    let (failing, failing_calls) = fake(Some(3));
    let (healthy, _) = fake(None);
    let handle = spawn(
        Duration::from_millis(10),
        vec![failing, healthy],
        tx,
        Instant::now(),
    );
    std::thread::sleep(Duration::from_millis(120));
    handle.stop();

    let events = drain(&rx);
    let errors: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Error { message, fatal } => Some((message.clone(), *fatal)),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(!errors[0].1, "telemetry errors are not fatal");
    assert!(
        errors[0].0.contains("fake") && errors[0].0.contains("fell off"),
        "{}",
        errors[0].0
    );
    assert_eq!(
        failing_calls.load(Ordering::SeqCst),
        3,
        "a failed source is not asked again"
    );
    let samples = telemetry(events);
    assert!(
        samples.len() > 5,
        "sampling went on: {} samples",
        samples.len()
    );
}

#[test]
fn nvml_unavailable_is_said_once_in_the_first_sample() {
    let (tx, rx) = unbounded();
    let handle = spawn_default(
        TelemetryDevice::Cuda(0),
        Duration::from_millis(10),
        tx,
        Instant::now(),
    );
    std::thread::sleep(Duration::from_millis(60));
    handle.stop();
    let events = drain(&rx);
    assert!(
        !events.iter().any(|e| matches!(e, Event::Error { .. })),
        "{events:?}"
    );
    let got = telemetry(events);
    assert!(got.len() >= 2, "{} samples", got.len());

    if nvml::init().is_ok() {
        // On a GPU machine: NVML fields are there instead.
        assert!(got[0].nvml_unavailable.is_none());
        assert!(got[0].device_total_bytes.is_some());
        return;
    }
    let reason = got[0]
        .nvml_unavailable
        .as_deref()
        .expect("first sample says why");
    assert!(
        reason.starts_with("NVML unavailable: ") && reason.len() > 20,
        "{reason}"
    );
    assert!(
        got[1..].iter().all(|s| s.nvml_unavailable.is_none()),
        "said once"
    );
    assert!(got
        .iter()
        .all(|s| s.device_used_bytes.is_none() && s.power_w.is_none()));
    // Process and allocator memory still come.
    assert!(got.iter().all(|s| s.alloc_bytes.is_some()));
}

#[cfg(target_os = "linux")]
#[test]
fn cpu_default_sources_fill_process_and_allocator_memory() {
    let (tx, rx) = unbounded();
    let handle = spawn_default(
        TelemetryDevice::Cpu,
        Duration::from_millis(10),
        tx,
        Instant::now(),
    );
    std::thread::sleep(Duration::from_millis(40));
    handle.stop();
    let got = telemetry(drain(&rx));
    assert!(!got.is_empty());
    for s in &got {
        let rss = s.rss_bytes.expect("rss");
        assert!(s.rss_peak_bytes.expect("hwm") >= rss);
        assert!(s.alloc_bytes.expect("alloc") > 0);
        assert!(s.alloc_peak_bytes.is_some());
        assert!(
            s.nvml_unavailable.is_none(),
            "NVML is not tried for CPU runs"
        );
    }
}
