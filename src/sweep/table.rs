//! The sweep's table, llama-bench style but with tails: one row per cell (its parameters, TTFT,
//! TPOT, ITL and E2E at p50/p90/p99 with n, throughputs, peak memory; thinking apart from
//! answering and each served model, where the cells had them), then the findings in words. Markdown, CSV, one JSON document, or JSON lines (one per cell, then the findings).

use serde_json::{json, Value};

use super::analysis::Findings;
use super::{is_server, CellResult};
use crate::event::{CellParams, FloatDtype};
use crate::record::line::{CellStatus, PrefixCache};
use crate::stats::Summary;
use crate::util::table::{or_missing, TextTable, MISSING};

/// `infertop sweep --format` (and `report` of a sweep record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepFormat {
    #[default]
    #[value(alias = "markdown")]
    Md,
    Csv,
    /// One document.
    Json,
    /// A line per cell.
    Jsonl,
}

impl SweepFormat {
    /// The run's summary format that goes with it (a cell's own summary in the record).
    pub fn summary_format(self) -> crate::summary::SummaryFormat {
        use crate::summary::SummaryFormat;
        match self {
            SweepFormat::Md => SummaryFormat::Md,
            SweepFormat::Csv => SummaryFormat::Csv,
            SweepFormat::Json | SweepFormat::Jsonl => SummaryFormat::Json,
        }
    }
}

/// A finished (or interrupted) sweep as printed.
#[derive(Clone, Debug)]
pub struct SweepTable<'a> {
    /// One line above the table: the model, device and how cells were measured.
    pub title: String,
    pub cells: &'a [CellResult],
    pub findings: &'a Findings,
    /// Cells of the grid that never ran (the sweep was interrupted).
    pub not_run: usize,
    /// Why the sweep ended early, in words.
    pub interrupted: Option<String>,
}

fn ms(v: f64) -> String {
    format!("{:.3}", v * 1e3)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    or_missing(v.map(|x| format!("{x:.digits$}")))
}

/// `512MiB`, `1.20GiB` (see `util::format`).
pub fn mem(bytes: Option<u64>) -> String {
    or_missing(bytes.map(crate::util::format::bytes))
}

fn tails(s: &Summary) -> [String; 3] {
    if s.n == 0 {
        return [MISSING.into(), MISSING.into(), MISSING.into()];
    }
    [ms(s.p50), ms(s.p90), ms(s.p99)]
}

fn status_text(c: &CellResult) -> String {
    match (&c.status, &c.reason) {
        (CellStatus::Ok, r) => {
            let mut notes = Vec::new();
            if c.failed_requests > 0 {
                notes.push(format!("{} failed requests", c.failed_requests));
            }
            notes.extend(r.clone());
            if notes.is_empty() {
                "ok".into()
            } else {
                format!("ok ({})", notes.join("; "))
            }
        }
        (CellStatus::Failed, r) => format!("FAILED: {}", r.as_deref().unwrap_or("?")),
        (CellStatus::Stopped, r) => r.clone().unwrap_or_else(|| "stopped".into()),
    }
}

/// A cell as one JSON object (`json` lists them, `jsonl` prints one per line).
pub fn cell_json(c: &CellResult) -> Value {
    let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("type".into(), "sweep_cell".into());
    }
    v
}

