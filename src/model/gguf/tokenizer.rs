//! The tokenizer a GGUF file carries in its `tokenizer.ggml.*` metadata, as llama.cpp reads it:
//! built into a `tokenizers::Tokenizer` (so `--model file.gguf --prompt "..."` needs no
//! tokenizer.json), and the same metadata written for a trained byte-level BPE (so the GGUFs
//! `make-model --gguf` writes are complete files that llama.cpp loads).
//!
//! Two vocabularies are understood:
//! - `gpt2`: byte-level BPE with `tokenizer.ggml.merges`; the pre-tokenizer regex is chosen by
//!   `tokenizer.ggml.pre` (gpt-2, llama-bpe, qwen2 and their aliases).
//! - `llama`: SentencePiece with `tokenizer.ggml.scores`; a merge's rank is the score of the piece
//!   it makes (highest first), with byte fallback through the `<0xNN>` pieces.
//!
//! The tokenizer is assembled as tokenizer.json text and parsed by the tokenizers crate, so the
//! encoding itself is that crate's, not a second implementation.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::str::FromStr;

use candle_core::quantized::gguf_file::Value;
use serde_json::{json, Value as Json};
use tokenizers::Tokenizer;

use crate::model::ModelError;
use crate::util::one_line;

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const BYTE: i32 = 6;

/// GPT-2's pre-tokenizer split (the ByteLevel pre-tokenizer's own regex).
const GPT2_PRE: &[&str] = &["gpt-2", "gpt2", "default", "phi-2", "jina-es", "jina-de"];
/// Llama 3's split: digits in groups of up to three.
const LLAMA3_PRE: &[&str] = &["llama-bpe", "llama3", "llama-v3", "smaug-bpe", "dbrx"];
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split: Llama 3's with single digits.
const QWEN2_PRE: &[&str] = &["qwen2", "deepseek-r1-qwen"];
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// What to do when a GGUF's tokenizer cannot be used.
const HINT: &str = "pass the model's tokenizer.json with --tokenizer";

/// Builds the tokenizer from a GGUF file's metadata.
pub fn from_metadata(md: &HashMap<String, Value>, path: &Path) -> Result<Tokenizer, ModelError> {
    let bad = |what: String| {
        ModelError::new(format!(
            "{}: GGUF tokenizer metadata {what}; {HINT}",
            path.display()
        ))
    };
    let model = match md.get("tokenizer.ggml.model") {
        None => return Err(bad("is missing (no `tokenizer.ggml.model`)".into())),
        Some(v) => v
            .to_string()
            .map_err(|_| bad("`tokenizer.ggml.model` is not a string".into()))?
            .clone(),
    };
    let tokens = string_array(md, "tokenizer.ggml.tokens").map_err(bad)?;
    if tokens.is_empty() {
        return Err(bad("`tokenizer.ggml.tokens` is empty".into()));
    }
    let types = match md.get("tokenizer.ggml.token_type") {
        None => vec![NORMAL; tokens.len()],
        Some(_) => int_array(md, "tokenizer.ggml.token_type").map_err(bad)?,
    };
    if types.len() != tokens.len() {
        return Err(bad(format!(
            "has {} token types for {} tokens",
            types.len(),
            tokens.len()
        )));
    }
    let vocab = Vocab { tokens, types };
    let json = match model.as_str() {
        "gpt2" => {
            let merges = string_array(md, "tokenizer.ggml.merges").map_err(bad)?;
            let pre = match md.get("tokenizer.ggml.pre") {
                Some(v) => v
                    .to_string()
                    .map_err(|_| bad("`tokenizer.ggml.pre` is not a string".into()))?
                    .clone(),
                None => "default".to_string(),
            };
            let pre_tokenizer = byte_level_pre(&pre).ok_or_else(|| {
                bad(format!(
                    "names pre-tokenizer `{pre}`, which infertop does not know (known: gpt-2, llama-bpe, qwen2)"
                ))
            })?;
            bpe_json(&vocab, &merges, pre_tokenizer).map_err(bad)?
        }
        "llama" => {
            let scores = float_array(md, "tokenizer.ggml.scores").map_err(bad)?;
            if scores.len() != vocab.tokens.len() {
                return Err(bad(format!(
                    "has {} scores for {} tokens",
                    scores.len(),
                    vocab.tokens.len()
                )));
            }
            let space_prefix = match md.get("tokenizer.ggml.add_space_prefix") {
                Some(v) => v
                    .to_bool()
                    .map_err(|_| bad("`tokenizer.ggml.add_space_prefix` is not a bool".into()))?,
                None => true,
            };
            spm_json(&vocab, &scores, space_prefix)
        }
        other => {
            return Err(bad(format!(
            "has vocabulary type `{other}`, which infertop does not read (it reads gpt2 and llama)"
        )))
        }
    };
    Tokenizer::from_str(&json.to_string()).map_err(|e| {
        bad(format!(
            "does not make a valid tokenizer ({})",
            one_line(&e.to_string())
        ))
    })
}

