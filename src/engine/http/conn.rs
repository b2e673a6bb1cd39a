//! The streaming requests' own HTTP/1.1 connections, opened and kept by the engine so that every
//! phase of a request is timed on the connection it actually used (the phases k6 and AIPerf
//! name): the DNS lookup, TCP connect and TLS handshake of a connection the request opened, when
//! its bytes were written, and when the first byte of the response came back.
//!
//! A pool keeps connections alive between requests (one request at a time on each, as HTTP/1.1
//! clients do; the most recently used first). `preopen` opens them before the run's first timed
//! request, so that the first wave does not pay a storm of connects no later request pays. A
//! connection opened while a request waited for it is that request's: its record says `new`, and
//! its connect is inside its TTFT, as it was.
//!
//! Servers close connections when they like: after an idle while, after some number of requests,
//! or after every streamed response while answering `Keep-Alive` (upstream llama.cpp's server
//! does). So a request whose connection closed before any byte of an answer came back goes again
//! on a new connection (`MAX_ATTEMPTS` in all), whatever kind the first one was, and its record
//! says how many times it went. A server seen closing its kept connections before their next
//! request while it never carried a second one (`Keeping`) closes after every response: from
//! then on nothing is kept for it, and when a response ends a spare connection is opened in its
//! place, so that the next request finds one open (`preopened`) and its connect stays out of its
//! TTFT, as on a server that keeps connections. The spare is opened when the server has just
//! closed the last one, so the server never holds more connections than requests in flight
//! plus those spares. The pool says so once (`news`).
//!
//! Only the streamed completions go through here; the model list and `/tokenize` use reqwest.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use reqwest::Url;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::event::ConnectionUse;
use crate::event::ServerNote;
use crate::util::error_line;

/// Where a connection goes: requests to one peer (scheme, host and port) share its kept connections.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Peer {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl Peer {
    pub fn of(url: &Url) -> Result<Peer, String> {
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(format!("unsupported scheme {other}")),
        };
        // An IPv6 address is written in brackets in a URL, and without them everywhere else.
        let host = url
            .host_str()
            .ok_or("the URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url
            .port_or_known_default()
            .unwrap_or(if tls { 443 } else { 80 });
        Ok(Peer { tls, host, port })
    }

    /// The `Host` header: the host, with the port when it is not the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// How long each step of opening a connection took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Opening {
    /// The name lookup; `None` for an IP address.
    pub dns: Option<Duration>,
    /// The TCP handshake (every address tried, until one answered).
    pub tcp: Duration,
    /// The TLS handshake (https only).
    pub tls: Option<Duration>,
}

/// What a request's exchange on its connection looked like, as instants.
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    pub how: ConnectionUse,
    /// The connection's opening (for `New` and `Preopened`).
    pub opening: Option<Opening>,
    /// The connection was ready for this request.
    pub connected: Instant,
    /// The request's last bytes went to the socket.
    pub written: Option<Instant>,
    /// The first byte of the response came back.
    pub first_byte: Option<Instant>,
    /// Times the request was sent: more than one when a connection closed before answering.
    pub attempts: u32,
}

/// When a connection's request was written and its response's first byte read. Set by the
/// connection's I/O (on the task that drives it), read by the request after the response head.
#[derive(Debug, Default)]
struct Marks {
    /// A request was written and no byte has come back since.
    awaiting: AtomicBool,
    times: Mutex<(Option<Instant>, Option<Instant>)>,
    /// When its last response ended and it was kept idle (cleared when it is taken).
    idle_since: Mutex<Option<Instant>>,
    /// Its close was counted as one right after a response (`Pool::closed_at_once`), once.
    counted: AtomicBool,
}

impl Marks {
    fn reset(&self) {
        self.awaiting.store(false, Ordering::Release);
        if let Ok(mut t) = self.times.lock() {
            *t = (None, None);
        }
    }

