//! OpenAI's Responses API (`POST /v1/responses`, `stream: true`): the input as a string or as
//! items (messages, function calls and their outputs), the tools flattened
//! (`{"type":"function","name",…}`), and a stream of typed events, each `data:` line naming
//! its own `type`: `response.output_text.delta` is answer text, `response.reasoning_text.delta`
//! and `response.reasoning_summary_text.delta` reasoning, `response.output_item.added` of a
//! `function_call` and `response.function_call_arguments.delta` a tool call, and
//! `response.completed` (or `response.incomplete`) the end, with the usage
//! (`input_tokens`, `output_tokens`, `output_tokens_details.reasoning_tokens`). There is no
//! `[DONE]`.

use serde_json::{json, Value};

use super::{function_of, messages_of, Ask, ToolChoice};
use crate::engine::http::sse::{excerpt, server_error, Chunk, ToolDelta};

/// The request's body.
pub fn body(ask: &Ask) -> Value {
    let input = match &ask.messages {
        None => json!(ask.prompt),
        Some(_) => {
            let mut items = Vec::new();
            for m in messages_of(ask) {
                if m.role == "tool" {
                    items.push(json!({
                        "type": "function_call_output",
                        "call_id": m.tool_call_id.clone().unwrap_or_default(),
                        "output": m.content,
                    }));
                    continue;
                }
                if !m.content.is_empty() || m.tool_calls.is_empty() {
                    items.push(json!({"role": m.role, "content": m.content}));
                }
                for c in &m.tool_calls {
                    items.push(json!({
                        "type": "function_call", "call_id": c.id,
                        "name": c.name, "arguments": c.arguments,
                    }));
                }
            }
            Value::Array(items)
        }
    };
    let mut b = json!({
        "model": ask.model,
        "input": input,
        "max_output_tokens": ask.output_tokens,
        "stream": true,
        "temperature": 0,
    });
    if let Some(tools) = &ask.tools {
        if !tools.defs.is_empty() {
            let defs: Vec<Value> = tools
                .defs
                .iter()
                .map(|d| {
                    let (name, description, parameters) = function_of(d);
                    json!({"type": "function", "name": name,
                           "description": description, "parameters": parameters})
                })
                .collect();
            b["tools"] = Value::Array(defs);
        }
        if let Some(choice) = &tools.choice {
            b["tool_choice"] = match choice {
                ToolChoice::Named(name) => json!({"type": "function", "name": name}),
                other => json!(other.name()),
            };
        }
    }
    b
}

