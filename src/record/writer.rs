//! Writes the JSONL record, flushed after every request.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::event::{Event, Notice, RequestDone, RequestFailed, StopReason};

use super::line::{
    CellLine, ErrorDetail, EventLine, FailedLine, Footer, Header, Line, RequestLine, RunEvent,
    ServerMetricsLine, StepLine, StepPartsLine,
};
use crate::summary::RunSummary;

/// The request line both stdout and the record carry.
pub fn request_line(r: &RequestDone, t_s: f64) -> String {
    Line::Request(RequestLine::of(r, Some(t_s))).to_json()
}

/// The line of a failed request (stdout and the record).
pub fn failed_line(f: &RequestFailed, t_s: f64) -> String {
    Line::RequestFailed(FailedLine {
        failed: f.clone(),
        t_s: Some(t_s),
    })
    .to_json()
}

/// A step line (`--jsonl-steps`).
pub fn step_line(index: u64, step: u32, itl_s: f64, gpu_s: Option<f64>, t_s: f64) -> String {
    Line::Step(StepLine {
        index,
        step,
        itl_s,
        gpu_s,
        t_s: Some(t_s),
    })
    .to_json()
}

/// The JSONL record file.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<Box<dyn Write + Send>>,
    steps: bool,
    failed: Option<String>,
}

impl Recorder {
    /// Creates (truncates) the record and writes the header line.
    pub fn create(path: &Path, header: Header, steps: bool) -> Result<Recorder, String> {
        if path.is_dir() {
            return Err(format!(
                "--record {}: is a directory; pass a file path such as run.jsonl",
                path.display()
            ));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !parent.is_dir() {
                return Err(format!(
                    "--record {}: the directory {} does not exist; create it first",
                    path.display(),
                    parent.display()
                ));
            }
        }
        let file = File::create(path).map_err(|e| {
            format!(
                "--record {}: cannot create ({})",
                path.display(),
                crate::util::one_line(&e.to_string())
            )
        })?;
        Ok(Recorder::to_writer(path, Box::new(file), header, steps))
    }

    /// The record streamed on stdout (`--jsonl`): the same lines, flushed as a file's are. A
    /// reader that goes away (the follower quit) ends the stream, never the run.
    pub fn stdout(header: Header, steps: bool) -> Recorder {
        Recorder::to_writer(
            Path::new("standard output"),
            Box::new(std::io::stdout()),
            header,
            steps,
        )
    }

    fn to_writer(path: &Path, out: Box<dyn Write + Send>, header: Header, steps: bool) -> Recorder {
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: BufWriter::new(out),
            steps,
            failed: None,
        };
        r.line(&Line::Header(Box::new(header)));
        r.flush();
        r
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write error, if any (recording stops there; the run goes on).
    pub fn error(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn line(&mut self, line: &Line) {
        if self.failed.is_some() {
            return;
        }
        let res = serde_json::to_writer(&mut self.out, line)
            .map_err(|e| e.to_string())
            .and_then(|_| self.out.write_all(b"\n").map_err(|e| e.to_string()));
        if let Err(e) = res {
            self.failed = Some(format!("{}: write failed ({e})", self.path.display()));
        }
    }

    fn flush(&mut self) {
        if let Err(e) = self.out.flush() {
            if self.failed.is_none() {
                self.failed = Some(format!("{}: write failed ({e})", self.path.display()));
            }
        }
    }

    /// Writes one line and flushes it (a sweep's grid, cell markers and cell summaries).
    pub fn write_line(&mut self, line: &Line) {
        self.line(line);
        self.flush();
    }

    /// Records one event; request lines are flushed at once.
    pub fn on_event(&mut self, t_s: f64, ev: &Event) {
        let event = |event| Line::Event(EventLine { t_s, event });
        match ev {
            Event::RunStarted(info) => self.line(&event(RunEvent::RunStarted {
                model: info.model.clone(),
                workload: info.workload.clone(),
                traffic: info.traffic.clone(),
                peak: info.peak.clone(),
            })),
            Event::RequestDone(r) => {
                self.line(&Line::Request(RequestLine::of(r, Some(t_s))));
                self.flush();
            }
            Event::RequestFailed(f) => {
                self.line(&Line::RequestFailed(FailedLine {
                    failed: f.as_ref().clone(),
                    t_s: Some(t_s),
                }));
                self.flush();
            }
            Event::Canary(c) => self.line(&event(RunEvent::Canary(c.as_ref().clone()))),
            Event::RequestCancelled(c) => {
                self.line(&event(RunEvent::RequestCancelled(c.as_ref().clone())));
                self.flush();
            }
            Event::DecodeSteps(steps) if self.steps => {
                for s in steps {
                    self.line(&Line::Step(StepLine {
                        index: s.index,
                        step: s.step,
                        itl_s: s.itl_s,
                        gpu_s: s.gpu_s(),
                        t_s: Some(t_s),
                    }));
                }
            }
            Event::StepParts(p) => self.line(&Line::StepParts(StepPartsLine {
                parts: p.as_ref().clone(),
                t_s: Some(t_s),
            })),
            Event::Telemetry(s) => self.line(&Line::Telemetry(s.as_ref().clone())),
            Event::CellStarted(c) => self.write_line(&Line::Cell(CellLine {
                cell: c.cell,
                params: c.params.clone(),
            })),
            Event::ServerMetrics(w) => self.line(&Line::ServerMetrics(ServerMetricsLine {
                t_s,
                window: w.as_ref().clone(),
            })),
            Event::Notice(n) => {
                self.line(&event(match n.as_ref() {
                    Notice::ModelLoaded(m) => RunEvent::ModelLoaded(m.clone()),
                    Notice::PrefixCacheReset(c) => RunEvent::PrefixCacheReset(c.clone()),
                    Notice::ApiPicked(a) => RunEvent::ApiPicked(a.clone()),
                    Notice::ServerNote(n) => RunEvent::ServerNote(n.clone()),
                    Notice::CancelCheck(c) => RunEvent::CancelCheck(c.clone()),
                    Notice::Cooldown(c) => RunEvent::Cooldown(*c),
                }));
                self.flush();
            }
            Event::Paused => self.line(&event(RunEvent::Paused)),
            Event::Resumed => self.line(&event(RunEvent::Resumed)),
            Event::StatsReset => self.line(&event(RunEvent::StatsReset)),
            Event::WorkloadChanged(w) => self.line(&event(RunEvent::WorkloadChanged {
                detail: w.as_ref().clone(),
            })),
            Event::Error { message, fatal } => {
                self.line(&event(RunEvent::Error {
                    detail: ErrorDetail {
                        message: message.clone(),
                        fatal: *fatal,
                    },
                }));
                self.flush();
            }
            _ => {}
        }
    }

    /// Writes the footer (how the run ended, the summary) and flushes.
    pub fn finish(&mut self, stop: &StopReason, elapsed_s: f64, summary: &RunSummary) {
        self.line(&Line::Footer(Footer {
            stop: stop.clone(),
            elapsed_s,
            summary: summary.to_json(),
        }));
        self.flush();
    }
}
