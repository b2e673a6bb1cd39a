//! An OpenAI-compatible streaming server on 127.0.0.1 that records every request (arrival time,
//! path, session header, body) and keeps a prefix cache as vLLM's does in spirit: a prompt's
//! tokens (here: its whitespace-separated words) that begin like an earlier prompt's are
//! cached, reported as `usage.prompt_tokens_details.cached_tokens`, and cost no prefill time.
//! TTFT = `base` + `per_token` × uncached prompt tokens; then `max_tokens` tokens, one every
//! `itl`, the reply `" w0 w1 …"`. `POST /reset_prefix_cache` empties the cache. Every answer
//! carries a `Date` header rendered when it is sent, from a clock `skew` seconds ahead of this
//! machine's (`start_with_clock`), as a server on another machine would have. A client's check
//! that the route exists (its probe, `detect::PROBE_BODY`) is refused with 400 and not
//! recorded.
//!
//! Requests in flight: a completion is in flight at the server from when its request line
//! arrives to when the server lets go of it, which is after its last token and before the
//! bytes that end its stream (the usage chunk, `[DONE]`), so no client can have seen it end,
//! and sent the next, while it is still counted. The server keeps the number and its peak
//! (`in_flight_peak`), and each `Seen` keeps its interval, so the peak of any subset (one
//! generator's requests) is known too (`peak_in_flight`).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::http_head::{header, read_rest};

use serde_json::Value;

#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub base: Duration,
    pub per_token: Duration,
    pub itl: Duration,
    /// `max_model_len` in `/v1/models`.
    pub max_model_len: usize,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Since the server started.
    pub at: Duration,
    /// When its stream ended (since the server started).
    pub ended: Option<Duration>,
    /// When the server let go of it (since the server started): after its last token, before
    /// the bytes that end its stream. `None` while in flight, or if its connection failed.
    pub left: Option<Duration>,
    pub path: String,
    pub session: Option<String>,
    pub body: Value,
    /// The prompt's words (completions: the prompt; chat: every message's content).
    pub words: Vec<String>,
    pub cached: usize,
}

pub struct TrafficServer {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub resets: Arc<Mutex<Vec<Duration>>>,
    /// This machine's clock (unix seconds) when the server started: `Seen::at` counts from it.
    pub started_unix_s: f64,
    /// Completions in flight now, and the most there were at once.
    in_flight: Arc<InFlight>,
}

/// The completions in flight at the server and the most at once.
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

/// One completion counted in flight until it is let go of (or its connection fails).
struct Holding<'a> {
    count: &'a InFlight,
    held: bool,
}

impl<'a> Holding<'a> {
    fn start(count: &'a InFlight) -> Holding<'a> {
        let now = count.now.fetch_add(1, Ordering::SeqCst) + 1;
        count.peak.fetch_max(now, Ordering::SeqCst);
        Holding { count, held: true }
    }

    fn let_go(&mut self) {
        if std::mem::take(&mut self.held) {
            self.count.now.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.let_go();
    }
}

/// The most of `seen` that were in flight at once, by their intervals (`at` to `left`; one
/// not let go of counts to the end). An interval ends before one that starts at that instant.
pub fn peak_in_flight<'a>(seen: impl IntoIterator<Item = &'a Seen>) -> usize {
    let mut edges: Vec<(Duration, i32)> = Vec::new();
    for s in seen {
        edges.push((s.at, 1));
        edges.push((s.left.unwrap_or(Duration::MAX), -1));
    }
    // At one instant, ends (-1) before starts (+1).
    edges.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        peak = peak.max(now);
    }
    peak.max(0) as usize
}

/// `unix_s` as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(unix_s: f64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(unix_s.floor() as i64)
        .expect("a time after 1970");
    let day = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        [t.weekday().number_days_from_monday() as usize];
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][u8::from(t.month()) as usize - 1];
    format!(
        "{day}, {:02} {month} {} {:02}:{:02}:{:02} GMT",
        t.day(),
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// This machine's clock, unix seconds.
pub fn now_unix_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

impl TrafficServer {
    pub fn start(timing: Timing) -> TrafficServer {
        TrafficServer::start_with_clock(timing, 0.0)
    }

    /// A server whose clock (its `Date` headers) is `skew` seconds ahead of this machine's.
    pub fn start_with_clock(timing: Timing, skew: f64) -> TrafficServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        );
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let resets: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let cache: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let in_flight: Arc<InFlight> = Arc::default();
        let t0 = Instant::now();
        let started_unix_s = now_unix_s();
        let (s, r, f) = (seen.clone(), resets.clone(), in_flight.clone());
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, r, c, f) = (s.clone(), r.clone(), cache.clone(), f.clone());
                thread::spawn(move || {
                    let state = State {
                        seen: &s,
                        resets: &r,
                        cache: &c,
                        in_flight: &f,
                    };
                    let _ = answer(conn, timing, skew, t0, &state);
                });
            }
        });
        TrafficServer {
            url,
            seen,
            resets,
            started_unix_s,
            in_flight,
        }
    }

    /// The most completions that were in flight at once since the server started.
    pub fn in_flight_peak(&self) -> usize {
        self.in_flight.peak.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        let mut v = self.seen.lock().expect("lock").clone();
        v.sort_by_key(|s| s.at);
        v
    }
}

