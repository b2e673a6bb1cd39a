//! The one formatter for each kind of number the dashboard shows: durations, byte counts, rates
//! and counts, elapsed time. Three significant digits everywhere so columns stay narrow and a
//! change in the third digit is still visible.

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

/// A byte count in binary units: `512B`, `1.50KiB`, `12.3MiB`, `1.23GiB`.
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

/// A rate or count with a decimal suffix: `12.3`, `456`, `1.23k`, `8.03B` (for parameters).
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
    }

    #[test]
    fn si_and_elapsed() {
        assert_eq!(si(7.0), "7");
        assert_eq!(si(12.34), "12.3");
        assert_eq!(si(456.0), "456");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(8.03e9), "8.03B");
        assert_eq!(elapsed(std::time::Duration::from_secs(83)), "1:23");
        assert_eq!(elapsed(std::time::Duration::from_secs(3723)), "1:02:03");
    }
}
