//! A serving engine's own view: its Prometheus `/metrics`, read as vLLM, SGLang, TGI and
//! llama.cpp's server name them, turned into per-window figures (requests running and waiting,
//! KV-cache usage, preemptions, and TTFT / inter-token / E2E percentiles from the histograms'
//! bucket deltas over the window).
//!
//! Percentiles from histograms are Prometheus' `histogram_quantile`: linear within the bucket
//! that holds the rank, so they are only as fine as the server's buckets (and not numpy's
//! percentiles of the samples, which a server does not export).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::event::{Event, ServerHistograms, ServerWindow as Window};
use crate::stats::histogram_quantiles as quantiles;

/// One scrape: every sample summed over its label sets (with how many there were, so that a
/// ratio can be averaged), histogram buckets kept apart by `le`. Several servers' scrapes merge
/// into one (`merge`): replicas, or a data-parallel server's engines, add up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    values: BTreeMap<String, (f64, u32)>,
    /// Histogram name (without `_bucket`) → (upper bound, cumulative count).
    buckets: BTreeMap<String, Vec<(f64, f64)>>,
    /// How many servers' scrapes this is.
    pub sources: usize,
}

/// Parses Prometheus text exposition. Lines it cannot read are skipped (a server may export
/// anything); `Err` only when nothing at all was a sample.
pub fn parse(text: &str) -> Result<Scrape, String> {
    let mut s = Scrape::default();
    let mut samples = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, labels, rest) = match line.find('{') {
            Some(open) => match line[open..].find('}') {
                Some(close) => (
                    &line[..open],
                    &line[open + 1..open + close],
                    &line[open + close + 1..],
                ),
                None => continue,
            },
            None => match line.split_once(char::is_whitespace) {
                Some((n, r)) => (n, "", r),
                None => continue,
            },
        };
        let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        samples += 1;
        if let Some(hist) = name.strip_suffix("_bucket") {
            let Some(le) = label(labels, "le").and_then(|v| v.parse::<f64>().ok()) else {
                continue;
            };
            let b = s.buckets.entry(hist.to_string()).or_default();
            match b.iter_mut().find(|(bound, _)| *bound == le) {
                Some((_, count)) => *count += value,
                None => b.push((le, value)),
            }
        } else {
            let v = s.values.entry(name.to_string()).or_insert((0.0, 0));
            v.0 += value;
            v.1 += 1;
        }
    }
    for b in s.buckets.values_mut() {
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    if samples == 0 {
        return Err("no Prometheus samples in the response".into());
    }
    s.sources = 1;
    Ok(s)
}

/// Several servers' scrapes as one: counters, gauges and buckets add up; ratios (KV-cache usage,
/// a hit rate) are averaged over every label set of every server.
pub fn merge(scrapes: Vec<Scrape>) -> Scrape {
    let mut out = Scrape::default();
    for s in scrapes {
        out.sources += s.sources;
        for (name, (sum, n)) in s.values {
            let v = out.values.entry(name).or_insert((0.0, 0));
            v.0 += sum;
            v.1 += n;
        }
        for (name, buckets) in s.buckets {
            let b = out.buckets.entry(name).or_default();
            for (le, count) in buckets {
                match b.iter_mut().find(|(bound, _)| *bound == le) {
                    Some((_, c)) => *c += count,
                    None => b.push((le, count)),
                }
            }
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
        }
    }
    out
}

fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

/// The names each figure has in vLLM, SGLang, TGI and llama.cpp's server (first found wins).
const RUNNING: &[&str] = &[
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "tgi_batch_current_size",
    "llamacpp:requests_processing",
];
const WAITING: &[&str] = &[
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "tgi_queue_size",
    "llamacpp:requests_deferred",
];
const KV_USAGE: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
];
const PREEMPTIONS: &[&str] = &["vllm:num_preemptions_total", "vllm:num_preemptions"];
const PREFIX_HITS: &[&str] = &["vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"];
const PREFIX_QUERIES: &[&str] = &[
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_queries",
];
const PREFIX_HIT_RATE: &[&str] = &["sglang:cache_hit_rate"];
const TTFT: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
];
const ITL: &[&str] = &[
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:time_per_output_token_seconds",
    "tgi_request_mean_time_per_token_duration",
];
const E2E: &[&str] = &[
    "vllm:e2e_request_latency_seconds",
    "sglang:e2e_request_latency_seconds",
    "tgi_request_duration",
];

impl Scrape {
    fn value(&self, names: &[&str]) -> Option<f64> {
        names.iter().find_map(|n| self.values.get(*n).map(|v| v.0))
    }

    /// A ratio's mean over the label sets (and servers) that export it.
    fn mean(&self, names: &[&str]) -> Option<f64> {
        names
            .iter()
            .find_map(|n| self.values.get(*n))
            .map(|&(sum, n)| sum / f64::from(n.max(1)))
    }

    fn histogram(&self, names: &[&str]) -> Option<&Vec<(f64, f64)>> {
        names.iter().find_map(|n| self.buckets.get(*n))
    }

