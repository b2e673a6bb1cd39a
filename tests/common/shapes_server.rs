//! A server on 127.0.0.1 that streams the request shapes of reasoning models and agents, in each
//! API's own terms, with exact, injected timings: the first output token (reasoning, if any)
//! `ttft` after the request arrived, then one token every `itl`: `reasoning` tokens of
//! thinking, then `answer` tokens of answer text, or (when the request offers tools and its
//! last message is not a tool's result) a tool call of `answer` tokens (its name first, then
//! its arguments in pieces). Chat (`reasoning_content`, `tool_calls` deltas, a usage chunk that
//! counts `reasoning_tokens` when `usage_reasoning` says how many: a server's own count, which
//! need not be the reasoning chunks streamed), completions (text only), the Responses API's
//! typed events (its usage always counts the reasoning: `usage_reasoning`, else the chunks)
//! and Anthropic's Messages events (its usage counts the output as streamed); embeddings and rerank answered whole
//! after `pool_latency`. Only the routes in `apis` exist (others are 404); a client's check that
//! a route exists (`detect::PROBE_BODY`) is refused with 400, as a server refuses a probe. Every request is recorded
//! (arrival, path, headers, body).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub struct Truth {
    pub ttft: Duration,
    pub itl: Duration,
    pub reasoning: usize,
    pub answer: usize,
    /// The reasoning tokens the usage counts apart (`completion_tokens_details`), with the
    /// answer's making its completion tokens; `None`: the usage does not count them apart.
    /// A server that streams several tokens a chunk counts more than `reasoning` chunks.
    pub usage_reasoning: Option<usize>,
    pub pool_latency: Duration,
    /// Routes served: chat, completions, responses, messages, embeddings, rerank.
    pub apis: Vec<&'static str>,
    /// The body of `GET /v1/models` (default: one model `m`).
    pub models: Option<String>,
    /// A TTFT of its own for requests to these models.
    pub model_ttft: Vec<(&'static str, Duration)>,
}

impl Default for Truth {
    fn default() -> Self {
        Truth {
            ttft: Duration::from_millis(40),
            itl: Duration::from_millis(5),
            reasoning: 0,
            answer: 6,
            usage_reasoning: None,
            pool_latency: Duration::from_millis(30),
            apis: vec!["chat", "completions"],
            models: None,
            model_ttft: Vec::new(),
        }
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Since the server started.
    pub at: Duration,
    /// When its response ended.
    pub ended: Option<Duration>,
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

pub struct ShapesServer {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl ShapesServer {
    pub fn start(truth: Truth) -> ShapesServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "http://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        );
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let t0 = Instant::now();
        let s = seen.clone();
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, truth) = (s.clone(), truth.clone());
                thread::spawn(move || {
                    let _ = answer(conn, &truth, t0, &s);
                });
            }
        });
        ShapesServer { url, seen }
    }

    /// Every request but the model lists and probes, in arrival order.
    pub fn requests(&self) -> Vec<Seen> {
        let mut v: Vec<Seen> = self
            .seen
            .lock()
            .expect("lock")
            .iter()
            .filter(|s| s.method == "POST" && !is_probe(&s.body))
            .cloned()
            .collect();
        v.sort_by_key(|s| s.at);
        v
    }

    /// Everything, probes included.
    pub fn all(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn api_of(path: &str) -> Option<&'static str> {
    Some(match path {
        "/v1/chat/completions" => "chat",
        "/v1/completions" => "completions",
        "/v1/responses" => "responses",
        "/v1/messages" => "messages",
        "/v1/embeddings" => "embeddings",
        "/v1/rerank" => "rerank",
        _ => return None,
    })
}

fn answer(conn: TcpStream, t: &Truth, t0: Instant, seen: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first)? == 0 {
            return Ok(());
        }
        let mut parts = first.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let arrived = Instant::now();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let index = {
            let mut s = seen.lock().expect("lock");
            s.push(Seen {
                at: t0.elapsed(),
                ended: None,
                method: method.clone(),
                path: path.clone(),
                headers,
                body: body.clone(),
            });
            s.len() - 1
        };
        let mut out = conn.try_clone()?;
        if method == "GET" && path == "/v1/models" {
            let json = t.models.clone().unwrap_or_else(|| {
                r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#.into()
            });
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )?;
            out.flush()?;
            continue;
        }
        let api = match api_of(&path).filter(|a| t.apis.contains(a)) {
            Some(a) => a,
            None => {
                write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found")?;
                return out.flush();
            }
        };
        if is_probe(&body) {
            let msg = r#"{"error":{"message":"field required: model"}}"#;
            write!(
                out,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{msg}",
                msg.len()
            )?;
            out.flush()?;
            continue;
        }
        let model = body["model"].as_str().unwrap_or_default();
        let ttft = t
            .model_ttft
            .iter()
            .find(|(m, _)| *m == model)
            .map_or(t.ttft, |(_, d)| *d);
        let mut s = Stream {
            out,
            arrived,
            ttft,
            itl: t.itl,
            token: 0,
        };
        match api {
            "embeddings" | "rerank" => pooled(&mut s, api, &body, t.pool_latency)?,
            _ => streamed(&mut s, api, &body, t)?,
        }
        if let Some(s) = seen.lock().expect("lock").get_mut(index) {
            s.ended = Some(t0.elapsed());
        }
        return Ok(());
    }
}

