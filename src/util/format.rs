//! The one formatter for each kind of number infertop prints, for the dashboard, the reports,
//! the sweep table and the CLI alike. The convention:
//!
//! - **Memory** (bytes held: weights, KV cache, allocator, RSS, device memory) in binary units,
//!   as nvtop and the kernel count them: `512B`, `1.50KiB`, `12.3MiB`, `15.0GiB` ([`bytes`]).
//! - **Counts and rates** (parameters, tokens, tok/s) with decimal suffixes `k`, `M`, `B`
//!   (billions, as model sizes are named: `8.03B`), `T` ([`si`]).
//! - **Bandwidth and FLOP/s** with decimal SI prefixes before the unit, as vendors quote peaks
//!   and as `--peak-bw`/`--peak-flops` read them: `3.35TB/s`, `312GFLOP/s` ([`si_unit`]).
//! - **Durations** `812µs`, `45.6ms`, `1.23s` ([`duration`]); in report tables, whose columns
//!   are compared run to run, milliseconds to three decimals, `12.345 ms` ([`ms`]).
//! - **Shares** in reports, `12.3 %` ([`percent`]).
//!
//! Three significant digits wherever a value is read by eye, so columns stay narrow and a change
//! in the third digit is still visible; the number and its unit are written together. A leaf
//! module, like the rest of `util`: `ui`, `record`, `sweep`, `stats` and `cli` all use it.

/// Formats `v` with three significant digits (`1.23`, `12.3`, `123`); `v` is in `[0, 1000)`.
fn sig3(v: f64) -> String {
    if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A duration given in seconds: `812µs`, `1.23ms`, `45.6ms`, `1.23s`, `123s`.
/// `ascii` writes `us` instead of `µs` for terminals without UTF-8.
pub fn duration(secs: f64, ascii: bool) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".to_string();
    }
    let micro = if ascii { "us" } else { "µs" };
    if secs == 0.0 {
        return "0s".to_string();
    }
    // Thresholds at 999.5 of the smaller unit so rounding never prints `1000µs`.
    if secs < 999.5e-9 {
        format!("{}ns", sig3(secs * 1e9))
    } else if secs < 999.5e-6 {
        format!("{}{micro}", sig3(secs * 1e6))
    } else if secs < 999.5e-3 {
        format!("{}ms", sig3(secs * 1e3))
    } else if secs < 999.5 {
        format!("{}s", sig3(secs))
    } else {
        format!("{secs:.0}s")
    }
}

/// A memory size in binary units: `512B`, `1.50KiB`, `12.3MiB`, `1.23GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 999.5 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{}{}", sig3(v), UNITS[unit])
}

/// A count or rate with a decimal suffix: `7`, `12.3`, `456`, `1.23k`, `1.50M`, `8.03B`
/// (billions, as parameter counts are named).
pub fn si(v: f64) -> String {
    if !v.is_finite() || v < 0.0 {
        return "-".to_string();
    }
    const UNITS: [&str; 5] = ["", "k", "M", "B", "T"];
    let mut v = v;
    let mut unit = 0;
    while v >= 999.5 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 && v.fract() == 0.0 {
        // Small whole counts (n, tokens) read better without decimals.
        return format!("{v:.0}");
    }
    format!("{}{}", sig3(v), UNITS[unit])
}

/// A figure with an SI prefix before its unit, powers of 1000: `3.35TB/s`, `312GFLOP/s`,
/// `12.0B/s`. For bandwidth and FLOP/s; memory sizes are [`bytes`].
pub fn si_unit(v: f64, unit: &str) -> String {
    if !v.is_finite() || v < 0.0 {
        return "-".to_string();
    }
    const PREFIXES: [&str; 6] = ["", "k", "M", "G", "T", "P"];
    let mut v = v;
    let mut p = 0;
    while v >= 999.5 && p + 1 < PREFIXES.len() {
        v /= 1000.0;
        p += 1;
    }
    format!("{}{}{unit}", sig3(v), PREFIXES[p])
}

/// A latency in a report table: milliseconds to three decimals, `12.345 ms`.
pub fn ms(secs: f64) -> String {
    format!("{:.3} ms", secs * 1e3)
}

/// A share (0..=1) as a percentage to one decimal: `12.3 %`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1} %", fraction * 100.0)
}

/// Elapsed wall time as `m:ss` or `h:mm:ss`.
pub fn elapsed(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, (s / 60) % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_three_significant_digits() {
        let cases = [
            (0.0, "0s"),
            (5e-7, "500ns"),
            (812e-6, "812µs"),
            (0.0009996, "1.00ms"),
            (0.00123, "1.23ms"),
            (0.0456, "45.6ms"),
            (0.1234, "123ms"),
            (0.9999, "1.00s"),
            (1.234, "1.23s"),
            (12.34, "12.3s"),
            (123.4, "123s"),
            (4000.2, "4000s"),
        ];
        for (secs, want) in cases {
            assert_eq!(duration(secs, false), want, "{secs}");
        }
        assert_eq!(duration(812e-6, true), "812us");
        assert_eq!(duration(f64::NAN, false), "-");
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(0), "0B");
        assert_eq!(bytes(1023), "1023B");
        assert_eq!(bytes(1536), "1.50KiB");
        assert_eq!(bytes(12_900_000), "12.3MiB");
        assert_eq!(bytes(8 << 30), "8.00GiB");
        assert_eq!(bytes(1023 << 20), "1.00GiB");
        // Llama 3 8B in bf16: 16.06e9 bytes.
        assert_eq!(bytes(16_060_000_000), "15.0GiB");
    }

    #[test]
    fn si_units_use_decimal_prefixes() {
        assert_eq!(si_unit(3.35e12, "B/s"), "3.35TB/s");
        assert_eq!(si_unit(900e9, "B/s"), "900GB/s");
        assert_eq!(si_unit(12.0, "B/s"), "12.0B/s");
        assert_eq!(si_unit(3.12e11, "FLOP/s"), "312GFLOP/s");
        assert_eq!(si_unit(999.6e9, "B/s"), "1.00TB/s");
        assert_eq!(si_unit(f64::NAN, "B/s"), "-");
    }

    #[test]
    fn report_latencies_and_shares() {
        assert_eq!(ms(0.0123456), "12.346 ms");
        assert_eq!(percent(0.1234), "12.3 %");
        assert_eq!(percent(0.05), "5.0 %");
    }

    #[test]
    fn si_and_elapsed() {
        assert_eq!(si(7.0), "7");
        assert_eq!(si(12.34), "12.3");
        assert_eq!(si(456.0), "456");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(8.03e9), "8.03B");
        assert_eq!(si(1_500_000.0), "1.50M");
        assert_eq!(si(999_600.0), "1.00M");
        assert_eq!(elapsed(std::time::Duration::from_secs(83)), "1:23");
        assert_eq!(elapsed(std::time::Duration::from_secs(3723)), "1:02:03");
    }
}
