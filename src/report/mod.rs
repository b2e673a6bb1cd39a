//! `infertop report`: the summary a run printed, recomputed from its record, plus what the record
//! tells beyond it: when latency settled and what warmup cost, goodput against an SLO, roofline
//! utilisation, and the cost of output tokens. Beside it, everything else made from records
//! (the format itself is `record`'s): comparisons of two runs (`compare`), every statistic per
//! window of run time (`slice`), SVG plots (`plot`), the Perfetto trace (`trace`) and llm-d's
//! benchmark report (`llmd`).

pub mod compare;
pub mod llmd;
pub mod plot;
pub mod slice;
pub mod trace;

use serde::Serialize;
use serde_json::Value;

use crate::event::RequestDone;
use crate::record::line::Header;
use crate::record::reader::Record;
use crate::stats::goodput::{self, Goodput};
use crate::stats::roofline::{self, Peak};
use crate::stats::{median, settle_point, warmup_cost_s, SettleRule, Slo};
use crate::summary::{RunSummary, SummaryFormat};
use crate::util::format::{ms, percent, si_unit};

/// What the report is asked to add to the summary.
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// Overrides the record's own `--slo`.
    pub slo: Option<Slo>,
    /// Hardware cost per hour, in any currency.
    pub cost_per_hour: Option<f64>,
    /// Bytes/s (`--peak-bw`).
    pub peak_bw: Option<f64>,
    /// FLOP/s (`--peak-flops`).
    pub peak_flops: Option<f64>,
    /// A device name to look up in the known-device table (`--device-name`).
    pub device_name: Option<String>,
    /// Measure this CPU when a CPU record has no other peak figures.
    pub probe: bool,
    pub rule: SettleRule,
}

/// When latency settled (see `stats::steady`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settling {
    pub rule: String,
    /// Request `index` at which TTFT / TPOT settled; `None`: not settled.
    pub ttft_settled_at: Option<u64>,
    pub tpot_settled_at: Option<u64>,
    /// The later of the two: the first request of the detected steady state.
    pub settled_at: Option<u64>,
    /// Requests before it.
    pub warmup_requests_detected: Option<usize>,
    /// Extra E2E seconds of those requests over the steady mean E2E.
    pub warmup_cost_s: Option<f64>,
    /// What `--warmup N` marked.
    pub warmup_requests_flagged: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoodputReport {
    pub slo: Slo,
    /// "record" (the run's `--slo`) or "--slo" (given to report).
    pub slo_from: String,
    #[serde(flatten)]
    pub goodput: Goodput,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RooflineReport {
    pub peak: Peak,
    /// Median over steady requests of decode bytes/step / TPOT / peak bandwidth.
    pub decode_bw_utilisation: Option<f64>,
    /// Median achieved decode bandwidth, bytes/s.
    pub decode_bw_achieved: Option<f64>,
    /// Median bytes read per decode step.
    pub decode_bytes_per_step: Option<f64>,
    /// What those bytes count: all weights, or a mixture of experts' active weights.
    pub decode_basis: String,
    /// A mixture of experts: prefill FLOPs count active parameters.
    pub sparse: bool,
    /// Median over steady requests of prefill FLOPs / TTFT / peak FLOP/s.
    pub prefill_compute_utilisation: Option<f64>,
    /// Median achieved prefill FLOP/s.
    pub prefill_flops_achieved: Option<f64>,
    /// Why a figure is missing, if one is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostReport {
    pub cost_per_hour: f64,
    pub output_tokens: u64,
    pub duration_s: f64,
    pub output_tok_s: f64,
    pub cost_per_million_output_tokens: Option<f64>,
}

/// Everything `report` prints besides the summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analysis {
    pub settling: Settling,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<GoodputReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RooflineReport>,
    /// Why there is no roofline (no model info, unknown GPU, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline_unavailable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostReport>,
}

