//! infertop: `top` for LLM inference latency.
//!
//! Data flows one way: the worker (`engine`) and the telemetry thread send `Event`s over one
//! channel; consumers (`ui` state, `record`, the headless printer) apply them; render functions
//! only read state.

pub mod cli;
pub mod engine;
pub mod event;
pub mod exit;
pub mod fold;
pub mod model;
pub mod plan;
pub mod record;
pub mod scrape;
pub mod session;
pub mod signals;
pub mod stats;
pub mod summary;
pub mod sweep;
pub mod telemetry;
pub mod traffic;
pub mod ui;
pub mod util;

/// Counts every heap allocation of the process (current and peak bytes), so the allocator gauge
/// and per-request peaks are exact on CPU. Atomics only; see `telemetry::alloc`.
#[global_allocator]
static GLOBAL: telemetry::alloc::CountingAlloc = telemetry::alloc::CountingAlloc;
