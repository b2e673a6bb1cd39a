//! The HTTP client engine must not be the bottleneck: how many concurrent streams it sustains,
//! how many chunks per second it processes, and how much later than the truth it timestamps a
//! chunk, against a local streaming server on the same machine.
//!
//! The server (tokio, its own thread) answers every `/v1/completions` with `CHUNKS` content
//! chunks, one every `ITL`, and writes into each chunk's text how long after it read the request
//! it wrote that chunk. The engine's own measurements (TTFT, then the inter-token latencies) are
//! compared with that truth:
//!
//! - ITL error: per chunk after the first, |client's inter-token latency − the server's|: how much
//!   a late timestamp moves ITL and TPOT.
//! - first-chunk lag: client TTFT − the server's time to the first chunk. An upper bound of the
//!   TTFT error: it also holds the request's transit and the server's own delay in reading it.
//!
//! `cargo bench --profile dev --bench client` (also `CLIENT_STREAMS=100,1000`, `CLIENT_ITL_MS`,
//! `CLIENT_CHUNKS`). Needs about 2 file descriptors per stream (`ulimit -n`).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
use infertop::engine::workload::LenSpec;
use infertop::event::{Control, Event};
use infertop::stats::Summary;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

async fn serve_connection(mut sock: TcpStream, chunks: u32, itl: Duration) {
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
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        if sock.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for k in 0..chunks {
            tokio::time::sleep_until((read_at + itl * (k + 1)).into()).await;
            let written = read_at.elapsed().as_nanos();
            let event = format!(
                "data: {{\"choices\":[{{\"index\":0,\"text\":\"[{written}]\",\"finish_reason\":null}}]}}\n\n"
            );
            let frame = format!("{:x}\r\n{event}\r\n", event.len());
            if sock.write_all(frame.as_bytes()).await.is_err() {
                return;
            }
        }
        let done = "data: [DONE]\n\n";
        let frame = format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len());
        if sock.write_all(frame.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Starts the server on its own thread; returns its URL.
fn start_server(chunks: u32, itl: Duration) -> String {
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
                tokio::spawn(serve_connection(sock, chunks, itl));
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

fn clock_ticks_per_s() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

struct Figures {
    streams: usize,
    requests: usize,
    failed: usize,
    chunks: usize,
    chunks_per_s: f64,
    /// CPU seconds the client's own threads used: chunks / this is what the client can take
    /// per core, whatever the server on the same cores leaves it.
    client_cpu_s: f64,
    /// Per chunk after the first: |client's inter-token latency − the server's|, the error a
    /// late timestamp puts into ITL and TPOT.
    itl_error: Summary,
    /// The first chunk's lag: an upper bound of the TTFT error (it includes the request's transit
    /// and the server's own delay in reading it).
    first: Summary,
}

fn measure(streams: usize, chunks: u32, itl: Duration) -> Figures {
    let url = start_server(chunks, itl);
    let requests = streams * 3;
    let cfg = HttpConfig {
        endpoints: vec![Endpoint::parse(&url).unwrap()],
        api: Api::Completions,
        served_model: Some("bench".into()),
        api_key: None,
        prompt: LenSpec::Fixed(8),
        prompts: Default::default(),
        output: LenSpec::Fixed(chunks as usize),
        seed: 0,
        concurrency: Some(streams),
        rate: None,
        burstiness: 1.0,
        warmup: 0,
        requests: Some(requests as u64),
        duration: None,
        request_timeout: Duration::from_secs(60),
        exact_output: true,
        chunk_usage: false,
        record_tokens: true,
        reset_prefix_cache: false,
    };
    let (tx, rx) = bounded(1 << 20);
    let (_ctl, ctl_rx) = unbounded::<Control>();
    let start = Instant::now();
    let handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    let mut steps: std::collections::HashMap<u64, Vec<f64>> = Default::default();
    let mut itl_errors = Vec::new();
    let mut firsts = Vec::new();
    let (mut failed, mut total_chunks) = (0, 0);
    let ticks_per_s = clock_ticks_per_s();
    let mut cpu: std::collections::HashMap<String, f64> = Default::default();
    let mut sampled = Instant::now();
    loop {
        if sampled.elapsed() >= Duration::from_millis(100) {
            client_cpu(&mut cpu, ticks_per_s);
            sampled = Instant::now();
        }
        match rx.recv().unwrap() {
            Event::DecodeStep { index, itl_s, .. } => steps.entry(index).or_default().push(itl_s),
            Event::RequestDone(r) => {
                let itls = steps.remove(&r.index).unwrap_or_default();
                let text = r.text.clone().unwrap_or_default();
                let written: Vec<f64> = text
                    .split(['[', ']'])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<f64>().unwrap() * 1e-9)
                    .collect();
                if let Some(w0) = written.first() {
                    firsts.push(r.ttft_s - w0);
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
    let wall = start.elapsed().as_secs_f64();
    handle.join().unwrap();
    Figures {
        streams,
        requests,
        failed,
        chunks: total_chunks,
        chunks_per_s: total_chunks as f64 / wall,
        client_cpu_s: cpu.values().sum(),
        itl_error: Summary::of(&itl_errors),
        first: Summary::of(&firsts),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let streams = env_list("CLIENT_STREAMS", "100,1000");
    let itl = Duration::from_millis(env_list("CLIENT_ITL_MS", "10")[0]);
    let chunks = env_list("CLIENT_CHUNKS", "100")[0] as u32;
    println!(
        "client bench: {chunks} chunks per stream, one every {} ms, 3 requests per stream",
        itl.as_millis()
    );
    println!(
        "| streams | requests | failed | chunks | chunks/s | client CPU s | chunks per client CPU-s | ITL error p50 | ITL error p99 | ITL error max | first-chunk lag p50 / p99 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in streams {
        let f = measure(n as usize, chunks, itl);
        println!(
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.0} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} / {:.3} ms |",
            f.streams,
            f.requests,
            f.failed,
            f.chunks,
            f.chunks_per_s,
            f.client_cpu_s,
            f.chunks as f64 / f.client_cpu_s.max(1e-9),
            f.itl_error.p50 * 1e3,
            f.itl_error.p99 * 1e3,
            f.itl_error.max * 1e3,
            f.first.p50 * 1e3,
            f.first.p99 * 1e3
        );
    }
}
