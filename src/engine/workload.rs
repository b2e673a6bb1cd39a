//! What each request asks for: prompt length, output length, batch, and the prompt ids.

use crate::util::SplitMix64;

/// A length given as one number, a list cycled per request (`128,512`), or a seeded uniform
/// range (`64..512`, both ends included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LenSpec {
    Fixed(usize),
    List(Vec<usize>),
    Range(usize, usize),
}

impl LenSpec {
    /// Parses a length spec; every length must be ≥ 1. Errors are one line, without the flag
    /// (the CLI names it).
    pub fn parse(s: &str) -> Result<LenSpec, String> {
        let s = s.trim();
        let num = |t: &str| -> Result<usize, String> {
            let t = t.trim();
            match t.parse::<i64>() {
                Ok(n) if n >= 1 => Ok(n as usize),
                Ok(n) => Err(format!("{n} is not a positive length (use 1 or more)")),
                Err(_) => Err(format!(
                    "`{t}` is not a length (use N, a list like 128,512, or a range like 64..512)"
                )),
            }
        };
        if let Some((a, b)) = s.split_once("..") {
            let b = b.strip_prefix('=').unwrap_or(b);
            let (lo, hi) = (num(a)?, num(b)?);
            if lo > hi {
                return Err(format!("range {s} is inverted (write {hi}..{lo})"));
            }
            return Ok(if lo == hi {
                LenSpec::Fixed(lo)
            } else {
                LenSpec::Range(lo, hi)
            });
        }
        if s.contains(',') {
            let v = s.split(',').map(num).collect::<Result<Vec<_>, _>>()?;
            return Ok(LenSpec::List(v));
        }
        num(s).map(LenSpec::Fixed)
    }

    pub fn max(&self) -> usize {
        match self {
            LenSpec::Fixed(n) => *n,
            LenSpec::List(v) => v.iter().copied().max().unwrap_or(1),
            LenSpec::Range(_, hi) => *hi,
        }
    }

    /// The length of request `index`.
    pub fn pick(&self, index: u64, rng: &mut SplitMix64) -> usize {
        match self {
            LenSpec::Fixed(n) => *n,
            LenSpec::List(v) => v[(index as usize) % v.len().max(1)],
            LenSpec::Range(lo, hi) => rng.next_in(*lo as u64, *hi as u64) as usize,
        }
    }

    /// Every length changed by `f` (clamped to ≥ 1).
    pub fn map(&self, f: impl Fn(usize) -> usize) -> LenSpec {
        let g = |n: usize| f(n).max(1);
        match self {
            LenSpec::Fixed(n) => LenSpec::Fixed(g(*n)),
            LenSpec::List(v) => LenSpec::List(v.iter().map(|&n| g(n)).collect()),
            LenSpec::Range(lo, hi) => LenSpec::Range(g(*lo), g(*hi)),
        }
    }
}

impl std::fmt::Display for LenSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LenSpec::Fixed(n) => write!(f, "{n}"),
            LenSpec::List(v) => {
                let s: Vec<String> = v.iter().map(|n| n.to_string()).collect();
                write!(f, "{}", s.join(","))
            }
            LenSpec::Range(lo, hi) => write!(f, "{lo}..{hi}"),
        }
    }
}

/// Where prompt ids come from.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptSource {
    /// Random ids, different for every request (nothing is accidentally reused).
    Synthetic,
    /// Tokenized prompts cycled per request; `lengths` truncates/repeats them when given.
    Text(Vec<Vec<u32>>),
}

/// One request's shape and ids.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestShape {
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    pub batch: usize,
    /// `batch × prompt_tokens` ids, row-major.
    pub ids: Vec<u32>,
}

#[derive(Clone, Debug)]
pub struct Workload {
    /// `None` with text prompts means "each prompt's own length".
    pub prompt: Option<LenSpec>,
    pub output: LenSpec,
    pub batch: usize,
    pub source: PromptSource,
    pub vocab: usize,
    pub seed: u64,
}

impl Workload {
    /// The longest prompt + output this workload can ask for.
    pub fn max_positions_needed(&self) -> usize {
        let p = match (&self.prompt, &self.source) {
            (Some(spec), _) => spec.max(),
            (None, PromptSource::Text(ps)) => ps.iter().map(Vec::len).max().unwrap_or(1),
            (None, PromptSource::Synthetic) => 1,
        };
        p + self.output.max()
    }

    pub fn describe(&self) -> crate::event::WorkloadDesc {
        let prompt = match (&self.prompt, &self.source) {
            (Some(s), _) => s.to_string(),
            (None, PromptSource::Text(ps)) => format!("text ({} prompts)", ps.len()),
            (None, PromptSource::Synthetic) => "?".into(),
        };
        crate::event::WorkloadDesc {
            prompt_tokens: prompt,
            output_tokens: self.output.to_string(),
            batch: self.batch,
        }
    }

    /// The shape and ids of request `index`; deterministic for a seed.
    pub fn request(&self, index: u64) -> RequestShape {
        let mut rng = SplitMix64::new(self.seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
        let output_tokens = self.output.pick(index, &mut rng);
        let (prompt_tokens, row): (usize, Vec<u32>) = match &self.source {
            PromptSource::Synthetic => {
                let p = self
                    .prompt
                    .as_ref()
                    .map(|s| s.pick(index, &mut rng))
                    .unwrap_or(1);
                (p, Vec::new())
            }
            PromptSource::Text(prompts) => {
                let base = &prompts[(index as usize) % prompts.len().max(1)];
                match &self.prompt {
                    None => (base.len(), base.clone()),
                    Some(spec) => {
                        let p = spec.pick(index, &mut rng);
                        (p, base.iter().copied().cycle().take(p).collect())
                    }
                }
            }
        };
        let mut ids = Vec::with_capacity(self.batch * prompt_tokens);
        for _ in 0..self.batch {
            if row.is_empty() {
                // Ids 0..3 are special tokens in our tokenizers; avoid them.
                let lo = 3.min(self.vocab as u64 - 1);
                ids.extend(
                    (0..prompt_tokens).map(|_| rng.next_in(lo, self.vocab as u64 - 1) as u32),
                );
            } else {
                ids.extend_from_slice(&row);
            }
        }
        RequestShape {
            prompt_tokens,
            output_tokens,
            batch: self.batch,
            ids,
        }
    }
}
