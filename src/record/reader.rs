//! The one reader of the record format (docs/record-format.md): a line's bytes to a typed line
//! (`parse`), a record's lines from a file or a stream as they come, whole lines only, so a
//! file still being written or cut off by a crash reads up to its last whole line
//! (`LineReader`), its header checked (`header_reason`, `read_header`), and a line's time on the
//! record's clock (`line_time`).
//!
//! A record read whole is a `Record`: its lines kept for the analyses that need them (report's
//! settling and goodput, plots, compare, merge, sweeps' cells), and its run folded from the
//! same events the live run folded (`record::feed::Feeder` → `fold::RunFold`), as `replay` and
//! `follow` fold them: the summary `report` prints is theirs by construction.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::Value;

use crate::event::{ModelInfo, RequestDone, RequestFailed};
use crate::fold::RunFold;
use crate::stats::{Metric, Slo};

use super::feed::{Fed, Feeder, FooterItl};
use super::line::{EventLine, Footer, Header, Line, RunEvent, StepLine};
use crate::summary::RunSummary;

/// One line of a record as written (`None`: not whole JSON, at most the last line of a record
/// cut off by a crash). Surrounding whitespace is ignored.
pub fn parse(line: &[u8]) -> Option<Line> {
    serde_json::from_slice::<Line>(line.trim_ascii()).ok()
}

/// The time a line says on the record's clock, if it says one: a line's `t_s`, the footer's
/// `elapsed_s`.
pub fn line_time(line: &Line) -> Option<f64> {
    match line {
        Line::Event(e) => Some(e.t_s),
        Line::Request(r) => r.t_s,
        Line::RequestFailed(f) => f.t_s,
        Line::Step(s) => s.t_s,
        Line::StepParts(p) => p.t_s,
        Line::Telemetry(s) => Some(s.t_s),
        Line::ServerMetrics(m) => Some(m.t_s),
        Line::NodeMetrics(n) => Some(n.t_s),
        Line::ScrapeFailed(f) => Some(f.t_s),
        Line::Footer(f) => Some(f.elapsed_s),
        Line::Header(_)
        | Line::Sweep(_)
        | Line::Cell(_)
        | Line::CellEnd(_)
        | Line::Determinism(_)
        | Line::Unknown => None,
    }
}

/// What `LineReader::next_line` found.
#[derive(Debug, PartialEq)]
pub enum Next<'a> {
    /// A whole, non-empty line (without its newline).
    Line(&'a [u8]),
    /// The end of what there is for now, and a partial line kept for when its end comes (a
    /// file being written); `false` when nothing is pending.
    End { partial: bool },
}

/// A record's lines from anything that reads (a file, a pipe, an agent's output), whole lines
/// only: a line without its newline yet stays pending until the rest comes, so a record being
/// written is read line by line as it grows.
pub struct LineReader<R> {
    reader: R,
    buf: Vec<u8>,
    /// The buffer holds a whole line that `next` handed out.
    taken: bool,
    read_bytes: u64,
}

impl LineReader<BufReader<File>> {
    /// Opens a record file; a path that is not a readable file is one line naming it.
    pub fn open(path: &Path) -> Result<LineReader<BufReader<File>>, String> {
        if path.is_dir() {
            return Err(format!(
                "{}: is a directory; pass a record file written with --record FILE",
                path.display()
            ));
        }
        let file = File::open(path).map_err(|e| crate::util::io_error(path, &e))?;
        Ok(LineReader::new(BufReader::with_capacity(1 << 16, file)))
    }
}

impl<R: BufRead> LineReader<R> {
    pub fn new(reader: R) -> LineReader<R> {
        LineReader {
            reader,
            buf: Vec::new(),
            taken: false,
            read_bytes: 0,
        }
    }

    /// The next whole line, or the end of what there is now.
    pub fn next_line(&mut self) -> std::io::Result<Next<'_>> {
        loop {
            if self.taken {
                self.buf.clear();
                self.taken = false;
            }
            let n = self.reader.read_until(b'\n', &mut self.buf)?;
            self.read_bytes += n as u64;
            if !self.buf.ends_with(b"\n") {
                return Ok(Next::End {
                    partial: !self.buf.is_empty(),
                });
            }
            self.taken = true;
            if !self.buf.trim_ascii().is_empty() {
                return Ok(Next::Line(self.taken_line()));
            }
        }
    }

    /// The line `next_line` handed out last, without its line end.
    fn taken_line(&self) -> &[u8] {
        let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        line.strip_suffix(b"\r").unwrap_or(line)
    }

    /// For a source that is done (a file read to its end): the next whole line, then a last
    /// line cut off without its newline (a crash's), then `None`.
    pub fn next_or_last(&mut self) -> std::io::Result<Option<&[u8]>> {
        if let Next::End { .. } = self.next_line()? {
            return Ok(self.rest());
        }
        Ok(Some(self.taken_line()))
    }

    /// What is left at the very end (the source is done): a last line without its newline, if
    /// there is one.
    pub fn rest(&mut self) -> Option<&[u8]> {
        if self.taken || self.buf.trim_ascii().is_empty() {
            return None;
        }
        self.taken = true;
        Some(&self.buf)
    }

    /// Bytes read so far.
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes
    }

    /// Whether a read now would wait (nothing buffered): a stream about to block.
    pub fn idle(&self) -> bool
    where
        R: BufReadBuffered,
    {
        self.reader.buffered() == 0
    }

    /// The reader itself (to look at what it reads from).
    pub fn get_ref(&self) -> &R {
        &self.reader
    }
}

