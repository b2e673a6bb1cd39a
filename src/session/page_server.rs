//! One small HTTP/1.1 server for one page of Prometheus text at `/metrics` (or `/`): what
//! `infertop agent` and `--metrics-listen` both serve. Each scrape on a thread of its own, at
//! most `MAX_CONNECTIONS` at once (more are answered 503 at once), its request head read within
//! `READ_TIMEOUT`; GET only, anything else 404 or 405, and every answer closes the connection.
//! The page is made afresh for each scrape by the caller's function.
//!
//! It is unauthenticated: whoever can reach the address can read the page, which is why both
//! commands listen on 127.0.0.1 unless told otherwise.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::util::say;

/// Scrapes served at once; more are answered 503 at once.
const MAX_CONNECTIONS: usize = 16;
/// A scraper's request head must arrive within this long.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the listener looks for a new connection, and whether to stop.
const POLL: Duration = Duration::from_millis(20);

/// Makes the page for one scrape.
pub type MakePage = Arc<dyn Fn() -> String + Send + Sync>;

/// A bound listener, not yet serving.
pub struct PageServer {
    listener: TcpListener,
    /// Where it listens (the port chosen when 0 was asked).
    pub local: SocketAddr,
}

impl PageServer {
    /// Binds `addr`; the caller words the error (which flag or command to change).
    pub fn bind(addr: SocketAddr) -> std::io::Result<PageServer> {
        let listener = TcpListener::bind(addr)?;
        let local = listener.local_addr().unwrap_or(addr);
        listener.set_nonblocking(true)?;
        Ok(PageServer { listener, local })
    }

    /// Serves `page` until `stopped` says so. `name` names the scrape threads and, in a
    /// warning on stderr (once a minute at most), a failed accept; `None` keeps quiet (a run
    /// whose dashboard owns the terminal).
    pub fn serve(
        &self,
        name: &str,
        warn: Option<&str>,
        page: MakePage,
        stopped: &dyn Fn() -> bool,
    ) {
        let busy = Arc::new(AtomicUsize::new(0));
        let mut warned: Option<Instant> = None;
        while !stopped() {
            match self.listener.accept() {
                Ok((conn, _)) => {
                    if busy.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        let _ = respond(conn, "503 Service Unavailable", "busy, try again\n");
                        continue;
                    }
                    busy.fetch_add(1, Ordering::Relaxed);
                    let (page, held) = (page.clone(), busy.clone());
                    let spawned =
                        std::thread::Builder::new()
                            .name(name.to_string())
                            .spawn(move || {
                                let _ = serve(conn, &*page);
                                held.fetch_sub(1, Ordering::Relaxed);
                            });
                    if spawned.is_err() {
                        busy.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Out of file descriptors, a connection reset before it was taken: the server
                // goes on.
                Err(e) => {
                    if let Some(who) = warn {
                        if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                            say!("{who}: warning: accept failed ({e}); going on");
                            warned = Some(Instant::now());
                        }
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
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

/// One scrape: its head read, `GET /metrics` (or `/`) answered with the page.
fn serve(mut conn: TcpStream, page: &dyn Fn() -> String) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
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
    respond(conn, "200 OK", &page())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::atomic::AtomicBool;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        conn.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_the_page_fresh_and_refuses_the_rest() {
        let server = PageServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local;
        let scrapes = Arc::new(AtomicUsize::new(0));
        let counted = scrapes.clone();
        let page: MakePage = Arc::new(move || {
            let n = counted.fetch_add(1, Ordering::Relaxed) + 1;
            format!("scrapes {n}\n")
        });
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            server.serve("test-page", None, page, &|| {
                stopping.load(Ordering::Relaxed)
            })
        });
        let first = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.ends_with("\r\n\r\nscrapes 1\n"), "{first}");
        assert!(get(addr, "GET /?x=1 HTTP/1.1\r\n\r\n").ends_with("scrapes 2\n"));
        assert!(get(addr, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        stop.store(true, Ordering::Relaxed);
        thread.join().unwrap();
        assert_eq!(scrapes.load(Ordering::Relaxed), 2);
    }
}
