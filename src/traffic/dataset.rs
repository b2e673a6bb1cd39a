//! Dataset and trace files, read into compact rows: ShareGPT (a JSON array or JSONL of
//! `{"conversations":[{"from","value"}|{"role","content"}]}`), JSONL rows in the shape AIPerf
//! and Mooncake use (`text`/`prompt`/`text_input`, chat `messages`, or `input_length` with
//! optional `hash_ids`; `output_length`; `timestamp` in ms or `delay` in ms after the row before;
//! `session_id` for the turns of one conversation), and BurstGPT's CSV (`Timestamp` in seconds,
//! `Model`, `Request tokens`, `Response tokens`).
//!
//! Rows are held compactly (about 40 bytes each, plus their text in one arena), so a
//! 1.4M-row trace fits in memory and can be shuffled; the file is read once, streamed, with its
//! sha256 computed on the way. A malformed row names the file, line and field, or is skipped and
//! counted with `--skip-bad-rows`; every skipped row is counted with its reason.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `--dataset-format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// From the extension and the first row.
    #[default]
    Auto,
    /// ShareGPT conversations (a JSON array, or JSONL).
    Sharegpt,
    /// JSONL rows: text, prompt, messages or input_length; output_length, timestamp, delay.
    Jsonl,
    /// Mooncake traces: JSONL rows with timestamp, input_length, output_length, hash_ids.
    Mooncake,
    /// BurstGPT's CSV (Timestamp, Model, Request tokens, Response tokens, ...).
    Burstgpt,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Sharegpt => "sharegpt",
            Format::Jsonl => "jsonl",
            Format::Mooncake => "mooncake",
            Format::Burstgpt => "burstgpt",
        }
    }
}

/// Who says a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result (`role: tool`), answering the assistant's call before it.
    Tool,
    /// The row's tool definitions (`tools`, BFCL's `function`), as OpenAI JSON text: offered
    /// with the row's requests over an API of messages, written into the prompt otherwise.
    Tools,
}

impl Role {
    /// ShareGPT's `from` and OpenAI's `role` names.
    fn parse(s: &str) -> Option<Role> {
        match s.trim().to_ascii_lowercase().as_str() {
            "system" => Some(Role::System),
            "human" | "user" => Some(Role::User),
            "gpt" | "assistant" | "chatgpt" | "bard" | "bing" | "model" => Some(Role::Assistant),
            "tool" | "function" | "ipython" | "observation" => Some(Role::Tool),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Tools => "tools",
        }
    }
}

/// One message of a row, its text in the dataset's arena.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Msg {
    role: Role,
    start: u32,
    len: u32,
    /// Its length in tokens, once counted (`Dataset::count_tokens`); 0 before.
    tokens: u32,
}

/// No value (a `u32` field that was not given).
const NONE: u32 = u32::MAX;

/// One row, compactly: where its messages and hash ids are, and its numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// The line of the file (JSONL, CSV), or the position in the array (JSON), 1-based.
    pub line: u32,
    msg_start: u32,
    msg_count: u16,
    hash_count: u16,
    hash_start: u32,
    input_length: u32,
    output_length: u32,
    session: u32,
    /// Seconds from the trace's start (`NaN`: the row has no time).
    at_s: f64,
}

impl Row {
    /// `input_length`: a synthetic prompt of exactly this many tokens.
    pub fn input_length(&self) -> Option<usize> {
        (self.input_length != NONE).then_some(self.input_length as usize)
    }

    /// `output_length` (or BurstGPT's response tokens), when the row gives it.
    pub fn output_length(&self) -> Option<usize> {
        (self.output_length != NONE).then_some(self.output_length as usize)
    }

    /// Seconds from the trace's start, when the row has a time.
    pub fn at_s(&self) -> Option<f64> {
        (!self.at_s.is_nan()).then_some(self.at_s)
    }

    /// The conversation the row is a turn of (`session_id`), numbered from 0 in file order.
    pub fn session(&self) -> Option<u32> {
        (self.session != NONE).then_some(self.session)
    }
}

use crate::event::DatasetInfo;

/// How to read a file.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    pub format: Format,
    /// `key=value` pairs a row must match (`--dataset-filter model=GPT-4`).
    pub filter: Vec<(String, String)>,
    /// Skip malformed rows (counted) instead of stopping at the first.
    pub skip_bad_rows: bool,
}

/// `--dataset-filter`: the `key=value` pairs (keys normalized).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter(pub Vec<(String, String)>);

/// `--dataset-filter model=GPT-4,log_type=Conversation log`: comma-separated `key=value`.
pub fn parse_filter_flag(s: &str) -> Result<Filter, String> {
    parse_filter(s).map(Filter)
}

