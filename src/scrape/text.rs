//! The Prometheus text exposition format, read line by line without copying: a sample's name,
//! its labels (found on demand) and its value. Only the samples a caller wants are read whole;
//! the rest are checked just enough to tell a sample from garbage, so a 50 KB page of which a
//! tenth is wanted costs little more than a scan for line ends.
//!
//! A malformed line of a wanted metric is an error naming the line (its figures would be
//! wrong); a malformed line of any other is remembered (the first one) and skipped, as a
//! server may export anything.

use std::borrow::Cow;

/// A line of a page that could not be read, by number (1-based) with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct PageError {
    pub line: usize,
    pub why: String,
    /// The line's start, as written (at most 60 characters).
    pub excerpt: String,
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {} (`{}`)", self.line, self.why, self.excerpt)
    }
}

fn error(line_no: usize, line: &str, why: impl Into<String>) -> PageError {
    let excerpt: String = line.chars().take(60).collect();
    let excerpt = crate::util::one_line(&excerpt);
    PageError {
        line: line_no,
        why: why.into(),
        excerpt,
    }
}

/// One sample: `name{labels} value`.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// What is between the braces, as written (checked well-formed).
    labels: &'a str,
    pub value: f64,
}

impl<'a> Sample<'a> {
    /// A label's value (unescaped), or `None` when the sample has no such label.
    pub fn label(&self, key: &str) -> Option<Cow<'a, str>> {
        let mut rest = self.labels;
        while let Some((k, v, after)) = next_label(rest).ok().flatten() {
            if k == key {
                return Some(unescape(v));
            }
            rest = after;
        }
        None
    }
}

/// What a page held.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageStats {
    /// Sample lines (wanted or not).
    pub samples: usize,
    /// Samples passed to the caller.
    pub wanted: usize,
    /// The first malformed line of an unwanted metric (skipped).
    pub skipped: Option<PageError>,
}

/// Calls `f` with every sample whose name `wanted` accepts, in page order.
pub fn for_each_sample<'a>(
    text: &'a str,
    wanted: &dyn Fn(&str) -> bool,
    f: &mut dyn FnMut(&Sample<'a>),
) -> Result<PageStats, PageError> {
    let mut stats = PageStats::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(line.len());
        let name = &line[..name_end];
        let rest = &line[name_end..];
        let well_started = valid_name(name)
            && (rest.starts_with('{') || rest.starts_with(' ') || rest.starts_with('\t'));
        if !wanted(name) {
            if well_started {
                stats.samples += 1;
            } else if stats.skipped.is_none() {
                stats.skipped = Some(error(i + 1, line, "not a Prometheus sample"));
            }
            continue;
        }
        if !well_started {
            return Err(error(i + 1, line, "not a Prometheus sample"));
        }
        let sample = read_sample(name, rest).map_err(|why| error(i + 1, line, why))?;
        stats.samples += 1;
        stats.wanted += 1;
        f(&sample);
    }
    Ok(stats)
}

fn valid_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
}

/// The labels and value after a sample's name.
fn read_sample<'a>(name: &'a str, rest: &'a str) -> Result<Sample<'a>, String> {
    let (labels, after) = match rest.strip_prefix('{') {
        Some(inner) => {
            // Walk the labels to find the closing brace (a `}` may be inside a value).
            let mut cursor = inner;
            while let Some((_, _, after)) = next_label(cursor)? {
                cursor = after;
            }
            let consumed = inner.len() - cursor.len();
            let after = cursor
                .trim_start()
                .strip_prefix('}')
                .ok_or("labels without a closing `}`")?;
            (&inner[..consumed], after)
        }
        None => ("", rest),
    };
    let mut fields = after.split_ascii_whitespace();
    let value = fields.next().ok_or("no value")?;
    let value: f64 = value
        .parse()
        .map_err(|_| format!("`{value}` is not a number"))?;
    // A timestamp may follow, and in OpenMetrics an exemplar (`# {...} v`): both ignored.
    if let Some(next) = fields.next() {
        if !next.starts_with('#') && next.parse::<f64>().is_err() {
            return Err(format!("`{next}` after the value is not a timestamp"));
        }
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// The next `key="value"` of a label list, and what follows it (past a comma); `None` at the
/// closing brace (not consumed) or the end.
fn next_label(text: &str) -> Result<Option<(&str, &str, &str)>, String> {
    let t = text.trim_start();
    if t.is_empty() || t.starts_with('}') {
        return Ok(None);
    }
    let key_end = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(t.len());
    let key = &t[..key_end];
    if key.is_empty() {
        return Err("a label without a name".into());
    }
    let after_key = t[key_end..].trim_start();
    let after_eq = after_key
        .strip_prefix('=')
        .ok_or_else(|| format!("label `{key}` without `=`"))?
        .trim_start();
    let body = after_eq
        .strip_prefix('"')
        .ok_or_else(|| format!("label `{key}`'s value is not quoted"))?;
    let mut escaped = false;
    let mut close = None;
    for (i, b) in body.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => {
                close = Some(i);
                break;
            }
            _ => {}
        }
    }
    let close = close.ok_or_else(|| format!("label `{key}`'s value is not closed"))?;
    let value = &body[..close];
    let after = body[close + 1..].trim_start();
    let after = match after.strip_prefix(',') {
        Some(a) => a,
        None if after.starts_with('}') || after.is_empty() => after,
        None => return Err(format!("no `,` or `}}` after label `{key}`")),
    };
    Ok(Some((key, value, after)))
}

