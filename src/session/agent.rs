//! `infertop agent`: this machine's GPUs (through NVML) and host (CPU time, memory, load) as
//! Prometheus text at `/metrics`, for `watch --gpu-metrics` on nodes that run no exporter.
//! Each request reads the figures afresh; nothing is kept between them but which GPUs fell
//! off the bus (`NVML_ERROR_GPU_IS_LOST`): those are not asked again (every call to a lost GPU
//! can take long to fail), and every page still says they are lost.
//!
//! It is unauthenticated: it listens on 127.0.0.1 unless `--bind` says otherwise, and then
//! anyone who can reach the port can read the figures. Without a driver it still serves the
//! host's figures, with `infertop_agent_nvml_available 0` and the reason in a comment.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::event::Sample;
use crate::exit::{Failure, EXIT_OK};
use crate::plan::opts::AgentOpts;
use crate::scrape::exporter as names;
use crate::session::page_server::{MakePage, PageServer};
use crate::signals::Signals;
use crate::telemetry::nvml::{self, Nvml};
use crate::util::exposition::{labels, Kind, Labels, Page};
use crate::util::say;

/// The kernel's clock ticks per second in /proc/stat (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// `infertop agent`.
pub fn agent(args: &AgentOpts) -> Result<i32, Failure> {
    let addr = SocketAddr::new(args.bind, args.port);
    let server = PageServer::bind(addr).map_err(|e| {
        Failure::runtime(format!(
            "agent: cannot listen on {addr} ({}); pick another --port or --bind",
            crate::util::one_line(&e.to_string())
        ))
    })?;
    let local = server.local;
    let signals =
        Signals::register().map_err(|e| Failure::runtime(format!("cannot watch signals: {e}")))?;
    let nvml = nvml::init().map_err(|reason| nvml::unavailable_message(&reason));
    let gpus = match &nvml {
        Ok(n) => match nvml::device_count(n) {
            Ok(count) => format!("{count} GPUs"),
            Err(e) => format!("no GPUs listed: {e}"),
        },
        Err(message) => format!("{message}; host figures only"),
    };
    say!(
        "infertop agent: serving http://{local}/metrics ({gpus}); unauthenticated{}; Ctrl-C stops",
        if local.ip().is_loopback() {
            ", this machine only (--bind widens it)"
        } else {
            ": anyone who can reach this address can read it"
        }
    );
    let gpus = Mutex::new(Gpus {
        nvml,
        said: Vec::new(),
        lost: Vec::new(),
    });
    let page: MakePage = Arc::new(move || scrape(&gpus));
    server.serve("infertop-agent", Some("infertop agent"), page, &|| {
        signals.stop_reason().is_some()
    });
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// NVML as the agent holds it, the GPUs whose failure it has said on stderr (once each),
/// and those that fell off the bus.
struct Gpus {
    nvml: Result<Nvml, String>,
    said: Vec<u32>,
    lost: Vec<LostGpu>,
}

/// A GPU that answered `NVML_ERROR_GPU_IS_LOST` (its NVML index, and what NVML said): it is
/// not asked again.
pub type LostGpu = (u32, String);

/// One scrape's page; a GPU that could not be read is said on stderr, once.
fn scrape(gpus: &Mutex<Gpus>) -> String {
    let mut guard = gpus.lock().unwrap_or_else(|p| p.into_inner());
    let Gpus { nvml, lost, .. } = &mut *guard;
    let (page, failed) = page(nvml, lost);
    for (index, reason) in failed {
        if !guard.said.contains(&index) {
            guard.said.push(index);
            say!("infertop agent: GPU {index}: {reason}; its figures are left out, the others are served");
        }
    }
    page
}

/// The whole page: NVML's figures per GPU (or why there are none) and the host's, with the
/// GPUs that could not be read (NVML index, why), which the page also says in comments. A GPU
/// in `lost` is not asked; one found lost now is added to it.
pub fn page(nvml: &Result<Nvml, String>, lost: &mut Vec<LostGpu>) -> (String, Vec<(u32, String)>) {
    let mut out = Page::with_capacity(4096);
    let mut failed = Vec::new();
    const NVML_HELP: &str = "1 when NVML could be read";
    match nvml {
        Ok(n) => {
            out.single(names::AGENT_NVML, NVML_HELP, Kind::Gauge, 1.0);
            failed = gpu_figures(&mut out, n, lost);
        }
        Err(message) => {
            out.comment(message);
            out.single(names::AGENT_NVML, NVML_HELP, Kind::Gauge, 0.0);
        }
    }
    host_figures(&mut out);
    (out.finish(), failed)
}

/// Every GPU's figures, read through `telemetry::nvml` as the sampler reads them. A GPU that
/// cannot be read (fallen off the bus, driver gone) gets a comment line and no figures, and is
/// returned with the reason; the others are served. A GPU in `lost` is not asked at all; one
/// that answers GPU_IS_LOST now joins it.
fn gpu_figures(out: &mut Page, nvml: &Nvml, lost: &mut Vec<LostGpu>) -> Vec<(u32, String)> {
    let mut failed = Vec::new();
    let count = match nvml::device_count(nvml) {
        Ok(count) => count,
        Err(reason) => {
            out.comment(&reason);
            return failed;
        }
    };
    type Series = Vec<(Labels, f64)>;
    let (mut util, mut mem_util, mut used, mut total, mut power, mut clock, mut temp): (
        Series,
        Series,
        Series,
        Series,
        Series,
        Series,
        Series,
    ) = Default::default();
    let pid = std::process::id();
    for i in 0..count {
        if let Some((_, reason)) = lost.iter().find(|(index, _)| *index == i) {
            out.comment(&format!("GPU {i}: {reason}"));
            failed.push((i, reason.clone()));
            continue;
        }
        let mut s = Sample::default();
        if let Err(e) = nvml::read_index(nvml, i, pid, &mut s) {
            out.comment(&format!("GPU {i}: {}", e.message));
            if e.gpu_lost {
                lost.push((i, e.message.clone()));
            }
            failed.push((i, e.message));
            continue;
        }
        let (name, uuid) = nvml::identity(nvml, i);
        let labels = labels(&[
            ("gpu", &i.to_string()),
            ("uuid", uuid.as_deref().unwrap_or_default()),
            ("name", name.as_deref().unwrap_or_default()),
        ]);
        let push = |series: &mut Series, v: Option<f64>| {
            if let Some(v) = v {
                series.push((labels.clone(), v));
            }
        };
        push(&mut util, s.gpu_util_pct.map(f64::from));
        push(&mut mem_util, s.mem_util_pct.map(f64::from));
        push(&mut used, s.device_used_bytes.map(|b| b as f64));
        push(&mut total, s.device_total_bytes.map(|b| b as f64));
        push(&mut power, s.power_w);
        push(&mut clock, s.sm_clock_mhz.map(f64::from));
        push(&mut temp, s.temperature_c.map(f64::from));
    }
    out.family(
        names::AGENT_GPU_UTIL,
        "Percent of time a kernel ran (NVML)",
        Kind::Gauge,
        &util,
    );
    out.family(
        names::AGENT_GPU_MEM_UTIL,
        "Percent of time memory was read or written (NVML)",
        Kind::Gauge,
        &mem_util,
    );
    out.family(
        names::AGENT_GPU_MEM_USED,
        "Device memory used, bytes (NVML)",
        Kind::Gauge,
        &used,
    );
    out.family(
        names::AGENT_GPU_MEM_TOTAL,
        "Device memory, bytes (NVML)",
        Kind::Gauge,
        &total,
    );
    out.family(
        names::AGENT_GPU_POWER,
        "Power draw, watts (NVML)",
        Kind::Gauge,
        &power,
    );
    out.family(
        names::AGENT_GPU_SM_CLOCK,
        "SM clock, MHz (NVML)",
        Kind::Gauge,
        &clock,
    );
    out.family(
        names::AGENT_GPU_TEMPERATURE,
        "GPU temperature, degrees Celsius (NVML)",
        Kind::Gauge,
        &temp,
    );
    failed
}

/// CPU seconds busy and in all (from /proc/stat), memory (/proc/meminfo), load (/proc/loadavg).
fn host_figures(out: &mut Page) {
    if let Some((busy, all)) = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| cpu_seconds(&s))
    {
        out.single(
            names::AGENT_CPU_BUSY,
            "CPU seconds not idle or waiting on I/O, all CPUs",
            Kind::Counter,
            busy,
        );
        out.single(
            names::AGENT_CPU_ALL,
            "CPU seconds, all CPUs",
            Kind::Counter,
            all,
        );
    }
    if let Some((total, available)) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| memory(&s))
    {
        out.single(names::AGENT_MEM_TOTAL, "Memory, bytes", Kind::Gauge, total);
        out.single(
            names::AGENT_MEM_AVAILABLE,
            "Memory available, bytes",
            Kind::Gauge,
            available,
        );
    }
    if let Some(load) = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
    {
        out.single(
            names::AGENT_LOAD1,
            "Load average over one minute",
            Kind::Gauge,
            load,
        );
    }
}

