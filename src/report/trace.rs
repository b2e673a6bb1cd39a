//! `infertop report RUN.jsonl --trace OUT.json`: a record as a Chrome trace-event file, which
//! Perfetto (ui.perfetto.dev) and chrome://tracing open, so a tail can be looked at in time: what
//! else was in flight, whether the server's queue grew, whether a pause or an error came first.
//!
//! ```text
//! process "run"            thread "events": run started, warmup ended, paused (a slice),
//!                          statistics reset, workload changes, errors (instants)
//! process "requests"       one thread per request slot (per endpoint, per sweep cell): a slice
//!                          per request, and in it "prefill" [start, TTFT] and "decode"
//!                          [TTFT, E2E]; a server's request has its HTTP phases in "prefill"
//!                          (connect, first byte, first token), or, when the server sent its
//!                          own timings, "network + client", "server queue" and "server
//!                          prefill" (the HTTP phases that fit inside the first), and with
//!                          --jsonl-steps every step
//!                          is a slice in "decode"; with --step-parts the sampled steps'
//!                          parts (attention, mlp, ..., summed over the layers) are slices
//!                          inside the prefill and the step; a counter of the requests in flight
//! process "telemetry"      counters: memory, GPU utilisation, power, temperature, clocks
//! process "server"         counters: the server's running and waiting requests, KV usage, ...
//! ```
//!
//! Times are the record's clock (a request starts at `t_s − e2e_s`; steps follow its first token
//! one ITL after another). Slices on a thread never overlap and always nest (the format requires
//! it): requests are given the lowest slot that is free when they start. The record's clock is
//! the consumer's, which hears of a request's end a little after the engine (by a varying
//! amount), so a request that overlaps the one before on its slot by less than 10 ms still shares
//! the slot, and the earlier is drawn up to the later's start (its arguments keep its exact
//! figures). Records written before requests carried `t_s` are laid end to end, and the file says
//! so.

use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use crate::event::{RequestDone, RequestFailed, Sample, StepParts};
use crate::record::line::{Line, RunEvent, StepLine};

const PID_RUN: u32 = 1;
const PID_TELEMETRY: u32 = 2;
const PID_SERVER: u32 = 3;
/// Requests' processes are numbered from here, one per (sweep cell, endpoint).
const PID_REQUESTS: u32 = 10;
/// The run process's only thread.
const TID_EVENTS: u32 = 1;
/// How much two requests may overlap on the record's clock and still share a slot (10 ms).
const SLACK: Ns = 10_000_000;

/// What was written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceSummary {
    pub requests: usize,
    pub failed: usize,
    /// Request slots (threads) over all request processes.
    pub slots: usize,
    pub events: usize,
    /// The record predates request times: requests were laid end to end.
    pub laid_end_to_end: bool,
}

/// One trace event, as the format has it (`ts` and `dur` in microseconds).
#[derive(Clone, Debug, Serialize)]
pub struct TraceEvent {
    pub name: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub cat: &'static str,
    pub ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    pub pid: u32,
    pub tid: u32,
    /// Scope of an instant (`t`: its thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
}

/// Nanoseconds since the record's start.
type Ns = i64;

fn ns(s: f64) -> Ns {
    (s * 1e9).round() as Ns
}

fn us(t: Ns) -> f64 {
    t as f64 / 1e3
}

fn ms(s: f64) -> f64 {
    // Three decimals of a millisecond (a microsecond) read better in the UI's details.
    (s * 1e6).round() / 1e3
}

/// A request or a failure, placed in time.
struct Placed<'a> {
    group: usize,
    start: Ns,
    end: Ns,
    what: Kind<'a>,
}

