//! A sweep's record read back: its header and grid, then per cell the lines between its `cell`
//! and `cell_end` markers as an ordinary run `Record`, so `report` recomputes every cell with
//! the same code as a run's, and `compare` compares two sweeps cell by cell with the same
//! bootstrap. A sweep killed mid-cell keeps that cell's finished requests (without a
//! `cell_end`: it reads as stopped).

use std::path::Path;

use serde::Serialize;

use super::table::BuildColumns;
use super::{CellEnding, CellResult, CellTally};
use crate::event::{CellParams, StopReason};
use crate::record::line::{CellEnd, CellStatus, Footer, Header, Line, RunEvent, SweepConfig};
use crate::record::reader::{read_lines, Record};
use crate::report::compare::{compare_records, CompareOptions, MetricChange, Verdict};
use crate::stats::Slo;
use crate::util::table::{or_missing, TextTable, MISSING};

/// One cell of a sweep's record.
#[derive(Debug)]
pub struct RecordedCell {
    pub cell: usize,
    pub params: CellParams,
    /// The cell's lines as a run's record (header: the sweep's, with the cell's workload).
    pub record: Record,
    /// `None` when the record ends inside the cell.
    pub end: Option<CellEnd>,
}

/// A sweep's record.
#[derive(Debug)]
pub struct SweepRecord {
    pub header: Header,
    pub config: SweepConfig,
    pub cells: Vec<RecordedCell>,
    pub footer: Option<Footer>,
}

/// A record read back: a run's, or a sweep's.
#[derive(Debug)]
pub enum AnyRecord {
    Run(Box<Record>),
    Sweep(Box<SweepRecord>),
}

/// Reads `path` once, line by line, and folds it as a sweep's record when it has the sweep's
/// grid line (line 2 of a sweep's record), else as a run's. `report` and `compare` read every
/// record through this.
pub fn read(path: &Path) -> Result<AnyRecord, String> {
    let mut run = Record::new(path);
    let mut sweep: Option<SweepReading> = None;
    read_lines(path, |line| match (&mut sweep, line) {
        (Some(s), line) => s.push(path, line),
        (None, Some(Line::Sweep(config))) => {
            sweep = Some(SweepReading {
                header: run.header.take(),
                config,
                cells: Vec::new(),
                footer: None,
                open: false,
            })
        }
        (None, line) => run.push(line),
    })?;
    match sweep {
        None => {
            run.finish();
            Ok(AnyRecord::Run(Box::new(run)))
        }
        Some(s) => s
            .done()
            .map(|s| AnyRecord::Sweep(Box::new(s)))
            .ok_or_else(|| format!("{}: a sweep's record without a header", path.display())),
    }
}

/// A sweep's record being read: its grid, and its cells so far.
struct SweepReading {
    header: Option<Header>,
    config: SweepConfig,
    cells: Vec<RecordedCell>,
    footer: Option<Footer>,
    /// Whether the last cell's lines are still coming (no `cell_end` yet).
    open: bool,
}

impl SweepReading {
    /// One line after the grid: a cell's start or end, the sweep's footer, or one of the open
    /// cell's lines (folded as a run's record).
    fn push(&mut self, path: &Path, line: Option<Line>) {
        let Some(line) = line else {
            if let Some(c) = self.cells.last_mut().filter(|_| self.open) {
                c.record.push(None);
            }
            return;
        };
        match line {
            Line::Header(h) => self.header = Some(*h),
            Line::Sweep(s) => self.config = s,
            Line::Cell(c) => {
                self.close_open();
                let mut h = self.header.clone().unwrap_or_default();
                h.config.batch = c.params.batch;
                h.config.prompt_tokens = c.params.prompt_tokens.to_string();
                h.config.output_tokens = c.params.output_tokens.to_string();
                h.config.concurrency = c.params.concurrency;
                h.config.rate = c.params.rate;
                let mut record = Record::new(path);
                record.push(Some(Line::Header(Box::new(h))));
                self.cells.push(RecordedCell {
                    cell: c.cell,
                    params: c.params,
                    record,
                    end: None,
                });
                self.open = true;
            }
            Line::CellEnd(end) => {
                if let Some(c) = self
                    .cells
                    .last_mut()
                    .filter(|c| self.open && c.cell == end.cell)
                {
                    c.record.push(Some(Line::Footer(Footer {
                        stop: StopReason::RequestLimit,
                        elapsed_s: end.elapsed_s,
                        summary: end.summary.clone(),
                    })));
                    c.record.finish();
                    c.end = Some(end);
                }
                self.open = false;
            }
            Line::Footer(f) => self.footer = Some(f),
            other => {
                if let Some(c) = self.cells.last_mut().filter(|_| self.open) {
                    c.record.push(Some(other));
                }
            }
        }
    }

    /// A cell the record ends inside (or a new one starts inside) reads as stopped there.
    fn close_open(&mut self) {
        if let Some(c) = self.cells.last_mut().filter(|_| self.open) {
            c.record.finish();
        }
        self.open = false;
    }

