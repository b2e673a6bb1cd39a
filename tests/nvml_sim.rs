//! The NVML path end to end, without a GPU: the binary loads the simulated driver library
//! (tests/nvml-sim/nvml_sim.c, built here with the C compiler) through
//! `INFERTOP_NVML_LIBRARY`, and `devices`, the headless record, `report`, the dashboard and
//! `infertop agent` are checked against the figures its script gives: two GPUs (an H200 and a
//! MIG-partitioned A100), memory rising with every read, fields NVML does not support, and a
//! GPU that falls off the bus in the middle of a run, which is one line and a run that goes on.
//!
//! The script counts time in memory reads: the k-th read of a GPU sees the figures below.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use infertop::util::format;

mod common;

use common::nvml_sim;
use common::pty::Session;

const BIN: &str = env!("CARGO_BIN_EXE_infertop");
const MIB: u64 = 1024 * 1024;

/// The H200's (GPU 0's) figures at its k-th memory read, as the C file's script writes them.
struct H200;

impl H200 {
    const TOTAL: u64 = 143_771 * MIB;
    fn this_process(k: u64) -> u64 {
        (1024 + 64 * k) * MIB
    }
    const PARENT: u64 = 8192 * MIB;
    const FOREIGN_PID: u32 = 4_194_303;
    const FOREIGN: u64 = 2048 * MIB;
    fn used(k: u64) -> u64 {
        Self::this_process(k) + Self::PARENT + Self::FOREIGN
    }
    fn util(k: u64) -> u64 {
        50 + (13 * k) % 50
    }
    fn mem_util(k: u64) -> u64 {
        20 + (7 * k) % 60
    }
    fn power_w(k: u64) -> f64 {
        (250 + (17 * k) % 400) as f64
    }
    fn temperature(k: u64) -> u64 {
        40 + k % 40
    }
    fn sm_mhz(k: u64) -> u64 {
        1755 + (k % 4) * 75
    }
    fn energy_j(k: u64) -> f64 {
        5_000_000.0 + 45.0 * k as f64
    }
}

/// The A100's (GPU 1's) at its k-th read: MIG on, no utilisation, no per-process memory.
fn a100_used(k: u64) -> u64 {
    (6144 + 16 * k + 4096) * MIB
}

/// `infertop ARGS` with the simulated library and `env`, run to its end.
fn infertop(args: &[&str], env: &[(&str, &OsStr)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("INFERTOP_NVML_LIBRARY", nvml_sim::library());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

// ---- telemetry::nvml in this process ----

/// Points this process's NVML at the simulated library, once: only the tests of this section
/// open NVML in this process (the others run the binary, given the variable themselves).
fn in_process() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        std::env::set_var(infertop::telemetry::nvml::LIBRARY_ENV, nvml_sim::library());
    });
}

/// The one NVML reader (`telemetry::nvml::read_index`, the sampler's and the agent's) on the
/// MIG GPU: what NVML does not support is `None`, and the processes NVML lists once per GPU
/// instance are one each, with no memory figure.
#[test]
fn the_reader_on_the_mig_gpu_leaves_out_what_nvml_does_not_give() {
    use infertop::event::{GpuProcess, Sample};
    use infertop::telemetry::nvml;
    in_process();
    let n = nvml::init().unwrap();
    assert_eq!(nvml::device_count(&n), Ok(2));
    let me = std::process::id();
    let mut s = Sample::default();
    nvml::read_index(&n, 1, me, &mut s).unwrap();
    assert_eq!(s.device_used_bytes, Some(a100_used(1)));
    assert_eq!(s.device_total_bytes, Some(81_920 * MIB));
    assert_eq!((s.gpu_util_pct, s.mem_util_pct), (None, None));
    assert_eq!(s.energy_j, None);
    assert_eq!(s.power_w, Some(131.0));
    assert_eq!(s.power_limit_w, Some(400.0));
    assert_eq!((s.sm_clock_mhz, s.mem_clock_mhz), (Some(1410), Some(1593)));
    assert_eq!(s.temperature_c, Some(36));
    assert!(s.throttle.is_empty());
    assert_eq!(s.process_device_bytes, None);
    let comm = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap()
            .trim()
            .to_string()
    };
    let parent = std::os::unix::process::parent_id();
    let mut expected = vec![
        GpuProcess {
            pid: me,
            name: comm(me),
            bytes: None,
        },
        GpuProcess {
            pid: parent,
            name: comm(parent),
            bytes: None,
        },
    ];
    expected.sort_by_key(|p| p.pid);
    assert_eq!(s.gpu_processes, expected);
    assert_eq!(
        nvml::identity(&n, 1),
        (
            Some("NVIDIA A100-SXM4-80GB".to_string()),
            Some("GPU-a1b2c3d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d".to_string())
        )
    );
    // A GPU the machine does not have is an error, not a panic or a silent blank.
    let mut s = Sample::default();
    let err = nvml::read_index(&n, 7, me, &mut s).unwrap_err();
    assert!(err.message.starts_with("NVML device 7: "), "{err}");
    assert!(!err.gpu_lost, "{err:?}");
    assert!(nvml::NvmlSource::open_ref(&nvml::NvmlDeviceRef::Index(7)).is_err());
}

