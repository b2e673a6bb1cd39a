//! The HTTP client engine must not be the bottleneck: how many concurrent streams it sustains,
//! how many chunks per second it processes, how much CPU it spends per chunk, and how much later
//! than the truth it timestamps a chunk, against a local streaming server on the same machine.
//!
//! The server (tokio, its own thread) answers every `/v1/completions` with `CHUNKS` content
//! chunks, the first `TTFT` after it read the request, then one every `ITL`, and writes into each
//! chunk's text how long after it read the request it wrote that chunk. Connections are kept
//! alive. The engine's own measurements (TTFT, then the inter-token latencies) are compared with
//! that truth:
//!
//! - TTFT p50 / p99 against the server's TTFT (what a user reads), for all requests and for the
//!   first wave (the first `streams` requests, which open or take the connections) and the rest.
//! - first-chunk lag: client TTFT − the server's time to the first chunk, whose p99 is the
//!   client's own tail: connect, send, transit, the server's delay in reading the request, and
//!   the client's delay in reading the chunk.
//! - ITL error: per chunk after the first, |client's inter-token latency − the server's|: how much
//!   a late timestamp moves ITL and TPOT.
//! - client CPU-ms per 1,000 chunks: the CPU time of the client's own threads (`infertop-…`).
//! - the HTTP phases of the first wave: when its requests were connected and sent (p99, since
//!   their start), and how many connections were new, preopened or reused.
//!
//! `cargo bench --profile dev --bench client` (the crate unoptimized) or `cargo bench --bench
//! client` (release), with `CLIENT_STREAMS=100,1000`, `CLIENT_ITL_MS=10`, `CLIENT_CHUNKS=100`,
//! `CLIENT_TTFT_MS=0`, `CLIENT_PRECONNECT=on` (`on`, `off` or `on,off`), `CLIENT_REQUESTS=3`
//! (requests per stream). The 500-stream comparison: `CLIENT_STREAMS=500 CLIENT_TTFT_MS=150
//! CLIENT_ITL_MS=20 CLIENT_CHUNKS=50 CLIENT_PRECONNECT=off,on`. `CLIENT_MODE=process` runs the
//! binary (`CLIENT_ARGS` adds flags to it, `CLIENT_BIN` names another build of it); the cost
//! of one quiet stream: `CLIENT_MODE=process
//! CLIENT_STREAMS=1 CLIENT_ITL_MS=22 CLIENT_TTFT_MS=20 CLIENT_CHUNKS=500 CLIENT_REQUESTS=2`.
//! Needs about 2 file descriptors per stream (`ulimit -n`).
#![allow(clippy::unwrap_used)]
// One getrusage(RUSAGE_CHILDREN) call: the CPU time of the infertop process the bench ran.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::event::{ConnectionUse, Control, Event, HttpPhases};
use infertop::stats::Summary;
use infertop::traffic::len::LenSpec;
use infertop::traffic::TrafficPlan;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod common;

use common::env::env_words;

fn env_list(key: &str, default: &str) -> Vec<u64> {
    std::env::var(key)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect()
}

/// Reads one request (headers and a Content-Length body); false at the end of the connection.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            return true;
        }
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Chunks the server has written, over every stream: `measure_process` reads the client's CPU
/// time when the first is written and when the last is, the load window.
static CHUNKS_WRITTEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn serve_connection(mut sock: TcpStream, chunks: u32, ttft: Duration, itl: Duration) {
    let _ = sock.set_nodelay(true);
    let mut buf = Vec::new();
    while read_request(&mut sock, &mut buf).await {
        let read_at = Instant::now();
        if buf.starts_with(b"GET") {
            let body = r#"{"object":"list","data":[{"id":"bench","object":"model"}]}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        if buf.ends_with(infertop::engine::http::api::detect::PROBE_BODY.as_bytes()) {
            // The client's check that the route exists, refused as a server refuses it.
            let head = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        if sock.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for k in 0..chunks {
            tokio::time::sleep_until((read_at + ttft + itl * k).into()).await;
            let written = read_at.elapsed().as_nanos();
            let event = format!(
                "data: {{\"choices\":[{{\"index\":0,\"text\":\"[{written}]\",\"finish_reason\":null}}]}}\n\n"
            );
            let frame = format!("{:x}\r\n{event}\r\n", event.len());
            if sock.write_all(frame.as_bytes()).await.is_err() {
                return;
            }
            CHUNKS_WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let done = "data: [DONE]\n\n";
        let frame = format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len());
        if sock.write_all(frame.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Starts the server on its own thread; returns its URL.
fn start_server(chunks: u32, ttft: Duration, itl: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            loop {
                let (sock, _) = listener.accept().await.unwrap();
                tokio::spawn(serve_connection(sock, chunks, ttft, itl));
            }
        });
    });
    format!("http://127.0.0.1:{}", rx.recv().unwrap())
}

