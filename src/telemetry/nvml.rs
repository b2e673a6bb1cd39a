//! NVML source: device memory, utilisation, power, temperature, clocks, throttle reasons and the
//! energy counter for one GPU, read through `nvml-wrapper` (libnvidia-ml is loaded at run time).
//!
//! Every field is best effort: a query the device or driver does not support leaves its field
//! `None`. Only errors that mean the device or driver is gone (GPU lost, driver unloaded, ...)
//! fail the whole source, so the sampler reports them once and goes on without NVML.

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::Device;
pub use nvml_wrapper::Nvml;

use super::Source;
use crate::event::{GpuProcess, Sample};

/// The text every view shows when NVML cannot be used, e.g. "NVML unavailable: <reason>".
pub fn unavailable_message(reason: &str) -> String {
    format!("NVML unavailable: {reason}")
}

/// Names the NVML library to load instead of the system's `libnvidia-ml.so.1`: a driver
/// installed outside the loader's path, or the simulated library the tests build
/// (tests/nvml-sim).
pub const LIBRARY_ENV: &str = "INFERTOP_NVML_LIBRARY";

/// Opens NVML, keeping the reason when it cannot (no driver, no library, no permission): the
/// library `INFERTOP_NVML_LIBRARY` names, or the system's.
pub fn init() -> Result<Nvml, String> {
    let library = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty());
    let opened = match &library {
        Some(path) => Nvml::builder().lib_path(path).init(),
        None => Nvml::init(),
    };
    opened.map_err(|e| match e {
        // The loader's own message already names the library ("libnvidia-ml.so.1: cannot open
        // shared object file: ..."); the wrapper's prefix adds nothing.
        NvmlError::LibloadingError(e) => e.to_string(),
        e => match &library {
            Some(path) => format!("{e} ({LIBRARY_ENV}={})", path.to_string_lossy()),
            None => e.to_string(),
        },
    })
}

/// How many GPUs NVML lists (every GPU of the machine, whatever `CUDA_VISIBLE_DEVICES` says).
pub fn device_count(nvml: &Nvml) -> Result<u32, String> {
    nvml.device_count().map_err(|e| format!("NVML: {e}"))
}

/// How a CUDA ordinal names an NVML device once `CUDA_VISIBLE_DEVICES` is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NvmlDeviceRef {
    Index(u32),
    /// A UUID or UUID prefix such as `GPU-8f3c`, as `CUDA_VISIBLE_DEVICES` allows.
    UuidPrefix(String),
}

/// Maps a CUDA device ordinal to the NVML device it is, given `CUDA_VISIBLE_DEVICES`.
///
/// NVML numbers every GPU of the machine in PCI bus order and ignores `CUDA_VISIBLE_DEVICES`;
/// CUDA numbers only the visible ones. Without the variable the ordinal is taken as the NVML
/// index, which holds on machines with one GPU model (CUDA's default `FASTEST_FIRST` order can
/// differ from PCI order only between GPUs of different speeds; `CUDA_DEVICE_ORDER=PCI_BUS_ID`
/// makes them agree).
pub fn resolve_cuda_ordinal(
    ordinal: usize,
    cuda_visible_devices: Option<&str>,
) -> Result<NvmlDeviceRef, String> {
    let Some(visible) = cuda_visible_devices else {
        return u32::try_from(ordinal)
            .map(NvmlDeviceRef::Index)
            .map_err(|_| format!("CUDA device {ordinal} is out of range"));
    };
    let entry = visible
        .split(',')
        .map(str::trim)
        .nth(ordinal)
        .filter(|e| !e.is_empty())
        .ok_or_else(|| {
            format!("CUDA device {ordinal} is not in CUDA_VISIBLE_DEVICES={visible:?}")
        })?;
    if let Ok(index) = entry.parse::<u32>() {
        Ok(NvmlDeviceRef::Index(index))
    } else if entry.starts_with("GPU-") {
        Ok(NvmlDeviceRef::UuidPrefix(entry.to_string()))
    } else if entry.starts_with("MIG-") {
        Err(format!(
            "MIG instance {entry} has no per-instance NVML telemetry here"
        ))
    } else {
        Err(format!("cannot read CUDA_VISIBLE_DEVICES entry {entry:?}"))
    }
}

