//! `infertop devices`: what this machine can run on — the CPU and each GPU NVML sees — so a
//! result can be read against the hardware's limits (e.g. decode bandwidth against the
//! theoretical memory bandwidth).

use std::fmt::Write as _;

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::Nvml;
use serde::Serialize;

use super::nvml::{self, best_effort};
use crate::util::format;

/// Everything `infertop devices` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DevicesReport {
    pub cpu: CpuInfo,
    /// Absent when NVML is unavailable.
    pub driver_version: Option<String>,
    /// The highest CUDA version the driver supports, e.g. "12.4".
    pub cuda_driver_version: Option<String>,
    pub gpus: Vec<GpuInfo>,
    /// "NVML unavailable: <reason>" when there is no driver or library.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml_unavailable: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuInfo {
    /// `model name` from /proc/cpuinfo.
    pub model: Option<String>,
    /// Logical cores of the machine (`processor` entries in /proc/cpuinfo).
    pub logical_cores: Option<usize>,
    /// Cores this process may run on (affinity, cgroup quota): what candle's thread pool sees.
    pub available_cores: Option<usize>,
    /// `MemTotal` from /proc/meminfo.
    pub memory_total_bytes: Option<u64>,
}

/// One GPU as NVML reports it. Every field is best effort.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuInfo {
    /// NVML index (PCI bus order, ignoring `CUDA_VISIBLE_DEVICES`).
    pub index: u32,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub memory_total_bytes: Option<u64>,
    pub max_sm_clock_mhz: Option<u32>,
    pub max_mem_clock_mhz: Option<u32>,
    pub power_limit_w: Option<f64>,
    pub memory_bus_width_bits: Option<u32>,
    /// Theoretical memory bandwidth; see [`theoretical_bandwidth_bytes_per_s`].
    pub memory_bandwidth_bytes_per_s: Option<f64>,
    /// Compute capability, e.g. "9.0".
    pub compute_capability: Option<String>,
    /// Whether MIG mode is on (the GPU partitioned into instances); `None` where NVML does not
    /// say (GPUs without MIG answer "not supported").
    pub mig_enabled: Option<bool>,
    /// Why the GPU could not be read, when NVML says it is gone (fallen off the bus, ...):
    /// the fields after it are then `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Theoretical memory bandwidth in bytes/s = bus width (bits) / 8 × memory clock (Hz) × 2.
///
/// The × 2 is double data rate: NVML's memory clock is the command clock and data moves on both
/// edges. This matches the datasheets for HBM and GDDR alike, e.g. H100 SXM: 5120 bit / 8 ×
/// 2619 MHz × 2 = 3.35 TB/s; RTX 4090: 384 bit / 8 × 10501 MHz × 2 = 1.008 TB/s.
pub fn theoretical_bandwidth_bytes_per_s(bus_width_bits: u32, mem_clock_mhz: u32) -> f64 {
    f64::from(bus_width_bits) / 8.0 * f64::from(mem_clock_mhz) * 1e6 * 2.0
}

/// The report for this machine, as text (a small table) or as a JSON object.
pub fn devices_report(json: bool) -> anyhow::Result<String> {
    let report = collect();
    if json {
        Ok(serde_json::to_string_pretty(&report)?)
    } else {
        Ok(render_text(&report))
    }
}

/// Reads the CPU from /proc and the GPUs from NVML. Never fails: what cannot be read is `None`,
/// and NVML's absence is a reason in the report.
pub fn collect() -> DevicesReport {
    let cpu = cpu_info();
    match nvml::init() {
        Ok(nvml) => {
            let (gpus, error) = gpu_infos(&nvml);
            DevicesReport {
                cpu,
                driver_version: nvml.sys_driver_version().ok(),
                cuda_driver_version: nvml.sys_cuda_driver_version().ok().map(cuda_version),
                gpus,
                nvml_unavailable: error,
            }
        }
        Err(reason) => DevicesReport {
            cpu,
            driver_version: None,
            cuda_driver_version: None,
            gpus: Vec::new(),
            nvml_unavailable: Some(nvml::unavailable_message(&reason)),
        },
    }
}

fn cpu_info() -> CpuInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let (model, logical_cores) = parse_cpuinfo(&cpuinfo);
    CpuInfo {
        model,
        logical_cores,
        available_cores: std::thread::available_parallelism().ok().map(usize::from),
        memory_total_bytes: parse_meminfo_total(&meminfo),
    }
}

