//! Every kind of bad input, as one table: what the user did, the exact one-line message, and the
//! exit code (2). Each row runs the real binary in a directory of fixtures (made here, or copied
//! from `tests/fixtures/bad`), so the paths in the messages are the relative ones a user typed.
//!
//! The same table is `docs/errors.md`; `errors_doc_matches_the_table` keeps the two equal
//! (`INFERTOP_BLESS=1 cargo test --test bad_input` rewrites the doc from the table).
//!
//! Rows about a server (an API it lacks) run against an in-process one on 127.0.0.1 that lists
//! a model and answers no API route (404): `$SERVER` in a row's command and message stands
//! for its URL.
#![allow(clippy::unwrap_used)]

#[path = "common/shapes_server.rs"]
#[allow(dead_code)]
mod shapes_server;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use assert_cmd::prelude::*;
use candle_core::{DType, Device, Tensor};

/// One bad input.
struct Case {
    /// What the user did, in words (the doc's first column).
    input: &'static str,
    /// The command line after `infertop`, run in the fixtures directory.
    args: &'static [&'static str],
    /// The whole of stderr, without `infertop: error: ` and the newline. `…` at the end means
    /// "starts with" (for messages that list every field of a file).
    message: &'static str,
    code: i32,
}

const H: &str = "--headless";

/// A server that lists a model and answers no API route (its URL, in a row).
const SERVER: &str = "$SERVER";

