//! Where a step's time goes (`--step-parts N`): the sampled steps of steady requests, prefill
//! and decode apart, as the mean seconds of each part and its share of the step. Means, not
//! percentiles: the parts of a mean step add up to the mean step, which is what a user reads
//! to see which part to make faster. n is the number of sampled steps.

use serde::{Deserialize, Serialize};

use crate::event::{MachinePeak, ModelInfo, StepParts};
use crate::stats::roofline::{self, Bound, Work};
use crate::util::format::{ms, percent, si_unit};
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
    /// Bytes and FLOPs of each part, summed over the steps whose work is known.
    work: [Work; 8],
    worked: [u64; 8],
}

impl Sums {
    fn add(&mut self, p: &StepParts, work: Option<[Option<Work>; 8]>) {
        self.n += 1;
        self.tokens += p.tokens as u64;
        self.wall_s += p.wall_s;
        for (i, s) in seconds(p).into_iter().enumerate() {
            if let Some(s) = s {
                self.parts[i] += s;
                self.traced[i] += 1;
            }
        }
        for (i, w) in work.into_iter().flatten().enumerate() {
            if let Some(w) = w {
                self.work[i].bytes += w.bytes;
                self.work[i].flops += w.flops;
                self.worked[i] += 1;
            }
        }
    }