/// (first `model name`, number of `processor` entries) of /proc/cpuinfo.
fn parse_cpuinfo(text: &str) -> (Option<String>, Option<usize>) {
    let mut model = None;
    let mut processors = 0;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key.trim() {
            "processor" => processors += 1,
            "model name" if model.is_none() => model = Some(value.trim().to_string()),
            _ => {}
        }
    }
    (model, (processors > 0).then_some(processors))
}

/// `MemTotal:  24684096 kB` → bytes.
fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Every GPU NVML lists, plus the reason the list could not be read, if so.
fn gpu_infos(nvml: &Nvml) -> (Vec<GpuInfo>, Option<String>) {
    let count = match nvml.device_count() {
        Ok(count) => count,
        Err(e) => return (Vec::new(), Some(nvml::unavailable_message(&e.to_string()))),
    };
    let gpus = (0..count).map(|index| gpu_info(nvml, index)).collect();
    (gpus, None)
}

fn gpu_info(nvml: &Nvml, index: u32) -> GpuInfo {
    let mut info = GpuInfo {
        index,
        name: None,
        uuid: None,
        memory_total_bytes: None,
        max_sm_clock_mhz: None,
        max_mem_clock_mhz: None,
        power_limit_w: None,
        memory_bus_width_bits: None,
        memory_bandwidth_bytes_per_s: None,
        compute_capability: None,
        mig_enabled: None,
        error: None,
    };
    let device = match nvml.device_by_index(index) {
        Ok(device) => device,
        Err(e) => {
            info.error = Some(format!("NVML: {e}"));
            return info;
        }
    };
    // Each read is best effort; once one says the GPU is gone, nothing more is asked of it.
    let mut gone = None;
    let gone = &mut gone;
    info.name = best_effort(gone, || device.name());
    info.uuid = best_effort(gone, || device.uuid());
    info.memory_total_bytes = best_effort(gone, || device.memory_info()).map(|m| m.total);
    info.max_sm_clock_mhz = best_effort(gone, || device.max_clock_info(Clock::SM));
    info.max_mem_clock_mhz = best_effort(gone, || device.max_clock_info(Clock::Memory));
    info.power_limit_w =
        best_effort(gone, || device.enforced_power_limit()).map(|mw| f64::from(mw) / 1000.0);
    info.memory_bus_width_bits = best_effort(gone, || device.memory_bus_width());
    info.memory_bandwidth_bytes_per_s = info
        .memory_bus_width_bits
        .zip(info.max_mem_clock_mhz)
        .map(|(bits, mhz)| theoretical_bandwidth_bytes_per_s(bits, mhz));
    info.compute_capability = best_effort(gone, || device.cuda_compute_capability())
        .map(|c| format!("{}.{}", c.major, c.minor));
    info.mig_enabled = best_effort(gone, || device.mig_mode()).map(|m| m.current == 1);
    info.error = gone.take().map(|e| format!("NVML: {e}"));
    info
}

