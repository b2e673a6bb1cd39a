//! The traffic of a run, as both engines share it: what each request asks for (made-up
//! lengths, a dataset's rows, shared-prefix groups, conversations), how many requests there are
//! and for how long, which are warmup, and each request's own seeded draws. The planner
//! (`plan::traffic`) builds it once from the flags; the candle worker and the http engine read
//! it, and neither re-derives any of it. What differs between them is only how a prompt is
//! rendered (token ids, or text in the served model's words) and how requests are paced.

use std::sync::Arc;
use std::time::Duration;

use super::{Conversations, LenSpec, Planned, RequestSource, Shard};
use crate::event::TrafficInfo;
use crate::util::SplitMix64;

/// The seed of request `index`'s own draws: the one mixer of a run's seed and a request's
/// index, so a request's made-up lengths and prompt are the same for a seed and an index in
/// every engine and every run.
pub fn request_seed(seed: u64, index: u64) -> u64 {
    seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407)
}

/// The seeded generator of request `index`'s own draws (see `request_seed`).
pub fn request_rng(seed: u64, index: u64) -> SplitMix64 {
    SplitMix64::new(request_seed(seed, index))
}

/// Everything about what a run sends that does not depend on which engine sends it.
#[derive(Clone, Debug)]
pub struct TrafficPlan {
    /// Made-up prompt lengths (`-p`); `None`: each given prompt's own length.
    pub prompt: Option<LenSpec>,
    /// Output lengths (`-n`), for requests whose source does not say.
    pub output: LenSpec,
    pub seed: u64,
    /// The first `warmup` requests are warmup (kept out of steady-state statistics).
    pub warmup: u64,
    /// `--requests`.
    pub requests: Option<u64>,
    /// `--duration`.
    pub duration: Option<Duration>,
    /// A dataset's rows or shared-prefix groups, in place of made-up prompts.
    pub source: Option<Arc<RequestSource>>,
    /// Conversations, turn by turn (`--turns`).
    pub conversations: Option<Arc<Conversations>>,
    /// `--replay`: rows are sent at their timestamps × this scale (open loop; servers only).
    pub replay: Option<f64>,
    /// The part of the run this generator sends (`--shard K/N`; the whole run by default):
    /// the schedule is drawn whole and this shard sends its own units (see `traffic::shard`).
    pub shard: Shard,
}

impl TrafficPlan {
    /// Made-up lengths only: `prompt` tokens in, `output` out, none warmup, no limit.
    pub fn made_up(prompt: LenSpec, output: LenSpec, seed: u64) -> TrafficPlan {
        TrafficPlan {
            prompt: Some(prompt),
            output,
            seed,
            warmup: 0,
            requests: None,
            duration: None,
            source: None,
            conversations: None,
            replay: None,
            shard: Shard::WHOLE,
        }
    }

    /// The requests the run sends at most, the one place this is decided:
    /// - a replayed trace and conversations are sent once: `--requests` (a conversation's
    ///   turns each a request) or all of them, whichever is fewer;
    /// - a dataset's rows otherwise: `--requests` (cycled when more than the rows), else
    ///   every row once, or as many as `--duration` allows (cycled);
    /// - made-up or shared-prefix prompts: `--requests`, else no limit.
    pub fn request_limit(&self) -> Option<u64> {
        if let Some(c) = &self.conversations {
            let all = c.requests();
            return Some(self.requests.map_or(all, |n| n.min(all)));
        }
        let rows = self
            .source
            .as_ref()
            .and_then(|s| s.rows())
            .map(|n| n as u64);
        match (self.requests, rows) {
            (Some(n), Some(rows)) if self.replay.is_some() => Some(n.min(rows)),
            (Some(n), _) => Some(n),
            (None, Some(rows)) if self.replay.is_some() || self.duration.is_none() => Some(rows),
            (None, _) => None,
        }
    }

    /// The requests a conversation run sends at most, `tools_offered` or not: as
    /// `request_limit`, except that a turn whose reply calls tools takes more than one request,
    /// so with tools on offer the turns bound no more than `--requests` does.
    pub fn conversation_limit(&self, tools_offered: bool) -> Option<u64> {
        if tools_offered {
            self.requests
        } else {
            self.request_limit()
        }
    }

    /// Whether request `index` is warmup.
    pub fn is_warmup(&self, index: u64) -> bool {
        index < self.warmup
    }

    /// Whether unit `unit` of the run (a request; a conversation with `--turns`) is this
    /// generator's to send.
    pub fn owns(&self, unit: u64) -> bool {
        self.shard.owns(unit)
    }

    /// Request `index`'s own draws (see `request_rng`).
    pub fn rng(&self, index: u64) -> SplitMix64 {
        request_rng(self.seed, index)
    }

    /// What the source says of request `index` (a dataset's row, a shared-prefix group);
    /// `None` for made-up traffic, or a dataset with no rows left.
    pub fn planned(&self, index: u64) -> Option<Planned> {
        self.source.as_ref()?.request(self.seed, index)
    }

    /// When request `index` of a replayed trace is due, in seconds of trace time (its row's
    /// time, scaled); `None` outside a replay.
    pub fn due_s(&self, index: u64) -> Option<f64> {
        let scale = self.replay?;
        let at_s = self.source.as_ref()?.dataset()?.at_s(index)?;
        Some((at_s * scale).max(0.0))
    }

