//! Harmless slips in a call's arguments, put right before the call is
//! checked (docs §2.2.1). A small model writes `"params": "{\"period\":
//! 14}"` for an object, `"limit": "5"` for a number or `"start": null` for
//! an argument it means to leave out; the schema check would refuse each.
//! Each repair is said in the result (`argument_warnings`), so the model
//! learns the right form; anything that is not a clear slip is left for
//! the check to refuse with its own message.

use serde_json::{Value, json};

use crate::llm::text_calls::repair;
use crate::tools::registry::mend_arguments;

/// Arguments put right, and what was changed.
#[derive(Clone, Debug, PartialEq)]
pub struct Coerced {
    pub arguments: Value,
    pub warnings: Vec<String>,
}

/// Puts right what a schema makes clear in `args` (a JSON text); `None`
/// when nothing needed it or the text is not a JSON object.
pub fn coerce(schema: &Value, args: &str) -> Option<Coerced> {
    let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(args.trim()) else {
        return None;
    };
    let props = schema.get("properties").and_then(Value::as_object)?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut warnings = Vec::new();
    let mut changed = false;
    let keys: Vec<String> = obj.keys().cloned().collect();
    for key in keys {
        let Some(types) = props.get(&key).and_then(|p| p.get("type")).map(types_of) else {
            continue;
        };
        let optional = !required.contains(&key.as_str());
        let Some(value) = obj.get(&key).cloned() else {
            continue;
        };
        if value.is_null() && optional && !types.contains(&"null") {
            // "Not given", written out: absent means the default.
            obj.remove(&key);
            changed = true;
            continue;
        }
        if types.iter().any(|t| matches_type(t, &value)) {
            continue;
        }
        match fix(&types, &value) {
            Some(fixed) => {
                warnings.push(format!(
                    "`{key}` was sent as {}; read as {}",
                    kind(&value),
                    preview(&fixed)
                ));
                obj.insert(key, fixed);
                changed = true;
            }
            None if optional && types.contains(&"object") => {
                warnings.push(format!(
                    "`{key}` must be an object; {} was left out",
                    preview(&value)
                ));
                obj.remove(&key);
                changed = true;
            }
            None => {}
        }
    }
    let mut arguments = Value::Object(obj);
    for (from, to) in mend_arguments(schema, &mut arguments) {
        let value = arguments.get(&to).map(preview).unwrap_or_default();
        warnings.push(format!("`{from}` was read as `{to}`: {value}"));
        changed = true;
    }
    changed.then_some(Coerced {
        arguments,
        warnings,
    })
}

/// Adds the warnings to a result the model sees: as `argument_warnings`
/// of a JSON object, else as a line after the text.
pub fn with_warnings(content: &str, warnings: &[String]) -> String {
    if warnings.is_empty() {
        return content.to_string();
    }
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(mut o)) => {
            // The tool's own warnings (if any) follow the loop's.
            let mut all: Vec<Value> = warnings.iter().map(|w| json!(w)).collect();
            if let Some(Value::Array(own)) = o.remove("argument_warnings") {
                all.extend(own);
            }
            o.insert("argument_warnings".into(), Value::Array(all));
            Value::Object(o).to_string()
        }
        _ => format!("{content}\n[argument warnings: {}]", warnings.join("; ")),
    }
}

