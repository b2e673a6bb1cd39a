//! `infertop replay RECORD`, planned: the record's header read and checked before anything is
//! drawn, and what plays it: its lines on stdout (`--jsonl`), a watch's record on the watch
//! screen, or a run's (or sweep's) on the run dashboard, headless at full speed when there is
//! no terminal. `session::replay` carries the plan out.

use std::path::PathBuf;

use super::opts::ReplayOpts;
use crate::exit::Failure;
use crate::record::feed::Speed;
use crate::record::line::Header;
use crate::summary::SummaryFormat;
use crate::ui::{AppConfig, Look};

/// A replay, planned.
pub struct ReplayPlan {
    pub path: PathBuf,
    pub header: Header,
    pub look: Look,
    pub play: Play,
    pub format: SummaryFormat,
}

/// What plays the record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Play {
    /// `--jsonl`: the record's lines on stdout at their times.
    Lines { speed: Speed },
    /// A watch's record on the watch screen (in a terminal only).
    Watch { speed: Speed, fps: Option<u32> },
    /// The run dashboard, paused at the first request with `--paused`; headless, the
    /// dashboard's fold at full speed.
    Dashboard {
        speed: Speed,
        paused: bool,
        headless: bool,
    },
}

/// Plans `infertop replay`: the record's header and every display flag checked.
pub fn plan(opts: &ReplayOpts) -> Result<ReplayPlan, Failure> {
    let path = opts.record.clone();
    let header = crate::record::reader::read_header(&path).map_err(Failure::usage)?;
    let look = super::look(&opts.display)?;
    let headless = super::headless(opts.headless || opts.jsonl);
    let play = if opts.jsonl {
        Play::Lines { speed: opts.speed }
    } else if header.config.is_watch() {
        if headless {
            return Err(Failure::usage(format!(
                "{}: a watch's record plays on the watch screen, in a terminal; its lines are \
                 its JSON (or replay it with --jsonl)",
                path.display()
            )));
        }
        Play::Watch {
            speed: opts.speed,
            fps: opts.display.fps,
        }
    } else {
        Play::Dashboard {
            speed: if headless { Speed::Max } else { opts.speed },
            paused: opts.paused && !headless,
            headless,
        }
    };
    Ok(ReplayPlan {
        path,
        header,
        look,
        play,
        format: opts.format,
    })
}

/// The run dashboard's settings for a record (a replay's, a follow's): the user's look, the
/// record's SLO.
pub fn record_screen(look: &Look, header: &Header) -> AppConfig {
    AppConfig {
        keys: look.keys.clone(),
        themes: look.themes.clone(),
        ascii: look.ascii,
        slo: header.config.slo,
        output_step: 16,
        baseline: None,
    }
}
