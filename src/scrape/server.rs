//! A serving engine's `/metrics` page as figures: every sample of the names below summed over
//! its label sets (with how many there were, so that a ratio can be averaged), histogram
//! buckets kept apart by `le`, a few counters split by one label (finish reasons, HTTP
//! status). A data-parallel server's engines (vLLM's `engine` label) are kept apart as well,
//! beside their sum. Two scrapes make a window (`window`).

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use super::text::{for_each_sample, PageError, Sample};
use crate::event::{ServerHistograms, ServerSignals, ServerWindow as Window, SignalHistograms};
use crate::stats::histogram_quantiles as quantiles;

/// The names each figure has in vLLM, SGLang, TGI and llama.cpp's server (first found wins).
pub mod names {
    pub const RUNNING: &[&str] = &[
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "tgi_batch_current_size",
        "llamacpp:requests_processing",
    ];
    pub const WAITING: &[&str] = &[
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
        "llamacpp:requests_deferred",
    ];
    pub const KV_USAGE: &[&str] = &[
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ];
    pub const PREEMPTIONS: &[&str] = &["vllm:num_preemptions_total", "vllm:num_preemptions"];
    pub const PREFIX_HITS: &[&str] = &["vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"];
    pub const PREFIX_QUERIES: &[&str] = &[
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_queries",
    ];
    pub const PREFIX_HIT_RATE: &[&str] = &["sglang:cache_hit_rate"];
    pub const TTFT: &[&str] = &[
        "vllm:time_to_first_token_seconds",
        "sglang:time_to_first_token_seconds",
    ];
    pub const ITL: &[&str] = &[
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
        "tgi_request_mean_time_per_token_duration",
    ];
    pub const E2E: &[&str] = &[
        "vllm:e2e_request_latency_seconds",
        "sglang:e2e_request_latency_seconds",
        "tgi_request_duration",
    ];
    pub const QUEUE: &[&str] = &[
        "vllm:request_queue_time_seconds",
        "sglang:queue_time_seconds",
        "tgi_request_queue_duration",
    ];
    pub const PREFILL: &[&str] = &["vllm:request_prefill_time_seconds"];
    pub const DECODE: &[&str] = &["vllm:request_decode_time_seconds"];
    pub const PROMPT_LEN: &[&str] = &["vllm:request_prompt_tokens", "tgi_request_input_length"];
    pub const GENERATION_LEN: &[&str] = &[
        "vllm:request_generation_tokens",
        "tgi_request_generated_tokens",
    ];
    pub const PROMPT_TOKENS: &[&str] = &[
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
    ];
    pub const GENERATION_TOKENS: &[&str] = &[
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ];
    /// Finished requests, for the request rate when the server has no E2E histogram.
    pub const REQUESTS: &[&str] = &[
        "vllm:request_success_total",
        "sglang:num_requests_total",
        "tgi_request_success",
    ];
    /// llama.cpp's server names its counters as vLLM does (verify steps as `drafts`).
    pub const SPEC_DRAFTS: &[&str] = &[
        "vllm:spec_decode_num_drafts_total",
        "llamacpp:spec_decode_num_drafts_total",
    ];
    pub const SPEC_DRAFT_TOKENS: &[&str] = &[
        "vllm:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
    ];
    pub const SPEC_ACCEPTED: &[&str] = &[
        "vllm:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
    ];
    pub const SPEC_ACCEPT_LENGTH: &[&str] = &["sglang:spec_accept_length"];
    pub const FLOPS: &[&str] = &["vllm:estimated_flops_per_gpu_total"];
    pub const READ_BYTES: &[&str] = &["vllm:estimated_read_bytes_per_gpu_total"];
    pub const WRITE_BYTES: &[&str] = &["vllm:estimated_write_bytes_per_gpu_total"];
    /// Counted by finish reason (`finished_reason`).
    pub const FINISHED: &str = "vllm:request_success_total";
    /// The API server's responses (prometheus-fastapi-instrumentator), by `status`.
    pub const HTTP: &str = "http_requests_total";
    /// The labels that tell a data-parallel server's engines apart.
    pub const ENGINE_LABELS: &[&str] = &["engine", "dp_rank"];
}

