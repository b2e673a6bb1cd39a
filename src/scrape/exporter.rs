//! GPU and host telemetry from the exporters a cluster already runs: NVIDIA's DCGM exporter,
//! nvitop's exporter, Prometheus' node_exporter, and `infertop agent` (for nodes that have
//! none). Each figure has its name (and unit) in each exporter; a node may run several, and
//! their figures go together (the first exporter that has a figure gives it).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::text::{for_each_sample, PageError, Sample};
use crate::event::{GpuFigures, HostFigures, NodeTelemetry};

const MIB: f64 = 1024.0 * 1024.0;

/// A per-GPU figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Gpu {
    Util,
    MemUtil,
    DramActive,
    TensorActive,
    MemUsed,
    MemFree,
    MemTotal,
    Power,
    SmClock,
    Temperature,
}

/// A host figure; the counters are turned into rates over two scrapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Host {
    /// node_exporter's per-CPU, per-mode seconds (a counter).
    CpuSecondsByMode,
    /// The agent's busy and total CPU seconds (counters).
    CpuBusySeconds,
    CpuAllSeconds,
    /// A gauge in percent (nvitop).
    CpuPercent,
    MemTotal,
    MemAvailable,
    MemUsed,
    Load1,
    IbRxBytes,
    IbTxBytes,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Figure {
    Gpu(Gpu, f64),
    Host(Host, f64),
}

/// Which exporter a name says it is.
fn exporter_of(name: &str) -> &'static str {
    if name.starts_with("DCGM_") {
        "dcgm"
    } else if name.starts_with("node_") {
        "node"
    } else if name.starts_with("infertop_") {
        "infertop"
    } else {
        "nvitop"
    }
}

/// Name → (figure, scale to our unit: bytes, watts, MHz, °C, percent or 0..1 ratio).
fn known() -> &'static HashMap<&'static str, Figure> {
    static KNOWN: OnceLock<HashMap<&'static str, Figure>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        use Figure::{Gpu as G, Host as H};
        HashMap::from([
            // NVIDIA DCGM exporter (etc/default-counters.csv, plus the profiling counters).
            ("DCGM_FI_DEV_GPU_UTIL", G(Gpu::Util, 1.0)),
            ("DCGM_FI_DEV_MEM_COPY_UTIL", G(Gpu::MemUtil, 1.0)),
            ("DCGM_FI_PROF_DRAM_ACTIVE", G(Gpu::DramActive, 1.0)),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", G(Gpu::TensorActive, 1.0)),
            ("DCGM_FI_DEV_FB_USED", G(Gpu::MemUsed, MIB)),
            ("DCGM_FI_DEV_FB_FREE", G(Gpu::MemFree, MIB)),
            ("DCGM_FI_DEV_POWER_USAGE", G(Gpu::Power, 1.0)),
            ("DCGM_FI_DEV_SM_CLOCK", G(Gpu::SmClock, 1.0)),
            ("DCGM_FI_DEV_GPU_TEMP", G(Gpu::Temperature, 1.0)),
            // nvitop's exporter (prometheus_client appends the unit to each name).
            ("gpu_utilization_Percentage", G(Gpu::Util, 1.0)),
            ("gpu_memory_utilization_Percentage", G(Gpu::MemUtil, 1.0)),
            ("gpu_memory_used_MiB", G(Gpu::MemUsed, MIB)),
            ("gpu_memory_total_MiB", G(Gpu::MemTotal, MIB)),
            ("gpu_power_usage_W", G(Gpu::Power, 1.0)),
            ("gpu_clock_sm_MHz", G(Gpu::SmClock, 1.0)),
            ("gpu_temperature_C", G(Gpu::Temperature, 1.0)),
            ("host_cpu_percent_Percentage", H(Host::CpuPercent, 1.0)),
            ("host_virtual_memory_total_MiB", H(Host::MemTotal, MIB)),
            ("host_virtual_memory_used_MiB", H(Host::MemUsed, MIB)),
            ("host_load_average_1m_Percentage", H(Host::Load1, 1.0)),
            // node_exporter.
            ("node_cpu_seconds_total", H(Host::CpuSecondsByMode, 1.0)),
            ("node_memory_MemTotal_bytes", H(Host::MemTotal, 1.0)),
            ("node_memory_MemAvailable_bytes", H(Host::MemAvailable, 1.0)),
            ("node_load1", H(Host::Load1, 1.0)),
            (
                "node_infiniband_port_data_received_bytes_total",
                H(Host::IbRxBytes, 1.0),
            ),
            (
                "node_infiniband_port_data_transmitted_bytes_total",
                H(Host::IbTxBytes, 1.0),
            ),
            // infertop agent (src/session/agent.rs writes these).
            (AGENT_GPU_UTIL, G(Gpu::Util, 1.0)),
            (AGENT_GPU_MEM_UTIL, G(Gpu::MemUtil, 1.0)),
            (AGENT_GPU_MEM_USED, G(Gpu::MemUsed, 1.0)),
            (AGENT_GPU_MEM_TOTAL, G(Gpu::MemTotal, 1.0)),
            (AGENT_GPU_POWER, G(Gpu::Power, 1.0)),
            (AGENT_GPU_SM_CLOCK, G(Gpu::SmClock, 1.0)),
            (AGENT_GPU_TEMPERATURE, G(Gpu::Temperature, 1.0)),
            (AGENT_CPU_BUSY, H(Host::CpuBusySeconds, 1.0)),
            (AGENT_CPU_ALL, H(Host::CpuAllSeconds, 1.0)),
            (AGENT_MEM_TOTAL, H(Host::MemTotal, 1.0)),
            (AGENT_MEM_AVAILABLE, H(Host::MemAvailable, 1.0)),
            (AGENT_LOAD1, H(Host::Load1, 1.0)),
        ])
    })
}

