//! Service-level objectives: `--slo ttft=200ms,tpot=50ms,e2e=2s`.

use serde::{Deserialize, Serialize};

use crate::event::RequestDone;

/// Latency limits a request must meet; `None` means no limit on that metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
}

impl Slo {
    pub fn is_empty(&self) -> bool {
        self.ttft_s.is_none() && self.tpot_s.is_none() && self.e2e_s.is_none()
    }

    /// Parses `ttft=200ms,tpot=50ms,e2e=2s`. Units: `us`, `ms`, `s` (a bare number is seconds).
    pub fn parse(spec: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not NAME=DURATION (e.g. ttft=200ms)"))?;
            let secs = parse_duration_s(value.trim())?;
            let slot = match name.trim().to_ascii_lowercase().as_str() {
                "ttft" => &mut slo.ttft_s,
                "tpot" => &mut slo.tpot_s,
                "e2e" => &mut slo.e2e_s,
                other => {
                    return Err(format!(
                        "unknown SLO metric `{other}` (use ttft, tpot, e2e)"
                    ))
                }
            };
            *slot = Some(secs);
        }
        if slo.is_empty() {
            return Err("empty SLO (e.g. ttft=200ms,tpot=50ms)".into());
        }
        Ok(slo)
    }

    /// The limit for a metric key (`ttft_s`, `tpot_s`, `e2e_s`), if any.
    pub fn limit(&self, key: &str) -> Option<f64> {
        match key {
            "ttft_s" => self.ttft_s,
            "tpot_s" => self.tpot_s,
            "e2e_s" => self.e2e_s,
            _ => None,
        }
    }

    /// Whether a request met every limit (a request without TPOT meets a TPOT limit).
    pub fn met_by(&self, r: &RequestDone) -> bool {
        let ok = |limit: Option<f64>, v: Option<f64>| match (limit, v) {
            (Some(l), Some(v)) => v <= l,
            _ => true,
        };
        ok(self.ttft_s, Some(r.ttft_s))
            && ok(self.tpot_s, r.tpot_s)
            && ok(self.e2e_s, Some(r.e2e_s))
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
