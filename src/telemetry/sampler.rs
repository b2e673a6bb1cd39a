//! The telemetry thread: samples its sources every interval and sends `Event::Telemetry` on the
//! same channel as the worker's events.
//!
//! It never touches the worker: it reads `/proc`, NVML and the allocator's atomic counters
//! (Relaxed loads), so sampling costs the measured thread nothing. Ticks are scheduled from a
//! fixed start (`crossbeam_channel::tick`), so the cadence does not drift with sampling time; a
//! tick missed while a slow NVML call runs is dropped, not queued.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver, Sender};

use super::{alloc, nvml, process, Source};
use crate::event::Event;
use crate::event::Sample;

/// `--sample-interval` default: fine enough to see a device's memory move within a request.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// `--sample-interval` default of a server run without `--telemetry-gpu`, whose samples are
/// only the client's own memory: at one stream, ten a second cost the client a fifth as much
/// again as reading its chunks (BENCHMARKS, "The client's cost at one stream").
pub const CLIENT_INTERVAL: Duration = Duration::from_secs(1);

/// Shorter intervals are raised to this: a zero interval would spin a core.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// Name of the sampler thread, as seen in `top -H` and debuggers.
pub const THREAD_NAME: &str = "infertop-telemetry";

/// The device the run uses, which decides the sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TelemetryDevice {
    Cpu,
    /// CUDA device ordinal, as candle's `Device::new_cuda(ordinal)`.
    Cuda(usize),
    /// A GPU by its NVML index (as nvidia-smi numbers them), watched beside a run that does
    /// not compute on it: a CPU run, or a server on this machine (`--telemetry-gpu`).
    Gpu(u32),
}

/// Resident set size and its peak.
pub struct ProcessSource;

impl Source for ProcessSource {
    fn name(&self) -> &str {
        "process"
    }

    fn sample(&mut self, sample: &mut Sample) -> Result<(), String> {
        let mem = process::read();
        sample.rss_bytes = mem.rss_bytes;
        sample.rss_peak_bytes = mem.rss_peak_bytes;
        Ok(())
    }
}

/// The counting allocator's current bytes and the peak since the worker's last `reset_peak`.
pub struct AllocSource;

impl Source for AllocSource {
    fn name(&self) -> &str {
        "allocator"
    }

    fn sample(&mut self, sample: &mut Sample) -> Result<(), String> {
        sample.alloc_bytes = Some(alloc::current_bytes());
        sample.alloc_peak_bytes = Some(alloc::peak_bytes());
        Ok(())
    }
}

/// Stands in for NVML when it could not be opened: says why in the first sample only.
pub struct NvmlUnavailable {
    message: Option<String>,
}

impl NvmlUnavailable {
    pub fn new(reason: &str) -> Self {
        Self {
            message: Some(nvml::unavailable_message(reason)),
        }
    }
}

impl Source for NvmlUnavailable {
    fn name(&self) -> &str {
        "nvml"
    }

    fn sample(&mut self, sample: &mut Sample) -> Result<(), String> {
        if let Some(message) = self.message.take() {
            sample.nvml_unavailable = Some(message);
        }
        Ok(())
    }
}

