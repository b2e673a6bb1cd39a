//! Several records as one run: many load generators (one headless infertop per client machine)
//! against one service. Percentiles cannot be merged from summaries (a p99 of p99s is no
//! p99), so the union is built from the raw samples: every counted request of every record
//! (after its own last `stats_reset`), every failure, and every step when all of them wrote
//! step lines. `report` and `compare` then read the union as they read one record, so its
//! numbers are numpy's over the union, with n summed.
//!
//! Clocks: each record counts its `t_s` from its own start. When every record says where its
//! start was on one reference clock (its header's `clock`: this machine's start and its
//! offset from the reference, measured by every sharded or `--start-at` run), the union puts
//! each record's times on that clock, so generators started apart line up exactly (to within
//! their offsets' uncertainty). Otherwise the union's time axis is aligned at the starts
//! (second 10 of every record is second 10 of the union): sources started together (one
//! `ssh` line each, a job array) line up to within their start skew.
//!
//! Shards: records of one run sent by several generators (`--shard K/N`) already number
//! their requests as the run does, so the union keeps those numbers (the run's own); records
//! of separate runs have theirs moved past the previous record's.

use super::line::{FailedLine, Header, Line, RequestLine};
use super::reader::Record;
use crate::summary::RunSummary;
use crate::traffic::Shard;
use crate::util::table::{or_missing, TextTable};

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
    /// Its part of a sharded run (`--shard`), if it is one.
    pub shard: Option<Shard>,
    /// Seconds its times were moved by to put them on the union's axis.
    pub shift_s: f64,
}

/// The union of several records, and each as a row.
#[derive(Debug)]
pub struct Merged {
    pub record: Record,
    pub sources: Vec<SourceSummary>,
    /// What the union leaves out, in one line each.
    pub notes: Vec<String>,
    /// How the records' times were put on one axis, in one sentence.
    pub alignment: String,
}

/// How the time axes are aligned when the records do not all say their clocks, in one
/// sentence (report and docs/records-and-reports.md say it).
pub const ALIGNMENT: &str = "each record keeps its own clock (seconds since its own start); \
     the union is aligned at the starts, so no synchronized clocks are needed";

/// How several records' times go on one axis: each record's shift, and the sentence that
/// says how (`report` and `follow` of several records alike).
#[derive(Clone, Debug, PartialEq)]
pub struct Alignment {
    /// Seconds added to each record's times.
    pub shifts: Vec<f64>,
    /// Whether they are on the reference clock (else aligned at their starts).
    pub clocked: bool,
    pub words: String,
    /// Why the records could not be put on one clock, when some say theirs and some do not.
    pub note: Option<String>,
}

/// The alignment of records with these headers (`None`: a record without one), in order: on
/// the reference clock when every one says its start on it (the earliest start is the
/// union's 0), else at their starts.
pub fn align(names: &[String], headers: &[Option<&Header>]) -> Alignment {
    let starts: Vec<Option<f64>> = headers
        .iter()
        .map(|h| h.and_then(|h| h.clock.as_ref()?.reference_start_s()))
        .collect();
    let known: Vec<f64> = starts.iter().flatten().copied().collect();
    let at_starts = |note| Alignment {
        shifts: vec![0.0; headers.len()],
        clocked: false,
        words: ALIGNMENT.to_string(),
        note,
    };
    if known.len() < starts.len() || starts.is_empty() {
        let note = (!known.is_empty()).then(|| {
            let without: Vec<&str> = names
                .iter()
                .zip(&starts)
                .filter(|(_, s)| s.is_none())
                .map(|(n, _)| n.as_str())
                .collect();
            format!(
                "{} measured no clock offset (a run neither sharded nor started with --start-at): the union is aligned at the starts",
                without.join(", ")
            )
        });
        return at_starts(note);
    }
    let base = known.iter().copied().fold(f64::INFINITY, f64::min);
    let uncertainty = headers
        .iter()
        .filter_map(|h| h.and_then(|h| h.clock.as_ref()?.uncertainty_s))
        .fold(0.0, f64::max);
    let mut references: Vec<&str> = headers
        .iter()
        .filter_map(|h| h.and_then(|h| h.clock.as_ref()?.reference.as_deref()))
        .collect();
    references.dedup();
    Alignment {
        shifts: known.iter().map(|s| s - base).collect(),
        clocked: true,
        words: format!(
            "each record's times are put on the reference clock ({}) by its start and its measured offset (to within ± {:.1} ms), so the records line up though their machines' clocks differ",
            references.join(", "),
            uncertainty * 1e3
        ),
        note: None,
    }
}

