//! The http engine against an in-process test server on 127.0.0.1 that streams with exact,
//! injected timings (a first token after TTFT, then one token per interval), and misbehaves on
//! demand: role-only, empty and usage-only chunks, a 500, a stream cut mid-way, garbage SSE.
//! Every wait is bounded; nothing leaves the loopback interface.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;
use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::event::{Control, Event, RequestDone, RequestFailed, StopReason};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;
use serde_json::Value;

/// What the test server does with a completion request.
#[derive(Clone, Debug)]
enum Script {
    /// A well-formed stream: a role-only chunk, `tokens` content chunks (the first after `ttft`,
    /// then one every `itl`, each preceded by an empty chunk), a usage chunk reporting `usage`
    /// completion tokens (when given), and `[DONE]`.
    Stream {
        ttft: Duration,
        itl: Duration,
        tokens: usize,
        usage: Option<usize>,
    },
    /// An error status with a body.
    Status(u16, &'static str),
    /// `tokens` content chunks, then the connection closes without the chunked terminator.
    Cut { tokens: usize },
    /// 200 with a body that is not SSE.
    Garbage,
    /// A data line that is not JSON.
    BadJson,
    /// Speculative decoding: content chunks of these many tokens each, every one with the
    /// running usage (as vLLM sends it with `continuous_usage_stats`), 3 ms apart.
    Speculative(Vec<usize>),
}

struct Server {
    port: u16,
    /// Requests being answered now, and the most at once.
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    /// Every Authorization header and body received.
    seen: Arc<Mutex<Vec<(String, String)>>>,
    /// Every request's line and header lines (names lowercased), in the order received.
    heads: Arc<Mutex<Vec<Vec<String>>>>,
}

impl Server {
    fn start(script: Script) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = Server {
            port,
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
            seen: Arc::default(),
            heads: Arc::default(),
        };
        let (in_flight, max, seen, heads) = (
            server.in_flight.clone(),
            server.max_in_flight.clone(),
            server.seen.clone(),
            server.heads.clone(),
        );
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (script, in_flight, max, seen, heads) = (
                    script.clone(),
                    in_flight.clone(),
                    max.clone(),
                    seen.clone(),
                    heads.clone(),
                );
                thread::spawn(move || {
                    let _ = handle(conn, &script, &in_flight, &max, &seen, &heads);
                });
            }
        });
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn handle(
    conn: TcpStream,
    script: &Script,
    in_flight: &AtomicUsize,
    max: &AtomicUsize,
    seen: &Mutex<Vec<(String, String)>>,
    heads: &Mutex<Vec<Vec<String>>>,
) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    // A connection closed before any request (one the client opened ahead and did not need).
    if reader.read_line(&mut request_line)? == 0 {
        return Ok(());
    }
    let (mut length, mut auth) = (0usize, String::new());
    let mut head = vec![request_line.trim_end().to_string()];
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        head.push(format!("{}: {}", name.to_ascii_lowercase(), value.trim()));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => auth = value.trim().to_string(),
            _ => {}
        }
    }
    heads.lock().unwrap().push(head);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    if request_line.starts_with("POST /tokenize") {
        return tokenize(conn, &body);
    }
    seen.lock()
        .unwrap()
        .push((auth, String::from_utf8_lossy(&body).into_owned()));
    let mut out = conn;
    if request_line.starts_with("GET /v1/models") {
        let json = r#"{"object":"list","data":[{"id":"test-model","object":"model"}]}"#;
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
            json.len()
        )?;
        return Ok(());
    }
    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    max.fetch_max(now, Ordering::SeqCst);
    let chat = request_line.contains("/v1/chat/completions");
    let result = respond(&mut out, script, chat);
    in_flight.fetch_sub(1, Ordering::SeqCst);
    result
}

/// `/tokenize` as vLLM answers it, with the test BPE, and a BOS token added as some servers do
/// whatever the request says.
fn tokenize(mut out: TcpStream, body: &[u8]) -> std::io::Result<()> {
    static TK: std::sync::OnceLock<tokenizers::Tokenizer> = std::sync::OnceLock::new();
    let tk = TK.get_or_init(|| infertop::model::tokenizer::train_bpe(2048).unwrap());
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let text = v["prompt"].as_str().unwrap_or_default();
    let mut ids = vec![1u32];
    ids.extend(tk.encode(text, false).unwrap().get_ids());
    let json =
        serde_json::json!({"count": ids.len(), "max_model_len": 4096, "tokens": ids}).to_string();
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    )
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