/// CPU seconds used so far by each of the client's threads (the engine thread and its
/// runtime's workers: named `infertop-…`; the bench's server and consumer are not), by thread id.
/// Called while the engine runs, so threads that end keep their last reading.
fn client_cpu(seen: &mut std::collections::HashMap<String, f64>, ticks_per_s: f64) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.starts_with("infertop-") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // After "pid (comm) ": state is field 3, utime field 14 and stime field 15.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let cpu = (ticks(11) + ticks(12)) / ticks_per_s;
        seen.insert(task.file_name().to_string_lossy().into_owned(), cpu);
    }
}

/// The CPU seconds process `pid` has used so far (all its threads: `utime` + `stime` of
/// `/proc/PID/stat`, in clock ticks; over a load window of a few hundred milliseconds of CPU a
/// tick is a few per cent).
fn process_cpu_s(pid: u32, ticks_per_s: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / ticks_per_s
}

fn clock_ticks_per_s() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// One configuration of the bench.
#[derive(Clone, Copy)]
struct Scenario {
    streams: usize,
    requests_per_stream: usize,
    chunks: u32,
    ttft: Duration,
    itl: Duration,
    preconnect: bool,
}

/// What one request measured beside what the server did.
struct Measured {
    ttft_s: f64,
    /// Client TTFT − the server's time to its first chunk.
    lag_s: f64,
    http: Option<HttpPhases>,
}

struct Figures {
    requests: usize,
    failed: usize,
    chunks: usize,
    chunks_per_s: f64,
    /// CPU seconds the client's own threads used: chunks / this is what the client can take
    /// per core, whatever the server on the same cores leaves it.
    client_cpu_s: f64,
    /// The binary's CPU milliseconds per 1,000 chunks from the first chunk written to the last
    /// (its start-up and exit left out): what it costs while the load is on.
    window_cpu_ms_per_k: Option<f64>,
    /// Per chunk after the first: |client's inter-token latency − the server's|, the error a
    /// late timestamp puts into ITL and TPOT.
    itl_error: Summary,
    /// How late the server itself wrote its first chunk (not the client's).
    server_late: Summary,
    /// Every completed request, by index.
    requests_seen: Vec<(u64, Measured)>,
}

