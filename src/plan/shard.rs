//! A run that several generators send together, planned: which part of it this one sends
//! (`--shard K/N`, or what a Kubernetes Indexed Job or an srun step tells each of its
//! processes), when the schedule starts (`--start-at`) and the clock it goes by
//! (`--clock-ref`). Checked before anything starts: a split that would leave a shard nothing
//! to hold in flight, a start time in another year, a reference that is no URL are one line
//! and exit 2.

use crate::engine::http::HttpConfig;
use crate::exit::Failure;
use crate::traffic::Shard;

use super::engine::EnginePlan;
use super::opts::RunOpts;
use super::values::rfc3339;

/// The clock a run goes by.
#[derive(Clone, Debug, PartialEq)]
pub enum ClockRef {
    /// The `Date` header of this URL's answers.
    Url(reqwest::Url),
    /// This machine's own clock, taken as it is (nodes kept in step by NTP or PTP).
    Local,
}

impl ClockRef {
    /// As the record's header names it (a URL without any credentials in it).
    pub fn describe(&self) -> String {
        match self {
            ClockRef::Local => "local".into(),
            ClockRef::Url(u) => crate::engine::http::clock::without_credentials(u),
        }
    }
}

/// What the session measures and waits for before the run.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockPlan {
    pub reference: ClockRef,
    /// `--start-at`, unix seconds on the reference clock.
    pub start_at_unix_s: Option<f64>,
}

/// The plan of the flags here: the clock to measure (when there is one to go by) and what
/// to say before the run starts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spread {
    pub clock: Option<ClockPlan>,
    /// Lines for stderr before the run: where the shard came from, what starts when.
    pub notices: Vec<String>,
}

/// Where a shard is read from the environment: the index's variable, the count's, and what
/// sets them.
const FROM_ENV: [(&str, &str, &str); 2] = [
    (
        "JOB_COMPLETION_INDEX",
        "JOB_COMPLETION_COUNT",
        "a Kubernetes Indexed Job",
    ),
    ("SLURM_PROCID", "SLURM_NTASKS", "an srun step"),
];

/// A start time further ahead than this is a mistake (milliseconds given for seconds).
const START_AHEAD_MAX_S: f64 = 7.0 * 24.0 * 3600.0;
/// A start time longer ago than this is a mistake (an old command line run again).
const START_BEHIND_MAX_S: f64 = 24.0 * 3600.0;

