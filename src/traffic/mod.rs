//! The traffic a run sends, whichever engine sends it: dataset rows and timestamped traces
//! (`dataset`), conversations turn by turn, and shared-prefix groups. A source decides what
//! each request asks for and when (`Planned`: its prompt, lengths, trace time and where it came
//! from); the engine decides how it is sent and timed. Prompts are described, not rendered: the
//! http engine writes them as text in the served model's one-token words (`words`), the candle
//! engine as token ids, and a made-up part with the same seed is the same tokens in every
//! request that has it (a Mooncake hash id's block, a group's prefix), so a prefix cache sees
//! exactly the sharing the traffic has.

pub mod dataset;
pub mod len;
pub mod plan;
pub mod shard;
pub mod tools;
pub mod words;

use std::time::Duration;

use dataset::{Dataset, Role};
pub use len::LenSpec;
pub use plan::{request_rng, request_seed, TrafficPlan};
pub use shard::Shard;

use crate::event::Origin;
use crate::util::SplitMix64;

/// Mooncake's block: 512 tokens per hash id (Alibaba's traces use 16).
pub const DEFAULT_BLOCK_SIZE: usize = 512;

/// The seed of a hash id's block: fixed (not the run's `--seed`), so the same id is the same
/// tokens on any machine and in any run.
pub fn block_seed(hash_id: u32) -> u64 {
    0xB10C_5EED_0000_0000 ^ u64::from(hash_id).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// One made-up part of a prompt: `tokens` tokens made from `seed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub tokens: usize,
    pub seed: u64,
}

/// How a request's prompt is made.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// Text as written.
    Text(String),
    /// Chat messages as written (system and user), sent as they are over `--api chat`.
    Messages(Vec<(Role, String)>),
    /// Made-up tokens, part by part.
    Made(Vec<Part>),
}

impl Prompt {
    /// The text a completions endpoint (or a tokenizer) gets for messages: their contents,
    /// one paragraph each.
    pub fn joined(messages: &[(Role, String)]) -> String {
        messages
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Renders the prompt as text: given text as written, made-up parts in `words` (exact
    /// with the served model's one-token words, about right without).
    pub fn text(&self, words: Option<&words::PromptWords>) -> String {
        match self {
            Prompt::Text(t) => t.clone(),
            Prompt::Messages(m) => Prompt::joined(m),
            Prompt::Made(parts) => {
                let (joiner, made): (&str, Vec<String>) = match words {
                    Some(w) => (
                        w.joiner(),
                        parts.iter().map(|p| w.prompt(p.tokens, p.seed)).collect(),
                    ),
                    None => (
                        " ",
                        parts
                            .iter()
                            .map(|p| words::approximate_prompt(p.tokens, p.seed))
                            .collect(),
                    ),
                };
                made.into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(joiner)
            }
        }
    }

    /// Renders the prompt as token ids: given text with `tokenizer`, made-up parts as ids in
    /// `[3, vocab)` (ids 0..3 are special in our tokenizers).
    pub fn ids(
        &self,
        tokenizer: Option<&tokenizers::Tokenizer>,
        vocab: usize,
    ) -> Result<Vec<u32>, String> {
        let encode = |text: &str| -> Result<Vec<u32>, String> {
            let tk = tokenizer.ok_or("a text prompt needs the model's tokenizer")?;
            tk.encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| format!("cannot tokenize a dataset prompt ({e})"))
        };
        match self {
            Prompt::Text(t) => encode(t),
            Prompt::Messages(m) => encode(&Prompt::joined(m)),
            Prompt::Made(parts) => {
                let hi = vocab.max(4) as u64 - 1;
                let lo = 3.min(hi);
                let mut ids = Vec::with_capacity(parts.iter().map(|p| p.tokens).sum());
                for p in parts {
                    let mut rng = SplitMix64::new(p.seed);
                    ids.extend((0..p.tokens).map(|_| rng.next_in(lo, hi) as u32));
                }
                Ok(ids)
            }
        }
    }
}

/// One request as its source decides it.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub prompt: Prompt,
    /// The prompt's tokens as far as known: exact for made-up prompts the engine makes exact
    /// and for texts counted with a tokenizer, else an estimate.
    pub prompt_tokens: usize,
    /// `None`: the run's `--output-tokens`.
    pub output_tokens: Option<usize>,
    /// When to send it, in seconds from the trace's start (`--replay`).
    pub at_s: Option<f64>,
    pub origin: Origin,
}