enum Kind<'a> {
    Done(&'a RequestDone),
    Failed(&'a RequestFailed),
}

/// The lines of a record, sorted into what the trace shows.
#[derive(Default)]
struct Gathered<'a> {
    /// (cell, endpoint) → group number, in order of first appearance.
    groups: Vec<(Option<usize>, Option<String>, String)>,
    placed: Vec<Placed<'a>>,
    /// Per (group's cell, request index): its step lines in order.
    steps: HashMap<(Option<usize>, u64), Vec<&'a StepLine>>,
    /// Per (cell, request index, step): a sampled step in parts (`--step-parts`).
    parts: HashMap<(Option<usize>, u64, u32), &'a StepParts>,
    events: Vec<(f64, &'a RunEvent)>,
    telemetry: Vec<&'a Sample>,
    server: Vec<&'a crate::record::line::ServerMetricsLine>,
    /// The end of each cell's last warmup request, by cell.
    warmup_end: BTreeMap<Option<usize>, f64>,
    laid_end_to_end: bool,
}

/// The trace of a record's parsed lines (`reader::parse_lines`).
pub fn events(lines: &[Option<Line>]) -> Result<(Vec<TraceEvent>, TraceSummary), String> {
    let g = gather(lines)?;
    let mut out = Vec::new();
    meta(&mut out, PID_RUN, None, "run", 0);
    thread_name(&mut out, PID_RUN, TID_EVENTS, "events");
    run_track(&mut out, &g);
    let slots = request_tracks(&mut out, &g);
    counters(&mut out, &g);
    let summary = TraceSummary {
        requests: g
            .placed
            .iter()
            .filter(|p| matches!(p.what, Kind::Done(_)))
            .count(),
        failed: g
            .placed
            .iter()
            .filter(|p| matches!(p.what, Kind::Failed(_)))
            .count(),
        slots,
        events: out.len(),
        laid_end_to_end: g.laid_end_to_end,
    };
    Ok((out, summary))
}

/// Writes the trace of `lines` (read from `record`) to `out`, as one JSON object:
/// `{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}`.
pub fn write(record: &Path, lines: &[Option<Line>], out: &Path) -> Result<TraceSummary, String> {
    let (events, summary) = events(lines)?;
    let header = lines.iter().flatten().find_map(|l| match l {
        Line::Header(h) => Some(h.as_ref()),
        _ => None,
    });
    let other = json!({
        "record": record.display().to_string(),
        "written_by": format!("infertop {}", env!("CARGO_PKG_VERSION")),
        "command": header.map(|h| h.command.join(" ")),
        "requests_laid_end_to_end": summary.laid_end_to_end,
    });
    let cannot = |e: std::io::Error| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "its directory does not exist".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
            _ => crate::util::one_line(&e.to_string()),
        };
        format!(
            "--trace {}: cannot write ({why}); pass a file in a writable directory",
            out.display()
        )
    };
    let file = std::fs::File::create(out).map_err(cannot)?;
    let mut w = std::io::BufWriter::new(file);
    let written = (|| -> std::io::Result<()> {
        w.write_all(b"{\"traceEvents\":[\n")?;
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                w.write_all(b",\n")?;
            }
            serde_json::to_writer(&mut w, e)?;
        }
        w.write_all(b"\n],\"displayTimeUnit\":\"ms\",\"otherData\":")?;
        serde_json::to_writer(&mut w, &other)?;
        w.write_all(b"}\n")?;
        w.flush()
    })();
    if let Err(e) = written {
        // Nothing half-written is left behind to be opened.
        let _ = std::fs::remove_file(out);
        return Err(cannot(e));
    }
    Ok(summary)
}

