//! Server-sent events as OpenAI-compatible servers stream them, and what one chunk says.
//!
//! Every such server sends one JSON object per `data:` line and ends with `data: [DONE]`, so
//! each `data:` line is one payload (multi-line events are not used by any of them). Comments
//! (`:`), `event:`, `id:` and `retry:` lines and blank lines carry nothing we time.

use std::borrow::Cow;

use serde_json::Value;

/// Longest line accepted before the stream is called malformed (a server bug or not SSE).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// One `data:` payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    Json(String),
    Done,
}

/// Splits a byte stream into `data:` payloads, whatever the network's chunk boundaries.
#[derive(Debug, Default)]
pub struct SseLines {
    buf: Vec<u8>,
    /// Lines that were neither a known field, a comment nor blank.
    pub unknown_lines: usize,
    /// The first such line (shortened), for the failure reason.
    pub first_unknown: Option<String>,
}

impl SseLines {
    pub fn new() -> SseLines {
        SseLines::default()
    }

    /// Feeds bytes; pushes every complete payload onto `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Data>) -> Result<(), String> {
        // Taken out while its lines are read (they borrow it), put back with the partial line.
        let mut buf = std::mem::take(&mut self.buf);
        buf.extend_from_slice(bytes);
        let mut start = 0;
        let mut result = Ok(());
        while let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let mut line = &buf[start..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            start = end + 1;
            match std::str::from_utf8(line) {
                Ok(line) => {
                    if let Some(d) = self.line(line) {
                        out.push(d);
                    }
                }
                Err(_) => {
                    result = Err("malformed SSE: a line is not UTF-8".to_string());
                    break;
                }
            }
        }
        buf.drain(..start);
        self.buf = buf;
        result?;
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(format!(
                "malformed SSE: a line longer than {} MiB",
                MAX_LINE_BYTES >> 20
            ));
        }
        Ok(())
    }

    /// The end of the stream: a last line without a newline still counts.
    pub fn finish(&mut self, out: &mut Vec<Data>) -> Result<(), String> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let rest = std::mem::take(&mut self.buf);
        let line = std::str::from_utf8(&rest)
            .map_err(|_| "malformed SSE: a line is not UTF-8".to_string())?;
        if let Some(d) = self.line(line.trim_end_matches('\r')) {
            out.push(d);
        }
        Ok(())
    }

    fn line(&mut self, line: &str) -> Option<Data> {
        if line.is_empty() || line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => Some(if value.trim() == "[DONE]" {
                Data::Done
            } else {
                Data::Json(value.to_string())
            }),
            "event" | "id" | "retry" => None,
            _ => {
                self.unknown_lines += 1;
                if self.first_unknown.is_none() {
                    self.first_unknown = Some(excerpt(line, 60));
                }
                None
            }
        }
    }
}

/// What one chunk of a streamed completion says (or one event of another API's stream, read
/// into the same fields: see `api`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    /// Generated answer text (completion text, chat content). A chunk with no text, no
    /// reasoning and no tool call (role only, empty, usage only) is not a token.
    pub text: String,
    /// Generated reasoning (`reasoning_content`, `reasoning`; a thinking block).
    pub reasoning: String,
    /// Fragments of tool calls (`delta.tool_calls`): output, as text is.
    pub tool_calls: Vec<ToolDelta>,
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens the server's prefix cache
    /// held (vLLM, SGLang, OpenAI).
    pub cached_tokens: Option<usize>,
    /// `usage.completion_tokens_details.reasoning_tokens`: the server's count of reasoning.
    pub reasoning_tokens: Option<usize>,
    /// The stream's end as the API says it without `[DONE]` (Responses' `response.completed`,
    /// Messages' `message_stop`).
    pub done: bool,
    /// The server's own timings of the request (`timings::read`), on the chunk that carried
    /// them (vLLM: the final usage chunk).
    pub server: Option<crate::event::ServerTimings>,
    /// The chunk carried a choice (a delta of the output, perhaps empty), not only usage.
    pub has_choice: bool,
    /// Token ids the chunk's choices carried (vLLM's `token_ids`, llama.cpp's `tokens`):
    /// exactly its tokens, whatever their text.
    pub token_ids: Option<usize>,
    /// The server's running count of generated tokens in its timings (llama.cpp's
    /// `timings.predicted_n`, in every chunk with `timings_per_token`).
    pub predicted_tokens: Option<usize>,
}

