//! `--metrics-listen ADDR`: the client's own figures (`stats::exposition`) served as
//! Prometheus text at `/metrics` while the run goes on, from a thread of their own. The
//! consumer feeds them as it takes each event (a lock held for one O(1) update, no
//! allocation); the engine never sees them. A scrape copies the figures out and renders them
//! outside the lock.
//!
//! It is unauthenticated: a bare port listens on 127.0.0.1, and an address says where.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::event::Event;
use crate::exit::Failure;
use crate::stats::exposition::ClientExposition;
use crate::util::say;

/// A scraper's request head must arrive within this long.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The serving thread and the figures it serves.
pub struct MetricsListener {
    figures: Arc<Mutex<ClientExposition>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Where it listens (the port chosen when 0 was asked).
    pub local: SocketAddr,
}

impl MetricsListener {
    /// Binds `addr` and starts serving; one line on stderr says where.
    pub fn start(addr: SocketAddr) -> Result<MetricsListener, Failure> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            Failure::usage(format!(
                "--metrics-listen: cannot listen on {addr} ({}); pick another port",
                crate::util::one_line(&e.to_string())
            ))
        })?;
        let local = listener.local_addr().unwrap_or(addr);
        listener
            .set_nonblocking(true)
            .map_err(|e| Failure::runtime(format!("--metrics-listen: {e}")))?;
        let figures = Arc::new(Mutex::new(ClientExposition::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, s) = (figures.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("infertop-metrics".into())
            .spawn(move || accept(&listener, &f, &s))
            .map_err(|e| Failure::runtime(format!("cannot start the metrics listener: {e}")))?;
        say!(
            "infertop: the client's metrics at http://{local}/metrics{}",
            if local.ip().is_loopback() {
                ""
            } else {
                " (unauthenticated: anyone who can reach this address can read them)"
            }
        );
        Ok(MetricsListener {
            figures,
            stop,
            thread: Some(thread),
            local,
        })
    }

    /// One event, as the consumer takes it.
    pub fn observe(&self, ev: &Event) {
        self.figures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(ev);
    }
}

impl Drop for MetricsListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Feeds `events` to `listener` when there is one (the session's one call per event).
pub fn observe(listener: Option<&MetricsListener>, ev: &Event) {
    if let Some(l) = listener {
        l.observe(ev);
    }
}

fn accept(listener: &TcpListener, figures: &Mutex<ClientExposition>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let _ = serve(conn, figures);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn respond(mut conn: TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}

/// One scrape: `GET /metrics` (or `/`) answered, anything else 404 or 405.
fn serve(mut conn: TcpStream, figures: &Mutex<ClientExposition>) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut first = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    if method != "GET" {
        return respond(conn, "405 Method Not Allowed", "GET /metrics\n");
    }
    if path != "/metrics" && path != "/" {
        return respond(conn, "404 Not Found", "the figures are at /metrics\n");
    }
    let copy = figures.lock().unwrap_or_else(|p| p.into_inner()).clone();
    respond(conn, "200 OK", &copy.render())
}
