//! The set of tools offered to the model, in registration order.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::Tool;
use crate::model::ToolSpec;

/// The set of tools, each with its function schema, built once when it
/// is registered (docs §2.1): a request reads them, never rebuilds them.
#[derive(Default, Clone)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<String, usize>,
    /// Each tool's spec, full and lean ([`Tool::lean_properties`]), in
    /// registration order.
    full: Vec<ToolSpec>,
    lean_specs: Vec<ToolSpec>,
    /// What [`Registry::specs`] hands out, made on first use.
    offered: OnceLock<Arc<[ToolSpec]>>,
    /// Offer each tool's lean schema ([`Tool::lean_properties`]).
    lean: bool,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("a tool named '{0}' is already registered")]
pub struct DuplicateTool(pub String);

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), DuplicateTool> {
        let name = tool.name().to_string();
        if self.by_name.contains_key(&name) {
            return Err(DuplicateTool(name));
        }
        let full = ToolSpec {
            name: name.clone(),
            description: tool.description().to_string(),
            parameters: tool.parameters(),
        };
        let mut lean = full.clone();
        if let Some(keep) = tool.lean_properties() {
            keep_properties(&mut lean.parameters, keep);
        }
        if let Some(short) = tool.lean_description() {
            lean.description = short.to_string();
        }
        self.by_name.insert(name, self.tools.len());
        self.tools.push(tool);
        self.full.push(full);
        self.lean_specs.push(lean);
        self.offered = OnceLock::new();
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).and_then(|i| self.tools.get(*i))
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// The named tools, in the order named (docs §4.7), and the names
    /// that are not registered.
    pub fn subset(&self, names: &[String]) -> (Registry, Vec<String>) {
        let mut out = Registry {
            lean: self.lean,
            ..Registry::new()
        };
        let mut missing = Vec::new();
        for name in names {
            let name = name.trim();
            match self.get(name) {
                // A name listed twice is offered once.
                Some(tool) => {
                    let _ = out.register(tool.clone());
                }
                None => missing.push(name.to_string()),
            }
        }
        (out, missing)
    }

    /// The same tools, offered with their lean schemas: a small model
    /// fills in every property it is shown, so the rarely needed ones are
    /// left out of the schema, though still accepted (docs §4.7).
    pub fn leaned(mut self) -> Registry {
        self.lean = true;
        self.offered = OnceLock::new();
        self
    }

    /// Function schemas for the model's `tools` parameter, shared by every
    /// request (a clone is a reference count).
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.offered
            .get_or_init(|| {
                let specs = if self.lean {
                    &self.lean_specs
                } else {
                    &self.full
                };
                Arc::from(specs.as_slice())
            })
            .clone()
    }
}

/// A schema with only the `keep` properties (and of `required`, only those).
fn keep_properties(schema: &mut Value, keep: &[&str]) {
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.retain(|k, _| keep.contains(&k.as_str()));
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|k| k.as_str().is_some_and(|k| keep.contains(&k)));
    }
}

/// Arguments that do not fit a tool's schema.
#[derive(Debug, thiserror::Error)]
pub enum ArgumentError {
    #[error("arguments must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    #[error("missing required argument(s): {0}")]
    Missing(String),
    #[error("argument '{key}' must be of type {expected}, got {got}")]
    WrongType {
        key: String,
        /// The schema's `type`, as JSON (`"integer"`, `["integer","string"]`).
        expected: Value,
        got: &'static str,
    },
}

/// Why a call's arguments were refused before it ran; its message is the
/// `invalid_arguments` error the model reads (docs §2.2).
#[derive(Debug, thiserror::Error)]
pub enum InvalidArguments {
    /// The default check: an object, required keys, top-level types.
    #[error(transparent)]
    Schema(#[from] ArgumentError),
    /// A tool's own, fuller check (an MCP server's schema, docs §13.3).
    #[error(transparent)]
    Own(Box<dyn std::error::Error + Send + Sync>),
}

/// Checks arguments against the parts of a JSON schema that matter for a
/// clear error: an object, required keys present, declared property types.
pub fn check_arguments(schema: &Value, args: &Value) -> Result<(), ArgumentError> {
    let Some(obj) = args.as_object() else {
        return Err(ArgumentError::NotAnObject(type_name(args)));
    };
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        let missing: Vec<&str> = required
            .iter()
            .filter_map(Value::as_str)
            .filter(|k| obj.get(*k).is_none_or(Value::is_null))
            .collect();
        if !missing.is_empty() {
            let named: Vec<String> = missing
                .iter()
                .map(|k| match enum_members(schema, k) {
                    Some(members) => format!("{k} (one of {})", members.join(", ")),
                    None => (*k).to_string(),
                })
                .collect();
            return Err(ArgumentError::Missing(named.join(", ")));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (key, value) in obj {
            let Some(expected) = props.get(key).and_then(|p| p.get("type")) else {
                continue;
            };
            let ok = match expected {
                Value::String(t) => type_matches(t, value),
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|t| type_matches(t, value)),
                _ => true,
            };
            if !ok {
                return Err(ArgumentError::WrongType {
                    key: key.clone(),
                    expected: expected.clone(),
                    got: type_name(value),
                });
            }
        }
    }
    Ok(())
}