    fn wrote(&self) {
        let now = Instant::now();
        if let Ok(mut t) = self.times.lock() {
            t.0 = Some(now);
            t.1 = None;
        }
        self.awaiting.store(true, Ordering::Release);
    }

    fn read(&self) {
        if self.awaiting.swap(false, Ordering::AcqRel) {
            let now = Instant::now();
            if let Ok(mut t) = self.times.lock() {
                t.1 = Some(now);
            }
        }
    }

    fn get(&self) -> (Option<Instant>, Option<Instant>) {
        self.times.lock().map(|t| *t).unwrap_or((None, None))
    }

    fn set_idle(&self, since: Option<Instant>) {
        if let Ok(mut idle) = self.idle_since.lock() {
            *idle = since;
        }
    }

    /// Whether the connection closed within `CLOSED_AT_ONCE` of its last response's end while
    /// it was kept idle, counted once however many look at it.
    fn closed_at_once(&self, now: Instant) -> bool {
        let idle = self.idle_since.lock().ok().and_then(|i| *i);
        idle.is_some_and(|t| now.saturating_duration_since(t) < CLOSED_AT_ONCE)
            && !self.counted.swap(true, Ordering::AcqRel)
    }
}

/// A TCP or TLS stream.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The connection's stream, noting when a request goes out and the answer's first byte comes
/// back (only the first read after a write reads the clock).
struct Marked {
    stream: Stream,
    marks: Arc<Marks>,
}

impl AsyncRead for Marked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = match &mut this.stream {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        };
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.marks.read();
        }
        polled
    }
}

impl AsyncWrite for Marked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = match &mut this.stream {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        };
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.marks.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = match &mut this.stream {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        };
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.marks.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One kept connection.
struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    marks: Arc<Marks>,
    opening: Opening,
    preopened: bool,
    /// Requests sent on it so far.
    used: u64,
}

/// A connection lent to one request; `Pool::give_back` keeps it for the next after the
/// response has been read to its end (dropping it closes the connection).
pub struct Lease {
    conn: Conn,
    origin: Peer,
}

/// Why a request got no response head.
#[derive(Debug)]
pub struct SendError {
    pub reason: String,
    /// The connection could not be opened (nothing reached the server).
    pub connecting: bool,
}

/// Connections `Pool::preopen` opens at a time.
const PREOPEN_AT_ONCE: usize = 32;

/// Times one request is sent at most when its connections close before answering: a server
/// that closes every connection it accepts unanswered is not asked forever.
pub const MAX_ATTEMPTS: u32 = 3;

/// Kept connections found closed this soon after their response ended were closed by the
/// server because the response ended (not by an idle timeout, which takes seconds).
const CLOSED_AT_ONCE: Duration = Duration::from_secs(1);

/// Kept connections found closed at once, with none ever carrying a second request, before
/// the pool takes the server for one that closes after every response.
const CLOSES_AFTER: u64 = 2;

/// How long a request waits for a spare being opened before opening its own.
const SPARE_WAIT: Duration = Duration::from_secs(5);

/// What the pool has seen of how one origin keeps connections.
#[derive(Default)]
struct Keeping {
    /// Requests answered on a connection that had carried one before: the server keeps them.
    reused_ok: u64,
    /// Kept connections the server closed as soon as their response ended, found when taken
    /// or when the next request on them went unanswered.
    closed_at_once: u64,
    /// The server closes after every response: nothing is kept for it, and a spare is opened
    /// in the place of each connection it closed.
    closes: bool,
    /// Spares being opened now.
    opening: usize,
    /// Told when a spare is ready (or failed to open).
    ready: Arc<tokio::sync::Notify>,
}

/// The engine's kept connections, per origin.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Peer, Vec<Conn>>>,
    keeping: Mutex<HashMap<Peer, Keeping>>,
    /// Open a spare when a server closes after every response (off: `--no-preconnect`, each
    /// request pays its own connect, as a new client's would).
    spares: bool,
    /// What the pool learnt of a server and has not said yet.
    news: Mutex<Vec<ServerNote>>,
    tls: OnceLock<Result<tokio_rustls::TlsConnector, String>>,
}