fn gather(lines: &[Option<Line>]) -> Result<Gathered<'_>, String> {
    let mut g = Gathered::default();
    let mut cell: Option<usize> = None;
    // Requests without `t_s` (old records) follow each other per group.
    let mut cursor: HashMap<usize, f64> = HashMap::new();
    let group_of = |g: &mut Gathered, cell: Option<usize>, endpoint: Option<&str>| {
        let key = (cell, endpoint.map(str::to_string));
        match g.groups.iter().position(|(c, e, _)| (*c, e.clone()) == key) {
            Some(i) => i,
            None => {
                let name = match (&key.0, &key.1) {
                    (None, None) => "requests".to_string(),
                    (None, Some(e)) => format!("requests {e}"),
                    (Some(c), None) => format!("cell {c} requests"),
                    (Some(c), Some(e)) => format!("cell {c} requests {e}"),
                };
                g.groups.push((key.0, key.1, name));
                g.groups.len() - 1
            }
        }
    };
    let mut cell_names: HashMap<usize, String> = HashMap::new();
    for line in lines.iter().flatten() {
        match line {
            Line::Cell(c) => {
                cell = Some(c.cell);
                let mut words = vec![c.params.workload_words()];
                words.extend(c.params.load_words(false));
                cell_names.insert(c.cell, words.join(", "));
            }
            Line::CellEnd(_) => cell = None,
            Line::Request(r) => {
                let req = &r.request;
                let endpoint = req.client.as_ref().map(|c| c.endpoint.as_str());
                let group = group_of(&mut g, cell, endpoint);
                let (start, end) = match r.t_s {
                    Some(t) => (t - req.e2e_s, t),
                    None => {
                        g.laid_end_to_end = true;
                        let at = cursor.entry(group).or_insert(0.0);
                        let span = (*at, *at + req.e2e_s);
                        *at = span.1;
                        span
                    }
                };
                if req.warmup {
                    let w = g.warmup_end.entry(cell).or_insert(end);
                    *w = w.max(end);
                }
                g.placed.push(Placed {
                    group,
                    start: ns(start),
                    end: ns(end).max(ns(start)),
                    what: Kind::Done(req),
                });
            }
            Line::RequestFailed(f) => {
                let fail = &f.failed;
                let group = group_of(&mut g, cell, fail.endpoint.as_deref());
                let (start, end) = match f.t_s {
                    Some(t) => (t - fail.elapsed_s, t),
                    None => {
                        g.laid_end_to_end = true;
                        let at = cursor.entry(group).or_insert(0.0);
                        let span = (*at, *at + fail.elapsed_s);
                        *at = span.1;
                        span
                    }
                };
                g.placed.push(Placed {
                    group,
                    start: ns(start),
                    end: ns(end).max(ns(start)),
                    what: Kind::Failed(fail),
                });
            }
            Line::Step(s) => g.steps.entry((cell, s.index)).or_default().push(s),
            Line::StepParts(p) => {
                g.parts
                    .insert((cell, p.parts.index, p.parts.step), &p.parts);
            }
            Line::Event(e) => g.events.push((e.t_s, &e.event)),
            Line::Telemetry(s) => g.telemetry.push(s),
            Line::ServerMetrics(m) => g.server.push(m),
            _ => {}
        }
    }
    if g.placed.is_empty() {
        return Err("no requests to trace: the record has no request or request_failed line (the run ended before its first request finished)".into());
    }
    for (c, _, name) in &mut g.groups {
        if let Some(words) = c.and_then(|c| cell_names.get(&c)) {
            *name = format!("{name} ({words})");
        }
    }
    // A record's clock starts at 0; should anything come before, the trace starts there.
    let earliest = g.placed.iter().map(|p| p.start).min().unwrap_or(0);
    if earliest < 0 {
        for p in &mut g.placed {
            p.start -= earliest;
            p.end -= earliest;
        }
    }
    Ok(g)
}

fn meta(out: &mut Vec<TraceEvent>, pid: u32, tid: Option<u32>, name: &str, sort: u32) {
    let tid = tid.unwrap_or(pid);
    out.push(TraceEvent {
        name: "process_name".into(),
        cat: "",
        ph: "M",
        ts: None,
        dur: None,
        pid,
        tid,
        s: None,
        args: Some(json!({ "name": name })),
    });
    out.push(TraceEvent {
        name: "process_sort_index".into(),
        cat: "",
        ph: "M",
        ts: None,
        dur: None,
        pid,
        tid,
        s: None,
        args: Some(json!({ "sort_index": sort })),
    });
}

