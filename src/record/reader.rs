//! Reads a JSONL record back, tolerating a last line cut off by a crash or kill -9.

use std::path::Path;

use serde_json::Value;

use crate::event::{ModelInfo, RequestDone, RequestFailed};
use crate::stats::{Metric, RunStats, Slo, Summary, Table};

use super::line::{EventLine, Footer, Header, Line, RunEvent, StepLine};
use super::RunSummary;

/// A record read back: its header, requests, steps and footer.
#[derive(Debug, Default)]
pub struct Record {
    /// The file it was read from.
    pub path: std::path::PathBuf,
    pub header: Option<Header>,
    /// The model, from the `run_started` event (or a `model` key in the header).
    pub model: Option<ModelInfo>,
    pub requests: Vec<RequestDone>,
    /// Requests that failed (server engines), in the order they ended.
    pub failed: Vec<RequestFailed>,
    /// When each request (`requests`) and failure (`failed`) ended by the record's clock, in
    /// their order; `None` in records written before lines carried it.
    pub request_t_s: Vec<Option<f64>>,
    pub failed_t_s: Vec<Option<f64>>,
    pub steps: Vec<StepLine>,
    pub footer: Option<Footer>,
    /// `event` lines (pause, resume, stats_reset, workload_changed, error, run_started).
    pub events: Vec<EventLine>,
    /// Where the last `stats_reset` event fell: (requests, steps) read before it. The run's
    /// printed summary covers only what came after.
    pub last_reset: Option<(usize, usize)>,
    /// Number of `telemetry` lines.
    pub telemetry_lines: usize,
    /// The server's own windows (`--server-metrics`), in order.
    pub server_metrics: Vec<super::line::ServerMetricsLine>,
    /// The server's view folded in line order, exactly as the run folded it.
    pub server: crate::stats::ServerSteady,
    /// Memory and energy, folded over request and telemetry lines in order (as the run did).
    pub resources: super::resources::Resources,
    /// Lines that were not whole JSON (at most the last one after a crash).
    pub bad_lines: usize,
}

/// Reads a run's record (a sweep's record is read by `sweep::record::read`, which parses the
/// file once and tells the two apart).
pub fn read(path: &Path) -> Result<Record, String> {
    Ok(Record::from_lines(path, parse_lines(path)?))
}

/// Every non-empty line of a record, parsed (`None`: not whole JSON, at most the last line
/// after a crash); an error when the file has no header line (not a record).
pub fn parse_lines(path: &Path) -> Result<Vec<Option<Line>>, String> {
    let text = std::fs::read(path).map_err(|e| crate::util::io_error(path, &e))?;
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<Option<Line>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Line>(l).ok())
        .collect();
    let header = lines.iter().find_map(|l| match l {
        Some(Line::Header(h)) => Some(h),
        _ => None,
    });
    match header {
        None => Err(format!(
            "{}: not an infertop record (no header line{}); make one with --record FILE",
            path.display(),
            if lines.is_empty() {
                ", the file is empty"
            } else {
                ""
            }
        )),
        Some(h) => check_format(&path.display().to_string(), h).map(|_| lines),
    }
}

/// Refuses a record written in a newer format than this version reads: its fields may mean
/// something else, and numbers read the old way would be wrong without a word.
pub fn check_format(name: &str, header: &Header) -> Result<(), String> {
    match format_problem(header) {
        Some(why) => Err(format!("{name}: {why}")),
        None => Ok(()),
    }
}

/// Why a record of this header cannot be read here, if it cannot (see `check_format`).
pub fn format_problem(header: &Header) -> Option<String> {
    (header.record_format > super::line::RECORD_FORMAT).then(|| {
        format!(
            "record format {} (written by infertop {}) is newer than this infertop reads \
             (format {}); read it with a newer infertop",
            header.record_format,
            if header.infertop_version.is_empty() {
                "?"
            } else {
                &header.infertop_version
            },
            super::line::RECORD_FORMAT
        )
    })
}

/// Recomputes the summary a run printed from its record. ITL comes from step lines when the run
/// wrote them (`--jsonl-steps`), otherwise from the footer's summary.
pub fn summary_of(path: &Path) -> Result<RunSummary, String> {
    Ok(read(path)?.summary())
}

impl Record {
    /// Folds the lines `parse_lines` read from `path`, in order.
    pub fn from_lines(path: &Path, lines: Vec<Option<Line>>) -> Record {
        let mut rec = Record {
            path: path.to_path_buf(),
            ..Record::default()
        };
        for line in lines {
            match line {
                Some(parsed) => rec.push(parsed),
                None => rec.bad_lines += 1,
            }
        }
        rec
    }

