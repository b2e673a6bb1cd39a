//! Value parsers of the flags: each refuses a bad value with one line that says what to write
//! instead (the CLI prefixes the flag).

use std::time::Duration;

use crate::stats::{parse_duration_s, roofline};

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

/// A listening address: a bare port is loopback's (`9464` → `127.0.0.1:9464`), else
/// `HOST:PORT` (`0.0.0.0:9464`, `[::1]:9464`, `localhost:9464`).
pub fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    let bad = || format!("`{s}` is not a port or HOST:PORT (e.g. 9464 or 127.0.0.1:9464)");
    if !s.contains(':') {
        return Err(bad());
    }
    s.to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)
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

/// `--cooldown`: a duration, or none (`0`, `0s`: the default).
pub fn cooldown(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let zero = ["ms", "us", "µs", "s", "m", "h", ""].iter().any(|unit| {
        t.strip_suffix(unit)
            .and_then(|n| n.trim().parse::<f64>().ok())
            == Some(0.0)
    });
    if zero {
        return Ok(Duration::ZERO);
    }
    let secs = parse_duration_s(s)?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("`{s}` is too long a duration"))
}

/// `--runs`: how many times the run is repeated, 2 or more.
pub fn runs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 2 => Ok(n),
        _ => Err(format!(
            "`{s}` is not a number of runs (give 2 or more: the spread across runs needs two)"
        )),
    }
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

/// `--served-model`: one name, or several with weights (`a=3,b=1`; a name alone weighs 1), as
/// many adapters behind one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedModels {
    pub models: Vec<(String, u32)>,
}

impl ServedModels {
    /// The first name (the run's model, as `GET /v1/models` would give one).
    pub fn first(&self) -> &str {
        self.models.first().map_or("", |(m, _)| m.as_str())
    }