/// A thread's name, and its place among its process's threads (chrome://tracing sorts by it;
/// Perfetto sorts by thread id, which is the slot number).
fn thread_name(out: &mut Vec<TraceEvent>, pid: u32, tid: u32, name: &str) {
    for (key, args) in [
        ("thread_name", json!({ "name": name })),
        ("thread_sort_index", json!({ "sort_index": tid })),
    ] {
        out.push(TraceEvent {
            name: key.into(),
            cat: "",
            ph: "M",
            ts: None,
            dur: None,
            pid,
            tid,
            s: None,
            args: Some(args),
        });
    }
}

fn slice(
    name: String,
    cat: &'static str,
    pid: u32,
    tid: u32,
    from: Ns,
    to: Ns,
    args: Value,
) -> TraceEvent {
    TraceEvent {
        name,
        cat,
        ph: "X",
        ts: Some(us(from)),
        dur: Some(us((to - from).max(0))),
        pid,
        tid,
        s: None,
        args: Some(args),
    }
}

fn instant(name: String, cat: &'static str, pid: u32, tid: u32, at: Ns, args: Value) -> TraceEvent {
    TraceEvent {
        name,
        cat,
        ph: "i",
        ts: Some(us(at)),
        dur: None,
        pid,
        tid,
        s: Some("t"),
        args: Some(args),
    }
}

fn counter(name: &str, key: &str, pid: u32, at: Ns, value: f64) -> TraceEvent {
    TraceEvent {
        name: name.into(),
        cat: "",
        ph: "C",
        ts: Some(us(at)),
        dur: None,
        pid,
        tid: pid,
        s: None,
        args: Some(json!({ key: value })),
    }
}

/// The run's own thread: pauses as slices, everything else as instants, in time order.
fn run_track(out: &mut Vec<TraceEvent>, g: &Gathered) {
    enum Mark {
        Slice(Ns, Ns, String, Value),
        Instant(Ns, String, Value),
    }
    let mut marks: Vec<Mark> = Vec::new();
    let mut paused_at: Option<Ns> = None;
    let last = g
        .placed
        .iter()
        .map(|p| p.end)
        .chain(g.events.iter().map(|(t, _)| ns(*t)))
        .max()
        .unwrap_or(0);
    for (t_s, event) in &g.events {
        let t = ns(*t_s).max(0);
        match event {
            RunEvent::RunStarted {
                model, workload, ..
            } => marks.push(Mark::Instant(
                t,
                "run started".into(),
                json!({"model": model.name, "device": model.device, "workload": workload}),
            )),
            RunEvent::Paused => {
                paused_at.get_or_insert(t);
            }
            RunEvent::Resumed => {
                if let Some(from) = paused_at.take() {
                    marks.push(Mark::Slice(from, t, "paused".into(), json!({})));
                }
            }
            RunEvent::StatsReset => {
                marks.push(Mark::Instant(t, "statistics reset".into(), json!({})))
            }
            RunEvent::ModelLoaded(m) => marks.push(Mark::Instant(
                t,
                format!("model loaded: {} {}", m.model, m.dtype),
                json!({"load_s": m.load_s, "bytes": m.bytes}),
            )),
            RunEvent::PrefixCacheReset(c) => marks.push(Mark::Instant(
                t,
                "prefix cache reset".into(),
                serde_json::to_value(c).unwrap_or_default(),
            )),
            RunEvent::ApiPicked(a) => marks.push(Mark::Instant(
                t,
                format!("api: {}", a.api),
                serde_json::to_value(a).unwrap_or_default(),
            )),
            RunEvent::ServerNote(n) => marks.push(Mark::Instant(
                t,
                format!("server: {}", n.what),
                serde_json::to_value(n).unwrap_or_default(),
            )),
            RunEvent::RequestCancelled(c) => marks.push(Mark::Instant(
                t,
                format!("cancelled #{}", c.index),
                serde_json::to_value(c).unwrap_or_default(),
            )),
            RunEvent::Canary(c) => marks.push(Mark::Instant(
                t,
                format!("canary #{}", c.index),
                serde_json::to_value(c).unwrap_or_default(),
            )),
            RunEvent::CancelCheck(c) => marks.push(Mark::Instant(
                t,
                "after cancellation".into(),
                serde_json::to_value(c).unwrap_or_default(),
            )),
            RunEvent::Cooldown(c) => marks.push(Mark::Slice(
                t,
                ns(*t_s + c.seconds).max(t),
                format!("cooldown after run {}", c.after_run + 1),
                serde_json::to_value(c).unwrap_or_default(),
            )),
            RunEvent::WorkloadChanged { detail } => marks.push(Mark::Instant(
                t,
                format!(
                    "workload: prompt {}, output {}, {}",
                    detail.prompt_tokens,
                    detail.output_tokens,
                    detail.load_text()
                ),
                json!({ "workload": detail }),
            )),
            RunEvent::Error { detail } => marks.push(Mark::Instant(
                t,
                if detail.fatal {
                    "fatal error"
                } else {
                    "warning"
                }
                .into(),
                json!({ "message": detail.message }),
            )),
            RunEvent::Other => {}
        }
    }
    if let Some(from) = paused_at {
        marks.push(Mark::Slice(
            from,
            last.max(from),
            "paused".into(),
            json!({}),
        ));
    }
    for (cell, end) in &g.warmup_end {
        let name = match cell {
            Some(c) => format!("cell {c}: warmup ended"),
            None => "warmup ended".into(),
        };
        marks.push(Mark::Instant(ns(*end).max(0), name, json!({})));
    }
    // Sorted by time; a slice before the instants that fall at its start.
    marks.sort_by_key(|m| match m {
        Mark::Slice(from, to, ..) => (*from, 0, -*to),
        Mark::Instant(at, ..) => (*at, 1, 0),
    });
    for m in marks {
        out.push(match m {
            Mark::Slice(from, to, name, args) => {
                slice(name, "run", PID_RUN, TID_EVENTS, from, to, args)
            }
            Mark::Instant(at, name, args) => instant(name, "run", PID_RUN, TID_EVENTS, at, args),
        });
    }
}