/// `CUDA_VISIBLE_DEVICES` may name GPUs by UUID or a prefix of one, as CUDA allows: the
/// sampler of CUDA device `ordinal` finds the NVML GPU whose UUID begins so (NVML numbers
/// every GPU of the machine, CUDA only the visible ones), and reads that GPU's figures.
#[test]
fn a_uuid_prefix_in_cuda_visible_devices_finds_its_gpu() {
    use infertop::event::Sample;
    use infertop::telemetry::nvml::NvmlSource;
    use infertop::telemetry::Source;
    in_process();
    const H200_UUID: &str = "GPU-5d3c9a1e-0b7f-4c2a-9e61-3f2a7b8c9d01";
    // (ordinal, CUDA_VISIBLE_DEVICES, the NVML index it is, that GPU's memory)
    let cases: [(usize, &str, u32, u64); 5] = [
        (0, "GPU-a1b2c3d4", 1, 81_920 * MIB),
        (0, H200_UUID, 0, H200::TOTAL),
        (1, "GPU-a1b2, GPU-5d3c", 0, H200::TOTAL),
        (0, "GPU-5d3c9a1e-0b7f,1", 0, H200::TOTAL),
        (1, "GPU-5d3c9a1e-0b7f,1", 1, 81_920 * MIB),
    ];
    for (ordinal, visible, index, total) in cases {
        let mut source = NvmlSource::for_visible_devices(ordinal, Some(visible))
            .unwrap_or_else(|e| panic!("{ordinal} of {visible:?}: {e}"));
        assert_eq!(source.index(), index, "{ordinal} of {visible:?}");
        let mut s = Sample::default();
        source.sample(&mut s).unwrap();
        assert_eq!(
            s.device_total_bytes,
            Some(total),
            "{ordinal} of {visible:?}"
        );
        println!("CUDA device {ordinal} of CUDA_VISIBLE_DEVICES={visible}: NVML GPU {index}");
    }
    // A prefix of no GPU here, and a MIG instance: one line each, no panic, no other GPU.
    let err = NvmlSource::for_visible_devices(0, Some("GPU-ffff"))
        .err()
        .unwrap();
    assert_eq!(err, "no NVML device with UUID GPU-ffff");
    let err = NvmlSource::for_visible_devices(0, Some("MIG-a1b2c3d4/1/0"))
        .err()
        .unwrap();
    assert!(err.contains("MIG instance MIG-a1b2c3d4/1/0"), "{err}");
}

// ---- infertop devices ----

