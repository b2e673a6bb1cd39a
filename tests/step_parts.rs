//! `--step-parts N`: one prefill and one decode step in N of the candle engine timed in parts
//! from the model's own tracing spans, printed, kept in the record and read back by `report`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn infertop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertop"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lines(record: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == kind)
        .collect()
}

/// The markdown table under the step parts' heading.
fn parts_table(text: &str) -> String {
    let from = text
        .find("where a step's time goes")
        .unwrap_or_else(|| panic!("no step parts in:\n{text}"));
    text[from..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n")
}

const PARTS: [&str; 7] = [
    "input_s",
    "embedding_s",
    "attention_s",
    "mlp_s",
    "head_s",
    "rest_s",
    "sample_s",
];

#[test]
fn one_step_in_n_is_timed_in_parts_that_add_up_to_the_steps_own_time() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.jsonl");
    // 5 requests of 8 tokens (7 decode steps each), the first warmup; every second step.
    let out = infertop(&[
        "--model",
        "synthetic:tiny",
        "--headless",
        "--requests",
        "5",
        "--warmup",
        "1",
        "-p",
        "16",
        "-n",
        "8",
        "--step-parts",
        "2",
        "--jsonl-steps",
        "--format",
        "json",
        "--record",
        rec.to_str().unwrap(),
    ]);
    let stdout = ok(&out);
    let parts = lines(&rec, "step_parts");
    // Prefills 0, 2, 4 and decode steps 0, 2, …, 34 of the 35 (counted across requests).
    let prefills: Vec<&Value> = parts.iter().filter(|p| p["step"] == 0).collect();
    let decodes: Vec<&Value> = parts.iter().filter(|p| p["step"] != 0).collect();
    assert_eq!(prefills.len(), 3, "{parts:?}");
    assert_eq!(decodes.len(), 18, "{parts:?}");
    let steps = lines(&rec, "step");
    let requests = lines(&rec, "request");
    for p in &parts {
        let wall = p["wall_s"].as_f64().unwrap();
        let sum: f64 = PARTS.iter().filter_map(|k| p[*k].as_f64()).sum();
        assert!((sum - wall).abs() < 1e-9, "parts {sum} vs step {wall}: {p}");
        assert!(p["attention_s"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["mlp_s"].as_f64().unwrap() > 0.0, "{p}");
        // The same timed region as the step's ITL, or the request's TTFT.
        let (index, step) = (&p["index"], &p["step"]);
        let own = if *step == 0 {
            requests.iter().find(|r| r["index"] == *index).unwrap()["ttft_s"].clone()
        } else {
            steps
                .iter()
                .find(|s| s["index"] == *index && s["step"] == *step)
                .unwrap()["itl_s"]
                .clone()
        };
        assert_eq!(own.as_f64().unwrap(), wall, "{p}");
        assert_eq!(p["warmup"], *index == 0, "{p}");
    }

    // The summary: steady steps only (request 0 is warmup: prefill 0, decode steps 0..6).
    let summary: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("step_parts").is_some())
        .unwrap_or_else(|| panic!("no summary with step_parts:\n{stdout}"));
    let sp = &summary["step_parts"];
    assert_eq!(sp["prefill"]["n"], 2, "{sp}");
    assert_eq!(sp["decode"]["n"], 14, "{sp}");
    assert_eq!(sp["decode"]["tokens"], 1.0, "{sp}");
    assert_eq!(sp["prefill"]["tokens"], 16.0, "{sp}");
    // Each part by its key, the parts adding up to the mean step.
    let parts = sp["decode"]["parts_s"].as_object().unwrap();
    let sum: f64 = [
        "input",
        "embedding",
        "attention",
        "mlp",
        "head",
        "rest",
        "sample",
    ]
    .iter()
    .map(|k| parts[*k].as_f64().unwrap_or(0.0))
    .sum();
    let wall = sp["decode"]["wall_s"].as_f64().unwrap();
    assert!((sum - wall).abs() <= 1e-9 * wall.max(1.0), "{sp}");
    assert!(parts["mlp"].as_f64().unwrap() > 0.0, "{sp}");

    // `report` folds the record's lines to the same table as the run's own summary.
    let report = ok(&infertop(&["report", rec.to_str().unwrap()]));
    let table = parts_table(&report);
    assert!(table.contains("prefill (n=2, 16 tok)"), "{table}");
    assert!(table.contains("decode (n=14, 1 tok)"), "{table}");
    let printed = ok(&infertop(&[
        "--model",
        "synthetic:tiny",
        "--headless",
        "--requests",
        "3",
        "-n",
        "4",
        "--step-parts",
        "1",
    ]));
    let printed = parts_table(&printed);
    for row in [
        "| attention |",
        "| mlp |",
        "| sample + copy + sync |",
        "| step |",
    ] {
        assert!(printed.contains(row), "{printed}");
    }
}

