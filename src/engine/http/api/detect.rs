//! Which API a server speaks, found out before the run: `--api auto` picks one (from what
//! `GET /v1/models` says of the server or its first model, else from the first API route the
//! server answers), and an API asked for by name is checked to exist, so that a server without
//! it is one line and exit 2 before anything is measured rather than every request failing one
//! by one.
//!
//! A route is probed with a body no API can serve (`PROBE_BODY`): a server that has the route
//! refuses it as a bad request (400, 422) without generating anything, one that has not answers
//! 404 or 405, and one that has the route but not the feature turned on answers 501
//! (llama.cpp's server without `--embeddings` or `--reranking`). Only those three mean "lacks":
//! any other answer (a 401, a 500) says the route is there. The probe never holds a run: it is
//! answered in milliseconds, and a server that does not answer it within `TIMEOUT` is left to the
//! run, which says so.

use std::time::Duration;

/// The probe's body: every API's main field (`prompt`, `messages`, `input`, `query`) and its
/// length (`max_tokens`) an empty object where each wants a string, a list or a number, so a
/// server with the route refuses it before generating anything. An empty `{}` is not enough: a
/// server that fills in a missing prompt with an empty one (as llama-cpp-python's does) would
/// generate from it, and the run's first request would no longer be the server's first; nor
/// are the main fields alone: llama.cpp's server reads `messages: {}` on its Messages route as
/// no messages and generates until its context is full (seconds to minutes), but refuses a
/// `max_tokens` that is not a number.
pub const PROBE_BODY: &str = r#"{"prompt":{},"messages":{},"input":{},"query":{},"max_tokens":{}}"#;

use reqwest::{Client, StatusCode};
use serde_json::Value;

use super::messages::ANTHROPIC_VERSION;
use super::Api;
use crate::engine::http::request::Endpoint;
use crate::util::http_error;

/// How long one probe may take (servers answer it in milliseconds).
const TIMEOUT: Duration = Duration::from_secs(10);

/// The API a run uses, and why it is that one (empty when it was asked for by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picked {
    pub api: Api,
    pub why: String,
}

/// Why no API could be settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetectError {
    /// The server lacks the API asked for, or every one tried (a usage mistake: exit 2).
    Missing(String),
    /// The server could not be asked (unreachable, timed out): exit 1.
    Failed(String),
    /// A stop (a signal) came before the server answered.
    Stopped,
}

impl std::fmt::Display for DetectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DetectError::Missing(m) | DetectError::Failed(m) => f.write_str(m),
            DetectError::Stopped => f.write_str("stopped before the server answered"),
        }
    }
}

/// The key in the headers the API takes (both for a server not known yet).
fn authorized(
    req: reqwest::RequestBuilder,
    api: Api,
    api_key: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut req = req;
    if matches!(api, Api::Messages | Api::Auto) {
        req = req.header("anthropic-version", ANTHROPIC_VERSION);
    }
    if let Some(key) = api_key {
        if matches!(api, Api::Messages | Api::Auto) {
            req = req.header("x-api-key", key);
        }
        if api != Api::Messages {
            req = req.bearer_auth(key);
        }
    }
    req
}

/// Whether a probe's answer says the server has no such route (or has it turned off).
pub fn lacks(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED
    )
}

/// A probe's answer: its status, and the server's words when it refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: StatusCode,
    /// The error message of a refusal, shortened (a 501 often says how to turn the route on).
    pub said: Option<String>,
}

impl Answer {
    /// ` (HTTP 501: This server does not support embeddings. Start it with `--embeddings`)`.
    fn why(&self) -> String {
        match &self.said {
            Some(said) => format!("HTTP {}: {said}", self.status.as_u16()),
            None => format!("HTTP {}", self.status.as_u16()),
        }
    }
}