/// How a known name is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Summed over label sets.
    Value,
    /// Read from its `_bucket` lines.
    Histogram,
    /// Summed, and also counted apart by this label's value.
    ByLabel(&'static str),
}

fn known() -> &'static HashMap<&'static str, Kind> {
    static KNOWN: OnceLock<HashMap<&'static str, Kind>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        use names::*;
        let mut m = HashMap::new();
        for list in [
            RUNNING,
            WAITING,
            KV_USAGE,
            PREEMPTIONS,
            PREFIX_HITS,
            PREFIX_QUERIES,
            PREFIX_HIT_RATE,
            PROMPT_TOKENS,
            GENERATION_TOKENS,
            REQUESTS,
            SPEC_DRAFTS,
            SPEC_DRAFT_TOKENS,
            SPEC_ACCEPTED,
            SPEC_ACCEPT_LENGTH,
            FLOPS,
            READ_BYTES,
            WRITE_BYTES,
        ] {
            for n in list {
                m.insert(*n, Kind::Value);
            }
        }
        for list in [
            TTFT,
            ITL,
            E2E,
            QUEUE,
            PREFILL,
            DECODE,
            PROMPT_LEN,
            GENERATION_LEN,
        ] {
            for n in list {
                m.insert(*n, Kind::Histogram);
            }
        }
        m.insert(FINISHED, Kind::ByLabel("finished_reason"));
        m.insert(HTTP, Kind::ByLabel("status"));
        m
    })
}

/// The known name a sample line is of, and how to read it.
fn lookup(name: &str) -> Option<(&'static str, Kind)> {
    let known = known();
    if let Some((k, kind)) = known.get_key_value(name) {
        if *kind != Kind::Histogram {
            return Some((k, *kind));
        }
    }
    let base = name.strip_suffix("_bucket")?;
    match known.get_key_value(base) {
        Some((k, Kind::Histogram)) => Some((k, Kind::Histogram)),
        _ => None,
    }
}

/// One server's (or one engine's) figures at one scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Part {
    /// Name → (sum over label sets, how many label sets).
    values: HashMap<&'static str, (f64, u32)>,
    /// Histogram name (without `_bucket`) → (upper bound, cumulative count), ascending.
    buckets: HashMap<&'static str, Vec<(f64, f64)>>,
    /// (name, label value) → sum, for the `ByLabel` names.
    by_label: BTreeMap<(&'static str, String), f64>,
}

impl Part {
    fn add_value(&mut self, name: &'static str, value: f64, sets: u32) {
        let v = self.values.entry(name).or_insert((0.0, 0));
        v.0 += value;
        v.1 += sets;
    }

    fn add_bucket(&mut self, name: &'static str, le: f64, count: f64) {
        let b = self.buckets.entry(name).or_default();
        match b.iter_mut().rev().find(|(bound, _)| *bound == le) {
            Some((_, c)) => *c += count,
            None => b.push((le, count)),
        }
    }

    fn add(&mut self, other: &Part) {
        for (name, &(sum, n)) in &other.values {
            self.add_value(name, sum, n);
        }
        for (name, buckets) in &other.buckets {
            for &(le, count) in buckets {
                self.add_bucket(name, le, count);
            }
        }
        for (key, v) in &other.by_label {
            *self.by_label.entry(key.clone()).or_insert(0.0) += v;
        }
        self.sort();
    }

    fn sort(&mut self) {
        for b in self.buckets.values_mut() {
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
        }
    }

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

    fn sets(&self, names: &[&str]) -> u32 {
        names
            .iter()
            .find_map(|n| self.values.get(*n))
            .map_or(0, |v| v.1)
    }