/// The names `infertop agent` serves (one place for writer and reader).
pub const AGENT_GPU_UTIL: &str = "infertop_gpu_utilization_percent";
pub const AGENT_GPU_MEM_UTIL: &str = "infertop_gpu_memory_utilization_percent";
pub const AGENT_GPU_MEM_USED: &str = "infertop_gpu_memory_used_bytes";
pub const AGENT_GPU_MEM_TOTAL: &str = "infertop_gpu_memory_total_bytes";
pub const AGENT_GPU_POWER: &str = "infertop_gpu_power_watts";
pub const AGENT_GPU_SM_CLOCK: &str = "infertop_gpu_sm_clock_mhz";
pub const AGENT_GPU_TEMPERATURE: &str = "infertop_gpu_temperature_celsius";
pub const AGENT_CPU_BUSY: &str = "infertop_host_cpu_busy_seconds_total";
pub const AGENT_CPU_ALL: &str = "infertop_host_cpu_seconds_total";
pub const AGENT_MEM_TOTAL: &str = "infertop_host_memory_total_bytes";
pub const AGENT_MEM_AVAILABLE: &str = "infertop_host_memory_available_bytes";
pub const AGENT_LOAD1: &str = "infertop_host_load1";
/// 1 when the agent could read NVML, else 0.
pub const AGENT_NVML: &str = "infertop_agent_nvml_available";

/// The labels that name a GPU, and its model, in each exporter.
const GPU_INDEX_LABELS: &[&str] = &["gpu", "index"];
const GPU_NAME_LABELS: &[&str] = &["modelName", "devicename", "name"];

/// One scrape of a node's exporters, as read (units converted, counters raw).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExporterScrape {
    /// By GPU index label, in page order.
    gpus: Vec<(String, Option<String>, HashMap<Gpu, f64>)>,
    host: HashMap<Host, f64>,
    /// node_exporter's CPU seconds: idle (idle + iowait) and all.
    cpu_idle: f64,
    cpu_all: f64,
    /// Which exporters' names were seen.
    pub exporters: Vec<&'static str>,
    pub skipped: Option<PageError>,
}