/// The table. Flags first, then files, then run-time checks made before anything starts.
const CASES: &[Case] = &[
    // ---- flags
    Case {
        input: "unknown theme name",
        args: &[H, "--theme", "no-such-theme"],
        message: "--theme: unknown theme `no-such-theme`: not a built-in theme (default, light, high-contrast, mono) nor an existing file",
        code: 2,
    },
    Case {
        input: "unknown colour mode",
        args: &[H, "--color", "sometimes"],
        message: "--color: unknown value `sometimes` (use auto, always or never)",
        code: 2,
    },
    Case {
        input: "contradictory options",
        args: &[H, "--prompt", "hi", "--prompt-file", "prompts.txt"],
        message: "the argument '--prompt <PROMPT>' cannot be used with '--prompt-file <PROMPT_FILE>' (see infertop --help)",
        code: 2,
    },
    Case {
        input: "`--burstiness` not positive",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--rate", "2", "--burstiness", "0"],
        message: "--burstiness: `0` is not a burstiness (use a number > 0: 1 is Poisson, 0.5 burstier, 4 more regular)",
        code: 2,
    },
    Case {
        input: "`--extra-body` that is not JSON",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--extra-body", "{temperature: 1}"],
        message: "--extra-body: not valid JSON (key must be a string at line 1 column 2); give an object of fields to add, e.g. '{\"temperature\": 0.7}'",
        code: 2,
    },
    Case {
        input: "`--cancel` with a share outside (0, 1]",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--cancel", "share=2"],
        message: "--cancel: share 2 is outside (0, 1] (e.g. 0.1 cancels one request in ten)",
        code: 2,
    },
    Case {
        input: "`--cancel` at a time that is not one",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--cancel", "share=0.1,after=later"],
        message: "--cancel: after `later` is neither ttft nor a duration above zero (e.g. 500ms, 2s)",
        code: 2,
    },
    Case {
        input: "`--cancel` of conversations",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--turns", "2", "--conversations", "2", "--cancel", "share=0.1"],
        message: "--cancel: not with --turns (each turn of a conversation builds on the one before); cancel single requests",
        code: 2,
    },
    Case {
        input: "`--probe` more often than 10ms",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--probe", "every=1ms"],
        message: "--probe: every `1ms` is too short (10ms at least: a canary measures, it does not load)",
        code: 2,
    },
    Case {
        input: "`--probe` of a pooling API",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "embeddings", "--probe", "every=1s"],
        message: "--probe: --api embeddings generates nothing to time a canary by; use --api completions, chat, responses or messages",
        code: 2,
    },
    Case {
        input: "`--header` without a colon",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--header", "X-Tenant blue"],
        message: "--header: `X-Tenant blue` has no colon (write 'Name: value', e.g. 'X-Tenant: blue')",
        code: 2,
    },
    Case {
        input: "`watch` of something that is neither a URL nor a hostlist",
        args: &["watch", "not a url"],
        message: "watch: `not a url` is neither a URL nor a hostlist (`not a url`: ` ` cannot be in a host name)",
        code: 2,
    },
    Case {
        input: "`watch --interval` too short",
        args: &["watch", "http://127.0.0.1:9", "--interval", "10ms"],
        message: "--interval: below 100ms (use e.g. 1s; servers update their metrics about once a second)",
        code: 2,
    },
    Case {
        input: "`--tokenizer server` without a server",
        args: &[H, "--tokenizer", "server"],
        message: "--tokenizer server: only with --endpoint (a model of infertop's own has its tokenizer; or give a tokenizer.json)",
        code: 2,
    },
    Case {
        input: "`--server-metrics` that is not http",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--server-metrics", "ftp://x"],
        message: "--server-metrics: `ftp://x` is not http or https (write e.g. http://localhost:8000/metrics)",
        code: 2,
    },
    Case {
        input: "`--fps` out of range",
        args: &[H, "--fps", "0"],
        message: "--fps: 0 is out of range (use 1 to 120)",
        code: 2,
    },
    Case {
        input: "zero output tokens",
        args: &[H, "-n", "0"],
        message: "--output-tokens: 0 is not a positive length (use 1 or more)",
        code: 2,
    },
    Case {
        input: "negative prompt length",
        args: &[H, "--prompt-tokens=-5"],
        message: "--prompt-tokens: -5 is not a positive length (use 1 or more)",
        code: 2,
    },
    Case {
        input: "inverted range",
        args: &[H, "-p", "512..64"],
        message: "--prompt-tokens: range 512..64 is inverted (write 64..512)",
        code: 2,
    },
    Case {
        input: "sampling temperature of 0",
        args: &[H, "--sampling", "temperature=0,seed=1"],
        message: "--sampling: temperature=0: must be a number above 0 (for greedy decoding leave out --sampling)",
        code: 2,
    },
    Case {
        input: "`--step-parts` of a server",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--step-parts", "10"],
        message: "--step-parts: times the parts of the candle engine's forward; a server's own timings come with --server-metrics",
        code: 2,
    },
    Case {
        input: "unknown sampling key",
        args: &[H, "--sampling", "temp=0.7"],
        message: "--sampling: unknown key `temp` (known: temperature, top_p, top_k, seed)",
        code: 2,
    },
    Case {
        input: "malformed length",
        args: &[H, "-p", "12x"],
        message: "--prompt-tokens: `12x` is not a length (use N, a list like 128,512, or a range like 64..512)",
        code: 2,
    },
    Case {
        input: "batch 0",
        args: &[H, "--batch", "0"],
        message: "--batch: 0 is not a positive number (use 1 or more)",
        code: 2,
    },
    Case {
        input: "zero requests",
        args: &[H, "--requests", "0"],
        message: "--requests: 0 is not a positive number (use 1 or more)",
        code: 2,
    },
    Case {
        input: "malformed duration",
        args: &[H, "--duration", "soon"],
        message: "--duration: `soon` is not a duration (e.g. 200ms, 1.5s)",
        code: 2,
    },
    Case {
        input: "unknown dtype",
        args: &[H, "--dtype", "f8"],
        message: "--dtype: unknown value `f8` (use f32, f16 or bf16)",
        code: 2,
    },
    Case {
        input: "unknown device",
        args: &[H, "--device", "tpu"],
        message: "--device: unknown device `tpu` (use cpu, cuda or cuda:N)",
        code: 2,
    },
    Case {
        input: "unknown summary format",
        args: &[H, "--format", "xml"],
        message: "--format: unknown value `xml` (use md, json or csv)",
        code: 2,
    },
    Case {
        input: "malformed SLO",
        args: &[H, "--slo", "ttft=fast"],
        message: "--slo: `fast` is not a duration (e.g. 200ms, 1.5s)",
        code: 2,
    },
    Case {
        input: "unknown synthetic preset",
        args: &[H, "--model", "synthetic:huge"],
        message: "--model: unknown synthetic preset `huge` (known: tiny, small, qwen2.5-0.5b, llama-3.2-1b, llama-2-7b, llama-3-8b, mistral-7b, qwen2.5-7b, qwen3-0.6b, qwen3-8b, gemma-3-1b, gemma-3-4b, phi-3-mini, qwen3-30b-a3b, mixtral-8x7b; see `infertop presets`)",
        code: 2,
    },
    Case {
        input: "prompt + output beyond the model's positions",
        args: &[H, "-p", "4000", "-n", "200"],
        message: "prompt + output tokens (4200) exceed the model's 4096 positions; lower --prompt-tokens or --output-tokens",
        code: 2,
    },
    // ---- theme and key-binding files
    Case {
        input: "theme file with an unknown key",
        args: &[H, "--theme", "theme-unknown-key.toml"],
        message: "theme file theme-unknown-key.toml, line 4: unknown field `tpot_colour`, expected one of…",
        code: 2,
    },
    Case {
        input: "theme file with a bad colour",
        args: &[H, "--theme", "theme-bad-color.toml"],
        message: "theme file theme-bad-color.toml, line 3: `purplish` is not a colour (use a name such as red, light-blue, dark-gray, reset; \"#rrggbb\"; or an xterm index 0-255)",
        code: 2,
    },
    Case {
        input: "theme file with an unknown base theme",
        args: &[H, "--theme", "theme-bad-base.toml"],
        message: "theme file theme-bad-base.toml, line 1: unknown base theme `solarized` (built-in: default, light, high-contrast, mono)",
        code: 2,
    },
    Case {
        input: "theme file that is not TOML",
        args: &[H, "--theme", "theme-not-toml.toml"],
        message: "theme file theme-not-toml.toml, line 1: invalid basic string, expected `\"`",
        code: 2,
    },
    Case {
        input: "keys file with an unknown action",
        args: &[H, "--keys", "keys-unknown-action.toml"],
        message: "keys file keys-unknown-action.toml, line 2: unknown field `explode`, expected one of…",
        code: 2,
    },
    Case {
        input: "keys file with a key that is not one",
        args: &[H, "--keys", "keys-bad-key.toml"],
        message: "keys file keys-bad-key.toml, line 2: unknown key `ctrl+shift+space+banana` (use a single character, space, tab, backtab, esc, enter, backspace, up, down, left, right, home, end, pageup, pagedown, f1-f12, with optional ctrl- / alt-)",
        code: 2,
    },
    Case {
        input: "keys file binding one key twice",
        args: &[H, "--keys", "keys-duplicate.toml"],
        message: "keys file keys-duplicate.toml, line 2: key `x` is bound to both `quit` (line 1) and `pause`",
        code: 2,
    },
    Case {
        input: "keys file missing",
        args: &[H, "--keys", "no-such-keys.toml"],
        message: "keys file no-such-keys.toml: not found",
        code: 2,
    },
    // ---- prompt files
    Case {
        input: "prompt file missing",
        args: &[H, "--prompt-file", "no-such-prompts.txt"],
        message: "--prompt-file no-such-prompts.txt: not found",
        code: 2,
    },
    Case {
        input: "prompt file is a directory",
        args: &[H, "--prompt-file", "a-directory"],
        message: "--prompt-file a-directory: is a directory; pass a file",
        code: 2,
    },
    Case {
        input: "prompt file that is binary",
        args: &[H, "--prompt-file", "binary.txt"],
        message: "--prompt-file binary.txt: looks binary (contains NUL bytes); use a UTF-8 text file with one prompt per line",
        code: 2,
    },
    Case {
        input: "prompt file with a 10 MB line",
        args: &[H, "--prompt-file", "long-line.txt"],
        message: "--prompt-file long-line.txt: line 1 is 10000000 bytes, over the 1 MiB limit for one prompt; split it, or use --prompt-tokens N for long synthetic prompts",
        code: 2,
    },
    Case {
        input: "prompt file that is empty",
        args: &[H, "--prompt-file", "blank.txt"],
        message: "--prompt-file blank.txt: has no prompts (one prompt per line)",
        code: 2,
    },
    Case {
        input: "tools file that is not JSON",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--tools", "tools-not-json.json"],
        message: "--tools tools-not-json.json: not JSON (expected value at line 1 column 10); write a JSON array of tool definitions",
        code: 2,
    },
    Case {
        input: "tools file that is not an array",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--tools", "tools-object.json"],
        message: "--tools tools-object.json: not a JSON array (write [{\"type\":\"function\",\"function\":{…}}, …])",
        code: 2,
    },
    Case {
        input: "tools file missing",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--tools", "no-such-tools.json"],
        message: "--tools no-such-tools.json: not found",
        code: 2,
    },
    Case {
        input: "tools with an API that has none",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--tools", "tools.json"],
        message: "--tools: --api completions has no tools; use --api chat, responses or messages",
        code: 2,
    },
    Case {
        input: "a tool choice without tools",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--tool-choice", "auto"],
        message: "--tool-choice: no tools to choose from; add --tools FILE (or a --dataset whose rows carry tools)",
        code: 2,
    },
    Case {
        input: "conversations with tools split over shards",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--conversations", "4", "--turns", "3", "--tools", "tools.json", "--shard", "0/2", "--concurrency", "2"],
        message: "--shard 0/2: conversations with tools cannot be split (a tool round adds requests each shard would number alike); run them whole or drop --tools",
        code: 2,
    },
    Case {
        input: "a served model's weight of 0",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--served-model", "a=0,b=1"],
        message: "--served-model: `a=0`: the weight `0` is not a whole number from 1 to 1000000",
        code: 2,
    },
    Case {
        input: "a batch with a streaming API",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--batch", "4"],
        message: "--batch 4: with --endpoint every request is one sequence (but --api embeddings and rerank, which take a batch of inputs); use --concurrency for parallel requests",
        code: 2,
    },
    Case {
        input: "`--determinism` without a server",
        args: &[H, "--determinism"],
        message: "--determinism: compares a server's outputs; give --endpoint URL",
        code: 2,
    },
    Case {
        input: "`--determinism` at concurrency 1",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "1"],
        message: "--concurrency 1: --determinism compares one request at a time with N at once; give --concurrency N with N > 1",
        code: 2,
    },
    Case {
        input: "`--determinism` without `--concurrency`",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism"],
        message: "--concurrency 1: --determinism compares one request at a time with N at once; give --concurrency N with N > 1",
        code: 2,
    },
    Case {
        input: "`--determinism` with an open loop",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4", "--rate", "2"],
        message: "--rate: --determinism runs closed loops (one request at a time, then --concurrency at once); drop --rate",
        code: 2,
    },
    Case {
        input: "`--determinism` with host sampling",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4", "--sampling", "temperature=0.7"],
        message: "--sampling: samples on the host (the candle engine); --determinism compares a server's greedy outputs",
        code: 2,
    },
    Case {
        input: "`--determinism` with a temperature above 0",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4", "--extra-body", r#"{"temperature": 0.7}"#],
        message: "--extra-body: sets temperature 0.7; --determinism compares greedy outputs (temperature 0)",
        code: 2,
    },
    Case {
        input: "`--determinism` for a duration",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4", "--duration", "30s"],
        message: "--duration: --determinism sends the same prompts in both passes; give --requests N instead",
        code: 2,
    },
    Case {
        input: "`--determinism` with fewer prompts than slots",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4", "--requests", "2"],
        message: "--requests 2: fewer than --concurrency 4, so the loaded pass would never have 4 in flight; give --requests 4 or more",
        code: 2,
    },
    Case {
        input: "`--determinism` of conversations",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "chat", "--determinism", "--concurrency", "4", "--conversations", "4", "--turns", "2"],
        message: "--turns: a conversation resends its replies, so the second pass's prompts would follow the first pass's outputs; --determinism sends single prompts",
        code: 2,
    },
    Case {
        input: "`--determinism` of an API without output",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--api", "embeddings", "--determinism", "--concurrency", "4"],
        message: "--api embeddings: generates no output to compare; --determinism takes completions, chat, responses or messages",
        code: 2,
    },
    Case {
        input: "`--determinism` with a CSV summary",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4", "--format", "csv"],
        message: "--format csv: --determinism prints md or json",
        code: 2,
    },
    Case {
        input: "`sweep --determinism`",
        args: &["sweep", "--endpoint", "http://127.0.0.1:9", "--determinism", "--concurrency", "4"],
        message: "--determinism: not a sweep's flag; run infertop --endpoint URL --determinism --concurrency N",
        code: 2,
    },
    Case {
        input: "`sweep --threads` with two values",
        args: &["sweep", "--threads", "1,2"],
        message: "--threads 1,2: candle sizes its CPU thread pool once per process, so a second thread count would run on the first's pool; sweep one --threads value per run (--threads 1, then --threads 2)",
        code: 2,
    },
    // ---- record files
    Case {
        input: "`--record` is a directory",
        args: &[H, "--record", "a-directory"],
        message: "--record a-directory: is a directory; pass a file path such as run.jsonl",
        code: 2,
    },
    Case {
        input: "`--record` in a missing directory",
        args: &[H, "--record", "no/such/dir/run.jsonl"],
        message: "--record no/such/dir/run.jsonl: the directory no/such/dir does not exist; create it first",
        code: 2,
    },
    Case {
        input: "`report` on JSON lines that are not a record",
        args: &["report", "not-a-record.jsonl"],
        message: "not-a-record.jsonl: not an infertop record (no header line); make one with --record FILE",
        code: 2,
    },
    Case {
        input: "`report` on a file that is not JSON lines",
        args: &["report", "notes.csv"],
        message: "notes.csv: not an infertop record (no header line); make one with --record FILE",
        code: 2,
    },
    Case {
        input: "`report` on an empty file",
        args: &["report", "empty.jsonl"],
        message: "empty.jsonl: not an infertop record (no header line, the file is empty); make one with --record FILE",
        code: 2,
    },
    Case {
        input: "`report` on a directory",
        args: &["report", "a-directory"],
        message: "a-directory: is a directory; pass a record file written with --record FILE",
        code: 2,
    },
    Case {
        input: "`report` of a record in a newer format",
        args: &["report", "newer-format.jsonl"],
        message: "newer-format.jsonl: record format 99 (written by infertop 9.0.0) is newer than this infertop reads (format 1); read it with a newer infertop",
        code: 2,
    },
    Case {
        input: "`report --slice` of no length",
        args: &["report", "run.jsonl", "--slice", "0s"],
        message: "--slice: `0s` is not a window length (give a positive duration such as 10s, 5m or 1h)",
        code: 2,
    },
    Case {
        input: "`report --slice` that is not a duration",
        args: &["report", "run.jsonl", "--slice", "hourly"],
        message: "--slice: `hourly` is not a window length (give a positive duration such as 10s, 5m or 1h)",
        code: 2,
    },
    Case {
        input: "`report --slice` too fine for the run",
        args: &["report", "run.jsonl", "--slice", "1us"],
        message: "--slice 1.00µs: the run's 34.5 s would make more than 100000 windows; give --slice 1ms or longer",
        code: 2,
    },
    Case {
        input: "`report --slice` in llm-d's format",
        args: &["report", "run.jsonl", "--slice", "10s", "--format", "llm-d"],
        message: "--slice: llm-d's report has no windows; use --format md, json or csv",
        code: 2,
    },
    Case {
        input: "`report --slice` with a flag of the summary's",
        args: &["report", "run.jsonl", "--slice", "10s", "--plot", "run.svg"],
        message: "the argument '--slice <DUR>' cannot be used with '--plot <PLOT>' (see infertop --help)",
        code: 2,
    },
    Case {
        input: "`report --slice` of a sweep's record",
        args: &["report", "sweep.jsonl", "--slice", "10s"],
        message: "sweep.jsonl: a sweep's record; --slice takes a run's record (report the sweep without --slice for its table of cells)",
        code: 2,
    },
    Case {
        input: "`report --slice` of a record without requests",
        args: &["report", "no-requests.jsonl", "--slice", "10s"],
        message: "no-requests.jsonl: no requests in the record (nothing to slice)",
        code: 2,
    },
    Case {
        input: "`report --slice` of a record written before requests carried their time",
        args: &["report", "untimed.jsonl", "--slice", "10s"],
        message: "untimed.jsonl: written before request lines carried their time (t_s), so it cannot be sliced by time; report it without --slice",
        code: 2,
    },
    Case {
        input: "`replay` of JSON lines that are not a record",
        args: &["replay", "not-a-record.jsonl"],
        message: "not-a-record.jsonl: not an infertop record (line 1 is not a record header); make one with --record FILE, or stream one with --jsonl",
        code: 2,
    },
    Case {
        input: "`replay` of an empty file",
        args: &["replay", "empty.jsonl"],
        message: "empty.jsonl: not an infertop record (the file is empty); make one with --record FILE",
        code: 2,
    },
    Case {
        input: "`replay` of a record in a newer format",
        args: &["replay", "newer-format.jsonl"],
        message: "newer-format.jsonl: record format 99 (written by infertop 9.0.0) is newer than this infertop reads (format 1); read it with a newer infertop",
        code: 2,
    },
    Case {
        input: "`replay` at a speed that is not one",
        args: &["replay", "--speed", "0", "not-a-record.jsonl"],
        message: "--speed: `0` is not a speed (use a multiple of the record's pace such as 1, 4 or 0.5, or max)",
        code: 2,
    },
    Case {
        input: "`follow` of a file that does not exist (yet)",
        args: &["follow", "no-such-run.jsonl"],
        message: "no-such-run.jsonl: not found (start the run with --record no-such-run.jsonl first, or follow its stream: infertop --jsonl … | infertop follow -)",
        code: 2,
    },
    Case {
        input: "`follow` of JSON lines that are not a record",
        args: &["follow", "--headless", "not-a-record.jsonl"],
        message: "not-a-record.jsonl: not an infertop record (line 1 is not a record header); make one with --record FILE, or stream one with --jsonl",
        code: 2,
    },
    Case {
        input: "`follow` of nothing",
        args: &["follow"],
        message: "follow needs a record, - (a stream on stdin) or --agent CMD (see infertop follow --help)",
        code: 2,
    },
    Case {
        input: "`--jsonl` on a sweep",
        args: &["sweep", "--batch", "1,2", "--jsonl"],
        message: "--jsonl: a sweep does not stream its record; write it with --record FILE and follow that file (infertop follow FILE)",
        code: 2,
    },
    // ---- Hugging Face directories
    Case {
        input: "model path missing",
        args: &[H, "--model", "no-such-model"],
        message: "--model no-such-model: no such file or directory (use a Hugging Face directory, a .gguf file, or synthetic:NAME)",
        code: 2,
    },
    Case {
        input: "a file where the model directory is expected",
        args: &[H, "--model", "tiny/config.json"],
        message: "--model tiny/config.json: is a file; pass the directory that holds config.json",
        code: 2,
    },
    Case {
        input: "config.json that is not JSON",
        args: &[H, "--model", "bad-json"],
        message: "bad-json/config.json: not valid JSON (key must be a string at line 1 column 2); re-download the model's config.json",
        code: 2,
    },
    Case {
        input: "config.json without an architecture",
        args: &[H, "--model", "no-arch"],
        message: "no-arch/config.json: names no architecture (neither `architectures` nor `model_type`); supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration",
        code: 2,
    },
    Case {
        input: "config.json of an unsupported architecture",
        args: &[H, "--model", "gpt2"],
        message: "gpt2/config.json: architecture `GPT2LMHeadModel` is not supported (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration)",
        code: 2,
    },
    Case {
        input: "Gemma 3 with vision without its `text_config` (the text model is read from it)",
        args: &[H, "--model", "gemma3-vision"],
        message: "gemma3-vision/config.json: `text_config`: missing; a Gemma3ForConditionalGeneration config.json holds the text model's settings there",
        code: 2,
    },
    Case {
        input: "Gemma `layer_types` not one per layer",
        args: &[H, "--model", "gemma-layer-types"],
        message: "gemma-layer-types/config.json: `layer_types` has 1 entries for num_hidden_layers 4",
        code: 2,
    },
    Case {
        input: "config.json missing a required field",
        args: &[H, "--model", "no-hidden-size"],
        message: "no-hidden-size/config.json: missing field `hidden_size`",
        code: 2,
    },
    Case {
        input: "config.json with a field of the wrong type",
        args: &[H, "--model", "string-heads"],
        message: "string-heads/config.json: `num_attention_heads`: invalid type: string \"32\", expected a positive integer",
        code: 2,
    },
    Case {
        input: "truncated safetensors",
        args: &[H, "--model", "truncated"],
        message: "truncated/model.safetensors: not a valid safetensors file (path: \"truncated/model.safetensors\" incomplete metadata, file not fully covered); the download may be truncated",
        code: 2,
    },
    Case {
        input: "a tensor missing",
        args: &[H, "--model", "missing-tensor"],
        message: "missing-tensor/model.safetensors: tensor `model.layers.2.mlp.up_proj.weight` is missing (incomplete download, or weights of another architecture than llama)",
        code: 2,
    },
    Case {
        input: "a tensor of the wrong shape",
        args: &[H, "--model", "wrong-shape"],
        message: "wrong-shape/model.safetensors: tensor `model.layers.0.mlp.up_proj.weight` has shape [256, 768], config.json implies [768, 256]",
        code: 2,
    },
    Case {
        input: "a tensor of an unsupported dtype (I64)",
        args: &[H, "--model", "dtype-i64"],
        message: "dtype-i64/model.safetensors: tensor `model.layers.1.self_attn.q_proj.weight` has dtype I64; only F32, F16 and BF16 are supported (use a GGUF file for quantized weights)",
        code: 2,
    },
    Case {
        input: "a tensor of an unsupported dtype (U8)",
        args: &[H, "--model", "dtype-u8"],
        message: "dtype-u8/model.safetensors: tensor `model.norm.weight` has dtype U8; only F32, F16 and BF16 are supported (use a GGUF file for quantized weights)",
        code: 2,
    },
    Case {
        input: "a shard named in model.safetensors.index.json missing",
        args: &[H, "--model", "missing-shard"],
        message: "missing-shard: shard `model-00002-of-00002.safetensors` named in model.safetensors.index.json is missing; finish the download",
        code: 2,
    },
    Case {
        input: "tokenizer.json missing (text prompt)",
        args: &[H, "--model", "no-tokenizer", "--prompt", "hello"],
        message: "no-tokenizer/tokenizer.json: tokenizer.json not found; copy the model's tokenizer.json next to config.json",
        code: 2,
    },
    Case {
        input: "tokenizer.json corrupt (text prompt)",
        args: &[H, "--model", "bad-tokenizer", "--prompt", "hello"],
        message: "bad-tokenizer/tokenizer.json: not a valid tokenizer.json (EOF while parsing an object at line 1 column 54); re-download it",
        code: 2,
    },
    Case {
        input: "--tokenizer that does not exist",
        args: &[H, "--prompt", "hi", "--tokenizer", "no-such-tokenizer.json"],
        message: "--tokenizer no-such-tokenizer.json: no such file (give the path of a tokenizer.json)",
        code: 2,
    },
    // ---- GGUF
    Case {
        input: "GGUF truncated (header intact)",
        args: &[H, "--model", "truncated.gguf"],
        message: "truncated.gguf: tensor `blk.1.ffn_down.weight` extends past the end of the file; the download is truncated",
        code: 2,
    },
    Case {
        input: "GGUF cut inside its header",
        args: &[H, "--model", "header-only.gguf"],
        message: "header-only.gguf: not a valid GGUF file (gguf: header declares 39 tensors and 23 metadata entries, needs at least 1235 bytes, only 76 remaining); the download may be truncated",
        code: 2,
    },
    Case {
        input: "a .gguf that is not GGUF",
        args: &[H, "--model", "text.gguf"],
        message: "text.gguf: not a valid GGUF file (unknown magic 0x6d74683c); the download may be truncated",
        code: 2,
    },
    Case {
        input: "GGUF of an unsupported architecture",
        args: &[H, "--model", "bloom.gguf"],
        message: "bloom.gguf: GGUF architecture `bloom` is not supported (supported: llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3)",
        code: 2,
    },
    // ---- sweeps
    Case {
        input: "`sweep` with an empty value in a list",
        args: &["sweep", "--batch", "1,,4"],
        message: "--batch: empty value in the list (write e.g. 1,2,4,8)",
        code: 2,
    },
    Case {
        input: "`sweep` with `--precision 0`",
        args: &["sweep", "--precision", "0"],
        message: "--precision: `0` is not a precision (use a percentage above 0, e.g. 5%)",
        code: 2,
    },
    Case {
        input: "`sweep` with `--precision` of 100 % or more",
        args: &["sweep", "--precision", "150%"],
        message: "--precision: `150%` is not a precision (use a percentage above 0, e.g. 5%)",
        code: 2,
    },
    Case {
        input: "`sweep` with `--max-repetitions` but no `--precision`",
        args: &["sweep", "--max-repetitions", "50"],
        message: "--precision <PRECISION> is needed by the flags given (see infertop --help)",
        code: 2,
    },
    Case {
        input: "`sweep` with `--max-repetitions` below `--repetitions`",
        args: &["sweep", "--precision", "5%", "--repetitions", "20", "--max-repetitions", "10"],
        message: "--max-repetitions 10: below --repetitions 20; raise it or lower --repetitions",
        code: 2,
    },
    Case {
        input: "`sweep` with `--requests` no more than its warmup",
        args: &["sweep", "--requests", "2", "--warmup", "2"],
        message: "--requests 2: each cell's first --warmup 2 are warmup, leaving none to measure; give more than 2",
        code: 2,
    },
    Case {
        input: "`sweep --find-max` without `--slo`",
        args: &["sweep", "--endpoint", "http://127.0.0.1:1", "--find-max", "concurrency"],
        message: "--find-max: give --slo (e.g. ttft=500ms,tpot=50ms): the search finds the highest load whose p99 meets it",
        code: 2,
    },
    Case {
        input: "`sweep --find-max` of the candle engine",
        args: &["sweep", "--find-max", "rate", "--slo", "ttft=1s"],
        message: "--find-max: searches the load a server takes; give --endpoint URL",
        code: 2,
    },
    Case {
        input: "`sweep --find-max` with a list of more than two loads",
        args: &["sweep", "--endpoint", "http://127.0.0.1:1", "--find-max", "concurrency", "--slo", "ttft=1s", "--concurrency", "1,2,4"],
        message: "--concurrency: with --find-max give where the search starts (one value) or its range (LOW,HIGH), not a list",
        code: 2,
    },
    Case {
        input: "`sweep` with an unknown format",
        args: &["sweep", "--format", "xml"],
        message: "--format: unknown value `xml` (use md, csv, json or jsonl)",
        code: 2,
    },
    Case {
        input: "`sweep` where no cell fits the model's positions",
        args: &["sweep", "-p", "5000,6000", "-n", "8"],
        message: "prompt + output tokens (5008) exceed the model's 4096 positions; lower --prompt-tokens or --output-tokens",
        code: 2,
    },
    Case {
        input: "`sweep` of a server with a batch list",
        args: &["sweep", "--endpoint", "http://127.0.0.1:1", "--batch", "1,2"],
        message: "--batch: with --endpoint every request is one sequence; sweep --concurrency (or --rate) instead",
        code: 2,
    },
    // ---- repeated runs
    Case {
        input: "`--runs 1`",
        args: &[H, "--runs", "1", "--requests", "5"],
        message: "--runs: `1` is not a number of runs (give 2 or more: the spread across runs needs two)",
        code: 2,
    },
    Case {
        input: "`--runs 0`",
        args: &[H, "--runs", "0", "--requests", "5"],
        message: "--runs: `0` is not a number of runs (give 2 or more: the spread across runs needs two)",
        code: 2,
    },
    Case {
        input: "`--cooldown` that is not a duration",
        args: &[H, "--runs", "3", "--requests", "5", "--cooldown", "soon"],
        message: "--cooldown: `soon` is not a duration (e.g. 200ms, 1.5s)",
        code: 2,
    },
    Case {
        input: "`--cooldown` without `--runs`",
        args: &[H, "--requests", "5", "--cooldown", "10s"],
        message: "--runs <N> is needed by the flags given (see infertop --help)",
        code: 2,
    },
    Case {
        input: "`--runs` of a run with no end",
        args: &[H, "--runs", "3"],
        message: "--runs 3: each run needs an end to be repeated; give --requests N or --duration D",
        code: 2,
    },
    Case {
        input: "`--runs` whose runs are all warmup",
        args: &[H, "--runs", "3", "--requests", "2", "--warmup", "2"],
        message: "--requests 2: each run's first --warmup 2 are warmup, leaving none to compare across runs; give more than 2",
        code: 2,
    },
    Case {
        input: "`--runs` with `--jsonl`",
        args: &["--runs", "3", "--requests", "5", "--jsonl"],
        message: "--jsonl with --runs: the runs' record is not streamed; write it with --record FILE and follow that file (infertop follow FILE)",
        code: 2,
    },
    Case {
        input: "`--runs` of a shard",
        args: &[H, "--endpoint", "http://127.0.0.1:9", "--runs", "3", "--requests", "8", "--shard", "0/2", "--concurrency", "2"],
        message: "--shard, --start-at, --clock-ref with --runs: repeated runs are sent from one generator, one after another; repeat the sharded run itself",
        code: 2,
    },
    Case {
        input: "`sweep` with `--runs`",
        args: &["sweep", "--batch", "1,2", "--runs", "3"],
        message: "--runs: a sweep measures each cell once; repeat a run (infertop --runs N …), or run the sweep again",
        code: 2,
    },
    Case {
        input: "`report --plot` of repeated runs",
        args: &["report", "runs.jsonl", "--plot", "runs.svg"],
        message: "--plot: runs.jsonl is a record of repeated runs (--runs), which has no plot; report it without --plot",
        code: 2,
    },
    // ---- a server without the API asked for (checked before anything is sent)
    Case {
        input: "a server without the completions route (the default `--api`)",
        args: &[H, "--endpoint", SERVER],
        message: "--api completions: $SERVER has no POST /v1/completions (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
    Case {
        input: "`--api chat` on a server without the chat route",
        args: &[H, "--endpoint", SERVER, "--api", "chat"],
        message: "--api chat: $SERVER has no POST /v1/chat/completions (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
    Case {
        input: "`--api responses` on a server without it",
        args: &[H, "--endpoint", SERVER, "--api", "responses"],
        message: "--api responses: $SERVER has no POST /v1/responses (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
    Case {
        input: "`--api messages` on a server without it",
        args: &[H, "--endpoint", SERVER, "--api", "messages"],
        message: "--api messages: $SERVER has no POST /v1/messages (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
    Case {
        input: "`--api embeddings` on a server without it",
        args: &[H, "--endpoint", SERVER, "--api", "embeddings"],
        message: "--api embeddings: $SERVER has no POST /v1/embeddings (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
    Case {
        input: "`--api rerank` on a server without it",
        args: &[H, "--endpoint", SERVER, "--api", "rerank"],
        message: "--api rerank: $SERVER has no POST /v1/rerank (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
    Case {
        input: "`--api auto` on a server that answers no API",
        args: &[H, "--endpoint", SERVER, "--api", "auto"],
        message: "--api auto: $SERVER answers none of POST /v1/chat/completions (HTTP 404), /v1/completions (HTTP 404), /v1/responses (HTTP 404), /v1/messages (HTTP 404), /v1/embeddings (HTTP 404), /v1/rerank (HTTP 404); is it an inference server?",
        code: 2,
    },
    Case {
        input: "`sweep` of a server without the API asked for",
        args: &["sweep", "--endpoint", SERVER, "--api", "embeddings", "--concurrency", "1,2"],
        message: "--api embeddings: $SERVER has no POST /v1/embeddings (HTTP 404); pick an API it serves, or --api auto",
        code: 2,
    },
];

fn infertop() -> Command {
    Command::cargo_bin("infertop").expect("the infertop binary")
}

/// The fixtures directory, made once per test process.
fn fixtures() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        make_fixtures(dir.path());
        dir
    })
    .path()
}

fn write(path: PathBuf, bytes: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&path, bytes).expect("write fixture");
}

/// A copy of the tiny model with one change to its tensors.
fn tiny_with(
    d: &Path,
    name: &str,
    change: impl FnOnce(&mut std::collections::HashMap<String, Tensor>),
) {
    let tiny = d.join("tiny");
    let out = d.join(name);
    std::fs::create_dir_all(&out).expect("mkdir");
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(tiny.join(f), out.join(f)).expect("copy");
    }
    let mut tensors =
        candle_core::safetensors::load(tiny.join("model.safetensors"), &Device::Cpu).expect("load");
    change(&mut tensors);
    candle_core::safetensors::save(&tensors, out.join("model.safetensors")).expect("save");
}

