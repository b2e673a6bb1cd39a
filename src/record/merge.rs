//! Several records as one run: many load generators (one headless infertop per client machine)
//! against one service. Percentiles cannot be merged from summaries (a p99 of p99s is no
//! p99), so the union is built from the raw samples: every counted request of every record
//! (after its own last `stats_reset`), every failure, and every step when all of them wrote
//! step lines. `report` and `compare` then read the union as they read one record, so its
//! numbers are numpy's over the union, with n summed.
//!
//! Clocks: each record counts its `t_s` from its own start, and nothing here needs the
//! machines' clocks to agree: the union's time axis is aligned at the starts (second 10 of
//! every record is second 10 of the union). Sources started together (one `ssh` line each, a
//! job array) line up to within their start skew.

use super::line::{FailedLine, Line, RequestLine};
use super::reader::Record;
use super::RunSummary;

/// One record of a merge, as its own row.
#[derive(Clone, Debug)]
pub struct SourceSummary {
    /// The file, as given.
    pub name: String,
    /// What the record alone recomputes to (`report` of that one file).
    pub summary: RunSummary,
    /// Seconds its requests spanned on its own clock (first start to last end), if it has times.
    pub span_s: Option<f64>,
    /// Whether it ended with a footer.
    pub complete: bool,
}

/// The union of several records, and each as a row.
#[derive(Debug)]
pub struct Merged {
    pub record: Record,
    pub sources: Vec<SourceSummary>,
    /// What the union leaves out, in one line each.
    pub notes: Vec<String>,
}

/// How the time axes are aligned, in one sentence (report and the README say it).
pub const ALIGNMENT: &str = "each record keeps its own clock (seconds since its own start); \
     the union is aligned at the starts, so no synchronized clocks are needed";

/// Merges `parts` (two or more runs' records) into one, in the order given.
pub fn merge(parts: Vec<Record>) -> Merged {
    let mut notes = Vec::new();
    let every_has_steps = parts.iter().all(|p| !p.steps.is_empty());
    let some_have_steps = parts.iter().any(|p| !p.steps.is_empty());
    if some_have_steps && !every_has_steps {
        notes.push(
            "ITL is left out: only some records have step lines (--jsonl-steps), and ITL \
             percentiles cannot be merged from the others' summaries"
                .to_string(),
        );
    } else if !some_have_steps {
        notes.push(
            "ITL is left out: the records have no step lines (--jsonl-steps), and ITL \
             percentiles cannot be merged from their summaries"
                .to_string(),
        );
    }
    if parts.iter().any(|p| !p.server_metrics.is_empty()) {
        notes.push(
            "the server's own metrics are not merged (each record scraped its own view of it); \
             see each record's report"
                .to_string(),
        );
    }
    let name = parts
        .iter()
        .map(|p| p.path.display().to_string())
        .collect::<Vec<_>>()
        .join("+");
    let mut union = Record::new(std::path::Path::new(&name));
    if let Some(h) = parts.first().and_then(|p| p.header.clone()) {
        union.push(Some(Line::Header(Box::new(h))));
    }
    union.model = parts.first().and_then(|p| p.model.clone());
    // Requests, failures and steps as lines, each tagged with its aligned time and its place,
    // so the union is in time order (record order where times are missing or equal).
    let mut lines: Vec<(f64, usize, usize, Line)> = Vec::new();
    let mut sources = Vec::new();
    let mut offset = 0u64;
    for (k, part) in parts.into_iter().enumerate() {
        let summary = part.summary();
        let span_s = span(&part);
        let counted_from = part.requests.len() - part.counted().len();
        let mut top = 0u64;
        let mut place = 0usize;
        for (i, r) in part.requests.iter().enumerate() {
            top = top.max(r.index + 1);
            if i < counted_from {
                continue;
            }
            let mut r = r.clone();
            r.index += offset;
            let t = part.request_t_s.get(i).copied().flatten();
            lines.push((
                t.unwrap_or(f64::NAN),
                k,
                place,
                Line::Request(RequestLine::of(&r, t)),
            ));
            place += 1;
        }
        for (i, f) in part.failed.iter().enumerate() {
            top = top.max(f.index + 1);
            let mut f = f.clone();
            f.index += offset;
            let t = part.failed_t_s.get(i).copied().flatten();
            let line = Line::RequestFailed(FailedLine { failed: f, t_s: t });
            lines.push((t.unwrap_or(f64::NAN), k, place, line));
            place += 1;
        }
        if every_has_steps {
            for s in part.counted_steps() {
                let mut s = *s;
                s.index += offset;
                lines.push((s.t_s.unwrap_or(f64::NAN), k, place, Line::Step(s)));
                place += 1;
            }
        }
        union.bad_lines += part.bad_lines;
        union.telemetry_lines += part.telemetry_lines;
        sources.push(SourceSummary {
            name: part.path.display().to_string(),
            summary,
            span_s,
            complete: part.footer.is_some(),
        });
        offset += top;
    }
    // NaN (no time) sorts as equal to everything before it would be wrong: without times in
    // every line, keep the records' own order (requests, then failures, then steps, record by
    // record).
    if lines.iter().all(|l| !l.0.is_nan()) {
        lines.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    }
    for (_, _, _, line) in lines {
        union.push(Some(line));
    }
    // The union has no footer of its own: it ends where its last line does.
    union.flush();
    Merged {
        record: union,
        sources,
        notes,
    }
}