/// Every group's requests on the lowest free slot; returns how many slots there are in all.
fn request_tracks(out: &mut Vec<TraceEvent>, g: &Gathered) -> usize {
    let mut slots_total = 0;
    for (group, (cell, _, name)) in g.groups.iter().enumerate() {
        let pid = PID_REQUESTS + group as u32;
        meta(out, pid, None, name, pid);
        let mut mine: Vec<&Placed> = g.placed.iter().filter(|p| p.group == group).collect();
        mine.sort_by_key(|p| (p.start, p.end));
        // Busy slots by when they free up (min-heap), free slots lowest first.
        let mut busy: BinaryHeap<std::cmp::Reverse<(Ns, u32)>> = BinaryHeap::new();
        let mut free: BinaryHeap<std::cmp::Reverse<u32>> = BinaryHeap::new();
        let mut count: u32 = 0;
        let mut by_slot: BTreeMap<u32, Vec<&Placed>> = BTreeMap::new();
        for p in &mine {
            while let Some(std::cmp::Reverse((end, slot))) = busy.peek().copied() {
                if end > p.start {
                    break;
                }
                busy.pop();
                free.push(std::cmp::Reverse(slot));
            }
            // The record's clock is the consumer's, a little after the engine's, and not by the
            // same amount for every request: a slot whose request ends within SLACK of this
            // one's start is free (the earlier is trimmed to the later's start below).
            if free.is_empty() {
                if let Some(std::cmp::Reverse((end, slot))) = busy.peek().copied() {
                    if end <= p.start + SLACK {
                        busy.pop();
                        free.push(std::cmp::Reverse(slot));
                    }
                }
            }
            let slot = match free.pop() {
                Some(std::cmp::Reverse(s)) => s,
                None => {
                    count += 1;
                    count
                }
            };
            busy.push(std::cmp::Reverse((p.end, slot)));
            by_slot.entry(slot).or_default().push(p);
        }
        slots_total += count as usize;
        let mut spans = Vec::with_capacity(mine.len());
        for (slot, placed) in &by_slot {
            thread_name(out, pid, *slot, &format!("slot {slot}"));
            for (i, p) in placed.iter().enumerate() {
                let end = placed
                    .get(i + 1)
                    .map_or(p.end, |next| p.end.min(next.start));
                request_slices(out, g, *cell, pid, *slot, p, end);
                spans.push((p.start, end.max(p.start)));
            }
        }
        in_flight(out, pid, &spans);
    }
    slots_total
}

