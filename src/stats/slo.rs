//! Service-level objectives: `--slo ttft=200ms,tpot=50ms,e2e=2s`.

use serde::{Deserialize, Serialize};

use super::Metric;
use crate::event::RequestDone;

/// Latency limits a request must meet; `None` means no limit on that metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
}

impl Slo {
    /// The metrics an SLO can limit, in the order every text lists them: `--slo` and its
    /// messages, the dashboard's table title, the report's goodput line, the sweep's findings.
    pub const METRICS: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::E2e];

    /// How `--slo` names a metric: `ttft`, `tpot`, `e2e` (its JSON key without `_s`).
    pub fn name(m: Metric) -> &'static str {
        m.key().strip_suffix("_s").unwrap_or(m.key())
    }

    /// The limit on `m`, if one is set (never for a metric outside [`Self::METRICS`]).
    pub fn get(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Ttft => self.ttft_s,
            Metric::Tpot => self.tpot_s,
            Metric::E2e => self.e2e_s,
            _ => None,
        }
    }

    fn slot(&mut self, m: Metric) -> Option<&mut Option<f64>> {
        match m {
            Metric::Ttft => Some(&mut self.ttft_s),
            Metric::Tpot => Some(&mut self.tpot_s),
            Metric::E2e => Some(&mut self.e2e_s),
            _ => None,
        }
    }

    /// The limits that are set, in [`Self::METRICS`] order.
    pub fn limits(&self) -> impl Iterator<Item = (Metric, f64)> + '_ {
        Self::METRICS
            .into_iter()
            .filter_map(|m| self.get(m).map(|l| (m, l)))
    }

    pub fn is_empty(&self) -> bool {
        self.limits().next().is_none()
    }

    /// Parses `ttft=200ms,tpot=50ms,e2e=2s`. Units: `us`, `ms`, `s` (a bare number is seconds).
    pub fn parse(spec: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not NAME=DURATION (e.g. ttft=200ms)"))?;
            let secs = parse_duration_s(value.trim())?;
            let name = name.trim().to_ascii_lowercase();
            let slot = Self::METRICS
                .into_iter()
                .find(|m| Self::name(*m) == name)
                .and_then(|m| slo.slot(m))
                .ok_or_else(|| {
                    let known: Vec<&str> = Self::METRICS.into_iter().map(Self::name).collect();
                    format!("unknown SLO metric `{name}` (use {})", known.join(", "))
                })?;
            *slot = Some(secs);
        }
        if slo.is_empty() {
            return Err("empty SLO (e.g. ttft=200ms,tpot=50ms)".into());
        }
        Ok(slo)
    }

    /// Whether a request met every limit (a request without TPOT meets a TPOT limit).
    pub fn met_by(&self, r: &RequestDone) -> bool {
        self.limits().all(|(m, limit)| {
            let value = match m {
                Metric::Ttft => Some(r.ttft_s),
                Metric::Tpot => r.tpot_s,
                _ => Some(r.e2e_s),
            };
            value.is_none_or(|v| v <= limit)
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_metric_by_its_name() {
        let slo = Slo::parse("TTFT=200ms, tpot=50ms,e2e=2").unwrap_or_default();
        assert_eq!(slo.get(Metric::Ttft), Some(0.2));
        assert_eq!(slo.get(Metric::Tpot), Some(0.05));
        assert_eq!(slo.get(Metric::E2e), Some(2.0));
        assert_eq!(slo.get(Metric::Itl), None);
        let names: Vec<&str> = Slo::METRICS.into_iter().map(Slo::name).collect();
        assert_eq!(names, ["ttft", "tpot", "e2e"]);
        assert_eq!(
            Slo::parse("itl=1ms").err().as_deref(),
            Some("unknown SLO metric `itl` (use ttft, tpot, e2e)")
        );
        assert!(Slo::parse(" , ").is_err());
    }

    #[test]
    fn limits_come_in_order_and_only_when_set() {
        let slo = Slo::parse("e2e=1s,ttft=100ms").unwrap_or_default();
        let got: Vec<(Metric, f64)> = slo.limits().collect();
        assert_eq!(got, [(Metric::Ttft, 0.1), (Metric::E2e, 1.0)]);
        assert!(Slo::default().is_empty());
    }
}
