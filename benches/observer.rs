//! The dashboard's effect on what it measures, in a real pseudo-terminal (issue 8):
//!
//! 1. **start-up**: time from spawning `infertop` in a pty to the first frame on screen (the
//!    header's phase badge), and to the model being loaded (`WARMUP`/`RUNNING`); target
//!    ≤ 150 ms to the first frame, which must come before the model has loaded (`LOADING`);
//! 2. **observer effect**: TPOT p50 (steady requests, from the `--record` file) of the same
//!    run with the dashboard drawing at the default 10 fps in a pty vs `--headless`,
//!    interleaved (the order rotates every round) over several rounds, once per UI nice value
//!    (`INFERTOP_UI_NICE=0`, the default, and 10, a lowered UI); target ratio ≤ 1.02;
//! 3. **UI CPU time**: the dashboard thread's CPU time (the main thread: `/proc/<pid>/task/<pid>/
//!    schedstat`) at 10 fps over a minute of a live run, as % of one core; target ≤ 2%. Every
//!    thread of the process is listed, with the bytes per second written to the terminal;
//! 4. **bytes** (issue 15): what the terminal receives from the dashboard in steady state at
//!    default settings, at each of `OBSERVER_BYTES_SIZES`, in KB/s (1000 bytes) and bytes per
//!    frame, as an SSH link would carry it; then key-to-screen latency: `?` pressed, time until
//!    the help overlay is on the pty's screen (and gone again after the second `?`); targets
//!    ≤ 20 KB/s at 200x60, ≤ 5 KB/s at 80x24, key-to-screen ≤ 100 ms;
//! 5. **rates** (issue 28): the same figures, plus the dashboard thread's CPU time, with the
//!    dashboard fed by a synthetic event stream at each of `OBSERVER_RATES` instead of a
//!    model, so the screen's cost can be read against the event rate alone. This binary runs
//!    itself in the pty as the feed: with `OBSERVER_FEED=RATE:STEPS` set, `main` is the real
//!    dashboard (`ui::run_dashboard`, its terminal, its loop) on the channel of a thread that
//!    sends `common::rate::RateFeed`'s events in real time (RATE requests/s, STEPS decode
//!    steps each, 20 ms TTFT, 2 ms ITL, so many requests in flight at once). Targets at every
//!    rate: ≤ 5 KB/s at 80x24, ≤ 20 KB/s at 200x60, key-to-screen ≤ 100 ms, UI CPU ≤ 2% of a
//!    core at 10 fps.
//!
//! The pty output is read and discarded (parsed with `vt100` only during start-up), so the
//! reader costs as little as possible of the two cores it shares with the run.
//!
//! Run: `cargo bench --bench observer`. Environment (defaults in brackets):
//! `OBSERVER_MODEL` [synthetic:tiny], `OBSERVER_REQUESTS` [60], `OBSERVER_OUTPUT` [64],
//! `OBSERVER_ROUNDS` [5], `OBSERVER_SIZE` [200x60], `OBSERVER_ARGS` [none; extra arguments
//! for both modes, e.g. `--threads 1`], `OBSERVER_UI_SECS` [60], `OBSERVER_STARTS` [5],
//! `OBSERVER_PARTS` [startup,observer,inproc,cpu], `OBSERVER_INPROC_SECS` [120],
//! `OBSERVER_SEGMENT_SECS` [3], `OBSERVER_NICES` [0,10: the dashboard runs with
//! `INFERTOP_UI_NICE` at each value, `default` leaving it unset], `OBSERVER_UI_NICE` [10: the
//! lowered UI of the in-process part], `OBSERVER_BYTES_SIZES` [200x60,80x24],
//! `OBSERVER_BYTES_SECS` [20], `OBSERVER_BYTES_WARM_SECS` [5: after the first RUNNING],
//! `OBSERVER_RATES` [1:10,10:10,100:10,1000:10,1000:100: requests/s:decode steps per request;
//! the last is 100k decode steps/s], e.g. `OBSERVER_PARTS=bytes cargo bench --bench observer`
//! or `OBSERVER_PARTS=rates cargo bench --bench observer`. To watch a feed by hand, run the
//! bench binary with `OBSERVER_FEED=1000:100` in a terminal.
#![allow(clippy::unwrap_used)]
// A pseudo-terminal of its own and a reniced thread: libc calls the bench makes directly.
#![allow(unsafe_code)]

