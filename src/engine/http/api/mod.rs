//! The APIs a server is measured through, and what a request looks like in each: OpenAI's
//! completions and chat completions, its Responses API, Anthropic's Messages, and the
//! non-streaming pooling APIs (embeddings, rerank). A request is described once (`Ask`:
//! a prompt or messages, tools, inputs) and written in the API's own terms here (`body`);
//! what comes back is read into one `Chunk` shape per event (`decode`), so the timing loop
//! (`request`) is the same for every streaming API. `detect` picks an API (`--api auto`) and
//! checks that a server has the one asked for.

pub mod detect;
pub mod messages;
pub mod pooling;
pub mod responses;

use std::sync::Arc;

use serde_json::{json, Value};

use super::sse::{parse_chunk, Chunk};

/// What one request asks for.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    pub model: String,
    pub api: Api,
    pub prompt: String,
    /// Chat messages, sent as they are over an API of messages (a dataset's messages, a
    /// conversation's history with its tool calls); `None`: one user message of `prompt`.
    pub messages: Option<Vec<Message>>,
    /// An `X-Session-ID` header (one per conversation, for routers' session affinity).
    pub session: Option<String>,
    pub output_tokens: usize,
    /// Send `ignore_eos` and `min_tokens` so exactly `output_tokens` come back.
    pub exact_output: bool,
    /// Ask for the running usage in every chunk (`stream_options.continuous_usage_stats`, as
    /// vLLM and SGLang take it), so each chunk's token count is known.
    pub chunk_usage: bool,
    /// Ask for the server's timings in every chunk (llama.cpp's `timings_per_token`), whose
    /// running `predicted_n` counts each chunk's tokens.
    pub chunk_timings: bool,
    /// The tools offered (`--tools`, a dataset row's), and the choice.
    pub tools: Option<Arc<Tools>>,
    /// The batch of a pooling API: the texts to embed, or the documents to rank.
    pub inputs: Vec<String>,
    /// `--extra-body` and `--header`.
    pub extra: Arc<super::extra::Extra>,
}

impl Ask {
    /// The body as `api` takes it, with `--extra-body` merged in.
    pub fn body(&self) -> Value {
        let mut b = body(self);
        self.extra.apply(&mut b);
        b
    }
}

/// Which API to measure through (`--api`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Api {
    /// `/v1/completions` with a prompt.
    #[default]
    Completions,
    /// `/v1/chat/completions` with one user message (the chat template adds prompt tokens).
    Chat,
    /// OpenAI's Responses API (`/v1/responses`), streamed as typed events.
    Responses,
    /// Anthropic's Messages API (`/v1/messages`, `x-api-key` and `anthropic-version`).
    Messages,
    /// `/v1/embeddings`, not streamed: `--batch N` inputs per request.
    Embeddings,
    /// `/v1/rerank`, not streamed: the prompt as the query, `--batch N` documents.
    Rerank,
    /// Picked from the server: what `/v1/models` says, else the first API route it answers.
    Auto,
}

impl Api {
    /// Every API a request can go out through (`Auto` resolves to one of these).
    pub const CONCRETE: [Api; 6] = [
        Api::Chat,
        Api::Completions,
        Api::Responses,
        Api::Messages,
        Api::Embeddings,
        Api::Rerank,
    ];

    /// The name `--api` takes and the record writes.
    pub fn name(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Embeddings => "embeddings",
            Api::Rerank => "rerank",
            Api::Auto => "auto",
        }
    }

    /// The route requests are posted to (`Auto` has none until it is resolved).
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat | Api::Auto => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
            Api::Embeddings => "/v1/embeddings",
            Api::Rerank => "/v1/rerank",
        }
    }

    /// Whether the response is a stream of tokens (else one JSON body).
    pub fn streams(self) -> bool {
        !matches!(self, Api::Embeddings | Api::Rerank)
    }

    /// Whether requests are messages (a conversation's history, tools) rather than text.
    pub fn takes_messages(self) -> bool {
        matches!(self, Api::Chat | Api::Responses | Api::Messages)
    }

    /// Whether one request carries several inputs (`--batch`).
    pub fn takes_batch(self) -> bool {
        !self.streams()
    }
}

/// One message of a conversation or a dataset row, in no API's terms yet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
    /// An assistant message's tool calls (the reply of a turn that called tools).
    pub tool_calls: Vec<ToolCall>,
    /// A tool message: the call it answers.
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_string(),
            content: content.into(),
            ..Message::default()
        }
    }

    /// The reply of a turn: its answer text and the tool calls it made.
    pub fn assistant(content: String, tool_calls: Vec<ToolCall>) -> Message {
        Message {
            role: "assistant".into(),
            content,
            tool_calls,
            tool_call_id: None,
        }
    }

    /// A tool's result, answering `call`.
    pub fn tool_result(call: &ToolCall, content: String) -> Message {
        Message {
            role: "tool".into(),
            content,
            tool_calls: Vec::new(),
            tool_call_id: Some(call.id.clone()),
        }
    }
}

/// A tool call as the model streamed it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text, perhaps not valid).
    pub arguments: String,
}