#[test]
fn devices_lists_both_simulated_gpus() {
    let out = infertop(&["devices"], &[]);
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}{}", text(&out.stderr));
    println!("{report}");
    assert!(report.contains("Driver  550.127.05, CUDA 12.4"), "{report}");
    let row = |index: &str| {
        report
            .lines()
            .find(|l| l.starts_with(index))
            .unwrap_or_else(|| panic!("no row {index:?} in\n{report}"))
            .to_string()
    };
    let h200 = row("0   ");
    for cell in [
        "NVIDIA H200",
        &format::bytes(H200::TOTAL),
        "9.0",
        "1980 MHz",
        "3201 MHz",
        "6144 bit",
        "4.92TB/s", // 6144 / 8 × 3201 MHz × 2
        "700 W",
    ] {
        assert!(h200.contains(cell), "{cell} missing in {h200:?}");
    }
    let a100 = row("1   ");
    for cell in [
        "NVIDIA A100-SXM4-80GB",
        "80.0GiB",
        "8.0",
        "1410 MHz",
        "1593 MHz",
        "5120 bit",
        "2.04TB/s",
        "400 W",
    ] {
        assert!(a100.contains(cell), "{cell} missing in {a100:?}");
    }
    assert!(
        report.contains("GPU 1   MIG mode on: the figures are the whole GPU's"),
        "{report}"
    );
    assert!(!report.contains("GPU 0   MIG"), "{report}");

    let out = infertop(&["devices", "--format", "json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("nvml_unavailable").is_none(), "{v}");
    assert_eq!(v["driver_version"], "550.127.05");
    assert_eq!(v["cuda_driver_version"], "12.4");
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{v}");
    assert_eq!(gpus[0]["uuid"], "GPU-5d3c9a1e-0b7f-4c2a-9e61-3f2a7b8c9d01");
    assert_eq!(gpus[0]["memory_total_bytes"], H200::TOTAL);
    assert_eq!(gpus[0]["memory_bandwidth_bytes_per_s"], 4.916_736e12);
    assert_eq!(gpus[0]["mig_enabled"], false);
    assert_eq!(gpus[1]["mig_enabled"], true);
    assert_eq!(gpus[1]["compute_capability"], "8.0");
    assert!(gpus.iter().all(|g| g.get("error").is_none()), "{v}");
}

#[test]
fn devices_says_why_nvml_cannot_be_opened() {
    // A library that is not there: the loader's reason, naming the file.
    let out = Command::new(BIN)
        .arg("devices")
        .env("INFERTOP_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains(
            "GPU     NVML unavailable: /nonexistent/libnvidia-ml.so.1: cannot open shared object file"
        ),
        "{report}"
    );
    // A library that loads but whose driver is not running: NVML's reason, and which library.
    let out = infertop(
        &["devices"],
        &[("INFERTOP_NVML_SIM_INIT", OsStr::new("driver-not-loaded"))],
    );
    let report = text(&out.stdout);
    let expected = format!(
        "GPU     NVML unavailable: NVIDIA driver is not loaded (INFERTOP_NVML_LIBRARY={})",
        nvml_sim::library().display()
    );
    assert!(report.contains(&expected), "{report}");
    assert!(!report.contains("NVIDIA H200"), "{report}");
}

/// NVML's `NVML_ERROR_NO_PERMISSION` at init (the device files not open to this user, as in a
/// container not given the GPUs): one line saying so and which library, and `devices` still
/// lists the machine (exit 0, as without a driver: it is an inventory, not a check).
#[test]
fn devices_says_when_nvml_refuses_this_user() {
    let out = infertop(
        &["devices"],
        &[("INFERTOP_NVML_SIM_INIT", OsStr::new("no-permission"))],
    );
    let report = text(&out.stdout);
    println!("{report}");
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let expected = format!(
        "GPU     NVML unavailable: the current user does not have permission to perform this operation (INFERTOP_NVML_LIBRARY={})",
        nvml_sim::library().display()
    );
    let nvml_lines: Vec<&str> = report.lines().filter(|l| l.contains("NVML")).collect();
    assert_eq!(nvml_lines, [expected.as_str()], "{report}");
    assert!(report.starts_with("CPU "), "{report}");
    let out = infertop(
        &["devices", "--format", "json"],
        &[("INFERTOP_NVML_SIM_INIT", OsStr::new("no-permission"))],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["nvml_unavailable"],
        expected.trim_start_matches("GPU     ")
    );
    assert_eq!(v["gpus"], serde_json::json!([]));
}

