//! The measuring core: workload, worker loop, timers, events.

pub mod events;