/// A record's report: the recomputed summary and the analysis.
#[derive(Clone, Debug)]
pub struct Report {
    pub summary: RunSummary,
    pub analysis: Analysis,
    /// The traffic the run sent (a dataset, conversations, shared prefixes), from its header.
    pub traffic: Option<crate::event::TrafficInfo>,
}

impl Report {
    pub fn of(rec: &Record, opts: &ReportOptions) -> Report {
        Report {
            summary: rec.summary(),
            analysis: analyse(rec, opts),
            traffic: rec.config().and_then(|c| c.traffic.clone()),
        }
    }

    /// The run's summary object with an `analysis` key: what `--format json` prints, and
    /// what a caller adds its own keys to before printing.
    pub fn to_json(&self) -> Value {
        let mut v = self.summary.to_json();
        if let Some(obj) = v.as_object_mut() {
            obj.insert(
                "analysis".into(),
                serde_json::to_value(&self.analysis).unwrap_or(Value::Null),
            );
        }
        v
    }

    /// md: the summary table and sections; json: one line, `to_json`; csv: the summary table
    /// only (its columns do not fit the analysis).
    pub fn render(&self, format: SummaryFormat) -> String {
        match format {
            SummaryFormat::Csv => self.summary.render(format),
            SummaryFormat::Json => self.to_json().to_string() + "\n",
            SummaryFormat::Md => {
                let traffic = self
                    .traffic
                    .as_ref()
                    .map(|t| format!("\ntraffic: {}\n", t.describe()))
                    .unwrap_or_default();
                traffic + &self.summary.render(format) + &self.analysis.to_markdown()
            }
        }
    }
}

/// The settling analysis alone (also used by the plot).
pub fn settling(rec: &Record, rule: &SettleRule) -> Settling {
    let reqs = rec.counted();
    let ttft: Vec<f64> = reqs.iter().map(|r| r.ttft_s).collect();
    let with_tpot: Vec<usize> = (0..reqs.len())
        .filter(|&i| reqs[i].tpot_s.is_some())
        .collect();
    let tpot: Vec<f64> = with_tpot.iter().filter_map(|&i| reqs[i].tpot_s).collect();
    let ttft_pos = settle_point(&ttft, rule);
    let tpot_pos = settle_point(&tpot, rule).and_then(|p| with_tpot.get(p).copied());
    let pos = match (ttft_pos, tpot_pos, tpot.is_empty()) {
        (Some(a), Some(b), _) => Some(a.max(b)),
        (Some(a), None, true) => Some(a),
        _ => None,
    };
    let e2e: Vec<f64> = reqs.iter().map(|r| r.e2e_s).collect();
    Settling {
        rule: rule.describe(),
        ttft_settled_at: ttft_pos.map(|p| reqs[p].index),
        tpot_settled_at: tpot_pos.map(|p| reqs[p].index),
        settled_at: pos.map(|p| reqs[p].index),
        warmup_requests_detected: pos,
        warmup_cost_s: pos.map(|p| warmup_cost_s(&e2e, p)),
        warmup_requests_flagged: reqs.iter().filter(|r| r.warmup).count() as u64,
    }
}

fn analyse(rec: &Record, opts: &ReportOptions) -> Analysis {
    let steady: Vec<&RequestDone> = rec.steady().collect();
    let busy = goodput::busy_time_s(steady.iter().copied());
    let goodput = match (opts.slo, rec.slo()) {
        (Some(slo), _) => Some((slo, "--slo")),
        (None, Some(slo)) => Some((slo, "record")),
        (None, None) => None,
    }
    .map(|(slo, from)| GoodputReport {
        slo,
        slo_from: from.into(),
        goodput: goodput::goodput(steady.iter().copied(), rec.steady_failures(), &slo, busy),
    });
    let cost = opts.cost_per_hour.map(|per_hour| {
        let tokens: u64 = steady.iter().map(|r| goodput::output_tokens(r)).sum();
        CostReport {
            cost_per_hour: per_hour,
            output_tokens: tokens,
            duration_s: busy,
            output_tok_s: if busy > 0.0 {
                tokens as f64 / busy
            } else {
                0.0
            },
            cost_per_million_output_tokens: goodput::cost_per_million_tokens(
                per_hour, tokens, busy,
            ),
        }
    });
    let (roofline, roofline_unavailable) = match roofline_of(rec, &steady, opts) {
        Ok(r) => (Some(r), None),
        Err(why) => (None, Some(why)),
    };
    Analysis {
        settling: settling(rec, &opts.rule),
        goodput,
        roofline,
        roofline_unavailable,
        cost,
    }
}

