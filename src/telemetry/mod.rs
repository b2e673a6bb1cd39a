//! Memory and device telemetry sampled beside the timings: sources (process memory, the
//! counting allocator, NVML) read by one sampler thread that sends `Event::Telemetry`.

use crate::event::Sample;

pub mod alloc;
pub mod devices;
pub mod nvml;
pub mod process;
pub mod sampler;

pub use devices::devices_report;
pub use sampler::{
    spawn, spawn_default, SamplerHandle, TelemetryDevice, CLIENT_INTERVAL, DEFAULT_INTERVAL,
};

/// One kind of telemetry. Tests use fake sources.
pub trait Source: Send {
    /// Short name for error messages, e.g. `"nvml"`.
    fn name(&self) -> &str;

    /// Fills the fields of `sample` this source knows. `Err` means the source is gone for good:
    /// the sampler reports it once (non-fatal `Event::Error`) and goes on without it.
    fn sample(&mut self, sample: &mut Sample) -> Result<(), String>;
}