fn unescape(v: &str) -> Cow<'_, str> {
    if !v.contains('\\') {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    type Read = Vec<(String, Vec<(String, String)>, f64)>;

    fn all(text: &str) -> Result<(Read, PageStats), PageError> {
        let mut got = Vec::new();
        let keys = ["le", "gpu", "UUID", "a", "b", "engine", "x"];
        let stats = for_each_sample(text, &|_| true, &mut |s| {
            let labels = keys
                .iter()
                .filter_map(|k| s.label(k).map(|v| (k.to_string(), v.into_owned())))
                .collect();
            got.push((s.name.to_string(), labels, s.value));
        })?;
        Ok((got, stats))
    }

    #[test]
    fn reads_what_exporters_write() {
        let text = "# HELP x y\n# TYPE x gauge\n\
            plain 1\n\
            with{a=\"1\",b=\"two\"} 2.5\n\
            spaced{gpu=\"0\", UUID=\"GPU-60\"} 139\r\n\
            trailing_comma{a=\"x\",} 3\n\
            brace_inside{a=\"}{\",b=\"q\\\"uote\"} 4\n\
            stamped{a=\"1\"} 5 1712345678000\n\
            special{le=\"+Inf\"} +Inf\n\
            nan NaN\n\
            exemplar_bucket{le=\"0.1\"} 7 # {trace_id=\"abc\"} 0.05 1.7e9\n\
              indented 8\n";
        let (got, stats) = all(text).unwrap();
        assert_eq!(stats.samples, 10);
        assert_eq!(got[0], ("plain".into(), vec![], 1.0));
        assert_eq!(
            got[1].1,
            vec![("a".into(), "1".into()), ("b".into(), "two".into())]
        );
        assert_eq!(
            got[2].1,
            vec![("gpu".into(), "0".into()), ("UUID".into(), "GPU-60".into())]
        );
        assert_eq!(got[2].2, 139.0);
        assert_eq!(got[3].2, 3.0);
        assert_eq!(
            got[4].1,
            vec![("a".into(), "}{".into()), ("b".into(), "q\"uote".into())]
        );
        assert_eq!(got[5].2, 5.0);
        assert_eq!(got[6].1, vec![("le".into(), "+Inf".into())]);
        assert!(got[6].2.is_infinite());
        assert!(got[7].2.is_nan());
        assert_eq!(got[8].2, 7.0);
        assert_eq!(got[9].0, "indented");
    }

    #[test]
    fn a_malformed_wanted_line_names_its_line() {
        for (text, why) in [
            ("ok 1\nbad{a=\"1\" 2\n", "no `,` or `}` after label `a`"),
            ("ok 1\n\nbad{a=1} 2\n", "label `a`'s value is not quoted"),
            ("ok 1\nbad{a=\"1\"}\n", "no value"),
            ("ok 1\nbad 12abc\n", "`12abc` is not a number"),
            ("ok 1\nbad{a=\"open} 1\n", "label `a`'s value is not closed"),
            ("ok 1\nbad 1 2x\n", "`2x` after the value"),
        ] {
            let err = all(text).unwrap_err();
            assert_eq!(
                err.line,
                if text.contains("\n\n") { 3 } else { 2 },
                "{text}"
            );
            assert!(err.why.contains(why), "{err} vs {why}");
            assert!(err.to_string().starts_with(&format!("line {}: ", err.line)));
        }
    }

    #[test]
    fn unwanted_garbage_is_skipped_and_remembered() {
        let text = "<html>\nwanted 1\nother{whatever 2\n9bad 1\n";
        let mut n = 0;
        let stats = for_each_sample(text, &|name| name == "wanted", &mut |_| n += 1).unwrap();
        assert_eq!(n, 1);
        // `other{whatever 2` starts like a sample: only wanted lines are read whole.
        assert_eq!(stats.samples, 2);
        let skipped = stats.skipped.unwrap();
        assert_eq!(skipped.line, 1);
        assert_eq!(skipped.excerpt, "<html>");
    }
}