/// A request's slice and, nested in it, its prefill (with a server's HTTP phases), its decode
/// and its steps.
#[allow(clippy::too_many_arguments)]
fn request_slices(
    out: &mut Vec<TraceEvent>,
    g: &Gathered,
    cell: Option<usize>,
    pid: u32,
    tid: u32,
    p: &Placed,
    end: Ns,
) {
    let start = p.start;
    let end = end.max(start);
    let within = |t: Ns| t.clamp(start, end);
    let r = match p.what {
        Kind::Failed(f) => {
            out.push(slice(
                format!("#{} failed", f.index),
                "failed",
                pid,
                tid,
                start,
                end,
                json!({"index": f.index, "warmup": f.warmup, "reason": f.reason, "status": f.status, "endpoint": f.endpoint, "elapsed_ms": ms(f.elapsed_s)}),
            ));
            return;
        }
        Kind::Done(r) => r,
    };
    let mut args = json!({
        "index": r.index,
        "warmup": r.warmup,
        "batch": r.batch,
        "prompt_tokens": r.prompt_tokens,
        "output_tokens": r.output_tokens,
        "ttft_ms": ms(r.ttft_s),
        "tpot_ms": r.tpot_s.map(ms),
        "e2e_ms": ms(r.e2e_s),
    });
    if let Some(c) = &r.client {
        args["endpoint"] = json!(c.endpoint);
        args["send_delay_ms"] = json!(ms(c.send_delay_s));
        args["content_chunks"] = json!(c.content_chunks);
        args["finish_reason"] = json!(c.finish_reason);
        args["ttst_ms"] = json!(c.ttst_s.map(ms));
        if let Some(h) = &c.http {
            args["connection"] = json!(h.connection.name());
        }
        if let Some(t) = &c.server {
            args["server"] = json!({
                "source": t.source, "queue_ms": t.queue_s.map(ms),
                "prefill_ms": t.prefill_s.map(ms), "decode_ms": t.decode_s.map(ms),
                "network_client_ms": t.rest_s.map(ms), "cached_tokens": t.cached_tokens,
                "computed_tokens": t.computed_tokens,
            });
        }
    }
    let name = if r.warmup {
        format!("#{} (warmup)", r.index)
    } else {
        format!("#{}", r.index)
    };
    out.push(slice(name, "request", pid, tid, start, end, args));
    let first = within(start + ns(r.ttft_s));
    out.push(slice(
        "prefill".into(),
        "prefill",
        pid,
        tid,
        start,
        first,
        json!({"ttft_ms": ms(r.ttft_s), "gpu_ttft_ms": r.gpu_ttft_s.map(ms)}),
    ));
    if let Some(parts) = g.parts.get(&(cell, r.index, 0)) {
        part_slices(out, pid, tid, start, first, parts);
    }
    // The server's own timings: its queue and prefill end at the first token (the way back is
    // not known apart from the way there: both are in the rest), and the rest of the TTFT
    // (network, HTTP, the client) comes before them, the HTTP phases that fit nested in it.
    let split = r
        .client
        .as_ref()
        .and_then(|c| c.server.as_ref())
        .and_then(|t| Some((t.prefill_s?, t.queue_s, t.rest_s?)));
    // Slices on a thread go in time order: the server's two after the HTTP phases nested in
    // the rest.
    let mut server_slices = Vec::new();
    let server_from = match split {
        Some((prefill, queue, rest)) => {
            let prefill_from = within(first - ns(prefill)).max(start);
            let queue_from = within(prefill_from - ns(queue.unwrap_or(0.0))).max(start);
            out.push(slice(
                "network + client".into(),
                "split",
                pid,
                tid,
                start,
                queue_from,
                json!({"rest_ms": ms(rest), "what": "TTFT − the server's queue and prefill: network both ways, HTTP, the client"}),
            ));
            if let Some(q) = queue {
                server_slices.push(slice(
                    "server queue".into(),
                    "split",
                    pid,
                    tid,
                    queue_from,
                    prefill_from,
                    json!({"queue_ms": ms(q)}),
                ));
            }
            server_slices.push(slice(
                "server prefill".into(),
                "split",
                pid,
                tid,
                prefill_from,
                first,
                json!({"prefill_ms": ms(prefill)}),
            ));
            Some(queue_from)
        }
        None => None,
    };
    if let Some(h) = r.client.as_ref().and_then(|c| c.http.as_ref()) {
        // With the split, HTTP phases are drawn only inside its "network + client".
        let limit = server_from.unwrap_or(first);
        let at = |s: f64| within(start + ns(s)).min(first);
        let connected = at(h.connected_s).min(limit);
        if h.connection == crate::event::ConnectionUse::New {
            let opening = h.dns_s.unwrap_or(0.0) + h.tcp_s.unwrap_or(0.0) + h.tls_s.unwrap_or(0.0);
            out.push(slice(
                "connect".into(),
                "http",
                pid,
                tid,
                at(h.connected_s - opening).min(connected),
                connected,
                json!({"dns_ms": h.dns_s.map(ms), "tcp_ms": h.tcp_s.map(ms), "tls_ms": h.tls_s.map(ms)}),
            ));
        }
        if let Some(byte) = h.first_byte_s.map(at).filter(|b| *b <= limit) {
            let sent = h
                .sent_s
                .map(at)
                .unwrap_or(connected)
                .max(connected)
                .min(byte);
            out.push(slice(
                "waiting for the first byte".into(),
                "http",
                pid,
                tid,
                sent,
                byte,
                json!({"sent_ms": h.sent_s.map(ms), "first_byte_ms": h.first_byte_s.map(ms)}),
            ));
            if server_from.is_none() {
                out.push(slice(
                    "first byte → first token".into(),
                    "http",
                    pid,
                    tid,
                    byte,
                    first,
                    json!({}),
                ));
            }
        }
    }
    out.append(&mut server_slices);
    out.push(slice(
        "decode".into(),
        "decode",
        pid,
        tid,
        first,
        end,
        json!({"output_tokens": r.output_tokens, "tpot_ms": r.tpot_s.map(ms), "gpu_decode_ms": r.gpu_decode_s.map(ms)}),
    ));
    if let Some(steps) = g.steps.get(&(cell, r.index)) {
        let mut t = first;
        for s in steps {
            let to = within(t + ns(s.itl_s));
            out.push(slice(
                "step".into(),
                "step",
                pid,
                tid,
                t,
                to,
                json!({"step": s.step, "itl_ms": ms(s.itl_s), "gpu_ms": s.gpu_s.map(ms)}),
            ));
            if let Some(parts) = g.parts.get(&(cell, r.index, s.step)) {
                part_slices(out, pid, tid, t, to, parts);
            }
            t = to;
        }
    }
}