/// The shard the environment gives, and where it came from (`None`: none given). A
/// Kubernetes Indexed Job sets `JOB_COMPLETION_INDEX` in every pod, and its manifest sets
/// `JOB_COMPLETION_COUNT` (the Job's `completions`); srun sets `SLURM_PROCID` and
/// `SLURM_NTASKS` in each task of a step (`SLURM_STEP_ID` says it is one: a batch script's
/// own shell has `SLURM_PROCID` 0 too, and is no shard).
pub fn shard_from_env(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(Shard, String)>, String> {
    let var = |name: &str| {
        get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    for (index_var, count_var, what) in FROM_ENV {
        let Some(index) = var(index_var) else {
            continue;
        };
        if index_var == "SLURM_PROCID" && var("SLURM_STEP_ID").is_none() {
            continue;
        }
        let Some(count) = var(count_var) else {
            return Err(format!(
                "{index_var} is {index} but {count_var} is not set: set {count_var} to the number of generators ({what}'s), or pass --shard K/N"
            ));
        };
        let number = |name: &str, v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{name} is `{v}`, not a number; fix it, or pass --shard K/N"))
        };
        let shard = Shard::new(number(index_var, &index)?, number(count_var, &count)?)
            .map_err(|e| format!("{index_var}/{count_var} ({index}/{count}): {e}"))?;
        return Ok(Some((shard, format!("{index_var}/{count_var}, {what}"))));
    }
    Ok(None)
}

/// Plans the flags of a run measured from several generators: the shard set in the http
/// engine's traffic, checked against its load; the clock to go by. `env` reads the
/// environment, `now_unix_s` is this machine's clock (both given, so tests choose them).
pub fn plan(
    opts: &RunOpts,
    engine: &mut EnginePlan,
    env: &dyn Fn(&str) -> Option<String>,
    now_unix_s: f64,
) -> Result<Spread, Failure> {
    // The candle engine runs its own model: there is nothing to share (the flags need
    // --endpoint, and the environment of a job is no reason to split anything).
    let EnginePlan::Http(h) = engine else {
        return Ok(Spread::default());
    };
    let s = &opts.server;
    let mut notices = Vec::new();
    let shard = match s.shard {
        Some(shard) => shard,
        None => match shard_from_env(env).map_err(Failure::usage)? {
            Some((shard, from)) => {
                notices.push(format!(
                    "shard {shard} (from {from}; --shard K/N overrides it)"
                ));
                shard
            }
            None => Shard::WHOLE,
        },
    };
    check_split(h, shard)?;
    h.traffic.shard = shard;
    if let Some(at) = s.start_at {
        if at > now_unix_s + START_AHEAD_MAX_S {
            return Err(Failure::usage(format!(
                "--start-at {}: more than a week ahead; give unix seconds (not milliseconds) or an RFC 3339 time",
                rfc3339(at)
            )));
        }
        if at < now_unix_s - START_BEHIND_MAX_S {
            return Err(Failure::usage(format!(
                "--start-at {}: more than a day ago; give a time ahead, e.g. $(( $(date +%s) + 60 ))",
                rfc3339(at)
            )));
        }
    }
    let wants_clock = !shard.is_whole() || s.start_at.is_some() || s.clock_ref.is_some();
    let clock = match wants_clock {
        false => None,
        true => Some(ClockPlan {
            reference: clock_ref(s.clock_ref.as_deref(), h)?,
            start_at_unix_s: s.start_at,
        }),
    };
    if !shard.is_whole() && s.start_at.is_none() {
        notices.push(format!(
            "shard {shard}: without --start-at its schedule starts when this generator does; the merged views line the shards up by their clocks"
        ));
    }
    Ok(Spread { clock, notices })
}

/// What a run holds in flight is split over the shards: each must hold one at least, or its
/// requests would never go.
fn check_split(h: &HttpConfig, shard: Shard) -> Result<(), Failure> {
    if shard.is_whole() {
        return Ok(());
    }
    // A reply that calls tools adds a request to its turn: a shard's numbering of the turns
    // (the conversation's place times its turns) would meet another shard's.
    if let Some(convs) = &h.traffic.conversations {
        let tools = h.shape.tools.is_some() || convs.list.iter().any(|c| c.tools.is_some());
        if tools && h.api.takes_messages() {
            return Err(Failure::usage(format!(
                "--shard {shard}: conversations with tools cannot be split (a tool round adds requests each shard would number alike); run them whole or drop --tools"
            )));
        }
    }
    let open = h.rate.is_some() || h.traffic.replay.is_some();
    let total = match (open, h.concurrency) {
        (true, None) => return Ok(()),
        (true, Some(c)) => c,
        (false, c) => c.unwrap_or(1),
    };
    let n = shard.count;
    if total < n as usize {
        let what = if h.traffic.conversations.is_some() {
            "conversations"
        } else {
            "requests"
        };
        return Err(Failure::usage(format!(
            "--concurrency {total}: it is the run's total, split over {n} shards, and each needs one of the {what} in flight at least; give --concurrency {n} or more"
        )));
    }
    Ok(())
}

/// `--clock-ref`: `local`, a URL, or by default the first endpoint's `/v1/models`.
fn clock_ref(given: Option<&str>, h: &HttpConfig) -> Result<ClockRef, Failure> {
    let Some(given) = given.map(str::trim) else {
        return match h.endpoints.first() {
            Some(e) => Ok(ClockRef::Url(e.url("/v1/models"))),
            None => Ok(ClockRef::Local),
        };
    };
    if given.eq_ignore_ascii_case("local") {
        return Ok(ClockRef::Local);
    }
    match reqwest::Url::parse(given) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            Ok(ClockRef::Url(u))
        }
        _ => Err(Failure::usage(format!(
            "--clock-ref {given}: not an http(s) URL (http://host:port/) or local"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k: &str| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_shard_comes_from_an_indexed_job_or_an_srun_step() {
        let job = [("JOB_COMPLETION_INDEX", "2"), ("JOB_COMPLETION_COUNT", "4")];
        let (shard, from) = shard_from_env(&env(&job)).unwrap().unwrap();
        assert_eq!(shard, Shard { index: 2, count: 4 });
        assert!(from.contains("Kubernetes"), "{from}");
        let srun = [
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "3"),
            ("SLURM_STEP_ID", "0"),
        ];
        let (shard, from) = shard_from_env(&env(&srun)).unwrap().unwrap();
        assert_eq!(shard, Shard { index: 1, count: 3 });
        assert!(from.contains("srun"), "{from}");
        // A batch script's own shell is no step: nothing is split.
        let batch = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")];
        assert_eq!(shard_from_env(&env(&batch)).unwrap(), None);
        assert_eq!(shard_from_env(&env(&[])).unwrap(), None);
        // The Job's variables come first.
        let both = [job.as_slice(), srun.as_slice()].concat();
        assert_eq!(
            shard_from_env(&env(&both)).unwrap().unwrap().0,
            Shard { index: 2, count: 4 }
        );
    }

    #[test]
    fn a_half_given_or_wrong_shard_in_the_environment_is_one_line() {
        let cases: [&[(&str, &str)]; 3] = [
            &[("JOB_COMPLETION_INDEX", "2")],
            &[("JOB_COMPLETION_INDEX", "x"), ("JOB_COMPLETION_COUNT", "4")],
            &[("JOB_COMPLETION_INDEX", "4"), ("JOB_COMPLETION_COUNT", "4")],
        ];
        for vars in cases {
            let e = shard_from_env(&env(vars)).unwrap_err();
            assert!(e.contains("JOB_COMPLETION"), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    fn opts(args: &[&str]) -> RunOpts {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunOpts,
        }
        let mut argv = vec!["infertop", "--endpoint", "http://127.0.0.1:9"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().run
    }

    fn planned(args: &[&str], vars: &[(&str, &str)]) -> Result<(Spread, Shard), Failure> {
        let o = opts(args);
        let mut engine = EnginePlan::of(&o).unwrap();
        let spread = plan(&o, &mut engine, &env(vars), 1_767_225_600.0)?;
        let EnginePlan::Http(h) = engine else {
            unreachable!()
        };
        Ok((spread, h.traffic.shard))
    }

    #[test]
    fn the_flag_wins_and_the_environment_is_said() {
        let job = [("JOB_COMPLETION_INDEX", "1"), ("JOB_COMPLETION_COUNT", "2")];
        let (spread, shard) = planned(&["--concurrency", "4"], &job).unwrap();
        assert_eq!(shard, Shard { index: 1, count: 2 });
        assert!(spread.notices[0].contains("JOB_COMPLETION_INDEX"));
        // Sharded: the clock is measured, against the first endpoint by default.
        let clock = spread.clock.unwrap();
        assert_eq!(clock.reference.describe(), "http://127.0.0.1:9/v1/models");
        let (spread, shard) = planned(&["--shard", "0/1", "--concurrency", "4"], &job).unwrap();
        assert_eq!(shard, Shard::WHOLE);
        assert_eq!(spread, Spread::default());
    }

    #[test]
    fn a_split_that_leaves_a_shard_nothing_in_flight_is_refused() {
        let e = planned(&["--shard", "0/4", "--concurrency", "3"], &[]).unwrap_err();
        assert!(e.message.contains("--concurrency 3"), "{}", e.message);
        assert!(
            planned(&["--shard", "0/4"], &[]).is_err(),
            "the default is 1"
        );
        assert!(planned(&["--shard", "3/4", "--rate", "5"], &[]).is_ok());
        assert!(planned(
            &["--shard", "3/4", "--rate", "5", "--concurrency", "2"],
            &[]
        )
        .is_err());
    }

    #[test]
    fn start_times_and_references_are_checked() {
        let now = 1_767_225_600.0;
        let at = |t: f64| planned(&["--start-at", &t.to_string()], &[]);
        let (spread, _) = at(now + 30.0).unwrap();
        assert_eq!(spread.clock.unwrap().start_at_unix_s, Some(now + 30.0));
        assert!(at(now * 1000.0)
            .unwrap_err()
            .message
            .contains("milliseconds"));
        assert!(at(now - 2.0 * 86_400.0).is_err());
        let local = planned(&["--start-at", "1767225660", "--clock-ref", "local"], &[]).unwrap();
        assert_eq!(local.0.clock.unwrap().reference, ClockRef::Local);
        let e = planned(&["--clock-ref", "ftp://x"], &[]).unwrap_err();
        assert!(e.message.starts_with("--clock-ref"), "{}", e.message);
        let peer = planned(&["--clock-ref", "http://u:secret@peer:8080/"], &[]).unwrap();
        assert_eq!(
            peer.0.clock.unwrap().reference.describe(),
            "http://peer:8080/"
        );
    }
}