/// Stops the sampler thread when `stop` is called or the handle is dropped, and waits for it, so
/// no sample is sent after either returns.
#[must_use = "dropping the handle stops the sampler"]
pub struct SamplerHandle {
    stop_tx: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl SamplerHandle {
    /// Stops sampling and joins the thread. Returns within one source read (a few ms at most).
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Whether the thread is still sampling (it ends early when the receiver is gone).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    fn shutdown(&mut self) {
        // Dropping the sender disconnects the stop channel, which wakes the thread's `select!`.
        self.stop_tx.take();
        if let Some(thread) = self.thread.take() {
            // A panicked sampler has already reported through the panic hook; nothing to add.
            let _ = thread.join();
        }
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts sampling `sources` every `interval` on the `infertop-telemetry` thread. The first
/// sample is taken at once; `t_s` is seconds since `run_start`.
pub fn spawn(
    interval: Duration,
    sources: Vec<Box<dyn Source>>,
    tx: Sender<Event>,
    run_start: Instant,
) -> SamplerHandle {
    spawn_with(interval, move || sources, tx, run_start)
}

/// Starts the sampler with the sources for `device`: process memory and the counting allocator,
/// plus NVML for a GPU (or a note saying why NVML is unavailable). NVML is opened on the
/// sampler thread, since initialising it can take a while on a GPU without persistence mode.
pub fn spawn_default(
    device: TelemetryDevice,
    interval: Duration,
    tx: Sender<Event>,
    run_start: Instant,
) -> SamplerHandle {
    spawn_with(interval, move || default_sources(device), tx, run_start)
}

/// The sources `spawn_default` uses for `device`.
pub fn default_sources(device: TelemetryDevice) -> Vec<Box<dyn Source>> {
    let mut sources: Vec<Box<dyn Source>> = vec![Box::new(ProcessSource), Box::new(AllocSource)];
    let opened = match device {
        TelemetryDevice::Cpu => return sources,
        TelemetryDevice::Cuda(ordinal) => nvml::NvmlSource::for_cuda_ordinal(ordinal),
        TelemetryDevice::Gpu(index) => {
            nvml::NvmlSource::open_ref(&nvml::NvmlDeviceRef::Index(index))
        }
    };
    match opened {
        Ok(source) => sources.push(Box::new(source)),
        Err(reason) => sources.push(Box::new(NvmlUnavailable::new(&reason))),
    }
    sources
}

fn spawn_with(
    interval: Duration,
    make_sources: impl FnOnce() -> Vec<Box<dyn Source>> + Send + 'static,
    tx: Sender<Event>,
    run_start: Instant,
) -> SamplerHandle {
    let interval = interval.max(MIN_INTERVAL);
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let error_tx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || run(interval, make_sources(), &tx, &stop_rx, run_start));
    match spawned {
        Ok(thread) => SamplerHandle {
            stop_tx: Some(stop_tx),
            thread: Some(thread),
        },
        Err(e) => {
            // Telemetry is an extra: without a thread the run goes on unsampled.
            let _ = error_tx.send(Event::Error {
                message: format!("telemetry: cannot start the sampler thread: {e}"),
                fatal: false,
            });
            SamplerHandle {
                stop_tx: None,
                thread: None,
            }
        }
    }
}

fn run(
    interval: Duration,
    mut sources: Vec<Box<dyn Source>>,
    tx: &Sender<Event>,
    stop_rx: &Receiver<()>,
    run_start: Instant,
) {
    let ticker = crossbeam_channel::tick(interval);
    loop {
        if take_sample(&mut sources, tx, run_start).is_err() {
            return; // The consumers are gone.
        }
        select! {
            recv(stop_rx) -> _ => return,
            recv(ticker) -> _ => {}
        }
    }
}

/// Reads every source into one sample and sends it. Sources that fail are reported and dropped.
/// `Err` when the channel is closed.
fn take_sample(
    sources: &mut Vec<Box<dyn Source>>,
    tx: &Sender<Event>,
    run_start: Instant,
) -> Result<(), crossbeam_channel::SendError<Event>> {
    let mut sample = Sample {
        t_s: run_start.elapsed().as_secs_f64(),
        ..Sample::default()
    };
    let mut failures = Vec::new();
    sources.retain_mut(|source| match source.sample(&mut sample) {
        Ok(()) => true,
        Err(reason) => {
            failures.push(format!(
                "telemetry: {} stopped, going on without it: {reason}",
                source.name()
            ));
            false
        }
    });
    for message in failures {
        tx.send(Event::Error {
            message,
            fatal: false,
        })?;
    }
    tx.send(Event::Telemetry(Box::new(sample)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sources_try_nvml_only_for_a_gpu() {
        let names = |d| {
            default_sources(d)
                .iter()
                .map(|s| s.name().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(TelemetryDevice::Cpu), vec!["process", "allocator"]);
        assert_eq!(
            names(TelemetryDevice::Cuda(0)),
            vec!["process", "allocator", "nvml"]
        );
        assert_eq!(
            names(TelemetryDevice::Gpu(1)),
            vec!["process", "allocator", "nvml"]
        );
    }

    #[test]
    fn alloc_source_reads_the_counters() {
        let mut sample = Sample::default();
        AllocSource.sample(&mut sample).unwrap();
        let current = sample.alloc_bytes.unwrap();
        let peak = sample.alloc_peak_bytes.unwrap();
        assert!(current > 0, "the test harness has allocated");
        assert!(peak > 0);
    }
}
