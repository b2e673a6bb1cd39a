//! `infertop devices` on this machine: the CPU is listed, and NVML is there or says why not.
#![allow(clippy::unwrap_used)]

use infertop::telemetry::{devices_report, nvml};

#[test]
fn text_report_lists_the_cpu_and_nvml_state() {
    let text = devices_report(false).expect("report");
    println!("{text}");
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("CPU     "), "{text}");
    assert!(text.contains("logical cores"), "{text}");
    if nvml::init().is_err() {
        assert!(text.contains("GPU     NVML unavailable: "), "{text}");
    } else {
        assert!(text.contains("Driver  "), "{text}");
    }
}

#[test]
fn json_report_is_an_object_with_cpu_and_gpus() {
    let json = devices_report(true).expect("report");
    println!("{json}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert!(v.is_object());
    if cfg!(target_os = "linux") {
        assert!(
            v["cpu"]["logical_cores"].as_u64().is_some_and(|c| c >= 1),
            "{json}"
        );
        assert!(
            v["cpu"]["memory_total_bytes"]
                .as_u64()
                .is_some_and(|b| b > 0),
            "{json}"
        );
    }
    assert!(v["gpus"].is_array());
    if nvml::init().is_err() {
        let reason = v["nvml_unavailable"].as_str().unwrap_or_default();
        assert!(reason.starts_with("NVML unavailable: "), "{json}");
        assert_eq!(v["gpus"].as_array().map(Vec::len), Some(0));
    }
}
