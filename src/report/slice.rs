//! `report RUN.jsonl --slice DUR`: every statistic per window of run time, so drift over a
//! soak of hours shows.
//!
//! Windows are `[k·DUR, (k+1)·DUR)` on the record's clock (its lines' `t_s`: seconds since the
//! run began), and a request belongs to the window in which it ENDED (its line's `t_s`): one
//! that started in a window and ended in the next is the next one's. The last window ends
//! with the run (the footer's `elapsed_s`, or the last line's time in a record cut off) and is
//! partial when the run ends inside it; a window without requests is a row with n = 0.
//!
//! Per window: the requests that completed (n), failed, and ended during `--warmup` (counted
//! apart, in no statistic, as everywhere in `report`); TTFT, TPOT, E2E and ITL as `Summary`
//! (numpy's linear percentiles, the project's one implementation) over the window's steady
//! requests, ITL over their decode steps (step lines, `--jsonl-steps`); output tokens/s and
//! requests/s of those requests over the window's length.
//!
//! The record is read in one pass, line by line, and a window's samples are dropped once it
//! closes: memory holds one window's samples, the decode steps of requests still in flight,
//! and a row of figures per window (at most `MAX_WINDOWS`). Several records are sliced as one
//! run: their lines are merged in time order on the axis `record::merge::align` puts them on
//! (the reference clock when every record measured its offset to it, else their starts).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::event::{RequestDone, RequestFailed};
use crate::record::line::{Line, RunEvent};
use crate::record::reader::{self, LineReader};
use crate::stats::goodput::output_tokens;
use crate::stats::{Metric, Summary};
use crate::summary::summary_json;
use crate::util::table::{or_missing, TextTable};

/// Windows one report makes at most: a week at 10 s is 60,480. Each closed window keeps a row
/// of figures (about 300 bytes), never its samples.
pub const MAX_WINDOWS: u64 = 100_000;

/// The metrics a window summarises, in the order every format writes them.
pub const METRICS: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2e];

/// The window run time `t_s` falls in, for windows of `width_s`: `floor(t_s / width_s)`, with
/// the float division checked against the window's own bounds (`index · width_s`), so a time
/// is in the window whose printed start and end hold it. Times before 0 are window 0.
pub fn window_of(t_s: f64, width_s: f64) -> u64 {
    if !(t_s.is_finite() && t_s > 0.0 && width_s > 0.0) {
        return 0;
    }
    let mut k = (t_s / width_s).floor();
    if k * width_s > t_s {
        k -= 1.0;
    } else if (k + 1.0) * width_s <= t_s {
        k += 1.0;
    }
    // Saturates for times past u64 windows; `Slicer` refuses those long before.
    k.max(0.0) as u64
}

/// One window's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceRow {
    /// 0-based: the window `[index · width, (index + 1) · width)`.
    pub index: u64,
    /// Seconds from the run's start.
    pub start_s: f64,
    /// The window's end: `start_s + width`, or the run's end for the last, partial one.
    pub end_s: f64,
    /// The run ended inside this window (the last): it is shorter than the others.
    pub partial: bool,
    /// Steady requests that completed in the window.
    pub requests: u64,
    /// Steady requests that failed in the window.
    pub failed: u64,
    /// `--warmup` requests that ended (completed or failed) in the window: in no figure.
    pub warmup: u64,
    /// Output tokens (batch × generated) of the completed steady requests.
    pub output_tokens: u64,
    pub ttft: Summary,
    pub tpot: Summary,
    pub itl: Summary,
    pub e2e: Summary,
}

impl SliceRow {
    pub fn length_s(&self) -> f64 {
        self.end_s - self.start_s
    }

    /// Output tokens per second of the window's length (`None` for a window of no length).
    pub fn output_tok_s(&self) -> Option<f64> {
        self.per_second(self.output_tokens)
    }

    /// Completed steady requests per second of the window's length.
    pub fn requests_s(&self) -> Option<f64> {
        self.per_second(self.requests)
    }

    fn per_second(&self, count: u64) -> Option<f64> {
        let len = self.length_s();
        (len > 0.0).then(|| count as f64 / len)
    }

