//! `--runs N`: a run repeated N times, carried out as a sweep of N cells of one workload (the
//! sweep's engine with a cooldown between cells, its fold, its record's `cell` lines), and
//! what it prints: each run's own row (the cell's figures, as a sweep's table has them), then
//! every headline statistic across the runs (`stats::repeat`): its value per run, mean,
//! standard deviation, coefficient of variation and the 95 % confidence interval of the mean,
//! with n (runs) always. The same table comes from the finished runs live and from a record
//! (`report`), each run recomputed from its lines with the sweep's code.
//!
//! A run counts across runs when it was measured as asked (status ok, steady requests); a run
//! cut short or failed keeps its row and is in no figure across runs.

use serde_json::{json, Value};

use super::CellResult;
use crate::event::ModelInfo;
use crate::record::line::{CellStatus, Header, RepeatConfig, SweepConfig};
use crate::stats::repeat::{Spread, CONFIDENCE};
use crate::stats::{Slo, Summary};
use crate::summary::SummaryFormat;
use crate::util::table::{or_missing, TextTable};

/// What a statistic measures, for its formatting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds (shown in ms).
    Seconds,
    /// Tokens per second.
    TokS,
    /// Requests or sequences per second.
    PerS,
    /// A share, 0..=1 (shown in %).
    Share,
}

impl Unit {
    fn key(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::TokS => "tok/s",
            Unit::PerS => "1/s",
            Unit::Share => "share",
        }
    }

    /// What a markdown row adds to its label (a rate's label names its unit).
    fn shown(self) -> &'static str {
        match self {
            Unit::Seconds => " (ms)",
            Unit::Share => " (%)",
            Unit::TokS | Unit::PerS => "",
        }
    }

    /// A value as a markdown cell shows it.
    fn format(self, v: f64) -> String {
        match self {
            Unit::Seconds => format!("{:.3}", v * 1e3),
            Unit::TokS => format!("{v:.1}"),
            Unit::PerS => format!("{v:.3}"),
            Unit::Share => format!("{:.1}", v * 100.0),
        }
    }
}

/// One statistic across the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Across {
    /// `ttft_s`, `output_tok_s`, …
    pub metric: &'static str,
    /// `p50`, `p90`, `p99`, `mean`; empty for a run-level figure (a throughput).
    pub stat: &'static str,
    /// `TTFT p50`, `output tok/s`.
    pub label: String,
    pub unit: Unit,
    /// Per run, in order; `None` where the run has none or does not count.
    pub values: Vec<Option<f64>>,
    pub spread: Spread,
}

impl Across {
    fn of(
        metric: &'static str,
        stat: &'static str,
        label: String,
        unit: Unit,
        values: Vec<Option<f64>>,
    ) -> Across {
        let present: Vec<f64> = values.iter().flatten().copied().collect();
        Across {
            metric,
            stat,
            label,
            unit,
            spread: Spread::of(&present),
            values,
        }
    }

    /// `ttft_s.p50`, or the metric alone.
    pub fn key(&self) -> String {
        if self.stat.is_empty() {
            self.metric.to_string()
        } else {
            format!("{}.{}", self.metric, self.stat)
        }
    }
}

/// Whether a run counts across runs: measured as asked.
pub fn counts(r: &CellResult) -> bool {
    r.status == CellStatus::Ok && r.n > 0
}

/// The latencies across runs, each at these statistics.
const LATENCIES: [(&str, &str); 4] = [
    ("ttft_s", "TTFT"),
    ("tpot_s", "TPOT"),
    ("itl_s", "ITL"),
    ("e2e_s", "E2E"),
];
const STATS: [&str; 4] = ["p50", "p90", "p99", "mean"];

fn latency<'a>(r: &'a CellResult, metric: &str) -> &'a Summary {
    match metric {
        "ttft_s" => &r.ttft,
        "tpot_s" => &r.tpot,
        "itl_s" => &r.itl,
        _ => &r.e2e,
    }
}

