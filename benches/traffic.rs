//! Datasets at the scale of real traces: how long reading 1M rows takes and what a row costs
//! in memory (Mooncake JSONL with hash ids, BurstGPT CSV), and how late a replayed trace's
//! requests are sent (the schedule lag) at 1,000 requests/s offered, against a local server.
//!
//! And what conversations in flight cost: 10,000 synthetic conversations at once against a
//! server in another process (that holds every reply a while, so all are in flight), the heap
//! sampled throughout: its peak over the baseline, per conversation, beside the bytes their
//! histories hold, and the heap after they end (a finished conversation's history is dropped).
//!
//! `cargo bench --profile dev --bench traffic` (`TRAFFIC_ROWS=1000000`, `TRAFFIC_RATE=1000`,
//! `TRAFFIC_SECONDS=10`, `TRAFFIC_CONVERSATIONS=10000`).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::event::{Control, Event};
use infertop::stats::Summary;
use infertop::telemetry::alloc::current_bytes;
use infertop::traffic::dataset::{self, ReadOptions};
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;
use infertop::traffic::{DatasetPlan, Order, RequestSource};

fn env(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes `rows` rows of `kind` to a file in `dir`.
fn write_rows(dir: &std::path::Path, kind: &str, rows: u64) -> std::path::PathBuf {
    let path = dir.join(match kind {
        "burstgpt" => "trace.csv",
        _ => "trace.jsonl",
    });
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut rng = infertop::util::SplitMix64::new(1);
    if kind == "burstgpt" {
        writeln!(
            out,
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
        )
        .unwrap();
    }
    for i in 0..rows {
        let input = 64 + rng.below(8000) as u64;
        let output = 1 + rng.below(500) as u64;
        if kind == "burstgpt" {
            let model = if i % 3 == 0 { "GPT-4" } else { "ChatGPT" };
            writeln!(
                out,
                "{},{model},{input},{output},{},Conversation log",
                i as f64 * 0.05,
                input + output
            )
            .unwrap();
        } else {
            // Mooncake: blocks of 512, the first few shared across rows (a system prompt).
            let blocks = input.div_ceil(512);
            let ids: Vec<String> = (0..blocks)
                .map(|b| {
                    if b < 2 {
                        b.to_string()
                    } else {
                        (i * 64 + b).to_string()
                    }
                })
                .collect();
            writeln!(
                out,
                "{{\"timestamp\": {}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": [{}]}}",
                i * 50,
                ids.join(", ")
            )
            .unwrap();
        }
    }
    out.flush().unwrap();
    path
}

fn read_bench(rows: u64) {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["mooncake", "burstgpt"] {
        let path = write_rows(dir.path(), kind, rows);
        let size = std::fs::metadata(&path).unwrap().len();
        let before = current_bytes();
        let t = Instant::now();
        let ds = dataset::read(&path, &ReadOptions::default()).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let held = current_bytes().saturating_sub(before);
        println!(
            "read {kind}: {} rows ({:.0} MB file) in {secs:.2} s ({:.2} M rows/s); held {:.1} B/row ({:.1} B/row of rows, ids and messages)",
            ds.len(),
            size as f64 / 1e6,
            ds.len() as f64 / secs / 1e6,
            held as f64 / ds.len() as f64,
            ds.row_bytes() as f64 / ds.len() as f64
        );
    }
}

/// A server that answers every completion with two tokens at once (keep-alive, a thread per
/// connection): what is measured is the client's schedule, not the server.
fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = conn.set_nodelay(true);
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut out = conn;
                loop {
                    let mut length = 0usize;
                    let mut first = true;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim().is_empty() && !first {
                            break;
                        }
                        first = false;
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
                        return;
                    }
                    let events = [
                        r#"{"choices":[{"index":0,"text":" a"}]}"#,
                        r#"{"choices":[{"index":0,"text":" b","finish_reason":"length"}]}"#,
                        r#"{"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":2}}"#,
                        "[DONE]",
                    ];
                    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if out
                        .write_all(head.as_bytes())
                        .and_then(|_| out.write_all(body.as_bytes()))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn replay_bench(rate: u64, seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("replay.jsonl");
    let n = rate * seconds;
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 0..n {
        writeln!(
            out,
            "{{\"timestamp\": {}, \"input_length\": 16, \"output_length\": 2}}",
            i as f64 * 1000.0 / rate as f64
        )
        .unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let ds = dataset::read(&path, &ReadOptions::default()).unwrap();
    let plan = DatasetPlan::new(ds, Order::Sequential, 0, None, 512);
    let url = start_server();
    let cfg = HttpConfig {
        endpoints: vec![Endpoint::parse(&url).unwrap()],
        api: Api::Completions,
        served_model: Some("m".into()),
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(16)),
            output: LenSpec::Fixed(2),
            seed: 0,
            warmup: 0,
            requests: None,
            duration: None,
            source: Some(std::sync::Arc::new(RequestSource::Dataset(Box::new(plan)))),
            conversations: None,
            replay: Some(1.0),
            shard: infertop::traffic::Shard::WHOLE,
        },
        prompts: http::Prompts::Approximate,
        concurrency: None,
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(30),
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
    };
    let (tx, rx) = bounded(1 << 16);
    let (_ctl_tx, ctl_rx) = unbounded::<Control>();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let mut lags = Vec::new();
    for ev in rx.iter() {
        match ev {
            Event::RequestDone(r) => lags.push(r.client.map_or(0.0, |c| c.send_delay_s)),
            Event::Finished(_) => break,
            _ => {}
        }
    }
    handle.join().unwrap();
    let s = Summary::of(&lags);
    println!(
        "replay at {rate} requests/s offered for {seconds} s: n {}, send lag p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        s.n,
        s.p50 * 1e3,
        s.p99 * 1e3,
        s.max * 1e3
    );
}