mod common;

use common::env::{env_or, env_str};

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use infertop::stats::Summary;
use infertop::traffic::TrafficPlan;
use portable_pty::{native_pty_system, Child, CommandBuilder, PtySize};

const BIN: &str = env!("CARGO_BIN_EXE_infertop");

struct Settings {
    model: String,
    requests: u64,
    output: u64,
    rounds: usize,
    cols: u16,
    rows: u16,
    extra: Vec<String>,
    ui_secs: u64,
    starts: usize,
    parts: String,
    /// `INFERTOP_UI_NICE` values to run the dashboard with (None: the built-in default).
    nices: Vec<Option<i32>>,
}

impl Settings {
    fn from_env() -> Settings {
        let size = env_str("OBSERVER_SIZE", "200x60");
        let (cols, rows) = size
            .split_once('x')
            .and_then(|(c, r)| Some((c.parse().ok()?, r.parse().ok()?)))
            .unwrap_or((200, 60));
        Settings {
            model: env_str("OBSERVER_MODEL", "synthetic:tiny"),
            requests: env_or("OBSERVER_REQUESTS", 60),
            output: env_or("OBSERVER_OUTPUT", 64),
            rounds: env_or("OBSERVER_ROUNDS", 5),
            cols,
            rows,
            extra: env_str("OBSERVER_ARGS", "")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            ui_secs: env_or("OBSERVER_UI_SECS", 60),
            starts: env_or("OBSERVER_STARTS", 5),
            parts: env_str("OBSERVER_PARTS", "startup,observer,inproc,cpu"),
            nices: env_str("OBSERVER_NICES", "0,10")
                .split(',')
                .map(|v| v.trim().parse().ok())
                .collect(),
        }
    }

    /// The run's arguments, the same for both modes.
    fn run_args(&self, requests: Option<u64>, record: Option<&Path>) -> Vec<String> {
        let mut args = vec![
            "--model".to_string(),
            self.model.clone(),
            "--output-tokens".into(),
            self.output.to_string(),
            "--warmup".into(),
            "3".into(),
        ];
        if let Some(n) = requests {
            args.extend(["--requests".into(), n.to_string()]);
        }
        if let Some(path) = record {
            args.extend(["--record".into(), path.display().to_string()]);
        }
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// The dashboard in a pseudo-terminal.
struct PtyRun {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    spawned: Instant,
    bytes: Arc<AtomicU64>,
    /// When each watched text first appeared on screen.
    seen: Arc<Mutex<BTreeMap<&'static str, Instant>>>,
    /// The screen, kept up to date for the whole run when asked for (`start_parsed`).
    screen: Arc<Mutex<Option<vt100::Parser>>>,
}

impl PtyRun {
    /// Spawns the dashboard; while `watch` texts are still unseen, the output is parsed with
    /// `vt100` to notice them, after that it is only counted.
    fn start(
        args: &[String],
        env: &[(&str, String)],
        cols: u16,
        rows: u16,
        watch: &'static [&'static str],
    ) -> PtyRun {
        PtyRun::spawn(args, env, cols, rows, watch, false)
    }

    /// Like `start`, but the whole output is parsed for the whole run, so `screen_has` works.
    fn start_parsed(args: &[String], cols: u16, rows: u16) -> PtyRun {
        PtyRun::spawn(args, &[], cols, rows, &[], true)
    }

    /// `start_parsed` for another program (this bench binary as a feed) with `env` set.
    fn start_program(program: &str, env: &[(&str, String)], cols: u16, rows: u16) -> PtyRun {
        PtyRun::spawn_program(program, &[], env, cols, rows, &[], true)
    }

    fn spawn(
        args: &[String],
        env: &[(&str, String)],
        cols: u16,
        rows: u16,
        watch: &'static [&'static str],
        parse_all: bool,
    ) -> PtyRun {
        PtyRun::spawn_program(BIN, args, env, cols, rows, watch, parse_all)
    }

