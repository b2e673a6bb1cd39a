//! The charts' histories, bounded: the newest requests and decode steps, memory and GPU
//! state per telemetry sample, and p50/p99 bands and buckets per slice of dashboard time.

use crate::event::{DecodeStep, Sample};
use crate::stats::slices::{SliceMetric, Slices};

use super::buckets::{Buckets, RequestPoint};
use super::ring::Ring;

/// Per-request history kept for the sparklines: more than the widest terminal shows.
pub const REQUEST_HISTORY: usize = 1024;
/// Decode steps kept: the newest, for the header's decode rate and the last ITL.
pub const STEP_HISTORY: usize = DECODE_RATE_STEPS;
/// Memory samples kept for the memory-over-time bars.
pub const MEMORY_HISTORY: usize = 1024;
/// Decode steps averaged for the header's current decode tok/s.
pub const DECODE_RATE_STEPS: usize = 8;

/// One decode step, for the header's decode rate and the last ITL.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepPoint {
    pub request: u64,
    pub step: u32,
    pub itl_s: f64,
    pub warmup: bool,
}

/// Memory at one telemetry sample: the most telling figure available.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryPoint {
    pub t_s: f64,
    pub bytes: u64,
}

/// GPU state at one telemetry sample (NVML), for the over-time strips beside the latency.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuPoint {
    pub util_pct: Option<u32>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
}

/// What the charts draw from.
#[derive(Clone, Debug)]
pub struct Charts {
    pub requests: Ring<RequestPoint>,
    pub steps: Ring<StepPoint>,
    pub memory: Ring<MemoryPoint>,
    /// GPU utilisation, power, clock and temperature per sample (only while NVML reports).
    pub gpu: Ring<GpuPoint>,
    /// p50/p99 bands and the ITL heatmap, per slice of dashboard time.
    pub slices: Slices,
    /// The per-request charts' columns once requests outpace them: buckets of dashboard time.
    pub buckets: Buckets,
}

impl Default for Charts {
    fn default() -> Self {
        Charts {
            requests: Ring::new(REQUEST_HISTORY),
            steps: Ring::new(STEP_HISTORY),
            memory: Ring::new(MEMORY_HISTORY),
            gpu: Ring::new(MEMORY_HISTORY),
            slices: Slices::default(),
            buckets: Buckets::default(),
        }
    }
}

impl Charts {
    /// The clock (seconds of dashboard time) moved on.
    pub fn advance(&mut self, t_s: f64) {
        self.slices.advance(t_s);
        self.buckets.advance(t_s);
    }

    /// A reset, a new cell: the per-request charts start over (memory and GPU go on).
    pub fn clear_requests(&mut self) {
        self.requests.clear();
        self.steps.clear();
        self.slices.clear();
        self.buckets.clear();
    }

    /// A finished request at `t_s`.
    pub fn request(&mut self, t_s: f64, point: RequestPoint) {
        self.slices.observe(t_s, SliceMetric::Ttft, point.ttft_s);
        if let Some(tpot) = point.tpot_s {
            self.slices.observe(t_s, SliceMetric::Tpot, tpot);
        }
        self.buckets.observe(t_s, &point);
        self.requests.push(point);
    }

    /// A batch of decode steps at `t_s`; `warmup`: whether a request's steps are warmup.
    pub fn decode_steps(&mut self, t_s: f64, steps: &[DecodeStep], warmup: impl Fn(u64) -> bool) {
        self.slices
            .observe_all(t_s, SliceMetric::Itl, steps.iter().map(|s| s.itl_s));
        // Only a batch's newest steps can stay in the ring: the others are not pushed (at
        // 100,000 steps a second, a push each was a few % of the CPU), so the ring's push
        // count is not a step count (nothing reads it for steps).
        let kept = steps.len().saturating_sub(self.steps.capacity());
        for s in &steps[kept..] {
            self.steps.push(StepPoint {
                request: s.index,
                step: s.step,
                itl_s: s.itl_s,
                warmup: warmup(s.index),
            });
        }
    }

    /// A telemetry sample: its memory figure, and the GPU's state when NVML reports one.
    pub fn sample(&mut self, s: &Sample) {
        if let Some(bytes) = memory_figure(s) {
            self.memory.push(MemoryPoint { t_s: s.t_s, bytes });
        }
        let gpu = GpuPoint {
            util_pct: s.gpu_util_pct,
            power_w: s.power_w,
            sm_clock_mhz: s.sm_clock_mhz,
            temperature_c: s.temperature_c,
        };
        if gpu != GpuPoint::default() {
            self.gpu.push(gpu);
        }
    }
}

/// Device memory when known, else allocator, else process RSS.
pub fn memory_figure(s: &Sample) -> Option<u64> {
    s.device_used_bytes.or(s.alloc_bytes).or(s.rss_bytes)
}