/// (busy, all) CPU seconds from /proc/stat's `cpu` line.
fn cpu_seconds(stat: &str) -> Option<(f64, f64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let all: f64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0.0);
    Some(((all - idle) / USER_HZ, all / USER_HZ))
}

/// (total, available) bytes from /proc/meminfo.
fn memory(meminfo: &str) -> Option<(f64, f64)> {
    let kb = |key: &str| -> Option<f64> {
        let line = meminfo.lines().find(|l| l.starts_with(key))?;
        Some(line.split_whitespace().nth(1)?.parse::<f64>().ok()? * 1024.0)
    };
    Some((kb("MemTotal:")?, kb("MemAvailable:")?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_page_reads_back_as_an_exporter_without_nvml() {
        let (page, failed) = page(&Err("NVML unavailable: no driver".into()), &mut Vec::new());
        assert!(failed.is_empty());
        assert!(page.contains("# NVML unavailable: no driver"), "{page}");
        assert!(page.contains(&format!("{} 0", names::AGENT_NVML)), "{page}");
        let s = crate::scrape::exporter::parse(&page).unwrap();
        let t = crate::scrape::exporter::telemetry(None, &s, 1.0);
        assert!(t.gpus.is_empty());
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(t.host.mem_total_bytes.unwrap() > 0.0, "{page}");
            assert!(t.host.load1.is_some(), "{page}");
        }
    }

    #[test]
    fn proc_files() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(cpu_seconds(stat), Some((1.5, 10.0)));
        let mem = "MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    4000 kB\n";
        assert_eq!(memory(mem), Some((16000.0 * 1024.0, 4000.0 * 1024.0)));
        assert_eq!(memory("MemTotal: 1 kB\n"), None);
    }
}
