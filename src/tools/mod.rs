//! Tools the agent can call, and the scheduler that runs them (docs §2).
//!
//! A [`Tool`] declares its JSON-schema parameters and whether it is read-only
//! (read-only calls may run concurrently and are cancelled on timeout) and
//! repeatable (non-repeatable calls with identical arguments are answered from
//! the earlier success instead of running again). The built-in tools are
//! [`TypedTool`]s: typed arguments (their schema generated from the type)
//! and typed output.

pub mod approval;
mod approval_preview;
pub mod authorize;
pub mod background;
pub mod builtin;
pub mod events;
pub mod finalize;
pub mod guard;
pub mod invoke;
pub mod late;
pub mod manifest;
pub mod origin;
pub mod progress;
pub mod redact;
pub mod registry;
pub mod scheduler;
pub mod typed;

use std::path::PathBuf;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use approval::{ApprovalMode, ApprovalPolicy};
pub use authorize::{AuthCall, Authorizer, Denial, Verdict};
pub use background::{BackgroundNotice, BackgroundQueue};
pub use late::LateTools;
pub use manifest::{Access, Caps, Gate, Served};
pub use registry::Registry;
pub use scheduler::{CallOutcome, Scheduler, SchedulerConfig};
pub use typed::TypedTool;

/// Everything a call may need besides its arguments.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub call_id: String,
    pub session_id: String,
    /// The current run's directory; relative paths resolve here (docs §2.3).
    pub run_dir: PathBuf,
    /// The session's persistent workspace, shared by all its runs.
    pub workspace: PathBuf,
    /// Cancelled when the run is cancelled or a read-only call times out.
    /// Tools that spawn processes must kill them when it fires.
    pub cancel: CancellationToken,
    /// Where finished background work reports, scoped to this session.
    pub background: BackgroundQueue,
}

/// A context for unit tests: the run dir and workspace made, nothing else.
#[cfg(test)]
pub(crate) fn test_context(run_dir: PathBuf, workspace: PathBuf) -> ToolContext {
    for d in [&run_dir, &workspace] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    }
    ToolContext {
        call_id: "c".into(),
        session_id: "s".into(),
        run_dir,
        workspace,
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    }
}

pub type ToolResult = Result<String, ToolError>;

/// What a call answered: the text the model sees and, for a typed tool
/// ([`TypedTool`]), the same result as structured data.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolReply {
    pub text: String,
    pub output: Option<Value>,
}

/// A tool. Results are strings (usually JSON) handed to the model as-is, up
/// to the truncation limit.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> Value;
    /// JSON schema of the structured output, when it has one (a typed
    /// tool's `Output`): `vibedesk mcp serve` publishes it as the tool's
    /// `outputSchema` (docs §13.4).
    fn output_schema(&self) -> Option<Value> {
        None
    }
    /// Read-only tools run in parallel batches and are cancelled on timeout;
    /// others run alone and are never killed by the loop (docs §2.4).
    fn readonly(&self) -> bool {
        true
    }
    /// What it may do (docs §2.1): a built-in tool declares it
    /// ([`TypedTool::CAPS`]); any other says only whether it is read-only.
    fn caps(&self) -> Caps {
        Caps::of_readonly(self.readonly())
    }
    /// A non-repeatable tool that already succeeded with the same arguments in
    /// this run is not run again (docs §2.2, keyed on arguments: §12.2).
    fn repeatable(&self) -> bool {
        false
    }
    /// Per-tool deadline; `None` uses the scheduler's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// The properties a lean schema offers (docs §4.7); `None`: all.
    fn lean_properties(&self) -> Option<&[&str]> {
        None
    }
    /// The description a lean schema offers (docs §4.7): what a small
    /// model needs to pick the tool and read its answer, in a fraction of
    /// the tokens; `None` keeps the full one.
    fn lean_description(&self) -> Option<&str> {
        None
    }
    /// A successful result as a small model reads it best (docs §2.7):
    /// what answers the question, without the bulk (full provenance,
    /// artifact paths, long pages); `None` keeps it whole. The model sees
    /// it with a lean prompt; the trace and the UI keep the whole result.
    fn lean_result(&self, output: &Value) -> Option<Value> {
        let _ = output;
        None
    }
    /// Checks a call's arguments before anything runs (docs §2.2): by
    /// default the schema's required keys and top-level types. An `Err` is
    /// the `invalid_arguments` message the model reads.
    fn check_arguments(&self, args: &Value) -> Result<(), registry::InvalidArguments> {
        Ok(registry::check_arguments(&self.parameters(), args)?)
    }
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult>;
    /// [`Tool::call`] with the structured output, which the scheduler puts
    /// on `tool_call_finished`; a tool without one answers with text only.
    fn call_with_output<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolReply, ToolError>> {
        Box::pin(async move {
            self.call(args, ctx)
                .await
                .map(|text| ToolReply { text, output: None })
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("{message}")]
    Failed {
        code: Option<String>,
        message: String,
    },
    /// `path` is the path as the model gave it, so the message names what
    /// it asked for.
    #[error(transparent)]
    Io(#[from] crate::fsio::IoError),
}

impl ToolError {
    pub fn failed(code: &str, message: impl Into<String>) -> Self {
        ToolError::Failed {
            code: Some(code.to_string()),
            message: message.into(),
        }
    }

    /// An I/O failure on `path` (as the model named it).
    pub fn io(
        action: &'static str,
        path: impl Into<std::path::PathBuf>,
        source: std::io::Error,
    ) -> Self {
        ToolError::Io(crate::fsio::IoError::new(action, path, source))
    }

    pub fn code(&self) -> &str {
        match self {
            ToolError::InvalidArguments(_) => "invalid_arguments",
            ToolError::Failed { code, .. } => code.as_deref().unwrap_or("tool_error"),
            ToolError::Io(_) => "io_error",
        }
    }

    /// The structured error the model sees: `{"status":"error", ...}`.
    pub fn to_result_json(&self, tool: &str) -> String {
        json!({
            "status": "error",
            "tool": tool,
            "error_code": self.code(),
            "error": self.to_string(),
        })
        .to_string()
    }
}
