//! STUB: to be completed (spec §2.8).
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    Arguments,
    Result,
}

pub fn redact_text(text: &str) -> String {
    text.to_string()
}

pub fn redact_value(value: &Value, _sink: Sink) -> Value {
    value.clone()
}

pub fn redact_tool_result(raw: &str) -> String {
    raw.to_string()
}
