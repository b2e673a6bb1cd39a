//! One streamed request, timed on the client: TTFT from the (scheduled) send to the first chunk
//! carrying generated text, one interval per further content chunk, E2E to the end of the stream,
//! and the HTTP phases before the first token (see `conn`). Every way it can go wrong becomes a
//! `RequestError` with a one-line reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{ACCEPT, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use reqwest::{Client, Url};
use serde_json::Value;

use super::api::{self, Api, Ask};
use super::cancel::After;
use super::conn::{Exchange, Peer, Pool};
use super::outcome::{Cancelled, Measured, RequestError, Token};
use super::reading::Reading;
use super::sse::{excerpt, Data, SseLines};
use crate::event::HttpPhases;

/// A server's base URL (no `/v1`), and how it is shown (no credentials).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    base: Url,
    display: String,
}

impl Endpoint {
    /// `http://host:port`, `https://host/prefix` or either with `/v1` at the end.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let s = s.trim();
        if !s.contains("://") {
            return Err(format!(
                "`{}` has no scheme (write http://{0} or https://{0})",
                excerpt(s, 80)
            ));
        }
        let mut url = Url::parse(s).map_err(|e| {
            format!(
                "`{}` is not a URL ({e}; use e.g. http://127.0.0.1:8000)",
                excerpt(s, 80)
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "`{}`: only http:// and https:// endpoints are supported",
                excerpt(s, 80)
            ));
        }
        if url.host_str().is_none() {
            return Err(format!("`{}` has no host", excerpt(s, 80)));
        }
        url.set_query(None);
        url.set_fragment(None);
        let path = url.path().trim_end_matches('/');
        let path = path.strip_suffix("/v1").unwrap_or(path).to_string();
        url.set_path(&path);
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        let display = shown.as_str().trim_end_matches('/').to_string();
        Ok(Endpoint { base: url, display })
    }

    /// The base URL without credentials, as records and errors show it.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// `base` + `/v1/...`.
    pub fn url(&self, path: &str) -> Url {
        let mut u = self.base.clone();
        let joined = format!("{}{path}", u.path().trim_end_matches('/'));
        u.set_path(&joined);
        u
    }
}

/// How far a request got, kept outside the timed future so a timeout can say it.
#[derive(Debug, Default)]
pub struct Progress {
    pub sent: Option<Instant>,
    pub headers: bool,
    pub content_chunks: usize,
    /// The TTFT, once the first token came.
    pub ttft_s: Option<f64>,
}

/// When a request's time starts.
#[derive(Clone, Copy, Debug)]
pub enum Start {
    /// Open loop: when it was due. TTFT and E2E count from then, so a client that sends late
    /// cannot hide it (no coordinated omission).
    Due(Instant),
    /// Closed loop: when the scheduler launched it. Its time counts from when it begins to be
    /// sent, as a closed loop's does (the next request waits for a free slot, not a clock); the
    /// wait between the launch and then, the client's own, is its send delay.
    Launched(Instant),
}