    pub fn get(&self, m: Metric) -> Summary {
        match m {
            Metric::Ttft => self.ttft,
            Metric::Tpot => self.tpot,
            Metric::Itl => self.itl,
            Metric::E2e => self.e2e,
            Metric::PrefillTokS | Metric::DecodeTokS => Summary::default(),
        }
    }
}

/// The open window's samples and counts.
#[derive(Debug, Default)]
struct Open {
    requests: u64,
    failed: u64,
    warmup: u64,
    output_tokens: u64,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    itl: Vec<f64>,
    e2e: Vec<f64>,
}

/// Requests, failures and decode steps in, in the order they ended; a row per window out.
#[derive(Debug)]
pub struct Slicer {
    width_s: f64,
    /// The open window's index and what it holds.
    current: u64,
    open: Open,
    rows: Vec<SliceRow>,
    /// Decode steps of requests in flight, by (source, request index), until the request's
    /// line says whether it completed and whether it was warmup.
    pending_steps: HashMap<(usize, u64), Vec<f64>>,
    /// The latest request or failure time seen.
    latest_s: f64,
    /// Requests and failures taken in.
    ended: u64,
    /// Requests whose window had closed when they came (lines out of time order): left out.
    pub late: u64,
    /// Any step line came.
    pub any_steps: bool,
}

impl Slicer {
    /// Windows of `width_s` seconds (positive and finite).
    pub fn new(width_s: f64) -> Result<Slicer, String> {
        if !(width_s.is_finite() && width_s > 0.0) {
            return Err(format!(
                "--slice: {width_s} s is not a window length (give a positive duration such as 10s, 5m or 1h)"
            ));
        }
        Ok(Slicer {
            width_s,
            current: 0,
            open: Open::default(),
            rows: Vec::new(),
            pending_steps: HashMap::new(),
            latest_s: 0.0,
            ended: 0,
            late: 0,
            any_steps: false,
        })
    }

    pub fn width_s(&self) -> f64 {
        self.width_s
    }

    /// Requests and failures taken in so far.
    pub fn ended(&self) -> u64 {
        self.ended
    }

    /// A decode step of request `index` of `source` (ITL `itl_s`), before its request ends.
    pub fn step(&mut self, source: usize, index: u64, itl_s: f64) {
        self.any_steps = true;
        self.pending_steps
            .entry((source, index))
            .or_default()
            .push(itl_s);
    }

    /// A request of `source` that completed at `t_s`.
    pub fn request(&mut self, source: usize, t_s: f64, r: &RequestDone) -> Result<(), String> {
        let steps = self.pending_steps.remove(&(source, r.index));
        if !self.at(t_s)? {
            return Ok(());
        }
        let w = &mut self.open;
        if r.warmup {
            w.warmup += 1;
            return Ok(());
        }
        w.requests += 1;
        w.output_tokens += output_tokens(r);
        w.ttft.push(r.ttft_s);
        w.e2e.push(r.e2e_s);
        w.tpot.extend(r.tpot_s);
        w.itl.extend(steps.unwrap_or_default());
        Ok(())
    }

    /// A request of `source` that failed at `t_s`.
    pub fn failed(&mut self, source: usize, t_s: f64, f: &RequestFailed) -> Result<(), String> {
        self.pending_steps.remove(&(source, f.index));
        if !self.at(t_s)? {
            return Ok(());
        }
        if f.warmup {
            self.open.warmup += 1;
        } else {
            self.open.failed += 1;
        }
        Ok(())
    }

    /// Moves to the window of `t_s` (closing those before it); `false` when that window has
    /// closed already (a line out of time order), which is then counted in `late`.
    fn at(&mut self, t_s: f64) -> Result<bool, String> {
        self.ended += 1;
        let k = window_of(t_s, self.width_s);
        if k < self.current {
            self.late += 1;
            return Ok(false);
        }
        self.latest_s = self.latest_s.max(t_s);
        self.advance(k)?;
        Ok(true)
    }

