//! The benches' settings from environment variables, each with its default.

use std::str::FromStr;

/// `name` parsed, or `default` when unset or unreadable.
pub fn env_or<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

pub fn env_str(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// A comma list (`a,b,c`), blanks left out.
pub fn env_words(name: &str, default: &str) -> Vec<String> {
    env_str(name, default)
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