fn measure(sc: Scenario) -> Figures {
    let url = start_server(sc.chunks, sc.ttft, sc.itl);
    let requests = sc.streams * sc.requests_per_stream;
    let cfg = HttpConfig {
        endpoints: vec![Endpoint::parse(&url).unwrap()],
        api: Api::Completions,
        served_model: Some("bench".into()),
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(8)),
            output: LenSpec::Fixed(sc.chunks as usize),
            seed: 0,
            warmup: 0,
            requests: Some(requests as u64),
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
        prompts: Default::default(),
        concurrency: Some(sc.streams),
        rate: None,
        burstiness: 1.0,
        request_timeout: Duration::from_secs(60),
        exact_output: true,
        chunk_usage: false,
        chunk_timings: false,
        record_tokens: true,
        preconnect: sc.preconnect,
        reset_prefix_cache: false,
        shape: Default::default(),
        start_at: None,
        prompt_salt: 0,
        cancel: None,
        canary: None,
    };
    let (tx, rx) = bounded(1 << 20);
    let (_ctl, ctl_rx) = unbounded::<Control>();
    let ticks_per_s = clock_ticks_per_s();
    let mut cpu: std::collections::HashMap<String, f64> = Default::default();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let mut steps: std::collections::HashMap<u64, Vec<f64>> = Default::default();
    let mut itl_errors = Vec::new();
    let mut server_late = Vec::new();
    let mut seen = Vec::new();
    let (mut failed, mut total_chunks) = (0, 0);
    let mut sampled = Instant::now();
    // Chunks per second count from the first request's start (after the preconnect).
    let mut start: Option<Instant> = None;
    loop {
        if sampled.elapsed() >= Duration::from_millis(100) {
            client_cpu(&mut cpu, ticks_per_s);
            sampled = Instant::now();
        }
        match rx.recv().unwrap() {
            Event::RequestStarted { .. } => {
                start.get_or_insert_with(Instant::now);
            }
            Event::DecodeSteps(batch) => {
                for s in batch {
                    steps.entry(s.index).or_default().push(s.itl_s);
                }
            }
            Event::RequestDone(r) => {
                let itls = steps.remove(&r.index).unwrap_or_default();
                let text = r.text.clone().unwrap_or_default();
                let written: Vec<f64> = text
                    .split(['[', ']'])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<f64>().unwrap() * 1e-9)
                    .collect();
                if let Some(w0) = written.first() {
                    server_late.push(w0 - sc.ttft.as_secs_f64());
                    seen.push((
                        r.index,
                        Measured {
                            ttft_s: r.ttft_s,
                            lag_s: r.ttft_s - w0,
                            http: r.client.as_ref().and_then(|c| c.http.clone()),
                        },
                    ));
                }
                for (k, pair) in written.windows(2).enumerate() {
                    if let Some(itl) = itls.get(k) {
                        itl_errors.push((itl - (pair[1] - pair[0])).abs());
                    }
                }
                total_chunks += written.len();
            }
            Event::RequestFailed(_) => failed += 1,
            Event::Finished(_) => {
                client_cpu(&mut cpu, ticks_per_s);
                break;
            }
            _ => {}
        }
    }
    let wall = start.map_or(1e-9, |s| s.elapsed().as_secs_f64());
    handle.join().unwrap();
    seen.sort_by_key(|(i, _)| *i);
    Figures {
        requests,
        failed,
        chunks: total_chunks,
        chunks_per_s: total_chunks as f64 / wall,
        client_cpu_s: cpu.values().sum(),
        window_cpu_ms_per_k: None,
        itl_error: Summary::of(&itl_errors),
        server_late: Summary::of(&server_late),
        requests_seen: seen,
    }
}