/// The pairs of a filter spec.
pub fn parse_filter(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let Some((k, v)) = part.split_once('=') else {
            return Err(format!(
                "`{part}` is not key=value (write e.g. model=GPT-4)"
            ));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            return Err(format!("`{part}` has no key (write e.g. model=GPT-4)"));
        }
        out.push((normalize_key(k), v.to_string()));
    }
    Ok(out)
}

/// Keys compared without case, spaces or underscores (`Log Type` = `log_type`).
fn normalize_key(k: &str) -> String {
    k.chars()
        .filter(|c| !c.is_whitespace() && *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// A dataset in memory: compact rows, their messages' text in one arena, their hash ids.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    pub info: DatasetInfo,
    pub path: PathBuf,
    rows: Vec<Row>,
    msgs: Vec<Msg>,
    text: String,
    hash_ids: Vec<u32>,
    /// Conversations (`session_id`), in first-seen order.
    sessions: u32,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    pub fn row(&self, i: usize) -> Option<&Row> {
        self.rows.get(i)
    }

    /// Conversations marked by `session_id`.
    pub fn sessions(&self) -> usize {
        self.sessions as usize
    }

    /// The row's messages, in order, with their token counts (0 before `count_tokens`).
    pub fn messages(&self, row: &Row) -> impl Iterator<Item = (Role, &str, usize)> + '_ {
        let start = row.msg_start as usize;
        let end = start + row.msg_count as usize;
        self.msgs[start.min(self.msgs.len())..end.min(self.msgs.len())]
            .iter()
            .map(|m| {
                let (a, b) = (m.start as usize, (m.start + m.len) as usize);
                (m.role, self.text.get(a..b).unwrap_or(""), m.tokens as usize)
            })
    }

    /// The row's Mooncake block ids.
    pub fn hash_ids(&self, row: &Row) -> &[u32] {
        let start = row.hash_start as usize;
        let end = start + row.hash_count as usize;
        self.hash_ids.get(start..end).unwrap_or(&[])
    }

    /// Counts every message's tokens with `count` (exact with a tokenizer, else an estimate).
    pub fn count_tokens(&mut self, count: impl Fn(&str) -> usize) -> Result<(), String> {
        for (i, m) in self.msgs.iter_mut().enumerate() {
            // A tokenizer counts a million prompts in tens of seconds: a signal is answered.
            if i.is_multiple_of(1024) {
                crate::signals::check("counting the dataset's tokens")?;
            }
            let (a, b) = (m.start as usize, (m.start + m.len) as usize);
            let n = count(self.text.get(a..b).unwrap_or(""));
            m.tokens = u32::try_from(n).unwrap_or(u32::MAX - 1);
        }
        Ok(())
    }

    /// Heap bytes the rows take (without the text), for the memory benchmark.
    pub fn row_bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row>()
            + self.msgs.capacity() * std::mem::size_of::<Msg>()
            + self.hash_ids.capacity() * 4
    }

    fn skip(&mut self, reason: &str) {
        *self.info.skipped.entry(reason.to_string()).or_insert(0) += 1;
    }

    fn push_text(&mut self, s: &str) -> Result<(u32, u32), String> {
        let start = u32::try_from(self.text.len())
            .map_err(|_| "over 4 GiB of prompt text; split the file".to_string())?;
        let len = u32::try_from(s.len()).map_err(|_| "a prompt over 4 GiB".to_string())?;
        start
            .checked_add(len)
            .ok_or_else(|| "over 4 GiB of prompt text; split the file".to_string())?;
        self.text.push_str(s);
        Ok((start, len))
    }
}

/// A row as a reader made it, before it is stored compactly.
#[derive(Debug, Default)]
struct Parsed {
    messages: Vec<(Role, String)>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    /// Absolute seconds, or a delay in seconds after the row before.
    at_s: Option<f64>,
    delay_s: Option<f64>,
    hash_ids: Vec<u64>,
    session: Option<String>,
}

