//! Events of tool batches. The agent re-emits them inside `AgentEvent`
//! unchanged (same `type` names), so tools need not know about the agent.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchMode {
    /// Consecutive read-only calls, run concurrently (at most 8 at a time).
    Parallel,
    /// One call at a time (write tools, unknown tools, lone calls).
    Serial,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    Ok,
    Error,
    Timeout,
    Cancelled,
    /// Not executed: an identical non-repeatable call already succeeded.
    Skipped,
    /// Not executed: the authorization hook refused it.
    Denied,
}

impl ToolCallStatus {
    /// The serialised name (`ok`, `timeout`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::Ok => "ok",
            ToolCallStatus::Error => "error",
            ToolCallStatus::Timeout => "timeout",
            ToolCallStatus::Cancelled => "cancelled",
            ToolCallStatus::Skipped => "skipped",
            ToolCallStatus::Denied => "denied",
        }
    }
}

/// One call as announced with its batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchCall {
    pub call_id: String,
    pub tool: String,
    /// Arguments with secrets masked (the display sink of
    /// [`super::redact::Sink`]), each string value cut to 200 chars.
    pub args: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolEvent {
    ToolBatchStarted {
        iter: u64,
        batch: u32,
        mode: BatchMode,
        calls: Vec<BatchCall>,
    },
    ToolCallStarted {
        iter: u64,
        call_id: String,
        tool: String,
        args: serde_json::Value,
        readonly: bool,
        timeout_s: Option<f64>,
    },
    ToolHeartbeat {
        call_id: String,
        tool: String,
        elapsed_s: f64,
        since_progress_s: f64,
    },
    ToolProgress {
        call_id: String,
        tool: String,
        stage: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        current: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        message: String,
        elapsed_s: f64,
    },
    /// A write tool ran past its deadline. It is not killed; this only warns.
    ToolTimeoutWarning {
        call_id: String,
        tool: String,
        elapsed_s: f64,
        timeout_s: f64,
    },
    /// The approval policy's decision on one call (docs §2.14.3), before
    /// its batch starts.
    Approval {
        iter: u64,
        call_id: String,
        #[serde(flatten)]
        approval: super::authorize::ApprovalRecord,
    },
    ToolCallFinished {
        iter: u64,
        call_id: String,
        tool: String,
        status: ToolCallStatus,
        elapsed_ms: u64,
        /// First 200 chars of the redacted result.
        preview: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<String>,
        /// A typed tool's whole result as JSON, secrets masked as in the
        /// preview: the data behind the text the model sees. Absent when
        /// the call failed with an error or did not run, and for tools
        /// without typed output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<serde_json::Value>,
    },
    ToolBatchFinished {
        iter: u64,
        batch: u32,
        elapsed_ms: u64,
    },
}

/// Where tool events go.
pub type ToolEventSink = Arc<dyn Fn(ToolEvent) + Send + Sync>;
