//! `infertop watch`, planned: the nodes to read (the URLs given, hostlists expanded at
//! `--port`, or the Slurm job's nodes, each with its GPU and host exporters), the name the
//! screen shows, the look, and the record's header. `session::watch` carries the plan out.

use std::time::Duration;

use super::opts::WatchOpts;
use crate::exit::Failure;
use crate::record::line::{EngineKind, Header, RunConfig, RECORD_FORMAT};
use crate::scrape::{self, Node};
use crate::ui::Look;

/// The environment variables Slurm names a job's nodes in.
const SLURM_NODELIST: [&str; 2] = ["SLURM_JOB_NODELIST", "SLURM_NODELIST"];

/// A watch, planned.
pub struct WatchPlan {
    pub nodes: Vec<Node>,
    /// What the screen's title and the first line name: the one server, or `N nodes (...)`.
    pub shown: String,
    pub look: Look,
    /// The record's header (`--record`).
    pub header: Header,
}

/// Plans `infertop watch`: the interval, every node and every display flag checked.
pub fn plan(args: &WatchOpts) -> Result<WatchPlan, Failure> {
    if args.interval < Duration::from_millis(100) {
        return Err(Failure::usage(
            "--interval: below 100ms (use e.g. 1s; servers update their metrics about once a second)",
        ));
    }
    let nodes = plan_nodes(args, &|k| std::env::var(k).ok())?;
    let shown = match nodes.as_slice() {
        [one] => one
            .metrics
            .as_ref()
            .map_or_else(|| one.name.clone(), |u| u.to_string()),
        [first, ..] => format!("{} nodes ({}, ...)", nodes.len(), first.name),
        [] => String::new(),
    };
    // The theme and keys are checked in headless watches too, as runs check theirs: a mistake
    // in a script should not wait for the same command in a terminal to show.
    let look = super::look(&args.display)?;
    let header = header(&nodes, args);
    Ok(WatchPlan {
        nodes,
        shown,
        look,
        header,
    })
}