/// One HTTP chunk, flushed at once.
fn chunk(out: &mut TcpStream, data: &str) -> std::io::Result<()> {
    write!(out, "{:x}\r\n{data}\r\n", data.len())?;
    out.flush()
}

fn event(out: &mut TcpStream, json: &str) -> std::io::Result<()> {
    chunk(out, &format!("data: {json}\n\n"))
}

fn content(i: usize, chat: bool) -> String {
    if chat {
        format!(
            r#"{{"id":"c","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":" t{i}"}},"finish_reason":null}}]}}"#
        )
    } else {
        format!(
            r#"{{"id":"c","object":"text_completion","choices":[{{"index":0,"text":" t{i}","finish_reason":null}}]}}"#
        )
    }
}

fn respond(out: &mut TcpStream, script: &Script, chat: bool) -> std::io::Result<()> {
    match script {
        Script::Stream {
            ttft,
            itl,
            tokens,
            usage,
        } => {
            out.write_all(SSE_HEAD.as_bytes())?;
            out.flush()?;
            // Not tokens: a role-only chunk (chat servers send it first) and an empty text.
            event(out, r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#)?;
            thread::sleep(*ttft);
            for i in 0..*tokens {
                if i > 0 {
                    thread::sleep(*itl);
                    event(out, r#"{"choices":[{"index":0,"text":"","finish_reason":null}]}"#)?;
                }
                event(out, &content(i, chat))?;
            }
            event(out, r#"{"choices":[{"index":0,"text":"","finish_reason":"length"}]}"#)?;
            if let Some(n) = usage {
                event(
                    out,
                    &format!(r#"{{"choices":[],"usage":{{"prompt_tokens":7,"completion_tokens":{n},"total_tokens":{}}}}}"#, n + 7),
                )?;
            }
            event(out, "[DONE]")?;
            chunk(out, "")
        }
        Script::Status(code, body) => write!(
            out,
            "HTTP/1.1 {code} Oops\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Script::Cut { tokens } => {
            out.write_all(SSE_HEAD.as_bytes())?;
            for i in 0..*tokens {
                event(out, &content(i, chat))?;
                thread::sleep(Duration::from_millis(5));
            }
            out.shutdown(std::net::Shutdown::Both)
        }
        Script::Garbage => {
            out.write_all(SSE_HEAD.as_bytes())?;
            chunk(out, "this is not SSE\n<html>nope</html>\n")?;
            chunk(out, "")
        }
        Script::Speculative(per_chunk) => {
            out.write_all(SSE_HEAD.as_bytes())?;
            let mut total = 0;
            for (i, n) in per_chunk.iter().enumerate() {
                thread::sleep(Duration::from_millis(3));
                total += n;
                event(
                    out,
                    &format!(
                        r#"{{"choices":[{{"index":0,"text":" t{i}","finish_reason":null}}],"usage":{{"prompt_tokens":7,"completion_tokens":{total},"total_tokens":{}}}}}"#,
                        total + 7
                    ),
                )?;
            }
            event(
                out,
                &format!(r#"{{"choices":[],"usage":{{"prompt_tokens":7,"completion_tokens":{total},"total_tokens":{}}}}}"#, total + 7),
            )?;
            event(out, "[DONE]")?;
            chunk(out, "")
        }
        Script::BadJson => {
            out.write_all(SSE_HEAD.as_bytes())?;
            event(out, &content(0, chat))?;
            event(out, "{\"choices\": [ oops")?;
            chunk(out, "")
        }
    }
}

fn config(url: &str, requests: u64) -> HttpConfig {
    HttpConfig {
        endpoints: vec![Endpoint::parse(url).unwrap()],
        api: Api::Completions,
        served_model: None,
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(16)),
            output: LenSpec::Fixed(8),
            seed: 0,
            warmup: 0,
            requests: Some(requests),
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
        prompts: Default::default(),
        concurrency: None,
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(10),
        exact_output: true,
        chunk_usage: false,
        chunk_timings: false,
        record_tokens: false,
        preconnect: true,
        reset_prefix_cache: false,
        shape: Default::default(),
        start_at: None,
        prompt_salt: 0,
        cancel: None,
        canary: None,
    }
}

/// Runs the engine to its end (at most 30 s) and returns every event.
fn run_engine(cfg: HttpConfig) -> Vec<Event> {
    let (tx, rx) = bounded(1 << 16);
    let (_ctl_tx, ctl_rx) = unbounded::<Control>();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Finished(r)) => {
                events.push(Event::Finished(r));
                handle.join().unwrap();
                return events;
            }
            Ok(ev) => events.push(ev),
            Err(_) => {}
        }
    }
    panic!("the engine did not finish within 30 s");
}

fn done(events: &[Event]) -> Vec<&RequestDone> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RequestDone(r) => Some(r.as_ref()),
            _ => None,
        })
        .collect()
}