/// `--dataset-order`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// The file's order.
    #[default]
    Sequential,
    /// Shuffled with `--seed`.
    Shuffle,
}

/// A dataset's rows as a run sends them: which rows, in which order, how their blocks are made.
#[derive(Clone, Debug)]
pub struct DatasetPlan {
    pub ds: Dataset,
    /// Rows in the order they are sent (indices into `ds`).
    order: Vec<u32>,
    pub block_size: usize,
    /// Token counts are exact (a tokenizer counted them) rather than estimated.
    pub counted: bool,
}

impl DatasetPlan {
    /// Every row, in `order`, at most `limit` of them (`--requests N` takes the first N).
    pub fn new(
        ds: Dataset,
        order: Order,
        seed: u64,
        limit: Option<u64>,
        block_size: usize,
    ) -> Self {
        let mut rows: Vec<u32> = (0..ds.len() as u32).collect();
        if order == Order::Shuffle {
            let mut rng = SplitMix64::new(seed ^ 0x05EE_D5A1_F00D);
            for i in (1..rows.len()).rev() {
                let j = rng.below(i + 1);
                rows.swap(i, j);
            }
        }
        if let Some(n) = limit {
            rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
        }
        DatasetPlan {
            ds,
            order: rows,
            block_size: block_size.max(1),
            counted: false,
        }
    }

    /// Counts every message's tokens with `count`; `exact` when it is a tokenizer. `Err`: a
    /// signal stopped it.
    pub fn count_tokens(
        &mut self,
        count: impl Fn(&str) -> usize,
        exact: bool,
    ) -> Result<(), String> {
        self.ds.count_tokens(count)?;
        self.counted = exact;
        Ok(())
    }

    /// Rows to send.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The row of request `index` (rows are cycled when a run asks for more than there are).
    fn row_of(&self, index: u64) -> Option<&dataset::Row> {
        let n = self.order.len().max(1) as u64;
        let i = *self.order.get((index % n) as usize)?;
        self.ds.row(i as usize)
    }

    /// The messages a single-turn request sends: system messages and the first user message
    /// (a ShareGPT row's first human turn), and the following assistant message's tokens (the
    /// output length the dataset implies).
    fn first_turn(&self, row: &dataset::Row) -> (Vec<(Role, String)>, usize, Option<usize>) {
        let mut messages = Vec::new();
        let mut tokens = 0;
        let mut output = None;
        let mut seen_user = false;
        for (role, text, n) in self.ds.messages(row) {
            match role {
                Role::System | Role::Tools if !seen_user => {
                    messages.push((role, text.to_string()));
                    tokens += n;
                }
                Role::User if !seen_user => {
                    messages.push((role, text.to_string()));
                    tokens += n;
                    seen_user = true;
                }
                Role::Assistant if seen_user => {
                    output = Some(n.max(1));
                    break;
                }
                _ => {}
            }
        }
        (messages, tokens, output)
    }

    /// A row's prompt and its tokens.
    fn prompt_of(&self, row: &dataset::Row) -> (Prompt, usize, Option<usize>) {
        if let Some(n) = row.input_length() {
            let ids = self.ds.hash_ids(row);
            let parts = if ids.is_empty() {
                // No blocks: tokens of the row's own, shared with no other row.
                vec![Part {
                    tokens: n,
                    seed: 0x0A11_0000_0000 ^ u64::from(row.line),
                }]
            } else {
                // Block i is `block_size` tokens of its id, the last one what is left.
                let mut left = n;
                let mut parts = Vec::with_capacity(ids.len());
                for (i, &h) in ids.iter().enumerate() {
                    let tokens = if i + 1 == ids.len() {
                        left
                    } else {
                        self.block_size.min(left)
                    };
                    left -= tokens;
                    if tokens > 0 {
                        parts.push(Part {
                            tokens,
                            seed: block_seed(h),
                        });
                    }
                }
                parts
            };
            return (Prompt::Made(parts), n, None);
        }
        let (messages, tokens, output) = self.first_turn(row);
        let prompt = match messages.as_slice() {
            [(Role::User, text)] => Prompt::Text(text.clone()),
            _ => Prompt::Messages(messages),
        };
        (prompt, tokens, output)
    }