    fn mean(&self) -> Option<PhaseParts> {
        if self.n == 0 {
            return None;
        }
        let n = self.n as f64;
        let mut parts_s = [None; 8];
        let (mut bytes, mut flops) = ([None; 8], [None; 8]);
        for i in 0..8 {
            // A part some sampled steps did not trace has no mean of all of them.
            parts_s[i] = (self.traced[i] == self.n).then(|| self.parts[i] / n);
            if self.worked[i] == self.n {
                bytes[i] = Some(self.work[i].bytes / n);
                flops[i] = Some(self.work[i].flops / n);
            }
        }
        Some(PhaseParts {
            n: self.n,
            tokens: self.tokens as f64 / n,
            wall_s: self.wall_s / n,
            parts_s,
            bytes,
            flops,
            roofs: [None; 8],
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
    /// One sampled step; `model` (the run's) gives each part's bytes and FLOPs.
    pub fn record(&mut self, p: &StepParts, model: Option<&ModelInfo>) {
        if p.warmup {
            return;
        }
        let work = model.and_then(|m| roofline::part_work(m, p.is_prefill(), p.tokens, p.context));
        if p.is_prefill() {
            self.prefill.add(p, work);
        } else {
            self.decode.add(p, work);
        }
    }

    /// Whether a steady step has been sampled.
    pub fn has_samples(&self) -> bool {
        self.prefill.n + self.decode.n > 0
    }

    pub fn reset(&mut self) {
        *self = StepPartsStats::default();
    }

    /// `None` when no step was sampled; `peak`, the machine's as the run measured it.
    pub fn summary(&self, peak: Option<&MachinePeak>) -> Option<StepPartsSummary> {
        let with_roofs = |mut p: PhaseParts| {
            if let Some(peak) = peak {
                p.roofs = std::array::from_fn(|i| p.roof(i, peak));
            }
            p
        };
        let prefill = self.prefill.mean().map(with_roofs);
        let decode = self.decode.mean().map(with_roofs);
        (prefill.is_some() || decode.is_some()).then(|| StepPartsSummary {
            prefill,
            decode,
            peak: peak.cloned(),
        })
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
    /// (its time is in the rest of the forward). In JSON an object by the parts' keys
    /// (`{"input": …, "attention": …, "matmul": …}`), so scripts need not know the order.
    #[serde(with = "by_key")]
    pub parts_s: [Option<f64>; 8],
    /// Mean bytes each part reads per step (weights, and the KV cache for attention), by the
    /// same keys; `None` where the part has no such figure or the model's parts are unknown.
    #[serde(default, with = "by_key")]
    pub bytes: [Option<f64>; 8],
    /// Mean FLOPs per step, likewise.
    #[serde(default, with = "by_key")]
    pub flops: [Option<f64>; 8],
    /// Each row against the run's peaks, computed with the summary (what a table shows).
    #[serde(skip)]
    pub roofs: [Option<roofline::Roof>; 8],
}

impl PhaseParts {
    /// Row `i` of `labels()` against the roofline of `peak`.
    fn roof(&self, i: usize, peak: &MachinePeak) -> Option<roofline::Roof> {
        let work = Work {
            bytes: self.bytes[i]?,
            flops: self.flops[i]?,
        };
        roofline::roof(work, self.parts_s[i]?, peak)
    }

    /// Row `i`'s rate in the words of its roof: "9.2 GB/s, 39 % of peak (memory)".
    pub fn rate_text(&self, i: usize) -> Option<String> {
        let s = self.parts_s[i].filter(|s| *s > 0.0)?;
        let bytes = self.bytes[i]?;
        let flops = self.flops[i]?;
        Some(match self.roofs[i] {
            Some(r) if r.bound == Bound::Compute => format!(
                "{}, {} of peak (compute)",
                si_unit(flops / s, "FLOP/s"),
                percent(r.of_peak)
            ),
            Some(r) => format!(
                "{}, {} of peak (memory)",
                si_unit(bytes / s, "B/s"),
                percent(r.of_peak)
            ),
            None => format!(
                "{}, {}",
                si_unit(bytes / s, "B/s"),
                si_unit(flops / s, "FLOP/s")
            ),
        })
    }
}

/// The keys of `PhaseParts::parts_s` in JSON: the parts' keys, then `matmul`.
fn keys() -> impl Iterator<Item = &'static str> {
    StepParts::PARTS
        .iter()
        .map(|(key, _)| *key)
        .chain(["matmul"])
}

/// `parts_s` as an object keyed by `keys()`.
mod by_key {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(parts: &[Option<f64>; 8], s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(parts.len()))?;
        for (key, v) in super::keys().zip(parts) {
            m.serialize_entry(key, v)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[Option<f64>; 8], D::Error> {
        let m = BTreeMap::<String, Option<f64>>::deserialize(d)?;
        let mut out = [None; 8];
        for (slot, key) in out.iter_mut().zip(super::keys()) {
            *slot = m.get(key).copied().flatten();
        }
        Ok(out)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepPartsSummary {
    pub prefill: Option<PhaseParts>,
    pub decode: Option<PhaseParts>,
    /// The machine's peaks the parts are read against (measured at the run's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<MachinePeak>,
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
        let mut out = t.markdown();
        out.push_str(&self.roofline_markdown(&phases));
        out
    }

    /// Each part's bytes and FLOPs per step and its rate against the machine's roofline,
    /// where the model's parts are known.
    fn roofline_markdown(&self, phases: &[(&str, &PhaseParts)]) -> String {
        let rows: Vec<(usize, &str)> = labels()
            .enumerate()
            .filter(|(i, _)| phases.iter().any(|(_, p)| p.bytes[*i].is_some()))
            .collect();
        if rows.is_empty() {
            return String::new();
        }
        let mut header = Vec::new();
        for (name, _) in phases {
            header.extend([
                format!("{name} read"),
                format!("{name} FLOPs"),
                format!("{name} rate"),
            ]);
        }
        let mut t = TextTable::new().left(["part"]).right(header);
        let peak = self.peak.as_ref();
        for (i, label) in rows {
            let mut row = vec![label.to_string()];
            for (_, p) in phases {
                row.push(p.bytes[i].map_or(MISSING.to_string(), |b| si_unit(b, "B")));
                let flops = p.flops[i].filter(|f| *f > 0.0);
                row.push(flops.map_or(MISSING.to_string(), |f| si_unit(f, "FLOP")));
                row.push(p.rate_text(i).unwrap_or_else(|| MISSING.to_string()));
            }
            t.row(row);
        }
        let basis = match peak {
            Some(p) => {
                let mut words = Vec::new();
                if let Some(b) = p.bandwidth {
                    words.push(si_unit(b, "B/s"));
                }
                if let Some(f) = p.flops {
                    words.push(si_unit(f, "FLOP/s"));
                }
                format!("peak {} ({})", words.join(" and "), p.basis.join("; "))
            }
            None => "no peak measured: rates only".to_string(),
        };
        format!(
            "\nthe parts against the roofline (bytes read and FLOPs per step; a part whose FLOPs per byte are below the machine's is memory-bound; {basis}):\n\n{}",
            t.markdown()
        )
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
            context: 0,
        }
    }

    #[test]
    fn means_per_phase_leave_warmup_out_and_add_up_to_the_step() {
        let mut s = StepPartsStats::default();
        assert_eq!(s.summary(None), None);
        s.record(&parts(0, true, 100.0), None);
        s.record(&parts(1, true, 100.0), None);
        assert_eq!(s.summary(None), None, "warmup steps are not steady steps");
        s.record(&parts(0, false, 0.010), None);
        s.record(&parts(0, false, 0.030), None);
        s.record(&parts(5, false, 0.001), None);
        let sum = s.summary(None).unwrap();
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
        assert_eq!(s.summary(None), None);
    }
}
