//! A streaming OpenAI-compatible completions server on 127.0.0.1 with exact, injected timings:
//! the first token after `ttft`, then one every `itl`, a usage chunk and `[DONE]`. Every
//! connection has its own thread, so requests in flight do not slow each other: throughput
//! grows with concurrency and TTFT does not.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub ttft: Duration,
    pub itl: Duration,
    pub tokens: usize,
}

/// Starts the server; returns its base URL. It lives as long as the test process.
pub fn start(timing: Timing) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            thread::spawn(move || {
                let _ = answer(conn, timing);
            });
        }
    });
    Ok(url)
}

fn answer(conn: TcpStream, t: Timing) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
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
    out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
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
