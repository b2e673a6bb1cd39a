//! Writes the JSONL record, flushed after every request.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::event::{Event, RequestDone, StopReason};

use super::RunSummary;

/// The request line both stdout and the record carry.
pub fn request_line(r: &RequestDone) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert("type".into(), "request".into());
        obj.insert("prefill_tok_s".into(), json!(r.prefill_tok_s()));
        obj.insert("decode_tok_s".into(), json!(r.decode_tok_s()));
    }
    v
}

/// A step line (`--jsonl-steps`).
pub fn step_line(index: u64, step: u32, itl_s: f64, gpu_s: Option<f64>) -> Value {
    let mut v = json!({"type": "step", "index": index, "step": step, "itl_s": itl_s});
    if let (Some(g), Some(obj)) = (gpu_s, v.as_object_mut()) {
        obj.insert("gpu_s".into(), json!(g));
    }
    v
}

/// The JSONL record file.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
    steps: bool,
    failed: Option<String>,
}

impl Recorder {
    /// Creates (truncates) the record and writes the header line.
    pub fn create(path: &Path, header: Value, steps: bool) -> Result<Recorder, String> {
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
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            steps,
            failed: None,
        };
        r.line(&header);
        r.flush();
        Ok(r)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write error, if any (recording stops there; the run goes on).
    pub fn error(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn line(&mut self, v: &Value) {
        if self.failed.is_some() {
            return;
        }
        let res = serde_json::to_writer(&mut self.out, v)
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

    /// Records one event; request lines are flushed at once.
    pub fn on_event(&mut self, t_s: f64, ev: &Event) {
        match ev {
            Event::RunStarted(info) => {
                let v = json!({"type": "event", "t_s": t_s, "event": "run_started", "model": info.model, "workload": info.workload});
                self.line(&v);
            }
            Event::RequestDone(r) => {
                self.line(&request_line(r));
                self.flush();
            }
            Event::DecodeStep {
                index,
                step,
                itl_s,
                gpu_s,
            } if self.steps => {
                self.line(&step_line(*index, *step, *itl_s, *gpu_s));
            }
            Event::Telemetry(s) => {
                let mut v = serde_json::to_value(s.as_ref()).unwrap_or_else(|_| json!({}));
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("type".into(), "telemetry".into());
                }
                self.line(&v);
            }
            Event::Paused => self.event(t_s, "paused", Value::Null),
            Event::Resumed => self.event(t_s, "resumed", Value::Null),
            Event::StatsReset => self.event(t_s, "stats_reset", Value::Null),
            Event::WorkloadChanged(w) => self.event(t_s, "workload_changed", json!(w)),
            Event::Error { message, fatal } => {
                self.event(t_s, "error", json!({"message": message, "fatal": fatal}));
                self.flush();
            }
            _ => {}
        }
    }

    fn event(&mut self, t_s: f64, name: &str, detail: Value) {
        let mut v = json!({"type": "event", "t_s": t_s, "event": name});
        if let (false, Some(obj)) = (detail.is_null(), v.as_object_mut()) {
            obj.insert("detail".into(), detail);
        }
        self.line(&v);
    }

    /// Writes the footer (how the run ended, the summary) and flushes.
    pub fn finish(&mut self, stop: &StopReason, elapsed_s: f64, summary: &RunSummary) {
        let v = json!({
            "type": "footer",
            "stop": stop,
            "elapsed_s": elapsed_s,
            "summary": summary.to_json(),
        });
        self.line(&v);
        self.flush();
    }
}
