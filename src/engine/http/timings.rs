//! A server's own timings of one request, read from whatever it sends with the stream:
//! vLLM's `metrics` object on the final usage chunk (`--enable-per-request-metrics`, in ms),
//! llama.cpp's `timings` (in ms, with its prompt and cache token counts) and a `meta_info`
//! object in the shape of SGLang's native `/generate` API (in seconds), and with them what
//! speculative decoding drafted and accepted for the request. SGLang's own
//! OpenAI-compatible streams, the ones infertop drives, carry no `meta_info`: it is read only
//! when a chunk has one. Nothing is assumed: a field the server did not send stays `None`, and
//! a chunk that carries none of the three says nothing.

use serde_json::Value;

use crate::event::ServerTimings;

/// The server's timings in one chunk's `metrics`, `timings` and `meta_info` (any may be
/// absent); `None` when none of them says anything. When several are present the first that
/// says a field gives it, in that order.
pub fn read(
    metrics: Option<&Value>,
    timings: Option<&Value>,
    meta_info: Option<&Value>,
) -> Option<ServerTimings> {
    let mut out = ServerTimings::default();
    let mut sources = Vec::new();
    if let Some(m) = metrics.and_then(Value::as_object) {
        if vllm(m, &mut out) {
            sources.push("vllm");
        }
    }
    if let Some(t) = timings.and_then(Value::as_object) {
        if llama_cpp(t, &mut out) {
            sources.push("llama.cpp");
        }
    }
    if let Some(m) = meta_info.and_then(Value::as_object) {
        if sglang(m, &mut out) {
            sources.push("sglang");
        }
    }
    if sources.is_empty()
        || (out.is_empty() && out.reasoning_tokens.is_none() && out.draft_tokens.is_none())
    {
        return None;
    }
    out.source = sources.join("+");
    Some(out)
}

type Object = serde_json::Map<String, Value>;

/// A time or count: a finite, non-negative number (anything else is not said).
fn number(o: &Object, key: &str) -> Option<f64> {
    o.get(key)
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite() && *v >= 0.0)
}

fn ms(o: &Object, key: &str) -> Option<f64> {
    number(o, key).map(|v| v / 1e3)
}

fn count(o: &Object, key: &str) -> Option<usize> {
    number(o, key).map(|v| v.round() as usize)
}

/// A token count sent as a number, or as an object holding one.
fn tokens(v: Option<&Value>) -> Option<usize> {
    match v? {
        Value::Object(o) => ["num_tokens", "tokens", "count"]
            .iter()
            .find_map(|k| count(o, k)),
        v => v
            .as_f64()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v.round() as usize),
    }
}

/// Sets `slot` when it is unset; says whether `v` said something.
fn fill<T>(slot: &mut Option<T>, v: Option<T>) -> bool {
    let said = v.is_some();
    if slot.is_none() {
        *slot = v;
    }
    said
}

/// vLLM: queue (queued → scheduled), TTFT from scheduling (scheduled → first token),
/// generation (first → last token), all in ms.
fn vllm(m: &Object, out: &mut ServerTimings) -> bool {
    let queue = ms(m, "queue_time_ms");
    let prefill = ms(m, "time_to_first_token_ms");
    let decode = ms(m, "generation_time_ms");
    let e2e = match (queue, prefill, decode) {
        (Some(q), Some(p), Some(d)) => Some(q + p + d),
        _ => None,
    };
    let mut said = fill(&mut out.queue_s, queue);
    said |= fill(&mut out.prefill_s, prefill);
    said |= fill(&mut out.decode_s, decode);
    fill(&mut out.e2e_s, e2e);
    said |= fill(&mut out.mean_itl_s, ms(m, "mean_itl_ms"));
    if let Some(o) = m.get("output_token_metrics").and_then(Value::as_object) {
        said |= fill(&mut out.reasoning_tokens, tokens(o.get("reasoning")));
        said |= fill(&mut out.content_tokens, tokens(o.get("content")));
    }
    // `--per-request-spec-decode-metrics`.
    if let Some(s) = m.get("speculative_decoding").and_then(Value::as_object) {
        said |= fill(&mut out.draft_tokens, count(s, "num_draft_tokens"));
        said |= fill(
            &mut out.draft_accepted,
            count(s, "num_accepted_draft_tokens"),
        );
        said |= fill(&mut out.spec_steps, count(s, "num_spec_steps"));
    }
    said
}

/// llama.cpp's server: `prompt_ms` for the `prompt_n` tokens it computed (the `cache_n` it
/// reused cost none), `predicted_ms` for the `predicted_n` it generated.
fn llama_cpp(t: &Object, out: &mut ServerTimings) -> bool {
    let mut said = fill(&mut out.prefill_s, ms(t, "prompt_ms"));
    said |= fill(&mut out.decode_s, ms(t, "predicted_ms"));
    said |= fill(&mut out.computed_tokens, count(t, "prompt_n"));
    said |= fill(&mut out.cached_tokens, count(t, "cache_n"));
    // With a draft model (`-md`) or n-gram drafting: sent once it has drafted.
    said |= fill(&mut out.draft_tokens, count(t, "draft_n"));
    said |= fill(&mut out.draft_accepted, count(t, "draft_n_accepted"));
    said
}