/// NVML's CUDA driver version integer (1000 × major + 10 × minor) → "12.4".
fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn render_text(report: &DevicesReport) -> String {
    let mut out = String::new();
    let cpu = &report.cpu;
    let _ = writeln!(
        out,
        "CPU     {}",
        cpu.model.as_deref().unwrap_or("unknown model")
    );
    let _ = writeln!(
        out,
        "        {} logical cores ({} available to this process), {} memory",
        opt(cpu.logical_cores),
        opt(cpu.available_cores),
        cpu.memory_total_bytes
            .map_or_else(|| "-".into(), format::bytes),
    );
    if let Some(reason) = &report.nvml_unavailable {
        let _ = writeln!(out, "GPU     {reason}");
        return out;
    }
    let _ = writeln!(
        out,
        "Driver  {}, CUDA {}",
        report.driver_version.as_deref().unwrap_or("-"),
        report.cuda_driver_version.as_deref().unwrap_or("-"),
    );
    if report.gpus.is_empty() {
        let _ = writeln!(out, "GPU     none found by NVML");
        return out;
    }
    let _ = writeln!(
        out,
        "{:<4}{:<28}{:>11}{:>6}{:>10}{:>10}{:>10}{:>13}{:>8}",
        "GPU", "NAME", "MEMORY", "CC", "SM MAX", "MEM MAX", "BUS", "BANDWIDTH*", "POWER"
    );
    for g in &report.gpus {
        let _ = writeln!(
            out,
            "{:<4}{:<28}{:>11}{:>6}{:>10}{:>10}{:>10}{:>13}{:>8}",
            g.index,
            g.name.as_deref().unwrap_or("-"),
            g.memory_total_bytes
                .map_or_else(|| "-".into(), format::bytes),
            g.compute_capability.as_deref().unwrap_or("-"),
            with_unit(g.max_sm_clock_mhz, "MHz"),
            with_unit(g.max_mem_clock_mhz, "MHz"),
            with_unit(g.memory_bus_width_bits, "bit"),
            g.memory_bandwidth_bytes_per_s
                .map_or_else(|| "-".into(), |b| format::si_unit(b, "B/s")),
            g.power_limit_w
                .map_or_else(|| "-".into(), |w| format!("{w:.0} W")),
        );
    }
    let _ = writeln!(
        out,
        "* theoretical: bus width / 8 × max memory clock × 2 (double data rate)"
    );
    for g in &report.gpus {
        if let Some(error) = &g.error {
            let _ = writeln!(out, "GPU {:<4}{error}", g.index);
        } else if g.mig_enabled == Some(true) {
            let _ = writeln!(
                out,
                "GPU {:<4}MIG mode on: the figures are the whole GPU's (its instances are not listed)",
                g.index
            );
        }
    }
    out
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn with_unit<T: std::fmt::Display>(v: Option<T>, unit: &str) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v} {unit}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_formula_matches_datasheets() {
        // H100 SXM (HBM3): 3.35 TB/s.
        let h100 = theoretical_bandwidth_bytes_per_s(5120, 2619);
        assert!((h100 - 3.352_32e12).abs() < 1e6, "{h100}");
        // RTX 4090 (GDDR6X): 1008 GB/s.
        let rtx = theoretical_bandwidth_bytes_per_s(384, 10501);
        assert!((rtx - 1.008_096e12).abs() < 1e6, "{rtx}");
    }

    #[test]
    fn parses_cpuinfo_and_meminfo() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(
            parse_cpuinfo(cpuinfo),
            (Some("AMD EPYC 7B13".into()), Some(2))
        );
        assert_eq!(parse_cpuinfo(""), (None, None));
        assert_eq!(
            parse_meminfo_total("MemTotal:       2048 kB\nMemFree: 1 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn cuda_driver_version_reads_as_major_minor() {
        assert_eq!(cuda_version(12040), "12.4");
        assert_eq!(cuda_version(11080), "11.8");
    }

    #[test]
    fn text_table_lists_gpus_with_the_bandwidth_note() {
        let report = DevicesReport {
            cpu: CpuInfo {
                model: Some("Test CPU".into()),
                logical_cores: Some(8),
                available_cores: Some(4),
                memory_total_bytes: Some(16 << 30),
            },
            driver_version: Some("550.54.15".into()),
            cuda_driver_version: Some("12.4".into()),
            gpus: vec![GpuInfo {
                index: 0,
                name: Some("NVIDIA H100 80GB HBM3".into()),
                uuid: None,
                memory_total_bytes: Some(80 << 30),
                max_sm_clock_mhz: Some(1980),
                max_mem_clock_mhz: Some(2619),
                power_limit_w: Some(700.0),
                memory_bus_width_bits: Some(5120),
                memory_bandwidth_bytes_per_s: Some(theoretical_bandwidth_bytes_per_s(5120, 2619)),
                compute_capability: Some("9.0".into()),
                mig_enabled: Some(false),
                error: None,
            }],
            nvml_unavailable: None,
        };
        let text = render_text(&report);
        assert!(
            text.starts_with("CPU     Test CPU\n        8 logical cores (4 available"),
            "{text}"
        );
        assert!(text.contains("16.0GiB memory"), "{text}");
        assert!(text.contains("Driver  550.54.15, CUDA 12.4"), "{text}");
        let row = text
            .lines()
            .find(|l| l.starts_with("0 "))
            .expect("a GPU row");
        for cell in [
            "NVIDIA H100 80GB HBM3",
            "80.0GiB",
            "9.0",
            "1980 MHz",
            "2619 MHz",
            "5120 bit",
            "3.35TB/s",
            "700 W",
        ] {
            assert!(row.contains(cell), "{cell} missing in {row:?}");
        }
        assert!(text.contains("* theoretical"));
    }
}
