//! Value parsers shared by the subcommands' flags, and the one place that turns a clap error
//! into infertop's one-line form: `FLAG: what is wrong (what to write)`.

use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::stats::{parse_duration_s, roofline};
use crate::util::one_line;

/// A count of at least 1 (`--batch`, `--threads`, `--requests`, `--resamples`).
pub fn positive(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n as u64),
        Ok(n) => Err(format!("{n} is not a positive number (use 1 or more)")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// `positive`, as a `usize`.
pub fn positive_usize(s: &str) -> Result<usize, String> {
    positive(s).and_then(|n| usize::try_from(n).map_err(|_| format!("{n} is too large")))
}

/// Dashboard frames per second: 1 to 120.
pub fn fps(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (1..=120).contains(&n) => Ok(n as u32),
        Ok(n) => Err(format!("{n} is out of range (use 1 to 120)")),
        Err(_) => Err(format!("`{s}` is not a number (use 1 to 120)")),
    }
}

/// `200ms`, `1.5s`, `5m`, `2h`, or a bare number of seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration_s(s).map(Duration::from_secs_f64)
}

/// Requests per second (`--rate`): a number > 0.
pub fn rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "`{s}` is not a rate (use requests per second > 0, e.g. 2.5)"
        )),
    }
}

/// `--burstiness`: a gamma shape, positive and finite.
pub fn burstiness(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(b) if b.is_finite() && b > 0.0 => Ok(b),
        _ => Err(format!(
            "`{s}` is not a burstiness (use a number > 0: 1 is Poisson, 0.5 burstier, 4 more regular)"
        )),
    }
}

/// A secret (`--api-key`): kept out of `Debug` output, so it cannot reach a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// `--api-key`: any non-empty text.
pub fn secret(s: &str) -> Result<Secret, String> {
    if s.trim().is_empty() {
        return Err("empty key".into());
    }
    Ok(Secret(s.to_string()))
}

/// A cost per hour: a number ≥ 0.
pub fn cost(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c >= 0.0 => Ok(c),
        _ => Err(format!("{s} is not a cost (use a number ≥ 0, e.g. 2.5)")),
    }
}

/// A device of the roofline table (`--device-name`), checked against it.
pub fn known_device(s: &str) -> Result<String, String> {
    if roofline::lookup(s).is_some() {
        return Ok(s.to_string());
    }
    let known: Vec<&str> = roofline::KNOWN_DEVICES.iter().map(|k| k.name).collect();
    Err(format!(
        "`{s}` is not in the table (known: {}); or pass --peak-bw and --peak-flops",
        known.join(", ")
    ))
}

/// clap's error as one line. A value our parser refused reads `--flag: <our message>`; a value
/// outside a fixed set lists the set; anything else keeps clap's first line.
pub fn one_line_error(e: &clap::Error) -> String {
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split_whitespace().next().map(str::to_string),
        _ => None,
    };
    if let Some(flag) = flag {
        match e.kind() {
            ErrorKind::ValueValidation => {
                if let Some(source) = std::error::Error::source(e) {
                    return format!("{flag}: {}", one_line(&source.to_string()));
                }
            }
            ErrorKind::InvalidValue => {
                let value = match e.get(ContextKind::InvalidValue) {
                    Some(ContextValue::String(v)) => v.clone(),
                    _ => String::new(),
                };
                if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
                    return format!("{flag}: unknown value `{value}` (use {})", or_list(valid));
                }
            }
            _ => {}
        }
    }
    if e.kind() == ErrorKind::MissingRequiredArgument {
        if let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg) {
            // e.g. `--api` without `--endpoint`.
            return format!(
                "{} is needed by the flags given (see infertop --help)",
                or_list(missing)
            );
        }
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    format!("{first} (see infertop --help)")
}

/// `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_durations_and_rates() {
        assert_eq!(positive("3"), Ok(3));
        assert_eq!(
            positive("0"),
            Err("0 is not a positive number (use 1 or more)".into())
        );
        assert_eq!(positive("x"), Err("`x` is not a number".into()));
        assert_eq!(fps("120"), Ok(120));
        assert!(fps("121").is_err());
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(cost("-1").is_err());
        assert_eq!(rate("2.5"), Ok(2.5));
        assert!(rate("0").is_err() && rate("inf").is_err());
        assert_eq!(format!("{:?}", secret("sk-123").unwrap()), "Secret(***)");
        assert!(known_device("H100").is_ok());
        assert!(known_device("abacus").is_err());
        assert_eq!(
            or_list(&["md".into(), "json".into(), "csv".into()]),
            "md, json or csv"
        );
    }
}
