//! The pooling APIs, not streamed: `POST /v1/embeddings` (`input`: the batch's texts) and
//! `POST /v1/rerank` (vLLM's, Cohere's and Jina's shape: a `query` and `documents`). A
//! request's latency is its whole response (its TTFT and E2E are the same time: there is no
//! token before the last), its batch the inputs it carried, its prompt tokens the server's
//! usage. What came back is checked (one vector per input; ranks of the given documents) and
//! digested for `compare` (the vectors' shape; the ranking).

use serde_json::{json, Value};

use super::{Api, Ask};
use crate::engine::http::sse::{excerpt, server_error};

/// The request's body.
pub fn body(ask: &Ask) -> Value {
    match ask.api {
        Api::Rerank => json!({"model": ask.model, "query": ask.prompt, "documents": ask.inputs}),
        _ => json!({"model": ask.model, "input": ask.inputs, "encoding_format": "float"}),
    }
}

/// What a pooling response said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pooled {
    /// The server's `usage.prompt_tokens` (or `total_tokens`, all a rerank has).
    pub prompt_tokens: Option<usize>,
    /// Vectors or ranks returned.
    pub items: usize,
    /// `8×1024` (vectors × dimensions), or the ranking (`2,0,1`).
    pub digest: String,
}

/// Reads the body of a pooling response of `api` to a request of `inputs` inputs.
pub fn parse(api: Api, inputs: usize, body: &[u8]) -> Result<Pooled, String> {
    let text = String::from_utf8_lossy(body);
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the response is not JSON ({e}): {}", excerpt(&text, 80)))?;
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(server_error(err));
    }
    let usage = v.get("usage");
    let tokens = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let prompt_tokens = tokens("prompt_tokens").or_else(|| tokens("total_tokens"));
    match api {
        Api::Rerank => {
            let Some(results) = v.get("results").and_then(Value::as_array) else {
                return Err(format!(
                    "a rerank response without `results`: {}",
                    excerpt(&text, 80)
                ));
            };
            let ranks: Vec<String> = results
                .iter()
                .map(|r| {
                    r.get("index")
                        .and_then(Value::as_u64)
                        .map_or("?".into(), |i| i.to_string())
                })
                .collect();
            if results.len() > inputs {
                return Err(format!("{} ranks for {inputs} documents", results.len()));
            }
            Ok(Pooled {
                prompt_tokens,
                items: results.len(),
                digest: ranks.join(","),
            })
        }
        _ => {
            let Some(data) = v.get("data").and_then(Value::as_array) else {
                return Err(format!(
                    "an embeddings response without `data`: {}",
                    excerpt(&text, 80)
                ));
            };
            if data.len() != inputs {
                return Err(format!("{} embeddings for {inputs} inputs", data.len()));
            }
            let dims = data
                .first()
                .and_then(|d| d.get("embedding"))
                .map_or(0, |e| e.as_array().map_or(1, Vec::len));
            Ok(Pooled {
                prompt_tokens,
                items: data.len(),
                digest: format!("{}×{dims}", data.len()),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn embeddings_and_ranks_are_checked_and_digested() {
        let e = br#"{"object":"list","data":[{"embedding":[0.1,0.2,0.3]},{"embedding":[0.0,1.0,0.5]}],"usage":{"prompt_tokens":14,"total_tokens":14}}"#;
        let p = parse(Api::Embeddings, 2, e).unwrap();
        assert_eq!(
            (p.prompt_tokens, p.items, p.digest.as_str()),
            (Some(14), 2, "2×3")
        );
        assert!(parse(Api::Embeddings, 3, e)
            .unwrap_err()
            .contains("2 embeddings for 3"));
        let r = br#"{"results":[{"index":2,"relevance_score":0.9},{"index":0,"relevance_score":0.1}],"usage":{"total_tokens":30}}"#;
        let p = parse(Api::Rerank, 3, r).unwrap();
        assert_eq!((p.prompt_tokens, p.digest.as_str()), (Some(30), "2,0"));
        assert!(parse(Api::Rerank, 3, b"{\"error\":{\"message\":\"no\"}}").is_err());
        assert!(parse(Api::Embeddings, 1, b"<html>").is_err());
    }

    #[test]
    fn bodies_carry_the_batch() {
        let ask = Ask {
            api: Api::Rerank,
            prompt: "q".into(),
            inputs: vec!["a".into(), "b".into()],
            ..Ask::default()
        };
        assert_eq!(body(&ask)["documents"][1], "b");
        let ask = Ask {
            api: Api::Embeddings,
            ..ask
        };
        assert_eq!(body(&ask)["input"][0], "a");
    }
}