fn count(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

fn index(v: &Value) -> usize {
    count(v.get("output_index")).unwrap_or(0)
}

/// One event's `data:` payload.
pub fn decode(payload: &str) -> Result<Chunk, String> {
    let v: Value = serde_json::from_str(payload)
        .map_err(|e| format!("malformed JSON in SSE data ({e}): {}", excerpt(payload, 80)))?;
    let Some(kind) = v.get("type").and_then(Value::as_str) else {
        return Err(format!(
            "not a Responses API event (no `type`): {}",
            excerpt(payload, 80)
        ));
    };
    let delta = || {
        v.get("delta")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut chunk = Chunk::default();
    match kind {
        "response.output_text.delta" | "response.refusal.delta" => chunk.text = delta(),
        "response.reasoning_text.delta"
        | "response.reasoning_summary_text.delta"
        | "response.reasoning.delta" => chunk.reasoning = delta(),
        "response.output_item.added" => {
            let item = v.get("item").unwrap_or(&Value::Null);
            if item.get("type").and_then(Value::as_str) == Some("function_call") {
                let s = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
                chunk.tool_calls.push(ToolDelta {
                    index: index(&v),
                    id: s("call_id").or_else(|| s("id")),
                    name: s("name"),
                    arguments: s("arguments").unwrap_or_default(),
                });
            }
        }
        "response.function_call_arguments.delta" => chunk.tool_calls.push(ToolDelta {
            index: index(&v),
            arguments: delta(),
            ..ToolDelta::default()
        }),
        "response.completed" | "response.incomplete" => {
            let r = v.get("response").unwrap_or(&Value::Null);
            if let Some(u) = r.get("usage") {
                chunk.prompt_tokens = count(u.get("input_tokens"));
                chunk.completion_tokens = count(u.get("output_tokens"));
                chunk.cached_tokens = count(
                    u.get("input_tokens_details")
                        .and_then(|d| d.get("cached_tokens")),
                );
                chunk.reasoning_tokens = count(
                    u.get("output_tokens_details")
                        .and_then(|d| d.get("reasoning_tokens")),
                );
            }
            let last = r
                .get("output")
                .and_then(Value::as_array)
                .and_then(|o| o.last())
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str);
            chunk.finish_reason = Some(
                if last == Some("function_call") {
                    "tool_calls"
                } else if kind == "response.incomplete" {
                    "length"
                } else {
                    "stop"
                }
                .to_string(),
            );
            chunk.done = true;
        }
        "response.failed" => {
            let err = v
                .get("response")
                .and_then(|r| r.get("error"))
                .cloned()
                .unwrap_or(Value::Null);
            return Err(server_error(&err));
        }
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
    fn events_read_as_text_reasoning_tool_calls_and_the_end() {
        let r = decode(r#"{"type":"response.reasoning_text.delta","delta":"hm"}"#).unwrap();
        assert_eq!(r.reasoning, "hm");
        let t = decode(r#"{"type":"response.output_text.delta","output_index":1,"delta":"Hi"}"#)
            .unwrap();
        assert_eq!(t.text, "Hi");
        let f = decode(r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","call_id":"c9","name":"get","arguments":""}}"#).unwrap();
        assert_eq!(f.tool_calls[0].name.as_deref(), Some("get"));
        let a = decode(
            r#"{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{}"}"#,
        )
        .unwrap();
        assert_eq!(
            (a.tool_calls[0].index, a.tool_calls[0].arguments.as_str()),
            (2, "{}")
        );
        let end = decode(r#"{"type":"response.completed","response":{"status":"completed","output":[{"type":"message"},{"type":"function_call"}],"usage":{"input_tokens":12,"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"input_tokens_details":{"cached_tokens":4}}}}"#).unwrap();
        assert!(end.done && !end.is_output());
        assert_eq!(
            (
                end.prompt_tokens,
                end.completion_tokens,
                end.reasoning_tokens,
                end.cached_tokens
            ),
            (Some(12), Some(30), Some(20), Some(4))
        );
        assert_eq!(end.finish_reason.as_deref(), Some("tool_calls"));
        let created = decode(r#"{"type":"response.created","response":{}}"#).unwrap();
        assert!(!created.is_output() && !created.done);
        let err = decode(r#"{"type":"error","message":"overloaded"}"#).unwrap_err();
        assert!(err.contains("overloaded"), "{err}");
        assert!(decode(r#"{"no":"type"}"#).is_err());
    }

    #[test]
    fn bodies_carry_items_and_flat_tools() {
        let call = ToolCall {
            id: "c1".into(),
            name: "get".into(),
            arguments: "{}".into(),
        };
        let ask = Ask {
            api: Api::Responses,
            messages: Some(vec![
                Message::new("user", "q"),
                Message::assistant(String::new(), vec![call.clone()]),
                Message::tool_result(&call, "42".into()),
            ]),
            tools: Some(std::sync::Arc::new(Tools {
                defs: vec![json!({"type":"function","function":{"name":"get"}})],
                choice: Some(ToolChoice::Required),
            })),
            output_tokens: 8,
            ..Ask::default()
        };
        let b = body(&ask);
        assert_eq!(b["max_output_tokens"], 8);
        assert_eq!(b["input"][1]["type"], "function_call");
        assert_eq!(b["input"][2]["type"], "function_call_output");
        assert_eq!(b["tools"][0]["name"], "get");
        assert_eq!(b["tool_choice"], "required");
    }
}