    /// Closes windows until `k` is the open one.
    fn advance(&mut self, k: u64) -> Result<(), String> {
        if k >= MAX_WINDOWS {
            return Err(too_many(self.width_s, k as f64 * self.width_s));
        }
        while self.current < k {
            self.close(None);
            self.current += 1;
        }
        Ok(())
    }

    /// Closes the open window, ending at `end_s` when the run ended inside it.
    fn close(&mut self, end_s: Option<f64>) {
        let open = std::mem::take(&mut self.open);
        let start_s = self.current as f64 * self.width_s;
        let full_end = (self.current + 1) as f64 * self.width_s;
        let end_s = end_s.map_or(full_end, |e| e.clamp(start_s, full_end));
        self.rows.push(SliceRow {
            index: self.current,
            start_s,
            end_s,
            partial: end_s < full_end,
            requests: open.requests,
            failed: open.failed,
            warmup: open.warmup,
            output_tokens: open.output_tokens,
            ttft: Summary::of(&open.ttft),
            tpot: Summary::of(&open.tpot),
            itl: Summary::of(&open.itl),
            e2e: Summary::of(&open.e2e),
        });
    }

    /// The run ended at `end_s` (at least the last request's time): the windows up to it are
    /// closed, the last one ending there.
    pub fn finish(mut self, end_s: f64) -> Result<Vec<SliceRow>, String> {
        let end_s = if end_s.is_finite() {
            end_s.max(self.latest_s)
        } else {
            self.latest_s
        };
        // The window the end falls in; an end on a boundary closes the window before it.
        let mut last = window_of(end_s, self.width_s);
        if last > 0 && last as f64 * self.width_s >= end_s {
            last -= 1;
        }
        self.advance(last.max(self.current))?;
        self.close(Some(end_s));
        Ok(self.rows)
    }
}

/// The message for a slice too fine for a run of `end_s` seconds.
fn too_many(width_s: f64, end_s: f64) -> String {
    let least_s = end_s / MAX_WINDOWS as f64;
    // Rounded up, less the float noise of `index × width` (10.000000000000002 ms is 10 ms).
    let least = if least_s < 1.0 {
        format!("{}ms", (least_s * 1e3 - 1e-6).ceil().max(1.0))
    } else {
        format!("{}s", (least_s - 1e-9).ceil())
    };
    format!(
        "--slice {}: the run's {} would make more than {MAX_WINDOWS} windows; give --slice {least} or longer",
        seconds(width_s),
        seconds(end_s)
    )
}

/// A record sliced: a row per window, and what the rows cannot say.
#[derive(Clone, Debug)]
pub struct Sliced {
    pub width_s: f64,
    /// The run's end on its clock (the union's, for several records).
    pub end_s: f64,
    /// The records, as given.
    pub sources: Vec<String>,
    pub rows: Vec<SliceRow>,
    /// Whether the records had step lines (ITL per window comes from them alone).
    pub has_steps: bool,
    /// What a reader must know, one line each.
    pub notes: Vec<String>,
}

/// Something a record's line says that the slicer takes.
enum Ended {
    Request(RequestDone),
    Failed(RequestFailed),
}

/// One record being read.
struct Source {
    name: String,
    lines: LineReader<BufReader<File>>,
    /// Seconds added to its times to put them on the union's axis.
    shift_s: f64,
    /// Its next request or failure, on the union's axis.
    next: Option<(f64, Ended)>,
    /// Its end on its own clock: the footer's `elapsed_s`, else its latest line time.
    end_s: f64,
    bad_lines: u64,
    /// Step lines read (ITL per window comes from them alone).
    steps: u64,
    resets: u64,
    pauses: u64,
    shard: Option<crate::traffic::Shard>,
}

impl Source {
    fn open(path: &Path) -> Result<(Source, crate::record::line::Header), String> {
        let name = path.display().to_string();
        let mut lines = LineReader::open(path)?;
        let first = lines
            .next_or_last()
            .map_err(|e| crate::util::io_error(path, &e))?
            .map(<[u8]>::to_vec);
        let header = match first {
            Some(first) => reader::header_of(&name, &first)?,
            None => {
                return Err(format!(
                "{name}: not an infertop record (the file is empty); make one with --record FILE"
            ))
            }
        };
        if header.config.is_watch() {
            return Err(format!(
                "{name}: a watch's record has no requests to slice (report it without --slice)"
            ));
        }
        let source = Source {
            name,
            lines,
            shift_s: 0.0,
            next: None,
            end_s: 0.0,
            bad_lines: 0,
            steps: 0,
            resets: 0,
            pauses: 0,
            shard: header.config.shard,
        };
        Ok((source, header))
    }

