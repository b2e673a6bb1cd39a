//! The server's own tokenizer over HTTP (`--tokenizer server`): `/tokenize` as vLLM, llama.cpp's
//! llama-server and TGI serve it, or llama-cpp-python's `/extras/tokenize`. With it infertop
//! finds common words that are one token each in the served model's vocabulary, so that prompts
//! are exactly `-p` tokens, and counts given prompts (`--prompt`, `--prompt-file`) exactly,
//! without a local tokenizer.json.
//!
//! One request body fits them all: each server reads the field it knows (`prompt`, `content`,
//! `inputs`, `input`) and the flag that keeps special tokens out. A server that adds a BOS token
//! anyway adds the same number to every count; that constant is measured (the least count over
//! many common words, which is one for a word of one token) and taken off.

use reqwest::Client;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::request::Endpoint;
use super::sse::excerpt;
use crate::traffic::words::PromptWords;
use crate::util::http_error;

/// The paths tried, in order.
const PATHS: [&str; 2] = ["/tokenize", "/extras/tokenize"];

/// Requests in flight while counting many texts.
const PARALLEL: usize = 16;

/// Common English words (3 to 10 letters): in the usual vocabularies most are one token, with a
/// leading space or without.
const CANDIDATES: &str = "\
the and that have for not with you this but his from they say her she will one all would there \
their what out about who get which when make can like time just him know take people into year \
your good some could them see other than then now look only come its over think also back after \
use two how our work first well way even new want because any these give day most find here \
thing many tell very call hand high keep last long great little own old right big small large \
next early young important public bad same able child world school state family student group \
country problem point home water room mother area money story fact month book eye job word \
business issue side kind head house service friend father power hour game line end member law \
car city community name president team minute idea body information parent face others level \
office door health person art war history party result change morning reason research girl guy \
moment air teacher force education foot boy age policy process music market sense nation plan \
college interest death experience effect class control care field development role effort rate \
heart drug show leader light voice wife police mind price report decision son view relationship \
town road arm difference value building action model season society tax director position \
player record paper space ground form event official matter center couple site project activity \
star table need court oil situation cost industry figure street image phone data picture \
practice piece land product doctor wall patient worker news test movie north love support \
technology step baby computer type attention film tree source organization hair window evidence \
population river summer garden stone bread glass watch";

/// The server's tokenizer, at the path that answered.
pub struct ServerTokenizer {
    client: Client,
    endpoint: Endpoint,
    api_key: Option<String>,
    model: String,
    path: &'static str,
}

impl ServerTokenizer {
    /// Finds the path that counts tokens on `endpoint`, or says why none does.
    pub async fn connect(
        client: &Client,
        endpoint: &Endpoint,
        api_key: Option<&str>,
        model: &str,
    ) -> Result<ServerTokenizer, String> {
        let mut tk = ServerTokenizer {
            client: client.clone(),
            endpoint: endpoint.clone(),
            api_key: api_key.map(str::to_string),
            model: model.to_string(),
            path: PATHS[0],
        };
        let mut why = Vec::new();
        for path in PATHS {
            tk.path = path;
            match tk.count_raw("the river").await {
                Ok(_) => return Ok(tk),
                Err(e) => why.push(format!("{path}: {e}")),
            }
        }
        Err(format!(
            "{} counts no tokens ({})",
            endpoint.display(),
            why.join("; ")
        ))
    }

    /// Tokens the server counts for `text`, special tokens included where it adds them.
    async fn count_raw(&self, text: &str) -> Result<usize, String> {
        let body = json!({
            "model": self.model, "prompt": text, "content": text, "inputs": text, "input": text,
            "add_special_tokens": false, "add_special": false,
        });
        let mut req = self
            .client
            .post(self.endpoint.url(self.path))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(std::time::Duration::from_secs(10));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(http_error)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(http_error)?;
        if !status.is_success() {
            return Err(format!(
                "HTTP {}: {}",
                status.as_u16(),
                excerpt(&String::from_utf8_lossy(&bytes), 80)
            ));
        }
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON ({e})"))?;
        token_count(&v).ok_or_else(|| format!("no token count in {}", excerpt(&v.to_string(), 80)))
    }