/// Reads `path` as `opts` say; errors are one line naming the file (and line and field).
pub fn read(path: &Path, opts: &ReadOptions) -> Result<Dataset, String> {
    let shown = path.display().to_string();
    if path.is_dir() {
        return Err(format!("{shown}: is a directory; pass a dataset file"));
    }
    let file = File::open(path).map_err(|e| crate::util::io_error(path, &e))?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    if bytes == 0 {
        return Err(format!("{shown}: empty (no rows)"));
    }
    let mut reader = Hashing::new(BufReader::with_capacity(1 << 20, file));
    let format = match opts.format {
        Format::Auto => detect(path, &mut reader)?,
        f => f,
    };
    let mut ds = Dataset {
        path: path.to_path_buf(),
        info: DatasetInfo {
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| shown.clone()),
            format: format.name().to_string(),
            bytes,
            filter: (!opts.filter.is_empty()).then(|| {
                opts.filter
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            ..DatasetInfo::default()
        },
        ..Dataset::default()
    };
    let mut state = Stored::default();
    let mut add = |ds: &mut Dataset, line: usize, parsed: Result<Option<Parsed>, String>| {
        // A million rows take seconds: a signal is answered between rows.
        if line.is_multiple_of(4096) {
            crate::signals::check("reading the dataset")?;
        }
        store(ds, &mut state, line, parsed, opts, &shown)
    };
    match format {
        Format::Burstgpt => read_csv(&mut reader, &mut ds, opts, &shown, &mut add)?,
        Format::Sharegpt if reader.starts_with_bracket()? => {
            read_array(&mut reader, &mut ds, opts, &shown, &mut add)?
        }
        _ => read_jsonl(&mut reader, &mut ds, opts, format, &shown, &mut add)?,
    }
    // Whatever was left unread (a trailing newline) still counts for the sha256.
    std::io::copy(&mut reader, &mut std::io::sink())
        .map_err(|e| format!("{shown}: {}", crate::util::one_line(&e.to_string())))?;
    ds.info.sha256 = reader.hex();
    // Held for the run: no slack from growing.
    ds.rows.shrink_to_fit();
    ds.msgs.shrink_to_fit();
    ds.hash_ids.shrink_to_fit();
    ds.text.shrink_to_fit();
    ds.info.rows = ds.rows.len() as u64;
    ds.info.timed = !ds.rows.is_empty() && ds.rows.iter().all(|r| !r.at_s.is_nan());
    ds.sessions = state.sessions.len() as u32;
    if ds.rows.is_empty() {
        let why = if ds.info.skipped.is_empty() {
            "no rows".to_string()
        } else {
            let parts: Vec<String> = ds
                .info
                .skipped
                .iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect();
            format!("no usable rows ({})", parts.join(", "))
        };
        return Err(format!("{shown}: {why}"));
    }
    Ok(ds)
}

/// What `store` keeps between rows: the last time (for delays and ordering), sessions seen.
#[derive(Default)]
struct Stored {
    last_at_s: Option<f64>,
    sessions: HashMap<String, u32>,
}

fn store(
    ds: &mut Dataset,
    st: &mut Stored,
    line: usize,
    parsed: Result<Option<Parsed>, String>,
    opts: &ReadOptions,
    shown: &str,
) -> Result<(), String> {
    let p = match parsed {
        Ok(Some(p)) => p,
        Ok(None) => return Ok(()),
        Err(e) if opts.skip_bad_rows => {
            let _ = e;
            ds.skip("malformed");
            return Ok(());
        }
        Err(e) => {
            return Err(format!(
                "{shown}:{line}: {e} (fix the row, or pass --skip-bad-rows to skip such rows)"
            ))
        }
    };
    if p.messages.is_empty() && p.input_length.is_none() {
        ds.skip("no prompt");
        return Ok(());
    }
    if p.input_length == Some(0) {
        ds.skip("input length 0");
        return Ok(());
    }
    if p.output_length == Some(0) {
        ds.skip("output length 0");
        return Ok(());
    }
    let at_s = match (p.at_s, p.delay_s) {
        (Some(t), _) => Some(t),
        (None, Some(d)) => Some(st.last_at_s.unwrap_or(0.0) + d),
        (None, None) => None,
    };
    if let (Some(t), Some(before)) = (at_s, st.last_at_s) {
        if t < before {
            return Err(format!(
                "{shown}:{line}: the timestamp goes backwards ({:.3} s after {:.3} s); sort the trace by time",
                t, before
            ));
        }
    }
    if at_s.is_some() {
        st.last_at_s = at_s;
    }
    let line32 = u32::try_from(line).unwrap_or(u32::MAX);
    let msg_start = u32::try_from(ds.msgs.len()).map_err(|_| format!("{shown}: too many rows"))?;
    let msg_count = u16::try_from(p.messages.len())
        .map_err(|_| format!("{shown}:{line}: over 65535 messages in one row"))?;
    for (role, text) in &p.messages {
        let (start, len) = ds.push_text(text).map_err(|e| format!("{shown}: {e}"))?;
        ds.msgs.push(Msg {
            role: *role,
            start,
            len,
            tokens: 0,
        });
    }
    let hash_start =
        u32::try_from(ds.hash_ids.len()).map_err(|_| format!("{shown}: too many hash ids"))?;
    let hash_count = u16::try_from(p.hash_ids.len())
        .map_err(|_| format!("{shown}:{line}: over 65535 hash_ids in one row"))?;
    // Ids beyond 32 bits are folded: the same id still makes the same block.
    ds.hash_ids
        .extend(p.hash_ids.iter().map(|&h| (h ^ (h >> 32)) as u32));
    let session = match p.session {
        Some(s) => {
            let next = st.sessions.len() as u32;
            *st.sessions.entry(s).or_insert(next)
        }
        None => NONE,
    };
    let small = |v: Option<u64>, what: &str| -> Result<u32, String> {
        match v {
            None => Ok(NONE),
            Some(n) if n < u64::from(NONE) => Ok(n as u32),
            Some(n) => Err(format!("{shown}:{line}: {what} {n} is too large")),
        }
    };
    ds.rows.push(Row {
        line: line32,
        msg_start,
        msg_count,
        hash_count,
        hash_start,
        input_length: small(p.input_length, "input_length")?,
        output_length: small(p.output_length, "output_length")?,
        session,
        at_s: at_s.unwrap_or(f64::NAN),
    });
    Ok(())
}

/// The format of a file given as `auto`: `.csv` is BurstGPT, `.json` ShareGPT, and a JSONL
/// file's first row decides (`conversations`: ShareGPT; `hash_ids`, or `timestamp` with
/// `input_length`: Mooncake; else JSONL rows).
fn detect(path: &Path, reader: &mut Hashing<BufReader<File>>) -> Result<Format, String> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if ext == "csv" {
        return Ok(Format::Burstgpt);
    }
    if reader.starts_with_bracket()? || ext == "json" {
        return Ok(Format::Sharegpt);
    }
    let first = reader.peek_line()?;
    let v: Value = serde_json::from_str(first.trim()).map_err(|e| {
        format!(
            "{}:1: not a JSON row ({e}); pass --dataset-format (sharegpt, jsonl, mooncake or burstgpt)",
            path.display()
        )
    })?;
    Ok(if v.get("conversations").is_some() {
        Format::Sharegpt
    } else if v.get("hash_ids").is_some()
        || (v.get("timestamp").is_some() && v.get("input_length").is_some())
    {
        Format::Mooncake
    } else {
        Format::Jsonl
    })
}