/// Runs `model` headless with every step timed in parts (`requests` requests, the first a
/// warmup, prompt `p`, output `n`) recorded to `rec`, and returns the record's `step_parts`
/// lines: one per prefill and decode step, each with its attention, MLP and LM head timed.
fn every_step_in_parts(model: &Path, requests: u64, p: u64, n: u64, rec: &Path) -> Vec<Value> {
    let steps = requests * n;
    let (requests, p, n) = (requests.to_string(), p.to_string(), n.to_string());
    ok(&infertop(&[
        "--model",
        model.to_str().unwrap(),
        "--headless",
        "--requests",
        &requests,
        "--warmup",
        "1",
        "-p",
        &p,
        "-n",
        &n,
        "--step-parts",
        "1",
        "--record",
        rec.to_str().unwrap(),
    ]));
    let parts = lines(rec, "step_parts");
    let what = model.display();
    assert_eq!(
        parts.len() as u64,
        steps,
        "{what}: every prefill and decode step: {parts:?}"
    );
    for part in &parts {
        for k in ["attention_s", "mlp_s", "head_s"] {
            assert!(
                part[k].as_f64().is_some_and(|s| s > 0.0),
                "{what}: {k}: {part}"
            );
        }
    }
    parts
}

#[test]
fn a_quantized_model_shows_its_attention_mlp_and_head_apart() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("m.gguf");
    ok(&infertop(&[
        "make-model",
        "--preset",
        "tiny",
        "--arch",
        "qwen2",
        "--gguf",
        "--gguf-type",
        "q8_0",
        gguf.to_str().unwrap(),
    ]));
    let rec = dir.path().join("r.jsonl");
    let parts = every_step_in_parts(&gguf, 3, 32, 6, &rec);
    for p in &parts {
        // candle's quantized qwen2 traces no embedding span: its time is in the rest.
        assert!(p.get("embedding_s").is_none(), "{p}");
    }
    let header = &lines(&rec, "header")[0];
    assert_eq!(header["config"]["step_parts"], 1, "{header}");
    let report = ok(&infertop(&["report", rec.to_str().unwrap()]));
    let table = parts_table(&report);
    assert!(table.contains("| embedding | - | - | - | - |"), "{table}");
    assert!(table.contains("| lm head |"), "{table}");

    // The roofline: the record keeps the peaks the run probed before the load and the
    // model's part weights, and `report` reads each part against them.
    let started = lines(&rec, "event")
        .into_iter()
        .find(|l| l["event"] == "run_started")
        .unwrap();
    assert!(
        started["peak"]["bandwidth"].as_f64().unwrap() > 1e8,
        "{started}"
    );
    let weights = &started["model"]["parts"];
    let mlp_bytes = weights["mlp"]["bytes"].as_u64().unwrap();
    assert!(mlp_bytes > 0, "{weights}");
    let roof = report
        .split("the parts against the roofline")
        .nth(1)
        .unwrap_or_else(|| panic!("{report}"));
    for part in ["| attention |", "| mlp |", "| lm head |"] {
        let row = roof
            .lines()
            .find(|l| l.starts_with(part))
            .unwrap_or_else(|| panic!("{part}: {roof}"));
        // Which roof bounds a part depends on this machine's ridge (about 2 FLOPs per
        // byte of Q8_0 weights against its FLOP/s over bandwidth); that one does is not.
        assert!(row.contains("of peak ("), "{row}");
    }
    let json: Value = ok(&infertop(&[
        "report",
        rec.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .parse()
    .unwrap();
    let decode = &json["step_parts"]["decode"];
    assert_eq!(
        decode["bytes"]["mlp"].as_f64(),
        Some(mlp_bytes as f64),
        "{decode}"
    );
}

/// Every architecture's attention, MLP and head show apart: from candle's spans (Llama), our
/// own Gemma's, or the norms around them where candle-transformers' dense model enters no
/// span of its own (Qwen2, Qwen3 with its query and key norms, Mistral, Phi-3, the MoEs).
#[test]
fn every_architecture_shows_its_attention_mlp_and_head() {
    let dir = tempfile::tempdir().unwrap();
    for arch in [
        "gemma3",
        "llama",
        "qwen2",
        "qwen3",
        "mistral",
        "phi3",
        "mixtral",
        "qwen3_moe",
    ] {
        let model = dir.path().join(arch);
        ok(&infertop(&[
            "make-model",
            "--preset",
            "tiny",
            "--arch",
            arch,
            model.to_str().unwrap(),
        ]));
        let rec = dir.path().join(format!("{arch}.jsonl"));
        let parts = every_step_in_parts(&model, 2, 16, 4, &rec);
        for p in &parts {
            // The parts lie inside the forward, and with the rest add up to the step.
            let sum: f64 = PARTS.iter().filter_map(|k| p[*k].as_f64()).sum();
            let wall = p["wall_s"].as_f64().unwrap();
            assert!(
                (sum - wall).abs() < 1e-9,
                "{arch}: parts {sum}, step {wall}: {p}"
            );
        }
        if arch == "gemma3" {
            // Ours traces its embedding too.
            assert!(parts.iter().all(|p| p["embedding_s"].as_f64().is_some()));
        }
    }
}

#[test]
fn step_parts_is_refused_where_it_cannot_time_the_forward() {
    let out = infertop(&[
        "--endpoint",
        "http://127.0.0.1:9",
        "--headless",
        "--step-parts",
        "4",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--step-parts"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let out = infertop(&["--headless", "--step-parts", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--step-parts"), "{err}");
}

/// `compare` of two `--step-parts` records: each part of the prefill and of a decode step side
/// by side with n and the median's verdict; a record without sampled steps gets no such table.
#[test]
fn compare_sets_the_parts_of_two_runs_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, parts: bool| {
        let rec = dir.path().join(name);
        let mut args = vec![
            "--model",
            "synthetic:tiny",
            "--headless",
            "--requests",
            "4",
            "--warmup",
            "1",
            "-p",
            "16",
            "-n",
            "6",
            "--record",
            rec.to_str().unwrap(),
        ];
        if parts {
            args.extend(["--step-parts", "1"]);
        }
        ok(&infertop(&args));
        rec
    };
    let (a, b, plain) = (
        run("a.jsonl", true),
        run("b.jsonl", true),
        run("c.jsonl", false),
    );
    let text = ok(&infertop(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]));
    let from = text
        .find("### Where a step's time goes")
        .unwrap_or_else(|| panic!("{text}"));
    let table = &text[from..];
    // 3 steady requests: 3 prefills and 15 decode steps on each side.
    for row in ["| prefill attention |", "| decode mlp |", "| decode step |"] {
        let line = table
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row}: {table}"));
        let n = if row.contains("prefill") {
            "3 / 3"
        } else {
            "15 / 15"
        };
        assert!(line.contains(n), "{line}");
    }
    let json: Value = serde_json::from_str(&ok(&infertop(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
    ])))
    .unwrap();
    let figures = json["pairs"][0]["step_parts"].as_array().unwrap();
    assert!(
        figures.iter().any(|f| f["figure"] == "decode_attention_s"),
        "{json}"
    );
    let text = ok(&infertop(&[
        "compare",
        a.to_str().unwrap(),
        plain.to_str().unwrap(),
    ]));
    assert!(!text.contains("Where a step's time goes"), "{text}");
}
