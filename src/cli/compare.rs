//! `infertop compare`: exit 0, or 3 when generated outputs differ (see `record::compare`).

use std::path::{Path, PathBuf};

use clap::Args;

use super::{args, print_stdout, say, Failure};
use crate::record::compare::{compare_files, CompareFormat, CompareOptions};

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Two or more records; the first is the baseline.
    #[arg(required = true, num_args = 2..)]
    pub records: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = CompareFormat::Md)]
    pub format: CompareFormat,
    /// Bootstrap resamples.
    #[arg(long, default_value = "2000", value_parser = args::positive_usize)]
    pub resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn compare(args: &CompareArgs) -> Result<i32, Failure> {
    let opts = CompareOptions {
        resamples: args.resamples,
        seed: args.seed,
        ..CompareOptions::default()
    };
    let paths: Vec<&Path> = args.records.iter().map(PathBuf::as_path).collect();
    let cmp = compare_files(&paths, &opts).map_err(Failure::usage)?;
    print_stdout(&cmp.render(args.format))?;
    for alarm in cmp.alarms() {
        say!("infertop: {alarm}");
    }
    Ok(cmp.exit_code())
}
