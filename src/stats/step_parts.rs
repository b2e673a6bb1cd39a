//! Where a step's time goes (`--step-parts N`): the sampled steps of steady requests, prefill
//! and decode apart, as the mean seconds of each part and its share of the step. Means, not
//! percentiles: the parts of a mean step add up to the mean step, which is what a user reads
//! to see which part to make faster. n is the number of sampled steps.

use serde::{Deserialize, Serialize};

use crate::event::StepParts;
use crate::util::format::{ms, percent};
use crate::util::table::{TextTable, MISSING};

/// What the table calls the weight matmuls, the row after the parts: they lie inside
/// attention, MLP and head (a share of the step, not a part of it).
const MATMULS: &str = "(of which weight matmuls)";

/// The table's rows in `PhaseParts::parts_s` order: the parts of `StepParts::PARTS`, then the
/// weight matmuls.
pub fn labels() -> impl Iterator<Item = &'static str> {
    StepParts::PARTS
        .iter()
        .map(|(_, label)| *label)
        .chain([MATMULS])
}

/// A step's seconds per row of `labels`; `None` where its model does not trace the part.
fn seconds(p: &StepParts) -> [Option<f64>; 8] {
    let mut out = [p.matmul_s; 8];
    out[..7].copy_from_slice(&p.seconds());
    out
}

/// Sums of one phase's sampled steps.
#[derive(Clone, Debug, Default)]
struct Sums {
    n: u64,
    tokens: u64,
    wall_s: f64,
    parts: [f64; 8],
    /// Steps whose model traced each part.
    traced: [u64; 8],
}

impl Sums {
    fn add(&mut self, p: &StepParts) {
        self.n += 1;
        self.tokens += p.tokens as u64;
        self.wall_s += p.wall_s;
        for (i, s) in seconds(p).into_iter().enumerate() {
            if let Some(s) = s {
                self.parts[i] += s;
                self.traced[i] += 1;
            }
        }
    }

    fn mean(&self) -> Option<PhaseParts> {
        if self.n == 0 {
            return None;
        }
        let n = self.n as f64;
        let mut parts_s = [None; 8];
        for (i, mean) in parts_s.iter_mut().enumerate() {
            // A part some sampled steps did not trace has no mean of all of them.
            *mean = (self.traced[i] == self.n).then(|| self.parts[i] / n);
        }
        Some(PhaseParts {
            n: self.n,
            tokens: self.tokens as f64 / n,
            wall_s: self.wall_s / n,
            parts_s,
        })
    }
}

/// The fold of sampled steps: steady requests only (warmup steps pay first-touch costs that
/// are not the steady step's).
#[derive(Clone, Debug, Default)]
pub struct StepPartsStats {
    prefill: Sums,
    decode: Sums,
}

impl StepPartsStats {
    pub fn record(&mut self, p: &StepParts) {
        if p.warmup {
            return;
        }
        if p.is_prefill() {
            self.prefill.add(p);
        } else {
            self.decode.add(p);
        }
    }

    /// Whether a steady step has been sampled.
    pub fn has_samples(&self) -> bool {
        self.prefill.n + self.decode.n > 0
    }

    pub fn reset(&mut self) {
        *self = StepPartsStats::default();
    }

    /// `None` when no step was sampled.
    pub fn summary(&self) -> Option<StepPartsSummary> {
        let (prefill, decode) = (self.prefill.mean(), self.decode.mean());
        (prefill.is_some() || decode.is_some()).then_some(StepPartsSummary { prefill, decode })
    }
}

/// One phase's mean sampled step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseParts {
    /// Steps sampled.
    pub n: u64,
    /// Mean tokens per step.
    pub tokens: f64,
    pub wall_s: f64,
    /// Mean seconds per row of `labels()`; `None` for a part the model does not trace
    /// (its time is in the rest of the forward).
    pub parts_s: [Option<f64>; 8],
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepPartsSummary {
    pub prefill: Option<PhaseParts>,
    pub decode: Option<PhaseParts>,
}

