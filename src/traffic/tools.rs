//! Tool definitions, as requests offer them (`--tools FILE`, a dataset row's `tools`, BFCL's
//! `function`): read once, checked, and written in OpenAI's chat shape, which every API's
//! request is made from.

use serde_json::{json, Value};

/// A JSON array of tool definitions (`--tools FILE`, a dataset row's `tools`): OpenAI's
/// shape, or a bare function (`{"name","description","parameters"}`, BFCL's `function`
/// entries), each made OpenAI's. BFCL's `"type": "dict"` parameters become `"object"`.
pub fn parse_tools(text: &str) -> Result<Vec<Value>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "not JSON ({}); write a JSON array of tool definitions",
            crate::util::one_line(&e.to_string())
        )
    })?;
    tool_definitions(v)
}

/// `parse_tools` for a value already read.
pub fn tool_definitions(v: Value) -> Result<Vec<Value>, String> {
    let Value::Array(items) = v else {
        return Err(
            "not a JSON array (write [{\"type\":\"function\",\"function\":{…}}, …])".into(),
        );
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let function = match item.get("function") {
            Some(f) if item.get("type").and_then(Value::as_str) == Some("function") => f.clone(),
            _ if item.get("name").is_some() => item,
            _ => {
                return Err(format!(
                    "tool {i}: neither {{\"type\":\"function\",\"function\":{{…}}}} nor a function with a name"
                ))
            }
        };
        let Some(name) = function.get("name").and_then(Value::as_str) else {
            return Err(format!("tool {i}: the function has no name"));
        };
        if name.trim().is_empty() {
            return Err(format!("tool {i}: the function's name is empty"));
        }
        let mut function = function;
        if let Some(p) = function.get_mut("parameters") {
            dict_to_object(p);
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(out)
}

/// BFCL writes JSON Schema's `object` as `dict`; servers validate the schema.
fn dict_to_object(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("dict") {
                map.insert("type".into(), json!("object"));
            }
            for child in map.values_mut() {
                dict_to_object(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(dict_to_object),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tool_files_take_openai_and_bfcl_shapes() {
        let openai = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]"#;
        let t = parse_tools(openai).unwrap();
        assert_eq!(t[0]["function"]["name"], "get_weather");
        let bfcl = r#"[{"name":"calc","description":"d","parameters":{"type":"dict","properties":{"x":{"type":"integer"}}}}]"#;
        let t = parse_tools(bfcl).unwrap();
        assert_eq!(t[0]["type"], "function");
        assert_eq!(t[0]["function"]["parameters"]["type"], "object");
        assert!(parse_tools("{not json")
            .unwrap_err()
            .starts_with("not JSON"));
        assert!(parse_tools(r#"{"name":"x"}"#)
            .unwrap_err()
            .contains("array"));
        assert!(parse_tools(r#"[{"description":"no name"}]"#)
            .unwrap_err()
            .contains("tool 0"));
    }
}
