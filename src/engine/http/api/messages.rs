//! Anthropic's Messages API (`POST /v1/messages`, `stream: true`, the key as `x-api-key` with an
//! `anthropic-version`): system text apart from the messages, tools as
//! `{"name","description","input_schema"}`, tool calls as `tool_use` blocks and their results
//! as `tool_result` blocks of a user message. The stream is typed events: `message_start`
//! (the prompt's usage), `content_block_start` (a `tool_use` block names its tool), deltas of
//! `text_delta` (answer), `thinking_delta` (reasoning) and `input_json_delta` (a tool call's
//! arguments), `message_delta` (the stop reason and the output's usage) and `message_stop`, the
//! end. Anthropic does not count thinking tokens apart: they are counted from the stream.

use serde_json::{json, Value};

use super::{function_of, messages_of, Ask, ToolChoice};
use crate::engine::http::sse::{excerpt, server_error, Chunk, ToolDelta};

/// The `anthropic-version` header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The request's body.
pub fn body(ask: &Ask) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in messages_of(ask) {
        match m.role.as_str() {
            "system" => system.push(m.content.clone()),
            "tool" => {
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                });
                // Results of one turn's calls go together in one user message.
                let joined = messages.last_mut().filter(|last| {
                    last["role"] == "user"
                        && last["content"]
                            .as_array()
                            .and_then(|c| c.first())
                            .is_some_and(|b| b["type"] == "tool_result")
                });
                match joined.and_then(|last| last["content"].as_array_mut()) {
                    Some(blocks) => blocks.push(block),
                    None => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
            role => {
                if m.tool_calls.is_empty() {
                    messages.push(json!({"role": role, "content": m.content}));
                    continue;
                }
                let mut blocks = Vec::new();
                if !m.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    let input: Value = serde_json::from_str(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                messages.push(json!({"role": role, "content": blocks}));
            }
        }
    }
    let mut b = json!({
        "model": ask.model,
        "max_tokens": ask.output_tokens,
        "messages": messages,
        "stream": true,
        "temperature": 0,
    });
    if !system.is_empty() {
        b["system"] = json!(system.join("\n\n"));
    }
    if let Some(tools) = &ask.tools {
        if !tools.defs.is_empty() {
            let defs: Vec<Value> = tools
                .defs
                .iter()
                .map(|d| {
                    let (name, description, parameters) = function_of(d);
                    let mut t = json!({"name": name, "input_schema": parameters});
                    if !description.is_null() {
                        t["description"] = description;
                    }
                    t
                })
                .collect();
            b["tools"] = Value::Array(defs);
        }
        if let Some(choice) = &tools.choice {
            b["tool_choice"] = match choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
            };
        }
    }
    b
}

