//! The dashboard: app state, key bindings, rendering, themes.

// TEMPORARY stub added by the lead so the CLI compiles while the dashboard is being built.
// The UI engineer replaces everything below with the real implementation (same signatures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorMode {
    Auto,
    Always,
    Never,
}

impl ColorMode {
    pub fn parse(s: &str) -> Result<ColorMode, String> {
        match s {
            "auto" => Ok(ColorMode::Auto),
            "always" => Ok(ColorMode::Always),
            "never" => Ok(ColorMode::Never),
            o => Err(format!("--color: unknown mode `{o}` (use auto, always or never)")),
        }
    }
}

pub struct DashboardOptions {
    pub fps: u32,
    pub theme: String,
    pub color: ColorMode,
    pub ascii: bool,
    pub slo: crate::stats::Slo,
    pub keys_file: Option<std::path::PathBuf>,
    pub output_step: i64,
    pub signal: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub struct Outcome {
    pub stats: crate::stats::RunStats,
    pub stop: crate::engine::events::StopReason,
    pub failed: Option<String>,
}

pub fn validate_options(_o: &DashboardOptions) -> anyhow::Result<()> {
    Ok(())
}

pub fn run_dashboard(
    _events: crossbeam_channel::Receiver<crate::engine::events::Event>,
    _control: crossbeam_channel::Sender<crate::engine::events::Control>,
    _opts: DashboardOptions,
    _on_event: &mut dyn FnMut(&crate::engine::events::Event),
) -> anyhow::Result<Outcome> {
    anyhow::bail!("the dashboard is not built yet; use --headless")
}
