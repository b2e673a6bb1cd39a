//! A server whose capacity is known: `slots` requests are served at once, the others wait in
//! arrival order for a slot (their wait in their TTFT, as a serving engine's queue). A request
//! holds its slot for exactly `ttft + (tokens − 1) × itl` from the moment it gets it (tokens
//! at absolute times from there, so the service time does not drift with the machine's
//! load), then frees it: at most `slots / service` requests a second complete, whatever is
//! offered. Connections are kept alive. Only the completions route is served; a client's check
//! that the route exists (`detect::PROBE_BODY`) is refused with 400 without taking a slot.
// Each test binary that includes this uses part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::http_head::read_body;

#[derive(Clone, Copy, Debug)]
pub struct Capacity {
    pub slots: usize,
    pub ttft: Duration,
    pub itl: Duration,
    /// Tokens a request streams (the client asks for this many).
    pub tokens: usize,
}

impl Capacity {
    /// How long a request holds its slot.
    pub fn service(&self) -> Duration {
        self.ttft + self.itl * (self.tokens.saturating_sub(1) as u32)
    }

    /// Requests a second the server completes at most: its true capacity.
    pub fn requests_per_s(&self) -> f64 {
        self.slots as f64 / self.service().as_secs_f64()
    }
}

/// First come, first served slots.
struct Queue {
    state: Mutex<(usize, VecDeque<u64>, u64)>,
    changed: Condvar,
}

impl Queue {
    /// Waits for a slot in arrival order.
    fn take(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = s.2;
        s.2 += 1;
        s.1.push_back(ticket);
        while !(s.0 > 0 && s.1.front() == Some(&ticket)) {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.0 -= 1;
        s.1.pop_front();
        self.changed.notify_all();
    }

    fn give(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 += 1;
        self.changed.notify_all();
    }
}

/// Starts the server; returns its base URL. It lives as long as the test process.
pub fn start(c: Capacity) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let queue = Arc::new(Queue {
        state: Mutex::new((c.slots, VecDeque::new(), 0)),
        changed: Condvar::new(),
    });
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let q = queue.clone();
            thread::spawn(move || {
                let _ = answer(conn, c, &q);
            });
        }
    });
    url
}

fn answer(conn: TcpStream, c: Capacity, q: &Queue) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first)? == 0 {
            return Ok(());
        }
        let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
        let body = read_body(&mut reader)?;
        if path == "/v1/models" {
            let json = r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#;
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )?;
            out.flush()?;
            continue;
        }
        if !path.ends_with("/completions") {
            write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            out.flush()?;
            continue;
        }
        if body == infertop::engine::http::api::detect::PROBE_BODY.as_bytes() {
            let msg = r#"{"error":{"message":"prompt is required"}}"#;
            write!(
                out,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{msg}",
                msg.len()
            )?;
            out.flush()?;
            continue;
        }
        q.take();
        let served = stream(&mut out, c);
        q.give();
        served?;
    }
}

/// The tokens at their times from the slot's start, then usage and `[DONE]`.
fn stream(out: &mut TcpStream, c: Capacity) -> std::io::Result<()> {
    let start = Instant::now();
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let mut send = |data: &str| -> std::io::Result<()> {
        let data = format!("data: {data}\n\n");
        write!(out, "{:x}\r\n{data}\r\n", data.len())?;
        out.flush()
    };
    for i in 0..c.tokens {
        let due = start + c.ttft + c.itl * i as u32;
        if let Some(left) = due.checked_duration_since(Instant::now()) {
            thread::sleep(left);
        }
        send(&format!(
            r#"{{"choices":[{{"index":0,"text":" w{i}","finish_reason":null}}]}}"#
        ))?;
    }
    send(&format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":8,"completion_tokens":{},"total_tokens":{}}}}}"#,
        c.tokens,
        c.tokens + 8
    ))?;
    send("[DONE]")?;
    write!(out, "0\r\n\r\n")?;
    out.flush()
}
