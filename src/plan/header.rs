//! The record's header: the command line, the run's configuration as planned, and the machine.

use super::engine::EnginePlan;
use super::opts::RunOpts;
use crate::engine::workload::{Sampling, Workload};
use crate::model::{self, DeviceSpec};
use crate::record::line::{EngineKind, Header, Machine, RunConfig, RECORD_FORMAT};
use crate::stats::Slo;
use crate::telemetry;

/// The command line, with an `--api-key` value blanked: the key is never written.
pub fn command_line() -> Vec<String> {
    masked(std::env::args().collect())
}

/// The command line with the API key and the values of credential headers as `***`.
fn masked(mut command: Vec<String>) -> Vec<String> {
    let header = |h: &str| match h.split_once(':') {
        Some((name, _)) if crate::engine::http::extra::is_secret(name) => format!("{name}: ***"),
        _ => h.to_string(),
    };
    for i in 0..command.len() {
        if command[i].starts_with("--api-key=") {
            command[i] = "--api-key=***".into();
        } else if command[i] == "--api-key" {
            if let Some(v) = command.get_mut(i + 1) {
                *v = "***".into();
            }
        } else if let Some(h) = command[i].strip_prefix("--header=") {
            command[i] = format!("--header={}", header(h));
        } else if command[i] == "--header" {
            if let Some(v) = command.get_mut(i + 1) {
                *v = header(v);
            }
        }
    }
    command
}

/// The record's header for a run of `engine`, planned from `opts`.
pub fn header(opts: &RunOpts, engine: &EnginePlan, slo: Slo) -> Header {
    let w = &opts.workload;
    let common = RunConfig {
        model: opts.model.model.clone(),
        seed: w.seed,
        output_tokens: w.output_tokens.to_string(),
        warmup: w.warmup,
        requests: w.requests,
        duration: w.duration.map(|d| format!("{}s", d.as_secs_f64())),
        stop_at_eos: w.stop_at_eos,
        sampling: w.sampling.as_ref().map(Sampling::describe),
        step_parts: opts.model.step_parts,
        slo,
        ..RunConfig::default()
    };
    let config = match engine {
        EnginePlan::Candle(c) => RunConfig {
            device: c.device.name(),
            dtype: model::dtype_name(c.dtype).to_string(),
            threads: c.threads,
            prompt_tokens: c.workload.describe(&c.traffic).prompt_tokens,
            batch: c.workload.batch,
            traffic: Workload::traffic_info(&c.traffic),
            ..common
        },
        // No API key here: it is never written.
        EnginePlan::Http(h) => RunConfig {
            engine: Some(EngineKind::Http),
            endpoints: h
                .endpoints
                .iter()
                .map(|e| e.display().to_string())
                .collect(),
            api: Some(h.api.name().into()),
            served_model: if h.shape.models.len() > 1 {
                Some(
                    h.shape
                        .models
                        .iter()
                        .map(|(m, w)| format!("{m}={w}"))
                        .collect::<Vec<_>>()
                        .join(","),
                )
            } else {
                h.served_model.clone()
            },
            tools: h.shape.tools.as_ref().map(|t| t.defs.len()),
            tool_choice: h.shape.tool_choice.as_ref().map(|c| c.name()),
            tool_time: h.shape.tool_time.as_ref().map(|t| t.describe()),
            extra_body: h.shape.extra.body.clone().map(serde_json::Value::Object),
            headers: h.shape.extra.described_headers(),
            cancel: h.cancel.as_ref().map(|c| c.words()),
            probe: h.canary.as_ref().map(|c| c.words()),
            concurrency: h.concurrency,
            rate: h.rate,
            burstiness: h.rate.map(|_| h.burstiness),
            request_timeout_s: Some(h.request_timeout.as_secs_f64()),
            reset_prefix_cache: h.reset_prefix_cache,
            shard: (!h.traffic.shard.is_whole()).then_some(h.traffic.shard),
            start_at_unix_s: opts.server.start_at,
            device: "http".into(),
            prompt_tokens: h.describe().prompt_tokens,
            output_tokens: h.describe().output_tokens,
            batch: h.shape.batch.max(1),
            traffic: h.traffic_info(),
            ..common
        },
    };
    Header {
        infertop_version: env!("CARGO_PKG_VERSION").to_string(),
        record_format: RECORD_FORMAT,
        command: command_line(),
        config,
        machine: machine(engine.device()),
        model: None,
        // The session sets it when the run's clock starts.
        clock: None,
    }
}

/// The header of a run a signal stopped before it was planned (while its dataset was read):
/// the command line and the flags as given, so its record still says what was asked.
pub fn unplanned(opts: &RunOpts) -> Header {
    let w = &opts.workload;
    Header {
        infertop_version: env!("CARGO_PKG_VERSION").to_string(),
        record_format: RECORD_FORMAT,
        command: command_line(),
        config: RunConfig {
            model: opts.model.model.clone(),
            device: opts.model.device.name(),
            seed: w.seed,
            prompt_tokens: w
                .prompt_tokens
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            output_tokens: w.output_tokens.to_string(),
            warmup: w.warmup,
            requests: w.requests,
            slo: opts.output.slo.unwrap_or_default(),
            engine: opts.is_server().then_some(EngineKind::Http),
            endpoints: opts
                .server
                .endpoint
                .iter()
                .map(|e| e.display().to_string())
                .collect(),
            ..RunConfig::default()
        },
        machine: machine(DeviceSpec::Cpu),
        model: None,
        clock: None,
    }
}

/// The machine the run measures on: CPU, and on CUDA the GPU (through NVML), which names the
/// peak figures `report` uses for the roofline.
pub fn machine(device: DeviceSpec) -> Machine {
    let cpu = telemetry::process::cpu_model_name();
    let (gpu, driver) = match device {
        DeviceSpec::Cpu => (None, None),
        DeviceSpec::Cuda(n) => {
            let devices = telemetry::devices::collect();
            (
                devices.gpus.get(n).and_then(|g| g.name.clone()),
                devices.driver_version,
            )
        }
    };
    Machine {
        cpu,
        gpu,
        driver,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        candle_version: env!("INFERTOP_CANDLE_VERSION").to_string(),
        cuda_feature: cfg!(feature = "cuda"),
    }
}

#[cfg(test)]
mod tests {
    use super::masked;

    #[test]
    fn keys_and_credential_headers_are_masked_in_the_command_line() {
        let given = [
            "infertop",
            "--api-key",
            "sk-1",
            "--api-key=sk-2",
            "--header",
            "Authorization: Bearer sk-3",
            "--header=X-Api-Key: sk-4",
            "--header",
            "X-Tenant: blue",
        ];
        let shown = masked(given.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            shown,
            [
                "infertop",
                "--api-key",
                "***",
                "--api-key=***",
                "--header",
                "Authorization: ***",
                "--header=X-Api-Key: ***",
                "--header",
                "X-Tenant: blue",
            ]
        );
    }
}
