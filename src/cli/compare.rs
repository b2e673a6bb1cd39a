//! `infertop compare`: exit 0, or 3 when generated outputs differ (see `report::compare`).

use std::path::{Path, PathBuf};

use clap::Args;

use super::{print_stdout, say};
use crate::exit::Failure;
use crate::plan::values;
use crate::report::compare::{compare_records, CompareFormat, CompareOptions};
use crate::sweep::record::{read, AnyRecord, SweepRecord};

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Two or more records; the first is the baseline. `a.jsonl+b.jsonl` takes several records
    /// as one run (many load generators): the union of their samples.
    #[arg(required = true, num_args = 2..)]
    pub records: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = CompareFormat::Md)]
    pub format: CompareFormat,
    /// Bootstrap resamples.
    #[arg(long, default_value = "2000", value_parser = values::positive_usize)]
    pub resamples: usize,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Two sweeps: a verdict per cell.
fn compare_sweeps(
    paths: &[&Path],
    a: SweepRecord,
    b: SweepRecord,
    args: &CompareArgs,
    opts: &CompareOptions,
) -> Result<i32, Failure> {
    let name = |p: &Path| p.display().to_string();
    let cmp = crate::sweep::record::compare_sweeps(a, &name(paths[0]), b, &name(paths[1]), opts);
    let text = match args.format {
        CompareFormat::Md => cmp.to_markdown(),
        CompareFormat::Json => cmp.to_json(),
    };
    print_stdout(&text)?;
    Ok(cmp.exit_code())
}

pub fn compare(args: &CompareArgs) -> Result<i32, Failure> {
    let opts = CompareOptions {
        resamples: args.resamples,
        seed: args.seed,
        ..CompareOptions::default()
    };
    let paths: Vec<&Path> = args.records.iter().map(PathBuf::as_path).collect();
    if paths.len() < 2 {
        return Err(Failure::usage(
            "compare needs at least two records (infertop compare A.jsonl B.jsonl)",
        ));
    }
    // Each record is read and parsed once; its lines say whether it is a sweep's or a run's.
    let mut runs = Vec::new();
    let mut sweeps = Vec::new();
    for p in &paths {
        if let Some(group) = group_of(p) {
            let parts = super::report::read_runs(&group, "compare")?;
            runs.push(crate::record::merge::merge(parts).record);
            continue;
        }
        match read(p).map_err(Failure::usage)? {
            AnyRecord::Run(r) => runs.push(*r),
            // Repeated runs (`--runs`): their requests pooled, compared as one run's.
            AnyRecord::Sweep(s) if s.config.repeat.is_some() => {
                say!(
                    "infertop: {}: {} runs, their steady requests pooled (the spread across runs: infertop report {})",
                    p.display(),
                    s.cells.len(),
                    p.display()
                );
                runs.push(crate::sweep::repeat::pooled(*s, p));
            }
            AnyRecord::Sweep(s) => sweeps.push(*s),
        }
    }
    if !sweeps.is_empty() {
        let mut it = sweeps.into_iter();
        return match (runs.is_empty(), it.next(), it.next(), it.next()) {
            (true, Some(a), Some(b), None) => compare_sweeps(&paths, a, b, args, &opts),
            _ => Err(Failure::usage(
                "compare: a sweep compares with one other sweep only (infertop compare A.jsonl B.jsonl, both written by infertop sweep --record)",
            )),
        };
    }
    let cmp = compare_records(&runs, &opts);
    print_stdout(&cmp.render(args.format))?;
    for alarm in cmp.alarms() {
        say!("infertop: {alarm}");
    }
    Ok(cmp.exit_code())
}

/// `a.jsonl+b.jsonl`: records taken as one run, when the argument is not itself a file.
fn group_of(p: &Path) -> Option<Vec<PathBuf>> {
    if p.exists() {
        return None;
    }
    let text = p.to_str()?;
    let parts: Vec<PathBuf> = text
        .split('+')
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect();
    (parts.len() > 1).then_some(parts)
}
