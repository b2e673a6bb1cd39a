//! Model sources (HF directory, GGUF, synthetic presets), architectures and the tokenizer.

mod info;

pub use info::ModelInfo;
