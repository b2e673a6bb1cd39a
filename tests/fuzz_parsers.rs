//! Property tests for our own parsers: whatever a user types or a file holds, they return a value
//! or a one-line error, never panic, and what they accept round-trips.
#![allow(clippy::unwrap_used)]

use infertop::model::ArchConfig;
use infertop::stats::{parse_duration_s, Slo};
use infertop::traffic::len::LenSpec;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 4000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn length_specs_never_panic_and_round_trip(s in "[0-9 ,.=\\-a-z]{0,24}") {
        match LenSpec::parse(&s) {
            Ok(spec) => {
                match &spec {
                    LenSpec::Fixed(n) => prop_assert!(*n >= 1),
                    LenSpec::List(v) => prop_assert!(!v.is_empty() && v.iter().all(|n| *n >= 1)),
                    LenSpec::Range(lo, hi) => prop_assert!(1 <= *lo && lo < hi),
                }
                let again = LenSpec::parse(&spec.to_string());
                prop_assert_eq!(again, Ok(spec));
            }
            Err(msg) => {
                prop_assert!(!msg.is_empty());
                prop_assert!(!msg.contains('\n'));
            }
        }
    }

    #[test]
    fn structured_length_specs_parse(lo in 1usize..100_000, span in 0usize..100_000, list in proptest::collection::vec(1usize..100_000, 1..6)) {
        let hi = lo + span;
        let r = LenSpec::parse(&format!("{lo}..{hi}")).unwrap();
        prop_assert_eq!(r.max(), hi);
        let joined: Vec<String> = list.iter().map(|n| n.to_string()).collect();
        let l = LenSpec::parse(&joined.join(",")).unwrap();
        prop_assert_eq!(l.max(), *list.iter().max().unwrap());
    }

    #[test]
    fn slo_specs_never_panic(s in "[a-z0-9=:,.µ ]{0,32}") {
        match Slo::parse(&s) {
            Ok(slo) => {
                prop_assert!(!slo.is_empty());
                for (_, l) in slo.limits() {
                    prop_assert!(l.limit_s.is_finite() && l.limit_s > 0.0);
                    prop_assert!([50, 90, 95, 99].contains(&l.percentile));
                }
            }
            Err(msg) => prop_assert!(!msg.contains('\n')),
        }
    }

    #[test]
    fn durations_are_positive_and_scaled(v in 0.001f64..1e6, unit in prop_oneof![Just("us"), Just("ms"), Just("s"), Just("")]) {
        let d = parse_duration_s(&format!("{v}{unit}")).unwrap();
        let scale = match unit { "us" => 1e-6, "ms" => 1e-3, _ => 1.0 };
        prop_assert!((d - v * scale).abs() <= 1e-9 * d.max(1.0));
    }

    #[test]
    fn config_json_adaptation_never_panics(
        hidden in prop_oneof![Just(serde_json::Value::Null), (0u64..5000).prop_map(serde_json::Value::from), Just(serde_json::json!("x")), Just(serde_json::json!(-3))],
        heads in 0u64..70,
        kv in prop_oneof![Just(serde_json::Value::Null), (0u64..70).prop_map(serde_json::Value::from)],
        arch in prop_oneof![Just("LlamaForCausalLM"), Just("Qwen2ForCausalLM"), Just("MistralForCausalLM"), Just("Bert"), Just("")],
        rope in prop_oneof![Just(serde_json::Value::Null), Just(serde_json::json!({"rope_type": "llama3"})), Just(serde_json::json!({"rope_theta": 1e6})), Just(serde_json::json!({"rope_type": "yarn", "factor": 4.0}))],
    ) {
        let v = serde_json::json!({
            "architectures": [arch], "hidden_size": hidden, "num_attention_heads": heads,
            "num_key_value_heads": kv, "num_hidden_layers": 2, "vocab_size": 100,
            "intermediate_size": 64, "rope_parameters": rope
        });
        match ArchConfig::from_json(&v) {
            Ok(c) => {
                prop_assert!(c.num_attention_heads % c.num_key_value_heads == 0);
                prop_assert!(c.hidden_size > 0 && c.num_attention_heads > 0);
            }
            Err(msg) => prop_assert!(!msg.contains('\n')),
        }
    }

    #[test]
    fn record_reader_never_panics_on_garbage(lines in proptest::collection::vec("[ -~]{0,80}", 0..20)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut text = String::from("{\"type\":\"header\"}\n");
        text.push_str(&lines.join("\n"));
        std::fs::write(&path, text).unwrap();
        let rec = infertop::record::reader::read(&path);
        prop_assert!(rec.is_ok());
        let _ = infertop::record::reader::summary_of(&path);
    }
}
