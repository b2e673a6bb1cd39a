//! `infertop follow RECORD|- … [--agent CMD …]`: the dashboard attached to records that other
//! infertop runs are writing: files (their `--record`), a stream on stdin (`--jsonl` through
//! ssh), or commands infertop starts and reads (`--agent 'ssh gpu1 infertop --jsonl …'`).
//! Several are merged into one dashboard (`ui::feed`): the table over the union of their raw
//! samples, a row per source.
//!
//! Each source has a thread: it reads its header (the session waits for every header before
//! it draws, so an ssh line's errors reach the terminal as text), then each line as it is
//! written, as events (`record::feed::Feeder`, flushed whenever the source has nothing more
//! to read, so a line is drawn within a frame of its write), on the one channel. A file is
//! polled every 50 ms; a stream is read as it comes. A source that ends without its footer is
//! marked (the others go on); one that is silent is said to be quiet.
//!
//! Nothing here controls the runs: the load keys and pause are refused with a line, and
//! quitting leaves them running (an agent is in its own process group, so Ctrl-C never
//! reaches it; its stream just closes).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::print_stdout;
use super::replay::{fold_headless, show};
use crate::exit::{Failure, EXIT_OK};
use crate::plan::follow::{FollowPlan, SourceInput, Spec};
use crate::plan::opts::FollowOpts;
use crate::plan::replay::record_screen;
use crate::record::feed::{Fed, FeedEvent, Feeder, Note, SourceState};
use crate::record::line::Header;
use crate::record::reader::{header_reason, parse, LineReader, Next};
use crate::signals::Signals;
use crate::ui::feed::FeedScreen;
use crate::ui::state::Producer;
use crate::ui::App;
use crate::util::say;
use crate::util::table::{or_missing, TextTable};

/// How often a followed file is looked at for new lines.
const POLL: Duration = Duration::from_millis(50);

/// Waiting this long for a source's header, the session says what it waits for.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(1);

/// `infertop follow`.
pub fn follow(opts: &FollowOpts) -> Result<i32, Failure> {
    let FollowPlan {
        specs,
        look,
        headless,
        quiet_after,
        format,
    } = crate::plan::follow::plan(opts)?;
    let signals = Signals::register()
        .map_err(|e| Failure::runtime(format!("cannot install signal handlers: {e}")))?;
    let (tx, rx) = crossbeam_channel::bounded::<FeedEvent>(crate::event::EVENT_QUEUE);
    // Closed (dropped) when every source has its header: then they go on.
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(0);
    let stop = Arc::new(AtomicBool::new(false));
    for (i, spec) in specs.iter().enumerate() {
        let source = SourceThread {
            source: i,
            spec: spec.clone(),
            tx: tx.clone(),
            go: go_rx.clone(),
            stop: stop.clone(),
        };
        std::thread::Builder::new()
            .name(format!("infertop-follow-{i}"))
            .spawn(move || source.run())
            .map_err(|e| Failure::runtime(format!("cannot start a follow thread: {e}")))?;
    }
    drop(tx);
    drop(go_rx);
    let early = wait_for_headers(&specs, &rx, &signals)?;
    let headers: Vec<&Header> = early
        .iter()
        .filter_map(|e| match e {
            FeedEvent::Header { header, .. } => Some(header.as_ref()),
            _ => None,
        })
        .collect();
    let watch = headers.iter().any(|h| h.config.is_watch());
    if watch {
        stop.store(true, Ordering::Relaxed);
        return Err(Failure::usage(
            "follow: a watch's record is replayed on the watch screen (infertop replay FILE); \
             follow takes runs' records",
        ));
    }
    let Some(first) = headers.first().map(|h| (*h).clone()) else {
        // Every source failed before its header: the first reason is the error.
        let why = early
            .iter()
            .find_map(|e| match e {
                FeedEvent::Source {
                    source,
                    state: Some(SourceState::Died(why)),
                    ..
                } => Some(format!("{}: {why}", specs[*source].name)),
                _ => None,
            })
            .unwrap_or_else(|| "follow: no source sent a header".into());
        return Err(Failure::usage(why));
    };
    let names = specs.iter().map(|s| s.name.clone()).collect();
    let mut screen = FeedScreen::new(
        App::new(record_screen(&look, &first)),
        Producer::Follow,
        names,
        None,
    );
    screen.quiet_after = quiet_after;
    for ev in &early {
        screen.apply(ev);
    }
    // Every source may go on now.
    drop(go_tx);
    let shown = if headless {
        fold_headless(&mut screen, &rx, &signals);
        Ok(())
    } else {
        show(&mut screen, &rx, look.fps, &signals)
    };
    stop.store(true, Ordering::Relaxed);
    drop(rx);
    shown?;
    let mut text = screen.summary().render(format);
    if screen.merged() && format == crate::summary::SummaryFormat::Md {
        text.push_str(&sources_markdown(&screen));
    }
    print_stdout(&text)?;
    Ok(signals.exit_code().unwrap_or(EXIT_OK))
}

