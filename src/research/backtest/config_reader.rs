//! Reading a JSON config object with typed checks that collect every problem
//! as a [`ConfigIssue`] (key path, machine code, what to do), with "did you
//! mean" suggestions. `config` (the §7.1 contract), `rules` and `strategies`
//! all read their parts of `config.json` through it; it uses none of them.

use std::fmt;

use serde_json::{Map, Value};

/// "Did you mean": shared with `config.toml`'s checks.
pub use crate::text::suggest;

/// One thing wrong with the config: where, a short machine code, and what
/// to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The key path, e.g. `strategy.params.fast`.
    pub key: String,
    pub code: &'static str,
    pub message: String,
}

impl ConfigIssue {
    pub(crate) fn new(
        key: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ConfigIssue {
            key: key.into(),
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.key, self.message)
    }
}

/// A JSON value's kind, for messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Reads optional typed values off an object, collecting issues.
pub struct Reader<'a> {
    pub obj: &'a Map<String, Value>,
    pub prefix: String,
    pub issues: Vec<ConfigIssue>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(obj: &'a Map<String, Value>, prefix: &str) -> Self {
        Reader {
            obj,
            prefix: prefix.to_string(),
            issues: Vec::new(),
        }
    }

    pub(crate) fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn issue(&mut self, key: &str, code: &'static str, message: impl Into<String>) {
        let path = self.path(key);
        self.issues.push(ConfigIssue::new(path, code, message));
    }

    /// A finite number within `[min, max]` (`min_open`: strictly above min).
    pub(crate) fn number(&mut self, key: &str, min: f64, min_open: bool, max: f64) -> Option<f64> {
        let v = self.get(key)?;
        let Some(x) = v.as_f64() else {
            self.issue(
                key,
                "invalid_value",
                format!("must be a number, got {}", kind(v)),
            );
            return None;
        };
        let below = if min_open { x <= min } else { x < min };
        if !x.is_finite() || below || x > max {
            let lo = if min_open { ">" } else { "≥" };
            let range = if max.is_finite() {
                format!("{lo} {min} and ≤ {max}")
            } else {
                format!("{lo} {min}")
            };
            self.issue(
                key,
                "invalid_value",
                format!("must be a finite number {range}, got {x}"),
            );
            return None;
        }
        Some(x)
    }

    /// An integer within `[min, max]`.
    pub(crate) fn integer(&mut self, key: &str, min: u64, max: u64) -> Option<u64> {
        let v = self.get(key)?;
        let n = v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        });
        match n {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.issue(
                    key,
                    "invalid_value",
                    format!("must be an integer from {min} to {max}, got {v}"),
                );
                None
            }
        }
    }

    pub(crate) fn boolean(&mut self, key: &str) -> Option<bool> {
        let v = self.get(key)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.issue(
                    key,
                    "invalid_value",
                    format!("must be true or false, got {}", kind(v)),
                );
                None
            }
        }
    }

    pub(crate) fn string(&mut self, key: &str) -> Option<&'a str> {
        let v = self.get(key)?;
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => Some(s.trim()),
            Some(_) => {
                self.issue(key, "invalid_value", "must not be blank");
                None
            }
            None => {
                self.issue(
                    key,
                    "invalid_value",
                    format!("must be a string, got {}", kind(v)),
                );
                None
            }
        }
    }

    /// Refuses keys outside `known` (with a suggestion when close).
    pub(crate) fn only(&mut self, known: &[&str]) {
        let unknown: Vec<String> = self
            .obj
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in unknown {
            let hint = match suggest(&k, known) {
                Some(s) => format!("did you mean '{s}'? "),
                None => String::new(),
            };
            self.issue(
                &k,
                "unknown_key",
                format!("unknown key; {hint}valid keys: {}", known.join(", ")),
            );
        }
    }
}
