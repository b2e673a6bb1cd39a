//! What each request asks for: prompt length, output length, batch, and the prompt ids.

use std::sync::Arc;

use crate::event::Origin;
use crate::traffic::{Conversations, TrafficPlan};
use crate::util::SplitMix64;

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
    /// Where it came from (a dataset row, a shared-prefix group).
    pub origin: Option<crate::event::Origin>,
}

/// How the candle engine renders the run's traffic (`TrafficPlan`) as token ids: the batch, the
/// given prompts tokenized, the vocabulary made-up ids are drawn from, and the tokenizer of a
/// dataset's texts.
#[derive(Clone, Debug)]
pub struct Workload {
    pub batch: usize,
    pub source: PromptSource,
    pub vocab: usize,
    /// Tokenizes a dataset's text prompts (the model's tokenizer).
    pub tokenizer: Option<Arc<tokenizers::Tokenizer>>,
}

impl Workload {
    /// The longest prompt + output `traffic` can ask for.
    pub fn max_positions_needed(&self, traffic: &TrafficPlan) -> usize {
        if traffic.conversations.is_some() {
            // Each turn is checked as its history grows (`Dialogue::next`).
            return 1 + traffic.output.max();
        }
        if let Some(t) = &traffic.source {
            return t.max_positions(traffic.output.max());
        }
        let p = match (&traffic.prompt, &self.source) {
            (Some(spec), _) => spec.max(),
            (None, PromptSource::Text(ps)) => ps.iter().map(Vec::len).max().unwrap_or(1),
            (None, PromptSource::Synthetic) => 1,
        };
        p + traffic.output.max()
    }

    pub fn describe(&self, traffic: &TrafficPlan) -> crate::event::WorkloadDesc {
        let prompt = match (traffic.describe_source(), &traffic.prompt, &self.source) {
            (Some(source), _, _) => source,
            (None, Some(s), _) => s.to_string(),
            (None, None, PromptSource::Text(ps)) => format!("text ({} prompts)", ps.len()),
            (None, None, PromptSource::Synthetic) => "?".into(),
        };
        crate::event::WorkloadDesc {
            prompt_tokens: prompt,
            output_tokens: traffic.output.to_string(),
            batch: self.batch,
            load: None,
        }
    }

    /// What the record says of the traffic: the plan's; lengths are exact (the model's own
    /// tokenizer counts them), and there is no prefix cache.
    pub fn traffic_info(traffic: &TrafficPlan) -> Option<crate::event::TrafficInfo> {
        let mut info = traffic.info()?;
        info.exact_lengths = true;
        info.cache = Some("none: the candle engine has no prefix cache".into());
        Some(info)
    }

    /// The shape and ids of request `index` from the traffic's source: its prompt tokenized (or
    /// its made-up parts as ids), its output length or the run's.
    fn of_source(&self, traffic: &TrafficPlan, index: u64) -> Result<RequestShape, String> {
        let planned = traffic
            .planned(index)
            .ok_or_else(|| "the dataset has no rows left".to_string())?;
        let mut rng = traffic.rng(index);
        let output_tokens = planned
            .output_tokens
            .unwrap_or_else(|| traffic.output.pick(index, &mut rng));
        let row = planned.prompt.ids(self.tokenizer.as_deref(), self.vocab)?;
        if row.is_empty() {
            return Err(format!(
                "the prompt of request {index} is empty after tokenization"
            ));
        }
        let mut ids = Vec::with_capacity(self.batch * row.len());
        for _ in 0..self.batch {
            ids.extend_from_slice(&row);
        }
        Ok(RequestShape {
            prompt_tokens: row.len(),
            output_tokens,
            batch: self.batch,
            ids,
            origin: Some(planned.origin),
        })
    }

    /// The shape and ids of request `index`; deterministic for a seed.
    pub fn try_request(&self, traffic: &TrafficPlan, index: u64) -> Result<RequestShape, String> {
        match &traffic.source {
            Some(_) => self.of_source(traffic, index),
            None => Ok(self.request(traffic, index)),
        }
    }