/// Parses one exporter page (any of the four).
pub fn parse(text: &str) -> Result<ExporterScrape, PageError> {
    let mut out = ExporterScrape::default();
    let known = known();
    let mut add = |s: &Sample<'_>| {
        let Some((&name, &figure)) = known.get_key_value(s.name) else {
            return;
        };
        let exporter = exporter_of(name);
        if !out.exporters.contains(&exporter) {
            out.exporters.push(exporter);
        }
        if !s.value.is_finite() {
            return;
        }
        match figure {
            Figure::Gpu(g, scale) => {
                let index = GPU_INDEX_LABELS
                    .iter()
                    .find_map(|k| s.label(k))
                    .map(|v| v.into_owned())
                    .unwrap_or_default();
                let i = match out.gpus.iter().position(|(k, _, _)| *k == index) {
                    Some(i) => i,
                    None => {
                        let model = GPU_NAME_LABELS
                            .iter()
                            .find_map(|k| s.label(k))
                            .map(|v| v.into_owned());
                        out.gpus.push((index, model, HashMap::new()));
                        out.gpus.len() - 1
                    }
                };
                out.gpus[i].2.entry(g).or_insert(s.value * scale);
            }
            Figure::Host(Host::CpuSecondsByMode, _) => {
                out.cpu_all += s.value;
                if matches!(s.label("mode").as_deref(), Some("idle" | "iowait")) {
                    out.cpu_idle += s.value;
                }
                out.host.insert(Host::CpuSecondsByMode, out.cpu_all);
            }
            Figure::Host(h @ (Host::IbRxBytes | Host::IbTxBytes), _) => {
                *out.host.entry(h).or_insert(0.0) += s.value;
            }
            Figure::Host(h, scale) => {
                out.host.entry(h).or_insert(s.value * scale);
            }
        }
    };
    let stats = for_each_sample(text, &|name| known.contains_key(name), &mut add)?;
    if stats.samples == 0 {
        return Err(stats.skipped.unwrap_or(PageError {
            line: 0,
            why: "no Prometheus samples in the response".into(),
            excerpt: String::new(),
        }));
    }
    out.skipped = stats.skipped;
    out.gpus
        .sort_by(|a, b| match (a.0.parse::<u64>(), b.0.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.0.cmp(&b.0),
        });
    Ok(out)
}

/// Several exporters of one node as one scrape (the first to have a figure gives it).
pub fn merge(scrapes: Vec<ExporterScrape>) -> ExporterScrape {
    let mut out = ExporterScrape::default();
    for s in scrapes {
        for e in s.exporters {
            if !out.exporters.contains(&e) {
                out.exporters.push(e);
            }
        }
        for (index, model, figures) in s.gpus {
            match out.gpus.iter_mut().find(|g| g.0 == index) {
                Some(g) => {
                    g.1 = g.1.take().or(model);
                    for (k, v) in figures {
                        g.2.entry(k).or_insert(v);
                    }
                }
                None => out.gpus.push((index, model, figures)),
            }
        }
        for (k, v) in s.host {
            out.host.entry(k).or_insert(v);
        }
        if out.cpu_all == 0.0 {
            (out.cpu_idle, out.cpu_all) = (s.cpu_idle, s.cpu_all);
        }
        out.skipped = out.skipped.or(s.skipped);
    }
    out
}