/// The GPU name the record's header gives, if any (`machine.gpu`, `machine.gpu_name`, or the
/// first `machine.gpus[].name`).
fn gpu_name(rec: &Record) -> Option<String> {
    rec.header.as_ref()?.machine.gpu.clone()
}

/// The device's peak figures for a record of `header`: the flags', else the known device's
/// (named by `--device-name` or the header's GPU), else a CPU probe where the record was made
/// on a CPU and `--probe` asks.
pub(crate) fn peak_for(header: Option<&Header>, dtype: &str, opts: &ReportOptions) -> Peak {
    let mut peak = Peak::default();
    if let Some(bw) = opts.peak_bw {
        peak.bandwidth = Some(bw);
        peak.basis.push("bandwidth: --peak-bw".into());
    }
    if let Some(f) = opts.peak_flops {
        peak.flops = Some(f);
        peak.basis.push("FLOP/s: --peak-flops".into());
    }
    if peak.bandwidth.is_some() && peak.flops.is_some() {
        return peak;
    }
    let device = header.map(|h| h.config.device.clone()).unwrap_or_default();
    let named = opts
        .device_name
        .clone()
        .or_else(|| header.and_then(|h| h.machine.gpu.clone()));
    let fill = match named.as_deref().and_then(roofline::lookup) {
        Some(dev) => Some(Peak::from_table(dev, dtype)),
        None if device == "cpu" && opts.probe => {
            let mut p = roofline::probe_cpu();
            let here = crate::telemetry::process::cpu_model_name();
            let there = header.map(|h| h.machine.cpu.clone()).unwrap_or_default();
            p.basis.push(if !here.is_empty() && here == there {
                format!("the record was made on the same CPU model ({here})")
            } else {
                format!("the record was made on `{there}`, this machine is `{here}`: the probe may not apply")
            });
            Some(p)
        }
        None => None,
    };
    if let Some(f) = fill {
        let from_fill = |mine: &mut Option<f64>, theirs: Option<f64>| {
            if mine.is_none() && theirs.is_some() {
                *mine = theirs;
                true
            } else {
                false
            }
        };
        let b = from_fill(&mut peak.bandwidth, f.bandwidth);
        let c = from_fill(&mut peak.flops, f.flops);
        if b || c {
            peak.basis.extend(f.basis);
        }
    }
    peak
}