    /// Folds one line in (lines of a sweep's grid are skipped here; see `record::sweep`).
    pub fn push(&mut self, line: Line) {
        match line {
            Line::Header(h) => {
                if let Some(m) = &h.model {
                    self.model = Some(m.clone());
                }
                self.header = Some(*h);
            }
            Line::Event(e) => {
                match &e.event {
                    RunEvent::RunStarted { model, .. } => {
                        // As the run did: the server's view starts with the run.
                        let warmup = self.header.as_ref().map_or(0, |h| h.config.warmup);
                        self.server = crate::stats::ServerSteady::new(warmup);
                        if self.model.is_none() {
                            self.model = Some(model.clone());
                        }
                    }
                    RunEvent::StatsReset => {
                        self.server.reset();
                        self.last_reset = Some((self.requests.len(), self.steps.len()));
                    }
                    _ => {}
                }
                self.events.push(e);
            }
            Line::Telemetry(s) => {
                self.telemetry_lines += 1;
                self.resources.observe_sample(&s);
            }
            Line::Request(r) => {
                self.server.request_ended(r.request.warmup);
                self.resources.observe_request(&r.request);
                self.requests.push(r.request);
                self.request_t_s.push(r.t_s);
            }
            Line::RequestFailed(f) => {
                self.server.request_ended(f.failed.warmup);
                self.failed.push(f.failed);
                self.failed_t_s.push(f.t_s);
            }
            Line::ServerMetrics(m) => {
                self.server.window(&m.window);
                self.server_metrics.push(m);
            }
            Line::Step(s) => self.steps.push(s),
            Line::Footer(f) => self.footer = Some(f),
            Line::NodeMetrics(_) | Line::ScrapeFailed(_) => {}
            Line::Sweep(_) | Line::Cell(_) | Line::CellEnd(_) | Line::Unknown => {}
        }
    }

    /// The summary the run printed, recomputed (see `summary_of`).
    pub fn summary(&self) -> RunSummary {
        summary_of_record(self)
    }

    /// The header's `config`, if the record has a header.
    pub fn config(&self) -> Option<&super::line::RunConfig> {
        self.header.as_ref().map(|h| &h.config)
    }

    /// The SLO the run was started with (`--slo`), if it had one.
    pub fn slo(&self) -> Option<Slo> {
        let slo = self.config()?.slo;
        (!slo.is_empty()).then_some(slo)
    }

    /// `elapsed_s` from the footer (absent when the run was cut off).
    pub fn elapsed_s(&self) -> Option<f64> {
        self.footer.as_ref().map(|f| f.elapsed_s)
    }

    /// The requests the run's statistics covered at the end: those after the last
    /// `stats_reset` event (all of them when there was none), warmup included.
    pub fn counted(&self) -> &[RequestDone] {
        let from = self.last_reset.map_or(0, |r| r.0).min(self.requests.len());
        &self.requests[from..]
    }

    /// The counted steps (see `counted`).
    pub fn counted_steps(&self) -> &[StepLine] {
        let from = self.last_reset.map_or(0, |r| r.1).min(self.steps.len());
        &self.steps[from..]
    }

    /// The steady-state requests: counted and not warmup.
    pub fn steady(&self) -> impl Iterator<Item = &RequestDone> {
        self.counted().iter().filter(|r| !r.warmup)
    }

    /// A field of the header's `config` as text, e.g. `device`, `dtype`, `batch`; `None` when
    /// absent or null.
    pub fn config_str(&self, key: &str) -> Option<String> {
        match self.config_value(key)? {
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    /// A field of the header's `config` as JSON (for comparing two records' configurations).
    pub fn config_value(&self, key: &str) -> Option<Value> {
        serde_json::to_value(self.config()?).ok()?.get(key).cloned()
    }
}

fn summary_of_record(rec: &Record) -> RunSummary {
    let mut stats = RunStats::new();
    let warm: std::collections::HashSet<u64> = rec
        .requests
        .iter()
        .filter(|r| r.warmup)
        .map(|r| r.index)
        .collect();
    // As the run counted them: a request's steps when it completed, in completion order (not
    // those of a request that failed or was cut off by the stop).
    let mut steps: std::collections::HashMap<u64, Vec<f64>> = Default::default();
    for s in rec.counted_steps() {
        steps.entry(s.index).or_default().push(s.itl_s);
    }
    for r in &rec.requests {
        for itl_s in steps.remove(&r.index).unwrap_or_default() {
            stats.record_step(itl_s, warm.contains(&r.index));
        }
    }
    let mut endpoints = crate::stats::EndpointStats::default();
    let mut breakdown = crate::stats::Breakdown::default();
    let mut phases = crate::stats::PhaseStats::default();
    for r in rec.counted() {
        stats.record_request(r);
        endpoints.record_request(r);
        breakdown.observe(r);
        phases.record_request(r);
    }
    for f in &rec.failed {
        endpoints.record_failure(f);
    }
    let mut summary = RunSummary::from_stats(&stats)
        .with_resources(rec.resources.clone())
        .with_failures(rec.failed.len() as u64)
        .with_endpoints(endpoints.summaries())
        .with_phases(phases.summary())
        .with_server(rec.server.summary.clone())
        .with_breakdown(&breakdown);
    if rec.steps.is_empty() {
        if let Some(itl) = footer_metric(rec.footer.as_ref(), "metrics", Metric::Itl) {
            set(&mut summary.steady, Metric::Itl, itl);
        }
        if let Some(itl) = footer_metric(rec.footer.as_ref(), "warmup", Metric::Itl) {
            set(&mut summary.warmup, Metric::Itl, itl);
        }
    }
    summary
}

fn footer_metric(footer: Option<&Footer>, table: &str, m: Metric) -> Option<Summary> {
    let s = footer?.summary.get(table)?.get(m.key())?;
    serde_json::from_value::<Summary>(s.clone()).ok()
}

fn set(table: &mut Table, m: Metric, s: Summary) {
    for row in &mut table.rows {
        if row.0 == m {
            row.1 = s;
        }
    }
}
