//! A streaming OpenAI-compatible completions server on 127.0.0.1 with exact, injected timings:
//! the first token after `ttft`, then one every `itl`, a usage chunk and `[DONE]`. Every
//! connection has its own thread, so requests in flight do not slow each other: throughput
//! grows with concurrency and TTFT does not.
//!
//! `start_counted` counts connections and can keep them alive (request after request on one);
//! `start_with` adds what a capacity test and a cache test need: a fixed number of slots
//! (requests beyond them wait for one, their wait in their TTFT, as a server's queue) and the
//! prefix-cache reset route it answers (vLLM's or SGLang's; other paths but the completions
//! one are 404), counting the resets. A client's check that the route exists (its probe, `detect::PROBE_BODY`)
//! is refused with 400 without taking a slot, as a server refuses a
//! request without a prompt. `start_reporting` also sends the server's own timings
//! of each request as vLLM (`metrics` on the usage chunk) and llama.cpp (`timings`) do on
//! their OpenAI-compatible streams: its wait for a slot as the queue, `ttft` as the prefill,
//! the steps after it as the decode; a `hop` it spends before its clock starts (a gateway's)
//! it does not report. `Dialect::Sglang` is a shape check of the parser only: it puts a
//! `meta_info` object in the shape of SGLang's native `/generate` API on the OpenAI usage
//! chunk, which SGLang's own OpenAI-compatible routes do not send. `start_stepped` makes the
//! TTFT grow by a step every so many requests (the k-th completion it streams, from 0, waits
//! `ttft + step × (k / every)`): runs of a repeated benchmark that differ by a known amount.
// Each test binary that includes this uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::http_head::read_body;

#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub ttft: Duration,
    pub itl: Duration,
    pub tokens: usize,
}

/// Starts the server; returns its base URL. It lives as long as the test process. Each
/// connection answers one request and closes (`Connection: close`).
pub fn start(timing: Timing) -> std::io::Result<String> {
    Ok(start_counted(timing, false)?.url)
}

/// A running server: its URL and how many connections it has accepted.
pub struct Counted {
    pub url: String,
    pub connections: Arc<AtomicUsize>,
}

/// Starts the server, counting the connections it accepts; with `keep_alive`, a connection
/// answers request after request until the client closes it.
pub fn start_counted(timing: Timing, keep_alive: bool) -> std::io::Result<Counted> {
    let served = Served {
        timing,
        keep_alive,
        slots: None,
        reset_route: None,
        resets: Arc::default(),
        connections: Arc::default(),
        report: None,
        stepped: None,
        streamed: Arc::default(),
    };
    let connections = served.connections.clone();
    let url = serve(served)?;
    Ok(Counted { url, connections })
}

/// What `start_with` serves.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub timing: Timing,
    /// Requests served at once; the others wait (`None`: every request at once).
    pub slots: Option<usize>,
    /// The prefix-cache reset route answered (`/reset_prefix_cache`, `/flush_cache`).
    pub reset_route: Option<&'static str>,
}

/// Whose report of its own timings a server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Vllm,
    LlamaCpp,
    /// Not what any SGLang sends on these routes: its native API's `meta_info` on an OpenAI
    /// chunk, to check that the parser reads that shape.
    Sglang,
}

/// What `start_reporting` reports.
#[derive(Clone, Copy, Debug)]
pub struct Reporting {
    pub dialect: Dialect,
    /// Spent on each request before the server's clock starts (not in its report).
    pub hop: Duration,
    /// Prompt tokens it says it had cached (of the 8 it says every prompt has).
    pub cached: usize,
}

/// Starts a server with slots that reports its own timings of every request.
pub fn start_reporting(opts: Options, report: Reporting) -> std::io::Result<Server> {
    let served = Served {
        timing: opts.timing,
        keep_alive: false,
        slots: opts.slots.map(|n| {
            Arc::new(Slots {
                free: Mutex::new(n),
                freed: Condvar::new(),
            })
        }),
        reset_route: opts.reset_route,
        resets: Arc::default(),
        connections: Arc::default(),
        report: Some(report),
        stepped: None,
        streamed: Arc::default(),
    };
    let resets = served.resets.clone();
    let url = serve(served)?;
    Ok(Server { url, resets })
}

/// A server started with `start_with`.
pub struct Server {
    pub url: String,
    /// Prefix-cache resets answered so far.
    pub resets: Arc<AtomicUsize>,
}

/// Starts a server with slots and a reset route; it lives as long as the test process.
pub fn start_with(opts: Options) -> std::io::Result<Server> {
    let served = Served {
        timing: opts.timing,
        keep_alive: false,
        slots: opts.slots.map(|n| {
            Arc::new(Slots {
                free: Mutex::new(n),
                freed: Condvar::new(),
            })
        }),
        reset_route: opts.reset_route,
        resets: Arc::default(),
        connections: Arc::default(),
        report: None,
        stepped: None,
        streamed: Arc::default(),
    };
    let resets = served.resets.clone();
    let url = serve(served)?;
    Ok(Server { url, resets })
}