/// A JSONL row, typed: the fields of every JSONL shape we read.
#[derive(Deserialize)]
struct JsonlRow {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    text_input: Option<String>,
    #[serde(default)]
    messages: Option<Vec<ChatMessage>>,
    #[serde(default)]
    conversations: Option<Vec<ShareTurn>>,
    #[serde(default)]
    input_length: Option<u64>,
    #[serde(default)]
    output_length: Option<u64>,
    /// Milliseconds from the trace's start.
    #[serde(default)]
    timestamp: Option<f64>,
    /// Milliseconds after the row before.
    #[serde(default)]
    delay: Option<f64>,
    #[serde(default)]
    hash_ids: Option<Vec<u64>>,
    #[serde(default)]
    session_id: Option<Value>,
    /// Tool definitions offered with the row (OpenAI's shape).
    #[serde(default)]
    tools: Option<Value>,
    /// BFCL's functions (bare definitions).
    #[serde(default)]
    function: Option<Value>,
    /// BFCL's turns: a list of turns, each a list of messages (or one list of messages).
    #[serde(default)]
    question: Option<Value>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    /// Absent or null for an assistant message that only calls tools.
    #[serde(default)]
    content: Option<Content>,
    /// An assistant message's tool calls: their JSON stands for its text (its length is the
    /// reply's).
    #[serde(default)]
    tool_calls: Option<Value>,
}