/// The `tokenizer.ggml.*` metadata of a byte-level BPE tokenizer (as `train_bpe` makes), for a
/// model whose embedding has `vocab_size` rows: llama.cpp requires one piece per embedding row,
/// so ids past the tokenizer's are written as `[PADn]` pieces. They are normal pieces (no merge
/// makes them, so encoding never produces them) so that a random model which generates them
/// still streams visible text from a server.
pub fn metadata_for(tk: &Tokenizer, vocab_size: usize) -> Result<Vec<(String, Value)>, ModelError> {
    let err = |what: &str| ModelError::new(format!("writing GGUF tokenizer metadata: {what}"));
    let json: Json = serde_json::from_str(&tk.to_string(false).map_err(|e| err(&e.to_string()))?)
        .map_err(|e| err(&e.to_string()))?;
    let model = &json["model"];
    if model["type"] != "BPE" {
        return Err(err("the tokenizer is not a BPE"));
    }
    let mut by_id = BTreeMap::new();
    for (piece, id) in model["vocab"].as_object().ok_or_else(|| err("no vocab"))? {
        let id = id
            .as_u64()
            .ok_or_else(|| err("a vocab id is not a number"))? as usize;
        by_id.insert(id, piece.clone());
    }
    let specials: Vec<usize> = json["added_tokens"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|t| t["special"] == true)
                .filter_map(|t| t["id"].as_u64())
                .map(|id| id as usize)
                .collect()
        })
        .unwrap_or_default();
    if by_id.len() > vocab_size {
        return Err(err(&format!(
            "the tokenizer has {} pieces for an embedding of {vocab_size} rows",
            by_id.len()
        )));
    }
    let mut tokens = Vec::with_capacity(vocab_size);
    let mut types = Vec::with_capacity(vocab_size);
    for id in 0..vocab_size {
        match by_id.get(&id) {
            Some(piece) => {
                tokens.push(Value::String(piece.clone()));
                let t = if specials.contains(&id) {
                    CONTROL
                } else {
                    NORMAL
                };
                types.push(Value::I32(t));
            }
            None => {
                tokens.push(Value::String(format!("[PAD{id}]")));
                types.push(Value::I32(NORMAL));
            }
        }
    }
    let merges = model["merges"]
        .as_array()
        .ok_or_else(|| err("no merges"))?
        .iter()
        .map(|m| match m {
            // Newer tokenizer.json writes a merge as a pair, older as "a b".
            Json::Array(pair) => match (pair.first(), pair.get(1)) {
                (Some(Json::String(a)), Some(Json::String(b))) => Ok(format!("{a} {b}")),
                _ => Err(err("a merge is not a pair of strings")),
            },
            Json::String(s) => Ok(s.clone()),
            _ => Err(err("a merge is not a string")),
        })
        .map(|m| m.map(Value::String))
        .collect::<Result<Vec<_>, _>>()?;
    let special_id = |piece: &str| {
        by_id
            .iter()
            .find(|(_, p)| p.as_str() == piece)
            .map(|(id, _)| Value::U32(*id as u32))
    };
    let mut md = vec![
        (
            "tokenizer.ggml.model".to_string(),
            Value::String("gpt2".into()),
        ),
        (
            "tokenizer.ggml.pre".to_string(),
            Value::String("gpt-2".into()),
        ),
        ("tokenizer.ggml.tokens".to_string(), Value::Array(tokens)),
        ("tokenizer.ggml.token_type".to_string(), Value::Array(types)),
        ("tokenizer.ggml.merges".to_string(), Value::Array(merges)),
        (
            "tokenizer.ggml.add_bos_token".to_string(),
            Value::Bool(false),
        ),
        (
            "tokenizer.ggml.add_eos_token".to_string(),
            Value::Bool(false),
        ),
    ];
    md.push((
        "tokenizer.chat_template".to_string(),
        Value::String(crate::model::tokenizer::CHAT_TEMPLATE.into()),
    ));
    for (key, piece) in [
        ("tokenizer.ggml.unknown_token_id", "<unk>"),
        ("tokenizer.ggml.bos_token_id", "<s>"),
        ("tokenizer.ggml.eos_token_id", "</s>"),
    ] {
        if let Some(id) = special_id(piece) {
            md.push((key.to_string(), id));
        }
    }
    Ok(md)
}

struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
}

impl Vocab {
    /// Piece → id; a piece listed twice keeps its first id (as llama.cpp's lookup does).
    fn ids(&self) -> serde_json::Map<String, Json> {
        let mut ids = serde_json::Map::new();
        for (id, piece) in self.tokens.iter().enumerate() {
            if !ids.contains_key(piece) {
                ids.insert(piece.clone(), json!(id));
            }
        }
        ids
    }