/// SGLang: `queue_time` (waiting queue → forward) and `prefill_launch_delay` (forward → the
/// prefill's launch) are waiting, `prefill_launch_latency` the prefill itself, in seconds.
fn sglang(m: &Object, out: &mut ServerTimings) -> bool {
    let queue = match (number(m, "queue_time"), number(m, "prefill_launch_delay")) {
        (None, None) => None,
        (q, d) => Some(q.unwrap_or(0.0) + d.unwrap_or(0.0)),
    };
    let mut said = fill(&mut out.queue_s, queue);
    said |= fill(&mut out.prefill_s, number(m, "prefill_launch_latency"));
    said |= fill(&mut out.e2e_s, number(m, "e2e_latency"));
    let cached = count(m, "cached_tokens");
    said |= fill(&mut out.cached_tokens, cached);
    if let (Some(p), Some(c)) = (count(m, "prompt_tokens"), cached) {
        fill(&mut out.computed_tokens, Some(p.saturating_sub(c)));
    }
    said
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn near(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn vllm_metrics_are_read_in_seconds() {
        let m = json!({"queue_time_ms": 500.0, "time_to_first_token_ms": 500.0,
            "generation_time_ms": 1000.0, "mean_itl_ms": 111.1, "tokens_per_second": 6.6,
            "output_token_metrics": {"reasoning": 7, "content": {"num_tokens": 3}}});
        let t = read(Some(&m), None, None).unwrap();
        assert_eq!(t.source, "vllm");
        assert!(near(t.queue_s, 0.5) && near(t.prefill_s, 0.5) && near(t.decode_s, 1.0));
        assert!(near(t.e2e_s, 2.0) && near(t.mean_itl_s, 0.1111));
        assert_eq!((t.reasoning_tokens, t.content_tokens), (Some(7), Some(3)));
        assert_eq!((t.cached_tokens, t.computed_tokens), (None, None));
    }

    #[test]
    fn llama_cpp_timings_give_prefill_decode_and_tokens_but_no_queue() {
        let t = json!({"prompt_n": 120, "prompt_ms": 900.0, "predicted_n": 40,
            "predicted_ms": 2000.0, "cache_n": 290, "prompt_per_second": 133.3});
        let s = read(None, Some(&t), None).unwrap();
        assert_eq!(s.source, "llama.cpp");
        assert_eq!(s.queue_s, None);
        assert!(near(s.prefill_s, 0.9) && near(s.decode_s, 2.0));
        assert_eq!((s.cached_tokens, s.computed_tokens), (Some(290), Some(120)));
    }

    #[test]
    fn what_speculative_decoding_drafted_and_accepted_is_read() {
        let t = json!({"prompt_n": 7, "prompt_ms": 3.2, "predicted_n": 32, "predicted_ms": 65.4,
            "draft_n": 87, "draft_n_accepted": 29});
        let s = read(None, Some(&t), None).unwrap();
        assert_eq!(
            (s.draft_tokens, s.draft_accepted, s.spec_steps),
            (Some(87), Some(29), None)
        );
        assert!(near(s.acceptance_rate(), 29.0 / 87.0));
        let m = json!({"queue_time_ms": 1.0, "speculative_decoding": {
            "mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.5,
            "acceptance_histogram": [2, 0, 2, 0], "num_spec_steps": 4,
            "num_accepted_draft_tokens": 6, "num_draft_tokens": 12, "num_spec_tokens": 3}});
        let s = read(Some(&m), None, None).unwrap();
        assert_eq!(
            (s.draft_tokens, s.draft_accepted, s.spec_steps),
            (Some(12), Some(6), Some(4))
        );
        assert!(near(s.acceptance_rate(), 0.5));
        // Without drafting, nothing is said of it.
        let t = json!({"prompt_n": 7, "prompt_ms": 3.2});
        let s = read(None, Some(&t), None).unwrap();
        assert_eq!((s.draft_tokens, s.acceptance_rate()), (None, None));
    }

    #[test]
    fn sglang_meta_info_counts_the_launch_delay_as_waiting() {
        let m = json!({"queue_time": 1.0, "prefill_launch_delay": 0.1,
            "prefill_launch_latency": 0.3, "e2e_latency": 2.5, "cached_tokens": 64,
            "prompt_tokens": 100, "completion_tokens": 8});
        let s = read(None, None, Some(&m)).unwrap();
        assert_eq!(s.source, "sglang");
        assert!(near(s.queue_s, 1.1) && near(s.prefill_s, 0.3) && near(s.e2e_s, 2.5));
        assert_eq!((s.cached_tokens, s.computed_tokens), (Some(64), Some(36)));
    }

    /// A server that sends nothing, an empty object, nulls or garbage says nothing.
    #[test]
    fn nothing_said_is_nothing_assumed() {
        assert_eq!(read(None, None, None), None);
        assert_eq!(read(Some(&json!({})), None, None), None);
        let nulls = json!({"queue_time_ms": null, "time_to_first_token_ms": "fast"});
        assert_eq!(read(Some(&nulls), Some(&json!([1])), Some(&json!(3))), None);
        let negative = json!({"queue_time_ms": -5.0, "time_to_first_token_ms": 20.0});
        let t = read(Some(&negative), None, None).unwrap();
        assert_eq!(t.queue_s, None);
        assert!(near(t.prefill_s, 0.02));
    }

    #[test]
    fn the_rest_of_the_ttft_is_what_the_server_did_not_spend() {
        let mut t = ServerTimings {
            queue_s: Some(0.2),
            prefill_s: Some(0.5),
            ..Default::default()
        };
        t.join_ttft(0.9);
        assert!(near(t.rest_s, 0.2));
        t.join_ttft(0.6);
        assert_eq!(t.rest_s, Some(0.0));
        let mut none = ServerTimings {
            queue_s: Some(0.2),
            ..Default::default()
        };
        none.join_ttft(0.9);
        assert_eq!(none.rest_s, None);
    }
}