/// The nodes to watch: the URLs and hostlists given, or the Slurm job's nodes, with their
/// exporters (`--gpu-metrics` by host, `--gpu-port` on every node's host).
pub fn plan_nodes(
    args: &WatchOpts,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Node>, Failure> {
    let usage = |e: String| Failure::usage(format!("watch: {e}"));
    let at_port = |host: &str| {
        scrape::metrics_url(&format!("http://{host}:{}/metrics", args.port)).map_err(usage)
    };
    let mut servers = Vec::new();
    for raw in &args.url {
        let host_and_port = raw.rsplit_once(':').is_some_and(|(h, p)| {
            !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
        });
        if raw.contains("://") {
            servers.push(scrape::metrics_url(raw).map_err(usage)?);
        } else if host_and_port {
            servers.push(scrape::metrics_url(&format!("http://{raw}")).map_err(usage)?);
        } else {
            let hosts = scrape::hostlist::expand(raw)
                .map_err(|e| usage(format!("`{raw}` is neither a URL nor a hostlist ({e})")))?;
            for h in hosts {
                servers.push(at_port(&h)?);
            }
        }
    }
    if servers.is_empty() && args.gpu_metrics.is_empty() {
        let Some((var, list)) = SLURM_NODELIST
            .iter()
            .find_map(|k| env(k).filter(|v| !v.trim().is_empty()).map(|v| (*k, v)))
        else {
            return Err(Failure::usage(
                "watch: give a metrics URL (e.g. http://localhost:8000/metrics) or a hostlist \
                 such as gpu[01-04] with --port, or run inside a Slurm job ($SLURM_JOB_NODELIST)",
            ));
        };
        let hosts = scrape::hostlist::expand(&list).map_err(|e| usage(format!("${var}: {e}")))?;
        for h in hosts {
            servers.push(at_port(&h)?);
        }
    }
    let mut nodes = scrape::server_nodes(&servers);
    let mut exporters = Vec::new();
    for raw in &args.gpu_metrics {
        exporters.push(
            scrape::metrics_url(raw).map_err(|e| Failure::usage(format!("--gpu-metrics: {e}")))?,
        );
    }
    for port in &args.gpu_port {
        for s in &servers {
            let host = s.host_str().unwrap_or_default();
            let url = scrape::metrics_url(&format!("http://{host}:{port}/metrics"))
                .map_err(|e| Failure::usage(format!("--gpu-port: {e}")))?;
            if !exporters.contains(&url) {
                exporters.push(url);
            }
        }
    }
    scrape::attach_exporters(&mut nodes, exporters);
    Ok(nodes)
}

/// The record's header: `engine` is `watch`, `endpoints` the nodes' metrics URLs.
/// The record's header: the nodes' metrics URLs (or names), the duration.
fn header(nodes: &[Node], args: &WatchOpts) -> Header {
    Header {
        infertop_version: env!("CARGO_PKG_VERSION").to_string(),
        record_format: RECORD_FORMAT,
        command: crate::plan::header::command_line(),
        config: RunConfig {
            engine: Some(EngineKind::Watch),
            endpoints: nodes
                .iter()
                .map(|n| {
                    n.metrics
                        .as_ref()
                        .map_or_else(|| n.name.clone(), |u| u.to_string())
                })
                .collect(),
            duration: args.duration.map(|d| format!("{d:?}")),
            device: "http".into(),
            ..RunConfig::default()
        },
        machine: crate::plan::header::machine(crate::model::DeviceSpec::Cpu),
        model: None,
        clock: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        watch: WatchOpts,
    }

    fn nodes(args: &[&str], slurm: Option<&str>) -> Result<Vec<Node>, String> {
        let cli = Cli::try_parse_from(std::iter::once("watch").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let slurm = slurm.map(str::to_string);
        plan_nodes(&cli.watch, &|k| {
            (k == "SLURM_JOB_NODELIST").then(|| slurm.clone()).flatten()
        })
        .map_err(|f| f.message)
    }

    #[test]
    fn nodes_from_urls_hostlists_and_slurm() {
        let n = nodes(
            &["http://a:8000", "b[1-2]", "c:7000", "--port", "9000"],
            None,
        )
        .unwrap();
        let names: Vec<&str> = n.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a:8000", "b1:9000", "b2:9000", "c:7000"]);
        assert_eq!(
            n[1].metrics.as_ref().unwrap().as_str(),
            "http://b1:9000/metrics"
        );
        let n = nodes(&["--gpu-port", "9400"], Some("gpu[01-02]")).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(
            n[0].metrics.as_ref().unwrap().as_str(),
            "http://gpu01:8000/metrics"
        );
        assert_eq!(n[1].exporters[0].as_str(), "http://gpu02:9400/metrics");
        // An exporter goes with the node on its host; one on another host is its own row.
        let n = nodes(
            &[
                "http://a:8000",
                "--gpu-metrics",
                "http://a:9400",
                "http://c:9100/metrics",
            ],
            None,
        )
        .unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].exporters.len(), 1);
        assert_eq!(
            (n[1].name.as_str(), n[1].metrics.is_none()),
            ("c:9100", true)
        );
    }

    #[test]
    fn no_nodes_is_a_usage_error_that_says_how() {
        let e = nodes(&[], None).unwrap_err();
        assert!(
            e.contains("SLURM_JOB_NODELIST") && e.contains("hostlist"),
            "{e}"
        );
        let e = nodes(&[], Some("gpu[01-")).unwrap_err();
        assert!(
            e.contains("$SLURM_JOB_NODELIST") && e.contains("without `]`"),
            "{e}"
        );
        let e = nodes(&["gpu[3-1]"], None).unwrap_err();
        assert!(e.contains("neither a URL nor a hostlist"), "{e}");
    }
}
