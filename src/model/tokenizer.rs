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
