//! Every phase of a run answers SIGINT, SIGTERM and SIGHUP within a second, on a real child
//! process: a dataset of a million rows being read, a tokenizer counting a dataset's tokens, a
//! model loading, a server that never answers the check of its API route, connections being
//! opened to a server that never accepts them, a server that never answers its model list, the
//! calibration of the http engine's timers, a sweep between
//! cells (the next cell's model loading), a replay folding a large record and a follow of a
//! record that never ends. Each exits with 128 + the signal and, where it writes a record, closes
//! it with a footer that names the signal. The time from the signal to the exit is printed; the
//! bound asserted is the second asked for (each phase answers in tens of milliseconds).
#![allow(clippy::unwrap_used)]
// One kill(2) per test, to signal the child the moment the clock starts.
#![allow(unsafe_code)]

use std::io::{BufWriter, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;
use serde_json::Value;

/// The second asked for: the assertion's bound.
const ANSWER_BOUND: Duration = Duration::from_secs(1);

/// One child at a time: a model loading on every core would slow the others' answers.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary")
}

/// A child whose stderr is collected as it is written (so it never blocks on a full pipe).
struct Running {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = infertop()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn infertop");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("stderr");
        let into = stderr.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Running { child, stderr }
    }

    /// Waits (at most 60 s) until `ready` holds, the child still running.
    fn wait_until(&mut self, what: &str, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "infertop ended ({status}) before {what}: {}",
                    self.stderr.lock().unwrap()
                );
            }
            assert!(Instant::now() < deadline, "not {what} within 60 s");
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `sig` and waits for the exit: the exit code and how long the child took.
    fn signal(mut self, sig: i32) -> Answered {
        let t0 = Instant::now();
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
        let sent = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(sent, 0, "kill");
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                panic!("infertop kept running 20 s after the signal");
            }
            thread::sleep(Duration::from_millis(2));
        };
        let after = t0.elapsed();
        // The reader thread ends with the pipe.
        thread::sleep(Duration::from_millis(50));
        let stderr = self.stderr.lock().unwrap().clone();
        Answered {
            code: status.code(),
            after,
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

struct Answered {
    code: Option<i32>,
    after: Duration,
    stderr: String,
}

impl Answered {
    /// The exit code of `sig`, within the bound; prints the time for the record of figures.
    fn assert_answered(&self, phase: &str, sig: i32) {
        println!(
            "{phase}: {} answered in {:.0} ms (exit {:?})",
            name(sig),
            self.after.as_secs_f64() * 1e3,
            self.code
        );
        assert_eq!(
            self.code,
            Some(128 + sig),
            "{phase}: the exit code of {}; stderr: {}",
            name(sig),
            self.stderr
        );
        assert!(
            self.after < ANSWER_BOUND,
            "{phase}: {} took {:?} to answer; stderr: {}",
            name(sig),
            self.after,
            self.stderr
        );
    }
}

fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// How the record's footer names the stop a signal made.
fn footer_stop(sig: i32) -> Value {
    match sig {
        libc::SIGINT => Value::from("user_stop"),
        _ => serde_json::json!({ "signal": name(sig) }),
    }
}

fn lines(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every record line is whole JSON"))
        .collect()
}

/// The record opened and was closed by a footer naming `sig`.
fn assert_closed(record: &Path, sig: i32) -> Vec<Value> {
    let lines = lines(record);
    assert_eq!(
        lines.first().map(|l| l["type"].clone()),
        Some(Value::from("header"))
    );
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "footer", "the record is closed");
    assert_eq!(last["stop"], footer_stop(sig));
    lines
}

fn count(lines: &[Value], ty: &str) -> usize {
    lines.iter().filter(|l| l["type"] == ty).count()
}

fn has_header(record: &Path) -> bool {
    std::fs::read_to_string(record).is_ok_and(|t| t.contains("\"type\":\"header\""))
}