/// A message's content: a string, or OpenAI's list of parts (the text parts are kept).
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    fn text(self) -> String {
        match self {
            Content::Text(s) => s,
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A ShareGPT turn: `{"from","value"}` or `{"role","content"}`.
#[derive(Deserialize)]
struct ShareTurn {
    #[serde(default, alias = "role")]
    from: Option<String>,
    #[serde(default, alias = "content")]
    value: Option<Value>,
}

/// ShareGPT's row.
#[derive(Deserialize)]
struct ShareRow {
    conversations: Vec<ShareTurn>,
}

fn turns(turns: Vec<ShareTurn>, field: &str) -> Result<Vec<(Role, String)>, String> {
    let mut out = Vec::with_capacity(turns.len());
    for (i, t) in turns.into_iter().enumerate() {
        let who = t
            .from
            .ok_or_else(|| format!("field `{field}[{i}].from`: missing (human, gpt or system)"))?;
        let role = Role::parse(&who).ok_or_else(|| {
            format!("field `{field}[{i}].from`: `{who}` is not human, gpt or system")
        })?;
        let text = match t.value {
            Some(Value::String(s)) => s,
            Some(other) => Content::Parts(vec![other]).text(),
            None => return Err(format!("field `{field}[{i}].value`: missing")),
        };
        out.push((role, text));
    }
    Ok(out)
}

fn jsonl_row(line: &str) -> Result<Parsed, String> {
    // The common case without the path bookkeeping; a row that fails is parsed again to say
    // which field.
    let row: JsonlRow = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(_) => jsonl_row_error(line)?,
    };
    jsonl_parsed(row)
}

/// The error of a row that does not parse, naming its field.
fn jsonl_row_error(line: &str) -> Result<JsonlRow, String> {
    let de = &mut serde_json::Deserializer::from_str(line);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = crate::util::one_line(&e.inner().to_string());
        if path == "." || path.is_empty() {
            format!("not a JSON object ({inner})")
        } else {
            format!("field `{path}`: {inner}")
        }
    })
}

fn jsonl_parsed(row: JsonlRow) -> Result<Parsed, String> {
    let mut p = Parsed {
        input_length: row.input_length,
        output_length: row.output_length,
        at_s: row.timestamp.map(|ms| ms / 1e3),
        delay_s: row.delay.map(|ms| ms / 1e3),
        hash_ids: row.hash_ids.unwrap_or_default(),
        session: row.session_id.map(|v| match v {
            Value::String(s) => s,
            other => other.to_string(),
        }),
        ..Parsed::default()
    };
    for (name, t) in [("timestamp", p.at_s), ("delay", p.delay_s)] {
        if t.is_some_and(|t| !t.is_finite() || t < 0.0) {
            return Err(format!("field `{name}`: not a time ≥ 0 in milliseconds"));
        }
    }
    let tools = match (row.tools, row.function) {
        (Some(t), _) => Some(("tools", t)),
        (None, Some(f)) => Some(("function", f)),
        (None, None) => None,
    };
    if let Some((field, v)) = tools {
        let defs = crate::traffic::tools::tool_definitions(v)
            .map_err(|e| format!("field `{field}`: {e}"))?;
        p.messages
            .push((Role::Tools, Value::Array(defs).to_string()));
    }
    let messages = match (row.messages, row.question) {
        (Some(ms), _) => Some(("messages", ms)),
        (None, Some(q)) => Some(("question", bfcl_messages(q)?)),
        (None, None) => None,
    };
    if let Some(c) = row.conversations {
        p.messages.extend(turns(c, "conversations")?);
    } else if let Some((field, ms)) = messages {
        for (i, m) in ms.into_iter().enumerate() {
            let role = Role::parse(&m.role).ok_or_else(|| {
                format!(
                    "field `{field}[{i}].role`: `{}` is not system, user, assistant or tool",
                    m.role
                )
            })?;
            let text = match (m.content, m.tool_calls) {
                (Some(c), _) => c.text(),
                (None, Some(calls)) => calls.to_string(),
                (None, None) => String::new(),
            };
            p.messages.push((role, text));
        }
    } else if let Some(t) = row.text.or(row.prompt).or(row.text_input) {
        p.messages.push((Role::User, t));
    }
    if !p.hash_ids.is_empty() && p.input_length.is_none() {
        return Err("field `hash_ids`: needs `input_length` (the prompt's tokens)".into());
    }
    Ok(p)
}

/// BFCL's `question`: turns of messages (`[[{role, content}, …], …]`), flattened in order;
/// or one list of messages.
fn bfcl_messages(q: Value) -> Result<Vec<ChatMessage>, String> {
    let flat: Vec<Value> = match q {
        Value::Array(items) => items
            .into_iter()
            .flat_map(|t| match t {
                Value::Array(inner) => inner,
                other => vec![other],
            })
            .collect(),
        _ => return Err("field `question`: not a list of turns of messages".into()),
    };
    flat.into_iter()
        .enumerate()
        .map(|(i, m)| {
            serde_json::from_value(m).map_err(|e| {
                format!(
                    "field `question[{i}]`: {}",
                    crate::util::one_line(&e.to_string())
                )
            })
        })
        .collect()
}

