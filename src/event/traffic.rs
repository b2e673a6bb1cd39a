//! What a run's traffic is, as the record keeps it: the dataset, the trace, conversations,
//! shared prefixes.

use serde::{Deserialize, Serialize};

/// What the record keeps of the file: enough to know two runs replayed the same traffic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// The file's name (not its directory).
    pub file: String,
    /// The format read (`auto` resolved).
    pub format: String,
    pub bytes: u64,
    pub sha256: String,
    /// Rows read (kept), before any selection.
    pub rows: u64,
    /// Rows left out, by reason (`malformed`, `filtered out`, `no prompt`, `response tokens 0`,
    /// and at selection `too long for the model`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// Whether every row has a time (a trace that `--replay` can send at its timestamps).
    pub timed: bool,
    /// `--dataset-filter` as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// What a run's traffic is beyond made-up lengths: the dataset, the trace, conversations,
/// shared prefixes, and what can be said of the server's cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetInfo>,
    /// Requests (or conversations) the run sends, when bounded by the traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// `--replay`: the trace's span (seconds) and `--time-scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_span_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
    /// Tokens per hash id (`--block-size`), when rows have hash ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<usize>,
    /// Conversations and the turns sent of each (`all` or N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<String>,
    /// `--shared-prefix` as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<String>,
    /// Whether prompt lengths are counted exactly (a tokenizer) or estimated.
    #[serde(default)]
    pub exact_lengths: bool,
    /// What can be said of a prefix cache: `none` for the candle engine (it has none), else
    /// what the server reports per request (`cached_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
}

impl TrafficInfo {
    /// The traffic in one line: `dataset rows.jsonl (mooncake, 1,200 rows, sha256 1a2b3c4d…);
    /// replayed ×2; 3 rows skipped (malformed)`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(d) = &self.dataset {
            let sha: String = d.sha256.chars().take(12).collect();
            let mut s = format!(
                "dataset {} ({}, {} rows, sha256 {sha}…",
                d.file, d.format, d.rows
            );
            if let Some(f) = &d.filter {
                s.push_str(&format!(", filter {f}"));
            }
            s.push(')');
            parts.push(s);
            let skipped: Vec<String> = d.skipped.iter().map(|(r, n)| format!("{n} {r}")).collect();
            if !skipped.is_empty() {
                parts.push(format!("rows skipped: {}", skipped.join(", ")));
            }
        }
        if let Some(scale) = self.time_scale {
            parts.push(format!("replayed at its timestamps, time scale {scale}"));
        }
        if let Some(n) = self.conversations {
            let turns = self.turns.as_deref().unwrap_or("all");
            parts.push(format!("{n} conversations, turns {turns}"));
        }
        if let Some(sp) = &self.shared_prefix {
            parts.push(format!("shared prefix {sp}"));
        }
        parts.push(if self.exact_lengths {
            "lengths exact".to_string()
        } else {
            "lengths estimated (no tokenizer)".to_string()
        });
        if let Some(c) = &self.cache {
            parts.push(format!("cache: {c}"));
        }
        parts.join("; ")
    }

    /// What makes two runs' traffic different (the dataset's content, its filter, the shared
    /// prefix, the conversations' turns, the replay's scale), as `what: a → b` lines.
    pub fn differences(a: Option<&TrafficInfo>, b: Option<&TrafficInfo>) -> Vec<String> {
        let key = |t: Option<&TrafficInfo>| {
            let t = t.cloned().unwrap_or_default();
            [
                (
                    "dataset",
                    t.dataset.as_ref().map(|d| {
                        format!(
                            "{} (sha256 {})",
                            d.file,
                            d.sha256.chars().take(12).collect::<String>()
                        )
                    }),
                ),
                (
                    "dataset filter",
                    t.dataset.as_ref().and_then(|d| d.filter.clone()),
                ),
                ("shared prefix", t.shared_prefix.clone()),
                ("turns", t.turns.clone()),
                ("time scale", t.time_scale.map(|s| s.to_string())),
            ]
        };
        key(a)
            .into_iter()
            .zip(key(b))
            .filter(|((_, x), (_, y))| x != y)
            .map(|((what, x), (_, y))| {
                let show = |v: Option<String>| v.unwrap_or_else(|| "none".into());
                format!("{what}: {} → {}", show(x), show(y))
            })
            .collect()
    }
}