/// The message of an error body, as OpenAI-compatible servers write one
/// (`{"error":{"message":...}}`, `{"detail":...}`, `{"message":...}`), shortened.
fn error_message(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let message = v
        .pointer("/error/message")
        .or_else(|| v.get("message"))
        .or_else(|| v.get("detail"))
        .or_else(|| v.get("error"))?;
    let text = match message {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(crate::engine::http::sse::excerpt(&text, 160))
}

/// What `endpoint` answers the probe (`PROBE_BODY`) on `api`'s route with (`lacks` tells whether that
/// means the route is not there).
pub async fn probe(
    client: &Client,
    endpoint: &Endpoint,
    api_key: Option<&str>,
    api: Api,
) -> Result<Answer, DetectError> {
    let req = client
        .post(endpoint.url(api.path()))
        .timeout(TIMEOUT)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(PROBE_BODY);
    let resp = authorized(req, api, api_key).send().await;
    if resp.as_ref().is_err_and(reqwest::Error::is_timeout) {
        // Not answered in time (a server busy with a long generation): the run asks the route
        // itself, and its requests say what happens.
        return Ok(Answer {
            status: StatusCode::REQUEST_TIMEOUT,
            said: Some(format!(
                "no answer to the route check within {} s",
                TIMEOUT.as_secs()
            )),
        });
    }
    let resp = resp.map_err(|e| {
        DetectError::Failed(format!(
            "--api {}: {}: POST {}: {}",
            api.name(),
            endpoint.display(),
            api.path(),
            http_error(e)
        ))
    })?;
    let status = resp.status();
    let said = if status.is_success() {
        None
    } else {
        let body = tokio::time::timeout(TIMEOUT, resp.bytes()).await;
        body.ok()
            .and_then(Result::ok)
            .and_then(|b| error_message(&b))
    };
    Ok(Answer { status, said })
}

/// What `/v1/models` says of the API, when it says: Anthropic's list shape, or a model whose
/// task, type or capabilities (or, failing those, its name) say embedding or reranking.
pub fn from_models(list: &Value) -> Option<Picked> {
    let data = list.get("data").and_then(Value::as_array)?;
    let first = data.first()?;
    let anthropic = list.get("has_more").is_some()
        || (first.get("type").and_then(Value::as_str) == Some("model")
            && first.get("display_name").is_some());
    if anthropic {
        return Some(Picked {
            api: Api::Messages,
            why: "/v1/models lists its models in Anthropic's shape".into(),
        });
    }
    let id = first.get("id").and_then(Value::as_str).unwrap_or_default();
    let mut said: Vec<String> = Vec::new();
    for key in ["task", "type", "model_type", "capabilities", "tasks"] {
        match first.get(key) {
            Some(Value::String(s)) => said.push(s.to_ascii_lowercase()),
            Some(Value::Array(items)) => said.extend(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_ascii_lowercase),
            ),
            _ => {}
        }
    }
    let has =
        |words: &[&str], of: &[String]| of.iter().any(|s| words.iter().any(|w| s.contains(w)));
    let generates = has(
        &["generate", "chat", "completion", "llm", "text-generation"],
        &said,
    );
    let rerank = ["rerank", "score", "cross-encoder"];
    let embed = ["embed"];
    if !generates && has(&rerank, &said) {
        return Some(Picked {
            api: Api::Rerank,
            why: format!("/v1/models says {id} ranks ({})", said.join(", ")),
        });
    }
    if !generates && has(&embed, &said) {
        return Some(Picked {
            api: Api::Embeddings,
            why: format!("/v1/models says {id} embeds ({})", said.join(", ")),
        });
    }
    let name = [id.to_ascii_lowercase()];
    if said.is_empty() && has(&rerank, &name) {
        return Some(Picked {
            api: Api::Rerank,
            why: format!("/v1/models lists {id}, a reranker by its name"),
        });
    }
    if said.is_empty() && has(&embed, &name) {
        return Some(Picked {
            api: Api::Embeddings,
            why: format!("/v1/models lists {id}, an embedding model by its name"),
        });
    }
    None
}

/// `GET /v1/models` as JSON, if the server answers it.
async fn models(client: &Client, endpoint: &Endpoint, api_key: Option<&str>) -> Option<Value> {
    let req = client.get(endpoint.url("/v1/models")).timeout(TIMEOUT);
    let resp = authorized(req, Api::Auto, api_key).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    serde_json::from_slice(&resp.bytes().await.ok()?).ok()
}