/// Sends `ask` to `endpoint` and reads the whole stream, timed from `start`; `on_token` hears
/// of each content chunk as it arrives (the TTFT, then each step's interval), so that a
/// dashboard sees a long stream live. `cancel`: the client abandons it (closes its stream) at
/// its first token or that long after `start`, as `--cancel` asks.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    pool: &Arc<Pool>,
    endpoint: &Endpoint,
    api_key: Option<&str>,
    ask: &Ask,
    start: Start,
    timeout: Duration,
    cancel: Option<After>,
    on_token: impl FnMut(Token),
) -> Result<Measured, RequestError> {
    let mut progress = Progress::default();
    let t0 = match start {
        Start::Due(t) | Start::Launched(t) => t,
    };
    let at_first = cancel == Some(After::FirstToken);
    let outcome = {
        let run = stream(
            pool,
            endpoint,
            api_key,
            ask,
            start,
            at_first,
            &mut progress,
            on_token,
        );
        let timed = tokio::time::timeout(timeout, run);
        tokio::pin!(timed);
        match cancel {
            Some(After::Elapsed(d)) => tokio::select! {
                r = &mut timed => Some(r),
                _ = tokio::time::sleep_until((t0 + d).into()) => None,
            },
            _ => Some(timed.await),
        }
    };
    let Some(outcome) = outcome else {
        // Its time is up: the stream is dropped, and with it the connection.
        return Err(RequestError::cancelled(Cancelled {
            ttft_s: progress.ttft_s,
            content_chunks: progress.content_chunks,
        }));
    };
    match outcome {
        Ok(r) => r,
        Err(_) => {
            let at = match (progress.headers, progress.content_chunks) {
                (false, _) => "waiting for the response headers".to_string(),
                (true, 0) => "waiting for the first token".to_string(),
                (true, n) => format!("after {n} content chunks"),
            };
            Err(RequestError::new(format!(
                "timed out after {}s ({at}; --request-timeout)",
                timeout.as_secs_f64()
            )))
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn stream(
    pool: &Arc<Pool>,
    endpoint: &Endpoint,
    api_key: Option<&str>,
    ask: &Ask,
    start: Start,
    cancel_at_first: bool,
    progress: &mut Progress,
    mut on_token: impl FnMut(Token),
) -> Result<Measured, RequestError> {
    let path = ask.api.path();
    let body = serde_json::to_vec(&ask.body()).map_err(|e| RequestError::new(e.to_string()))?;
    let url = endpoint.url(path);
    let origin = Peer::of(&url).map_err(RequestError::new)?;
    let (scheduled, due) = match start {
        Start::Due(due) => (due, due),
        Start::Launched(launched) => {
            // A closed loop's request starts its clock on an open connection when one is being
            // opened for it (a server that closes after every response): the wait is the
            // client's, its send delay.
            pool.spare_ready(&origin).await;
            (Instant::now(), launched)
        }
    };
    let req = post(
        &url,
        &origin,
        ask.api,
        api_key,
        ask.session.as_deref(),
        &ask.extra.headers,
        body,
    )?;
    let sent = Instant::now();
    progress.sent = Some(sent);
    let since = |t: Instant| t.saturating_duration_since(scheduled).as_secs_f64();
    let (resp, lease, exchange) = pool
        .send(&origin, req)
        .await
        .map_err(|e| RequestError::new(e.reason))?;
    progress.headers = true;
    let status = resp.status();
    // A server that says it closes the connection after this response is not asked again on it.
    let closes = resp
        .headers()
        .get(CONNECTION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let mut body = resp.into_body();
    if !status.is_success() {
        let mut text = Vec::new();
        // A short excerpt, read briefly: the status is the measurement.
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(b) = frame.into_data() {
                    text.extend_from_slice(&b);
                }
                if text.len() >= 2048 {
                    break;
                }
            }
        })
        .await;
        let text = String::from_utf8_lossy(&text);
        let detail = if text.trim().is_empty() {
            String::new()
        } else {
            format!(": {}", excerpt(&text, 160))
        };
        return Err(RequestError {
            reason: format!("HTTP {}{detail}", status.as_u16()),
            status: Some(status.as_u16()),
            cancelled: None,
        });
    }

    let out = Measured {
        send_delay_s: sent.saturating_duration_since(due).as_secs_f64(),
        http: Some(phases(&exchange, since)),
        ..Measured::default()
    };
    if !ask.api.streams() {
        let out = whole_body(&mut body, ask, out, since).await?;
        pool.finished(lease, closes);
        return Ok(out);
    }
    let mut reading = Reading::new(scheduled, ask.chunk_usage || ask.chunk_timings, out);
    let mut sse = SseLines::new();
    let mut payloads = Vec::new();
    let mut end: Instant;
    loop {
        let next = body.frame().await;
        end = Instant::now();
        let ended = match next {
            Some(Ok(frame)) => {
                // Trailers carry no data.
                let Ok(bytes) = frame.into_data() else {
                    continue;
                };
                sse.feed(&bytes, &mut payloads).map_err(RequestError::new)?;
                false
            }
            None => {
                sse.finish(&mut payloads).map_err(RequestError::new)?;
                true
            }
            Some(Err(e)) => {
                return Err(RequestError::new(format!(
                    "stream cut after {} content chunks: {}",
                    reading.token_chunks(),
                    crate::util::error_line(&e, false)
                )))
            }
        };
        for payload in payloads.drain(..) {
            let json = match payload {
                Data::Done => {
                    reading.done(end);
                    continue;
                }
                // Anything after [DONE] is not part of the measurement.
                Data::Json(_) if reading.is_done() => continue,
                Data::Json(j) => j,
            };
            let chunk = api::decode(ask.api, &json).map_err(RequestError::new)?;
            if let Some(token) = reading.chunk(&chunk, end) {
                progress.content_chunks = reading.token_chunks();
                on_token(token);
                if let Token::First { ttft_s } = token {
                    progress.ttft_s = Some(ttft_s);
                    if cancel_at_first {
                        // Returning drops the body and the lease: the connection closes.
                        return Err(RequestError::cancelled(Cancelled {
                            ttft_s: Some(ttft_s),
                            content_chunks: progress.content_chunks,
                        }));
                    }
                }
            }
        }
        if ended {
            break;
        }
    }
    let out = reading.finish(end, &sse)?;
    pool.finished(lease, closes);
    Ok(out)
}

/// Bodies of pooling responses longer than this are refused (a server bug, not a batch).
const MAX_BODY_BYTES: usize = 256 << 20;

/// A pooling API's response, read whole: its time is the request's TTFT and E2E alike.
async fn whole_body(
    body: &mut hyper::body::Incoming,
    ask: &Ask,
    mut out: Measured,
    since: impl Fn(Instant) -> f64,
) -> Result<Measured, RequestError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            RequestError::new(format!(
                "response cut after {} bytes: {}",
                bytes.len(),
                crate::util::error_line(&e, false)
            ))
        })?;
        if let Ok(b) = frame.into_data() {
            bytes.extend_from_slice(&b);
        }
        if bytes.len() > MAX_BODY_BYTES {
            return Err(RequestError::new(format!(
                "a response over {} MiB",
                MAX_BODY_BYTES >> 20
            )));
        }
    }
    let end = Instant::now();
    let pooled =
        api::pooling::parse(ask.api, ask.inputs.len(), &bytes).map_err(RequestError::new)?;
    out.ttft_s = since(end);
    out.e2e_s = out.ttft_s;
    out.usage_prompt_tokens = pooled.prompt_tokens;
    out.inputs = ask.inputs.len();
    out.text = pooled.digest;
    out.finish_reason = Some("stop".into());
    Ok(out)
}