    /// Reads on to its next request or failure (steps on the way go to `slicer`); `next` is
    /// `None` at its end.
    fn pull(&mut self, k: usize, slicer: &mut Slicer) -> Result<(), String> {
        self.next = None;
        loop {
            let bytes = self
                .lines
                .next_or_last()
                .map_err(|e| crate::util::io_error(Path::new(&self.name), &e))?;
            let Some(bytes) = bytes else {
                return Ok(());
            };
            let Some(line) = reader::parse(bytes) else {
                self.bad_lines += 1;
                continue;
            };
            if let Some(t) = reader::line_time(&line) {
                self.end_s = self.end_s.max(t);
            }
            match line {
                Line::Request(r) => {
                    let t = self.time(r.t_s)?;
                    self.next = Some((t, Ended::Request(r.request)));
                    return Ok(());
                }
                Line::RequestFailed(f) => {
                    let t = self.time(f.t_s)?;
                    self.next = Some((t, Ended::Failed(f.failed)));
                    return Ok(());
                }
                Line::Step(s) => {
                    self.steps += 1;
                    slicer.step(k, s.index, s.itl_s);
                }
                Line::Event(e) => match e.event {
                    RunEvent::StatsReset => self.resets += 1,
                    RunEvent::Paused => self.pauses += 1,
                    _ => {}
                },
                Line::Sweep(_) | Line::Cell(_) | Line::CellEnd(_) => {
                    return Err(format!(
                        "{}: a sweep's record; --slice takes a run's record (report the sweep without --slice for its table of cells)",
                        self.name
                    ))
                }
                _ => {}
            }
        }
    }

    /// A request line's time on the union's axis; records written before lines carried one
    /// cannot be sliced.
    fn time(&self, t_s: Option<f64>) -> Result<f64, String> {
        match t_s {
            Some(t) if t.is_finite() => Ok(t + self.shift_s),
            _ => Err(format!(
                "{}: written before request lines carried their time (t_s), so it cannot be sliced by time; report it without --slice",
                self.name
            )),
        }
    }
}