/// Waits for every source's header (or its end), saying on stderr what it waits for and what
/// the sources say meanwhile (an ssh line's own errors). Returns what came, in order.
fn wait_for_headers(
    specs: &[Spec],
    rx: &Receiver<FeedEvent>,
    signals: &Signals,
) -> Result<Vec<FeedEvent>, Failure> {
    let started = Instant::now();
    let mut ready = vec![false; specs.len()];
    let mut early = Vec::new();
    let mut said = false;
    while ready.iter().any(|r| !r) {
        if signals.stop_reason().is_some() {
            return Err(Failure {
                code: signals.exit_code().unwrap_or(crate::exit::EXIT_FAILURE),
                message: "follow: stopped while waiting for the sources' first lines".into(),
            });
        }
        if !said && started.elapsed() >= SAY_WAITING_AFTER {
            said = true;
            let waiting: Vec<&str> = specs
                .iter()
                .zip(&ready)
                .filter(|(_, r)| !**r)
                .map(|(s, _)| s.name.as_str())
                .collect();
            say!(
                "infertop: waiting for the first line of {} (Ctrl-C gives up)",
                waiting.join(", ")
            );
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(ev) => {
                match &ev {
                    FeedEvent::Header { source, .. } => ready[*source] = true,
                    FeedEvent::Source {
                        source,
                        state,
                        note,
                    } => {
                        let name = &specs[*source].name;
                        if let Some(n) = note {
                            say!("infertop: {name}: {}", n.text);
                        }
                        if let Some(SourceState::Died(why)) = state {
                            // One source: its reason is the error, said once at the end.
                            if specs.len() > 1 {
                                say!("infertop: {name}: {why}");
                            }
                            ready[*source] = true;
                        }
                    }
                    _ => {}
                }
                early.push(ev);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    Ok(early)
}

/// The sources as a markdown table, after the merged summary.
fn sources_markdown(screen: &FeedScreen) -> String {
    use crate::util::format::ms;
    let mut out = format!(
        "\n## Sources ({} merged)\n\nThe table above is over the union of their raw samples; {}.\n\n",
        screen.sources.len(),
        screen
            .alignment
            .as_ref()
            .map_or(crate::record::merge::ALIGNMENT, |a| a.words.as_str())
    );
    let mut t = TextTable::new()
        .left(["source", "state"])
        .right(["requests", "failed", "TTFT p50", "TPOT p50"]);
    for row in &screen.sources {
        let state = match &row.state {
            SourceState::Died(why) => format!("died: {why}"),
            _ => crate::ui::feed::render::state_words(row, screen.wall),
        };
        t.row([
            row.name.to_string(),
            state,
            row.requests.to_string(),
            row.failed.to_string(),
            or_missing(row.ttft_p50.map(ms)),
            or_missing(row.tpot_p50.map(ms)),
        ]);
    }
    out.push_str(&t.markdown());
    out
}

/// One source's thread.
struct SourceThread {
    source: usize,
    spec: Spec,
    tx: Sender<FeedEvent>,
    go: Receiver<()>,
    stop: Arc<AtomicBool>,
}

/// The source's lines: a file (polled as it grows), or a stream (stdin, an agent's output),
/// with what to say when it ends without a footer.
enum Reader {
    File {
        path: PathBuf,
        lines: LineReader<BufReader<File>>,
    },
    Stream {
        lines: LineReader<BufReader<Box<dyn Read + Send>>>,
        child: Option<Child>,
        last_words: Arc<Mutex<Option<String>>>,
    },
}

/// The screen went away, or the session asked the source to stop.
struct Gone;

impl SourceThread {
    fn run(self) {
        let _ = self.follow();
    }

    fn send(&self, ev: FeedEvent) -> Result<(), Gone> {
        self.tx.send(ev).map_err(|_| Gone)
    }

    fn died(&self, why: String) -> Result<(), Gone> {
        self.send(FeedEvent::Source {
            source: self.source,
            state: Some(SourceState::Died(why)),
            note: None,
        })
    }

    fn open(&self) -> Result<Reader, String> {
        match &self.spec.input {
            SourceInput::File(path) => Ok(Reader::File {
                path: path.clone(),
                lines: LineReader::open(path)?,
            }),
            SourceInput::Stdin => Ok(Reader::Stream {
                lines: LineReader::new(BufReader::with_capacity(
                    1 << 16,
                    Box::new(std::io::stdin()),
                )),
                child: None,
                last_words: Arc::default(),
            }),
            SourceInput::Agent(cmd) => self.spawn_agent(cmd),
        }
    }

    /// Starts `sh -c CMD` in its own process group (Ctrl-C in this terminal never reaches it),
    /// its stdout the record's lines, its stderr lines passed on as notes.
    fn spawn_agent(&self, cmd: &str) -> Result<Reader, String> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the agent `{cmd}` ({e})"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| format!("the agent `{cmd}` has no stdout"))?;
        let last_words: Arc<Mutex<Option<String>>> = Arc::default();
        if let Some(stderr) = child.stderr.take() {
            let (tx, source, last) = (self.tx.clone(), self.source, last_words.clone());
            let _ = std::thread::Builder::new()
                .name(format!("infertop-agent-{source}"))
                .spawn(move || {
                    for line in BufReader::new(stderr).lines() {
                        let Ok(line) = line else { break };
                        let line = crate::util::one_line(&line);
                        if line.trim().is_empty() {
                            continue;
                        }
                        if let Ok(mut l) = last.lock() {
                            *l = Some(line.clone());
                        }
                        let note = FeedEvent::Source {
                            source,
                            state: None,
                            note: Some(Note::warn(line)),
                        };
                        if tx.send(note).is_err() {
                            return;
                        }
                    }
                });
        }
        Ok(Reader::Stream {
            lines: LineReader::new(BufReader::with_capacity(1 << 16, Box::new(stdout))),
            child: Some(child),
            last_words,
        })
    }

    fn follow(&self) -> Result<(), Gone> {
        let mut reader = match self.open() {
            Ok(r) => r,
            Err(why) => return self.died(why),
        };
        let mut feeder = Feeder::new();
        let mut out = Vec::new();
        let mut header_sent = false;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(Gone);
            }
            // A stream about to wait for more: what is held goes out now, so a written line is
            // drawn within a frame (a file does this at its end, below).
            if reader.stream_idle() {
                feeder.flush(&mut out);
                self.send_all(&mut out)?;
            }
            let line = match reader.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => {
                    // The end for now: a file grows later (a partial line waits for its end).
                    if let Reader::File { path, lines } = &reader {
                        feeder.flush(&mut out);
                        self.send_all(&mut out)?;
                        if std::fs::metadata(path).is_ok_and(|m| m.len() < lines.read_bytes()) {
                            return self.died(format!(
                                "{} was truncated (a new run writing the same file?); stopped \
                                 following it",
                                path.display()
                            ));
                        }
                        std::thread::sleep(POLL);
                        continue;
                    }
                    // A stream that ends is over.
                    feeder.flush(&mut out);
                    self.send_all(&mut out)?;
                    if !header_sent {
                        return self.died(format!(
                            "the stream ended before its first line{}",
                            reader.end_words()
                        ));
                    }
                    if !feeder.footer_seen() {
                        return self.died(format!(
                            "the stream ended without a footer{} (the run may go on: its --record \
                             keeps it)",
                            reader.end_words()
                        ));
                    }
                    return Ok(());
                }
                Err(e) => {
                    let why = crate::util::one_line(&e.to_string());
                    return self.died(format!("cannot read ({why})"));
                }
            };
            if !header_sent {
                match header_reason(&line) {
                    Ok(h) => {
                        self.send(FeedEvent::Header {
                            source: self.source,
                            header: Box::new(h),
                        })?;
                        header_sent = true;
                        // Wait for the session to have every source's header.
                        let _ = self.go.recv();
                    }
                    Err(why) => return self.died(why),
                }
            }
            feeder.push(parse(&line), &mut out);
            self.send_all(&mut out)?;
            if feeder.footer_seen() {
                feeder.flush(&mut out);
                return self.send_all(&mut out);
            }
        }
    }

    fn send_all(&self, out: &mut Vec<Fed>) -> Result<(), Gone> {
        for fed in out.drain(..) {
            let source = self.source;
            let ev = match fed {
                Fed::Event { t_s, event } => FeedEvent::Run { source, t_s, event },
                Fed::Sweep(config) => FeedEvent::Sweep { source, config },
                Fed::FooterItl(itl) => FeedEvent::FooterItl { source, itl },
                Fed::Note(note) => FeedEvent::Source {
                    source,
                    state: None,
                    note: Some(note),
                },
            };
            self.send(ev)?;
        }
        Ok(())
    }
}