/// A reader that can say how much it holds unread.
pub trait BufReadBuffered {
    fn buffered(&self) -> usize;
}

impl<T: std::io::Read> BufReadBuffered for BufReader<T> {
    fn buffered(&self) -> usize {
        self.buffer().len()
    }
}

/// The record's time at its end, from its last lines (the footer's `elapsed_s`, else the
/// latest line time): read from the end of the file, so a long record costs nothing here.
pub fn end_time(path: &Path) -> Option<f64> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 * 1024;
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let mut latest: Option<f64> = None;
    for line in buf.split(|&b| b == b'\n').rev() {
        match parse(line) {
            Some(Line::Footer(footer)) => return Some(footer.elapsed_s),
            Some(l) => {
                if let Some(t) = line_time(&l) {
                    latest = Some(latest.map_or(t, |x: f64| x.max(t)));
                }
            }
            None => {}
        }
    }
    latest
}

/// Line 1 of a record as its header, or the one line that says why it is not one (without a
/// name: the caller's message names the file or the source).
pub fn header_reason(line: &[u8]) -> Result<Header, String> {
    match parse(line) {
        Some(Line::Header(h)) => match format_problem(&h) {
            Some(why) => Err(why),
            None => Ok(*h),
        },
        _ => Err(
            "not an infertop record (line 1 is not a record header); make one with \
             --record FILE, or stream one with --jsonl"
                .into(),
        ),
    }
}

/// As `header_reason`, the reason prefixed with `name`.
pub fn header_of(name: &str, line: &[u8]) -> Result<Header, String> {
    header_reason(line).map_err(|why| format!("{name}: {why}"))
}

