//! A server's tool schemas, checked before the model sees them, and the
//! arguments of a call, checked before the server does (docs §13.3).
//!
//! [`check_schema`] holds an input schema to the JSON Schema meta-schema's
//! structure (drafts 4 to 2020-12 alike): every keyword that takes a schema
//! has one, `type` names known types, `required` lists strings, counts are
//! non-negative integers, and the top level is an object schema. Model
//! providers refuse a request whose tools break these rules, so one bad tool
//! would fail every request; such a tool is skipped instead. A full
//! validator crate (`jsonschema`: a regex engine, a URI resolver, HTTP for
//! remote `$ref`s, over 30 crates) is far more than a structural check and
//! the argument check below need.
//!
//! [`check_arguments`] checks a call's arguments against the (valid) schema:
//! types, `required`, `enum`/`const`, `additionalProperties: false`, nested
//! objects and array items, following local `$ref`s; every problem named
//! by its path, with what the tool takes.

use serde_json::{Map, Value};

/// Nesting deeper than this is refused (a schema is written by hand, and a
/// deep one only costs tokens and stack).
const MAX_DEPTH: usize = 32;
/// Problems named in one argument error.
const MAX_PROBLEMS: usize = 5;

const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];
/// Keywords whose value is one schema.
const ONE_SCHEMA: [&str; 11] = [
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
];
/// Keywords whose value is an object of schemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is a non-empty array of schemas.
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value is a non-negative integer.
const COUNTS: [&str; 8] = [
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
];
/// Keywords whose value is a string.
const STRINGS: [&str; 10] = [
    "$schema",
    "$id",
    "$ref",
    "$anchor",
    "$comment",
    "title",
    "description",
    "pattern",
    "format",
    "contentMediaType",
];
/// Keywords whose value is a boolean.
const BOOLEANS: [&str; 4] = ["uniqueItems", "readOnly", "writeOnly", "deprecated"];

/// Why a tool's input schema was refused: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its input schema is invalid at {path}: {problem}")]
pub struct SchemaError {
    /// A JSON pointer into the schema (`/properties/x/type`); `/` is the top.
    pub path: String,
    pub problem: String,
}

/// Checks a tool's input schema: a valid JSON Schema whose top level
/// describes an object (a tool's arguments are always an object).
pub fn check_schema(schema: &Map<String, Value>) -> Result<(), SchemaError> {
    if let Some(t) = schema.get("type")
        && t != "object"
        && !t
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == "object"))
    {
        return Err(SchemaError {
            path: "/type".into(),
            problem: format!(
                "a tool's arguments are an object, so the top-level `type` must be \"object\", got {}",
                short(t)
            ),
        });
    }
    check_object(schema, "", 0)
}

fn err(path: &str, key: &str, problem: String) -> SchemaError {
    SchemaError {
        path: format!("{path}/{key}"),
        problem,
    }
}

/// A value as quoted in a message, cut short.
fn short(v: &Value) -> String {
    crate::tools::finalize::preview(&v.to_string(), 60)
}

fn check_schema_value(v: &Value, path: &str, depth: usize) -> Result<(), SchemaError> {
    match v {
        Value::Bool(_) => Ok(()),
        Value::Object(o) => check_object(o, path, depth + 1),
        other => Err(SchemaError {
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            problem: format!(
                "a schema must be an object or a boolean, got {}",
                short(other)
            ),
        }),
    }
}

fn check_object(o: &Map<String, Value>, path: &str, depth: usize) -> Result<(), SchemaError> {
    if depth > MAX_DEPTH {
        return Err(SchemaError {
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            problem: format!("nested deeper than {MAX_DEPTH} levels"),
        });
    }
    for (key, v) in o {
        if let Some(problem) = value_problem(key, v) {
            return Err(err(path, key, problem));
        }
        check_subschemas(key, v, path, depth)?;
    }
    Ok(())
}