    /// The prompt and output tokens request `index` asks for (before the run's default).
    fn lengths(&self, row: &dataset::Row) -> (usize, Option<usize>) {
        let (_, p, implied) = self.prompt_of(row);
        (p, row.output_length().or(implied))
    }

    /// Request `index`.
    pub fn request(&self, index: u64) -> Option<Planned> {
        let row = self.row_of(index)?;
        let (prompt, prompt_tokens, implied) = self.prompt_of(row);
        let at_s = self.at_s(index);
        Some(Planned {
            prompt,
            prompt_tokens,
            output_tokens: row.output_length().or(implied),
            at_s,
            origin: Origin {
                row: Some(row.line),
                at_s,
                ..Origin::default()
            },
        })
    }

    /// The trace time of request `index` (`--replay`), from the trace's first row sent.
    pub fn at_s(&self, index: u64) -> Option<f64> {
        let first = self.row_of(0)?.at_s()?;
        if index >= self.order.len() as u64 {
            return None;
        }
        Some(self.row_of(index)?.at_s()? - first)
    }

    /// The trace's span from the first row sent to the last (seconds), when timed.
    pub fn span_s(&self) -> Option<f64> {
        let last = self.order.len().checked_sub(1)? as u64;
        self.at_s(last)
    }

    /// Leaves out rows whose prompt + output would exceed `max_tokens` positions (`output`:
    /// the run's default output length for rows that do not say), counting them in the
    /// dataset's `skipped`; returns how many.
    pub fn restrict(&mut self, max_tokens: usize, output: usize) -> u64 {
        let before = self.order.len();
        let ds = &self.ds;
        let fits = |i: &u32| match ds.row(*i as usize) {
            Some(r) => {
                let (p, o) = self.lengths(r);
                p + o.unwrap_or(output) <= max_tokens
            }
            None => false,
        };
        let kept: Vec<u32> = self.order.iter().copied().filter(fits).collect();
        let dropped = (before - kept.len()) as u64;
        self.order = kept;
        if dropped > 0 {
            *self
                .ds
                .info
                .skipped
                .entry(format!("longer than {max_tokens} positions"))
                .or_insert(0) += dropped;
        }
        dropped
    }