struct Stream {
    out: TcpStream,
    arrived: Instant,
    ttft: Duration,
    itl: Duration,
    /// Output tokens sent so far.
    token: u32,
}

impl Stream {
    fn chunk(&mut self, data: &str) -> std::io::Result<()> {
        write!(self.out, "{:x}\r\n{data}\r\n", data.len())?;
        self.out.flush()
    }

    fn data(&mut self, json: &str) -> std::io::Result<()> {
        self.chunk(&format!("data: {json}\n\n"))
    }

    fn event(&mut self, kind: &str, v: Value) -> std::io::Result<()> {
        self.chunk(&format!("event: {kind}\ndata: {v}\n\n"))
    }

    /// Waits for the next output token's time: `ttft + k·itl` after the request arrived.
    fn next_token(&mut self) {
        let due = self.arrived + self.ttft + self.itl * self.token;
        self.token += 1;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
    }

    fn end(&mut self) -> std::io::Result<()> {
        self.chunk("")
    }
}

/// Whether the request offers tools and its last message is not a tool's result.
fn calls_tool(body: &Value) -> bool {
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let last = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let answered = last["role"] == "tool"
        || last["type"] == "function_call_output"
        || last["content"]
            .as_array()
            .and_then(|c| c.first())
            .is_some_and(|b| b["type"] == "tool_result");
    has_tools && !answered
}

/// The name of the first tool offered.
fn tool_name(body: &Value) -> String {
    let t = &body["tools"][0];
    t["function"]["name"]
        .as_str()
        .or_else(|| t["name"].as_str())
        .unwrap_or("tool")
        .to_string()
}