fn failed(events: &[Event]) -> Vec<&RequestFailed> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RequestFailed(f) => Some(f.as_ref()),
            _ => None,
        })
        .collect()
}

fn itls(events: &[Event]) -> Vec<f64> {
    events
        .iter()
        .flat_map(|e| match e {
            Event::DecodeSteps(s) => s.iter().map(|s| s.itl_s).collect(),
            _ => vec![],
        })
        .collect()
}

fn finished(events: &[Event]) -> StopReason {
    match events.last() {
        Some(Event::Finished(r)) => r.clone(),
        other => panic!("no Finished at the end: {other:?}"),
    }
}

/// The median (these tests share two busy cores: one late wake-up must not fail them, a
/// shifted median must).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Within `tol_ms` above the truth (the client can only see a chunk after it was sent) and
/// 1 ms below it (sleep granularity).
fn near(measured_s: f64, truth_ms: f64, tol_ms: f64) -> bool {
    let ms = measured_s * 1e3;
    ms >= truth_ms - 1.0 && ms <= truth_ms + tol_ms
}

#[test]
fn timings_match_the_injected_truth() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        tokens: 8,
        usage: Some(8),
    });
    let events = run_engine(config(&server.url(), 5));
    assert_eq!(finished(&events), StopReason::RequestLimit);
    let reqs = done(&events);
    assert_eq!(reqs.len(), 5, "{events:?}");
    for r in &reqs {
        eprintln!(
            "ttft {:.2} ms  tpot {:.2} ms  e2e {:.2} ms  (truth 50 / 10 / 120)",
            r.ttft_s * 1e3,
            r.tpot_s.unwrap() * 1e3,
            r.e2e_s * 1e3
        );
        // Each request: never earlier than the truth, and not far later.
        assert!(near(r.ttft_s, 50.0, 200.0), "ttft {}", r.ttft_s);
        assert_eq!((r.output_tokens, r.prompt_tokens), (8, 7));
        let c = r.client.as_ref().unwrap();
        assert_eq!(
            c.content_chunks, 8,
            "role-only and empty chunks are not tokens"
        );
        assert_eq!(c.output_tokens_from, "usage");
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
    }
    // The typical request: within a few ms of the truth.
    let ttft = median(reqs.iter().map(|r| r.ttft_s).collect());
    let tpot = median(reqs.iter().map(|r| r.tpot_s.unwrap()).collect());
    let e2e = median(reqs.iter().map(|r| r.e2e_s).collect());
    assert!(near(ttft, 50.0, 5.0), "median ttft {ttft}");
    assert!(near(tpot, 10.0, 2.0), "median tpot {tpot}");
    assert!(near(e2e, 120.0, 10.0), "median e2e {e2e}");
    let steps = itls(&events);
    assert_eq!(steps.len(), 5 * 7);
    let itl = median(steps);
    assert!(near(itl, 10.0, 2.0), "median itl {itl}");
    // The model came from GET /v1/models; the body asked for an exact, streamed length.
    let Some(Event::RunStarted(info)) = events.first() else {
        panic!("RunStarted first")
    };
    assert_eq!(
        (info.model.name.as_str(), info.model.source),
        ("test-model", infertop::event::ModelSource::Http)
    );
    let seen = server.seen.lock().unwrap();
    let body: Value = serde_json::from_str(&seen.last().unwrap().1).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 8);
    assert_eq!(body["ignore_eos"], true);
    assert_eq!(body["stream"], true);
    assert_eq!(body["prompt"].as_str().unwrap().split(' ').count(), 16);
}

#[test]
fn the_usage_chunk_counts_tokens_else_chunks_are_counted() {
    // Speculative decoding: 4 chunks carrying 12 tokens.
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(5),
        tokens: 4,
        usage: Some(12),
    });
    let events = run_engine(config(&server.url(), 1));
    let r = done(&events)[0];
    assert_eq!(r.output_tokens, 12);
    assert_eq!(r.client.as_ref().unwrap().content_chunks, 4);
    assert!((r.tpot_s.unwrap() - (r.e2e_s - r.ttft_s) / 11.0).abs() < 1e-12);

    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(5),
        tokens: 4,
        usage: None,
    });
    let events = run_engine(config(&server.url(), 1));
    let r = done(&events)[0];
    assert_eq!(r.output_tokens, 4);
    let c = r.client.as_ref().unwrap();
    assert_eq!(
        (c.output_tokens_from.as_str(), c.prompt_tokens_from.as_str()),
        ("counted", "approx")
    );
    assert_eq!(r.prompt_tokens, 16);
}

