//! Service-level objectives: `--slo ttft:p95=500ms,itl:p99=50ms,ntpot:p90=30ms,e2e=10s`.
//!
//! Each limit is on a metric at a percentile (a bare value is p99): the run, a sweep's cell or a
//! search's probe meets the SLO when every metric's percentile over its steady requests is
//! within its limit (`broken`). A request meets it (goodput) when its own values are:
//! its TTFT, TPOT, NTPOT (E2E / output tokens, inference-perf's normalized TPOT) and E2E, and
//! its slowest decode step for ITL (`met_by`). Goodput follows GuideLLM's rules: a failed
//! request is a miss, and a request cut off by the run's end is not counted (`SloCounts`).

use serde::{Deserialize, Serialize};

use super::{Metric, Summary};
use crate::event::RequestDone;

/// What an SLO can limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SloMetric {
    Ttft,
    Tpot,
    Itl,
    /// E2E / output tokens (a request of one token: its E2E).
    Ntpot,
    E2e,
}

impl SloMetric {
    /// In the order every text lists them.
    pub const ALL: [SloMetric; 5] = [
        SloMetric::Ttft,
        SloMetric::Tpot,
        SloMetric::Itl,
        SloMetric::Ntpot,
        SloMetric::E2e,
    ];

    /// As `--slo` names it: `ttft`, `tpot`, `itl`, `ntpot`, `e2e`.
    pub fn name(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::Itl => "itl",
            SloMetric::Ntpot => "ntpot",
            SloMetric::E2e => "e2e",
        }
    }

    /// As tables name it: `TTFT`, ..., `NTPOT`.
    pub fn label(self) -> &'static str {
        match self {
            SloMetric::Ttft => "TTFT",
            SloMetric::Tpot => "TPOT",
            SloMetric::Itl => "ITL",
            SloMetric::Ntpot => "NTPOT",
            SloMetric::E2e => "E2E",
        }
    }

    /// The table's metric it is, where the table has it (NTPOT is not a row of its own).
    pub fn metric(self) -> Option<Metric> {
        match self {
            SloMetric::Ttft => Some(Metric::Ttft),
            SloMetric::Tpot => Some(Metric::Tpot),
            SloMetric::Itl => Some(Metric::Itl),
            SloMetric::E2e => Some(Metric::E2e),
            SloMetric::Ntpot => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// A request's own value of the metric: NTPOT from its E2E and output, ITL its slowest
    /// decode step (`None`: unknown, or a request of one token).
    pub fn of_request(self, r: &RequestDone) -> Option<f64> {
        match self {
            SloMetric::Ttft => Some(r.ttft_s),
            SloMetric::Tpot => r.tpot_s,
            SloMetric::Itl => r.itl_max_s,
            SloMetric::Ntpot => ntpot(r),
            SloMetric::E2e => Some(r.e2e_s),
        }
    }
}

/// A request's normalized time per output token: E2E / output tokens.
pub fn ntpot(r: &RequestDone) -> Option<f64> {
    (r.output_tokens > 0).then(|| r.e2e_s / r.output_tokens as f64)
}

/// The percentiles a limit may be at: those every summary keeps.
pub const PERCENTILES: [u8; 4] = [50, 90, 95, 99];

/// One limit: a metric's percentile must be within `limit_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    pub limit_s: f64,
    /// 50, 90, 95 or 99.
    pub percentile: u8,
}

impl Limit {
    /// The percentile of `s` this limit is at.
    pub fn of(&self, s: &Summary) -> f64 {
        s.percentile(self.percentile)
    }
}

/// Latency limits; a metric without one is not limited.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slo {
    limits: [Option<Limit>; 5],
}

impl Slo {
    /// The limit on `m`, if one is set.
    pub fn get(&self, m: SloMetric) -> Option<Limit> {
        self.limits[m.index()]
    }

    /// Sets the limit on `m`.
    pub fn set(&mut self, m: SloMetric, limit: Option<Limit>) {
        self.limits[m.index()] = limit;
    }

    /// The limit on a table's metric, if one is set.
    pub fn for_metric(&self, m: Metric) -> Option<Limit> {
        SloMetric::ALL
            .into_iter()
            .find(|s| s.metric() == Some(m))
            .and_then(|s| self.get(s))
    }