    /// As written back: the name, or `a=3,b=1`.
    pub fn text(&self) -> String {
        match self.models.as_slice() {
            [(m, _)] => m.clone(),
            many => many
                .iter()
                .map(|(m, w)| format!("{m}={w}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// `--served-model NAME` or `a=3,b=1`.
pub fn served_models(s: &str) -> Result<ServedModels, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("an empty model name (write NAME, or a=3,b=1 for weighted models)".into());
    }
    let mut models: Vec<(String, u32)> = Vec::new();
    for part in t.split(',') {
        let (name, weight) = match part.rsplit_once('=') {
            Some((n, w)) => {
                let w = match w.trim().parse::<i64>() {
                    Ok(w) if (1..=1_000_000).contains(&w) => w as u32,
                    _ => {
                        return Err(format!(
                            "`{part}`: the weight `{}` is not a whole number from 1 to 1000000",
                            w.trim()
                        ))
                    }
                };
                (n.trim(), w)
            }
            None => (part.trim(), 1),
        };
        if name.is_empty() {
            return Err(format!("`{part}` has no model name (write a=3,b=1)"));
        }
        if models.iter().any(|(m, _)| m == name) {
            return Err(format!("`{name}` is named twice"));
        }
        models.push((name.to_string(), weight));
    }
    Ok(ServedModels { models })
}

/// `--start-at`: unix seconds (`1767225600`, `1767225600.5`) or an RFC 3339 time
/// (`2026-01-01T00:00:00Z`, `2026-01-01T01:00:00+01:00`), as unix seconds.
pub fn start_at(s: &str) -> Result<f64, String> {
    use time::format_description::well_known::Rfc3339;
    let t = s.trim();
    if let Ok(unix) = t.parse::<f64>() {
        return match unix.is_finite() && unix >= 0.0 {
            true => Ok(unix),
            false => Err(format!("`{s}` is not a time (use unix seconds ≥ 0)")),
        };
    }
    let at = time::OffsetDateTime::parse(t, &Rfc3339).map_err(|_| {
        format!(
            "`{s}` is not a time (use unix seconds, e.g. $(( $(date +%s) + 60 )), or RFC 3339, e.g. 2026-01-01T12:00:00Z)"
        )
    })?;
    Ok(at.unix_timestamp_nanos() as f64 / 1e9)
}

/// A time as `--start-at` reads it, in RFC 3339 (UTC, to the millisecond): for messages.
pub fn rfc3339(unix_s: f64) -> String {
    use time::format_description::well_known::Rfc3339;
    let ms = (unix_s * 1e3).round() as i128;
    time::OffsetDateTime::from_unix_timestamp_nanos(ms * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| format!("{unix_s:.3} (unix seconds)"))
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

/// `5%` or `0.05`: a fraction above 0 and below 1 (`sweep --precision`).
pub fn precision(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let bad = || format!("`{s}` is not a precision (use a percentage above 0, e.g. 5%)");
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map_err(|_| bad())? / 100.0,
        None => t.parse::<f64>().map_err(|_| bad())?,
    };
    if v.is_finite() && v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(bad())
    }
}

/// One value of a `--batch` or `--concurrency` list.
pub fn list_count(s: &str) -> Result<usize, String> {
    if s.trim().is_empty() {
        return Err("empty value in the list (write e.g. 1,2,4,8)".into());
    }
    positive_usize(s)
}

/// One value of a `--rate` list.
pub fn list_rate(s: &str) -> Result<f64, String> {
    if s.trim().is_empty() {
        return Err("empty value in the list (write e.g. 1,2,4)".into());
    }
    rate(s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_cooldown_may_be_none() {
        for zero in ["0", "0s", "0ms", " 0.0 s"] {
            assert_eq!(cooldown(zero), Ok(Duration::ZERO), "{zero}");
        }
        assert_eq!(cooldown("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(cooldown("2m"), Ok(Duration::from_secs(120)));
        assert!(cooldown("-1s").is_err());
        assert!(cooldown("soon").is_err());
        assert!(cooldown("1e300h").is_err());
        assert_eq!(runs("2"), Ok(2));
        assert!(runs("1").is_err() && runs("0").is_err() && runs("x").is_err());
    }

    #[test]
    fn served_models_take_a_name_or_weights() {
        let one = served_models("meta-llama/Llama-3.1-8B").unwrap();
        assert_eq!(one.models, vec![("meta-llama/Llama-3.1-8B".into(), 1)]);
        assert_eq!(one.text(), "meta-llama/Llama-3.1-8B");
        let two = served_models("a=3, b=1").unwrap();
        assert_eq!(two.models, vec![("a".into(), 3), ("b".into(), 1)]);
        assert_eq!((two.first(), two.text().as_str()), ("a", "a=3,b=1"));
        assert_eq!(served_models("x,y").unwrap().models.len(), 2);
        assert!(served_models("a=0").unwrap_err().contains("weight"));
        assert!(served_models("a=3,a=1").unwrap_err().contains("twice"));
        assert!(served_models("=2").is_err());
        assert!(served_models(" ").is_err());
    }

    #[test]
    fn start_times_read_as_unix_seconds_or_rfc3339() {
        assert_eq!(start_at("1767225600"), Ok(1_767_225_600.0));
        assert_eq!(start_at(" 1767225600.25 "), Ok(1_767_225_600.25));
        assert_eq!(start_at("2026-01-01T00:00:00Z"), Ok(1_767_225_600.0));
        assert_eq!(start_at("2026-01-01T01:00:00.5+01:00"), Ok(1_767_225_600.5));
        for bad in ["tomorrow", "-5", "2026-01-01", "inf"] {
            assert!(start_at(bad).is_err(), "{bad}");
        }
        assert_eq!(rfc3339(1_767_225_600.25), "2026-01-01T00:00:00.25Z");
    }

    #[test]
    fn a_bare_port_listens_on_loopback() {
        assert_eq!(listen_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(listen_addr("0.0.0.0:1").unwrap().to_string(), "0.0.0.0:1");
        assert_eq!(listen_addr("[::1]:2").unwrap().to_string(), "[::1]:2");
        for bad in ["", "abc", "70000", "1.2.3.4:x"] {
            assert!(listen_addr(bad).is_err(), "{bad}");
        }
    }

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
    }
}