fn streamed(s: &mut Stream, api: &str, body: &Value, t: &Truth) -> std::io::Result<()> {
    s.out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")?;
    s.out.flush()?;
    let tool = calls_tool(body);
    let name = tool_name(body);
    let (r, a) = (t.reasoning, t.answer.max(1));
    match api {
        "completions" => {
            for i in 0..r + a {
                s.next_token();
                s.data(&format!(
                    r#"{{"choices":[{{"index":0,"text":" t{i}","finish_reason":null}}]}}"#
                ))?;
            }
            s.data(&format!(r#"{{"choices":[{{"index":0,"text":"","finish_reason":"length"}}],"usage":{{"prompt_tokens":7,"completion_tokens":{},"total_tokens":{}}}}}"#, r + a, r + a + 7))?;
            s.data("[DONE]")?;
        }
        "chat" => {
            s.data(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#)?;
            for i in 0..r {
                s.next_token();
                s.data(&format!(r#"{{"choices":[{{"index":0,"delta":{{"reasoning_content":" r{i}"}},"finish_reason":null}}]}}"#))?;
            }
            for i in 0..a {
                s.next_token();
                if !tool {
                    s.data(&format!(r#"{{"choices":[{{"index":0,"delta":{{"content":" a{i}"}},"finish_reason":null}}]}}"#))?;
                } else if i == 0 {
                    s.data(&format!(r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_7","type":"function","function":{{"name":"{name}","arguments":""}}}}]}},"finish_reason":null}}]}}"#))?;
                } else {
                    let piece = if i == 1 { r#"{\"x\":"# } else { "1" };
                    let piece = if i + 1 == a {
                        format!("{piece}}}")
                    } else {
                        piece.to_string()
                    };
                    s.data(&format!(r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"{piece}"}}}}]}},"finish_reason":null}}]}}"#))?;
                }
            }
            let finish = if tool { "tool_calls" } else { "length" };
            s.data(&format!(
                r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{finish}"}}]}}"#
            ))?;
            let (counted, details) = match t.usage_reasoning {
                Some(n) => (
                    n,
                    format!(r#","completion_tokens_details":{{"reasoning_tokens":{n}}}"#),
                ),
                None => (r, String::new()),
            };
            s.data(&format!(r#"{{"choices":[],"usage":{{"prompt_tokens":7,"completion_tokens":{},"total_tokens":{}{details}}}}}"#, counted + a, counted + a + 7))?;
            s.data("[DONE]")?;
        }
        "responses" => {
            s.event(
                "response.created",
                json!({"type":"response.created","response":{"status":"in_progress"}}),
            )?;
            let mut output = Vec::new();
            if r > 0 {
                s.event("response.output_item.added", json!({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning"}}))?;
                for i in 0..r {
                    s.next_token();
                    s.event("response.reasoning_text.delta", json!({"type":"response.reasoning_text.delta","output_index":0,"delta":format!(" r{i}")}))?;
                }
                output.push(json!({"type":"reasoning"}));
            }
            let at = output.len();
            if tool {
                s.next_token();
                s.event("response.output_item.added", json!({"type":"response.output_item.added","output_index":at,"item":{"type":"function_call","call_id":"call_7","name":name,"arguments":""}}))?;
                for i in 1..a {
                    s.next_token();
                    s.event("response.function_call_arguments.delta", json!({"type":"response.function_call_arguments.delta","output_index":at,"delta":if i == 1 {"{}"} else {" "}}))?;
                }
                output.push(json!({"type":"function_call"}));
            } else {
                s.event("response.output_item.added", json!({"type":"response.output_item.added","output_index":at,"item":{"type":"message"}}))?;
                for i in 0..a {
                    s.next_token();
                    s.event("response.output_text.delta", json!({"type":"response.output_text.delta","output_index":at,"delta":format!(" a{i}")}))?;
                }
                output.push(json!({"type":"message"}));
            }
            let counted = t.usage_reasoning.unwrap_or(r);
            let usage = json!({"input_tokens":7,"output_tokens":counted + a,"output_tokens_details":{"reasoning_tokens":counted}});
            s.event("response.completed", json!({"type":"response.completed","response":{"status":"completed","output":output,"usage":usage}}))?;
        }
        _ => {
            s.event("message_start", json!({"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":7,"output_tokens":1}}}))?;
            s.event("ping", json!({"type":"ping"}))?;
            let mut block = 0;
            if r > 0 {
                s.event("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}))?;
                for i in 0..r {
                    s.next_token();
                    s.event("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":format!(" r{i}")}}))?;
                }
                s.event(
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":0}),
                )?;
                block = 1;
            }
            if tool {
                s.next_token();
                s.event("content_block_start", json!({"type":"content_block_start","index":block,"content_block":{"type":"tool_use","id":"toolu_7","name":name,"input":{}}}))?;
                for i in 1..a {
                    s.next_token();
                    s.event("content_block_delta", json!({"type":"content_block_delta","index":block,"delta":{"type":"input_json_delta","partial_json":if i == 1 {"{}"} else {" "}}}))?;
                }
            } else {
                s.event("content_block_start", json!({"type":"content_block_start","index":block,"content_block":{"type":"text","text":""}}))?;
                for i in 0..a {
                    s.next_token();
                    s.event("content_block_delta", json!({"type":"content_block_delta","index":block,"delta":{"type":"text_delta","text":format!(" a{i}")}}))?;
                }
            }
            s.event(
                "content_block_stop",
                json!({"type":"content_block_stop","index":block}),
            )?;
            let stop = if tool { "tool_use" } else { "max_tokens" };
            s.event("message_delta", json!({"type":"message_delta","delta":{"stop_reason":stop},"usage":{"output_tokens":r + a}}))?;
            s.event("message_stop", json!({"type":"message_stop"}))?;
        }
    }
    s.end()
}

fn pooled(s: &mut Stream, api: &str, body: &Value, latency: Duration) -> std::io::Result<()> {
    let inputs: Vec<String> = body
        .get(if api == "rerank" {
            "documents"
        } else {
            "input"
        })
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let words: usize = inputs
        .iter()
        .map(|t| t.split_whitespace().count())
        .sum::<usize>()
        + body["query"]
            .as_str()
            .map_or(0, |q| q.split_whitespace().count() * inputs.len());
    let due = s.arrived + latency;
    if let Some(wait) = due.checked_duration_since(Instant::now()) {
        thread::sleep(wait);
    }
    let json = if api == "rerank" {
        let results: Vec<Value> = (0..inputs.len())
            .rev()
            .map(|i| json!({"index": i, "relevance_score": 1.0 / (1.0 + i as f64)}))
            .collect();
        json!({"results": results, "usage": {"total_tokens": words}})
    } else {
        let data: Vec<Value> = (0..inputs.len())
            .map(|i| json!({"index": i, "embedding": [0.1, 0.2, 0.3, i as f64]}))
            .collect();
        json!({"object": "list", "data": data, "usage": {"prompt_tokens": words, "total_tokens": words}})
    }
    .to_string();
    write!(
        s.out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )?;
    s.out.flush()
}

/// Whether a request's body is the client's check that a route exists.
fn is_probe(body: &Value) -> bool {
    serde_json::from_str::<Value>(infertop::engine::http::api::detect::PROBE_BODY)
        .is_ok_and(|p| *body == p)
}