#[test]
fn devices_with_a_lost_gpu_lists_the_other_and_says_why() {
    let out = infertop(
        &["devices"],
        &[
            ("INFERTOP_NVML_SIM_LOSE_GPU", OsStr::new("1")),
            ("INFERTOP_NVML_SIM_LOSE_AFTER", OsStr::new("0")),
        ],
    );
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}{}", text(&out.stderr));
    println!("{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("0   NVIDIA H200") && l.contains("700 W")),
        "{report}"
    );
    let lost = report.lines().find(|l| l.starts_with("1   ")).unwrap();
    assert!(!lost.contains("NVIDIA") && lost.contains(" - "), "{lost:?}");
    assert!(
        report.contains("GPU 1   NVML: device fell off the bus"),
        "{report}"
    );
}

// ---- A headless run and its record, then `report` ----

/// The sampled GPU is lost after this many reads.
const HEADLESS_READS: u64 = 20;

#[test]
fn headless_record_has_the_gpu_figures_then_one_line_for_the_lost_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("run.jsonl");
    let child = Command::new(BIN)
        .args([
            "--headless",
            "--telemetry-gpu",
            "0",
            "--sample-interval",
            "50ms",
        ])
        .args([
            "--output-tokens",
            "4",
            "--duration",
            "3s",
            "--format",
            "json",
        ])
        .arg("--record")
        .arg(&record)
        .env("INFERTOP_NVML_LIBRARY", nvml_sim::library())
        .env("INFERTOP_NVML_SIM_LOSE_GPU", "0")
        .env("INFERTOP_NVML_SIM_LOSE_AFTER", HEADLESS_READS.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    // One warning on stderr, and the run went on.
    let warning = "infertop: warning: telemetry: nvml stopped, going on without it: NVML: \
                   device fell off the bus";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");

    let lines = json_lines(&record);
    let gpu_samples: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["type"] == "telemetry" && !l["device_used_bytes"].is_null())
        .collect();
    // Every read before the loss is in the record, in order, with the figures it had.
    assert_eq!(gpu_samples.len() as u64, HEADLESS_READS, "{gpu_samples:?}");
    let me_name = std::fs::read_to_string("/proc/self/comm").unwrap();
    for (i, s) in gpu_samples.iter().enumerate() {
        let k = i as u64 + 1;
        assert_eq!(s["device_used_bytes"], H200::used(k), "sample {k}: {s}");
        assert_eq!(s["device_total_bytes"], H200::TOTAL);
        assert_eq!(s["process_device_bytes"], H200::this_process(k), "{s}");
        assert_eq!(s["gpu_util_pct"], H200::util(k), "{s}");
        assert_eq!(s["mem_util_pct"], H200::mem_util(k), "{s}");
        assert_eq!(s["power_w"], H200::power_w(k), "{s}");
        assert_eq!(s["power_limit_w"], 700.0);
        assert_eq!(s["temperature_c"], H200::temperature(k), "{s}");
        assert_eq!(s["sm_clock_mhz"], H200::sm_mhz(k), "{s}");
        assert_eq!(s["mem_clock_mhz"], 3201);
        assert_eq!(s["energy_j"], H200::energy_j(k), "{s}");
        let throttle = if k % 10 == 9 {
            serde_json::json!(["power cap"])
        } else {
            serde_json::Value::Null
        };
        assert_eq!(s["throttle"], throttle, "sample {k}: {s}");
        // Three processes, most memory first (ties by pid): the parent (this test), the one
        // NVML lists from another PID namespace (no name here), and infertop, which overtakes
        // it at the 16th read.
        let mut expected = vec![
            serde_json::json!({"pid": std::process::id(), "name": me_name.trim(), "bytes": H200::PARENT}),
            serde_json::json!({"pid": H200::FOREIGN_PID, "name": "?", "bytes": H200::FOREIGN}),
            serde_json::json!({"pid": pid, "name": "infertop", "bytes": H200::this_process(k)}),
        ];
        expected.sort_by_key(|p| {
            (
                std::cmp::Reverse(p["bytes"].as_u64().unwrap()),
                p["pid"].as_u64().unwrap(),
            )
        });
        assert_eq!(
            s["gpu_processes"],
            serde_json::Value::Array(expected),
            "sample {k}"
        );
    }

    // The loss: one error event, not fatal, after the last GPU sample ...
    let position = |pred: &dyn Fn(&serde_json::Value) -> bool| lines.iter().position(pred);
    let lost_at = position(&|l| {
        l["type"] == "event"
            && l["event"] == "error"
            && l["detail"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("nvml stopped"))
    })
    .expect("an error event for the lost GPU");
    let message = lines[lost_at]["detail"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(warning.trim_start_matches("infertop: warning: ")),
        "{message}"
    );
    assert_eq!(lines[lost_at]["detail"]["fatal"], false);
    let errors = lines.iter().filter(|l| l["event"] == "error").count();
    assert_eq!(errors, 1, "one line for the lost GPU");
    let last_gpu = lines
        .iter()
        .rposition(|l| l["type"] == "telemetry" && !l["device_used_bytes"].is_null())
        .unwrap();
    assert!(last_gpu < lost_at);
    // ... and the run goes on: host telemetry and finished requests after it.
    assert!(
        lines[lost_at..]
            .iter()
            .any(|l| l["type"] == "telemetry" && !l["rss_bytes"].is_null()),
        "no telemetry after the loss"
    );
    let requests_after = lines[lost_at..]
        .iter()
        .filter(|l| l["type"] == "request")
        .count();
    assert!(requests_after > 0, "no request finished after the loss");
    assert!(lines.last().unwrap()["type"] == "footer");

    // `report` reads the same figures back: the device's peak is the last read's, and the
    // energy runs from the sample before the first request to the last one read.
    let first_request = position(&|l| l["type"] == "request").unwrap();
    let start_k = lines[..first_request]
        .iter()
        .filter(|l| l["type"] == "telemetry" && !l["energy_j"].is_null())
        .count() as u64;
    assert!(
        (1..HEADLESS_READS).contains(&start_k),
        "the first request finished at read {start_k}: too late to measure energy"
    );
    let report = Command::new(BIN)
        .arg("report")
        .arg(&record)
        .output()
        .unwrap();
    let summary = text(&report.stdout);
    assert!(report.status.success(), "{summary}{}", text(&report.stderr));
    println!("{summary}");
    let peak = format!(
        "device peak {} of {}",
        format::bytes(H200::used(HEADLESS_READS)),
        format::bytes(H200::TOTAL)
    );
    assert!(summary.contains(&peak), "{peak} missing in\n{summary}");
    let energy = format!(
        "energy: {:.1} J after the first request",
        45.0 * (HEADLESS_READS - start_k) as f64
    );
    assert!(summary.contains(&energy), "{energy} missing in\n{summary}");
}

