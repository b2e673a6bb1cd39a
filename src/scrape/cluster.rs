//! Many nodes read at once, each on its own: every interval each node's server page and its
//! exporters are fetched (concurrently, on one thread), each node's window is the difference
//! of its own last two scrapes, and the total of a round is the sum of the windows that came
//! in (`stats::total_window`). A slow or failing node never holds the others back: a node
//! whose last fetch is still in flight skips a round, and its window, when it comes, goes into
//! the next total. A node that fails is reported each time and tried again the next round.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::Url;

use super::exporter::{self, ExporterScrape};
use super::server::{self, Scrape};
use crate::event::{NodeTelemetry, ServerWindow};

/// One node: its server's metrics URL and its exporters' (either may be missing).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// How rows, lines and records name it: its server's `host:port` (or its first
    /// exporter's host when it has no server page).
    pub name: String,
    pub metrics: Option<Url>,
    pub exporters: Vec<Url>,
}

/// `host:port` of a URL (the port the scheme implies when none is written).
pub fn host_port(url: &Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port_or_known_default() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// What the collector says, in the order it happens.
#[derive(Clone, Debug, PartialEq)]
pub enum Report {
    /// A node's window (`source` names it when there are several nodes), or a round's total
    /// (no `source`). A single node's windows are the totals.
    Window(Box<ServerWindow>),
    /// A node's exporters, read.
    Telemetry {
        node: String,
        telemetry: Box<NodeTelemetry>,
    },
    /// A node's server page (`exporter: None`) or one of its exporters could not be read.
    Failed {
        node: String,
        exporter: Option<String>,
        message: String,
    },
    /// A page was read but had lines that are not samples (said once per URL).
    Skipped { node: String, message: String },
}

struct NodeState {
    prev: Option<(Scrape, Instant)>,
    prev_exporters: Option<(ExporterScrape, Instant)>,
    /// URLs whose skipped lines were already said.
    warned: Vec<String>,
}

/// One fetch of a node: its server page and every exporter.
struct Fetched {
    node: usize,
    at: Instant,
    server: Option<Result<Scrape, String>>,
    exporters: Vec<(String, Result<ExporterScrape, String>)>,
}

/// The nodes and their last scrapes.
pub struct Collector {
    nodes: Vec<Node>,
    state: Vec<NodeState>,
    client: reqwest::Client,
    /// Taken by `run`.
    rt: Option<tokio::runtime::Runtime>,
    /// When the watch began: reports' `t_s` count from here.
    started: Instant,
}

/// Fetches a page's text; an error says why in a few words (`HTTP 503`, connection refused).
async fn text(client: &reqwest::Client, url: &Url) -> Result<String, String> {
    let resp = client
        .get(url.clone())
        .send()
        .await
        .map_err(crate::util::http_error)?;
    let status = resp.status();
    let body = resp.text().await.map_err(crate::util::http_error)?;
    if !status.is_success() {
        return Err(format!("HTTP {}", status.as_u16()));
    }
    Ok(body)
}

/// Fetches and parses one server page; the error names the URL.
pub async fn fetch(client: &reqwest::Client, url: &Url) -> Result<Scrape, String> {
    let body = text(client, url)
        .await
        .map_err(|e| format!("{url} ({e})"))?;
    server::parse(&body).map_err(|e| format!("{url}: {e}"))
}

async fn fetch_exporter(client: &reqwest::Client, url: &Url) -> Result<ExporterScrape, String> {
    let body = text(client, url)
        .await
        .map_err(|e| format!("{url} ({e})"))?;
    exporter::parse(&body).map_err(|e| format!("{url}: {e}"))
}

async fn fetch_node(client: reqwest::Client, node: Node, index: usize) -> Fetched {
    let server = async {
        match &node.metrics {
            Some(url) => Some(fetch(&client, url).await),
            None => None,
        }
    };
    let exporters = async {
        let mut out = Vec::with_capacity(node.exporters.len());
        let mut set = tokio::task::JoinSet::new();
        for (i, url) in node.exporters.iter().enumerate() {
            let (client, url) = (client.clone(), url.clone());
            set.spawn(async move { (i, url.to_string(), fetch_exporter(&client, &url).await) });
        }
        while let Some(Ok(r)) = set.join_next().await {
            out.push(r);
        }
        out.sort_by_key(|r| r.0);
        out.into_iter().map(|(_, u, r)| (u, r)).collect::<Vec<_>>()
    };
    let (server, exporters) = tokio::join!(server, exporters);
    Fetched {
        node: index,
        at: Instant::now(),
        server,
        exporters,
    }
}

impl Collector {
    /// A collector of `nodes` (at least one), fetching with a timeout of `timeout`.
    pub fn new(nodes: Vec<Node>, timeout: Duration, started: Instant) -> Result<Collector, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the http client: {e}"))?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(3)))
            .build()
            .map_err(|e| format!("cannot build the http client: {e}"))?;
        let state = nodes
            .iter()
            .map(|_| NodeState {
                prev: None,
                prev_exporters: None,
                warned: Vec::new(),
            })
            .collect();
        Ok(Collector {
            nodes,
            state,
            client,
            rt: Some(rt),
            started,
        })
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Whether node `i`'s server page has been read.
    pub fn has_read(&self, i: usize) -> bool {
        self.state.get(i).is_some_and(|s| s.prev.is_some())
    }

    /// The last scrape of a node's server page, if one was read.
    pub fn last_scrape(&self, i: usize) -> Option<&Scrape> {
        self.state.get(i)?.prev.as_ref().map(|p| &p.0)
    }

    /// Reads every node once, waiting for all: the scrapes the first windows start from. The
    /// reports (failures, the exporters' gauges) are returned in node order.
    pub fn first_round(&mut self) -> Vec<Report> {
        let fetches = {
            let client = &self.client;
            let nodes = &self.nodes;
            let Some(rt) = &self.rt else {
                return Vec::new();
            };
            rt.block_on(async {
                let mut set = tokio::task::JoinSet::new();
                for (i, n) in nodes.iter().enumerate() {
                    set.spawn(fetch_node(client.clone(), n.clone(), i));
                }
                let mut got = Vec::new();
                while let Some(Ok(f)) = set.join_next().await {
                    got.push(f);
                }
                got.sort_by_key(|f| f.node);
                got
            })
        };
        let mut reports = Vec::new();
        let mut windows = Vec::new();
        for f in fetches {
            self.take(f, &mut reports, &mut windows);
        }
        reports
    }

    /// Folds one node's fetch in: its window (into `windows`, and reported when there are
    /// several nodes), its telemetry, its failures.
    fn take(&mut self, f: Fetched, reports: &mut Vec<Report>, windows: &mut Vec<ServerWindow>) {
        let several = self.nodes.len() > 1;
        let Some(node) = self.nodes.get(f.node) else {
            return;
        };
        let state = &mut self.state[f.node];
        let name = node.name.clone();
        match f.server {
            Some(Ok(scrape)) => {
                if let Some(skipped) = &scrape.skipped {
                    let url = node
                        .metrics
                        .as_ref()
                        .map(|u| u.to_string())
                        .unwrap_or_default();
                    if !state.warned.contains(&url) {
                        reports.push(Report::Skipped {
                            node: name.clone(),
                            message: format!("{url}: {skipped} skipped"),
                        });
                        state.warned.push(url);
                    }
                }
                if let Some((before, t)) = &state.prev {
                    let mut w =
                        server::window(before, &scrape, f.at.duration_since(*t).as_secs_f64());
                    if several {
                        w.source = Some(name.clone());
                        reports.push(Report::Window(Box::new(w.clone())));
                    }
                    windows.push(w);
                }
                state.prev = Some((scrape, f.at));
            }
            Some(Err(message)) => reports.push(Report::Failed {
                node: name.clone(),
                exporter: None,
                message,
            }),
            None => {}
        }
        if f.exporters.is_empty() {
            return;
        }
        let mut read = Vec::new();
        for (url, r) in f.exporters {
            match r {
                Ok(s) => {
                    if let Some(skipped) = &s.skipped {
                        if !state.warned.contains(&url) {
                            reports.push(Report::Skipped {
                                node: name.clone(),
                                message: format!("{url}: {skipped} skipped"),
                            });
                            state.warned.push(url);
                        }
                    }
                    read.push(s);
                }
                Err(message) => reports.push(Report::Failed {
                    node: name.clone(),
                    exporter: Some(url),
                    message,
                }),
            }
        }
        if read.is_empty() {
            return;
        }
        let now = exporter::merge(read);
        let telemetry = match &state.prev_exporters {
            Some((before, t)) => {
                exporter::telemetry(Some(before), &now, f.at.duration_since(*t).as_secs_f64())
            }
            None => exporter::telemetry(None, &now, 0.0),
        };
        reports.push(Report::Telemetry {
            node: name,
            telemetry: Box::new(telemetry),
        });
        state.prev_exporters = Some((now, f.at));
    }

    /// Reads every node each `interval` until `stop` is set or `emit` returns false, saying
    /// what it reads to `emit` with the time since the watch began.
    pub fn run(
        mut self,
        interval: Duration,
        stop: &AtomicBool,
        emit: &mut dyn FnMut(f64, Report) -> bool,
    ) {
        let Some(rt) = self.rt.take() else {
            return;
        };
        let started = self.started;
        let several = self.nodes.len() > 1;
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Fetched>();
            let mut in_flight = vec![false; self.nodes.len()];
            let mut batch: Vec<ServerWindow> = Vec::new();
            let mut next = tokio::time::Instant::now() + interval;
            let mut reports = Vec::new();
            let flush = |batch: &mut Vec<ServerWindow>, emit: &mut dyn FnMut(f64, Report) -> bool| {
                if batch.is_empty() {
                    return true;
                }
                let t_s = started.elapsed().as_secs_f64();
                if !several {
                    // A single server's windows are the totals.
                    return batch
                        .drain(..)
                        .all(|w| emit(t_s, Report::Window(Box::new(w))));
                }
                let seconds = batch.iter().map(|w| w.seconds).sum::<f64>() / batch.len() as f64;
                let refs: Vec<&ServerWindow> = batch.iter().collect();
                let w = crate::stats::total_window(&refs, seconds);
                batch.clear();
                emit(t_s, Report::Window(Box::new(w)))
            };
            loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => {
                        // What came in since the last round and was not yet totalled (a node
                        // still in flight) is this round's total.
                        if !flush(&mut batch, emit) {
                            return;
                        }
                        for (i, node) in self.nodes.iter().enumerate() {
                            if !in_flight[i] {
                                in_flight[i] = true;
                                let (client, node, tx) = (self.client.clone(), node.clone(), tx.clone());
                                tokio::spawn(async move {
                                    let _ = tx.send(fetch_node(client, node, i).await);
                                });
                            }
                        }
                        next += interval;
                        let now = tokio::time::Instant::now();
                        while next <= now {
                            next += interval;
                        }
                    }
                    Some(f) = rx.recv() => {
                        if let Some(flag) = in_flight.get_mut(f.node) {
                            *flag = false;
                        }
                        self.take(f, &mut reports, &mut batch);
                        let t_s = started.elapsed().as_secs_f64();
                        for r in reports.drain(..) {
                            if !emit(t_s, r) {
                                return;
                            }
                        }
                        if !in_flight.iter().any(|f| *f) && !flush(&mut batch, emit) {
                            return;
                        }
                    }
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        });
    }
}
