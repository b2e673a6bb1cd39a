//! Per-request aggregation of telemetry samples, so an outlier can be explained by what the
//! device was doing during it ("TPOT 31 ms at request 87: SM clock 1410 MHz, power cap").
//!
//! Consumers call [`RequestTelemetry::start`] at `Event::RequestStarted`,
//! [`RequestTelemetry::observe`] on every `Event::Telemetry` (also between requests: it keeps the
//! last energy reading as the next request's baseline) and [`RequestTelemetry::finish`] at
//! `Event::RequestDone`.

use serde::{Deserialize, Serialize};

use super::Sample;

/// What the samples taken during one request say about the device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestExtras {
    pub max_power_w: Option<f64>,
    pub min_sm_clock_mhz: Option<u32>,
    pub max_temperature_c: Option<u32>,
    /// Throttle reasons seen during the request, each once, in the order first seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle: Vec<String>,
    /// Energy counter delta over the request, in joules (see [`RequestTelemetry`] for the window).
    pub energy_j: Option<f64>,
    pub peak_device_used_bytes: Option<u64>,
    /// Samples taken during the request; 0 means the request was shorter than the interval.
    pub samples: u32,
}

impl RequestExtras {
    /// The device's side of the story for the events pane, e.g.
    /// `"SM clock 1410 MHz, power cap, max 698 W, max 83 °C"`; `None` when no device figure was
    /// sampled (CPU runs, NVML unavailable, or a request shorter than the sample interval).
    pub fn explain(&self) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(mhz) = self.min_sm_clock_mhz {
            parts.push(format!("SM clock {mhz} MHz"));
        }
        parts.extend(self.throttle.iter().cloned());
        if let Some(w) = self.max_power_w {
            parts.push(format!("max {w:.0} W"));
        }
        if let Some(c) = self.max_temperature_c {
            parts.push(format!("max {c} °C"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Folds the samples of one request into [`RequestExtras`].
///
/// Energy window: from the last energy reading before the request started (or the first during
/// it, for the very first request) to the last reading during it. That window is one sample
/// interval shifted from the request but as long as it on average, so summed over many requests
/// it is unbiased; a single short request's figure is coarse. `None` when no reading fell inside
/// the request, or the counter went backwards (driver reload).
#[derive(Clone, Debug, Default)]
pub struct RequestTelemetry {
    active: bool,
    last_energy_j: Option<f64>,
    start_energy_j: Option<f64>,
    end_energy_j: Option<f64>,
    extras: RequestExtras,
}

impl RequestTelemetry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A request started: begin a new aggregate.
    pub fn start(&mut self) {
        self.active = true;
        self.start_energy_j = self.last_energy_j;
        self.end_energy_j = None;
        self.extras = RequestExtras::default();
    }

    /// Feeds one sample. Outside a request only the energy baseline is kept.
    pub fn observe(&mut self, sample: &Sample) {
        if let Some(e) = sample.energy_j {
            self.last_energy_j = Some(e);
        }
        if !self.active {
            return;
        }
        let x = &mut self.extras;
        x.samples += 1;
        x.max_power_w = combine(x.max_power_w, sample.power_w, f64::max);
        x.min_sm_clock_mhz = combine(x.min_sm_clock_mhz, sample.sm_clock_mhz, u32::min);
        x.max_temperature_c = combine(x.max_temperature_c, sample.temperature_c, u32::max);
        x.peak_device_used_bytes =
            combine(x.peak_device_used_bytes, sample.device_used_bytes, u64::max);
        for reason in &sample.throttle {
            if !x.throttle.contains(reason) {
                x.throttle.push(reason.clone());
            }
        }
        if let Some(e) = sample.energy_j {
            self.start_energy_j.get_or_insert(e);
            self.end_energy_j = Some(e);
        }
    }

    /// The request is done: returns its aggregate and stops aggregating until the next `start`.
    pub fn finish(&mut self) -> RequestExtras {
        self.active = false;
        let mut extras = std::mem::take(&mut self.extras);
        extras.energy_j = match (self.start_energy_j, self.end_energy_j) {
            (Some(start), Some(end)) if end >= start => Some(end - start),
            _ => None,
        };
        extras
    }
}

/// Combines an aggregate with a new reading, either of which may be missing.
fn combine<T: Copy>(acc: Option<T>, new: Option<T>, pick: impl Fn(T, T) -> T) -> Option<T> {
    match (acc, new) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu_sample(power_w: f64, sm_mhz: u32, energy_j: f64, throttle: &[&str]) -> Sample {
        Sample {
            power_w: Some(power_w),
            sm_clock_mhz: Some(sm_mhz),
            temperature_c: Some(70),
            device_used_bytes: Some(sm_mhz as u64 * 1000),
            energy_j: Some(energy_j),
            throttle: throttle.iter().map(|s| s.to_string()).collect(),
            ..Sample::default()
        }
    }

    #[test]
    fn aggregates_only_samples_inside_the_request() {
        let mut rt = RequestTelemetry::new();
        rt.observe(&gpu_sample(100.0, 1980, 1000.0, &["idle"])); // before: baseline only
        rt.start();
        rt.observe(&gpu_sample(650.0, 1755, 1065.0, &[]));
        rt.observe(&gpu_sample(698.0, 1410, 1135.0, &["power cap"]));
        rt.observe(&gpu_sample(690.0, 1500, 1204.0, &["power cap", "thermal"]));
        let x = rt.finish();
        assert_eq!(x.samples, 3);
        assert_eq!(x.max_power_w, Some(698.0));
        assert_eq!(x.min_sm_clock_mhz, Some(1410));
        assert_eq!(x.max_temperature_c, Some(70));
        assert_eq!(x.peak_device_used_bytes, Some(1_755_000));
        assert_eq!(x.throttle, vec!["power cap", "thermal"]);
        assert_eq!(x.energy_j, Some(204.0));
        assert_eq!(
            x.explain().as_deref(),
            Some("SM clock 1410 MHz, power cap, thermal, max 698 W, max 70 °C")
        );

        // After finish, samples are not aggregated; the next request starts clean from the
        // latest energy reading.
        rt.observe(&gpu_sample(50.0, 300, 1210.0, &["idle"]));
        rt.start();
        rt.observe(&gpu_sample(600.0, 1980, 1270.0, &[]));
        let y = rt.finish();
        assert_eq!(y.min_sm_clock_mhz, Some(1980));
        assert!(y.throttle.is_empty());
        assert_eq!(y.energy_j, Some(60.0));
    }

    #[test]
    fn first_request_uses_its_first_reading_and_short_requests_have_no_energy() {
        let mut rt = RequestTelemetry::new();
        rt.start();
        rt.observe(&gpu_sample(600.0, 1980, 10.0, &[]));
        rt.observe(&gpu_sample(600.0, 1980, 70.0, &[]));
        assert_eq!(rt.finish().energy_j, Some(60.0));

        rt.start();
        let short = rt.finish();
        assert_eq!(short.samples, 0);
        assert_eq!(short.energy_j, None);
        assert_eq!(short.explain(), None);
    }

    #[test]
    fn counter_going_backwards_gives_no_energy() {
        let mut rt = RequestTelemetry::new();
        rt.observe(&gpu_sample(600.0, 1980, 5000.0, &[]));
        rt.start();
        rt.observe(&gpu_sample(600.0, 1980, 3.0, &[]));
        assert_eq!(rt.finish().energy_j, None);
    }

    #[test]
    fn cpu_samples_explain_nothing() {
        let mut rt = RequestTelemetry::new();
        rt.start();
        rt.observe(&Sample {
            rss_bytes: Some(1 << 30),
            ..Sample::default()
        });
        let x = rt.finish();
        assert_eq!(x.samples, 1);
        assert_eq!(
            x,
            RequestExtras {
                samples: 1,
                ..RequestExtras::default()
            }
        );
        assert_eq!(x.explain(), None);
    }
}