/// Starts a server whose TTFT grows by `step` every `every` completions it streams (the
/// first `every` at `timing.ttft`); returns its base URL.
pub fn start_stepped(timing: Timing, every: usize, step: Duration) -> std::io::Result<String> {
    serve(Served {
        timing,
        keep_alive: false,
        slots: None,
        reset_route: None,
        resets: Arc::default(),
        connections: Arc::default(),
        report: None,
        stepped: Some((every.max(1), step)),
        streamed: Arc::default(),
    })
}

/// Slots as a counting semaphore.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn take(&self) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
    }

    fn give(&self) {
        *self.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.freed.notify_one();
    }
}

/// Everything a connection's thread needs.
#[derive(Clone)]
struct Served {
    timing: Timing,
    keep_alive: bool,
    slots: Option<Arc<Slots>>,
    reset_route: Option<&'static str>,
    resets: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    report: Option<Reporting>,
    /// The TTFT's step and how many completions apart (`start_stepped`).
    stepped: Option<(usize, Duration)>,
    /// Completions streamed so far.
    streamed: Arc<AtomicUsize>,
}

fn serve(served: Served) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            served.connections.fetch_add(1, Ordering::SeqCst);
            let s = served.clone();
            thread::spawn(move || {
                let _ = answer(conn, &s);
            });
        }
    });
    Ok(url)
}

/// Answers the connection's requests (one, unless kept alive).
fn answer(conn: TcpStream, s: &Served) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first)? == 0 {
            return Ok(());
        }
        let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
        let body = read_body(&mut reader)?;
        let mut out = conn.try_clone()?;
        if Some(path.as_str()) == s.reset_route {
            s.resets.fetch_add(1, Ordering::SeqCst);
            let body = r#"{"success":true}"#;
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return out.flush();
        }
        if !path.ends_with("/completions") {
            write!(
                out,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found"
            )?;
            return out.flush();
        }
        if body == infertop::engine::http::api::detect::PROBE_BODY.as_bytes() {
            let msg = r#"{"error":{"message":"prompt is required"}}"#;
            write!(
                out,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
                msg.len()
            )?;
            return out.flush();
        }
        if let Some(r) = &s.report {
            thread::sleep(r.hop);
        }
        let queued = Instant::now();
        if let Some(slots) = &s.slots {
            slots.take();
        }
        let report = s.report.map(|r| (r, queued.elapsed()));
        let k = s.streamed.fetch_add(1, Ordering::SeqCst);
        let mut timing = s.timing;
        if let Some((every, step)) = s.stepped {
            timing.ttft += step * (k / every) as u32;
        }
        let streamed = stream(&mut out, timing, s.keep_alive, report);
        if let Some(slots) = &s.slots {
            slots.give();
        }
        streamed?;
        if !s.keep_alive {
            return Ok(());
        }
    }
}

/// The SSE answer: headers, the tokens at their times, usage, `[DONE]`.
fn stream(
    out: &mut TcpStream,
    t: Timing,
    keep_alive: bool,
    report: Option<(Reporting, Duration)>,
) -> std::io::Result<()> {
    let head: &[u8] = if keep_alive {
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    } else {
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    };
    out.write_all(head)?;
    let mut send = |data: &str| -> std::io::Result<()> {
        let data = format!("data: {data}\n\n");
        write!(out, "{:x}\r\n{data}\r\n", data.len())?;
        out.flush()
    };
    thread::sleep(t.ttft);
    for i in 0..t.tokens {
        if i > 0 {
            thread::sleep(t.itl);
        }
        send(&format!(
            r#"{{"choices":[{{"index":0,"text":" w{i}","finish_reason":null}}]}}"#
        ))?;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let decode = t.itl * t.tokens.saturating_sub(1) as u32;
    let extra = match report {
        None => String::new(),
        Some((r, queue)) => match r.dialect {
            Dialect::Vllm => format!(
                r#","metrics":{{"queue_time_ms":{},"time_to_first_token_ms":{},"generation_time_ms":{},"mean_itl_ms":{}}}"#,
                ms(queue),
                ms(t.ttft),
                ms(decode),
                ms(t.itl)
            ),
            Dialect::LlamaCpp => format!(
                r#","timings":{{"cache_n":{},"prompt_n":{},"prompt_ms":{},"predicted_n":{},"predicted_ms":{}}}"#,
                r.cached,
                8 - r.cached,
                ms(t.ttft),
                t.tokens,
                ms(decode)
            ),
            Dialect::Sglang => format!(
                r#","meta_info":{{"queue_time":{},"prefill_launch_latency":{},"e2e_latency":{},"cached_tokens":{},"prompt_tokens":8}}"#,
                queue.as_secs_f64(),
                t.ttft.as_secs_f64(),
                (queue + t.ttft + decode).as_secs_f64(),
                r.cached
            ),
        },
    };
    let details = match report {
        Some((r, _)) if r.dialect == Dialect::Vllm => {
            format!(
                r#","prompt_tokens_details":{{"cached_tokens":{}}}"#,
                r.cached
            )
        }
        _ => String::new(),
    };
    send(&format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":8,"completion_tokens":{},"total_tokens":{}{details}}}{extra}}}"#,
        t.tokens,
        t.tokens + 8
    ))?;
    send("[DONE]")?;
    write!(out, "0\r\n\r\n")?;
    out.flush()
}