/// Whether a JSON row matches every `key=value` of the filter (top-level fields).
fn matches_json(line: &str, filter: &[(String, String)]) -> Result<bool, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let Some(obj) = v.as_object() else {
        return Ok(false);
    };
    Ok(filter.iter().all(|(k, want)| {
        obj.iter().any(|(key, val)| {
            normalize_key(key) == *k
                && match val {
                    Value::String(s) => s == want,
                    other => want.parse::<Value>().ok().as_ref() == Some(other),
                }
        })
    }))
}

type Add<'a> =
    dyn FnMut(&mut Dataset, usize, Result<Option<Parsed>, String>) -> Result<(), String> + 'a;

fn read_jsonl(
    reader: &mut impl BufRead,
    ds: &mut Dataset,
    opts: &ReadOptions,
    format: Format,
    shown: &str,
    add: &mut Add,
) -> Result<(), String> {
    let mut line = String::new();
    let mut n = 0usize;
    loop {
        line.clear();
        let got = reader
            .read_line(&mut line)
            .map_err(|e| format!("{shown}: {}", crate::util::one_line(&e.to_string())))?;
        if got == 0 {
            break;
        }
        n += 1;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if !opts.filter.is_empty() {
            match matches_json(text, &opts.filter) {
                Ok(true) => {}
                Ok(false) => {
                    ds.skip("filtered out");
                    continue;
                }
                Err(e) => {
                    add(ds, n, Err(e))?;
                    continue;
                }
            }
        }
        let parsed = jsonl_row(text).and_then(|p| {
            if format == Format::Sharegpt && p.messages.is_empty() {
                return Err("field `conversations`: missing (a ShareGPT row)".into());
            }
            Ok(p)
        });
        add(ds, n, parsed.map(Some))?;
    }
    Ok(())
}

