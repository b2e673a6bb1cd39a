//! `infertop agent`: this machine's GPUs (through NVML) and host (CPU time, memory, load) as
//! Prometheus text at `/metrics`, for `watch --gpu-metrics` on nodes that run no exporter.
//! Each request reads the figures afresh; nothing is kept between them but which GPUs fell
//! off the bus (`NVML_ERROR_GPU_IS_LOST`): those are not asked again (every call to a lost GPU
//! can take long to fail), and every page still says they are lost.
//!
//! It is unauthenticated: it listens on 127.0.0.1 unless `--bind` says otherwise, and then
//! anyone who can reach the port can read the figures. Without a driver it still serves the
//! host's figures, with `infertop_agent_nvml_available 0` and the reason in a comment.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::event::Sample;
use crate::exit::{Failure, EXIT_OK};
use crate::plan::opts::AgentOpts;
use crate::scrape::exporter as names;
use crate::signals::Signals;
use crate::telemetry::nvml::{self, Nvml};
use crate::util::say;

/// Connections served at once; more are answered 503 at once.
const MAX_CONNECTIONS: usize = 16;
/// A request's head must arrive within this long.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The kernel's clock ticks per second in /proc/stat (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// `infertop agent`.
pub fn agent(args: &AgentOpts) -> Result<i32, Failure> {
    let addr = SocketAddr::new(args.bind, args.port);
    let listener = TcpListener::bind(addr).map_err(|e| {
        Failure::runtime(format!(
            "agent: cannot listen on {addr} ({}); pick another --port or --bind",
            crate::util::one_line(&e.to_string())
        ))
    })?;
    let local = listener.local_addr().unwrap_or(addr);
    listener
        .set_nonblocking(true)
        .map_err(|e| Failure::runtime(format!("agent: {e}")))?;
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
    let nvml = Arc::new(Mutex::new(Gpus {
        nvml,
        said: Vec::new(),
        lost: Vec::new(),
    }));
    let busy = Arc::new(AtomicUsize::new(0));
    let mut warned = None;
    while signals.stop_reason().is_none() {
        match listener.accept() {
            Ok((conn, _)) => {
                if busy.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    let _ = respond(conn, "503 Service Unavailable", "busy, try again\n");
                    continue;
                }
                busy.fetch_add(1, Ordering::Relaxed);
                let (nvml, held) = (nvml.clone(), busy.clone());
                let spawned = std::thread::Builder::new()
                    .name("infertop-agent".into())
                    .spawn(move || {
                        let _ = serve(conn, &nvml);
                        held.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    busy.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Out of file descriptors, a connection reset before it was taken: said once a
            // minute at most, and the agent goes on.
            Err(e) => {
                if warned.is_none_or(|t: std::time::Instant| t.elapsed() >= Duration::from_secs(60))
                {
                    say!("infertop agent: warning: accept failed ({e}); going on");
                    warned = Some(std::time::Instant::now());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

fn respond(mut conn: TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
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

/// One request: its head read, `/metrics` (or `/`) answered, anything else 404.
fn serve(mut conn: TcpStream, gpus: &Mutex<Gpus>) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut first = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    if method != "GET" {
        return respond(conn, "405 Method Not Allowed", "GET /metrics\n");
    }
    if path != "/metrics" && path != "/" {
        return respond(conn, "404 Not Found", "the figures are at /metrics\n");
    }
    let page = {
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
    };
    respond(conn, "200 OK", &page)
}

/// The whole page: NVML's figures per GPU (or why there are none) and the host's, with the
/// GPUs that could not be read (NVML index, why), which the page also says in comments. A GPU
/// in `lost` is not asked; one found lost now is added to it.
pub fn page(nvml: &Result<Nvml, String>, lost: &mut Vec<LostGpu>) -> (String, Vec<(u32, String)>) {
    let mut out = String::with_capacity(4096);
    let mut failed = Vec::new();
    match nvml {
        Ok(n) => {
            gauge(
                &mut out,
                names::AGENT_NVML,
                "1 when NVML could be read",
                &[((String::new()), 1.0)],
            );
            failed = gpu_figures(&mut out, n, lost);
        }
        Err(message) => {
            let _ = writeln!(out, "# {}", crate::util::one_line(message));
            gauge(
                &mut out,
                names::AGENT_NVML,
                "1 when NVML could be read",
                &[(String::new(), 0.0)],
            );
        }
    }
    host_figures(&mut out);
    (out, failed)
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric: HELP, TYPE and a line per label set (`labels` as written inside the braces).
fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)]) {
    if samples.is_empty() {
        return;
    }
    let kind = if name.ends_with("_total") {
        "counter"
    } else {
        "gauge"
    };
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {v}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
}

/// Every GPU's figures, read through `telemetry::nvml` as the sampler reads them. A GPU that
/// cannot be read (fallen off the bus, driver gone) gets a comment line and no figures, and is
/// returned with the reason; the others are served. A GPU in `lost` is not asked at all; one
/// that answers GPU_IS_LOST now joins it.
fn gpu_figures(out: &mut String, nvml: &Nvml, lost: &mut Vec<LostGpu>) -> Vec<(u32, String)> {
    let mut failed = Vec::new();
    let count = match nvml::device_count(nvml) {
        Ok(count) => count,
        Err(reason) => {
            let _ = writeln!(out, "# {}", crate::util::one_line(&reason));
            return failed;
        }
    };
    type Series = Vec<(String, f64)>;
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
            let _ = writeln!(out, "# GPU {i}: {}", crate::util::one_line(reason));
            failed.push((i, reason.clone()));
            continue;
        }
        let mut s = Sample::default();
        if let Err(e) = nvml::read_index(nvml, i, pid, &mut s) {
            let _ = writeln!(out, "# GPU {i}: {}", crate::util::one_line(&e.message));
            if e.gpu_lost {
                lost.push((i, e.message.clone()));
            }
            failed.push((i, e.message));
            continue;
        }
        let (name, uuid) = nvml::identity(nvml, i);
        let labels = format!(
            "gpu=\"{i}\",uuid=\"{}\",name=\"{}\"",
            escape(uuid.as_deref().unwrap_or_default()),
            escape(name.as_deref().unwrap_or_default())
        );
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
    gauge(
        out,
        names::AGENT_GPU_UTIL,
        "Percent of time a kernel ran (NVML)",
        &util,
    );
    gauge(
        out,
        names::AGENT_GPU_MEM_UTIL,
        "Percent of time memory was read or written (NVML)",
        &mem_util,
    );
    gauge(
        out,
        names::AGENT_GPU_MEM_USED,
        "Device memory used, bytes (NVML)",
        &used,
    );
    gauge(
        out,
        names::AGENT_GPU_MEM_TOTAL,
        "Device memory, bytes (NVML)",
        &total,
    );
    gauge(
        out,
        names::AGENT_GPU_POWER,
        "Power draw, watts (NVML)",
        &power,
    );
    gauge(
        out,
        names::AGENT_GPU_SM_CLOCK,
        "SM clock, MHz (NVML)",
        &clock,
    );
    gauge(
        out,
        names::AGENT_GPU_TEMPERATURE,
        "GPU temperature, degrees Celsius (NVML)",
        &temp,
    );
    failed
}

/// CPU seconds busy and in all (from /proc/stat), memory (/proc/meminfo), load (/proc/loadavg).
fn host_figures(out: &mut String) {
    if let Some((busy, all)) = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| cpu_seconds(&s))
    {
        gauge(
            out,
            names::AGENT_CPU_BUSY,
            "CPU seconds not idle or waiting on I/O, all CPUs",
            &[(String::new(), busy)],
        );
        gauge(
            out,
            names::AGENT_CPU_ALL,
            "CPU seconds, all CPUs",
            &[(String::new(), all)],
        );
    }
    if let Some((total, available)) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| memory(&s))
    {
        gauge(
            out,
            names::AGENT_MEM_TOTAL,
            "Memory, bytes",
            &[(String::new(), total)],
        );
        gauge(
            out,
            names::AGENT_MEM_AVAILABLE,
            "Memory available, bytes",
            &[(String::new(), available)],
        );
    }
    if let Some(load) = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
    {
        gauge(
            out,
            names::AGENT_LOAD1,
            "Load average over one minute",
            &[(String::new(), load)],
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
