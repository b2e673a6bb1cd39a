//! What users add to every request, as their own clients do: fields merged into the body
//! (`--extra-body`: thinking on or off, a JSON schema, a priority, sampling options) and headers
//! (`--header`: routing, tenants, a gateway's key). The record says what was sent, with the
//! values of credential headers masked.

use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// Headers infertop sets on every request itself: a `--header` of one of these is refused.
const OWN: [&str; 6] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "accept",
];

/// Headers whose values are credentials: recorded and printed as `***`.
const SECRET: [&str; 6] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "x-auth-token",
];

/// `--extra-body` and `--header`, parsed.
#[derive(Clone, Debug, Default)]
pub struct Extra {
    /// Merged into every request's body (a JSON merge patch: a `null` value removes the field).
    pub body: Option<Map<String, Value>>,
    /// Sent with every request, after infertop's own (so `Authorization` here wins over
    /// `--api-key`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Extra {
    pub fn is_empty(&self) -> bool {
        self.body.is_none() && self.headers.is_empty()
    }

    /// `body` with the extra fields merged in.
    pub fn apply(&self, body: &mut Value) {
        if let Some(extra) = &self.body {
            merge(body, extra);
        }
    }

    /// An HTTP client that sends the headers with every request (the route check, the model
    /// list, the prefix-cache reset, the tokenizer).
    pub fn client(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder().default_headers(self.headers.iter().cloned().collect())
    }

    /// The headers as the record says them: `Name: value`, credentials as `***`.
    pub fn described_headers(&self) -> Vec<String> {
        self.headers
            .iter()
            .map(|(name, value)| {
                let shown = if is_secret(name.as_str()) {
                    "***"
                } else {
                    value.to_str().unwrap_or("(not text)")
                };
                format!("{name}: {shown}")
            })
            .collect()
    }
}

/// RFC 7396's merge patch of `patch` into `target`: objects merge field by field, `null`
/// removes a field, anything else replaces.
fn merge(target: &mut Value, patch: &Map<String, Value>) {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(obj) = target.as_object_mut() else {
        return;
    };
    for (key, value) in patch {
        match value {
            Value::Null => {
                obj.remove(key);
            }
            Value::Object(inner) => merge(obj.entry(key.clone()).or_insert(Value::Null), inner),
            other => {
                obj.insert(key.clone(), other.clone());
            }
        }
    }
}

/// Whether a header's value is a credential (case-insensitive).
pub fn is_secret(name: &str) -> bool {
    SECRET.iter().any(|s| s.eq_ignore_ascii_case(name.trim()))
}

/// `--extra-body`: a JSON object, or `@FILE` holding one.
pub fn parse_body(s: &str) -> Result<Map<String, Value>, String> {
    let (text, from) = match s.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| crate::util::io_error(std::path::Path::new(path), &e))?,
            format!(" in {path}"),
        ),
        None => (s.to_string(), String::new()),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the JSON{from} is {} (give an object of fields to add, e.g. '{{\"temperature\": 0.7}}')",
            kind(&other)
        )),
        Err(e) => Err(format!(
            "not valid JSON{from} ({e}); give an object of fields to add, e.g. '{{\"temperature\": 0.7}}'"
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `--header 'Name: value'`.
pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), String> {
    let Some((name, value)) = s.split_once(':') else {
        return Err(format!(
            "`{s}` has no colon (write 'Name: value', e.g. 'X-Tenant: blue')"
        ));
    };
    let name = name.trim();
    if OWN.iter().any(|own| own.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "`{name}` is set by infertop on every request; leave it out"
        ));
    }
    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        format!("`{name}` is not a header name (letters, digits and -, e.g. 'X-Tenant: blue')")
    })?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("the value of `{name}` has characters a header cannot carry"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_body_is_merged_as_a_merge_patch() {
        let extra = Extra {
            body: Some(
                parse_body(
                    r#"{"temperature": 0.7, "stream_options": {"x": 1}, "max_tokens": null,
                        "chat_template_kwargs": {"enable_thinking": false}}"#,
                )
                .unwrap(),
            ),
            headers: Vec::new(),
        };
        let mut body = json!({"model": "m", "max_tokens": 16, "stream": true,
                              "stream_options": {"include_usage": true}});
        extra.apply(&mut body);
        assert_eq!(
            body,
            json!({"model": "m", "stream": true, "temperature": 0.7,
                   "stream_options": {"include_usage": true, "x": 1},
                   "chat_template_kwargs": {"enable_thinking": false}})
        );
    }

    #[test]
    fn bad_bodies_say_what_to_write() {
        let not_json = parse_body("{temperature: 1}").unwrap_err();
        assert!(not_json.starts_with("not valid JSON ("), "{not_json}");
        let array = parse_body("[1]").unwrap_err();
        assert!(array.starts_with("the JSON is an array"), "{array}");
        let missing = parse_body("@/nonexistent/extra.json").unwrap_err();
        assert!(missing.contains("/nonexistent/extra.json"), "{missing}");
    }

    #[test]
    fn headers_are_parsed_refused_and_masked() {
        let (name, value) = parse_header("X-Tenant:  blue ").unwrap();
        assert_eq!(
            (name.as_str(), value.to_str().unwrap()),
            ("x-tenant", "blue")
        );
        assert!(parse_header("X-Tenant blue")
            .unwrap_err()
            .contains("has no colon"));
        assert!(parse_header("Host: a")
            .unwrap_err()
            .contains("set by infertop"));
        assert!(parse_header("Bad Name: a")
            .unwrap_err()
            .contains("not a header name"));
        let extra = Extra {
            body: None,
            headers: vec![
                parse_header("Authorization: Bearer sk-1").unwrap(),
                parse_header("X-Tenant: blue").unwrap(),
            ],
        };
        assert_eq!(
            extra.described_headers(),
            ["authorization: ***", "x-tenant: blue"]
        );
    }
}