/// Slices the records at `paths` (one run's, or several merged as one run) into windows of
/// `width_s` seconds, reading each once.
pub fn slice(paths: &[PathBuf], width_s: f64) -> Result<Sliced, String> {
    let mut slicer = Slicer::new(width_s)?;
    let mut sources = Vec::new();
    let mut headers = Vec::new();
    for p in paths {
        let (s, h) = Source::open(p)?;
        sources.push(s);
        headers.push(h);
    }
    let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    let mut notes = Vec::new();
    if sources.len() > 1 {
        let header_refs: Vec<Option<&crate::record::line::Header>> =
            headers.iter().map(Some).collect();
        let alignment = crate::record::merge::align(&names, &header_refs);
        for (s, shift) in sources.iter_mut().zip(&alignment.shifts) {
            s.shift_s = *shift;
        }
        notes.push(format!(
            "{} records sliced as one run: {}",
            sources.len(),
            alignment.words
        ));
        notes.extend(alignment.note);
    }
    // A slice too fine for the run is refused before the records are read: their ends are
    // read from their last lines.
    let end_guess = paths
        .iter()
        .zip(&sources)
        .filter_map(|(p, s)| reader::end_time(p).map(|t| t + s.shift_s))
        .fold(0.0, f64::max);
    if window_of(end_guess, width_s) >= MAX_WINDOWS {
        return Err(too_many(width_s, end_guess));
    }
    for (k, s) in sources.iter_mut().enumerate() {
        s.pull(k, &mut slicer)?;
    }
    // The next line in time order of all the records (the earlier record on a tie).
    while let Some(k) = (0..sources.len())
        .filter(|&k| sources[k].next.is_some())
        .min_by(|&a, &b| {
            let t = |k: usize| sources[k].next.as_ref().map_or(f64::INFINITY, |n| n.0);
            t(a).total_cmp(&t(b)).then(a.cmp(&b))
        })
    {
        match sources[k].next.take() {
            Some((t, Ended::Request(r))) => slicer.request(k, t, &r)?,
            Some((t, Ended::Failed(f))) => slicer.failed(k, t, &f)?,
            None => {}
        }
        sources[k].pull(k, &mut slicer)?;
    }
    if slicer.ended() == 0 {
        return Err(format!(
            "{}: no requests in the record (nothing to slice)",
            names.join(", ")
        ));
    }
    let end_s = sources
        .iter()
        .map(|s| s.end_s + s.shift_s)
        .fold(0.0, f64::max);
    let has_steps = slicer.any_steps;
    let late = slicer.late;
    notes.extend(source_notes(&sources));
    if late > 0 {
        notes.push(format!(
            "{late} request lines came after lines of a later window (out of time order: an edited or concatenated record) and are left out"
        ));
    }
    let without_steps: Vec<&str> = sources
        .iter()
        .filter(|s| s.steps == 0)
        .map(|s| s.name.as_str())
        .collect();
    if !has_steps {
        notes.push(format!(
            "no ITL per window: {} no step lines (record with --jsonl-steps for them)",
            if sources.len() == 1 {
                "the record has"
            } else {
                "the records have"
            }
        ));
    } else if !without_steps.is_empty() {
        notes.push(format!(
            "ITL per window is over the other records' decode steps only: {} {} no step lines (--jsonl-steps)",
            without_steps.join(", "),
            if without_steps.len() == 1 { "has" } else { "have" }
        ));
    }
    let rows = slicer.finish(end_s)?;
    Ok(Sliced {
        width_s,
        end_s,
        sources: names,
        rows,
        has_steps,
        notes,
    })
}

/// What each record's lines said on the way that the windows do not show.
fn source_notes(sources: &[Source]) -> Vec<String> {
    let mut notes = Vec::new();
    for s in sources {
        if s.bad_lines > 0 {
            notes.push(format!(
                "{}: {} not whole JSON (a record cut off mid-line), skipped",
                s.name,
                count(s.bad_lines, "line")
            ));
        }
        if s.resets > 0 {
            notes.push(format!(
                "{}: its statistics were reset during the run ({}); the windows cover the whole run",
                s.name,
                count(s.resets, "time")
            ));
        }
        if s.pauses > 0 {
            notes.push(format!(
                "{}: paused {}; paused time is in its windows' length (and their rates)",
                s.name,
                count(s.pauses, "time")
            ));
        }
        if let Some(shard) = s.shard {
            if sources.len() == 1 {
                notes.push(format!(
                    "{}: shard {shard} of a run, its part of the schedule only: slice the {} records together for the run's figures",
                    s.name, shard.count
                ));
            }
        }
    }
    notes
}

