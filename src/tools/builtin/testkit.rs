//! Test helpers shared by the built-in tools' tests, through the manifest:
//! a tool is called as the agent's registry holds it.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::{MANIFEST, MemoryEnv, ToolEnv, register_entries};
use crate::memory::{MemoryFlags, MemoryStore, SkillSet};
use crate::research::data::DataConfig;
use crate::tools::Registry;

/// What the tools are built from in a test: the offline market, with the
/// memory tools' store under `dir` when `memory`.
pub(crate) fn env(dir: &Path, memory: bool) -> ToolEnv {
    let mut env = ToolEnv::new(DataConfig::offline());
    if memory {
        let store = MemoryStore::open(dir.join("mem"), MemoryFlags::default()).unwrap();
        env.memory = Some(MemoryEnv {
            store: Arc::new(store),
            skills: Arc::new(SkillSet::load(None)),
            sessions_dir: dir.join("sessions"),
        });
    }
    env
}

/// Every tool of the manifest, built as in [`env`].
pub(crate) fn registry(dir: &Path, memory: bool) -> Registry {
    let mut r = Registry::new();
    register_entries(&mut r, MANIFEST, &env(dir, memory)).unwrap();
    r
}

/// Calls the built-in `name` with its run dir and workspace under `dir`;
/// its structured output, or the error's message.
pub(crate) async fn call_in(dir: &Path, name: &str, args: Value) -> Result<Value, String> {
    let ctx = crate::tools::test_context(dir.join("run"), dir.join("ws"));
    let r = registry(dir, false);
    let tool = r.get(name).unwrap();
    tool.call_with_output(args, &ctx)
        .await
        .map(|o| o.output.unwrap())
        .map_err(|e| e.to_string())
}

/// [`call_in`] a fresh temp dir.
pub(crate) async fn call(name: &str, args: Value) -> Result<Value, String> {
    let dir = tempfile::tempdir().unwrap();
    call_in(dir.path(), name, args).await
}

/// Keywords the function-calling formats of some providers refuse, found
/// in `v` (at the path `at`).
pub(crate) fn refused_keywords(v: &Value, at: &str, found: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            // Keys of `properties` are argument names, not keywords.
            let names = at.ends_with("/properties");
            for (k, child) in m {
                let null_type = k == "type"
                    && child
                        .as_array()
                        .is_some_and(|t| t.contains(&Value::from("null")));
                let refused = ["$schema", "$defs", "definitions", "$ref", "title", "format"]
                    .contains(&k.as_str())
                    || null_type;
                if refused && !names {
                    found.push(format!("{at}/{k}"));
                }
                refused_keywords(child, &format!("{at}/{k}"), found);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refused_keywords(x, at, found)),
        _ => {}
    }
}

/// A schema every provider takes: an object with properties and required
/// keys, no references, titles, formats or null types.
pub(crate) fn assert_plain_object(schema: &Value) {
    assert_eq!(schema["type"], "object", "{schema}");
    assert!(schema["properties"].is_object(), "{schema}");
    assert!(schema["required"].is_array(), "{schema}");
    let mut found = Vec::new();
    refused_keywords(schema, "", &mut found);
    assert!(found.is_empty(), "{found:?} in {schema}");
}

/// Every built-in tool's schema, as the registry offers it.
#[test]
fn every_manifest_tool_offers_a_plain_object_schema() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path(), true);
    assert_eq!(r.len(), MANIFEST.len());
    for spec in r.specs().iter() {
        assert_plain_object(&spec.parameters);
    }
}
