//! Reading a tool's JSON arguments, with the same messages for every tool.

use serde_json::Value;

use crate::tools::ToolError;

/// A string argument, as given (may be empty).
pub fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArguments(format!("'{key}' must be a string")))
}

/// A string argument, trimmed, that must not be empty.
pub fn nonempty<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::InvalidArguments(format!("'{key}' must be a non-empty string")))
}

/// An optional non-negative integer (absent or null → `None`).
pub fn opt_usize(args: &Value, key: &str) -> Result<Option<usize>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                ToolError::InvalidArguments(format!("'{key}' must be a non-negative integer"))
            }),
    }
}