    fn spawn_program(
        program: &str,
        args: &[String],
        env: &[(&str, String)],
        cols: u16,
        rows: u16,
        watch: &'static [&'static str],
        parse_all: bool,
    ) -> PtyRun {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("NO_COLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut reader = pty.master.try_clone_reader().expect("pty reader");
        let writer = pty.master.take_writer().expect("pty writer");
        let bytes = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let screen = Arc::new(Mutex::new(
            parse_all.then(|| vt100::Parser::new(rows, cols, 0)),
        ));
        let spawned = Instant::now();
        let child = pty.slave.spawn_command(cmd).expect("spawn infertop");
        drop(pty.slave);
        {
            let (bytes, seen, screen) = (bytes.clone(), seen.clone(), screen.clone());
            let master = pty.master;
            thread::spawn(move || {
                let _keep = master;
                let mut parser = (!watch.is_empty()).then(|| vt100::Parser::new(rows, cols, 0));
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let now = Instant::now();
                    bytes.fetch_add(n as u64, Ordering::Relaxed);
                    if let Some(p) = screen.lock().expect("screen").as_mut() {
                        p.process(&buf[..n]);
                    }
                    if let Some(p) = parser.as_mut() {
                        p.process(&buf[..n]);
                        let text = p.screen().contents();
                        let mut seen = seen.lock().expect("seen");
                        for w in watch {
                            if text.contains(w) {
                                seen.entry(*w).or_insert(now);
                            }
                        }
                        if seen.len() == watch.len() {
                            parser = None;
                        }
                    }
                }
            });
        }
        PtyRun {
            child,
            writer,
            spawned,
            bytes,
            seen,
            screen,
        }
    }

    /// Whether `text` is on the screen now (only with `start_parsed`).
    fn screen_has(&self, text: &str) -> bool {
        let screen = self.screen.lock().expect("screen");
        screen
            .as_ref()
            .is_some_and(|p| p.screen().contents().contains(text))
    }

    /// Polls the screen until `text` is there (`present`) or gone; the time it took.
    fn wait_screen(&self, text: &str, present: bool, limit: Duration) -> Option<Duration> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if self.screen_has(text) == present {
                return Some(t0.elapsed());
            }
            thread::sleep(Duration::from_micros(500));
        }
        None
    }

    fn send(&mut self, keys: &str) {
        let _ = self.writer.write_all(keys.as_bytes());
        let _ = self.writer.flush();
    }

    fn pid(&self) -> u32 {
        self.child.process_id().expect("pid")
    }

    fn seen_after(&self, text: &str) -> Option<Duration> {
        let seen = self.seen.lock().expect("seen");
        seen.get(text).map(|t| t.duration_since(self.spawned))
    }

    fn quit(mut self) {
        let _ = self.writer.write_all(b"q");
        let _ = self.writer.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Steady requests in a record: their TPOTs.
fn record_tpots(path: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "request" && v["warmup"] == false)
        .filter_map(|v| v["tpot_s"].as_f64())
        .collect()
}

