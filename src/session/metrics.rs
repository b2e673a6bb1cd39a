//! `--metrics-listen ADDR`: the client's own figures (`stats::exposition`) served as
//! Prometheus text at `/metrics` while the run goes on, from a thread of their own. The
//! consumer feeds them as it takes each event (a lock held for one O(1) update, no
//! allocation); the engine never sees them. A scrape copies the figures out and renders them
//! outside the lock.
//!
//! It is unauthenticated (`page_server`): a bare port listens on 127.0.0.1, and an address
//! says where.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::event::Event;
use crate::exit::Failure;
use crate::session::page_server::{MakePage, PageServer};
use crate::stats::exposition::ClientExposition;
use crate::util::say;

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
        let server = PageServer::bind(addr).map_err(|e| {
            Failure::usage(format!(
                "--metrics-listen: cannot listen on {addr} ({}); pick another port",
                crate::util::one_line(&e.to_string())
            ))
        })?;
        let local = server.local;
        let figures = Arc::new(Mutex::new(ClientExposition::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let f = figures.clone();
        // A scrape copies the figures out and renders them outside the lock.
        let page: MakePage = Arc::new(move || {
            let copy = f.lock().unwrap_or_else(|p| p.into_inner()).clone();
            copy.render()
        });
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("infertop-metrics".into())
            .spawn(move || {
                server.serve("infertop-metrics", None, page, &|| {
                    s.load(Ordering::Relaxed)
                })
            })
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
