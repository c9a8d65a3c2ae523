//! The `compact` tool (docs §2.2 step 1, §3.4): the agent's own tool,
//! which only answers; the loop, which watches for its name, compacts.

use schemars::JsonSchema;
use std::time::Duration;

use serde::Serialize;

use super::{Builtin, ToolEnv};
use crate::model::contract::CompactArgs;
use crate::model::names;
use crate::tools::{Caps, ToolContext, ToolError, TypedTool};

/// The `compact` tool (L4): the model asks for a compaction, optionally with
/// a focus topic. It answers at once; the loop compacts after the
/// iteration's other tools (docs §2.2 step 1).
pub struct CompactTool;

/// What `compact` answers at once; the compaction itself follows.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CompactOutput {
    status: &'static str,
    message: &'static str,
}

impl TypedTool for CompactTool {
    type Args = CompactArgs;
    type Output = CompactOutput;

    const NAME: &'static str = names::COMPACT;
    const CAPS: Caps = Caps::READ_ONLY.planner();
    fn description(&self) -> &str {
        "Compress the conversation so far into a structured summary when the context is long; pass focus_topic to keep one topic in detail."
    }
    fn repeatable(&self) -> bool {
        true
    }
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(5))
    }
    async fn run(
        &self,
        _args: CompactArgs,
        _ctx: &ToolContext,
    ) -> Result<CompactOutput, ToolError> {
        Ok(CompactOutput {
            status: "ok",
            message: "Compressing...",
        })
    }
}

impl Builtin for CompactTool {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(CompactTool)
    }
}

#[cfg(test)]
mod tool_tests {
    use serde_json::json;

    use super::*;
    use crate::tools::Tool;

    /// The schema generated from `CompactArgs` is the one written by hand
    /// before, and a bad argument keeps the scheduler's wording.
    #[tokio::test]
    async fn compact_tool_schema_and_argument_errors_are_unchanged() {
        assert_eq!(
            Tool::parameters(&CompactTool),
            json!({"type": "object", "properties": {
                "focus_topic": {"type": "string", "description": "Topic to preserve in detail (optional)"}
            }, "required": []})
        );
        let dir = tempfile::tempdir().unwrap();
        let ctx = crate::tools::test_context(dir.path().join("run"), dir.path().join("ws"));
        let err = CompactTool
            .call(json!({"focus_topic": 5}), &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid arguments: argument 'focus_topic' must be of type \"string\", got number"
        );
        let reply = CompactTool
            .call_with_output(json!({"focus_topic": "fees"}), &ctx)
            .await
            .unwrap();
        assert_eq!(reply.text, r#"{"status":"ok","message":"Compressing..."}"#);
    }
}