    fn histogram(&self, names: &[&str]) -> Option<&Vec<(f64, f64)>> {
        names.iter().find_map(|n| self.buckets.get(*n))
    }

    fn labelled<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.by_label
            .iter()
            .filter(move |((n, _), _)| *n == name)
            .map(|((_, label), v)| (label.as_str(), *v))
    }

    fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.values
            .keys()
            .chain(self.buckets.keys())
            .copied()
            .chain(self.by_label.keys().map(|k| k.0))
    }
}

/// One scrape of a server: the whole (every engine added up) and, when it has several
/// data-parallel engines, each of them. Several servers' scrapes merge into one (`merge`):
/// replicas add up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    whole: Part,
    /// By engine label, in page order; empty unless there are two or more.
    engines: Vec<(String, Part)>,
    /// How many servers' scrapes this is.
    pub sources: usize,
    /// The first line that was not a sample (skipped), for a warning.
    pub skipped: Option<PageError>,
}

/// Parses a server's Prometheus text page. `Err` names the line when a line of a metric
/// read here is malformed, or when nothing on the page is a sample.
pub fn parse(text: &str) -> Result<Scrape, PageError> {
    // Lines without an engine label (the API server's, or a server without engines) are the
    // server's as a whole; labelled ones are their engine's.
    let mut shared = Part::default();
    let mut engines: Vec<(String, Part)> = Vec::new();
    let mut bad: Option<String> = None;
    let mut add = |s: &Sample<'_>| {
        let Some((name, kind)) = lookup(s.name) else {
            return;
        };
        let part = match names::ENGINE_LABELS.iter().find_map(|k| s.label(k)) {
            None => &mut shared,
            Some(engine) => match engines.iter().position(|(e, _)| *e == engine) {
                Some(i) => &mut engines[i].1,
                None => {
                    engines.push((engine.into_owned(), Part::default()));
                    let last = engines.len() - 1;
                    &mut engines[last].1
                }
            },
        };
        match kind {
            Kind::Value => part.add_value(name, s.value, 1),
            Kind::Histogram => match s.label("le").map(|v| v.parse::<f64>()) {
                Some(Ok(le)) => part.add_bucket(name, le, s.value),
                _ => {
                    bad.get_or_insert_with(|| format!("{name}_bucket without a numeric `le`"));
                }
            },
            Kind::ByLabel(key) => {
                // Our own scrapes of /metrics are not the server's traffic.
                if name == names::HTTP && s.label("handler").as_deref() == Some("/metrics") {
                    return;
                }
                let label = s.label(key).map(|v| v.into_owned()).unwrap_or_default();
                *part.by_label.entry((name, label)).or_insert(0.0) += s.value;
                part.add_value(name, s.value, 1);
            }
        }
    };
    let stats = for_each_sample(text, &|name| lookup(name).is_some(), &mut add)?;
    if let Some(why) = bad {
        return Err(PageError {
            line: 0,
            why,
            excerpt: String::new(),
        });
    }
    if stats.samples == 0 {
        return Err(stats.skipped.unwrap_or(PageError {
            line: 0,
            why: "no Prometheus samples in the response".into(),
            excerpt: String::new(),
        }));
    }
    let mut whole = shared;
    for (_, p) in &mut engines {
        p.sort();
        whole.add(p);
    }
    whole.sort();
    if engines.len() < 2 {
        engines.clear();
    }
    // Engines numbered as numbers, not as text ("10" after "9").
    engines.sort_by(|a, b| match (a.0.parse::<u64>(), b.0.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.0.cmp(&b.0),
    });
    Ok(Scrape {
        whole,
        engines,
        sources: 1,
        skipped: stats.skipped,
    })
}