    /// The limits that are set, in [`SloMetric::ALL`] order.
    pub fn limits(&self) -> impl Iterator<Item = (SloMetric, Limit)> + '_ {
        SloMetric::ALL
            .into_iter()
            .filter_map(|m| self.get(m).map(|l| (m, l)))
    }

    pub fn is_empty(&self) -> bool {
        self.limits().next().is_none()
    }

    /// Parses `ttft:p95=500ms,itl:p99=50ms,ntpot:p90=30ms,e2e=10s`: a metric, optionally its
    /// percentile (p50, p90, p95 or p99; bare: p99), and a duration (`us`, `ms`, `s`; a bare
    /// number is seconds).
    pub fn parse(spec: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| {
                format!("`{part}` is not METRIC[:pNN]=DURATION (e.g. ttft:p95=200ms)")
            })?;
            let limit_s = parse_duration_s(value.trim())?;
            let name = name.trim().to_ascii_lowercase();
            let (metric, stat) = match name.split_once(':') {
                Some((m, p)) => (m.trim().to_string(), Some(p.trim().to_string())),
                None => (name.clone(), None),
            };
            let m = SloMetric::ALL
                .into_iter()
                .find(|m| m.name() == metric)
                .ok_or_else(|| {
                    let known: Vec<&str> =
                        SloMetric::ALL.into_iter().map(SloMetric::name).collect();
                    format!("unknown SLO metric `{metric}` (use {})", known.join(", "))
                })?;
            let percentile = match stat {
                None => 99,
                Some(p) => p
                    .strip_prefix('p')
                    .and_then(|n| n.parse::<u8>().ok())
                    .filter(|n| PERCENTILES.contains(n))
                    .ok_or_else(|| {
                        format!(
                            "`{metric}:{p}`: the statistic is p50, p90, p95 or p99 (e.g. {metric}:p95=200ms)"
                        )
                    })?,
            };
            if slo.get(m).is_some() {
                return Err(format!("`{}` has two limits; give one", m.name()));
            }
            slo.set(
                m,
                Some(Limit {
                    limit_s,
                    percentile,
                }),
            );
        }
        if slo.is_empty() {
            return Err("empty SLO (e.g. ttft:p95=200ms,tpot=50ms)".into());
        }
        Ok(slo)
    }

    /// Whether a request met every limit with its own values (a value it does not have, such
    /// as the TPOT of one token, meets its limit).
    pub fn met_by(&self, r: &RequestDone) -> bool {
        self.limits()
            .all(|(m, l)| m.of_request(r).is_none_or(|v| v <= l.limit_s))
    }

    /// The limits a set of requests breaks, given each metric's summary over them (`None`:
    /// not measured, which breaks nothing): every limit's percentile against its value.
    pub fn broken(&self, summary: impl Fn(SloMetric) -> Option<Summary>) -> Vec<SloMetric> {
        self.limits()
            .filter(|(m, l)| summary(*m).is_some_and(|s| s.n > 0 && l.of(&s) > l.limit_s))
            .map(|(m, _)| m)
            .collect()
    }

    /// The limits that `failed` requests break among `n` completed ones, failures counted as
    /// misses (GuideLLM's rule for goodput, taken to percentiles): ranked above every completed
    /// request, they break a limit whose percentile over all `n + failed` falls on or
    /// interpolates with one (numpy's `linear` rank, as every percentile here).
    pub fn broken_by_failures(&self, n: u64, failed: u64) -> Vec<SloMetric> {
        if failed == 0 {
            return Vec::new();
        }
        let all = (n + failed) as f64;
        self.limits()
            .filter(|(_, l)| ((all - 1.0) * f64::from(l.percentile) / 100.0).ceil() >= n as f64)
            .map(|(m, _)| m)
            .collect()
    }

    /// The SLO as every text shows it: `ttft:p95≤200ms tpot≤50ms` (`<=` in ASCII); the
    /// percentile only when it is not p99. `duration` formats a limit.
    pub fn words(&self, le: &str, duration: impl Fn(f64) -> String) -> String {
        self.limits()
            .map(|(m, l)| format!("{}{le}{}", limit_name(m, l), duration(l.limit_s)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `ttft:p95`, or `ttft` for p99.
pub fn limit_name(m: SloMetric, l: Limit) -> String {
    if l.percentile == 99 {
        m.name().to_string()
    } else {
        format!("{}:p{}", m.name(), l.percentile)
    }
}

/// How a record keeps an SLO: `{"ttft_s": 0.5, "ttft_p": 95, "e2e_s": 10.0}` (a percentile only
/// when it is not 99). Records written before percentiles read as p99, their nulls as no limit.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct SloLine {
    ttft_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttft_p: Option<u8>,
    tpot_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tpot_p: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    itl_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    itl_p: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ntpot_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ntpot_p: Option<u8>,
    e2e_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    e2e_p: Option<u8>,
}

impl SloLine {
    fn slots(&mut self) -> [(&mut Option<f64>, &mut Option<u8>); 5] {
        [
            (&mut self.ttft_s, &mut self.ttft_p),
            (&mut self.tpot_s, &mut self.tpot_p),
            (&mut self.itl_s, &mut self.itl_p),
            (&mut self.ntpot_s, &mut self.ntpot_p),
            (&mut self.e2e_s, &mut self.e2e_p),
        ]
    }
}

impl Serialize for Slo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut line = SloLine::default();
        for (i, (limit, p)) in line.slots().into_iter().enumerate() {
            if let Some(l) = self.limits[i] {
                *limit = Some(l.limit_s);
                *p = (l.percentile != 99).then_some(l.percentile);
            }
        }
        line.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Slo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Slo, D::Error> {
        let mut line = SloLine::deserialize(d)?;
        let mut slo = Slo::default();
        for (i, (limit, p)) in line.slots().into_iter().enumerate() {
            slo.limits[i] = limit.filter(|l| l.is_finite()).map(|limit_s| Limit {
                limit_s,
                percentile: p.filter(|p| PERCENTILES.contains(p)).unwrap_or(99),
            });
        }
        Ok(slo)
    }
}

/// Parses `250ms`, `1.5s`, `800us`, `2` (seconds) into seconds; must be positive and finite.
pub fn parse_duration_s(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix("µs") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 200ms, 1.5s)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{text}` must be a positive duration"));
    }
    Ok(v * scale)
}

/// The counts goodput is made of, over requests that ended, by GuideLLM's rules: a request that failed is a miss,
/// one cut off by the run's end was never an outcome and is not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SloCounts {
    /// Requests that completed within every limit.
    pub met: u64,
    /// Requests that completed outside a limit.
    pub missed: u64,
    /// Requests that failed (misses too).
    pub failed: u64,
}

impl SloCounts {
    /// A completed request, within the SLO or not.
    pub fn completed(&mut self, met: bool) {
        if met {
            self.met += 1;
        } else {
            self.missed += 1;
        }
    }

    /// A failed request: a miss.
    pub fn failed(&mut self) {
        self.failed += 1;
    }

    /// Requests counted: completed and failed.
    pub fn requests(&self) -> u64 {
        self.met + self.missed + self.failed
    }

    /// Met over counted; `None` before any request ended.
    pub fn share(&self) -> Option<f64> {
        let n = self.requests();
        (n > 0).then(|| self.met as f64 / n as f64)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn limit(slo: &Slo, m: SloMetric) -> Option<(f64, u8)> {
        slo.get(m).map(|l| (l.limit_s, l.percentile))
    }

    #[test]
    fn parses_each_metric_at_its_percentile_and_a_bare_value_as_p99() {
        let slo = Slo::parse("ttft:p95=500ms, itl:p99=50ms,NTPOT:p90=30ms,e2e=10s").unwrap();
        assert_eq!(limit(&slo, SloMetric::Ttft), Some((0.5, 95)));
        assert_eq!(limit(&slo, SloMetric::Itl), Some((0.05, 99)));
        assert_eq!(limit(&slo, SloMetric::Ntpot), Some((0.03, 90)));
        assert_eq!(limit(&slo, SloMetric::E2e), Some((10.0, 99)));
        assert_eq!(slo.get(SloMetric::Tpot), None);
        let names: Vec<&str> = slo.limits().map(|(m, _)| m.name()).collect();
        assert_eq!(names, ["ttft", "itl", "ntpot", "e2e"]);
        assert_eq!(
            slo.words("≤", |s| format!("{s}s")),
            "ttft:p95≤0.5s itl≤0.05s ntpot:p90≤0.03s e2e≤10s"
        );
        for (bad, why) in [
            ("qps=1s", "unknown SLO metric `qps`"),
            ("ttft:p75=1s", "the statistic is p50, p90, p95 or p99"),
            ("ttft:max=1s", "the statistic is p50, p90, p95 or p99"),
            ("ttft=1s,ttft:p50=2s", "`ttft` has two limits"),
            ("ttft", "is not METRIC[:pNN]=DURATION"),
            (" , ", "empty SLO"),
        ] {
            let e = Slo::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// A record keeps the percentile only when it is not p99, and reads records written
    /// before percentiles (nulls and all) as p99 limits.
    #[test]
    fn a_record_keeps_the_slo_and_old_records_read_as_p99() {
        let slo = Slo::parse("ttft:p95=200ms,e2e=1s").unwrap();
        let json = serde_json::to_value(slo).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"ttft_s": 0.2, "ttft_p": 95, "tpot_s": null, "e2e_s": 1.0})
        );
        assert_eq!(serde_json::from_value::<Slo>(json).unwrap(), slo);
        let old: Slo =
            serde_json::from_str(r#"{"ttft_s":0.2,"tpot_s":null,"e2e_s":null}"#).unwrap();
        assert_eq!(limit(&old, SloMetric::Ttft), Some((0.2, 99)));
        assert_eq!(old.limits().count(), 1);
        assert!(serde_json::from_str::<Slo>("{}").unwrap().is_empty());
    }

    #[test]
    fn a_request_meets_the_slo_on_its_own_values() {
        let slo = Slo::parse("ttft=100ms,ntpot=20ms,itl=30ms").unwrap();
        let r = RequestDone {
            output_tokens: 10,
            ttft_s: 0.05,
            e2e_s: 0.15,
            itl_max_s: Some(0.02),
            ..Default::default()
        };
        assert!(slo.met_by(&r));
        assert!(!slo.met_by(&RequestDone {
            e2e_s: 0.25,
            ..r.clone()
        }));
        assert!(!slo.met_by(&RequestDone {
            itl_max_s: Some(0.031),
            ..r.clone()
        }));
        // No ITL known (a record without it): the ITL limit is not broken.
        assert!(slo.met_by(&RequestDone {
            itl_max_s: None,
            ..r
        }));
    }

    #[test]
    fn a_set_of_requests_breaks_a_limit_at_its_percentile() {
        let slo = Slo::parse("ttft:p50=100ms,e2e=1s").unwrap();
        let ttft = Summary::of(&[0.05, 0.06, 0.5, 0.5]);
        let e2e = Summary::of(&[0.5, 0.6, 0.7, 2.0]);
        let broken = slo.broken(|m| match m {
            SloMetric::Ttft => Some(ttft),
            SloMetric::E2e => Some(e2e),
            _ => None,
        });
        // p50 of TTFT is 0.28 > 0.1; p99 of E2E is 1.96 > 1.
        assert_eq!(broken, [SloMetric::Ttft, SloMetric::E2e]);
        assert!(slo.broken(|_| None).is_empty());
    }

    #[test]
    fn goodput_counts_failures_as_misses() {
        let mut g = SloCounts::default();
        assert_eq!(g.share(), None);
        g.completed(true);
        g.completed(true);
        g.completed(false);
        g.failed();
        assert_eq!((g.requests(), g.share()), (4, Some(0.5)));
    }

    #[test]
    fn failures_break_a_percentile_they_reach() {
        let slo = Slo::parse("ttft:p95=1s,e2e=10s").unwrap();
        // 99 completed and 1 failed: the p95 of 100 is at rank 94.05 (completed requests), the
        // p99 at rank 98.01, which interpolates with the failure at rank 99.
        assert_eq!(slo.broken_by_failures(99, 1), vec![SloMetric::E2e]);
        // 2 failed of 100 reach the p99 alone; 6 of 100 reach the p95 too.
        assert_eq!(slo.broken_by_failures(98, 2), vec![SloMetric::E2e]);
        assert_eq!(
            slo.broken_by_failures(94, 6),
            vec![SloMetric::Ttft, SloMetric::E2e]
        );
        // 199 completed, 1 failed: the p99 (rank 197.01) stays among the completed ones.
        assert!(slo.broken_by_failures(199, 1).is_empty());
        assert!(slo.broken_by_failures(10, 0).is_empty());
        // Nothing completed: every limit is broken.
        assert_eq!(slo.broken_by_failures(0, 3).len(), 2);
    }
}