impl Pool {
    /// A pool; `spares`: open a connection ahead of the next request for a server that closes
    /// after every response.
    pub fn new(spares: bool) -> Pool {
        Pool {
            spares,
            ..Pool::default()
        }
    }

    /// Connections kept idle for `origin` now.
    pub fn idle(&self, origin: &Peer) -> usize {
        self.idle
            .lock()
            .map_or(0, |m| m.get(origin).map_or(0, Vec::len))
    }

    /// Whether the pool takes `origin` for a server that closes after every response.
    pub fn closes_after_each(&self, origin: &Peer) -> bool {
        self.keeping
            .lock()
            .is_ok_and(|k| k.get(origin).is_some_and(|k| k.closes))
    }

    /// What the pool learnt of the servers since it was last asked, each said once.
    pub fn news(&self) -> Vec<ServerNote> {
        self.news
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
    }

    /// Opens `n` connections to `origin`, before anything is timed, and keeps them for the
    /// first requests; `PREOPEN_AT_ONCE` at a time, since a burst of hundreds of handshakes
    /// overflows the kernel's queues even on loopback, and a dropped SYN costs a second (the
    /// retransmission timeout). Returns how many opened (a server that refuses them fails the
    /// requests themselves, each with its reason).
    pub async fn preopen(self: &Arc<Pool>, origin: &Peer, n: usize, timeout: Duration) -> usize {
        let mut opening = tokio::task::JoinSet::new();
        let at_once = Arc::new(tokio::sync::Semaphore::new(PREOPEN_AT_ONCE));
        for _ in 0..n {
            let (pool, origin, at_once) = (self.clone(), origin.clone(), at_once.clone());
            opening.spawn(async move {
                let _permit = at_once.acquire().await.ok()?;
                tokio::time::timeout(timeout, pool.open(&origin))
                    .await
                    .ok()
                    .and_then(Result::ok)
            });
        }
        let mut opened = Vec::with_capacity(n);
        while let Some(joined) = opening.join_next().await {
            if let Ok(Some(mut conn)) = joined {
                conn.preopened = true;
                opened.push(conn);
            }
        }
        let count = opened.len();
        if let Ok(mut idle) = self.idle.lock() {
            idle.entry(origin.clone()).or_default().extend(opened);
        }
        count
    }

