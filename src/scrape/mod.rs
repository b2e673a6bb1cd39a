//! What serving engines and exporters publish as Prometheus text, read as per-window figures
//! (`watch`, `--server-metrics`).
//!
//! - `text`: the exposition format, line by line, without copying (`util::exposition` writes
//!   it);
//! - `server`: a server's page as vLLM, SGLang, TGI and llama.cpp's server name its figures
//!   (requests running and waiting, KV-cache usage, preemptions, prefix-cache hits, TTFT /
//!   inter-token / E2E / queue / prefill / decode histograms, lengths, speculative decoding,
//!   finish reasons, HTTP status, MFU counters), per data-parallel engine too, and the window
//!   between two scrapes;
//! - `exporter`: GPU and host figures from DCGM, nvitop's exporter, node_exporter and
//!   `infertop agent`;
//! - `cluster`: many nodes read every interval, each on its own, their windows and total;
//! - `hostlist`: Slurm node lists.
//!
//! Percentiles from histograms are Prometheus' `histogram_quantile`: linear within the bucket
//! that holds the rank, so they are only as fine as the server's buckets (and not numpy's
//! percentiles of the samples, which a server does not export).

pub mod cluster;
pub mod exporter;
pub mod hostlist;
pub mod server;
pub mod text;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

pub use cluster::{host_port, Collector, Node, Report};
pub use server::{merge, parse, window, Scrape};

use crate::event::Event;

/// A metrics URL: as given, or the base URL's `/metrics`.
pub fn metrics_url(raw: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(raw.trim()).map_err(|e| {
        format!("`{raw}` is not a URL ({e}); write e.g. http://localhost:8000/metrics")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "`{raw}` is not http or https (write e.g. http://localhost:8000/metrics)"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "`{raw}` has no host (write e.g. http://localhost:8000/metrics)"
        ));
    }
    if url.path().trim_end_matches('/').is_empty() {
        url.set_path("/metrics");
    }
    Ok(url)
}

/// The nodes of `urls`, each a server of its own, named by `host:port` (the whole URL when
/// two share a host and port).
pub fn server_nodes(urls: &[reqwest::Url]) -> Vec<Node> {
    let names: Vec<String> = urls.iter().map(host_port).collect();
    urls.iter()
        .zip(&names)
        .map(|(url, name)| Node {
            name: if names.iter().filter(|n| *n == name).count() > 1 {
                url.to_string()
            } else {
                name.clone()
            },
            metrics: Some(url.clone()),
            exporters: Vec::new(),
        })
        .collect()
}

/// Gives each exporter to the node on its host (the first such); an exporter on a host
/// without a server becomes a node of its own (one per host), named by its `host:port`.
pub fn attach_exporters(nodes: &mut Vec<Node>, exporters: Vec<reqwest::Url>) {
    for url in exporters {
        let host = url.host_str().unwrap_or_default().to_string();
        let same_host = |n: &Node| {
            n.metrics
                .as_ref()
                .or(n.exporters.first())
                .is_some_and(|u| u.host_str() == Some(host.as_str()))
        };
        match nodes.iter_mut().find(|n| same_host(n)) {
            Some(n) => {
                if !n.exporters.contains(&url) {
                    n.exporters.push(url);
                }
            }
            None => nodes.push(Node {
                name: host_port(&url),
                metrics: None,
                exporters: vec![url],
            }),
        }
    }
}

/// `--server-metrics`: scrapes `urls` every `interval` on its own thread and sends each
/// window as `Event::ServerMetrics` until `stop` is set: with several servers, each one's
/// window (with its `source`) and their total. A server that cannot be read is said as a
/// non-fatal error (at most every 30 s) and tried again the next interval; the total adds up
/// those that were read, and the run goes on.
pub fn spawn_scraper(
    urls: Vec<reqwest::Url>,
    interval: Duration,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("infertop-scrape".into())
        .spawn(move || {
            let started = Instant::now();
            let Ok(mut collector) = Collector::new(server_nodes(&urls), interval * 5, started)
            else {
                return;
            };
            let mut warned: Option<Instant> = None;
            let mut emit = |_t_s: f64, report: Report| match report {
                Report::Window(w) => events.send(Event::ServerMetrics(w)).is_ok(),
                Report::Failed { message, .. } | Report::Skipped { message, .. } => {
                    if warned.is_none_or(|w| w.elapsed() >= Duration::from_secs(30)) {
                        warned = Some(Instant::now());
                        return events
                            .send(Event::Error {
                                message: format!("server metrics: cannot read {message}"),
                                fatal: false,
                            })
                            .is_ok();
                    }
                    true
                }
                Report::Telemetry { .. } => true,
            };
            for r in collector.first_round() {
                if !emit(0.0, r) {
                    return;
                }
            }
            collector.run(interval, &stop, &mut emit);
        })
}