fn record_requests(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"type\":\"request\""))
        .count() as u64
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn median(v: &[f64]) -> f64 {
    Summary::of(v).p50
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn startup(s: &Settings) {
    println!("## start-up (first frame in a {}x{} pty)", s.cols, s.rows);
    println!("load average: {}", load());
    println!("| model | run | first frame | first frame shows | model loaded (WARMUP/RUNNING) |");
    println!("|---|---:|---:|---|---:|");
    const WATCH: &[&str] = &["LOADING", "WARMUP", "RUNNING"];
    let models = [s.model.clone(), "synthetic:small".to_string()];
    for model in models.iter() {
        let mut firsts = Vec::new();
        for i in 0..s.starts {
            let mut args = vec!["--model".to_string(), model.clone()];
            args.extend(s.extra.iter().cloned());
            let run = PtyRun::start(&args, &[], s.cols, s.rows, WATCH);
            let deadline = Instant::now() + Duration::from_secs(60);
            let loaded = loop {
                let loaded = run
                    .seen_after("WARMUP")
                    .into_iter()
                    .chain(run.seen_after("RUNNING"))
                    .min();
                if loaded.is_some() || Instant::now() > deadline {
                    break loaded;
                }
                thread::sleep(Duration::from_millis(5));
            };
            let first = WATCH
                .iter()
                .filter_map(|w| run.seen_after(w).map(|t| (t, *w)))
                .min();
            if let Some((t, _)) = first {
                firsts.push(t.as_secs_f64());
            }
            println!(
                "| {model} | {i} | {} | {} | {} |",
                first.map_or("-".into(), |(t, _)| ms(t)),
                first.map_or("nothing", |(_, w)| w),
                loaded.map_or("-".into(), ms)
            );
            run.quit();
        }
        if !firsts.is_empty() {
            println!("| {model} | median | {:.1} ms | | |", median(&firsts) * 1e3);
        }
    }
    println!();
}

fn observer(s: &Settings) {
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "## observer effect: TPOT p50, dashboard ({}x{}, 10 fps) vs headless",
        s.cols, s.rows
    );
    println!(
        "model {}, {} requests x {} output tokens (3 warmup), args {:?}",
        s.model, s.requests, s.output, s.extra
    );
    println!("load average at start: {}", load());
    // Variant 0 is headless; the others are the dashboard with INFERTOP_UI_NICE set to each
    // value (None: unset, the built-in default). The order rotates every round.
    let mut variants: Vec<Option<Option<i32>>> = vec![None];
    variants.extend(s.nices.iter().map(|n| Some(*n)));
    let label = |v: &Option<Option<i32>>| match v {
        None => "headless".to_string(),
        Some(None) => "dashboard (default nice)".to_string(),
        Some(Some(n)) => format!("dashboard INFERTOP_UI_NICE={n}"),
    };
    let mut header = "| round |".to_string();
    for v in &variants {
        header.push_str(&format!(" {} TPOT p50 |", label(v)));
    }
    for v in &variants[1..] {
        header.push_str(&format!(" ratio {} |", label(v)));
    }
    println!("{header}");
    println!("|{}", "---:|".repeat(2 * variants.len()));
    let mut p50s: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..s.rounds {
        let mut row = vec![0.0f64; variants.len()];
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let record = dir.path().join(format!("r{round}-v{i}.jsonl"));
            let args = s.run_args(Some(s.requests), Some(&record));
            match variants[i] {
                Some(nice) => {
                    let env: Vec<(&str, String)> = nice
                        .map(|n| ("INFERTOP_UI_NICE", n.to_string()))
                        .into_iter()
                        .collect();
                    let run = PtyRun::start(&args, &env, s.cols, s.rows, &[]);
                    let deadline = Instant::now() + Duration::from_secs(600);
                    while record_requests(&record) < s.requests && Instant::now() < deadline {
                        thread::sleep(Duration::from_millis(100));
                    }
                    run.quit();
                }
                None => {
                    let status = Command::new(BIN)
                        .args(&args)
                        .arg("--headless")
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .expect("run headless");
                    assert!(status.success(), "headless run failed: {status}");
                }
            }
            row[i] = median(&record_tpots(&record));
        }
        let mut line = format!("| {round} |");
        for v in &row {
            line.push_str(&format!(" {:.1} us |", v * 1e6));
        }
        for i in 1..variants.len() {
            let r = row[i] / row[0];
            line.push_str(&format!(" {r:.4} |"));
            ratios[i].push(r);
        }
        println!("{line}");
        for (i, v) in row.iter().enumerate() {
            p50s[i].push(*v);
        }
    }
    let spread = |v: &[f64]| {
        let max = v.iter().cloned().fold(f64::MIN, f64::max);
        let min = v.iter().cloned().fold(f64::MAX, f64::min);
        max / min
    };
    for i in 1..variants.len() {
        println!(
            "{}: median of round ratios {:.4}, ratio of medians {:.4}",
            label(&variants[i]),
            median(&ratios[i]),
            median(&p50s[i]) / median(&p50s[0])
        );
    }
    println!(
        "headless spread (max/min over rounds) {:.3}; load at end: {}",
        spread(&p50s[0]),
        load()
    );
    println!();
}

/// CPU time of every thread of `pid`, by tid: (name, seconds on CPU).
fn thread_cpu(pid: u32) -> BTreeMap<u32, (String, f64)> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let path: PathBuf = entry.path();
        let name = std::fs::read_to_string(path.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        // schedstat: nanoseconds on CPU first (no clock-tick rounding).
        let secs = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .map(|ns| ns / 1e9);
        if let Some(secs) = secs {
            out.insert(tid, (name, secs));
        }
    }
    out
}