fn make_fixtures(d: &Path) {
    // Static fixtures.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad");
    for entry in std::fs::read_dir(&src).expect("tests/fixtures/bad") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), d.join(entry.file_name())).expect("copy fixture");
    }
    std::fs::create_dir_all(d.join("a-directory")).expect("mkdir");
    write(
        d.join("newer-format.jsonl"),
        "{\"type\":\"header\",\"infertop_version\":\"9.0.0\",\"record_format\":99}\n",
    );
    // Records for `report --slice`: a run of one request that ended at 1.5 s of 34.5, a
    // sweep's, one without requests, one whose request line has no time; and one of repeated
    // runs (`--runs`), for `report --plot`.
    let header = r#"{"type":"header","infertop_version":"0.1.0","record_format":1}"#;
    let request = r#"{"type":"request","index":0,"warmup":false,"batch":1,"prompt_tokens":16,"output_tokens":4,"ttft_s":0.03,"tpot_s":0.01,"e2e_s":0.06,"output_hash":"0000000000000000""#;
    write(
        d.join("run.jsonl"),
        format!("{header}\n{request},\"t_s\":1.5}}\n{{\"type\":\"footer\",\"stop\":\"duration_limit\",\"elapsed_s\":34.5,\"summary\":{{}}}}\n"),
    );
    write(
        d.join("sweep.jsonl"),
        format!("{header}\n{{\"type\":\"sweep\",\"cells\":[]}}\n"),
    );
    write(
        d.join("runs.jsonl"),
        format!("{header}\n{{\"type\":\"sweep\",\"cells\":[],\"repeat\":{{\"runs\":3,\"cooldown_s\":0.0}}}}\n"),
    );
    write(
        d.join("no-requests.jsonl"),
        format!("{header}\n{{\"type\":\"footer\",\"stop\":\"user_stop\",\"elapsed_s\":3.0,\"summary\":{{}}}}\n"),
    );
    write(d.join("untimed.jsonl"), format!("{header}\n{request}}}\n"));
    write(d.join("prompts.txt"), "hello\n");
    write(
        d.join("binary.txt"),
        b"\x7fELF\x02\x01\x01\x00\x00\x00prompt\n".as_slice(),
    );
    let mut long = vec![b'a'; 10_000_000];
    long.push(b'\n');
    write(d.join("long-line.txt"), long);
    write(d.join("blank.txt"), "\n  \n\n");
    write(d.join("tools-not-json.json"), "{\"name\": oops");
    write(d.join("tools-object.json"), "{\"type\":\"function\"}\n");
    write(
        d.join("tools.json"),
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]\n",
    );

    // A tiny HF directory and GGUF, through the binary as users make them.
    let st = infertop()
        .arg("make-model")
        .arg(d.join("tiny"))
        .output()
        .expect("make-model");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let st = infertop()
        .args(["make-model", "--gguf"])
        .arg(d.join("tiny.gguf"))
        .output()
        .expect("make-model --gguf");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let tiny = d.join("tiny");
    let config = std::fs::read_to_string(tiny.join("config.json")).expect("config");

    write(d.join("bad-json/config.json"), "{not json");
    write(d.join("no-arch/config.json"), r#"{"hidden_size": 8}"#);
    write(
        d.join("gpt2/config.json"),
        r#"{"architectures": ["GPT2LMHeadModel"]}"#,
    );
    write(
        d.join("gemma3-vision/config.json"),
        r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"}"#,
    );
    let mut gemma: serde_json::Value = serde_json::from_str(&config).expect("json");
    gemma["architectures"] = serde_json::json!(["Gemma2ForCausalLM"]);
    gemma["layer_types"] = serde_json::json!(["sliding_attention"]);
    write(d.join("gemma-layer-types/config.json"), gemma.to_string());
    let mut no_hidden: serde_json::Value = serde_json::from_str(&config).expect("json");
    no_hidden
        .as_object_mut()
        .expect("object")
        .remove("hidden_size");
    write(d.join("no-hidden-size/config.json"), no_hidden.to_string());
    let mut string_heads: serde_json::Value = serde_json::from_str(&config).expect("json");
    string_heads["num_attention_heads"] = "32".into();
    write(d.join("string-heads/config.json"), string_heads.to_string());

    let weights = std::fs::read(tiny.join("model.safetensors")).expect("weights");
    write(d.join("truncated/config.json"), &config);
    write(
        d.join("truncated/model.safetensors"),
        &weights[..weights.len() / 2],
    );

    tiny_with(d, "missing-tensor", |t| {
        t.remove("model.layers.2.mlp.up_proj.weight");
    });
    tiny_with(d, "wrong-shape", |t| {
        let w = &t["model.layers.0.mlp.up_proj.weight"];
        let transposed = w.t().and_then(|x| x.contiguous()).expect("transpose");
        t.insert("model.layers.0.mlp.up_proj.weight".into(), transposed);
    });
    tiny_with(d, "dtype-i64", |t| {
        let w = &t["model.layers.1.self_attn.q_proj.weight"];
        let ints = w.to_dtype(DType::I64).expect("i64");
        t.insert("model.layers.1.self_attn.q_proj.weight".into(), ints);
    });
    tiny_with(d, "dtype-u8", |t| {
        let w = &t["model.norm.weight"];
        let bytes = w.to_dtype(DType::U8).expect("u8");
        t.insert("model.norm.weight".into(), bytes);
    });

    // Two shards named in the index; the second was never downloaded.
    {
        let mut tensors =
            candle_core::safetensors::load(tiny.join("model.safetensors"), &Device::Cpu)
                .expect("load");
        let names: Vec<String> = tensors.keys().cloned().collect();
        let (first, second): (Vec<_>, Vec<_>) = names.iter().partition(|n| n.contains("layers.0."));
        let shard1: std::collections::HashMap<String, Tensor> = first
            .iter()
            .map(|n| ((*n).clone(), tensors.remove(*n).expect("tensor")))
            .collect();
        let out = d.join("missing-shard");
        std::fs::create_dir_all(&out).expect("mkdir");
        write(out.join("config.json"), &config);
        candle_core::safetensors::save(&shard1, out.join("model-00001-of-00002.safetensors"))
            .expect("save");
        let mut map = serde_json::Map::new();
        for n in &first {
            map.insert((*n).clone(), "model-00001-of-00002.safetensors".into());
        }
        for n in &second {
            map.insert((*n).clone(), "model-00002-of-00002.safetensors".into());
        }
        write(
            out.join("model.safetensors.index.json"),
            serde_json::json!({"metadata": {}, "weight_map": map}).to_string(),
        );
    }

    write(d.join("no-tokenizer/config.json"), &config);
    std::fs::copy(
        tiny.join("model.safetensors"),
        d.join("no-tokenizer/model.safetensors"),
    )
    .expect("copy");
    write(d.join("bad-tokenizer/config.json"), &config);
    std::fs::copy(
        tiny.join("model.safetensors"),
        d.join("bad-tokenizer/model.safetensors"),
    )
    .expect("copy");
    write(
        d.join("bad-tokenizer/tokenizer.json"),
        r#"{"version": "1.0", "model": {"type": "BPE", "vocab": 7"#,
    );

    let gguf = std::fs::read(d.join("tiny.gguf")).expect("gguf");
    write(d.join("truncated.gguf"), &gguf[..gguf.len() / 2]);
    write(d.join("header-only.gguf"), &gguf[..100]);
    write(d.join("text.gguf"), "<html>404 Not Found</html>\n");
    // The same file declaring another architecture: every `llama` (the architecture and the
    // `llama.*` metadata keys) becomes `bloom`, lengths unchanged.
    let mut bloom = gguf.clone();
    let mut i = 0;
    while i + 5 <= bloom.len() {
        if &bloom[i..i + 5] == b"llama" {
            bloom[i..i + 5].copy_from_slice(b"bloom");
            i += 5;
        } else {
            i += 1;
        }
    }
    write(d.join("bloom.gguf"), bloom);
}

