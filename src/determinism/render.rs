//! A `--determinism` summary as text: markdown (the verdict, the counts, a row per output
//! that changed, the passes' latency) or JSON (the record's `determinism` line). Formatting
//! only: every figure is the summary's.

use super::{DeterminismSummary, Divergence, Kind};
use crate::util::format::ms;
use crate::util::table::{or_missing, TextTable};

/// Rows of changed outputs the markdown shows; the JSON and the record have them all.
pub const ROWS_SHOWN: usize = 20;

/// The verdict in one line.
pub fn verdict(s: &DeterminismSummary) -> String {
    let loaded = format!("concurrency {}", s.concurrency);
    match s.first_changed() {
        _ if s.compared == 0 => "No output to compare: no prompt has an output from both passes".into(),
        Some(first) => format!(
            "**DIFFERENT**: {} of {} outputs changed at {loaded} ({} in a token, {} in length only); the first at prompt {}, token {}",
            s.changed(),
            s.compared,
            s.differ,
            s.length_only,
            first.index,
            first.at_token
        ),
        None => format!(
            "Same: all {} outputs identical alone and at {loaded}",
            s.compared
        ),
    }
}

/// The summary as markdown.
pub fn markdown(s: &DeterminismSummary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Determinism: {} prompts, alone then {} at once\n\n",
        s.prompts, s.concurrency
    ));
    out.push_str(&format!("{}\n\n", verdict(s)));
    let mut outputs = TextTable::new().left(["outputs"]).right(["n"]);
    outputs.row([
        "compared".into(),
        format!("{} of {}", s.compared, s.prompts),
    ]);
    outputs.row(["identical".into(), s.identical.to_string()]);
    outputs.row(["differ in a token".into(), s.differ.to_string()]);
    outputs.row(["differ in length only".into(), s.length_only.to_string()]);
    if s.not_compared > 0 {
        outputs.row([
            "not compared (failed or not sent)".into(),
            s.not_compared.to_string(),
        ]);
    }
    out.push_str(&outputs.markdown());
    out.push_str(&format!(
        "\nGreedy (temperature 0{}), at most {} tokens of each output compared.\n",
        s.seed.map(|x| format!(", seed {x}")).unwrap_or_default(),
        s.max_output_tokens
    ));
    if s.changed() > 0 && !s.prefix_cache_ruled_out {
        out.push_str(
            "The server's prefix cache was not emptied between the passes: the second may have read the first's prompts from it, which can change an output by itself (`--reset-prefix-cache`; llama.cpp: `--extra-body '{\"cache_prompt\": false}'`).\n",
        );
    }
    if !s.divergences.is_empty() {
        let c = s.concurrency;
        let mut t = TextTable::new()
            .right(["prompt"])
            .left(["differs in"])
            .right(["at token"])
            .left([
                format!("tokens alone / at {c}"),
                "alone".into(),
                format!("at {c}"),
            ]);
        for d in s.divergences.iter().take(ROWS_SHOWN) {
            t.row(row(d));
        }
        out.push('\n');
        out.push_str(&t.markdown());
        if s.divergences.len() > ROWS_SHOWN {
            out.push_str(&format!(
                "\n… and {} more (`--format json`, or the record's `determinism` line, has them all)\n",
                s.divergences.len() - ROWS_SHOWN
            ));
        }
    }
    let mut passes = TextTable::new().left(["pass"]).right([
        "completed",
        "failed",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "E2E p50",
        "E2E p99",
    ]);
    let cell = |v: Option<f64>| or_missing(v.map(ms));
    for p in &s.passes {
        passes.row([
            p.pass.clone(),
            p.completed.to_string(),
            p.failed.to_string(),
            cell(p.ttft_p50_s),
            cell(p.ttft_p99_s),
            cell(p.tpot_p50_s),
            cell(p.e2e_p50_s),
            cell(p.e2e_p99_s),
        ]);
    }
    out.push('\n');
    out.push_str(&passes.markdown());
    out
}

/// A changed output's row: the text both had before the divergence, then each one's.
fn row(d: &Divergence) -> [String; 6] {
    let kind = match d.kind {
        Kind::Tokens => "a token",
        Kind::Length => "length",
    };
    let side = |after: &str| {
        if after.is_empty() {
            format!("`…{}` (ended)", shown(&d.before))
        } else {
            format!("`…{}⟨{}⟩…`", shown(&d.before), shown(after))
        }
    };
    [
        d.index.to_string(),
        kind.to_string(),
        d.at_token.to_string(),
        format!("{} / {}", d.alone_tokens, d.loaded_tokens),
        side(&d.alone),
        side(&d.loaded),
    ]
}

/// Text as it can stand in a markdown table cell inside backticks: control characters escaped
/// (a newline as `\n`), and neither a pipe nor a backtick left to end the cell.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '|' => "¦".to_string(),
            '`' => "'".to_string(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// The summary as one JSON object (and a newline).
pub fn json(s: &DeterminismSummary) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "{}".into()) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::determinism::PassLatency;

    fn summary() -> DeterminismSummary {
        DeterminismSummary {
            prompts: 8,
            concurrency: 4,
            max_output_tokens: 16,
            seed: Some(0),
            prefix_cache_ruled_out: false,
            compared: 8,
            identical: 6,
            differ: 1,
            length_only: 1,
            not_compared: 0,
            divergences: vec![
                Divergence {
                    index: 2,
                    kind: Kind::Tokens,
                    at_token: 5,
                    alone_tokens: 16,
                    loaded_tokens: 16,
                    before: "a | b\n".into(),
                    alone: " c".into(),
                    loaded: " `x`".into(),
                },
                Divergence {
                    index: 5,
                    kind: Kind::Length,
                    at_token: 3,
                    alone_tokens: 16,
                    loaded_tokens: 3,
                    before: "abc".into(),
                    alone: " d".into(),
                    loaded: String::new(),
                },
            ],
            passes: vec![PassLatency {
                pass: "concurrency 1".into(),
                concurrency: 1,
                completed: 8,
                ttft_p50_s: Some(0.0123),
                ..PassLatency::default()
            }],
        }
    }

    #[test]
    fn the_markdown_says_the_verdict_and_where_each_output_parted() {
        let md = markdown(&summary());
        assert!(md.contains("**DIFFERENT**: 2 of 8 outputs changed at concurrency 4 (1 in a token, 1 in length only); the first at prompt 2, token 5"), "{md}");
        assert!(
            md.contains("| 2 | a token | 5 | 16 / 16 | `…a ¦ b\\n⟨ c⟩…` | `…a ¦ b\\n⟨ 'x'⟩…` |"),
            "{md}"
        );
        assert!(
            md.contains("| 5 | length | 3 | 16 / 3 | `…abc⟨ d⟩…` | `…abc` (ended) |"),
            "{md}"
        );
        assert!(
            md.contains("| concurrency 1 | 8 | 0 | 12.300 ms | - |"),
            "{md}"
        );
        assert!(md.contains("prefix cache was not emptied"), "{md}");
        let ruled_out = DeterminismSummary {
            prefix_cache_ruled_out: true,
            ..summary()
        };
        assert!(!markdown(&ruled_out).contains("prefix cache"));
        let same = DeterminismSummary {
            identical: 8,
            differ: 0,
            length_only: 0,
            divergences: Vec::new(),
            ..summary()
        };
        assert!(
            markdown(&same).contains("Same: all 8 outputs identical alone and at concurrency 4")
        );
        let back: DeterminismSummary = serde_json::from_str(&json(&summary())).unwrap();
        assert_eq!(back, summary());
    }
}
