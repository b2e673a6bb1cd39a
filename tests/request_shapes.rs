//! The request shapes of reasoning models and agents against an in-process server that streams
//! each API's own events with exact, injected timings (`common::shapes_server`): reasoning then
//! answer (TTFT, TTFA, the reasoning's time and tokens), tool calls (counted as output, a
//! conversation answering them after the simulated tool time), the Responses and Messages APIs,
//! embeddings and rerank (timed whole, with their batch), `--api auto`, and requests spread
//! over weighted models, each figure split by model. Every wait is bounded; nothing leaves the
//! loopback interface.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;
use common::shapes_server::{ShapesServer, Truth};
use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig, Shape, ToolChoice, Tools};
use infertop::event::{Control, Event, RequestDone};
use infertop::fold::RunFold;
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;
use serde_json::{json, Value};

fn config(url: &str, api: Api, requests: u64) -> HttpConfig {
    HttpConfig {
        endpoints: vec![Endpoint::parse(url).unwrap()],
        api,
        served_model: None,
        api_key: None,
        traffic: TrafficPlan {
            warmup: 0,
            requests: Some(requests),
            ..TrafficPlan::made_up(LenSpec::Fixed(16), LenSpec::Fixed(32), 0)
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
        start_at: None,
        prompt_salt: 0,
        cancel: None,
        canary: None,
        shape: Shape {
            batch: 1,
            ..Shape::default()
        },
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

fn failures(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RequestFailed(f) => Some(f.reason.clone()),
            Event::Error { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The median (these tests share two busy cores: one late wake-up must not fail them, a
/// shifted median must).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Within `tol_ms` above the truth (a chunk is seen only after it was sent) and 1 ms below.
fn near(measured_s: f64, truth_ms: f64, tol_ms: f64) -> bool {
    let ms = measured_s * 1e3;
    ms >= truth_ms - 1.0 && ms <= truth_ms + tol_ms
}

fn fold(events: &[Event]) -> RunFold {
    let mut f = RunFold::new();
    for e in events {
        f.apply(e);
    }
    f
}

fn tools() -> Arc<Tools> {
    Arc::new(Tools {
        defs: infertop::traffic::tools::parse_tools(
            r#"[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]"#,
        )
        .unwrap(),
        choice: Some(ToolChoice::Auto),
    })
}

/// The reasoning tokens the server's usage counts (its chunks carry more than one token).
const USAGE_REASONING: u64 = 12;
/// The reasoning chunks it streams.
const REASONING_CHUNKS: u64 = 8;

/// 8 reasoning chunks then 6 answer tokens, the first after 40 ms, one every 10 ms: TTFT 40,
/// TTFA 40 + 8·10 = 120, reasoning 80 ms; the server's usage counts 12 reasoning tokens (and
/// 12 + 6 completion tokens), so a run that takes its count is told from one that counts the
/// chunks.
fn reasoning_truth() -> Truth {
    Truth {
        ttft: Duration::from_millis(40),
        itl: Duration::from_millis(10),
        reasoning: REASONING_CHUNKS as usize,
        answer: 6,
        usage_reasoning: Some(USAGE_REASONING as usize),
        apis: vec!["chat", "completions", "responses", "messages"],
        ..Truth::default()
    }
}

/// Checks a reasoning run's requests against `reasoning_truth`; `from`: where the reasoning
/// tokens come from (`usage`: the server's 12; `counted`: the 8 chunks streamed).
fn check_reasoning(events: &[Event], from: &str) {
    let reasoning = if from == "usage" {
        USAGE_REASONING
    } else {
        REASONING_CHUNKS
    };
    let output = reasoning + 6;
    let d = done(events);
    assert_eq!(d.len(), 5, "{:?}", failures(events));
    let ttft = median(d.iter().map(|r| r.ttft_s).collect());
    let parts: Vec<_> = d.iter().map(|r| r.parts.as_deref().unwrap()).collect();
    let ttfa = median(parts.iter().map(|p| p.ttfa_s.unwrap()).collect());
    let think = median(parts.iter().map(|p| p.reasoning_s.unwrap()).collect());
    eprintln!(
        "reasoning ({from}): TTFT p50 {:.1} ms (truth 40), TTFA {:.1} ms (120), reasoning {:.1} ms (80), {} reasoning tokens ({reasoning}), {} output ({output}), {} answer (6)",
        ttft * 1e3,
        ttfa * 1e3,
        think * 1e3,
        parts[0].reasoning_tokens,
        d[0].output_tokens,
        parts[0].answer_tokens(d[0].output_tokens)
    );
    assert!(near(ttft, 40.0, 8.0), "TTFT {ttft}");
    assert!(near(ttfa, 120.0, 8.0), "TTFA {ttfa}");
    assert!((think * 1e3 - 80.0).abs() < 8.0, "reasoning {think}");
    for (r, p) in d.iter().zip(&parts) {
        assert_eq!(r.output_tokens as u64, output);
        assert_eq!(
            (p.reasoning_tokens as u64, p.reasoning_tokens_from.as_str()),
            (reasoning, from)
        );
        assert_eq!(p.answer_tokens(r.output_tokens), 6);
        assert!(!p.ended_in_tool_call);
        // TTFT is the first token of any kind: the reasoning's.
        assert!(p.ttfa_s.unwrap() > r.ttft_s + 0.05);
    }
    let s = fold(events).summary();
    let r = s
        .reasoning
        .expect("the summary splits thinking from answering");
    assert_eq!((r.requests, r.reasoning_requests), (5, 5));
    assert!(near(r.ttfa_s.p50, 120.0, 8.0), "{:?}", r.ttfa_s);
    assert_eq!(
        (r.reasoning_tokens.p50, r.reasoning_tokens.n),
        (reasoning as f64, 5)
    );
}

#[test]
fn chat_reasoning_splits_at_the_first_answer_token() {
    let server = ShapesServer::start(reasoning_truth());
    check_reasoning(&run_engine(config(&server.url, Api::Chat, 5)), "usage");
    // Without the server's count, the reasoning chunks are counted.
    let server = ShapesServer::start(Truth {
        usage_reasoning: None,
        ..reasoning_truth()
    });
    check_reasoning(&run_engine(config(&server.url, Api::Chat, 5)), "counted");
}

#[test]
fn the_responses_api_streams_reasoning_and_answer_events() {
    let server = ShapesServer::start(reasoning_truth());
    let events = run_engine(config(&server.url, Api::Responses, 5));
    check_reasoning(&events, "usage");
    let body = &server.requests()[0].body;
    assert_eq!(
        (body["max_output_tokens"].as_u64(), body["stream"].as_bool()),
        (Some(32), Some(true))
    );
    assert!(body["input"].is_string(), "{body}");
    assert_eq!(server.requests()[0].path, "/v1/responses");
}

#[test]
fn the_messages_api_sends_its_headers_and_counts_thinking() {
    let server = ShapesServer::start(reasoning_truth());
    let mut cfg = config(&server.url, Api::Messages, 5);
    cfg.api_key = Some("sk-ant-test".into());
    let events = run_engine(cfg);
    check_reasoning(&events, "counted");
    for seen in server.requests() {
        assert_eq!(seen.path, "/v1/messages");
        assert_eq!(
            seen.headers.get("x-api-key").map(String::as_str),
            Some("sk-ant-test")
        );
        assert_eq!(
            seen.headers.get("anthropic-version").map(String::as_str),
            Some("2023-06-01")
        );
        assert!(
            !seen.headers.contains_key("authorization"),
            "{:?}",
            seen.headers
        );
        assert_eq!(seen.body["messages"][0]["role"], "user");
        assert_eq!(seen.body["max_tokens"], 32);
    }
    // The usage of message_start and message_delta: prompt and output tokens.
    let d = done(&events);
    assert!(d.iter().all(|r| r.prompt_tokens == 7));
}

/// A tool call of 6 tokens (its name first, then its arguments), the first after 40 ms, one
/// every 10 ms: every piece is a token, the first one the TTFT.
#[test]
fn tool_call_deltas_are_output_in_every_api() {
    let truth = Truth {
        ttft: Duration::from_millis(40),
        itl: Duration::from_millis(10),
        answer: 6,
        apis: vec!["chat", "responses", "messages"],
        ..Truth::default()
    };
    for api in [Api::Chat, Api::Responses, Api::Messages] {
        let server = ShapesServer::start(truth.clone());
        let mut cfg = config(&server.url, api, 4);
        cfg.shape.tools = Some(tools());
        cfg.shape.tool_choice = Some(ToolChoice::Auto);
        let events = run_engine(cfg);
        let d = done(&events);
        assert_eq!(d.len(), 4, "{api:?}: {:?}", failures(&events));
        let ttft = median(d.iter().map(|r| r.ttft_s).collect());
        let e2e = median(d.iter().map(|r| r.e2e_s).collect());
        eprintln!(
            "tool call over {api:?}: TTFT p50 {:.1} ms (truth 40), E2E {:.1} ms (90), {} chunks counted (6), ended in a tool call: {}",
            ttft * 1e3,
            e2e * 1e3,
            d[0].client.as_ref().unwrap().content_chunks,
            d.iter().all(|r| r.parts.as_ref().is_some_and(|p| p.ended_in_tool_call))
        );
        assert!(near(ttft, 40.0, 8.0), "{api:?} TTFT {ttft}");
        assert!(near(e2e, 90.0, 10.0), "{api:?} E2E {e2e}");
        for r in &d {
            assert_eq!(r.client.as_ref().unwrap().content_chunks, 6, "{api:?}");
            assert_eq!(r.output_tokens, 6);
            let p = r.parts.as_deref().unwrap();
            assert!(p.ended_in_tool_call, "{api:?}: {p:?}");
            assert_eq!((p.tool_calls, p.reasoning_tokens), (1, 0));
            assert!(near(p.ttfa_s.unwrap(), 40.0, 10.0));
        }
        let body = &server.requests()[0].body;
        match api {
            Api::Chat => {
                assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
                assert_eq!(body["tool_choice"], "auto");
            }
            Api::Responses => {
                assert_eq!(body["tools"][0]["name"], "get_weather");
                assert_eq!(body["tool_choice"], "auto");
            }
            _ => {
                assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
                assert_eq!(body["tool_choice"]["type"], "auto");
            }
        }
        let s = fold(&events).summary().reasoning.unwrap();
        assert_eq!(
            (
                s.tool_call_requests,
                s.ended_in_tool_call,
                s.reasoning_requests
            ),
            (4, 4, 0)
        );
    }
}

/// Two conversations of two turns, tools offered, a tool time of 150 ms: each turn's first
/// reply calls the tool; 150 ms after it ended the result goes back (the call's id, the
/// dataset's result or a made-up one), and the answer to it ends the turn.
#[test]
fn conversations_answer_tool_calls_after_the_tool_time() {
    let server = ShapesServer::start(Truth {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        answer: 4,
        ..Truth::default()
    });
    let mut cfg = config(&server.url, Api::Chat, 100);
    cfg.traffic.requests = None;
    let convs = infertop::traffic::synthetic_conversations(2, 2, &LenSpec::Fixed(8), 0);
    cfg.traffic.conversations = Some(Arc::new(infertop::traffic::Conversations {
        list: convs,
        turns: infertop::traffic::Turns::All,
        think: None,
        dataset: None,
        exact_lengths: false,
    }));
    cfg.shape.tools = Some(tools());
    cfg.shape.tool_time = Some(infertop::traffic::ThinkTime::Fixed(Duration::from_millis(
        150,
    )));
    let events = run_engine(cfg);
    let d = done(&events);
    // Per turn: the call, then the answer to its result.
    assert_eq!(d.len(), 8, "{:?}", failures(&events));
    let calls = d
        .iter()
        .filter(|r| r.parts.as_ref().is_some_and(|p| p.ended_in_tool_call))
        .count();
    assert_eq!(calls, 4);
    let rounds: Vec<Option<u32>> = d
        .iter()
        .map(|r| r.origin.as_ref().unwrap().tool_round)
        .collect();
    assert_eq!(
        rounds.iter().filter(|r| **r == Some(1)).count(),
        4,
        "{rounds:?}"
    );
    let seen = server.requests();
    assert_eq!(seen.len(), 8);
    for (i, s) in seen.iter().enumerate() {
        let messages = s.body["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        if last["role"] != "tool" {
            continue;
        }
        assert_eq!(last["tool_call_id"], "call_7");
        let call = &messages[messages.len() - 2];
        assert_eq!(call["tool_calls"][0]["function"]["name"], "get_weather");
        assert_eq!(
            call["tool_calls"][0]["function"]["arguments"],
            r#"{"x":11}"#
        );
        // The tool's time, from the end of the reply that called it.
        let before = seen[..i]
            .iter()
            .rev()
            .find(|p| p.body["messages"].as_array().unwrap().len() == messages.len() - 2)
            .unwrap();
        let gap = s.at - before.ended.unwrap();
        eprintln!(
            "tool time: the result went back {gap:?} after the call's reply ended (truth 150 ms)"
        );
        assert!(
            gap >= Duration::from_millis(149) && gap < Duration::from_millis(400),
            "{gap:?}"
        );
    }
    assert_eq!(
        seen.iter()
            .filter(|s| s.body["messages"].as_array().unwrap().last().unwrap()["role"] == "tool")
            .count(),
        4
    );
}

/// A dataset row of two user turns, each answered by the assistant calling a tool whose result
/// the row holds (`role: tool`), sent as a conversation with tools and `--tool-time 120ms`:
/// each turn's tool call is answered 120 ms after the reply that made it, by a tool message
/// carrying that turn's result from the row (not a made-up one), then the answer.
#[test]
fn a_datasets_tool_results_go_back_to_the_server() {
    let server = ShapesServer::start(Truth {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        answer: 4,
        ..Truth::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tool-rows.jsonl");
    let tools = json!([{"type":"function","function":{"name":"get_weather","description":"the weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]);
    let row = json!({"messages":[
        {"role":"system","content":"answer with the tool"},
        {"role":"user","content":"weather in Oslo?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"sunny, 21 C"},
        {"role":"assistant","content":"Sunny and 21 C in Oslo."},
        {"role":"user","content":"and in Bergen?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Bergen\"}"}}]},
        {"role":"tool","tool_call_id":"c2","content":"rain, 12 C"},
        {"role":"assistant","content":"Rain and 12 C in Bergen."}
    ], "tools": tools});
    std::fs::write(&path, format!("{row}\n")).unwrap();
    let out = infertop()
        .args(["--endpoint", &server.url, "--api", "chat", "--dataset"])
        .arg(&path)
        .args(["--turns", "all", "--tool-time", "120ms", "--warmup", "0"])
        .args(["--headless", "--no-telemetry", "--format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Per turn: the call, then the answer to its result.
    let seen = server.requests();
    assert_eq!(seen.len(), 4, "{stdout}");
    let tool_messages: Vec<(usize, &Value)> = seen
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let last = s.body["messages"].as_array()?.last()?;
            (last["role"] == "tool").then_some((i, last))
        })
        .collect();
    assert_eq!(tool_messages.len(), 2, "{seen:?}");
    for ((i, tool), (city, result)) in tool_messages
        .iter()
        .zip([("Oslo", "sunny, 21 C"), ("Bergen", "rain, 12 C")])
    {
        let messages = seen[*i].body["messages"].as_array().unwrap();
        // The call it answers: the server's, the reply just before it.
        let call = &messages[messages.len() - 2];
        assert_eq!(call["tool_calls"][0]["id"], "call_7");
        assert_eq!(tool["tool_call_id"], "call_7");
        // That turn's user message, then the row's result for it.
        let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
        assert!(user["content"].as_str().unwrap().contains(city), "{user}");
        let gap = seen[*i].at - seen[*i - 1].ended.unwrap();
        eprintln!(
            "dataset tool result: turn \"{}\" got the tool message {} (truth {result:?}) {gap:?} after the call's reply ended (truth 120 ms)",
            user["content"].as_str().unwrap(),
            tool["content"]
        );
        assert_eq!(tool["content"], result, "{tool}");
        assert!(
            gap >= Duration::from_millis(119) && gap < Duration::from_millis(400),
            "{gap:?}"
        );
    }
    // The second turn's history holds the first turn's tool round, as sent.
    let last = seen[3].body["messages"].as_array().unwrap();
    assert!(
        last.iter()
            .any(|m| m["role"] == "tool" && m["content"] == "sunny, 21 C"),
        "{last:?}"
    );
    assert_eq!(seen[0].body["messages"][0]["role"], "system");
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "get_weather");
}

/// `--batch 4` inputs per request, answered whole after 30 ms: TTFT = E2E = 30 ms, batch 4,
/// the server's prompt tokens per input, and the input throughput (the summary's prefill tok/s)
/// 4 × the tokens per input / 30 ms.
#[test]
fn embeddings_and_rerank_are_timed_whole_with_their_batch() {
    let server = ShapesServer::start(Truth {
        pool_latency: Duration::from_millis(30),
        apis: vec!["embeddings", "rerank"],
        ..Truth::default()
    });
    for api in [Api::Embeddings, Api::Rerank] {
        let mut cfg = config(&server.url, api, 5);
        cfg.shape.batch = 4;
        let events = run_engine(cfg);
        let d = done(&events);
        assert_eq!(d.len(), 5, "{api:?}: {:?}", failures(&events));
        let latency = median(d.iter().map(|r| r.e2e_s).collect());
        // Prompts of 16 made-up words; a rerank's input is the query with a document.
        let per_input = if api == Api::Rerank { 32 } else { 16 };
        let s = fold(&events).summary();
        let throughput = s.steady.get(infertop::stats::Metric::PrefillTokS);
        // The truth: 4 inputs of `per_input` tokens in 30 ms.
        let truth_tok_s = (4 * per_input) as f64 / 0.030;
        eprintln!(
            "{api:?}: latency p50 {:.1} ms (truth 30), batch {} (4), prompt tokens per input {} ({per_input}), input throughput p50 {:.0} tok/s (truth 4 × {per_input} / 30 ms = {truth_tok_s:.0}; 4 × {per_input} / its own latency p50 = {:.0}), n {}",
            latency * 1e3,
            d[0].batch,
            d[0].prompt_tokens,
            throughput.p50,
            (4 * per_input) as f64 / latency,
            throughput.n
        );
        assert!(near(latency, 30.0, 8.0), "{api:?} {latency}");
        for r in &d {
            assert_eq!((r.batch, r.output_tokens, r.tpot_s), (4, 0, None));
            assert_eq!(r.ttft_s, r.e2e_s);
            assert_eq!(r.prompt_tokens, per_input, "{api:?}");
        }
        // Throughput per request is the batch's tokens over its latency: the median of 5 is
        // the one at the median latency, exactly; against the truth, within the latency's
        // tolerance (29 to 38 ms).
        assert_eq!(throughput.n, 5);
        let own = (4 * per_input) as f64 / latency;
        assert!(
            (throughput.p50 - own).abs() < 1e-6 * own,
            "{api:?}: {throughput:?} against {own}"
        );
        assert!(
            throughput.p50 <= truth_tok_s * 30.0 / 29.0
                && throughput.p50 >= truth_tok_s * 30.0 / 38.0,
            "{api:?}: {} tok/s against {truth_tok_s}",
            throughput.p50
        );
        assert!(s.steady.get(infertop::stats::Metric::Tpot).n == 0);
        assert!(s.steady.get(infertop::stats::Metric::DecodeTokS).n == 0);
        // The printed summary shows it (as docs/measure-a-server.md says: prefill tok/s is the
        // input throughput of a pooling run).
        let table = s.render(infertop::summary::SummaryFormat::Md);
        let row = table
            .lines()
            .find(|l| l.starts_with("| prefill tok/s |"))
            .unwrap_or_default();
        assert!(
            row.contains(&format!("| {:.1} |", throughput.p50)) && row.ends_with("| 5 |"),
            "{table}"
        );
    }
    let seen = server.requests();
    assert_eq!(seen[0].body["input"].as_array().unwrap().len(), 4);
    assert_eq!(seen[5].body["documents"].as_array().unwrap().len(), 4);
    assert!(seen[5].body["query"].is_string());
}

/// `--served-model a=3,b=1`: each request to one, drawn from its own seeded draws (the same
/// for a seed, run after run), b slower than a; the fold splits every figure by model.
#[test]
fn weighted_models_split_every_figure_with_n() {
    let server = ShapesServer::start(Truth {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        answer: 4,
        model_ttft: vec![("b", Duration::from_millis(60))],
        ..Truth::default()
    });
    let run = |seed: u64| {
        let mut cfg = config(&server.url, Api::Chat, 40);
        cfg.served_model = Some("a".into());
        cfg.shape.models = vec![("a".into(), 3), ("b".into(), 1)];
        cfg.traffic.seed = seed;
        cfg.concurrency = Some(8);
        run_engine(cfg)
    };
    let events = run(7);
    let d = done(&events);
    assert_eq!(d.len(), 40, "{:?}", failures(&events));
    let picks = |d: &[&RequestDone]| {
        let mut v: Vec<(u64, String)> = d
            .iter()
            .map(|r| (r.index, r.model.clone().unwrap()))
            .collect();
        v.sort();
        v
    };
    let first = picks(&d);
    let b = first.iter().filter(|(_, m)| m == "b").count();
    assert!((4..=17).contains(&b), "b took {b} of 40 (weight 1 of 4)");
    // The request went to the model its record names.
    let seen = server.requests();
    assert_eq!(seen.iter().filter(|s| s.body["model"] == "b").count(), b);
    // The same seed draws the same models.
    assert_eq!(picks(&done(&run(7))), first);
    let s = fold(&events).summary();
    assert_eq!(s.models.len(), 2);
    let (ma, mb) = (&s.models[0], &s.models[1]);
    assert_eq!((ma.model.as_str(), mb.model.as_str()), ("a", "b"));
    assert_eq!((ma.requests + mb.requests) as usize, 40);
    assert_eq!(mb.requests as usize, b);
    eprintln!(
        "models a=3,b=1: a n {} TTFT p50 {:.1} ms (truth 20), b n {} TTFT p50 {:.1} ms (truth 60); same picks for the same seed",
        ma.requests,
        ma.ttft_s.p50 * 1e3,
        mb.requests,
        mb.ttft_s.p50 * 1e3
    );
    assert!(near(ma.ttft_s.p50, 20.0, 8.0), "{:?}", ma.ttft_s);
    assert!(near(mb.ttft_s.p50, 60.0, 8.0), "{:?}", mb.ttft_s);
    assert_eq!(ma.itl_s.n as u64, ma.requests * 3);
}

/// A BFCL-style row (`question`, `function`) carries its tools to the server, in OpenAI's
/// shape (`dict` made `object`); its text is the first user message.
#[test]
fn bfcl_rows_carry_their_tools() {
    let server = ShapesServer::start(Truth::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bfcl.jsonl");
    let rows = [
        json!({"id":"simple_0","question":[[{"role":"user","content":"What is the area of a triangle with base 10 and height 5?"}]],
               "function":[{"name":"calculate_triangle_area","description":"area","parameters":{"type":"dict","properties":{"base":{"type":"integer"},"height":{"type":"integer"}},"required":["base","height"]}}]}),
        json!({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"weather in Oslo?"},
                           {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
                           {"role":"tool","tool_call_id":"c","content":"sunny"}],
               "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}),
    ];
    std::fs::write(
        &path,
        rows.iter()
            .map(|r| r.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let out = std::process::Command::cargo_bin("infertop")
        .unwrap()
        .args(["--endpoint", &server.url, "--api", "chat", "--dataset"])
        .arg(&path)
        .args([
            "--warmup",
            "0",
            "-n",
            "4",
            "--headless",
            "--no-telemetry",
            "--tool-choice",
            "required",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    let a = &seen[0].body;
    assert_eq!(a["tools"][0]["function"]["name"], "calculate_triangle_area");
    assert_eq!(a["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(a["tool_choice"], "required");
    assert_eq!(a["messages"].as_array().unwrap().len(), 1);
    let b = &seen[1].body;
    assert_eq!(b["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].clone())
            .collect::<Vec<_>>(),
        vec![json!("system"), json!("user")]
    );
    // The server called the tool: the request lines say so.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ended: Vec<bool> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "request")
        .map(|v| v["parts"]["ended_in_tool_call"] == true)
        .collect();
    assert_eq!(ended, vec![true, true], "{stdout}");
}

fn infertop() -> std::process::Command {
    std::process::Command::cargo_bin("infertop").unwrap()
}

/// `--api auto` picks from the models list where it says, else from the first route the
/// server answers, and says what it picked (on stderr, in the record).
#[test]
fn auto_picks_an_api_and_says_which() {
    let cases = [
        (
            Truth {
                apis: vec!["messages"],
                models: Some(r#"{"data":[{"type":"model","id":"claude-test","display_name":"Claude"}],"has_more":false}"#.into()),
                ..Truth::default()
            },
            "messages",
            "Anthropic",
        ),
        (
            Truth {
                apis: vec!["responses"],
                ..Truth::default()
            },
            "responses",
            "answers POST /v1/responses",
        ),
        (
            Truth {
                apis: vec!["embeddings"],
                models: Some(r#"{"data":[{"id":"bge-m3","capabilities":["embed"]}]}"#.into()),
                ..Truth::default()
            },
            "embeddings",
            "embeds",
        ),
    ];
    for (truth, api, why) in cases {
        let server = ShapesServer::start(truth);
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("run.jsonl");
        let out = infertop()
            .args([
                "--endpoint",
                &server.url,
                "--api",
                "auto",
                "--requests",
                "2",
            ])
            .args(["--warmup", "0", "-n", "4", "--headless", "--no-telemetry"])
            .arg("--record")
            .arg(&record)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{api}: {stderr}");
        assert!(
            stderr.contains(&format!("--api auto: {api} (")) && stderr.contains(why),
            "{api}: {stderr}"
        );
        let text = std::fs::read_to_string(&record).unwrap();
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(header["config"]["api"], api);
        assert!(text.contains("\"api_picked\""), "{text}");
        let posted: Vec<String> = server.requests().iter().map(|s| s.path.clone()).collect();
        assert_eq!(posted.len(), 2, "{api}: {posted:?}");
        assert!(posted.iter().all(|p| p.ends_with(api)), "{posted:?}");
    }
}

/// An API the server lacks, and a tools file that is not JSON: one line, exit 2, nothing sent.
#[test]
fn an_api_the_server_lacks_and_a_bad_tools_file_are_one_line_and_exit_2() {
    let server = ShapesServer::start(Truth::default());
    for api in ["responses", "messages", "embeddings", "rerank"] {
        let out = infertop()
            .args(["--endpoint", &server.url, "--api", api, "--requests", "2"])
            .args(["--headless", "--no-telemetry"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{api}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("--api {api}: {} has no POST /v1/", server.url)),
            "{stderr}"
        );
    }
    let lacking = ShapesServer::start(Truth {
        apis: vec![],
        ..Truth::default()
    });
    let out = infertop()
        .args([
            "--endpoint",
            &lacking.url,
            "--api",
            "auto",
            "--headless",
            "--no-telemetry",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--api auto:") && stderr.contains("answers none of"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("tools.json");
    std::fs::write(&bad, "{\"name\": oops").unwrap();
    let out = infertop()
        .args(["--endpoint", &server.url, "--api", "chat", "--tools"])
        .arg(&bad)
        .args(["--headless", "--no-telemetry"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--tools") && stderr.contains("not JSON"),
        "{stderr}"
    );
    assert!(server.requests().is_empty());
}

/// A headless run with a record: `report` prints thinking and answering apart and the
/// per-model table; `compare` of two such runs splits them by model with n.
#[test]
fn report_and_compare_split_reasoning_and_models() {
    let server = ShapesServer::start(Truth {
        model_ttft: vec![("b", Duration::from_millis(80))],
        ..reasoning_truth()
    });
    let dir = tempfile::tempdir().unwrap();
    let record = |name: &str| dir.path().join(name);
    for name in ["a.jsonl", "b.jsonl"] {
        let out = infertop()
            .args([
                "--endpoint",
                &server.url,
                "--api",
                "chat",
                "--served-model",
                "a=1,b=1",
            ])
            .args([
                "--requests",
                "12",
                "--warmup",
                "2",
                "--concurrency",
                "4",
                "-n",
                "16",
            ])
            .args(["--headless", "--no-telemetry", "--record"])
            .arg(record(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = infertop()
        .arg("report")
        .arg(record("a.jsonl"))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("thinking and answering (steady requests): 10 of 10 reasoned (tokens: the server's counts)"), "{report}");
    assert!(report.contains("| TTFA (first answer) |"), "{report}");
    assert!(report.contains("| model | n | failed |"), "{report}");
    let row = |m: &str| {
        report
            .lines()
            .find(|l| l.starts_with(&format!("| {m} |")))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert!(!row("a").is_empty() && !row("b").is_empty(), "{report}");
    let json_out = infertop()
        .args(["report", "--format", "json"])
        .arg(record("a.jsonl"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let models = v["models"].as_array().unwrap();
    let n: u64 = models.iter().map(|m| m["requests"].as_u64().unwrap()).sum();
    assert_eq!(n, 10);
    // The truth of each model's n: the steady request lines of the record that name it.
    let steady_of = |name: &str| -> Vec<(String, u64)> {
        let text = std::fs::read_to_string(record(name)).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        ["a", "b"]
            .iter()
            .map(|m| {
                let n = lines
                    .iter()
                    .filter(|l| l["type"] == "request" && l["warmup"] != true && l["model"] == *m)
                    .count() as u64;
                (m.to_string(), n)
            })
            .collect()
    };
    let (steady_a, steady_b) = (steady_of("a.jsonl"), steady_of("b.jsonl"));
    // a: TTFT 40, TTFA 40 + 8·10; b: TTFT 80, TTFA 160; both one token every 10 ms.
    for (m, ttft, ttfa) in [("a", 40.0, 120.0), ("b", 80.0, 160.0)] {
        let row = models.iter().find(|r| r["model"] == m).unwrap();
        let truth_n = steady_a.iter().find(|(x, _)| x == m).unwrap().1;
        eprintln!(
            "report by model {m}: n {} (truth {truth_n} steady request lines), TTFT p50 {:.1} ms (truth {ttft}), TTFA p50 {:.1} ms (truth {ttfa}), ITL p50 {:.1} ms (truth 10), ITL n {} (truth 13 a request)",
            row["requests"],
            row["ttft_s"]["p50"].as_f64().unwrap() * 1e3,
            row["ttfa_s"]["p50"].as_f64().unwrap() * 1e3,
            row["itl_s"]["p50"].as_f64().unwrap() * 1e3,
            row["itl_s"]["n"]
        );
        assert_eq!(row["requests"].as_u64(), Some(truth_n), "{row}");
        assert!(
            near(row["ttft_s"]["p50"].as_f64().unwrap(), ttft, 10.0),
            "{row}"
        );
        assert!(
            near(row["ttfa_s"]["p50"].as_f64().unwrap(), ttfa, 10.0),
            "{row}"
        );
        assert!(
            near(row["itl_s"]["p50"].as_f64().unwrap(), 10.0, 3.0),
            "{row}"
        );
        assert_eq!(
            row["itl_s"]["n"].as_u64().unwrap(),
            row["requests"].as_u64().unwrap() * 13
        );
    }
    assert!(
        near(
            v["reasoning"]["reasoning_s"]["p50"].as_f64().unwrap(),
            80.0,
            8.0
        ),
        "{v}"
    );
    eprintln!(
        "report: reasoning p50 {:.1} ms (truth 80), reasoning tokens p50 {} (truth {USAGE_REASONING}, the server's count)",
        v["reasoning"]["reasoning_s"]["p50"].as_f64().unwrap() * 1e3,
        v["reasoning"]["reasoning_tokens"]["p50"]
    );
    assert_eq!(
        v["reasoning"]["reasoning_tokens"]["p50"],
        USAGE_REASONING as f64
    );
    let out = infertop()
        .arg("compare")
        .arg(record("a.jsonl"))
        .arg(record("b.jsonl"))
        .output()
        .unwrap();
    let cmp = String::from_utf8_lossy(&out.stdout);
    assert!(cmp.contains("### Thinking and answering"), "{cmp}");
    assert!(cmp.contains("### By model"), "{cmp}");
    assert!(
        cmp.contains("| a | TTFT |") && cmp.contains("| b | TTFA |"),
        "{cmp}"
    );
    // Each model's row says n on both sides: the records' steady requests to it.
    for ((m, na), (_, nb)) in steady_a.iter().zip(&steady_b) {
        let row = cmp
            .lines()
            .find(|l| l.starts_with(&format!("| {m} | TTFT |")))
            .unwrap();
        assert!(row.contains(&format!("| {na} / {nb} |")), "{row}");
    }
    // The same figures as JSON: n and the medians per model and side, against the truth.
    let out = infertop()
        .args(["compare", "--format", "json"])
        .arg(record("a.jsonl"))
        .arg(record("b.jsonl"))
        .output()
        .unwrap();
    let cmp: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_model = cmp["pairs"][0]["models"].as_array().unwrap();
    assert_eq!(by_model.len(), 2, "{cmp}");
    for (m, truth) in [("a", [40.0, 120.0]), ("b", [80.0, 160.0])] {
        let model = by_model.iter().find(|x| x["model"] == m).unwrap();
        let figure = |key: &str| {
            model["figures"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["figure"] == key)
                .unwrap()
                .clone()
        };
        let truth_n = [&steady_a, &steady_b].map(|s| s.iter().find(|(x, _)| x == m).unwrap().1);
        for (key, truth_ms) in [("ttft_s", truth[0]), ("ttfa_s", truth[1])] {
            let f = figure(key);
            let (base, other) = (&f["base"], &f["other"]);
            eprintln!(
                "compare by model {m} {key}: p50 {:.1} / {:.1} ms (truth {truth_ms}), n {} / {} (truth {} / {})",
                base["p50"].as_f64().unwrap() * 1e3,
                other["p50"].as_f64().unwrap() * 1e3,
                base["n"],
                other["n"],
                truth_n[0],
                truth_n[1]
            );
            assert_eq!(
                (base["n"].as_u64(), other["n"].as_u64()),
                (Some(truth_n[0]), Some(truth_n[1])),
                "{f}"
            );
            for side in [base, other] {
                assert!(
                    near(side["p50"].as_f64().unwrap(), truth_ms, 10.0),
                    "{m} {key}: {f}"
                );
            }
        }
    }
}

/// The candle engine has no tool API: a row's tool definitions are part of its prompt, as a
/// chat template writes them, so the row with tools is the longer prompt by their tokens.
#[test]
fn the_candle_engine_writes_a_rows_tools_into_its_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.jsonl");
    let tools = json!([{"type":"function","function":{"name":"get_weather","description":"the weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]);
    let rows = [
        json!({"messages":[{"role":"user","content":"weather in Oslo?"}],"tools":tools}),
        json!({"messages":[{"role":"user","content":"weather in Oslo?"}]}),
    ];
    std::fs::write(
        &path,
        rows.iter()
            .map(|r| r.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let out = infertop()
        .arg("--dataset")
        .arg(&path)
        .args(["--warmup", "0", "-n", "2", "--headless", "--no-telemetry"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prompts: Vec<u64> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "request")
        .map(|v| v["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(prompts.len(), 2, "{stdout}");
    assert!(prompts[0] > prompts[1] + 20, "{prompts:?}");
}

/// A sweep of a reasoning model over two adapters: every cell keeps thinking apart from
/// answering and splits by model; an API the server lacks stops the sweep before any cell.
#[test]
fn sweeps_keep_thinking_and_models_apart_per_cell() {
    let server = ShapesServer::start(reasoning_truth());
    let dir = tempfile::tempdir().unwrap();
    let sweep_record = dir.path().join("sweep.jsonl");
    let out = infertop()
        .args(["sweep", "--endpoint", &server.url, "--api", "chat"])
        .args([
            "--served-model",
            "a=1,b=1",
            "--concurrency",
            "1,2",
            "-n",
            "16",
        ])
        .args([
            "--warmup",
            "0",
            "--repetitions",
            "4",
            "--no-telemetry",
            "--format",
            "json",
            "--record",
        ])
        .arg(&sweep_record)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_str(stdout.trim()).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{doc}");
    for c in cells {
        let r = &c["reasoning"];
        let ms = |v: &Value| v.as_f64().unwrap() * 1e3;
        let by_model: Vec<String> = c["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{} n {} TTFT p50 {:.1} ms (truth 40) TTFA p50 {:.1} ms (truth 120)",
                    m["model"].as_str().unwrap(),
                    m["requests"],
                    ms(&m["ttft_s"]["p50"]),
                    ms(&m["ttfa_s"]["p50"])
                )
            })
            .collect();
        eprintln!(
            "sweep cell {} (concurrency {}): n {} (truth 4), reasoned {} (4), TTFA p50 {:.1} ms (truth 120), think p50 {:.1} ms (truth 80), TTFT p50 {:.1} ms (truth 40); {}",
            c["cell"],
            c["params"]["concurrency"],
            c["n"],
            r["reasoning_requests"],
            ms(&r["ttfa_s"]["p50"]),
            ms(&r["reasoning_s"]["p50"]),
            ms(&c["ttft"]["p50"]),
            by_model.join("; ")
        );
        assert_eq!(c["n"], 4, "{c}");
        assert_eq!(r["reasoning_requests"], c["n"], "{c}");
        assert!(
            near(r["ttfa_s"]["p50"].as_f64().unwrap(), 120.0, 10.0),
            "{c}"
        );
        assert!((ms(&r["reasoning_s"]["p50"]) - 80.0).abs() < 8.0, "{c}");
        let n: u64 = c["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(n), c["n"].as_u64(), "{c}");
        for m in c["models"].as_array().unwrap() {
            assert!(
                near(m["ttft_s"]["p50"].as_f64().unwrap(), 40.0, 10.0),
                "{m}"
            );
            assert!(
                near(m["ttfa_s"]["p50"].as_f64().unwrap(), 120.0, 10.0),
                "{m}"
            );
        }
    }
    // The same cells as CSV (`report` of the sweep's record): thinking and each model in
    // columns of their own, equal to the JSON's figures.
    let csv = infertop()
        .args(["report", "--format", "csv"])
        .arg(&sweep_record)
        .output()
        .unwrap();
    assert!(
        csv.status.success(),
        "{}",
        String::from_utf8_lossy(&csv.stderr)
    );
    let mut reader = csv::Reader::from_reader(csv.stdout.as_slice());
    let head = reader.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    let field = |row: &csv::StringRecord, name: &str| -> String {
        let i = head
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {head:?}"));
        row.get(i).unwrap().to_string()
    };
    for (row, c) in rows.iter().zip(cells) {
        let num = |name: &str| field(row, name).parse::<f64>().unwrap();
        let r = &c["reasoning"];
        eprintln!(
            "sweep csv cell {}: ttfa_p50_s {} ttfa_p99_s {} ttfa_n {} reasoning_p50_s {} reasoning_tokens_p50 {} (truth {USAGE_REASONING}), served_model_a_n {} served_model_b_n {}",
            field(row, "cell"),
            field(row, "ttfa_p50_s"),
            field(row, "ttfa_p99_s"),
            field(row, "ttfa_n"),
            field(row, "reasoning_p50_s"),
            field(row, "reasoning_tokens_p50"),
            field(row, "served_model_a_n"),
            field(row, "served_model_b_n")
        );
        assert_eq!(num("ttfa_p50_s"), r["ttfa_s"]["p50"].as_f64().unwrap());
        assert_eq!(num("ttfa_p99_s"), r["ttfa_s"]["p99"].as_f64().unwrap());
        assert_eq!(num("ttfa_n"), 4.0);
        assert!(near(num("ttfa_p50_s"), 120.0, 10.0));
        assert_eq!(
            num("reasoning_p50_s"),
            r["reasoning_s"]["p50"].as_f64().unwrap()
        );
        assert_eq!(
            num("reasoning_p99_s"),
            r["reasoning_s"]["p99"].as_f64().unwrap()
        );
        assert_eq!(num("reasoning_tokens_p50"), USAGE_REASONING as f64);
        assert_eq!(num("reasoning_requests"), 4.0);
        for m in c["models"].as_array().unwrap() {
            let name = m["model"].as_str().unwrap();
            let col = |q: &str| format!("served_model_{name}_{q}");
            assert_eq!(Some(num(&col("n")) as u64), m["requests"].as_u64());
            assert_eq!(
                num(&col("ttft_p50_s")),
                m["ttft_s"]["p50"].as_f64().unwrap()
            );
            assert_eq!(
                num(&col("ttfa_p50_s")),
                m["ttfa_s"]["p50"].as_f64().unwrap()
            );
            assert!(near(num(&col("ttft_p50_s")), 40.0, 10.0));
        }
    }
    let md = infertop()
        .args(["sweep", "--endpoint", &server.url, "--api", "chat"])
        .args([
            "--served-model",
            "a=1,b=1",
            "--concurrency",
            "1",
            "-n",
            "16",
        ])
        .args(["--warmup", "0", "--repetitions", "2", "--no-telemetry"])
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("| TTFA p50 | p99 | think p50 |"), "{md}");
    assert!(md.contains("Cell 0 by model: a n "), "{md}");
    let lacking = infertop()
        .args(["sweep", "--endpoint", &server.url, "--api", "embeddings"])
        .args(["--concurrency", "1,2", "--no-telemetry"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&lacking.stderr);
    assert_eq!(lacking.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has no POST /v1/embeddings"), "{stderr}");
}