/// The URL of the server `$SERVER` stands for, started once per test process: it lists a
/// model and answers every API route with 404.
fn server() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        shapes_server::ShapesServer::start(shapes_server::Truth {
            apis: Vec::new(),
            ..shapes_server::Truth::default()
        })
        .url
    })
}

/// Runs one case; returns its stderr (without the prefix, `$SERVER` put back for the
/// server's URL) and exit code.
fn run_case(case: &Case) -> (String, Option<i32>) {
    let uses_server = case.args.contains(&SERVER);
    let args = case
        .args
        .iter()
        .map(|a| if *a == SERVER { server() } else { a });
    let out = infertop()
        .args(args)
        .current_dir(fixtures())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run infertop");
    let mut err = String::from_utf8_lossy(&out.stderr).into_owned();
    if uses_server {
        err = err.replace(server(), SERVER);
    }
    (err, out.status.code())
}

#[test]
fn every_bad_input_is_one_clear_line_with_exit_code_2() {
    let mut failures = Vec::new();
    for case in CASES {
        let (err, code) = run_case(case);
        let line = err.strip_suffix('\n').unwrap_or(&err);
        let body = line.strip_prefix("infertop: error: ");
        let ok_message = match (body, case.message.strip_suffix('…')) {
            (Some(b), Some(prefix)) => b.starts_with(prefix),
            (Some(b), None) => b == case.message,
            (None, _) => false,
        };
        if code != Some(case.code) || line.contains('\n') || !ok_message || err.contains("panicked")
        {
            failures.push(format!(
                "{} ({:?}): exit {code:?}, stderr:\n{err}",
                case.input, case.args
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from the table:\n\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

/// Permissions cannot be tested as root (root reads everything), so this one is checked only
/// where it means something.
#[test]
fn an_unreadable_prompt_file_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secret.txt");
    std::fs::write(&path, "hello\n").expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read(&path).is_ok() {
        eprintln!("running as root: permissions are not enforced, skipped");
        return;
    }
    let out = infertop()
        .args([H, "--prompt-file", "secret.txt"])
        .current_dir(dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "infertop: error: --prompt-file secret.txt: permission denied\n"
    );
}

fn escape_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `docs/errors.md`, rendered from the table.
fn errors_doc() -> String {
    let mut out = String::from(
        "# Errors\n\n\
         Every bad input infertop checks, the exact message it prints (on stderr, after \
         `infertop: error: `) and its exit code. Bad input is found before anything starts \
         (the terminal is not touched, nothing is measured) and is always one line naming the \
         flag or file, with what to do where that is not obvious. Paths are relative because \
         the commands were run in the directory holding the files. A message ending in `…` is \
         cut here; the real one goes on (e.g. listing every accepted field). `$SERVER` \
         stands for the URL of a server that lists a model and answers no API route (404); \
         the table runs one in-process on 127.0.0.1.\n\n\
         This file is generated from the table in `tests/bad_input.rs`, which runs every row \
         (`INFERTOP_BLESS=1 cargo test --test bad_input` rewrites it).\n\n\
         | input | command | message | exit |\n|---|---|---|---:|\n",
    );
    for c in CASES {
        out.push_str(&format!(
            "| {} | `infertop {}` | {} | {} |\n",
            escape_cell(c.input),
            escape_cell(&c.args.join(" ")),
            escape_cell(c.message),
            c.code
        ));
    }
    out.push_str(
        "\n## When a run fails or is stopped\n\n\
         | what happens | exit | record | summary |\n|---|---:|---|---|\n\
         | the run ends as asked (`--requests`, `--duration`, `q`) | 0 | footer `\"stop\": \"request_limit\"` etc. | printed |\n\
         | an error in the worker (a candle error, out of memory) | 1 | every finished request, an `error` event, footer `\"stop\": \"error\"` | printed (the requests before it); the dashboard shows ERROR until `q` |\n\
         | a panic in the worker | 1 | as for an error; the message says where it panicked | printed |\n\
         | a panic in the dashboard | 1 | every finished request, footer `\"stop\": \"error\"` | printed after the terminal is restored (empty statistics; `infertop report` recomputes them from the record) |\n\
         | SIGINT (Ctrl-C) | 130 | footer `\"stop\": \"user_stop\"` | printed |\n\
         | SIGTERM | 143 | footer `\"stop\": {\"signal\": \"SIGTERM\"}` | printed |\n\
         | SIGHUP (the SSH connection dropped) | 129 | footer `\"stop\": {\"signal\": \"SIGHUP\"}` | printed (if stdout is still there) |\n\
         | kill -9 | 137 | every line whole JSON except perhaps the last; no footer; `infertop report` reads it | none |\n\n\
         A request stopped half-way by a signal is not a measurement and is not recorded; the \
         request lines are flushed one by one, so nothing finished is lost.\n",
    );
    out
}

#[test]
fn errors_doc_matches_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/errors.md");
    let want = errors_doc();
    if std::env::var_os("INFERTOP_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write docs/errors.md");
        return;
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "docs/errors.md differs from the table in tests/bad_input.rs; rerun with INFERTOP_BLESS=1"
    );
}