fn ui_cpu(s: &Settings) {
    println!(
        "## UI CPU time at 10 fps, {}x{}, over {} s of a live run",
        s.cols, s.rows, s.ui_secs
    );
    println!("load average at start: {}", load());
    let args = s.run_args(None, None);
    let run = PtyRun::start(&args, &[], s.cols, s.rows, &[]);
    let pid = run.pid();
    // Past start-up and warmup.
    thread::sleep(Duration::from_secs(5));
    let before = thread_cpu(pid);
    let bytes_before = run.bytes.load(Ordering::Relaxed);
    let t0 = Instant::now();
    thread::sleep(Duration::from_secs(s.ui_secs));
    let after = thread_cpu(pid);
    let wall = t0.elapsed().as_secs_f64();
    let bytes = run.bytes.load(Ordering::Relaxed) - bytes_before;
    run.quit();
    println!("| thread | tid | CPU s | % of one core |");
    println!("|---|---:|---:|---:|");
    let mut total = 0.0;
    for (tid, (name, secs)) in &after {
        let used = secs - before.get(tid).map_or(0.0, |(_, s)| *s);
        total += used;
        let label = if *tid == pid {
            format!("{name} (main = UI)")
        } else {
            name.clone()
        };
        println!(
            "| {label} | {tid} | {used:.3} | {:.2}% |",
            100.0 * used / wall
        );
    }
    println!(
        "process total {:.1}% of one core; terminal output {:.1} KiB/s; load at end: {}",
        100.0 * total / wall,
        bytes as f64 / wall / 1024.0,
        load()
    );
    println!();
}

/// A pseudo-terminal whose slave end this process writes to (as the dashboard does to its
/// terminal); a thread reads and discards the master side.
fn open_pty_writer() -> std::fs::File {
    use std::os::fd::FromRawFd;
    // SAFETY: libc pty calls on a descriptor we own; ptsname_r writes into our buffer.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0, "posix_openpt failed");
        assert!(libc::grantpt(master) == 0 && libc::unlockpt(master) == 0);
        let mut name = [0 as libc::c_char; 128];
        assert!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()) == 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        let mut master = std::fs::File::from_raw_fd(master);
        thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
        });
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open pty slave")
    }
}

fn set_nice(nice: i32) {
    // SAFETY: plain syscalls on this thread's id.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if r != 0 {
        eprintln!("setpriority({nice}) failed (raising priority needs CAP_SYS_NICE)");
    }
}