    /// The traffic as the record keeps it (`None` for made-up lengths); each engine adds what
    /// it knows of lengths and of a cache.
    pub fn info(&self) -> Option<TrafficInfo> {
        let mut info = match (&self.conversations, &self.source) {
            (Some(c), _) => c.info(),
            (None, Some(s)) => s.info(),
            (None, None) => return None,
        };
        info.time_scale = self.replay;
        if self.replay.is_none() {
            info.trace_span_s = None;
        }
        Some(info)
    }

    /// The source's part of the workload's description (`dataset t.jsonl (1200 rows)`, `12
    /// conversations (4 turns)`), when there is a source.
    pub fn describe_source(&self) -> Option<String> {
        match (&self.conversations, &self.source) {
            (Some(c), _) => Some(c.describe()),
            (None, Some(s)) => Some(s.describe()),
            (None, None) => None,
        }
    }

    /// Leaves out the dataset's rows whose prompt + output exceed `max_positions` (a server's
    /// `max_model_len`, known once the run asks it), counted in the dataset's `skipped`; an
    /// error when no row is left. Nothing to do without a dataset.
    pub fn fit(&mut self, max_positions: usize) -> Result<u64, String> {
        let output = self.output.max();
        let Some(source) = self.source.as_mut() else {
            return Ok(0);
        };
        let RequestSource::Dataset(d) = Arc::make_mut(source) else {
            return Ok(0);
        };
        let dropped = d.restrict(max_positions, output);
        if d.is_empty() {
            return Err(format!(
                "every dataset row is longer than the server's {max_positions} positions (max_model_len); use shorter rows or a model that takes more"
            ));
        }
        Ok(dropped)
    }

    /// `Intent::Output`: the output length from the next request on (at least 1).
    pub fn adjust_output(&mut self, delta: i64) {
        self.output = self.output.plus(delta);
    }

    /// `Intent::Prompt`: made-up prompt lengths doubled or halved from the next request on
    /// (given prompts keep their own length).
    pub fn adjust_prompt(&mut self, steps: i64) {
        if let Some(p) = &self.prompt {
            self.prompt = Some(p.doubled(steps));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::traffic::dataset::{self, ReadOptions};
    use crate::traffic::{synthetic_conversations, DatasetPlan, Order, Turns};

    fn rows(n: usize, timed: bool) -> Arc<RequestSource> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let text: String = (0..n)
            .map(|i| match timed {
                true => format!("{{\"timestamp\":{i},\"input_length\":4,\"output_length\":2}}\n"),
                false => "{\"input_length\":4,\"output_length\":2}\n".to_string(),
            })
            .collect();
        std::fs::write(&p, text).unwrap();
        let ds = dataset::read(&p, &ReadOptions::default()).unwrap();
        Arc::new(RequestSource::Dataset(Box::new(DatasetPlan::new(
            ds,
            Order::Sequential,
            0,
            None,
            16,
        ))))
    }

    fn plan() -> TrafficPlan {
        TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(4), 1)
    }

    /// The one request limit, for every kind of traffic.
    #[test]
    fn the_request_limit_follows_the_traffic() {
        let with = |f: &dyn Fn(&mut TrafficPlan)| {
            let mut p = plan();
            f(&mut p);
            p.request_limit()
        };
        assert_eq!(with(&|_| {}), None);
        assert_eq!(with(&|p| p.requests = Some(7)), Some(7));
        // A dataset: every row once; --requests cycles past them; --duration cycles.
        assert_eq!(with(&|p| p.source = Some(rows(3, false))), Some(3));
        let cycled = |p: &mut TrafficPlan| {
            p.source = Some(rows(3, false));
            p.requests = Some(10);
        };
        assert_eq!(with(&cycled), Some(10));
        let timed = |p: &mut TrafficPlan| {
            p.source = Some(rows(3, false));
            p.duration = Some(Duration::from_secs(5));
        };
        assert_eq!(with(&timed), None);
        // A replayed trace is sent once, whatever --requests or --duration say.
        let replayed = |p: &mut TrafficPlan| {
            p.source = Some(rows(3, true));
            p.replay = Some(1.0);
            p.requests = Some(10);
            p.duration = Some(Duration::from_secs(5));
        };
        assert_eq!(with(&replayed), Some(3));
        // Conversations: their turns, at most --requests.
        let convs = |p: &mut TrafficPlan, requests| {
            p.conversations = Some(Arc::new(Conversations {
                list: synthetic_conversations(3, 2, &LenSpec::Fixed(4), 0),
                turns: Turns::All,
                think: None,
                dataset: None,
                exact_lengths: false,
            }));
            p.requests = requests;
        };
        assert_eq!(with(&|p| convs(p, None)), Some(6));
        assert_eq!(with(&|p| convs(p, Some(4))), Some(4));
        assert_eq!(with(&|p| convs(p, Some(40))), Some(6));
    }

    #[test]
    fn a_requests_draws_depend_on_its_seed_and_index_only() {
        let p = plan();
        assert_eq!(p.rng(5).next_u64(), request_rng(1, 5).next_u64());
        assert_ne!(p.rng(5).next_u64(), p.rng(6).next_u64());
        assert!(p.is_warmup(0) == (p.warmup > 0));
    }

    #[test]
    fn a_replay_is_due_at_its_rows_times_scaled() {
        let mut p = plan();
        p.source = Some(rows(3, true));
        assert_eq!(p.due_s(1), None);
        p.replay = Some(0.5);
        assert_eq!(p.due_s(2), Some(0.001));
        assert_eq!(p.info().and_then(|i| i.time_scale), Some(0.5));
        assert_eq!(p.fit(6), Ok(0));
        assert!(p.fit(5).is_err());
    }
}
