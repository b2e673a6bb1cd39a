//! A run's results in llm-d's exchange format, the Benchmark Report v0.2 (`report --format
//! llm-d`): the run (`run`), what was measured and how it was loaded (`scenario`: the serving
//! endpoint as a generic component, the load as infertop sent it), and the request-level
//! results (`results.request_performance.aggregate`: request counts and lengths, TTFT, TPOT,
//! ITL and E2E latency, throughput). What the format has no place for (where the TTFT went by
//! the server's own timings, the HTTP phases) goes under `results.profiling.infertop`, the one
//! open-ended part of the schema. Latencies in seconds, as the format's examples have them.
//!
//! Throughput is over the interval in which the load was held (`stats::held`), as infertop's
//! own reports count it; without one (fewer requests than the concurrency), over the steady
//! requests' span, from the first start to the last end.

use serde_json::{json, Map, Value};

use crate::record::reader::Record;
use crate::stats::held::{held, Load, Span};
use crate::stats::{Metric, Summary};
use crate::summary::RunSummary;

/// The version of the format written.
pub const VERSION: &str = "0.2";

/// The Benchmark Report of a run's record, with its summary (as `report` recomputed it).
pub fn benchmark_report(rec: &Record, summary: &RunSummary) -> Value {
    let config = rec.config().cloned().unwrap_or_default();
    let header = rec.header.as_ref();
    let version = header
        .map(|h| h.infertop_version.clone())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    let config_json = serde_json::to_value(&config).unwrap_or(Value::Null);
    let cfg_id = format!(
        "{:016x}",
        crate::util::fnv1a(config_json.to_string().as_bytes())
    );
    let summary_json = summary.to_json();
    let uid = format!(
        "{cfg_id}{:016x}",
        crate::util::fnv1a(summary_json.to_string().as_bytes())
    );
    let model = config
        .served_model
        .clone()
        .or_else(|| rec.model.as_ref().map(|m| m.name.clone()))
        .unwrap_or_else(|| config.model.clone());

    let mut run = Map::new();
    run.insert("uid".into(), uid.into());
    if let Some(e) = rec.elapsed_s().filter(|e| e.is_finite() && *e >= 0.0) {
        run.insert("time".into(), json!({ "duration": format!("PT{e}S") }));
    }
    run.insert(
        "description".into(),
        format!(
            "infertop {} run of {model}",
            if config.is_server() {
                "client"
            } else {
                "in-process"
            }
        )
        .into(),
    );
    run.insert("keywords".into(), json!(["infertop"]));

    let results = json!({
        "request_performance": { "aggregate": aggregate(rec, summary, &config) },
        "profiling": { "infertop": profiling(&summary_json) },
    });
    json!({
        "version": VERSION,
        "run": run,
        "scenario": {
            "stack": [component(&config, rec, &model, &cfg_id)],
            "load": load(&config, rec, summary, &version, &cfg_id, header),
        },
        "results": results,
    })
}

/// The server (or the in-process engine) as a generic component: the format's inference
/// engine kind needs the accelerators and parallelism, which a client does not know.
fn component(
    config: &crate::record::line::RunConfig,
    rec: &Record,
    model: &str,
    cfg_id: &str,
) -> Value {
    let (label, tool, tool_version) = if config.is_server() {
        (
            config
                .endpoints
                .first()
                .cloned()
                .unwrap_or_else(|| "endpoint".into()),
            "openai-compatible-server".to_string(),
            "unknown".to_string(),
        )
    } else {
        let candle = rec
            .header
            .as_ref()
            .map(|h| h.machine.candle_version.clone())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "unknown".into());
        ("candle".to_string(), "candle".to_string(), candle)
    };
    json!({
        "metadata": { "schema_version": "0.0.1", "label": label, "cfg_id": cfg_id },
        "standardized": {
            "kind": "generic",
            "tool": tool,
            "tool_version": tool_version,
            "model": { "name": model },
            "endpoints": config.endpoints,
        },
        "native": {},
    })
}