    /// Counts every text, `PARALLEL` at a time, in order.
    async fn count_all(&self, texts: &[String]) -> Result<Vec<usize>, String> {
        let mut out = vec![0; texts.len()];
        let mut set = JoinSet::new();
        let mut next = 0;
        while next < texts.len() || !set.is_empty() {
            while next < texts.len() && set.len() < PARALLEL {
                let tk = self.clone_handle();
                let (i, text) = (next, texts[next].clone());
                set.spawn(async move { (i, tk.count_raw(&text).await) });
                next += 1;
            }
            match set.join_next().await {
                Some(Ok((i, Ok(n)))) => out[i] = n,
                Some(Ok((_, Err(e)))) => return Err(e),
                Some(Err(e)) => return Err(e.to_string()),
                None => break,
            }
        }
        Ok(out)
    }

    fn clone_handle(&self) -> ServerTokenizer {
        ServerTokenizer {
            client: self.client.clone(),
            endpoint: self.endpoint.clone(),
            api_key: self.api_key.clone(),
            model: self.model.clone(),
            path: self.path,
        }
    }

    /// Words that are one token each in the server's vocabulary (`PromptWords`), and the
    /// constant the server adds to every count.
    pub async fn prompt_words(&self) -> Result<(PromptWords, usize), String> {
        let mut words: Vec<&str> = CANDIDATES.split_whitespace().collect();
        words.sort_unstable();
        words.dedup();
        let texts: Vec<String> = words
            .iter()
            .flat_map(|w| [w.to_string(), format!(" {w}")])
            .collect();
        let counts = self.count_all(&texts).await?;
        let offset = counts.iter().min().map_or(0, |m| m.saturating_sub(1));
        let (mut plain, mut lead) = (Vec::new(), Vec::new());
        for (i, w) in words.iter().enumerate() {
            if counts[2 * i] == offset + 1 {
                plain.push(w.to_string());
            }
            if counts[2 * i + 1] == offset + 1 {
                lead.push(w.to_string());
            }
        }
        let words = PromptWords::choose(plain, lead)?;
        let probe = self.count_raw(&words.probe()).await?;
        Ok((words.checked(probe.checked_sub(offset))?, offset))
    }

    /// Exact token counts of given prompts, `offset` (from `prompt_words`) taken off.
    pub async fn count_texts(&self, texts: &[String], offset: usize) -> Result<Vec<usize>, String> {
        Ok(self
            .count_all(texts)
            .await?
            .into_iter()
            .map(|n| n.saturating_sub(offset))
            .collect())
    }
}

/// A token count in any of the servers' answers: `{"count": n}` (vLLM), `{"tokens": [...]}`
/// (vLLM, llama.cpp, llama-cpp-python) or a list of tokens (TGI).
fn token_count(v: &Value) -> Option<usize> {
    if let Some(n) = v.get("count").and_then(Value::as_u64) {
        return usize::try_from(n).ok();
    }
    if let Some(tokens) = v.get("tokens").and_then(Value::as_array) {
        return Some(tokens.len());
    }
    v.as_array().map(Vec::len)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_servers_answer_has_a_count() {
        let vllm = json!({"count": 3, "max_model_len": 4096, "tokens": [1, 2, 3]});
        let llama = json!({"tokens": [10, 11]});
        let tgi = json!([{"id": 1, "text": "a", "start": 0, "stop": 1}]);
        assert_eq!(token_count(&vllm), Some(3));
        assert_eq!(token_count(&llama), Some(2));
        assert_eq!(token_count(&tgi), Some(1));
        assert_eq!(token_count(&json!({"error": "no"})), None);
    }

    #[test]
    fn candidates_are_plain_lowercase_words() {
        for w in CANDIDATES.split_whitespace() {
            assert!(
                (3..=12).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase()),
                "{w}"
            );
        }
        let mut distinct: Vec<&str> = CANDIDATES.split_whitespace().collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(
            distinct.len() > 2 * PromptWords::FEWEST,
            "{}",
            distinct.len()
        );
    }
}
