//! One telemetry sample of this process and its device.

use serde::{Deserialize, Serialize};

/// One telemetry sample. Every field is optional: a source that is unavailable leaves it `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// Process resident set size.
    pub rss_bytes: Option<u64>,
    /// Peak resident set size (VmHWM).
    pub rss_peak_bytes: Option<u64>,
    /// Allocator: bytes currently allocated (CPU counting allocator or CUDA used memory).
    pub alloc_bytes: Option<u64>,
    /// Allocator: peak since the current request started.
    pub alloc_peak_bytes: Option<u64>,
    /// Device memory used / total (NVML or CUDA context).
    pub device_used_bytes: Option<u64>,
    pub device_total_bytes: Option<u64>,
    /// This process's device memory (NVML running compute processes).
    pub process_device_bytes: Option<u64>,
    pub gpu_util_pct: Option<u32>,
    pub mem_util_pct: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub temperature_c: Option<u32>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    /// Clock throttle / event reasons, e.g. "power cap", "thermal".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle: Vec<String>,
    /// Total energy since the driver loaded, in joules.
    pub energy_j: Option<f64>,
    /// Processes holding memory on the device in use, most first (NVML): another job on the
    /// same GPU shows here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_processes: Vec<GpuProcess>,
    /// Why NVML is not there, once, e.g. "NVML unavailable: libnvidia-ml.so not found".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_unavailable: Option<String>,
}

/// One process on the GPU, as NVML lists it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// The process's name (`/proc/PID/comm`), or `?` where it cannot be read.
    pub name: String,
    /// Device memory it holds (`None` where NVML does not say, e.g. under MIG).
    pub bytes: Option<u64>,
}
