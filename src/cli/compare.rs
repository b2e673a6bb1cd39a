//! `infertop compare`: exit 0, or 3 when generated outputs differ (see `record::compare`).

use std::path::{Path, PathBuf};

use clap::Args;

use super::{args, print_stdout, say, Failure};
use crate::record::compare::{compare_files, CompareFormat, CompareOptions};
use crate::sweep::record::read_sweep;

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

/// Two sweeps: a verdict per cell. `None` when the records are runs, not sweeps.
fn compare_sweeps(
    paths: &[&Path],
    args: &CompareArgs,
    opts: &CompareOptions,
) -> Result<Option<i32>, Failure> {
    let mut sweeps = Vec::new();
    for p in paths {
        sweeps.push(read_sweep(p).map_err(Failure::usage)?);
    }
    match sweeps.iter().filter(|s| s.is_some()).count() {
        0 => return Ok(None),
        2 if sweeps.len() == 2 => {}
        _ => {
            return Err(Failure::usage(
                "compare: a sweep compares with one other sweep only (infertop compare A.jsonl B.jsonl, both written by infertop sweep --record)",
            ))
        }
    }
    let mut it = sweeps.into_iter().flatten();
    let (Some(a), Some(b)) = (it.next(), it.next()) else {
        return Ok(None);
    };
    let name = |p: &Path| p.display().to_string();
    let cmp = crate::sweep::record::compare_sweeps(a, &name(paths[0]), b, &name(paths[1]), opts);
    let text = match args.format {
        CompareFormat::Md => cmp.to_markdown(),
        CompareFormat::Json => cmp.to_json(),
    };
    print_stdout(&text)?;
    Ok(Some(cmp.exit_code()))
}

pub fn compare(args: &CompareArgs) -> Result<i32, Failure> {
    let opts = CompareOptions {
        resamples: args.resamples,
        seed: args.seed,
        ..CompareOptions::default()
    };
    let paths: Vec<&Path> = args.records.iter().map(PathBuf::as_path).collect();
    if let Some(code) = compare_sweeps(&paths, args, &opts)? {
        return Ok(code);
    }
    let cmp = compare_files(&paths, &opts).map_err(Failure::usage)?;
    print_stdout(&cmp.render(args.format))?;
    for alarm in cmp.alarms() {
        say!("infertop: {alarm}");
    }
    Ok(cmp.exit_code())
}
