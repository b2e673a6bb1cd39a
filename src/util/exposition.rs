//! The Prometheus text format (0.0.4) written, as `scrape::text` reads it: families of gauges,
//! counters and histograms, each with its HELP and TYPE lines, label values escaped as the
//! format asks. The one writer behind both pages infertop serves: `infertop agent`'s GPU and
//! host figures and `--metrics-listen`'s client figures.

use std::fmt::Write as _;

/// What a family's TYPE line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// A label set as written inside the braces: `gpu="0",name="H100"`, values escaped. Built with
/// `labels`; empty for a sample without labels.
pub type Labels = String;

/// `pairs` as a label set, each value escaped (backslash, quote, line feed).
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{k}=\"{}\"", escape(v));
    }
    out
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A page being written.
#[derive(Debug, Default)]
pub struct Page {
    out: String,
}

impl Page {
    pub fn with_capacity(bytes: usize) -> Page {
        Page {
            out: String::with_capacity(bytes),
        }
    }

    /// A comment line (`# ...`): the first line of `text` (an error's reason, say).
    pub fn comment(&mut self, text: &str) {
        let _ = writeln!(self.out, "# {}", crate::util::one_line(text));
    }

    fn head(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// A gauge or counter family, a line per label set. With no samples it writes nothing,
    /// not even its HELP (a figure nobody could read is left out, not written as zero).
    pub fn family(&mut self, name: &str, help: &str, kind: Kind, samples: &[(Labels, f64)]) {
        if samples.is_empty() {
            return;
        }
        self.head(name, help, kind.as_str());
        for (labels, v) in samples {
            if labels.is_empty() {
                let _ = writeln!(self.out, "{name} {v}");
            } else {
                let _ = writeln!(self.out, "{name}{{{labels}}} {v}");
            }
        }
    }

    /// One figure without labels.
    pub fn single(&mut self, name: &str, help: &str, kind: Kind, v: f64) {
        self.family(name, help, kind, &[(Labels::new(), v)]);
    }

    /// A histogram: `counts` per bucket, not cumulative, one more than `bounds` (the last is
    /// +Inf); the page gets them cumulative, with the sum and the count.
    pub fn histogram(&mut self, name: &str, help: &str, bounds: &[f64], counts: &[u64], sum: f64) {
        self.head(name, help, "histogram");
        let mut cumulative = 0;
        for (le, n) in bounds.iter().zip(counts) {
            cumulative += n;
            let _ = writeln!(self.out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        cumulative += counts.get(bounds.len()).copied().unwrap_or(0);
        let _ = writeln!(self.out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(self.out, "{name}_sum {sum}");
        let _ = writeln!(self.out, "{name}_count {cumulative}");
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn families_read_back_with_the_reader() {
        let mut page = Page::default();
        page.comment("GPU 1: lost\nfrom the bus");
        page.family(
            "x_ratio",
            "A gauge.",
            Kind::Gauge,
            &[(labels(&[("gpu", "0"), ("name", "a \"b\"\\c")]), 0.5)],
        );
        page.family("empty", "Nothing.", Kind::Gauge, &[]);
        page.single("y_total", "A counter.", Kind::Counter, 3.0);
        page.histogram("h_seconds", "A histogram.", &[0.1, 1.0], &[1, 0, 2], 4.5);
        let text = page.finish();
        assert!(text.starts_with("# GPU 1: lost\n# HELP"), "{text}");
        assert!(!text.contains("empty"), "{text}");
        assert!(
            text.contains("# TYPE y_total counter\ny_total 3\n"),
            "{text}"
        );
        assert!(
            text.contains("x_ratio{gpu=\"0\",name=\"a \\\"b\\\"\\\\c\"} 0.5"),
            "{text}"
        );
        assert!(
            text.contains(
                "h_seconds_bucket{le=\"0.1\"} 1\nh_seconds_bucket{le=\"1\"} 1\n\
                 h_seconds_bucket{le=\"+Inf\"} 3\nh_seconds_sum 4.5\nh_seconds_count 3\n"
            ),
            "{text}"
        );
        let mut names = Vec::new();
        let mut name_label = None;
        let stats = crate::scrape::text::for_each_sample(&text, &|_| true, &mut |s| {
            names.push(s.name.to_string());
            if let Some(v) = s.label("name") {
                name_label = Some(v.into_owned());
            }
        })
        .unwrap();
        assert_eq!(stats.samples, 7, "{names:?}");
        assert_eq!(stats.skipped, None);
        assert_eq!(name_label.as_deref(), Some("a \"b\"\\c"));
    }
}
