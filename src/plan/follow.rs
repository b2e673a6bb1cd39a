//! `infertop follow`, planned: the sources as given, named and checked (files that exist, `-`
//! once and from a pipe, agents as `NAME=CMD` or numbered), the look of the screen, and
//! whether it is drawn. `session::follow` carries the plan out.

use std::path::PathBuf;
use std::time::Duration;

use super::opts::FollowOpts;
use crate::exit::Failure;
use crate::summary::SummaryFormat;
use crate::ui::Look;

/// A follow, planned.
pub struct FollowPlan {
    pub specs: Vec<Spec>,
    pub look: Look,
    pub headless: bool,
    pub quiet_after: Duration,
    pub format: SummaryFormat,
}

/// Plans `infertop follow`: every source and display flag checked.
pub fn plan(opts: &FollowOpts) -> Result<FollowPlan, Failure> {
    Ok(FollowPlan {
        specs: specs(opts)?,
        look: super::look(&opts.display)?,
        headless: super::headless(opts.headless),
        quiet_after: opts.quiet_after,
        format: opts.format,
    })
}

/// Where a source's lines come from.
#[derive(Clone, Debug)]
pub enum SourceInput {
    File(PathBuf),
    Stdin,
    Agent(String),
}

/// One source to follow: its row's name, and where its lines come from.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub input: SourceInput,
}

/// The sources as given, named and checked: files that exist, `-` once and from a pipe,
/// agents as `NAME=CMD` or numbered.
pub fn specs(opts: &FollowOpts) -> Result<Vec<Spec>, Failure> {
    use std::io::IsTerminal;
    let mut specs = Vec::new();
    let mut stdin = false;
    for p in &opts.sources {
        if p.as_os_str() == "-" {
            if stdin {
                return Err(Failure::usage("follow: - (stdin) can be given once"));
            }
            if std::io::stdin().is_terminal() {
                return Err(Failure::usage(
                    "follow -: standard input is a terminal; pipe a record's lines into it \
                     (ssh HOST infertop --jsonl … | infertop follow -)",
                ));
            }
            stdin = true;
            specs.push(Spec {
                name: "stdin".into(),
                input: SourceInput::Stdin,
            });
            continue;
        }
        if p.is_dir() {
            return Err(Failure::usage(format!(
                "{}: is a directory; pass a record file (--record FILE of the run)",
                p.display()
            )));
        }
        if !p.exists() {
            return Err(Failure::usage(format!(
                "{}: not found (start the run with --record {} first, or follow its stream: \
                 infertop --jsonl … | infertop follow -)",
                p.display(),
                p.display()
            )));
        }
        specs.push(Spec {
            name: crate::util::file_name(p),
            input: SourceInput::File(p.clone()),
        });
    }
    for (i, a) in opts.agent.iter().enumerate() {
        let (name, cmd) = agent_name(a).unwrap_or_else(|| (format!("agent {}", i + 1), a.clone()));
        if cmd.trim().is_empty() {
            return Err(Failure::usage(format!(
                "--agent `{a}`: no command (write e.g. --agent 'gpu1=ssh gpu1 infertop --jsonl …')"
            )));
        }
        specs.push(Spec {
            name,
            input: SourceInput::Agent(cmd),
        });
    }
    if specs.is_empty() {
        return Err(Failure::usage(
            "follow needs a record, - (a stream on stdin) or --agent CMD (see infertop follow --help)",
        ));
    }
    // Two files of the same name in different directories: their rows say which.
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for s in &mut specs {
        let n = seen.entry(s.name.clone()).or_default();
        *n += 1;
        if *n > 1 {
            s.name = format!("{} ({})", s.name, n);
        }
    }
    Ok(specs)
}

/// `NAME=CMD` where NAME is a plain word (no space, no quote): the row's name and the command.
fn agent_name(a: &str) -> Option<(String, String)> {
    let (name, cmd) = a.split_once('=')?;
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:@-".contains(c));
    plain.then(|| (name.to_string(), cmd.to_string()))
}