fn stat_of(s: &Summary, stat: &str) -> Option<f64> {
    if s.n == 0 {
        return None;
    }
    Some(match stat {
        "p50" => s.p50,
        "p90" => s.p90,
        "p99" => s.p99,
        _ => s.mean,
    })
}

/// Every headline statistic across `runs` (goodput only with an SLO).
pub fn across(runs: &[CellResult], slo: &Slo) -> Vec<Across> {
    let each = |f: &dyn Fn(&CellResult) -> Option<f64>| -> Vec<Option<f64>> {
        runs.iter()
            .map(|r| if counts(r) { f(r) } else { None })
            .collect()
    };
    let mut rows = Vec::new();
    for (metric, name) in LATENCIES {
        for stat in STATS {
            rows.push(Across::of(
                metric,
                stat,
                format!("{name} {stat}"),
                Unit::Seconds,
                each(&|r| stat_of(latency(r, metric), stat)),
            ));
        }
    }
    rows.push(Across::of(
        "output_tok_s",
        "",
        "output tok/s".into(),
        Unit::TokS,
        each(&|r| r.output_tok_s),
    ));
    rows.push(Across::of(
        "requests_s",
        "",
        "requests/s".into(),
        Unit::PerS,
        each(&|r| r.requests_s),
    ));
    if !slo.is_empty() {
        rows.push(Across::of(
            "goodput_seq_s",
            "",
            "goodput seq/s".into(),
            Unit::PerS,
            each(&|r| r.goodput_seq_s),
        ));
        rows.push(Across::of(
            "slo_met_share",
            "",
            "SLO met".into(),
            Unit::Share,
            each(&|r| r.slo_met_share),
        ));
    }
    rows
}

/// `infertop --runs 3: synthetic:tiny (llama, f32) on cpu; batch 1, prompt 8, output 4; 1
/// warmup + 4 steady requests each; 1 s cooldown between runs`.
pub fn title(header: &Header, model: Option<&ModelInfo>, config: &SweepConfig) -> String {
    let c = &header.config;
    let repeat = config.repeat.unwrap_or_default();
    let what = match model {
        Some(m) if m.source != crate::event::ModelSource::Http => {
            format!("{} ({}, {}) on {}", m.name, m.arch, m.dtype, c.device)
        }
        Some(m) => format!("{} at {}", m.name, c.endpoints.join(", ")),
        None if c.is_server() => c.endpoints.join(", "),
        None => format!("{} on {}", c.model, c.device),
    };
    let workload = config
        .cells
        .first()
        .map(|p| format!("; {}", p.words()))
        .unwrap_or_default();
    let each = match (config.repetitions, &c.duration) {
        (_, Some(d)) => format!("{d} each, the first {} requests warmup", config.warmup),
        (0, None) => format!("{} warmup requests each, then the rest", config.warmup),
        (n, None) => format!("{} warmup + {n} steady requests each", config.warmup),
    };
    let cooldown = if repeat.cooldown_s > 0.0 {
        format!("{} s cooldown between runs", repeat.cooldown_s)
    } else {
        "no cooldown between runs".to_string()
    };
    format!(
        "infertop --runs {}: {what}{workload}; {each}; {cooldown}",
        repeat.runs
    )
}

/// A finished (or interrupted) repetition as printed: each run, then the statistics across.
#[derive(Clone, Debug)]
pub struct RunsTable<'a> {
    pub title: String,
    pub repeat: RepeatConfig,
    pub runs: &'a [CellResult],
    /// Computed once, from `runs`.
    pub across: Vec<Across>,
    /// Runs that never started (the repetition was cut short).
    pub not_run: usize,
    /// Why it ended early, in words.
    pub interrupted: Option<String>,
}