/// Finds the NVML index of a device reference.
fn find_index(nvml: &Nvml, device: &NvmlDeviceRef) -> Result<u32, String> {
    match device {
        NvmlDeviceRef::Index(index) => {
            nvml.device_by_index(*index)
                .map_err(|e| format!("NVML device {index}: {e}"))?;
            Ok(*index)
        }
        NvmlDeviceRef::UuidPrefix(prefix) => {
            let count = nvml.device_count().map_err(|e| e.to_string())?;
            (0..count)
                .find(|&i| {
                    nvml.device_by_index(i)
                        .and_then(|d| d.uuid())
                        .is_ok_and(|uuid| uuid.starts_with(prefix.as_str()))
                })
                .ok_or_else(|| format!("no NVML device with UUID {prefix}"))
        }
    }
}

/// Samples one GPU. Holds NVML open for the run.
pub struct NvmlSource {
    nvml: Nvml,
    index: u32,
    pid: u32,
}

impl NvmlSource {
    /// Opens the NVML device that CUDA calls `ordinal` in this process.
    pub fn for_cuda_ordinal(ordinal: usize) -> Result<Self, String> {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        Self::for_visible_devices(ordinal, visible.as_deref())
    }

    /// Opens the NVML device that CUDA calls `ordinal` when `CUDA_VISIBLE_DEVICES` is
    /// `cuda_visible_devices` (indices, or UUIDs and their prefixes, which NVML is asked for).
    pub fn for_visible_devices(
        ordinal: usize,
        cuda_visible_devices: Option<&str>,
    ) -> Result<Self, String> {
        Self::open_ref(&resolve_cuda_ordinal(ordinal, cuda_visible_devices)?)
    }

    /// The NVML index of the device it reads.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Opens NVML and the device `device` names.
    pub fn open_ref(device: &NvmlDeviceRef) -> Result<Self, String> {
        let nvml = init()?;
        let index = find_index(&nvml, device)?;
        let pid = std::process::id();
        Ok(Self { nvml, index, pid })
    }
}

impl Source for NvmlSource {
    fn name(&self) -> &str {
        "nvml"
    }

    fn sample(&mut self, sample: &mut Sample) -> Result<(), String> {
        read_index(&self.nvml, self.index, self.pid, sample).map_err(|e| e.message)
    }
}

/// Why a GPU's figures could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// In one line, e.g. "NVML: the GPU has fallen off the bus ...".
    pub message: String,
    /// NVML answered `NVML_ERROR_GPU_IS_LOST`: the GPU fell off the bus, no later call on it
    /// will answer, and each call on it can be slow to fail, so a reader stops asking it.
    pub gpu_lost: bool,
}

