//! Emptying a server's prefix cache (`--reset-prefix-cache`), so that a run (or each cell of a
//! sweep) starts cold instead of being served from prompts an earlier one sent.
//!
//! There is no standard route, so the known ones are tried in order:
//!
//! - vLLM: `POST /reset_prefix_cache` (registered only when the server runs with
//!   `VLLM_SERVER_DEV_MODE=1`; some versions answer 200 with `{"success": false}` when they
//!   refuse, which counts as refused here);
//! - SGLang: `POST /flush_cache` (answers 400 while requests are running: retried briefly).
//!
//! A route the server does not have (404, 405) moves on to the next; a server with none is
//! [`ResetError::Unsupported`], one line naming what was tried. Any run of the http engine
//! calls this, and so may any other workload that needs a cold cache.

use std::time::{Duration, Instant};

use reqwest::{Client, StatusCode};
use serde_json::Value;

use super::request::Endpoint;
use super::sse::excerpt;
use crate::event::CacheReset;
use crate::util::http_error;

/// The routes tried, in order, with the server that has each.
pub const RESET_ROUTES: [(&str, &str); 2] =
    [("/reset_prefix_cache", "vLLM"), ("/flush_cache", "SGLang")];

/// A busy server (SGLang with requests still running) is asked again this many times.
const BUSY_RETRIES: usize = 10;
const BUSY_WAIT: Duration = Duration::from_millis(200);
/// One reset request may take this long.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why the cache was not emptied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResetError {
    /// The server has none of the known routes: it cannot be asked (a usage mistake).
    Unsupported(String),
    /// It has one, but the reset did not happen: refused, a server error, unreachable.
    Failed(String),
}

impl std::fmt::Display for ResetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResetError::Unsupported(m) | ResetError::Failed(m) => f.write_str(m),
        }
    }
}

/// Whether a 2xx body says the reset was refused (`{"success": false}`).
fn refused(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("success").and_then(Value::as_bool))
        == Some(false)
}

/// Empties `endpoint`'s prefix cache by the first known route it has.
pub async fn reset_prefix_cache(
    client: &Client,
    endpoint: &Endpoint,
    api_key: Option<&str>,
) -> Result<CacheReset, ResetError> {
    let t0 = Instant::now();
    let mut missing = Vec::new();
    for (route, server) in RESET_ROUTES {
        let mut tries = 0;
        loop {
            let mut req = client.post(endpoint.url(route)).timeout(TIMEOUT);
            if let Some(key) = api_key {
                req = req.bearer_auth(key);
            }
            let resp = req.send().await.map_err(|e| {
                ResetError::Failed(format!(
                    "--reset-prefix-cache: {}: POST {route}: {}",
                    endpoint.display(),
                    http_error(e)
                ))
            })?;
            let status = resp.status();
            let body = resp.bytes().await.unwrap_or_default();
            if status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED {
                missing.push(format!("POST {route} ({server}): HTTP {}", status.as_u16()));
                break;
            }
            if status.is_success() && !refused(&body) {
                return Ok(CacheReset {
                    endpoint: endpoint.display().to_string(),
                    via: format!("POST {route}"),
                    seconds: t0.elapsed().as_secs_f64(),
                });
            }
            let busy = matches!(
                status,
                StatusCode::BAD_REQUEST | StatusCode::CONFLICT | StatusCode::SERVICE_UNAVAILABLE
            ) || status.is_success();
            if busy && tries < BUSY_RETRIES {
                tries += 1;
                tokio::time::sleep(BUSY_WAIT).await;
                continue;
            }
            return Err(ResetError::Failed(format!(
                "--reset-prefix-cache: {}: POST {route} ({server}) did not empty the cache after {} tries: HTTP {}: {}",
                endpoint.display(),
                tries + 1,
                status.as_u16(),
                excerpt(&String::from_utf8_lossy(&body), 120)
            )));
        }
    }
    Err(ResetError::Unsupported(format!(
        "--reset-prefix-cache: {} has no prefix-cache reset route ({}); start vLLM with VLLM_SERVER_DEV_MODE=1, or drop the flag",
        endpoint.display(),
        missing.join(", ")
    )))
}

/// [`reset_prefix_cache`] on every endpoint, on a runtime of its own, before an engine starts:
/// a server with no route is known (and a usage error) before anything is measured.
pub fn reset_all_blocking(
    endpoints: &[Endpoint],
    api_key: Option<&str>,
    extra: &super::extra::Extra,
) -> Result<Vec<CacheReset>, ResetError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ResetError::Failed(format!("cannot start the http client runtime: {e}")))?;
    rt.block_on(async {
        let client = extra.client().build().map_err(|e| {
            ResetError::Failed(format!("cannot build the http client: {}", http_error(e)))
        })?;
        let mut done = Vec::new();
        for e in endpoints {
            done.push(reset_prefix_cache(&client, e, api_key).await?);
        }
        Ok(done)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_false_body_is_a_refusal() {
        assert!(refused(br#"{"success": false}"#));
        assert!(!refused(br#"{"success": true}"#));
        assert!(!refused(b"Cache flushed."));
        assert!(!refused(b""));
    }
}