    /// The rows sent as conversations (`--turns`): each a list of turns. Rows that share a
    /// `session_id` are one conversation (each row a turn: its last user message); otherwise a
    /// row's user messages are its turns, each answered by the assistant message after it.
    pub fn conversations(&self) -> Vec<Conversation> {
        let mut out: Vec<Conversation> = Vec::new();
        if self.ds.sessions() > 0 {
            let mut by_session: Vec<Option<usize>> = vec![None; self.ds.sessions()];
            for &i in &self.order {
                let Some(row) = self.ds.row(i as usize) else {
                    continue;
                };
                let (prompt, tokens, implied) = self.prompt_of(row);
                let tools = row_tools_text(&prompt);
                let user = match prompt {
                    Prompt::Messages(m) => m
                        .iter()
                        .rev()
                        .find(|(r, _)| *r == Role::User)
                        .map(|(_, t)| Prompt::Text(t.clone()))
                        .unwrap_or(Prompt::Messages(m)),
                    other => other,
                };
                let turn = Turn {
                    user,
                    tokens,
                    output_tokens: row.output_length().or(implied),
                    row: row.line,
                    delay_s: None,
                    tool_result: self
                        .ds
                        .messages(row)
                        .find(|(r, _, _)| *r == Role::Tool)
                        .map(|(_, t, _)| t.to_string()),
                };
                match row.session().and_then(|s| by_session.get_mut(s as usize)) {
                    Some(slot) => match slot {
                        Some(c) => {
                            let conv = &mut out[*c];
                            conv.turns.push(turn);
                            if conv.tools.is_none() {
                                conv.tools = tools;
                            }
                        }
                        None => {
                            *slot = Some(out.len());
                            out.push(Conversation {
                                system: None,
                                tools,
                                turns: vec![turn],
                            });
                        }
                    },
                    None => out.push(Conversation {
                        system: None,
                        tools,
                        turns: vec![turn],
                    }),
                }
            }
            return out;
        }
        for &i in &self.order {
            let Some(row) = self.ds.row(i as usize) else {
                continue;
            };
            let mut conv = Conversation {
                system: None,
                tools: None,
                turns: Vec::new(),
            };
            if row.input_length().is_some() {
                let (prompt, tokens, _) = self.prompt_of(row);
                conv.turns.push(Turn {
                    user: prompt,
                    tokens,
                    output_tokens: row.output_length(),
                    row: row.line,
                    delay_s: None,
                    tool_result: None,
                });
            } else {
                for (role, text, n) in self.ds.messages(row) {
                    match role {
                        Role::System if conv.turns.is_empty() => {
                            conv.system = Some(text.to_string())
                        }
                        Role::Tools => conv.tools = Some(text.to_string()),
                        Role::User => conv.turns.push(Turn {
                            user: Prompt::Text(text.to_string()),
                            tokens: n,
                            output_tokens: None,
                            row: row.line,
                            delay_s: None,
                            tool_result: None,
                        }),
                        Role::Assistant => {
                            if let Some(t) = conv.turns.last_mut() {
                                t.output_tokens.get_or_insert(n.max(1));
                            }
                        }
                        // The result the turn's tool call gets (the row's, as written).
                        Role::Tool => {
                            if let Some(t) = conv.turns.last_mut() {
                                t.tool_result.get_or_insert_with(|| text.to_string());
                            }
                        }
                        Role::System => {}
                    }
                }
            }
            if !conv.turns.is_empty() {
                out.push(conv);
            }
        }
        out
    }
}

/// A prompt's tool definitions (a dataset row's `tools`), as JSON text.
fn row_tools_text(prompt: &Prompt) -> Option<String> {
    match prompt {
        Prompt::Messages(m) => m
            .iter()
            .find(|(r, _)| *r == Role::Tools)
            .map(|(_, t)| t.clone()),
        _ => None,
    }
}

/// One conversation to replay turn by turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    /// A system message sent first in every turn.
    pub system: Option<String>,
    /// The tools offered in every turn (the row's, as OpenAI JSON text).
    pub tools: Option<String>,
    pub turns: Vec<Turn>,
}

/// One turn: what the user says, and how long the reply should be.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub user: Prompt,
    /// The user message's tokens (as counted or estimated).
    pub tokens: usize,
    pub output_tokens: Option<usize>,
    /// The dataset line it came from (0 for synthetic turns).
    pub row: u32,
    pub delay_s: Option<f64>,
    /// What the tool returns when the turn's reply calls one (the row's `tool` message);
    /// `None`: a made-up result.
    pub tool_result: Option<String>,
}

/// `--turns all|N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turns {
    All,
    First(usize),
}

impl Turns {
    pub fn parse(s: &str) -> Result<Turns, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("all") {
            return Ok(Turns::All);
        }
        match t.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(Turns::First(n as usize)),
            _ => Err(format!(
                "`{s}` is not a number of turns (use all, or 1 or more)"
            )),
        }
    }

    /// How many of `available` turns are sent.
    pub fn take(self, available: usize) -> usize {
        match self {
            Turns::All => available,
            Turns::First(n) => n.min(available),
        }
    }
}

/// Synthetic conversations (`--conversations N --turns K`): turns of `-p` tokens, replies of
/// `-n`.
pub fn synthetic_conversations(
    count: usize,
    turns: usize,
    prompt: &LenSpec,
    seed: u64,
) -> Vec<Conversation> {
    (0..count)
        .map(|c| Conversation {
            system: None,
            tools: None,
            turns: (0..turns)
                .map(|t| {
                    let index = (c * turns + t) as u64;
                    let mut rng = request_rng(seed, index);
                    let tokens = prompt.pick(index, &mut rng);
                    Turn {
                        user: Prompt::Made(vec![Part {
                            tokens,
                            seed: rng.next_u64(),
                        }]),
                        tokens,
                        output_tokens: None,
                        row: 0,
                        delay_s: None,
                        tool_result: None,
                    }
                })
                .collect(),
        })
        .collect()
}