/// What is wrong with the value of a keyword that takes no schema, if
/// anything. `const`, `default`, `examples` take any value; keywords the
/// meta-schema does not name are annotations it allows.
fn value_problem(k: &str, v: &Value) -> Option<String> {
    let bad = |ok: bool, want: &str| (!ok).then(|| format!("must be {want}, got {}", short(v)));
    match k {
        "type" => type_problem(v),
        "required" => string_list_problem(v),
        "enum" => bad(v.is_array(), "an array"),
        "multipleOf" => bad(v.as_f64().is_some_and(|x| x > 0.0), "a number above 0"),
        "minimum" | "maximum" => bad(v.is_number(), "a number"),
        // A number since draft 6, a boolean in draft 4.
        "exclusiveMinimum" | "exclusiveMaximum" => bad(v.is_number() || v.is_boolean(), "a number"),
        _ if COUNTS.contains(&k) => bad(v.as_u64().is_some(), "a non-negative integer"),
        _ if STRINGS.contains(&k) => bad(v.is_string(), "a string"),
        _ if BOOLEANS.contains(&k) => bad(v.is_boolean(), "true or false"),
        _ => None,
    }
}

/// The schemas inside a keyword that holds some, checked in turn.
fn check_subschemas(k: &str, v: &Value, path: &str, depth: usize) -> Result<(), SchemaError> {
    let at = format!("{path}/{k}");
    match k {
        // Draft 4-7's tuple form, or one schema.
        "items" => match v {
            Value::Array(a) => a
                .iter()
                .enumerate()
                .try_for_each(|(i, s)| check_schema_value(s, &format!("{at}/{i}"), depth)),
            other => check_schema_value(other, &at, depth),
        },
        "dependentRequired" => check_map(v, path, k, |name, deps| {
            string_list_problem(deps).map_or(Ok(()), |p| Err(err(&at, name, p)))
        }),
        "dependencies" => check_map(v, path, k, |name, dep| {
            if dep.is_array() {
                string_list_problem(dep).map_or(Ok(()), |p| Err(err(&at, name, p)))
            } else {
                check_schema_value(dep, &format!("{at}/{name}"), depth)
            }
        }),
        _ if ONE_SCHEMA.contains(&k) => check_schema_value(v, &at, depth),
        _ if SCHEMA_MAPS.contains(&k) => check_map(v, path, k, |name, s| {
            check_schema_value(s, &format!("{at}/{name}"), depth)
        }),
        _ if SCHEMA_LISTS.contains(&k) => match v.as_array() {
            Some(a) if !a.is_empty() => a
                .iter()
                .enumerate()
                .try_for_each(|(i, s)| check_schema_value(s, &format!("{at}/{i}"), depth)),
            _ => Err(err(
                path,
                k,
                format!("must be a non-empty array of schemas, got {}", short(v)),
            )),
        },
        _ => Ok(()),
    }
}

/// What keeps `type` from being a known type name, or a non-empty array of
/// them, if anything. (The meta-schema also wants array entries distinct;
/// a repeat harms no one.)
fn type_problem(v: &Value) -> Option<String> {
    let known = |t: &Value| t.as_str().is_some_and(|s| TYPES.contains(&s));
    match v {
        Value::String(_) if known(v) => None,
        Value::Array(a) if !a.is_empty() && a.iter().all(known) => None,
        _ => Some(format!(
            "must be one of {} or an array of them, got {}",
            TYPES.join(", "),
            short(v)
        )),
    }
}

/// What keeps `v` from being an array of strings, if anything.
fn string_list_problem(v: &Value) -> Option<String> {
    let Some(a) = v.as_array() else {
        return Some(format!("must be an array of strings, got {}", short(v)));
    };
    a.iter()
        .find(|x| !x.is_string())
        .map(|bad| format!("must be an array of strings, but holds {}", short(bad)))
}

/// Keyword `k` at `path`: an object whose every value passes `each`.
fn check_map(
    v: &Value,
    path: &str,
    k: &str,
    mut each: impl FnMut(&str, &Value) -> Result<(), SchemaError>,
) -> Result<(), SchemaError> {
    let Some(o) = v.as_object() else {
        return Err(err(path, k, format!("must be an object, got {}", short(v))));
    };
    o.iter().try_for_each(|(name, s)| each(name, s))
}

/// Arguments that do not fit a tool's schema: each problem by its path (at
/// most five named) and what the tool takes, so the model can correct the
/// call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentProblems {
    /// `path: problem`, at most [`MAX_PROBLEMS`].
    pub problems: Vec<String>,
    /// How many more were found.
    pub more: usize,
    /// The tool's arguments in brief; empty when it declares none.
    pub takes: String,
}

impl std::fmt::Display for ArgumentProblems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problems.join("; "))?;
        if self.more > 0 {
            write!(f, "; and {} more", self.more)?;
        }
        if !self.takes.is_empty() {
            write!(f, ". The tool takes: {}", self.takes)?;
        }
        Ok(())
    }
}

impl std::error::Error for ArgumentProblems {}