/// With the server's tokenizer (`--tokenizer`), every prompt is exactly the asked length in that
/// tokenizer, prompts differ, and the record says where the count came from.
#[test]
fn a_tokenizer_makes_prompts_of_exact_length() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(2),
        tokens: 2,
        usage: None,
    });
    let tk = infertop::model::tokenizer::train_bpe(2048).unwrap();
    let mut cfg = config(&server.url(), 4);
    cfg.traffic.prompt = Some(LenSpec::parse("5,100,37,1000").unwrap());
    cfg.prompts = infertop::engine::http::Prompts::Words(std::sync::Arc::new(
        infertop::traffic::words::PromptWords::from_tokenizer(&tk).unwrap(),
    ));
    let events = run_engine(cfg);
    let mut asked: Vec<usize> = done(&events)
        .iter()
        .map(|r| {
            let c = r.client.as_ref().unwrap();
            assert_eq!(c.prompt_tokens_from, "tokenizer");
            r.prompt_tokens
        })
        .collect();
    asked.sort_unstable();
    assert_eq!(asked, [5, 37, 100, 1000]);
    let seen = server.seen.lock().unwrap();
    let mut lens: Vec<usize> = seen
        .iter()
        .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
        .filter_map(|b| b["prompt"].as_str().map(str::to_string))
        .map(|p| tk.encode(p.as_str(), false).unwrap().get_ids().len())
        .collect();
    lens.sort_unstable();
    assert_eq!(lens, [5, 37, 100, 1000]);
}

#[test]
fn faults_are_failed_requests_with_a_reason() {
    let cases: [(Script, &str); 4] = [
        (
            Script::Status(500, r#"{"error":"model crashed"}"#),
            "HTTP 500: {\"error\":\"model crashed\"}",
        ),
        (
            Script::Cut { tokens: 3 },
            "stream cut after 3 content chunks",
        ),
        (Script::Garbage, "malformed SSE"),
        (Script::BadJson, "malformed JSON"),
    ];
    for (script, reason) in cases {
        let server = Server::start(script.clone());
        let mut cfg = config(&server.url(), 2);
        cfg.served_model = Some("m".into());
        let events = run_engine(cfg);
        let f = failed(&events);
        assert_eq!(f.len(), 2, "{script:?}: {events:?}");
        assert!(f[0].reason.contains(reason), "{script:?}: {}", f[0].reason);
        assert!(done(&events).is_empty());
        // A failed request leaves no latency samples behind, though a cut stream's steps
        // were shown as they arrived.
        let mut run = infertop::fold::RunFold::new();
        for e in &events {
            run.apply(e);
        }
        let summary = run.summary();
        for m in infertop::stats::Metric::ALL {
            assert_eq!(summary.steady.get(m).n, 0, "{script:?}: {m:?}");
        }
        if let Script::Cut { tokens } = script {
            assert_eq!(itls(&events).len(), 2 * (tokens - 1), "steps are sent live");
        }
        assert_eq!(finished(&events), StopReason::Error, "{script:?}");
        if let Script::Status(code, _) = script {
            assert_eq!(f[0].status, Some(code));
        }
    }
}

#[test]
fn a_slow_server_times_out_and_concurrency_keeps_n_in_flight() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(80),
        itl: Duration::from_millis(10),
        tokens: 3,
        usage: Some(3),
    });
    let mut cfg = config(&server.url(), 8);
    cfg.concurrency = Some(4);
    let t0 = Instant::now();
    let events = run_engine(cfg);
    assert_eq!(done(&events).len(), 8);
    assert_eq!(server.max_in_flight.load(Ordering::SeqCst), 4);
    // 8 requests of ~100 ms, 4 at a time: two rounds, not eight.
    assert!(
        t0.elapsed() < Duration::from_millis(800),
        "{:?}",
        t0.elapsed()
    );

    let mut cfg = config(&server.url(), 1);
    cfg.request_timeout = Duration::from_millis(30);
    let events = run_engine(cfg);
    let f = failed(&events);
    assert!(
        f[0].reason.starts_with("timed out after 0.03s"),
        "{}",
        f[0].reason
    );
}