/// The request as it goes on the wire: origin-form target, `Host`, the JSON body's length, and
/// the API key as a bearer token (else the URL's credentials as basic auth, as reqwest sends
/// them), and the user's `--header`s.
fn post(
    url: &Url,
    origin: &Peer,
    api: Api,
    api_key: Option<&str>,
    session: Option<&str>,
    extra_headers: &[(hyper::header::HeaderName, hyper::header::HeaderValue)],
    body: Vec<u8>,
) -> Result<hyper::Request<Full<Bytes>>, RequestError> {
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let mut req = hyper::Request::post(target)
        .header(HOST, origin.host_header())
        .header(CONTENT_TYPE, "application/json")
        .header(
            ACCEPT,
            if api.streams() {
                "text/event-stream"
            } else {
                "application/json"
            },
        )
        .header(CONTENT_LENGTH, body.len());
    if let Some(session) = session {
        req = req.header("X-Session-ID", session);
    }
    if api == Api::Messages {
        req = req.header("anthropic-version", api::messages::ANTHROPIC_VERSION);
    }
    if let (Some(key), Api::Messages) = (api_key, api) {
        req = req.header("x-api-key", key);
    } else if let Some(key) = api_key {
        req = req.header(AUTHORIZATION, format!("Bearer {key}"));
    } else if !url.username().is_empty() {
        use base64::Engine;
        let user = percent_decoded(url.username());
        let pass = url.password().map(percent_decoded).unwrap_or_default();
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        req = req.header(AUTHORIZATION, format!("Basic {token}"));
    }
    // The user's own, in the place of any of the same name.
    if let Some(headers) = req.headers_mut() {
        for (name, value) in extra_headers {
            headers.insert(name.clone(), value.clone());
        }
    }
    req.body(Full::new(Bytes::from(body)))
        .map_err(|e| RequestError::new(format!("cannot build the request ({e}); check --api-key")))
}