impl SweepTable<'_> {
    fn server(&self) -> bool {
        self.cells.iter().any(|c| is_server(&c.params))
    }

    pub fn render(&self, format: SweepFormat) -> String {
        match format {
            SweepFormat::Md => self.to_markdown(),
            SweepFormat::Csv => self.to_csv(),
            SweepFormat::Json => self.to_json().to_string() + "\n",
            SweepFormat::Jsonl => {
                let mut out = String::new();
                for c in self.cells {
                    out.push_str(&cell_json(c).to_string());
                    out.push('\n');
                }
                let mut f = serde_json::to_value(self.findings).unwrap_or(Value::Null);
                if let Some(obj) = f.as_object_mut() {
                    obj.insert("type".into(), "sweep_findings".into());
                    obj.insert("not_run".into(), self.not_run.into());
                    obj.insert("interrupted".into(), json!(self.interrupted));
                }
                out.push_str(&f.to_string());
                out.push('\n');
                out
            }
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "type": "sweep",
            "title": self.title,
            "cells": self.cells.iter().map(cell_json).collect::<Vec<_>>(),
            "findings": self.findings,
            "not_run": self.not_run,
            "interrupted": self.interrupted,
        })
    }

    fn to_markdown(&self) -> String {
        let server = self.server();
        let build = BuildColumns::of(self.cells.iter().map(|c| &c.params));
        let mut out = format!("\n{}\n\n", self.title);
        let reasoning = self.cells.iter().any(|c| c.reasoning.is_some());
        let mut t = build
            .columns(TextTable::new().right(["cell"]))
            .right(["batch"])
            .left(["prompt", "output"]);
        if server {
            t = t.right(["conc", "rate"]);
        }
        t = t.right([
            "n", "TTFT p50", "p90", "p99", "TPOT p50", "p90", "p99", "ITL p50", "p90", "p99",
            "E2E p50", "p90", "p99",
        ]);
        if reasoning {
            t = t.right(["TTFA p50", "p99", "think p50"]);
        }
        t = if server {
            t.right(["out tok/s", "held s", "goodput seq/s"])
        } else {
            t.right(["prefill tok/s", "decode tok/s"])
        };
        t = t.right(["peak mem"]).left(["status"]);
        for c in self.cells {
            let p = &c.params;
            let mut row = vec![c.cell.to_string()];
            row.extend(build.cells(p));
            row.extend([
                p.batch.to_string(),
                p.prompt_tokens.to_string(),
                p.output_tokens.to_string(),
            ]);
            if server {
                row.extend([
                    or_missing(p.concurrency.map(|x| x.to_string())),
                    or_missing(p.rate.map(|x| x.to_string())),
                ]);
            }
            row.push(c.n.to_string());
            for s in [&c.ttft, &c.tpot, &c.itl, &c.e2e] {
                row.extend(tails(s));
            }
            if reasoning {
                let cell = |s: Option<&Summary>, v: fn(&Summary) -> f64| {
                    or_missing(s.filter(|s| s.n > 0).map(|s| ms(v(s))))
                };
                let r = c.reasoning.as_ref();
                row.extend([
                    cell(r.map(|r| &r.ttfa_s), |s| s.p50),
                    cell(r.map(|r| &r.ttfa_s), |s| s.p99),
                    cell(r.map(|r| &r.reasoning_s), |s| s.p50),
                ]);
            }
            if server {
                row.extend([
                    opt(c.output_tok_s, 1),
                    opt(c.held_s, 2),
                    opt(c.goodput_seq_s, 2),
                ]);
            } else {
                row.extend([opt(c.prefill_tok_s, 1), opt(c.decode_tok_s, 1)]);
            }
            row.extend([mem(c.peak_memory_bytes), status_text(c)]);
            t.row(row);
        }
        out.push_str(&t.markdown());
        out.push_str(
            "\nLatencies in ms over each cell's steady requests (warmup excluded); n = steady requests (ITL: their decode steps).\n",
        );
        if server {
            out.push_str(
                "Output tok/s and goodput over the interval the cell's load was held (held s: from the moment all its requests were in flight to the first end of the drain), not over ramp-up and drain.\n",
            );
            let cold = self
                .cells
                .iter()
                .filter(|c| c.prefix_cache == Some(PrefixCache::Cold))
                .count();
            out.push_str(&match cold {
                0 => "Server prefix cache: not emptied between cells (warm: a cell may be served from prompts an earlier one sent; --reset-prefix-cache empties it before each).\n".to_string(),
                n if n == self.cells.len() => "Server prefix cache: emptied before every cell (cold).\n".to_string(),
                n => format!("Server prefix cache: emptied before {n} of {} cells.\n", self.cells.len()),
            });
        }
        if reasoning {
            out.push_str("TTFA: the first answer token (TTFT counts reasoning too); think: the reasoning's time, first reasoning token to first answer token.\n");
        }
        for c in self.cells.iter().filter(|c| !c.models.is_empty()) {
            let parts: Vec<String> = c
                .models
                .iter()
                .map(|m| {
                    let p = |s: &Summary, v: f64| or_missing((s.n > 0).then(|| ms(v)));
                    format!(
                        "{} n {} (failed {}): TTFT p50 {} p99 {}, TPOT p50 {}, E2E p50 {}",
                        m.model,
                        m.requests,
                        m.failed,
                        p(&m.ttft_s, m.ttft_s.p50),
                        p(&m.ttft_s, m.ttft_s.p99),
                        p(&m.tpot_s, m.tpot_s.p50),
                        p(&m.e2e_s, m.e2e_s.p50)
                    )
                })
                .collect();
            out.push_str(&format!(
                "Cell {} by model: {}.\n",
                c.cell,
                parts.join("; ")
            ));
        }
        out.push_str(&self.split_markdown());
        out.push_str(&self.spec_markdown());
        if let Some(why) = &self.interrupted {
            out.push_str(&format!(
                "\nThe sweep was {why}; {} cell{} not run.\n",
                self.not_run,
                if self.not_run == 1 { "" } else { "s" }
            ));
        }
        out.push_str(&self.findings.to_markdown(self.cells));
        out
    }

    /// Where each cell's TTFT went, by the server's own timings (cells whose server sent
    /// them), in a table of its own under the grid.
    fn split_markdown(&self) -> String {
        use crate::stats::Part;
        if self.cells.iter().all(|c| c.ttft_split.is_none()) {
            return String::new();
        }
        let mut t = TextTable::new()
            .right([
                "cell",
                "conc",
                "rate",
                "n",
                "TTFT p50",
                "p99",
                "queue p50",
                "p99",
                "prefill p50",
                "p99",
                "network+client p50",
                "p99",
            ])
            .left(["grows with load"]);
        for c in self.cells {
            let Some(split) = &c.ttft_split else { continue };
            let p = &c.params;
            let mut row = vec![
                c.cell.to_string(),
                or_missing(p.concurrency.map(|x| x.to_string())),
                or_missing(p.rate.map(|x| x.to_string())),
                split.requests.to_string(),
            ];
            let pair = |s: &Summary| {
                let v = |x: f64| or_missing((s.n > 0).then(|| ms(x)));
                [v(s.p50), v(s.p99)]
            };
            row.extend(pair(&split.ttft));
            for part in Part::TTFT {
                row.extend(pair(&split.get(part)));
            }
            row.push(split.grows.map_or(MISSING, |p| p.label()).to_string());
            t.row(row);
        }
        "\nWhere the TTFT went, by the server's own timings (ms):\n\n".to_string() + &t.markdown()
    }

    /// Speculative decoding in each cell whose server drafted: acceptance (the cell's
    /// token-weighted share, and each request's at p50 and p90),
    /// accepted per verify step, and the TPOT beside it, so a rising load's effect on drafting
    /// shows cell by cell.
    fn spec_markdown(&self) -> String {
        if self.cells.iter().all(|c| c.spec.is_none()) {
            return String::new();
        }
        let mut t = TextTable::new().right([
            "cell",
            "conc",
            "rate",
            "n",
            "accepted / drafted",
            "acceptance p50",
            "p90",
            "accepted per step",
            "TPOT p50 (ms)",
            "TPOT vs acceptance r",
        ]);
        let pct = |v: f64| format!("{:.1}%", 100.0 * v);
        for c in self.cells {
            let Some(spec) = &c.spec else { continue };
            let p = &c.params;
            let acc = &spec.acceptance;
            t.row([
                c.cell.to_string(),
                or_missing(p.concurrency.map(|x| x.to_string())),
                or_missing(p.rate.map(|x| x.to_string())),
                spec.requests.to_string(),
                or_missing(
                    spec.token_acceptance()
                        .map(|a| format!("{} ({})", spec.accepted, pct(a))),
                ),
                or_missing((acc.n > 0).then(|| pct(acc.p50))),
                or_missing((acc.n > 0).then(|| pct(acc.p90))),
                or_missing(spec.mean_accepted_per_step().map(|a| format!("{a:.2}"))),
                or_missing((c.tpot.n > 0).then(|| ms(c.tpot.p50))),
                or_missing(spec.tpot_correlation.map(|r| format!("{r:+.2}"))),
            ]);
        }
        "\nSpeculative decoding, by the server's count:\n\n".to_string() + &t.markdown()
    }

    fn to_csv(&self) -> String {
        let mut head: Vec<String> = [
            "cell",
            "status",
            "batch",
            "prompt_tokens",
            "output_tokens",
            "concurrency",
            "rate",
            "n",
            "warmup_requests",
            "failed_requests",
        ]
        .map(String::from)
        .to_vec();
        for m in ["ttft", "tpot", "itl", "e2e"] {
            head.extend(["p50_s", "p90_s", "p99_s", "n"].map(|q| format!("{m}_{q}")));
        }
        head.extend(
            [
                "prefill_tok_s",
                "decode_tok_s",
                "output_tok_s",
                "goodput_seq_s",
                "peak_memory_bytes",
                "reason",
                "model",
                "dtype",
                "threads",
                "held_s",
                "wall_output_tok_s",
                "prefix_cache",
                "queue_p50_s",
                "queue_p99_s",
                "prefill_p50_s",
                "prefill_p99_s",
                "network_client_p50_s",
                "network_client_p99_s",
                "ttfa_p50_s",
                "ttfa_p99_s",
                "ttfa_n",
                "reasoning_p50_s",
                "reasoning_p99_s",
                "reasoning_tokens_p50",
                "reasoning_requests",
                "tool_call_requests",
                "ended_in_tool_call",
            ]
            .map(String::from),
        );
        // The served models (`--served-model a=3,b=1`) in the order the cells first name them:
        // a group of columns each, as the markdown's "by model" lines.
        let mut models: Vec<&str> = Vec::new();
        for m in self.cells.iter().flat_map(|c| &c.models) {
            if !models.contains(&m.model.as_str()) {
                models.push(&m.model);
            }
        }
        for m in &models {
            head.extend(MODEL_COLUMNS.map(|q| format!("served_model_{m}_{q}")));
        }
        let num = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
        let count = |v: Option<usize>| v.map_or(String::new(), |x| x.to_string());
        // A figure's quantile, empty when it has no samples.
        let q = |s: Option<&Summary>, v: fn(&Summary) -> f64| num(s.filter(|s| s.n > 0).map(v));
        let mut rows = vec![head];
        for c in self.cells {
            let p = &c.params;
            let status = serde_json::to_value(&c.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let mut row = vec![
                c.cell.to_string(),
                status,
                p.batch.to_string(),
                p.prompt_tokens.to_string(),
                p.output_tokens.to_string(),
                count(p.concurrency),
                num(p.rate),
                c.n.to_string(),
                c.warmup_requests.to_string(),
                c.failed_requests.to_string(),
            ];
            for s in [&c.ttft, &c.tpot, &c.itl, &c.e2e] {
                let v = |x: f64| {
                    if s.n > 0 {
                        x.to_string()
                    } else {
                        String::new()
                    }
                };
                row.extend([v(s.p50), v(s.p90), v(s.p99), s.n.to_string()]);
            }
            let cache = match c.prefix_cache {
                Some(PrefixCache::Cold) => "cold",
                Some(PrefixCache::Warm) => "warm",
                None => "",
            };
            row.extend([
                num(c.prefill_tok_s),
                num(c.decode_tok_s),
                num(c.output_tok_s),
                num(c.goodput_seq_s),
                c.peak_memory_bytes.map_or(String::new(), |x| x.to_string()),
                c.reason.clone().unwrap_or_default(),
                p.model.clone().unwrap_or_default(),
                p.dtype.map(|d| d.to_string()).unwrap_or_default(),
                count(p.threads),
                num(c.held_s),
                num(c.wall_output_tok_s),
                cache.to_string(),
            ]);
            for part in crate::stats::Part::TTFT {
                let s = c.ttft_split.as_ref().map(|t| t.get(part));
                let s = s.filter(|s| s.n > 0);
                row.extend([num(s.map(|s| s.p50)), num(s.map(|s| s.p99))]);
            }
            let r = c.reasoning.as_ref();
            let counted = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
            row.extend([
                q(r.map(|r| &r.ttfa_s), |s| s.p50),
                q(r.map(|r| &r.ttfa_s), |s| s.p99),
                counted(r.map(|r| r.ttfa_s.n as u64)),
                q(r.map(|r| &r.reasoning_s), |s| s.p50),
                q(r.map(|r| &r.reasoning_s), |s| s.p99),
                q(r.map(|r| &r.reasoning_tokens), |s| s.p50),
                counted(r.map(|r| r.reasoning_requests)),
                counted(r.map(|r| r.tool_call_requests)),
                counted(r.map(|r| r.ended_in_tool_call)),
            ]);
            for name in &models {
                match c.models.iter().find(|m| m.model == *name) {
                    Some(m) => row.extend([
                        m.requests.to_string(),
                        m.failed.to_string(),
                        q(Some(&m.ttft_s), |s| s.p50),
                        q(Some(&m.ttft_s), |s| s.p99),
                        q(Some(&m.ttfa_s), |s| s.p50),
                        q(Some(&m.tpot_s), |s| s.p50),
                        q(Some(&m.e2e_s), |s| s.p50),
                    ]),
                    None => row.extend(MODEL_COLUMNS.map(|_| String::new())),
                }
            }
            rows.push(row);
        }
        crate::util::csv_text(rows)
    }
}