fn roofline_of(
    rec: &Record,
    steady: &[&RequestDone],
    opts: &ReportOptions,
) -> Result<RooflineReport, String> {
    let model = rec
        .model
        .as_ref()
        .ok_or("the record has no model information (no run_started event)")?;
    if steady.is_empty() {
        return Err("no steady-state requests".into());
    }
    let peak = peak_for(rec.header.as_ref(), &model.dtype, opts);
    if peak.bandwidth.is_none() && peak.flops.is_none() {
        return Err(format!(
            "no peak figures for device `{}`{}: pass --peak-bw and --peak-flops, or --device-name NAME (one of the known devices: H100, H200, A100, L4, L40S, RTX 4090, ...)",
            rec.config_str("device").unwrap_or_else(|| "?".into()),
            gpu_name(rec).map(|g| format!(" ({g}, not in the table)")).unwrap_or_default()
        ));
    }
    let mut notes = Vec::new();
    let bytes: Vec<f64> = steady
        .iter()
        .filter(|r| r.tpot_s.is_some())
        .map(|r| {
            roofline::decode_bytes_per_step(
                model.active_weight_bytes(),
                model,
                r.prompt_tokens,
                r.output_tokens,
                r.batch,
            )
        })
        .collect();
    let achieved_bw: Vec<f64> = steady
        .iter()
        .filter_map(|r| {
            let t = r.tpot_s?;
            Some(
                roofline::decode_bytes_per_step(
                    model.active_weight_bytes(),
                    model,
                    r.prompt_tokens,
                    r.output_tokens,
                    r.batch,
                ) / t,
            )
        })
        .collect();
    if achieved_bw.is_empty() {
        notes.push("no decode steps (every request generated one token)".to_string());
    }
    let achieved_flops: Vec<f64> = steady
        .iter()
        .filter(|r| r.ttft_s > 0.0)
        .map(|r| roofline::prefill_flops(model.active(), r.prompt_tokens, r.batch) / r.ttft_s)
        .collect();
    let decode_bw_achieved = median(&achieved_bw);
    let prefill_flops_achieved = median(&achieved_flops);
    let decode_bw_utilisation = peak
        .bandwidth
        .and_then(|p| median(&achieved_bw.iter().map(|a| a / p).collect::<Vec<f64>>()));
    let prefill_compute_utilisation = peak
        .flops
        .and_then(|p| median(&achieved_flops.iter().map(|a| a / p).collect::<Vec<f64>>()));
    if decode_bw_utilisation.is_some_and(|u| u > 1.0)
        || prefill_compute_utilisation.is_some_and(|u| u > 1.0)
    {
        notes.push(
            "above 100 %: the peak figure is below what this run reached (a probe taken on a busy machine, or weights small enough to stay in cache); give --peak-bw/--peak-flops"
                .into(),
        );
    }
    if peak.bandwidth.is_none() {
        notes.push("no peak bandwidth: pass --peak-bw".into());
    }
    if peak.flops.is_none() {
        notes.push("no peak FLOP/s: pass --peak-flops".into());
    }
    Ok(RooflineReport {
        peak,
        decode_bw_utilisation,
        decode_bw_achieved,
        decode_bytes_per_step: median(&bytes),
        decode_basis: roofline::decode_basis(model),
        sparse: model.is_sparse(),
        prefill_compute_utilisation,
        prefill_flops_achieved,
        notes,
    })
}

/// `TTFT p95 ≤ 200.000 ms, TPOT ≤ 50.000 ms` (the limits in `SloMetric::ALL` order; the
/// percentile when it is not p99).
pub fn slo_text(slo: &Slo) -> String {
    let parts: Vec<String> = slo
        .limits()
        .map(|(m, l)| {
            let p = if l.percentile == 99 {
                String::new()
            } else {
                format!(" p{}", l.percentile)
            };
            format!("{}{p} ≤ {}", m.label(), ms(l.limit_s))
        })
        .collect();
    parts.join(", ")
}