/// The paired, in-process version of the observer effect: one worker (the real one, on
/// synthetic weights) runs without stopping, and this thread alternates every few seconds
/// between consuming its events as `--headless` does and being the dashboard (drain, apply
/// to `App`, refresh, draw the real render through `CrosstermBackend` into a pty at 10 fps),
/// at nice 0 and at `OBSERVER_UI_NICE` (10), and at nice 0 without `App::refresh`. Requests that start
/// and end in one mode count for it.
/// Differences between processes (which dominate run-to-run noise on this machine) cancel.
fn inproc(s: &Settings) {
    use infertop::engine::worker::{self, WorkerConfig};
    use infertop::engine::workload::{PromptSource, Workload};
    use infertop::event::{Control, Event, StopReason};
    use infertop::model::{DeviceSpec, ModelSpec};
    use infertop::stats::RunStats;
    use infertop::traffic::len::LenSpec;
    use infertop::ui::render::render;
    use infertop::ui::{App, AppConfig};
    use ratatui::backend::CrosstermBackend;
    use ratatui::layout::Rect;
    use ratatui::{Terminal, TerminalOptions, Viewport};

    let secs: u64 = env_or("OBSERVER_INPROC_SECS", 120);
    let ui_nice: i32 = env_or("OBSERVER_UI_NICE", 10);
    let segment = Duration::from_secs(env_or("OBSERVER_SEGMENT_SECS", 3));
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = candle_core::utils::get_num_threads();
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    let preset = s.model.trim_start_matches("synthetic:").to_string();
    println!(
        "## observer effect, paired in one process: {preset}, {} output tokens, {}x{}, {} s in {} s segments",
        s.output, s.cols, s.rows, secs, segment.as_secs()
    );
    println!("load average at start: {}", load());
    let (tx, rx) = crossbeam_channel::unbounded::<Event>();
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let cfg = WorkerConfig {
        model: ModelSpec::Synthetic { preset, seed: 0 },
        device: DeviceSpec::Cpu,
        dtype: candle_core::DType::F32,
        threads: candle_core::utils::get_num_threads(),
        traffic: TrafficPlan {
            prompt: Some(LenSpec::Fixed(128)),
            output: LenSpec::Fixed(s.output as usize),
            seed: 0,
            warmup: 3,
            requests: None,
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: infertop::traffic::Shard::WHOLE,
        },
        workload: Workload {
            batch: 1,
            source: PromptSource::Synthetic,
            vocab: 2048,
            tokenizer: None,
        },
        stop_at_eos: false,
        record_tokens: false,
        tokenizer: None,
        sampling: None,
        step_parts: None,
    };
    let handle = worker::spawn(cfg, tx, ctl_rx).expect("spawn worker");
    let mut terminal = Terminal::with_options(
        CrosstermBackend::new(std::io::BufWriter::with_capacity(
            1 << 16,
            open_pty_writer(),
        )),
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, s.cols, s.rows)),
        },
    )
    .expect("terminal");
    let mut app = App::new(AppConfig::default());
    let mut stats = RunStats::new();
    // mode 0: headless; 1: dashboard at nice 0; 2: dashboard at `ui_nice`; 3: the dashboard at
    // nice 0 without `App::refresh` (stale table): what the statistics walk costs the run.
    let names = [
        "headless".to_string(),
        "dashboard, nice 0".to_string(),
        format!("dashboard, nice {ui_nice}"),
        "dashboard, nice 0, no refresh".to_string(),
    ];
    const MODES: usize = 4;
    let mut tpots: [Vec<f64>; MODES] = Default::default();
    let mut ttfts: [Vec<f64>; MODES] = Default::default();
    let mut started_in: std::collections::HashMap<u64, usize> = Default::default();
    let frame = Duration::from_millis(100);
    let t0 = Instant::now();
    // Past loading and warmup before counting.
    thread::sleep(Duration::from_secs(3));
    let mut seg = 0usize;
    while t0.elapsed() < Duration::from_secs(secs + 3) {
        let mode = seg % MODES;
        set_nice(if mode == 2 { ui_nice } else { 0 });
        let end = Instant::now() + segment;
        let mut next_draw = Instant::now();
        let mut handle_event = |ev: &Event, app: Option<&mut App>| {
            match ev {
                Event::RequestStarted { index, warmup, .. } if !warmup => {
                    started_in.insert(*index, mode);
                }
                Event::DecodeSteps(steps) => {
                    for s in steps {
                        stats.record_step(s.itl_s, false);
                    }
                }
                Event::RequestDone(r) => {
                    stats.record_request(r);
                    if started_in.remove(&r.index) == Some(mode) {
                        ttfts[mode].push(r.ttft_s);
                        if let Some(t) = r.tpot_s {
                            tpots[mode].push(t);
                        }
                    }
                }
                _ => {}
            }
            if let Some(app) = app {
                app.apply(ev);
            }
        };
        while Instant::now() < end {
            if mode == 0 {
                if let Ok(ev) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                    handle_event(&ev, None);
                }
            } else {
                app.tick(t0.elapsed());
                for ev in rx.try_iter() {
                    handle_event(&ev, Some(&mut app));
                }
                if mode != 3 {
                    app.refresh_paced();
                }
                terminal.draw(|f| render(f, &app)).expect("draw");
                next_draw += frame;
                thread::sleep(next_draw.saturating_duration_since(Instant::now()));
            }
        }
        seg += 1;
    }
    set_nice(0);
    let _ = ctl_tx.send(Control::Stop(StopReason::UserStop));
    let _ = handle.join();
    let p50: Vec<f64> = tpots.iter().map(|v| median(v)).collect();
    println!("| mode | requests | TPOT p50 | TPOT ratio | TTFT p50 | TTFT ratio |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, name) in names.iter().enumerate() {
        println!(
            "| {name} | {} | {:.1} us | {:.4} | {:.2} ms | {:.4} |",
            tpots[i].len(),
            p50[i] * 1e6,
            p50[i] / p50[0],
            median(&ttfts[i]) * 1e3,
            median(&ttfts[i]) / median(&ttfts[0]),
        );
    }
    println!("load average at end: {}", load());
    println!();
}

