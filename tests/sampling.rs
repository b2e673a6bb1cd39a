//! `--sampling`: host-side sampling, seeded and reproducible, said in the record's header.
#![allow(clippy::unwrap_used)]

use std::path::Path;

/// The output hashes of a short headless run's requests, and the record it wrote.
fn run(extra: &[&str], record: &Path) -> (Vec<String>, serde_json::Value) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_infertop"))
        .args(["--model", "synthetic:tiny", "--headless", "--requests", "3"])
        .args(["-p", "16", "-n", "12", "--warmup", "0", "--record"])
        .arg(record)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hashes = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "request")
        .map(|v| v["output_hash"].as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    assert_eq!(hashes.len(), 3);
    let text = std::fs::read_to_string(record).unwrap();
    let header = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    (hashes, header)
}

#[test]
fn the_same_seed_gives_the_same_ids_and_the_record_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.jsonl");
    let spec = "temperature=1.5,top_k=50,seed=9";
    let (a, header) = run(&["--sampling", spec], &rec);
    let (b, _) = run(&["--sampling", spec], &rec);
    assert_eq!(a, b, "same seed, same ids");
    assert_eq!(
        header["config"]["sampling"], "temperature=1.5,top_p=1,top_k=50,seed=9",
        "{header}"
    );
    let (c, _) = run(&["--sampling", "temperature=1.5,top_k=50,seed=10"], &rec);
    assert_ne!(a, c, "another seed, other ids");
    let (greedy, header) = run(&[], &rec);
    assert_ne!(a, greedy, "sampling is not greedy");
    assert!(
        header["config"].get("sampling").is_none(),
        "greedy: {header}"
    );
    // Greedy stays deterministic run to run.
    assert_eq!(greedy, run(&[], &rec).0);
}