/// A JSONL dataset of `rows` short prompts.
fn dataset(dir: &Path, rows: usize) -> PathBuf {
    let path = dir.join(format!("rows-{rows}.jsonl"));
    let mut out = BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 0..rows {
        writeln!(
            out,
            "{{\"prompt\":\"row {i} of a dataset long enough to read for seconds\",\"output_len\":8}}"
        )
        .unwrap();
    }
    out.flush().unwrap();
    path
}

/// How a server refuses the empty request that checks its API route exists.
const REFUSED_PROBE: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// A port where nothing listens (connections are refused at once).
const NOWHERE: &str = "http://127.0.0.1:9";

#[test]
fn a_dataset_of_a_million_rows_being_read() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(dir.path(), 1_000_000);
    let record = dir.path().join("run.jsonl");
    let running = Running::start(&[
        "--headless",
        "--no-telemetry",
        "--endpoint",
        NOWHERE,
        "--dataset",
        data.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    // Reading a million rows takes seconds; the handlers are installed long before 300 ms.
    thread::sleep(Duration::from_millis(300));
    let a = running.signal(libc::SIGINT);
    a.assert_answered("dataset read", libc::SIGINT);
    assert!(
        a.stderr.contains("while reading the dataset"),
        "stopped in the read: {}",
        a.stderr
    );
    // A run stopped while planned still opens and closes its record.
    let lines = assert_closed(&record, libc::SIGINT);
    assert_eq!(count(&lines, "request"), 0);
}

#[test]
fn a_tokenizer_counting_a_datasets_tokens() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny");
    let made = infertop()
        .args(["make-model"])
        .arg(&model)
        .args(["--preset", "tiny"])
        .output()
        .unwrap();
    assert!(made.status.success());
    let data = dataset(dir.path(), 200_000);
    let record = dir.path().join("run.jsonl");
    let running = Running::start(&[
        "--headless",
        "--no-telemetry",
        "--endpoint",
        NOWHERE,
        "--dataset",
        data.to_str().unwrap(),
        "--tokenizer",
        model.join("tokenizer.json").to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    thread::sleep(Duration::from_millis(800));
    let a = running.signal(libc::SIGHUP);
    a.assert_answered("tokenizer", libc::SIGHUP);
    assert!(
        a.stderr.contains("while counting the dataset's tokens"),
        "stopped while the tokens were counted: {}",
        a.stderr
    );
    assert_closed(&record, libc::SIGHUP);
}

#[test]
fn a_model_loading() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    // Half a billion parameters built on the CPU: seconds of loading.
    let mut running = Running::start(&[
        "--headless",
        "--no-telemetry",
        "--model",
        "synthetic:qwen2.5-0.5b",
        "--dtype",
        "bf16",
        "--record",
        record.to_str().unwrap(),
    ]);
    running.wait_until("the record opened", || has_header(&record));
    thread::sleep(Duration::from_millis(300));
    let a = running.signal(libc::SIGTERM);
    a.assert_answered("model load", libc::SIGTERM);
    let lines = assert_closed(&record, libc::SIGTERM);
    assert_eq!(count(&lines, "request"), 0, "stopped before any request");
}

#[test]
fn connections_a_server_never_accepts() {
    let _one = serial();
    // Bound and, past the check of its API route (the first connection, answered as a server
    // refuses an empty request), never accepted: once its listen queue is full, the kernel
    // drops further SYNs and each connect waits on its retries (the 127 s hang of a small
    // listen queue).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let first = listener.try_clone().unwrap();
    thread::spawn(move || {
        if let Ok((mut s, _)) = first.accept() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(REFUSED_PROBE);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let running = Running::start(&[
        "--headless",
        "--no-telemetry",
        "--endpoint",
        &url,
        "--served-model",
        "m",
        "--concurrency",
        "300",
        "--requests",
        "300",
        "--record",
        record.to_str().unwrap(),
    ]);
    thread::sleep(Duration::from_millis(1500));
    let a = running.signal(libc::SIGHUP);
    a.assert_answered("preconnect", libc::SIGHUP);
    assert!(
        !a.stderr.contains("whether it answers --api"),
        "stopped past the check of the API: {}",
        a.stderr
    );
    let lines = assert_closed(&record, libc::SIGHUP);
    assert_eq!(count(&lines, "request"), 0);
    drop(listener);
}

/// A server that accepts, reads each request and never answers it, but for those `refuses`
/// picks, which it refuses as a server refuses the check of its API route. Its URL, and
/// whether a request `awaited` picks has come.
fn a_server_that_hangs(
    refuses: fn(&str) -> bool,
    awaited: fn(&str) -> bool,
) -> (String, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicBool::new(false));
    let seen = asked.clone();
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { break };
            let mut buf = [0u8; 1024];
            if let Ok(n) = s.read(&mut buf) {
                let request = String::from_utf8_lossy(&buf[..n]);
                if refuses(&request) {
                    let _ = s.write_all(REFUSED_PROBE);
                    continue;
                }
                if awaited(&request) {
                    seen.store(true, Ordering::SeqCst);
                }
            }
            held.push(s);
        }
    });
    (url, asked)
}