fn prompt_words(body: &Value) -> Vec<String> {
    let mut text = String::new();
    if let Some(p) = body.get("prompt").and_then(Value::as_str) {
        text.push_str(p);
    }
    if let Some(ms) = body.get("messages").and_then(Value::as_array) {
        for m in ms {
            if let Some(c) = m.get("content").and_then(Value::as_str) {
                text.push(' ');
                text.push_str(c);
            }
        }
    }
    text.split_whitespace().map(str::to_string).collect()
}

/// What every connection's thread shares.
struct State<'a> {
    seen: &'a Mutex<Vec<Seen>>,
    resets: &'a Mutex<Vec<Duration>>,
    cache: &'a Mutex<Vec<Vec<String>>>,
    in_flight: &'a InFlight,
}

fn answer(
    conn: TcpStream,
    t: Timing,
    skew: f64,
    t0: Instant,
    state: &State<'_>,
) -> std::io::Result<()> {
    let State {
        seen,
        resets,
        cache,
        in_flight,
    } = *state;
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first)? == 0 {
            return Ok(());
        }
        let at = t0.elapsed();
        let mut parts = first.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let (headers, body) = read_rest(&mut reader)?;
        let session = header(&headers, "x-session-id").map(str::to_string);
        let mut out = conn.try_clone()?;
        let date = format!("Date: {}\r\n", http_date(now_unix_s() + skew));
        if method == "GET" && path == "/v1/models" {
            let json = format!(
                r#"{{"object":"list","data":[{{"id":"m","object":"model","max_model_len":{}}}]}}"#,
                t.max_model_len
            );
            write!(
                out,
                "HTTP/1.1 200 OK\r\n{date}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )?;
            out.flush()?;
            continue;
        }
        if path == "/reset_prefix_cache" {
            cache.lock().expect("lock").clear();
            resets.lock().expect("lock").push(at);
            write!(out, "HTTP/1.1 200 OK\r\n{date}Content-Length: 0\r\n\r\n")?;
            out.flush()?;
            continue;
        }
        if body == infertop::engine::http::api::detect::PROBE_BODY.as_bytes() {
            let msg = r#"{"error":{"message":"prompt is required"}}"#;
            write!(
                out,
                "HTTP/1.1 400 Bad Request\r\n{date}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{msg}",
                msg.len()
            )?;
            out.flush()?;
            continue;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let words = prompt_words(&body);
        let cached = {
            let mut c = cache.lock().expect("lock");
            let hit = c
                .iter()
                .map(|p| p.iter().zip(&words).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            c.push(words.clone());
            // The last token is always computed (as vLLM does), so a prompt is never all hit.
            hit.min(words.len().saturating_sub(1))
        };
        let max_tokens = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(4) as usize;
        let mut holding = Holding::start(in_flight);
        let index = {
            let mut s = seen.lock().expect("lock");
            s.push(Seen {
                at,
                ended: None,
                left: None,
                path: path.clone(),
                session,
                body: body.clone(),
                words: words.clone(),
                cached,
            });
            s.len() - 1
        };
        let chat = path.ends_with("/chat/completions");
        write!(out, "HTTP/1.1 200 OK\r\n{date}Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
        let mut send = |data: &str| -> std::io::Result<()> {
            let data = format!("data: {data}\n\n");
            write!(out, "{:x}\r\n{data}\r\n", data.len())?;
            out.flush()
        };
        thread::sleep(t.base + t.per_token * (words.len() - cached) as u32);
        for i in 0..max_tokens {
            if i > 0 {
                thread::sleep(t.itl);
            }
            let piece = format!(" w{i}");
            if chat {
                send(&format!(
                    r#"{{"choices":[{{"index":0,"delta":{{"content":"{piece}"}},"finish_reason":null}}]}}"#
                ))?;
            } else {
                send(&format!(
                    r#"{{"choices":[{{"index":0,"text":"{piece}","finish_reason":null}}]}}"#
                ))?;
            }
        }
        // Let go of it before the bytes that end its stream (see the module's comment).
        if let Some(s) = seen.lock().expect("lock").get_mut(index) {
            s.left = Some(t0.elapsed());
        }
        holding.let_go();
        send(&format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":{},"completion_tokens":{max_tokens},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{cached}}}}}}}"#,
            words.len(),
            words.len() + max_tokens
        ))?;
        send("[DONE]")?;
        write!(out, "0\r\n\r\n")?;
        out.flush()?;
        if let Some(s) = seen.lock().expect("lock").get_mut(index) {
            s.ended = Some(t0.elapsed());
        }
        return Ok(());
    }
}