#[test]
fn an_open_loop_rate_records_the_send_delay() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        tokens: 2,
        usage: None,
    });
    let mut cfg = config(&server.url(), 6);
    cfg.rate = Some(50.0);
    let events = run_engine(cfg);
    let reqs = done(&events);
    assert_eq!(reqs.len(), 6);
    for r in reqs {
        let c = r.client.as_ref().unwrap();
        assert!(
            c.send_delay_s >= 0.0 && c.send_delay_s < 0.2,
            "{}",
            c.send_delay_s
        );
        assert!(r.ttft_s >= c.send_delay_s);
    }
}

#[test]
fn chat_streams_and_replicas_share_the_requests() {
    let stream = Script::Stream {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(5),
        tokens: 4,
        usage: Some(4),
    };
    let (a, b) = (Server::start(stream.clone()), Server::start(stream));
    let mut cfg = config(&a.url(), 4);
    cfg.api = Api::Chat;
    cfg.endpoints
        .push(Endpoint::parse(&format!("{}/v1/", b.url())).unwrap());
    let events = run_engine(cfg);
    let reqs = done(&events);
    assert_eq!(reqs.len(), 4, "{events:?}");
    for r in &reqs {
        assert_eq!(r.client.as_ref().unwrap().content_chunks, 4);
        assert!(near(r.ttft_s, 10.0, 40.0), "{}", r.ttft_s);
    }
    let on = |url: &str| {
        reqs.iter()
            .filter(|r| r.client.as_ref().unwrap().endpoint == url)
            .count()
    };
    assert_eq!((on(&a.url()), on(&b.url())), (2, 2));
    // Chat bodies went to both replicas.
    let bodies = |s: &Server| {
        s.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, body)| body.contains("\"messages\""))
            .count()
    };
    assert_eq!((bodies(&a), bodies(&b)), (2, 2));
}

/// One slow replica and one failing replica behind a fast one: the pooled table hides them, the
/// per-endpoint breakdown shows each (summary JSON and markdown).
#[test]
fn the_summary_breaks_latency_and_errors_down_per_endpoint() {
    let stream = |ttft_ms| Script::Stream {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(2),
        tokens: 3,
        usage: Some(3),
    };
    let fast = Server::start(stream(5));
    let slow = Server::start(stream(80));
    let broken = Server::start(Script::Status(503, r#"{"error":"overloaded"}"#));
    let mut cfg = config(&fast.url(), 9);
    cfg.endpoints.push(Endpoint::parse(&slow.url()).unwrap());
    cfg.endpoints.push(Endpoint::parse(&broken.url()).unwrap());
    let events = run_engine(cfg);
    let mut run = infertop::fold::RunFold::new();
    for e in &events {
        run.apply(e);
    }
    let summary = run.summary();
    let rows: Vec<_> = summary
        .endpoints
        .iter()
        .map(|e| (e.endpoint.as_str(), e.requests, e.failed))
        .collect();
    let (f, s, b) = (fast.url(), slow.url(), broken.url());
    let mut want = vec![(f.as_str(), 3, 0), (s.as_str(), 3, 0), (b.as_str(), 0, 3)];
    want.sort();
    assert_eq!(rows, want);
    let row = |url: &str| {
        summary
            .endpoints
            .iter()
            .find(|e| e.endpoint == url)
            .unwrap()
    };
    assert!(row(&f).ttft_s.p50 < 0.050, "{:?}", row(&f).ttft_s);
    assert!(row(&s).ttft_s.p50 >= 0.080, "{:?}", row(&s).ttft_s);
    let md = summary.render(infertop::summary::SummaryFormat::Md);
    assert!(md.contains("| endpoint | n | failed |"), "{md}");
    assert!(md.contains(&format!("| {b} | 0 | 3 | - |")), "{md}");
    let json = summary.to_json();
    assert_eq!(json["endpoints"].as_array().unwrap().len(), 3);
}

/// The load keys against a server: `B` doubles the requests in flight (closed loop) from the
/// next request on, and the engine says so.
#[test]
fn the_load_keys_change_a_servers_concurrency() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(2),
        tokens: 3,
        usage: None,
    });
    let (tx, rx) = bounded(1 << 16);
    let (ctl, ctl_rx) = unbounded::<Control>();
    ctl.send(Control::AdjustLoad(2)).unwrap();
    let handle = http::spawn(config(&server.url(), 8), tx, ctl_rx).unwrap();
    let mut events = Vec::new();
    while let Ok(e) = rx.recv_timeout(Duration::from_secs(30)) {
        let end = matches!(e, Event::Finished(_));
        events.push(e);
        if end {
            break;
        }
    }
    handle.join().unwrap();
    let loads: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::WorkloadChanged(w) => Some(w.load_text()),
            _ => None,
        })
        .collect();
    assert_eq!(loads, ["concurrency 4"]);
    // Four requests start before the first one ends.
    let first_done = events
        .iter()
        .position(|e| matches!(e, Event::RequestDone(_)))
        .unwrap();
    let started_before = events[..first_done]
        .iter()
        .filter(|e| matches!(e, Event::RequestStarted { .. }))
        .count();
    assert_eq!(started_before, 4, "{events:?}");
    assert_eq!(done(&events).len(), 8);
}