impl Chunk {
    /// Whether the chunk carried generated text of any kind (reasoning, answer, a tool call).
    pub fn is_output(&self) -> bool {
        !self.text.is_empty() || !self.reasoning.is_empty() || !self.tool_calls.is_empty()
    }
}

/// A piece of a streamed tool call: the call's position in the output, and what this chunk
/// adds (its id and name come first, its arguments in pieces).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// The fields of a chunk that matter, borrowed from the payload where no escape forces a copy:
/// the common case, read without building a map of every field.
#[derive(serde::Deserialize)]
struct Typed<'a> {
    #[serde(default, borrow)]
    choices: Vec<TypedChoice<'a>>,
    #[serde(default)]
    usage: Option<TypedUsage>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    // A server's own timings (vLLM, llama.cpp, SGLang): absent from all but a last chunk.
    #[serde(default)]
    metrics: Option<Value>,
    #[serde(default)]
    timings: Option<Value>,
    #[serde(default)]
    meta_info: Option<Value>,
}

#[derive(serde::Deserialize)]
struct TypedChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    /// vLLM's `token_ids` (`return_token_ids`), llama.cpp's `tokens`: counted, not kept.
    #[serde(default)]
    token_ids: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    tokens: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default, borrow)]
    delta: Option<TypedDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct TypedDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<TypedToolCall<'a>>>,
}

#[derive(serde::Deserialize)]
struct TypedToolCall<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<TypedFunction<'a>>,
}

#[derive(serde::Deserialize)]
struct TypedFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct TypedUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<TypedDetails>,
    #[serde(default)]
    completion_tokens_details: Option<TypedOutputDetails>,
}

#[derive(serde::Deserialize)]
struct TypedDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(serde::Deserialize)]
struct TypedOutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// Reads one `data:` JSON payload of `/v1/completions` or `/v1/chat/completions`. A chunk of
/// the usual shape takes the typed path; anything else (an error object, a field of an odd
/// type, not an object, not JSON) is read as a JSON value, which decides what it means.
pub fn parse_chunk(payload: &str) -> Result<Chunk, String> {
    match serde_json::from_str::<Typed>(payload) {
        Ok(t) if t.error.is_none() => Ok(typed_chunk(t)),
        _ => parse_value(payload),
    }
}

fn count(n: Option<u64>) -> Option<usize> {
    n.and_then(|n| usize::try_from(n).ok())
}

/// llama.cpp's running count of generated tokens in a chunk's `timings`.
fn predicted(timings: Option<&Value>) -> Option<usize> {
    timings?
        .get("predicted_n")?
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
}

fn typed_chunk(t: Typed) -> Chunk {
    let mut chunk = Chunk {
        server: super::timings::read(t.metrics.as_ref(), t.timings.as_ref(), t.meta_info.as_ref()),
        predicted_tokens: predicted(t.timings.as_ref()),
        has_choice: !t.choices.is_empty(),
        ..Chunk::default()
    };
    if let Some(u) = t.usage {
        chunk.prompt_tokens = count(u.prompt_tokens);
        chunk.completion_tokens = count(u.completion_tokens);
        chunk.cached_tokens = count(u.prompt_tokens_details.and_then(|d| d.cached_tokens));
        chunk.reasoning_tokens =
            count(u.completion_tokens_details.and_then(|d| d.reasoning_tokens));
    }
    for choice in t.choices {
        if let Some(ids) = choice.token_ids.as_ref().or(choice.tokens.as_ref()) {
            *chunk.token_ids.get_or_insert(0) += ids.len();
        }
        let (content, reasoning_content, reasoning, tools) = match choice.delta {
            Some(d) => (d.content, d.reasoning_content, d.reasoning, d.tool_calls),
            None => (None, None, None, None),
        };
        for part in [choice.text, content].into_iter().flatten() {
            chunk.text.push_str(&part);
        }
        for part in [reasoning_content, reasoning].into_iter().flatten() {
            chunk.reasoning.push_str(&part);
        }
        for (i, call) in tools.into_iter().flatten().enumerate() {
            let (name, arguments) = match call.function {
                Some(f) => (f.name, f.arguments),
                None => (None, None),
            };
            chunk.tool_calls.push(ToolDelta {
                index: call
                    .index
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(i),
                id: call.id.map(Cow::into_owned),
                name: name.map(Cow::into_owned),
                arguments: arguments.map(Cow::into_owned).unwrap_or_default(),
            });
        }
        if let Some(r) = choice.finish_reason {
            chunk.finish_reason = Some(r.into_owned());
        }
    }
    chunk
}