/// A URL's user or password as written before percent-encoding.
fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The exchange's instants as seconds since the request's start (`since`).
fn phases(x: &Exchange, since: impl Fn(Instant) -> f64) -> HttpPhases {
    let secs = |d: Duration| d.as_secs_f64();
    HttpPhases {
        connection: x.how,
        dns_s: x.opening.and_then(|o| o.dns).map(secs),
        tcp_s: x.opening.map(|o| secs(o.tcp)),
        tls_s: x.opening.and_then(|o| o.tls).map(secs),
        connected_s: since(x.connected),
        sent_s: x.written.map(&since),
        first_byte_s: x.first_byte.map(&since),
        attempts: x.attempts,
    }
}

/// What `GET /v1/models` says of the first model a server lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub id: String,
    /// The longest prompt + output it takes (vLLM's `max_model_len`), when it says.
    pub max_model_len: Option<usize>,
    /// Who serves it, as the list says (`vllm`, `llamacpp`, `sglang`, ...).
    pub owned_by: Option<String>,
}

/// `GET /v1/models`: the first model the server lists.
pub async fn first_model(
    client: &Client,
    endpoint: &Endpoint,
    api: Api,
    api_key: Option<&str>,
) -> Result<Served, String> {
    let mut req = client.get(endpoint.url("/v1/models"));
    match (api_key, api) {
        (Some(key), Api::Messages) => {
            req = req
                .header("x-api-key", key)
                .header("anthropic-version", api::messages::ANTHROPIC_VERSION)
        }
        (Some(key), _) => req = req.bearer_auth(key),
        (None, _) => {}
    }
    let fetch = async {
        let resp = req.send().await.map_err(crate::util::http_error)?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(crate::util::http_error)?;
        if !status.is_success() {
            return Err(format!(
                "HTTP {}: {}",
                status.as_u16(),
                excerpt(&String::from_utf8_lossy(&body), 120)
            ));
        }
        let v: Value = serde_json::from_slice(&body).map_err(|e| format!("not JSON ({e})"))?;
        let first = v
            .get("data")
            .and_then(Value::as_array)
            .and_then(|d| d.first());
        let id = first
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "no model listed".to_string())?;
        let max_model_len = first
            .and_then(|m| m.get("max_model_len"))
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok());
        let owned_by = first
            .and_then(|m| m.get("owned_by"))
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Served {
            id,
            max_model_len,
            owned_by,
        })
    };
    match tokio::time::timeout(Duration::from_secs(10), fetch).await {
        Ok(r) => r,
        Err(_) => Err("timed out after 10 s".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_lose_v1_and_credentials() {
        let e = Endpoint::parse("http://user:secret@127.0.0.1:8000/v1/").unwrap();
        assert_eq!(e.display(), "http://127.0.0.1:8000");
        assert_eq!(
            e.url("/v1/completions").as_str(),
            "http://user:secret@127.0.0.1:8000/v1/completions"
        );
        let e = Endpoint::parse("https://host/prefix").unwrap();
        assert_eq!(
            e.url("/v1/models").as_str(),
            "https://host/prefix/v1/models"
        );
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("localhost:8000").is_err());
    }

    #[test]
    fn bodies_ask_for_exact_streamed_output() {
        let ask = Ask {
            model: "m".into(),
            api: Api::Chat,
            prompt: "hi".into(),
            output_tokens: 16,
            exact_output: true,
            ..Ask::default()
        };
        let b = ask.body();
        assert_eq!(b["messages"][0]["content"], "hi");
        assert_eq!(b["max_tokens"], 16);
        assert_eq!(b["min_tokens"], 16);
        assert_eq!(b["ignore_eos"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        let plain = Ask {
            api: Api::Completions,
            exact_output: false,
            ..ask
        }
        .body();
        assert_eq!(plain["prompt"], "hi");
        assert!(plain.get("ignore_eos").is_none());
    }
}