fn infertop() -> std::process::Command {
    std::process::Command::cargo_bin("infertop").unwrap()
}

/// `--extra-body` and `--header`: the fields are merged into every request's body (`null`
/// removes one), the headers go with every request (the model list too), and the record says
/// what was sent with the credential masked; bad values are one line, exit 2.
#[test]
fn extra_body_and_headers_go_with_every_request() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(2),
        tokens: 4,
        usage: Some(4),
    });
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let extra = r#"{"temperature": 0.5, "ignore_eos": null, "chat_template_kwargs": {"enable_thinking": false}}"#;
    let out = infertop()
        .args([
            "--endpoint",
            &server.url(),
            "--api",
            "chat",
            "--requests",
            "3",
        ])
        .args([
            "-n",
            "4",
            "--headless",
            "--no-telemetry",
            "--format",
            "json",
        ])
        .args(["--extra-body", extra])
        .args(["--header", "X-Tenant: blue"])
        .args(["--header", "Authorization: Bearer sk-in-a-header"])
        .arg("--record")
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let bodies: Vec<Value> = server
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(_, b)| serde_json::from_str::<Value>(b).ok())
        // Not the route check's probe, which the server is meant to refuse.
        .filter(|b| b["messages"].is_array())
        .collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    for b in &bodies {
        assert_eq!(b["temperature"], 0.5, "{b}");
        assert_eq!(b["chat_template_kwargs"]["enable_thinking"], false, "{b}");
        assert!(b.get("ignore_eos").is_none(), "{b}");
        assert_eq!(b["max_tokens"], 4, "{b}");
    }
    let heads = server.heads.lock().unwrap();
    assert!(heads.iter().any(|h| h[0].starts_with("GET /v1/models")));
    for h in heads.iter() {
        for want in ["x-tenant: blue", "authorization: Bearer sk-in-a-header"] {
            assert!(h.iter().any(|l| l == want), "{want} missing: {h:?}");
        }
    }
    let recorded = std::fs::read_to_string(&record).unwrap();
    let header: Value = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
    assert_eq!(
        header["config"]["extra_body"],
        serde_json::from_str::<Value>(extra).unwrap()
    );
    assert_eq!(
        header["config"]["headers"],
        serde_json::json!(["x-tenant: blue", "authorization: ***"])
    );
    for text in [&*stdout, &*stderr, &recorded] {
        assert!(!text.contains("sk-in-a-header"), "{text}");
    }
    for (flag, value, says) in [
        ("--extra-body", "{temperature: 1}", "not valid JSON"),
        ("--extra-body", "[1]", "is an array"),
        ("--header", "X-Tenant blue", "has no colon"),
        ("--header", "Host: elsewhere", "set by infertop"),
    ] {
        let out = infertop()
            .args(["--endpoint", &server.url(), "--headless", flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(flag) && stderr.contains(says), "{stderr}");
    }
}

#[test]
fn headless_run_against_the_server() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        tokens: 6,
        usage: Some(6),
    });
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let out = infertop()
        .args([
            "--endpoint",
            &server.url(),
            "--requests",
            "5",
            "--warmup",
            "1",
        ])
        .args([
            "-n",
            "6",
            "--headless",
            "--no-telemetry",
            "--format",
            "json",
        ])
        .args(["--api-key", "sk-very-secret"])
        .arg("--record")
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let requests: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "request")
        .collect();
    assert_eq!(requests.len(), 5, "{stdout}");
    for r in &requests {
        assert_eq!(r["output_tokens"], 6);
        assert_eq!(r["client"]["endpoint"], server.url());
    }
    let ttft = median(
        requests
            .iter()
            .map(|r| r["ttft_s"].as_f64().unwrap())
            .collect(),
    );
    assert!(near(ttft, 20.0, 5.0), "{ttft}");
    assert_eq!(requests.iter().filter(|r| r["warmup"] == true).count(), 1);
    // The summary counts the four steady requests.
    assert!(stdout.contains("\"requests\""), "{stdout}");
    // The key went to the server, and nowhere else.
    assert!(server
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|(auth, _)| auth == "Bearer sk-very-secret"));
    let recorded = std::fs::read_to_string(&record).unwrap();
    for text in [&*stdout, &*stderr, &recorded] {
        assert!(!text.contains("sk-very-secret"));
    }
    assert!(recorded.contains("\"engine\":\"http\""), "{recorded}");
}