/// `--think-time`: the pause between a reply's end and the next turn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThinkTime {
    Fixed(Duration),
    /// Exponential with this mean.
    Exp(Duration),
    /// Uniform in [lo, hi].
    Uniform(Duration, Duration),
}

impl ThinkTime {
    /// `2s`, `exp:2s`, `uniform:1s..3s`.
    pub fn parse(s: &str) -> Result<ThinkTime, String> {
        let t = s.trim();
        let dur = |d: &str| crate::stats::parse_duration_s(d.trim()).map(Duration::from_secs_f64);
        if let Some(mean) = t.strip_prefix("exp:") {
            return Ok(ThinkTime::Exp(dur(mean)?));
        }
        if let Some(range) = t.strip_prefix("uniform:") {
            let (a, b) = range
                .split_once("..")
                .ok_or_else(|| format!("`{s}`: write uniform:LO..HI, e.g. uniform:1s..3s"))?;
            let (a, b) = (dur(a)?, dur(b)?);
            if a > b {
                return Err(format!("`{s}`: the range is inverted"));
            }
            return Ok(ThinkTime::Uniform(a, b));
        }
        dur(t)
            .map(ThinkTime::Fixed)
            .map_err(|e| format!("{e} (or a distribution: exp:2s, uniform:1s..3s)"))
    }

    /// As the flag takes it: `2s`, `exp:2s`, `uniform:1s..3s`.
    pub fn describe(&self) -> String {
        let d = |d: &Duration| format!("{}s", d.as_secs_f64());
        match self {
            ThinkTime::Fixed(x) => d(x),
            ThinkTime::Exp(m) => format!("exp:{}", d(m)),
            ThinkTime::Uniform(a, b) => format!("uniform:{}..{}", d(a), d(b)),
        }
    }

    /// The pause before turn `turn` of conversation `conversation`; deterministic for a seed.
    pub fn sample(&self, seed: u64, conversation: u64, turn: u32) -> Duration {
        let mut rng = SplitMix64::new(
            seed ^ 0x07E1_4E00 ^ conversation.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(turn),
        );
        match *self {
            ThinkTime::Fixed(d) => d,
            ThinkTime::Exp(mean) => {
                let u = rng.next_f64().max(1e-12);
                mean.mul_f64(-u.ln())
            }
            ThinkTime::Uniform(a, b) => a + (b - a).mul_f64(rng.next_f64()),
        }
    }
}

/// `--shared-prefix groups=G,prefix=P,question=Q[,distribution=zipf]`: requests in G groups,
/// each group's prompts the same P-token prefix followed by a Q-token question of their own.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedPrefix {
    pub groups: usize,
    pub prefix: usize,
    pub question: usize,
    /// Zipf's exponent when groups are drawn by popularity (`distribution=zipf`, s = 1, or
    /// `zipf:1.2`); uniform otherwise.
    pub zipf: Option<f64>,
}