/// A sampled step's parts (`--step-parts`) as slices inside it, one after another in the
/// order a forward runs them. The attention and MLP of every layer are summed into one slice
/// each, so the slices give each part's length, not when each layer ran.
fn part_slices(out: &mut Vec<TraceEvent>, pid: u32, tid: u32, from: Ns, to: Ns, p: &StepParts) {
    let mut t = from;
    for ((_, name), s) in StepParts::PARTS.iter().zip(p.seconds()) {
        let Some(s) = s else { continue };
        let end = (t + ns(s)).min(to);
        out.push(slice(
            name.to_string(),
            "parts",
            pid,
            tid,
            t,
            end,
            json!({"ms": ms(s), "share": s / p.wall_s.max(f64::MIN_POSITIVE), "summed": "over every layer: a length, not a time"}),
        ));
        t = end;
    }
}

/// The requests in flight over time, as the slots show them (a counter on the requests'
/// process).
fn in_flight(out: &mut Vec<TraceEvent>, pid: u32, spans: &[(Ns, Ns)]) {
    let mut edges: Vec<(Ns, i64)> = spans
        .iter()
        .flat_map(|&(start, end)| [(start, 1), (end, -1)])
        .collect();
    // At one instant, ends before starts: a slot freed and taken again is not two in flight.
    edges.sort_unstable();
    let mut n: i64 = 0;
    let mut i = 0;
    while i < edges.len() {
        let t = edges[i].0;
        while i < edges.len() && edges[i].0 == t {
            n += edges[i].1;
            i += 1;
        }
        out.push(counter("in flight", "requests", pid, t, n as f64));
    }
}

