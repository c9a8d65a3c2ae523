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

/// The daily simple returns an answer can stand on (docs §15.4): from −1
/// (−100 %, all is lost; a long position can lose no more) to +10
/// (+1,000 % in a day). Outside it a drawdown passes 100 % or a variance
/// overflows to a null.
pub const RETURN_RANGE: (f64, f64) = (-1.0, 10.0);

/// Checks inline daily returns `{name: [r, …]}` given as `key`: each
/// value finite and within [`RETURN_RANGE`], named by series and index.
pub fn check_returns<'a>(
    key: &str,
    series: impl IntoIterator<Item = (&'a str, &'a [f64])>,
) -> Result<(), ToolError> {
    let (lo, hi) = RETURN_RANGE;
    for (name, values) in series {
        if let Some((i, r)) = values
            .iter()
            .enumerate()
            .find(|(_, r)| !(lo..=hi).contains(*r))
        {
            return Err(ToolError::InvalidArguments(format!(
                "'{key}': {name}[{i}] = {r:?} is not a daily simple return from {lo} (−100 %) to {hi} (+1,000 %); give fractions (0.01 for 1 %)"
            )));
        }
    }
    Ok(())
}

/// The largest magnitude an inline value (a price, a factor, a regressor)
/// may have: its squares and sums stay finite (docs §16.1, §17.2).
pub const MAX_VALUE: f64 = 1e12;

/// Checks inline values `{name: [x, …]}` given as `key`: each finite and
/// within ±[`MAX_VALUE`].
pub fn check_values<'a>(
    key: &str,
    series: impl IntoIterator<Item = (&'a str, &'a [f64])>,
) -> Result<(), ToolError> {
    for (name, values) in series {
        if let Some((i, x)) = values
            .iter()
            .enumerate()
            .find(|(_, x)| !(x.is_finite() && x.abs() <= MAX_VALUE))
        {
            return Err(ToolError::InvalidArguments(format!(
                "'{key}': {name}[{i}] = {x:?} is not a finite number within ±1e12"
            )));
        }
    }
    Ok(())
}

/// A rate a year (a risk-free rate, a benchmark), as a fraction: from −1
/// to 1 (docs §15.3).
pub fn rate(key: &str, value: f64) -> Result<f64, ToolError> {
    if (-1.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(ToolError::InvalidArguments(format!(
            "'{key}' must be a rate a year from -1 to 1 (0.04 for 4 %), got {value}"
        )))
    }
}