/// CPU seconds (user + system) of the children waited for so far.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    if rc != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// The scenario run as a user runs it: the infertop binary, headless, recording, against the
/// bench's server; the CPU time is the whole process's (engine, the consumer's fold, the
/// recorder, the telemetry sampler), the timings are read back from its record.
fn measure_process(sc: Scenario) -> Figures {
    let url = start_server(sc.chunks, sc.ttft, sc.itl);
    let requests = sc.streams * sc.requests_per_stream;
    let dir = std::env::temp_dir().join(format!("infertop-client-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("run.jsonl");
    // `CLIENT_BIN`: another build of the binary (an earlier commit's, for before/after pairs).
    let bin =
        std::env::var_os("CLIENT_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_infertop").into());
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["--endpoint", &url, "--served-model", "bench", "--headless"])
        .args(["--concurrency", &sc.streams.to_string()])
        .args(["--requests", &requests.to_string()])
        .args([
            "--prompt-tokens",
            "8",
            "--output-tokens",
            &sc.chunks.to_string(),
        ])
        .args(["--record-tokens", "--record"])
        .arg(&record)
        .stdout(std::process::Stdio::null());
    if !sc.preconnect {
        cmd.arg("--no-preconnect");
    }
    // `CLIENT_ARGS`: more flags for the binary (`--no-telemetry`, say), split at spaces.
    if let Ok(more) = std::env::var("CLIENT_ARGS") {
        cmd.args(more.split_whitespace());
    }
    let before = children_cpu_s();
    let expected = (requests * sc.chunks as usize) as u64;
    let written0 = CHUNKS_WRITTEN.load(std::sync::atomic::Ordering::Relaxed);
    let mut child = cmd.spawn().unwrap();
    let ticks_per_s = clock_ticks_per_s();
    // (chunks written, the child's CPU seconds) at the first chunk and at the last.
    let (mut first, mut last) = (None, None);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let written = CHUNKS_WRITTEN.load(std::sync::atomic::Ordering::Relaxed) - written0;
        if written > 0 && last.is_none() {
            let at = (written, process_cpu_s(child.id(), ticks_per_s));
            first.get_or_insert(at);
            if written >= expected {
                last = Some(at);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let cpu = children_cpu_s() - before;
    let window_cpu_ms_per_k = match (first, last) {
        (Some((n0, c0)), Some((n1, c1))) if n1 > n0 => {
            Some(1e3 * 1e3 * (c1 - c0) / (n1 - n0) as f64)
        }
        _ => None,
    };
    assert!(status.success(), "infertop exited with {status}");
    let text = std::fs::read_to_string(&record).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (mut seen, mut server_late, mut failed, mut chunks) = (Vec::new(), Vec::new(), 0, 0);
    let (mut first_start, mut last_end) = (f64::MAX, 0.0f64);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        match v["type"].as_str() {
            Some("request_failed") => failed += 1,
            Some("request") => {
                let ttft_s = v["ttft_s"].as_f64().unwrap();
                let written: Vec<f64> = v["text"]
                    .as_str()
                    .unwrap_or_default()
                    .split(['[', ']'])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<f64>().unwrap() * 1e-9)
                    .collect();
                chunks += written.len();
                if let (Some(t), Some(e2e)) = (v["t_s"].as_f64(), v["e2e_s"].as_f64()) {
                    first_start = first_start.min(t - e2e);
                    last_end = last_end.max(t);
                }
                let Some(w0) = written.first() else { continue };
                server_late.push(w0 - sc.ttft.as_secs_f64());
                let http = serde_json::from_value(v["client"]["http"].clone()).ok();
                seen.push((
                    v["index"].as_u64().unwrap(),
                    Measured {
                        ttft_s,
                        lag_s: ttft_s - w0,
                        http,
                    },
                ));
            }
            _ => {}
        }
    }
    seen.sort_by_key(|(i, _)| *i);
    Figures {
        requests,
        failed,
        chunks,
        chunks_per_s: chunks as f64 / (last_end - first_start).max(1e-9),
        client_cpu_s: cpu,
        window_cpu_ms_per_k,
        // Steps are not in the record without --jsonl-steps: the in-process rows have them.
        itl_error: Summary::of(&[]),
        server_late: Summary::of(&server_late),
        requests_seen: seen,
    }
}

