//! Checks on typed tool arguments that their schema cannot express, with
//! the same messages for every tool. The schema check (required keys,
//! types) runs before these: see [`crate::tools::typed::parse_args`].

use crate::tools::ToolError;

/// A string argument, trimmed, that must not be empty.
pub fn nonempty<'a>(value: &'a str, key: &str) -> Result<&'a str, ToolError> {
    Some(value.trim())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::InvalidArguments(format!("'{key}' must be a non-empty string")))
}

/// An optional non-negative integer.
pub fn opt_usize(value: Option<i64>, key: &str) -> Result<Option<usize>, ToolError> {
    match value {
        None => Ok(None),
        Some(n) => usize::try_from(n).map(Some).map_err(|_| {
            ToolError::InvalidArguments(format!("'{key}' must be a non-negative integer"))
        }),
    }
}