    /// Which server family the names say this is.
    pub fn server(&self) -> &'static str {
        let has = |prefix: &str| {
            self.values
                .keys()
                .chain(self.buckets.keys())
                .any(|k| k.starts_with(prefix))
        };
        if has("vllm:") {
            "vllm"
        } else if has("sglang:") {
            "sglang"
        } else if has("tgi_") {
            "tgi"
        } else if has("llamacpp:") {
            "llama.cpp"
        } else {
            "unknown"
        }
    }
}

/// The window from `before` to `after`, `seconds` apart. Gauges are `after`'s; counters and
/// histograms are differences (a counter that went down means the server restarted: then
/// `after` alone counts).
pub fn window(before: &Scrape, after: &Scrape, seconds: f64) -> Window {
    let delta = |names: &[&str]| {
        let a = after.value(names)?;
        let b = before.value(names).unwrap_or(0.0);
        Some(if a >= b { a - b } else { a })
    };
    let hist = |names: &[&str]| {
        let a = after.histogram(names)?;
        let b = before.histogram(names);
        let diff: Vec<(f64, f64)> = a
            .iter()
            .map(|&(le, count)| {
                let prev = b
                    .and_then(|b| b.iter().find(|(l, _)| *l == le))
                    .map_or(0.0, |p| p.1);
                (le, if count >= prev { count - prev } else { count })
            })
            .collect();
        Some(crate::stats::trim_buckets(&diff))
    };
    let histograms = ServerHistograms {
        ttft: hist(TTFT).unwrap_or_default(),
        itl: hist(ITL).unwrap_or_default(),
        e2e: hist(E2E).unwrap_or_default(),
    };
    let e2e_count = after.histogram(E2E).and_then(|a| {
        let total = a.last()?.1;
        let prev = before
            .histogram(E2E)
            .and_then(|b| b.last())
            .map_or(0.0, |p| p.1);
        Some(if total >= prev { total - prev } else { total })
    });
    let prefix_hit_rate = match (delta(PREFIX_HITS), delta(PREFIX_QUERIES)) {
        (Some(h), Some(q)) if q > 0.0 => Some(h / q),
        _ => after.mean(PREFIX_HIT_RATE),
    };
    Window {
        seconds,
        server: after.server().to_string(),
        sources: after.sources,
        requests_per_s: e2e_count.map(|n| n / seconds.max(1e-9)),
        running: after.value(RUNNING),
        waiting: after.value(WAITING),
        kv_usage: after.mean(KV_USAGE),
        preemptions: delta(PREEMPTIONS),
        prefix_hit_rate,
        ttft_s: quantiles(&histograms.ttft),
        itl_s: quantiles(&histograms.itl),
        e2e_s: quantiles(&histograms.e2e),
        histograms,
    }
}

/// A metrics URL: as given, or the base URL's `/metrics`.
pub fn metrics_url(raw: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(raw.trim()).map_err(|e| {
        format!("`{raw}` is not a URL ({e}); write e.g. http://localhost:8000/metrics")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "`{raw}` is not http or https (write e.g. http://localhost:8000/metrics)"
        ));
    }
    if url.path().trim_end_matches('/').is_empty() {
        url.set_path("/metrics");
    }
    Ok(url)
}

/// One scrape of `url`.
pub async fn fetch(client: &reqwest::Client, url: &reqwest::Url) -> Result<Scrape, String> {
    let resp = client
        .get(url.clone())
        .send()
        .await
        .map_err(crate::util::http_error)?;
    let status = resp.status();
    let body = resp.text().await.map_err(crate::util::http_error)?;
    if !status.is_success() {
        return Err(format!("HTTP {}", status.as_u16()));
    }
    parse(&body)
}

/// One scrape of every URL at once, merged (`merge`); an error names the first that failed.
pub async fn fetch_all(client: &reqwest::Client, urls: &[reqwest::Url]) -> Result<Scrape, String> {
    let mut set = tokio::task::JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let (client, url) = (client.clone(), url.clone());
        set.spawn(async move { (i, fetch(&client, &url).await) });
    }
    let mut got: Vec<(usize, Scrape)> = Vec::with_capacity(urls.len());
    let mut failed: Option<(usize, String)> = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, Ok(s))) => got.push((i, s)),
            Ok((i, Err(e))) if failed.as_ref().is_none_or(|f| i < f.0) => failed = Some((i, e)),
            Ok(_) => {}
            Err(e) => failed = failed.or(Some((usize::MAX, e.to_string()))),
        }
    }
    if let Some((i, e)) = failed {
        return Err(match urls.get(i) {
            Some(url) => format!("{url} ({e})"),
            None => e,
        });
    }
    got.sort_by_key(|g| g.0);
    Ok(merge(got.into_iter().map(|g| g.1).collect()))
}

