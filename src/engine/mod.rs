//! The measuring core: workload, worker loop, timers, events.

pub mod http;
pub mod timer;
pub mod worker;
pub mod workload;