    /// Control and user-defined pieces are matched whole in the text, before the model runs.
    fn added_tokens(&self) -> Vec<Json> {
        self.tokens
            .iter()
            .zip(&self.types)
            .enumerate()
            .filter(|(_, (_, t))| matches!(**t, CONTROL | USER_DEFINED | UNKNOWN))
            .map(|(id, (piece, t))| {
                json!({
                    "id": id, "content": piece, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": *t != USER_DEFINED,
                })
            })
            .collect()
    }
}

fn byte_level_pre(pre: &str) -> Option<Json> {
    let split = |regex: &str| {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
        ]})
    };
    if GPT2_PRE.contains(&pre) {
        Some(
            json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}),
        )
    } else if LLAMA3_PRE.contains(&pre) {
        Some(split(LLAMA3_REGEX))
    } else if QWEN2_PRE.contains(&pre) {
        Some(split(QWEN2_REGEX))
    } else {
        None
    }
}

fn bpe_json(vocab: &Vocab, merges: &[String], pre_tokenizer: Json) -> Result<Json, String> {
    let merges = merges
        .iter()
        .enumerate()
        .map(|(i, m)| match m.split_once(' ') {
            Some((a, b)) => Ok(json!([a, b])),
            None => Err(format!(
                "merge {i} `{m}` is not two pieces separated by a space"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": vocab.added_tokens(),
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab.ids(), "merges": merges,
        },
    }))
}

/// SentencePiece as llama.cpp runs it: repeatedly merge the adjacent pair whose joined piece has
/// the highest score. As a BPE, every split of a normal piece into two known pieces is a merge
/// ranked by the joined piece's score; text no piece covers falls back to `<0xNN>` bytes.
fn spm_json(vocab: &Vocab, scores: &[f32], space_prefix: bool) -> Json {
    let ids = vocab.ids();
    let mut merges: Vec<(f32, u64, u64, &str, &str)> = Vec::new();
    for (piece, (&t, &score)) in vocab.tokens.iter().zip(vocab.types.iter().zip(scores)) {
        if t != NORMAL {
            continue;
        }
        for (i, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(i);
            if let (Some(li), Some(ri)) = (ids.get(l), ids.get(r)) {
                let (li, ri) = (li.as_u64().unwrap_or(0), ri.as_u64().unwrap_or(0));
                merges.push((score, li, ri, l, r));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let merges: Vec<Json> = merges.iter().map(|m| json!([m.3, m.4])).collect();
    let unk = vocab
        .types
        .iter()
        .position(|&t| t == UNKNOWN)
        .map(|id| json!(vocab.tokens[id]))
        .unwrap_or(Json::Null);
    let has_bytes = vocab.types.contains(&BYTE);
    let mut normalizers = Vec::new();
    if space_prefix {
        normalizers.push(json!({"type": "Prepend", "prepend": "▁"}));
    }
    normalizers.push(json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}));
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "▁"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if space_prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": vocab.added_tokens(),
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": has_bytes,
            "ignore_merges": false, "vocab": ids, "merges": merges,
        },
    })
}

fn array<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<&'a Vec<Value>, String> {
    md.get(key)
        .ok_or_else(|| format!("has no `{key}`"))?
        .to_vec()
        .map_err(|_| format!("`{key}` is not an array"))
}

fn string_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<String>, String> {
    array(md, key)?
        .iter()
        .map(|v| v.to_string().cloned())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("`{key}` is not an array of strings"))
}

fn int_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<i32>, String> {
    array(md, key)?
        .iter()
        .map(|v| match v {
            Value::I32(x) => Some(*x),
            Value::U32(x) => i32::try_from(*x).ok(),
            Value::I8(x) => Some(i32::from(*x)),
            Value::U8(x) => Some(i32::from(*x)),
            Value::I16(x) => Some(i32::from(*x)),
            Value::U16(x) => Some(i32::from(*x)),
            _ => None,
        })
        .collect::<Option<_>>()
        .ok_or_else(|| format!("`{key}` is not an array of integers"))
}