/// `--server-metrics`: scrapes `urls` every `interval` on its own thread (all at once, merged:
/// replicas add up) and sends each window as `Event::ServerMetrics` until `stop` is set. A
/// server that cannot be read is said as a non-fatal error (at most every 30 s), the window
/// waits for the next scrape that reads them all, and the run goes on.
pub fn spawn_scraper(
    urls: Vec<reqwest::Url>,
    interval: Duration,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("infertop-scrape".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let Ok(client) = reqwest::Client::builder().timeout(interval * 5).build() else {
                return;
            };
            let mut prev: Option<(Scrape, Instant)> = None;
            let mut warned: Option<Instant> = None;
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(20).min(next - Instant::now()));
                    continue;
                }
                next += interval;
                match rt.block_on(fetch_all(&client, &urls)) {
                    Ok(s) => {
                        let now = Instant::now();
                        if let Some((before, t)) = &prev {
                            let w = window(before, &s, now.duration_since(*t).as_secs_f64());
                            if events.send(Event::ServerMetrics(Box::new(w))).is_err() {
                                return;
                            }
                        }
                        prev = Some((s, now));
                    }
                    Err(e) if warned.is_none_or(|w| w.elapsed() >= Duration::from_secs(30)) => {
                        warned = Some(Instant::now());
                        let _ = events.send(Event::Error {
                            message: format!("server metrics: cannot read {e}"),
                            fatal: false,
                        });
                    }
                    Err(_) => {}
                }
            }
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const VLLM_0: &str = r#"
# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 2.0
vllm:num_requests_waiting{model_name="m"} 0.0
vllm:kv_cache_usage_perc{model_name="m"} 0.10
vllm:num_preemptions_total{model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{le="0.2",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_count{model_name="m"} 10.0
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 10.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 10.0
"#;

    const VLLM_1: &str = r#"
vllm:num_requests_running{model_name="m"} 5.0
vllm:num_requests_waiting{model_name="m"} 3.0
vllm:kv_cache_usage_perc{model_name="m"} 0.45
vllm:num_preemptions_total{model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{le="0.2",model_name="m"} 30.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 30.0
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 30.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 30.0
"#;

    /// Percentiles come from the window's bucket deltas only: the 20 new TTFTs all fell in
    /// (0.1, 0.2], so p50 is that bucket's middle, whatever came before.
    #[test]
    fn a_window_is_the_difference_of_two_scrapes() {
        let a = parse(VLLM_0).unwrap();
        let b = parse(VLLM_1).unwrap();
        let w = window(&a, &b, 2.0);
        assert_eq!(w.server, "vllm");
        assert_eq!(
            (w.running, w.waiting, w.kv_usage),
            (Some(5.0), Some(3.0), Some(0.45))
        );
        assert_eq!(w.preemptions, Some(2.0));
        assert_eq!(w.requests_per_s, Some(10.0));
        let ttft = w.ttft_s.unwrap();
        assert_eq!(ttft.n, 20);
        assert!((ttft.p50 - 0.15).abs() < 1e-12, "{ttft:?}");
        assert!((ttft.p99 - 0.199).abs() < 1e-12, "{ttft:?}");
        assert!(w.itl_s.is_none(), "no ITL histogram exported");
    }

    #[test]
    fn replicas_add_up_and_ratios_average() {
        // One server with two data-parallel engines, and a second server.
        let a = parse(
            "vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_running{engine=\"1\"} 1\n\
             vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.4\n\
             vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 3\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 4\n",
        )
        .unwrap();
        let b = parse(
            "vllm:num_requests_running 5\nvllm:kv_cache_usage_perc 0.9\n\
             vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 1\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} 6\n",
        )
        .unwrap();
        let one = window(&Scrape::default(), &a, 1.0);
        assert_eq!(one.running, Some(3.0));
        assert!(
            (one.kv_usage.unwrap() - 0.3).abs() < 1e-12,
            "engines average"
        );
        let both = window(&Scrape::default(), &merge(vec![a, b]), 1.0);
        assert_eq!(both.sources, 2);
        assert_eq!(both.running, Some(8.0));
        assert!(
            (both.kv_usage.unwrap() - 0.5).abs() < 1e-12,
            "{:?}",
            both.kv_usage
        );
        assert_eq!(both.ttft_s.unwrap().n, 10);
        assert_eq!(
            both.histograms.ttft,
            vec![(0.1, 4.0), (f64::INFINITY, 10.0)]
        );
    }

    #[test]
    fn other_servers_and_odd_lines() {
        let sglang = "sglang:num_running_reqs{a=\"x\"} 4\nsglang:num_running_reqs{a=\"y\"} 2\nsglang:num_queue_reqs 1\ngarbage line\n";
        let s = parse(sglang).unwrap();
        assert_eq!(s.server(), "sglang");
        let w = window(&Scrape::default(), &s, 1.0);
        assert_eq!((w.running, w.waiting), (Some(6.0), Some(1.0)));
        let llama = "llamacpp:requests_processing 1\nllamacpp:kv_cache_usage_ratio 0.5\n";
        assert_eq!(parse(llama).unwrap().server(), "llama.cpp");
        assert!(parse("<html>not metrics</html>").is_err());
    }
}