impl Reader {
    /// Whether this is a stream whose next read would wait (nothing buffered).
    fn stream_idle(&self) -> bool {
        match self {
            Reader::File { .. } => false,
            Reader::Stream { lines, .. } => lines.idle(),
        }
    }

    /// The next whole line (`None`: nothing more for now; a stream's last line without its
    /// newline comes before that).
    fn next_line(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        match self {
            Reader::File { lines, .. } => match lines.next_line()? {
                Next::Line(l) => Ok(Some(l.to_vec())),
                Next::End { .. } => Ok(None),
            },
            Reader::Stream { lines, .. } => Ok(lines.next_or_last()?.map(<[u8]>::to_vec)),
        }
    }

    /// How a stream ended, for the line that says so: the agent's exit status and its last
    /// line on stderr.
    fn end_words(&mut self) -> String {
        let Reader::Stream {
            child, last_words, ..
        } = self
        else {
            return String::new();
        };
        let mut words = String::new();
        if let Some(child) = child {
            let deadline = Instant::now() + Duration::from_secs(2);
            let status = loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    _ => break None,
                }
            };
            if let Some(s) = status {
                words = match s.code() {
                    Some(c) => format!(" (the agent exited with status {c}"),
                    None => " (the agent was killed by a signal".into(),
                };
            } else {
                words = " (the agent closed its output".into();
            }
        }
        // The stderr thread may still be passing on the last lines.
        std::thread::sleep(Duration::from_millis(50));
        if let Some(last) = last_words.lock().ok().and_then(|l| l.clone()) {
            if words.is_empty() {
                words.push_str(" (");
            } else {
                words.push_str("; ");
            }
            words.push_str(&format!("its last words: {last}"));
        }
        if !words.is_empty() {
            words.push(')');
        }
        words
    }
}

/// Follows record files from this process (benchmarks and tests drive the screen themselves):
/// a source thread per file, sending on `tx` from its first line on. Setting the returned
/// flag stops them.
pub fn follow_files(paths: &[PathBuf], tx: Sender<FeedEvent>) -> Result<Arc<AtomicBool>, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    // Closed at once: no source waits for the others' headers.
    let (_, go) = crossbeam_channel::bounded::<()>(0);
    for (i, p) in paths.iter().enumerate() {
        let source = SourceThread {
            source: i,
            spec: Spec {
                name: crate::util::file_name(p),
                input: SourceInput::File(p.clone()),
            },
            tx: tx.clone(),
            go: go.clone(),
            stop: stop.clone(),
        };
        std::thread::Builder::new()
            .name(format!("infertop-follow-{i}"))
            .spawn(move || source.run())
            .map_err(|e| Failure::runtime(format!("cannot start a follow thread: {e}")))?;
    }
    Ok(stop)
}