/// Each served model's columns in the CSV, after `served_model_{name}_`.
const MODEL_COLUMNS: [&str; 7] = [
    "n",
    "failed",
    "ttft_p50_s",
    "ttft_p99_s",
    "ttfa_p50_s",
    "tpot_p50_s",
    "e2e_p50_s",
];

/// The Markdown columns of a llama-bench-style grid (model, dtype, threads), each shown only
/// when some cell names it: the sweep's table and the comparison of two sweeps write the same.
pub(crate) struct BuildColumns {
    model: bool,
    dtype: bool,
    threads: bool,
}

impl BuildColumns {
    pub(crate) fn of<'a>(cells: impl Iterator<Item = &'a CellParams> + Clone) -> Self {
        let any = |f: fn(&CellParams) -> bool| cells.clone().any(f);
        BuildColumns {
            model: any(|p| p.model.is_some()),
            dtype: any(|p| p.dtype.is_some()),
            threads: any(|p| p.threads.is_some()),
        }
    }

    /// The table with the shown columns added.
    pub(crate) fn columns(&self, t: TextTable) -> TextTable {
        let mut t = t;
        if self.model {
            t = t.left(["model"]);
        }
        if self.dtype {
            t = t.left(["dtype"]);
        }
        if self.threads {
            t = t.right(["threads"]);
        }
        t
    }

    /// One cell's values of the shown columns (`MISSING` where it names none).
    pub(crate) fn cells(&self, p: &CellParams) -> Vec<String> {
        let mut row = Vec::new();
        if self.model {
            row.push(p.model.as_deref().unwrap_or(MISSING).to_string());
        }
        if self.dtype {
            row.push(p.dtype.map_or(MISSING, FloatDtype::name).to_string());
        }
        if self.threads {
            row.push(or_missing(p.threads.map(|t| t.to_string())));
        }
        row
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::sweep::analysis::Findings;
    use crate::sweep::{CellResult, LoadAxis};

    /// A model named with a comma and a quote, and a reason with both, read back by a CSV
    /// reader as the fields they were: quoted, the quotes doubled.
    #[test]
    fn csv_fields_with_commas_and_quotes_read_back_whole() {
        let model = r#"/models/a,"b" c"#;
        let reason = r#"HTTP 500: "boom", twice"#;
        let cell = CellResult {
            cell: 0,
            params: CellParams {
                batch: 1,
                model: Some(model.into()),
                dtype: Some(FloatDtype::Bf16),
                ..CellParams::default()
            },
            status: CellStatus::Failed,
            reason: Some(reason.into()),
            n: 3,
            warmup_requests: 1,
            failed_requests: 2,
            steady_failed: 2,
            ttft: Summary::of(&[0.01, 0.02, 0.03]),
            tpot: Summary::default(),
            itl: Summary::default(),
            e2e: Summary::default(),
            ntpot: Summary::default(),
            sustain: None,
            prefill_tok_s: Some(1.5),
            decode_tok_s: None,
            output_tok_s: None,
            goodput_seq_s: None,
            requests_s: None,
            held_s: None,
            wall_output_tok_s: None,
            slo_met_share: None,
            peak_memory_bytes: Some(1024),
            decode_bw_bytes_s: None,
            prefix_cache: Some(PrefixCache::Cold),
            elapsed_s: 1.0,
            models: Vec::new(),
            reasoning: None,
            ttft_split: None,
            spec: None,
        };
        let findings = Findings {
            axis: LoadAxis::Batch,
            slo: Default::default(),
            knees: Vec::new(),
            best: Vec::new(),
            saturation: Vec::new(),
            roofline: None,
            roofline_unavailable: None,
            searches: Vec::new(),
            ttft_split: Vec::new(),
        };
        let cells = [cell];
        let table = SweepTable {
            title: String::new(),
            cells: &cells,
            findings: &findings,
            not_run: 0,
            interrupted: None,
        };
        let text = table.render(SweepFormat::Csv);
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let head = r.headers().unwrap().clone();
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1);
        let field = |name: &str| {
            let i = head.iter().position(|h| h == name).unwrap();
            rows[0].get(i).unwrap().to_string()
        };
        assert_eq!(field("model"), model);
        assert_eq!(field("reason"), reason);
        assert_eq!(field("dtype"), "bf16");
        assert_eq!(field("status"), "failed");
        assert_eq!(field("prefix_cache"), "cold");
        assert_eq!(field("ttft_n"), "3");
        // No reasoning and no served models: their columns are there, empty.
        assert_eq!(
            (field("ttfa_p50_s"), field("reasoning_requests")),
            ("".into(), "".into())
        );
        assert!(!head.iter().any(|h| h.starts_with("served_model_")));
        assert_eq!(rows[0].len(), head.len());
    }
}
