//! Whole-run memory and energy figures for the summary: the same fold over the event stream live
//! and over a record's lines in `report`, so both print the same numbers.

use serde::{Deserialize, Serialize};

use crate::event::RequestDone;
use crate::event::Sample;

/// Peak memory and energy over a run. Fields are `None` when no source reported them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// The highest per-request peak: allocator bytes on CPU, device memory used on CUDA.
    pub request_peak_bytes: Option<u64>,
    /// Peak resident set size of the process.
    pub rss_peak_bytes: Option<u64>,
    /// Highest device memory used (NVML or the CUDA context).
    pub device_used_peak_bytes: Option<u64>,
    pub device_total_bytes: Option<u64>,
    /// Energy (NVML counter) from the first finished request to the last sample.
    pub energy_j: Option<f64>,
    /// `energy_j` per output token generated after the first request (all sequences).
    pub energy_per_output_token_j: Option<f64>,
    /// Why NVML was not there, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_unavailable: Option<String>,
    #[serde(skip)]
    latest_energy: Option<f64>,
    #[serde(skip)]
    energy_start: Option<f64>,
    #[serde(skip)]
    tokens_after_start: u64,
    #[serde(skip)]
    requests_seen: u64,
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Resources {
    /// Folds one event of the live stream.
    pub fn observe(&mut self, ev: &crate::event::Event) {
        use crate::event::Event;
        match ev {
            Event::RequestDone(r) => self.observe_request(r),
            Event::Telemetry(s) => self.observe_sample(s),
            _ => {}
        }
    }

    pub fn observe_request(&mut self, r: &RequestDone) {
        self.request_peak_bytes = max_opt(self.request_peak_bytes, r.peak_alloc_bytes);
        if self.requests_seen == 0 {
            // Energy per token is counted from here: loading and the first request's lazy
            // initialisation are not inference.
            self.energy_start = self.latest_energy;
        } else {
            self.tokens_after_start += (r.batch * r.output_tokens) as u64;
        }
        self.requests_seen += 1;
        self.update_energy();
    }

    pub fn observe_sample(&mut self, s: &Sample) {
        self.rss_peak_bytes = max_opt(self.rss_peak_bytes, s.rss_peak_bytes.or(s.rss_bytes));
        self.device_used_peak_bytes = max_opt(self.device_used_peak_bytes, s.device_used_bytes);
        if s.device_total_bytes.is_some() {
            self.device_total_bytes = s.device_total_bytes;
        }
        if let Some(reason) = &s.nvml_unavailable {
            self.nvml_unavailable = Some(reason.clone());
        }
        if s.energy_j.is_some() {
            self.latest_energy = s.energy_j;
        }
        self.update_energy();
    }

    fn update_energy(&mut self) {
        if let (Some(start), Some(now)) = (self.energy_start, self.latest_energy) {
            let joules = (now - start).max(0.0);
            self.energy_j = Some(joules);
            self.energy_per_output_token_j =
                (self.tokens_after_start > 0).then(|| joules / self.tokens_after_start as f64);
        }
    }

    /// Markdown lines for the summary.
    pub fn markdown(&self) -> String {
        let bytes = crate::util::format::bytes;
        let mut parts = Vec::new();
        if let Some(b) = self.request_peak_bytes {
            parts.push(format!("request peak {}", bytes(b)));
        }
        if let Some(b) = self.rss_peak_bytes {
            parts.push(format!("RSS peak {}", bytes(b)));
        }
        if let Some(b) = self.device_used_peak_bytes {
            match self.device_total_bytes {
                Some(t) => parts.push(format!("device peak {} of {}", bytes(b), bytes(t))),
                None => parts.push(format!("device peak {}", bytes(b))),
            }
        }
        let mut out = String::new();
        if !parts.is_empty() {
            out.push_str(&format!("\nmemory: {}\n", parts.join(", ")));
        }
        match (self.energy_j, self.energy_per_output_token_j) {
            (Some(j), Some(per)) => out.push_str(&format!(
                "energy: {j:.1} J after the first request, {:.3} J per output token\n",
                per
            )),
            _ => {
                if let Some(reason) = &self.nvml_unavailable {
                    out.push_str(&format!("energy: not measured ({reason})\n"));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(index: u64, peak: u64) -> RequestDone {
        RequestDone {
            index,
            warmup: false,
            batch: 2,
            prompt_tokens: 8,
            output_tokens: 5,
            ttft_s: 0.01,
            tpot_s: Some(0.001),
            e2e_s: 0.014,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            peak_alloc_bytes: Some(peak),
            ..Default::default()
        }
    }

    fn energy(j: f64) -> Sample {
        Sample {
            energy_j: Some(j),
            rss_bytes: Some(100),
            ..Sample::default()
        }
    }

    #[test]
    fn energy_per_token_counts_from_the_first_request() {
        let mut r = Resources::default();
        r.observe_sample(&energy(1000.0)); // loading
        r.observe_sample(&energy(1500.0));
        r.observe_request(&request(0, 10)); // start: 1500 J
        r.observe_sample(&energy(1600.0));
        r.observe_request(&request(1, 30)); // 2 × 5 tokens
        r.observe_sample(&energy(1700.0));
        r.observe_request(&request(2, 20)); // 2 × 5 tokens
        assert_eq!(r.energy_j, Some(200.0));
        assert_eq!(r.energy_per_output_token_j, Some(10.0));
        assert_eq!(r.request_peak_bytes, Some(30));
        assert_eq!(r.rss_peak_bytes, Some(100));
    }

    #[test]
    fn without_nvml_there_is_no_energy() {
        let mut r = Resources::default();
        r.observe_sample(&Sample {
            nvml_unavailable: Some("NVML unavailable: no driver".into()),
            ..Sample::default()
        });
        r.observe_request(&request(0, 1));
        r.observe_request(&request(1, 1));
        assert_eq!(r.energy_per_output_token_j, None);
        assert!(r
            .markdown()
            .contains("not measured (NVML unavailable: no driver)"));
    }
}