fn count(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// One event's `data:` payload.
pub fn decode(payload: &str) -> Result<Chunk, String> {
    let v: Value = serde_json::from_str(payload)
        .map_err(|e| format!("malformed JSON in SSE data ({e}): {}", excerpt(payload, 80)))?;
    let Some(kind) = v.get("type").and_then(Value::as_str) else {
        return Err(format!(
            "not a Messages API event (no `type`): {}",
            excerpt(payload, 80)
        ));
    };
    let index = count(v.get("index")).unwrap_or(0);
    let mut chunk = Chunk::default();
    match kind {
        "message_start" => {
            if let Some(u) = v.get("message").and_then(|m| m.get("usage")) {
                let input = count(u.get("input_tokens"));
                let read = count(u.get("cache_read_input_tokens"));
                let created = count(u.get("cache_creation_input_tokens"));
                // Anthropic's input_tokens leave out what the cache read or wrote.
                chunk.prompt_tokens = input.map(|n| n + read.unwrap_or(0) + created.unwrap_or(0));
                chunk.cached_tokens = read;
            }
        }
        "content_block_start" => {
            let block = v.get("content_block").unwrap_or(&Value::Null);
            let s = |k: &str| block.get(k).and_then(Value::as_str).map(str::to_string);
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => chunk.tool_calls.push(ToolDelta {
                    index,
                    id: s("id"),
                    name: s("name"),
                    arguments: String::new(),
                }),
                Some("text") => chunk.text = s("text").unwrap_or_default(),
                Some("thinking") => chunk.reasoning = s("thinking").unwrap_or_default(),
                _ => {}
            }
        }
        "content_block_delta" => {
            let d = v.get("delta").unwrap_or(&Value::Null);
            let s = |k: &str| {
                d.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            match d.get("type").and_then(Value::as_str) {
                Some("text_delta") => chunk.text = s("text"),
                Some("thinking_delta") => chunk.reasoning = s("thinking"),
                Some("input_json_delta") => chunk.tool_calls.push(ToolDelta {
                    index,
                    arguments: s("partial_json"),
                    ..ToolDelta::default()
                }),
                _ => {}
            }
        }
        "message_delta" => {
            chunk.completion_tokens = v.get("usage").and_then(|u| count(u.get("output_tokens")));
            chunk.finish_reason = v
                .get("delta")
                .and_then(|d| d.get("stop_reason"))
                .and_then(Value::as_str)
                .map(|r| {
                    match r {
                        "tool_use" => "tool_calls",
                        "max_tokens" => "length",
                        "end_turn" | "stop_sequence" => "stop",
                        other => other,
                    }
                    .to_string()
                });
        }
        "message_stop" => chunk.done = true,
        "error" => return Err(server_error(v.get("error").unwrap_or(&v))),
        _ => {}
    }
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::engine::http::api::{Api, Message, ToolCall, Tools};

    #[test]
    fn events_read_as_thinking_text_tool_use_and_the_end() {
        let start = decode(r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":6,"output_tokens":1}}}"#).unwrap();
        assert_eq!(
            (start.prompt_tokens, start.cached_tokens),
            (Some(16), Some(6))
        );
        assert!(!start.is_output());
        let think = decode(r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#).unwrap();
        assert_eq!(think.reasoning, "hm");
        let text = decode(
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#,
        )
        .unwrap();
        assert_eq!(text.text, "Hi");
        let tool = decode(r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get","input":{}}}"#).unwrap();
        assert_eq!(tool.tool_calls[0].id.as_deref(), Some("toolu_1"));
        let args = decode(r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#).unwrap();
        assert_eq!(args.tool_calls[0].arguments, "{\"a\":");
        let sig = decode(r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#).unwrap();
        assert!(!sig.is_output());
        let delta = decode(r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#).unwrap();
        assert_eq!(
            (delta.finish_reason.as_deref(), delta.completion_tokens),
            (Some("tool_calls"), Some(42))
        );
        assert!(decode(r#"{"type":"message_stop"}"#).unwrap().done);
        assert!(!decode(r#"{"type":"ping"}"#).unwrap().is_output());
        let err = decode(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap_err();
        assert!(err.contains("Overloaded"), "{err}");
    }

    #[test]
    fn bodies_put_system_apart_and_tool_results_in_user_blocks() {
        let call = ToolCall {
            id: "t1".into(),
            name: "get".into(),
            arguments: r#"{"city":"Oslo"}"#.into(),
        };
        let ask = Ask {
            api: Api::Messages,
            messages: Some(vec![
                Message::new("system", "be brief"),
                Message::new("user", "weather?"),
                Message::assistant("let me see".into(), vec![call.clone()]),
                Message::tool_result(&call, "sunny".into()),
            ]),
            tools: Some(std::sync::Arc::new(Tools {
                defs: vec![
                    json!({"type":"function","function":{"name":"get","parameters":{"type":"object"}}}),
                ],
                choice: Some(ToolChoice::Named("get".into())),
            })),
            output_tokens: 16,
            ..Ask::default()
        };
        let b = body(&ask);
        assert_eq!(b["system"], "be brief");
        assert_eq!(b["messages"][1]["content"][1]["type"], "tool_use");
        assert_eq!(b["messages"][1]["content"][1]["input"]["city"], "Oslo");
        assert_eq!(b["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(b["tool_choice"]["type"], "tool");
        assert_eq!(b["max_tokens"], 16);
    }
}
