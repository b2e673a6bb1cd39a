//! A streaming completions server whose truth about cancellation the test sets: it counts the
//! requests it is serving as vLLM's `/metrics` does (`vllm:num_requests_running`, a KV-cache
//! usage of 5 % a request), and a request whose client closes the stream is noticed at its next
//! token. An honest server then frees it; a `leaky` one never does (its slot and KV blocks stay
//! counted), as servers that leak only under cancellation do. Each connection its own thread,
//! one request a connection.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::common::http_head::read_body;

/// A running server: its URL, and what it counted.
pub struct CancelServer {
    pub url: String,
    /// Streams whose client went away before the end.
    pub cut: Arc<AtomicUsize>,
    /// Requests counted as running now.
    pub running: Arc<AtomicUsize>,
}

/// Starts it: the first token after `itl`, then one every `itl`, `tokens` in all.
pub fn start(itl: Duration, tokens: usize, leaky: bool) -> CancelServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let cut = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let (c, r) = (cut.clone(), running.clone());
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (c, r) = (c.clone(), r.clone());
            thread::spawn(move || {
                let _ = answer(conn, itl, tokens, leaky, &c, &r);
            });
        }
    });
    CancelServer { url, cut, running }
}

fn answer(
    conn: TcpStream,
    itl: Duration,
    tokens: usize,
    leaky: bool,
    cut: &AtomicUsize,
    running: &AtomicUsize,
) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
    let body = read_body(&mut reader)?;
    let mut out = conn;
    let reply = |out: &mut TcpStream, status: &str, kind: &str, body: &str| {
        write!(
            out,
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if path == "/metrics" {
        let n = running.load(Ordering::SeqCst);
        let page = format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {n}\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} 0\n# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{model_name=\"m\"}} {}\n",
            n as f64 * 0.05
        );
        return reply(&mut out, "200 OK", "text/plain", &page);
    }
    if !path.ends_with("/completions") {
        return reply(&mut out, "404 Not Found", "text/plain", "not found");
    }
    if body == infertop::engine::http::api::detect::PROBE_BODY.as_bytes() {
        let msg = r#"{"error":{"message":"prompt is required"}}"#;
        return reply(&mut out, "400 Bad Request", "application/json", msg);
    }
    running.fetch_add(1, Ordering::SeqCst);
    let streamed = stream(&mut out, itl, tokens);
    if streamed.is_err() {
        cut.fetch_add(1, Ordering::SeqCst);
        if leaky {
            return streamed;
        }
    }
    running.fetch_sub(1, Ordering::SeqCst);
    streamed
}

fn stream(out: &mut TcpStream, itl: Duration, tokens: usize) -> std::io::Result<()> {
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )?;
    let mut send = |data: &str| -> std::io::Result<()> {
        let data = format!("data: {data}\n\n");
        write!(out, "{:x}\r\n{data}\r\n", data.len())?;
        out.flush()
    };
    for i in 0..tokens {
        thread::sleep(itl);
        send(&format!(
            r#"{{"choices":[{{"index":0,"text":" w{i}","finish_reason":null}}]}}"#
        ))?;
    }
    // A closed stream is seen at the write after the close reached this side: one more.
    thread::sleep(itl);
    send(&format!(
        r#"{{"choices":[{{"index":0,"text":"","finish_reason":"length"}}],"usage":{{"prompt_tokens":8,"completion_tokens":{tokens},"total_tokens":{}}}}}"#,
        tokens + 8
    ))?;
    send("[DONE]")?;
    write!(out, "0\r\n\r\n")?;
    out.flush()
}