/// Telemetry and the server's metrics as counters, each series in time order.
fn counters(out: &mut Vec<TraceEvent>, g: &Gathered) {
    let mib = |b: Option<u64>| b.map(|b| b as f64 / (1024.0 * 1024.0));
    type Series<'a> = (
        &'static str,
        &'static str,
        Box<dyn Fn(&Sample) -> Option<f64> + 'a>,
    );
    let telemetry: Vec<Series> = vec![
        ("RSS", "MiB", Box::new(move |s: &Sample| mib(s.rss_bytes))),
        (
            "allocated",
            "MiB",
            Box::new(move |s: &Sample| mib(s.alloc_bytes)),
        ),
        (
            "device memory",
            "MiB",
            Box::new(move |s: &Sample| mib(s.device_used_bytes)),
        ),
        (
            "GPU util",
            "%",
            Box::new(|s: &Sample| s.gpu_util_pct.map(f64::from)),
        ),
        (
            "GPU memory util",
            "%",
            Box::new(|s: &Sample| s.mem_util_pct.map(f64::from)),
        ),
        ("power", "W", Box::new(|s: &Sample| s.power_w)),
        (
            "temperature",
            "C",
            Box::new(|s: &Sample| s.temperature_c.map(f64::from)),
        ),
        (
            "SM clock",
            "MHz",
            Box::new(|s: &Sample| s.sm_clock_mhz.map(f64::from)),
        ),
    ];
    let mut named = false;
    for (name, key, get) in &telemetry {
        let points: Vec<(Ns, f64)> = g
            .telemetry
            .iter()
            .filter_map(|s| Some((ns(s.t_s).max(0), get(s)?)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        if points.is_empty() {
            continue;
        }
        if !named {
            meta(out, PID_TELEMETRY, None, "telemetry", PID_TELEMETRY);
            named = true;
        }
        for (t, v) in sorted(points) {
            out.push(counter(name, key, PID_TELEMETRY, t, v));
        }
    }
    type ServerSeries = (
        &'static str,
        &'static str,
        fn(&crate::event::ServerWindow) -> Option<f64>,
    );
    let server: [ServerSeries; 6] = [
        ("server running", "requests", |w| w.running),
        ("server waiting", "requests", |w| w.waiting),
        ("server KV cache", "%", |w| w.kv_usage.map(|u| u * 100.0)),
        ("server throughput", "requests/s", |w| w.requests_per_s),
        ("server preemptions", "per window", |w| w.preemptions),
        ("server prefix hits", "%", |w| {
            w.prefix_hit_rate.map(|h| h * 100.0)
        }),
    ];
    let mut named = false;
    for (name, key, get) in server {
        let points: Vec<(Ns, f64)> = g
            .server
            .iter()
            .filter_map(|m| Some((ns(m.t_s).max(0), get(&m.window)?)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        if points.is_empty() {
            continue;
        }
        if !named {
            meta(out, PID_SERVER, None, "server", PID_SERVER);
            named = true;
        }
        for (t, v) in sorted(points) {
            out.push(counter(name, key, PID_SERVER, t, v));
        }
    }
}

fn sorted(mut points: Vec<(Ns, f64)>) -> Vec<(Ns, f64)> {
    points.sort_by_key(|p| p.0);
    points
}