    /// Waits while a spare is being opened for `origin` and none is idle (at most
    /// `SPARE_WAIT`), so that a closed loop's next request starts its clock on an open
    /// connection, as it would on a server that keeps them.
    pub async fn spare_ready(&self, origin: &Peer) {
        let deadline = Instant::now() + SPARE_WAIT;
        while self.idle(origin) == 0 {
            let Some(ready) = self.spare_coming(origin) else {
                return;
            };
            let notified = ready.notified();
            // Looked at again once registered, so a spare ready in between is not missed.
            if self.idle(origin) > 0 {
                return;
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Sends `req` to `origin` on a kept connection, or on a new one, and waits for the head of
    /// the response. A request whose connection closed before any byte of an answer came back
    /// goes again on a new connection, up to `MAX_ATTEMPTS` times in all; the exchange says how
    /// many times it went.
    pub async fn send(
        self: &Arc<Pool>,
        origin: &Peer,
        req: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, Lease, Exchange), SendError> {
        let mut attempts = 0;
        let mut fresh_only = false;
        loop {
            attempts += 1;
            let request = copy_of(&req);
            let kept = if fresh_only {
                None
            } else {
                self.take(origin).await
            };
            let (mut conn, how) = match kept {
                Some(c) if c.preopened && c.used == 0 => (c, ConnectionUse::Preopened),
                Some(c) => (c, ConnectionUse::Reused),
                None => {
                    let c = self.open(origin).await.map_err(|reason| SendError {
                        reason,
                        connecting: true,
                    })?;
                    (c, ConnectionUse::New)
                }
            };
            let connected = Instant::now();
            conn.marks.reset();
            conn.used += 1;
            match conn.sender.try_send_request(request).await {
                Ok(resp) => {
                    conn.marks.set_idle(None);
                    if how == ConnectionUse::Reused {
                        self.keeping(origin, |k| k.reused_ok += 1);
                    }
                    let (written, first_byte) = conn.marks.get();
                    let exchange = Exchange {
                        how,
                        opening: (how != ConnectionUse::Reused).then_some(conn.opening),
                        connected,
                        written,
                        first_byte,
                        attempts,
                    };
                    let lease = Lease {
                        conn,
                        origin: origin.clone(),
                    };
                    return Ok((resp, lease, exchange));
                }
                Err(e) => {
                    let answered = conn.marks.get().1.is_some();
                    if answered || !closed_unanswered(e.error()) || attempts >= MAX_ATTEMPTS {
                        let again = if attempts > 1 {
                            format!(" (sent {attempts} times)")
                        } else {
                            String::new()
                        };
                        return Err(SendError {
                            reason: format!("{}{again}", error_line(e.error(), false)),
                            connecting: false,
                        });
                    }
                    if conn.marks.closed_at_once(Instant::now()) {
                        self.closed_at_once(origin);
                    }
                    // Never answered: it goes again, on a connection of its own.
                    fresh_only = true;
                }
            }
        }
    }

    /// A request's response ended: its connection is kept for the next request, unless the
    /// server said it closes it (`Connection: close`), the connection closed already, or the
    /// server closes after every response; then a spare takes its place where the pool opens
    /// spares.
    pub fn finished(self: &Arc<Pool>, lease: Lease, server_closes: bool) {
        let origin = lease.origin.clone();
        if server_closes {
            drop(lease);
            // Counted; a spare takes its place once the server is known to close them all.
            self.closed_at_once(&origin);
        } else if self.closes_after_each(&origin) {
            drop(lease);
            self.open_spare(&origin);
        } else {
            self.give_back(lease);
        }
    }

    /// Opens a connection for the next request to `origin`, in the background.
    fn open_spare(self: &Arc<Pool>, origin: &Peer) {
        if !self.spares {
            return;
        }
        let ready = match self.keeping.lock() {
            Ok(mut k) => {
                let k = k.entry(origin.clone()).or_default();
                k.opening += 1;
                k.ready.clone()
            }
            Err(_) => return,
        };
        let (pool, origin) = (self.clone(), origin.clone());
        tokio::spawn(async move {
            let opened = tokio::time::timeout(SPARE_WAIT, pool.open(&origin)).await;
            if let Ok(Ok(mut conn)) = opened {
                conn.preopened = true;
                if let Ok(mut idle) = pool.idle.lock() {
                    idle.entry(origin.clone()).or_default().push(conn);
                }
            }
            pool.keeping(&origin, |k| k.opening = k.opening.saturating_sub(1));
            ready.notify_waiters();
        });
    }

    /// A kept connection the server closed as soon as its response ended: after
    /// `CLOSES_AFTER` of them, with none ever carrying a second request, the server is taken
    /// for one that closes after every response, and the pool says so once. From then on each
    /// such close is replaced by a spare.
    fn closed_at_once(self: &Arc<Pool>, origin: &Peer) {
        let spares = self.spares;
        let (said, closes) = self
            .keeping(origin, |k| {
                k.closed_at_once += 1;
                let now = !k.closes && k.reused_ok == 0 && k.closed_at_once >= CLOSES_AFTER;
                if now {
                    k.closes = true;
                }
                (now, k.closes)
            })
            .unwrap_or((false, false));
        if closes {
            self.open_spare(origin);
        }
        if said {
            let what = if spares {
                "a connection is opened ahead of each request instead, out of its time (--no-preconnect: each request opens its own inside its TTFT, as a new client would)"
            } else {
                "so each request opens its own, and its connect is in its TTFT (--no-preconnect)"
            };
            if let Ok(mut news) = self.news.lock() {
                news.push(ServerNote {
                    what: "closes-connections".into(),
                    words: format!(
                        "{} closes its connection after every response (it keeps none for a next request); {what}",
                        origin.host_header()
                    ),
                });
            }
        }
    }

    fn keeping<T>(&self, origin: &Peer, f: impl FnOnce(&mut Keeping) -> T) -> Option<T> {
        let mut k = self.keeping.lock().ok()?;
        Some(f(k.entry(origin.clone()).or_default()))
    }

    /// Keeps a connection whose response was read to the end for the next request.
    fn give_back(self: &Arc<Pool>, lease: Lease) {
        if lease.conn.sender.is_closed() {
            // Closed by the server as its response ended.
            if !lease.conn.marks.counted.swap(true, Ordering::AcqRel) {
                self.closed_at_once(&lease.origin);
            }
            return;
        }
        // The connection's own task counts it if the server closes it now (`open`).
        lease.conn.marks.set_idle(Some(Instant::now()));
        if let Ok(mut idle) = self.idle.lock() {
            idle.entry(lease.origin).or_default().push(lease.conn);
        }
    }

    /// The most recently used idle connection that is still open, once it is ready (a fresh
    /// one is, as soon as the task driving it has run once). One the server closed as soon as
    /// its response ended is counted (`closed_at_once`). With none idle while spares are being
    /// opened, it waits for one (at most `SPARE_WAIT`) rather than open another: two requests
    /// woken by one spare must not leave the second to open its own.
    async fn take(self: &Arc<Pool>, origin: &Peer) -> Option<Conn> {
        let deadline = Instant::now() + SPARE_WAIT;
        loop {
            let popped = {
                let mut idle = self.idle.lock().ok()?;
                idle.get_mut(origin).and_then(Vec::pop)
            };
            let Some(mut conn) = popped else {
                let ready = self.spare_coming(origin)?;
                let notified = ready.notified();
                // Looked at again once registered, so a spare ready in between is not missed.
                if self.idle(origin) == 0
                    && tokio::time::timeout_at(deadline.into(), notified)
                        .await
                        .is_err()
                {
                    return None;
                }
                continue;
            };
            // Still marked idle until answered: a close found by the request sent on it counts
            // as one right after the last response (`send`).
            if !conn.sender.is_closed() && conn.sender.ready().await.is_ok() {
                return Some(conn);
            }
            if conn.marks.closed_at_once(Instant::now()) {
                self.closed_at_once(origin);
            }
        }
    }

    /// What tells of the next spare for `origin`, when one is being opened.
    fn spare_coming(&self, origin: &Peer) -> Option<Arc<tokio::sync::Notify>> {
        let keeping = self.keeping.lock().ok()?;
        keeping
            .get(origin)
            .filter(|k| k.opening > 0)
            .map(|k| k.ready.clone())
    }

    /// Opens a connection: the name lookup, the TCP connect (each address in turn), the TLS
    /// handshake, each timed.
    async fn open(self: &Arc<Pool>, origin: &Peer) -> Result<Conn, String> {
        let t0 = Instant::now();
        let (addrs, dns): (Vec<SocketAddr>, Option<Duration>) = match origin.host.parse::<IpAddr>()
        {
            Ok(ip) => (vec![SocketAddr::new(ip, origin.port)], None),
            Err(_) => {
                let found = tokio::net::lookup_host((origin.host.as_str(), origin.port))
                    .await
                    .map_err(|e| format!("dns error: {}", error_line(&e, false)))?;
                (found.collect(), Some(t0.elapsed()))
            }
        };
        let t1 = Instant::now();
        let mut last_error = format!("{} resolved to no address", origin.host);
        let mut tcp = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last_error = error_line(&e, false),
            }
        }
        let tcp = tcp.ok_or(last_error)?;
        let _ = tcp.set_nodelay(true);
        let t2 = Instant::now();
        let (stream, tls) = if origin.tls {
            let connector = self.tls_connector()?;
            let name = rustls::pki_types::ServerName::try_from(origin.host.clone())
                .map_err(|e| format!("{}: not a TLS server name ({e})", origin.host))?;
            let s = connector
                .connect(name, tcp)
                .await
                .map_err(|e| error_line(&e, false))?;
            (Stream::Tls(Box::new(s)), Some(t2.elapsed()))
        } else {
            (Stream::Plain(tcp), None)
        };
        let marks = Arc::new(Marks::default());
        let io = TokioIo::new(Marked {
            stream,
            marks: marks.clone(),
        });
        let (sender, connection) = http1::handshake(io)
            .await
            .map_err(|e| error_line(&e, false))?;
        // Driven on its own task until either side closes it. A server that closes a connection
        // kept idle right after its response is told to the pool as soon as it does, not when
        // the next request finds it closed: with two such, the next requests find spares.
        let (pool, watched, at) = (Arc::downgrade(self), marks.clone(), origin.clone());
        tokio::spawn(async move {
            let _ = connection.await;
            if watched.closed_at_once(Instant::now()) {
                if let Some(pool) = pool.upgrade() {
                    pool.closed_at_once(&at);
                }
            }
        });
        Ok(Conn {
            sender,
            marks,
            opening: Opening {
                dns,
                tcp: t2.saturating_duration_since(t1),
                tls,
            },
            preopened: false,
            used: 0,
        })
    }

    /// TLS with the Mozilla roots (as the rest of the client), offering HTTP/1.1 only.
    fn tls_connector(&self) -> Result<tokio_rustls::TlsConnector, String> {
        self.tls
            .get_or_init(|| {
                let roots = rustls::RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                };
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let mut config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("cannot set up TLS: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
            })
            .clone()
    }
}

/// A copy of a request, to send again: its body is shared bytes.
fn copy_of(req: &Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let mut copy = Request::new(req.body().clone());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    copy
}

/// Whether a send failed because its connection closed (or was reset) before the request was
/// answered: the server never took it up, so it may go again.
fn closed_unanswered(e: &hyper::Error) -> bool {
    if e.is_canceled() || e.is_incomplete_message() || e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{
                BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof,
            };
            return matches!(
                io.kind(),
                BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof
            );
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use http_body_util::BodyExt;

    use super::*;

    #[test]
    fn origins_and_host_headers() {
        let o = Peer::of(&Url::parse("http://127.0.0.1:8000/v1/completions").unwrap()).unwrap();
        assert_eq!(
            (o.tls, o.port, o.host_header()),
            (false, 8000, "127.0.0.1:8000".into())
        );
        let o = Peer::of(&Url::parse("https://api.example.com/v1").unwrap()).unwrap();
        assert_eq!(
            (o.tls, o.port, o.host_header()),
            (true, 443, "api.example.com".into())
        );
        let o = Peer::of(&Url::parse("http://[::1]:80/").unwrap()).unwrap();
        assert_eq!(o.host_header(), "[::1]");
        assert_eq!(o.host, "::1");
    }

    /// How the test server closes its connections.
    #[derive(Clone, Copy, PartialEq)]
    enum Closing {
        /// Right after each response (as upstream llama.cpp's server does after a stream).
        AfterAnswer,
        /// The first connection before answering, then as `AfterAnswer`.
        DropFirst,
        /// When the next request on the connection arrives, unanswered: the close the client
        /// finds only by sending on a connection it kept.
        OnNextRequest,
    }

    /// A server on loopback that answers each request with `Keep-Alive` and a short body and
    /// closes its connections as `closing` says. Returns its origin and the count of
    /// connections it accepted.
    async fn closing_server(closing: Closing) -> (Peer, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => got.extend_from_slice(&buf[..k]),
                        }
                    }
                    if closing == Closing::DropFirst && n == 0 {
                        return;
                    }
                    let answer = "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 2\r\n\r\nok";
                    let _ = s.write_all(answer.as_bytes()).await;
                    if closing == Closing::OnNextRequest {
                        // Whatever comes next is read and left unanswered.
                        let _ = s.read(&mut buf).await;
                    }
                    let _ = s.shutdown().await;
                });
            }
        });
        let origin = Peer {
            tls: false,
            host: "127.0.0.1".into(),
            port,
        };
        (origin, accepted)
    }

    fn request(origin: &Peer) -> Request<Full<Bytes>> {
        Request::post("/v1/completions")
            .header(hyper::header::HOST, origin.host_header())
            .header(hyper::header::CONTENT_LENGTH, 2)
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap()
    }

    /// Whether every request from the `k`th on went once, on a spare opened ahead of it.
    fn spares_from(seen: &[(ConnectionUse, u32)], k: usize) -> bool {
        seen[k..]
            .iter()
            .all(|&s| s == (ConnectionUse::Preopened, 1))
    }

    /// Sends `n` requests one after another, each read to its end: how each got its connection.
    async fn one_after_another(
        pool: &Arc<Pool>,
        origin: &Peer,
        n: usize,
    ) -> Vec<(ConnectionUse, u32)> {
        let mut seen = Vec::new();
        for _ in 0..n {
            pool.spare_ready(origin).await;
            let (resp, lease, x) = pool.send(origin, request(origin)).await.unwrap();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"ok");
            pool.finished(lease, false);
            seen.push((x.how, x.attempts));
        }
        seen
    }

    /// A server that closes after every response while answering `Keep-Alive`: no request
    /// fails; after two the pool knows, says so once, and each later request finds a
    /// connection opened ahead of it.
    #[tokio::test]
    async fn a_server_closing_after_each_response_gets_spares() {
        let (origin, _) = closing_server(Closing::AfterAnswer).await;
        let pool = Arc::new(Pool::new(true));
        let seen = one_after_another(&pool, &origin, 8).await;
        assert!(pool.closes_after_each(&origin));
        let news = pool.news();
        assert_eq!(news.len(), 1, "{news:?}");
        assert_eq!(news[0].what, "closes-connections");
        assert!(pool.news().is_empty(), "said once");
        // The first one or two open their own (or go again when a kept one is found closed);
        // from the third on, a spare.
        assert!(spares_from(&seen, 3), "{seen:?}");
    }

    /// A server whose closes the client finds only by sending on a kept connection (the next
    /// request follows the last response at once): each such request goes again, counts
    /// as a close right after a response, and after two the pool knows and opens spares.
    #[tokio::test]
    async fn closes_found_by_sending_are_counted() {
        let (origin, _) = closing_server(Closing::OnNextRequest).await;
        let pool = Arc::new(Pool::new(true));
        let seen = one_after_another(&pool, &origin, 6).await;
        assert!(pool.closes_after_each(&origin), "{seen:?}");
        assert_eq!(
            &seen[..3],
            [
                (ConnectionUse::New, 1),
                (ConnectionUse::New, 2),
                (ConnectionUse::New, 2)
            ]
        );
        assert!(spares_from(&seen, 3), "{seen:?}");
    }

    /// Without spares (`--no-preconnect`) each request opens its own; none fails.
    #[tokio::test]
    async fn without_spares_each_request_opens_its_own() {
        let (origin, accepted) = closing_server(Closing::AfterAnswer).await;
        let pool = Arc::new(Pool::new(false));
        let seen = one_after_another(&pool, &origin, 6).await;
        assert!(
            seen[2..].iter().all(|&(how, _)| how == ConnectionUse::New),
            "{seen:?}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 6);
        assert!(pool.news()[0].words.contains("each request opens its own"));
    }

    /// A new connection closed before any answer: the request goes again on another, and
    /// says it went twice.
    #[tokio::test]
    async fn a_request_whose_connection_closed_unanswered_goes_again() {
        let (origin, accepted) = closing_server(Closing::DropFirst).await;
        let pool = Arc::new(Pool::new(true));
        let seen = one_after_another(&pool, &origin, 1).await;
        assert_eq!(seen, [(ConnectionUse::New, 2)]);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }
}