fn parse_value(payload: &str) -> Result<Chunk, String> {
    let v: Value = serde_json::from_str(payload)
        .map_err(|e| format!("malformed JSON in SSE data ({e}): {}", excerpt(payload, 80)))?;
    let Some(obj) = v.as_object() else {
        return Err(format!(
            "malformed chunk (not a JSON object): {}",
            excerpt(payload, 80)
        ));
    };
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        return Err(server_error(err));
    }
    let mut chunk = Chunk {
        server: super::timings::read(obj.get("metrics"), obj.get("timings"), obj.get("meta_info")),
        predicted_tokens: predicted(obj.get("timings")),
        ..Chunk::default()
    };
    if let Some(usage) = obj.get("usage").and_then(Value::as_object) {
        let count = |v: Option<&Value>| {
            v.and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
        };
        chunk.prompt_tokens = count(usage.get("prompt_tokens"));
        chunk.completion_tokens = count(usage.get("completion_tokens"));
        chunk.cached_tokens = count(
            usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        );
        chunk.reasoning_tokens = count(
            usage
                .get("completion_tokens_details")
                .and_then(|d| d.get("reasoning_tokens")),
        );
    }
    if let Some(choices) = obj.get("choices").and_then(Value::as_array) {
        chunk.has_choice = !choices.is_empty();
        for choice in choices {
            let ids = choice.get("token_ids").or_else(|| choice.get("tokens"));
            if let Some(ids) = ids.and_then(Value::as_array) {
                *chunk.token_ids.get_or_insert(0) += ids.len();
            }
            let delta = choice.get("delta");
            fn text(v: Option<&Value>) -> &str {
                v.and_then(Value::as_str).unwrap_or_default()
            }
            for part in [choice.get("text"), delta.and_then(|d| d.get("content"))] {
                chunk.text.push_str(text(part));
            }
            for part in [
                delta.and_then(|d| d.get("reasoning_content")),
                delta.and_then(|d| d.get("reasoning")),
            ] {
                chunk.reasoning.push_str(text(part));
            }
            let calls = delta
                .and_then(|d| d.get("tool_calls"))
                .and_then(Value::as_array);
            for (i, call) in calls.into_iter().flatten().enumerate() {
                let f = call.get("function");
                let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
                chunk.tool_calls.push(ToolDelta {
                    index: call
                        .get("index")
                        .and_then(Value::as_u64)
                        .and_then(|n| usize::try_from(n).ok())
                        .unwrap_or(i),
                    id: s(call.get("id")),
                    name: s(f.and_then(|f| f.get("name"))),
                    arguments: s(f.and_then(|f| f.get("arguments"))).unwrap_or_default(),
                });
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                chunk.finish_reason = Some(r.to_string());
            }
        }
    }
    Ok(chunk)
}

/// A server's error object (`{"error": {"message": …}}` or a plain string) as one line.
pub fn server_error(err: &Value) -> String {
    let msg = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    format!("server error in stream: {}", excerpt(&msg, 120))
}