#[test]
fn a_server_that_never_answers_its_model_list() {
    let _one = serial();
    // Past the check of its API route, nothing is answered.
    let (url, asked) =
        a_server_that_hangs(|r| r.starts_with("POST "), |r| r.contains("GET /v1/models"));
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let mut running = Running::start(&[
        "--headless",
        "--no-telemetry",
        "--endpoint",
        &url,
        "--requests",
        "5",
        "--record",
        record.to_str().unwrap(),
    ]);
    running.wait_until("the model list asked for", || asked.load(Ordering::SeqCst));
    thread::sleep(Duration::from_millis(200));
    let a = running.signal(libc::SIGTERM);
    a.assert_answered("server discovery", libc::SIGTERM);
    let lines = assert_closed(&record, libc::SIGTERM);
    assert_eq!(count(&lines, "request"), 0);
}

#[test]
fn a_server_that_never_answers_the_check_of_its_api() {
    let _one = serial();
    // Nothing is answered, the check of the API route neither.
    let (url, asked) =
        a_server_that_hangs(|_| false, |r| r.starts_with("POST /v1/chat/completions"));
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let mut running = Running::start(&[
        "--headless",
        "--no-telemetry",
        "--endpoint",
        &url,
        "--api",
        "chat",
        "--served-model",
        "m",
        "--requests",
        "5",
        "--record",
        record.to_str().unwrap(),
    ]);
    running.wait_until("the route checked", || asked.load(Ordering::SeqCst));
    thread::sleep(Duration::from_millis(200));
    let a = running.signal(libc::SIGTERM);
    a.assert_answered("api check", libc::SIGTERM);
    assert!(
        a.stderr.contains("stopped by SIGTERM while asking") && a.stderr.contains("--api chat"),
        "{}",
        a.stderr
    );
    let lines = assert_closed(&record, libc::SIGTERM);
    assert_eq!(count(&lines, "request"), 0);
}

/// The calibration of the timers lasts about 100 ms, too short to aim a signal at from
/// outside: the engine is asked to stop as it starts, in-process, and must end before the
/// calibration alone could have (32 probes of 3 ms), having started nothing.
#[test]
fn the_http_engines_calibration() {
    use crossbeam_channel::{bounded, unbounded};
    use infertop::engine::http::{self, Api, Endpoint, HttpConfig};
    use infertop::event::{Control, Event, StopReason};
    use infertop::traffic::len::LenSpec;
    use infertop::traffic::TrafficPlan;

    let _one = serial();
    let cfg = HttpConfig {
        endpoints: vec![Endpoint::parse(NOWHERE).unwrap()],
        api: Api::Completions,
        served_model: Some("m".into()),
        api_key: None,
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(8)),
            output: LenSpec::Fixed(8),
            seed: 0,
            warmup: 0,
            requests: Some(5),
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: Default::default(),
        },
        prompts: Default::default(),
        concurrency: Some(1),
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
    };
    let (tx, rx) = bounded(1024);
    let (ctl, ctl_rx) = unbounded::<Control>();
    let t0 = Instant::now();
    let _handle = http::spawn(cfg, tx, ctl_rx).unwrap();
    ctl.send(Control::Stop(StopReason::Signal("SIGTERM".into())))
        .unwrap();
    let mut events = Vec::new();
    let finished = loop {
        let ev = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the engine finishes");
        if let Event::Finished(reason) = &ev {
            break reason.clone();
        }
        events.push(ev);
    };
    let after = t0.elapsed();
    println!(
        "calibration: stop answered in {:.1} ms",
        after.as_secs_f64() * 1e3
    );
    assert_eq!(finished, StopReason::Signal("SIGTERM".into()));
    assert!(
        !events.iter().any(|e| matches!(e, Event::RunStarted(_))),
        "nothing started"
    );
    assert!(
        after < Duration::from_millis(90),
        "the stop waited for the calibration: {after:?}"
    );
}

