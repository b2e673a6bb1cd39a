//! Cancelling requests as users do (`--cancel 'share=0.1,after=ttft'`): a seeded share of the
//! steady requests is abandoned, right after its first token or a fixed time after its send, by
//! closing its stream (and so its connection: HTTP/1.1 has no other way to abandon a response).
//! A cancelled request is neither a latency sample nor a failure; the run counts it apart.
//!
//! What the server did after is the point (servers that leak a slot or KV blocks only under
//! cancellation): its `/metrics` are read before the first request (the baseline) and, once the
//! run has ended, until its running and waiting requests and its KV-cache usage are back at the
//! baseline, or `SETTLE` has passed. The answer is a notice (`Notice::CancelCheck`): in the
//! record, the events pane, and the summary.

use std::time::{Duration, Instant};

use crate::event::{CancelCheck, ServerGauges};

/// How long the server has, after the run's last request ended, to come back to its baseline.
pub const SETTLE: Duration = Duration::from_secs(10);

/// How often its `/metrics` are read meanwhile.
const POLL: Duration = Duration::from_millis(100);

/// KV-cache usage this close to the baseline (a share, 0 to 1) is back.
pub const KV_SLACK: f64 = 0.001;

/// When a chosen request is cancelled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum After {
    /// As soon as its first token arrives.
    FirstToken,
    /// This long after it was sent (its clock's start), if it has not ended by then.
    Elapsed(Duration),
}

/// `--cancel`, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct CancelPlan {
    /// The share of steady requests cancelled, 0 < share ≤ 1, drawn by the run's seed.
    pub share: f64,
    pub after: After,
    /// The server's metrics pages (`--server-metrics`, else each endpoint's `/metrics`).
    pub metrics: Vec<reqwest::Url>,
}

impl CancelPlan {
    /// `share=0.1,after=ttft` or `share=0.25,after=500ms` (`after` defaults to `ttft`).
    pub fn parse(raw: &str) -> Result<CancelPlan, String> {
        let mut share = None;
        let mut after = After::FirstToken;
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!(
                    "`{part}` is not key=value (write e.g. share=0.1,after=ttft or after=0.5s)"
                ));
            };
            match key.trim() {
                "share" => {
                    let v: f64 = value.trim().parse().map_err(|_| {
                        format!("share `{value}` is not a number (a share of requests, e.g. 0.1)")
                    })?;
                    if !(v > 0.0 && v <= 1.0) {
                        return Err(format!(
                            "share {v} is outside (0, 1] (e.g. 0.1 cancels one request in ten)"
                        ));
                    }
                    share = Some(v);
                }
                "after" => {
                    after = match value.trim() {
                        "ttft" | "first-token" => After::FirstToken,
                        d => {
                            let s = crate::stats::parse_duration_s(d).map_err(|_| {
                                format!(
                                    "after `{d}` is neither ttft nor a duration above zero (e.g. 500ms, 2s)"
                                )
                            })?;
                            After::Elapsed(Duration::from_secs_f64(s))
                        }
                    }
                }
                other => {
                    return Err(format!(
                        "unknown key `{other}` (keys: share, after; e.g. share=0.1,after=ttft)"
                    ))
                }
            }
        }
        let share = share.ok_or("no share (write e.g. share=0.1,after=ttft)")?;
        Ok(CancelPlan {
            share,
            after,
            metrics: Vec::new(),
        })
    }

    /// Whether steady request `index` is one to cancel: a draw from the run's seed and the
    /// index alone, so a rerun with the same seed cancels the same requests.
    pub fn picks(&self, seed: u64, index: u64) -> bool {
        let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x6361_6e63_656c;
        // splitmix64's finaliser: a uniform draw from any input.
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) < self.share
    }

    /// How the record's configuration and the header say it.
    pub fn words(&self) -> String {
        let after = match self.after {
            After::FirstToken => "its first token".to_string(),
            After::Elapsed(d) => format!(
                "{} after its send",
                crate::util::format::duration(d.as_secs_f64(), true)
            ),
        };
        format!("{:.0}% of steady requests at {after}", self.share * 100.0)
    }
}

impl ServerGauges {
    /// Whether these gauges are back at `baseline` (a gauge the server does not export is
    /// not held against it).
    pub fn back_at(&self, baseline: &ServerGauges) -> bool {
        let le = |now: Option<f64>, base: Option<f64>, slack: f64| match (now, base) {
            (Some(n), Some(b)) => n <= b + slack,
            (Some(n), None) => n <= slack,
            _ => true,
        };
        le(self.running, baseline.running, 0.0)
            && le(self.waiting, baseline.waiting, 0.0)
            && le(self.kv_usage, baseline.kv_usage, KV_SLACK)
    }
}