/// Whether records with these headers are the shards of one run (each `--shard K/N` of
/// the same N, each K once), and what a merge of them should say: shards missing, flags
/// that differ, a shard given twice (then they are merged as separate runs).
pub fn shards(names: &[String], headers: &[Option<&Header>]) -> (bool, Vec<String>) {
    let shards: Vec<Option<Shard>> = headers
        .iter()
        .map(|h| h.and_then(|h| h.config.shard))
        .collect();
    if shards.iter().all(Option::is_none) {
        return (false, Vec::new());
    }
    let mut notes = Vec::new();
    let Some(all) = shards.iter().copied().collect::<Option<Vec<Shard>>>() else {
        notes.push(
            "some records are shards (--shard) and some are whole runs: they are merged as separate runs, their request numbers apart"
                .to_string(),
        );
        return (false, notes);
    };
    let count = all[0].count;
    if all.iter().any(|s| s.count != count) {
        notes.push(format!(
            "the records are shards of different splits ({}): they are merged as separate runs",
            all.iter()
                .map(Shard::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return (false, notes);
    }
    for (i, s) in all.iter().enumerate() {
        if let Some(j) = all[..i].iter().position(|t| t == s) {
            notes.push(format!(
                "{} and {} are both shard {s}: they are merged as separate runs, their request numbers apart",
                names[j], names[i]
            ));
            return (false, notes);
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|k| !all.iter().any(|s| s.index == *k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        notes.push(format!(
            "shard {} of the run is missing: the union is {} of its {count} parts of the schedule",
            missing.join(", "),
            all.len()
        ));
    }
    // The shards' flags must be the same for their parts to make one schedule.
    let differs: Vec<&str> = SAME_FLAGS
        .iter()
        .filter(|(_, get)| {
            let first = headers[0].map(|h| get(&h.config));
            headers[1..]
                .iter()
                .any(|h| h.map(|h| get(&h.config)) != first)
        })
        .map(|(name, _)| *name)
        .collect();
    if !differs.is_empty() {
        notes.push(format!(
            "the shards were started with different {}: their parts are not one schedule",
            differs.join(", ")
        ));
    }
    (true, notes)
}

type ConfigKey = fn(&super::line::RunConfig) -> String;

/// What the shards of one run must agree on, and how each is read from a header.
const SAME_FLAGS: [(&str, ConfigKey); 8] = [
    ("--seed", |c| c.seed.to_string()),
    ("--rate", |c| format!("{:?}", c.rate)),
    ("--burstiness", |c| format!("{:?}", c.burstiness)),
    ("--concurrency", |c| format!("{:?}", c.concurrency)),
    ("--requests", |c| format!("{:?}", c.requests)),
    ("--duration", |c| format!("{:?}", c.duration)),
    ("lengths", |c| {
        format!("{} {}", c.prompt_tokens, c.output_tokens)
    }),
    ("--start-at", |c| format!("{:?}", c.start_at_unix_s)),
];

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
    let names: Vec<String> = parts.iter().map(|p| p.path.display().to_string()).collect();
    let headers: Vec<Option<&Header>> = parts.iter().map(|p| p.header.as_ref()).collect();
    let alignment = align(&names, &headers);
    notes.extend(alignment.note.clone());
    let (sharded, shard_notes) = shards(&names, &headers);
    notes.extend(shard_notes);
    let name = names.join("+");
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
        let shift = alignment.shifts.get(k).copied().unwrap_or(0.0);
        let on_axis = |t: Option<f64>| t.map(|t| t + shift);
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
            let t = on_axis(part.request_t_s.get(i).copied().flatten());
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
            let t = on_axis(part.failed_t_s.get(i).copied().flatten());
            let line = Line::RequestFailed(FailedLine { failed: f, t_s: t });
            lines.push((t.unwrap_or(f64::NAN), k, place, line));
            place += 1;
        }
        if every_has_steps {
            for s in part.counted_steps() {
                let mut s = *s;
                s.index += offset;
                s.t_s = on_axis(s.t_s);
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
            shard: part.config().and_then(|c| c.shard),
            shift_s: shift,
        });
        // Shards number their requests as the run does: the numbers stay the run's.
        if !sharded {
            offset += top;
        }
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
        alignment: alignment.words,
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
        use crate::stats::Metric::{E2e, Tpot, Ttft};
        use crate::util::format::ms;
        let mut out = format!(
            "\n## Sources ({} records as one run)\n\nThe table above is over the union of their \
             raw samples (n summed, numpy's percentiles); {}.\n\n",
            self.sources.len(),
            self.alignment
        );
        let mut t = TextTable::new().left(["source"]).right([
            "requests", "failed", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50",
            "span", "shard", "starts",
        ]);
        for s in &self.sources {
            let q = |m, p: fn(&crate::stats::Summary) -> f64| {
                let v = s.summary.steady.get(m);
                or_missing((v.n > 0).then(|| ms(p(&v))))
            };
            t.row([
                format!("{}{}", s.name, if s.complete { "" } else { " (no footer)" }),
                s.summary.requests.to_string(),
                s.summary.failed_requests.to_string(),
                q(Ttft, |v| v.p50),
                q(Ttft, |v| v.p99),
                q(Tpot, |v| v.p50),
                q(Tpot, |v| v.p99),
                q(E2e, |v| v.p50),
                or_missing(s.span_s.map(|v| format!("{v:.1} s"))),
                or_missing(s.shard.map(|k| k.to_string())),
                format!("{:+.3} s", s.shift_s),
            ]);
        }
        out.push_str(&t.markdown());
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
                "shard": s.shard,
                "shift_s": s.shift_s,
                "summary": s.summary.to_json(),
            })).collect::<Vec<_>>(),
            "alignment": self.alignment,
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

    /// Shard `k` of `n`: requests `k, k + n, …` below `total`, request `i` ending at its
    /// number in seconds of the run (its own clock started `late` seconds after the run's).
    fn shard(k: u32, n: u32, total: u64, late: f64) -> Record {
        use crate::record::line::{RunClock, RunConfig};
        let mut rec = Record::new(std::path::Path::new(&format!("s{k}.jsonl")));
        rec.push(Some(Line::Header(Box::new(Header {
            config: RunConfig {
                shard: Some(Shard { index: k, count: n }),
                seed: 3,
                ..RunConfig::default()
            },
            // This machine's clock is 100 s behind the reference.
            clock: Some(RunClock {
                started_unix_s: 1_000.0 + late - 100.0,
                offset_s: Some(100.0),
                uncertainty_s: Some(0.001),
                reference: Some("http://server/v1/models".into()),
            }),
            ..Header::default()
        }))));
        for i in (u64::from(k)..total).step_by(n as usize) {
            let r = RequestDone {
                index: i,
                warmup: i < 2,
                batch: 1,
                prompt_tokens: 4,
                output_tokens: 1,
                ttft_s: 0.01 * (i + 1) as f64,
                e2e_s: 0.01 * (i + 1) as f64,
                ..Default::default()
            };
            let t = i as f64 + 1.0 - late;
            rec.push(Some(Line::Request(RequestLine::of(&r, Some(t)))));
        }
        rec.finish();
        rec
    }

    /// The shards of one run merge into the run: its request numbers, each once, its warmup,
    /// its percentiles, and its times on the reference clock whenever each shard started.
    #[test]
    fn shards_merge_into_the_one_run_on_the_reference_clock() {
        let whole = shard(0, 1, 40, 0.0).summary();
        let parts = (0..4).map(|k| shard(k, 4, 40, 0.25 * k as f64)).collect();
        let m = merge(parts);
        let mut idx: Vec<u64> = m.record.requests.iter().map(|r| r.index).collect();
        idx.sort();
        assert_eq!(
            idx,
            (0..40).collect::<Vec<_>>(),
            "the run's numbers, each once"
        );
        let s = m.record.summary();
        assert_eq!(
            (s.requests, s.warmup_requests),
            (whole.requests, whole.warmup_requests)
        );
        for metric in [Metric::Ttft, Metric::E2e] {
            assert_eq!(s.steady.get(metric), whole.steady.get(metric), "{metric:?}");
        }
        // Request i ended at second i + 1 of the run, whichever shard sent it.
        for (r, t) in m.record.requests.iter().zip(&m.record.request_t_s) {
            assert!(
                (t.unwrap() - (r.index as f64 + 1.0)).abs() < 1e-9,
                "{r:?} at {t:?}"
            );
        }
        assert!(m.alignment.contains("reference clock"), "{}", m.alignment);
        assert!(
            m.notes.iter().all(|n| !n.contains("shard")),
            "{:?}",
            m.notes
        );
        assert_eq!(m.sources[2].shard, Some(Shard { index: 2, count: 4 }));
        assert!((m.sources[3].shift_s - 0.75).abs() < 1e-9);
    }

    #[test]
    fn a_missing_or_doubled_shard_is_said() {
        let m = merge(vec![shard(0, 3, 30, 0.0), shard(2, 3, 30, 0.0)]);
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("shard 1/3 of the run is missing")),
            "{:?}",
            m.notes
        );
        let m = merge(vec![shard(1, 2, 10, 0.0), shard(1, 2, 10, 0.0)]);
        assert!(m.notes.iter().any(|n| n.contains("both shard 1/2")));
        // Merged as separate runs: the second's numbers after the first's.
        assert_eq!(m.record.requests.len(), 10);
        let mut idx: Vec<u64> = m.record.requests.iter().map(|r| r.index).collect();
        idx.dedup();
        assert_eq!(idx.len(), 10);
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