    /// The shape and ids of request `index` of made-up or given prompts; deterministic for a
    /// seed.
    pub fn request(&self, traffic: &TrafficPlan, index: u64) -> RequestShape {
        let mut rng = traffic.rng(index);
        let output_tokens = traffic.output.pick(index, &mut rng);
        let (prompt_tokens, row): (usize, Vec<u32>) = match &self.source {
            PromptSource::Synthetic => {
                let p = traffic
                    .prompt
                    .as_ref()
                    .map(|s| s.pick(index, &mut rng))
                    .unwrap_or(1);
                (p, Vec::new())
            }
            PromptSource::Text(prompts) => {
                let base = &prompts[(index as usize) % prompts.len().max(1)];
                match &traffic.prompt {
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
            origin: None,
        }
    }
}

/// The candle engine's conversations: one at a time, each turn's prompt the history so far
/// (the earlier turns' prompts and the ids generated for them) followed by the next user turn.
/// A conversation whose history would outgrow the model's positions ends there.
#[derive(Debug)]
pub struct Dialogue {
    convs: Arc<Conversations>,
    conv: usize,
    turn: usize,
    history: Vec<u32>,
    /// The prompt of the turn in flight (its row), to append the reply to.
    asked: Vec<u32>,
}

impl Dialogue {
    pub fn new(convs: Arc<Conversations>) -> Dialogue {
        Dialogue {
            convs,
            conv: 0,
            turn: 0,
            history: Vec::new(),
            asked: Vec::new(),
        }
    }

    /// The next turn's request, `None` when every conversation is done; `Err(reason)` when a
    /// conversation ended early (its history too long), then call again for the next.
    pub fn next(
        &mut self,
        w: &Workload,
        traffic: &TrafficPlan,
        index: u64,
        max_positions: usize,
    ) -> Option<Result<RequestShape, String>> {
        loop {
            let conv = self.convs.list.get(self.conv)?;
            let turns = self.convs.turns.take(conv.turns.len());
            if self.turn >= turns {
                self.end_conversation();
                continue;
            }
            if self.turn == 0 {
                // The system text, then the tools offered (a model of our own has no tool API:
                // their definitions are part of the prompt, as a chat template writes them).
                let lead: Vec<&str> = conv
                    .system
                    .iter()
                    .chain(conv.tools.iter())
                    .map(String::as_str)
                    .collect();
                self.history = if lead.is_empty() {
                    Vec::new()
                } else {
                    match crate::traffic::Prompt::Text(lead.join("\n\n"))
                        .ids(w.tokenizer.as_deref(), w.vocab)
                    {
                        Ok(ids) => ids,
                        Err(e) => return Some(Err(self.end_with(e))),
                    }
                };
            }
            let turn = &conv.turns[self.turn];
            let user = match turn.user.ids(w.tokenizer.as_deref(), w.vocab) {
                Ok(ids) => ids,
                Err(e) => return Some(Err(self.end_with(e))),
            };
            let mut rng = traffic.rng(index);
            let output_tokens = turn
                .output_tokens
                .unwrap_or_else(|| traffic.output.pick(index, &mut rng));
            let mut row = self.history.clone();
            row.extend_from_slice(&user);
            if row.is_empty() || row.len() + output_tokens > max_positions {
                let at = self.turn + 1;
                let c = self.conv;
                self.end_conversation();
                return Some(Err(format!(
                    "conversation {c} ends before turn {at}: its history ({} tokens) + {output_tokens} out would exceed the model's {max_positions} positions",
                    row.len()
                )));
            }
            let mut ids = Vec::with_capacity(w.batch * row.len());
            for _ in 0..w.batch {
                ids.extend_from_slice(&row);
            }
            let origin = Origin {
                row: (turn.row > 0).then_some(turn.row),
                conversation: Some(self.conv as u64),
                turn: Some(self.turn as u32 + 1),
                ..Origin::default()
            };
            self.asked = row;
            return Some(Ok(RequestShape {
                prompt_tokens: self.asked.len(),
                output_tokens,
                batch: w.batch,
                ids,
                origin: Some(origin),
            }));
        }
    }

    /// The turn in flight was answered with `reply` (the first sequence's ids): the history
    /// is its prompt and the reply.
    pub fn replied(&mut self, reply: &[u32]) {
        self.history = std::mem::take(&mut self.asked);
        self.history.extend_from_slice(reply);
        self.turn += 1;
    }

    fn end_conversation(&mut self) {
        self.conv += 1;
        self.turn = 0;
        self.history = Vec::new();
        self.asked = Vec::new();
    }

    /// A turn that cannot be tokenized ends its conversation (so the next call moves on to
    /// the next one rather than failing on the same turn again); `why`, said which.
    fn end_with(&mut self, why: String) -> String {
        let (c, at) = (self.conv, self.turn + 1);
        self.end_conversation();
        format!("conversation {c} ends before turn {at}: {why}")
    }
}

/// `--sampling temperature=T,top_p=P,top_k=K,seed=S`: sampling on the host, as servers do,
/// instead of greedy argmax (the default and the measured definition). Unset keys keep
/// their neutral value: temperature 1, top_p 1 (off), top_k 0 (off), seed 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    pub temperature: f64,
    pub top_p: f64,
    /// 0: every token is a candidate.
    pub top_k: usize,
    pub seed: u64,
}

impl Sampling {
    /// Parses `key=value` pairs separated by commas; errors are one line, without the flag.
    pub fn parse(s: &str) -> Result<Sampling, String> {
        let mut out = Sampling {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            seed: 0,
        };
        let mut seen: Vec<&str> = Vec::new();
        for pair in s.split(',').map(str::trim) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!(
                    "`{pair}` is not key=value (use temperature=T,top_p=P,top_k=K,seed=S)"
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            if seen.contains(&key) {
                return Err(format!("`{key}` is given twice"));
            }
            let bad = |what: &str| format!("{key}={value}: {what}");
            match key {
                "temperature" => out.temperature = value
                    .parse::<f64>()
                    .ok()
                    .filter(|t| t.is_finite() && *t > 0.0)
                    .ok_or_else(|| {
                        bad("must be a number above 0 (for greedy decoding leave out --sampling)")
                    })?,
                "top_p" => {
                    out.top_p = value
                        .parse::<f64>()
                        .ok()
                        .filter(|p| *p > 0.0 && *p <= 1.0)
                        .ok_or_else(|| bad("must be a number in (0, 1]"))?
                }
                "top_k" => {
                    out.top_k = value
                        .parse::<usize>()
                        .map_err(|_| bad("must be a whole number (0: off)"))?
                }
                "seed" => {
                    out.seed = value
                        .parse::<u64>()
                        .map_err(|_| bad("must be a whole number"))?
                }
                other => {
                    return Err(format!(
                        "unknown key `{}` (known: temperature, top_p, top_k, seed)",
                        other.escape_debug()
                    ))
                }
            }
            seen.push(key);
        }
        Ok(out)
    }

