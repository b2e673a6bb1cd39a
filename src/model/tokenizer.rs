//! Tokenizers: a model's `tokenizer.json`, or a byte-level BPE trained in-process on the corpus
//! the project ships (for synthetic models and `make-model`).

use std::path::Path;
use std::str::FromStr;

use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, Tokenizer, TokenizerBuilder};

use super::ModelError;
use crate::util::one_line;

/// Text the synthetic tokenizer is trained on.
pub const CORPUS: &str = include_str!("../../assets/corpus.txt");

/// Special tokens, in id order: `<unk>` = 0, `<s>` = 1, `</s>` = 2.
pub const SPECIALS: [&str; 3] = ["<unk>", "<s>", "</s>"];

/// The chat template a synthetic model is written with (`tokenizer_config.json`, and the GGUF's
/// `tokenizer.chat_template`), so servers take chat requests with no edit: each message as its
/// role in `<|…|>` then its text and `</s>`, then the assistant's turn. Written with what both
/// Jinja engines that read it take (transformers' and llama.cpp's): `~` joins text, a message
/// without content (a tool call) is empty.
pub const CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|' ~ message['role'] ~ '|>\n' ~ (message['content'] or '') ~ '</s>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}";

/// The tokenizer of a synthetic model whose embedding has `vocab_size` rows: the shipped
/// corpus's BPE (`train_bpe`, at most 4096 pieces), and one plain piece `[PADn]` for each id
/// past it, so that every id a random model generates decodes to visible text. A piece no
/// merge makes is never produced by encoding; only `<unk>`, `<s>` and `</s>` are special, so a
/// server that leaves special tokens out of its text (vLLM) streams every other token's text.
pub fn synthetic(vocab_size: usize) -> Result<Tokenizer, ModelError> {
    let trained = train_bpe(vocab_size.min(4096))?;
    padded(&trained, vocab_size)
}

/// `tk` with a plain `[PADn]` piece for every id below `vocab_size` it has none for.
pub fn padded(tk: &Tokenizer, vocab_size: usize) -> Result<Tokenizer, ModelError> {
    let err = |what: String| ModelError::new(format!("padding the synthetic tokenizer: {what}"));
    let mut json: serde_json::Value =
        serde_json::from_str(&tk.to_string(false).map_err(|e| err(e.to_string()))?)
            .map_err(|e| err(e.to_string()))?;
    let Some(vocab) = json
        .pointer_mut("/model/vocab")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return Err(err("the tokenizer has no vocab".into()));
    };
    let taken: std::collections::HashSet<u64> = vocab
        .values()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    for id in 0..vocab_size as u64 {
        if !taken.contains(&id) {
            vocab.insert(format!("[PAD{id}]"), serde_json::Value::from(id));
        }
    }
    Tokenizer::from_str(&json.to_string()).map_err(|e| err(e.to_string()))
}

/// `tokenizer_config.json` for a synthetic model: its special tokens, its chat template and
/// its length, as transformers (and vLLM through it) read them.
pub fn config_json(max_positions: usize) -> serde_json::Value {
    serde_json::json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": SPECIALS[0],
        "bos_token": SPECIALS[1],
        "eos_token": SPECIALS[2],
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_max_length": max_positions,
        "chat_template": CHAT_TEMPLATE,
    })
}

/// Trains a byte-level BPE with at most `vocab_size` tokens on the shipped corpus.
/// Deterministic: the same corpus and size give the same tokenizer.json.
pub fn train_bpe(vocab_size: usize) -> Result<Tokenizer, ModelError> {
    let err =
        |e: tokenizers::Error| ModelError::new(format!("training the synthetic tokenizer: {e}"));
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(
            SPECIALS
                .iter()
                .map(|s| AddedToken::from(*s, true))
                .collect(),
        )
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tk = TokenizerBuilder::<
        BPE,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    >::new()
    .with_model(BPE::default())
    .with_normalizer(None)
    .with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false).into()))
    .with_post_processor(Some(ByteLevel::default().trim_offsets(false).into()))
    .with_decoder(Some(ByteLevel::default().into()))
    .build()
    .map_err(err)?;
    tk.train(&mut trainer, CORPUS.lines()).map_err(err)?;
    let json = tk.to_string(false).map_err(err)?;
    Tokenizer::from_str(&json).map_err(err)
}

/// Loads `tokenizer.json`, with an error that names the file.
pub fn load(path: &Path) -> Result<Tokenizer, ModelError> {
    if !path.is_file() {
        return Err(ModelError::new(format!(
            "{}: tokenizer.json not found; copy the model's tokenizer.json next to config.json",
            path.display()
        )));
    }
    Tokenizer::from_file(path).map_err(|e| {
        ModelError::new(format!(
            "{}: not a valid tokenizer.json ({}); re-download it",
            path.display(),
            one_line(&e.to_string())
        ))
    })
}