fn float_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<f32>, String> {
    array(md, key)?
        .iter()
        .map(|v| match v {
            Value::F32(x) => Some(*x),
            Value::F64(x) => Some(*x as f32),
            _ => None,
        })
        .collect::<Option<_>>()
        .ok_or_else(|| format!("`{key}` is not an array of numbers"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn md(entries: Vec<(&str, Value)>) -> HashMap<String, Value> {
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn strings(v: &[&str]) -> Value {
        Value::Array(v.iter().map(|s| Value::String(s.to_string())).collect())
    }

    #[test]
    fn trained_bpe_round_trips_through_gguf_metadata() {
        let trained = crate::model::tokenizer::train_bpe(1024).unwrap();
        let written = metadata_for(&trained, 1100).unwrap();
        let map: HashMap<String, Value> = written.into_iter().collect();
        assert_eq!(map["tokenizer.ggml.tokens"].to_vec().unwrap().len(), 1100);
        let read = from_metadata(&map, Path::new("m.gguf")).unwrap();
        for text in crate::model::tokenizer::CORPUS.lines().take(200).chain([
            "Tell me about rivers, 1234 times!\n  indented\ttabs",
            "ünïcödé and emoji 🦀 <s> inside",
        ]) {
            let a = trained.encode(text, false).unwrap();
            let b = read.encode(text, false).unwrap();
            assert_eq!(a.get_ids(), b.get_ids(), "{text:?}");
            assert_eq!(read.decode(b.get_ids(), false).unwrap(), text);
        }
    }

    /// A tiny SentencePiece vocabulary: merges follow the joined piece's score, unknown text
    /// falls back to bytes, and the decoder undoes the space prefix.
    #[test]
    fn sentencepiece_merges_by_score_and_falls_back_to_bytes() {
        let mut tokens = vec!["<unk>", "<s>", "</s>"];
        let mut types = vec![UNKNOWN, CONTROL, CONTROL];
        let bytes: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
        tokens.extend(bytes.iter().map(String::as_str));
        types.extend([BYTE; 256]);
        let pieces = [
            ("▁", -1.0),
            ("h", -2.0),
            ("e", -2.0),
            ("l", -2.0),
            ("o", -2.0),
            ("w", -2.0),
            ("ll", -3.0),
            ("▁h", -4.0),
            ("▁he", -5.0),
            ("llo", -6.0),
            ("▁hello", -7.0),
            ("he", -8.0),
        ];
        let first = tokens.len();
        let mut scores = vec![0.0f32; first];
        for (p, s) in pieces {
            tokens.push(p);
            types.push(NORMAL);
            scores.push(s);
        }
        let id = |p: &str| tokens.iter().position(|t| *t == p).unwrap() as u32;
        let map = md(vec![
            ("tokenizer.ggml.model", Value::String("llama".into())),
            ("tokenizer.ggml.tokens", strings(&tokens)),
            (
                "tokenizer.ggml.token_type",
                Value::Array(types.iter().map(|t| Value::I32(*t)).collect()),
            ),
            (
                "tokenizer.ggml.scores",
                Value::Array(scores.iter().map(|s| Value::F32(*s)).collect()),
            ),
        ]);
        let tk = from_metadata(&map, Path::new("spm.gguf")).unwrap();
        let enc = tk.encode("hello", false).unwrap();
        assert_eq!(enc.get_ids(), &[id("▁hello")]);
        // "wh": `w` and `h` are pieces, but no piece joins them; `é` is two UTF-8 bytes.
        let enc = tk.encode("hello wé", false).unwrap();
        assert_eq!(
            enc.get_ids(),
            &[id("▁hello"), id("▁"), id("w"), id("<0xC3>"), id("<0xA9>")]
        );
        assert_eq!(tk.decode(enc.get_ids(), false).unwrap(), "hello wé");
        // A control piece in the text is matched whole.
        let enc = tk.encode("<s>hello", false).unwrap();
        assert_eq!(enc.get_ids()[0], id("<s>"));
    }

    #[test]
    fn missing_or_malformed_metadata_names_the_key_and_the_way_out() {
        let err = from_metadata(&md(vec![]), Path::new("x.gguf"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("x.gguf") && err.contains("tokenizer.ggml.model"),
            "{err}"
        );
        assert!(err.contains("--tokenizer"), "{err}");
        let err = from_metadata(
            &md(vec![
                ("tokenizer.ggml.model", Value::String("gpt2".into())),
                ("tokenizer.ggml.tokens", strings(&["a", "b"])),
                ("tokenizer.ggml.merges", Value::U32(3)),
            ]),
            Path::new("x.gguf"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`tokenizer.ggml.merges` is not an array"),
            "{err}"
        );
        let err = from_metadata(
            &md(vec![
                ("tokenizer.ggml.model", Value::String("gpt2".into())),
                ("tokenizer.ggml.pre", Value::String("tekken".into())),
                ("tokenizer.ggml.tokens", strings(&["a", "b"])),
                ("tokenizer.ggml.merges", strings(&["a b"])),
            ]),
            Path::new("x.gguf"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`tekken`"), "{err}");
        let err = from_metadata(
            &md(vec![
                ("tokenizer.ggml.model", Value::String("rwkv".into())),
                ("tokenizer.ggml.tokens", strings(&["a"])),
            ]),
            Path::new("x.gguf"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("`rwkv`"), "{err}");
    }
}