impl ReadError {
    fn of(prefix: &str, e: &NvmlError) -> ReadError {
        ReadError {
            message: format!("{prefix}{e}"),
            gpu_lost: matches!(e, NvmlError::GpuLost),
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Fills `sample` from the GPU NVML numbers `index`: the one read of a GPU's figures, shared
/// by the sampler and `infertop agent`. `pid` is the process whose GPU memory goes in
/// `process_device_bytes`. Per-field errors (not supported, no permission) leave the field
/// `None`; an error that means the device or driver is gone (GPU lost, ...) is returned,
/// with the fields read before it filled.
pub fn read_index(nvml: &Nvml, index: u32, pid: u32, sample: &mut Sample) -> Result<(), ReadError> {
    // The handle is looked up per read because `Device` borrows `Nvml`; NVML caches handles,
    // so this is a table lookup.
    let device = nvml
        .device_by_index(index)
        .map_err(|e| ReadError::of(&format!("NVML device {index}: "), &e))?;
    read_device(&device, pid, sample)
}

/// What names a GPU in a list of them: its name and UUID, `None` where NVML does not say.
pub fn identity(nvml: &Nvml, index: u32) -> (Option<String>, Option<String>) {
    match nvml.device_by_index(index) {
        Ok(device) => (device.name().ok(), device.uuid().ok()),
        Err(_) => (None, None),
    }
}

/// Fills `sample` from `device`. Per-field errors leave the field `None`; an error that means
/// the device or driver is gone is returned after the fields read before it are filled, and
/// nothing is asked of the device after it (on a GPU that fell off the bus each call can take
/// long to fail).
fn read_device(device: &Device<'_>, pid: u32, sample: &mut Sample) -> Result<(), ReadError> {
    let mut gone: Option<NvmlError> = None;
    let gone = &mut gone;

    // Memory first: a GPU that is gone is found before anything else is asked of it.
    if let Some(mem) = best_effort(gone, || device.memory_info()) {
        sample.device_used_bytes = Some(mem.used);
        sample.device_total_bytes = Some(mem.total);
    }
    if let Some(procs) = best_effort(gone, || device.running_compute_processes()) {
        sample.process_device_bytes = process_bytes(&procs, pid);
        sample.gpu_processes = gpu_processes(&procs, |pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|n| n.trim().to_string())
                .unwrap_or_else(|_| "?".to_string())
        });
    }
    if let Some(util) = best_effort(gone, || device.utilization_rates()) {
        sample.gpu_util_pct = Some(util.gpu);
        sample.mem_util_pct = Some(util.memory);
    }
    sample.power_w = best_effort(gone, || device.power_usage()).map(milli_to_unit);
    sample.power_limit_w = best_effort(gone, || device.enforced_power_limit()).map(milli_to_unit);
    sample.temperature_c = best_effort(gone, || device.temperature(TemperatureSensor::Gpu));
    sample.sm_clock_mhz = best_effort(gone, || device.clock_info(Clock::SM));
    sample.mem_clock_mhz = best_effort(gone, || device.clock_info(Clock::Memory));
    if let Some(reasons) = best_effort(gone, || device.current_throttle_reasons()) {
        sample.throttle = throttle_reasons(reasons);
    }
    sample.energy_j =
        best_effort(gone, || device.total_energy_consumption()).map(|mj| mj as f64 / 1000.0);

    match gone.take() {
        Some(e) => Err(ReadError::of("NVML: ", &e)),
        None => Ok(()),
    }
}

/// `read()`'s value on success. On error, `None`, and an error that means NVML can no longer
/// be used is kept in `gone`; once `gone` holds one, `read` is not called.
pub(super) fn best_effort<T>(
    gone: &mut Option<NvmlError>,
    read: impl FnOnce() -> Result<T, NvmlError>,
) -> Option<T> {
    if gone.is_some() {
        return None;
    }
    match read() {
        Ok(value) => Some(value),
        Err(e) => {
            if is_fatal(&e) {
                *gone = Some(e);
            }
            None
        }
    }
}

/// Errors after which no later query will work: the device fell off the bus, the driver went
/// away or was swapped under us. Anything else (not supported, no permission) is per-field.
pub fn is_fatal(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::GpuLost
            | NvmlError::Uninitialized
            | NvmlError::DriverNotLoaded
            | NvmlError::LibRmVersionMismatch
            | NvmlError::ResetRequired
    )
}

/// This process's GPU memory: the sum over its entries (one per MIG instance it uses). `None`
/// when the process is not listed, e.g. in a container whose PID namespace NVML does not see.
fn process_bytes(procs: &[ProcessInfo], pid: u32) -> Option<u64> {
    let mut found = false;
    let mut total = 0u64;
    for p in procs.iter().filter(|p| p.pid == pid) {
        if let UsedGpuMemory::Used(bytes) = p.used_gpu_memory {
            found = true;
            total = total.saturating_add(bytes);
        }
    }
    found.then_some(total)
}

/// Every process on the device with the memory it holds (its entries summed), most first.
fn gpu_processes(procs: &[ProcessInfo], name_of: impl Fn(u32) -> String) -> Vec<GpuProcess> {
    let mut out: Vec<GpuProcess> = Vec::new();
    for p in procs {
        let bytes = match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        };
        match out.iter_mut().find(|g| g.pid == p.pid) {
            Some(g) => {
                g.bytes = match (g.bytes, bytes) {
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    (a, b) => a.or(b),
                }
            }
            None => out.push(GpuProcess {
                pid: p.pid,
                name: name_of(p.pid),
                bytes,
            }),
        }
    }
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.pid.cmp(&b.pid)));
    out
}

fn milli_to_unit(milli: u32) -> f64 {
    f64::from(milli) / 1000.0
}