/// The MIG GPU (GPU 1), sampled by a headless run: what NVML does not support there
/// (utilisation, the energy counter, per-process memory) is absent from every sample (null,
/// never 0), nothing is said about it, and the run goes on; `report` gives the device's peak
/// and no energy line, its JSON null energy, and the trace no utilisation counter.
#[test]
fn headless_record_and_report_of_the_mig_gpu_leave_out_what_it_does_not_give() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("mig.jsonl");
    let out = infertop(
        &[
            "--headless",
            "--telemetry-gpu",
            "1",
            "--sample-interval",
            "50ms",
            "--output-tokens",
            "4",
            "--duration",
            "2s",
            "--format",
            "json",
            "--record",
            record.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");

    let lines = json_lines(&record);
    let samples: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["type"] == "telemetry" && !l["device_used_bytes"].is_null())
        .collect();
    assert!(samples.len() >= 10, "{} GPU samples", samples.len());
    for (i, s) in samples.iter().enumerate() {
        let k = i as u64 + 1;
        // What NVML gives on the MIG GPU, as the script has it at read k.
        assert_eq!(s["device_used_bytes"], a100_used(k), "sample {k}: {s}");
        assert_eq!(s["device_total_bytes"], 81_920 * MIB);
        assert_eq!(s["power_w"], (120 + (11 * k) % 200) as f64, "{s}");
        assert_eq!(s["power_limit_w"], 400.0);
        assert_eq!(s["temperature_c"], 35 + k % 20, "{s}");
        assert_eq!(
            (&s["sm_clock_mhz"], &s["mem_clock_mhz"]),
            (&1410.into(), &1593.into())
        );
        // What it does not: absent, never 0.
        for field in [
            "gpu_util_pct",
            "mem_util_pct",
            "energy_j",
            "process_device_bytes",
        ] {
            assert!(s[field].is_null(), "{field} in sample {k}: {s}");
        }
        let procs = s["gpu_processes"].as_array().unwrap();
        assert_eq!(procs.len(), 2, "{s}");
        assert!(procs.iter().all(|p| p["bytes"].is_null()), "{s}");
    }
    // No error for what is not supported; the run went on to its end.
    assert!(
        lines.iter().all(|l| l["event"] != "error"),
        "an error event for a field NVML does not support"
    );
    let requests = lines.iter().filter(|l| l["type"] == "request").count();
    assert!(requests > 5, "{requests} requests");
    assert_eq!(lines.last().unwrap()["type"], "footer");

    // `report`: the device's peak (the last read's), no energy line (not "0.0 J").
    let trace = dir.path().join("mig.trace.json");
    let report = Command::new(BIN)
        .arg("report")
        .arg(&record)
        .args(["--no-probe", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    let summary = text(&report.stdout);
    assert!(report.status.success(), "{summary}{}", text(&report.stderr));
    println!("{summary}");
    let peak = format!(
        "device peak {} of 80.0GiB",
        format::bytes(a100_used(samples.len() as u64))
    );
    assert!(summary.contains(&peak), "{peak} missing in\n{summary}");
    assert!(!summary.contains("energy"), "{summary}");
    let report = Command::new(BIN)
        .arg("report")
        .arg(&record)
        .args(["--no-probe", "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let resources = &v["resources"];
    assert_eq!(
        resources["device_used_peak_bytes"],
        a100_used(samples.len() as u64)
    );
    assert!(resources["energy_j"].is_null(), "{resources}");
    assert!(
        resources["energy_per_output_token_j"].is_null(),
        "{resources}"
    );
    // The trace: power and temperature counters from every GPU sample, no utilisation.
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace
        .get("traceEvents")
        .unwrap_or(&trace)
        .as_array()
        .unwrap();
    let counted = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .count()
    };
    assert_eq!(counted("power"), samples.len());
    assert_eq!(counted("temperature"), samples.len());
    assert_eq!(counted("GPU util"), 0);
    assert_eq!(counted("GPU memory util"), 0);
    println!(
        "GPU 1 (MIG): {} samples, {requests} requests; utilisation, energy and process memory null in every one; power {} W .. {} W",
        samples.len(),
        samples[0]["power_w"],
        samples[samples.len() - 1]["power_w"]
    );
}

// ---- The dashboard ----

fn dashboard(env: &[(&str, &OsStr)], cols: u16, rows: u16) -> Session {
    let library = ("INFERTOP_NVML_LIBRARY", nvml_sim::library().as_os_str());
    let env: Vec<(&str, &OsStr)> = std::iter::once(library)
        .chain(env.iter().copied())
        .collect();
    let args = [
        "--telemetry-gpu",
        "0",
        "--output-tokens",
        "8",
        "--fps",
        "20",
    ];
    Session::start_with_env(&args, &env, cols, rows, 0)
}

/// Finished requests, from the header's second row (`elapsed … · N requests …`).
fn requests_done(screen: &str) -> u64 {
    screen
        .lines()
        .find_map(|l| {
            let before = &l[..l.find(" requests")?];
            before.split_whitespace().last()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no request count on\n{screen}"))
}

#[test]
fn dashboard_shows_the_gpu_gauges_and_goes_on_when_it_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let lose = dir.path().join("lose-gpu-0");
    let mut s = dashboard(
        &[
            ("INFERTOP_NVML_SIM_LOSE_GPU", OsStr::new("0")),
            ("INFERTOP_NVML_SIM_LOSE_WHEN", lose.as_os_str()),
        ],
        200,
        60,
    );
    // The memory panel: the device gauge against the H200's memory, utilisation, power against
    // its limit, and the processes on the GPU (this one marked, the foreign one unnamed).
    let total = format!("/{}", format::bytes(H200::TOTAL));
    let foreign = format!("? {} {}", H200::FOREIGN_PID, format::bytes(H200::FOREIGN));
    let parent = format!("{} {}", std::process::id(), format::bytes(H200::PARENT));
    s.wait_for(
        &[
            " RUNNING ",
            "device",
            &total,
            "gpu ",
            "% · mem ",
            "/700W",
            "procs",
            "*infertop",
            &foreign,
            &parent,
        ],
        Duration::from_secs(60),
    );
    let screen = s.contents();
    println!("{screen}");
    assert!(!screen.contains("NVML unavailable"), "{screen}");

    // The GPU falls off the bus: one line in the events pane, the GPU's figures leave the
    // memory panel, and the run goes on.
    std::fs::write(&lose, b"").unwrap();
    s.wait_for(&["error: telemetry: nvml stopped"], Duration::from_secs(20));
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.contents().contains(&total) {
        assert!(
            Instant::now() < deadline,
            "the lost GPU's gauge stayed:\n{}",
            s.contents()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let at_loss = requests_done(&s.contents());
    let deadline = Instant::now() + Duration::from_secs(30);
    while requests_done(&s.contents()) <= at_loss {
        assert!(
            Instant::now() < deadline,
            "no request finished after the loss"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let screen = s.contents();
    println!("{screen}");
    assert!(screen.contains(" RUNNING "), "{screen}");
    assert!(
        screen.contains("alloc") && screen.contains("rss"),
        "{screen}"
    );
    assert!(!screen.contains("procs"), "{screen}");
    // The GPU's strips are not drawn with its last figures as if they were current.
    assert!(
        !screen.contains("util %") && !screen.contains("power W"),
        "{screen}"
    );
    assert_eq!(screen.matches("nvml stopped").count(), 1, "{screen}");
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}\n{}", s.contents());
    s.assert_restored();
}

/// The top of the memory strip's scale (`over time … FLOOR..TOP`), in bytes.
fn timeline_top(screen: &str) -> Option<f64> {
    let line = screen.lines().find(|l| l.contains("over time"))?;
    let scale = line.split_whitespace().find(|w| w.contains(".."))?;
    let top = scale.split("..").nth(1)?.trim_end_matches(['│', '┐']);
    let (number, unit) = top.split_at(top.find(|c: char| c.is_ascii_alphabetic())?);
    let scale = match unit {
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "MiB" => 1024.0 * 1024.0,
        _ => return None,
    };
    Some(number.parse::<f64>().ok()? * scale)
}

#[test]
fn dashboard_memory_timeline_follows_the_device_memory() {
    // Below 120 columns the memory panel is in the bottom row, tall enough for the strip.
    let mut s = dashboard(&[], 100, 50);
    s.wait_for(&[" RUNNING ", "over time", "GiB"], Duration::from_secs(60));
    let screen = s.contents();
    println!("{screen}");
    // The strip plots device memory (GiB), not the process's (MiB): the first read is
    // 11.1 GiB and it rises 64 MiB a sample.
    let first = timeline_top(&screen).unwrap_or_else(|| panic!("no strip scale in\n{screen}"));
    assert!(first >= H200::used(1) as f64, "{first} on\n{screen}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let screen = s.contents();
        let now = timeline_top(&screen).unwrap();
        if now > first {
            println!("{screen}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the strip stayed at {first}:\n{screen}"
        );
    }
    s.send("q");
    let status = s.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "{status:?}\n{}", s.contents());
}

// ---- infertop agent ----

/// GET /metrics from the agent at `addr`: the page's body.
fn scrape(addr: &str) -> String {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut page = String::new();
    conn.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    page.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// A process this test started, killed and reaped when the test ends (a failed assertion
/// too), so it never outlives the test.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The calls the simulated library has seen on GPU 0 and GPU 1 (INFERTOP_NVML_SIM_CALLS).
fn calls(path: &Path) -> [u64; 2] {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = [0u64; 2];
    for line in text.lines() {
        let (gpu, n) = line.split_once(' ').unwrap();
        out[gpu.parse::<usize>().unwrap()] = n.trim().parse().unwrap();
    }
    out
}

fn gpus(page: &str) -> Vec<infertop::event::GpuFigures> {
    let scrape = infertop::scrape::exporter::parse(page).unwrap();
    infertop::scrape::exporter::telemetry(None, &scrape, 1.0).gpus
}

#[test]
fn agent_serves_both_gpus_then_the_one_left_when_one_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let lose = dir.path().join("lose-gpu-1");
    let calls_file = dir.path().join("calls");
    let mut agent = Reaped(
        Command::new(BIN)
            .args(["agent", "--port", "0"])
            .env("INFERTOP_NVML_LIBRARY", nvml_sim::library())
            .env("INFERTOP_NVML_SIM_LOSE_GPU", "1")
            .env("INFERTOP_NVML_SIM_LOSE_WHEN", &lose)
            .env("INFERTOP_NVML_SIM_CALLS", &calls_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(agent.0.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("(2 GPUs)"), "{line}");
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string();

    // Pages 1 and 2: both GPUs, each page a fresh read (the k-th page is the k-th read).
    for k in 1..=2u64 {
        let page = scrape(&addr);
        assert!(page.contains("infertop_agent_nvml_available 1"), "{page}");
        let g = gpus(&page);
        assert_eq!(g.len(), 2, "{page}");
        let (h200, a100) = (&g[0], &g[1]);
        assert_eq!(h200.gpu, "0");
        assert_eq!(h200.name.as_deref(), Some("NVIDIA H200"));
        assert_eq!(h200.util_pct, Some(H200::util(k) as f64), "{page}");
        assert_eq!(h200.mem_util_pct, Some(H200::mem_util(k) as f64));
        assert_eq!(h200.mem_used_bytes, Some(H200::used(k) as f64));
        assert_eq!(h200.mem_total_bytes, Some(H200::TOTAL as f64));
        assert_eq!(h200.power_w, Some(H200::power_w(k)));
        assert_eq!(h200.sm_clock_mhz, Some(H200::sm_mhz(k) as f64));
        assert_eq!(h200.temperature_c, Some(H200::temperature(k) as f64));
        assert_eq!(a100.gpu, "1");
        assert_eq!(a100.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        // MIG: NVML does not support utilisation; the rest is there.
        assert_eq!(a100.util_pct, None, "{page}");
        assert_eq!(a100.mem_util_pct, None);
        assert_eq!(a100.mem_used_bytes, Some(a100_used(k) as f64));
        assert_eq!(a100.power_w, Some((120 + (11 * k) % 200) as f64));
        assert_eq!(a100.sm_clock_mhz, Some(1410.0));
        assert_eq!(a100.temperature_c, Some((35 + k % 20) as f64));
    }

    let before_loss = calls(&calls_file);

    // GPU 1 falls off the bus: the page says so and serves GPU 0 and the host, every time.
    // Page 3 finds it lost; from then on it is not asked again.
    std::fs::write(&lose, b"").unwrap();
    let mut after: Vec<[u64; 2]> = Vec::new();
    for k in 3..=5u64 {
        let page = scrape(&addr);
        assert!(
            page.contains("# GPU 1: NVML: device fell off the bus"),
            "{page}"
        );
        assert!(page.contains("infertop_agent_nvml_available 1"), "{page}");
        assert!(page.contains("infertop_host_memory_total_bytes"), "{page}");
        let g = gpus(&page);
        assert_eq!(g.len(), 1, "{page}");
        assert_eq!(g[0].gpu, "0");
        assert_eq!(g[0].mem_used_bytes, Some(H200::used(k) as f64), "{page}");
        after.push(calls(&calls_file));
    }
    println!(
        "NVML calls on GPU 0, GPU 1: {before_loss:?} after pages 1-2, then {after:?} after pages 3, 4 and 5"
    );
    // Page 3 asked GPU 1 and was told it is lost; pages 4 and 5 did not ask it.
    assert!(after[0][1] > before_loss[1], "{before_loss:?} {after:?}");
    assert_eq!(
        after[1][1], after[0][1],
        "GPU 1 asked again after it was lost"
    );
    assert_eq!(
        after[2][1], after[0][1],
        "GPU 1 asked again after it was lost"
    );
    // GPU 0 is read on every page.
    assert!(after[0][0] > before_loss[0] && after[2][0] > after[1][0] && after[1][0] > after[0][0]);
    drop(agent);
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    // Said once on stderr, not once a page.
    assert_eq!(
        rest.matches("infertop agent: GPU 1: NVML: device fell off the bus")
            .count(),
        1,
        "{rest}"
    );
}
