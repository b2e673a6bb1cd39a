//! A streaming completions server on 127.0.0.1 whose outputs a test sets: a prompt `prompt K`
//! gets the same greedy tokens every time (` w…`, one per chunk, as many as `max_tokens`
//! asks), unless other requests are in flight when a chosen token goes out. Then, for the
//! prompts the test chose, it changes the token at a chosen position (`flip`), or stops the
//! output after a chosen number of tokens (`cut`): a server whose batched kernels are not
//! batch-invariant. It writes down every change it made (`Server::injected`), so a test checks
//! the client against what the server actually did, not what it was asked to do.
//!
//! A request is in flight from when its body has been read to when its last token has gone
//! out (before its usage chunk and `[DONE]`), so a client that waits for one request's end
//! before sending the next never has two in flight. `/v1/models` lists one model; the route
//! check's probe (`detect::PROBE_BODY`) is refused with 400, as a server refuses a request
//! without a prompt.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::http_head::read_body;

/// What the server does to outputs under load: prompt number → token position.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    /// The token at this position (0-based) is another one.
    pub flip: HashMap<u64, usize>,
    /// The output ends after this many tokens (`finish_reason: stop`).
    pub cut: HashMap<u64, usize>,
    /// Before the first token.
    pub ttft: Duration,
    /// Between tokens.
    pub itl: Duration,
}

/// A change the server made: (prompt number, position, `flip` or `cut`).
pub type Injected = (u64, usize, &'static str);

pub struct Server {
    pub url: String,
    /// Every change made, in the order made.
    pub injected: Arc<Mutex<Vec<Injected>>>,
    /// Requests answered (the route check's probe not counted).
    pub answered: Arc<AtomicUsize>,
    /// The body of every request answered, in the order they came.
    pub bodies: Arc<Mutex<Vec<serde_json::Value>>>,
}

/// The token at `position` of prompt `prompt`'s greedy output.
pub fn token(prompt: u64, position: usize) -> String {
    format!(" w{}", (prompt * 31 + position as u64 * 7) % 97)
}

/// Starts the server; it lives as long as the test process.
pub fn start(truth: Truth) -> std::io::Result<Server> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    let injected: Arc<Mutex<Vec<Injected>>> = Arc::default();
    let answered: Arc<AtomicUsize> = Arc::default();
    let bodies: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let state = Arc::new(State {
        truth,
        injected: injected.clone(),
        answered: answered.clone(),
        bodies: bodies.clone(),
        in_flight: AtomicUsize::new(0),
    });
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let state = state.clone();
            thread::spawn(move || {
                let _ = answer(conn, &state);
            });
        }
    });
    Ok(Server {
        url,
        injected,
        answered,
        bodies,
    })
}

/// What every connection's thread shares.
struct State {
    truth: Truth,
    injected: Arc<Mutex<Vec<Injected>>>,
    answered: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    in_flight: AtomicUsize,
}

fn answer(conn: TcpStream, state: &State) -> std::io::Result<()> {
    let State {
        truth,
        injected,
        answered,
        bodies,
        in_flight,
    } = state;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    if reader.read_line(&mut first)? == 0 {
        return Ok(());
    }
    let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
    let body = read_body(&mut reader)?;
    let mut out = conn;
    if path.ends_with("/v1/models") {
        return respond(
            &mut out,
            "200 OK",
            r#"{"object":"list","data":[{"id":"fake","object":"model"}]}"#,
        );
    }
    if !path.ends_with("/completions") {
        return respond(&mut out, "404 Not Found", r#"{"error":"not found"}"#);
    }
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return respond(&mut out, "400 Bad Request", r#"{"error":"not JSON"}"#);
    };
    let prompt = json["prompt"].as_str().and_then(|p| {
        p.trim()
            .strip_prefix("prompt ")
            .and_then(|n| n.trim().parse::<u64>().ok())
    });
    let (Some(prompt), Some(max_tokens)) = (prompt, json["max_tokens"].as_u64()) else {
        return respond(
            &mut out,
            "400 Bad Request",
            r#"{"error":{"message":"prompt is required"}}"#,
        );
    };
    answered.fetch_add(1, Ordering::SeqCst);
    in_flight.fetch_add(1, Ordering::SeqCst);
    bodies.lock().unwrap().push(json);
    stream(
        &mut out,
        truth,
        prompt,
        max_tokens as usize,
        injected,
        in_flight,
    )
}

/// The SSE answer: a chunk per token, then the usage and `[DONE]`; the request stops being in
/// flight after its last token.
fn stream(
    out: &mut TcpStream,
    truth: &Truth,
    prompt: u64,
    max_tokens: usize,
    injected: &Mutex<Vec<Injected>>,
    in_flight: &AtomicUsize,
) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if let Err(e) = out.write_all(head.as_bytes()) {
        in_flight.fetch_sub(1, Ordering::SeqCst);
        return Err(e);
    }
    let send = |out: &mut TcpStream, data: &str| -> std::io::Result<()> {
        let data = format!("data: {data}\n\n");
        write!(out, "{:x}\r\n{data}\r\n", data.len())?;
        out.flush()
    };
    thread::sleep(truth.ttft);
    let mut sent = 0;
    let mut finish = "length";
    let mut result = Ok(());
    for i in 0..max_tokens {
        if i > 0 {
            thread::sleep(truth.itl);
        }
        let loaded = in_flight.load(Ordering::SeqCst) > 1;
        if loaded && truth.cut.get(&prompt) == Some(&i) {
            injected.lock().unwrap().push((prompt, i, "cut"));
            finish = "stop";
            break;
        }
        let mut text = token(prompt, i);
        if loaded && truth.flip.get(&prompt) == Some(&i) {
            injected.lock().unwrap().push((prompt, i, "flip"));
            text = text.replacen(" w", " X", 1);
        }
        let last = i + 1 == max_tokens;
        let chunk = serde_json::json!({"choices": [{"index": 0, "text": text,
            "finish_reason": if last { Some("length") } else { None }}]});
        if let Err(e) = send(out, &chunk.to_string()) {
            result = Err(e);
            break;
        }
        sent += 1;
    }
    in_flight.fetch_sub(1, Ordering::SeqCst);
    result?;
    if finish == "stop" {
        send(
            out,
            r#"{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}"#,
        )?;
    }
    send(
        out,
        &format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":{sent},"total_tokens":{}}}}}"#,
            sent + 3
        ),
    )?;
    send(out, "[DONE]")?;
    write!(out, "0\r\n\r\n")?;
    out.flush()
}

fn respond(out: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}