#[test]
fn a_sweep_between_cells() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("sweep.jsonl");
    // The first cell measures the tiny model at once; the second must load half a billion
    // parameters first: the signal falls between the two.
    let mut running = Running::start(&[
        "sweep",
        "--headless",
        "--no-telemetry",
        "--model",
        "synthetic:tiny,synthetic:qwen2.5-0.5b",
        "--dtype",
        "bf16",
        "-p",
        "8",
        "-n",
        "4",
        "--requests",
        "3",
        "--warmup",
        "0",
        "--record",
        record.to_str().unwrap(),
    ]);
    running.wait_until("the first cell ended", || {
        std::fs::read_to_string(&record).is_ok_and(|t| t.contains("\"type\":\"cell_end\""))
    });
    thread::sleep(Duration::from_millis(300));
    let a = running.signal(libc::SIGINT);
    a.assert_answered("sweep between cells", libc::SIGINT);
    let lines = assert_closed(&record, libc::SIGINT);
    let cells = &lines.last().unwrap()["summary"]["cells"];
    assert_eq!(cells[0]["status"], "ok", "the first cell is kept");
    assert_eq!(cells[1]["status"], "stopped");
}

#[test]
fn a_replay_folding_a_large_record() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.jsonl");
    let made = infertop()
        .args([
            "--headless",
            "--no-telemetry",
            "-p",
            "8",
            "-n",
            "4",
            "--requests",
            "2",
            "--warmup",
            "0",
            "--record",
        ])
        .arg(&small)
        .output()
        .unwrap();
    assert!(made.status.success());
    // Its header, then the same request a hundred thousand times, numbered on.
    let text = std::fs::read_to_string(&small).unwrap();
    let header = text.lines().next().unwrap();
    let mut request: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "request")
        .unwrap();
    let big = dir.path().join("big.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&big).unwrap());
    writeln!(out, "{header}").unwrap();
    for i in 0..100_000u64 {
        request["index"] = i.into();
        request["t_s"] = (i as f64 * 0.01).into();
        writeln!(out, "{request}").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let running = Running::start(&["replay", "--headless", big.to_str().unwrap()]);
    thread::sleep(Duration::from_millis(300));
    let a = running.signal(libc::SIGINT);
    a.assert_answered("replay", libc::SIGINT);
}

#[test]
fn a_follow_of_a_record_that_never_ends() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("live.jsonl");
    let made = infertop()
        .args([
            "--headless",
            "--no-telemetry",
            "-p",
            "8",
            "-n",
            "4",
            "--requests",
            "2",
            "--warmup",
            "0",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    assert!(made.status.success());
    // Without its footer the record reads as one still being written.
    let text = std::fs::read_to_string(&record).unwrap();
    let open: String = text
        .lines()
        .filter(|l| !l.contains("\"type\":\"footer\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&record, open).unwrap();
    let running = Running::start(&["follow", "--headless", record.to_str().unwrap()]);
    thread::sleep(Duration::from_millis(500));
    let a = running.signal(libc::SIGTERM);
    a.assert_answered("follow", libc::SIGTERM);
}