impl<'a> RunsTable<'a> {
    pub fn of(
        title: String,
        repeat: RepeatConfig,
        runs: &'a [CellResult],
        slo: &Slo,
        not_run: usize,
        interrupted: Option<String>,
    ) -> RunsTable<'a> {
        RunsTable {
            title,
            repeat,
            across: across(runs, slo),
            runs,
            not_run,
            interrupted,
        }
    }

    /// Runs that count across runs.
    pub fn counted(&self) -> usize {
        self.runs.iter().filter(|r| counts(r)).count()
    }

    pub fn render(&self, format: SummaryFormat) -> String {
        match format {
            SummaryFormat::Md => self.to_markdown(),
            SummaryFormat::Json => self.to_json().to_string() + "\n",
            SummaryFormat::Csv => self.to_csv(),
        }
    }

    /// `{"type":"runs", …}`: each run as a sweep's cell is written (`run` 1-based), and every
    /// statistic across them (seconds, tokens or requests per second, shares 0..=1).
    pub fn to_json(&self) -> Value {
        let per_run: Vec<Value> = self
            .runs
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("type".into(), "run".into());
                    obj.insert("run".into(), (r.cell + 1).into());
                    obj.insert("counted".into(), counts(r).into());
                }
                v
            })
            .collect();
        let across: Vec<Value> = self
            .across
            .iter()
            .map(|a| {
                let s = &a.spread;
                json!({
                    "statistic": a.key(),
                    "metric": a.metric,
                    "stat": if a.stat.is_empty() { Value::Null } else { a.stat.into() },
                    "unit": a.unit.key(),
                    "values": a.values,
                    "n": s.n,
                    "mean": s.mean,
                    "sd": s.sd,
                    "cv": s.cv,
                    "ci_lo": s.ci_lo,
                    "ci_hi": s.ci_hi,
                    "t": s.t,
                })
            })
            .collect();
        json!({
            "type": "runs",
            "title": self.title,
            "runs": self.repeat.runs,
            "cooldown_s": self.repeat.cooldown_s,
            "counted_runs": self.counted(),
            "confidence": CONFIDENCE,
            "per_run": per_run,
            "across_runs": across,
            "not_run": self.not_run,
            "interrupted": self.interrupted,
        })
    }

    /// A row per statistic: its spread across runs, then its value in each run (seconds,
    /// per second, shares; empty where a run has none).
    fn to_csv(&self) -> String {
        let mut head: Vec<String> = [
            "statistic",
            "metric",
            "stat",
            "unit",
            "n",
            "mean",
            "sd",
            "cv",
            "ci95_lo",
            "ci95_hi",
            "t",
        ]
        .map(String::from)
        .to_vec();
        head.extend((1..=self.runs.len()).map(|k| format!("run_{k}")));
        let num = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
        let mut rows = vec![head];
        for a in &self.across {
            let s = &a.spread;
            let mut row = vec![
                a.key(),
                a.metric.to_string(),
                a.stat.to_string(),
                a.unit.key().to_string(),
                s.n.to_string(),
                num(s.mean),
                num(s.sd),
                num(s.cv),
                num(s.ci_lo),
                num(s.ci_hi),
                num(s.t),
            ];
            row.extend(a.values.iter().map(|v| num(*v)));
            rows.push(row);
        }
        crate::util::csv_text(rows)
    }

    fn to_markdown(&self) -> String {
        let mut out = format!("\n{}\n\n", self.title);
        out.push_str(&self.runs_markdown());
        out.push_str(&self.across_markdown());
        out
    }

    /// Each run's own row: its status, n and headline figures.
    fn runs_markdown(&self) -> String {
        let mut t = TextTable::new().right(["run"]).left(["status"]).right([
            "n",
            "TTFT p50",
            "TTFT p99",
            "TPOT p50",
            "TPOT p99",
            "ITL p50",
            "ITL p99",
            "E2E p50",
            "E2E p99",
            "out tok/s",
            "req/s",
            "s",
        ]);
        let ms = |s: &Summary, v: f64| or_missing((s.n > 0).then(|| Unit::Seconds.format(v)));
        for r in self.runs {
            let status = match (&r.status, &r.reason) {
                (CellStatus::Ok, None) if r.failed_requests > 0 => {
                    format!("ok, {} failed requests", r.failed_requests)
                }
                (CellStatus::Ok, None) => "ok".to_string(),
                (CellStatus::Ok, Some(why)) => format!("ok: {why}"),
                (CellStatus::Failed, why) => {
                    format!("FAILED: {}", why.as_deref().unwrap_or("?"))
                }
                (CellStatus::Stopped, why) => why.clone().unwrap_or_else(|| "stopped".into()),
            };
            t.row([
                (r.cell + 1).to_string(),
                status,
                r.n.to_string(),
                ms(&r.ttft, r.ttft.p50),
                ms(&r.ttft, r.ttft.p99),
                ms(&r.tpot, r.tpot.p50),
                ms(&r.tpot, r.tpot.p99),
                ms(&r.itl, r.itl.p50),
                ms(&r.itl, r.itl.p99),
                ms(&r.e2e, r.e2e.p50),
                ms(&r.e2e, r.e2e.p99),
                or_missing(r.output_tok_s.map(|v| Unit::TokS.format(v))),
                or_missing(r.requests_s.map(|v| Unit::PerS.format(v))),
                format!("{:.1}", r.elapsed_s),
            ]);
        }
        let mut out = t.markdown();
        if self.not_run > 0 {
            out.push_str(&format!(
                "\n{} of {} runs never started ({}).\n",
                self.not_run,
                self.repeat.runs,
                self.interrupted.as_deref().unwrap_or("cut short")
            ));
        }
        out
    }

    /// Every statistic across the runs that count.
    fn across_markdown(&self) -> String {
        let n = self.counted();
        let mut out = String::new();
        let left_out: Vec<String> = self
            .runs
            .iter()
            .filter(|r| !counts(r))
            .map(|r| (r.cell + 1).to_string())
            .collect();
        if !left_out.is_empty() {
            out.push_str(&format!(
                "\nRun {} did not measure as asked (failed, stopped or no steady request): in no figure across runs.\n",
                left_out.join(", ")
            ));
        }
        let t = self.across.iter().find_map(|a| a.spread.t);
        let how = match (n, t) {
            (0, _) => "no run counts, so there is nothing across runs".to_string(),
            (1, _) => "one run counts: its values, and no spread".to_string(),
            (n, Some(t)) => format!(
                "mean, standard deviation (n − 1), CV = sd / mean, and the 95 % confidence interval of the mean, mean ± t·sd/√n with Student's t at {} degree{} of freedom (t = {t:.3})",
                n - 1,
                if n == 2 { "" } else { "s" }
            ),
            (_, None) => String::new(),
        };
        let runs = if n == 1 { "run" } else { "runs" };
        out.push_str(&format!(
            "\nAcross {n} {runs}: {how}. A run's value is its own statistic over its steady requests (its n above); throughput as a sweep's cell has it (a server's over the interval its load was held, the candle engine's over the sum of its E2E).\n\n"
        ));
        let mut t = TextTable::new()
            .left(["statistic"])
            .right(["n"])
            .left(["per run"])
            .right(["mean", "sd", "CV"])
            .left(["95 % CI of the mean"]);
        for a in &self.across {
            let u = a.unit;
            let f = |v: Option<f64>| or_missing(v.map(|x| u.format(x)));
            let per_run: Vec<String> = a.values.iter().map(|v| f(*v)).collect();
            let s = &a.spread;
            let ci = s.ci_lo.zip(s.ci_hi);
            t.row([
                format!("{}{}", a.label, u.shown()),
                s.n.to_string(),
                per_run.join(", "),
                f(s.mean),
                f(s.sd),
                or_missing(s.cv.map(|c| format!("{:.1} %", c * 100.0))),
                or_missing(ci.map(|(lo, hi)| format!("[{}, {}]", u.format(lo), u.format(hi)))),
            ]);
        }
        out.push_str(&t.markdown());
        out
    }
}