impl StepPartsSummary {
    /// The phases that were sampled, named.
    pub fn phases(&self) -> impl Iterator<Item = (&'static str, &PhaseParts)> {
        [("prefill", &self.prefill), ("decode", &self.decode)]
            .into_iter()
            .filter_map(|(name, p)| Some((name, p.as_ref()?)))
    }

    /// A row per part, a column pair (mean ms, share of the step) per phase.
    pub fn markdown(&self) -> String {
        let phases: Vec<(&str, &PhaseParts)> = self.phases().collect();
        let mut header = Vec::new();
        for (name, p) in &phases {
            header.push(format!("{name} (n={}, {:.0} tok)", p.n, p.tokens));
            header.push(format!("{name} share"));
        }
        let mut t = TextTable::new().left(["part"]).right(header);
        let share = |s: f64, p: &PhaseParts| {
            if p.wall_s > 0.0 {
                percent(s / p.wall_s)
            } else {
                MISSING.to_string()
            }
        };
        for (i, part) in labels().enumerate() {
            let mut row = vec![part.to_string()];
            for (_, p) in &phases {
                row.push(p.parts_s[i].map_or(MISSING.to_string(), ms));
                row.push(p.parts_s[i].map_or(MISSING.to_string(), |s| share(s, p)));
            }
            t.row(row);
        }
        let mut row = vec!["step".to_string()];
        for (_, p) in &phases {
            row.push(ms(p.wall_s));
            row.push(percent(1.0));
        }
        t.row(row);
        t.markdown()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(step: u32, warmup: bool, scale: f64) -> StepParts {
        StepParts {
            index: 3,
            step,
            warmup,
            tokens: if step == 0 { 128 } else { 1 },
            wall_s: 10.0 * scale,
            input_s: 0.5 * scale,
            embedding_s: None,
            attention_s: Some(3.0 * scale),
            mlp_s: Some(4.0 * scale),
            head_s: Some(1.0 * scale),
            rest_s: 1.0 * scale,
            matmul_s: Some(6.0 * scale),
            sample_s: 0.5 * scale,
        }
    }

    #[test]
    fn means_per_phase_leave_warmup_out_and_add_up_to_the_step() {
        let mut s = StepPartsStats::default();
        assert_eq!(s.summary(), None);
        s.record(&parts(0, true, 100.0));
        s.record(&parts(1, true, 100.0));
        assert_eq!(s.summary(), None, "warmup steps are not steady steps");
        s.record(&parts(0, false, 0.010));
        s.record(&parts(0, false, 0.030));
        s.record(&parts(5, false, 0.001));
        let sum = s.summary().unwrap();
        let pre = sum.prefill.as_ref().unwrap();
        assert_eq!(pre.n, 2);
        assert!((pre.wall_s - 0.2).abs() < 1e-12);
        assert!((pre.parts_s[3].unwrap() - 0.08).abs() < 1e-12, "{pre:?}");
        // The parts but the matmuls (inside them) add up to the step.
        let parts: f64 = pre.parts_s[..7].iter().flatten().sum();
        assert!((parts - pre.wall_s).abs() < 1e-12, "{pre:?}");
        assert_eq!(pre.parts_s[1], None, "an untraced part has no mean");
        assert_eq!(pre.tokens, 128.0);
        let dec = sum.decode.as_ref().unwrap();
        assert_eq!(dec.n, 1);
        assert!((dec.parts_s[7].unwrap() - 0.006).abs() < 1e-12);

        let md = sum.markdown();
        assert!(md.contains("prefill (n=2, 128 tok)"), "{md}");
        assert!(
            md.contains("| mlp | 80.000 ms | 40.0 % | 4.000 ms | 40.0 % |"),
            "{md}"
        );
        assert!(md.contains("| embedding | - | - | - | - |"), "{md}");
        s.reset();
        assert_eq!(s.summary(), None);
    }
}