/// The string members of property `key`'s `enum`, if it has one.
fn enum_members<'a>(schema: &'a Value, key: &str) -> Option<Vec<&'a str>> {
    let members = schema
        .get("properties")?
        .get(key)?
        .get("enum")?
        .as_array()?;
    let names: Vec<&str> = members.iter().filter_map(Value::as_str).collect();
    (!names.is_empty()).then_some(names)
}

/// A required argument a call left out but gave under another key, moved
/// to its own: `{"type": "engle-granger"}` for a missing `test` whose enum
/// holds `engle_granger`. Small models slip so (measured: Qwen2.5-Coder
/// 1.5B sent stat_test without `test`), and the value leaves no doubt: it
/// names exactly one member of the missing property's enum, spelt in any
/// case with `-` or spaces for `_`, and its key is not one the schema
/// declares. Returns the keys moved, as `(from, to)`.
pub fn mend_arguments(schema: &Value, args: &mut Value) -> Vec<(String, String)> {
    let mut moved = Vec::new();
    let Some(required) = schema.get("required").and_then(Value::as_array) else {
        return moved;
    };
    let declared = schema.get("properties").and_then(Value::as_object);
    for key in required.iter().filter_map(Value::as_str) {
        let Some(obj) = args.as_object() else {
            return moved;
        };
        if obj.get(key).is_some_and(|v| !v.is_null()) {
            continue;
        }
        let Some(members) = enum_members(schema, key) else {
            continue;
        };
        let candidates: Vec<(&String, &str)> = obj
            .iter()
            .filter(|(k, _)| declared.is_none_or(|d| !d.contains_key(k.as_str())))
            .filter_map(|(k, v)| {
                let v = normalise_member(v.as_str()?);
                let hits: Vec<&str> = members.iter().copied().filter(|m| *m == v).collect();
                match hits.as_slice() {
                    [one] => Some((k, *one)),
                    _ => None,
                }
            })
            .collect();
        let [(from, member)] = candidates.as_slice() else {
            continue;
        };
        let (from, member) = ((*from).clone(), (*member).to_string());
        if let Some(obj) = args.as_object_mut() {
            obj.remove(&from);
            obj.insert(key.to_string(), Value::String(member));
            moved.push((from, key.to_string()));
        }
    }
    moved
}

/// An enum value as a small model may spell it: `Engle-Granger` for
/// `engle_granger`.
fn normalise_member(v: &str) -> String {
    v.trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match expected {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_keeps_the_named_order_and_names_the_missing() {
        let reg = crate::tools::builtin::default_registry();
        let names: Vec<String> = ["list_dir", "nope", "read_file", "list_dir"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (sub, missing) = reg.subset(&names);
        assert_eq!(sub.names(), vec!["list_dir", "read_file"]);
        assert_eq!(missing, vec!["nope"]);
    }

    #[test]
    fn argument_checks_name_the_problem() {
        let schema = json!({"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]});
        assert!(check_arguments(&schema, &json!({"path":"a"})).is_ok());
        let e = check_arguments(&schema, &json!({}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("path"), "{e}");
        let e = check_arguments(&schema, &json!({"path":"a","limit":"5"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("limit") && e.contains("string"), "{e}");
        assert!(check_arguments(&schema, &json!([1])).is_err());
    }

    fn test_schema() -> Value {
        json!({"type":"object","properties":{
            "test":{"type":"string","enum":["adf","engle_granger","johansen"]},
            "symbols":{"type":"array"},
            "regression":{"type":"string","enum":["c","ct","n"]}},
            "required":["test"]})
    }

    #[test]
    fn a_missing_enum_argument_names_its_members() {
        let e = check_arguments(&test_schema(), &json!({"symbols":["KO","PEP"]}))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "missing required argument(s): test (one of adf, engle_granger, johansen)"
        );
    }

    #[test]
    fn a_required_enum_value_under_another_key_is_moved_to_its_own() {
        let mut args = json!({"type":"Engle-Granger","symbols":["KO","PEP"]});
        let moved = mend_arguments(&test_schema(), &mut args);
        assert_eq!(moved, vec![("type".to_string(), "test".to_string())]);
        assert_eq!(args, json!({"test":"engle_granger","symbols":["KO","PEP"]}));
        assert!(check_arguments(&test_schema(), &args).is_ok());
    }

    #[test]
    fn mending_leaves_doubt_and_declared_keys_alone() {
        for args in [
            // Two undeclared keys each naming a member: which one is meant?
            json!({"type":"adf","method":"johansen"}),
            // Not a member.
            json!({"type":"cointegration"}),
            // A declared key keeps its meaning.
            json!({"regression":"adf"}),
            // Present already.
            json!({"test":"adf","type":"johansen"}),
        ] {
            let mut mended = args.clone();
            assert!(
                mend_arguments(&test_schema(), &mut mended).is_empty(),
                "{args}"
            );
            assert_eq!(mended, args);
        }
    }
}