/// `report` of a record of repeated runs: the table again, every run recomputed from its lines.
pub fn report_runs(
    rec: &super::record::SweepRecord,
    slo_override: Option<Slo>,
    format: SummaryFormat,
) -> String {
    let slo = slo_override.unwrap_or(rec.header.config.slo);
    let results = rec.results(&slo);
    let model = rec.cells.iter().find_map(|c| c.record.model.clone());
    let not_run = rec.not_run();
    let table = RunsTable::of(
        title(&rec.header, model.as_ref(), &rec.config),
        rec.config.repeat.unwrap_or_default(),
        &results,
        &slo,
        not_run,
        (not_run > 0).then(|| "cut short".to_string()),
    );
    table.render(format)
}

/// A record of repeated runs as one run's record: every run's requests (each run's numbers
/// moved past the last's, as `record::merge` does for separate runs), so `compare` of two
/// such records compares the pooled requests, and one against a single run's record works.
pub fn pooled(
    rec: super::record::SweepRecord,
    path: &std::path::Path,
) -> crate::record::reader::Record {
    let parts: Vec<crate::record::reader::Record> =
        rec.cells.into_iter().map(|c| c.record).collect();
    let mut merged = crate::record::merge::merge(parts).record;
    merged.path = path.to_path_buf();
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::CellParams;
    use crate::sweep::CellEnding;

    fn run(cell: usize, ttft: &[f64], status: CellStatus) -> CellResult {
        let mut summary = crate::summary::RunSummary::default();
        summary
            .steady
            .set(crate::stats::Metric::Ttft, Summary::of(ttft));
        let tally = crate::sweep::CellTally {
            steady: ttft.len() as u64,
            output_tokens: 10 * ttft.len() as u64,
            busy_s: 2.0,
            ..Default::default()
        };
        CellResult::new(
            cell,
            CellParams::default(),
            CellEnding {
                status,
                reason: None,
                elapsed_s: 1.0,
                steady_wall_s: None,
                prefix_cache: None,
            },
            &summary,
            &tally,
        )
    }

    #[test]
    fn each_statistic_spreads_over_the_runs_that_count() {
        let runs = [
            run(0, &[0.010, 0.012], CellStatus::Ok),
            run(1, &[0.020, 0.022], CellStatus::Ok),
            run(2, &[0.030], CellStatus::Stopped),
            run(3, &[0.015, 0.017], CellStatus::Ok),
        ];
        let rows = across(&runs, &Slo::default());
        let p50 = rows.iter().find(|a| a.key() == "ttft_s.p50").unwrap();
        let p = |v: &[f64]| Summary::of(v).p50;
        let want = [p(&[0.010, 0.012]), p(&[0.020, 0.022]), p(&[0.015, 0.017])];
        assert_eq!(
            p50.values,
            [Some(want[0]), Some(want[1]), None, Some(want[2])]
        );
        let want = Spread::of(&want);
        assert_eq!(p50.spread, want);
        assert_eq!(p50.spread.n, 3);
        // No SLO: no goodput rows; a run with no TPOT has none.
        assert!(rows.iter().all(|a| a.metric != "goodput_seq_s"));
        let tpot = rows.iter().find(|a| a.key() == "tpot_s.p50").unwrap();
        assert_eq!(tpot.spread.n, 0);
        // Throughput over the sum of E2E (candle): 20 tokens / 2 s.
        let tok = rows.iter().find(|a| a.metric == "output_tok_s").unwrap();
        assert_eq!(tok.values[0], Some(10.0));
        let table = RunsTable::of(
            "t".into(),
            RepeatConfig::default(),
            &runs,
            &Slo::default(),
            0,
            None,
        );
        assert_eq!(table.counted(), 3);
        let md = table.render(SummaryFormat::Md);
        assert!(
            md.contains("| TTFT p50 (ms) | 3 | 11.000, 21.000, -, 16.000 | 16.000 |"),
            "{md}"
        );
        assert!(md.contains("Run 3 did not measure as asked"), "{md}");
        let csv = table.render(SummaryFormat::Csv);
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        let first = r.records().next().unwrap().unwrap();
        assert_eq!(first.get(0), Some("ttft_s.p50"));
        assert_eq!(first.get(4), Some("3"));
        assert_eq!(first.get(13), Some(""));
    }
}