/// The API of the run: `api` itself once its route is checked, or `auto`'s pick.
///
/// Completions and chat, the routes every OpenAI-compatible server has, are checked too (a
/// server of only one of them, or an embedding server, answers the other with 404), but a
/// server that cannot be asked (unreachable, timed out) is left to the run for those two: its
/// requests fail one by one, each saying why, as they would without the check.
pub async fn resolve(
    client: &Client,
    endpoint: &Endpoint,
    api_key: Option<&str>,
    api: Api,
) -> Result<Picked, DetectError> {
    match api {
        Api::Auto => {
            if let Some(p) = models(client, endpoint, api_key)
                .await
                .as_ref()
                .and_then(from_models)
            {
                return Ok(p);
            }
            let mut missing = Vec::new();
            for api in Api::CONCRETE {
                let answer = probe(client, endpoint, api_key, api).await?;
                if lacks(answer.status) {
                    missing.push(format!("{} ({})", api.path(), answer.why()));
                    continue;
                }
                return Ok(Picked {
                    api,
                    why: format!(
                        "{} answers POST {} (HTTP {} to a probe; /v1/models does not say)",
                        endpoint.display(),
                        api.path(),
                        answer.status.as_u16()
                    ),
                });
            }
            Err(DetectError::Missing(format!(
                "--api auto: {} answers none of POST {}; is it an inference server?",
                endpoint.display(),
                missing.join(", ")
            )))
        }
        api => {
            let answer = match probe(client, endpoint, api_key, api).await {
                Ok(answer) => answer,
                // Not answered in time: the run asks the route itself, and its requests say
                // what happens.
                Err(DetectError::Failed(_)) if matches!(api, Api::Completions | Api::Chat) => {
                    return Ok(Picked {
                        api,
                        why: String::new(),
                    })
                }
                Err(e) => return Err(e),
            };
            if lacks(answer.status) {
                return Err(DetectError::Missing(format!(
                    "--api {}: {} has no POST {} ({}); pick an API it serves, or --api auto",
                    api.name(),
                    endpoint.display(),
                    api.path(),
                    answer.why()
                )));
            }
            Ok(Picked {
                api,
                why: String::new(),
            })
        }
    }
}

/// How often a check waiting on a server looks for a stop.
const STOP_POLL: Duration = Duration::from_millis(10);

/// `resolve` on every endpoint before the run starts (on a runtime of its own): they must
/// agree, as the run sends the same requests to each. A server that is slow to answer does
/// not hold a signal: `stop` is asked every 10 ms, and `Stopped` returned once it says so.
pub fn resolve_blocking(
    endpoints: &[Endpoint],
    api_key: Option<&str>,
    extra: &super::super::extra::Extra,
    api: Api,
    stop: &dyn Fn() -> bool,
) -> Result<Picked, DetectError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| DetectError::Failed(format!("cannot start the http client runtime: {e}")))?;
    rt.block_on(async {
        let client = extra.client().build().map_err(|e| {
            DetectError::Failed(format!("cannot build the http client: {}", http_error(e)))
        })?;
        let all = async {
            let mut picked: Option<Picked> = None;
            for e in endpoints {
                let p = resolve(&client, e, api_key, api).await?;
                if let Some(first) = &picked {
                    if first.api != p.api {
                        return Err(DetectError::Missing(format!(
                            "--api {}: {} speaks {} but {} speaks {}; give --api",
                            api.name(),
                            endpoints[0].display(),
                            first.api.name(),
                            e.display(),
                            p.api.name()
                        )));
                    }
                } else {
                    picked = Some(p);
                }
            }
            picked.ok_or_else(|| DetectError::Failed("no --endpoint given".into()))
        };
        let stopped = async {
            while !stop() {
                tokio::time::sleep(STOP_POLL).await;
            }
        };
        tokio::select! {
            picked = all => picked,
            _ = stopped => Err(DetectError::Stopped),
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn only_404_and_405_say_a_route_is_missing() {
        assert!(lacks(StatusCode::NOT_FOUND) && lacks(StatusCode::METHOD_NOT_ALLOWED));
        // A server refusing the empty body, the key, or failing on it has the route.
        for status in [200, 400, 401, 422, 500] {
            assert!(!lacks(StatusCode::from_u16(status).unwrap()), "{status}");
        }
    }

    #[test]
    fn the_models_list_says_what_it_can() {
        let anthropic = json!({"data":[{"type":"model","id":"claude-x","display_name":"Claude"}],"has_more":false});
        assert_eq!(from_models(&anthropic).unwrap().api, Api::Messages);
        let embed = json!({"data":[{"id":"m","capabilities":["embed"]}]});
        assert_eq!(from_models(&embed).unwrap().api, Api::Embeddings);
        let rerank = json!({"data":[{"id":"bge-reranker-v2-m3","object":"model"}]});
        assert_eq!(from_models(&rerank).unwrap().api, Api::Rerank);
        let by_name = json!({"data":[{"id":"e5-embed","object":"model"}]});
        assert_eq!(from_models(&by_name).unwrap().api, Api::Embeddings);
        let vllm = json!({"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","max_model_len":4096}]});
        assert!(from_models(&vllm).is_none());
        let generates = json!({"data":[{"id":"embedder-chat","capabilities":["chat","embed"]}]});
        assert!(from_models(&generates).is_none());
    }
}