/// A configured length (`128`, `64..512`, `128,512`) as the format's sequence length, with
/// the mean the requests had.
fn seq_len(spec: &str, observed: &Summary) -> Value {
    let value = if observed.n > 0 {
        observed.mean
    } else {
        spec.trim()
            .trim_start_matches('~')
            .parse::<f64>()
            .unwrap_or(0.0)
    };
    let mut out = Map::new();
    // `~128`: about 128 tokens (a prompt made without the server's tokenizer).
    let spec = spec.trim().trim_start_matches('~');
    let range = spec
        .split_once("..")
        .and_then(|(a, b)| Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?)));
    let distribution = if spec.parse::<u64>().is_ok() {
        "fixed"
    } else if let Some((lo, hi)) = range {
        out.insert("min".into(), lo.into());
        out.insert("max".into(), hi.max(1).into());
        "uniform"
    } else {
        "other"
    };
    out.insert("distribution".into(), distribution.into());
    out.insert("value".into(), value.max(0.0).into());
    Value::Object(out)
}

fn load(
    config: &crate::record::line::RunConfig,
    rec: &Record,
    summary: &RunSummary,
    version: &str,
    cfg_id: &str,
    header: Option<&crate::record::line::Header>,
) -> Value {
    let lengths = summary.breakdown.as_ref();
    let prompt = lengths.map(|b| b.prompt_tokens).unwrap_or_default();
    let output = lengths.map(|b| b.output_tokens).unwrap_or_default();
    let source = match config.traffic.as_ref().and_then(|t| t.dataset.as_ref()) {
        Some(_) => "sampled",
        None => "random",
    };
    let mut standardized = Map::new();
    standardized.insert("tool".into(), "infertop".into());
    standardized.insert("tool_version".into(), version.into());
    standardized.insert("source".into(), source.into());
    standardized.insert(
        "input_seq_len".into(),
        seq_len(&config.prompt_tokens, &prompt),
    );
    standardized.insert(
        "output_seq_len".into(),
        seq_len(&config.output_tokens, &output),
    );
    if let Some(r) = config.rate.filter(|r| r.is_finite() && *r > 0.0) {
        standardized.insert("rate_qps".into(), r.into());
    }
    let concurrency = config.concurrency.or((!config.is_server()).then_some(1));
    if let Some(c) = concurrency.filter(|c| *c >= 1) {
        standardized.insert("concurrency".into(), c.into());
    }
    let _ = rec;
    json!({
        "metadata": {
            "schema_version": "0.0.1",
            "cfg_id": cfg_id,
            "description": config.traffic.as_ref().map(|t| t.describe()),
        },
        "standardized": standardized,
        "native": {
            "args": { "command": header.map(|h| h.command.clone()).unwrap_or_default() },
            "config": config,
        },
    })
}

/// A statistic in the format: units, mean and the percentiles infertop has (none when no
/// sample: the format has no way to say n = 0).
fn stat(s: &Summary, units: &str) -> Option<Value> {
    (s.n > 0 && s.mean.is_finite()).then(|| {
        json!({ "units": units, "mean": s.mean, "p50": s.p50, "p90": s.p90, "p95": s.p95,
            "p99": s.p99, "max": s.max })
    })
}

/// A rate measured once over the run (no distribution): its mean alone.
fn rate(v: Option<f64>, units: &str) -> Option<Value> {
    v.filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| json!({ "units": units, "mean": v }))
}

fn insert(m: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(key.into(), v);
    }
}