/// The other process: a chat server that holds each reply `hold` before streaming four tokens.
fn serve_chat(hold: Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        loop {
            let Ok((sock, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let (read, mut write) = sock.into_split();
                let mut reader = BufReader::new(read);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(hold).await;
                    let mut events: Vec<String> = (0..4)
                        .map(|i| format!(r#"{{"choices":[{{"index":0,"delta":{{"content":" reply{i}"}}}}]}}"#))
                        .collect();
                    events.push(r#"{"choices":[],"usage":{"prompt_tokens":512,"completion_tokens":4}}"#.into());
                    events.push("[DONE]".into());
                    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if write.write_all(head.as_bytes()).await.is_err()
                        || write.write_all(body.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
}

fn conversation_bench(count: usize) {
    use infertop::traffic::{synthetic_conversations, Conversations, Turns};
    // The server runs in a child process: 10,000 connections on each side would exceed one
    // process's file descriptors.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .env("TRAFFIC_SERVE_CHAT", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let url = format!("http://127.0.0.1:{}", port.trim());
    let turns = 2;
    let prompt = LenSpec::Fixed(512);
    let list = synthetic_conversations(count, turns, &prompt, 0);
    let cfg = HttpConfig {
        endpoints: vec![Endpoint::parse(&url).unwrap()],
        api: Api::Chat,
        served_model: Some("m".into()),
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(prompt.clone()),
            output: LenSpec::Fixed(4),
            seed: 0,
            warmup: 0,
            requests: None,
            duration: None,
            source: None,
            conversations: Some(std::sync::Arc::new(Conversations {
                list,
                turns: Turns::All,
                think: None,
                dataset: None,
                exact_lengths: false,
            })),
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
        prompts: http::Prompts::Approximate,
        concurrency: Some(count),
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(120),
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
    };
    let baseline = current_bytes();
    let (tx, rx) = bounded(1 << 16);
    let (_ctl_tx, ctl_rx) = unbounded::<Control>();
    let started = Instant::now();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let (mut peak, mut done, mut failed, mut history_bytes) = (0u64, 0u64, 0u64, 0usize);
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::RequestDone(r)) => {
                done += 1;
                // What the second turn resends: the first turn, its reply, the second turn.
                if r.origin.as_ref().and_then(|o| o.turn) == Some(2) {
                    history_bytes = history_bytes.max(r.prompt_tokens * 6);
                }
            }
            Ok(Event::RequestFailed(_)) => failed += 1,
            Ok(Event::Finished(_)) => break,
            Ok(_) => {}
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
        peak = peak.max(current_bytes().saturating_sub(baseline));
    }
    handle.join().unwrap();
    let after = current_bytes().saturating_sub(baseline);
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "{count} conversations of {turns} turns in flight at once: {done} turns done, {failed} failed, in {:.1} s; heap peak +{:.1} MB ({:.1} KB per conversation; a turn-2 history is about {:.1} KB of text), +{:.1} MB after they ended",
        started.elapsed().as_secs_f64(),
        peak as f64 / 1e6,
        peak as f64 / count as f64 / 1e3,
        history_bytes as f64 / 1e3,
        after as f64 / 1e6
    );
}

fn main() {
    if std::env::var_os("TRAFFIC_SERVE_CHAT").is_some() {
        return serve_chat(Duration::from_millis(1500));
    }
    read_bench(env("TRAFFIC_ROWS", 1_000_000));
    replay_bench(env("TRAFFIC_RATE", 1000), env("TRAFFIC_SECONDS", 10));
    conversation_bench(env("TRAFFIC_CONVERSATIONS", 10_000) as usize);
}
