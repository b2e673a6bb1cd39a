//! Lengths as flags give them (`128`, `128,512`, `64..512`), and what the doubling keys do to
//! them.

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

    /// The output-tokens key (`+`/`-`): every length changed by `delta` tokens.
    pub fn plus(&self, delta: i64) -> LenSpec {
        self.map(|n| (n as i64).saturating_add(delta).max(1) as usize)
    }

    /// The prompt key (`]`/`[`): every length doubled per step (halved per negative step).
    pub fn doubled(&self, steps: i64) -> LenSpec {
        self.map(|n| doubled(n, steps))
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

/// What the doubling keys mean in every engine (prompt length, batch, concurrency): `n`
/// doubled per step, halved per negative step, at most 8 steps at once, never below 1. The
/// request rate of an open loop scales by the same factor (`doubling_factor`).
pub fn doubled(n: usize, steps: i64) -> usize {
    let s = steps.clamp(-8, 8);
    if s >= 0 {
        n.saturating_mul(1 << s)
    } else {
        n >> -s
    }
    .max(1)
}

/// `doubled`'s factor, for loads that are not counts (a rate).
pub fn doubling_factor(steps: i64) -> f64 {
    2f64.powi(steps.clamp(-8, 8) as i32)
}