/// Bytes the terminal receives in steady state at each size, and key-to-screen latency.
fn bytes(s: &Settings) {
    let sizes: Vec<(u16, u16)> = env_str("OBSERVER_BYTES_SIZES", "200x60,80x24")
        .split(',')
        .filter_map(|v| {
            let (c, r) = v.trim().split_once('x')?;
            Some((c.parse().ok()?, r.parse().ok()?))
        })
        .collect();
    let secs: u64 = env_or("OBSERVER_BYTES_SECS", 20);
    let warm: u64 = env_or("OBSERVER_BYTES_WARM_SECS", 5);
    println!(
        "## terminal bytes in steady state ({}, default settings, {secs} s after {warm} s of RUNNING)",
        s.model
    );
    println!("load average at start: {}", load());
    println!("| size | KB/s | bytes/frame (10 fps) | key-to-screen p50 | key-to-screen max |");
    println!("|---|---:|---:|---:|---:|");
    for (cols, rows) in sizes {
        let mut args = vec!["--model".to_string(), s.model.clone()];
        args.extend(s.extra.iter().cloned());
        let mut run = PtyRun::start_parsed(&args, cols, rows);
        if run
            .wait_screen(" RUNNING ", true, Duration::from_secs(120))
            .is_none()
        {
            println!("| {cols}x{rows} | never reached RUNNING | | | |");
            run.quit();
            continue;
        }
        thread::sleep(Duration::from_secs(warm));
        let before = run.bytes.load(Ordering::Relaxed);
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs(secs));
        let wall = t0.elapsed().as_secs_f64();
        let sent = run.bytes.load(Ordering::Relaxed) - before;
        // Key to screen: `?` opens the help overlay, `?` closes it again.
        let mut lat = Vec::new();
        for _ in 0..5 {
            for present in [true, false] {
                thread::sleep(Duration::from_millis(300));
                run.send("?");
                if let Some(t) = run.wait_screen("this help", present, Duration::from_secs(2)) {
                    lat.push(t.as_secs_f64());
                }
            }
        }
        let max = lat.iter().cloned().fold(0.0, f64::max);
        println!(
            "| {cols}x{rows} | {:.1} | {:.0} | {} | {:.1} ms{} |",
            sent as f64 / wall / 1e3,
            sent as f64 / wall / 10.0,
            if lat.is_empty() {
                "-".to_string()
            } else {
                format!("{:.1} ms", median(&lat) * 1e3)
            },
            max * 1e3,
            if lat.len() < 10 {
                " (some never came)"
            } else {
                ""
            }
        );
        run.quit();
    }
    println!("load average at end: {}", load());
    println!();
}

/// The dashboard thread's CPU seconds so far (the process's main thread).
fn main_thread_cpu(pid: u32) -> f64 {
    thread_cpu(pid).get(&pid).map_or(0.0, |(_, s)| *s)
}

/// Screen bytes, UI CPU and key-to-screen with the dashboard fed at each rate.
fn rates(_s: &Settings) {
    let sizes: Vec<(u16, u16)> = env_str("OBSERVER_BYTES_SIZES", "200x60,80x24")
        .split(',')
        .filter_map(|v| {
            let (c, r) = v.trim().split_once('x')?;
            Some((c.parse().ok()?, r.parse().ok()?))
        })
        .collect();
    let rates: Vec<(f64, u32)> = env_str("OBSERVER_RATES", "1:10,10:10,100:10,1000:10,1000:100")
        .split(',')
        .filter_map(|v| {
            let (r, s) = v.trim().split_once(':')?;
            Some((r.parse().ok()?, s.parse().ok()?))
        })
        .collect();
    let secs: u64 = env_or("OBSERVER_BYTES_SECS", 20);
    let warm: u64 = env_or("OBSERVER_BYTES_WARM_SECS", 5);
    let me = std::env::current_exe().expect("this bench's path");
    let me = me.to_string_lossy().into_owned();
    println!(
        "## the dashboard fed at a rate (synthetic events, 10 fps, {secs} s after {warm} s of RUNNING)"
    );
    println!("load average at start: {}", load());
    println!(
        "| size | requests/s | decode steps/s | requests seen | KB/s | bytes/frame | UI CPU | key-to-screen p50 | key-to-screen max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (cols, rows) in sizes {
        for &(rate, steps) in &rates {
            let env = [("OBSERVER_FEED", format!("{rate}:{steps}"))];
            let mut run = PtyRun::start_program(&me, &env, cols, rows);
            if run
                .wait_screen(" RUNNING ", true, Duration::from_secs(60))
                .is_none()
            {
                println!("| {cols}x{rows} | {rate} | never reached RUNNING | | | | | | |");
                run.quit();
                continue;
            }
            thread::sleep(Duration::from_secs(warm));
            let pid = run.pid();
            let before = run.bytes.load(Ordering::Relaxed);
            let cpu0 = main_thread_cpu(pid);
            let t0 = Instant::now();
            thread::sleep(Duration::from_secs(secs));
            let wall = t0.elapsed().as_secs_f64();
            let sent = run.bytes.load(Ordering::Relaxed) - before;
            let cpu = main_thread_cpu(pid) - cpu0;
            let seen = {
                let screen = run.screen.lock().expect("screen");
                screen.as_ref().map_or(String::new(), |p| {
                    let text = p.screen().contents();
                    text.split(" requests")
                        .next()
                        .and_then(|h| h.rsplit(' ').next())
                        .unwrap_or("")
                        .to_string()
                })
            };
            let mut lat = Vec::new();
            for _ in 0..5 {
                for present in [true, false] {
                    thread::sleep(Duration::from_millis(300));
                    run.send("?");
                    if let Some(t) = run.wait_screen("this help", present, Duration::from_secs(2)) {
                        lat.push(t.as_secs_f64());
                    }
                }
            }
            let max = lat.iter().cloned().fold(0.0, f64::max);
            println!(
                "| {cols}x{rows} | {rate} | {} | {seen} | {:.2} | {:.0} | {:.2}% | {} | {:.1} ms{} |",
                rate * f64::from(steps),
                sent as f64 / wall / 1e3,
                sent as f64 / wall / 10.0,
                100.0 * cpu / wall,
                if lat.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.1} ms", median(&lat) * 1e3)
                },
                max * 1e3,
                if lat.len() < 10 {
                    " (some never came)"
                } else {
                    ""
                }
            );
            run.quit();
        }
    }
    println!("load average at end: {}", load());
    println!();
}