/// The server's gauges now, from every metrics page (summed, as `--server-metrics` does).
pub async fn gauges(
    client: &reqwest::Client,
    urls: &[reqwest::Url],
) -> Result<ServerGauges, String> {
    let mut scrapes = Vec::with_capacity(urls.len());
    for url in urls {
        scrapes.push(crate::scrape::cluster::fetch(client, url).await?);
    }
    let s = crate::scrape::merge(scrapes);
    let w = crate::scrape::window(&s, &s, 1.0);
    if w.running.is_none() && w.waiting.is_none() && w.kv_usage.is_none() {
        return Err(format!(
            "{} exports no running or waiting requests or KV-cache usage",
            urls.iter()
                .map(|u| u.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(ServerGauges {
        running: w.running,
        waiting: w.waiting,
        kv_usage: w.kv_usage,
    })
}

/// After the run: reads the server until it is back at `baseline` or `SETTLE` has passed.
pub async fn check(
    client: &reqwest::Client,
    plan: &CancelPlan,
    baseline: Result<ServerGauges, String>,
    cancelled: u64,
) -> CancelCheck {
    let mut out = CancelCheck {
        cancelled,
        settle_s: SETTLE.as_secs_f64(),
        ..CancelCheck::default()
    };
    let baseline = match baseline {
        Ok(b) => b,
        Err(e) => {
            out.unknown = Some(format!("its metrics could not be read before the run: {e}"));
            return out;
        }
    };
    out.baseline = Some(baseline.clone());
    let start = Instant::now();
    loop {
        match gauges(client, &plan.metrics).await {
            Ok(now) => {
                let back = now.back_at(&baseline);
                out.after = Some(now);
                if back {
                    out.back_after_s = Some(start.elapsed().as_secs_f64());
                    return out;
                }
            }
            Err(e) => {
                out.unknown = Some(format!("its metrics could not be read after the run: {e}"));
                return out;
            }
        }
        if start.elapsed() >= SETTLE {
            return out;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let p = CancelPlan::parse("share=0.1,after=ttft").unwrap();
        assert_eq!((p.share, p.after), (0.1, After::FirstToken));
        let p = CancelPlan::parse("after=500ms, share=1").unwrap();
        assert_eq!(
            (p.share, p.after),
            (1.0, After::Elapsed(Duration::from_millis(500)))
        );
        assert_eq!(
            CancelPlan::parse("share=0.5").unwrap().after,
            After::FirstToken
        );
        for (bad, says) in [
            ("", "no share"),
            ("share=0", "outside (0, 1]"),
            ("share=1.5", "outside (0, 1]"),
            ("share=x", "not a number"),
            ("share=0.1,after=soon", "neither ttft nor a duration"),
            ("share=0.1,after=0s", "a duration above zero"),
            ("share=0.1,when=ttft", "unknown key `when`"),
            ("0.1", "not key=value"),
        ] {
            let e = CancelPlan::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// The draw cancels about the share asked, the same requests for the same seed.
    #[test]
    fn picks_the_share_by_seed() {
        let p = CancelPlan::parse("share=0.1").unwrap();
        let n = (0..10_000).filter(|&i| p.picks(7, i)).count();
        assert!((900..1100).contains(&n), "{n}");
        let a: Vec<u64> = (0..200).filter(|&i| p.picks(7, i)).collect();
        let b: Vec<u64> = (0..200).filter(|&i| p.picks(7, i)).collect();
        let c: Vec<u64> = (0..200).filter(|&i| p.picks(8, i)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let all = CancelPlan::parse("share=1").unwrap();
        assert!((0..100).all(|i| all.picks(3, i)));
    }

    #[test]
    fn back_at_the_baseline() {
        let base = ServerGauges {
            running: Some(0.0),
            waiting: Some(0.0),
            kv_usage: Some(0.0),
        };
        let mut now = base.clone();
        assert!(now.back_at(&base));
        now.kv_usage = Some(0.0005);
        assert!(now.back_at(&base), "within the slack");
        now.running = Some(1.0);
        assert!(!now.back_at(&base));
        let llama = ServerGauges {
            running: Some(0.0),
            waiting: Some(0.0),
            kv_usage: None,
        };
        assert!(
            llama.back_at(&llama),
            "a gauge not exported is not held against it"
        );
    }
}
