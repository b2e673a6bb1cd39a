//! One generator's share of a run that several send together (`--shard K/N`): every shard
//! draws the whole schedule from the one seed and keeps what is its own, so N generators given
//! the same flags send one run between them, none of it twice and none of it missed.
//!
//! - Unit `u` of the run (a request, or a conversation with `--turns`) is shard `u mod N`'s:
//!   an open loop's arrivals, a dataset's rows and a trace's timestamps are drawn for the
//!   whole run and each shard sends its own, at the times the whole schedule gives them; a
//!   conversation stays on one shard, turn after turn.
//! - What the run holds in flight (`--concurrency C`) is split as `C / N` per shard, the
//!   remainder to the first shards.
//! - Request numbers stay the run's, so the shards' records merge into exactly the run's.

use serde::{Deserialize, Serialize};

/// Shard `index` of `count` (0-based, as Kubernetes' `JOB_COMPLETION_INDEX` and Slurm's
/// `SLURM_PROCID` count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard::WHOLE
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// The whole run: one generator.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`, checked (`count` ≥ 1, `index` < `count`).
    pub fn new(index: u64, count: u64) -> Result<Shard, String> {
        if count == 0 {
            return Err("the number of shards is 0; give N ≥ 1 (K/N, K from 0 to N-1)".into());
        }
        if index >= count {
            return Err(format!(
                "shard {index} of {count}: K counts from 0, so it is at most {} (K/N)",
                count - 1
            ));
        }
        let (Ok(index), Ok(count)) = (u32::try_from(index), u32::try_from(count)) else {
            return Err(format!("{count} shards are more than this takes"));
        };
        Ok(Shard { index, count })
    }

    /// `K/N` as `--shard` takes it.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not K/N (e.g. 0/4: the first of four generators)");
        let (k, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let k: u64 = k.trim().parse().map_err(|_| bad())?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        Shard::new(k, n)
    }

    /// Whether this is the whole run (one generator).
    pub fn is_whole(&self) -> bool {
        self.count <= 1
    }

    /// Whether unit `unit` of the run (a request, or a conversation) is this shard's.
    pub fn owns(&self, unit: u64) -> bool {
        self.count <= 1 || unit % u64::from(self.count) == u64::from(self.index)
    }

    /// This shard's part of `total` (what the run holds in flight): `total / N`, and one
    /// more for the first `total mod N` shards.
    pub fn share(&self, total: usize) -> usize {
        let n = self.count.max(1) as usize;
        total / n + usize::from((self.index as usize) < total % n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_as_k_of_n_and_refuse_the_rest() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse(" 0 / 1 "), Ok(Shard::WHOLE));
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2", ""] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Shard::parse("1/3").unwrap().to_string(), "1/3");
    }

    /// Every unit is exactly one shard's, for any N.
    #[test]
    fn every_unit_is_one_shards() {
        for n in 1..=7u64 {
            let shards: Vec<Shard> = (0..n).map(|k| Shard::new(k, n).unwrap()).collect();
            for unit in 0..100 {
                assert_eq!(shards.iter().filter(|s| s.owns(unit)).count(), 1);
            }
        }
    }

    /// The shares add up to the whole, the remainder to the first shards.
    #[test]
    fn concurrency_splits_with_the_remainder_first() {
        let shares = |c: usize, n: u64| -> Vec<usize> {
            (0..n).map(|k| Shard::new(k, n).unwrap().share(c)).collect()
        };
        assert_eq!(shares(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(shares(8, 4), vec![2, 2, 2, 2]);
        assert_eq!(shares(3, 4), vec![1, 1, 1, 0]);
        assert_eq!(shares(5, 1), vec![5]);
        for c in 0..50 {
            for n in 1..9 {
                assert_eq!(shares(c, n).iter().sum::<usize>(), c);
            }
        }
    }
}