/// Several servers' scrapes as one: counters, gauges and buckets add up; ratios (KV-cache usage,
/// a hit rate) are averaged over every label set of every server. Engines are not kept apart.
pub fn merge(scrapes: Vec<Scrape>) -> Scrape {
    let mut out = Scrape::default();
    for s in scrapes {
        out.sources += s.sources;
        out.whole.add(&s.whole);
    }
    out
}

impl Scrape {
    /// Which server family the names say this is.
    pub fn server(&self) -> &'static str {
        let has = |prefix: &str| self.whole.names().any(|k| k.starts_with(prefix));
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
/// `after` alone counts). A server with several engines has each one's window in `engines`.
pub fn window(before: &Scrape, after: &Scrape, seconds: f64) -> Window {
    let server = after.server();
    let mut w = part_window(&before.whole, &after.whole, seconds, server);
    w.sources = after.sources;
    let empty = Part::default();
    for (engine, part) in &after.engines {
        let prev = before
            .engines
            .iter()
            .find(|(e, _)| e == engine)
            .map_or(&empty, |e| &e.1);
        let mut e = part_window(prev, part, seconds, server);
        // The API server's responses are the server's, not an engine's.
        e.signals.http.clear();
        w.engines.insert(engine.clone(), e);
    }
    w
}

/// A counter's growth, or its value after a restart (it went down).
fn grew(after: f64, before: f64) -> f64 {
    if after >= before {
        after - before
    } else {
        after
    }
}

fn part_window(before: &Part, after: &Part, seconds: f64, server: &str) -> Window {
    use names::*;
    let per_s = |n: f64| n / seconds.max(1e-9);
    let delta = |names: &[&str]| {
        let a = after.value(names)?;
        Some(grew(a, before.value(names).unwrap_or(0.0)))
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
                (le, grew(count, prev))
            })
            .collect();
        Some(crate::stats::trim_buckets(&diff))
    };
    let by_label = |name: &str| -> BTreeMap<String, f64> {
        after
            .labelled(name)
            .map(|(label, v)| {
                let prev = before
                    .labelled(name)
                    .find(|(l, _)| *l == label)
                    .map_or(0.0, |p| p.1);
                (label.to_string(), grew(v, prev))
            })
            .collect()
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
        Some(grew(total, prev))
    });
    let finished_count = e2e_count.or_else(|| delta(REQUESTS));
    let prefix_queries = delta(PREFIX_QUERIES);
    let prefix_hit_rate = match (delta(PREFIX_HITS), prefix_queries) {
        (Some(h), Some(q)) if q > 0.0 => Some(h / q),
        _ => after.mean(PREFIX_HIT_RATE),
    };
    let signal_histograms = SignalHistograms {
        queue: hist(QUEUE).unwrap_or_default(),
        prefill: hist(PREFILL).unwrap_or_default(),
        decode: hist(DECODE).unwrap_or_default(),
        prompt_len: hist(PROMPT_LEN).unwrap_or_default(),
        generation_len: hist(GENERATION_LEN).unwrap_or_default(),
    };
    let (drafts, accepted) = (delta(SPEC_DRAFTS), delta(SPEC_ACCEPTED));
    let spec_accept_length = match (drafts, accepted) {
        (Some(d), Some(a)) if d > 0.0 => Some(1.0 + a / d),
        _ => after.mean(SPEC_ACCEPT_LENGTH),
    };
    // Per-GPU counters: the mean over the engines (label sets) that export them.
    let per_gpu = |names: &[&str]| {
        let sets = f64::from(after.sets(names).max(1));
        delta(names).map(|d| per_s(d) / sets)
    };
    let mem_bytes = match (per_gpu(READ_BYTES), per_gpu(WRITE_BYTES)) {
        (None, None) => None,
        (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
    };
    let signals = ServerSignals {
        prompt_tokens_per_s: delta(PROMPT_TOKENS).map(per_s),
        generation_tokens_per_s: delta(GENERATION_TOKENS).map(per_s),
        queue_s: quantiles(&signal_histograms.queue),
        prefill_s: quantiles(&signal_histograms.prefill),
        decode_s: quantiles(&signal_histograms.decode),
        prompt_len: quantiles(&signal_histograms.prompt_len),
        generation_len: quantiles(&signal_histograms.generation_len),
        spec_draft_tokens: delta(SPEC_DRAFT_TOKENS),
        spec_accepted_tokens: accepted,
        spec_drafts: drafts,
        spec_accept_length,
        finished: by_label(FINISHED),
        http: by_label(HTTP),
        prefix_queries,
        flops_per_gpu: per_gpu(FLOPS),
        mem_bytes_per_gpu: mem_bytes,
        histograms: signal_histograms,
    };
    Window {
        seconds,
        server: server.to_string(),
        sources: 1,
        requests_per_s: finished_count.map(per_s),
        running: after.value(RUNNING),
        waiting: after.value(WAITING),
        kv_usage: after.mean(KV_USAGE),
        preemptions: delta(PREEMPTIONS),
        prefix_hit_rate,
        ttft_s: quantiles(&histograms.ttft),
        itl_s: quantiles(&histograms.itl),
        e2e_s: quantiles(&histograms.e2e),
        histograms,
        source: None,
        engines: BTreeMap::new(),
        signals: Box::new(signals),
    }
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
        assert!(w.engines.is_empty() && w.signals.is_empty(), "{w:?}");
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
        // Each engine is its own window too (the histogram lines, without an engine label,
        // are the server's as a whole).
        assert_eq!(one.engines.len(), 2, "{:?}", one.engines.keys());
        assert_eq!(one.ttft_s.unwrap().n, 4);
        assert_eq!(one.engines["1"].running, Some(1.0));
        assert_eq!(one.engines["0"].kv_usage, Some(0.2));
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
        assert!(both.engines.is_empty(), "merged servers keep no engines");
    }

    #[test]
    fn other_servers_and_odd_lines() {
        let sglang = "sglang:num_running_reqs{a=\"x\"} 4\nsglang:num_running_reqs{a=\"y\"} 2\nsglang:num_queue_reqs 1\nnot-a-sample\n";
        let s = parse(sglang).unwrap();
        assert_eq!(s.server(), "sglang");
        let w = window(&Scrape::default(), &s, 1.0);
        assert_eq!((w.running, w.waiting), (Some(6.0), Some(1.0)));
        assert_eq!(s.skipped.as_ref().map(|e| e.line), Some(4));
        let llama = "llamacpp:requests_processing 1\nllamacpp:kv_cache_usage_ratio 0.5\n";
        assert_eq!(parse(llama).unwrap().server(), "llama.cpp");
        let html = parse("<html>not metrics</html>").unwrap_err();
        assert_eq!(html.line, 1, "{html}");
        assert!(parse("").is_err());
        // A malformed line of a metric read here fails the scrape, naming the line.
        let err = parse("vllm:num_requests_running 1\nvllm:num_requests_waiting{a=\"1\" 2\n")
            .unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }

    /// llama.cpp's server names its speculative decoding counters as vLLM does: a window
    /// has its drafted and accepted tokens and verify steps, and the acceptance.
    #[test]
    fn llama_cpp_speculative_counters() {
        let page = |k: f64| {
            format!(
                "llamacpp:requests_processing 1\nllamacpp:spec_decode_num_draft_tokens_total {}\nllamacpp:spec_decode_num_accepted_tokens_total {}\nllamacpp:spec_decode_num_drafts_total {}\n",
                110.0 * k,
                55.0 * k,
                38.0 * k
            )
        };
        let (a, b) = (parse(&page(1.0)).unwrap(), parse(&page(2.0)).unwrap());
        let w = window(&a, &b, 1.0);
        assert_eq!(w.signals.spec_accepted_tokens, Some(55.0));
        assert_eq!(w.signals.spec_accept_rate(), Some(0.5));
    }

    fn signals_page(k: f64) -> String {
        let mut p = String::new();
        let mut line = |s: String| {
            p.push_str(&s);
            p.push('\n');
        };
        line(format!(
            "vllm:prompt_tokens_total{{engine=\"0\"}} {}",
            1000.0 * k
        ));
        line(format!(
            "vllm:generation_tokens_total{{engine=\"0\"}} {}",
            200.0 * k
        ));
        for (reason, n) in [("stop", 8.0), ("length", 2.0), ("abort", 0.0)] {
            line(format!(
                "vllm:request_success_total{{engine=\"0\",finished_reason=\"{reason}\"}} {}",
                n * k
            ));
        }
        for (handler, status, n) in [
            ("/v1/completions", "2xx", 10.0),
            ("/v1/completions", "4xx", 1.0),
            ("/metrics", "2xx", 50.0),
        ] {
            line(format!(
                "http_requests_total{{handler=\"{handler}\",method=\"POST\",status=\"{status}\"}} {}",
                n * k
            ));
        }
        line(format!(
            "vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {}",
            40.0 * k
        ));
        line(format!(
            "vllm:spec_decode_num_draft_tokens_total{{engine=\"0\"}} {}",
            120.0 * k
        ));
        line(format!(
            "vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {}",
            90.0 * k
        ));
        line(format!(
            "vllm:estimated_flops_per_gpu_total{{engine=\"0\"}} {}",
            5e14 * k
        ));
        line(format!(
            "vllm:estimated_read_bytes_per_gpu_total{{engine=\"0\"}} {}",
            3e12 * k
        ));
        line(format!(
            "vllm:estimated_write_bytes_per_gpu_total{{engine=\"0\"}} {}",
            1e12 * k
        ));
        for (le, n) in [("0.3", 4.0), ("0.5", 10.0), ("+Inf", 10.0)] {
            line(format!(
                "vllm:request_queue_time_seconds_bucket{{engine=\"0\",le=\"{le}\"}} {}",
                n * k
            ));
        }
        for (le, n) in [("100", 5.0), ("200", 10.0), ("+Inf", 10.0)] {
            line(format!(
                "vllm:request_prompt_tokens_bucket{{engine=\"0\",le=\"{le}\"}} {}",
                n * k
            ));
        }
        p
    }

    #[test]
    fn every_signal_vllm_exports() {
        let a = parse(&signals_page(1.0)).unwrap();
        let b = parse(&signals_page(3.0)).unwrap();
        let w = window(&a, &b, 2.0);
        let s = &w.signals;
        assert_eq!(s.prompt_tokens_per_s, Some(1000.0));
        assert_eq!(s.generation_tokens_per_s, Some(200.0));
        // No E2E histogram: the rate comes from the finished-request counter.
        assert_eq!(w.requests_per_s, Some(10.0));
        assert_eq!(s.finished["stop"], 16.0);
        assert_eq!(s.finished["length"], 4.0);
        assert_eq!(s.finished["abort"], 0.0);
        // Our own scrapes of /metrics are left out.
        assert_eq!(s.http["2xx"], 20.0);
        assert_eq!(s.http["4xx"], 2.0);
        assert_eq!(s.spec_accept_rate(), Some(0.75));
        assert_eq!(s.spec_accept_length, Some(1.0 + 180.0 / 80.0));
        assert_eq!(s.flops_per_gpu, Some(5e14));
        assert_eq!(s.mem_bytes_per_gpu, Some(4e12));
        let q = s.queue_s.unwrap();
        assert_eq!(q.n, 20);
        assert!((q.p50 - (0.3 + 0.2 * 2.0 / 12.0)).abs() < 1e-12, "{q:?}");
        assert_eq!(s.prompt_len.unwrap().n, 20);
        // A restarted server's counters count from zero.
        let w = window(&b, &a, 1.0);
        assert_eq!(w.signals.prompt_tokens_per_s, Some(1000.0));
    }
}
