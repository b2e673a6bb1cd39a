//! An in-process HTTP server of Prometheus pages for tests and benches: the k-th request
//! (counted from 0 over every connection) gets `page(k)`, a status and a body. Connections
//! are kept alive, as real servers keep them.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub type Page = dyn Fn(u64) -> (u16, String) + Send + Sync;

/// A running server: its base URL and how many pages it has served.
pub struct Served {
    pub url: String,
    pub scrapes: Arc<AtomicU64>,
}

pub fn serve(page: Arc<Page>) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    let scrapes = Arc::new(AtomicU64::new(0));
    let count = scrapes.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (page, count) = (page.clone(), count.clone());
            std::thread::spawn(move || {
                let Ok(read) = conn.try_clone() else { return };
                let mut reader = BufReader::new(read);
                let mut conn = conn;
                loop {
                    // The request head, up to its blank line.
                    let mut line = String::new();
                    let mut any = false;
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" || line == "\n" => break,
                            Ok(_) => any = true,
                        }
                    }
                    if !any {
                        continue;
                    }
                    let (status, body) = page(count.fetch_add(1, Ordering::SeqCst));
                    let reason = if status == 200 { "OK" } else { "Error" };
                    if write!(
                        conn,
                        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    Served { url, scrapes }
}

/// A port nothing listens on.
pub fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    drop(listener);
    url
}