    fn done(mut self) -> Option<SweepRecord> {
        self.close_open();
        Some(SweepRecord {
            header: self.header?,
            config: self.config,
            cells: self.cells,
            footer: self.footer,
        })
    }
}

impl RecordedCell {
    /// The cell's row, recomputed from its lines (the SLO decides goodput): the same tally
    /// as the live fold's, from the same times (request lines' `t_s`), after the cell's last
    /// `stats_reset` as its run counted.
    pub fn result(&self, slo: &Slo) -> CellResult {
        let rec = &self.record;
        let mut tally = CellTally::default();
        let from = rec.last_reset.map_or(0, |r| r.0).min(rec.requests.len());
        for (r, t) in rec.requests.iter().zip(&rec.request_t_s).skip(from) {
            tally.observe(r, *t, slo, rec.model.as_ref());
        }
        let reset_at = rec
            .events
            .iter()
            .filter(|e| e.event == RunEvent::StatsReset)
            .map(|e| e.t_s)
            .next_back();
        for (f, t) in rec.failed.iter().zip(&rec.failed_t_s) {
            if let Some(t) = t.filter(|t| reset_at.is_none_or(|r| *t >= r)) {
                tally.observe_failed(f, t);
            }
        }
        let ending = match &self.end {
            Some(e) => CellEnding {
                status: e.status.clone(),
                reason: e.reason.clone(),
                elapsed_s: e.elapsed_s,
                steady_wall_s: e.steady_wall_s,
                prefix_cache: e.prefix_cache,
            },
            None => CellEnding {
                status: CellStatus::Stopped,
                reason: Some("the record ends inside this cell".into()),
                elapsed_s: 0.0,
                steady_wall_s: None,
                prefix_cache: None,
            },
        };
        let summary = rec.summary();
        CellResult::new(self.cell, self.params.clone(), ending, &summary, &tally)
    }
}

impl SweepRecord {
    pub fn results(&self, slo: &Slo) -> Vec<CellResult> {
        self.cells.iter().map(|c| c.result(slo)).collect()
    }

    /// Cells of the grid with no line in the record (the sweep was cut short).
    pub fn not_run(&self) -> usize {
        self.config.cells.len().saturating_sub(self.cells.len())
    }
}

/// One cell of two sweeps, compared.
#[derive(Clone, Debug, Serialize)]
pub struct CellComparison {
    pub params: CellParams,
    /// TTFT, TPOT and E2E: the median difference (B − A) with its bootstrap CI and verdict.
    pub metrics: Vec<MetricChange>,
    /// Requests of this cell that generated different tokens in B than in A.
    pub outputs_differing: usize,
}

/// Two sweeps compared cell by cell (cells matched by their parameters).
#[derive(Clone, Debug, Serialize)]
pub struct SweepComparison {
    pub base: String,
    pub other: String,
    pub cells: Vec<CellComparison>,
    /// Cells of one sweep the other does not have.
    pub unmatched: Vec<CellParams>,
    pub options: CompareOptions,
    /// What each sweep ran on: its model and dtype (or `varied`, named per cell).
    pub base_build: String,
    pub other_build: String,
    /// Differences that can explain a change by themselves (prefix-cache state).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `synthetic:tiny, f32` (the header's model and dtype; a grid's lists as written).
fn build_of(h: &Header) -> String {
    if h.config.is_server() {
        h.config
            .served_model
            .clone()
            .unwrap_or_else(|| h.config.endpoints.join(", "))
    } else if h.config.device == "cpu" {
        // One thread count per sweep: a sweep of each, compared, tells them apart here.
        let c = &h.config;
        let s = if c.threads == 1 { "" } else { "s" };
        format!("{}, {}, {} thread{s}", c.model, c.dtype, c.threads)
    } else {
        format!(
            "{}, {}, {}",
            h.config.model, h.config.dtype, h.config.device
        )
    }
}

/// Compares `other` against `base` cell by cell, with `compare`'s bootstrap per cell.
pub fn compare_sweeps(
    base: SweepRecord,
    base_name: &str,
    other: SweepRecord,
    other_name: &str,
    opts: &CompareOptions,
) -> SweepComparison {
    let base_build = build_of(&base.header);
    let other_build = build_of(&other.header);
    let warnings = crate::report::compare::cache_warning(&[
        ("A".to_string(), Some(&base.header)),
        ("B".to_string(), Some(&other.header)),
    ])
    .into_iter()
    .collect();
    let mut other_cells: Vec<Option<RecordedCell>> = other.cells.into_iter().map(Some).collect();
    let mut cells = Vec::new();
    let mut unmatched = Vec::new();
    for a in base.cells {
        let found = other_cells
            .iter_mut()
            .find(|b| b.as_ref().is_some_and(|b| b.params == a.params))
            .and_then(Option::take);
        let Some(b) = found else {
            unmatched.push(a.params);
            continue;
        };
        let params = a.params.clone();
        let cmp = compare_records(&[a.record, b.record], opts);
        let (metrics, outputs_differing) = cmp
            .pairs
            .into_iter()
            .next()
            .map(|p| {
                (
                    p.metrics
                        .into_iter()
                        .filter(|m| m.median_diff.is_some())
                        .collect(),
                    p.outputs.differing,
                )
            })
            .unwrap_or_default();
        cells.push(CellComparison {
            params,
            metrics,
            outputs_differing,
        });
    }
    unmatched.extend(other_cells.into_iter().flatten().map(|c| c.params));
    SweepComparison {
        base: base_name.to_string(),
        other: other_name.to_string(),
        cells,
        unmatched,
        options: *opts,
        base_build,
        other_build,
        warnings,
    }
}

fn signed_ms(v: f64) -> String {
    format!("{}{:.3} ms", if v < 0.0 { "−" } else { "+" }, v.abs() * 1e3)
}

impl SweepComparison {
    /// `compare`'s exit code: 3 when any cell generated different outputs.
    pub fn exit_code(&self) -> i32 {
        if self.cells.iter().any(|c| c.outputs_differing > 0) {
            crate::exit::EXIT_OUTPUTS_DIFFER
        } else {
            0
        }
    }

