//! A throwaway tool for the test that a new tool is one module plus one
//! manifest line (docs/extending.md): this module is the whole tool; the
//! test adds its line to the manifest and sees it offered to the model,
//! served over MCP, and missing from the docs' table.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, ToolEnv};
use crate::tools::{Caps, ToolContext, ToolError, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ProbeArgs {
    /// The text to echo
    text: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProbeOutput {
    status: &'static str,
    echo: String,
}

pub(crate) struct Probe;

impl TypedTool for Probe {
    const NAME: &'static str = "probe";
    const CAPS: Caps = Caps::READ_ONLY.served_as("probe");
    type Args = ProbeArgs;
    type Output = ProbeOutput;

    fn description(&self) -> &str {
        "Echo the text given."
    }
    async fn run(&self, args: ProbeArgs, _ctx: &ToolContext) -> Result<ProbeOutput, ToolError> {
        Ok(ProbeOutput {
            status: "ok",
            echo: args.text,
        })
    }
}

impl Builtin for Probe {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(Probe)
    }
}
