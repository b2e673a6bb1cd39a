//! `infertop devices`: the CPU and the GPUs NVML sees.

use clap::Args;

use super::print_stdout;
use crate::exit::Failure;
use crate::exit::EXIT_OK;
use crate::telemetry;

#[derive(Args, Debug, Clone)]
pub struct DevicesArgs {
    #[arg(long, value_enum, default_value_t = DevicesFormat::Text)]
    pub format: DevicesFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DevicesFormat {
    /// One block per device.
    Text,
    /// One JSON object.
    Json,
}

pub fn devices(args: &DevicesArgs) -> Result<i32, Failure> {
    let json = args.format == DevicesFormat::Json;
    let mut text = telemetry::devices_report(json).map_err(|e| Failure::runtime(e.to_string()))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    print_stdout(&text)?;
    Ok(EXIT_OK)
}