/// `OBSERVER_FEED=RATE:STEPS`: this process is the dashboard, fed by `RateFeed` in real time.
fn feed_child(spec: &str) {
    use common::rate::RateFeed;
    use infertop::event::{Control, Event, StopReason};
    use infertop::ui::{App, AppConfig, ColorMode, Look};

    let (rate, steps) = spec
        .split_once(':')
        .and_then(|(r, s)| Some((r.parse::<f64>().ok()?, s.parse::<u32>().ok()?)))
        .unwrap_or_else(|| panic!("OBSERVER_FEED={spec}: want RATE:STEPS, e.g. 1000:100"));
    let fps: u32 = env_or("OBSERVER_FEED_FPS", 10);
    let look = Look::load("default", ColorMode::Auto, false, None, fps).expect("theme");
    let app = App::new(AppConfig {
        keys: look.keys,
        themes: look.themes,
        ascii: look.ascii,
        ..AppConfig::default()
    });
    let (tx, rx) = crossbeam_channel::bounded::<Event>(infertop::event::EVENT_QUEUE);
    let (ctl_tx, ctl_rx) = crossbeam_channel::unbounded::<Control>();
    let feeder = thread::spawn(move || {
        let mut feed = RateFeed::new(rate, steps);
        let t0 = Instant::now();
        let mut out = Vec::new();
        loop {
            if let Ok(Control::Stop(reason)) = ctl_rx.try_recv() {
                let _ = tx.send(Event::Finished(reason));
                return;
            }
            feed.until(t0.elapsed().as_secs_f64(), &mut out);
            for (_, ev) in out.drain(..) {
                if tx.send(ev).is_err() {
                    return;
                }
            }
            thread::sleep(Duration::from_millis(1));
        }
    });
    let signals = infertop::signals::Signals::register().expect("signal handlers");
    let mut app = app;
    let shown =
        infertop::ui::run_dashboard(rx, ctl_tx.clone(), &mut app, fps, &signals, &mut |_, _| {});
    let _ = ctl_tx.send(Control::Stop(StopReason::UserStop));
    let _ = feeder.join();
    if let Err(e) = shown {
        eprintln!("feed dashboard: {e}");
    }
}

fn main() {
    if let Ok(spec) = std::env::var("OBSERVER_FEED") {
        feed_child(&spec);
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument would select nothing here.
    let s = Settings::from_env();
    println!("infertop observer bench: {BIN}");
    if s.parts.contains("startup") {
        startup(&s);
    }
    if s.parts.contains("observer") {
        observer(&s);
    }
    if s.parts.contains("inproc") {
        inproc(&s);
    }
    if s.parts.contains("cpu") {
        ui_cpu(&s);
    }
    if s.parts.contains("bytes") {
        bytes(&s);
    }
    if s.parts.contains("rates") {
        rates(&s);
    }
}