/// The first `max` characters of `s` on one line, with `…` when cut.
pub fn excerpt(s: &str, max: usize) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one = one.trim();
    match one.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(parts: &[&[u8]]) -> (Vec<Data>, SseLines) {
        let mut p = SseLines::new();
        let mut out = Vec::new();
        for part in parts {
            p.feed(part, &mut out).unwrap();
        }
        p.finish(&mut out).unwrap();
        (out, p)
    }

    #[test]
    fn payloads_survive_any_split() {
        let text =
            b"data: {\"a\":1}\r\n\r\n: keepalive\nevent: x\ndata:{\"b\":2}\n\ndata: [DONE]\n\n";
        let whole = feed_all(&[text]).0;
        assert_eq!(
            whole,
            vec![
                Data::Json("{\"a\":1}".into()),
                Data::Json("{\"b\":2}".into()),
                Data::Done
            ]
        );
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(feed_all(&[a, b]).0, whole, "split at {cut}");
        }
    }

    #[test]
    fn garbage_lines_are_counted_and_bad_bytes_refused() {
        let (out, p) = feed_all(&[b"HTTP garbage\n<html>\n"]);
        assert!(out.is_empty());
        assert_eq!(p.unknown_lines, 2);
        let mut p = SseLines::new();
        assert!(p.feed(b"data: \xff\xfe\n", &mut Vec::new()).is_err());
    }

    #[test]
    fn chunks_say_what_they_carry() {
        let role = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
        assert_eq!(parse_chunk(role).unwrap().text, "");
        let chat = r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#;
        assert_eq!(parse_chunk(chat).unwrap().text, "Hi");
        let comp = r#"{"choices":[{"index":0,"text":" the","finish_reason":"length"}]}"#;
        let c = parse_chunk(comp).unwrap();
        assert_eq!(
            (c.text.as_str(), c.finish_reason.as_deref()),
            (" the", Some("length"))
        );
        let usage =
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}"#;
        let u = parse_chunk(usage).unwrap();
        assert_eq!(
            (u.text.as_str(), u.prompt_tokens, u.completion_tokens),
            ("", Some(7), Some(5))
        );
        assert!(parse_chunk("{not json").is_err());
        assert!(parse_chunk("[1,2]").is_err());
        let err = parse_chunk(r#"{"error":{"message":"overloaded"}}"#).unwrap_err();
        assert!(err.contains("overloaded"), "{err}");
    }

    #[test]
    fn the_typed_path_reads_what_the_value_path_reads() {
        let payloads = [
            r#"{"id":"x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"role":"assistant","content":"a\nb\u00e9\"q\""},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"think","content":null}}],"usage":null}"#,
            r#"{"choices":[{"delta":{"reasoning":"r"}},{"text":"two"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":"x"}]}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":20}}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7.5,"completion_tokens":3}}"#,
            r#"{"choices":[{"text":5,"finish_reason":"length"}]}"#,
            r#"{"choices":{"text":"not a list"}}"#,
            r#"{"choices":[{"text":"x","finish_reason":"stop"}],"error":null}"#,
            r#"{"error":"plain"}"#,
            r#"{"usage":{"prompt_tokens":-1}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3},"metrics":{"queue_time_ms":12.5,"time_to_first_token_ms":30}}"#,
            r#"{"choices":[],"timings":{"prompt_n":5,"prompt_ms":9.5,"cache_n":2,"predicted_ms":40}}"#,
            r#"{"text":"x","meta_info":{"queue_time":0.01,"prefill_launch_latency":0.02}}"#,
            r#"{"choices":[],"metrics":"odd","timings":[1]}"#,
            r#"{}"#,
            r#""a string""#,
            r#"null"#,
        ];
        for p in payloads {
            assert_eq!(parse_chunk(p), parse_value(p), "{p}");
        }
    }

    #[test]
    fn reasoning_answers_and_tool_calls_are_told_apart() {
        let think =
            parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"hm","content":null}}]}"#)
                .unwrap();
        assert_eq!((think.reasoning.as_str(), think.text.as_str()), ("hm", ""));
        assert!(think.is_output());
        let call = parse_chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"get_weather","arguments":"{\"city\""}}]}}]}"#,
        )
        .unwrap();
        assert!(call.is_output() && call.text.is_empty());
        assert_eq!(
            call.tool_calls,
            vec![ToolDelta {
                index: 0,
                id: Some("c1".into()),
                name: Some("get_weather".into()),
                arguments: "{\"city\"".into(),
            }]
        );
        let usage = parse_chunk(
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":20}}}"#,
        )
        .unwrap();
        assert_eq!(
            (usage.completion_tokens, usage.reasoning_tokens),
            (Some(30), Some(20))
        );
        assert!(!usage.is_output());
    }

    #[test]
    fn excerpts_are_short_and_one_line() {
        assert_eq!(excerpt("a\nb", 10), "a b");
        assert_eq!(excerpt("ééééé", 3), "ééé…");
    }
}