/// The header of the record at `path` (its first non-empty line), checked: one line naming the
/// file otherwise, before anything is drawn.
pub fn read_header(path: &Path) -> Result<Header, String> {
    let mut lines = LineReader::open(path)?;
    match lines
        .next_or_last()
        .map_err(|e| crate::util::io_error(path, &e))?
    {
        Some(first) => header_of(&path.display().to_string(), first),
        None => Err(format!(
            "{}: not an infertop record (the file is empty); make one with --record FILE",
            path.display()
        )),
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

/// Every line of the record at `path`, in order (`None`: not whole JSON), read once; an error
/// when it has no header line (not a record) or one of a newer format.
pub fn read_lines(path: &Path, mut each: impl FnMut(Option<Line>)) -> Result<(), String> {
    let mut lines = LineReader::open(path)?;
    let mut header: Option<Result<(), String>> = None;
    let mut any = false;
    let mut take = |bytes: &[u8], header: &mut Option<Result<(), String>>| {
        any = true;
        let line = parse(bytes);
        if header.is_none() {
            if let Some(Line::Header(h)) = &line {
                *header = Some(check_format(&path.display().to_string(), h));
            }
        }
        each(line);
    };
    while let Some(l) = lines
        .next_or_last()
        .map_err(|e| crate::util::io_error(path, &e))?
    {
        take(l, &mut header);
    }
    match header {
        Some(checked) => checked,
        None => Err(format!(
            "{}: not an infertop record (no header line{}); make one with --record FILE",
            path.display(),
            if any { "" } else { ", the file is empty" }
        )),
    }
}

/// Every line of the record at `path`, parsed and kept (a trace needs them all at once).
pub fn parse_lines(path: &Path) -> Result<Vec<Option<Line>>, String> {
    let mut out = Vec::new();
    read_lines(path, |l| out.push(l))?;
    Ok(out)
}

/// A record read back: its header, requests, steps and footer as written, and its run folded
/// as the live run folded it.
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
    /// The sampled steps in parts (`--step-parts`), in order.
    pub step_parts: Vec<crate::event::StepParts>,
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
    /// Lines that were not whole JSON (at most the last one after a crash).
    pub bad_lines: usize,
    /// The run, folded from the record's events exactly as the live run folded them (its
    /// statistics, the server's view, memory and energy).
    pub run: RunFold,
    /// The run's own ITL, from the footer of a record without step lines.
    pub footer_itl: FooterItl,
    /// What a `--determinism` run found (its `determinism` line).
    pub determinism: Option<crate::determinism::DeterminismSummary>,
    feeder: Feeder,
    fed: Vec<Fed>,
}

/// Reads a run's record (a sweep's record is read by `sweep::record::read`, which reads the
/// file once and tells the two apart).
pub fn read(path: &Path) -> Result<Record, String> {
    let mut rec = Record::new(path);
    read_lines(path, |l| rec.push(l))?;
    rec.finish();
    Ok(rec)
}

/// The summary a run printed, recomputed from its record (`report`, `--baseline`).
pub fn summary_of(path: &Path) -> Result<RunSummary, String> {
    Ok(read(path)?.summary())
}

/// The summary of a fold, as the run printed it: the footer's ITL where the record has no
/// step lines to recompute it from (`replay`, `follow` and `report` alike).
pub fn summary(run: &RunFold, footer_itl: &FooterItl) -> RunSummary {
    let mut summary = run.summary();
    if let Some(itl) = footer_itl.steady {
        summary.steady.set(Metric::Itl, itl);
    }
    if let Some(itl) = footer_itl.warmup {
        summary.warmup.set(Metric::Itl, itl);
    }
    for (model, itl) in &footer_itl.models {
        if let Some(m) = summary.models.iter_mut().find(|m| &m.model == model) {
            m.itl_s = *itl;
        }
    }
    summary
}

impl Record {
    /// An empty record of `path`, to push lines into.
    pub fn new(path: &Path) -> Record {
        Record {
            path: path.to_path_buf(),
            ..Record::default()
        }
    }

    /// Takes one line in (`None`: not whole JSON): kept as written, and its events folded.
    pub fn push(&mut self, line: Option<Line>) {
        let Some(line) = line else {
            self.bad_lines += 1;
            self.feeder.push(None, &mut self.fed);
            self.fold_fed();
            return;
        };
        match &line {
            Line::Header(h) => {
                if let Some(m) = &h.model {
                    self.model = Some(m.clone());
                }
                if self.header.is_none() {
                    // Goodput as the run counted it, against its own SLO.
                    self.run.slo = h.config.slo;
                    self.header = Some(h.as_ref().clone());
                }
            }
            Line::Event(e) => {
                match &e.event {
                    RunEvent::RunStarted { model, .. } if self.model.is_none() => {
                        self.model = Some(model.clone());
                    }
                    RunEvent::StatsReset => {
                        self.last_reset = Some((self.requests.len(), self.steps.len()));
                    }
                    _ => {}
                }
                self.events.push(e.clone());
            }
            Line::Telemetry(_) => self.telemetry_lines += 1,
            Line::Request(r) => {
                self.requests.push(r.request.clone());
                self.request_t_s.push(r.t_s);
            }
            Line::RequestFailed(f) => {
                self.failed.push(f.failed.clone());
                self.failed_t_s.push(f.t_s);
            }
            Line::ServerMetrics(m) => self.server_metrics.push(m.clone()),
            Line::Step(s) => self.steps.push(*s),
            Line::StepParts(p) => self.step_parts.push(p.parts.clone()),
            Line::Footer(f) => self.footer = Some(f.clone()),
            Line::Determinism(d) => self.determinism = Some(d.as_ref().clone()),
            Line::NodeMetrics(_) | Line::ScrapeFailed(_) => {}
            Line::Sweep(_) | Line::Cell(_) | Line::CellEnd(_) | Line::Unknown => {}
        }
        self.feeder.push(Some(line), &mut self.fed);
        self.fold_fed();
    }

    /// No more lines: what the feeder holds is folded (a record without a footer was cut off,
    /// and its run ends there, as `replay` shows it).
    pub fn finish(&mut self) {
        let name = self.path.display().to_string();
        self.feeder.finish(&name, &mut self.fed);
        self.fold_fed();
    }

    /// What the feeder holds is folded, without ending the run (a union of records, which has
    /// no footer of its own).
    pub fn flush(&mut self) {
        self.feeder.flush(&mut self.fed);
        self.fold_fed();
    }

    fn fold_fed(&mut self) {
        for fed in self.fed.drain(..) {
            match fed {
                Fed::Event { event, .. } => self.run.apply(&event),
                Fed::FooterItl(itl) => self.footer_itl = itl,
                Fed::Sweep(_) | Fed::Note(_) => {}
            }
        }
    }

    /// The summary the run printed, recomputed (see `summary_of`).
    pub fn summary(&self) -> RunSummary {
        summary(&self.run, &self.footer_itl)
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

    /// Steady requests that failed after the last `stats_reset` (by their end time; all of
    /// them in records without times), for goodput.
    pub fn steady_failures(&self) -> usize {
        let reset_at = self
            .events
            .iter()
            .filter(|e| e.event == RunEvent::StatsReset)
            .map(|e| e.t_s)
            .next_back();
        self.failed
            .iter()
            .zip(&self.failed_t_s)
            .filter(|(f, t)| !f.warmup && reset_at.is_none_or(|r| t.is_none_or(|t| t >= r)))
            .count()
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
