//! GPU-side timing with CUDA events, beside the synchronized wall clock.
//!
//! Wall time is always measured with `Instant` around a region that ends in
//! `Device::synchronize()`. On CUDA, events recorded on candle's stream at both ends of the same
//! region give the GPU time, so host overhead = wall − GPU is known too.

use candle_core::Device;

use super::spans::{Clock, HostClock};

/// Records GPU time of one region at a time. On CPU every method is a no-op returning `None`.
pub struct GpuTimer {
    #[cfg(feature = "cuda")]
    inner: Option<cuda::EventPair>,
}

impl GpuTimer {
    pub fn new(device: &Device) -> GpuTimer {
        #[cfg(feature = "cuda")]
        {
            GpuTimer {
                inner: cuda::EventPair::new(device),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = device;
            GpuTimer {}
        }
    }

    /// Whether GPU times will be reported.
    pub fn enabled(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            self.inner.is_some()
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
    }

    /// Records the start event on the device stream (asynchronous, no host wait).
    #[inline]
    pub fn start(&mut self) {
        #[cfg(feature = "cuda")]
        if let Some(e) = &mut self.inner {
            e.start();
        }
    }

    /// Records the stop event (asynchronous); read it after the region's synchronize.
    #[inline]
    pub fn stop(&mut self) {
        #[cfg(feature = "cuda")]
        if let Some(e) = &mut self.inner {
            e.stop();
        }
    }

    /// GPU seconds between the last start and stop; call after `Device::synchronize()`.
    pub fn elapsed_s(&self) -> Option<f64> {
        #[cfg(feature = "cuda")]
        {
            self.inner.as_ref().and_then(|e| e.elapsed_s())
        }
        #[cfg(not(feature = "cuda"))]
        {
            None
        }
    }
}

/// The clock a sampled step's parts (`--step-parts`) are stamped with on `device`: the host's
/// on the CPU; on CUDA events recorded on candle's stream, so that stamping a span never waits
/// for the GPU (`None` where no event can be made: then no step is timed in parts).
pub fn parts_clock(device: &Device) -> Option<Box<dyn Clock>> {
    #[cfg(feature = "cuda")]
    if device.is_cuda() {
        return cuda::EventClock::new(device).map(|c| Box::new(c) as Box<dyn Clock>);
    }
    let _ = device;
    Some(Box::new(HostClock::default()))
}

/// Device memory `(used, total)` in bytes from the CUDA context (read it after a synchronize);
/// `None` on CPU. candle allocates from the context, so "used" moves with its tensors.
pub fn device_memory(device: &Device) -> Option<(u64, u64)> {
    #[cfg(feature = "cuda")]
    {
        let cuda = device.as_cuda_device().ok()?;
        let (free, total) = cuda.cuda_stream().context().mem_get_info().ok()?;
        Some(((total - free) as u64, total as u64))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        None
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::sync::Arc;

    use candle_core::cuda_backend::cudarc::driver::{sys, CudaEvent, CudaStream};
    use candle_core::Device;

    pub struct EventPair {
        stream: Arc<CudaStream>,
        start: CudaEvent,
        stop: CudaEvent,
        ok: bool,
    }

    impl EventPair {
        pub fn new(device: &Device) -> Option<EventPair> {
            let cuda = device.as_cuda_device().ok()?;
            let stream = cuda.cuda_stream();
            let ctx = stream.context();
            // cudarc creates events with timing disabled by default; timing must be asked for.
            let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
            let start = ctx.new_event(flags).ok()?;
            let stop = ctx.new_event(flags).ok()?;
            Some(EventPair {
                stream,
                start,
                stop,
                ok: false,
            })
        }

        pub fn start(&mut self) {
            self.ok = self.start.record(&self.stream).is_ok();
        }

        pub fn stop(&mut self) {
            self.ok &= self.stop.record(&self.stream).is_ok();
        }

        pub fn elapsed_s(&self) -> Option<f64> {
            if !self.ok {
                return None;
            }
            self.start
                .elapsed_ms(&self.stop)
                .ok()
                .map(|ms| ms as f64 / 1e3)
        }
    }

    /// Stamps as events on candle's stream, from a pool that grows to the most stamps one
    /// sample took and is reused by the next.
    pub struct EventClock {
        stream: Arc<CudaStream>,
        events: Vec<CudaEvent>,
        used: usize,
        failed: bool,
    }

    impl EventClock {
        pub fn new(device: &Device) -> Option<EventClock> {
            let cuda = device.as_cuda_device().ok()?;
            Some(EventClock {
                stream: cuda.cuda_stream(),
                events: Vec::with_capacity(512),
                used: 0,
                failed: false,
            })
        }
    }

    impl super::Clock for EventClock {
        fn stamp(&mut self) -> u32 {
            let i = self.used;
            self.used += 1;
            if i == self.events.len() {
                // Timing events (cudarc's default disables timing).
                let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
                match self.stream.context().new_event(flags) {
                    Ok(e) => self.events.push(e),
                    Err(_) => {
                        self.failed = true;
                        return i as u32;
                    }
                }
            }
            match self.events.get(i) {
                Some(e) => self.failed |= e.record(&self.stream).is_err(),
                None => self.failed = true,
            }
            i as u32
        }

        fn seconds(&self, from: u32, to: u32) -> Option<f64> {
            if self.failed {
                return None;
            }
            let a = self.events.get(from as usize)?;
            let b = self.events.get(to as usize)?;
            a.elapsed_ms(b).ok().map(|ms| ms as f64 / 1e3)
        }

        fn clear(&mut self) {
            self.used = 0;
            self.failed = false;
        }
    }
}
