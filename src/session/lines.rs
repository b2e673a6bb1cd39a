//! What a headless run prints of its events as they come, whoever drives it (a run, a run
//! repeated, a determinism run's passes): a JSON line per request, failure and (with
//! `--jsonl-steps`) step on stdout, and warnings and what the client saw a server do on stderr.

use std::io::Write;

use crate::event::Event;
use crate::util::say;

/// The headless line of an event, if it has one: requests (flushed), failures, steps with
/// `--jsonl-steps`; warnings and server notes go to stderr.
pub(crate) fn print_line(out: &mut impl Write, ev: &Event, steps: bool, t_s: f64) {
    match ev {
        Event::DecodeSteps(batch) if steps => {
            for s in batch {
                let line =
                    crate::record::writer::step_line(s.index, s.step, s.itl_s, s.gpu_s(), t_s);
                let _ = writeln!(out, "{line}");
            }
        }
        Event::RequestDone(r) => {
            let _ = writeln!(out, "{}", crate::record::writer::request_line(r, t_s));
            let _ = out.flush();
        }
        Event::RequestFailed(f) => {
            let _ = writeln!(out, "{}", crate::record::writer::failed_line(f, t_s));
            let _ = out.flush();
        }
        other => say_aside(other),
    }
}

/// What a headless run says on stderr whatever stdout carries: warnings, and what the client
/// saw a server do.
pub(crate) fn say_aside(ev: &Event) {
    match ev {
        Event::Error {
            message,
            fatal: false,
        } => say!("infertop: warning: {message}"),
        Event::Notice(n) => match n.as_ref() {
            crate::event::Notice::ServerNote(note) => say!("infertop: note: {}", note.words),
            crate::event::Notice::CancelCheck(c) if c.leaked() => {
                say!("infertop: warning: {}", c.words())
            }
            crate::event::Notice::CancelCheck(c) => say!("infertop: note: {}", c.words()),
            _ => {}
        },
        _ => {}
    }
}
