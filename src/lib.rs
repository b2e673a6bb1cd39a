//! infertop: `top` for LLM inference latency.
//!
//! Data flows one way: the engines (`engine`: candle's worker, the http client) and the
//! telemetry thread send `Event`s (`event`, the protocol) over one channel; consumers apply
//! them to one fold (`fold`) beside the dashboard's state (`ui`), the recorder (`record`) and
//! the headless printer; render functions only read state. `report` is what is made from
//! records afterwards (reports, comparisons, slices, plots, traces). `cli` parses, `plan` turns flags
//! into a checked plan, `session` carries it out; `traffic` is what a run sends, `stats` the
//! statistics, `sweep` grids and searches of runs, `determinism` a server's outputs alone and
//! under load, `scrape` a server's own metrics,
//! `telemetry` memory and GPU figures.

pub mod cli;
pub mod determinism;
pub mod engine;
pub mod event;
pub mod exit;
pub mod fold;
pub mod model;
pub mod plan;
pub mod record;
pub mod report;
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
