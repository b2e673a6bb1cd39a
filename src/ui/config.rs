//! Shared handling of the dashboard's TOML files (themes, key bindings): parse errors name the
//! file and the line, because a user editing a config wants to be pointed at the mistake.

use std::path::Path;

/// The 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// `text` with control characters (a newline in a quoted value, say) written as escapes, so
/// an error quoting what the user wrote stays one line.
pub fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `origin:LINE: message`, from a toml error and the text it came from.
pub fn toml_error(origin: &str, text: &str, err: &toml::de::Error) -> anyhow::Error {
    let message = escape_controls(err.message().trim());
    match err.span() {
        Some(span) => anyhow::anyhow!("{origin}, line {}: {message}", line_of(text, span.start)),
        None => anyhow::anyhow!("{origin}: {message}"),
    }
}

/// Reads a config file, naming it in the error.
pub fn read(kind: &str, path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("{kind} file {}", crate::util::io_error(path, &e)))
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn lines_count_from_one() {
        let t = "a\nbb\nccc";
        assert_eq!(line_of(t, 0), 1);
        assert_eq!(line_of(t, 2), 2);
        assert_eq!(line_of(t, 5), 3);
        assert_eq!(line_of(t, 100), 3);
    }
}
