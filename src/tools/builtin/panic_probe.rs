//! A tool that panics, for the tests of the panic boundary (docs §2.4)
//! only: compiled into debug builds alone, and registered only when
//! `VIBEDESK_TEST_PANIC_TOOL` is set ([`register_if_asked`]), so the real
//! binary the end-to-end tests drive (`vibedesk run`, `mcp serve`) can be
//! made to meet a panicking tool. Never in the manifest, never in a release
//! build.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tools::{Caps, Registry, ToolContext, ToolError, TypedTool};

/// The environment variable that registers it (debug builds only).
pub const ENV: &str = "VIBEDESK_TEST_PANIC_TOOL";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PanicArgs {
    /// Where to panic: "task" (the call's own task, the default) or
    /// "blocking" (a blocking thread the call waits for)
    #[serde(default)]
    on: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PanicOutput {
    status: &'static str,
}

pub struct PanicProbe;

impl TypedTool for PanicProbe {
    const NAME: &'static str = "test_panic";
    const CAPS: Caps = Caps::READ_ONLY.served_as("test_panic");
    type Args = PanicArgs;
    type Output = PanicOutput;

    fn description(&self) -> &str {
        "Test only: panics."
    }
    #[allow(clippy::panic)]
    async fn run(&self, args: PanicArgs, _ctx: &ToolContext) -> Result<PanicOutput, ToolError> {
        if args.on.as_deref() == Some("blocking") {
            crate::tools::guard::compute(Self::NAME, || -> () {
                panic!("test_panic on a blocking thread")
            })
            .await?;
        }
        panic!("test_panic was called")
    }
}

/// Registers [`PanicProbe`] when [`ENV`] is set to `1`.
pub fn register_if_asked(registry: &mut Registry) {
    if std::env::var(ENV).is_ok_and(|v| v == "1") {
        let _ = registry.register(std::sync::Arc::new(PanicProbe));
    }
}