/// A ShareGPT JSON array, element by element (the whole file is never one value in memory).
fn read_array(
    reader: &mut impl Read,
    ds: &mut Dataset,
    opts: &ReadOptions,
    shown: &str,
    add: &mut Add,
) -> Result<(), String> {
    use serde::de::{Deserializer, SeqAccess, Visitor};
    struct Rows<'a, 'b> {
        ds: &'a mut Dataset,
        add: &'a mut Add<'b>,
        opts: &'a ReadOptions,
        failed: Option<String>,
    }
    impl<'de> Visitor<'de> for &mut Rows<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON array of ShareGPT rows")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut i = 0usize;
            while let Some(v) = seq.next_element::<Value>()? {
                i += 1;
                let parsed = if self.opts.filter.is_empty() {
                    share_value(v)
                } else {
                    let text = v.to_string();
                    match matches_json(&text, &self.opts.filter) {
                        Ok(true) => share_value(v),
                        Ok(false) => {
                            self.ds.skip("filtered out");
                            continue;
                        }
                        Err(e) => Err(e),
                    }
                };
                if let Err(e) = (self.add)(self.ds, i, parsed.map(Some)) {
                    // Stop reading: the row's own error (with its position) is the one to say.
                    self.failed = Some(e);
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    return Ok(());
                }
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut rows = Rows {
        ds,
        add,
        opts,
        failed: None,
    };
    let result = (&mut de).deserialize_seq(&mut rows);
    if let Some(e) = rows.failed.take() {
        return Err(e);
    }
    result.map_err(|e| format!("{shown}: not a JSON array of rows ({e})"))
}

fn share_value(v: Value) -> Result<Parsed, String> {
    let row: ShareRow = serde_json::from_value(v).map_err(|e| {
        let e = crate::util::one_line(&e.to_string());
        if e.contains("conversations") {
            format!("field `conversations`: {e}")
        } else {
            format!("not a ShareGPT row ({e})")
        }
    })?;
    Ok(Parsed {
        messages: turns(row.conversations, "conversations")?,
        ..Parsed::default()
    })
}

/// BurstGPT's CSV: `Timestamp` (s), `Model`, `Request tokens`, `Response tokens`, ...
fn read_csv(
    reader: &mut impl Read,
    ds: &mut Dataset,
    opts: &ReadOptions,
    shown: &str,
    add: &mut Add,
) -> Result<(), String> {
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(reader);
    let headers = csv
        .headers()
        .map_err(|e| format!("{shown}:1: not a CSV header ({e})"))?
        .clone();
    let keys: Vec<String> = headers.iter().map(normalize_key).collect();
    let col = |name: &str| keys.iter().position(|k| k == &normalize_key(name));
    let need = |name: &str| {
        col(name).ok_or_else(|| {
            format!(
                "{shown}: no `{name}` column (BurstGPT's CSV has Timestamp, Model, Request tokens, Response tokens; its header has {})",
                headers.iter().collect::<Vec<_>>().join(", ")
            )
        })
    };
    let (t_col, in_col, out_col) = (
        need("Timestamp")?,
        need("Request tokens")?,
        need("Response tokens")?,
    );
    let filter_cols: Vec<(usize, &str)> = opts
        .filter
        .iter()
        .map(|(k, v)| {
            keys.iter()
                .position(|c| c == k)
                .map(|i| (i, v.as_str()))
                .ok_or_else(|| {
                    format!(
                        "--dataset-filter: {shown} has no `{k}` column (its columns: {})",
                        headers.iter().collect::<Vec<_>>().join(", ")
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    let mut record = csv::StringRecord::new();
    let mut line = 1usize;
    loop {
        match csv.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                line += 1;
                add(ds, line, Err(format!("not a CSV row ({e})")))?;
                continue;
            }
        }
        line = record.position().map_or(line + 1, |p| p.line() as usize);
        if !filter_cols
            .iter()
            .all(|(i, want)| record.get(*i) == Some(*want))
        {
            ds.skip("filtered out");
            continue;
        }
        let field = |i: usize, name: &str| -> Result<f64, String> {
            let raw = record.get(i).unwrap_or("");
            raw.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("field `{name}`: `{raw}` is not a number ≥ 0"))
        };
        let parsed = (|| -> Result<Option<Parsed>, String> {
            let t = field(t_col, "Timestamp")?;
            let input = field(in_col, "Request tokens")?;
            let output = field(out_col, "Response tokens")?;
            Ok(Some(Parsed {
                at_s: Some(t),
                input_length: Some(input.round() as u64),
                output_length: Some(output.round() as u64),
                ..Parsed::default()
            }))
        })();
        if let Ok(Some(p)) = &parsed {
            if p.output_length == Some(0) {
                ds.skip("response tokens 0");
                continue;
            }
        }
        add(ds, line, parsed)?;
    }
    Ok(())
}

/// A reader that hashes what passes through it (the record's sha256 of the file) and can look
/// at the first line before the format is known.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: BufRead> Hashing<R> {
    fn new(inner: R) -> Self {
        Hashing {
            inner,
            hash: Sha256::new(),
        }
    }

    fn hex(&self) -> String {
        let digest = self.hash.clone().finalize();
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether the first non-blank byte is `[` (a JSON array), without consuming it.
    fn starts_with_bracket(&mut self) -> Result<bool, String> {
        loop {
            let buf = self
                .inner
                .fill_buf()
                .map_err(|e| crate::util::one_line(&e.to_string()))?;
            if buf.is_empty() {
                return Ok(false);
            }
            match buf.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => return Ok(buf[i] == b'['),
                None => {
                    let n = buf.len();
                    self.hash.update(&buf[..n]);
                    self.inner.consume(n);
                }
            }
        }
    }

    /// The first line, without consuming it (it must fit in the buffer: 1 MiB).
    fn peek_line(&mut self) -> Result<String, String> {
        let buf = self
            .inner
            .fill_buf()
            .map_err(|e| crate::util::one_line(&e.to_string()))?;
        let end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}

impl<R: BufRead> Read for Hashing<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(out)?;
        self.hash.update(&out[..n]);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Hashing<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let n = amt.min(buf.len());
            self.hash.update(&buf[..n]);
        }
        self.inner.consume(amt);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn read_str(name: &str, text: &str) -> Result<Dataset, String> {
        let (_d, p) = write(name, text);
        read(&p, &ReadOptions::default())
    }

    #[test]
    fn sharegpt_arrays_and_jsonl_read_the_same_turns() {
        let row = r#"{"id":"a","conversations":[{"from":"system","value":"Be brief."},{"from":"human","value":"Why is the sky blue?"},{"from":"gpt","value":"Rayleigh scattering."}]}"#;
        let array = read_str("s.json", &format!("[{row},\n{row}]")).unwrap();
        let lines = read_str("s.jsonl", &format!("{row}\n{row}\n")).unwrap();
        for ds in [&array, &lines] {
            assert_eq!(ds.info.format, "sharegpt");
            assert_eq!(ds.len(), 2);
            let msgs: Vec<(Role, &str, usize)> = ds.messages(&ds.rows()[0]).collect();
            assert_eq!(msgs[1], (Role::User, "Why is the sky blue?", 0));
            assert_eq!(msgs[2].0, Role::Assistant);
        }
        // The sha256 is the file's.
        let (_d, p) = write("s.jsonl", &format!("{row}\n{row}\n"));
        let want: String = Sha256::digest(std::fs::read(&p).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(read(&p, &ReadOptions::default()).unwrap().info.sha256, want);
        // role/content turns are ShareGPT too.
        let rc = r#"{"conversations":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#;
        assert_eq!(read_str("r.jsonl", rc).unwrap().len(), 1);
    }

    #[test]
    fn mooncake_rows_keep_times_lengths_and_blocks() {
        let text = "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 8, \"hash_ids\": [1, 2]}\n{\"timestamp\": 250, \"input_length\": 600, \"output_length\": 4, \"hash_ids\": [1, 3]}\n";
        let ds = read_str("t.jsonl", text).unwrap();
        assert_eq!(ds.info.format, "mooncake");
        assert!(ds.info.timed);
        let r = ds.rows()[1];
        assert_eq!((r.input_length(), r.output_length()), (Some(600), Some(4)));
        assert_eq!(r.at_s(), Some(0.25));
        assert_eq!(ds.hash_ids(&r), &[1, 3]);
        assert_eq!(r.line, 2);
        // Delays add up from the row before.
        let d = read_str(
            "d.jsonl",
            "{\"text\":\"a\",\"delay\":100}\n{\"text\":\"b\",\"delay\":50}\n",
        )
        .unwrap();
        assert!((d.rows()[1].at_s().unwrap() - 0.15).abs() < 1e-12);
        assert!(std::mem::size_of::<Row>() <= 48);
    }

    #[test]
    fn burstgpt_csv_reads_lengths_and_filters_by_model() {
        let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,0,1087,Conversation log\n118,GPT-4,417,276,693,Conversation log\n";
        let (_d, p) = write("b.csv", text);
        let opts = ReadOptions {
            filter: parse_filter("model=GPT-4").unwrap(),
            ..ReadOptions::default()
        };
        let ds = read(&p, &opts).unwrap();
        assert_eq!(ds.info.format, "burstgpt");
        assert_eq!(ds.len(), 1);
        assert_eq!(ds.rows()[0].input_length(), Some(417));
        assert_eq!(ds.rows()[0].at_s(), Some(118.0));
        assert_eq!(ds.info.skipped.get("filtered out"), Some(&1));
        assert_eq!(ds.info.skipped.get("response tokens 0"), Some(&1));
        let missing = write("m.csv", "Timestamp,Model\n1,x\n");
        let e = read(&missing.1, &ReadOptions::default()).unwrap_err();
        assert!(e.contains("no `Request tokens` column"), "{e}");
    }

    #[test]
    fn bad_rows_name_the_file_line_and_field_or_are_skipped() {
        let text = "{\"text\":\"ok\"}\n{\"input_length\":\"many\"}\n{\"text\":\"ok\"}\n";
        let (_d, p) = write("bad.jsonl", text);
        let e = read(&p, &ReadOptions::default()).unwrap_err();
        assert!(e.contains("bad.jsonl:2: field `input_length`"), "{e}");
        assert!(e.contains("--skip-bad-rows"), "{e}");
        let opts = ReadOptions {
            skip_bad_rows: true,
            ..ReadOptions::default()
        };
        let ds = read(&p, &opts).unwrap();
        assert_eq!((ds.len(), ds.info.skipped.get("malformed")), (2, Some(&1)));
        let back = read_str(
            "back.jsonl",
            "{\"text\":\"a\",\"timestamp\":500}\n{\"text\":\"b\",\"timestamp\":100}\n",
        )
        .unwrap_err();
        assert!(
            back.contains("back.jsonl:2: the timestamp goes backwards"),
            "{back}"
        );
        let empty = write("e.jsonl", "");
        assert!(read(&empty.1, &ReadOptions::default())
            .unwrap_err()
            .contains("empty"));
        let nothing = read_str("n.jsonl", "{\"other\":1}\n").unwrap_err();
        assert!(
            nothing.contains("no usable rows (1 no prompt)"),
            "{nothing}"
        );
        let hash = read_str("h.jsonl", "{\"hash_ids\":[1]}\n").unwrap_err();
        assert!(hash.contains("needs `input_length`"), "{hash}");
    }

    #[test]
    fn messages_and_sessions_are_conversations() {
        let text = "{\"session_id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"one\"}]}\n{\"session_id\":\"b\",\"text\":\"x\"}\n{\"session_id\":\"a\",\"text\":\"two\"}\n";
        let ds = read_str("c.jsonl", text).unwrap();
        assert_eq!(ds.sessions(), 2);
        let sessions: Vec<Option<u32>> = ds.rows().iter().map(Row::session).collect();
        assert_eq!(sessions, [Some(0), Some(1), Some(0)]);
    }
}