/// Checks `args` against a tool's (valid) input schema.
pub fn check_arguments(schema: &Value, args: &Value) -> Result<(), ArgumentProblems> {
    let mut problems = Vec::new();
    Checker {
        root: schema,
        problems: &mut problems,
    }
    .value(schema, args, "", 0);
    if problems.is_empty() {
        return Ok(());
    }
    let more = problems.len().saturating_sub(MAX_PROBLEMS);
    problems.truncate(MAX_PROBLEMS);
    Err(ArgumentProblems {
        problems,
        more,
        takes: signature(schema),
    })
}

struct Checker<'a> {
    root: &'a Value,
    problems: &'a mut Vec<String>,
}

impl<'a> Checker<'a> {
    fn push(&mut self, path: &str, problem: String) {
        if self.problems.len() <= MAX_PROBLEMS {
            let at = if path.is_empty() {
                "the arguments"
            } else {
                path
            };
            self.problems.push(format!("{at}: {problem}"));
        }
    }

    /// A local `$ref` (`#/$defs/X`, `#/definitions/X`), followed.
    fn resolve<'s>(&self, schema: &'s Value) -> Option<&'s Value>
    where
        'a: 's,
    {
        let r = schema.get("$ref")?.as_str()?;
        let pointer = r.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn value(&mut self, schema: &Value, v: &Value, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let schema = match self.resolve(schema) {
            Some(target) => target,
            None => schema,
        };
        if schema == &Value::Bool(false) {
            self.push(path, "is not allowed here".into());
            return;
        }
        let Some(s) = schema.as_object() else { return };
        if let Some(t) = s.get("type")
            && !type_allows(t, v)
        {
            let want = match t {
                Value::Array(a) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" or "),
                other => other.as_str().unwrap_or("?").to_string(),
            };
            self.push(path, format!("must be {}, got {}", article(&want), kind(v)));
            return;
        }
        if let Some(options) = s.get("enum").and_then(Value::as_array)
            && !options.contains(v)
        {
            let listed: Vec<String> = options.iter().take(10).map(|o| o.to_string()).collect();
            self.push(
                path,
                format!("must be one of {}, got {}", listed.join(", "), short(v)),
            );
            return;
        }
        if let Some(c) = s.get("const")
            && c != v
        {
            self.push(path, format!("must be {}, got {}", short(c), short(v)));
            return;
        }
        match v {
            Value::Object(o) => self.object(s, o, path, depth),
            Value::Array(items) => {
                if let Some(item) = s.get("items").filter(|i| !i.is_array()) {
                    for (i, x) in items.iter().enumerate() {
                        self.value(item, x, &format!("{path}[{i}]"), depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, s: &Map<String, Value>, o: &Map<String, Value>, path: &str, depth: usize) {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(required) = s.get("required").and_then(Value::as_array) {
            let missing: Vec<&str> = required
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| !o.contains_key(*k))
                .collect();
            if !missing.is_empty() {
                self.push(path, format!("missing required {}", missing.join(", ")));
            }
        }
        let extra = s.get("additionalProperties");
        for (key, value) in o {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match props.and_then(|p| p.get(key)) {
                Some(p) => self.value(p, value, &at, depth + 1),
                None if extra == Some(&Value::Bool(false)) => {
                    let known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let hint = crate::text::suggest(key, &known)
                        .map(|k| format!("; did you mean '{k}'?"))
                        .unwrap_or_default();
                    self.push(&at, format!("is not an argument of this tool{hint}"));
                }
                None => {
                    if let Some(extra) = extra.filter(|e| e.is_object()) {
                        self.value(extra, value, &at, depth + 1);
                    }
                }
            }
        }
    }
}

fn type_allows(t: &Value, v: &Value) -> bool {
    let one = |name: &str| match name {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        // 3.0 is an integer to JSON Schema.
        "integer" => v.as_f64().is_some_and(|x| x.fract() == 0.0),
        _ => true,
    };
    match t {
        Value::String(name) => one(name),
        Value::Array(names) => names.iter().filter_map(Value::as_str).any(one),
        _ => true,
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

fn article(word: &str) -> String {
    match word.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {word}"),
        Some(_) if word == "null" => word.to_string(),
        _ => format!("a {word}"),
    }
}

/// `mode (string: "fast"|"slow", required), depth (integer)`: the top-level
/// arguments as the error repeats them.
fn signature(schema: &Value) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return String::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut parts: Vec<String> = props
        .iter()
        .take(20)
        .map(|(name, p)| {
            let mut what = match p.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".into(),
            };
            if let Some(options) = p.get("enum").and_then(Value::as_array) {
                let listed: Vec<String> = options.iter().take(8).map(|o| o.to_string()).collect();
                what.push_str(&format!(": {}", listed.join("|")));
            }
            if required.contains(&name.as_str()) {
                what.push_str(", required");
            }
            format!("{name} ({what})")
        })
        .collect();
    if props.len() > 20 {
        parts.push(format!("and {} more", props.len() - 20));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value) -> Result<(), SchemaError> {
        check_schema(v.as_object().unwrap())
    }

    #[test]
    fn valid_schemas_pass() {
        for ok in [
            json!({}),
            json!({"type": "object", "properties": {}}),
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": true},
                   "required": ["a"], "additionalProperties": false,
                   "$defs": {"X": {"type": "integer", "minimum": 0}},
                   "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({"type": "object", "properties": {"xs": {"type": "array", "items": [{"type": "string"}], "minItems": 1}},
                   "dependencies": {"xs": ["a"], "a": {"required": ["xs"]}}}),
            json!({"properties": {"n": {"exclusiveMinimum": true, "minimum": 1}}}),
        ] {
            assert_eq!(check(ok.clone()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn invalid_schemas_name_the_place_and_the_problem() {
        let cases = [
            (json!({"type": 42, "properties": "nope"}), "/type"),
            (
                json!({"type": "object", "properties": "nope"}),
                "/properties",
            ),
            (json!({"type": "string"}), "/type"),
            (
                json!({"properties": {"a": {"type": "strnig"}}}),
                "/properties/a/type",
            ),
            (json!({"properties": {"a": 5}}), "/properties/a"),
            (json!({"required": "a"}), "/required"),
            (json!({"required": ["a", 1]}), "/required"),
            (
                json!({"properties": {"a": {"type": "array", "items": {"type": 7}}}}),
                "/properties/a/items/type",
            ),
            (json!({"anyOf": []}), "/anyOf"),
            (
                json!({"properties": {"a": {"minLength": -1}}}),
                "/properties/a/minLength",
            ),
            (
                json!({"properties": {"a": {"type": ["string", 3]}}}),
                "/properties/a/type",
            ),
            (
                json!({"dependentRequired": {"a": "b"}}),
                "/dependentRequired/a",
            ),
        ];
        for (schema, path) in cases {
            let e = check(schema.clone()).expect_err(&schema.to_string());
            assert_eq!(e.path, path, "{schema}: {e}");
        }
        let e = check(json!({"type": 42})).unwrap_err().to_string();
        assert!(e.contains("got 42") && e.contains("object"), "{e}");
        let mut deep = json!({"type": "object"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        assert!(check(deep).unwrap_err().problem.contains("deeper"));
    }

    #[test]
    fn arguments_are_checked_deeply_and_the_error_says_what_the_tool_takes() {
        let schema = json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "depth": {"type": "integer"},
                "filters": {"type": "array", "items": {"$ref": "#/$defs/Filter"}}
            },
            "required": ["mode"],
            "additionalProperties": false,
            "$defs": {"Filter": {"type": "object", "properties": {"op": {"type": "string"}}, "required": ["op"]}}
        });
        assert_eq!(
            check_arguments(&schema, &json!({"mode": "fast", "depth": 3.0})),
            Ok(())
        );
        let e = check_arguments(&schema, &json!({"mode": "medium"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mode: must be one of \"fast\", \"slow\", got \"medium\""),
            "{e}"
        );
        assert!(e.contains("The tool takes: mode (string: \"fast\"|\"slow\", required), depth (integer), filters (array)"), "{e}");
        let e = check_arguments(&schema, &json!({"mdoe": "fast"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing required mode"), "{e}");
        assert!(
            e.contains("mdoe: is not an argument of this tool; did you mean 'mode'?"),
            "{e}"
        );
        let e = check_arguments(
            &schema,
            &json!({"mode": "fast", "depth": "3", "filters": [{"op": 1}, {}]}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("depth: must be an integer, got a string"), "{e}");
        assert!(
            e.contains("filters[0].op: must be a string, got a number"),
            "{e}"
        );
        assert!(e.contains("filters[1]: missing required op"), "{e}");
        let e = check_arguments(&schema, &json!([1]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("the arguments: must be an object, got an array"),
            "{e}"
        );
    }
}
