//! Reads a JSONL record back, tolerating a last line cut off by a crash or kill -9.

use std::path::Path;

use serde_json::Value;

use crate::engine::events::RequestDone;
use crate::stats::{Metric, RunStats, Summary, Table};

use super::RunSummary;

/// A record read back: its header, requests, steps and footer.
#[derive(Debug, Default)]
pub struct Record {
    pub header: Option<Value>,
    pub requests: Vec<RequestDone>,
    /// (request index, step, itl_s)
    pub steps: Vec<(u64, u32, f64)>,
    pub footer: Option<Value>,
    /// Lines that were not whole JSON (at most the last one after a crash).
    pub bad_lines: usize,
}

pub fn read(path: &Path) -> Result<Record, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!("{}", crate::model::ModelError::io(path, e))
    })?;
    let text = String::from_utf8_lossy(&text);
    let mut rec = Record::default();
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
            Some("header") => rec.header = Some(v),
            Some("request") => {
                if let Ok(r) = serde_json::from_value::<RequestDone>(v) {
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
            if lines == 0 { ", the file is empty" } else { "" }
        ));
    }
    Ok(rec)
}

/// Recomputes the summary a run printed from its record. ITL comes from step lines when the run
/// wrote them (`--jsonl-steps`), otherwise from the footer's summary.
pub fn summary_of(path: &Path) -> Result<RunSummary, String> {
    let rec = read(path)?;
    let mut stats = RunStats::new();
    let warm: std::collections::HashSet<u64> =
        rec.requests.iter().filter(|r| r.warmup).map(|r| r.index).collect();
    for &(index, _, itl) in &rec.steps {
        stats.record_step(itl, warm.contains(&index));
    }
    for r in &rec.requests {
        stats.record_request(r);
    }
    let mut summary = RunSummary::from_stats(&stats);
    if rec.steps.is_empty() {
        if let Some(itl) = footer_metric(rec.footer.as_ref(), "metrics", Metric::Itl) {
            set(&mut summary.steady, Metric::Itl, itl);
        }
        if let Some(itl) = footer_metric(rec.footer.as_ref(), "warmup", Metric::Itl) {
            set(&mut summary.warmup, Metric::Itl, itl);
        }
    }
    Ok(summary)
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