/// `--tool-choice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    /// A tool must be called (Anthropic: `any`).
    Required,
    /// This function must be called.
    Named(String),
}

impl ToolChoice {
    /// `auto`, `none`, `required` or a function's name.
    pub fn parse(s: &str) -> Result<ToolChoice, String> {
        let t = s.trim();
        Ok(match t {
            "" => {
                return Err(
                    "an empty tool choice (use auto, none, required or a function's name)".into(),
                )
            }
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" | "any" => ToolChoice::Required,
            name => ToolChoice::Named(name.to_string()),
        })
    }

    /// As the record writes it.
    pub fn name(&self) -> String {
        match self {
            ToolChoice::Auto => "auto".into(),
            ToolChoice::None => "none".into(),
            ToolChoice::Required => "required".into(),
            ToolChoice::Named(n) => n.clone(),
        }
    }
}

/// The tools a request offers, as OpenAI's chat API defines them
/// (`{"type":"function","function":{"name","description","parameters"}}`), and the choice.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tools {
    pub defs: Vec<Value>,
    pub choice: Option<ToolChoice>,
}

/// The function of an OpenAI tool definition: `(name, description, parameters)`.
fn function_of(def: &Value) -> (String, Value, Value) {
    let f = def.get("function").unwrap_or(def);
    (
        f.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        f.get("description").cloned().unwrap_or(Value::Null),
        f.get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    )
}

/// The request's body in `ask.api`'s terms.
pub fn body(ask: &Ask) -> Value {
    match ask.api {
        Api::Completions | Api::Chat | Api::Auto => openai_body(ask),
        Api::Responses => responses::body(ask),
        Api::Messages => messages::body(ask),
        Api::Embeddings | Api::Rerank => pooling::body(ask),
    }
}

/// One streamed event of `api` read into a `Chunk`.
pub fn decode(api: Api, payload: &str) -> Result<Chunk, String> {
    match api {
        Api::Responses => responses::decode(payload),
        Api::Messages => messages::decode(payload),
        _ => parse_chunk(payload),
    }
}

/// The messages a request sends: as given, or one user message of the prompt.
pub fn messages_of(ask: &Ask) -> Vec<Message> {
    match &ask.messages {
        Some(m) => m.clone(),
        None => vec![Message::new("user", ask.prompt.clone())],
    }
}

/// `/v1/completions` and `/v1/chat/completions`.
fn openai_body(ask: &Ask) -> Value {
    let mut body = match ask.api {
        Api::Completions => json!({"model": ask.model, "prompt": ask.prompt}),
        _ => {
            let messages: Vec<Value> = messages_of(ask).iter().map(chat_message).collect();
            let mut b = json!({"model": ask.model, "messages": messages});
            if let Some(tools) = &ask.tools {
                if !tools.defs.is_empty() {
                    b["tools"] = Value::Array(tools.defs.clone());
                }
                if let Some(choice) = &tools.choice {
                    b["tool_choice"] = match choice {
                        ToolChoice::Named(name) => {
                            json!({"type": "function", "function": {"name": name}})
                        }
                        other => json!(other.name()),
                    };
                }
            }
            b
        }
    };
    if let Some(obj) = body.as_object_mut() {
        obj.insert("max_tokens".into(), json!(ask.output_tokens));
        obj.insert("stream".into(), json!(true));
        let mut options = json!({"include_usage": true});
        if ask.chunk_usage {
            options["continuous_usage_stats"] = json!(true);
        }
        obj.insert("stream_options".into(), options);
        if ask.chunk_timings {
            obj.insert("timings_per_token".into(), json!(true));
        }
        obj.insert("temperature".into(), json!(0));
        if ask.exact_output {
            obj.insert("ignore_eos".into(), json!(true));
            obj.insert("min_tokens".into(), json!(ask.output_tokens));
        }
    }
    body
}

/// A message as the chat API takes it.
fn chat_message(m: &Message) -> Value {
    if m.role == "tool" {
        return json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content,
        });
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        let content = if m.content.is_empty() {
            Value::Null
        } else {
            json!(m.content)
        };
        return json!({"role": m.role, "content": content, "tool_calls": calls});
    }
    json!({"role": m.role, "content": m.content})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tool_choices_parse() {
        assert_eq!(ToolChoice::parse("auto").unwrap(), ToolChoice::Auto);
        assert_eq!(ToolChoice::parse("any").unwrap(), ToolChoice::Required);
        assert_eq!(
            ToolChoice::parse("get_weather").unwrap(),
            ToolChoice::Named("get_weather".into())
        );
        assert!(ToolChoice::parse(" ").is_err());
    }

    #[test]
    fn chat_history_carries_tool_calls_and_results() {
        let call = ToolCall {
            id: "c1".into(),
            name: "get".into(),
            arguments: "{}".into(),
        };
        let a = chat_message(&Message::assistant(String::new(), vec![call.clone()]));
        assert_eq!(a["content"], Value::Null);
        assert_eq!(a["tool_calls"][0]["function"]["name"], "get");
        let r = chat_message(&Message::tool_result(&call, "42".into()));
        assert_eq!(
            (r["role"].as_str(), r["tool_call_id"].as_str()),
            (Some("tool"), Some("c1"))
        );
    }
}
