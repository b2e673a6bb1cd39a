//! Helpers shared by the integration tests (each test binary uses what it needs).
#![allow(dead_code)]

pub mod cancel_server;
pub mod capacity_server;
pub mod http_head;
pub mod nvml_sim;
pub mod pty;
pub mod real_server;
pub mod shapes_server;
pub mod traffic_server;