#[test]
fn connection_refused_fails_every_request_and_exits_1() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("refused.jsonl");
    let out = infertop()
        .args(["--endpoint", &url, "--served-model", "m", "--requests", "3"])
        .args([
            "--headless",
            "--no-telemetry",
            "--format",
            "json",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let failed = stdout
        .lines()
        .filter(|l| l.contains("\"type\":\"request_failed\""))
        .count();
    assert_eq!(failed, 3, "{stdout}");
    assert!(stderr.contains("every request failed"), "{stderr}");
    assert!(stderr.contains("connection refused"), "{stderr}");
    // The failures are in the record and the summary, and `report` counts them the same.
    let recorded = std::fs::read_to_string(&record).unwrap();
    let lines = recorded
        .lines()
        .filter(|l| l.contains("\"type\":\"request_failed\""))
        .count();
    assert_eq!(lines, 3, "{recorded}");
    assert!(stdout.contains("\"failed_requests\":3"), "{stdout}");
    let report = infertop()
        .args(["report", "--no-probe"])
        .arg(&record)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("3 failed of 3 (100.0% errors)"), "{text}");

    // Without --served-model the model list is asked first: one clear line, exit 1.
    let out = infertop()
        .args([
            "--endpoint",
            &url,
            "--requests",
            "3",
            "--headless",
            "--no-telemetry",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot list the models"), "{stderr}");
}

#[test]
fn endpoint_flag_mistakes_are_one_line_and_exit_2() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--api", "chat"],
            "--endpoint <URL> is needed by the flags given",
        ),
        (
            &["--endpoint", "localhost:8000"],
            "has no scheme (write http://localhost:8000",
        ),
        (&["--endpoint", "ftp://x"], "only http:// and https://"),
        (
            &["--endpoint", "http://127.0.0.1:1", "--rate", "0"],
            "--rate: `0` is not a rate",
        ),
        (
            &["--endpoint", "http://127.0.0.1:1", "--batch", "2"],
            "use --concurrency",
        ),
    ];
    for (args, message) in cases {
        let out = infertop().args(args).arg("--headless").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

/// `--prompt-file` against a server: the given texts go out as they are, cycled per request, and
/// with `--tokenizer` their lengths are counted in it (else estimated, and said to be).
#[test]
fn prompt_files_are_sent_as_written() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(2),
        tokens: 2,
        usage: None,
    });
    let dir = tempfile::tempdir().unwrap();
    let tk_path = dir.path().join("tk.json");
    let tk = infertop::model::tokenizer::train_bpe(2048).unwrap();
    tk.save(&tk_path, false).unwrap();
    let lines = [
        "The quick brown fox jumps over the lazy dog.",
        "Summarise the following: a measuring instrument must not change what it measures.",
        "\"Quotes\", tabs\tand ünïcödé survive the trip.",
    ];
    let prompts = dir.path().join("prompts.txt");
    std::fs::write(
        &prompts,
        format!("{}\n\n{}\n{}\n", lines[0], lines[1], lines[2]),
    )
    .unwrap();
    let record = dir.path().join("run.jsonl");
    for (tokenizer, from) in [(true, "tokenizer"), (false, "approx")] {
        let mut cmd = infertop();
        cmd.args(["--endpoint", &server.url(), "--served-model", "m"])
            .args(["--requests", "6", "--warmup", "0", "-n", "2", "--headless"])
            .arg("--prompt-file")
            .arg(&prompts)
            .arg("--record")
            .arg(&record);
        if tokenizer {
            cmd.arg("--tokenizer").arg(&tk_path);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&record).unwrap();
        let requests: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["type"] == "request")
            .collect();
        assert_eq!(requests.len(), 6);
        for r in &requests {
            let i = r["index"].as_u64().unwrap() as usize;
            let c = &r["client"];
            assert_eq!(c["prompt_tokens_from"], from, "{r}");
            if tokenizer {
                let n = tk.encode(lines[i % 3], false).unwrap().get_ids().len();
                assert_eq!(r["prompt_tokens"], n, "{r}");
            }
        }
    }
    // Both runs sent every line twice, byte for byte.
    let seen = server.seen.lock().unwrap();
    let mut sent: Vec<String> = seen
        .iter()
        .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
        .filter_map(|b| b["prompt"].as_str().map(str::to_string))
        .collect();
    sent.sort();
    let mut want: Vec<String> = lines.iter().flat_map(|l| vec![l.to_string(); 4]).collect();
    want.sort();
    assert_eq!(sent, want);
}