fn aggregate(rec: &Record, summary: &RunSummary, config: &crate::record::line::RunConfig) -> Value {
    let lengths = summary.breakdown.as_ref();
    let mut requests = Map::new();
    requests.insert(
        "total".into(),
        (summary.requests.saturating_sub(summary.warmup_requests) + summary.failed_requests).into(),
    );
    requests.insert("failures".into(), summary.failed_requests.into());
    insert(
        &mut requests,
        "input_length",
        lengths.and_then(|b| stat(&b.prompt_tokens, "count")),
    );
    insert(
        &mut requests,
        "output_length",
        lengths.and_then(|b| stat(&b.output_tokens, "count")),
    );

    let t = &summary.steady;
    let mut latency = Map::new();
    insert(
        &mut latency,
        "time_to_first_token",
        stat(&t.get(Metric::Ttft), "s"),
    );
    insert(
        &mut latency,
        "time_per_output_token",
        stat(&t.get(Metric::Tpot), "s/token"),
    );
    insert(
        &mut latency,
        "inter_token_latency",
        stat(&t.get(Metric::Itl), "s/token"),
    );
    insert(
        &mut latency,
        "request_latency",
        stat(&t.get(Metric::E2e), "s"),
    );
    let ntpot: Vec<f64> = rec
        .steady()
        .filter(|r| r.output_tokens > 0)
        .map(|r| r.e2e_s / r.output_tokens as f64)
        .filter(|v| v.is_finite())
        .collect();
    insert(
        &mut latency,
        "normalized_time_per_output_token",
        stat(&Summary::of(&ntpot), "s/token"),
    );

    let mut throughput = Map::new();
    if let Some((requests_s, output_s)) = throughput_of(rec, config) {
        let prompt_mean = lengths
            .map(|b| b.prompt_tokens.mean)
            .filter(|m| m.is_finite());
        let input_s = prompt_mean.map(|p| p * requests_s);
        insert(
            &mut throughput,
            "request_rate",
            rate(Some(requests_s), "queries/s"),
        );
        insert(
            &mut throughput,
            "output_token_rate",
            rate(Some(output_s), "tokens/s"),
        );
        insert(
            &mut throughput,
            "input_token_rate",
            rate(input_s, "tokens/s"),
        );
        insert(
            &mut throughput,
            "total_token_rate",
            rate(input_s.map(|i| i + output_s), "tokens/s"),
        );
    }
    json!({ "requests": requests, "latency": latency, "throughput": throughput })
}

/// Requests and output tokens per second over the held interval, else over the steady span.
fn throughput_of(rec: &Record, config: &crate::record::line::RunConfig) -> Option<(f64, f64)> {
    let from = rec.last_reset.map_or(0, |r| r.0).min(rec.requests.len());
    let spans: Vec<Span> = rec.requests[from..]
        .iter()
        .zip(&rec.request_t_s[from..])
        .filter_map(|(r, t)| t.map(|t| Span::done(r, t, true)))
        .collect();
    let load = match (config.rate, config.concurrency) {
        (Some(_), _) => Load::Open,
        (None, Some(c)) => Load::Closed(c),
        (None, None) => Load::Closed(1),
    };
    if let Some(h) = held(&spans, load).filter(|h| h.seconds() > 0.0) {
        let requests = h.met_seqs / h.seconds();
        return Some((requests, h.output_tok_s()));
    }
    let steady: Vec<&Span> = spans.iter().filter(|s| !s.warmup).collect();
    let start = steady.iter().map(|s| s.start_s).min_by(f64::total_cmp)?;
    let end = steady.iter().map(|s| s.end_s).max_by(f64::total_cmp)?;
    let secs = end - start;
    (secs > 0.0).then(|| {
        let tokens: u64 = steady.iter().map(|s| s.tokens).sum();
        (steady.len() as f64 / secs, tokens as f64 / secs)
    })
}

/// What infertop measured beyond the format's fields, under the format's open-ended part.
fn profiling(summary_json: &Value) -> Value {
    let mut m = Map::new();
    for key in ["ttft_split", "http_phases", "server", "breakdown"] {
        if let Some(v) = summary_json.get(key) {
            m.insert(key.into(), v.clone());
        }
    }
    Value::Object(m)
}
