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

pub use crate::event::ConnectionUse;
use crate::util::error_line;

/// Where a connection goes: requests to one origin share its kept connections.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl Origin {
    pub fn of(url: &Url) -> Result<Origin, String> {
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
        Ok(Origin { tls, host, port })
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
}

/// When a connection's request was written and its response's first byte read. Set by the
/// connection's I/O (on the task that drives it), read by the request after the response head.
#[derive(Debug, Default)]
struct Marks {
    /// A request was written and no byte has come back since.
    awaiting: AtomicBool,
    times: Mutex<(Option<Instant>, Option<Instant>)>,
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
    origin: Origin,
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

/// The engine's kept connections, per origin.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<Origin, Vec<Conn>>>,
    tls: OnceLock<Result<tokio_rustls::TlsConnector, String>>,
}

impl Pool {
    pub fn new() -> Pool {
        Pool::default()
    }

    /// Connections kept idle for `origin` now.
    pub fn idle(&self, origin: &Origin) -> usize {
        self.idle
            .lock()
            .map_or(0, |m| m.get(origin).map_or(0, Vec::len))
    }

    /// Opens `n` connections to `origin`, before anything is timed, and keeps them for the
    /// first requests; `PREOPEN_AT_ONCE` at a time, since a burst of hundreds of handshakes
    /// overflows the kernel's queues even on loopback, and a dropped SYN costs a second (the
    /// retransmission timeout). Returns how many opened (a server that refuses them fails the
    /// requests themselves, each with its reason).
    pub async fn preopen(self: &Arc<Pool>, origin: &Origin, n: usize, timeout: Duration) -> usize {
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

    /// Sends `req` to `origin` on a kept connection, or on a new one, and waits for the head of
    /// the response. A kept connection the server closed while it was idle (the request never
    /// got an answer's first byte) is retried once on a new one, which the record then shows.
    pub async fn send(
        &self,
        origin: &Origin,
        req: Request<Full<Bytes>>,
    ) -> Result<(Response<Incoming>, Lease, Exchange), SendError> {
        let mut req = Some(req);
        let mut fresh_only = false;
        loop {
            let Some(request) = req.take() else {
                return Err(SendError {
                    reason: "the request could not be sent".into(),
                    connecting: false,
                });
            };
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
                    let (written, first_byte) = conn.marks.get();
                    let exchange = Exchange {
                        how,
                        opening: (how != ConnectionUse::Reused).then_some(conn.opening),
                        connected,
                        written,
                        first_byte,
                    };
                    let lease = Lease {
                        conn,
                        origin: origin.clone(),
                    };
                    return Ok((resp, lease, exchange));
                }
                Err(mut e) => {
                    let answered = conn.marks.get().1.is_some();
                    let retry = how != ConnectionUse::New
                        && !answered
                        && (e.error().is_canceled() || e.error().is_incomplete_message());
                    if retry {
                        // Never answered: it goes again, once, on a connection of its own.
                        req = e.take_message().or(req);
                        if req.is_some() {
                            fresh_only = true;
                            continue;
                        }
                    }
                    return Err(SendError {
                        reason: error_line(e.error(), false),
                        connecting: false,
                    });
                }
            }
        }
    }

    /// Keeps a connection whose response was read to the end for the next request.
    pub fn give_back(&self, lease: Lease) {
        if lease.conn.sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.entry(lease.origin).or_default().push(lease.conn);
        }
    }

    /// The most recently used idle connection that is still open, once it is ready (a fresh
    /// one is, as soon as the task driving it has run once).
    async fn take(&self, origin: &Origin) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut idle = self.idle.lock().ok()?;
                idle.get_mut(origin)?.pop()?
            };
            if !conn.sender.is_closed() && conn.sender.ready().await.is_ok() {
                return Some(conn);
            }
        }
    }

    /// Opens a connection: the name lookup, the TCP connect (each address in turn), the TLS
    /// handshake, each timed.
    async fn open(&self, origin: &Origin) -> Result<Conn, String> {
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
        // Driven on its own task until either side closes it.
        tokio::spawn(async move {
            let _ = connection.await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_host_headers() {
        let o = Origin::of(&Url::parse("http://127.0.0.1:8000/v1/completions").unwrap()).unwrap();
        assert_eq!(
            (o.tls, o.port, o.host_header()),
            (false, 8000, "127.0.0.1:8000".into())
        );
        let o = Origin::of(&Url::parse("https://api.example.com/v1").unwrap()).unwrap();
        assert_eq!(
            (o.tls, o.port, o.host_header()),
            (true, 443, "api.example.com".into())
        );
        let o = Origin::of(&Url::parse("http://[::1]:80/").unwrap()).unwrap();
        assert_eq!(o.host_header(), "[::1]");
        assert_eq!(o.host, "::1");
    }
}
