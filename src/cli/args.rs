//! The one place that turns a clap error into infertop's one-line form: `FLAG: what is wrong
//! (what to write)`. The value parsers themselves are the planner's (`plan::values`).

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::util::one_line;

/// clap's error as one line. A value our parser refused reads `--flag: <our message>`; a value
/// outside a fixed set lists the set; anything else keeps clap's first line.
pub fn one_line_error(e: &clap::Error) -> String {
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split_whitespace().next().map(str::to_string),
        _ => None,
    };
    if let Some(flag) = flag {
        match e.kind() {
            ErrorKind::ValueValidation => {
                if let Some(source) = std::error::Error::source(e) {
                    return format!("{flag}: {}", one_line(&source.to_string()));
                }
            }
            ErrorKind::InvalidValue => {
                let value = match e.get(ContextKind::InvalidValue) {
                    Some(ContextValue::String(v)) => v.clone(),
                    _ => String::new(),
                };
                if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
                    return format!("{flag}: unknown value `{value}` (use {})", or_list(valid));
                }
            }
            _ => {}
        }
    }
    if e.kind() == ErrorKind::MissingRequiredArgument {
        if let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg) {
            // e.g. `--api` without `--endpoint`.
            return format!(
                "{} is needed by the flags given (see infertop --help)",
                or_list(missing)
            );
        }
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    format!("{first} (see infertop --help)")
}

/// `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_words() {
        assert_eq!(
            or_list(&["md".into(), "json".into(), "csv".into()]),
            "md, json or csv"
        );
    }
}