fn types_of(t: &Value) -> Vec<&str> {
    match t {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn matches_type(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// The value in the first of `types` it clearly stands for.
fn fix(types: &[&str], v: &Value) -> Option<Value> {
    types.iter().find_map(|t| match (*t, v) {
        ("object", Value::String(s)) => parse_lenient(s).filter(Value::is_object),
        ("array", Value::String(s)) => parse_lenient(s).filter(Value::is_array).or_else(|| {
            let parts: Vec<Value> = s
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| json!(p))
                .collect();
            (!parts.is_empty()).then_some(Value::Array(parts))
        }),
        ("array", v @ (Value::Number(_) | Value::Bool(_))) => Some(json!([v])),
        ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(|n| json!(n)),
        ("integer", Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
            .map(|f| json!(f as i64)),
        ("number", Value::String(s)) => s
            .trim()
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && !s.contains('%'))
            .map(|f| json!(f)),
        ("boolean", Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(json!(true)),
            "false" | "no" => Some(json!(false)),
            _ => None,
        },
        ("string", Value::Number(n)) => Some(json!(n.to_string())),
        _ => None,
    })
}

fn parse_lenient(s: &str) -> Option<Value> {
    let s = s.trim();
    serde_json::from_str(s)
        .ok()
        .or_else(|| serde_json::from_str(&repair(s).0).ok())
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

fn preview(v: &Value) -> String {
    crate::text::one_line(&v.to_string(), 80)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "symbol": {"type": "string"},
            "params": {"type": "object"},
            "tail": {"type": "integer"},
            "rate": {"type": "number"},
            "recursive": {"type": "boolean"},
            "symbols": {"type": "array", "items": {"type": "string"}},
            "offset": {"type": ["integer", "string"]}
        }, "required": ["symbol"]})
    }

    #[test]
    fn clear_slips_are_put_right_with_a_warning() {
        let c = coerce(
            &schema(),
            r#"{"symbol": "AAPL", "params": "{'period': 14}", "tail": "5", "rate": "0.001", "recursive": "false", "symbols": "AAPL, MSFT", "start": null, "offset": "3"}"#,
        )
        .unwrap();
        assert_eq!(
            c.arguments,
            json!({"symbol": "AAPL", "params": {"period": 14}, "tail": 5, "rate": 0.001,
                   "recursive": false, "symbols": ["AAPL", "MSFT"], "start": null, "offset": "3"})
        );
        assert_eq!(c.warnings.len(), 5, "{:?}", c.warnings);
        assert!(
            c.warnings[0].starts_with("`params` was sent as a string; read as {\"period\":14}"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn a_required_choice_sent_under_another_key_is_read_with_a_warning() {
        let schema = json!({"type": "object", "properties": {
            "test": {"type": "string", "enum": ["adf", "engle_granger", "johansen"]},
            "symbols": {"type": "array", "items": {"type": "string"}}
        }, "required": ["test"]});
        let c = coerce(
            &schema,
            r#"{"test_type": "Engle-Granger", "symbols": "KO, PEP"}"#,
        )
        .unwrap();
        assert_eq!(
            c.arguments,
            json!({"test": "engle_granger", "symbols": ["KO", "PEP"]})
        );
        assert_eq!(
            c.warnings,
            vec![
                "`symbols` was sent as a string; read as [\"KO\",\"PEP\"]",
                "`test_type` was read as `test`: \"engle_granger\""
            ]
        );
    }

    #[test]
    fn a_string_for_an_optional_object_that_is_not_one_is_left_out() {
        let c = coerce(
            &schema(),
            r#"{"symbol": "AAPL", "params": "period 14", "tail": null}"#,
        )
        .unwrap();
        assert_eq!(c.arguments, json!({"symbol": "AAPL"}));
        assert_eq!(
            c.warnings,
            vec!["`params` must be an object; \"period 14\" was left out"]
        );
    }

    #[test]
    fn right_arguments_and_real_errors_are_left_alone() {
        assert_eq!(coerce(&schema(), r#"{"symbol": "AAPL", "tail": 5}"#), None);
        assert_eq!(
            coerce(&schema(), r#"{"symbol": 5, "rate": "cheap"}"#).map(|c| c.arguments),
            Some(json!({"symbol": "5", "rate": "cheap"}))
        );
        assert_eq!(coerce(&schema(), "not json"), None);
        assert_eq!(
            coerce(&schema(), r#"{"rate": "12%"}"#),
            None,
            "a percent is not a slip to guess at"
        );
    }

    #[test]
    fn warnings_join_the_result() {
        let w = vec!["`tail` was sent as a string; read as 5".to_string()];
        let v: Value = serde_json::from_str(&with_warnings(r#"{"status":"ok"}"#, &w)).unwrap();
        assert_eq!(v["argument_warnings"], json!(w));
        let v: Value =
            serde_json::from_str(&with_warnings(r#"{"argument_warnings":["own"]}"#, &w)).unwrap();
        assert_eq!(v["argument_warnings"], json!([w[0], "own"]));
        assert!(
            with_warnings("plain", &w)
                .ends_with("[argument warnings: `tail` was sent as a string; read as 5]")
        );
        assert_eq!(with_warnings("x", &[]), "x");
    }
}
