//! Reads a JSONL record back, tolerating a last line cut off by a crash or kill -9.

use std::path::Path;

use serde_json::Value;

use crate::event::ModelInfo;
use crate::event::RequestDone;
use crate::stats::{Metric, RunStats, Slo, Summary, Table};

use super::RunSummary;

/// A record read back: its header, requests, steps and footer.
#[derive(Debug, Default)]
pub struct Record {
    /// The file it was read from.
    pub path: std::path::PathBuf,
    pub header: Option<Value>,
    /// The model, from the `run_started` event (or a `model` key in the header).
    pub model: Option<ModelInfo>,
    pub requests: Vec<RequestDone>,
    /// (request index, step, itl_s)
    pub steps: Vec<(u64, u32, f64)>,
    pub footer: Option<Value>,
    /// `event` lines (pause, resume, stats_reset, workload_changed, error, run_started).
    pub events: Vec<Value>,
    /// Where the last `stats_reset` event fell: (requests, steps) read before it. The run's
    /// printed summary covers only what came after.
    pub last_reset: Option<(usize, usize)>,
    /// Number of `telemetry` lines.
    pub telemetry_lines: usize,
    /// Memory and energy, folded over request and telemetry lines in order (as the run did).
    pub resources: super::resources::Resources,
    /// Lines that were not whole JSON (at most the last one after a crash).
    pub bad_lines: usize,
}

pub fn read(path: &Path) -> Result<Record, String> {
    let text = std::fs::read(path).map_err(|e| crate::util::io_error(path, &e))?;
    let text = String::from_utf8_lossy(&text);
    let mut rec = Record {
        path: path.to_path_buf(),
        ..Record::default()
    };
    let mut lines = 0usize;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        lines += 1;
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            rec.bad_lines += 1;
            continue;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("header") => {
                if let Some(m) = v
                    .get("model")
                    .and_then(|m| serde_json::from_value(m.clone()).ok())
                {
                    rec.model = Some(m);
                }
                rec.header = Some(v);
            }
            Some("event") => {
                if v.get("event").and_then(Value::as_str) == Some("run_started")
                    && rec.model.is_none()
                {
                    rec.model = v
                        .get("model")
                        .and_then(|m| serde_json::from_value(m.clone()).ok());
                }
                if v.get("event").and_then(Value::as_str) == Some("stats_reset") {
                    rec.last_reset = Some((rec.requests.len(), rec.steps.len()));
                }
                rec.events.push(v);
            }
            Some("telemetry") => {
                rec.telemetry_lines += 1;
                if let Ok(s) = serde_json::from_value::<crate::event::Sample>(v) {
                    rec.resources.observe_sample(&s);
                }
            }
            Some("request") => {
                if let Ok(r) = serde_json::from_value::<RequestDone>(v) {
                    rec.resources.observe_request(&r);
                    rec.requests.push(r);
                } else {
                    rec.bad_lines += 1;
                }
            }
            Some("step") => {
                let idx = v.get("index").and_then(Value::as_u64);
                let step = v.get("step").and_then(Value::as_u64);
                let itl = v.get("itl_s").and_then(Value::as_f64);
                if let (Some(i), Some(s), Some(t)) = (idx, step, itl) {
                    rec.steps.push((i, s as u32, t));
                }
            }
            Some("footer") => rec.footer = Some(v),
            _ => {}
        }
    }
    if rec.header.is_none() {
        return Err(format!(
            "{}: not an infertop record (no header line{}); make one with --record FILE",
            path.display(),
            if lines == 0 {
                ", the file is empty"
            } else {
                ""
            }
        ));
    }
    Ok(rec)
}

/// Recomputes the summary a run printed from its record. ITL comes from step lines when the run
/// wrote them (`--jsonl-steps`), otherwise from the footer's summary.
pub fn summary_of(path: &Path) -> Result<RunSummary, String> {
    Ok(read(path)?.summary())
}

impl Record {
    /// The summary the run printed, recomputed (see `summary_of`).
    pub fn summary(&self) -> RunSummary {
        summary_of_record(self)
    }

    /// The header's `config` object, if any.
    pub fn config(&self) -> Option<&Value> {
        self.header.as_ref()?.get("config")
    }

    /// The SLO the run was started with (`--slo`), if it had one.
    pub fn slo(&self) -> Option<Slo> {
        let slo: Slo = serde_json::from_value(self.config()?.get("slo")?.clone()).ok()?;
        (!slo.is_empty()).then_some(slo)
    }

    /// `elapsed_s` from the footer (absent when the run was cut off).
    pub fn elapsed_s(&self) -> Option<f64> {
        self.footer.as_ref()?.get("elapsed_s")?.as_f64()
    }

    /// The requests the run's statistics covered at the end: those after the last
    /// `stats_reset` event (all of them when there was none), warmup included.
    pub fn counted(&self) -> &[RequestDone] {
        let from = self.last_reset.map_or(0, |r| r.0).min(self.requests.len());
        &self.requests[from..]
    }

    /// The counted steps (see `counted`).
    pub fn counted_steps(&self) -> &[(u64, u32, f64)] {
        let from = self.last_reset.map_or(0, |r| r.1).min(self.steps.len());
        &self.steps[from..]
    }

    /// The steady-state requests: counted and not warmup.
    pub fn steady(&self) -> impl Iterator<Item = &RequestDone> {
        self.counted().iter().filter(|r| !r.warmup)
    }

    /// A string field of the header's `config`, e.g. `device`, `dtype`, `model`.
    pub fn config_str(&self, key: &str) -> Option<String> {
        match self.config()?.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
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
    for &(index, _, itl) in rec.counted_steps() {
        stats.record_step(itl, warm.contains(&index));
    }
    for r in rec.counted() {
        stats.record_request(r);
    }
    let mut summary = RunSummary::from_stats(&stats).with_resources(rec.resources.clone());
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

fn footer_metric(footer: Option<&Value>, table: &str, m: Metric) -> Option<Summary> {
    let s = footer?.get("summary")?.get(table)?.get(m.key())?;
    serde_json::from_value::<Summary>(s.clone()).ok()
}

fn set(table: &mut Table, m: Metric, s: Summary) {
    for row in &mut table.rows {
        if row.0 == m {
            row.1 = s;
        }
    }
}