/// `--tokenizer server`: the server's own /tokenize finds its one-token words (a BOS it adds to
/// every count is measured and taken off), so prompts are exactly the asked length in its
/// tokenizer; given prompts are counted by it.
#[test]
fn the_servers_tokenize_makes_prompts_of_exact_length() {
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(2),
        tokens: 2,
        usage: None,
    });
    let tk = infertop::model::tokenizer::train_bpe(2048).unwrap();
    let mut cfg = config(&server.url(), 3);
    cfg.traffic.prompt = Some(LenSpec::parse("5,100,37").unwrap());
    cfg.prompts = infertop::engine::http::Prompts::Server { texts: None };
    let events = run_engine(cfg);
    let mut asked: Vec<usize> = done(&events)
        .iter()
        .map(|r| {
            assert_eq!(r.client.as_ref().unwrap().prompt_tokens_from, "tokenizer");
            r.prompt_tokens
        })
        .collect();
    asked.sort_unstable();
    assert_eq!(asked, [5, 37, 100]);
    let prompt_lens = |server: &Server| {
        let mut lens: Vec<usize> = server
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
            .filter_map(|b| b["prompt"].as_str().map(str::to_string))
            .map(|p| tk.encode(p.as_str(), false).unwrap().get_ids().len())
            .collect();
        lens.sort_unstable();
        lens
    };
    assert_eq!(prompt_lens(&server), [5, 37, 100]);

    // Given texts are counted by the server, its BOS taken off.
    let server = Server::start(Script::Stream {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(2),
        tokens: 2,
        usage: None,
    });
    let texts = vec![
        "a measuring instrument".to_string(),
        "must not change what it measures, at any load".to_string(),
    ];
    let mut cfg = config(&server.url(), 2);
    cfg.prompts = infertop::engine::http::Prompts::Server {
        texts: Some(std::sync::Arc::new(texts.clone())),
    };
    let events = run_engine(cfg);
    for r in done(&events) {
        let text = &texts[r.index as usize % 2];
        assert_eq!(
            r.prompt_tokens,
            tk.encode(text.as_str(), false).unwrap().get_ids().len(),
            "{text}"
        );
    }
    assert_eq!(done(&events).len(), 2);
}

/// `--chunk-usage`: the request asks for the running usage in every chunk, and a chunk that
/// carried several tokens (speculative decoding) is recorded with its count; TPOT divides by
/// the tokens, not the chunks.
#[test]
fn chunks_of_several_tokens_are_recorded_with_their_count() {
    let per_chunk = vec![1, 3, 1, 2, 4];
    let server = Server::start(Script::Speculative(per_chunk.clone()));
    let mut cfg = config(&server.url(), 2);
    cfg.chunk_usage = true;
    let events = run_engine(cfg);
    let done = done(&events);
    assert_eq!(done.len(), 2, "{events:?}");
    for r in &done {
        let c = r.client.as_ref().unwrap();
        assert_eq!(c.content_chunks, 5);
        assert_eq!(
            c.chunk_tokens,
            per_chunk.iter().map(|&n| n as u32).collect::<Vec<_>>()
        );
        assert_eq!(
            (r.output_tokens, c.output_tokens_from.as_str()),
            (11, "usage")
        );
        let tpot = r.tpot_s.unwrap();
        assert!((tpot - (r.e2e_s - r.ttft_s) / 10.0).abs() < 1e-12);
    }
    let seen = server.seen.lock().unwrap();
    let asked: Vec<Value> = seen
        .iter()
        .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
        .filter(|b| b.get("prompt").is_some())
        .collect();
    assert!(!asked.is_empty());
    for b in asked {
        assert_eq!(b["stream_options"]["continuous_usage_stats"], true, "{b}");
    }
}
