//! Prompts for a run: the model's tokenizer, `--prompt` text and `--prompt-file` lines.

use std::path::Path;

use super::opts::WorkloadOpts;
use crate::engine::workload::PromptSource;
use crate::exit::Failure;
use crate::model::{self, ModelSpec};

/// Where the run's prompt ids come from: tokenized text when given, random ids otherwise.
pub(super) fn prompt_source(
    args: &WorkloadOpts,
    tokenizer: Option<&tokenizers::Tokenizer>,
) -> Result<PromptSource, Failure> {
    let needs =
        |flag: &str| tokenizer.ok_or_else(|| Failure::usage(format!("{flag}: no tokenizer")));
    if let Some(text) = &args.prompt {
        let ids = encode(needs("--prompt")?, text, "--prompt")?;
        return Ok(PromptSource::Text(vec![ids]));
    }
    if let Some(file) = &args.prompt_file {
        let tk = needs("--prompt-file")?;
        let what = format!("--prompt-file {}", file.display());
        let prompts = read_prompt_file(file)?
            .iter()
            .map(|line| encode(tk, line, &what))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(PromptSource::Text(prompts));
    }
    Ok(PromptSource::Synthetic)
}

/// `--prompt` or `--prompt-file` as texts (for a server, which tokenizes them itself); `None`
/// when neither is given.
pub(super) fn prompt_texts(args: &WorkloadOpts) -> Result<Option<Vec<String>>, Failure> {
    if let Some(text) = &args.prompt {
        if text.trim().is_empty() {
            return Err(Failure::usage(
                "--prompt: the prompt is empty (give some text, or --prompt-tokens N)",
            ));
        }
        return Ok(Some(vec![text.clone()]));
    }
    match &args.prompt_file {
        Some(file) => read_prompt_file(file).map(Some),
        None => Ok(None),
    }
}

/// The run's tokenizer: `--tokenizer FILE` when given, else the model's own (a synthetic model's
/// trained BPE, a directory's tokenizer.json, a GGUF's `tokenizer.ggml.*` metadata, or for a GGUF
/// without that metadata a tokenizer.json beside it).
pub(super) fn load_tokenizer(
    spec: &ModelSpec,
    arch: Option<&model::ArchConfig>,
    explicit: Option<&Path>,
) -> Result<tokenizers::Tokenizer, Failure> {
    if let Some(path) = explicit {
        return tokenizer_flag(path);
    }
    match spec {
        ModelSpec::Synthetic { .. } => {
            let vocab = arch.map(|c| c.vocab_size).unwrap_or(2048);
            model::tokenizer::synthetic(vocab).map_err(|e| Failure::runtime(e.to_string()))
        }
        ModelSpec::HfDir(dir) => model::tokenizer::load(&dir.join("tokenizer.json"))
            .map_err(|e| Failure::usage(e.to_string())),
        ModelSpec::Gguf(path) => {
            let own = model::gguf::read_tokenizer(path);
            if own.is_ok() {
                return own.map_err(|e| Failure::usage(e.to_string()));
            }
            let beside = [
                Some(path.with_extension("tokenizer.json")),
                path.parent().map(|p| p.join("tokenizer.json")),
            ]
            .into_iter()
            .flatten()
            .find(|p| p.is_file());
            match beside {
                Some(p) => model::tokenizer::load(&p).map_err(|e| Failure::usage(e.to_string())),
                None => own.map_err(|e| Failure::usage(e.to_string())),
            }
        }
    }
}

/// `--tokenizer FILE`.
pub(super) fn tokenizer_flag(path: &Path) -> Result<tokenizers::Tokenizer, Failure> {
    if !path.is_file() {
        return Err(Failure::usage(format!(
            "--tokenizer {}: no such file (give the path of a tokenizer.json)",
            path.display()
        )));
    }
    model::tokenizer::load(path).map_err(|e| Failure::usage(format!("--tokenizer {e}")))
}

fn encode(tk: &tokenizers::Tokenizer, text: &str, what: &str) -> Result<Vec<u32>, Failure> {
    let enc = tk
        .encode(text, false)
        .map_err(|e| Failure::usage(format!("{what}: cannot tokenize ({e})")))?;
    let ids = enc.get_ids().to_vec();
    if ids.is_empty() {
        return Err(Failure::usage(format!(
            "{what}: the prompt is empty after tokenization"
        )));
    }
    Ok(ids)
}

/// Maximum length of one prompt line.
const MAX_PROMPT_LINE: usize = 1 << 20;

fn read_prompt_file(path: &Path) -> Result<Vec<String>, Failure> {
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::usage(format!("--prompt-file {}", crate::util::io_error(path, &e)))
    })?;
    if bytes.contains(&0) {
        return Err(Failure::usage(format!(
            "--prompt-file {}: looks binary (contains NUL bytes); use a UTF-8 text file with one prompt per line",
            path.display()
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        Failure::usage(format!(
            "--prompt-file {}: is not UTF-8 text",
            path.display()
        ))
    })?;
    let mut lines = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.len() > MAX_PROMPT_LINE {
            return Err(Failure::usage(format!(
                "--prompt-file {}: line {} is {} bytes, over the 1 MiB limit for one prompt; split it, or use --prompt-tokens N for long synthetic prompts",
                path.display(),
                i + 1,
                l.len()
            )));
        }
        if !l.trim().is_empty() {
            lines.push(l.to_string());
        }
    }
    if lines.is_empty() {
        return Err(Failure::usage(format!(
            "--prompt-file {}: has no prompts (one prompt per line)",
            path.display()
        )));
    }
    Ok(lines)
}