/// First start to last end of a record's requests on its own clock.
fn span(rec: &Record) -> Option<f64> {
    let mut first: Option<f64> = None;
    let mut last: Option<f64> = None;
    for (r, t) in rec.requests.iter().zip(&rec.request_t_s) {
        let Some(t) = *t else { continue };
        let start = t - r.e2e_s;
        first = Some(first.map_or(start, |f: f64| f.min(start)));
        last = Some(last.map_or(t, |l: f64| l.max(t)));
    }
    Some(last? - first?).filter(|s| s.is_finite() && *s >= 0.0)
}

impl Merged {
    /// The per-source rows and the notes as markdown, after the union's report.
    pub fn to_markdown(&self) -> String {
        use crate::util::format::ms;
        let mut out = format!(
            "\n## Sources ({} records as one run)\n\nThe table above is over the union of their \
             raw samples (n summed, numpy's percentiles); {ALIGNMENT}.\n\n\
             | source | requests | failed | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | E2E p50 | span |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            self.sources.len()
        );
        for s in &self.sources {
            let get = |m| s.summary.steady.get(m);
            let q = |m, p: fn(&crate::stats::Summary) -> f64| {
                let v = get(m);
                if v.n == 0 {
                    "-".to_string()
                } else {
                    ms(p(&v))
                }
            };
            use crate::stats::Metric::{E2e, Tpot, Ttft};
            out.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.name,
                if s.complete { "" } else { " (no footer)" },
                s.summary.requests,
                s.summary.failed_requests,
                q(Ttft, |v| v.p50),
                q(Ttft, |v| v.p99),
                q(Tpot, |v| v.p50),
                q(Tpot, |v| v.p99),
                q(E2e, |v| v.p50),
                s.span_s.map_or("-".into(), |v| format!("{v:.1} s")),
            ));
        }
        for n in &self.notes {
            out.push_str(&format!("\nNote: {n}.\n"));
        }
        out
    }

    /// The per-source rows and notes as JSON (`sources`, `merge_notes`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "sources": self.sources.iter().map(|s| serde_json::json!({
                "record": s.name,
                "complete": s.complete,
                "span_s": s.span_s,
                "summary": s.summary.to_json(),
            })).collect::<Vec<_>>(),
            "alignment": ALIGNMENT,
            "merge_notes": self.notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RequestDone;
    use crate::record::line::{EventLine, RunEvent};
    use crate::stats::Metric;

    fn record(name: &str, ttfts: &[f64], reset_after: Option<usize>) -> Record {
        let mut rec = Record::new(std::path::Path::new(name));
        rec.push(Some(Line::Header(Box::default())));
        for (i, &t) in ttfts.iter().enumerate() {
            let r = RequestDone {
                index: i as u64,
                warmup: false,
                batch: 1,
                prompt_tokens: 4,
                output_tokens: 1,
                ttft_s: t,
                tpot_s: None,
                e2e_s: t,
                ..Default::default()
            };
            rec.push(Some(Line::Request(RequestLine::of(
                &r,
                Some(i as f64 + 1.0),
            ))));
            if reset_after == Some(i) {
                rec.push(Some(Line::Event(EventLine {
                    t_s: i as f64 + 1.5,
                    event: RunEvent::StatsReset,
                })));
            }
        }
        rec.finish();
        rec
    }

    #[test]
    fn the_union_is_every_counted_sample_with_n_summed() {
        let a = record("a.jsonl", &[0.1, 0.2, 0.3], None);
        // b's first request came before its reset: the run did not count it, nor does the union.
        let b = record("b.jsonl", &[9.0, 0.4, 0.5, 0.6], Some(0));
        let m = merge(vec![a, b]);
        let s = m.record.summary();
        let ttft = s.steady.get(Metric::Ttft);
        assert_eq!(ttft.n, 6);
        // numpy: np.percentile([.1,.2,.3,.4,.5,.6], [50, 90]) -> 0.35, 0.55
        assert!((ttft.p50 - 0.35).abs() < 1e-12, "{}", ttft.p50);
        assert!((ttft.p90 - 0.55).abs() < 1e-12, "{}", ttft.p90);
        assert_eq!(ttft.max, 0.6);
        // Indices stay unique: b's come after a's.
        let mut idx: Vec<u64> = m.record.requests.iter().map(|r| r.index).collect();
        idx.sort();
        idx.dedup();
        assert_eq!(idx.len(), 6);
        assert_eq!(m.sources.len(), 2);
        assert_eq!(m.sources[1].summary.requests, 3);
        assert!(m.notes.iter().any(|n| n.contains("ITL is left out")));
        let md = m.to_markdown();
        assert!(md.contains("| b.jsonl (no footer) | 3 |"), "{md}");
    }
}