fn ms(v: f64) -> String {
    format!("{:.1}", v * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let streams = env_list("CLIENT_STREAMS", "100,1000");
    let itl_ms = env_list("CLIENT_ITL_MS", "10")[0];
    let itl = Duration::from_millis(itl_ms);
    let ttft = Duration::from_millis(env_list("CLIENT_TTFT_MS", &itl_ms.to_string())[0]);
    let chunks = env_list("CLIENT_CHUNKS", "100")[0] as u32;
    let per_stream = env_list("CLIENT_REQUESTS", "3")[0] as usize;
    let preconnects: Vec<bool> = env_words("CLIENT_PRECONNECT", "on")
        .iter()
        .map(|w| w != "off")
        .collect();
    // `engine`: the engine in this process (its threads' CPU); `process`: the infertop binary
    // as a user runs it (the whole process's CPU).
    let modes = env_words("CLIENT_MODE", "engine");
    println!(
        "client bench: {chunks} chunks per stream, the first {} ms after the request, then one every {} ms, {per_stream} requests per stream",
        ttft.as_millis(),
        itl.as_millis()
    );
    println!(
        "| streams | client | preconnect | requests | failed | chunks/s | client CPU-ms / 1k chunks | TTFT p50 / p99 (server {} ms) | first wave p50 / p99 | later p50 / p99 | first-chunk lag p50 / p99 | first wave: sent p99 | connections new / preopened / reused | server late p99 | ITL error p50 / p99 / max |",
        ttft.as_millis()
    );
    println!("|---:|:---|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in streams {
        for (mode, &preconnect) in modes
            .iter()
            .flat_map(|m| preconnects.iter().map(move |p| (m, p)))
        {
            let sc = Scenario {
                streams: n as usize,
                requests_per_stream: per_stream,
                chunks,
                ttft,
                itl,
                preconnect,
            };
            let f = if mode == "process" {
                measure_process(sc)
            } else {
                measure(sc)
            };
            if let Ok(path) = std::env::var("CLIENT_DUMP") {
                // One line per request, for a closer look: index, TTFT, lag, and its phases.
                let mut out = String::new();
                for (i, m) in &f.requests_seen {
                    let h = m.http.as_ref();
                    out.push_str(&format!(
                        "{i} {:.6} {:.6} {:?} {:.6} {:.6}\n",
                        m.ttft_s,
                        m.lag_s,
                        h.map(|h| h.connection),
                        h.and_then(|h| h.sent_s).unwrap_or(-1.0),
                        h.and_then(|h| h.first_byte_s).unwrap_or(-1.0),
                    ));
                }
                std::fs::write(format!("{path}.{n}.{mode}.{preconnect}"), out).unwrap();
            }
            let all: Vec<f64> = f.requests_seen.iter().map(|(_, m)| m.ttft_s).collect();
            let (first, later): (Vec<_>, Vec<_>) = f
                .requests_seen
                .iter()
                .partition(|(i, _)| (*i as usize) < sc.streams);
            let ttfts = |v: &[&(u64, Measured)]| {
                Summary::of(&v.iter().map(|(_, m)| m.ttft_s).collect::<Vec<_>>())
            };
            let lag = Summary::of(
                &f.requests_seen
                    .iter()
                    .map(|(_, m)| m.lag_s)
                    .collect::<Vec<_>>(),
            );
            let sent = Summary::of(
                &first
                    .iter()
                    .filter_map(|(_, m)| m.http.as_ref()?.sent_s)
                    .collect::<Vec<_>>(),
            );
            let count = |u: ConnectionUse| {
                f.requests_seen
                    .iter()
                    .filter(|(_, m)| m.http.as_ref().is_some_and(|h| h.connection == u))
                    .count()
            };
            let (a, fw, lt) = (Summary::of(&all), ttfts(&first), ttfts(&later));
            println!(
                "| {} | {mode} | {} | {} | {} | {:.0} | {} | {} / {} ms | {} / {} ms | {} / {} ms | {} / {} ms | {} ms | {} / {} / {} | {} ms | {:.3} / {:.3} / {:.3} ms |",
                sc.streams,
                if preconnect { "on" } else { "off" },
                f.requests,
                f.failed,
                f.chunks_per_s,
                match f.window_cpu_ms_per_k {
                    Some(w) => format!(
                        "{:.1} ({w:.1} in the load window)",
                        1e3 * 1e3 * f.client_cpu_s / (f.chunks as f64).max(1.0)
                    ),
                    None => format!("{:.1}", 1e3 * 1e3 * f.client_cpu_s / (f.chunks as f64).max(1.0)),
                },
                ms(a.p50),
                ms(a.p99),
                ms(fw.p50),
                ms(fw.p99),
                ms(lt.p50),
                ms(lt.p99),
                ms(lag.p50),
                ms(lag.p99),
                ms(sent.p99),
                count(ConnectionUse::New),
                count(ConnectionUse::Preopened),
                count(ConnectionUse::Reused),
                ms(f.server_late.p99),
                f.itl_error.p50 * 1e3,
                f.itl_error.p99 * 1e3,
                f.itl_error.max * 1e3,
            );
        }
    }
}