/// The node's figures at `after`; rates over the `seconds` since `before` (none without it).
pub fn telemetry(
    before: Option<&ExporterScrape>,
    after: &ExporterScrape,
    seconds: f64,
) -> NodeTelemetry {
    let gpus = after
        .gpus
        .iter()
        .map(|(index, model, f)| {
            let get = |g: Gpu| f.get(&g).copied();
            let total =
                get(Gpu::MemTotal).or_else(|| match (get(Gpu::MemUsed), get(Gpu::MemFree)) {
                    (Some(u), Some(free)) => Some(u + free),
                    _ => None,
                });
            GpuFigures {
                gpu: index.clone(),
                name: model.clone(),
                util_pct: get(Gpu::Util),
                mem_util_pct: get(Gpu::MemUtil),
                dram_active: get(Gpu::DramActive),
                tensor_active: get(Gpu::TensorActive),
                mem_used_bytes: get(Gpu::MemUsed),
                mem_total_bytes: total,
                power_w: get(Gpu::Power),
                sm_clock_mhz: get(Gpu::SmClock),
                temperature_c: get(Gpu::Temperature),
            }
        })
        .collect();
    let h = |k: Host| after.host.get(&k).copied();
    let rate = |k: Host| {
        let b = before?.host.get(&k)?;
        let a = h(k)?;
        (seconds > 0.0 && a >= *b).then(|| (a - b) / seconds)
    };
    let cpu_pct = h(Host::CpuPercent)
        .or_else(|| {
            // node_exporter: the share of CPU seconds not idle.
            let b = before?;
            let all = after.cpu_all - b.cpu_all;
            let idle = after.cpu_idle - b.cpu_idle;
            (after.host.contains_key(&Host::CpuSecondsByMode) && all > 0.0)
                .then(|| 100.0 * (all - idle).max(0.0) / all)
        })
        .or_else(|| {
            // The agent: busy over all seconds.
            let b = before?;
            let busy = h(Host::CpuBusySeconds)? - b.host.get(&Host::CpuBusySeconds)?;
            let all = h(Host::CpuAllSeconds)? - b.host.get(&Host::CpuAllSeconds)?;
            (all > 0.0).then(|| 100.0 * busy.max(0.0) / all)
        });
    let mem_used = h(Host::MemUsed).or_else(|| Some(h(Host::MemTotal)? - h(Host::MemAvailable)?));
    NodeTelemetry {
        seconds,
        exporters: after.exporters.iter().map(|e| e.to_string()).collect(),
        gpus,
        host: HostFigures {
            cpu_pct,
            mem_used_bytes: mem_used,
            mem_total_bytes: h(Host::MemTotal),
            load1: h(Host::Load1),
            ib_rx_bytes_per_s: rate(Host::IbRxBytes),
            ib_tx_bytes_per_s: rate(Host::IbTxBytes),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// As the DCGM exporter writes it (labels with spaces after commas in its README).
    const DCGM: &str = "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n\
        # TYPE DCGM_FI_DEV_GPU_UTIL gauge\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-604a\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu01\"} 87\n\
        DCGM_FI_DEV_GPU_UTIL{gpu=\"1\", UUID=\"GPU-604b\", device=\"nvidia1\", modelName=\"NVIDIA H100 80GB HBM3\", Hostname=\"gpu01\"} 12\n\
        DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-604a\",modelName=\"NVIDIA H100 80GB HBM3\"} 70000\n\
        DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-604a\",modelName=\"NVIDIA H100 80GB HBM3\"} 11559\n\
        DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 612.5\n\
        DCGM_FI_DEV_SM_CLOCK{gpu=\"0\"} 1980\n\
        DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 61\n\
        DCGM_FI_DEV_MEM_COPY_UTIL{gpu=\"0\"} 45\n\
        DCGM_FI_PROF_DRAM_ACTIVE{gpu=\"0\"} 0.62\n\
        DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 0\n";

    #[test]
    fn dcgm_per_gpu() {
        let s = parse(DCGM).unwrap();
        let t = telemetry(None, &s, 1.0);
        assert_eq!(t.exporters, vec!["dcgm"]);
        assert_eq!(t.gpus.len(), 2);
        let g = &t.gpus[0];
        assert_eq!(g.gpu, "0");
        assert_eq!(g.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(g.util_pct, Some(87.0));
        assert_eq!(g.mem_used_bytes, Some(70000.0 * MIB));
        assert_eq!(g.mem_total_bytes, Some(81559.0 * MIB));
        assert_eq!(
            (g.power_w, g.sm_clock_mhz, g.temperature_c),
            (Some(612.5), Some(1980.0), Some(61.0))
        );
        assert_eq!((g.mem_util_pct, g.dram_active), (Some(45.0), Some(0.62)));
        assert_eq!(t.gpus[1].util_pct, Some(12.0));
        assert_eq!(t.gpus[1].power_w, None);
    }

    fn node_exporter(idle: f64, busy: f64, ib: f64) -> String {
        format!(
            "node_cpu_seconds_total{{cpu=\"0\",mode=\"idle\"}} {idle}\n\
             node_cpu_seconds_total{{cpu=\"0\",mode=\"user\"}} {busy}\n\
             node_cpu_seconds_total{{cpu=\"0\",mode=\"iowait\"}} 0\n\
             node_memory_MemTotal_bytes 1.0e11\nnode_memory_MemAvailable_bytes 4.0e10\n\
             node_load1 3.5\n\
             node_infiniband_port_data_received_bytes_total{{device=\"mlx5_0\",port=\"1\"}} {ib}\n\
             node_infiniband_port_data_received_bytes_total{{device=\"mlx5_1\",port=\"1\"}} {ib}\n\
             node_infiniband_port_data_transmitted_bytes_total{{device=\"mlx5_0\",port=\"1\"}} 0\n"
        )
    }

    #[test]
    fn node_exporter_host_rates_and_merged_with_dcgm() {
        let a = merge(vec![
            parse(DCGM).unwrap(),
            parse(&node_exporter(100.0, 100.0, 0.0)).unwrap(),
        ]);
        let b = merge(vec![
            parse(DCGM).unwrap(),
            parse(&node_exporter(101.0, 103.0, 5e9)).unwrap(),
        ]);
        let first = telemetry(None, &a, 0.0);
        assert_eq!(first.host.cpu_pct, None, "a rate needs two scrapes");
        let t = telemetry(Some(&a), &b, 2.0);
        assert_eq!(t.exporters, vec!["dcgm", "node"]);
        assert_eq!(t.host.cpu_pct, Some(75.0));
        assert_eq!(t.host.mem_used_bytes, Some(6.0e10));
        assert_eq!(t.host.load1, Some(3.5));
        assert_eq!(t.host.ib_rx_bytes_per_s, Some(5e9));
        assert_eq!(t.host.ib_tx_bytes_per_s, Some(0.0));
        assert_eq!(t.gpus.len(), 2);
    }

    #[test]
    fn nvitop_and_the_agent() {
        let nvitop = "gpu_utilization_Percentage{hostname=\"n1\",index=\"0\",devicename=\"NVIDIA A100-SXM4-80GB\",uuid=\"GPU-1\"} 55\n\
            gpu_memory_used_MiB{hostname=\"n1\",index=\"0\",devicename=\"NVIDIA A100-SXM4-80GB\",uuid=\"GPU-1\"} 1024\n\
            gpu_memory_total_MiB{hostname=\"n1\",index=\"0\",devicename=\"NVIDIA A100-SXM4-80GB\",uuid=\"GPU-1\"} 81920\n\
            host_cpu_percent_Percentage{hostname=\"n1\"} 12.5\n";
        let t = telemetry(None, &parse(nvitop).unwrap(), 1.0);
        assert_eq!(t.exporters, vec!["nvitop"]);
        assert_eq!(t.gpus[0].util_pct, Some(55.0));
        assert_eq!(t.gpus[0].mem_total_bytes, Some(81920.0 * MIB));
        assert_eq!(t.host.cpu_pct, Some(12.5));
        let agent = |busy: f64, all: f64| {
            format!(
                "{AGENT_NVML} 0\n{AGENT_CPU_BUSY} {busy}\n{AGENT_CPU_ALL} {all}\n\
                 {AGENT_MEM_TOTAL} 1000\n{AGENT_MEM_AVAILABLE} 250\n{AGENT_LOAD1} 0.5\n"
            )
        };
        let (a, b) = (
            parse(&agent(10.0, 40.0)).unwrap(),
            parse(&agent(12.0, 48.0)).unwrap(),
        );
        let t = telemetry(Some(&a), &b, 1.0);
        assert_eq!(t.exporters, vec!["infertop"]);
        assert_eq!(t.host.cpu_pct, Some(25.0));
        assert_eq!(t.host.mem_used_bytes, Some(750.0));
        assert!(t.gpus.is_empty());
    }

    #[test]
    fn a_page_without_exporter_figures_is_an_error_or_empty() {
        assert!(parse("<html>").is_err());
        // A page of samples of none of the known names reads as no figures.
        let t = telemetry(None, &parse("something_else 1\n").unwrap(), 1.0);
        assert!(t.gpus.is_empty() && t.host.is_empty() && t.exporters.is_empty());
        let err = parse("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 5\n").unwrap_err();
        assert_eq!(err.line, 1);
    }
}