    /// The canonical form, for the record: every key, in order.
    pub fn describe(&self) -> String {
        format!(
            "temperature={},top_p={},top_k={},seed={}",
            self.temperature, self.top_p, self.top_k, self.seed
        )
    }
}

/// Draws tokens from logits on the host: temperature, then top-k, then top-p (nucleus), then
/// one uniform draw. Seeded per request (from the seed and the request index), so a request's
/// ids depend only on the seed, its index and its logits.
pub struct Sampler {
    cfg: Sampling,
    rng: SplitMix64,
    /// (token, scaled logit) candidates, reused between steps.
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    pub fn new(cfg: Sampling) -> Sampler {
        let rng = SplitMix64::new(cfg.seed);
        Sampler {
            cfg,
            rng,
            candidates: Vec::new(),
        }
    }

    /// Restarts the random stream for request `index`: a stream of its own, apart from the
    /// request's traffic draws (`traffic::request_seed`, another multiplier), so the tokens a
    /// request samples are not the numbers its lengths were drawn from.
    pub fn start_request(&mut self, index: u64) {
        self.rng = SplitMix64::new(self.cfg.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }

    /// One token from one row of logits (not empty).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let t = self.cfg.temperature as f32;
        self.candidates.clear();
        self.candidates
            .extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l / t)));
        let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1);
        let k = self.cfg.top_k;
        if k > 0 && k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, by_logit);
            self.candidates.truncate(k);
        }
        self.candidates.sort_unstable_by(by_logit);
        let Some(&(best, max)) = self.candidates.first() else {
            return 0;
        };
        if !max.is_finite() {
            return best;
        }
        // Softmax weights (unnormalized), then the nucleus: the fewest top tokens whose
        // probability reaches top_p.
        let weights: Vec<f64> = self
            .candidates
            .iter()
            .map(|&(_, l)| f64::from(l - max).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut keep = weights.len();
        if self.cfg.top_p < 1.0 {
            let mut cum = 0.0;
            for (i, w) in weights.iter().enumerate() {
                cum += w / total;
                if cum >= self.cfg.top_p {
                    keep = i + 1;
                    break;
                }
            }
        }
        let kept: f64 = weights[..keep].iter().sum();
        let mut u = self.rng.next_f64() * kept;
        for (i, w) in weights[..keep].iter().enumerate() {
            if u < *w {
                return self.candidates[i].0;
            }
            u -= w;
        }
        self.candidates[keep - 1].0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod sampling_tests {
    use super::*;

    #[test]
    fn parse_and_describe() {
        let s = Sampling::parse("temperature=0.7, top_p=0.9,top_k=40,seed=3").unwrap();
        assert_eq!(s.describe(), "temperature=0.7,top_p=0.9,top_k=40,seed=3");
        assert_eq!(
            Sampling::parse("seed=5").unwrap().describe(),
            "temperature=1,top_p=1,top_k=0,seed=5"
        );
        for (bad, want) in [
            ("temperature=0", "temperature=0: must be a number above 0 (for greedy decoding leave out --sampling)"),
            ("top_p=1.5", "top_p=1.5: must be a number in (0, 1]"),
            ("top_k=-1", "top_k=-1: must be a whole number (0: off)"),
            ("seed=x", "seed=x: must be a whole number"),
            ("temp=1", "unknown key `temp` (known: temperature, top_p, top_k, seed)"),
            ("seed=1,seed=2", "`seed` is given twice"),
            ("greedy", "`greedy` is not key=value (use temperature=T,top_p=P,top_k=K,seed=S)"),
        ] {
            assert_eq!(Sampling::parse(bad).unwrap_err(), want);
        }
    }

    #[test]
    fn same_seed_same_ids_and_the_filters_hold() {
        let logits: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f32 / 100.0)
            .collect();
        let draw = |spec: &str, index: u64| {
            let mut s = Sampler::new(Sampling::parse(spec).unwrap());
            s.start_request(index);
            (0..200).map(|_| s.sample(&logits)).collect::<Vec<u32>>()
        };
        let a = draw("temperature=2,seed=7", 0);
        assert_eq!(a, draw("temperature=2,seed=7", 0), "same seed, same ids");
        assert_ne!(
            a,
            draw("temperature=2,seed=8", 0),
            "another seed, other ids"
        );
        assert_ne!(
            a,
            draw("temperature=2,seed=7", 1),
            "another request, other ids"
        );
        // top_k=3: only the three largest logits (9.99, 9.98, 9.97 at these indices).
        let top: Vec<u32> = {
            let mut idx: Vec<u32> = (0..1000).collect();
            idx.sort_by(|&x, &y| logits[y as usize].total_cmp(&logits[x as usize]));
            idx[..3].to_vec()
        };
        let k3 = draw("temperature=5,top_k=3,seed=1", 0);
        assert!(k3.iter().all(|id| top.contains(id)), "{k3:?}");
        assert!(top.iter().all(|id| k3.contains(id)), "all three drawn");
        // A tiny top_p keeps only the argmax.
        let p = draw("top_p=0.0001,seed=1", 0);
        assert!(p.iter().all(|&id| id == top[0]));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod dialogue_tests {
    use super::*;
    use crate::traffic::len::LenSpec;
    use crate::traffic::{Conversation, Prompt, Turn, Turns};

    fn turn(user: Prompt) -> Turn {
        Turn {
            user,
            tokens: 4,
            output_tokens: Some(2),
            row: 0,
            delay_s: None,
            tool_result: None,
        }
    }

    /// A turn that cannot be tokenized (a text without a tokenizer) ends its conversation
    /// with a line naming it, and the next call goes on to the next conversation instead of
    /// failing on the same turn for ever.
    #[test]
    fn an_untokenizable_turn_ends_its_conversation_and_the_next_one_runs() {
        let made = Prompt::Made(vec![crate::traffic::Part { tokens: 4, seed: 7 }]);
        let convs = Conversations {
            list: vec![
                Conversation {
                    system: None,
                    tools: None,
                    turns: vec![turn(Prompt::Text("hello".into())), turn(made.clone())],
                },
                Conversation {
                    system: None,
                    tools: None,
                    turns: vec![turn(made)],
                },
            ],
            turns: Turns::All,
            think: None,
            dataset: None,
            exact_lengths: false,
        };
        let w = Workload {
            batch: 1,
            source: PromptSource::Synthetic,
            vocab: 100,
            tokenizer: None,
        };
        let t = TrafficPlan::made_up(LenSpec::Fixed(8), LenSpec::Fixed(2), 0);
        let mut d = Dialogue::new(Arc::new(convs));
        let why = d.next(&w, &t, 0, 512).unwrap().unwrap_err();
        assert!(
            why.starts_with("conversation 0 ends before turn 1: "),
            "{why}"
        );
        let next = d.next(&w, &t, 0, 512).unwrap().unwrap();
        assert_eq!(next.prompt_tokens, 4);
        d.replied(&[5, 6]);
        assert!(d.next(&w, &t, 1, 512).is_none(), "every conversation done");
    }
}
