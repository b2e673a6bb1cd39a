//! A sweep's cells: the workload each runs, and the event that starts one.

use serde::{Deserialize, Serialize};

/// The float dtype a candle model runs in (`--dtype`), as flags, records and sweep cells name
/// it: `f32`, `f16`, `bf16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FloatDtype {
    #[value(alias = "float32")]
    F32,
    #[value(alias = "float16", alias = "half")]
    F16,
    #[value(alias = "bfloat16")]
    Bf16,
}

impl FloatDtype {
    pub fn name(self) -> &'static str {
        match self {
            FloatDtype::F32 => "f32",
            FloatDtype::F16 => "f16",
            FloatDtype::Bf16 => "bf16",
        }
    }

    /// The float dtype a record or model info names (`f32`, `f16`, `bf16`); `None` for any
    /// other (a GGUF file's quantization, say).
    pub fn of_name(name: &str) -> Option<FloatDtype> {
        [FloatDtype::F32, FloatDtype::F16, FloatDtype::Bf16]
            .into_iter()
            .find(|d| d.name() == name)
    }

    /// Whether it is a 16-bit type (tensor-core FLOP figures apply).
    pub fn is_16bit(self) -> bool {
        self != FloatDtype::F32
    }
}

impl std::fmt::Display for FloatDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A length of a sweep cell's workload: a number of tokens, or as written (a range such as
/// `64..512`, or `text`: each prompt's own length). Fixed lengths are numbers in JSON; records
/// written before that said `"16"`, which reads as the number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellLen {
    Tokens(usize),
    Written(String),
}

impl Default for CellLen {
    fn default() -> Self {
        CellLen::Tokens(1)
    }
}

impl From<&str> for CellLen {
    fn from(s: &str) -> CellLen {
        match s.trim().parse::<usize>() {
            Ok(n) => CellLen::Tokens(n),
            Err(_) => CellLen::Written(s.to_string()),
        }
    }
}

impl std::fmt::Display for CellLen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellLen::Tokens(n) => write!(f, "{n}"),
            CellLen::Written(s) => f.write_str(s),
        }
    }
}

impl Serialize for CellLen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CellLen::Tokens(n) => s.serialize_u64(*n as u64),
            CellLen::Written(w) => s.serialize_str(w),
        }
    }
}

impl<'de> Deserialize<'de> for CellLen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CellLen, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        Ok(match Raw::deserialize(d)? {
            Raw::N(n) => CellLen::Tokens(usize::try_from(n).map_err(serde::de::Error::custom)?),
            Raw::S(s) => CellLen::from(s.as_str()),
        })
    }
}

/// One cell of a sweep: the workload it runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CellParams {
    pub batch: usize,
    pub prompt_tokens: CellLen,
    pub output_tokens: CellLen,
    /// Server sweeps: requests in flight (closed loop) or the cap of an open loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Server sweeps: open-loop requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Candle sweeps over several models: the model as given (only when the grid has more
    /// than one; the title names a single one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Candle sweeps over several dtypes (only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<FloatDtype>,
    /// Candle sweeps over several CPU thread counts (only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// `--find-max … --hold D`: the cell that holds the highest load found, for D (not a
    /// probe: its verdict decides nothing, it says whether the capacity held).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
}

impl CellParams {
    /// `prompt 512, output 32`: the workload without the load.
    pub fn workload_words(&self) -> String {
        format!(
            "prompt {}, output {}",
            self.prompt_tokens, self.output_tokens
        )
    }

    /// The load parts that are set, each as `batch 4`, `concurrency 8`, `rate 2/s`; the batch
    /// only when it is not 1 unless `always_batch`.
    pub fn load_words(&self, always_batch: bool) -> Vec<String> {
        let mut parts = Vec::new();
        if always_batch || self.batch != 1 {
            parts.push(format!("batch {}", self.batch));
        }
        if let Some(c) = self.concurrency {
            parts.push(format!("concurrency {c}"));
        }
        if let Some(r) = self.rate {
            parts.push(format!("rate {r}/s"));
        }
        parts
    }

    /// The model, dtype and threads parts that are set: `tiny f16, 4 threads`.
    pub fn build_words(&self) -> Option<String> {
        let mut parts = Vec::new();
        let what: Vec<&str> = [self.model.as_deref(), self.dtype.map(FloatDtype::name)]
            .into_iter()
            .flatten()
            .collect();
        if !what.is_empty() {
            parts.push(what.join(" "));
        }
        if let Some(t) = self.threads {
            parts.push(format!("{t} thread{}", if t == 1 { "" } else { "s" }));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// `batch 4, prompt 512, output 32` (and concurrency / rate when set, and the model,
    /// dtype and threads first when the grid varies them): the cell in words, as progress
    /// lines, the grid and comparisons name it.
    pub fn words(&self) -> String {
        let mut parts: Vec<String> = self.build_words().into_iter().collect();
        parts.push(format!("batch {}", self.batch));
        parts.push(self.workload_words());
        parts.extend(
            self.load_words(false)
                .into_iter()
                .filter(|p| !p.starts_with("batch")),
        );
        if self.hold {
            parts.push("held".into());
        }
        parts.join(", ")
    }
}

/// A sweep's cell begins (the sweep engine sends it before the cell's engine starts; the cell
/// ends with that engine's `Finished`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellStart {
    /// 0-based, of `cells`.
    pub cell: usize,
    pub cells: usize,
    pub params: CellParams,
}