/// `1 line`, `3 lines`.
fn count(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Seconds as a report writes a window's bounds: up to three decimals, no trailing zeros
/// (`5`, `27.312`, `0.25`).
pub fn seconds_bound(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

/// `5 s`, `34.5 s`, `250ms`, `1.00µs`: a length as the report's sentences say it (below a
/// second in the unit that keeps its digits).
fn seconds(v: f64) -> String {
    if v >= 1.0 {
        format!("{} s", seconds_bound(v))
    } else {
        crate::util::format::duration(v, false)
    }
}

impl Sliced {
    /// A markdown table, a row per window, after a paragraph that says how they were made.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let last = self.rows.last();
        let partial = match last {
            Some(r) if r.partial => format!(" (the last partial: {})", seconds(r.length_s())),
            _ => String::new(),
        };
        out.push_str(&format!(
            "\n{}: {} windows of {} over {} of run time{partial}\n\n",
            self.sources.join(" + "),
            self.rows.len(),
            seconds(self.width_s),
            seconds(self.end_s),
        ));
        out.push_str(
            "Each request is in the window in which it ended (seconds on the run's clock, 0 = its start). \
             n: requests that completed; failed: that failed; warmup: --warmup requests that ended \
             there, in no figure. Latencies in ms, numpy's linear percentiles over the window's \
             requests (ITL over their decode steps); tok/s and req/s: the completed requests' output \
             tokens and count over the window's length.\n",
        );
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                out.push_str(&format!("- Note: {n}.\n"));
            }
        }
        out.push('\n');
        let itl = self.has_steps;
        let mut t = TextTable::new().left(["window (s)"]).right([
            "n", "failed", "warmup", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
        ]);
        if itl {
            t = t.right(["ITL p99"]);
        }
        t = t.right(["E2E p99", "tok/s", "req/s"]);
        let ms = |s: &Summary, v: f64| or_missing((s.n > 0).then(|| format!("{:.3}", v * 1e3)));
        for r in &self.rows {
            let mark = if r.partial { "*" } else { "" };
            let mut row = vec![
                format!(
                    "{}–{}{mark}",
                    seconds_bound(r.start_s),
                    seconds_bound(r.end_s)
                ),
                r.requests.to_string(),
                r.failed.to_string(),
                r.warmup.to_string(),
                ms(&r.ttft, r.ttft.p50),
                ms(&r.ttft, r.ttft.p99),
                ms(&r.tpot, r.tpot.p50),
                ms(&r.tpot, r.tpot.p99),
            ];
            if itl {
                row.push(ms(&r.itl, r.itl.p99));
            }
            row.extend([
                ms(&r.e2e, r.e2e.p99),
                or_missing(r.output_tok_s().map(|v| format!("{v:.1}"))),
                or_missing(r.requests_s().map(|v| format!("{v:.2}"))),
            ]);
            t.row(row);
        }
        out.push_str(&t.markdown());
        if let Some(r) = last.filter(|r| r.partial) {
            out.push_str(&format!(
                "\n\\* partial: the run ended {} into this window; its rates are over that length.\n",
                seconds(r.length_s())
            ));
        }
        out
    }

    /// The windows as one JSON array (one line), each object with every figure.
    pub fn to_json(&self) -> Value {
        self.rows
            .iter()
            .map(|r| {
                let mut o = json!({
                    "window": r.index,
                    "start_s": r.start_s,
                    "end_s": r.end_s,
                    "length_s": r.length_s(),
                    "partial": r.partial,
                    "requests": r.requests,
                    "failed": r.failed,
                    "warmup": r.warmup,
                    "output_tokens": r.output_tokens,
                    "output_tok_s": r.output_tok_s(),
                    "requests_s": r.requests_s(),
                });
                for m in METRICS {
                    o[m.key()] = summary_json(&r.get(m));
                }
                o
            })
            .collect()
    }

    /// A CSV row per window: the counts and rates, then mean, p50, p90, p95, p99, max and n of
    /// each metric (empty where n = 0).
    pub fn to_csv(&self) -> String {
        const STATS: [&str; 7] = ["mean", "p50", "p90", "p95", "p99", "max", "n"];
        let mut head: Vec<String> = [
            "window",
            "start_s",
            "end_s",
            "length_s",
            "partial",
            "requests",
            "failed",
            "warmup",
            "output_tokens",
            "output_tok_s",
            "requests_s",
        ]
        .map(String::from)
        .to_vec();
        for m in METRICS {
            head.extend(STATS.iter().map(|s| format!("{}_{s}", m.key())));
        }
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let mut rows = vec![head];
        for r in &self.rows {
            let mut row = vec![
                r.index.to_string(),
                r.start_s.to_string(),
                r.end_s.to_string(),
                r.length_s().to_string(),
                r.partial.to_string(),
                r.requests.to_string(),
                r.failed.to_string(),
                r.warmup.to_string(),
                r.output_tokens.to_string(),
                opt(r.output_tok_s()),
                opt(r.requests_s()),
            ];
            for m in METRICS {
                let s = r.get(m);
                let v = |v: f64| {
                    if s.n == 0 {
                        String::new()
                    } else {
                        v.to_string()
                    }
                };
                row.extend([
                    v(s.mean),
                    v(s.p50),
                    v(s.p90),
                    v(s.p95),
                    v(s.p99),
                    v(s.max),
                    s.n.to_string(),
                ]);
            }
            rows.push(row);
        }
        crate::util::csv_text(rows)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn done(
        index: u64,
        warmup: bool,
        ttft_s: f64,
        e2e_s: f64,
        output_tokens: usize,
    ) -> RequestDone {
        RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 8,
            output_tokens,
            ttft_s,
            tpot_s: (output_tokens > 1).then(|| (e2e_s - ttft_s) / (output_tokens - 1) as f64),
            e2e_s,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: String::new(),
            tokens: None,
            text: None,
            client: None,
            origin: None,
            model: None,
            parts: None,
        }
    }

    fn failure(index: u64, warmup: bool) -> RequestFailed {
        RequestFailed {
            index,
            warmup,
            reason: "HTTP 500".into(),
            status: Some(500),
            endpoint: None,
            elapsed_s: 0.1,
            model: None,
        }
    }

    #[test]
    fn a_time_is_in_the_window_whose_bounds_hold_it() {
        assert_eq!(window_of(0.0, 5.0), 0);
        assert_eq!(window_of(-1.0, 5.0), 0);
        assert_eq!(window_of(f64::NAN, 5.0), 0);
        assert_eq!(window_of(4.999, 5.0), 0);
        assert_eq!(window_of(5.0, 5.0), 1);
        assert_eq!(window_of(12.5, 5.0), 2);
        // 0.3 / 0.1 is 2.9999999999999996 in floats, but 0.3 is not below 3 × 0.1.
        for (t, w) in [(0.3, 0.1), (0.7, 0.1), (1.0, 0.1), (0.9, 0.3), (3.3, 1.1)] {
            let k = window_of(t, w);
            assert!(
                k as f64 * w <= t && t < (k + 1) as f64 * w,
                "{t} in {k} of {w}"
            );
        }
        let mut t = 0.0;
        while t < 50.0 {
            let k = window_of(t, 0.7);
            assert!(k as f64 * 0.7 <= t && t < (k + 1) as f64 * 0.7, "{t}");
            t += 0.0137;
        }
    }

    #[test]
    fn requests_go_to_the_window_they_ended_in_with_empty_and_partial_windows() {
        let mut s = Slicer::new(10.0).unwrap();
        // Window 0: a warmup request (with a step), a steady one with two steps, a failure.
        s.step(0, 0, 0.010);
        s.request(0, 1.0, &done(0, true, 0.5, 0.9, 4)).unwrap();
        s.step(0, 1, 0.020);
        s.step(0, 1, 0.030);
        s.request(0, 2.0, &done(1, false, 0.1, 0.4, 4)).unwrap();
        s.failed(0, 3.0, &failure(2, false)).unwrap();
        // Started in window 0, ended in window 1: window 1's.
        s.request(0, 10.0, &done(3, false, 0.3, 9.5, 2)).unwrap();
        // Nothing in window 2; window 3 is the last, the run ending at 34.5.
        s.failed(0, 31.0, &failure(4, true)).unwrap();
        s.request(0, 32.0, &done(5, false, 0.2, 0.6, 1)).unwrap();
        let rows = s.finish(34.5).unwrap();
        assert_eq!(rows.len(), 4);
        let r = &rows[0];
        assert_eq!((r.requests, r.failed, r.warmup), (1, 1, 1));
        assert_eq!((r.start_s, r.end_s, r.partial), (0.0, 10.0, false));
        // The warmup request's step stays out.
        assert_eq!(r.itl.n, 2);
        // numpy.percentile([0.020, 0.030], 50) = 0.025
        assert!((r.itl.p50 - 0.025).abs() < 1e-15, "{:?}", r.itl);
        assert_eq!(r.ttft.n, 1);
        assert_eq!(r.output_tokens, 4);
        assert_eq!(r.output_tok_s(), Some(0.4));
        assert_eq!(r.requests_s(), Some(0.1));
        let r = &rows[1];
        assert_eq!((r.requests, r.failed, r.warmup), (1, 0, 0));
        assert_eq!(r.e2e.p99, 9.5);
        let r = &rows[2];
        assert_eq!((r.requests, r.failed, r.warmup, r.ttft.n), (0, 0, 0, 0));
        assert_eq!(r.requests_s(), Some(0.0));
        let r = &rows[3];
        assert_eq!((r.requests, r.failed, r.warmup), (1, 0, 1));
        assert_eq!((r.start_s, r.end_s, r.partial), (30.0, 34.5, true));
        assert_eq!(r.tpot.n, 0, "one output token: no TPOT");
        assert_eq!(r.requests_s(), Some(1.0 / 4.5));
    }

    #[test]
    fn percentiles_are_numpys_over_the_windows_own_requests() {
        let mut s = Slicer::new(60.0).unwrap();
        // TTFT 1..=10 ms in window 0, 100 and 200 ms in window 1.
        for i in 1..=10u32 {
            let ttft = f64::from(i) * 1e-3;
            s.request(0, f64::from(i), &done(u64::from(i), false, ttft, 1.0, 8))
                .unwrap();
        }
        s.request(0, 61.0, &done(11, false, 0.1, 1.0, 8)).unwrap();
        s.request(0, 62.0, &done(12, false, 0.2, 1.0, 8)).unwrap();
        let rows = s.finish(120.0).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(!rows[1].partial, "the run ended on the boundary");
        // numpy.percentile(np.arange(1, 11) * 1e-3, [50, 90, 99]) = [0.0055, 0.0091, 0.00991]
        let t = rows[0].ttft;
        assert!((t.p50 - 0.0055).abs() < 1e-15, "{t:?}");
        assert!((t.p90 - 0.0091).abs() < 1e-15, "{t:?}");
        assert!((t.p99 - 0.00991).abs() < 1e-15, "{t:?}");
        assert_eq!(t.n, 10);
        // numpy.percentile([0.1, 0.2], 99) = 0.199
        assert!((rows[1].ttft.p99 - 0.199).abs() < 1e-15);
        assert_eq!(rows[1].ttft.n, 2);
    }

    #[test]
    fn late_lines_are_counted_not_placed_and_too_many_windows_are_refused() {
        let mut s = Slicer::new(1.0).unwrap();
        s.request(0, 5.5, &done(0, false, 0.1, 0.2, 2)).unwrap();
        s.request(0, 2.5, &done(1, false, 0.1, 0.2, 2)).unwrap();
        assert_eq!(s.late, 1);
        let rows = s.finish(6.0).unwrap();
        assert_eq!(rows.len(), 6);
        assert_eq!(rows.iter().map(|r| r.requests).sum::<u64>(), 1);

        let mut s = Slicer::new(0.001).unwrap();
        let err = s
            .request(0, 1000.0, &done(0, false, 0.1, 0.2, 2))
            .unwrap_err();
        assert!(
            err.starts_with("--slice 1.00ms: the run's 1000 s would make"),
            "{err}"
        );
        assert!(err.contains("give --slice 10ms or longer"), "{err}");
        assert!(Slicer::new(0.0).is_err());
        assert!(Slicer::new(f64::NAN).is_err());
    }

    #[test]
    fn steps_are_kept_apart_per_record() {
        let mut s = Slicer::new(10.0).unwrap();
        s.step(0, 7, 0.001);
        s.step(1, 7, 0.002);
        s.step(1, 7, 0.003);
        s.request(1, 1.0, &done(7, false, 0.1, 0.2, 3)).unwrap();
        s.failed(0, 2.0, &failure(7, false)).unwrap();
        let rows = s.finish(10.0).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].itl.n, 2);
        assert_eq!(rows[0].itl.max, 0.003);
    }

    #[test]
    fn bounds_print_short() {
        assert_eq!(seconds_bound(5.0), "5");
        assert_eq!(seconds_bound(0.30000000000000004), "0.3");
        assert_eq!(seconds_bound(27.3124), "27.312");
        assert_eq!(seconds_bound(0.0), "0");
    }
}
