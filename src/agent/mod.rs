//! One research run: the ReAct loop, its events, the context it sends, the
//! final-answer check and the compaction hook.

pub mod arguments;
pub mod attribution;
pub mod compaction;
pub mod config;
pub mod context;
pub mod events;
pub mod figures;
pub mod grounding;
pub mod input;
pub mod plan;
pub mod recall;
pub mod repeats;
pub mod replies;
pub mod run_loop;
pub mod tally;
pub mod text_tools;
pub mod tool_choice;
pub mod traced;
pub mod usage;
pub mod watchdog;

pub use config::LoopConfig;
pub use events::{AgentEvent, EventSink};
pub use run_loop::{Loop, LoopDeps, RunOutcome, RunRequest};

/// Registers the tools the agent itself provides (the `compact` tool).
pub fn register_agent_tools(
    registry: &mut crate::tools::Registry,
) -> Result<(), crate::tools::registry::DuplicateTool> {
    registry.register(std::sync::Arc::new(
        crate::tools::builtin::compact::CompactTool,
    ))
}