    pub fn to_markdown(&self) -> String {
        let o = &self.options;
        let mut out = format!(
            "\n## {} vs {}, cell by cell\n\nMedian of B − median of A with a bootstrap {:.0} % CI ({} resamples, seed {}); B = `{}` ({}), A = `{}` ({}).\n\n",
            self.other, self.base, o.confidence * 100.0, o.resamples, o.seed, self.other, self.other_build, self.base, self.base_build
        );
        for w in &self.warnings {
            out.push_str(&format!("Warning: {w}.\n\n"));
        }
        let columns = BuildColumns::of(self.cells.iter().map(|c| &c.params));
        let mut t = columns
            .columns(TextTable::new())
            .right(["batch"])
            .left(["prompt", "output"])
            .right(["conc", "rate"])
            .left(["TTFT", "TPOT", "E2E"]);
        for c in &self.cells {
            let p = &c.params;
            let verdict = |key: &str| {
                c.metrics
                    .iter()
                    .find(|m| m.metric == key)
                    .and_then(|m| Some((m.median_diff?, m.verdict?)))
                    .map_or(MISSING.to_string(), |(d, v)| {
                        let word = match v {
                            Verdict::Faster | Verdict::Slower => format!("**{}**", v.words()),
                            _ => v.words().to_string(),
                        };
                        format!(
                            "{word} {} [{}, {}] (n {} vs {})",
                            signed_ms(d.diff),
                            signed_ms(d.lo),
                            signed_ms(d.hi),
                            d.n_base,
                            d.n_other
                        )
                    })
            };
            let mut row = columns.cells(p);
            row.extend([
                p.batch.to_string(),
                p.prompt_tokens.to_string(),
                p.output_tokens.to_string(),
                or_missing(p.concurrency.map(|x| x.to_string())),
                or_missing(p.rate.map(|x| x.to_string())),
                verdict("ttft_s"),
                verdict("tpot_s"),
                verdict("e2e_s"),
            ]);
            t.row(row);
        }
        out.push_str(&t.markdown());
        for c in self.cells.iter().filter(|c| c.outputs_differing > 0) {
            out.push_str(&format!(
                "\n**!!! OUTPUTS DIFFER in cell {}: {} requests generated different tokens**\n",
                c.params.words(),
                c.outputs_differing
            ));
        }
        for p in &self.unmatched {
            out.push_str(&format!("\n- Only in one sweep: {}.", p.words()));
        }
        if !self.unmatched.is_empty() {
            out.push('\n');
        }
        out
    }

    pub fn to_json(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(obj) = v.as_object_mut() {
            obj.insert("type".into(), "sweep_comparison".into());
        }
        v.to_string() + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record_of(lines: &[Line]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.jsonl");
        let text: Vec<String> = lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap())
            .collect();
        std::fs::write(&path, text.join("\n") + "\n").unwrap();
        (dir, path)
    }

    #[test]
    fn one_read_tells_a_sweep_from_a_run() {
        let header = Line::Header(Box::default());
        let (_dir, run) = record_of(std::slice::from_ref(&header));
        assert!(matches!(read(&run), Ok(AnyRecord::Run(r)) if r.header.is_some()));
        let sweep = Line::Sweep(SweepConfig::default());
        let (_dir, path) = record_of(&[header, sweep]);
        assert!(matches!(read(&path), Ok(AnyRecord::Sweep(s)) if s.cells.is_empty()));
        let (_dir, headless) = record_of(&[Line::Sweep(SweepConfig::default())]);
        assert!(read(&headless).is_err(), "no header: not a record");
    }
}
