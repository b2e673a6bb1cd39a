//! A streaming OpenAI-compatible completions server on 127.0.0.1 with exact, injected timings:
//! the first token after `ttft`, then one every `itl`, a usage chunk and `[DONE]`. Every
//! connection has its own thread, so requests in flight do not slow each other: throughput
//! grows with concurrency and TTFT does not.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

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
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                let _ = answer(conn, timing, keep_alive);
            });
        }
    });
    Ok(Counted { url, connections })
}

fn answer(conn: TcpStream, t: Timing, keep_alive: bool) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first)? == 0 {
            return Ok(());
        }
        answer_one(&mut reader, conn.try_clone()?, t, keep_alive)?;
        if !keep_alive {
            return Ok(());
        }
    }
}

fn answer_one(
    reader: &mut BufReader<TcpStream>,
    conn: TcpStream,
    t: Timing,
    keep_alive: bool,
) -> std::io::Result<()> {
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let mut out = conn;
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
    send(&format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":8,"completion_tokens":{},"total_tokens":{}}}}}"#,
        t.tokens,
        t.tokens + 8
    ))?;
    send("[DONE]")?;
    write!(out, "0\r\n\r\n")?;
    out.flush()
}
