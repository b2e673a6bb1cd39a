//! Datasets, traces, conversations and shared prefixes, end to end: the binary against an
//! in-process server that records what arrives and keeps a prefix cache
//! (tests/common/traffic_server.rs). Every file is written by the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::prelude::*;
use common::traffic_server::{Seen, Timing, TrafficServer};
use serde_json::Value;

fn infertop() -> std::process::Command {
    std::process::Command::cargo_bin("infertop").unwrap()
}

fn server(per_token_us: u64) -> TrafficServer {
    TrafficServer::start(Timing {
        base: Duration::from_millis(5),
        per_token: Duration::from_micros(per_token_us),
        itl: Duration::from_millis(1),
        max_model_len: 4096,
    })
}

/// A tokenizer.json whose one-token words make prompts of exact length (the synthetic model's).
fn tokenizer(dir: &Path) -> PathBuf {
    let model = dir.join("tiny");
    let out = infertop()
        .args(["make-model"])
        .arg(&model)
        .args(["--preset", "tiny"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    model.join("tokenizer.json")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs headless against `url` with `args`; returns (exit code, stdout, stderr).
fn run(url: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = infertop()
        .args([
            "--endpoint",
            url,
            "--headless",
            "--no-telemetry",
            "--warmup",
            "0",
        ])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn requests(record: &[Value]) -> Vec<&Value> {
    record.iter().filter(|l| l["type"] == "request").collect()
}

fn completions(seen: Vec<Seen>) -> Vec<Seen> {
    seen.into_iter()
        .filter(|s| s.path.contains("completions"))
        .collect()
}

#[test]
fn a_mooncake_trace_replays_at_its_timestamps_with_its_blocks_shared() {
    let dir = tempfile::tempdir().unwrap();
    let tk = tokenizer(dir.path());
    // Blocks of 16 tokens: rows 0, 1 and 3 share block 1; row 1 also shares block 2 with row 0.
    let trace = write(
        dir.path(),
        "trace.jsonl",
        concat!(
            "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 3, \"hash_ids\": [1, 2, 3]}\n",
            "{\"timestamp\": 200, \"input_length\": 36, \"output_length\": 5, \"hash_ids\": [1, 2, 4]}\n",
            "{\"timestamp\": 400, \"input_length\": 20, \"output_length\": 2, \"hash_ids\": [7, 8]}\n",
            "{\"timestamp\": 1000, \"input_length\": 16, \"output_length\": 4, \"hash_ids\": [1]}\n",
        ),
    );
    let srv = server(0);
    let record = dir.path().join("run.jsonl");
    let (code, stdout, stderr) = run(
        &srv.url,
        &[
            "--dataset",
            trace.to_str().unwrap(),
            "--replay",
            "--time-scale",
            "0.5",
            "--block-size",
            "16",
            "--tokenizer",
            tk.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let seen = completions(srv.seen());
    assert_eq!(seen.len(), 4);
    // Arrivals follow the timestamps at twice the speed (latency counts from them).
    let t0 = seen[0].at;
    for (s, want_ms) in seen.iter().zip([0.0, 100.0, 200.0, 500.0]) {
        let got_ms = (s.at - t0).as_secs_f64() * 1e3;
        assert!(
            (got_ms - want_ms).abs() < 40.0,
            "arrived at {got_ms} ms, due at {want_ms}"
        );
    }
    // Exact prompt lengths, the output lengths asked, and the blocks shared as the ids say.
    let want = [(40, 3), (36, 5), (20, 2), (16, 4)];
    for (s, (input, output)) in seen.iter().zip(want) {
        assert_eq!(s.words.len(), input, "{:?}", s.body);
        assert_eq!(s.body["max_tokens"], output);
        assert_eq!(s.body["ignore_eos"], true);
    }
    assert_eq!(seen[0].words[..32], seen[1].words[..32]);
    assert_ne!(seen[0].words[32..36], seen[1].words[32..36]);
    assert_eq!(seen[0].words[..16], seen[3].words[..16]);
    assert_ne!(seen[2].words[..16], seen[0].words[..16]);
    // The record keeps the file and where each request came from.
    let rec = lines(&record);
    let ds = &rec[0]["config"]["traffic"]["dataset"];
    assert_eq!(ds["format"], "mooncake");
    assert_eq!(ds["rows"], 4);
    assert_eq!(ds["file"], "trace.jsonl");
    assert_eq!(ds["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(rec[0]["config"]["traffic"]["time_scale"], 0.5);
    let reqs = requests(&rec);
    let mut rows: Vec<u64> = reqs
        .iter()
        .map(|r| r["origin"]["row"].as_u64().unwrap())
        .collect();
    rows.sort();
    assert_eq!(rows, [1, 2, 3, 4]);
    for r in &reqs {
        assert!(r["client"]["send_delay_s"].as_f64().unwrap() < 0.05, "{r}");
        assert_eq!(r["client"]["prompt_tokens_from"], "usage");
    }
}

#[test]
fn sharegpt_sends_the_first_human_turn_as_written_and_its_reply_length() {
    let dir = tempfile::tempdir().unwrap();
    let tk_path = tokenizer(dir.path());
    let tk = infertop::model::tokenizer::load(&tk_path).unwrap();
    let replies = [
        "The sky scatters blue light more.",
        "Rivers run to the sea.",
    ];
    let data = format!(
        r#"[{{"conversations":[{{"from":"human","value":"Why is the sky blue?"}},{{"from":"gpt","value":"{}"}}]}},
{{"conversations":[{{"from":"system","value":"Be brief."}},{{"from":"human","value":"Where do rivers go?"}},{{"from":"gpt","value":"{}"}}]}}]"#,
        replies[0], replies[1]
    );
    let file = write(dir.path(), "share.json", &data);
    let srv = server(0);
    let (code, _, stderr) = run(
        &srv.url,
        &[
            "--dataset",
            file.to_str().unwrap(),
            "--tokenizer",
            tk_path.to_str().unwrap(),
            "--api",
            "chat",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let seen = completions(srv.seen());
    assert_eq!(seen.len(), 2, "every row once");
    let msgs = |s: &Seen| s.body["messages"].as_array().unwrap().clone();
    assert_eq!(
        msgs(&seen[0]),
        serde_json::json!([{"role":"user","content":"Why is the sky blue?"}])
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(msgs(&seen[1])[0]["role"], "system");
    assert_eq!(msgs(&seen[1])[1]["content"], "Where do rivers go?");
    for (s, reply) in seen.iter().zip(replies) {
        let want = tk.encode(reply, false).unwrap().get_ids().len();
        assert_eq!(s.body["max_tokens"], want, "{reply}");
    }
}

#[test]
fn jsonl_rows_and_burstgpt_lengths_are_sent_as_their_rows_say() {
    let dir = tempfile::tempdir().unwrap();
    let tk = tokenizer(dir.path());
    let srv = server(0);
    let rows = write(
        dir.path(),
        "rows.jsonl",
        concat!(
            "{\"text\": \"tell me about rivers\", \"output_length\": 6}\n",
            "{\"prompt\": \"and about seas\"}\n",
            "{\"input_length\": 12, \"output_length\": 2}\n",
        ),
    );
    let (code, _, stderr) = run(
        &srv.url,
        &[
            "--dataset",
            rows.to_str().unwrap(),
            "--tokenizer",
            tk.to_str().unwrap(),
            "-n",
            "9",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let seen = completions(srv.seen());
    let got: Vec<(String, u64)> = seen
        .iter()
        .map(|s| {
            (
                s.body["prompt"].as_str().unwrap().to_string(),
                s.body["max_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got[0], ("tell me about rivers".to_string(), 6));
    assert_eq!(
        got[1],
        ("and about seas".to_string(), 9),
        "rows without a length take -n"
    );
    assert_eq!((seen[2].words.len(), got[2].1), (12, 2));

    let srv = server(0);
    let csv = write(
        dir.path(),
        "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n0,ChatGPT,30,5,35,Conversation log\n1,GPT-4,20,3,23,Conversation log\n2,GPT-4,25,0,25,Conversation log\n3,GPT-4,10,4,14,Conversation log\n",
    );
    let record = dir.path().join("burst.jsonl");
    let (code, _, stderr) = run(
        &srv.url,
        &[
            "--dataset",
            csv.to_str().unwrap(),
            "--dataset-filter",
            "model=GPT-4",
            "--tokenizer",
            tk.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let seen = completions(srv.seen());
    let lengths: Vec<(usize, u64)> = seen
        .iter()
        .map(|s| (s.words.len(), s.body["max_tokens"].as_u64().unwrap()))
        .collect();
    assert_eq!(lengths, [(20, 3), (10, 4)]);
    let ds = &lines(&record)[0]["config"]["traffic"]["dataset"];
    assert_eq!(ds["format"], "burstgpt");
    assert_eq!(ds["skipped"]["filtered out"], 1);
    assert_eq!(ds["skipped"]["response tokens 0"], 1);
    assert_eq!(ds["filter"], "model=GPT-4");
}

#[test]
fn conversations_resend_the_history_with_the_streamed_replies_after_the_think_time() {
    let dir = tempfile::tempdir().unwrap();
    let turn = |from: &str, text: &str| format!(r#"{{"from":"{from}","value":"{text}"}}"#);
    let conv = |a: &str| {
        format!(
            r#"{{"conversations":[{},{},{},{},{},{}]}}"#,
            turn("human", &format!("{a} one")),
            turn("gpt", "r1 r1"),
            turn("human", &format!("{a} two")),
            turn("gpt", "r2 r2 r2 r2 r2 r2"),
            turn("human", &format!("{a} three")),
            turn("gpt", "r3")
        )
    };
    let file = write(
        dir.path(),
        "chats.jsonl",
        &format!("{}\n{}\n", conv("alpha"), conv("beta")),
    );
    let srv = server(0);
    let record = dir.path().join("chat.jsonl");
    let (code, stdout, stderr) = run(
        &srv.url,
        &[
            "--dataset",
            file.to_str().unwrap(),
            "--turns",
            "all",
            "--api",
            "chat",
            "--think-time",
            "300ms",
            "--concurrency",
            "2",
            "--record",
            record.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let seen = completions(srv.seen());
    assert_eq!(seen.len(), 6);
    let mut sessions: Vec<String> = seen.iter().map(|s| s.session.clone().unwrap()).collect();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), 2, "one session id per conversation");
    for session in &sessions {
        let turns: Vec<&Seen> = seen
            .iter()
            .filter(|s| s.session.as_ref() == Some(session))
            .collect();
        assert_eq!(turns.len(), 3);
        for (k, s) in turns.iter().enumerate() {
            let msgs = s.body["messages"].as_array().unwrap();
            // Turn k (1-based) holds 2k − 1 messages: every user turn so far and the replies between.
            assert_eq!(msgs.len(), 2 * (k + 1) - 1, "{msgs:?}");
            if k > 0 {
                // The reply the server actually streamed, not the dataset's.
                let prev_tokens = turns[k - 1].body["max_tokens"].as_u64().unwrap() as usize;
                let streamed: String = (0..prev_tokens).map(|i| format!(" w{i}")).collect();
                assert_eq!(msgs[2 * k - 1]["role"], "assistant");
                assert_eq!(msgs[2 * k - 1]["content"], streamed.as_str());
                let gap = s.at - turns[k - 1].ended.unwrap();
                assert!(
                    gap >= Duration::from_millis(280),
                    "think time kept: {gap:?}"
                );
            }
        }
    }
    // Each request says which conversation and turn it was; the summary splits TTFT by turn.
    let rec = lines(&record);
    let mut turns: Vec<u64> = requests(&rec)
        .iter()
        .map(|r| r["origin"]["turn"].as_u64().unwrap())
        .collect();
    turns.sort();
    assert_eq!(turns, [1, 1, 2, 2, 3, 3]);
    let summary: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap();
    let by_turn = summary["breakdown"]["ttft_by_turn"].as_array().unwrap();
    println!("TTFT by turn: {by_turn:?}");
    assert_eq!(by_turn.len(), 3, "{summary}");
    assert_eq!(by_turn[0][1]["n"], 2);
}

#[test]
fn shared_prefix_hits_report_cached_tokens_and_come_in_below_the_misses() {
    let dir = tempfile::tempdir().unwrap();
    let tk = tokenizer(dir.path());
    // 0.5 ms per uncached prompt token: a 300-token prefix is 150 ms of prefill when missed.
    let srv = server(500);
    let (code, stdout, stderr) = run(
        &srv.url,
        &[
            "--shared-prefix",
            "groups=2,prefix=300,question=8",
            "--requests",
            "10",
            "--tokenizer",
            tk.to_str().unwrap(),
            "-n",
            "2",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let seen = completions(srv.seen());
    assert_eq!(seen.len(), 10);
    assert!(seen.iter().all(|s| s.words.len() == 308));
    let summary: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap();
    let by_cache = summary["breakdown"]["ttft_by_cache"].as_array().unwrap();
    let get = |o: &str| {
        by_cache
            .iter()
            .find(|e| e[0] == o)
            .map(|e| e[1].clone())
            .unwrap()
    };
    let (hit, miss) = (get("hit"), get("miss"));
    assert_eq!(miss["n"], 2, "the first of each group misses: {summary}");
    assert_eq!(hit["n"], 8);
    assert!(
        hit["p99"].as_f64().unwrap() < miss["p50"].as_f64().unwrap(),
        "{by_cache:?}"
    );
    assert!(summary["breakdown"]["cached_token_share"].as_f64().unwrap() > 0.7);
}

#[test]
fn the_candle_engine_takes_a_datasets_prompts_and_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let tk_path = tokenizer(dir.path());
    let tk = infertop::model::tokenizer::load(&tk_path).unwrap();
    let model = tk_path.parent().unwrap();
    let file = write(
        dir.path(),
        "rows.jsonl",
        "{\"text\": \"the river runs to the sea\", \"output_length\": 3}\n{\"input_length\": 20, \"output_length\": 2}\n",
    );
    let record = dir.path().join("candle.jsonl");
    let out = infertop()
        .arg("--model")
        .arg(model)
        .args([
            "--dataset",
            file.to_str().unwrap(),
            "--headless",
            "--no-telemetry",
            "--warmup",
            "0",
            "--record",
        ])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = lines(&record);
    let reqs = requests(&rec);
    assert_eq!(reqs.len(), 2);
    let want = tk
        .encode("the river runs to the sea", false)
        .unwrap()
        .get_ids()
        .len() as u64;
    assert_eq!(
        (
            reqs[0]["prompt_tokens"].as_u64(),
            reqs[0]["output_tokens"].as_u64()
        ),
        (Some(want), Some(3))
    );
    assert_eq!(
        (
            reqs[1]["prompt_tokens"].as_u64(),
            reqs[1]["output_tokens"].as_u64()
        ),
        (Some(20), Some(2))
    );
    assert_eq!(
        rec[0]["config"]["traffic"]["cache"],
        "none: the candle engine has no prefix cache"
    );
    // A replay needs a server.
    let out = infertop()
        .arg("--model")
        .arg(model)
        .args([
            "--dataset",
            file.to_str().unwrap(),
            "--replay",
            "--headless",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--replay: the candle engine"), "{err}");
}

#[test]
fn bad_traffic_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(0);
    let empty = write(dir.path(), "empty.jsonl", "");
    let nocol = write(dir.path(), "b.csv", "Timestamp,Model\n1,x\n");
    let back = write(
        dir.path(),
        "back.jsonl",
        "{\"text\":\"a\",\"timestamp\":500}\n{\"text\":\"b\",\"timestamp\":100}\n",
    );
    let bad = write(
        dir.path(),
        "bad.jsonl",
        "{\"text\":\"a\"}\n{\"input_length\":\"x\"}\n",
    );
    let untimed = write(dir.path(), "untimed.jsonl", "{\"text\":\"a\"}\n");
    let single = write(
        dir.path(),
        "single.jsonl",
        "{\"text\":\"a\"}\n{\"text\":\"b\"}\n",
    );
    let p = |f: &PathBuf| f.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--dataset".into(), p(&empty)], "empty.jsonl: empty"),
        (
            vec!["--dataset".into(), p(&nocol)],
            "no `Request tokens` column",
        ),
        (
            vec!["--dataset".into(), p(&back)],
            "back.jsonl:2: the timestamp goes backwards",
        ),
        (
            vec!["--dataset".into(), p(&bad)],
            "bad.jsonl:2: field `input_length`",
        ),
        (
            vec!["--dataset".into(), p(&untimed), "--replay".into()],
            "has rows without a time",
        ),
        (
            vec![
                "--dataset".into(),
                p(&single),
                "--turns".into(),
                "all".into(),
            ],
            "add --api chat",
        ),
        (
            vec![
                "--dataset".into(),
                p(&single),
                "--turns".into(),
                "all".into(),
                "--api".into(),
                "chat".into(),
            ],
            "has no conversations",
        ),
        (
            vec![
                "--shared-prefix".into(),
                "groups=0,prefix=10,question=2".into(),
            ],
            "--shared-prefix",
        ),
        (
            vec![
                "--dataset".into(),
                p(&single),
                "--dataset-format".into(),
                "parquet".into(),
            ],
            "--dataset-format: unknown value",
        ),
        (
            vec!["--turns".into(), "2".into(), "--api".into(), "chat".into()],
            "--turns: give --dataset FILE",
        ),
    ];
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, stderr) = run(&srv.url, &a);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim().lines().count(),
            1,
            "{args:?}: one line: {stderr}"
        );
    }
    assert!(completions(srv.seen()).is_empty(), "nothing was sent");
}

#[test]
fn candle_conversations_grow_each_turns_prompt_by_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("conv.jsonl");
    let out = infertop()
        .args(["--conversations", "2", "--turns", "3", "-p", "8", "-n", "4"])
        .args(["--headless", "--no-telemetry", "--warmup", "0", "--record"])
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rec = lines(&record);
    let got: Vec<(u64, u64, u64)> = requests(&rec)
        .iter()
        .map(|r| {
            (
                r["origin"]["conversation"].as_u64().unwrap(),
                r["origin"]["turn"].as_u64().unwrap(),
                r["prompt_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    // Turn k's prompt: every earlier turn (8 tokens) and reply (4 tokens), then its own 8.
    assert_eq!(
        got,
        [
            (0, 1, 8),
            (0, 2, 20),
            (0, 3, 32),
            (1, 1, 8),
            (1, 2, 20),
            (1, 3, 32)
        ]
    );
}

#[test]
fn a_reset_reaches_the_server_before_the_first_request_and_the_run_is_cold() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(500);
    let record = dir.path().join("cold.jsonl");
    let (code, _, stderr) = run(
        &srv.url,
        &[
            "--shared-prefix",
            "groups=1,prefix=200,question=4",
            "--requests",
            "3",
            "-n",
            "2",
            "--reset-prefix-cache",
            "--record",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let resets = srv.resets.lock().unwrap().clone();
    let seen = completions(srv.seen());
    assert!(!resets.is_empty());
    assert!(
        resets[0] < seen[0].at,
        "reset {:?} first, then {:?}",
        resets[0],
        seen[0].at
    );
    // The first request after the reset misses; the others hit the prefix it left.
    assert_eq!(seen[0].cached, 0);
    assert!(
        seen[1..].iter().all(|s| s.cached >= 200),
        "{:?}",
        seen.iter().map(|s| s.cached).collect::<Vec<_>>()
    );
    let rec = lines(&record);
    assert_eq!(rec[0]["config"]["reset_prefix_cache"], true);
    assert!(
        rec.iter().any(|l| l["event"] == "prefix_cache_reset"),
        "{rec:?}"
    );
}

#[test]
fn later_turns_of_a_conversation_hit_the_prefix_cache_the_first_turns_miss() {
    let dir = tempfile::tempdir().unwrap();
    let tk = tokenizer(dir.path());
    // 0.5 ms per uncached prompt token.
    let srv = server(500);
    let (code, stdout, stderr) = run(
        &srv.url,
        &[
            "--conversations",
            "4",
            "--turns",
            "3",
            "-p",
            "100",
            "-n",
            "4",
            "--api",
            "chat",
            "--concurrency",
            "2",
            "--tokenizer",
            tk.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let summary: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap();
    let b = &summary["breakdown"];
    println!("TTFT by turn: {}", b["ttft_by_turn"]);
    println!("TTFT by cache: {}", b["ttft_by_cache"]);
    println!(
        "hit share {}, cached token share {}",
        b["hit_share"], b["cached_token_share"]
    );
    let by_cache = b["ttft_by_cache"].as_array().unwrap();
    let get = |o: &str| {
        by_cache
            .iter()
            .find(|e| e[0] == o)
            .map(|e| e[1].clone())
            .unwrap()
    };
    // Every first turn is new to the cache; every later one resends a history it holds.
    assert_eq!(
        (get("miss")["n"].as_u64(), get("hit")["n"].as_u64()),
        (Some(4), Some(8))
    );
    assert!((b["hit_share"].as_f64().unwrap() - 8.0 / 12.0).abs() < 1e-9);
    // A later turn prefills only its new words: its TTFT stays near the first turn's though
    // its prompt has grown to about three times as long.
    let turn = |t: usize| b["ttft_by_turn"][t - 1][1]["p50"].as_f64().unwrap();
    assert!(
        turn(3) < 1.5 * turn(1),
        "turn 1 {} turn 3 {}",
        turn(1),
        turn(3)
    );
}

/// The first request of a trace is measured like the rest: the connections opened before it
/// are the few its first rows can have in flight (not thousands the server is still
/// accepting when it arrives), so its TTFT reads the server's, within 5 ms of the others'.
#[test]
fn the_first_request_of_a_trace_is_measured_like_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let tk = tokenizer(dir.path());
    let rows: String = (0..30)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 16, \"output_length\": 4}}\n",
                i * 100
            )
        })
        .collect();
    let trace = write(dir.path(), "trace.jsonl", &rows);
    let srv = TrafficServer::start(Timing {
        base: Duration::from_millis(50),
        per_token: Duration::ZERO,
        itl: Duration::from_millis(2),
        max_model_len: 4096,
    });
    let record = dir.path().join("run.jsonl");
    let (code, stdout, stderr) = run(
        &srv.url,
        &[
            "--dataset",
            trace.to_str().unwrap(),
            "--replay",
            "--tokenizer",
            tk.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let rec = lines(&record);
    let mut by_row: Vec<(u64, f64)> = requests(&rec)
        .iter()
        .map(|r| {
            (
                r["origin"]["row"].as_u64().unwrap(),
                r["ttft_s"].as_f64().unwrap(),
            )
        })
        .collect();
    by_row.sort_by_key(|r| r.0);
    assert_eq!(by_row.len(), 30);
    let first = by_row[0].1;
    let mut rest: Vec<f64> = by_row[1..].iter().map(|r| r.1).collect();
    rest.sort_by(f64::total_cmp);
    let median = rest[rest.len() / 2];
    println!(
        "first request TTFT {:.2} ms, the others' median {:.2} ms",
        first * 1e3,
        median * 1e3
    );
    assert!(
        (first - median).abs() < 0.005,
        "the first TTFT {:.2} ms against the others' {:.2} ms",
        first * 1e3,
        median * 1e3
    );
}