/// Short human names for clock throttle / event reasons, in a fixed order.
pub fn throttle_reasons(reasons: ThrottleReasons) -> Vec<String> {
    const NAMES: [(ThrottleReasons, &str); 9] = [
        (ThrottleReasons::SW_POWER_CAP, "power cap"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "power brake"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "thermal"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw thermal"),
        (ThrottleReasons::HW_SLOWDOWN, "hw slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync boost"),
        (ThrottleReasons::APPLICATIONS_CLOCKS_SETTING, "app clocks"),
        (ThrottleReasons::DISPLAY_CLOCK_SETTING, "display clocks"),
        (ThrottleReasons::GPU_IDLE, "idle"),
    ];
    NAMES
        .iter()
        .filter(|(flag, _)| reasons.contains(*flag))
        .map(|(_, name)| (*name).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_reasons_are_short_names_in_a_fixed_order() {
        let reasons = ThrottleReasons::GPU_IDLE | ThrottleReasons::SW_POWER_CAP;
        assert_eq!(throttle_reasons(reasons), vec!["power cap", "idle"]);
        assert!(throttle_reasons(ThrottleReasons::NONE).is_empty());
        let thermal = ThrottleReasons::SW_THERMAL_SLOWDOWN | ThrottleReasons::HW_SLOWDOWN;
        assert_eq!(throttle_reasons(thermal), vec!["thermal", "hw slowdown"]);
    }

    #[test]
    fn cuda_ordinal_maps_through_visible_devices() {
        assert_eq!(resolve_cuda_ordinal(1, None), Ok(NvmlDeviceRef::Index(1)));
        assert_eq!(
            resolve_cuda_ordinal(1, Some("3, 5")),
            Ok(NvmlDeviceRef::Index(5))
        );
        assert_eq!(
            resolve_cuda_ordinal(0, Some("GPU-8f3c,1")),
            Ok(NvmlDeviceRef::UuidPrefix("GPU-8f3c".into()))
        );
        assert!(resolve_cuda_ordinal(2, Some("0,1")).is_err());
        assert!(resolve_cuda_ordinal(0, Some("")).is_err());
        assert!(resolve_cuda_ordinal(0, Some("MIG-abc")).is_err());
    }

    #[test]
    fn only_device_gone_errors_are_fatal() {
        assert!(is_fatal(&NvmlError::GpuLost));
        assert!(is_fatal(&NvmlError::DriverNotLoaded));
        assert!(!is_fatal(&NvmlError::NotSupported));
        assert!(!is_fatal(&NvmlError::NoPermission));
    }

    #[test]
    fn best_effort_stops_at_the_first_fatal_error() {
        let mut gone = None;
        assert_eq!(best_effort(&mut gone, || Ok(3)), Some(3));
        assert_eq!(
            best_effort::<u32>(&mut gone, || Err(NvmlError::NotSupported)),
            None
        );
        assert!(gone.is_none());
        assert_eq!(
            best_effort::<u32>(&mut gone, || Err(NvmlError::GpuLost)),
            None
        );
        let mut asked = false;
        let after = best_effort(&mut gone, || {
            asked = true;
            Ok(4)
        });
        assert_eq!(after, None);
        assert!(!asked, "a read after the GPU was lost");
        assert!(matches!(gone, Some(NvmlError::GpuLost)));
    }

    #[test]
    fn process_memory_sums_this_pid_only() {
        let entry = |pid, used| ProcessInfo {
            pid,
            used_gpu_memory: used,
            gpu_instance_id: None,
            compute_instance_id: None,
        };
        let procs = [
            entry(7, UsedGpuMemory::Used(100)),
            entry(9, UsedGpuMemory::Used(1000)),
            entry(7, UsedGpuMemory::Used(20)),
        ];
        assert_eq!(process_bytes(&procs, 7), Some(120));
        assert_eq!(process_bytes(&procs, 8), None);
        let all = gpu_processes(&procs, |pid| format!("p{pid}"));
        assert!(all.iter().all(|g| g.name == format!("p{}", g.pid)));
        assert!(all.windows(2).all(|w| w[0].bytes >= w[1].bytes), "{all:?}");
        assert_eq!(all.iter().filter(|g| g.pid == 7).count(), 1);
        assert_eq!(
            process_bytes(&[entry(7, UsedGpuMemory::Unavailable)], 7),
            None
        );
    }

    #[test]
    fn init_fails_gracefully_without_a_driver() {
        // On machines without NVIDIA's driver (as where this project is built) init must fail
        // with a reason; on a GPU machine it must open. Either way nothing panics.
        match init() {
            Ok(_) => {}
            Err(reason) => {
                assert!(!reason.is_empty());
                assert!(unavailable_message(&reason).starts_with("NVML unavailable: "));
            }
        }
    }
}