impl Analysis {
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let s = &self.settling;
        out.push_str("\n## Warmup and steady state\n\n");
        out.push_str(&format!(
            "Rule: the {} (TTFT and TPOT separately).\n\n",
            s.rule
        ));
        let at = |v: Option<u64>| {
            v.map_or("not settled".to_string(), |i| {
                format!("settled at request #{i}")
            })
        };
        out.push_str(&format!(
            "- TTFT: {}; TPOT: {}.\n",
            at(s.ttft_settled_at),
            at(s.tpot_settled_at)
        ));
        match (s.settled_at, s.warmup_requests_detected, s.warmup_cost_s) {
            (Some(_), Some(0), _) => out.push_str(&format!(
                "- Settled from the first request: no warmup detected; `--warmup` marked {}.\n",
                s.warmup_requests_flagged
            )),
            (Some(i), Some(n), Some(cost)) => out.push_str(&format!(
                "- Settled after {n} request{plural} (steady from request #{i}); `--warmup` marked {}.\n- Warmup cost: {:.3} s of E2E over the steady mean in those {n} request{plural}.\n",
                s.warmup_requests_flagged,
                cost,
                plural = if n == 1 { "" } else { "s" },
            )),
            _ => out.push_str(&format!(
                "- Latency did not settle under this rule (too few requests, or still moving); `--warmup` marked {}.\n",
                s.warmup_requests_flagged
            )),
        }
        if let Some(g) = &self.goodput {
            out.push_str(&format!(
                "\n## Goodput ({}; SLO from {})\n\n- {} of {} steady requests ({}) met every SLO ({} failed: misses; requests cut off by the run's end are not counted).\n- Goodput: {:.3} requests/s ({:.3} sequences/s) over {:.3} s of requests (requests meeting the SLO per second of run time; run time = sum of E2E).\n",
                slo_text(&g.slo),
                if g.slo_from == "record" { "the run's --slo" } else { "--slo" },
                g.goodput.met,
                g.goodput.requests,
                percent(g.goodput.share),
                g.goodput.failed,
                g.goodput.goodput_rps,
                g.goodput.goodput_seq_s,
                g.goodput.duration_s
            ));
        }
        out.push_str("\n## Roofline\n\n");
        match (&self.roofline, &self.roofline_unavailable) {
            (Some(r), _) => {
                if let (Some(bytes), Some(ach)) = (r.decode_bytes_per_step, r.decode_bw_achieved) {
                    out.push_str(&format!(
                        "- Decode: {} of peak memory bandwidth ({} achieved{}; {} read per step: {}; median over steady requests).\n",
                        r.decode_bw_utilisation.map_or("?".into(), percent),
                        si_unit(ach, "B/s"),
                        r.peak.bandwidth.map(|p| format!(" of {}", si_unit(p, "B/s"))).unwrap_or_default(),
                        si_unit(bytes, "B"),
                        r.decode_basis,
                    ));
                }
                if let Some(ach) = r.prefill_flops_achieved {
                    out.push_str(&format!(
                        "- Prefill: {} of peak FLOP/s ({} achieved{}; 2 × {}params × prompt tokens × batch / TTFT; median over steady requests).\n",
                        r.prefill_compute_utilisation.map_or("?".into(), percent),
                        si_unit(ach, "FLOP/s"),
                        r.peak.flops.map(|p| format!(" of {}", si_unit(p, "FLOP/s"))).unwrap_or_default(),
                        if r.sparse { "active " } else { "" },
                    ));
                }
                out.push_str(&format!("- Peak figures: {}.\n", r.peak.basis.join("; ")));
                for n in &r.notes {
                    out.push_str(&format!("- Note: {n}.\n"));
                }
            }
            (None, Some(why)) => out.push_str(&format!("- Not available: {why}.\n")),
            (None, None) => out.push_str("- Not available.\n"),
        }
        if let Some(c) = &self.cost {
            out.push_str(&format!(
                "\n## Cost (--cost-per-hour {})\n\n",
                c.cost_per_hour
            ));
            match c.cost_per_million_output_tokens {
                Some(m) => out.push_str(&format!(
                    "- {m:.4} per million output tokens ({:.1} output tokens/s: {} tokens over {:.3} s of steady requests, one request at a time).\n",
                    c.output_tok_s, c.output_tokens, c.duration_s
                )),
                None => out.push_str("- Not available: no output tokens in steady state.\n"),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_text_lists_the_limits() {
        let slo = Slo::parse("ttft=200ms,e2e:p90=1s").unwrap_or_default();
        assert_eq!(slo_text(&slo), "TTFT ≤ 200.000 ms, E2E p90 ≤ 1000.000 ms");
    }
}