impl SharedPrefix {
    pub fn parse(s: &str) -> Result<SharedPrefix, String> {
        let mut groups = None;
        let mut prefix = None;
        let mut question = None;
        let mut zipf = None;
        for part in s.split(',') {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                format!("`{part}` is not key=value (write groups=G,prefix=P,question=Q)")
            })?;
            let count = |v: &str| -> Result<usize, String> {
                match v.trim().parse::<i64>() {
                    Ok(n) if n >= 1 => Ok(n as usize),
                    _ => Err(format!(
                        "{}={v}: not a positive number (a zero or less cannot make a prompt)",
                        k.trim()
                    )),
                }
            };
            match k.trim() {
                "groups" => groups = Some(count(v)?),
                "prefix" => prefix = Some(count(v)?),
                "question" => question = Some(count(v)?),
                "distribution" => match v.trim() {
                    "uniform" => zipf = None,
                    "zipf" => zipf = Some(1.0),
                    z => match z.strip_prefix("zipf:").and_then(|e| e.parse::<f64>().ok()) {
                        Some(e) if e.is_finite() && e > 0.0 => zipf = Some(e),
                        _ => {
                            return Err(format!(
                                "distribution={z}: use uniform, zipf or zipf:S (S > 0)"
                            ))
                        }
                    },
                },
                other => {
                    return Err(format!(
                        "unknown key `{other}` (use groups, prefix, question, distribution)"
                    ))
                }
            }
        }
        let need = |v: Option<usize>, k: &str| {
            v.ok_or_else(|| format!("{k}= is missing (write groups=G,prefix=P,question=Q)"))
        };
        Ok(SharedPrefix {
            groups: need(groups, "groups")?,
            prefix: need(prefix, "prefix")?,
            question: need(question, "question")?,
            zipf,
        })
    }

    /// The group request `index` is in: uniform, or by Zipf's law over the groups' ranks.
    pub fn group(&self, seed: u64, index: u64) -> usize {
        let mut rng =
            SplitMix64::new(seed ^ 0x0006_E00F ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        match self.zipf {
            None => rng.below(self.groups),
            Some(s) => {
                // The inverse of the Zipf CDF over 1..=groups, by a walk: groups are few.
                let weights: f64 = (1..=self.groups).map(|k| (k as f64).powf(-s)).sum();
                let mut u = rng.next_f64() * weights;
                for k in 1..=self.groups {
                    u -= (k as f64).powf(-s);
                    if u <= 0.0 {
                        return k - 1;
                    }
                }
                self.groups - 1
            }
        }
    }

    /// Request `index`: its group's prefix, then a question of its own.
    pub fn request(&self, seed: u64, index: u64) -> Planned {
        let g = self.group(seed, index);
        let prefix = Part {
            tokens: self.prefix,
            seed: seed ^ 0x05AE_D0F0 ^ (g as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        let question = Part {
            tokens: self.question,
            seed: request_seed(seed ^ 0x0E57_1011, index),
        };
        Planned {
            prompt: Prompt::Made(vec![prefix, question]),
            prompt_tokens: self.prefix + self.question,
            output_tokens: None,
            at_s: None,
            origin: Origin {
                group: Some(g as u32),
                ..Origin::default()
            },
        }
    }
}

/// Where a run's requests come from, beyond made-up lengths.
#[derive(Clone, Debug)]
pub enum RequestSource {
    Dataset(Box<DatasetPlan>),
    SharedPrefix(SharedPrefix),
}

impl RequestSource {
    /// Request `index`; `None` when a dataset has no rows left to send.
    pub fn request(&self, seed: u64, index: u64) -> Option<Planned> {
        match self {
            RequestSource::Dataset(d) => d.request(index),
            RequestSource::SharedPrefix(s) => Some(s.request(seed, index)),
        }
    }

    /// Requests it holds (a dataset's rows), if bounded.
    pub fn rows(&self) -> Option<usize> {
        match self {
            RequestSource::Dataset(d) => Some(d.len()),
            RequestSource::SharedPrefix(_) => None,
        }
    }

    /// The dataset, when it is one.
    pub fn dataset(&self) -> Option<&DatasetPlan> {
        match self {
            RequestSource::Dataset(d) => Some(d),
            RequestSource::SharedPrefix(_) => None,
        }
    }

    /// The longest prompt + output (with `output` for rows that do not say), for checks.
    pub fn max_positions(&self, output: usize) -> usize {
        match self {
            RequestSource::Dataset(d) => d
                .order
                .iter()
                .filter_map(|&i| d.ds.row(i as usize))
                .map(|r| {
                    let (p, o) = d.lengths(r);
                    p + o.unwrap_or(output)
                })
                .max()
                .unwrap_or(0),
            RequestSource::SharedPrefix(s) => s.prefix + s.question + output,
        }
    }
}

impl RequestSource {
    /// The prompt part of the workload's description: `dataset t.jsonl (1200 rows)`.
    pub fn describe(&self) -> String {
        match self {
            RequestSource::Dataset(d) => format!("dataset {} ({} rows)", d.ds.info.file, d.len()),
            RequestSource::SharedPrefix(s) => format!(
                "{} groups: prefix {} + question {}",
                s.groups, s.prefix, s.question
            ),
        }
    }

    /// What the record keeps of it.
    pub fn info(&self) -> crate::event::TrafficInfo {
        match self {
            RequestSource::Dataset(d) => crate::event::TrafficInfo {
                dataset: Some(d.ds.info.clone()),
                requests: Some(d.len() as u64),
                trace_span_s: d.span_s(),
                block_size: d
                    .ds
                    .rows()
                    .iter()
                    .any(|r| !d.ds.hash_ids(r).is_empty())
                    .then_some(d.block_size),
                exact_lengths: d.counted,
                ..Default::default()
            },
            RequestSource::SharedPrefix(s) => crate::event::TrafficInfo {
                shared_prefix: Some(s.spec()),
                ..Default::default()
            },
        }
    }
}

impl SharedPrefix {
    /// `groups=G,prefix=P,question=Q[,distribution=zipf:S]`, as parsed.
    pub fn spec(&self) -> String {
        let mut s = format!(
            "groups={},prefix={},question={}",
            self.groups, self.prefix, self.question
        );
        if let Some(z) = self.zipf {
            s.push_str(&format!(",distribution=zipf:{z}"));
        }
        s
    }
}

/// Conversations a run replays turn by turn (`--turns`), and the pause between turns.
#[derive(Clone, Debug)]
pub struct Conversations {
    pub list: Vec<Conversation>,
    pub turns: Turns,
    pub think: Option<ThinkTime>,
    /// The dataset they came from (none: synthetic, `--conversations N`).
    pub dataset: Option<crate::event::DatasetInfo>,
    pub exact_lengths: bool,
}

impl Conversations {
    pub fn describe(&self) -> String {
        let turns = match self.turns {
            Turns::All => "all turns".to_string(),
            Turns::First(n) => format!("{n} turns"),
        };
        match &self.dataset {
            Some(d) => format!("{} conversations of {} ({turns})", self.list.len(), d.file),
            None => format!("{} conversations ({turns})", self.list.len()),
        }
    }

    pub fn info(&self) -> crate::event::TrafficInfo {
        crate::event::TrafficInfo {
            dataset: self.dataset.clone(),
            conversations: Some(self.list.len() as u64),
            turns: Some(match self.turns {
                Turns::All => "all".into(),
                Turns::First(n) => n.to_string(),
            }),
            exact_lengths: self.exact_lengths,
            ..Default::default()
        }
    }

    /// Requests the conversations make in all (each sends the turns `turns` allows).
    pub fn requests(&self) -> u64 {
        self.list
            .iter()
            .map(|c| self.turns.take(c.turns.len()) as u64)
            .sum()
    }

    /// Each conversation's first request number when the turns are numbered in the list's
    /// order (conversation after conversation): what a shard of the run numbers them by.
    pub fn first_requests(&self) -> Vec<u64> {
        let mut next = 0u64;
        self.list
            .iter()
            .map(|c| {
                let first = next;
                next += self.turns.take(c.turns.len()) as u64;
                first
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dataset::ReadOptions;

    /// A shard numbers conversation c's turns from its place in the list: the turns each
    /// sends (`--turns 2` of 3) count, and the numbers cover the run's requests once.
    #[test]
    fn conversations_are_numbered_in_the_lists_order() {
        let mut list = synthetic_conversations(3, 3, &LenSpec::Fixed(4), 0);
        list[1].turns.truncate(1);
        let convs = Conversations {
            list,
            turns: Turns::First(2),
            think: None,
            dataset: None,
            exact_lengths: false,
        };
        assert_eq!(convs.first_requests(), vec![0, 2, 3]);
        assert_eq!(convs.requests(), 5);
    }

    fn dataset(text: &str) -> Dataset {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, text).unwrap();
        dataset::read(&p, &ReadOptions::default()).unwrap()
    }

    #[test]
    fn hash_ids_become_the_same_blocks_in_every_row_that_has_them() {
        let ds = dataset(
            "{\"timestamp\":0,\"input_length\":40,\"output_length\":3,\"hash_ids\":[7,8,9]}\n{\"timestamp\":10,\"input_length\":20,\"output_length\":2,\"hash_ids\":[7,5]}\n",
        );
        let plan = DatasetPlan::new(ds, Order::Sequential, 0, None, 16);
        let a = plan.request(0).unwrap();
        let b = plan.request(1).unwrap();
        let (Prompt::Made(pa), Prompt::Made(pb)) = (&a.prompt, &b.prompt) else {
            panic!("{a:?}")
        };
        // 40 tokens in blocks of 16: 16 + 16 + 8; 20: 16 + 4.
        assert_eq!(pa.iter().map(|p| p.tokens).collect::<Vec<_>>(), [16, 16, 8]);
        assert_eq!(pb.iter().map(|p| p.tokens).collect::<Vec<_>>(), [16, 4]);
        assert_eq!(pa[0], pb[0]);
        assert_ne!(pa[1].seed, pb[1].seed);
        // The same leading ids on the candle side too.
        let ia = a.prompt.ids(None, 1000).unwrap();
        let ib = b.prompt.ids(None, 1000).unwrap();
        assert_eq!((ia.len(), ib.len()), (40, 20));
        assert_eq!(ia[..16], ib[..16]);
        assert_ne!(ia[16..20], ib[16..20]);
        assert_eq!((a.output_tokens, b.at_s), (Some(3), Some(0.01)));
        assert_eq!(plan.at_s(1), Some(0.01));
    }

    #[test]
    fn sharegpt_rows_send_the_first_human_turn_and_imply_the_output() {
        let mut plan = DatasetPlan::new(
            dataset("{\"conversations\":[{\"from\":\"human\",\"value\":\"a b c d\"},{\"from\":\"gpt\",\"value\":\"e f\"},{\"from\":\"human\",\"value\":\"g\"},{\"from\":\"gpt\",\"value\":\"h i j\"}]}\n"),
            Order::Sequential,
            0,
            None,
            16,
        );
        plan.count_tokens(|t| t.split_whitespace().count(), true)
            .unwrap();
        let r = plan.request(0).unwrap();
        assert_eq!(r.prompt, Prompt::Text("a b c d".into()));
        assert_eq!((r.prompt_tokens, r.output_tokens), (4, Some(2)));
        let convs = plan.conversations();
        assert_eq!(convs.len(), 1);
        let outs: Vec<Option<usize>> = convs[0].turns.iter().map(|t| t.output_tokens).collect();
        assert_eq!(outs, [Some(2), Some(3)]);
        // Too long for 5 positions with 2 out: skipped and counted.
        assert_eq!(plan.restrict(5, 32), 1);
        assert!(plan.is_empty());
        assert_eq!(
            plan.ds.info.skipped.get("longer than 5 positions"),
            Some(&1)
        );
    }

    #[test]
    fn shared_prefixes_share_their_group_and_zipf_favours_the_first() {
        let sp = SharedPrefix::parse("groups=4,prefix=32,question=8,distribution=zipf").unwrap();
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[sp.group(1, i)] += 1;
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[3], "{counts:?}");
        let a = sp.request(1, 0);
        let same = (1..100)
            .map(|i| sp.request(1, i))
            .find(|r| r.origin.group == a.origin.group)
            .unwrap();
        let (Prompt::Made(pa), Prompt::Made(ps)) = (&a.prompt, &same.prompt) else {
            panic!()
        };
        assert_eq!(pa[0], ps[0]);
        assert_ne!(pa[1], ps[1]);
        for bad in [
            "groups=0,prefix=1,question=1",
            "groups=2,prefix=1",
            "groups=2,prefix=1,question=1,x=2",
        ] {
            assert!(SharedPrefix::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn think_times_parse_and_sample_deterministically() {
        assert_eq!(
            ThinkTime::parse("1.5s").unwrap(),
            ThinkTime::Fixed(Duration::from_millis(1500))
        );
        let e = ThinkTime::parse("exp:2s").unwrap();
        let mean: f64 = (0..20_000)
            .map(|i| e.sample(3, i, 1).as_secs_f64())
            .sum::<f64>()
            / 20_000.0;
        assert!((mean - 2.0).abs() < 0.1, "{mean}");
        assert_eq!(e.sample(3, 5, 2), e.sample(3, 5, 2));
        assert!(ThinkTime::parse("uniform:3s..1s").is_err());
        assert_eq!(Turns::parse("all").unwrap(), Turns::All);
        assert!(Turns::parse("0").is_err());
    }
}
